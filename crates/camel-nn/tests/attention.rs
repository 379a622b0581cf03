//! Attention, the transformer block, positional encodings, buffers and ModuleList: attention
//! equals a plain composition of ops on every device, gradchecks w.r.t. input and weights,
//! causality, the key/value cache, buffers in state dicts, nanoGPT parameter names, and errors.

use camel_nn::{
    gradcheck, load_safetensors, save_safetensors, testing::devices, AttentionOptions,
    AttentionPath, Block, BlockOptions, Device, Error, GradcheckOptions, KvCache, Module,
    ModuleList, MultiHeadAttention, PositionalEncoding, Result, Sequential, StateError, Tensor,
};

/// Held by the tests that draw from the process-wide generator (parameters initialized without
/// a seed, dropout), so that a `manual_seed` and the forward pass after it see no draw of
/// another test running beside them.
fn global_rng() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn attn_on(n_embd: usize, n_head: usize, causal: bool, dev: Device) -> MultiHeadAttention {
    MultiHeadAttention::with_options(
        n_embd,
        n_head,
        AttentionOptions {
            causal,
            seed: Some(7),
            device: dev,
            ..Default::default()
        },
    )
    .unwrap()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, |m, d| if d.is_nan() { f32::NAN } else { m.max(d) })
}

/// The attention written as plain ops: one matmul to q | k | v, heads by reshape/transpose,
/// `q · kᵀ · scale`, an additive −inf mask, softmax, `· v`, merge, projection.
fn plain_attention(m: &MultiHeadAttention, x: &Tensor, causal: bool) -> Result<Tensor> {
    let (b, t, c) = (x.shape()[0], x.shape()[1], x.shape()[2]);
    let (h, d) = (m.n_head(), c / m.n_head());
    let qkv = x
        .matmul_t(&m.c_attn.weight.tensor(), false, true)?
        .add(&m.c_attn.bias.as_ref().unwrap().tensor())?;
    let head = |i: usize| -> Result<Tensor> {
        qkv.narrow(2, i * c, c)?
            .contiguous()?
            .reshape(&[b, t, h, d])?
            .transpose(1, 2)?
            .contiguous()
    };
    let (q, k, v) = (head(0)?, head(1)?, head(2)?);
    let mut att = q
        .matmul(&k.transpose(-2, -1)?)?
        .mul_scalar(1.0 / (d as f32).sqrt())?;
    if causal {
        let mask: Vec<f32> = (0..t * t)
            .map(|e| {
                if e % t > e / t {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
            .collect();
        att = att.add(&Tensor::from_vec(mask, &[t, t], x.device())?)?;
    }
    let y = att
        .softmax()?
        .matmul(&v)?
        .transpose(1, 2)?
        .contiguous()?
        .reshape(&[b, t, c])?;
    y.matmul_t(&m.c_proj.weight.tensor(), false, true)?
        .add(&m.c_proj.bias.as_ref().unwrap().tensor())
}

#[test]
fn attention_equals_a_plain_composition_of_ops() -> Result<()> {
    // awkward sizes: T = 1, 7, 33; 3 heads of 4
    for dev in devices() {
        for causal in [true, false] {
            let m = attn_on(12, 3, causal, dev);
            for t in [1usize, 7, 33] {
                let x = Tensor::randn_seeded(&[2, t, 12], t as u64, dev)?;
                let got = m.forward(&x)?;
                assert_eq!(got.shape(), &[2, t, 12]);
                assert_eq!(got.device(), dev);
                let want = plain_attention(&m, &x, causal)?;
                let diff = max_diff(&got.to_vec()?, &want.to_vec()?);
                assert!(diff <= 1e-5, "{dev} causal {causal} T {t}: {diff}");
            }
        }
    }
    // the same weights give the same output on every device
    let x = Tensor::randn_seeded(&[2, 9, 12], 1, Device::Cpu)?;
    let cpu = attn_on(12, 3, true, Device::Cpu).forward(&x)?.to_vec()?;
    for dev in devices() {
        let y = attn_on(12, 3, true, dev).forward(&x.to(dev)?)?.to_vec()?;
        assert!(max_diff(&y, &cpu) <= 1e-5, "{dev} vs cpu");
    }
    Ok(())
}

#[test]
fn gradcheck_attention_wrt_input() -> Result<()> {
    for dev in devices() {
        for causal in [true, false] {
            let m = attn_on(4, 2, causal, dev);
            let x = Tensor::randn_seeded(&[2, 3, 4], 3, dev)?;
            gradcheck(|xs| m.forward(&xs[0]), &[x], GradcheckOptions::default())
                .unwrap_or_else(|e| panic!("{dev} causal {causal}: {e}"));
        }
    }
    Ok(())
}

/// Central differences of `Σ w ⊙ f()` w.r.t. every element of every parameter of `m`, against
/// autograd's gradients.
fn gradcheck_parameters(m: &dyn Module, f: &dyn Fn() -> Result<Tensor>, what: &str) -> Result<()> {
    let out = f()?;
    let w = Tensor::randn_seeded(out.shape(), 0x5eed, out.device())?;
    let wv = w.to_vec()?;
    m.zero_grad();
    out.mul(&w)?.sum()?.backward()?;
    let loss = || -> Result<f64> {
        let o = camel_nn::no_grad(f)?.to_vec()?;
        Ok(o.iter().zip(&wv).map(|(&a, &b)| a as f64 * b as f64).sum())
    };
    let eps = 1e-3f32;
    for (name, p) in m.named_parameters() {
        let analytic = p.grad().expect("a gradient").to_vec()?;
        let base = p.tensor().to_vec()?;
        let shape = p.tensor().shape().to_vec();
        for j in 0..base.len() {
            let mut v = base.clone();
            v[j] = base[j] + eps;
            p.set(&Tensor::from_vec(v.clone(), &shape, Device::Cpu)?)?;
            let up = loss()?;
            v[j] = base[j] - eps;
            p.set(&Tensor::from_vec(v, &shape, Device::Cpu)?)?;
            let down = loss()?;
            let numeric = ((up - down) / (2.0 * eps as f64)) as f32;
            let err = (analytic[j] - numeric).abs();
            assert!(
                err <= 5e-3 + 2e-2 * numeric.abs(),
                "{what}: {name}[{j}]: analytic {}, numeric {numeric}",
                analytic[j]
            );
        }
        p.set(&Tensor::from_vec(base, &shape, Device::Cpu)?)?;
    }
    Ok(())
}

#[test]
fn gradcheck_attention_and_block_wrt_weights() -> Result<()> {
    for dev in devices() {
        let m = attn_on(4, 2, true, dev);
        let x = Tensor::randn_seeded(&[2, 3, 4], 4, dev)?;
        gradcheck_parameters(&m, &|| m.forward(&x), &format!("attention on {dev}"))?;
        let block = Block::with_options(
            4,
            2,
            BlockOptions {
                seed: Some(3),
                device: dev,
                ..Default::default()
            },
        )?;
        gradcheck_parameters(&block, &|| block.forward(&x), &format!("block on {dev}"))?;
    }
    Ok(())
}

#[test]
fn changing_a_later_token_never_changes_an_earlier_output() -> Result<()> {
    let (t, c) = (7, 8);
    for dev in devices() {
        let m = attn_on(c, 2, true, dev);
        let block = Block::with_options(
            c,
            2,
            BlockOptions {
                seed: Some(1),
                device: dev,
                ..Default::default()
            },
        )?;
        let layers: [&dyn Module; 2] = [&m, &block];
        for layer in layers {
            let xv = Tensor::randn_seeded(&[1, t, c], 2, Device::Cpu)?.to_vec()?;
            let base = layer
                .forward(&Tensor::from_vec(xv.clone(), &[1, t, c], dev)?)?
                .to_vec()?;
            for changed in 1..t {
                let mut x2 = xv.clone();
                for v in &mut x2[changed * c..(changed + 1) * c] {
                    *v += 3.0;
                }
                let y = layer
                    .forward(&Tensor::from_vec(x2, &[1, t, c], dev)?)?
                    .to_vec()?;
                let before = max_diff(&y[..changed * c], &base[..changed * c]);
                assert!(
                    before <= 1e-6,
                    "{dev} {layer:?}: token {changed} moved earlier outputs by {before}"
                );
                let at = max_diff(&y[changed * c..], &base[changed * c..]);
                assert!(at > 1e-3, "{dev}: token {changed} changed nothing ({at})");
            }
        }
        // without the mask, earlier outputs do depend on later tokens
        let free = attn_on(c, 2, false, dev);
        let xv = Tensor::randn_seeded(&[1, t, c], 2, Device::Cpu)?.to_vec()?;
        let mut x2 = xv.clone();
        x2[(t - 1) * c] += 3.0;
        let a = free
            .forward(&Tensor::from_vec(xv, &[1, t, c], dev)?)?
            .to_vec()?;
        let b = free
            .forward(&Tensor::from_vec(x2, &[1, t, c], dev)?)?
            .to_vec()?;
        assert!(max_diff(&a[..c], &b[..c]) > 1e-6, "{dev}");
    }
    Ok(())
}

#[test]
fn forward_cached_step_by_step_equals_the_full_forward() -> Result<()> {
    let (b, t, c) = (2, 9, 12);
    for dev in devices() {
        let m = attn_on(c, 3, true, dev);
        let block = Block::with_options(
            c,
            3,
            BlockOptions {
                seed: Some(5),
                device: dev,
                ..Default::default()
            },
        )?;
        let x = Tensor::randn_seeded(&[b, t, c], 8, dev)?;
        for chunks in [vec![1; t], vec![4, 1, 3, 1]] {
            for (name, full, step) in [
                (
                    "attention",
                    m.forward(&x)?,
                    &(|x: &Tensor, cache: &mut KvCache| m.forward_cached(x, cache))
                        as &dyn Fn(&Tensor, &mut KvCache) -> Result<Tensor>,
                ),
                (
                    "block",
                    block.forward(&x)?,
                    &|x: &Tensor, cache: &mut KvCache| block.forward_cached(x, cache),
                ),
            ] {
                let mut cache = KvCache::new();
                assert!(cache.is_empty());
                let mut outs = Vec::new();
                let mut start = 0;
                for &n in &chunks {
                    outs.push(step(&x.narrow(1, start, n)?, &mut cache)?);
                    start += n;
                    assert_eq!(cache.len(), start);
                }
                let refs: Vec<&Tensor> = outs.iter().collect();
                let got = Tensor::cat(&refs, 1)?;
                let diff = max_diff(&got.to_vec()?, &full.to_vec()?);
                assert!(diff <= 1e-5, "{dev} {name} chunks {chunks:?}: {diff}");
            }
        }
    }
    Ok(())
}

#[test]
fn the_cache_and_block_size_limits_are_errors_that_change_nothing() -> Result<()> {
    for dev in devices() {
        let m = MultiHeadAttention::with_options(
            8,
            2,
            AttentionOptions {
                block_size: Some(4),
                device: dev,
                ..Default::default()
            },
        )?;
        let e = m.forward(&Tensor::zeros(&[1, 5, 8], dev)?).unwrap_err();
        assert!(e.to_string().contains("block_size = 4"), "{e}");
        let mut cache = KvCache::new();
        m.forward_cached(&Tensor::zeros(&[1, 3, 8], dev)?, &mut cache)?;
        let e = m
            .forward_cached(&Tensor::zeros(&[1, 2, 8], dev)?, &mut cache)
            .unwrap_err();
        assert!(e.to_string().contains("block_size = 4"), "{e}");
        assert_eq!(cache.len(), 3);
        // another batch size
        let e = m
            .forward_cached(&Tensor::zeros(&[2, 1, 8], dev)?, &mut cache)
            .unwrap_err();
        assert!(e.to_string().contains("batch"), "{e}");
        assert_eq!(cache.len(), 3);
        m.forward_cached(&Tensor::zeros(&[1, 1, 8], dev)?, &mut cache)?;
        assert_eq!(cache.len(), 4);
        cache.clear();
        assert_eq!(cache.len(), 0);
    }
    Ok(())
}

#[test]
fn bad_sizes_and_inputs_are_errors_naming_them() -> Result<()> {
    let _rng = global_rng();
    let e = MultiHeadAttention::new(10, 3).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("n_embd = 10") && msg.contains("n_head = 3"),
        "{msg}"
    );
    let e = Block::new(10, 4).unwrap_err();
    assert!(e.to_string().contains("n_head = 4"), "{e}");
    assert!(MultiHeadAttention::new(8, 0).is_err());
    let e = Block::with_options(
        8,
        2,
        BlockOptions {
            dropout: 1.5,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("dropout"), "{e}");
    let m = MultiHeadAttention::new(8, 2)?;
    for shape in [vec![5, 8], vec![1, 5, 6], vec![1, 0, 8], vec![1, 1, 5, 8]] {
        let e = m.forward(&Tensor::zeros(&shape, Device::Cpu)?).unwrap_err();
        assert!(
            matches!(e, Error::BadShape { .. }) && e.to_string().contains("n_embd = 8"),
            "{shape:?}: {e}"
        );
    }
    let pos = PositionalEncoding::learned(4, 8)?;
    let e = pos
        .forward(&Tensor::zeros(&[1, 5, 8], Device::Cpu)?)
        .unwrap_err();
    assert!(e.to_string().contains("block_size = 4"), "{e}");
    let e = pos
        .forward_at(&Tensor::zeros(&[1, 1, 8], Device::Cpu)?, 4)
        .unwrap_err();
    assert!(e.to_string().contains("block_size = 4"), "{e}");
    assert!(pos
        .forward(&Tensor::zeros(&[1, 2, 7], Device::Cpu)?)
        .is_err());
    Ok(())
}

#[test]
fn block_has_the_nanogpt_parameter_names_and_shapes() -> Result<()> {
    let _rng = global_rng();
    let c = 8;
    let block = Block::new(c, 2)?;
    let got: Vec<(String, Vec<usize>)> = block
        .named_parameters()
        .into_iter()
        .map(|(n, p)| (n, p.tensor().shape().to_vec()))
        .collect();
    let want: Vec<(&str, Vec<usize>)> = vec![
        ("ln_1.weight", vec![c]),
        ("ln_1.bias", vec![c]),
        ("attn.c_attn.weight", vec![3 * c, c]),
        ("attn.c_attn.bias", vec![3 * c]),
        ("attn.c_proj.weight", vec![c, c]),
        ("attn.c_proj.bias", vec![c]),
        ("ln_2.weight", vec![c]),
        ("ln_2.bias", vec![c]),
        ("mlp.c_fc.weight", vec![4 * c, c]),
        ("mlp.c_fc.bias", vec![4 * c]),
        ("mlp.c_proj.weight", vec![c, 4 * c]),
        ("mlp.c_proj.bias", vec![c]),
    ];
    let want: Vec<(String, Vec<usize>)> = want.into_iter().map(|(n, s)| (n.into(), s)).collect();
    assert_eq!(got, want);
    // without biases the linear layers have none (the LayerNorms keep theirs)
    let nb = Block::with_options(
        c,
        2,
        BlockOptions {
            bias: false,
            ..Default::default()
        },
    )?;
    let names: Vec<String> = nb.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "ln_1.weight",
            "ln_1.bias",
            "attn.c_attn.weight",
            "attn.c_proj.weight",
            "ln_2.weight",
            "ln_2.bias",
            "mlp.c_fc.weight",
            "mlp.c_proj.weight"
        ]
    );
    // shapes through the block, and the block equals its pre-LN definition
    for dev in devices() {
        let block = Block::with_options(
            c,
            2,
            BlockOptions {
                seed: Some(9),
                device: dev,
                ..Default::default()
            },
        )?;
        let x = Tensor::randn_seeded(&[3, 5, c], 1, dev)?;
        let y = block.forward(&x)?;
        assert_eq!(y.shape(), &[3, 5, c]);
        let h = x.add(&block.attn.forward(&block.ln_1.forward(&x)?)?)?;
        let mlp = block
            .mlp
            .c_proj
            .forward(&block.mlp.c_fc.forward(&block.ln_2.forward(&h)?)?)?;
        let want = h.add(&mlp)?;
        assert!(max_diff(&y.to_vec()?, &want.to_vec()?) <= 1e-6, "{dev}");
        // the MLP's hidden layer is GELU of c_fc
        let z = block.ln_2.forward(&h)?;
        let hidden = z
            .matmul_t(&block.mlp.c_fc.weight.tensor(), false, true)?
            .add(&block.mlp.c_fc.bias.as_ref().unwrap().tensor())?
            .gelu()?;
        let fc = block.mlp.c_fc.forward(&z)?;
        assert!(max_diff(&fc.to_vec()?, &hidden.to_vec()?) <= 1e-5, "{dev}");
    }
    Ok(())
}

#[test]
fn module_list_names_children_by_index() -> Result<()> {
    let _rng = global_rng();
    let blocks: ModuleList<Block> = (0..2).map(|_| Block::new(8, 2)).collect::<Result<_>>()?;
    assert_eq!(blocks.len(), 2);
    let names: Vec<String> = blocks
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names.len(), 24);
    assert_eq!(names[0], "0.ln_1.weight");
    assert_eq!(names[2], "0.attn.c_attn.weight");
    assert_eq!(names[12], "1.ln_1.weight");
    assert_eq!(names[23], "1.mlp.c_proj.bias");
    // items keep their own type and methods
    let mut cache = KvCache::new();
    let x = Tensor::zeros(&[1, 2, 8], Device::Cpu)?;
    assert_eq!(
        blocks[1].forward_cached(&x, &mut cache)?.shape(),
        &[1, 2, 8]
    );
    // a list has no forward of its own
    let e = blocks.forward(&x).unwrap_err();
    assert!(e.to_string().contains("ModuleList"), "{e}");
    // train / eval reach every item
    blocks.eval();
    assert!(blocks
        .iter()
        .all(|b| !b.is_training() && !b.attn.is_training()));
    blocks.train();
    assert!(blocks[0].mlp.is_training());
    // a mixed list, nested in a Sequential
    let mut mixed: ModuleList = ModuleList::new();
    mixed.push(Box::new(camel_nn::Linear::new(3, 3)?));
    mixed.push(Box::new(PositionalEncoding::sinusoidal(4, 3)?));
    let seq = Sequential::new().add(mixed);
    let params: Vec<String> = seq.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(params, ["0.0.weight", "0.0.bias"]);
    let buffers: Vec<String> = seq.named_buffers().into_iter().map(|(n, _)| n).collect();
    assert_eq!(buffers, ["0.1.pe"]);
    assert!(
        format!("{seq:?}").contains("ModuleList(\n    (0): Linear"),
        "{seq:?}"
    );
    Ok(())
}

#[test]
fn sinusoidal_table_is_a_buffer_with_the_formula() -> Result<()> {
    let (bs, c) = (11, 7);
    let pos = PositionalEncoding::sinusoidal(bs, c)?;
    assert!(pos.named_parameters().is_empty());
    assert_eq!(pos.num_parameters(), 0);
    let table = pos.table().to_vec()?;
    for p in 0..bs {
        for j in 0..c {
            let angle = p as f64 / 10000f64.powf((j / 2 * 2) as f64 / c as f64);
            let want = if j % 2 == 0 { angle.sin() } else { angle.cos() };
            assert!((table[p * c + j] as f64 - want).abs() < 1e-6, "[{p}, {j}]");
        }
    }
    for dev in devices() {
        pos.to(dev)?;
        assert_eq!(pos.named_buffers()[0].1.tensor().device(), dev);
        let x = Tensor::randn_seeded(&[2, 5, c], 3, dev)?;
        let y = pos.forward_at(&x, 3)?.to_vec()?;
        let xv = x.to_vec()?;
        for (i, v) in y.iter().enumerate() {
            let (t, j) = ((i / c) % 5, i % c);
            assert_eq!(*v, xv[i] + table[(t + 3) * c + j], "{dev} element {i}");
        }
    }
    // the learned table is a parameter that gets gradients
    for dev in devices() {
        let pos = PositionalEncoding::learned(6, 4)?;
        pos.to(dev)?;
        assert_eq!(pos.named_parameters()[0].0, "weight");
        assert!(pos.named_buffers().is_empty());
        let x = Tensor::zeros(&[3, 4, 4], dev)?;
        pos.forward(&x)?.sum()?.backward()?;
        let g = pos.named_parameters()[0].1.grad().unwrap().to_vec()?;
        // 3 batch rows add to each of the first 4 positions; positions 4, 5 unused
        assert!(
            g[..16].iter().all(|&v| v == 3.0) && g[16..].iter().all(|&v| v == 0.0),
            "{dev}: {g:?}"
        );
    }
    Ok(())
}

#[test]
fn buffers_are_in_state_dicts_and_round_trip_bit_exactly() -> Result<()> {
    let _rng = global_rng();
    for dev in devices() {
        let model = Sequential::new()
            .add(PositionalEncoding::sinusoidal(5, 6)?)
            .add(camel_nn::Linear::new(6, 6)?);
        model.to(dev)?;
        let state = model.state_dict();
        let keys: Vec<&String> = state.keys().collect();
        assert_eq!(keys, ["0.pe", "1.bias", "1.weight"]);
        assert_eq!(state["0.pe"].device(), dev);
        // a buffer changed in the file comes back bit for bit
        let odd: Vec<f32> = (0..30)
            .map(|i| f32::from_bits(0x3f80_0001 + i * 7919))
            .collect();
        let mut saved = state.clone();
        saved.insert("0.pe".into(), Tensor::from_vec(odd.clone(), &[5, 6], dev)?);
        let path = std::env::temp_dir().join(format!(
            "camel-attn-{}-{}.safetensors",
            std::process::id(),
            dev.is_cuda()
        ));
        save_safetensors(&saved, None, &path).unwrap();
        let (loaded, _) = load_safetensors(&path, dev).unwrap();
        let _ = std::fs::remove_file(&path);
        let other = Sequential::new()
            .add(PositionalEncoding::sinusoidal(5, 6)?)
            .add(camel_nn::Linear::new(6, 6)?);
        other.to(dev)?;
        other.load_state_dict(&loaded).unwrap();
        let back = other.state_dict();
        for (name, t) in &back {
            let a: Vec<u32> = t.to_vec()?.iter().map(|v| v.to_bits()).collect();
            let b: Vec<u32> = saved[name].to_vec()?.iter().map(|v| v.to_bits()).collect();
            assert_eq!(a, b, "{dev} {name}");
            assert_eq!(t.device(), dev);
        }
        // a missing buffer is named, and nothing changes
        let mut missing = saved.clone();
        missing.remove("0.pe");
        let fresh = Sequential::new()
            .add(PositionalEncoding::sinusoidal(5, 6)?)
            .add(camel_nn::Linear::new(6, 6)?);
        let before = fresh.state_dict()["1.weight"].to_vec()?;
        match fresh.load_state_dict(&missing) {
            Err(StateError::Missing(v)) => assert_eq!(v, ["0.pe"]),
            other => panic!("{other:?}"),
        }
        assert_eq!(fresh.state_dict()["1.weight"].to_vec()?, before);
        // a buffer of the wrong shape is named
        let mut shaped = saved.clone();
        shaped.insert("0.pe".into(), Tensor::zeros(&[4, 6], dev)?);
        let e = fresh.load_state_dict(&shaped).unwrap_err();
        assert!(
            matches!(&e, StateError::Shape { name, .. } if name == "0.pe"),
            "{e}"
        );
    }
    Ok(())
}

#[test]
fn buffer_is_a_shared_debug_printable_handle() -> Result<()> {
    let b = camel_nn::Buffer::new(Tensor::ones(&[2], Device::Cpu)?.requires_grad_(true)?);
    assert!(!b.tensor().requires_grad());
    let c = b.clone();
    c.set(&Tensor::zeros(&[2], Device::Cpu)?)?;
    assert_eq!(b.tensor().to_vec()?, [0.0, 0.0]);
    assert_eq!(b.id(), c.id());
    assert!(format!("{b:?}").contains("Buffer"));
    assert!(b.set(&Tensor::zeros(&[3], Device::Cpu)?).is_err());
    Ok(())
}

#[test]
fn dropout_applies_in_training_only() -> Result<()> {
    let _rng = global_rng();
    let opts = |dropout: f32, dev: Device| BlockOptions {
        dropout,
        seed: Some(4),
        device: dev,
        ..Default::default()
    };
    for dev in devices() {
        let x = Tensor::randn_seeded(&[2, 6, 8], 1, dev)?;
        let plain = Block::with_options(8, 2, opts(0.0, dev))?
            .forward(&x)?
            .to_vec()?;
        let block = Block::with_options(8, 2, opts(0.3, dev))?;
        // eval mode: the identity, the same output as without dropout
        block.eval();
        assert_eq!(block.forward(&x)?.to_vec()?, plain, "{dev}");
        let mut cache = KvCache::new();
        assert!(max_diff(&block.forward_cached(&x, &mut cache)?.to_vec()?, &plain) <= 1e-5);
        // training mode: dropped, and the same for the same seed
        block.train();
        camel_nn::manual_seed(11);
        let a = block.forward(&x)?.to_vec()?;
        camel_nn::manual_seed(11);
        let b = block.forward(&x)?.to_vec()?;
        assert_eq!(a, b, "{dev}: one seed, one mask");
        assert!(
            max_diff(&a, &plain) > 1e-3,
            "{dev}: dropout changed nothing"
        );
        // and gradients flow through the dropped attention
        let xl = x.detach().requires_grad_(true)?;
        block.forward(&xl)?.sum()?.backward()?;
        assert!(xl.grad().unwrap().to_vec()?.iter().all(|v| v.is_finite()));
    }
    Ok(())
}

/// On the GPU the fused kernel runs where it applies, and gives the naive path's output and
/// gradients (input and weights), for the full sequence and for a key/value cache fed in
/// chunks; everywhere else [`MultiHeadAttention::path`] names why it does not run.
#[test]
fn the_fused_path_matches_the_naive_one_and_says_when_it_runs() -> Result<()> {
    for dev in devices() {
        // head dims 32, 64 and 128
        for (c, h, causal) in [(64, 2, true), (256, 4, false), (256, 2, true)] {
            let make = |fused: bool, dropout: f32| {
                MultiHeadAttention::with_options(
                    c,
                    h,
                    AttentionOptions {
                        causal,
                        dropout,
                        seed: Some(3),
                        device: dev,
                        fused,
                        ..Default::default()
                    },
                )
            };
            let (mf, mn) = (make(true, 0.0)?, make(false, 0.0)?);
            let x = Tensor::randn_seeded(&[2, 37, c], 5, dev)?;
            assert_eq!(
                mn.path(&x),
                AttentionPath::Naive("the fused kernel is switched off")
            );
            if !dev.is_cuda() {
                assert_eq!(
                    mf.path(&x),
                    AttentionPath::Naive("the CPU runs the reference")
                );
                continue;
            }
            assert_eq!(mf.path(&x), AttentionPath::Fused, "{c}/{h}");
            let (xf, xn) = (
                x.detach().requires_grad_(true)?,
                x.detach().requires_grad_(true)?,
            );
            let (yf, yn) = (mf.forward(&xf)?, mn.forward(&xn)?);
            let what = format!("{dev} C {c} heads {h} causal {causal}");
            let diff = max_diff(&yf.to_vec()?, &yn.to_vec()?);
            assert!(diff <= 2e-5, "{what}: forward {diff}");
            yf.square()?.sum()?.backward()?;
            yn.square()?.sum()?.backward()?;
            let grads = |m: &MultiHeadAttention, x: &Tensor| -> Result<Vec<Vec<f32>>> {
                Ok(vec![
                    x.grad().expect("x grad").to_vec()?,
                    m.c_attn.weight.grad().expect("w grad").to_vec()?,
                    m.c_proj.weight.grad().expect("w grad").to_vec()?,
                ])
            };
            for (i, (a, b)) in grads(&mf, &xf)?.iter().zip(&grads(&mn, &xn)?).enumerate() {
                let scale = b.iter().fold(1.0f32, |m, v| m.max(v.abs()));
                let diff = max_diff(a, b);
                assert!(
                    diff <= 1e-4 * scale,
                    "{what}: gradient {i} differs by {diff}"
                );
            }
            // generation: the cache fed in chunks through the fused kernel
            if causal {
                let mut cache = KvCache::new();
                let mut outs = Vec::new();
                for (start, n) in [(0, 5), (5, 1), (6, 31)] {
                    outs.push(mf.forward_cached(&x.narrow(1, start, n)?, &mut cache)?);
                }
                let got = Tensor::cat(&outs.iter().collect::<Vec<_>>(), 1)?;
                let diff = max_diff(&got.to_vec()?, &yn.to_vec()?);
                assert!(diff <= 2e-5, "{what}: cached {diff}");
            }
            // attention dropout runs inside the fused kernel in training (the training calls
            // differ: new attention and residual masks), none in eval mode, where the output is
            // the fused one without dropout
            let md = make(true, 0.1)?;
            assert_eq!(md.path(&x), AttentionPath::Fused, "{what}");
            let (d1, d2) = (md.forward(&x)?.to_vec()?, md.forward(&x)?.to_vec()?);
            assert_ne!(d1, d2, "{what}: two training calls share a mask");
            md.set_training(false);
            assert_eq!(md.path(&x), AttentionPath::Fused);
            let e = md.forward(&x)?.to_vec()?;
            assert_ne!(d1, e, "{what}: dropout changed nothing");
            assert!(
                max_diff(&e, &yf.to_vec()?) <= 2e-5,
                "{what}: eval mode drops"
            );
            // the reasons the fused kernel does not run
            let all = make(true, 1.0)?;
            assert_eq!(
                all.path(&x),
                AttentionPath::Naive("attention dropout of 1 (the fused kernel takes p < 1)")
            );
            // under autocast the fused kernel runs in bf16 and agrees with the naive bf16 path
            // within bf16's rounding (both round q, k, v and the probabilities; the naive one
            // also the scores)
            let (yf, yn) = camel_nn::autocast(camel_nn::DType::BF16, || -> Result<_> {
                assert_eq!(mf.path(&x), AttentionPath::Fused, "{what}");
                Ok((mf.forward(&x)?, mn.forward(&x)?))
            })??;
            let (yf, yn) = (yf.to_vec()?, yn.to_vec()?);
            let scale = yn.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let diff = max_diff(&yf, &yn);
            assert!(
                diff <= 3e-2 * scale,
                "{what}: bf16 forward {diff} (max {scale})"
            );
        }
        let m16 = attn_on(32, 2, true, dev);
        if dev.is_cuda() {
            let x = Tensor::zeros(&[1, 3, 32], dev)?;
            assert_eq!(
                m16.path(&x),
                AttentionPath::Naive("a head dim the fused kernel lacks")
            );
        }
    }
    Ok(())
}

//! AdamW parameter groups (per-group decoupled weight decay) against an f64 reference on every
//! device and every step of the optimizer ladder, CPU ≡ CUDA, one launch for all groups, and
//! the optimizers' state: a round trip through `state_dict` / `load_state_dict` continues with
//! bit-identical steps, and every bad state is an error that changes nothing.
//!
//! Gradients are exact: `loss = Σᵢ Σ pᵢ·cᵢ` gives `∂loss/∂pᵢ = cᵢ`.

use camel_nn::core::backend::ladder::Family;
use camel_nn::core::config;
use camel_nn::testing::{devices, for_each_step, gpu, launch_count};
use camel_nn::{
    Device, Embedding, LayerNorm, Linear, LinearOptions, Module, Parameter, Result, Sequential,
    StateDict, Tensor,
};
use camel_optim::{decay_groups, Adam, Optimizer, ParamGroup, Sgd};

/// Deterministic values in [-2, 2) (a small LCG, independent of camel's generator).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

/// 67 tensors (more than one multi-tensor table) of awkward sizes.
fn sizes() -> Vec<usize> {
    let base = [1usize, 7, 127, 1031, 4097, 2];
    (0..67).map(|i| base[i % base.len()]).collect()
}

/// Sets every parameter's gradient to `cs[i]` exactly.
fn set_grads(ps: &[Parameter], cs: &[Vec<f32>]) -> Result<()> {
    let dev = ps[0].tensor().device();
    let mut loss: Option<Tensor> = None;
    for (p, c) in ps.iter().zip(cs) {
        p.zero_grad();
        let c = Tensor::from_vec(c.clone(), &[c.len()], dev)?;
        let term = p.tensor().mul(&c)?.sum()?;
        loss = Some(match loss {
            Some(l) => l.add(&term)?,
            None => term,
        });
    }
    loss.expect("parameters").backward()
}

const WDS: [f32; 3] = [0.1, 0.0, 0.05];
const LR: f32 = 0.01;
const STEPS: usize = 3;

/// f64 AdamW (PyTorch's formula, betas 0.9 / 0.999, eps 1e-8) of one parameter.
fn adamw_ref(p0: &[f32], g: &[f32], wd: f64) -> Vec<f64> {
    let (b1, b2, eps, lr) = (0.9f64, 0.999f64, 1e-8f64, f64::from(LR));
    let mut p: Vec<f64> = p0.iter().map(|&x| f64::from(x)).collect();
    let mut m = vec![0.0; p.len()];
    let mut v = vec![0.0; p.len()];
    for t in 1..=STEPS as i32 {
        for i in 0..p.len() {
            let gi = f64::from(g[i]);
            p[i] -= lr * wd * p[i];
            m[i] = b1 * m[i] + (1.0 - b1) * gi;
            v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
            let mh = m[i] / (1.0 - b1.powi(t));
            let vh = v[i] / (1.0 - b2.powi(t));
            p[i] -= lr * mh / (vh.sqrt() + eps);
        }
    }
    p
}

/// Runs `STEPS` AdamW steps over three groups (decay 0.1, 0, 0.05; tensor i in group i % 3)
/// on `dev`; returns the parameters.
fn run_groups(dev: Device) -> Result<Vec<Vec<f32>>> {
    let sz = sizes();
    let ps: Vec<Parameter> = sz
        .iter()
        .enumerate()
        .map(|(i, &n)| Parameter::new(Tensor::from_vec(values(n, i as u64), &[n], dev)?))
        .collect::<Result<_>>()?;
    let cs: Vec<Vec<f32>> = sz
        .iter()
        .enumerate()
        .map(|(i, &n)| values(n, 1000 + i as u64))
        .collect();
    let groups: Vec<ParamGroup> = (0..3)
        .map(|k| ParamGroup {
            params: ps.iter().skip(k).step_by(3).cloned().collect(),
            weight_decay: WDS[k],
        })
        .collect();
    let mut opt = Adam::adamw_groups(groups, LR)?;
    for s in 0..STEPS {
        set_grads(&ps, &cs)?;
        let before = launch_count(dev);
        opt.step()?;
        // after the first step (which creates the moments) all groups are one launch per
        // multi-tensor table at the ladder's multi-tensor steps
        let launches = launch_count(dev) - before;
        if dev != Device::Cpu && s > 0 {
            let multi = config::step(Family::Optim).number() >= 2;
            let tables = sz.len().div_ceil(60) as u64;
            let want = if multi { tables } else { sz.len() as u64 };
            assert_eq!(launches, want, "step {s}");
        }
    }
    // the optimizer's order is group by group
    let mut out = vec![Vec::new(); ps.len()];
    for (i, p) in ps.iter().enumerate() {
        out[i] = p.tensor().to_vec()?;
    }
    Ok(out)
}

#[test]
fn adamw_groups_decay_only_their_parameters() -> Result<()> {
    let sz = sizes();
    let want: Vec<Vec<f64>> = sz
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            adamw_ref(
                &values(n, i as u64),
                &values(n, 1000 + i as u64),
                f64::from(WDS[i % 3]),
            )
        })
        .collect();
    for dev in devices() {
        for_each_step(Family::Optim, |step| {
            let got = run_groups(dev).unwrap();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                for (j, (&a, &b)) in g.iter().zip(w).enumerate() {
                    assert!(
                        (f64::from(a) - b).abs() <= 1e-5 * b.abs().max(1e-2),
                        "{dev:?} step {}: tensor {i} (decay {}) element {j}: {a}, want {b}",
                        step.name,
                        WDS[i % 3]
                    );
                }
            }
        });
    }
    // decay made a difference: the decayed and undecayed references differ
    let n = sz[0];
    assert_ne!(
        adamw_ref(&values(n, 0), &values(n, 1000), 0.1),
        adamw_ref(&values(n, 0), &values(n, 1000), 0.0)
    );
    Ok(())
}

#[test]
fn adamw_groups_cpu_matches_cuda() -> Result<()> {
    let Some(dev) = gpu() else { return Ok(()) };
    let cpu = run_groups(Device::Cpu)?;
    for_each_step(Family::Optim, |step| {
        let cuda = run_groups(dev).unwrap();
        for (a, b) in cpu.iter().flatten().zip(cuda.iter().flatten()) {
            assert!(
                (a - b).abs() <= 1e-6 * a.abs().max(1.0),
                "step {}: CPU {a}, CUDA {b}",
                step.name
            );
        }
    });
    Ok(())
}

#[test]
fn decay_groups_splits_by_rank_as_nanogpt() -> Result<()> {
    let lin = Linear::new(4, 3)?;
    let emb = Embedding::new(10, 4)?;
    let ln = LayerNorm::new(3)?;
    let mut named = lin.named_parameters();
    named.extend(emb.named_parameters());
    named.extend(ln.named_parameters());
    // a tied weight listed under a second name is taken once
    named.push(("lm_head.weight".into(), named[0].1.clone()));
    let groups = decay_groups(named, 0.1);
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].weight_decay, 0.1);
    assert_eq!(groups[1].weight_decay, 0.0);
    let ranks =
        |g: &ParamGroup| -> Vec<usize> { g.params.iter().map(|p| p.tensor().rank()).collect() };
    assert_eq!(ranks(&groups[0]), [2, 2]); // Linear weight, embedding table
    assert_eq!(ranks(&groups[1]), [1, 1, 1]); // Linear bias, LayerNorm weight and bias
    let opt = Adam::adamw_groups(groups, 1e-3)?;
    assert_eq!(opt.weight_decays(), [0.1, 0.1, 0.0, 0.0, 0.0]);
    Ok(())
}

#[test]
fn bad_groups_are_errors() -> Result<()> {
    let lin = Linear::new(2, 2)?;
    let ps = lin.parameters();
    let twice = vec![
        ParamGroup {
            params: ps.clone(),
            weight_decay: 0.1,
        },
        ParamGroup {
            params: ps[..1].to_vec(),
            weight_decay: 0.0,
        },
    ];
    let e = Adam::adamw_groups(twice, 1e-3).err().unwrap().to_string();
    assert!(e.contains("group 1"), "{e}");
    for wd in [-0.1, f32::NAN, f32::INFINITY] {
        let g = vec![ParamGroup {
            params: ps.clone(),
            weight_decay: wd,
        }];
        assert!(Adam::adamw_groups(g, 1e-3).is_err(), "{wd}");
    }
    Ok(())
}

// ------------------------------------------------------------------ optimizer state

fn model(dev: Device) -> Result<Sequential> {
    let o = |seed| LinearOptions {
        seed: Some(seed),
        ..Default::default()
    };
    let m = Sequential::new()
        .add(Linear::with_options(5, 7, o(1))?)
        .add(Linear::with_options(7, 3, o(2))?);
    m.to(dev)?;
    Ok(m)
}

fn train_step(m: &Sequential, opt: &mut dyn Optimizer, dev: Device) -> Result<()> {
    let x = Tensor::from_vec(values(4 * 5, 77), &[4, 5], dev)?;
    opt.zero_grad();
    m.forward(&x)?.square()?.sum()?.backward()?;
    opt.step()
}

fn params_of(m: &Sequential) -> Result<Vec<Vec<u32>>> {
    m.parameters()
        .iter()
        .map(|p| Ok(p.tensor().to_vec()?.iter().map(|x| x.to_bits()).collect()))
        .collect()
}

fn bits(state: &StateDict) -> Result<Vec<(String, Vec<u32>)>> {
    state
        .iter()
        .map(|(k, t)| Ok((k.clone(), t.to_vec()?.iter().map(|x| x.to_bits()).collect())))
        .collect()
}

type MakeOpt = fn(Vec<Parameter>) -> Result<Box<dyn Optimizer>>;

fn makers() -> Vec<(&'static str, MakeOpt)> {
    vec![
        ("adamw", |p| Ok(Box::new(Adam::adamw(p, 1e-2, 0.1)?))),
        ("adam", |p| Ok(Box::new(Adam::new(p, 1e-2)?))),
        ("sgd momentum", |p| {
            Ok(Box::new(Sgd::new(p, 1e-2)?.momentum(0.9)?))
        }),
        ("sgd", |p| Ok(Box::new(Sgd::new(p, 1e-2)?))),
    ]
}

#[test]
fn state_round_trip_continues_identically() -> Result<()> {
    for dev in devices() {
        for (name, make) in makers() {
            let a = model(dev)?;
            let mut oa = make(a.parameters())?;
            for _ in 0..3 {
                train_step(&a, oa.as_mut(), dev)?;
            }
            let saved_params = params_of(&a)?;
            let saved = oa.state_dict()?;
            let keys: Vec<&String> = saved.keys().collect();
            assert!(
                keys.iter().any(|k| *k == "state.0.step"),
                "{name}: {keys:?}"
            );
            if name.starts_with("adam") {
                assert!(saved.contains_key("state.3.exp_avg_sq"), "{name}: {keys:?}");
            }
            if name == "sgd momentum" {
                assert!(saved.contains_key("state.1.momentum_buffer"), "{name}");
            }
            assert_eq!(saved["state.2.step"].to_vec()?, [3.0]);
            // the state dict is a copy: further steps do not change it
            let saved_bits = bits(&saved)?;
            for _ in 0..2 {
                train_step(&a, oa.as_mut(), dev)?;
            }
            assert_eq!(bits(&saved)?, saved_bits, "{dev:?} {name}");

            // a fresh model and optimizer from the saved values take the same two steps
            let b = model(dev)?;
            for (p, v) in b.parameters().iter().zip(&saved_params) {
                let f: Vec<f32> = v.iter().map(|&x| f32::from_bits(x)).collect();
                p.set(&Tensor::from_vec(f, p.tensor().shape(), Device::Cpu)?)?;
            }
            let mut ob = make(b.parameters())?;
            ob.load_state_dict(&saved)?;
            assert_eq!(bits(&ob.state_dict()?)?, saved_bits, "{dev:?} {name}");
            for _ in 0..2 {
                train_step(&b, ob.as_mut(), dev)?;
            }
            assert_eq!(params_of(&b)?, params_of(&a)?, "{dev:?} {name}");
        }
    }
    Ok(())
}

#[test]
fn state_loads_across_devices() -> Result<()> {
    let Some(dev) = gpu() else { return Ok(()) };
    let a = model(Device::Cpu)?;
    let mut oa = Adam::new(a.parameters(), 1e-2)?;
    train_step(&a, &mut oa, Device::Cpu)?;
    let b = model(dev)?;
    let mut ob = Adam::new(b.parameters(), 1e-2)?;
    ob.load_state_dict(&oa.state_dict()?)?;
    let s = ob.state_dict()?;
    assert_eq!(s["state.0.exp_avg"].device(), dev);
    assert_eq!(bits(&s)?, bits(&oa.state_dict()?)?);
    Ok(())
}

#[test]
fn bad_states_are_errors_that_change_nothing() -> Result<()> {
    for dev in devices() {
        let a = model(dev)?;
        let mut opt = Adam::new(a.parameters(), 1e-2)?;
        train_step(&a, &mut opt, dev)?;
        let good = opt.state_dict()?;
        let before = bits(&good)?;
        let t = |v: Vec<f32>, shape: &[usize]| Tensor::from_vec(v, shape, dev);

        let mut cases: Vec<(&str, StateDict, &str)> = Vec::new();
        let mut s = good.clone();
        s.remove("state.1.step");
        cases.push(("missing step", s, "state.1.step"));
        let mut s = good.clone();
        s.remove("state.2.exp_avg_sq");
        cases.push(("half the buffers", s, "state.2.exp_avg_sq"));
        let mut s = good.clone();
        s.insert("state.9.step".into(), t(vec![1.0], &[1])?);
        cases.push(("unexpected", s, "state.9.step"));
        let mut s = good.clone();
        s.insert("state.0.exp_avg".into(), t(vec![0.0; 35], &[5, 7])?);
        cases.push(("wrong shape", s, "state.0.exp_avg"));
        let mut s = good.clone();
        s.insert("state.1.step".into(), t(vec![1.5], &[1])?);
        cases.push(("fractional step", s, "state.1.step"));
        let mut s = good.clone();
        s.insert("state.1.step".into(), t(vec![-1.0], &[1])?);
        cases.push(("negative step", s, "state.1.step"));
        let mut s = good.clone();
        s.insert(
            "state.3.exp_avg".into(),
            Tensor::from_vec_i64(vec![0; 3], &[3], dev)?,
        );
        cases.push(("wrong dtype", s, "state.3.exp_avg"));
        let sgd_state = {
            let mut o = Sgd::new(a.parameters(), 0.1)?.momentum(0.9)?;
            train_step(&a, &mut o, dev)?;
            o.state_dict()?
        };
        cases.push(("another optimizer's", sgd_state, "momentum_buffer"));

        let params = params_of(&a)?;
        for (what, s, entry) in cases {
            let e = opt.load_state_dict(&s).unwrap_err().to_string();
            assert!(
                e.contains(entry) && e.contains("load_state_dict"),
                "{dev:?} {what}: {e}"
            );
            assert_eq!(bits(&opt.state_dict()?)?, before, "{dev:?} {what}");
        }
        // the next step still continues from the good state
        let b = model(dev)?;
        for (p, v) in b.parameters().iter().zip(&params) {
            let f: Vec<f32> = v.iter().map(|&x| f32::from_bits(x)).collect();
            p.set(&Tensor::from_vec(f, p.tensor().shape(), Device::Cpu)?)?;
        }
        let mut ob = Adam::new(b.parameters(), 1e-2)?;
        ob.load_state_dict(&good)?;
        train_step(&a, &mut opt, dev)?;
        train_step(&b, &mut ob, dev)?;
        assert_eq!(params_of(&a)?, params_of(&b)?, "{dev:?}");
    }
    Ok(())
}

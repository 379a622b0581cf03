//! Integration tests of camel-nn: Linear against an f64 reference, initializers, errors,
//! Sequential naming and bookkeeping, gradcheck through a small network, activation modules.
//!
//! Device policy: every test body loops over [`devices`] (CPU always, CUDA when a GPU answers).

use camel_nn::init::Init;
use camel_nn::testing::devices;
use camel_nn::{
    cuda_available, gradcheck, Device, Error, Generator, GradcheckOptions, Linear, LinearOptions,
    Module, ReLU, Result, Sequential, Sigmoid, Tanh, Tensor, GELU,
};

fn assert_close(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        assert!(
            err <= tol * (1.0 + w.abs()),
            "{what}: element {i}: got {g}, want {w} (err {err:e})"
        );
    }
}

/// `x · Wᵀ + b` in f64 over the rows of `x` (`rows × in`), `W` is `out × in`.
fn linear_ref(x: &[f32], w: &[f32], b: Option<&[f32]>, inf: usize, outf: usize) -> Vec<f64> {
    let rows = x.len() / inf;
    let mut y = vec![0.0f64; rows * outf];
    for r in 0..rows {
        for o in 0..outf {
            let mut acc = b.map_or(0.0, |b| b[o] as f64);
            for i in 0..inf {
                acc += x[r * inf + i] as f64 * w[o * inf + i] as f64;
            }
            y[r * outf + o] = acc;
        }
    }
    y
}

fn linear_on(inf: usize, outf: usize, bias: bool, seed: u64, device: Device) -> Result<Linear> {
    Linear::with_options(
        inf,
        outf,
        LinearOptions {
            bias,
            seed: Some(seed),
            device,
            ..Default::default()
        },
    )
}

#[test]
fn linear_forward_2d_matches_reference() -> Result<()> {
    for dev in devices() {
        let (inf, outf) = (7, 5);
        let lin = linear_on(inf, outf, true, 3, dev)?;
        assert_eq!((lin.in_features(), lin.out_features()), (inf, outf));
        let x = Tensor::randn_seeded(&[9, inf], 11, dev)?;
        let y = lin.forward(&x)?;
        assert_eq!(y.shape(), &[9, outf]);
        let w = lin.weight.tensor().to_vec()?;
        let b = lin.bias.as_ref().unwrap().tensor().to_vec()?;
        assert_eq!(lin.weight.tensor().shape(), &[outf, inf]);
        let want = linear_ref(&x.to_vec()?, &w, Some(&b), inf, outf);
        assert_close(&y.to_vec()?, &want, 1e-5, &format!("linear 2-D on {dev}"));
    }
    Ok(())
}

#[test]
fn linear_forward_3d_matches_reference() -> Result<()> {
    for dev in devices() {
        let (inf, outf) = (6, 4);
        let lin = linear_on(inf, outf, true, 8, dev)?;
        let x = Tensor::randn_seeded(&[2, 3, inf], 12, dev)?;
        let y = lin.forward(&x)?;
        assert_eq!(y.shape(), &[2, 3, outf]);
        let w = lin.weight.tensor().to_vec()?;
        let b = lin.bias.as_ref().unwrap().tensor().to_vec()?;
        let want = linear_ref(&x.to_vec()?, &w, Some(&b), inf, outf);
        assert_close(&y.to_vec()?, &want, 1e-5, &format!("linear 3-D on {dev}"));
    }
    Ok(())
}

#[test]
fn linear_without_bias() -> Result<()> {
    for dev in devices() {
        let lin = linear_on(5, 3, false, 4, dev)?;
        assert!(lin.bias.is_none());
        let names: Vec<String> = lin.named_parameters().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["weight"]);
        assert_eq!(lin.num_parameters(), 15);
        let x = Tensor::randn_seeded(&[4, 5], 2, dev)?;
        let y = lin.forward(&x)?;
        let want = linear_ref(&x.to_vec()?, &lin.weight.tensor().to_vec()?, None, 5, 3);
        assert_close(
            &y.to_vec()?,
            &want,
            1e-5,
            &format!("linear no bias on {dev}"),
        );
    }
    Ok(())
}

#[test]
fn init_bounds() -> Result<()> {
    let (fan_in, fan_out) = (50usize, 30usize);
    let shape = [fan_out, fan_in];
    let cases = [
        (Init::KaimingUniform, (6.0 / fan_in as f64).sqrt()),
        (
            Init::XavierUniform,
            (6.0 / (fan_in + fan_out) as f64).sqrt(),
        ),
        (Init::TorchDefault, 1.0 / (fan_in as f64).sqrt()),
    ];
    for (init, bound) in cases {
        let v = init
            .tensor(&shape, fan_in, fan_out, &mut Generator::new(7), Device::Cpu)?
            .to_vec()?;
        assert_eq!(v.len(), fan_in * fan_out);
        let max = v.iter().fold(0.0f64, |m, &x| m.max((x as f64).abs()));
        assert!(max <= bound, "{init:?}: |w| max {max} > bound {bound}");
        // 1500 uniform samples: the extremes come close to the bound, the mean close to 0.
        assert!(max > 0.9 * bound, "{init:?}: |w| max {max} ≪ bound {bound}");
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        assert!(mean.abs() < 0.1 * bound, "{init:?}: mean {mean}");
    }
    // Kaiming normal: std √(2/fan_in).
    let v = Init::KaimingNormal
        .tensor(&[200, 100], 100, 200, &mut Generator::new(1), Device::Cpu)?
        .to_vec()?;
    let var = v.iter().map(|&x| (x as f64).powi(2)).sum::<f64>() / v.len() as f64;
    assert!(
        (var.sqrt() / (2.0f64 / 100.0).sqrt() - 1.0).abs() < 0.05,
        "std {}",
        var.sqrt()
    );
    let z = Init::Zeros
        .tensor(&[3, 4], 4, 3, &mut Generator::new(1), Device::Cpu)?
        .to_vec()?;
    assert!(z.iter().all(|&x| x == 0.0));
    Ok(())
}

#[test]
fn linear_init_within_kaiming_bound() -> Result<()> {
    let lin = Linear::new(64, 32)?;
    let b = (6.0f32 / 64.0).sqrt();
    assert!(lin.weight.tensor().to_vec()?.iter().all(|w| w.abs() <= b));
    let bb = 1.0 / 8.0f32;
    let bias = lin.bias.as_ref().unwrap().tensor().to_vec()?;
    assert!(
        bias.iter().all(|w| w.abs() <= bb),
        "bias outside ±1/√fan_in"
    );
    Ok(())
}

#[test]
fn init_is_seeded() -> Result<()> {
    let a = linear_on(10, 6, true, 42, Device::Cpu)?;
    let b = linear_on(10, 6, true, 42, Device::Cpu)?;
    let c = linear_on(10, 6, true, 43, Device::Cpu)?;
    let wa = a.weight.tensor().to_vec()?;
    assert_eq!(wa, b.weight.tensor().to_vec()?);
    assert_eq!(
        a.bias.as_ref().unwrap().tensor().to_vec()?,
        b.bias.as_ref().unwrap().tensor().to_vec()?
    );
    assert_ne!(wa, c.weight.tensor().to_vec()?);
    assert_ne!(
        a.bias.as_ref().unwrap().tensor().to_vec()?,
        c.bias.as_ref().unwrap().tensor().to_vec()?
    );
    for init in [Init::XavierUniform, Init::KaimingNormal] {
        let x = init
            .tensor(&[4, 4], 4, 4, &mut Generator::new(9), Device::Cpu)?
            .to_vec()?;
        let y = init
            .tensor(&[4, 4], 4, 4, &mut Generator::new(9), Device::Cpu)?
            .to_vec()?;
        let z = init
            .tensor(&[4, 4], 4, 4, &mut Generator::new(10), Device::Cpu)?
            .to_vec()?;
        assert_eq!(x, y, "{init:?}");
        assert_ne!(x, z, "{init:?}");
    }
    Ok(())
}

#[test]
fn wrong_input_width_is_shape_mismatch() -> Result<()> {
    for dev in devices() {
        let lin = linear_on(4, 3, true, 0, dev)?;
        let x = Tensor::randn_seeded(&[2, 5], 0, dev)?;
        let err = lin.forward(&x).unwrap_err();
        match &err {
            Error::ShapeMismatch { op, lhs, rhs, .. } => {
                assert_eq!(*op, "Linear");
                assert_eq!(lhs, &[2, 5]);
                assert_eq!(rhs, &[3, 4]);
            }
            e => panic!("expected ShapeMismatch, got {e:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains("[2, 5]") && msg.contains("[3, 4]"), "{msg}");
    }
    Ok(())
}

#[test]
fn zero_features_is_an_error() {
    for (i, o) in [(0, 3), (3, 0), (0, 0)] {
        match Linear::new(i, o) {
            Err(Error::InvalidArgument { op, msg }) => {
                assert_eq!(op, "Linear");
                assert!(msg.contains(&format!("in={i}")), "{msg}");
            }
            Err(e) => panic!("expected InvalidArgument, got {e:?}"),
            Ok(_) => panic!("Linear({i}, {o}) succeeded"),
        }
    }
}

fn mlp() -> Result<Sequential> {
    Ok(Sequential::new()
        .add(Linear::new(4, 8)?)
        .add(ReLU)
        .add(Linear::new(8, 6)?)
        .add(Tanh)
        .add(linear_on(6, 3, false, 2, Device::Cpu)?))
}

#[test]
fn sequential_parameter_names_and_order() -> Result<()> {
    let m = mlp()?;
    assert_eq!(m.len(), 5);
    assert!(!m.is_empty());
    assert!(Sequential::new().is_empty());
    let np = m.named_parameters();
    let names: Vec<&str> = np.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight"]
    );
    let shapes: Vec<Vec<usize>> = np
        .iter()
        .map(|(_, p)| p.tensor().shape().to_vec())
        .collect();
    assert_eq!(
        shapes,
        [vec![8, 4], vec![8], vec![6, 8], vec![6], vec![3, 6]]
    );
    // parameters() is named_parameters() without the names, same order, same parameters.
    let ids: Vec<usize> = m.parameters().iter().map(|p| p.id()).collect();
    assert_eq!(ids, np.iter().map(|(_, p)| p.id()).collect::<Vec<_>>());
    // Stable across calls, and nested Sequentials get dotted prefixes.
    let ids2: Vec<usize> = m.parameters().iter().map(|p| p.id()).collect();
    assert_eq!(ids, ids2);
    let outer = Sequential::new().add(GELU).add(mlp()?);
    let names: Vec<String> = outer
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names[0], "1.0.weight");
    assert_eq!(names[4], "1.4.weight");
    Ok(())
}

#[test]
fn num_parameters_counts_scalars() -> Result<()> {
    let m = mlp()?;
    assert_eq!(m.num_parameters(), 8 * 4 + 8 + 6 * 8 + 6 + 3 * 6);
    let relu = ReLU;
    assert_eq!(relu.num_parameters(), 0);
    assert_eq!(Linear::new(784, 256)?.num_parameters(), 784 * 256 + 256);
    Ok(())
}

#[test]
fn zero_grad_clears_grads() -> Result<()> {
    let m = mlp()?;
    let x = Tensor::randn_seeded(&[5, 4], 3, Device::Cpu)?;
    let y = Tensor::from_vec_i64(vec![0, 1, 2, 1, 0], &[5], Device::Cpu)?;
    m.forward(&x)?.cross_entropy(&y)?.backward()?;
    for (n, p) in m.named_parameters() {
        let g = p.grad().unwrap_or_else(|| panic!("{n} has no grad"));
        assert_eq!(g.shape(), p.tensor().shape(), "{n}");
    }
    m.zero_grad();
    for (n, p) in m.named_parameters() {
        assert!(p.grad().is_none(), "{n} still has a grad after zero_grad");
    }
    Ok(())
}

#[test]
fn gradients_accumulate_until_zero_grad() -> Result<()> {
    let lin = Linear::new(3, 2)?;
    let x = Tensor::randn_seeded(&[4, 3], 1, Device::Cpu)?;
    lin.forward(&x)?.sum()?.backward()?;
    let g1 = lin.weight.grad().unwrap().to_vec()?;
    lin.forward(&x)?.sum()?.backward()?;
    let g2 = lin.weight.grad().unwrap().to_vec()?;
    for (a, b) in g1.iter().zip(&g2) {
        assert!((2.0 * a - b).abs() < 1e-5, "{a} {b}");
    }
    Ok(())
}

#[test]
fn to_cpu_is_a_noop() -> Result<()> {
    let m = mlp()?;
    let before: Vec<(usize, Vec<f32>)> = m
        .parameters()
        .iter()
        .map(|p| Ok((p.id(), p.tensor().to_vec()?)))
        .collect::<Result<_>>()?;
    let ptrs: Vec<usize> = m.parameters().iter().map(|p| p.tensor().id()).collect();
    m.to(Device::Cpu)?;
    let after: Vec<(usize, Vec<f32>)> = m
        .parameters()
        .iter()
        .map(|p| Ok((p.id(), p.tensor().to_vec()?)))
        .collect::<Result<_>>()?;
    assert_eq!(before, after);
    // The very same tensors: nothing was re-created.
    let ptrs2: Vec<usize> = m.parameters().iter().map(|p| p.tensor().id()).collect();
    assert_eq!(ptrs, ptrs2);
    for p in m.parameters() {
        assert_eq!(p.tensor().device(), Device::Cpu);
        assert!(p.tensor().requires_grad());
    }
    Ok(())
}

#[test]
fn to_unavailable_device_is_an_error() {
    if cuda_available() {
        return;
    }
    let m = mlp().unwrap();
    assert!(m.to(Device::Cuda(0)).is_err());
}

#[test]
fn gradcheck_small_sequential_wrt_input() -> Result<()> {
    for dev in devices() {
        let net = Sequential::new()
            .add(linear_on(3, 5, true, 21, dev)?)
            .add(GELU)
            .add(linear_on(5, 2, true, 22, dev)?);
        let x = Tensor::randn_seeded(&[4, 3], 5, dev)?;
        let worst = gradcheck(|xs| net.forward(&xs[0]), &[x], GradcheckOptions::default())?;
        assert!(worst.is_finite());
    }
    Ok(())
}

#[test]
fn gradcheck_linear_wrt_weight() -> Result<()> {
    // The same check against Linear's parameters: rebuild the layer's math from the leaves.
    for dev in devices() {
        let x = Tensor::randn_seeded(&[3, 4], 1, dev)?;
        let w = Tensor::randn_seeded(&[2, 4], 2, dev)?;
        let b = Tensor::randn_seeded(&[2], 3, dev)?;
        gradcheck(
            |t| t[0].matmul_t(&t[1], false, true)?.add(&t[2]),
            &[x, w, b],
            GradcheckOptions::default(),
        )?;
    }
    Ok(())
}

#[test]
fn activation_modules_equal_tensor_methods() -> Result<()> {
    for dev in devices() {
        let x = Tensor::randn_seeded(&[3, 7], 4, dev)?;
        let (relu, gelu, sigmoid, tanh) = (ReLU, GELU, Sigmoid, Tanh);
        let pairs: [(&dyn Module, Tensor); 4] = [
            (&relu, x.relu()?),
            (&gelu, x.gelu()?),
            (&sigmoid, x.sigmoid()?),
            (&tanh, x.tanh()?),
        ];
        for (m, want) in pairs {
            let got = m.forward(&x)?;
            assert_eq!(got.shape(), x.shape());
            assert_eq!(got.to_vec()?, want.to_vec()?);
            assert_eq!(m.num_parameters(), 0);
        }
        // And the functions themselves, against f64.
        let xv = x.to_vec()?;
        let f64s = |f: fn(f64) -> f64| xv.iter().map(|&v| f(v as f64)).collect::<Vec<_>>();
        assert_close(
            &relu.forward(&x)?.to_vec()?,
            &f64s(|v| v.max(0.0)),
            1e-6,
            "relu",
        );
        assert_close(
            &sigmoid.forward(&x)?.to_vec()?,
            &f64s(|v| 1.0 / (1.0 + (-v).exp())),
            1e-6,
            "sigmoid",
        );
        assert_close(&tanh.forward(&x)?.to_vec()?, &f64s(f64::tanh), 1e-6, "tanh");
        let gelu_ref = |v: f64| {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * v * (1.0 + (c * (v + 0.044715 * v * v * v)).tanh())
        };
        assert_close(&gelu.forward(&x)?.to_vec()?, &f64s(gelu_ref), 1e-5, "gelu");
    }
    Ok(())
}

#[test]
fn training_mode_propagates() {
    let m = Sequential::new().add(ReLU);
    assert!(m.is_training());
    m.set_training(false);
    assert!(!m.is_training());
    m.set_training(true);
    assert!(m.is_training());
}

/// `set_training(false)` on a Linear makes `is_training()` false (it stayed true before), and
/// `eval()`/`train()` on a container reach every module, through a shared handle.
#[test]
fn train_and_eval_reach_every_module() -> Result<()> {
    let lin = Linear::new(2, 2)?;
    lin.set_training(false);
    assert!(!lin.is_training());
    let model = std::sync::Arc::new(
        Sequential::new()
            .add(Linear::new(4, 8)?)
            .add(ReLU)
            .add(camel_nn::LayerNorm::new(8)?)
            .add(Sequential::new().add(Tanh).add(Linear::new(8, 3)?)),
    );
    let shared: std::sync::Arc<dyn Module> = model.clone();
    shared.eval();
    assert!(!model.is_training());
    let dbg = format!("{model:?}");
    assert_eq!(
        dbg,
        "Sequential(\n  (0): Linear(in_features=4, out_features=8, bias=true)\n  (1): ReLU()\n  \
         (2): LayerNorm((8,), eps=1e-5)\n  (3): Sequential(\n    (0): Tanh()\n    \
         (1): Linear(in_features=8, out_features=3, bias=true)\n  )\n)"
    );
    assert!(!dbg.contains("RwLock"));
    shared.train();
    assert!(model.is_training());
    let e = camel_nn::Embedding::new(5, 3)?;
    e.eval();
    assert!(!e.is_training());
    assert_eq!(format!("{e:?}"), "Embedding(5, 3)");
    Ok(())
}

/// Layers built one after another without a seed draw from the process-wide generator and get
/// different weights (that `manual_seed` repeats the stream is tested in camel-core, in a
/// process where no other test draws from the global generator).
#[test]
fn layers_in_sequence_differ() -> Result<()> {
    let a = Linear::new(6, 4)?.weight.tensor().to_vec()?;
    let b = Linear::new(6, 4)?.weight.tensor().to_vec()?;
    assert_ne!(a, b, "two layers built in sequence got the same weights");
    let e1 = camel_nn::Embedding::new(5, 3)?.weight.tensor().to_vec()?;
    let e2 = camel_nn::Embedding::new(5, 3)?.weight.tensor().to_vec()?;
    assert_ne!(e1, e2);
    Ok(())
}

//! Integration tests of camel-optim: every optimizer against a plain-f64 reference of PyTorch's
//! update formulas (torch.optim.SGD / Adam / AdamW, default flags), plus bookkeeping
//! (parameters without a gradient, zero_grad, set_lr) and a convergence check.
//!
//! The gradient comes from `loss = Σ p·c + ½·Σ p²`, so `∂loss/∂p = c + p`: it changes from step to
//! step (exercising the state buffers) and the reference can recompute it exactly.
//!
//! Device policy: every test body loops over [`devices`] (CPU always, CUDA when a GPU answers).

use camel_nn::testing::devices;
use camel_nn::{Device, Parameter, Result, Tensor};
use camel_optim::{Adam, AdamW, Optimizer, Sgd};

const P0: [f32; 6] = [0.5, -1.25, 2.0, -0.75, 1.5, -2.5];
const C: [f32; 6] = [1.0, -0.5, 0.25, 2.0, -1.5, 0.75];
const STEPS: usize = 3;

/// Builds an optimizer over the given parameters.
type MakeOpt = Box<dyn Fn(Vec<Parameter>) -> Box<dyn Optimizer>>;

fn param(init: &[f32], dev: Device) -> Result<Parameter> {
    Parameter::new(Tensor::from_vec(init.to_vec(), &[2, 3], dev)?)
}

/// Backward of `Σ p·c + ½·Σ p²` into `p`'s grad (so grad = c + p).
fn backward(p: &Parameter, c: &Tensor) -> Result<()> {
    let t = p.tensor();
    t.mul(c)?
        .sum()?
        .add(&t.square()?.sum()?.mul_scalar(0.5)?)?
        .backward()
}

/// Reference gradient of the same loss.
fn ref_grad(p: &[f64]) -> Vec<f64> {
    p.iter().zip(C).map(|(&p, c)| c as f64 + p).collect()
}

fn assert_rel(got: &[f32], want: &[f64], what: &str) {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        assert!(
            err <= 1e-6 * w.abs().max(1e-3),
            "{what}: element {i}: got {g}, want {w} (rel err {:e})",
            err / w.abs()
        );
    }
}

/// Run `STEPS` steps of `opt` on a fresh parameter; return the parameter after each step.
fn run_steps(
    dev: Device,
    make: impl FnOnce(Vec<Parameter>) -> Box<dyn Optimizer>,
) -> Result<Vec<Vec<f32>>> {
    let p = param(&P0, dev)?;
    let c = Tensor::from_vec(C.to_vec(), &[2, 3], dev)?;
    let mut opt = make(vec![p.clone()]);
    let mut out = Vec::new();
    for _ in 0..STEPS {
        opt.zero_grad();
        backward(&p, &c)?;
        opt.step()?;
        out.push(p.tensor().to_vec()?);
    }
    Ok(out)
}

/// torch.optim.SGD (dampening 0, no Nesterov): `g += wd·p`; `buf = g` on the first step, then
/// `buf = μ·buf + g`; `p −= lr·buf` (`p −= lr·g` without momentum).
fn sgd_ref(lr: f64, mu: f64, wd: f64) -> Vec<Vec<f64>> {
    let mut p: Vec<f64> = P0.iter().map(|&x| x as f64).collect();
    let mut buf: Option<Vec<f64>> = None;
    let mut out = Vec::new();
    for _ in 0..STEPS {
        let g: Vec<f64> = ref_grad(&p)
            .iter()
            .zip(&p)
            .map(|(g, p)| g + wd * p)
            .collect();
        let d = if mu != 0.0 {
            let b = match buf.take() {
                None => g.clone(),
                Some(b) => b.iter().zip(&g).map(|(b, g)| mu * b + g).collect(),
            };
            buf = Some(b.clone());
            b
        } else {
            g
        };
        p.iter_mut().zip(&d).for_each(|(p, d)| *p -= lr * d);
        out.push(p.clone());
    }
    out
}

/// torch.optim.Adam / AdamW (amsgrad off). Adam: `g += wd·p`; AdamW: `p *= 1 − lr·wd` first.
/// `m = β₁m + (1−β₁)g; v = β₂v + (1−β₂)g²; p −= lr·(m/(1−β₁ᵗ)) / (√(v/(1−β₂ᵗ)) + ε)`.
fn adam_ref(lr: f64, b1: f64, b2: f64, eps: f64, wd: f64, decoupled: bool) -> Vec<Vec<f64>> {
    let mut p: Vec<f64> = P0.iter().map(|&x| x as f64).collect();
    let n = p.len();
    let (mut m, mut v) = (vec![0.0; n], vec![0.0; n]);
    let mut out = Vec::new();
    for t in 1..=STEPS as i32 {
        let mut g = ref_grad(&p);
        for i in 0..n {
            if decoupled {
                p[i] *= 1.0 - lr * wd;
            } else {
                g[i] += wd * p[i];
            }
            m[i] = b1 * m[i] + (1.0 - b1) * g[i];
            v[i] = b2 * v[i] + (1.0 - b2) * g[i] * g[i];
            let mh = m[i] / (1.0 - b1.powi(t));
            let vh = v[i] / (1.0 - b2.powi(t));
            p[i] -= lr * mh / (vh.sqrt() + eps);
        }
        out.push(p.clone());
    }
    out
}

fn compare(got: &[Vec<f32>], want: &[Vec<f64>], what: &str) {
    assert_eq!(got.len(), want.len());
    for (s, (g, w)) in got.iter().zip(want).enumerate() {
        assert_rel(g, w, &format!("{what}, after step {}", s + 1));
    }
}

#[test]
fn sgd_plain_matches_torch() -> Result<()> {
    for dev in devices() {
        let got = run_steps(dev, |ps| Box::new(Sgd::new(ps, 0.1).unwrap()))?;
        compare(&got, &sgd_ref(0.1, 0.0, 0.0), &format!("SGD on {dev}"));
    }
    Ok(())
}

#[test]
fn sgd_momentum_matches_torch() -> Result<()> {
    for dev in devices() {
        let got = run_steps(dev, |ps| {
            Box::new(Sgd::new(ps, 0.05).unwrap().momentum(0.9).unwrap())
        })?;
        compare(
            &got,
            &sgd_ref(0.05, 0.9, 0.0),
            &format!("SGD momentum on {dev}"),
        );
    }
    Ok(())
}

#[test]
fn sgd_weight_decay_matches_torch() -> Result<()> {
    for dev in devices() {
        let got = run_steps(dev, |ps| {
            Box::new(Sgd::new(ps, 0.1).unwrap().weight_decay(0.01).unwrap())
        })?;
        compare(&got, &sgd_ref(0.1, 0.0, 0.01), &format!("SGD wd on {dev}"));
        let got = run_steps(dev, |ps| {
            Box::new(
                Sgd::new(ps, 0.05)
                    .unwrap()
                    .momentum(0.9)
                    .unwrap()
                    .weight_decay(0.1)
                    .unwrap(),
            )
        })?;
        compare(
            &got,
            &sgd_ref(0.05, 0.9, 0.1),
            &format!("SGD momentum + wd on {dev}"),
        );
    }
    Ok(())
}

#[test]
fn adam_matches_torch() -> Result<()> {
    for dev in devices() {
        let got = run_steps(dev, |ps| Box::new(Adam::new(ps, 0.1).unwrap()))?;
        compare(
            &got,
            &adam_ref(0.1, 0.9, 0.999, 1e-8, 0.0, false),
            &format!("Adam on {dev}"),
        );
        let got = run_steps(dev, |ps| {
            Box::new(
                Adam::new(ps, 0.01)
                    .unwrap()
                    .betas(0.8, 0.99)
                    .unwrap()
                    .weight_decay(0.1)
                    .unwrap(),
            )
        })?;
        compare(
            &got,
            &adam_ref(0.01, 0.8, 0.99, 1e-8, 0.1, false),
            &format!("Adam betas + L2 on {dev}"),
        );
    }
    Ok(())
}

#[test]
fn adamw_matches_torch() -> Result<()> {
    for dev in devices() {
        let got = run_steps(dev, |ps| Box::new(AdamW::adamw(ps, 0.1, 0.01).unwrap()))?;
        compare(
            &got,
            &adam_ref(0.1, 0.9, 0.999, 1e-8, 0.01, true),
            &format!("AdamW on {dev}"),
        );
        let got = run_steps(dev, |ps| Box::new(Adam::adamw(ps, 0.05, 0.5).unwrap()))?;
        compare(
            &got,
            &adam_ref(0.05, 0.9, 0.999, 1e-8, 0.5, true),
            &format!("AdamW strong decay on {dev}"),
        );
    }
    Ok(())
}

#[test]
fn parameters_without_grad_are_skipped() -> Result<()> {
    for dev in devices() {
        let makers: Vec<MakeOpt> = vec![
            Box::new(|ps| {
                Box::new(
                    Sgd::new(ps, 0.1)
                        .unwrap()
                        .momentum(0.9)
                        .unwrap()
                        .weight_decay(0.1)
                        .unwrap(),
                )
            }),
            Box::new(|ps| Box::new(Adam::new(ps, 0.1).unwrap().weight_decay(0.1).unwrap())),
            Box::new(|ps| Box::new(Adam::adamw(ps, 0.1, 0.1).unwrap())),
        ];
        for make in makers {
            let used = param(&P0, dev)?;
            let unused = param(&C, dev)?;
            let c = Tensor::from_vec(C.to_vec(), &[2, 3], dev)?;
            let mut opt = make(vec![unused.clone(), used.clone()]);
            for _ in 0..2 {
                opt.zero_grad();
                backward(&used, &c)?;
                opt.step()?;
            }
            assert!(unused.grad().is_none());
            // Untouched, even by weight decay.
            assert_eq!(unused.tensor().to_vec()?, C.to_vec());
            assert_ne!(used.tensor().to_vec()?, P0.to_vec());
        }
    }
    Ok(())
}

#[test]
fn zero_grad_clears_every_parameter() -> Result<()> {
    for dev in devices() {
        let a = param(&P0, dev)?;
        let b = param(&C, dev)?;
        a.tensor().mul(&b.tensor())?.sum()?.backward()?;
        assert!(a.grad().is_some() && b.grad().is_some());
        let opt = Adam::new(vec![a.clone(), b.clone()], 0.1).unwrap();
        opt.zero_grad();
        assert!(a.grad().is_none() && b.grad().is_none());
        // A step with no gradients at all changes nothing.
        let mut opt = opt;
        opt.step()?;
        assert_eq!(a.tensor().to_vec()?, P0.to_vec());
        assert_eq!(b.tensor().to_vec()?, C.to_vec());
    }
    Ok(())
}

#[test]
fn set_lr_takes_effect_on_next_step() -> Result<()> {
    for dev in devices() {
        // SGD: one step at lr 0.1, then two at 0.02.
        let p = param(&P0, dev)?;
        let c = Tensor::from_vec(C.to_vec(), &[2, 3], dev)?;
        let mut opt = Sgd::new(vec![p.clone()], 0.1).unwrap();
        assert_eq!(opt.lr(), 0.1);
        let mut want: Vec<f64> = P0.iter().map(|&x| x as f64).collect();
        for step in 0..3 {
            if step == 1 {
                opt.set_lr(0.02).unwrap();
                assert_eq!(opt.lr(), 0.02);
            }
            let lr = if step == 0 { 0.1 } else { 0.02 };
            opt.zero_grad();
            backward(&p, &c)?;
            opt.step()?;
            let g = ref_grad(&want);
            want.iter_mut().zip(g).for_each(|(p, g)| *p -= lr * g);
            assert_rel(
                &p.tensor().to_vec()?,
                &want,
                &format!("SGD set_lr on {dev}"),
            );
        }
        // Adam: setting lr to 0 freezes the parameter (but the moments keep updating).
        let p = param(&P0, dev)?;
        let mut opt = Adam::new(vec![p.clone()], 0.1).unwrap();
        opt.set_lr(0.0).unwrap();
        assert_eq!(Optimizer::lr(&opt), 0.0);
        opt.zero_grad();
        backward(&p, &c)?;
        opt.step()?;
        assert_eq!(p.tensor().to_vec()?, P0.to_vec());
    }
    Ok(())
}

#[test]
fn adam_minimizes_a_quadratic() -> Result<()> {
    for dev in devices() {
        // f(p) = Σ aᵢ (pᵢ − tᵢ)², an ill-conditioned bowl.
        let target = Tensor::from_vec(vec![1.0, -2.0, 3.0, 0.5, -0.25, 4.0], &[2, 3], dev)?;
        let scale = Tensor::from_vec(vec![1.0, 10.0, 0.1, 3.0, 0.5, 2.0], &[2, 3], dev)?;
        let p = Parameter::new(Tensor::zeros(&[2, 3], dev)?)?;
        let mut opt = Adam::new(vec![p.clone()], 0.1).unwrap();
        let f = |p: &Parameter| -> Result<Tensor> {
            p.tensor().sub(&target)?.square()?.mul(&scale)?.sum()
        };
        for step in 0..2000 {
            if step == 1000 {
                opt.set_lr(0.01).unwrap();
            }
            opt.zero_grad();
            f(&p)?.backward()?;
            opt.step()?;
        }
        let loss = f(&p)?.item()?;
        assert!(loss < 1e-4, "Adam on {dev}: loss {loss} after 2000 steps");
    }
    Ok(())
}

/// PyTorch keeps Adam's step count per parameter (`state["step"]`), so a parameter that gets its
/// first gradient late starts with bias correction `1 − β¹`. camel-optim keeps one global `t`.
#[test]
fn adam_bias_correction_is_per_parameter() -> Result<()> {
    let dev = Device::Cpu;
    let a = param(&P0, dev)?;
    let late = param(&P0, dev)?;
    let c = Tensor::from_vec(C.to_vec(), &[2, 3], dev)?;
    let mut opt = Adam::new(vec![a.clone(), late.clone()], 0.1).unwrap();
    // Two steps where only `a` has a gradient.
    for _ in 0..2 {
        opt.zero_grad();
        backward(&a, &c)?;
        opt.step()?;
    }
    // Now `late` gets gradients: it must follow exactly the fresh-parameter trajectory.
    let mut got = Vec::new();
    for _ in 0..STEPS {
        opt.zero_grad();
        backward(&late, &c)?;
        opt.step()?;
        got.push(late.tensor().to_vec()?);
    }
    compare(
        &got,
        &adam_ref(0.1, 0.9, 0.999, 1e-8, 0.0, false),
        "Adam, parameter first seen at step 3",
    );
    Ok(())
}

/// Invalid hyper-parameters are refused where they are set, with an error naming the optimizer
/// and the value; valid edge values are accepted.
#[test]
fn invalid_hyper_parameters_are_errors() {
    let p = || vec![Parameter::new(Tensor::zeros(&[2], Device::Cpu).unwrap()).unwrap()];
    for lr in [f32::NAN, f32::INFINITY, -1.0, 0.0, -0.0] {
        let e = Sgd::new(p(), lr).err().expect("Sgd accepted lr");
        assert!(e.to_string().starts_with("Sgd: the learning rate"), "{e}");
        assert!(Adam::new(p(), lr).is_err(), "Adam accepted lr {lr}");
        assert!(
            Adam::adamw(p(), lr, 0.01).is_err(),
            "AdamW accepted lr {lr}"
        );
    }
    for m in [-0.1, 1.0, 2.0, f32::NAN] {
        assert!(
            Sgd::new(p(), 0.1).unwrap().momentum(m).is_err(),
            "momentum {m}"
        );
    }
    for wd in [-0.1, f32::NAN, f32::INFINITY] {
        assert!(Sgd::new(p(), 0.1).unwrap().weight_decay(wd).is_err());
        assert!(Adam::new(p(), 0.1).unwrap().weight_decay(wd).is_err());
        assert!(Adam::adamw(p(), 0.1, wd).is_err());
    }
    let e = Adam::new(p(), 0.1).unwrap().betas(2.0, 2.0).err().unwrap();
    assert!(
        e.to_string().contains("beta1 must be in [0, 1), got 2"),
        "{e}"
    );
    assert!(Adam::new(p(), 0.1).unwrap().betas(0.9, 1.0).is_err());
    for eps in [0.0, -1e-8, f32::NAN] {
        assert!(Adam::new(p(), 0.1).unwrap().eps(eps).is_err(), "eps {eps}");
    }
    let mut opt = Adam::new(p(), 0.1).unwrap().betas(0.0, 0.0).unwrap();
    assert!(opt.set_lr(f32::NAN).is_err());
    assert!(opt.set_lr(-1.0).is_err());
    assert_eq!(opt.lr(), 0.1, "a refused set_lr leaves the rate");
    opt.set_lr(0.0).unwrap();
    Sgd::new(p(), 1e-30)
        .unwrap()
        .momentum(0.0)
        .unwrap()
        .weight_decay(0.0)
        .unwrap();
}

//! Dynamic loss scaling on every device: an injected overflow is skipped without touching the
//! weights or the optimizer's state, and the run then matches one that never saw the bad batch
//! bit for bit (Adam's step count leaves the skipped step out); the scale backs off, grows and
//! saturates as PyTorch's does; the state dict counts only the steps taken; the order of calls
//! is enforced; and the scaled step equals the plain one.

use camel_nn::testing::devices;
use camel_nn::{Device, Linear, LinearOptions, Module, Result, Tensor};
use camel_optim::{clip_grad_norm, Adam, GradScaler, Optimizer, Sgd};

fn model(dev: Device) -> Result<Linear> {
    let m = Linear::with_options(
        5,
        3,
        LinearOptions {
            seed: Some(7),
            ..Default::default()
        },
    )?;
    m.to(dev)?;
    Ok(m)
}

/// Batch `i` of a fixed sequence; `overflow` puts 1e35 in it, so the scaled gradient (× 2^16)
/// is inf in f32.
fn batch(i: usize, overflow: bool, dev: Device) -> Result<Tensor> {
    let mut x: Vec<f32> = (0..20)
        .map(|j| ((i * 20 + j) as f32 * 0.37).sin())
        .collect();
    if overflow {
        x[3] = 1e35;
    }
    Tensor::from_vec(x, &[4, 5], dev)
}

fn loss(m: &Linear, x: &Tensor) -> Result<Tensor> {
    m.forward(x)?.square()?.mean()
}

/// One scaled iteration on batch `i`.
fn scaled_step(
    m: &Linear,
    opt: &mut dyn Optimizer,
    scaler: &mut GradScaler,
    i: usize,
    overflow: bool,
    dev: Device,
) -> Result<()> {
    opt.zero_grad();
    let l = loss(m, &batch(i, overflow, dev)?)?;
    scaler.scale(&l)?.backward()?;
    scaler.step(opt)?;
    scaler.update()
}

fn weights(m: &Linear) -> Vec<Vec<f32>> {
    m.parameters()
        .iter()
        .map(|p| p.tensor().to_vec().unwrap())
        .collect()
}

type MakeOpt = fn(&Linear) -> Result<Box<dyn Optimizer>>;

fn optimizers() -> [(&'static str, MakeOpt); 3] {
    [
        ("sgd", |m| {
            Ok(Box::new(Sgd::new(m.parameters(), 0.1)?.momentum(0.9)?))
        }),
        ("adam", |m| Ok(Box::new(Adam::new(m.parameters(), 0.01)?))),
        ("adamw", |m| {
            Ok(Box::new(Adam::adamw(m.parameters(), 0.01, 0.1)?))
        }),
    ]
}

#[test]
fn an_overflow_is_skipped_and_the_run_goes_on_as_if_it_never_happened() -> Result<()> {
    for dev in devices() {
        for (name, make) in optimizers() {
            // with the bad batch at iteration 2 of 5
            let m = model(dev)?;
            let mut opt = make(&m)?;
            let mut scaler = GradScaler::new(dev)?;
            for i in 0..2 {
                scaled_step(&m, opt.as_mut(), &mut scaler, i, false, dev)?;
            }
            let (w, st) = (weights(&m), opt.state_dict()?);
            scaled_step(&m, opt.as_mut(), &mut scaler, 99, true, dev)?;
            assert_eq!(
                weights(&m),
                w,
                "{name} on {dev}: the skipped step wrote a weight"
            );
            for (k, t) in opt.state_dict()? {
                assert_eq!(t.to_vec()?, st[&k].to_vec()?, "{name} on {dev}: {k}");
            }
            assert_eq!(
                scaler.scale_value()?,
                32768.0,
                "{name} on {dev}: backed off"
            );
            assert_eq!(scaler.skipped_steps()?, 1, "{name} on {dev}");
            for i in 2..5 {
                scaled_step(&m, opt.as_mut(), &mut scaler, i, false, dev)?;
            }
            // without it (a power-of-two scale unscales exactly, whatever its value)
            let r = model(dev)?;
            let mut ropt = make(&r)?;
            let mut rscaler = GradScaler::new(dev)?;
            for i in 0..5 {
                scaled_step(&r, ropt.as_mut(), &mut rscaler, i, false, dev)?;
            }
            assert_eq!(weights(&m), weights(&r), "{name} on {dev}");
            let (a, b) = (opt.state_dict()?, ropt.state_dict()?);
            for (k, t) in &a {
                assert_eq!(t.to_vec()?, b[k].to_vec()?, "{name} on {dev}: {k}");
            }
            assert_eq!(a["state.0.step"].to_vec()?, vec![5.0], "{name} on {dev}");
            // a NaN gradient is skipped too
            let nan = Tensor::from_vec(vec![f32::NAN; 20], &[4, 5], dev)?;
            opt.zero_grad();
            scaler.scale(&loss(&m, &nan)?)?.backward()?;
            scaler.step(opt.as_mut())?;
            scaler.update()?;
            assert_eq!(weights(&m), weights(&r), "{name} on {dev}: NaN step");
            assert_eq!(scaler.skipped_steps()?, 2, "{name} on {dev}");
        }
    }
    Ok(())
}

/// The scaled step is the plain step: Adam's bias corrections, computed on the device for a
/// guarded step, agree with the host's to rounding.
#[test]
fn a_scaled_step_matches_the_plain_one() -> Result<()> {
    for dev in devices() {
        for (name, make) in optimizers() {
            let (a, b) = (model(dev)?, model(dev)?);
            let (mut oa, mut ob) = (make(&a)?, make(&b)?);
            let mut scaler = GradScaler::new(dev)?;
            for i in 0..4 {
                scaled_step(&a, oa.as_mut(), &mut scaler, i, false, dev)?;
                ob.zero_grad();
                loss(&b, &batch(i, false, dev)?)?.backward()?;
                ob.step()?;
            }
            for (wa, wb) in weights(&a).iter().zip(&weights(&b)) {
                for (x, y) in wa.iter().zip(wb) {
                    assert!(
                        (x - y).abs() <= 1e-6 + 1e-5 * y.abs(),
                        "{name} on {dev}: {x} vs {y}"
                    );
                }
            }
        }
    }
    Ok(())
}

#[test]
fn the_scale_grows_after_its_interval_and_never_to_infinity() -> Result<()> {
    for dev in devices() {
        let m = model(dev)?;
        let mut opt = Sgd::new(m.parameters(), 0.01)?;
        let mut scaler = GradScaler::with_options(dev, 4.0, 2.0, 0.5, 3)?;
        let mut seen = Vec::new();
        for (i, overflow) in [false, false, false, false, true, false]
            .into_iter()
            .enumerate()
        {
            // 1e35 × 4 is finite: an overflow here needs a scale past 2^11
            let x = if overflow {
                Tensor::full(&[4, 5], f32::INFINITY, dev)?
            } else {
                batch(i, false, dev)?
            };
            opt.zero_grad();
            scaler.scale(&loss(&m, &x)?)?.backward()?;
            scaler.step(&mut opt)?;
            scaler.update()?;
            seen.push(scaler.scale_value()?);
        }
        assert_eq!(seen, [4.0, 4.0, 8.0, 8.0, 4.0, 4.0], "{dev}");
        // a scale whose growth would overflow f32 stays where it is
        let big = 2f32.powi(127);
        let mut top = GradScaler::with_options(dev, big, 2.0, 0.5, 1)?;
        opt.zero_grad();
        top.scale(&m.forward(&batch(0, false, dev)?)?.sum()?.mul_scalar(0.0)?)?
            .backward()?;
        top.step(&mut opt)?;
        top.update()?;
        assert_eq!(top.scale_value()?, big, "{dev}");
        assert_eq!(top.skipped_steps()?, 0, "{dev}");
    }
    Ok(())
}

/// The optimizer's state dict counts only the steps taken; it loads back into an optimizer
/// stepped by a scaler, and an unguarded step after guarded ones counts on from there.
#[test]
fn the_state_dict_counts_only_the_steps_taken() -> Result<()> {
    for dev in devices() {
        let m = model(dev)?;
        let mut opt = Adam::new(m.parameters(), 0.01)?;
        let mut scaler = GradScaler::new(dev)?;
        for (i, overflow) in [false, true, true, false].into_iter().enumerate() {
            scaled_step(&m, &mut opt, &mut scaler, i, overflow, dev)?;
        }
        let sd = opt.state_dict()?;
        assert_eq!(sd["state.0.step"].to_vec()?, vec![2.0], "{dev}");
        // loaded into a fresh optimizer that a scaler with 2 skipped steps then drives
        let mut other = Adam::new(m.parameters(), 0.01)?;
        other.load_state_dict(&sd)?;
        let mut s2 = GradScaler::new(dev)?;
        for i in 0..2 {
            scaled_step(&m, &mut other, &mut s2, i, true, dev)?;
        }
        assert_eq!(
            other.state_dict()?["state.0.step"].to_vec()?,
            vec![2.0],
            "{dev}"
        );
        // an unguarded step continues the count
        opt.zero_grad();
        loss(&m, &batch(9, false, dev)?)?.backward()?;
        opt.step()?;
        assert_eq!(
            opt.state_dict()?["state.0.step"].to_vec()?,
            vec![3.0],
            "{dev}"
        );
    }
    Ok(())
}

/// The iteration's calls in order: unscale at most once, step once, update after step; a
/// misuse is an error and the gradients are not divided twice. Clipping goes between unscale
/// and step.
#[test]
fn calls_out_of_order_are_errors_and_clipping_sees_true_gradients() -> Result<()> {
    for dev in devices() {
        let m = model(dev)?;
        let mut opt = Sgd::new(m.parameters(), 0.01)?;
        let mut scaler = GradScaler::new(dev)?;
        let e = scaler.update().unwrap_err().to_string();
        assert!(e.contains("update() without a step()"), "{e}");
        opt.zero_grad();
        let l = loss(&m, &batch(0, false, dev)?)?;
        scaler.scale(&l)?.backward()?;
        scaler.unscale(&opt)?;
        let g = m.parameters()[0].grad().unwrap().to_vec()?;
        let e = scaler.unscale(&opt).unwrap_err().to_string();
        assert!(e.contains("unscale() has already been called"), "{e}");
        assert_eq!(m.parameters()[0].grad().unwrap().to_vec()?, g, "{dev}");
        // the unscaled gradients are the true ones
        let r = model(dev)?;
        loss(&r, &batch(0, false, dev)?)?.backward()?;
        assert_eq!(r.parameters()[0].grad().unwrap().to_vec()?, g, "{dev}");
        let norm = clip_grad_norm(&m.parameters(), 1e9)?.item()?;
        let rnorm = clip_grad_norm(&r.parameters(), 1e9)?.item()?;
        assert_eq!(norm, rnorm, "{dev}");
        scaler.step(&mut opt)?;
        let e = scaler.step(&mut opt).unwrap_err().to_string();
        assert!(e.contains("step() has already been called"), "{e}");
        let e = scaler.unscale(&opt).unwrap_err().to_string();
        assert!(e.contains("call update() first"), "{e}");
        scaler.update()?;
        let e = GradScaler::with_options(dev, 0.0, 2.0, 0.5, 1)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("initial scale must be finite and > 0"), "{e}");
        if dev != Device::Cpu {
            let cpu = GradScaler::new(Device::Cpu)?;
            let e = cpu.scale(&l).unwrap_err().to_string();
            assert!(e.contains("GradScaler::scale"), "{e}");
        }
    }
    Ok(())
}

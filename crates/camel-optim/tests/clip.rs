//! `clip_grad_norm`: the global L2 norm of many gradients of awkward sizes against an f64
//! reference, the clipped gradients, the non-clipping case (gradients untouched), NaN and inf,
//! gradients that share a storage, the launch count on a GPU, and bad arguments.
//!
//! Gradients are set exactly through backward: `loss = Σᵢ Σ pᵢ·cᵢ` gives `∂loss/∂pᵢ = cᵢ`.
//!
//! Device policy: every test body loops over [`devices`] (CPU always, CUDA when a GPU answers).

use camel_nn::core::config;
use camel_nn::testing::{devices, gpu, launch_count};
use camel_nn::{Device, Parameter, Result, Tensor};
use camel_optim::{clip_grad_norm, Adam, Optimizer};

/// Sizes that miss every chunk boundary (4096) and every warp: 1, 7, 127, 1031, a chunk and one,
/// three chunks and a bit. 70 tensors: more than one multi-tensor table (60 a launch).
fn sizes() -> Vec<usize> {
    let base = [1usize, 7, 127, 1031, 4097, 3 * 4096 + 5, 2];
    (0..70).map(|i| base[i % base.len()]).collect()
}

/// Deterministic values in [-2, 2) (a small LCG, independent of camel's generator).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

/// Parameters of `sizes` whose gradients are exactly `grads`.
fn with_grads(grads: &[Vec<f32>], dev: Device) -> Result<Vec<Parameter>> {
    let mut ps = Vec::new();
    let mut loss: Option<Tensor> = None;
    for g in grads {
        let p = Parameter::new(Tensor::zeros(&[g.len()], dev)?)?;
        let c = Tensor::from_vec(g.clone(), &[g.len()], dev)?;
        let term = p.tensor().mul(&c)?.sum()?;
        loss = Some(match loss {
            Some(l) => l.add(&term)?,
            None => term,
        });
        ps.push(p);
    }
    loss.expect("at least one parameter").backward()?;
    Ok(ps)
}

fn ref_norm(grads: &[Vec<f32>]) -> f64 {
    grads
        .iter()
        .flatten()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt()
}

fn grads_of(ps: &[Parameter]) -> Result<Vec<Vec<f32>>> {
    ps.iter()
        .map(|p| p.grad().expect("gradient").to_vec())
        .collect()
}

fn many_grads() -> Vec<Vec<f32>> {
    sizes()
        .iter()
        .enumerate()
        .map(|(i, &n)| values(n, i as u64 + 1))
        .collect()
}

#[test]
fn clipping_matches_f64_reference_over_many_tensors() -> Result<()> {
    for dev in devices() {
        let grads = many_grads();
        let want = ref_norm(&grads);
        let max_norm = (want / 3.0) as f32;
        let ps = with_grads(&grads, dev)?;
        let norm = clip_grad_norm(&ps, max_norm)?;
        assert_eq!(norm.shape(), &[1]);
        assert_eq!(norm.device(), dev);
        let got = f64::from(norm.item()?);
        assert!(
            (got - want).abs() <= 1e-5 * want,
            "{dev:?}: norm {got}, want {want}"
        );
        let scale = f64::from(max_norm) / (want + 1e-6);
        for (i, (g, w)) in grads_of(&ps)?.iter().zip(&grads).enumerate() {
            for (j, (&a, &b)) in g.iter().zip(w).enumerate() {
                let e = f64::from(b) * scale;
                assert!(
                    (f64::from(a) - e).abs() <= 1e-5 * e.abs().max(1e-3),
                    "{dev:?}: tensor {i} (size {}) element {j}: {a}, want {e}",
                    w.len()
                );
            }
        }
        // the clipped gradients have the norm asked for
        let after = ref_norm(&grads_of(&ps)?);
        assert!(
            (after - f64::from(max_norm)).abs() <= 1e-4 * after,
            "{dev:?}"
        );
    }
    Ok(())
}

#[test]
fn below_the_threshold_gradients_are_untouched() -> Result<()> {
    for dev in devices() {
        let grads = many_grads();
        let want = ref_norm(&grads);
        let ps = with_grads(&grads, dev)?;
        let norm = clip_grad_norm(&ps, (want * 2.0) as f32)?.item()?;
        assert!((f64::from(norm) - want).abs() <= 1e-5 * want, "{dev:?}");
        assert_eq!(grads_of(&ps)?, grads, "{dev:?}: gradients changed");
        // an infinite max_norm only measures
        let again = clip_grad_norm(&ps, f32::INFINITY)?.item()?;
        assert_eq!(
            again.to_bits(),
            norm.to_bits(),
            "{dev:?}: not deterministic"
        );
        assert_eq!(grads_of(&ps)?, grads, "{dev:?}");
    }
    Ok(())
}

#[test]
fn single_small_tensors() -> Result<()> {
    for dev in devices() {
        for n in [1usize, 7, 127, 1031] {
            let g = values(n, 99 + n as u64);
            let want = ref_norm(std::slice::from_ref(&g));
            let ps = with_grads(std::slice::from_ref(&g), dev)?;
            let got = f64::from(clip_grad_norm(&ps, 0.5)?.item()?);
            assert!((got - want).abs() <= 1e-5 * want, "{dev:?} n={n}");
            let after = ref_norm(&grads_of(&ps)?);
            assert!((after - 0.5).abs() <= 1e-5, "{dev:?} n={n}: {after}");
        }
    }
    Ok(())
}

#[test]
fn nan_and_inf_are_not_hidden() -> Result<()> {
    for dev in devices() {
        let mut grads = many_grads();
        grads[3][100] = f32::NAN;
        let ps = with_grads(&grads, dev)?;
        let norm = clip_grad_norm(&ps, 1.0)?.item()?;
        assert!(norm.is_nan(), "{dev:?}: norm {norm}");
        assert!(
            grads_of(&ps)?.iter().flatten().all(|x| x.is_nan()),
            "{dev:?}: a NaN norm scales every gradient to NaN"
        );

        let mut grads = many_grads();
        grads[5][0] = f32::INFINITY;
        let ps = with_grads(&grads, dev)?;
        let norm = clip_grad_norm(&ps, 1.0)?.item()?;
        assert_eq!(norm, f32::INFINITY, "{dev:?}");
        let after = grads_of(&ps)?;
        assert!(after[5][0].is_nan(), "{dev:?}: inf · 0 is NaN");
        assert!(after[0].iter().all(|&x| x == 0.0), "{dev:?}");
    }
    Ok(())
}

#[test]
fn a_shared_gradient_counts_for_each_parameter_and_nothing_else_changes() -> Result<()> {
    for dev in devices() {
        // add's backward hands one gradient to both inputs
        let a = Parameter::new(Tensor::zeros(&[1031], dev)?)?;
        let b = Parameter::new(Tensor::zeros(&[1031], dev)?)?;
        let c = Tensor::from_vec(values(1031, 5), &[1031], dev)?;
        a.tensor().add(&b.tensor())?.mul(&c)?.sum()?.backward()?;
        let before = c.to_vec()?;
        let want = ref_norm(&[before.clone(), before.clone()]);
        let norm = f64::from(clip_grad_norm(&[a.clone(), b.clone()], 1.0)?.item()?);
        assert!((norm - want).abs() <= 1e-5 * want, "{dev:?}");
        let scale = 1.0 / (want + 1e-6);
        for p in [&a, &b] {
            for (&g, &x) in p.grad().unwrap().to_vec()?.iter().zip(&before) {
                let e = f64::from(x) * scale;
                assert!(
                    (f64::from(g) - e).abs() <= 1e-5 * e.abs().max(1e-3),
                    "{dev:?}"
                );
            }
        }
        assert_eq!(c.to_vec()?, before, "{dev:?}: an input changed");

        // the same parameter listed twice counts once
        let ps = with_grads(std::slice::from_ref(&before), dev)?;
        let one = clip_grad_norm(&ps, f32::INFINITY)?.item()?;
        let twice = clip_grad_norm(&[ps[0].clone(), ps[0].clone()], f32::INFINITY)?.item()?;
        assert_eq!(one, twice, "{dev:?}");
    }
    Ok(())
}

#[test]
fn without_gradients_the_norm_is_zero() -> Result<()> {
    for dev in devices() {
        let p = Parameter::new(Tensor::ones(&[3], dev)?)?;
        let n = clip_grad_norm(&[p], 1.0)?;
        assert_eq!(n.device(), dev);
        assert_eq!(n.item()?, 0.0);
    }
    assert_eq!(clip_grad_norm(&[], 1.0)?.item()?, 0.0);
    Ok(())
}

#[test]
fn bad_max_norm_is_an_error_and_changes_nothing() -> Result<()> {
    for dev in devices() {
        let grads = many_grads();
        let ps = with_grads(&grads[..4], dev)?;
        for m in [0.0, -1.0, f32::NAN] {
            let e = clip_grad_norm(&ps, m).unwrap_err().to_string();
            assert!(
                e.contains("clip_grad_norm") && e.contains("max_norm"),
                "{e}"
            );
        }
        assert_eq!(grads_of(&ps)?, grads[..4].to_vec(), "{dev:?}");
    }
    Ok(())
}

#[test]
fn gradients_on_two_devices_are_an_error() -> Result<()> {
    let Some(dev) = gpu() else { return Ok(()) };
    let a = with_grads(&[vec![1.0, 2.0]], Device::Cpu)?;
    let b = with_grads(&[vec![3.0]], dev)?;
    let e = clip_grad_norm(&[a[0].clone(), b[0].clone()], 1.0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("clip_grad_norm"), "{e}");
    assert_eq!(a[0].grad().unwrap().to_vec()?, [1.0, 2.0]);
    Ok(())
}

#[test]
fn on_a_gpu_clipping_is_three_launches_and_no_host_read() -> Result<()> {
    let Some(dev) = gpu() else { return Ok(()) };
    let grads: Vec<Vec<f32>> = many_grads().into_iter().take(60).collect();
    let ps = with_grads(&grads, dev)?;
    let before = launch_count(dev);
    let norm = clip_grad_norm(&ps, 0.1)?;
    // the scratch and the norm are two allocations, each filled with NaN when poisoning
    let allocs = if config::poison() { 2 } else { 0 };
    assert_eq!(launch_count(dev) - before, 3 + allocs);
    assert!(norm.item()?.is_finite());
    Ok(())
}

#[test]
fn clipping_then_adam_agrees_across_devices() -> Result<()> {
    let grads = many_grads();
    let mut results = Vec::new();
    for dev in devices() {
        let ps = with_grads(&grads, dev)?;
        let mut opt = Adam::adamw(ps.clone(), 1e-2, 0.1)?;
        clip_grad_norm(&ps, 1.0)?;
        opt.step()?;
        let vals: Vec<Vec<f32>> = ps
            .iter()
            .map(|p| p.tensor().to_vec())
            .collect::<Result<_>>()?;
        results.push(vals);
    }
    for other in &results[1..] {
        for (a, b) in results[0].iter().flatten().zip(other.iter().flatten()) {
            assert!((a - b).abs() <= 1e-6 + 1e-5 * a.abs(), "{a} vs {b}");
        }
    }
    Ok(())
}

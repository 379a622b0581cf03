//! The device side of dynamic loss scaling: gradients unscaled with an overflow flag
//! (`unscale_grads`), optimizer updates guarded by that flag (`apply_updates_guarded`, at every
//! step of the optimizer ladder) and the scale's update (`update_loss_scale`), each on every
//! device against a host reference, and the bad inputs each refuses without changing anything.

mod common;

use camel_core::backend::ladder::Family;
use camel_core::{Device, StepGuard, Tensor, UpdateRule};
use common::*;

/// Sizes that cross the multi-tensor kernels' cases: single elements, a float4 tail, one whole
/// chunk (4096), a chunk and one, several chunks and a partial one.
const SIZES: [usize; 7] = [1, 7, 127, 1000, 4096, 4097, 4096 * 3 + 5];

/// Leaf tensors whose gradients are `gs` (each `sum(p · g)` backward).
fn with_grads(gs: &[Vec<f32>], dev: Device) -> Vec<Tensor> {
    gs.iter()
        .map(|g| {
            let p = t(&vec![0.5; g.len()], &[g.len()], dev)
                .requires_grad_(true)
                .unwrap();
            p.mul(&t(g, &[g.len()], dev))
                .unwrap()
                .sum()
                .unwrap()
                .backward()
                .unwrap();
            p
        })
        .collect()
}

fn scalar(v: f32, dev: Device) -> Tensor {
    Tensor::full(&[1], v, dev).unwrap()
}

fn grads_of(ps: &[Tensor]) -> Vec<Vec<f32>> {
    ps.iter()
        .map(|p| p.grad().unwrap().to_vec().unwrap())
        .collect()
}

/// Runs `body` at every step of the optimizer ladder when a GPU answers (once without one: the
/// CPU ignores the selection).
fn every_optim_step(body: impl Fn()) {
    if camel_core::testing::gpu().is_none() {
        body();
    } else {
        camel_core::testing::for_each_step(Family::Optim, |_| body());
    }
}

#[test]
fn unscale_divides_every_gradient_and_flags_only_inf_and_nan() {
    // the sizes, then 70 tensors of 3 elements: more than one table of 60 on a GPU
    let mut sizes: Vec<usize> = SIZES.to_vec();
    sizes.extend(std::iter::repeat_n(3, 70));
    let gs: Vec<Vec<f32>> = sizes
        .iter()
        .enumerate()
        .map(|(k, &n)| rand_vec(n, -100.0, 100.0, k as u64 + 1))
        .collect();
    let last = sizes.len() - 1;
    // (what, where to put a non-finite value (tensor, element), the value)
    type Case = (&'static str, Option<(usize, usize)>, f32);
    let cases: [Case; 4] = [
        ("finite", None, 0.0),
        ("inf in the last element", Some((last, 2)), f32::INFINITY),
        ("NaN in the second table", Some((65, 0)), f32::NAN),
        ("-inf in a whole chunk", Some((4, 4095)), f32::NEG_INFINITY),
    ];
    for dev in camel_core::testing::devices() {
        for scale in [1024.0f32, 3.0] {
            for (what, bad, v) in cases {
                let mut g = gs.clone();
                if let Some((k, i)) = bad {
                    g[k][i] = v;
                }
                let ps = with_grads(&g, dev);
                let (s, found) = (scalar(scale, dev), scalar(0.0, dev));
                Tensor::unscale_grads(&ps, &s, &found).unwrap();
                let inv = 1.0 / scale;
                for (k, (got, want)) in grads_of(&ps).iter().zip(&g).enumerate() {
                    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
                        let w = b * inv;
                        assert!(
                            a == w || (a.is_nan() && w.is_nan()),
                            "{dev} scale {scale} {what}: tensor {k} element {i}: {a} ≠ {w}"
                        );
                    }
                }
                let flag = found.item().unwrap();
                assert_eq!(flag, f32::from(bad.is_some()), "{dev} scale {scale} {what}");
                assert_eq!(s.item().unwrap(), scale, "{dev}: the scale is only read");
            }
        }
        // the flag is only ever set: a finite step leaves an earlier overflow recorded
        let ps = with_grads(&gs[..2], dev);
        let found = scalar(1.0, dev);
        Tensor::unscale_grads(&ps, &scalar(2.0, dev), &found).unwrap();
        assert_eq!(found.item().unwrap(), 1.0, "{dev}");
    }
}

/// The rules of the guarded-update test: SGD with and without momentum, Adam, AdamW (the bias
/// corrections of the host rule are ignored by a guarded update).
fn rules() -> [UpdateRule; 4] {
    let adam = |decoupled| UpdateRule::Adam {
        lr: 0.01,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.1,
        decoupled,
        bc1: f32::NAN,
        bc2: f32::NAN,
    };
    [
        UpdateRule::Sgd {
            lr: 0.1,
            momentum: 0.9,
            weight_decay: 0.01,
        },
        UpdateRule::Sgd {
            lr: 0.1,
            momentum: 0.0,
            weight_decay: 0.0,
        },
        adam(false),
        adam(true),
    ]
}

/// With the flag set, a guarded update writes nothing; with it clear, it is the unguarded
/// update with Adam's step counted as `steps[i] − skipped`.
#[test]
fn a_guarded_update_skips_on_the_flag_and_counts_only_the_steps_taken() {
    every_optim_step(|| {
        let p0: Vec<Vec<f32>> = SIZES
            .iter()
            .map(|&n| rand_vec(n, -1.0, 1.0, n as u64))
            .collect();
        let g0: Vec<Vec<f32>> = SIZES
            .iter()
            .map(|&n| rand_vec(n, -1.0, 1.0, n as u64 ^ 3))
            .collect();
        let s0: Vec<Vec<f32>> = SIZES
            .iter()
            .map(|&n| rand_vec(n, 0.0, 0.01, n as u64 ^ 5))
            .collect();
        for (which, rule) in rules().into_iter().enumerate() {
            let nbuf = match rule {
                UpdateRule::Sgd { momentum, .. } => usize::from(momentum != 0.0),
                UpdateRule::Adam { .. } => 2,
            };
            // tensor k at its step 1 + k after 2 skipped steps
            let skipped = 2.0f32;
            let steps: Vec<f32> = (0..SIZES.len()).map(|k| 3.0 + k as f32).collect();
            // `flag`: the found_inf value; `guarded`: through apply_updates_guarded
            let run = |dev, flag: f32, guarded: bool| -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
                let ps: Vec<Tensor> = p0.iter().map(|p| t(p, &[p.len()], dev)).collect();
                let gs: Vec<Tensor> = g0.iter().map(|g| t(g, &[g.len()], dev)).collect();
                let states: Vec<Vec<Tensor>> = s0
                    .iter()
                    .map(|s| (0..nbuf).map(|_| t(s, &[s.len()], dev)).collect())
                    .collect();
                let (found, k) = (scalar(flag, dev), scalar(skipped, dev));
                if guarded {
                    let guard = StepGuard {
                        found_inf: &found,
                        skipped: &k,
                        steps: &steps,
                    };
                    Tensor::apply_updates_guarded(&ps, &gs, &states, &vec![rule; ps.len()], guard)
                        .unwrap();
                } else {
                    // the host's bias corrections for the same step counts
                    let rs: Vec<UpdateRule> = (0..ps.len())
                        .map(|i| match rule {
                            UpdateRule::Adam { beta1, beta2, .. } => {
                                let t = (steps[i] - skipped) as i32;
                                let mut r = rule;
                                if let UpdateRule::Adam { bc1, bc2, .. } = &mut r {
                                    *bc1 = (1.0 - f64::from(beta1).powi(t)) as f32;
                                    *bc2 = (1.0 - f64::from(beta2).powi(t)) as f32;
                                }
                                r
                            }
                            r => r,
                        })
                        .collect();
                    Tensor::apply_updates(&ps, &gs, &states, &rs).unwrap();
                }
                assert_eq!(found.item().unwrap(), flag, "the flag is only read");
                let pv = ps.iter().map(|p| p.to_vec().unwrap()).collect();
                let sv = states
                    .iter()
                    .flatten()
                    .map(|s| s.to_vec().unwrap())
                    .collect();
                (pv, sv)
            };
            let want = run(Device::Cpu, 0.0, false);
            for dev in camel_core::testing::devices() {
                // skipped: every parameter and buffer as it was, bit for bit
                let (p, s) = run(dev, 1.0, true);
                assert_eq!(
                    p, p0,
                    "rule {which} on {dev}: a skipped step wrote a parameter"
                );
                for (k, buf) in s.iter().enumerate() {
                    assert_eq!(
                        buf,
                        &s0[k / nbuf.max(1)],
                        "rule {which} on {dev}: buffer {k}"
                    );
                }
                // taken: the unguarded update's result (bias corrections computed apart)
                let (p, s) = run(dev, 0.0, true);
                let tol = Tol {
                    atol: 1e-6,
                    rtol: 1e-5,
                };
                for (k, (got, w)) in p.iter().zip(&want.0).enumerate() {
                    let what = format!("rule {which} tensor {k} ({} elements) on {dev}", SIZES[k]);
                    assert_close(&what, got, &f64s(w), tol);
                    assert_ne!(got, &p0[k], "{what}: no update");
                }
                for (k, (got, w)) in s.iter().zip(&want.1).enumerate() {
                    assert_close(
                        &format!("rule {which} buffer {k} on {dev}"),
                        got,
                        &f64s(w),
                        tol,
                    );
                }
            }
        }
    });
}

/// PyTorch's `_amp_update_scale_` on every device: back off and count a skipped step on an
/// overflow, grow after `growth_interval` finite steps in a row, never grow to infinity, and
/// clear the flag each time.
#[test]
fn the_loss_scale_backs_off_grows_and_saturates() {
    for dev in camel_core::testing::devices() {
        let (scale, tracker, found, skipped) = (
            scalar(8.0, dev),
            scalar(0.0, dev),
            scalar(0.0, dev),
            scalar(0.0, dev),
        );
        let read = || [&scale, &tracker, &found, &skipped].map(|t| t.item().unwrap());
        let step = |overflow: bool| {
            found.copy_from(&scalar(f32::from(overflow), dev)).unwrap();
            Tensor::update_loss_scale(&scale, &tracker, &found, &skipped, 2.0, 0.5, 3).unwrap();
            read()
        };
        assert_eq!(step(false), [8.0, 1.0, 0.0, 0.0], "{dev}");
        assert_eq!(step(false), [8.0, 2.0, 0.0, 0.0], "{dev}");
        assert_eq!(
            step(false),
            [16.0, 0.0, 0.0, 0.0],
            "{dev}: grown at the interval"
        );
        assert_eq!(step(false), [16.0, 1.0, 0.0, 0.0], "{dev}");
        assert_eq!(
            step(true),
            [8.0, 0.0, 0.0, 1.0],
            "{dev}: backed off, tracker reset"
        );
        assert_eq!(step(true), [4.0, 0.0, 0.0, 2.0], "{dev}");
        // a scale whose growth would overflow f32 stays
        let big = 2f32.powi(127);
        scale.copy_from(&scalar(big, dev)).unwrap();
        found.copy_from(&scalar(0.0, dev)).unwrap();
        Tensor::update_loss_scale(&scale, &tracker, &found, &skipped, 2.0, 0.5, 1).unwrap();
        assert_eq!(read(), [big, 0.0, 0.0, 2.0], "{dev}: no growth to inf");
    }
}

/// Bad arguments are errors that name the op and change nothing.
#[test]
fn loss_scaling_refuses_bad_arguments() {
    for dev in camel_core::testing::devices() {
        let ps = with_grads(&[vec![1.0, 2.0]], dev);
        let (s, f, g, k) = (
            scalar(4.0, dev),
            scalar(0.0, dev),
            scalar(0.0, dev),
            scalar(0.0, dev),
        );
        let wide = Tensor::zeros(&[2], dev).unwrap();
        let err = |r: camel_core::Result<()>| r.unwrap_err().to_string();
        let e = err(Tensor::unscale_grads(&ps, &wide, &f));
        assert!(
            e.contains("unscale_grads") && e.contains("scale must be an f32 tensor of shape [1]"),
            "{e}"
        );
        let e = err(Tensor::unscale_grads(&ps, &s, &s));
        assert!(e.contains("share a storage"), "{e}");
        let e = err(Tensor::update_loss_scale(&s, &g, &f, &k, 1.0, 0.5, 10));
        assert!(e.contains("growth_factor must be finite and > 1"), "{e}");
        let e = err(Tensor::update_loss_scale(&s, &g, &f, &k, 2.0, 1.0, 10));
        assert!(e.contains("backoff_factor must be in (0, 1)"), "{e}");
        let e = err(Tensor::update_loss_scale(&s, &g, &f, &k, 2.0, 0.5, 0));
        assert!(e.contains("growth_interval must be in [1, 2^24]"), "{e}");
        let e = err(Tensor::update_loss_scale(&s, &g, &f, &f, 2.0, 0.5, 10));
        assert!(e.contains("share a storage"), "{e}");
        let p = ps[0].detach();
        let grad = ps[0].grad().unwrap();
        let rule = rules()[2];
        let guard = StepGuard {
            found_inf: &f,
            skipped: &k,
            steps: &[],
        };
        let e = err(Tensor::apply_updates_guarded(
            std::slice::from_ref(&p),
            std::slice::from_ref(&grad),
            &[vec![p.zeros_like().unwrap(), p.zeros_like().unwrap()]],
            &[rule],
            guard,
        ));
        assert!(e.contains("1 parameters but 0 guard step counts"), "{e}");
        // nothing changed
        assert_eq!(grads_of(&ps), vec![vec![1.0, 2.0]], "{dev}");
        assert_eq!(
            [&s, &g, &f, &k].map(|t| t.item().unwrap()),
            [4.0, 0.0, 0.0, 0.0]
        );
        assert_eq!(p.to_vec().unwrap(), vec![0.5, 0.5]);
        if dev != Device::Cpu {
            let cpu = scalar(4.0, Device::Cpu);
            let e = err(Tensor::unscale_grads(&ps, &cpu, &f));
            assert!(e.contains("unscale_grads"), "{e}");
        }
    }
}

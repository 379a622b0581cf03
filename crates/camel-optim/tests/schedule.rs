//! Learning-rate schedules against hand-computed values (warmup, its end, the cosine's quarter
//! and midpoint, the floor), step decay, bad schedules, and a schedule driving an optimizer.

use camel_nn::testing::devices;
use camel_nn::{Parameter, Result, Tensor};
use camel_optim::{Adam, LrSchedule, Optimizer, Sgd};

fn close(got: f32, want: f64) {
    assert!(
        (f64::from(got) - want).abs() <= 1e-6 * want.abs().max(1e-9),
        "got {got}, want {want}"
    );
}

const RECIPE: LrSchedule = LrSchedule::WarmupCosine {
    max_lr: 1e-3,
    min_lr: 1e-4,
    warmup: 100,
    total: 5000,
};

#[test]
fn warmup_cosine_is_nanogpts_get_lr() {
    // warmup: max_lr · (it + 1) / (warmup + 1)
    close(RECIPE.lr(0), 1e-3 / 101.0);
    close(RECIPE.lr(49), 1e-3 * 50.0 / 101.0);
    close(RECIPE.lr(99), 1e-3 * 100.0 / 101.0);
    // the warmup's end: max_lr
    close(RECIPE.lr(100), 1e-3);
    // a quarter of the decay: coeff = (1 + cos(π/4)) / 2
    let q = 0.5 * (1.0 + std::f64::consts::FRAC_1_SQRT_2);
    close(RECIPE.lr(100 + 4900 / 4), 1e-4 + q * 9e-4);
    // the midpoint: halfway between max_lr and min_lr
    close(RECIPE.lr(2550), 5.5e-4);
    // the floor at total and after it
    close(RECIPE.lr(5000), 1e-4);
    close(RECIPE.lr(5001), 1e-4);
    close(RECIPE.lr(1_000_000), 1e-4);
    // decreasing through the decay
    for s in 100..5000 {
        assert!(RECIPE.lr(s + 1) <= RECIPE.lr(s), "step {s}");
    }
}

#[test]
fn warmup_cosine_edges() {
    let no_warmup = LrSchedule::WarmupCosine {
        max_lr: 0.5,
        min_lr: 0.0,
        warmup: 0,
        total: 10,
    };
    close(no_warmup.lr(0), 0.5);
    close(no_warmup.lr(5), 0.25);
    assert_eq!(no_warmup.lr(10), 0.0);
    // total ≤ warmup: the floor straight after the warmup, never 0/0
    let short = LrSchedule::WarmupCosine {
        max_lr: 1.0,
        min_lr: 0.1,
        warmup: 10,
        total: 10,
    };
    close(short.lr(9), 10.0 / 11.0);
    close(short.lr(10), 0.1);
}

#[test]
fn step_decay_and_constant() {
    let s = LrSchedule::StepDecay {
        lr: 0.1,
        step_size: 10,
        gamma: 0.5,
    };
    close(s.lr(0), 0.1);
    close(s.lr(9), 0.1);
    close(s.lr(10), 0.05);
    close(s.lr(25), 0.025);
    close(s.lr(100), 0.1 / 1024.0);
    let c = LrSchedule::Constant { lr: 3e-4 };
    assert_eq!(c.lr(0), 3e-4);
    assert_eq!(c.lr(123_456), 3e-4);
}

#[test]
fn bad_schedules_are_errors() {
    let bad = [
        LrSchedule::Constant { lr: f32::NAN },
        LrSchedule::Constant { lr: -1.0 },
        LrSchedule::WarmupCosine {
            max_lr: 1e-4,
            min_lr: 1e-3,
            warmup: 1,
            total: 2,
        },
        LrSchedule::WarmupCosine {
            max_lr: f32::INFINITY,
            min_lr: 0.0,
            warmup: 1,
            total: 2,
        },
        LrSchedule::StepDecay {
            lr: 0.1,
            step_size: 0,
            gamma: 0.5,
        },
        LrSchedule::StepDecay {
            lr: 0.1,
            step_size: 1,
            gamma: 0.0,
        },
        LrSchedule::StepDecay {
            lr: 0.1,
            step_size: 1,
            gamma: 1.5,
        },
    ];
    for s in bad {
        let e = s.check().unwrap_err().to_string();
        assert!(e.contains("LrSchedule"), "{s:?}: {e}");
        let mut opt = Sgd::new(Vec::new(), 0.1).unwrap();
        assert!(s.apply(&mut opt, 0).is_err(), "{s:?}");
        assert_eq!(opt.lr(), 0.1, "{s:?}: a bad schedule changed the rate");
    }
    assert!(RECIPE.check().is_ok());
}

/// A schedule drives any optimizer through `set_lr`: SGD without momentum moves the parameter
/// by exactly `lr(step) · g` at each step.
#[test]
fn a_schedule_drives_any_optimizer() -> Result<()> {
    for dev in devices() {
        let p = Parameter::new(Tensor::zeros(&[3], dev)?)?;
        let c = Tensor::from_vec(vec![1.0, -2.0, 0.5], &[3], dev)?;
        let mut opt = Sgd::new(vec![p.clone()], 1.0)?;
        let s = LrSchedule::WarmupCosine {
            max_lr: 0.5,
            min_lr: 0.05,
            warmup: 2,
            total: 6,
        };
        let mut want = [0.0f64; 3];
        for step in 0..8 {
            let lr = s.apply(&mut opt, step)?;
            assert_eq!(lr, s.lr(step));
            assert_eq!(opt.lr(), lr);
            opt.zero_grad();
            p.tensor().mul(&c)?.sum()?.backward()?;
            opt.step()?;
            for (w, g) in want.iter_mut().zip([1.0, -2.0, 0.5]) {
                *w -= f64::from(lr) * g;
            }
        }
        for (got, w) in p.tensor().to_vec()?.iter().zip(want) {
            assert!((f64::from(*got) - w).abs() < 1e-6, "{dev:?}: {got} vs {w}");
        }
        let mut adam = Adam::adamw(vec![p], 1e-3, 0.1)?;
        assert_eq!(RECIPE.apply(&mut adam, 100)?, 1e-3);
        assert_eq!(adam.lr(), 1e-3);
        let dyn_opt: &mut dyn Optimizer = &mut adam;
        RECIPE.apply(dyn_opt, 5000)?;
        assert_eq!(adam.lr(), 1e-4);
    }
    Ok(())
}

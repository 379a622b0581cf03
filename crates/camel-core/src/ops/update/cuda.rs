//! The optimizer updates on the GPU: the optimizer ladder (`kernels/optim`), one launch for
//! many tensors.

use super::{Guard, UpdateKernels, UpdateRule};
use crate::backend::cuda::{alloc, expect, CudaStorage, Family};
use crate::config::step;
use crate::{DType, Result};
use camel_cuda::kernels as k;
use camel_cuda::DevPtr;

impl UpdateKernels for CudaStorage {
    fn update_multi(
        ps: &mut [&mut Self],
        gs: &[&Self],
        states: &mut [Vec<&mut Self>],
        rules: &[UpdateRule],
        guard: Option<Guard<'_, Self>>,
    ) -> Result<()> {
        let pc: Vec<&CudaStorage> = ps.iter().map(|p| &**p).collect();
        let sc: Vec<Vec<&CudaStorage>> = states
            .iter()
            .map(|st| st.iter().map(|s| &**s).collect())
            .collect();
        let (kg, steps) = match &guard {
            Some(g) => {
                expect("optimizer step", g.found_inf, DType::F32)?;
                expect("optimizer step", g.skipped, DType::F32)?;
                let kg = k::optim::Guard {
                    found_inf: g.found_inf.ptr(),
                    skipped: g.skipped.ptr(),
                };
                (kg, Some(g.steps))
            }
            None => (k::optim::Guard::NONE, None),
        };
        update_multi(&pc, gs, &sc, rules, kg, steps)
    }

    fn grad_unscale(gs: &mut [&mut Self], scale: &Self, found_inf: &mut Self) -> Result<()> {
        let op = "unscale_grads";
        for g in gs.iter() {
            expect(op, g, DType::F32)?;
        }
        expect(op, scale, DType::F32)?;
        expect(op, found_inf, DType::F32)?;
        let list: Vec<(DevPtr, usize)> = gs.iter().map(|g| (g.ptr(), g.len)).collect();
        k::optim::grad_unscale(&gs[0].dev, &list, scale.ptr(), found_inf.ptr())?;
        Ok(())
    }

    fn loss_scale_update(
        scale: &mut Self,
        growth_tracker: &mut Self,
        found_inf: &mut Self,
        skipped: &mut Self,
        growth_factor: f32,
        backoff_factor: f32,
        growth_interval: u32,
    ) -> Result<()> {
        let op = "update_loss_scale";
        for t in [&*scale, &*growth_tracker, &*found_inf, &*skipped] {
            expect(op, t, DType::F32)?;
        }
        k::optim::loss_scale_update(
            &scale.dev,
            scale.ptr(),
            growth_tracker.ptr(),
            found_inf.ptr(),
            skipped.ptr(),
            growth_factor,
            backoff_factor,
            growth_interval as i32,
        )?;
        Ok(())
    }

    fn grad_norm_clip(gs: &mut [&mut Self], max_norm: f32) -> Result<Self> {
        let op = "clip_grad_norm";
        for g in gs.iter() {
            expect(op, g, DType::F32)?;
        }
        let list: Vec<(DevPtr, usize)> = gs.iter().map(|g| (g.ptr(), g.len)).collect();
        let dev = &gs[0].dev;
        let scratch_len = k::optim::grad_norm_scratch_len(&list);
        let scratch = alloc(dev, scratch_len, DType::F32)?;
        let norm = alloc(dev, 1, DType::F32)?;
        k::optim::grad_norm_clip(dev, &list, max_norm, scratch.ptr(), scratch_len, norm.ptr())?;
        Ok(norm)
    }
}

/// One optimizer update in place (`step`: the tensor's guarded step count).
fn update(
    p: &CudaStorage,
    g: &CudaStorage,
    state: &[&CudaStorage],
    rule: &UpdateRule,
    guard: k::optim::Guard,
    step: f32,
) -> Result<()> {
    expect("optimizer step", p, DType::F32)?;
    expect("optimizer step", g, DType::F32)?;
    match *rule {
        UpdateRule::Sgd {
            lr,
            momentum,
            weight_decay,
        } => {
            let buf = if momentum != 0.0 {
                state[0].ptr()
            } else {
                DevPtr(0)
            };
            k::optim::sgd_f32(
                &p.dev,
                p.ptr(),
                g.ptr(),
                buf,
                p.len,
                lr,
                momentum,
                weight_decay,
                guard,
            )
        }
        UpdateRule::Adam {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            bc1,
            bc2,
        } => k::optim::adam_f32(
            &p.dev,
            p.ptr(),
            g.ptr(),
            state[0].ptr(),
            state[1].ptr(),
            p.len,
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            bc1,
            bc2,
            guard,
            step,
        ),
    }?;
    Ok(())
}

/// Optimizer updates of many parameters. At a step with multi-tensor kernels (2 to 4, see
/// `k::optim::STEPS`), and when every rule is of one kind with the same hyper-parameters
/// (Adam's bias corrections and every weight decay may differ per tensor: the table carries
/// them), one launch for all of them; otherwise one [`update`] per tensor.
fn update_multi(
    ps: &[&CudaStorage],
    gs: &[&CudaStorage],
    states: &[Vec<&CudaStorage>],
    rules: &[UpdateRule],
    guard: k::optim::Guard,
    steps: Option<&[f32]>,
) -> Result<()> {
    let step_of = |i: usize| steps.map_or(0.0, |s| s[i]);
    let per_tensor = || -> Result<()> {
        for i in 0..ps.len() {
            update(ps[i], gs[i], &states[i], &rules[i], guard, step_of(i))?;
        }
        Ok(())
    };
    let Some(first) = rules.first() else {
        return Ok(());
    };
    // The rule without what the table carries per tensor.
    let strip = |r: &UpdateRule| {
        let mut r = *r;
        match &mut r {
            UpdateRule::Adam {
                bc1,
                bc2,
                weight_decay,
                ..
            } => (*bc1, *bc2, *weight_decay) = (1.0, 1.0, 0.0),
            UpdateRule::Sgd { weight_decay, .. } => *weight_decay = 0.0,
        }
        r
    };
    let uniform = rules.iter().all(|r| strip(r) == strip(first));
    let Some((sgd_multi, adam_multi)) = k::optim::at(step(Family::Optim)).multi else {
        return per_tensor();
    };
    if !uniform {
        return per_tensor();
    }
    for (p, g) in ps.iter().zip(gs) {
        expect("optimizer step", p, DType::F32)?;
        expect("optimizer step", g, DType::F32)?;
    }
    let dev = &ps[0].dev;
    let mut ts = Vec::with_capacity(ps.len());
    for i in 0..ps.len() {
        let (bc1, bc2, wd) = match rules[i] {
            UpdateRule::Adam {
                bc1,
                bc2,
                weight_decay,
                ..
            } => (bc1, bc2, weight_decay),
            UpdateRule::Sgd { weight_decay, .. } => (1.0, 1.0, weight_decay),
        };
        let st = &states[i];
        ts.push(k::optim::MultiTensor {
            p: ps[i].ptr(),
            g: gs[i].ptr(),
            s1: st.first().map_or(DevPtr(0), |s| s.ptr()),
            s2: st.get(1).map_or(DevPtr(0), |s| s.ptr()),
            n: ps[i].len,
            bc1,
            bc2,
            wd,
            step: step_of(i),
        });
    }
    match *first {
        UpdateRule::Sgd { lr, momentum, .. } => sgd_multi(dev, &ts, lr, momentum, guard)?,
        UpdateRule::Adam {
            lr,
            beta1,
            beta2,
            eps,
            decoupled,
            ..
        } => adam_multi(dev, &ts, lr, beta1, beta2, eps, decoupled, guard)?,
    }
    Ok(())
}

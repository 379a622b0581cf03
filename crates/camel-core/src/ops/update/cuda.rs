//! The optimizer updates on the GPU: the optimizer ladder (`kernels/optim`), one launch for
//! many tensors.

use super::{UpdateKernels, UpdateRule};
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
    ) -> Result<()> {
        let pc: Vec<&CudaStorage> = ps.iter().map(|p| &**p).collect();
        let sc: Vec<Vec<&CudaStorage>> = states
            .iter()
            .map(|st| st.iter().map(|s| &**s).collect())
            .collect();
        update_multi(&pc, gs, &sc, rules)
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

/// One optimizer update in place.
fn update(
    p: &CudaStorage,
    g: &CudaStorage,
    state: &[&CudaStorage],
    rule: &UpdateRule,
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
) -> Result<()> {
    let per_tensor = || -> Result<()> {
        for i in 0..ps.len() {
            update(ps[i], gs[i], &states[i], &rules[i])?;
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
        });
    }
    match *first {
        UpdateRule::Sgd { lr, momentum, .. } => sgd_multi(dev, &ts, lr, momentum)?,
        UpdateRule::Adam {
            lr,
            beta1,
            beta2,
            eps,
            decoupled,
            ..
        } => adam_multi(dev, &ts, lr, beta1, beta2, eps, decoupled)?,
    }
    Ok(())
}

//! The optimizer step: SGD and Adam/AdamW updates of parameters in place, many parameters at
//! once. Each backend updates them its own way (`cpu.rs` one tensor at a time; `cuda.rs` one
//! kernel launch for all of them where the rules allow).

use crate::storage::Storage;
use crate::{Error, Result, Tensor};
use std::collections::HashSet;
use std::sync::Arc;

mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

/// Hyper-parameters of one optimizer update, shared by the CPU and CUDA implementations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UpdateRule {
    /// SGD: `buf = momentum*buf + (g + wd*p); p -= lr*buf` (buf = g + wd*p when momentum is 0).
    Sgd {
        /// Learning rate.
        lr: f32,
        /// Momentum factor; 0 disables the momentum buffer.
        momentum: f32,
        /// L2 weight decay added to the gradient.
        weight_decay: f32,
    },
    /// Adam (L2 weight decay added to the gradient) or AdamW (decoupled decay), with bias correction.
    Adam {
        /// Learning rate.
        lr: f32,
        /// Decay rate of the first-moment (mean) estimate.
        beta1: f32,
        /// Decay rate of the second-moment (uncentred variance) estimate.
        beta2: f32,
        /// Added to the denominator for numerical stability.
        eps: f32,
        /// Weight decay factor.
        weight_decay: f32,
        /// `true` for AdamW's decoupled decay (`p -= lr*wd*p`), `false` for L2 decay on the gradient.
        decoupled: bool,
        /// 1 - beta1^t
        bc1: f32,
        /// 1 - beta2^t
        bc2: f32,
    },
}

/// The optimizer-update primitives of a backend (`cpu.rs`, `cuda.rs`).
pub(crate) trait UpdateKernels: Sized {
    /// One update of every `ps[i]` in place from its gradient `gs[i]`, its state buffers
    /// `states[i]` (modified) and its rule `rules[i]`.
    fn update_multi(
        ps: &mut [&mut Self],
        gs: &[&Self],
        states: &mut [Vec<&mut Self>],
        rules: &[UpdateRule],
    ) -> Result<()>;
}

/// [`UpdateKernels::update_multi`] on the storages' device (all on one device, checked here).
pub(crate) fn update_multi(
    ps: &mut [&mut Storage],
    gs: &[&Storage],
    states: &mut [Vec<&mut Storage>],
    rules: &[UpdateRule],
) -> Result<()> {
    let op = "optimizer step";
    let Some(first) = ps.first().map(|p| p.device()) else {
        return Ok(());
    };
    for (i, p) in ps.iter().enumerate() {
        let all = std::iter::once(&**p)
            .chain(std::iter::once(gs[i]))
            .chain(states[i].iter().map(|s| &**s));
        for s in all {
            if s.device() != first {
                return Err(Error::DeviceMismatch {
                    op,
                    lhs: first,
                    rhs: s.device(),
                });
            }
        }
    }
    macro_rules! on_device {
        ($variant:path) => {{
            let mut pv = Vec::with_capacity(ps.len());
            for p in ps.iter_mut() {
                let $variant(p) = &mut **p else {
                    unreachable!("devices checked above")
                };
                pv.push(p);
            }
            let mut gv = Vec::with_capacity(gs.len());
            for g in gs.iter() {
                let $variant(g) = g else {
                    unreachable!("devices checked above")
                };
                gv.push(g);
            }
            let mut sv: Vec<Vec<_>> = Vec::with_capacity(states.len());
            for st in states.iter_mut() {
                let mut v = Vec::with_capacity(st.len());
                for s in st.iter_mut() {
                    let $variant(s) = &mut **s else {
                        unreachable!("devices checked above")
                    };
                    v.push(s);
                }
                sv.push(v);
            }
            UpdateKernels::update_multi(&mut pv, &gv, &mut sv, rules)
        }};
    }
    #[allow(irrefutable_let_patterns)]
    match first {
        crate::Device::Cpu => on_device!(Storage::Cpu),
        #[cfg(feature = "cuda")]
        crate::Device::Cuda(_) => on_device!(Storage::Cuda),
        #[cfg(not(feature = "cuda"))]
        crate::Device::Cuda(_) => unreachable!("no CUDA storage without the `cuda` feature"),
    }
}

impl Tensor {
    /// One optimizer update of every parameter in `params` in place: `grads[i]` is the gradient
    /// of `params[i]`, `states[i]` its state buffers (`[momentum]` for SGD with momentum,
    /// `[m, v]` for Adam, else none) and `rules[i]` its rule. All on one device. On a GPU this
    /// is one kernel launch for all of them (the optimizer ladder's steps 2 to 4; step 1
    /// launches per tensor; see `camel_cuda::kernels::ladder::Family::Optim`).
    /// Not recorded by autograd.
    pub fn apply_updates(
        params: &[Tensor],
        grads: &[Tensor],
        states: &[Vec<Tensor>],
        rules: &[UpdateRule],
    ) -> Result<()> {
        let op = "optimizer step";
        let n = params.len();
        if grads.len() != n || states.len() != n || rules.len() != n {
            return Err(Error::InvalidArgument {
                op,
                msg: format!(
                    "{n} parameters but {} gradients, {} state lists and {} rules",
                    grads.len(),
                    states.len(),
                    rules.len()
                ),
            });
        }
        // Every storage written or read must be distinct (each is locked once below).
        let mut seen = HashSet::new();
        for i in 0..n {
            let p = &params[i];
            let need = match rules[i] {
                UpdateRule::Sgd { momentum, .. } => usize::from(momentum != 0.0),
                UpdateRule::Adam { .. } => 2,
            };
            if states[i].len() < need {
                return Err(Error::InvalidArgument {
                    op,
                    msg: format!(
                        "parameter {i} has {} state buffers, its rule needs {need}",
                        states[i].len()
                    ),
                });
            }
            for t in std::iter::once(&grads[i]).chain(states[i].iter()) {
                if t.shape() != p.shape() {
                    return Err(Error::ShapeMismatch {
                        op,
                        lhs: p.shape().to_vec(),
                        rhs: t.shape().to_vec(),
                        expected: "gradient and state of the parameter's shape".into(),
                    });
                }
            }
            for t in std::iter::once(p)
                .chain(std::iter::once(&grads[i]))
                .chain(states[i].iter())
            {
                if !seen.insert(Arc::as_ptr(t.storage_arc()) as usize) {
                    return Err(Error::InvalidArgument {
                        op,
                        msg: format!(
                            "parameter {i}: a parameter, gradient or state buffer appears twice"
                        ),
                    });
                }
            }
        }
        for t in params.iter().chain(states.iter().flatten()) {
            t.expect_whole_storage(op)?;
        }
        let mut p_locks: Vec<_> = params.iter().map(|t| t.storage_arc().write()).collect();
        let g_locks = grads
            .iter()
            .map(|t| t.storage())
            .collect::<Result<Vec<_>>>()?;
        let mut s_locks: Vec<Vec<_>> = states
            .iter()
            .map(|st| st.iter().map(|t| t.storage_arc().write()).collect())
            .collect();
        let mut ps: Vec<&mut Storage> = p_locks.iter_mut().map(|l| &mut **l).collect();
        let gs: Vec<&Storage> = g_locks.iter().map(|l| &**l).collect();
        let mut ss: Vec<Vec<&mut Storage>> = s_locks
            .iter_mut()
            .map(|st| st.iter_mut().map(|l| &mut **l).collect())
            .collect();
        update_multi(&mut ps, &gs, &mut ss, rules)?;
        for t in params.iter().chain(states.iter().flatten()) {
            t.storage_arc().bump_version();
        }
        Ok(())
    }
}

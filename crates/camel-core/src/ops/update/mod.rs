//! The optimizer step: SGD and Adam/AdamW updates of parameters in place, many parameters at
//! once, and gradient clipping by global norm. Each backend updates them its own way (`cpu.rs`
//! one tensor at a time; `cuda.rs` one kernel launch for all of them where the rules allow, and
//! three launches for the clipping of any number of gradients).

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

    /// The global L2 norm of every element of `gs` as a one-element storage, with each `gs[i]`
    /// multiplied in place by `min(1, max_norm / (norm + 1e-6))` (NaN when the norm is NaN).
    /// `gs` is not empty.
    fn grad_norm_clip(gs: &mut [&mut Self], max_norm: f32) -> Result<Self>;
}

/// The clipping factor of a gradient norm (PyTorch's `clip_grad_norm_`): `max_norm / (norm +
/// 1e-6)` capped at 1, NaN when the norm is NaN (so a NaN gradient is not hidden).
pub(crate) fn clip_scale(norm: f32, max_norm: f32) -> f32 {
    let coef = max_norm / (norm + 1e-6);
    if coef.is_nan() {
        coef
    } else {
        coef.min(1.0)
    }
}

/// [`UpdateKernels::grad_norm_clip`] on the storages' device (all on one device, checked here).
fn grad_norm_clip(gs: &mut [&mut Storage], max_norm: f32) -> Result<Storage> {
    let op = "clip_grad_norm";
    let first = gs[0].device();
    for g in gs.iter() {
        if g.device() != first {
            return Err(Error::DeviceMismatch {
                op,
                lhs: first,
                rhs: g.device(),
            });
        }
    }
    macro_rules! on_device {
        ($variant:path) => {{
            let mut gv = Vec::with_capacity(gs.len());
            for g in gs.iter_mut() {
                let $variant(g) = &mut **g else {
                    unreachable!("devices checked above")
                };
                gv.push(g);
            }
            UpdateKernels::grad_norm_clip(&mut gv, max_norm).map($variant)
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

    /// Clips the gradients of `params` by their global L2 norm, in place, as PyTorch's
    /// `torch.nn.utils.clip_grad_norm_(params, max_norm)`: computes `norm = ‖(g₁, …, gₙ)‖₂` over
    /// every element of every gradient, multiplies each gradient by
    /// `min(1, max_norm / (norm + 1e-6))` and returns `norm` as a tensor of shape `[1]` on the
    /// gradients' device, without reading it on the host. Parameters
    /// without a gradient are skipped; with none, the norm is 0 on the first parameter's device
    /// (the CPU when `params` is empty). A parameter listed twice counts once.
    ///
    /// On a GPU it is one pass over all gradients (three kernel launches for any number of
    /// tensors up to 60, `kernels/optim/grad_norm.cu`): the sum of squares accumulated in f32 per
    /// chunk, the partial sums added in a fixed order (the same norm on every run), and the
    /// scale read from the device. A NaN or inf gradient element gives a NaN or inf norm and NaN
    /// gradients, not a silently skipped step. `max_norm` must be > 0 (`f32::INFINITY` only
    /// measures the norm).
    ///
    /// The gradients are written in place and their storages' version counters bumped (as the
    /// optimizer's update does); a gradient that shares its storage with another tensor, or is
    /// a view, is first replaced by its own copy, so no other tensor changes.
    pub fn clip_grad_norm(params: &[Tensor], max_norm: f32) -> Result<Tensor> {
        let op = "clip_grad_norm";
        if max_norm.is_nan() || max_norm <= 0.0 {
            return Err(Error::InvalidArgument {
                op,
                msg: format!("max_norm must be > 0, got {max_norm}"),
            });
        }
        let mut grads: Vec<(usize, Tensor)> = Vec::new();
        let mut ids = HashSet::new();
        for (i, p) in params.iter().enumerate() {
            if !ids.insert(p.id()) {
                continue; // a parameter listed twice counts once
            }
            let Some(g) = p.grad() else { continue };
            if g.dtype() != crate::DType::F32 {
                return Err(Error::DTypeMismatch {
                    op,
                    expected: crate::DType::F32,
                    got: g.dtype(),
                });
            }
            if let Some((_, g0)) = grads.first() {
                if g.device() != g0.device() {
                    return Err(Error::DeviceMismatch {
                        op,
                        lhs: g0.device(),
                        rhs: g.device(),
                    });
                }
            }
            grads.push((i, g));
        }
        let Some((_, g0)) = grads.first() else {
            let device = params.first().map_or(crate::Device::Cpu, |p| p.device());
            return Tensor::zeros(&[1], device);
        };
        let device = g0.device();
        // Every gradient written must be its own whole storage: a view, or a storage another
        // tensor holds too (one gradient passed to two inputs by a backward), gets a copy first.
        let mut owned: Vec<Tensor> = Vec::with_capacity(grads.len());
        let mut replace: Vec<(usize, Tensor)> = Vec::new();
        let mut seen = HashSet::new();
        for (i, g) in grads {
            let cell = g.storage_arc();
            let dense = g.layout().is_dense(g.raw_storage().len());
            if dense && Arc::strong_count(cell) == 1 {
                // Only this gradient holds the storage, so it is never locked twice.
                if seen.insert(Arc::as_ptr(cell) as usize) {
                    owned.push(g);
                }
                continue;
            }
            let copy = match g.storage()? {
                crate::tensor::StorageRef::Copied(s) => s,
                crate::tensor::StorageRef::Shared(s) => s.to_device(device)?,
            };
            let t = Tensor::from_storage(copy, g.shape().to_vec());
            replace.push((i, t.clone()));
            owned.push(t);
        }
        let mut locks: Vec<_> = owned.iter().map(|t| t.storage_arc().write()).collect();
        let mut gs: Vec<&mut Storage> = locks.iter_mut().map(|l| &mut **l).collect();
        let norm = grad_norm_clip(&mut gs, max_norm)?;
        drop(gs);
        drop(locks);
        for (i, t) in replace {
            params[i].set_grad(Some(t));
        }
        for t in &owned {
            t.storage_arc().bump_version();
        }
        Ok(Tensor::from_storage(norm, vec![1]))
    }
}

//! The optimizer step: SGD and Adam/AdamW updates of parameters in place, many parameters at
//! once, gradient clipping by global norm, and the device side of dynamic loss scaling
//! (gradients unscaled with an overflow flag, updates skipped on that flag, the scale's update).
//! Each backend updates them its own way (`cpu.rs` one tensor at a time; `cuda.rs` one kernel
//! launch for all of them where the rules allow, three launches for the clipping of any number
//! of gradients, and no host read of the overflow flag).

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

/// What makes an optimizer update conditional on the device, for dynamic loss scaling
/// (`camel_optim::GradScaler` builds it): the update writes nothing when `found_inf` holds a
/// non-zero value, and Adam counts its steps as `t = steps[i] − skipped`, so a skipped step
/// does not count, with the bias corrections `1 − βᵗ` computed on the device as
/// `−expm1(t·ln β)`. Neither scalar is read on the host.
#[derive(Clone, Copy, Debug)]
pub struct StepGuard<'a> {
    /// `[1]` f32 on the parameters' device, set by [`Tensor::unscale_grads`] on an overflow.
    pub found_inf: &'a Tensor,
    /// `[1]` f32 on the parameters' device: the steps skipped so far (counted by
    /// [`Tensor::update_loss_scale`]).
    pub skipped: &'a Tensor,
    /// Each parameter's step count including the skipped steps (Adam's `t` before `skipped` is
    /// taken off), one per parameter.
    pub steps: &'a [f32],
}

/// A [`StepGuard`] as storages of one backend.
pub(crate) struct Guard<'a, S> {
    pub found_inf: &'a S,
    pub skipped: &'a S,
    pub steps: &'a [f32],
}

/// `1 − βᵗ` as `−expm1(t·ln β)`, the bias correction of a guarded Adam step (no cancellation
/// when `βᵗ` is close to 1), as the CUDA kernels compute it.
pub(crate) fn guarded_bias(beta: f32, t: f32) -> f32 {
    -(t * beta.ln()).exp_m1()
}

/// The optimizer-update primitives of a backend (`cpu.rs`, `cuda.rs`).
pub(crate) trait UpdateKernels: Sized {
    /// One update of every `ps[i]` in place from its gradient `gs[i]`, its state buffers
    /// `states[i]` (modified) and its rule `rules[i]`; with a `guard`, none when its flag is
    /// set, and Adam's bias corrections from its step counts.
    fn update_multi(
        ps: &mut [&mut Self],
        gs: &[&Self],
        states: &mut [Vec<&mut Self>],
        rules: &[UpdateRule],
        guard: Option<Guard<'_, Self>>,
    ) -> Result<()>;

    /// Every `gs[i]` multiplied in place by `1 / scale[0]`; `found_inf[0] = 1` when any result
    /// is inf or NaN (never cleared here). `gs` is not empty.
    fn grad_unscale(gs: &mut [&mut Self], scale: &Self, found_inf: &mut Self) -> Result<()>;

    /// The loss scale's update after a guarded step ([`Tensor::update_loss_scale`]), each
    /// argument one f32.
    #[allow(clippy::too_many_arguments)]
    fn loss_scale_update(
        scale: &mut Self,
        growth_tracker: &mut Self,
        found_inf: &mut Self,
        skipped: &mut Self,
        growth_factor: f32,
        backoff_factor: f32,
        growth_interval: u32,
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

/// [`UpdateKernels::grad_unscale`] on the storages' device (the gradients on one device, the
/// scalars on it too: checked by the caller).
fn grad_unscale(gs: &mut [&mut Storage], scale: &Storage, found_inf: &mut Storage) -> Result<()> {
    macro_rules! on_device {
        ($variant:path) => {{
            let mut gv = Vec::with_capacity(gs.len());
            for g in gs.iter_mut() {
                let $variant(g) = &mut **g else {
                    unreachable!("devices checked by the caller")
                };
                gv.push(g);
            }
            let ($variant(scale), $variant(found_inf)) = (scale, found_inf) else {
                unreachable!("devices checked by the caller")
            };
            UpdateKernels::grad_unscale(&mut gv, scale, found_inf)
        }};
    }
    #[allow(irrefutable_let_patterns)]
    match gs[0].device() {
        crate::Device::Cpu => on_device!(Storage::Cpu),
        #[cfg(feature = "cuda")]
        crate::Device::Cuda(_) => on_device!(Storage::Cuda),
        #[cfg(not(feature = "cuda"))]
        crate::Device::Cuda(_) => unreachable!("no CUDA storage without the `cuda` feature"),
    }
}

/// [`UpdateKernels::loss_scale_update`] on the storages' device (all on one, checked by the
/// caller).
#[allow(clippy::too_many_arguments)]
fn loss_scale_update(
    scale: &mut Storage,
    growth_tracker: &mut Storage,
    found_inf: &mut Storage,
    skipped: &mut Storage,
    growth_factor: f32,
    backoff_factor: f32,
    growth_interval: u32,
) -> Result<()> {
    macro_rules! on_device {
        ($variant:path) => {{
            let ($variant(s), $variant(g), $variant(f), $variant(k)) =
                (scale, growth_tracker, found_inf, skipped)
            else {
                unreachable!("devices checked by the caller")
            };
            UpdateKernels::loss_scale_update(
                s,
                g,
                f,
                k,
                growth_factor,
                backoff_factor,
                growth_interval,
            )
        }};
    }
    #[allow(irrefutable_let_patterns)]
    match scale.device() {
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
    guard: Option<Guard<'_, Storage>>,
) -> Result<()> {
    let op = "optimizer step";
    let Some(first) = ps.first().map(|p| p.device()) else {
        return Ok(());
    };
    let scalars: Vec<&Storage> = guard
        .iter()
        .flat_map(|g| [g.found_inf, g.skipped])
        .collect();
    for (i, p) in ps.iter().enumerate() {
        let all = std::iter::once(&**p)
            .chain(std::iter::once(gs[i]))
            .chain(states[i].iter().map(|s| &**s))
            .chain(scalars.iter().copied());
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
            let guard = match guard {
                Some(g) => {
                    let ($variant(found_inf), $variant(skipped)) = (g.found_inf, g.skipped) else {
                        unreachable!("devices checked above")
                    };
                    Some(Guard {
                        found_inf,
                        skipped,
                        steps: g.steps,
                    })
                }
                None => None,
            };
            UpdateKernels::update_multi(&mut pv, &gv, &mut sv, rules, guard)
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

/// Checks a `[1]` f32 device scalar of a loss-scaled step, named `name`, on `device`: a whole
/// storage, as it is written in place.
fn check_scalar(op: &'static str, name: &str, t: &Tensor, device: crate::Device) -> Result<()> {
    if t.dtype() != crate::DType::F32 || t.shape() != [1] {
        return Err(Error::InvalidArgument {
            op,
            msg: format!(
                "{name} must be an f32 tensor of shape [1], got {} {:?}",
                t.dtype(),
                t.shape()
            ),
        });
    }
    if t.device() != device {
        return Err(Error::DeviceMismatch {
            op,
            lhs: device,
            rhs: t.device(),
        });
    }
    t.expect_whole_storage(op)
}

/// Every storage of `ts` is a different one (each is locked once).
fn distinct(op: &'static str, what: &str, ts: &[&Tensor]) -> Result<()> {
    let mut seen = HashSet::new();
    for t in ts {
        if !seen.insert(Arc::as_ptr(t.storage_arc()) as usize) {
            return Err(Error::InvalidArgument {
                op,
                msg: format!("{what} share a storage"),
            });
        }
    }
    Ok(())
}

/// The gradients of `params` to write in place, for `op`: each parameter's gradient once (a
/// parameter listed twice counts once, one without a gradient is skipped), all f32 on one
/// device. A gradient that is a view, or whose storage another tensor holds too (one gradient
/// passed to two inputs by a backward), is replaced by its own copy first, so no other tensor
/// changes: the copies are returned beside the parameter index they belong to, to be set as
/// that parameter's gradient once written.
type OwnedGrads = (Vec<Tensor>, Vec<(usize, Tensor)>);
fn owned_grads(op: &'static str, params: &[Tensor]) -> Result<OwnedGrads> {
    let mut grads: Vec<(usize, Tensor)> = Vec::new();
    let mut ids = HashSet::new();
    for (i, p) in params.iter().enumerate() {
        if !ids.insert(p.id()) {
            continue;
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
            crate::tensor::StorageRef::Shared(s) => s.to_device(g.device())?,
        };
        let t = Tensor::from_storage(copy, g.shape().to_vec());
        replace.push((i, t.clone()));
        owned.push(t);
    }
    Ok((owned, replace))
}

/// Sets the copies [`owned_grads`] made as their parameters' gradients and bumps the version of
/// every gradient written.
fn finish_grads(params: &[Tensor], owned: &[Tensor], replace: Vec<(usize, Tensor)>) {
    for (i, t) in replace {
        params[i].set_grad(Some(t));
    }
    for t in owned {
        t.storage_arc().bump_version();
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
        apply(params, grads, states, rules, None)
    }

    /// [`Tensor::apply_updates`] guarded by `guard` for dynamic loss scaling: on the device,
    /// nothing is written when `guard.found_inf` is not 0, and Adam's bias corrections come
    /// from `t = guard.steps[i] − guard.skipped` (see [`StepGuard`]). The host reads neither
    /// scalar. They must be `[1]` f32 tensors on the parameters' device.
    pub fn apply_updates_guarded(
        params: &[Tensor],
        grads: &[Tensor],
        states: &[Vec<Tensor>],
        rules: &[UpdateRule],
        guard: StepGuard<'_>,
    ) -> Result<()> {
        apply(params, grads, states, rules, Some(guard))
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
        let (owned, replace) = owned_grads(op, params)?;
        if owned.is_empty() {
            let device = params.first().map_or(crate::Device::Cpu, |p| p.device());
            return Tensor::zeros(&[1], device);
        }
        let mut locks: Vec<_> = owned.iter().map(|t| t.storage_arc().write()).collect();
        let mut gs: Vec<&mut Storage> = locks.iter_mut().map(|l| &mut **l).collect();
        let norm = grad_norm_clip(&mut gs, max_norm)?;
        drop(gs);
        drop(locks);
        finish_grads(params, &owned, replace);
        Ok(Tensor::from_storage(norm, vec![1]))
    }

    /// Unscales the gradients of `params` for dynamic loss scaling (PyTorch's
    /// `GradScaler.unscale_`): every gradient is multiplied in place by `1 / scale[0]`, and
    /// `found_inf[0]` is set to 1 when any unscaled element is inf or NaN (it is never cleared
    /// here: [`Tensor::update_loss_scale`] clears it). Neither scalar is read on the host: on a
    /// GPU this is one kernel launch for up to 60 gradients (`kernels/optim/loss_scale.cu`).
    /// `scale` and `found_inf` are `[1]` f32 tensors on the gradients' device. Parameters
    /// without a gradient are skipped and a parameter listed twice counts once; a gradient that
    /// shares its storage or is a view is first replaced by its own copy, as in
    /// [`Tensor::clip_grad_norm`].
    pub fn unscale_grads(params: &[Tensor], scale: &Tensor, found_inf: &Tensor) -> Result<()> {
        let op = "unscale_grads";
        let (owned, replace) = owned_grads(op, params)?;
        let Some(g0) = owned.first() else {
            return Ok(());
        };
        check_scalar(op, "scale", scale, g0.device())?;
        check_scalar(op, "found_inf", found_inf, g0.device())?;
        distinct(op, "scale and found_inf", &[scale, found_inf])?;
        {
            let scale_ref = scale.storage()?;
            let mut flag = found_inf.storage_arc().write();
            let mut locks: Vec<_> = owned.iter().map(|t| t.storage_arc().write()).collect();
            let mut gs: Vec<&mut Storage> = locks.iter_mut().map(|l| &mut **l).collect();
            grad_unscale(&mut gs, &scale_ref, &mut flag)?;
        }
        found_inf.storage_arc().bump_version();
        finish_grads(params, &owned, replace);
        Ok(())
    }

    /// The loss scale's update after a guarded step (PyTorch's `GradScaler.update`), on the
    /// device, without a host read: when `found_inf[0]` is not 0 the step was skipped, so
    /// `scale *= backoff_factor`, `growth_tracker = 0` and `skipped += 1`; otherwise
    /// `growth_tracker += 1`, and once it reaches `growth_interval` the scale is multiplied by
    /// `growth_factor` (unless that overflows f32) and the tracker restarts at 0. `found_inf`
    /// is then cleared. Every tensor is a `[1]` f32 tensor of its own, all on one device;
    /// `growth_factor` must be finite and > 1, `backoff_factor` in (0, 1), `growth_interval`
    /// in [1, 2^24].
    #[allow(clippy::too_many_arguments)]
    pub fn update_loss_scale(
        scale: &Tensor,
        growth_tracker: &Tensor,
        found_inf: &Tensor,
        skipped: &Tensor,
        growth_factor: f32,
        backoff_factor: f32,
        growth_interval: u32,
    ) -> Result<()> {
        let op = "update_loss_scale";
        check_loss_scale_options(op, growth_factor, backoff_factor, growth_interval)?;
        let device = scale.device();
        let all = [scale, growth_tracker, found_inf, skipped];
        for (t, name) in all
            .iter()
            .zip(["scale", "growth_tracker", "found_inf", "skipped"])
        {
            check_scalar(op, name, t, device)?;
        }
        distinct(op, "scale, growth_tracker, found_inf and skipped", &all)?;
        {
            let mut locks: Vec<_> = all.iter().map(|t| t.storage_arc().write()).collect();
            let [s, g, f, k] = &mut locks[..] else {
                unreachable!("four tensors")
            };
            loss_scale_update(s, g, f, k, growth_factor, backoff_factor, growth_interval)?;
        }
        for t in all {
            t.storage_arc().bump_version();
        }
        Ok(())
    }
}

/// Checks the options of [`Tensor::update_loss_scale`] for `op`: `growth_factor` finite and
/// greater than 1, `backoff_factor` in (0, 1), `growth_interval` in [1, 2^24] (the tracker
/// counts in f32, exact up to 2^24). A loss scaler checks them once, when it is made.
pub fn check_loss_scale_options(
    op: &'static str,
    growth_factor: f32,
    backoff_factor: f32,
    growth_interval: u32,
) -> Result<()> {
    let bad = |msg: String| Err(Error::InvalidArgument { op, msg });
    if !(growth_factor.is_finite() && growth_factor > 1.0) {
        return bad(format!(
            "growth_factor must be finite and > 1, got {growth_factor}"
        ));
    }
    if !(backoff_factor > 0.0 && backoff_factor < 1.0) {
        return bad(format!(
            "backoff_factor must be in (0, 1), got {backoff_factor}"
        ));
    }
    if growth_interval == 0 || growth_interval > 1 << 24 {
        return bad(format!(
            "growth_interval must be in [1, 2^24], got {growth_interval}"
        ));
    }
    Ok(())
}

/// [`Tensor::apply_updates`] with an optional guard.
fn apply(
    params: &[Tensor],
    grads: &[Tensor],
    states: &[Vec<Tensor>],
    rules: &[UpdateRule],
    guard: Option<StepGuard<'_>>,
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
    if let Some(g) = &guard {
        if g.steps.len() != n {
            return Err(Error::InvalidArgument {
                op,
                msg: format!("{n} parameters but {} guard step counts", g.steps.len()),
            });
        }
        if let Some(p) = params.first() {
            check_scalar(op, "the guard's found_inf", g.found_inf, p.device())?;
            check_scalar(op, "the guard's skipped", g.skipped, p.device())?;
        }
        for t in [g.found_inf, g.skipped] {
            if seen.contains(&(Arc::as_ptr(t.storage_arc()) as usize)) {
                return Err(Error::InvalidArgument {
                    op,
                    msg: "a guard scalar shares a parameter's, gradient's or state's storage"
                        .into(),
                });
            }
        }
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
    let guard_locks = match &guard {
        Some(g) => Some((g.found_inf.storage()?, g.skipped.storage()?, g.steps)),
        None => None,
    };
    let mut ps: Vec<&mut Storage> = p_locks.iter_mut().map(|l| &mut **l).collect();
    let gs: Vec<&Storage> = g_locks.iter().map(|l| &**l).collect();
    let mut ss: Vec<Vec<&mut Storage>> = s_locks
        .iter_mut()
        .map(|st| st.iter_mut().map(|l| &mut **l).collect())
        .collect();
    let guard = guard_locks.as_ref().map(|(f, k, steps)| Guard {
        found_inf: &**f,
        skipped: &**k,
        steps,
    });
    update_multi(&mut ps, &gs, &mut ss, rules, guard)?;
    for t in params.iter().chain(states.iter().flatten()) {
        t.storage_arc().bump_version();
    }
    Ok(())
}

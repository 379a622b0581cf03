//! Launchers for `kernels/optim/` (one PTX module per ladder step): in-place parameter updates.

use super::launch_elems;
use crate::{CudaDevice, DevPtr, KernelArg, Result};

/// PTX module of step 1: `kernels/optim/01_per_tensor.cu`.
const STEP1: &str = "optim/01_per_tensor";
/// PTX module of step 2: `kernels/optim/02_multi_tensor.cu`.
const STEP2: &str = "optim/02_multi_tensor";
/// PTX module of step 3 (SGD loads first): `kernels/optim/03_loads_first_sgd.cu`.
const STEP3: &str = "optim/03_loads_first_sgd";
/// PTX module of step 4 (Adam loads first): `kernels/optim/04_loads_first.cu`.
const STEP4: &str = "optim/04_loads_first";

/// What makes an update conditional on the device (dynamic loss scaling, see
/// [`grad_unscale`]): two `[1]` f32 device scalars, null ([`Guard::NONE`]) for an ordinary
/// update. When `*found_inf != 0` the update writes nothing; Adam's step count is
/// `t = step − *skipped` (each tensor's `step`), its bias corrections `−expm1(t·ln β)` computed
/// on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guard {
    /// Set to 1 by [`grad_unscale`] when a gradient holds an inf or NaN.
    pub found_inf: DevPtr,
    /// Steps skipped so far (counted by [`loss_scale_update`]).
    pub skipped: DevPtr,
}

impl Guard {
    /// An unguarded update.
    pub const NONE: Guard = Guard {
        found_inf: DevPtr(0),
        skipped: DevPtr(0),
    };
}

/// SGD with momentum and weight decay; `buf` is ignored when `momentum == 0`.
#[allow(clippy::too_many_arguments)]
pub fn sgd_f32(
    dev: &CudaDevice,
    p: DevPtr,
    g: DevPtr,
    buf: DevPtr,
    n: usize,
    lr: f32,
    momentum: f32,
    wd: f32,
    guard: Guard,
) -> Result<()> {
    let ni = n as i64;
    // SAFETY: matches `sgd_f32(float*, const float*, float*, long long, float, float, float,
    // const float*)`.
    unsafe {
        let args: [&dyn KernelArg; 8] = [&p, &g, &buf, &ni, &lr, &momentum, &wd, &guard.found_inf];
        launch_elems(dev, STEP1, "sgd_f32", n, &args)
    }
}

/// Adam / AdamW step with bias corrections `bc1 = 1 − β₁ᵗ`, `bc2 = 1 − β₂ᵗ` (from `step` on
/// the device when `guard` is not [`Guard::NONE`]).
#[allow(clippy::too_many_arguments)]
pub fn adam_f32(
    dev: &CudaDevice,
    p: DevPtr,
    g: DevPtr,
    m: DevPtr,
    v: DevPtr,
    n: usize,
    lr: f32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    wd: f32,
    decoupled: bool,
    bc1: f32,
    bc2: f32,
    guard: Guard,
    step: f32,
) -> Result<()> {
    let (ni, dec) = (n as i64, decoupled as i32);
    let args: [&dyn KernelArg; 16] = [
        &p,
        &g,
        &m,
        &v,
        &ni,
        &lr,
        &beta1,
        &beta2,
        &eps,
        &wd,
        &dec,
        &bc1,
        &bc2,
        &guard.found_inf,
        &guard.skipped,
        &step,
    ];
    // SAFETY: matches `adam_f32(float*, const float*, float*, float*, long long, float ×5, int,
    // float, float, const float*, const float*, float)`.
    unsafe { launch_elems(dev, STEP1, "adam_f32", n, &args) }
}

/// One tensor of a multi-tensor update: parameter, gradient, state buffers (SGD: `s1` =
/// momentum, may be null when momentum is 0; Adam: `s1` = m, `s2` = v), Adam's bias
/// corrections for this tensor's own step count (or that count, for a guarded update), and this
/// tensor's weight decay (its parameter group's, so groups with different decay share one
/// launch).
#[derive(Clone, Copy, Debug)]
pub struct MultiTensor {
    /// Parameter (updated in place).
    pub p: DevPtr,
    /// Gradient.
    pub g: DevPtr,
    /// First state buffer.
    pub s1: DevPtr,
    /// Second state buffer (Adam).
    pub s2: DevPtr,
    /// Elements.
    pub n: usize,
    /// 1 − β₁ᵗ (Adam).
    pub bc1: f32,
    /// 1 − β₂ᵗ (Adam).
    pub bc2: f32,
    /// Weight decay of this tensor (L2 for SGD and Adam, decoupled for AdamW).
    pub wd: f32,
    /// Adam's step count before the skipped steps are taken off (a guarded update only).
    pub step: f32,
}

/// Layout of `MultiTensor` in kernels/optim/optim.cuh.
#[repr(C)]
#[derive(Clone, Copy, cust_core::DeviceCopy)]
struct MultiTensorC {
    p: u64,
    g: u64,
    s1: u64,
    s2: u64,
    n: i64,
    first_block: i64,
    bc1: f32,
    bc2: f32,
    wd: f32,
    step: f32,
}

/// Elements per block (`MT_CHUNK` in kernels/optim/optim.cuh).
const MT_CHUNK: usize = 4096;

/// Tensors per launch (`MT_PARAM_MAX` in kernels/optim/optim.cuh): the table is a kernel parameter.
const MT_PARAM_MAX: usize = 60;

/// Layout of `MultiTable` in kernels/optim/optim.cuh: the table passed by value in the launch parameters.
#[repr(C)]
#[derive(Clone, Copy, cust_core::DeviceCopy)]
struct MultiTable {
    t: [MultiTensorC; MT_PARAM_MAX],
}

/// One launch's table: the table, its tensor count, its number of chunks (blocks) and its
/// launch configuration.
type Table = (MultiTable, i32, usize, crate::LaunchConfig);

/// The tables of the non-empty tensors of `ts`, at most [`MT_PARAM_MAX`] a launch (block
/// numbers restart in every table).
fn multi_tables(name: &str, ts: &[MultiTensor]) -> Result<Vec<Table>> {
    let live: Vec<&MultiTensor> = ts.iter().filter(|t| t.n > 0).collect();
    let zero = MultiTensorC {
        p: 0,
        g: 0,
        s1: 0,
        s2: 0,
        n: 0,
        first_block: i64::MAX,
        bc1: 1.0,
        bc2: 1.0,
        wd: 0.0,
        step: 0.0,
    };
    live.chunks(MT_PARAM_MAX)
        .map(|chunk| {
            let mut table = MultiTable {
                t: [zero; MT_PARAM_MAX],
            };
            let mut blocks = 0usize;
            for (e, t) in table.t.iter_mut().zip(chunk) {
                *e = MultiTensorC {
                    p: t.p.0,
                    g: t.g.0,
                    s1: t.s1.0,
                    s2: t.s2.0,
                    n: t.n as i64,
                    first_block: blocks as i64,
                    bc1: t.bc1,
                    bc2: t.bc2,
                    wd: t.wd,
                    step: t.step,
                };
                blocks += t.n.div_ceil(MT_CHUNK);
            }
            let cfg =
                crate::LaunchConfig::new(super::rows_grid(name, blocks)?, crate::Dim3::x(256));
            Ok((table, chunk.len() as i32, blocks, cfg))
        })
        .collect()
}

launchers! {
    // Adam over many tensors (the AdamMulti type)
    (
        dev: &CudaDevice, ts: &[MultiTensor], lr: f32, beta1: f32, beta2: f32, eps: f32,
        decoupled: bool, guard: Guard,
    );

    /// Adam / AdamW over every tensor of `ts` in one launch (step 2 of [`adam_f32`]), each with
    /// its own weight decay `ts[i].wd`.
    pub fn adam_multi_f32(..) {
        let hyper = [lr, beta1, beta2, eps];
        adam_multi(dev, STEP2, "adam_multi_f32", ts, hyper, decoupled, guard)
    }

    /// Step 3 of [`adam_multi_f32`] (same table, arguments and formula; nvcc may contract a
    /// multiply-add differently, so results agree to a few ulp): each thread loads all 16 float4
    /// of its chunk (4 each of p, g, m, v) before any arithmetic or store. The tensors' buffers
    /// must not overlap one another.
    pub fn adam_multi_loads_first(..) {
        let hyper = [lr, beta1, beta2, eps];
        adam_multi(dev, STEP4, "adam_multi3_f32", ts, hyper, decoupled, guard)
    }
}

launchers! {
    // SGD over many tensors (the SgdMulti type)
    (dev: &CudaDevice, ts: &[MultiTensor], lr: f32, momentum: f32, guard: Guard);

    /// SGD (momentum, weight decay `ts[i].wd`) over every tensor of `ts` in one launch (step 2
    /// of [`sgd_f32`]).
    pub fn sgd_multi_f32(..) {
        sgd_multi(dev, STEP2, "sgd_multi_f32", ts, lr, momentum, guard)
    }

    /// Step 3 of [`sgd_multi_f32`] (same table, arguments and formula; results agree to a few
    /// ulp): each thread loads all its float4 of p, g and (with momentum) the momentum buffer
    /// before any arithmetic or store. With `momentum == 0` the buffers `s1` are never touched and
    /// may be null. The tensors' buffers must not overlap one another.
    pub fn sgd_multi_loads_first(..) {
        sgd_multi(dev, STEP3, "sgd_multi3_f32", ts, lr, momentum, guard)
    }
}

/// Launches the multi-tensor Adam kernel `name` of PTX module `module` (steps 2 and 4 share
/// the signature `(MultiTable, int, float lr, β₁, β₂, eps, int decoupled, const float*
/// found_inf, const float* skipped)` and 256-thread blocks; the weight decay is the table's, per
/// tensor).
fn adam_multi(
    dev: &CudaDevice,
    module: &str,
    name: &'static str,
    ts: &[MultiTensor],
    [lr, beta1, beta2, eps]: [f32; 4],
    decoupled: bool,
    guard: Guard,
) -> Result<()> {
    let k = dev.function(module, name)?;
    let dec = decoupled as i32;
    for (table, count, _, cfg) in multi_tables(name, ts)? {
        let args: [&dyn KernelArg; 9] = [
            &table,
            &count,
            &lr,
            &beta1,
            &beta2,
            &eps,
            &dec,
            &guard.found_inf,
            &guard.skipped,
        ];
        // SAFETY: matches the signature above; the table lists buffers of n floats each.
        unsafe { dev.launch(&k, cfg, &args)? };
    }
    Ok(())
}

/// Launches the multi-tensor SGD kernel `name` of PTX module `module` (steps 2 and 3 share
/// the signature `(MultiTable, int, float lr, float momentum, const float* found_inf)` and
/// 256-thread blocks; the weight decay is the table's, per tensor).
fn sgd_multi(
    dev: &CudaDevice,
    module: &str,
    name: &'static str,
    ts: &[MultiTensor],
    lr: f32,
    momentum: f32,
    guard: Guard,
) -> Result<()> {
    let k = dev.function(module, name)?;
    for (table, count, _, cfg) in multi_tables(name, ts)? {
        // SAFETY: matches the signature above.
        unsafe { dev.launch(&k, cfg, &[&table, &count, &lr, &momentum, &guard.found_inf])? };
    }
    Ok(())
}

// ------------------------------------------------------------------ gradient clipping

/// PTX module of the gradient-norm kernels: `kernels/optim/grad_norm.cu` (not a ladder step).
const GRAD_NORM: &str = "optim/grad_norm";

/// The gradients as a multi-tensor list (the table's `p` is the gradient, nothing else is used).
fn grad_list(grads: &[(DevPtr, usize)]) -> Vec<MultiTensor> {
    grads
        .iter()
        .map(|&(g, n)| MultiTensor {
            p: g,
            g: DevPtr(0),
            s1: DevPtr(0),
            s2: DevPtr(0),
            n,
            bc1: 1.0,
            bc2: 1.0,
            wd: 0.0,
            step: 0.0,
        })
        .collect()
}

/// Floats of scratch [`grad_norm_clip`] needs for `grads` (`(pointer, elements)` each): one
/// partial sum per chunk of `MT_CHUNK` elements, and the scale.
pub fn grad_norm_scratch_len(grads: &[(DevPtr, usize)]) -> usize {
    grads
        .iter()
        .map(|&(_, n)| n.div_ceil(MT_CHUNK))
        .sum::<usize>()
        + 1
}

/// Clips gradients by their global L2 norm (PyTorch's `clip_grad_norm_`) without a host
/// read: writes `‖g‖₂` over every element of `grads` to `norm[0]`, then multiplies every
/// gradient in place by `min(1, max_norm / (‖g‖₂ + 1e-6))` (NaN when the norm is NaN). The sum
/// of squares is accumulated in f32 per chunk and the partials are added in a fixed order, so
/// the result is the same on every run. `scratch` holds `scratch_len` floats, at least
/// [`grad_norm_scratch_len`]. Three launches (two more per [`MT_PARAM_MAX`] tensors past the
/// first table). The gradients must not overlap one another.
pub fn grad_norm_clip(
    dev: &CudaDevice,
    grads: &[(DevPtr, usize)],
    max_norm: f32,
    scratch: DevPtr,
    scratch_len: usize,
    norm: DevPtr,
) -> Result<()> {
    let need = grad_norm_scratch_len(grads);
    if scratch_len < need {
        return Err(crate::Error::LaunchConfig {
            kernel: "grad_sumsq_f32".into(),
            msg: format!("scratch of {scratch_len} floats, {need} needed"),
        });
    }
    let ts = grad_list(grads);
    let tables = multi_tables("grad_sumsq_f32", &ts)?;
    let sumsq = dev.function(GRAD_NORM, "grad_sumsq_f32")?;
    let mut offset = 0usize;
    for (table, count, blocks, cfg) in &tables {
        let partial = DevPtr(scratch.0 + 4 * offset as u64);
        let nb = *blocks as i64;
        // SAFETY: matches `grad_sumsq_f32(MultiTable, int, float*, long long)`; `partial` has
        // `blocks` floats left (checked against `need` above).
        unsafe { dev.launch(&sumsq, *cfg, &[table, count, &partial, &nb])? };
        offset += blocks;
    }
    let scale = DevPtr(scratch.0 + 4 * offset as u64);
    let finish = dev.function(GRAD_NORM, "grad_norm_finish_f32")?;
    let nb = offset as i64;
    let cfg = crate::LaunchConfig::new(crate::Dim3::x(1), crate::Dim3::x(1024));
    // SAFETY: matches `grad_norm_finish_f32(const float*, long long, float, float*, float*)`:
    // `offset` partials then the scale slot in `scratch`, one float at `norm`.
    unsafe { dev.launch(&finish, cfg, &[&scratch, &nb, &max_norm, &norm, &scale])? };
    let scale_k = dev.function(GRAD_NORM, "grad_scale_f32")?;
    for (table, count, _, cfg) in &tables {
        // SAFETY: matches `grad_scale_f32(MultiTable, int, const float*)`.
        unsafe { dev.launch(&scale_k, *cfg, &[table, count, &scale])? };
    }
    Ok(())
}

// ------------------------------------------------------------------ dynamic loss scaling

/// PTX module of the loss-scaling kernels: `kernels/optim/loss_scale.cu` (not a ladder step).
const LOSS_SCALE: &str = "optim/loss_scale";

/// Multiplies every gradient of `grads` (`(pointer, elements)` each) in place by
/// `1 / scale[0]` and sets `found_inf[0] = 1` when any unscaled element is inf or NaN (it never
/// clears it). One launch per [`MT_PARAM_MAX`] tensors, no host read. The gradients must not
/// overlap one another.
pub fn grad_unscale(
    dev: &CudaDevice,
    grads: &[(DevPtr, usize)],
    scale: DevPtr,
    found_inf: DevPtr,
) -> Result<()> {
    let ts = grad_list(grads);
    let k = dev.function(LOSS_SCALE, "grad_unscale_f32")?;
    for (table, count, _, cfg) in multi_tables("grad_unscale_f32", &ts)? {
        // SAFETY: matches `grad_unscale_f32(MultiTable, int, const float*, float*)`.
        unsafe { dev.launch(&k, cfg, &[&table, &count, &scale, &found_inf])? };
    }
    Ok(())
}

/// The loss scale's update after a guarded step (PyTorch's `GradScaler.update`), one thread on
/// the device: when `found_inf[0] != 0`, `scale *= backoff_factor`, `growth_tracker = 0` and
/// `skipped += 1`; otherwise `growth_tracker += 1`, and at `growth_interval` the scale is
/// multiplied by `growth_factor` (kept when that would overflow) and the tracker restarts.
/// `found_inf` is cleared. Every pointer is one f32.
#[allow(clippy::too_many_arguments)]
pub fn loss_scale_update(
    dev: &CudaDevice,
    scale: DevPtr,
    growth_tracker: DevPtr,
    found_inf: DevPtr,
    skipped: DevPtr,
    growth_factor: f32,
    backoff_factor: f32,
    growth_interval: i32,
) -> Result<()> {
    let k = dev.function(LOSS_SCALE, "loss_scale_update_f32")?;
    let cfg = crate::LaunchConfig::new(crate::Dim3::x(1), crate::Dim3::x(32));
    let args: [&dyn KernelArg; 7] = [
        &scale,
        &growth_tracker,
        &found_inf,
        &skipped,
        &growth_factor,
        &backoff_factor,
        &growth_interval,
    ];
    // SAFETY: matches `loss_scale_update_f32(float* ×4, float, float, int)`.
    unsafe { dev.launch(&k, cfg, &args) }
}

// ------------------------------------------------------------------ the ladder's table

/// An SGD launcher over many tensors: `(dev, tensors, lr, momentum, guard)`; each tensor
/// carries its weight decay.
pub type SgdMulti = fn(&CudaDevice, &[MultiTensor], f32, f32, Guard) -> Result<()>;
/// An Adam launcher over many tensors: `(dev, tensors, lr, beta1, beta2, eps, decoupled,
/// guard)`; each tensor carries its weight decay.
pub type AdamMulti = fn(&CudaDevice, &[MultiTensor], f32, f32, f32, f32, bool, Guard) -> Result<()>;

/// The launchers of one step of the optimizer ladder.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// The step (described in [`super::ladder::Family::Optim`]'s table).
    pub step: super::rows::Step,
    /// One launch for a group of tensors; `None`: [`sgd_f32`] / [`adam_f32`] once per tensor.
    pub multi: Option<(SgdMulti, AdamMulti)>,
}

/// The optimizer ladder: the one table the backend, the benchmarks and the tests run.
pub const STEPS: [Kernels; 4] = {
    use super::rows::Step;
    [
        Kernels {
            step: Step::One,
            multi: None,
        },
        Kernels {
            step: Step::Two,
            multi: Some((sgd_multi_f32, adam_multi_f32)),
        },
        Kernels {
            step: Step::Three,
            multi: Some((sgd_multi_loads_first, adam_multi_f32)),
        },
        Kernels {
            step: Step::Four,
            multi: Some((sgd_multi_loads_first, adam_multi_loads_first)),
        },
    ]
};

/// The launchers of `step` (the highest step at or below it).
pub fn at(step: super::rows::Step) -> &'static Kernels {
    super::ladder::pick(&STEPS, step, |k| k.step)
}

#[cfg(test)]
mod tests {
    /// The chunk and block sizes of the launchers are the kernels'.
    #[test]
    fn chunk_and_block_match_optim_cu() {
        let src = concat!(
            include_str!("../../../../kernels/optim/optim.cuh"),
            include_str!("../../../../kernels/optim/02_multi_tensor.cu"),
            include_str!("../../../../kernels/optim/03_loads_first_sgd.cu"),
            include_str!("../../../../kernels/optim/04_loads_first.cu"),
            include_str!("../../../../kernels/optim/grad_norm.cu"),
            include_str!("../../../../kernels/optim/loss_scale.cu"),
        );
        assert!(src.contains(&format!("#define MT_CHUNK {}", super::MT_CHUNK)));
        assert!(src.contains(&format!("#define MT_PARAM_MAX {}", super::MT_PARAM_MAX)));
        assert_eq!(std::mem::size_of::<super::MultiTable>(), 60 * 64); // within 4 KB of parameters
        assert!(src.contains("#define MT3_THREADS 256"));
        assert!(src.contains("#define GN_THREADS 256"));
        assert!(src.contains("#define GN_FINISH_THREADS 1024"));
        assert!(src.contains("#define LS_THREADS 256"));
        for k in [
            "sgd_multi_f32",
            "adam_multi_f32",
            "sgd_multi3_f32",
            "adam_multi3_f32",
            "grad_sumsq_f32",
            "grad_norm_finish_f32",
            "grad_scale_f32",
            "grad_unscale_f32",
            "loss_scale_update_f32",
        ] {
            assert!(src.contains(&format!(" {k}(")), "{k}");
        }
    }
}

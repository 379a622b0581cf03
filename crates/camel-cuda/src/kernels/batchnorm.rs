//! Launchers for `kernels/batchnorm/` (one PTX module per ladder step): BatchNorm per channel of
//! `[n, c, hw]`. Step 1 (`block_per_channel`): a block per channel for the training forward
//! (Welford statistics, then normalize and affine) and the backward (both sums, then dx), and a
//! thread per element for the eval forward. Each launcher takes the element type of `x`, `y`,
//! `g` and `dx` (`elem`: f32, f16 or bf16); the weight, bias and statistics are f32.

use super::rows::KernelName;
use super::shape::Elem;
use super::{launch, launch_elems};
use crate::{CudaDevice, DevPtr, Dim3, Error, KernelArg, LaunchConfig, Result};

/// PTX module of step 1: `kernels/batchnorm/01_block_per_channel.cu`.
const STEP1: &str = "batchnorm/01_block_per_channel";

/// Threads of a block per channel: a channel is read by one block, so a large block keeps more
/// loads in flight (at most 1024, the kernels' shared slots hold 32 warps).
const CHANNEL_THREADS: u32 = 512;

/// The grid of a block per channel: `c` blocks on x.
fn channel_config(kernel: &str, c: usize) -> Result<LaunchConfig> {
    if c > i32::MAX as usize {
        return Err(Error::LaunchConfig {
            kernel: kernel.to_string(),
            msg: format!("{c} channels exceed the grid of one block per channel"),
        });
    }
    Ok(LaunchConfig::new(
        Dim3::x(c as u32),
        Dim3::x(CHANNEL_THREADS),
    ))
}

launchers! {
    // the training forward of each step (the Forward type)
    (
        dev: &CudaDevice, x: DevPtr, w: DevPtr, b: DevPtr, y: DevPtr, mean: DevPtr, var: DevPtr,
        n: usize, c: usize, hw: usize, eps: f32, elem: Elem,
    );

    /// Training forward of `x` (`[n, c, hw]`): each channel's `mean[c]` and biased `var[c]`
    /// (Welford), and `y = (x − mean)/√(var + eps)·w + b`; a block per channel.
    pub fn block_per_channel(..) {
        if n * c * hw == 0 {
            return Ok(());
        }
        let name = KernelName::new(format_args!("batchnorm_fwd_{}", elem.suffix()));
        let name = name.as_str();
        let cfg = channel_config(name, c)?;
        let (n, c, hw) = (n as i64, c as i64, hw as i64);
        // SAFETY: matches `batchnorm_fwd_{dtype}(const T*, const float* ×2, T*, float* ×2, long
        // long ×3, float)`, T `elem`'s type; the caller passes `[n, c, hw]` x and y, `c` w, b,
        // mean and var.
        unsafe {
            let args: [&dyn KernelArg; 10] = [&x, &w, &b, &y, &mean, &var, &n, &c, &hw, &eps];
            launch(dev, STEP1, name, cfg, &args)
        }
    }
}

launchers! {
    // the eval forward of each step (the Eval type)
    (
        dev: &CudaDevice, x: DevPtr, mean: DevPtr, var: DevPtr, w: DevPtr, b: DevPtr, y: DevPtr,
        n: usize, c: usize, hw: usize, eps: f32, elem: Elem,
    );

    /// Eval forward of `x` (`[n, c, hw]`) with the given per-channel `mean` and `var`:
    /// `y = (x − mean)/√(var + eps)·w + b`, a thread per element.
    pub fn block_per_channel_eval(..) {
        let total = n * c * hw;
        let (t, c, hw) = (total as i64, c as i64, hw as i64);
        let name = KernelName::new(format_args!("batchnorm_eval_{}", elem.suffix()));
        // SAFETY: matches `batchnorm_eval_{dtype}(const T*, const float* ×4, T*, long long ×3,
        // float)`, T `elem`'s type; the caller passes `[n, c, hw]` x and y, `c` mean, var, w and
        // b.
        unsafe {
            let args: [&dyn KernelArg; 10] = [&x, &mean, &var, &w, &b, &y, &t, &c, &hw, &eps];
            launch_elems(dev, STEP1, name.as_str(), total, &args)
        }
    }
}

launchers! {
    // the backward of each step (the Backward type)
    (
        dev: &CudaDevice, x: DevPtr, w: DevPtr, g: DevPtr, mean: DevPtr, var: DevPtr, dx: DevPtr,
        dw: DevPtr, db: DevPtr, n: usize, c: usize, hw: usize, eps: f32, training: bool,
        elem: Elem,
    );

    /// Backward from upstream `g` and the statistics the forward used: `dw[c] = Σ g·x̂`,
    /// `db[c] = Σ g`, and `dx` (`[n, c, hw]`) through the batch statistics when `training`,
    /// with them constant otherwise; a block per channel, deterministic (no atomics).
    pub fn block_per_channel_bwd(..) {
        if c == 0 {
            return Ok(());
        }
        let name = KernelName::new(format_args!("batchnorm_bwd_{}", elem.suffix()));
        let name = name.as_str();
        let cfg = channel_config(name, c)?;
        let (n, c, hw, tr) = (n as i64, c as i64, hw as i64, training as i32);
        // SAFETY: matches `batchnorm_bwd_{dtype}(const T*, const float*, const T*, const float*
        // ×2, T*, float* ×2, long long ×3, float, int)`, T `elem`'s type; the caller passes
        // `[n, c, hw]` x, g and dx, `c` w, mean, var, dw and db.
        unsafe {
            let args: [&dyn KernelArg; 13] =
                [&x, &w, &g, &mean, &var, &dx, &dw, &db, &n, &c, &hw, &eps, &tr];
            launch(dev, STEP1, name, cfg, &args)
        }
    }
}

// ------------------------------------------------------------------ the ladder's table

/// A BatchNorm training-forward launcher: `(dev, x, w, b, y, mean, var, n, c, hw, eps, elem)`.
pub type Forward = fn(
    &CudaDevice,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    usize,
    usize,
    usize,
    f32,
    Elem,
) -> Result<()>;
/// A BatchNorm eval-forward launcher: `(dev, x, mean, var, w, b, y, n, c, hw, eps, elem)`.
pub type Eval = Forward;
/// A BatchNorm backward launcher: `(dev, x, w, g, mean, var, dx, dw, db, n, c, hw, eps,
/// training, elem)`.
pub type Backward = fn(
    &CudaDevice,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    usize,
    usize,
    usize,
    f32,
    bool,
    Elem,
) -> Result<()>;

/// The launchers of one step of the BatchNorm ladder.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// The step (described in [`super::ladder::Family::BatchNorm`]'s table).
    pub step: super::rows::Step,
    /// Its training forward.
    pub forward: Forward,
    /// Its eval forward.
    pub eval: Eval,
    /// Its backward (training and eval).
    pub backward: Backward,
}

/// The BatchNorm ladder: the one table the backend and the tests run.
pub const STEPS: [Kernels; 1] = [Kernels {
    step: super::rows::Step::One,
    forward: block_per_channel,
    eval: block_per_channel_eval,
    backward: block_per_channel_bwd,
}];

/// The launchers of `step` (the highest step at or below it).
pub fn at(step: super::rows::Step) -> &'static Kernels {
    super::ladder::pick(&STEPS, step, |k| k.step)
}

//! Launchers for `kernels/random/01_philox.cu`: random values, Bernoulli samples, dropout and
//! multinomial sampling from the Philox4x32-10 stream at `(seed, offset)` (value `i` of a draw is
//! word `i % 4` of counter `offset + i / 4`). One step, no ladder: each thread computes whole
//! counters in a grid-stride loop.

use super::launch_elems;
use crate::{CudaDevice, DevPtr, Result};

/// PTX module: `kernels/random/01_philox.cu`.
const PHILOX: &str = "random/01_philox";

/// Threads that cover `n` values, four (one Philox counter) a thread.
fn groups(n: usize) -> usize {
    n.div_ceil(4)
}

/// `out[i] = lo + (hi − lo) · u_i`, kept below `hi` (`n` floats at `out`).
pub fn uniform_f32(
    dev: &CudaDevice,
    out: DevPtr,
    n: usize,
    seed: u64,
    offset: u64,
    lo: f32,
    hi: f32,
) -> Result<()> {
    let ni = n as i64;
    let args: [&dyn crate::KernelArg; 6] = [&out, &ni, &seed, &offset, &lo, &hi];
    // SAFETY: matches `random_uniform_f32(float*, long long, u64, u64, float, float)`; the caller
    // passes `n` floats at `out`.
    unsafe { launch_elems(dev, PHILOX, "random_uniform_f32", groups(n), &args) }
}

/// `out[i]` = standard normal `i` (Box–Muller on pairs of words; `n` floats at `out`).
pub fn normal_f32(dev: &CudaDevice, out: DevPtr, n: usize, seed: u64, offset: u64) -> Result<()> {
    let ni = n as i64;
    // SAFETY: matches `random_normal_f32(float*, long long, u64, u64)`; `n` floats at `out`.
    unsafe {
        launch_elems(
            dev,
            PHILOX,
            "random_normal_f32",
            groups(n),
            &[&out, &ni, &seed, &offset],
        )
    }
}

/// `out[i] = (u_i < p)` as 0.0 or 1.0 (`n` floats at `out`).
pub fn bernoulli_scalar_f32(
    dev: &CudaDevice,
    out: DevPtr,
    n: usize,
    seed: u64,
    offset: u64,
    p: f32,
) -> Result<()> {
    let ni = n as i64;
    let args: [&dyn crate::KernelArg; 5] = [&out, &ni, &seed, &offset, &p];
    // SAFETY: matches `random_bernoulli_scalar_f32(float*, long long, u64, u64, float)`; `n`
    // floats at `out`.
    unsafe { launch_elems(dev, PHILOX, "random_bernoulli_scalar_f32", groups(n), &args) }
}

/// `out[i] = (u_i < p[i])` as 0.0 or 1.0, NaN where `p[i]` is NaN or outside `[0, 1]` (`n`
/// floats at `p` and at `out`).
pub fn bernoulli_f32(
    dev: &CudaDevice,
    p: DevPtr,
    out: DevPtr,
    n: usize,
    seed: u64,
    offset: u64,
) -> Result<()> {
    let ni = n as i64;
    let args: [&dyn crate::KernelArg; 5] = [&p, &out, &ni, &seed, &offset];
    // SAFETY: matches `bernoulli_f32(const float*, float*, long long, u64, u64)`; `n` floats at
    // `p` and `out`.
    unsafe { launch_elems(dev, PHILOX, "bernoulli_f32", groups(n), &args) }
}

/// `y[i] = x[i] · (u_i ≥ p ? scale : 0)`: dropout, forward and backward, on `n` elements of
/// `elem` at `x` and `y` (`dropout_{f32,f16,bf16}`): a 16-bit element widens to f32, is
/// multiplied by the same mask value as an f32 one, and rounds once.
#[allow(clippy::too_many_arguments)]
pub fn dropout(
    dev: &CudaDevice,
    x: DevPtr,
    y: DevPtr,
    n: usize,
    seed: u64,
    offset: u64,
    p: f32,
    scale: f32,
    elem: super::shape::Elem,
) -> Result<()> {
    let name =
        super::rows::KernelName::new(format_args!("dropout_{}", elem.float_suffix("dropout")?));
    let ni = n as i64;
    let args: [&dyn crate::KernelArg; 7] = [&x, &y, &ni, &seed, &offset, &p, &scale];
    // SAFETY: matches `dropout_{f32,f16,bf16}(const T*, T*, long long, u64, u64, float, float)`,
    // T `elem`'s type; `n` elements at `x` and `y`.
    unsafe { launch_elems(dev, PHILOX, name.as_str(), groups(n), &args) }
}

/// Multinomial sampling with replacement from `[rows, k]` weights `w`: the running sums of each
/// row into `cdf` (`rows · k` floats of scratch), then `samples` indices a row into `out`
/// (`rows · samples` i64). A row that cannot be sampled is recorded at `err` (the device's index
/// error slot).
#[allow(clippy::too_many_arguments)]
pub fn multinomial_replacement(
    dev: &CudaDevice,
    w: DevPtr,
    cdf: DevPtr,
    out: DevPtr,
    [rows, k, samples]: [usize; 3],
    seed: u64,
    offset: u64,
    err: DevPtr,
) -> Result<()> {
    let (r, ki, s) = (rows as i64, k as i64, samples as i64);
    let args: [&dyn crate::KernelArg; 5] = [&w, &cdf, &r, &ki, &err];
    // SAFETY: matches `multinomial_cdf_f32(const float*, float*, long long, long long, long
    // long*)`; `rows · k` floats at `w` and `cdf`, the 4-i64 error slot at `err`.
    unsafe { launch_elems(dev, PHILOX, "multinomial_cdf_f32", rows, &args)? };
    let args: [&dyn crate::KernelArg; 7] = [&cdf, &out, &r, &ki, &s, &seed, &offset];
    // SAFETY: matches `multinomial_replacement(const float*, long long*, long long, long long,
    // long long, u64, u64)`; `rows · k` floats at `cdf`, `rows · samples` i64 at `out`.
    unsafe {
        launch_elems(
            dev,
            PHILOX,
            "multinomial_replacement",
            rows * samples,
            &args,
        )
    }
}

/// Multinomial sampling without replacement (`samples ≤ k`), one thread a row, with `work` as
/// scratch (`rows · k` floats); otherwise as [`multinomial_replacement`].
#[allow(clippy::too_many_arguments)]
pub fn multinomial_no_replacement(
    dev: &CudaDevice,
    w: DevPtr,
    work: DevPtr,
    out: DevPtr,
    [rows, k, samples]: [usize; 3],
    seed: u64,
    offset: u64,
    err: DevPtr,
) -> Result<()> {
    let (r, ki, s) = (rows as i64, k as i64, samples as i64);
    let args: [&dyn crate::KernelArg; 9] = [&w, &work, &out, &r, &ki, &s, &seed, &offset, &err];
    // SAFETY: matches `multinomial_no_replacement_f32(const float*, float*, long long*, long long,
    // long long, long long, u64, u64, long long*)`; `rows · k` floats at `w` and `work`,
    // `rows · samples` i64 at `out`, the error slot at `err`.
    unsafe { launch_elems(dev, PHILOX, "multinomial_no_replacement_f32", rows, &args) }
}

//! Launchers for `kernels/loss.cu`. `err` points at the device's index-error slot (4 × i64).

use super::rows_grid;
use crate::{CudaDevice, DevPtr, Dim3, LaunchConfig, Result};

const MODULE: &str = "loss";

/// Per-row cross-entropy of `[rows, cols]` logits against i64 targets.
#[allow(clippy::too_many_arguments)]
pub fn cross_entropy_fwd_f32(
    dev: &CudaDevice,
    x: DevPtr,
    t: DevPtr,
    loss: DevPtr,
    rows: usize,
    cols: usize,
    err: DevPtr,
) -> Result<()> {
    if rows == 0 {
        return Ok(());
    }
    let name = "cross_entropy_fwd_f32";
    let k = dev.function(MODULE, name)?;
    let cfg = LaunchConfig::new(rows_grid(name, rows)?, Dim3::x(256));
    // SAFETY: matches the kernel's (const float*, const long long*, float*, long long, long long, long long*).
    unsafe {
        dev.launch(
            &k,
            cfg,
            &[&x, &t, &loss, &(rows as i64), &(cols as i64), &err],
        )
    }
}

/// `dx[r] = g[r] · (softmax(x[r]) − onehot(t[r]))`.
#[allow(clippy::too_many_arguments)]
pub fn cross_entropy_bwd_f32(
    dev: &CudaDevice,
    x: DevPtr,
    t: DevPtr,
    g: DevPtr,
    dx: DevPtr,
    rows: usize,
    cols: usize,
    err: DevPtr,
) -> Result<()> {
    if rows == 0 {
        return Ok(());
    }
    let name = "cross_entropy_bwd_f32";
    let k = dev.function(MODULE, name)?;
    let cfg = LaunchConfig::new(rows_grid(name, rows)?, Dim3::x(256));
    // SAFETY: matches the kernel's (const float*, const long long*, const float*, float*, long long, long long, long long*).
    unsafe {
        dev.launch(
            &k,
            cfg,
            &[&x, &t, &g, &dx, &(rows as i64), &(cols as i64), &err],
        )
    }
}

// ------------------------------------------------------------------ step 2 (memory-bound issue)

/// Step 2 forward: per-row loss and the row statistics `stats[2r] = max`, `stats[2r+1] =
/// Σ exp(x − max)` (2·rows floats) that [`cross_entropy_bwd2_f32`] reads. One online pass.
#[allow(clippy::too_many_arguments)]
pub fn cross_entropy_fwd2_f32(
    dev: &CudaDevice,
    x: DevPtr,
    t: DevPtr,
    loss: DevPtr,
    stats: DevPtr,
    rows: usize,
    cols: usize,
    err: DevPtr,
) -> Result<()> {
    if rows == 0 {
        return Ok(());
    }
    let (warp, vec, cfg) = super::rows::row_launch("cross_entropy_fwd", rows, cols, &[x])?;
    let k = dev.function(
        MODULE,
        &super::rows::variant_name("cross_entropy_fwd", warp, vec),
    )?;
    // SAFETY: matches `cross_entropy_fwd_*(const float*, const long long*, float*, float*,
    // long long, long long, long long*)`.
    unsafe {
        dev.launch(
            &k,
            cfg,
            &[&x, &t, &loss, &stats, &(rows as i64), &(cols as i64), &err],
        )
    }
}

/// Step 2 backward: `dx[r] = g[r] · (exp(x[r] − m_r)/s_r − onehot(t[r]))` with the forward's
/// `stats`; reads the logits once.
#[allow(clippy::too_many_arguments)]
pub fn cross_entropy_bwd2_f32(
    dev: &CudaDevice,
    x: DevPtr,
    t: DevPtr,
    stats: DevPtr,
    g: DevPtr,
    dx: DevPtr,
    rows: usize,
    cols: usize,
    err: DevPtr,
) -> Result<()> {
    if rows == 0 {
        return Ok(());
    }
    let (warp, vec, cfg) = super::rows::row_launch("cross_entropy_bwd", rows, cols, &[x, dx])?;
    let k = dev.function(
        MODULE,
        &super::rows::variant_name("cross_entropy_bwd", warp, vec),
    )?;
    // SAFETY: matches `cross_entropy_bwd_*(const float*, const long long*, const float*,
    // const float*, float*, long long, long long, long long*)`.
    unsafe {
        dev.launch(
            &k,
            cfg,
            &[
                &x,
                &t,
                &stats,
                &g,
                &dx,
                &(rows as i64),
                &(cols as i64),
                &err,
            ],
        )
    }
}

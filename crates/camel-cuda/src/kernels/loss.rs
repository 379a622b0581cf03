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

//! Launchers for `kernels/softmax.cu`.

use super::rows_grid;
use crate::{CudaDevice, DevPtr, Dim3, LaunchConfig, Result};

const MODULE: &str = "softmax";

/// Softmax (or log-softmax when `log`) of each row of `[rows, cols]`, one block per row.
pub fn softmax_last_f32(
    dev: &CudaDevice,
    x: DevPtr,
    y: DevPtr,
    rows: usize,
    cols: usize,
    log: bool,
) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let name = "softmax_last_f32";
    let k = dev.function(MODULE, name)?;
    let cfg = LaunchConfig::new(rows_grid(name, rows)?, Dim3::x(256));
    // SAFETY: matches `softmax_last_f32(const float*, float*, long long, long long, int)`.
    unsafe {
        dev.launch(
            &k,
            cfg,
            &[&x, &y, &(rows as i64), &(cols as i64), &(log as i32)],
        )
    }
}

// ------------------------------------------------------------------ step 2 (memory-bound issue)

/// Step 2: online softmax (or log-softmax) of each row, a warp per row up to 1024 columns,
/// a block per row beyond, float4 when the rows are 16-byte aligned.
pub fn softmax2_f32(
    dev: &CudaDevice,
    x: DevPtr,
    y: DevPtr,
    rows: usize,
    cols: usize,
    log: bool,
) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let (warp, vec, cfg) = super::rows::row_launch("softmax_fwd", rows, cols, &[x, y])?;
    let k = dev.function(MODULE, &super::rows::variant_name("softmax_fwd", warp, vec))?;
    // SAFETY: matches `softmax_fwd_*(const float*, float*, long long, long long, int)`.
    unsafe {
        dev.launch(
            &k,
            cfg,
            &[&x, &y, &(rows as i64), &(cols as i64), &(log as i32)],
        )
    }
}

/// Backward of softmax (`log = false`: `dx = y ⊙ (g − Σ g⊙y)`) or log-softmax
/// (`dx = g − exp(y) Σ g`) from the forward's output `y`. Step 1: a block per row, scalar.
#[allow(clippy::too_many_arguments)]
pub fn softmax_bwd_f32(
    dev: &CudaDevice,
    y: DevPtr,
    g: DevPtr,
    dx: DevPtr,
    rows: usize,
    cols: usize,
    log: bool,
) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let name = "softmax_bwd_f32";
    let k = dev.function(MODULE, name)?;
    let cfg = LaunchConfig::new(rows_grid(name, rows)?, Dim3::x(256));
    // SAFETY: matches `softmax_bwd_f32(const float*, const float*, float*, long long, long long, int)`.
    unsafe {
        dev.launch(
            &k,
            cfg,
            &[&y, &g, &dx, &(rows as i64), &(cols as i64), &(log as i32)],
        )
    }
}

/// Step 2 of [`softmax_bwd_f32`]: warp or block per row, float4.
#[allow(clippy::too_many_arguments)]
pub fn softmax_bwd2_f32(
    dev: &CudaDevice,
    y: DevPtr,
    g: DevPtr,
    dx: DevPtr,
    rows: usize,
    cols: usize,
    log: bool,
) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let (warp, vec, cfg) = super::rows::row_launch("softmax_bwd", rows, cols, &[y, g, dx])?;
    let k = dev.function(MODULE, &super::rows::variant_name("softmax_bwd", warp, vec))?;
    // SAFETY: matches `softmax_bwd_*(const float*, const float*, float*, long long, long long, int)`.
    unsafe {
        dev.launch(
            &k,
            cfg,
            &[&y, &g, &dx, &(rows as i64), &(cols as i64), &(log as i32)],
        )
    }
}

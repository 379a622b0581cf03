//! Launchers for `kernels/reduce.cu`.

use super::rows_grid;
use crate::{CudaDevice, DevPtr, Dim3, LaunchConfig, Result};

const MODULE: &str = "reduce";
const THREADS: u32 = 256;

/// `y[o, i] = reduce_d x[o, d, i]` (op 0 = sum, 1 = max), one block per output element.
pub fn reduce_f32(
    dev: &CudaDevice,
    x: DevPtr,
    y: DevPtr,
    outer: usize,
    dim: usize,
    inner: usize,
    op: i32,
) -> Result<()> {
    let outputs = outer * inner;
    if outputs == 0 {
        return Ok(());
    }
    let name = "reduce_f32";
    let k = dev.function(MODULE, name)?;
    let cfg = LaunchConfig::new(rows_grid(name, outputs)?, Dim3::x(THREADS));
    // SAFETY: matches `reduce_f32(const float*, float*, long long, long long, long long, int)`.
    unsafe {
        dev.launch(
            &k,
            cfg,
            &[&x, &y, &(outer as i64), &(dim as i64), &(inner as i64), &op],
        )
    }
}

/// `out[r] = argmax_c x[r, c]` (i64 output), one block per row.
pub fn argmax_last_f32(
    dev: &CudaDevice,
    x: DevPtr,
    out: DevPtr,
    rows: usize,
    cols: usize,
) -> Result<()> {
    if rows == 0 {
        return Ok(());
    }
    let name = "argmax_last_f32";
    let k = dev.function(MODULE, name)?;
    let cfg = LaunchConfig::new(rows_grid(name, rows)?, Dim3::x(THREADS));
    // SAFETY: matches `argmax_last_f32(const float*, long long*, long long, long long)`.
    unsafe { dev.launch(&k, cfg, &[&x, &out, &(rows as i64), &(cols as i64)]) }
}

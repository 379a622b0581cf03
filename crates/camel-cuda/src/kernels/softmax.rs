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

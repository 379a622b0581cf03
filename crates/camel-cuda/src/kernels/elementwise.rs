//! Launchers for `kernels/elementwise.cu`.

use crate::{launch_1d, CudaDevice, DevPtr, Result};

/// PTX module of this family: `kernels/elementwise.cu`.
const MODULE: &str = "elementwise";

/// `out[i] = value` for `i < n` (`n` floats at `out`).
pub fn fill_f32(dev: &CudaDevice, out: DevPtr, n: usize, value: f32) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let k = dev.function(MODULE, "fill_f32")?;
    // SAFETY: matches `fill_f32(float* out, long long n, float value)`; the caller passes `n`
    // floats of device memory at `out`.
    unsafe { dev.launch(&k, launch_1d(n), &[&out, &(n as i64), &value]) }
}

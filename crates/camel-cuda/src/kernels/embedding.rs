//! Launchers for `kernels/embedding.cu`. `err` points at the device's index-error slot.

use crate::{launch_1d, CudaDevice, DevPtr, Result};

const MODULE: &str = "embedding";

/// `out[i, :] = table[idx[i], :]` for `n` indices into a `[v, d]` table.
#[allow(clippy::too_many_arguments)]
pub fn index_select_rows_f32(
    dev: &CudaDevice,
    table: DevPtr,
    idx: DevPtr,
    out: DevPtr,
    n: usize,
    v: usize,
    d: usize,
    err: DevPtr,
) -> Result<()> {
    if n * d == 0 {
        return Ok(());
    }
    let k = dev.function(MODULE, "index_select_rows_f32")?;
    // SAFETY: matches the kernel's (const float*, const long long*, float*, long long ×3, long long*).
    unsafe {
        dev.launch(
            &k,
            launch_1d(n * d),
            &[
                &table,
                &idx,
                &out,
                &(n as i64),
                &(v as i64),
                &(d as i64),
                &err,
            ],
        )
    }
}

/// `out[idx[i], :] += g[i, :]` (atomic; `out` must be zeroed first).
#[allow(clippy::too_many_arguments)]
pub fn index_add_rows_f32(
    dev: &CudaDevice,
    g: DevPtr,
    idx: DevPtr,
    out: DevPtr,
    n: usize,
    v: usize,
    d: usize,
    err: DevPtr,
) -> Result<()> {
    if n * d == 0 {
        return Ok(());
    }
    let k = dev.function(MODULE, "index_add_rows_f32")?;
    // SAFETY: as above.
    unsafe {
        dev.launch(
            &k,
            launch_1d(n * d),
            &[&g, &idx, &out, &(n as i64), &(v as i64), &(d as i64), &err],
        )
    }
}

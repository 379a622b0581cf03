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

// ------------------------------------------------------------------ step 2 (memory-bound issue)

fn warp_rows_cfg(name: &str, n: usize) -> Result<crate::LaunchConfig> {
    let per_block = (super::rows::ROW_THREADS / 32) as usize;
    Ok(crate::LaunchConfig::new(
        super::rows_grid(name, n.div_ceil(per_block))?,
        crate::Dim3::x(super::rows::ROW_THREADS),
    ))
}

/// Step 2 of [`index_select_rows_f32`]: a warp per index, float4 rows when `d % 4 == 0`.
#[allow(clippy::too_many_arguments)]
pub fn index_select_rows_warp_f32(
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
    let vec = d % 4 == 0 && super::rows::aligned16(&[table, out]);
    let name = if vec {
        "index_select_rows_warp_vec_f32"
    } else {
        "index_select_rows_warp_f32"
    };
    let k = dev.function(MODULE, name)?;
    let cfg = warp_rows_cfg(name, n)?;
    // SAFETY: matches the kernel's (const float*, const long long*, float*, long long ×3, long long*).
    unsafe {
        dev.launch(
            &k,
            cfg,
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

/// Step 2 of [`index_add_rows_f32`]: a warp per index, atomicAdd along the row.
#[allow(clippy::too_many_arguments)]
pub fn index_add_rows_warp_f32(
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
    let name = "index_add_rows_warp_f32";
    let k = dev.function(MODULE, name)?;
    let cfg = warp_rows_cfg(name, n)?;
    // SAFETY: as above.
    unsafe {
        dev.launch(
            &k,
            cfg,
            &[&g, &idx, &out, &(n as i64), &(v as i64), &(d as i64), &err],
        )
    }
}

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

// ------------------------------------------------------------------ step 3 (memory-bound issue)

/// Longest row step 3 holds in registers (1024 threads × 16 floats); longer rows run step 2.
pub const SOFTMAX3_MAX_COLS: usize = 16384;

/// Step 3's kernel for rows of `cols`: `(G, VEC, NV)` — a group of `G` threads per row (≤ 32:
/// lanes of a warp, several rows per warp; more: the whole block), `NV` loads of `VEC` floats per
/// thread. `None` when the row does not fit the registers (step 2 then).
pub fn softmax3_shape(cols: usize, vec: bool) -> Option<(usize, usize, usize)> {
    if cols == 0 || cols > SOFTMAX3_MAX_COLS {
        return None;
    }
    let vw = if vec { 4 } else { 1 };
    let n = cols / vw; // vector elements per row
    if cols <= super::rows::WARP_ROW_MAX {
        if n < 128 {
            // short rows: G = the largest power of two ≤ n / 4, NV a power of two ≥ n / G
            let g = if n < 8 {
                1
            } else {
                1usize << (usize::BITS - 1 - (n / 4).leading_zeros())
            };
            let nv = n.div_ceil(g).next_power_of_two();
            Some((g, vw, if g == 1 { nv } else { nv.max(4) }))
        } else {
            Some((32, vw, n.div_ceil(32).next_power_of_two()))
        }
    } else {
        let nv = if vec { 4 } else { 16 };
        let g = n.div_ceil(nv).next_power_of_two().max(128);
        (g <= 1024).then_some((g, vw, nv))
    }
}

/// Step 3: softmax (or log-softmax) of each row held in registers (`softmax3_*` in
/// `kernels/softmax.cu`); rows longer than [`SOFTMAX3_MAX_COLS`] run [`softmax2_f32`].
pub fn softmax3_f32(
    dev: &CudaDevice,
    x: DevPtr,
    y: DevPtr,
    rows: usize,
    cols: usize,
    log: bool,
) -> Result<()> {
    softmax_regs_f32(dev, "softmax3", x, y, rows, cols, log)
}

/// Step 4 of the forward (`CAMEL_SOFTMAX=4`, an A/B experiment): [`softmax3_f32`] with
/// cache-streaming (evict-first) loads of `x` and stores of `y` (`softmax4_*`); the same
/// arithmetic, shapes and fallback.
pub fn softmax4_f32(
    dev: &CudaDevice,
    x: DevPtr,
    y: DevPtr,
    rows: usize,
    cols: usize,
    log: bool,
) -> Result<()> {
    softmax_regs_f32(dev, "softmax4", x, y, rows, cols, log)
}

/// The forward kernels that hold a row in registers: `{prefix}_g{G}_v{VEC}_n{NV}_f32`.
fn softmax_regs_f32(
    dev: &CudaDevice,
    prefix: &str,
    x: DevPtr,
    y: DevPtr,
    rows: usize,
    cols: usize,
    log: bool,
) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let vec = cols % 4 == 0 && super::rows::aligned16(&[x, y]);
    let Some((g, vw, nv)) = softmax3_shape(cols, vec) else {
        return softmax2_f32(dev, x, y, rows, cols, log);
    };
    let name = super::rows::KernelName::new(format_args!("{prefix}_g{g}_v{vw}_n{nv}_f32"));
    let name = name.as_str();
    let cfg = softmax3_config(name, rows, g)?;
    let k = dev.function(MODULE, name)?;
    // SAFETY: matches `softmax3_*` / `softmax4_*(const float*, float*, long long, long long, int)`.
    unsafe {
        dev.launch(
            &k,
            cfg,
            &[&x, &y, &(rows as i64), &(cols as i64), &(log as i32)],
        )
    }
}

/// Launch configuration of a step-3 kernel of shape `(g, _, _)`: blocks of 256 holding 256 / g
/// rows when `g ≤ 32`, else a block of `g` threads per row.
pub(crate) fn softmax3_config(name: &str, rows: usize, g: usize) -> Result<LaunchConfig> {
    Ok(if g <= 32 {
        let per_block = 256 / g;
        LaunchConfig::new(rows_grid(name, rows.div_ceil(per_block))?, Dim3::x(256))
    } else {
        LaunchConfig::new(rows_grid(name, rows)?, Dim3::x(g as u32))
    })
}

/// Step 3 of [`softmax_bwd_f32`] (same arguments): the rows of `y` and `g` held in registers
/// (`softmax3_bwd_*` in `kernels/softmax.cu`, the forward step 3's shapes); rows longer than
/// [`SOFTMAX3_MAX_COLS`] run [`softmax_bwd2_f32`].
#[allow(clippy::too_many_arguments)]
pub fn softmax3_bwd_f32(
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
    let vec = cols % 4 == 0 && super::rows::aligned16(&[y, g, dx]);
    let Some((gs, vw, nv)) = softmax3_shape(cols, vec) else {
        return softmax_bwd2_f32(dev, y, g, dx, rows, cols, log);
    };
    let name = super::rows::KernelName::new(format_args!("softmax3_bwd_g{gs}_v{vw}_n{nv}_f32"));
    let name = name.as_str();
    let cfg = softmax3_config(name, rows, gs)?;
    let k = dev.function(MODULE, name)?;
    // SAFETY: matches `softmax3_bwd_*(const float*, const float*, float*, long long, long long, int)`.
    unsafe {
        dev.launch(
            &k,
            cfg,
            &[&y, &g, &dx, &(rows as i64), &(cols as i64), &(log as i32)],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::softmax3_shape;

    /// Every shape the launcher can pick is a kernel instantiated in `kernels/softmax.cu`, and
    /// its capacity covers the row.
    #[test]
    fn softmax3_shapes_are_instantiated() {
        let src = include_str!("../../../../kernels/softmax.cu");
        // one SOFTMAX3 line instantiates the forward, the backward and step 4's forward of a shape
        assert!(src.contains("softmax3_bwd_g##G##_v##VEC##_n##NV##_f32("));
        assert!(src.contains("softmax4_g##G##_v##VEC##_n##NV##_f32("));
        for cols in 1..=super::SOFTMAX3_MAX_COLS + 1 {
            for vec in [false, true] {
                if vec && cols % 4 != 0 {
                    continue;
                }
                match softmax3_shape(cols, vec) {
                    Some((g, vw, nv)) => {
                        assert!(g * vw * nv >= cols, "cols {cols}: ({g}, {vw}, {nv})");
                        let inst = format!("SOFTMAX3({g}, {vw}, {nv})");
                        let fam = format!("SOFTMAX3({g}, VEC, {nv})");
                        assert!(
                            src.contains(&inst) || src.contains(&fam),
                            "cols {cols} vec {vec}: {inst} is not instantiated"
                        );
                    }
                    None => assert!(cols > super::SOFTMAX3_MAX_COLS, "cols {cols}"),
                }
            }
        }
    }
}

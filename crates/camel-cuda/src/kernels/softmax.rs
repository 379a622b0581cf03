//! Launchers for `kernels/softmax/`: one PTX module per ladder step.

use super::rows::{row_launch, variant_name};
use super::shape::Elem;
use super::{launch, rows_grid};
use crate::{CudaDevice, DevPtr, Dim3, LaunchConfig, Result};

/// PTX module of step 1: `kernels/softmax/01_block_per_row.cu`.
const STEP1: &str = "softmax/01_block_per_row";
/// PTX module of step 2: `kernels/softmax/02_online_warp.cu`.
const STEP2: &str = "softmax/02_online_warp";
/// PTX module of step 3 (and the backward of step 4): `kernels/softmax/03_warp_registers.cu`.
const STEP3: &str = "softmax/03_warp_registers";
/// PTX module of step 4's forward: `kernels/softmax/04_streaming.cu`.
const STEP4: &str = "softmax/04_streaming";

launchers! {
    // the forward launchers, one a step: (dev, x, y, rows, cols, log)
    (dev: &CudaDevice, x: DevPtr, y: DevPtr, rows: usize, cols: usize, log: bool);

    /// Softmax (or log-softmax when `log`) of each row of `[rows, cols]`, one block per row.
    pub fn block_per_row(..) {
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let name = "softmax_last_f32";
        let cfg = LaunchConfig::new(rows_grid(name, rows)?, Dim3::x(256));
        forward(dev, STEP1, name, cfg, [x, y], rows, cols, log)
    }

    /// Step 2: online softmax (or log-softmax) of each row, a warp per row up to 1024 columns,
    /// a block per row beyond, float4 when the rows are 16-byte aligned.
    pub fn online_warp(..) {
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let (warp, vec, cfg) = row_launch("softmax_fwd", rows, cols, &[x, y])?;
        let name = variant_name("softmax_fwd", warp, vec);
        forward(dev, STEP2, &name, cfg, [x, y], rows, cols, log)
    }

    /// Step 3: softmax (or log-softmax) of each row held in registers (`softmax3_*` or
    /// `log_softmax3_*` in `kernels/softmax/`); rows longer than [`SOFTMAX3_MAX_COLS`] run
    /// [`online_warp`].
    pub fn warp_registers(..) {
        softmax_regs_f32(dev, "softmax3", x, y, rows, cols, log)
    }

    /// Step 4 of the forward (`CAMEL_SOFTMAX=4`): [`warp_registers`] with
    /// cache-streaming (evict-first) loads of `x` and stores of `y` (`softmax4_*`,
    /// `log_softmax4_*`); the same arithmetic, shapes and fallback.
    pub fn streaming(..) {
        softmax_regs_f32(dev, "softmax4", x, y, rows, cols, log)
    }
}

/// Launches a forward kernel of steps 1 and 2, `(const float* x, float* y, long long rows,
/// long long cols, int log)`, with `cfg`.
#[allow(clippy::too_many_arguments)]
fn forward(
    dev: &CudaDevice,
    module: &str,
    name: &str,
    cfg: LaunchConfig,
    [x, y]: [DevPtr; 2],
    rows: usize,
    cols: usize,
    log: bool,
) -> Result<()> {
    let (rows, cols, log) = (rows as i64, cols as i64, log as i32);
    // SAFETY: matches `softmax_last_f32` / `softmax_fwd_*(const float*, float*, long long, long
    // long, int)`; the callers pass `[rows, cols]` floats at `x` and `y`.
    unsafe { launch(dev, module, name, cfg, &[&x, &y, &rows, &cols, &log]) }
}

/// Launches a backward kernel of steps 1 to 3, `(const float* y, const float* g, float* dx,
/// long long rows, long long cols, int log)`, with `cfg`.
#[allow(clippy::too_many_arguments)]
fn backward(
    dev: &CudaDevice,
    module: &str,
    name: &str,
    cfg: LaunchConfig,
    [y, g, dx]: [DevPtr; 3],
    rows: usize,
    cols: usize,
    log: bool,
) -> Result<()> {
    let (rows, cols, log) = (rows as i64, cols as i64, log as i32);
    // SAFETY: matches `softmax_bwd_f32` / `softmax_bwd_*` / `softmax3_bwd_*(const float*, const
    // float*, float*, long long, long long, int)`; the callers pass `[rows, cols]` floats at
    // `y`, `g` and `dx`.
    unsafe { launch(dev, module, name, cfg, &[&y, &g, &dx, &rows, &cols, &log]) }
}

launchers! {
    // the backward launchers: (dev, y, g, dx, rows, cols, log)
    (dev: &CudaDevice, y: DevPtr, g: DevPtr, dx: DevPtr, rows: usize, cols: usize, log: bool);

    /// Backward of softmax (`log = false`: `dx = y ⊙ (g − Σ g⊙y)`) or log-softmax
    /// (`dx = g − exp(y) Σ g`) from the forward's output `y`. Step 1: a block per row, scalar.
    pub fn block_per_row_bwd(..) {
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let name = "softmax_bwd_f32";
        let cfg = LaunchConfig::new(rows_grid(name, rows)?, Dim3::x(256));
        backward(dev, STEP1, name, cfg, [y, g, dx], rows, cols, log)
    }

    /// Step 2 of [`block_per_row_bwd`]: warp or block per row, float4.
    pub fn online_warp_bwd(..) {
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let (warp, vec, cfg) = row_launch("softmax_bwd", rows, cols, &[y, g, dx])?;
        let name = variant_name("softmax_bwd", warp, vec);
        backward(dev, STEP2, &name, cfg, [y, g, dx], rows, cols, log)
    }

    /// Step 3 of [`block_per_row_bwd`] (same arguments): the rows of `y` and `g` held in registers
    /// (`softmax3_bwd_*` in `kernels/softmax/`, the forward step 3's shapes); rows longer than
    /// [`SOFTMAX3_MAX_COLS`] run [`online_warp_bwd`].
    pub fn warp_registers_bwd(..) {
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        if warp_registers_bwd_typed(dev, [y, g, dx], rows, cols, log, Elem::F32)? {
            return Ok(());
        }
        online_warp_bwd(dev, y, g, dx, rows, cols, log)
    }
}

/// Longest row step 3 holds in registers (1024 threads × 16 floats); longer rows run step 2.
pub const SOFTMAX3_MAX_COLS: usize = 16384;

/// Step 3's kernel for rows of `cols`: `(G, VEC, NV)` — a group of `G` threads per row (≤ 32:
/// lanes of a warp, several rows per warp; more: the whole block), `NV` loads of `VEC` floats per
/// thread. `None` when the row does not fit the registers (step 2 then). Short rows get an exact
/// `NV` (padding in the last slot only), so every exp of the row runs unconditionally; the
/// kernels instantiate these shapes from one list (`CAMEL_ROW3_SHAPES`, `kernels/common/rows.cuh`).
pub fn softmax3_shape(cols: usize, vec: bool) -> Option<(usize, usize, usize)> {
    if cols == 0 || cols > SOFTMAX3_MAX_COLS {
        return None;
    }
    let vw = if vec { 4 } else { 1 };
    let n = cols / vw; // vector elements per row
    if cols <= super::rows::WARP_ROW_MAX {
        if n < 128 {
            // short rows: G = the largest power of two ≤ n / 4, NV = ceil(n / G) (G = 1: 1 … 7;
            // else 4 … 8)
            let g = if n < 8 {
                1
            } else {
                1usize << (usize::BITS - 1 - (n / 4).leading_zeros())
            };
            Some((g, vw, n.div_ceil(g)))
        } else {
            Some((32, vw, n.div_ceil(32).next_power_of_two()))
        }
    } else {
        let nv = if vec { 4 } else { 16 };
        let g = n.div_ceil(nv).next_power_of_two().max(128);
        (g <= 1024).then_some((g, vw, nv))
    }
}

/// The forward kernels that hold a row in registers: `{prefix}_g{G}_v{VEC}_n{NV}_f32`, with
/// `log_` in front for log-softmax (a kernel of its own: one body each measured faster than both
/// behind an argument, `dev/labs/exp_lab.cu`).
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
        return online_warp(dev, x, y, rows, cols, log);
    };
    let log_ = if log { "log_" } else { "" };
    let name = super::rows::KernelName::new(format_args!("{log_}{prefix}_g{g}_v{vw}_n{nv}_f32"));
    let name = name.as_str();
    let cfg = softmax3_config(name, rows, g)?;
    // step 4's forward kernels live in its own module
    let module = if prefix == "softmax4" { STEP4 } else { STEP3 };
    let (rows, cols) = (rows as i64, cols as i64);
    // SAFETY: matches `[log_]softmax{3,4}_*(const float*, float*, long long, long long)`.
    unsafe { launch(dev, module, name, cfg, &[&x, &y, &rows, &cols]) }
}

/// Step 3's forward in any float dtype `elem` (`softmax3_*_{f32,f16,bf16}`): each element widens
/// to f32 as it loads and the output rounds once as it is stored. `Ok(false)`, launching nothing,
/// where the row is longer than [`SOFTMAX3_MAX_COLS`]: only f32 has kernels for such rows.
#[allow(clippy::too_many_arguments)]
pub fn warp_registers_typed(
    dev: &CudaDevice,
    x: DevPtr,
    y: DevPtr,
    rows: usize,
    cols: usize,
    log: bool,
    elem: Elem,
) -> Result<bool> {
    if rows == 0 || cols == 0 {
        return Ok(true);
    }
    let vec = cols % 4 == 0 && super::rows::aligned(&[x, y], 4 * elem.bytes());
    let Some((g, vw, nv)) = softmax3_shape(cols, vec) else {
        return Ok(false);
    };
    let log_ = if log { "log_" } else { "" };
    let sfx = elem.suffix();
    let name = super::rows::KernelName::new(format_args!("{log_}softmax3_g{g}_v{vw}_n{nv}_{sfx}"));
    let name = name.as_str();
    let cfg = softmax3_config(name, rows, g)?;
    let (rows, cols) = (rows as i64, cols as i64);
    // SAFETY: matches `[log_]softmax3_*_{sfx}(const T*, T*, long long, long long)`; the callers
    // pass `[rows, cols]` elements of `elem` at `x` and `y`.
    unsafe { launch(dev, STEP3, name, cfg, &[&x, &y, &rows, &cols]) }?;
    Ok(true)
}

/// Step 3's backward in any float dtype `elem` (`softmax3_bwd_*_{f32,f16,bf16}`; `y`, `g` and
/// `dx` all of `elem`), computed in f32 with `dx` rounded once. `Ok(false)`, launching nothing,
/// where the row is longer than [`SOFTMAX3_MAX_COLS`].
#[allow(clippy::too_many_arguments)]
pub fn warp_registers_bwd_typed(
    dev: &CudaDevice,
    [y, g, dx]: [DevPtr; 3],
    rows: usize,
    cols: usize,
    log: bool,
    elem: Elem,
) -> Result<bool> {
    if rows == 0 || cols == 0 {
        return Ok(true);
    }
    let vec = cols % 4 == 0 && super::rows::aligned(&[y, g, dx], 4 * elem.bytes());
    let Some((gs, vw, nv)) = softmax3_shape(cols, vec) else {
        return Ok(false);
    };
    let sfx = elem.suffix();
    let name = super::rows::KernelName::new(format_args!("softmax3_bwd_g{gs}_v{vw}_n{nv}_{sfx}"));
    let name = name.as_str();
    let cfg = softmax3_config(name, rows, gs)?;
    backward(dev, STEP3, name, cfg, [y, g, dx], rows, cols, log)?;
    Ok(true)
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

// ------------------------------------------------------------------ the ladder's table

/// A softmax / log-softmax forward launcher: `(dev, x, y, rows, cols, log)`.
pub type Forward = fn(&CudaDevice, DevPtr, DevPtr, usize, usize, bool) -> Result<()>;
/// A softmax / log-softmax backward launcher: `(dev, y, g, dx, rows, cols, log)`.
pub type Backward = fn(&CudaDevice, DevPtr, DevPtr, DevPtr, usize, usize, bool) -> Result<()>;

/// The launchers of one step of the softmax ladder.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// The step (described in [`super::ladder::Family::Softmax`]'s table).
    pub step: super::rows::Step,
    /// Its forward.
    pub forward: Forward,
    /// Its backward.
    pub backward: Backward,
}

/// The softmax ladder: the one table the backend, the benchmarks and the tests run.
pub const STEPS: [Kernels; 4] = {
    use super::rows::Step;
    [
        Kernels {
            step: Step::One,
            forward: block_per_row,
            backward: block_per_row_bwd,
        },
        Kernels {
            step: Step::Two,
            forward: online_warp,
            backward: online_warp_bwd,
        },
        Kernels {
            step: Step::Three,
            forward: warp_registers,
            backward: warp_registers_bwd,
        },
        Kernels {
            step: Step::Four,
            forward: streaming,
            backward: warp_registers_bwd,
        },
    ]
};

/// The launchers of `step` (the highest step at or below it).
pub fn at(step: super::rows::Step) -> &'static Kernels {
    super::ladder::pick(&STEPS, step, |k| k.step)
}

/// Whether `kernels/common/rows.cuh`'s shape list (`CAMEL_ROW3_SHAPES`, which softmax step 3 and
/// cross-entropy steps 3–4 instantiate) holds `(g, vw, nv)`.
#[cfg(test)]
pub(crate) fn shape_listed(g: usize, vw: usize, nv: usize) -> bool {
    let src = include_str!("../../../../kernels/common/rows.cuh");
    let list = &src[src
        .find("#define CAMEL_ROW3_SHORT")
        .expect("CAMEL_ROW3_SHORT in rows.cuh")..];
    list.contains(&format!("X({g}, {vw}, {nv})"))
        || (vw == 1 || vw == 4)
            && list.contains(&format!("X({g}, VEC, {nv})"))
            && list.contains(&format!("CAMEL_ROW3_SHORT(X, {vw})"))
}

#[cfg(test)]
mod tests {
    use super::{shape_listed, softmax3_shape};

    /// Every shape the launcher can pick is a kernel instantiated in `kernels/softmax/`, and
    /// its capacity covers the row.
    #[test]
    fn softmax3_shapes_are_instantiated() {
        let src = concat!(
            include_str!("../../../../kernels/softmax/softmax.cuh"),
            include_str!("../../../../kernels/softmax/03_warp_registers.cu"),
            include_str!("../../../../kernels/softmax/04_streaming.cu"),
        );
        // one SOFTMAX3 line instantiates the forward and the backward of a shape in each dtype,
        // one SOFTMAX4 line step 4's f32 forward
        assert!(src.contains("softmax3_bwd_g##G##_v##VEC##_n##NV##_##SUF("));
        assert!(src.contains("NAME##_g##G##_v##VEC##_n##NV##_##SUF("));
        for fwd in ["softmax3", "log_softmax3", "softmax4", "log_softmax4"] {
            assert!(src.contains(&format!("SOFTMAX3_FWD({fwd}, G, VEC, NV, ")));
        }
        for (ty, sfx) in [
            ("float", "f32"),
            ("__half", "f16"),
            ("__nv_bfloat16", "bf16"),
        ] {
            assert!(src.contains(&format!("SOFTMAX3_T(G, VEC, NV, {ty}, {sfx})")));
        }
        assert!(src.contains("\nCAMEL_ROW3_SHAPES(SOFTMAX3)"));
        for cols in 1..=super::SOFTMAX3_MAX_COLS + 1 {
            for vec in [false, true] {
                if vec && cols % 4 != 0 {
                    continue;
                }
                match softmax3_shape(cols, vec) {
                    Some((g, vw, nv)) => {
                        assert!(g * vw * nv >= cols, "cols {cols}: ({g}, {vw}, {nv})");
                        if g <= 16 {
                            // exact: the padding fits in the last slot
                            assert!(g * vw * (nv - 1) < cols, "cols {cols}: ({g}, {vw}, {nv})");
                        }
                        assert!(
                            shape_listed(g, vw, nv),
                            "cols {cols} vec {vec}: ({g}, {vw}, {nv}) is not in CAMEL_ROW3_SHAPES"
                        );
                    }
                    None => assert!(cols > super::SOFTMAX3_MAX_COLS, "cols {cols}"),
                }
            }
        }
    }
}

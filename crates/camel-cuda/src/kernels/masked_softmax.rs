//! Launchers for `kernels/masked_softmax/`: the scaled, causally masked softmax of attention
//! scores and its backward, a single-step family.

use super::rows::KernelName;
use super::shape::Elem;
use super::softmax::{softmax3_config, softmax3_shape};
use super::{launch, rows_grid};
use crate::{CudaDevice, DevPtr, Dim3, LaunchConfig, Result};

/// PTX module of step 1: `kernels/masked_softmax/01_registers.cu`.
const STEP1: &str = "masked_softmax/01_registers";

/// Launches a kernel of step 1, `(in0, in1, [out,] long long rows, long long cols, long long tq,
/// float scale, int causal)`, with `cfg`.
#[allow(clippy::too_many_arguments)]
fn go(
    dev: &CudaDevice,
    name: &str,
    cfg: LaunchConfig,
    ptrs: &[DevPtr],
    rows: usize,
    cols: usize,
    tq: usize,
    scale: f32,
    causal: bool,
) -> Result<()> {
    let (rows, cols, tq, causal) = (rows as i64, cols as i64, tq as i64, causal as i32);
    match *ptrs {
        // SAFETY: matches `masked_softmax3_*_{T}` / `masked_softmax_block_f32(const T* x, T* y,
        // long long, long long, long long, float, int)`; the callers pass `[rows, cols]`
        // elements of the kernel's T at `x` and `y`, and `tq` divides `rows`.
        [x, y] => unsafe {
            launch(
                dev,
                STEP1,
                name,
                cfg,
                &[&x, &y, &rows, &cols, &tq, &scale, &causal],
            )
        },
        // SAFETY: matches `masked_softmax3_bwd_*_{T}` / `masked_softmax_bwd_block_f32(const T*
        // y, const T* g, T* dx, long long, long long, long long, float, int)`, each pointer
        // `[rows, cols]` elements of the kernel's T.
        [y, g, dx] => unsafe {
            launch(
                dev,
                STEP1,
                name,
                cfg,
                &[&y, &g, &dx, &rows, &cols, &tq, &scale, &causal],
            )
        },
        _ => Err(crate::Error::LaunchConfig {
            kernel: name.to_string(),
            msg: format!("{} pointers, expected 2 or 3", ptrs.len()),
        }),
    }
}

/// The kernel and launch configuration for rows of `cols`: the register-row kernel of
/// softmax step 3's shape (`{base}_g{G}_v{VEC}_n{NV}_f32`), or a block of 256 threads per row
/// (`{block}`) for rows longer than the registers hold.
fn pick(
    base: &str,
    block: &'static str,
    rows: usize,
    cols: usize,
    ptrs: &[DevPtr],
) -> Result<(KernelName, LaunchConfig)> {
    let vec = cols % 4 == 0 && super::rows::aligned16(ptrs);
    Ok(match softmax3_shape(cols, vec) {
        Some((g, vw, nv)) => {
            let name = KernelName::new(format_args!("{base}_g{g}_v{vw}_n{nv}_f32"));
            let cfg = softmax3_config(name.as_str(), rows, g)?;
            (name, cfg)
        }
        None => (
            KernelName::new(format_args!("{block}")),
            LaunchConfig::new(rows_grid(block, rows)?, Dim3::x(256)),
        ),
    })
}

launchers! {
    (dev: &CudaDevice, x: DevPtr, y: DevPtr, rows: usize, cols: usize, tq: usize, scale: f32, causal: bool);

    /// `y = softmax(scale · x)` of each row of `[rows, cols]` (row `r` is query `r % tq` of
    /// `tq`), with key `j` masked (0) for query `i` when `causal` and `j > i + (cols − tq)`.
    /// The row is held in registers and read once (`masked_softmax3_*`); rows longer than
    /// [`super::softmax::SOFTMAX3_MAX_COLS`] run a block per row (`masked_softmax_block_f32`).
    pub fn registers(..) {
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let (name, cfg) = pick("masked_softmax3", "masked_softmax_block_f32", rows, cols, &[x, y])?;
        go(dev, name.as_str(), cfg, &[x, y], rows, cols, tq.max(1), scale, causal)
    }
}

launchers! {
    (dev: &CudaDevice, y: DevPtr, g: DevPtr, dx: DevPtr, rows: usize, cols: usize, tq: usize, scale: f32, causal: bool);

    /// Backward of [`registers`] from its output `y`: `dx = scale · y ⊙ (g − Σ g⊙y)` over the
    /// visible keys, 0 on the masked ones (`masked_softmax3_bwd_*`, or
    /// `masked_softmax_bwd_block_f32` for long rows).
    pub fn registers_bwd(..) {
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let ptrs = [y, g, dx];
        let (name, cfg) = pick("masked_softmax3_bwd", "masked_softmax_bwd_block_f32", rows, cols, &ptrs)?;
        go(dev, name.as_str(), cfg, &ptrs, rows, cols, tq.max(1), scale, causal)
    }
}

/// The register-row forward or backward (`ptrs` = `[x, y]` or `[y, g, dx]`) in any float dtype
/// `elem` (`masked_softmax3[_bwd]_*_{f32,f16,bf16}`): each element widens to f32 as it loads
/// and each output rounds once as it is stored. `Ok(false)`, launching nothing, where the row
/// is longer than [`super::softmax::SOFTMAX3_MAX_COLS`]: only f32 has kernels for such rows.
#[allow(clippy::too_many_arguments)]
pub fn registers_typed(
    dev: &CudaDevice,
    ptrs: &[DevPtr],
    rows: usize,
    cols: usize,
    tq: usize,
    scale: f32,
    causal: bool,
    elem: Elem,
) -> Result<bool> {
    if rows == 0 || cols == 0 {
        return Ok(true);
    }
    let vec = cols % 4 == 0 && super::rows::aligned(ptrs, 4 * elem.bytes());
    let Some((g, vw, nv)) = softmax3_shape(cols, vec) else {
        return Ok(false);
    };
    let bwd = if ptrs.len() == 3 { "_bwd" } else { "" };
    let sfx = elem.suffix();
    let name = KernelName::new(format_args!("masked_softmax3{bwd}_g{g}_v{vw}_n{nv}_{sfx}"));
    let cfg = softmax3_config(name.as_str(), rows, g)?;
    go(
        dev,
        name.as_str(),
        cfg,
        ptrs,
        rows,
        cols,
        tq.max(1),
        scale,
        causal,
    )?;
    Ok(true)
}

// ------------------------------------------------------------------ the family's table

/// A masked-softmax forward launcher: `(dev, x, y, rows, cols, tq, scale, causal)`.
pub type Forward = fn(&CudaDevice, DevPtr, DevPtr, usize, usize, usize, f32, bool) -> Result<()>;
/// A masked-softmax backward launcher: `(dev, y, g, dx, rows, cols, tq, scale, causal)`.
pub type Backward =
    fn(&CudaDevice, DevPtr, DevPtr, DevPtr, usize, usize, usize, f32, bool) -> Result<()>;

/// The launchers of one step of the masked-softmax family.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// The step (described in [`super::ladder::Family::MaskedSoftmax`]'s table).
    pub step: super::rows::Step,
    /// Its forward.
    pub forward: Forward,
    /// Its backward.
    pub backward: Backward,
}

/// The masked-softmax family: one step.
pub const STEPS: [Kernels; 1] = [Kernels {
    step: super::rows::Step::One,
    forward: registers,
    backward: registers_bwd,
}];

/// The launchers of `step` (the highest step at or below it).
pub fn at(step: super::rows::Step) -> &'static Kernels {
    super::ladder::pick(&STEPS, step, |k| k.step)
}

#[cfg(test)]
mod tests {
    /// The kernel file instantiates both kernels for every register-row shape the launcher can
    /// pick (the shapes of softmax step 3, checked against the list by softmax's own test).
    #[test]
    fn every_shape_is_instantiated() {
        let src = include_str!("../../../../kernels/masked_softmax/01_registers.cu");
        assert!(src.contains("masked_softmax3_g##G##_v##VEC##_n##NV##_##SUF("));
        assert!(src.contains("masked_softmax3_bwd_g##G##_v##VEC##_n##NV##_##SUF("));
        for t in ["float, f32", "__half, f16", "__nv_bfloat16, bf16"] {
            assert!(src.contains(&format!("MASKED3_T(G, VEC, NV, {t})")), "{t}");
        }
        assert!(src.contains("\nCAMEL_ROW3_SHAPES(MASKED3)"));
        assert!(src.contains("masked_softmax_block_f32("));
        assert!(src.contains("masked_softmax_bwd_block_f32("));
    }
}

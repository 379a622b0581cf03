//! Launchers for `kernels/loss/` (one PTX module per ladder step). `err` points at the device's index-error slot (4 × i64).

use super::rows::{row_launch, variant_name, KernelName};
use super::shape::Elem;
use super::{launch, launch_rows, rows_grid};
use crate::{CudaDevice, DevPtr, Dim3, Error, LaunchConfig, Result};

/// PTX module of step 1: `kernels/loss/01_block_per_row.cu`.
const STEP1: &str = "loss/01_block_per_row";
/// PTX module of step 2: `kernels/loss/02_saved_stats.cu`.
const STEP2: &str = "loss/02_saved_stats";
/// PTX module of step 3: `kernels/loss/03_registers.cu`.
const STEP3: &str = "loss/03_registers";
/// PTX module of step 4: `kernels/loss/04_fused_mean.cu`.
const STEP4: &str = "loss/04_fused_mean";

/// Per-row cross-entropy of `[rows, cols]` logits against i64 targets.
#[allow(clippy::too_many_arguments)]
pub fn block_per_row(
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
    let (r, c) = (rows as i64, cols as i64);
    // SAFETY: matches `cross_entropy_fwd_f32(const float*, const long long*, float*, long long,
    // long long, long long*)`.
    unsafe {
        let args: [&dyn crate::KernelArg; 6] = [&x, &t, &loss, &r, &c, &err];
        launch_rows(dev, STEP1, "cross_entropy_fwd_f32", rows, 256, &args)
    }
}

/// `dx[r] = g[r] · (softmax(x[r]) − onehot(t[r]))`.
#[allow(clippy::too_many_arguments)]
pub fn block_per_row_bwd(
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
    let (r, c) = (rows as i64, cols as i64);
    // SAFETY: matches `cross_entropy_bwd_f32(const float*, const long long*, const float*,
    // float*, long long, long long, long long*)`.
    unsafe {
        let args: [&dyn crate::KernelArg; 7] = [&x, &t, &g, &dx, &r, &c, &err];
        launch_rows(dev, STEP1, "cross_entropy_bwd_f32", rows, 256, &args)
    }
}

launchers! {
    // the forward of steps 2 to 4 (the Forward type)
    (
        dev: &CudaDevice, x: DevPtr, t: DevPtr, loss: DevPtr, stats: DevPtr, rows: usize,
        cols: usize, err: DevPtr,
    );

    /// Step 2 forward: per-row loss and the row statistics `stats[2r] = max`, `stats[2r+1] =
    /// Σ exp(x − max)` (2·rows floats) that [`saved_stats_bwd`] reads. One online pass.
    pub fn saved_stats(..) {
        if rows == 0 {
            return Ok(());
        }
        let (warp, vec, cfg) = row_launch("cross_entropy_fwd", rows, cols, &[x])?;
        let name = variant_name("cross_entropy_fwd", warp, vec);
        stats_fwd(dev, STEP2, &name, cfg, [x, t, loss, stats], rows, cols, err)
    }

    /// Step 3 forward (same arguments and outputs as [`saved_stats`], the same
    /// `stats`): rows up to [`super::softmax::SOFTMAX3_MAX_COLS`] columns held in registers with
    /// softmax step 3's layout (`ce3_fwd_*`), longer rows one block each with an alignment prologue
    /// and unrolled float4 loads (`cross_entropy3_fwd_long_f32`).
    pub fn registers(..) {
        if rows == 0 {
            return Ok(());
        }
        if cols == 0 {
            // every target is out of range: step 2 records the error and writes NaN
            return saved_stats(dev, x, t, loss, stats, rows, cols, err);
        }
        let vec = cols % 4 == 0 && super::rows::aligned16(&[x]);
        let (name, cfg) = ce_launch(
            "ce3_fwd",
            "cross_entropy3_fwd_long_f32",
            rows,
            cols,
            vec,
            false,
            Elem::F32,
        )?;
        let p = [x, t, loss, stats];
        stats_fwd(dev, STEP3, name.as_str(), cfg, p, rows, cols, err)
    }

    /// Step 4 forward: the **mean** cross-entropy over the rows, written to `loss` (one float), in
    /// one launch, and the same `stats` as step 3 for [`fused_mean_bwd`]. Step 3's
    /// kernels with the mean fused in: each block stores its rows' summed losses with a mark as one
    /// 64-bit word (in [`CudaDevice::counters`], zero between kernels) and the grid's last block
    /// takes the words in block order as they are marked, so the result does not depend on which
    /// block ends last. Short rows go 2 to a group where they fit ([`ce4_rows`]): half the words.
    /// `cols` must be ≥ 1 (with no classes every target is out of range: use step 3).
    pub fn fused_mean(..) {
        fused_mean_launch(dev, [x, t, loss, stats], rows, cols, err, Elem::F32)
    }
}

/// [`fused_mean`] with logits of any float dtype `elem` (`ce4_fwd_*_{f32,f16,bf16}`: each logit
/// widens to f32 as it loads; the mean and the statistics are f32). `Ok(false)`, launching
/// nothing, for rows longer than [`super::softmax::SOFTMAX3_MAX_COLS`], which have f32 kernels
/// only.
#[allow(clippy::too_many_arguments)]
pub fn fused_mean_typed(
    dev: &CudaDevice,
    [x, t, loss, stats]: [DevPtr; 4],
    rows: usize,
    cols: usize,
    err: DevPtr,
    elem: Elem,
) -> Result<bool> {
    if !fits_registers(elem, cols) {
        return Ok(false);
    }
    fused_mean_launch(dev, [x, t, loss, stats], rows, cols, err, elem)?;
    Ok(true)
}

/// Whether step 4 has a kernel for rows of `cols` logits of `elem`: f32 at any length (the
/// long-row kernels past [`super::softmax::SOFTMAX3_MAX_COLS`]), 16-bit up to that length.
fn fits_registers(elem: Elem, cols: usize) -> bool {
    elem == Elem::F32 || cols <= super::softmax::SOFTMAX3_MAX_COLS
}

fn fused_mean_launch(
    dev: &CudaDevice,
    [x, t, loss, stats]: [DevPtr; 4],
    rows: usize,
    cols: usize,
    err: DevPtr,
    elem: Elem,
) -> Result<()> {
    let vec = cols % 4 == 0 && super::rows::aligned(&[x], 4 * elem.bytes());
    let (name, cfg) = ce_launch(
        "ce4_fwd",
        "cross_entropy4_fwd_long_f32",
        rows,
        cols,
        vec,
        true,
        elem,
    )?;
    let blocks = cfg.grid.x as usize * cfg.grid.y as usize;
    if rows == 0 || cols == 0 || blocks > u32::MAX as usize {
        return Err(Error::LaunchConfig {
            kernel: format!("{STEP4}::{}", name.as_str()),
            msg: format!(
                "a mean over [{rows}, {cols}] logits needs rows ≥ 1, cols ≥ 1 and at most \
                 2^32 − 1 blocks ({blocks})"
            ),
        });
    }
    let words = dev.counters(2 * blocks)?; // a 64-bit word a block
    let (rows, cols) = (rows as i64, cols as i64);
    // SAFETY: matches `ce4_fwd_*` / `cross_entropy4_fwd_long_f32(const T*, const long long*,
    // float*, float*, unsigned long long*, long long, long long, long long*)`, T the logits'
    // `elem`; `words` holds one 64-bit word per block of `cfg`, zero, and every kernel leaves it
    // zero.
    unsafe {
        let args: [&dyn crate::KernelArg; 8] = [&x, &t, &loss, &stats, &words, &rows, &cols, &err];
        launch(dev, STEP4, name.as_str(), cfg, &args)
    }
}

/// Launches a forward kernel of steps 2 and 3, `(const float* x, const long long* t, float*
/// loss, float* stats, long long rows, long long cols, long long* err)`, with `cfg`.
#[allow(clippy::too_many_arguments)]
fn stats_fwd(
    dev: &CudaDevice,
    module: &str,
    name: &str,
    cfg: LaunchConfig,
    [x, t, loss, stats]: [DevPtr; 4],
    rows: usize,
    cols: usize,
    err: DevPtr,
) -> Result<()> {
    let (rows, cols) = (rows as i64, cols as i64);
    // SAFETY: matches `cross_entropy_fwd_*` / `ce3_fwd_*` / `cross_entropy3_fwd_long_f32(const
    // float*, const long long*, float*, float*, long long, long long, long long*)`; the callers
    // pass `[rows, cols]` logits, `rows` targets and losses, `2·rows` stats.
    unsafe {
        let args: [&dyn crate::KernelArg; 7] = [&x, &t, &loss, &stats, &rows, &cols, &err];
        launch(dev, module, name, cfg, &args)
    }
}

launchers! {
    // the backward of steps 2 to 4 (the Backward type)
    (
        dev: &CudaDevice, x: DevPtr, t: DevPtr, stats: DevPtr, g: DevPtr, dx: DevPtr, rows: usize,
        cols: usize, err: DevPtr,
    );

    /// Step 2 backward: `dx[r] = g[r] · (exp(x[r] − m_r)/s_r − onehot(t[r]))` with the forward's
    /// `stats`; reads the logits once.
    pub fn saved_stats_bwd(..) {
        if rows == 0 {
            return Ok(());
        }
        let (warp, vec, cfg) = row_launch("cross_entropy_bwd", rows, cols, &[x, dx])?;
        let name = variant_name("cross_entropy_bwd", warp, vec);
        let (rows, cols) = (rows as i64, cols as i64);
        // SAFETY: matches `cross_entropy_bwd_*(const float*, const long long*, const float*,
        // const float*, float*, long long, long long, long long*)`.
        unsafe {
            let args: [&dyn crate::KernelArg; 8] = [&x, &t, &stats, &g, &dx, &rows, &cols, &err];
            launch(dev, STEP2, &name, cfg, &args)
        }
    }

    /// Step 3 backward (same arguments as [`saved_stats_bwd`]): elementwise with the saved
    /// statistics; short rows with softmax step 3's layout (`ce3_bwd_*`), long rows a block each
    /// with an alignment prologue and unrolled float4 (`cross_entropy3_bwd_long_f32`, vectorized
    /// when `x` and `dx` have the same address mod 16, so their rows align together).
    pub fn registers_bwd(..) {
        if rows == 0 || cols == 0 {
            return saved_stats_bwd(dev, x, t, stats, g, dx, rows, cols, err);
        }
        ce_bwd_launch(dev, 3, [x, t, stats, g, dx], rows, cols, err, Elem::F32)
    }

    /// Step 4 backward: `dx[r] = g[0]/rows · (exp(x[r] − m_r)/s_r − onehot(t[r]))`, the gradient of
    /// [`fused_mean`]'s mean, with its `stats` and the mean's one upstream
    /// gradient `g`; one launch (step 3's kernels reading `g` as that scalar).
    pub fn fused_mean_bwd(..) {
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        ce_bwd_launch(dev, 4, [x, t, stats, g, dx], rows, cols, err, Elem::F32)
    }
}

/// [`fused_mean_bwd`] with logits and `dx` of any float dtype `elem` (`ce4_bwd_*_{f32,f16,bf16}`:
/// computed in f32, `dx` rounded once; `stats` and `g` f32). `Ok(false)`, launching nothing, for
/// rows longer than [`super::softmax::SOFTMAX3_MAX_COLS`] (f32 kernels only).
#[allow(clippy::too_many_arguments)]
pub fn fused_mean_bwd_typed(
    dev: &CudaDevice,
    ptrs: [DevPtr; 5],
    rows: usize,
    cols: usize,
    err: DevPtr,
    elem: Elem,
) -> Result<bool> {
    if !fits_registers(elem, cols) {
        return Ok(false);
    }
    if rows == 0 || cols == 0 {
        return Ok(true);
    }
    ce_bwd_launch(dev, 4, ptrs, rows, cols, err, elem)?;
    Ok(true)
}

/// Threads of the block per row of the long-row step-3 kernels (`cross_entropy3_*_long_f32`).
pub const CE3_LONG_THREADS: u32 = 512;

/// The grid of step 3 / step 4 for `[rows, cols]` and the kernel name for `prefix` (`ce3_fwd`,
/// `ce4_bwd`, ...) with softmax step 3's shape and `elem`'s suffix, or the long-row kernel's name (`long`, e.g.
/// `cross_entropy4_fwd_long_f32`) past [`super::softmax::SOFTMAX3_MAX_COLS`] columns.
/// `group_rows`: the kernel's groups take [`ce4_rows`] rows each (step 4's forward), so the grid
/// has that many times fewer blocks.
fn ce_launch(
    prefix: &str,
    long: &str,
    rows: usize,
    cols: usize,
    vec: bool,
    group_rows: bool,
    elem: Elem,
) -> Result<(KernelName, LaunchConfig)> {
    Ok(match super::softmax::softmax3_shape(cols, vec) {
        Some((g, vw, nv)) => {
            let sfx = elem.suffix();
            let name = KernelName::new(format_args!("{prefix}_g{g}_v{vw}_n{nv}_{sfx}"));
            let r = if group_rows { ce4_rows(g, vw, nv) } else { 1 };
            let cfg = super::softmax::softmax3_config(name.as_str(), rows.div_ceil(r), g)?;
            (name, cfg)
        }
        None => {
            let name = KernelName::new(format_args!("{long}"));
            let cfg = LaunchConfig::new(rows_grid(name.as_str(), rows)?, Dim3::x(CE3_LONG_THREADS));
            (name, cfg)
        }
    })
}

/// Rows a group of `g` threads takes in step 4's forward (`ce4_fwd_*`, shape `(g, vw, nv)`): 2
/// where a row is at most 16 floats a thread, else 1. The same rule as `ce4_rows` in
/// `kernels/loss/`, which the kernels are compiled with; this one sizes their grid.
pub fn ce4_rows(g: usize, vw: usize, nv: usize) -> usize {
    if g <= 32 && nv * vw <= 16 {
        2
    } else {
        1
    }
}

/// The backward of step 3 or 4 (`step`: the kernels `ce{step}_bwd_*` and
/// `cross_entropy{step}_bwd_long_f32`, which differ only in how they read `g`); `rows, cols ≥ 1`.
#[allow(clippy::too_many_arguments)]
fn ce_bwd_launch(
    dev: &CudaDevice,
    step: u32,
    [x, t, stats, g, dx]: [DevPtr; 5],
    rows: usize,
    cols: usize,
    err: DevPtr,
    elem: Elem,
) -> Result<()> {
    let vec = cols % 4 == 0 && super::rows::aligned(&[x, dx], 4 * elem.bytes());
    let short = KernelName::new(format_args!("ce{step}_bwd"));
    let long = KernelName::new(format_args!("cross_entropy{step}_bwd_long_f32"));
    let (name, cfg) = ce_launch(short.as_str(), long.as_str(), rows, cols, vec, false, elem)?;
    let module = if step == 4 { STEP4 } else { STEP3 };
    let (rows, cols) = (rows as i64, cols as i64);
    let same_alignment = i32::from(x.0 % 16 == dx.0 % 16);
    let args: [&dyn crate::KernelArg; 9] =
        [&x, &t, &stats, &g, &dx, &rows, &cols, &err, &same_alignment];
    // the long-row kernels take the trailing `int vec` (x and dx rows share their alignment, so
    // one prologue aligns both); the short-row kernels stop before it
    let args = if name.as_str() == long.as_str() {
        &args[..]
    } else {
        &args[..8]
    };
    // SAFETY: matches `ce{3,4}_bwd_*(const float*, const long long*, const float*, const float*,
    // float*, long long, long long, long long*)`, and `cross_entropy{3,4}_bwd_long_f32` with the
    // trailing `int`.
    unsafe { launch(dev, module, name.as_str(), cfg, args) }
}

// ------------------------------------------------------------------ mean squared error

/// PTX module of the mean squared error: `kernels/loss/mse.cu`.
const MSE: &str = "loss/mse";

/// Threads of a block of the MSE kernels.
const MSE_THREADS: u32 = 256;

/// The number of partial sums [`mse_partial`] writes for `n` elements: a block per 2048
/// elements (eight a thread) up to eight blocks a multiprocessor, at least one. Fixed for a
/// given `n` and GPU, so the sum's order repeats.
pub fn mse_blocks(dev: &CudaDevice, n: usize) -> usize {
    let sms = dev.limits().sm_count.max(1) as usize;
    n.div_ceil(8 * MSE_THREADS as usize).clamp(1, 8 * sms)
}

/// The kernel of `base` (`mse_partial`, `mse_bwd`) for `elem`: the `_vec` one (four elements a
/// load) where every pointer of `ptrs` is aligned to four elements.
fn mse_kernel(base: &str, ptrs: &[DevPtr], elem: Elem) -> Result<(KernelName, bool)> {
    let vec = super::rows::aligned(ptrs, 4 * elem.bytes());
    let v = if vec { "_vec" } else { "" };
    let name = KernelName::new(format_args!("{base}{v}_{}", elem.float_suffix("mse")?));
    Ok((name, vec))
}

/// `partial[b] = Σ (a − b)²` in f32 over the elements block `b` visits, for [`mse_blocks`]
/// blocks and `n` elements of `elem` at `a` and `b` (`mse_partial[_vec]_{f32,f16,bf16}`: each
/// element widens as it loads). The caller sums the partials.
pub fn mse_partial(
    dev: &CudaDevice,
    [a, b, partial]: [DevPtr; 3],
    n: usize,
    elem: Elem,
) -> Result<()> {
    let blocks = mse_blocks(dev, n) as u32;
    let (name, _) = mse_kernel("mse_partial", &[a, b], elem)?;
    let cfg = LaunchConfig::new(Dim3::x(blocks), Dim3::x(MSE_THREADS));
    let ni = n as i64;
    // SAFETY: matches `mse_partial[_vec]_{T}(const T*, const T*, float*, long long)`; the caller
    // passes n elements of `elem` at a and b and `mse_blocks(n)` floats at partial, and the
    // `_vec` kernel runs only on pointers aligned to four elements.
    unsafe { launch(dev, MSE, name.as_str(), cfg, &[&a, &b, &partial, &ni]) }
}

/// The MSE's gradients `da = scale · g · (a − b)` and `db = −da`, rounded once to `elem`, from
/// the one f32 upstream gradient at `g` (`mse_bwd[_vec]_{f32,f16,bf16}`). `da` or `db` may be
/// [`DevPtr::NULL`] to skip it.
pub fn mse_bwd(
    dev: &CudaDevice,
    [a, b, g, da, db]: [DevPtr; 5],
    n: usize,
    scale: f32,
    elem: Elem,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let (name, vec) = mse_kernel("mse_bwd", &[a, b, da, db], elem)?;
    let threads = if vec { n.div_ceil(4) } else { n };
    let ni = n as i64;
    // SAFETY: matches `mse_bwd[_vec]_{T}(const T*, const T*, const float*, T*, T*, long long,
    // float)`; n elements of `elem` at a, b and each non-null gradient, one float at g, and the
    // `_vec` kernel runs only on pointers aligned to four elements (null is aligned).
    unsafe {
        launch(
            dev,
            MSE,
            name.as_str(),
            crate::launch_1d(threads),
            &[&a, &b, &g, &da, &db, &ni, &scale],
        )
    }
}

// ------------------------------------------------------------------ the ladder's table

/// A per-row cross-entropy forward that saves each row's (max, Σ exp): `(dev, x, targets,
/// loss, stats, rows, cols, err)`; the fused mean's forward has the same form, `loss` one value.
pub type Forward =
    fn(&CudaDevice, DevPtr, DevPtr, DevPtr, DevPtr, usize, usize, DevPtr) -> Result<()>;
/// Its backward from the saved stats: `(dev, x, targets, stats, g, dx, rows, cols, err)`.
pub type Backward =
    fn(&CudaDevice, DevPtr, DevPtr, DevPtr, DevPtr, DevPtr, usize, usize, DevPtr) -> Result<()>;

/// The launchers of one step of the cross-entropy ladder.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// The step (described in [`super::ladder::Family::CrossEntropy`]'s table).
    pub step: super::rows::Step,
    /// Per-row forward and backward through saved stats; `None`: step 1's
    /// [`block_per_row`] and [`block_per_row_bwd`], which recompute them.
    pub per_row: Option<(Forward, Backward)>,
    /// The mean over rows fused in, one launch each way; `None`: the per-row kernels and a
    /// separate mean.
    pub mean: Option<(Forward, Backward)>,
}

/// The cross-entropy ladder: the one table the backend, the benchmarks and the tests run.
pub const STEPS: [Kernels; 4] = {
    use super::rows::Step;
    [
        Kernels {
            step: Step::One,
            per_row: None,
            mean: None,
        },
        Kernels {
            step: Step::Two,
            per_row: Some((saved_stats, saved_stats_bwd)),
            mean: None,
        },
        Kernels {
            step: Step::Three,
            per_row: Some((registers, registers_bwd)),
            mean: None,
        },
        Kernels {
            step: Step::Four,
            per_row: Some((registers, registers_bwd)),
            mean: Some((fused_mean, fused_mean_bwd)),
        },
    ]
};

/// The launchers of `step` (the highest step at or below it).
pub fn at(step: super::rows::Step) -> &'static Kernels {
    super::ladder::pick(&STEPS, step, |k| k.step)
}

#[cfg(test)]
mod tests {
    /// Every short-row shape step 3 can pick (softmax step 3's) is instantiated in
    /// `kernels/loss/`.
    #[test]
    fn ce3_shapes_are_instantiated() {
        let src = concat!(
            include_str!("../../../../kernels/loss/03_registers.cu"),
            include_str!("../../../../kernels/loss/04_fused_mean.cu"),
        );
        assert!(src.contains("\nCAMEL_ROW3_SHAPES(CE3)"));
        assert!(src.contains("\nCAMEL_ROW3_SHAPES(CE4)"));
        for cols in 1..=super::super::softmax::SOFTMAX3_MAX_COLS {
            for vec in [false, true] {
                if vec && cols % 4 != 0 {
                    continue;
                }
                let (g, vw, nv) = super::super::softmax::softmax3_shape(cols, vec).unwrap();
                assert!(
                    super::super::softmax::shape_listed(g, vw, nv),
                    "cols {cols} vec {vec}: ({g}, {vw}, {nv}) is not in CAMEL_ROW3_SHAPES"
                );
            }
        }
    }
}

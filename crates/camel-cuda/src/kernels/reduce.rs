//! Launchers for `kernels/reduce/` (one PTX module per ladder step).

use super::rows::{row_launch, variant_name, KernelName};
use super::shape::Elem;
use super::{launch, launch_rows};
use crate::{launch_1d, CudaDevice, DevPtr, Dim3, LaunchConfig, Result};

/// PTX module of step 1: `kernels/reduce/01_block_per_output.cu`.
const STEP1: &str = "reduce/01_block_per_output";
/// PTX module of step 2: `kernels/reduce/02_warp_shuffle.cu`.
const STEP2: &str = "reduce/02_warp_shuffle";
/// PTX module of step 3: `kernels/reduce/03_loads_in_flight.cu`.
const STEP3: &str = "reduce/03_loads_in_flight";
const THREADS: u32 = 256;

launchers! {
    // the reduction of each step (the Reduce type)
    (dev: &CudaDevice, x: DevPtr, y: DevPtr, outer: usize, dim: usize, inner: usize, op: i32);

    /// `y[o, i] = reduce_d x[o, d, i]` (op 0 = sum, 1 = max, 2 = min), one block per output element.
    pub fn block_per_output(..) {
        let outputs = outer * inner;
        if outputs == 0 {
            return Ok(());
        }
        let (o, d, i) = (outer as i64, dim as i64, inner as i64);
        // SAFETY: matches `reduce_f32(const float*, float*, long long, long long, long long, int)`.
        unsafe {
            launch_rows(
                dev,
                STEP1,
                "reduce_f32",
                outputs,
                THREADS,
                &[&x, &y, &o, &d, &i, &op],
            )
        }
    }

    /// Step 2 of `block_per_output`: `y[o, i] = reduce_d x[o, d, i]` (op 0 = sum, 1 = max). A reduced
    /// last dim goes to [`reduce_rows2_f32`]; a middle one to a coalesced thread-per-output kernel.
    pub fn warp_shuffle(..) {
        if outer * inner == 0 {
            return Ok(());
        }
        if inner == 1 {
            return reduce_rows2_f32(dev, x, y, outer, dim, op);
        }
        let (cfg, o, d, i) = (
            launch_1d(outer * inner),
            outer as i64,
            dim as i64,
            inner as i64,
        );
        // SAFETY: matches `reduce_cols_f32(const float*, float*, long long ×3, int)`.
        unsafe {
            launch(
                dev,
                STEP2,
                "reduce_cols_f32",
                cfg,
                &[&x, &y, &o, &d, &i, &op],
            )
        }
    }

    /// Step 3 of `block_per_output`: as [`warp_shuffle`], but many rows reduced along the last dim run
    /// `reduce3_rows_*` (4 independent loads in flight per thread), and a long middle dim with
    /// too few outputs to fill the GPU is split into chunks ([`reduce_cols_split_f32`]). Few long
    /// rows (the two-pass split) and other middle-dim reductions stay on step 2's kernels.
    pub fn loads_in_flight(..) {
        if loads_in_flight_typed(dev, x, y, outer, dim, inner, op, Elem::F32)? {
            return Ok(());
        }
        warp_shuffle(dev, x, y, outer, dim, inner, op)
    }
}

/// Where step 3 sends a reduction of `[outer, dim, inner]` on a GPU of `sms` multiprocessors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step3Path {
    /// Many rows along the last dim: `reduce3_rows_*`.
    Rows,
    /// A long middle dim with few outputs: split into chunks (`reduce3_cols_partial_*`).
    ColsSplit,
    /// Step 2's kernels: other middle dims, a few long rows (the two-pass split), no rows.
    Step2,
}

fn step3_path(sms: usize, outer: usize, dim: usize, inner: usize) -> Step3Path {
    if inner != 1 && outer * inner != 0 && cols_split_suits(sms, outer, dim, inner) {
        return Step3Path::ColsSplit;
    }
    let long_and_few = dim > super::rows::WARP_ROW_MAX && outer < 4 * sms;
    if inner != 1 || outer == 0 || long_and_few {
        return Step3Path::Step2;
    }
    Step3Path::Rows
}

/// [`loads_in_flight`] of input elements of any float dtype `elem` (the output `y` is f32 whatever
/// `elem`): the row kernels and the chunked middle-dim pass read f32, f16 and bf16
/// (`reduce3_rows_*_{f32,f16,bf16}`, `reduce3_cols_partial_…`), widening each element as they
/// load it. `Ok(false)`, launching nothing, where step 3 hands the reduction to step 2's kernels
/// (a middle dim with outputs enough to fill the GPU, a few long rows, no rows), which read f32
/// only.
#[allow(clippy::too_many_arguments)]
pub fn loads_in_flight_typed(
    dev: &CudaDevice,
    x: DevPtr,
    y: DevPtr,
    outer: usize,
    dim: usize,
    inner: usize,
    op: i32,
    elem: Elem,
) -> Result<bool> {
    let sms = dev.limits().sm_count.max(1) as usize;
    match step3_path(sms, outer, dim, inner) {
        Step3Path::Step2 => return Ok(false),
        Step3Path::ColsSplit => {
            reduce_cols_split(dev, x, y, outer, dim, inner, op, elem)?;
            return Ok(true);
        }
        Step3Path::Rows => {}
    }
    let (warp, _, cfg) = row_launch("reduce3_rows", outer, dim, &[x])?;
    let vec = dim % 4 == 0 && super::rows::aligned(&[x], 4 * elem.bytes());
    let name = KernelName::new(format_args!(
        "reduce3_rows_{}{}_{}",
        if warp { "warp" } else { "block" },
        if vec { "_vec" } else { "" },
        elem.suffix()
    ));
    let (r, c) = (outer as i64, dim as i64);
    // SAFETY: matches `reduce3_rows_*_{dtype}(const T*, float*, long long, long long, int)`, T
    // `elem`'s type; the callers pass `[outer, dim]` elements at `x` and `outer` floats at `y`.
    unsafe { launch(dev, STEP3, name.as_str(), cfg, &[&x, &y, &r, &c, &op]) }?;
    Ok(true)
}

/// Whether a middle-dim reduction of `[outer, dim, inner]` runs split into chunks: step 2's
/// kernel gives each output one thread that walks all of `dim`, which leaves most SMs idle when
/// the outputs number fewer than a few hundred per SM and `dim` is long.
pub fn cols_split_suits(sms: usize, outer: usize, dim: usize, inner: usize) -> bool {
    dim >= 64 && outer * inner < 512 * sms && outer <= 65_535
}

/// `y[o, i] = reduce_d x[o, d, i]` in two passes: `reduce3_cols_partial_f32` reduces chunks of
/// `d` in parallel (about 8 blocks per SM in all) into `[outer, chunks, inner]` partials, then
/// step 2's thread-per-output kernel reduces the partials along the chunks. `dim ≥ 1`.
#[allow(clippy::too_many_arguments)]
pub fn reduce_cols_split_f32(
    dev: &CudaDevice,
    x: DevPtr,
    y: DevPtr,
    outer: usize,
    dim: usize,
    inner: usize,
    op: i32,
) -> Result<()> {
    reduce_cols_split(dev, x, y, outer, dim, inner, op, Elem::F32)
}

/// [`reduce_cols_split_f32`] with `x` of `elem` (`reduce3_cols_partial_{dtype}`); the partials
/// and `y` are f32.
#[allow(clippy::too_many_arguments)]
fn reduce_cols_split(
    dev: &CudaDevice,
    x: DevPtr,
    y: DevPtr,
    outer: usize,
    dim: usize,
    inner: usize,
    op: i32,
    elem: Elem,
) -> Result<()> {
    if outer * inner == 0 {
        return Ok(());
    }
    if outer > 65_535 || dim == 0 {
        return Err(crate::Error::LaunchConfig {
            kernel: "reduce3_cols_partial_f32".into(),
            msg: format!(
                "[{outer}, {dim}, {inner}]: the split needs 1 ≤ outer ≤ 65535 and dim ≥ 1"
            ),
        });
    }
    let sms = dev.limits().sm_count.max(1) as usize;
    let col_blocks = inner.div_ceil(32);
    let chunks = (8 * sms)
        .div_ceil(col_blocks * outer)
        .clamp(1, dim.div_ceil(32))
        .min(65_535);
    let chunk_len = dim.div_ceil(chunks);
    let chunks = dim.div_ceil(chunk_len);
    if col_blocks > i32::MAX as usize {
        return Err(crate::Error::LaunchConfig {
            kernel: "reduce3_cols_partial_f32".into(),
            msg: format!("{inner} columns exceed the grid"),
        });
    }
    let partial = dev.alloc(outer * chunks * inner * 4)?;
    let cfg = LaunchConfig::new(
        Dim3::xyz(col_blocks as u32, chunks as u32, outer as u32),
        Dim3::xyz(32, 8, 1),
    );
    let (part, d, i, len) = (partial.ptr(), dim as i64, inner as i64, chunk_len as i64);
    let name = KernelName::new(format_args!("reduce3_cols_partial_{}", elem.suffix()));
    // SAFETY: matches `reduce3_cols_partial_{dtype}(const T*, float*, long long ×3, int)`, T
    // `elem`'s type; x holds outer × dim × inner elements and `partial` outer × chunks × inner
    // floats.
    unsafe {
        launch(
            dev,
            STEP3,
            name.as_str(),
            cfg,
            &[&x, &part, &d, &i, &len, &op],
        )?
    };
    // Pass 2 over `chunks` partials per output. `partial` may be dropped after the launch: its
    // block is reused only by later work on the stream.
    warp_shuffle(dev, partial.ptr(), y, outer, chunks, inner, op)
}

/// `out[r] = argmax_c x[r, c]` (`min`: argmin) of `[rows, cols]` elements of `elem`, as i64,
/// one block per row (`arg{max,min}_last_{elem}`).
pub fn arg_extreme_last(
    dev: &CudaDevice,
    x: DevPtr,
    out: DevPtr,
    rows: usize,
    cols: usize,
    min: bool,
    elem: Elem,
) -> Result<()> {
    if rows == 0 {
        return Ok(());
    }
    let which = if min { "argmin" } else { "argmax" };
    let name = KernelName::new(format_args!("{which}_last_{}", elem.suffix()));
    let (r, c) = (rows as i64, cols as i64);
    // SAFETY: matches `arg{max,min}_last_{T}(const T*, long long*, long long, long long)`; the
    // caller passes `[rows, cols]` elements of `elem` at x and rows i64 at out.
    unsafe {
        let args: [&dyn crate::KernelArg; 4] = [&x, &out, &r, &c];
        launch_rows(dev, STEP1, name.as_str(), rows, THREADS, &args)
    }
}

/// `y[r] = Σ_c (x[r, c] − mean_r)² / (cols − correction)` over `[rows, cols]` elements of
/// `elem`, f32 output, one block per row, two passes over the row in f32 (`var_rows_{elem}`).
pub fn var_rows(
    dev: &CudaDevice,
    x: DevPtr,
    y: DevPtr,
    rows: usize,
    cols: usize,
    correction: usize,
    elem: Elem,
) -> Result<()> {
    if rows == 0 {
        return Ok(());
    }
    let name = KernelName::new(format_args!("var_rows_{}", elem.suffix()));
    let (r, c, k) = (
        rows as i64,
        cols as i64,
        correction.min(i64::MAX as usize) as i64,
    );
    // SAFETY: matches `var_rows_{T}(const T*, float*, long long, long long, long long)`;
    // rows × cols elements of `elem` at x, rows floats at y.
    unsafe {
        let args: [&dyn crate::KernelArg; 5] = [&x, &y, &r, &c, &k];
        launch_rows(dev, STEP1, name.as_str(), rows, THREADS, &args)
    }
}

/// Step 2 along the last dim of `[rows, cols]`: a warp per short row, a block per long row
/// when there are many rows, else two passes (chunks of each row in parallel, then the
/// partials). `cols == 0` gives the op's identity.
pub fn reduce_rows2_f32(
    dev: &CudaDevice,
    x: DevPtr,
    y: DevPtr,
    rows: usize,
    cols: usize,
    op: i32,
) -> Result<()> {
    if rows == 0 {
        return Ok(());
    }
    let sms = dev.limits().sm_count.max(1) as usize;
    let long_and_few = cols > super::rows::WARP_ROW_MAX && rows < 4 * sms;
    if !long_and_few {
        return row_variant(dev, STEP2, "reduce_rows", x, y, rows, cols, op);
    }
    // Pass 1: about 8 blocks per SM in all, each reducing one chunk of one row.
    let vec = cols % 4 == 0 && super::rows::aligned16(&[x]);
    let target = 8 * sms;
    let chunks = target
        .div_ceil(rows)
        .clamp(1, cols.div_ceil(1024))
        .min(1024);
    let mut chunk_len = cols.div_ceil(chunks);
    if vec {
        chunk_len = chunk_len.next_multiple_of(4);
    }
    let chunks = cols.div_ceil(chunk_len);
    let partial = dev.alloc(rows * chunks * 4)?;
    let name = if vec {
        "reduce_partial_vec_f32"
    } else {
        "reduce_partial_f32"
    };
    let cfg = LaunchConfig::new(Dim3::xyz(chunks as u32, rows as u32, 1), Dim3::x(THREADS));
    let (part, c, len) = (partial.ptr(), cols as i64, chunk_len as i64);
    // SAFETY: matches `reduce_partial_*(const float*, float*, long long, long long, int)`;
    // `partial` holds rows × chunks floats.
    unsafe { launch(dev, STEP2, name, cfg, &[&x, &part, &c, &len, &op])? };
    // Pass 2: the partials are rows of `chunks` (≤ 8·SMs) values. `partial` may be dropped
    // after the launch: its block is reused only by later work on the stream.
    reduce_rows2_f32(dev, partial.ptr(), y, rows, chunks, op)
}

/// Launches the row kernel `{base}_{warp|block}{_vec}_f32` of `module` (`reduce_rows` of step
/// 2, `reduce3_rows` of step 3) over the last dim of `[rows, cols]`.
#[allow(clippy::too_many_arguments)]
fn row_variant(
    dev: &CudaDevice,
    module: &str,
    base: &str,
    x: DevPtr,
    y: DevPtr,
    rows: usize,
    cols: usize,
    op: i32,
) -> Result<()> {
    let (warp, vec, cfg) = row_launch(base, rows, cols, &[x])?;
    let name = variant_name(base, warp, vec);
    let (r, c) = (rows as i64, cols as i64);
    // SAFETY: matches `reduce_rows_*` / `reduce3_rows_*(const float*, float*, long long, long
    // long, int)`; the callers pass `[rows, cols]` floats at `x` and `rows` at `y`.
    unsafe { launch(dev, module, &name, cfg, &[&x, &y, &r, &c, &op]) }
}

// ------------------------------------------------------------------ the ladder's table

/// A reduction launcher over `[outer, dim, inner]` along `dim`: `(dev, x, y, outer, dim, inner,
/// op)`.
pub type Reduce = fn(&CudaDevice, DevPtr, DevPtr, usize, usize, usize, i32) -> Result<()>;

/// The launcher of one step of the reduction ladder.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// The step (described in [`super::ladder::Family::Reduce`]'s table).
    pub step: super::rows::Step,
    /// Its launcher.
    pub reduce: Reduce,
}

/// The reduction ladder: the one table the backend, the benchmarks and the tests run.
pub const STEPS: [Kernels; 3] = {
    use super::rows::Step;
    [
        Kernels {
            step: Step::One,
            reduce: block_per_output,
        },
        Kernels {
            step: Step::Two,
            reduce: warp_shuffle,
        },
        Kernels {
            step: Step::Three,
            reduce: loads_in_flight,
        },
    ]
};

/// The launcher of `step` (the highest step at or below it).
pub fn at(step: super::rows::Step) -> &'static Kernels {
    super::ladder::pick(&STEPS, step, |k| k.step)
}

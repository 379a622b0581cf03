//! Launchers for `kernels/filter/`: the image-filter ladder, one PTX module per step. Every
//! launcher filters a row-major `[h, w]` f32 image with a `(2r+1)²` filter (or its row and
//! column vectors), zero padding, into an output of the same size (`kernels/filter/filter.cuh`
//! has the formula).

use super::launch;
use super::rows::Step;
use crate::{CudaDevice, DevPtr, Dim3, Error, LaunchConfig, Result};

/// The largest filter radius the kernels take (a 17 × 17 filter; `FILTER_MAX_RADIUS`).
pub const MAX_RADIUS: usize = 8;

/// PTX module of step 1: `kernels/filter/01_naive.cu`.
const STEP1: &str = "filter/01_naive";
/// PTX module of step 2: `kernels/filter/02_smem_tiles.cu`.
const STEP2: &str = "filter/02_smem_tiles";
/// PTX module of step 3: `kernels/filter/03_separable.cu`.
const STEP3: &str = "filter/03_separable";
/// PTX module of step 4: `kernels/filter/04_coalesced.cu`.
const STEP4: &str = "filter/04_coalesced";
/// PTX module of step 5: `kernels/filter/05_tuned.cu`.
const STEP5: &str = "filter/05_tuned";
/// PTX module of step 6: `kernels/filter/06_fused.cu`.
const STEP6: &str = "filter/06_fused";

/// Checks the image and radius a kernel is given: `h`, `w` ≥ 1 and below 2³¹, `r ≤ MAX_RADIUS`.
fn check(kernel: &str, h: usize, w: usize, r: usize) -> Result<(i32, i32, i32)> {
    if r > MAX_RADIUS {
        return Err(Error::launch(
            kernel,
            format!(
                "radius {r} (a {k} × {k} filter) exceeds the maximum {MAX_RADIUS}",
                k = 2 * r + 1
            ),
        ));
    }
    match (i32::try_from(h), i32::try_from(w)) {
        (Ok(hi), Ok(wi)) => Ok((hi, wi, r as i32)),
        _ => Err(Error::launch(
            kernel,
            format!("image [{h}, {w}] exceeds 2^31 - 1 rows or columns"),
        )),
    }
}

/// A grid of blocks covering `w` columns and `h` rows in tiles of `tx × ty` outputs.
fn grid(kernel: &str, h: usize, w: usize, tx: usize, ty: usize) -> Result<Dim3> {
    let (gx, gy) = (w.div_ceil(tx), h.div_ceil(ty));
    match (u32::try_from(gx), u32::try_from(gy)) {
        (Ok(x), Ok(y)) => Ok(Dim3::xyz(x, y, 1)),
        _ => Err(Error::launch(
            kernel,
            format!("image [{h}, {w}] needs a grid of {gx} × {gy} blocks"),
        )),
    }
}

/// Launches a kernel `(const float* x, const float* taps, float* y, int h, int w, int r)` on
/// blocks of `block` threads, each covering `tile` = (columns, rows) outputs.
#[allow(clippy::too_many_arguments)]
fn launch_r(
    dev: &CudaDevice,
    module: &str,
    name: &str,
    block: (u32, u32),
    tile: (usize, usize),
    [x, taps, y]: [DevPtr; 3],
    h: usize,
    w: usize,
    r: usize,
) -> Result<()> {
    let (hi, wi, ri) = check(name, h, w, r)?;
    if h == 0 || w == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::new(
        grid(name, h, w, tile.0, tile.1)?,
        Dim3::xyz(block.0, block.1, 1),
    );
    // SAFETY: matches `(const float*, const float*, float*, int, int, int)` of the filter
    // kernels; the callers pass `[h, w]` floats at `x` and `y` and `(2r+1)²` (2-D) or `2r+1`
    // (one pass) floats at `taps`, which the kernels read no further than.
    unsafe { launch(dev, module, name, cfg, &[&x, &taps, &y, &hi, &wi, &ri]) }
}

/// Launches a step-5 kernel `(const float* x, const float* taps, float* y, int h, int w)`,
/// `{base}_r{r}`, as [`launch_r`] does.
#[allow(clippy::too_many_arguments)]
fn launch_tuned(
    dev: &CudaDevice,
    base: &str,
    tile: (usize, usize),
    [x, taps, y]: [DevPtr; 3],
    h: usize,
    w: usize,
    r: usize,
) -> Result<()> {
    let (hi, wi, _) = check(base, h, w, r)?;
    if h == 0 || w == 0 {
        return Ok(());
    }
    let name = super::rows::KernelName::new(format_args!("{base}_r{r}"));
    let name = name.as_str();
    let cfg = LaunchConfig::new(grid(name, h, w, tile.0, tile.1)?, Dim3::xyz(32, 8, 1));
    // SAFETY: matches `{base}_r{R}(const float*, const float*, float*, int, int)` of
    // `kernels/filter/05_tuned.cu` (R = r, instantiated for 0 … MAX_RADIUS, checked above); the
    // callers pass `[h, w]` floats at `x` and `y` and the taps as for `launch_r`.
    unsafe { launch(dev, STEP5, name, cfg, &[&x, &taps, &y, &hi, &wi]) }
}

/// Output columns and rows a block of step 6's fused kernel covers (`FUSED_TW`, `FUSED_TH` of
/// `kernels/filter/06_fused.cu`).
const FUSED_TILE: (usize, usize) = (128, 64);

/// Launches step 6's `filter_fused_r{r}(const float* x, const float* row, const float* col,
/// float* y, int h, int w)` on 32 × 8 blocks of [`FUSED_TILE`] outputs.
fn launch_fused(
    dev: &CudaDevice,
    [x, row, col, y]: [DevPtr; 4],
    h: usize,
    w: usize,
    r: usize,
) -> Result<()> {
    let base = "filter_fused";
    let (hi, wi, _) = check(base, h, w, r)?;
    if h == 0 || w == 0 {
        return Ok(());
    }
    let name = super::rows::KernelName::new(format_args!("{base}_r{r}"));
    let name = name.as_str();
    let cfg = LaunchConfig::new(
        grid(name, h, w, FUSED_TILE.0, FUSED_TILE.1)?,
        Dim3::xyz(32, 8, 1),
    );
    // SAFETY: matches `filter_fused_r{R}(const float*, const float*, const float*, float*, int,
    // int)` of `kernels/filter/06_fused.cu` (R = r, instantiated for 0 … MAX_RADIUS, checked
    // above); the callers pass `[h, w]` floats at `x` and `y` and `2r+1` at `row` and `col`,
    // which the kernel reads no further than.
    unsafe { launch(dev, STEP6, name, cfg, &[&x, &row, &col, &y, &hi, &wi]) }
}

launchers! {
    // the 2-D launchers: (dev, x, filter, y, h, w, r), `filter` row-major [2r+1, 2r+1]
    (dev: &CudaDevice, x: DevPtr, filter: DevPtr, y: DevPtr, h: usize, w: usize, r: usize);

    /// Step 1: a thread per output pixel, every tap and pixel read from global memory.
    pub fn naive(..) {
        let name = "filter2d_naive";
        launch_r(dev, STEP1, name, (16, 16), (16, 16), [x, filter, y], h, w, r)
    }

    /// Step 2: a 16 × 16 output tile per block, its input tile and apron and the filter
    /// loaded into shared memory first.
    pub fn smem_tiles(..) {
        let name = "filter2d_smem_tiles";
        launch_r(dev, STEP2, name, (16, 16), (16, 16), [x, filter, y], h, w, r)
    }

    /// Step 5's 2-D kernel: radius as a template parameter, 32 × 32 outputs a block, four
    /// rows a thread (register blocking), the taps broadcast from shared memory.
    pub fn tuned(..) {
        launch_tuned(dev, "filter2d_tuned", (32, 32), [x, filter, y], h, w, r)
    }
}

launchers! {
    // the separable launchers: (dev, x, row, col, tmp, y, h, w, r); `row` and `col` hold 2r+1
    // taps, `tmp` is the [h, w] intermediate image the row pass writes and the column pass reads
    // (a launcher whose `Kernels::separable_tmp` is false ignores it)
    (
        dev: &CudaDevice,
        x: DevPtr,
        row: DevPtr,
        col: DevPtr,
        tmp: DevPtr,
        y: DevPtr,
        h: usize,
        w: usize,
        r: usize,
    );

    /// Step 3: a row pass then a column pass, each on 16 × 16 tiles with a one-axis apron.
    pub fn separable(..) {
        let rows = "filter_rows_separable";
        launch_r(dev, STEP3, rows, (16, 16), (16, 16), [x, row, tmp], h, w, r)?;
        let cols = "filter_cols_separable";
        launch_r(dev, STEP3, cols, (16, 16), (16, 16), [tmp, col, y], h, w, r)
    }

    /// Step 4: step 3's passes on 32 × 8 blocks (a warp per tile row: coalesced, no bank
    /// conflicts), four outputs a thread.
    pub fn coalesced(..) {
        let rows = "filter_rows_coalesced";
        launch_r(dev, STEP4, rows, (32, 8), (128, 8), [x, row, tmp], h, w, r)?;
        let cols = "filter_cols_coalesced";
        launch_r(dev, STEP4, cols, (32, 8), (32, 32), [tmp, col, y], h, w, r)
    }

    /// Step 5's passes: radius as a template parameter, taps in registers; the row pass as
    /// step 4's, the column pass eight rows a thread through registers.
    pub fn tuned_separable(..) {
        launch_tuned(dev, "filter_rows_tuned", (128, 8), [x, row, tmp], h, w, r)?;
        launch_tuned(dev, "filter_cols_tuned", (32, 64), [tmp, col, y], h, w, r)
    }

    /// Step 6: both passes in one kernel, the intermediate of a 128 × 64 output tile (and its
    /// apron rows) kept in shared memory; the image is read once and the output written once.
    /// `tmp` is not used.
    pub fn fused_separable(..) {
        let _ = tmp;
        launch_fused(dev, [x, row, col, y], h, w, r)
    }
}

// ------------------------------------------------------------------ the ladder's table

/// A 2-D filter launcher: `(dev, x, filter, y, h, w, r)`.
pub type Filter2d = fn(&CudaDevice, DevPtr, DevPtr, DevPtr, usize, usize, usize) -> Result<()>;
/// A separable filter launcher: `(dev, x, row, col, tmp, y, h, w, r)`.
pub type Separable =
    fn(&CudaDevice, DevPtr, DevPtr, DevPtr, DevPtr, DevPtr, usize, usize, usize) -> Result<()>;

/// The launchers of one step of the image-filter ladder.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// The step (described in [`super::ladder::Family::Filter`]'s table).
    pub step: Step,
    /// Its 2-D kernel (steps 1, 2, 5 and 6).
    pub filter2d: Option<Filter2d>,
    /// Its row and column passes (steps 3 … 6).
    pub separable: Option<Separable>,
    /// Whether `separable` writes and reads the `tmp` intermediate image it is given (steps 3,
    /// 4 and 5). Where false (step 6, which keeps the intermediate in shared memory) `tmp` is
    /// ignored: a caller need not allocate it and may pass any pointer, e.g. the output's.
    pub separable_tmp: bool,
}

/// The image-filter ladder: the one table the backend, the benchmark and the tests run.
pub const STEPS: [Kernels; 6] = [
    Kernels {
        step: Step::One,
        filter2d: Some(naive),
        separable: None,
        separable_tmp: false,
    },
    Kernels {
        step: Step::Two,
        filter2d: Some(smem_tiles),
        separable: None,
        separable_tmp: false,
    },
    Kernels {
        step: Step::Three,
        filter2d: None,
        separable: Some(separable),
        separable_tmp: true,
    },
    Kernels {
        step: Step::Four,
        filter2d: None,
        separable: Some(coalesced),
        separable_tmp: true,
    },
    Kernels {
        step: Step::Five,
        filter2d: Some(tuned),
        separable: Some(tuned_separable),
        separable_tmp: true,
    },
    Kernels {
        step: Step::Six,
        filter2d: Some(tuned),
        separable: Some(fused_separable),
        separable_tmp: false,
    },
];

/// The launchers of `step` (the highest step at or below it).
pub fn at(step: Step) -> &'static Kernels {
    super::ladder::pick(&STEPS, step, |k| k.step)
}

#[cfg(test)]
mod tests {
    /// Every radius a step-5 or step-6 launcher can ask for is instantiated in `05_tuned.cu`
    /// and `06_fused.cu`, and step 6's tile is the launcher's.
    #[test]
    fn tuned_radii_are_instantiated() {
        let src = include_str!("../../../../kernels/filter/05_tuned.cu");
        let fused = include_str!("../../../../kernels/filter/06_fused.cu");
        let hdr = include_str!("../../../../kernels/filter/filter.cuh");
        assert!(hdr.contains(&format!("#define FILTER_MAX_RADIUS {}", super::MAX_RADIUS)));
        let list: String = (0..=super::MAX_RADIUS)
            .map(|r| format!("X({r}) "))
            .collect();
        assert!(hdr.contains(&format!("FILTER_RADII(X) {}", list.trim_end())));
        assert!(src.contains("\nFILTER_RADII(FILTER_TUNED)"));
        for k in [
            "filter2d_tuned_r##R(",
            "filter_rows_tuned_r##R(",
            "filter_cols_tuned_r##R(",
        ] {
            assert!(src.contains(k), "{k}");
        }
        assert!(fused.contains("\nFILTER_RADII(FILTER_FUSED)"));
        assert!(fused.contains("filter_fused_r##R("));
        let (tw, th) = super::FUSED_TILE;
        assert_eq!(tw, 4 * 32, "FUSED_TW is (4 * BX)");
        assert!(fused.contains("#define FUSED_TW (4 * BX)"));
        assert!(fused.contains(&format!("#define FUSED_TH {th} ")));
    }

    /// The two-pass steps (3, 4, 5) are the ones marked as using the intermediate image.
    #[test]
    fn only_the_two_pass_steps_need_the_intermediate() {
        for k in super::STEPS {
            assert_eq!(
                k.separable_tmp,
                matches!(k.step.number(), 3..=5),
                "step {}",
                k.step.number()
            );
            assert!(!k.separable_tmp || k.separable.is_some());
        }
    }
}

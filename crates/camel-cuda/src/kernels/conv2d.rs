//! Launchers for `kernels/conv2d/`: the conv2d ladder of NCHW convolutions for networks.
//!
//! - Step 1 (`im2col_gemm`, `kernels/conv2d/01_im2col.cu`): the input's patches are written to
//!   a column matrix (im2col), multiplied by the weight with camel's SGEMM ladder (one batched
//!   GEMM over the groups), and a last pass adds the bias, applies the activation and moves the
//!   result to NCHW. The backward multiplies by the same column matrix (weight gradient) and
//!   folds the product `Wᵀ · dy` back onto the input (col2im, a gather: no atomics).
//! - Step 2 (`implicit_gemm`, `kernels/conv2d/02_implicit_gemm.cu`): the forward is one tiled
//!   GEMM kernel that reads the patches straight from the input into shared memory (the column
//!   matrix is never written) and adds the bias and the activation in its epilogue; the input
//!   gradient is the same kind of kernel over the transposed convolution. The weight gradient
//!   is step 1's.
//! - Step 3 (`backward_splitk`, `kernels/conv2d/03_backward_splitk.cu`): step 2's forward and a
//!   backward for small channel counts that stages each image's planes in shared memory: the
//!   weight gradient split over the images (split-K) into per-block partials that a second
//!   kernel adds in a fixed order, and the input gradient as a direct transposed convolution, a
//!   thread per input pixel. Geometries whose planes exceed [`SMEM_FLOATS`] run step 2's input
//!   gradient and step 1's weight gradient.
//! - Step 4 (`pipelined`, `kernels/conv2d/04_pipelined.cu`): the implicit GEMM on SGEMM step
//!   13's machinery (cp.async stages, 64 × 256 tiles, float4 fragments) for the forward, the
//!   input gradient at stride 1 and the weight gradient (split into equal ranges of pixel tiles,
//!   partials summed in order); 16-row tiles for groups of at most 16 output channels. Step 3's
//!   launchers run the input gradient at strides above 1 or for at most 16 input channels, the
//!   weight gradient for at most 16 output channels with fewer than 128 taps, and geometries
//!   beyond [`pipelined_fits`].
//!
//! Columns are laid out `[groups][C/g·kH·kW][images·OH·OW]`, so one GEMM batched over the
//! groups covers a chunk of images; chunks bound the column matrix to [`WORKSPACE_BYTES`].
//!
//! f16 and bf16 convolutions are not a step: [`unfold_rows`] writes the patches of the whole
//! batch as rows (`kernels/conv2d/half_rows.cu`), camel-core multiplies them with the weight on
//! the tensor-core GEMM ladder, and [`fold_rows`] gathers the rows' gradient back onto the input.

use super::matmul::{sgemm, Gemm};
use super::shape::Elem;
use super::{launch, launch_elems, rows::Step};
use crate::{Buffer, CudaDevice, DevPtr, Dim3, Error, LaunchConfig, Result};

/// PTX module of step 1: `kernels/conv2d/01_im2col.cu`.
const STEP1: &str = "conv2d/01_im2col";
/// PTX module of step 2: `kernels/conv2d/02_implicit_gemm.cu`.
const STEP2: &str = "conv2d/02_implicit_gemm";
/// PTX module of step 3: `kernels/conv2d/03_backward_splitk.cu`.
const STEP3: &str = "conv2d/03_backward_splitk";
/// PTX module of step 4: `kernels/conv2d/04_pipelined.cu`.
const STEP4: &str = "conv2d/04_pipelined";
/// PTX module of the 16-bit convolution's rows: `kernels/conv2d/half_rows.cu`.
const HALF_ROWS: &str = "conv2d/half_rows";

/// The most bytes of column matrix (and GEMM output) step 1 holds at once; larger batches run
/// in chunks of images.
pub const WORKSPACE_BYTES: usize = 256 << 20;

thread_local! {
    static WORKSPACE_OVERRIDE: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Runs `body` with step 1's workspace bound at `bytes` on the calling thread instead of
/// [`WORKSPACE_BYTES`] (tests use it to run the chunked path at small sizes).
pub fn with_workspace_bytes<R>(bytes: usize, body: impl FnOnce() -> R) -> R {
    crate::config::with_override(&WORKSPACE_OVERRIDE, bytes, body)
}

fn workspace_bytes() -> usize {
    WORKSPACE_OVERRIDE
        .with(|o| o.get())
        .unwrap_or(WORKSPACE_BYTES)
}

/// The geometry of a 2-D convolution: input `[n, c, h, w]`, weight `[o, c/groups, kh, kw]`,
/// output `[n, o, oh, ow]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Conv2dGeom {
    /// Images.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub o: usize,
    /// Kernel height.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Vertical stride.
    pub sh: usize,
    /// Horizontal stride.
    pub sw: usize,
    /// Zero padding above and below.
    pub ph: usize,
    /// Zero padding left and right.
    pub pw: usize,
    /// Vertical dilation.
    pub dh: usize,
    /// Horizontal dilation.
    pub dw: usize,
    /// Groups: input and output channels split into this many independent convolutions.
    pub groups: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
}

impl Conv2dGeom {
    /// Output length along one axis: `⌊(in + 2·pad − dil·(k − 1) − 1) / stride⌋ + 1`, or `None`
    /// when the dilated kernel does not fit the padded input (or a parameter is 0).
    pub fn out_len(input: usize, k: usize, stride: usize, pad: usize, dil: usize) -> Option<usize> {
        if k == 0 || stride == 0 || dil == 0 {
            return None;
        }
        let span = dil.checked_mul(k - 1)?.checked_add(1)?;
        let padded = input.checked_add(pad.checked_mul(2)?)?;
        padded.checked_sub(span).map(|r| r / stride + 1)
    }

    /// Input channels per group.
    pub fn cg(&self) -> usize {
        self.c / self.groups.max(1)
    }

    /// Output channels per group.
    pub fn og(&self) -> usize {
        self.o / self.groups.max(1)
    }

    /// The GEMM's inner dimension: `c/groups · kh · kw`.
    pub fn kg(&self) -> usize {
        self.cg() * self.kh * self.kw
    }

    /// Output pixels per image and channel: `oh · ow`.
    pub fn pixels(&self) -> usize {
        self.oh * self.ow
    }

    fn args(&self) -> ConvArgs {
        let i = |v: usize| v as i64;
        ConvArgs {
            n: i(self.n),
            c: i(self.c),
            h: i(self.h),
            w: i(self.w),
            o: i(self.o),
            kh: i(self.kh),
            kw: i(self.kw),
            sh: i(self.sh),
            sw: i(self.sw),
            ph: i(self.ph),
            pw: i(self.pw),
            dh: i(self.dh),
            dw: i(self.dw),
            groups: i(self.groups),
            oh: i(self.oh),
            ow: i(self.ow),
        }
    }

    /// Images per chunk of step 1, so that a chunk's column matrix (and the GEMM output beside
    /// it) stays within [`WORKSPACE_BYTES`] (or [`with_workspace_bytes`]'s bound); at least 1.
    pub fn chunk(&self) -> usize {
        let per_image = 4 * self.pixels() * (self.groups * self.kg()).max(self.o);
        (workspace_bytes() / per_image.max(1)).clamp(1, self.n.max(1))
    }
}

/// `ConvArgs` of `kernels/conv2d/conv2d.cuh`, passed by value.
#[repr(C)]
#[derive(Clone, Copy, cust_core::DeviceCopy)]
struct ConvArgs {
    n: i64,
    c: i64,
    h: i64,
    w: i64,
    o: i64,
    kh: i64,
    kw: i64,
    sh: i64,
    sw: i64,
    ph: i64,
    pw: i64,
    dh: i64,
    dw: i64,
    groups: i64,
    oh: i64,
    ow: i64,
}

fn empty(g: &Conv2dGeom) -> bool {
    g.n == 0 || g.o == 0 || g.pixels() == 0
}

fn check_geom(kernel: &str, g: &Conv2dGeom) -> Result<()> {
    let ok = g.groups > 0
        && g.c % g.groups == 0
        && g.o % g.groups == 0
        && g.c > 0
        && g.kh > 0
        && g.kw > 0
        && g.sh > 0
        && g.sw > 0
        && g.dh > 0
        && g.dw > 0
        && Conv2dGeom::out_len(g.h, g.kh, g.sh, g.ph, g.dh) == Some(g.oh)
        && Conv2dGeom::out_len(g.w, g.kw, g.sw, g.pw, g.dw) == Some(g.ow);
    if ok {
        Ok(())
    } else {
        Err(Error::LaunchConfig {
            kernel: kernel.to_string(),
            msg: format!("inconsistent convolution geometry {g:?}"),
        })
    }
}

fn workspace(dev: &CudaDevice, floats: usize) -> Result<Buffer> {
    dev.alloc(floats.max(1) * 4)
}

/// Most taps (`c/groups · kh · kw`) step 2's kernel tabulates (`KTAB` in
/// `kernels/conv2d/02_implicit_gemm.cu`).
pub const IMPLICIT_MAX_TAPS: usize = 1024;

/// Whether step 2's forward takes `g`: at most [`IMPLICIT_MAX_TAPS`] taps `c/groups·kh·kw` and
/// offsets within an image and a weight that fit 32 bits (else step 2 runs step 1).
pub fn implicit_fits(g: &Conv2dGeom) -> bool {
    g.kg() <= IMPLICIT_MAX_TAPS && offsets_fit(g)
}

/// Whether step 2's input gradient takes `g`: at most [`IMPLICIT_MAX_TAPS`] taps
/// `o/groups·kh·kw` and 32-bit offsets (else step 2 runs step 1's).
pub fn implicit_dgrad_fits(g: &Conv2dGeom) -> bool {
    g.og().saturating_mul(g.kh).saturating_mul(g.kw) <= IMPLICIT_MAX_TAPS && offsets_fit(g)
}

fn offsets_fit(g: &Conv2dGeom) -> bool {
    let lim = i32::MAX as usize;
    let m = |a: usize, b: usize, c: usize| a.saturating_mul(b).saturating_mul(c);
    m(g.c, g.h, g.w) <= lim
        && m(g.o, g.oh, g.ow) <= lim
        && m(g.o, g.kg(), 1) <= lim
        && g.h.saturating_add(2 * g.ph) <= lim
        && g.w.saturating_add(2 * g.pw) <= lim
}

/// Most floats of shared memory step 3's kernels stage per block (48 KiB, the amount a block
/// gets without opting in).
pub const SMEM_FLOATS: usize = 12 * 1024;

/// Floats of shared memory step 3's input gradient stages: the group's weights and one image's
/// upstream-gradient planes.
fn direct_dgrad_floats(g: &Conv2dGeom) -> usize {
    g.og()
        .saturating_mul(g.kg())
        .saturating_add(g.og().saturating_mul(g.pixels()))
}

/// Rows a thread of step 3's stride-1 input gradient computes (`RX` in
/// `kernels/conv2d/03_backward_splitk.cu`).
const S1_ROWS: usize = 4;

/// The zero-padded `dy` plane of step 3's stride-1 input gradient: `(ht, hl, ohp, owp)`, the
/// halo above and left and the padded height and width.
fn s1_plane(g: &Conv2dGeom) -> (usize, usize, usize, usize) {
    let ht = ((g.kh - 1) * g.dh).saturating_sub(g.ph);
    let hl = ((g.kw - 1) * g.dw).saturating_sub(g.pw);
    let rows = g.h.div_ceil(S1_ROWS) * S1_ROWS;
    (
        ht,
        hl,
        ht + g.oh.max(rows + g.ph),
        hl + g.ow.max(g.w + g.pw),
    )
}

/// Floats of shared memory step 3's stride-1 input gradient stages: the group's weights and one
/// image's zero-padded upstream-gradient planes.
fn s1_dgrad_floats(g: &Conv2dGeom) -> usize {
    let (_, _, ohp, owp) = s1_plane(g);
    g.og()
        .saturating_mul(g.kg().saturating_add(ohp.saturating_mul(owp)))
}

/// Whether step 3's stride-1 input gradient takes `g`: stride 1 and its padded planes within
/// [`SMEM_FLOATS`].
fn s1_dgrad_fits(g: &Conv2dGeom) -> bool {
    g.sh == 1 && g.sw == 1 && s1_dgrad_floats(g) <= SMEM_FLOATS && offsets_fit(g)
}

/// Floats of shared memory step 3's weight gradient stages: the group's accumulators and one
/// image's input and upstream-gradient planes.
fn splitk_wgrad_floats(g: &Conv2dGeom) -> usize {
    direct_dgrad_floats(g).saturating_add(g.cg().saturating_mul(g.h).saturating_mul(g.w))
}

/// Whether step 3's input gradient takes `g`: its planes fit [`SMEM_FLOATS`] (else step 3 runs
/// step 2's), zero-padded at stride 1 or, when those do not fit or at other strides, unpadded.
pub fn direct_dgrad_fits(g: &Conv2dGeom) -> bool {
    s1_dgrad_fits(g) || (direct_dgrad_floats(g) <= SMEM_FLOATS && offsets_fit(g))
}

/// Whether step 3's weight gradient takes `g`: its planes fit [`SMEM_FLOATS`] (else step 3 runs
/// step 1's).
pub fn splitk_wgrad_fits(g: &Conv2dGeom) -> bool {
    splitk_wgrad_floats(g) <= SMEM_FLOATS && offsets_fit(g)
}

/// Most taps step 4's kernels tabulate (their tables are in dynamic shared memory: 12 bytes a
/// tap).
pub const PIPELINED_MAX_TAPS: usize = 4096;

/// Floats of one set of step 4's pipeline stages for a `bm × bn` tile (`stage_floats` in
/// `kernels/conv2d/04_pipelined.cu`: 3 stages of 16 × (bm+4) and 16 × (bn+4)).
const fn pipelined_stage_floats(bm: usize, bn: usize) -> usize {
    3 * 16 * ((bm + 4) + (bn + 4))
}

/// Dynamic shared memory of a step 4 kernel with a `bm × bn` tile over `taps` taps: the stages,
/// then the tap table (8 bytes a tap) and the weight's tap offsets (4 bytes).
fn pipelined_smem_bytes(bm: usize, bn: usize, taps: usize) -> u32 {
    (pipelined_stage_floats(bm, bn) * 4 + taps * 12) as u32
}

/// Whether step 4's kernels take `g`: the forward's (and the weight gradient's) taps
/// `c/groups·kh·kw` and the input gradient's `o/groups·kh·kw` within [`PIPELINED_MAX_TAPS`], the
/// dilated kernel's extent within the table's 16-bit displacements, and 32-bit offsets.
pub fn pipelined_fits(g: &Conv2dGeom) -> bool {
    let span = |k: usize, d: usize| k.saturating_sub(1).saturating_mul(d) < 1 << 15;
    g.kg() <= PIPELINED_MAX_TAPS
        && g.og().saturating_mul(g.kh).saturating_mul(g.kw) <= PIPELINED_MAX_TAPS
        && span(g.kh, g.dh)
        && span(g.kw, g.dw)
        && offsets_fit(g)
}

/// Blocks that share one image's work in step 3's kernels (`gridDim.z`): one for every 256
/// items (pixels or weight entries), at most 64.
fn parts(items: usize) -> usize {
    items.div_ceil(256).clamp(1, 64)
}

/// Blocks along the images for step 3's kernels, `parts` blocks to an image and group: about 8
/// blocks a multiprocessor in all, the images dealt evenly (each block gets the same count but
/// the last), at least 1, at most one an image.
fn image_blocks(dev: &CudaDevice, g: &Conv2dGeom, parts: usize) -> usize {
    let sms = dev.limits().sm_count.max(1) as usize;
    let n = g.n.max(1);
    let target = (8 * sms / (g.groups.max(1) * parts)).clamp(1, n.min(65_535));
    n.div_ceil(n.div_ceil(target))
}

fn grid_check(kernel: &str, gx: usize, g: &Conv2dGeom) -> Result<()> {
    if gx > i32::MAX as usize || g.groups > 65_535 {
        return Err(Error::LaunchConfig {
            kernel: kernel.to_string(),
            msg: format!("grid {gx} × {} is too large", g.groups),
        });
    }
    Ok(())
}

/// The column matrix of images `n0 .. n0 + nb` of `x`: `[groups][kg][nb·oh·ow]`.
fn im2col(
    dev: &CudaDevice,
    x: DevPtr,
    col: DevPtr,
    g: &Conv2dGeom,
    n0: usize,
    nb: usize,
) -> Result<()> {
    let a = g.args();
    let total = g.groups * g.kg() * nb * g.pixels();
    let (n0, nb) = (n0 as i64, nb as i64);
    // SAFETY: matches `conv2d_im2col_f32(const float*, float*, ConvArgs, long long, long long)`;
    // `x` holds the input of `g` and `col` `total` floats.
    unsafe {
        launch_elems(
            dev,
            STEP1,
            "conv2d_im2col_f32",
            total,
            &[&x, &col, &a, &n0, &nb],
        )
    }
}

/// `y[n0 + i, o, p] = act(tmp[o][i·P + p] + bias[o])`: the GEMM's `[o][images·pixels]` output
/// moved to NCHW, with the bias and the activation.
#[allow(clippy::too_many_arguments)]
fn bias_act(
    dev: &CudaDevice,
    tmp: DevPtr,
    bias: Option<DevPtr>,
    y: DevPtr,
    g: &Conv2dGeom,
    n0: usize,
    nb: usize,
    relu: bool,
) -> Result<()> {
    let a = g.args();
    let total = nb * g.o * g.pixels();
    let (has_bias, relu) = (bias.is_some() as i32, relu as i32);
    let b = bias.unwrap_or(tmp);
    let (n0, nb) = (n0 as i64, nb as i64);
    // SAFETY: matches `conv2d_bias_act_f32(const float*, const float*, float*, ConvArgs, long
    // long, long long, int, int)`; `tmp` holds `o·nb·P` floats, `bias` `o` (read only when
    // `has_bias`), `y` the output of `g`.
    unsafe {
        launch_elems(
            dev,
            STEP1,
            "conv2d_bias_act_f32",
            total,
            &[&tmp, &b, &y, &a, &n0, &nb, &has_bias, &relu],
        )
    }
}

/// `dyt[o][i·P + p] = dy[n0 + i, o, p]`: the upstream gradient of a chunk in the GEMM's layout.
fn gather_grad(
    dev: &CudaDevice,
    dy: DevPtr,
    dyt: DevPtr,
    g: &Conv2dGeom,
    n0: usize,
    nb: usize,
) -> Result<()> {
    let a = g.args();
    let total = nb * g.o * g.pixels();
    let (n0, nb) = (n0 as i64, nb as i64);
    // SAFETY: matches `conv2d_gather_grad_f32(const float*, float*, ConvArgs, long long, long
    // long)`; `dy` holds the output of `g`, `dyt` `o·nb·P` floats.
    unsafe {
        launch_elems(
            dev,
            STEP1,
            "conv2d_gather_grad_f32",
            total,
            &[&dy, &dyt, &a, &n0, &nb],
        )
    }
}

/// `dx` of images `n0 .. n0 + nb` from the column gradient `dcol` (col2im as a gather).
fn col2im(
    dev: &CudaDevice,
    dcol: DevPtr,
    dx: DevPtr,
    g: &Conv2dGeom,
    n0: usize,
    nb: usize,
) -> Result<()> {
    let a = g.args();
    let total = nb * g.c * g.h * g.w;
    let (n0, nb) = (n0 as i64, nb as i64);
    // SAFETY: matches `conv2d_col2im_f32(const float*, float*, ConvArgs, long long, long long)`;
    // `dcol` holds `groups·kg·nb·P` floats, `dx` the input of `g`.
    unsafe {
        launch_elems(
            dev,
            STEP1,
            "conv2d_col2im_f32",
            total,
            &[&dcol, &dx, &a, &n0, &nb],
        )
    }
}

/// `dst[i] += src[i]` for `n` floats.
fn accumulate(dev: &CudaDevice, dst: DevPtr, src: DevPtr, n: usize) -> Result<()> {
    let ni = n as i64;
    // SAFETY: matches `conv2d_accumulate_f32(float*, const float*, long long)`; both hold `n`
    // floats.
    unsafe { launch_elems(dev, STEP1, "conv2d_accumulate_f32", n, &[&dst, &src, &ni]) }
}

fn sgemm_kernel() -> super::matmul::SgemmKernel {
    crate::config::sgemm_kernel()
}

launchers! {
    // the forward launchers: (dev, x, w, bias, y, geometry, relu)
    (dev: &CudaDevice, x: DevPtr, w: DevPtr, bias: Option<DevPtr>, y: DevPtr, g: &Conv2dGeom, relu: bool);

    /// Step 1: `y = act(conv2d(x, w) + bias)` by im2col, one SGEMM batched over the groups
    /// (camel's SGEMM ladder at the selected step) and a pass that adds the bias, applies the
    /// activation (`relu`) and writes NCHW; in chunks of [`Conv2dGeom::chunk`] images.
    pub fn im2col_gemm(..) {
        check_geom("conv2d_im2col_f32", g)?;
        if empty(g) {
            return Ok(());
        }
        let chunk = g.chunk();
        let (p, kg, og) = (g.pixels(), g.kg(), g.og());
        let col = workspace(dev, g.groups * kg * chunk * p)?;
        let tmp = workspace(dev, g.o * chunk * p)?;
        let mut n0 = 0;
        while n0 < g.n {
            let nb = chunk.min(g.n - n0);
            let q = nb * p;
            im2col(dev, x, col.ptr(), g, n0, nb)?;
            let gemm = Gemm {
                batch: g.groups,
                m: og,
                n: q,
                k: kg,
                trans_a: false,
                trans_b: false,
                stride_a: og * kg,
                stride_b: kg * q,
            };
            sgemm(dev, sgemm_kernel(), &gemm, w, col.ptr(), tmp.ptr())?;
            bias_act(dev, tmp.ptr(), bias, y, g, n0, nb, relu)?;
            n0 += nb;
        }
        Ok(())
    }

    /// Step 2: `y = act(conv2d(x, w) + bias)` in one kernel: a tiled GEMM (output channels ×
    /// output pixels of the whole batch) whose input tile is read from `x` through the patch
    /// indexing (the column matrix is never written), with the bias and the activation in its
    /// epilogue. Groups of at most 16 output channels run the 16-row tile, others the 64-row.
    /// Geometries the kernel's tap table or 32-bit offsets cannot hold ([`implicit_fits`]) run
    /// [`im2col_gemm`].
    pub fn implicit_gemm(..) {
        if !implicit_fits(g) {
            return im2col_gemm(dev, x, w, bias, y, g, relu);
        }
        let (name, bm, bn) = if g.og() <= 16 {
            ("conv2d_implicit_gemm_m16_f32", 16, 128)
        } else {
            ("conv2d_implicit_gemm_m64_f32", 64, 128)
        };
        check_geom(name, g)?;
        if empty(g) {
            return Ok(());
        }
        let q = g.n * g.pixels();
        let (gx, gy) = (q.div_ceil(bn), g.og().div_ceil(bm));
        if gx > i32::MAX as usize || gy > 65_535 || g.groups > 65_535 {
            return Err(Error::LaunchConfig {
                kernel: name.to_string(),
                msg: format!("grid {gx} × {gy} × {} is too large", g.groups),
            });
        }
        let cfg = LaunchConfig::new(Dim3::xyz(gx as u32, gy as u32, g.groups as u32), Dim3::x(256));
        let a = g.args();
        let (has_bias, relu) = (bias.is_some() as i32, relu as i32);
        let b = bias.unwrap_or(w);
        // SAFETY: matches `conv2d_implicit_gemm_*_f32(const float*, const float*, const float*,
        // float*, ConvArgs, int, int)`; `x`, `w`, `y` hold the tensors of `g`, `bias` `o` floats
        // (read only when `has_bias`).
        unsafe { launch(dev, STEP2, name, cfg, &[&x, &w, &b, &y, &a, &has_bias, &relu]) }
    }

    /// Step 4: `y = act(conv2d(x, w) + bias)` as step 2, pipelined: 64 output channels (16 for
    /// groups of at most 16) × 256 output pixels a block, operands copied three tiles deep by
    /// cp.async, the tap table in dynamic shared memory. Geometries beyond [`pipelined_fits`]
    /// run [`implicit_gemm`].
    pub fn pipelined(..) {
        if !pipelined_fits(g) {
            return implicit_gemm(dev, x, w, bias, y, g, relu);
        }
        let (name, bm) = pipelined_rows("conv2d_pipelined", g.og());
        check_geom(&name, g)?;
        if empty(g) {
            return Ok(());
        }
        let cfg = pipelined_grid(&name, bm, g.n * g.pixels(), g.og(), g.groups, g.kg())?;
        let a = g.args();
        let (has_bias, relu) = (bias.is_some() as i32, relu as i32);
        let b = bias.unwrap_or(w);
        // SAFETY: matches `conv2d_pipelined_64x256_f32(const float*, const float*, const float*,
        // float*, ConvArgs, int, int)`; `x`, `w`, `y` hold the tensors of `g`, `bias` `o` floats
        // (read only when `has_bias`), and the dynamic shared memory holds the stages and `kg`
        // taps' tables.
        unsafe { launch(dev, STEP4, &name, cfg, &[&x, &w, &b, &y, &a, &has_bias, &relu]) }
    }
}

launchers! {
    // the input-gradient launchers: (dev, dy, w, dx, geometry)
    (dev: &CudaDevice, dy: DevPtr, w: DevPtr, dx: DevPtr, g: &Conv2dGeom);

    /// The input gradient: `dcol = Wᵀ · dy` (one SGEMM batched over the groups) folded onto
    /// `dx` by col2im, in chunks of images.
    pub fn im2col_gemm_bwd_input(..) {
        check_geom("conv2d_col2im_f32", g)?;
        if g.n == 0 {
            return Ok(());
        }
        let elems = g.n * g.c * g.h * g.w;
        if g.o == 0 || g.pixels() == 0 {
            return super::elementwise::fill_f32(dev, dx, elems, 0.0);
        }
        let chunk = g.chunk();
        let (p, kg, og) = (g.pixels(), g.kg(), g.og());
        let dcol = workspace(dev, g.groups * kg * chunk * p)?;
        let dyt = workspace(dev, g.o * chunk * p)?;
        let mut n0 = 0;
        while n0 < g.n {
            let nb = chunk.min(g.n - n0);
            let q = nb * p;
            gather_grad(dev, dy, dyt.ptr(), g, n0, nb)?;
            let gemm = Gemm {
                batch: g.groups,
                m: kg,
                n: q,
                k: og,
                trans_a: true,
                trans_b: false,
                stride_a: og * kg,
                stride_b: og * q,
            };
            sgemm(dev, sgemm_kernel(), &gemm, w, dyt.ptr(), dcol.ptr())?;
            col2im(dev, dcol.ptr(), dx, g, n0, nb)?;
            n0 += nb;
        }
        Ok(())
    }

    /// Step 2's input gradient: the transposed convolution as one implicit-GEMM kernel (input
    /// channels × input pixels of the batch, over the `o/groups·kh·kw` taps), reading `dy` and
    /// the weight in place: no column gradient is written and nothing is folded back.
    /// Geometries beyond [`implicit_dgrad_fits`] run [`im2col_gemm_bwd_input`].
    pub fn implicit_gemm_bwd_input(..) {
        if !implicit_dgrad_fits(g) {
            return im2col_gemm_bwd_input(dev, dy, w, dx, g);
        }
        let (name, bm, bn) = if g.cg() <= 16 {
            ("conv2d_implicit_dgrad_m16_f32", 16, 128)
        } else {
            ("conv2d_implicit_dgrad_m64_f32", 64, 128)
        };
        check_geom(name, g)?;
        let q = g.n * g.h * g.w;
        if q == 0 {
            return Ok(());
        }
        let (gx, gy) = (q.div_ceil(bn), g.cg().div_ceil(bm));
        if gx > i32::MAX as usize || gy > 65_535 || g.groups > 65_535 {
            return Err(Error::LaunchConfig {
                kernel: name.to_string(),
                msg: format!("grid {gx} × {gy} × {} is too large", g.groups),
            });
        }
        let cfg = LaunchConfig::new(Dim3::xyz(gx as u32, gy as u32, g.groups as u32), Dim3::x(256));
        let a = g.args();
        // SAFETY: matches `conv2d_implicit_dgrad_*_f32(const float*, const float*, float*,
        // ConvArgs)`; `dy`, `w`, `dx` hold the output, weight and input of `g`.
        unsafe { launch(dev, STEP2, name, cfg, &[&dy, &w, &dx, &a]) }
    }

    /// Step 3's input gradient: the transposed convolution computed directly. A block takes a
    /// group, every `gx`-th image and a share of its pixels; it stages the group's weights and
    /// the image's `dy` planes in shared memory, and a thread computes one input pixel of 1 to 4
    /// of the group's input channels; at stride 1 the planes are zero-padded and a thread
    /// computes 4 rows of a column. Geometries beyond [`direct_dgrad_fits`] run
    /// [`implicit_gemm_bwd_input`].
    pub fn splitk_bwd_input(..) {
        if !direct_dgrad_fits(g) {
            return implicit_gemm_bwd_input(dev, dy, w, dx, g);
        }
        // channels a thread: the largest of 4, 3, 2 that divides the group's, else 4 (the last
        // tile partly idle) or 1 for a single channel
        let (name, s1_name, ct) = match g.cg() {
            c if c % 4 == 0 => ("conv2d_dgrad_direct_c4_f32", "conv2d_dgrad_s1_c4_f32", 4),
            c if c % 3 == 0 => ("conv2d_dgrad_direct_c3_f32", "conv2d_dgrad_s1_c3_f32", 3),
            c if c % 2 == 0 => ("conv2d_dgrad_direct_c2_f32", "conv2d_dgrad_s1_c2_f32", 2),
            1 => ("conv2d_dgrad_direct_c1_f32", "conv2d_dgrad_s1_c1_f32", 1),
            _ => ("conv2d_dgrad_direct_c4_f32", "conv2d_dgrad_s1_c4_f32", 4),
        };
        check_geom(name, g)?;
        if g.n == 0 || g.h * g.w == 0 {
            return Ok(());
        }
        let a = g.args();
        if s1_dgrad_fits(g) {
            let name = s1_name;
            let pz = parts(g.cg().div_ceil(ct) * g.h.div_ceil(S1_ROWS) * g.w);
            let gx = image_blocks(dev, g, pz);
            grid_check(name, gx, g)?;
            let smem = (s1_dgrad_floats(g) * 4) as u32;
            let grid = Dim3::xyz(gx as u32, g.groups as u32, pz as u32);
            let cfg = LaunchConfig::new(grid, Dim3::x(256)).with_shared_mem(smem);
            let (ht, hl, ohp, owp) = s1_plane(g);
            let (ht, hl, ohp, owp) = (ht as i32, hl as i32, ohp as i32, owp as i32);
            let args: [&dyn crate::KernelArg; 8] = [&dy, &w, &dx, &a, &ht, &hl, &ohp, &owp];
            // SAFETY: matches `conv2d_dgrad_s1_c*_f32(const float*, const float*, float*,
            // ConvArgs, int, int, int, int)`; `dy`, `w`, `dx` hold the output, weight and input
            // of `g`, and `smem` bytes hold the weights and one image's padded planes of a group.
            return unsafe { launch(dev, STEP3, name, cfg, &args) };
        }
        let pz = parts(g.cg().div_ceil(ct) * g.h * g.w);
        let gx = image_blocks(dev, g, pz);
        grid_check(name, gx, g)?;
        let smem = (direct_dgrad_floats(g) * 4) as u32;
        let grid = Dim3::xyz(gx as u32, g.groups as u32, pz as u32);
        let cfg = LaunchConfig::new(grid, Dim3::x(256)).with_shared_mem(smem);
        // SAFETY: matches `conv2d_dgrad_direct_c*_f32(const float*, const float*, float*,
        // ConvArgs)`; `dy`, `w`, `dx` hold the output, weight and input of `g`, and `smem` bytes
        // hold the weights and one image's planes of a group.
        unsafe { launch(dev, STEP3, name, cfg, &[&dy, &w, &dx, &a]) }
    }

    /// Step 4's input gradient: at stride 1, the transposed convolution as step 4's pipelined
    /// implicit GEMM (64 input channels × 256 input pixels a block, over the `o/groups·kh·kw`
    /// taps). Other strides, groups of at most 16 input channels (step 3's direct kernel is
    /// faster there) and geometries beyond [`pipelined_fits`] run [`splitk_bwd_input`].
    pub fn pipelined_bwd_input(..) {
        if g.sh != 1 || g.sw != 1 || g.cg() <= 16 || !pipelined_fits(g) {
            return splitk_bwd_input(dev, dy, w, dx, g);
        }
        let (name, bm) = pipelined_rows("conv2d_pipelined_dgrad", g.cg());
        check_geom(&name, g)?;
        if g.n == 0 || g.h * g.w == 0 {
            return Ok(());
        }
        let taps = g.og() * g.kh * g.kw;
        let cfg = pipelined_grid(&name, bm, g.n * g.h * g.w, g.cg(), g.groups, taps)?;
        let a = g.args();
        // SAFETY: matches `conv2d_pipelined_dgrad_64x256_f32(const float*, const float*, float*,
        // ConvArgs)`; `dy`, `w`, `dx` hold the output, weight and input of `g`, and the dynamic
        // shared memory holds the stages and `taps` taps' tables.
        unsafe { launch(dev, STEP4, &name, cfg, &[&dy, &w, &dx, &a]) }
    }
}

launchers! {
    // the weight-gradient launchers: (dev, dy, x, dw, geometry)
    (dev: &CudaDevice, dy: DevPtr, x: DevPtr, dw: DevPtr, g: &Conv2dGeom);

    /// The weight gradient: `dW = Σ dy · colᵀ`, one SGEMM batched over the groups per chunk of
    /// images (summed over the chunks).
    pub fn im2col_gemm_bwd_weight(..) {
        check_geom("conv2d_im2col_f32", g)?;
        let wlen = g.o * g.kg();
        if empty(g) {
            return super::elementwise::fill_f32(dev, dw, wlen, 0.0);
        }
        let chunk = g.chunk();
        let (p, kg, og) = (g.pixels(), g.kg(), g.og());
        let col = workspace(dev, g.groups * kg * chunk * p)?;
        let dyt = workspace(dev, g.o * chunk * p)?;
        let part = if chunk < g.n { Some(workspace(dev, wlen)?) } else { None };
        let mut n0 = 0;
        while n0 < g.n {
            let nb = chunk.min(g.n - n0);
            let q = nb * p;
            im2col(dev, x, col.ptr(), g, n0, nb)?;
            gather_grad(dev, dy, dyt.ptr(), g, n0, nb)?;
            let gemm = Gemm {
                batch: g.groups,
                m: og,
                n: kg,
                k: q,
                trans_a: false,
                trans_b: true,
                stride_a: og * q,
                stride_b: kg * q,
            };
            let out = match (&part, n0) {
                (Some(b), n0) if n0 > 0 => b.ptr(),
                _ => dw,
            };
            sgemm(dev, sgemm_kernel(), &gemm, dyt.ptr(), col.ptr(), out)?;
            if out != dw {
                accumulate(dev, dw, out, wlen)?;
            }
            n0 += nb;
        }
        Ok(())
    }

    /// Step 3's weight gradient, split over the images (split-K): each block of
    /// `conv2d_wgrad_partial_f32` sums a share of a group's `[o/groups, kg]` entries over every
    /// `splits`-th image (staged in shared memory) into its row of a workspace, and
    /// `conv2d_wgrad_reduce_f32` adds the rows in a fixed order (with a single split the blocks
    /// write `dw` directly). Geometries beyond [`splitk_wgrad_fits`] run
    /// [`im2col_gemm_bwd_weight`].
    pub fn splitk_bwd_weight(..) {
        if !splitk_wgrad_fits(g) {
            return im2col_gemm_bwd_weight(dev, dy, x, dw, g);
        }
        let name = "conv2d_wgrad_partial_f32";
        check_geom(name, g)?;
        let wlen = g.o * g.kg();
        if empty(g) {
            return super::elementwise::fill_f32(dev, dw, wlen, 0.0);
        }
        let pz = parts(g.og() * g.kg());
        let splits = image_blocks(dev, g, pz);
        grid_check(name, splits, g)?;
        let smem = (splitk_wgrad_floats(g) * 4) as u32;
        let grid = Dim3::xyz(splits as u32, g.groups as u32, pz as u32);
        let cfg = LaunchConfig::new(grid, Dim3::x(256)).with_shared_mem(smem);
        let a = g.args();
        split_partials(dev, dw, splits, wlen, |out| {
            // SAFETY: matches `conv2d_wgrad_partial_f32(const float*, const float*, float*,
            // ConvArgs)`; `dy` and `x` hold the output and input of `g`, `out` `splits · o · kg`
            // floats, and `smem` bytes hold a group's accumulators and one image's planes.
            unsafe { launch(dev, STEP3, name, cfg, &[&dy, &x, &out, &a]) }
        })
    }

    /// Step 4's weight gradient: `dw = Σ dy · patchesᵀ` as a pipelined GEMM (64 output channels ×
    /// 192 or 64 taps a block, or 16 × 256 for groups of at most 16 output channels) over the
    /// batch's output pixels, split into `splits` equal ranges of pixel tiles: each block along z
    /// writes its partial tile to a workspace row, and `conv2d_wgrad_reduce_f32` adds the rows in
    /// a fixed order. Groups of at most 16 output channels with fewer than 128 taps (the 16 × 256
    /// tile would be mostly empty; step 3 is faster there) and geometries beyond
    /// [`pipelined_fits`] run [`splitk_bwd_weight`].
    pub fn pipelined_bwd_weight(..) {
        if (g.og() <= 16 && g.kg() < 128) || !pipelined_fits(g) {
            return splitk_bwd_weight(dev, dy, x, dw, g);
        }
        let (name, bm, bn) = if g.og() <= 16 {
            ("conv2d_pipelined_wgrad_16x256_f32", 16, 256)
        } else if g.kg() >= 192 {
            ("conv2d_pipelined_wgrad_64x192_f32", 64, 192)
        } else {
            ("conv2d_pipelined_wgrad_64x64_f32", 64, 64)
        };
        check_geom(name, g)?;
        let wlen = g.o * g.kg();
        if empty(g) {
            return super::elementwise::fill_f32(dev, dw, wlen, 0.0);
        }
        let splits = wgrad_splits(dev, g, bm, bn);
        if g.n * g.pixels().div_ceil(16) / splits > i32::MAX as usize {
            // a split's tile count is a 32-bit loop bound in the kernel
            return splitk_bwd_weight(dev, dy, x, dw, g);
        }
        let (gx, gy) = (g.kg().div_ceil(bn), g.og().div_ceil(bm));
        let grid = Dim3::xyz(gx as u32, gy as u32, (splits * g.groups) as u32);
        let smem = pipelined_smem_bytes(bm, bn, g.kg());
        let cfg = LaunchConfig::new(grid, Dim3::x(256)).with_shared_mem(smem);
        let a = g.args();
        split_partials(dev, dw, splits, wlen, |out| {
            // SAFETY: matches `conv2d_pipelined_wgrad_*_f32(const float*, const float*, float*,
            // ConvArgs)`; `dy` and `x` hold the output and input of `g`, `out` `splits · o · kg`
            // floats, and the dynamic shared memory holds the stages and the `kg` taps' table.
            unsafe { launch(dev, STEP4, name, cfg, &[&dy, &x, &out, &a]) }
        })
    }
}

/// Runs a split weight-gradient kernel through `partials(out)` and sums its rows into `dw`: with
/// one split the kernel writes `dw` itself; otherwise it writes `splits` rows of `wlen` floats to a
/// workspace, which `conv2d_wgrad_reduce_f32` adds in order (32 columns a block).
fn split_partials(
    dev: &CudaDevice,
    dw: DevPtr,
    splits: usize,
    wlen: usize,
    partials: impl FnOnce(DevPtr) -> Result<()>,
) -> Result<()> {
    if splits <= 1 {
        return partials(dw);
    }
    let part = workspace(dev, splits * wlen)?;
    partials(part.ptr())?;
    let (s, l, out) = (splits as i64, wlen as i64, part.ptr());
    let cfg = LaunchConfig::new(Dim3::x(wlen.div_ceil(32) as u32), Dim3::x(256));
    // SAFETY: matches `conv2d_wgrad_reduce_f32(const float*, float*, long long, long long)`;
    // `out` holds `splits · wlen` floats, `dw` `wlen`.
    unsafe {
        launch(
            dev,
            STEP3,
            "conv2d_wgrad_reduce_f32",
            cfg,
            &[&out, &dw, &s, &l],
        )
    }
}

/// Splits of step 4's weight gradient: one wave of two blocks a multiprocessor in all (the
/// splits share the batch's pixel tiles equally, so a whole wave finishes together), at least 8
/// tiles of 16 pixels a split, at most 65 535 blocks along z with the groups.
fn wgrad_splits(dev: &CudaDevice, g: &Conv2dGeom, bm: usize, bn: usize) -> usize {
    let sms = dev.limits().sm_count.max(1) as usize;
    let blocks = g.kg().div_ceil(bn) * g.og().div_ceil(bm) * g.groups;
    let tiles = g.n * g.pixels().div_ceil(16);
    (2 * sms / blocks)
        .min(tiles / 8)
        .min(65_535 / g.groups.max(1))
        .max(1)
}

/// A step 4 gather kernel `{prefix}_{bm}x256_f32` and its rows `bm` for `rows` rows a group:
/// 16-row tiles for at most 16, else 64 (the input gradient has only the 64-row kernel).
fn pipelined_rows(prefix: &str, rows: usize) -> (String, usize) {
    let bm = if rows <= 16 { 16 } else { 64 };
    (format!("{prefix}_{bm}x256_f32"), bm)
}

/// The launch of a step 4 gather kernel over `cols` GEMM columns (pixels of the batch) and
/// `rows` rows a group, with `taps` taps tabulated: 256 columns × `bm` rows a block.
fn pipelined_grid(
    name: &str,
    bm: usize,
    cols: usize,
    rows: usize,
    groups: usize,
    taps: usize,
) -> Result<LaunchConfig> {
    let (gx, gy) = (cols.div_ceil(256), rows.div_ceil(bm));
    if gx > i32::MAX as usize || gy > 65_535 || groups > 65_535 {
        return Err(Error::LaunchConfig {
            kernel: name.to_string(),
            msg: format!("grid {gx} × {gy} × {groups} is too large"),
        });
    }
    let grid = Dim3::xyz(gx as u32, gy as u32, groups as u32);
    Ok(LaunchConfig::new(grid, Dim3::x(256)).with_shared_mem(pipelined_smem_bytes(bm, 256, taps)))
}

// ------------------------------------------------------------------ the ladder's table

/// A conv2d forward launcher: `(dev, x, w, bias, y, geometry, relu)`.
pub type Forward =
    fn(&CudaDevice, DevPtr, DevPtr, Option<DevPtr>, DevPtr, &Conv2dGeom, bool) -> Result<()>;
/// An input-gradient launcher: `(dev, dy, w, dx, geometry)`.
pub type BackwardInput = fn(&CudaDevice, DevPtr, DevPtr, DevPtr, &Conv2dGeom) -> Result<()>;
/// A weight-gradient launcher: `(dev, dy, x, dw, geometry)`.
pub type BackwardWeight = fn(&CudaDevice, DevPtr, DevPtr, DevPtr, &Conv2dGeom) -> Result<()>;

/// The element type of a 16-bit convolution's kernels (`f16` or `bf16`), or an error naming
/// `kernel` and the type.
fn half_suffix(kernel: &str, elem: Elem) -> Result<&'static str> {
    match elem {
        Elem::F16 | Elem::BF16 => Ok(elem.suffix()),
        other => Err(Error::InvalidArgument {
            op: kernel.to_string(),
            msg: format!("the 16-bit convolution's rows are f16 or bf16, not {other:?}"),
        }),
    }
}

/// The 16-bit convolution's rows of `x` (`elem`, f16 or bf16): `[groups][n·oh·ow][c/groups·kh·kw]`,
/// one row per output pixel holding its patch (0 in the padding), for one tensor-core GEMM with
/// the weight (`kernels/conv2d/half_rows.cu`).
pub fn unfold_rows(
    dev: &CudaDevice,
    elem: Elem,
    x: DevPtr,
    rows: DevPtr,
    g: &Conv2dGeom,
) -> Result<()> {
    let name = format!(
        "conv2d_unfold_rows_{}",
        half_suffix("conv2d_unfold_rows", elem)?
    );
    check_geom(&name, g)?;
    let a = g.args();
    let total = g.groups * g.n * g.pixels() * g.kg();
    // SAFETY: matches `conv2d_unfold_rows_*(const T*, T*, ConvArgs)`; `x` holds the input of `g`
    // and `rows` `total` elements of `elem`.
    unsafe { launch_elems(dev, HALF_ROWS, &name, total, &[&x, &rows, &a]) }
}

/// The input gradient of the 16-bit convolution from its rows' gradient `drows` (the layout of
/// [`unfold_rows`]): each input element sums the entries that read it in f32 and rounds once.
pub fn fold_rows(
    dev: &CudaDevice,
    elem: Elem,
    drows: DevPtr,
    dx: DevPtr,
    g: &Conv2dGeom,
) -> Result<()> {
    let name = format!(
        "conv2d_fold_rows_{}",
        half_suffix("conv2d_fold_rows", elem)?
    );
    check_geom(&name, g)?;
    let a = g.args();
    let total = g.n * g.c * g.h * g.w;
    // SAFETY: matches `conv2d_fold_rows_*(const T*, T*, ConvArgs)`; `drows` holds the rows of
    // `g` and `dx` its input, in `elem`.
    unsafe { launch_elems(dev, HALF_ROWS, &name, total, &[&drows, &dx, &a]) }
}

/// The launchers of one step of the conv2d ladder.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// The step (described in [`super::ladder::Family::Conv2d`]'s table).
    pub step: Step,
    /// Its forward (bias and activation included).
    pub forward: Forward,
    /// Its input gradient.
    pub backward_input: BackwardInput,
    /// Its weight gradient.
    pub backward_weight: BackwardWeight,
}

/// The conv2d ladder: the one table the backend, the benchmarks and the tests run.
pub const STEPS: [Kernels; 4] = [
    Kernels {
        step: Step::One,
        forward: im2col_gemm,
        backward_input: im2col_gemm_bwd_input,
        backward_weight: im2col_gemm_bwd_weight,
    },
    Kernels {
        step: Step::Two,
        forward: implicit_gemm,
        backward_input: implicit_gemm_bwd_input,
        backward_weight: im2col_gemm_bwd_weight,
    },
    Kernels {
        step: Step::Three,
        forward: implicit_gemm,
        backward_input: splitk_bwd_input,
        backward_weight: splitk_bwd_weight,
    },
    Kernels {
        step: Step::Four,
        forward: pipelined,
        backward_input: pipelined_bwd_input,
        backward_weight: pipelined_bwd_weight,
    },
];

/// The launchers of `step` (the highest step at or below it).
pub fn at(step: Step) -> &'static Kernels {
    super::ladder::pick(&STEPS, step, |k| k.step)
}

#[cfg(test)]
mod tests {
    use super::Conv2dGeom;

    #[test]
    fn output_lengths_follow_pytorch() {
        assert_eq!(Conv2dGeom::out_len(28, 5, 1, 2, 1), Some(28));
        assert_eq!(Conv2dGeom::out_len(14, 5, 1, 0, 1), Some(10));
        assert_eq!(Conv2dGeom::out_len(7, 3, 2, 1, 2), Some(3));
        assert_eq!(Conv2dGeom::out_len(2, 5, 1, 1, 1), None);
        assert_eq!(Conv2dGeom::out_len(5, 3, 0, 0, 1), None);
        assert_eq!(Conv2dGeom::out_len(5, 3, 1, 0, 0), None);
    }
}

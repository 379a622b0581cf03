//! Launchers for the tensor-core GEMM ladder of 16-bit inputs (`kernels/matmul/14_*` … `17_*`,
//! templates in `kernels/matmul/hmma.cuh` and, for Hopper's step 17, `kernels/matmul/wgmma.cuh`;
//! [`tf32_wgmma`] runs the same Hopper kernel on f32 operands read as TF32, SGEMM step 18):
//! `C = act(op(A)·op(B) + bias)` for each batch, with A,
//! B, C, bias and the saved pre-activation all f16 or all bf16, products summed in f32 on the
//! tensor cores and rounded once where C is stored. The geometry is the SGEMM ladder's [`Gemm`]
//! and the epilogue its [`Epilogue`] (pointers to 16-bit elements here).

use super::matmul::{Epilogue, Gemm};
use super::shape::Elem;
use crate::tma::{encode_swizzled, Matrices};
use crate::{CudaDevice, DevPtr, Dim3, Error, KernelArg, LaunchConfig, Result};

/// A step of the tensor-core GEMM ladder, selectable at run time for tests and benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HgemmKernel {
    /// 14: `mma.sync.m16n8k16` fed by `ldmatrix` from plain row-major shared tiles.
    Ldmatrix,
    /// 15: step 14 with XOR-swizzled shared tiles (no bank conflicts).
    Swizzle,
    /// 16: swizzled tiles filled by a three-stage `cp.async` pipeline, 128×256 or 128×128 block
    /// tiles (see [`hmma_width`]).
    Async,
    /// 17: TMA loads and `wgmma` warpgroup MMAs, a producer and two consumer warpgroups, 128×256
    /// or 128×128 block tiles (compute capability 9.0; see [`hgemm_route`]).
    Wgmma,
}

/// Launch shape of one step: module, kernel-name prefix, block tile, slice depth, threads,
/// shared memory, and the blocks a multiprocessor holds at once.
struct Config {
    module: &'static str,
    prefix: &'static str,
    bm: usize,
    bn: usize,
    bk: usize,
    threads: u32,
    smem: u32,
    resident: usize,
}

impl Config {
    /// A 128-row tile `bn` wide in `stages` shared buffers of `bk`-deep slices.
    #[allow(clippy::too_many_arguments)]
    const fn new(
        module: &'static str,
        prefix: &'static str,
        bn: usize,
        bk: usize,
        stages: usize,
        threads: u32,
        resident: usize,
    ) -> Config {
        Config {
            module,
            prefix,
            bm: 128,
            bn,
            bk,
            threads,
            // STAGES × (BM·BK + BK·BN) 16-bit elements
            smem: (stages * (128 * bk + bk * bn) * 2) as u32,
            resident,
        }
    }
}

impl HgemmKernel {
    /// Every step, in ladder order.
    pub const ALL: [HgemmKernel; 4] = [
        HgemmKernel::Ldmatrix,
        HgemmKernel::Swizzle,
        HgemmKernel::Async,
        HgemmKernel::Wgmma,
    ];

    /// The fastest step (the library default for 16-bit `matmul`); where it cannot run, step 16
    /// does ([`hgemm_route`]).
    pub const BEST: HgemmKernel = HgemmKernel::Wgmma;

    /// Short name, as printed by the benchmarks and accepted by `gemm_bench --kernels`.
    pub fn name(&self) -> &'static str {
        match self {
            HgemmKernel::Ldmatrix => "mma",
            HgemmKernel::Swizzle => "swizzle",
            HgemmKernel::Async => "mma_async",
            HgemmKernel::Wgmma => "wgmma",
        }
    }

    /// Ladder step number, as in `kernels/matmul/NN_*.cu`.
    pub fn step(&self) -> &'static str {
        match self {
            HgemmKernel::Ldmatrix => "14",
            HgemmKernel::Swizzle => "15",
            HgemmKernel::Async => "16",
            HgemmKernel::Wgmma => "17",
        }
    }

    /// The step called `name` (see [`HgemmKernel::name`]).
    pub fn from_name(name: &str) -> Option<HgemmKernel> {
        HgemmKernel::ALL.iter().find(|k| k.name() == name).copied()
    }

    /// The block-tile widths the step has (step 16: 128 and 256, step 17: 64 as well; see
    /// [`hgemm_plan`]).
    pub fn widths(&self) -> &'static [usize] {
        match self {
            HgemmKernel::Ldmatrix | HgemmKernel::Swizzle => &[128],
            HgemmKernel::Async => &[128, 256],
            HgemmKernel::Wgmma => &[64, 128, 256],
        }
    }

    /// Launch shape of steps 14–16 with block tiles `width` wide, one of [`Self::widths`]
    /// (step 17 has its own, [`wgmma`]).
    fn config(&self, width: usize) -> Config {
        match (self, width) {
            (HgemmKernel::Ldmatrix, _) => {
                Config::new("matmul/14_hmma_ldmatrix", "hgemm_14", 128, 32, 2, 256, 1)
            }
            (HgemmKernel::Swizzle, _) => {
                Config::new("matmul/15_hmma_swizzle", "hgemm_15", 128, 32, 2, 256, 1)
            }
            (_, 256) => Config::new("matmul/16_hmma_async", "hgemm_16", 256, 64, 3, 256, 1),
            _ => Config::new("matmul/16_hmma_async", "hgemm_16n", 128, 64, 3, 128, 2),
        }
    }
}

/// How [`hgemm`] runs one product: the block-tile width and the number of K-splits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HgemmPlan {
    /// Columns of C a block computes (one of [`HgemmKernel::widths`]).
    pub width: usize,
    /// Ranges K is cut into, their partial sums added by a second kernel (1 = none).
    pub splits: usize,
}

/// The plan [`hgemm`] gives `g` under `kernel` (as routed, [`hgemm_route`]) on `sm_count`
/// multiprocessors: a tile width, then the K-splits for it.
///
/// A product whose output tiles are too few for the GPU (a weight gradient, which sums every
/// token of the batch into a small matrix) has its K cut, each split keeping at least
/// [`MIN_K_PER_SPLIT`] of K; every other product runs whole. A split writes f32 partial sums
/// that a second kernel reads back, which costs more than a grid of a quarter of a wave or more
/// leaves idle: only smaller grids split, into one wave of the blocks the multiprocessors hold
/// at once.
///
/// Step 16's width is [`hmma_width`]'s. Step 17's is [`wgmma_width`]'s, or 64 where that is 128
/// and 64-wide blocks, split as they would be, take less time in whole waves (weighted as in
/// [`wgmma_width`]).
pub fn hgemm_plan(sm_count: usize, kernel: HgemmKernel, g: &Gemm) -> HgemmPlan {
    let (forced, below) =
        crate::config::with_experiments(|e| (e.hgemm_width, e.hgemm_split_below.max(1)));
    let sm = sm_count.max(1);
    let plan_at = |width: usize| {
        let (bm, resident) = match kernel {
            HgemmKernel::Wgmma => (WGMMA_BM, 1),
            _ => {
                let t = kernel.config(width);
                (t.bm, t.resident)
            }
        };
        let tiles = g.m.div_ceil(bm) * g.n.div_ceil(width) * g.batch;
        let splits = if tiles == 0 || below * tiles > sm || g.k < 2 * MIN_K_PER_SPLIT {
            1
        } else {
            (resident * sm / tiles).min(g.k / MIN_K_PER_SPLIT).max(1)
        };
        (HgemmPlan { width, splits }, tiles)
    };
    let width = match (forced, kernel) {
        (Some(w), _) if kernel.widths().contains(&w) => w,
        // where 128-wide tiles win over 256-wide ones, 64-wide ones may win over both: the
        // width whose blocks, split as they would be, take less time in whole waves
        (_, HgemmKernel::Wgmma) => {
            let time = |(p, tiles): (HgemmPlan, usize), cost: usize| {
                let waves = (tiles * p.splits).div_ceil(sm);
                (waves * p.width * cost) as f64 / p.splits as f64
            };
            match wgmma_width(sm_count, g) {
                128 if time(plan_at(64), COST_PER_COLUMN_64)
                    < time(plan_at(128), COST_PER_COLUMN_128) =>
                {
                    64
                }
                w => w,
            }
        }
        (_, HgemmKernel::Async) => hmma_width(sm_count, g),
        _ => 128,
    };
    plan_at(width).0
}

/// The block-tile width (256 or 128) step 16 uses for `g` on `sm_count` multiprocessors. A
/// 256-wide tile of eight warps costs less per column (each slice of A it loads feeds twice the
/// columns), so it is the choice unless its last tile column would be at most half full or its
/// grid would fill less than half a wave. Those take 128-wide tiles of four warps, two blocks a
/// multiprocessor (docs/kernels/matmul.md measures both).
pub fn hmma_width(sm_count: usize, g: &Gemm) -> usize {
    let tail = g.n % 256;
    let wide_tiles = g.m.div_ceil(128) * g.n.div_ceil(256) * g.batch;
    if (tail > 0 && tail <= 128) || 2 * wide_tiles < sm_count {
        128
    } else {
        256
    }
}

/// Shortest range of K a split keeps: four 64-deep slices of steps 16 and 17, so their
/// pipelines still fill.
const MIN_K_PER_SPLIT: usize = 256;

/// Launch `kernel` for `g` on `elem` (F16 or BF16) operands: `c` receives `batch` row-major
/// `m × n` matrices of the same element type, as [`hgemm_plan`] says.
#[allow(clippy::too_many_arguments)]
pub fn hgemm(
    dev: &CudaDevice,
    kernel: HgemmKernel,
    elem: Elem,
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
    epi: &Epilogue,
) -> Result<()> {
    let kernel = hgemm_route(dev, kernel, g, a, b);
    let limits = dev.limits();
    let mut plan = hgemm_plan(limits.sm_count as usize, kernel, g);
    // a GPU whose blocks cannot hold the 256-wide step-16 tile's stages takes the 128-wide one
    if kernel == HgemmKernel::Async
        && kernel.config(plan.width).smem > limits.max_shared_per_block_optin
    {
        plan.width = 128;
    }
    hgemm_with_plan(dev, kernel, elem, g, a, b, c, epi, plan)
}

/// [`hgemm`] with an explicit plan: a tile width the step that runs has (else an error: step 17
/// where TMA cannot read the operands is step 16, [`hgemm_route`]), and the number
/// of K-splits (1 = none; more are cut into ranges of whole slices of the step, so the count may
/// come out lower). With more than one, each split's f32 partial sums go to a workspace and
/// `hgemm_splitk_reduce` adds them in split order, applies the epilogue and rounds once to the
/// element type.
#[allow(clippy::too_many_arguments)]
pub fn hgemm_with_plan(
    dev: &CudaDevice,
    kernel: HgemmKernel,
    elem: Elem,
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
    epi: &Epilogue,
    plan: HgemmPlan,
) -> Result<()> {
    let suffix = match elem {
        Elem::F16 => "f16",
        Elem::BF16 => "bf16",
        other => {
            return Err(Error::InvalidArgument {
                op: "hgemm".into(),
                msg: format!("the tensor-core GEMM takes f16 or bf16 operands, not {other:?}"),
            })
        }
    };
    let kernel = hgemm_route(dev, kernel, g, a, b);
    if !kernel.widths().contains(&plan.width) {
        return Err(Error::InvalidArgument {
            op: "hgemm".into(),
            msg: format!(
                "step {} has block tiles {:?} wide, not {}",
                kernel.step(),
                kernel.widths(),
                plan.width
            ),
        });
    }
    if g.batch == 0 || g.m == 0 || g.n == 0 {
        return Ok(());
    }
    if kernel == HgemmKernel::Wgmma {
        return wgmma(dev, elem, g, a, b, c, epi, plan);
    }
    let t = kernel.config(plan.width);
    let name = format!("{}_{suffix}_{}", t.prefix, transposes(g));
    let (tiles_n, tiles_m) = (g.n.div_ceil(t.bn), g.m.div_ceil(t.bm));
    let (k_split, splits) = super::matmul::k_ranges_aligned(g.k, plan.splits, t.bk);
    check_limits(&name, g, splits, t.bm)?;
    let f = dev.function(t.module, &name)?;
    let cfg = LaunchConfig::new(
        Dim3::xyz(tiles_n as u32, tiles_m as u32, (g.batch * splits) as u32),
        Dim3::x(t.threads),
    )
    .with_shared_mem(t.smem);
    let (m, n, k) = (g.m as i32, g.n as i32, g.k as i32);
    let (sa, sb, sc) = (g.stride_a as i64, g.stride_b as i64, (g.m * g.n) as i64);
    let bias = epi.bias.unwrap_or(DevPtr::NULL);
    let z = epi.pre_act.unwrap_or(DevPtr::NULL);
    let act = epi.act.code();
    if splits == 1 {
        let (p, ks) = (DevPtr::NULL, 0i32);
        let args: [&dyn KernelArg; 14] = [
            &a, &b, &c, &m, &n, &k, &sa, &sb, &sc, &bias, &act, &z, &p, &ks,
        ];
        // SAFETY: matches HGEMM_ARGS in hmma.cuh; the caller passes buffers of `elem` elements
        // holding the matrices the strides and sizes describe (bias: n elements; pre_act: like
        // C). With k_split = 0 the workspace pointer is not read.
        return unsafe { dev.launch(&f, cfg, &args) };
    }
    let total = g.batch * g.m * g.n;
    let work = dev.alloc(splits * total * 4)?;
    let (wp, ks) = (work.ptr(), k_split as i32);
    let args: [&dyn KernelArg; 14] = [
        &a, &b, &c, &m, &n, &k, &sa, &sb, &sc, &bias, &act, &z, &wp, &ks,
    ];
    // SAFETY: as above, with the workspace holding splits × batch × m × n floats; the kernel
    // writes only the workspace.
    unsafe { dev.launch(&f, cfg, &args)? };
    reduce_splits(dev, elem, wp, c, splits, g, epi)
}

/// The kernel-name suffix of `g`'s transposes: `nn`, `nt`, `tn` or `tt` (A first; `t` = stored
/// transposed).
fn transposes(g: &Gemm) -> String {
    let t = |x: bool| if x { 't' } else { 'n' };
    format!("{}{}", t(g.trans_a), t(g.trans_b))
}

/// Refuses sizes the kernels cannot index or launch: dimensions past i32, more than 65535
/// batches × splits (grid z) or tiles of `bm` rows (grid y).
fn check_limits(name: &str, g: &Gemm, splits: usize, bm: usize) -> Result<()> {
    if g.m > i32::MAX as usize
        || g.n > i32::MAX as usize
        || g.k > i32::MAX as usize
        || g.batch * splits > 65_535
        || g.m.div_ceil(bm) > 65_535
    {
        return Err(Error::LaunchConfig {
            kernel: name.to_string(),
            msg: format!(
                "sizes m={} n={} k={} batch={} (× {splits} K-splits) exceed the kernel's limits \
                 (i32 dims, batch·splits ≤ 65535, m ≤ 65535 tiles of {bm})",
                g.m, g.n, g.k, g.batch
            ),
        });
    }
    Ok(())
}

/// Adds the `splits` f32 partial sums in `work` (laid out [split][batch·m·n]) in split order,
/// applies the epilogue and stores C, rounded once to `elem` (`hgemm_splitk_reduce_*`, or
/// `sgemm_splitk_reduce` for f32).
fn reduce_splits(
    dev: &CudaDevice,
    elem: Elem,
    work: DevPtr,
    c: DevPtr,
    splits: usize,
    g: &Gemm,
    epi: &Epilogue,
) -> Result<()> {
    let bias = epi.bias.unwrap_or(DevPtr::NULL);
    let z = epi.pre_act.unwrap_or(DevPtr::NULL);
    let act = epi.act.code();
    let total = g.batch * g.m * g.n;
    let (sp, tot, nn) = (splits as i32, total as i64, g.n as i32);
    let args: [&dyn KernelArg; 8] = [&work, &c, &sp, &tot, &nn, &bias, &act, &z];
    let (name, cfg) = match elem {
        // four elements a thread
        Elem::F32 => (
            "sgemm_splitk_reduce".to_string(),
            crate::launch_1d(total.div_ceil(4)),
        ),
        _ => (
            format!("hgemm_splitk_reduce_{}", elem.suffix()),
            crate::launch_1d(total),
        ),
    };
    // SAFETY: matches HGEMM_SPLITK_REDUCE and sgemm_splitk_reduce: the workspace holds splits ×
    // total floats, C and Z total elements of `elem`, bias n of them.
    unsafe { super::launch(dev, "matmul/splitk_reduce", &name, cfg, &args) }
}

/// Block tile rows of step 17.
const WGMMA_BM: usize = 128;
/// Shared memory of a step-17 block: its pipeline stages fill 192 KiB; 1 KiB more lets the
/// kernel start them on a 1024-byte boundary (kernels/matmul/wgmma.cuh).
const WGMMA_SMEM: u32 = 192 * 1024 + 1024;

/// Shared memory of a block of step 17's persistent kernel: the same stages, and two 8 KiB
/// output chunk buffers for each consumer warpgroup.
const WGMMA_PERSISTENT_SMEM: u32 = WGMMA_SMEM + 32 * 1024;

/// The blocks step 17's persistent kernel runs `g` with, on `tiles` output tiles of the plan,
/// or `None` where the kernel a block a tile runs it. The persistent kernel takes tiles 128 or
/// 256 wide, unsplit along K, with no pre-activation to save, and a C
/// that TMA can address (its rows a multiple of 16 bytes). It runs as many rounds of tiles as
/// one block a multiprocessor needs, on the fewest blocks that take the tiles in that many
/// rounds, so that every block runs the same count of tiles
/// ([`Experiments::hgemm_blocks`](crate::config::Experiments::hgemm_blocks) overrides that).
pub fn wgmma_blocks(
    dev: &CudaDevice,
    elem: Elem,
    g: &Gemm,
    c: DevPtr,
    epi: &Epilogue,
    plan: HgemmPlan,
    tiles: usize,
) -> Option<usize> {
    let sm = dev.limits().sm_count as usize;
    let out = wgmma_output(elem, g, c);
    let fits = plan.splits == 1
        && plan.width >= 128
        && epi.pre_act.is_none()
        && out.tma_compatible()
        && WGMMA_PERSISTENT_SMEM <= dev.limits().max_shared_per_block_optin;
    let blocks = crate::config::with_experiments(|e| e.hgemm_blocks);
    match blocks {
        _ if !fits || tiles == 0 => None,
        Some(0) => None,
        Some(n) => Some(n.min(tiles)),
        None => {
            let rounds = tiles.div_ceil(sm.max(1));
            Some(tiles.div_ceil(rounds))
        }
    }
}

/// Relative time per output column of a 64-wide step-17 tile …
const COST_PER_COLUMN_64: usize = 205;
/// … of a 128-wide one …
const COST_PER_COLUMN_128: usize = 130;
/// … and of a 256-wide one.
const COST_PER_COLUMN_256: usize = 100;

/// The tile width (256 or 128) step 17 uses for `g` on `sm_count` multiprocessors, before
/// [`hgemm_plan`] weighs 64: the one whose whole waves of tiles take less time, weighting a
/// 128-wide tile's time per column above a 256-wide one's (each slice of A it loads feeds half
/// as many columns; the weights are the `COST_PER_COLUMN` constants, docs/kernels/matmul.md).
/// Narrow outputs and grids of less than a wave get 128.
pub fn wgmma_width(sm_count: usize, g: &Gemm) -> usize {
    let waves =
        |bn: usize| (g.m.div_ceil(WGMMA_BM) * g.n.div_ceil(bn) * g.batch).div_ceil(sm_count.max(1));
    if waves(128) * 128 * COST_PER_COLUMN_128 < waves(256) * 256 * COST_PER_COLUMN_256 {
        128
    } else {
        256
    }
}

/// A and B of `g` as TMA sees them, `elem` elements (rows of the contiguous dimension; one matrix
/// when the batch is 1 or the stride 0).
fn wgmma_operands(elem: Elem, g: &Gemm, a: DevPtr, b: DevPtr) -> (Matrices, Matrices) {
    let stride = |s: usize| if g.batch == 1 { 0 } else { s };
    let (ai, ar) = if g.trans_a { (g.m, g.k) } else { (g.k, g.m) };
    let (bi, br) = if g.trans_b { (g.k, g.n) } else { (g.n, g.k) };
    (
        Matrices {
            elem,
            base: a,
            inner: ai,
            rows: ar,
            batch: g.batch,
            batch_stride: stride(g.stride_a),
        },
        Matrices {
            elem,
            base: b,
            inner: bi,
            rows: br,
            batch: g.batch,
            batch_stride: stride(g.stride_b),
        },
    )
}

/// C of `g` as TMA sees it: `batch` packed m × n matrices of `elem` at `c`.
fn wgmma_output(elem: Elem, g: &Gemm, c: DevPtr) -> Matrices {
    Matrices {
        elem,
        base: c,
        inner: g.n,
        rows: g.m,
        batch: g.batch,
        batch_stride: if g.batch == 1 { 0 } else { g.m * g.n },
    }
}

/// Whether the Hopper kernels (steps 17 and 18) can run `g` on `elem` operands at `a` and `b`:
/// compute capability 9.0 (sm_90a PTX), K > 0, and operands TMA can address (16-byte aligned
/// base pointers, rows and batch strides).
fn wgmma_fits(dev: &CudaDevice, elem: Elem, g: &Gemm, a: DevPtr, b: DevPtr) -> bool {
    let (ma, mb) = wgmma_operands(elem, g, a, b);
    dev.compute_capability() == (9, 0) && g.k > 0 && ma.tma_compatible() && mb.tma_compatible()
}

/// The step that runs `g` when `kernel` is asked for. Step 17 needs compute capability 9.0
/// (sm_90a PTX), K > 0, and operands TMA can address: 16-byte aligned base pointers, and rows
/// and batch strides of multiples of 8 elements. Elsewhere step 16 runs it, at every shape and
/// alignment. Every other step runs as asked.
pub fn hgemm_route(
    dev: &CudaDevice,
    kernel: HgemmKernel,
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
) -> HgemmKernel {
    if kernel != HgemmKernel::Wgmma {
        return kernel;
    }
    // f16 and bf16 have the same size, so either stands for the pair here
    if wgmma_fits(dev, Elem::F16, g, a, b) {
        HgemmKernel::Wgmma
    } else {
        HgemmKernel::Async
    }
}

/// Step 17 on 16-bit operands or step 18 on f32 ones (TF32; both operands K-major), the caller
/// having checked [`wgmma_fits`]: tensor maps for A and B, then the kernel of the plan's width,
/// and the split-K reduction where K is split (ranges of a whole number of the kernel's 128-byte
/// slices, so that only the last range has a tail).
#[allow(clippy::too_many_arguments)]
fn wgmma(
    dev: &CudaDevice,
    elem: Elem,
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
    epi: &Epilogue,
    plan: HgemmPlan,
) -> Result<()> {
    let bn = plan.width;
    let (module, name) = match elem {
        Elem::F32 => (
            "matmul/18_tf32_wgmma_sm90a",
            format!("sgemm_18_tf32_w{bn}_{}", transposes(g)),
        ),
        _ => (
            "matmul/17_wgmma_tma_sm90a",
            format!("hgemm_17_w{bn}_{}_{}", elem.suffix(), transposes(g)),
        ),
    };
    // elements of k in one 128-byte slice row
    let bk = 128 / elem.bytes();
    let (tiles_n, tiles_m) = (g.n.div_ceil(bn), g.m.div_ceil(WGMMA_BM));
    let (k_split, splits) = super::matmul::k_ranges_aligned(g.k, plan.splits, bk);
    check_limits(&name, g, splits, WGMMA_BM)?;
    let (oa, ob) = wgmma_operands(elem, g, a, b);
    // K-major boxes are one 128-byte row of k deep; M/N-major ones (16-bit only) 64 wide
    let bk32 = bk as u32;
    let map_a = encode_swizzled(&oa, bk32, if g.trans_a { 64 } else { 128 })?;
    let map_b = encode_swizzled(&ob, bk32, if g.trans_b { bn as u32 } else { 64 })?;
    let (m, n, k) = (g.m as i32, g.n as i32, g.k as i32);
    let bias = epi.bias.unwrap_or(DevPtr::NULL);
    let act = epi.act.code();
    let (a_batched, b_batched) = ((oa.batch_stride != 0) as i32, (ob.batch_stride != 0) as i32);
    let plan = HgemmPlan { splits, ..plan };
    if let Some(blocks) = wgmma_blocks(dev, elem, g, c, epi, plan, tiles_n * tiles_m * g.batch) {
        // C leaves in boxes of one 128-byte row × 64 rows (one consumer's rows)
        let map_c = encode_swizzled(&wgmma_output(elem, g, c), bk32, 64)?;
        let name = match elem {
            Elem::F32 => format!("sgemm_18p_tf32_w{bn}_{}", transposes(g)),
            _ => format!("hgemm_17p_w{bn}_{}_{}", elem.suffix(), transposes(g)),
        };
        let f = dev.function(module, &name)?;
        let cfg = LaunchConfig::new(Dim3::x(blocks as u32), Dim3::x(384))
            .with_shared_mem(WGMMA_PERSISTENT_SMEM);
        let nb = g.batch as i32;
        let args: [&dyn KernelArg; 11] = [
            &map_a, &map_b, &map_c, &m, &n, &k, &nb, &bias, &act, &a_batched, &b_batched,
        ];
        // SAFETY: matches WGMMA_PERSISTENT_ARGS in wgmma.cuh; the tensor maps describe A, B and
        // C as the caller's buffers hold them (A and B checked by wgmma_fits, C by
        // wgmma_blocks: batch × m × n elements of `elem`), bias n of them.
        return unsafe { dev.launch(&f, cfg, &args) };
    }
    let f = dev.function(module, &name)?;
    let cfg = LaunchConfig::new(
        Dim3::xyz(tiles_n as u32, tiles_m as u32, (g.batch * splits) as u32),
        Dim3::x(384),
    )
    .with_shared_mem(WGMMA_SMEM);
    let sc = (g.m * g.n) as i64;
    let z = epi.pre_act.unwrap_or(DevPtr::NULL);
    let work = if splits > 1 {
        Some(dev.alloc(splits * g.batch * g.m * g.n * 4)?)
    } else {
        None
    };
    let wp = work.as_ref().map_or(DevPtr::NULL, |w| w.ptr());
    let ks = if splits > 1 { k_split as i32 } else { 0 };
    let args: [&dyn KernelArg; 14] = [
        &map_a, &map_b, &c, &m, &n, &k, &sc, &bias, &act, &z, &wp, &ks, &a_batched, &b_batched,
    ];
    // SAFETY: matches WGMMA_ARGS in wgmma.cuh; the tensor maps describe A and B as the caller's
    // buffers hold them (checked by wgmma_fits), C and Z hold batch × m × n elements of `elem`,
    // bias n of them, and with k_split > 0 the workspace splits × batch × m × n floats (the
    // kernel then writes only the workspace).
    unsafe { dev.launch(&f, cfg, &args)? };
    match splits {
        1 => Ok(()),
        _ => reduce_splits(dev, elem, wp, c, splits, g, epi),
    }
}

/// `g` with both operands K-major, as step 18's kernel reads them: A as m × k, B as n × k (an
/// operand stored otherwise is transposed into a packed workspace first).
fn kmajor(g: &Gemm) -> Gemm {
    Gemm {
        trans_a: false,
        trans_b: true,
        stride_a: if g.trans_a && g.stride_a != 0 {
            g.m * g.k
        } else {
            g.stride_a
        },
        stride_b: if !g.trans_b && g.stride_b != 0 {
            g.n * g.k
        } else {
            g.stride_b
        },
        ..*g
    }
}

/// Whether [`tf32_wgmma`] runs `g` on step 18's Hopper kernel (else step 12 runs it): compute
/// capability 9.0, K > 0 and a multiple of 4, and TMA-addressable operands (16-byte aligned
/// base pointers and batch strides; a transposed operand's workspace always is).
pub fn tf32_wgmma_fits(dev: &CudaDevice, g: &Gemm, a: DevPtr, b: DevPtr) -> bool {
    // allocations are 256-byte aligned: a workspace passes the alignment checks
    const WORKSPACE: DevPtr = DevPtr(0);
    let pa = if g.trans_a { WORKSPACE } else { a };
    let pb = if g.trans_b { b } else { WORKSPACE };
    wgmma_fits(dev, Elem::F32, &kmajor(g), pa, pb)
}

/// SGEMM step 18: `C = act(op(A)·op(B) + bias)` on f32 operands read as TF32 by step 17's
/// Hopper kernel. wgmma reads TF32 operands K-major only, so an A stored k × m or a B stored
/// k × n is first transposed into a workspace (once for a broadcast operand). Where the Hopper
/// kernel cannot run ([`tf32_wgmma_fits`]) or the workspace cannot be had, step 12 computes
/// the product, also in TF32.
pub fn tf32_wgmma(
    dev: &CudaDevice,
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
    epi: &Epilogue,
) -> Result<()> {
    use super::matmul::{sgemm_with_tile, transposed_workspace, SgemmKernel};
    let step12 = || sgemm_with_tile(dev, &SgemmKernel::Tf32.tile(g), g, a, b, c, epi);
    if g.batch == 0 || g.m == 0 || g.n == 0 {
        return Ok(());
    }
    if !tf32_wgmma_fits(dev, g, a, b) {
        return step12();
    }
    // an operand stored k × rows (per batch) copied as rows × k
    let wa = match g.trans_a {
        true => match transposed_workspace(dev, a, g.k, g.m, g.stride_a, g.batch)? {
            None => return step12(),
            w => w,
        },
        false => None,
    };
    let wb = match g.trans_b {
        false => match transposed_workspace(dev, b, g.k, g.n, g.stride_b, g.batch)? {
            None => return step12(),
            w => w,
        },
        true => None,
    };
    let pa = wa.as_ref().map_or(a, |w| w.ptr());
    let pb = wb.as_ref().map_or(b, |w| w.ptr());
    let km = kmajor(g);
    let plan = hgemm_plan(dev.limits().sm_count as usize, HgemmKernel::Wgmma, &km);
    wgmma(dev, Elem::F32, &km, pa, pb, c, epi, plan)
}

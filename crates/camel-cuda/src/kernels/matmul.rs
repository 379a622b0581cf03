//! Launchers for the SGEMM ladder in `kernels/matmul/`. Every step computes, for each batch,
//! `C = act(op(A)·op(B) + bias)` with `C` row-major `m × n`; see `kernels/matmul/common_gemm.cuh`.
//! Steps 7, 10 and 11 are templates whose tile shapes come from the autotuner
//! (`cargo xtask gemm-search`, then `gemm_tune` on the GPU; winners in [`tuned`]); step 13 is
//! a `cp.async` pipeline: a generic 128×256 kernel, interior kernels for whole-tile products
//! ([`ASYNC_TN`] after a re-layout, [`ASYNC_NN`]), whole-K kernels for small outputs with a
//! long K ([`WHOLE_K`]) and small-tile kernels for split-K.

use crate::{
    CudaDevice, DevPtr, DeviceLimits, Dim3, Error, KernelArg, KernelLimits, LaunchConfig, Result,
};

#[path = "matmul_tuned.rs"]
pub mod tuned;

/// A step of the SGEMM ladder, selectable at run time for tests and benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SgemmKernel {
    /// 1: one thread per output, threads walk rows (uncoalesced).
    Naive,
    /// 2: threads walk columns (coalesced).
    Coalesced,
    /// 3: 32×32 shared-memory tiles.
    SmemTiling,
    /// 4: each thread computes 8 outputs of a column (1-D block tiling).
    BlockTiling1d,
    /// 5: each thread computes an 8×8 block (2-D block tiling).
    BlockTiling2d,
    /// 6: float4 global loads, A transposed in shared memory, float4 fragments.
    Vectorized,
    /// 7–9: step 6's template with autotuned BM/BN/BK/TM/TN per shape.
    Autotuned,
    /// 10: warp tiling (autotuned tile shapes).
    Warptiling,
    /// 11: warp tiling with double-buffered shared memory (autotuned tile shapes).
    DoubleBuffering,
    /// 13: a 3-stage `cp.async` pipeline with 128×256 tiles (one block per SM). Large
    /// whole-tile products run its interior kernels instead ([`relayout_fits`],
    /// [`async_nn_choice`]); for outputs with fewer than [`ASYNC_MIN_BLOCKS`] such tiles it
    /// launches its small-tile kernels or step 11's tuned tile (too few blocks to fill the
    /// GPU); [`SgemmKernel::async_tile`] forces the 128×256 kernel.
    AsyncPipeline,
    /// 12 (opt-in): TF32 tensor cores through `mma.sync`; inputs are rounded to TF32
    /// (10-bit mantissa), so results differ from FP32 by up to ~1e-3 relative.
    Tf32,
    /// 18 (opt-in): TF32 on Hopper, HGEMM step 17's TMA and `wgmma` kernel on f32 operands
    /// (compute capability 9.0; step 12 elsewhere, see
    /// [`tf32_wgmma`](super::hgemm::tf32_wgmma)). The tensor cores read the inputs as TF32
    /// without rounding them first, so the error bound is twice step 12's.
    Tf32Wgmma,
}

/// Grid-independent launch shape of one kernel: its symbol, block tile and thread count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileShape {
    /// PTX module (path under `kernels/`, no extension).
    pub module: &'static str,
    /// `extern "C"` kernel name.
    pub kernel: &'static str,
    /// Rows of C per block.
    pub bm: u32,
    /// Columns of C per block.
    pub bn: u32,
    /// Threads per block (1-D blocks, except steps 1–3 which use 32×32).
    pub threads: u32,
    /// Whether the kernel can split K (the templated steps 7–11).
    pub split_k: bool,
    /// Dynamic shared memory per block, in bytes (0: the kernel's memory is static).
    pub smem: u32,
}

impl SgemmKernel {
    /// Every FP32 step, in ladder order (the opt-in TF32 step is [`SgemmKernel::Tf32`]).
    pub const ALL: [SgemmKernel; 10] = [
        SgemmKernel::Naive,
        SgemmKernel::Coalesced,
        SgemmKernel::SmemTiling,
        SgemmKernel::BlockTiling1d,
        SgemmKernel::BlockTiling2d,
        SgemmKernel::Vectorized,
        SgemmKernel::Autotuned,
        SgemmKernel::Warptiling,
        SgemmKernel::DoubleBuffering,
        SgemmKernel::AsyncPipeline,
    ];

    /// The opt-in TF32 steps, in ladder order.
    pub const TF32: [SgemmKernel; 2] = [SgemmKernel::Tf32, SgemmKernel::Tf32Wgmma];

    /// The best FP32 step (the library default for `matmul` and `Linear`).
    pub const BEST: SgemmKernel = SgemmKernel::AsyncPipeline;

    /// Short name, as accepted by `CAMEL_SGEMM` and printed by the benchmarks.
    pub fn name(&self) -> &'static str {
        match self {
            SgemmKernel::Naive => "naive",
            SgemmKernel::Coalesced => "coalesced",
            SgemmKernel::SmemTiling => "smem",
            SgemmKernel::BlockTiling1d => "blocktile1d",
            SgemmKernel::BlockTiling2d => "blocktile2d",
            SgemmKernel::Vectorized => "vectorized",
            SgemmKernel::Autotuned => "autotuned",
            SgemmKernel::Warptiling => "warptiling",
            SgemmKernel::DoubleBuffering => "doublebuffer",
            SgemmKernel::AsyncPipeline => "async",
            SgemmKernel::Tf32 => "tf32",
            SgemmKernel::Tf32Wgmma => "tf32_wgmma",
        }
    }

    /// Ladder step number as in `kernels/matmul/NN_*.cu` ("07" stands for steps 7–9).
    pub fn step(&self) -> &'static str {
        match self {
            SgemmKernel::Naive => "01",
            SgemmKernel::Coalesced => "02",
            SgemmKernel::SmemTiling => "03",
            SgemmKernel::BlockTiling1d => "04",
            SgemmKernel::BlockTiling2d => "05",
            SgemmKernel::Vectorized => "06",
            SgemmKernel::Autotuned => "07",
            SgemmKernel::Warptiling => "10",
            SgemmKernel::DoubleBuffering => "11",
            SgemmKernel::AsyncPipeline => "13",
            SgemmKernel::Tf32 => "12",
            SgemmKernel::Tf32Wgmma => "18",
        }
    }

    /// The step called `name` (see [`SgemmKernel::name`]).
    pub fn from_name(name: &str) -> Option<SgemmKernel> {
        SgemmKernel::ALL
            .iter()
            .chain(&SgemmKernel::TF32)
            .find(|k| k.name() == name)
            .copied()
    }

    /// Whether the step reads its inputs as TF32 (and so needs a looser error bound).
    pub fn is_tf32(&self) -> bool {
        SgemmKernel::TF32.contains(self)
    }

    /// The kernel and tile shape this step launches for `g` (for step 18, whose Hopper kernel
    /// has no such shape, the tile of step 12, which runs where the Hopper kernel cannot).
    pub fn tile(&self, g: &Gemm) -> TileShape {
        let fixed = |module: &'static str, kernel: &'static str, bm, bn, threads| TileShape {
            module,
            kernel,
            bm,
            bn,
            threads,
            split_k: false,
            smem: 0,
        };
        match self {
            SgemmKernel::Naive => fixed("matmul/01_naive", "sgemm_01_naive", 32, 32, 1024),
            SgemmKernel::Coalesced => {
                fixed("matmul/02_coalesced", "sgemm_02_coalesced", 32, 32, 1024)
            }
            SgemmKernel::SmemTiling => fixed(
                "matmul/03_smem_tiling",
                "sgemm_03_smem_tiling",
                32,
                32,
                1024,
            ),
            SgemmKernel::BlockTiling1d => fixed(
                "matmul/04_blocktiling_1d",
                "sgemm_04_blocktiling_1d",
                64,
                64,
                512,
            ),
            SgemmKernel::BlockTiling2d => fixed(
                "matmul/05_blocktiling_2d",
                "sgemm_05_blocktiling_2d",
                128,
                128,
                256,
            ),
            SgemmKernel::Vectorized => {
                fixed("matmul/06_vectorized", "sgemm_06_vectorized", 128, 128, 256)
            }
            SgemmKernel::Autotuned => tuned_tile("matmul/07_autotuned", tuned::TUNED_07, g),
            SgemmKernel::Warptiling => tuned_tile("matmul/10_warptiling", tuned::TUNED_10, g),
            SgemmKernel::DoubleBuffering => {
                tuned_tile("matmul/11_double_buffering", tuned::TUNED_11, g)
            }
            SgemmKernel::AsyncPipeline => {
                if async_suits(g) {
                    Self::async_tile()
                } else if let Some(t) = async_small(g) {
                    t
                } else {
                    SgemmKernel::DoubleBuffering.tile(g)
                }
            }
            SgemmKernel::Tf32 | SgemmKernel::Tf32Wgmma => {
                fixed("matmul/12_tf32_mma", "sgemm_12_tf32_mma", 128, 128, 256)
            }
        }
    }
}

/// Fewest 128×256 output tiles for which step 13 launches its own kernel: about one wave of
/// one block per SM. Below it the tuned smaller tiles of step 11 (with split-K) keep more SMs
/// busy (docs/kernels/matmul.md).
pub const ASYNC_MIN_BLOCKS: usize = 120;

/// Whether step 13's 128×256 kernel suits `g` (else step 11's tuned tile runs): at least
/// [`ASYNC_MIN_BLOCKS`] tiles, K ≥ 256 (its 3-stage pipeline needs slices to overlap) and tiles
/// at least 90 % filled (padding is work thrown away); elsewhere step 11 measured faster
/// (docs/kernels/matmul.md).
pub fn async_suits(g: &Gemm) -> bool {
    let (bm, bn) = (128, 256);
    let (tm, tn) = (g.m.div_ceil(bm), g.n.div_ceil(bn));
    let filled = (g.m * g.n) as f64 / ((tm * bm) * (tn * bn)) as f64;
    tm * tn * g.batch >= ASYNC_MIN_BLOCKS && g.k >= 256 && filled >= 0.9
}

/// Step 13's small-tile kernels (64×64×16 and 64×128×16, 256 threads).
pub const ASYNC_SMALL: [(&str, u32, u32); 2] = [
    ("sgemm_13_async_64x64x16", 64, 64),
    ("sgemm_13_async_64x128x16", 64, 128),
];

/// Where step 13's 128×256 tile does not suit, a small output with a long K (fewer than
/// [`ASYNC_MIN_BLOCKS`] 64×64 tiles, K ≥ 256: the shapes that split K) gets step 13's 64×64×16
/// kernel, whose four stages put a whole 64-long K-split in flight at once; where K is not
/// split, step 11 keeps the product, as it measured faster there (docs/kernels/matmul.md).
/// [`Experiments::async_small`](crate::config::Experiments::async_small) `Some(None)` keeps
/// step 11 everywhere, `Some(Some(kernel))` (one of [`ASYNC_SMALL`]) forces that kernel on every
/// shape the big tile does not suit (for measuring).
fn async_small(g: &Gemm) -> Option<TileShape> {
    let tile = |i: usize| {
        let (name, bm, bn) = ASYNC_SMALL[i];
        SgemmKernel::async_small_tile(name, bm, bn)
    };
    let forced = crate::config::with_experiments(|e| {
        e.async_small.as_ref().map(|v| {
            ASYNC_SMALL
                .iter()
                .position(|(n, _, _)| Some(*n) == v.as_deref())
        })
    });
    match forced {
        Some(i) => i.map(tile),
        None => {
            let tiles = g.m.div_ceil(64) * g.n.div_ceil(64) * g.batch;
            (tiles < ASYNC_MIN_BLOCKS && g.k >= 256).then(|| tile(0))
        }
    }
}

/// A kernel of step 13's file (256 threads a block).
const fn step13_tile(
    kernel: &'static str,
    bm: u32,
    bn: u32,
    split_k: bool,
    smem: u32,
) -> TileShape {
    TileShape {
        module: "matmul/13_async_pipeline",
        kernel,
        bm,
        bn,
        threads: 256,
        split_k,
        smem,
    }
}

impl SgemmKernel {
    /// One of step 13's small-tile kernels ([`ASYNC_SMALL`]).
    pub fn async_small_tile(kernel: &'static str, bm: u32, bn: u32) -> TileShape {
        step13_tile(kernel, bm, bn, true, 0)
    }

    /// Step 13's own kernel, whatever the shape (for tests and benchmarks of the kernel itself).
    pub fn async_tile() -> TileShape {
        step13_tile("sgemm_13_async_128x256x8", 128, 256, true, 0)
    }

    /// One of step 13's interior kernels ([`ASYNC_TN`], [`ASYNC_NN`]; dynamic shared memory):
    /// only for products that pass [`interior_fits`]; [`sgemm_split_k`] refuses it elsewhere.
    pub fn interior_tile(k: &Interior) -> TileShape {
        step13_tile(k.kernel, k.bm, k.bn, true, k.smem_bytes())
    }
}

/// One of step 13's interior kernels: whole tiles only, no bounds tests, B (stored k × n) copied
/// 16 bytes at a time, C stored with float4 (see [`interior_fits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interior {
    /// `extern "C"` kernel name in `matmul/13_async_pipeline`.
    pub kernel: &'static str,
    /// Rows of C per block.
    pub bm: u32,
    /// Columns of C per block.
    pub bn: u32,
    /// K-slice per pipeline stage.
    pub bk: u32,
    /// Pipeline stages in shared memory.
    pub stages: u32,
    /// Aᵀ·B (A stored k × m, copied 16 bytes at a time); else A·B with A read in place by 4-byte
    /// transposing copies.
    pub trans_a: bool,
}

impl Interior {
    /// Dynamic shared memory: `stages` slices of A (bk × (bm + 4)) and of B (bk × bn), as
    /// `async_smem_floats` in the kernel file.
    pub const fn smem_bytes(&self) -> u32 {
        self.stages * self.bk * ((self.bm + 4) + self.bn) * 4
    }
}

const fn interior(
    kernel: &'static str,
    (bm, bn, bk): (u32, u32, u32),
    stages: u32,
    trans_a: bool,
) -> Interior {
    Interior {
        kernel,
        bm,
        bn,
        bk,
        stages,
        trans_a,
    }
}

/// Step 13's interior Aᵀ·B kernels, the re-layout's (both operands copied 16 bytes at a time).
/// The first, 128×128×16 with two blocks per SM, is the default: it measured fastest of the
/// three, the transpose included (docs/kernels/matmul.md); the others stay selectable for measuring.
pub const ASYNC_TN: [Interior; 3] = [
    interior("sgemm_13_async_128x128x16_tn", (128, 128, 16), 3, true),
    interior("sgemm_13_async_128x256x16_tn", (128, 256, 16), 3, true),
    interior("sgemm_13_async_128x256x32_tn", (128, 256, 32), 2, true),
];

/// Step 13's interior A·B kernels with A read in place, for whole-tile products whose A is not
/// worth transposing (the re-layout's reuse rule), in order of preference: 128×192 (one block
/// per SM) where N % 192 = 0, else 64×256 (two). Both measured faster than step 11's tuned
/// tiles on such shapes (docs/kernels/matmul.md).
pub const ASYNC_NN: [Interior; 2] = [
    interior("sgemm_13_async_128x192x16_nn", (128, 192, 16), 4, false),
    interior("sgemm_13_async_64x256x16_nn", (64, 256, 16), 3, false),
];

/// Which of [`ASYNC_TN`] the re-layout runs: the first, unless
/// [`Experiments::async_tn`](crate::config::Experiments::async_tn) names another by its tile
/// (`128x256x16`, `128x256x32`; for measuring) and `g` fits that one.
fn async_tn_choice(g: &Gemm) -> &'static Interior {
    let forced = crate::config::with_experiments(|e| {
        let v = e.async_tn.as_deref()?;
        ASYNC_TN.iter().position(|t| t.kernel.contains(v))
    });
    match forced.map(|i| &ASYNC_TN[i]) {
        Some(t) if whole_tiles(g, t) => t,
        _ => &ASYNC_TN[0],
    }
}

/// Whether `g`'s output and K are whole tiles and slices of `t`.
fn whole_tiles(g: &Gemm, t: &Interior) -> bool {
    g.m % t.bm as usize == 0 && g.n % t.bn as usize == 0 && g.k % t.bk as usize == 0
}

/// The [`ASYNC_NN`] kernel step 13 runs for `g` where the re-layout does not
/// ([`relayout_fits`] is checked first): the first that fits `g` (A·B, whole tiles, aligned)
/// with at least [`ASYNC_MIN_BLOCKS`] tiles.
/// [`Experiments::async_nn`](crate::config::Experiments::async_nn) off keeps them out (for
/// measuring).
pub fn async_nn_choice(
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
    epi: &Epilogue,
) -> Option<&'static Interior> {
    if !crate::config::with_experiments(|e| e.async_nn) {
        return None;
    }
    ASYNC_NN.iter().find(|t| {
        let tiles = g.m / t.bm as usize * (g.n / t.bn as usize) * g.batch;
        tiles >= ASYNC_MIN_BLOCKS && interior_fits(g, t, a, b, c, epi).is_ok()
    })
}

/// Step 13's whole-K kernels for small outputs with a long K, as (name, BM, BN, K-groups): each
/// block copies all of K for a thin BM×BN tile into shared memory at once, instead of splitting
/// K: no partial sums to reduce, and more blocks than a split of 64×64 tiles gives such shapes
/// (measured against split-K in docs/kernels/matmul.md).
pub const WHOLE_K: [(&str, u32, u32, u32); 2] = [
    ("sgemm_13_wholek_8x16", 8, 16, 8),
    ("sgemm_13_wholek_16x32", 16, 32, 4),
];

/// Dynamic shared memory of [`WHOLE_K`] kernel `i` for `g`: A's BM rows and B's BN columns of
/// all of K (rows padded by 4 floats where k is contiguous), and at least the groups' sums.
pub fn wholek_smem_bytes(i: usize, g: &Gemm) -> usize {
    let (_, bm, bn, kg) = WHOLE_K[i];
    let (bm, bn, kp) = (bm as usize, bn as usize, g.k + 4);
    let b = if g.trans_b { bn * kp } else { g.k * bn };
    ((bm * kp + b) * 4).max(kg as usize * bm * bn * 4)
}

/// The preconditions of [`WHOLE_K`] kernel `i`, which has no bounds tests: A stored m × k,
/// whole tiles, K % 4 = 0, 16-byte aligned A and B with batch strides % 4 = 0, and its shared
/// memory within `max_smem` bytes (the device's opt-in limit).
pub fn wholek_fits(
    g: &Gemm,
    i: usize,
    a: DevPtr,
    b: DevPtr,
    max_smem: usize,
) -> std::result::Result<(), String> {
    let (_, bm, bn, _) = WHOLE_K[i];
    if g.trans_a {
        return Err("A must be stored m × k (trans_a is not supported)".to_string());
    }
    if g.m % bm as usize != 0 || g.n % bn as usize != 0 || g.k % 4 != 0 || g.k == 0 {
        return Err(format!(
            "m={} n={} k={}: needs m % {bm} = n % {bn} = k % 4 = 0 and k > 0",
            g.m, g.n, g.k
        ));
    }
    if a.0 % 16 != 0 || b.0 % 16 != 0 || g.stride_a % 4 != 0 || g.stride_b % 4 != 0 {
        return Err(format!(
            "A and B must be 16-byte aligned with batch strides % 4 = 0 (A {:#x} stride {}, \
             B {:#x} stride {})",
            a.0, g.stride_a, b.0, g.stride_b
        ));
    }
    let smem = wholek_smem_bytes(i, g);
    if smem > max_smem {
        return Err(format!(
            "k={}: {smem} bytes of shared memory, more than the device's {max_smem}",
            g.k
        ));
    }
    Ok(())
}

impl SgemmKernel {
    /// [`WHOLE_K`] kernel `i` for `g` (its shared memory depends on K); only where
    /// [`wholek_fits`], which [`sgemm_split_k`] checks. It cannot split K.
    pub fn wholek_tile(i: usize, g: &Gemm) -> TileShape {
        let (kernel, bm, bn, _) = WHOLE_K[i];
        step13_tile(kernel, bm, bn, false, wholek_smem_bytes(i, g) as u32)
    }
}

/// The [`WHOLE_K`] kernel step 13 runs for `g`, if any: only where it would otherwise split K
/// (fewer than [`ASYNC_MIN_BLOCKS`] 64×64 tiles, K ≥ 256), 16×32 tiles from 100 blocks, else
/// 8×16 from 64 (fewer blocks would leave most SMs idle: split-K keeps them), where the kernel
/// fits ([`wholek_fits`]). [`Experiments::async_whole_k`](crate::config::Experiments::async_whole_k)
/// off keeps them out (for measuring).
pub fn async_wholek_choice(g: &Gemm, a: DevPtr, b: DevPtr, max_smem: usize) -> Option<usize> {
    if !crate::config::with_experiments(|e| e.async_whole_k) {
        return None;
    }
    let tiles64 = g.m.div_ceil(64) * g.n.div_ceil(64) * g.batch;
    if tiles64 >= ASYNC_MIN_BLOCKS || g.k < 256 {
        return None;
    }
    [(1, 100), (0, 64)].into_iter().find_map(|(i, min_blocks)| {
        let (_, bm, bn, _) = WHOLE_K[i];
        let blocks = g.m / bm as usize * (g.n / bn as usize) * g.batch;
        (blocks >= min_blocks && wholek_fits(g, i, a, b, max_smem).is_ok()).then_some(i)
    })
}

/// Shortest other dimension for which transposing an operand pays: the transpose moves 8 bytes
/// per element of the operand, the product reuses each element n (or m) times. From this reuse
/// on the transpose costs less than the interior kernel saves; below it the [`ASYNC_NN`]
/// kernels, which read A in place, are faster (docs/kernels/matmul.md).
const RELAYOUT_MIN_REUSE: usize = 1024;

/// Whether a product runs as step 13's re-layout
/// ([`Experiments::async_relayout`](crate::config::Experiments::async_relayout) off disables it,
/// for measuring): every operand stored with k contiguous (A of A·B, B of A·Bᵀ) is transposed into
/// a workspace and an [`ASYNC_TN`] kernel runs Aᵀ·B. It needs a large product
/// ([`async_suits`]), whole tiles of that kernel, 16-byte aligned operands that are used in
/// place, C and the saved pre-activation, and enough reuse to pay for each transpose.
pub fn relayout_fits(g: &Gemm, a: DevPtr, b: DevPtr, c: DevPtr, epi: &Epilogue) -> bool {
    if !crate::config::with_experiments(|e| e.async_relayout) {
        return false;
    }
    let al = |p: DevPtr| p.0 % 16 == 0;
    async_suits(g)
        && whole_tiles(g, async_tn_choice(g))
        && (g.trans_a || g.n >= RELAYOUT_MIN_REUSE)
        && (!g.trans_b || g.m >= RELAYOUT_MIN_REUSE)
        && (!g.trans_a || (al(a) && g.stride_a % 4 == 0))
        && (g.trans_b || (al(b) && g.stride_b % 4 == 0))
        && al(c)
        && epi.pre_act.map_or(true, al)
}

/// The preconditions of an interior kernel `t`, which has no bounds tests: its layout (Aᵀ·B
/// or A·B), whole tiles and K-slices, and 16-byte aligned B (and A where `t` copies it 16
/// bytes at a time), C and pre-activation, with batch strides that keep them aligned
/// (K-splits are multiples of 32, so of `t.bk`).
pub fn interior_fits(
    g: &Gemm,
    t: &Interior,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
    epi: &Epilogue,
) -> std::result::Result<(), String> {
    let al = |p: DevPtr| p.0 % 16 == 0;
    if g.trans_a != t.trans_a || g.trans_b {
        return Err(format!(
            "only {} (trans_a={}, not trans_b); got trans_a={} trans_b={}",
            if t.trans_a { "Aᵀ·B" } else { "A·B" },
            t.trans_a,
            g.trans_a,
            g.trans_b
        ));
    }
    if !whole_tiles(g, t) {
        return Err(format!(
            "m={} n={} k={}: needs m % {} = n % {} = k % {} = 0",
            g.m, g.n, g.k, t.bm, t.bn, t.bk
        ));
    }
    let aligned = (!t.trans_a || (al(a) && g.stride_a % 4 == 0))
        && al(b)
        && al(c)
        && epi.pre_act.map_or(true, al)
        && g.stride_b % 4 == 0;
    if !aligned {
        return Err(format!(
            "B, C, the pre-activation{} must be 16-byte aligned with batch strides % 4 = 0 \
             (A {:#x} stride {}, B {:#x} stride {}, C {:#x})",
            if t.trans_a { " and A" } else { "" },
            a.0,
            g.stride_a,
            b.0,
            g.stride_b,
            c.0
        ));
    }
    Ok(())
}

/// Transposes `batch` row-major `rows × cols` matrices (the i-th at `x + i·stride_x` floats)
/// into `y`, packed `cols × rows` each.
#[allow(clippy::too_many_arguments)]
pub fn transpose_f32(
    dev: &CudaDevice,
    x: DevPtr,
    y: DevPtr,
    rows: usize,
    cols: usize,
    stride_x: usize,
    batch: usize,
) -> Result<()> {
    let name = "sgemm_13_transpose";
    if rows == 0 || cols == 0 || batch == 0 {
        return Ok(());
    }
    if rows > i32::MAX as usize || cols > i32::MAX as usize || batch > 65_535 {
        return Err(Error::LaunchConfig {
            kernel: name.to_string(),
            msg: format!("{batch} matrices of {rows}×{cols} exceed i32 sizes or 65535 batches"),
        });
    }
    let grid = Dim3::xyz(
        cols.div_ceil(32) as u32,
        rows.div_ceil(32) as u32,
        batch as u32,
    );
    let cfg = LaunchConfig::new(grid, Dim3::xyz(32, 8, 1));
    let (r, c, s) = (rows as i32, cols as i32, stride_x as i64);
    // SAFETY: matches `sgemm_13_transpose(const float*, float*, int, int, long long)`; x holds
    // `batch` matrices at stride `stride_x`, y holds batch·rows·cols floats.
    unsafe {
        super::launch(
            dev,
            "matmul/13_async_pipeline",
            name,
            cfg,
            &[&x, &y, &r, &c, &s],
        )
    }
}

/// The `batch` row-major `rows × cols` matrices at `x` (`stride` floats apart; 0: one matrix,
/// copied once) transposed into a new packed workspace, or `None` where the device has no memory
/// for it (the caller then runs a kernel that needs none).
pub(crate) fn transposed_workspace(
    dev: &CudaDevice,
    x: DevPtr,
    rows: usize,
    cols: usize,
    stride: usize,
    batch: usize,
) -> Result<Option<crate::Buffer>> {
    let count = if stride == 0 { 1 } else { batch };
    let w = match dev.alloc(count * rows * cols * 4) {
        Err(Error::OutOfMemory { .. }) => return Ok(None),
        r => r?,
    };
    transpose_f32(dev, x, w.ptr(), rows, cols, stride, count)?;
    Ok(Some(w))
}

/// Step 13's re-layout path (see [`relayout_fits`], which the caller has checked): transposes
/// the k-contiguous operands into workspaces, then runs an [`ASYNC_TN`] kernel on Aᵀ·B.
fn sgemm_relayout(
    dev: &CudaDevice,
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
    epi: &Epilogue,
) -> Result<()> {
    // The k-contiguous operand `x` (`rows × k` per batch, `stride` apart) transposed into a
    // workspace: its pointer and batch stride, and the workspace (which goes back to the
    // stream-ordered cache when dropped). A broadcast operand (stride 0) is transposed once and
    // stays broadcast. None where the workspace cannot be had: the generic kernel then runs
    // instead (it needs none).
    let transposed = |x: DevPtr, rows: usize, stride: usize| -> Result<Option<_>> {
        let Some(w) = transposed_workspace(dev, x, rows, g.k, stride, g.batch)? else {
            return Ok(None);
        };
        let s = if stride == 0 { 0 } else { rows * g.k };
        Ok(Some((w.ptr(), s, w)))
    };
    let generic = || sgemm_with_tile(dev, &SgemmKernel::async_tile(), g, a, b, c, epi);
    let (at, sa, _wa) = if g.trans_a {
        (a, g.stride_a, None)
    } else {
        match transposed(a, g.m, g.stride_a)? {
            Some((p, s, w)) => (p, s, Some(w)),
            None => return generic(),
        }
    };
    let (bt, sb, _wb) = if !g.trans_b {
        (b, g.stride_b, None)
    } else {
        match transposed(b, g.n, g.stride_b)? {
            Some((p, s, w)) => (p, s, Some(w)),
            None => return generic(),
        }
    };
    let tn = Gemm {
        trans_a: true,
        trans_b: false,
        stride_a: sa,
        stride_b: sb,
        ..*g
    };
    let tile = SgemmKernel::interior_tile(async_tn_choice(g));
    sgemm_with_tile(dev, &tile, &tn, at, bt, c, epi)
}

/// The winner recorded for the tuned shape nearest to `g` (in log space of m, n, k).
fn tuned_tile(
    module: &'static str,
    table: &[(usize, usize, usize, &'static str)],
    g: &Gemm,
) -> TileShape {
    let d = |a: usize, b: usize| ((a.max(1) as f64).ln() - (b.max(1) as f64).ln()).powi(2);
    let (_, _, _, name) = table
        .iter()
        .min_by(|x, y| {
            let dx = d(x.0, g.m) + d(x.1, g.n) + d(x.2, g.k);
            let dy = d(y.0, g.m) + d(y.1, g.n) + d(y.2, g.k);
            dx.total_cmp(&dy)
        })
        .expect("the tuned table is never empty");
    parse_tile_kernel(module, name).expect("tuned kernel names are well-formed")
}

/// The tile shape encoded in a templated kernel's name: `sgemm_bt_{BM}x{BN}x{BK}_{TM}x{TN}`
/// (block tiling, (BM/TM)·(BN/TN) threads) or `sgemm_{wt|db}_{BM}x{BN}x{BK}_{WM}x{WN}x{WNITER}_{TM}x{TN}_{NT}`
/// (warp tiling, NT threads).
pub fn parse_tile_kernel(module: &'static str, name: &'static str) -> Option<TileShape> {
    // parsed on every launch of a tuned step, so without allocating
    fn nums<const N: usize>(s: &str) -> Option<[u32; N]> {
        let mut out = [0u32; N];
        let mut it = s.split('x');
        for v in out.iter_mut() {
            *v = it.next()?.parse().ok()?;
        }
        it.next().is_none().then_some(out)
    }
    let mut parts = name.strip_prefix("sgemm_")?.split('_');
    let (kind, blk) = (parts.next()?, parts.next()?);
    let [bm, bn, _bk] = nums::<3>(blk)?;
    let threads = match kind {
        "bt" => {
            let [tm, tn] = nums::<2>(parts.next()?)?;
            if tm == 0 || tn == 0 {
                return None;
            }
            (bm / tm) * (bn / tn)
        }
        "wt" | "db" => {
            nums::<3>(parts.next()?)?;
            nums::<2>(parts.next()?)?;
            parts.next()?.parse().ok()?
        }
        _ => return None,
    };
    if parts.next().is_some() {
        return None;
    }
    Some(TileShape {
        module,
        kernel: name,
        bm,
        bn,
        threads,
        split_k: true,
        smem: 0,
    })
}

/// Shape and layout of one (batched) SGEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gemm {
    /// Number of matrices.
    pub batch: usize,
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// Inner dimension.
    pub k: usize,
    /// A is stored k × m.
    pub trans_a: bool,
    /// B is stored n × k.
    pub trans_b: bool,
    /// Elements between consecutive A matrices (0 broadcasts A over the batch).
    pub stride_a: usize,
    /// Elements between consecutive B matrices.
    pub stride_b: usize,
}

/// The activation of a fused epilogue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activation {
    /// None.
    #[default]
    Identity,
    /// max(x, 0).
    Relu,
    /// GELU, tanh approximation.
    Gelu,
}

impl Activation {
    /// The kernels' `act` argument (common_gemm.cuh): 0 none, 1 ReLU, 2 GELU.
    pub(crate) fn code(self) -> i32 {
        match self {
            Activation::Identity => 0,
            Activation::Relu => 1,
            Activation::Gelu => 2,
        }
    }
}

/// Work fused into the GEMM's store: `C = act(A·B + bias)`, optionally saving `A·B + bias`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Epilogue {
    /// `n` floats added to every row of every C (broadcast over rows and the batch).
    pub bias: Option<DevPtr>,
    /// Applied after the bias.
    pub act: Activation,
    /// Where to store the pre-activation values (same layout as C), for a backward pass.
    pub pre_act: Option<DevPtr>,
}

/// Launch `kernel` for `g`: `c` receives `batch` row-major `m × n` matrices.
pub fn sgemm(
    dev: &CudaDevice,
    kernel: SgemmKernel,
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
) -> Result<()> {
    sgemm_epilogue(dev, kernel, g, a, b, c, &Epilogue::default())
}

/// [`sgemm`] with a fused epilogue (bias, activation, saved pre-activation).
pub fn sgemm_epilogue(
    dev: &CudaDevice,
    kernel: SgemmKernel,
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
    epi: &Epilogue,
) -> Result<()> {
    if kernel == SgemmKernel::Tf32Wgmma {
        return super::hgemm::tf32_wgmma(dev, g, a, b, c, epi);
    }
    if kernel == SgemmKernel::AsyncPipeline {
        if relayout_fits(g, a, b, c, epi) {
            return sgemm_relayout(dev, g, a, b, c, epi);
        }
        if let Some(t) = async_nn_choice(g, a, b, c, epi) {
            return sgemm_with_tile(dev, &SgemmKernel::interior_tile(t), g, a, b, c, epi);
        }
        if let Some(t) = transposed_b_choice(g, a, c, epi) {
            return sgemm_transposed_b(dev, t, kernel, g, a, b, c, epi);
        }
        let max_smem = dev.limits().max_shared_per_block_optin as usize;
        if let Some(i) = async_wholek_choice(g, a, b, max_smem) {
            return sgemm_with_tile(dev, &SgemmKernel::wholek_tile(i, g), g, a, b, c, epi);
        }
        if let Some(t) = thin_tn_choice(g, a, b, c, epi) {
            return sgemm_with_tile(dev, &SgemmKernel::interior_tile(t), g, a, b, c, epi);
        }
    }
    sgemm_with_tile(dev, &kernel.tile(g), g, a, b, c, epi)
}

/// `g` with B stored `k × n` instead of `n × k`: the product [`sgemm_transposed_b`] runs once
/// it has copied B that way.
fn untransposed_b(g: &Gemm) -> Gemm {
    Gemm {
        trans_b: false,
        stride_b: if g.stride_b == 0 { 0 } else { g.n * g.k },
        ..*g
    }
}

/// The [`ASYNC_NN`] kernel for `x · wᵀ` (B stored `n × k`, as a linear layer's weight) once B
/// is copied `k × n`, where the re-layout and the NN kernels do not take `g` and the copy pays
/// (B reused at least [`RELAYOUT_MIN_REUSE`] times): a model's thin products (n of a few
/// hundred) fill too little of the re-layout's 128×256 tiles, and the NN kernel on the copy
/// measured faster than step 11's tuned tiles there (docs/kernels/matmul.md). The copy is a
/// fresh, aligned workspace, so only A, C and the pre-activation are checked here.
/// [`Experiments::async_thin`](crate::config::Experiments::async_thin) off keeps it out.
pub fn transposed_b_choice(
    g: &Gemm,
    a: DevPtr,
    c: DevPtr,
    epi: &Epilogue,
) -> Option<&'static Interior> {
    if !crate::config::with_experiments(|e| e.async_thin)
        || g.trans_a
        || !g.trans_b
        || g.m < RELAYOUT_MIN_REUSE
    {
        return None;
    }
    // allocations are 256-byte aligned: the workspace passes the alignment checks
    const WORKSPACE: DevPtr = DevPtr(0);
    let nn = untransposed_b(g);
    ASYNC_NN.iter().find(|t| {
        let tiles = nn.m / t.bm as usize * (nn.n / t.bn as usize) * nn.batch;
        tiles >= ASYNC_MIN_BLOCKS && interior_fits(&nn, t, a, WORKSPACE, c, epi).is_ok()
    })
}

/// `x · wᵀ` as `x · w'` with `w' = wᵀ` copied into a workspace, on the [`ASYNC_NN`] kernel `t`
/// ([`transposed_b_choice`] chose it). Where the workspace cannot be had, `kernel`'s own tile
/// runs instead (it needs none).
#[allow(clippy::too_many_arguments)]
fn sgemm_transposed_b(
    dev: &CudaDevice,
    t: &Interior,
    kernel: SgemmKernel,
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
    epi: &Epilogue,
) -> Result<()> {
    let count = if g.stride_b == 0 { 1 } else { g.batch };
    let w = match dev.alloc(count * g.n * g.k * 4) {
        Err(Error::OutOfMemory { .. }) => {
            return sgemm_with_tile(dev, &kernel.tile(g), g, a, b, c, epi)
        }
        r => r?,
    };
    transpose_f32(dev, b, w.ptr(), g.n, g.k, g.stride_b, count)?;
    let tile = SgemmKernel::interior_tile(t);
    sgemm_with_tile(dev, &tile, &untransposed_b(g), a, w.ptr(), c, epi)
}

/// The TN interior kernel (the first of [`ASYNC_TN`]) for `aᵀ · b` with a small output and a
/// long K (K ≥ 256), as a layer's weight gradient `gᵀ · x`, where the re-layout does not take
/// it: split-K cuts K so that about two blocks run per multiprocessor, and this kernel's
/// 128×128 tiles with 16-byte copies measured faster there than the 64×64 split-K tile or
/// step 11's tuned tiles (docs/kernels/matmul.md).
/// [`Experiments::async_thin`](crate::config::Experiments::async_thin) off keeps it out.
pub fn thin_tn_choice(
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
    epi: &Epilogue,
) -> Option<&'static Interior> {
    let t = &ASYNC_TN[0];
    (crate::config::with_experiments(|e| e.async_thin)
        && g.trans_a
        && !g.trans_b
        && g.k >= 256
        && interior_fits(g, t, a, b, c, epi).is_ok())
    .then_some(t)
}

/// Split-K policy: (shortest K per split, blocks per multiprocessor to aim for). Default
/// (32, 2), the fastest measured with step 13's 64×64 tile (docs/kernels/matmul.md);
/// [`Experiments::splitk`](crate::config::Experiments::splitk) overrides it (for measuring;
/// values below (32, 1) keep the default).
fn split_k_policy() -> (usize, usize) {
    let (a, b) = crate::config::with_experiments(|e| e.splitk);
    if a >= 32 && b >= 1 {
        (a, b)
    } else {
        (32, 2)
    }
}

/// How many K-splits `t` gets for `g` on a device with `sm_count` multiprocessors: when the
/// output's tiles do not fill 90 % of one wave (of one block per multiprocessor) and K ≥ 256, K is
/// cut so that there are about two blocks per multiprocessor, each split keeping at least 32
/// of K (see `split_k_policy`). Short K is left alone: its splits would be too short to pay for
/// the partial sums.
pub fn split_k_factor(sm_count: usize, t: &TileShape, g: &Gemm) -> usize {
    let (min_k, per_sm) = split_k_policy();
    if !t.split_k || g.k < 256 || g.k < 2 * min_k {
        return 1;
    }
    let blocks = g.m.div_ceil(t.bm as usize) * g.n.div_ceil(t.bn as usize) * g.batch;
    if blocks * 10 >= sm_count * 9 {
        return 1; // ≥ 90 % of a wave already (step 13 launches from 120 tiles on 132 SMs)
    }
    (per_sm * sm_count).div_ceil(blocks).min(g.k / min_k).max(1)
}

/// `splits` trimmed so that a split grid of `tiles · splits` blocks does not spill past one
/// wave of `resident` blocks (as many as fit on the device at once): a grid just past it runs a
/// second, nearly empty wave that takes as long as the first. Where at least two splits fit in
/// one wave, the most that fit are taken instead; otherwise `splits` stays.
pub fn whole_wave_splits(splits: usize, tiles: usize, resident: usize) -> usize {
    let fit = resident / tiles.max(1);
    if tiles * splits <= resident || fit < 2 {
        splits
    } else {
        fit
    }
}

/// K cut into about `splits` ranges, each a multiple of 32 long (a whole number of 32-deep
/// slices, so vector loads stay aligned): (range length, number of ranges). (0, 1) when K is not
/// split: one split asked for, K = 0, or K too short for a second range.
pub(crate) fn k_ranges(k: usize, splits: usize) -> (usize, usize) {
    k_ranges_aligned(k, splits, 32)
}

/// [`k_ranges`] with ranges of a multiple of `align`.
pub(crate) fn k_ranges_aligned(k: usize, splits: usize, align: usize) -> (usize, usize) {
    if splits <= 1 || k == 0 {
        return (0, 1);
    }
    let len = k.div_ceil(splits).next_multiple_of(align);
    match k.div_ceil(len) {
        1 => (0, 1),
        n => (len, n),
    }
}

/// Launch one kernel by its tile shape (used by the autotuner on candidates loaded with
/// [`CudaDevice::load_module_image`]); K is split where [`split_k_factor`] says so, into no
/// more splits than one wave of the kernel's resident blocks holds ([`whole_wave_splits`]).
pub fn sgemm_with_tile(
    dev: &CudaDevice,
    t: &TileShape,
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
    epi: &Epilogue,
) -> Result<()> {
    let d = dev.limits();
    let mut splits = split_k_factor(d.sm_count as usize, t, g);
    if splits > 1 {
        let per_sm = dev
            .function(t.module, t.kernel)?
            .limits()
            .blocks_per_sm(d, t.threads, t.smem)
            .min(1536 / t.threads.max(1))
            .min(16);
        let tiles = g.m.div_ceil(t.bm as usize) * g.n.div_ceil(t.bn as usize) * g.batch;
        splits = whole_wave_splits(splits, tiles, per_sm as usize * d.sm_count as usize);
    }
    sgemm_split_k(dev, t, g, a, b, c, epi, splits)
}

/// [`sgemm_with_tile`] with an explicit number of K-splits (1 = none). With more than one,
/// the kernel writes `splits` partial products to a workspace, and they are summed with the
/// epilogue applied: inside the same launch where the kernel has a fused form
/// ([`FUSED_K_REDUCE`]) and the grid fits ([`all_resident`]), else by `splitk_reduce`. Only the
/// templated steps (7–11, 13) can split.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_split_k(
    dev: &CudaDevice,
    t: &TileShape,
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
    epi: &Epilogue,
    splits: usize,
) -> Result<()> {
    sgemm_split_k_reduce(dev, t, g, a, b, c, epi, splits, SplitReduce::Auto)
}

/// How the K-splits' partial products are summed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitReduce {
    /// The fused form where the kernel has one and the grid fits, else the separate kernel.
    Auto,
    /// `sgemm_splitk_reduce`, a second launch.
    Separate,
    /// The kernel's fused form ([`FUSED_K_REDUCE`]), or an error where it cannot run.
    Fused,
}

/// Kernels with a fused K-reduction, as (split kernel, fused form). The fused form sums the
/// partials inside the same launch, each of a tile's S blocks reducing 1/S of it once all have
/// arrived; it saves the reduction's launch at the small products split-K is for.
pub const FUSED_K_REDUCE: [(&str, &str); 1] =
    [("sgemm_13_async_64x64x16", "sgemm_13_async_64x64x16_fk")];

/// [`Experiments::splitk_fused`](crate::config::Experiments::splitk_fused) off keeps the
/// separate reduction (for measuring).
fn fused_k_reduce_on() -> bool {
    crate::config::with_experiments(|e| e.splitk_fused)
}

/// Whether `blocks` blocks of `threads` threads of a kernel can all be resident at once, by its
/// registers (64 Ki a multiprocessor, allocated 256 a warp) and shared memory (plus the 1 KiB
/// the driver reserves a block), at most 1536 threads and 16 blocks a multiprocessor (the
/// smallest limits of sm_80–sm_90). A kernel whose blocks wait for each other needs this.
pub fn all_resident(d: &DeviceLimits, k: KernelLimits, threads: u32, blocks: usize) -> bool {
    let per_sm = k
        .blocks_per_sm(d, threads, 0)
        .min(1536 / threads.max(1))
        .min(16);
    blocks <= per_sm as usize * d.sm_count as usize
}

/// [`sgemm_split_k`] with the reduction chosen by `reduce`.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_split_k_reduce(
    dev: &CudaDevice,
    t: &TileShape,
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
    epi: &Epilogue,
    splits: usize,
    reduce: SplitReduce,
) -> Result<()> {
    if g.batch == 0 || g.m == 0 || g.n == 0 {
        return Ok(());
    }
    if splits > 1 && !t.split_k {
        return Err(Error::LaunchConfig {
            kernel: t.kernel.to_string(),
            msg: format!("{splits} K-splits requested, but this kernel cannot split K"),
        });
    }
    // kernels without bounds code are refused where their preconditions fail
    let interior = ASYNC_TN
        .iter()
        .chain(&ASYNC_NN)
        .find(|x| x.kernel == t.kernel);
    let unchecked = if let Some(it) = interior {
        interior_fits(g, it, a, b, c, epi)
    } else if let Some(i) = WHOLE_K.iter().position(|x| x.0 == t.kernel) {
        wholek_fits(g, i, a, b, dev.limits().max_shared_per_block_optin as usize)
    } else {
        Ok(())
    };
    unchecked.map_err(|msg| Error::LaunchConfig {
        kernel: t.kernel.to_string(),
        msg,
    })?;
    let (k_split, splits) = k_ranges(g.k, splits);
    if g.m > i32::MAX as usize
        || g.n > i32::MAX as usize
        || g.k > i32::MAX as usize
        || g.batch * splits > 65_535
    {
        return Err(Error::LaunchConfig {
            kernel: t.kernel.to_string(),
            msg: format!(
                "sizes m={} n={} k={} batch={} (× {splits} K-splits) exceed the kernel's limits \
                 (i32 dims, batch·splits ≤ 65535)",
                g.m, g.n, g.k, g.batch
            ),
        });
    }
    let (grid, block) = if t.threads == 1024 && t.bm == 32 {
        // steps 1–3: 32×32 thread blocks; step 1 maps x to rows, 2–3 map x to columns
        let (gx, gy) = if t.kernel == "sgemm_01_naive" {
            (g.m.div_ceil(32), g.n.div_ceil(32))
        } else {
            (g.n.div_ceil(32), g.m.div_ceil(32))
        };
        (
            Dim3::xyz(gx as u32, gy as u32, g.batch as u32),
            Dim3::xyz(32, 32, 1),
        )
    } else {
        (
            Dim3::xyz(
                g.n.div_ceil(t.bn as usize) as u32,
                g.m.div_ceil(t.bm as usize) as u32,
                (g.batch * splits) as u32,
            ),
            Dim3::x(t.threads),
        )
    };
    let k = dev.function(t.module, t.kernel)?;
    let (m, n, kk) = (g.m as i32, g.n as i32, g.k as i32);
    let (ta, tb) = (g.trans_a as i32, g.trans_b as i32);
    let (sa, sb, sc) = (g.stride_a as i64, g.stride_b as i64, (g.m * g.n) as i64);
    let bias = epi.bias.unwrap_or(DevPtr::NULL);
    let z = epi.pre_act.unwrap_or(DevPtr::NULL);
    let act = epi.act.code();
    let total = g.batch * g.m * g.n;
    let cfg = LaunchConfig::new(grid, block).with_shared_mem(t.smem);
    if splits == 1 {
        let args: [&dyn KernelArg; 15] = [
            &a, &b, &c, &m, &n, &kk, &ta, &tb, &sa, &sb, &sc, &bias, &act, &z, &0i32,
        ];
        // SAFETY: matches GEMM_ARGS in common_gemm.cuh; the caller passes buffers holding the
        // matrices the strides and sizes describe (bias: n floats; pre_act: like C).
        return unsafe { dev.launch(&k, cfg, &args) };
    }
    // partial products into a workspace, then the reduction with the epilogue
    let work = dev.alloc(splits * total * 4)?;
    let (wp, null, none, ks) = (work.ptr(), DevPtr::NULL, 0i32, k_split as i32);
    let tiles = (grid.x * grid.y) as usize * g.batch;
    let blocks = tiles * splits;
    if reduce != SplitReduce::Separate {
        let fused = match FUSED_K_REDUCE.iter().find(|x| x.0 == t.kernel) {
            Some(&(_, name)) => {
                let kf = dev.function(t.module, name)?;
                let fits = all_resident(dev.limits(), kf.limits(), t.threads, blocks);
                (fits && fused_k_reduce_on()).then_some((kf, name))
            }
            None => None,
        };
        match fused {
            Some((kf, _)) => {
                let counters = dev.counters(2 * tiles)?;
                let args: [&dyn KernelArg; 20] = [
                    &a, &b, &wp, &m, &n, &kk, &ta, &tb, &sa, &sb, &sc, &null, &none, &null, &ks,
                    &c, &bias, &act, &z, &counters,
                ];
                // SAFETY: GEMM_ARGS as above (C = the workspace), then the real C, bias,
                // activation, pre-activation and 2·tiles zeroed ints (left zero).
                return unsafe { dev.launch(&kf, cfg, &args) };
            }
            None if reduce == SplitReduce::Fused => {
                return Err(Error::LaunchConfig {
                    kernel: t.kernel.to_string(),
                    msg: format!(
                    "no fused K-reduction here: it needs a kernel with one ({}) and all {blocks} \
                         blocks resident at once on {} SMs",
                    FUSED_K_REDUCE.map(|x| x.0).join(", "),
                    dev.limits().sm_count
                ),
                })
            }
            None => {}
        }
    }
    let args: [&dyn KernelArg; 15] = [
        &a, &b, &wp, &m, &n, &kk, &ta, &tb, &sa, &sb, &sc, &null, &none, &null, &ks,
    ];
    // SAFETY: as above, with C = the workspace of `splits` × batch × m × n floats.
    unsafe { dev.launch(&k, cfg, &args)? };
    let (sp, tot, nn) = (splits as i32, total as i64, g.n as i32);
    let reduce_cfg = crate::launch_1d(total.div_ceil(4)); // 4 elements per thread
    let args: [&dyn KernelArg; 8] = [&wp, &c, &sp, &tot, &nn, &bias, &act, &z];
    // SAFETY: matches sgemm_splitk_reduce: P holds splits × total floats, C total floats.
    unsafe {
        super::launch(
            dev,
            "matmul/splitk_reduce",
            "sgemm_splitk_reduce",
            reduce_cfg,
            &args,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::k_ranges;

    #[test]
    fn k_ranges_are_whole_slices_and_recounted() {
        assert_eq!(k_ranges(1000, 1), (0, 1));
        assert_eq!(k_ranges(0, 4), (0, 1));
        assert_eq!(k_ranges(20, 4), (0, 1)); // one 32-deep slice holds all of K
        assert_eq!(k_ranges(40, 16), (32, 2));
        assert_eq!(k_ranges(1000, 3), (352, 3));
        assert_eq!(k_ranges(1000, 7), (160, 7));
        assert_eq!(k_ranges(100, 16), (32, 4)); // fewer ranges than asked
    }
}

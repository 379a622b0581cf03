//! Launchers for the tensor-core GEMM ladder of 16-bit inputs (`kernels/matmul/14_*` … `16_*`,
//! template in `kernels/matmul/hmma.cuh`): `C = act(op(A)·op(B) + bias)` for each batch, with A,
//! B, C, bias and the saved pre-activation all f16 or all bf16, products summed in f32 on the
//! tensor cores and rounded once where C is stored. The geometry is the SGEMM ladder's [`Gemm`]
//! and the epilogue its [`Epilogue`] (pointers to 16-bit elements here).

use super::matmul::{Activation, Epilogue, Gemm};
use super::shape::Elem;
use crate::{CudaDevice, DevPtr, Dim3, Error, KernelArg, LaunchConfig, Result};

/// A step of the tensor-core GEMM ladder, selectable at run time for tests and benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HgemmKernel {
    /// 14: `mma.sync.m16n8k16` fed by `ldmatrix` from plain row-major shared tiles.
    Ldmatrix,
    /// 15: step 14 with XOR-swizzled shared tiles (no bank conflicts).
    Swizzle,
    /// 16: swizzled tiles filled by a four-stage `cp.async` pipeline, 128×256 block tiles.
    Async,
}

/// Launch shape of one step: module, kernel-name prefix, block tile, threads, shared memory.
struct Config {
    module: &'static str,
    prefix: &'static str,
    bm: usize,
    bn: usize,
    threads: u32,
    smem: u32,
}

impl HgemmKernel {
    /// Every step, in ladder order.
    pub const ALL: [HgemmKernel; 3] = [
        HgemmKernel::Ldmatrix,
        HgemmKernel::Swizzle,
        HgemmKernel::Async,
    ];

    /// The fastest step (the library default for 16-bit `matmul`).
    pub const BEST: HgemmKernel = HgemmKernel::Async;

    /// Short name, as printed by the benchmarks and accepted by `gemm_bench --kernels`.
    pub fn name(&self) -> &'static str {
        match self {
            HgemmKernel::Ldmatrix => "mma",
            HgemmKernel::Swizzle => "swizzle",
            HgemmKernel::Async => "mma_async",
        }
    }

    /// Ladder step number, as in `kernels/matmul/NN_*.cu`.
    pub fn step(&self) -> &'static str {
        match self {
            HgemmKernel::Ldmatrix => "14",
            HgemmKernel::Swizzle => "15",
            HgemmKernel::Async => "16",
        }
    }

    /// The step called `name` (see [`HgemmKernel::name`]).
    pub fn from_name(name: &str) -> Option<HgemmKernel> {
        HgemmKernel::ALL.iter().find(|k| k.name() == name).copied()
    }

    fn config(&self) -> Config {
        // shared memory: STAGES × (BM·BK + BK·BN) 16-bit elements, BK = 32
        let (module, prefix, bn, stages) = match self {
            HgemmKernel::Ldmatrix => ("matmul/14_hmma_ldmatrix", "hgemm_14", 128, 2),
            HgemmKernel::Swizzle => ("matmul/15_hmma_swizzle", "hgemm_15", 128, 2),
            HgemmKernel::Async => ("matmul/16_hmma_async", "hgemm_16", 256, 4),
        };
        Config {
            module,
            prefix,
            bm: 128,
            bn,
            threads: 256,
            smem: (stages * (128 * 32 + 32 * bn) * 2) as u32,
        }
    }
}

/// Shortest range of K a split keeps: eight 32-deep slices, so the pipeline still fills.
const MIN_K_PER_SPLIT: usize = 256;

/// How many K-splits [`hgemm`] gives `g` under `kernel` on `sm_count` multiprocessors. A
/// product whose output tiles fill less than one block per multiprocessor (a weight gradient,
/// which sums every token of the batch into a small matrix) has its K cut so that about two
/// blocks run on each multiprocessor, each split keeping at least [`MIN_K_PER_SPLIT`] of K;
/// every other product runs whole.
pub fn hgemm_splits(sm_count: usize, kernel: HgemmKernel, g: &Gemm) -> usize {
    let t = kernel.config();
    let tiles = g.m.div_ceil(t.bm) * g.n.div_ceil(t.bn) * g.batch;
    if tiles == 0 || tiles >= sm_count || g.k < 2 * MIN_K_PER_SPLIT {
        return 1;
    }
    (2 * sm_count)
        .div_ceil(tiles)
        .min(g.k / MIN_K_PER_SPLIT)
        .max(1)
}

/// Launch `kernel` for `g` on `elem` (F16 or BF16) operands: `c` receives `batch` row-major
/// `m × n` matrices of the same element type. K is split where [`hgemm_splits`] says so.
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
    let splits = hgemm_splits(dev.limits().sm_count as usize, kernel, g);
    hgemm_split_k(dev, kernel, elem, g, a, b, c, epi, splits)
}

/// [`hgemm`] with an explicit number of K-splits (1 = none; more are cut into ranges of a
/// multiple of 32, so the count may come out lower). With more than one, each split's f32
/// partial sums go to a workspace and `hgemm_splitk_reduce` adds them in split order, applies
/// the epilogue and rounds once to the element type.
#[allow(clippy::too_many_arguments)]
pub fn hgemm_split_k(
    dev: &CudaDevice,
    kernel: HgemmKernel,
    elem: Elem,
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
    epi: &Epilogue,
    splits: usize,
) -> Result<()> {
    let t = kernel.config();
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
    if g.batch == 0 || g.m == 0 || g.n == 0 {
        return Ok(());
    }
    let name = format!(
        "{}_{suffix}_{}{}",
        t.prefix,
        if g.trans_a { 't' } else { 'n' },
        if g.trans_b { 't' } else { 'n' }
    );
    let (tiles_n, tiles_m) = (g.n.div_ceil(t.bn), g.m.div_ceil(t.bm));
    let (k_split, splits) = super::matmul::k_ranges(g.k, splits);
    if g.m > i32::MAX as usize
        || g.n > i32::MAX as usize
        || g.k > i32::MAX as usize
        || g.batch * splits > 65_535
        || tiles_m > 65_535
    {
        return Err(Error::LaunchConfig {
            kernel: name,
            msg: format!(
                "sizes m={} n={} k={} batch={} (× {splits} K-splits) exceed the kernel's limits \
                 (i32 dims, batch·splits ≤ 65535, m ≤ 65535 tiles of {})",
                g.m, g.n, g.k, g.batch, t.bm
            ),
        });
    }
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
    let act: i32 = match epi.act {
        Activation::Identity => 0,
        Activation::Relu => 1,
        Activation::Gelu => 2,
    };
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
    let (sp, tot, nn) = (splits as i32, total as i64, g.n as i32);
    let args: [&dyn KernelArg; 8] = [&wp, &c, &sp, &tot, &nn, &bias, &act, &z];
    // SAFETY: matches HGEMM_SPLITK_REDUCE: the workspace holds splits × total floats, C and Z
    // total elements of `elem`, bias n of them.
    unsafe {
        super::launch(
            dev,
            "matmul/splitk_reduce",
            &format!("hgemm_splitk_reduce_{suffix}"),
            crate::launch_1d(total),
            &args,
        )
    }
}

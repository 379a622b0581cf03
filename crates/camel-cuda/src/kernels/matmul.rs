//! Launchers for the SGEMM ladder in `kernels/matmul/`. Every step computes, for each batch,
//! `C = op(A)·op(B)` with `C` row-major `m × n`; see `kernels/matmul/common_gemm.cuh`.

use crate::{CudaDevice, DevPtr, Dim3, Error, LaunchConfig, Result};

/// A step of the SGEMM ladder, selectable at run time for tests and benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SgemmKernel {
    /// 1: one thread per output, threads walk rows (uncoalesced).
    Naive,
    /// 2: threads walk columns (coalesced).
    Coalesced,
    /// 3: 32×32 shared-memory tiles.
    SmemTiling,
}

impl SgemmKernel {
    /// Every step, in ladder order.
    pub const ALL: [SgemmKernel; 3] = [
        SgemmKernel::Naive,
        SgemmKernel::Coalesced,
        SgemmKernel::SmemTiling,
    ];

    /// The best step available (the library default).
    pub const BEST: SgemmKernel = SgemmKernel::SmemTiling;

    /// (PTX module, kernel name).
    pub fn names(&self) -> (&'static str, &'static str) {
        match self {
            SgemmKernel::Naive => ("matmul/01_naive", "sgemm_01_naive"),
            SgemmKernel::Coalesced => ("matmul/02_coalesced", "sgemm_02_coalesced"),
            SgemmKernel::SmemTiling => ("matmul/03_smem_tiling", "sgemm_03_smem_tiling"),
        }
    }
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

/// Launch `kernel` for `g`: `c` receives `batch` row-major `m × n` matrices.
pub fn sgemm(
    dev: &CudaDevice,
    kernel: SgemmKernel,
    g: &Gemm,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
) -> Result<()> {
    if g.batch == 0 || g.m == 0 || g.n == 0 {
        return Ok(());
    }
    let (module, name) = kernel.names();
    if g.m > i32::MAX as usize
        || g.n > i32::MAX as usize
        || g.k > i32::MAX as usize
        || g.batch > 65_535
    {
        return Err(Error::LaunchConfig {
            kernel: name.to_string(),
            msg: format!("sizes m={} n={} k={} batch={} exceed the kernel's limits (i32 dims, batch ≤ 65535)", g.m, g.n, g.k, g.batch),
        });
    }
    let (grid, block) = match kernel {
        SgemmKernel::Naive => (
            Dim3::xyz(
                g.m.div_ceil(32) as u32,
                g.n.div_ceil(32) as u32,
                g.batch as u32,
            ),
            Dim3::xyz(32, 32, 1),
        ),
        SgemmKernel::Coalesced | SgemmKernel::SmemTiling => (
            Dim3::xyz(
                g.n.div_ceil(32) as u32,
                g.m.div_ceil(32) as u32,
                g.batch as u32,
            ),
            Dim3::xyz(32, 32, 1),
        ),
    };
    let k = dev.function(module, name)?;
    let (m, n, kk) = (g.m as i32, g.n as i32, g.k as i32);
    let (ta, tb) = (g.trans_a as i32, g.trans_b as i32);
    let (sa, sb, sc) = (g.stride_a as i64, g.stride_b as i64, (g.m * g.n) as i64);
    // SAFETY: matches GEMM_ARGS in common_gemm.cuh; the caller passes buffers holding the
    // matrices the strides and sizes describe.
    unsafe {
        dev.launch(
            &k,
            LaunchConfig::new(grid, block),
            &[&a, &b, &c, &m, &n, &kk, &ta, &tb, &sa, &sb, &sc],
        )
    }
}

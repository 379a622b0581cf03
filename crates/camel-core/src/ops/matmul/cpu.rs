//! The CPU matrix products, through the `gemm` crate: packed, cache-blocked kernels for AVX2 or
//! AVX-512, chosen at run time, on one thread (the CPU backend has no thread pool). `gemm_into`
//! is the one entry every CPU product goes through, conv2d's im2col products included.

use super::{Gemm, MatmulKernels};
use crate::backend::cpu::CpuStorage;
use crate::backend::vector::map;
use crate::backend::Activation;
use crate::ops::elementwise::{gelu, UnaryOp};
use crate::{DType, Error, Result};
use std::mem::MaybeUninit;

impl MatmulKernels for CpuStorage {
    fn matmul(&self, rhs: &Self, g: &Gemm) -> Result<Self> {
        if let (CpuStorage::F32(a), CpuStorage::F32(b)) = (self, rhs) {
            return Ok(CpuStorage::F32(matmul(a, b, g)?));
        }
        // 16-bit operands: the f32 product of the widened values, rounded once
        let dtype = half_dtype("matmul", self, rhs)?;
        let c = matmul(&self.to_f32_vec(), &rhs.to_f32_vec(), g)?;
        Ok(CpuStorage::from_f32_vec(c, dtype))
    }

    fn linear(
        &self,
        w: &Self,
        bias: Option<&Self>,
        dims: (usize, usize, usize),
        act: Activation,
    ) -> Result<(Self, Option<Self>)> {
        if let (CpuStorage::F32(x), CpuStorage::F32(wv)) = (self, w) {
            let b = bias.map(|b| b.f32("linear")).transpose()?;
            let (y, z) = linear(x, wv, b, dims, act)?;
            return Ok((CpuStorage::F32(y), z.map(CpuStorage::F32)));
        }
        // 16-bit operands: bias and activation on the f32 sum, each output rounded once
        let dtype = half_dtype("linear", self, w)?;
        let b = bias.map(|b| b.to_f32_vec());
        let (y, z) = linear(&self.to_f32_vec(), &w.to_f32_vec(), b.as_deref(), dims, act)?;
        let narrow = |v| CpuStorage::from_f32_vec(v, dtype);
        Ok((narrow(y), z.map(narrow)))
    }
}

/// The common 16-bit float dtype of `a` and `b`, else a dtype error naming `op`.
fn half_dtype(op: &'static str, a: &CpuStorage, b: &CpuStorage) -> Result<DType> {
    let (da, db) = (a.dtype(), b.dtype());
    if matches!(da, DType::F16 | DType::BF16) && da == db {
        return Ok(da);
    }
    Err(Error::DTypeMismatch {
        op,
        expected: if matches!(da, DType::F16 | DType::BF16) {
            da
        } else {
            DType::F32
        },
        got: if da == db { da } else { db },
    })
}

/// A matrix operand of [`gemm_into`]: `rows × cols`, stored row-major in `data`, or, with
/// `trans`, stored as its transpose (`cols × rows` row-major, read in place).
#[derive(Clone, Copy)]
pub(crate) struct Mat<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub trans: bool,
}

impl<'a> Mat<'a> {
    /// A `rows × cols` matrix stored row-major at the start of `data`.
    pub fn new(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Mat {
            data,
            rows,
            cols,
            trans: false,
        }
    }

    /// The transpose of this matrix, read in place.
    pub fn t(self) -> Self {
        Mat {
            rows: self.cols,
            cols: self.rows,
            trans: !self.trans,
            ..self
        }
    }

    /// (row stride, column stride) in elements.
    fn strides(&self) -> (isize, isize) {
        if self.trans {
            (1, self.rows as isize)
        } else {
            (self.cols as isize, 1)
        }
    }
}

/// `c = a · b`, or `c += a · b` with `accumulate`, for `c` the `a.rows × b.cols` row-major
/// matrix at the start of `c`.
///
/// # Panics
///
/// When the operands' shapes disagree or a slice is shorter than its matrix: the callers size
/// them from shapes they have already checked, so this is an internal error.
pub(crate) fn gemm_into(c: &mut [f32], a: Mat<'_>, b: Mat<'_>, accumulate: bool) {
    check(c.len(), a, b);
    // SAFETY: `c` holds the whole output (checked), initialized, and overlaps neither operand.
    unsafe { gemm_raw(c.as_mut_ptr(), a, b, accumulate) }
}

/// `c = a · b` into memory not yet written (a new output), as [`gemm_into`]; every element of
/// the `a.rows × b.cols` matrix is written.
fn gemm_uninit(c: &mut [MaybeUninit<f32>], a: Mat<'_>, b: Mat<'_>) {
    check(c.len(), a, b);
    // SAFETY: as in `gemm_into`; without `accumulate` the product writes `c` without reading it
    unsafe { gemm_raw(c.as_mut_ptr().cast(), a, b, false) }
}

/// The shape checks of [`gemm_into`].
fn check(c_len: usize, a: Mat<'_>, b: Mat<'_>) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(b.rows == k, "gemm: inner dimensions {k} and {}", b.rows);
    assert!(
        a.data.len() >= m * k && b.data.len() >= k * n && c_len >= m * n,
        "gemm: a slice is shorter than its matrix"
    );
}

/// The product itself, through the `gemm` crate.
///
/// # Safety
///
/// `c` points to `a.rows × b.cols` writable elements (initialized when `accumulate`) that
/// overlap neither operand, and the operands passed [`check`].
unsafe fn gemm_raw(c: *mut f32, a: Mat<'_>, b: Mat<'_>, accumulate: bool) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            // SAFETY: `c` points to m·n writable elements (the caller's contract).
            unsafe { std::ptr::write_bytes(c, 0, m * n) };
        }
        return;
    }
    let ((ars, acs), (brs, bcs)) = (a.strides(), b.strides());
    // SAFETY: every index the product touches lies inside the operands (rows and columns within
    // bounds for the strides of a dense row-major or transposed matrix), and inside `c`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c,
            1,
            n as isize,
            accumulate,
            a.data.as_ptr(),
            acs,
            ars,
            b.data.as_ptr(),
            bcs,
            brs,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// Batched matrix product on the CPU; an output the host cannot hold is
/// [`crate::Error::OutOfMemory`].
pub fn matmul(a: &[f32], b: &[f32], s: &Gemm) -> Result<Vec<f32>> {
    let Gemm { batch, m, n, k, .. } = *s;
    let size = batch.saturating_mul(m).saturating_mul(n);
    let mut c = crate::backend::cpu::try_vec("matmul", size)?;
    let out = &mut c.spare_capacity_mut()[..size];
    for bi in 0..batch {
        // an operand stored transposed is its transpose read in place
        let (ra, ca) = if s.trans_a { (k, m) } else { (m, k) };
        let (rb, cb) = if s.trans_b { (n, k) } else { (k, n) };
        let pa = Mat::new(&a[bi * s.stride_a..], ra, ca);
        let pb = Mat::new(&b[bi * s.stride_b..], rb, cb);
        let (pa, pb) = (
            if s.trans_a { pa.t() } else { pa },
            if s.trans_b { pb.t() } else { pb },
        );
        gemm_uninit(&mut out[bi * m * n..], pa, pb);
    }
    // SAFETY: each of the `batch` products wrote its whole m × n block.
    unsafe { c.set_len(size) };
    Ok(c)
}

/// `act(x · wᵀ + bias)` for `x` `[rows, inp]`, `w` `[out, inp]`; also returns the
/// pre-activation when the activation is GELU (its backward needs it).
pub fn linear(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    (rows, inp, out): (usize, usize, usize),
    act: Activation,
) -> Result<(Vec<f32>, Option<Vec<f32>>)> {
    let spec = Gemm {
        batch: 1,
        m: rows,
        n: out,
        k: inp,
        trans_a: false,
        trans_b: true,
        stride_a: 0,
        stride_b: 0,
    };
    let mut z = matmul(x, w, &spec)?;
    if let (Some(b), true) = (bias, out > 0) {
        for row in z.chunks_mut(out) {
            for (v, bv) in row.iter_mut().zip(b) {
                *v += bv;
            }
        }
    }
    Ok(match act {
        Activation::Identity => (z, None),
        Activation::Relu => (map(&z, |v| UnaryOp::Relu.apply(v)), None),
        Activation::Gelu => (map(&z, gelu), Some(z)),
    })
}

//! The CPU reference of the matrix products, through ndarray's GEMM (`matrixmultiply`).

use super::{Gemm, MatmulKernels};
use crate::backend::cpu::CpuStorage;
use crate::backend::Activation;
use crate::ops::elementwise::{gelu, UnaryOp};
use crate::{DType, Error, Result};
use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2, ShapeBuilder};

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

/// Batched matrix product on the CPU through ndarray's optimized GEMM; an output the host cannot
/// hold is [`crate::Error::OutOfMemory`].
pub fn matmul(a: &[f32], b: &[f32], s: &Gemm) -> Result<Vec<f32>> {
    let Gemm { batch, m, n, k, .. } = *s;
    let size = batch.saturating_mul(m).saturating_mul(n);
    let mut c = crate::backend::cpu::try_filled("matmul", size, 0.0f32)?;
    for bi in 0..batch {
        let pa = &a[bi * s.stride_a..bi * s.stride_a + m * k];
        let pb = &b[bi * s.stride_b..bi * s.stride_b + k * n];
        // a stored transposed is an m×k view with column-major (Fortran) strides
        let av = if s.trans_a {
            ArrayView2::from_shape((m, k).f(), pa)
        } else {
            ArrayView2::from_shape((m, k), pa)
        }
        .expect("matmul: A view");
        let bv = if s.trans_b {
            ArrayView2::from_shape((k, n).f(), pb)
        } else {
            ArrayView2::from_shape((k, n), pb)
        }
        .expect("matmul: B view");
        let mut cv =
            ArrayViewMut2::from_shape((m, n), &mut c[bi * m * n..(bi + 1) * m * n]).expect("C");
        general_mat_mul(1.0, &av, &bv, 0.0, &mut cv);
    }
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
        Activation::Relu => (z.into_iter().map(|v| apply(act, v)).collect(), None),
        Activation::Gelu => (z.iter().map(|&v| gelu(v)).collect(), Some(z)),
    })
}

/// The CPU reference of an activation fused into `linear`.
fn apply(act: Activation, x: f32) -> f32 {
    match act {
        Activation::Identity => x,
        Activation::Relu => UnaryOp::Relu.apply(x),
        Activation::Gelu => UnaryOp::Gelu.apply(x),
    }
}

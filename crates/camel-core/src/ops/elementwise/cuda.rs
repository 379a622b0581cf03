//! The elementwise ops on the GPU: the elementwise ladder (`kernels/elementwise`).

use super::{BinaryOp, ElementwiseKernels, UnaryOp};
use crate::backend::cuda::{expect, like, CudaStorage, Family};
use crate::config::step;
use crate::{DType, Error, Result};
use camel_cuda::kernels as k;

impl ElementwiseKernels for CudaStorage {
    fn unary(&self, op: UnaryOp) -> Result<Self> {
        unary(self, op)
    }

    fn binary(
        &self,
        rhs: &Self,
        a_shape: &[usize],
        b_shape: &[usize],
        out_shape: &[usize],
        op: BinaryOp,
    ) -> Result<Self> {
        binary(self, rhs, a_shape, b_shape, out_shape, op)
    }
}

/// Elementwise `f(x)`.
fn unary(x: &CudaStorage, op: UnaryOp) -> Result<CudaStorage> {
    expect("unary", x, DType::F32)?;
    let out = like(x, x.len, DType::F32)?;
    let (code, s) = op.code();
    let unary = k::elementwise::at(step(Family::Elementwise)).unary;
    unary(&x.dev, x.ptr(), out.ptr(), x.len, code, s)?;
    Ok(out)
}

/// Elementwise `a ∘ b`, broadcasting.
fn binary(
    a: &CudaStorage,
    b: &CudaStorage,
    a_shape: &[usize],
    b_shape: &[usize],
    out_shape: &[usize],
    op: BinaryOp,
) -> Result<CudaStorage> {
    expect("binary", a, DType::F32)?;
    expect("binary", b, DType::F32)?;
    let n: usize = out_shape.iter().product();
    let out = like(a, n, DType::F32)?;
    if a_shape == b_shape {
        let binary = k::elementwise::at(step(Family::Elementwise)).binary;
        binary(&a.dev, a.ptr(), b.ptr(), out.ptr(), n, op.code())?;
    } else if op == BinaryOp::GeluBwd {
        return Err(Error::ShapeMismatch {
            op: "gelu backward",
            lhs: a_shape.to_vec(),
            rhs: b_shape.to_vec(),
            expected: "equal shapes".into(),
        });
    } else {
        let sa = crate::shape::broadcast_strides(a_shape, out_shape);
        let sb = crate::shape::broadcast_strides(b_shape, out_shape);
        k::elementwise::binary_bcast_f32(
            &a.dev,
            a.ptr(),
            b.ptr(),
            out.ptr(),
            out_shape,
            &sa,
            &sb,
            op.code(),
        )?;
    }
    Ok(out)
}

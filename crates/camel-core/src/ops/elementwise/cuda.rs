//! The elementwise ops on the GPU: the elementwise ladder (`kernels/elementwise`).

use super::{BinaryOp, ElementwiseKernels, UnaryOp};
use crate::backend::cuda::{elem, expect, expect_float, like, CudaStorage, Family};
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

    fn where_select(
        &self,
        a: &Self,
        b: &Self,
        m_shape: &[usize],
        a_shape: &[usize],
        b_shape: &[usize],
        out_shape: &[usize],
    ) -> Result<Self> {
        for s in [self, a, b] {
            expect_float("where", s)?;
        }
        expect("where", b, a.dtype)?;
        let n: usize = out_shape.iter().product();
        let out = like(self, n, a.dtype)?;
        let strides = |s: &[usize]| crate::shape::broadcast_strides(s, out_shape);
        k::elementwise::where_select(
            &self.dev,
            [elem(self.dtype), elem(a.dtype)],
            self.ptr(),
            a.ptr(),
            b.ptr(),
            out.ptr(),
            out_shape,
            &strides(m_shape),
            &strides(a_shape),
            &strides(b_shape),
        )?;
        Ok(out)
    }

    fn triangle(&self, rows: usize, cols: usize, k: i64, upper: bool) -> Result<Self> {
        expect_float("triangle", self)?;
        let out = like(self, self.len, self.dtype)?;
        k::elementwise::triangle(
            &self.dev,
            elem(self.dtype),
            self.ptr(),
            out.ptr(),
            self.len,
            rows,
            cols,
            k,
            upper,
        )?;
        Ok(out)
    }

    fn clamp(&self, lo: f32, hi: f32, grad: bool) -> Result<Self> {
        expect_float("clamp", self)?;
        let out = like(self, self.len, self.dtype)?;
        let e = elem(self.dtype);
        k::elementwise::clamp(&self.dev, e, self.ptr(), out.ptr(), self.len, lo, hi, grad)?;
        Ok(out)
    }
}

/// `n` i64 values `start + i·step` on the GPU `ordinal` (the i64 `arange`).
pub(crate) fn arange_i64(ordinal: usize, n: usize, start: i64, step: i64) -> Result<CudaStorage> {
    let dev = crate::backend::cuda::device(ordinal)?;
    let out = crate::backend::cuda::alloc(&dev, n, DType::I64)?;
    k::elementwise::arange_i64(&dev, out.ptr(), n, start, step)?;
    Ok(out)
}

/// Elementwise `f(x)`; f16 and bf16 compute in f32 and round once.
fn unary(x: &CudaStorage, op: UnaryOp) -> Result<CudaStorage> {
    let out = like(x, x.len, x.dtype)?;
    let (code, s) = op.code();
    match x.dtype {
        DType::F32 => {
            let unary = k::elementwise::at(step(Family::Elementwise)).unary;
            unary(&x.dev, x.ptr(), out.ptr(), x.len, code, s)?;
        }
        DType::F16 | DType::BF16 => {
            k::elementwise::unary_half(&x.dev, elem(x.dtype), x.ptr(), out.ptr(), x.len, code, s)?
        }
        DType::I64 => expect("unary", x, DType::F32)?,
    }
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
    if a.dtype == DType::I64 {
        expect("binary", a, DType::F32)?;
    }
    expect("binary", b, a.dtype)?;
    let n: usize = out_shape.iter().product();
    let out = like(a, n, a.dtype)?;
    let half = a.dtype != DType::F32;
    if a_shape == b_shape {
        if half {
            k::elementwise::binary_half(
                &a.dev,
                elem(a.dtype),
                a.ptr(),
                b.ptr(),
                out.ptr(),
                n,
                op.code(),
            )?;
        } else {
            let binary = k::elementwise::at(step(Family::Elementwise)).binary;
            binary(&a.dev, a.ptr(), b.ptr(), out.ptr(), n, op.code())?;
        }
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
        if half {
            k::elementwise::binary_bcast_half(
                &a.dev,
                elem(a.dtype),
                a.ptr(),
                b.ptr(),
                out.ptr(),
                out_shape,
                &sa,
                &sb,
                op.code(),
            )?;
        } else {
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
    }
    Ok(out)
}

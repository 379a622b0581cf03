//! The reductions on the GPU: the reduce ladder (`kernels/reduce`).

use super::{ReduceKernels, ReduceOp};
use crate::backend::cuda::{elem, expect, like, CudaStorage, Family};
use crate::config::step;
use crate::ops::shape::ShapeKernels;
use crate::{DType, Result};
use camel_cuda::kernels as k;
use camel_cuda::kernels::rows::Step;

impl ReduceKernels for CudaStorage {
    fn reduce(&self, outer: usize, dim: usize, inner: usize, op: ReduceOp) -> Result<Self> {
        reduce(self, outer, dim, inner, op)
    }

    fn argmax_last(&self, rows: usize, cols: usize) -> Result<Self> {
        argmax_last(self, rows, cols)
    }

    fn argmin_last(&self, rows: usize, cols: usize) -> Result<Self> {
        expect("argmin", self, DType::F32)?;
        let out = like(self, rows, DType::I64)?;
        k::reduce::argmin_last_f32(&self.dev, self.ptr(), out.ptr(), rows, cols)?;
        Ok(out)
    }

    fn var_rows(&self, rows: usize, cols: usize, correction: usize) -> Result<Self> {
        expect("var", self, DType::F32)?;
        let out = like(self, rows, DType::F32)?;
        k::reduce::var_rows_f32(&self.dev, self.ptr(), out.ptr(), rows, cols, correction)?;
        Ok(out)
    }
}

/// Reduce `[outer, dim, inner]` along the middle axis, to f32 whatever the float input: step 3
/// reads f16 and bf16 in its row kernels and its chunked middle-dim pass; elsewhere the 16-bit
/// input widens with the cast kernel first.
fn reduce(
    x: &CudaStorage,
    outer: usize,
    dim: usize,
    inner: usize,
    op: ReduceOp,
) -> Result<CudaStorage> {
    if x.dtype.is_half() {
        let out = like(x, outer * inner, DType::F32)?;
        if step(Family::Reduce) == Step::Three
            && k::reduce::loads_in_flight_typed(
                &x.dev,
                x.ptr(),
                out.ptr(),
                outer,
                dim,
                inner,
                op.code(),
                elem(x.dtype),
            )?
        {
            return Ok(out);
        }
        return reduce(&x.cast(DType::F32)?, outer, dim, inner, op);
    }
    expect("reduce", x, DType::F32)?;
    let out = like(x, outer * inner, DType::F32)?;
    let reduce = k::reduce::at(step(Family::Reduce)).reduce;
    reduce(&x.dev, x.ptr(), out.ptr(), outer, dim, inner, op.code())?;
    Ok(out)
}

/// Row-wise argmax → i64.
fn argmax_last(x: &CudaStorage, rows: usize, cols: usize) -> Result<CudaStorage> {
    expect("argmax", x, DType::F32)?;
    let out = like(x, rows, DType::I64)?;
    k::reduce::argmax_last_f32(&x.dev, x.ptr(), out.ptr(), rows, cols)?;
    Ok(out)
}

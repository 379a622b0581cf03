//! The reductions on the GPU: the reduce ladder (`kernels/reduce`).

use super::{ReduceKernels, ReduceOp};
use crate::backend::cuda::{elem, expect, expect_float, like, CudaStorage, Family};
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
        arg_extreme_last(self, rows, cols, false)
    }

    fn argmin_last(&self, rows: usize, cols: usize) -> Result<Self> {
        arg_extreme_last(self, rows, cols, true)
    }

    /// f32 whatever the float input: a 16-bit row widens as it loads.
    fn var_rows(&self, rows: usize, cols: usize, correction: usize) -> Result<Self> {
        expect_float("var", self)?;
        let out = like(self, rows, DType::F32)?;
        let (x, e) = (self.ptr(), elem(self.dtype));
        k::reduce::var_rows(&self.dev, x, out.ptr(), rows, cols, correction, e)?;
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

/// Row-wise argmax (`min`: argmin) of any float dtype → i64.
fn arg_extreme_last(x: &CudaStorage, rows: usize, cols: usize, min: bool) -> Result<CudaStorage> {
    expect_float(if min { "argmin" } else { "argmax" }, x)?;
    let out = like(x, rows, DType::I64)?;
    let (p, e) = (x.ptr(), elem(x.dtype));
    k::reduce::arg_extreme_last(&x.dev, p, out.ptr(), rows, cols, min, e)?;
    Ok(out)
}

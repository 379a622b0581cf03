//! The scaled, masked softmax on the GPU (`kernels/masked_softmax`).

use super::{MaskedRows, MaskedSoftmaxKernels};
use crate::backend::cuda::{elem, expect, expect_float, like, CudaStorage, Family};
use crate::config::step;
use crate::ops::shape::ShapeKernels;
use crate::{DType, Result};
use camel_cuda::kernels as k;

impl MaskedSoftmaxKernels for CudaStorage {
    /// In the input's dtype: the register kernels read and write f16 and bf16; rows longer than
    /// they hold widen a 16-bit input with the cast kernel and round the output once.
    fn masked_softmax(&self, m: MaskedRows) -> Result<Self> {
        expect_float("scaled_masked_softmax", self)?;
        if self.dtype.is_half() {
            if m.tk <= k::softmax::SOFTMAX3_MAX_COLS {
                let out = like(self, m.rows * m.tk, self.dtype)?;
                if typed(self, &[self.ptr(), out.ptr()], m)? {
                    return Ok(out);
                }
            }
            return self.cast(DType::F32)?.masked_softmax(m)?.cast(self.dtype);
        }
        let out = like(self, m.rows * m.tk, DType::F32)?;
        let forward = k::masked_softmax::at(step(Family::MaskedSoftmax)).forward;
        forward(
            &self.dev,
            self.ptr(),
            out.ptr(),
            m.rows,
            m.tk,
            m.tq,
            m.scale,
            m.causal,
        )?;
        Ok(out)
    }

    /// In `y`'s dtype, as the forward.
    fn masked_softmax_bwd(&self, g: &Self, m: MaskedRows) -> Result<Self> {
        let op = "scaled_masked_softmax backward";
        expect_float(op, self)?;
        expect(op, g, self.dtype)?;
        if self.dtype.is_half() {
            if m.tk <= k::softmax::SOFTMAX3_MAX_COLS {
                let out = like(self, m.rows * m.tk, self.dtype)?;
                if typed(self, &[self.ptr(), g.ptr(), out.ptr()], m)? {
                    return Ok(out);
                }
            }
            let (yf, gf) = (self.cast(DType::F32)?, g.cast(DType::F32)?);
            return yf.masked_softmax_bwd(&gf, m)?.cast(self.dtype);
        }
        let out = like(self, m.rows * m.tk, DType::F32)?;
        let backward = k::masked_softmax::at(step(Family::MaskedSoftmax)).backward;
        backward(
            &self.dev,
            self.ptr(),
            g.ptr(),
            out.ptr(),
            m.rows,
            m.tk,
            m.tq,
            m.scale,
            m.causal,
        )?;
        Ok(out)
    }
}

/// The 16-bit register kernel, forward (`ptrs` = `[x, y]`) or backward (`[y, g, dx]`):
/// `Ok(false)`, launching nothing, for rows longer than it holds (the callers check the length
/// first, so as not to allocate for nothing).
fn typed(x: &CudaStorage, ptrs: &[camel_cuda::DevPtr], m: MaskedRows) -> Result<bool> {
    let e = elem(x.dtype);
    let (rows, tk, tq) = (m.rows, m.tk, m.tq);
    Ok(k::masked_softmax::registers_typed(
        &x.dev, ptrs, rows, tk, tq, m.scale, m.causal, e,
    )?)
}

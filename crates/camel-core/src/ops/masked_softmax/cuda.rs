//! The scaled, masked softmax on the GPU (`kernels/masked_softmax`).

use super::{MaskedRows, MaskedSoftmaxKernels};
use crate::backend::cuda::{expect, like, CudaStorage, Family};
use crate::config::step;
use crate::{DType, Result};
use camel_cuda::kernels as k;

impl MaskedSoftmaxKernels for CudaStorage {
    fn masked_softmax(&self, m: MaskedRows) -> Result<Self> {
        expect("scaled_masked_softmax", self, DType::F32)?;
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

    fn masked_softmax_bwd(&self, g: &Self, m: MaskedRows) -> Result<Self> {
        let op = "scaled_masked_softmax backward";
        expect(op, self, DType::F32)?;
        expect(op, g, DType::F32)?;
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

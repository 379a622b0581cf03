//! Pooling on the GPU: `kernels/pool/01_thread_per_output.cu`, whose kernels take f32, f16 and
//! bf16 (widened as read, computed in f32, each output rounded once).

use super::{PoolGeom, PoolKernels};
use crate::backend::cuda::{elem, expect, expect_float, like, CudaStorage};
use crate::{DType, Result};
use camel_cuda::kernels as k;

impl PoolKernels for CudaStorage {
    fn max_pool2d(&self, g: &PoolGeom) -> Result<(Self, Self)> {
        expect_float("max_pool2d", self)?;
        let y = like(self, g.out_len(), self.dtype)?;
        let idx = like(self, g.out_len(), DType::I64)?;
        let e = elem(self.dtype);
        k::pool::max_pool2d(&self.dev, self.ptr(), y.ptr(), idx.ptr(), g, e)?;
        Ok((y, idx))
    }

    fn max_pool2d_bwd(&self, idx: &Self, g: &PoolGeom) -> Result<Self> {
        expect_float("max_pool2d backward", self)?;
        expect("max_pool2d backward", idx, DType::I64)?;
        let dx = like(self, g.in_len(), self.dtype)?;
        let e = elem(self.dtype);
        k::pool::max_pool2d_bwd(&self.dev, self.ptr(), idx.ptr(), dx.ptr(), g, e)?;
        Ok(dx)
    }

    fn avg_pool2d(&self, g: &PoolGeom, cip: bool) -> Result<Self> {
        expect_float("avg_pool2d", self)?;
        let y = like(self, g.out_len(), self.dtype)?;
        k::pool::avg_pool2d(&self.dev, self.ptr(), y.ptr(), g, cip, elem(self.dtype))?;
        Ok(y)
    }

    fn avg_pool2d_bwd(&self, g: &PoolGeom, cip: bool) -> Result<Self> {
        expect_float("avg_pool2d backward", self)?;
        let dx = like(self, g.in_len(), self.dtype)?;
        k::pool::avg_pool2d_bwd(&self.dev, self.ptr(), dx.ptr(), g, cip, elem(self.dtype))?;
        Ok(dx)
    }
}

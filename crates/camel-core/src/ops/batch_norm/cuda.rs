//! BatchNorm on the GPU: the BatchNorm ladder (`kernels/batchnorm`). Its kernels take f32, f16
//! and bf16 inputs (widened as read, each output rounded once); the weight, bias and statistics
//! are f32.

use super::BatchNormKernels;
use crate::backend::cuda::{elem, expect, expect_float, like, CudaStorage, Family};
use crate::config::step;
use crate::{DType, Result};
use camel_cuda::kernels as k;

impl BatchNormKernels for CudaStorage {
    fn batch_norm_fwd(
        &self,
        w: &Self,
        b: &Self,
        n: usize,
        c: usize,
        hw: usize,
        eps: f32,
    ) -> Result<(Self, Self, Self)> {
        expect_float("batch_norm", self)?;
        for s in [w, b] {
            expect("batch_norm", s, DType::F32)?;
        }
        let y = like(self, n * c * hw, self.dtype)?;
        let mean = like(self, c, DType::F32)?;
        let var = like(self, c, DType::F32)?;
        let forward = k::batchnorm::at(step(Family::BatchNorm)).forward;
        forward(
            &self.dev,
            self.ptr(),
            w.ptr(),
            b.ptr(),
            y.ptr(),
            mean.ptr(),
            var.ptr(),
            n,
            c,
            hw,
            eps,
            elem(self.dtype),
        )?;
        Ok((y, mean, var))
    }

    fn batch_norm_eval(
        &self,
        mean: &Self,
        var: &Self,
        w: &Self,
        b: &Self,
        n: usize,
        c: usize,
        hw: usize,
        eps: f32,
    ) -> Result<Self> {
        expect_float("batch_norm_eval", self)?;
        for s in [mean, var, w, b] {
            expect("batch_norm_eval", s, DType::F32)?;
        }
        let y = like(self, n * c * hw, self.dtype)?;
        let eval = k::batchnorm::at(step(Family::BatchNorm)).eval;
        eval(
            &self.dev,
            self.ptr(),
            mean.ptr(),
            var.ptr(),
            w.ptr(),
            b.ptr(),
            y.ptr(),
            n,
            c,
            hw,
            eps,
            elem(self.dtype),
        )?;
        Ok(y)
    }

    fn batch_norm_bwd(
        &self,
        w: &Self,
        g: &Self,
        mean: &Self,
        var: &Self,
        n: usize,
        c: usize,
        hw: usize,
        eps: f32,
        training: bool,
    ) -> Result<(Self, Self, Self)> {
        expect_float("batch_norm backward", self)?;
        expect("batch_norm backward", g, self.dtype)?;
        let dx = like(self, n * c * hw, self.dtype)?;
        let dw = like(self, c, DType::F32)?;
        let db = like(self, c, DType::F32)?;
        let backward = k::batchnorm::at(step(Family::BatchNorm)).backward;
        backward(
            &self.dev,
            self.ptr(),
            w.ptr(),
            g.ptr(),
            mean.ptr(),
            var.ptr(),
            dx.ptr(),
            dw.ptr(),
            db.ptr(),
            n,
            c,
            hw,
            eps,
            training,
            elem(self.dtype),
        )?;
        Ok((dx, dw, db))
    }
}

//! The random ops on the GPU: `kernels/random/01_philox.cu` computes every value on the device
//! from the draw's (seed, offset); nothing is drawn on the host or copied.

use super::{Fill, RandomKernels};
use crate::backend::cuda::{
    alloc, device, elem, err_slot, expect, expect_float, like, CudaStorage,
};
use crate::rng::Philox;
use crate::{DType, Result};
use camel_cuda::kernels as k;

impl RandomKernels for CudaStorage {
    fn bernoulli(&self, at: Philox) -> Result<Self> {
        expect("bernoulli", self, DType::F32)?;
        let out = like(self, self.len, DType::F32)?;
        k::random::bernoulli_f32(
            &self.dev,
            self.ptr(),
            out.ptr(),
            self.len,
            at.seed,
            at.offset,
        )?;
        Ok(out)
    }

    fn dropout_mask(&self, at: Philox, p: f32, scale: f32) -> Result<Self> {
        // f32, or f16/bf16 widened in the kernel and rounded once
        expect_float("dropout", self)?;
        let out = like(self, self.len, self.dtype)?;
        let (x, y, n, e) = (self.ptr(), out.ptr(), self.len, elem(self.dtype));
        k::random::dropout(&self.dev, x, y, n, at.seed, at.offset, p, scale, e)?;
        Ok(out)
    }

    fn multinomial(
        &self,
        rows: usize,
        k: usize,
        samples: usize,
        replacement: bool,
        at: Philox,
    ) -> Result<Self> {
        expect("multinomial", self, DType::F32)?;
        let out = like(self, rows * samples, DType::I64)?;
        // running sums (with replacement) or the weights left (without), one row each
        let scratch = like(self, rows * k, DType::F32)?;
        let err = err_slot(&self.dev)?;
        let launch = if replacement {
            k::random::multinomial_replacement
        } else {
            k::random::multinomial_no_replacement
        };
        let dims = [rows, k, samples];
        let (w, s, o) = (self.ptr(), scratch.ptr(), out.ptr());
        launch(&self.dev, w, s, o, dims, at.seed, at.offset, err)?;
        Ok(out)
    }
}

/// `n` values of `fill` drawn at `at`, made on GPU `ordinal`.
pub(crate) fn fill(ordinal: usize, n: usize, fill: Fill, at: Philox) -> Result<CudaStorage> {
    let dev = device(ordinal)?;
    let out = alloc(&dev, n, DType::F32)?;
    let (o, seed, offset) = (out.ptr(), at.seed, at.offset);
    match fill {
        Fill::Uniform { lo, hi } => k::random::uniform_f32(&dev, o, n, seed, offset, lo, hi)?,
        Fill::Normal => k::random::normal_f32(&dev, o, n, seed, offset)?,
        Fill::Bernoulli { p } => k::random::bernoulli_scalar_f32(&dev, o, n, seed, offset, p)?,
    }
    Ok(out)
}

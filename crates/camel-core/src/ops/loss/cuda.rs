//! The cross-entropy on the GPU: the loss ladder (`kernels/loss`). At its top step the mean
//! over the rows is fused into the kernel, one launch each way; below it, per-row kernels are
//! followed by a sum and a scale.

use super::LossKernels;
use crate::backend::cuda::{self, CudaStorage, Family};
use crate::config::step;
use crate::ops::elementwise::{BinaryOp, UnaryOp};
use crate::ops::reduce::ReduceOp;
use crate::Result;
use camel_cuda::kernels::rows::Step;

impl LossKernels for CudaStorage {
    fn cross_entropy_mean(
        &self,
        t: &Self,
        rows: usize,
        cols: usize,
    ) -> Result<(Self, Option<Self>)> {
        if let Some((mean, stats)) = cuda::cross_entropy_mean_fwd(self, t, rows, cols)? {
            return Ok((mean, Some(stats)));
        }
        let (loss, stats) = cuda::cross_entropy_fwd_stats(self, t, rows, cols)?;
        let sum = cuda::reduce(&loss, 1, rows, 1, ReduceOp::Sum)?;
        let mean = cuda::unary(&sum, UnaryOp::MulScalar(1.0 / rows as f32))?;
        Ok((mean, stats))
    }

    fn cross_entropy_mean_bwd(
        &self,
        t: &Self,
        stats: Option<&Self>,
        g: &Self,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        if let (Step::Four, Some(s)) = (step(Family::CrossEntropy), stats) {
            return cuda::cross_entropy_mean_bwd(self, t, s, g, rows, cols);
        }
        // every row's upstream gradient is g / rows
        let scale = cuda::full(self.ordinal(), rows, 1.0 / rows as f32)?;
        let g_row = cuda::binary(&scale, g, &[rows], &[1], &[rows], BinaryOp::Mul)?;
        cuda::cross_entropy_bwd_stats(self, t, stats, &g_row, rows, cols)
    }
}

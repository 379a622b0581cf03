//! The CPU reference of the reductions.

use super::{ReduceKernels, ReduceOp};
use crate::backend::cpu::CpuStorage;
use crate::Result;

impl ReduceKernels for CpuStorage {
    fn reduce(&self, outer: usize, dim: usize, inner: usize, op: ReduceOp) -> Result<Self> {
        Ok(CpuStorage::F32(reduce(
            self.f32("reduce")?,
            outer,
            dim,
            inner,
            op,
        )))
    }

    fn argmax_last(&self, rows: usize, cols: usize) -> Result<Self> {
        Ok(CpuStorage::I64(argmax_last(
            self.f32("argmax")?,
            rows,
            cols,
        )))
    }
}

/// Reduce `x` viewed as `[outer, dim, inner]` along the middle axis → `[outer, inner]`.
pub fn reduce(x: &[f32], outer: usize, dim: usize, inner: usize, op: ReduceOp) -> Vec<f32> {
    let mut out = vec![
        match op {
            ReduceOp::Sum => 0.0,
            ReduceOp::Max => f32::NEG_INFINITY,
        };
        outer * inner
    ];
    for o in 0..outer {
        let base = o * dim * inner;
        let acc = &mut out[o * inner..(o + 1) * inner];
        for d in 0..dim {
            let row = &x[base + d * inner..base + (d + 1) * inner];
            match op {
                ReduceOp::Sum => acc.iter_mut().zip(row).for_each(|(a, &v)| *a += v),
                ReduceOp::Max => acc.iter_mut().zip(row).for_each(|(a, &v)| {
                    // NaN propagates, as in PyTorch
                    if v > *a || v.is_nan() {
                        *a = v
                    }
                }),
            }
        }
    }
    out
}

/// Index of the largest element of each row of a `[rows, cols]` matrix (first one on ties; the
/// first NaN where a row has one, as `torch.argmax`). `cols` is at least 1.
pub fn argmax_last(x: &[f32], rows: usize, cols: usize) -> Vec<i64> {
    (0..rows)
        .map(|r| {
            let row = &x[r * cols..(r + 1) * cols];
            let mut best = 0;
            for (j, &v) in row.iter().enumerate() {
                let b = row[best];
                if !b.is_nan() && (v > b || v.is_nan()) {
                    best = j;
                }
            }
            best as i64
        })
        .collect()
}

//! The CPU reference of the reductions.

use super::{ReduceKernels, ReduceOp};
use crate::backend::cpu::CpuStorage;
use crate::Result;

impl ReduceKernels for CpuStorage {
    /// f32 whatever the float input: f16 and bf16 widen first.
    fn reduce(&self, outer: usize, dim: usize, inner: usize, op: ReduceOp) -> Result<Self> {
        Ok(CpuStorage::F32(reduce(
            &self.f32_widened("reduce")?,
            outer,
            dim,
            inner,
            op,
        )))
    }

    fn argmax_last(&self, rows: usize, cols: usize) -> Result<Self> {
        Ok(CpuStorage::I64(arg_extreme_last(
            &self.f32_widened("argmax")?,
            rows,
            cols,
            false,
        )))
    }

    fn argmin_last(&self, rows: usize, cols: usize) -> Result<Self> {
        Ok(CpuStorage::I64(arg_extreme_last(
            &self.f32_widened("argmin")?,
            rows,
            cols,
            true,
        )))
    }

    /// f32 whatever the float input: f16 and bf16 widen first.
    fn var_rows(&self, rows: usize, cols: usize, correction: usize) -> Result<Self> {
        Ok(CpuStorage::F32(var_rows(
            &self.f32_widened("var")?,
            rows,
            cols,
            correction,
        )))
    }
}

/// The variance of each row of `[rows, cols]`, accumulated in f64 in two passes (the mean,
/// then the squared deviations), divided by `cols − correction` (0/0 = NaN where `cols ≤
/// correction`, as `torch.var`).
pub fn var_rows(x: &[f32], rows: usize, cols: usize, correction: usize) -> Vec<f32> {
    let den = cols.saturating_sub(correction) as f64;
    (0..rows)
        .map(|r| {
            let row = &x[r * cols..(r + 1) * cols];
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
            let q: f64 = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum();
            (q / den) as f32
        })
        .collect()
}

/// Reduce `x` viewed as `[outer, dim, inner]` along the middle axis → `[outer, inner]`.
pub fn reduce(x: &[f32], outer: usize, dim: usize, inner: usize, op: ReduceOp) -> Vec<f32> {
    let mut out = vec![
        match op {
            ReduceOp::Sum => 0.0,
            ReduceOp::Max => f32::NEG_INFINITY,
            ReduceOp::Min => f32::INFINITY,
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
                ReduceOp::Min => acc.iter_mut().zip(row).for_each(|(a, &v)| {
                    if v < *a || v.is_nan() {
                        *a = v
                    }
                }),
            }
        }
    }
    out
}

/// Index of the largest (`min`: smallest) element of each row of a `[rows, cols]` matrix (first
/// one on ties; the first NaN where a row has one, as `torch.argmax`/`argmin`). `cols` is at
/// least 1.
pub fn arg_extreme_last(x: &[f32], rows: usize, cols: usize, min: bool) -> Vec<i64> {
    (0..rows)
        .map(|r| {
            let row = &x[r * cols..(r + 1) * cols];
            let mut best = 0;
            for (j, &v) in row.iter().enumerate() {
                let b = row[best];
                let better = if min { v < b } else { v > b };
                if !b.is_nan() && (better || v.is_nan()) {
                    best = j;
                }
            }
            best as i64
        })
        .collect()
}

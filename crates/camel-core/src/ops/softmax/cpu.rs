//! The CPU reference of softmax and log-softmax.

use super::SoftmaxKernels;
use crate::backend::cpu::CpuStorage;
use crate::{Error, Result};

impl SoftmaxKernels for CpuStorage {
    /// In the input's dtype: f16 and bf16 widen to f32 and the result rounds once.
    fn softmax_last(&self, rows: usize, cols: usize, log: bool) -> Result<Self> {
        let x = self.f32_widened("softmax")?;
        let y = softmax_last(&x, rows, cols, log);
        Ok(CpuStorage::from_f32_vec(y, self.dtype()))
    }

    /// In `y`'s dtype (`g` of the same): computed in f32 from the widened `y` and `g`, `dx`
    /// rounded once.
    fn softmax_last_bwd(&self, g: &Self, rows: usize, cols: usize, log: bool) -> Result<Self> {
        let op = "softmax backward";
        if g.dtype() != self.dtype() {
            return Err(Error::DTypeMismatch {
                op,
                expected: self.dtype(),
                got: g.dtype(),
            });
        }
        let dx = softmax_last_bwd(&self.f32_widened(op)?, &g.f32_widened(op)?, rows, cols, log);
        Ok(CpuStorage::from_f32_vec(dx, self.dtype()))
    }
}

/// Softmax (or log-softmax) of each row of a `[rows, cols]` matrix, max-subtracted for stability.
pub fn softmax_last(x: &[f32], rows: usize, cols: usize, log: bool) -> Vec<f32> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let o = &mut out[r * cols..(r + 1) * cols];
        let mx = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f32;
        for (oi, &v) in o.iter_mut().zip(row) {
            *oi = (v - mx).exp();
            sum += *oi;
        }
        if log {
            let lse = sum.ln();
            for (oi, &v) in o.iter_mut().zip(row) {
                *oi = v - mx - lse;
            }
        } else {
            let inv = 1.0 / sum;
            o.iter_mut().for_each(|v| *v *= inv);
        }
    }
    out
}

/// Backward of [`softmax_last`] from its output `y`: `dx = y ⊙ (g − Σ g⊙y)`, or for
/// log-softmax `dx = g − exp(y) · Σ g`, per row.
pub fn softmax_last_bwd(y: &[f32], g: &[f32], rows: usize, cols: usize, log: bool) -> Vec<f32> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        let (yr, gr) = (&y[r * cols..(r + 1) * cols], &g[r * cols..(r + 1) * cols]);
        let o = &mut out[r * cols..(r + 1) * cols];
        if log {
            let s: f32 = gr.iter().sum();
            for ((oi, &yi), &gi) in o.iter_mut().zip(yr).zip(gr) {
                *oi = gi - yi.exp() * s;
            }
        } else {
            let dot: f32 = yr.iter().zip(gr).map(|(&a, &b)| a * b).sum();
            for ((oi, &yi), &gi) in o.iter_mut().zip(yr).zip(gr) {
                *oi = yi * (gi - dot);
            }
        }
    }
    out
}

//! The CPU reference of LayerNorm (statistics in f64).

use super::LayerNormKernels;
use crate::backend::cpu::CpuStorage;
use crate::{Error, Result};

impl LayerNormKernels for CpuStorage {
    /// In the input's dtype (γ and β of the same): f16 and bf16 widen to f32 and `y` rounds
    /// once; the statistics are f32.
    fn layer_norm_fwd(
        &self,
        gamma: &Self,
        beta: &Self,
        rows: usize,
        cols: usize,
        eps: f32,
    ) -> Result<(Self, Self, Self)> {
        let op = "layer_norm";
        same_dtype(op, self, &[gamma, beta])?;
        let (y, m, r) = layer_norm_fwd(
            &self.f32_widened(op)?,
            &gamma.f32_widened(op)?,
            &beta.f32_widened(op)?,
            rows,
            cols,
            eps,
        );
        let y = CpuStorage::from_f32_vec(y, self.dtype());
        Ok((y, CpuStorage::F32(m), CpuStorage::F32(r)))
    }

    /// In `x`'s dtype (γ and `g` of the same): computed in f32, each gradient rounded once.
    fn layer_norm_bwd(
        &self,
        gamma: &Self,
        g: &Self,
        mean: &Self,
        rstd: &Self,
        rows: usize,
        cols: usize,
    ) -> Result<(Self, Self, Self)> {
        let op = "layer_norm backward";
        same_dtype(op, self, &[gamma, g])?;
        let (dx, dg, db) = layer_norm_bwd(
            &self.f32_widened(op)?,
            &gamma.f32_widened(op)?,
            &g.f32_widened(op)?,
            mean.f32(op)?,
            rstd.f32(op)?,
            rows,
            cols,
        );
        let dt = self.dtype();
        Ok((
            CpuStorage::from_f32_vec(dx, dt),
            CpuStorage::from_f32_vec(dg, dt),
            CpuStorage::from_f32_vec(db, dt),
        ))
    }
}

/// Error naming `op` unless every storage of `others` has `x`'s dtype.
fn same_dtype(op: &'static str, x: &CpuStorage, others: &[&CpuStorage]) -> Result<()> {
    match others.iter().find(|s| s.dtype() != x.dtype()) {
        Some(s) => Err(Error::DTypeMismatch {
            op,
            expected: x.dtype(),
            got: s.dtype(),
        }),
        None => Ok(()),
    }
}

/// LayerNorm of each row of `[rows, cols]`: `y = (x − mean)·rstd·γ + β`, rstd = 1/√(var + eps)
/// with the biased variance. Returns `(y, mean, rstd)`; statistics in f64 here.
pub fn layer_norm_fwd(
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    rows: usize,
    cols: usize,
    eps: f32,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut y = vec![0.0; rows * cols];
    let (mut mean, mut rstd) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let mu = row.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
        let var = row.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / cols as f64;
        let rs = 1.0 / (var + eps as f64).sqrt();
        for (c, (o, &v)) in y[r * cols..(r + 1) * cols].iter_mut().zip(row).enumerate() {
            *o = ((v as f64 - mu) * rs) as f32 * gamma[c] + beta[c];
        }
        mean.push(mu as f32);
        rstd.push(rs as f32);
    }
    (y, mean, rstd)
}

/// LayerNorm backward: `(dx, dγ, dβ)` with x̂ = (x − mean)·rstd and ĝ = g·γ:
/// `dx = rstd·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂))`, `dγ = Σ_rows g·x̂`, `dβ = Σ_rows g`.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_bwd(
    x: &[f32],
    gamma: &[f32],
    g: &[f32],
    mean: &[f32],
    rstd: &[f32],
    rows: usize,
    cols: usize,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut dx = vec![0.0; rows * cols];
    let (mut dgamma, mut dbeta) = (vec![0.0f64; cols], vec![0.0f64; cols]);
    for r in 0..rows {
        let (xr, gr) = (&x[r * cols..(r + 1) * cols], &g[r * cols..(r + 1) * cols]);
        let (mu, rs) = (mean[r] as f64, rstd[r] as f64);
        let (mut s1, mut s2) = (0.0f64, 0.0f64);
        for c in 0..cols {
            let h = gr[c] as f64 * gamma[c] as f64;
            s1 += h;
            s2 += h * (xr[c] as f64 - mu) * rs;
        }
        let (a, b) = (s1 / cols as f64, s2 / cols as f64);
        for c in 0..cols {
            let xh = (xr[c] as f64 - mu) * rs;
            let h = gr[c] as f64 * gamma[c] as f64;
            dx[r * cols + c] = (rs * (h - a - xh * b)) as f32;
            dgamma[c] += gr[c] as f64 * xh;
            dbeta[c] += gr[c] as f64;
        }
    }
    let f = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect();
    (dx, f(dgamma), f(dbeta))
}

//! The CPU reference of the cross-entropy: per-row losses and statistics, then their mean.

use super::LossKernels;
use crate::backend::cpu::CpuStorage;
use crate::{Error, Result};

impl LossKernels for CpuStorage {
    fn cross_entropy_mean(
        &self,
        t: &Self,
        rows: usize,
        cols: usize,
    ) -> Result<(Self, Option<Self>)> {
        let op = "cross_entropy";
        let x = self.f32_widened(op)?;
        let (loss, stats) = cross_entropy_fwd_stats(&x, t.i64(op)?, rows, cols)?;
        let mean = loss.iter().sum::<f32>() / rows as f32;
        Ok((CpuStorage::F32(vec![mean]), Some(CpuStorage::F32(stats))))
    }

    fn cross_entropy_mean_bwd(
        &self,
        t: &Self,
        stats: Option<&Self>,
        g: &Self,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        let op = "cross_entropy backward";
        let (x, t) = (self.f32_widened(op)?, t.i64(op)?);
        let stats = match stats {
            Some(s) => s.f32(op)?.to_vec(),
            None => cross_entropy_fwd_stats(&x, t, rows, cols)?.1,
        };
        let g_row = vec![g.f32(op)?[0] / rows as f32; rows];
        let dx = cross_entropy_bwd_stats(&x, t, &stats, &g_row, rows, cols)?;
        // the logits' dtype, rounded once
        Ok(CpuStorage::from_f32_vec(dx, self.dtype()))
    }

    /// Summed in f64 over the widened elements, then scaled and rounded to f32.
    fn mse_mean(&self, b: &Self, n: usize) -> Result<Self> {
        let (x, y) = (self.f32_widened("mse")?, widened_like(self, b, "mse")?);
        let sum: f64 = x
            .iter()
            .zip(y.iter())
            .map(|(&p, &q)| {
                let d = (p - q) as f64;
                d * d
            })
            .sum();
        Ok(CpuStorage::F32(vec![(sum / n as f64) as f32]))
    }

    fn mse_bwd(
        &self,
        b: &Self,
        g: &Self,
        n: usize,
        scale: f32,
        want: [bool; 2],
    ) -> Result<(Option<Self>, Option<Self>)> {
        let op = "mse backward";
        let (x, y) = (self.f32_widened(op)?, widened_like(self, b, op)?);
        let k = scale * g.f32(op)?[0];
        let grad = |sign: f32| -> Result<Self> {
            let mut d = crate::backend::cpu::try_vec(op, n)?;
            d.extend(x.iter().zip(y.iter()).map(|(&p, &q)| sign * (k * (p - q))));
            Ok(CpuStorage::from_f32_vec(d, self.dtype()))
        };
        let da = if want[0] { Some(grad(1.0)?) } else { None };
        let db = if want[1] { Some(grad(-1.0)?) } else { None };
        Ok((da, db))
    }
}

/// `b`'s data widened to f32, or a dtype error naming `op` unless it has `a`'s dtype.
fn widened_like<'a>(
    a: &CpuStorage,
    b: &'a CpuStorage,
    op: &'static str,
) -> Result<std::borrow::Cow<'a, [f32]>> {
    if b.dtype() != a.dtype() {
        return Err(Error::DTypeMismatch {
            op,
            expected: a.dtype(),
            got: b.dtype(),
        });
    }
    b.f32_widened(op)
}

fn check_target(t: i64, cols: usize) -> Result<usize> {
    if t < 0 || t as usize >= cols {
        return Err(Error::IndexOutOfRange {
            op: "cross_entropy",
            index: t,
            size: cols,
        });
    }
    Ok(t as usize)
}

/// Per-row cross-entropy and the row statistics the backward reuses: `stats[2r]` = max of the
/// row, `stats[2r+1]` = Σ exp(x − max).
pub fn cross_entropy_fwd_stats(
    x: &[f32],
    t: &[i64],
    rows: usize,
    cols: usize,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let mut loss = Vec::with_capacity(rows);
    let mut stats = Vec::with_capacity(2 * rows);
    for r in 0..rows {
        let tr = check_target(t[r], cols)?;
        let row = &x[r * cols..(r + 1) * cols];
        let mx = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let s: f32 = row.iter().map(|&v| (v - mx).exp()).sum();
        loss.push((mx - row[tr]) + s.ln());
        stats.extend([mx, s]);
    }
    Ok((loss, stats))
}

/// Gradient of the per-row cross-entropy from the forward's statistics:
/// `dx = g_r · (exp(x − m_r)/s_r − onehot(t_r))`.
pub fn cross_entropy_bwd_stats(
    x: &[f32],
    t: &[i64],
    stats: &[f32],
    g: &[f32],
    rows: usize,
    cols: usize,
) -> Result<Vec<f32>> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        let tr = check_target(t[r], cols)?;
        let (m, inv) = (stats[2 * r], 1.0 / stats[2 * r + 1]);
        let row = &x[r * cols..(r + 1) * cols];
        let o = &mut out[r * cols..(r + 1) * cols];
        for (c, (oi, &v)) in o.iter_mut().zip(row).enumerate() {
            let hot = if c == tr { 1.0 } else { 0.0 };
            *oi = g[r] * ((v - m).exp() * inv - hot);
        }
    }
    Ok(out)
}

//! The CPU reference of BatchNorm (statistics and sums in f64). An f16 or bf16 input widens to
//! f32 and each output (y, dx) rounds once to its dtype; the weight, bias and statistics are f32.

use super::BatchNormKernels;
use crate::backend::cpu::{try_filled, CpuStorage};
use crate::Result;

impl BatchNormKernels for CpuStorage {
    fn batch_norm_fwd(
        &self,
        w: &Self,
        b: &Self,
        n: usize,
        c: usize,
        hw: usize,
        eps: f32,
    ) -> Result<(Self, Self, Self)> {
        let op = "batch_norm";
        let mut y = try_filled(op, n * c * hw, 0.0f32)?;
        let x = self.f32_widened(op)?;
        let (mean, var) = batch_norm_fwd(&x, w.f32(op)?, b.f32(op)?, &mut y, n, c, hw, eps);
        Ok((
            CpuStorage::from_f32_vec(y, self.dtype()),
            CpuStorage::F32(mean),
            CpuStorage::F32(var),
        ))
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
        let op = "batch_norm_eval";
        let mut y = try_filled(op, n * c * hw, 0.0f32)?;
        batch_norm_eval(
            &self.f32_widened(op)?,
            mean.f32(op)?,
            var.f32(op)?,
            w.f32(op)?,
            b.f32(op)?,
            &mut y,
            n,
            c,
            hw,
            eps,
        );
        Ok(CpuStorage::from_f32_vec(y, self.dtype()))
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
        let op = "batch_norm backward";
        let mut dx = try_filled(op, n * c * hw, 0.0f32)?;
        if g.dtype() != self.dtype() {
            return Err(crate::Error::DTypeMismatch {
                op,
                expected: self.dtype(),
                got: g.dtype(),
            });
        }
        let (dw, db) = batch_norm_bwd(
            &self.f32_widened(op)?,
            w.f32(op)?,
            &g.f32_widened(op)?,
            mean.f32(op)?,
            var.f32(op)?,
            &mut dx,
            n,
            c,
            hw,
            eps,
            training,
        );
        Ok((
            CpuStorage::from_f32_vec(dx, self.dtype()),
            CpuStorage::F32(dw),
            CpuStorage::F32(db),
        ))
    }
}

/// The offsets of channel `ch`'s values in `[n, c, hw]`: sample by sample, each a run of `hw`.
fn channel(n: usize, c: usize, hw: usize, ch: usize) -> impl Iterator<Item = usize> {
    (0..n).flat_map(move |s| {
        let base = (s * c + ch) * hw;
        base..base + hw
    })
}

/// Training forward of `x` (`[n, c, hw]`) into `y`: per channel the mean and biased variance
/// (two passes in f64), `y = (x − mean)/√(var + eps)·w + b`. Returns `(mean, var)`.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm_fwd(
    x: &[f32],
    w: &[f32],
    b: &[f32],
    y: &mut [f32],
    n: usize,
    c: usize,
    hw: usize,
    eps: f32,
) -> (Vec<f32>, Vec<f32>) {
    let m = (n * hw) as f64;
    let (mut mean, mut var) = (Vec::with_capacity(c), Vec::with_capacity(c));
    for ch in 0..c {
        let mu = channel(n, c, hw, ch).map(|o| x[o] as f64).sum::<f64>() / m;
        let v = channel(n, c, hw, ch)
            .map(|o| (x[o] as f64 - mu).powi(2))
            .sum::<f64>()
            / m;
        let rs = 1.0 / (v + eps as f64).sqrt();
        for o in channel(n, c, hw, ch) {
            y[o] = ((x[o] as f64 - mu) * rs * w[ch] as f64 + b[ch] as f64) as f32;
        }
        mean.push(mu as f32);
        var.push(v as f32);
    }
    (mean, var)
}

/// Eval forward of `x` (`[n, c, hw]`) into `y` with given per-channel `mean` and `var`:
/// `y = (x − mean)/√(var + eps)·w + b`.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm_eval(
    x: &[f32],
    mean: &[f32],
    var: &[f32],
    w: &[f32],
    b: &[f32],
    y: &mut [f32],
    n: usize,
    c: usize,
    hw: usize,
    eps: f32,
) {
    for ch in 0..c {
        let rs = 1.0 / (var[ch] as f64 + eps as f64).sqrt();
        let (mu, wc, bc) = (mean[ch] as f64, w[ch] as f64, b[ch] as f64);
        for o in channel(n, c, hw, ch) {
            y[o] = ((x[o] as f64 - mu) * rs * wc + bc) as f32;
        }
    }
}

/// BatchNorm backward into `dx`, returning `(dw, db)`. With x̂ = (x − mean)·rstd,
/// rstd = 1/√(var + eps), per channel over its `m` values: `dw = Σ g·x̂`, `db = Σ g`, and
/// `dx = w·rstd·(g − db/m − x̂·dw/m)` in training (the statistics depend on x), `dx = w·rstd·g`
/// in eval.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm_bwd(
    x: &[f32],
    w: &[f32],
    g: &[f32],
    mean: &[f32],
    var: &[f32],
    dx: &mut [f32],
    n: usize,
    c: usize,
    hw: usize,
    eps: f32,
    training: bool,
) -> (Vec<f32>, Vec<f32>) {
    let m = (n * hw) as f64;
    let (mut dw, mut db) = (Vec::with_capacity(c), Vec::with_capacity(c));
    for ch in 0..c {
        let (mu, rs) = (mean[ch] as f64, 1.0 / (var[ch] as f64 + eps as f64).sqrt());
        let (mut sg, mut sgx) = (0.0f64, 0.0f64);
        for o in channel(n, c, hw, ch) {
            sg += g[o] as f64;
            sgx += g[o] as f64 * (x[o] as f64 - mu) * rs;
        }
        let wr = w[ch] as f64 * rs;
        for o in channel(n, c, hw, ch) {
            let gv = g[o] as f64;
            dx[o] = if training {
                let xh = (x[o] as f64 - mu) * rs;
                wr * (gv - sg / m - xh * sgx / m)
            } else {
                wr * gv
            } as f32;
        }
        dw.push(sgx as f32);
        db.push(sg as f32);
    }
    (dw, db)
}

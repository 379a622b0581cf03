//! The CPU backend: [`CpuStorage`], host data of one dtype. Each op's CPU reference lives in its
//! folder (`ops/<op>/cpu.rs`) as plain loops over slices, written to be read; every CUDA kernel
//! is tested against them.

use super::UpdateRule;
use crate::ops::softmax::cpu::softmax_last;
use crate::{DType, Error, Result};

/// Host data, one variant per dtype.
#[derive(Clone, Debug)]
pub enum CpuStorage {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

impl CpuStorage {
    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            CpuStorage::F32(_) => DType::F32,
            CpuStorage::I64(_) => DType::I64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            CpuStorage::F32(v) => v.len(),
            CpuStorage::I64(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The f32 data, or a dtype error naming `op`.
    pub(crate) fn f32(&self, op: &'static str) -> Result<&[f32]> {
        match self {
            CpuStorage::F32(v) => Ok(v),
            CpuStorage::I64(_) => Err(Error::DTypeMismatch {
                op,
                expected: DType::F32,
                got: DType::I64,
            }),
        }
    }

    /// The i64 data, or a dtype error naming `op`.
    pub(crate) fn i64(&self, op: &'static str) -> Result<&[i64]> {
        match self {
            CpuStorage::I64(v) => Ok(v),
            CpuStorage::F32(_) => Err(Error::DTypeMismatch {
                op,
                expected: DType::I64,
                got: DType::F32,
            }),
        }
    }
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

/// Per-row cross-entropy `logsumexp(x_r) - x_r[t_r]` of `[rows, cols]` logits.
pub fn cross_entropy_fwd(x: &[f32], t: &[i64], rows: usize, cols: usize) -> Result<Vec<f32>> {
    let mut out = Vec::with_capacity(rows);
    for r in 0..rows {
        let tr = check_target(t[r], cols)?;
        let row = &x[r * cols..(r + 1) * cols];
        let mx = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let s: f32 = row.iter().map(|&v| (v - mx).exp()).sum();
        out.push((mx - row[tr]) + s.ln());
    }
    Ok(out)
}

/// Gradient of the per-row cross-entropy: `g_r * (softmax(x_r) - onehot(t_r))`.
pub fn cross_entropy_bwd(
    x: &[f32],
    t: &[i64],
    g: &[f32],
    rows: usize,
    cols: usize,
) -> Result<Vec<f32>> {
    let mut out = softmax_last(x, rows, cols, false);
    for r in 0..rows {
        let tr = check_target(t[r], cols)?;
        let o = &mut out[r * cols..(r + 1) * cols];
        o[tr] -= 1.0;
        o.iter_mut().for_each(|v| *v *= g[r]);
    }
    Ok(out)
}

/// One optimizer step in place. `state` holds the rule's buffers: `[momentum]` for SGD
/// (unused when momentum is 0), `[m, v]` for Adam.
pub fn update(p: &mut [f32], g: &[f32], state: &mut [&mut [f32]], rule: &UpdateRule) {
    match *rule {
        UpdateRule::Sgd {
            lr,
            momentum,
            weight_decay,
        } => {
            if momentum == 0.0 {
                for (pi, &gi) in p.iter_mut().zip(g) {
                    *pi -= lr * (gi + weight_decay * *pi);
                }
            } else {
                let buf = &mut state[0];
                for ((pi, &gi), bi) in p.iter_mut().zip(g).zip(buf.iter_mut()) {
                    *bi = momentum * *bi + gi + weight_decay * *pi;
                    *pi -= lr * *bi;
                }
            }
        }
        UpdateRule::Adam {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            bc1,
            bc2,
        } => {
            let (ms, vs) = state.split_at_mut(1);
            let (m, v) = (&mut ms[0], &mut vs[0]);
            for i in 0..p.len() {
                let mut gi = g[i];
                if decoupled {
                    p[i] -= lr * weight_decay * p[i];
                } else {
                    gi += weight_decay * p[i];
                }
                m[i] = beta1 * m[i] + (1.0 - beta1) * gi;
                v[i] = beta2 * v[i] + (1.0 - beta2) * gi * gi;
                let mh = m[i] / bc1;
                let vh = v[i] / bc2;
                p[i] -= lr * mh / (vh.sqrt() + eps);
            }
        }
    }
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

/// The geometry of a matrix product (camel-cuda's `Gemm`, under its former name).
pub type MatmulSpec = crate::ops::matmul::Gemm;

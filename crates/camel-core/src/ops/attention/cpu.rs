//! The CPU reference of fused attention: each query row's scores, softmax and weighted sum of
//! values, and the backward recomputed from the saved log-sum-exp, in f32 with f64 sums. With
//! dropout the weights are multiplied by the kernels' mask (`AttnGeom::dropout_row_multipliers`):
//! `O = (P ⊙ Z)·V`, `dV = (P ⊙ Z)ᵀ·dO`, `dS = P ⊙ (Z ⊙ dP − Δ)`.

use super::{AttentionKernels, Attn};
use crate::backend::cpu::{try_filled, CpuStorage};
use crate::Result;

/// Row `t` of head `(bb, hh)` of an operand at `off` with strides `st`.
fn row(x: &[f32], off: usize, st: [usize; 3], bb: usize, hh: usize, t: usize, d: usize) -> &[f32] {
    let s = off + bb * st[0] + hh * st[1] + t * st[2];
    &x[s..s + d]
}

/// Offset of token `t` of head `(bb, hh)` in a dense `[B, T, H, D]` tensor.
fn bthd(a: &Attn, bb: usize, hh: usize, t: usize, tt: usize) -> usize {
    ((bb * tt + t) * a.g.h + hh) * a.g.d
}

fn dot(x: &[f32], y: &[f32]) -> f64 {
    x.iter().zip(y).map(|(&a, &b)| a as f64 * b as f64).sum()
}

impl AttentionKernels for CpuStorage {
    fn attention(&self, k: &Self, v: &Self, a: &Attn) -> Result<(Self, Self)> {
        const OP: &str = "attention";
        let (q, k, v) = (self.f32(OP)?, k.f32(OP)?, v.f32(OP)?);
        let g = &a.g;
        let mut o = try_filled(OP, g.rows() * g.d, 0.0f32)?;
        let mut lse = try_filled(OP, g.rows(), 0.0f32)?;
        let mut p = vec![0.0f64; g.tk];
        for bb in 0..g.b {
            for hh in 0..g.h {
                for i in 0..g.tq {
                    let n = g.visible(i);
                    let qi = row(q, a.off[0], g.q, bb, hh, i, g.d);
                    for (j, pj) in p[..n].iter_mut().enumerate() {
                        *pj = g.scale as f64 * dot(qi, row(k, a.off[1], g.k, bb, hh, j, g.d));
                    }
                    // a NaN score is skipped by the max and reaches the sum through its exp
                    let m = p[..n].iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let mut l = 0.0;
                    for pj in &mut p[..n] {
                        *pj = (*pj - m).exp();
                        l += *pj;
                    }
                    // dropout multiplies the weights after the softmax; l stays the softmax's
                    let bh = bb * g.h + hh;
                    let z: Vec<f64> = g
                        .dropout_row_multipliers(bh, i, n)
                        .into_iter()
                        .map(f64::from)
                        .collect();
                    let out = &mut o[bthd(a, bb, hh, i, g.tq)..][..g.d];
                    for (e, oe) in out.iter_mut().enumerate() {
                        let s: f64 = (0..n)
                            .map(|j| p[j] * z[j] * row(v, a.off[2], g.v, bb, hh, j, g.d)[e] as f64)
                            .sum();
                        *oe = (s / l) as f32;
                    }
                    lse[(bb * g.h + hh) * g.tq + i] = (m + l.ln()) as f32;
                }
            }
        }
        Ok((CpuStorage::F32(o), CpuStorage::F32(lse)))
    }

    fn attention_bwd(
        &self,
        k: &Self,
        v: &Self,
        o: &Self,
        dout: &Self,
        lse: &Self,
        a: &Attn,
    ) -> Result<(Self, Self, Self)> {
        const OP: &str = "attention backward";
        let (q, k, v) = (self.f32(OP)?, k.f32(OP)?, v.f32(OP)?);
        let (o, dout, lse) = (o.f32(OP)?, dout.f32(OP)?, lse.f32(OP)?);
        let g = &a.g;
        let mut dq = try_filled(OP, g.rows() * g.d, 0.0f64)?;
        let mut dk = try_filled(OP, g.b * g.h * g.tk * g.d, 0.0f64)?;
        let mut dv = try_filled(OP, g.b * g.h * g.tk * g.d, 0.0f64)?;
        let sc = g.scale as f64;
        for bb in 0..g.b {
            for hh in 0..g.h {
                for i in 0..g.tq {
                    let qi = row(q, a.off[0], g.q, bb, hh, i, g.d);
                    let oi = bthd(a, bb, hh, i, g.tq);
                    let (doi, o_i) = (&dout[oi..oi + g.d], &o[oi..oi + g.d]);
                    let delta = dot(doi, o_i);
                    let l = lse[(bb * g.h + hh) * g.tq + i] as f64;
                    let zs = g.dropout_row_multipliers(bb * g.h + hh, i, g.visible(i));
                    for (j, &z) in zs.iter().enumerate() {
                        let (kj, vj) = (
                            row(k, a.off[1], g.k, bb, hh, j, g.d),
                            row(v, a.off[2], g.v, bb, hh, j, g.d),
                        );
                        let p = (sc * dot(qi, kj) - l).exp();
                        let z = z as f64;
                        let ds = p * (z * dot(doi, vj) - delta);
                        let kv = bthd(a, bb, hh, j, g.tk);
                        for e in 0..g.d {
                            dv[kv + e] += p * z * doi[e] as f64;
                            dk[kv + e] += sc * ds * qi[e] as f64;
                            dq[oi + e] += sc * ds * kj[e] as f64;
                        }
                    }
                }
            }
        }
        let f = |x: Vec<f64>| CpuStorage::F32(x.into_iter().map(|v| v as f32).collect());
        Ok((f(dq), f(dk), f(dv)))
    }
}

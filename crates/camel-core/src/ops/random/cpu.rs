//! The CPU reference of the random ops: plain loops over the Philox stream, one counter (four
//! values) at a time. `kernels/random/01_philox.cu` computes the same values on the GPU.

use super::{Fill, RandomKernels};
use crate::backend::cpu::{try_vec, CpuStorage};
use crate::rng::{box_muller, uniform01, Philox};
use crate::{Error, Result};

impl RandomKernels for CpuStorage {
    fn bernoulli(&self, at: Philox) -> Result<Self> {
        let p = self.f32("bernoulli")?;
        let mut out = try_vec("bernoulli", p.len())?;
        out.extend(p.iter().enumerate().map(|(i, &pi)| {
            if (0.0..=1.0).contains(&pi) {
                f32::from(u8::from(at.uniform(i as u64) < pi))
            } else {
                f32::NAN
            }
        }));
        Ok(CpuStorage::F32(out))
    }

    fn dropout_mask(&self, at: Philox, p: f32, scale: f32) -> Result<Self> {
        // f16 and bf16 widen, and the f32 product rounds once
        let x = self.f32_widened("dropout")?;
        let mut out = try_vec("dropout", x.len())?;
        for (j, chunk) in x.chunks(4).enumerate() {
            let w = at.block(j as u64);
            out.extend(chunk.iter().zip(w).map(|(&v, wi)| v * keep(wi, p, scale)));
        }
        Ok(CpuStorage::from_f32_vec(out, self.dtype()))
    }

    fn multinomial(
        &self,
        rows: usize,
        k: usize,
        samples: usize,
        replacement: bool,
        at: Philox,
    ) -> Result<Self> {
        let w = self.f32("multinomial")?;
        check_weights(w, rows, k, samples, replacement)?;
        let mut out = try_vec("multinomial", rows * samples)?;
        let mut work = try_vec::<f32>("multinomial", k)?;
        for r in 0..rows {
            let row = &w[r * k..(r + 1) * k];
            let u = |s: usize| at.uniform((r * samples + s) as u64);
            if replacement {
                // running sums in order, in f32: the GPU's cdf kernel adds in the same order
                work.clear();
                let mut acc = 0.0f32;
                work.extend(row.iter().map(|&v| {
                    acc += v;
                    acc
                }));
                out.extend((0..samples).map(|s| search_cdf(&work, u(s) * acc) as i64));
            } else {
                work.clear();
                work.extend_from_slice(row);
                for s in 0..samples {
                    let total = work.iter().fold(0.0f32, |a, &b| a + b);
                    let c = pick(&work, u(s) * total);
                    work[c] = 0.0;
                    out.push(c as i64);
                }
            }
        }
        Ok(CpuStorage::I64(out))
    }
}

/// Dropout's factor for one element from its Philox word: `scale` when its uniform is `≥ p`
/// (kept), else 0.
#[inline]
fn keep(word: u32, p: f32, scale: f32) -> f32 {
    if uniform01(word) >= p {
        scale
    } else {
        0.0
    }
}

/// The first index whose running sum exceeds `t`; when rounding leaves `t` at or past the total,
/// the last category with a positive weight (where the running sum last rose).
pub(crate) fn search_cdf(cdf: &[f32], t: f32) -> usize {
    let i = cdf.partition_point(|&c| c <= t);
    if i < cdf.len() {
        return i;
    }
    let mut i = cdf.len() - 1;
    while i > 0 && cdf[i - 1] == cdf[i] {
        i -= 1;
    }
    i
}

/// Without replacement: the first category whose running sum over `w` exceeds `t`, or the last
/// positive one when rounding leaves `t` at the total (the same walk the GPU kernel does).
fn pick(w: &[f32], t: f32) -> usize {
    let mut acc = 0.0f32;
    let mut last = 0;
    for (c, &v) in w.iter().enumerate() {
        acc += v;
        if v > 0.0 {
            last = c;
        }
        if acc > t {
            return c;
        }
    }
    last
}

/// Error unless every row of `[rows, k]` weights is finite and non-negative with a positive sum
/// (and, without replacement, has at least `samples` positive weights).
pub(crate) fn check_weights(
    w: &[f32],
    rows: usize,
    k: usize,
    samples: usize,
    replacement: bool,
) -> Result<()> {
    for r in 0..rows {
        let row = &w[r * k..(r + 1) * k];
        let bad = |msg: String| Error::InvalidArgument {
            op: "multinomial",
            msg: format!("row {r} of the [{rows}, {k}] weights: {msg}"),
        };
        if let Some((c, v)) = row
            .iter()
            .enumerate()
            .find(|(_, v)| !(v.is_finite() && **v >= 0.0))
        {
            return Err(bad(format!(
                "weight {c} is {v}; weights must be finite and non-negative"
            )));
        }
        let total = row.iter().fold(0.0f32, |a, &b| a + b);
        if !(total > 0.0 && total.is_finite()) {
            return Err(bad(format!(
                "the weights sum to {total}, not a positive finite number"
            )));
        }
        let positive = row.iter().filter(|&&v| v > 0.0).count();
        if !replacement && positive < samples {
            return Err(bad(format!(
                "{positive} positive weights cannot give {samples} samples without replacement"
            )));
        }
    }
    Ok(())
}

/// `n` values of `fill` drawn at `at`.
pub(crate) fn fill(op: &'static str, n: usize, fill: Fill, at: Philox) -> Result<Vec<f32>> {
    let mut out = try_vec(op, n)?;
    for j in 0..Philox::counters(n) {
        let w = at.block(j);
        let v = match fill {
            Fill::Uniform { lo, hi } => w.map(|x| uniform_in(uniform01(x), lo, hi)),
            Fill::Normal => {
                let (a, b) = box_muller(w[0], w[1]);
                let (c, d) = box_muller(w[2], w[3]);
                [a, b, c, d]
            }
            Fill::Bernoulli { p } => w.map(|x| f32::from(u8::from(uniform01(x) < p))),
        };
        let take = (n - 4 * j as usize).min(4);
        out.extend_from_slice(&v[..take]);
    }
    Ok(out)
}

/// `lo + (hi − lo)·u`, rounded once per operation (no fused multiply-add, as on the GPU), and
/// kept below `hi` where the rounding reaches it.
#[inline]
pub(crate) fn uniform_in(u: f32, lo: f32, hi: f32) -> f32 {
    let v = lo + (hi - lo) * u;
    if v < hi {
        v
    } else {
        hi.next_down()
    }
}

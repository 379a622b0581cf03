//! The CPU reference of pooling: plain loops over each window (max, average) and, backward,
//! over the windows that cover each input element. Max pooling, forward and backward, splits
//! the planes (image × channel) over threads (`backend::threads`); each plane is computed alone,
//! so the results do not depend on the thread count.

use super::{PoolGeom, PoolKernels};
use crate::backend::cpu::{try_filled, CpuStorage};
use crate::backend::threads::{for_item_runs, for_item_runs2, threads_for};
use crate::Result;

/// Input elements below which a pooling thread is not worth starting.
const MIN_ELEMENTS_PER_THREAD: usize = 1 << 16;

impl PoolKernels for CpuStorage {
    // f16 and bf16 widen to f32 and each output rounds once to the input's dtype
    fn max_pool2d(&self, g: &PoolGeom) -> Result<(Self, Self)> {
        let (y, idx) = max_pool2d(&self.f32_widened("max_pool2d")?, g)?;
        Ok((
            CpuStorage::from_f32_vec(y, self.dtype()),
            CpuStorage::I64(idx),
        ))
    }

    fn max_pool2d_bwd(&self, idx: &Self, g: &PoolGeom) -> Result<Self> {
        let op = "max_pool2d backward";
        let dx = max_pool2d_bwd(&self.f32_widened(op)?, idx.i64(op)?, g)?;
        Ok(CpuStorage::from_f32_vec(dx, self.dtype()))
    }

    fn avg_pool2d(&self, g: &PoolGeom, cip: bool) -> Result<Self> {
        let y = avg_pool2d(&self.f32_widened("avg_pool2d")?, g, cip)?;
        Ok(CpuStorage::from_f32_vec(y, self.dtype()))
    }

    fn avg_pool2d_bwd(&self, g: &PoolGeom, cip: bool) -> Result<Self> {
        let op = "avg_pool2d backward";
        let dx = avg_pool2d_bwd(&self.f32_widened(op)?, g, cip)?;
        Ok(CpuStorage::from_f32_vec(dx, self.dtype()))
    }
}

/// The input rows (or columns) `lo..hi` that window `o` covers along an axis of `len`.
fn span(o: usize, k: usize, s: usize, p: usize, len: usize) -> (usize, usize) {
    let start = (o * s) as isize - p as isize;
    let lo = start.max(0) as usize;
    let hi = ((start + k as isize).max(0) as usize).min(len);
    (lo, hi)
}

/// Max pooling: each window's maximum (the first on ties; NaN wins, the first NaN) and its
/// offset in the input plane.
pub fn max_pool2d(x: &[f32], g: &PoolGeom) -> Result<(Vec<f32>, Vec<i64>)> {
    // an empty window (all padding) keeps −∞ and the offset −1
    let mut y = try_filled("max_pool2d", g.out_len(), f32::NEG_INFINITY)?;
    let mut idx = try_filled("max_pool2d", g.out_len(), -1i64)?;
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    if ohw == 0 {
        return Ok((y, idx));
    }
    // for each window column kx, the output columns whose tap kx lies inside the image
    let cols: Vec<_> = (0..g.kw)
        .map(|kx| inside(g.ow, g.sw, kx as isize - g.pw as isize, g.w))
        .collect();
    // 2 × 2 windows of stride 2 that tile the image: the fast path
    let pairs = (g.kh, g.kw, g.sh, g.sw, g.ph, g.pw) == (2, 2, 2, 2, 0, 0);
    let planes = g.n * g.c;
    let threads = threads_for(planes, hw, MIN_ELEMENTS_PER_THREAD);
    for_item_runs2(
        (&mut y, ohw),
        (&mut idx, ohw),
        planes,
        threads,
        |p0, ys, is| {
            let runs = ys.chunks_exact_mut(ohw).zip(is.chunks_exact_mut(ohw));
            for (k, (yp, ip)) in runs.enumerate() {
                let xp = &x[(p0 + k) * hw..][..hw];
                for oy in 0..g.oh {
                    let (y0, y1) = span(oy, g.kh, g.sh, g.ph, g.h);
                    let yr = &mut yp[oy * g.ow..][..g.ow];
                    let ir = &mut ip[oy * g.ow..][..g.ow];
                    if pairs {
                        let at = 2 * oy * g.w;
                        let (r0, r1) = xp[at..][..2 * g.w].split_at(g.w);
                        let w = g.w;
                        crate::backend::vector::widest(Pairs {
                            r0,
                            r1,
                            yr,
                            ir,
                            at,
                            w,
                        });
                        continue;
                    }
                    // The taps of every window of the output row in the window's order (rows,
                    // then columns), each tap for the whole row at once: the windows are
                    // independent, so the loop over them has no chain of comparisons.
                    for iy in y0..y1 {
                        let row = &xp[iy * g.w..][..g.w];
                        for (kx, oxs) in cols.iter().enumerate() {
                            crate::backend::vector::widest(Tap {
                                row,
                                yr: &mut yr[oxs.clone()],
                                ir: &mut ir[oxs.clone()],
                                // input column of the first output column, and its stride
                                ix0: oxs.start * g.sw + kx - g.pw,
                                sw: g.sw,
                                at: iy * g.w,
                            });
                        }
                    }
                }
            }
            Ok(())
        },
    )?;
    Ok((y, idx))
}

/// The output columns `ox` (of `ow`) whose input column `ox · s + off` lies in `0..len`.
fn inside(ow: usize, s: usize, off: isize, len: usize) -> std::ops::Range<usize> {
    let s = s as isize;
    // smallest ox with ox·s + off ≥ 0, and one past the largest with ox·s + off < len
    let lo = if off >= 0 { 0 } else { (-off + s - 1) / s };
    let hi = if (len as isize) <= off {
        0
    } else {
        (len as isize - off + s - 1) / s
    };
    (lo as usize).min(ow)..(hi as usize).min(ow).max((lo as usize).min(ow))
}

/// Backward of [`max_pool2d`]: each upstream gradient added to the element its window chose.
pub fn max_pool2d_bwd(dy: &[f32], idx: &[i64], g: &PoolGeom) -> Result<Vec<f32>> {
    let mut dx = try_filled("max_pool2d backward", g.in_len(), 0.0f32)?;
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    if hw == 0 {
        return Ok(dx);
    }
    let planes = g.n * g.c;
    let threads = threads_for(planes, hw, MIN_ELEMENTS_PER_THREAD);
    // each window's offset lies in its own plane, so the planes are independent
    for_item_runs(&mut dx, hw, planes, threads, |p0, dxs| {
        for (k, dp) in dxs.chunks_exact_mut(hw).enumerate() {
            let plane = p0 + k;
            let (dyp, ip) = (&dy[plane * ohw..][..ohw], &idx[plane * ohw..][..ohw]);
            for (&d, &i) in dyp.iter().zip(ip) {
                if (0..hw as i64).contains(&i) {
                    dp[i as usize] += d;
                }
            }
        }
        Ok(())
    })?;
    Ok(dx)
}

/// The divisor of window `(oy, ox)`: its size, or the input elements it covers.
fn divisor(g: &PoolGeom, oy: usize, ox: usize, cip: bool) -> f32 {
    if cip {
        return (g.kh * g.kw) as f32;
    }
    let (y0, y1) = span(oy, g.kh, g.sh, g.ph, g.h);
    let (x0, x1) = span(ox, g.kw, g.sw, g.pw, g.w);
    ((y1 - y0) * (x1 - x0)) as f32
}

/// Average pooling.
pub fn avg_pool2d(x: &[f32], g: &PoolGeom, cip: bool) -> Result<Vec<f32>> {
    let mut y = try_filled("avg_pool2d", g.out_len(), 0.0f32)?;
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    for plane in 0..g.n * g.c {
        let xp = &x[plane * hw..][..hw];
        for oy in 0..g.oh {
            let (y0, y1) = span(oy, g.kh, g.sh, g.ph, g.h);
            for ox in 0..g.ow {
                let (x0, x1) = span(ox, g.kw, g.sw, g.pw, g.w);
                let s: f32 = (y0..y1)
                    .flat_map(|iy| xp[iy * g.w + x0..iy * g.w + x1].iter())
                    .sum();
                y[plane * ohw + oy * g.ow + ox] = s / divisor(g, oy, ox, cip);
            }
        }
    }
    Ok(y)
}

/// Backward of [`avg_pool2d`]: each upstream gradient spread evenly over its window's inputs.
pub fn avg_pool2d_bwd(dy: &[f32], g: &PoolGeom, cip: bool) -> Result<Vec<f32>> {
    let mut dx = try_filled("avg_pool2d backward", g.in_len(), 0.0f32)?;
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    for plane in 0..g.n * g.c {
        for oy in 0..g.oh {
            let (y0, y1) = span(oy, g.kh, g.sh, g.ph, g.h);
            for ox in 0..g.ow {
                let (x0, x1) = span(ox, g.kw, g.sw, g.pw, g.w);
                let v = dy[plane * ohw + oy * g.ow + ox] / divisor(g, oy, ox, cip);
                for iy in y0..y1 {
                    for d in &mut dx[plane * hw + iy * g.w + x0..plane * hw + iy * g.w + x1] {
                        *d += v;
                    }
                }
            }
        }
    }
    Ok(dx)
}

/// One tap of every window of an output row, as a loop for `vector::widest`: the windows are
/// independent, so no comparison waits for another.
struct Tap<'a> {
    row: &'a [f32],
    yr: &'a mut [f32],
    ir: &'a mut [i64],
    ix0: usize,
    sw: usize,
    at: usize,
}

impl crate::backend::vector::Loop for Tap<'_> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let Tap {
            row,
            yr,
            ir,
            ix0,
            sw,
            at,
        } = self;
        for (k, (best, bi)) in yr.iter_mut().zip(ir.iter_mut()).enumerate() {
            let ix = ix0 + k * sw;
            let v = row[ix];
            // the first tap, a larger one, or a NaN over a number wins
            let take = (*bi < 0) | wins(v, *best);
            *best = if take { v } else { *best };
            *bi = if take { (at + ix) as i64 } else { *bi };
        }
    }
}

/// Whether tap `v` beats the maximum so far, `best`: larger, or a NaN over a number.
#[inline(always)]
fn wins(v: f32, best: f32) -> bool {
    (v > best) | (v.is_nan() & !best.is_nan())
}

/// The 2 × 2 windows of stride 2 without padding (the pooling of most CNNs) of one output row,
/// from input rows `r0` and `r1` (`at`: the offset of `r0` in the plane, `w` its width), as a
/// loop for `vector::widest`: each window's four taps are compared in the window's order with
/// selects rather than branches, as the winner is data and a branch on it is often
/// mispredicted.
struct Pairs<'a> {
    r0: &'a [f32],
    r1: &'a [f32],
    yr: &'a mut [f32],
    ir: &'a mut [i64],
    at: usize,
    w: usize,
}

impl crate::backend::vector::Loop for Pairs<'_> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let Pairs {
            r0,
            r1,
            yr,
            ir,
            at,
            w,
        } = self;
        let taps = r0.chunks_exact(2).zip(r1.chunks_exact(2));
        for (ox, ((best, bi), (p, q))) in yr.iter_mut().zip(ir.iter_mut()).zip(taps).enumerate() {
            let i = (at + 2 * ox) as i64;
            let (mut m, mut j) = (p[0], i);
            for (v, o) in [
                (p[1], i + 1),
                (q[0], i + w as i64),
                (q[1], i + w as i64 + 1),
            ] {
                let take = wins(v, m);
                m = if take { v } else { m };
                j = if take { o } else { j };
            }
            *best = m;
            *bi = j;
        }
    }
}

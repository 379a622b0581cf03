//! The CPU reference of pooling: plain loops over each window (max, average) and, backward,
//! over the windows that cover each input element.

use super::{PoolGeom, PoolKernels};
use crate::backend::cpu::{try_filled, CpuStorage};
use crate::Result;

impl PoolKernels for CpuStorage {
    fn max_pool2d(&self, g: &PoolGeom) -> Result<(Self, Self)> {
        let (y, idx) = max_pool2d(self.f32("max_pool2d")?, g)?;
        Ok((CpuStorage::F32(y), CpuStorage::I64(idx)))
    }

    fn max_pool2d_bwd(&self, idx: &Self, g: &PoolGeom) -> Result<Self> {
        let op = "max_pool2d backward";
        Ok(CpuStorage::F32(max_pool2d_bwd(
            self.f32(op)?,
            idx.i64(op)?,
            g,
        )?))
    }

    fn avg_pool2d(&self, g: &PoolGeom, cip: bool) -> Result<Self> {
        Ok(CpuStorage::F32(avg_pool2d(
            self.f32("avg_pool2d")?,
            g,
            cip,
        )?))
    }

    fn avg_pool2d_bwd(&self, g: &PoolGeom, cip: bool) -> Result<Self> {
        let op = "avg_pool2d backward";
        Ok(CpuStorage::F32(avg_pool2d_bwd(self.f32(op)?, g, cip)?))
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
    let mut y = try_filled("max_pool2d", g.out_len(), 0.0f32)?;
    let mut idx = try_filled("max_pool2d", g.out_len(), 0i64)?;
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    // the column span of every output column, computed once
    let spans: Vec<_> = (0..g.ow)
        .map(|ox| span(ox, g.kw, g.sw, g.pw, g.w))
        .collect();
    for plane in 0..g.n * g.c {
        let xp = &x[plane * hw..][..hw];
        let (yp, ip) = (&mut y[plane * ohw..][..ohw], &mut idx[plane * ohw..][..ohw]);
        for oy in 0..g.oh {
            let (y0, y1) = span(oy, g.kh, g.sh, g.ph, g.h);
            for (ox, &(x0, x1)) in spans.iter().enumerate() {
                // an empty window (all padding) keeps −∞ and the index −1
                let (mut best, mut bi) = (f32::NEG_INFINITY, -1i64);
                for iy in y0..y1 {
                    for (ix, &v) in xp[iy * g.w..][x0..x1].iter().enumerate() {
                        if bi < 0 || v > best || (v.is_nan() && !best.is_nan()) {
                            best = v;
                            bi = (iy * g.w + x0 + ix) as i64;
                        }
                    }
                }
                yp[oy * g.ow + ox] = best;
                ip[oy * g.ow + ox] = bi;
            }
        }
    }
    Ok((y, idx))
}

/// Backward of [`max_pool2d`]: each upstream gradient added to the element its window chose.
pub fn max_pool2d_bwd(dy: &[f32], idx: &[i64], g: &PoolGeom) -> Result<Vec<f32>> {
    let mut dx = try_filled("max_pool2d backward", g.in_len(), 0.0f32)?;
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    for plane in 0..g.n * g.c {
        for o in 0..ohw {
            let i = idx[plane * ohw + o];
            if (0..hw as i64).contains(&i) {
                dx[plane * hw + i as usize] += dy[plane * ohw + o];
            }
        }
    }
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

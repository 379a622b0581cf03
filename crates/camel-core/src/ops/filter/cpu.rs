//! The CPU reference of the image filter: plain loops, f64 accumulation.

use super::FilterKernels;
use crate::backend::cpu::CpuStorage;
use crate::Result;

impl FilterKernels for CpuStorage {
    fn filter2d(&self, filter: &Self, h: usize, w: usize, r: usize) -> Result<Self> {
        let op = "filter2d";
        Ok(CpuStorage::F32(filter2d(
            self.f32(op)?,
            filter.f32(op)?,
            h,
            w,
            r,
        )))
    }

    fn filter2d_sep(&self, row: &Self, col: &Self, h: usize, w: usize, r: usize) -> Result<Self> {
        let op = "filter2d_separable";
        Ok(CpuStorage::F32(filter2d_separable(
            self.f32(op)?,
            row.f32(op)?,
            col.f32(op)?,
            h,
            w,
            r,
        )))
    }
}

/// `x[i][j]` of the `[h, w]` image, 0 outside it.
fn at(x: &[f32], h: usize, w: usize, i: isize, j: isize) -> f64 {
    if i < 0 || j < 0 || i >= h as isize || j >= w as isize {
        0.0
    } else {
        x[i as usize * w + j as usize] as f64
    }
}

/// `y[i][j] = Σ_{a,b} f[a][b] · x[i + a − r][j + b − r]` over the `[2r+1, 2r+1]` filter, zero
/// padding (padded pixels still meet their taps, so a NaN tap reaches every output).
pub fn filter2d(x: &[f32], f: &[f32], h: usize, w: usize, r: usize) -> Vec<f32> {
    let k = 2 * r + 1;
    let ri = r as isize;
    let mut y = Vec::with_capacity(h * w);
    for i in 0..h as isize {
        for j in 0..w as isize {
            let mut acc = 0.0f64;
            for a in 0..k {
                for b in 0..k {
                    let p = at(x, h, w, i + a as isize - ri, j + b as isize - ri);
                    acc += f[a * k + b] as f64 * p;
                }
            }
            y.push(acc as f32);
        }
    }
    y
}

/// The separable filter `col ⊗ row`: `t[i][j] = Σ_b row[b] · x[i][j + b − r]`, then
/// `y[i][j] = Σ_a col[a] · t[i + a − r][j]`, the intermediate kept in f64.
pub fn filter2d_separable(
    x: &[f32],
    row: &[f32],
    col: &[f32],
    h: usize,
    w: usize,
    r: usize,
) -> Vec<f32> {
    let k = 2 * r + 1;
    let ri = r as isize;
    let mut t = vec![0.0f64; h * w];
    for i in 0..h {
        for j in 0..w as isize {
            t[i * w + j as usize] = (0..k)
                .map(|b| row[b] as f64 * at(x, h, w, i as isize, j + b as isize - ri))
                .sum();
        }
    }
    let tat = |i: isize, j: usize| {
        if i < 0 || i >= h as isize {
            0.0
        } else {
            t[i as usize * w + j]
        }
    };
    let mut y = Vec::with_capacity(h * w);
    for i in 0..h as isize {
        for j in 0..w {
            let acc: f64 = (0..k)
                .map(|a| col[a] as f64 * tat(i + a as isize - ri, j))
                .sum();
            y.push(acc as f32);
        }
    }
    y
}

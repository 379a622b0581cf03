//! The CPU reference of conv2d: im2col of one image and group at a time, multiplied with
//! ndarray's GEMM (`matrixmultiply`). The CPU backend has no thread pool, so the images run one
//! after another (the GEMM itself is single-threaded too).

use super::{Conv2dGeom, Conv2dKernels};
use crate::backend::cpu::{try_filled, CpuStorage};
use crate::Result;
use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2};

impl Conv2dKernels for CpuStorage {
    fn conv2d(&self, w: &Self, bias: Option<&Self>, g: &Conv2dGeom, relu: bool) -> Result<Self> {
        let op = "conv2d";
        let b = bias.map(|b| b.f32(op)).transpose()?;
        Ok(CpuStorage::F32(conv2d(
            self.f32(op)?,
            w.f32(op)?,
            b,
            g,
            relu,
        )?))
    }

    fn conv2d_bwd_input(&self, w: &Self, g: &Conv2dGeom) -> Result<Self> {
        let op = "conv2d backward";
        Ok(CpuStorage::F32(conv2d_bwd_input(
            self.f32(op)?,
            w.f32(op)?,
            g,
        )?))
    }

    fn conv2d_bwd_weight(&self, x: &Self, g: &Conv2dGeom) -> Result<Self> {
        let op = "conv2d backward";
        Ok(CpuStorage::F32(conv2d_bwd_weight(
            self.f32(op)?,
            x.f32(op)?,
            g,
        )?))
    }
}

/// The column matrix `[kg, oh·ow]` of image `img`, group `gi` of `x`: row `(c·kh + i)·kw + j`
/// holds input channel `c` of the group at tap `(i, j)` for every output pixel (0 in the
/// padding).
fn im2col(x: &[f32], col: &mut [f32], g: &Conv2dGeom, img: usize, gi: usize) {
    let p = g.pixels();
    let cg = g.cg();
    for c in 0..cg {
        let plane = &x[((img * g.c + gi * cg + c) * g.h) * g.w..][..g.h * g.w];
        for i in 0..g.kh {
            for j in 0..g.kw {
                let row = &mut col[((c * g.kh + i) * g.kw + j) * p..][..p];
                for oy in 0..g.oh {
                    let iy = (oy * g.sh + i * g.dh) as isize - g.ph as isize;
                    let out = &mut row[oy * g.ow..(oy + 1) * g.ow];
                    if iy < 0 || iy >= g.h as isize {
                        out.fill(0.0);
                        continue;
                    }
                    let src = &plane[iy as usize * g.w..][..g.w];
                    for (ox, v) in out.iter_mut().enumerate() {
                        let ix = (ox * g.sw + j * g.dw) as isize - g.pw as isize;
                        *v = if ix < 0 || ix >= g.w as isize {
                            0.0
                        } else {
                            src[ix as usize]
                        };
                    }
                }
            }
        }
    }
}

/// Adds the column gradient `dcol` `[kg, oh·ow]` of image `img`, group `gi` onto `dx` (col2im).
fn col2im(dcol: &[f32], dx: &mut [f32], g: &Conv2dGeom, img: usize, gi: usize) {
    let p = g.pixels();
    let cg = g.cg();
    for c in 0..cg {
        let plane = &mut dx[((img * g.c + gi * cg + c) * g.h) * g.w..][..g.h * g.w];
        for i in 0..g.kh {
            for j in 0..g.kw {
                let row = &dcol[((c * g.kh + i) * g.kw + j) * p..][..p];
                for oy in 0..g.oh {
                    let iy = (oy * g.sh + i * g.dh) as isize - g.ph as isize;
                    if iy < 0 || iy >= g.h as isize {
                        continue;
                    }
                    let dst = &mut plane[iy as usize * g.w..][..g.w];
                    for (ox, &v) in row[oy * g.ow..(oy + 1) * g.ow].iter().enumerate() {
                        let ix = (ox * g.sw + j * g.dw) as isize - g.pw as isize;
                        if ix >= 0 && ix < g.w as isize {
                            dst[ix as usize] += v;
                        }
                    }
                }
            }
        }
    }
}

fn view(s: &[f32], rows: usize, cols: usize) -> ArrayView2<'_, f32> {
    ArrayView2::from_shape((rows, cols), &s[..rows * cols]).expect("conv2d: GEMM operand view")
}

fn view_mut(s: &mut [f32], rows: usize, cols: usize) -> ArrayViewMut2<'_, f32> {
    ArrayViewMut2::from_shape((rows, cols), &mut s[..rows * cols])
        .expect("conv2d: GEMM output view")
}

/// `act(conv2d(x, w) + bias)`: per image and group, `y = W_g · im2col(x)`.
pub fn conv2d(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    g: &Conv2dGeom,
    relu: bool,
) -> Result<Vec<f32>> {
    let (p, kg, og) = (g.pixels(), g.kg(), g.og());
    let mut y = try_filled("conv2d", g.n * g.o * p, 0.0f32)?;
    if y.is_empty() {
        return Ok(y);
    }
    let mut col = try_filled("conv2d", kg * p, 0.0f32)?;
    for img in 0..g.n {
        for gi in 0..g.groups {
            im2col(x, &mut col, g, img, gi);
            let wg = view(&w[gi * og * kg..], og, kg);
            let mut yv = view_mut(&mut y[(img * g.o + gi * og) * p..], og, p);
            general_mat_mul(1.0, &wg, &view(&col, kg, p), 0.0, &mut yv);
        }
    }
    for (i, v) in y.iter_mut().enumerate() {
        if let Some(b) = bias {
            *v += b[(i / p) % g.o];
        }
        if relu && *v < 0.0 {
            *v = 0.0;
        }
    }
    Ok(y)
}

/// The input gradient: per image and group, `col2im(W_gᵀ · dy)`.
pub fn conv2d_bwd_input(dy: &[f32], w: &[f32], g: &Conv2dGeom) -> Result<Vec<f32>> {
    let (p, kg, og) = (g.pixels(), g.kg(), g.og());
    let mut dx = try_filled("conv2d backward", g.n * g.c * g.h * g.w, 0.0f32)?;
    if dx.is_empty() || p == 0 {
        return Ok(dx);
    }
    let mut dcol = try_filled("conv2d backward", kg * p, 0.0f32)?;
    for img in 0..g.n {
        for gi in 0..g.groups {
            let wg = view(&w[gi * og * kg..], og, kg);
            let dyv = view(&dy[(img * g.o + gi * og) * p..], og, p);
            general_mat_mul(1.0, &wg.t(), &dyv, 0.0, &mut view_mut(&mut dcol, kg, p));
            col2im(&dcol, &mut dx, g, img, gi);
        }
    }
    Ok(dx)
}

/// The weight gradient: per group, `Σ_images dy · im2col(x)ᵀ`.
pub fn conv2d_bwd_weight(dy: &[f32], x: &[f32], g: &Conv2dGeom) -> Result<Vec<f32>> {
    let (p, kg, og) = (g.pixels(), g.kg(), g.og());
    let mut dw = try_filled("conv2d backward", g.o * kg, 0.0f32)?;
    if dw.is_empty() || p == 0 {
        return Ok(dw);
    }
    let mut col = try_filled("conv2d backward", kg * p, 0.0f32)?;
    for img in 0..g.n {
        for gi in 0..g.groups {
            im2col(x, &mut col, g, img, gi);
            let dyv = view(&dy[(img * g.o + gi * og) * p..], og, p);
            let mut dwv = view_mut(&mut dw[gi * og * kg..], og, kg);
            general_mat_mul(1.0, &dyv, &view(&col, kg, p).t(), 1.0, &mut dwv);
        }
    }
    Ok(dw)
}

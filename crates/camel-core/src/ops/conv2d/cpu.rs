//! The CPU reference of conv2d: im2col of one image and group at a time, multiplied with the
//! CPU GEMM (`ops::matmul::cpu::gemm_into`). The batch is split over up to
//! [`crate::config::cpu_threads`] scoped threads, each taking a contiguous run of images with buffers
//! of its own; the weight gradient sums fixed parts of [`IMAGES_PER_PART`] images and adds the
//! parts in order, so every result is the same bit for bit whatever the thread count.

use super::{Conv2dGeom, Conv2dKernels};
use crate::backend::cpu::{try_filled, CpuStorage};
use crate::backend::threads::{self, for_item_runs};
use crate::ops::matmul::cpu::{gemm_into, Mat};
use crate::{DType, Error, Result};

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

    fn conv2d_unfold_rows(&self, g: &Conv2dGeom) -> Result<Self> {
        match self {
            CpuStorage::F16(x) => Ok(CpuStorage::F16(unfold_rows(x, g)?)),
            CpuStorage::BF16(x) => Ok(CpuStorage::BF16(unfold_rows(x, g)?)),
            other => Err(half_only("conv2d", other.dtype())),
        }
    }

    fn conv2d_fold_rows(&self, g: &Conv2dGeom) -> Result<Self> {
        match self.dtype() {
            dtype @ (DType::F16 | DType::BF16) => Ok(CpuStorage::from_f32_vec(
                fold_rows(&self.to_f32_vec(), g)?,
                dtype,
            )),
            other => Err(half_only("conv2d backward", other)),
        }
    }
}

fn half_only(op: &'static str, got: DType) -> Error {
    Error::InvalidArgument {
        op,
        msg: format!("the 16-bit convolution's rows are f16 or bf16, not {got}"),
    }
}

/// Calls `f(r, x)` for every entry `r` of the 16-bit convolution's rows that reads an input
/// element, `x` its index in the input: row `(g·n + img)·P + p` holds output pixel `p` of image
/// `img` in group `g`, its entry `(c·kh + i)·kw + j` the value tap `(i, j)` of channel `c` of the
/// group reads. Entries in the padding are skipped.
fn for_each_tap(g: &Conv2dGeom, mut f: impl FnMut(usize, usize)) {
    let (p, kg, cg) = (g.pixels(), g.kg(), g.cg());
    for gi in 0..g.groups {
        for img in 0..g.n {
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    let row = ((gi * g.n + img) * p + oy * g.ow + ox) * kg;
                    for c in 0..cg {
                        let plane = (img * g.c + gi * cg + c) * g.h * g.w;
                        for i in 0..g.kh {
                            let iy = (oy * g.sh + i * g.dh) as isize - g.ph as isize;
                            if iy < 0 || iy >= g.h as isize {
                                continue;
                            }
                            for j in 0..g.kw {
                                let ix = (ox * g.sw + j * g.dw) as isize - g.pw as isize;
                                if ix >= 0 && ix < g.w as isize {
                                    let x = plane + iy as usize * g.w + ix as usize;
                                    f(row + (c * g.kh + i) * g.kw + j, x);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The rows of the 16-bit convolution ([`for_each_tap`]), 0 in the padding
/// (`kernels/conv2d/half_rows.cu` on the GPU).
fn unfold_rows<T: Copy + Default>(x: &[T], g: &Conv2dGeom) -> Result<Vec<T>> {
    let len = g.groups * g.n * g.pixels() * g.kg();
    let mut rows = try_filled("conv2d", len, T::default())?;
    for_each_tap(g, |r, xi| rows[r] = x[xi]);
    Ok(rows)
}

/// The input gradient from the rows' gradient `drows`: every entry added, in f32, to the input
/// element it read.
fn fold_rows(drows: &[f32], g: &Conv2dGeom) -> Result<Vec<f32>> {
    let mut dx = try_filled("conv2d backward", g.n * g.c * g.h * g.w, 0.0f32)?;
    for_each_tap(g, |r, xi| dx[xi] += drows[r]);
    Ok(dx)
}

/// The output columns `ox` whose input column `ox·stride + off` lies inside `0..width`: a range,
/// so that the loops below copy its middle without a bounds test per element.
fn valid_columns(ow: usize, stride: usize, off: isize, width: usize) -> std::ops::Range<usize> {
    // ox·stride + off ≥ 0      ⇔  ox ≥ ⌈−off / stride⌉
    // ox·stride + off < width  ⇔  ox < ⌈(width − off) / stride⌉
    let ceil_div = |a: isize| (a.max(0) as usize).div_ceil(stride);
    let lo = ceil_div(-off).min(ow);
    let hi = ceil_div(width as isize - off).min(ow);
    lo..hi.max(lo)
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
                let off = (j * g.dw) as isize - g.pw as isize;
                let cols = valid_columns(g.ow, g.sw, off, g.w);
                for oy in 0..g.oh {
                    let iy = (oy * g.sh + i * g.dh) as isize - g.ph as isize;
                    let out = &mut row[oy * g.ow..(oy + 1) * g.ow];
                    if iy < 0 || iy >= g.h as isize || cols.is_empty() {
                        out.fill(0.0);
                        continue;
                    }
                    let src = &plane[iy as usize * g.w..][..g.w];
                    fill_short(&mut out[..cols.start], 0.0);
                    fill_short(&mut out[cols.end..], 0.0);
                    // the first input column read, ≥ 0 by the range
                    let first = (cols.start * g.sw) as isize + off;
                    let mid = &mut out[cols.clone()];
                    if g.sw == 1 {
                        copy_short(mid, &src[first as usize..][..mid.len()]);
                    } else {
                        let taps = src[first as usize..].iter().step_by(g.sw);
                        for (v, &s) in mid.iter_mut().zip(taps) {
                            *v = s;
                        }
                    }
                }
            }
        }
    }
}

/// `dst.copy_from_slice(src)` in moves of 8, 4, 2 and 1 floats, each of a fixed size and so
/// compiled inline. An im2col row is one output row of a few dozen pixels, where the call to
/// `memcpy` that `copy_from_slice` makes costs more than the copy.
#[inline(always)]
fn copy_short(dst: &mut [f32], src: &[f32]) {
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (a, b) in (&mut d).zip(&mut s) {
        a.copy_from_slice(b);
    }
    let (mut d, mut s) = (d.into_remainder(), s.remainder());
    for w in [4, 2, 1] {
        if d.len() >= w {
            let (dh, dt) = d.split_at_mut(w);
            dh.copy_from_slice(&s[..w]);
            (d, s) = (dt, &s[w..]);
        }
    }
}

/// `dst.fill(v)` for the few padding pixels at the ends of an im2col row, without a call to
/// `memset` (as [`copy_short`]).
#[inline(always)]
fn fill_short(dst: &mut [f32], v: f32) {
    let mut d = dst.chunks_exact_mut(8);
    for a in &mut d {
        a.copy_from_slice(&[v; 8]);
    }
    let mut d = d.into_remainder();
    for w in [4, 2, 1] {
        if d.len() >= w {
            let (dh, dt) = d.split_at_mut(w);
            dh.copy_from_slice(&[v; 8][..w]);
            d = dt;
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
                let off = (j * g.dw) as isize - g.pw as isize;
                let cols = valid_columns(g.ow, g.sw, off, g.w);
                if cols.is_empty() {
                    continue;
                }
                let first = (cols.start * g.sw) as isize + off;
                for oy in 0..g.oh {
                    let iy = (oy * g.sh + i * g.dh) as isize - g.ph as isize;
                    if iy < 0 || iy >= g.h as isize {
                        continue;
                    }
                    let dst = &mut plane[iy as usize * g.w..][..g.w];
                    let src = &row[oy * g.ow..(oy + 1) * g.ow][cols.clone()];
                    let dst = &mut dst[first as usize..];
                    if g.sw == 1 {
                        for (d, &v) in dst.iter_mut().zip(src) {
                            *d += v;
                        }
                    } else {
                        for (d, &v) in dst.iter_mut().step_by(g.sw).zip(src) {
                            *d += v;
                        }
                    }
                }
            }
        }
    }
}

/// Multiply-adds below which a thread is not worth starting: a conv2d of less work than this per
/// thread runs on fewer threads (the smallest on the calling thread alone).
const MIN_MACS_PER_THREAD: usize = 1 << 20;

/// Images whose weight-gradient contributions one part sums before the parts are added in order.
pub const IMAGES_PER_PART: usize = 8;

/// Threads for `items` images (or parts) of `macs` multiply-adds each.
fn threads_for(items: usize, macs: usize) -> usize {
    threads::threads_for(items, macs, MIN_MACS_PER_THREAD)
}

/// `act(conv2d(x, w) + bias)`: per image and group, `y = W_g · im2col(x)`, the images split over
/// threads.
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
    let threads = threads_for(g.n, g.o * p * kg);
    for_item_runs(&mut y, g.o * p, g.n, threads, |img0, ys| {
        let mut col = try_filled("conv2d", kg * p, 0.0f32)?;
        for (k, yi) in ys.chunks_exact_mut(g.o * p).enumerate() {
            for gi in 0..g.groups {
                im2col(x, &mut col, g, img0 + k, gi);
                let wg = Mat::new(&w[gi * og * kg..], og, kg);
                gemm_into(&mut yi[gi * og * p..], wg, Mat::new(&col, kg, p), false);
            }
            // the epilogue, one output plane (channel) at a time
            if bias.is_some() || relu {
                for (o, ys) in yi.chunks_exact_mut(p).enumerate() {
                    let b = bias.map(|b| b[o]);
                    for v in ys {
                        if let Some(b) = b {
                            *v += b;
                        }
                        if relu && *v < 0.0 {
                            *v = 0.0;
                        }
                    }
                }
            }
        }
        Ok(())
    })?;
    Ok(y)
}

/// The input gradient: per image and group, `col2im(W_gᵀ · dy)`, the images split over threads.
pub fn conv2d_bwd_input(dy: &[f32], w: &[f32], g: &Conv2dGeom) -> Result<Vec<f32>> {
    let (p, kg, og) = (g.pixels(), g.kg(), g.og());
    let per = g.c * g.h * g.w;
    let mut dx = try_filled("conv2d backward", g.n * per, 0.0f32)?;
    if dx.is_empty() || p == 0 {
        return Ok(dx);
    }
    let threads = threads_for(g.n, g.o * p * kg);
    for_item_runs(&mut dx, per, g.n, threads, |img0, dxs| {
        let mut dcol = try_filled("conv2d backward", kg * p, 0.0f32)?;
        for (k, dxi) in dxs.chunks_exact_mut(per).enumerate() {
            for gi in 0..g.groups {
                let wg = Mat::new(&w[gi * og * kg..], og, kg);
                let dyv = Mat::new(&dy[((img0 + k) * g.o + gi * og) * p..], og, p);
                gemm_into(&mut dcol, wg.t(), dyv, false);
                // dxi starts at this image: col2im's image 0
                col2im(&dcol, dxi, g, 0, gi);
            }
        }
        Ok(())
    })?;
    Ok(dx)
}

/// The weight gradient: per group, `Σ_images dy · im2col(x)ᵀ`. The images are summed in parts of
/// [`IMAGES_PER_PART`], the parts split over threads, and the parts added in order.
pub fn conv2d_bwd_weight(dy: &[f32], x: &[f32], g: &Conv2dGeom) -> Result<Vec<f32>> {
    let (p, kg, og) = (g.pixels(), g.kg(), g.og());
    let len = g.o * kg;
    if len == 0 || p == 0 || g.n == 0 {
        return try_filled("conv2d backward", len, 0.0f32);
    }
    let parts = g.n.div_ceil(IMAGES_PER_PART);
    let mut partial = try_filled("conv2d backward", parts * len, 0.0f32)?;
    let threads = threads_for(parts, IMAGES_PER_PART * g.o * p * kg);
    for_item_runs(&mut partial, len, parts, threads, |part0, ps| {
        let mut col = try_filled("conv2d backward", kg * p, 0.0f32)?;
        for (k, dw) in ps.chunks_exact_mut(len).enumerate() {
            let first = (part0 + k) * IMAGES_PER_PART;
            for img in first..(first + IMAGES_PER_PART).min(g.n) {
                for gi in 0..g.groups {
                    im2col(x, &mut col, g, img, gi);
                    let dyv = Mat::new(&dy[(img * g.o + gi * og) * p..], og, p);
                    gemm_into(
                        &mut dw[gi * og * kg..],
                        dyv,
                        Mat::new(&col, kg, p).t(),
                        true,
                    );
                }
            }
        }
        Ok(())
    })?;
    if parts == 1 {
        return Ok(partial);
    }
    let mut dw = try_filled("conv2d backward", len, 0.0f32)?;
    for part in partial.chunks_exact(len) {
        for (d, &v) in dw.iter_mut().zip(part) {
            *d += v;
        }
    }
    Ok(dw)
}

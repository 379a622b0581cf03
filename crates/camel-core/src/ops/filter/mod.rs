//! The 2-D image filter: the correlation of a single-channel `[H, W]` image with a
//! `[2r+1, 2r+1]` filter, zero padding, an output of the image's size
//! (`y[i][j] = Σ_{a,b} w[a][b] · x[i + a − r][j + b − r]`, a pixel outside the image reading 0),
//! as `F.conv2d(x[None, None], w[None, None], padding=r)[0, 0]`. A separable filter
//! `w = col ⊗ row` (`w[a][b] = col[a] · row[b]`) is also taken as its two vectors, and applied
//! as a row pass then a column pass.
//!
//! On the GPU the image-filter ladder runs (`kernels/filter`, `CAMEL_FILTER`): steps 1, 2, 5 and
//! 6 have a 2-D kernel, steps 3 … 6 separable passes. Where a step lacks the kernel a call
//! needs, the op bridges on both devices alike, so a program gives the same answers on each:
//! vectors at steps 1 and 2 are multiplied into their 2-D filter on the tensors' device; a 2-D
//! filter at steps 3 and 4 is factored, and one that is not rank 1 is an error.

use super::expect_f32;
use crate::backend::ladder::{step, Family, Step};
use crate::storage::{dispatch, Storage};
use crate::{Device, Error, Result, Tensor};

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

/// The largest filter radius the CUDA kernels take (a 17 × 17 filter); the CPU takes any.
pub const FILTER_MAX_RADIUS: usize = camel_cuda::kernels::filter::MAX_RADIUS;

/// How far a 2-D filter may be from the outer product of its factors, relative to its largest
/// magnitude, and still count as separable (the factors then replace it at steps 3 and 4).
pub const SEPARABLE_RTOL: f64 = 1e-6;

/// The image-filter primitives of a backend (`cpu.rs`, `cuda.rs`).
pub(crate) trait FilterKernels: Sized {
    /// The `[h, w]` image `self` correlated with the `[2r+1, 2r+1]` filter `filter`.
    fn filter2d(&self, filter: &Self, h: usize, w: usize, r: usize) -> Result<Self>;
    /// The `[h, w]` image `self` through a row pass with `row` then a column pass with `col`
    /// (`2r+1` taps each).
    fn filter2d_sep(&self, row: &Self, col: &Self, h: usize, w: usize, r: usize) -> Result<Self>;
}

impl Storage {
    /// [`FilterKernels::filter2d`] on the operands' device.
    pub(crate) fn filter2d(&self, f: &Storage, h: usize, w: usize, r: usize) -> Result<Storage> {
        dispatch!("filter2d"; x = self, f = f => x.filter2d(f, h, w, r))
    }

    /// [`FilterKernels::filter2d_sep`] on the operands' device.
    pub(crate) fn filter2d_sep(
        &self,
        row: &Storage,
        col: &Storage,
        h: usize,
        w: usize,
        r: usize,
    ) -> Result<Storage> {
        dispatch!("filter2d_separable"; x = self, row = row, col = col => x.filter2d_sep(row, col, h, w, r))
    }
}

/// Whether the ladder step `s` has a 2-D kernel (steps 1, 2, 5, 6) and separable passes
/// (3 … 6).
fn kernels_of(s: Step) -> (bool, bool) {
    let k = camel_cuda::kernels::filter::at(s);
    (k.filter2d.is_some(), k.separable.is_some())
}

/// `[H, W]` of a non-empty f32 image.
fn image_dims(op: &'static str, x: &Tensor) -> Result<(usize, usize)> {
    expect_f32(op, x)?;
    match *x.shape() {
        [h, w] if h > 0 && w > 0 => Ok((h, w)),
        [_, _] => Err(Error::BadShape {
            op,
            shape: x.shape().to_vec(),
            expected: "a non-empty image [H, W] (H, W ≥ 1)".into(),
        }),
        _ => Err(Error::BadShape {
            op,
            shape: x.shape().to_vec(),
            expected: "a single-channel image [H, W] (2-D)".into(),
        }),
    }
}

/// Error unless `t` is on `x`'s device.
fn on_device_of(op: &'static str, x: &Tensor, t: &Tensor) -> Result<()> {
    if t.device() != x.device() {
        return Err(Error::DeviceMismatch {
            op,
            lhs: x.device(),
            rhs: t.device(),
        });
    }
    Ok(())
}

/// Error when the CUDA kernels cannot take radius `r`.
fn check_radius(op: &'static str, dev: Device, r: usize, shape: &[usize]) -> Result<()> {
    if dev.is_cuda() && r > FILTER_MAX_RADIUS {
        return Err(Error::InvalidArgument {
            op,
            msg: format!(
                "a filter of shape {shape:?} has radius {r}; the CUDA kernels take radius \
                 ≤ {FILTER_MAX_RADIUS} (at most [17, 17]; the CPU takes any)"
            ),
        });
    }
    Ok(())
}

/// The factors `(col, row)` of a `[k, k]` filter with `w ≈ col ⊗ row`, within
/// [`SEPARABLE_RTOL`] of its largest magnitude; else the largest deviation found (NaN when the
/// filter holds a NaN or an infinity). The column and row through the largest tap are the
/// factors (`row` scaled so its entry there is 1); an all-zero filter factors into zeros.
pub(crate) fn factor(w: &[f32], k: usize) -> std::result::Result<(Vec<f32>, Vec<f32>), f64> {
    if w.iter().any(|v| !v.is_finite()) {
        return Err(f64::NAN);
    }
    let (mut p, mut q, mut big) = (0, 0, 0.0f64);
    for a in 0..k {
        for b in 0..k {
            let v = (w[a * k + b] as f64).abs();
            if v > big {
                (p, q, big) = (a, b, v);
            }
        }
    }
    if big == 0.0 {
        return Ok((vec![0.0; k], vec![0.0; k]));
    }
    let pivot = w[p * k + q] as f64;
    let col: Vec<f64> = (0..k).map(|a| w[a * k + q] as f64).collect();
    let row: Vec<f64> = (0..k).map(|b| w[p * k + b] as f64 / pivot).collect();
    let mut worst = 0.0f64;
    for a in 0..k {
        for b in 0..k {
            worst = worst.max((w[a * k + b] as f64 - col[a] * row[b]).abs());
        }
    }
    if worst <= SEPARABLE_RTOL * big {
        let f = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect();
        Ok((f(col), f(row)))
    } else {
        Err(worst / big)
    }
}

/// `t` reversed along every dim (a filter rotated by 180°: the backward's taps).
fn flip(t: &Tensor) -> Result<Tensor> {
    let mut out = t.clone();
    for (d, &n) in t.shape().iter().enumerate() {
        let rev: Vec<i64> = (0..n as i64).rev().collect();
        out = out.index_select(d, &Tensor::from_vec_i64(rev, &[n], t.device())?)?;
    }
    Ok(out)
}

/// The gradient of `Σ g ⊙ filter2d(x, w)` with respect to the `[k, k]` filter `w`:
/// `dw[a][b] = Σ_{i,j} g[i][j] · x[i + a − r][j + b − r]`, from `k²` shifted windows of the
/// zero-padded image (composed from existing ops, on the tensors' device).
fn filter_grad(x: &Tensor, g: &Tensor, r: usize) -> Result<Tensor> {
    let (h, w) = (x.shape()[0], x.shape()[1]);
    let k = 2 * r + 1;
    let xp = x.pad(&[(r, r), (r, r)], 0.0)?;
    let mut taps = Vec::with_capacity(k * k);
    for a in 0..k {
        for b in 0..k {
            taps.push(xp.narrow(0, a, h)?.narrow(1, b, w)?.mul(g)?.sum()?);
        }
    }
    let refs: Vec<&Tensor> = taps.iter().collect();
    Tensor::stack(&refs, 0)?.reshape(&[k, k])
}

/// The primitive [`FilterKernels::filter2d`] of `x`'s and `f`'s storages.
fn filter2d_storage(x: &Tensor, f: &Tensor, h: usize, w: usize, r: usize) -> Result<Storage> {
    x.storage()?.filter2d(&*f.storage()?, h, w, r)
}

/// The primitive [`FilterKernels::filter2d_sep`] of the tensors' storages.
fn sep_storage(
    x: &Tensor,
    row: &Tensor,
    col: &Tensor,
    h: usize,
    w: usize,
    r: usize,
) -> Result<Storage> {
    x.storage()?
        .filter2d_sep(&*row.storage()?, &*col.storage()?, h, w, r)
}

impl Tensor {
    /// The 2-D correlation of this `[H, W]` image with a `[2r+1, 2r+1]` filter, zero padding,
    /// an output `[H, W]`: `F.conv2d(x[None, None], w[None, None], padding=r)[0, 0]` in
    /// PyTorch. On the GPU the image-filter ladder's step runs (`CAMEL_FILTER`, radius ≤ 8).
    /// At steps 3 and 4, which filter in separable passes only, the filter is read to the host
    /// (one synchronisation) and factored into `col ⊗ row`; a filter that is not rank 1 within
    /// [`SEPARABLE_RTOL`] is an error there (use another step or [`Tensor::filter2d_separable`]).
    /// Differentiable in the image and the filter.
    pub fn filter2d(&self, filter: &Tensor) -> Result<Tensor> {
        let op = "filter2d";
        let (h, w) = image_dims(op, self)?;
        expect_f32(op, filter)?;
        on_device_of(op, self, filter)?;
        let r = match *filter.shape() {
            [a, b] if a == b && a % 2 == 1 => a / 2,
            _ => {
                return Err(Error::BadShape {
                    op,
                    shape: filter.shape().to_vec(),
                    expected: format!(
                        "a square filter of odd size [2r+1, 2r+1] for the image {:?}",
                        self.shape()
                    ),
                })
            }
        };
        check_radius(op, self.device(), r, filter.shape())?;
        let s = step(Family::Filter);
        let y = if kernels_of(s).0 {
            filter2d_storage(self, filter, h, w, r)?
        } else {
            let k = 2 * r + 1;
            let (col, row) =
                factor(&filter.to_vec()?, k).map_err(|dev| Error::InvalidArgument {
                    op,
                    msg: format!(
                        "image-filter step {} (separable passes) needs a separable filter; the \
                     {:?} filter is not the outer product of a column and a row (largest \
                     deviation {dev:.3e} of its largest magnitude, more than {SEPARABLE_RTOL:e}); \
                     use step 1, 2, 5 or 6 (CAMEL_FILTER) or filter2d_separable",
                        s.number(),
                        filter.shape(),
                    ),
                })?;
            let row = Tensor::from_vec(row, &[k], self.device())?;
            let col = Tensor::from_vec(col, &[k], self.device())?;
            sep_storage(self, &row, &col, h, w, r)?
        };
        let y = Tensor::from_storage(y, vec![h, w]);
        let (xd, fd) = (self.detach(), filter.detach());
        let want_w = filter.requires_grad();
        Ok(Tensor::op_output(
            y.storage_arc().clone(),
            vec![h, w],
            op,
            &[self, filter],
            Box::new(move |g| {
                // dx: g correlated with the filter rotated by 180°; dw: g against the windows
                let dx = g.filter2d(&flip(&fd)?)?;
                let dw = if want_w {
                    Some(filter_grad(&xd, g, r)?)
                } else {
                    None
                };
                Ok(vec![Some(dx), dw])
            }),
        ))
    }

    /// The image filtered by the separable filter `col ⊗ row` (`w[a][b] = col[a] · row[b]`,
    /// both of `2r+1` taps): [`Tensor::filter2d`] with that filter, computed as a row pass with
    /// `row` then a column pass with `col` through an intermediate image (at step 6 a tile of it
    /// at a time, in shared memory; PyTorch: two `F.conv2d` calls with `[1, 2r+1]` and
    /// `[2r+1, 1]` filters). Steps 1 and 2 of the ladder, which have no separable passes, run
    /// their 2-D kernel on `col ⊗ row` formed on the tensors' device. Differentiable in the
    /// image and both vectors.
    pub fn filter2d_separable(&self, row: &Tensor, col: &Tensor) -> Result<Tensor> {
        let op = "filter2d_separable";
        let (h, w) = image_dims(op, self)?;
        for v in [row, col] {
            expect_f32(op, v)?;
            on_device_of(op, self, v)?;
        }
        let k = match (row.shape(), col.shape()) {
            (&[a], &[b]) if a == b && a % 2 == 1 => a,
            _ => {
                return Err(Error::ShapeMismatch {
                    op,
                    lhs: row.shape().to_vec(),
                    rhs: col.shape().to_vec(),
                    expected: format!(
                        "row and column vectors of one odd length [2r+1] for the image {:?}",
                        self.shape()
                    ),
                })
            }
        };
        let r = k / 2;
        check_radius(op, self.device(), r, &[k, k])?;
        let y = if kernels_of(step(Family::Filter)).1 {
            sep_storage(self, row, col, h, w, r)?
        } else {
            let outer = col
                .detach()
                .reshape(&[k, 1])?
                .mul(&row.detach().reshape(&[1, k])?)?;
            filter2d_storage(self, &outer, h, w, r)?
        };
        let y = Tensor::from_storage(y, vec![h, w]);
        let (xd, rd, cd) = (self.detach(), row.detach(), col.detach());
        let want_v = row.requires_grad() || col.requires_grad();
        Ok(Tensor::op_output(
            y.storage_arc().clone(),
            vec![h, w],
            op,
            &[self, row, col],
            Box::new(move |g| {
                let dx = g.filter2d_separable(&flip(&rd)?, &flip(&cd)?)?;
                if !want_v {
                    return Ok(vec![Some(dx), None, None]);
                }
                // through dw = ∂/∂w of the 2-D filter: drow = colᵀ dw, dcol = dw row
                let dw = filter_grad(&xd, g, r)?;
                let drow = dw.mul(&cd.reshape(&[k, 1])?)?.sum_dim(0, false)?;
                let dcol = dw.mul(&rd.reshape(&[1, k])?)?.sum_dim(1, false)?;
                Ok(vec![Some(dx), Some(drow), Some(dcol)])
            }),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::factor;

    #[test]
    fn factor_finds_rank_one_filters_and_refuses_others() {
        let col = [1.0f32, 2.0, 1.0];
        let row = [-1.0f32, 0.0, 1.0];
        let w: Vec<f32> = col
            .iter()
            .flat_map(|c| row.iter().map(move |r| c * r))
            .collect();
        let (c, r) = factor(&w, 3).unwrap();
        for a in 0..3 {
            for b in 0..3 {
                assert_eq!(c[a] * r[b], w[a * 3 + b]);
            }
        }
        let mut bad = w.clone();
        bad[4] = 0.5;
        assert!(factor(&bad, 3).is_err());
        assert!(factor(&[f32::NAN; 9], 3).unwrap_err().is_nan());
        assert_eq!(factor(&[0.0; 9], 3), Ok((vec![0.0; 3], vec![0.0; 3])));
    }
}

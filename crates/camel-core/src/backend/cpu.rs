//! The CPU backend: the reference implementation of every primitive, on plain slices.
//! Matrix products go through `ndarray` (and its `matrixmultiply` kernels); the rest are simple
//! loops written to be read. Every CUDA kernel is tested against these functions.

use super::{BinaryOp, ReduceOp, UnaryOp, UpdateRule};
use crate::shape::{broadcast_strides, contiguous_strides, numel};
use crate::{Error, Result};
use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2, ShapeBuilder};

/// `y = f(x)` elementwise.
pub fn unary(x: &[f32], op: UnaryOp) -> Vec<f32> {
    x.iter().map(|&v| op.apply(v)).collect()
}

/// `out = a ∘ b` with broadcasting to `out_shape`.
pub fn binary(
    a: &[f32],
    a_shape: &[usize],
    b: &[f32],
    b_shape: &[usize],
    out_shape: &[usize],
    op: BinaryOp,
) -> Vec<f32> {
    if a_shape == b_shape {
        return a.iter().zip(b).map(|(&x, &y)| op.apply(x, y)).collect();
    }
    let n = numel(out_shape);
    // Fast path for the common "bias over rows" case: b is a trailing block repeated.
    if a_shape == out_shape
        && !b.is_empty()
        && n.is_multiple_of(b.len())
        && out_shape.ends_with(b_shape_trim(b_shape))
    {
        let m = b.len();
        return a
            .iter()
            .enumerate()
            .map(|(i, &x)| op.apply(x, b[i % m]))
            .collect();
    }
    let sa = broadcast_strides(a_shape, out_shape);
    let sb = broadcast_strides(b_shape, out_shape);
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; out_shape.len()];
    let (mut ia, mut ib) = (0usize, 0usize);
    for _ in 0..n {
        out.push(op.apply(a[ia], b[ib]));
        // increment the multi-index, updating the two input offsets incrementally
        for d in (0..out_shape.len()).rev() {
            idx[d] += 1;
            ia += sa[d];
            ib += sb[d];
            if idx[d] < out_shape[d] {
                break;
            }
            ia -= sa[d] * out_shape[d];
            ib -= sb[d] * out_shape[d];
            idx[d] = 0;
        }
    }
    out
}

/// Drop leading 1s of a shape (so `[1, 3]` matches the trailing `[.., 3]` of the output).
fn b_shape_trim(s: &[usize]) -> &[usize] {
    let k = s.iter().take_while(|&&d| d == 1).count();
    &s[k..]
}

/// Reduce `x` viewed as `[outer, dim, inner]` along the middle axis → `[outer, inner]`.
pub fn reduce(x: &[f32], outer: usize, dim: usize, inner: usize, op: ReduceOp) -> Vec<f32> {
    let mut out = vec![
        match op {
            ReduceOp::Sum => 0.0,
            ReduceOp::Max => f32::NEG_INFINITY,
        };
        outer * inner
    ];
    for o in 0..outer {
        let base = o * dim * inner;
        let acc = &mut out[o * inner..(o + 1) * inner];
        for d in 0..dim {
            let row = &x[base + d * inner..base + (d + 1) * inner];
            match op {
                ReduceOp::Sum => acc.iter_mut().zip(row).for_each(|(a, &v)| *a += v),
                ReduceOp::Max => acc.iter_mut().zip(row).for_each(|(a, &v)| {
                    // NaN propagates, as in PyTorch
                    if v > *a || v.is_nan() {
                        *a = v
                    }
                }),
            }
        }
    }
    out
}

/// Index of the largest element of each row of a `[rows, cols]` matrix (first one on ties).
pub fn argmax_last(x: &[f32], rows: usize, cols: usize) -> Vec<i64> {
    (0..rows)
        .map(|r| {
            let row = &x[r * cols..(r + 1) * cols];
            let mut best = 0;
            for (j, &v) in row.iter().enumerate() {
                if v > row[best] {
                    best = j;
                }
            }
            best as i64
        })
        .collect()
}

/// Geometry of a (batched) matrix product `C[b] = op(A[b]) · op(B[b])`, `C[b]` being `m × n`.
/// `op(A)` is `m × k`; A is stored `k × m` when `trans_a`. A batch stride of 0 broadcasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulSpec {
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub trans_a: bool,
    pub trans_b: bool,
    pub stride_a: usize,
    pub stride_b: usize,
}

/// Batched matrix product on the CPU through ndarray's optimized GEMM.
pub fn matmul(a: &[f32], b: &[f32], s: &MatmulSpec) -> Vec<f32> {
    let MatmulSpec { batch, m, n, k, .. } = *s;
    let mut c = vec![0.0f32; batch * m * n];
    for bi in 0..batch {
        let pa = &a[bi * s.stride_a..bi * s.stride_a + m * k];
        let pb = &b[bi * s.stride_b..bi * s.stride_b + k * n];
        // a stored transposed is an m×k view with column-major (Fortran) strides
        let av = if s.trans_a {
            ArrayView2::from_shape((m, k).f(), pa)
        } else {
            ArrayView2::from_shape((m, k), pa)
        }
        .expect("matmul: A view");
        let bv = if s.trans_b {
            ArrayView2::from_shape((k, n).f(), pb)
        } else {
            ArrayView2::from_shape((k, n), pb)
        }
        .expect("matmul: B view");
        let mut cv =
            ArrayViewMut2::from_shape((m, n), &mut c[bi * m * n..(bi + 1) * m * n]).expect("C");
        general_mat_mul(1.0, &av, &bv, 0.0, &mut cv);
    }
    c
}

/// `act(x · wᵀ + bias)` for `x` `[rows, inp]`, `w` `[out, inp]`; also returns the
/// pre-activation when the activation is GELU (its backward needs it).
pub fn linear(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    (rows, inp, out): (usize, usize, usize),
    act: super::Activation,
) -> (Vec<f32>, Option<Vec<f32>>) {
    let spec = MatmulSpec {
        batch: 1,
        m: rows,
        n: out,
        k: inp,
        trans_a: false,
        trans_b: true,
        stride_a: 0,
        stride_b: 0,
    };
    let mut z = matmul(x, w, &spec);
    if let Some(b) = bias {
        for row in z.chunks_mut(out) {
            for (v, bv) in row.iter_mut().zip(b) {
                *v += bv;
            }
        }
    }
    match act {
        super::Activation::Identity => (z, None),
        super::Activation::Relu => (z.into_iter().map(|v| act.apply(v)).collect(), None),
        super::Activation::Gelu => (z.iter().map(|&v| act.apply(v)).collect(), Some(z)),
    }
}

/// Softmax (or log-softmax) of each row of a `[rows, cols]` matrix, max-subtracted for stability.
pub fn softmax_last(x: &[f32], rows: usize, cols: usize, log: bool) -> Vec<f32> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let o = &mut out[r * cols..(r + 1) * cols];
        let mx = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f32;
        for (oi, &v) in o.iter_mut().zip(row) {
            *oi = (v - mx).exp();
            sum += *oi;
        }
        if log {
            let lse = sum.ln();
            for (oi, &v) in o.iter_mut().zip(row) {
                *oi = v - mx - lse;
            }
        } else {
            let inv = 1.0 / sum;
            o.iter_mut().for_each(|v| *v *= inv);
        }
    }
    out
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

/// Gather: `out[i] = src[offset + Σ_d idx_d · strides[d]]` for every multi-index of `shape`.
/// Permute, slice and broadcast-expand are all this copy with different strides.
pub fn copy_strided<T: Copy>(
    src: &[T],
    shape: &[usize],
    strides: &[usize],
    offset: usize,
) -> Vec<T> {
    let n = numel(shape);
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let mut idx = vec![0usize; shape.len()];
    let mut p = offset;
    for _ in 0..n {
        out.push(src[p]);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            p += strides[d];
            if idx[d] < shape[d] {
                break;
            }
            p -= strides[d] * shape[d];
            idx[d] = 0;
        }
    }
    out
}

/// Constant padding: `out` has shape `src_shape[d] + before[d] + after[d]`, filled with `value`
/// outside the copied block.
pub fn pad(
    src: &[f32],
    src_shape: &[usize],
    before: &[usize],
    after: &[usize],
    value: f32,
) -> Vec<f32> {
    let out_shape: Vec<usize> = (0..src_shape.len())
        .map(|d| src_shape[d] + before[d] + after[d])
        .collect();
    let os = contiguous_strides(&out_shape);
    let mut out = vec![value; numel(&out_shape)];
    let base: usize = (0..src_shape.len()).map(|d| before[d] * os[d]).sum();
    let n = numel(src_shape);
    let mut idx = vec![0usize; src_shape.len()];
    let mut p = base;
    for &v in src.iter().take(n) {
        out[p] = v;
        for d in (0..src_shape.len()).rev() {
            idx[d] += 1;
            p += os[d];
            if idx[d] < src_shape[d] {
                break;
            }
            p -= os[d] * src_shape[d];
            idx[d] = 0;
        }
    }
    out
}

fn check_index(op: &'static str, i: i64, size: usize) -> Result<usize> {
    if i < 0 || i as usize >= size {
        return Err(Error::IndexOutOfRange { op, index: i, size });
    }
    Ok(i as usize)
}

/// Row gather (embedding lookup): `out[i, :] = table[idx[i], :]`, table `[v, d]`.
pub fn index_select_rows(table: &[f32], v: usize, d: usize, idx: &[i64]) -> Result<Vec<f32>> {
    let mut out = Vec::with_capacity(idx.len() * d);
    for &i in idx {
        let r = check_index("embedding", i, v)?;
        out.extend_from_slice(&table[r * d..(r + 1) * d]);
    }
    Ok(out)
}

/// Row scatter-add (embedding backward): `out[idx[i], :] += g[i, :]`, out `[v, d]` zeros first.
/// Repeated indices accumulate.
pub fn index_add_rows(g: &[f32], idx: &[i64], v: usize, d: usize) -> Result<Vec<f32>> {
    let mut out = vec![0.0; v * d];
    for (k, &i) in idx.iter().enumerate() {
        let r = check_index("embedding backward", i, v)?;
        out[r * d..(r + 1) * d]
            .iter_mut()
            .zip(&g[k * d..(k + 1) * d])
            .for_each(|(o, &x)| *o += x);
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

// ------------------------------------------------------------------ memory-bound ops (issue 4)

/// Backward of [`softmax_last`] from its output `y`: `dx = y ⊙ (g − Σ g⊙y)`, or for
/// log-softmax `dx = g − exp(y) · Σ g`, per row.
pub fn softmax_last_bwd(y: &[f32], g: &[f32], rows: usize, cols: usize, log: bool) -> Vec<f32> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        let (yr, gr) = (&y[r * cols..(r + 1) * cols], &g[r * cols..(r + 1) * cols]);
        let o = &mut out[r * cols..(r + 1) * cols];
        if log {
            let s: f32 = gr.iter().sum();
            for ((oi, &yi), &gi) in o.iter_mut().zip(yr).zip(gr) {
                *oi = gi - yi.exp() * s;
            }
        } else {
            let dot: f32 = yr.iter().zip(gr).map(|(&a, &b)| a * b).sum();
            for ((oi, &yi), &gi) in o.iter_mut().zip(yr).zip(gr) {
                *oi = yi * (gi - dot);
            }
        }
    }
    out
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

/// LayerNorm of each row of `[rows, cols]`: `y = (x − mean)·rstd·γ + β`, rstd = 1/√(var + eps)
/// with the biased variance. Returns `(y, mean, rstd)`; statistics in f64 here.
pub fn layer_norm_fwd(
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    rows: usize,
    cols: usize,
    eps: f32,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut y = vec![0.0; rows * cols];
    let (mut mean, mut rstd) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let mu = row.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
        let var = row.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / cols as f64;
        let rs = 1.0 / (var + eps as f64).sqrt();
        for (c, (o, &v)) in y[r * cols..(r + 1) * cols].iter_mut().zip(row).enumerate() {
            *o = ((v as f64 - mu) * rs) as f32 * gamma[c] + beta[c];
        }
        mean.push(mu as f32);
        rstd.push(rs as f32);
    }
    (y, mean, rstd)
}

/// LayerNorm backward: `(dx, dγ, dβ)` with x̂ = (x − mean)·rstd and ĝ = g·γ:
/// `dx = rstd·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂))`, `dγ = Σ_rows g·x̂`, `dβ = Σ_rows g`.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_bwd(
    x: &[f32],
    gamma: &[f32],
    g: &[f32],
    mean: &[f32],
    rstd: &[f32],
    rows: usize,
    cols: usize,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut dx = vec![0.0; rows * cols];
    let (mut dgamma, mut dbeta) = (vec![0.0f64; cols], vec![0.0f64; cols]);
    for r in 0..rows {
        let (xr, gr) = (&x[r * cols..(r + 1) * cols], &g[r * cols..(r + 1) * cols]);
        let (mu, rs) = (mean[r] as f64, rstd[r] as f64);
        let (mut s1, mut s2) = (0.0f64, 0.0f64);
        for c in 0..cols {
            let h = gr[c] as f64 * gamma[c] as f64;
            s1 += h;
            s2 += h * (xr[c] as f64 - mu) * rs;
        }
        let (a, b) = (s1 / cols as f64, s2 / cols as f64);
        for c in 0..cols {
            let xh = (xr[c] as f64 - mu) * rs;
            let h = gr[c] as f64 * gamma[c] as f64;
            dx[r * cols + c] = (rs * (h - a - xh * b)) as f32;
            dgamma[c] += gr[c] as f64 * xh;
            dbeta[c] += gr[c] as f64;
        }
    }
    let f = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect();
    (dx, f(dgamma), f(dbeta))
}

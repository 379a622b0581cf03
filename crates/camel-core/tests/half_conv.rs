//! Convolution, pooling and batch norm of f16 and bf16 tensors, on every device: conv2d against
//! an f64 reference at awkward geometries (its rows times the weight on the 16-bit GEMM), its
//! input, weight and bias gradients, autocast of f32 operands, pooling and batch norm through
//! their f32 kernels, and dtype errors.
//!
//! Bound of one conv2d element, inputs exact 16-bit values (products exact in f32): the f32 sums
//! err by at most k·2⁻²³·M, where M is the sum of the magnitudes of the terms, and the result
//! rounds once (one group: the bias and ReLU apply before the rounding) or twice (several groups:
//! the product rounds, then the bias add), each by at most u·M with u = 2⁻¹¹ (f16) or 2⁻⁸ (bf16).
//! The input gradient rounds the rows' gradient and then the folded sum: two roundings too.

mod common;
use camel_core::{autocast, Conv2dOptions, DType, Device, Error, Tensor};
use common::{devices, rand_vec};

fn unit(dtype: DType) -> f64 {
    if dtype == DType::F16 {
        2f64.powi(-11)
    } else {
        2f64.powi(-8)
    }
}

/// `x` rounded to `dtype` and back, so the f64 reference sees the values the op sees.
fn rounded(x: &[f32], dtype: DType) -> Vec<f32> {
    common::round_to_half(x, dtype)
}

fn half(x: &[f32], shape: &[usize], dev: Device, dtype: DType) -> Tensor {
    Tensor::from_vec(x.to_vec(), shape, dev)
        .and_then(|t| t.to_dtype(dtype))
        .unwrap()
}

#[derive(Clone, Copy, Debug)]
struct Case {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    o: usize,
    k: (usize, usize),
    stride: usize,
    pad: usize,
    dil: usize,
    groups: usize,
}

impl Case {
    fn opts(&self) -> Conv2dOptions {
        Conv2dOptions {
            stride: (self.stride, self.stride),
            padding: (self.pad, self.pad),
            dilation: (self.dil, self.dil),
            groups: self.groups,
        }
    }
    fn out(&self) -> (usize, usize) {
        let f = |i: usize, k: usize| (i + 2 * self.pad - self.dil * (k - 1) - 1) / self.stride + 1;
        (f(self.h, self.k.0), f(self.w, self.k.1))
    }
    fn xs(&self) -> [usize; 4] {
        [self.n, self.c, self.h, self.w]
    }
    fn ws(&self) -> [usize; 4] {
        [self.o, self.c / self.groups, self.k.0, self.k.1]
    }
    fn ys(&self) -> [usize; 4] {
        let (oh, ow) = self.out();
        [self.n, self.o, oh, ow]
    }
    fn taps(&self) -> usize {
        self.c / self.groups * self.k.0 * self.k.1
    }
}

#[allow(clippy::too_many_arguments)]
const fn case(
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    o: usize,
    k: (usize, usize),
    stride: usize,
    pad: usize,
    dil: usize,
    groups: usize,
) -> Case {
    Case {
        n,
        c,
        h,
        w,
        o,
        k,
        stride,
        pad,
        dil,
        groups,
    }
}

/// Batch 1, a 1×1 kernel on one channel, LeNet's 5×5 with padding 2, a 7×7 kernel with padding
/// larger than the radius' share, stride 2, dilation 2, two groups, depthwise, and sizes that
/// miss the GEMM's tiles (127 output pixels a row, 17 and 70 output channels).
const CASES: &[Case] = &[
    case(1, 1, 7, 7, 1, (1, 1), 1, 0, 1, 1),
    case(2, 1, 28, 28, 6, (5, 5), 1, 2, 1, 1),
    case(3, 3, 9, 11, 5, (7, 7), 1, 3, 1, 1),
    case(1, 3, 13, 9, 70, (3, 3), 2, 1, 1, 1),
    case(1, 3, 11, 12, 5, (3, 3), 1, 2, 2, 1),
    case(3, 4, 9, 7, 6, (3, 3), 2, 1, 1, 2),
    case(2, 5, 8, 9, 5, (3, 3), 1, 1, 1, 5),
    case(1, 2, 3, 127, 17, (1, 3), 1, 1, 1, 1),
];

/// Per output element: `b + Σ w·x` in f64 and `|b| + Σ |w·x|`, over the taps inside the input.
fn reference(cs: &Case, x: &[f32], w: &[f32], b: Option<&[f32]>) -> (Vec<f64>, Vec<f64>) {
    let (oh, ow) = cs.out();
    let (cg, og) = (cs.c / cs.groups, cs.o / cs.groups);
    let (mut y, mut m) = (vec![], vec![]);
    for n in 0..cs.n {
        for o in 0..cs.o {
            let g = o / og;
            for oy in 0..oh {
                for ox in 0..ow {
                    let bv = b.map_or(0.0, |b| b[o] as f64);
                    let (mut s, mut a) = (bv, bv.abs());
                    for c in 0..cg {
                        for i in 0..cs.k.0 {
                            for j in 0..cs.k.1 {
                                let iy = (oy * cs.stride + i * cs.dil) as isize - cs.pad as isize;
                                let ix = (ox * cs.stride + j * cs.dil) as isize - cs.pad as isize;
                                if iy < 0 || ix < 0 || iy >= cs.h as isize || ix >= cs.w as isize {
                                    continue;
                                }
                                let xv = x[((n * cs.c + g * cg + c) * cs.h + iy as usize) * cs.w
                                    + ix as usize] as f64;
                                let wv = w[((o * cg + c) * cs.k.0 + i) * cs.k.1 + j] as f64;
                                s += xv * wv;
                                a += (xv * wv).abs();
                            }
                        }
                    }
                    y.push(s);
                    m.push(a);
                }
            }
        }
    }
    (y, m)
}

/// The input and weight gradients of `Σ dy ⊙ conv2d(x, w)` in f64, with the magnitude sums.
type Grads = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);
fn reference_grads(cs: &Case, x: &[f32], w: &[f32], dy: &[f32]) -> Grads {
    let (oh, ow) = cs.out();
    let (cg, og) = (cs.c / cs.groups, cs.o / cs.groups);
    let (mut dx, mut mx) = (vec![0.0; x.len()], vec![0.0; x.len()]);
    let (mut dw, mut mw) = (vec![0.0; w.len()], vec![0.0; w.len()]);
    for n in 0..cs.n {
        for o in 0..cs.o {
            let g = o / og;
            for oy in 0..oh {
                for ox in 0..ow {
                    let d = dy[((n * cs.o + o) * oh + oy) * ow + ox] as f64;
                    for c in 0..cg {
                        for i in 0..cs.k.0 {
                            for j in 0..cs.k.1 {
                                let iy = (oy * cs.stride + i * cs.dil) as isize - cs.pad as isize;
                                let ix = (ox * cs.stride + j * cs.dil) as isize - cs.pad as isize;
                                if iy < 0 || ix < 0 || iy >= cs.h as isize || ix >= cs.w as isize {
                                    continue;
                                }
                                let xi = ((n * cs.c + g * cg + c) * cs.h + iy as usize) * cs.w
                                    + ix as usize;
                                let wi = ((o * cg + c) * cs.k.0 + i) * cs.k.1 + j;
                                dx[xi] += d * w[wi] as f64;
                                mx[xi] += (d * w[wi] as f64).abs();
                                dw[wi] += d * x[xi] as f64;
                                mw[wi] += (d * x[xi] as f64).abs();
                            }
                        }
                    }
                }
            }
        }
    }
    (dx, mx, dw, mw)
}

/// `|got − want| ≤ roundings·u·M + (1 + u)·k·2⁻²³·M + 2⁻²⁴` for every element.
#[allow(clippy::too_many_arguments)]
fn assert_within(
    what: &str,
    got: &[f32],
    want: &[f64],
    mag: &[f64],
    k: usize,
    roundings: f64,
    dtype: DType,
) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let u = unit(dtype);
    for (i, ((&g, &w), &m)) in got.iter().zip(want).zip(mag).enumerate() {
        let tol = roundings * u * m + (1.0 + u) * k as f64 * 2f64.powi(-23) * m + 2f64.powi(-24);
        assert!(
            (g as f64 - w).abs() <= tol,
            "{what}: element {i}: got {g}, want {w} (tol {tol:e})"
        );
    }
}

#[test]
fn conv2d_16_bit_matches_the_f64_reference_with_bias_and_relu() {
    for (ci, cs) in CASES.iter().enumerate() {
        let seed = 40 * ci as u64;
        for dtype in [DType::F16, DType::BF16] {
            let x = rounded(&rand_vec(cs.xs().iter().product(), -1.0, 1.0, seed), dtype);
            let w = rounded(
                &rand_vec(cs.ws().iter().product(), -1.0, 1.0, seed + 1),
                dtype,
            );
            let b = rounded(&rand_vec(cs.o, -1.0, 1.0, seed + 2), dtype);
            let roundings = if cs.groups == 1 { 1.0 } else { 2.0 };
            for dev in devices() {
                let (xt, wt) = (
                    half(&x, &cs.xs(), dev, dtype),
                    half(&w, &cs.ws(), dev, dtype),
                );
                let bt = half(&b, &[cs.o], dev, dtype);
                for (bias, relu) in [(false, false), (true, false), (true, true)] {
                    let what = format!("{dtype} conv2d on {dev}, bias {bias}, relu {relu}: {cs:?}");
                    let bb = bias.then_some(&bt);
                    let y = if relu {
                        xt.conv2d_relu(&wt, bb, cs.opts())
                    } else {
                        xt.conv2d(&wt, bb, cs.opts())
                    }
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!((y.dtype(), y.shape()), (dtype, &cs.ys()[..]), "{what}");
                    let (mut want, mag) = reference(cs, &x, &w, bias.then_some(&b[..]));
                    if relu {
                        want.iter_mut().for_each(|v| *v = v.max(0.0));
                    }
                    let got = y.to_vec().unwrap();
                    assert_within(&what, &got, &want, &mag, cs.taps() + 1, roundings, dtype);
                }
            }
        }
    }
}

#[test]
fn conv2d_16_bit_gradients_match_the_f64_reference() {
    for (ci, cs) in CASES.iter().enumerate() {
        let seed = 40 * ci as u64 + 7;
        for dtype in [DType::F16, DType::BF16] {
            let x = rounded(&rand_vec(cs.xs().iter().product(), -1.0, 1.0, seed), dtype);
            let w = rounded(
                &rand_vec(cs.ws().iter().product(), -1.0, 1.0, seed + 1),
                dtype,
            );
            let dy = rounded(
                &rand_vec(cs.ys().iter().product(), -1.0, 1.0, seed + 2),
                dtype,
            );
            let (dx, mx, dw, mw) = reference_grads(cs, &x, &w, &dy);
            let (oh, ow) = cs.out();
            let (db, mb): (Vec<f64>, Vec<f64>) = (0..cs.o)
                .map(|o| {
                    let v = (0..cs.n).flat_map(|n| &dy[(n * cs.o + o) * oh * ow..][..oh * ow]);
                    v.fold((0.0, 0.0), |(s, a), &d| {
                        (s + d as f64, a + (d as f64).abs())
                    })
                })
                .unzip();
            for dev in devices() {
                let what = format!("{dtype} conv2d backward on {dev}: {cs:?}");
                let xt = half(&x, &cs.xs(), dev, dtype).requires_grad_(true).unwrap();
                let wt = half(&w, &cs.ws(), dev, dtype).requires_grad_(true).unwrap();
                let bt = Tensor::zeros(&[cs.o], dev)
                    .and_then(|b| b.to_dtype(dtype))
                    .and_then(|b| b.requires_grad_(true))
                    .unwrap();
                let y = xt.conv2d(&wt, Some(&bt), cs.opts()).unwrap();
                y.backward_with(&half(&dy, &cs.ys(), dev, dtype))
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let [gx, gw, gb] = [&xt, &wt, &bt].map(|l| l.grad().unwrap());
                assert_eq!((gx.dtype(), gw.dtype(), gb.dtype()), (dtype, dtype, dtype));
                let k_dx = cs.o / cs.groups * cs.k.0 * cs.k.1;
                let pixels = cs.n * oh * ow;
                assert_within(
                    &format!("{what}: dx"),
                    &gx.to_vec().unwrap(),
                    &dx,
                    &mx,
                    k_dx,
                    2.0,
                    dtype,
                );
                assert_within(
                    &format!("{what}: dw"),
                    &gw.to_vec().unwrap(),
                    &dw,
                    &mw,
                    pixels,
                    1.0,
                    dtype,
                );
                let gbv = gb.to_vec().unwrap();
                let roundings = if cs.groups == 1 { 1.0 } else { 2.0 };
                assert_within(
                    &format!("{what}: db"),
                    &gbv,
                    &db,
                    &mb,
                    pixels,
                    roundings,
                    dtype,
                );
            }
        }
    }
}

/// Inside an autocast scope an f32 convolution casts its operands and runs in 16 bits: the
/// output is what the explicit cast gives, bit for bit, and the f32 weight's gradient comes back
/// in f32 (the master weights).
#[test]
fn autocast_runs_an_f32_convolution_in_16_bits_with_f32_gradients() {
    let cs = case(2, 3, 9, 8, 4, (3, 3), 1, 1, 1, 1);
    let x = rand_vec(cs.xs().iter().product(), -1.0, 1.0, 5);
    let w = rand_vec(cs.ws().iter().product(), -1.0, 1.0, 6);
    let b = rand_vec(cs.o, -1.0, 1.0, 7);
    for dev in devices() {
        for dtype in [DType::F16, DType::BF16] {
            let xt = Tensor::from_vec(x.clone(), &cs.xs(), dev).unwrap();
            let wt = Tensor::from_vec(w.clone(), &cs.ws(), dev)
                .and_then(|t| t.requires_grad_(true))
                .unwrap();
            let bt = Tensor::from_vec(b.clone(), &[cs.o], dev)
                .and_then(|t| t.requires_grad_(true))
                .unwrap();
            let y = autocast(dtype, || xt.conv2d_relu(&wt, Some(&bt), cs.opts()))
                .unwrap()
                .unwrap();
            assert_eq!(y.dtype(), dtype, "{dev}");
            let explicit = xt
                .to_dtype(dtype)
                .and_then(|xh| {
                    xh.conv2d_relu(
                        &wt.detach().to_dtype(dtype)?,
                        Some(&bt.detach().to_dtype(dtype)?),
                        cs.opts(),
                    )
                })
                .unwrap();
            let (a, e) = (y.to_vec().unwrap(), explicit.to_vec().unwrap());
            assert!(
                a.iter().zip(&e).all(|(p, q)| p.to_bits() == q.to_bits()),
                "{dev} {dtype}: autocast differs from the explicit cast"
            );
            y.to_dtype(DType::F32)
                .and_then(|y| y.sum())
                .and_then(|s| s.backward())
                .unwrap();
            assert_eq!(wt.grad().unwrap().dtype(), DType::F32, "{dev} {dtype}");
            assert_eq!(bt.grad().unwrap().dtype(), DType::F32, "{dev} {dtype}");
        }
    }
}

/// Pooling and batch norm of a 16-bit input compute in f32 and round the output once: bit for
/// bit what the f32 op on the explicitly widened input gives, rounded to the input's dtype,
/// forward and backward; 16-bit max pooling returns input values exactly.
#[test]
fn pooling_and_batch_norm_compute_16_bit_inputs_in_f32() {
    let shape = [3, 5, 9, 7];
    let n: usize = shape.iter().product();
    let x = rand_vec(n, -2.0, 2.0, 11);
    let wb = rand_vec(10, 0.5, 1.5, 12);
    for dev in devices() {
        let (g, b) = (
            Tensor::from_vec(wb[..5].to_vec(), &[5], dev).unwrap(),
            Tensor::from_vec(wb[5..].to_vec(), &[5], dev).unwrap(),
        );
        for dtype in [DType::F16, DType::BF16] {
            let xh = half(&x, &shape, dev, dtype);
            let xw = xh.to_dtype(DType::F32).unwrap();
            type Op = fn(&Tensor, &Tensor, &Tensor) -> camel_core::Result<Tensor>;
            let ops: [(&str, Op); 5] = [
                ("max_pool2d", |x, _, _| x.max_pool2d((3, 2), (2, 2), (1, 1))),
                ("avg_pool2d", |x, _, _| {
                    x.avg_pool2d((3, 3), (2, 1), (1, 0), false)
                }),
                ("adaptive_avg_pool2d", |x, _, _| x.adaptive_avg_pool2d_1x1()),
                ("batch_norm", |x, g, b| {
                    Ok(x.batch_norm(Some(g), Some(b), 1e-5)?.0)
                }),
                ("batch_norm_eval", |x, g, b| {
                    x.batch_norm_eval(g, b, Some(g), Some(b), 1e-5)
                }),
            ];
            for (name, f) in ops {
                let what = format!("{dtype} {name} on {dev}");
                let got = f(&xh, &g, &b).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(got.dtype(), dtype, "{what}");
                let want = f(&xw, &g, &b).and_then(|y| y.to_dtype(dtype)).unwrap();
                assert_eq!(got.shape(), want.shape(), "{what}");
                let (a, e) = (got.to_vec().unwrap(), want.to_vec().unwrap());
                assert!(
                    a.iter().zip(&e).all(|(p, q)| p.to_bits() == q.to_bits()),
                    "{what}: differs from the f32 op on the widened input"
                );
                // backward: the upstream gradient u (16-bit values) into both, the f32 gradient
                // rounded once against the 16-bit one
                let u = rand_vec(want.numel(), -1.0, 1.0, 13);
                let uh = half(&u, want.shape(), dev, dtype);
                let xg = half(&x, &shape, dev, dtype).requires_grad_(true).unwrap();
                let xf = xg.detach().to_dtype(DType::F32).unwrap();
                let xf = xf.requires_grad_(true).unwrap();
                let uf = uh.to_dtype(DType::F32).unwrap();
                for (x, u) in [(&xg, &uh), (&xf, &uf)] {
                    f(x, &g, &b)
                        .and_then(|y| y.mul(u))
                        .and_then(|y| y.sum())
                        .and_then(|s| s.backward())
                        .unwrap_or_else(|e| panic!("{what} backward: {e}"));
                }
                let dh = xg.grad().unwrap();
                assert_eq!(dh.dtype(), dtype, "{what} backward");
                let df = xf.grad().unwrap().to_dtype(dtype).unwrap();
                let (a, e) = (dh.to_vec().unwrap(), df.to_vec().unwrap());
                assert!(
                    a.iter().zip(&e).all(|(p, q)| p.to_bits() == q.to_bits()),
                    "{what}: the gradient differs from the f32 op's on the widened input"
                );
            }
            // every maximum is one of the input's values, and its gradient lands there
            let xv = xh.to_vec().unwrap();
            let xg = xh.requires_grad_(true).unwrap();
            let (y, idx) = xg.max_pool2d_with_indices((2, 2), (2, 2), (0, 0)).unwrap();

            let (yv, iv) = (y.to_vec().unwrap(), idx.to_vec_i64().unwrap());
            for (i, (&v, &j)) in yv.iter().zip(&iv).enumerate() {
                let plane = i / (4 * 3);
                assert_eq!(
                    v.to_bits(),
                    xv[plane * 63 + j as usize].to_bits(),
                    "{dev} {dtype}"
                );
            }
            y.to_dtype(DType::F32)
                .and_then(|y| y.sum())
                .and_then(|s| s.backward())
                .unwrap();
            let gx = xg.grad().unwrap();
            assert_eq!(gx.dtype(), dtype);
            let total: f32 = gx.to_vec().unwrap().iter().sum();
            assert_eq!(
                total,
                yv.len() as f32,
                "{dev} {dtype}: each maximum gets one gradient"
            );
        }
    }
}

#[test]
fn mixed_dtypes_are_an_error_outside_autocast() {
    for dev in devices() {
        let x = Tensor::ones(&[1, 2, 5, 5], dev).unwrap();
        let w = Tensor::ones(&[3, 2, 3, 3], dev).unwrap();
        let (xb, wh) = (
            x.to_dtype(DType::BF16).unwrap(),
            w.to_dtype(DType::F16).unwrap(),
        );
        let wb = w.to_dtype(DType::BF16).unwrap();
        let b32 = Tensor::ones(&[3], dev).unwrap();
        let cases = [
            (
                "bf16 input, f16 weight",
                xb.conv2d(&wh, None, Conv2dOptions::default()),
            ),
            (
                "bf16 input, f32 weight",
                xb.conv2d(&w, None, Conv2dOptions::default()),
            ),
            (
                "f32 input, bf16 weight",
                x.conv2d(&wb, None, Conv2dOptions::default()),
            ),
            (
                "bf16 operands, f32 bias",
                xb.conv2d(&wb, Some(&b32), Conv2dOptions::default()),
            ),
        ];
        for (what, r) in cases {
            match r {
                Err(Error::DTypeMismatch { op, .. }) => assert_eq!(op, "conv2d", "{dev} {what}"),
                other => panic!("{dev} {what}: want a dtype error, got {other:?}"),
            }
        }
        // an i64 input is refused by name too
        let xi = x.to_dtype(DType::I64).unwrap();
        assert!(matches!(
            xi.conv2d(&w, None, Conv2dOptions::default()),
            Err(Error::DTypeMismatch { .. })
        ));
        // an empty batch gives an empty 16-bit output
        let e = Tensor::zeros(&[0, 2, 5, 5], dev)
            .and_then(|t| t.to_dtype(DType::BF16))
            .unwrap();
        let y = e.conv2d(&wb, None, Conv2dOptions::default()).unwrap();
        assert_eq!((y.shape(), y.dtype()), (&[0, 3, 3, 3][..], DType::BF16));
    }
}

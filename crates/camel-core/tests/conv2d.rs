//! conv2d against a direct f64 reference (nested loops) at awkward sizes on every device and
//! every step of the conv2d ladder, its gradients by central differences, CPU ≡ CUDA, and its
//! errors for bad input.

mod common;
use camel_core::backend::ladder::Family;
use camel_core::testing::for_each_step;
use camel_core::{Conv2dOptions, Device, Error, Tensor};
use common::*;

/// Sums of up to a few hundred products of values in [-1, 1].
const CONV: Tol = Tol {
    atol: 1e-4,
    rtol: 1e-4,
};

#[derive(Clone, Copy, Debug)]
struct Case {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    o: usize,
    k: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
    groups: usize,
}

impl Case {
    fn opts(&self) -> Conv2dOptions {
        Conv2dOptions {
            stride: self.stride,
            padding: self.padding,
            dilation: self.dilation,
            groups: self.groups,
        }
    }
    fn out(&self) -> (usize, usize) {
        let f = |i: usize, k: usize, s: usize, p: usize, d: usize| {
            (i + 2 * p - d * (k - 1) - 1) / s + 1
        };
        (
            f(
                self.h,
                self.k.0,
                self.stride.0,
                self.padding.0,
                self.dilation.0,
            ),
            f(
                self.w,
                self.k.1,
                self.stride.1,
                self.padding.1,
                self.dilation.1,
            ),
        )
    }
    fn x_shape(&self) -> [usize; 4] {
        [self.n, self.c, self.h, self.w]
    }
    fn w_shape(&self) -> [usize; 4] {
        [self.o, self.c / self.groups, self.k.0, self.k.1]
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
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
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
        padding,
        dilation,
        groups,
    }
}

/// Odd images, 1×1 and 7×7 kernels, stride 2, padding larger than the radius, dilation 2,
/// groups 1 / 2 / depthwise, batch 1 and 3, channels 1 / 3 / 5, and shapes that miss every tile
/// of the implicit GEMM (more than 16 and 64 output channels, several K tiles).
const CASES: &[Case] = &[
    case(1, 1, 7, 7, 1, (1, 1), (1, 1), (0, 0), (1, 1), 1),
    case(3, 3, 9, 11, 5, (7, 7), (1, 1), (3, 3), (1, 1), 1),
    case(1, 3, 13, 9, 5, (3, 3), (2, 2), (1, 1), (1, 1), 1),
    case(3, 5, 5, 7, 3, (3, 3), (1, 2), (3, 2), (1, 1), 1),
    case(1, 3, 11, 12, 5, (3, 3), (1, 1), (2, 2), (2, 2), 1),
    case(3, 4, 9, 7, 6, (3, 3), (2, 1), (1, 1), (1, 1), 2),
    case(1, 5, 8, 9, 5, (3, 3), (1, 1), (1, 1), (1, 1), 5),
    case(3, 5, 7, 8, 10, (5, 3), (1, 1), (2, 1), (1, 2), 5),
    case(3, 3, 33, 37, 17, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    case(1, 6, 15, 17, 70, (3, 3), (2, 2), (0, 1), (1, 1), 1),
    case(2, 1, 28, 28, 6, (5, 5), (1, 1), (2, 2), (1, 1), 1),
    // 30·7·7 = 1470 taps: more than step 2's tap table holds, so step 2 runs step 1
    case(2, 30, 9, 8, 3, (7, 7), (1, 1), (1, 2), (1, 1), 1),
    // more input channels per group than step 2's 16-row input-gradient tile, stride 2
    case(2, 40, 7, 9, 8, (3, 3), (2, 2), (1, 1), (1, 1), 2),
    // 120·3·3 = 1080 output taps: more than step 2's input gradient tabulates (step 1's runs)
    case(1, 4, 6, 5, 120, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    // many groups: step 3's kernels give a block several images (fewer blocks along the batch
    // than images on a GPU of under 225 multiprocessors), its weight gradient in 1 and in 2+
    // splits, and (the last) with a group's 2160 weight entries shared by 9 blocks
    case(5, 100, 6, 5, 100, (3, 3), (1, 1), (1, 1), (1, 1), 100),
    case(3, 600, 4, 5, 600, (3, 3), (2, 1), (2, 1), (1, 1), 600),
    case(8, 600, 5, 5, 160, (3, 3), (1, 1), (1, 1), (1, 1), 20),
    // stride 1 whose zero-padded dy planes exceed step 3's shared memory but whose plain ones
    // do not: step 3's unpadded input gradient
    case(2, 1, 30, 30, 7, (7, 7), (1, 1), (0, 0), (2, 2), 1),
    // more than 16 channels a group: step 4's kernels. Dilation, a pixel count that is not a
    // multiple of 4 (scalar stores) and one that is (float4 stores), groups, two row tiles at
    // stride 2 (the input gradient runs step 3's) with the 192-tap weight-gradient tile, over
    // 1000 pixels an image, and 1470 taps (beyond step 2's table, within step 4's)
    case(3, 20, 9, 12, 33, (3, 3), (1, 1), (1, 1), (1, 2), 1),
    case(2, 40, 10, 8, 40, (3, 3), (1, 1), (2, 1), (1, 1), 2),
    case(2, 24, 17, 13, 70, (3, 3), (2, 2), (1, 1), (1, 1), 1),
    case(1, 17, 41, 33, 18, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    case(1, 30, 9, 8, 20, (7, 7), (1, 1), (3, 3), (1, 1), 1),
    // many small images: step 4's weight gradient gives a block several images
    case(300, 17, 3, 3, 17, (3, 3), (1, 1), (1, 1), (1, 1), 1),
];

/// The direct definition in f64: `y[n,o,oy,ox] = b[o] + Σ_{c,i,j} w[o,c,i,j]·x[n, g·cg + c,
/// oy·s − p + i·d, ox·s − p + j·d]`.
fn reference(cs: &Case, x: &[f32], w: &[f32], b: Option<&[f32]>, relu: bool) -> Vec<f64> {
    let (oh, ow) = cs.out();
    let (cg, og) = (cs.c / cs.groups, cs.o / cs.groups);
    let mut y = Vec::with_capacity(cs.n * cs.o * oh * ow);
    for n in 0..cs.n {
        for o in 0..cs.o {
            let g = o / og;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut s = b.map_or(0.0, |b| b[o] as f64);
                    for c in 0..cg {
                        for i in 0..cs.k.0 {
                            for j in 0..cs.k.1 {
                                let iy = (oy * cs.stride.0 + i * cs.dilation.0) as isize
                                    - cs.padding.0 as isize;
                                let ix = (ox * cs.stride.1 + j * cs.dilation.1) as isize
                                    - cs.padding.1 as isize;
                                if iy < 0 || ix < 0 || iy >= cs.h as isize || ix >= cs.w as isize {
                                    continue;
                                }
                                let xv = x[((n * cs.c + g * cg + c) * cs.h + iy as usize) * cs.w
                                    + ix as usize];
                                let wv = w[((o * cg + c) * cs.k.0 + i) * cs.k.1 + j];
                                s += xv as f64 * wv as f64;
                            }
                        }
                    }
                    y.push(if relu { s.max(0.0) } else { s });
                }
            }
        }
    }
    y
}

#[test]
fn forward_matches_the_direct_reference_on_every_step() {
    for (ci, cs) in CASES.iter().enumerate() {
        let xs = cs.x_shape();
        let ws = cs.w_shape();
        let x = rand_vec(numel(&xs), -1.0, 1.0, 10 + ci as u64);
        let w = rand_vec(numel(&ws), -1.0, 1.0, 20 + ci as u64);
        let b = rand_vec(cs.o, -1.0, 1.0, 30 + ci as u64);
        let (oh, ow) = cs.out();
        let shape = [cs.n, cs.o, oh, ow];
        for_each_step(Family::Conv2d, |step| {
            let what = format!("conv2d step {} {cs:?}", step.name);
            check(
                &what,
                &shape,
                &reference(cs, &x, &w, Some(&b), false),
                CONV,
                |d| t(&x, &xs, d).conv2d(&t(&w, &ws, d), Some(&t(&b, &[cs.o], d)), cs.opts()),
            );
            check(
                &format!("{what} without bias"),
                &shape,
                &reference(cs, &x, &w, None, false),
                CONV,
                |d| t(&x, &xs, d).conv2d(&t(&w, &ws, d), None, cs.opts()),
            );
            check(
                &format!("{what} relu"),
                &shape,
                &reference(cs, &x, &w, Some(&b), true),
                CONV,
                |d| t(&x, &xs, d).conv2d_relu(&t(&w, &ws, d), Some(&t(&b, &[cs.o], d)), cs.opts()),
            );
        });
    }
}

/// The input and weight gradients of `Σ dy ⊙ conv2d(x, w)` in f64: `dx = convᵀ(dy)`,
/// `dw[o, c, i, j] = Σ dy · x[…]`.
fn reference_grads(cs: &Case, x: &[f32], w: &[f32], dy: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let (oh, ow) = cs.out();
    let (cg, og) = (cs.c / cs.groups, cs.o / cs.groups);
    let (mut dx, mut dw) = (vec![0.0; x.len()], vec![0.0; w.len()]);
    for n in 0..cs.n {
        for o in 0..cs.o {
            let g = o / og;
            for oy in 0..oh {
                for ox in 0..ow {
                    let d = dy[((n * cs.o + o) * oh + oy) * ow + ox] as f64;
                    for c in 0..cg {
                        for i in 0..cs.k.0 {
                            for j in 0..cs.k.1 {
                                let iy = (oy * cs.stride.0 + i * cs.dilation.0) as isize
                                    - cs.padding.0 as isize;
                                let ix = (ox * cs.stride.1 + j * cs.dilation.1) as isize
                                    - cs.padding.1 as isize;
                                if iy < 0 || ix < 0 || iy >= cs.h as isize || ix >= cs.w as isize {
                                    continue;
                                }
                                let xi = ((n * cs.c + g * cg + c) * cs.h + iy as usize) * cs.w
                                    + ix as usize;
                                let wi = ((o * cg + c) * cs.k.0 + i) * cs.k.1 + j;
                                dx[xi] += d * w[wi] as f64;
                                dw[wi] += d * x[xi] as f64;
                            }
                        }
                    }
                }
            }
        }
    }
    (dx, dw)
}

/// Backpropagates `Σ dy ⊙ y` from `y` (`dy` in `y`'s shape).
fn backprop(y: &Tensor, dy: &[f32], d: Device) {
    y.mul(&t(dy, y.shape(), d))
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
}

/// The input, weight and bias gradients at every forward case against the f64 reference, on
/// every device and step (the gradchecks below cover small cases only).
#[test]
fn backward_matches_the_direct_reference_on_every_step() {
    for (ci, cs) in CASES.iter().enumerate() {
        let (xs, ws) = (cs.x_shape(), cs.w_shape());
        let (oh, ow) = cs.out();
        let x = rand_vec(numel(&xs), -1.0, 1.0, 110 + ci as u64);
        let w = rand_vec(numel(&ws), -1.0, 1.0, 120 + ci as u64);
        let dy = rand_vec(cs.n * cs.o * oh * ow, -1.0, 1.0, 130 + ci as u64);
        let (rdx, rdw) = reference_grads(cs, &x, &w, &dy);
        let rdb: Vec<f64> = (0..cs.o)
            .map(|o| {
                (0..cs.n)
                    .map(|n| {
                        dy[(n * cs.o + o) * oh * ow..][..oh * ow]
                            .iter()
                            .map(|&v| v as f64)
                            .sum::<f64>()
                    })
                    .sum()
            })
            .collect();
        let mut cpu: Option<[Vec<f32>; 3]> = None;
        for d in devices() {
            for_each_step(Family::Conv2d, |step| {
                let what = format!("conv2d backward on {d}, step {} {cs:?}", step.name);
                let xt = t(&x, &xs, d).requires_grad_(true).unwrap();
                let wt = t(&w, &ws, d).requires_grad_(true).unwrap();
                let bt = Tensor::zeros(&[cs.o], d)
                    .unwrap()
                    .requires_grad_(true)
                    .unwrap();
                let y = xt.conv2d(&wt, Some(&bt), cs.opts()).unwrap();
                backprop(&y, &dy, d);
                let got = [xt, wt, bt].map(|l| l.grad().unwrap().to_vec().unwrap());
                assert_close(&format!("{what}: dx"), &got[0], &rdx, CONV);
                assert_close(
                    &format!("{what}: dw"),
                    &got[1],
                    &rdw,
                    Tol {
                        atol: 1e-3,
                        rtol: 1e-4,
                    },
                );
                assert_close(
                    &format!("{what}: db"),
                    &got[2],
                    &rdb,
                    Tol {
                        atol: 1e-3,
                        rtol: 1e-4,
                    },
                );
                match &cpu {
                    None => cpu = Some(got),
                    Some(c) => {
                        for i in 0..3 {
                            assert_close(
                                &format!("{what}: grad {i} vs cpu"),
                                &got[i],
                                &f64s(&c[i]),
                                Tol {
                                    atol: 1e-3,
                                    rtol: 1e-4,
                                },
                            );
                        }
                    }
                }
            });
        }
    }
}

/// Small cases for gradcheck (its cost is the elements times two forwards).
const GRAD_CASES: &[Case] = &[
    case(2, 2, 5, 6, 4, (3, 3), (2, 1), (1, 2), (1, 1), 2),
    case(1, 3, 6, 5, 3, (3, 2), (1, 1), (2, 1), (2, 1), 3),
    case(3, 1, 4, 4, 2, (1, 1), (1, 1), (0, 0), (1, 1), 1),
    case(1, 2, 7, 6, 3, (3, 3), (2, 2), (1, 1), (1, 1), 1),
];

#[test]
fn gradients_of_input_weight_and_bias() {
    for (ci, cs) in GRAD_CASES.iter().enumerate() {
        let xs = cs.x_shape();
        let ws = cs.w_shape();
        let inputs = [
            hf(rand_vec(numel(&xs), -1.0, 1.0, 40 + ci as u64), &xs),
            hf(rand_vec(numel(&ws), -1.0, 1.0, 50 + ci as u64), &ws),
            hf(rand_vec(cs.o, -1.0, 1.0, 60 + ci as u64), &[cs.o]),
        ];
        let opts = cs.opts();
        for_each_step(Family::Conv2d, |step| {
            gradcheck_all(
                &format!("conv2d step {} {cs:?}", step.name),
                |v| v[0].conv2d(&v[1], Some(&v[2]), opts),
                &inputs,
            );
        });
    }
}

/// The fused ReLU's gradient is the unfused one's (`conv2d(..).relu()`), on every device.
#[test]
fn fused_relu_backward_matches_conv_then_relu() {
    let cs = GRAD_CASES[0];
    let (xs, ws) = (cs.x_shape(), cs.w_shape());
    let x = rand_away(numel(&xs), 0.1, 1.0, 70);
    let w = rand_away(numel(&ws), 0.1, 1.0, 71);
    let b = rand_away(cs.o, 0.1, 1.0, 72);
    for d in devices() {
        for_each_step(Family::Conv2d, |step| {
            let run = |fused: bool| {
                let (xt, wt, bt) = (
                    t(&x, &xs, d).requires_grad_(true).unwrap(),
                    t(&w, &ws, d).requires_grad_(true).unwrap(),
                    t(&b, &[cs.o], d).requires_grad_(true).unwrap(),
                );
                let y = if fused {
                    xt.conv2d_relu(&wt, Some(&bt), cs.opts()).unwrap()
                } else {
                    xt.conv2d(&wt, Some(&bt), cs.opts())
                        .unwrap()
                        .relu()
                        .unwrap()
                };
                y.sum().unwrap().backward().unwrap();
                [xt, wt, bt].map(|l| l.grad().unwrap().to_vec().unwrap())
            };
            let (f, u) = (run(true), run(false));
            for i in 0..3 {
                assert_close(
                    &format!("{d} step {}: grad {i}", step.name),
                    &f[i],
                    &f64s(&u[i]),
                    ELEM,
                );
            }
        });
    }
}

#[test]
fn nan_propagates() {
    let cs = CASES[2];
    let (xs, ws) = (cs.x_shape(), cs.w_shape());
    let mut x = rand_vec(numel(&xs), -1.0, 1.0, 80);
    x[0] = f32::NAN;
    let w = rand_vec(numel(&ws), -1.0, 1.0, 81);
    for d in devices() {
        for_each_step(Family::Conv2d, |step| {
            for relu in [false, true] {
                let (xt, wt) = (t(&x, &xs, d), t(&w, &ws, d));
                let y = if relu {
                    xt.conv2d_relu(&wt, None, cs.opts())
                } else {
                    xt.conv2d(&wt, None, cs.opts())
                };
                let y = y.unwrap().to_vec().unwrap();
                // output (0, o, 0, 0) reads x[0, 0, 0, 0] through tap (1, 1)
                let (oh, ow) = cs.out();
                for o in 0..cs.o {
                    assert!(
                        y[o * oh * ow].is_nan(),
                        "{d} step {} relu {relu}: channel {o}",
                        step.name
                    );
                }
                assert!(y.iter().any(|v| !v.is_nan()));
            }
        });
    }
}

fn expect_err(what: &str, r: camel_core::Result<Tensor>, want: &[&str]) {
    match r {
        Ok(t) => panic!(
            "{what}: expected an error, got a tensor of shape {:?}",
            t.shape()
        ),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with("conv2d"), "{what}: {msg}");
            for w in want {
                assert!(msg.contains(w), "{what}: `{msg}` does not mention `{w}`");
            }
        }
    }
}

#[test]
fn bad_input_is_a_typed_error_naming_the_op_and_shapes() {
    for d in devices() {
        let x = Tensor::zeros(&[2, 4, 5, 5], d).unwrap();
        let w = Tensor::zeros(&[6, 4, 3, 3], d).unwrap();
        let o = Conv2dOptions::default();
        // kernel larger than the padded input
        let big = Tensor::zeros(&[6, 4, 7, 7], d).unwrap();
        let r = x.conv2d(&big, None, o);
        assert!(matches!(r, Err(Error::ShapeMismatch { .. })));
        expect_err(
            "kernel too large",
            r,
            &["[2, 4, 5, 5]", "[6, 4, 7, 7]", "7×7", "5×5"],
        );
        let big8 = Tensor::zeros(&[6, 4, 8, 8], d).unwrap();
        let r = x.conv2d(
            &big8,
            None,
            Conv2dOptions {
                padding: (1, 1),
                ..o
            },
        );
        expect_err("kernel too large padded", r, &["8×8", "7×7"]);
        let dil = Conv2dOptions {
            dilation: (3, 3),
            ..o
        };
        expect_err(
            "dilated kernel too large",
            x.conv2d(&w, None, dil),
            &["7×7"],
        );
        // zero stride, dilation, groups
        let r = x.conv2d(
            &w,
            None,
            Conv2dOptions {
                stride: (0, 1),
                ..o
            },
        );
        assert!(matches!(r, Err(Error::InvalidArgument { .. })));
        expect_err("zero stride", r, &["stride"]);
        expect_err(
            "zero dilation",
            x.conv2d(
                &w,
                None,
                Conv2dOptions {
                    dilation: (1, 0),
                    ..o
                },
            ),
            &["dilation"],
        );
        expect_err(
            "zero groups",
            x.conv2d(&w, None, Conv2dOptions { groups: 0, ..o }),
            &["groups"],
        );
        // channels that do not match the weight
        let w3 = Tensor::zeros(&[6, 3, 3, 3], d).unwrap();
        let r = x.conv2d(&w3, None, o);
        assert!(matches!(r, Err(Error::ShapeMismatch { .. })));
        expect_err("channel mismatch", r, &["[2, 4, 5, 5]", "[6, 3, 3, 3]"]);
        // channels not divisible by groups
        let g3 = Conv2dOptions { groups: 3, ..o };
        expect_err(
            "groups",
            x.conv2d(&Tensor::zeros(&[6, 1, 3, 3], d).unwrap(), None, g3),
            &["divisible by groups"],
        );
        let w5 = Tensor::zeros(&[5, 2, 3, 3], d).unwrap();
        expect_err(
            "out groups",
            x.conv2d(&w5, None, Conv2dOptions { groups: 2, ..o }),
            &["divisible"],
        );
        // not 4-D
        let x3 = Tensor::zeros(&[4, 5, 5], d).unwrap();
        let r = x3.conv2d(&w, None, o);
        assert!(matches!(r, Err(Error::BadShape { .. })));
        expect_err("3-D input", r, &["[4, 5, 5]", "4-D"]);
        expect_err(
            "3-D weight",
            x.conv2d(&Tensor::zeros(&[6, 4, 3], d).unwrap(), None, o),
            &["4-D weight"],
        );
        // bias of the wrong length
        let b = Tensor::zeros(&[5], d).unwrap();
        expect_err("bias", x.conv2d(&w, Some(&b), o), &["[5]", "[6]"]);
        expect_err("relu variant", x3.conv2d_relu(&w, None, o), &["4-D"]);
        // i64 input
        let xi = Tensor::from_vec_i64(vec![0; 100], &[1, 4, 5, 5], d).unwrap();
        expect_err("dtype", xi.conv2d(&w, None, o), &["dtype"]);
    }
}

#[test]
fn operands_on_different_devices_are_an_error() {
    let Some(gpu) = camel_core::testing::gpu() else {
        return;
    };
    let x = Tensor::zeros(&[1, 1, 4, 4], Device::Cpu).unwrap();
    let w = Tensor::zeros(&[1, 1, 3, 3], gpu).unwrap();
    assert!(matches!(
        x.conv2d(&w, None, Conv2dOptions::default()),
        Err(Error::DeviceMismatch { .. })
    ));
}

/// An empty batch gives an empty output and zero weight gradients.
#[test]
fn empty_batch() {
    for d in devices() {
        for_each_step(Family::Conv2d, |_| {
            let x = Tensor::zeros(&[0, 2, 5, 5], d)
                .unwrap()
                .requires_grad_(true)
                .unwrap();
            let w = Tensor::ones(&[3, 2, 3, 3], d)
                .unwrap()
                .requires_grad_(true)
                .unwrap();
            let y = x.conv2d(&w, None, Conv2dOptions::default()).unwrap();
            assert_eq!(y.shape(), &[0, 3, 3, 3]);
            y.sum().unwrap().backward().unwrap();
            assert_eq!(w.grad().unwrap().to_vec().unwrap(), vec![0.0; 54]);
        });
    }
}

/// Step 1 in chunks of images (a workspace bound of a few images) gives the unchunked result,
/// forward and backward.
#[test]
fn chunked_im2col_matches_the_reference() {
    use camel_cuda::kernels::conv2d::with_workspace_bytes;
    let cs = case(5, 3, 9, 10, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1);
    let (xs, ws) = (cs.x_shape(), cs.w_shape());
    let x = rand_vec(numel(&xs), -1.0, 1.0, 90);
    let w = rand_vec(numel(&ws), -1.0, 1.0, 91);
    let b = rand_vec(cs.o, -1.0, 1.0, 92);
    let (oh, ow) = cs.out();
    // one image's column matrix is 3·9·90 floats: 4 KiB bounds a chunk at one image, 10 KiB at two
    for bytes in [4096, 10 << 10] {
        with_workspace_bytes(bytes, || {
            camel_core::config::with_step(
                Family::Conv2d,
                camel_core::backend::ladder::Step::One,
                || {
                    check(
                        &format!("chunked conv2d, {bytes} B"),
                        &[cs.n, cs.o, oh, ow],
                        &reference(&cs, &x, &w, Some(&b), false),
                        CONV,
                        |d| {
                            t(&x, &xs, d).conv2d(
                                &t(&w, &ws, d),
                                Some(&t(&b, &[cs.o], d)),
                                cs.opts(),
                            )
                        },
                    );
                    gradcheck_all(
                        &format!("chunked conv2d, {bytes} B"),
                        |v| v[0].conv2d(&v[1], Some(&v[2]), cs.opts()),
                        &[
                            hf(x.clone(), &xs),
                            hf(w.clone(), &ws),
                            hf(b.clone(), &[cs.o]),
                        ],
                    );
                },
            );
        });
    }
}

/// The CPU splits the batch over threads (and the weight gradient's parts over threads too):
/// the output and all three gradients are the same bit for bit for any thread count.
#[test]
fn cpu_results_do_not_depend_on_the_thread_count() {
    let cs = case(20, 8, 16, 16, 16, (3, 3), (1, 1), (1, 1), (1, 1), 1);
    let (xs, ws) = (cs.x_shape(), cs.w_shape());
    let (oh, ow) = cs.out();
    let x = rand_vec(numel(&xs), -1.0, 1.0, 71);
    let w = rand_vec(numel(&ws), -1.0, 1.0, 72);
    let b = rand_vec(cs.o, -1.0, 1.0, 73);
    let dy = rand_vec(cs.n * cs.o * oh * ow, -1.0, 1.0, 74);
    let run = |threads: usize| {
        camel_core::config::with_cpu_threads(threads, || {
            let d = Device::Cpu;
            let xt = t(&x, &xs, d).requires_grad_(true).unwrap();
            let wt = t(&w, &ws, d).requires_grad_(true).unwrap();
            let bt = t(&b, &[cs.o], d).requires_grad_(true).unwrap();
            let y = xt.conv2d_relu(&wt, Some(&bt), cs.opts()).unwrap();
            backprop(&y, &dy, d);
            let mut out = vec![y.to_vec().unwrap()];
            out.extend([xt, wt, bt].map(|l| l.grad().unwrap().to_vec().unwrap()));
            out
        })
    };
    let one = run(1);
    for threads in [2, 3, 7] {
        let got = run(threads);
        for (i, (g, o)) in got.iter().zip(&one).enumerate() {
            let same =
                g.len() == o.len() && g.iter().zip(o).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "result {i} (y, dx, dw, db) with {threads} threads differs from 1 thread"
            );
        }
    }
}

//! max_pool2d, avg_pool2d and adaptive_avg_pool2d_1x1 against f64 references at awkward sizes
//! on every device, their gradients (maxpool on tie-free data, and the documented tie rule),
//! NaN, and their errors for bad input.

mod common;
use camel_core::{Device, Error, Tensor};
use common::*;

#[derive(Clone, Copy, Debug)]
struct Case {
    shape: [usize; 4],
    k: (usize, usize),
    s: (usize, usize),
    p: (usize, usize),
}

const CASES: &[Case] = &[
    Case {
        shape: [1, 1, 7, 7],
        k: (2, 2),
        s: (2, 2),
        p: (0, 0),
    },
    Case {
        shape: [3, 5, 9, 11],
        k: (3, 3),
        s: (2, 2),
        p: (1, 1),
    },
    Case {
        shape: [2, 3, 13, 8],
        k: (3, 2),
        s: (1, 2),
        p: (1, 1),
    },
    Case {
        shape: [1, 3, 5, 6],
        k: (5, 4),
        s: (3, 1),
        p: (2, 0),
    },
    Case {
        shape: [3, 1, 28, 28],
        k: (2, 2),
        s: (2, 2),
        p: (0, 0),
    },
    Case {
        shape: [2, 4, 33, 31],
        k: (3, 3),
        s: (1, 1),
        p: (1, 1),
    },
    Case {
        shape: [1, 2, 1, 1],
        k: (1, 1),
        s: (1, 1),
        p: (0, 0),
    },
];

fn out(c: &Case) -> (usize, usize) {
    let [_, _, h, w] = c.shape;
    (
        (h + 2 * c.p.0 - c.k.0) / c.s.0 + 1,
        (w + 2 * c.p.1 - c.k.1) / c.s.1 + 1,
    )
}

/// Reference windows: `f(plane, window values, window size)` per output element.
fn reference(c: &Case, x: &[f32], f: impl Fn(&[f64], usize) -> f64) -> Vec<f64> {
    let [n, ch, h, w] = c.shape;
    let (oh, ow) = out(c);
    let mut y = Vec::new();
    for plane in 0..n * ch {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut vals = Vec::new();
                for i in 0..c.k.0 {
                    for j in 0..c.k.1 {
                        let iy = (oy * c.s.0 + i) as isize - c.p.0 as isize;
                        let ix = (ox * c.s.1 + j) as isize - c.p.1 as isize;
                        if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < w {
                            vals.push(x[plane * h * w + iy as usize * w + ix as usize] as f64);
                        }
                    }
                }
                y.push(f(&vals, c.k.0 * c.k.1));
            }
        }
    }
    y
}

#[test]
fn max_pool_matches_the_reference() {
    for (i, c) in CASES.iter().enumerate() {
        let x = rand_vec(numel(&c.shape), -3.0, 3.0, i as u64);
        let (oh, ow) = out(c);
        let shape = [c.shape[0], c.shape[1], oh, ow];
        let want = reference(c, &x, |v, _| {
            v.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
        });
        check(&format!("max_pool2d {c:?}"), &shape, &want, EXACT, |d| {
            t(&x, &c.shape, d).max_pool2d(c.k, c.s, c.p)
        });
    }
}

#[test]
fn avg_pool_matches_the_reference() {
    for (i, c) in CASES.iter().enumerate() {
        let x = rand_vec(numel(&c.shape), -3.0, 3.0, 100 + i as u64);
        let (oh, ow) = out(c);
        let shape = [c.shape[0], c.shape[1], oh, ow];
        for cip in [true, false] {
            let want = reference(c, &x, |v, k| {
                v.iter().sum::<f64>() / if cip { k as f64 } else { v.len() as f64 }
            });
            check(
                &format!("avg_pool2d {c:?} cip {cip}"),
                &shape,
                &want,
                ELEM,
                |d| t(&x, &c.shape, d).avg_pool2d(c.k, c.s, c.p, cip),
            );
        }
    }
}

#[test]
fn adaptive_avg_pool_1x1_matches_the_reference() {
    for (i, shape) in [[1, 1, 1, 1], [3, 5, 7, 9], [2, 3, 33, 35]]
        .iter()
        .enumerate()
    {
        let x = rand_vec(numel(shape), -3.0, 3.0, 200 + i as u64);
        let hw = shape[2] * shape[3];
        let want: Vec<f64> = x
            .chunks(hw)
            .map(|p| p.iter().map(|&v| v as f64).sum::<f64>() / hw as f64)
            .collect();
        check(
            &format!("adaptive_avg_pool2d {shape:?}"),
            &[shape[0], shape[1], 1, 1],
            &want,
            ELEM,
            |d| t(&x, shape, d).adaptive_avg_pool2d_1x1(),
        );
    }
}

/// Small cases for gradcheck; the max pool's data has no ties (values at least 0.05 apart, far
/// more than the finite-difference step).
const GRAD: &[Case] = &[
    Case {
        shape: [2, 2, 5, 6],
        k: (2, 2),
        s: (2, 2),
        p: (0, 0),
    },
    Case {
        shape: [1, 3, 7, 5],
        k: (3, 3),
        s: (2, 1),
        p: (1, 1),
    },
    Case {
        shape: [2, 1, 6, 6],
        k: (3, 2),
        s: (1, 1),
        p: (1, 0),
    },
];

#[test]
fn gradients() {
    for (i, c) in GRAD.iter().enumerate() {
        let (k, s, p) = (c.k, c.s, c.p);
        let x = hf(
            rand_distinct(numel(&c.shape), 0.05, 300 + i as u64),
            &c.shape,
        );
        gradcheck_all(
            &format!("max_pool2d {c:?}"),
            |v| v[0].max_pool2d(k, s, p),
            std::slice::from_ref(&x),
        );
        for cip in [true, false] {
            gradcheck_all(
                &format!("avg_pool2d {c:?} {cip}"),
                |v| v[0].avg_pool2d(k, s, p, cip),
                std::slice::from_ref(&x),
            );
        }
        gradcheck_all(
            "adaptive_avg_pool2d",
            |v| v[0].adaptive_avg_pool2d_1x1(),
            &[x],
        );
    }
}

/// Ties: the first maximum in row-major window order takes the gradient; overlapping windows
/// each route theirs.
#[test]
fn ties_route_the_gradient_to_the_first_maximum() {
    // one plane 3×3 of equal values, windows 2×2 every 1: four windows, each picks its
    // upper-left element
    for d in devices() {
        let x = t(&[1.0; 9], &[1, 1, 3, 3], d).requires_grad_(true).unwrap();
        let (y, idx) = x.max_pool2d_with_indices((2, 2), (1, 1), (0, 0)).unwrap();
        assert_eq!(idx.to_vec_i64().unwrap(), [0, 1, 3, 4], "{d}");
        y.sum().unwrap().backward().unwrap();
        assert_eq!(
            x.grad().unwrap().to_vec().unwrap(),
            [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
            "{d}"
        );
        // a tie between a later and an earlier element: [0, 5; 5, 1] → index 1
        let x = t(&[0.0, 5.0, 5.0, 1.0], &[1, 1, 2, 2], d)
            .requires_grad_(true)
            .unwrap();
        let (y, idx) = x.max_pool2d_with_indices((2, 2), (2, 2), (0, 0)).unwrap();
        assert_eq!(idx.to_vec_i64().unwrap(), [1], "{d}");
        y.backward().unwrap();
        assert_eq!(
            x.grad().unwrap().to_vec().unwrap(),
            [0.0, 1.0, 0.0, 0.0],
            "{d}"
        );
    }
}

/// NaN wins a window (the first NaN), and takes the gradient; padding never wins.
#[test]
fn nan_wins_and_padding_never_does() {
    for d in devices() {
        let v = [1.0, f32::NAN, 3.0, f32::NAN];
        let x = t(&v, &[1, 1, 2, 2], d).requires_grad_(true).unwrap();
        let (y, idx) = x.max_pool2d_with_indices((2, 2), (2, 2), (0, 0)).unwrap();
        assert!(y.to_vec().unwrap()[0].is_nan(), "{d}");
        assert_eq!(idx.to_vec_i64().unwrap(), [1], "{d}");
        y.backward().unwrap();
        assert_eq!(
            x.grad().unwrap().to_vec().unwrap(),
            [0.0, 1.0, 0.0, 0.0],
            "{d}"
        );
        let y = t(&v, &[1, 1, 2, 2], d)
            .avg_pool2d((2, 2), (2, 2), (0, 0), true)
            .unwrap();
        assert!(y.to_vec().unwrap()[0].is_nan(), "{d}");
        // all-negative input with padding: the maxima are inputs, not the padding's zeros
        let (y, idx) = t(&[-1.0, -2.0, -3.0, -4.0], &[1, 1, 2, 2], d)
            .max_pool2d_with_indices((3, 3), (1, 1), (1, 1))
            .unwrap();
        assert_eq!(y.to_vec().unwrap(), [-1.0; 4], "{d}");
        assert_eq!(idx.to_vec_i64().unwrap(), [0; 4], "{d}");
    }
}

#[test]
fn bad_input_is_a_typed_error() {
    for d in devices() {
        let x = Tensor::zeros(&[2, 3, 5, 5], d).unwrap();
        let msg = |r: camel_core::Result<Tensor>| r.map(|_| ()).unwrap_err().to_string();
        // not 4-D
        let x3 = Tensor::zeros(&[3, 5, 5], d).unwrap();
        let r = x3.max_pool2d((2, 2), (2, 2), (0, 0));
        assert!(matches!(r, Err(Error::BadShape { .. })));
        let m = msg(r);
        assert!(
            m.starts_with("max_pool2d") && m.contains("[3, 5, 5]") && m.contains("4-D"),
            "{m}"
        );
        let m = msg(x3.avg_pool2d((2, 2), (2, 2), (0, 0), true));
        assert!(m.starts_with("avg_pool2d") && m.contains("4-D"), "{m}");
        let m = msg(x3.adaptive_avg_pool2d_1x1());
        assert!(
            m.starts_with("adaptive_avg_pool2d") && m.contains("4-D"),
            "{m}"
        );
        // zero stride, zero kernel
        let r = x.max_pool2d((2, 2), (0, 2), (0, 0));
        assert!(matches!(r, Err(Error::InvalidArgument { .. })));
        assert!(msg(r).contains("stride"));
        assert!(msg(x.avg_pool2d((0, 2), (1, 1), (0, 0), true)).contains("kernel"));
        // padding more than half the window
        let m = msg(x.max_pool2d((3, 3), (1, 1), (2, 1)));
        assert!(m.contains("padding (2, 1)") && m.contains("half"), "{m}");
        assert!(msg(x.avg_pool2d((2, 2), (1, 1), (0, 2), false)).contains("half"));
        // a window larger than the padded input
        let r = x.max_pool2d((7, 7), (1, 1), (0, 0));
        assert!(matches!(r, Err(Error::BadShape { .. })));
        let m = msg(r);
        assert!(m.contains("[2, 3, 5, 5]") && m.contains("7×7"), "{m}");
        // bad input changes nothing and leaves no graph
        assert_eq!(x.to_vec().unwrap(), vec![0.0; 150]);
    }
}

/// The first maximum of each window (a NaN over any number, the first NaN) in row-major window
/// order, as an offset in the plane, or −1 for a window of padding only.
fn reference_argmax(c: &Case, x: &[f32]) -> Vec<i64> {
    let [n, ch, h, w] = c.shape;
    let (oh, ow) = out(c);
    let mut idx = Vec::new();
    for plane in 0..n * ch {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut best: Option<(f32, i64)> = None;
                for i in 0..c.k.0 {
                    for j in 0..c.k.1 {
                        let iy = (oy * c.s.0 + i) as isize - c.p.0 as isize;
                        let ix = (ox * c.s.1 + j) as isize - c.p.1 as isize;
                        if iy < 0 || ix < 0 || iy as usize >= h || ix as usize >= w {
                            continue;
                        }
                        let at = iy as usize * w + ix as usize;
                        let v = x[plane * h * w + at];
                        let wins = match best {
                            None => true,
                            Some((b, _)) => v > b || (v.is_nan() && !b.is_nan()),
                        };
                        if wins {
                            best = Some((v, at as i64));
                        }
                    }
                }
                idx.push(best.map_or(-1, |b| b.1));
            }
        }
    }
    idx
}

/// The saved indices on data full of ties and NaNs, on every device, and on the CPU the same
/// values and gradients bit for bit whatever the thread count (the planes split over threads).
#[test]
fn max_pool_indices_and_thread_counts() {
    let big = [
        Case {
            shape: [16, 8, 40, 40],
            k: (3, 3),
            s: (2, 2),
            p: (1, 1),
        },
        Case {
            shape: [64, 6, 28, 28],
            k: (2, 2),
            s: (2, 2),
            p: (0, 0),
        },
    ];
    for (i, c) in CASES.iter().chain(&big).enumerate() {
        // five values, so that most windows tie, and a NaN every 37 elements
        let x: Vec<f32> = rand_vec(numel(&c.shape), -2.5, 2.5, 700 + i as u64)
            .iter()
            .enumerate()
            .map(|(j, v)| if j % 37 == 5 { f32::NAN } else { v.round() })
            .collect();
        let want = reference_argmax(c, &x);
        for d in devices() {
            let (_, idx) = t(&x, &c.shape, d)
                .max_pool2d_with_indices(c.k, c.s, c.p)
                .unwrap();
            assert_eq!(idx.to_vec_i64().unwrap(), want, "{c:?} on {d}");
        }
        let (oh, ow) = out(c);
        let dy = rand_vec(c.shape[0] * c.shape[1] * oh * ow, -1.0, 1.0, 900 + i as u64);
        let run = |threads: usize| {
            camel_core::config::with_cpu_threads(threads, || {
                let xt = t(&x, &c.shape, Device::Cpu).requires_grad_(true).unwrap();
                let y = xt.max_pool2d(c.k, c.s, c.p).unwrap();
                let g = t(&dy, &[c.shape[0], c.shape[1], oh, ow], Device::Cpu);
                y.mul(&g).unwrap().sum().unwrap().backward().unwrap();
                let bits = |v: Vec<f32>| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                (
                    bits(y.to_vec().unwrap()),
                    bits(xt.grad().unwrap().to_vec().unwrap()),
                )
            })
        };
        let one = run(1);
        for threads in [2, 3, 7] {
            assert!(
                run(threads) == one,
                "{c:?}: {threads} threads differ from 1"
            );
        }
    }
}

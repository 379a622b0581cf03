//! The image filter (`filter2d`, `filter2d_separable`) at every step of its ladder against an
//! f64 reference written here: odd images (1×1, 7×13, 127×1031, and 2048×2048 once), radii
//! 0 … 8, random filters; images around the edges of the kernels' tiles (one past a multiple of
//! step 6's 128 × 64 tile, thinner than its apron, rows a multiple of 4 floats or not); step 6
//! equal to step 5 bit for bit on the GPU; the separable steps' refusal of a filter that is not
//! rank 1; NaN reaching exactly the windows that hold it; gradients; bad input.
//!
//! Every step runs on the CPU too: the step decides which path the op takes (a 2-D filter is
//! factored at steps 3 and 4, vectors are multiplied out at steps 1 and 2) on every device.

mod common;
use camel_core::backend::ladder::{with_step, Family, Step, StepInfo};
use camel_core::testing::for_each_step;
use camel_core::{Device, Error, Tensor};
use common::*;

/// `y[i][j] = Σ_{a,b} w[a][b] · x[i + a − r][j + b − r]`, zero padding, in f64.
fn reference(x: &[f32], h: usize, wd: usize, f: &[f64], r: usize) -> Vec<f64> {
    let k = 2 * r + 1;
    let mut y = vec![0.0; h * wd];
    for i in 0..h {
        for j in 0..wd {
            let mut acc = 0.0;
            for a in 0..k {
                let ii = i as isize + a as isize - r as isize;
                if ii < 0 || ii >= h as isize {
                    continue;
                }
                for b in 0..k {
                    let jj = j as isize + b as isize - r as isize;
                    if jj >= 0 && jj < wd as isize {
                        acc += f[a * k + b] * x[ii as usize * wd + jj as usize] as f64;
                    }
                }
            }
            y[i * wd + j] = acc;
        }
    }
    y
}

/// The separable filter `col ⊗ row` in f64, as two passes (for the large images).
fn reference_sep(x: &[f32], h: usize, wd: usize, row: &[f32], col: &[f32]) -> Vec<f64> {
    let k = row.len();
    let r = (k / 2) as isize;
    let mut t = vec![0.0f64; h * wd];
    for i in 0..h {
        for j in 0..wd as isize {
            let mut acc = 0.0;
            for (b, &v) in row.iter().enumerate() {
                let jj = j + b as isize - r;
                if jj >= 0 && jj < wd as isize {
                    acc += v as f64 * x[i * wd + jj as usize] as f64;
                }
            }
            t[i * wd + j as usize] = acc;
        }
    }
    let mut y = vec![0.0f64; h * wd];
    for i in 0..h as isize {
        for j in 0..wd {
            let mut acc = 0.0;
            for (a, &c) in col.iter().enumerate() {
                let ii = i + a as isize - r;
                if ii >= 0 && ii < h as isize {
                    acc += c as f64 * t[ii as usize * wd + j];
                }
            }
            y[i as usize * wd + j] = acc;
        }
    }
    y
}

/// The f32 outer product `col ⊗ row` (a separable 2-D filter).
fn outer(col: &[f32], row: &[f32]) -> Vec<f32> {
    col.iter()
        .flat_map(|&c| row.iter().map(move |&v| c * v))
        .collect()
}

/// Tolerance for a filter whose taps sum to `l1` in magnitude over an image in [-1, 1]: f32
/// accumulation of up to 289 products. A tap left out or read from the wrong pixel moves an
/// output by about |w|·|x| ≈ 0.1, far beyond it.
fn tol(l1: f64) -> Tol {
    Tol {
        atol: 1e-6 + 1e-5 * l1,
        rtol: 1e-5,
    }
}

fn l1(v: &[f32]) -> f64 {
    v.iter().map(|&x| (x as f64).abs()).sum()
}

/// Whether the step has a 2-D kernel (otherwise `filter2d` needs a separable filter): steps 1,
/// 2, 5 and 6.
fn has_2d(info: &StepInfo) -> bool {
    camel_cuda::kernels::filter::at(info.step)
        .filter2d
        .is_some()
}

/// Whether the step has separable passes (otherwise `filter2d_separable` runs the 2-D kernel on
/// the outer product): steps 3 … 6.
fn has_separable(info: &StepInfo) -> bool {
    camel_cuda::kernels::filter::at(info.step)
        .separable
        .is_some()
}

#[test]
fn the_helpers_classify_the_steps() {
    let classes: Vec<(u32, bool, bool)> = Family::Filter
        .steps()
        .iter()
        .map(|i| (i.step.number(), has_2d(i), has_separable(i)))
        .collect();
    assert_eq!(
        classes,
        [
            (1, true, false),
            (2, true, false),
            (3, false, true),
            (4, false, true),
            (5, true, true),
            (6, true, true),
        ]
    );
}

/// Every step, checked on every device.
fn every_step(body: impl FnMut(&StepInfo)) {
    for_each_step(Family::Filter, body);
}

#[test]
fn filter2d_matches_the_f64_reference_at_every_step() {
    let mut cases: Vec<(usize, usize, usize)> = Vec::new();
    for r in 0..=8 {
        cases.push((1, 1, r));
        cases.push((7, 13, r));
    }
    cases.extend([(127, 1031, 1), (127, 1031, 8), (33, 5, 3)]);
    // around step 6's 128 × 64 tile (and the other steps' 16, 32 and 128): one past a multiple
    // of it, thinner than its apron, widths a multiple of 4 (its float4 loads) and not
    for r in [0, 1, 7, 8] {
        for (h, w) in [
            (7, 1000),
            (127, 33),
            (1000, 7),
            (129, 257),
            (65, 132),
            (64, 128),
        ] {
            cases.push((h, w, r));
        }
    }
    for (i, &(h, w, r)) in cases.iter().enumerate() {
        let k = 2 * r + 1;
        let seed = 100 + i as u64;
        let x = rand_vec(h * w, -1.0, 1.0, seed);
        // a general filter (steps 1, 2, 5) and a separable one (every step)
        let f = rand_vec(k * k, -1.0, 1.0, seed ^ 7);
        let (col, row) = (
            rand_vec(k, -1.0, 1.0, seed ^ 11),
            rand_vec(k, -1.0, 1.0, seed ^ 13),
        );
        let fs = outer(&col, &row);
        let want = reference(&x, h, w, &f64s(&f), r);
        let want_s = reference(&x, h, w, &f64s(&fs), r);
        every_step(|info| {
            let what = format!(
                "step {} ({}) [{h}, {w}] r {r}",
                info.step.number(),
                info.name
            );
            if has_2d(info) {
                check(
                    &format!("filter2d {what}"),
                    &[h, w],
                    &want,
                    tol(l1(&f)),
                    |d| t(&x, &[h, w], d).filter2d(&t(&f, &[k, k], d)),
                );
            }
            check(
                &format!("filter2d separable filter {what}"),
                &[h, w],
                &want_s,
                tol(l1(&fs)),
                |d| t(&x, &[h, w], d).filter2d(&t(&fs, &[k, k], d)),
            );
            check(
                &format!("filter2d_separable {what}"),
                &[h, w],
                &want_s,
                tol(l1(&fs)),
                |d| t(&x, &[h, w], d).filter2d_separable(&t(&row, &[k], d), &t(&col, &[k], d)),
            );
        });
    }
}

/// 2048 × 2048 at radius 8, once per step: the separable vectors at every step (the CPU only
/// where the step runs separable passes: its 2-D reference would take minutes), and the 2-D
/// kernels of steps 1, 2, 5 and 6 on the GPU.
#[test]
fn a_2048_square_image_at_radius_8() {
    let (h, w, r) = (2048, 2048, 8);
    let k = 2 * r + 1;
    let x = rand_vec(h * w, -1.0, 1.0, 2048);
    let (col, row) = (rand_vec(k, -1.0, 1.0, 1), rand_vec(k, -1.0, 1.0, 2));
    let fs = outer(&col, &row);
    let want = reference_sep(&x, h, w, &row, &col);
    let tl = tol(l1(&fs));
    every_step(|info| {
        for dev in devices() {
            let xs = t(&x, &[h, w], dev);
            let what = format!("2048² r 8 step {} on {dev}", info.step.number());
            if dev.is_cuda() || has_separable(info) {
                let got = xs
                    .filter2d_separable(&t(&row, &[k], dev), &t(&col, &[k], dev))
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_close(
                    &format!("separable {what}"),
                    &got.to_vec().unwrap(),
                    &want,
                    tl,
                );
            }
            if dev.is_cuda() {
                let got = xs
                    .filter2d(&t(&fs, &[k, k], dev))
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_close(&format!("2-D {what}"), &got.to_vec().unwrap(), &want, tl);
            }
        }
    });
}

/// Step 6 sums the taps in step 5's order, so on the GPU their separable outputs are equal bit
/// for bit: every radius, images smaller than, one past and several of step 6's tile, widths a
/// multiple of 4 and not. And with an infinite centre tap in the row over a positive image every
/// output is +inf at both steps: the intermediate rows outside the image are zeros, never the
/// infinite tap times a zero pixel (which would make the outputs near the top and bottom NaN).
#[test]
fn fused_step_6_equals_step_5_bit_for_bit() {
    let Some(gpu) = camel_core::testing::gpu() else {
        return;
    };
    let sizes = [
        (1, 1),
        (3, 5),
        (64, 128),
        (65, 129),
        (129, 260),
        (200, 301),
        (517, 1024),
    ];
    for r in 0..=8 {
        let k = 2 * r + 1;
        for (i, &(h, w)) in sizes.iter().enumerate() {
            let seed = 1000 + 10 * r as u64 + i as u64;
            let mut cases = vec![(
                rand_vec(h * w, -1.0, 1.0, seed),
                rand_vec(k, -1.0, 1.0, seed ^ 1),
                rand_vec(k, -1.0, 1.0, seed ^ 2),
                false,
            )];
            if r > 0 {
                let mut row = rand_vec(k, 0.5, 1.0, seed ^ 3);
                row[r] = f32::INFINITY;
                let (x, col) = (
                    rand_vec(h * w, 0.5, 1.0, seed),
                    rand_vec(k, 0.5, 1.0, seed ^ 4),
                );
                cases.push((x, row, col, true));
            }
            for (x, row, col, infinite) in cases {
                let (xt, rt, ct) = (t(&x, &[h, w], gpu), t(&row, &[k], gpu), t(&col, &[k], gpu));
                let run = |s: Step| {
                    with_step(Family::Filter, s, || xt.filter2d_separable(&rt, &ct))
                        .and_then(|y| y.to_vec())
                        .unwrap_or_else(|e| panic!("step {} [{h}, {w}] r {r}: {e}", s.number()))
                };
                let (five, six) = (run(Step::Five), run(Step::Six));
                for (j, (a, b)) in five.iter().zip(&six).enumerate() {
                    let at = (j / w, j % w);
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "[{h}, {w}] r {r} at {at:?}: step 5 {a}, step 6 {b}"
                    );
                    if infinite {
                        assert_eq!(*b, f32::INFINITY, "[{h}, {w}] r {r} at {at:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn separable_steps_refuse_a_filter_that_is_not_rank_one() {
    let k = 5;
    let x = rand_vec(9 * 11, -1.0, 1.0, 5);
    let mut f = outer(&[1.0, 4.0, 6.0, 4.0, 1.0], &[1.0, 4.0, 6.0, 4.0, 1.0]);
    f[7] += 0.5;
    every_step(|info| {
        for dev in devices() {
            let got = t(&x, &[9, 11], dev).filter2d(&t(&f, &[k, k], dev));
            if has_2d(info) {
                assert!(got.is_ok(), "step {}: {:?}", info.step.number(), got.err());
            } else {
                match got {
                    Err(Error::InvalidArgument { op, msg }) => {
                        assert_eq!(op, "filter2d");
                        assert!(msg.contains("separable") && msg.contains("[5, 5]"), "{msg}");
                    }
                    other => panic!("step {} on {dev}: {other:?}", info.step.number()),
                }
            }
        }
    });
}

#[test]
fn a_nan_reaches_exactly_the_outputs_whose_window_holds_it() {
    let (h, w, r) = (9, 10, 2);
    let k = 2 * r + 1;
    let mut x = rand_vec(h * w, -1.0, 1.0, 9);
    x[4 * w + 3] = f32::NAN;
    let (col, row) = (rand_vec(k, 0.5, 1.0, 3), rand_vec(k, 0.5, 1.0, 4));
    let f = outer(&col, &row);
    every_step(|info| {
        for dev in devices() {
            let xs = t(&x, &[h, w], dev);
            let outs = [
                xs.filter2d(&t(&f, &[k, k], dev)).unwrap(),
                xs.filter2d_separable(&t(&row, &[k], dev), &t(&col, &[k], dev))
                    .unwrap(),
            ];
            for y in outs {
                let y = y.to_vec().unwrap();
                for i in 0..h {
                    for j in 0..w {
                        let near = i.abs_diff(4) <= r && j.abs_diff(3) <= r;
                        assert_eq!(
                            y[i * w + j].is_nan(),
                            near,
                            "step {} on {dev}: output ({i}, {j})",
                            info.step.number()
                        );
                    }
                }
            }
        }
    });
}

#[test]
fn gradients_of_filter2d_and_its_separable_form() {
    for (h, w, r) in [(5, 6, 1), (3, 4, 2), (1, 1, 1)] {
        let k = 2 * r + 1;
        let x = hf(rand_vec(h * w, -1.0, 1.0, 21), &[h, w]);
        let f = hf(rand_vec(k * k, -1.0, 1.0, 22), &[k, k]);
        let row = hf(rand_vec(k, -1.0, 1.0, 23), &[k]);
        let col = hf(rand_vec(k, -1.0, 1.0, 24), &[k]);
        every_step(|info| {
            let what = format!("step {} [{h}, {w}] r {r}", info.step.number());
            if has_2d(info) {
                gradcheck_all(
                    &format!("filter2d {what}"),
                    |v| v[0].filter2d(&v[1]),
                    &[x.clone(), f.clone()],
                );
            }
            gradcheck_all(
                &format!("filter2d_separable {what}"),
                |v| v[0].filter2d_separable(&v[1], &v[2]),
                &[x.clone(), row.clone(), col.clone()],
            );
        });
    }
}

fn bad_shape(r: camel_core::Result<Tensor>, op: &str, what: &str) {
    match r {
        Err(Error::BadShape { op: o, .. }) | Err(Error::ShapeMismatch { op: o, .. }) => {
            assert_eq!(o, op, "{what}")
        }
        other => panic!("{what}: expected a shape error from {op}, got {other:?}"),
    }
}

#[test]
fn bad_input_is_a_typed_error_naming_the_op() {
    for dev in devices() {
        let f3 = t(&[0.1; 9], &[3, 3], dev);
        let v3 = t(&[0.1; 3], &[3], dev);
        let img = t(&[1.0; 20], &[4, 5], dev);
        bad_shape(
            t(&[1.0; 5], &[5], dev).filter2d(&f3),
            "filter2d",
            "1-D image",
        );
        bad_shape(
            t(&[1.0; 8], &[2, 2, 2], dev).filter2d(&f3),
            "filter2d",
            "3-D image",
        );
        bad_shape(
            t(&[], &[0, 5], dev).filter2d(&f3),
            "filter2d",
            "empty image",
        );
        bad_shape(
            img.filter2d(&t(&[0.1; 16], &[4, 4], dev)),
            "filter2d",
            "even filter",
        );
        bad_shape(
            img.filter2d(&t(&[0.1; 15], &[3, 5], dev)),
            "filter2d",
            "non-square",
        );
        bad_shape(img.filter2d(&v3), "filter2d", "1-D filter");
        let op = "filter2d_separable";
        bad_shape(
            t(&[], &[3, 0], dev).filter2d_separable(&v3, &v3),
            op,
            "empty",
        );
        bad_shape(
            img.filter2d_separable(&v3, &t(&[0.1; 5], &[5], dev)),
            op,
            "lengths",
        );
        bad_shape(
            img.filter2d_separable(&t(&[0.1; 4], &[4], dev), &t(&[0.1; 4], &[4], dev)),
            op,
            "even",
        );
        bad_shape(img.filter2d_separable(&f3, &v3), op, "2-D row");
        let i64img = Tensor::from_vec_i64(vec![1; 20], &[4, 5], dev).unwrap();
        assert!(matches!(
            i64img.filter2d(&f3),
            Err(Error::DTypeMismatch { .. })
        ));
        // radius 9: the CUDA kernels stop at 8, the CPU takes it
        let f19 = t(&[0.01; 361], &[19, 19], dev);
        let v19 = t(&[0.1; 19], &[19], dev);
        for got in [img.filter2d(&f19), img.filter2d_separable(&v19, &v19)] {
            match (dev, got) {
                (Device::Cpu, got) => {
                    // the CPU has no radius limit
                    assert_eq!(got.unwrap().shape(), &[4, 5]);
                }
                (_, Err(Error::InvalidArgument { msg, .. })) => assert!(msg.contains("radius 9")),
                (_, other) => panic!("radius 9 on {dev}: {other:?}"),
            }
        }
    }
    if let Some(gpu) = camel_core::testing::gpu() {
        let img = t(&[1.0; 20], &[4, 5], gpu);
        let f = t(&[0.1; 9], &[3, 3], Device::Cpu);
        assert!(matches!(
            img.filter2d(&f),
            Err(Error::DeviceMismatch { .. })
        ));
        let v = t(&[0.1; 3], &[3], Device::Cpu);
        assert!(matches!(
            img.filter2d_separable(&v, &v),
            Err(Error::DeviceMismatch { .. })
        ));
    }
}

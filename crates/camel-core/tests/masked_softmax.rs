//! The fused scaled, masked softmax of attention scores against an f64 reference (forward and
//! backward) at awkward sizes on every device and every step, its gradcheck, NaN rows and
//! errors.

mod common;
use camel_core::backend::ladder::Family;
use camel_core::testing::for_each_step;
use camel_core::{Error, Tensor};
use common::*;

/// Keys query row `r` of a `[.., tq, tk]` block sees.
fn visible(r: usize, tq: usize, tk: usize, causal: bool) -> usize {
    if causal {
        r % tq + 1 + (tk - tq)
    } else {
        tk
    }
}

/// f64 reference of the forward: softmax of `scale · x` over the visible keys, 0 elsewhere.
fn ref_forward(x: &[f32], tq: usize, tk: usize, scale: f32, causal: bool) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for (r, row) in x.chunks(tk).enumerate() {
        let n = visible(r, tq, tk, causal);
        let s: Vec<f64> = row[..n].iter().map(|&v| v as f64 * scale as f64).collect();
        let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = s.iter().map(|v| (v - mx).exp()).sum();
        out.extend(s.iter().map(|v| (v - mx).exp() / sum));
        out.extend(std::iter::repeat_n(0.0, tk - n));
    }
    out
}

/// f64 reference of the backward: `scale · y ⊙ (g − Σ g⊙y)` over the visible keys, 0 elsewhere.
fn ref_backward(y: &[f64], g: &[f32], tq: usize, tk: usize, scale: f32, causal: bool) -> Vec<f64> {
    let mut out = Vec::with_capacity(y.len());
    for (r, (yr, gr)) in y.chunks(tk).zip(g.chunks(tk)).enumerate() {
        let n = visible(r, tq, tk, causal);
        let dot: f64 = (0..n).map(|j| yr[j] * gr[j] as f64).sum();
        out.extend((0..n).map(|j| scale as f64 * yr[j] * (gr[j] as f64 - dot)));
        out.extend(std::iter::repeat_n(0.0, tk - n));
    }
    out
}

/// Forward and backward of `shape = [.., tq, tk]` against the references on every device and
/// step (the backward through `Σ g ⊙ y`, so `dx` is the backward of upstream `g`).
fn check_case(shape: &[usize], scale: f32, causal: bool, seed: u64) {
    let (tq, tk) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let n = numel(shape);
    let x = rand_vec(n, -4.0, 4.0, seed);
    let g = rand_vec(n, -1.0, 1.0, seed ^ 7);
    let y = ref_forward(&x, tq, tk, scale, causal);
    let dx = ref_backward(&y, &g, tq, tk, scale, causal);
    for_each_step(Family::MaskedSoftmax, |step| {
        let what = format!("{shape:?} scale {scale} causal {causal} step {}", step.name);
        check(&format!("forward {what}"), shape, &y, ELEM, |d| {
            t(&x, shape, d).scaled_masked_softmax(scale, causal)
        });
        check(&format!("backward {what}"), shape, &dx, ELEM, |d| {
            let xl = t(&x, shape, d).requires_grad_(true)?;
            xl.scaled_masked_softmax(scale, causal)?
                .mul(&t(&g, shape, d))?
                .sum()?
                .backward()?;
            Ok(xl.grad().expect("grad of x"))
        });
    });
}

#[test]
fn forward_and_backward_match_f64_at_awkward_sizes() {
    // Tk ∈ {1, 7, 127, 1031} (odd: scalar loads) and {64, 1032} (float4 loads), Tq ∈ {1, 7,
    // 127, 1031}, causal (Tk ≥ Tq) and not; a batch dim on the small ones.
    let mut seed = 1;
    for tq in [1usize, 7, 127, 1031] {
        for tk in [1usize, 7, 64, 127, 1031, 1032] {
            for causal in [false, true] {
                if causal && tk < tq {
                    continue;
                }
                let shape: Vec<usize> = if tq * tk < 10_000 {
                    vec![3, tq, tk]
                } else {
                    vec![tq, tk]
                };
                seed += 1;
                check_case(&shape, 0.37, causal, seed);
            }
        }
    }
}

#[test]
fn scale_and_long_rows() {
    // A negative and a large scale; rows longer than the register kernels hold (a block per row).
    check_case(&[2, 5, 9], -1.3, true, 11);
    check_case(&[2, 5, 9], 8.0, false, 12);
    check_case(&[2, 3, 16_391], 0.25, true, 13);
    check_case(&[1, 2, 16_388], 0.25, false, 14);
}

#[test]
fn gradcheck_masked_softmax() {
    for (shape, causal) in [
        (vec![2, 3, 5], true),
        (vec![2, 3, 5], false),
        (vec![1, 4, 4], true),
        (vec![3, 1, 7], true),
    ] {
        let x = [hf(rand_vec(numel(&shape), -2.0, 2.0, 3), &shape)];
        gradcheck_all(
            &format!("scaled_masked_softmax {shape:?} causal {causal}"),
            |a| a[0].scaled_masked_softmax(0.7, causal),
            &x,
        );
    }
}

#[test]
fn masked_entries_are_zero_and_rows_sum_to_one() {
    for dev in devices() {
        let x = Tensor::randn_seeded(&[2, 4, 6], 5, dev).unwrap();
        let y = x
            .scaled_masked_softmax(1.0, true)
            .unwrap()
            .to_vec()
            .unwrap();
        for (r, row) in y.chunks(6).enumerate() {
            let n = (r % 4) + 1 + 2;
            assert!(row[n..].iter().all(|&v| v == 0.0), "{dev} row {r}: {row:?}");
            let s: f32 = row.iter().sum();
            assert!((s - 1.0).abs() < 1e-5, "{dev} row {r} sums to {s}");
        }
        // a single new query (with a cache) sees every key
        let q1 = Tensor::randn_seeded(&[1, 1, 9], 6, dev).unwrap();
        let y1 = q1
            .scaled_masked_softmax(1.0, true)
            .unwrap()
            .to_vec()
            .unwrap();
        assert!(y1.iter().all(|&v| v > 0.0), "{dev}: {y1:?}");
    }
}

#[test]
fn nan_in_a_row_gives_nan_in_that_row_only() {
    let (tq, tk) = (3, 5);
    for_each_step(Family::MaskedSoftmax, |_| {
        for dev in devices() {
            let mut x = rand_vec(tq * tk, -1.0, 1.0, 9);
            x[tk] = f32::NAN; // row 1, key 0: visible
            x[3] = f32::NAN; // row 0, key 3: masked when causal (row 0 sees keys 0 … 2)
            let y = t(&x, &[tq, tk], dev)
                .scaled_masked_softmax(1.0, true)
                .unwrap()
                .to_vec()
                .unwrap();
            assert!(y[tk..2 * tk].iter().all(|v| v.is_nan()), "{dev}: {y:?}");
            assert!(
                y[..tk].iter().chain(&y[2 * tk..]).all(|v| v.is_finite()),
                "{dev}: a masked NaN must not leak: {y:?}"
            );
            let y = t(&x, &[tq, tk], dev)
                .scaled_masked_softmax(1.0, false)
                .unwrap()
                .to_vec()
                .unwrap();
            assert!(y[..2 * tk].iter().all(|v| v.is_nan()), "{dev}: {y:?}");
            assert!(y[2 * tk..].iter().all(|v| v.is_finite()), "{dev}: {y:?}");
        }
    });
}

#[test]
fn bad_input_is_an_error_naming_the_op() {
    for dev in devices() {
        let x = Tensor::zeros(&[2, 5, 3], dev).unwrap();
        // causal with Tk < Tq: a query would see no key
        let e = x.scaled_masked_softmax(1.0, true).unwrap_err();
        assert!(matches!(e, Error::BadShape { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("scaled_masked_softmax") && msg.contains("Tk ≥ Tq"),
            "{msg}"
        );
        // fine without the mask
        assert_eq!(
            x.scaled_masked_softmax(1.0, false).unwrap().shape(),
            &[2, 5, 3]
        );
        // rank 1
        let e = Tensor::zeros(&[4], dev)
            .unwrap()
            .scaled_masked_softmax(1.0, false)
            .unwrap_err();
        assert!(e.to_string().contains("rank ≥ 2"), "{e}");
        // a non-finite scale
        let e = x.scaled_masked_softmax(f32::NAN, false).unwrap_err();
        assert!(e.to_string().contains("scale"), "{e}");
        // i64 scores
        let i = Tensor::from_vec_i64(vec![0; 4], &[2, 2], dev).unwrap();
        assert!(matches!(
            i.scaled_masked_softmax(1.0, false),
            Err(Error::DTypeMismatch { .. })
        ));
        // empty tensors are fine
        let z = Tensor::zeros(&[0, 3, 4], dev).unwrap();
        assert_eq!(
            z.scaled_masked_softmax(1.0, true).unwrap().shape(),
            &[0, 3, 4]
        );
    }
}

#[test]
fn a_strided_view_reads_like_its_dense_copy() {
    for dev in devices() {
        let x = Tensor::randn_seeded(&[2, 9, 7], 4, dev).unwrap();
        let view = x.transpose(-2, -1).unwrap(); // [2, 7, 9], not contiguous
        assert!(!view.is_contiguous());
        let a = view
            .scaled_masked_softmax(0.5, true)
            .unwrap()
            .to_vec()
            .unwrap();
        let b = view
            .contiguous()
            .unwrap()
            .scaled_masked_softmax(0.5, true)
            .unwrap()
            .to_vec()
            .unwrap();
        assert_eq!(a, b, "{dev}");
    }
}

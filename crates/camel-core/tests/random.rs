//! The Philox generator and the random ops on every device: Random123's known answers, the
//! documented stream layout (value `i` of a draw is word `i % 4` of counter `offset + i / 4`),
//! bit-identical uniforms, Bernoulli samples and dropout masks on the CPU and the GPU, normals to
//! a few ulps, statistics at n = 10^6, multinomial frequencies against the weights, dropout's
//! backward (gradcheck with a fixed generator), eval-mode identity, determinism and errors.

mod common;
use camel_core::rng::{philox4x32_10, with_global, Philox};
use camel_core::testing::launch_count;
use camel_core::{Device, Error, Generator, Tensor};
use common::*;

/// Word `i` of the draw at `(seed, offset)`, from the known-answer-checked block function and
/// the layout the docs give, independently of `Philox`'s own helpers.
fn word(seed: u64, offset: u64, i: usize) -> u32 {
    let c = offset.wrapping_add(i as u64 / 4);
    philox4x32_10(
        [c as u32, (c >> 32) as u32, 0, 0],
        [seed as u32, (seed >> 32) as u32],
    )[i % 4]
}

/// Uniform `i` in `[0, 1)`: the top 24 bits times 2^-24.
fn uniform(seed: u64, offset: u64, i: usize) -> f32 {
    (word(seed, offset, i) >> 8) as f32 / 16_777_216.0
}

/// Normal `i` by Box–Muller in f64 from the same words.
fn normal_f64(seed: u64, i: usize) -> f64 {
    let pair = i & !1;
    let u1 = ((word(seed, 0, pair) >> 8) as f64 + 1.0) / 16_777_216.0;
    let u2 = (word(seed, 0, pair + 1) >> 8) as f64 / 16_777_216.0;
    let r = (-2.0 * u1.ln()).sqrt();
    let theta = 2.0 * std::f64::consts::PI * u2;
    if i.is_multiple_of(2) {
        r * theta.cos()
    } else {
        r * theta.sin()
    }
}

const SIZES: [usize; 6] = [1, 2, 7, 127, 1000, 1031];

#[test]
fn philox_known_answers() {
    // Random123's kat_vectors, the three philox4x32 10 lines: counter, key, expected output.
    let kat: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
        (
            [0; 4],
            [0; 2],
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
        ),
        (
            [u32::MAX; 4],
            [u32::MAX; 2],
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
        ),
        (
            [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
            [0xa4093822, 0x299f31d0],
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
        ),
    ];
    for (ctr, key, want) in kat {
        assert_eq!(
            philox4x32_10(ctr, key),
            want,
            "counter {ctr:x?} key {key:x?}"
        );
    }
    // Philox's own helpers follow the layout the test's `word` spells out
    let p = Philox {
        seed: 0x1234_5678_9abc_def0,
        offset: u64::MAX - 1, // the counter wraps at 2^64
    };
    for i in 0..16 {
        assert_eq!(p.word(i as u64), word(p.seed, p.offset, i), "word {i}");
    }
}

#[test]
fn generator_offsets_advance_by_counters_used() {
    let mut g = Generator::new(5);
    assert_eq!((g.initial_seed(), g.offset()), (5, 0));
    for (n, after) in [(1usize, 1u64), (4, 2), (5, 4), (0, 4), (8, 6)] {
        Tensor::rand_with(&[n], 0.0, 1.0, &mut g, Device::Cpu).unwrap();
        assert_eq!(g.offset(), after, "after a draw of {n}");
    }
    assert_eq!(Generator::from_state(5, 6), g);
    let a = g.next_u64();
    assert_eq!(g.offset(), 7);
    assert_eq!(
        a,
        u64::from(word(5, 6, 0)) | (u64::from(word(5, 6, 1)) << 32)
    );
}

#[test]
fn rand_is_the_documented_stream_bit_for_bit_on_every_device() {
    for dev in devices() {
        for n in SIZES {
            let seed = 0xdead_beef ^ n as u64;
            let want: Vec<f32> = (0..n).map(|i| uniform(seed, 0, i)).collect();
            let mut g = Generator::new(seed);
            let got = Tensor::rand_with(&[n], 0.0, 1.0, &mut g, dev).unwrap();
            assert_eq!(got.device(), dev);
            assert_eq!(got.to_vec().unwrap(), want, "rand [{n}] on {dev}");
            // a second draw starts at the next unused counter
            let next = Tensor::rand_with(&[3], 0.0, 1.0, &mut g, dev).unwrap();
            let off = n.div_ceil(4) as u64;
            let want: Vec<f32> = (0..3).map(|i| uniform(seed, off, i)).collect();
            assert_eq!(
                next.to_vec().unwrap(),
                want,
                "second draw after [{n}] on {dev}"
            );
        }
        // a range: lo + (hi − lo)·u rounded once, below hi
        let (lo, hi) = (-3.7f32, 2.1f32);
        let got = Tensor::rand_seeded(&[33, 37], lo, hi, 9, dev)
            .unwrap()
            .to_vec()
            .unwrap();
        for (i, &v) in got.iter().enumerate() {
            let w = lo + (hi - lo) * uniform(9, 0, i);
            assert_eq!(
                v,
                if w < hi { w } else { hi.next_down() },
                "element {i} on {dev}"
            );
            assert!((lo..hi).contains(&v));
        }
    }
}

#[test]
fn rand_keeps_below_hi_where_rounding_reaches_it() {
    // a width of 1e-3 at 1e4: lo + w·u rounds to hi for u near 1
    let (lo, hi) = (1.0e4f32, 1.0e4 + 1.0e-3);
    for dev in devices() {
        let v = Tensor::rand_seeded(&[100_000], lo, hi, 3, dev)
            .unwrap()
            .to_vec()
            .unwrap();
        assert!(v.iter().all(|x| (lo..hi).contains(x)), "on {dev}");
    }
}

#[test]
fn randn_matches_box_muller_and_the_cpu_to_a_few_ulps() {
    let mut cpu: Option<Vec<f32>> = None;
    for dev in devices() {
        for n in SIZES {
            let got = Tensor::randn_seeded(&[n], 17, dev)
                .unwrap()
                .to_vec()
                .unwrap();
            let want: Vec<f64> = (0..n).map(|i| normal_f64(17, i)).collect();
            // f32 logarithm, square root and sine/cosine against f64
            let tol = Tol {
                atol: 2e-6,
                rtol: 2e-6,
            };
            assert_close(&format!("randn [{n}] on {dev} vs f64"), &got, &want, tol);
        }
        let big = Tensor::randn_seeded(&[7, 1031], 23, dev)
            .unwrap()
            .to_vec()
            .unwrap();
        match &cpu {
            None => cpu = Some(big),
            Some(c) => {
                // not bitwise: CUDA's logf/sincosf and Rust's ln/sin/cos differ by an ulp or two
                let tol = Tol {
                    atol: 1e-6,
                    rtol: 1e-6,
                };
                assert_close(&format!("randn on {dev} vs cpu"), &big, &f64s(c), tol);
            }
        }
    }
}

fn mean_var(v: &[f32]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = v.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / n;
    (m, var)
}

#[test]
fn statistics_at_a_million() {
    let n = 1_000_000;
    for dev in devices() {
        let u = Tensor::rand_seeded(&[n], 0.0, 1.0, 1, dev)
            .unwrap()
            .to_vec()
            .unwrap();
        let (m, v) = mean_var(&u);
        // σ(mean) = √(1/12/n) ≈ 2.9e-4; σ(var) ≈ √(1/180/n) ≈ 7.5e-5: 6σ bounds
        assert!((m - 0.5).abs() < 1.8e-3, "rand mean {m} on {dev}");
        assert!((v - 1.0 / 12.0).abs() < 4.5e-4, "rand var {v} on {dev}");
        assert!(u.iter().all(|x| (0.0..1.0).contains(x)));

        let z = Tensor::randn_seeded(&[n], 2, dev)
            .unwrap()
            .to_vec()
            .unwrap();
        let (m, v) = mean_var(&z);
        // σ(mean) = 1e-3, σ(var) = √(2/n) ≈ 1.4e-3: 6σ bounds
        assert!(m.abs() < 6e-3, "randn mean {m} on {dev}");
        assert!((v - 1.0).abs() < 8.5e-3, "randn var {v} on {dev}");
        let tail = z.iter().filter(|x| x.abs() > 1.959_964).count() as f64 / n as f64;
        assert!(
            (tail - 0.05).abs() < 1.5e-3,
            "randn two-sided 5% tail {tail} on {dev}"
        );
    }
}

#[test]
fn bernoulli_is_the_stream_compared_with_p_bit_for_bit() {
    for dev in devices() {
        for n in SIZES {
            let seed = 31 + n as u64;
            let mut p = rand_vec(n, 0.0, 1.0, seed);
            // the ends, and values that are no probability (NaN in their place)
            for (i, v) in [0.0, 1.0, f32::NAN, -0.5, 1.5].into_iter().enumerate() {
                if i < n && n > 5 {
                    p[i] = v;
                }
            }
            let want: Vec<f32> = (0..n)
                .map(|i| {
                    if (0.0..=1.0).contains(&p[i]) {
                        f32::from(u8::from(uniform(seed, 0, i) < p[i]))
                    } else {
                        f32::NAN
                    }
                })
                .collect();
            let mut g = Generator::new(seed);
            let got = t(&p, &[n], dev)
                .bernoulli_with(&mut g)
                .unwrap()
                .to_vec()
                .unwrap();
            assert_eq!(g.offset(), n.div_ceil(4) as u64);
            let same = got
                .iter()
                .zip(&want)
                .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()));
            assert!(same, "bernoulli [{n}] on {dev}: {got:?} vs {want:?}");
            if n > 5 {
                assert_eq!(&got[..2], &[0.0, 1.0], "p = 0 and p = 1 on {dev}");
            }

            let mut g = Generator::new(seed);
            let got = Tensor::bernoulli_full_with(&[n], 0.3, &mut g, dev)
                .unwrap()
                .to_vec()
                .unwrap();
            let want: Vec<f32> = (0..n)
                .map(|i| f32::from(u8::from(uniform(seed, 0, i) < 0.3)))
                .collect();
            assert_eq!(got, want, "bernoulli_full [{n}] on {dev}");
        }
        let n = 1_000_000;
        let b = Tensor::bernoulli_full_with(&[n], 0.3, &mut Generator::new(4), dev)
            .unwrap()
            .to_vec()
            .unwrap();
        let m = b.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        // σ = √(0.21/n) ≈ 4.6e-4
        assert!((m - 0.3).abs() < 2.8e-3, "bernoulli mean {m} on {dev}");
    }
}

/// Dropout's expected output: `x · (u ≥ p ? 1/(1−p) : 0)`.
fn dropout_ref(x: &[f32], p: f32, seed: u64, offset: u64) -> Vec<f32> {
    let scale = if p < 1.0 { 1.0 / (1.0 - p) } else { 0.0 };
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            v * if uniform(seed, offset, i) >= p {
                scale
            } else {
                0.0
            }
        })
        .collect()
}

fn bitwise_eq(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn dropout_mask_is_the_same_on_every_device_and_regenerated_in_backward() {
    for dev in devices() {
        for n in SIZES {
            for p in [0.1f32, 0.5, 0.9] {
                let seed = 77 ^ n as u64;
                let x = rand_vec(n, -2.0, 2.0, seed);
                let mut g = Generator::from_state(seed, 5);
                let xt = t(&x, &[n], dev).requires_grad_(true).unwrap();
                let y = xt.dropout_with(p, &mut g).unwrap();
                assert_eq!(g.offset(), 5 + n.div_ceil(4) as u64);
                let yv = y.to_vec().unwrap();
                let want = dropout_ref(&x, p, seed, 5);
                assert!(bitwise_eq(&yv, &want), "dropout [{n}] p={p} on {dev}");
                // the backward regenerates the mask: d(Σ w·y)/dx = w · mask · scale
                let w = rand_vec(n, -1.0, 1.0, seed ^ 1);
                y.mul(&t(&w, &[n], dev))
                    .unwrap()
                    .sum()
                    .unwrap()
                    .backward()
                    .unwrap();
                let gx = xt.grad().unwrap().to_vec().unwrap();
                assert!(
                    bitwise_eq(&gx, &dropout_ref(&w, p, seed, 5)),
                    "dropout backward [{n}] p={p} on {dev}"
                );
            }
        }
        // a strided view is masked in its logical (row-major) order
        let x = rand_vec(7 * 33, -1.0, 1.0, 8);
        let xt = t(&x, &[7, 33], dev).transpose(0, 1).unwrap();
        let a = xt.dropout_with(0.3, &mut Generator::new(2)).unwrap();
        let b = xt
            .contiguous()
            .unwrap()
            .dropout_with(0.3, &mut Generator::new(2))
            .unwrap();
        assert_eq!(a.to_vec().unwrap(), b.to_vec().unwrap(), "view on {dev}");
    }
}

#[test]
fn dropout_statistics() {
    let n = 1_000_000;
    for dev in devices() {
        for p in [0.1f32, 0.2, 0.5] {
            let y = Tensor::ones(&[n], dev)
                .unwrap()
                .dropout_with(p, &mut Generator::new(6))
                .unwrap()
                .to_vec()
                .unwrap();
            let scale = 1.0 / (1.0 - p);
            assert!(
                y.iter().all(|&v| v == 0.0 || v == scale),
                "kept values are scaled by 1/(1−p) on {dev}"
            );
            let kept = y.iter().filter(|&&v| v != 0.0).count() as f64 / n as f64;
            let sigma = ((p * (1.0 - p)) as f64 / n as f64).sqrt();
            assert!(
                (kept - (1.0 - p as f64)).abs() < 6.0 * sigma,
                "mean of the mask {kept}, want {} on {dev}",
                1.0 - p
            );
            // the mean of the output stays ≈ 1: dropout keeps the expectation
            let m = y.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
            assert!(
                (m - 1.0).abs() < 6.0 * sigma * scale as f64,
                "mean {m} on {dev}"
            );
        }
    }
}

#[test]
fn dropout_edge_cases() {
    for dev in devices() {
        let x = t(&[1.0, f32::NAN, -3.0, f32::INFINITY, 2.0], &[5], dev);
        // p = 1 drops everything: x · 0, so NaN stays NaN (and inf · 0 is NaN), as PyTorch's
        let y = x
            .dropout_with(1.0, &mut Generator::new(1))
            .unwrap()
            .to_vec()
            .unwrap();
        assert_eq!((y[0], y[2], y[4]), (0.0, 0.0, 0.0), "p = 1 on {dev}");
        assert!(y[1].is_nan() && y[3].is_nan(), "p = 1 on {dev}: {y:?}");
        // p = 0 and eval mode: the identity, no kernel, no draw
        let mut g = Generator::new(1);
        let x2 = Tensor::ones(&[1000], dev).unwrap();
        let before = launch_count(dev);
        let same = x.dropout_with(0.0, &mut g).unwrap();
        assert_eq!(g.offset(), 0);
        let e = x2.dropout(0.5, false).unwrap();
        assert_eq!(
            launch_count(dev),
            before,
            "identity launches nothing on {dev}"
        );
        assert!(same.shares_storage(&x) && e.shares_storage(&x2));
        // a NaN kept is NaN
        let y = Tensor::full(&[64], f32::NAN, dev)
            .unwrap()
            .dropout_with(0.5, &mut Generator::new(3))
            .unwrap()
            .to_vec()
            .unwrap();
        assert!(y.iter().all(|v| v.is_nan()), "NaN input on {dev}");
        // empty
        let z = Tensor::zeros(&[0, 3], dev).unwrap();
        assert_eq!(z.dropout_with(0.5, &mut g).unwrap().shape(), &[0, 3]);
    }
}

#[test]
fn dropout_gradcheck_with_a_fixed_generator() {
    for p in [0.2f32, 0.5] {
        gradcheck_all(
            &format!("dropout p={p}"),
            // a fresh generator each call: every evaluation draws the same mask
            move |x| x[0].dropout_with(p, &mut Generator::new(42)),
            &[hf(rand_vec(37, -1.0, 1.0, 5), &[37])],
        );
        gradcheck_all(
            &format!("dropout p={p} in a composite"),
            move |x| {
                x[0].tanh()?
                    .dropout_with(p, &mut Generator::new(7))?
                    .mul(&x[1])
            },
            &[
                hf(rand_vec(21, -1.0, 1.0, 6), &[3, 7]),
                hf(rand_vec(21, -1.0, 1.0, 7), &[3, 7]),
            ],
        );
    }
}

/// The global generator in one test, so that parallel tests do not interleave their draws.
#[test]
fn global_generator_feeds_dropout_and_eval_draws_nothing() {
    for dev in devices() {
        camel_core::manual_seed(12);
        let x = Tensor::ones(&[1031], dev).unwrap();
        let a = x.dropout(0.4, true).unwrap().to_vec().unwrap();
        assert_eq!(with_global(|g| g.offset()), 258);
        x.dropout(0.4, false).unwrap();
        x.dropout(0.0, true).unwrap();
        assert!(x.dropout(1.5, true).is_err());
        assert_eq!(
            with_global(|g| g.offset()),
            258,
            "eval, p = 0 and errors draw nothing"
        );
        camel_core::manual_seed(12);
        let b = x.dropout(0.4, true).unwrap().to_vec().unwrap();
        assert_eq!(a, b, "manual_seed repeats the mask on {dev}");
        assert_eq!(a, dropout_ref(&vec![1.0; 1031], 0.4, 12, 0));
    }
}

/// Pearson's χ² of observed counts against expected probabilities.
fn chi_square(counts: &[usize], probs: &[f64], n: usize) -> f64 {
    counts
        .iter()
        .zip(probs)
        .filter(|(_, &p)| p > 0.0)
        .map(|(&c, &p)| {
            let e = p * n as f64;
            (c as f64 - e).powi(2) / e
        })
        .sum()
}

#[test]
fn multinomial_frequencies_follow_the_weights() {
    let weights = [0.5f32, 0.0, 2.0, 1.0, 0.25, 3.0, 1.25];
    let total: f64 = weights.iter().map(|&w| w as f64).sum();
    let probs: Vec<f64> = weights.iter().map(|&w| w as f64 / total).collect();
    let rows = 3;
    let w: Vec<f32> = weights.iter().cycle().take(rows * 7).cloned().collect();
    let mut cpu: Option<Vec<i64>> = None;
    for dev in devices() {
        let n = 20_000;
        let s = t(&w, &[rows, 7], dev)
            .multinomial_with(n, true, &mut Generator::new(8))
            .unwrap();
        assert_eq!(
            (s.shape(), s.dtype()),
            (&[rows, n][..], camel_core::DType::I64)
        );
        let s = s.to_vec_i64().unwrap();
        for r in 0..rows {
            let mut counts = [0usize; 7];
            for &c in &s[r * n..(r + 1) * n] {
                counts[c as usize] += 1;
            }
            assert_eq!(counts[1], 0, "a zero weight is never drawn on {dev}");
            // 5 degrees of freedom: P(χ² > 30) ≈ 1.5e-5
            let chi = chi_square(&counts, &probs, n);
            assert!(chi < 30.0, "row {r} on {dev}: χ² {chi}, counts {counts:?}");
        }
        // the same samples on every device: the same sums in the same order
        match &cpu {
            None => cpu = Some(s),
            Some(c) => assert_eq!(&s, c, "multinomial on {dev} vs cpu"),
        }
    }
}

#[test]
fn multinomial_without_replacement() {
    let weights = [0.5f32, 0.0, 2.0, 1.0, 0.25, 3.0, 1.25];
    let total: f64 = weights.iter().map(|&w| w as f64).sum();
    let probs: Vec<f64> = weights.iter().map(|&w| w as f64 / total).collect();
    let rows = 5000;
    let w: Vec<f32> = weights.iter().cycle().take(rows * 7).cloned().collect();
    let mut cpu: Option<Vec<i64>> = None;
    for dev in devices() {
        let s = t(&w, &[rows, 7], dev)
            .multinomial_with(6, false, &mut Generator::new(9))
            .unwrap()
            .to_vec_i64()
            .unwrap();
        let mut first = [0usize; 7];
        for row in s.chunks(6) {
            let mut seen = row.to_vec();
            seen.sort();
            // six positive weights, six samples: each positive category exactly once
            assert_eq!(seen, [0, 2, 3, 4, 5, 6], "a row on {dev}: {row:?}");
            first[row[0] as usize] += 1;
        }
        // the first sample of each row follows the weights
        let chi = chi_square(&first, &probs, rows);
        assert!(
            chi < 30.0,
            "first samples on {dev}: χ² {chi}, counts {first:?}"
        );
        match &cpu {
            None => cpu = Some(s),
            Some(c) => assert_eq!(&s, c, "multinomial without replacement on {dev} vs cpu"),
        }
        // a 1-D weight vector, one sample
        let one = t(&[0.0, 0.0, 1.0], &[3], dev)
            .multinomial(1, false)
            .unwrap();
        assert_eq!(one.shape(), &[1]);
        assert_eq!(one.to_vec_i64().unwrap(), [2]);
    }
}

fn invalid<T: std::fmt::Debug>(r: camel_core::Result<T>, op: &str) {
    match r {
        Err(e @ (Error::InvalidArgument { .. } | Error::BadShape { .. })) => {
            assert!(e.to_string().starts_with(op), "{e}")
        }
        Err(e) => panic!("{op}: unexpected error kind {e}"),
        Ok(v) => panic!("{op}: accepted: {v:?}"),
    }
}

#[test]
fn errors_name_the_op_and_draw_nothing() {
    for dev in devices() {
        let mut g = Generator::new(1);
        let x = Tensor::ones(&[4], dev).unwrap();
        for p in [-0.1f32, 1.01, f32::NAN, f32::INFINITY] {
            invalid(
                x.dropout_with(p, &mut g).map(|t| t.shape().to_vec()),
                "dropout",
            );
            invalid(x.dropout(p, false).map(|t| t.shape().to_vec()), "dropout");
            invalid(
                Tensor::bernoulli_full_with(&[3], p, &mut g, dev).map(|t| t.shape().to_vec()),
                "bernoulli",
            );
        }
        let ids = Tensor::from_vec_i64(vec![1, 2], &[2], dev).unwrap();
        assert!(matches!(
            ids.dropout_with(0.5, &mut g),
            Err(Error::DTypeMismatch { op: "dropout", .. })
        ));
        assert!(matches!(
            ids.bernoulli_with(&mut g),
            Err(Error::DTypeMismatch {
                op: "bernoulli",
                ..
            })
        ));
        let w = Tensor::ones(&[2, 3], dev).unwrap();
        let m = |w: &Tensor, s, r, g: &mut Generator| {
            w.multinomial_with(s, r, g).and_then(|t| t.to_vec_i64())
        };
        invalid(m(&w, 4, false, &mut g), "multinomial");
        invalid(m(&w, 0, true, &mut g), "multinomial");
        invalid(
            m(&Tensor::ones(&[2, 2, 2], dev).unwrap(), 1, true, &mut g),
            "multinomial",
        );
        invalid(
            m(&Tensor::ones(&[2, 0], dev).unwrap(), 1, true, &mut g),
            "multinomial",
        );
        invalid(
            Tensor::rand_with(&[usize::MAX, 2], 0.0, 1.0, &mut g, dev).map(|t| t.numel()),
            "rand",
        );
        assert_eq!(g.offset(), 0, "rejected calls draw nothing on {dev}");
        // weights that cannot be sampled: at once on the CPU, at the next host read on a GPU
        for bad in [
            vec![1.0, -1.0, 1.0],
            vec![1.0, f32::NAN, 1.0],
            vec![1.0, f32::INFINITY, 1.0],
            vec![0.0, 0.0, 0.0],
        ] {
            let w = t(&[vec![1.0; 3], bad.clone()].concat(), &[2, 3], dev);
            for r in [true, false] {
                let e = m(&w, 1, r, &mut g).unwrap_err();
                assert!(
                    matches!(
                        e,
                        Error::InvalidArgument {
                            op: "multinomial",
                            ..
                        }
                    ) && e.to_string().contains("row 1"),
                    "{bad:?} on {dev}: {e}"
                );
            }
        }
        // without replacement, fewer positive weights than samples
        let w = t(&[1.0, 0.0, 2.0], &[3], dev);
        let e = m(&w, 3, false, &mut g).unwrap_err();
        assert!(e.to_string().contains("positive weights"), "{e}");
        // and a later read on the same device is clean again
        assert_eq!(
            Tensor::ones(&[2], dev).unwrap().to_vec().unwrap(),
            [1.0, 1.0]
        );
    }
}

#[test]
fn a_seed_repeats_and_seeds_differ() {
    for dev in devices() {
        let draw = |seed| {
            let mut g = Generator::new(seed);
            let x = Tensor::ones(&[127], dev).unwrap();
            let d = x.dropout_with(0.5, &mut g).unwrap().to_vec().unwrap();
            let r = Tensor::randn_with(&[33], &mut g, dev)
                .unwrap()
                .to_vec()
                .unwrap();
            let m = Tensor::ones(&[10], dev)
                .unwrap()
                .multinomial_with(5, true, &mut g)
                .unwrap()
                .to_vec_i64()
                .unwrap();
            (d, r, m)
        };
        assert_eq!(draw(1), draw(1), "on {dev}");
        assert_ne!(draw(1).0, draw(2).0, "on {dev}");
    }
}

#[test]
fn draws_on_a_gpu_run_as_kernels_there() {
    // a host draw and an upload would launch no kernel: each op must launch at least one
    for dev in devices().into_iter().filter(|d| d.is_cuda()) {
        let mut g = Generator::new(1);
        let x = Tensor::ones(&[1031], dev).unwrap();
        let half = x.mul_scalar(0.5).unwrap();
        let w = Tensor::ones(&[3, 7], dev).unwrap();
        type Draw<'a> = &'a dyn Fn(&mut Generator) -> Tensor;
        let ops: [(&str, Draw); 6] = [
            ("rand", &|g| {
                Tensor::rand_with(&[1031], 0.0, 1.0, g, dev).unwrap()
            }),
            ("randn", &|g| Tensor::randn_with(&[1031], g, dev).unwrap()),
            ("bernoulli_full", &|g| {
                Tensor::bernoulli_full_with(&[1031], 0.5, g, dev).unwrap()
            }),
            ("bernoulli", &|g| half.bernoulli_with(g).unwrap()),
            ("dropout", &|g| x.dropout_with(0.5, g).unwrap()),
            ("multinomial", &|g| w.multinomial_with(4, true, g).unwrap()),
        ];
        for (name, op) in ops {
            let before = launch_count(dev);
            let out = op(&mut g);
            assert_eq!(out.device(), dev, "{name}");
            assert!(
                launch_count(dev) > before,
                "{name} launched no kernel on {dev}"
            );
        }
    }
}

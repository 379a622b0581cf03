//! Fused attention against the naive attention computed in f64 (forward and backward) at awkward
//! sizes, on every device and every step of the ladder; strided and unaligned views; a key/value
//! cache; gradcheck; dropout against the f64 attention with the kernels' mask; NaN rows; errors
//! naming the shapes. Tolerances: the forward's f32 sums of
//! `Tk` products stay within `2e-5 + 1e-4·|ref|`; a gradient sums up to `Tq` (or `Tk`) such
//! terms, so its bound grows with the length: `(5e-5 + 2e-8·T) + 1e-3·|ref|`. The f16/bf16
//! tolerances are derived from their rounding unit at [`check_half`].

mod common;
use camel_core::backend::ladder::{with_step, Family, Step};
use camel_core::config::{self, Experiments};
use camel_core::testing::{for_each_step, gpu};
use camel_core::{DType, Device, Error, Generator, Result, Tensor};
use camel_cuda::kernels::attention::AttnGeom;
use common::*;

/// One attention problem: q `[b, h, tq, d]`, k and v `[b, h, tk, d]` (dense, logical order).
#[derive(Clone, Copy, Debug)]
struct Case {
    b: usize,
    h: usize,
    tq: usize,
    tk: usize,
    d: usize,
    causal: bool,
    /// The scale is `scale_mul / √d`.
    scale_mul: f32,
}

impl Case {
    fn visible(&self, i: usize) -> usize {
        if self.causal {
            (i + 1 + self.tk - self.tq).min(self.tk)
        } else {
            self.tk
        }
    }
    fn q_shape(&self) -> Vec<usize> {
        vec![self.b, self.h, self.tq, self.d]
    }
    fn k_shape(&self) -> Vec<usize> {
        vec![self.b, self.h, self.tk, self.d]
    }
    fn scale(&self) -> f32 {
        self.scale_mul / (self.d as f32).sqrt()
    }
}

/// The naive attention in f64: the output and the gradients of `Σ out ⊙ g`.
struct Reference {
    out: Vec<f64>,
    dq: Vec<f64>,
    dk: Vec<f64>,
    dv: Vec<f64>,
}

fn reference(c: &Case, q: &[f32], k: &[f32], v: &[f32], g: &[f32]) -> Reference {
    reference_dropout(c, q, k, v, g, &|_, _, _| 1.0)
}

/// [`reference`] with each weight `P_ij` of head `bh` multiplied by `z(bh, i, j)` after the
/// softmax: `O = (P ⊙ Z)·V`, `dV = (P ⊙ Z)ᵀ·G`, `dS = P ⊙ (Z ⊙ dP − Σ_j P Z dP)`.
fn reference_dropout(
    c: &Case,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    g: &[f32],
    z: &dyn Fn(usize, usize, usize) -> f64,
) -> Reference {
    let (d, sc) = (c.d, c.scale() as f64);
    let mut r = Reference {
        out: vec![0.0; q.len()],
        dq: vec![0.0; q.len()],
        dk: vec![0.0; k.len()],
        dv: vec![0.0; k.len()],
    };
    let dot =
        |x: &[f32], y: &[f32]| -> f64 { x.iter().zip(y).map(|(&a, &b)| a as f64 * b as f64).sum() };
    for bh in 0..c.b * c.h {
        let (qb, kb) = (bh * c.tq * d, bh * c.tk * d);
        for i in 0..c.tq {
            let n = c.visible(i);
            let qi = &q[qb + i * d..][..d];
            let gi = &g[qb + i * d..][..d];
            let s: Vec<f64> = (0..n)
                .map(|j| sc * dot(qi, &k[kb + j * d..][..d]))
                .collect();
            let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let l: f64 = s.iter().map(|x| (x - m).exp()).sum();
            let p: Vec<f64> = s.iter().map(|x| (x - m).exp() / l).collect();
            let zs: Vec<f64> = (0..n).map(|j| z(bh, i, j)).collect();
            let dp: Vec<f64> = (0..n).map(|j| dot(gi, &v[kb + j * d..][..d])).collect();
            let pdp: f64 = (0..n).map(|j| p[j] * zs[j] * dp[j]).sum();
            for j in 0..n {
                let pz = p[j] * zs[j];
                let ds = p[j] * (zs[j] * dp[j] - pdp);
                for e in 0..d {
                    r.out[qb + i * d + e] += pz * v[kb + j * d + e] as f64;
                    r.dq[qb + i * d + e] += sc * ds * k[kb + j * d + e] as f64;
                    r.dk[kb + j * d + e] += sc * ds * qi[e] as f64;
                    r.dv[kb + j * d + e] += pz * gi[e] as f64;
                }
            }
        }
    }
    r
}

const FWD: Tol = Tol {
    atol: 2e-5,
    rtol: 1e-4,
};

fn bwd_tol(c: &Case) -> Tol {
    Tol {
        atol: 5e-5 + 2e-8 * c.tq.max(c.tk) as f64,
        rtol: 1e-3,
    }
}

/// Checks `out` against the reference's output, then back-propagates `Σ out ⊙ g` into the
/// inputs, whose gradients the caller compares with the reference's.
fn forward_then_backprop(
    what: &str,
    out: &Tensor,
    r: &Reference,
    c: &Case,
    g: &[f32],
    dev: Device,
) {
    assert_close(
        &format!("forward {what}"),
        &out.to_vec().unwrap(),
        &r.out,
        FWD,
    );
    out.mul(&t(g, &c.q_shape(), dev))
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
}

/// Forward and the three gradients of `c` on `devs`, every step, against the f64 reference.
fn check_case(c: Case, seed: u64, devs: &[Device]) {
    check_case_dropout(c, 0.0, seed, devs)
}

/// The dropout mask the fused attention of `c` draws with probability `p` from a generator
/// seeded with `seed`, as the multiplier of each weight `(bh, i, j)`.
fn mask(c: &Case, p: f32, seed: u64) -> impl Fn(usize, usize, usize) -> f64 {
    let g = AttnGeom {
        b: c.b,
        h: c.h,
        tq: c.tq,
        tk: c.tk,
        d: c.d,
        q: [0; 3],
        k: [0; 3],
        v: [0; 3],
        scale: c.scale(),
        causal: c.causal,
        dropout: p,
        seed: Generator::new(seed).next_u64(),
    };
    move |bh, i, j| g.dropout_multiplier(bh, i, j) as f64
}

/// `q.attention(k, v)`, or with dropout `p` drawn from a generator seeded with `seed`.
fn attend(q: &Tensor, k: &Tensor, v: &Tensor, c: &Case, p: f32, seed: u64) -> Result<Tensor> {
    if p == 0.0 {
        q.attention(k, v, c.scale(), c.causal)
    } else {
        q.attention_dropout_with(k, v, c.scale(), c.causal, p, &mut Generator::new(seed))
    }
}

/// [`check_case`] with dropout `p` on the attention weights: against the f64 attention with the
/// kernels' mask.
fn check_case_dropout(c: Case, p: f32, seed: u64, devs: &[Device]) {
    let q = rand_vec(numel(&c.q_shape()), -1.0, 1.0, seed);
    let k = rand_vec(numel(&c.k_shape()), -1.0, 1.0, seed + 1);
    let v = rand_vec(numel(&c.k_shape()), -1.0, 1.0, seed + 2);
    let g = rand_vec(numel(&c.q_shape()), -1.0, 1.0, seed + 3);
    let r = reference_dropout(&c, &q, &k, &v, &g, &mask(&c, p, seed));
    for_each_step(Family::Attention, |step| {
        for &dev in devs {
            let what = format!("{c:?} dropout {p} step {} on {dev}", step.name);
            let (ql, kl, vl) = (
                t(&q, &c.q_shape(), dev).requires_grad_(true).unwrap(),
                t(&k, &c.k_shape(), dev).requires_grad_(true).unwrap(),
                t(&v, &c.k_shape(), dev).requires_grad_(true).unwrap(),
            );
            let out = attend(&ql, &kl, &vl, &c, p, seed).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(out.shape(), c.q_shape(), "{what}");
            forward_then_backprop(&what, &out, &r, &c, &g, dev);
            for (name, x, want) in [("dq", &ql, &r.dq), ("dk", &kl, &r.dk), ("dv", &vl, &r.dv)] {
                let got = x.grad().expect("grad").to_vec().unwrap();
                assert_close(&format!("{name} {what}"), &got, want, bwd_tol(&c));
            }
        }
    });
}

/// The awkward-size cases: `Tq × Tk` of `sizes`, head dims 32, 64 and 128, causal (where every
/// query sees a key) and not; two batches of three heads on the short ones, one of two on the
/// longer.
fn awkward_cases(sizes: &[(usize, usize)]) -> Vec<Case> {
    let mut cases = Vec::new();
    for &(tq, tk) in sizes {
        for d in [32, 64, 128] {
            for causal in [false, true] {
                if causal && tk < tq {
                    continue;
                }
                let (b, h) = if tq * tk < 1000 { (2, 3) } else { (1, 2) };
                cases.push(Case {
                    b,
                    h,
                    tq,
                    tk,
                    d,
                    causal,
                    scale_mul: 1.0,
                });
            }
        }
    }
    cases
}

#[test]
fn forward_and_backward_match_f64_at_awkward_sizes() {
    let sizes = [
        (1, 1),
        (7, 7),
        (1, 9),
        (5, 12),
        (33, 33),
        (127, 127),
        (40, 97),
        (129, 200),
    ];
    for (i, c) in awkward_cases(&sizes).into_iter().enumerate() {
        check_case(c, 14 + 4 * i as u64, &devices());
    }
}

#[test]
fn long_sequences_on_the_gpu() {
    let Some(dev) = gpu() else { return };
    for (t, d, causal, b, h) in [
        (1000, 64, true, 2, 2),
        (1000, 128, false, 1, 2),
        (1031, 32, true, 1, 3),
        (4097, 64, true, 1, 1),
        (4097, 128, false, 1, 1),
    ] {
        let c = Case {
            b,
            h,
            tq: t,
            tk: t,
            d,
            causal,
            scale_mul: 1.0,
        };
        check_case(c, t as u64 + d as u64, &[dev]);
    }
}

/// The rounding unit of a 16-bit dtype: 2⁻¹¹ for f16, 2⁻⁸ for bf16.
fn unit(dt: DType) -> f64 {
    match dt {
        DType::F16 => 2f64.powi(-11),
        _ => 2f64.powi(-8),
    }
}

/// `n` values uniform in [−1, 1] from `seed`, rounded to `dt` (and back to f32).
fn rounded(n: usize, seed: u64, dt: DType) -> Vec<f32> {
    let x = rand_vec(n, -1.0, 1.0, seed);
    t(&x, &[n], Device::Cpu)
        .to_dtype(dt)
        .unwrap()
        .to_vec()
        .unwrap()
}

/// Forward and gradients of `c` in `dt` (steps 3 and 4 on the GPU, the f32 reference on the CPU)
/// against the f64 attention of the inputs as rounded to `dt`. Tolerances, with u the rounding
/// unit: the output rounds P (relative u) before P·V and is stored in `dt`, so with |v| ≤ 1 it
/// is held to `3u + 2u·|ref|`; a gradient sums P or dS terms rounded to `dt` (and Δ comes from
/// the rounded output), so it is held to `8u·max(max|ref|, 1e-3) + 4u·|ref|`, max over its
/// tensor (the floor: a gradient that is zero in f64, dq with a single key, comes out as
/// rounding noise of Δ).
fn check_half(c: Case, dt: DType, seed: u64, devs: &[Device]) {
    check_half_dropout(c, dt, 0.0, seed, devs)
}

/// [`check_half`] with dropout `p` on the attention weights.
fn check_half_dropout(c: Case, dt: DType, p: f32, seed: u64, devs: &[Device]) {
    let u = unit(dt);
    let round = |n: usize, seed: u64| rounded(n, seed, dt);
    let (nq, nk) = (numel(&c.q_shape()), numel(&c.k_shape()));
    let (q, k, v, g) = (
        round(nq, seed),
        round(nk, seed + 1),
        round(nk, seed + 2),
        round(nq, seed + 3),
    );
    let r = reference_dropout(&c, &q, &k, &v, &g, &mask(&c, p, seed));
    // the tensor-core steps (steps 1–2 are f32 only)
    for_each_step(Family::Attention, |step| {
        if step.step.number() < 3 {
            return;
        }
        for &dev in devs {
            let what = format!("{c:?} {dt:?} dropout {p} step {} on {dev}", step.name);
            let leaf = |x: &[f32], s: &[usize]| {
                t(x, s, dev)
                    .to_dtype(dt)
                    .unwrap()
                    .requires_grad_(true)
                    .unwrap()
            };
            let (ql, kl, vl) = (
                leaf(&q, &c.q_shape()),
                leaf(&k, &c.k_shape()),
                leaf(&v, &c.k_shape()),
            );
            let out = attend(&ql, &kl, &vl, &c, p, seed).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!((out.shape(), out.dtype()), (&c.q_shape()[..], dt), "{what}");
            let fwd = Tol {
                atol: 3.0 * u,
                rtol: 2.0 * u,
            };
            assert_close(
                &format!("forward {what}"),
                &out.to_vec().unwrap(),
                &r.out,
                fwd,
            );
            let gt = t(&g, &c.q_shape(), dev).to_dtype(dt).unwrap();
            out.mul(&gt).unwrap().sum().unwrap().backward().unwrap();
            for (name, x, want) in [("dq", &ql, &r.dq), ("dk", &kl, &r.dk), ("dv", &vl, &r.dv)] {
                let got = x.grad().expect("grad");
                assert_eq!(got.dtype(), dt, "{name} {what}");
                let max = want.iter().fold(1e-3f64, |m, w| m.max(w.abs()));
                let tol = Tol {
                    atol: 8.0 * u * max,
                    rtol: 4.0 * u,
                };
                assert_close(&format!("{name} {what}"), &got.to_vec().unwrap(), want, tol);
            }
        }
    });
}

#[test]
fn half_precision_forward_and_backward_at_awkward_sizes() {
    let sizes = [(1, 1), (7, 7), (1, 9), (5, 12), (127, 127), (40, 97)];
    for dt in [DType::F16, DType::BF16] {
        for (i, c) in awkward_cases(&sizes).into_iter().enumerate() {
            check_half(c, dt, 500 + 4 * i as u64, &devices());
        }
    }
}

/// A negative scale makes a row's smallest raw score its largest scaled one: the kernels that take
/// the max of the raw scores and scale it once take the min instead. Forward and gradients at
/// the scale `−1/√d`; then the forward at `−60/√d`, where the scaled scores of a row spread over
/// more than 2^7 (log2 units), so that shifting by any score but the largest overflows a weight
/// (the backward takes no max, and its rounding errors grow with the scale). The sizes give key
/// tiles with and without the mask (one of 128 keys, then a partial one), causal and not.
#[test]
fn a_negative_scale_matches_f64() {
    let sizes = [
        (7, 7, false),
        (200, 200, false),
        (129, 200, true),
        (300, 300, true),
    ];
    for (i, &(tq, tk, causal)) in sizes.iter().enumerate() {
        for d in [64, 128] {
            let c = Case {
                b: 1,
                h: 2,
                tq,
                tk,
                d,
                causal,
                scale_mul: -1.0,
            };
            let seed = 900 + 8 * i as u64 + d as u64;
            check_case(c, seed, &devices());
            for dt in [DType::F16, DType::BF16] {
                check_half(c, dt, seed, &devices());
            }
            let steep = Case {
                scale_mul: -60.0,
                ..c
            };
            for dt in [DType::F32, DType::F16, DType::BF16] {
                check_forward(steep, dt, seed, &devices());
            }
        }
    }
}

/// The forward of `c` in `dt` on `devs`, every step that takes `dt`, against the f64 attention
/// of the inputs as rounded to `dt` (the tolerances of [`check_case`] and [`check_half`]).
fn check_forward(c: Case, dt: DType, seed: u64, devs: &[Device]) {
    let round = |n: usize, seed: u64| rounded(n, seed, dt);
    let (nq, nk) = (numel(&c.q_shape()), numel(&c.k_shape()));
    let (q, k, v) = (round(nq, seed), round(nk, seed + 1), round(nk, seed + 2));
    let want = reference(&c, &q, &k, &v, &vec![0.0; nq]).out;
    let tol = match dt {
        DType::F32 => FWD,
        _ => Tol {
            atol: 3.0 * unit(dt),
            rtol: 2.0 * unit(dt),
        },
    };
    for_each_step(Family::Attention, |step| {
        if dt != DType::F32 && step.step.number() < 3 {
            return;
        }
        for &dev in devs {
            let what = format!("forward {c:?} {dt:?} step {} on {dev}", step.name);
            let x = |x: &[f32], s: &[usize]| t(x, s, dev).to_dtype(dt).unwrap();
            let out = x(&q, &c.q_shape())
                .attention(
                    &x(&k, &c.k_shape()),
                    &x(&v, &c.k_shape()),
                    c.scale(),
                    c.causal,
                )
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_close(&what, &out.to_vec().unwrap(), &want, tol);
        }
    });
}

#[test]
fn half_precision_long_sequences_on_the_gpu() {
    let Some(dev) = gpu() else { return };
    // (dtype, tq, tk, d, causal, b, h): several key tiles a query tile, odd and even counts of
    // them, and queries that are the last of a longer sequence of keys
    for (dt, tq, tk, d, causal, b, h) in [
        (DType::BF16, 1000, 1000, 64, false, 2, 2),
        (DType::F16, 1031, 1031, 128, true, 1, 3),
        (DType::BF16, 4097, 4097, 128, true, 1, 1),
        (DType::F16, 4097, 4097, 64, false, 1, 1),
        (DType::BF16, 300, 1000, 128, true, 2, 1),
        (DType::F16, 129, 1100, 64, true, 1, 2),
    ] {
        let c = Case {
            b,
            h,
            tq,
            tk,
            d,
            causal,
            scale_mul: 1.0,
        };
        check_half(c, dt, tk as u64 + d as u64, &[dev]);
    }
}

/// The Hopper steps run a causal grid's heads in chunks that fit in L2, each chunk's longest
/// tiles first, when a head has at least 10 of them (`causal_order` in
/// `kernels/attention/hopper.cuh`); a chunk holds ⌊2²³ / ((Tq + Tk)·d)⌋ heads. The first case
/// has 10 query tiles a head (the forward's pieces) in chunks of 56 of its 57 heads, the second
/// 10 key tiles a head (the backward's at d = 64) in chunks of 70 of its 72, so a second, smaller
/// chunk runs too, and every head of both must come out right.
#[test]
fn causal_heads_run_in_chunks() {
    let Some(dev) = gpu() else { return };
    // (dtype, tq, tk, d, b, h)
    for (dt, tq, tk, d, b, h) in [
        (DType::BF16, 1160, 1160, 64, 3, 19),
        (DType::F16, 64, 1800, 64, 3, 24),
    ] {
        let c = Case {
            b,
            h,
            tq,
            tk,
            d,
            causal: true,
            scale_mul: 1.0,
        };
        check_half(c, dt, tq as u64 + d as u64, &[dev]);
    }
}

/// Step 8's forward runs query tiles in turn in each block: its K and V stages and its two Q
/// buffers carry on from one tile to the next. With one block and with three, each block runs
/// many tiles, causal ones of differing key counts, at both head dims.
#[test]
fn step_8_blocks_run_query_tiles_in_turn() {
    let Some(dev) = gpu() else { return };
    for blocks in [1, 3] {
        let few = Experiments {
            attention_blocks: Some(blocks),
            ..Experiments::default()
        };
        config::with_scoped_experiments(few, || {
            // (dtype, tq, tk, d, causal, b, h)
            for (dt, tq, tk, d, causal, b, h) in [
                (DType::BF16, 1000, 1000, 64, true, 2, 2),
                (DType::F16, 700, 700, 128, false, 1, 3),
                (DType::BF16, 300, 1000, 128, true, 2, 1),
                (DType::F16, 1, 129, 64, false, 3, 5),
            ] {
                let c = Case {
                    b,
                    h,
                    tq,
                    tk,
                    d,
                    causal,
                    scale_mul: 1.0,
                };
                // every step runs; the others ignore the switch
                check_forward(c, dt, 40 * blocks as u64 + tq as u64 + d as u64, &[dev]);
            }
        });
    }
}

/// Step 6's fused backward (head dims up to 64) and step 7's Hopper backward (head dims 64 and
/// 128) sum dq over the key blocks with atomic adds; with `config::with_deterministic` step 6's
/// fixed-order kernels run instead. Both match the f64 reference (through `check_half`, every
/// step), the fixed order gives the same bits twice, and each atomic path's dq differs from it by
/// no more than the rounding of their sums.
#[test]
fn the_fixed_order_backward_matches_and_repeats() {
    let Some(dev) = gpu() else { return };
    let cases = [
        (DType::BF16, 300, 64, true),
        (DType::F16, 131, 64, false),
        (DType::BF16, 97, 32, true),
        (DType::F16, 200, 128, true),
        (DType::BF16, 131, 128, false),
    ];
    for (i, &(dt, t, d, causal)) in cases.iter().enumerate() {
        let c = Case {
            b: 2,
            h: 3,
            tq: t,
            tk: t,
            d,
            causal,
            scale_mul: 1.0,
        };
        camel_core::config::with_deterministic(true, || check_half(c, dt, 900 + i as u64, &[dev]));
        let dq = |fixed: bool, step: Step| {
            camel_core::config::with_deterministic(fixed, || {
                with_step(Family::Attention, step, || {
                    let x = |seed: u64| {
                        Tensor::randn_seeded(&c.q_shape(), seed, dev)
                            .unwrap()
                            .to_dtype(dt)
                            .unwrap()
                    };
                    let q = x(1).requires_grad_(true).unwrap();
                    let (k, v, g) = (x(2), x(3), x(4));
                    let y = q.attention(&k, &v, c.scale(), c.causal).unwrap();
                    y.mul(&g).unwrap().sum().unwrap().backward().unwrap();
                    q.grad().unwrap().to_vec().unwrap()
                })
            })
        };
        let (a, b) = (dq(true, Step::Six), dq(true, Step::Six));
        assert!(
            a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{c:?} {dt:?}: the fixed-order dq differs between runs"
        );
        let max = a.iter().fold(1e-3f32, |m, x| m.max(x.abs())) as f64;
        let u = unit(dt);
        let want: Vec<f64> = a.iter().map(|&x| x as f64).collect();
        let tol = Tol {
            atol: 4.0 * u * max,
            rtol: 2.0 * u,
        };
        for step in [Step::Six, Step::Seven] {
            let atomic = dq(false, step);
            assert_close(
                &format!("{c:?} {dt:?}: step {step:?}'s dq"),
                &atomic,
                &want,
                tol,
            );
        }
    }
}

/// A key the causal mask hides changes nothing before it, in 16-bit on the GPU: the outputs of
/// the first rows and their gradients ignore a poisoned future.
#[test]
fn half_precision_causal_rows_ignore_future_keys() {
    let Some(dev) = gpu() else { return };
    let (n, d) = (70, 64);
    let x = rand_vec(n * d, -1.0, 1.0, 3);
    let mut y = x.clone();
    for e in &mut y[65 * d..] {
        *e = 1e3; // keys and values 65.. changed
    }
    let run = |data: &[f32]| {
        let a = t(data, &[1, 1, n, d], dev).to_dtype(DType::BF16).unwrap();
        a.attention(&a, &a, 0.125, true)
            .unwrap()
            .narrow(2, 0, 65)
            .unwrap()
            .to_vec()
            .unwrap()
    };
    assert_eq!(run(&x), run(&y));
}

/// The head views of a `[B, T, 3·C]` projection, as `MultiHeadAttention` makes them (strided,
/// read in place), and the same through a layout with rows not a multiple of 4 floats apart
/// (copied densely first) give the dense result.
#[test]
fn strided_and_unaligned_views() {
    let (b, n, h, d) = (2, 9, 2, 32);
    let c = Case {
        b,
        h,
        tq: n,
        tk: n,
        d,
        causal: true,
        scale_mul: 1.0,
    };
    for pad in [0usize, 1] {
        let width = 3 * h * d + pad;
        let x = rand_vec(b * n * width, -1.0, 1.0, 7 + pad as u64);
        // the dense operands, for the reference
        let part = |p: usize| -> Vec<f32> {
            let mut out = Vec::new();
            for bb in 0..b {
                for hh in 0..h {
                    for tt in 0..n {
                        let s = (bb * n + tt) * width + p * h * d + hh * d;
                        out.extend_from_slice(&x[s..s + d]);
                    }
                }
            }
            out
        };
        let g = rand_vec(b * h * n * d, -1.0, 1.0, 9);
        let r = reference(&c, &part(0), &part(1), &part(2), &g);
        for_each_step(Family::Attention, |step| {
            for dev in devices() {
                let what = format!("pad {pad} step {} on {dev}", step.name);
                let xl = t(&x, &[b, n, width], dev).requires_grad_(true).unwrap();
                let head = |p: usize| {
                    xl.narrow(2, p * h * d, h * d)
                        .unwrap()
                        .reshape(&[b, n, h, d])
                        .unwrap()
                        .permute(&[0, 2, 1, 3])
                        .unwrap()
                };
                let out = head(0)
                    .attention(&head(1), &head(2), c.scale(), true)
                    .unwrap();
                forward_then_backprop(&what, &out, &r, &c, &g, dev);
                // x's gradient holds dq, dk, dv in its three column blocks
                let gx = xl.grad().unwrap();
                for (p, want) in [(0, &r.dq), (1, &r.dk), (2, &r.dv)] {
                    let got = gx
                        .narrow(2, p * h * d, h * d)
                        .unwrap()
                        .reshape(&[b, n, h, d])
                        .unwrap()
                        .permute(&[0, 2, 1, 3])
                        .unwrap()
                        .to_vec()
                        .unwrap();
                    assert_close(&format!("grad {p} {what}"), &got, want, bwd_tol(&c));
                }
            }
        });
    }
}

/// The output merges heads for free: `transpose(1, 2)` of the result is dense.
#[test]
fn the_output_is_stored_head_merged() {
    for dev in devices() {
        let q = Tensor::randn_seeded(&[2, 3, 4, 32], 1, dev).unwrap();
        let y = q.attention(&q, &q, 0.2, false).unwrap();
        assert!(!y.is_contiguous());
        assert!(y.transpose(1, 2).unwrap().is_contiguous(), "{dev}");
    }
}

#[test]
fn gradcheck_attention() {
    for (tq, tk, causal) in [(3, 5, false), (4, 4, true), (2, 6, true)] {
        let (qs, ks) = (vec![1, 2, tq, 32], vec![1, 2, tk, 32]);
        let inputs = [
            hf(rand_vec(numel(&qs), -1.0, 1.0, 1), &qs),
            hf(rand_vec(numel(&ks), -1.0, 1.0, 2), &ks),
            hf(rand_vec(numel(&ks), -1.0, 1.0, 3), &ks),
        ];
        gradcheck_all(
            &format!("attention tq {tq} tk {tk} causal {causal}"),
            |a| a[0].attention(&a[1], &a[2], 0.4, causal),
            &inputs,
        );
    }
}

/// Dropout on the attention weights, every step and device, f32 and 16-bit: against the f64
/// attention with the kernels' mask (a fifth of the weights dropped), forward and backward.
#[test]
fn dropout_matches_f64_with_the_kernels_mask() {
    let sizes = [(1, 1), (7, 7), (5, 12), (127, 127), (40, 97)];
    for (i, c) in awkward_cases(&sizes).into_iter().enumerate() {
        check_case_dropout(c, 0.2, 900 + 4 * i as u64, &devices());
    }
    for dt in [DType::F16, DType::BF16] {
        for (i, c) in awkward_cases(&[(7, 7), (127, 127), (40, 97)])
            .into_iter()
            .enumerate()
        {
            check_half_dropout(c, dt, 0.1, 1300 + 4 * i as u64, &devices());
        }
    }
    if let Some(dev) = gpu() {
        let c = Case {
            b: 1,
            h: 2,
            tq: 1031,
            tk: 1031,
            d: 64,
            causal: true,
            scale_mul: 1.0,
        };
        check_case_dropout(c, 0.5, 77, &[dev]);
        check_half_dropout(c, DType::BF16, 0.2, 78, &[dev]);
    }
}

/// The dropout mask is fixed by the generator's seed, so the attention with dropout is a
/// differentiable function of q, k and v that gradcheck can probe; the generator moves by one
/// counter per call with dropout and not at all without.
#[test]
fn dropout_gradcheck_and_generator_use() {
    for (tq, tk, causal) in [(3, 5, false), (4, 4, true)] {
        let (qs, ks) = (vec![1, 2, tq, 32], vec![1, 2, tk, 32]);
        let inputs = [
            hf(rand_vec(numel(&qs), -1.0, 1.0, 4), &qs),
            hf(rand_vec(numel(&ks), -1.0, 1.0, 5), &ks),
            hf(rand_vec(numel(&ks), -1.0, 1.0, 6), &ks),
        ];
        gradcheck_all(
            &format!("attention dropout tq {tq} tk {tk} causal {causal}"),
            |a| a[0].attention_dropout_with(&a[1], &a[2], 0.4, causal, 0.3, &mut Generator::new(9)),
            &inputs,
        );
    }
    for dev in devices() {
        let x = Tensor::randn_seeded(&[1, 2, 6, 32], 1, dev).unwrap();
        let mut g = Generator::new(3);
        let none = x
            .attention_dropout_with(&x, &x, 0.2, true, 0.0, &mut g)
            .unwrap();
        assert_eq!(g.offset(), 0, "{dev}: p = 0 draws nothing");
        assert_eq!(
            none.to_vec().unwrap(),
            x.attention(&x, &x, 0.2, true).unwrap().to_vec().unwrap()
        );
        let a = x
            .attention_dropout_with(&x, &x, 0.2, true, 0.5, &mut g)
            .unwrap();
        assert_eq!(g.offset(), 1, "{dev}: one counter a call");
        let b = x
            .attention_dropout_with(&x, &x, 0.2, true, 0.5, &mut g)
            .unwrap();
        assert_ne!(
            a.to_vec().unwrap(),
            b.to_vec().unwrap(),
            "{dev}: a new mask a call"
        );
        for p in [1.0, -0.1, f32::NAN] {
            let r = x.attention_dropout_with(&x, &x, 0.2, true, p, &mut g);
            assert!(
                matches!(r, Err(Error::InvalidArgument { .. })),
                "{dev} p {p}: {r:?}"
            );
        }
        assert_eq!(g.offset(), 2, "{dev}: a refused call draws nothing");
    }
}

/// The dtype the NaN tests run step `number` in: f32 at steps 1–2, bf16 at the tensor-core steps.
fn nan_dtype(number: u32) -> DType {
    if number < 3 {
        DType::F32
    } else {
        DType::BF16
    }
}

#[test]
fn a_nan_reaches_only_its_row() {
    for_each_step(Family::Attention, |step| {
        for dev in devices() {
            let dt = nan_dtype(step.step.number());
            let mut qv = rand_vec(2 * 5 * 64, -1.0, 1.0, 4);
            qv[3 * 64 + 7] = f32::NAN; // query 3 of head 0
            let q = t(&qv, &[1, 2, 5, 64], dev).to_dtype(dt).unwrap();
            let kv = Tensor::randn_seeded(&[1, 2, 5, 64], 5, dev)
                .unwrap()
                .to_dtype(dt)
                .unwrap();
            let y = q
                .attention(&kv, &kv, 0.125, false)
                .unwrap()
                .to_vec()
                .unwrap();
            for (r, row) in y.chunks(64).enumerate() {
                assert_eq!(
                    row.iter().all(|v| v.is_nan()),
                    r == 3,
                    "{dev} {} row {r}",
                    step.name
                );
                assert!(r == 3 || row.iter().all(|v| v.is_finite()));
            }
        }
    });
}

/// A NaN in one key reaches every row of its head and no other head. With 300 keys the key (17)
/// lies in a full key tile of every tiled step, where the softmax runs without the mask.
#[test]
fn a_nan_key_reaches_every_row_of_its_head() {
    let n = 300;
    for_each_step(Family::Attention, |step| {
        for dev in devices() {
            let dt = nan_dtype(step.step.number());
            for d in [64, 128] {
                let mut kv = rand_vec(2 * n * d, -1.0, 1.0, 6);
                kv[17 * d + 3] = f32::NAN; // key 17 of head 0
                let k = t(&kv, &[1, 2, n, d], dev).to_dtype(dt).unwrap();
                let qv = |seed| {
                    Tensor::randn_seeded(&[1, 2, n, d], seed, dev)
                        .unwrap()
                        .to_dtype(dt)
                        .unwrap()
                };
                let y = qv(7)
                    .attention(&k, &qv(8), 1.0 / (d as f32).sqrt(), false)
                    .unwrap()
                    .to_vec()
                    .unwrap();
                for (r, row) in y.chunks(d).enumerate() {
                    let ok = if r < n {
                        row.iter().all(|v| v.is_nan())
                    } else {
                        row.iter().all(|v| v.is_finite())
                    };
                    assert!(ok, "{dev} {} d {d} row {r}", step.name);
                }
            }
        }
    });
}

#[test]
fn bad_input_is_a_clear_error() {
    for dev in devices() {
        let z = |s: &[usize]| Tensor::zeros(s, dev).unwrap();
        let q = z(&[1, 2, 4, 64]);
        let msg = |r: camel_core::Result<Tensor>| r.expect_err("an error").to_string();
        // k of another head count, v of another length, rank 3
        let e = msg(q.attention(&z(&[1, 3, 4, 64]), &z(&[1, 3, 4, 64]), 1.0, false));
        assert!(
            e.contains("attention") && e.contains("[1, 3, 4, 64]"),
            "{e}"
        );
        let e = msg(q.attention(&z(&[1, 2, 4, 64]), &z(&[1, 2, 5, 64]), 1.0, false));
        assert!(e.contains("[1, 2, 5, 64]"), "{e}");
        assert!(matches!(
            q.attention(&z(&[2, 4, 64]), &z(&[2, 4, 64]), 1.0, false),
            Err(Error::ShapeMismatch { .. })
        ));
        // an unsupported head dim names the supported ones
        let q48 = z(&[1, 1, 3, 48]);
        let e = msg(q48.attention(&q48, &q48, 1.0, false));
        assert!(e.contains("[32, 64, 128]"), "{e}");
        // a causal query that would see no key; no keys at all; a NaN scale
        let e = msg(q.attention(&z(&[1, 2, 3, 64]), &z(&[1, 2, 3, 64]), 1.0, true));
        assert!(e.contains("Tq = 4, Tk = 3"), "{e}");
        assert!(q
            .attention(&z(&[1, 2, 0, 64]), &z(&[1, 2, 0, 64]), 1.0, false)
            .is_err());
        assert!(q.attention(&q, &q, f32::NAN, false).is_err());
        // a dtype mix and integer operands are refused by name
        let h = q.to_dtype(DType::BF16).unwrap();
        assert!(matches!(
            q.attention(&h, &q, 1.0, false),
            Err(Error::DTypeMismatch {
                op: "attention",
                ..
            })
        ));
        let i = q.to_dtype(DType::I64).unwrap();
        assert!(matches!(
            i.attention(&i, &i, 1.0, false),
            Err(Error::DTypeMismatch {
                op: "attention",
                ..
            })
        ));
    }
    // 16-bit operands at a step with only f32 kernels: an error naming the steps that have them
    if let Some(dev) = gpu() {
        let h = Tensor::zeros(&[1, 1, 2, 32], dev)
            .unwrap()
            .to_dtype(DType::F16)
            .unwrap();
        let e = with_step(Family::Attention, Step::Two, || {
            h.attention(&h, &h, 1.0, false)
        })
        .expect_err("step 2 has no f16 kernels")
        .to_string();
        assert!(
            e.contains("step 2") && e.contains("F16") && e.contains("[3, 4, 5, 6, 7, 8]"),
            "{e}"
        );
    }
    if let Some(dev) = gpu() {
        let (qc, kc) = (
            Tensor::zeros(&[1, 1, 2, 32], dev).unwrap(),
            Tensor::zeros(&[1, 1, 2, 32], Device::Cpu).unwrap(),
        );
        assert!(matches!(
            qc.attention(&kc, &kc, 1.0, false),
            Err(Error::DeviceMismatch { .. })
        ));
    }
}

//! matmul / matmul_t against a plain-f64 triple loop: all four transpose combinations, 2-D and
//! batched (equal batch dims, A batched with B 2-D, A 2-D with B batched).
//! Tolerance: |got − ref| ≤ 1e-5·√k·max|a|·max|b| (f32 dot products of length k).

mod common;
use common::*;
use proptest::prelude::*;

/// `op(A)·op(B)` for stored operands; `a_batch`/`b_batch` empty means 2-D (shared).
#[allow(clippy::too_many_arguments)]
fn ref_matmul(
    a: &[f32],
    b: &[f32],
    batch: usize,
    a_batched: bool,
    b_batched: bool,
    (m, k, n): (usize, usize, usize),
    ta: bool,
    tb: bool,
) -> Vec<f64> {
    let mut out = vec![0.0f64; batch * m * n];
    for bi in 0..batch {
        let ao = if a_batched { bi * m * k } else { 0 };
        let bo = if b_batched { bi * k * n } else { 0 };
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0f64;
                for p in 0..k {
                    // A stored [m,k], or [k,m] when transposed; B stored [k,n], or [n,k]
                    let av = if ta {
                        a[ao + p * m + i]
                    } else {
                        a[ao + i * k + p]
                    };
                    let bv = if tb {
                        b[bo + j * k + p]
                    } else {
                        b[bo + p * n + j]
                    };
                    s += av as f64 * bv as f64;
                }
                out[bi * m * n + i * n + j] = s;
            }
        }
    }
    out
}

fn stored(rows: usize, cols: usize, trans: bool) -> [usize; 2] {
    if trans {
        [cols, rows]
    } else {
        [rows, cols]
    }
}

/// Which operands carry the batch dims.
#[derive(Clone, Copy, Debug)]
enum Batch {
    None,
    Both,
    AOnly,
    BOnly,
}

fn check_matmul(
    bdims: &[usize],
    layout: Batch,
    (m, k, n): (usize, usize, usize),
    ta: bool,
    tb: bool,
    seed: u64,
) {
    let (a_b, b_b) = match layout {
        Batch::None => (false, false),
        Batch::Both => (true, true),
        Batch::AOnly => (true, false),
        Batch::BOnly => (false, true),
    };
    let bd: Vec<usize> = if matches!(layout, Batch::None) {
        vec![]
    } else {
        bdims.to_vec()
    };
    let batch = numel(&bd);
    let mut sa = if a_b { bd.clone() } else { vec![] };
    sa.extend(stored(m, k, ta));
    let mut sb = if b_b { bd.clone() } else { vec![] };
    sb.extend(stored(k, n, tb));
    let a = rand_vec(numel(&sa), -1.0, 1.0, seed);
    let b = rand_vec(numel(&sb), -1.0, 1.0, seed ^ 0x51);
    let want = ref_matmul(&a, &b, batch, a_b, b_b, (m, k, n), ta, tb);
    let mut out_shape = bd.clone();
    out_shape.extend([m, n]);
    let scale = 1e-5 * (k as f64).sqrt() * max_abs(&a) * max_abs(&b);
    let tol = Tol {
        atol: scale.max(1e-7),
        rtol: 0.0,
    };
    let what = format!("matmul_t {sa:?}·{sb:?} trans_a={ta} trans_b={tb}");
    check(&what, &out_shape, &want, tol, |d| {
        let (x, y) = (t(&a, &sa, d), t(&b, &sb, d));
        if !ta && !tb {
            // plain matmul must agree with matmul_t(false, false)
            let p = x.matmul(&y)?;
            assert_eq!(p.to_vec()?, x.matmul_t(&y, false, false)?.to_vec()?);
            Ok(p)
        } else {
            x.matmul_t(&y, ta, tb)
        }
    });
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn matmul_2d(m in dim(), k in dim(), n in dim(), ta in any::<bool>(), tb in any::<bool>(), seed in any::<u64>()) {
        check_matmul(&[], Batch::None, (m, k, n), ta, tb, seed);
    }

    #[test]
    fn matmul_batched(bdims in prop::collection::vec(prop::sample::select(vec![1usize, 2, 3]), 1..=2),
                      layout in prop::sample::select(vec![Batch::Both, Batch::AOnly, Batch::BOnly]),
                      m in dim(), k in dim(), n in dim(), seed in any::<u64>()) {
        for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
            check_matmul(&bdims, layout, (m, k, n), ta, tb, seed);
        }
    }
}

#[test]
fn matmul_large_k_and_output() {
    // k ≥ 1000 and an output ≥ 1000 elements, all four transpose combinations.
    for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
        check_matmul(&[], Batch::None, (7, 1031, 5), ta, tb, 11);
        check_matmul(&[], Batch::None, (37, 9, 33), ta, tb, 12);
        check_matmul(&[3], Batch::AOnly, (33, 17, 35), ta, tb, 13);
    }
}

#[test]
fn matmul_known_values() {
    // [[1,2],[3,4]]·[[5,6],[7,8]] = [[19,22],[43,50]]
    let want = [19.0, 22.0, 43.0, 50.0];
    check("2x2 matmul", &[2, 2], &want, EXACT, |d| {
        t(&[1.0, 2.0, 3.0, 4.0], &[2, 2], d).matmul(&t(&[5.0, 6.0, 7.0, 8.0], &[2, 2], d))
    });
    // A stored transposed: Aᵀ = [[1,3],[2,4]] → Aᵀ·B = [[26,30],[38,44]]
    check(
        "2x2 matmul_t(a)",
        &[2, 2],
        &[26.0, 30.0, 38.0, 44.0],
        EXACT,
        |d| {
            t(&[1.0, 2.0, 3.0, 4.0], &[2, 2], d).matmul_t(
                &t(&[5.0, 6.0, 7.0, 8.0], &[2, 2], d),
                true,
                false,
            )
        },
    );
}

/// `act(x·Wᵀ + b)` in f64.
fn ref_linear(
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
    (rows, inp, out): (usize, usize, usize),
    act: Activation,
) -> Vec<f64> {
    let gelu = |v: f64| {
        0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh())
    };
    let mut y = vec![0.0f64; rows * out];
    for r in 0..rows {
        for o in 0..out {
            let mut s = b.map_or(0.0, |b| b[o] as f64);
            for i in 0..inp {
                s += x[r * inp + i] as f64 * w[o * inp + i] as f64;
            }
            y[r * out + o] = match act {
                Activation::Identity => s,
                Activation::Relu => s.max(0.0),
                Activation::Gelu => gelu(s),
            };
        }
    }
    y
}

/// The fused linear op (one GEMM with a bias/activation epilogue on the GPU) against f64, on
/// awkward sizes, with and without bias, for every activation, with leading batch dims.
#[test]
fn linear_matches_reference() {
    for (lead, inp, out) in [
        (vec![1], 1, 1),
        (vec![7], 33, 7),
        (vec![2, 3], 127, 129),
        (vec![1000], 65, 10),
        (vec![5], 0, 3),
    ] {
        let rows: usize = lead.iter().product();
        let x = rand_vec(rows * inp, -1.0, 1.0, 1);
        let w = rand_vec(out * inp, -1.0, 1.0, 2);
        let b = rand_vec(out, -1.0, 1.0, 3);
        let mut xs = lead.clone();
        xs.push(inp);
        let mut ys = lead.clone();
        ys.push(out);
        for act in [Activation::Identity, Activation::Relu, Activation::Gelu] {
            for bias in [true, false] {
                let want = ref_linear(&x, &w, bias.then_some(&b[..]), (rows, inp, out), act);
                let tol = Tol {
                    atol: 1e-5 * (inp.max(1) as f64).sqrt() * 2.0,
                    rtol: 1e-5,
                };
                check(
                    &format!("linear {xs:?}·[{out},{inp}] bias={bias} {act:?}"),
                    &ys,
                    &want,
                    tol,
                    |dev| {
                        let bt = t(&b, &[out], dev);
                        t(&x, &xs, dev).linear(&t(&w, &[out, inp], dev), bias.then_some(&bt), act)
                    },
                );
            }
        }
    }
}

#[test]
fn linear_gradcheck_every_activation() {
    let (rows, inp, out) = (5, 7, 3);
    // pre-activations kept away from 0, where ReLU's derivative jumps
    let x = rand_vec(rows * inp, -1.0, 1.0, 4);
    let w = rand_vec(out * inp, -1.0, 1.0, 5);
    let b = rand_away(out, -1.0, 1.0, 6);
    for act in [Activation::Identity, Activation::Relu, Activation::Gelu] {
        let ins = [
            hf(x.clone(), &[rows, inp]),
            hf(w.clone(), &[out, inp]),
            hf(b.clone(), &[out]),
        ];
        gradcheck_all(
            &format!("linear {act:?}"),
            |a| a[0].linear(&a[1], Some(&a[2]), act),
            &ins,
        );
        gradcheck_all(
            &format!("linear no bias {act:?}"),
            |a| a[0].linear(&a[1], None, act),
            &ins[..2],
        );
    }
}

#[test]
fn linear_rejects_bad_shapes() {
    for dev in devices() {
        let x = Tensor::zeros(&[4, 3], dev).unwrap();
        let w = Tensor::zeros(&[2, 5], dev).unwrap();
        let e = x
            .linear(&w, None, Activation::Identity)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("linear") && e.contains("[4, 3]") && e.contains("[2, 5]"),
            "{e}"
        );
        let w = Tensor::zeros(&[2, 3], dev).unwrap();
        let b = Tensor::zeros(&[3], dev).unwrap();
        let e = x
            .linear(&w, Some(&b), Activation::Relu)
            .unwrap_err()
            .to_string();
        assert!(e.contains("bias of shape [2]"), "{e}");
    }
}

/// Products of head views (`[B, T, H, D]` permuted to `[B, H, T, D]`, which the GEMM reads
/// through a dense copy) give the same values and gradients, bit for bit, as the same products
/// of dense copies made beforehand: the backward reuses the forward's copies of the operands,
/// and an upstream gradient that is itself such a view is copied once for both operands.
#[test]
fn head_view_products_match_dense_ones() {
    let (b, tl, h, d) = (2, 7, 3, 5);
    let n = b * tl * h * d;
    for dev in devices() {
        let leaf = |seed| {
            t(&rand_vec(n, -1.0, 1.0, seed), &[b, tl, h, d], dev)
                .requires_grad_(true)
                .unwrap()
        };
        let (x, y, z) = (leaf(1), leaf(2), leaf(3));
        let w = t(&rand_vec(n, -1.0, 1.0, 4), &[b, tl, h * d], dev);
        let run = |dense: bool| {
            let heads = |v: &Tensor| {
                let p = v.permute(&[0, 2, 1, 3]).unwrap();
                if dense {
                    p.contiguous().unwrap()
                } else {
                    p
                }
            };
            let (q, k, v) = (heads(&x), heads(&y), heads(&z));
            // [B, H, T, T] · [B, H, T, D], heads merged back: the gradient of the second
            // product arrives as a view
            let s = q.matmul_t(&k, false, true).unwrap();
            let o = s.matmul(&v).unwrap().transpose(1, 2).unwrap();
            let o = o.reshape(&[b, tl, h * d]).unwrap();
            o.mul(&w).unwrap().sum().unwrap().backward().unwrap();
            let grads: Vec<Vec<f32>> = [&x, &y, &z]
                .iter()
                .map(|l| l.grad().expect("a gradient").to_vec().unwrap())
                .collect();
            for l in [&x, &y, &z] {
                l.zero_grad();
            }
            (o.to_vec().unwrap(), grads)
        };
        let (views, dense) = (run(false), run(true));
        assert_eq!(views, dense, "{dev}: head views against dense copies");
    }
}

//! `gradcheck` (central differences, default options) of every differentiable op on random
//! shapes, on every device; and proof that gradcheck rejects a wrong backward.
//! Inputs avoid kinks: relu inputs have |x| ≥ 0.05, max inputs are distinct (gap 0.05),
//! sqrt/log/pow inputs are positive, div denominators have |x| ≥ 0.5.

mod common;
use camel_core::{gradcheck, Error, GradcheckOptions, Tensor};
use common::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn binary_broadcasting(n in small_dim(), m in small_dim(), b in small_dim(), seed in any::<u64>()) {
        let shapes: [(Vec<usize>, Vec<usize>); 5] = [
            (vec![n, m], vec![n, m]),
            (vec![n, m], vec![m]),
            (vec![n, m], vec![n, 1]),
            (vec![b, n, m], vec![n, m]),
            (vec![m], vec![b, n, m]),
        ];
        for (i, (sa, sb)) in shapes.iter().enumerate() {
            let a = hf(rand_vec(numel(sa), -2.0, 2.0, seed + i as u64), sa);
            let bb = hf(rand_away(numel(sb), 0.5, 2.0, seed ^ 77), sb);
            let ins = [a, bb];
            gradcheck_all(&format!("add {sa:?} {sb:?}"), |x| x[0].add(&x[1]), &ins);
            gradcheck_all(&format!("sub {sa:?} {sb:?}"), |x| x[0].sub(&x[1]), &ins);
            gradcheck_all(&format!("mul {sa:?} {sb:?}"), |x| x[0].mul(&x[1]), &ins);
            gradcheck_all(&format!("div {sa:?} {sb:?}"), |x| x[0].div(&x[1]), &ins);
        }
    }

    #[test]
    fn unary(shape in small_shape(), seed in any::<u64>(), s in -2.0f32..2.0,
             p in prop::sample::select(vec![-1.5f32, 0.5, 2.0, 3.0])) {
        let n = numel(&shape);
        let x = [hf(rand_vec(n, -3.0, 3.0, seed), &shape)];
        let away = [hf(rand_away(n, 0.05, 3.0, seed), &shape)];
        let pos = [hf(rand_vec(n, 0.5, 3.0, seed), &shape)];
        let small = [hf(rand_vec(n, -2.0, 2.0, seed), &shape)];
        gradcheck_all("neg", |a| a[0].neg(), &x);
        gradcheck_all("add_scalar", |a| a[0].add_scalar(s), &x);
        gradcheck_all("mul_scalar", |a| a[0].mul_scalar(s), &x);
        gradcheck_all(&format!("pow_scalar({p})"), |a| a[0].pow_scalar(p), &pos);
        gradcheck_all("square", |a| a[0].square(), &x);
        gradcheck_all("sqrt", |a| a[0].sqrt(), &pos);
        gradcheck_all("relu", |a| a[0].relu(), &away);
        gradcheck_all("sigmoid", |a| a[0].sigmoid(), &x);
        gradcheck_all("tanh", |a| a[0].tanh(), &x);
        gradcheck_all("gelu", |a| a[0].gelu(), &x);
        gradcheck_all("exp", |a| a[0].exp(), &small);
        gradcheck_all("log", |a| a[0].log(), &pos);
    }

    #[test]
    fn reductions(shape in small_shape(), seed in any::<u64>(), dsel in 0usize..3, keepdim in any::<bool>()) {
        let r = shape.len();
        let d = (dsel % r) as isize;
        let nd = d - r as isize;
        let x = [hf(rand_vec(numel(&shape), -2.0, 2.0, seed), &shape)];
        let distinct = [hf(rand_distinct(numel(&shape), 0.05, seed), &shape)];
        gradcheck_all("sum", |a| a[0].sum(), &x);
        gradcheck_all("mean", |a| a[0].mean(), &x);
        gradcheck_all("sum_dim", |a| a[0].sum_dim(d, keepdim), &x);
        gradcheck_all("mean_dim (negative dim)", |a| a[0].mean_dim(nd, keepdim), &x);
        let mut to = shape[1..].to_vec();
        if let Some(first) = to.first_mut() { *first = 1; }
        gradcheck_all(&format!("sum_to {shape:?}->{to:?}"), |a| a[0].sum_to(&to), &x);
        gradcheck_all("max", |a| a[0].max(), &distinct);
        gradcheck_all("max_dim", |a| a[0].max_dim(d, keepdim), &distinct);
        gradcheck_all("max_dim (negative dim)", |a| a[0].max_dim(nd, !keepdim), &distinct);
    }

    #[test]
    fn matmul(m in small_dim(), k in small_dim(), n in small_dim(), bt in 1usize..4, seed in any::<u64>()) {
        // every transpose combination × batch layout (none, both, A only, B only)
        for (ta, tb, layout) in (0..16).map(|i| (i & 1 == 1, i & 2 == 2, i >> 2)) {
            let sa = if ta { [k, m] } else { [m, k] };
            let sb = if tb { [n, k] } else { [k, n] };
            let (ab, bb) = [(false, false), (true, true), (true, false), (false, true)][layout];
            let with = |batched: bool, s: [usize; 2]| if batched { vec![bt, s[0], s[1]] } else { s.to_vec() };
            let (sa, sb) = (with(ab, sa), with(bb, sb));
            let ins = [hf(rand_vec(numel(&sa), -1.0, 1.0, seed), &sa), hf(rand_vec(numel(&sb), -1.0, 1.0, seed ^ 1), &sb)];
            gradcheck_all(&format!("matmul_t {sa:?} {sb:?} {ta} {tb}"), |a| a[0].matmul_t(&a[1], ta, tb), &ins);
            if !ta && !tb {
                gradcheck_all("matmul", |a| a[0].matmul(&a[1]), &ins);
            }
        }
    }

    #[test]
    fn shape_ops(shape in prop::collection::vec(small_dim(), 2..=3), seed in any::<u64>(),
                 pads in prop::collection::vec((0usize..3, 0usize..3), 3), start in 0usize..8, len in 0usize..8) {
        let r = shape.len();
        let n = numel(&shape);
        let x = [hf(rand_vec(n, -2.0, 2.0, seed), &shape)];
        let rev: Vec<usize> = shape.iter().rev().cloned().collect();
        gradcheck_all("reshape", |a| a[0].reshape(&rev), &x);
        gradcheck_all("flatten", |a| a[0].flatten(1), &x);
        let perm: Vec<usize> = (0..r).rev().collect();
        gradcheck_all("permute", |a| a[0].permute(&perm), &x);
        gradcheck_all("transpose", |a| a[0].transpose(0, -1), &x);
        gradcheck_all("pad", |a| a[0].pad(&pads[..r], 0.5), &x);
        let s = start % shape[r - 1];
        let l = len % (shape[r - 1] - s) + 1;
        gradcheck_all("narrow", |a| a[0].narrow(r - 1, s, l), &x);
        // broadcast_to: [d0, 1, d2..] → [3, d0, 4, d2..]
        let mut src = shape.clone();
        src[1] = 1;
        let mut target = vec![3];
        target.extend(&src);
        target[2] = 4;
        let xs = [hf(rand_vec(numel(&src), -2.0, 2.0, seed), &src)];
        gradcheck_all("broadcast_to", |a| a[0].broadcast_to(&target), &xs);
    }

    #[test]
    fn embedding(v in small_dim(), d in small_dim(), idx_shape in prop::collection::vec(small_dim(), 1..=2), seed in any::<u64>()) {
        let idx = rand_idx(numel(&idx_shape), v, seed ^ 9);
        let ins = [hf(rand_vec(v * d, -1.0, 1.0, seed), &[v, d]), hi(idx, &idx_shape)];
        gradcheck_all("embedding", |a| a[0].embedding(&a[1]), &ins);
    }

    #[test]
    fn softmax_family(shape in small_shape(), n in small_dim(), c in small_dim(), seed in any::<u64>()) {
        let x = [hf(rand_vec(numel(&shape), -3.0, 3.0, seed), &shape)];
        gradcheck_all("softmax", |a| a[0].softmax(), &x);
        gradcheck_all("log_softmax", |a| a[0].log_softmax(), &x);
        let logits = rand_vec(n * c, -3.0, 3.0, seed ^ 2);
        let targets = rand_idx(n, c, seed ^ 3);
        gradcheck_all("cross_entropy", |a| a[0].cross_entropy(&a[1]),
                      &[hf(logits.clone(), &[n, c]), hi(targets.clone(), &[n])]);
        // targets captured by the closure instead of passed as an input
        for dev in devices() {
            let tg = ti(&targets, &[n], dev);
            gradcheck(|a: &[Tensor]| a[0].cross_entropy(&tg), &[t(&logits, &[n, c], dev)], GradcheckOptions::default())
                .unwrap_or_else(|e| panic!("cross_entropy (captured targets) on {dev}: {e}"));
        }
        let y = rand_vec(numel(&shape), -2.0, 2.0, seed ^ 4);
        gradcheck_all("mse", |a| a[0].mse(&a[1]), &[x[0].clone(), hf(y, &shape)]);
    }
}

#[test]
fn composite_graph() {
    // A small MLP-like graph: every op composes and the shared weight gets both gradients.
    let ins = [
        hf(rand_vec(5 * 4, -1.0, 1.0, 1), &[5, 4]),
        hf(rand_vec(3 * 4, -1.0, 1.0, 2), &[3, 4]),
        hf(rand_vec(3, -1.0, 1.0, 3), &[3]),
        hi(vec![0, 1, 2, 1, 0], &[5]),
    ];
    gradcheck_all(
        "mlp",
        |a| {
            let h = a[0].matmul_t(&a[1], false, true)?.add(&a[2])?.gelu()?;
            let h2 = h.matmul(&a[1])?.tanh()?.matmul_t(&a[1], false, true)?;
            h2.add(&h)?.cross_entropy(&a[3])
        },
        &ins,
    );
}

#[test]
fn composite_shape_chains() {
    let x = rand_vec(20, -1.0, 1.0, 4);
    let w = hf(rand_vec(12, -1.0, 1.0, 5), &[3, 4]);
    gradcheck_all(
        "reshape/transpose/pad/max_dim/sigmoid",
        |a| {
            a[0].reshape(&[2, 10])?
                .transpose(0, 1)?
                .pad(&[(1, 2), (0, 1)], 0.5)?
                .max_dim(1, false)?
                .sigmoid()
        },
        &[hf(rand_distinct(20, 0.05, 6), &[5, 4])],
    );
    gradcheck_all(
        "broadcast_to/narrow/batched matmul/softmax",
        |a| {
            let b = a[1]
                .reshape(&[1, 3, 4])?
                .broadcast_to(&[4, 3, 4])?
                .transpose(1, 2)?
                .narrow(1, 0, 1)?;
            a[0].reshape(&[4, 5, 1])?.matmul(&b)?.softmax()
        },
        &[hf(x.clone(), &[5, 4]), w],
    );
    gradcheck_all(
        "div/exp/mean_dim/sqrt",
        |a| a[0].exp()?.div(&a[1].exp()?)?.mean_dim(0, true)?.sqrt(),
        &[hf(x, &[5, 4]), hf(rand_vec(4, -1.0, 1.0, 7), &[4])],
    );
}

#[test]
fn to_device_is_differentiable() {
    // gradient flows back across devices through to(); only meaningful with a GPU.
    for dev in devices() {
        let x = t(&rand_vec(6, -1.0, 1.0, 5), &[2, 3], camel_core::Device::Cpu);
        gradcheck(
            |a: &[Tensor]| a[0].to(dev)?.square()?.to(camel_core::Device::Cpu),
            &[x],
            GradcheckOptions::default(),
        )
        .unwrap_or_else(|e| panic!("to({dev}): {e}"));
    }
}

/// A function whose value is `x` but whose recorded gradient is −1 (no public route adds a
/// custom op, so the wrong backward is built from detach): gradcheck must reject it.
#[test]
fn gradcheck_rejects_wrong_backward() {
    for dev in devices() {
        let x = t(&rand_vec(7, -1.0, 1.0, 8), &[7], dev);
        // value 2x − x = x, gradient −1 (the detached 2x carries none)
        let flipped = |a: &[Tensor]| a[0].detach().mul_scalar(2.0)?.sub(&a[0]);
        let err = gradcheck(
            flipped,
            std::slice::from_ref(&x),
            GradcheckOptions::default(),
        )
        .unwrap_err();
        assert!(matches!(err, Error::Autograd(_)), "{err}");
        assert!(err.to_string().contains("gradcheck failed"), "{err}");
        // value x², gradient x (half the true 2x): a hidden non-differentiated dependency
        let half = |a: &[Tensor]| a[0].mul(&a[0].detach());
        let xa = t(&rand_away(7, 0.5, 2.0, 9), &[7], dev);
        let err = gradcheck(half, &[xa], GradcheckOptions::default()).unwrap_err();
        assert!(err.to_string().contains("gradcheck failed"), "{err}");
        // the same values with the true graph pass
        let worst = gradcheck(
            |a: &[Tensor]| a[0].mul(&a[0]),
            &[x],
            GradcheckOptions::default(),
        )
        .unwrap();
        assert!(worst < 5e-3, "worst mismatch {worst}");
    }
}

//! Forward of the elementwise ops against plain-f64 references: binary ops with broadcasting,
//! unary functions, scalar ops. Tolerance `ELEM`: |got − ref| ≤ 1e-5 + 1e-4·|ref|.

mod common;
use camel_core::{Result, Tensor};
use common::*;
use proptest::prelude::*;

/// NumPy broadcasting, written out: returns the output shape and `f(a[..], b[..])` per element.
fn ref_broadcast(
    a: &[f32],
    sa: &[usize],
    b: &[f32],
    sb: &[usize],
    f: impl Fn(f64, f64) -> f64,
) -> (Vec<usize>, Vec<f64>) {
    let n = sa.len().max(sb.len());
    let pad = |s: &[usize]| {
        let mut p = vec![1; n - s.len()];
        p.extend_from_slice(s);
        p
    };
    let (pa, pb) = (pad(sa), pad(sb));
    let mut out_shape = Vec::new();
    for d in 0..n {
        assert!(
            pa[d] == pb[d] || pa[d] == 1 || pb[d] == 1,
            "test shapes must broadcast"
        );
        out_shape.push(pa[d].max(pb[d]));
    }
    let mut out = Vec::new();
    for i in 0..numel(&out_shape) {
        let idx = unravel(i, &out_shape);
        let ia: Vec<usize> = idx.iter().zip(&pa).map(|(&x, &s)| x % s).collect();
        let ib: Vec<usize> = idx.iter().zip(&pb).map(|(&x, &s)| x % s).collect();
        out.push(f(a[ravel(&ia, &pa)] as f64, b[ravel(&ib, &pb)] as f64));
    }
    (out_shape, out)
}

type BinFn = fn(&Tensor, &Tensor) -> Result<Tensor>;
type RefBin = fn(f64, f64) -> f64;

fn binary_ops() -> Vec<(&'static str, BinFn, RefBin)> {
    vec![
        ("add", Tensor::add, |a, b| a + b),
        ("sub", Tensor::sub, |a, b| a - b),
        ("mul", Tensor::mul, |a, b| a * b),
        ("div", Tensor::div, |a, b| a / b),
    ]
}

/// All four binary ops on `a` (shape `sa`) and `b` (shape `sb`); `b` stays away from 0 for div.
fn check_binary(sa: &[usize], sb: &[usize], seed: u64) {
    let a = rand_vec(numel(sa), -3.0, 3.0, seed);
    let b = rand_away(numel(sb), 0.25, 3.0, seed ^ 0x9e37);
    for (name, op, r) in binary_ops() {
        let (shape, want) = ref_broadcast(&a, sa, &b, sb, r);
        check(&format!("{name} {sa:?} {sb:?}"), &shape, &want, ELEM, |d| {
            op(&t(&a, sa, d), &t(&b, sb, d))
        });
    }
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn binary_same_shape(shape in awkward_shape(), seed in any::<u64>()) {
        check_binary(&shape, &shape, seed);
    }

    #[test]
    fn binary_bias_over_rows(n in dim(), m in dim(), seed in any::<u64>()) {
        check_binary(&[n, m], &[m], seed); // [n,m] + [m]
        check_binary(&[m], &[n, m], seed); // broadcast on the left
        check_binary(&[n, m], &[1, m], seed);
    }

    #[test]
    fn binary_column(n in dim(), m in dim(), seed in any::<u64>()) {
        check_binary(&[n, m], &[n, 1], seed); // [n,m] + [n,1]
        check_binary(&[n, 1], &[n, m], seed);
        check_binary(&[n, 1], &[1, m], seed); // outer
    }

    #[test]
    fn binary_positional(b in dim(), tt in dim(), d in dim(), seed in any::<u64>()) {
        check_binary(&[b, tt, d], &[tt, d], seed); // [b,t,d] + [t,d]
        check_binary(&[b, tt, d], &[b, 1, d], seed);
        check_binary(&[b, tt, d], &[1], seed); // scalar-like
        check_binary(&[b, tt, d], &[], seed); // rank-0
    }

    #[test]
    fn unary_ops(shape in awkward_shape(), seed in any::<u64>(), s in -3.0f32..3.0) {
        let n = numel(&shape);
        let x = rand_vec(n, -5.0, 5.0, seed);
        let pos = rand_vec(n, 0.05, 20.0, seed ^ 1);
        type UFn = Box<dyn Fn(&Tensor) -> Result<Tensor>>;
        type RefFn = Box<dyn Fn(f64) -> f64>;
        let gelu = |x: f64| {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
        };
        let cases: Vec<(&str, &[f32], UFn, RefFn)> = vec![
            ("neg", &x, Box::new(|t| t.neg()), Box::new(|x| -x)),
            ("add_scalar", &x, Box::new(move |t| t.add_scalar(s)), Box::new(move |x| x + s as f64)),
            ("mul_scalar", &x, Box::new(move |t| t.mul_scalar(s)), Box::new(move |x| x * s as f64)),
            ("square", &x, Box::new(|t| t.square()), Box::new(|x| x * x)),
            ("sqrt", &pos, Box::new(|t| t.sqrt()), Box::new(|x| x.sqrt())),
            ("relu", &x, Box::new(|t| t.relu()), Box::new(|x| x.max(0.0))),
            ("sigmoid", &x, Box::new(|t| t.sigmoid()), Box::new(|x| 1.0 / (1.0 + (-x).exp()))),
            ("tanh", &x, Box::new(|t| t.tanh()), Box::new(|x| x.tanh())),
            ("gelu", &x, Box::new(|t| t.gelu()), Box::new(gelu)),
            ("exp", &x, Box::new(|t| t.exp()), Box::new(|x| x.exp())),
            ("log", &pos, Box::new(|t| t.log()), Box::new(|x| x.ln())),
        ];
        for (name, input, op, r) in cases {
            let want: Vec<f64> = input.iter().map(|&v| r(v as f64)).collect();
            check(&format!("{name} {shape:?}"), &shape, &want, ELEM, |d| op(&t(input, &shape, d)));
        }
    }

    #[test]
    fn pow_scalar(shape in awkward_shape(), seed in any::<u64>(),
                  p in prop::sample::select(vec![-2.0f32, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 1.7])) {
        let x = rand_vec(numel(&shape), 0.1, 4.0, seed);
        let want: Vec<f64> = x.iter().map(|&v| (v as f64).powf(p as f64)).collect();
        check(&format!("pow_scalar({p}) {shape:?}"), &shape, &want, ELEM, |d| {
            t(&x, &shape, d).pow_scalar(p)
        });
    }
}

#[test]
fn unary_special_values() {
    // Values where a naive formula overflows or loses the sign.
    let x = [-100.0f32, -20.0, -1e-3, 0.0, 1e-3, 20.0, 100.0];
    let sig: Vec<f64> = x
        .iter()
        .map(|&v| 1.0 / (1.0 + (-(v as f64)).exp()))
        .collect();
    check("sigmoid extremes", &[7], &sig, ELEM, |d| {
        t(&x, &[7], d).sigmoid()
    });
    let th: Vec<f64> = x.iter().map(|&v| (v as f64).tanh()).collect();
    check("tanh extremes", &[7], &th, ELEM, |d| t(&x, &[7], d).tanh());
    let relu: Vec<f64> = x.iter().map(|&v| (v as f64).max(0.0)).collect();
    check("relu extremes", &[7], &relu, EXACT, |d| {
        t(&x, &[7], d).relu()
    });
    // negative power of a negative base with an integer exponent
    check("pow_scalar(2) of negatives", &[2], &[4.0, 9.0], ELEM, |d| {
        t(&[-2.0, 3.0], &[2], d).pow_scalar(2.0)
    });
}

#[test]
fn scalar_shape_ops() {
    // Rank-0 tensors go through every elementwise op.
    check("rank-0 add", &[], &[5.0], EXACT, |d| {
        t(&[2.0], &[], d).add(&t(&[3.0], &[], d))
    });
    check("rank-0 exp", &[], &[1.0f64.exp()], ELEM, |d| {
        t(&[1.0], &[], d).exp()
    });
}

//! No panic through the public `Tensor` API: random shapes (0, small, and sizes up to
//! `usize::MAX`), dims (negative, out of range), indices, ranges and scalars (0, `usize::MAX`,
//! negative, NaN, inf) go to every constructor and op, on every device; each call returns `Ok` or
//! `Err` and never panics.
//!
//! Huge dims are chosen so that any non-empty shape holding one has at least 2^61 elements: its
//! bytes exceed what an allocation can ask for, so the test never allocates large memory; a shape
//! with a 0 dim is empty whatever its other dims.

mod common;
use camel_core::{Activation, Conv2dOptions, DType, Device, Tensor, UpdateRule};
use common::devices;
use proptest::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f` and fails the test, naming `what`, if it panics; its result is discarded (`Ok` and
/// `Err` both pass).
fn no_panic<R>(what: &str, f: impl FnOnce() -> R) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        panic!("{what} panicked");
    }
}

/// Runs `f` on every device, naming the device and `what` on a panic.
fn each_device(what: &str, f: impl Fn(Device)) {
    for d in devices() {
        no_panic(&format!("{what} on {d}"), || f(d));
    }
}

fn any_dim() -> impl Strategy<Value = usize> {
    prop::sample::select(vec![0usize, 1, 2, 3, 7, 1 << 61, 1 << 62, usize::MAX])
}

fn small_dim() -> impl Strategy<Value = usize> {
    prop::sample::select(vec![0usize, 1, 2, 3])
}

fn any_shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(any_dim(), 0..=4)
}

fn small_shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(small_dim(), 0..=3)
}

fn any_usize() -> impl Strategy<Value = usize> {
    prop::sample::select(vec![
        0usize,
        1,
        2,
        3,
        4,
        1 << 62,
        usize::MAX - 1,
        usize::MAX,
    ])
}

fn any_isize() -> impl Strategy<Value = isize> {
    prop::sample::select(vec![
        0isize,
        1,
        2,
        3,
        4,
        -1,
        -2,
        -4,
        -5,
        isize::MAX,
        isize::MIN,
    ])
}

fn any_i64() -> impl Strategy<Value = i64> {
    prop::sample::select(vec![0i64, 1, 2, 3, -1, 1 << 40, i64::MAX, i64::MIN])
}

fn any_f32() -> impl Strategy<Value = f32> {
    prop::sample::select(vec![
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        0.5,
        3.0,
        1e-30,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
    ])
}

/// A small f32 tensor of `shape` (at most 27 elements) whose values cycle through `vals`.
fn f32_tensor(shape: &[usize], vals: &[f32], d: Device) -> Option<Tensor> {
    let n: usize = shape.iter().product();
    let data = vals.iter().copied().cycle().take(n).collect();
    Tensor::from_vec(data, shape, d).ok()
}

/// A small i64 tensor of `shape` whose values cycle through `vals`.
fn i64_tensor(shape: &[usize], vals: &[i64], d: Device) -> Option<Tensor> {
    let n: usize = shape.iter().product();
    let data = vals.iter().copied().cycle().take(n).collect();
    Tensor::from_vec_i64(data, shape, d).ok()
}

/// One differentiable op applied to a tensor.
type Step<'a> = Box<dyn Fn(&Tensor) -> camel_core::Result<Tensor> + 'a>;

fn cfg() -> ProptestConfig {
    ProptestConfig::with_cases(48)
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn constructors(
        shape in any_shape(),
        len in 0usize..5,
        a in any_f32(),
        b in any_f32(),
        c in any_f32(),
        seed in any::<u64>(),
    ) {
        each_device("constructors", |d| {
            let _ = Tensor::zeros(&shape, d);
            let _ = Tensor::ones(&shape, d);
            let _ = Tensor::full(&shape, a, d);
            let _ = Tensor::randn_seeded(&shape, seed, d);
            let _ = Tensor::randn(&shape, d);
            // any bounds: lo ≥ hi, NaN and infinite widths are errors
            let _ = Tensor::rand_seeded(&shape, a, b, seed, d);
            let _ = Tensor::rand(&shape, b, c, d);
            let _ = Tensor::arange_f32(a, b, c, d);
            let _ = Tensor::arange(seed as i64, (seed >> 7) as i64 - len as i64, (seed >> 3) as i64, d);
            let _ = Tensor::arange(i64::MIN, i64::MAX, len as i64, d);
            let _ = Tensor::from_vec(vec![a; len], &shape, d);
            let _ = Tensor::from_vec_i64(vec![7; len], &shape, d);
            // a device that is not there
            let _ = Tensor::zeros(&shape, Device::Cuda(7));
            let _ = Tensor::from_vec(vec![a; len], &shape, Device::Cuda(usize::MAX));
            if let Ok(t) = Tensor::zeros(&shape, d) {
                let _ = t.to(Device::Cuda(7));
                let _ = t.zeros_like();
                let _ = t.ones_like();
                let _ = t.to_vec();
                let _ = t.item();
            }
        });
    }

    #[test]
    fn one_tensor_ops(
        shape in small_shape(),
        vals in prop::collection::vec(any_f32(), 1..6),
        target in any_shape(),
        dims in prop::collection::vec(any_isize(), 2),
        us in prop::collection::vec(any_usize(), 3),
        sizes in prop::collection::vec(any_usize(), 0..4),
        s in any_f32(),
        keep in any::<bool>(),
    ) {
        each_device("one-tensor ops", |d| {
            let Some(x) = f32_tensor(&shape, &vals, d) else { return };
            let (d0, d1) = (dims[0], dims[1]);
            let results: Vec<camel_core::Result<Tensor>> = vec![
                x.neg(), x.relu(), x.sigmoid(), x.tanh(), x.gelu(), x.exp(), x.log(),
                x.sqrt(), x.square(), x.add_scalar(s), x.mul_scalar(s), x.pow_scalar(s),
                x.sum(), x.mean(), x.max(), x.argmax_last(),
                x.sum_dim(d0, keep), x.mean_dim(d0, keep), x.max_dim(d0, keep),
                x.softmax(), x.log_softmax(),
                x.min(), x.argmin_last(), x.min_dim(d0, keep), x.abs(), x.clamp(s, vals[0]),
                x.triu(d0 as i64), x.tril(d1 as i64), x.eq_scalar(s), x.ne_scalar(s),
                x.lt_scalar(s), x.le_scalar(s), x.gt_scalar(s), x.ge_scalar(s),
                x.sum_dims(&dims, keep), x.mean_dims(&dims, keep), x.var_dims(&dims, us[0], keep),
                x.reshape(&target), x.flatten(us[0]), x.contiguous(),
                x.permute(&us), x.permute(&sizes), x.transpose(d0, d1),
                x.narrow(us[0], us[1], us[2]),
                x.unsqueeze(d0), x.squeeze(d0),
                x.broadcast_to(&target), x.expand(&target), x.sum_to(&target),
                x.pad(&sizes.iter().map(|&p| (p, us[1])).collect::<Vec<_>>(), s),
                x.to_dtype(DType::I64), x.to_dtype(DType::F32),
                x.zeros_like(), x.to(Device::Cpu),
                Tensor::cat(&[&x, &x], d0), Tensor::stack(&[&x, &x], d0),
            ];
            for r in results.into_iter().flatten() {
                // read each result back: a deferred device error surfaces here as an Err
                let _ = r.to_vec();
                let _ = r.item();
            }
            let _ = x.split(us[0], d0);
            let _ = x.split_sizes(&sizes, d0);
            let _ = x.chunk(us[0], d0);
            let _ = x.dim(d0);
            let _ = x.to_vec_i64();
            let _ = x.to_ndarray();
            // a view of huge size is free; reading or computing with it is an error
            if let Ok(big) = x.broadcast_to(&target) {
                let _ = big.relu();
                let _ = big.sum();
                let _ = big.to_vec();
            }
        });
    }

    #[test]
    fn two_tensor_ops(
        sa in small_shape(),
        sb in small_shape(),
        va in prop::collection::vec(any_f32(), 1..4),
        vb in prop::collection::vec(any_f32(), 1..4),
        idx in prop::collection::vec(any_i64(), 1..4),
        dim in any_isize(),
        eps in any_f32(),
        ta in any::<bool>(),
        tb in any::<bool>(),
    ) {
        each_device("two-tensor ops", |d| {
            let (Some(a), Some(b)) = (f32_tensor(&sa, &va, d), f32_tensor(&sb, &vb, d)) else {
                return;
            };
            let ib = i64_tensor(&sb, &idx, d);
            let mut results: Vec<camel_core::Result<Tensor>> = vec![
                a.add(&b), a.sub(&b), a.mul(&b), a.div(&b), a.eq_mask(&b), a.mse(&b),
                a.matmul(&b), a.matmul_t(&b, ta, tb),
                a.linear(&b, None, Activation::Relu),
                a.linear(&b, Some(&a), Activation::Gelu),
                a.linear(&b, Some(&b), Activation::Identity),
                a.layer_norm(&b, &b, eps),
                Tensor::cat(&[&a, &b], dim), Tensor::stack(&[&a, &b], dim),
                a.sum_to(b.shape()), a.broadcast_to(b.shape()),
                a.eq(&b), a.ne(&b), a.lt(&b), a.le(&b), a.gt(&b), a.ge(&b),
                a.minimum(&b), a.maximum(&b), a.where_cond(&a, &b), b.where_cond(&a, &a),
                a.masked_fill(&b, eps),
            ];
            if let Some(ib) = &ib {
                results.push(a.cross_entropy(ib));
                results.push(a.embedding(ib));
                results.push(a.add(ib));
                results.push(ib.relu());
                results.push(ib.argmax_last());
                results.push(ib.argmin_last());
                results.push(a.where_cond(ib, &a));
                results.push(a.masked_fill(ib, eps));
                results.push(ib.lt(&a));
                results.push(Tensor::cat(&[&a, ib], dim));
            }
            for r in results.into_iter().flatten() {
                let _ = r.to_vec();
            }
            let _ = a.copy_from(&b);
            let state = b.zeros_like().ok();
            let states: Vec<&Tensor> = state.iter().collect();
            let _ = a.apply_update(&b, &states, &UpdateRule::Sgd { lr: eps, momentum: eps, weight_decay: 0.0 });
            let adam = UpdateRule::Adam {
                lr: eps,
                beta1: eps,
                beta2: eps,
                eps,
                weight_decay: eps,
                decoupled: ta,
                bc1: eps,
                bc2: 0.0,
            };
            let two = [a.clone(), b.clone()];
            let _ = Tensor::apply_updates(&two, &two, &[vec![], vec![b.clone()]], &[adam, adam]);
            let _ = Tensor::apply_updates(&two[..1], &two[1..], &[vec![a.clone(), b.clone()]], &[adam]);
            let _ = Tensor::apply_updates(&two, &two[..1], &[], &[adam]);
            let _ = a.backward_with(&b);
            let _ = a.backward();
        });
    }

    #[test]
    fn autograd_through_random_ops(
        shape in small_shape(),
        vals in prop::collection::vec(any_f32(), 1..6),
        dim in any_isize(),
        s in any_f32(),
    ) {
        each_device("autograd", |d| {
            let Some(x) = f32_tensor(&shape, &vals, d) else { return };
            let Ok(x) = x.requires_grad_(true) else { return };
            let steps: Vec<Step> = vec![
                Box::new(|t| t.relu()),
                Box::new(|t| t.softmax()),
                Box::new(|t| t.max_dim(dim, false)),
                Box::new(|t| t.mean_dim(dim, true)),
                Box::new(|t| t.mul_scalar(s)),
                Box::new(|t| t.pow_scalar(s)),
                Box::new(|t| t.transpose(0, dim)),
                Box::new(|t| t.narrow(0, 0, 1)),
                Box::new(|t| t.unsqueeze(dim)),
            ];
            for f in &steps {
                if let Ok(y) = f(&x) {
                    if let Ok(l) = y.sum() {
                        let _ = l.backward();
                    }
                    let _ = y.backward();
                }
            }
            let _ = x.grad().map(|g| g.to_vec());
            x.zero_grad();
        });
    }

    #[test]
    fn layer_and_random_ops(
        sx in prop::collection::vec(small_dim(), 0..=5),
        sw in prop::collection::vec(small_dim(), 0..=5),
        vals in prop::collection::vec(any_f32(), 1..6),
        us in prop::collection::vec(any_usize(), 6),
        p in any_f32(),
        flags in prop::collection::vec(any::<bool>(), 2),
    ) {
        each_device("layer and random ops", |d| {
            let (Some(x), Some(w)) = (f32_tensor(&sx, &vals, d), f32_tensor(&sw, &vals, d)) else {
                return;
            };
            let pair = |i: usize| (us[i], us[(i + 1) % us.len()]);
            let opts = Conv2dOptions {
                stride: pair(0),
                padding: pair(2),
                dilation: pair(4),
                groups: us[1],
            };
            let small = Conv2dOptions {
                stride: (1 + us[0] % 2, 1),
                padding: (us[2] % 3, us[3] % 3),
                ..Default::default()
            };
            let mut results: Vec<camel_core::Result<Tensor>> = vec![
                x.dropout(p, flags[0]), x.bernoulli(), x.multinomial(us[0], flags[1]),
                x.multinomial(us[1] % 4, flags[1]),
                x.filter2d(&w), x.filter2d_separable(&w, &x),
                x.conv2d(&w, None, opts), x.conv2d(&w, Some(&x), small),
                x.conv2d_relu(&w, Some(&w), small),
                x.max_pool2d(pair(0), pair(1), pair(2)),
                x.max_pool2d((1 + us[0] % 3, 2), (1, 1 + us[1] % 2), (us[2] % 2, 0)),
                x.avg_pool2d(pair(3), pair(4), pair(5), flags[0]),
                x.avg_pool2d((2, 2), (1, 1), (1, 1), flags[1]),
                x.adaptive_avg_pool2d_1x1(),
                x.scaled_masked_softmax(p, flags[0]),
                Tensor::bernoulli_full(&sx, p, d), Tensor::rand(&sx, p, 1.0, d),
            ];
            if let Ok((y, m, v)) = x.batch_norm(Some(&w), None, p) {
                results.extend([Ok(y), Ok(m), Ok(v)]);
            }
            let _ = x.batch_norm(None, Some(&x), 1e-5);
            for r in results.into_iter().flatten() {
                let _ = r.to_vec();
                if let Ok(l) = r.sum() {
                    let _ = l.backward();
                }
            }
        });
    }
}

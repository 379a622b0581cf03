//! The autocast scope: matrix products in f16/bf16 on f32 master weights, the f32 ops widened,
//! binary ops promoted, and nothing changed outside a scope or in a backward pass.

mod common;
use camel_core::{autocast, autocast_dtype, autocast_guard, Activation, DType, Error, Tensor};
use common::{devices, rand_vec};

fn leaf(n: &[usize], seed: u64, dev: camel_core::Device) -> Tensor {
    let len = n.iter().product();
    Tensor::from_vec(rand_vec(len, -1.0, 1.0, seed), n, dev)
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

/// Inside the scope, `linear` and `matmul` give what explicit casts give, bit for bit, and the
/// f32 parameters get f32 gradients equal to the explicit casts' gradients.
#[test]
fn matrix_products_run_in_the_scope_dtype_on_master_weights() {
    for dev in devices() {
        for dtype in [DType::BF16, DType::F16] {
            let x = leaf(&[7, 33], 1, dev);
            let w = leaf(&[19, 33], 2, dev);
            let b = leaf(&[19], 3, dev);
            let y = autocast(dtype, || x.linear(&w, Some(&b), Activation::Relu))
                .unwrap()
                .unwrap();
            assert_eq!(y.dtype(), dtype, "{dev} linear");
            let m = autocast(dtype, || x.matmul_t(&w, false, true))
                .unwrap()
                .unwrap();
            assert_eq!(m.dtype(), dtype, "{dev} matmul");
            let loss = y.to_dtype(DType::F32).unwrap().sum().unwrap();
            loss.backward().unwrap();
            // the same with explicit casts, on fresh leaves holding the same values
            let (x2, w2, b2) = (
                leaf(&[7, 33], 1, dev),
                leaf(&[19, 33], 2, dev),
                leaf(&[19], 3, dev),
            );
            let c = |t: &Tensor| t.to_dtype(dtype).unwrap();
            let y2 = c(&x2)
                .linear(&c(&w2), Some(&c(&b2)), Activation::Relu)
                .unwrap();
            assert_eq!(
                y.to_vec().unwrap(),
                y2.to_vec().unwrap(),
                "{dev} {dtype} values"
            );
            y2.to_dtype(DType::F32)
                .unwrap()
                .sum()
                .unwrap()
                .backward()
                .unwrap();
            for (name, a, e) in [("x", &x, &x2), ("w", &w, &w2), ("b", &b, &b2)] {
                let (ga, ge) = (a.grad().unwrap(), e.grad().unwrap());
                assert_eq!(
                    ga.dtype(),
                    DType::F32,
                    "{dev} {dtype} d{name} is a master gradient"
                );
                assert_eq!(
                    ga.to_vec().unwrap(),
                    ge.to_vec().unwrap(),
                    "{dev} {dtype} d{name}"
                );
            }
        }
    }
}

/// Sums, softmax, layer norm and the losses widen a 16-bit input and stay f32 in the scope;
/// max keeps its input's dtype; f32 inputs are untouched.
#[test]
fn precision_sensitive_ops_return_f32_in_the_scope() {
    for dev in devices() {
        let h = Tensor::from_vec(rand_vec(24, -2.0, 2.0, 4), &[4, 6], dev)
            .unwrap()
            .to_dtype(DType::BF16)
            .unwrap();
        let t = Tensor::from_vec_i64(vec![0, 5, 2, 3], &[4], dev).unwrap();
        let g = Tensor::ones(&[6], dev).unwrap();
        let z = Tensor::zeros(&[6], dev).unwrap();
        let _scope = autocast_guard(Some(DType::BF16)).unwrap();
        assert_eq!(autocast_dtype(), Some(DType::BF16));
        let outs = [
            ("sum", h.sum().unwrap()),
            ("mean_dim", h.mean_dim(1, false).unwrap()),
            ("var_dims", h.var_dims(&[1], 1, false).unwrap()),
            ("softmax", h.softmax().unwrap()),
            ("log_softmax", h.log_softmax().unwrap()),
            (
                "scaled_masked_softmax",
                h.scaled_masked_softmax(0.5, true).unwrap(),
            ),
            // f32 gamma and beta with a 16-bit input: widened, not refused
            ("layer_norm", h.layer_norm(&g, &z, 1e-5).unwrap()),
            ("cross_entropy", h.cross_entropy(&t).unwrap()),
            ("mse", h.mse(&h).unwrap()),
        ];
        for (name, y) in outs {
            assert_eq!(y.dtype(), DType::F32, "{dev} {name}");
        }
        assert_eq!(
            h.max().unwrap().dtype(),
            DType::BF16,
            "{dev} max keeps its dtype"
        );
        assert_eq!(
            h.relu().unwrap().dtype(),
            DType::BF16,
            "{dev} relu keeps its dtype"
        );
        let f = h.to_dtype(DType::F32).unwrap();
        assert_eq!(f.softmax().unwrap().dtype(), DType::F32);
    }
}

/// A binary op of an f32 and a 16-bit operand widens the 16-bit one in the scope (a residual
/// stream in f32 plus a bf16 branch) and is a dtype error outside it; gradients reach each
/// operand in its own dtype.
#[test]
fn binary_ops_promote_in_the_scope_only() {
    for dev in devices() {
        let a = leaf(&[3, 5], 5, dev);
        let hb = Tensor::from_vec(rand_vec(15, -1.0, 1.0, 6), &[3, 5], dev)
            .unwrap()
            .to_dtype(DType::BF16)
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        for (name, r) in [
            ("add", a.add(&hb)),
            ("mul", hb.mul(&a)),
            ("maximum", a.maximum(&hb)),
        ] {
            match r {
                Err(Error::DTypeMismatch { op, .. }) => assert_eq!(op, name),
                other => panic!("{dev} {name} outside a scope: {other:?}"),
            }
        }
        let y = autocast(DType::BF16, || {
            a.add(&hb)?
                .sub(&hb)?
                .mul(&hb)?
                .div(&a.add_scalar(3.0)?)?
                .maximum(&hb)
        })
        .unwrap()
        .unwrap();
        assert_eq!(y.dtype(), DType::F32);
        let want = {
            let (av, hv) = (a.to_vec().unwrap(), hb.to_vec().unwrap());
            av.iter()
                .zip(&hv)
                .map(|(&x, &h)| ((x + h - h) * h / (x + 3.0)).max(h))
                .collect::<Vec<_>>()
        };
        assert_eq!(y.to_vec().unwrap(), want, "{dev} promoted values");
        y.sum().unwrap().backward().unwrap();
        assert_eq!(a.grad().unwrap().dtype(), DType::F32);
        assert_eq!(hb.grad().unwrap().dtype(), DType::BF16);
    }
}

/// Only f16 and bf16 are scope dtypes; scopes nest and restore; a backward pass run inside a
/// scope runs each op in the dtypes its forward chose.
#[test]
fn scopes_nest_refuse_other_dtypes_and_leave_backward_alone() {
    for d in [DType::F32, DType::I64] {
        let err = autocast(d, || ()).unwrap_err().to_string();
        assert!(err.contains("autocast") && err.contains("bf16"), "{err}");
    }
    assert_eq!(autocast_dtype(), None);
    autocast(DType::F16, || {
        assert_eq!(autocast_dtype(), Some(DType::F16));
        autocast(DType::BF16, || {
            assert_eq!(autocast_dtype(), Some(DType::BF16))
        })
        .unwrap();
        assert_eq!(autocast_dtype(), Some(DType::F16));
        let _off = autocast_guard(None).unwrap();
        assert_eq!(autocast_dtype(), None);
    })
    .unwrap();
    assert_eq!(autocast_dtype(), None);
    for dev in devices() {
        let x = leaf(&[4, 8], 7, dev);
        let w = leaf(&[3, 8], 8, dev);
        let b = leaf(&[3], 9, dev);
        autocast(DType::BF16, || -> camel_core::Result<()> {
            let y = x.linear(&w, Some(&b), Activation::Gelu)?;
            // the bias gradient sums a bf16 gradient: inside the scope it would turn f32 and no
            // longer match the bf16 bias it belongs to
            y.cross_entropy(&Tensor::from_vec_i64(vec![0, 1, 2, 0], &[4], dev)?)?
                .backward()
        })
        .unwrap()
        .unwrap();
        for t in [&x, &w, &b] {
            assert_eq!(t.grad().unwrap().dtype(), DType::F32, "{dev}");
        }
    }
}

/// An f16 product past f16's largest value (65504) overflows to inf, as the dtype defines, and
/// the loss computed from it is not finite: the overflow shows instead of being hidden. bf16,
/// with f32's range, holds the same product. (camel-optim's `GradScaler` skips a training step
/// whose gradients overflow: `crates/camel-optim/tests/scaler.rs`.)
#[test]
fn an_f16_overflow_shows_in_the_loss_and_bf16_holds_it() {
    for dev in devices() {
        let x = Tensor::full(&[2, 4], 200.0, dev).unwrap();
        let w = Tensor::full(&[3, 4], 100.0, dev).unwrap(); // each product: 4·200·100 = 80000
        let t = Tensor::from_vec_i64(vec![0, 2], &[2], dev).unwrap();
        for (dtype, finite) in [(DType::F16, false), (DType::BF16, true)] {
            let (y, loss) = autocast(dtype, || -> camel_core::Result<_> {
                let y = x.matmul_t(&w, false, true)?;
                let loss = y.cross_entropy(&t)?;
                Ok((y, loss))
            })
            .unwrap()
            .unwrap();
            let yv = y.to_vec().unwrap();
            assert!(
                yv.iter().all(|v| v.is_finite() == finite),
                "{dev} {dtype}: {yv:?}"
            );
            assert_eq!(
                loss.item().unwrap().is_finite(),
                finite,
                "{dev} {dtype} loss"
            );
        }
    }
}

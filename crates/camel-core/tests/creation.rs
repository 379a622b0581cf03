//! Creation and reading: zeros, ones, full, rand, randn, arange, from_vec, from_ndarray /
//! to_ndarray, item, to_vec, to_dtype, to(device).

mod common;
use camel_core::{DType, Device, Error, Tensor};
use common::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn constant_fills(shape in awkward_shape(), v in -100.0f32..100.0) {
        let n = numel(&shape);
        check("zeros", &shape, &vec![0.0; n], EXACT, |d| Tensor::zeros(&shape, d));
        check("ones", &shape, &vec![1.0; n], EXACT, |d| Tensor::ones(&shape, d));
        check("full", &shape, &vec![v as f64; n], EXACT, |d| Tensor::full(&shape, v, d));
        check("zeros_like", &shape, &vec![0.0; n], EXACT, |d| Tensor::full(&shape, v, d)?.zeros_like());
        check("ones_like", &shape, &vec![1.0; n], EXACT, |d| Tensor::full(&shape, v, d)?.ones_like());
    }

    #[test]
    fn from_vec_to_vec_roundtrip(shape in awkward_shape(), seed in any::<u64>()) {
        let x = rand_vec(numel(&shape), -1e3, 1e3, seed);
        for d in devices() {
            let a = t(&x, &shape, d);
            prop_assert_eq!(a.shape(), &shape[..]);
            prop_assert_eq!(a.numel(), x.len());
            prop_assert_eq!(a.rank(), shape.len());
            prop_assert_eq!(a.dtype(), DType::F32);
            prop_assert_eq!(a.device(), d);
            prop_assert_eq!(a.to_vec().unwrap(), x.clone());
            let nd = a.to_ndarray().unwrap();
            prop_assert_eq!(nd.shape(), &shape[..]);
            let back = Tensor::from_ndarray(&nd).to(d).unwrap();
            prop_assert_eq!(back.to_vec().unwrap(), x.clone());
        }
    }

    #[test]
    fn rand_in_range_and_seeded(shape in awkward_shape(), seed in any::<u64>(), lo in -5.0f32..5.0, w in 0.01f32..10.0) {
        let hi = lo + w;
        let reference = Tensor::rand_seeded(&shape, lo, hi, seed, Device::Cpu).unwrap().to_vec().unwrap();
        prop_assert!(reference.iter().all(|&v| v >= lo && v < hi), "rand outside [{lo}, {hi})");
        for d in devices() {
            // same seed → same values on every device
            prop_assert_eq!(Tensor::rand_seeded(&shape, lo, hi, seed, d).unwrap().to_vec().unwrap(), reference.clone());
        }
    }
}

#[test]
fn rand_seeds_differ() {
    let a = Tensor::rand_seeded(&[100], 0.0, 1.0, 1, Device::Cpu)
        .unwrap()
        .to_vec()
        .unwrap();
    let b = Tensor::rand_seeded(&[100], 0.0, 1.0, 2, Device::Cpu)
        .unwrap()
        .to_vec()
        .unwrap();
    assert_ne!(a, b);
}

#[test]
fn randn_seeded_mean_std() {
    let n = 20_011;
    let reference = Tensor::randn_seeded(&[7, n / 7 + 1], 42, Device::Cpu)
        .unwrap()
        .to_vec()
        .unwrap();
    for d in devices() {
        let x = Tensor::randn_seeded(&[7, n / 7 + 1], 42, d).unwrap();
        // the same Philox words on every device; the GPU's logf and sincosf may differ from the
        // CPU's by an ulp or two, so normals agree to a few ulps, not bitwise
        let tol = Tol {
            atol: 1e-6,
            rtol: 1e-6,
        };
        assert_close(
            &format!("randn seeded on {d} vs cpu"),
            &x.to_vec().unwrap(),
            &f64s(&reference),
            tol,
        );
        assert_eq!(
            Tensor::randn_seeded(&[7, n / 7 + 1], 42, d)
                .unwrap()
                .to_vec()
                .unwrap(),
            x.to_vec().unwrap(),
            "randn seeded determinism on {d}"
        );
        assert_ne!(
            Tensor::randn_seeded(&[7, n / 7 + 1], 43, d)
                .unwrap()
                .to_vec()
                .unwrap(),
            reference
        );
    }
    let m = reference.iter().map(|&v| v as f64).sum::<f64>() / reference.len() as f64;
    let var = reference
        .iter()
        .map(|&v| (v as f64 - m).powi(2))
        .sum::<f64>()
        / reference.len() as f64;
    // standard error of the mean is 1/√20000 ≈ 0.007; allow 5σ
    assert!(m.abs() < 0.035, "randn mean {m}");
    assert!((var.sqrt() - 1.0).abs() < 0.03, "randn std {}", var.sqrt());
}

#[test]
fn arange_values() {
    check(
        "arange(0,5,1)",
        &[5],
        &[0.0, 1.0, 2.0, 3.0, 4.0],
        EXACT,
        |d| Tensor::arange_f32(0.0, 5.0, 1.0, d),
    );
    check(
        "arange(1,2,0.25)",
        &[4],
        &[1.0, 1.25, 1.5, 1.75],
        EXACT,
        |d| Tensor::arange_f32(1.0, 2.0, 0.25, d),
    );
    check("arange(3,0,-1)", &[3], &[3.0, 2.0, 1.0], EXACT, |d| {
        Tensor::arange_f32(3.0, 0.0, -1.0, d)
    });
    check("arange(0,5.5,2)", &[3], &[0.0, 2.0, 4.0], EXACT, |d| {
        Tensor::arange_f32(0.0, 5.5, 2.0, d)
    });
    check("arange(2,2,1) is empty", &[0], &[], EXACT, |d| {
        Tensor::arange_f32(2.0, 2.0, 1.0, d)
    });
    let want: Vec<f64> = (0..1031).map(|i| i as f64).collect();
    check("arange(0,1031,1)", &[1031], &want, EXACT, |d| {
        Tensor::arange_f32(0.0, 1031.0, 1.0, d)
    });
    for d in devices() {
        for (s, e, st) in [(0.0, 1.0, 0.0), (0.0, 1.0, -1.0), (0.0, 1.0, f32::NAN)] {
            let err = Tensor::arange_f32(s, e, st, d).unwrap_err();
            assert!(
                matches!(err, Error::InvalidArgument { op: "arange", .. }),
                "{err}"
            );
        }
    }
}

#[test]
fn item_and_scalars() {
    for d in devices() {
        assert_eq!(t(&[3.5], &[], d).item().unwrap(), 3.5);
        assert_eq!(t(&[-2.0], &[1, 1, 1], d).item().unwrap(), -2.0);
        let s = t(&[1.0, 2.0, 3.0], &[3], d).sum().unwrap();
        assert_eq!(s.shape(), &[] as &[usize]);
        assert_eq!(s.item().unwrap(), 6.0);
        assert_eq!(s.to_vec().unwrap(), vec![6.0]);
    }
}

#[test]
fn to_dtype_roundtrip() {
    for d in devices() {
        let x = t(&[1.9, -1.9, 0.0, 7.0, -0.5, 1e6], &[2, 3], d);
        let i = x.to_dtype(DType::I64).unwrap();
        assert_eq!(i.dtype(), DType::I64);
        assert_eq!(i.shape(), &[2, 3]);
        assert_eq!(i.device(), d);
        // truncation toward zero
        assert_eq!(i.to_vec_i64().unwrap(), vec![1, -1, 0, 7, 0, 1_000_000]);
        let f = i.to_dtype(DType::F32).unwrap();
        assert_eq!(f.dtype(), DType::F32);
        assert_eq!(f.to_vec().unwrap(), vec![1.0, -1.0, 0.0, 7.0, 0.0, 1e6]);
        // i64 to_vec reads as f32; to_vec_i64 of an f32 tensor is a dtype error
        let labels = ti(&[3, -4, 5], &[3], d);
        assert_eq!(labels.dtype(), DType::I64);
        assert_eq!(labels.to_vec().unwrap(), vec![3.0, -4.0, 5.0]);
        let e = x.to_vec_i64().unwrap_err();
        assert!(
            matches!(
                e,
                Error::DTypeMismatch {
                    expected: DType::I64,
                    got: DType::F32,
                    ..
                }
            ),
            "{e}"
        );
        // the same dtype gives the tensor itself, as PyTorch's `.to(dtype)`: no copy, no node
        let same = x.to_dtype(DType::F32).unwrap();
        assert_eq!(same.to_vec().unwrap(), x.to_vec().unwrap());
        assert!(same.shares_storage(&x) && same.is_leaf() == x.is_leaf());
    }
}

#[test]
fn ndarray_non_standard_layout() {
    // A transposed (column-major) ndarray view is read in logical order.
    let a = ndarray::Array2::from_shape_vec((2, 3), vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let at = a.t().to_owned().into_dyn();
    let x = Tensor::from_ndarray(&a.t().into_owned().into_dyn());
    assert_eq!(x.shape(), &[3, 2]);
    assert_eq!(x.to_vec().unwrap(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(x.to_ndarray().unwrap(), at);
    assert_eq!(x.device(), Device::Cpu);
}

#[test]
fn to_device_roundtrip() {
    let x = rand_vec(1031, -1.0, 1.0, 3);
    for d in devices() {
        let a = t(&x, &[1031], Device::Cpu).to(d).unwrap();
        assert_eq!(a.device(), d);
        let back = a.to(Device::Cpu).unwrap();
        assert_eq!(back.to_vec().unwrap(), x);
        // same-device to() is free and keeps the data
        assert_eq!(a.to(d).unwrap().to_vec().unwrap(), x);
    }
}

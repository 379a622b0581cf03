//! The user-facing API: `Display` of tensors, `std::ops` operators returning `Result`,
//! `select`/`index_select` (values on every device and their gradients), and the no-grad guard
//! at the crate root.

use camel_core::testing::devices;
use camel_core::{gradcheck, Device, Error, GradcheckOptions, NoGradGuard, Tensor};

#[test]
fn display_shows_values_like_pytorch() {
    let d = Device::Cpu;
    let s = Tensor::from_vec(vec![2.5], &[], d).unwrap();
    assert_eq!(s.to_string(), "tensor(2.5000)");
    let v = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3], d).unwrap();
    assert_eq!(v.to_string(), "tensor([1., 2., 3.])");
    let n = Tensor::from_vec(vec![f32::NAN, -1.5, f32::INFINITY], &[3], d).unwrap();
    assert_eq!(n.to_string(), "tensor([    nan, -1.5000,     inf])");
    let i = Tensor::from_vec_i64(vec![3, -10], &[2], d).unwrap();
    assert_eq!(i.to_string(), "tensor([  3, -10], dtype=i64)");
    let c = Tensor::arange_f32(0.0, 8.0, 1.0, d)
        .unwrap()
        .reshape(&[2, 2, 2])
        .unwrap();
    assert_eq!(
        c.to_string(),
        "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])"
    );
    let e = Tensor::zeros(&[0, 3], d).unwrap();
    assert_eq!(e.to_string(), "tensor([], size=[0, 3])");
    let g = Tensor::ones(&[1], d).unwrap().requires_grad_(true).unwrap();
    assert_eq!(g.to_string(), "tensor([1.], requires_grad=True)");
    // Large tensors are summarised in every dim.
    let big = Tensor::zeros(&[100, 100], d).unwrap().to_string();
    assert!(big.contains("..."), "{big}");
    assert!(big.lines().count() < 10, "{big}");
}

#[test]
fn display_on_every_device_matches_the_cpu() {
    let x = Tensor::randn_seeded(&[3, 4], 1, Device::Cpu).unwrap();
    let cpu = x.to_string();
    for dev in devices() {
        let want = if dev == Device::Cpu {
            cpu.clone()
        } else {
            format!("{}, device='{dev}')", &cpu[..cpu.len() - 1])
        };
        assert_eq!(x.to(dev).unwrap().to_string(), want);
    }
}

#[test]
fn operators_match_the_methods_on_every_device() {
    for dev in devices() {
        let a = Tensor::from_vec(vec![1., 2., 3., 4.], &[2, 2], dev).unwrap();
        let b = Tensor::from_vec(vec![10., 20.], &[2], dev).unwrap();
        let v = |t: camel_core::Result<Tensor>| t.unwrap().to_vec().unwrap();
        assert_eq!(v(&a + &b), vec![11., 22., 13., 24.]);
        assert_eq!(v(&a - &b), vec![-9., -18., -7., -16.]);
        assert_eq!(v(&a * &b), vec![10., 40., 30., 80.]);
        assert_eq!(v(&b / &b), vec![1., 1.]);
        assert_eq!(v(a.clone() + b.clone()), vec![11., 22., 13., 24.]);
        assert_eq!(v(&a * 2.0), vec![2., 4., 6., 8.]);
        assert_eq!(v(2.0 * &a), vec![2., 4., 6., 8.]);
        assert_eq!(v(&a + 1.0), vec![2., 3., 4., 5.]);
        assert_eq!(v(&a - 1.0), vec![0., 1., 2., 3.]);
        assert_eq!(v(10.0 - &a), vec![9., 8., 7., 6.]);
        assert_eq!(v(&a / 2.0), vec![0.5, 1., 1.5, 2.]);
        assert_eq!(v(4.0 / &a), vec![4., 2., 4. / 3., 1.]);
        assert_eq!(v(-&a), vec![-1., -2., -3., -4.]);
        let chained = ((&a + &b).unwrap() * 0.5).unwrap();
        assert_eq!(chained.to_vec().unwrap(), vec![5.5, 11., 6.5, 12.]);
        // A shape error stays a typed error.
        let c = Tensor::zeros(&[3], dev).unwrap();
        assert!(matches!(&a + &c, Err(Error::ShapeMismatch { .. })));
    }
}

#[test]
fn select_and_index_select_on_every_device() {
    let data: Vec<f32> = (0..24).map(|i| i as f32).collect();
    for dev in devices() {
        let x = Tensor::from_vec(data.clone(), &[2, 3, 4], dev).unwrap();
        let s = x.select(1, 2).unwrap();
        assert_eq!(s.shape(), &[2, 4]);
        assert_eq!(
            s.to_vec().unwrap(),
            vec![8., 9., 10., 11., 20., 21., 22., 23.]
        );
        assert_eq!(
            x.select(2, 0).unwrap().to_vec().unwrap(),
            vec![0., 4., 8., 12., 16., 20.]
        );
        assert!(matches!(x.select(1, 3), Err(Error::IndexOutOfRange { .. })));
        assert!(matches!(x.select(3, 0), Err(Error::IndexOutOfRange { .. })));
        assert!(x.select(0, usize::MAX).is_err());

        let idx = Tensor::from_vec_i64(vec![3, 0, 3], &[3], dev).unwrap();
        let r = x.index_select(2, &idx).unwrap();
        assert_eq!(r.shape(), &[2, 3, 3]);
        let want: Vec<f32> = (0..6)
            .flat_map(|row| [3, 0, 3].map(|c| (row * 4 + c) as f32))
            .collect();
        assert_eq!(r.to_vec().unwrap(), want, "{dev}");
        let i0 = Tensor::from_vec_i64(vec![1], &[1], dev).unwrap();
        assert_eq!(
            x.index_select(0, &i0).unwrap().to_vec().unwrap(),
            data[12..].to_vec()
        );
        let bad = Tensor::from_vec_i64(vec![4], &[1], dev).unwrap();
        assert!(x.index_select(2, &bad).and_then(|t| t.to_vec()).is_err());
        let neg = Tensor::from_vec_i64(vec![-1], &[1], dev).unwrap();
        assert!(x.index_select(2, &neg).and_then(|t| t.to_vec()).is_err());
        assert!(x.index_select(5, &idx).is_err());
        let f = Tensor::zeros(&[1], dev).unwrap();
        assert!(matches!(
            x.index_select(0, &f),
            Err(Error::DTypeMismatch { .. })
        ));
    }
}

#[test]
fn select_and_index_select_gradients() {
    for dev in devices() {
        let x = Tensor::randn_seeded(&[3, 4, 2], 5, dev).unwrap();
        let idx = Tensor::from_vec_i64(vec![1, 3, 1, 0], &[4], dev).unwrap();
        for dim in 0..3 {
            let ids = Tensor::from_vec_i64(vec![0, 1, 0], &[3], dev).unwrap();
            let i = if dim == 1 { &idx } else { &ids };
            gradcheck(
                |a: &[Tensor]| a[0].index_select(dim, i),
                std::slice::from_ref(&x),
                GradcheckOptions::default(),
            )
            .unwrap_or_else(|e| panic!("index_select dim {dim} on {dev}: {e}"));
            gradcheck(
                |a: &[Tensor]| a[0].select(dim, 1),
                std::slice::from_ref(&x),
                GradcheckOptions::default(),
            )
            .unwrap_or_else(|e| panic!("select dim {dim} on {dev}: {e}"));
        }
    }
}

#[test]
fn no_grad_guard_is_at_the_crate_root() {
    let x = Tensor::ones(&[2], Device::Cpu)
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    {
        let _g: NoGradGuard = camel_core::no_grad_guard();
        assert!(!x.mul_scalar(2.0).unwrap().requires_grad());
    }
    assert!(x.mul_scalar(2.0).unwrap().requires_grad());
}

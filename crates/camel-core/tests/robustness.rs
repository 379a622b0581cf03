//! Inputs that used to panic or abort the process now return typed errors, and edge cases are
//! defined: overflowing shapes, host allocations that cannot be satisfied, `narrow` with an
//! overflowing start, `arange` to infinity, argmax of an empty row, the mean of nothing, and the
//! teardown of a very deep autograd graph.

mod common;
use camel_core::{Error, Tensor};
use common::*;

#[test]
fn overflowing_shapes_are_errors() {
    for d in devices() {
        for shape in [
            vec![usize::MAX, 2],
            vec![1 << 40, 1 << 40],
            vec![usize::MAX, usize::MAX, 3],
        ] {
            assert!(matches!(
                Tensor::zeros(&shape, d),
                Err(Error::BadShape { .. })
            ));
            assert!(Tensor::full(&shape, 1.0, d).is_err());
            assert!(Tensor::rand_seeded(&shape, 0.0, 1.0, 0, d).is_err());
            assert!(Tensor::randn_seeded(&shape, 0, d).is_err());
            // a shape that wraps to a small count must not match a small vector
            assert!(Tensor::from_vec(vec![], &shape, d).is_err());
            let x = Tensor::zeros(&[2, 3], d).unwrap();
            assert!(x.reshape(&shape).is_err());
            assert!(x.broadcast_to(&shape).is_err());
        }
        // a dim of 0 makes any shape empty, however large the others
        let e = Tensor::zeros(&[usize::MAX, 0, 2], d).unwrap();
        assert_eq!(e.numel(), 0);
        assert_eq!(e.to_vec().unwrap(), Vec::<f32>::new());
        // the product 2^64 wraps to 0 in unchecked arithmetic
        assert!(Tensor::from_vec(vec![], &[1 << 32, 1 << 32], d).is_err());
    }
}

#[test]
fn huge_host_allocation_is_out_of_memory() {
    // 2^62 f32 elements: the count fits in usize, the bytes do not exist
    let n = 1usize << 62;
    let e = Tensor::zeros(&[n], camel_core::Device::Cpu).unwrap_err();
    match e {
        Error::OutOfMemory { op, bytes } => {
            assert_eq!(op, "full");
            assert_eq!(bytes, (n as u128) * 4);
        }
        other => panic!("expected OutOfMemory, got {other}"),
    }
    assert!(e_msg(&Tensor::rand_seeded(
        &[n],
        0.0,
        1.0,
        0,
        camel_core::Device::Cpu
    ))
    .contains("bytes"));
    // a broadcast view of that size is free; making it dense is not
    let x = Tensor::zeros(&[1], camel_core::Device::Cpu).unwrap();
    let big = x.broadcast_to(&[1 << 31, 1 << 31]).unwrap();
    assert!(matches!(big.contiguous(), Err(Error::OutOfMemory { .. })));
    assert!(matches!(
        big.add_scalar(1.0),
        Err(Error::OutOfMemory { .. })
    ));
}

fn e_msg(r: &camel_core::Result<Tensor>) -> String {
    match r {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn narrow_with_overflowing_start_is_an_error() {
    for d in devices() {
        let x = Tensor::zeros(&[4, 3], d).unwrap();
        assert!(x.narrow(0, usize::MAX, 2).is_err());
        assert!(x.narrow(0, 2, usize::MAX).is_err());
        assert!(x.narrow(1, 4, 0).is_err());
        assert!(x.narrow(5, 0, 1).is_err());
        assert_eq!(x.narrow(1, 3, 0).unwrap().shape(), &[4, 0]);
    }
}

#[test]
fn arange_without_an_end_is_an_error() {
    for d in devices() {
        for (s, e, st) in [
            (0.0, f32::INFINITY, 1.0),
            (0.0, f32::NAN, 1.0),
            (f32::NAN, 1.0, 1.0),
            (-f32::INFINITY, 0.0, 1.0),
            (0.0, 1e30, 1e-30),
        ] {
            assert!(
                Tensor::arange_f32(s, e, st, d).is_err(),
                "arange({s}, {e}, {st})"
            );
        }
    }
}

#[test]
fn argmax_of_an_empty_row_is_an_error_like_max() {
    for d in devices() {
        let x = Tensor::zeros(&[2, 0], d).unwrap();
        assert!(x.argmax_last().is_err());
        assert!(x.max_dim(-1, false).is_err());
        // no rows of a non-empty length: an empty result, as for max
        let x = Tensor::zeros(&[0, 3], d).unwrap();
        assert_eq!(x.argmax_last().unwrap().shape(), &[0]);
        assert_eq!(x.max_dim(-1, false).unwrap().shape(), &[0]);
    }
}

#[test]
fn mean_of_nothing_is_nan_both_ways() {
    for d in devices() {
        let x = Tensor::zeros(&[0], d).unwrap();
        assert!(x.mean().unwrap().item().unwrap().is_nan());
        assert!(x.mean_dim(0, false).unwrap().item().unwrap().is_nan());
        let x = Tensor::zeros(&[2, 0], d).unwrap();
        assert!(x.mean().unwrap().item().unwrap().is_nan());
        let m = x.mean_dim(1, false).unwrap().to_vec().unwrap();
        assert!(m.len() == 2 && m.iter().all(|v| v.is_nan()));
    }
}

#[test]
fn dropping_a_deep_graph_does_not_overflow_the_stack() {
    // 200k ops, dropped without backward, on a thread with a small stack: a recursive drop
    // needs several frames per node and overflows long before the end
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let x = Tensor::ones(&[1], camel_core::Device::Cpu)
                .unwrap()
                .requires_grad_(true)
                .unwrap();
            let mut y = x.clone();
            for _ in 0..200_000 {
                y = y.mul_scalar(1.0).unwrap();
            }
            drop(y);
            // the leaf is intact and a new graph still works
            let z = x.mul_scalar(2.0).unwrap().sum().unwrap();
            z.backward().unwrap();
            assert_eq!(x.grad().unwrap().to_vec().unwrap(), vec![2.0]);
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn dropping_a_deep_graph_with_shared_branches() {
    // each op reads the previous output twice; the chain is still dropped iteratively
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let x = Tensor::ones(&[2], camel_core::Device::Cpu)
                .unwrap()
                .requires_grad_(true)
                .unwrap();
            let mut y = x.clone();
            for _ in 0..100_000 {
                y = y.add(&y).unwrap().mul_scalar(0.5).unwrap();
            }
            drop(y);
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn a_deep_graph_still_runs_backward() {
    let x = Tensor::ones(&[1], camel_core::Device::Cpu)
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let mut y = x.clone();
    for _ in 0..10_000 {
        y = y.mul_scalar(1.0).unwrap();
    }
    y.sum().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec().unwrap(), vec![1.0]);
}

#[test]
fn pad_and_cat_that_overflow_are_errors() {
    for d in devices() {
        let x = Tensor::zeros(&[2], d).unwrap();
        assert!(x.pad(&[(usize::MAX, 1)], 0.0).is_err());
        assert!(x.pad(&[(1 << 62, 1 << 62)], 0.0).is_err());
        let e = Tensor::zeros(&[0, usize::MAX], d).unwrap();
        assert!(Tensor::cat(&[&e, &e], 1).is_err());
    }
}

//! Autograd behaviour: accumulation, zero_grad, no_grad, detach, shared inputs, freed graphs,
//! leaf rules.

mod common;
use camel_core::{is_grad_enabled, no_grad, no_grad_guard, Error, Tensor};
use common::*;

fn leaf(data: &[f32], shape: &[usize], d: camel_core::Device) -> Tensor {
    t(data, shape, d).requires_grad_(true).unwrap()
}

fn grad_of(x: &Tensor) -> Vec<f32> {
    x.grad().expect("gradient present").to_vec().unwrap()
}

#[test]
fn gradients_accumulate_across_backward_passes() {
    for d in devices() {
        let x = leaf(&[1.0, -2.0, 3.0], &[3], d);
        x.mul_scalar(3.0)
            .unwrap()
            .sum()
            .unwrap()
            .backward()
            .unwrap();
        assert_eq!(grad_of(&x), vec![3.0; 3]);
        // second forward + backward: the gradient doubles
        x.mul_scalar(3.0)
            .unwrap()
            .sum()
            .unwrap()
            .backward()
            .unwrap();
        assert_eq!(grad_of(&x), vec![6.0; 3]);
        let g = x.grad().unwrap();
        assert!(
            !g.requires_grad(),
            "stored gradients are not part of a graph"
        );
        assert_eq!(g.device(), d);
        // zero_grad clears; the next backward starts from scratch
        x.zero_grad();
        assert!(x.grad().is_none());
        x.square().unwrap().sum().unwrap().backward().unwrap();
        assert_eq!(grad_of(&x), vec![2.0, -4.0, 6.0]);
    }
}

#[test]
fn no_grad_records_nothing() {
    for d in devices() {
        let x = leaf(&[1.0, 2.0], &[2], d);
        assert!(is_grad_enabled());
        let y = no_grad(|| x.mul_scalar(2.0).unwrap().exp().unwrap());
        assert!(is_grad_enabled(), "no_grad restores the mode");
        assert!(!y.requires_grad());
        assert!(y.is_leaf());
        assert!(y.backward_with(&y.ones_like().unwrap()).is_err());
        {
            let _g = no_grad_guard();
            assert!(!is_grad_enabled());
            let x2 = x.reshape(&[1, 2]).unwrap();
            let z = x2.matmul_t(&x2, false, true).unwrap().sum().unwrap();
            assert!(!z.requires_grad() && z.is_leaf());
            // nested no_grad keeps it off after the inner one ends
            no_grad(|| ());
            assert!(!is_grad_enabled());
        }
        assert!(is_grad_enabled());
        // ops on tensors that do not require grad record nothing either
        let c = t(&[1.0], &[1], d).exp().unwrap();
        assert!(!c.requires_grad() && c.is_leaf());
        // but an op with one tracked input is tracked
        let m = x.mul(&t(&[5.0, 5.0], &[2], d)).unwrap();
        assert!(m.requires_grad() && !m.is_leaf());
    }
}

#[test]
fn detach_cuts_the_graph() {
    for d in devices() {
        let x = leaf(&[1.5, -0.5], &[2], d);
        let dx = x.detach();
        assert!(!dx.requires_grad() && dx.is_leaf());
        assert_eq!(dx.to_vec().unwrap(), x.to_vec().unwrap());
        // x * detach(x): gradient x, not 2x
        x.mul(&dx).unwrap().sum().unwrap().backward().unwrap();
        assert_eq!(grad_of(&x), vec![1.5, -0.5]);
        // detaching an intermediate: nothing flows back through it
        x.zero_grad();
        let y = x.exp().unwrap().detach().add(&x).unwrap();
        y.sum().unwrap().backward().unwrap();
        assert_eq!(grad_of(&x), vec![1.0, 1.0]);
    }
}

#[test]
fn tensor_used_twice() {
    for d in devices() {
        let x = leaf(&[1.0, -2.0, 0.5], &[3], d);
        x.mul(&x).unwrap().sum().unwrap().backward().unwrap();
        assert_eq!(grad_of(&x), vec![2.0, -4.0, 1.0]);
        // diamond: y = x·2, z = y + y·y → dz/dx = 2 + 8x
        x.zero_grad();
        let y = x.mul_scalar(2.0).unwrap();
        y.add(&y.mul(&y).unwrap())
            .unwrap()
            .sum()
            .unwrap()
            .backward()
            .unwrap();
        assert_close("diamond", &grad_of(&x), &[10.0, -14.0, 6.0], ELEM);
        // x + x
        x.zero_grad();
        x.add(&x).unwrap().sum().unwrap().backward().unwrap();
        assert_eq!(grad_of(&x), vec![2.0; 3]);
    }
}

#[test]
fn backward_twice_is_an_error() {
    for d in devices() {
        let x = leaf(&[1.0, 2.0], &[2], d);
        let loss = x.square().unwrap().sum().unwrap();
        loss.backward().unwrap();
        let e = loss.backward().unwrap_err();
        assert!(matches!(e, Error::Autograd(_)), "{e:?}");
        assert!(e.to_string().contains("already freed"), "{e}");
        // the first pass's gradient is intact
        assert_eq!(grad_of(&x), vec![2.0, 4.0]);
    }
}

#[test]
fn leaf_rules() {
    for d in devices() {
        let x = leaf(&[1.0], &[1], d);
        assert!(x.is_leaf() && x.requires_grad());
        let y = x.mul_scalar(2.0).unwrap();
        assert!(!y.is_leaf());
        let e = y.clone().requires_grad_(true).unwrap_err();
        assert!(matches!(e, Error::Autograd(_)), "{e:?}");
        assert!(e.to_string().contains("non-leaf"), "{e}");
        // intermediate tensors do not keep a gradient; leaves without requires_grad get none
        let c = t(&[3.0], &[1], d);
        y.mul(&c).unwrap().sum().unwrap().backward().unwrap();
        assert!(y.grad().is_none());
        assert!(c.grad().is_none());
        assert_eq!(grad_of(&x), vec![6.0]);
        // requires_grad_(false) turns tracking off again
        let x = x.requires_grad_(false).unwrap();
        assert!(!x.mul_scalar(2.0).unwrap().requires_grad());
    }
}

#[test]
fn backward_with_explicit_gradient() {
    for d in devices() {
        let x = leaf(&[1.0, 2.0, 3.0, 4.0], &[2, 2], d);
        let y = x.mul_scalar(3.0).unwrap();
        y.backward_with(&t(&[1.0, 0.0, -1.0, 2.0], &[2, 2], d))
            .unwrap();
        assert_eq!(grad_of(&x), vec![3.0, 0.0, -3.0, 6.0]);
    }
}

#[test]
fn broadcast_gradients_reduce_to_input_shapes() {
    for d in devices() {
        let w = leaf(&[1.0; 6], &[2, 3], d);
        let b = leaf(&[0.0; 3], &[3], d);
        let col = leaf(&[0.0; 2], &[2, 1], d);
        w.add(&b)
            .unwrap()
            .add(&col)
            .unwrap()
            .sum()
            .unwrap()
            .backward()
            .unwrap();
        assert_eq!(grad_of(&w), vec![1.0; 6]);
        assert_eq!(grad_of(&b), vec![2.0; 3]);
        assert_eq!(grad_of(&col), vec![3.0; 2]);
        assert_eq!(b.grad().unwrap().shape(), &[3]);
        assert_eq!(col.grad().unwrap().shape(), &[2, 1]);
    }
}

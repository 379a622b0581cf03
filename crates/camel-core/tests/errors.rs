//! Bad input gives a typed error whose message names the shapes or values involved.

mod common;
use camel_core::{DType, Device, Error, Tensor};
use common::*;

fn msg_has(e: &Error, parts: &[&str]) {
    let m = e.to_string();
    for p in parts {
        assert!(m.contains(p), "message {m:?} should mention {p:?}");
    }
}

#[test]
fn add_shape_mismatch() {
    for d in devices() {
        let e = Tensor::zeros(&[5, 4], d)
            .unwrap()
            .add(&Tensor::zeros(&[3, 4], d).unwrap())
            .unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { op: "add", .. }), "{e:?}");
        msg_has(&e, &["add", "[5, 4]", "[3, 4]"]);
        let e = Tensor::zeros(&[4, 3], d)
            .unwrap()
            .mul(&Tensor::zeros(&[4], d).unwrap())
            .unwrap_err();
        msg_has(&e, &["mul", "[4, 3]", "[4]"]);
    }
}

#[test]
fn matmul_inner_dims() {
    for d in devices() {
        let a = Tensor::zeros(&[3, 4], d).unwrap();
        let e = a.matmul(&Tensor::zeros(&[5, 2], d).unwrap()).unwrap_err();
        assert!(
            matches!(e, Error::ShapeMismatch { op: "matmul", .. }),
            "{e:?}"
        );
        msg_has(&e, &["matmul", "[3, 4]", "[5, 2]", "inner"]);
        // with a transpose flag the inner dims are the other ones
        let e = a
            .matmul_t(&Tensor::zeros(&[3, 4], d).unwrap(), false, false)
            .unwrap_err();
        msg_has(&e, &["[3, 4]", "inner"]);
        assert!(a
            .matmul_t(&Tensor::zeros(&[3, 4], d).unwrap(), true, false)
            .is_ok());
        // rank 1 operands and mismatched batch dims
        let e = Tensor::zeros(&[4], d)
            .unwrap()
            .matmul(&Tensor::zeros(&[4, 2], d).unwrap())
            .unwrap_err();
        msg_has(&e, &["[4]", "rank"]);
        let e = Tensor::zeros(&[2, 3, 4], d)
            .unwrap()
            .matmul(&Tensor::zeros(&[5, 4, 2], d).unwrap())
            .unwrap_err();
        msg_has(&e, &["[2, 3, 4]", "[5, 4, 2]", "batch"]);
    }
}

#[test]
fn cross_entropy_label_out_of_range() {
    for d in devices() {
        let logits = Tensor::zeros(&[2, 3], d).unwrap();
        for bad in [3i64, -1, 100] {
            // on a GPU the error surfaces at the next host read, so read the loss
            let e = logits
                .cross_entropy(&ti(&[0, bad], &[2], d))
                .and_then(|l| l.item())
                .unwrap_err();
            assert!(
                matches!(e, Error::IndexOutOfRange { op: "cross_entropy", index, size: 3 } if index == bad),
                "{d}: {e:?}"
            );
            msg_has(&e, &["cross_entropy", &bad.to_string(), "3"]);
        }
    }
}

#[test]
fn embedding_index_out_of_range() {
    for d in devices() {
        let table = Tensor::zeros(&[4, 2], d).unwrap();
        for bad in [4i64, -1, 1 << 40] {
            // on a GPU the error surfaces at the next host read, so read the result
            let e = table
                .embedding(&ti(&[1, bad, 0], &[3], d))
                .and_then(|t| t.to_vec())
                .unwrap_err();
            assert!(
                matches!(e, Error::IndexOutOfRange { op: "embedding", index, size: 4 } if index == bad),
                "{d}: {e:?}"
            );
            msg_has(&e, &["embedding", &bad.to_string(), "4"]);
        }
    }
}

#[test]
fn wrong_dtype() {
    for d in devices() {
        let logits = Tensor::zeros(&[2, 3], d).unwrap();
        let e = logits.cross_entropy(&t(&[0.0, 1.0], &[2], d)).unwrap_err();
        assert!(
            matches!(
                e,
                Error::DTypeMismatch {
                    op: "cross_entropy",
                    expected: DType::I64,
                    got: DType::F32
                }
            ),
            "{e:?}"
        );
        msg_has(&e, &["cross_entropy", "i64", "f32"]);
        let e = logits.embedding(&t(&[0.0], &[1], d)).unwrap_err();
        assert!(
            matches!(
                e,
                Error::DTypeMismatch {
                    op: "embedding",
                    ..
                }
            ),
            "{e:?}"
        );
        // i64 tensors are not valid operands of float ops
        let labels = ti(&[0, 1], &[2], d);
        let e = labels.add(&labels).unwrap_err();
        msg_has(&e, &["add", "f32", "i64"]);
        assert!(matches!(
            labels.exp().unwrap_err(),
            Error::DTypeMismatch { .. }
        ));
        assert!(matches!(
            ti(&[0], &[1, 1], d)
                .matmul(&ti(&[0], &[1, 1], d))
                .unwrap_err(),
            Error::DTypeMismatch { .. }
        ));
        // only f32 can require grad
        assert!(matches!(
            labels.requires_grad_(true).unwrap_err(),
            Error::Autograd(_)
        ));
    }
}

#[test]
fn backward_on_non_scalar() {
    for d in devices() {
        let x = Tensor::ones(&[2, 3], d)
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let y = x.mul_scalar(2.0).unwrap();
        let e = y.backward().unwrap_err();
        assert!(matches!(e, Error::Autograd(_)), "{e:?}");
        msg_has(&e, &["one-element", "[2, 3]"]);
        // backward of something that does not require grad
        let e = Tensor::ones(&[], d).unwrap().backward().unwrap_err();
        msg_has(&e, &["does not require grad"]);
        // backward_with needs a gradient of the output's shape
        let e = y
            .backward_with(&Tensor::ones(&[3, 2], d).unwrap())
            .unwrap_err();
        msg_has(&e, &["[2, 3]", "[3, 2]"]);
    }
}

#[test]
fn item_on_many_elements() {
    for d in devices() {
        let e = Tensor::zeros(&[2, 2], d).unwrap().item().unwrap_err();
        assert!(matches!(e, Error::BadShape { op: "item", .. }), "{e:?}");
        msg_has(&e, &["item", "[2, 2]", "one element"]);
        assert!(Tensor::zeros(&[0], d).unwrap().item().is_err());
    }
}

#[test]
fn reshape_wrong_numel() {
    for d in devices() {
        let e = Tensor::zeros(&[2, 3], d)
            .unwrap()
            .reshape(&[4, 2])
            .unwrap_err();
        assert!(
            matches!(e, Error::ShapeMismatch { op: "reshape", .. }),
            "{e:?}"
        );
        msg_has(&e, &["reshape", "[2, 3]", "[4, 2]"]);
    }
}

#[test]
fn other_shape_errors() {
    for d in devices() {
        let x = Tensor::zeros(&[2, 3], d).unwrap();
        // from_vec with the wrong element count
        let e = Tensor::from_vec(vec![0.0; 5], &[2, 3], d).unwrap_err();
        msg_has(&e, &["from_vec", "[2, 3]", "6", "5"]);
        // dims out of range
        let e = x.sum_dim(2, false).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
        msg_has(&e, &["dim 2", "rank 2"]);
        msg_has(&x.max_dim(-3, true).unwrap_err(), &["dim -3"]);
        msg_has(&x.transpose(0, 5).unwrap_err(), &["dim 5"]);
        msg_has(&x.permute(&[0, 0]).unwrap_err(), &["[0, 0]", "[2, 3]"]);
        msg_has(
            &x.narrow(1, 2, 2).unwrap_err(),
            &["narrow", "2..4", "[2, 3]"],
        );
        msg_has(&x.pad(&[(1, 1)], 0.0).unwrap_err(), &["pad", "[2, 3]"]);
        msg_has(&x.broadcast_to(&[4, 3]).unwrap_err(), &["[2, 3]", "[4, 3]"]);
        msg_has(&x.flatten(2).unwrap_err(), &["flatten", "[2, 3]"]);
        msg_has(
            &x.mse(&Tensor::zeros(&[3, 2], d).unwrap()).unwrap_err(),
            &["mse", "[2, 3]", "[3, 2]"],
        );
        // cross_entropy: targets of the wrong length, logits of the wrong rank
        msg_has(
            &x.cross_entropy(&ti(&[0], &[1], d)).unwrap_err(),
            &["cross_entropy", "[2, 3]", "[1]"],
        );
        msg_has(
            &Tensor::zeros(&[2, 3, 1], d)
                .unwrap()
                .cross_entropy(&ti(&[0, 0], &[2], d))
                .unwrap_err(),
            &["[2, 3, 1]"],
        );
        // embedding table must be 2-D
        msg_has(
            &Tensor::zeros(&[4], d)
                .unwrap()
                .embedding(&ti(&[0], &[1], d))
                .unwrap_err(),
            &["embedding", "[4]"],
        );
        // empty reductions
        assert!(Tensor::zeros(&[0], d).unwrap().max().is_err());
        assert!(Tensor::zeros(&[2, 0], d).unwrap().argmax_last().is_err());
        // the mean of nothing is NaN, whole or along a dim, as in PyTorch
        let e = Tensor::zeros(&[0], d).unwrap();
        assert!(e.mean().unwrap().item().unwrap().is_nan());
        assert!(e.mean_dim(0, false).unwrap().item().unwrap().is_nan());
    }
}

#[test]
fn operands_on_two_devices() {
    let devs = devices();
    let Some(&gpu) = devs.iter().find(|d| d.is_cuda()) else {
        eprintln!("skipped device-mismatch test: no GPU");
        return;
    };
    let c = Tensor::zeros(&[2, 2], Device::Cpu).unwrap();
    let g = Tensor::zeros(&[2, 2], gpu).unwrap();
    for e in [
        c.add(&g).unwrap_err(),
        g.matmul(&c).unwrap_err(),
        g.embedding(&ti(&[0], &[1], Device::Cpu)).unwrap_err(),
    ] {
        assert!(matches!(e, Error::DeviceMismatch { .. }), "{e:?}");
        msg_has(&e, &["cpu", "cuda:0"]);
    }
}

#[test]
fn cuda_without_gpu_is_unavailable() {
    if devices().iter().any(|d| d.is_cuda()) {
        return;
    }
    // built with `cuda` but no GPU: the CUDA layer's own error; without `cuda`: DeviceUnavailable
    let e = Tensor::zeros(&[2], Device::Cuda(0)).unwrap_err();
    assert!(Tensor::from_vec(vec![1.0], &[1], Device::Cuda(0)).is_err());
    if cfg!(not(feature = "cuda")) {
        assert!(matches!(e, Error::DeviceUnavailable { .. }), "{e:?}");
        msg_has(&e, &["cuda:0", "not available"]);
    }
}

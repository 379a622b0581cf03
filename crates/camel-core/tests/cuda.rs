//! Behaviour that only exists with a GPU: device mismatches, deferred index errors, and the
//! clear error when a CUDA tensor is asked for where no GPU answers.

use camel_core::testing::gpu;
use camel_core::{cuda_available, Device, Error, Tensor};

#[test]
fn cuda_tensor_without_gpu_is_a_clear_error() {
    if cuda_available() {
        return; // covered by the other tests on a GPU host
    }
    let e = Tensor::zeros(&[2, 3], Device::Cuda(0)).unwrap_err();
    assert!(matches!(e, Error::DeviceUnavailable { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("cuda:0"), "{msg}");
    let e = Tensor::ones(&[2], Device::Cpu)
        .unwrap()
        .to(Device::Cuda(0))
        .unwrap_err();
    assert!(matches!(e, Error::DeviceUnavailable { .. }), "{e:?}");
}

#[test]
fn operands_on_two_devices_are_an_error() {
    let Some(g) = gpu() else { return };
    let a = Tensor::ones(&[2, 3], Device::Cpu).unwrap();
    let b = Tensor::ones(&[2, 3], g).unwrap();
    for (name, r) in [
        ("add", a.add(&b)),
        ("mul", a.mul(&b)),
        ("matmul", a.matmul_t(&b, false, true)),
    ] {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::DeviceMismatch { .. }), "{name}: {e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains("cpu") && msg.contains("cuda:0") && msg.contains(name),
            "{msg}"
        );
    }
    let t = Tensor::from_vec_i64(vec![0, 1], &[2], Device::Cpu).unwrap();
    assert!(matches!(
        b.cross_entropy(&t).unwrap_err(),
        Error::DeviceMismatch { .. }
    ));
}

#[test]
fn embedding_index_out_of_range_on_gpu_is_an_error() {
    let Some(g) = gpu() else { return };
    let table = Tensor::randn_seeded(&[10, 4], 0, g).unwrap();
    for bad in [10i64, -1, 1 << 40] {
        let idx = Tensor::from_vec_i64(vec![1, bad, 3], &[3], g).unwrap();
        // the launch is asynchronous: the error surfaces at the next host read
        let r = table.embedding(&idx).and_then(|o| o.to_vec());
        match r {
            Err(Error::IndexOutOfRange { op, index, size }) => {
                assert_eq!((op, index, size), ("embedding", bad, 10));
            }
            other => panic!("expected IndexOutOfRange for index {bad}, got {other:?}"),
        }
        // the error was reported once; the device keeps working
        let ok = Tensor::from_vec_i64(vec![9, 0], &[2], g).unwrap();
        let v = table.embedding(&ok).unwrap().to_vec().unwrap();
        let t = table.to_vec().unwrap();
        assert_eq!(&v[..4], &t[36..40]);
    }
}

#[test]
fn cross_entropy_label_out_of_range_on_gpu_is_an_error() {
    let Some(g) = gpu() else { return };
    let x = Tensor::randn_seeded(&[3, 5], 0, g).unwrap();
    let t = Tensor::from_vec_i64(vec![0, 5, 1], &[3], g).unwrap();
    match x.cross_entropy(&t).and_then(|l| l.item()) {
        Err(Error::IndexOutOfRange { op, index, size }) => {
            assert_eq!((op, index, size), ("cross_entropy", 5, 5))
        }
        other => panic!("expected IndexOutOfRange, got {other:?}"),
    }
    let t = Tensor::from_vec_i64(vec![0, 4, 1], &[3], g).unwrap();
    assert!(x.cross_entropy(&t).unwrap().item().unwrap().is_finite());
}

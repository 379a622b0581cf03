//! The process-wide generator and the creation functions' argument checks: `manual_seed`
//! repeats a stream, successive draws differ, explicit generators are private streams, and
//! empty or non-finite ranges and overflowing shapes are typed errors, not panics.

use camel_core::{manual_seed, Device, Error, Generator, Tensor};

/// Everything that touches the global generator runs in this one test, so that parallel tests
/// do not interleave their draws.
#[test]
fn global_generator_is_seedable_and_advances() {
    manual_seed(3);
    let a = Tensor::randn(&[4], Device::Cpu).unwrap().to_vec().unwrap();
    let b = Tensor::randn(&[8], Device::Cpu).unwrap().to_vec().unwrap();
    assert_ne!(a[..], b[..4], "the second draw continues the stream");
    manual_seed(3);
    let again = Tensor::randn(&[4], Device::Cpu).unwrap().to_vec().unwrap();
    assert_eq!(a, again, "manual_seed repeats the stream");

    let u1 = Tensor::rand(&[16], 0.0, 1.0, Device::Cpu)
        .unwrap()
        .to_vec()
        .unwrap();
    let u2 = Tensor::rand(&[16], 0.0, 1.0, Device::Cpu)
        .unwrap()
        .to_vec()
        .unwrap();
    assert_ne!(u1, u2);
    assert_eq!(camel_core::initial_seed(), 3);
}

#[test]
fn explicit_generator_matches_seeded_and_advances() {
    let mut g = Generator::new(9);
    let a = Tensor::randn_with(&[5], &mut g, Device::Cpu)
        .unwrap()
        .to_vec()
        .unwrap();
    let b = Tensor::randn_with(&[5], &mut g, Device::Cpu)
        .unwrap()
        .to_vec()
        .unwrap();
    assert_ne!(a, b);
    let s = Tensor::randn_seeded(&[5], 9, Device::Cpu)
        .unwrap()
        .to_vec()
        .unwrap();
    assert_eq!(a, s);
    let mut g = Generator::new(9);
    let r = Tensor::rand_with(&[5], -2.0, 2.0, &mut g, Device::Cpu)
        .unwrap()
        .to_vec()
        .unwrap();
    assert_eq!(
        r,
        Tensor::rand_seeded(&[5], -2.0, 2.0, 9, Device::Cpu)
            .unwrap()
            .to_vec()
            .unwrap()
    );
    assert!(r.iter().all(|v| (-2.0..2.0).contains(v)));
}

#[test]
fn one_stream_across_devices_and_clones_fork_it() {
    // a generator is (seed, offset), not a device's state: drawing part of a stream on one
    // device and the rest on another gives the values of one draw
    let whole = Tensor::rand_seeded(&[12], 0.0, 1.0, 4, Device::Cpu)
        .unwrap()
        .to_vec()
        .unwrap();
    for d in camel_core::testing::devices() {
        let mut g = Generator::new(4);
        let a = Tensor::rand_with(&[4], 0.0, 1.0, &mut g, Device::Cpu).unwrap();
        let mut fork = g.clone();
        let b = Tensor::rand_with(&[8], 0.0, 1.0, &mut g, d).unwrap();
        let mut joined = a.to_vec().unwrap();
        joined.extend(b.to_vec().unwrap());
        assert_eq!(joined, whole, "on {d}");
        // the fork repeats what the original drew after the clone
        let c = Tensor::rand_with(&[8], 0.0, 1.0, &mut fork, d).unwrap();
        assert_eq!(c.to_vec().unwrap(), b.to_vec().unwrap(), "on {d}");
        assert_eq!((fork.offset(), g.offset()), (3, 3));
        // seeding another generator from this one moves the stream on
        let s1 = g.next_u64();
        assert_ne!(s1, g.next_u64());
    }
}

fn invalid(r: camel_core::Result<Tensor>, op: &str) {
    match r {
        Err(e @ (Error::InvalidArgument { .. } | Error::BadShape { .. })) => {
            assert!(e.to_string().starts_with(op), "{e}")
        }
        Err(e) => panic!("{op}: unexpected error kind {e}"),
        Ok(t) => panic!("{op}: accepted, shape {:?}", t.shape()),
    }
}

#[test]
fn rand_rejects_empty_and_non_finite_ranges() {
    let d = Device::Cpu;
    invalid(Tensor::rand_seeded(&[3], 1.0, 1.0, 0, d), "rand");
    invalid(Tensor::rand_seeded(&[3], 2.0, 1.0, 0, d), "rand");
    invalid(Tensor::rand_seeded(&[3], f32::NAN, 1.0, 0, d), "rand");
    invalid(Tensor::rand_seeded(&[3], 0.0, f32::INFINITY, 0, d), "rand");
    invalid(Tensor::rand_seeded(&[3], -f32::MAX, f32::MAX, 0, d), "rand");
    invalid(
        Tensor::rand_seeded(&[usize::MAX, 2], 0.0, 1.0, 0, d),
        "rand",
    );
    invalid(Tensor::randn_seeded(&[usize::MAX, 2], 0, d), "randn");
}

#[test]
fn arange_rejects_non_finite_and_huge_ranges() {
    let d = Device::Cpu;
    invalid(Tensor::arange(0.0, f32::INFINITY, 1.0, d), "arange");
    invalid(Tensor::arange(f32::NAN, 1.0, 1.0, d), "arange");
    invalid(Tensor::arange(0.0, 1.0, f32::NAN, d), "arange");
    invalid(Tensor::arange(0.0, 1.0, 0.0, d), "arange");
    invalid(Tensor::arange(1.0, 0.0, 1.0, d), "arange");
    invalid(
        Tensor::arange(-f32::MAX, f32::MAX, f32::MIN_POSITIVE, d),
        "arange",
    );
    assert_eq!(
        Tensor::arange(0.0, 2.0, 0.5, d).unwrap().to_vec().unwrap(),
        vec![0.0, 0.5, 1.0, 1.5]
    );
    assert_eq!(Tensor::arange(1.0, 1.0, 1.0, d).unwrap().shape(), &[0]);
}

#[test]
fn overflowing_shapes_are_errors() {
    let d = Device::Cpu;
    invalid(Tensor::zeros(&[usize::MAX, 2], d), "full");
    invalid(Tensor::ones(&[usize::MAX, usize::MAX], d), "full");
    invalid(Tensor::from_vec(vec![], &[usize::MAX, 2], d), "from_vec");
}

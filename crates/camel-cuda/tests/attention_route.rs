//! Where attention steps 7 and 8 run their Hopper kernels and where they give the forward to
//! step 6 (`attention::wgmma_fits`); the results themselves are tested against f64 by camel-core's
//! attention tests, at every step.

use camel_cuda::kernels::attention::{wgmma_fits, AttnGeom};
use camel_cuda::kernels::shape::Elem;
use camel_cuda::{test_device, DevPtr};

/// A dense `[b, h, t, d]` view of each of q, k and v.
fn geom(d: usize, dropout: f32) -> AttnGeom {
    let (b, h, t) = (2, 3, 100);
    let s = [h * t * d, t * d, d];
    AttnGeom {
        b,
        h,
        tq: t,
        tk: t,
        d,
        q: s,
        k: s,
        v: s,
        scale: 0.1,
        causal: true,
        dropout,
        seed: 0,
    }
}

#[test]
fn steps_7_and_8_run_on_hopper_for_16_bit_heads_of_64_and_128_without_dropout() {
    let Some(dev) = test_device() else { return };
    let hopper = dev.compute_capability() == (9, 0);
    let p = [DevPtr(0x1000); 4];
    for d in [64, 128] {
        for elem in [Elem::F16, Elem::BF16] {
            assert_eq!(
                wgmma_fits(&dev, &geom(d, 0.0), elem, p),
                hopper,
                "d {d} {elem:?}"
            );
        }
    }
    // step 6 takes the rest: head dim 32, dropout, f32, a misaligned operand or stride
    assert!(!wgmma_fits(&dev, &geom(32, 0.0), Elem::BF16, p));
    assert!(!wgmma_fits(&dev, &geom(128, 0.1), Elem::BF16, p));
    assert!(!wgmma_fits(&dev, &geom(128, 0.0), Elem::F32, p));
    let mut odd = p;
    odd[3] = DevPtr(0x1008);
    assert!(!wgmma_fits(&dev, &geom(128, 0.0), Elem::F16, odd));
    let mut g = geom(64, 0.0);
    g.k[1] = 4; // a head stride of 8 bytes
    assert!(!wgmma_fits(&dev, &g, Elem::F16, p));
    g.k[1] = 0; // one head broadcast to all
    assert!(!wgmma_fits(&dev, &g, Elem::F16, p));
}

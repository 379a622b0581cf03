//! Device, copies and kernels. GPU tests skip (printing why) without a GPU and fail with
//! CAMEL_REQUIRE_GPU=1.

use camel_cuda::kernels::elementwise;
use camel_cuda::{device, device_count, launch_1d, test_device, Error, LaunchConfig, GRID_1D_CAP};
use std::sync::Arc;

#[test]
fn no_device_is_an_error_not_a_panic() {
    match device(0) {
        Ok(dev) => {
            assert!(device_count().unwrap() >= 1);
            assert!(camel_cuda::is_available());
            assert!(
                Arc::ptr_eq(&dev, &device(0).unwrap()),
                "one device object per ordinal"
            );
        }
        Err(Error::NoDevice { reason }) => {
            assert!(!reason.is_empty());
            assert_eq!(device_count().unwrap_or(0), 0);
            assert!(!camel_cuda::is_available());
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
    assert!(matches!(
        device(camel_cuda::MAX_DEVICES),
        Err(Error::NoDevice { .. })
    ));
}

#[test]
fn embedded_ptx_lists_the_modules() {
    let modules = camel_cuda::embedded_modules();
    if camel_cuda::CUDA_ENABLED {
        assert!(
            modules.contains(&"elementwise/01_thread_per_element"),
            "{modules:?}"
        );
    } else {
        assert!(modules.is_empty());
    }
}

#[test]
fn fill_round_trip() {
    let Some(dev) = test_device() else { return };
    for n in [
        1usize,
        255,
        256,
        257,
        100_003,
        GRID_1D_CAP as usize * 256 + 1000,
    ] {
        let buf = dev.alloc(n * 4).unwrap();
        elementwise::fill_f32(&dev, buf.ptr(), n, 1.5).unwrap();
        let out: Vec<f32> = dev.dtoh_vec(&buf, n).unwrap();
        assert!(out.iter().all(|&v| v == 1.5), "n = {n}");
    }
    // A sub-range through pointer arithmetic.
    let buf = dev.htod(&[0f32; 10]).unwrap();
    elementwise::fill_f32(&dev, buf.ptr().add::<f32>(3), 4, -2.0).unwrap();
    let out: Vec<f32> = dev.dtoh_vec(&buf, 10).unwrap();
    assert_eq!(out, [0., 0., 0., -2., -2., -2., -2., 0., 0., 0.]);
    // n = 0 launches nothing.
    elementwise::fill_f32(&dev, buf.ptr(), 0, 9.0).unwrap();
    dev.synchronize().unwrap();
}

#[test]
fn bad_launch_config_names_the_kernel() {
    let Some(dev) = test_device() else { return };
    let k = dev
        .function("elementwise/01_thread_per_element", "fill_f32")
        .unwrap();
    assert_eq!(k.name(), "elementwise/01_thread_per_element::fill_f32");
    let buf = dev.alloc(4 * 1024).unwrap();
    let n = 1024i64;
    let bad = [
        LaunchConfig::new(1, 2048),
        LaunchConfig::new(1, (1, 1, 128)),
        LaunchConfig::new((1, 1, 1 << 20), 32),
        launch_1d(1024).with_shared_mem(dev.limits().max_shared_per_block_optin + 1),
    ];
    for cfg in bad {
        // SAFETY: arguments match fill_f32(float*, long long, float); never launched anyway.
        let err = unsafe { dev.launch(&k, cfg, &[&buf.ptr(), &n, &1f32]) }.unwrap_err();
        assert!(matches!(err, Error::LaunchConfig { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("elementwise/01_thread_per_element::fill_f32"),
            "{err}"
        );
    }
    // The device is still usable afterwards.
    elementwise::fill_f32(&dev, buf.ptr(), 1024, 3.0).unwrap();
    assert_eq!(dev.dtoh_vec::<f32>(&buf, 1024).unwrap()[1023], 3.0);
}

#[test]
fn unknown_module_or_kernel_is_a_clear_error() {
    let Some(dev) = test_device() else { return };
    let err = dev.function("no_such_module", "k").unwrap_err();
    assert!(matches!(err, Error::MissingPtx { .. }), "{err:?}");
    assert!(err.to_string().contains("build-kernels"), "{err}");
    let err = dev
        .function("elementwise/01_thread_per_element", "no_such_kernel")
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("elementwise/01_thread_per_element::no_such_kernel"),
        "{err}"
    );
}

#[test]
fn copies_and_memset() {
    let Some(dev) = test_device() else { return };
    let data: Vec<i64> = (0..1000).collect();
    let a = dev.htod(&data).unwrap();
    let b = dev.alloc(a.bytes()).unwrap();
    dev.dtod(&a, &b, a.bytes()).unwrap();
    assert_eq!(dev.dtoh_vec::<i64>(&b, 1000).unwrap(), data);
    dev.memset_zero(&b).unwrap();
    assert!(dev
        .dtoh_vec::<i64>(&b, 1000)
        .unwrap()
        .iter()
        .all(|&v| v == 0));
    dev.htod_into(&data[..10], &b).unwrap();
    assert_eq!(
        dev.dtoh_vec::<i64>(&b, 11).unwrap(),
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0]
    );

    let half: Vec<half::f16> = (0..8).map(|i| half::f16::from_f32(i as f32)).collect();
    let h = dev.htod(&half).unwrap();
    assert_eq!(dev.dtoh_vec::<half::f16>(&h, 8).unwrap(), half);

    let too_big = vec![0i64; 1001];
    assert!(matches!(
        dev.htod_into(&too_big, &a),
        Err(Error::InvalidArgument { .. })
    ));
    let mut out = vec![0i64; 1001];
    assert!(matches!(
        dev.dtoh(&a, &mut out),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        dev.dtod(&a, &b, a.bytes() + 1),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn threads_share_the_device() {
    let Some(dev) = test_device() else { return };
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let dev = dev.clone();
            std::thread::spawn(move || {
                for round in 0..20 {
                    let n = 1000 + t * 37 + round;
                    let buf = dev.alloc(n * 4).unwrap();
                    let v = (t * 100 + round) as f32;
                    elementwise::fill_f32(&dev, buf.ptr(), n, v).unwrap();
                    let out: Vec<f32> = dev.dtoh_vec(&buf, n).unwrap();
                    assert!(out.iter().all(|&x| x == v));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn events_time_work() {
    let Some(dev) = test_device() else { return };
    let buf = dev.alloc(4 << 20).unwrap();
    let start = dev.record_event().unwrap();
    for _ in 0..10 {
        elementwise::fill_f32(&dev, buf.ptr(), 1 << 20, 0.5).unwrap();
    }
    let end = dev.record_event().unwrap();
    let ms = start.elapsed_ms(&end).unwrap();
    assert!(ms > 0.0 && ms < 10_000.0, "{ms} ms");
    println!("{}: 10 fills of 4 MiB in {ms:.3} ms", dev.name());
}

/// Programmatic dependent launch (kernels/common/pdl.cuh) is in use exactly where it should be, and it
/// keeps stream order: each kernel below reads what the one before wrote (read after write) or
/// overwrites what the one before read (write after read), and the caching allocator hands the
/// blocks of dropped buffers straight back to the next iteration. Big (64 MiB) and tiny kernels
/// alternate, so a kernel that started early would read stale or half-written data.
/// Runs once with PDL as the device has it and once with it off (plain launches from the
/// compute_80 PTX), in this one process.
#[test]
fn pdl_keeps_stream_order() {
    let Some(dev) = test_device() else { return };
    pdl_on_and_off(|| stream_order(&dev));
}

/// Runs `body` with the experiment defaults and again with programmatic dependent launch off
/// on this thread.
fn pdl_on_and_off(mut body: impl FnMut()) {
    body();
    let off = camel_cuda::config::Experiments {
        pdl: false,
        ..Default::default()
    };
    camel_cuda::config::with_scoped_experiments(off, body);
}

fn stream_order(dev: &std::sync::Arc<camel_cuda::CudaDevice>) {
    let dev = dev.clone();
    let off = !camel_cuda::config::with_experiments(|e| e.pdl);
    assert_eq!(dev.pdl(), dev.compute_capability().0 >= 9 && !off);
    let k = dev
        .function("elementwise/01_thread_per_element", "fill_f32")
        .unwrap();
    assert_eq!(
        k.pdl(),
        dev.pdl(),
        "fill_f32 launched with PDL iff the device uses it"
    );
    println!(
        "{}: PDL {}",
        dev.name(),
        if dev.pdl() { "on" } else { "off" }
    );

    let n = 1usize << 24;
    let mut a = dev.alloc(n * 4).unwrap();
    elementwise::fill_f32(&dev, a.ptr(), n, 0.0).unwrap();
    let small = dev.alloc(7 * 4).unwrap();
    let mut want = 0.0f32;
    for i in 0..20 {
        let b = dev.alloc(n * 4).unwrap();
        elementwise::unary_f32(&dev, a.ptr(), b.ptr(), n, 11, 1.0).unwrap(); // b = a + 1
        elementwise::fill_f32(&dev, a.ptr(), n, i as f32).unwrap(); // overwrites what that read
        let c = dev.alloc(n * 4).unwrap();
        elementwise::binary_f32(&dev, b.ptr(), a.ptr(), c.ptr(), n, 0).unwrap(); // c = b + a
                                                                                 // a tiny kernel reading the end of the big one's output
        elementwise::unary_f32(&dev, c.ptr().add::<f32>(n - 7), small.ptr(), 7, 11, 0.5).unwrap();
        want = want + 1.0 + i as f32;
        a = c; // the old a and b go back to the cache for the next iteration
    }
    let out: Vec<f32> = dev.dtoh_vec(&a, n).unwrap();
    let bad = out.iter().filter(|&&v| v != want).count();
    assert_eq!(bad, 0, "{bad} of {n} elements differ from {want}");
    let tail: Vec<f32> = dev.dtoh_vec(&small, 7).unwrap();
    assert!(tail.iter().all(|&v| v == want + 0.5), "{tail:?}");
}

/// The kernels that ask L2 for their rows before the PDL wait and trigger their successor early
/// (softmax step 3 forward and backward, LayerNorm backward step 4; kernels/common/pdl.cuh) read what
/// the kernel just before them wrote into those rows: each input is rewritten (scaled by a new
/// factor) by the launch right before the kernel that reads it, so a prefetch that kept the old
/// contents would give the previous iteration's answer. Compared with step 1 (no prefetch, no
/// trigger) on the same GPU; shapes: 65536×65 (16 rows a block), 7×1000 and 33×768.
#[test]
fn pdl_prefetch_sees_the_write_before_it() {
    use camel_cuda::kernels::{layernorm, softmax};
    let Some(dev) = test_device() else { return };
    let close = |a: &[f32], b: &[f32], tol: f32, what: &str| {
        let worst = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs() / (1.0 + y.abs()))
            .fold(
                0.0f32,
                |m, d| if d.is_nan() { f32::INFINITY } else { m.max(d) },
            );
        assert!(worst <= tol, "{what}: worst relative difference {worst}");
    };
    for (rows, cols) in [(65536usize, 65usize), (7, 1000), (33, 768)] {
        let n = rows * cols;
        let base: Vec<f32> = (0..n)
            .map(|i| ((i * 7919 % 1000) as f32 / 500.0) - 1.0)
            .collect();
        let base = dev.htod(&base).unwrap();
        let gbase: Vec<f32> = (0..n)
            .map(|i| ((i * 104_729 % 997) as f32 / 498.5) - 1.0)
            .collect();
        let gbase = dev.htod(&gbase).unwrap();
        let [x, g, y, y1, dx, dx1] = [(); 6].map(|_| dev.alloc(n * 4).unwrap());
        let gamma = dev.htod(&vec![1.25f32; cols]).unwrap();
        let beta = dev.htod(&vec![0.5f32; cols]).unwrap();
        let [mean, rstd] = [(); 2].map(|_| dev.alloc(rows * 4).unwrap());
        let [dgam, dbet, dgam1, dbet1] = [(); 4].map(|_| dev.alloc(cols * 4).unwrap());
        for i in 1..=4 {
            let s = i as f32;
            for log in [false, true] {
                let what = format!("softmax log={log} {rows}x{cols} round {i}");
                elementwise::unary_f32(&dev, base.ptr(), x.ptr(), n, 12, s).unwrap(); // x = base·s
                softmax::warp_registers(&dev, x.ptr(), y.ptr(), rows, cols, log).unwrap();
                softmax::block_per_row(&dev, x.ptr(), y1.ptr(), rows, cols, log).unwrap();
                elementwise::unary_f32(&dev, gbase.ptr(), g.ptr(), n, 12, s).unwrap(); // g = gbase·s
                softmax::warp_registers_bwd(&dev, y1.ptr(), g.ptr(), dx.ptr(), rows, cols, log)
                    .unwrap();
                softmax::block_per_row_bwd(&dev, y1.ptr(), g.ptr(), dx1.ptr(), rows, cols, log)
                    .unwrap();
                let got: Vec<f32> = dev.dtoh_vec(&y, n).unwrap();
                let want: Vec<f32> = dev.dtoh_vec(&y1, n).unwrap();
                close(&got, &want, 1e-5, &format!("{what} forward"));
                let got: Vec<f32> = dev.dtoh_vec(&dx, n).unwrap();
                let want: Vec<f32> = dev.dtoh_vec(&dx1, n).unwrap();
                close(&got, &want, 1e-4, &format!("{what} backward"));
            }
            // LayerNorm backward: x and g each written by the launch right before their reader
            elementwise::unary_f32(&dev, base.ptr(), x.ptr(), n, 12, s).unwrap();
            layernorm::warp_welford(
                &dev,
                x.ptr(),
                gamma.ptr(),
                beta.ptr(),
                y.ptr(),
                mean.ptr(),
                rstd.ptr(),
                rows,
                cols,
                1e-5,
            )
            .unwrap();
            elementwise::unary_f32(&dev, gbase.ptr(), g.ptr(), n, 12, s).unwrap();
            layernorm::warp_pair_bwd(
                &dev,
                x.ptr(),
                gamma.ptr(),
                g.ptr(),
                mean.ptr(),
                rstd.ptr(),
                dx.ptr(),
                dgam.ptr(),
                dbet.ptr(),
                rows,
                cols,
            )
            .unwrap();
            layernorm::warp_welford_bwd(
                &dev,
                x.ptr(),
                gamma.ptr(),
                g.ptr(),
                mean.ptr(),
                rstd.ptr(),
                dx1.ptr(),
                dgam1.ptr(),
                dbet1.ptr(),
                rows,
                cols,
            )
            .unwrap();
            let what = format!("layernorm backward {rows}x{cols} round {i}");
            let got: Vec<f32> = dev.dtoh_vec(&dx, n).unwrap();
            let want: Vec<f32> = dev.dtoh_vec(&dx1, n).unwrap();
            close(&got, &want, 1e-4, &format!("{what} dx"));
            for (a, b, name) in [(&dgam, &dgam1, "dgamma"), (&dbet, &dbet1, "dbeta")] {
                let got: Vec<f32> = dev.dtoh_vec(a, cols).unwrap();
                let want: Vec<f32> = dev.dtoh_vec(b, cols).unwrap();
                close(&got, &want, 1e-3, &format!("{what} {name}"));
            }
        }
    }
}

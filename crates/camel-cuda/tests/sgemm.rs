//! Every step of the SGEMM ladder against an f64 CPU reference, on square, rectangular and odd
//! sizes, in every transpose combination, batched and broadcast. Relative error bound:
//! ‖C − C_ref‖_max ≤ 1e-5 · √k · max|A| · max|B| (f32 accumulation of k products).

use camel_cuda::kernels::matmul::{
    sgemm, sgemm_epilogue, sgemm_split_k, Activation, Epilogue, Gemm, SgemmKernel,
};
use camel_cuda::test_device;

mod common;
use common::{gemm, lcg, reference};

/// The error bound of `kernel` for one element: FP32 steps accumulate k products in f32,
/// ‖C − C_ref‖ ≤ 1e-5·√k (inputs in [−1, 1]). The TF32 steps read each input with a 10-bit
/// mantissa, a relative error u each: step 12 rounds them (u = 2⁻¹¹), step 18's tensor cores
/// read them without a rounding step of ours (u = 2⁻¹⁰ allows truncation); so
/// ‖C − C_ref‖ ≤ (2u + k·2⁻²⁴)·Σ|a||b| + 1e-5·√k.
fn tolerance(kernel: SgemmKernel, k: usize, abs: f64) -> f64 {
    let fp32 = 1e-5 * (k as f64).sqrt().max(1.0);
    let u = match kernel {
        SgemmKernel::Tf32 => 2f64.powi(-11),
        SgemmKernel::Tf32Wgmma => 2f64.powi(-10),
        _ => return fp32,
    };
    (2.0 * u + k as f64 * 2f64.powi(-24)) * abs + fp32
}

fn inputs(g: &Gemm, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let na = if g.stride_a == 0 {
        g.m * g.k
    } else {
        g.batch * g.stride_a
    };
    let nb = if g.stride_b == 0 {
        g.k * g.n
    } else {
        g.batch * g.stride_b
    };
    (lcg(seed, na), lcg(seed + 1, nb))
}

/// Runs every kernel in `kernels` on `g` (outputs poisoned with NaN first) and compares each
/// element with the f64 reference, computed once.
fn check_all(kernels: &[SgemmKernel], g: Gemm, seed: u64) {
    let Some(dev) = test_device() else { return };
    let (a, b) = inputs(&g, seed);
    let refs: Vec<_> = (0..g.batch).map(|bi| reference(&a, &b, &g, bi)).collect();
    let da = dev.htod(&a).unwrap();
    let db = dev.htod(&b).unwrap();
    // every step through `sgemm`, then step 13's own kernel forced on this shape (`sgemm`
    // hands small outputs to step 11), without and with a K split
    // (and step 13's small tiles, without and with a split)
    use camel_cuda::kernels::matmul::ASYNC_SMALL;
    let small = |i: usize| {
        let (name, bm, bn) = ASYNC_SMALL[i];
        SgemmKernel::async_small_tile(name, bm, bn)
    };
    let big = SgemmKernel::async_tile();
    let forced = [
        (big, 1),
        (big, 3),
        (small(0), 1),
        (small(0), 2),
        (small(1), 1),
        (small(1), 3),
    ];
    let runs = kernels.iter().map(|&k| (k, None, 0)).chain(
        kernels
            .contains(&SgemmKernel::AsyncPipeline)
            .then_some(forced)
            .into_iter()
            .flatten()
            .map(|(t, s)| (SgemmKernel::AsyncPipeline, Some(t), s)),
    );
    for (kernel, tile, splits) in runs {
        let dc = dev.htod(&vec![f32::NAN; g.batch * g.m * g.n]).unwrap(); // poisoned
        if splits == 0 {
            sgemm(&dev, kernel, &g, da.ptr(), db.ptr(), dc.ptr()).unwrap();
        } else {
            let t = tile.expect("forced runs name their tile");
            let epi = Epilogue::default();
            sgemm_split_k(&dev, &t, &g, da.ptr(), db.ptr(), dc.ptr(), &epi, splits).unwrap();
        }
        let c: Vec<f32> = dev.dtoh_vec(&dc, g.batch * g.m * g.n).unwrap();
        for (bi, (r, abs)) in refs.iter().enumerate() {
            for (idx, &x) in c[bi * g.m * g.n..(bi + 1) * g.m * g.n].iter().enumerate() {
                let tol = tolerance(kernel, g.k, abs[idx]);
                assert!(
                    ((x as f64) - r[idx]).abs() <= tol,
                    "{kernel:?} (forced tile {tile:?} with {splits} splits if > 0) {g:?}: batch {bi} element {idx}: got {x}, want {} (tol {tol})",
                    r[idx]
                );
            }
        }
    }
}

/// Every FP32 step and the TF32 steps.
fn every_step() -> Vec<SgemmKernel> {
    let mut v = SgemmKernel::ALL.to_vec();
    v.extend(SgemmKernel::TF32);
    v
}

#[test]
fn ladder_small_and_odd_sizes_all_layouts() {
    for (m, n, k) in [
        (1, 1, 1),
        (7, 7, 7),
        (127, 127, 127),
        (128, 128, 128),
        (257, 131, 260),
        (1, 33, 7),
        (33, 1, 65),
        (64, 10, 256),
    ] {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            check_all(
                &every_step(),
                gemm(m, n, k, ta, tb),
                (m * 31 + n * 7 + k) as u64,
            );
        }
    }
}

/// Every step with programmatic dependent launch off on this thread (plain launches of the
/// compute_80 PTX), where the defaults run the PDL builds.
#[test]
fn ladder_with_pdl_off() {
    let off = camel_cuda::config::Experiments {
        pdl: false,
        ..Default::default()
    };
    camel_cuda::config::with_scoped_experiments(off, || {
        for (m, n, k) in [
            (7, 7, 7),
            (257, 131, 260),
            (64, 784, 256),
            (1000, 1000, 1000),
        ] {
            for (ta, tb) in [(false, false), (true, true)] {
                check_all(&every_step(), gemm(m, n, k, ta, tb), (m + n + k) as u64);
            }
        }
    });
}

#[test]
fn ladder_large_sizes() {
    let all = every_step();
    check_all(&all, gemm(1000, 1000, 1000, false, false), 1);
    check_all(&all, gemm(1025, 1025, 1025, false, true), 2);
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        check_all(&all, gemm(4097, 33, 511, ta, tb), 3);
    }
}

#[test]
fn ladder_batched_and_broadcast() {
    let all = every_step();
    let (m, n, k) = (33, 17, 45);
    // batch strides 33·45 and 45·17 are odd: every batch after the first is misaligned for float4
    check_all(
        &all,
        Gemm {
            batch: 5,
            m,
            n,
            k,
            trans_a: false,
            trans_b: false,
            stride_a: m * k,
            stride_b: k * n,
        },
        4,
    );
    check_all(
        &all,
        Gemm {
            batch: 5,
            m,
            n,
            k,
            trans_a: true,
            trans_b: true,
            stride_a: m * k,
            stride_b: 0,
        },
        5,
    );
    check_all(
        &all,
        Gemm {
            batch: 3,
            m,
            n,
            k,
            trans_a: false,
            trans_b: true,
            stride_a: 0,
            stride_b: k * n,
        },
        6,
    );
    // aligned batches (strides multiples of 4): the float4 paths with a batch offset
    check_all(
        &all,
        Gemm {
            batch: 3,
            m: 132,
            n: 68,
            k: 36,
            trans_a: true,
            trans_b: false,
            stride_a: 132 * 36,
            stride_b: 36 * 68,
        },
        7,
    );
}

/// Step 18 runs its Hopper kernel wherever TMA can address the K-major operands (on compute
/// capability 9.0; step 12 elsewhere): every transpose, broadcast A or B, a K tail, split K,
/// each tile width, persistent blocks or not; and step 12 takes K not a multiple of 4 and a
/// misaligned operand.
#[test]
fn tf32_wgmma_layouts_and_routes() {
    use camel_cuda::kernels::hgemm::tf32_wgmma_fits;
    let Some(dev) = test_device() else { return };
    let hopper = dev.compute_capability() == (9, 0);
    let batched = |m, n, k, ta, tb, sa, sb| Gemm {
        batch: 3,
        m,
        n,
        k,
        trans_a: ta,
        trans_b: tb,
        stride_a: sa,
        stride_b: sb,
    };
    let mut cases = Vec::new();
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        // a K tail inside the last 32-deep slice, M and N tails in both tile widths
        cases.push((gemm(300, 520, 100, ta, tb), true));
        // broadcast A, then broadcast B
        cases.push((batched(70, 90, 48, ta, tb, 0, 48 * 90), true));
        cases.push((batched(70, 90, 48, ta, tb, 70 * 48, 0), true));
        // few tiles and a long K: split into ranges
        cases.push((gemm(100, 200, 2048, ta, tb), true));
        // K not a multiple of 4: TMA cannot address the rows
        cases.push((gemm(65, 66, 67, ta, tb), false));
    }
    for (seed, (g, fits)) in cases.into_iter().enumerate() {
        let (a, b) = inputs(&g, 40 + seed as u64);
        let (da, db) = (dev.htod(&a).unwrap(), dev.htod(&b).unwrap());
        assert_eq!(
            tf32_wgmma_fits(&dev, &g, da.ptr(), db.ptr()),
            fits && hopper,
            "{g:?}"
        );
        // each tile width, forced through the experiment switches, with the persistent kernel
        // (three blocks, so that each runs several tiles, where it takes the product) and without
        for (width, blocks) in [64, 128, 256].into_iter().flat_map(|w| [(w, 3), (w, 0)]) {
            let e = camel_cuda::config::Experiments {
                hgemm_width: Some(width),
                hgemm_blocks: Some(blocks),
                ..camel_cuda::config::experiments()
            };
            camel_cuda::config::with_scoped_experiments(e, || {
                check_all(&[SgemmKernel::Tf32Wgmma], g, 40 + seed as u64)
            });
        }
    }
    // an operand one float past an aligned address is not 16-byte aligned for TMA
    let g = gemm(64, 64, 64, false, true);
    let a = dev.htod(&vec![0.5f32; 64 * 64 + 1]).unwrap();
    let b = dev.htod(&vec![0.25f32; 64 * 64]).unwrap();
    let a1 = camel_cuda::DevPtr(a.ptr().0 + 4);
    assert!(!tf32_wgmma_fits(&dev, &g, a1, b.ptr()));
    assert_eq!(tf32_wgmma_fits(&dev, &g, a.ptr(), b.ptr()), hopper);
    let c = dev.htod(&vec![f32::NAN; 64 * 64]).unwrap();
    sgemm(&dev, SgemmKernel::Tf32Wgmma, &g, a1, b.ptr(), c.ptr()).unwrap();
    let out: Vec<f32> = dev.dtoh_vec(&c, 64 * 64).unwrap();
    assert!(
        out.iter().all(|&x| x == 8.0),
        "64 · 0.5 · 0.25 = 8 everywhere"
    );
}

/// The fused epilogue of every step: bias, ReLU or GELU, and the saved pre-activation.
#[test]
fn ladder_fused_epilogue() {
    let Some(dev) = test_device() else { return };
    for (m, n, k, tb) in [
        (7, 33, 13, true),
        (130, 257, 64, false),
        (200, 256, 784, true),
    ] {
        let g = gemm(m, n, k, false, tb);
        let (a, b) = inputs(&g, 11);
        let bias = lcg(99, n);
        let (da, db, dbias) = (
            dev.htod(&a).unwrap(),
            dev.htod(&b).unwrap(),
            dev.htod(&bias).unwrap(),
        );
        let forced = [(SgemmKernel::AsyncPipeline, true)]; // step 13's own kernel on these shapes
        for (kernel, force) in every_step().into_iter().map(|k| (k, false)).chain(forced) {
            for act in [Activation::Identity, Activation::Relu, Activation::Gelu] {
                let dc = dev.htod(&vec![f32::NAN; m * n]).unwrap();
                let dz = dev.htod(&vec![f32::NAN; m * n]).unwrap();
                let epi = Epilogue {
                    bias: Some(dbias.ptr()),
                    act,
                    pre_act: Some(dz.ptr()),
                };
                if force {
                    let t = SgemmKernel::async_tile();
                    sgemm_split_k(&dev, &t, &g, da.ptr(), db.ptr(), dc.ptr(), &epi, 1).unwrap();
                } else {
                    sgemm_epilogue(&dev, kernel, &g, da.ptr(), db.ptr(), dc.ptr(), &epi).unwrap();
                }
                let c: Vec<f32> = dev.dtoh_vec(&dc, m * n).unwrap();
                let z: Vec<f32> = dev.dtoh_vec(&dz, m * n).unwrap();
                assert_epilogue(
                    &format!("{kernel:?} {act:?}"),
                    kernel,
                    &g,
                    &a,
                    &b,
                    &bias,
                    act,
                    &c,
                    &z,
                );
            }
        }
    }
}

/// Every tuned configuration in the tables is launchable and correct, not only the nearest
/// one, with and without split-K (odd K, batched, and with the epilogue on the split path).
#[test]
fn every_tuned_configuration_with_and_without_split_k() {
    use camel_cuda::kernels::matmul::{parse_tile_kernel, sgemm_split_k, tuned};
    let Some(dev) = test_device() else { return };
    let g = Gemm {
        batch: 2,
        m: 161,
        n: 97,
        k: 333,
        trans_a: true,
        trans_b: false,
        stride_a: 161 * 333,
        stride_b: 333 * 97,
    };
    let (a, b) = inputs(&g, 21);
    let bias = lcg(5, g.n);
    let refs: Vec<_> = (0..g.batch).map(|bi| reference(&a, &b, &g, bi).0).collect();
    let (da, db, dbias) = (
        dev.htod(&a).unwrap(),
        dev.htod(&b).unwrap(),
        dev.htod(&bias).unwrap(),
    );
    let total = g.batch * g.m * g.n;
    let mut tiles: Vec<_> = [
        ("matmul/07_autotuned", tuned::TUNED_07),
        ("matmul/10_warptiling", tuned::TUNED_10),
        ("matmul/11_double_buffering", tuned::TUNED_11),
    ]
    .into_iter()
    .flat_map(|(module, table)| {
        table
            .iter()
            .map(move |(_, _, _, name)| parse_tile_kernel(module, name).expect(name))
    })
    .collect();
    tiles.push(SgemmKernel::async_tile()); // step 13's kernel, also forced on this small shape
    for (name, bm, bn) in camel_cuda::kernels::matmul::ASYNC_SMALL {
        tiles.push(SgemmKernel::async_small_tile(name, bm, bn));
    }
    for t in &tiles {
        let name = t.kernel;
        for splits in [1, 3, 11] {
            let dc = dev.htod(&vec![f32::NAN; total]).unwrap();
            let dz = dev.htod(&vec![f32::NAN; total]).unwrap();
            let epi = Epilogue {
                bias: Some(dbias.ptr()),
                act: Activation::Relu,
                pre_act: Some(dz.ptr()),
            };
            sgemm_split_k(&dev, t, &g, da.ptr(), db.ptr(), dc.ptr(), &epi, splits).unwrap();
            let c: Vec<f32> = dev.dtoh_vec(&dc, total).unwrap();
            let z: Vec<f32> = dev.dtoh_vec(&dz, total).unwrap();

            for (idx, (&x, &zz)) in c.iter().zip(&z).enumerate() {
                let (bi, e) = (idx / (g.m * g.n), idx % (g.m * g.n));
                let pre = refs[bi][e] + bias[e % g.n] as f64;
                assert!(
                    ((zz as f64) - pre).abs() <= 2e-4 && ((x as f64) - pre.max(0.0)).abs() <= 2e-4,
                    "{name} with {splits} K-splits: element {idx}: got {x} (pre {zz}), want {} (pre {pre})",
                    pre.max(0.0)
                );
            }
        }
    }
    // a kernel that cannot split says so
    let t = SgemmKernel::SmemTiling.tile(&g);
    let dc = dev.alloc(total * 4).unwrap();
    let e = sgemm_split_k(
        &dev,
        &t,
        &g,
        da.ptr(),
        db.ptr(),
        dc.ptr(),
        &Epilogue::default(),
        2,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("cannot split K"), "{e}");
}

#[test]
fn split_k_only_for_small_outputs_with_long_k() {
    use camel_cuda::kernels::matmul::split_k_factor;
    let t = SgemmKernel::DoubleBuffering.tile(&gemm(64, 256, 784, false, false));
    assert!(split_k_factor(132, &t, &gemm(64, 256, 784, false, false)) > 1);
    assert_eq!(
        split_k_factor(132, &t, &gemm(4096, 4096, 4096, false, false)),
        1
    );
    assert_eq!(split_k_factor(132, &t, &gemm(64, 256, 40, false, false)), 1);
    // short K is not split (8192×512 with K = 128)
    let big = SgemmKernel::DoubleBuffering.tile(&gemm(8192, 512, 128, false, false));
    assert_eq!(
        split_k_factor(132, &big, &gemm(8192, 512, 128, false, false)),
        1
    );
    let naive = SgemmKernel::Naive.tile(&gemm(64, 256, 784, false, false));
    assert_eq!(
        split_k_factor(132, &naive, &gemm(64, 256, 784, false, false)),
        1
    );
}

#[test]
fn split_grids_stay_within_one_wave() {
    use camel_cuda::kernels::matmul::whole_wave_splits;
    // 36 tiles × 8 splits = 288 blocks past 264 resident: 7 splits fill one wave
    assert_eq!(whole_wave_splits(8, 36, 264), 7);
    // already within one wave, or fewer than two splits would fit: unchanged
    assert_eq!(whole_wave_splits(8, 36, 396), 8);
    assert_eq!(whole_wave_splits(3, 200, 264), 3);
    assert_eq!(whole_wave_splits(1, 36, 264), 1);
    assert_eq!(whole_wave_splits(4, 0, 264), 4);
}

/// Step 13 runs its own kernel only where it measured faster than step 11 (H100).
#[test]
fn async_pipeline_only_where_it_wins() {
    let own = |m, k, n| {
        SgemmKernel::AsyncPipeline.tile(&gemm(m, n, k, false, false)) == SgemmKernel::async_tile()
    };
    assert!(own(2048, 2048, 2048) && own(4096, 4096, 4096) && own(16384, 384, 1536));
    assert!(!own(1024, 1024, 1024)); // 32 tiles: step 11 with its tuned tile
    assert!(!own(64, 784, 256));
    assert!(!own(8192, 128, 512)); // short K
    assert!(!own(16384, 1536, 384)); // N = 384: tiles 75 % filled
                                     // small outputs with a long K (split-K shapes) get step 13's 64×64×16 kernel
    let kernel = |m, k, n| {
        SgemmKernel::AsyncPipeline
            .tile(&gemm(m, n, k, false, false))
            .kernel
    };
    assert_eq!(kernel(64, 784, 256), "sgemm_13_async_64x64x16");
    assert_eq!(kernel(256, 784, 256), "sgemm_13_async_64x64x16");
    assert!(kernel(8192, 128, 512).starts_with("sgemm_db_")); // K not split: step 11
    assert!(kernel(64, 200, 256).starts_with("sgemm_db_")); // short K
}

#[test]
fn tile_kernel_names_parse() {
    use camel_cuda::kernels::matmul::parse_tile_kernel;
    let t = parse_tile_kernel("m", "sgemm_bt_128x64x8_8x4").unwrap();
    assert_eq!((t.bm, t.bn, t.threads), (128, 64, 256));
    let t = parse_tile_kernel("m", "sgemm_db_128x128x16_64x64x4_8x4_128").unwrap();
    assert_eq!((t.bm, t.bn, t.threads), (128, 128, 128));
    assert!(parse_tile_kernel("m", "sgemm_bt_128x64_8x4").is_none());
    assert!(parse_tile_kernel("m", "sgemm_01_naive").is_none());
    for k in SgemmKernel::ALL {
        assert_eq!(SgemmKernel::from_name(k.name()), Some(k));
    }
}

/// Compares batch-major `c` (and the saved pre-activation `z`) with the f64 reference of `g`
/// through `act(· + bias)`, within `kernel`'s error bound.
#[allow(clippy::too_many_arguments)]
fn assert_epilogue(
    what: &str,
    kernel: SgemmKernel,
    g: &Gemm,
    a: &[f32],
    b: &[f32],
    bias: &[f32],
    act: Activation,
    c: &[f32],
    z: &[f32],
) {
    let gelu = |x: f64| {
        0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
    };
    let mn = g.m * g.n;
    for bi in 0..g.batch {
        let (r, abs) = reference(a, b, g, bi);
        for idx in 0..mn {
            let pre = r[idx] + bias[idx % g.n] as f64;
            let want = match act {
                Activation::Identity => pre,
                Activation::Relu => pre.max(0.0),
                Activation::Gelu => gelu(pre),
            };
            let tol = tolerance(kernel, g.k, abs[idx]) + 1e-6;
            let (cz, cc) = (z[bi * mn + idx] as f64, c[bi * mn + idx] as f64);
            assert!(
                (cz - pre).abs() <= tol,
                "{what} {g:?}: batch {bi} pre-activation {idx}: got {cz}, want {pre}"
            );
            assert!(
                (cc - want).abs() <= 1.2 * tol,
                "{what} {g:?}: batch {bi} element {idx}: got {cc}, want {want}"
            );
        }
    }
}

/// Step 13's re-layout — the k-contiguous operands transposed into workspaces, then the interior
/// Aᵀ·B kernel — in every layout, batched with a broadcast operand, with bias, GELU and the
/// saved pre-activation. Each shape is checked to take that path.
#[test]
fn relayout_every_layout_batched_with_epilogue() {
    use camel_cuda::kernels::matmul::relayout_fits;
    let Some(dev) = test_device() else { return };
    // 8×16 tiles of 128×128 × 2 batches with k % 32 ≠ 0, 16×34 tiles, and n = 1152 (a multiple
    // of 128, not of 256) with a broadcast B
    for (m, n, k, batch, ta, tb, a0, b0) in [
        (1024, 2048, 272, 2, false, false, false, true),
        (1024, 2048, 272, 2, false, true, true, false),
        (1024, 2048, 272, 2, true, false, false, false),
        (1024, 2048, 272, 2, true, true, false, true),
        (2048, 4352, 288, 1, false, false, false, false),
        (2048, 1152, 288, 2, false, false, false, true),
    ] {
        let g = Gemm {
            batch,
            m,
            n,
            k,
            trans_a: ta,
            trans_b: tb,
            stride_a: if a0 { 0 } else { m * k },
            stride_b: if b0 { 0 } else { k * n },
        };
        let (a, b) = inputs(&g, 21);
        let bias = lcg(98, n);
        let (da, db, dbias) = (
            dev.htod(&a).unwrap(),
            dev.htod(&b).unwrap(),
            dev.htod(&bias).unwrap(),
        );
        let dc = dev.htod(&vec![f32::NAN; batch * m * n]).unwrap();
        let dz = dev.htod(&vec![f32::NAN; batch * m * n]).unwrap();
        let epi = Epilogue {
            bias: Some(dbias.ptr()),
            act: Activation::Gelu,
            pre_act: Some(dz.ptr()),
        };
        assert!(
            relayout_fits(&g, da.ptr(), db.ptr(), dc.ptr(), &epi),
            "{g:?} should take the re-layout"
        );
        let before: Vec<f32> = dev.dtoh_vec(&da, a.len()).unwrap();
        let kernel = SgemmKernel::AsyncPipeline;
        sgemm_epilogue(&dev, kernel, &g, da.ptr(), db.ptr(), dc.ptr(), &epi).unwrap();
        let c: Vec<f32> = dev.dtoh_vec(&dc, batch * m * n).unwrap();
        let z: Vec<f32> = dev.dtoh_vec(&dz, batch * m * n).unwrap();
        let gelu = Activation::Gelu;
        assert_epilogue("re-layout", kernel, &g, &a, &b, &bias, gelu, &c, &z);
        // the operands themselves are left as they were (the transposes go to workspaces)
        assert_eq!(dev.dtoh_vec::<f32>(&da, a.len()).unwrap(), before);
    }
}

/// The interior kernels (Aᵀ·B, and A·B with A read in place) forced directly, without and with
/// K-splits (the split path applies the epilogue in the reduction), and refused where their
/// preconditions fail.
#[test]
fn interior_kernels_split_k_and_refusals() {
    use camel_cuda::kernels::matmul::{ASYNC_NN, ASYNC_TN};
    let Some(dev) = test_device() else { return };
    for it in ASYNC_TN.iter().chain(&ASYNC_NN) {
        let (name, bk, ta) = (it.kernel, it.bk, it.trans_a);
        let t = SgemmKernel::interior_tile(it);
        let g = gemm(256, 768, 416, ta, false); // 416 = 13·32; 768 = 3·256 = 4·192
        let (a, b) = inputs(&g, 31);
        let bias = lcg(97, g.n);
        let (da, db, dbias) = (
            dev.htod(&a).unwrap(),
            dev.htod(&b).unwrap(),
            dev.htod(&bias).unwrap(),
        );
        for (splits, act) in [(1, Activation::Relu), (3, Activation::Gelu)] {
            let dc = dev.htod(&vec![f32::NAN; g.m * g.n]).unwrap();
            let dz = dev.htod(&vec![f32::NAN; g.m * g.n]).unwrap();
            let epi = Epilogue {
                bias: Some(dbias.ptr()),
                act,
                pre_act: Some(dz.ptr()),
            };
            sgemm_split_k(&dev, &t, &g, da.ptr(), db.ptr(), dc.ptr(), &epi, splits).unwrap();
            let c: Vec<f32> = dev.dtoh_vec(&dc, g.m * g.n).unwrap();
            let z: Vec<f32> = dev.dtoh_vec(&dz, g.m * g.n).unwrap();
            let what = format!("{name}, {splits} splits");
            assert_epilogue(
                &what,
                SgemmKernel::AsyncPipeline,
                &g,
                &a,
                &b,
                &bias,
                act,
                &c,
                &z,
            );
        }
        // partial tiles, other layouts, K not a multiple of BK and a misaligned B are refused,
        // and C is left untouched
        let epi = Epilogue::default();
        for (bad, b_off) in [
            (gemm(200, 768, 416, ta, false), 0),
            (gemm(256, 768, 416, !ta, false), 0),
            (gemm(256, 768, 416, ta, true), 0),
            (gemm(256, 768, 416 - bk as usize / 2, ta, false), 0),
            (g, 4),
        ] {
            let dc = dev.htod(&vec![f32::NAN; 256 * 768]).unwrap();
            let bp = camel_cuda::DevPtr(db.ptr().0 + b_off);
            let err = sgemm_split_k(&dev, &t, &bad, da.ptr(), bp, dc.ptr(), &epi, 1).unwrap_err();
            assert!(err.to_string().contains(name), "{bad:?}: {err}");
            let c: Vec<f32> = dev.dtoh_vec(&dc, 256 * 768).unwrap();
            assert!(
                c.iter().all(|x| x.is_nan()),
                "{name} {bad:?}: C was written"
            );
        }
    }
}

/// Step 13 through `sgemm` on A·B products that take an [`ASYNC_NN`] kernel (A read in place):
/// each shape is checked to take the expected kernel, batched with a broadcast B, with bias,
/// GELU and the saved pre-activation; a misaligned A is fine (4-byte copies), a misaligned B
/// is not (another kernel runs).
#[test]
fn interior_nn_through_sgemm() {
    use camel_cuda::kernels::matmul::{async_nn_choice, relayout_fits};
    let Some(dev) = test_device() else { return };
    for (m, n, k, batch, want) in [
        (3840, 512, 48, 1, "sgemm_13_async_64x256x16_nn"),
        (1920, 512, 80, 2, "sgemm_13_async_64x256x16_nn"),
        (7680, 384, 32, 1, "sgemm_13_async_128x192x16_nn"),
        (2560, 768, 208, 2, "sgemm_13_async_128x192x16_nn"),
    ] {
        let g = Gemm {
            batch,
            stride_b: 0,
            ..gemm(m, n, k, false, false)
        };
        let (mut a, b) = inputs(&g, 61);
        a.push(0.5); // one float more, so that A can start 4 bytes in
        let bias = lcg(94, n);
        let (da, db, dbias) = (
            dev.htod(&a).unwrap(),
            dev.htod(&b).unwrap(),
            dev.htod(&bias).unwrap(),
        );
        let len = batch * m * n;
        for a_off in [0, 4] {
            let dc = dev.htod(&vec![f32::NAN; len]).unwrap();
            let dz = dev.htod(&vec![f32::NAN; len]).unwrap();
            let epi = Epilogue {
                bias: Some(dbias.ptr()),
                act: Activation::Gelu,
                pre_act: Some(dz.ptr()),
            };
            let ap = camel_cuda::DevPtr(da.ptr().0 + a_off);
            let (bp, cp) = (db.ptr(), dc.ptr());
            assert!(!relayout_fits(&g, ap, bp, cp, &epi), "{g:?}: n < 1024");
            let chosen = async_nn_choice(&g, ap, bp, cp, &epi).map(|t| t.kernel);
            assert_eq!(chosen, Some(want), "{g:?}");
            let bad_b = camel_cuda::DevPtr(bp.0 + 4);
            assert!(async_nn_choice(&g, ap, bad_b, cp, &epi).is_none());
            sgemm_epilogue(&dev, SgemmKernel::AsyncPipeline, &g, ap, bp, cp, &epi).unwrap();
            let c: Vec<f32> = dev.dtoh_vec(&dc, len).unwrap();
            let z: Vec<f32> = dev.dtoh_vec(&dz, len).unwrap();
            let a_used = &a[a_off as usize / 4..][..a.len() - 1];
            let what = format!("{want}, A offset {a_off}");
            let gelu = Activation::Gelu;
            assert_epilogue(
                &what,
                SgemmKernel::AsyncPipeline,
                &g,
                a_used,
                &b,
                &bias,
                gelu,
                &c,
                &z,
            );
        }
    }
    // too few tiles (1024³: 64 of 64×256), or not whole tiles: none
    let p = camel_cuda::DevPtr(0x1000);
    let none = Epilogue::default();
    assert!(async_nn_choice(&gemm(1024, 1024, 1024, false, false), p, p, p, &none).is_none());
    assert!(async_nn_choice(&gemm(8192, 500, 128, false, false), p, p, p, &none).is_none());
    assert!(async_nn_choice(&gemm(8192, 512, 128, true, false), p, p, p, &none).is_none());
}

/// The fused K-reduction (partials summed inside the GEMM's launch) against the separate
/// reduction kernel: bit-identical C and pre-activation on model, odd and clipped-tile shapes,
/// batched with a broadcast operand, with bias and GELU, for several split counts; repeated runs
/// and a change of shape reuse the device's counters (which the kernel must leave zero). A
/// kernel without a fused form is refused when the fused one is demanded.
#[test]
fn fused_k_reduction_matches_the_separate_kernel() {
    use camel_cuda::kernels::matmul::{sgemm_split_k_reduce, SplitReduce};
    let Some(dev) = test_device() else { return };
    let t = SgemmKernel::async_small_tile("sgemm_13_async_64x64x16", 64, 64);
    for (m, k, n, batch, ta, tb, splits) in [
        (64, 784, 256, 1, false, false, 13),
        (64, 784, 256, 1, false, false, 13), // again: the counters were reset
        (256, 784, 256, 1, false, true, 5),
        (7, 300, 33, 1, true, false, 3),
        (130, 1000, 257, 2, false, false, 7),
        (1, 512, 1, 2, true, true, 16),
    ] {
        let g = Gemm {
            batch,
            stride_b: if batch > 1 { 0 } else { k * n },
            ..gemm(m, n, k, ta, tb)
        };
        let (a, b) = inputs(&g, 51);
        let bias = lcg(95, n);
        let (da, db, dbias) = (
            dev.htod(&a).unwrap(),
            dev.htod(&b).unwrap(),
            dev.htod(&bias).unwrap(),
        );
        let len = batch * m * n;
        let mut out = Vec::new();
        for reduce in [
            SplitReduce::Separate,
            SplitReduce::Fused,
            SplitReduce::Fused,
        ] {
            let dc = dev.htod(&vec![f32::NAN; len]).unwrap();
            let dz = dev.htod(&vec![f32::NAN; len]).unwrap();
            let epi = Epilogue {
                bias: Some(dbias.ptr()),
                act: Activation::Gelu,
                pre_act: Some(dz.ptr()),
            };
            let (ap, bp, cp) = (da.ptr(), db.ptr(), dc.ptr());
            sgemm_split_k_reduce(&dev, &t, &g, ap, bp, cp, &epi, splits, reduce).unwrap();
            let c: Vec<f32> = dev.dtoh_vec(&dc, len).unwrap();
            let z: Vec<f32> = dev.dtoh_vec(&dz, len).unwrap();
            out.push((reduce, c, z));
        }
        let (_, c0, z0) = &out[0];
        let what = format!("{g:?}, {splits} splits");
        let gelu = Activation::Gelu;
        assert_epilogue(
            &what,
            SgemmKernel::AsyncPipeline,
            &g,
            &a,
            &b,
            &bias,
            gelu,
            c0,
            z0,
        );
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (reduce, c, z) in &out[1..] {
            assert!(
                bits(c) == bits(c0),
                "{what} {reduce:?}: C differs from the separate sum"
            );
            assert!(
                bits(z) == bits(z0),
                "{what} {reduce:?}: Z differs from the separate sum"
            );
        }
    }
    // a kernel with no fused form: refused with its name, C untouched
    let t11 = SgemmKernel::async_small_tile("sgemm_13_async_64x128x16", 64, 128);
    let g = gemm(64, 256, 784, false, false);
    let (a, b) = inputs(&g, 52);
    let (da, db) = (dev.htod(&a).unwrap(), dev.htod(&b).unwrap());
    let dc = dev.htod(&vec![f32::NAN; 64 * 256]).unwrap();
    let none = Epilogue::default();
    let (ap, bp, cp) = (da.ptr(), db.ptr(), dc.ptr());
    let err =
        sgemm_split_k_reduce(&dev, &t11, &g, ap, bp, cp, &none, 4, SplitReduce::Fused).unwrap_err();
    assert!(err.to_string().contains("64x128x16"), "{err}");
    let c: Vec<f32> = dev.dtoh_vec(&dc, 64 * 256).unwrap();
    assert!(c.iter().all(|x| x.is_nan()), "C was written");
}

/// The residency rule of kernels whose blocks wait for each other (no GPU needed).
#[test]
fn all_resident_by_registers_and_shared_memory() {
    use camel_cuda::kernels::matmul::all_resident;
    use camel_cuda::{DeviceLimits, Dim3, KernelLimits};
    let h100 = DeviceLimits {
        compute_capability: (9, 0),
        sm_count: 132,
        warp_size: 32,
        max_threads_per_block: 1024,
        max_block: Dim3::xyz(1024, 1024, 64),
        max_grid: Dim3::xyz(i32::MAX as u32, 65535, 65535),
        max_shared_per_block: 48 * 1024,
        max_shared_per_block_optin: 227 * 1024,
        max_shared_per_sm: 228 * 1024,
    };
    let k = |num_regs, static_shared_bytes| KernelLimits {
        max_threads_per_block: 256,
        static_shared_bytes,
        num_regs,
    };
    // 125 registers → 4096 a warp, 8 warps: two blocks a multiprocessor
    assert!(all_resident(&h100, k(125, 34816), 256, 264));
    assert!(!all_resident(&h100, k(125, 34816), 256, 265));
    // 255 registers: one; 32 registers: six by threads (1536); 100 KB of shared memory: two
    assert!(!all_resident(&h100, k(255, 0), 256, 133));
    assert!(all_resident(&h100, k(32, 0), 256, 6 * 132));
    assert!(!all_resident(&h100, k(32, 0), 256, 6 * 132 + 1));
    assert!(!all_resident(&h100, k(32, 100 * 1024), 256, 2 * 132 + 1));
}

/// The batched transpose behind the re-layout, on odd sizes and a padded batch stride.
#[test]
fn relayout_transpose_odd_sizes() {
    use camel_cuda::kernels::matmul::transpose_f32;
    let Some(dev) = test_device() else { return };
    for (rows, cols, batch, pad) in [
        (1, 1, 1, 0),
        (7, 33, 1, 0),
        (33, 1000, 3, 5),
        (129, 31, 2, 0),
    ] {
        let stride = rows * cols + pad;
        let x = lcg(41, stride * batch);
        let dx = dev.htod(&x).unwrap();
        let dy = dev.htod(&vec![f32::NAN; rows * cols * batch]).unwrap();
        transpose_f32(&dev, dx.ptr(), dy.ptr(), rows, cols, stride, batch).unwrap();
        let y: Vec<f32> = dev.dtoh_vec(&dy, rows * cols * batch).unwrap();
        for bi in 0..batch {
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(
                        y[bi * rows * cols + c * rows + r],
                        x[bi * stride + r * cols + c],
                        "{rows}×{cols} batch {bi} ({r}, {c})"
                    );
                }
            }
        }
    }
}

/// Which products take step 13's re-layout (host-side decision, no GPU needed).
#[test]
fn relayout_only_where_it_pays_and_fits() {
    use camel_cuda::kernels::matmul::{interior_fits, relayout_fits, ASYNC_NN, ASYNC_TN};
    use camel_cuda::DevPtr;
    let (p, q) = (DevPtr(0x1000), DevPtr(0x1004)); // 16-byte aligned, and not
    let none = Epilogue::default();
    let fits = |m, k, n, ta, tb| relayout_fits(&gemm(m, n, k, ta, tb), p, p, p, &none);
    for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
        assert!(fits(4096, 4096, 4096, ta, tb), "4096³ {ta} {tb}");
    }
    assert!(fits(16384, 384, 1536, false, false)); // the model shape: n = 1536 pays for Aᵀ
    assert!(!fits(8192, 512, 512, false, false)); // n = 512: the transpose of A would not pay
    assert!(fits(8192, 512, 512, true, false)); // nothing to transpose
    assert!(!fits(4096, 4096, 4000, false, false)); // n % 128 ≠ 0
    assert!(fits(4096, 4096, 4224, false, false)); // n = 33·128
    assert!(!fits(4000, 4096, 4096, false, false)); // m % 128 ≠ 0
    assert!(!fits(4096, 4088, 4096, false, false)); // k % 16 ≠ 0
    assert!(!fits(1024, 1024, 1024, false, false)); // too few tiles: step 11
    let g = gemm(4096, 4096, 4096, false, false);
    assert!(!relayout_fits(&g, p, p, q, &none)); // C misaligned
    assert!(relayout_fits(&g, q, p, p, &none)); // A is transposed into a workspace anyway
    assert!(!relayout_fits(&g, p, q, p, &none)); // B is used in place
    let z = Epilogue {
        pre_act: Some(q),
        ..Epilogue::default()
    };
    assert!(!relayout_fits(&g, p, p, p, &z));
    let tn = |i: usize, m, n, k| {
        interior_fits(&gemm(m, n, k, true, false), &ASYNC_TN[i], p, p, p, &none)
    };
    assert!(tn(0, 128, 128, 16).is_ok() && tn(1, 128, 256, 16).is_ok());
    let err = tn(2, 128, 256, 16).unwrap_err();
    assert!(err.contains("k % 32"), "{err}");
    let err = tn(1, 128, 128, 16).unwrap_err();
    assert!(err.contains("n % 256"), "{err}");
    let err = interior_fits(&g, &ASYNC_TN[0], p, p, p, &none).unwrap_err();
    assert!(err.contains("trans_a"), "{err}");
    // A·B kernels read A in place, so A needs no alignment; B does
    let nn = gemm(128, 192, 16, false, false);
    assert!(interior_fits(&nn, &ASYNC_NN[0], q, p, p, &none).is_ok());
    let err = interior_fits(&nn, &ASYNC_NN[0], p, q, p, &none).unwrap_err();
    assert!(err.contains("16-byte aligned"), "{err}");
}

/// Step 13's whole-K kernels (all of K in shared memory for thin tiles, no split): through
/// `sgemm` on the MLP's shapes and a batched one with a broadcast B, in both layouts of B, with
/// bias, GELU and the saved pre-activation, each shape checked to take the expected kernel;
/// forced on shapes `sgemm` would not give them; refused (C untouched) where they cannot run.
#[test]
fn wholek_kernels_through_sgemm_and_refusals() {
    use camel_cuda::kernels::matmul::{async_wholek_choice, WHOLE_K};
    let Some(dev) = test_device() else { return };
    let max_smem = dev.limits().max_shared_per_block_optin as usize;
    for (m, k, n, batch, tb, want) in [
        (64, 784, 256, 1, false, Some(0)),
        (64, 784, 256, 1, true, Some(0)),
        (256, 784, 256, 1, false, Some(1)),
        (256, 784, 256, 1, true, Some(1)),
        (128, 300, 64, 2, false, Some(0)),
        (64, 1000, 32, 1, true, None), // forced: 16 tiles of 8×16 are too few for `sgemm`
    ] {
        let g = Gemm {
            batch,
            stride_b: if batch > 1 { 0 } else { k * n },
            ..gemm(m, n, k, false, tb)
        };
        let (a, b) = inputs(&g, 71);
        let bias = lcg(93, n);
        let (da, db, dbias) = (
            dev.htod(&a).unwrap(),
            dev.htod(&b).unwrap(),
            dev.htod(&bias).unwrap(),
        );
        let len = batch * m * n;
        let chosen = async_wholek_choice(&g, da.ptr(), db.ptr(), max_smem);
        assert_eq!(chosen, want, "{g:?}");
        for (i, &(name, bm, bn, _)) in WHOLE_K.iter().enumerate() {
            let forced = want.is_none() || Some(i) != want;
            if forced && !(m % bm as usize == 0 && n % bn as usize == 0) {
                continue;
            }
            let dc = dev.htod(&vec![f32::NAN; len]).unwrap();
            let dz = dev.htod(&vec![f32::NAN; len]).unwrap();
            let epi = Epilogue {
                bias: Some(dbias.ptr()),
                act: Activation::Gelu,
                pre_act: Some(dz.ptr()),
            };
            let (ap, bp, cp) = (da.ptr(), db.ptr(), dc.ptr());
            if forced {
                let t = SgemmKernel::wholek_tile(i, &g);
                sgemm_split_k(&dev, &t, &g, ap, bp, cp, &epi, 1).unwrap();
            } else {
                sgemm_epilogue(&dev, SgemmKernel::AsyncPipeline, &g, ap, bp, cp, &epi).unwrap();
            }
            let c: Vec<f32> = dev.dtoh_vec(&dc, len).unwrap();
            let z: Vec<f32> = dev.dtoh_vec(&dz, len).unwrap();
            let what = format!("{name} {g:?} (forced: {forced})");
            let gelu = Activation::Gelu;
            assert_epilogue(
                &what,
                SgemmKernel::AsyncPipeline,
                &g,
                &a,
                &b,
                &bias,
                gelu,
                &c,
                &z,
            );
        }
    }
    // refusals: Aᵀ, a partial tile, K % 4 ≠ 0, a misaligned B, too much shared memory, K-splits
    let g = gemm(64, 256, 784, false, false);
    let (a, b) = inputs(&gemm(64, 256, 4000, false, false), 72);
    let (da, db) = (dev.htod(&a).unwrap(), dev.htod(&b).unwrap());
    let none = Epilogue::default();
    for (i, bad, b_off, splits) in [
        (0, gemm(64, 256, 784, true, false), 0, 1),
        (0, gemm(60, 256, 784, false, false), 0, 1),
        (1, gemm(64, 256, 782, false, false), 0, 1),
        (0, g, 4, 1),
        (1, gemm(64, 256, 4000, false, false), 0, 1),
        (0, g, 0, 2),
    ] {
        let t = SgemmKernel::wholek_tile(i, &bad);
        let dc = dev.htod(&vec![f32::NAN; 64 * 256]).unwrap();
        let bp = camel_cuda::DevPtr(db.ptr().0 + b_off);
        let err = sgemm_split_k(&dev, &t, &bad, da.ptr(), bp, dc.ptr(), &none, splits).unwrap_err();
        assert!(err.to_string().contains(WHOLE_K[i].0), "{bad:?}: {err}");
        let c: Vec<f32> = dev.dtoh_vec(&dc, 64 * 256).unwrap();
        assert!(c.iter().all(|x| x.is_nan()), "{bad:?}: C was written");
    }
}

/// Which products take a whole-K kernel (host-side decision, no GPU needed).
#[test]
fn wholek_only_for_small_outputs_with_long_k() {
    use camel_cuda::kernels::matmul::async_wholek_choice;
    use camel_cuda::DevPtr;
    let (p, q) = (DevPtr(0x1000), DevPtr(0x1004));
    let smem = 227 * 1024;
    let pick = |m, k, n, tb| async_wholek_choice(&gemm(m, n, k, false, tb), p, p, smem);
    assert_eq!(pick(64, 784, 256, false), Some(0));
    assert_eq!(pick(256, 784, 256, true), Some(1));
    assert_eq!(pick(64, 200, 256, false), None); // K < 256: no split to replace
    assert_eq!(pick(1024, 1024, 1024, false), None); // 256 tiles of 64×64: no split either
    assert_eq!(pick(64, 784, 64, false), None); // 32 blocks of 8×16: split-K keeps more SMs busy
    assert_eq!(pick(256, 2000, 256, false), Some(0)); // 16×32 would need 384 KB, 8×16 192
    assert_eq!(pick(256, 5000, 256, false), None); // neither fits in shared memory
    assert_eq!(pick(64, 786, 256, false), None); // K % 4 ≠ 0
    let g = gemm(64, 256, 784, false, false);
    assert_eq!(async_wholek_choice(&g, q, p, smem), None); // misaligned A
    let ta = gemm(64, 256, 784, true, false);
    assert_eq!(async_wholek_choice(&ta, p, p, smem), None);
}

/// Step 13's routes for a model's thin products, through `sgemm_epilogue` with bias, GELU and
/// the saved pre-activation: `x · wᵀ` with `w` copied `k × n` for an NN interior kernel (one
/// and two batches, B broadcast or not, A 4 bytes in), and the weight gradient `gᵀ · x` on the
/// TN interior kernel with split-K. Each shape is checked to take its route, and the routes
/// to stay out where they do not apply or the switch is off.
#[test]
fn thin_routes_through_sgemm() {
    use camel_cuda::kernels::matmul::{relayout_fits, thin_tn_choice, transposed_b_choice};
    let Some(dev) = test_device() else { return };
    let run = |g: &Gemm, a_off: u64, seed: u64, want: &str| {
        let (mut a, b) = inputs(g, seed);
        a.push(0.5); // one float more, so that A can start 4 bytes in
        let bias = lcg(seed + 7, g.n);
        let (da, db, dbias) = (
            dev.htod(&a).unwrap(),
            dev.htod(&b).unwrap(),
            dev.htod(&bias).unwrap(),
        );
        let len = g.batch * g.m * g.n;
        let dc = dev.htod(&vec![f32::NAN; len]).unwrap(); // poisoned
        let dz = dev.htod(&vec![f32::NAN; len]).unwrap();
        let epi = Epilogue {
            bias: Some(dbias.ptr()),
            act: Activation::Gelu,
            pre_act: Some(dz.ptr()),
        };
        let ap = camel_cuda::DevPtr(da.ptr().0 + a_off);
        let (bp, cp) = (db.ptr(), dc.ptr());
        assert!(!relayout_fits(g, ap, bp, cp, &epi), "{g:?}");
        let chosen = transposed_b_choice(g, ap, cp, &epi)
            .or_else(|| thin_tn_choice(g, ap, bp, cp, &epi))
            .map(|t| t.kernel);
        assert_eq!(chosen, Some(want), "{g:?}");
        sgemm_epilogue(&dev, SgemmKernel::AsyncPipeline, g, ap, bp, cp, &epi).unwrap();
        let c: Vec<f32> = dev.dtoh_vec(&dc, len).unwrap();
        let z: Vec<f32> = dev.dtoh_vec(&dz, len).unwrap();
        let a_used = &a[a_off as usize / 4..][..a.len() - 1];
        let what = format!("{want}, A offset {a_off}");
        let gelu = Activation::Gelu;
        assert_epilogue(
            &what,
            SgemmKernel::AsyncPipeline,
            g,
            a_used,
            &b,
            &bias,
            gelu,
            &c,
            &z,
        );
    };
    // x · wᵀ: B stored n × k
    for (m, n, k, batch, broadcast, want) in [
        (7680, 384, 48, 1, true, "sgemm_13_async_128x192x16_nn"),
        (3840, 512, 80, 1, true, "sgemm_13_async_64x256x16_nn"),
        (3840, 384, 32, 2, true, "sgemm_13_async_128x192x16_nn"),
        (3840, 384, 64, 2, false, "sgemm_13_async_128x192x16_nn"),
    ] {
        let g = Gemm {
            batch,
            stride_b: if broadcast { 0 } else { n * k },
            ..gemm(m, n, k, false, true)
        };
        for a_off in [0, 4] {
            run(&g, a_off, 71, want);
        }
    }
    // gᵀ · x: A stored k × m, long K, a small output
    for (m, n, k) in [(384, 384, 4096), (256, 128, 1008), (128, 256, 512)] {
        run(
            &gemm(m, n, k, true, false),
            0,
            83,
            "sgemm_13_async_128x128x16_tn",
        );
    }
    let p = camel_cuda::DevPtr(0x1000);
    let none = Epilogue::default();
    // too few rows to reuse the copy of B, too few tiles, not whole tiles: no copy of B
    assert!(transposed_b_choice(&gemm(512, 384, 64, false, true), p, p, &none).is_none());
    assert!(transposed_b_choice(&gemm(2048, 384, 64, false, true), p, p, &none).is_none());
    assert!(transposed_b_choice(&gemm(7680, 380, 64, false, true), p, p, &none).is_none());
    assert!(transposed_b_choice(&gemm(7680, 384, 64, false, false), p, p, &none).is_none());
    // short K, not whole tiles, B transposed: not the TN route
    assert!(thin_tn_choice(&gemm(384, 384, 128, true, false), p, p, p, &none).is_none());
    assert!(thin_tn_choice(&gemm(384, 380, 4096, true, false), p, p, p, &none).is_none());
    assert!(thin_tn_choice(&gemm(384, 384, 4096, true, true), p, p, p, &none).is_none());
    // the switch off keeps both out
    let off = camel_cuda::config::Experiments {
        async_thin: false,
        ..Default::default()
    };
    camel_cuda::config::with_scoped_experiments(off, || {
        let g = gemm(7680, 384, 48, false, true);
        assert!(transposed_b_choice(&g, p, p, &none).is_none());
        let g = gemm(384, 384, 4096, true, false);
        assert!(thin_tn_choice(&g, p, p, p, &none).is_none());
    });
}

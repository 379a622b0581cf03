//! Every step of the tensor-core GEMM ladder (f16 and bf16) against an f64 CPU reference, at
//! odd and tile-missing sizes, in every transpose combination, batched and broadcast, with
//! misaligned operands and with the fused epilogue. Outputs are poisoned with NaN first.
//! Step 17 (TMA + wgmma) runs where TMA can address the operands and step 16 elsewhere
//! (`hgemm_route`): the shapes of `hgemm_step_17_shapes` keep every row 16-byte aligned so that
//! step 17 itself is what they check, and `hgemm_step_17_route` says which step ran.
//!
//! Error bound of one element (inputs are exact 16-bit values, so every product is exact in f32):
//! the f32 accumulation of k products errs by at most k·2⁻²³·Σ|a·b| (twice the textbook
//! (k−1)·2⁻²⁴: tensor cores may truncate while summing), and the store rounds once to the output
//! type, relative 2⁻¹¹ (f16) or 2⁻⁸ (bf16):
//!   |C − C_ref| ≤ u·|C_ref| + (1 + u)·k·2⁻²³·Σ|a·b| + 2⁻²⁴ (f16's smallest subnormal).

use camel_cuda::config::{with_scoped_experiments, Experiments};
use camel_cuda::kernels::hgemm::{
    hgemm, hgemm_plan, hgemm_route, hgemm_with_plan, hmma_width, wgmma_blocks, HgemmKernel,
    HgemmPlan,
};
use camel_cuda::kernels::matmul::{Activation, Epilogue, Gemm};
use camel_cuda::kernels::shape::Elem;
use camel_cuda::{test_device, Buffer, CudaDevice, DevPtr};
use half::{bf16, f16};

mod common;
use common::{gemm, lcg, reference};

/// Round to `elem` and back: the values the GPU sees, as f32.
fn round(elem: Elem, x: &[f32]) -> Vec<f32> {
    x.iter()
        .map(|&v| match elem {
            Elem::F16 => f16::from_f32(v).to_f32(),
            _ => bf16::from_f32(v).to_f32(),
        })
        .collect()
}

fn bits(elem: Elem, x: &[f32]) -> Vec<u16> {
    x.iter()
        .map(|&v| match elem {
            Elem::F16 => f16::from_f32(v).to_bits(),
            _ => bf16::from_f32(v).to_bits(),
        })
        .collect()
}

fn widen(elem: Elem, x: &[u16]) -> Vec<f32> {
    x.iter()
        .map(|&b| match elem {
            Elem::F16 => f16::from_bits(b).to_f32(),
            _ => bf16::from_bits(b).to_f32(),
        })
        .collect()
}

/// Unit roundoff of the output type.
fn unit(elem: Elem) -> f64 {
    match elem {
        Elem::F16 => 2f64.powi(-11),
        _ => 2f64.powi(-8),
    }
}

fn gelu(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
}

/// A buffer of `x`'s 16-bit patterns starting `offset` elements into its allocation (an offset
/// of 1 makes every 16-byte load of it misaligned).
fn upload(dev: &CudaDevice, x: &[u16], offset: usize) -> (Buffer, DevPtr) {
    let mut v = vec![0u16; offset];
    v.extend_from_slice(x);
    let buf = dev.htod(&v).unwrap();
    let ptr = DevPtr(buf.ptr().0 + 2 * offset as u64);
    (buf, ptr)
}

/// Runs every step on `g` for both element types and compares every element with the f64
/// reference: `offset` shifts A and B by that many elements; `epi` (bias, activation, saved
/// pre-activation) as in the SGEMM ladder.
fn check(g: Gemm, seed: u64, offset: usize, bias: bool, act: Activation, save: bool) {
    check_splits(g, seed, offset, bias, act, save, None);
}

/// [`check`] with `splits` K-splits forced (`None`: as `hgemm` chooses).
fn check_splits(
    g: Gemm,
    seed: u64,
    offset: usize,
    bias: bool,
    act: Activation,
    save: bool,
    splits: Option<usize>,
) {
    let Some(dev) = test_device() else { return };
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
    for elem in [Elem::F16, Elem::BF16] {
        let a = round(elem, &lcg(seed, na));
        let b = round(elem, &lcg(seed + 1, nb));
        let bv = round(elem, &lcg(seed + 2, g.n));
        let refs: Vec<_> = (0..g.batch).map(|bi| reference(&a, &b, &g, bi)).collect();
        let (_ka, pa) = upload(&dev, &bits(elem, &a), offset);
        let (_kb, pb) = upload(&dev, &bits(elem, &b), offset);
        let db = dev.htod(&bits(elem, &bv)).unwrap();
        let total = g.batch * g.m * g.n;
        let nan = match elem {
            Elem::F16 => 0x7e00u16,
            _ => 0x7fc0u16,
        };
        let sm = dev.limits().sm_count as usize;
        // every step at every tile width the step that runs has; `hgemm` itself where its plan
        // has that width
        let routed = |k| hgemm_route(&dev, k, &g, pa, pb);
        for (kernel, width) in HgemmKernel::ALL
            .iter()
            .flat_map(|&k| routed(k).widths().iter().map(move |&w| (k, w)))
        {
            let dc = dev.htod(&vec![nan; total]).unwrap(); // poisoned
            let dz = dev.htod(&vec![nan; total]).unwrap();
            let epi = Epilogue {
                bias: bias.then(|| db.ptr()),
                act,
                pre_act: save.then(|| dz.ptr()),
            };
            let plan = hgemm_plan(sm, routed(kernel), &g);
            match splits {
                None if plan.width == width => {
                    hgemm(&dev, kernel, elem, &g, pa, pb, dc.ptr(), &epi).unwrap()
                }
                _ => {
                    let plan = HgemmPlan {
                        width,
                        splits: splits.unwrap_or(plan.splits),
                    };
                    hgemm_with_plan(&dev, kernel, elem, &g, pa, pb, dc.ptr(), &epi, plan).unwrap()
                }
            }
            let c = widen(elem, &dev.dtoh_vec::<u16>(&dc, total).unwrap());
            let z = widen(elem, &dev.dtoh_vec::<u16>(&dz, total).unwrap());
            let u = unit(elem);
            for (bi, (r, abs)) in refs.iter().enumerate() {
                for idx in 0..g.m * g.n {
                    let at = bi * g.m * g.n + idx;
                    let pre = r[idx] + if bias { bv[idx % g.n] as f64 } else { 0.0 };
                    // the pre-activation is rounded to the element type before the activation
                    // only where it is saved; the activation's own error is below u·|x|
                    let err = u * pre.abs() + (1.0 + u) * g.k as f64 * 2f64.powi(-23) * abs[idx];
                    let want = match act {
                        Activation::Identity => pre,
                        Activation::Relu => pre.max(0.0),
                        Activation::Gelu => gelu(pre),
                    };
                    let tol = u * want.abs() + 1.2 * err + 2f64.powi(-24);
                    let got = c[at] as f64;
                    assert!(
                        (got - want).abs() <= tol,
                        "{kernel:?} width {width} {elem:?} {g:?} offset {offset} {act:?} splits \
                         {splits:?}: \
                         batch {bi} element {idx}: got {got}, want {want} (tol {tol:e})"
                    );
                    if save {
                        let zt = u * pre.abs() + err + 2f64.powi(-24);
                        assert!(
                            (z[at] as f64 - pre).abs() <= zt,
                            "{kernel:?} width {width} {elem:?} {g:?}: pre-activation {idx}: got {}, \
                             want {pre}",
                            z[at]
                        );
                    } else {
                        assert!(z[at].is_nan(), "{kernel:?}: Z written though not asked for");
                    }
                }
            }
        }
    }
}

fn plain(g: Gemm, seed: u64) {
    check(g, seed, 0, false, Activation::Identity, false);
}

const LAYOUTS: [(bool, bool); 4] = [(false, false), (true, false), (false, true), (true, true)];

#[test]
fn hgemm_small_and_odd_sizes_all_layouts() {
    for (m, n, k) in [
        (1, 1, 1),
        (7, 7, 7),
        (127, 127, 127),
        (128, 128, 128),
        (128, 256, 32),
        (257, 131, 260),
        (1, 33, 7),
        (33, 1, 65),
        (64, 10, 256),
        (16, 8, 16),
        (9, 24, 40),
    ] {
        for (ta, tb) in LAYOUTS {
            plain(gemm(m, n, k, ta, tb), (m * 31 + n * 7 + k) as u64);
        }
    }
}

#[test]
fn hgemm_large_sizes() {
    plain(gemm(1000, 1000, 1000, false, false), 1);
    plain(gemm(1025, 520, 1032, false, true), 2);
    for (ta, tb) in LAYOUTS {
        plain(gemm(4097, 33, 511, ta, tb), 3);
        plain(gemm(40, 300, 4097, ta, tb), 4);
    }
}

/// K cut into ranges whose partial sums are added by a second kernel: forced split counts
/// (ranges that end inside a slice, a last range shorter than the others, more splits asked
/// than K has slices), every layout, batched and broadcast, misaligned operands, and the
/// epilogue applied once after the sum.
#[test]
fn hgemm_split_k_ranges() {
    for (ta, tb) in LAYOUTS {
        for s in [2, 3, 7] {
            plain_split(gemm(40, 70, 1000, ta, tb), 20 + s as u64, s);
        }
        check_splits(
            gemm(33, 130, 777, ta, tb),
            21,
            1,
            true,
            Activation::Gelu,
            true,
            Some(4),
        );
    }
    plain_split(gemm(5, 9, 40, false, false), 22, 16);
    plain_split(
        Gemm {
            batch: 3,
            ..gemm(64, 136, 600, true, false)
        },
        23,
        3,
    );
    plain_split(
        Gemm {
            batch: 4,
            stride_b: 0,
            ..gemm(17, 33, 333, false, true)
        },
        24,
        5,
    );
    check_splits(
        gemm(130, 77, 2000, true, false),
        25,
        0,
        true,
        Activation::Relu,
        false,
        Some(6),
    );
}

/// The split policy: few output tiles and a long K split, into one wave of resident blocks; a
/// quarter of a wave of tiles or more, or a short K, do not (on 132 multiprocessors).
#[test]
fn hgemm_split_policy() {
    let splits = |k, g: Gemm| hgemm_plan(132, k, &g).splits;
    // step 16: 128-wide tiles here, two blocks a multiprocessor
    let k = HgemmKernel::Async;
    assert_eq!(splits(k, gemm(1152, 384, 16384, true, false)), 9);
    assert_eq!(splits(k, gemm(16384, 1152, 384, false, true)), 1);
    assert_eq!(splits(k, gemm(64, 256, 256, false, true)), 1);
    assert_eq!(splits(k, gemm(40, 300, 4097, false, false)), 16);
    assert_eq!(splits(k, gemm(2048, 2048, 2048, false, false)), 1);
    assert_eq!(splits(k, gemm(1024, 1024, 1024, false, false)), 1);
    // step 17: one block a multiprocessor
    let w = HgemmKernel::Wgmma;
    assert_eq!(splits(w, gemm(2048, 2048, 2048, false, false)), 1);
    assert_eq!(splits(w, gemm(1024, 1024, 1024, false, false)), 1);
    assert_eq!(splits(w, gemm(1152, 384, 16384, true, false)), 4);
    assert_eq!(splits(w, gemm(40, 300, 4097, false, false)), 16);
}

/// Step 16's tile width: 256 unless the last 256-wide column would be at most half full or the
/// grid would fill less than half a wave (on 132 multiprocessors); steps 14 and 15 have one.
#[test]
fn hgemm_step_16_width() {
    assert_eq!(hmma_width(132, &gemm(4096, 4096, 4096, false, false)), 256);
    assert_eq!(hmma_width(132, &gemm(2048, 2048, 2048, false, false)), 256);
    assert_eq!(hmma_width(132, &gemm(8192, 512, 128, false, false)), 256);
    assert_eq!(hmma_width(132, &gemm(16384, 1536, 384, false, true)), 256);
    assert_eq!(hmma_width(132, &gemm(1024, 1024, 1024, false, false)), 128);
    assert_eq!(hmma_width(132, &gemm(16384, 384, 1536, false, true)), 128);
    assert_eq!(hmma_width(132, &gemm(256, 256, 784, false, false)), 128);
    assert_eq!(hmma_width(132, &gemm(4097, 33, 511, false, false)), 128);
    let g = gemm(8, 8, 8, false, false);
    assert_eq!(hgemm_plan(132, HgemmKernel::Swizzle, &g).width, 128);
}

/// A plan whose tile width the step does not have is refused, naming the widths it has.
#[test]
fn hgemm_plan_with_a_width_the_step_lacks_is_an_error() {
    let Some(dev) = test_device() else { return };
    let buf = dev.htod(&[0u16; 64]).unwrap();
    let (g, p) = (gemm(8, 8, 8, false, false), buf.ptr());
    for (kernel, width) in [(HgemmKernel::Swizzle, 256), (HgemmKernel::Async, 64)] {
        let plan = HgemmPlan { width, splits: 1 };
        let e = hgemm_with_plan(
            &dev,
            kernel,
            Elem::BF16,
            &g,
            p,
            p,
            p,
            &Epilogue::default(),
            plan,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("block tiles") && e.contains(&width.to_string()),
            "{e}"
        );
    }
}

fn plain_split(g: Gemm, seed: u64, splits: usize) {
    check_splits(g, seed, 0, false, Activation::Identity, false, Some(splits));
}

#[test]
fn hgemm_k_zero_gives_zeros() {
    plain(gemm(9, 17, 0, false, false), 5);
}

#[test]
fn hgemm_batched_and_broadcast() {
    let (m, n, k) = (33, 17, 45);
    // odd batch strides: every batch after the first is misaligned for 16-byte loads
    plain(
        Gemm {
            batch: 5,
            ..gemm(m, n, k, false, false)
        },
        6,
    );
    plain(
        Gemm {
            batch: 5,
            stride_b: 0,
            ..gemm(m, n, k, true, true)
        },
        7,
    );
    plain(
        Gemm {
            batch: 3,
            stride_a: 0,
            ..gemm(m, n, k, false, true)
        },
        8,
    );
    // aligned batches: the 16-byte paths with a batch offset
    for (ta, tb) in LAYOUTS {
        plain(
            Gemm {
                batch: 3,
                ..gemm(136, 264, 72, ta, tb)
            },
            9,
        );
    }
}

#[test]
fn hgemm_misaligned_operands() {
    // leading dimensions that are multiples of 8 but base pointers 2 bytes off 16-byte alignment
    for (ta, tb) in LAYOUTS {
        check(
            gemm(130, 72, 96, ta, tb),
            10,
            1,
            false,
            Activation::Identity,
            false,
        );
    }
}

#[test]
fn hgemm_fused_epilogue() {
    for (ta, tb) in [(false, true), (true, false)] {
        check(
            gemm(130, 77, 64, ta, tb),
            11,
            0,
            true,
            Activation::Relu,
            false,
        );
        check(
            gemm(130, 78, 64, ta, tb),
            12,
            0,
            true,
            Activation::Gelu,
            true,
        );
        check(
            gemm(19, 256, 33, ta, tb),
            13,
            0,
            false,
            Activation::Gelu,
            true,
        );
    }
}

#[test]
fn hgemm_refuses_other_element_types() {
    let Some(dev) = test_device() else { return };
    let g = gemm(4, 4, 4, false, false);
    let buf = dev.alloc(64).unwrap();
    let p = buf.ptr();
    let err = hgemm(
        &dev,
        HgemmKernel::BEST,
        Elem::F32,
        &g,
        p,
        p,
        p,
        &Epilogue::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("f16 or bf16"), "{err}");
}

/// Step 17 at shapes whose rows are all multiples of 8 elements (so TMA addresses them and
/// step 17 runs, not step 16), none a multiple of its 128×256 or 128×128 tiles or of its 64-deep
/// K slices: every layout, one row, batched and broadcast, the epilogue, forced K-splits.
#[test]
fn hgemm_step_17_shapes() {
    for (m, n, k) in [(8, 8, 8), (136, 264, 72), (64, 784, 256), (4104, 40, 504)] {
        for (ta, tb) in LAYOUTS {
            plain(gemm(m, n, k, ta, tb), (m + n + k) as u64);
        }
    }
    // A not transposed: its rows are K long, so M may be anything
    for (m, n, k) in [(1, 16, 8), (127, 264, 72), (1025, 136, 1000)] {
        plain(gemm(m, n, k, false, true), (m + 2 * n + k) as u64);
        plain(gemm(m, n, k, false, false), (m + 3 * n + k) as u64);
    }
    for (ta, tb) in LAYOUTS {
        plain(
            Gemm {
                batch: 3,
                ..gemm(136, 264, 72, ta, tb)
            },
            30,
        );
        plain(
            Gemm {
                batch: 4,
                stride_b: 0,
                ..gemm(72, 136, 200, ta, tb)
            },
            31,
        );
        check(
            gemm(136, 80, 1000, ta, tb),
            32,
            0,
            true,
            Activation::Gelu,
            true,
        );
        plain_split(gemm(40, 72, 1000, ta, tb), 33, 3);
    }
    check_splits(
        gemm(130, 80, 2000, false, true),
        34,
        0,
        true,
        Activation::Relu,
        false,
        Some(6),
    );
}

/// Which step runs when step 17 is asked for: step 17 on a compute capability 9.0 device when
/// every operand row and batch stride is 16-byte aligned and K > 0, step 16 otherwise; other
/// steps run as asked.
#[test]
fn hgemm_step_17_route() {
    let Some(dev) = test_device() else { return };
    let buf = dev.alloc(1 << 16).unwrap();
    let p = buf.ptr();
    let w = HgemmKernel::Wgmma;
    let here = if dev.compute_capability() == (9, 0) {
        HgemmKernel::Wgmma
    } else {
        HgemmKernel::Async
    };
    let route = |g: &Gemm, a: DevPtr| hgemm_route(&dev, w, g, a, p);
    assert_eq!(route(&gemm(136, 264, 72, false, true), p), here);
    assert_eq!(route(&gemm(9, 8, 8, false, false), p), here);
    assert_eq!(route(&gemm(7, 7, 7, false, false), p), HgemmKernel::Async);
    // A transposed: its rows are M long
    assert_eq!(route(&gemm(9, 8, 8, true, false), p), HgemmKernel::Async);
    // a base 2 bytes off 16-byte alignment, K = 0, an odd batch stride
    assert_eq!(
        route(&gemm(8, 8, 8, false, false), DevPtr(p.0 + 2)),
        HgemmKernel::Async
    );
    assert_eq!(route(&gemm(8, 8, 0, false, false), p), HgemmKernel::Async);
    let odd = Gemm {
        batch: 2,
        stride_a: 68,
        ..gemm(8, 8, 8, false, false)
    };
    assert_eq!(route(&odd, p), HgemmKernel::Async);
    let g = gemm(7, 7, 7, false, false);
    assert_eq!(
        hgemm_route(&dev, HgemmKernel::Swizzle, &g, p, p),
        HgemmKernel::Swizzle
    );
}

/// Step 17's tile width: 256 for grids of several waves; 128 where the grid is under a wave or
/// 256-wide tiles leave half a tile empty; 64 where its blocks, split as they would be, fill the
/// GPU better than 128-wide ones (on 132 multiprocessors).
#[test]
fn hgemm_step_17_width() {
    let plan = |g: Gemm| {
        let p = hgemm_plan(132, HgemmKernel::Wgmma, &g);
        (p.width, p.splits)
    };
    assert_eq!(plan(gemm(4096, 4096, 4096, false, false)), (256, 1));
    assert_eq!(plan(gemm(2048, 2048, 2048, false, false)), (256, 1));
    assert_eq!(plan(gemm(1024, 1024, 1024, false, false)), (64, 1));
    assert_eq!(plan(gemm(16384, 384, 1536, false, true)), (128, 1));
    assert_eq!(plan(gemm(16384, 1536, 384, false, true)), (256, 1));
    // a weight gradient: 27 tiles of 128 split four ways, not 54 of 64 that could not split
    assert_eq!(plan(gemm(1152, 384, 16384, true, false)), (128, 4));
    // the MLP's layers: 4 or 8 tiles of 64, each split three ways
    assert_eq!(plan(gemm(64, 256, 784, false, false)), (64, 3));
    assert_eq!(plan(gemm(256, 256, 784, false, false)), (64, 3));
    assert_eq!(plan(gemm(40, 300, 4097, false, false)), (64, 16));
}

/// Step 17's persistent kernel, forced with three blocks so that each runs many tiles and the
/// pipeline's phases and the output buffers run on from one tile to the next: tails in M, N and
/// K (a consumer whose rows all lie past M), every layout, batched and broadcast, the epilogue;
/// and an output it cannot store, which the other kernel takes.
#[test]
fn hgemm_step_17_persistent() {
    let few = Experiments {
        hgemm_blocks: Some(3),
        ..Experiments::default()
    };
    with_scoped_experiments(few, || {
        for (ta, tb) in LAYOUTS {
            plain(gemm(1000, 1000, 200, ta, tb), 40);
            plain(
                Gemm {
                    batch: 3,
                    ..gemm(136, 264, 72, ta, tb)
                },
                41,
            );
            plain(
                Gemm {
                    batch: 4,
                    stride_b: 0,
                    ..gemm(200, 136, 200, ta, tb)
                },
                42,
            );
            check(
                gemm(264, 520, 1000, ta, tb),
                43,
                0,
                true,
                Activation::Gelu,
                false,
            );
        }
        // rows of C that TMA cannot address (263 elements): the kernel a block a tile
        plain(gemm(300, 263, 72, false, true), 44);
    });
}

/// Where step 17's persistent kernel runs: the fewest blocks that take the tiles in the rounds
/// one block a multiprocessor needs, or the blocks forced; never with K split, the
/// pre-activation saved, 64-wide tiles, or rows of C TMA cannot address.
#[test]
fn hgemm_step_17_persistent_route() {
    let Some(dev) = test_device() else { return };
    if dev.compute_capability() != (9, 0) {
        return; // the kernel is Hopper's
    }
    let buf = dev.alloc(1 << 16).unwrap();
    let c = buf.ptr();
    let sm = dev.limits().sm_count as usize;
    let g = gemm(4096, 4096, 4096, false, false);
    let plain = Epilogue::default();
    let one = HgemmPlan {
        width: 256,
        splits: 1,
    };
    let blocks = |elem, g: &Gemm, c, epi: &Epilogue, plan, tiles| {
        wgmma_blocks(&dev, elem, g, c, epi, plan, tiles)
    };
    // as many rounds of tiles as one block a multiprocessor needs, on the fewest blocks
    assert_eq!(blocks(Elem::BF16, &g, c, &plain, one, sm), Some(sm));
    assert_eq!(
        blocks(Elem::BF16, &g, c, &plain, one, sm + 1),
        Some((sm + 1).div_ceil(2))
    );
    assert_eq!(
        blocks(Elem::BF16, &g, c, &plain, one, 4 * sm - 4),
        Some(sm - 1)
    );
    assert_eq!(blocks(Elem::F16, &g, c, &plain, one, 7), Some(7));
    let split = HgemmPlan { splits: 2, ..one };
    assert_eq!(blocks(Elem::BF16, &g, c, &plain, split, 4 * sm), None);
    let narrow = HgemmPlan { width: 64, ..one };
    assert_eq!(blocks(Elem::BF16, &g, c, &plain, narrow, 4 * sm), None);
    let save = Epilogue {
        pre_act: Some(c),
        ..Epilogue::default()
    };
    assert_eq!(blocks(Elem::BF16, &g, c, &save, one, 4 * sm), None);
    assert_eq!(blocks(Elem::F32, &g, c, &plain, one, 4 * sm), Some(sm));
    let odd = gemm(4096, 4100, 4096, false, false);
    assert_eq!(blocks(Elem::BF16, &odd, c, &plain, one, 4 * sm), None);
    assert_eq!(
        blocks(Elem::BF16, &g, DevPtr(c.0 + 2), &plain, one, 4 * sm),
        None
    );
    let few = Experiments {
        hgemm_blocks: Some(3),
        ..Experiments::default()
    };
    with_scoped_experiments(few.clone(), || {
        assert_eq!(blocks(Elem::BF16, &g, c, &plain, one, 2), Some(2));
        assert_eq!(blocks(Elem::BF16, &g, c, &plain, one, 40), Some(3));
    });
    let never = Experiments {
        hgemm_blocks: Some(0),
        ..few
    };
    with_scoped_experiments(never, || {
        assert_eq!(blocks(Elem::BF16, &g, c, &plain, one, 4 * sm), None);
    });
}

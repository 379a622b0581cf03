//! Every step of the SGEMM ladder against an f64 CPU reference, on square, rectangular and odd
//! sizes, in every transpose combination, batched and broadcast. Relative error bound:
//! ‖C − C_ref‖_max ≤ 1e-5 · √k · max|A| · max|B| (f32 accumulation of k products).

use camel_cuda::kernels::matmul::{sgemm, Gemm, SgemmKernel};
use camel_cuda::test_device;

fn lcg(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn reference(a: &[f32], b: &[f32], g: &Gemm, bi: usize) -> Vec<f64> {
    let (m, n, k) = (g.m, g.n, g.k);
    let a = &a[bi * g.stride_a..];
    let b = &b[bi * g.stride_b..];
    let mut c = vec![0.0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            let av = if g.trans_a {
                a[p * m + i]
            } else {
                a[i * k + p]
            } as f64;
            for j in 0..n {
                let bv = if g.trans_b {
                    b[j * k + p]
                } else {
                    b[p * n + j]
                } as f64;
                c[i * n + j] += av * bv;
            }
        }
    }
    c
}

fn check(kernel: SgemmKernel, g: Gemm, seed: u64) {
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
    let (a, b) = (lcg(seed, na), lcg(seed + 1, nb));
    let da = dev.htod(&a).unwrap();
    let db = dev.htod(&b).unwrap();
    let dc = dev.htod(&vec![f32::NAN; g.batch * g.m * g.n]).unwrap(); // poisoned
    sgemm(&dev, kernel, &g, da.ptr(), db.ptr(), dc.ptr()).unwrap();
    let c: Vec<f32> = dev.dtoh_vec(&dc, g.batch * g.m * g.n).unwrap();
    let tol = 1e-5 * (g.k as f64).sqrt().max(1.0);
    for bi in 0..g.batch {
        let r = reference(&a, &b, &g, bi);
        for (idx, (&x, &y)) in c[bi * g.m * g.n..(bi + 1) * g.m * g.n]
            .iter()
            .zip(&r)
            .enumerate()
        {
            assert!(
                ((x as f64) - y).abs() <= tol,
                "{kernel:?} {g:?}: batch {bi} element {idx}: got {x}, want {y} (tol {tol})"
            );
        }
    }
}

fn gemm(m: usize, n: usize, k: usize, ta: bool, tb: bool) -> Gemm {
    Gemm {
        batch: 1,
        m,
        n,
        k,
        trans_a: ta,
        trans_b: tb,
        stride_a: m * k,
        stride_b: k * n,
    }
}

#[test]
fn ladder_small_and_odd_sizes_all_layouts() {
    for kernel in SgemmKernel::ALL {
        for (m, n, k) in [
            (1, 1, 1),
            (7, 7, 7),
            (127, 127, 127),
            (1, 33, 7),
            (33, 1, 65),
            (64, 10, 256),
        ] {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                check(kernel, gemm(m, n, k, ta, tb), (m * 31 + n * 7 + k) as u64);
            }
        }
    }
}

#[test]
fn ladder_large_sizes() {
    for kernel in SgemmKernel::ALL {
        check(kernel, gemm(1000, 1000, 1000, false, false), 1);
        check(kernel, gemm(1025, 1025, 1025, false, true), 2);
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            check(kernel, gemm(4097, 33, 511, ta, tb), 3);
        }
    }
}

#[test]
fn ladder_batched_and_broadcast() {
    for kernel in SgemmKernel::ALL {
        let (m, n, k) = (33, 17, 45);
        check(
            kernel,
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
        check(
            kernel,
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
        check(
            kernel,
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
    }
}

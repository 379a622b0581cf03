//! Helpers shared by the GEMM ladder tests (`sgemm.rs`, `hgemm.rs`).
#![allow(dead_code)]

use camel_cuda::kernels::matmul::Gemm;

/// `n` pseudo-random values in [−1, 1) from `seed` (a 64-bit LCG), the same on every run.
pub fn lcg(seed: u64, n: usize) -> Vec<f32> {
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

/// One `m × k` by `k × n` product (batch 1), dense, with the transpose flags given.
pub fn gemm(m: usize, n: usize, k: usize, ta: bool, tb: bool) -> Gemm {
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

/// (C, Σ|a||b|) in f64 for batch `bi`.
pub fn reference(a: &[f32], b: &[f32], g: &Gemm, bi: usize) -> (Vec<f64>, Vec<f64>) {
    let (m, n, k) = (g.m, g.n, g.k);
    let a = &a[bi * g.stride_a..];
    let b = &b[bi * g.stride_b..];
    let mut c = vec![0.0f64; m * n];
    let mut abs = vec![0.0f64; m * n];
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
                abs[i * n + j] += (av * bv).abs();
            }
        }
    }
    (c, abs)
}

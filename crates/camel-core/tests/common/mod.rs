//! Shared helpers of the camel-core integration tests.
//!
//! Device policy: every test body loops over [`devices`]. Inputs are made on the device; results
//! are compared with a plain-f64 reference written in the test and, on a GPU, also with the same
//! computation on the CPU.
#![allow(dead_code)]

#[allow(unused_imports)]
pub use camel_core::Activation;
#[allow(unused_imports)]
pub use camel_core::Tensor;
use camel_core::{gradcheck, Device, GradcheckOptions, Result};
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{rngs::StdRng, Rng, SeedableRng};

/// The suite's device policy lives in the library: see `camel_core::testing`.
pub use camel_core::testing::devices;

/// Proptest configuration of the suite: few cases, so it stays fast on a small CPU.
pub fn cfg() -> ProptestConfig {
    ProptestConfig::with_cases(16)
}

/// Awkward dimension sizes (miss every tile boundary; 1 is the degenerate case).
pub fn dim() -> impl Strategy<Value = usize> {
    prop::sample::select(vec![1usize, 2, 7, 33])
}

/// Small dimension sizes for gradcheck (its cost is numel × forward passes).
pub fn small_dim() -> impl Strategy<Value = usize> {
    prop::sample::select(vec![1usize, 2, 3, 7])
}

/// Shapes of rank 1..=3 from [`dim`], or a large one (≥ 1000 elements).
pub fn awkward_shape() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        4 => prop::collection::vec(dim(), 1..=3),
        1 => Just(vec![1031]),
        1 => Just(vec![33, 37]),
    ]
}

/// Shapes of rank 1..=3 from [`small_dim`].
pub fn small_shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(small_dim(), 1..=3)
}

pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

// ------------------------------------------------------------------ random data

/// `n` uniform samples in `[lo, hi)`.
pub fn rand_vec(n: usize, lo: f32, hi: f32, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(lo..hi)).collect()
}

/// `n` samples with `lo ≤ |x| < hi` and random sign (away from the kink at 0).
pub fn rand_away(n: usize, lo: f32, hi: f32, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let m = rng.gen_range(lo..hi);
            if rng.gen::<bool>() {
                m
            } else {
                -m
            }
        })
        .collect()
}

/// `n` distinct values spaced at least `gap` apart, shuffled, centred on 0 (no ties for max).
pub fn rand_distinct(n: usize, gap: f32, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut v: Vec<f32> = (0..n)
        .map(|i| (i as f32 - n as f32 / 2.0) * gap + rng.gen_range(0.0..gap * 0.25))
        .collect();
    v.shuffle(&mut rng);
    v
}

/// `n` indices uniform in `0..hi`.
pub fn rand_idx(n: usize, hi: usize, seed: u64) -> Vec<i64> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(0..hi as i64)).collect()
}

pub fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

pub fn max_abs(v: &[f32]) -> f64 {
    v.iter().fold(0.0f64, |m, &x| m.max((x as f64).abs()))
}

// ------------------------------------------------------------------ index helpers

/// Row-major multi-index of flat offset `i` in `shape`.
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

/// Flat row-major offset of multi-index `idx` in `shape`.
pub fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &s)| acc * s + i)
}

// ------------------------------------------------------------------ tensors

pub fn t(data: &[f32], shape: &[usize], dev: Device) -> Tensor {
    Tensor::from_vec(data.to_vec(), shape, dev).expect("from_vec")
}

pub fn ti(data: &[i64], shape: &[usize], dev: Device) -> Tensor {
    Tensor::from_vec_i64(data.to_vec(), shape, dev).expect("from_vec_i64")
}

/// Host data of a test input, to be made on each device.
#[derive(Clone, Debug)]
pub enum Host {
    F32(Vec<f32>, Vec<usize>),
    I64(Vec<i64>, Vec<usize>),
}

impl Host {
    pub fn on(&self, dev: Device) -> Tensor {
        match self {
            Host::F32(v, s) => t(v, s, dev),
            Host::I64(v, s) => ti(v, s, dev),
        }
    }
}

pub fn hf(v: Vec<f32>, s: &[usize]) -> Host {
    Host::F32(v, s.to_vec())
}

pub fn hi(v: Vec<i64>, s: &[usize]) -> Host {
    Host::I64(v, s.to_vec())
}

// ------------------------------------------------------------------ comparisons

/// Tolerance: an element passes when `|got − ref| ≤ atol + rtol·|ref|`.
#[derive(Clone, Copy, Debug)]
pub struct Tol {
    pub atol: f64,
    pub rtol: f64,
}

/// f32 elementwise ops against f64: `|got − ref| ≤ 1e-5 + 1e-4·|ref|`.
pub const ELEM: Tol = Tol {
    atol: 1e-5,
    rtol: 1e-4,
};

/// Exact (data movement: reshape, permute, pad, gather, ...).
pub const EXACT: Tol = Tol {
    atol: 0.0,
    rtol: 0.0,
};

pub fn assert_close(what: &str, got: &[f32], want: &[f64], tol: Tol) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: {} elements, reference has {}",
        got.len(),
        want.len()
    );
    for (i, (&g, &r)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - r).abs();
        let ok = err <= tol.atol + tol.rtol * r.abs() || (g as f64 == r);
        assert!(
            ok,
            "{what}: element {i} of {}: got {g}, reference {r}, |err| {err:e} > {:e} + {:e}·|ref|",
            got.len(),
            tol.atol,
            tol.rtol
        );
    }
}

/// Run `f` on every device: check the result's device, shape and values against the f64
/// reference; on a GPU also against the CPU result (same tolerance).
pub fn check(
    what: &str,
    shape: &[usize],
    want: &[f64],
    tol: Tol,
    f: impl Fn(Device) -> Result<Tensor>,
) {
    let mut cpu: Option<Vec<f32>> = None;
    for dev in devices() {
        let out = f(dev).unwrap_or_else(|e| panic!("{what} on {dev}: {e}"));
        assert_eq!(out.device(), dev, "{what}: result on the wrong device");
        assert_eq!(out.shape(), shape, "{what} on {dev}: shape");
        let v = out.to_vec().unwrap();
        assert_close(&format!("{what} on {dev} vs f64"), &v, want, tol);
        match &cpu {
            None => cpu = Some(v),
            Some(c) => assert_close(&format!("{what}: {dev} vs cpu"), &v, &f64s(c), tol),
        }
    }
}

/// Like [`check`] for i64 results (exact).
pub fn check_i64(what: &str, shape: &[usize], want: &[i64], f: impl Fn(Device) -> Result<Tensor>) {
    for dev in devices() {
        let out = f(dev).unwrap_or_else(|e| panic!("{what} on {dev}: {e}"));
        assert_eq!(out.shape(), shape, "{what} on {dev}: shape");
        assert_eq!(out.to_vec_i64().unwrap(), want, "{what} on {dev}");
    }
}

/// Analytic gradients of `Σ f(inputs)` for every f32 input (None for i64 inputs).
pub fn grads(
    f: &impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Host],
    dev: Device,
) -> Result<Vec<Option<Vec<f32>>>> {
    let leaves: Vec<Tensor> = inputs
        .iter()
        .map(|h| match h {
            Host::F32(..) => h.on(dev).requires_grad_(true),
            Host::I64(..) => Ok(h.on(dev)),
        })
        .collect::<Result<_>>()?;
    f(&leaves)?.sum()?.backward()?;
    leaves
        .iter()
        .map(|l| {
            if l.requires_grad() {
                Ok(Some(l.grad().expect("grad after backward").to_vec()?))
            } else {
                Ok(None)
            }
        })
        .collect()
}

/// `camel_core::gradcheck` with default options on every device; on a GPU also the analytic
/// gradients against the CPU's (`|gpu − cpu| ≤ 1e-4 + 1e-3·|cpu|`).
pub fn gradcheck_all(what: &str, f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Host]) {
    let mut cpu_grads = None;
    for dev in devices() {
        let ins: Vec<Tensor> = inputs.iter().map(|h| h.on(dev)).collect();
        gradcheck(&f, &ins, GradcheckOptions::default())
            .unwrap_or_else(|e| panic!("{what} on {dev}: {e}; inputs {inputs:?}"));
        if dev.is_cuda() {
            let c = cpu_grads.get_or_insert_with(|| grads(&f, inputs, Device::Cpu).unwrap());
            let g = grads(&f, inputs, dev).unwrap();
            for (i, (gc, gg)) in c.iter().zip(&g).enumerate() {
                if let (Some(gc), Some(gg)) = (gc, gg) {
                    let tol = Tol {
                        atol: 1e-4,
                        rtol: 1e-3,
                    };
                    assert_close(
                        &format!("{what}: grad {i}, {dev} vs cpu"),
                        gg,
                        &f64s(gc),
                        tol,
                    );
                }
            }
        }
    }
}

/// `x` rounded to the 16-bit `dtype` (f16, or bf16 for any other) and back on the host: the
/// values a 16-bit tensor made from `x` holds.
pub fn round_to_half(x: &[f32], dtype: camel_core::DType) -> Vec<f32> {
    x.iter()
        .map(|&v| match dtype {
            camel_core::DType::F16 => camel_core::f16::from_f32(v).to_f32(),
            _ => camel_core::bf16::from_f32(v).to_f32(),
        })
        .collect()
}

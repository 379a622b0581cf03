//! Matrix products of f16 and bf16 tensors: `matmul` and `linear` sum in f32 and round once, on
//! every device and (on a GPU) with every step of the tensor-core ladder; transposed views,
//! batches, the fused bias and activation, gradients in the operands' dtype, and dtype errors.
//!
//! Bound of one element, inputs exact 16-bit values (products exact in f32): the f32 sum errs by
//! at most k·2⁻²³·Σ|a·b| and the result is rounded once, relative u = 2⁻¹¹ (f16) or 2⁻⁸ (bf16).

mod common;
use camel_core::{config, Activation, DType, Device, Error, Tensor};
use common::{devices, rand_vec};

/// `x` rounded to `dtype` and back, so the f64 reference sees the values the op sees.
fn rounded(x: &[f32], dtype: DType) -> Vec<f32> {
    Tensor::from_vec(x.to_vec(), &[x.len()], Device::Cpu)
        .and_then(|t| t.to_dtype(dtype))
        .and_then(|t| t.to_vec())
        .unwrap()
}

fn unit(dtype: DType) -> f64 {
    if dtype == DType::F16 {
        2f64.powi(-11)
    } else {
        2f64.powi(-8)
    }
}

/// `[batch, m, n]` product of `a` `[batch?, m, k]` and `b` `[batch?, k, n]` in f64 (a batch of 1
/// broadcasts), with Σ|a·b| per element.
fn reference(
    a: &[f32],
    b: &[f32],
    batch: (usize, usize),
    m: usize,
    k: usize,
    n: usize,
) -> (Vec<f64>, Vec<f64>) {
    let nb = batch.0.max(batch.1);
    let (mut c, mut s) = (vec![0.0; nb * m * n], vec![0.0; nb * m * n]);
    for bi in 0..nb {
        let pa = if batch.0 == 1 { 0 } else { bi * m * k };
        let pb = if batch.1 == 1 { 0 } else { bi * k * n };
        for i in 0..m {
            for p in 0..k {
                let av = a[pa + i * k + p] as f64;
                for j in 0..n {
                    let x = av * b[pb + p * n + j] as f64;
                    c[bi * m * n + i * n + j] += x;
                    s[bi * m * n + i * n + j] += x.abs();
                }
            }
        }
    }
    (c, s)
}

fn assert_close(what: &str, got: &[f32], want: &[f64], abs: &[f64], k: usize, dtype: DType) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let u = unit(dtype);
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(abs).enumerate() {
        let tol = u * w.abs() + (1.0 + u) * k as f64 * 2f64.powi(-23) * s + 2f64.powi(-24);
        assert!(
            (g as f64 - w).abs() <= tol,
            "{what}: element {i}: got {g}, want {w} (tol {tol:e})"
        );
    }
}

/// Runs `body` once on the CPU and, on a GPU, once per tensor-core ladder step.
fn each_step(dev: Device, mut body: impl FnMut(&str)) {
    if dev == Device::Cpu {
        return body("cpu");
    }
    for kernel in camel_cuda::kernels::hgemm::HgemmKernel::ALL {
        config::with_hgemm_kernel(kernel, || body(kernel.name()));
    }
}

#[test]
fn matmul_sums_in_f32_and_rounds_once_at_awkward_sizes() {
    for dev in devices() {
        for dtype in [DType::F16, DType::BF16] {
            for (m, k, n) in [
                (1, 1, 1),
                (7, 7, 7),
                (127, 33, 129),
                (33, 1000, 17),
                (130, 72, 264),
            ] {
                let a = rounded(&rand_vec(m * k, -1.0, 1.0, (m + k) as u64), dtype);
                let b = rounded(&rand_vec(k * n, -1.0, 1.0, (k * n) as u64), dtype);
                let (want, abs) = reference(&a, &b, (1, 1), m, k, n);
                let ta = Tensor::from_vec(a.clone(), &[m, k], dev)
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap();
                let tb = Tensor::from_vec(b.clone(), &[k, n], dev)
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap();
                // the transposed operands read in place: (bᵀ)ᵀ and (aᵀ)ᵀ as views
                let tat = ta.transpose(0, 1).unwrap().contiguous().unwrap();
                let tbt = tb.transpose(0, 1).unwrap().contiguous().unwrap();
                each_step(dev, |step| {
                    for (case, c) in [
                        ("a·b", ta.matmul(&tb)),
                        ("(aᵀ)ᵀ·b", tat.transpose(0, 1).unwrap().matmul(&tb)),
                        ("a·(bᵀ)ᵀ", ta.matmul(&tbt.transpose(0, 1).unwrap())),
                        ("matmul_t", tat.matmul_t(&tbt, true, true)),
                    ] {
                        let c = c.unwrap();
                        assert_eq!((c.dtype(), c.shape()), (dtype, &[m, n][..]));
                        let what = format!("{dev} {step} {dtype} {m}x{k}x{n} {case}");
                        assert_close(&what, &c.to_vec().unwrap(), &want, &abs, k, dtype);
                    }
                });
            }
        }
    }
}

#[test]
fn batched_and_broadcast_matmul() {
    for dev in devices() {
        for dtype in [DType::F16, DType::BF16] {
            let (nb, m, k, n) = (3, 9, 40, 11);
            for (ba, bb) in [(nb, nb), (nb, 1), (1, nb)] {
                let a = rounded(&rand_vec(ba * m * k, -1.0, 1.0, 1), dtype);
                let b = rounded(&rand_vec(bb * k * n, -1.0, 1.0, 2), dtype);
                let (want, abs) = reference(&a, &b, (ba, bb), m, k, n);
                let shape = |bs: usize, r: usize, c: usize| {
                    if bs == 1 {
                        vec![r, c]
                    } else {
                        vec![bs, r, c]
                    }
                };
                let ta = Tensor::from_vec(a, &shape(ba, m, k), dev)
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap();
                let tb = Tensor::from_vec(b, &shape(bb, k, n), dev)
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap();
                each_step(dev, |step| {
                    let c = ta.matmul(&tb).unwrap();
                    assert_eq!(c.shape(), &[nb, m, n]);
                    let what = format!("{dev} {step} {dtype} batch ({ba}, {bb})");
                    assert_close(&what, &c.to_vec().unwrap(), &want, &abs, k, dtype);
                });
            }
        }
    }
}

#[test]
fn linear_applies_bias_and_activation_before_rounding() {
    for dev in devices() {
        for dtype in [DType::F16, DType::BF16] {
            let (rows, inp, out) = (37, 70, 19);
            let x = rounded(&rand_vec(rows * inp, -1.0, 1.0, 3), dtype);
            let w = rounded(&rand_vec(out * inp, -1.0, 1.0, 4), dtype);
            let bias = rounded(&rand_vec(out, -1.0, 1.0, 5), dtype);
            // x · wᵀ: the reference multiplies by the transposed weight
            let mut wt = vec![0.0; inp * out];
            for o in 0..out {
                for i in 0..inp {
                    wt[i * out + o] = w[o * inp + i];
                }
            }
            let (z, abs) = reference(&x, &wt, (1, 1), rows, inp, out);
            let z: Vec<f64> = z
                .iter()
                .enumerate()
                .map(|(i, v)| v + bias[i % out] as f64)
                .collect();
            let tx = Tensor::from_vec(x, &[rows, inp], dev)
                .unwrap()
                .to_dtype(dtype)
                .unwrap();
            let tw = Tensor::from_vec(w, &[out, inp], dev)
                .unwrap()
                .to_dtype(dtype)
                .unwrap();
            let tb = Tensor::from_vec(bias, &[out], dev)
                .unwrap()
                .to_dtype(dtype)
                .unwrap();
            each_step(dev, |step| {
                for act in [Activation::Identity, Activation::Relu] {
                    let y = tx.linear(&tw, Some(&tb), act).unwrap();
                    assert_eq!(y.dtype(), dtype);
                    let want: Vec<f64> = match act {
                        Activation::Relu => z.iter().map(|v| v.max(0.0)).collect(),
                        _ => z.clone(),
                    };
                    let what = format!("{dev} {step} {dtype} linear {act:?}");
                    assert_close(&what, &y.to_vec().unwrap(), &want, &abs, inp, dtype);
                }
            });
        }
    }
}

/// The gradients of a 16-bit product are 16-bit and equal the f32 gradients of the same values
/// within the rounding of the 16-bit products that make them.
#[test]
fn gradients_of_16_bit_products_are_16_bit() {
    for dev in devices() {
        for dtype in [DType::F16, DType::BF16] {
            let (m, k, n) = (13, 24, 9);
            let a = rounded(&rand_vec(m * k, -1.0, 1.0, 6), dtype);
            let b = rounded(&rand_vec(k * n, -1.0, 1.0, 7), dtype);
            let grads = |dt: DType| {
                let ta = Tensor::from_vec(a.clone(), &[m, k], dev)
                    .unwrap()
                    .to_dtype(dt)
                    .unwrap();
                let tb = Tensor::from_vec(b.clone(), &[k, n], dev)
                    .unwrap()
                    .to_dtype(dt)
                    .unwrap();
                let (ta, tb) = (
                    ta.requires_grad_(true).unwrap(),
                    tb.requires_grad_(true).unwrap(),
                );
                let y = ta.matmul(&tb).unwrap();
                let seed = Tensor::ones(&[m, n], dev).unwrap().to_dtype(dt).unwrap();
                y.backward_with(&seed).unwrap();
                let (ga, gb) = (ta.grad().unwrap(), tb.grad().unwrap());
                assert_eq!((ga.dtype(), gb.dtype()), (dt, dt), "{dev}");
                (ga.to_vec().unwrap(), gb.to_vec().unwrap())
            };
            let (ha, hb) = grads(dtype);
            let (fa, fb) = grads(DType::F32);
            // the seed is ones: each gradient is a sum of n (or m) values of magnitude ≤ 1
            let u = unit(dtype) as f32;
            for (h, f) in ha.iter().zip(&fa).chain(hb.iter().zip(&fb)) {
                assert!(
                    (h - f).abs() <= u * f.abs() + 1e-4,
                    "{dev} {dtype}: {h} vs {f}"
                );
            }
        }
    }
}

#[test]
fn products_refuse_mixed_dtypes_by_name() {
    for dev in devices() {
        let a = Tensor::ones(&[4, 4], dev).unwrap();
        let h = a.to_dtype(DType::F16).unwrap();
        let b = a.to_dtype(DType::BF16).unwrap();
        let i = Tensor::from_vec_i64(vec![1; 16], &[4, 4], dev).unwrap();
        for (name, r) in [
            ("matmul", h.matmul(&b)),
            ("matmul", a.matmul(&h)),
            ("matmul", i.matmul(&i)),
            (
                "linear",
                b.linear(
                    &b,
                    Some(&a.narrow(0, 0, 1).unwrap().reshape(&[4]).unwrap()),
                    Activation::Identity,
                ),
            ),
            ("linear", h.linear(&b, None, Activation::Identity)),
        ] {
            match r {
                Err(e @ Error::DTypeMismatch { .. }) => {
                    let msg = e.to_string();
                    assert!(msg.contains(name), "{dev}: {msg}");
                }
                other => panic!("{dev} {name}: expected a dtype error, got {other:?}"),
            }
        }
    }
}

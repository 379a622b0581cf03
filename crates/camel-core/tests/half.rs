//! f16 and bf16 tensors: creation, transfers, casts (checked bit for bit against the `half`
//! crate's round-to-nearest-even), elementwise ops (computed in f32, rounded once), gradients
//! through `to_dtype`, and a clear dtype error from every op that does not take them yet.

mod common;
use camel_core::{bf16, f16, DType, Device, Error, Tensor};
use common::{devices, rand_vec, round_to_half as round};

/// Values where rounding decides: ties to even in both formats, f16's overflow boundary and
/// subnormals, f32 subnormals, infinities, NaN and signed zeros.
fn special_values() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        1.0 + 2f32.powi(-11),       // f16 tie: rounds to even 1.0
        1.0 + 3.0 * 2f32.powi(-11), // f16 tie: rounds up to the even 1 + 2^-9
        1.0 + 2f32.powi(-8),        // bf16 tie: rounds to even 1.0
        1.0 + 3.0 * 2f32.powi(-8),  // bf16 tie: rounds up
        65504.0,                    // f16 max
        65519.0,                    // rounds down to 65504
        65520.0,                    // the tie above f16 max: inf
        -1.0e6,
        2f32.powi(-24),       // smallest f16 subnormal
        2f32.powi(-25),       // tie between 0 and it: 0
        3.0 * 2f32.powi(-25), // rounds up
        1.0e-40,              // an f32 subnormal
        3.389e38,             // near f32 max: bf16 rounds it to inf
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        0.1,
        -2.5,
        1.0 / 3.0,
    ];
    // awkward length: not a multiple of any vector width
    v.extend(rand_vec(1031 - v.len(), -70000.0, 70000.0, 7));
    v
}

fn same_f32(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

#[test]
fn f32_to_f16_and_bf16_round_to_nearest_even_on_every_device() {
    let x = special_values();
    for dev in devices() {
        for n in [1usize, 7, 127, x.len()] {
            let t = Tensor::from_vec(x[..n].to_vec(), &[n], dev).unwrap();
            let h = t.to_dtype(DType::F16).unwrap();
            let b = t.to_dtype(DType::BF16).unwrap();
            assert_eq!((h.dtype(), b.dtype()), (DType::F16, DType::BF16));
            let (hv, bv) = (h.to_vec_f16().unwrap(), b.to_vec_bf16().unwrap());
            for i in 0..n {
                let (want_h, want_b) = (f16::from_f32(x[i]), bf16::from_f32(x[i]));
                assert!(
                    (hv[i].is_nan() && want_h.is_nan()) || hv[i].to_bits() == want_h.to_bits(),
                    "{dev} f16({}) = {:#06x}, want {:#06x}",
                    x[i],
                    hv[i].to_bits(),
                    want_h.to_bits()
                );
                assert!(
                    (bv[i].is_nan() && want_b.is_nan()) || bv[i].to_bits() == want_b.to_bits(),
                    "{dev} bf16({}) = {:#06x}, want {:#06x}",
                    x[i],
                    bv[i].to_bits(),
                    want_b.to_bits()
                );
            }
            // widening back is exact
            let back = h.to_dtype(DType::F32).unwrap().to_vec().unwrap();
            let back_b = b.to_dtype(DType::F32).unwrap().to_vec().unwrap();
            for i in 0..n {
                assert!(same_f32(back[i], hv[i].to_f32()), "{dev} f16 → f32 at {i}");
                assert!(
                    same_f32(back_b[i], bv[i].to_f32()),
                    "{dev} bf16 → f32 at {i}"
                );
            }
            // to_vec widens too
            let direct = h.to_vec().unwrap();
            assert!(direct.iter().zip(&back).all(|(a, b)| same_f32(*a, *b)));
        }
    }
}

#[test]
fn the_rounding_cases_round_as_stated() {
    let t = Tensor::from_vec(special_values()[..15].to_vec(), &[15], Device::Cpu).unwrap();
    let h = t.to_dtype(DType::F16).unwrap().to_vec().unwrap();
    assert_eq!(h[4], 1.0);
    assert_eq!(h[5], 1.0 + 2f32.powi(-9));
    assert_eq!(h[9], 65504.0);
    assert_eq!(h[10], f32::INFINITY);
    assert_eq!(h[12], 2f32.powi(-24));
    assert_eq!(h[13], 0.0);
    assert_eq!(h[14], 2f32.powi(-23));
    let b = t.to_dtype(DType::BF16).unwrap().to_vec().unwrap();
    assert_eq!(b[6], 1.0);
    assert_eq!(b[7], 1.0 + 2f32.powi(-6));
}

#[test]
fn f16_bf16_and_i64_convert_through_f32_the_same_on_every_device() {
    let x = special_values();
    let ints: Vec<i64> = vec![0, 1, -1, 7, 2049, -65504, 65520, 1 << 40, -(1 << 53) - 1];
    for dev in devices() {
        let h = Tensor::from_vec_f16(
            x.iter().map(|&v| f16::from_f32(v)).collect(),
            &[x.len()],
            dev,
        )
        .unwrap();
        let b = h.to_dtype(DType::BF16).unwrap().to_vec_bf16().unwrap();
        let hv = h.to_vec_f16().unwrap();
        for i in 0..x.len() {
            let want = bf16::from_f32(hv[i].to_f32());
            assert!(
                (b[i].is_nan() && want.is_nan()) || b[i].to_bits() == want.to_bits(),
                "{dev} f16 → bf16 at {i}"
            );
        }
        // float → i64 truncates toward zero, saturates at i64's ends, and a NaN gives 0 (Rust's
        // `as`), from every float dtype
        let edge = [
            2.5f32,
            -2.5,
            0.75,
            -0.0,
            f32::NAN,
            1.0e9,
            f32::INFINITY,
            -1.0e30,
        ];
        let want = [
            2,
            -2,
            0,
            0,
            0,
            bf16::from_f32(1.0e9).to_f32() as i64,
            i64::MAX,
            i64::MIN,
        ];
        let small = Tensor::from_vec_bf16(
            edge.iter().map(|&v| bf16::from_f32(v)).collect(),
            &[edge.len()],
            dev,
        )
        .unwrap();
        let i = small.to_dtype(DType::I64).unwrap().to_vec_i64().unwrap();
        assert_eq!(i, want, "{dev} bf16 → i64");
        let f = Tensor::from_vec(edge.to_vec(), &[edge.len()], dev).unwrap();
        let i = f.to_dtype(DType::I64).unwrap().to_vec_i64().unwrap();
        assert_eq!(i[..5], want[..5], "{dev} f32 → i64");
        assert_eq!(i[6..], want[6..], "{dev} f32 → i64");
        // i64 → f16/bf16 rounds through f32
        let t = Tensor::from_vec_i64(ints.clone(), &[ints.len()], dev).unwrap();
        let h = t.to_dtype(DType::F16).unwrap().to_vec_f16().unwrap();
        let b = t.to_dtype(DType::BF16).unwrap().to_vec_bf16().unwrap();
        for (k, &v) in ints.iter().enumerate() {
            assert_eq!(
                h[k].to_bits(),
                f16::from_f32(v as f32).to_bits(),
                "{dev} {v}"
            );
            assert_eq!(
                b[k].to_bits(),
                bf16::from_f32(v as f32).to_bits(),
                "{dev} {v}"
            );
        }
    }
}

#[test]
fn views_copies_and_transfers_keep_16_bit_data_bit_for_bit() {
    let x: Vec<bf16> = rand_vec(7 * 33, -3.0, 3.0, 1)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    for dev in devices() {
        let t = Tensor::from_vec_bf16(x.clone(), &[7, 33], dev).unwrap();
        assert_eq!(t.to_vec_bf16().unwrap(), x, "{dev} round trip");
        // a transposed view made dense: the strided copy moves 2-byte elements
        let tt = t.transpose(0, 1).unwrap().contiguous().unwrap();
        let got = tt.to_vec_bf16().unwrap();
        for r in 0..33 {
            for c in 0..7 {
                assert_eq!(got[r * 7 + c], x[c * 33 + r], "{dev} ({r}, {c})");
            }
        }
        let n = t.narrow(1, 3, 5).unwrap().contiguous().unwrap();
        assert_eq!(n.to_vec_bf16().unwrap()[..5], x[3..8], "{dev}");
        let c = Tensor::cat(&[&t, &t.narrow(1, 0, 2).unwrap()], 1).unwrap();
        assert_eq!(c.shape(), &[7, 35]);
        assert_eq!(c.to_vec_bf16().unwrap()[33..35], x[0..2], "{dev} cat");
        assert_eq!(c.dtype(), DType::BF16);
        let h = Tensor::from_vec_f16(vec![f16::from_f32(1.5); 127], &[127], dev).unwrap();
        let on_cpu = h.to(Device::Cpu).unwrap();
        assert_eq!(on_cpu.to_vec_f16().unwrap(), vec![f16::from_f32(1.5); 127]);
    }
}

/// One unit in the last place of `dtype` at `x`: the tolerance of an op whose f32 result may
/// differ by an f32 ulp between devices (exp, tanh, …) and so round to a neighbouring value.
fn ulp(x: f32, dtype: DType) -> f32 {
    let bits = if dtype == DType::F16 { 10 } else { 7 };
    let e = x.abs().max(f32::MIN_POSITIVE).log2().floor();
    2f32.powf(e - bits as f32)
}

#[test]
fn elementwise_ops_compute_in_f32_and_round_once() {
    type Op = fn(&Tensor, &Tensor) -> camel_core::Result<Tensor>;
    let exact: [(&str, Op); 8] = [
        ("add", |a, b| a.add(b)),
        ("sub", |a, b| a.sub(b)),
        ("mul", |a, b| a.mul(b)),
        ("div", |a, b| a.div(b)),
        ("neg", |a, _| a.neg()),
        ("square", |a, _| a.square()),
        ("lt", |a, b| a.lt(b)),
        ("maximum", |a, b| a.maximum(b)),
    ];
    let transcendental: [(&str, Op); 5] = [
        ("exp", |a, _| a.exp()),
        ("tanh", |a, _| a.tanh()),
        ("gelu", |a, _| a.gelu()),
        ("sigmoid", |a, _| a.sigmoid()),
        ("relu", |a, _| a.relu()),
    ];
    for dtype in [DType::F16, DType::BF16] {
        for n in [1usize, 7, 1031] {
            let a = round(&rand_vec(n, -4.0, 4.0, n as u64), dtype);
            let b = round(&rand_vec(n, 0.5, 3.0, 2 * n as u64), dtype);
            let mut per_dev = Vec::new();
            for dev in devices() {
                let ta = Tensor::from_vec(a.clone(), &[n], dev)
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap();
                let tb = Tensor::from_vec(b.clone(), &[n], dev)
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap();
                let mut outs = Vec::new();
                for (name, f) in exact.iter().chain(&transcendental) {
                    let y = f(&ta, &tb).unwrap();
                    assert_eq!(y.dtype(), dtype, "{dev} {name}");
                    outs.push(y.to_vec().unwrap());
                }
                per_dev.push(outs);
            }
            // the CPU against the f32 function rounded once
            let cpu = &per_dev[0];
            let reference: Vec<Vec<f32>> = exact
                .iter()
                .chain(&transcendental)
                .map(|(_, f)| {
                    let ta = Tensor::from_vec(a.clone(), &[n], Device::Cpu).unwrap();
                    let tb = Tensor::from_vec(b.clone(), &[n], Device::Cpu).unwrap();
                    round(&f(&ta, &tb).unwrap().to_vec().unwrap(), dtype)
                })
                .collect();
            for (k, (name, _)) in exact.iter().chain(&transcendental).enumerate() {
                assert_eq!(cpu[k], reference[k], "cpu {name} {dtype} n={n}");
            }
            // other devices: exact for IEEE-rounded ops, within an ulp of the dtype otherwise
            for other in &per_dev[1..] {
                for (k, (name, _)) in exact.iter().chain(&transcendental).enumerate() {
                    for i in 0..n {
                        let (g, w) = (other[k][i], cpu[k][i]);
                        let tol = if k < exact.len() { 0.0 } else { ulp(w, dtype) };
                        assert!(
                            (g - w).abs() <= tol,
                            "{name} {dtype} n={n} [{i}]: gpu {g} cpu {w}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn broadcasting_and_scalar_ops_work_on_16_bit_tensors() {
    for dev in devices() {
        let a = Tensor::from_vec(rand_vec(3 * 7, -2.0, 2.0, 3), &[3, 7], dev)
            .unwrap()
            .to_dtype(DType::BF16)
            .unwrap();
        let b = Tensor::from_vec(rand_vec(7, -2.0, 2.0, 4), &[7], dev)
            .unwrap()
            .to_dtype(DType::BF16)
            .unwrap();
        let y = a.add(&b).unwrap().mul_scalar(0.5).unwrap();
        let (av, bv) = (a.to_vec().unwrap(), b.to_vec().unwrap());
        let want: Vec<f32> = (0..21)
            .map(|i| bf16::from_f32(bf16::from_f32(av[i] + bv[i % 7]).to_f32() * 0.5).to_f32())
            .collect();
        assert_eq!(y.to_vec().unwrap(), want, "{dev}");
        let m = a.gt_scalar(0.0).unwrap();
        assert_eq!(m.dtype(), DType::BF16);
        let mv = m.to_vec().unwrap();
        assert!(av
            .iter()
            .zip(&mv)
            .all(|(x, m)| *m == (*x > 0.0) as i32 as f32));
    }
}

#[test]
fn gradients_flow_through_to_dtype_in_the_source_dtype() {
    for dev in devices() {
        let xv = rand_vec(7, -2.0, 2.0, 5);
        let x = Tensor::from_vec(xv.clone(), &[7], dev)
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let c = Tensor::from_vec(vec![0.1; 7], &[7], dev)
            .unwrap()
            .to_dtype(DType::BF16)
            .unwrap();
        let y = x.to_dtype(DType::BF16).unwrap().mul(&c).unwrap();
        y.to_dtype(DType::F32)
            .unwrap()
            .sum()
            .unwrap()
            .backward()
            .unwrap();
        let g = x.grad().unwrap();
        assert_eq!(g.dtype(), DType::F32, "{dev}");
        // d/dx Σ bf16(x)·c = c, rounded to bf16 (the gradient's dtype on the way back)
        assert_eq!(g.to_vec().unwrap(), vec![bf16::from_f32(0.1).to_f32(); 7]);

        // a 16-bit leaf: the gradient keeps its dtype; broadcast gradients sum in f32
        let a = Tensor::from_vec(rand_vec(21, -1.0, 1.0, 6), &[3, 7], dev)
            .unwrap()
            .to_dtype(DType::F16)
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let b = Tensor::from_vec(vec![0.25; 7], &[7], dev)
            .unwrap()
            .to_dtype(DType::F16)
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let loss = a
            .add(&b)
            .unwrap()
            .square()
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap();
        loss.sum().unwrap().backward().unwrap();
        let (ga, gb) = (a.grad().unwrap(), b.grad().unwrap());
        assert_eq!((ga.dtype(), gb.dtype()), (DType::F16, DType::F16), "{dev}");
        let av = a.to_vec().unwrap();
        let s: Vec<f32> = (0..21)
            .map(|i| f16::from_f32(av[i] + 0.25).to_f32())
            .collect();
        let want_a: Vec<f32> = s.iter().map(|v| f16::from_f32(2.0 * v).to_f32()).collect();
        assert_eq!(ga.to_vec().unwrap(), want_a, "{dev}");
        let want_b: Vec<f32> = (0..7)
            .map(|j| f16::from_f32((0..3).map(|r| want_a[r * 7 + j]).sum::<f32>()).to_f32())
            .collect();
        let gbv = gb.to_vec().unwrap();
        for j in 0..7 {
            assert!(
                (gbv[j] - want_b[j]).abs() <= ulp(want_b[j], DType::F16),
                "{dev} {j}"
            );
        }
    }
}

#[test]
fn mixing_dtypes_is_an_error_naming_the_op_and_both_dtypes() {
    for dev in devices() {
        let a = Tensor::ones(&[2, 3], dev).unwrap();
        let b = a.to_dtype(DType::BF16).unwrap();
        for (name, r) in [
            ("add", a.add(&b)),
            ("mul", b.mul(&a)),
            ("matmul", b.matmul(&a.transpose(0, 1).unwrap())),
        ] {
            let e = r.unwrap_err();
            assert!(
                matches!(e, Error::DTypeMismatch { .. }),
                "{dev} {name}: {e:?}"
            );
            let msg = e.to_string();
            assert!(msg.contains(name) && msg.contains("bf16"), "{msg}");
        }
        assert!(b.backward_with(&a).is_err());
        let i = Tensor::from_vec_i64(vec![1, 2], &[2], dev).unwrap();
        assert!(i.clone().requires_grad_(true).is_err());
        assert!(
            i.add(&i).is_err(),
            "i64 arithmetic is not an elementwise op"
        );
    }
}

/// Every op that has no 16-bit path yet refuses such a tensor with a dtype error naming itself,
/// on every device: nothing computes in the wrong precision or reads 2-byte elements as 4-byte
/// ones. (Reductions, softmax, norms, losses, dropout and the masking ops take them:
/// `half_reduce.rs`.)
/// An f16 or bf16 embedding table: the gather returns its rows bit for bit on every device, at
/// every step of the embedding ladder that has 16-bit kernels (step 1 refuses them by name); the
/// backward sums the rows of repeated indices in f32 and rounds once, so each gradient entry is
/// within half a unit in the last place (of the dtype) of the f64 sum, plus the f32 sum's error.
#[test]
fn embedding_gathers_16_bit_rows_and_sums_their_gradients_in_f32() {
    use camel_core::backend::ladder::{with_step, Family, Step};
    for dev in devices() {
        for dtype in [DType::F16, DType::BF16] {
            for (v, d, n) in [(1, 1, 1), (7, 7, 9), (65, 64, 127), (33, 129, 1000)] {
                let tv = round(&rand_vec(v * d, -2.0, 2.0, 11), dtype);
                let iv = common::rand_idx(n, v, 12);
                let gv = round(&rand_vec(n * d, -1.0, 1.0, 13), dtype);
                for step in [Step::Two, Step::Three, Step::Four] {
                    let run = || -> camel_core::Result<(Vec<f32>, Vec<f32>)> {
                        let table = Tensor::from_vec(tv.clone(), &[v, d], dev)?
                            .to_dtype(dtype)?
                            .requires_grad_(true)?;
                        let idx = Tensor::from_vec_i64(iv.clone(), &[n], dev)?;
                        let g = Tensor::from_vec(gv.clone(), &[n, d], dev)?.to_dtype(dtype)?;
                        let y = table.embedding(&idx)?;
                        assert_eq!((y.dtype(), y.shape()), (dtype, &[n, d][..]), "{dev}");
                        // Σ y ⊙ g: the gradient reaching y is g itself
                        y.mul(&g)?.to_dtype(DType::F32)?.sum()?.backward()?;
                        let gt = table.grad().expect("the table's gradient");
                        assert_eq!(gt.dtype(), dtype, "{dev}");
                        Ok((
                            y.to_dtype(DType::F32)?.to_vec()?,
                            gt.to_dtype(DType::F32)?.to_vec()?,
                        ))
                    };
                    let what = format!("{dev} {dtype} v={v} d={d} n={n} step {step:?}");
                    let (y, gt) = with_step(Family::Embedding, step, run).expect(&what);
                    for (i, &r) in iv.iter().enumerate() {
                        let (got, want) = (&y[i * d..][..d], &tv[r as usize * d..][..d]);
                        assert!(
                            got.iter().zip(want).all(|(a, b)| same_f32(*a, *b)),
                            "{what}"
                        );
                    }
                    let mut want = vec![0.0f64; v * d];
                    for (i, &r) in iv.iter().enumerate() {
                        for j in 0..d {
                            want[r as usize * d + j] += gv[i * d + j] as f64;
                        }
                    }
                    for (k, (&got, &w)) in gt.iter().zip(&want).enumerate() {
                        let tol = 0.5 * ulp(w as f32, dtype) as f64 + 1e-5 * (1.0 + w.abs());
                        assert!(
                            (got as f64 - w).abs() <= tol,
                            "{what}: grad[{k}] {got} vs {w}"
                        );
                    }
                }
                // step 1 has no 16-bit kernels: a clear error on the GPU (the CPU has one path)
                let r = with_step(Family::Embedding, Step::One, || {
                    let table = Tensor::from_vec(tv.clone(), &[v, d], dev)?.to_dtype(dtype)?;
                    table.embedding(&Tensor::from_vec_i64(iv.clone(), &[n], dev)?)
                });
                if dev.is_cuda() {
                    let e = r.expect_err("step 1 with a 16-bit table").to_string();
                    assert!(
                        e.contains("step 1") && e.contains(&dtype.to_string()),
                        "{e}"
                    );
                } else {
                    r.expect("the CPU gathers at any step");
                }
            }
            // an index out of range is an error, as for f32
            let table = Tensor::from_vec(vec![1.0; 6], &[3, 2], dev)
                .unwrap()
                .to_dtype(dtype)
                .unwrap();
            let bad = Tensor::from_vec_i64(vec![0, 3], &[2], dev).unwrap();
            let r = table.embedding(&bad).and_then(|y| y.to_vec());
            assert!(
                matches!(
                    r,
                    Err(Error::IndexOutOfRange {
                        index: 3,
                        size: 3,
                        ..
                    })
                ),
                "{dev} {dtype}: {r:?}"
            );
        }
    }
}

#[test]
fn ops_without_16_bit_kernels_refuse_them_by_name() {
    for dev in devices() {
        for dtype in [DType::F16, DType::BF16] {
            let m = Tensor::ones(&[4, 5], dev).unwrap().to_dtype(dtype).unwrap();
            let f = Tensor::ones(&[3, 3], dev).unwrap();
            type Case<'a> = (&'a str, camel_core::Result<Tensor>);
            let cases: Vec<Case> = vec![("filter2d", m.filter2d(&f)), ("bernoulli", m.bernoulli())];
            for (name, r) in cases {
                match r {
                    Err(Error::DTypeMismatch { got, .. }) => assert_eq!(got, dtype, "{dev} {name}"),
                    Err(e) => panic!("{dev} {name} on {dtype}: not a dtype error: {e}"),
                    Ok(_) => panic!("{dev} {name} accepted {dtype} with no 16-bit kernel"),
                }
            }
        }
    }
}

#[test]
fn sixteen_bit_tensors_print_and_check_their_length() {
    let t = Tensor::from_vec_f16(
        vec![f16::from_f32(1.5), f16::from_f32(-2.0)],
        &[2],
        Device::Cpu,
    )
    .unwrap();
    assert_eq!(t.to_string(), "tensor([ 1.5000, -2.0000], dtype=f16)");
    assert!(Tensor::from_vec_bf16(vec![bf16::ONE; 3], &[2, 2], Device::Cpu).is_err());
    assert_eq!("bf16".parse::<DType>().unwrap(), DType::BF16);
    assert_eq!("half".parse::<DType>().unwrap(), DType::F16);
    assert!("f8".parse::<DType>().is_err());
    assert_eq!((DType::F16.size(), DType::BF16.size()), (2, 2));
}

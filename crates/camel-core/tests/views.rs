//! Strided views: which ops are views (shared storage, new strides, no copy), that ops read
//! views correctly on every device, `cat`/`stack` against index references, gradients through
//! views (gradcheck), and the version counter that stops a backward pass from reading data
//! written in place after the forward.

mod common;
use camel_core::{Device, Error, UpdateRule};
use common::*;
use proptest::prelude::*;

fn iota(shape: &[usize], dev: Device) -> Tensor {
    let n = numel(shape);
    t(&(0..n).map(|i| i as f32).collect::<Vec<_>>(), shape, dev)
}

/// Kernel launches so far on `dev` (0 on the CPU), to show that a view launches nothing.
fn launches(dev: Device) -> u64 {
    camel_core::testing::launch_count(dev)
}

#[test]
fn view_ops_share_storage_and_set_strides() {
    for dev in devices() {
        let x = iota(&[2, 3, 4], dev);
        let before = launches(dev);
        let tr = x.transpose(0, 2).unwrap();
        assert_eq!(
            (tr.shape(), tr.strides()),
            (&[4, 3, 2][..], &[1, 4, 12][..])
        );
        assert!(!tr.is_contiguous());
        let p = x.permute(&[1, 2, 0]).unwrap();
        assert_eq!((p.shape(), p.strides()), (&[3, 4, 2][..], &[4, 1, 12][..]));
        let n = x.narrow(1, 1, 2).unwrap();
        assert_eq!((n.strides(), n.storage_offset()), (&[12, 4, 1][..], 4));
        let e = t(&[1.0, 2.0, 3.0], &[3, 1], dev)
            .expand(&[2, 3, 5])
            .unwrap();
        assert_eq!(e.strides(), &[0, 1, 0]);
        let u = x.unsqueeze(1).unwrap();
        assert_eq!(
            (u.shape(), u.strides()),
            (&[2, 1, 3, 4][..], &[12, 12, 4, 1][..])
        );
        let s = u.squeeze(1).unwrap();
        assert_eq!(s.strides(), x.strides());
        let r = x.reshape(&[6, 4]).unwrap();
        let parts = x.split(2, 2).unwrap();
        let chunks = x.chunk(3, 1).unwrap();
        assert_eq!(launches(dev), before, "{dev}: a view launched a kernel");
        for v in [&tr, &p, &n, &u, &s, &r, &parts[0], &parts[1], &chunks[2]] {
            assert!(v.shares_storage(&x), "{dev}: {:?} is not a view", v.shape());
        }
        assert!(!e.shares_storage(&x));
        // reshape of a non-contiguous tensor copies (PyTorch's reshape does too)
        let rt = tr.reshape(&[24]).unwrap();
        assert!(!rt.shares_storage(&x));
        assert!(launches(dev) > before || !dev.is_cuda());
    }
}

#[test]
fn ops_read_views_as_their_elements() {
    for dev in devices() {
        let x = iota(&[2, 3, 4], dev);
        // transpose then an elementwise op, a reduction and contiguous()
        let tr = x.transpose(0, 2).unwrap();
        let want: Vec<f32> = (0..24)
            .map(|o| {
                let (i, j, k) = (o / 6, (o / 2) % 3, o % 2);
                (k * 12 + j * 4 + i) as f32
            })
            .collect();
        assert_eq!(tr.to_vec().unwrap(), want, "{dev}");
        assert_eq!(tr.contiguous().unwrap().to_vec().unwrap(), want, "{dev}");
        assert!(tr.contiguous().unwrap().is_contiguous());
        let doubled = tr.mul_scalar(2.0).unwrap().to_vec().unwrap();
        assert_eq!(doubled, want.iter().map(|v| v * 2.0).collect::<Vec<_>>());
        let row_sums = tr.sum_dim(-1, false).unwrap().to_vec().unwrap();
        let want_sums: Vec<f32> = want.chunks(2).map(|c| c[0] + c[1]).collect();
        assert_eq!(row_sums, want_sums, "{dev}");
        // a narrow along the last dim (gaps between rows) and along dim 0 (an offset)
        let n = x.narrow(2, 1, 2).unwrap();
        let want_n: Vec<f32> = (0..6)
            .flat_map(|r| [r * 4 + 1, r * 4 + 2])
            .map(|v| v as f32)
            .collect();
        assert_eq!(n.to_vec().unwrap(), want_n, "{dev}");
        let n0 = x.narrow(0, 1, 1).unwrap();
        assert!(n0.is_contiguous());
        let want_n0: Vec<f32> = (12..24).map(|v| v as f32).collect();
        assert_eq!(
            n0.add(&n0).unwrap().to_vec().unwrap(),
            want_n0.iter().map(|v| 2.0 * v).collect::<Vec<_>>()
        );
        // expand: stride-0 dims read the same element
        let e = t(&[1.0, 2.0], &[2, 1], dev).expand(&[2, 3]).unwrap();
        assert_eq!(e.to_vec().unwrap(), vec![1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
        // i64 views
        let ix = ti(&[0, 1, 2, 3, 4, 5], &[2, 3], dev)
            .transpose(0, 1)
            .unwrap();
        assert_eq!(ix.to_vec_i64().unwrap(), vec![0, 3, 1, 4, 2, 5]);
    }
}

proptest! {
    #![proptest_config(cfg())]

    /// A matmul of transposed views equals the matmul of their contiguous copies, at awkward
    /// sizes, batched or not, on every device.
    #[test]
    fn matmul_of_transposed_views(m in dim(), k in dim(), n in dim(), batch in 0usize..3, seed in any::<u64>()) {
        let lead: Vec<usize> = if batch == 0 { vec![] } else { vec![batch] };
        let sa: Vec<usize> = lead.iter().copied().chain([k, m]).collect();
        let sb: Vec<usize> = lead.iter().copied().chain([n, k]).collect();
        let a = rand_vec(numel(&sa), -1.0, 1.0, seed);
        let b = rand_vec(numel(&sb), -1.0, 1.0, seed ^ 1);
        // reference: (aᵀ)(bᵀ) per batch, in f64
        let bs = batch.max(1);
        let mut want = vec![0.0f64; bs * m * n];
        for q in 0..bs {
            for i in 0..m {
                for j in 0..n {
                    want[q * m * n + i * n + j] = (0..k)
                        .map(|p| a[q * k * m + p * m + i] as f64 * b[q * n * k + j * k + p] as f64)
                        .sum();
                }
            }
        }
        let mut shape = lead.clone();
        shape.extend([m, n]);
        let tol = Tol { atol: 1e-4, rtol: 1e-4 };
        check(&format!("{sa:?}ᵀ·{sb:?}ᵀ"), &shape, &want, tol, |d| {
            let at = t(&a, &sa, d).transpose(-2, -1)?;
            let bt = t(&b, &sb, d).transpose(-2, -1)?;
            at.matmul(&bt)
        });
    }

    /// `cat` and `stack` along every dim against an index reference, f32 and i64.
    #[test]
    fn cat_and_stack(shape in prop::collection::vec(dim(), 1..=3), extra in dim(), seed in any::<u64>(), dsel in 0usize..3) {
        let d = dsel % shape.len();
        let mut s2 = shape.clone();
        s2[d] = extra;
        let a = rand_vec(numel(&shape), -1.0, 1.0, seed);
        let b = rand_vec(numel(&s2), -1.0, 1.0, seed ^ 7);
        let mut out = shape.clone();
        out[d] += extra;
        let want: Vec<f64> = (0..numel(&out))
            .map(|o| {
                let mut idx = unravel(o, &out);
                if idx[d] < shape[d] {
                    a[ravel(&idx, &shape)] as f64
                } else {
                    idx[d] -= shape[d];
                    b[ravel(&idx, &s2)] as f64
                }
            })
            .collect();
        check(&format!("cat {shape:?}+{s2:?} dim {d}"), &out, &want, EXACT, |dev| {
            Tensor::cat(&[&t(&a, &shape, dev), &t(&b, &s2, dev)], d as isize)
        });
        let ai: Vec<i64> = (0..numel(&shape) as i64).collect();
        let bi: Vec<i64> = (0..numel(&s2) as i64).map(|v| -v).collect();
        let want_i: Vec<i64> = (0..numel(&out))
            .map(|o| {
                let mut idx = unravel(o, &out);
                if idx[d] < shape[d] {
                    ai[ravel(&idx, &shape)]
                } else {
                    idx[d] -= shape[d];
                    bi[ravel(&idx, &s2)]
                }
            })
            .collect();
        check_i64(&format!("cat i64 {shape:?}+{s2:?} dim {d}"), &out, &want_i, |dev| {
            Tensor::cat(&[&ti(&ai, &shape, dev), &ti(&bi, &s2, dev)], d as isize)
        });
        // stack of three at a new dim d (0..=rank)
        let sd = dsel % (shape.len() + 1);
        let c = rand_vec(numel(&shape), -1.0, 1.0, seed ^ 9);
        let neg: Vec<f32> = a.iter().map(|v| -v).collect();
        let ins = [&a, &neg, &c];
        let mut st = shape.clone();
        st.insert(sd, 3);
        let want_s: Vec<f64> = (0..numel(&st))
            .map(|o| {
                let mut idx = unravel(o, &st);
                let which = idx.remove(sd);
                ins[which][ravel(&idx, &shape)] as f64
            })
            .collect();
        check(&format!("stack 3×{shape:?} dim {sd}"), &st, &want_s, EXACT, |dev| {
            let ts: Vec<Tensor> = ins.iter().map(|v| t(v, &shape, dev)).collect();
            Tensor::stack(&ts.iter().collect::<Vec<_>>(), sd as isize)
        });
    }

    /// cat of views (a transpose and a narrow) reads each as its elements.
    #[test]
    fn cat_of_views(r in dim(), c in dim(), seed in any::<u64>()) {
        let x = rand_vec(r * c, -1.0, 1.0, seed);
        let want: Vec<f64> = (0..c)
            .flat_map(|j| (0..r).map(move |i| (i, j)))
            .map(|(i, j)| x[i * c + j] as f64)
            .chain((0..c).flat_map(|j| (0..r).map(move |i| (i, j))).map(|(i, j)| x[i * c + j] as f64))
            .collect();
        check(&format!("cat of [{r},{c}]ᵀ twice"), &[2 * c, r], &want, EXACT, |dev| {
            let xt = t(&x, &[r, c], dev).transpose(0, 1)?;
            Tensor::cat(&[&xt, &xt], 0)
        });
    }
}

#[test]
fn gradients_flow_through_every_view() {
    let x = hf(rand_vec(2 * 3 * 4, -1.0, 1.0, 5), &[2, 3, 4]);
    let w = hf(rand_vec(2 * 3 * 4, -1.0, 1.0, 6), &[4, 3, 2]);
    // each view, weighted so that position matters
    gradcheck_all(
        "transpose",
        |i| i[0].transpose(0, 2)?.mul(&i[1]),
        &[x.clone(), w.clone()],
    );
    gradcheck_all(
        "permute",
        |i| i[0].permute(&[2, 1, 0])?.mul(&i[1]),
        &[x.clone(), w.clone()],
    );
    let w2 = hf(rand_vec(2 * 2 * 4, -1.0, 1.0, 7), &[2, 2, 4]);
    gradcheck_all(
        "narrow",
        |i| i[0].narrow(1, 1, 2)?.mul(&i[1]),
        &[x.clone(), w2.clone()],
    );
    let w3 = hf(rand_vec(5 * 2 * 3 * 4, -1.0, 1.0, 8), &[5, 2, 3, 4]);
    gradcheck_all(
        "expand",
        |i| i[0].expand(&[5, 2, 3, 4])?.mul(&i[1]),
        &[x.clone(), w3],
    );
    let w4 = hf(rand_vec(24, -1.0, 1.0, 9), &[2, 1, 3, 4]);
    gradcheck_all(
        "unsqueeze",
        |i| i[0].unsqueeze(1)?.mul(&i[1]),
        &[x.clone(), w4],
    );
    let w5 = hf(rand_vec(24, -1.0, 1.0, 10), &[6, 4]);
    gradcheck_all(
        "reshape of a transpose",
        |i| i[0].transpose(0, 1)?.reshape(&[6, 4])?.mul(&i[1]),
        &[x.clone(), w5],
    );
    let w6 = hf(rand_vec(12, -1.0, 1.0, 11), &[2, 3, 2]);
    gradcheck_all(
        "split and chunk",
        |i| {
            let s = i[0].split(2, 2)?;
            let c = i[0].chunk(2, 2)?;
            s[0].mul(&i[1])?.add(&s[1].mul(&c[1])?)
        },
        &[x.clone(), w6],
    );
    // a chain of views, and one view used twice
    gradcheck_all(
        "chain of views",
        |i| {
            i[0].transpose(0, 1)?
                .narrow(0, 1, 2)?
                .unsqueeze(0)?
                .squeeze(0)?
                .permute(&[2, 0, 1])?
                .mul_scalar(3.0)
        },
        std::slice::from_ref(&x),
    );
    gradcheck_all(
        "a view used twice",
        |i| {
            let v = i[0].transpose(1, 2)?;
            v.mul(&v)?.add(&v.narrow(1, 0, 2)?.sum_dim(1, true)?)
        },
        std::slice::from_ref(&x),
    );
    let y = hf(rand_vec(2 * 2 * 4, -1.0, 1.0, 12), &[2, 2, 4]);
    gradcheck_all(
        "cat",
        |i| Tensor::cat(&[&i[0], &i[1]], 1)?.square(),
        &[x.clone(), y],
    );
    gradcheck_all(
        "stack of views",
        |i| Tensor::stack(&[&i[0], &i[0].mul_scalar(2.0)?], -1)?.square(),
        std::slice::from_ref(&x),
    );
    let b = hf(rand_vec(3 * 5, -1.0, 1.0, 13), &[5, 3]);
    gradcheck_all(
        "matmul of transposed views",
        |i| {
            i[0].narrow(0, 0, 1)?
                .squeeze(0)?
                .transpose(0, 1)?
                .matmul(&i[1].transpose(0, 1)?)
        },
        &[x, b],
    );
}

#[test]
fn writing_in_place_after_the_forward_is_detected() {
    for dev in devices() {
        let p = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2], dev)
            .requires_grad_(true)
            .unwrap();
        let loss = p.transpose(0, 1).unwrap().mul(&p).unwrap().sum().unwrap();
        // an optimizer step between the forward and the backward
        let g = Tensor::ones(&[2, 2], dev).unwrap();
        let rule = UpdateRule::Sgd {
            lr: 0.1,
            momentum: 0.0,
            weight_decay: 0.0,
        };
        p.apply_update(&g, &[], &rule).unwrap();
        let e = loss.backward().unwrap_err();
        assert!(matches!(e, Error::Autograd(_)), "{dev}: {e:?}");
        assert!(e.to_string().contains("modified in place"), "{dev}: {e}");
        // copy_from bumps the version too
        let q = t(&[1.0, 2.0], &[2], dev).requires_grad_(true).unwrap();
        let l2 = q.unsqueeze(0).unwrap().square().unwrap().sum().unwrap();
        q.copy_from(&t(&[5.0, 6.0], &[2], dev)).unwrap();
        assert!(l2.backward().is_err(), "{dev}");
        // after backward, stepping is fine and the next forward sees the new values
        let l3 = q.square().unwrap().sum().unwrap();
        l3.backward().unwrap();
        assert_eq!(q.grad().unwrap().to_vec().unwrap(), vec![10.0, 12.0]);
    }
}

#[test]
fn in_place_writes_into_views_are_refused() {
    for dev in devices() {
        let x = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2], dev);
        let v = x.narrow(0, 1, 1).unwrap();
        let e = v.copy_from(&t(&[0.0, 0.0], &[1, 2], dev)).unwrap_err();
        assert!(e.to_string().contains("view"), "{dev}: {e}");
        let rule = UpdateRule::Sgd {
            lr: 0.1,
            momentum: 0.0,
            weight_decay: 0.0,
        };
        let e = x
            .transpose(0, 1)
            .unwrap()
            .apply_update(&x.ones_like().unwrap(), &[], &rule)
            .unwrap_err();
        assert!(e.to_string().contains("view"), "{dev}: {e}");
        assert_eq!(
            x.to_vec().unwrap(),
            vec![1.0, 2.0, 3.0, 4.0],
            "{dev}: data changed"
        );
    }
}

#[test]
fn view_errors_name_the_op_and_shape() {
    let x = Tensor::zeros(&[2, 3], Device::Cpu).unwrap();
    let msg = |e: Error| e.to_string();
    assert!(msg(x.narrow(1, usize::MAX, 2).unwrap_err()).contains("narrow"));
    assert!(msg(x.squeeze(0).unwrap_err()).contains("[2, 3]"));
    assert!(msg(x.unsqueeze(4).unwrap_err()).contains("unsqueeze"));
    assert!(msg(x.split(0, 0).unwrap_err()).contains("split"));
    assert!(msg(x.split_sizes(&[1, 1], 1).unwrap_err()).contains("[1, 1]"));
    assert!(msg(x.chunk(0, 0).unwrap_err()).contains("chunk"));
    assert!(msg(Tensor::cat(&[], 0).unwrap_err()).contains("cat"));
    let y = Tensor::zeros(&[3, 3], Device::Cpu).unwrap();
    let e = msg(Tensor::cat(&[&x, &y], 1).unwrap_err());
    assert!(e.contains("[2, 3]") && e.contains("[3, 3]"), "{e}");
    assert!(msg(Tensor::stack(&[&x, &y], 0).unwrap_err()).contains("stack"));
    let i = Tensor::from_vec_i64(vec![0; 6], &[2, 3], Device::Cpu).unwrap();
    assert!(msg(Tensor::cat(&[&x, &i], 0).unwrap_err()).contains("cat"));
}

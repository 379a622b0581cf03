//! Shape ops against index-arithmetic references (all exact): reshape, flatten, permute,
//! transpose, pad, narrow, broadcast_to, embedding.

mod common;
use common::*;
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{rngs::StdRng, SeedableRng};

fn shape4() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(dim(), 1..=4).prop_filter("keep it small", |s| numel(s) <= 40_000)
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn reshape_and_flatten(shape in shape4(), seed in any::<u64>(), start in 0usize..4) {
        let x = rand_vec(numel(&shape), -1.0, 1.0, seed);
        let want = f64s(&x);
        // reshape to the reversed shape and to 1-D keep the row-major data
        let rev: Vec<usize> = shape.iter().rev().cloned().collect();
        check(&format!("reshape {shape:?}->{rev:?}"), &rev, &want, EXACT, |d| t(&x, &shape, d).reshape(&rev));
        let n = numel(&shape);
        check(&format!("reshape {shape:?}->[1,n,1]"), &[1, n, 1], &want, EXACT, |d| t(&x, &shape, d).reshape(&[1, n, 1]));
        let s = start % shape.len();
        let mut fshape = shape[..s].to_vec();
        fshape.push(numel(&shape[s..]));
        check(&format!("flatten({s}) {shape:?}"), &fshape, &want, EXACT, |d| t(&x, &shape, d).flatten(s));
    }

    #[test]
    fn permute_and_transpose(shape in shape4(), seed in any::<u64>(), d0 in 0usize..4, d1 in 0usize..4) {
        let r = shape.len();
        let x = rand_vec(numel(&shape), -1.0, 1.0, seed);
        let mut perm: Vec<usize> = (0..r).collect();
        perm.shuffle(&mut StdRng::seed_from_u64(seed));
        let pshape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        // out[i0..] = x[idx] with idx[perm[j]] = i_j
        let permuted = |perm: &[usize], pshape: &[usize]| -> Vec<f64> {
            (0..numel(pshape)).map(|o| {
                let oi = unravel(o, pshape);
                let mut ii = vec![0; r];
                for (j, &p) in perm.iter().enumerate() { ii[p] = oi[j]; }
                x[ravel(&ii, &shape)] as f64
            }).collect()
        };
        check(&format!("permute {perm:?} of {shape:?}"), &pshape, &permuted(&perm, &pshape), EXACT, |d| {
            t(&x, &shape, d).permute(&perm)
        });
        let (a, b) = (d0 % r, d1 % r);
        let mut tp: Vec<usize> = (0..r).collect();
        tp.swap(a, b);
        let tshape: Vec<usize> = tp.iter().map(|&p| shape[p]).collect();
        // negative dims for the second index
        let nb = b as isize - r as isize;
        check(&format!("transpose({a},{nb}) of {shape:?}"), &tshape, &permuted(&tp, &tshape), EXACT, |d| {
            t(&x, &shape, d).transpose(a as isize, nb)
        });
    }

    #[test]
    fn pad(shape in prop::collection::vec(dim(), 1..=3), seed in any::<u64>(),
           pads in prop::collection::vec((0usize..4, 0usize..4), 3), value in -2.0f32..2.0) {
        let r = shape.len();
        let pads = &pads[..r];
        let x = rand_vec(numel(&shape), -1.0, 1.0, seed);
        let oshape: Vec<usize> = (0..r).map(|d| shape[d] + pads[d].0 + pads[d].1).collect();
        let want: Vec<f64> = (0..numel(&oshape)).map(|o| {
            let oi = unravel(o, &oshape);
            let inside = (0..r).all(|d| oi[d] >= pads[d].0 && oi[d] < pads[d].0 + shape[d]);
            if inside {
                let ii: Vec<usize> = (0..r).map(|d| oi[d] - pads[d].0).collect();
                x[ravel(&ii, &shape)] as f64
            } else {
                value as f64
            }
        }).collect();
        check(&format!("pad {pads:?} of {shape:?}"), &oshape, &want, EXACT, |d| t(&x, &shape, d).pad(pads, value));
    }

    #[test]
    fn narrow(shape in shape4(), seed in any::<u64>(), dsel in 0usize..4, a in 0usize..64, b in 0usize..64) {
        let r = shape.len();
        let dim = dsel % r;
        let start = a % shape[dim];
        let len = b % (shape[dim] - start + 1);
        let x = rand_vec(numel(&shape), -1.0, 1.0, seed);
        let mut oshape = shape.clone();
        oshape[dim] = len;
        let want: Vec<f64> = (0..numel(&oshape)).map(|o| {
            let mut ii = unravel(o, &oshape);
            ii[dim] += start;
            x[ravel(&ii, &shape)] as f64
        }).collect();
        check(&format!("narrow({dim}, {start}, {len}) of {shape:?}"), &oshape, &want, EXACT, |d| {
            t(&x, &shape, d).narrow(dim, start, len)
        });
    }

    #[test]
    fn broadcast_to(target in prop::collection::vec(dim(), 1..=4), ones in prop::collection::vec(any::<bool>(), 4),
                    drop in 0usize..4, seed in any::<u64>()) {
        // source: the target with some dims set to 1 and some leading dims removed
        let r = target.len();
        let lead = drop % r;
        let src: Vec<usize> = (lead..r).map(|d| if ones[d] { 1 } else { target[d] }).collect();
        let x = rand_vec(numel(&src), -1.0, 1.0, seed);
        let want: Vec<f64> = (0..numel(&target)).map(|o| {
            let oi = unravel(o, &target);
            let ii: Vec<usize> = (0..src.len()).map(|j| if src[j] == 1 { 0 } else { oi[lead + j] }).collect();
            x[ravel(&ii, &src)] as f64
        }).collect();
        check(&format!("broadcast_to {src:?}->{target:?}"), &target, &want, EXACT, |d| {
            t(&x, &src, d).broadcast_to(&target)
        });
    }

    #[test]
    fn embedding(v in dim(), dm in dim(), idx_shape in prop::collection::vec(dim(), 1..=2), seed in any::<u64>()) {
        let table = rand_vec(v * dm, -1.0, 1.0, seed);
        let idx = rand_idx(numel(&idx_shape), v, seed ^ 7);
        let want: Vec<f64> = idx.iter().flat_map(|&i| {
            let i = i as usize;
            table[i * dm..(i + 1) * dm].iter().map(|&x| x as f64).collect::<Vec<_>>()
        }).collect();
        let mut oshape = idx_shape.clone();
        oshape.push(dm);
        check(&format!("embedding [{v},{dm}] idx {idx_shape:?}"), &oshape, &want, EXACT, |d| {
            t(&table, &[v, dm], d).embedding(&ti(&idx, &idx_shape, d))
        });
    }
}

#[test]
fn reshape_shares_data_and_roundtrips() {
    for d in devices() {
        let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], d);
        let y = x.reshape(&[3, 2]).unwrap().reshape(&[6]).unwrap();
        assert_eq!(y.to_vec().unwrap(), x.to_vec().unwrap());
        // transpose twice is the identity
        let tt = x.transpose(0, 1).unwrap().transpose(-1, -2).unwrap();
        assert_eq!(tt.shape(), &[2, 3]);
        assert_eq!(tt.to_vec().unwrap(), x.to_vec().unwrap());
    }
}

#[test]
fn small_known_values() {
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    check(
        "transpose 2x3",
        &[3, 2],
        &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0],
        EXACT,
        |d| t(&x, &[2, 3], d).transpose(0, 1),
    );
    check("pad 1-D", &[5], &[9.0, 1.0, 2.0, 9.0, 9.0], EXACT, |d| {
        t(&x[..2], &[2], d).pad(&[(1, 2)], 9.0)
    });
    check("narrow cols", &[2, 2], &[2.0, 3.0, 5.0, 6.0], EXACT, |d| {
        t(&x, &[2, 3], d).narrow(1, 1, 2)
    });
    check(
        "broadcast column",
        &[2, 3],
        &[1.0, 1.0, 1.0, 2.0, 2.0, 2.0],
        EXACT,
        |d| t(&x[..2], &[2, 1], d).broadcast_to(&[2, 3]),
    );
    // repeated and edge indices
    check(
        "embedding repeats",
        &[3, 2],
        &[5.0, 6.0, 1.0, 2.0, 5.0, 6.0],
        EXACT,
        |d| t(&x, &[3, 2], d).embedding(&ti(&[2, 0, 2], &[3], d)),
    );
}

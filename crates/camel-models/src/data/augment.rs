//! Image augmentation on a host batch `[N, C, H, W]` (f32, NCHW, as [`super::CifarSplit`]
//! gives): a random crop of the image padded with zeros on every side (so an `H × W` crop of
//! the `(H + 2p) × (W + 2p)` padded image: a shift by up to `p` pixels each way) and a
//! horizontal flip with probability ½, drawn per image from a seeded generator, as
//! torchvision's `RandomCrop(32, padding=4)` and `RandomHorizontalFlip()`.

use camel_nn::{Error, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Checks that `images` holds `shape = [N, C, H, W]`.
fn check(op: &'static str, images: &[f32], shape: [usize; 4]) -> Result<()> {
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if n != Some(images.len()) {
        return Err(Error::BadShape {
            op,
            shape: shape.to_vec(),
            expected: format!(
                "[N, C, H, W] whose product is the batch's {} values",
                images.len()
            ),
        });
    }
    Ok(())
}

/// Every image of the batch mirrored left to right.
pub fn hflip(images: &[f32], shape: [usize; 4]) -> Result<Vec<f32>> {
    check("hflip", images, shape)?;
    let w = shape[3];
    Ok(images
        .chunks_exact(w.max(1))
        .flat_map(|row| row.iter().rev().copied())
        .collect())
}

/// The `H × W` window at offset `(dy, dx)` of one `[C, H, W]` image padded with `pad` zeros on
/// every side (`dy, dx ≤ 2·pad`), mirrored when `flip`, written to `out`.
fn crop_one(
    img: &[f32],
    out: &mut [f32],
    (c, h, w): (usize, usize, usize),
    pad: usize,
    off: (usize, usize),
    flip: bool,
) {
    for ch in 0..c {
        for i in 0..h {
            let si = (i + off.0) as isize - pad as isize;
            for j in 0..w {
                let jj = if flip { w - 1 - j } else { j };
                let sj = (jj + off.1) as isize - pad as isize;
                let inside = si >= 0 && sj >= 0 && (si as usize) < h && (sj as usize) < w;
                out[(ch * h + i) * w + j] = if inside {
                    img[(ch * h + si as usize) * w + sj as usize]
                } else {
                    0.0
                };
            }
        }
    }
}

/// Random crop with zero padding and horizontal flip, from its own seeded generator: the same
/// seed and the same sequence of batches give the same augmented batches.
#[derive(Debug, Clone)]
pub struct Augment {
    rng: StdRng,
    pad: usize,
    flip: bool,
}

impl Augment {
    /// Crops shifted by up to `pad` pixels each way (0: no crop), flips when `flip`, drawn from
    /// a generator seeded with `seed`.
    pub fn new(seed: u64, pad: usize, flip: bool) -> Augment {
        Augment {
            rng: StdRng::seed_from_u64(seed),
            pad,
            flip,
        }
    }

    /// CIFAR-10's usual recipe: padding 4 and flips.
    pub fn cifar(seed: u64) -> Augment {
        Augment::new(seed, 4, true)
    }

    /// The batch `images` of `shape` `[N, C, H, W]`, each image cropped and flipped at random
    /// (an offset in `0..=2·pad` on each axis and a coin per image).
    pub fn apply(&mut self, images: &[f32], shape: [usize; 4]) -> Result<Vec<f32>> {
        check("augment", images, shape)?;
        let [_, c, h, w] = shape;
        let len = c * h * w;
        let mut out = vec![0.0f32; images.len()];
        if len == 0 {
            return Ok(out);
        }
        for (img, o) in images.chunks_exact(len).zip(out.chunks_exact_mut(len)) {
            let dy = self.rng.gen_range(0..=2 * self.pad);
            let dx = self.rng.gen_range(0..=2 * self.pad);
            let flip = self.flip && self.rng.gen::<bool>();
            crop_one(img, o, (c, h, w), self.pad, (dy, dx), flip);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(shape: [usize; 4]) -> Vec<f32> {
        (0..shape.iter().product::<usize>())
            .map(|i| i as f32 + 1.0)
            .collect()
    }

    #[test]
    fn flipping_twice_is_the_identity_and_once_mirrors() {
        let s = [3, 2, 5, 7];
        let x = batch(s);
        let f = hflip(&x, s).unwrap();
        assert_ne!(f, x);
        assert_eq!(f[0], x[6]);
        assert_eq!(hflip(&f, s).unwrap(), x);
    }

    #[test]
    fn padding_zero_without_flips_is_the_identity() {
        let s = [4, 3, 6, 5];
        let x = batch(s);
        assert_eq!(Augment::new(9, 0, false).apply(&x, s).unwrap(), x);
    }

    #[test]
    fn a_seed_gives_the_same_batches_and_crops_shift_the_image() {
        let s = [8, 3, 32, 32];
        let x = batch(s);
        let (mut a, mut b) = (Augment::cifar(5), Augment::cifar(5));
        for _ in 0..3 {
            assert_eq!(a.apply(&x, s).unwrap(), b.apply(&x, s).unwrap());
        }
        let y = Augment::cifar(5).apply(&x, s).unwrap();
        assert_ne!(Augment::cifar(6).apply(&x, s).unwrap(), y);
        // each output pixel is 0 (padding) or a pixel of the same image and channel
        let len = 3 * 32 * 32;
        for (i, v) in y.iter().enumerate() {
            let (img, ch) = (i / len, (i % len) / 1024);
            let lo = (img * len + ch * 1024) as f32 + 1.0;
            assert!(*v == 0.0 || (lo..lo + 1024.0).contains(v), "{i}: {v}");
        }
    }

    #[test]
    fn a_shape_that_does_not_match_is_an_error() {
        let x = batch([2, 1, 3, 3]);
        assert!(hflip(&x, [2, 1, 3, 4]).is_err());
        assert!(Augment::cifar(1).apply(&x, [3, 1, 3, 3]).is_err());
    }
}

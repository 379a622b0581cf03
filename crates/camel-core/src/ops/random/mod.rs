//! Random tensors and dropout: `rand`, `randn`, `bernoulli`, `multinomial` and `dropout`, all
//! drawn from the Philox stream of a [`Generator`] (see [`crate::rng`]). Each op reserves its
//! counters on the host (a seed and an offset, no data) and the device computes the values
//! itself: the CPU in `cpu.rs`, the GPU in `kernels/random/01_philox.cu`, with no host draw and
//! no copy. For the same generator state both devices give
//!
//! - the same uniforms (`rand`), Bernoulli samples and dropout masks, bit for bit: a uniform is
//!   the top 24 bits of a Philox word times 2^-24, exact in `f32`, and `lo + (hi − lo)·u` is
//!   rounded once on both;
//! - normals (`randn`, Box–Muller) equal to a few ulps, not bitwise: the GPU's `logf`, `sqrtf`
//!   and `sincosf` may round differently from Rust's `ln`, `sqrt`, `sin` and `cos`;
//! - the same multinomial samples: both accumulate each row's probabilities in the same order in
//!   `f32`, and pick the first category whose running sum exceeds `u · total`.
//!
//! Value `i` of a draw (in the row-major order of the output) reads word `i % 4` of counter
//! `offset + i / 4`; a multinomial draw uses one uniform per sample, sample `s` of row `r` being
//! value `r · num_samples + s`.

use super::{expect_f32, expect_float};
use crate::backend::cpu::CpuStorage;
use crate::layout::checked_numel;
use crate::rng::{with_global, Generator, Philox};
use crate::storage::{dispatch, Storage};
use crate::{DType, Device, Error, Result, Tensor};

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

/// What a creation draw writes for each value `u` (uniform in `[0, 1)`) of the stream.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fill {
    /// `lo + (hi − lo)·u`, kept below `hi` (the rounding of the product can reach it).
    Uniform {
        /// Lower bound (inclusive).
        lo: f32,
        /// Upper bound (exclusive).
        hi: f32,
    },
    /// Box–Muller standard normals, one pair per two words.
    Normal,
    /// 1 where `u < p`, else 0.
    Bernoulli {
        /// The probability of a 1.
        p: f32,
    },
}

/// The random primitives of a backend that read a tensor (`cpu.rs`, `cuda.rs`).
pub(crate) trait RandomKernels: Sized {
    /// 1 where uniform `i` < `self[i]`, else 0; NaN where `self[i]` is NaN or outside `[0, 1]`.
    fn bernoulli(&self, at: Philox) -> Result<Self>;
    /// `self[i] · (uniform i ≥ p ? scale : 0)`: dropout's forward, and its backward on the
    /// upstream gradient with the same `at`.
    fn dropout_mask(&self, at: Philox, p: f32, scale: f32) -> Result<Self>;
    /// `samples` category indices (i64) per row of the `[rows, k]` weights `self`.
    fn multinomial(
        &self,
        rows: usize,
        k: usize,
        samples: usize,
        replacement: bool,
        at: Philox,
    ) -> Result<Self>;
}

impl Storage {
    /// [`RandomKernels::bernoulli`] on this storage's device.
    pub(crate) fn bernoulli(&self, at: Philox) -> Result<Storage> {
        dispatch!("bernoulli"; p = self => p.bernoulli(at))
    }

    /// [`RandomKernels::dropout_mask`] on this storage's device.
    pub(crate) fn dropout_mask(&self, at: Philox, p: f32, scale: f32) -> Result<Storage> {
        dispatch!("dropout"; x = self => x.dropout_mask(at, p, scale))
    }

    /// [`RandomKernels::multinomial`] on this storage's device.
    pub(crate) fn multinomial(
        &self,
        rows: usize,
        k: usize,
        samples: usize,
        replacement: bool,
        at: Philox,
    ) -> Result<Storage> {
        dispatch!("multinomial"; w = self => w.multinomial(rows, k, samples, replacement, at))
    }

    /// `n` values of `fill` drawn at `at`, made on `device` itself.
    pub(crate) fn random(
        op: &'static str,
        n: usize,
        fill: Fill,
        at: Philox,
        device: Device,
    ) -> Result<Storage> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(CpuStorage::F32(cpu::fill(op, n, fill, at)?))),
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => Ok(Storage::Cuda(cuda::fill(i, n, fill, at)?)),
            #[cfg(not(feature = "cuda"))]
            Device::Cuda(_) => Err(Error::DeviceUnavailable {
                device,
                reason: "camel was built without the `cuda` feature".into(),
            }),
        }
    }
}

/// A tensor of `shape` filled by `fill` from `generator`; the counters are reserved only once
/// the shape is known to be valid, so a rejected call leaves the generator as it was.
fn random_tensor(
    op: &'static str,
    shape: &[usize],
    fill: Fill,
    generator: &mut Generator,
    device: Device,
) -> Result<Tensor> {
    let n = checked_numel(op, shape)?;
    // a missing device fails before the counters are reserved
    #[cfg(feature = "cuda")]
    if let Device::Cuda(i) = device {
        crate::backend::cuda::device(i)?;
    }
    #[cfg(not(feature = "cuda"))]
    if let Device::Cuda(_) = device {
        return Err(Error::DeviceUnavailable {
            device,
            reason: "camel was built without the `cuda` feature".into(),
        });
    }
    let at = generator.reserve(n);
    let s = Storage::random(op, n, fill, at, device)?;
    Ok(Tensor::from_storage(s, shape.to_vec()))
}

/// Error unless `p` is a probability (`0 ≤ p ≤ 1`, not NaN).
fn check_probability(op: &'static str, p: f32) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::InvalidArgument {
            op,
            msg: format!("the probability p must be in [0, 1], got {p}"),
        });
    }
    Ok(())
}

impl Tensor {
    /// Uniform samples in `[lo, hi)` drawn from the process-wide generator (see
    /// [`manual_seed`](crate::manual_seed)); PyTorch's `torch.empty(shape).uniform_(lo, hi)`.
    /// `lo` and `hi` must be finite with `lo < hi`. The values are made on `device`, and are the
    /// same bits on every device for the same generator state.
    ///
    /// ```
    /// use camel_core::{Device, Tensor};
    /// let x = Tensor::rand(&[2, 3], -1.0, 1.0, Device::Cpu)?;
    /// assert!(x.to_vec()?.iter().all(|v| (-1.0..1.0).contains(v)));
    /// assert!(Tensor::rand(&[2], 1.0, 1.0, Device::Cpu).is_err());
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn rand(shape: &[usize], lo: f32, hi: f32, device: Device) -> Result<Tensor> {
        with_global(|g| Tensor::rand_with(shape, lo, hi, g, device))
    }

    /// [`Tensor::rand`] drawing from an explicit generator.
    pub fn rand_with(
        shape: &[usize],
        lo: f32,
        hi: f32,
        generator: &mut Generator,
        device: Device,
    ) -> Result<Tensor> {
        if !(lo.is_finite() && hi.is_finite() && lo < hi && (hi - lo).is_finite()) {
            return Err(Error::InvalidArgument {
                op: "rand",
                msg: format!(
                    "the range [{lo}, {hi}) must be finite and non-empty (lo < hi), with a finite width"
                ),
            });
        }
        random_tensor("rand", shape, Fill::Uniform { lo, hi }, generator, device)
    }

    /// [`Tensor::rand`] from a fresh generator seeded with `seed`: the same seed gives the same
    /// values on every device.
    pub fn rand_seeded(
        shape: &[usize],
        lo: f32,
        hi: f32,
        seed: u64,
        device: Device,
    ) -> Result<Tensor> {
        Tensor::rand_with(shape, lo, hi, &mut Generator::new(seed), device)
    }

    /// Normal samples with mean 0 and standard deviation 1 drawn from the process-wide
    /// generator (see [`manual_seed`](crate::manual_seed)); PyTorch's `torch.randn`. Box–Muller
    /// on pairs of Philox words: the CPU and the GPU agree to a few ulps.
    ///
    /// # Examples
    ///
    /// ```
    /// use camel_core::{manual_seed, Device, Tensor};
    /// manual_seed(1);
    /// let a = Tensor::randn(&[4], Device::Cpu)?;
    /// manual_seed(1);
    /// let b = Tensor::randn(&[8], Device::Cpu)?;
    /// assert_eq!(a.to_vec()?, b.to_vec()?[..4]);
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn randn(shape: &[usize], device: Device) -> Result<Tensor> {
        with_global(|g| Tensor::randn_with(shape, g, device))
    }

    /// [`Tensor::randn`] drawing from an explicit generator.
    pub fn randn_with(
        shape: &[usize],
        generator: &mut Generator,
        device: Device,
    ) -> Result<Tensor> {
        random_tensor("randn", shape, Fill::Normal, generator, device)
    }

    /// [`Tensor::randn`] from a fresh generator seeded with `seed`: the same seed gives the same
    /// values (to a few ulps) on every device.
    pub fn randn_seeded(shape: &[usize], seed: u64, device: Device) -> Result<Tensor> {
        Tensor::randn_with(shape, &mut Generator::new(seed), device)
    }

    /// A tensor of `shape` whose elements are 1 with probability `p` and 0 otherwise, from the
    /// process-wide generator (PyTorch's `torch.empty(shape).bernoulli_(p)`). `p` must be in
    /// `[0, 1]`.
    pub fn bernoulli_full(shape: &[usize], p: f32, device: Device) -> Result<Tensor> {
        with_global(|g| Tensor::bernoulli_full_with(shape, p, g, device))
    }

    /// [`Tensor::bernoulli_full`] drawing from an explicit generator.
    pub fn bernoulli_full_with(
        shape: &[usize],
        p: f32,
        generator: &mut Generator,
        device: Device,
    ) -> Result<Tensor> {
        check_probability("bernoulli", p)?;
        random_tensor("bernoulli", shape, Fill::Bernoulli { p }, generator, device)
    }

    /// Samples 0 or 1 with the probabilities in `self` (f32): element `i` is 1 with probability
    /// `self[i]`, from the process-wide generator (PyTorch's `torch.bernoulli(input)`). A NaN
    /// probability, or one outside `[0, 1]`, gives NaN in its place (checking the values would
    /// need a read of device memory by the host). The result is not differentiable.
    ///
    /// ```
    /// use camel_core::{Device, Tensor};
    /// let p = Tensor::from_vec(vec![0.0, 1.0, 0.5], &[3], Device::Cpu)?;
    /// let b = p.bernoulli()?.to_vec()?;
    /// assert_eq!(&b[..2], &[0.0, 1.0]);
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn bernoulli(&self) -> Result<Tensor> {
        with_global(|g| self.bernoulli_with(g))
    }

    /// [`Tensor::bernoulli`] drawing from an explicit generator.
    pub fn bernoulli_with(&self, generator: &mut Generator) -> Result<Tensor> {
        expect_f32("bernoulli", self)?;
        let probs = self.storage()?;
        let at = generator.reserve(self.numel());
        let s = probs.bernoulli(at)?;
        Ok(Tensor::from_storage(s, self.shape().to_vec()))
    }

    /// `num_samples` category indices (i64) for each row of non-negative weights `self`
    /// (`[k]` or `[rows, k]`, f32; they need not sum to 1), from the process-wide generator
    /// (PyTorch's `torch.multinomial`). With `replacement` every sample is drawn from the whole
    /// row; without it a category is drawn at most once, so `num_samples ≤ k` and each row needs
    /// at least `num_samples` positive weights. The output is `[num_samples]` or
    /// `[rows, num_samples]`.
    ///
    /// Weights that are negative, NaN or infinite, or a row summing to 0, are an error: on the CPU
    /// at once; on a GPU the kernel records it and the next host read (`to_vec`, `item`) returns
    /// it, as for an embedding index out of range.
    ///
    /// ```
    /// use camel_core::{Device, Tensor};
    /// let w = Tensor::from_vec(vec![0.0, 3.0, 0.0, 1.0], &[4], Device::Cpu)?;
    /// let s = w.multinomial(2, false)?.to_vec_i64()?;
    /// assert!(s.contains(&1) && s.contains(&3));
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn multinomial(&self, num_samples: usize, replacement: bool) -> Result<Tensor> {
        with_global(|g| self.multinomial_with(num_samples, replacement, g))
    }

    /// [`Tensor::multinomial`] drawing from an explicit generator.
    pub fn multinomial_with(
        &self,
        num_samples: usize,
        replacement: bool,
        generator: &mut Generator,
    ) -> Result<Tensor> {
        let op = "multinomial";
        expect_f32(op, self)?;
        let (rows, k, out_shape) = match *self.shape() {
            [k] => (1, k, vec![num_samples]),
            [rows, k] => (rows, k, vec![rows, num_samples]),
            _ => {
                return Err(Error::BadShape {
                    op,
                    shape: self.shape().to_vec(),
                    expected: "weights of shape [k] or [rows, k]".into(),
                })
            }
        };
        if k == 0 {
            return Err(Error::BadShape {
                op,
                shape: self.shape().to_vec(),
                expected: "at least one category (k ≥ 1)".into(),
            });
        }
        if num_samples == 0 {
            return Err(Error::InvalidArgument {
                op,
                msg: "num_samples must be at least 1".into(),
            });
        }
        if !replacement && num_samples > k {
            return Err(Error::InvalidArgument {
                op,
                msg: format!(
                    "cannot draw {num_samples} samples without replacement from {k} categories \
                     (weights of shape {:?})",
                    self.shape()
                ),
            });
        }
        let n = checked_numel(op, &out_shape)?;
        let w = self.storage()?;
        if let Some(c) = w.as_cpu() {
            // the CPU checks the weights before reserving counters: bad input changes nothing
            cpu::check_weights(c.f32(op)?, rows, k, num_samples, replacement)?;
        }
        let at = generator.reserve(n);
        let s = w.multinomial(rows, k, num_samples, replacement, at)?;
        debug_assert_eq!(s.dtype(), DType::I64);
        Ok(Tensor::from_storage(s, out_shape))
    }

    /// Dropout (PyTorch's `torch.nn.functional.dropout(x, p, training)`): in training, each
    /// element is zeroed with probability `p` and the rest are scaled by `1 / (1 − p)`, the
    /// mask drawn from the process-wide generator; with `training == false` or `p == 0` it is
    /// the identity (the same tensor, no kernel, no draw). `p` must be in `[0, 1]`; `p == 1`
    /// gives zeros (NaN stays NaN: `x · 0`).
    ///
    /// ```
    /// use camel_core::{Device, Tensor};
    /// let x = Tensor::ones(&[1000], Device::Cpu)?;
    /// let y = x.dropout(0.25, true)?.to_vec()?;
    /// assert!(y.iter().all(|&v| v == 0.0 || v == 1.0 / 0.75));
    /// assert_eq!(x.dropout(0.25, false)?.to_vec()?, x.to_vec()?);
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn dropout(&self, p: f32, training: bool) -> Result<Tensor> {
        check_probability("dropout", p)?;
        expect_float("dropout", self)?;
        if !training || p == 0.0 {
            return Ok(self.clone());
        }
        with_global(|g| self.dropout_with(p, g))
    }

    /// [`Tensor::dropout`] in training mode, drawing the mask from an explicit generator.
    /// Element `i` (row-major) is kept iff uniform `i` of the draw is `≥ p`. The graph node saves
    /// the generator's seed and offset and `p`, not the mask: the backward regenerates the mask
    /// and applies it to the upstream gradient.
    pub fn dropout_with(&self, p: f32, generator: &mut Generator) -> Result<Tensor> {
        check_probability("dropout", p)?;
        expect_float("dropout", self)?;
        if p == 0.0 {
            return Ok(self.clone());
        }
        // p == 1 keeps nothing: the scale is never applied, and 0 keeps x · 0 free of inf
        let scale = if p < 1.0 { 1.0 / (1.0 - p) } else { 0.0 };
        let x = self.storage()?;
        let at = generator.reserve(self.numel());
        let s = x.dropout_mask(at, p, scale)?;
        drop(x);
        let shape = self.shape().to_vec();
        Ok(Tensor::from_op(
            s,
            shape.clone(),
            "dropout",
            &[self],
            move |g| {
                let gs = g.storage()?.dropout_mask(at, p, scale)?;
                Ok(vec![Some(Tensor::from_storage(gs, shape.clone()))])
            },
        ))
    }
}

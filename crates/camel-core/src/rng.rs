//! Random number generation: one process-wide generator that random creation and layer
//! initialisation draw from by default, and [`Generator`] values for explicit, reproducible
//! streams (PyTorch's `torch.manual_seed` and `torch.Generator`).
//!
//! Samples are drawn on the host and copied to the tensor's device, so one generator serves
//! every device and a seed gives the same values on the CPU and on CUDA.
//!
//! ```
//! use camel_core::{manual_seed, Device, Generator, Tensor};
//! manual_seed(7);
//! let a = Tensor::randn(&[4], Device::Cpu)?;
//! let b = Tensor::randn(&[4], Device::Cpu)?; // the stream continues: b differs from a
//! assert_ne!(a.to_vec()?, b.to_vec()?);
//!
//! let mut g = Generator::new(7);
//! let c = Tensor::randn_with(&[4], &mut g, Device::Cpu)?; // a private stream, same seed
//! assert_eq!(a.to_vec()?, c.to_vec()?);
//! # Ok::<(), camel_core::Error>(())
//! ```

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Mutex;

/// The seed the global generator starts from until [`manual_seed`] is called, so that a
/// program that never seeds is still reproducible from run to run (PyTorch does the same).
pub const DEFAULT_SEED: u64 = 0x5eed_ca3e1;

/// A seeded stream of random numbers.
#[derive(Clone, Debug)]
pub struct Generator {
    rng: StdRng,
    seed: u64,
}

impl Generator {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Generator {
        Generator {
            rng: StdRng::seed_from_u64(seed),
            seed,
        }
    }

    /// The seed this generator started from.
    pub fn initial_seed(&self) -> u64 {
        self.seed
    }

    /// A uniform sample in `[lo, hi)`; the caller has checked that `lo < hi` and that
    /// `hi - lo` is finite (`gen_range` panics otherwise).
    pub(crate) fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        self.rng.gen_range(lo..hi)
    }

    /// A standard normal sample.
    pub(crate) fn normal(&mut self) -> f32 {
        self.rng.sample::<f32, _>(rand_distr::StandardNormal)
    }

    /// A uniform `u64`, to seed another generator from this one.
    pub fn next_u64(&mut self) -> u64 {
        self.rng.gen()
    }
}

static GLOBAL: Mutex<Option<Generator>> = Mutex::new(None);

/// Runs `f` with the process-wide generator, creating it from [`DEFAULT_SEED`] on first use.
/// The generator is behind a mutex, so threads draw disjoint parts of one stream.
pub fn with_global<R>(f: impl FnOnce(&mut Generator) -> R) -> R {
    // A panic while the lock was held leaves the generator in a valid state, so a poisoned
    // lock is used as it is.
    let mut guard = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(|| Generator::new(DEFAULT_SEED)))
}

/// Restarts the process-wide generator from `seed` (PyTorch's `torch.manual_seed`): everything
/// drawn afterwards by [`Tensor::rand`](crate::Tensor::rand), [`Tensor::randn`](crate::Tensor::randn)
/// and layer initialisation repeats from run to run.
pub fn manual_seed(seed: u64) {
    let mut guard = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    *guard = Some(Generator::new(seed));
}

/// The seed the process-wide generator last started from.
pub fn initial_seed() -> u64 {
    with_global(|g| g.initial_seed())
}

//! Random number generation: one process-wide generator that random creation, dropout and layer
//! initialisation draw from by default, and [`Generator`] values for explicit, reproducible
//! streams (PyTorch's `torch.manual_seed` and `torch.Generator`).
//!
//! Every random number comes from **Philox4x32-10** (Salmon et al., "Parallel random numbers: as
//! easy as 1, 2, 3", the generator cuRAND and PyTorch's CUDA backend use), a counter-based
//! generator: the 64-bit seed is the key, and counter `c` gives four independent `u32` by a pure
//! function of (key, c). A [`Generator`] is a seed and an offset (the next unused counter). A draw
//! of `n` values reserves counters `offset, offset + 1, …, offset + ⌈n/4⌉ − 1` (value `i` is word
//! `i % 4` of counter `offset + i / 4`) and moves the offset past them, so two draws never share
//! a number. Because each value is a function of (seed, counter, word), the CPU (this file's
//! [`philox4x32_10`]) and the GPU (`kernels/random/philox.cuh`, the same arithmetic) produce the
//! same stream for the same seed, and each GPU thread computes its values without any state.
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
//! assert_eq!(g.offset(), 1); // four normals used one counter
//! # Ok::<(), camel_core::Error>(())
//! ```

use std::sync::Mutex;

/// The seed the global generator starts from until [`manual_seed`] is called, so that a
/// program that never seeds is still reproducible from run to run (PyTorch does the same).
pub const DEFAULT_SEED: u64 = 0x5eed_ca3e1;

/// Philox's round multipliers and key increments (Random123's `PHILOX_M4x32_*`, `PHILOX_W32_*`).
const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// The Philox4x32 block function with 10 rounds: four random words from a 128-bit counter and a
/// 64-bit key. Random123's known-answer vectors hold (`tests/random.rs`).
///
/// ```
/// use camel_core::rng::philox4x32_10;
/// assert_eq!(philox4x32_10([0; 4], [0; 2]), [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]);
/// ```
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let [mut c0, mut c1, mut c2, mut c3] = counter;
    let [mut k0, mut k1] = key;
    for round in 0..10 {
        if round > 0 {
            k0 = k0.wrapping_add(W0);
            k1 = k1.wrapping_add(W1);
        }
        let p0 = u64::from(M0) * u64::from(c0);
        let p1 = u64::from(M1) * u64::from(c2);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        (c0, c1, c2, c3) = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0);
    }
    [c0, c1, c2, c3]
}

/// `2^-24`: a 24-bit integer times this is an exact `f32` in `[0, 1)`.
const TWO_POW_M24: f32 = 1.0 / 16_777_216.0;

/// A uniform `f32` in `[0, 1)` from the top 24 bits of `x`: exact, so the same on every device.
#[inline]
pub(crate) fn uniform01(x: u32) -> f32 {
    (x >> 8) as f32 * TWO_POW_M24
}

/// A uniform `f32` in `(0, 1]` from the top 24 bits of `x` (the logarithm's argument in
/// Box–Muller, which must not be 0).
#[inline]
fn uniform01_open(x: u32) -> f32 {
    ((x >> 8) + 1) as f32 * TWO_POW_M24
}

/// The two standard normals of Box–Muller from two words: `r cos θ` and `r sin θ` with
/// `r = √(−2 ln u1)`, `θ = 2π u2`. The GPU evaluates the same expression with CUDA's `logf`,
/// `sqrtf` and `sincosf`, which agree with Rust's to a few ulps (not bitwise).
#[inline]
pub(crate) fn box_muller(x1: u32, x2: u32) -> (f32, f32) {
    let r = (-2.0f32 * uniform01_open(x1).ln()).sqrt();
    let theta = std::f32::consts::TAU * uniform01(x2);
    (r * theta.cos(), r * theta.sin())
}

/// Where one draw reads the Philox stream: the key (`seed`) and its first counter (`offset`).
/// Value `i` of the draw is word `i % 4` of counter `offset + i / 4` (wrapping at 2^64). Kernels
/// receive the two numbers and compute the same values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Philox {
    /// The key: the generator's seed.
    pub seed: u64,
    /// The first counter of the draw.
    pub offset: u64,
}

impl Philox {
    /// The four words of counter `offset + j`.
    #[inline]
    pub fn block(&self, j: u64) -> [u32; 4] {
        let c = self.offset.wrapping_add(j);
        let key = [self.seed as u32, (self.seed >> 32) as u32];
        philox4x32_10([c as u32, (c >> 32) as u32, 0, 0], key)
    }

    /// Word `i` of the draw: word `i % 4` of counter `offset + i / 4`.
    #[inline]
    pub fn word(&self, i: u64) -> u32 {
        self.block(i / 4)[(i % 4) as usize]
    }

    /// Uniform `i` of the draw, in `[0, 1)` (top 24 bits of [`Philox::word`]).
    #[inline]
    pub fn uniform(&self, i: u64) -> f32 {
        uniform01(self.word(i))
    }

    /// The counters a draw of `n` values uses: `⌈n / 4⌉`.
    pub fn counters(n: usize) -> u64 {
        (n as u64).div_ceil(4)
    }
}

/// A seeded stream of random numbers: a Philox key (the seed) and the next unused counter (the
/// offset). Cloning it forks the stream: both copies then draw the same numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generator {
    seed: u64,
    offset: u64,
}

impl Generator {
    /// A generator starting from `seed`, at offset 0.
    pub fn new(seed: u64) -> Generator {
        Generator { seed, offset: 0 }
    }

    /// A generator at a given point of `seed`'s stream (PyTorch's `set_offset`): the next draw
    /// starts at counter `offset`.
    pub fn from_state(seed: u64, offset: u64) -> Generator {
        Generator { seed, offset }
    }

    /// The seed this generator started from.
    pub fn initial_seed(&self) -> u64 {
        self.seed
    }

    /// The next unused counter: each draw of `n` values advances it by `⌈n / 4⌉`.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Reserves the counters of a draw of `n` values and returns where it reads the stream.
    pub fn reserve(&mut self, n: usize) -> Philox {
        let at = Philox {
            seed: self.seed,
            offset: self.offset,
        };
        self.offset = self.offset.wrapping_add(Philox::counters(n));
        at
    }

    /// A uniform `u64` (the first two words of one counter), to seed another generator from
    /// this one.
    pub fn next_u64(&mut self) -> u64 {
        let w = self.reserve(4).block(0);
        u64::from(w[0]) | (u64::from(w[1]) << 32)
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

/// Restarts the process-wide generator from `seed` at offset 0 (PyTorch's `torch.manual_seed`):
/// everything drawn afterwards by [`Tensor::rand`](crate::Tensor::rand),
/// [`Tensor::randn`](crate::Tensor::randn), [`Tensor::dropout`](crate::Tensor::dropout) and
/// layer initialisation repeats from run to run, on every device.
pub fn manual_seed(seed: u64) {
    let mut guard = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    *guard = Some(Generator::new(seed));
}

/// The seed the process-wide generator last started from.
pub fn initial_seed() -> u64 {
    with_global(|g| g.initial_seed())
}

//! Which step of each memory-bound ladder (issue 4) the CUDA backend runs: the families, their
//! environment variables and defaults, and the embedding backward's size rule. Kept apart from
//! `backend::cuda` (which re-exports it) so that it builds without the `cuda` feature: `cargo
//! xtask memory-report` reads the defaults from here to pick the step each benchmark row shows,
//! rather than restating them.

pub use camel_cuda::kernels::rows::Step;
use std::sync::OnceLock;

/// The families of memory-bound kernels whose ladder step is selectable, each by an environment
/// variable read once (`1` … `4`; unset means the family's default, [`MemFamily::default_step`],
/// step 3 for most). A family without the step asked for runs its highest step below it:
/// elementwise has no step 3, and the embedding forward none past 2; LayerNorm, the softmax
/// forward, Adam and the embedding backward have a step 4 (LayerNorm's and the embedding's are
/// their defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemFamily {
    /// `CAMEL_ELEMENTWISE`: unary and same-shape binary ops (add, mul, relu, scale, GELU ...).
    Elementwise,
    /// `CAMEL_REDUCE`: sum and max (3: many rows along the last dim with 4 loads in flight per
    /// thread; the rest as step 2).
    Reduce,
    /// `CAMEL_SOFTMAX`: softmax and log-softmax, forward and backward (4: the forward of 3 with
    /// cache-streaming loads and stores, the backward of 3).
    Softmax,
    /// `CAMEL_CROSS_ENTROPY`: fused log-softmax + cross-entropy (3: short rows in registers,
    /// long rows with aligned float4 after a scalar prologue; the backward elementwise; 4, the
    /// default: step 3's kernels with the mean over rows fused in, one launch each way).
    CrossEntropy,
    /// `CAMEL_EMBEDDING`: gather and scatter-add (3: the backward groups the tokens by row and
    /// writes each gradient row once, from [`EMBEDDING_SORTED_MIN`] upstream elements; 4, the
    /// default: the same grouping in one launch and a gather that stores every row plainly
    /// but those of more than 128 tokens; the forward of 2).
    Embedding,
    /// `CAMEL_OPTIM`: optimizer updates (step 1 one launch per tensor, step 2 one for all,
    /// step 3 one for all with each thread's loads of its chunk issued before any store, for
    /// SGD; Adam keeps step 2's kernel at step 3, which measured faster, and takes the
    /// loads-first one only at step 4).
    Optim,
    /// `CAMEL_LAYERNORM`: LayerNorm forward and backward (1 and 2: the warp-per-row kernels,
    /// Welford forward; 3: the row in registers, and in the backward dγ/dβ in registers too;
    /// 4, the default: the forward of 3 with cache-streaming loads and stores of the rows, the
    /// backward of 3).
    LayerNorm,
}

impl MemFamily {
    /// Every family.
    pub const ALL: [MemFamily; 7] = [
        MemFamily::Elementwise,
        MemFamily::Reduce,
        MemFamily::Softmax,
        MemFamily::CrossEntropy,
        MemFamily::Embedding,
        MemFamily::Optim,
        MemFamily::LayerNorm,
    ];

    /// The step used when the family's environment variable is unset (or not a step number):
    /// [`Step::BEST`], except LayerNorm's step 4 (the forward's streaming hints) and the
    /// embedding backward's step 4, which measured faster than their step 3 on the H100
    /// (docs/benchmarks.md), and cross-entropy's step 4 (the mean fused in: one kernel each
    /// way, as issue 4 asks). The softmax forward's step 4 did not, and stays opt-in.
    pub fn default_step(&self) -> Step {
        match self {
            MemFamily::LayerNorm | MemFamily::Embedding | MemFamily::CrossEntropy => Step::Four,
            _ => Step::BEST,
        }
    }

    /// The environment variable selecting this family's step.
    pub fn env_var(&self) -> &'static str {
        match self {
            MemFamily::Elementwise => "CAMEL_ELEMENTWISE",
            MemFamily::Reduce => "CAMEL_REDUCE",
            MemFamily::Softmax => "CAMEL_SOFTMAX",
            MemFamily::CrossEntropy => "CAMEL_CROSS_ENTROPY",
            MemFamily::Embedding => "CAMEL_EMBEDDING",
            MemFamily::Optim => "CAMEL_OPTIM",
            MemFamily::LayerNorm => "CAMEL_LAYERNORM",
        }
    }
}

/// The ladder step the backend uses for `family` (see [`MemFamily`]).
pub fn mem_step(family: MemFamily) -> Step {
    static STEPS: OnceLock<[Step; 7]> = OnceLock::new();
    STEPS.get_or_init(|| {
        MemFamily::ALL
            .map(|f| Step::parse_or(std::env::var(f.env_var()).ok().as_deref(), f.default_step()))
    })[family as usize]
}

/// Upstream-gradient elements from which embedding backward's steps 3 and 4 (tokens grouped by
/// row; seven and two launches) replace step 2 (one launch of atomics). On the H100 step 3 took
/// 518 µs against 1248 at 349525 tokens × 768 into 50257 rows, but 28.0 µs against 11.9 at
/// 16384 × 64 into 1000 rows (2^20 elements, a table that stays in L2): its launches cost about
/// 25 µs, and step 2's atomics are cheap while the table fits in L2. The crossover by those
/// figures is near 2^23 elements.
pub const EMBEDDING_SORTED_MIN: usize = 1 << 24;

/// Whether the embedding backward at `step` over `elems` upstream-gradient elements runs the
/// grouped kernels of steps 3 and 4 (tokens grouped by row, each gradient row written once);
/// otherwise step 1's or step 2's atomics into a zeroed table.
pub fn embedding_bwd_grouped(step: Step, elems: usize) -> bool {
    matches!(step, Step::Three | Step::Four) && elems >= EMBEDDING_SORTED_MIN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedding_backward_groups_from_the_threshold_at_steps_3_and_4_only() {
        assert!(!embedding_bwd_grouped(Step::Four, EMBEDDING_SORTED_MIN - 1));
        assert!(embedding_bwd_grouped(Step::Four, EMBEDDING_SORTED_MIN));
        assert!(embedding_bwd_grouped(Step::Three, EMBEDDING_SORTED_MIN));
        assert!(!embedding_bwd_grouped(Step::Two, usize::MAX));
        assert!(!embedding_bwd_grouped(Step::One, usize::MAX));
    }
}

//! Which step of each memory-bound ladder the CUDA backend runs: the families and their tables
//! ([`Family::steps`], from camel-cuda), the selection ([`crate::config::step`]) and the
//! embedding backward's size rule. Builds without the `cuda` feature, so `cargo xtask
//! memory-report` reads the defaults from here rather than restating them.

pub use camel_cuda::config::{step, with_step};
pub use camel_cuda::kernels::ladder::{Family, StepInfo};
pub use camel_cuda::kernels::rows::Step;

/// Upstream-gradient elements from which embedding backward's steps 3 and 4 (tokens grouped by
/// row; seven and two launches) replace step 2 (one launch of atomics): the grouping's launches
/// cost a fixed time that step 2's atomics undercut while the table stays in L2, and the
/// grouping wins on large tables (docs/benchmarks.md).
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

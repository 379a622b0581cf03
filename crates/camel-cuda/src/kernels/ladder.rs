//! The memory-bound ladders, one table per family: each step's number, its name (accepted by the
//! family's `CAMEL_*` variable, see [`crate::config`]), the technique it adds, the launchers it
//! runs and what it needs. The camel-core CUDA backend picks its launchers by the step these
//! tables list, the tests run every listed step, and `cargo xtask memory-report` reads the
//! defaults from here. The SGEMM ladder's table is [`super::matmul::SgemmKernel::ALL`].

pub use super::rows::Step;

/// A family of memory-bound kernels whose ladder step is selectable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// Unary and same-shape binary ops (add, mul, relu, scale, GELU ...).
    Elementwise,
    /// Sum and max along one axis.
    Reduce,
    /// Softmax and log-softmax, forward and backward.
    Softmax,
    /// Fused log-softmax + cross-entropy, forward and backward.
    CrossEntropy,
    /// Embedding gather (forward) and scatter-add (backward).
    Embedding,
    /// Optimizer updates (SGD, Adam, AdamW).
    Optim,
    /// LayerNorm forward and backward.
    LayerNorm,
    /// The scaled, causally masked softmax of attention scores, forward and backward.
    MaskedSoftmax,
    /// The 2-D image filter (`filter2d`, `filter2d_separable`).
    Filter,
    /// 2-D convolution for networks (NCHW), forward and backward.
    Conv2d,
    /// BatchNorm forward (training and eval) and backward.
    BatchNorm,
    /// Fused attention without the score matrix, forward and backward.
    Attention,
}

/// One step of a family's ladder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepInfo {
    /// The step.
    pub step: Step,
    /// Its name, accepted by the family's variable beside its number.
    pub name: &'static str,
    /// What it changes over the step before, in a few words.
    pub technique: &'static str,
    /// The launchers it runs (`kernels::<module>::<fn>`).
    pub launchers: &'static [&'static str],
    /// What it needs of its inputs (alignment, shapes); a launcher whose need is not met runs
    /// its own fallback, so any input is accepted.
    pub needs: &'static str,
}

const fn s(
    step: Step,
    name: &'static str,
    technique: &'static str,
    launchers: &'static [&'static str],
    needs: &'static str,
) -> StepInfo {
    StepInfo {
        step,
        name,
        technique,
        launchers,
        needs,
    }
}

const ELEMENTWISE: &[StepInfo] = &[
    s(
        Step::One,
        "thread_per_element",
        "one thread per element, grid-stride loop",
        &[
            "elementwise::unary_f32",
            "elementwise::binary_f32",
            "elementwise::binary2_f32",
        ],
        "nothing",
    ),
    s(
        Step::Two,
        "vec4",
        "float4 loads and stores",
        &[
            "elementwise::unary_vec4_f32",
            "elementwise::binary_vec4_f32",
        ],
        "16-byte aligned pointers for the float4 body (scalar tail and fallback)",
    ),
];

const REDUCE: &[StepInfo] = &[
    s(
        Step::One,
        "block_per_output",
        "a block per output, shared-memory tree",
        &["reduce::block_per_output"],
        "nothing",
    ),
    s(
        Step::Two,
        "warp_shuffle",
        "warp shuffles; a warp per short row, a two-pass split for few long rows",
        &["reduce::warp_shuffle"],
        "nothing",
    ),
    s(
        Step::Three,
        "loads_in_flight",
        "many rows along the last dim with four loads in flight per thread",
        &["reduce::loads_in_flight"],
        "a last-dim reduction (other axes run step 2)",
    ),
];

const SOFTMAX: &[StepInfo] = &[
    s(
        Step::One,
        "block_per_row",
        "a block per row, three passes",
        &["softmax::block_per_row", "softmax::block_per_row_bwd"],
        "nothing",
    ),
    s(
        Step::Two,
        "online_warp",
        "a warp per row up to 1024 columns, online max and sum, float4",
        &["softmax::online_warp", "softmax::online_warp_bwd"],
        "16-byte alignment and cols % 4 == 0 for float4",
    ),
    s(
        Step::Three,
        "warp_registers",
        "the row held in registers, read once; several short rows per warp",
        &["softmax::warp_registers", "softmax::warp_registers_bwd"],
        "cols ≤ SOFTMAX3_MAX_COLS (longer rows run step 2)",
    ),
    s(
        Step::Four,
        "streaming",
        "step 3's forward with cache-streaming loads and stores; step 3's backward",
        &["softmax::streaming", "softmax::warp_registers_bwd"],
        "as step 3",
    ),
];

const CROSS_ENTROPY: &[StepInfo] = &[
    s(
        Step::One,
        "block_per_row",
        "a block per row; the backward recomputes the row statistics",
        &["loss::block_per_row", "loss::block_per_row_bwd"],
        "nothing",
    ),
    s(
        Step::Two,
        "saved_stats",
        "the forward saves each row's max and sum of exponentials; one-pass backward",
        &["loss::saved_stats", "loss::saved_stats_bwd"],
        "nothing",
    ),
    s(
        Step::Three,
        "registers",
        "short rows in registers, long rows with aligned float4 after a scalar prologue",
        &["loss::registers", "loss::registers_bwd"],
        "nothing",
    ),
    s(
        Step::Four,
        "fused_mean",
        "step 3's kernels with the mean over rows fused in: one launch each way",
        &["loss::fused_mean", "loss::fused_mean_bwd"],
        "a mean reduction (per-row losses run step 3)",
    ),
];

const EMBEDDING: &[StepInfo] = &[
    s(
        Step::One,
        "thread_per_element",
        "a thread per element; the backward adds with atomics",
        &[
            "embedding::index_select_rows_f32",
            "embedding::index_add_rows_f32",
        ],
        "nothing",
    ),
    s(
        Step::Two,
        "warp_per_row",
        "a warp per row with float4",
        &[
            "embedding::index_select_rows_warp_f32",
            "embedding::index_add_rows_warp_f32",
        ],
        "nothing",
    ),
    s(
        Step::Three,
        "grouped_rows",
        "the backward groups tokens by row and writes each gradient row once",
        &[
            "embedding::index_select_rows_warp_f32",
            "embedding::index_add_rows_sorted_f32",
        ],
        "at least EMBEDDING_SORTED_MIN upstream elements (fewer run step 2's backward)",
    ),
    s(
        Step::Four,
        "grouped_one_launch",
        "the grouping of step 3 in one launch",
        &[
            "embedding::index_select_rows_warp_f32",
            "embedding::index_add_rows_grouped_f32",
        ],
        "as step 3",
    ),
];

const OPTIM: &[StepInfo] = &[
    s(
        Step::One,
        "per_tensor",
        "one launch per tensor",
        &["optim::sgd_f32", "optim::adam_f32"],
        "nothing",
    ),
    s(
        Step::Two,
        "multi_tensor",
        "one launch for every tensor of a group",
        &["optim::sgd_multi_f32", "optim::adam_multi_f32"],
        "one rule and one set of hyper-parameters for the group, weight decay per tensor (else per tensor)",
    ),
    s(
        Step::Three,
        "loads_first_sgd",
        "SGD issues all of a thread's loads before its stores; Adam as step 2",
        &["optim::sgd_multi_loads_first", "optim::adam_multi_f32"],
        "as step 2",
    ),
    s(
        Step::Four,
        "loads_first",
        "Adam's loads-first kernel too",
        &[
            "optim::sgd_multi_loads_first",
            "optim::adam_multi_loads_first",
        ],
        "as step 2",
    ),
];

const LAYERNORM: &[StepInfo] = &[
    s(
        Step::Two,
        "warp_welford",
        "a warp per row, Welford statistics (steps 1 and 2 are one kernel)",
        &["layernorm::warp_welford", "layernorm::warp_welford_bwd"],
        "nothing",
    ),
    s(
        Step::Three,
        "row_registers",
        "the row in registers; the backward keeps dγ/dβ in registers too",
        &["layernorm::row_registers", "layernorm::row_registers_bwd"],
        "rows that fit the register shapes (others run step 2)",
    ),
    s(
        Step::Four,
        "streaming",
        "step 3's forward with cache-streaming loads and stores; a pair of warps per row backward",
        &["layernorm::streaming", "layernorm::warp_pair_bwd"],
        "as step 3",
    ),
];

const MASKED_SOFTMAX: &[StepInfo] = &[s(
    Step::One,
    "registers",
    "scale, causal mask and softmax in one pass, the row in registers (softmax step 3's shapes)",
    &["masked_softmax::registers", "masked_softmax::registers_bwd"],
    "nothing (rows longer than SOFTMAX3_MAX_COLS run a block per row)",
)];
const FILTER: &[StepInfo] = &[
    s(
        Step::One,
        "naive",
        "a thread per output pixel, every tap read from global memory",
        &["filter::naive"],
        "radius ≤ 8",
    ),
    s(
        Step::Two,
        "smem_tiles",
        "a shared-memory tile with its apron, loaded once per block",
        &["filter::smem_tiles"],
        "radius ≤ 8",
    ),
    s(
        Step::Three,
        "separable",
        "a row pass then a column pass through an intermediate buffer",
        &["filter::separable"],
        "a separable filter (a 2-D filter is factored on the host; one that is not rank 1 is refused)",
    ),
    s(
        Step::Four,
        "coalesced",
        "warp-wide tile rows: coalesced loads, no shared-memory bank conflicts",
        &["filter::coalesced"],
        "as step 3",
    ),
    s(
        Step::Five,
        "tuned",
        "radius as a template parameter, taps in registers, register blocking",
        &["filter::tuned", "filter::tuned_separable"],
        "radius ≤ 8; a 2-D filter runs the 2-D kernel, row and column vectors the two passes",
    ),
    s(
        Step::Six,
        "fused",
        "both separable passes in one kernel, the intermediate in shared memory; step 5's 2-D kernel",
        &["filter::tuned", "filter::fused_separable"],
        "as step 5",
    ),
];

const CONV2D: &[StepInfo] = &[
    s(
        Step::One,
        "im2col_gemm",
        "patches written to a column matrix, one SGEMM batched over the groups, bias pass; col2im backward",
        &[
            "conv2d::im2col_gemm",
            "conv2d::im2col_gemm_bwd_input",
            "conv2d::im2col_gemm_bwd_weight",
        ],
        "nothing",
    ),
    s(
        Step::Two,
        "implicit_gemm",
        "implicit GEMM (no column matrix) forward with bias and ReLU in the epilogue, and for the input gradient",
        &[
            "conv2d::implicit_gemm",
            "conv2d::implicit_gemm_bwd_input",
            "conv2d::im2col_gemm_bwd_weight",
        ],
        "at most IMPLICIT_MAX_TAPS (1024) taps and 32-bit offsets (else step 1's launcher)",
    ),
    s(
        Step::Three,
        "backward_splitk",
        "step 2's forward; backward staged per image in shared memory: weight gradient split over the images into partials summed in order, direct transposed convolution for the input gradient",
        &[
            "conv2d::implicit_gemm",
            "conv2d::splitk_bwd_input",
            "conv2d::splitk_bwd_weight",
        ],
        "a block's planes within SMEM_FLOATS (48 KiB) (else step 2's input gradient, step 1's weight gradient)",
    ),
    s(
        Step::Four,
        "pipelined",
        "implicit GEMM on SGEMM step 13's machinery (cp.async stages, 64 × 256 or 16 × 256 tiles) for the forward, the stride-1 input gradient and the weight gradient split into equal ranges of pixels",
        &[
            "conv2d::pipelined",
            "conv2d::pipelined_bwd_input",
            "conv2d::pipelined_bwd_weight",
        ],
        "stride 1 and more than 16 channels for the input gradient, at most PIPELINED_MAX_TAPS (4096) taps (else step 3's launchers, also for the weight gradient of at most 16 output channels and fewer than 128 taps)",
    ),
];

const BATCHNORM: &[StepInfo] = &[s(
    Step::One,
    "block_per_channel",
    "a block per channel: Welford statistics, then normalize; both backward sums, then dx",
    &[
        "batchnorm::block_per_channel",
        "batchnorm::block_per_channel_eval",
        "batchnorm::block_per_channel_bwd",
    ],
    "nothing",
)];

const ATTENTION: &[StepInfo] = &[
    s(
        Step::One,
        "warp_row",
        "a warp per query row over every key, the online softmax; step 2's backward",
        &["attention::warp_row", "attention::tiled_bwd"],
        "a head dim of 32, 64 or 128",
    ),
    s(
        Step::Two,
        "tiled",
        "K/V tiles in shared memory for 32 query rows, a quad per row; backward recomputed from the log-sum-exp",
        &["attention::tiled", "attention::tiled_bwd"],
        "as step 1, and 16-byte aligned rows (else step 1's forward)",
    ),
    s(
        Step::Three,
        "mma",
        "f16/bf16 on the tensor cores (mma.sync), P kept in registers; forward and backward",
        &["attention::mma", "attention::mma_bwd"],
        "f16 or bf16 (f32 runs step 2), a head dim of 32, 64 or 128, 16-byte aligned rows",
    ),
    s(
        Step::Four,
        "swizzle",
        "step 3 with ldmatrix fragment loads from XOR-swizzled shared tiles: no bank conflicts",
        &["attention::swizzle", "attention::swizzle_bwd"],
        "as step 3",
    ),
    s(
        Step::Five,
        "async",
        "step 4's forward with K/V tiles double-buffered by cp.async (copies overlap the math); step 4's backward",
        &["attention::async_kv", "attention::swizzle_bwd"],
        "as step 3",
    ),
    s(
        Step::Six,
        "fa2",
        "the FlashAttention-2 work split tuned: two row tiles a warp, masks and rescales only where needed, causal grids longest first; the FlashAttention-2 backward (dQ by atomic adds) up to head dim 64, two fixed-order kernels at 128 or under CAMEL_DETERMINISTIC",
        &["attention::fa2", "attention::fa2_bwd"],
        "as step 3",
    ),
    s(
        Step::Seven,
        "wgmma",
        "Hopper: TMA copies of Q and of K/V tiles, S = Q·Kᵀ and O += P·V as warpgroup MMAs (wgmma), P from registers; the backward on wgmma too, keys as rows so that Pᵀ and dSᵀ feed dV and dK from registers, dQ added by bulk copies from shared memory",
        &["attention::wgmma", "attention::wgmma_bwd"],
        "as step 3; compute capability 9.0, a head dim of 64 or 128 and no dropout (else step 6's forward and backward; step 6's backward also under CAMEL_DETERMINISTIC)",
    ),
    s(
        Step::Eight,
        "ws",
        "step 7 warp-specialized: a producer warpgroup for the TMA copies, K and V stages freed by mbarriers, the softmax of one tile overlapping the P·V MMA of the one before, persistent blocks taking query tiles from a count; step 7's backward",
        &["attention::ws", "attention::wgmma_bwd"],
        "as step 7",
    ),
];

impl Family {
    /// Every family.
    pub const ALL: [Family; 12] = [
        Family::Elementwise,
        Family::Reduce,
        Family::Softmax,
        Family::CrossEntropy,
        Family::Embedding,
        Family::Optim,
        Family::LayerNorm,
        Family::MaskedSoftmax,
        Family::Filter,
        Family::Conv2d,
        Family::BatchNorm,
        Family::Attention,
    ];

    /// The family's ladder, in step order.
    pub fn steps(&self) -> &'static [StepInfo] {
        match self {
            Family::Elementwise => ELEMENTWISE,
            Family::Reduce => REDUCE,
            Family::Softmax => SOFTMAX,
            Family::CrossEntropy => CROSS_ENTROPY,
            Family::Embedding => EMBEDDING,
            Family::Optim => OPTIM,
            Family::LayerNorm => LAYERNORM,
            Family::MaskedSoftmax => MASKED_SOFTMAX,
            Family::Filter => FILTER,
            Family::Conv2d => CONV2D,
            Family::BatchNorm => BATCHNORM,
            Family::Attention => ATTENTION,
        }
    }

    /// The family's name in lower case (`softmax`, `cross_entropy` ...).
    pub fn name(&self) -> &'static str {
        match self {
            Family::Elementwise => "elementwise",
            Family::Reduce => "reduce",
            Family::Softmax => "softmax",
            Family::CrossEntropy => "cross_entropy",
            Family::Embedding => "embedding",
            Family::Optim => "optim",
            Family::LayerNorm => "layernorm",
            Family::MaskedSoftmax => "masked_softmax",
            Family::Filter => "filter",
            Family::Conv2d => "conv2d",
            Family::BatchNorm => "batchnorm",
            Family::Attention => "attention",
        }
    }

    /// The environment variable selecting the family's step.
    pub fn env_var(&self) -> &'static str {
        match self {
            Family::Elementwise => "CAMEL_ELEMENTWISE",
            Family::Reduce => "CAMEL_REDUCE",
            Family::Softmax => "CAMEL_SOFTMAX",
            Family::CrossEntropy => "CAMEL_CROSS_ENTROPY",
            Family::Embedding => "CAMEL_EMBEDDING",
            Family::Optim => "CAMEL_OPTIM",
            Family::LayerNorm => "CAMEL_LAYERNORM",
            Family::MaskedSoftmax => "CAMEL_MASKED_SOFTMAX",
            Family::Filter => "CAMEL_FILTER",
            Family::Conv2d => "CAMEL_CONV2D",
            Family::BatchNorm => "CAMEL_BATCHNORM",
            Family::Attention => "CAMEL_ATTENTION",
        }
    }

    /// The step the library runs by default: the family's fastest measured step
    /// (docs/kernels/), step 8 for attention (step 6's forward where step 8 cannot run), step 6
    /// for the image filter, step 4 for LayerNorm, the embedding, cross-entropy and conv2d, step
    /// 3 for the rest, and the highest step a family has when it has no step 3.
    pub fn default_step(&self) -> Step {
        let want = match self {
            Family::Attention => Step::Eight,
            Family::Filter => Step::Six,
            Family::LayerNorm | Family::Embedding | Family::CrossEntropy | Family::Conv2d => {
                Step::Four
            }
            _ => Step::Three,
        };
        self.effective(want)
    }

    /// The step that runs when `step` is asked for: `step` when the ladder has it, else its
    /// highest step below (elementwise has no step 3 or 4; LayerNorm's step 1 is its step 2).
    pub fn effective(&self, step: Step) -> Step {
        let steps = self.steps();
        steps
            .iter()
            .rev()
            .find(|i| i.step.number() <= step.number())
            .or(steps.first())
            .map_or(step, |i| i.step)
    }

    /// The step named `s`: its number (`1` … `4`, or up to the family's last step where that
    /// is higher) or its name in [`Family::steps`].
    pub fn parse_step(&self, s: &str) -> Option<Step> {
        let s = s.trim();
        let max = self.max_number();
        Step::ALL
            .into_iter()
            .find(|st| st.number() <= max && st.number().to_string() == s)
            .or_else(|| {
                self.steps()
                    .iter()
                    .find(|i| i.name.eq_ignore_ascii_case(s))
                    .map(|i| i.step)
            })
    }

    /// The values [`Family::parse_step`] accepts, for error messages and the configuration table.
    pub fn accepted(&self) -> String {
        let names: Vec<&str> = self.steps().iter().map(|i| i.name).collect();
        let numbers: Vec<String> = (1..=self.max_number()).map(|n| n.to_string()).collect();
        format!("{} or {}", numbers.join(", "), names.join(", "))
    }

    /// The highest step number the family's variable accepts: 4, or its last step if higher.
    fn max_number(&self) -> u32 {
        self.steps().last().map_or(4, |i| i.step.number()).max(4)
    }
}

/// The entry of `table` (in step order, not empty) for `step`: the highest at or below it, else
/// the first.
pub(crate) fn pick<T>(table: &'static [T], step: Step, key: impl Fn(&T) -> Step) -> &'static T {
    table
        .iter()
        .rev()
        .find(|k| key(k).number() <= step.number())
        .unwrap_or(&table[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed tables of the launcher modules list the steps of the families' tables.
    #[test]
    fn launcher_tables_match_the_family_tables() {
        let steps = |f: Family| f.steps().iter().map(|i| i.step).collect::<Vec<_>>();
        assert_eq!(
            super::super::softmax::STEPS.map(|k| k.step).to_vec(),
            steps(Family::Softmax)
        );
        assert_eq!(
            super::super::layernorm::STEPS.map(|k| k.step).to_vec(),
            steps(Family::LayerNorm)
        );
        assert_eq!(
            super::super::reduce::STEPS.map(|k| k.step).to_vec(),
            steps(Family::Reduce)
        );
        assert_eq!(
            super::super::elementwise::STEPS.map(|k| k.step).to_vec(),
            steps(Family::Elementwise)
        );
        assert_eq!(
            super::super::embedding::STEPS.map(|k| k.step).to_vec(),
            steps(Family::Embedding)
        );
        assert_eq!(
            super::super::loss::STEPS.map(|k| k.step).to_vec(),
            steps(Family::CrossEntropy)
        );
        assert_eq!(
            super::super::optim::STEPS.map(|k| k.step).to_vec(),
            steps(Family::Optim)
        );
        assert_eq!(
            super::super::masked_softmax::STEPS.map(|k| k.step).to_vec(),
            steps(Family::MaskedSoftmax)
        );
        assert_eq!(
            super::super::filter::STEPS.map(|k| k.step).to_vec(),
            steps(Family::Filter)
        );
        assert_eq!(
            super::super::conv2d::STEPS.map(|k| k.step).to_vec(),
            steps(Family::Conv2d)
        );
        assert_eq!(
            super::super::batchnorm::STEPS.map(|k| k.step).to_vec(),
            steps(Family::BatchNorm)
        );
        assert_eq!(
            super::super::attention::STEPS.map(|k| k.step).to_vec(),
            steps(Family::Attention)
        );
    }

    #[test]
    fn every_family_lists_its_steps_in_order_with_unique_names() {
        for f in Family::ALL {
            let steps = f.steps();
            assert!(!steps.is_empty(), "{f:?}");
            for w in steps.windows(2) {
                assert!(w[0].step.number() < w[1].step.number(), "{f:?}");
            }
            for i in steps {
                assert_eq!(f.parse_step(i.name), Some(i.step), "{f:?} {}", i.name);
                assert_eq!(f.effective(i.step), i.step);
            }
            assert!(steps.iter().any(|i| i.step == f.default_step()), "{f:?}");
        }
    }

    #[test]
    fn a_missing_step_runs_the_one_below() {
        assert_eq!(Family::Elementwise.effective(Step::Four), Step::Two);
        assert_eq!(Family::LayerNorm.effective(Step::One), Step::Two);
        assert_eq!(Family::Softmax.parse_step("2"), Some(Step::Two));
        assert_eq!(
            Family::Softmax.parse_step("warp_registers"),
            Some(Step::Three)
        );
        assert_eq!(Family::Softmax.parse_step("5"), None);
        assert_eq!(Family::Filter.parse_step("5"), Some(Step::Five));
        assert_eq!(Family::Filter.parse_step("separable"), Some(Step::Three));
        assert_eq!(Family::Filter.parse_step("6"), Some(Step::Six));
        assert_eq!(Family::Filter.parse_step("fused"), Some(Step::Six));
        assert_eq!(Family::Filter.parse_step("7"), None);
    }
}

//! Every `CAMEL_*` environment variable camel reads, read here with one parser.
//!
//! | Variable | Values | Default | Purpose |
//! |---|---|---|---|
//! | `CAMEL_REQUIRE_GPU` | `1/0/on/off/true/false` | `0` | A GPU test fails instead of skipping when no CUDA device answers. |
//! | `CAMEL_POISON` | `1/0/on/off/true/false` | `0` | Fill every new CUDA output with NaN before its kernel runs, so an element a kernel forgot to write shows up in tests. |
//! | `CAMEL_CUDA_SYNC` | `1/0/on/off/true/false` | `0` | Synchronize after every kernel launch, so a faulting kernel is named at once (debugging aid). |
//! | `CAMEL_DATA_DIR` | a folder | `datasets/` of the repository | Where the data sets are read from. |
//! | `CAMEL_REQUIRE_DATA` | `1/0/on/off/true/false` | `0` | A test needing a data set fails instead of skipping when the set is missing. |
//! | `CAMEL_CPU_THREADS` | a count ≥ 1 | the cores the process may run on | Threads the CPU backend's conv2d and max pooling split their batch over. |
//! | `CAMEL_DETERMINISTIC` | `1/0/on/off/true/false` | `0` | Kernels that sum with atomics in an order that varies from run to run (the attention backward's dq) use their fixed-order variant instead, slower, so that every run gives the same bits. |
//! | `CAMEL_SGEMM` | step number (`1` … `13`, `18`) or name (`naive` … `async`, `tf32`, `tf32_wgmma`) | `async` | The SGEMM ladder step `matmul` and `Linear` run (12 and 18 are the opt-in TF32 steps). |
//! | `CAMEL_ELEMENTWISE` | step number or name (see `Family::steps`) | `vec4` | The elementwise ladder step. |
//! | `CAMEL_REDUCE` | step number or name | `loads_in_flight` | The reduction ladder step. |
//! | `CAMEL_SOFTMAX` | step number or name | `warp_registers` | The softmax ladder step. |
//! | `CAMEL_CROSS_ENTROPY` | step number or name | `fused_mean` | The cross-entropy ladder step. |
//! | `CAMEL_EMBEDDING` | step number or name | `grouped_one_launch` | The embedding ladder step. |
//! | `CAMEL_OPTIM` | step number or name | `loads_first_sgd` | The optimizer-update ladder step. |
//! | `CAMEL_LAYERNORM` | step number or name | `streaming` | The LayerNorm ladder step. |
//! | `CAMEL_MASKED_SOFTMAX` | step number or name | `registers` | The masked-softmax step (a single-step family). |
//! | `CAMEL_FILTER` | step number or name | `fused` | The image-filter ladder step (`filter2d`). |
//! | `CAMEL_CONV2D` | step number or name | `pipelined` | The conv2d ladder step. |
//! | `CAMEL_BATCHNORM` | step number or name | `block_per_channel` | The BatchNorm step (a single-step family). |
//! | `CAMEL_ATTENTION` | step number or name | `ws` | The fused-attention ladder step (`Tensor::attention`): f32 runs the highest f32 step at or below it (2), f16/bf16 the highest 16-bit one (3 to 8). |
//! | `CAMEL_NO_STUB_RPATH` | `1/0/on/off/true/false` (build time) | `0` | Never put camel's no-driver stub `libcuda` on the run-time library path (read by camel-cuda's build.rs). |
//! | `CAMEL_PLOT_FONT` | a font file (tool) | DejaVu Sans or Liberation Sans | The font of the plots `cargo xtask gemm-report` draws (read by xtask). |
//!
//! The same table is [`VARS`] and `docs/configuration.md` (a test keeps the three alike).
//!
//! Each variable is read once per process; a value that does not parse is reported once on
//! stderr, naming the variable and the values it accepts, and the default is used; [`check`]
//! returns those errors so a program or a test run can refuse to start. A ladder step is the
//! process default for that family; [`with_step`] and [`with_sgemm_kernel`] override it for
//! the calling thread while a closure runs, so one test process runs every step.
//!
//! Switches that only measure experiments are not variables: they are [`Experiments`], set by
//! the benchmark programs' flags through [`set_experiments`].

use crate::kernels::hgemm::HgemmKernel;
use crate::kernels::ladder::{Family, Step};
use crate::kernels::matmul::SgemmKernel;
use std::cell::Cell;
use std::path::PathBuf;
use std::sync::{OnceLock, RwLock};

/// One row of the configuration table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Var {
    /// The variable's name.
    pub name: &'static str,
    /// The values it accepts.
    pub values: &'static str,
    /// Its default.
    pub default: &'static str,
    /// What it is for.
    pub purpose: &'static str,
}

const FLAG: &str = "1/0/on/off/true/false";
const STEP: &str = "step number or name";

/// The configuration table (rendered in this module's documentation and in
/// `docs/configuration.md`).
pub const VARS: &[Var] = &[
    Var {
        name: "CAMEL_REQUIRE_GPU",
        values: FLAG,
        default: "0",
        purpose: "A GPU test fails instead of skipping when no CUDA device answers.",
    },
    Var {
        name: "CAMEL_POISON",
        values: FLAG,
        default: "0",
        purpose: "Fill every new CUDA output with NaN before its kernel runs, so an element a \
                  kernel forgot to write shows up in tests.",
    },
    Var {
        name: "CAMEL_CUDA_SYNC",
        values: FLAG,
        default: "0",
        purpose: "Synchronize after every kernel launch, so a faulting kernel is named at once \
                  (debugging aid).",
    },
    Var {
        name: "CAMEL_DATA_DIR",
        values: "a folder",
        default: "datasets/ of the repository",
        purpose: "Where the data sets are read from.",
    },
    Var {
        name: "CAMEL_REQUIRE_DATA",
        values: FLAG,
        default: "0",
        purpose: "A test needing a data set fails instead of skipping when the set is missing.",
    },
    Var {
        name: "CAMEL_CPU_THREADS",
        values: "a count ≥ 1",
        default: "the cores the process may run on",
        purpose: "Threads the CPU backend's conv2d and max pooling split their batch over.",
    },
    Var {
        name: "CAMEL_DETERMINISTIC",
        values: FLAG,
        default: "0",
        purpose: "Kernels that sum with atomics in an order that varies from run to run (the \
                  attention backward's dq) use their fixed-order variant instead, slower, so \
                  that every run gives the same bits.",
    },
    Var {
        name: "CAMEL_SGEMM",
        values: "step number (1 … 13, 18) or name (naive … async, tf32, tf32_wgmma)",
        default: "async",
        purpose:
            "The SGEMM ladder step `matmul` and `Linear` run (12 and 18 are the opt-in TF32 steps).",
    },
    Var {
        name: "CAMEL_ELEMENTWISE",
        values: STEP,
        default: "vec4",
        purpose: "The elementwise ladder step.",
    },
    Var {
        name: "CAMEL_REDUCE",
        values: STEP,
        default: "loads_in_flight",
        purpose: "The reduction ladder step.",
    },
    Var {
        name: "CAMEL_SOFTMAX",
        values: STEP,
        default: "warp_registers",
        purpose: "The softmax ladder step.",
    },
    Var {
        name: "CAMEL_CROSS_ENTROPY",
        values: STEP,
        default: "fused_mean",
        purpose: "The cross-entropy ladder step.",
    },
    Var {
        name: "CAMEL_EMBEDDING",
        values: STEP,
        default: "grouped_one_launch",
        purpose: "The embedding ladder step.",
    },
    Var {
        name: "CAMEL_OPTIM",
        values: STEP,
        default: "loads_first_sgd",
        purpose: "The optimizer-update ladder step.",
    },
    Var {
        name: "CAMEL_LAYERNORM",
        values: STEP,
        default: "streaming",
        purpose: "The LayerNorm ladder step.",
    },
    Var {
        name: "CAMEL_MASKED_SOFTMAX",
        values: STEP,
        default: "registers",
        purpose: "The masked-softmax step (a single-step family).",
    },
    Var {
        name: "CAMEL_FILTER",
        values: STEP,
        default: "fused",
        purpose: "The image-filter ladder step (`filter2d`).",
    },
    Var {
        name: "CAMEL_CONV2D",
        values: STEP,
        default: "pipelined",
        purpose: "The conv2d ladder step.",
    },
    Var {
        name: "CAMEL_BATCHNORM",
        values: STEP,
        default: "block_per_channel",
        purpose: "The BatchNorm step (a single-step family).",
    },
    Var {
        name: "CAMEL_ATTENTION",
        values: STEP,
        default: "ws",
        purpose: "The fused-attention ladder step (`Tensor::attention`): f32 runs the highest f32 \
                  step at or below it (2), f16/bf16 the highest 16-bit one (3 to 8).",
    },
    Var {
        name: "CAMEL_NO_STUB_RPATH",
        values: "1/0/on/off/true/false (build time)",
        default: "0",
        purpose: "Never put camel's no-driver stub libcuda on the run-time library path (read by \
                  camel-cuda's build.rs).",
    },
    Var {
        name: "CAMEL_PLOT_FONT",
        values: "a font file (tool)",
        default: "DejaVu Sans or Liberation Sans",
        purpose: "The font of the plots `cargo xtask gemm-report` draws (read by xtask).",
    },
];

/// A variable set to a value it does not accept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
    /// The values it accepts.
    pub accepted: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}={:?} is not accepted; expected {}",
            self.var, self.value, self.accepted
        )
    }
}

impl std::error::Error for ConfigError {}

/// Parses a boolean: `1`, `on`, `true` → true; `0`, `off`, `false`, empty → false (any case).
pub fn parse_flag(var: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" => Ok(true),
        "0" | "off" | "false" | "" => Ok(false),
        _ => Err(ConfigError {
            var,
            value: value.to_string(),
            accepted: FLAG.to_string(),
        }),
    }
}

/// Parses `family`'s step: its number or its name ([`Family::parse_step`]).
pub fn parse_step(family: Family, value: &str) -> Result<Step, ConfigError> {
    family.parse_step(value).ok_or_else(|| ConfigError {
        var: family.env_var(),
        value: value.to_string(),
        accepted: family.accepted(),
    })
}

/// Parses an SGEMM step: its number as in `kernels/matmul/NN_*.cu` or its name.
pub fn parse_sgemm(value: &str) -> Result<SgemmKernel, ConfigError> {
    let v = value.trim();
    let all = SgemmKernel::ALL.iter().chain(&SgemmKernel::TF32);
    let by_number = v.parse::<u32>().ok().and_then(|n| {
        all.clone()
            .find(|k| k.step().parse::<u32>().ok() == Some(n))
            .copied()
    });
    by_number
        .or_else(|| SgemmKernel::from_name(v))
        .ok_or_else(|| {
            let names: Vec<String> = all
                .map(|k| format!("{} ({})", k.step(), k.name()))
                .collect();
            ConfigError {
                var: "CAMEL_SGEMM",
                value: value.to_string(),
                accepted: names.join(", "),
            }
        })
}

/// `var`'s value when set (and valid Unicode).
fn raw(var: &str) -> Option<String> {
    std::env::var(var).ok()
}

/// Reports `e` on stderr (each caller reads its variable once, so once per variable).
fn report(e: &ConfigError) {
    eprintln!("camel: {e}; using the default");
}

fn flag(cell: &'static OnceLock<bool>, var: &'static str) -> bool {
    *cell.get_or_init(|| match raw(var).map(|v| parse_flag(var, &v)) {
        None => false,
        Some(Ok(b)) => b,
        Some(Err(e)) => {
            report(&e);
            false
        }
    })
}

/// `CAMEL_REQUIRE_GPU`: a GPU test fails instead of skipping.
pub fn require_gpu() -> bool {
    static C: OnceLock<bool> = OnceLock::new();
    flag(&C, "CAMEL_REQUIRE_GPU")
}

/// `CAMEL_POISON`: new CUDA outputs are filled with NaN before their kernel runs.
pub fn poison() -> bool {
    static C: OnceLock<bool> = OnceLock::new();
    flag(&C, "CAMEL_POISON")
}

/// `CAMEL_CUDA_SYNC`: synchronize after every launch.
pub fn cuda_sync() -> bool {
    static C: OnceLock<bool> = OnceLock::new();
    flag(&C, "CAMEL_CUDA_SYNC")
}

/// `CAMEL_REQUIRE_DATA`: a test fails instead of skipping when its data set is missing.
pub fn require_data() -> bool {
    static C: OnceLock<bool> = OnceLock::new();
    flag(&C, "CAMEL_REQUIRE_DATA")
}

fn parse_threads(v: &str) -> Result<usize, ConfigError> {
    match v.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(ConfigError {
            var: "CAMEL_CPU_THREADS",
            value: v.to_string(),
            accepted: "a count ≥ 1".to_string(),
        }),
    }
}

fn env_cpu_threads() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    // the cores this process may run on (its CPU affinity: `taskset -c 3` gives 1)
    let cores = || std::thread::available_parallelism().map_or(1, |n| n.get());
    *N.get_or_init(
        || match raw("CAMEL_CPU_THREADS").map(|v| parse_threads(&v)) {
            None => cores(),
            Some(Ok(n)) => n,
            Some(Err(e)) => {
                report(&e);
                cores()
            }
        },
    )
}

/// Threads the CPU backend splits independent work over on this thread: the innermost
/// [`with_cpu_threads`] override, else `CAMEL_CPU_THREADS`, else the cores the process may run
/// on.
pub fn cpu_threads() -> usize {
    CPU_THREADS_OVERRIDE
        .with(|o| o.get())
        .unwrap_or_else(env_cpu_threads)
}

/// Runs `body` with `n` (at least 1) CPU threads on the calling thread.
pub fn with_cpu_threads<R>(n: usize, body: impl FnOnce() -> R) -> R {
    with_override(&CPU_THREADS_OVERRIDE, n.max(1), body)
}

/// `CAMEL_DATA_DIR`: the data-set folder, when set and not empty.
pub fn data_dir() -> Option<PathBuf> {
    raw("CAMEL_DATA_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn env_steps() -> &'static [Step; Family::ALL.len()] {
    static STEPS: OnceLock<[Step; Family::ALL.len()]> = OnceLock::new();
    STEPS.get_or_init(|| {
        Family::ALL.map(|f| match raw(f.env_var()).map(|v| parse_step(f, &v)) {
            None => f.default_step(),
            Some(Ok(s)) => f.effective(s),
            Some(Err(e)) => {
                report(&e);
                f.default_step()
            }
        })
    })
}

fn env_sgemm() -> SgemmKernel {
    static K: OnceLock<SgemmKernel> = OnceLock::new();
    *K.get_or_init(|| match raw("CAMEL_SGEMM").map(|v| parse_sgemm(&v)) {
        None => SgemmKernel::BEST,
        Some(Ok(k)) => k,
        Some(Err(e)) => {
            report(&e);
            SgemmKernel::BEST
        }
    })
}

thread_local! {
    static STEP_OVERRIDE: Cell<[Option<Step>; Family::ALL.len()]> = const { Cell::new([None; Family::ALL.len()]) };
    static SGEMM_OVERRIDE: Cell<Option<SgemmKernel>> = const { Cell::new(None) };
    static HGEMM_OVERRIDE: Cell<Option<HgemmKernel>> = const { Cell::new(None) };
    static CPU_THREADS_OVERRIDE: Cell<Option<usize>> = const { Cell::new(None) };
    static DETERMINISTIC_OVERRIDE: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Runs `body` with `cell` (a thread-local override) set to `value`; the previous value returns
/// afterwards, also on a panic.
pub(crate) fn with_override<T: Copy + 'static, R>(
    cell: &'static std::thread::LocalKey<Cell<Option<T>>>,
    value: T,
    body: impl FnOnce() -> R,
) -> R {
    struct Restore<T: Copy + 'static>(&'static std::thread::LocalKey<Cell<Option<T>>>, Option<T>);
    impl<T: Copy + 'static> Drop for Restore<T> {
        fn drop(&mut self) {
            self.0.with(|o| o.set(self.1));
        }
    }
    let _restore = Restore(cell, cell.with(|o| o.replace(Some(value))));
    body()
}

/// Whether kernels on this thread keep a fixed order of summation (bit-for-bit reproducible
/// results where the fast path sums with atomics): the innermost [`with_deterministic`]
/// override, else `CAMEL_DETERMINISTIC`.
pub fn deterministic() -> bool {
    static C: OnceLock<bool> = OnceLock::new();
    DETERMINISTIC_OVERRIDE
        .with(|o| o.get())
        .unwrap_or_else(|| flag(&C, "CAMEL_DETERMINISTIC"))
}

/// Runs `body` with [`deterministic`] set to `on` on the calling thread.
pub fn with_deterministic<R>(on: bool, body: impl FnOnce() -> R) -> R {
    with_override(&DETERMINISTIC_OVERRIDE, on, body)
}

fn index(family: Family) -> usize {
    Family::ALL.iter().position(|f| *f == family).unwrap_or(0)
}

/// The step `family` runs on this thread: the innermost [`with_step`] override, else the
/// family's variable, else [`Family::default_step`]. Always a step the family's table lists.
pub fn step(family: Family) -> Step {
    let i = index(family);
    STEP_OVERRIDE
        .with(|o| o.get()[i])
        .unwrap_or_else(|| env_steps()[i])
}

/// Runs `body` with `family` at `step` on the calling thread (a step the family lacks runs as
/// [`Family::effective`] says); the previous selection returns afterwards, also on a panic.
pub fn with_step<R>(family: Family, step: Step, body: impl FnOnce() -> R) -> R {
    struct Restore(usize, Option<Step>);
    impl Drop for Restore {
        fn drop(&mut self) {
            STEP_OVERRIDE.with(|o| {
                let mut a = o.get();
                a[self.0] = self.1;
                o.set(a);
            });
        }
    }
    let i = index(family);
    let prev = STEP_OVERRIDE.with(|o| {
        let mut a = o.get();
        let prev = a[i];
        a[i] = Some(family.effective(step));
        o.set(a);
        prev
    });
    let _restore = Restore(i, prev);
    body()
}

/// The SGEMM step `matmul` and `Linear` run on this thread: the innermost
/// [`with_sgemm_kernel`] override, else `CAMEL_SGEMM`, else [`SgemmKernel::BEST`].
pub fn sgemm_kernel() -> SgemmKernel {
    SGEMM_OVERRIDE.with(|o| o.get()).unwrap_or_else(env_sgemm)
}

/// Runs `body` with the SGEMM step `kernel` on the calling thread.
pub fn with_sgemm_kernel<R>(kernel: SgemmKernel, body: impl FnOnce() -> R) -> R {
    with_override(&SGEMM_OVERRIDE, kernel, body)
}

/// The tensor-core GEMM step 16-bit `matmul` and `Linear` run on this thread: the innermost
/// [`with_hgemm_kernel`] override, else [`HgemmKernel::BEST`].
pub fn hgemm_kernel() -> HgemmKernel {
    HGEMM_OVERRIDE
        .with(|o| o.get())
        .unwrap_or(HgemmKernel::BEST)
}

/// Runs `body` with the tensor-core GEMM step `kernel` on the calling thread.
pub fn with_hgemm_kernel<R>(kernel: HgemmKernel, body: impl FnOnce() -> R) -> R {
    with_override(&HGEMM_OVERRIDE, kernel, body)
}

/// Every set variable of [`VARS`] whose value does not parse (build-time and path variables
/// accept anything), and every set `CAMEL_*` variable that is not in [`VARS`] (a misspelling,
/// or an experiment switch that is now a benchmark flag), so none is silently ignored.
pub fn check() -> Vec<ConfigError> {
    let mut errs = Vec::new();
    for (name, value) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if name.starts_with("CAMEL_") && !VARS.iter().any(|v| v.name == name) {
            errs.push(ConfigError {
                var: "CAMEL_*",
                value: format!("{name}={}", value.to_string_lossy()),
                accepted: "a variable of docs/configuration.md (experiment switches are flags of \
                           the benchmark programs)"
                    .to_string(),
            });
        }
    }
    for var in [
        "CAMEL_REQUIRE_GPU",
        "CAMEL_POISON",
        "CAMEL_CUDA_SYNC",
        "CAMEL_REQUIRE_DATA",
        "CAMEL_DETERMINISTIC",
    ] {
        if let Some(Err(e)) = raw(var).map(|v| parse_flag(var, &v)) {
            errs.push(e);
        }
    }
    if let Some(Err(e)) = raw("CAMEL_SGEMM").map(|v| parse_sgemm(&v)) {
        errs.push(e);
    }
    if let Some(Err(e)) = raw("CAMEL_CPU_THREADS").map(|v| parse_threads(&v)) {
        errs.push(e);
    }
    for f in Family::ALL {
        if let Some(Err(e)) = raw(f.env_var()).map(|v| parse_step(f, &v)) {
            errs.push(e);
        }
    }
    errs
}

/// Switches for measuring experiments: benchmark programs set them from their flags; the
/// library runs the defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Experiments {
    /// Programmatic dependent launch where the device has it (`kernels/common/pdl.cuh`); off
    /// launches every kernel plainly from its compute_80 PTX.
    pub pdl: bool,
    /// LayerNorm backward sums the partial dγ/dβ rows inside its kernel when the grid is all
    /// resident; off runs the separate column-sum kernel.
    pub layernorm_fused_colsum: bool,
    /// Split-K sums its partial products in the GEMM kernel; off runs the separate reduction.
    pub splitk_fused: bool,
    /// Split-K policy `(minimum K per split, maximum splits)`.
    pub splitk: (usize, usize),
    /// The tensor-core GEMM splits K for grids of at most `sm_count / hgemm_split_below` tiles
    /// (`kernels::hgemm::hgemm_plan`).
    pub hgemm_split_below: usize,
    /// The tensor-core GEMM's block-tile width, where the step has it (`None`: chosen by shape,
    /// `kernels::hgemm::hgemm_plan`).
    pub hgemm_width: Option<usize>,
    /// Blocks of step 17's persistent kernel: `None` chooses by shape
    /// (`kernels::hgemm::wgmma_blocks`), `Some(0)` never runs it (a block a tile), `Some(n)` runs
    /// it wherever it can with `n` blocks, at most one a tile (tests take a few, so that each
    /// block runs many tiles).
    pub hgemm_blocks: Option<usize>,
    /// SGEMM step 13's small-tile kernel for small outputs: `None` chooses by shape,
    /// `Some(None)` never, `Some(Some(name))` always the named tile.
    pub async_small: Option<Option<String>>,
    /// SGEMM step 13's TN interior kernel, by a part of its name (`None`: the first).
    pub async_tn: Option<String>,
    /// SGEMM step 13's NN interior kernels (A read in place) where they fit.
    pub async_nn: bool,
    /// SGEMM step 13's whole-K kernels for small outputs with a long K.
    pub async_whole_k: bool,
    /// SGEMM step 13's re-layout of a transposed operand before its TN interior kernel.
    pub async_relayout: bool,
    /// SGEMM step 13's routes for the thin products of a model's layers: a transposed weight
    /// (`x · wᵀ`) copied once so that an NN interior kernel runs, and a weight gradient
    /// (`gᵀ · x`, long K) on the TN interior kernel with split-K.
    pub async_thin: bool,
    /// The blocks of attention step 8's forward, each running query tiles in turn: `None`, one a
    /// multiprocessor (persistent blocks); `Some(n)`, `n` of them, at most one a tile (tests
    /// take a few, so that each block runs many tiles; `usize::MAX` launches a block a tile).
    pub attention_blocks: Option<usize>,
}

impl Default for Experiments {
    fn default() -> Self {
        Experiments {
            pdl: true,
            layernorm_fused_colsum: true,
            splitk_fused: true,
            splitk: (32, 2),
            hgemm_split_below: 4,
            hgemm_width: None,
            hgemm_blocks: None,
            async_small: None,
            async_tn: None,
            async_nn: true,
            async_whole_k: true,
            async_relayout: true,
            async_thin: true,
            attention_blocks: None,
        }
    }
}

fn experiments_cell() -> &'static RwLock<Experiments> {
    static E: OnceLock<RwLock<Experiments>> = OnceLock::new();
    E.get_or_init(|| RwLock::new(Experiments::default()))
}

/// The experiment switches in force (the defaults unless a program set others).
pub fn experiments() -> Experiments {
    with_experiments(Experiments::clone)
}

/// `f` of the experiment switches in force on this thread (a [`with_scoped_experiments`]
/// override, else the process's), without copying them (launchers read them on every launch).
pub fn with_experiments<R>(f: impl FnOnce(&Experiments) -> R) -> R {
    let f = std::cell::Cell::new(Some(f));
    let call = |e: &Experiments| (f.take().expect("called once"))(e);
    if let Some(r) = SCOPED_EXPERIMENTS.with(|t| t.borrow().as_ref().map(call)) {
        return r;
    }
    match experiments_cell().read() {
        Ok(e) => call(&e),
        Err(poisoned) => call(&poisoned.into_inner()),
    }
}

thread_local! {
    static SCOPED_EXPERIMENTS: std::cell::RefCell<Option<Experiments>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `body` with the experiment switches `e` on the calling thread only (tests of a
/// non-default path, beside other tests of the same process).
pub fn with_scoped_experiments<R>(e: Experiments, body: impl FnOnce() -> R) -> R {
    struct Restore(Option<Experiments>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            SCOPED_EXPERIMENTS.with(|t| *t.borrow_mut() = prev);
        }
    }
    let _restore = Restore(SCOPED_EXPERIMENTS.with(|t| t.borrow_mut().replace(e)));
    body()
}

/// Sets the experiment switches for the whole process (benchmark programs, from their flags).
pub fn set_experiments(e: Experiments) {
    if let Ok(mut cur) = experiments_cell().write() {
        *cur = e;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_accept_one_spelling_everywhere() {
        for (v, want) in [
            ("1", true),
            ("on", true),
            ("TRUE", true),
            ("0", false),
            ("off", false),
        ] {
            assert_eq!(parse_flag("CAMEL_POISON", v), Ok(want), "{v}");
        }
        let e = parse_flag("CAMEL_POISON", "yes").unwrap_err();
        assert!(e.to_string().contains("CAMEL_POISON") && e.to_string().contains("on/off"));
    }

    #[test]
    fn steps_parse_by_number_or_name() {
        assert_eq!(parse_step(Family::Softmax, "1"), Ok(Step::One));
        assert_eq!(parse_step(Family::Softmax, "streaming"), Ok(Step::Four));
        let e = parse_step(Family::Softmax, "9").unwrap_err();
        assert!(e.to_string().contains("CAMEL_SOFTMAX") && e.to_string().contains("block_per_row"));
        assert_eq!(parse_sgemm("1"), Ok(SgemmKernel::Naive));
        assert_eq!(parse_sgemm("13"), Ok(SgemmKernel::AsyncPipeline));
        assert_eq!(parse_sgemm("tf32"), Ok(SgemmKernel::Tf32));
        assert_eq!(parse_sgemm("tf32_wgmma"), Ok(SgemmKernel::Tf32Wgmma));
        assert_eq!(parse_sgemm("18"), Ok(SgemmKernel::Tf32Wgmma));
        assert!(parse_sgemm("8").is_err());
    }

    #[test]
    fn overrides_nest_and_restore() {
        let before = step(Family::Softmax);
        with_step(Family::Softmax, Step::One, || {
            assert_eq!(step(Family::Softmax), Step::One);
            with_step(Family::Softmax, Step::Two, || {
                assert_eq!(step(Family::Softmax), Step::Two)
            });
            assert_eq!(step(Family::Softmax), Step::One);
            with_step(Family::Elementwise, Step::Four, || {
                assert_eq!(step(Family::Elementwise), Step::Two)
            });
        });
        assert_eq!(step(Family::Softmax), before);
        with_sgemm_kernel(SgemmKernel::Naive, || {
            assert_eq!(sgemm_kernel(), SgemmKernel::Naive)
        });
    }

    #[test]
    fn cpu_threads_are_a_positive_count_and_scoped_overrides_nest() {
        assert_eq!(parse_threads("4"), Ok(4));
        assert_eq!(parse_threads(" 2 "), Ok(2));
        for bad in ["0", "-1", "four", ""] {
            let e = parse_threads(bad).unwrap_err();
            assert_eq!(e.var, "CAMEL_CPU_THREADS");
            assert!(e.to_string().contains("a count ≥ 1"), "{e}");
        }
        let before = cpu_threads();
        assert!(before >= 1);
        with_cpu_threads(3, || {
            assert_eq!(cpu_threads(), 3);
            with_cpu_threads(0, || assert_eq!(cpu_threads(), 1));
            assert_eq!(cpu_threads(), 3);
        });
        assert_eq!(cpu_threads(), before);
    }

    #[test]
    fn the_defaults_in_the_table_are_the_code_defaults() {
        for f in Family::ALL {
            let var = VARS.iter().find(|v| v.name == f.env_var()).expect("listed");
            assert_eq!(
                parse_step(f, var.default),
                Ok(f.default_step()),
                "{}",
                var.name
            );
        }
        let var = VARS
            .iter()
            .find(|v| v.name == "CAMEL_SGEMM")
            .expect("listed");
        assert_eq!(parse_sgemm(var.default), Ok(SgemmKernel::BEST));
    }

    /// The rustdoc table above, docs/configuration.md and [`VARS`] list the same variables.
    #[test]
    fn docs_list_exactly_the_variables_of_the_table() {
        fn names(text: &str) -> Vec<String> {
            let mut v: Vec<String> = text
                .lines()
                .filter_map(|l| {
                    let l = l.trim_start_matches("//!").trim();
                    let cell = l.strip_prefix("| `")?;
                    Some(cell.split('`').next()?.to_string())
                })
                .filter(|n| n.starts_with("CAMEL_"))
                .collect();
            v.sort();
            v
        }
        let mut want: Vec<String> = VARS.iter().map(|v| v.name.to_string()).collect();
        want.sort();
        let md = include_str!("../../../docs/configuration.md");
        assert_eq!(names(md), want, "docs/configuration.md");
        assert_eq!(names(include_str!("config.rs")), want, "config.rs rustdoc");
    }

    #[test]
    fn every_read_variable_is_in_the_table() {
        // each `CAMEL_` string literal in this crate's sources names a row of the table
        for v in VARS {
            assert!(v.name.starts_with("CAMEL_"));
        }
        for f in Family::ALL {
            assert!(VARS.iter().any(|v| v.name == f.env_var()), "{:?}", f);
        }
    }
}

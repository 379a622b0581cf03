//! Launchers for `kernels/layernorm/` (one PTX module per ladder step): LayerNorm over the
//! last dim, a warp per row.
//! Steps: forward 2 (`warp_welford`), 3 (`row_registers`) and 4
//! (`streaming`: streaming hints), backward 2 (`warp_welford_bwd`), 3
//! (`row_registers_bwd`: a warp per row) and 4 (`warp_pair_bwd`: a pair of warps per
//! row); the backend's steps 1 and 2 share step 2.

use super::rows::{aligned, aligned16, ROW_THREADS};
use super::shape::Elem;
use super::{launch, launch_elems, launch_warp_rows};
use crate::{CudaDevice, DevPtr, Dim3, Error, Kernel, KernelArg, LaunchConfig, Result};

/// PTX module of step 2 (and step 1): `kernels/layernorm/02_warp_welford.cu`.
const STEP2: &str = "layernorm/02_warp_welford";
/// PTX module of step 3: `kernels/layernorm/03_row_registers.cu`.
const STEP3: &str = "layernorm/03_row_registers";
/// PTX module of step 4: `kernels/layernorm/04_streaming.cu`.
const STEP4: &str = "layernorm/04_streaming";

launchers! {
    // the forward of each step (the Forward type)
    (
        dev: &CudaDevice, x: DevPtr, gamma: DevPtr, beta: DevPtr, y: DevPtr, mean: DevPtr,
        rstd: DevPtr, rows: usize, cols: usize, eps: f32,
    );

    /// `y = (x − mean)·rstd·γ + β` per row of `[rows, cols]`; writes `mean[rows]` and
    /// `rstd[rows]` (rstd = 1/√(var + eps), biased variance) for the backward.
    pub fn warp_welford(..) {
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let vec = cols % 4 == 0 && aligned16(&[x, gamma, beta, y]);
        let name = if vec {
            "layernorm_fwd_vec_f32"
        } else {
            "layernorm_fwd_f32"
        };
        let p = [x, gamma, beta, y, mean, rstd];
        forward(dev, STEP2, name, p, rows, cols, eps)
    }

    /// Step 3 of [`warp_welford`] (same arguments and outputs): the row read once into
    /// registers, mean and variance (two-pass) and the write from there. Rows longer than 1024
    /// columns run [`warp_welford`].
    pub fn row_registers(..) {
        let p = [x, gamma, beta, y, mean, rstd];
        layernorm_regs_fwd(dev, "layernorm3_fwd", p, rows, cols, eps)
    }

    /// Step 4 of the forward: [`row_registers`] with
    /// cache-streaming (evict-first) loads of `x` and stores of `y` (`layernorm4_fwd_*`); the same
    /// arithmetic, shapes and fallback.
    pub fn streaming(..) {
        let p = [x, gamma, beta, y, mean, rstd];
        layernorm_regs_fwd(dev, "layernorm4_fwd", p, rows, cols, eps)
    }
}

/// Launches a forward kernel, `(const float* x, const float* γ, const float* β, float* y,
/// float* mean, float* rstd, long long rows, long long cols, float eps)`, a warp per row; `p`
/// is `[x, γ, β, y, mean, rstd]`.
fn forward(
    dev: &CudaDevice,
    module: &str,
    name: &str,
    p: [DevPtr; 6],
    rows: usize,
    cols: usize,
    eps: f32,
) -> Result<()> {
    let [x, gamma, beta, y, mean, rstd] = p;
    let (r, c) = (rows as i64, cols as i64);
    // SAFETY: matches `layernorm_fwd_*` / `layernorm{3,4}_fwd_*(const float* ×3, float* ×3,
    // long long, long long, float)`; the callers pass `[rows, cols]` x and y, `cols` γ and β,
    // `rows` mean and rstd.
    unsafe {
        let args: [&dyn KernelArg; 9] = [&x, &gamma, &beta, &y, &mean, &rstd, &r, &c, &eps];
        launch_warp_rows(dev, module, name, rows, &args)
    }
}

/// Step 3's `(VEC, NV)` for rows of `cols`: a warp per row, `NV` loads of `VEC` floats per lane
/// held in registers; `None` past 1024 columns ([`warp_welford`] then).
pub fn layernorm3_shape(cols: usize, vec: bool) -> Option<(usize, usize)> {
    row_shape(
        cols,
        vec,
        32,
        &[1, 2, 3, 4, 6, 8],
        &[1, 2, 4, 8, 16, 24, 32],
    )
}

/// `(VEC, NV)` for rows of `cols` held by `threads` threads: VEC 4 with `vec` (then `NV` from
/// `vec_nvs`), else 1 (from `scalar_nvs`), `NV` the smallest listed that covers the row; `None`
/// when none does or `cols` is 0.
fn row_shape(
    cols: usize,
    vec: bool,
    threads: usize,
    vec_nvs: &[usize],
    scalar_nvs: &[usize],
) -> Option<(usize, usize)> {
    let (vw, nvs) = if vec { (4, vec_nvs) } else { (1, scalar_nvs) };
    let need = (cols / vw).div_ceil(threads);
    nvs.iter()
        .find(|&&nv| nv >= need)
        .map(|&nv| (vw, nv))
        .filter(|_| cols > 0)
}

/// The forward kernels that hold a row in registers, `{prefix}_v{VEC}_n{NV}_f32`; `p` is
/// `[x, γ, β, y, mean, rstd]`.
fn layernorm_regs_fwd(
    dev: &CudaDevice,
    prefix: &str,
    p: [DevPtr; 6],
    rows: usize,
    cols: usize,
    eps: f32,
) -> Result<()> {
    if !layernorm_regs_fwd_typed(dev, prefix, p, rows, cols, eps, Elem::F32)? {
        let [x, gamma, beta, y, mean, rstd] = p;
        return warp_welford(dev, x, gamma, beta, y, mean, rstd, rows, cols, eps);
    }
    Ok(())
}

/// Step 4's forward with `x`, γ, β and `y` of any float dtype `elem` (`layernorm4_fwd_*_{f32,
/// f16,bf16}`: each element widens to f32 as it loads, `y` rounds once as it is stored; `mean`
/// and `rstd` are f32). `Ok(false)`, launching nothing, for rows longer than 1024 columns,
/// which have f32 kernels only. `p` is `[x, γ, β, y, mean, rstd]`.
pub fn streaming_typed(
    dev: &CudaDevice,
    p: [DevPtr; 6],
    rows: usize,
    cols: usize,
    eps: f32,
    elem: Elem,
) -> Result<bool> {
    layernorm_regs_fwd_typed(dev, "layernorm4_fwd", p, rows, cols, eps, elem)
}

/// [`layernorm_regs_fwd`] in `elem`: `Ok(false)` where the row does not fit the registers.
fn layernorm_regs_fwd_typed(
    dev: &CudaDevice,
    prefix: &str,
    p: [DevPtr; 6],
    rows: usize,
    cols: usize,
    eps: f32,
    elem: Elem,
) -> Result<bool> {
    let [x, gamma, beta, y, ..] = p;
    if rows == 0 || cols == 0 {
        return Ok(true);
    }
    let vec = cols % 4 == 0 && aligned(&[x, gamma, beta, y], 4 * elem.bytes());
    let Some((vw, nv)) = layernorm3_shape(cols, vec) else {
        return Ok(false);
    };
    let sfx = elem.suffix();
    let name = super::rows::KernelName::new(format_args!("{prefix}_v{vw}_n{nv}_{sfx}"));
    let name = name.as_str();
    let module = if prefix == "layernorm4_fwd" {
        STEP4
    } else {
        STEP3
    };
    forward(dev, module, name, p, rows, cols, eps)?;
    Ok(true)
}

launchers! {
    // the backward of each step (the Backward type)
    (
        dev: &CudaDevice, x: DevPtr, gamma: DevPtr, g: DevPtr, mean: DevPtr, rstd: DevPtr,
        dx: DevPtr, dgamma: DevPtr, dbeta: DevPtr, rows: usize, cols: usize,
    );

    /// Backward: `dx` (`[rows, cols]`), `dgamma` and `dbeta` (`[cols]`) from the upstream grad
    /// `g` and the forward's `mean`/`rstd`. Two launches: the row pass (with per-block partial
    /// sums of dγ, dβ) and the column sum of the partials. Deterministic (no atomics).
    pub fn warp_welford_bwd(..) {
        if cols == 0 {
            return Ok(());
        }
        let vec = cols % 4 == 0 && aligned16(&[x, gamma, g, dx]);
        let name = if vec {
            "layernorm_bwd_vec_f32"
        } else {
            "layernorm_bwd_f32"
        };
        // Each warp keeps dγ and dβ for all columns in shared memory: 8·cols bytes a warp. Aim for
        // 24 KiB a block (several blocks per SM), at least one warp, at most 8.
        let per_warp = 8 * cols;
        let warps = (24 * 1024 / per_warp).clamp(1, 8);
        let smem = warps * per_warp;
        let limit = dev.limits().max_shared_per_block_optin as usize;
        if smem > limit {
            return Err(Error::LaunchConfig {
                kernel: name.to_string(),
                msg: format!(
                    "{cols} columns need {smem} bytes of shared memory for dγ/dβ, more than the device's {limit}"
                ),
            });
        }
        let sms = dev.limits().sm_count.max(1) as usize;
        let blocks = rows.div_ceil(warps).clamp(1, 4 * sms);
        let partial = dev.alloc(2 * blocks * cols * 4)?;
        let cfg = LaunchConfig::new(Dim3::x(blocks as u32), Dim3::x(32 * warps as u32))
            .with_shared_mem(smem as u32);
        let (part, r, c, b) = (partial.ptr(), rows as i64, cols as i64, blocks as i64);
        // SAFETY: matches `layernorm_bwd_*(const float* ×5, float*, float*, long long, long long)`;
        // `partial` holds 2 × blocks × cols floats.
        unsafe {
            let args: [&dyn KernelArg; 9] = [&x, &gamma, &g, &mean, &rstd, &dx, &part, &r, &c];
            launch(dev, STEP2, name, cfg, &args)?;
        }
        // SAFETY: matches `layernorm_param_grad_f32(const float*, float*, float*, long long, long long)`.
        unsafe {
            let args: [&dyn KernelArg; 5] = [&part, &dgamma, &dbeta, &b, &c];
            launch_elems(dev, STEP2, "layernorm_param_grad_f32", 2 * cols, &args)
        }
    }

    /// Step 3 of [`warp_welford_bwd`] (same arguments and outputs): a warp per row with the row
    /// in registers (x and g read once, x̂ recomputed from `mean`/`rstd`, dx written from the
    /// registers), each lane's dγ/dβ kept in registers across the rows it visits, one partial row
    /// per block, then a deterministic column sum (in the same kernel when its grid is all resident
    /// at once, else `layernorm3_param_grad_f32`). Rows longer than 1024 columns run
    /// [`warp_welford_bwd`].
    pub fn row_registers_bwd(..) {
        let vec = cols % 4 == 0 && aligned16(&[x, gamma, g, dx]);
        let shape = layernorm3_shape(cols, vec).map(|(vw, nv)| (3, 32, vw, nv));
        let p = [x, gamma, g, mean, rstd, dx, dgamma, dbeta];
        regs_bwd(dev, shape, p, rows, cols, Elem::F32)
    }

    /// Step 4 of [`warp_welford_bwd`] (same arguments and outputs; the backend's default): step 3
    /// with a pair of warps per row (`layernorm4_bwd_*`), so each thread holds half the row and half
    /// the dγ/dβ sums in registers, and its γ too. Rows longer than 1024 columns run
    /// [`warp_welford_bwd`].
    pub fn warp_pair_bwd(..) {
        let vec = cols % 4 == 0 && aligned16(&[x, gamma, g, dx]);
        let shape = layernorm4_bwd_shape(cols, vec).map(|(vw, nv)| (4, 64, vw, nv));
        let p = [x, gamma, g, mean, rstd, dx, dgamma, dbeta];
        regs_bwd(dev, shape, p, rows, cols, Elem::F32)
    }
}

/// Step 4's backward with `x`, γ, `g`, `dx`, dγ and dβ of any float dtype `elem`
/// (`layernorm4_bwd_*_{f32,f16,bf16}`: computed in f32 from the widened elements, every output
/// rounded once; the statistics and the partial rows are f32). `Ok(false)`, launching nothing,
/// for rows longer than 1024 columns (f32 kernels only). `p` is `[x, γ, g, mean, rstd, dx, dγ,
/// dβ]`.
pub fn warp_pair_bwd_typed(
    dev: &CudaDevice,
    p: [DevPtr; 8],
    rows: usize,
    cols: usize,
    elem: Elem,
) -> Result<bool> {
    let [x, gamma, g, _, _, dx, ..] = p;
    let vec = cols % 4 == 0 && aligned(&[x, gamma, g, dx], 4 * elem.bytes());
    let Some((vw, nv)) = layernorm4_bwd_shape(cols, vec) else {
        return Ok(cols == 0);
    };
    regs_bwd(dev, Some((4, 64, vw, nv)), p, rows, cols, elem)?;
    Ok(true)
}

/// Step 4's `(VEC, NV)` for rows of `cols`: a pair of warps per row, `NV` loads of `VEC` floats
/// per thread; `None` past 1024 columns.
pub fn layernorm4_bwd_shape(cols: usize, vec: bool) -> Option<(usize, usize)> {
    row_shape(cols, vec, 64, &[1, 2, 3, 4], &[1, 2, 4, 8, 12, 16])
}

/// Steps 3 and 4 of the backward: `shape` = (step, threads per row, VEC, NV), or `None` for rows
/// too long for the registers (step 2 then); `p` is `[x, γ, g, mean, rstd, dx, dγ, dβ]`.
fn regs_bwd(
    dev: &CudaDevice,
    shape: Option<(usize, usize, usize, usize)>,
    p: [DevPtr; 8],
    rows: usize,
    cols: usize,
    elem: Elem,
) -> Result<()> {
    if cols == 0 {
        return Ok(());
    }
    let [x, gamma, g, mean, rstd, dx, dgamma, dbeta] = p;
    let Some((step, group, vw, nv)) = shape else {
        return warp_welford_bwd(dev, x, gamma, g, mean, rstd, dx, dgamma, dbeta, rows, cols);
    };
    let sfx = elem.suffix();
    let name = super::rows::KernelName::new(format_args!("layernorm{step}_bwd_v{vw}_n{nv}_{sfx}"));
    let name = name.as_str();
    let k = dev.function(if step == 4 { STEP4 } else { STEP3 }, name)?;
    // Dynamic shared memory: each group's dγ/dβ slice for the block's partial row (48 KiB at
    // 768 columns for step 3, 24 KiB for step 4, whose threads hold half as many columns).
    let groups = ROW_THREADS as usize / group;
    let smem = groups * 2 * group * vw * nv * 4;
    // (A device that cannot give that much to a block gets a launch-configuration error.)
    let lim = dev.limits();
    // A grid-stride loop over rows: at most as many blocks of 256 as fit on the GPU at once (by
    // the kernel's registers and shared memory), at most 4 a multiprocessor, so each group visits
    // several rows and the partial rows stay few. At least one block, even for zero rows (it
    // writes zero partials).
    let fit = k.limits().blocks_per_sm(lim, ROW_THREADS, smem as u32) as usize;
    let per_sm = fit.clamp(1, 4);
    let blocks = bwd_blocks(rows, groups, per_sm * lim.sm_count.max(1) as usize);
    let cfg = LaunchConfig::new(Dim3::x(blocks as u32), Dim3::x(ROW_THREADS))
        .with_shared_mem(smem as u32);
    // The column sum of the partial rows runs inside the kernel when every block of the grid is
    // resident at once (its blocks wait for each other; at most 4 × 256 threads a SM, below
    // every limit of sm_80–sm_90): by the registers and shared memory, `fit` ≥ 1 makes the grid
    // above resident. The wait also needs no other kernel to hold the SMs meanwhile: camel
    // queues everything on the device's one stream.
    let counters = if fit >= 1 && fused_colsum_on() {
        dev.counters(2)?
    } else {
        DevPtr::NULL
    };
    launch_rows_bwd(dev, &k, cfg, p, rows, cols, counters, elem)
}

/// Blocks for the backward's grid-stride loop over `rows`, `groups` rows a block a round, at most
/// `max_blocks`: the fewest blocks that need no more rounds than `max_blocks` would, so the last
/// round is as full as the others (16384 rows, 4 a block, 264 at most: 256 blocks, 16 full rounds,
/// instead of 264 and a last round half idle).
fn bwd_blocks(rows: usize, groups: usize, max_blocks: usize) -> usize {
    let per_round = groups.max(1);
    let rounds = rows.div_ceil(per_round * max_blocks.max(1)).max(1);
    rows.div_ceil(rounds * per_round)
        .clamp(1, max_blocks.max(1))
}

/// [`Experiments::layernorm_fused_colsum`](crate::config::Experiments::layernorm_fused_colsum)
/// off keeps the separate column-sum kernel (for measuring and for testing that path).
fn fused_colsum_on() -> bool {
    crate::config::with_experiments(|e| e.layernorm_fused_colsum)
}

/// Launches a step-3 or step-4 backward kernel `k` (`(const float* ×5, float*, float*, long long, long
/// long, float*, float*, int*)`; one partial row of dγ/dβ per block of `cfg`'s grid). With
/// `counters` (2 zeroed device ints, [`CudaDevice::counters`]; only for a grid that is all
/// resident at once) the kernel sums the partial rows into `dgamma` and `dbeta` itself; with
/// [`DevPtr::NULL`] the column-sum kernel runs after it. `p` as in [`regs_bwd`].
#[allow(clippy::too_many_arguments)]
fn launch_rows_bwd(
    dev: &CudaDevice,
    k: &Kernel,
    cfg: LaunchConfig,
    p: [DevPtr; 8],
    rows: usize,
    cols: usize,
    counters: DevPtr,
    elem: Elem,
) -> Result<()> {
    let [x, gamma, g, mean, rstd, dx, dgamma, dbeta] = p;
    let blocks = cfg.grid.x as usize;
    let partial = dev.alloc(2 * blocks * cols * 4)?;
    let (part, r, c) = (partial.ptr(), rows as i64, cols as i64);
    let args: [&dyn KernelArg; 12] = [
        &x, &gamma, &g, &mean, &rstd, &dx, &part, &r, &c, &dgamma, &dbeta, &counters,
    ];
    // SAFETY: the caller passes a `layernorm{3,4}_bwd_*(const T* ×3, const float* ×2, T*, float*,
    // long long, long long, T*, T*, int*)` kernel with its configuration (dynamic shared memory
    // for every warp's dγ/dβ slice), T the element type of `elem`; `partial` holds 2 × blocks ×
    // cols floats, one row of each per block of the grid; `counters`, when not null, 2 zeroed
    // ints and a grid all resident.
    unsafe { dev.launch(k, cfg, &args)? };
    if counters != DevPtr::NULL {
        return Ok(());
    }
    layernorm3_param_grad(dev, partial.ptr(), dgamma, dbeta, blocks, cols, elem)
}

/// The column sum of `blocks` partial rows of dγ and dβ (`partial`: `[2, blocks, cols]`) into
/// `dgamma` and `dbeta` of `elem`, in a fixed order (`layernorm3_param_grad_{f32,f16,bf16}`;
/// steps 3 and 4).
fn layernorm3_param_grad(
    dev: &CudaDevice,
    partial: DevPtr,
    dgamma: DevPtr,
    dbeta: DevPtr,
    blocks: usize,
    cols: usize,
    elem: Elem,
) -> Result<()> {
    let cfg = LaunchConfig::new(Dim3::x((2 * cols).div_ceil(8) as u32), Dim3::xyz(8, 64, 1));
    let (b, c) = (blocks as i64, cols as i64);
    // SAFETY: matches `layernorm3_param_grad_{dtype}(const float*, T*, T*, long long, long long)`,
    // T the element type of `elem`;
    // blocks of 8 × 64 as the kernel assumes, 8 outputs a block.
    unsafe {
        let args: [&dyn KernelArg; 5] = [&partial, &dgamma, &dbeta, &b, &c];
        let name =
            super::rows::KernelName::new(format_args!("layernorm3_param_grad_{}", elem.suffix()));
        launch(dev, STEP3, name.as_str(), cfg, &args)
    }
}

// ------------------------------------------------------------------ the ladder's table

/// A LayerNorm forward launcher: `(dev, x, gamma, beta, y, mean, rstd, rows, cols, eps)`.
pub type Forward = fn(
    &CudaDevice,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    usize,
    usize,
    f32,
) -> Result<()>;
/// A LayerNorm backward launcher: `(dev, x, gamma, g, mean, rstd, dx, dgamma, dbeta, rows,
/// cols)`.
pub type Backward = fn(
    &CudaDevice,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    usize,
    usize,
) -> Result<()>;

/// The launchers of one step of the LayerNorm ladder.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// The step (described in [`super::ladder::Family::LayerNorm`]'s table).
    pub step: super::rows::Step,
    /// Its forward.
    pub forward: Forward,
    /// Its backward.
    pub backward: Backward,
}

/// The LayerNorm ladder (steps 1 and 2 are one kernel, listed as step 2): the one table the
/// backend, the benchmarks and the tests run.
pub const STEPS: [Kernels; 3] = {
    use super::rows::Step;
    [
        Kernels {
            step: Step::Two,
            forward: warp_welford,
            backward: warp_welford_bwd,
        },
        Kernels {
            step: Step::Three,
            forward: row_registers,
            backward: row_registers_bwd,
        },
        Kernels {
            step: Step::Four,
            forward: streaming,
            backward: warp_pair_bwd,
        },
    ]
};

/// The launchers of `step` (the highest step at or below it; step 1 is step 2).
pub fn at(step: super::rows::Step) -> &'static Kernels {
    super::ladder::pick(&STEPS, step, |k| k.step)
}

#[cfg(test)]
mod tests {
    use super::bwd_blocks;

    /// The backward's grid: as few blocks as keep the rounds of the most that fit.
    #[test]
    fn bwd_grid_keeps_the_rounds_and_fills_the_last() {
        // (rows, rows a block a round, most blocks) → blocks
        assert_eq!(bwd_blocks(16384, 4, 264), 256);
        assert_eq!(bwd_blocks(16000, 4, 264), 250);
        assert_eq!(bwd_blocks(10001, 4, 264), 251);
        assert_eq!(bwd_blocks(1, 4, 264), 1);
        assert_eq!(bwd_blocks(0, 4, 264), 1);
        assert_eq!(bwd_blocks(1056, 4, 264), 264);
        assert_eq!(bwd_blocks(1057, 4, 264), 133);
        for rows in [1usize, 7, 33, 1000, 4097, 16384, 100_000] {
            for (groups, max) in [(4, 264), (8, 264), (8, 132), (4, 1)] {
                let b = bwd_blocks(rows, groups, max);
                let rounds = |b: usize| rows.div_ceil(groups * b);
                assert!((1..=max).contains(&b), "{rows} {groups} {max}: {b}");
                assert_eq!(
                    rounds(b),
                    rounds(max),
                    "{rows} {groups} {max}: {b} adds a round"
                );
                assert!(
                    b == 1 || rounds(b - 1) > rounds(max),
                    "{rows} {groups} {max}: {b} not the fewest"
                );
            }
        }
    }

    /// Every shape step 3 can pick is instantiated in `kernels/layernorm/` and holds the row.
    #[test]
    fn layernorm3_shapes_are_instantiated() {
        let src = concat!(
            include_str!("../../../../kernels/layernorm/03_row_registers.cu"),
            include_str!("../../../../kernels/layernorm/04_streaming.cu"),
        );
        assert!(src.contains("layernorm4_fwd_v##VEC##_n##NV##_##SUF("));
        for (ty, sfx) in [
            ("float", "f32"),
            ("__half", "f16"),
            ("__nv_bfloat16", "bf16"),
        ] {
            assert!(src.contains(&format!("LAYERNORM4_T(VEC, NV, {ty}, {sfx})")));
            assert!(src.contains(&format!("LAYERNORM4_BWD_T(VEC, NV, {ty}, {sfx})")));
            assert!(src.contains(&format!("LAYERNORM3_PARAM_GRAD({ty}, {sfx})")));
        }
        for cols in 1..=1100 {
            for vec in [false, true] {
                if vec && cols % 4 != 0 {
                    continue;
                }
                match super::layernorm3_shape(cols, vec) {
                    Some((vw, nv)) => {
                        assert!(32 * vw * nv >= cols, "cols {cols}");
                        assert!(
                            src.contains(&format!("LAYERNORM3({vw}, {nv})")),
                            "cols {cols}"
                        );
                        assert!(
                            src.contains(&format!("LAYERNORM4({vw}, {nv})")),
                            "cols {cols}"
                        );
                        assert!(
                            src.contains(&format!("LAYERNORM3_BWD({vw}, {nv})")),
                            "cols {cols} (backward)"
                        );
                    }
                    None => assert!(cols > 1024, "cols {cols}"),
                }
                match super::layernorm4_bwd_shape(cols, vec) {
                    Some((vw, nv)) => {
                        assert!(64 * vw * nv >= cols, "cols {cols} (step 4)");
                        assert!(
                            src.contains(&format!("LAYERNORM4_BWD({vw}, {nv})")),
                            "cols {cols} (backward, step 4)"
                        );
                    }
                    None => assert!(cols > 1024, "cols {cols} (step 4)"),
                }
            }
        }
    }
}

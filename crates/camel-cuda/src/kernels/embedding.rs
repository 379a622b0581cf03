//! Launchers for `kernels/embedding/` (one PTX module per ladder step). `err` points at the device's index-error slot.

use super::shape::Elem;
use super::{launch, launch_elems, warp_rows_config};
use crate::{launch_1d, CudaDevice, DevPtr, KernelArg, LaunchConfig, Result};

/// PTX module of step 1: `kernels/embedding/01_thread_per_element.cu`.
const STEP1: &str = "embedding/01_thread_per_element";
/// PTX module of step 2: `kernels/embedding/02_warp_per_row.cu`.
const STEP2: &str = "embedding/02_warp_per_row";
/// PTX module of step 3: `kernels/embedding/03_grouped_rows.cu`.
const STEP3: &str = "embedding/03_grouped_rows";
/// PTX module of step 4: `kernels/embedding/04_grouped_one_launch.cu`.
const STEP4: &str = "embedding/04_grouped_one_launch";

launchers! {
    // gathers of rows (the Rows type)
    (
        dev: &CudaDevice, table: DevPtr, idx: DevPtr, out: DevPtr, n: usize, v: usize, d: usize,
        err: DevPtr,
    );

    /// `out[i, :] = table[idx[i], :]` for `n` indices into a `[v, d]` table.
    pub fn index_select_rows_f32(..) {
        let name = "index_select_rows_f32";
        rows_op(dev, STEP1, name, false, [table, idx, out], [n, v, d], err)
    }

    /// Step 2 of [`index_select_rows_f32`]: a warp per index, float4 rows when `d % 4 == 0`.
    pub fn index_select_rows_warp_f32(..) {
        let vec = d % 4 == 0 && super::rows::aligned16(&[table, out]);
        let name = if vec {
            "index_select_rows_warp_vec_f32"
        } else {
            "index_select_rows_warp_f32"
        };
        rows_op(dev, STEP2, name, true, [table, idx, out], [n, v, d], err)
    }

    /// Step 2's gather for an f16 or bf16 table (16-bit patterns moved as they are).
    pub fn index_select_rows_warp_b16(..) {
        let name = "index_select_rows_warp_b16";
        rows_op(dev, STEP2, name, true, [table, idx, out], [n, v, d], err)
    }
}

/// Step 2's scatter-add of 16-bit rows `g` (`elem` f16 or bf16) into the f32 `out` (zeroed
/// first): `out[idx[i], :] += g[i, :]`, widened.
#[allow(clippy::too_many_arguments)]
pub fn index_add_rows_warp_half(
    dev: &CudaDevice,
    g: DevPtr,
    idx: DevPtr,
    out: DevPtr,
    n: usize,
    v: usize,
    d: usize,
    err: DevPtr,
    elem: Elem,
) -> Result<()> {
    let name = match elem {
        Elem::F16 => "index_add_rows_warp_f16",
        Elem::BF16 => "index_add_rows_warp_bf16",
        _ => {
            let msg = format!("{} is not a 16-bit float", elem.suffix());
            return Err(crate::Error::invalid(
                "embedding::index_add_rows_warp_half",
                msg,
            ));
        }
    };
    rows_op(dev, STEP2, name, true, [g, idx, out], [n, v, d], err)
}

/// Launches a gather or scatter-add kernel of steps 1 and 2, `(const float* src, const long
/// long* idx, float* out, long long n, long long v, long long d, long long* err)`: a thread per
/// element of `[n, d]`, or with `warp` a warp per row of `n`; nothing when
/// `[n, d]` is empty. `p` is `[src, idx, out]`, `nvd` `[n, v, d]`.
fn rows_op(
    dev: &CudaDevice,
    module: &str,
    name: &str,
    warp: bool,
    p: [DevPtr; 3],
    nvd: [usize; 3],
    err: DevPtr,
) -> Result<()> {
    let [src, idx, out] = p;
    let [n, v, d] = nvd;
    if n * d == 0 {
        return Ok(());
    }
    let cfg = if warp {
        warp_rows_config(name, n)?
    } else {
        launch_1d(n * d)
    };
    let (n, v, d) = (n as i64, v as i64, d as i64);
    // SAFETY: matches `index_{select,add}_rows*(const T*, const long long*, U*, long long ×3, long
    // long*)`; the callers pass `[v, d]` and `[n, d]` elements of the kernel's types, `n` indices
    // and the error slot.
    unsafe {
        let args: [&dyn KernelArg; 7] = [&src, &idx, &out, &n, &v, &d, &err];
        launch(dev, module, name, cfg, &args)
    }
}

launchers! {
    // scatter-adds of rows (the Rows type)
    (
        dev: &CudaDevice, g: DevPtr, idx: DevPtr, out: DevPtr, n: usize, v: usize, d: usize,
        err: DevPtr,
    );

    /// `out[idx[i], :] += g[i, :]` (atomic; `out` must be zeroed first).
    pub fn index_add_rows_f32(..) {
        let name = "index_add_rows_f32";
        rows_op(dev, STEP1, name, false, [g, idx, out], [n, v, d], err)
    }

    /// Step 2 of [`index_add_rows_f32`]: a warp per index, atomicAdd along the row.
    pub fn index_add_rows_warp_f32(..) {
        let name = "index_add_rows_warp_f32";
        rows_op(dev, STEP2, name, true, [g, idx, out], [n, v, d], err)
    }

    /// Step 3 of [`index_add_rows_f32`]: `out[r, :] = Σ g[i, :]` over the tokens `i` with
    /// `idx[i] = r`, with the tokens grouped by row first (count, scan, fill), so that each row of
    /// `out` is written once instead of accumulated with atomics. `out` need not be zeroed: every
    /// row is written (zeros where no token points). Bad indices record the deferred index error
    /// and are skipped, as in steps 1–2. Needs `n` and `v` below 2³¹ (int32 offsets).
    /// Seven launches: count, two for the scan, fill, zero, gather (and the counts' memset).
    pub fn index_add_rows_sorted_f32(..) {
        let name = "embedding_bwd (step 3)";
        if v * d == 0 {
            return Ok(());
        }
        if n >= i32::MAX as usize || v >= i32::MAX as usize || v.div_ceil(SCAN_TILE) > 65_535 {
            return Err(crate::Error::LaunchConfig {
                kernel: name.to_string(),
                msg: format!(
                    "{n} tokens into {v} rows: both must be below 2^31 (int32 offsets), and the \
                     rows at most 65535 × 4096 (one scan block per 4096 rows)"
                ),
            });
        }
        // i32 workspaces: counts (v, zeroed) | start (v + 1) | cursor (v) | order (n) | rows (n) |
        // the scan's tile totals (one per 4096 rows)
        let tiles = v.div_ceil(SCAN_TILE);
        let count_buf = dev.alloc(v * 4)?;
        dev.memset_zero(&count_buf)?;
        let work = dev.alloc((2 * v + 1 + 2 * n.max(1) + tiles) * 4)?;
        let at = |ints: usize| DevPtr(work.ptr().0 + 4 * ints as u64);
        let (counts, start, cursor) = (count_buf.ptr(), at(0), at(v + 1));
        let (order, rows) = (at(2 * v + 1), at(2 * v + 1 + n.max(1)));
        let tile_sums = at(2 * v + 1 + 2 * n.max(1));
        let (ni, vi, di) = (n as i64, v as i64, d as i64);
        // SAFETY (every launch below): the pointers are the caller's g ([n, d] f32), idx (n i64),
        // out ([v, d] f32) and err slot, and the workspace slices laid out above; the argument
        // lists match the kernels in kernels/embedding/03_grouped_rows.cu.
        unsafe {
            let count_args: [&dyn KernelArg; 5] = [&idx, &ni, &vi, &counts, &err];
            launch_elems(dev, STEP3, "embedding_bwd_count", n, &count_args)?;
            let scan = LaunchConfig::new(crate::Dim3::x(tiles as u32), crate::Dim3::x(1024));
            let tile_args: [&dyn KernelArg; 4] = [&counts, &start, &tile_sums, &vi];
            launch(dev, STEP3, "embedding_bwd_scan_tiles", scan, &tile_args)?;
            let offset_args: [&dyn KernelArg; 4] = [&tile_sums, &start, &cursor, &vi];
            launch(dev, STEP3, "embedding_bwd_scan_offsets", scan, &offset_args)?;
            let fill_args: [&dyn KernelArg; 6] = [&idx, &ni, &vi, &cursor, &order, &rows];
            launch_elems(dev, STEP3, "embedding_bwd_fill", n, &fill_args)?;
            let zero = warp_rows_config(name, v)?;
            launch(
                dev,
                STEP3,
                "embedding_bwd_zero",
                zero,
                &[&start, &vi, &di, &out],
            )?;
            if n > 0 {
                let vec = d % 4 == 0 && out.0 % 16 == 0 && g.0 % 16 == 0;
                let w = if vec { 4 } else { 1 };
                let warps = n.div_ceil(EMB_CHUNK) * (d / w).div_ceil(32);
                let kname = if vec {
                    "embedding_bwd_gather_vec_f32"
                } else {
                    "embedding_bwd_gather_f32"
                };
                let cfg = warp_rows_config(name, warps)?;
                let args: [&dyn KernelArg; 7] = [&g, &start, &order, &rows, &vi, &di, &out];
                launch(dev, STEP3, kname, cfg, &args)?;
            }
        }
        // `work` returns to the stream-ordered cache: later users run after these kernels
        Ok(())
    }

    /// Step 4 of [`index_add_rows_f32`]: step 3's grouping by row in one launch of resident blocks
    /// (count with ranks, scan, fill, between grid barriers; its counters are the device's, left
    /// zero, so no memset), and a gather in which a warp owns the groups that start in its chunk,
    /// so each gradient row is stored once without atomics (only rows of more than 128 tokens are
    /// split over warps and added atomically). Two launches in all. `out` need not be zeroed.
    /// Needs `n` and `v` below 2³¹ − 1 (int32 offsets).
    pub fn index_add_rows_grouped_f32(..) {
        let name = "embedding_bwd (step 4)";
        if v * d == 0 {
            return Ok(());
        }
        if n >= i32::MAX as usize || v >= i32::MAX as usize {
            return Err(crate::Error::LaunchConfig {
                kernel: name.to_string(),
                msg: format!("{n} tokens into {v} rows: both must be below 2^31 - 1 (int32 offsets)"),
            });
        }
        let group = dev.function(STEP4, "embedding_bwd4_group")?;
        // The grid waits for itself at two barriers: every block must be resident at once. As many
        // blocks of 256 as fit (by the kernel's registers), no more than the tokens or tiles need.
        let lim = dev.limits();
        let threads = super::rows::ROW_THREADS;
        let fit = group.limits().blocks_per_sm(lim, threads, 0) as usize;
        if fit == 0 {
            return Err(crate::Error::LaunchConfig {
                kernel: name.to_string(),
                msg: "no block of 256 threads fits on a multiprocessor".to_string(),
            });
        }
        let tiles = v.div_ceil(EMB4_TILE);
        let blocks = n
            .div_ceil(threads as usize)
            .max(tiles)
            .clamp(1, fit * lim.sm_count.max(1) as usize);
        // Zero-whenever-idle ints: counts (v, padded to even) | tile flags (u64 each) | barrier (2)
        let zero = dev.counters(v.div_ceil(2) * 2 + 2 * tiles + 2)?;
        // Workspace: start (v + 1 ints) | ranks (n ints) | entries (n int2, 8-byte aligned)
        let ent_at = (v + 1 + n).div_ceil(2) * 2;
        let work = dev.alloc((ent_at + 2 * n.max(1)) * 4)?;
        let at = |ints: usize| DevPtr(work.ptr().0 + 4 * ints as u64);
        let (start, rank, ent) = (at(0), at(v + 1), at(ent_at));
        let (ni, vi, di) = (n as i64, v as i64, d as i64);
        let vec = d % 4 == 0 && out.0 % 16 == 0 && g.0 % 16 == 0;
        let w = if vec { 4 } else { 1 };
        let zw = v.div_ceil(32);
        let warps = zw + n.div_ceil(EMB_CHUNK) * (d / w).div_ceil(32);
        let gather = dev.function(
            STEP4,
            if vec {
                "embedding_bwd4_gather_vec_f32"
            } else {
                "embedding_bwd4_gather_f32"
            },
        )?;
        let cfg = LaunchConfig::new(crate::Dim3::x(blocks as u32), crate::Dim3::x(threads));
        let zwi = zw as i64;
        // SAFETY: the pointers are the caller's g ([n, d] f32), idx (n i64), out ([v, d] f32) and
        // err slot, the device's zero counters (sized above) and the workspace slices laid out
        // above; the argument lists match the kernels in
        // kernels/embedding/04_grouped_one_launch.cu. The group kernel's
        // grid is resident at once (fit ≥ 1 block a multiprocessor, at most fit × SMs blocks) and
        // nothing else runs meanwhile: camel queues everything on the device's one stream.
        unsafe {
            dev.launch(
                &group,
                cfg,
                &[&idx, &ni, &vi, &di, &zero, &rank, &start, &ent, &out, &err],
            )?;
            dev.launch(
                &gather,
                warp_rows_config(name, warps)?,
                &[&g, &start, &ent, &vi, &di, &zwi, &out],
            )?;
        }
        Ok(())
    }
}

/// Grouped tokens per warp in step 3's gather (`EMB_CHUNK` in `kernels/embedding/embedding.cuh`).
const EMB_CHUNK: usize = 32;
/// Rows per block of step 3's scan (1024 threads × 4).
const SCAN_TILE: usize = 4096;

/// Rows per tile of step 4's scan (`EMB4_TILE` in `kernels/embedding/04_grouped_one_launch.cu`).
const EMB4_TILE: usize = 1024;

// ------------------------------------------------------------------ the ladder's table

/// An embedding launcher: `(dev, src, idx, dst, n, v, d, err)` (the gather reads table rows
/// into `dst`; the scatter adds gradient rows into the table `dst`).
pub type Rows = fn(&CudaDevice, DevPtr, DevPtr, DevPtr, usize, usize, usize, DevPtr) -> Result<()>;

/// The launchers of one step of the embedding ladder.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// The step (described in [`super::ladder::Family::Embedding`]'s table).
    pub step: super::rows::Step,
    /// The forward gather.
    pub select: Rows,
    /// The backward's atomic scatter-add into a zeroed table.
    pub add: Rows,
    /// The backward that groups tokens by row and writes every row itself (no zeroing), used
    /// from `EMBEDDING_SORTED_MIN` upstream elements (camel-core's `backend::ladder`).
    pub grouped: Option<Rows>,
}

/// The embedding ladder: the one table the backend, the benchmarks and the tests run.
pub const STEPS: [Kernels; 4] = {
    use super::rows::Step;
    [
        Kernels {
            step: Step::One,
            select: index_select_rows_f32,
            add: index_add_rows_f32,
            grouped: None,
        },
        Kernels {
            step: Step::Two,
            select: index_select_rows_warp_f32,
            add: index_add_rows_warp_f32,
            grouped: None,
        },
        Kernels {
            step: Step::Three,
            select: index_select_rows_warp_f32,
            add: index_add_rows_warp_f32,
            grouped: Some(index_add_rows_sorted_f32),
        },
        Kernels {
            step: Step::Four,
            select: index_select_rows_warp_f32,
            add: index_add_rows_warp_f32,
            grouped: Some(index_add_rows_grouped_f32),
        },
    ]
};

/// The launchers of `step` (the highest step at or below it).
pub fn at(step: super::rows::Step) -> &'static Kernels {
    super::ladder::pick(&STEPS, step, |k| k.step)
}

//! Launchers for `kernels/attention/` (one PTX module per ladder step): fused attention
//! `softmax(scale · q·kᵀ, causal mask) · v` without the `Tq × Tk` score matrix, forward (the
//! output and each query row's log-sum-exp) and backward (dq, dk, dv recomputed from the
//! log-sum-exp). Step 1 (`warp_row`): a warp per query row, f32. Step 2 (`tiled`): K/V tiles in
//! shared memory, f32; its backward is step 1's too. Step 3 (`mma`): tensor cores, f16 and
//! bf16, forward and backward. Step 4 (`swizzle`): step 3 with `ldmatrix` and swizzled shared
//! tiles. Step 5 (`async`): step 4's forward with K/V tiles double-buffered by cp.async, step
//! 4's backward. Step 6 (`fa2`): the FlashAttention-2 work split, forward and backward. Step 7
//! (`wgmma`): the forward and, at head dims 64 and 128, the backward on Hopper's TMA and
//! warpgroup MMAs (step 6's backward elsewhere). Step 8 (`ws`): step 7's forward
//! warp-specialized, the softmax overlapping the MMAs, step 7's backward. The layouts are
//! `kernels/attention/attention.cuh`'s: q, k, v strided `[B, H, T, D]` with contiguous
//! features, the output and the gradients dense `[B, T, H, D]`, the log-sum-exp `[B, H, Tq]`.

use super::launch;
use super::rows::KernelName;
use super::shape::Elem;
use crate::{CudaDevice, DevPtr, Dim3, Error, KernelArg, LaunchConfig, Result};

/// PTX module of step 1: `kernels/attention/01_warp_row.cu`.
const STEP1: &str = "attention/01_warp_row";
/// PTX module of step 2: `kernels/attention/02_tiled.cu`.
const STEP2: &str = "attention/02_tiled";
/// PTX module of step 3: `kernels/attention/03_mma.cu`.
const STEP3: &str = "attention/03_mma";
/// PTX module of step 4: `kernels/attention/04_swizzle.cu`.
const STEP4: &str = "attention/04_swizzle";
/// PTX module of step 5: `kernels/attention/05_async.cu`.
const STEP5: &str = "attention/05_async";
/// PTX module of step 6: `kernels/attention/06_fa2.cu`.
const STEP6: &str = "attention/06_fa2";
/// PTX module of step 7: `kernels/attention/07_wgmma_sm90a.cu` (sm_90a).
const STEP7: &str = "attention/07_wgmma_sm90a";
/// PTX module of step 7's backward: `kernels/attention/07_bwd_sm90a.cu` (sm_90a).
const STEP7_BWD: &str = "attention/07_bwd_sm90a";
/// PTX module of step 8: `kernels/attention/08_ws_sm90a.cu` (sm_90a).
const STEP8: &str = "attention/08_ws_sm90a";

/// Query (or key) rows of a step-2 block: `BR` / `BC` of `02_tiled.cu`.
const TILE: usize = 32;
/// The tiles of steps 3 and 4 (`mma.cuh`): query rows of a forward or dQ block (`BR`), keys of their
/// tiles (`BC`), keys of a dK/dV block (`BK`), queries of its tiles (`BQ`).
const BR3: usize = 64;
const BC3: usize = 64;
const BK3: usize = 64;
const BQ3: usize = 32;
/// Step 6's tiles (`06_fa2.cu`): query rows of a forward block (`F6_BR`), keys of a forward or
/// dQ tile (`F6_BC`), keys of a dK/dV block (`F6_BK`), query rows of a dQ block (`F6_BRQ`),
/// keys of a fused dK/dV/dQ block (`F6_BK_FUSED`).
const BR6: usize = 128;
const BC6: usize = 64;
const BK6: usize = 64;
const BRQ6: usize = 64;
/// Keys of a block of step 6's fused backward: two 16-key tiles a warp.
const FUSED_KEYS: usize = 128;

/// Queries of a step-6 dK/dV tile at head dim `d` (`F6_BQ<D>`).
const fn bq6(d: usize) -> usize {
    if d >= 128 {
        64
    } else {
        32
    }
}

/// The head dims the kernels are instantiated for.
pub const HEAD_DIMS: [usize; 3] = [32, 64, 128];

/// One attention call: `q` `[b, h, tq, d]`, `k` and `v` `[b, h, tk, d]`, each with its strides
/// (in elements) along batch, head and token, and its `d` features contiguous.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttnGeom {
    /// Batch.
    pub b: usize,
    /// Heads.
    pub h: usize,
    /// Queries.
    pub tq: usize,
    /// Keys (and values).
    pub tk: usize,
    /// Features per head.
    pub d: usize,
    /// Strides of q along batch, head and token.
    pub q: [usize; 3],
    /// Strides of k.
    pub k: [usize; 3],
    /// Strides of v.
    pub v: [usize; 3],
    /// The multiplier of `q·k`.
    pub scale: f32,
    /// Query `i` sees key `j` only when `j ≤ i + (tk − tq)`.
    pub causal: bool,
    /// Dropout probability on the attention weights, in `[0, 1)`; 0 for none.
    pub dropout: f32,
    /// The seed of the dropout mask ([`AttnGeom::dropout_multiplier`]).
    pub seed: u64,
}

/// The murmur3 finalizer: a bijection of `u32` whose every output bit depends on every input bit.
/// `attn_mix` in `kernels/attention/attention.cuh` is the same arithmetic.
fn mix(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

impl AttnGeom {
    /// The strides of a dense `[b, h, t, d]` tensor.
    pub fn dense(h: usize, t: usize, d: usize) -> [usize; 3] {
        [h * t * d, t * d, d]
    }

    /// Keys query `i` sees: all `tk`, or `i + 1 + (tk − tq)` (at most `tk`) when causal.
    pub fn visible(&self, i: usize) -> usize {
        if self.causal {
            (i + 1 + self.tk - self.tq).min(self.tk)
        } else {
            self.tk
        }
    }

    /// Query rows in all (`b · h · tq`).
    pub fn rows(&self) -> usize {
        self.b * self.h * self.tq
    }

    /// The dropout threshold: a weight is dropped when its 32-bit draw is below it, so with
    /// probability `round(dropout · 2³²) / 2³²`.
    pub fn dropout_threshold(&self) -> u32 {
        (self.dropout as f64 * 4_294_967_296.0)
            .round()
            .min(u32::MAX as f64) as u32
    }

    /// What the weight of key `j` for query `i` of head `bh` (`batch · h + head`) is multiplied
    /// by: 0 when dropped, `1 / (1 − dropout)` when kept (1 without dropout). The draw is a hash
    /// of (seed, bh, i, j) — a pure function, so the backward recomputes the forward's mask and
    /// the CPU and the GPU (`attn_dropout` in `kernels/attention/attention.cuh`) agree bit for
    /// bit: `mix(row ^ j·0x9e3779b9)` with `row = mix(mix(seed_lo ^ mix(seed_hi)) ^ mix(bh ^
    /// mix(i)))` (`mix`: murmur3's finalizer).
    pub fn dropout_multiplier(&self, bh: usize, i: usize, j: usize) -> f32 {
        self.dropout_row_multipliers(bh, i, j + 1)[j]
    }

    /// [`AttnGeom::dropout_multiplier`] of keys `0 .. n` for query `i` of head `bh`, the row's
    /// hash computed once.
    pub fn dropout_row_multipliers(&self, bh: usize, i: usize, n: usize) -> Vec<f32> {
        let thr = self.dropout_threshold();
        if thr == 0 {
            return vec![1.0; n];
        }
        let (row, scale) = (self.dropout_row(bh, i), self.dropout_scale());
        (0..n)
            .map(|j| {
                let draw = mix(row ^ (j as u32).wrapping_mul(0x9e37_79b9));
                if draw >= thr {
                    scale
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// `1 / (1 − dropout)`, in f32 as the kernels get it.
    fn dropout_scale(&self) -> f32 {
        1.0 / (1.0 - self.dropout)
    }

    /// The hash of query row `i` of head `bh` that each key's draw starts from.
    fn dropout_row(&self, bh: usize, i: usize) -> u32 {
        let key = mix(self.seed as u32 ^ mix((self.seed >> 32) as u32));
        mix(key ^ mix(bh as u32 ^ mix(i as u32)))
    }

    /// The kernels' argument block for elements of `elem`, after checking what they assume: an
    /// instantiated head dim, `tk ≥ 1`, `tk ≥ tq` when causal, and strides that keep 16-byte
    /// aligned rows.
    fn args(&self, kernel: &str, elem: Elem) -> Result<AttnArgs> {
        let bad = |msg: String| {
            Err(Error::LaunchConfig {
                kernel: kernel.to_string(),
                msg,
            })
        };
        if !HEAD_DIMS.contains(&self.d) {
            return bad(format!("head dim {} (instantiated: {HEAD_DIMS:?})", self.d));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return bad(format!("dropout {} (in [0, 1))", self.dropout));
        }
        if self.tk == 0 || (self.causal && self.tk < self.tq) {
            return bad(format!(
                "tq = {}, tk = {} (causal: {})",
                self.tq, self.tk, self.causal
            ));
        }
        let strides = [self.q, self.k, self.v];
        let per16 = 16 / elem.bytes();
        if strides.iter().flatten().any(|s| s % per16 != 0) {
            return bad(format!(
                "strides {strides:?} are not multiples of {per16} elements (16 bytes)"
            ));
        }
        let i = |x: usize| x as i64;
        Ok(AttnArgs {
            b: i(self.b),
            h: i(self.h),
            tq: i(self.tq),
            tk: i(self.tk),
            q_sb: i(self.q[0]),
            q_sh: i(self.q[1]),
            q_st: i(self.q[2]),
            k_sb: i(self.k[0]),
            k_sh: i(self.k[1]),
            k_st: i(self.k[2]),
            v_sb: i(self.v[0]),
            v_sh: i(self.v[1]),
            v_st: i(self.v[2]),
            scale: self.scale,
            causal: self.causal as i32,
            seed: self.seed,
            drop_scale: self.dropout_scale(),
            drop_thr: self.dropout_threshold(),
        })
    }
}

/// `AttnArgs` of `kernels/attention/attention.cuh`, passed by value.
#[repr(C)]
#[derive(Clone, Copy, cust_core::DeviceCopy)]
struct AttnArgs {
    b: i64,
    h: i64,
    tq: i64,
    tk: i64,
    q_sb: i64,
    q_sh: i64,
    q_st: i64,
    k_sb: i64,
    k_sh: i64,
    k_st: i64,
    v_sb: i64,
    v_sh: i64,
    v_st: i64,
    scale: f32,
    causal: i32,
    seed: u64,
    drop_scale: f32,
    drop_thr: u32,
}

/// Error unless `elem` is one of `dtypes`, the element types of `kernel`'s step.
fn check_elem(kernel: &str, elem: Elem, dtypes: &[Elem]) -> Result<()> {
    if dtypes.contains(&elem) {
        Ok(())
    } else {
        Err(Error::LaunchConfig {
            kernel: kernel.to_string(),
            msg: format!("{elem:?} operands (the step takes {dtypes:?})"),
        })
    }
}

/// A grid of `blocks` blocks of `threads` on x.
fn grid(kernel: &str, blocks: usize, threads: u32) -> Result<LaunchConfig> {
    if blocks > i32::MAX as usize {
        return Err(Error::LaunchConfig {
            kernel: kernel.to_string(),
            msg: format!("{blocks} blocks exceed the grid"),
        });
    }
    Ok(LaunchConfig::new(Dim3::x(blocks as u32), Dim3::x(threads)))
}

/// Error unless every pointer is 16-byte aligned (the float4 rows of step 2 and the backward).
fn check_aligned(kernel: &str, ptrs: &[DevPtr]) -> Result<()> {
    if super::rows::aligned16(ptrs) {
        Ok(())
    } else {
        Err(Error::LaunchConfig {
            kernel: kernel.to_string(),
            msg: "operands are not 16-byte aligned".into(),
        })
    }
}

launchers! {
    // the forward of each step (the Forward type)
    (
        dev: &CudaDevice, g: &AttnGeom, elem: Elem, q: DevPtr, k: DevPtr, v: DevPtr, o: DevPtr,
        lse: DevPtr,
    );

    /// Step 1: a warp per query row, K and V read from global memory key by key, the online
    /// softmax (`attn01_fwd_d{D}_f32`, four rows a block of 128 threads).
    pub fn warp_row(..) {
        let name = KernelName::new(format_args!("attn01_fwd_d{}_f32", g.d));
        let name = name.as_str();
        check_elem(name, elem, &[Elem::F32])?;
        let a = g.args(name, elem)?;
        if g.rows() == 0 {
            return Ok(());
        }
        let cfg = grid(name, g.rows().div_ceil(4), 128)?;
        // SAFETY: matches `attn01_fwd_d{D}_f32(const float* q, k, v, float* o, float* lse,
        // AttnArgs)`; the caller passes q, k, v addressing `g`'s strided views, a dense
        // `[b, tq, h, d]` o and a `[b, h, tq]` lse.
        unsafe {
            let args: [&dyn KernelArg; 6] = [&q, &k, &v, &o, &lse, &a];
            launch(dev, STEP1, name, cfg, &args)
        }
    }

    /// Step 2: 32 query rows a block, a quad of threads per row, K/V tiles of 32 keys in shared
    /// memory (`attn02_fwd_d{D}_f32`). Operands not 16-byte aligned run step 1.
    pub fn tiled(..) {
        if !super::rows::aligned16(&[q, k, v, o]) {
            return warp_row(dev, g, elem, q, k, v, o, lse);
        }
        let name = KernelName::new(format_args!("attn02_fwd_d{}_f32", g.d));
        let name = name.as_str();
        check_elem(name, elem, &[Elem::F32])?;
        let a = g.args(name, elem)?;
        if g.rows() == 0 {
            return Ok(());
        }
        let cfg = grid(name, g.b * g.h * g.tq.div_ceil(TILE), 128)?;
        // SAFETY: as `warp_row`'s, for `attn02_fwd_d{D}_f32` of the same parameters.
        unsafe {
            let args: [&dyn KernelArg; 6] = [&q, &k, &v, &o, &lse, &a];
            launch(dev, STEP2, name, cfg, &args)
        }
    }

    /// Step 3: tensor cores (`mma.sync`), f16 or bf16 operands and output, f32 log-sum-exp:
    /// 64 query rows a block of four warps, K/V tiles of 64 keys in dynamic shared memory
    /// (`attn03_fwd_d{D}_{f16,bf16}`).
    pub fn mma(..) {
        mma_forward(dev, g, elem, (STEP3, "03"), (BR3, BC3, 1), [q, k, v, o, lse])
    }

    /// Step 4: step 3 with `ldmatrix` fragment loads from swizzled shared tiles
    /// (`attn04_fwd_d{D}_{f16,bf16}`).
    pub fn swizzle(..) {
        mma_forward(dev, g, elem, (STEP4, "04"), (BR3, BC3, 1), [q, k, v, o, lse])
    }

    /// Step 5: step 4 with two K/V buffers filled by cp.async, the next tiles in flight while
    /// the warps compute (`attn05_fwd_d{D}_{f16,bf16}`).
    pub fn async_kv(..) {
        mma_forward(dev, g, elem, (STEP5, "05"), (BR3, BC3, 2), [q, k, v, o, lse])
    }

    /// Step 6: the FlashAttention-2 work split tuned: 128 query rows a block, two 16-row
    /// tiles a warp sharing every K/V fragment, masks and rescales only where they change
    /// something, causal grids longest tiles first (`attn06_fwd_d{D}_{f16,bf16}`).
    pub fn fa2(..) {
        mma_forward(dev, g, elem, (STEP6, "06"), (BR6, BC6, 2), [q, k, v, o, lse])
    }

    /// Step 7: the forward on Hopper (`attn07_fwd_d{D}_{f16,bf16}`, sm_90a): TMA copies Q once
    /// and K/V tiles of 128 keys into two swizzled stages, each of two warpgroups computes
    /// `S = Q·Kᵀ` for 64 queries with `wgmma` from shared memory, runs the online softmax in
    /// registers and adds `P·V` with P from registers. Where [`wgmma_fits`] says no (another
    /// GPU, head dim 32, dropout, operands TMA cannot address), step 6's forward runs.
    pub fn wgmma(..) {
        if !wgmma_fits(dev, g, elem, [q, k, v, o]) {
            return fa2(dev, g, elem, q, k, v, o, lse);
        }
        hopper_forward(dev, g, elem, (STEP7, "07", 256), false, [q, k, v, o, lse])
    }

    /// Step 8: step 7 warp-specialized (`attn08_fwd_d{D}_{f16,bf16}`, sm_90a): a producer
    /// warpgroup issues the TMA copies into K and V stages that mbarriers hand back and forth,
    /// and each of two consumer warpgroups overlaps the softmax of a tile with the `P·V` MMA of
    /// the tile before; one block a multiprocessor takes query tiles from a count until none is
    /// left. Where [`wgmma_fits`] says no, step 6's forward runs.
    pub fn ws(..) {
        if !wgmma_fits(dev, g, elem, [q, k, v, o]) {
            return fa2(dev, g, elem, q, k, v, o, lse);
        }
        hopper_forward(dev, g, elem, (STEP8, "08", 384), true, [q, k, v, o, lse])
    }
}

/// Query rows of a step-7 or step-8 block and keys of its K/V tiles (`attn7::BQ`, `attn7::BKV`,
/// the same in `attn8`).
const BQ7: usize = 128;
const BKV7: usize = 128;

/// Whether the Hopper kernels (steps 7 and 8) run `g` on `elem` operands at q, k, v and o (else step 6's
/// forward does): compute capability 9.0, f16 or bf16, a head dim of 64 or 128, no dropout, and
/// operands TMA can address (16-byte aligned pointers, and token, head and batch strides of
/// 16-byte multiples, none 0).
pub fn wgmma_fits(dev: &CudaDevice, g: &AttnGeom, elem: Elem, ptrs: [DevPtr; 4]) -> bool {
    let per16 = 16 / elem.bytes();
    let strides_ok = [g.q, g.k, g.v]
        .iter()
        .flatten()
        .all(|&s| s != 0 && s % per16 == 0);
    dev.compute_capability() == (9, 0)
        && HALF.contains(&elem)
        && matches!(g.d, 64 | 128)
        && g.dropout == 0.0
        && strides_ok
        && super::rows::aligned16(&ptrs)
}

/// The forward of a Hopper step (the caller has checked [`wgmma_fits`]): tensor maps of q, k and
/// v (feature, token, head, batch), then `attn{step}_fwd_d{D}_{sfx}` in `module`, blocks of
/// `threads` over the (batch · head, 128-query tile) items, one an item. A `looping` kernel
/// (step 8) has two Q buffers and takes one more argument, a count (one of the device's
/// [`counters`](CudaDevice::counters), which the kernel leaves zero) from which each block takes
/// items until none is left: it gets one block a multiprocessor, or as many as
/// [`Experiments::attention_blocks`](crate::config::Experiments::attention_blocks) says.
fn hopper_forward(
    dev: &CudaDevice,
    g: &AttnGeom,
    elem: Elem,
    (module, step, threads): (&str, &str, u32),
    looping: bool,
    ptrs: [DevPtr; 5],
) -> Result<()> {
    let [q, k, v, o, lse] = ptrs;
    let name = KernelName::new(format_args!("attn{step}_fwd_d{}_{}", g.d, elem.suffix()));
    let name = name.as_str();
    let a = g.args(name, elem)?;
    if g.rows() == 0 {
        return Ok(());
    }
    let flip = |s: [usize; 3]| [s[2], s[1], s[0]]; // token, head, batch
    let map = |p: DevPtr, t: usize, s: [usize; 3], rows: u32| {
        crate::tma::encode_heads(elem, p, [g.d, t, g.h, g.b], flip(s), 64, rows)
    };
    let (mq, mk) = (
        map(q, g.tq, g.q, BQ7 as u32)?,
        map(k, g.tk, g.k, BKV7 as u32)?,
    );
    let mv = map(v, g.tk, g.v, 64)?;
    // Q (two buffers when looping), and two stages of K and V (attn7::Layout, attn8::Layout), and
    // 1 KiB to align them to 1024 bytes
    let q_bufs = if looping { 2 } else { 1 };
    let smem = (q_bufs * BQ7 + 4 * BKV7) * g.d * 2 + 1024;
    let items = g.b * g.h * g.tq.div_ceil(BQ7);
    // the looping kernel counts items in an int, so more than i32::MAX fails as a grid would
    let blocks = if looping && items <= i32::MAX as usize {
        let sms = dev.limits().sm_count as usize;
        let n = crate::config::with_experiments(|e| e.attention_blocks).unwrap_or(sms);
        items.min(n.max(1))
    } else {
        items
    };
    let cfg = grid(name, blocks, threads)?.with_shared_mem(smem as u32);
    if !looping {
        // SAFETY: matches `attn07_fwd_d{D}_{sfx}(TmaMap q, k, v, T* o, float* lse, AttnArgs)`:
        // the maps describe `g`'s q, k and v views (checked by wgmma_fits and encode_heads), o
        // is dense `[b, tq, h, d]` of `elem`, lse `[b, h, tq]`; the shared memory holds the
        // Layout.
        return unsafe {
            let args: [&dyn KernelArg; 6] = [&mq, &mk, &mv, &o, &lse, &a];
            launch(dev, module, name, cfg, &args)
        };
    }
    let next = dev.counters(1)?;
    // SAFETY: matches `attn08_fwd_d{D}_{sfx}(TmaMap q, k, v, T* o, float* lse, AttnArgs,
    // int* next)`: as above, and `next` one zeroed int, which the kernel leaves zero.
    unsafe {
        let args: [&dyn KernelArg; 7] = [&mq, &mk, &mv, &o, &lse, &a, &next];
        launch(dev, module, name, cfg, &args)
    }
}

/// The forward of a tensor-core step: kernels `attn{step}_fwd_d{D}_{sfx}` in `module`, blocks
/// of `rows` queries, shared memory for the Q tile and `bufs` pairs of K/V tiles of `keys`.
fn mma_forward(
    dev: &CudaDevice,
    g: &AttnGeom,
    elem: Elem,
    (module, step): (&str, &str),
    (rows, keys, bufs): (usize, usize, usize),
    ptrs: [DevPtr; 5],
) -> Result<()> {
    let [q, k, v, o, lse] = ptrs;
    let name = KernelName::new(format_args!("attn{step}_fwd_d{}_{}", g.d, elem.suffix()));
    let name = name.as_str();
    check_elem(name, elem, HALF)?;
    let a = g.args(name, elem)?;
    check_aligned(name, &[q, k, v, o])?;
    if g.rows() == 0 {
        return Ok(());
    }
    let smem = (rows + 2 * bufs * keys) * g.d * 2;
    let cfg = grid(name, g.b * g.h * g.tq.div_ceil(rows), 128)?.with_shared_mem(smem as u32);
    // SAFETY: matches `attn{step}_fwd_d{D}_{sfx}(const T* q, k, v, T* o, float* lse,
    // AttnArgs)` with T the 16-bit type of `elem`: q, k, v `g`'s views, o dense
    // `[b, tq, h, d]`, lse `[b, h, tq]`; the shared memory is the kernel's Q, K and V tiles.
    unsafe {
        let args: [&dyn KernelArg; 6] = [&q, &k, &v, &o, &lse, &a];
        launch(dev, module, name, cfg, &args)
    }
}

launchers! {
    // the backward of each step (the Backward type)
    (
        dev: &CudaDevice, g: &AttnGeom, elem: Elem, q: DevPtr, k: DevPtr, v: DevPtr, o: DevPtr,
        dout: DevPtr, lse: DevPtr, dq: DevPtr, dk: DevPtr, dv: DevPtr,
    );

    /// The backward of steps 1 and 2 from the forward's output `o` and log-sum-exp `lse` and
    /// the output gradient `dout` (dense `[b, tq, h, d]`): `Δ = rowsum(dout ⊙ o)`
    /// (`attn_bwd_delta_f32`, into a workspace), then dk and dv a tile of keys a block
    /// (`attn02_bwd_dkdv_d{D}_f32`) and dq a tile of queries a block (`attn02_bwd_dq_d{D}_f32`),
    /// each written dense `[b, t, h, d]`.
    pub fn tiled_bwd(..) {
        let dkdv = KernelName::new(format_args!("attn02_bwd_dkdv_d{}_f32", g.d));
        let dq_name = KernelName::new(format_args!("attn02_bwd_dq_d{}_f32", g.d));
        check_elem(dkdv.as_str(), elem, &[Elem::F32])?;
        let names = BwdNames {
            module: STEP2,
            delta: "attn_bwd_delta_f32",
            dkdv: dkdv.as_str(),
            dq: dq_name.as_str(),
        };
        let shape = BwdShape { keys: TILE, queries: TILE, smem_dkdv: 0, smem_dq: 0 };
        backward(dev, g, elem, &names, shape, [q, k, v, o, dout, lse, dq, dk, dv])
    }

    /// Step 3's backward on the tensor cores: Δ (`attn_bwd_delta_{f16,bf16}`), dk and dv for 64
    /// keys a block walking query tiles of 32 (`attn03_bwd_dkdv_d{D}_{sfx}`), dq for 64 queries
    /// a block walking key tiles of 64 (`attn03_bwd_dq_d{D}_{sfx}`); the gradients are of
    /// `elem`, dense `[b, t, h, d]`.
    pub fn mma_bwd(..) {
        let shape = BwdShape::step3(g.d);
        mma_backward(dev, g, elem, (STEP3, "03"), shape, [q, k, v, o, dout, lse, dq, dk, dv])
    }

    /// Step 4's backward: step 3's with `ldmatrix` from swizzled tiles (`attn04_bwd_*`).
    pub fn swizzle_bwd(..) {
        let shape = BwdShape::step3(g.d);
        mma_backward(dev, g, elem, (STEP4, "04"), shape, [q, k, v, o, dout, lse, dq, dk, dv])
    }

    /// Step 6's backward: dk and dv for a tile of keys a block walking query tiles of 64 (32
    /// below head dim 128). At head dims up to 64 it is the FlashAttention-2 backward, 128 keys
    /// a block: each tile's dS·K is added into an f32 copy of dq with atomics (`attn06_bwd_fused_*`, with dropout
    /// `attn06p_bwd_fused_*`), then dq is rounded from that copy (`attn06_bwd_dq_store_*`). At
    /// head dim 128, and under [`crate::config::deterministic`], dq comes from a kernel of its
    /// own, 64 queries a block walking key tiles of 64 (`attn06_bwd_dq_*`): two more products a
    /// tile and no atomics, so the same gradients on every run. At head dim 128 the fused
    /// kernel has no registers to spare and measures no faster (docs/kernels/attention.md).
    pub fn fa2_bwd(..) {
        let bq = bq6(g.d);
        // K and V; two buffers of Q and dO tiles and of each query's lse, Δ and row hash
        let smem_dkdv = (2 * BK6 + 4 * bq) * g.d * 2 + 6 * bq * 4;
        // with dropout, the kernels that apply the mask (`attn06p_bwd_*`)
        let step = if g.dropout > 0.0 { "06p" } else { "06" };
        let ptrs = [q, k, v, o, dout, lse, dq, dk, dv];
        if g.d > 64 || crate::config::deterministic() {
            let shape = BwdShape {
                keys: BK6,
                queries: BRQ6,
                smem_dkdv: smem_dkdv as u32,
                smem_dq: ((2 * BRQ6 + 4 * BC6) * g.d * 2) as u32,
            };
            return mma_backward(dev, g, elem, (STEP6, step), shape, ptrs);
        }
        // K and V of twice the keys, the Q and dO buffers, and the tile's dSᵀ, rows of bq + 8
        let smem = (2 * FUSED_KEYS + 4 * bq) * g.d * 2 + 6 * bq * 4 + FUSED_KEYS * (bq + 8) * 2;
        fused_backward(dev, g, elem, step, smem as u32, ptrs)
    }

    /// The backward of steps 7 and 8 on Hopper (`attn07_bwd_d{64,128}_{f16,bf16}`, sm_90a): a
    /// block of warpgroups (three at head dim 64, two at 128) owns 64 keys each and walks the
    /// query tiles (64 queries) that see them, TMA copying Q and dO into three stages; `wgmma`
    /// computes `Sᵀ = K·Qᵀ` and `dPᵀ = V·dOᵀ`, then `dV += Pᵀ·dO` and `dK += dSᵀ·Q` with Pᵀ and
    /// dSᵀ from registers, and `dS·K`, added tile by tile into an f32 copy of dq by bulk copies
    /// from shared memory and rounded after (`attn07_bwd_dq_store_*`). Where [`wgmma_fits`] says
    /// no, without queries, or under [`crate::config::deterministic`] (the adds' order varies),
    /// step 6's backward runs.
    pub fn wgmma_bwd(..) {
        let fits = wgmma_fits(dev, g, elem, [q, k, v, o])
            && super::rows::aligned16(&[dout, dq, dk, dv])
            && g.tq > 0
            && !crate::config::deterministic();
        if !fits {
            return fa2_bwd(dev, g, elem, q, k, v, o, dout, lse, dq, dk, dv);
        }
        hopper_backward(dev, g, elem, [q, k, v, o, dout, lse, dq, dk, dv])
    }
}

/// Step 7's backward (the caller has checked that it fits): tensor maps of q, k, v and dout,
/// then [`atomic_dq`] around `attn07_bwd_d{D}_{sfx}`, one block a (batch · head, key tile): 384
/// threads and 192 keys at head dim 64, 256 threads and 128 keys at 128.
fn hopper_backward(dev: &CudaDevice, g: &AttnGeom, elem: Elem, ptrs: [DevPtr; 9]) -> Result<()> {
    let [q, k, v, _, dout, lse, _, dk, dv] = ptrs;
    let name = KernelName::new(format_args!("attn07_bwd_d{}_{}", g.d, elem.suffix()));
    let name = name.as_str();
    let a = g.args(name, elem)?;
    if g.b * g.h == 0 {
        return Ok(());
    }
    let flip = |s: [usize; 3]| [s[2], s[1], s[0]]; // token, head, batch
    let map = |p: DevPtr, t: usize, s: [usize; 3], rows: u32| {
        crate::tma::encode_heads(elem, p, [g.d, t, g.h, g.b], flip(s), 64, rows)
    };
    // dout is dense [b, tq, h, d]: batch, head and token strides
    let dense = [g.tq * g.h * g.d, g.d, g.h * g.d];
    let (mq, mdo) = (map(q, g.tq, g.q, 64)?, map(dout, g.tq, dense, 64)?);
    // a warpgroup for each 64 keys: three at d = 64, two at 128 (attn7b::WARPGROUPS)
    let groups = if g.d == 64 { 3 } else { 2 };
    let keys = 64 * groups;
    let (mk, mv) = (
        map(k, g.tk, g.k, keys as u32)?,
        map(v, g.tk, g.v, keys as u32)?,
    );
    // K and V of the block's keys, three stages of Q and dO tiles of 64 queries, two dSᵀ tiles,
    // an f32 dQ tile of 64 × 64 a warpgroup (attn7b::Layout::SMEM), and 1 KiB to align them to
    // 1024 bytes
    let smem = (2 * keys + 3 * 2 * 64) * g.d * 2 + 2 * keys * 64 * 2 + groups * 64 * 64 * 4 + 1024;
    let threads = 128 * groups as u32;
    let cfg = grid(name, g.b * g.h * g.tk.div_ceil(keys), threads)?.with_shared_mem(smem as u32);
    atomic_dq(dev, g, elem, ptrs, DqCopy::Tiles, |delta, acc| {
        // SAFETY: matches `attn07_bwd_d{D}_{sfx}(TmaMap q, k, v, dout, const float* lse,
        // delta, T* dk, T* dv, float* dq_acc, AttnArgs)`: the maps describe `g`'s q, k, v and
        // the dense dout (checked by wgmma_fits and encode_heads), lse and delta `[b, h, tq]`,
        // dk and dv dense `[b, tk, h, d]` of `elem`, dq_acc `b · h · ⌈tq / 64⌉ · 64 · d`
        // floats (DqCopy::Tiles); the shared memory holds the Layout.
        unsafe {
            let args: [&dyn KernelArg; 10] =
                [&mq, &mk, &mv, &mdo, &lse, &delta, &dk, &dv, &acc, &a];
            launch(dev, STEP7_BWD, name, cfg, &args)
        }
    })
}

/// Step 6's backward with dq summed by atomics: [`atomic_dq`] around the dk/dv kernel that also
/// adds into dq's f32 copy.
fn fused_backward(
    dev: &CudaDevice,
    g: &AttnGeom,
    elem: Elem,
    step: &str,
    smem: u32,
    ptrs: [DevPtr; 9],
) -> Result<()> {
    let fused = KernelName::new(format_args!(
        "attn{step}_bwd_fused_d{}_{}",
        g.d,
        elem.suffix()
    ));
    let fused = fused.as_str();
    check_elem(fused, elem, HALF)?;
    let [q, k, v, o, dout, lse, dq, dk, dv] = ptrs;
    let a = g.args(fused, elem)?;
    check_aligned(fused, &[q, k, v, o, dout, dq, dk, dv])?;
    if g.b * g.h == 0 {
        return Ok(());
    }
    let cfg = grid(fused, g.b * g.h * g.tk.div_ceil(FUSED_KEYS), 128)?.with_shared_mem(smem);
    atomic_dq(dev, g, elem, ptrs, DqCopy::Dense, |delta, acc| {
        // SAFETY: matches `attn{step}_bwd_fused_d{D}_{sfx}(const T* q, k, v, dout, const float*
        // lse, delta, T* dk, T* dv, float* dq_acc, AttnArgs)`: q, k, v `g`'s views, dout dense
        // `[b, tq, h, d]`, lse and delta `[b, h, tq]`, dk and dv dense `[b, tk, h, d]` of
        // `elem`, dq_acc `rows · d` floats (dense `[b, tq, h, d]`).
        unsafe {
            let args: [&dyn KernelArg; 10] = [&q, &k, &v, &dout, &lse, &delta, &dk, &dv, &acc, &a];
            launch(dev, STEP6, fused, cfg, &args)
        }
    })
}

/// How a backward lays out its f32 copy of dq.
enum DqCopy {
    /// Dense `[b, tq, h, d]`, rounded by `attn06_bwd_dq_store_{sfx}`.
    Dense,
    /// Step 7's 64 × 64 tiles in its threads' order (`dq_tile` in `07_bwd_sm90a.cu`), rows
    /// padded to a multiple of 64, rounded by `attn07_bwd_dq_store_{sfx}`.
    Tiles,
}

/// A backward that sums dq by atomics: Δ into a workspace, a zeroed f32 copy of dq laid out as
/// `copy` says, then `kernel(delta, dq_acc)` (dk, dv and the adds into the copy), then dq
/// rounded from the copy. `ptrs` are the backward's nine operands.
fn atomic_dq(
    dev: &CudaDevice,
    g: &AttnGeom,
    elem: Elem,
    ptrs: [DevPtr; 9],
    copy: DqCopy,
    kernel: impl FnOnce(DevPtr, DevPtr) -> Result<()>,
) -> Result<()> {
    let sfx = elem.suffix();
    let [_, _, _, o, dout, _, dq, _, _] = ptrs;
    let rows = g.rows();
    let delta = dev.alloc(rows.max(1) * 4)?;
    let dp = delta.ptr();
    let n = match copy {
        DqCopy::Dense => rows * g.d,
        DqCopy::Tiles => g.b * g.h * g.tq.div_ceil(64) * 64 * g.d,
    };
    let acc = dev.alloc(n.max(1) * 4)?;
    let ap = acc.ptr();
    if rows > 0 {
        dev.memset_zero(&acc)?;
        delta_launch(
            dev,
            STEP6,
            &format!("attn_bwd_delta_{sfx}"),
            g,
            [o, dout, dp],
        )?;
    }
    kernel(dp, ap)?;
    if rows == 0 {
        return Ok(());
    }
    // d is a multiple of 4 (HEAD_DIMS): groups of four elements
    let n4 = (n / 4) as i64;
    let blocks = (n / 4)
        .div_ceil(256)
        .min(dev.limits().sm_count as usize * 8);
    if let DqCopy::Tiles = copy {
        let store = KernelName::new(format_args!("attn07_bwd_dq_store_d{}_{sfx}", g.d));
        let store = store.as_str();
        let a = g.args(store, elem)?;
        let cfg = grid(store, blocks, 256)?;
        // SAFETY: matches `attn07_bwd_dq_store_d{D}_{sfx}(const float* dq_acc, T* dq, AttnArgs,
        // long long n4)`: dq_acc holds the 4 · n4 floats of DqCopy::Tiles for `g`, dq is dense
        // `[b, tq, h, d]` of `elem` with d = D (64 or 128, checked by wgmma_fits).
        return unsafe {
            let args: [&dyn KernelArg; 4] = [&ap, &dq, &a, &n4];
            launch(dev, STEP7_BWD, store, cfg, &args)
        };
    }
    let store = KernelName::new(format_args!("attn06_bwd_dq_store_{sfx}"));
    let cfg = grid(store.as_str(), blocks, 256)?;
    let scale = g.scale;
    // SAFETY: matches `attn06_bwd_dq_store_{sfx}(const float* dq_acc, T* dq, long long n4,
    // float scale)`: dq_acc and dq hold 4 · n4 elements, dq of `elem`.
    unsafe {
        let args: [&dyn KernelArg; 4] = [&ap, &dq, &n4, &scale];
        launch(dev, STEP6, store.as_str(), cfg, &args)
    }
}

/// `Δ = rowsum(dout ⊙ o)` into `delta` (`[b, h, tq]` floats) by the kernel `name` of `module`.
fn delta_launch(
    dev: &CudaDevice,
    module: &'static str,
    name: &str,
    g: &AttnGeom,
    [o, dout, delta]: [DevPtr; 3],
) -> Result<()> {
    let cfg = grid(name, g.rows().div_ceil(8), 256)?;
    let (b, h, tq, d) = (g.b as i64, g.h as i64, g.tq as i64, g.d as i32);
    // SAFETY: matches `attn_bwd_delta_{sfx}(const T* o, const T* dout, float* delta,
    // long long b, long long h, long long tq, int d)`: o and dout dense `[b, tq, h, d]` of the
    // kernel's type, delta `rows` floats.
    unsafe {
        let args: [&dyn KernelArg; 7] = [&o, &dout, &delta, &b, &h, &tq, &d];
        launch(dev, module, name, cfg, &args)
    }
}

/// The backward of a tensor-core step: kernels `attn{step}_bwd_*` in `module`, tiles `shape`.
fn mma_backward(
    dev: &CudaDevice,
    g: &AttnGeom,
    elem: Elem,
    (module, step): (&'static str, &str),
    shape: BwdShape,
    ptrs: [DevPtr; 9],
) -> Result<()> {
    let sfx = elem.suffix();
    let delta = KernelName::new(format_args!("attn_bwd_delta_{sfx}"));
    let dkdv = KernelName::new(format_args!("attn{step}_bwd_dkdv_d{}_{sfx}", g.d));
    let dq_name = KernelName::new(format_args!("attn{step}_bwd_dq_d{}_{sfx}", g.d));
    check_elem(dkdv.as_str(), elem, HALF)?;
    let names = BwdNames {
        module,
        delta: delta.as_str(),
        dkdv: dkdv.as_str(),
        dq: dq_name.as_str(),
    };
    backward(dev, g, elem, &names, shape, ptrs)
}

/// The kernels of one step's backward.
struct BwdNames<'a> {
    module: &'static str,
    delta: &'a str,
    dkdv: &'a str,
    dq: &'a str,
}

/// Keys of a dk/dv block, queries of a dq block, and their dynamic shared memory.
#[derive(Clone, Copy)]
struct BwdShape {
    keys: usize,
    queries: usize,
    smem_dkdv: u32,
    smem_dq: u32,
}

impl BwdShape {
    /// Steps 3 and 4 (`mma.cuh`) at head dim `d`: K, V, Q and dO tiles and, per query of a
    /// tile, its log-sum-exp, Δ and dropout row hash; Q, dO, K and V tiles for dq.
    fn step3(d: usize) -> BwdShape {
        BwdShape {
            keys: BK3,
            queries: BR3,
            smem_dkdv: ((2 * BK3 + 2 * BQ3) * d * 2 + 3 * BQ3 * 4) as u32,
            smem_dq: ((2 * BR3 + 2 * BC3) * d * 2) as u32,
        }
    }
}

/// The three launches of a backward: Δ into a workspace, then dk/dv, then dq.
fn backward(
    dev: &CudaDevice,
    g: &AttnGeom,
    elem: Elem,
    n: &BwdNames<'_>,
    shape: BwdShape,
    ptrs: [DevPtr; 9],
) -> Result<()> {
    let [q, k, v, o, dout, lse, dq, dk, dv] = ptrs;
    let a = g.args(n.dkdv, elem)?;
    check_aligned(n.dkdv, &[q, k, v, o, dout, dq, dk, dv])?;
    if g.b * g.h == 0 {
        return Ok(());
    }
    let rows = g.rows();
    let delta = dev.alloc(rows.max(1) * 4)?;
    let dp = delta.ptr();
    if rows > 0 {
        delta_launch(dev, n.module, n.delta, g, [o, dout, dp])?;
    }
    // keys that no query sees still get (zero) gradients: every key tile runs
    let cfg =
        grid(n.dkdv, g.b * g.h * g.tk.div_ceil(shape.keys), 128)?.with_shared_mem(shape.smem_dkdv);
    // SAFETY: matches `{step}_bwd_dkdv_d{D}_{sfx}(const T* q, k, v, dout, const float* lse,
    // delta, T* dk, T* dv, AttnArgs)`: q, k, v `g`'s views, dout dense `[b, tq, h, d]`, lse and
    // delta `[b, h, tq]`, dk and dv dense `[b, tk, h, d]`, all of `elem` but lse and delta.
    unsafe {
        let args: [&dyn KernelArg; 9] = [&q, &k, &v, &dout, &lse, &dp, &dk, &dv, &a];
        launch(dev, n.module, n.dkdv, cfg, &args)?;
    }
    if rows == 0 {
        return Ok(());
    }
    let cfg =
        grid(n.dq, g.b * g.h * g.tq.div_ceil(shape.queries), 128)?.with_shared_mem(shape.smem_dq);
    // SAFETY: matches `{step}_bwd_dq_d{D}_{sfx}(const T* q, k, v, dout, const float* lse,
    // delta, T* dq, AttnArgs)`, the operands as for dk/dv, dq dense `[b, tq, h, d]`.
    unsafe {
        let args: [&dyn KernelArg; 8] = [&q, &k, &v, &dout, &lse, &dp, &dq, &a];
        launch(dev, n.module, n.dq, cfg, &args)
    }
}

// ------------------------------------------------------------------ the family's table

/// The 16-bit element types of steps 3 to 6.
const HALF: &[Elem] = &[Elem::F16, Elem::BF16];

/// An attention forward launcher: `(dev, geom, elem, q, k, v, o, lse)`.
pub type Forward =
    fn(&CudaDevice, &AttnGeom, Elem, DevPtr, DevPtr, DevPtr, DevPtr, DevPtr) -> Result<()>;
/// An attention backward launcher: `(dev, geom, elem, q, k, v, o, dout, lse, dq, dk, dv)`.
pub type Backward = fn(
    &CudaDevice,
    &AttnGeom,
    Elem,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
    DevPtr,
) -> Result<()>;

/// The launchers of one step of the attention ladder.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// The step (described in [`super::ladder::Family::Attention`]'s table).
    pub step: super::rows::Step,
    /// The element types it has kernels for.
    pub dtypes: &'static [Elem],
    /// Its forward.
    pub forward: Forward,
    /// Its backward.
    pub backward: Backward,
}

/// The attention ladder.
pub const STEPS: [Kernels; 8] = [
    Kernels {
        step: super::rows::Step::One,
        dtypes: &[Elem::F32],
        forward: warp_row,
        backward: tiled_bwd,
    },
    Kernels {
        step: super::rows::Step::Two,
        dtypes: &[Elem::F32],
        forward: tiled,
        backward: tiled_bwd,
    },
    Kernels {
        step: super::rows::Step::Three,
        dtypes: HALF,
        forward: mma,
        backward: mma_bwd,
    },
    Kernels {
        step: super::rows::Step::Four,
        dtypes: HALF,
        forward: swizzle,
        backward: swizzle_bwd,
    },
    Kernels {
        step: super::rows::Step::Five,
        dtypes: HALF,
        forward: async_kv,
        backward: swizzle_bwd,
    },
    Kernels {
        step: super::rows::Step::Six,
        dtypes: HALF,
        forward: fa2,
        backward: fa2_bwd,
    },
    Kernels {
        step: super::rows::Step::Seven,
        dtypes: HALF,
        forward: wgmma,
        backward: wgmma_bwd,
    },
    Kernels {
        step: super::rows::Step::Eight,
        dtypes: HALF,
        forward: ws,
        backward: wgmma_bwd,
    },
];

/// The launchers for operands of `elem` at `step`: the highest step at or below it that has
/// kernels for `elem`. An error names the steps that do when none at or below `step` has.
pub fn at(step: super::rows::Step, elem: Elem) -> Result<&'static Kernels> {
    STEPS
        .iter()
        .rev()
        .find(|k| k.step.number() <= step.number() && k.dtypes.contains(&elem))
        .ok_or_else(|| {
            let have: Vec<u32> = STEPS
                .iter()
                .filter(|k| k.dtypes.contains(&elem))
                .map(|k| k.step.number())
                .collect();
            Error::InvalidArgument {
                op: "attention".into(),
                msg: format!(
                    "step {} has no {elem:?} kernels: {elem:?} runs at steps {have:?} \
                     (CAMEL_ATTENTION)",
                    step.number()
                ),
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every head dim the launchers accept has its kernels in the files.
    #[test]
    fn every_head_dim_is_instantiated() {
        let one = include_str!("../../../../kernels/attention/01_warp_row.cu");
        let two = include_str!("../../../../kernels/attention/02_tiled.cu");
        let mma = include_str!("../../../../kernels/attention/mma.cuh");
        for d in HEAD_DIMS {
            assert!(one.contains(&format!("\nATTN01({d})")), "step 1, d = {d}");
            assert!(two.contains(&format!("\nATTN02({d})")), "step 2, d = {d}");
            for t in ["__half, f16", "__nv_bfloat16, bf16"] {
                let fwd = format!("ATTN_MMA_FWD(STEP, SWZ, ASYNC, {t}, {d})");
                let bwd = format!("ATTN_MMA_BWD(STEP, SWZ, {t}, {d})");
                assert!(
                    mma.contains(&fwd) && mma.contains(&bwd),
                    "steps 3–5, {t}, {d}"
                );
            }
        }
        for (file, line) in [
            (
                include_str!("../../../../kernels/attention/03_mma.cu"),
                "\nATTN_MMA_FWD_ALL(03, false, false)",
            ),
            (
                include_str!("../../../../kernels/attention/03_mma.cu"),
                "\nATTN_MMA_BWD_ALL(03, false)",
            ),
            (
                include_str!("../../../../kernels/attention/04_swizzle.cu"),
                "\nATTN_MMA_FWD_ALL(04, true, false)",
            ),
            (
                include_str!("../../../../kernels/attention/04_swizzle.cu"),
                "\nATTN_MMA_BWD_ALL(04, true)",
            ),
            (
                include_str!("../../../../kernels/attention/05_async.cu"),
                "\nATTN_MMA_FWD_ALL(05, true, true)",
            ),
        ] {
            assert!(file.contains(line), "{line}");
        }
        assert_eq!(TILE, 32);
        assert!(two.contains("constexpr int BR = 32;") && two.contains("constexpr int BC = 32;"));
        // step 3's tiles, as the launcher sizes grids and shared memory
        assert_eq!((BR3, BC3, BK3, BQ3), (64, 64, 64, 32));
        let six = include_str!("../../../../kernels/attention/06_fa2.cu");
        for t in ["__half, f16", "__nv_bfloat16, bf16"] {
            for d in HEAD_DIMS {
                // the fused backward exists up to head dim 64
                let bwd = if d > 64 {
                    "ATTN_FA2_BWD_SPLIT"
                } else {
                    "ATTN_FA2_BWD"
                };
                for m in ["ATTN_FA2_FWD", bwd] {
                    let line = format!("\n{m}({t}, {d})");
                    assert!(six.contains(&line), "step 6, {line}");
                }
            }
        }
        // step 6's tiles
        assert_eq!((BR6, BC6, BK6, BRQ6, FUSED_KEYS), (128, 64, 64, 64, 128));
        assert_eq!((bq6(32), bq6(64), bq6(128)), (32, 32, 64));
        for line in [
            "constexpr int F6_BR = 16 * F6_MT * F6_WARPS;",
            "constexpr int F6_BC = 64;",
            "constexpr int F6_WARPS = 4;",
            "constexpr int F6_MT = 2;",
            "constexpr int F6_BK = 16 * F6_WARPS;",
            "constexpr int F6_BK_FUSED = 32 * F6_WARPS;",
            "constexpr int F6_BRQ = 16 * F6_WARPS;",
            "constexpr int F6_BQ = D >= 128 ? 64 : 32;",
        ] {
            assert!(six.contains(line), "{line}");
        }
        for line in [
            "constexpr int WARPS = 4;",
            "constexpr int BR = 16 * WARPS;",
            "constexpr int BC = 64;",
            "constexpr int BK = 16 * WARPS;",
            "constexpr int BQ = 32;",
        ] {
            assert!(mma.contains(line), "{line}");
        }
    }

    #[test]
    fn geometry_checks_and_visible_keys() {
        let g = AttnGeom {
            b: 1,
            h: 2,
            tq: 3,
            tk: 5,
            d: 64,
            q: AttnGeom::dense(2, 3, 64),
            k: AttnGeom::dense(2, 5, 64),
            v: AttnGeom::dense(2, 5, 64),
            scale: 0.125,
            causal: true,
            dropout: 0.0,
            seed: 0,
        };
        assert_eq!((g.visible(0), g.visible(2)), (3, 5));
        assert!(AttnGeom { dropout: 1.0, ..g }.args("k", Elem::F32).is_err());
        assert!(AttnGeom { dropout: -0.1, ..g }
            .args("k", Elem::F32)
            .is_err());
        assert!(AttnGeom { dropout: 0.5, ..g }.args("k", Elem::F32).is_ok());
        assert!(g.args("k", Elem::F32).is_ok());
        assert!(AttnGeom { d: 48, ..g }.args("k", Elem::F32).is_err());
        assert!(AttnGeom { tk: 2, ..g }.args("k", Elem::F32).is_err());
        assert!(AttnGeom { q: [1, 2, 3], ..g }.args("k", Elem::F32).is_err());
        // 16-byte rows: multiples of 4 floats, of 8 halves
        let q4 = AttnGeom {
            q: [4 * 64, 4 * 64, 4],
            ..g
        };
        assert!(q4.args("k", Elem::F32).is_ok());
        assert!(q4.args("k", Elem::BF16).is_err());
        assert_eq!(AttnGeom { causal: false, ..g }.visible(0), 5);
    }

    /// The mask drops its fraction of weights, differs between seeds, rows and heads, and is
    /// the identity without dropout.
    #[test]
    fn dropout_mask_drops_its_fraction() {
        let g = AttnGeom {
            b: 1,
            h: 1,
            tq: 1,
            tk: 1,
            d: 64,
            q: [0; 3],
            k: [0; 3],
            v: [0; 3],
            scale: 1.0,
            causal: false,
            dropout: 0.1,
            seed: 42,
        };
        let count = |g: &AttnGeom, bh: usize| {
            (0..512)
                .flat_map(|i| (0..512).map(move |j| (i, j)))
                .filter(|&(i, j)| g.dropout_multiplier(bh, i, j) == 0.0)
                .count() as f64
                / (512.0 * 512.0)
        };
        for p in [0.1f32, 0.2, 0.5] {
            let gp = AttnGeom { dropout: p, ..g };
            for bh in [0, 7] {
                let f = count(&gp, bh);
                assert!((f - p as f64).abs() < 0.005, "p {p}: dropped {f}");
            }
            assert_eq!(
                gp.dropout_multiplier(0, 0, 0) == 0.0,
                gp.dropout_multiplier(0, 0, 0) != 1.0 / (1.0 - p)
            );
        }
        let differ = |a: &AttnGeom, b: &AttnGeom, bh: (usize, usize), i: (usize, usize)| {
            (0..256)
                .any(|j| a.dropout_multiplier(bh.0, i.0, j) != b.dropout_multiplier(bh.1, i.1, j))
        };
        let g2 = AttnGeom { seed: 43, ..g };
        assert!(differ(&g, &g2, (0, 0), (0, 0)), "seeds");
        assert!(differ(&g, &g, (0, 1), (0, 0)), "heads");
        assert!(differ(&g, &g, (0, 0), (0, 1)), "rows");
        let none = AttnGeom { dropout: 0.0, ..g };
        assert!((0..100).all(|j| none.dropout_multiplier(0, 0, j) == 1.0));
    }

    /// f32 runs at steps 1–2 and 16-bit at step 3: a step picks the highest at or below it
    /// with kernels for the element type, and says so when there is none.
    #[test]
    fn steps_are_picked_per_element_type() {
        use super::super::rows::Step;
        let step = |s, e| at(s, e).map(|k| k.step);
        assert_eq!(step(Step::Three, Elem::F32).unwrap(), Step::Two);
        assert_eq!(step(Step::One, Elem::F32).unwrap(), Step::One);
        assert_eq!(step(Step::Three, Elem::BF16).unwrap(), Step::Three);
        assert_eq!(step(Step::Four, Elem::F16).unwrap(), Step::Four);
        assert_eq!(step(Step::Five, Elem::BF16).unwrap(), Step::Five);
        assert_eq!(step(Step::Four, Elem::F32).unwrap(), Step::Two);
        assert_eq!(step(Step::Eight, Elem::F16).unwrap(), Step::Eight);
        assert_eq!(step(Step::Eight, Elem::F32).unwrap(), Step::Two);
        let e = at(Step::Two, Elem::BF16).unwrap_err().to_string();
        assert!(
            e.contains("BF16") && e.contains("[3, 4, 5, 6, 7, 8]"),
            "{e}"
        );
        assert!(at(Step::Three, Elem::I64).is_err());
    }
}

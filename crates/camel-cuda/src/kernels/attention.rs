//! Launchers for `kernels/attention/` (one PTX module per ladder step): fused attention
//! `softmax(scale · q·kᵀ, causal mask) · v` without the `Tq × Tk` score matrix, forward (the
//! output and each query row's log-sum-exp) and backward (dq, dk, dv recomputed from the
//! log-sum-exp). Step 1 (`warp_row`): a warp per query row. Step 2 (`tiled`): K/V tiles in
//! shared memory; its backward is every step's backward. The layouts are
//! `kernels/attention/attention.cuh`'s: q, k, v strided `[B, H, T, D]` with contiguous
//! features, the output and the gradients dense `[B, T, H, D]`, the log-sum-exp `[B, H, Tq]`.

use super::launch;
use crate::{CudaDevice, DevPtr, Dim3, Error, KernelArg, LaunchConfig, Result};

/// PTX module of step 1: `kernels/attention/01_warp_row.cu`.
const STEP1: &str = "attention/01_warp_row";
/// PTX module of step 2: `kernels/attention/02_tiled.cu`.
const STEP2: &str = "attention/02_tiled";

/// Query (or key) rows of a step-2 block: `BR` / `BC` of `02_tiled.cu`.
const TILE: usize = 32;

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

    /// The kernels' argument block, after checking what they assume: an instantiated head dim,
    /// `tk ≥ 1`, `tk ≥ tq` when causal, and strides that keep 16-byte aligned rows.
    fn args(&self, kernel: &str) -> Result<AttnArgs> {
        let bad = |msg: String| {
            Err(Error::LaunchConfig {
                kernel: kernel.to_string(),
                msg,
            })
        };
        if !HEAD_DIMS.contains(&self.d) {
            return bad(format!("head dim {} (instantiated: {HEAD_DIMS:?})", self.d));
        }
        if self.tk == 0 || (self.causal && self.tk < self.tq) {
            return bad(format!(
                "tq = {}, tk = {} (causal: {})",
                self.tq, self.tk, self.causal
            ));
        }
        let strides = [self.q, self.k, self.v];
        if strides.iter().flatten().any(|s| s % 4 != 0) {
            return bad(format!("strides {strides:?} are not multiples of 4 floats"));
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
    (dev: &CudaDevice, g: &AttnGeom, q: DevPtr, k: DevPtr, v: DevPtr, o: DevPtr, lse: DevPtr);

    /// Step 1: a warp per query row, K and V read from global memory key by key, the online
    /// softmax (`attn01_fwd_d{D}_f32`, four rows a block of 128 threads).
    pub fn warp_row(..) {
        let name = format!("attn01_fwd_d{}_f32", g.d);
        let a = g.args(&name)?;
        if g.rows() == 0 {
            return Ok(());
        }
        let cfg = grid(&name, g.rows().div_ceil(4), 128)?;
        // SAFETY: matches `attn01_fwd_d{D}_f32(const float* q, k, v, float* o, float* lse,
        // AttnArgs)`; the caller passes q, k, v addressing `g`'s strided views, a dense
        // `[b, tq, h, d]` o and a `[b, h, tq]` lse.
        unsafe {
            let args: [&dyn KernelArg; 6] = [&q, &k, &v, &o, &lse, &a];
            launch(dev, STEP1, &name, cfg, &args)
        }
    }

    /// Step 2: 32 query rows a block, a quad of threads per row, K/V tiles of 32 keys in shared
    /// memory (`attn02_fwd_d{D}_f32`). Operands not 16-byte aligned run step 1.
    pub fn tiled(..) {
        if !super::rows::aligned16(&[q, k, v, o]) {
            return warp_row(dev, g, q, k, v, o, lse);
        }
        let name = format!("attn02_fwd_d{}_f32", g.d);
        let a = g.args(&name)?;
        if g.rows() == 0 {
            return Ok(());
        }
        let cfg = grid(&name, g.b * g.h * g.tq.div_ceil(TILE), 128)?;
        // SAFETY: as `warp_row`'s, for `attn02_fwd_d{D}_f32` of the same parameters.
        unsafe {
            let args: [&dyn KernelArg; 6] = [&q, &k, &v, &o, &lse, &a];
            launch(dev, STEP2, &name, cfg, &args)
        }
    }
}

launchers! {
    // the backward of each step (the Backward type)
    (
        dev: &CudaDevice, g: &AttnGeom, q: DevPtr, k: DevPtr, v: DevPtr, o: DevPtr, dout: DevPtr,
        lse: DevPtr, dq: DevPtr, dk: DevPtr, dv: DevPtr,
    );

    /// The backward of both steps from the forward's output `o` and log-sum-exp `lse` and the
    /// output gradient `dout` (dense `[b, tq, h, d]`): `Δ = rowsum(dout ⊙ o)`
    /// (`attn_bwd_delta_f32`, into a workspace), then dk and dv a tile of keys a block
    /// (`attn02_bwd_dkdv_d{D}_f32`) and dq a tile of queries a block (`attn02_bwd_dq_d{D}_f32`),
    /// each written dense `[b, t, h, d]`.
    pub fn tiled_bwd(..) {
        let dkdv = format!("attn02_bwd_dkdv_d{}_f32", g.d);
        let a = g.args(&dkdv)?;
        check_aligned(&dkdv, &[q, k, v, o, dout, dq, dk, dv])?;
        if g.b * g.h == 0 {
            return Ok(());
        }
        let rows = g.rows();
        let delta = dev.alloc(rows.max(1) * 4)?;
        let dp = delta.ptr();
        if rows > 0 {
            let name = "attn_bwd_delta_f32";
            let cfg = grid(name, rows.div_ceil(8), 256)?;
            let (b, h, tq, d) = (g.b as i64, g.h as i64, g.tq as i64, g.d as i32);
            // SAFETY: matches `attn_bwd_delta_f32(const float* o, const float* dout, float*
            // delta, long long b, long long h, long long tq, int d)`: o and dout dense
            // `[b, tq, h, d]`, delta `rows` floats.
            unsafe {
                let args: [&dyn KernelArg; 7] = [&o, &dout, &dp, &b, &h, &tq, &d];
                launch(dev, STEP2, name, cfg, &args)?;
            }
        }
        // keys that no query sees still get (zero) gradients: every key tile runs
        let cfg = grid(&dkdv, g.b * g.h * g.tk.div_ceil(TILE), 128)?;
        // SAFETY: matches `attn02_bwd_dkdv_d{D}_f32(const float* q, k, v, dout, lse, delta,
        // float* dk, float* dv, AttnArgs)`: q, k, v `g`'s views, dout dense `[b, tq, h, d]`,
        // lse and delta `[b, h, tq]`, dk and dv dense `[b, tk, h, d]`.
        unsafe {
            let args: [&dyn KernelArg; 9] = [&q, &k, &v, &dout, &lse, &dp, &dk, &dv, &a];
            launch(dev, STEP2, &dkdv, cfg, &args)?;
        }
        if rows == 0 {
            return Ok(());
        }
        let name = format!("attn02_bwd_dq_d{}_f32", g.d);
        let cfg = grid(&name, g.b * g.h * g.tq.div_ceil(TILE), 128)?;
        // SAFETY: matches `attn02_bwd_dq_d{D}_f32(const float* q, k, v, dout, lse, delta,
        // float* dq, AttnArgs)`, the operands as for dk/dv, dq dense `[b, tq, h, d]`.
        unsafe {
            let args: [&dyn KernelArg; 8] = [&q, &k, &v, &dout, &lse, &dp, &dq, &a];
            launch(dev, STEP2, &name, cfg, &args)
        }
    }
}

// ------------------------------------------------------------------ the family's table

/// An attention forward launcher: `(dev, geom, q, k, v, o, lse)`.
pub type Forward = fn(&CudaDevice, &AttnGeom, DevPtr, DevPtr, DevPtr, DevPtr, DevPtr) -> Result<()>;
/// An attention backward launcher: `(dev, geom, q, k, v, o, dout, lse, dq, dk, dv)`.
pub type Backward = fn(
    &CudaDevice,
    &AttnGeom,
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
    /// Its forward.
    pub forward: Forward,
    /// Its backward.
    pub backward: Backward,
}

/// The attention ladder.
pub const STEPS: [Kernels; 2] = [
    Kernels {
        step: super::rows::Step::One,
        forward: warp_row,
        backward: tiled_bwd,
    },
    Kernels {
        step: super::rows::Step::Two,
        forward: tiled,
        backward: tiled_bwd,
    },
];

/// The launchers of `step` (the highest step at or below it).
pub fn at(step: super::rows::Step) -> &'static Kernels {
    super::ladder::pick(&STEPS, step, |k| k.step)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every head dim the launchers accept has its kernels in the files.
    #[test]
    fn every_head_dim_is_instantiated() {
        let one = include_str!("../../../../kernels/attention/01_warp_row.cu");
        let two = include_str!("../../../../kernels/attention/02_tiled.cu");
        for d in HEAD_DIMS {
            assert!(one.contains(&format!("\nATTN01({d})")), "step 1, d = {d}");
            assert!(two.contains(&format!("\nATTN02({d})")), "step 2, d = {d}");
        }
        assert_eq!(TILE, 32);
        assert!(two.contains("constexpr int BR = 32;") && two.contains("constexpr int BC = 32;"));
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
        };
        assert_eq!((g.visible(0), g.visible(2)), (3, 5));
        assert!(g.args("k").is_ok());
        assert!(AttnGeom { d: 48, ..g }.args("k").is_err());
        assert!(AttnGeom { tk: 2, ..g }.args("k").is_err());
        assert!(AttnGeom { q: [1, 2, 3], ..g }.args("k").is_err());
        assert_eq!(AttnGeom { causal: false, ..g }.visible(0), 5);
    }
}

//! Fused attention, `softmax(scale · q·kᵀ, causal mask) · v`, without the `Tq × Tk` score
//! matrix: the forward keeps a running max and sum per query row (the online softmax) and saves
//! only the output and each row's log-sum-exp; the backward recomputes the probabilities from
//! the log-sum-exp (the FlashAttention-2 backward). It computes what camel-nn's naive attention
//! (`matmul_t`, [`Tensor::scaled_masked_softmax`], `matmul`) computes, which is its reference.
//! f32 runs on both devices; f16 and bf16 run the tensor-core kernels on the GPU and the f32
//! reference on the CPU (inputs widened exactly, the output rounded once).
//! [`Tensor::attention_dropout`] drops attention weights inside the same kernels, its mask a
//! hash of (seed, head, query, key) that the backward recomputes.
//!
//! Layouts: q `[B, H, Tq, D]`, k and v `[B, H, Tk, D]` are read in place when their features are
//! contiguous (the head views of a projection need no copy); the output is a `[B, H, Tq, D]`
//! view of a dense `[B, Tq, H, D]` storage, so `out.transpose(1, 2).reshape([B, Tq, H·D])`
//! (merging the heads) is free; the gradients come back the same way.

use super::{expect_float, same_device, same_dtype};
use crate::rng::Generator;
use crate::storage::{dispatch, Storage};
use crate::tensor::StorageRef;
use crate::{DType, Error, Result, Tensor};
pub use camel_cuda::kernels::attention::{AttnGeom, HEAD_DIMS};

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

/// An attention call: the geometry and where q, k and v start in their storages.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Attn {
    /// Sizes, strides, scale and mask.
    pub g: AttnGeom,
    /// Offsets (in elements) of q, k and v in their storages.
    pub off: [usize; 3],
}

/// The attention primitives of a backend (`cpu.rs`, `cuda.rs`).
pub(crate) trait AttentionKernels: Sized {
    /// The output (dense `[B, Tq, H, D]`) and log-sum-exp (`[B, H, Tq]`) of queries `self`.
    fn attention(&self, k: &Self, v: &Self, a: &Attn) -> Result<(Self, Self)>;
    /// dq, dk and dv (dense `[B, T, H, D]`) from the forward's output `o`, its log-sum-exp and
    /// the output gradient `dout` (dense `[B, Tq, H, D]`).
    #[allow(clippy::too_many_arguments)]
    fn attention_bwd(
        &self,
        k: &Self,
        v: &Self,
        o: &Self,
        dout: &Self,
        lse: &Self,
        a: &Attn,
    ) -> Result<(Self, Self, Self)>;
}

impl Storage {
    /// [`AttentionKernels::attention`] on the operands' device.
    pub(crate) fn attention(
        &self,
        k: &Storage,
        v: &Storage,
        a: &Attn,
    ) -> Result<(Storage, Storage)> {
        dispatch!("attention"; q = self, k = k, v = v => q.attention(k, v, a))
    }

    /// [`AttentionKernels::attention_bwd`] on the operands' device.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn attention_bwd(
        &self,
        k: &Storage,
        v: &Storage,
        o: &Storage,
        dout: &Storage,
        lse: &Storage,
        a: &Attn,
    ) -> Result<(Storage, Storage, Storage)> {
        dispatch!("attention backward"; q = self, k = k, v = v, o = o, dout = dout, lse = lse
            => q.attention_bwd(k, v, o, dout, lse, a))
    }
}

/// `t`'s storage, offset and strides along its first three dims: read in place when the
/// features are contiguous and every stride and the offset are multiples of 16 bytes (the
/// kernels' 16-byte rows), else a dense copy.
fn operand(t: &Tensor) -> Result<(StorageRef<'_>, usize, [usize; 3])> {
    let l = t.layout();
    let s = l.strides();
    let per16 = 16 / t.dtype().size();
    if s[3] == 1
        && s[..3].iter().all(|x| x.is_multiple_of(per16))
        && l.offset().is_multiple_of(per16)
    {
        return Ok((
            StorageRef::Shared(t.raw_storage()),
            l.offset(),
            [s[0], s[1], s[2]],
        ));
    }
    let sh = t.shape();
    Ok((t.storage()?, 0, AttnGeom::dense(sh[1], sh[2], sh[3])))
}

/// The `[B, H, T, D]` view of a dense `[B, T, H, D]` storage.
fn heads_view(s: Storage, b: usize, t: usize, h: usize, d: usize) -> Result<Tensor> {
    Tensor::from_storage(s, vec![b, t, h, d]).permute(&[0, 2, 1, 3])
}

impl Tensor {
    /// Fused attention of queries `self` `[B, H, Tq, D]` over keys `k` and values `v`
    /// `[B, H, Tk, D]`: `softmax(scale · q·kᵀ) · v`, with key `j` hidden from query `i` when
    /// `causal` and `j > i + (Tk − Tq)`. The `[B, H, Tq, Tk]` scores are never stored. The
    /// result is `[B, H, Tq, D]`, stored as `[B, Tq, H, D]` (so merging the heads is a free
    /// reshape of `transpose(1, 2)`). PyTorch:
    /// `F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)` (for `Tq = Tk`).
    ///
    /// The operands are f32, f16 or bf16, all one dtype, which the output has; the sums are
    /// f32 throughout. On the GPU it runs the attention ladder's step (`CAMEL_ATTENTION`,
    /// docs/kernels/attention.md: f32 at steps 1–2, f16/bf16 on the tensor cores at step 3); on
    /// the CPU, the f32 reference (16-bit operands widened, the output rounded once).
    ///
    /// Errors: operands that are not floats or not one dtype, not rank 4, whose batch, heads or
    /// head dims differ, or whose keys and values differ in length; a head dim outside
    /// [`HEAD_DIMS`]; `Tk = 0`; `causal` with `Tk < Tq`; a non-finite `scale`; devices that
    /// differ; a `CAMEL_ATTENTION` step without kernels for the dtype.
    ///
    /// ```
    /// use camel_core::{Device, Tensor};
    /// let q = Tensor::randn_seeded(&[1, 2, 5, 32], 0, Device::Cpu)?;
    /// let y = q.attention(&q, &q, 0.125, true)?;
    /// assert_eq!(y.shape(), &[1, 2, 5, 32]);
    /// // the first query sees only the first key, whose value it returns
    /// let first = y.narrow(2, 0, 1)?.to_vec()?;
    /// assert_eq!(first[..32], q.narrow(2, 0, 1)?.to_vec()?[..32]);
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn attention(&self, k: &Tensor, v: &Tensor, scale: f32, causal: bool) -> Result<Tensor> {
        self.attention_impl(k, v, scale, causal, 0.0, &mut || 0)
    }

    /// [`Tensor::attention`] with dropout of probability `p` in `[0, 1)` on the attention
    /// weights, as the naive attention's `dropout(softmax(…))` (PyTorch's
    /// `scaled_dot_product_attention(…, dropout_p=p)`): each weight is zeroed with probability `p`
    /// and the kept ones scaled by `1 / (1 − p)`, inside the fused kernels. The mask is a hash
    /// of a seed and each weight's (head, query, key), recomputed by the backward
    /// ([`AttnGeom::dropout_multiplier`]); the seed is drawn from the global generator
    /// ([`crate::manual_seed`]), only when `p > 0`. `p = 0` is [`Tensor::attention`].
    pub fn attention_dropout(
        &self,
        k: &Tensor,
        v: &Tensor,
        scale: f32,
        causal: bool,
        p: f32,
    ) -> Result<Tensor> {
        self.attention_impl(k, v, scale, causal, p, &mut || {
            crate::rng::with_global(|g| g.next_u64())
        })
    }

    /// [`Tensor::attention_dropout`] with the mask's seed drawn from `generator`
    /// ([`Generator::next_u64`], one counter).
    pub fn attention_dropout_with(
        &self,
        k: &Tensor,
        v: &Tensor,
        scale: f32,
        causal: bool,
        p: f32,
        generator: &mut Generator,
    ) -> Result<Tensor> {
        self.attention_impl(k, v, scale, causal, p, &mut || generator.next_u64())
    }

    /// The checks and the op; `seed` is called once, after every check passes, when `p > 0`.
    fn attention_impl(
        &self,
        k: &Tensor,
        v: &Tensor,
        scale: f32,
        causal: bool,
        p: f32,
        seed: &mut dyn FnMut() -> u64,
    ) -> Result<Tensor> {
        const OP: &str = "attention";
        expect_float(OP, self)?;
        same_dtype(OP, self, k)?;
        same_dtype(OP, self, v)?;
        same_device(OP, self, k)?;
        same_device(OP, self, v)?;
        let (qs, ks) = (self.shape(), k.shape());
        let mismatch = |rhs: &Tensor, expected: String| Error::ShapeMismatch {
            op: OP,
            lhs: qs.to_vec(),
            rhs: rhs.shape().to_vec(),
            expected,
        };
        if qs.len() != 4 || ks.len() != 4 || v.rank() != 4 {
            let bad = [self, k, v]
                .into_iter()
                .find(|t| t.rank() != 4)
                .unwrap_or(v);
            return Err(mismatch(
                bad,
                "q [B, H, Tq, D], k and v [B, H, Tk, D] (rank 4)".into(),
            ));
        }
        let (b, h, tq, d) = (qs[0], qs[1], qs[2], qs[3]);
        let tk = ks[2];
        if ks != [b, h, tk, d] {
            return Err(mismatch(k, format!("k of shape [{b}, {h}, Tk, {d}]")));
        }
        if v.shape() != ks {
            return Err(mismatch(v, format!("v of k's shape {ks:?}")));
        }
        if !HEAD_DIMS.contains(&d) {
            return Err(Error::BadShape {
                op: OP,
                shape: qs.to_vec(),
                expected: format!("a head dim D in {HEAD_DIMS:?}"),
            });
        }
        if tk == 0 || (causal && tk < tq) {
            return Err(mismatch(
                k,
                format!(
                    "Tk ≥ 1, and Tk ≥ Tq with the causal mask (Tq = {tq}, Tk = {tk}): every \
                     query must see a key"
                ),
            ));
        }
        if !scale.is_finite() {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!("scale must be finite, got {scale}"),
            });
        }
        if !(0.0..1.0).contains(&p) {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!("dropout must be in [0, 1) in the fused attention, got {p}"),
            });
        }
        let dt = self.dtype();
        if dt != DType::F32 && !self.device().is_cuda() {
            // the CPU reference computes in f32; the casts carry the gradients back
            let w = |t: &Tensor| t.to_dtype(DType::F32);
            return self
                .to_dtype(DType::F32)?
                .attention_impl(&w(k)?, &w(v)?, scale, causal, p, seed)?
                .to_dtype(dt);
        }
        let seed = if p > 0.0 { seed() } else { 0 };
        let (sq, oq, q_st) = operand(self)?;
        let (sk, ok, k_st) = operand(k)?;
        let (sv, ov, v_st) = operand(v)?;
        let a = Attn {
            g: AttnGeom {
                b,
                h,
                tq,
                tk,
                d,
                q: q_st,
                k: k_st,
                v: v_st,
                scale,
                causal,
                dropout: p,
                seed,
            },
            off: [oq, ok, ov],
        };
        let (o, lse) = sq.attention(&sk, &sv, &a)?;
        drop((sq, sk, sv));
        let o = Tensor::from_storage(o, vec![b, tq, h, d]);
        let od = o.detach();
        let lse = Tensor::from_storage(lse, vec![b, h, tq]);
        let (q0, k0, v0) = (self.detach(), k.detach(), v.detach());
        let out = Tensor::op_output(
            o.storage_arc().clone(),
            vec![b, tq, h, d],
            OP,
            &[self, k, v],
            Box::new(move |g| {
                let (sq, oq, _) = operand(&q0)?;
                let (sk, ok, _) = operand(&k0)?;
                let (sv, ov, _) = operand(&v0)?;
                // the strides are those of the forward: the views and their storages are kept
                let a = Attn {
                    off: [oq, ok, ov],
                    ..a
                };
                let (dq, dk, dv) = sq.attention_bwd(
                    &sk,
                    &sv,
                    &*od.storage()?,
                    &*g.storage()?,
                    &*lse.storage()?,
                    &a,
                )?;
                Ok(vec![
                    Some(heads_view(dq, b, tq, h, d)?),
                    Some(heads_view(dk, b, tk, h, d)?),
                    Some(heads_view(dv, b, tk, h, d)?),
                ])
            }),
        );
        out.permute(&[0, 2, 1, 3])
    }
}

//! Matrix products, 2-D and batched, with transpose flags so that the backward pass never
//! materializes a transpose just to multiply, and `linear` with its bias and activation fused
//! into the GEMM. The geometry of a product is camel-cuda's [`Gemm`], on both devices: the CPU
//! multiplies through the `gemm` crate (`cpu.rs`), the GPU through the SGEMM ladder for f32 and the
//! tensor-core ladder for f16/bf16 (`cuda.rs`, `kernels/matmul`).
//!
//! Operands are of one float dtype. f16 and bf16 products sum in f32 and round once to the
//! operands' dtype (on the CPU by widening to f32, on the GPU in the tensor cores' f32
//! accumulators); the bias and activation of `linear` apply to the f32 sum before that rounding.

use super::{expect_float, same_device, same_dtype};
use crate::autocast::lower;
use crate::backend::Activation;
use crate::ops::elementwise::UnaryOp;
use crate::shape::numel;
use crate::storage::{dispatch, Storage};
use crate::tensor::{StorageCell, StorageRef};
use crate::{Error, Result, Tensor};
pub use camel_cuda::kernels::matmul::Gemm;

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

/// The matrix-product primitives of a backend (`cpu.rs`, `cuda.rs`).
pub(crate) trait MatmulKernels: Sized {
    /// `C[b] = op(A[b]) · op(B[b])` for the geometry `g`; `C` is `batch` row-major `m × n`.
    fn matmul(&self, rhs: &Self, g: &Gemm) -> Result<Self>;
    /// `act(x · wᵀ + bias)` for `x` `[rows, inp]`, `w` `[out, inp]`; also the pre-activation
    /// when the activation's backward needs it (GELU).
    fn linear(
        &self,
        w: &Self,
        bias: Option<&Self>,
        dims: (usize, usize, usize),
        act: Activation,
    ) -> Result<(Self, Option<Self>)>;
}

impl Storage {
    /// [`MatmulKernels::matmul`] on the operands' device.
    pub(crate) fn matmul(&self, rhs: &Storage, g: &Gemm) -> Result<Storage> {
        dispatch!("matmul"; a = self, b = rhs => a.matmul(b, g))
    }

    /// [`MatmulKernels::linear`] on the operands' device.
    pub(crate) fn linear(
        &self,
        w: &Storage,
        bias: Option<&Storage>,
        dims: (usize, usize, usize),
        act: Activation,
    ) -> Result<(Storage, Option<Storage>)> {
        match bias {
            None => dispatch!("linear"; x = self, w = w => x.linear(w, None, dims, act)),
            Some(b) => {
                dispatch!("linear"; x = self, w = w, b = b => x.linear(w, Some(b), dims, act))
            }
        }
    }
}

impl Tensor {
    /// `self · rhs` for `[.., m, k] · [.., k, n]`; batch dims must match, or one side is 2-D.
    ///
    /// # Examples
    ///
    /// ```
    /// use camel_core::{Device, Tensor};
    /// let a = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2], Device::Cpu)?;
    /// let b = Tensor::from_vec(vec![5.0, 6.0, 7.0, 8.0], &[2, 2], Device::Cpu)?;
    /// assert_eq!(a.matmul(&b)?.to_vec()?, [19.0, 22.0, 43.0, 50.0]);
    /// // Inner dimensions that disagree are a shape error, not a panic.
    /// assert!(a.matmul(&Tensor::zeros(&[3, 2], Device::Cpu)?).is_err());
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor> {
        self.matmul_t(rhs, false, false)
    }

    /// `op(self) · op(rhs)` where `op` transposes the last two dims when its flag is set.
    /// A transposed view (`x.transpose(-2, -1)`) is read in place with the flag flipped.
    pub fn matmul_t(&self, rhs: &Tensor, trans_a: bool, trans_b: bool) -> Result<Tensor> {
        if crate::autocast_dtype().is_some() {
            let (a, b) = (lower(self)?, lower(rhs)?);
            let _off = crate::autocast_guard(None)?;
            return a.matmul_t(&b, trans_a, trans_b);
        }
        expect_float("matmul", self)?;
        same_dtype("matmul", self, rhs)?;
        same_device("matmul", self, rhs)?;
        let mismatch = |why: &str| Error::ShapeMismatch {
            op: "matmul",
            lhs: self.shape().to_vec(),
            rhs: rhs.shape().to_vec(),
            expected: format!("{why} (transpose flags: a={trans_a}, b={trans_b})"),
        };
        if self.rank() < 2 || rhs.rank() < 2 {
            return Err(mismatch("both operands of rank ≥ 2"));
        }
        let (ra, rb) = (self.rank(), rhs.rank());
        let (a_rows, a_cols) = (self.shape()[ra - 2], self.shape()[ra - 1]);
        let (b_rows, b_cols) = (rhs.shape()[rb - 2], rhs.shape()[rb - 1]);
        let (m, k) = if trans_a {
            (a_cols, a_rows)
        } else {
            (a_rows, a_cols)
        };
        let (k2, n) = if trans_b {
            (b_cols, b_rows)
        } else {
            (b_rows, b_cols)
        };
        if k != k2 {
            return Err(mismatch("inner dimensions to agree"));
        }
        let (ba, bb) = (&self.shape()[..ra - 2], &rhs.shape()[..rb - 2]);
        let batch_dims: Vec<usize> = if ba == bb || bb.is_empty() {
            ba.to_vec()
        } else if ba.is_empty() {
            bb.to_vec()
        } else {
            return Err(mismatch("equal batch dims, or one operand 2-D"));
        };
        let batch = numel(&batch_dims);
        // a transposed view is multiplied in place: its storage holds op(x)ᵀ densely
        let (sa, flip_a) = self.gemm_operand()?;
        let (sb, flip_b) = rhs.gemm_operand()?;
        let (ta, tb) = (trans_a ^ flip_a, trans_b ^ flip_b);
        let mut spec = Gemm {
            batch,
            m,
            n,
            k,
            trans_a: ta,
            trans_b: tb,
            stride_a: if ba.is_empty() { 0 } else { m * k },
            stride_b: if bb.is_empty() { 0 } else { k * n },
        };
        // A batched and stored untransposed, B shared: one big GEMM of (batch·m) × k.
        if !ta && bb.is_empty() && batch > 1 {
            spec = Gemm {
                batch: 1,
                m: batch * m,
                stride_a: 0,
                stride_b: 0,
                ..spec
            };
        }
        let s = sa.matmul(&sb, &spec)?;
        let mut out_shape = batch_dims;
        out_shape.extend([m, n]);
        let (ga_need, gb_need) = (self.requires_grad(), rhs.requires_grad());
        // what the backward reads: `b` for A's gradient, `a` for B's; an operand this product
        // copied into dense order (a view of the heads, say) is kept as that copy, so the
        // backward does not copy it again
        let keep = |t: &Tensor, r: StorageRef<'_>, needed: bool| match (needed, r) {
            (false, _) => t.detach(),
            (true, StorageRef::Copied(st)) => Tensor::from_storage(st, t.shape().to_vec()),
            (true, StorageRef::Shared(_)) => t.detach(),
        };
        let (a, b) = (keep(self, sa, gb_need), keep(rhs, sb, ga_need));
        Ok(Tensor::from_op(
            s,
            out_shape,
            "matmul",
            &[self, rhs],
            move |g| {
                // both gradients read `g`: a layout they would each copy is copied once here
                let dense_g;
                let g = if ga_need && gb_need && g.gemm_copies() {
                    dense_g = g.contiguous()?;
                    &dense_g
                } else {
                    g
                };
                let ga = if ga_need {
                    let d = if trans_a {
                        b.matmul_t(g, trans_b, true)?
                    } else {
                        g.matmul_t(&b, false, !trans_b)?
                    };
                    Some(d.sum_to(a.shape())?)
                } else {
                    None
                };
                let gb = if gb_need {
                    let d = if trans_b {
                        g.matmul_t(&a, true, trans_a)?
                    } else if !trans_a && a.rank() > 2 && b.rank() == 2 {
                        // fold the batch: (batch·m × k)ᵀ · (batch·m × n)
                        let kk = a.shape()[a.rank() - 1];
                        let nn = g.shape()[g.rank() - 1];
                        a.reshape(&[a.numel() / kk, kk])?.matmul_t(
                            &g.reshape(&[g.numel() / nn, nn])?,
                            true,
                            false,
                        )?
                    } else {
                        a.matmul_t(g, !trans_a, false)?
                    };
                    Some(d.sum_to(b.shape())?)
                } else {
                    None
                };
                Ok(vec![ga, gb])
            },
        ))
    }
}

impl Tensor {
    /// Whether [`Tensor::gemm_operand`] copies this tensor (neither dense nor a transposed
    /// view of a dense tensor).
    fn gemm_copies(&self) -> bool {
        let r = self.rank();
        let len = self.raw_storage().len();
        !self.layout().is_dense(len) && !self.layout().transpose(r - 2, r - 1).is_dense(len)
    }

    /// This tensor's data for a GEMM, and whether it is stored with its last two dims swapped:
    /// a transposed view of a dense tensor is read in place (the GEMM's transpose flag), any
    /// other layout densely.
    fn gemm_operand(&self) -> Result<(StorageRef<'_>, bool)> {
        let r = self.rank();
        let swapped = self.layout().transpose(r - 2, r - 1);
        let guard = self.raw_storage();
        if !self.layout().is_dense(guard.len()) && swapped.is_dense(guard.len()) {
            return Ok((StorageRef::Shared(guard), true));
        }
        drop(guard);
        Ok((self.storage()?, false))
    }

    /// A linear layer, `act(self · weightᵀ + bias)`, with `self` `[.., in]`, `weight`
    /// `[out, in]` and `bias` `[out]`. On the GPU this is one GEMM whose epilogue adds the bias
    /// and applies the activation (no extra pass over the output); on the CPU, the reference.
    pub fn linear(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        act: Activation,
    ) -> Result<Tensor> {
        if crate::autocast_dtype().is_some() {
            let (x, w) = (lower(self)?, lower(weight)?);
            let b = bias.map(lower).transpose()?;
            let _off = crate::autocast_guard(None)?;
            return x.linear(&w, b.as_ref(), act);
        }
        expect_float("linear", self)?;
        same_dtype("linear", self, weight)?;
        same_device("linear", self, weight)?;
        let inp = *self.shape().last().unwrap_or(&0);
        let mismatch = |rhs: &Tensor, expected: String| Error::ShapeMismatch {
            op: "linear",
            lhs: self.shape().to_vec(),
            rhs: rhs.shape().to_vec(),
            expected,
        };
        if self.rank() < 1 || weight.rank() != 2 || weight.shape()[1] != inp {
            return Err(mismatch(
                weight,
                format!("input [.., in] and weight [out, in] with in = {inp}"),
            ));
        }
        let out = weight.shape()[0];
        if let Some(b) = bias {
            same_dtype("linear", self, b)?;
            same_device("linear", self, b)?;
            if b.shape() != [out] {
                return Err(mismatch(b, format!("bias of shape [{out}]")));
            }
        }
        let rows = numel(&self.shape()[..self.rank() - 1]);
        let (y, z) = {
            let bs = bias.map(|b| b.storage()).transpose()?;
            self.storage()?
                .linear(&*weight.storage()?, bs.as_deref(), (rows, inp, out), act)?
        };
        let mut shape = self.shape().to_vec();
        *shape.last_mut().expect("rank ≥ 1") = out;
        let y = StorageCell::new(y);
        // what the backward needs: the inputs, and the output (ReLU mask) or pre-activation
        // (GELU); without an activation the output is not kept alive for the backward
        let saved_y =
            (act == Activation::Relu).then(|| Tensor::shared_storage(y.clone(), shape.clone()));
        let saved_z = z.map(|z| Tensor::from_storage(z, shape.clone()));
        let (x, w) = (self.detach(), weight.detach());
        let (gx_need, gw_need) = (self.requires_grad(), weight.requires_grad());
        let gb_need = bias.is_some_and(|b| b.requires_grad());
        let has_bias = bias.is_some();
        let mut inputs = vec![self, weight];
        if let Some(b) = bias {
            inputs.push(b);
        }
        Ok(Tensor::op_output(
            y,
            shape,
            "linear",
            &inputs,
            Box::new(move |g| {
                let dz = match act {
                    Activation::Identity => g.clone(),
                    Activation::Relu => {
                        let y = saved_y.as_ref().expect("ReLU saves its output");
                        g.mul(&y.unary_plain(UnaryOp::Step)?)?
                    }
                    Activation::Gelu => {
                        let z = saved_z.as_ref().expect("GELU saves its pre-activation");
                        g.mul(&z.unary_plain(UnaryOp::GeluGrad)?)?
                    }
                };
                let dz2 = dz.reshape(&[rows, out])?;
                let gx = if gx_need { Some(dz.matmul(&w)?) } else { None };
                let gw = if gw_need {
                    Some(dz2.matmul_t(&x.reshape(&[rows, inp])?, true, false)?)
                } else {
                    None
                };
                let mut grads = vec![gx, gw];
                if has_bias {
                    grads.push(if gb_need {
                        Some(dz2.sum_to(&[out])?)
                    } else {
                        None
                    });
                }
                Ok(grads)
            }),
        ))
    }
}

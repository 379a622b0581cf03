//! Matrix products, 2-D and batched, with transpose flags so that the backward pass never
//! materializes a transpose just to multiply.

use super::{expect_f32, same_device};
use crate::backend::cpu::MatmulSpec;
use crate::shape::numel;
use crate::{Error, Result, Tensor};

impl Tensor {
    /// `self · rhs` for `[.., m, k] · [.., k, n]`; batch dims must match, or one side is 2-D.
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor> {
        self.matmul_t(rhs, false, false)
    }

    /// `op(self) · op(rhs)` where `op` transposes the last two dims when its flag is set.
    pub fn matmul_t(&self, rhs: &Tensor, trans_a: bool, trans_b: bool) -> Result<Tensor> {
        expect_f32("matmul", self)?;
        expect_f32("matmul", rhs)?;
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
        let mut spec = MatmulSpec {
            batch,
            m,
            n,
            k,
            trans_a,
            trans_b,
            stride_a: if ba.is_empty() { 0 } else { m * k },
            stride_b: if bb.is_empty() { 0 } else { k * n },
        };
        // A batched, B shared and A not transposed: one big GEMM of (batch·m) × k.
        if !trans_a && bb.is_empty() && batch > 1 {
            spec = MatmulSpec {
                batch: 1,
                m: batch * m,
                stride_a: 0,
                stride_b: 0,
                ..spec
            };
        }
        let s = self.storage().matmul(&rhs.storage(), &spec)?;
        let mut out_shape = batch_dims;
        out_shape.extend([m, n]);
        let (a, b) = (self.detach(), rhs.detach());
        let (ga_need, gb_need) = (self.requires_grad(), rhs.requires_grad());
        Ok(Tensor::from_op(
            s,
            out_shape,
            "matmul",
            &[self, rhs],
            move |g| {
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

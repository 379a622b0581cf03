//! The optimizer step of many parameters at once.

use crate::backend::UpdateRule;
use crate::storage::{self, Storage};
use crate::{Error, Result, Tensor};
use std::collections::HashSet;
use std::sync::Arc;

impl Tensor {
    /// One optimizer update of every parameter in `params` in place: `grads[i]` is the gradient
    /// of `params[i]`, `states[i]` its state buffers (`[momentum]` for SGD with momentum,
    /// `[m, v]` for Adam, else none) and `rules[i]` its rule. All on one device. On a GPU this
    /// is one kernel launch for all of them (the optimizer ladder's steps 2 to 4; step 1
    /// launches per tensor; see `camel_cuda::kernels::ladder::Family::Optim`).
    /// Not recorded by autograd.
    pub fn apply_updates(
        params: &[Tensor],
        grads: &[Tensor],
        states: &[Vec<Tensor>],
        rules: &[UpdateRule],
    ) -> Result<()> {
        let op = "optimizer step";
        let n = params.len();
        if grads.len() != n || states.len() != n || rules.len() != n {
            return Err(Error::InvalidArgument {
                op,
                msg: format!(
                    "{n} parameters but {} gradients, {} state lists and {} rules",
                    grads.len(),
                    states.len(),
                    rules.len()
                ),
            });
        }
        // Every storage written or read must be distinct (each is locked once below).
        let mut seen = HashSet::new();
        for i in 0..n {
            let p = &params[i];
            let need = match rules[i] {
                UpdateRule::Sgd { momentum, .. } => usize::from(momentum != 0.0),
                UpdateRule::Adam { .. } => 2,
            };
            if states[i].len() < need {
                return Err(Error::InvalidArgument {
                    op,
                    msg: format!(
                        "parameter {i} has {} state buffers, its rule needs {need}",
                        states[i].len()
                    ),
                });
            }
            for t in std::iter::once(&grads[i]).chain(states[i].iter()) {
                if t.shape() != p.shape() {
                    return Err(Error::ShapeMismatch {
                        op,
                        lhs: p.shape().to_vec(),
                        rhs: t.shape().to_vec(),
                        expected: "gradient and state of the parameter's shape".into(),
                    });
                }
            }
            for t in std::iter::once(p)
                .chain(std::iter::once(&grads[i]))
                .chain(states[i].iter())
            {
                if !seen.insert(Arc::as_ptr(t.storage_arc()) as usize) {
                    return Err(Error::InvalidArgument {
                        op,
                        msg: format!(
                            "parameter {i}: a parameter, gradient or state buffer appears twice"
                        ),
                    });
                }
            }
        }
        let mut p_locks: Vec<_> = params
            .iter()
            .map(|t| t.storage_arc().write().expect("storage lock"))
            .collect();
        let g_locks: Vec<_> = grads.iter().map(|t| t.storage()).collect();
        let mut s_locks: Vec<Vec<_>> = states
            .iter()
            .map(|st| {
                st.iter()
                    .map(|t| t.storage_arc().write().expect("storage lock"))
                    .collect()
            })
            .collect();
        let mut ps: Vec<&mut Storage> = p_locks.iter_mut().map(|l| &mut **l).collect();
        let gs: Vec<&Storage> = g_locks.iter().map(|l| &**l).collect();
        let mut ss: Vec<Vec<&mut Storage>> = s_locks
            .iter_mut()
            .map(|st| st.iter_mut().map(|l| &mut **l).collect())
            .collect();
        storage::update_multi(&mut ps, &gs, &mut ss, rules)
    }
}

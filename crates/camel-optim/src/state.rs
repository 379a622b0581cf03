//! The optimizers' state as a state dict: `state.{i}.step` and `state.{i}.{buffer}` for the
//! parameter at index `i`.

use crate::Slots;
use camel_nn::{no_grad_guard, DType, Error, Result, StateDict, Tensor};

/// A copy of `t` with its own storage (the optimizer writes its buffers in place, so a state
/// dict must not share them).
fn copy_of(t: &Tensor) -> Result<Tensor> {
    let c = t.zeros_like()?;
    c.copy_from(t)?;
    Ok(c)
}

impl Slots {
    /// Every parameter's step count and, once created, its buffers named `names`.
    pub(crate) fn state_dict(&self, names: &[&str]) -> Result<StateDict> {
        let _ng = no_grad_guard();
        let mut out = StateDict::new();
        let steps = self.true_steps()?;
        for (i, (p, st)) in self.params.iter().zip(&self.state).enumerate() {
            let dev = p.tensor().device();
            let step = Tensor::from_vec(vec![steps[i] as f32], &[1], dev)?;
            out.insert(format!("state.{i}.step"), step);
            if st.len() == names.len() {
                for (name, buf) in names.iter().zip(st) {
                    out.insert(format!("state.{i}.{name}"), copy_of(buf)?);
                }
            }
        }
        Ok(out)
    }

    /// Checks `state` against the parameters and the buffer names, then replaces every step
    /// count and buffer. Nothing changes on an error.
    pub(crate) fn load_state_dict(
        &mut self,
        op: &'static str,
        names: &[&str],
        state: &StateDict,
    ) -> Result<()> {
        let _ng = no_grad_guard();
        let bad = |msg: String| Error::InvalidArgument { op, msg };
        let n = self.params.len();
        let mut known = std::collections::HashSet::new();
        let mut steps = Vec::with_capacity(n);
        let mut bufs: Vec<Vec<Tensor>> = Vec::with_capacity(n);
        for (i, p) in self.params.iter().enumerate() {
            let pt = p.tensor();
            let key = format!("state.{i}.step");
            let Some(step) = state.get(&key) else {
                return Err(bad(format!(
                    "missing entry {key:?} (the state has {} entries for {n} parameters)",
                    state.len()
                )));
            };
            if step.dtype() != DType::F32 || step.shape() != [1] {
                return Err(bad(format!(
                    "entry {key:?} must be an f32 tensor of shape [1], got {:?} {:?}",
                    step.dtype(),
                    step.shape()
                )));
            }
            let v = step.to_vec()?[0];
            if !(v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= u32::MAX as f32) {
                return Err(bad(format!(
                    "entry {key:?} must be a whole number of steps ≥ 0, got {v}"
                )));
            }
            known.insert(key);
            steps.push(v as u32);
            let keys: Vec<String> = names.iter().map(|b| format!("state.{i}.{b}")).collect();
            let present = keys.iter().filter(|k| state.contains_key(*k)).count();
            if present == 0 {
                bufs.push(Vec::new());
                continue;
            }
            let mut bv = Vec::with_capacity(keys.len());
            for key in keys {
                let Some(t) = state.get(&key) else {
                    return Err(bad(format!(
                        "missing entry {key:?} (parameter {i} has some of its buffers {names:?}, not all)"
                    )));
                };
                if t.shape() != pt.shape() {
                    return Err(Error::ShapeMismatch {
                        op,
                        lhs: pt.shape().to_vec(),
                        rhs: t.shape().to_vec(),
                        expected: format!("entry {key:?} of parameter {i}'s shape"),
                    });
                }
                if t.dtype() != DType::F32 {
                    return Err(bad(format!(
                        "entry {key:?} has dtype {:?}, expected F32",
                        t.dtype()
                    )));
                }
                bv.push(t);
                known.insert(key);
            }
            bufs.push(bv.into_iter().cloned().collect());
        }
        let unexpected: Vec<&String> = state.keys().filter(|k| !known.contains(*k)).collect();
        if !unexpected.is_empty() {
            return Err(bad(format!(
                "unexpected entries {unexpected:?} (the optimizer has {n} parameters, buffers {names:?})"
            )));
        }
        // Copies on each parameter's device, made before anything is replaced.
        let mut new_state = Vec::with_capacity(n);
        for (p, bv) in self.params.iter().zip(&bufs) {
            let dev = p.tensor().device();
            let copies = bv
                .iter()
                .map(|t| copy_of(&t.to(dev)?))
                .collect::<Result<Vec<_>>>()?;
            new_state.push(copies);
        }
        self.set_true_steps(steps)?;
        self.state = new_state;
        Ok(())
    }
}

//! Reverse-mode autograd, define-by-run.
//!
//! An op whose inputs require grad records a [`Node`] on its output: the op's name, its inputs,
//! and a closure computing the inputs' gradients from the output's gradient (the closure captures
//! whatever the backward needs, e.g. the saved inputs). `Tensor::backward` orders the graph
//! topologically, runs each node's closure once, accumulates into leaf tensors' `.grad()`, and
//! frees the graph as it goes. Backward closures run with gradient recording off.
//!
//! Views share their base's storage, so an in-place write (an optimizer step, `copy_from`)
//! between a forward and its backward could change what the backward reads. Every storage
//! counts its in-place writes; a node remembers the counts of its inputs and output when it is
//! recorded, and the backward pass refuses a node whose data has been written since (as
//! PyTorch's version counter does).

use crate::{Error, Result, Tensor};
use std::cell::Cell;
use std::collections::{HashMap, HashSet};

/// Gradients of an op's inputs (None where an input needs none), given the output's gradient.
pub type BackwardFn = Box<dyn Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync>;

/// The record of the op that produced a tensor.
pub struct Node {
    /// Op name, for debugging and error messages.
    pub name: &'static str,
    /// The op's inputs, in the order its backward returns their gradients.
    pub inputs: Vec<Tensor>,
    /// The inputs' storage versions when the op ran.
    pub versions: Vec<u64>,
    /// The output's storage version when the op ran.
    pub own_version: u64,
    /// Computes the inputs' gradients.
    pub backward: BackwardFn,
}

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether ops on this thread currently record the graph.
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Restores the previous grad mode when dropped. Made by [`no_grad_guard`].
pub struct GradModeGuard(bool);

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.0));
    }
}

/// Turn gradient recording off until the guard is dropped (evaluation, optimizer steps).
pub fn no_grad_guard() -> GradModeGuard {
    let prev = GRAD_ENABLED.with(|g| g.replace(false));
    GradModeGuard(prev)
}

/// Run `f` with gradient recording off.
pub fn no_grad<T>(f: impl FnOnce() -> T) -> T {
    let _g = no_grad_guard();
    f()
}

/// Tensors reachable from `root` through nodes, in topological order (inputs before outputs).
fn topo_order(root: &Tensor) -> Vec<Tensor> {
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    // iterative DFS: (tensor, children pushed?)
    let mut stack = vec![(root.clone(), false)];
    while let Some((t, expanded)) = stack.pop() {
        if expanded {
            order.push(t);
            continue;
        }
        if !seen.insert(t.id()) {
            continue;
        }
        stack.push((t.clone(), true));
        if let Some(node) = t.node_guard().as_ref() {
            for inp in &node.inputs {
                if inp.requires_grad() && !seen.contains(&inp.id()) {
                    stack.push((inp.clone(), false));
                }
            }
        }
    }
    order
}

/// Error if the data `node` saved (its inputs, or `out`, its output) was written in place after
/// the op ran.
fn check_versions(out: &Tensor, node: &Node) -> Result<()> {
    let stale = |what: String, t: &Tensor, then: u64| {
        Error::Autograd(format!(
            "{what} of {} (shape {:?}) was modified in place after the op used it (storage version {then} then, {} now); the backward pass would read the new data. Run the optimizer step after backward(), not between the forward pass and backward()",
            node.name,
            t.shape(),
            t.version()
        ))
    };
    if out.version() != node.own_version {
        return Err(stale("the output".into(), out, node.own_version));
    }
    for (i, (t, &v)) in node.inputs.iter().zip(&node.versions).enumerate() {
        if t.version() != v {
            return Err(stale(format!("input {i}"), t, v));
        }
    }
    Ok(())
}

/// Run backward from `root` with the given output gradient.
pub(crate) fn run_backward(root: &Tensor, grad: Tensor) -> Result<()> {
    if !root.requires_grad() {
        return Err(Error::Autograd(format!(
            "backward() on a tensor of shape {:?} that does not require grad (no parameter in its graph needs a gradient)",
            root.shape()
        )));
    }
    let order = topo_order(root);
    let _ng = no_grad_guard();
    let mut grads: HashMap<usize, Tensor> = HashMap::new();
    grads.insert(root.id(), grad);
    for t in order.iter().rev() {
        let Some(g) = grads.remove(&t.id()) else {
            continue;
        };
        if t.is_leaf() {
            t.accumulate_grad(g)?;
            continue;
        }
        let node = t.node_guard().take().ok_or_else(|| {
            Error::Autograd(
                "the graph behind this tensor was already freed: backward() runs once per forward pass".into(),
            )
        })?;
        check_versions(t, &node)?;
        let gs = (node.backward)(&g)?;
        debug_assert_eq!(gs.len(), node.inputs.len(), "backward of {}", node.name);
        for (inp, gi) in node.inputs.iter().zip(gs) {
            let Some(gi) = gi else { continue };
            if !inp.requires_grad() {
                continue;
            }
            if gi.shape() != inp.shape() {
                return Err(Error::Autograd(format!(
                    "backward of {} produced a gradient of shape {:?} for an input of shape {:?}",
                    node.name,
                    gi.shape(),
                    inp.shape()
                )));
            }
            let acc = match grads.remove(&inp.id()) {
                Some(prev) => prev.add(&gi)?,
                None => gi,
            };
            grads.insert(inp.id(), acc);
        }
    }
    Ok(())
}

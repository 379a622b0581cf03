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

use crate::tensor::StorageCell;
use crate::{Error, Result, Tensor};
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// Gradients of an op's inputs (None where an input needs none), given the output's gradient.
pub type BackwardFn = Box<dyn Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync>;

/// The node of an op's output, shared by the output's handles and by the [`Input`] records of
/// the later ops that read it; the backward pass takes the node out.
pub(crate) type NodeCell = Mutex<Option<Node>>;

/// An op's input as its node records it: enough to walk the graph and route the input's
/// gradient, without keeping the input's data alive (PyTorch's graph edges hold no data
/// either; what a backward reads, its closure saves). A leaf is kept whole, as its `.grad()`
/// receives the gradient; the output of an op is kept as its node, its id and shape, and a
/// weak handle on its storage for the in-place check (a storage no one holds any more is
/// read by no backward).
#[derive(Clone)]
pub struct Input {
    id: usize,
    shape: Vec<usize>,
    edge: Edge,
    storage: Weak<StorageCell>,
}

#[derive(Clone)]
enum Edge {
    Leaf(Tensor),
    Op(Arc<NodeCell>),
}

impl Input {
    /// The record of `t` as an op's input (or as the root of a backward pass).
    pub(crate) fn of(t: &Tensor) -> Input {
        let edge = match t.node_cell() {
            Some(cell) => Edge::Op(cell.clone()),
            None => Edge::Leaf(t.clone()),
        };
        Input {
            id: t.id(),
            shape: t.shape().to_vec(),
            edge,
            storage: Arc::downgrade(t.storage_arc()),
        }
    }

    /// Whether gradients flow to this input (an op's output always; a leaf when marked).
    fn requires_grad(&self) -> bool {
        match &self.edge {
            Edge::Leaf(t) => t.requires_grad(),
            Edge::Op(_) => true,
        }
    }

    /// The storage's in-place write count, if anyone still holds the storage.
    fn version(&self) -> Option<u64> {
        match &self.edge {
            Edge::Leaf(t) => Some(t.version()),
            Edge::Op(_) => self.storage.upgrade().map(|s| s.version()),
        }
    }
}

/// The record of the op that produced a tensor.
pub struct Node {
    /// Op name, for debugging and error messages.
    pub name: &'static str,
    /// The op's inputs, in the order its backward returns their gradients.
    pub inputs: Vec<Input>,
    /// The inputs' storage versions when the op ran.
    pub versions: Vec<u64>,
    /// The output's storage version when the op ran.
    pub own_version: u64,
    /// Computes the inputs' gradients.
    pub backward: BackwardFn,
}

/// Graph teardown without recursion: dropping a node drops its inputs' nodes where it held
/// the last handle, and theirs in turn, one stack frame per op of the chain. Instead the
/// inputs' nodes move onto an explicit stack, and each that this drop owns alone gives up its
/// inputs the same way before it is dropped, so a graph of any depth drops in constant stack
/// space.
impl Drop for Node {
    fn drop(&mut self) {
        let ops = |inputs: &mut Vec<Input>| -> Vec<Arc<NodeCell>> {
            inputs
                .drain(..)
                .filter_map(|i| match i.edge {
                    Edge::Op(cell) => Some(cell),
                    Edge::Leaf(_) => None,
                })
                .collect()
        };
        let mut stack = ops(&mut self.inputs);
        while let Some(cell) = stack.pop() {
            if let Ok(m) = Arc::try_unwrap(cell) {
                if let Some(mut node) = m.into_inner().unwrap_or_else(PoisonError::into_inner) {
                    stack.extend(ops(&mut node.inputs));
                    // `node` drops here with no inputs left: only its backward closure goes
                }
            }
        }
    }
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

/// The graph reachable from `root` through nodes, in topological order (inputs before outputs).
fn topo_order(root: &Tensor) -> Vec<Input> {
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    // iterative DFS: (input, children pushed?)
    let mut stack = vec![(Input::of(root), false)];
    while let Some((t, expanded)) = stack.pop() {
        if expanded {
            order.push(t);
            continue;
        }
        if !seen.insert(t.id) {
            continue;
        }
        let children: Vec<Input> = match &t.edge {
            Edge::Op(cell) => lock(cell)
                .as_ref()
                .map(|node| {
                    node.inputs
                        .iter()
                        .filter(|i| i.requires_grad() && !seen.contains(&i.id))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default(),
            Edge::Leaf(_) => Vec::new(),
        };
        stack.push((t, true));
        stack.extend(children.into_iter().map(|c| (c, false)));
    }
    order
}

/// A node's lock (a poisoned lock still yields the node).
fn lock(cell: &NodeCell) -> std::sync::MutexGuard<'_, Option<Node>> {
    cell.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Error if the data `node` saved (its inputs, or `out`, its output) was written in place after
/// the op ran. Data no one holds any more cannot have been read by the backward, so is skipped.
fn check_versions(out: &Input, node: &Node) -> Result<()> {
    let stale = |what: String, t: &Input, then: u64, now: u64| {
        Error::Autograd(format!(
            "{what} of {} (shape {:?}) was modified in place after the op used it (storage version {then} then, {now} now); the backward pass would read the new data. Run the optimizer step after backward(), not between the forward pass and backward()",
            node.name,
            t.shape,
        ))
    };
    if let Some(now) = out.version() {
        if now != node.own_version {
            return Err(stale("the output".into(), out, node.own_version, now));
        }
    }
    for (i, (t, &v)) in node.inputs.iter().zip(&node.versions).enumerate() {
        if let Some(now) = t.version() {
            if now != v {
                return Err(stale(format!("input {i}"), t, v, now));
            }
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
    let mut order = topo_order(root);
    let _ng = no_grad_guard();
    // each op's backward runs in the dtypes its forward chose, whatever scope backward() is in
    let _no_autocast = crate::autocast::autocast_guard(None)?;
    let mut grads: HashMap<usize, Tensor> = HashMap::new();
    grads.insert(root.id(), grad);
    // outputs before inputs; each entry is dropped once done with
    while let Some(t) = order.pop() {
        let Some(g) = grads.remove(&t.id) else {
            continue;
        };
        let cell = match &t.edge {
            Edge::Leaf(leaf) => {
                leaf.accumulate_grad(g)?;
                continue;
            }
            Edge::Op(cell) => cell,
        };
        let node = lock(cell).take().ok_or_else(|| {
            Error::Autograd(
                "the graph behind this tensor was already freed: backward() runs once per forward pass".into(),
            )
        })?;
        check_versions(&t, &node)?;
        let gs = (node.backward)(&g)?;
        drop(g);
        debug_assert_eq!(gs.len(), node.inputs.len(), "backward of {}", node.name);
        for (inp, gi) in node.inputs.iter().zip(gs) {
            let Some(gi) = gi else { continue };
            if !inp.requires_grad() {
                continue;
            }
            if gi.shape() != inp.shape.as_slice() {
                return Err(Error::Autograd(format!(
                    "backward of {} produced a gradient of shape {:?} for an input of shape {:?}",
                    node.name,
                    gi.shape(),
                    inp.shape
                )));
            }
            let acc = match grads.remove(&inp.id) {
                Some(prev) => prev.add(&gi)?,
                None => gi,
            };
            grads.insert(inp.id, acc);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{Device, Result, Tensor};
    use std::sync::Arc;

    #[test]
    fn an_intermediate_no_backward_saved_is_freed_with_its_last_handle() -> Result<()> {
        let w = Tensor::from_vec(vec![1.0, -2.0, 3.0], &[3], Device::Cpu)?.requires_grad_(true)?;
        let a = w.mul(&w)?; // its backward saves w, not a
        let data = Arc::downgrade(a.storage_arc());
        let loss = a.sum()?; // needs only a's shape
        drop(a);
        assert!(data.upgrade().is_none(), "the graph keeps a's data alive");
        loss.backward()?;
        assert_eq!(
            w.grad().expect("w has a gradient").to_vec()?,
            [2.0, -4.0, 6.0]
        );
        Ok(())
    }
}

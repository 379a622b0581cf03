//! `Tensor`: an n-dimensional array on one device — a storage plus a [`Layout`] (shape, strides,
//! offset) — with autograd.
//!
//! A `Tensor` is a cheap handle (an `Arc`); cloning it shares the data, and view ops (`transpose`,
//! `narrow`, `expand`, …) share it too under another layout. Ops never modify their inputs; the
//! only in-place writes are the optimizer update and `copy_from`, and each bumps the storage's
//! version so that a backward pass that would read overwritten data fails instead (see
//! [`crate::autograd`]).

use crate::autograd::{self, BackwardFn, Input, Node, NodeCell};
use crate::backend::cpu::try_vec;
use crate::backend::UpdateRule;
use crate::layout::{checked_numel, Layout};
use crate::storage::{CpuStorage, Storage};
use crate::{DType, Device, Error, Result};
use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

/// A storage shared by a tensor and its views, with a counter of in-place writes to it.
#[derive(Debug)]
pub(crate) struct StorageCell {
    pub(crate) data: RwLock<Storage>,
    version: AtomicU64,
}

impl StorageCell {
    pub(crate) fn new(storage: Storage) -> Arc<StorageCell> {
        Arc::new(StorageCell {
            data: RwLock::new(storage),
            version: AtomicU64::new(0),
        })
    }

    /// Number of in-place writes so far.
    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Record an in-place write (made while holding the write lock).
    pub(crate) fn bump_version(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn write(&self) -> std::sync::RwLockWriteGuard<'_, Storage> {
        self.data.write().expect("storage lock poisoned")
    }

    fn read(&self) -> RwLockReadGuard<'_, Storage> {
        self.data.read().expect("storage lock poisoned")
    }
}

/// A tensor's elements as one dense storage: the shared storage itself when the layout is dense,
/// otherwise a strided copy made for this read.
pub(crate) enum StorageRef<'a> {
    Shared(RwLockReadGuard<'a, Storage>),
    Copied(Storage),
}

impl Deref for StorageRef<'_> {
    type Target = Storage;
    fn deref(&self) -> &Storage {
        match self {
            StorageRef::Shared(g) => g,
            StorageRef::Copied(s) => s,
        }
    }
}

pub(crate) struct TensorImpl {
    id: usize,
    storage: Arc<StorageCell>,
    layout: Layout,
    dtype: DType,
    device: Device,
    is_leaf: bool,
    requires_grad: AtomicBool,
    grad: Mutex<Option<Tensor>>,
    /// The op that produced this tensor (none for a leaf), shared with the graph records of the
    /// ops that read it.
    node: Option<Arc<NodeCell>>,
}

/// A dense tensor on the CPU or a CUDA device.
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<TensorImpl>);

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor(shape={:?}, dtype={:?}, device={}, requires_grad={})",
            self.shape(),
            self.dtype(),
            self.device(),
            self.requires_grad()
        )
    }
}

impl Tensor {
    // ---------------------------------------------------------------- construction (internal)

    fn build(
        storage: Arc<StorageCell>,
        layout: Layout,
        node: Option<Node>,
        requires_grad: bool,
    ) -> Tensor {
        let (dtype, device) = {
            let s = storage.read();
            (s.dtype(), s.device())
        };
        Tensor(Arc::new(TensorImpl {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            storage,
            layout,
            dtype,
            device,
            is_leaf: node.is_none(),
            requires_grad: AtomicBool::new(requires_grad),
            grad: Mutex::new(None),
            node: node.map(|n| Arc::new(Mutex::new(Some(n)))),
        }))
    }

    /// A leaf tensor owning `storage` with the given shape.
    pub(crate) fn from_storage(storage: Storage, shape: Vec<usize>) -> Tensor {
        Tensor::build(
            StorageCell::new(storage),
            Layout::contiguous(&shape),
            None,
            false,
        )
    }

    /// A leaf tensor sharing `storage` (an op's output saved for its own backward).
    pub(crate) fn shared_storage(storage: Arc<StorageCell>, shape: Vec<usize>) -> Tensor {
        Tensor::build(storage, Layout::contiguous(&shape), None, false)
    }

    /// The output of an op: records a graph node when grad is enabled and an input requires grad.
    pub(crate) fn from_op(
        storage: Storage,
        shape: Vec<usize>,
        name: &'static str,
        inputs: &[&Tensor],
        backward: impl Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
    ) -> Tensor {
        Tensor::op_output(
            StorageCell::new(storage),
            shape,
            name,
            inputs,
            Box::new(backward),
        )
    }

    /// Like [`Tensor::from_op`], sharing an existing storage (an output also saved for the
    /// backward), read densely as `shape`.
    pub(crate) fn op_output(
        storage: Arc<StorageCell>,
        shape: Vec<usize>,
        name: &'static str,
        inputs: &[&Tensor],
        backward: BackwardFn,
    ) -> Tensor {
        Tensor::record(storage, Layout::contiguous(&shape), name, inputs, backward)
    }

    /// A view of this tensor's storage under `layout`: no data moves.
    pub(crate) fn view_output(
        &self,
        layout: Layout,
        name: &'static str,
        backward: impl Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
    ) -> Tensor {
        Tensor::record(
            self.0.storage.clone(),
            layout,
            name,
            &[self],
            Box::new(backward),
        )
    }

    /// The output of an op over `storage` and `layout`, with a graph node when grad is enabled
    /// and an input requires grad. The node keeps the storage versions of the inputs and of the
    /// output, which the backward pass checks.
    fn record(
        storage: Arc<StorageCell>,
        layout: Layout,
        name: &'static str,
        inputs: &[&Tensor],
        backward: BackwardFn,
    ) -> Tensor {
        let track = autograd::is_grad_enabled() && inputs.iter().any(|t| t.requires_grad());
        if track {
            let node = Node {
                name,
                inputs: inputs.iter().map(|t| Input::of(t)).collect(),
                versions: inputs.iter().map(|t| t.version()).collect(),
                own_version: storage.version(),
                backward,
            };
            Tensor::build(storage, layout, Some(node), true)
        } else {
            Tensor::build(storage, layout, None, false)
        }
    }

    /// This tensor's elements as one dense storage, in row-major order. The one place where an
    /// op's input is made contiguous: a dense layout reads the storage itself, any other view
    /// is gathered by one strided copy on its device.
    pub(crate) fn storage(&self) -> Result<StorageRef<'_>> {
        let guard = self.0.storage.read();
        let l = &self.0.layout;
        if l.is_dense(guard.len()) {
            return Ok(StorageRef::Shared(guard));
        }
        Ok(StorageRef::Copied(guard.copy_strided(
            l.shape(),
            l.strides(),
            l.offset(),
        )?))
    }

    /// The whole shared storage, whatever this tensor's layout (for views and in-place writes).
    pub(crate) fn storage_arc(&self) -> &Arc<StorageCell> {
        &self.0.storage
    }

    /// The storage read lock, for ops that read strided data themselves (matmul's transposes).
    pub(crate) fn raw_storage(&self) -> RwLockReadGuard<'_, Storage> {
        self.0.storage.read()
    }

    /// Number of in-place writes to this tensor's storage so far.
    pub(crate) fn version(&self) -> u64 {
        self.0.storage.version()
    }

    /// The node of the op that produced this tensor (none for a leaf).
    pub(crate) fn node_cell(&self) -> Option<&Arc<NodeCell>> {
        self.0.node.as_ref()
    }

    // ---------------------------------------------------------------- creation

    /// A tensor from host data; `data.len()` must equal the product of `shape`.
    ///
    /// # Examples
    ///
    /// ```
    /// use camel_core::{Device, Tensor};
    /// let t = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], Device::Cpu)?;
    /// assert_eq!(t.shape(), &[2, 3]);
    /// assert_eq!(t.to_vec()?, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// assert!(Tensor::from_vec(vec![1.0, 2.0], &[3], Device::Cpu).is_err());
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn from_vec(data: Vec<f32>, shape: &[usize], device: Device) -> Result<Tensor> {
        Tensor::from_cpu(CpuStorage::F32(data), shape, device)
    }

    /// An i64 tensor (labels, token ids) from host data.
    pub fn from_vec_i64(data: Vec<i64>, shape: &[usize], device: Device) -> Result<Tensor> {
        Tensor::from_cpu(CpuStorage::I64(data), shape, device)
    }

    /// An f16 tensor from host data (see [`half::f16`], re-exported as `camel_core::f16`).
    pub fn from_vec_f16(data: Vec<half::f16>, shape: &[usize], device: Device) -> Result<Tensor> {
        Tensor::from_cpu(CpuStorage::F16(data), shape, device)
    }

    /// A bf16 tensor from host data (see [`half::bf16`], re-exported as `camel_core::bf16`).
    pub fn from_vec_bf16(data: Vec<half::bf16>, shape: &[usize], device: Device) -> Result<Tensor> {
        Tensor::from_cpu(CpuStorage::BF16(data), shape, device)
    }

    fn from_cpu(data: CpuStorage, shape: &[usize], device: Device) -> Result<Tensor> {
        let len = data.len();
        let n = checked_numel("from_vec", shape)?;
        if len != n {
            return Err(Error::BadShape {
                op: "from_vec",
                shape: shape.to_vec(),
                expected: format!("{n} elements, got {len}"),
            });
        }
        Ok(Tensor::from_storage(
            Storage::from_cpu(data, device)?,
            shape.to_vec(),
        ))
    }

    /// A tensor filled with `value`.
    pub fn full(shape: &[usize], value: f32, device: Device) -> Result<Tensor> {
        let n = checked_numel("full", shape)?;
        Ok(Tensor::from_storage(
            Storage::full(n, value, device)?,
            shape.to_vec(),
        ))
    }

    /// A tensor of zeros.
    ///
    /// # Examples
    ///
    /// ```
    /// use camel_core::{Device, Tensor};
    /// let z = Tensor::zeros(&[2, 2], Device::Cpu)?;
    /// assert_eq!(z.to_vec()?, [0.0; 4]);
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn zeros(shape: &[usize], device: Device) -> Result<Tensor> {
        Tensor::full(shape, 0.0, device)
    }

    /// A tensor of ones.
    pub fn ones(shape: &[usize], device: Device) -> Result<Tensor> {
        Tensor::full(shape, 1.0, device)
    }

    /// Zeros with this tensor's shape and device.
    pub fn zeros_like(&self) -> Result<Tensor> {
        Tensor::zeros(self.shape(), self.device())
    }

    /// Ones with this tensor's shape and device.
    pub fn ones_like(&self) -> Result<Tensor> {
        Tensor::ones(self.shape(), self.device())
    }

    /// `[start, start+step, ...)` up to (excluding) `end`, as f32 (PyTorch's `torch.arange` with
    /// float arguments; the i64 form is [`Tensor::arange`]). The bounds and step must be finite,
    /// the step non-zero and pointing from `start` to `end`.
    pub fn arange_f32(start: f32, end: f32, step: f32, device: Device) -> Result<Tensor> {
        let bad = |why: &str| Error::InvalidArgument {
            op: "arange",
            msg: format!("cannot step from {start} to {end} by {step}: {why}"),
        };
        if !(start.is_finite() && end.is_finite() && step.is_finite()) {
            return Err(bad("start, end and step must be finite"));
        }
        if step == 0.0 {
            return Err(bad("the step must be non-zero"));
        }
        // In f64 so that the count of a wide f32 range is not itself infinite.
        let count = ((end as f64 - start as f64) / step as f64).ceil();
        if count < 0.0 {
            return Err(bad("the step points away from end"));
        }
        if count > (isize::MAX as usize / std::mem::size_of::<f32>()) as f64 {
            return Err(bad("too many elements to allocate"));
        }
        let n = count as usize;
        let (mut data, _) = host_buffer("arange", &[n])?;
        data.extend((0..n).map(|i| start + i as f32 * step));
        Tensor::from_vec(data, &[n], device)
    }

    /// A CPU tensor from an `ndarray` array (copied into row-major order).
    pub fn from_ndarray(a: &ndarray::ArrayD<f32>) -> Tensor {
        let shape = a.shape().to_vec();
        let data = a.iter().cloned().collect();
        Tensor::from_storage(Storage::Cpu(CpuStorage::F32(data)), shape)
    }

    // ---------------------------------------------------------------- reading

    /// Unique id of this tensor (its graph identity).
    pub fn id(&self) -> usize {
        self.0.id
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        self.0.layout.shape()
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.0.layout.rank()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.0.layout.numel()
    }

    /// Size of dimension `d` (negative counts from the end). A scalar (rank 0) has size 1 along
    /// dim 0 / -1, as reductions over it treat it.
    pub fn dim(&self, d: isize) -> Result<usize> {
        let d = crate::shape::normalize_dim("dim", d, self.rank())?;
        Ok(self.shape().get(d).copied().unwrap_or(1))
    }

    /// Shape, strides and offset of this tensor in its storage.
    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }

    /// Elements to step over in the storage to move one along each dimension.
    pub fn strides(&self) -> &[usize] {
        self.0.layout.strides()
    }

    /// Index of this tensor's first element in its storage.
    pub fn storage_offset(&self) -> usize {
        self.0.layout.offset()
    }

    /// Whether the elements lie in row-major order without gaps (a fresh tensor, or a view
    /// such as `narrow` along dim 0 or `reshape`); `transpose` and most `narrow`s are not.
    pub fn is_contiguous(&self) -> bool {
        self.0.layout.is_contiguous()
    }

    /// Whether this tensor and `other` are views of one storage (PyTorch: comparing
    /// `untyped_storage().data_ptr()`).
    pub fn shares_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0.storage, &other.0.storage)
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// Device holding the data.
    pub fn device(&self) -> Device {
        self.0.device
    }

    /// All elements as f32, in row-major order (waits for the device). f16 and bf16 widen
    /// exactly; i64 rounds to the nearest f32.
    pub fn to_vec(&self) -> Result<Vec<f32>> {
        match self.storage()?.to_cpu()? {
            CpuStorage::F32(v) => Ok(v),
            s => Ok(s.to_f32_vec()),
        }
    }

    /// All elements of an i64 tensor.
    pub fn to_vec_i64(&self) -> Result<Vec<i64>> {
        match self.storage()?.to_cpu()? {
            CpuStorage::I64(v) => Ok(v),
            s => Err(Error::DTypeMismatch {
                op: "to_vec_i64",
                expected: DType::I64,
                got: s.dtype(),
            }),
        }
    }

    /// All elements of an f16 tensor, bit for bit.
    pub fn to_vec_f16(&self) -> Result<Vec<half::f16>> {
        match self.storage()?.to_cpu()? {
            CpuStorage::F16(v) => Ok(v),
            s => Err(Error::DTypeMismatch {
                op: "to_vec_f16",
                expected: DType::F16,
                got: s.dtype(),
            }),
        }
    }

    /// All elements of a bf16 tensor, bit for bit.
    pub fn to_vec_bf16(&self) -> Result<Vec<half::bf16>> {
        match self.storage()?.to_cpu()? {
            CpuStorage::BF16(v) => Ok(v),
            s => Err(Error::DTypeMismatch {
                op: "to_vec_bf16",
                expected: DType::BF16,
                got: s.dtype(),
            }),
        }
    }

    /// The single value of a one-element tensor.
    pub fn item(&self) -> Result<f32> {
        if self.numel() != 1 {
            return Err(Error::BadShape {
                op: "item",
                shape: self.shape().to_vec(),
                expected: "exactly one element".into(),
            });
        }
        Ok(self.to_vec()?[0])
    }

    /// The data as an `ndarray` array on the host.
    pub fn to_ndarray(&self) -> Result<ndarray::ArrayD<f32>> {
        let v = self.to_vec()?;
        Ok(ndarray::ArrayD::from_shape_vec(self.shape().to_vec(), v).expect("shape matches data"))
    }

    /// Copy to `device`; gradients flow back to the source device.
    pub fn to(&self, device: Device) -> Result<Tensor> {
        if device == self.device() {
            return Ok(self.clone());
        }
        let src = self.device();
        let storage = self.storage()?.to_device(device)?;
        Ok(Tensor::from_op(
            storage,
            self.shape().to_vec(),
            "to",
            &[self],
            move |g| Ok(vec![Some(g.to(src)?)]),
        ))
    }

    /// Convert to another dtype (PyTorch `.to(dtype)`): f16 and bf16 widen to f32 exactly,
    /// narrowing rounds to nearest (ties to even), float → i64 truncates toward zero and i64 →
    /// f16/bf16 rounds through f32, the same on every device. Between float dtypes it is
    /// differentiable: the gradient is cast back to this tensor's dtype. The same dtype gives
    /// this tensor itself.
    ///
    /// # Examples
    ///
    /// ```
    /// use camel_core::{DType, Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0, 1.0 + 1.0 / 256.0, 65520.0], &[3], Device::Cpu)?;
    /// let h = x.to_dtype(DType::BF16)?;
    /// // bf16 keeps 8 significant bits: 1 + 2⁻⁸ is a tie and rounds to the even 1.0
    /// assert_eq!(h.to_vec()?, [1.0, 1.0, 65536.0]);
    /// assert!(x.to_dtype(DType::F16)?.to_vec()?[2].is_infinite()); // above f16's 65504
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        let src = self.dtype();
        if src == dtype {
            return Ok(self.clone());
        }
        let storage = self.storage()?.cast(dtype)?;
        if !(src.is_float() && dtype.is_float()) {
            return Ok(Tensor::from_storage(storage, self.shape().to_vec()));
        }
        Ok(Tensor::from_op(
            storage,
            self.shape().to_vec(),
            "to_dtype",
            &[self],
            move |g| Ok(vec![Some(g.to_dtype(src)?)]),
        ))
    }

    // ---------------------------------------------------------------- autograd

    /// Whether gradients flow to (or through) this tensor.
    pub fn requires_grad(&self) -> bool {
        self.0.requires_grad.load(Ordering::Relaxed)
    }

    /// Mark a leaf tensor as needing a gradient (parameters). Returns the same tensor.
    pub fn requires_grad_(self, on: bool) -> Result<Tensor> {
        if !self.0.is_leaf {
            return Err(Error::Autograd(
                "requires_grad_ on a non-leaf tensor: call detach() first".into(),
            ));
        }
        if on && !self.dtype().is_float() {
            return Err(Error::Autograd(format!(
                "only float tensors (f32, f16, bf16) can require grad, not {}",
                self.dtype()
            )));
        }
        self.0.requires_grad.store(on, Ordering::Relaxed);
        Ok(self)
    }

    /// True for tensors not produced by a recorded op.
    pub fn is_leaf(&self) -> bool {
        self.0.is_leaf
    }

    /// The accumulated gradient of a leaf, if backward has reached it.
    pub fn grad(&self) -> Option<Tensor> {
        self.0.grad.lock().expect("grad lock").clone()
    }

    /// Drop the accumulated gradient.
    pub fn zero_grad(&self) {
        *self.0.grad.lock().expect("grad lock") = None;
    }

    /// Replace the accumulated gradient (gradient clipping gives a shared gradient its own copy).
    pub(crate) fn set_grad(&self, g: Option<Tensor>) {
        *self.0.grad.lock().expect("grad lock") = g;
    }

    pub(crate) fn accumulate_grad(&self, g: Tensor) -> Result<()> {
        let g = g.detach();
        let mut slot = self.0.grad.lock().expect("grad lock");
        *slot = Some(match slot.take() {
            Some(prev) => prev.add(&g)?,
            None => g,
        });
        Ok(())
    }

    /// A tensor sharing this one's data but cut from the graph.
    pub fn detach(&self) -> Tensor {
        Tensor::build(self.0.storage.clone(), self.0.layout.clone(), None, false)
    }

    /// Back-propagate from this one-element tensor (a loss) into every leaf that requires grad.
    pub fn backward(&self) -> Result<()> {
        if self.numel() != 1 {
            return Err(Error::Autograd(format!(
                "backward() needs a one-element tensor (a loss), got shape {:?}; use backward_with(grad)",
                self.shape()
            )));
        }
        let seed = self.ones_like()?.to_dtype(self.dtype())?;
        autograd::run_backward(self, seed)
    }

    /// Back-propagate with an explicit gradient of this tensor's shape.
    pub fn backward_with(&self, grad: &Tensor) -> Result<()> {
        if grad.shape() != self.shape() {
            return Err(Error::ShapeMismatch {
                op: "backward_with",
                lhs: self.shape().to_vec(),
                rhs: grad.shape().to_vec(),
                expected: "a gradient of the output's shape".into(),
            });
        }
        crate::ops::same_dtype("backward_with", self, grad)?;
        autograd::run_backward(self, grad.detach())
    }

    /// One optimizer update of this parameter in place, with its gradient `grad` and per-parameter
    /// state buffers (momentum, or Adam's m and v). Not recorded by autograd.
    pub fn apply_update(&self, grad: &Tensor, state: &[&Tensor], rule: &UpdateRule) -> Result<()> {
        for t in std::iter::once(grad).chain(state.iter().copied()) {
            if t.shape() != self.shape() {
                return Err(Error::ShapeMismatch {
                    op: "optimizer step",
                    lhs: self.shape().to_vec(),
                    rhs: t.shape().to_vec(),
                    expected: "gradient and state of the parameter's shape".into(),
                });
            }
            if Arc::ptr_eq(&t.0.storage, &self.0.storage) {
                return Err(Error::InvalidArgument {
                    op: "optimizer step",
                    msg: "gradient or state shares the parameter's storage".into(),
                });
            }
        }
        for t in std::iter::once(self).chain(state.iter().copied()) {
            t.expect_whole_storage("optimizer step")?;
        }
        let g = grad.storage()?;
        let mut p = self.0.storage.write();
        let mut locks: Vec<_> = state.iter().map(|t| t.0.storage.write()).collect();
        let refs: Vec<&mut Storage> = locks.iter_mut().map(|l| &mut **l).collect();
        crate::ops::update::update_multi(&mut [&mut *p], &[&*g], &mut [refs], &[*rule], None)?;
        self.0.storage.bump_version();
        for t in state {
            t.0.storage.bump_version();
        }
        Ok(())
    }

    /// Overwrite this tensor's data with `src`'s (same shape and device). Not recorded.
    pub fn copy_from(&self, src: &Tensor) -> Result<()> {
        if src.shape() != self.shape()
            || src.device() != self.device()
            || src.dtype() != self.dtype()
        {
            return Err(Error::ShapeMismatch {
                op: "copy_from",
                lhs: self.shape().to_vec(),
                rhs: src.shape().to_vec(),
                expected: "same shape, dtype and device".into(),
            });
        }
        self.expect_whole_storage("copy_from")?;
        let new = src.storage()?.to_device(self.device())?;
        *self.0.storage.write() = new;
        self.0.storage.bump_version();
        Ok(())
    }

    /// Error unless this tensor is its whole storage in row-major order: an in-place write
    /// replaces the storage, which must then hold nothing but this tensor.
    pub(crate) fn expect_whole_storage(&self, op: &'static str) -> Result<()> {
        let len = self.0.storage.read().len();
        if !self.0.layout.is_dense(len) {
            return Err(Error::InvalidArgument {
                op,
                msg: format!(
                    "writes in place only to a whole tensor, not to a view (shape {:?}, strides {:?}, offset {} of a storage of {len} elements)",
                    self.shape(),
                    self.strides(),
                    self.storage_offset()
                ),
            });
        }
        Ok(())
    }
}

/// An empty host buffer with room for the elements of `shape`, and their count; or an error
/// naming `op` when the element count overflows or the host cannot reserve the memory.
fn host_buffer(op: &'static str, shape: &[usize]) -> Result<(Vec<f32>, usize)> {
    let n = checked_numel(op, shape)?;
    Ok((try_vec(op, n)?, n))
}

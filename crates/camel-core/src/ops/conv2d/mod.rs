//! 2-D convolution for networks over NCHW tensors (PyTorch's `F.conv2d`): any batch, channel
//! counts, kernel size, stride, padding, dilation and groups (depthwise when groups = channels),
//! with the bias and an optional ReLU fused into the forward, and the gradients of the input,
//! the weight and the bias.
//!
//! Both devices compute the product of each group's weight `[O/g, C/g·kH·kW]` with the matrix
//! of the input's patches (one column per output pixel) for f32. The CPU builds that column matrix
//! image by image (im2col) and multiplies with ndarray's GEMM (`cpu.rs`); the camel CPU backend
//! has no thread pool, so images run one after another. The GPU runs the conv2d ladder
//! (`kernels/conv2d`, `CAMEL_CONV2D`): step 1 writes the column matrix and runs camel's SGEMM,
//! step 2 is an implicit GEMM that never writes it, step 3 (the default) adds a backward that
//! stages each image in shared memory (the weight gradient split over the images, summed in a
//! fixed order). Geometry is camel-cuda's [`Conv2dGeom`] on both devices.
//!
//! f16 and bf16 convolutions (and f32 ones inside an autocast scope, whose operands are cast
//! first) write the patches as rows, one per output pixel (`conv2d_unfold_rows`: `cpu.rs`, or
//! `kernels/conv2d/half_rows.cu`), and multiply them with the weight as a `linear` on the matrix
//! products of that dtype (the tensor-core GEMM ladder on the GPU), which sum in f32 and round
//! once; the backward comes from those ops, with the rows' gradient folded back onto the input
//! in f32 (`conv2d_fold_rows`). The rows hold `kH·kW` times the input.

use super::{expect_float, same_device, same_dtype};
use crate::autocast::lower;
use crate::backend::Activation;
use crate::ops::elementwise::UnaryOp;
use crate::storage::{dispatch, Storage};
use crate::tensor::StorageCell;
use crate::{Error, Result, Tensor};
pub use camel_cuda::kernels::conv2d::Conv2dGeom;

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

/// Stride, padding, dilation and groups of [`Tensor::conv2d`] (PyTorch's `F.conv2d` arguments;
/// the default is stride 1, no padding, dilation 1, one group).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dOptions {
    /// Step between output pixels, (vertical, horizontal); each ≥ 1.
    pub stride: (usize, usize),
    /// Zeros added on each side, (vertical, horizontal).
    pub padding: (usize, usize),
    /// Spacing of the kernel taps, (vertical, horizontal); each ≥ 1.
    pub dilation: (usize, usize),
    /// Independent channel groups (≥ 1; must divide both channel counts).
    pub groups: usize,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions {
            stride: (1, 1),
            padding: (0, 0),
            dilation: (1, 1),
            groups: 1,
        }
    }
}

/// The convolution primitives of a backend (`cpu.rs`, `cuda.rs`).
pub(crate) trait Conv2dKernels: Sized {
    /// `act(conv2d(self, w) + bias)` for the geometry `g` (`relu`: the activation is ReLU).
    fn conv2d(&self, w: &Self, bias: Option<&Self>, g: &Conv2dGeom, relu: bool) -> Result<Self>;
    /// The input gradient from the upstream gradient `self` (`[n, o, oh, ow]`).
    fn conv2d_bwd_input(&self, w: &Self, g: &Conv2dGeom) -> Result<Self>;
    /// The weight gradient from the upstream gradient `self` and the input `x`.
    fn conv2d_bwd_weight(&self, x: &Self, g: &Conv2dGeom) -> Result<Self>;
    /// The 16-bit convolution's rows of `self` (f16 or bf16): `[groups][n·oh·ow][c/groups·kh·kw]`,
    /// one row per output pixel holding its patch, 0 in the padding.
    fn conv2d_unfold_rows(&self, g: &Conv2dGeom) -> Result<Self>;
    /// The input gradient from the rows' gradient `self`: each input element sums the entries
    /// that read it, in f32, rounded once to the dtype.
    fn conv2d_fold_rows(&self, g: &Conv2dGeom) -> Result<Self>;
}

impl Storage {
    /// [`Conv2dKernels::conv2d`] on the operands' device.
    pub(crate) fn conv2d(
        &self,
        w: &Storage,
        bias: Option<&Storage>,
        g: &Conv2dGeom,
        relu: bool,
    ) -> Result<Storage> {
        match bias {
            None => dispatch!("conv2d"; x = self, w = w => x.conv2d(w, None, g, relu)),
            Some(b) => dispatch!("conv2d"; x = self, w = w, b = b => x.conv2d(w, Some(b), g, relu)),
        }
    }

    /// [`Conv2dKernels::conv2d_bwd_input`] on the operands' device.
    pub(crate) fn conv2d_bwd_input(&self, w: &Storage, g: &Conv2dGeom) -> Result<Storage> {
        dispatch!("conv2d backward"; dy = self, w = w => dy.conv2d_bwd_input(w, g))
    }

    /// [`Conv2dKernels::conv2d_bwd_weight`] on the operands' device.
    pub(crate) fn conv2d_bwd_weight(&self, x: &Storage, g: &Conv2dGeom) -> Result<Storage> {
        dispatch!("conv2d backward"; dy = self, x = x => dy.conv2d_bwd_weight(x, g))
    }

    /// [`Conv2dKernels::conv2d_unfold_rows`] on the input's device.
    pub(crate) fn conv2d_unfold_rows(&self, g: &Conv2dGeom) -> Result<Storage> {
        dispatch!("conv2d"; x = self => x.conv2d_unfold_rows(g))
    }

    /// [`Conv2dKernels::conv2d_fold_rows`] on the gradient's device.
    pub(crate) fn conv2d_fold_rows(&self, g: &Conv2dGeom) -> Result<Storage> {
        dispatch!("conv2d backward"; d = self => d.conv2d_fold_rows(g))
    }
}

/// The geometry of `x` `[N, C, H, W]` convolved with `w` `[O, C/groups, kH, kW]` (and `bias`
/// `[O]`), or a typed error naming `op`, the shapes and what was expected.
pub fn conv2d_geom(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    o: Conv2dOptions,
) -> Result<Conv2dGeom> {
    expect_float(op, x)?;
    same_dtype(op, x, w)?;
    same_device(op, x, w)?;
    if x.rank() != 4 {
        return Err(Error::BadShape {
            op,
            shape: x.shape().to_vec(),
            expected: "a 4-D input [N, C, H, W]".into(),
        });
    }
    let mismatch = |expected: String| Error::ShapeMismatch {
        op,
        lhs: x.shape().to_vec(),
        rhs: w.shape().to_vec(),
        expected,
    };
    if w.rank() != 4 {
        return Err(mismatch("a 4-D weight [O, C/groups, kH, kW]".into()));
    }
    let bad = |msg: String| Error::InvalidArgument { op, msg };
    let (stride, padding, dilation, groups) = (o.stride, o.padding, o.dilation, o.groups);
    if groups == 0 {
        return Err(bad("groups must be ≥ 1, got 0".into()));
    }
    if stride.0 == 0 || stride.1 == 0 {
        return Err(bad(format!("stride must be ≥ 1, got {stride:?}")));
    }
    if dilation.0 == 0 || dilation.1 == 0 {
        return Err(bad(format!("dilation must be ≥ 1, got {dilation:?}")));
    }
    let (n, c, h, wd) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
    let (oc, wc, kh, kw) = (w.shape()[0], w.shape()[1], w.shape()[2], w.shape()[3]);
    if c == 0 || oc == 0 || kh == 0 || kw == 0 {
        return Err(mismatch(
            "at least one input channel, output channel and kernel row and column".into(),
        ));
    }
    if c % groups != 0 || oc % groups != 0 {
        return Err(mismatch(format!(
            "input channels ({c}) and output channels ({oc}) divisible by groups ({groups})"
        )));
    }
    if wc * groups != c {
        return Err(mismatch(format!(
            "weight [O, C/groups = {}, kH, kW] for {c} input channels in {groups} group(s), got \
             {wc} channels per group",
            c / groups
        )));
    }
    let oh = Conv2dGeom::out_len(h, kh, stride.0, padding.0, dilation.0);
    let ow = Conv2dGeom::out_len(wd, kw, stride.1, padding.1, dilation.1);
    let (Some(oh), Some(ow)) = (oh, ow) else {
        return Err(mismatch(format!(
            "a kernel {kh}×{kw} (dilation {dilation:?}, spanning {}×{}) that fits the padded \
             input {}×{} (padding {padding:?})",
            dilation.0.saturating_mul(kh - 1).saturating_add(1),
            dilation.1.saturating_mul(kw - 1).saturating_add(1),
            h.saturating_add(padding.0.saturating_mul(2)),
            wd.saturating_add(padding.1.saturating_mul(2)),
        )));
    };
    crate::layout::checked_numel(op, &[n, oc, oh, ow])?;
    if let Some(b) = bias {
        same_dtype(op, x, b)?;
        same_device(op, x, b)?;
        if b.shape() != [oc] {
            return Err(Error::ShapeMismatch {
                op,
                lhs: w.shape().to_vec(),
                rhs: b.shape().to_vec(),
                expected: format!("a bias of shape [{oc}] (one per output channel)"),
            });
        }
    }
    Ok(Conv2dGeom {
        n,
        c,
        h,
        w: wd,
        o: oc,
        kh,
        kw,
        sh: stride.0,
        sw: stride.1,
        ph: padding.0,
        pw: padding.1,
        dh: dilation.0,
        dw: dilation.1,
        groups,
        oh,
        ow,
    })
}

impl Tensor {
    /// 2-D convolution of `self` `[N, C, H, W]` with `weight` `[O, C/groups, kH, kW]` plus
    /// `bias` `[O]`: output `[N, O, OH, OW]` with
    /// `OH = ⌊(H + 2·pad − dil·(kH − 1) − 1) / stride⌋ + 1` (and the same for `OW`). PyTorch's
    /// `F.conv2d(x, weight, bias, stride, padding, dilation, groups)`. Differentiable in the
    /// input, the weight and the bias.
    ///
    /// # Examples
    ///
    /// ```
    /// use camel_core::{Conv2dOptions, Device, Tensor};
    /// let x = Tensor::ones(&[1, 1, 3, 3], Device::Cpu)?;
    /// let w = Tensor::ones(&[1, 1, 2, 2], Device::Cpu)?;
    /// let y = x.conv2d(&w, None, Conv2dOptions::default())?;
    /// assert_eq!(y.to_vec()?, [4.0; 4]);
    /// // a kernel larger than the (padded) input is an error, not a panic
    /// assert!(x.conv2d(&Tensor::ones(&[1, 1, 5, 5], Device::Cpu)?, None, Conv2dOptions::default()).is_err());
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn conv2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: Conv2dOptions,
    ) -> Result<Tensor> {
        self.conv2d_impl("conv2d", weight, bias, opts, false)
    }

    /// `relu(conv2d(..))` in one op: on the GPU the ReLU runs in the convolution's epilogue
    /// (step 2 of the conv2d ladder), with no extra pass over the output. The same as
    /// `x.conv2d(w, b, opts)?.relu()`.
    pub fn conv2d_relu(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: Conv2dOptions,
    ) -> Result<Tensor> {
        self.conv2d_impl("conv2d_relu", weight, bias, opts, true)
    }

    fn conv2d_impl(
        &self,
        op: &'static str,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: Conv2dOptions,
        relu: bool,
    ) -> Result<Tensor> {
        if crate::autocast_dtype().is_some() {
            let (x, w) = (lower(self)?, lower(weight)?);
            let b = bias.map(lower).transpose()?;
            let _off = crate::autocast_guard(None)?;
            return x.conv2d_impl(op, &w, b.as_ref(), opts, relu);
        }
        let geom = conv2d_geom(op, self, weight, bias, opts)?;
        if self.dtype().is_half() {
            return self.conv2d_half(weight, bias, &geom, relu);
        }
        let y = {
            let bs = bias.map(|b| b.storage()).transpose()?;
            self.storage()?
                .conv2d(&*weight.storage()?, bs.as_deref(), &geom, relu)?
        };
        let shape = vec![geom.n, geom.o, geom.oh, geom.ow];
        let y = StorageCell::new(y);
        let saved_y = relu.then(|| Tensor::shared_storage(y.clone(), shape.clone()));
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
            op,
            &inputs,
            Box::new(move |g| {
                let dz = match &saved_y {
                    Some(y) => g.mul(&y.unary_plain(UnaryOp::Step)?)?,
                    None => g.clone(),
                };
                let gx = if gx_need {
                    let s = dz.storage()?.conv2d_bwd_input(&*w.storage()?, &geom)?;
                    Some(Tensor::from_storage(s, x.shape().to_vec()))
                } else {
                    None
                };
                let gw = if gw_need {
                    let s = dz.storage()?.conv2d_bwd_weight(&*x.storage()?, &geom)?;
                    Some(Tensor::from_storage(s, w.shape().to_vec()))
                } else {
                    None
                };
                let mut grads = vec![gx, gw];
                if has_bias {
                    grads.push(if gb_need {
                        // Σ over images and pixels: [N, O, P] → [O, P] → [O]
                        let p = geom.oh * geom.ow;
                        Some(
                            dz.reshape(&[geom.n, geom.o, p])?
                                .sum_dim(0, false)?
                                .sum_dim(1, false)?,
                        )
                    } else {
                        None
                    });
                }
                Ok(grads)
            }),
        ))
    }

    /// The f16/bf16 convolution: the patch of every output pixel as a row
    /// ([`Tensor::conv2d_rows`]) times the weight on the tensor-core GEMM ladder, then the
    /// `[N·OH·OW, O]` product moved to NCHW. With one group the product is a `linear`, so the
    /// bias and the activation apply to its f32 sums before their one rounding; with more, one
    /// GEMM batched over the groups, then the bias and the activation as elementwise ops.
    fn conv2d_half(
        &self,
        w: &Tensor,
        bias: Option<&Tensor>,
        g: &Conv2dGeom,
        relu: bool,
    ) -> Result<Tensor> {
        let (n, p, kg, o, og, groups) = (g.n, g.pixels(), g.kg(), g.o, g.og(), g.groups);
        let rows = self.conv2d_rows(g)?;
        let y = if groups == 1 {
            let act = if relu {
                Activation::Relu
            } else {
                Activation::Identity
            };
            rows.reshape(&[n * p, kg])?
                .linear(&w.reshape(&[o, kg])?, bias, act)?
                .reshape(&[n, p, o])?
                .permute(&[0, 2, 1])?
        } else {
            // [groups, N·P, O/groups] → [N, groups, O/groups, P]
            let y = rows
                .matmul_t(&w.reshape(&[groups, og, kg])?, false, true)?
                .reshape(&[groups, n, p, og])?
                .permute(&[1, 0, 3, 2])?
                .contiguous()?
                .reshape(&[n, o, p])?;
            let y = match bias {
                Some(b) => y.add(&b.reshape(&[1, o, 1])?)?,
                None => y,
            };
            if relu {
                y.relu()?
            } else {
                y
            }
        };
        y.contiguous()?.reshape(&[n, o, g.oh, g.ow])
    }

    /// The rows of the 16-bit convolution, `[groups, N·OH·OW, C/groups·kH·kW]`: output pixel
    /// `p`'s patch in group `g` is row `p` of matrix `g`. Differentiable: the backward folds the
    /// rows' gradient back onto the input.
    fn conv2d_rows(&self, g: &Conv2dGeom) -> Result<Tensor> {
        let rows = self.storage()?.conv2d_unfold_rows(g)?;
        let (in_shape, g) = (self.shape().to_vec(), *g);
        Ok(Tensor::from_op(
            rows,
            vec![g.groups, g.n * g.pixels(), g.kg()],
            "conv2d",
            &[self],
            move |d| {
                let s = d.storage()?.conv2d_fold_rows(&g)?;
                Ok(vec![Some(Tensor::from_storage(s, in_shape.clone()))])
            },
        ))
    }
}

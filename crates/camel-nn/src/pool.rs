//! Pooling layers (PyTorch's `nn.MaxPool2d`, `nn.AvgPool2d`, `nn.AdaptiveAvgPool2d(1)`) and
//! [`Flatten`], all without parameters.

use crate::conv::Size2d;
use crate::{Module, TrainingFlag};
use camel_core::{Error, Result, Tensor};
use std::fmt;

/// Checks a pooling window: sizes and strides ≥ 1, padding at most half the window (PyTorch's
/// rule), so that every window holds an input element.
fn check_window(
    op: &'static str,
    k: (usize, usize),
    s: (usize, usize),
    p: (usize, usize),
) -> Result<()> {
    if k.0 == 0 || k.1 == 0 || s.0 == 0 || s.1 == 0 || p.0 > k.0 / 2 || p.1 > k.1 / 2 {
        return Err(Error::InvalidArgument {
            op,
            msg: format!(
                "kernel {k:?} and stride {s:?} must be ≥ 1 and padding {p:?} at most half the kernel"
            ),
        });
    }
    Ok(())
}

/// Max pooling over `kernel` windows (PyTorch's `nn.MaxPool2d`); the backward routes each
/// gradient to its window's first maximum ([`Tensor::max_pool2d`]).
#[derive(Clone)]
pub struct MaxPool2d {
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
    training: TrainingFlag,
}

impl MaxPool2d {
    /// Windows of `kernel`, stride = kernel, no padding (`nn.MaxPool2d(kernel)`).
    pub fn new(kernel: impl Into<Size2d>) -> Result<MaxPool2d> {
        let k = kernel.into();
        MaxPool2d::with_options(k, k, 0)
    }

    /// Windows of `kernel` every `stride`, with `padding` (at most half the window).
    pub fn with_options(
        kernel: impl Into<Size2d>,
        stride: impl Into<Size2d>,
        padding: impl Into<Size2d>,
    ) -> Result<MaxPool2d> {
        let (kernel, stride, padding) = (
            kernel.into().pair(),
            stride.into().pair(),
            padding.into().pair(),
        );
        check_window("MaxPool2d", kernel, stride, padding)?;
        Ok(MaxPool2d {
            kernel,
            stride,
            padding,
            training: TrainingFlag::new(),
        })
    }
}

impl fmt::Debug for MaxPool2d {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MaxPool2d(kernel_size={:?}, stride={:?}, padding={:?})",
            self.kernel, self.stride, self.padding
        )
    }
}

impl Module for MaxPool2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.max_pool2d(self.kernel, self.stride, self.padding)
    }
    fn set_training(&self, on: bool) {
        self.training.set(on)
    }
    fn is_training(&self) -> bool {
        self.training.get()
    }
}

/// Average pooling over `kernel` windows (PyTorch's `nn.AvgPool2d`).
#[derive(Clone)]
pub struct AvgPool2d {
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
    count_include_pad: bool,
    training: TrainingFlag,
}

impl AvgPool2d {
    /// Windows of `kernel`, stride = kernel, no padding (`nn.AvgPool2d(kernel)`).
    pub fn new(kernel: impl Into<Size2d>) -> Result<AvgPool2d> {
        let k = kernel.into();
        AvgPool2d::with_options(k, k, 0, true)
    }

    /// Windows of `kernel` every `stride`, with `padding` (at most half the window); the
    /// padding counts in each window's size when `count_include_pad` (PyTorch's default).
    pub fn with_options(
        kernel: impl Into<Size2d>,
        stride: impl Into<Size2d>,
        padding: impl Into<Size2d>,
        count_include_pad: bool,
    ) -> Result<AvgPool2d> {
        let (kernel, stride, padding) = (
            kernel.into().pair(),
            stride.into().pair(),
            padding.into().pair(),
        );
        check_window("AvgPool2d", kernel, stride, padding)?;
        Ok(AvgPool2d {
            kernel,
            stride,
            padding,
            count_include_pad,
            training: TrainingFlag::new(),
        })
    }
}

impl fmt::Debug for AvgPool2d {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "AvgPool2d(kernel_size={:?}, stride={:?}, padding={:?}",
            self.kernel, self.stride, self.padding
        )?;
        if !self.count_include_pad {
            f.write_str(", count_include_pad=False")?;
        }
        f.write_str(")")
    }
}

impl Module for AvgPool2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.avg_pool2d(
            self.kernel,
            self.stride,
            self.padding,
            self.count_include_pad,
        )
    }
    fn set_training(&self, on: bool) {
        self.training.set(on)
    }
    fn is_training(&self) -> bool {
        self.training.get()
    }
}

/// Global average pooling to `[N, C, 1, 1]` (PyTorch's `nn.AdaptiveAvgPool2d(1)`; other output
/// sizes are not supported).
#[derive(Clone, Default)]
pub struct AdaptiveAvgPool2d {
    training: TrainingFlag,
}

impl AdaptiveAvgPool2d {
    /// Averages each channel's plane to one value.
    pub fn new() -> AdaptiveAvgPool2d {
        AdaptiveAvgPool2d::default()
    }
}

impl fmt::Debug for AdaptiveAvgPool2d {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdaptiveAvgPool2d(output_size=1)")
    }
}

impl Module for AdaptiveAvgPool2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.adaptive_avg_pool2d_1x1()
    }
    fn set_training(&self, on: bool) {
        self.training.set(on)
    }
    fn is_training(&self) -> bool {
        self.training.get()
    }
}

/// Collapses the dims from `start_dim` on into one (PyTorch's `nn.Flatten()`, whose default
/// `start_dim` is 1: `[N, C, H, W]` → `[N, C·H·W]`).
#[derive(Clone)]
pub struct Flatten {
    start_dim: usize,
    training: TrainingFlag,
}

impl Flatten {
    /// Flattens every dim after the batch (`start_dim` 1).
    pub fn new() -> Flatten {
        Flatten::from_dim(1)
    }

    /// Flattens the dims from `start_dim` on.
    pub fn from_dim(start_dim: usize) -> Flatten {
        Flatten {
            start_dim,
            training: TrainingFlag::new(),
        }
    }
}

impl Default for Flatten {
    fn default() -> Self {
        Flatten::new()
    }
}

impl fmt::Debug for Flatten {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Flatten(start_dim={}, end_dim=-1)", self.start_dim)
    }
}

impl Module for Flatten {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.flatten(self.start_dim)
    }
    fn set_training(&self, on: bool) {
        self.training.set(on)
    }
    fn is_training(&self) -> bool {
        self.training.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use camel_core::Device;

    #[test]
    fn layers_pool_and_print_like_pytorch() {
        let x = Tensor::arange(0.0, 32.0, 1.0, Device::Cpu)
            .unwrap()
            .reshape(&[1, 2, 4, 4])
            .unwrap();
        let m = MaxPool2d::new(2).unwrap();
        assert_eq!(
            format!("{m:?}"),
            "MaxPool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))"
        );
        assert_eq!(
            m.forward(&x).unwrap().to_vec().unwrap(),
            [5.0, 7.0, 13.0, 15.0, 21.0, 23.0, 29.0, 31.0]
        );
        let a = AvgPool2d::with_options(2, 2, 0, false).unwrap();
        assert_eq!(
            format!("{a:?}"),
            "AvgPool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), count_include_pad=False)"
        );
        assert_eq!(a.forward(&x).unwrap().to_vec().unwrap()[0], 2.5);
        let g = AdaptiveAvgPool2d::new();
        assert_eq!(format!("{g:?}"), "AdaptiveAvgPool2d(output_size=1)");
        assert_eq!(g.forward(&x).unwrap().to_vec().unwrap(), [7.5, 23.5]);
        let f = Flatten::new();
        assert_eq!(format!("{f:?}"), "Flatten(start_dim=1, end_dim=-1)");
        assert_eq!(f.forward(&x).unwrap().shape(), &[1, 32]);
        assert!(f.named_parameters().is_empty());
    }

    #[test]
    fn windows_that_do_not_fit_are_errors() {
        assert!(MaxPool2d::new(0).is_err());
        assert!(MaxPool2d::with_options(2, 0, 0).is_err());
        let e = MaxPool2d::with_options(3, 1, 2).unwrap_err().to_string();
        assert!(e.starts_with("MaxPool2d") && e.contains("half"), "{e}");
        assert!(AvgPool2d::with_options(2, 2, (0, 2), true).is_err());
        let e = MaxPool2d::new(3)
            .unwrap()
            .forward(&Tensor::zeros(&[1, 1, 2, 2], Device::Cpu).unwrap());
        assert!(e.unwrap_err().to_string().starts_with("max_pool2d"));
    }
}

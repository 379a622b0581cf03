//! [`Conv2d`]: a 2-D convolution layer over NCHW input (PyTorch's `nn.Conv2d`), and
//! [`Size2d`], the `usize` or `(height, width)` that conv and pooling layers take for sizes.

use crate::init::Init;
use crate::{Module, Parameter, TrainingFlag};
use camel_core::{Activation, Conv2dOptions, Device, Error, Generator, Result, Tensor};
use std::fmt;

/// A size along both spatial axes, `(height, width)`: from a `usize` (square) or a pair, as
/// PyTorch's layers take an `int` or a tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size2d(pub usize, pub usize);

impl From<usize> for Size2d {
    fn from(v: usize) -> Self {
        Size2d(v, v)
    }
}

impl From<(usize, usize)> for Size2d {
    fn from((h, w): (usize, usize)) -> Self {
        Size2d(h, w)
    }
}

impl Size2d {
    /// As a `(height, width)` pair.
    pub fn pair(self) -> (usize, usize) {
        (self.0, self.1)
    }
}

/// Options of [`Conv2d::with_options`] (the defaults are PyTorch's).
#[derive(Clone, Copy, Debug)]
pub struct Conv2dLayerOptions {
    /// Step between output pixels, (vertical, horizontal). Default (1, 1).
    pub stride: (usize, usize),
    /// Zeros added on each side. Default (0, 0).
    pub padding: (usize, usize),
    /// Spacing of the kernel taps. Default (1, 1).
    pub dilation: (usize, usize),
    /// Channel groups (depthwise when equal to the input channels). Default 1.
    pub groups: usize,
    /// Add a learned bias. Default true.
    pub bias: bool,
    /// Activation fused into the convolution: `Identity` (default) or `Relu` (on the GPU in the
    /// convolution's epilogue, with no extra pass over the output).
    pub activation: Activation,
    /// Seed of the initialization: `None` (the default) draws from the process-wide generator
    /// ([`camel_core::manual_seed`]); `Some(seed)` from a private one.
    pub seed: Option<u64>,
    /// Device of the parameters.
    pub device: Device,
}

impl Default for Conv2dLayerOptions {
    fn default() -> Self {
        Conv2dLayerOptions {
            stride: (1, 1),
            padding: (0, 0),
            dilation: (1, 1),
            groups: 1,
            bias: true,
            activation: Activation::Identity,
            seed: None,
            device: Device::Cpu,
        }
    }
}

/// `y = act(conv2d(x, W) + b)` for `x` `[N, in, H, W]`, with `W` `[out, in/groups, kH, kW]` and
/// `b` `[out]`, initialized as PyTorch's `nn.Conv2d` (Kaiming-uniform with `a = √5`:
/// U(−1/√fan_in, 1/√fan_in) for both, `fan_in = in/groups · kH · kW`).
#[derive(Clone)]
pub struct Conv2d {
    /// `[out_channels, in_channels / groups, kH, kW]`.
    pub weight: Parameter,
    /// `[out_channels]`, if enabled.
    pub bias: Option<Parameter>,
    in_channels: usize,
    out_channels: usize,
    kernel: (usize, usize),
    opts: Conv2dOptions,
    activation: Activation,
    training: TrainingFlag,
}

impl fmt::Debug for Conv2d {
    /// PyTorch's repr: `Conv2d(1, 6, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2))`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.opts;
        write!(
            f,
            "Conv2d({}, {}, kernel_size={:?}, stride={:?}",
            self.in_channels, self.out_channels, self.kernel, o.stride
        )?;
        if o.padding != (0, 0) {
            write!(f, ", padding={:?}", o.padding)?;
        }
        if o.dilation != (1, 1) {
            write!(f, ", dilation={:?}", o.dilation)?;
        }
        if o.groups != 1 {
            write!(f, ", groups={}", o.groups)?;
        }
        if self.bias.is_none() {
            f.write_str(", bias=False")?;
        }
        if self.activation != Activation::Identity {
            write!(f, ", activation={:?}", self.activation)?;
        }
        f.write_str(")")
    }
}

impl Conv2d {
    /// A layer with PyTorch's defaults (stride 1, no padding, bias), on the CPU, drawn from the
    /// process-wide generator: `nn.Conv2d(in_channels, out_channels, kernel_size)`.
    ///
    /// ```
    /// use camel_nn::{Conv2d, Conv2dLayerOptions, Module, Tensor, Device};
    /// let conv = Conv2d::with_options(1, 6, 5, Conv2dLayerOptions { padding: (2, 2), ..Default::default() })?;
    /// assert_eq!(format!("{conv:?}"), "Conv2d(1, 6, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2))");
    /// let y = conv.forward(&Tensor::zeros(&[3, 1, 28, 28], Device::Cpu)?)?;
    /// assert_eq!(y.shape(), &[3, 6, 28, 28]);
    /// # Ok::<(), camel_nn::Error>(())
    /// ```
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: impl Into<Size2d>,
    ) -> Result<Conv2d> {
        Conv2d::with_options(
            in_channels,
            out_channels,
            kernel,
            Conv2dLayerOptions::default(),
        )
    }

    /// A layer with explicit options (stride, padding, dilation, groups, bias, fused activation,
    /// seed, device).
    pub fn with_options(
        in_channels: usize,
        out_channels: usize,
        kernel: impl Into<Size2d>,
        o: Conv2dLayerOptions,
    ) -> Result<Conv2d> {
        let kernel = kernel.into().pair();
        let bad = |msg: String| Error::InvalidArgument { op: "Conv2d", msg };
        if in_channels == 0 || out_channels == 0 || kernel.0 == 0 || kernel.1 == 0 {
            return Err(bad(format!(
                "channels and kernel size must be ≥ 1, got in={in_channels}, out={out_channels}, \
                 kernel={kernel:?}"
            )));
        }
        if o.groups == 0
            || !in_channels.is_multiple_of(o.groups)
            || !out_channels.is_multiple_of(o.groups)
        {
            return Err(bad(format!(
                "groups ({}) must be ≥ 1 and divide in_channels ({in_channels}) and out_channels \
                 ({out_channels})",
                o.groups
            )));
        }
        if o.stride.0 == 0 || o.stride.1 == 0 || o.dilation.0 == 0 || o.dilation.1 == 0 {
            return Err(bad(format!(
                "stride {:?} and dilation {:?} must be ≥ 1",
                o.stride, o.dilation
            )));
        }
        if !matches!(o.activation, Activation::Identity | Activation::Relu) {
            return Err(bad(format!(
                "the fused activation must be Identity or Relu, got {:?}",
                o.activation
            )));
        }
        let cg = in_channels / o.groups;
        let fan_in = cg * kernel.0 * kernel.1;
        let draw = |g: &mut Generator| -> Result<(Tensor, Option<Tensor>)> {
            let shape = [out_channels, cg, kernel.0, kernel.1];
            let w = Init::TorchDefault.tensor(&shape, fan_in, out_channels, g, o.device)?;
            let b = if o.bias {
                let s = [out_channels];
                Some(Init::TorchDefault.tensor(&s, fan_in, out_channels, g, o.device)?)
            } else {
                None
            };
            Ok((w, b))
        };
        let (w, b) = match o.seed {
            Some(seed) => draw(&mut Generator::new(seed))?,
            None => camel_core::rng::with_global(draw)?,
        };
        Ok(Conv2d {
            weight: Parameter::new(w)?,
            bias: b.map(Parameter::new).transpose()?,
            in_channels,
            out_channels,
            kernel,
            opts: Conv2dOptions {
                stride: o.stride,
                padding: o.padding,
                dilation: o.dilation,
                groups: o.groups,
            },
            activation: o.activation,
            training: TrainingFlag::new(),
        })
    }

    /// Input channels.
    pub fn in_channels(&self) -> usize {
        self.in_channels
    }

    /// Output channels.
    pub fn out_channels(&self) -> usize {
        self.out_channels
    }

    /// Kernel size, (height, width).
    pub fn kernel_size(&self) -> (usize, usize) {
        self.kernel
    }

    /// Stride, padding, dilation and groups, as [`Tensor::conv2d`] takes them.
    pub fn conv_options(&self) -> Conv2dOptions {
        self.opts
    }
}

impl Module for Conv2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let b = self.bias.as_ref().map(|b| b.tensor());
        let w = self.weight.tensor();
        match self.activation {
            Activation::Relu => x.conv2d_relu(&w, b.as_ref(), self.opts),
            _ => x.conv2d(&w, b.as_ref(), self.opts),
        }
    }

    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        let mut v = vec![("weight".to_string(), self.weight.clone())];
        if let Some(b) = &self.bias {
            v.push(("bias".to_string(), b.clone()));
        }
        v
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
    use crate::{testing, Sequential};

    #[test]
    fn parameters_init_and_repr_follow_pytorch() {
        let c = Conv2d::with_options(
            4,
            6,
            (3, 5),
            Conv2dLayerOptions {
                groups: 2,
                seed: Some(7),
                ..Default::default()
            },
        )
        .unwrap();
        let names: Vec<String> = c.named_parameters().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["weight", "bias"]);
        assert_eq!(c.weight.tensor().shape(), &[6, 2, 3, 5]);
        assert_eq!(c.bias.as_ref().unwrap().tensor().shape(), &[6]);
        // U(−1/√fan_in, 1/√fan_in), fan_in = 2·3·5, and not all in a narrower band
        let bound = 1.0 / 30f32.sqrt();
        let w = c.weight.tensor().to_vec().unwrap();
        assert!(w.iter().all(|v| v.abs() <= bound));
        assert!(w.iter().any(|v| v.abs() > 0.8 * bound));
        let again = Conv2d::with_options(
            4,
            6,
            (3, 5),
            Conv2dLayerOptions {
                groups: 2,
                seed: Some(7),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(again.weight.tensor().to_vec().unwrap(), w);
        assert_eq!(
            format!("{c:?}"),
            "Conv2d(4, 6, kernel_size=(3, 5), stride=(1, 1), groups=2)"
        );
        let d = Conv2d::with_options(
            3,
            8,
            3,
            Conv2dLayerOptions {
                stride: (2, 2),
                dilation: (2, 2),
                bias: false,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            format!("{d:?}"),
            "Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), dilation=(2, 2), bias=False)"
        );
        assert_eq!(d.num_parameters(), 8 * 3 * 9);
    }

    #[test]
    fn bad_options_are_errors() {
        let o = Conv2dLayerOptions::default();
        assert!(Conv2d::new(0, 6, 5).is_err());
        assert!(Conv2d::new(1, 6, 0).is_err());
        assert!(Conv2d::with_options(4, 6, 3, Conv2dLayerOptions { groups: 4, ..o }).is_err());
        assert!(Conv2d::with_options(4, 6, 3, Conv2dLayerOptions { groups: 0, ..o }).is_err());
        assert!(Conv2d::with_options(
            4,
            6,
            3,
            Conv2dLayerOptions {
                stride: (0, 1),
                ..o
            }
        )
        .is_err());
        let gelu = Conv2dLayerOptions {
            activation: Activation::Gelu,
            ..o
        };
        let e = Conv2d::with_options(4, 6, 3, gelu).unwrap_err().to_string();
        assert!(e.starts_with("Conv2d") && e.contains("Gelu"), "{e}");
        // an input with the wrong channel count is the op's typed error
        let c = Conv2d::new(3, 2, 3).unwrap();
        let e = c
            .forward(&Tensor::zeros(&[1, 4, 5, 5], Device::Cpu).unwrap())
            .unwrap_err();
        assert!(e.to_string().starts_with("conv2d"), "{e}");
    }

    /// A LeNet-style stack trains on every device: the loss falls over a few SGD steps, and the
    /// fused-ReLU layer gives the unfused one's output.
    #[test]
    fn a_small_cnn_trains_on_every_device() {
        for dev in testing::devices() {
            let opts = |activation| Conv2dLayerOptions {
                padding: (1, 1),
                seed: Some(3),
                device: dev,
                activation,
                ..Default::default()
            };
            let fused = Conv2d::with_options(1, 4, 3, opts(Activation::Relu)).unwrap();
            let plain = Conv2d::with_options(1, 4, 3, opts(Activation::Identity)).unwrap();
            let x = Tensor::randn_seeded(&[5, 1, 8, 8], 1, dev).unwrap();
            let a = fused.forward(&x).unwrap().to_vec().unwrap();
            let b = plain.forward(&x).unwrap().relu().unwrap().to_vec().unwrap();
            for (p, q) in a.iter().zip(&b) {
                assert!((p - q).abs() <= 1e-5, "{dev}: {p} vs {q}");
            }
            let model = Sequential::new()
                .add(fused)
                .add(crate::MaxPool2d::new(2).unwrap())
                .add(crate::Flatten::new())
                .add(
                    crate::Linear::with_options(
                        64,
                        3,
                        crate::LinearOptions {
                            seed: Some(4),
                            device: dev,
                            ..Default::default()
                        },
                    )
                    .unwrap(),
                );
            let y = Tensor::from_vec_i64(vec![0, 1, 2, 1, 0], &[5], dev).unwrap();
            let mut losses = vec![];
            for _ in 0..20 {
                model.zero_grad();
                let loss = model.forward(&x).unwrap().cross_entropy(&y).unwrap();
                losses.push(loss.item().unwrap());
                loss.backward().unwrap();
                for p in model.parameters() {
                    let g = p.grad().unwrap();
                    p.tensor()
                        .copy_from(&p.tensor().sub(&g.mul_scalar(0.1).unwrap()).unwrap())
                        .unwrap();
                }
            }
            assert!(losses[19] < 0.5 * losses[0], "{dev}: {losses:?}");
        }
    }
}

//! Convolutional classifiers of images: LeNet-5 and a small CNN with BatchNorm.
//!
//! Both take `[N, C, H, W]` images, or `[N, C·H·W]` rows of flattened images (the MNIST loader's
//! batches), which they view as images of their input shape without copying.

use camel_nn::{
    Activation, BatchNorm2d, BatchNormOptions, Buffer, Conv2d, Conv2dLayerOptions, Device, Error,
    Flatten, Linear, LinearOptions, MaxPool2d, Module, Parameter, ReLU, Result, Sequential, Tensor,
};
use std::fmt;

/// `x` as `[N, c, h, w]` images: unchanged when it is 4-D, viewed when it is `[N, c·h·w]`.
fn as_images(op: &'static str, x: &Tensor, (c, h, w): (usize, usize, usize)) -> Result<Tensor> {
    match x.shape() {
        [_, cc, hh, ww] if (*cc, *hh, *ww) == (c, h, w) => Ok(x.clone()),
        [n, d] if *d == c * h * w => x.reshape(&[*n, c, h, w]),
        s => Err(Error::BadShape {
            op,
            shape: s.to_vec(),
            expected: format!(
                "[N, {c}, {h}, {w}] images or [N, {}] flattened ones",
                c * h * w
            ),
        }),
    }
}

/// Names prefixed with `prefix.`.
fn prefixed<T>(prefix: &str, v: Vec<(String, T)>) -> Vec<(String, T)> {
    v.into_iter()
        .map(|(n, t)| (format!("{prefix}.{n}"), t))
        .collect()
}

/// Per-layer seeds from one seed, as [`crate::Mlp`] draws them.
fn layer_seed(seed: u64, i: u64) -> Option<u64> {
    Some(seed.wrapping_add(i * 7919))
}

/// LeNet-5 for 28×28 single-channel images (LeCun et al., with ReLU and max pooling as is usual
/// today): Conv 1→6 k5 pad 2 → ReLU → MaxPool 2 → Conv 6→16 k5 → ReLU → MaxPool 2 → flatten →
/// Linear 400→120 → ReLU → Linear 120→84 → ReLU → Linear 84→10. Each ReLU is fused into the
/// layer before it. Parameters `conv1.*`, `conv2.*`, `fc1.*`, `fc2.*`, `fc3.*`.
pub struct LeNet5 {
    conv1: Conv2d,
    pool1: MaxPool2d,
    conv2: Conv2d,
    pool2: MaxPool2d,
    flatten: Flatten,
    fc1: Linear,
    fc2: Linear,
    fc3: Linear,
}

impl LeNet5 {
    /// A LeNet-5 of `classes` outputs, initialized from `seed` (PyTorch's default initialization
    /// for every layer), on `device`.
    pub fn new(classes: usize, seed: u64, device: Device) -> Result<LeNet5> {
        let conv = |i, o, pad, s| {
            Conv2d::with_options(
                i,
                o,
                5,
                Conv2dLayerOptions {
                    padding: (pad, pad),
                    activation: Activation::Relu,
                    seed: layer_seed(seed, s),
                    device,
                    ..Default::default()
                },
            )
        };
        let fc = |i, o, relu: bool, s| {
            Linear::with_options(
                i,
                o,
                LinearOptions {
                    seed: layer_seed(seed, s),
                    device,
                    activation: if relu {
                        Activation::Relu
                    } else {
                        Activation::Identity
                    },
                    init: camel_nn::init::Init::TorchDefault,
                    ..Default::default()
                },
            )
        };
        Ok(LeNet5 {
            conv1: conv(1, 6, 2, 0)?,
            pool1: MaxPool2d::new(2)?,
            conv2: conv(6, 16, 0, 1)?,
            pool2: MaxPool2d::new(2)?,
            flatten: Flatten::new(),
            fc1: fc(400, 120, true, 2)?,
            fc2: fc(120, 84, true, 3)?,
            fc3: fc(84, classes, false, 4)?,
        })
    }

    fn layers(&self) -> [(&'static str, &dyn Module); 8] {
        [
            ("conv1", &self.conv1),
            ("pool1", &self.pool1),
            ("conv2", &self.conv2),
            ("pool2", &self.pool2),
            ("flatten", &self.flatten),
            ("fc1", &self.fc1),
            ("fc2", &self.fc2),
            ("fc3", &self.fc3),
        ]
    }
}

impl fmt::Debug for LeNet5 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "LeNet5(")?;
        for (name, l) in self.layers() {
            writeln!(f, "  ({name}): {l:?}")?;
        }
        write!(f, ")")
    }
}

impl Module for LeNet5 {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = as_images("LeNet5", x, (1, 28, 28))?;
        for (_, l) in self.layers() {
            h = l.forward(&h)?;
        }
        Ok(h)
    }

    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        self.layers()
            .into_iter()
            .flat_map(|(n, l)| prefixed(n, l.named_parameters()))
            .collect()
    }

    fn set_training(&self, on: bool) {
        self.layers().iter().for_each(|(_, l)| l.set_training(on))
    }

    fn is_training(&self) -> bool {
        self.conv1.is_training()
    }
}

/// The shape of a [`SimpleCnn`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SimpleCnnConfig {
    /// Channels of the input images.
    pub in_channels: usize,
    /// Height and width of the (square) input images; each block halves it (rounding down).
    pub image_size: usize,
    /// Output channels of each Conv → BatchNorm → ReLU → MaxPool block.
    pub channels: Vec<usize>,
    /// Width of the classifier's hidden layer.
    pub hidden: usize,
    /// Number of classes.
    pub classes: usize,
}

impl Default for SimpleCnnConfig {
    /// Two blocks of 32 and 64 channels on 28×28 grey images, a hidden layer of 128, 10 classes.
    fn default() -> Self {
        SimpleCnnConfig {
            in_channels: 1,
            image_size: 28,
            channels: vec![32, 64],
            hidden: 128,
            classes: 10,
        }
    }
}

/// A small CNN: blocks of Conv 3×3 pad 1 (no bias: the BatchNorm after it has one) → BatchNorm2d
/// → ReLU → MaxPool 2, then a classifier Flatten → Linear → ReLU → Linear. Parameters and
/// buffers `features.<i>.*` and `classifier.<i>.*` (torchvision's naming).
pub struct SimpleCnn {
    features: Sequential,
    classifier: Sequential,
    config: SimpleCnnConfig,
}

impl SimpleCnn {
    /// The network `config` describes, initialized from `seed`, on `device`.
    pub fn new(config: &SimpleCnnConfig, seed: u64, device: Device) -> Result<SimpleCnn> {
        let c = config;
        let bad = |msg: String| Error::InvalidArgument {
            op: "SimpleCnn",
            msg,
        };
        if c.channels.is_empty() || c.channels.contains(&0) || c.in_channels == 0 {
            return Err(bad(format!(
                "in_channels and at least one block of ≥ 1 channels needed, got {c:?}"
            )));
        }
        if c.image_size >> c.channels.len() == 0 {
            return Err(bad(format!(
                "{} blocks halve a {}×{} image to nothing",
                c.channels.len(),
                c.image_size,
                c.image_size
            )));
        }
        let mut features = Sequential::new();
        let mut cin = c.in_channels;
        for (i, &cout) in c.channels.iter().enumerate() {
            let o = Conv2dLayerOptions {
                padding: (1, 1),
                bias: false,
                seed: layer_seed(seed, i as u64),
                device,
                ..Default::default()
            };
            features.push(Conv2d::with_options(cin, cout, 3, o)?);
            features.push(BatchNorm2d::with_options(
                cout,
                BatchNormOptions {
                    device,
                    ..Default::default()
                },
            )?);
            features.push(ReLU);
            features.push(MaxPool2d::new(2)?);
            cin = cout;
        }
        let side = c.image_size >> c.channels.len();
        let flat = cin * side * side;
        let n = c.channels.len() as u64;
        let fc = |i, o, act, s| {
            Linear::with_options(
                i,
                o,
                LinearOptions {
                    seed: layer_seed(seed, n + s),
                    device,
                    activation: act,
                    init: camel_nn::init::Init::TorchDefault,
                    ..Default::default()
                },
            )
        };
        let classifier = Sequential::new()
            .add(Flatten::new())
            .add(fc(flat, c.hidden, Activation::Relu, 0)?)
            .add(fc(c.hidden, c.classes, Activation::Identity, 1)?);
        Ok(SimpleCnn {
            features,
            classifier,
            config: c.clone(),
        })
    }

    /// The shape it was built with.
    pub fn config(&self) -> &SimpleCnnConfig {
        &self.config
    }
}

impl fmt::Debug for SimpleCnn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SimpleCnn(\n  (features): {:?}\n  (classifier): {:?}\n)",
            self.features, self.classifier
        )
    }
}

impl Module for SimpleCnn {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let c = &self.config;
        let x = as_images("SimpleCnn", x, (c.in_channels, c.image_size, c.image_size))?;
        self.classifier.forward(&self.features.forward(&x)?)
    }

    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        let mut v = prefixed("features", self.features.named_parameters());
        v.extend(prefixed("classifier", self.classifier.named_parameters()));
        v
    }

    fn named_buffers(&self) -> Vec<(String, Buffer)> {
        let mut v = prefixed("features", self.features.named_buffers());
        v.extend(prefixed("classifier", self.classifier.named_buffers()));
        v
    }

    fn set_training(&self, on: bool) {
        self.features.set_training(on);
        self.classifier.set_training(on);
    }

    fn is_training(&self) -> bool {
        self.features.is_training()
    }
}

use crate::init::Init;
use crate::{Module, Parameter, TrainingFlag};
use camel_core::{Activation, Device, Error, Generator, Result, Tensor};
use std::fmt;

/// Options of [`Linear::with_options`].
#[derive(Clone, Copy, Debug)]
pub struct LinearOptions {
    /// Add a learned bias.
    pub bias: bool,
    /// Weight initialization (the bias uses PyTorch's U(−1/√fan_in, 1/√fan_in)).
    pub init: Init,
    /// Seed of the initialization: `None` (the default) draws from the process-wide generator
    /// ([`camel_core::manual_seed`]), so layers built one after another differ; `Some(seed)`
    /// draws from a private generator and gives the same weights every time.
    pub seed: Option<u64>,
    /// Device of the parameters.
    pub device: Device,
    /// Activation applied to the output. On the GPU it is fused into the matrix product's
    /// epilogue together with the bias (one kernel, no extra pass over the output).
    pub activation: Activation,
}

impl Default for LinearOptions {
    fn default() -> Self {
        LinearOptions {
            bias: true,
            init: Init::KaimingUniform,
            seed: None,
            device: Device::Cpu,
            activation: Activation::Identity,
        }
    }
}

/// `y = act(x · Wᵀ + b)`, with `W` of shape `[out, in]`; `x` may have any leading dims. The
/// activation (default none) is set in [`LinearOptions`].
#[derive(Clone)]
pub struct Linear {
    /// `[out_features, in_features]`.
    pub weight: Parameter,
    /// `[out_features]`, if enabled.
    pub bias: Option<Parameter>,
    in_features: usize,
    out_features: usize,
    activation: Activation,
    training: TrainingFlag,
}

impl fmt::Debug for Linear {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Linear(in_features={}, out_features={}, bias={}",
            self.in_features,
            self.out_features,
            self.bias.is_some()
        )?;
        if self.activation != Activation::Identity {
            write!(f, ", activation={:?}", self.activation)?;
        }
        f.write_str(")")
    }
}

impl Linear {
    /// A Kaiming-uniform initialized layer with bias, on the CPU, drawn from the process-wide
    /// generator (PyTorch's `nn.Linear(in_features, out_features)`).
    ///
    /// ```
    /// use camel_nn::{Linear, LinearOptions, Module};
    /// let a = Linear::new(4, 3)?;
    /// let b = Linear::new(4, 3)?; // the generator moved on: other weights
    /// assert_ne!(a.weight.tensor().to_vec()?, b.weight.tensor().to_vec()?);
    /// let c = Linear::with_options(4, 3, LinearOptions { bias: false, seed: Some(1), ..Default::default() })?;
    /// assert_eq!(c.num_parameters(), 12);
    /// # Ok::<(), camel_nn::Error>(())
    /// ```
    pub fn new(in_features: usize, out_features: usize) -> Result<Linear> {
        Linear::with_options(in_features, out_features, LinearOptions::default())
    }

    /// A layer with explicit options (bias, init, seed, device, fused activation).
    pub fn with_options(
        in_features: usize,
        out_features: usize,
        o: LinearOptions,
    ) -> Result<Linear> {
        if in_features == 0 || out_features == 0 {
            return Err(Error::InvalidArgument {
                op: "Linear",
                msg: format!("features must be ≥ 1, got in={in_features}, out={out_features}"),
            });
        }
        let draw = |g: &mut Generator| -> Result<(Tensor, Option<Tensor>)> {
            let w = o.init.tensor(
                &[out_features, in_features],
                in_features,
                out_features,
                g,
                o.device,
            )?;
            let b = if o.bias {
                Some(Init::TorchDefault.tensor(
                    &[out_features],
                    in_features,
                    out_features,
                    g,
                    o.device,
                )?)
            } else {
                None
            };
            Ok((w, b))
        };
        let (w, b) = match o.seed {
            Some(seed) => draw(&mut Generator::new(seed))?,
            None => camel_core::rng::with_global(draw)?,
        };
        let bias = b.map(Parameter::new).transpose()?;
        Ok(Linear {
            weight: Parameter::new(w)?,
            bias,
            in_features,
            out_features,
            activation: o.activation,
            training: TrainingFlag::new(),
        })
    }

    /// Input width.
    pub fn in_features(&self) -> usize {
        self.in_features
    }

    /// The fused activation.
    pub fn activation(&self) -> Activation {
        self.activation
    }

    /// Output width.
    pub fn out_features(&self) -> usize {
        self.out_features
    }
}

impl Module for Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if x.shape().last() != Some(&self.in_features) {
            return Err(Error::ShapeMismatch {
                op: "Linear",
                lhs: x.shape().to_vec(),
                rhs: vec![self.out_features, self.in_features],
                expected: format!("input [.., {}]", self.in_features),
            });
        }
        let b = self.bias.as_ref().map(|b| b.tensor());
        x.linear(&self.weight.tensor(), b.as_ref(), self.activation)
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

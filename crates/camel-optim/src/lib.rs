//! camel-optim: SGD (momentum, weight decay), Adam and AdamW.
//!
//! Each optimizer keeps per-parameter state (momentum, or Adam's first and second moments) on the
//! parameter's device, created on the first step. The update of all parameters is one device
//! primitive ([`camel_nn::Tensor::apply_updates`]): on a GPU, one CUDA kernel launch for the
//! whole model (the multi-tensor kernels of `kernels/optim/`), and nothing is copied to the host.
//!
//! Hyper-parameters are checked when they are set (constructors and setters return `Result`):
//! a learning rate must be finite and > 0 (a schedule may later set it to 0), momentum and betas
//! in [0, 1), eps finite and > 0, weight decay finite and ≥ 0.
//!
//! ```
//! use camel_nn::{Linear, Module};
//! use camel_optim::{Adam, Optimizer, Sgd};
//! let model = Linear::new(3, 2)?;
//! let mut opt = Adam::new(model.parameters(), 1e-3)?.betas(0.9, 0.99)?;
//! opt.zero_grad();
//! assert!(Sgd::new(model.parameters(), f32::NAN).is_err());
//! assert!(Adam::new(model.parameters(), 1e-3)?.betas(2.0, 2.0).is_err());
//! # Ok::<(), camel_nn::Error>(())
//! ```

#![warn(missing_docs)]

use camel_nn::{no_grad_guard, Error, Parameter, Result, Tensor, UpdateRule};

/// Checks one hyper-parameter: `ok` says whether `value` is valid, `want` says what is.
fn check(op: &'static str, name: &str, value: f32, ok: bool, want: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            op,
            msg: format!("{name} must be {want}, got {value}"),
        })
    }
}

/// A learning rate given at construction: finite and > 0.
fn check_lr(op: &'static str, lr: f32) -> Result<()> {
    check(
        op,
        "the learning rate",
        lr,
        lr.is_finite() && lr > 0.0,
        "finite and > 0",
    )
}

/// A learning rate set later (schedules): finite and ≥ 0.
fn check_set_lr(op: &'static str, lr: f32) -> Result<()> {
    check(
        op,
        "the learning rate",
        lr,
        lr.is_finite() && lr >= 0.0,
        "finite and ≥ 0",
    )
}

/// Momentum or an Adam beta: in [0, 1).
fn check_unit(op: &'static str, name: &str, v: f32) -> Result<()> {
    check(op, name, v, (0.0..1.0).contains(&v), "in [0, 1)")
}

/// Weight decay: finite and ≥ 0.
fn check_decay(op: &'static str, wd: f32) -> Result<()> {
    check(
        op,
        "weight decay",
        wd,
        wd.is_finite() && wd >= 0.0,
        "finite and ≥ 0",
    )
}

/// Something that updates parameters from their gradients.
pub trait Optimizer {
    /// Apply one update to every parameter that has a gradient.
    fn step(&mut self) -> Result<()>;
    /// Clear every parameter's gradient.
    fn zero_grad(&self);
    /// The learning rate.
    fn lr(&self) -> f32;
    /// Change the learning rate (schedules); it must be finite and ≥ 0.
    fn set_lr(&mut self, lr: f32) -> Result<()>;
}

/// Parameters with their lazily created state buffers.
struct Slots {
    params: Vec<Parameter>,
    state: Vec<Vec<Tensor>>,
    /// Updates applied to each parameter so far (Adam's bias correction counts per parameter,
    /// as in PyTorch: a parameter that first gets a gradient at step 3 is at its step 1).
    steps: Vec<u32>,
}

impl Slots {
    fn new(params: Vec<Parameter>) -> Slots {
        let n = params.len();
        Slots {
            params,
            state: vec![Vec::new(); n],
            steps: vec![0; n],
        }
    }

    fn zero_grad(&self) {
        self.params.iter().for_each(|p| p.zero_grad());
    }

    /// Apply `rule(t)` to every parameter with a gradient, `t` being that parameter's own
    /// 1-based update count, with `nbuf` state buffers each. All parameters go to the device
    /// in one call ([`Tensor::apply_updates`]): on a GPU, one kernel launch for the whole model.
    fn step(&mut self, nbuf: usize, rule: impl Fn(u32) -> UpdateRule) -> Result<()> {
        let _ng = no_grad_guard();
        // Grouped by device (a model normally lives on one).
        let mut groups: Vec<(camel_nn::Device, Batch)> = Vec::new();
        for ((p, st), t_p) in self
            .params
            .iter()
            .zip(self.state.iter_mut())
            .zip(self.steps.iter_mut())
        {
            let t = p.tensor();
            let Some(g) = t.grad() else { continue };
            if st.len() != nbuf || st.first().is_some_and(|s| s.device() != t.device()) {
                *st = (0..nbuf).map(|_| t.zeros_like()).collect::<Result<_>>()?;
            }
            *t_p += 1;
            let dev = t.device();
            let i = match groups.iter().position(|(d, _)| *d == dev) {
                Some(i) => i,
                None => {
                    groups.push((dev, Batch::default()));
                    groups.len() - 1
                }
            };
            let b = &mut groups[i].1;
            b.params.push(t);
            b.grads.push(g);
            b.states.push(st.clone());
            b.rules.push(rule(*t_p));
        }
        for (_, b) in groups {
            Tensor::apply_updates(&b.params, &b.grads, &b.states, &b.rules)?;
        }
        Ok(())
    }
}

/// The parameters of one device updated together.
#[derive(Default)]
struct Batch {
    params: Vec<Tensor>,
    grads: Vec<Tensor>,
    states: Vec<Vec<Tensor>>,
    rules: Vec<UpdateRule>,
}

/// Stochastic gradient descent with optional momentum and L2 weight decay:
/// `buf = μ·buf + g + λ·p; p −= lr·buf`.
///
/// # Examples
///
/// ```
/// use camel_nn::{Device, Linear, Module, Tensor};
/// use camel_optim::{Optimizer, Sgd};
/// let model = Linear::new(3, 1)?;
/// let mut opt = Sgd::new(model.parameters(), 0.1)?.momentum(0.9)?;
/// let x = Tensor::ones(&[4, 3], Device::Cpu)?;
/// let before = model.forward(&x)?.sum()?.item()?;
/// opt.zero_grad();
/// model.forward(&x)?.sum()?.backward()?;
/// opt.step()?;
/// assert!(model.forward(&x)?.sum()?.item()? < before);
/// # Ok::<(), camel_nn::Error>(())
/// ```
pub struct Sgd {
    slots: Slots,
    lr: f32,
    momentum: f32,
    weight_decay: f32,
}

impl Sgd {
    /// Plain SGD (PyTorch's `optim.SGD(params, lr)`); `lr` must be finite and > 0.
    pub fn new(params: Vec<Parameter>, lr: f32) -> Result<Sgd> {
        check_lr("Sgd", lr)?;
        Ok(Sgd {
            slots: Slots::new(params),
            lr,
            momentum: 0.0,
            weight_decay: 0.0,
        })
    }

    /// Set the momentum μ, in [0, 1) (0 disables the buffer).
    pub fn momentum(mut self, m: f32) -> Result<Sgd> {
        check_unit("Sgd", "momentum", m)?;
        self.momentum = m;
        Ok(self)
    }

    /// Set the L2 weight decay λ, finite and ≥ 0.
    pub fn weight_decay(mut self, wd: f32) -> Result<Sgd> {
        check_decay("Sgd", wd)?;
        self.weight_decay = wd;
        Ok(self)
    }

    /// The momentum μ.
    pub fn momentum_value(&self) -> f32 {
        self.momentum
    }

    /// The weight decay λ.
    pub fn weight_decay_value(&self) -> f32 {
        self.weight_decay
    }
}

impl Optimizer for Sgd {
    fn step(&mut self) -> Result<()> {
        let rule = UpdateRule::Sgd {
            lr: self.lr,
            momentum: self.momentum,
            weight_decay: self.weight_decay,
        };
        let nbuf = usize::from(self.momentum != 0.0);
        self.slots.step(nbuf, |_| rule)
    }
    fn zero_grad(&self) {
        self.slots.zero_grad()
    }
    fn lr(&self) -> f32 {
        self.lr
    }
    fn set_lr(&mut self, lr: f32) -> Result<()> {
        check_set_lr("Sgd", lr)?;
        self.lr = lr;
        Ok(())
    }
}

/// Adam with bias correction; with `decoupled` weight decay it is AdamW.
///
/// # Examples
///
/// ```
/// use camel_nn::{Device, Linear, Module, Tensor};
/// use camel_optim::{Adam, Optimizer};
/// let model = Linear::new(3, 1)?;
/// let mut opt = Adam::adamw(model.parameters(), 1e-2, 0.01)?;
/// let x = Tensor::ones(&[4, 3], Device::Cpu)?;
/// let before = model.forward(&x)?.sum()?.item()?;
/// opt.zero_grad();
/// model.forward(&x)?.sum()?.backward()?;
/// opt.step()?;
/// assert!(model.forward(&x)?.sum()?.item()? < before);
/// # Ok::<(), camel_nn::Error>(())
/// ```
pub struct Adam {
    slots: Slots,
    lr: f32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    decoupled: bool,
}

impl Adam {
    /// Adam with PyTorch's defaults (β = 0.9, 0.999; ε = 1e-8; no weight decay); `lr` must be
    /// finite and > 0.
    pub fn new(params: Vec<Parameter>, lr: f32) -> Result<Adam> {
        check_lr("Adam", lr)?;
        Ok(Adam {
            slots: Slots::new(params),
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
        })
    }

    /// AdamW: decoupled weight decay (PyTorch's default 0.01), finite and ≥ 0.
    pub fn adamw(params: Vec<Parameter>, lr: f32, weight_decay: f32) -> Result<Adam> {
        check_lr("AdamW", lr)?;
        check_decay("AdamW", weight_decay)?;
        Ok(Adam {
            weight_decay,
            decoupled: true,
            ..Adam::new(params, lr)?
        })
    }

    fn name(&self) -> &'static str {
        if self.decoupled {
            "AdamW"
        } else {
            "Adam"
        }
    }

    /// Set β₁ and β₂, each in [0, 1).
    pub fn betas(mut self, b1: f32, b2: f32) -> Result<Adam> {
        check_unit(self.name(), "beta1", b1)?;
        check_unit(self.name(), "beta2", b2)?;
        self.beta1 = b1;
        self.beta2 = b2;
        Ok(self)
    }

    /// Set ε (added to the denominator), finite and > 0.
    pub fn eps(mut self, eps: f32) -> Result<Adam> {
        check(
            self.name(),
            "eps",
            eps,
            eps.is_finite() && eps > 0.0,
            "finite and > 0",
        )?;
        self.eps = eps;
        Ok(self)
    }

    /// Set the weight decay (L2 for Adam, decoupled for AdamW), finite and ≥ 0.
    pub fn weight_decay(mut self, wd: f32) -> Result<Adam> {
        check_decay(self.name(), wd)?;
        self.weight_decay = wd;
        Ok(self)
    }

    /// β₁ and β₂.
    pub fn betas_value(&self) -> (f32, f32) {
        (self.beta1, self.beta2)
    }

    /// ε.
    pub fn eps_value(&self) -> f32 {
        self.eps
    }

    /// The weight decay.
    pub fn weight_decay_value(&self) -> f32 {
        self.weight_decay
    }
}

/// AdamW is Adam with decoupled weight decay; see [`Adam::adamw`].
pub type AdamW = Adam;

impl Optimizer for Adam {
    fn step(&mut self) -> Result<()> {
        let (lr, beta1, beta2, eps, weight_decay, decoupled) = (
            self.lr,
            self.beta1,
            self.beta2,
            self.eps,
            self.weight_decay,
            self.decoupled,
        );
        self.slots.step(2, |t| UpdateRule::Adam {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            bc1: (1.0 - f64::from(beta1).powi(t as i32)) as f32,
            bc2: (1.0 - f64::from(beta2).powi(t as i32)) as f32,
        })
    }
    fn zero_grad(&self) {
        self.slots.zero_grad()
    }
    fn lr(&self) -> f32 {
        self.lr
    }
    fn set_lr(&mut self, lr: f32) -> Result<()> {
        check_set_lr(self.name(), lr)?;
        self.lr = lr;
        Ok(())
    }
}

//! camel-optim: SGD (momentum, weight decay), Adam and AdamW with parameter groups,
//! learning-rate schedules ([`LrSchedule`]), gradient clipping by global norm
//! ([`clip_grad_norm`]), dynamic loss scaling for f16 training ([`GradScaler`]), the
//! optimizers' state ([`Optimizer::state_dict`]) and checkpoints of a model with its optimizer
//! ([`save_checkpoint`], [`load_checkpoint`]).
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

mod checkpoint;
mod clip;
mod scaler;
mod schedule;
mod state;

pub use checkpoint::{load_checkpoint, save_checkpoint, save_checkpoint_with};
pub use clip::clip_grad_norm;
pub use scaler::GradScaler;
pub use schedule::LrSchedule;

use camel_nn::{no_grad_guard, Error, Parameter, Result, StateDict, StepGuard, Tensor, UpdateRule};

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
    /// [`Optimizer::step`] guarded on the device, as [`GradScaler::step`] runs it: nothing
    /// changes when `found_inf` (a `[1]` f32 tensor on the parameters' device) is not 0, and
    /// the step counts leave out the `skipped` steps (`[1]` f32, counted by the scaler), all
    /// without a host read.
    fn step_guarded(&mut self, found_inf: &Tensor, skipped: &Tensor) -> Result<()>;
    /// The parameters updated, in the order given at construction, duplicates removed.
    fn params(&self) -> &[Parameter];
    /// Clear every parameter's gradient.
    fn zero_grad(&self);
    /// The learning rate.
    fn lr(&self) -> f32;
    /// Change the learning rate (schedules); it must be finite and ≥ 0.
    fn set_lr(&mut self, lr: f32) -> Result<()>;
    /// The optimizer's state, as PyTorch's `optimizer.state_dict()["state"]`: for the parameter
    /// at index `i` (in the order given at construction, duplicates removed),
    /// `state.{i}.step` (its update count, a `[1]` tensor) and its buffers once created
    /// (`state.{i}.momentum_buffer` for SGD with momentum; `state.{i}.exp_avg` and
    /// `state.{i}.exp_avg_sq` for Adam), each a copy on the parameter's device.
    fn state_dict(&self) -> Result<StateDict>;
    /// Restores a state from [`Optimizer::state_dict`]: every parameter's step count and
    /// buffers, copied to the parameter's device. A missing, unexpected, wrongly shaped or
    /// non-f32 entry, or a step that is not a whole number ≥ 0, is an error naming the entry,
    /// and then nothing changes.
    fn load_state_dict(&mut self, state: &StateDict) -> Result<()>;
}

/// Parameters that share one weight decay (PyTorch's `param_groups` entries), for
/// [`Adam::adamw_groups`]; [`decay_groups`] builds nanoGPT's two.
#[derive(Clone, Debug)]
pub struct ParamGroup {
    /// The group's parameters.
    pub params: Vec<Parameter>,
    /// Its weight decay (decoupled for AdamW), finite and ≥ 0.
    pub weight_decay: f32,
}

/// nanoGPT's parameter groups: every parameter of rank ≥ 2 (the matrices of `Linear`,
/// embeddings) decayed by `weight_decay`, the others (biases, LayerNorm gains) not, in that
/// order. A parameter listed under several names (tied weights) is taken once.
///
/// ```
/// use camel_nn::{Linear, Module};
/// use camel_optim::{decay_groups, Adam};
/// let model = Linear::new(3, 2)?;
/// let groups = decay_groups(model.named_parameters(), 0.1);
/// assert_eq!((groups[0].params.len(), groups[1].params.len()), (1, 1));
/// let opt = Adam::adamw_groups(groups, 1e-3)?;
/// # Ok::<(), camel_nn::Error>(())
/// ```
pub fn decay_groups(named: Vec<(String, Parameter)>, weight_decay: f32) -> Vec<ParamGroup> {
    let mut seen = std::collections::HashSet::new();
    let (mut decay, mut no_decay) = (Vec::new(), Vec::new());
    for (_, p) in named {
        if !seen.insert(p.id()) {
            continue;
        }
        if p.tensor().rank() >= 2 {
            decay.push(p);
        } else {
            no_decay.push(p);
        }
    }
    vec![
        ParamGroup {
            params: decay,
            weight_decay,
        },
        ParamGroup {
            params: no_decay,
            weight_decay: 0.0,
        },
    ]
}

/// Parameters with their weight decay and their lazily created state buffers.
struct Slots {
    params: Vec<Parameter>,
    /// Each parameter's weight decay (its group's).
    wd: Vec<f32>,
    state: Vec<Vec<Tensor>>,
    /// Updates applied to each parameter so far (Adam's bias correction counts per parameter,
    /// as in PyTorch: a parameter that first gets a gradient at step 3 is at its step 1).
    /// After guarded steps these count the skipped steps too, from the value of `skipped` when
    /// the parameter's first update came: its true count is then its entry minus `skipped`.
    steps: Vec<u32>,
    /// The device counter of skipped steps of the last guarded step ([`GradScaler`]'s).
    skipped: Option<Tensor>,
}

impl Slots {
    /// Slots of `params` (a parameter listed twice is kept once, as PyTorch's
    /// `model.parameters()` does), each with weight decay `wd`.
    fn new(params: Vec<Parameter>, wd: f32) -> Slots {
        let mut seen = std::collections::HashSet::new();
        let params: Vec<Parameter> = params.into_iter().filter(|p| seen.insert(p.id())).collect();
        let n = params.len();
        Slots {
            params,
            wd: vec![wd; n],
            state: vec![Vec::new(); n],
            steps: vec![0; n],
            skipped: None,
        }
    }

    /// The skipped steps counted by `self.skipped` (0 without one), read from the device.
    fn skipped_now(&self) -> Result<u32> {
        match &self.skipped {
            Some(k) => Ok(k.item()? as u32),
            None => Ok(0),
        }
    }

    /// Counts the steps against `counter` from now on: the entries of parameters already
    /// updated move from the old counter's value to the new one's. Reads both on the host, but
    /// only when the counter changes (the first guarded step, or a switch of scaler or back to
    /// unguarded steps), never on every step.
    fn count_against(&mut self, counter: Option<&Tensor>) -> Result<()> {
        if self.skipped.as_ref().map(Tensor::id) == counter.map(Tensor::id) {
            return Ok(());
        }
        let old = self.skipped_now()?;
        self.skipped = counter.cloned();
        let new = self.skipped_now()?;
        for s in self.steps.iter_mut().filter(|s| **s > 0) {
            *s = s.saturating_sub(old) + new;
        }
        Ok(())
    }

    /// Each parameter's true step count (its entry minus the skipped steps).
    pub(crate) fn true_steps(&self) -> Result<Vec<u32>> {
        let k = self.skipped_now()?;
        Ok(self
            .steps
            .iter()
            .map(|&s| if s > 0 { s.saturating_sub(k) } else { 0 })
            .collect())
    }

    /// Sets the true step counts (from a state dict).
    pub(crate) fn set_true_steps(&mut self, steps: Vec<u32>) -> Result<()> {
        let k = self.skipped_now()?;
        self.steps = steps
            .into_iter()
            .map(|s| if s > 0 { s + k } else { 0 })
            .collect();
        Ok(())
    }

    fn zero_grad(&self) {
        self.params.iter().for_each(|p| p.zero_grad());
    }

    /// Apply `rule(t, wd)` to every parameter with a gradient, `t` being that parameter's own
    /// 1-based update count and `wd` its weight decay, with `nbuf` state buffers each. All
    /// parameters go to the device in one call ([`Tensor::apply_updates`]): on a GPU, one
    /// kernel launch for the whole model (the weight decay travels per tensor). With a `guard`
    /// (`found_inf`, `skipped`), the update is [`Tensor::apply_updates_guarded`]'s.
    fn step(
        &mut self,
        nbuf: usize,
        rule: impl Fn(u32, f32) -> UpdateRule,
        guard: Option<(&Tensor, &Tensor)>,
    ) -> Result<()> {
        let _ng = no_grad_guard();
        self.count_against(guard.map(|(_, k)| k))?;
        // A parameter's first guarded update starts its count at the skipped steps so far
        // (read once, only in a step where some parameter has its first update).
        let mut base: Option<u32> = None;
        // Grouped by device (a model normally lives on one).
        let mut groups: Vec<(camel_nn::Device, Batch)> = Vec::new();
        for (((p, st), t_p), &wd) in self
            .params
            .iter()
            .zip(self.state.iter_mut())
            .zip(self.steps.iter_mut())
            .zip(&self.wd)
        {
            let t = p.tensor();
            let Some(g) = t.grad() else { continue };
            if st.len() != nbuf || st.first().is_some_and(|s| s.device() != t.device()) {
                *st = (0..nbuf).map(|_| t.zeros_like()).collect::<Result<_>>()?;
            }
            if *t_p == 0 && guard.is_some() {
                *t_p = match base {
                    Some(b) => b,
                    None => *base.insert(match guard {
                        Some((_, k)) => k.item()? as u32,
                        None => 0,
                    }),
                };
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
            b.rules.push(rule(*t_p, wd));
            b.steps.push(*t_p as f32);
        }
        for (_, b) in groups {
            match guard {
                Some((found_inf, skipped)) => Tensor::apply_updates_guarded(
                    &b.params,
                    &b.grads,
                    &b.states,
                    &b.rules,
                    StepGuard {
                        found_inf,
                        skipped,
                        steps: &b.steps,
                    },
                )?,
                None => Tensor::apply_updates(&b.params, &b.grads, &b.states, &b.rules)?,
            }
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
    /// Each parameter's step count as a guarded update takes it.
    steps: Vec<f32>,
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
            slots: Slots::new(params, 0.0),
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
        self.slots.wd.iter_mut().for_each(|w| *w = wd);
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

    /// The names of the state buffers in [`Optimizer::state_dict`] (PyTorch's).
    fn buffer_names(&self) -> &'static [&'static str] {
        if self.momentum != 0.0 {
            &["momentum_buffer"]
        } else {
            &[]
        }
    }
}

impl Sgd {
    fn step_with(&mut self, guard: Option<(&Tensor, &Tensor)>) -> Result<()> {
        let (lr, momentum) = (self.lr, self.momentum);
        let nbuf = usize::from(momentum != 0.0);
        let rule = |_, weight_decay| UpdateRule::Sgd {
            lr,
            momentum,
            weight_decay,
        };
        self.slots.step(nbuf, rule, guard)
    }
}

impl Optimizer for Sgd {
    fn step(&mut self) -> Result<()> {
        self.step_with(None)
    }
    fn step_guarded(&mut self, found_inf: &Tensor, skipped: &Tensor) -> Result<()> {
        self.step_with(Some((found_inf, skipped)))
    }
    fn params(&self) -> &[Parameter] {
        &self.slots.params
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
    fn state_dict(&self) -> Result<StateDict> {
        self.slots.state_dict(self.buffer_names())
    }
    fn load_state_dict(&mut self, state: &StateDict) -> Result<()> {
        let names = self.buffer_names();
        self.slots
            .load_state_dict("Sgd::load_state_dict", names, state)
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
            slots: Slots::new(params, 0.0),
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
            slots: Slots::new(params, weight_decay),
            weight_decay,
            decoupled: true,
            ..Adam::new(Vec::new(), lr)?
        })
    }

    /// AdamW over parameter groups, each with its own decoupled weight decay (PyTorch's
    /// `AdamW([{"params": …, "weight_decay": …}, …], lr)`; nanoGPT's groups come from
    /// [`decay_groups`]). On a GPU all groups still update in one kernel launch. A parameter in
    /// two groups, or a decay that is not finite and ≥ 0, is an error.
    pub fn adamw_groups(groups: Vec<ParamGroup>, lr: f32) -> Result<Adam> {
        check_lr("AdamW", lr)?;
        let mut seen = std::collections::HashSet::new();
        let (mut params, mut wd) = (Vec::new(), Vec::new());
        for (gi, g) in groups.iter().enumerate() {
            check_decay("AdamW", g.weight_decay)?;
            for p in &g.params {
                if !seen.insert(p.id()) {
                    return Err(Error::InvalidArgument {
                        op: "AdamW",
                        msg: format!(
                            "parameter group {gi} lists a parameter (shape {:?}) that an earlier group or entry lists too",
                            p.tensor().shape()
                        ),
                    });
                }
                params.push(p.clone());
                wd.push(g.weight_decay);
            }
        }
        let mut opt = Adam::adamw(params, lr, groups.first().map_or(0.0, |g| g.weight_decay))?;
        opt.slots.wd = wd;
        Ok(opt)
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

    /// Set the weight decay (L2 for Adam, decoupled for AdamW) of every parameter, finite and
    /// ≥ 0.
    pub fn weight_decay(mut self, wd: f32) -> Result<Adam> {
        check_decay(self.name(), wd)?;
        self.weight_decay = wd;
        self.slots.wd.iter_mut().for_each(|w| *w = wd);
        Ok(self)
    }

    /// Each parameter's weight decay, in the optimizer's parameter order (its group's, with
    /// [`Adam::adamw_groups`]).
    pub fn weight_decays(&self) -> &[f32] {
        &self.slots.wd
    }

    /// β₁ and β₂.
    pub fn betas_value(&self) -> (f32, f32) {
        (self.beta1, self.beta2)
    }

    /// ε.
    pub fn eps_value(&self) -> f32 {
        self.eps
    }

    /// The weight decay given at construction or by [`Adam::weight_decay`] (the first group's
    /// with [`Adam::adamw_groups`]; see [`Adam::weight_decays`]).
    pub fn weight_decay_value(&self) -> f32 {
        self.weight_decay
    }
}

/// AdamW is Adam with decoupled weight decay; see [`Adam::adamw`].
pub type AdamW = Adam;

impl Adam {
    fn step_with(&mut self, guard: Option<(&Tensor, &Tensor)>) -> Result<()> {
        let (lr, beta1, beta2, eps, decoupled) =
            (self.lr, self.beta1, self.beta2, self.eps, self.decoupled);
        // A guarded step's bias corrections are computed on the device from its step counts.
        let rule = |t: u32, weight_decay| UpdateRule::Adam {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            bc1: (1.0 - f64::from(beta1).powi(t as i32)) as f32,
            bc2: (1.0 - f64::from(beta2).powi(t as i32)) as f32,
        };
        self.slots.step(2, rule, guard)
    }
}

impl Optimizer for Adam {
    fn step(&mut self) -> Result<()> {
        self.step_with(None)
    }
    fn step_guarded(&mut self, found_inf: &Tensor, skipped: &Tensor) -> Result<()> {
        self.step_with(Some((found_inf, skipped)))
    }
    fn params(&self) -> &[Parameter] {
        &self.slots.params
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
    fn state_dict(&self) -> Result<StateDict> {
        self.slots.state_dict(&["exp_avg", "exp_avg_sq"])
    }
    fn load_state_dict(&mut self, state: &StateDict) -> Result<()> {
        let op = if self.decoupled {
            "AdamW::load_state_dict"
        } else {
            "Adam::load_state_dict"
        };
        self.slots
            .load_state_dict(op, &["exp_avg", "exp_avg_sq"], state)
    }
}

//! Checkpoints: a model's state dict, optionally with its optimizer's state, in one safetensors
//! file (the layout and the map to PyTorch's names are in `docs/checkpoints.md`).
//!
//! The model's tensors are stored under their parameter names (`h.0.attn.c_attn.weight`), the
//! optimizer's under `optim.` followed by its [`Optimizer::state_dict`] names
//! (`optim.state.3.exp_avg`), all f32. The header's metadata holds `format = camel-checkpoint`,
//! `optimizer = yes|no`, and whatever the caller adds.

use crate::Optimizer;
use camel_nn::{load_safetensors, save_safetensors, Device, Module, StateDict, StateError};
use std::collections::HashMap;
use std::path::Path;

/// The prefix of the optimizer's entries in a checkpoint.
const OPTIM: &str = "optim.";

/// Writes `model`'s state dict and, when given, `opt`'s state to `path` (safetensors; written
/// beside it and renamed into place). See [`save_checkpoint_with`] to add metadata.
///
/// ```
/// use camel_nn::{Linear, Module};
/// use camel_optim::{load_checkpoint, save_checkpoint, Adam, Optimizer};
/// let model = Linear::new(3, 2)?;
/// let opt = Adam::new(model.parameters(), 1e-3)?;
/// let path = std::env::temp_dir().join(format!("camel-doc-{}.safetensors", std::process::id()));
/// save_checkpoint(&path, &model, Some(&opt))?;
/// let other = Linear::new(3, 2)?;
/// let mut opt2 = Adam::new(other.parameters(), 1e-3)?;
/// load_checkpoint(&path, &other, Some(&mut opt2))?;
/// assert_eq!(model.state_dict()["weight"].to_vec()?, other.state_dict()["weight"].to_vec()?);
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn save_checkpoint<M: Module + ?Sized>(
    path: &Path,
    model: &M,
    opt: Option<&dyn Optimizer>,
) -> Result<(), StateError> {
    save_checkpoint_with(path, model, opt, HashMap::new())
}

/// [`save_checkpoint`] with `metadata` in the file's header (a model's configuration, say); the
/// keys `format` and `optimizer` are camel's. A model parameter whose name starts with
/// `optim.` is an error (it would collide with the optimizer's entries).
pub fn save_checkpoint_with<M: Module + ?Sized>(
    path: &Path,
    model: &M,
    opt: Option<&dyn Optimizer>,
    mut metadata: HashMap<String, String>,
) -> Result<(), StateError> {
    let mut state = model.state_dict();
    if let Some(name) = state.keys().find(|k| k.starts_with(OPTIM)) {
        return Err(StateError::Unexpected(vec![format!(
            "{name} (a model entry may not start with {OPTIM:?}: the optimizer's prefix)"
        )]));
    }
    if let Some(opt) = opt {
        for (k, t) in opt.state_dict()? {
            state.insert(format!("{OPTIM}{k}"), t);
        }
    }
    metadata.insert("format".into(), "camel-checkpoint".into());
    metadata.insert(
        "optimizer".into(),
        if opt.is_some() { "yes" } else { "no" }.into(),
    );
    save_safetensors(&state, Some(metadata), path)
}

/// Reads a checkpoint written by [`save_checkpoint`] into `model` and, when given, `opt`, and
/// returns the file's metadata. Every check runs before anything changes: a truncated or
/// corrupt file, a tensor of another dtype or whose byte length disagrees with its shape, a
/// missing, unexpected or wrongly shaped entry of the model or the optimizer, or an optimizer
/// asked for from a file without one, is an error naming the file and the entry, and then
/// neither `model` nor `opt` has changed. With `opt` `None`, the file's optimizer state is
/// ignored (loading weights to generate, say).
pub fn load_checkpoint<M: Module + ?Sized>(
    path: &Path,
    model: &M,
    opt: Option<&mut dyn Optimizer>,
) -> Result<HashMap<String, String>, StateError> {
    let (state, meta) = load_safetensors(path, Device::Cpu)?;
    let in_file = |e: StateError| StateError::Checkpoint {
        path: path.to_path_buf(),
        source: Box::new(e),
    };
    let (mut model_state, mut opt_state) = (StateDict::new(), StateDict::new());
    for (k, t) in state {
        match k.strip_prefix(OPTIM) {
            Some(rest) => opt_state.insert(rest.to_string(), t),
            None => model_state.insert(k, t),
        };
    }
    let Some(opt) = opt else {
        model.load_state_dict(&model_state).map_err(in_file)?;
        return Ok(meta);
    };
    if opt_state.is_empty() {
        return Err(in_file(StateError::Missing(vec![format!(
            "{OPTIM}* (the file holds no optimizer state)"
        )])));
    }
    // The optimizer checks everything before it changes; the model too. The optimizer's old
    // state is put back if the model then refuses the file.
    let backup = opt.state_dict().map_err(|e| in_file(e.into()))?;
    opt.load_state_dict(&opt_state)
        .map_err(|e| in_file(e.into()))?;
    if let Err(e) = model.load_state_dict(&model_state) {
        opt.load_state_dict(&backup)
            .map_err(|e| in_file(e.into()))?;
        return Err(in_file(e));
    }
    Ok(meta)
}

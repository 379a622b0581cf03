//! State dicts: a module's parameters by dotted name (`layers.0.weight`), saved to and loaded
//! from safetensors files.
//!
//! [`Module::state_dict`](crate::Module::state_dict) collects the tensors,
//! [`Module::load_state_dict`](crate::Module::load_state_dict) checks every name and shape
//! before it changes anything, and [`save_safetensors`] / [`load_safetensors`] move a state
//! dict through a file that PyTorch's `safetensors` package reads too.

use camel_core::{DType, Device, Tensor};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Tensors by dotted parameter name, sorted by name.
pub type StateDict = BTreeMap<String, Tensor>;

/// Errors of loading, saving or applying a state dict. Each names the entry or file involved.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The module has parameters the state dict lacks.
    #[error("load_state_dict: missing entries {0:?}")]
    Missing(Vec<String>),
    /// The state dict has entries the module does not.
    #[error("load_state_dict: unexpected entries {0:?}")]
    Unexpected(Vec<String>),
    /// An entry's shape differs from the parameter's.
    #[error("load_state_dict: entry {name:?} has shape {found:?}, the parameter has {expected:?}")]
    Shape {
        /// Entry name.
        name: String,
        /// The parameter's shape.
        expected: Vec<usize>,
        /// The entry's shape.
        found: Vec<usize>,
    },
    /// An entry's element type is not one camel stores in checkpoints (f32).
    #[error("{op}: entry {name:?} has dtype {found}, expected F32")]
    DType {
        /// Operation.
        op: &'static str,
        /// Entry name.
        name: String,
        /// The dtype found.
        found: String,
    },
    /// The file could not be read or written.
    #[error("{}: I/O error: {source}", .path.display())]
    Io {
        /// File involved.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The file is not a valid safetensors file.
    #[error("{}: not a valid safetensors file: {detail}", .path.display())]
    Format {
        /// File involved.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// A tensor operation failed (device move, copy to the host).
    #[error(transparent)]
    Tensor(#[from] camel_core::Error),
    /// Applying the state of a checkpoint file failed (a missing, unexpected or wrongly shaped
    /// entry, an optimizer state that does not fit): the error, with the file it came from.
    #[error("{}: {source}", .path.display())]
    Checkpoint {
        /// File involved.
        path: PathBuf,
        /// What was wrong.
        source: Box<StateError>,
    },
}

/// Checks `state` against the module's parameters and buffers by name, then copies each entry
/// into its parameter or buffer on that one's device. Missing, unexpected and wrongly shaped or
/// typed entries are errors naming them, and nothing changes unless every check passes.
pub(crate) fn apply(
    params: Vec<(String, crate::Parameter)>,
    buffers: Vec<(String, crate::Buffer)>,
    state: &StateDict,
) -> std::result::Result<(), StateError> {
    let shapes: Vec<(&str, Vec<usize>)> = params
        .iter()
        .map(|(n, p)| (n.as_str(), p.tensor().shape().to_vec()))
        .chain(
            buffers
                .iter()
                .map(|(n, b)| (n.as_str(), b.tensor().shape().to_vec())),
        )
        .collect();
    let missing: Vec<String> = shapes
        .iter()
        .filter(|(n, _)| !state.contains_key(*n))
        .map(|(n, _)| n.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(StateError::Missing(missing));
    }
    let known: std::collections::HashSet<&str> = shapes.iter().map(|(n, _)| *n).collect();
    let unexpected: Vec<String> = state
        .keys()
        .filter(|k| !known.contains(k.as_str()))
        .cloned()
        .collect();
    if !unexpected.is_empty() {
        return Err(StateError::Unexpected(unexpected));
    }
    for (name, shape) in &shapes {
        let t = &state[*name];
        if t.shape() != shape.as_slice() {
            return Err(StateError::Shape {
                name: name.to_string(),
                expected: shape.clone(),
                found: t.shape().to_vec(),
            });
        }
        if t.dtype() != DType::F32 {
            return Err(StateError::DType {
                op: "load_state_dict",
                name: name.to_string(),
                found: format!("{:?}", t.dtype()),
            });
        }
    }
    for (name, p) in &params {
        p.set(&state[name])?;
    }
    for (name, b) in &buffers {
        b.set(&state[name])?;
    }
    Ok(())
}

/// Writes `state` to `path` as a safetensors file (f32, little-endian), with `metadata` in its
/// header. The file is written beside `path` and renamed into place, so a reader never sees
/// half a checkpoint.
pub fn save_safetensors(
    state: &StateDict,
    metadata: Option<HashMap<String, String>>,
    path: &Path,
) -> Result<(), StateError> {
    let mut bufs: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::with_capacity(state.len());
    for (name, t) in state {
        if t.dtype() != DType::F32 {
            return Err(StateError::DType {
                op: "save_safetensors",
                name: name.clone(),
                found: format!("{:?}", t.dtype()),
            });
        }
        let bytes: Vec<u8> = t.to_vec()?.iter().flat_map(|v| v.to_le_bytes()).collect();
        bufs.push((name.clone(), t.shape().to_vec(), bytes));
    }
    let format = |detail: String| StateError::Format {
        path: path.to_path_buf(),
        detail,
    };
    let mut views = Vec::with_capacity(bufs.len());
    for (name, shape, bytes) in &bufs {
        let v = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes)
            .map_err(|e| format(format!("{name}: {e}")))?;
        views.push((name.clone(), v));
    }
    let bytes =
        safetensors::tensor::serialize(views, &metadata).map_err(|e| format(e.to_string()))?;
    let tmp = path.with_extension("safetensors.tmp");
    let io = |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    };
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// Checks the layout of a safetensors file before the `safetensors` crate reads it, so that each
/// error names the tensor at fault: the header's length and JSON, then every tensor (in file
/// order) for its dtype (f32), a byte length that matches its shape, and data within the file.
fn check_layout(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    let format = |detail: String| StateError::Format {
        path: path.to_path_buf(),
        detail,
    };
    let Some((len, rest)) = bytes.split_first_chunk::<8>() else {
        return Err(format(format!(
            "{} bytes, fewer than the 8 of the header's length: the file is truncated",
            bytes.len()
        )));
    };
    let n = u64::from_le_bytes(*len);
    if n > rest.len() as u64 {
        return Err(format(format!(
            "corrupt header: its length field says {n} bytes, {} follow it (truncated or not safetensors)",
            rest.len()
        )));
    }
    let (header, data) = rest.split_at(n as usize);
    let header = std::str::from_utf8(header).map_err(|e| format(format!("corrupt header: {e}")))?;
    let meta: safetensors::tensor::Metadata =
        serde_json::from_str(header).map_err(|e| format(format!("corrupt header: {e}")))?;
    let mut infos: Vec<(String, &safetensors::tensor::TensorInfo)> =
        meta.tensors().into_iter().collect();
    infos.sort_by_key(|(name, i)| (i.data_offsets, name.clone()));
    for (name, info) in infos {
        if info.dtype != safetensors::Dtype::F32 {
            return Err(format(format!(
                "tensor {name:?} has dtype {:?}, camel loads F32",
                info.dtype
            )));
        }
        let (s, e) = info.data_offsets;
        let want = info
            .shape
            .iter()
            .try_fold(4usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| format(format!("tensor {name:?}: shape {:?} overflows", info.shape)))?;
        if e < s || e - s != want {
            return Err(format(format!(
                "tensor {name:?}: shape {:?} needs {want} bytes, its data offsets [{s}, {e}) hold {}",
                info.shape,
                e.saturating_sub(s)
            )));
        }
        if e > data.len() {
            return Err(format(format!(
                "tensor {name:?}: its data ends at byte {e} of a data section of {} bytes: the file is truncated",
                data.len()
            )));
        }
    }
    Ok(())
}

/// Reads a safetensors file into a state dict of f32 tensors on `device`, with the header's
/// metadata. A truncated file, a corrupt header, a tensor of another dtype or whose byte length
/// disagrees with its shape is a [`StateError::Format`] naming the file and the tensor.
pub fn load_safetensors(
    path: &Path,
    device: Device,
) -> Result<(StateDict, HashMap<String, String>), StateError> {
    let bytes = std::fs::read(path).map_err(|source| StateError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    check_layout(path, &bytes)?;
    let format = |detail: String| StateError::Format {
        path: path.to_path_buf(),
        detail,
    };
    let (_, meta) =
        safetensors::SafeTensors::read_metadata(&bytes).map_err(|e| format(e.to_string()))?;
    let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| format(e.to_string()))?;
    let mut state = StateDict::new();
    for (name, view) in st.tensors() {
        if view.dtype() != safetensors::Dtype::F32 {
            return Err(StateError::DType {
                op: "load_safetensors",
                name,
                found: format!("{:?}", view.dtype()),
            });
        }
        let data: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let t = Tensor::from_vec(data, view.shape(), device)?;
        state.insert(name, t);
    }
    Ok((state, meta.metadata().clone().unwrap_or_default()))
}

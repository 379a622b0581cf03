//! The PTX embedded at build time (`$OUT_DIR/ptx_modules.rs`, written by build.rs from
//! `kernels/ptx/`, which `cargo xtask build-kernels` fills).

include!(concat!(env!("OUT_DIR"), "/ptx_modules.rs"));

/// NUL-terminated PTX of `module`, decompressed on first use (then kept for the process).
#[cfg(feature = "cuda")]
pub(crate) fn find(module: &str) -> Option<&'static str> {
    use std::collections::HashMap;
    use std::io::Read;
    use std::sync::{Mutex, OnceLock, PoisonError};
    static CACHE: OnceLock<Mutex<HashMap<&'static str, &'static str>>> = OnceLock::new();
    let (name, gz) = PTX_MODULES.iter().find(|(name, _)| *name == module)?;
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let text = cache.entry(name).or_insert_with(|| {
        let mut s = String::new();
        flate2::read::GzDecoder::new(*gz)
            .read_to_string(&mut s)
            .expect("embedded PTX decompresses (build.rs wrote it)");
        s.push('\0');
        Box::leak(s.into_boxed_str())
    });
    Some(*text)
}

/// Without the `cuda` feature nothing is embedded.
#[cfg(not(feature = "cuda"))]
pub(crate) fn find(_module: &str) -> Option<&'static str> {
    None
}

/// Names of the embedded kernel modules (`elementwise`, `matmul/01_naive`, ...). Empty without
/// the `cuda` feature.
pub fn embedded_modules() -> Vec<&'static str> {
    PTX_MODULES.iter().map(|(name, _)| *name).collect()
}

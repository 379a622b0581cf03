//! The PTX embedded at build time (`$OUT_DIR/ptx_modules.rs`, written by build.rs from
//! `kernels/ptx/`, which `cargo xtask build-kernels` fills).

include!(concat!(env!("OUT_DIR"), "/ptx_modules.rs"));

/// NUL-terminated PTX of `module`.
pub(crate) fn find(module: &str) -> Option<&'static str> {
    PTX_MODULES
        .iter()
        .find(|(name, _)| *name == module)
        .map(|(_, ptx)| *ptx)
}

/// Names of the embedded kernel modules (`elementwise`, `matmul/01_naive`, ...). Empty without
/// the `cuda` feature.
pub fn embedded_modules() -> Vec<&'static str> {
    PTX_MODULES.iter().map(|(name, _)| *name).collect()
}

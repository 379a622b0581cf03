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

/// Names of the embedded kernel modules (`elementwise`, `matmul/01_naive`, ...), without their
/// PDL builds. Empty without the `cuda` feature.
pub fn embedded_modules() -> Vec<&'static str> {
    PTX_MODULES
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !name.starts_with(PDL_PREFIX))
        .collect()
}

/// Where build-kernels puts the compute_90 build of each module (`kernels/ptx/sm90/`), whose
/// kernels start with `griddepcontrol.wait` (kernels/common/pdl.cuh).
pub(crate) const PDL_PREFIX: &str = "sm90/";

/// The PDL build of `module` (NUL-terminated PTX), if embedded.
pub(crate) fn find_pdl(module: &str) -> Option<&'static str> {
    find(&format!("{PDL_PREFIX}{module}"))
}

/// The kernels (`.entry` names) of a PTX text whose body holds `griddepcontrol.wait`: the ones
/// that may be launched with programmatic dependent launch (kernels/common/pdl.cuh). The same scan as
/// build-kernels' check (xtask), which fails when a sm_90 kernel lacks the wait.
pub(crate) fn pdl_kernels(ptx: &str) -> std::collections::HashSet<String> {
    entries(ptx)
        .filter(|(_, body)| body.contains("griddepcontrol.wait"))
        .map(|(name, _)| name)
        .collect()
}

/// The kernels of a PTX text: each `.entry`'s name and the text up to the next one.
fn entries(ptx: &str) -> impl Iterator<Item = (String, &str)> {
    ptx.split(".entry ").skip(1).map(|body| {
        let name = body
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
            .collect();
        (name, body)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdl_scan_finds_only_kernels_with_the_wait() {
        let ptx = ".version 9.0\n.target sm_90\n\
                   .visible .entry a_f32(\n.param .u64 p)\n{\ngriddepcontrol.wait;\nret;\n}\n\
                   .visible .entry b_f32(\n.param .u64 p)\n{\nret;\n}\n";
        let k = pdl_kernels(ptx);
        assert!(k.contains("a_f32"));
        assert!(!k.contains("b_f32"));
        assert_eq!(k.len(), 1);
    }

    /// Every embedded module has a PDL build with the same kernels, each holding the wait
    /// (build-kernels checks the wait too; this also catches a build without the sm90 folder).
    #[cfg(feature = "cuda")]
    #[test]
    fn every_module_has_a_pdl_build_whose_kernels_all_wait() {
        let modules = embedded_modules();
        assert!(!modules.is_empty());
        for m in modules {
            let base = find(m).unwrap();
            let entries = |t: &str| -> std::collections::HashSet<String> {
                entries(t).map(|(name, _)| name).collect()
            };
            if m.ends_with("_sm90a") {
                assert_eq!(pdl_kernels(base), entries(base), "{m}");
                continue;
            }
            let pdl = find_pdl(m).unwrap_or_else(|| panic!("no PDL build of {m}"));
            assert_eq!(
                entries(pdl),
                entries(base),
                "{m}: the two builds differ in kernels"
            );
            assert_eq!(
                pdl_kernels(pdl),
                entries(pdl),
                "{m}: a kernel without the wait"
            );
            if base.contains(".target sm_80") {
                assert!(
                    pdl_kernels(base).is_empty(),
                    "{m}: compute_80 PTX with the wait"
                );
            }
        }
    }
}

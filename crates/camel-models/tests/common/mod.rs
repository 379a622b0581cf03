//! Helpers shared by the integration tests that run the `camel` program.

use std::path::{Path, PathBuf};

/// The `camel` program: where cargo built it, or, in a `cargo xtask dist` bundle run on another
/// machine, `bin/camel` beside the `tests/` folder holding the test executable.
pub fn camel_exe() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_camel"));
    if built.exists() {
        return built;
    }
    let here = std::env::current_exe().expect("test executable path");
    here.parent()
        .and_then(Path::parent)
        .map(|d| d.join("bin").join("camel"))
        .unwrap_or(built)
}

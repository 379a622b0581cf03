//! Helpers shared by the integration tests: the `camel` program, its output as text, and
//! temporary folders. Each test binary uses some of them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

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

/// The `camel` program with `args` and no standard input, to run or to adjust first.
pub fn camel_cmd(args: &[&str]) -> Command {
    let mut cmd = Command::new(camel_exe());
    cmd.args(args).stdin(Stdio::null());
    cmd
}

/// Runs the `camel` program with `args` and no standard input.
pub fn camel(args: &[&str]) -> Output {
    camel_cmd(args).output().expect("run camel")
}

/// Bytes a program printed, as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh temporary folder, `camel-<process>-<tag>` in the system's, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("camel-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// Writes `bytes` to the file `name` in the folder and returns its path.
    pub fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// The names in the folder, sorted.
    pub fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

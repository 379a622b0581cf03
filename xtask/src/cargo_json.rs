//! cargo's JSON output, read with serde_json: `cargo metadata` (the target directory, where a
//! dependency's sources are) and the `--message-format=json` messages of a build (the
//! executables it wrote). Paths come from cargo itself, so `CARGO_TARGET_DIR` and
//! `build.target-dir` are honoured.

use serde_json::Value;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The cargo that runs xtask (`$CARGO`), else `cargo` on PATH.
pub fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// `cargo metadata --format-version 1` for the workspace at `root`, with `extra` arguments
/// (`--no-deps`, `--features ...`), parsed.
pub fn metadata(root: &Path, extra: &[&str]) -> Result<Value, String> {
    let out = Command::new(cargo())
        .args(["metadata", "--format-version", "1"])
        .args(extra)
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("running cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("reading cargo metadata's JSON: {e}"))
}

/// The workspace's target directory as cargo resolves it (`CARGO_TARGET_DIR`, the
/// `build.target-dir` setting, else `<root>/target`).
pub fn target_dir(root: &Path) -> Result<PathBuf, String> {
    let meta = metadata(root, &["--no-deps"])?;
    meta["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .ok_or_else(|| "cargo metadata has no target_directory".to_string())
}

/// The folder of package `name`'s Cargo.toml in a `cargo metadata` answer (with dependencies).
pub fn package_dir(meta: &Value, name: &str) -> Result<PathBuf, String> {
    let packages = meta["packages"]
        .as_array()
        .ok_or("cargo metadata has no packages array")?;
    let manifest = packages
        .iter()
        .find(|p| p["name"] == name)
        .ok_or_else(|| format!("{name} is not in the dependency graph"))?["manifest_path"]
        .as_str()
        .ok_or_else(|| format!("no manifest_path for {name}"))?;
    Path::new(manifest)
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("bad manifest path for {name}: {manifest}"))
}

/// An executable that a cargo build wrote, from its `compiler-artifact` message.
#[derive(Debug)]
pub struct Executable {
    /// The target's name (`camel`, `bench_memory`, an integration test's file stem).
    pub name: String,
    /// The target's kinds (`bin`, `example`, `test`, `lib`, ...).
    pub kinds: Vec<String>,
    /// Whether it is a libtest harness (built with the test profile).
    pub test: bool,
    /// Where cargo wrote it.
    pub path: PathBuf,
}

/// Runs `cargo <args> --message-format=json-render-diagnostics` in `root` with the environment
/// `env`, its progress and diagnostics on stderr, and returns every executable it reports
/// (each once). `what` names the build in the error when it fails.
pub fn build_executables(
    root: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    what: &str,
) -> Result<Vec<Executable>, String> {
    let mut cmd = Command::new(cargo());
    cmd.current_dir(root)
        .args(args)
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("running cargo for {what}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{what} failed (cargo {})", args.join(" ")));
    }
    executables(&out.stdout)
}

/// The executables in cargo's JSON messages (one JSON object a line; other lines are skipped).
pub fn executables(stdout: &[u8]) -> Result<Vec<Executable>, String> {
    let mut found: Vec<Executable> = Vec::new();
    for line in stdout.split(|&b| b == b'\n') {
        if line.first() != Some(&b'{') {
            continue;
        }
        let msg: Value = serde_json::from_slice(line)
            .map_err(|e| format!("reading a cargo JSON message: {e}"))?;
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(path) = msg["executable"].as_str() else {
            continue;
        };
        let path = PathBuf::from(path);
        if found.iter().any(|e| e.path == path) {
            continue;
        }
        let target = &msg["target"];
        found.push(Executable {
            name: target["name"].as_str().unwrap_or_default().to_string(),
            kinds: target["kind"]
                .as_array()
                .map(|k| {
                    k.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            test: msg["profile"]["test"].as_bool().unwrap_or(false),
            path,
        });
    }
    Ok(found)
}

impl Executable {
    /// Whether the target has kind `kind`.
    pub fn is(&self, kind: &str) -> bool {
        self.kinds.iter().any(|k| k == kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_artifact_messages() {
        let out = br#"{"reason":"compiler-artifact","target":{"kind":["example"],"name":"xor"},"profile":{"test":false},"executable":"/t/release/examples/xor"}
{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"camel_core"},"profile":{"test":false},"executable":null}
{"reason":"compiler-artifact","target":{"kind":["test"],"name":"ops"},"profile":{"test":true},"executable":"/t/release/deps/ops-0123"}
{"reason":"build-finished","success":true}
not json
"#;
        let exes = executables(out).unwrap();
        assert_eq!(exes.len(), 2);
        assert_eq!(exes[0].name, "xor");
        assert!(exes[0].is("example") && !exes[0].test);
        assert_eq!(exes[1].path, Path::new("/t/release/deps/ops-0123"));
        assert!(exes[1].test && exes[1].is("test"));
    }
}

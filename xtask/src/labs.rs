//! `cargo xtask labs [--link] [--arch sm_XY] [--jobs N]`: compile every `dev/labs/*_lab.cu`
//! with nvcc for sm_90 (`-I kernels`, as the labs' scripts build them), into `<target>/labs/`.
//!
//! Without `--link` each lab becomes an object file: the check that the labs still build
//! against the library's kernels, which needs nvcc but no CUDA runtime library (CI). With
//! `--link` each becomes an executable `<target>/labs/<name>`, for a host with the CUDA toolkit
//! and a GPU; the labs' own `dev/labs/*_lab.sh` scripts build and run them there as well.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The labs' folder, relative to the repository root.
const LABS_DIR: &str = "dev/labs";
/// The architecture the labs are written for (griddepcontrol, bulk copies: Hopper PTX).
const DEFAULT_ARCH: &str = "sm_90";

/// Compiles the labs; returns an error naming every lab that failed.
pub fn labs(args: &[String]) -> Result<(), String> {
    let crate::NvccArgs {
        flag: link,
        arch,
        jobs,
    } = crate::NvccArgs::parse("labs", args, "--link", DEFAULT_ARCH)?;
    if !arch.starts_with("sm_") {
        return Err(format!(
            "labs: --arch must be a real architecture like sm_90, got `{arch}`"
        ));
    }
    let root = crate::repo_root();
    let labs = lab_sources(&root.join(LABS_DIR))?;
    if labs.is_empty() {
        return Err(format!("labs: no {LABS_DIR}/*_lab.cu found"));
    }
    let nvcc = crate::find_nvcc(&root)?;
    let out = crate::cargo_json::target_dir(&root)?.join("labs");
    fs::create_dir_all(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;

    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::<String>::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.min(labs.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(src) = labs.get(i) else { break };
                let stem = src.file_stem().unwrap().to_string_lossy();
                let dst = if link {
                    out.join(&*stem)
                } else {
                    out.join(format!("{stem}.o"))
                };
                let mut cmd = Command::new(&nvcc);
                cmd.current_dir(&root)
                    .args(["-O3", "-std=c++17", "-I", "kernels"]);
                // `*_sm90a_lab.cu` use Hopper-only instructions (wgmma, TMA multicast): the
                // architecture-specific target of the same GPU, and libcuda for its tensor maps
                if stem.ends_with("_sm90a_lab") {
                    let a = arch.trim_start_matches("sm_");
                    cmd.arg(format!("-gencode=arch=compute_{a}a,code=sm_{a}a"));
                    if link {
                        cmd.arg("-lcuda");
                    }
                } else {
                    cmd.arg(format!("-arch={arch}"));
                }
                if !link {
                    cmd.arg("-c");
                }
                cmd.arg("-o").arg(&dst).arg(src);
                let rel = src.strip_prefix(&root).unwrap_or(src).display().to_string();
                match cmd.output() {
                    Ok(o) if o.status.success() => {
                        println!("  nvcc {rel} -> {}", dst.display())
                    }
                    Ok(o) => failures.lock().unwrap().push(format!(
                        "--- {rel} ({}):\n{}{}",
                        o.status,
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    )),
                    Err(e) => failures
                        .lock()
                        .unwrap()
                        .push(format!("--- {rel}: running {}: {e}", nvcc.display())),
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    if !failures.is_empty() {
        return Err(format!(
            "{} of {} labs failed to compile:\n{}",
            failures.len(),
            labs.len(),
            failures.join("\n")
        ));
    }
    println!(
        "labs: {} compiled for {arch} ({}) -> {}",
        labs.len(),
        if link { "executables" } else { "objects" },
        out.display()
    );
    Ok(())
}

/// `dir/*_lab.cu`, sorted.
fn lab_sources(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let rd = fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    let mut labs: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with("_lab.cu"))
        })
        .collect();
    labs.sort();
    Ok(labs)
}

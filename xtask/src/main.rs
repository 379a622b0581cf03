//! Repository tasks, run as `cargo xtask <command>` (alias in `.cargo/config.toml`).
//!
//! - `build-kernels [--force] [--arch compute_XY] [--jobs N]`: compile every `kernels/**/*.cu`
//!   to PTX in `kernels/ptx/<same relative path>.ptx`, and again for compute_90 in
//!   `kernels/ptx/sm90/<same relative path>.ptx` (programmatic dependent launch, see
//!   `kernels/common/pdl.cuh`), rebuilding only what changed.
//! - `cuda-stub [--check]`: refresh `crates/camel-cuda/stub/libcuda_symbols.txt`, the list of
//!   driver entry points that camel-cuda's build script turns into a no-driver `libcuda.so` stub.
//!
//! - `dist`: build the release GPU test binaries and programs with `--features cuda`, strip
//!   them and write them with `run-gpu-tests.sh` into `dist/gpu/` for a GPU host without Rust.
//! - `labs [--link]`: compile every `dev/labs/*_lab.cu` for sm_90 into `<target>/labs/`.
//! - `gemm-report DIR [--page NAME]`: turn a GPU run's GEMM benchmark CSVs into
//!   `docs/gemm-results.md` and `docs/gemm.png` (`--page hgemm`: the 16-bit ladder's page).
//! - `memory-report FILE`: turn a GPU run's `bench_memory` table into `docs/memory-results.md`
//!   and `docs/memory.png`.
//! - `bench-pages`: copy the tables of `docs/data/` into the pages that quote them and draw
//!   their figures.
//!
//! Besides the standard library: `serde_json` for cargo's JSON (`cargo metadata`, build
//! messages), `plotters` for the reports' PNGs and camel-core (built without `cuda`) for
//! `memory-report`'s default steps. The target directory always comes from cargo, so
//! `CARGO_TARGET_DIR` is honoured.

mod bench_pages;
mod cargo_json;
mod dist;
mod gemm_report;
mod gemm_search;
mod labs;
mod memory_report;

use std::collections::BTreeSet;
use std::env;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

/// The pinned PyPI packages that make up the nvcc used for PTX (see `.ci/install-nvcc.sh`).
const NVCC_PIP: &str = "pip install --target .tools/nvcc nvidia-cuda-nvcc==13.0.88 \
nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85";
/// Where `.ci/install-nvcc.sh` puts nvcc, relative to the repository root.
const LOCAL_NVCC: &str = ".tools/nvcc/nvidia/cu13/bin/nvcc";
/// Default virtual architecture: PTX that JIT-compiles on every GPU from Ampere on.
const DEFAULT_ARCH: &str = "compute_80";
/// Files named `*_sm90a.cu` use Hopper-only instructions (wgmma, TMA) and get sm_90a PTX.
const SM90A_SUFFIX: &str = "_sm90a.cu";
/// Every other file is compiled a second time for this architecture into `kernels/ptx/sm90/`:
/// there `CAMEL_PDL_WAIT()` (kernels/common/pdl.cuh) is `griddepcontrol.wait`, and camel_cuda
/// launches the kernels with programmatic dependent launch on compute capability 9.0 and later.
const PDL_ARCH: &str = "compute_90";
/// The folder under `kernels/ptx/` of the PDL builds.
const PDL_DIR: &str = "sm90";
/// Flags common to every kernel. No `--use_fast_math`: precision matters.
const COMMON_FLAGS: &[&str] = &["-ptx", "-O3", "-lineinfo", "-std=c++17"];
/// Records the compiler version and flags of the last build; a change rebuilds everything.
const STAMP: &str = ".build-stamp";
const SYMBOLS_FILE: &str = "crates/camel-cuda/stub/libcuda_symbols.txt";
const FFI_FILE: &str = "crates/camel-cuda/src/ffi.rs";

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("bench-pages") => bench_pages::bench_pages(&args[1..]),
        Some("build-kernels") => build_kernels(&args[1..]),
        Some("cuda-stub") => cuda_stub(&args[1..]).map(|_| ()),
        Some("dist") => dist::dist(&args[1..]),
        Some("gemm-report") => gemm_report::gemm_report(&args[1..]),
        Some("gemm-search") => gemm_search::gemm_search(&args[1..]),
        Some("labs") => labs::labs(&args[1..]),
        Some("memory-report") => memory_report::memory_report(&args[1..]),
        Some("help" | "-h" | "--help") | None => {
            print_help();
            Ok(())
        }
        Some(other) => Err(format!(
            "unknown command `{other}` (try `cargo xtask help`)"
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn print_help() {
    println!(
        "cargo xtask <command>

commands:
  build-kernels [--force] [--arch compute_XY] [--jobs N]
      Compile kernels/**/*.cu (kernels/<family>/NN_step.cu: a file per ladder step) to PTX in
      kernels/ptx/<same path>.ptx (default arch {DEFAULT_ARCH}; files named *{SM90A_SUFFIX} get
      compute_90a), and each other file again for {PDL_ARCH} into kernels/ptx/{PDL_DIR}/
      (programmatic dependent launch, kernels/common/pdl.cuh). Only sources newer than their PTX
      are rebuilt; a changed kernels/**/*.cuh header (kernels/common/, a family's header),
      nvcc version or flag rebuilds all. Also runs `cuda-stub`.
      nvcc is looked up as $NVCC, then PATH, then $CUDA_HOME/bin/nvcc, then {LOCAL_NVCC}
      (install it with `bash .ci/install-nvcc.sh`).
  cuda-stub [--check]
      Refresh {SYMBOLS_FILE} from cust_raw's bindings and camel-cuda's own FFI declarations.
      With --check, fail instead of writing when it is out of date.
  gemm-search [--max N] [--jobs N]
      Compile every valid tile configuration of the SGEMM templates (steps 7–11) to sm_90
      cubins in dist/gemm-search/ for the autotuner (`gemm_tune`, run on the GPU host).
  dist
      Build the release GPU test binaries and programs (--features cuda), strip them and write
      them, with run-gpu-tests.sh, bench-gemm.sh, bench/torch/*.py and the labs (dev/labs/ and
      the kernel sources they include), into dist/gpu/ for a GPU host without Rust.
  labs [--link] [--arch sm_XY] [--jobs N]
      Compile every dev/labs/*_lab.cu with nvcc (default sm_90, -I kernels) into <target>/labs/:
      object files, or with --link executables (needs the CUDA runtime library).
  gemm-report DIR [--docs DOCS] [--page NAME]
      Read DIR/gemm_camel.csv (gemm_bench) and DIR/gemm_torch.csv (bench/torch/gemm_torch.py) and
      write docs/NAME-results.md and docs/NAME.png (NAME: gemm; hgemm for the 16-bit ladder).
  memory-report FILE [--docs DOCS] [--check]
      Read FILE (bench_memory --torch's printed table) and write docs/memory-results.md and
      docs/memory.png: each memory-bound op at its default step against copy and PyTorch.
      With --check, write nothing and fail if docs/memory-results.md differs.
  bench-pages [--check] [--no-plots]
      Replace every `<!-- table: FILE -->` … `<!-- /table -->` block of docs/**/*.md with the
      last Markdown table of FILE (a benchmark's raw output in docs/data/; `FILE rows: a,b`
      keeps the rows whose first cell starts with a or b) and draw the
      figures drawn from them (docs/kernels/filter.png, docs/kernels/conv2d.png). With
      --check, write nothing and fail if a block differs from its file."
    );
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the repository root")
        .to_path_buf()
}

// ---------------------------------------------------------------------------------------------
// build-kernels
// ---------------------------------------------------------------------------------------------

/// The arguments `build-kernels` and `labs` share: one on/off flag of the subcommand's own,
/// `--arch ARCH` and `--jobs N` (parallel nvcc runs, default: the machine's cores).
pub(crate) struct NvccArgs {
    /// Whether the subcommand's own flag was given.
    pub flag: bool,
    /// The nvcc architecture.
    pub arch: String,
    /// How many nvcc runs at once.
    pub jobs: usize,
}

impl NvccArgs {
    /// Parses `args` for subcommand `cmd`, whose own flag is `flag`.
    pub(crate) fn parse(
        cmd: &str,
        args: &[String],
        flag: &str,
        default_arch: &str,
    ) -> Result<NvccArgs, String> {
        let mut out = NvccArgs {
            flag: false,
            arch: default_arch.to_string(),
            jobs: std::thread::available_parallelism().map_or(2, |n| n.get()),
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                f if f == flag => out.flag = true,
                "--arch" => {
                    out.arch = it
                        .next()
                        .ok_or(format!("{cmd}: --arch needs a value, e.g. {default_arch}"))?
                        .clone()
                }
                "--jobs" | "-j" => {
                    out.jobs = it
                        .next()
                        .and_then(|v| v.parse().ok())
                        .filter(|&n: &usize| n > 0)
                        .ok_or("--jobs needs a positive number")?
                }
                other => return Err(format!("{cmd}: unknown argument `{other}`")),
            }
        }
        Ok(out)
    }
}

struct Job {
    src: PathBuf,
    ptx: PathBuf,
    arch_flags: Vec<String>,
    arch_label: String,
}

fn build_kernels(args: &[String]) -> Result<(), String> {
    let NvccArgs {
        flag: force,
        arch,
        jobs,
    } = NvccArgs::parse("build-kernels", args, "--force", DEFAULT_ARCH)?;
    if !arch.starts_with("compute_") {
        return Err(format!(
            "--arch must be a virtual architecture like compute_80, got `{arch}`"
        ));
    }

    let root = repo_root();
    // The stub symbol list is committed; refreshing it is a convenience, never a blocker.
    if let Err(e) = cuda_stub(&[]) {
        eprintln!("warning: cuda-stub: {e} (keeping the committed {SYMBOLS_FILE})");
    }

    let kernels = root.join("kernels");
    let ptx_dir = kernels.join("ptx");
    let mut sources = Vec::new();
    let mut headers = Vec::new();
    walk(&kernels, &ptx_dir, &mut sources, &mut headers)
        .map_err(|e| format!("reading {}: {e}", kernels.display()))?;
    sources.sort();
    if sources.is_empty() {
        println!("build-kernels: no kernels/**/*.cu found");
        return Ok(());
    }

    let nvcc = find_nvcc(&root)?;
    let version = nvcc_version(&nvcc)?;
    let stamp_text = format!(
        "nvcc: {version}\nflags: {}\narch: {arch}\nsm90a: -gencode=arch=compute_90a,code=compute_90a\n\
         {PDL_DIR}: -arch={PDL_ARCH}\n",
        COMMON_FLAGS.join(" ")
    );
    let stamp_path = ptx_dir.join(STAMP);
    let stamp_changed = fs::read_to_string(&stamp_path).ok().as_deref() != Some(&stamp_text);
    let newest_header = headers.iter().filter_map(|h| mtime(h)).max();

    let mut todo = Vec::new();
    let mut up_to_date = 0usize;
    let mut wanted = BTreeSet::new();
    for src in &sources {
        let rel = src.strip_prefix(&kernels).expect("source under kernels/");
        let is_sm90a = src
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(SM90A_SUFFIX));
        // (PTX path, nvcc architecture flag, label): the plain build, and the PDL build
        let mut builds = vec![if is_sm90a {
            (
                ptx_dir.join(rel).with_extension("ptx"),
                "-gencode=arch=compute_90a,code=compute_90a".to_string(),
                "compute_90a".to_string(),
            )
        } else {
            (
                ptx_dir.join(rel).with_extension("ptx"),
                format!("-arch={arch}"),
                arch.clone(),
            )
        }];
        if !is_sm90a {
            builds.push((
                ptx_dir.join(PDL_DIR).join(rel).with_extension("ptx"),
                format!("-arch={PDL_ARCH}"),
                PDL_ARCH.to_string(),
            ));
        }
        for (ptx, flag, label) in builds {
            wanted.insert(ptx.clone());
            let stale = match mtime(&ptx) {
                None => true,
                Some(t) => {
                    force
                        || stamp_changed
                        || mtime(src).map_or(true, |s| s > t)
                        || newest_header.is_some_and(|h| h > t)
                }
            };
            if !stale {
                up_to_date += 1;
                continue;
            }
            todo.push(Job {
                src: src.clone(),
                ptx,
                arch_flags: vec![flag],
                arch_label: label,
            });
        }
    }

    let removed = prune_orphans(&ptx_dir, &wanted)
        .map_err(|e| format!("pruning {}: {e}", ptx_dir.display()))?;
    for p in &removed {
        println!("  removed {} (its .cu is gone)", rel_display(&root, p));
    }

    let compiled = todo.len();
    if !todo.is_empty() {
        println!("build-kernels: {} with {version}", nvcc.display());
        run_jobs(&root, &nvcc, &kernels, todo, jobs)?;
    }
    fs::create_dir_all(&ptx_dir).map_err(|e| e.to_string())?;
    check_pdl_waits(&root, &ptx_dir)?;
    fs::write(&stamp_path, stamp_text)
        .map_err(|e| format!("writing {}: {e}", stamp_path.display()))?;
    println!(
        "build-kernels: {compiled} compiled, {up_to_date} up to date, {} removed -> {}",
        removed.len(),
        rel_display(&root, &ptx_dir)
    );
    Ok(())
}

/// Fails when a kernel compiled for sm_90 or later (`kernels/ptx/sm90/`, `*_sm90a`) lacks
/// `griddepcontrol.wait`: every kernel must start with `CAMEL_PDL_WAIT()`
/// (kernels/common/pdl.cuh).
/// camel_cuda launches only kernels that have it with PDL, so a forgotten one would run
/// correctly but without the overlap: this makes it loud instead.
fn check_pdl_waits(root: &Path, ptx_dir: &Path) -> Result<(), String> {
    let mut files = Vec::new();
    collect_ext(ptx_dir, "ptx", &mut files)
        .map_err(|e| format!("reading {}: {e}", ptx_dir.display()))?;
    let mut missing = Vec::new();
    for f in files {
        let hopper = f.starts_with(ptx_dir.join(PDL_DIR))
            || f.file_stem()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with("_sm90a"));
        if !hopper {
            continue;
        }
        let text = fs::read_to_string(&f).map_err(|e| format!("reading {}: {e}", f.display()))?;
        for (entry, waits) in ptx_entries(&text) {
            if !waits {
                missing.push(format!("{} ({entry})", rel_display(root, &f)));
            }
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} kernel(s) do not start with CAMEL_PDL_WAIT() (kernels/common/pdl.cuh), so their sm_90 \
             PTX has no griddepcontrol.wait:\n  {}",
            missing.len(),
            missing.join("\n  ")
        ))
    }
}

/// The kernels (`.entry`) of a PTX text, each with whether its body holds
/// `griddepcontrol.wait`. The same scan as camel_cuda's `ptx::pdl_kernels`.
fn ptx_entries(text: &str) -> Vec<(String, bool)> {
    text.split(".entry ")
        .skip(1)
        .map(|body| {
            let name = body
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
                .collect();
            (name, body.contains("griddepcontrol.wait"))
        })
        .collect()
}

/// Every file under `dir` (recursively) whose extension is `ext`; nothing if `dir` is missing.
fn collect_ext(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) -> io::Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_ext(&path, ext, out)?;
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
    Ok(())
}

fn run_jobs(
    root: &Path,
    nvcc: &Path,
    include: &Path,
    todo: Vec<Job>,
    jobs: usize,
) -> Result<(), String> {
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::<String>::new());
    let todo = &todo;
    std::thread::scope(|s| {
        for _ in 0..jobs.min(todo.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = todo.get(i) else { break };
                if let Err(e) = compile_one(root, nvcc, include, job) {
                    failures.lock().unwrap().push(e);
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} kernel file(s) failed to compile:\n{}",
            failures.len(),
            failures.join("\n")
        ))
    }
}

fn compile_one(root: &Path, nvcc: &Path, include: &Path, job: &Job) -> Result<(), String> {
    if let Some(dir) = job.ptx.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let tmp = job.ptx.with_extension("ptx.tmp");
    let mut cmd = Command::new(nvcc);
    cmd.args(COMMON_FLAGS)
        .args(&job.arch_flags)
        .arg("-I")
        .arg(include)
        .arg("-o")
        .arg(&tmp)
        .arg(&job.src);
    let out = cmd
        .output()
        .map_err(|e| format!("running {}: {e}", nvcc.display()))?;
    let src = rel_display(root, &job.src);
    if !out.status.success() {
        let _ = fs::remove_file(&tmp);
        return Err(format!(
            "--- {src} ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    fs::rename(&tmp, &job.ptx).map_err(|e| format!("moving PTX into place: {e}"))?;
    let warnings = String::from_utf8_lossy(&out.stderr);
    let mut stdout = io::stdout().lock();
    let _ = writeln!(
        stdout,
        "  nvcc {src} -> {} [{}]",
        rel_display(root, &job.ptx),
        job.arch_label
    );
    if !warnings.trim().is_empty() {
        let _ = writeln!(stdout, "{warnings}");
    }
    Ok(())
}

/// Collects `*.cu` sources and `*.cuh` headers under `dir`, skipping the PTX output folder.
fn walk(
    dir: &Path,
    skip: &Path,
    sources: &mut Vec<PathBuf>,
    headers: &mut Vec<PathBuf>,
) -> io::Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path == skip {
            continue;
        }
        if path.is_dir() {
            walk(&path, skip, sources, headers)?;
        } else {
            match path.extension().and_then(|e| e.to_str()) {
                Some("cu") => sources.push(path),
                Some("cuh") => headers.push(path),
                _ => {}
            }
        }
    }
    Ok(())
}

/// Removes `kernels/ptx/**/*.ptx` whose source no longer exists, so stale PTX is never embedded.
fn prune_orphans(dir: &Path, wanted: &BTreeSet<PathBuf>) -> io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    if !dir.is_dir() {
        return Ok(removed);
    }
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            removed.extend(prune_orphans(&path, wanted)?);
        } else if path.extension().is_some_and(|e| e == "ptx") && !wanted.contains(&path) {
            fs::remove_file(&path)?;
            removed.push(path);
        }
    }
    Ok(removed)
}

fn mtime(p: &Path) -> Option<SystemTime> {
    fs::metadata(p).and_then(|m| m.modified()).ok()
}

fn rel_display(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

/// `$NVCC`, then `PATH`, then `$CUDA_HOME/bin/nvcc`, then the repo-local pip install.
fn find_nvcc(root: &Path) -> Result<PathBuf, String> {
    if let Some(p) = env::var_os("NVCC").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "$NVCC is set to {} but no such file exists",
                p.display()
            ))
        };
    }
    if let Some(path) = env::var_os("PATH") {
        if let Some(p) = env::split_paths(&path)
            .map(|d| d.join("nvcc"))
            .find(|p| p.is_file())
        {
            return Ok(p);
        }
    }
    if let Some(home) = env::var_os("CUDA_HOME").filter(|p| !p.is_empty()) {
        let p = Path::new(&home).join("bin/nvcc");
        if p.is_file() {
            return Ok(p);
        }
    }
    let local = root.join(LOCAL_NVCC);
    if local.is_file() {
        return Ok(local);
    }
    Err(format!(
        "nvcc not found (looked at $NVCC, PATH, $CUDA_HOME/bin/nvcc and {LOCAL_NVCC}).\n\
         Only PTX is built, so no GPU or driver is needed. Install the pinned nvcc with\n    \
         bash .ci/install-nvcc.sh\nor, from the repository root,\n    {NVCC_PIP}\n\
         or point $NVCC at an existing nvcc."
    ))
}

fn nvcc_version(nvcc: &Path) -> Result<String, String> {
    let out = Command::new(nvcc)
        .arg("--version")
        .output()
        .map_err(|e| format!("running {} --version: {e}", nvcc.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} --version failed: {}",
            nvcc.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .find(|l| l.contains("release"))
        .unwrap_or_else(|| text.lines().last().unwrap_or("unknown"))
        .trim()
        .to_string())
}

// ---------------------------------------------------------------------------------------------
// cuda-stub
// ---------------------------------------------------------------------------------------------

/// Regenerates the stub's symbol list. Returns whether the file changed.
fn cuda_stub(args: &[String]) -> Result<bool, String> {
    let check = match args {
        [] => false,
        [a] if a == "--check" => true,
        _ => return Err(format!("cuda-stub: unknown arguments {args:?}")),
    };
    let root = repo_root();
    let cust_raw = cust_raw_dir(&root)?;
    let mut symbols = BTreeSet::new();
    let mut files = Vec::new();
    let cust_src = cust_raw.join("src");
    if !cust_src.is_dir() {
        return Err(format!(
            "cust_raw sources not found at {}",
            cust_src.display()
        ));
    }
    collect_ext(&cust_src, "rs", &mut files)
        .map_err(|e| format!("reading cust_raw sources: {e}"))?;
    files.push(root.join(FFI_FILE));
    for f in &files {
        let text = fs::read_to_string(f).map_err(|e| format!("reading {}: {e}", f.display()))?;
        extract_cu_fns(&text, &mut symbols);
    }
    if symbols.len() < 50 {
        return Err(format!(
            "only {} cu* functions found in {}: bindings layout changed?",
            symbols.len(),
            cust_raw.display()
        ));
    }
    let version = cust_raw
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("cust_raw")
        .to_string();
    let mut text = format!(
        "# Driver entry points exported by camel-cuda's no-driver libcuda stub (each returns\n\
         # CUDA_ERROR_NO_DEVICE). Generated by `cargo xtask cuda-stub` from {version}'s bindings and\n\
         # crates/camel-cuda/src/ffi.rs; do not edit by hand.\n"
    );
    for s in &symbols {
        text.push_str(s);
        text.push('\n');
    }
    let path = root.join(SYMBOLS_FILE);
    let current = fs::read_to_string(&path).unwrap_or_default();
    if current == text {
        println!(
            "cuda-stub: {SYMBOLS_FILE} up to date ({} symbols)",
            symbols.len()
        );
        return Ok(false);
    }
    if check {
        return Err(format!(
            "{SYMBOLS_FILE} is out of date: run `cargo xtask cuda-stub`"
        ));
    }
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    println!(
        "cuda-stub: wrote {SYMBOLS_FILE} ({} symbols from {version})",
        symbols.len()
    );
    Ok(true)
}

/// Finds cust_raw's source folder through `cargo metadata` (downloads it if needed).
fn cust_raw_dir(root: &Path) -> Result<PathBuf, String> {
    let meta = cargo_json::metadata(root, &["--features", "camel-cuda/cuda"])?;
    cargo_json::package_dir(&meta, "cust_raw")
}

/// Adds every driver function `fn cuXxx(` declared in `text` (bindgen writes `pub fn cuInit(`).
fn extract_cu_fns(text: &str, out: &mut BTreeSet<String>) {
    let mut rest = text;
    while let Some(i) = rest.find("fn cu") {
        let tail = &rest[i + 3..];
        let len = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..len];
        // Driver API names are `cu` + an upper-case letter (cuInit, cuMemAlloc_v2).
        let driver_name = name.as_bytes().get(2).is_some_and(u8::is_ascii_uppercase);
        if tail[len..].starts_with('(') && driver_name {
            out.insert(name.to_string());
        }
        rest = &tail[len..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_bindgen_and_ffi_declarations() {
        let mut s = BTreeSet::new();
        extract_cu_fns(
            "extern \"C\" {\n    pub fn cuInit(Flags: c_uint) -> CUresult;\n}\n\
             pub(crate) fn cuMemAlloc_v2(p: *mut u64, n: usize) -> u32;\nfn cudaNot ;\nfn custom_thing() {}",
            &mut s,
        );
        assert_eq!(
            s.into_iter().collect::<Vec<_>>(),
            ["cuInit", "cuMemAlloc_v2"]
        );
    }
}

//! `cargo xtask dist`: package everything a GPU host without Rust needs to run camel's GPU
//! tests and programs: the release test binaries and the `camel` program built with
//! `--features cuda`, stripped, plus `run-gpu-tests.sh`, in `dist/gpu/` (well under 64 MiB).
//! Also the benchmark programs of `bench/` (camel-bench: `gemm_bench`, `gemm_tune`,
//! `bench_memory`, `filter_bench`, `conv_bench`, `attention_bench`, `gpt_bench`) in `bin/`, the PyTorch comparison
//! scripts in `bench/torch/`, and `bench-gemm.sh`, which runs `gemm_bench` and
//! `bench/torch/gemm_torch.py` and leaves their CSVs for `cargo xtask gemm-report`. And the
//! labs: `dev/labs/` with the kernel sources they include
//! (`kernels/**/*.cu`, `*.cuh`), so `OUT=dir bash dev/labs/X_lab.sh` runs from `dist/gpu/` on a
//! GPU host with nvcc as it does from the repository root.
//! Executables are found through cargo's JSON messages, so `CARGO_TARGET_DIR` is honoured.
//! The PTX is embedded in the binaries. Built with `CAMEL_NO_STUB_RPATH=1`, so nothing in them
//! points at the no-driver stub: the GPU host's real driver is what loads.

use crate::cargo_json;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const OUT: &str = "dist/gpu";
/// The benchmark programs of camel-bench (`bench/`) copied into `bin/`.
const BENCH_PROGRAMS: &[&str] = &[
    "gemm_bench",
    "gemm_tune",
    "bench_memory",
    "filter_bench",
    "conv_bench",
    "attention_bench",
    "gpt_bench",
];

const BENCH_GEMM_SCRIPT: &str = r#"#!/usr/bin/env bash
# GEMM benchmark: camel's SGEMM ladder (bin/gemm_bench) and cuBLAS through PyTorch
# (bench/torch/gemm_torch.py, needs python3 with torch) at the same shapes. Both print a table; the
# CSVs go to $OUT (default: the current folder) as gemm_camel.csv and gemm_torch.csv, for
# `cargo xtask gemm-report <that folder>` on the build machine. DTYPES=bf16,f16 times the
# tensor-core ladder on those dtypes instead (then `gemm-report <folder> --page hgemm`).
# Usage: OUT=DIR [DTYPES=f32|bf16,f16] bench-gemm.sh [extra gemm_bench args, e.g. --all]
#        (env PYTHON, default python3)
set -u
here="$(cd "$(dirname "$0")" && pwd)"
OUT=${OUT:-.}
DTYPES=${DTYPES:-f32}
mkdir -p "$OUT"
rm -f "$OUT/gemm_camel.csv" "$OUT/gemm_torch.csv"
rc=0
# append a CSV to another, keeping one `# device:` line and one header
merge() { if [ -s "$2" ]; then tail -n +3 "$1" >> "$2"; else cat "$1" > "$2"; fi; rm -f "$1"; }
for d in ${DTYPES//,/ }; do
  echo "== camel GEMM ladder ($d): bin/gemm_bench"
  "$here/bin/gemm_bench" --dtype "$d" --shapes all --out "$OUT/part_camel.csv" "$@" || rc=$?
  [ -f "$OUT/part_camel.csv" ] && merge "$OUT/part_camel.csv" "$OUT/gemm_camel.csv"
  echo
  echo "== cuBLAS ($d, PyTorch): bench/torch/gemm_torch.py"
  "${PYTHON:-python3}" "$here/bench/torch/gemm_torch.py" --dtype "$d" --out "$OUT/part_torch.csv" || rc=$?
  [ -f "$OUT/part_torch.csv" ] && merge "$OUT/part_torch.csv" "$OUT/gemm_torch.csv"
  echo
done
for f in gemm_camel.csv gemm_torch.csv; do
  if [ -s "$OUT/$f" ]; then echo "bench-gemm: wrote $OUT/$f"; else echo "bench-gemm: no $OUT/$f"; rc=1; fi
done
exit $rc
"#;

const RUN_SCRIPT: &str = r#"#!/usr/bin/env bash
# Run every camel GPU test binary in this folder once, with the GPU required and outputs
# poisoned; the tests themselves run every ladder step and the PDL-off launches in-process.
# Prints each binary's result and ends with one summary line: "N passed, N failed".
# Usage: run-gpu-tests.sh [extra libtest args]   (env CAMEL_DATA_DIR for the MNIST tests)
set -u
here="$(cd "$(dirname "$0")" && pwd)"
export CAMEL_REQUIRE_GPU=1 CAMEL_POISON=1
pass=0; fail=0; bad_bins=""
one() { # name command...
  local name=$1; shift
  out="$("$@" 2>&1)"; rc=$?
  line="$(printf '%s\n' "$out" | grep -E '^test result:' | tail -n 1)"
  p=$(printf '%s\n' "$out" | grep -E '^test result:' | sed -E 's/.* ([0-9]+) passed.*/\1/' | awk '{s+=$1} END {print s+0}')
  f=$(printf '%s\n' "$out" | grep -E '^test result:' | sed -E 's/.* ([0-9]+) failed.*/\1/' | awk '{s+=$1} END {print s+0}')
  if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  pass=$((pass + p)); fail=$((fail + f))
  [ $rc -ne 0 ] && { bad_bins="$bad_bins $name"; printf '%s\n' "$out" | grep -vE '^test .* ok$' | tail -n 60; }
  printf '%-40s %s\n' "$name" "${line:-no test result (exit $rc)}"
}
for t in "$here"/tests/*; do one "$(basename "$t")" "$t" --test-threads=4 "$@"; done
[ -n "$bad_bins" ] && echo "failing binaries:$bad_bins"
echo "gpu-tests: $pass passed, $fail failed"
[ $fail -eq 0 ]
"#;

const SANITIZE_SCRIPT: &str = r#"#!/usr/bin/env bash
# compute-sanitizer over the GPU test binaries: memcheck on every binary, racecheck and synccheck
# on those whose kernels use shared memory. The large SGEMM cases are filtered out (the naive
# kernel at 1000^3 takes minutes under memcheck); the small, odd and batched ones run.
# Ends with one line: "sanitizer: N clean, N with errors".
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cs="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}"
export CAMEL_REQUIRE_GPU=1
clean=0; dirty=0
run() { # tool binary [filter]
  local tool=$1 t=$2 f=${3:-}
  local log; log="$(mktemp)"
  # API errors are returned to camel and tested (e.g. an unknown kernel name): not reported here.
  # racecheck and synccheck run one test at a time: with four test threads racecheck hung now and
  # then on the H100 (memory_ops' cross-entropy tests, at cross-entropy steps 3 and 4 alike, GPU
  # busy, every test thread waiting), and one stream serializes camel's kernels anyway.
  local threads=4; [ "$tool" = memcheck ] || threads=1
  "$cs" --tool "$tool" --report-api-errors no --error-exitcode 99 --print-limit 10 "$t" --test-threads=$threads $f >"$log" 2>&1; local rc=$?
  if grep -q 'terminated before first instrumented API call' "$log"; then  # CPU-only binary
    printf '%-10s %-36s no CUDA calls\n' "$tool" "$(basename "$t")"; rm -f "$log"; return
  fi
  local sum; sum="$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)"
  local res; res="$(grep -E '^test result:' "$log" | tail -n 1)"
  if [ $rc -eq 0 ]; then clean=$((clean+1)); else dirty=$((dirty+1)); grep -E 'Invalid|Race|Error|error|FAILED|panicked' "$log" | head -n 20; fi
  printf '%-10s %-36s rc=%-3s %s | %s
' "$tool" "$(basename "$t")" "$rc" "${sum:-no summary}" "${res:-}"
  rm -f "$log"
}
for t in "$here"/tests/*; do
  case "$(basename "$t")" in
    sgemm-*) run memcheck "$t" ladder_small; run memcheck "$t" ladder_batched
             run memcheck "$t" every_tuned; run memcheck "$t" ladder_fused ;;
    *) run memcheck "$t" ;;
  esac
done
for t in "$here"/tests/reduce-* "$here"/tests/softmax_loss-* "$here"/tests/matmul-* "$here"/tests/cuda-* "$here"/tests/memory_ops-* \
         "$here"/tests/memory_steps-*; do
  run racecheck "$t"; run synccheck "$t"
done
for t in "$here"/tests/sgemm-*; do run racecheck "$t" ladder_small; run racecheck "$t" every_tuned; done
for t in "$here"/tests/hgemm-*; do run racecheck "$t" step_17; run synccheck "$t" step_17; done
for t in "$here"/tests/filter-*; do run racecheck "$t" fused_step_6; run synccheck "$t" fused_step_6; done
echo "sanitizer: $clean clean, $dirty with errors"
[ $dirty -eq 0 ]
"#;

/// The release programs of camel-models copied into `bin/`: (target kind, name).
const MODEL_PROGRAMS: &[(&str, &str)] =
    &[("bin", "camel"), ("example", "xor"), ("example", "block")];

/// Builds with cargo (paths from its JSON messages, so `CARGO_TARGET_DIR` is honoured), strips
/// and copies into `dist/gpu/`; returns an error message on failure.
pub fn dist(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err(format!("dist takes no arguments, got {args:?}"));
    }
    let root = crate::repo_root();
    let no_stub = [("CAMEL_NO_STUB_RPATH", "1")];
    let built = cargo_json::build_executables(
        &root,
        &[
            "test",
            "--workspace",
            "--release",
            "--features",
            "camel-models/cuda",
            "--no-run",
        ],
        &no_stub,
        "cargo test --no-run",
    )?;
    // libtest harnesses of unit and integration tests (cargo test also builds the examples)
    let tests: Vec<_> = built.into_iter().filter(|e| e.test).collect();
    let programs = cargo_json::build_executables(
        &root,
        &[
            "build",
            "--release",
            "--features",
            "camel-models/cuda",
            "-p",
            "camel-models",
            "--bins",
            "--examples",
        ],
        &no_stub,
        "cargo build of the camel program",
    )?;
    let bench = build_bench_programs(&root)?;

    let out = root.join(OUT);
    let _ = fs::remove_dir_all(&out);
    for d in ["tests", "bin", "bench/torch"] {
        fs::create_dir_all(out.join(d)).map_err(|e| e.to_string())?;
    }
    for exe in &tests {
        // crate_name-hash: unique but readable
        copy_strip(
            &exe.path,
            &out.join("tests").join(exe.path.file_name().unwrap()),
        )?;
    }
    for (kind, name) in MODEL_PROGRAMS {
        let exe = programs
            .iter()
            .find(|e| e.is(kind) && e.name == *name)
            .ok_or_else(|| format!("cargo built no {kind} `{name}` in camel-models"))?;
        copy_strip(
            &exe.path,
            &out.join("bin").join(exe.path.file_name().unwrap()),
        )?;
    }
    for exe in &bench {
        copy_strip(exe, &out.join("bin").join(exe.file_name().unwrap()))?;
    }
    let torch = copy_files(&root.join("bench/torch"), &out.join("bench/torch"), &|p| {
        has_ext(p, &["py"])
    })?;
    // The labs build from the repository root (`OUT=dir bash dev/labs/X_lab.sh`, nvcc -I
    // kernels), so their folder and the kernel sources they include go in as they are.
    let labs = copy_files(&root.join("dev/labs"), &out.join("dev/labs"), &|_| true)?;
    copy_files(&root.join("kernels"), &out.join("kernels"), &|p| {
        has_ext(p, &["cu", "cuh"])
    })?;
    for (name, text) in [
        ("bench-gemm.sh", BENCH_GEMM_SCRIPT),
        ("run-gpu-tests.sh", RUN_SCRIPT),
        ("sanitize-gpu-tests.sh", SANITIZE_SCRIPT),
    ] {
        write_executable(&out.join(name), text)?;
    }
    let size: u64 = walk_size(&out);
    let names: Vec<_> = bench
        .iter()
        .map(|e| e.file_name().unwrap().to_string_lossy())
        .collect();
    println!(
        "dist: {} test binaries + camel, xor, block + {} + {torch} PyTorch script(s) \
         + {labs} lab file(s) in {OUT} ({:.1} MiB)",
        tests.len(),
        names.join(" + "),
        size as f64 / (1 << 20) as f64
    );
    // The bundle reaches the GPU host xz-compressed with a 1 GiB dictionary. Every test binary
    // embeds the same gzip'd PTX, which xz finds again in the binary before it (the binaries lie
    // side by side in the tar), so the dictionary must span a few binaries, not the folder; the
    // bound keeps the bundle's packing time and memory in reach.
    if size > 2 << 30 {
        return Err(format!(
            "{OUT} is {size} bytes, over the 2 GiB budget of the bundle"
        ));
    }
    Ok(())
}

/// Builds camel-bench's programs with the CUDA backend and returns the executables named in
/// [`BENCH_PROGRAMS`] (all of them, or an error).
fn build_bench_programs(root: &Path) -> Result<Vec<PathBuf>, String> {
    let built = cargo_json::build_executables(
        root,
        &[
            "build",
            "--release",
            "-p",
            "camel-bench",
            "--features",
            "cuda",
            "--bins",
        ],
        &[("CAMEL_NO_STUB_RPATH", "1")],
        "cargo build of the benchmark programs",
    )?;
    let mut found = Vec::new();
    for name in BENCH_PROGRAMS {
        let exe = built
            .iter()
            .find(|e| e.is("bin") && e.name == *name)
            .ok_or_else(|| format!("cargo built no `{name}` in camel-bench (bench/src/bin/)"))?;
        found.push(exe.path.clone());
    }
    Ok(found)
}

fn has_ext(p: &Path, exts: &[&str]) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| exts.contains(&e))
}

/// Copies the files under `src` that `keep` accepts into `dst`, keeping their relative paths;
/// returns how many.
fn copy_files(src: &Path, dst: &Path, keep: &dyn Fn(&Path) -> bool) -> Result<usize, String> {
    let rd = fs::read_dir(src).map_err(|e| format!("reading {}: {e}", src.display()))?;
    let mut n = 0;
    for entry in rd.flatten() {
        let p = entry.path();
        let to = dst.join(entry.file_name());
        if p.is_dir() {
            n += copy_files(&p, &to, keep)?;
        } else if p.is_file() && keep(&p) {
            fs::create_dir_all(dst).map_err(|e| format!("creating {}: {e}", dst.display()))?;
            fs::copy(&p, &to).map_err(|e| format!("copy {}: {e}", p.display()))?;
            n += 1;
        }
    }
    Ok(n)
}

fn write_executable(path: &Path, text: &str) -> Result<(), String> {
    fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let mut perm = fs::metadata(path).map_err(|e| e.to_string())?.permissions();
    perm.set_mode(0o755);
    fs::set_permissions(path, perm).map_err(|e| format!("chmod {}: {e}", path.display()))
}

fn copy_strip(src: &Path, dst: &Path) -> Result<(), String> {
    fs::copy(src, dst).map_err(|e| format!("copy {}: {e}", src.display()))?;
    let ok = Command::new("strip")
        .arg(dst)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        return Err(format!(
            "strip {} failed (is binutils installed?)",
            dst.display()
        ));
    }
    Ok(())
}

fn walk_size(p: &Path) -> u64 {
    fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => walk_size(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

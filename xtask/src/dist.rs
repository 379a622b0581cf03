//! `cargo xtask dist`: package everything a GPU host without Rust needs to run camel's GPU
//! tests and programs: the release test binaries and the `camel` program built with
//! `--features cuda`, stripped, plus `run-gpu-tests.sh`, in `dist/gpu/` (well under 64 MiB).
//! Also the GEMM benchmark: camel-cuda's `gemm_bench` (and `gemm_tune`, when that example
//! exists) in `bin/`, `bench/*.py` in `bench/`, and `bench-gemm.sh`, which runs `gemm_bench` and
//! `bench/gemm_torch.py` and leaves their CSVs for `cargo xtask gemm-report`.
//! The PTX is embedded in the binaries. Built with `CAMEL_NO_STUB_RPATH=1`, so nothing in them
//! points at the no-driver stub: the GPU host's real driver is what loads.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const OUT: &str = "dist/gpu";
/// camel-cuda examples copied into `bin/` when cargo builds them (`gemm_bench` is required).
const CUDA_EXAMPLES: &[&str] = &["gemm_bench", "gemm_tune"];

const BENCH_GEMM_SCRIPT: &str = r#"#!/usr/bin/env bash
# GEMM benchmark: camel's SGEMM ladder (bin/gemm_bench) and cuBLAS through PyTorch
# (bench/gemm_torch.py, needs python3 with torch) at the same shapes. Both print a table; the
# CSVs go to $OUT (default: the current folder) as gemm_camel.csv and gemm_torch.csv, for
# `cargo xtask gemm-report <that folder>` on the build machine.
# Usage: OUT=DIR bench-gemm.sh [extra gemm_bench args, e.g. --all]   (env PYTHON, default python3)
set -u
here="$(cd "$(dirname "$0")" && pwd)"
OUT=${OUT:-.}
mkdir -p "$OUT"
rm -f "$OUT/gemm_camel.csv" "$OUT/gemm_torch.csv"
rc=0
echo "== camel SGEMM ladder: bin/gemm_bench"
"$here/bin/gemm_bench" --shapes all --out "$OUT/gemm_camel.csv" "$@" || rc=$?
echo
echo "== cuBLAS (PyTorch): bench/gemm_torch.py"
"${PYTHON:-python3}" "$here/bench/gemm_torch.py" --out "$OUT/gemm_torch.csv" || rc=$?
echo
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
echo "sanitizer: $clean clean, $dirty with errors"
[ $dirty -eq 0 ]
"#;

/// Build, strip and copy; returns an error message on failure.
pub fn dist(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err(format!("dist takes no arguments, got {args:?}"));
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let tests_json = Command::new(&cargo)
        .args([
            "test",
            "--workspace",
            "--release",
            "--features",
            "camel-models/cuda",
            "--no-run",
            "--message-format=json",
        ])
        .env("CAMEL_NO_STUB_RPATH", "1")
        .output()
        .map_err(|e| format!("running cargo: {e}"))?;
    if !tests_json.status.success() {
        return Err(format!(
            "cargo test --no-run failed:\n{}",
            String::from_utf8_lossy(&tests_json.stderr)
        ));
    }
    let status = Command::new(&cargo)
        .args([
            "build",
            "--release",
            "--features",
            "camel-models/cuda",
            "-p",
            "camel-models",
            "--bins",
            "--examples",
        ])
        .env("CAMEL_NO_STUB_RPATH", "1")
        .status()
        .map_err(|e| format!("running cargo: {e}"))?;
    if !status.success() {
        return Err("cargo build of the camel program failed".into());
    }
    let examples = build_cuda_examples(&cargo)?;
    let _ = fs::remove_dir_all(OUT);
    for d in ["tests", "bin", "bench"] {
        fs::create_dir_all(Path::new(OUT).join(d)).map_err(|e| e.to_string())?;
    }
    // Every test executable cargo reported (libtest harness binaries of unit and integration tests).
    let stdout = String::from_utf8_lossy(&tests_json.stdout);
    let mut n = 0;
    for line in stdout.lines() {
        // test harnesses only: they live in target/release/deps (the bins and examples that
        // cargo test also builds sit in target/release and target/release/examples)
        if !line.contains("/deps/") {
            continue;
        }
        let Some(pos) = line.find("\"executable\":\"") else {
            continue;
        };
        let rest = &line[pos + 14..];
        let Some(end) = rest.find('"') else { continue };
        let exe = Path::new(&rest[..end]);
        let name = exe.file_name().unwrap().to_string_lossy();
        // keep crate_name-hash unique but readable
        copy_strip(exe, &Path::new(OUT).join("tests").join(&*name))?;
        n += 1;
    }
    for prog in [
        "camel",
        "examples/xor",
        "examples/block",
        "examples/bench_memory",
    ] {
        let src = Path::new("target/release").join(prog);
        let dst = Path::new(OUT)
            .join("bin")
            .join(Path::new(prog).file_name().unwrap());
        copy_strip(&src, &dst)?;
    }
    for exe in &examples {
        copy_strip(
            exe,
            &Path::new(OUT).join("bin").join(exe.file_name().unwrap()),
        )?;
    }
    let scripts = copy_bench_scripts()?;
    let bench = Path::new(OUT).join("bench-gemm.sh");
    fs::write(&bench, BENCH_GEMM_SCRIPT).map_err(|e| e.to_string())?;
    Command::new("chmod")
        .arg("+x")
        .arg(&bench)
        .status()
        .map_err(|e| e.to_string())?;
    let script = Path::new(OUT).join("run-gpu-tests.sh");
    fs::write(&script, RUN_SCRIPT).map_err(|e| e.to_string())?;
    Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .map_err(|e| e.to_string())?;
    let san = Path::new(OUT).join("sanitize-gpu-tests.sh");
    fs::write(&san, SANITIZE_SCRIPT).map_err(|e| e.to_string())?;
    Command::new("chmod")
        .arg("+x")
        .arg(&san)
        .status()
        .map_err(|e| e.to_string())?;
    let size: u64 = walk_size(Path::new(OUT));
    let names: Vec<_> = examples
        .iter()
        .map(|e| e.file_name().unwrap().to_string_lossy())
        .collect();
    println!(
        "dist: {n} test binaries + camel, xor, block, bench_memory + {} + {scripts} bench script(s) in {OUT} ({:.1} MiB)",
        names.join(" + "),
        size as f64 / (1 << 20) as f64
    );
    // the GPU host's carry limit is 64 MiB for the bundle. Every test binary embeds the same
    // gzip'd PTX (about 4.5 MB of it is softmax and cross-entropy), so xz packs this folder
    // well only with a dictionary that spans it: `tar cf - dist/gpu | xz --lzma2=preset=6,
    // dict=256MiB` took 210 MiB to 21 MB; the default (8 MiB) only to 110 MB, gzip to 0.8
    if size > 256 << 20 {
        return Err(format!(
            "{OUT} is {size} bytes, over the 256 MiB budget (the bundle's xz dictionary)"
        ));
    }
    Ok(())
}

/// Builds camel-cuda's examples with `--features cuda` and returns the executables of those
/// named in [`CUDA_EXAMPLES`] (cargo's JSON messages name them, wherever the target folder is).
fn build_cuda_examples(cargo: &str) -> Result<Vec<PathBuf>, String> {
    let out = Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "camel-cuda",
            "--features",
            "cuda",
            "--examples",
            "--message-format=json",
        ])
        .env("CAMEL_NO_STUB_RPATH", "1")
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running cargo: {e}"))?;
    if !out.status.success() {
        return Err("cargo build of the camel-cuda examples failed".into());
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut found = Vec::new();
    for line in stdout.lines() {
        if !line.contains("\"reason\":\"compiler-artifact\"") || !line.contains("\"example\"") {
            continue;
        }
        let Some(pos) = line.find("\"executable\":\"") else {
            continue;
        };
        let rest = &line[pos + 14..];
        let Some(end) = rest.find('"') else { continue };
        let exe = PathBuf::from(&rest[..end]);
        let wanted = exe
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| CUDA_EXAMPLES.contains(&n));
        if wanted && !found.contains(&exe) {
            found.push(exe);
        }
    }
    if !found.iter().any(|e| e.ends_with("gemm_bench")) {
        return Err(
            "cargo built no gemm_bench example (crates/camel-cuda/examples/gemm_bench.rs)".into(),
        );
    }
    found.sort();
    Ok(found)
}

/// Copies `bench/*.py` into `dist/gpu/bench/`; returns how many.
fn copy_bench_scripts() -> Result<usize, String> {
    let mut n = 0;
    let rd = fs::read_dir("bench").map_err(|e| format!("reading bench/: {e}"))?;
    for entry in rd.flatten() {
        let p = entry.path();
        if p.extension().is_some_and(|e| e == "py") && p.is_file() {
            let dst = Path::new(OUT).join("bench").join(p.file_name().unwrap());
            fs::copy(&p, &dst).map_err(|e| format!("copy {}: {e}", p.display()))?;
            n += 1;
        }
    }
    Ok(n)
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
                .map(|e| {
                    let m = e.metadata().unwrap();
                    if m.is_dir() {
                        walk_size(&e.path())
                    } else {
                        m.len()
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

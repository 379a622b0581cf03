//! `cargo xtask gemm-search [--max N] [--jobs N]`: the compile half of the SGEMM autotuner.
//!
//! Enumerates every valid tile configuration of the templated kernels in
//! `kernels/matmul/gemm_tile.cuh` — block tiling (steps 7–9: BM, BN, BK, TM, TN), warp tiling
//! (step 10) and warp tiling with double buffering (step 11: also WM, WN, WNITER and the thread
//! count) — writes them as `search_space.cuh` chunks, compiles each chunk of
//! `kernels/matmul/07_autotuned.cu` with `-DCAMEL_GEMM_SEARCH` to an sm_90 cubin (no JIT on the
//! GPU host), and lists the candidates in `dist/gemm-search/candidates.txt`. The timing half is
//! camel-cuda's `gemm_tune` example, run on the GPU: it times every candidate at the benchmark
//! shapes and writes the winners (`tuned_07/10/11.cuh`, `matmul_tuned.rs`) for the library.

use std::fs;
use std::path::Path;
use std::process::Command;

/// One templated kernel configuration.
#[derive(Clone, Debug)]
enum Config {
    Block {
        bm: u32,
        bn: u32,
        bk: u32,
        tm: u32,
        tn: u32,
    },
    Warp {
        db: bool,
        bm: u32,
        bn: u32,
        bk: u32,
        wm: u32,
        wn: u32,
        wni: u32,
        tm: u32,
        tn: u32,
        nt: u32,
    },
}

impl Config {
    fn kernel(&self) -> String {
        match *self {
            Config::Block { bm, bn, bk, tm, tn } => format!("sgemm_bt_{bm}x{bn}x{bk}_{tm}x{tn}"),
            Config::Warp {
                db,
                bm,
                bn,
                bk,
                wm,
                wn,
                wni,
                tm,
                tn,
                nt,
            } => format!(
                "sgemm_{}_{bm}x{bn}x{bk}_{wm}x{wn}x{wni}_{tm}x{tn}_{nt}",
                if db { "db" } else { "wt" }
            ),
        }
    }

    /// The macro line that instantiates it (see the end of gemm_tile.cuh): the kernel name's
    /// numbers, in order, are the macro's arguments (`sgemm_bt_64x64x16_4x4` → `BT(64, 64, 16, 4, 4)`).
    fn line(&self) -> String {
        let name = self.kernel();
        let (kind, nums) = name["sgemm_".len()..]
            .split_once('_')
            .expect("sgemm_<kind>_...");
        format!(
            "{}({})",
            kind.to_uppercase(),
            nums.replace(['x', '_'], ", ")
        )
    }
}

/// The loader's float4s divide evenly among the threads, and every thread has at least one.
fn loads_divide(bk: u32, bm: u32, bn: u32, nt: u32) -> bool {
    let (va, vb) = (bk * bm / 4, bk * bn / 4);
    va >= nt && vb >= nt && va % nt == 0 && vb % nt == 0
}

/// Shared memory of one buffer pair (rows padded by 4 floats), in bytes.
fn smem(bk: u32, bm: u32, bn: u32) -> u32 {
    bk * (bm + 4 + bn + 4) * 4
}

/// The search space: the template's own static_asserts, ≤ 48 KiB static shared memory,
/// 16–128 accumulators per thread, and a few pruning rules that keep it compilable in minutes.
fn search_space() -> Vec<Config> {
    let mut v = Vec::new();
    for bm in [32, 64, 128, 256] {
        for bn in [32, 64, 128, 256] {
            for bk in [8, 16] {
                for tm in [4, 8, 16] {
                    for tn in [4, 8] {
                        if bm % tm != 0 || bn % tn != 0 {
                            continue;
                        }
                        let nt = (bm / tm) * (bn / tn);
                        if !(64..=256).contains(&nt)
                            || !loads_divide(bk, bm, bn, nt)
                            || smem(bk, bm, bn) > 48 * 1024
                            || !(16..=128).contains(&(tm * tn))
                        {
                            continue;
                        }
                        v.push(Config::Block { bm, bn, bk, tm, tn });
                    }
                }
            }
        }
    }
    for db in [false, true] {
        for bm in [64, 128, 256] {
            for bn in [64, 128, 256] {
                for bk in [8, 16] {
                    for wm in [32, 64, 128] {
                        for wn in [32, 64, 128] {
                            for wni in [1, 2, 4] {
                                for tn in [4, 8] {
                                    for nt in [128, 256] {
                                        let tm = 8;
                                        if bm % wm != 0
                                            || bn % wn != 0
                                            || (bm / wm) * (bn / wn) != nt / 32
                                        {
                                            continue;
                                        }
                                        let d = 32 * tm * tn * wni;
                                        if (wm * wn) % d != 0 {
                                            continue;
                                        }
                                        let wmi = wm * wn / d;
                                        if wmi == 0 || wm % wmi != 0 || wn % wni != 0 || wmi > 2 {
                                            continue;
                                        }
                                        let (wsm, wsn) = (wm / wmi, wn / wni);
                                        if wsn % tn != 0
                                            || wsm % tm != 0
                                            || (wsn / tn) * (wsm / tm) != 32
                                        {
                                            continue;
                                        }
                                        let acc = wmi * tm * wni * tn;
                                        let bufs = if db { 2 } else { 1 };
                                        if !loads_divide(bk, bm, bn, nt)
                                            || !(32..=128).contains(&acc)
                                            || bufs * smem(bk, bm, bn) > 48 * 1024
                                        {
                                            continue;
                                        }
                                        v.push(Config::Warp {
                                            db,
                                            bm,
                                            bn,
                                            bk,
                                            wm,
                                            wn,
                                            wni,
                                            tm,
                                            tn,
                                            nt,
                                        });
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    v
}

pub fn gemm_search(args: &[String]) -> Result<(), String> {
    let mut max = usize::MAX;
    let mut compile = true;
    let mut jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| -> Result<usize, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or(format!("{flag} needs a number"))
        };
        match a.as_str() {
            "--max" => max = value("--max")?,
            "--jobs" | "-j" => jobs = value("--jobs")?.max(1),
            "--script-only" => compile = false,
            other => return Err(format!("gemm-search: unknown option `{other}`")),
        }
    }
    let root = crate::repo_root();
    let out = root.join("dist/gemm-search");
    if out.exists() {
        fs::remove_dir_all(&out).map_err(|e| format!("removing {}: {e}", out.display()))?;
    }
    fs::create_dir_all(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let mut space = search_space();
    space.truncate(max);
    let per_chunk = 12;
    let chunks: Vec<&[Config]> = space.chunks(per_chunk).collect();
    println!(
        "gemm-search: {} configurations ({} block-tiled, {} warp-tiled, {} double-buffered) in {} chunks",
        space.len(),
        space.iter().filter(|c| matches!(c, Config::Block { .. })).count(),
        space.iter().filter(|c| matches!(c, Config::Warp { db: false, .. })).count(),
        space.iter().filter(|c| matches!(c, Config::Warp { db: true, .. })).count(),
        chunks.len()
    );
    let mut list = String::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let dir = out.join(format!("chunk{i:03}"));
        fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let header: String = chunk.iter().map(|c| c.line() + "\n").collect();
        fs::write(dir.join("search_space.cuh"), header).map_err(|e| e.to_string())?;
        for c in chunk.iter() {
            list += &format!("search_{i:03}.cubin {}\n", c.kernel());
        }
    }
    // The same compilation as a script, for a GPU host with nvcc and many cores (run from the
    // repository root there): `bash dist/gemm-search/compile.sh`.
    let script = String::from(
        "#!/usr/bin/env bash\n# Written by `cargo xtask gemm-search`: compiles the candidate chunks to sm_90 cubins.\n\
         # Run from the repository root; uses $NVCC or nvcc on PATH, all cores.\nset -euo pipefail\n\
         NVCC=${NVCC:-nvcc}\nexport D=dist/gemm-search\nls -d $D/chunk* | xargs -P \"$(nproc)\" -I{} sh -c \\\n  \
         'c={}; n=${c##*chunk}; \"$0\" -cubin -O3 -std=c++17 -arch=sm_90 -DCAMEL_GEMM_SEARCH -I \"$c\" kernels/matmul/07_autotuned.cu -o $D/search_$n.cubin' \"$NVCC\"\n\
         echo \"compiled $(ls $D/*.cubin | wc -l) chunks\"\n",
    );
    fs::write(out.join("compile.sh"), &script).map_err(|e| e.to_string())?;
    fs::write(out.join("candidates.txt"), &list).map_err(|e| e.to_string())?;
    if !compile {
        println!(
            "gemm-search: wrote {} (headers, candidates.txt, compile.sh); compile there with \
             `bash dist/gemm-search/compile.sh`, then run `gemm_tune dist/gemm-search`",
            out.display()
        );
        return Ok(());
    }
    let nvcc = crate::find_nvcc(&root)?;
    // compile the chunks, `jobs` at a time
    let src = root.join("kernels/matmul/07_autotuned.cu");
    let next = std::sync::atomic::AtomicUsize::new(0);
    let errors = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= chunks.len() {
                    break;
                }
                let dir = out.join(format!("chunk{i:03}"));
                let cubin = out.join(format!("search_{i:03}.cubin"));
                let res = Command::new(&nvcc)
                    .args([
                        "-cubin",
                        "-O3",
                        "-std=c++17",
                        "-arch=sm_90",
                        "-DCAMEL_GEMM_SEARCH",
                    ])
                    .arg("-I")
                    .arg(&dir)
                    .arg(&src)
                    .arg("-o")
                    .arg(&cubin)
                    .output();
                match res {
                    Ok(o) if o.status.success() => println!("  compiled chunk {i}"),
                    Ok(o) => errors
                        .lock()
                        .unwrap()
                        .push(format!("chunk {i}: {}", String::from_utf8_lossy(&o.stderr))),
                    Err(e) => errors.lock().unwrap().push(format!("chunk {i}: {e}")),
                }
            });
        }
    });
    let errors = errors.into_inner().unwrap();
    if !errors.is_empty() {
        return Err(format!("gemm-search: nvcc failed:\n{}", errors.join("\n")));
    }
    let size: u64 = fs::read_dir(&out)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    println!(
        "gemm-search: wrote {} ({:.1} MiB); on the GPU host run `gemm_tune {}` (see docs/kernels/matmul.md)",
        out.display(),
        size as f64 / (1 << 20) as f64,
        Path::new("dist/gemm-search").display()
    );
    Ok(())
}

//! camel-cuda build script. With the `cuda` feature it
//!
//! 1. embeds the PTX made by `cargo xtask build-kernels`: writes `$OUT_DIR/ptx_modules.rs`, an
//!    `include_bytes!` table of `kernels/ptx/**/*.ptx`, each gzip-compressed into `$OUT_DIR/ptx/`
//!    (PTX compresses ~10×; every test binary carries all of it), and fails with a clear message when a
//!    `kernels/**/*.cu` has no PTX yet;
//! 2. builds a no-driver `libcuda` stub from `stub/libcuda_symbols.txt` (every entry point returns
//!    `CUDA_ERROR_NO_DEVICE`) so the crate links on machines without the NVIDIA driver:
//!    - `$OUT_DIR/cuda-stub/link/libcuda.so` (soname `libcuda.so.1`) is always put on the link
//!      search path. It is found by `-lcuda` at link time only: the dynamic loader looks for
//!      `libcuda.so.1`, which that folder does not hold, so it can never be loaded from there.
//!    - only when this machine has no real `libcuda.so.1` (and `CAMEL_NO_STUB_RPATH` is unset),
//!      `$OUT_DIR/camel-cuda-stub/libcuda.so.1` is made and put on the search path too. Cargo
//!      adds search paths inside the target folder to `LD_LIBRARY_PATH` for `cargo test`,
//!      `cargo run` and `cargo bench`, so test binaries of every crate above camel-cuda load the
//!      stub there, answer "no device" and skip their GPU tests. Binaries themselves never carry
//!      an rpath: run outside cargo they always load the system's `libcuda.so.1`.
//!
//! Without the feature it only writes an empty PTX table.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Name of the folder holding the run-time stub; camel-cuda recognises the stub by it at run time.
const RUNTIME_STUB_DIR: &str = "camel-cuda-stub";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let cuda = env::var_os("CARGO_FEATURE_CUDA").is_some();

    let table = if cuda {
        ptx_table(&manifest_dir, &out_dir)
    } else {
        empty_table()
    };
    fs::write(out_dir.join("ptx_modules.rs"), table).expect("writing ptx_modules.rs");

    if cuda && env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        build_stub(&manifest_dir, &out_dir);
    }
}

fn empty_table() -> String {
    "/// Embedded PTX: built without the `cuda` feature, so none.\n\
     pub(crate) static PTX_MODULES: &[(&str, &[u8])] = &[];\n"
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// PTX
// ---------------------------------------------------------------------------------------------

fn ptx_table(manifest_dir: &Path, out_dir: &Path) -> String {
    let kernels = manifest_dir.join("../../kernels");
    let kernels = kernels.canonicalize().unwrap_or(kernels);
    println!("cargo:rerun-if-changed={}", kernels.display());
    let ptx_dir = kernels.join("ptx");

    let mut sources = Vec::new();
    let mut headers = Vec::new();
    walk(
        &kernels,
        &ptx_dir,
        &mut |p| match p.extension().and_then(|e| e.to_str()) {
            Some("cu") => sources.push(p.to_path_buf()),
            Some("cuh") => headers.push(p.to_path_buf()),
            _ => {}
        },
    );
    sources.sort();
    let newest_header = headers.iter().filter_map(|h| mtime(h)).max();

    let mut missing = Vec::new();
    for src in &sources {
        let rel = src.strip_prefix(&kernels).unwrap();
        let ptx = ptx_dir.join(rel).with_extension("ptx");
        match mtime(&ptx) {
            None => missing.push(format!(
                "kernels/{} (no kernels/ptx/{})",
                rel.display(),
                rel.with_extension("ptx").display()
            )),
            Some(t) => {
                if mtime(src).is_some_and(|s| s > t) || newest_header.is_some_and(|h| h > t) {
                    println!(
                        "cargo:warning=kernels/ptx/{} is older than its source or a kernels/**/*.cuh header: \
                         run `cargo xtask build-kernels`",
                        rel.with_extension("ptx").display()
                    );
                }
            }
        }
    }
    if !missing.is_empty() {
        eprintln!(
            "\nerror: camel-cuda (feature `cuda`) embeds the kernels' PTX, which has not been built:\n  {}\n\n\
             Run `cargo xtask build-kernels` first (it needs nvcc: $NVCC, PATH, $CUDA_HOME/bin, or\n\
             `bash .ci/install-nvcc.sh`, which installs the pinned nvcc into .tools/nvcc).\n",
            missing.join("\n  ")
        );
        std::process::exit(1);
    }

    let mut ptx_files = Vec::new();
    walk(&ptx_dir, Path::new(""), &mut |p| {
        if p.extension().is_some_and(|e| e == "ptx") {
            ptx_files.push(p.to_path_buf());
        }
    });
    ptx_files.sort();
    let mut table = String::from(
        "/// Embedded PTX, generated by build.rs: (module name = path under kernels/ptx without\n\
         /// `.ptx`, gzip-compressed PTX text).\n\
         pub(crate) static PTX_MODULES: &[(&str, &[u8])] = &[\n",
    );
    let gz_dir = out_dir.join("ptx");
    for p in &ptx_files {
        let rel = p.strip_prefix(&ptx_dir).unwrap().with_extension("");
        let name = rel.to_string_lossy().replace('\\', "/");
        let text = fs::read(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
        let gz = gz_dir.join(format!("{}.ptx.gz", name.replace('/', "__")));
        fs::create_dir_all(&gz_dir).expect("creating $OUT_DIR/ptx");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut enc, &text).expect("gzip");
        fs::write(&gz, enc.finish().expect("gzip")).expect("writing compressed PTX");
        let path = gz.to_string_lossy();
        writeln!(table, "    ({name:?}, include_bytes!({path:?})),").unwrap();
    }
    table.push_str("];\n");
    table
}

fn walk(dir: &Path, skip: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path == skip {
            continue;
        }
        if path.is_dir() {
            walk(&path, skip, f);
        } else {
            f(&path);
        }
    }
}

fn mtime(p: &Path) -> Option<std::time::SystemTime> {
    fs::metadata(p).and_then(|m| m.modified()).ok()
}

// ---------------------------------------------------------------------------------------------
// libcuda stub
// ---------------------------------------------------------------------------------------------

fn build_stub(manifest_dir: &Path, out_dir: &Path) {
    println!("cargo:rerun-if-env-changed=CAMEL_NO_STUB_RPATH");
    println!("cargo:rerun-if-env-changed=CC");
    // A driver installed or removed later updates the loader cache: look again then.
    if Path::new("/etc/ld.so.cache").exists() {
        println!("cargo:rerun-if-changed=/etc/ld.so.cache");
    }
    let list = manifest_dir.join("stub/libcuda_symbols.txt");
    println!("cargo:rerun-if-changed={}", list.display());
    let symbols =
        fs::read_to_string(&list).unwrap_or_else(|e| panic!("reading {}: {e}", list.display()));

    let dir = out_dir.join("cuda-stub");
    let link_dir = dir.join("link");
    fs::create_dir_all(&link_dir).unwrap();
    let c_file = dir.join("libcuda_stub.c");
    fs::write(&c_file, stub_source(&symbols)).unwrap();
    let so = link_dir.join("libcuda.so");
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o"])
        .arg(&so)
        .arg(&c_file)
        .status()
        .unwrap_or_else(|e| {
            panic!("camel-cuda: running the C compiler `{cc}` for the libcuda stub: {e}")
        });
    assert!(
        status.success(),
        "camel-cuda: `{cc}` failed to build the libcuda stub ({status})"
    );
    println!("cargo:rustc-link-search=native={}", link_dir.display());

    let runtime_dir = out_dir.join(RUNTIME_STUB_DIR);
    let _ = fs::remove_dir_all(&runtime_dir);
    let disabled = no_stub_rpath();
    if real_libcuda().is_none() && !disabled {
        fs::create_dir_all(&runtime_dir).unwrap();
        fs::copy(&so, runtime_dir.join("libcuda.so.1")).unwrap();
        println!("cargo:rustc-link-search=native={}", runtime_dir.display());
    }
}

/// C source of the stub: every listed `cu*` function returns CUDA_ERROR_NO_DEVICE (100), except
/// the two error-string lookups, which answer for the codes the stub itself returns.
fn stub_source(symbols: &str) -> String {
    let mut c = String::from(
        "/* camel-cuda libcuda stub, generated by crates/camel-cuda/build.rs. No NVIDIA driver here:\n\
         \x20* every driver entry point returns CUDA_ERROR_NO_DEVICE (100). */\n\
         const char camel_cuda_libcuda_stub[] = \"camel-cuda libcuda stub (no NVIDIA driver)\";\n\
         static int lookup(int e, const char **s, const char *ok, const char *none) {\n\
         \x20   if (!s) return 1;\n\
         \x20   if (e == 0) { *s = ok; return 0; }\n\
         \x20   if (e == 100) { *s = none; return 0; }\n\
         \x20   return 1; /* CUDA_ERROR_INVALID_VALUE: unknown to the stub */\n\
         }\n\
         int cuGetErrorName(int e, const char **s) { return lookup(e, s, \"CUDA_SUCCESS\", \"CUDA_ERROR_NO_DEVICE\"); }\n\
         int cuGetErrorString(int e, const char **s) {\n\
         \x20   return lookup(e, s, \"no error\", \"no CUDA-capable device is detected\");\n\
         }\n",
    );
    for name in symbols
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        if name == "cuGetErrorName" || name == "cuGetErrorString" {
            continue;
        }
        assert!(
            name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "bad symbol name `{name}` in stub/libcuda_symbols.txt"
        );
        writeln!(c, "int {name}(void) {{ return 100; }}").unwrap();
    }
    c
}

/// Path of a real (driver) `libcuda.so.1` on this machine, if any: the loader cache first, then
/// the usual driver folders and `LD_LIBRARY_PATH`. Toolkit `stubs/` folders and camel's own stub
/// do not count.
fn real_libcuda() -> Option<PathBuf> {
    let is_real = |p: &Path| {
        let s = p.to_string_lossy();
        p.is_file()
            && !s.contains("/stubs/")
            && !s.contains(RUNTIME_STUB_DIR)
            && !s.contains("cuda-stub/link")
    };
    for ldconfig in ["/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"] {
        let Ok(out) = Command::new(ldconfig).arg("-p").output() else {
            continue;
        };
        if !out.status.success() {
            continue;
        }
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let line = line.trim();
            if line.starts_with("libcuda.so.1 ") {
                if let Some(path) = line.rsplit("=> ").next().map(|p| PathBuf::from(p.trim())) {
                    if is_real(&path) {
                        return Some(path);
                    }
                }
            }
        }
        break;
    }
    let mut dirs: Vec<PathBuf> = env::var_os("LD_LIBRARY_PATH")
        .map(|v| env::split_paths(&v).collect())
        .unwrap_or_default();
    dirs.extend(
        [
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
            "/usr/lib64",
            "/usr/lib",
            "/usr/local/nvidia/lib64",
            "/usr/local/nvidia/lib",
            "/usr/lib/wsl/lib",
            "/run/opengl-driver/lib",
        ]
        .map(PathBuf::from),
    );
    dirs.into_iter()
        .map(|d| d.join("libcuda.so.1"))
        .find(|p| is_real(p))
}

/// `CAMEL_NO_STUB_RPATH`, spelled as every camel boolean (`camel_cuda::config::parse_flag`): a
/// value that is none of `1/0/on/off/true/false` stops the build with the accepted values.
fn no_stub_rpath() -> bool {
    let Ok(v) = env::var("CAMEL_NO_STUB_RPATH") else {
        return false;
    };
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" => true,
        "0" | "off" | "false" | "" => false,
        _ => panic!("CAMEL_NO_STUB_RPATH={v:?} is not accepted; expected 1/0/on/off/true/false"),
    }
}

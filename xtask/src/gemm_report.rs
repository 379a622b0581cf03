//! `cargo xtask gemm-report DIR [--docs DOCS] [--page NAME]`: turn the GEMM benchmark CSVs of one GPU run
//! (`DIR/gemm_camel.csv` from camel-bench's `gemm_bench`, `DIR/gemm_torch.csv` from
//! `bench/torch/gemm_torch.py`; columns `impl,step,m,k,n,ms,gflops`, an optional `# device: NAME`
//! first line) into `docs/gemm-results.md` (a table: one row per shape, one column per ladder
//! step and per cuBLAS mode, GFLOP/s with the ratio to cuBLAS) and `docs/gemm.png` (GFLOP/s
//! against the square size, log-log). `--page hgemm` names them `docs/hgemm-results.md` and
//! `docs/hgemm.png`: the tensor-core ladder's run (`gemm_bench --dtype bf16|f16`, rows named
//! `<step>_<dtype>`, each compared with `cublas_<dtype>` from `gemm_torch.py --dtype`).
//!
//! The plot's text is drawn with a TrueType font read at run time (ab_glyph, no fontconfig):
//! `$CAMEL_PLOT_FONT`, else DejaVu Sans or Liberation Sans from the usual system folders, else
//! any `*.ttf` under `/usr/share/fonts` (Debian/Ubuntu: `apt-get install fonts-dejavu-core`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

const CAMEL_CSV: &str = "gemm_camel.csv";
const TORCH_CSV: &str = "gemm_torch.csv";
const FP32_REF: &str = "cublas_fp32";
const TF32_REF: &str = "cublas_tf32";

/// One CSV row.
#[derive(Clone, Debug)]
struct Rec {
    imp: String,
    step: String,
    shape: (usize, usize, usize),
    gflops: f64,
}

/// One CSV file: its `# device:` comment and rows.
struct Table {
    device: Option<String>,
    rows: Vec<Rec>,
}

pub fn gemm_report(args: &[String]) -> Result<(), String> {
    let mut dir = None;
    let mut page = "gemm".to_string();
    let mut docs = crate::repo_root().join("docs");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--docs" => docs = PathBuf::from(it.next().ok_or("--docs needs a folder")?),
            "--page" => page = it.next().ok_or("--page needs a name")?.clone(),
            s if s.starts_with('-') => return Err(format!("gemm-report: unknown option `{s}`")),
            s if dir.is_none() => dir = Some(s.to_string()),
            s => return Err(format!("gemm-report: unexpected argument `{s}`")),
        }
    }
    let dir = dir.ok_or(
        "usage: cargo xtask gemm-report DIR [--docs DOCS]  (DIR holds gemm_camel.csv and gemm_torch.csv)",
    )?;
    let camel = read_csv(&Path::new(&dir).join(CAMEL_CSV))?;
    let torch_path = Path::new(&dir).join(TORCH_CSV);
    let torch = if torch_path.is_file() {
        read_csv(&torch_path)?
    } else {
        eprintln!(
            "warning: {} not found: the report has no cuBLAS columns",
            torch_path.display()
        );
        Table {
            device: None,
            rows: Vec::new(),
        }
    };
    if camel.rows.is_empty() {
        return Err(format!("{dir}/{CAMEL_CSV} has no rows"));
    }
    let data = Data::new(&camel, &torch);
    fs::create_dir_all(&docs).map_err(|e| format!("creating {}: {e}", docs.display()))?;
    let (md, png) = (format!("{page}-results.md"), format!("{page}.png"));
    let md_path = docs.join(&md);
    fs::write(&md_path, markdown(&data, &dir, &md, &png))
        .map_err(|e| format!("writing {}: {e}", md_path.display()))?;
    println!("gemm-report: wrote {}", md_path.display());
    let png_path = docs.join(&png);
    plot(&data, &png_path)?;
    println!("gemm-report: wrote {}", png_path.display());
    Ok(())
}

fn read_csv(path: &Path) -> Result<Table, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut device = None;
    let mut header: Option<Vec<String>> = None;
    let mut rows = Vec::new();
    for (no, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(c) = line.strip_prefix('#') {
            if let Some(d) = c.trim().strip_prefix("device:") {
                device = Some(d.trim().to_string());
            }
            continue;
        }
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let Some(h) = &header else {
            header = Some(cells.iter().map(|s| s.to_string()).collect());
            continue;
        };
        let at = |name: &str| -> Result<&str, String> {
            let i = h.iter().position(|c| c == name).ok_or_else(|| {
                format!(
                    "{}: no `{name}` column (want impl,step,m,k,n,ms,gflops)",
                    path.display()
                )
            })?;
            cells
                .get(i)
                .copied()
                .ok_or_else(|| format!("{}:{}: too few cells", path.display(), no + 1))
        };
        let num = |name: &str| -> Result<f64, String> {
            at(name)?
                .parse::<f64>()
                .map_err(|_| format!("{}:{}: `{name}` is not a number", path.display(), no + 1))
        };
        let int = |name: &str| -> Result<usize, String> {
            at(name)?.parse::<usize>().map_err(|_| {
                format!(
                    "{}:{}: `{name}` is not a whole number",
                    path.display(),
                    no + 1
                )
            })
        };
        rows.push(Rec {
            imp: at("impl")?.to_string(),
            step: at("step")?.to_string(),
            shape: (int("m")?, int("k")?, int("n")?),
            gflops: num("gflops")?,
        });
    }
    Ok(Table { device, rows })
}

/// The two tables merged: columns (impl, step) in ladder order then the references, shapes
/// squares first, GFLOP/s by (column, shape).
struct Data {
    device: Option<String>,
    steps: Vec<(String, String)>,
    refs: Vec<String>,
    shapes: Vec<(usize, usize, usize)>,
    gflops: BTreeMap<(String, (usize, usize, usize)), f64>,
}

impl Data {
    fn new(camel: &Table, torch: &Table) -> Data {
        let mut steps: Vec<(String, String)> = Vec::new();
        let mut refs: Vec<String> = Vec::new();
        let mut shapes = Vec::new();
        let mut gflops = BTreeMap::new();
        for (r, is_ref) in camel
            .rows
            .iter()
            .map(|r| (r, false))
            .chain(torch.rows.iter().map(|r| (r, true)))
        {
            if is_ref {
                if !refs.contains(&r.imp) {
                    refs.push(r.imp.clone());
                }
            } else if !steps.iter().any(|(i, _)| *i == r.imp) {
                steps.push((r.imp.clone(), r.step.clone()));
            }
            if !shapes.contains(&r.shape) {
                shapes.push(r.shape);
            }
            gflops.insert((r.imp.clone(), r.shape), r.gflops);
        }
        steps.sort_by(|a, b| (&a.1, &a.0).cmp(&(&b.1, &b.0)));
        let rank = |s: &String| match s.as_str() {
            FP32_REF => 0,
            TF32_REF => 1,
            _ => 2,
        };
        refs.sort_by_key(rank);
        // squares by size first, then the other shapes as they first appear
        let (mut square, other): (Vec<_>, Vec<_>) =
            shapes.into_iter().partition(|&(m, k, n)| m == k && k == n);
        square.sort_unstable();
        square.extend(other);
        let device = match (&camel.device, &torch.device) {
            (Some(a), Some(b)) if a != b => {
                eprintln!(
                    "warning: the CSVs name different devices: `{a}` (camel) and `{b}` (torch)"
                );
                Some(format!("{a} (camel) / {b} (PyTorch)"))
            }
            (a, b) => a.clone().or_else(|| b.clone()),
        };
        Data {
            device,
            steps,
            refs,
            shapes: square,
            gflops,
        }
    }

    fn get(&self, imp: &str, shape: (usize, usize, usize)) -> Option<f64> {
        self.gflops.get(&(imp.to_string(), shape)).copied()
    }

    /// Whether this is the 16-bit ladder's run (references `cublas_f16` / `cublas_bf16`).
    fn half(&self) -> bool {
        self.refs.iter().any(|r| r.ends_with("f16"))
    }

    /// The reference a column is compared with: cuBLAS TF32 for TF32 columns, cuBLAS of the
    /// same dtype for 16-bit columns, else cuBLAS FP32.
    fn baseline(&self, imp: &str, shape: (usize, usize, usize)) -> Option<f64> {
        if imp == FP32_REF || imp.starts_with("cublas_") && imp.ends_with("f16") {
            return None;
        }
        for d in ["_bf16", "_f16"] {
            if imp.ends_with(d) {
                return self.get(&format!("cublas{d}"), shape);
            }
        }
        let r = if imp.contains("tf32") && imp != TF32_REF {
            TF32_REF
        } else {
            FP32_REF
        };
        self.get(r, shape)
    }
}

fn ref_label(imp: &str) -> String {
    match imp {
        FP32_REF => "cuBLAS FP32".into(),
        TF32_REF => "cuBLAS TF32".into(),
        "cublas_f16" => "cuBLAS f16".into(),
        "cublas_bf16" => "cuBLAS bf16".into(),
        other => other.to_string(),
    }
}

fn fmt_gflops(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn cell(v: Option<f64>, base: Option<f64>) -> String {
    match (v, base) {
        (None, _) => "–".into(),
        (Some(v), Some(b)) if b > 0.0 => format!("{} ({:.2}×)", fmt_gflops(v), v / b),
        (Some(v), _) => fmt_gflops(v),
    }
}

fn markdown(d: &Data, dir: &str, md: &str, png: &str) -> String {
    let mut s = String::new();
    let page = md.trim_end_matches("-results.md");
    let flag = if page == "gemm" {
        String::new()
    } else {
        format!(" --page {page}")
    };
    let title = if d.half() {
        "Tensor-core GEMM ladder (f16, bf16) vs cuBLAS"
    } else {
        "SGEMM ladder vs cuBLAS"
    };
    let _ = writeln!(s, "# {title}\n");
    let _ = writeln!(
        s,
        "<!-- Generated by `cargo xtask gemm-report {dir}{flag}`; do not edit by hand. -->\n"
    );
    let device = d.device.as_deref().unwrap_or("not recorded");
    let _ = writeln!(s, "GPU: **{device}**.\n");
    if d.half() {
        let _ = writeln!(
            s,
            "C(M×N) = A(M×K)·B(K×N), row-major, A, B and C in f16 or bf16 (inputs uniform in \
             [−1, 1] rounded to the dtype), products summed in f32. Each cell is the median \
             GFLOP/s (2·M·N·K / time) of CUDA-event-timed runs (warm-up first, L2 flushed before \
             each run, up to 50 runs or ~0.5 s), with, in parentheses, the ratio to cuBLAS in the \
             same dtype: PyTorch's `A @ B` with reduced-precision reductions off (f32 \
             accumulation, as camel). Rows `<step>_<dtype>`; steps as in \
             `kernels/matmul/NN_*.cu`.\n"
        );
    } else {
        let _ = writeln!(
            s,
            "C(M×N) = A(M×K)·B(K×N), row-major FP32, inputs uniform in [−1, 1]. Each cell is the \
         median GFLOP/s (2·M·N·K / time) of CUDA-event-timed runs (warm-up first, L2 flushed \
         before each run, up to 50 runs or ~0.5 s), with, in parentheses, the ratio to cuBLAS \
         FP32 (the TF32 step's and cuBLAS TF32's ratios: to cuBLAS TF32 and cuBLAS FP32 \
         respectively). cuBLAS is PyTorch's `A @ B` with `allow_tf32` off (FP32) and on (TF32). \
         “–”: not measured (steps 1–3 are skipped at 8192³ unless `gemm_bench --all`; a step \
         whose launch failed or whose result was wrong is left out).\n"
        );
    }
    let _ = writeln!(s, "![GFLOP/s against square size]({png})\n");

    let mut head = vec!["M×K×N".to_string()];
    head.extend(d.steps.iter().map(|(i, st)| format!("{st} {i}")));
    head.extend(d.refs.iter().map(|r| ref_label(r)));
    let fp32_steps: Vec<&String> = d
        .steps
        .iter()
        .map(|(i, _)| i)
        .filter(|i| !i.contains("tf32") && !d.half())
        .collect();
    if !fp32_steps.is_empty() {
        head.push("best FP32 step".into());
    }
    let _ = writeln!(s, "| {} |", head.join(" | "));
    let _ = writeln!(
        s,
        "|{}",
        std::iter::once("---|")
            .chain(std::iter::repeat("---:|").take(head.len() - 1))
            .collect::<String>()
    );
    for &shape in &d.shapes {
        let (m, k, n) = shape;
        let mut row = vec![format!("{m}×{k}×{n}")];
        for imp in d
            .steps
            .iter()
            .map(|(i, _)| i.as_str())
            .chain(d.refs.iter().map(String::as_str))
        {
            row.push(cell(d.get(imp, shape), d.baseline(imp, shape)));
        }
        if !fp32_steps.is_empty() {
            let best = fp32_steps
                .iter()
                .filter_map(|i| d.get(i, shape).map(|v| (i, v)))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            row.push(match best {
                Some((i, v)) => format!("{i}: {}", cell(Some(v), d.baseline(i, shape))),
                None => "–".into(),
            });
        }
        let _ = writeln!(s, "| {} |", row.join(" | "));
    }
    if !d.half() {
        let _ = writeln!(
            s,
            "\nSteps are named as in `kernels/matmul/NN_*.cu` (`07` covers steps 7–9, the \
             autotuned template); `12 tf32` and `18 tf32_wgmma` are the opt-in tensor-core steps, \
             which read the inputs as TF32 (step 12 rounds them first, step 18 does not).\n"
        );
    } else {
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "## Reproducing\n");
    let env = if d.half() { "DTYPES=bf16,f16 " } else { "" };
    let _ = writeln!(
        s,
        "```sh\n\
         cargo xtask dist                      # build machine: dist/gpu/ with bin/gemm_bench, bench/torch/gemm_torch.py\n\
         {env}OUT={dir} dist/gpu/bench-gemm.sh    # on the GPU host (python3 with PyTorch for the cuBLAS side)\n\
         cargo xtask gemm-report {dir}{flag}         # writes docs/{md} and docs/{png}\n\
         ```\n\n\
         `bench-gemm.sh` runs `bin/gemm_bench --shapes all --out $OUT/{CAMEL_CSV}` and \
         `python3 bench/torch/gemm_torch.py --out $OUT/{TORCH_CSV}`; from a checkout with a GPU, the first is \
         `cargo run --release -p camel-bench --features cuda --bin gemm_bench -- --shapes all --out {dir}/{CAMEL_CSV}`."
    );
    s
}

// ---------------------------------------------------------------------------------------------
// plot
// ---------------------------------------------------------------------------------------------

/// Tableau 10: distinct on white, one per ladder step.
pub(crate) const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Reads a TrueType font and registers it as plotters' "sans-serif" (also used by
/// `memory-report`).
pub(crate) fn register_font() -> Result<(), String> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("CAMEL_PLOT_FONT").filter(|p| !p.is_empty()) {
        candidates.push(p.into());
    }
    // The font camel-models embeds in its own plots.
    candidates.push(crate::repo_root().join("crates/camel-models/assets/DejaVuSans.ttf"));
    for p in [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
        "/Library/Fonts/Arial.ttf",
        "/System/Library/Fonts/Supplemental/Arial.ttf",
    ] {
        candidates.push(p.into());
    }
    let mut any = Vec::new();
    find_ttf(Path::new("/usr/share/fonts"), &mut any, 0);
    any.sort();
    candidates.extend(any);
    for path in &candidates {
        let Ok(bytes) = fs::read(path) else { continue };
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
            return Ok(());
        }
    }
    Err(
        "no usable TrueType font for the plot: install one (Debian/Ubuntu: \
         `apt-get install fonts-dejavu-core`) or set CAMEL_PLOT_FONT=/path/to/font.ttf"
            .into(),
    )
}

fn find_ttf(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() && depth < 4 {
            find_ttf(&p, out, depth + 1);
        } else if p.extension().is_some_and(|x| x.eq_ignore_ascii_case("ttf")) {
            out.push(p);
        }
    }
}

/// 1, 2, 5 × 10^k inside [lo, hi].
pub(crate) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut v = Vec::new();
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let t = decade * m;
            if t >= lo && t <= hi {
                v.push(t);
            }
        }
        decade *= 10.0;
    }
    v
}

pub(crate) fn fmt_tick(v: f64) -> String {
    if v >= 1000.0 {
        format!("{}k", v / 1000.0)
    } else {
        format!("{v}")
    }
}

/// One line of the plot.
struct Series {
    label: String,
    colour: RGBColor,
    /// `Some(j)` for the j-th cuBLAS reference (drawn black: solid, then dashed).
    reference: Option<usize>,
    /// (square size, GFLOP/s).
    points: Vec<(f64, f64)>,
}

fn plot(d: &Data, path: &Path) -> Result<(), String> {
    let squares: Vec<usize> = d
        .shapes
        .iter()
        .filter(|&&(m, k, n)| m == k && k == n)
        .map(|s| s.0)
        .collect();
    if squares.is_empty() {
        return Err("no square shapes in the CSVs: nothing to plot".into());
    }
    let points = |imp: &str| -> Vec<(f64, f64)> {
        squares
            .iter()
            .filter_map(|&s| d.get(imp, (s, s, s)).map(|v| (s as f64, v)))
            .collect()
    };
    let mut series: Vec<Series> = Vec::new();
    for (i, (imp, step)) in d.steps.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        series.push(Series {
            label: format!("{step} {imp}"),
            colour,
            reference: None,
            points: points(imp),
        });
    }
    for (j, r) in d.refs.iter().enumerate() {
        series.push(Series {
            label: ref_label(r),
            colour: BLACK,
            reference: Some(j),
            points: points(r),
        });
    }
    series.retain(|s| !s.points.is_empty());
    let all = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (lo, hi) = all.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = ((lo * 0.7).max(1e-3), hi * 1.5);
    let (xmin, xmax) = (
        *squares.iter().min().unwrap() as f64,
        *squares.iter().max().unwrap() as f64,
    );

    register_font()?;
    let err = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", path.display());
    let root = BitMapBackend::new(path, (1200, 720)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (left, right) = root.split_horizontally(930);
    let what = if d.half() { "GEMM f16/bf16" } else { "SGEMM" };
    let title = match &d.device {
        Some(dev) => format!("{what} M = N = K, {dev}"),
        None => format!("{what} M = N = K"),
    };
    let mut chart = ChartBuilder::on(&left)
        .caption(title, ("sans-serif", 26))
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(
            ((xmin / 1.25)..(xmax * 1.25))
                .log_scale()
                .with_key_points(squares.iter().map(|&s| s as f64).collect()),
            (lo..hi).log_scale().with_key_points(log_ticks(lo, hi)),
        )
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("M = N = K")
        .y_desc("GFLOP/s (log scale)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| fmt_tick(*v))
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(225, 225, 225))
        .draw()
        .map_err(|e| err(&e))?;
    for Series {
        colour,
        reference,
        points: pts,
        ..
    } in &series
    {
        match reference {
            None => {
                let style = colour.stroke_width(2);
                chart
                    .draw_series(LineSeries::new(pts.clone(), style))
                    .map_err(|e| err(&e))?;
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 4, colour.filled())))
                    .map_err(|e| err(&e))?;
            }
            Some(j) => {
                let style = BLACK.stroke_width(3);
                let (dash, gap) = if *j == 0 { (1000, 0) } else { (12, 8) };
                chart
                    .draw_series(DashedLineSeries::new(pts.clone(), dash, gap, style))
                    .map_err(|e| err(&e))?;
                chart
                    .draw_series(
                        pts.iter()
                            .map(|&p| TriangleMarker::new(p, 6, BLACK.filled())),
                    )
                    .map_err(|e| err(&e))?;
            }
        }
    }
    // legend in its own panel, top to bottom in ladder order
    let font = ("sans-serif", 17).into_font().color(&BLACK);
    for (i, s) in series.iter().enumerate() {
        let (label, colour, reference) = (&s.label, &s.colour, &s.reference);
        let y = 80 + 30 * i as i32;
        let (x0, x1) = (10, 60);
        match reference {
            None => {
                right
                    .draw(&PathElement::new(
                        vec![(x0, y), (x1, y)],
                        colour.stroke_width(2),
                    ))
                    .map_err(|e| err(&e))?;
                right
                    .draw(&Circle::new(((x0 + x1) / 2, y), 4, colour.filled()))
                    .map_err(|e| err(&e))?;
            }
            Some(j) => {
                let style = BLACK.stroke_width(3);
                if *j == 0 {
                    right
                        .draw(&PathElement::new(vec![(x0, y), (x1, y)], style))
                        .map_err(|e| err(&e))?;
                } else {
                    for x in (x0..x1).step_by(20) {
                        right
                            .draw(&PathElement::new(
                                vec![(x, y), ((x + 12).min(x1), y)],
                                style,
                            ))
                            .map_err(|e| err(&e))?;
                    }
                }
                right
                    .draw(&TriangleMarker::new(((x0 + x1) / 2, y), 6, BLACK.filled()))
                    .map_err(|e| err(&e))?;
            }
        }
        right
            .draw(&Text::new(label.clone(), (x1 + 10, y - 9), font.clone()))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_1_2_5() {
        assert_eq!(
            log_ticks(150.0, 60000.0),
            [200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, 20000.0, 50000.0]
        );
    }

    #[test]
    fn tf32_is_compared_with_cublas_tf32() {
        let rec = |imp: &str, step: &str, g| Rec {
            imp: imp.into(),
            step: step.into(),
            shape: (1024, 1024, 1024),
            gflops: g,
        };
        let camel = Table {
            device: Some("GPU".into()),
            rows: vec![rec("tf32", "12", 40.0), rec("naive", "01", 1.0)],
        };
        let torch = Table {
            device: None,
            rows: vec![rec(TF32_REF, "ref", 80.0), rec(FP32_REF, "ref", 20.0)],
        };
        let d = Data::new(&camel, &torch);
        assert_eq!(d.steps[0].0, "naive");
        assert_eq!(d.refs, [FP32_REF, TF32_REF]);
        let s = (1024, 1024, 1024);
        assert_eq!(d.baseline("tf32", s), Some(80.0));
        assert_eq!(d.baseline("naive", s), Some(20.0));
        assert_eq!(d.baseline(TF32_REF, s), Some(20.0));
        assert_eq!(d.baseline(FP32_REF, s), None);
        let md = markdown(&d, "out", "gemm-results.md", "gemm.png");
        assert!(md.contains("| 1024×1024×1024 | 1.0 (0.05×) | 40.0 (0.50×) | 20.0 | 80.0 (4.00×) | naive: 1.0 (0.05×) |"), "{md}");
        assert!(md.contains("GPU: **GPU**"));
    }

    #[test]
    fn sixteen_bit_steps_are_compared_with_cublas_of_their_dtype() {
        let rec = |imp: &str, step: &str, g| Rec {
            imp: imp.into(),
            step: step.into(),
            shape: (4096, 4096, 4096),
            gflops: g,
        };
        let camel = Table {
            device: Some("GPU".into()),
            rows: vec![
                rec("mma_async_bf16", "16", 300.0),
                rec("mma_async_f16", "16", 200.0),
            ],
        };
        let torch = Table {
            device: None,
            rows: vec![
                rec("cublas_bf16", "ref", 600.0),
                rec("cublas_f16", "ref", 400.0),
            ],
        };
        let d = Data::new(&camel, &torch);
        let s = (4096, 4096, 4096);
        assert!(d.half());
        assert_eq!(d.baseline("mma_async_bf16", s), Some(600.0));
        assert_eq!(d.baseline("mma_async_f16", s), Some(400.0));
        assert_eq!(d.baseline("cublas_bf16", s), None);
        let md = markdown(&d, "out", "hgemm-results.md", "hgemm.png");
        assert!(md.contains("# Tensor-core GEMM ladder"), "{md}");
        assert!(
            md.contains("300 (0.50×)") && md.contains("](hgemm.png)"),
            "{md}"
        );
        assert!(md.contains("--page hgemm"), "{md}");
    }
}

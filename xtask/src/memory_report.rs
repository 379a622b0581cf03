//! `cargo xtask memory-report FILE [--docs DOCS] [--check]`: turn one `bench_memory --torch` run (its
//! printed Markdown table, e.g. `docs/data/bench_memory_h100_batch.txt`) into
//! `docs/memory-results.md` (one row per op and size at the step camel runs by default, with
//! every step's share of copy beside it) and `docs/memory.png` (camel and PyTorch as a share of
//! the copy bandwidth, one pair of bars per op, the 90 % bar drawn in).
//!
//! `docs/notes/measurement-log.md` keeps every round's tables and what each change measured;
//! this page is the latest state in one place. With `--check` nothing is written: the command fails if
//! `docs/memory-results.md` is not what FILE gives (CI runs it, so the page and the report's
//! code stay in agreement; the PNG needs a font and is not checked).

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::gemm_report::register_font;
use camel_core::backend::ladder::{embedding_bwd_grouped, Family, Step};

const MD: &str = "memory-results.md";
const PNG: &str = "memory.png";
/// The bar: every optimized step at 90 % of the copy bandwidth or more.
const BAR_PCT: f64 = 90.0;
/// The benchmark's reference sizes (2^28 elements for elementwise and reductions, also as
/// 65536×4096 rows; the softmax, LayerNorm and cross-entropy shapes; Adam over 10M parameters),
/// and the embedding's 2^28-float rows, which has no reference size of its own. Other sizes (the
/// small embedding, 16384 tokens × 64) are marked in the report: the bar is not asked of them.
const REFERENCE_SIZES: [&str; 10] = [
    "2^28",
    "65536x4096",
    "16384x1024",
    "4096x4096",
    "65536x65",
    "16384x768",
    "16384x65",
    "4096x50257",
    "349525x768",
    "10M",
];
/// One row of bench_memory's table.
#[derive(Clone, Debug, PartialEq)]
struct Row {
    op: String,
    size: String,
    /// `None` for the copy row (`—`).
    step: Option<u32>,
    /// Streamed time a launch (µs).
    us: f64,
    /// bench_memory's `†`: a batch the host may not have queued in time.
    starved: bool,
    gbs: f64,
    /// Percent of a copy of the same bytes, where the run reported it.
    same_size_pct: Option<f64>,
    torch_gbs: Option<f64>,
}

/// One bench_memory run.
#[derive(Debug)]
struct Bench {
    device: Option<String>,
    /// GB/s of the `copy` row: the denominator of every "of copy".
    copy_gbs: f64,
    rows: Vec<Row>,
}

pub fn memory_report(args: &[String]) -> Result<(), String> {
    let mut file = None;
    let mut docs = crate::repo_root().join("docs");
    let mut check = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--docs" => docs = PathBuf::from(it.next().ok_or("--docs needs a folder")?),
            "--check" => check = true,
            s if s.starts_with('-') => return Err(format!("memory-report: unknown option `{s}`")),
            s if file.is_none() => file = Some(s.to_string()),
            s => return Err(format!("memory-report: unexpected argument `{s}`")),
        }
    }
    let file = file.ok_or(
        "usage: cargo xtask memory-report FILE [--docs DOCS] [--check]  (FILE: bench_memory's \
         output)",
    )?;
    let text = fs::read_to_string(&file).map_err(|e| format!("reading {file}: {e}"))?;
    let bench = parse(&text, &file)?;
    let groups = groups(&bench.rows);
    let md = markdown(&bench, &groups, &file);
    let md_path = docs.join(MD);
    if check {
        if fs::read_to_string(&md_path).unwrap_or_default() != md {
            return Err(format!(
                "{} is not what `cargo xtask memory-report {file}` writes: run it and commit \
                 the result",
                md_path.display()
            ));
        }
        println!("memory-report: {} is up to date", md_path.display());
        return Ok(());
    }
    fs::create_dir_all(&docs).map_err(|e| format!("creating {}: {e}", docs.display()))?;
    fs::write(&md_path, md).map_err(|e| format!("writing {}: {e}", md_path.display()))?;
    println!("memory-report: wrote {}", md_path.display());
    let png_path = docs.join(PNG);
    plot(&bench, &groups, &png_path)?;
    println!("memory-report: wrote {}", png_path.display());
    Ok(())
}

fn cells(line: &str) -> Vec<&str> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(str::trim).collect()
}

fn parse(text: &str, path: &str) -> Result<Bench, String> {
    let mut device = None;
    let mut header: Option<Vec<String>> = None;
    let mut rows = Vec::new();
    for (no, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(d) = line.strip_prefix("device:") {
            // "device: NVIDIA H100 80GB HBM3 (132 SMs); copy (...): 3013 GB/s"
            device = Some(d.split(';').next().unwrap_or(d).trim().to_string());
            continue;
        }
        if !line.starts_with('|') {
            continue;
        }
        let c = cells(line);
        let Some(h) = &header else {
            header = Some(c.iter().map(|s| s.to_string()).collect());
            continue;
        };
        if c.iter()
            .all(|s| s.trim_matches(|ch| ch == '-' || ch == ':').is_empty())
        {
            continue; // the separator line
        }
        let at = |names: &[&str]| -> Option<&str> {
            let i = h.iter().position(|c| names.contains(&c.as_str()))?;
            c.get(i).copied()
        };
        let need = |names: &[&str]| -> Result<&str, String> {
            at(names).ok_or_else(|| {
                format!(
                    "{path}:{}: no `{}` cell (is this bench_memory's table?)",
                    no + 1,
                    names[0]
                )
            })
        };
        let num = |s: &str, what: &str| -> Result<f64, String> {
            s.trim_end_matches('%')
                .trim()
                .parse::<f64>()
                .map_err(|_| format!("{path}:{}: `{what}` is `{s}`, not a number", no + 1))
        };
        let dash = |s: &str| s == "—" || s == "-" || s == "–";
        let step = need(&["step"])?;
        let time = need(&["streamed (µs)", "time (µs)"])?;
        let starved = time.ends_with('†');
        let torch = need(&["PyTorch GB/s"])?;
        rows.push(Row {
            op: need(&["op"])?.to_string(),
            size: need(&["size"])?.to_string(),
            step: if dash(step) {
                None
            } else {
                Some(step.parse().map_err(|_| {
                    format!("{path}:{}: step `{step}` is not a whole number", no + 1)
                })?)
            },
            us: num(time.trim_end_matches('†').trim(), "time")?,
            starved,
            gbs: num(need(&["GB/s"])?, "GB/s")?,
            same_size_pct: match at(&["of same-size copy"]) {
                Some(s) if !dash(s) => Some(num(s, "of same-size copy")?),
                _ => None,
            },
            torch_gbs: if dash(torch) {
                None
            } else {
                Some(num(torch, "PyTorch GB/s")?)
            },
        });
    }
    let copy_gbs = rows
        .iter()
        .find(|r| r.op == "copy")
        .map(|r| r.gbs)
        .ok_or_else(|| format!("{path}: no `copy` row, so no copy bandwidth to compare with"))?;
    if copy_gbs <= 0.0 {
        return Err(format!("{path}: the copy row's GB/s is {copy_gbs}"));
    }
    Ok(Bench {
        device,
        copy_gbs,
        rows,
    })
}

/// The step camel's CUDA backend runs for `op` at `size` with no `CAMEL_*` variable set: its
/// family's default ([`Family::default_step`]), and for the embedding backward at a size too
/// small for the grouped kernels ([`embedding_bwd_grouped`]) step 2's, which the backend then
/// runs whatever step is selected. A family without that step runs its highest below it, which
/// is the highest step measured at or below this one (see [`groups`]). `None`: an op this report
/// does not know.
fn default_step(op: &str, size: &str) -> Option<u32> {
    let elems = || -> Option<usize> {
        let (a, b) = size.split_once('x')?;
        Some(a.parse::<usize>().ok()? * b.parse::<usize>().ok()?)
    };
    let base = op.trim_end_matches("+mean");
    let family = match base {
        "relu" | "scale" | "gelu" | "add" | "mul" | "gelu_bwd" => Family::Elementwise,
        "sum" | "max" | "sum_last" | "max_last" => Family::Reduce,
        "softmax" | "softmax_bwd" | "log_softmax" | "log_softmax_bwd" => Family::Softmax,
        "cross_entropy" | "cross_entropy_bwd" => Family::CrossEntropy,
        "embedding" | "embedding_bwd" => Family::Embedding,
        "adam" | "sgd_momentum" | "sgd" => Family::Optim,
        "layernorm" | "layernorm_bwd" => Family::LayerNorm,
        _ => return None,
    };
    let step = family.default_step();
    if base == "embedding_bwd" && elems().is_some_and(|n| !embedding_bwd_grouped(step, n)) {
        return Some(Step::Two.number());
    }
    Some(step.number())
}

/// An op at one size: every step measured, and the one the library runs.
#[derive(Debug)]
struct Group<'a> {
    steps: Vec<&'a Row>,
    /// Index into `steps` of the library's step.
    chosen: usize,
    /// A kernel whose op runs with the mean fused in (a `+mean` row of the same op and size
    /// exists: cross-entropy's per-row kernels): listed apart, not as an op of its own.
    kernel_only: bool,
}

impl Group<'_> {
    fn row(&self) -> &Row {
        self.steps[self.chosen]
    }
}

fn groups(rows: &[Row]) -> Vec<Group<'_>> {
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for r in rows.iter().filter(|r| r.op != "copy") {
        if !keys.contains(&(r.op.as_str(), r.size.as_str())) {
            keys.push((r.op.as_str(), r.size.as_str()));
        }
    }
    keys.iter()
        .map(|&(op, size)| {
            let steps: Vec<&Row> = rows
                .iter()
                .filter(|r| r.op == op && r.size == size)
                .collect();
            let cap = default_step(op, size).unwrap_or_else(|| {
                eprintln!(
                    "warning: memory-report does not know `{op}`'s default step: showing its \
                     highest"
                );
                u32::MAX
            });
            // the highest step measured at or below the default (else the lowest measured)
            let chosen = (0..steps.len())
                .filter(|&i| steps[i].step.unwrap_or(0) <= cap)
                .max_by_key(|&i| steps[i].step)
                .or_else(|| (0..steps.len()).min_by_key(|&i| steps[i].step))
                .unwrap_or(0);
            let mean_op = format!("{op}+mean");
            let kernel_only =
                !op.ends_with("+mean") && rows.iter().any(|r| r.op == mean_op && r.size == size);
            Group {
                steps,
                chosen,
                kernel_only,
            }
        })
        .collect()
}

fn pct(gbs: f64, copy: f64) -> f64 {
    100.0 * gbs / copy
}

fn fmt_pct(p: f64) -> String {
    format!("{p:.1} %")
}

fn fmt_us(us: f64) -> String {
    if us >= 100.0 {
        format!("{us:.0}")
    } else {
        format!("{us:.1}")
    }
}

fn step_label(r: &Row) -> String {
    r.step.map_or("—".into(), |s| s.to_string())
}

fn markdown(b: &Bench, groups: &[Group], file: &str) -> String {
    let copy = b.copy_gbs;
    let mut s = String::new();
    let _ = writeln!(s, "# Memory-bound kernels against PyTorch\n");
    let _ = writeln!(
        s,
        "<!-- Generated by `cargo xtask memory-report {file}`; do not edit by hand. -->\n"
    );
    let device = b.device.as_deref().unwrap_or("not recorded");
    let _ = writeln!(
        s,
        "GPU: **{device}**. Copy bandwidth measured in the same run (`cuMemcpyDtoD` of 2^28 \
         floats, read + write): **{copy:.0} GB/s**.\n"
    );
    let _ = writeln!(
        s,
        "One row per op and size, at the step camel's CUDA backend runs by default \
         (`Family::default_step`; `CAMEL_SOFTMAX=N` and the like select another, docs/configuration.md). GB/s is \
         the bytes the op must move (each input read once, each output written once) over the \
         streamed time: launches back to back, CUDA events, the median of 20 batches of at \
         least 2 ms. \"of copy\" divides by the copy above; the bar is 90 % or more. \
         \"of same-size copy\" divides by a copy of the same bytes, the roofline for an op of \
         a few MB. PyTorch ran the same sizes, timed the same way (`bench/torch/memory_torch.py`), \
         in the same call on the same GPU. The last column is every ladder step's share of \
         copy, step 1 the CUDA backend's first kernel.\n"
    );
    let _ = writeln!(
        s,
        "![camel and PyTorch as a share of copy bandwidth]({PNG})\n"
    );
    let _ = writeln!(
        s,
        "| op | size | step | µs | GB/s | of copy | of same-size copy | PyTorch of copy | vs \
         PyTorch | every step (of copy) |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut below = Vec::new();
    let mut starved = false;
    let mut other_sizes = false;
    for g in groups.iter().filter(|g| !g.kernel_only) {
        let r = g.row();
        let p = pct(r.gbs, copy);
        let reference_size = REFERENCE_SIZES.contains(&r.size.as_str());
        if p < BAR_PCT {
            below.push(format!(
                "{} {} ({}{}{})",
                r.op,
                r.size,
                fmt_pct(p),
                r.same_size_pct
                    .map_or(String::new(), |q| format!(", {q:.0} % of a same-size copy")),
                if reference_size {
                    ""
                } else {
                    ", not a reference size"
                }
            ));
        }
        other_sizes |= !reference_size;
        starved |= g.steps.iter().any(|r| r.starved);
        let every: Vec<String> = g
            .steps
            .iter()
            .map(|x| {
                format!(
                    "{}: {:.0}{}",
                    step_label(x),
                    pct(x.gbs, copy),
                    if x.starved { " †" } else { "" }
                )
            })
            .collect();
        let mark = |v: String| {
            if p >= BAR_PCT {
                format!("**{v}**")
            } else {
                v
            }
        };
        let _ = writeln!(
            s,
            "| {} | {}{} | {} | {}{} | {:.0} | {} | {} | {} | {} | {} |",
            r.op,
            r.size,
            if reference_size { "" } else { " *" },
            step_label(r),
            fmt_us(r.us),
            if r.starved { " †" } else { "" },
            r.gbs,
            mark(fmt_pct(p)),
            r.same_size_pct.map_or("—".into(), |v| format!("{v:.0} %")),
            r.torch_gbs.map_or("—".into(), |t| fmt_pct(pct(t, copy))),
            r.torch_gbs
                .map_or("—".into(), |t| format!("{:.2}×", r.gbs / t)),
            every.join(" · ")
        );
    }
    let _ = writeln!(s);
    if below.is_empty() {
        let _ = writeln!(s, "Every row is at 90 % of copy or more.\n");
    } else {
        let _ = writeln!(
            s,
            "Below 90 % of copy: {}. The [measurement log](notes/measurement-log.md) (\"The \
             small-op floor\", dev/labs/floor_lab.cu) measures the floor of a kernel of that \
             size: at a few MB no \
             kernel, a copy included, reaches 90 % of the 2^28-float copy, so there the \
             bar is read against the copy of the same bytes (the measurement log's \"Issue 4 against its bar\").\n",
            below.join(", ")
        );
    }
    let kernels: Vec<String> = groups
        .iter()
        .filter(|g| g.kernel_only)
        .map(|g| {
            let r = g.row();
            format!(
                "{} {} step {}: {} µs, {} of copy",
                r.op,
                r.size,
                step_label(r),
                fmt_us(r.us),
                fmt_pct(pct(r.gbs, copy))
            )
        })
        .collect();
    if !kernels.is_empty() {
        let _ = writeln!(
            s,
            "Cross-entropy runs as one kernel a direction with the mean over rows fused in (the \
             `+mean` rows). Its per-row kernels alone, without the mean: {}.\n",
            kernels.join("; ")
        );
    }
    if other_sizes {
        let _ = writeln!(
            s,
            "\\*: not one of the reference sizes; bench_memory adds it to show what a \
             small op costs (the embedding's: 16384 tokens × 64 into 1000 rows).\n"
        );
    }
    if starved {
        let _ = writeln!(
            s,
            "†: bench_memory's mark for a batch the host may not have queued before the GPU \
             reached it.\n"
        );
    }
    let _ = writeln!(s, "## Reproducing\n");
    let _ = writeln!(
        s,
        "```sh\n\
         cargo xtask build-kernels && cargo xtask dist          # here: dist/gpu with bin/bench_memory\n\
         # on the GPU host, from the repository root:\n\
         python3 bench/torch/memory_torch.py > torch.txt\n\
         dist/gpu/bin/bench_memory --torch torch.txt > {file}\n\
         # here:\n\
         cargo xtask memory-report {file}   # writes docs/{MD} and docs/{PNG}\n\
         ```"
    );
    s
}

// ---------------------------------------------------------------------------------------------
// plot
// ---------------------------------------------------------------------------------------------

const CAMEL_OK: RGBColor = RGBColor(31, 119, 180);
const CAMEL_BELOW: RGBColor = RGBColor(255, 127, 14);
const TORCH: RGBColor = RGBColor(170, 170, 170);
const BAR_LINE: RGBColor = RGBColor(214, 39, 40);

fn plot(b: &Bench, groups: &[Group], path: &Path) -> Result<(), String> {
    let shown: Vec<&Group> = groups.iter().filter(|g| !g.kernel_only).collect();
    if shown.is_empty() {
        return Err("no ops in the table: nothing to plot".into());
    }
    let n = shown.len();
    let copy = b.copy_gbs;
    let top = shown
        .iter()
        .flat_map(|g| [Some(g.row().gbs), g.row().torch_gbs])
        .flatten()
        .map(|v| pct(v, copy))
        .fold(110.0f64, f64::max);
    let xmax = (top / 10.0).ceil() * 10.0 + 10.0;
    let labels: Vec<String> = shown
        .iter()
        .map(|g| {
            let r = g.row();
            let mark = if REFERENCE_SIZES.contains(&r.size.as_str()) {
                ""
            } else {
                " *"
            };
            format!("{} {}{mark} (step {})", r.op, r.size, step_label(r))
        })
        .collect();

    register_font()?;
    let err = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", path.display());
    let height = 170 + 30 * n as u32;
    let root = BitMapBackend::new(path, (1200, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let title = match &b.device {
        Some(dev) => format!("Memory-bound ops: share of copy bandwidth, {dev}"),
        None => "Memory-bound ops: share of copy bandwidth".to_string(),
    };
    let (head, body) = root.split_vertically(90);
    head.draw(&Text::new(
        title,
        (600, 24),
        ("sans-serif", 24)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Center)),
    ))
    .map_err(|e| err(&e))?;
    // legend, one line under the title
    let font = ("sans-serif", 16)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let legend = [
        (CAMEL_OK, "camel, ≥ 90 % of copy"),
        (CAMEL_BELOW, "camel, below 90 %"),
        (TORCH, "PyTorch"),
    ];
    let y = 66;
    let mut x = 200;
    for (colour, text) in legend {
        head.draw(&Rectangle::new(
            [(x, y - 7), (x + 28, y + 7)],
            colour.filled(),
        ))
        .map_err(|e| err(&e))?;
        head.draw(&Text::new(text, (x + 36, y), font.clone()))
            .map_err(|e| err(&e))?;
        x += 230;
    }
    head.draw(&PathElement::new(
        vec![(x, y - 9), (x, y + 9)],
        BAR_LINE.stroke_width(2),
    ))
    .map_err(|e| err(&e))?;
    head.draw(&Text::new(
        "90 % bar (* not a reference size)",
        (x + 10, y),
        font.clone(),
    ))
    .map_err(|e| err(&e))?;

    let mut chart = ChartBuilder::on(&body)
        .margin_right(30)
        .margin_bottom(10)
        .x_label_area_size(50)
        .y_label_area_size(390)
        .build_cartesian_2d(0f64..xmax, 0f64..n as f64)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc("% of copy bandwidth (GB/s of the bytes the op must move)")
        .x_labels((xmax / 10.0) as usize + 1)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_labels(0)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(230, 230, 230))
        .draw()
        .map_err(|e| err(&e))?;
    let value_font = ("sans-serif", 13)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    // the first op at the top: its pair of bars centred on n − 0.5
    let centre = |i: usize| n as f64 - 0.5 - i as f64;
    for (i, g) in shown.iter().enumerate() {
        let r = g.row();
        let yc = centre(i);
        let p = pct(r.gbs, copy);
        let colour = if p >= BAR_PCT { CAMEL_OK } else { CAMEL_BELOW };
        let bars = [
            Some((p, yc + 0.02, yc + 0.36, colour)),
            r.torch_gbs
                .map(|t| (pct(t, copy), yc - 0.36, yc - 0.02, TORCH)),
        ];
        for (v, y0, y1, colour) in bars.into_iter().flatten() {
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(0.0, y0), (v, y1)],
                    colour.filled(),
                )))
                .map_err(|e| err(&e))?;
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("{v:.0}"),
                    (v + 0.6, (y0 + y1) / 2.0),
                    value_font.clone(),
                )))
                .map_err(|e| err(&e))?;
        }
    }
    // the op names, right-aligned against the axis at each pair of bars (drawn on the root, in
    // pixels, since plotters' own labels fall on round values of the axis)
    let name_font = ("sans-serif", 15)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Right, VPos::Center));
    for (i, label) in labels.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(0.0, centre(i)));
        root.draw(&Text::new(label.clone(), (px - 8, py), name_font.clone()))
            .map_err(|e| err(&e))?;
    }
    chart
        .draw_series(DashedLineSeries::new(
            vec![(BAR_PCT, 0.0), (BAR_PCT, n as f64)],
            8,
            6,
            BAR_LINE.stroke_width(2),
        ))
        .map_err(|e| err(&e))?;
    chart
        .draw_series(LineSeries::new(
            vec![(100.0, 0.0), (100.0, n as f64)],
            RGBColor(120, 120, 120).stroke_width(1),
        ))
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "\
device: Some GPU (132 SMs); copy (cuMemcpyDtoD, 2^28 f32, read + write): 3000 GB/s
PyTorch copy_ (same sizes, same GPU): 2990 GB/s

| op | size | step | streamed (µs) | GB/s | of copy BW | of same-size copy | one launch (µs) | PyTorch GB/s | speed-up vs PyTorch |
|---|---|---:|---:|---:|---:|---:|---:|---:|---:|
| copy | 2^28 | — | 712.7 | 3000 | 100 % | 100 % | 716.8 | 2990 | 1.00× |
| relu | 2^28 | 1 | 847.1 | 2400 | 80 % | 80 % | 853.5 | 3000 | 0.80× |
| relu | 2^28 | 2 | 717.0 | 2970 | 99 % | 99 % | 722.3 | 3000 | 0.99× |
| softmax | 65536x65 | 3 | 12.5 | 2736 | 91 % | 115 % | 18.9 | 2143 | 1.28× |
| softmax | 65536x65 | 4 | 15.0 | 2265 | 75 % | 95 % | 19.8 | 2143 | 1.06× |
| cross_entropy | 16384x65 | 3 | 3.4 | 1265 | 42 % | 128 % | 8.1 | 218 | 5.80× |
| cross_entropy+mean | 16384x65 | 3 | 7.3 | 584 | 19 % | 59 % | 14.5 | 218 | 2.68× |
| cross_entropy+mean | 16384x65 | 4 | 5.4 | 789 | 26 % | 80 % | 11.1 | 218 | 3.62× |
| embedding_bwd | 16384x64 | 2 | 7.6 | 604 | 20 % | 85 % | 12.9 | — | — |
| embedding_bwd | 16384x64 | 4 | 21.3 | 215 | 7 % | 30 % | 26.0 | — | — |
| embedding_bwd | 349525x768 | 2 | 1238.8 | 994 | 33 % | 33 % | 1249.5 | 923 | 1.08× |
| embedding_bwd | 349525x768 | 4 | 447.3 | 2752 | 91 % | 92 % | 451.1 | 923 | 2.98× |
| sgd_momentum | 10M | 1 | 88.6 † | 2258 | 75 % | 81 % | 92.3 | 1525 | 1.48× |
";

    #[test]
    fn parses_a_run() {
        let b = parse(RUN, "run.txt").unwrap();
        assert_eq!(b.device.as_deref(), Some("Some GPU (132 SMs)"));
        assert_eq!(b.copy_gbs, 3000.0);
        assert_eq!(b.rows.len(), 13);
        let sgd = b.rows.last().unwrap();
        assert!(sgd.starved);
        assert_eq!(sgd.us, 88.6);
        assert_eq!(sgd.torch_gbs, Some(1525.0));
        assert_eq!(b.rows[0].step, None);
        let emb = &b.rows[8];
        assert_eq!((emb.torch_gbs, emb.same_size_pct), (None, Some(85.0)));
    }

    #[test]
    fn picks_the_library_default_step() {
        let b = parse(RUN, "run.txt").unwrap();
        let g = groups(&b.rows);
        let chosen: Vec<(String, String, Option<u32>, bool)> = g
            .iter()
            .map(|g| {
                let r = g.row();
                (r.op.clone(), r.size.clone(), r.step, g.kernel_only)
            })
            .collect();
        let want = [
            ("relu", "2^28", 2, false),
            ("softmax", "65536x65", 3, false),
            ("cross_entropy", "16384x65", 3, true),
            ("cross_entropy+mean", "16384x65", 4, false),
            ("embedding_bwd", "16384x64", 2, false),
            ("embedding_bwd", "349525x768", 4, false),
            ("sgd_momentum", "10M", 1, false),
        ];
        let want: Vec<(String, String, Option<u32>, bool)> = want
            .iter()
            .map(|&(o, s, st, k)| (o.into(), s.into(), Some(st), k))
            .collect();
        assert_eq!(chosen, want);
    }

    #[test]
    fn markdown_names_the_rows_below_the_bar() {
        let b = parse(RUN, "run.txt").unwrap();
        let md = markdown(&b, &groups(&b.rows), "run.txt");
        assert!(
            md.contains(
                "| softmax | 65536x65 | 3 | 12.5 | 2736 | **91.2 %** | 115 % | 71.4 % | 1.28× | 3: \
                 91 · 4: 76 |"
            ),
            "{md}"
        );
        assert!(md.contains("| sgd_momentum | 10M | 1 | 88.6 † |"), "{md}");
        assert!(md.contains(
            "Below 90 % of copy: cross_entropy+mean 16384x65 (26.3 %, 80 % of a same-size copy)"
        ));
        assert!(md.contains("without the mean: cross_entropy 16384x65 step 3: 3.4 µs, 42.2 %"));
        assert!(!md.contains("| cross_entropy | 16384x65 |"), "{md}");
        assert!(md.contains("†: bench_memory's mark"));
        assert!(md.contains("| embedding_bwd | 16384x64 * | 2 |"), "{md}");
        assert!(
            md.contains(
                "embedding_bwd 16384x64 (20.1 %, 85 % of a same-size copy, not a reference size)"
            ),
            "{md}"
        );
        assert!(md.contains("| embedding_bwd | 349525x768 | 4 |"), "{md}");
    }

    #[test]
    fn bad_input_is_a_clear_error() {
        let no_copy = RUN.replace("| copy |", "| kopy |");
        let e = parse(&no_copy, "r.txt").unwrap_err();
        assert!(e.contains("no `copy` row"), "{e}");
        let bad = RUN.replace("| 847.1 |", "| fast |");
        let e = parse(&bad, "r.txt").unwrap_err();
        assert!(e.contains("r.txt:7: `time` is `fast`"), "{e}");
        let no_torch = RUN.replace("PyTorch GB/s", "Torch");
        let e = parse(&no_torch, "r.txt").unwrap_err();
        assert!(e.contains("no `PyTorch GB/s` cell"), "{e}");
        assert_eq!(default_step("conv2d", "1x1"), None);
    }
}

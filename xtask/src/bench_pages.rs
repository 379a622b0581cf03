//! `cargo xtask bench-pages [--check] [--no-plots]`: copy benchmark tables from the raw
//! outputs in `docs/data/` into the pages that quote them, and draw each page's figure.
//!
//! A page quotes a table with a marked block:
//!
//! ```text
//! <!-- table: docs/data/conv_h100.md -->
//! (replaced by the last Markdown table of that file)
//! <!-- /table -->
//! ```
//!
//! so the figures on a page are always the ones a benchmark printed, and a new run is one
//! command away from the page. `<!-- table: FILE rows: a,b -->` quotes only the rows whose first
//! cell starts with one of the words (the header kept), for a page about some of a run's ops. [`PLOTS`] names the figures: a horizontal bar per table row.
//! With `--check` nothing is written: the command fails if a block is not what its file gives
//! (CI runs it; the PNGs need a font and are not checked).

use std::fs;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::gemm_report::{fmt_tick, log_ticks, register_font, PALETTE};

const OPEN: &str = "<!-- table: ";
const CLOSE: &str = "<!-- /table -->";

/// A figure drawn from one column of a data file's last table.
struct PlotSpec {
    /// The data file, relative to the repository root.
    data: &'static str,
    /// The PNG, relative to the repository root.
    png: &'static str,
    title: &'static str,
    /// Columns joined (with spaces) into a bar's label.
    label: &'static [&'static str],
    /// The column drawn, parsed as a number (a trailing `×` or unit is dropped).
    value: &'static str,
    x_desc: &'static str,
    /// A vertical line drawn at this value (e.g. 1× a reference), if any.
    mark: Option<f64>,
    /// A bar whose label holds this text is drawn in the reference colour.
    reference: &'static str,
}

const PLOTS: &[PlotSpec] = &[
    PlotSpec {
        data: "docs/data/filter_h100.md",
        png: "docs/kernels/filter.png",
        title: "Image filter, 2048² f32, radius 8: time per call (H100)",
        label: &["row", "step"],
        value: "ms",
        x_desc: "ms (shorter is faster)",
        mark: None,
        reference: "PyTorch",
    },
    PlotSpec {
        data: "docs/data/conv_h100.md",
        png: "docs/kernels/conv2d.png",
        title: "conv2d against cuDNN (H100, FP32): speed, cuDNN time / camel time",
        label: &["shape", "pass", "step"],
        value: "camel speed / cuDNN",
        x_desc: "× cuDNN (right of the line: faster than cuDNN)",
        mark: Some(1.0),
        reference: "\u{0}",
    },
];

/// A figure of one column against another from a data file's last table: the rows that match
/// `filter`, a line per value of the `series` columns, both axes logarithmic.
struct LineSpec {
    data: &'static str,
    png: &'static str,
    title: &'static str,
    /// Rows kept: each `(column, value)` must match.
    filter: &'static [(&'static str, &'static str)],
    /// Rows dropped: any `(column, value)` that matches.
    skip: &'static [(&'static str, &'static str)],
    /// Columns joined (with spaces) into a line's name.
    series: &'static [&'static str],
    /// The column on the x axis.
    x: &'static str,
    /// The column on the y axis.
    y: &'static str,
    y_desc: &'static str,
    /// A line whose name holds one of these is a reference: drawn dashed.
    references: &'static [&'static str],
}

const LINES: &[LineSpec] = &[LineSpec {
    data: "docs/data/attention_h200.md",
    png: "docs/kernels/attention.png",
    title: "Causal attention, d = 128, 16384 tokens a batch (H200)",
    filter: &[("d", "128"), ("mask", "causal")],
    skip: &[("dtype", "f16")],
    series: &["pass", "impl", "dtype"],
    x: "T",
    y: "TFLOP/s",
    y_desc: "TFLOP/s (log scale)",
    references: &["SDPA", "FA2", "cuDNN"],
}];

pub fn bench_pages(args: &[String]) -> Result<(), String> {
    let mut check = false;
    let mut plots = true;
    for a in args {
        match a.as_str() {
            "--check" => check = true,
            "--no-plots" => plots = false,
            other => return Err(format!("bench-pages: unknown argument `{other}`")),
        }
    }
    let root = crate::repo_root();
    let mut pages = Vec::new();
    find_md(&root.join("docs"), &mut pages);
    pages.sort();
    let mut stale = Vec::new();
    for page in &pages {
        let text = fs::read_to_string(page).map_err(|e| format!("{}: {e}", page.display()))?;
        if marker(&text).is_none() {
            continue;
        }
        let new = fill(&text, &root).map_err(|e| format!("{}: {e}", page.display()))?;
        if new != text {
            if check {
                stale.push(page.display().to_string());
            } else {
                fs::write(page, new).map_err(|e| format!("{}: {e}", page.display()))?;
                println!("bench-pages: wrote {}", page.display());
            }
        }
    }
    if !stale.is_empty() {
        return Err(format!(
            "bench-pages --check: {} quote tables that differ from their data files; run \
             `cargo xtask bench-pages`",
            stale.join(", ")
        ));
    }
    if plots && !check {
        for spec in PLOTS {
            plot(spec, &root)?;
            println!("bench-pages: wrote {}", spec.png);
        }
        for spec in LINES {
            line_plot(spec, &root)?;
            println!("bench-pages: wrote {}", spec.png);
        }
    }
    Ok(())
}

fn find_md(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            find_md(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// `text` with every marked block replaced by the table its marker names.
fn fill(text: &str, root: &Path) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = marker(rest) {
        let after = &rest[i + OPEN.len()..];
        let end_marker = after
            .find("-->")
            .ok_or("a `<!-- table:` marker is not closed by `-->`")?;
        let spec = after[..end_marker].trim();
        let (data, rows) = match spec.split_once(" rows: ") {
            Some((d, r)) => (
                d.trim(),
                Some(r.split(',').map(str::trim).collect::<Vec<_>>()),
            ),
            None => (spec, None),
        };
        let body = &after[end_marker + 3..];
        let close = body
            .find(CLOSE)
            .ok_or_else(|| format!("the block of {data} has no `{CLOSE}`"))?;
        let mut table = last_table(&read(&root.join(data))?)
            .ok_or_else(|| format!("{data} holds no Markdown table"))?;
        if let Some(words) = rows {
            table = keep_rows(&table, &words)
                .ok_or_else(|| format!("{data}: no row starts with one of {words:?}"))?;
        }
        out.push_str(&rest[..i + OPEN.len()]);
        out.push_str(&after[..end_marker + 3]);
        out.push('\n');
        out.push_str(&table);
        out.push_str(CLOSE);
        rest = &body[close + CLOSE.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Where the first marker that begins a line starts in `text` (a marker quoted inside a
/// sentence is text).
fn marker(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(OPEN) {
        let at = from + i;
        if at == 0 || text[..at].ends_with('\n') {
            return Some(at);
        }
        from = at + OPEN.len();
    }
    None
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

/// The last run of lines starting with `|` in `text`, each ending with a newline.
fn last_table(text: &str) -> Option<String> {
    let mut last: Option<String> = None;
    let mut cur = String::new();
    for line in text.lines().chain(std::iter::once("")) {
        if line.trim_start().starts_with('|') {
            cur.push_str(line.trim_end());
            cur.push('\n');
        } else if !cur.is_empty() {
            last = Some(std::mem::take(&mut cur));
        }
    }
    last
}

/// `table`'s header, its separator and the rows whose first cell starts with one of `words`;
/// `None` when no row does.
fn keep_rows(table: &str, words: &[&str]) -> Option<String> {
    let mut lines = table.lines();
    let mut out = String::new();
    for line in lines.by_ref().take(2) {
        out.push_str(line);
        out.push('\n');
    }
    let mut kept = 0;
    for line in lines {
        let first = cells(line).into_iter().next().unwrap_or_default();
        if words.iter().any(|w| first.starts_with(w)) {
            out.push_str(line);
            out.push('\n');
            kept += 1;
        }
    }
    (kept > 0).then_some(out)
}

fn cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

/// The leading number of a cell such as `1.31×` or `0.0369`.
fn number(cell: &str) -> Option<f64> {
    let end = cell
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | 'e' | 'E' | '+')))
        .unwrap_or(cell.len());
    cell[..end].parse().ok()
}

/// The index of column `name` in a table's `header` (from `data`), or an error naming both.
fn column(header: &[String], name: &str, data: &str) -> Result<usize, String> {
    header
        .iter()
        .position(|h| h == name)
        .ok_or_else(|| format!("{data}: no column `{name}` in {header:?}"))
}

fn plot(spec: &PlotSpec, root: &Path) -> Result<(), String> {
    let data = root.join(spec.data);
    let table = last_table(&read(&data)?)
        .ok_or_else(|| format!("{} holds no Markdown table", spec.data))?;
    let mut lines = table.lines();
    let header = cells(lines.next().unwrap_or_default());
    let col = |name: &str| column(&header, name, spec.data);
    let label_cols = spec
        .label
        .iter()
        .map(|n| col(n))
        .collect::<Result<Vec<_>, _>>()?;
    let value_col = col(spec.value)?;
    let bars: Vec<(String, f64)> = lines
        .skip(1)
        .map(cells)
        .filter_map(|c| {
            let v = number(c.get(value_col)?)?;
            let label: Vec<&str> = label_cols
                .iter()
                .filter_map(|&i| c.get(i).map(|s| s.trim_matches('`')))
                .filter(|s| !s.is_empty() && *s != "—")
                .collect();
            Some((label.join(" "), v))
        })
        .collect();
    if bars.is_empty() {
        return Err(format!("{}: no numeric `{}` cells", spec.data, spec.value));
    }
    let top = bars
        .iter()
        .map(|b| b.1)
        .chain(spec.mark)
        .fold(0.0f64, f64::max)
        * 1.15;
    register_font()?;
    let path = root.join(spec.png);
    let err = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", path.display());
    let n = bars.len();
    let root_area = BitMapBackend::new(&path, (1100, 120 + 28 * n as u32)).into_drawing_area();
    root_area.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root_area)
        .caption(spec.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(330)
        .build_cartesian_2d(0.0..top, (0..n).into_segmented())
        .map_err(|e| err(&e))?;
    // The first row of the table is drawn at the top.
    let labels: Vec<String> = bars.iter().rev().map(|b| b.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc(spec.x_desc)
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| err(&e))?;
    let camel = RGBColor(31, 119, 180);
    let reference = RGBColor(255, 127, 14);
    chart
        .draw_series(bars.iter().rev().enumerate().map(|(i, (label, v))| {
            let colour = if label.contains(spec.reference) {
                reference
            } else {
                camel
            };
            let mut bar = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i)),
                    (*v, SegmentValue::Exact(i + 1)),
                ],
                colour.filled(),
            );
            bar.set_margin(4, 4, 0, 0);
            bar
        }))
        .map_err(|e| err(&e))?;
    if let Some(m) = spec.mark {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(m, SegmentValue::Exact(0)), (m, SegmentValue::Exact(n))],
                BLACK.stroke_width(2),
            )))
            .map_err(|e| err(&e))?;
    }
    root_area.present().map_err(|e| err(&e))?;
    Ok(())
}

/// A line of a figure: its name and its `(x, y)` points.
type Line = (String, Vec<(f64, f64)>);

/// The lines of `spec`, points in table order.
fn line_series(spec: &LineSpec, table: &str) -> Result<Vec<Line>, String> {
    let mut lines = table.lines();
    let header = cells(lines.next().unwrap_or_default());
    let col = |name: &str| column(&header, name, spec.data);
    let filter = spec
        .filter
        .iter()
        .map(|(c, v)| Ok((col(c)?, *v)))
        .collect::<Result<Vec<_>, String>>()?;
    let skip = spec
        .skip
        .iter()
        .map(|(c, v)| Ok((col(c)?, *v)))
        .collect::<Result<Vec<_>, String>>()?;
    let series_cols = spec
        .series
        .iter()
        .map(|c| col(c))
        .collect::<Result<Vec<_>, _>>()?;
    let (xc, yc) = (col(spec.x)?, col(spec.y)?);
    let mut out: Vec<Line> = Vec::new();
    for c in lines.skip(1).map(cells) {
        if !filter
            .iter()
            .all(|&(i, v)| c.get(i).is_some_and(|s| s == v))
            || skip.iter().any(|&(i, v)| c.get(i).is_some_and(|s| s == v))
        {
            continue;
        }
        let (Some(x), Some(y)) = (
            c.get(xc).and_then(|s| number(s)),
            c.get(yc).and_then(|s| number(s)),
        ) else {
            continue;
        };
        let name: Vec<&str> = series_cols
            .iter()
            .filter_map(|&i| c.get(i).map(|s| s.as_str()))
            .collect();
        let name = name.join(" ");
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, pts)) => pts.push((x, y)),
            None => out.push((name, vec![(x, y)])),
        }
    }
    if out.is_empty() {
        return Err(format!("{}: no rows match {:?}", spec.data, spec.filter));
    }
    Ok(out)
}

fn line_plot(spec: &LineSpec, root: &Path) -> Result<(), String> {
    let table = last_table(&read(&root.join(spec.data))?)
        .ok_or_else(|| format!("{} holds no Markdown table", spec.data))?;
    let series = line_series(spec, &table)?;
    let pts = series.iter().flat_map(|s| s.1.iter());
    let (xlo, xhi, ylo, yhi) = pts.fold((f64::MAX, f64::MIN, f64::MAX, f64::MIN), |a, p| {
        (a.0.min(p.0), a.1.max(p.0), a.2.min(p.1), a.3.max(p.1))
    });
    let (ylo, yhi) = ((ylo * 0.7).max(1e-3), yhi * 1.5);
    let mut xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .collect();
    xs.sort_by(|a, b| a.total_cmp(b));
    xs.dedup();
    register_font()?;
    let path = root.join(spec.png);
    let err = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", path.display());
    let area = BitMapBackend::new(&path, (1200, 720)).into_drawing_area();
    area.fill(&WHITE).map_err(|e| err(&e))?;
    let (left, right) = area.split_horizontally(880);
    let mut chart = ChartBuilder::on(&left)
        .caption(spec.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(
            ((xlo / 1.25)..(xhi * 1.25)).log_scale().with_key_points(xs),
            (ylo..yhi).log_scale().with_key_points(log_ticks(ylo, yhi)),
        )
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(spec.x)
        .y_desc(spec.y_desc)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| fmt_tick(*v))
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(225, 225, 225))
        .draw()
        .map_err(|e| err(&e))?;
    let font = ("sans-serif", 16).into_font().color(&BLACK);
    for (i, (name, pts)) in series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let dashed = spec.references.iter().any(|r| name.contains(r));
        let style = colour.stroke_width(if dashed { 2 } else { 3 });
        let (dash, gap) = if dashed { (10, 6) } else { (1000, 0) };
        chart
            .draw_series(DashedLineSeries::new(pts.clone(), dash, gap, style))
            .map_err(|e| err(&e))?;
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, colour.filled())))
            .map_err(|e| err(&e))?;
        // the legend, in its own panel
        let y = 60 + 30 * i as i32;
        right
            .draw(&PathElement::new(vec![(10, y), (60, y)], style))
            .map_err(|e| err(&e))?;
        right
            .draw(&Text::new(name.clone(), (70, y - 9), font.clone()))
            .map_err(|e| err(&e))?;
    }
    area.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_series_keep_the_filtered_rows_in_order() {
        let spec = &LINES[0];
        let table = "| d | T | mask | pass | impl | dtype | ms | TFLOP/s | x |\n|---|---|---|---|---|---|---|---|---|\n\
                     | 128 | 512 | causal | forward | camel 2 tiled | f32 | 1.0 | 13.5 | 0.3× |\n\
                     | 64 | 512 | causal | forward | camel 2 tiled | f32 | 1.0 | 99 | 0.3× |\n\
                     | 128 | 1024 | causal | forward | camel 2 tiled | f32 | 2.0 | 14.0 | 0.3× |\n\
                     | 128 | 512 | causal | forward | FA2 | bf16 | 0.1 | 300 | 1× |\n\
                     | 128 | 512 | causal | forward | FA2 | f16 | 0.1 | 301 | 1× |\n";
        let s = line_series(spec, table).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].0, "forward camel 2 tiled f32");
        assert_eq!(s[0].1, vec![(512.0, 13.5), (1024.0, 14.0)]);
        assert_eq!(s[1], ("forward FA2 bf16".to_string(), vec![(512.0, 300.0)]));
    }

    #[test]
    fn the_last_table_replaces_the_block() {
        let dir = std::env::temp_dir().join(format!("bench-pages-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("d.md"),
            "| a |\n|---|\n| 1 |\ntext\n| b | c |\n|---|---|\n| 2 | 3× |\n",
        )
        .unwrap();
        let page = "x\n<!-- table: d.md -->\nold\n<!-- /table -->\ny\n";
        let got = fill(page, &dir).unwrap();
        assert_eq!(
            got,
            "x\n<!-- table: d.md -->\n| b | c |\n|---|---|\n| 2 | 3× |\n<!-- /table -->\ny\n"
        );
        assert_eq!(fill(&got, &dir).unwrap(), got);
        assert!(fill("<!-- table: d.md -->\nno end", &dir).is_err());
        assert!(fill("<!-- table: missing.md -->\n<!-- /table -->", &dir).is_err());
        // a row filter keeps the header and the rows whose first cell starts with a word
        fs::write(
            dir.join("r.md"),
            "| op | µs |\n|---|---:|\n| softmax_bf16 | 1 |\n| log_softmax_bf16 | 2 |\n| sum | 3 |\n",
        )
        .unwrap();
        let page = "<!-- table: r.md rows: softmax,sum -->\n<!-- /table -->\n";
        assert_eq!(
            fill(page, &dir).unwrap(),
            "<!-- table: r.md rows: softmax,sum -->\n| op | µs |\n|---|---:|\n\
             | softmax_bf16 | 1 |\n| sum | 3 |\n<!-- /table -->\n"
        );
        assert!(fill("<!-- table: r.md rows: none -->\n<!-- /table -->", &dir).is_err());
        let quoted = "a `<!-- table: FILE -->` in a sentence\n";
        assert_eq!(fill(quoted, &dir).unwrap(), quoted);
        assert_eq!(number("1.31×"), Some(1.31));
        assert_eq!(number("–"), None);
        let _ = fs::remove_dir_all(&dir);
    }
}

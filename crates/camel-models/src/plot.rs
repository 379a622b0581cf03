//! The PNG of a run's curves: loss (train and held-out) on top, held-out accuracy below when
//! the run has it, each panel with its axis labels and a legend.
//!
//! Text is drawn with DejaVu Sans, which the crate embeds (`assets/`, Bitstream Vera licence),
//! so a plot looks the same on every machine and needs no system fonts.

use crate::run::Metrics;
use crate::{Error, Result};
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::OnceLock;

const FONT: &str = "camel-sans";
static FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Registers the embedded font with plotters once per process.
fn font_ready() -> std::result::Result<(), String> {
    static READY: OnceLock<bool> = OnceLock::new();
    let ok = *READY.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err("the embedded plot font could not be loaded".to_string())
    }
}

/// One line of a panel: its legend name, colour and points.
#[derive(Clone, Debug)]
pub struct Curve {
    /// Legend text.
    pub name: String,
    /// Line colour.
    pub color: RGBColor,
    /// (x, y) points; non-finite y values are left out.
    pub points: Vec<(f32, f32)>,
}

/// One chart of a figure: a vertical-axis label and its curves.
#[derive(Clone, Debug)]
pub struct Panel {
    /// Vertical-axis label.
    pub y_label: String,
    /// The curves drawn in it.
    pub curves: Vec<Curve>,
}

/// Draws `history` into an 800×600 PNG at `path`. The horizontal axis is the epoch when each
/// record ends a different epoch, else the optimizer step.
pub fn plot_metrics(history: &[Metrics], path: &Path) -> Result<()> {
    let by_epoch =
        history.windows(2).all(|w| w[1].epoch > w[0].epoch) && history.iter().all(|m| m.epoch > 0);
    plot_metrics_over(history, !by_epoch, path)
}

/// [`plot_metrics`] with the horizontal axis chosen: the optimizer step when `by_step`, else
/// the epoch.
pub fn plot_metrics_over(history: &[Metrics], by_step: bool, path: &Path) -> Result<()> {
    let by_epoch = !by_step;
    let x = |m: &Metrics| {
        if by_epoch {
            m.epoch as f32
        } else {
            m.step as f32
        }
    };
    let curve = |name: &str, color: RGBColor, f: &dyn Fn(&Metrics) -> Option<f32>| Curve {
        name: name.to_string(),
        color,
        points: history
            .iter()
            .filter_map(|m| f(m).map(|y| (x(m), y)))
            .collect(),
    };
    let mut panels = vec![Panel {
        y_label: "loss".to_string(),
        curves: vec![
            curve("train", BLUE, &|m| Some(m.train_loss)),
            curve("held-out", RED, &|m| Some(m.test_loss)),
        ],
    }];
    let acc = curve("held-out", RGBColor(0, 140, 0), &|m| {
        m.test_acc.map(|a| 100.0 * a)
    });
    if !acc.points.is_empty() {
        panels.push(Panel {
            y_label: "accuracy (%)".to_string(),
            curves: vec![acc],
        });
    }
    plot_panels(&panels, if by_epoch { "epoch" } else { "step" }, path)
}

/// Draws `panels` stacked in an 800×600 PNG at `path`, sharing the horizontal axis label.
pub fn plot_panels(panels: &[Panel], x_label: &str, path: &Path) -> Result<()> {
    let err = |e: String| Error::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    };
    font_ready().map_err(err)?;
    let root = BitMapBackend::new(path, (800, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let areas = root.split_evenly((panels.len().max(1), 1));
    for (panel, area) in panels.iter().zip(&areas) {
        draw_panel(area, panel, x_label).map_err(err)?;
    }
    root.present().map_err(|e| err(e.to_string()))
}

/// The padded range of `values`, or 0..1 when there are none.
fn span(values: impl Iterator<Item = f32>) -> std::ops::Range<f32> {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo.is_finite() && hi > lo {
        let pad = (hi - lo) * 0.05;
        (lo - pad)..(hi + pad)
    } else if lo.is_finite() {
        (lo - 0.5)..(lo + 0.5)
    } else {
        0.0..1.0
    }
}

/// The legend goes where the first curve is not at its end: top right for a falling curve,
/// bottom right for a rising one.
fn legend_corner(curves: &[(&Curve, Vec<(f32, f32)>)]) -> SeriesLabelPosition {
    match curves.first().map(|(_, p)| (p.first(), p.last())) {
        Some((Some(a), Some(b))) if b.1 > a.1 => SeriesLabelPosition::LowerRight,
        _ => SeriesLabelPosition::UpperRight,
    }
}

fn draw_panel(
    area: &DrawingArea<BitMapBackend, plotters::coord::Shift>,
    panel: &Panel,
    x_label: &str,
) -> std::result::Result<(), String> {
    let finite = |c: &Curve| -> Vec<(f32, f32)> {
        c.points
            .iter()
            .copied()
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .collect()
    };
    let curves: Vec<(&Curve, Vec<(f32, f32)>)> =
        panel.curves.iter().map(|c| (c, finite(c))).collect();
    let xs = span(curves.iter().flat_map(|(_, p)| p.iter().map(|q| q.0)));
    let ys = span(curves.iter().flat_map(|(_, p)| p.iter().map(|q| q.1)));
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(xs, ys)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(panel.y_label.as_str())
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(|e| e.to_string())?;
    for (c, pts) in &curves {
        let color = c.color;
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(c.name.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        if pts.len() <= 60 {
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| e.to_string())?;
        }
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(legend_corner(&curves))
        .draw()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(y_label: &str, path: &Path) -> Vec<u8> {
        let panel = Panel {
            y_label: y_label.to_string(),
            curves: vec![Curve {
                name: "train".to_string(),
                color: BLUE,
                points: vec![(1.0, 2.0), (2.0, 1.5), (3.0, f32::NAN), (4.0, 1.0)],
            }],
        };
        plot_panels(&[panel], "epoch", path).unwrap();
        std::fs::read(path).unwrap()
    }

    /// The labels are drawn: plots that differ only in an axis label differ in their pixels.
    #[test]
    fn labels_are_drawn() {
        let dir = std::env::temp_dir().join(format!("camel-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = one("loss", &dir.join("a.png"));
        let b = one("accuracy", &dir.join("b.png"));
        let a2 = one("loss", &dir.join("c.png"));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(&a[1..4], b"PNG");
        assert_eq!(a, a2, "the same plot twice gives the same file");
        assert_ne!(a, b, "a different axis label changes the picture");
    }
}

//! The PNG of a run's curves: loss (train and test) on top, test accuracy below.
//!
//! The picture carries no text (camel builds plotters without a font engine, so the plot needs
//! no system fonts): train loss is blue, test loss red, accuracy green; each panel's vertical
//! axis spans its data's range and the horizontal axis the epochs.

use crate::run::Metrics;
use crate::{Error, Result};
use plotters::prelude::*;
use std::path::Path;

/// Draws `history` into a 800×600 PNG at `path`.
pub fn plot_metrics(history: &[Metrics], path: &Path) -> Result<()> {
    let err = |e: String| Error::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    };
    let root = BitMapBackend::new(path, (800, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let accs: Vec<(f32, f32)> = history
        .iter()
        .filter_map(|m| m.test_acc.map(|a| (m.epoch as f32, a)))
        .collect();
    let (top, bottom) = if accs.is_empty() {
        (root.clone(), None)
    } else {
        let (t, b) = root.split_vertically(360);
        (t, Some(b))
    };
    let x_max = history.iter().map(|m| m.epoch).max().unwrap_or(1).max(1) as f32;
    let train: Vec<(f32, f32)> = history
        .iter()
        .map(|m| (m.epoch as f32, m.train_loss))
        .filter(|p| p.1.is_finite())
        .collect();
    let test: Vec<(f32, f32)> = history
        .iter()
        .map(|m| (m.epoch as f32, m.test_loss))
        .filter(|p| p.1.is_finite())
        .collect();
    let range = |pts: &[(f32, f32)]| {
        let lo = pts.iter().map(|p| p.1).fold(f32::INFINITY, f32::min);
        let hi = pts.iter().map(|p| p.1).fold(f32::NEG_INFINITY, f32::max);
        if lo.is_finite() && hi > lo {
            let pad = (hi - lo) * 0.05;
            (lo - pad)..(hi + pad)
        } else if lo.is_finite() {
            (lo - 0.5)..(lo + 0.5)
        } else {
            0.0..1.0
        }
    };
    let both: Vec<(f32, f32)> = train.iter().chain(&test).copied().collect();
    panel(&top, x_max, range(&both), &[(&train, BLUE), (&test, RED)]).map_err(err)?;
    if let Some(b) = bottom {
        panel(&b, x_max, range(&accs), &[(&accs, GREEN)]).map_err(err)?;
    }
    root.present().map_err(|e| err(e.to_string()))
}

type Series<'a> = (&'a [(f32, f32)], RGBColor);

fn panel(
    area: &DrawingArea<BitMapBackend, plotters::coord::Shift>,
    x_max: f32,
    y: std::ops::Range<f32>,
    series: &[Series],
) -> std::result::Result<(), String> {
    let area = area.margin(20, 20, 20, 20);
    let (w, h) = area.dim_in_pixel();
    area.draw(&Rectangle::new(
        [(0, 0), (w as i32 - 1, h as i32 - 1)],
        BLACK.stroke_width(1),
    ))
    .map_err(|e| e.to_string())?;
    let x_lo = if x_max > 1.0 { 1.0 } else { 0.0 };
    let mut chart = ChartBuilder::on(&area)
        .build_cartesian_2d(x_lo..x_max, y)
        .map_err(|e| e.to_string())?;
    for (pts, color) in series {
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

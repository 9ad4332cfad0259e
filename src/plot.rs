//! `coverage.png`: gold-evidence coverage against the context budget, one line per mode, for
//! category 1 (multi-hop) and for categories 1–4. The font is embedded (DejaVu Sans), so the
//! chart renders the same on a machine without fonts.

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

use crate::eval::Summary;

/// A chart that could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {message}")]
pub struct PlotError {
    /// The image file.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
                .map_err(|_| "the embedded DejaVu Sans font does not parse".to_string())
        })
        .clone()
}

/// Draws coverage against budget for every mode in `summary` into a PNG at `path`.
pub fn coverage_png(summary: &Summary, path: &Path) -> Result<(), PlotError> {
    draw(summary, path).map_err(|message| PlotError {
        path: path.display().to_string(),
        message,
    })
}

fn draw(summary: &Summary, path: &Path) -> Result<(), String> {
    register_font()?;
    let budgets: Vec<usize> = summary
        .cells
        .values()
        .flat_map(|b| b.keys().copied())
        .collect();
    let (lo, hi) = match (budgets.iter().min(), budgets.iter().max()) {
        (Some(&lo), Some(&hi)) => (lo as f64, hi as f64),
        _ => return Err("the summary has no cells".into()),
    };
    // Keep a single budget visible as a point in the middle of the axis.
    let (lo, hi) = if lo < hi {
        (lo, hi)
    } else {
        (lo * 0.5, hi * 1.5)
    };
    let e = |err: &dyn std::fmt::Display| err.to_string();
    let root = BitMapBackend::new(path, (1400, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let panels = root.split_evenly((1, 2));
    for (area, (category, title)) in panels
        .iter()
        .zip([("1", "Category 1 (multi-hop)"), ("all", "Categories 1-4")])
    {
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{title}: gold evidence coverage"),
                ("sans-serif", 22),
            )
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(lo..hi, 0f64..1f64)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc("context budget (whitespace tokens)")
            .y_desc("coverage")
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(|x| e(&x))?;
        for (i, (mode, by_budget)) in summary.cells.iter().enumerate() {
            let points: Vec<(f64, f64)> = by_budget
                .iter()
                .filter_map(|(b, cats)| cats.get(category).map(|c| (*b as f64, c.coverage)))
                .filter(|(_, c)| c.is_finite())
                .collect();
            let color = Palette99::pick(i).to_rgba();
            let width = if mode == "full" { 3 } else { 2 };
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(width)))
                .map_err(|x| e(&x))?
                .label(mode.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(width))
                });
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|x| e(&x))?;
        }
        chart
            .configure_series_labels()
            .label_font(("sans-serif", 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

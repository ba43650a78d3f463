//! The equal-budget chart: each run's best figure against the output
//! tokens it had spent, a step line per run, with the budget every run
//! reached marked. SVG through plotters, no font backend (as `plot`).

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use super::budget::RunCurve;

const WIDTH: u32 = 900;
const HEIGHT: u32 = 460;
const FONT: &str = "sans-serif";

/// Okabe and Ito's colour-blind-safe colours, as `plot` uses.
const COLORS: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
];

/// The chart of `runs`' curves; `figure` names the y axis (`best score`).
pub fn budget_svg(figure: &str, runs: &[RunCurve]) -> Result<String> {
    let max_tokens = runs.iter().map(|r| r.curve.tokens()).max().unwrap_or(0);
    let common = runs.iter().map(|r| r.curve.tokens()).min().unwrap_or(0);
    let x_max = (max_tokens as f64 * 1.05).max(1.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{figure} against output tokens"), (FONT, 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..x_max, 0f64..1.05)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("output tokens spent")
            .y_desc(figure)
            .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 15))
            .draw()
            .map_err(err)?;
        if runs.len() > 1 {
            chart
                .draw_series(LineSeries::new(
                    [(common as f64, 0.0), (common as f64, 1.05)],
                    BLACK.mix(0.35),
                ))
                .map_err(err)?
                .label(format!("equal budget: {common} tokens"))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BLACK.mix(0.35)));
        }
        for (i, run) in runs.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(steps(run), c.stroke_width(2)))
                .map_err(err)?
                .label(format!("{} ({})", run.label, run.kind))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], c.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// A run's curve as a step line: flat until the figure changes. A run
/// that never reached a figure is drawn at 0.
fn steps(run: &RunCurve) -> Vec<(f64, f64)> {
    let mut out = vec![(0.0, 0.0)];
    let mut last = 0.0;
    for p in &run.curve.points {
        let y = p.best.unwrap_or(0.0);
        let x = p.tokens as f64;
        if y != last {
            out.push((x, last));
            out.push((x, y));
            last = y;
        }
    }
    out.push((run.curve.tokens() as f64, last));
    out
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("cannot draw the chart: {e}")
}

#[cfg(test)]
mod tests {
    use super::super::budget::Curve;
    use super::*;

    fn run(label: &str, points: &[(u64, f64)]) -> RunCurve {
        RunCurve {
            label: label.into(),
            kind: "repair".into(),
            curve: Curve::of_replies(points.iter().map(|(t, s)| (Some(*t), Some(*s))), None),
        }
    }

    #[test]
    fn steps_rise_where_the_figure_changes() {
        let r = run("a", &[(10, 0.5), (10, 0.5), (10, 1.0)]);
        assert_eq!(
            steps(&r),
            [
                (0.0, 0.0),
                (10.0, 0.0),
                (10.0, 0.5),
                (30.0, 0.5),
                (30.0, 1.0),
                (30.0, 1.0)
            ]
        );
    }

    #[test]
    fn the_chart_names_each_run_and_the_common_budget() {
        let svg = budget_svg(
            "best score",
            &[
                run("batch 1", &[(100, 0.5)]),
                run("batch 2", &[(40, 0.2), (200, 1.0)]),
            ],
        )
        .unwrap();
        assert!(svg.starts_with("<svg"));
        for text in [
            "batch 1 (repair)",
            "batch 2 (repair)",
            "equal budget: 100 tokens",
        ] {
            assert!(svg.contains(text), "{text}");
        }
        // No runs is a chart, not a panic.
        budget_svg("pass@1", &[]).unwrap();
    }
}

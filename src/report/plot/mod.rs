//! Plot: SVG charts for `compare`, `ladder` and (`suite`) `suite compare`,
//! drawn with plotters.
//!
//! Only the SVG backend is used, and no font backend: plotters then sizes
//! text with a crude estimate and the SVG carries `<text>` elements that the
//! viewer renders with its own sans-serif font, so nothing here needs system
//! fonts or fontconfig. Pure: returns the SVG text.

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

mod suite;

pub use suite::suite_compare_svg;

/// One pool's samples for the compare chart.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolSamples {
    /// Legend label.
    pub label: String,
    /// Latency of every reply where it is known, in milliseconds.
    pub latencies_ms: Vec<f64>,
    /// Passed / total of every scored candidate, in 0..=1.
    pub scores: Vec<f64>,
}

/// One concurrency level of a ladder.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LadderPoint {
    pub level: usize,
    /// The ranking figure (aggregate output tok/s).
    pub ranking: Option<f64>,
    pub mean_latency_ms: Option<f64>,
    pub max_latency_ms: Option<f64>,
}

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 460;
const FONT: &str = "sans-serif";

/// Colour-blind-safe colours (Okabe and Ito), one per pool.
const COLORS: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// Score bins: ten of 10 points each below 100%, and 100% on its own, since
/// a perfect candidate is what an operator is after.
pub const SCORE_BINS: usize = 11;

pub fn score_bin(score: f64) -> usize {
    if score >= 1.0 {
        SCORE_BINS - 1
    } else {
        ((score.max(0.0) * 10.0) as usize).min(SCORE_BINS - 2)
    }
}

fn score_bin_label(bin: usize) -> String {
    if bin == SCORE_BINS - 1 {
        "100".into()
    } else {
        format!("{}-{}", bin * 10, bin * 10 + 9)
    }
}

/// The compare chart: latency distribution (left) and score distribution
/// (right), one colour per pool.
pub fn compare_svg(pools: &[PoolSamples]) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (left, right) = root.split_horizontally(WIDTH / 2);
        latency_panel(&left, pools)?;
        score_panel(&right, pools)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// The ladder chart: the ranking figure (left) and latency (right) against
/// concurrency, on a log2 axis; the peak level is circled.
pub fn ladder_svg(
    pool: &str,
    ranking_name: &str,
    points: &[LadderPoint],
    peak: Option<usize>,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (left, right) = root.split_horizontally(WIDTH / 2);
        let ranking: Vec<(usize, f64)> = points
            .iter()
            .filter_map(|p| Some((p.level, p.ranking?)))
            .collect();
        ladder_panel(
            &left,
            &format!("{pool}: {ranking_name} by concurrency"),
            ranking_name,
            &[(ranking_name.to_owned(), ranking, color(0))],
            peak,
        )?;
        let to_s = |f: fn(&LadderPoint) -> Option<f64>| -> Vec<(usize, f64)> {
            points
                .iter()
                .filter_map(|p| Some((p.level, f(p)? / 1e3)))
                .collect()
        };
        ladder_panel(
            &right,
            &format!("{pool}: latency by concurrency"),
            "latency (s)",
            &[
                ("mean latency".into(), to_s(|p| p.mean_latency_ms), color(1)),
                ("max latency".into(), to_s(|p| p.max_latency_ms), color(2)),
            ],
            None,
        )?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("cannot draw the chart: {e}")
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn latency_panel(area: &Area<'_>, pools: &[PoolSamples]) -> Result<()> {
    let max_s = pools
        .iter()
        .flat_map(|p| &p.latencies_ms)
        .fold(0.0f64, |m, x| m.max(*x))
        / 1e3;
    let x_max = if max_s > 0.0 { max_s * 1.05 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption("Latency per reply", (FONT, 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max, 0f64..1.0)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|x| format!("{x}"))
        .x_desc("latency (s)")
        .y_desc("replies finished by then (%)")
        .y_label_formatter(&|y| format!("{:.0}", y * 100.0))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(err)?;
    for (i, pool) in pools.iter().enumerate() {
        let c = color(i);
        let mut xs: Vec<f64> = pool.latencies_ms.iter().map(|ms| ms / 1e3).collect();
        xs.sort_by(f64::total_cmp);
        let n = xs.len();
        let label = if n == 0 {
            format!("{} (no latency recorded)", pool.label)
        } else {
            format!("{} ({n} replies)", pool.label)
        };
        // The empirical distribution as a step line.
        let mut steps = vec![(0.0, 0.0)];
        for (k, x) in xs.iter().enumerate() {
            steps.push((*x, k as f64 / n as f64));
            steps.push((*x, (k + 1) as f64 / n as f64));
        }
        if n > 0 {
            steps.push((x_max, 1.0));
        }
        chart
            .draw_series(LineSeries::new(steps, c.stroke_width(2)))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)
}

fn score_panel(area: &Area<'_>, pools: &[PoolSamples]) -> Result<()> {
    let counts: Vec<[usize; SCORE_BINS]> = pools
        .iter()
        .map(|p| {
            let mut bins = [0; SCORE_BINS];
            for s in &p.scores {
                bins[score_bin(*s)] += 1;
            }
            bins
        })
        .collect();
    let most = counts.iter().flatten().copied().max().unwrap_or(0).max(1);
    let y_max = most as f64 * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption("Score per candidate", (FONT, 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(SCORE_BINS as f64 - 0.5), 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(SCORE_BINS)
        .x_label_formatter(&|x| {
            let bin = x.round();
            if (x - bin).abs() < 1e-6 && (0.0..SCORE_BINS as f64).contains(&bin) {
                score_bin_label(bin as usize)
            } else {
                String::new()
            }
        })
        // Counts: whole numbers only.
        .y_labels((most + 1).min(11))
        .y_label_formatter(&|y| {
            if (y - y.round()).abs() < 1e-6 {
                format!("{y:.0}")
            } else {
                String::new()
            }
        })
        .x_desc("cases passed (%)")
        .y_desc("scored candidates")
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(err)?;
    let width = 0.8 / pools.len().max(1) as f64;
    for (i, (pool, bins)) in pools.iter().zip(&counts).enumerate() {
        let c = color(i);
        let offset = -0.4 + i as f64 * width;
        chart
            .draw_series(
                bins.iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .map(|(b, n)| {
                        let x0 = b as f64 + offset;
                        Rectangle::new([(x0, 0.0), (x0 + width * 0.95, *n as f64)], c.filled())
                    }),
            )
            .map_err(err)?
            .label(format!("{} ({} scored)", pool.label, pool.scores.len()))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

/// One line of a ladder panel: its label, its points (level, value) and
/// its colour.
type Series = (String, Vec<(usize, f64)>, RGBColor);

fn ladder_panel(
    area: &Area<'_>,
    caption: &str,
    y_desc: &str,
    series: &[Series],
    peak: Option<usize>,
) -> Result<()> {
    // Concurrency on a log2 axis: ticks at powers of two, labelled as levels.
    let log2 = |level: usize| (level.max(1) as f64).log2();
    let levels = series
        .iter()
        .flat_map(|(_, pts, _)| pts.iter().map(|p| p.0));
    let max_level = levels.clone().max().unwrap_or(1);
    let min_level = levels.min().unwrap_or(1);
    let x_range = (log2(min_level) - 0.3)..(log2(max_level) + 0.3);
    let y_max = series
        .iter()
        .flat_map(|(_, pts, _)| pts.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.15 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x_range, 0f64..y_max)
        .map_err(err)?;
    let ticks = (log2(max_level).ceil() - log2(min_level).floor()) as usize + 2;
    chart
        .configure_mesh()
        .x_labels(ticks)
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-6 && x.round() >= 0.0 {
                format!("{}", 2f64.powf(x.round()) as u64)
            } else {
                String::new()
            }
        })
        .x_desc("concurrent requests (log2 scale)")
        .y_desc(y_desc)
        .y_label_formatter(&|y| {
            if y_max >= 10.0 {
                format!("{y:.0}")
            } else {
                format!("{y:.1}")
            }
        })
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(err)?;
    for (label, pts, c) in series {
        let c = *c;
        let xy: Vec<(f64, f64)> = pts.iter().map(|(l, y)| (log2(*l), *y)).collect();
        chart
            .draw_series(LineSeries::new(xy.clone(), c.stroke_width(2)))
            .map_err(err)?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(xy.iter().map(|p| Circle::new(*p, 4, c.filled())))
            .map_err(err)?;
        if let Some(level) = peak {
            if let Some((_, y)) = pts.iter().find(|(l, _)| *l == level) {
                let at = (log2(level), *y);
                chart
                    .draw_series([Circle::new(at, 10, BLACK.stroke_width(2))])
                    .map_err(err)?;
                // The label sits above the ring, not on it.
                chart
                    .draw_series([EmptyElement::at(at)
                        + Text::new(
                            format!("peak at {level}"),
                            (0, -16),
                            (FONT, 14)
                                .into_font()
                                .color(&BLACK)
                                .pos(Pos::new(HPos::Center, VPos::Bottom)),
                        )])
                    .map_err(err)?;
            }
        }
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)
}

fn legend<'a, 'b: 'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>,
    at: SeriesLabelPosition,
) -> Result<()>
where
    X: plotters::coord::ranged1d::Ranged<ValueType = f64>,
    Y: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    chart
        .configure_series_labels()
        .position(at)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_bins_keep_perfect_apart() {
        let cases = [
            (0.0, 0),
            (0.05, 0),
            (0.1, 1),
            (0.899, 8),
            (0.95, 9),
            (0.999, 9),
            (1.0, 10),
        ];
        for (score, bin) in cases {
            assert_eq!(score_bin(score), bin, "{score}");
        }
        assert_eq!(score_bin_label(9), "90-99");
        assert_eq!(score_bin_label(10), "100");
    }

    #[test]
    fn compare_chart_has_axes_legend_and_every_pool() {
        let svg = compare_svg(&[
            PoolSamples {
                label: "batch 1 (fast)".into(),
                latencies_ms: vec![100.0, 200.0, 300.0],
                scores: vec![1.0, 0.5],
            },
            PoolSamples {
                label: "batch 2 (slow)".into(),
                latencies_ms: vec![],
                scores: vec![],
            },
        ])
        .unwrap();
        for text in [
            "latency (s)",
            "cases passed (%)",
            "scored candidates",
            "batch 1 (fast) (3 replies)",
            "batch 2 (slow) (no latency recorded)",
            "90-99",
            "\n100\n",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
    }

    #[test]
    fn ladder_chart_marks_the_peak() {
        let points: Vec<LadderPoint> = [1, 2, 4, 8]
            .iter()
            .map(|&level| LadderPoint {
                level,
                ranking: Some(100.0 * level as f64),
                mean_latency_ms: Some(1000.0),
                max_latency_ms: Some(1500.0),
            })
            .collect();
        let svg = ladder_svg("fast", "aggregate output tok/s", &points, Some(4)).unwrap();
        assert!(svg.contains("peak at 4"));
        assert!(svg.contains("concurrent requests (log2 scale)"));
        assert!(svg.contains("\n8\n"), "the level axis is labelled");
    }
}

//! The suite comparison chart (`suite compare --svg`): each problem's
//! pass@k in one run against the other, and a named row per problem with
//! the difference, the suite's mean difference and its interval.

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{color, err, Area, FONT, HEIGHT, WIDTH};

/// The suite comparison chart. Left, each problem's pass@k in run A
/// against run B (above the diagonal B did better); problems with the same
/// pair share one dot, sized by and labelled with their number. Right, one
/// row per problem, named, in the order of `problems` (the text table's):
/// a bar for B - A, a dot for no difference, with the suite's mean
/// difference and its 95% interval across all rows. The chart grows one
/// row's height per problem, so a reader finds every problem by name.
/// `problems` is (name, A, B).
pub fn suite_compare_svg(
    a: &str,
    b: &str,
    k: usize,
    problems: &[(String, f64, f64)],
    diff: (f64, f64, f64),
) -> Result<String> {
    let rows = problems.len().max(1);
    let main = (HEIGHT - FOOTER).max(DIFF_CHROME + ROW * rows as u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, main + FOOTER)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (top, footer) = root.split_vertically(main);
        let (left, right) = top.split_horizontally(SCATTER_WIDTH);
        let (square, _) = left.split_vertically(HEIGHT - FOOTER);
        agreement_panel(&square, a, b, k, problems)?;
        difference_panel(&right, a, b, k, problems, diff)?;
        suite_legend(&footer, a, b, diff)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// The suite chart's layout, in pixels: one problem's row, the rest of the
/// difference panel (caption, margins, axis), the legend under both panels
/// and the scatter's width.
const ROW: u32 = 18;
const DIFF_CHROME: u32 = 100;
const FOOTER: u32 = 60;
const SCATTER_WIDTH: u32 = 420;

/// Which run did better on a problem, and its colour throughout the chart.
fn better_color(a: f64, b: f64) -> RGBColor {
    if same(a, b) {
        RGBColor(120, 120, 120)
    } else if b > a {
        color(0)
    } else {
        color(1)
    }
}

/// pass@k values that print the same (the reports give three decimals).
fn same(x: f64, y: f64) -> bool {
    (x - y).abs() < 5e-4
}

/// A tick label with one decimal: `0.0`, never `-0.0`.
fn tick(v: f64) -> String {
    let v = if v.abs() < 1e-9 { 0.0 } else { v };
    format!("{v:.1}")
}

/// A difference as the text table prints it: `+0.500`, `-0.250`, `0`.
fn signed(d: f64) -> String {
    if d.abs() < 5e-4 {
        "0".to_owned()
    } else {
        format!("{d:+.3}")
    }
}

fn agreement_panel(
    area: &Area<'_>,
    a: &str,
    b: &str,
    k: usize,
    problems: &[(String, f64, f64)],
) -> Result<()> {
    // Problems on one point, in order of first appearance.
    let mut points: Vec<(f64, f64, usize)> = Vec::new();
    for (_, x, y) in problems {
        match points
            .iter_mut()
            .find(|(px, py, _)| same(*px, *x) && same(*py, *y))
        {
            Some(p) => p.2 += 1,
            None => points.push((*x, *y, 1)),
        }
    }
    let mut chart = ChartBuilder::on(area)
        .caption(format!("pass@{k} per problem"), (FONT, 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.05f64..1.08, -0.05f64..1.08)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(a)
        .y_desc(b)
        .x_label_formatter(&|x| tick(*x))
        .y_label_formatter(&|y| tick(*y))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new([(0.0, 0.0), (1.0, 1.0)], BLACK.mix(0.4)))
        .map_err(err)?;
    let radius = |n: usize| 4 + (2.5 * ((n - 1) as f64).sqrt()).round() as i32;
    chart
        .draw_series(
            points.iter().map(|&(x, y, n)| {
                Circle::new((x, y), radius(n), better_color(x, y).mix(0.7).filled())
            }),
        )
        .map_err(err)?;
    chart
        .draw_series(points.iter().map(|&(x, y, n)| {
            let r = radius(n);
            EmptyElement::at((x, y))
                + Text::new(
                    n.to_string(),
                    (r + 2, -r - 2),
                    (FONT, 13)
                        .into_font()
                        .color(&BLACK)
                        .pos(Pos::new(HPos::Left, VPos::Bottom)),
                )
        }))
        .map_err(err)?;
    Ok(())
}

fn difference_panel(
    area: &Area<'_>,
    a: &str,
    b: &str,
    k: usize,
    problems: &[(String, f64, f64)],
    (mean, low, high): (f64, f64, f64),
) -> Result<()> {
    let rows = problems.len().max(1) as f64;
    // Room for the longest name at the estimated 7 px a character.
    let longest = problems
        .iter()
        .map(|p| p.0.chars().count())
        .max()
        .unwrap_or(0);
    let names = (longest as u32 * 7 + 14).clamp(60, 300);
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{b} - {a}, per problem, in the table's order"),
            (FONT, 20),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(names)
        .build_cartesian_2d(-1.3f64..1.3, 0f64..rows)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_labels(11)
        .x_max_light_lines(1)
        .x_label_formatter(&|x| tick(*x))
        .x_desc(format!("difference in pass@{k}"))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(err)?;
    chart
        .draw_series([Rectangle::new(
            [(low, 0.0), (high, rows)],
            color(4).mix(0.25).filled(),
        )])
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new([(0.0, 0.0), (0.0, rows)], BLACK.mix(0.5)))
        .map_err(err)?;
    // Row i from the top, as the table lists it.
    let middle = |i: usize| rows - i as f64 - 0.5;
    let label = |text: String, at: (f64, f64), dx: i32, h: HPos| {
        EmptyElement::at(at)
            + Text::new(
                text,
                (dx, 0),
                (FONT, 12)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(h, VPos::Center)),
            )
    };
    for (i, (name, x, y)) in problems.iter().enumerate() {
        let (d, c, at) = (y - x, better_color(*x, *y), middle(i));
        if same(*x, *y) {
            chart
                .draw_series([Circle::new((0.0, at), 4, c.filled())])
                .map_err(err)?;
        } else {
            chart
                .draw_series([Rectangle::new(
                    [(0.0, at - 0.33), (d, at + 0.33)],
                    c.filled(),
                )])
                .map_err(err)?;
        }
        let (dx, h) = if d < 0.0 && !same(*x, *y) {
            (-6, HPos::Right)
        } else {
            (8, HPos::Left)
        };
        chart
            .draw_series([label(
                signed(d),
                (if same(*x, *y) { 0.0 } else { d }, at),
                dx,
                h,
            )])
            .map_err(err)?;
        chart
            .draw_series([label(name.clone(), (-1.3, at), -8, HPos::Right)])
            .map_err(err)?;
    }
    chart
        .draw_series(LineSeries::new(
            [(mean, 0.0), (mean, rows)],
            BLACK.stroke_width(2),
        ))
        .map_err(err)?;
    Ok(())
}

/// The suite chart's key, in one row under both panels.
fn suite_legend(
    area: &Area<'_>,
    a: &str,
    b: &str,
    (mean, low, high): (f64, f64, f64),
) -> Result<()> {
    let font = (FONT, 14).into_font().color(&BLACK);
    let mut x = 20;
    let y = 22;
    type Entry<'a> = (&'a dyn Fn(i32) -> Result<()>, String);
    let entries: [Entry; 5] = [
        (&|x| swatch(area, x, y, color(0)), format!("{b} better")),
        (&|x| swatch(area, x, y, color(1)), format!("{a} better")),
        (
            &|x| {
                area.draw(&Circle::new((x + 7, y), 4, better_color(0.0, 0.0).filled()))
                    .map_err(err)
            },
            "equal".to_owned(),
        ),
        (
            &|x| swatch(area, x, y, color(4).mix(0.5)),
            format!("95% interval [{low:+.3}, {high:+.3}]"),
        ),
        (
            &|x| {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 16, y)],
                    BLACK.stroke_width(2),
                ))
                .map_err(err)
            },
            format!("mean difference {mean:+.3}"),
        ),
    ];
    for (mark, text) in entries {
        mark(x)?;
        area.draw_text(
            &text,
            &font.pos(Pos::new(HPos::Left, VPos::Center)),
            (x + 22, y),
        )
        .map_err(err)?;
        x += 22 + 7 * text.chars().count() as i32 + 24;
    }
    area.draw_text(
        "left: the number by a dot is how many problems lie on it",
        &font.pos(Pos::new(HPos::Left, VPos::Center)),
        (20, y + 22),
    )
    .map_err(err)?;
    Ok(())
}

fn swatch<C: Color>(area: &Area<'_>, x: i32, y: i32, c: C) -> Result<()> {
    area.draw(&Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()))
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text elements of an SVG: (y, text unescaped), in document order.
    fn texts(svg: &str) -> Vec<(f64, String)> {
        svg.split("<text")
            .skip(1)
            .map(|t| {
                let y = t.split(" y=\"").nth(1).unwrap().split('"').next().unwrap();
                let body = &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()];
                let body = body.trim().replace("&apos;", "'").replace("&amp;", "&");
                (y.parse().unwrap(), body)
            })
            .collect()
    }

    /// Issue 30: twenty problems were three dots with no count, the bars had
    /// no names and another order than the table, a zero difference had no
    /// bar at all, and an axis read `-0.0`.
    #[test]
    fn suite_chart_names_every_problem_in_the_given_order() {
        let rows: Vec<(String, f64, f64)> = [
            ("zeta", 0.5, 1.0),
            ("alpha", 0.5, 0.0),
            ("mid", 0.5, 1.0),
            ("same", 1.0, 1.0),
        ]
        .iter()
        .map(|(n, a, b)| (n.to_string(), *a, *b))
        .collect();
        let svg = suite_compare_svg("suite 1", "suite 2", 1, &rows, (0.0, -0.5, 0.833)).unwrap();
        let texts = texts(&svg);
        let y_of = |want: &str| {
            let at: Vec<f64> = texts
                .iter()
                .filter(|(_, t)| t == want)
                .map(|(y, _)| *y)
                .collect();
            assert_eq!(at.len(), 1, "{want}: {texts:?}");
            at[0]
        };
        let ys: Vec<f64> = ["zeta", "alpha", "mid", "same"].map(y_of).to_vec();
        assert!(ys.windows(2).all(|w| w[0] < w[1]), "top to bottom: {ys:?}");
        // Every difference is written by its bar, the zero one by its dot.
        for (name, label) in [("zeta", "+0.500"), ("alpha", "-0.500"), ("same", "0")] {
            assert!(
                texts
                    .iter()
                    .any(|(y, t)| t == label && (y - y_of(name)).abs() < 1.0),
                "{name}: {label}"
            );
        }
        assert!(svg.contains("<circle"), "the zero difference is a dot");
        // zeta and mid share a point of the scatter, which says so.
        assert!(texts.iter().any(|(_, t)| t == "2"), "{texts:?}");
        for (_, t) in &texts {
            assert!(t != "-0.0" && t != "-0", "{texts:?}");
        }
        for want in [
            "pass@1 per problem",
            "suite 2 - suite 1, per problem, in the table's order",
            "suite 2 better",
            "suite 1 better",
            "95% interval [-0.500, +0.833]",
            "mean difference +0.000",
        ] {
            assert!(texts.iter().any(|(_, t)| t == want), "{want} missing");
        }
    }

    #[test]
    fn the_suite_chart_grows_a_row_per_problem() {
        let rows = |n: usize| -> Vec<(String, f64, f64)> {
            (0..n).map(|i| (format!("p{i}"), 0.0, 1.0)).collect()
        };
        let height = |svg: &str| -> u32 {
            let h = svg.split("height=\"").nth(1).unwrap();
            h[..h.find('"').unwrap()].parse().unwrap()
        };
        let few = suite_compare_svg("a", "b", 1, &rows(3), (1.0, 1.0, 1.0)).unwrap();
        let many = suite_compare_svg("a", "b", 1, &rows(161), (1.0, 1.0, 1.0)).unwrap();
        assert_eq!(height(&few), HEIGHT);
        assert!(height(&many) >= 161 * ROW, "{}", height(&many));
    }
}

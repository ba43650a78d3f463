//! Probe benchmark: serial and shared side by side, with the one-rustc
//! floor, on N generated candidates of the bundled `absolute` task. Every
//! mode's build is the whole of a batch's compiling: the probe's verdicts
//! and the images the candidates are scored from (a batch compiles each
//! candidate once), in the scorer's release profile.
//!
//! - `serial`: one cargo build per candidate, each an image of its own (the
//!   reference);
//! - `shared`: the default: the candidates as modules of one crate, the
//!   ones with errors removed and the rest built again until a pass builds
//!   (`exec::shared`);
//! - `floor`: one build of that crate over only the candidates that
//!   compile: one rustc, no errors to remove, which no scheme that must
//!   also find the failing candidates can beat.
//!
//! `cargo bench --bench probe` (environment: `ASSAY_BENCH_NS=32,200,1000`,
//! `ASSAY_BENCH_SERIAL_MAX=200`, `ASSAY_BENCH_SERIAL_SAMPLE=100`). Serial
//! above SERIAL_MAX candidates is measured on the first SERIAL_SAMPLE and
//! scaled to N, and the table says so. CPU-s are this process's and its
//! reaped children's (cargo, rustc, the linker). The dependencies are built
//! once, untimed, before anything is measured. `ASSAY_BENCH_LOG=1` logs each
//! shared build's size, pass, wall time and outcome to stderr.
//!
//! Candidates are generated from five templates (a match table, a solver
//! struct, iterators and closures, a trait with generic helpers, an enum of
//! unknowns), padded with helper functions to 50-300 lines; one in ten fails
//! in one of seven ways (type mismatch, unknown name, use after move, borrow
//! conflict, wrong entry signature, unknown method, a post-monomorphization
//! const error that only code generation finds).

use std::path::Path;
use std::time::Instant;

use assay::build::package::{Package, Profile};
use assay::build::probe::{self, ProbeMode, ProbeOutcome, ProbeVerdict};
use assay::support::account::process_cpu_seconds;

fn main() {
    let ns: Vec<usize> = env_list("ASSAY_BENCH_NS", "32,200,1000");
    let serial_max = env_num("ASSAY_BENCH_SERIAL_MAX", 200);
    let serial_sample = env_num("ASSAY_BENCH_SERIAL_SAMPLE", 100);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let spec =
        assay::task::load(&repo.join("specs/absolute")).expect("the bundled absolute task loads");
    let work = repo.join("target/bench-probe-work");
    std::fs::create_dir_all(&work).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if std::env::var_os("ASSAY_BENCH_LOG").is_some() {
        // Each shared build's size, pass, wall and outcome, to see where a
        // mode's time goes (`ASSAY_BENCH_LOG=1`).
        tracing_subscriber::fmt()
            .with_env_filter("assay::build::exec=debug")
            .with_writer(std::io::stderr)
            .init();
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("probe benchmark: task absolute, {cpus} CPUs");
    println!(
        "{:>5} {:<7} {:>9} {:>8} {:>9} {:>7}  note",
        "N", "mode", "wall (s)", "CPU-s", "compiled", "builds"
    );
    let mut ratios = Vec::new();
    runtime.block_on(async {
        let mut package = Package::open(&spec, &work, &work.join("target")).unwrap();
        let warm = package.warm_up(Profile::Score).await.unwrap();
        assert!(warm.success, "the harness builds: {}", warm.stderr);
        for &n in &ns {
            let cands = generate(n);
            let sources: Vec<(usize, &str)> = cands.iter().map(|c| (c.0, c.1.as_str())).collect();
            let expected_fail = cands.iter().filter(|c| c.2).count();

            let (serial_n, scale) = if n > serial_max {
                let sample = serial_sample.min(n);
                (sample, n as f64 / sample as f64)
            } else {
                (n, 1.0)
            };
            let serial = measure(&package, ProbeMode::Serial, &sources[..serial_n]).await;
            let shared = measure(&package, ProbeMode::Shared, &sources).await;
            let good: Vec<(usize, &str)> = sources
                .iter()
                .zip(&shared.verdicts)
                .filter(|(_, v)| v.compiled())
                .map(|(s, _)| *s)
                .collect();
            // The floor is one rustc: the shared build kept to one crate.
            package.set_build_parallelism(1);
            let floor = measure(&package, ProbeMode::Shared, &good).await;
            package.set_build_parallelism(cpus);
            assert_eq!(floor.builds, 1, "the floor is one build");

            let note = if scale > 1.0 {
                format!("measured on {serial_n}, scaled x{scale:.0}")
            } else {
                String::new()
            };
            row(
                n,
                "serial",
                serial.wall * scale,
                serial.cpu * scale,
                &serial,
                &note,
            );
            row(
                n,
                "shared",
                shared.wall,
                shared.cpu,
                &shared,
                &format!("{} passes, {} narrowed", shared.passes, shared.fallbacks),
            );
            row(
                n,
                "floor",
                floor.wall,
                floor.cpu,
                &floor,
                &format!("one rustc over the {} that compile", good.len()),
            );

            let mut differ = 0;
            for (i, s) in serial.verdicts.iter().enumerate() {
                if shared.verdicts[i] != *s {
                    differ += 1;
                    eprintln!("candidate {i}: shared {}, serial {s}", shared.verdicts[i]);
                }
            }
            let failed = shared.verdicts.iter().filter(|v| !v.compiled()).count();
            println!(
                "{n:>5} verdicts: {differ} of {serial_n} differ between serial and shared; \
                 {failed} failed ({expected_fail} generated to fail)"
            );
            ratios.push(Ratios {
                n,
                shared_floor: shared.wall / floor.wall,
                shared_floor_cpu: shared.cpu / floor.cpu,
                shared_serial: shared.wall / (serial.wall * scale),
                shared_serial_cpu: shared.cpu / (serial.cpu * scale),
            });
        }
    });
    println!();
    println!(
        "{:>5} {:>13} {:>13} {:>14} {:>14}",
        "N", "shared/floor", "CPU: shared", "shared/serial", "CPU: shared"
    );
    println!(
        "{:>5} {:>13} {:>13} {:>14} {:>14}",
        "", "", "/floor", "", "/serial"
    );
    for r in ratios {
        println!(
            "{:>5} {:>13.2} {:>13.2} {:>14.2} {:>14.2}",
            r.n, r.shared_floor, r.shared_floor_cpu, r.shared_serial, r.shared_serial_cpu
        );
    }
}

struct Ratios {
    n: usize,
    shared_floor: f64,
    shared_floor_cpu: f64,
    shared_serial: f64,
    shared_serial_cpu: f64,
}

struct Measured {
    wall: f64,
    cpu: f64,
    builds: usize,
    passes: usize,
    fallbacks: usize,
    verdicts: Vec<ProbeVerdict>,
}

async fn measure(package: &Package, mode: ProbeMode, sources: &[(usize, &str)]) -> Measured {
    let cpu0 = process_cpu_seconds();
    let t0 = Instant::now();
    let out = probe::probe(package, mode, sources, |_| {})
        .await
        .expect("probe runs");
    measured(mode.as_str(), out, t0, cpu0)
}

fn measured(mode: &str, out: ProbeOutcome, t0: Instant, cpu0: f64) -> Measured {
    let wall = t0.elapsed().as_secs_f64();
    let cpu = process_cpu_seconds() - cpu0;
    assert!(
        out.stats.deps_rebuilt.is_empty(),
        "{mode}: dependencies rebuilt: {:?}",
        out.stats.deps_rebuilt
    );
    Measured {
        wall,
        cpu,
        builds: out.stats.builds,
        passes: out.stats.passes,
        fallbacks: out.stats.fallbacks,
        verdicts: out.probed.into_iter().map(|p| p.verdict).collect(),
    }
}

fn row(n: usize, mode: &str, wall: f64, cpu: f64, m: &Measured, note: &str) {
    let compiled = m.verdicts.iter().filter(|v| v.compiled()).count();
    println!(
        "{n:>5} {mode:<7} {wall:>9.2} {cpu:>8.2} {:>9} {:>7}  {note}",
        format!("{compiled}/{}", m.verdicts.len()),
        m.builds
    );
}

fn env_list(key: &str, default: &str) -> Vec<usize> {
    std::env::var(key)
        .unwrap_or_else(|_| default.to_owned())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{key}: not a number list"))
        })
        .collect()
}

fn env_num(key: &str, default: usize) -> usize {
    std::env::var(key).map_or(default, |s| {
        s.parse().unwrap_or_else(|_| panic!("{key}: not a number"))
    })
}

/// A small deterministic generator (SplitMix64), so every run probes the
/// same candidates.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// N candidates: (index, source, generated to fail).
fn generate(n: usize) -> Vec<(usize, String, bool)> {
    let mut rng = Rng(0xA55A_0000 + n as u64);
    (0..n)
        .map(|i| {
            let fails = i % 10 == 3;
            let failure = (i / 10) % 7;
            let target_lines = 50 + rng.below(251) as usize;
            (
                i,
                candidate(&mut rng, i, target_lines, fails.then_some(failure)),
                fails,
            )
        })
        .collect()
}

fn candidate(rng: &mut Rng, i: usize, target_lines: usize, failure: Option<usize>) -> String {
    let template = i % 5;
    let mut body = match template {
        0 => TEMPLATE_MATCH.to_owned(),
        1 => TEMPLATE_SOLVER.to_owned(),
        2 => TEMPLATE_ITER.to_owned(),
        3 => TEMPLATE_TRAIT.to_owned(),
        _ => TEMPLATE_ENUM.to_owned(),
    };
    // Every candidate is its own program: salt the constants.
    body = body.replace("SALT", &format!("{}.0", rng.below(1000)));
    let mut helpers = String::new();
    let mut calls = Vec::new();
    let mut k = 0;
    while body.lines().count() + helpers.lines().count() + 8 < target_lines {
        helpers.push_str(&helper(rng, k));
        calls.push(format!("tweak_{k}(x)"));
        k += 1;
    }
    let mut text = format!(
        "// Generated candidate {i} (template {template}).\n{body}\n{helpers}\n\
         fn tweaks(x: f64) -> f64 {{\n    let mut acc = 0.0;\n{}    acc\n}}\n",
        calls
            .iter()
            .map(|c| format!("    acc += {c};\n"))
            .collect::<String>()
    );
    if let Some(kind) = failure {
        text = inject(text, kind);
    }
    text
}

fn helper(rng: &mut Rng, k: usize) -> String {
    let a = rng.below(97) + 1;
    let b = rng.below(13) + 2;
    match rng.below(4) {
        0 => format!(
            "fn tweak_{k}(x: f64) -> f64 {{\n    let mut acc = x;\n    for i in 0..{b} {{\n        acc = acc.mul_add(0.5, (i as f64) / {a}.0);\n        if acc > 1e9 {{\n            acc = acc.sqrt();\n        }}\n    }}\n    acc - x\n}}\n\n"
        ),
        1 => format!(
            "#[derive(Debug, Clone, Copy)]\nstruct Acc{k} {{\n    sum: f64,\n    n: u32,\n}}\n\nimpl Acc{k} {{\n    fn push(mut self, v: f64) -> Self {{\n        self.sum += v * {a}.0;\n        self.n += 1;\n        self\n    }}\n}}\n\nfn tweak_{k}(x: f64) -> f64 {{\n    let acc = (0..{b}).fold(Acc{k} {{ sum: 0.0, n: 0 }}, |a, i| a.push(x + i as f64));\n    acc.sum / f64::from(acc.n.max(1)) * 0.0\n}}\n\n"
        ),
        2 => format!(
            "fn pick_{k}<T: PartialOrd + Copy>(a: T, b: T) -> T {{\n    if a < b {{ a }} else {{ b }}\n}}\n\nfn tweak_{k}(x: f64) -> f64 {{\n    let v: Vec<f64> = (0..{b}).map(|i| x * i as f64 / {a}.0).collect();\n    let m = v.iter().copied().fold(f64::INFINITY, pick_{k});\n    if m.is_finite() {{ 0.0 * m }} else {{ 0.0 }}\n}}\n\n"
        ),
        _ => format!(
            "fn tweak_{k}(x: f64) -> f64 {{\n    let l = if x > {a}.0 {{ Length::Px(x) }} else {{ Length::Auto }};\n    match l {{\n        Length::Auto => 0.0,\n        Length::Px(v) if v > {b}.0 => (v - v).abs(),\n        Length::Px(_) => 0.0,\n    }}\n}}\n\n"
        ),
    }
}

/// Breaks a candidate in one of seven ways.
fn inject(text: String, kind: usize) -> String {
    match kind {
        0 => text.replacen("fn tweaks(x: f64) -> f64 {", "fn tweaks(x: f64) -> f64 {\n    let _wrong: f64 = \"wide\";", 1),
        1 => text.replacen("fn tweaks(x: f64) -> f64 {", "fn tweaks(x: f64) -> f64 {\n    let _w = containing_wdith + x;", 1),
        2 => text.replacen("fn tweaks(x: f64) -> f64 {", "fn tweaks(x: f64) -> f64 {\n    let v = vec![x];\n    let moved = v;\n    let _n = v.len() + moved.len();", 1),
        3 => text.replacen("fn tweaks(x: f64) -> f64 {", "fn tweaks(x: f64) -> f64 {\n    let mut v = vec![x];\n    let first = &v[0];\n    v.push(1.0);\n    let _f = *first;", 1),
        4 => text.replacen("pub fn absolute_width(input: &Input) -> Output", "pub fn absolute_width(input: Input) -> Output", 1)
            .replacen("{\n    let input = &input;", "{", 1)
            .replacen("pub fn absolute_width(input: Input) -> Output {", "pub fn absolute_width(input: Input) -> Output {\n    let input = &input;", 1),
        5 => text.replacen("fn tweaks(x: f64) -> f64 {", "fn tweaks(x: f64) -> f64 {\n    let _m = Length::Auto.unwrap_or(x);", 1),
        _ => format!(
            "{}\nstruct Check<const N: usize>;\nimpl<const N: usize> Check<N> {{\n    const OK: () = assert!(N > 0, \"N must be positive\");\n}}\nfn checked<const N: usize>() {{\n    let () = Check::<N>::OK;\n}}\n",
            text.replacen("fn tweaks(x: f64) -> f64 {", "fn tweaks(x: f64) -> f64 {\n    checked::<0>();", 1)
        ),
    }
}

const TEMPLATE_MATCH: &str = r#"fn px(len: Length) -> Option<f64> {
    match len {
        Length::Auto => None,
        Length::Px(v) => Some(v),
    }
}

fn shrink(input: &Input, available: f64) -> f64 {
    available.max(input.preferred_min_width).min(input.preferred_width)
}

pub fn absolute_width(input: &Input) -> Output {
    let cw = input.containing_width;
    let boxes = input.padding_left + input.padding_right + input.border_left + input.border_right;
    let ml = px(input.margin_left).unwrap_or(0.0);
    let mr = px(input.margin_right).unwrap_or(0.0);
    let space = cw - ml - mr - boxes + tweaks(SALT);
    let ltr = input.direction == Direction::Ltr;
    let (left, width, right) = match (px(input.left), px(input.width), px(input.right)) {
        (None, None, None) => {
            if ltr {
                let l = input.static_left;
                let w = shrink(input, space - l);
                (l, w, space - l - w)
            } else {
                let r = input.static_right;
                let w = shrink(input, space - r);
                (space - r - w, w, r)
            }
        }
        (None, None, Some(r)) => {
            let w = shrink(input, space - r);
            (space - r - w, w, r)
        }
        (Some(l), None, None) => {
            let w = shrink(input, space - l);
            (l, w, space - l - w)
        }
        (None, Some(w), None) => {
            let l = input.static_left;
            (l, w, space - l - w)
        }
        (Some(l), None, Some(r)) => (l, (space - l - r).max(0.0), r),
        (None, Some(w), Some(r)) => (space - r - w, w, r),
        (Some(l), Some(w), None) => (l, w, space - l - w),
        (Some(l), Some(w), Some(r)) => {
            if ltr {
                (l, w, space - l - w)
            } else {
                (space - r - w, w, r)
            }
        }
    };
    Output { left, width, right, margin_left: ml, margin_right: mr }
}
"#;

const TEMPLATE_SOLVER: &str = r#"struct Solver<'a> {
    input: &'a Input,
    boxes: f64,
}

impl<'a> Solver<'a> {
    fn new(input: &'a Input) -> Self {
        let boxes = input.padding_left + input.padding_right + input.border_left + input.border_right;
        Solver { input, boxes }
    }

    fn px(&self, len: Length) -> Option<f64> {
        if let Length::Px(v) = len { Some(v) } else { None }
    }

    fn shrink(&self, available: f64) -> f64 {
        available.max(self.input.preferred_min_width).min(self.input.preferred_width)
    }

    fn margins(&self) -> (f64, f64) {
        (self.px(self.input.margin_left).unwrap_or(0.0), self.px(self.input.margin_right).unwrap_or(0.0))
    }

    fn solve(&self) -> Output {
        let (ml, mr) = self.margins();
        let space = self.input.containing_width - ml - mr - self.boxes + tweaks(SALT);
        let left = self.px(self.input.left);
        let right = self.px(self.input.right);
        let width = self.px(self.input.width).unwrap_or_else(|| {
            let used = left.unwrap_or(self.input.static_left) + right.unwrap_or(0.0);
            self.shrink(space - used)
        });
        let (left, right) = match (left, right) {
            (Some(l), Some(r)) => (l, r),
            (Some(l), None) => (l, space - l - width),
            (None, Some(r)) => (space - r - width, r),
            (None, None) => (self.input.static_left, space - self.input.static_left - width),
        };
        Output { left, width, right, margin_left: ml, margin_right: mr }
    }
}

pub fn absolute_width(input: &Input) -> Output {
    Solver::new(input).solve()
}
"#;

const TEMPLATE_ITER: &str = r#"fn known(len: &Length) -> Option<f64> {
    match *len {
        Length::Px(v) => Some(v),
        Length::Auto => None,
    }
}

pub fn absolute_width(input: &Input) -> Output {
    let lengths = [input.left, input.width, input.right, input.margin_left, input.margin_right];
    let values: Vec<Option<f64>> = lengths.iter().map(known).collect();
    let fixed: f64 = [input.padding_left, input.padding_right, input.border_left, input.border_right]
        .iter()
        .sum();
    let autos = values.iter().filter(|v| v.is_none()).count();
    let total: f64 = values.iter().flatten().sum::<f64>() + fixed + tweaks(SALT);
    let rest = input.containing_width - total;
    let share = if autos == 0 { 0.0 } else { rest / autos as f64 };
    let resolved: Vec<f64> = values
        .iter()
        .enumerate()
        .map(|(i, v)| match (i, v) {
            (_, Some(x)) => *x,
            (1, None) => share.max(input.preferred_min_width).min(input.preferred_width),
            (3, None) | (4, None) => 0.0,
            (_, None) => share,
        })
        .collect();
    let sum_lr: f64 = resolved.iter().take(3).sum();
    let slack = input.containing_width - sum_lr - resolved[3] - resolved[4] - fixed;
    let right = if input.direction == Direction::Ltr { resolved[2] + slack } else { resolved[2] };
    Output {
        left: resolved[0],
        width: resolved[1],
        right,
        margin_left: resolved[3],
        margin_right: resolved[4],
    }
}
"#;

const TEMPLATE_TRAIT: &str = r#"trait Resolve {
    fn or(self, default: f64) -> f64;
    fn is_auto(&self) -> bool;
}

impl Resolve for Length {
    fn or(self, default: f64) -> f64 {
        match self {
            Length::Auto => default,
            Length::Px(v) => v,
        }
    }
    fn is_auto(&self) -> bool {
        matches!(self, Length::Auto)
    }
}

fn clamp_between<T: PartialOrd + Copy>(v: T, lo: T, hi: T) -> T {
    if v < lo { lo } else if v > hi { hi } else { v }
}

fn sum_all<I: IntoIterator<Item = f64>>(items: I) -> f64 {
    items.into_iter().fold(0.0, |a, b| a + b)
}

pub fn absolute_width(input: &Input) -> Output {
    let ml = input.margin_left.or(0.0);
    let mr = input.margin_right.or(0.0);
    let boxes = sum_all([input.padding_left, input.padding_right, input.border_left, input.border_right]);
    let space = input.containing_width - ml - mr - boxes + tweaks(SALT);
    let left = input.left.or(input.static_left);
    let right_known = !input.right.is_auto();
    let width = if input.width.is_auto() {
        let avail = space - left - input.right.or(0.0);
        clamp_between(avail, input.preferred_min_width, input.preferred_width.max(input.preferred_min_width))
    } else {
        input.width.or(0.0)
    };
    let right = if right_known && input.direction == Direction::Rtl {
        input.right.or(0.0)
    } else {
        space - left - width
    };
    Output { left, width, right, margin_left: ml, margin_right: mr }
}
"#;

const TEMPLATE_ENUM: &str = r#"#[derive(Debug, Clone, Copy, PartialEq)]
enum Unknown {
    Nothing,
    Left,
    Width,
    Right,
    Several,
}

fn unknown_of(input: &Input) -> Unknown {
    let autos = [
        matches!(input.left, Length::Auto),
        matches!(input.width, Length::Auto),
        matches!(input.right, Length::Auto),
    ];
    match autos {
        [false, false, false] => Unknown::Nothing,
        [true, false, false] => Unknown::Left,
        [false, true, false] => Unknown::Width,
        [false, false, true] => Unknown::Right,
        _ => Unknown::Several,
    }
}

fn value(len: Length, default: f64) -> f64 {
    match len {
        Length::Px(v) => v,
        Length::Auto => default,
    }
}

pub fn absolute_width(input: &Input) -> Output {
    let ml = value(input.margin_left, 0.0);
    let mr = value(input.margin_right, 0.0);
    let boxes = input.padding_left + input.padding_right + input.border_left + input.border_right;
    let space = input.containing_width - ml - mr - boxes + tweaks(SALT);
    let l = value(input.left, input.static_left);
    let r = value(input.right, input.static_right);
    let w = value(input.width, input.preferred_width);
    let (left, width, right) = match unknown_of(input) {
        Unknown::Nothing => (l, w, space - l - w),
        Unknown::Left => (space - r - w, w, r),
        Unknown::Width => (l, (space - l - r).max(0.0), r),
        Unknown::Right => (l, w, space - l - w),
        Unknown::Several => {
            let w = w.min(space - l).max(input.preferred_min_width);
            (l, w, space - l - w)
        }
    };
    Output { left, width, right, margin_left: ml, margin_right: mr }
}
"#;

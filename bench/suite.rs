//! Suite benchmark: a generated MultiPL-E-style Rust suite run by the
//! reference method (one `rustc` per program, one worker per CPU, as every
//! MultiPL-E-derived harness does), by the floor (one `rustc` over every
//! program that compiles, each a module of one crate, then each program's
//! `main` once in its own process, one worker per CPU) and by assay itself
//! (`assay suite run --completions`, the real binary with its sandbox: the
//! programs as modules of shared images (`exec::SharedBuild`), each
//! program's whole `main` in a sandboxed process of its own, its cases
//! alone only when it failed), side by side in one run. All three must give
//! the same MultiPL-E status for every completion.
//!
//! `cargo bench --bench suite -- [--sizes 300,1000] [--seed 1] [--no-assay]`;
//! `ASSAY_BENCH_LOG=assay::build::exec=debug` (a `RUST_LOG` filter) prints assay's
//! log, each shared build's size and wall among it.

#[path = "multiple_ref.rs"]
mod multiple_ref;

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use assay::suite::{completion_program, Problem, Status};
use multiple_ref::{cpus, pool, run_limited, End, COMPILE_TIMEOUT, RUN_TIMEOUT};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let sizes: Vec<usize> = flag("--sizes")
        .map(|s| {
            s.split(',')
                .map(|n| n.trim().parse().expect("--sizes: numbers"))
                .collect()
        })
        .unwrap_or_else(|| vec![300, 1000]);
    let seed: u64 = flag("--seed").map_or(1, |s| s.parse().expect("--seed: a number"));
    let with_assay = !args.iter().any(|a| a == "--no-assay");
    println!("suite bench: {} CPUs, seed {seed}", cpus());
    println!(
        "{:>6} {:>7} {:>7} {:>7} | {:>9} | {:>13} {:>9} {:>9} {:>10} | {:>9} {:>11} {:>9}",
        "N",
        "OK",
        "Syntax",
        "Except",
        "reference",
        "floor compile",
        "run",
        "total",
        "floor/ref",
        "assay",
        "assay/floor",
        "assay/ref"
    );
    let mut all_agree = true;
    for n in sizes {
        let suite = generate(n, seed);
        all_agree &= measure(&suite, with_assay);
    }
    if !all_agree {
        eprintln!("the floor, assay and the reference method disagree on some completion");
        std::process::exit(1);
    }
}

/// Runs one generated suite every way and prints its row.
fn measure(suite: &[Generated], with_assay: bool) -> bool {
    let programs: Vec<String> = suite
        .iter()
        .map(|g| completion_program(&g.problem, &g.completion))
        .collect();
    let scratch = tempfile::tempdir().expect("scratch");

    let started = Instant::now();
    let cpu = children_cpu();
    let reference = multiple_ref::evaluate_all(&programs, scratch.path());
    let reference_wall = started.elapsed();
    let reference_cpu = children_cpu() - cpu;

    let cpu = children_cpu();
    let floor = floor(&programs, &reference, scratch.path());
    let floor_cpu = children_cpu() - cpu;
    let cpu = children_cpu();
    let assay = with_assay.then(|| assay_measurement(suite, scratch.path()));
    let assay_cpu = children_cpu() - cpu;

    let count = |s: Status| reference.iter().filter(|r| **r == s).count();
    let disagree: Vec<usize> = (0..programs.len())
        .filter(|&i| floor.statuses[i] != reference[i])
        .collect();
    let intended: usize = suite
        .iter()
        .zip(&reference)
        .filter(|(g, r)| g.intent.status() == **r)
        .count();
    let total = floor.compile + floor.run;
    let lines: Vec<usize> = programs.iter().map(|p| p.lines().count()).collect();
    let fns: Vec<usize> = programs
        .iter()
        .map(|p| p.matches("fn ").count() - 1)
        .collect();
    println!(
        "       programs: {}..{} lines, {}..{} functions besides main",
        lines.iter().min().unwrap_or(&0),
        lines.iter().max().unwrap_or(&0),
        fns.iter().min().unwrap_or(&0),
        fns.iter().max().unwrap_or(&0)
    );
    let (assay_col, over_floor, over_ref) = match &assay {
        Some(a) => (
            format!("{:.1}s", secs(a.wall)),
            format!("{:.2}", secs(a.wall) / secs(total)),
            format!("{:.2}", secs(a.wall) / secs(reference_wall)),
        ),
        None => ("-".into(), "-".into(), "-".into()),
    };
    println!(
        "{:>6} {:>7} {:>7} {:>7} | {:>8.1}s | {:>12.1}s {:>8.1}s {:>8.1}s {:>10.2} | {:>9} {:>11} {:>9}",
        programs.len(),
        count(Status::Ok),
        count(Status::SyntaxError),
        count(Status::Exception),
        secs(reference_wall),
        secs(floor.compile),
        secs(floor.run),
        secs(total),
        secs(total) / secs(reference_wall),
        assay_col,
        over_floor,
        over_ref,
    );
    // CPU-s of every process each method started (reaped children of this
    // process and theirs): less moved by the machine's other load than
    // wall time, which rewards whichever method runs more processes at once.
    println!(
        "       CPU-s: reference {:.1}, floor {:.1}{}",
        secs(reference_cpu),
        secs(floor_cpu),
        match &assay {
            Some(_) => format!(
                ", assay {:.1} (assay/floor {:.2}, assay/reference {:.2})",
                secs(assay_cpu),
                secs(assay_cpu) / secs(floor_cpu),
                secs(assay_cpu) / secs(reference_cpu)
            ),
            None => String::new(),
        }
    );
    let mut assay_disagree = Vec::new();
    if let Some(a) = &assay {
        assay_disagree = (0..programs.len())
            .filter(|&i| a.multiple_statuses[i] != reference[i])
            .collect();
        println!(
            "       assay: MultiPL-E's reading = reference for {}/{}; phases: {}",
            programs.len() - assay_disagree.len(),
            programs.len(),
            a.phases
        );
        for &i in assay_disagree.iter().take(5) {
            println!(
                "       differs: #{i} reference {} assay {}",
                reference[i], a.multiple_statuses[i]
            );
        }
    }
    println!(
        "       statuses: floor = reference for {}/{}; generator's intent = reference for {}/{}",
        programs.len() - disagree.len(),
        programs.len(),
        intended,
        programs.len()
    );
    for &i in disagree.iter().take(5) {
        println!(
            "       differs: #{i} reference {} floor {}",
            reference[i], floor.statuses[i]
        );
    }
    disagree.is_empty() && assay_disagree.is_empty()
}

/// assay's own run of the suite.
struct Assay {
    wall: Duration,
    /// MultiPL-E's reading of assay's runs, per completion.
    multiple_statuses: Vec<Status>,
    /// The suite's phase figures, as `suite show` prints them.
    phases: String,
}

/// `assay suite run PROBLEMS --completions COMPLETIONS --json`, the real
/// binary with its sandbox, in a fresh database, output folder and work
/// directory; the wall is the whole command's, start-up included.
fn assay_measurement(suite: &[Generated], scratch: &Path) -> Assay {
    let dir = tempfile::tempdir_in(scratch).expect("assay dir");
    let mut problems = String::new();
    let mut completions = String::new();
    for g in suite {
        let p = &g.problem;
        let line = serde_json::json!({
            "name": p.name, "language": "rs", "prompt": p.prompt, "tests": p.tests,
            "stop_tokens": p.stop_tokens,
        });
        writeln!(problems, "{line}").unwrap();
        let line = serde_json::json!({"name": p.name, "completion": g.completion});
        writeln!(completions, "{line}").unwrap();
    }
    let (problems_path, completions_path) = (
        dir.path().join("problems.jsonl"),
        dir.path().join("completions.jsonl"),
    );
    std::fs::write(&problems_path, problems).expect("write problems");
    std::fs::write(&completions_path, completions).expect("write completions");
    let started = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_assay"));
    match std::env::var("ASSAY_BENCH_LOG") {
        // Where assay's time goes: its shared builds and waves, on stderr.
        Ok(filter) if !filter.is_empty() => cmd.env("RUST_LOG", filter),
        _ => cmd.env_remove("RUST_LOG"),
    };
    let out = cmd
        .arg("suite")
        .arg("run")
        .arg(&problems_path)
        .arg("--completions")
        .arg(&completions_path)
        .arg("--json")
        .arg("--db")
        .arg(dir.path().join("assay.db"))
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg("--work-dir")
        .arg(dir.path().join("work"))
        .output()
        .expect("assay starts");
    let wall = started.elapsed();
    if std::env::var_os("ASSAY_BENCH_LOG").is_some() {
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(
        out.status.success(),
        "assay suite run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let multiple_statuses = report["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .flat_map(|p| p["multiple_statuses"].as_array().expect("statuses").clone())
        .map(|s| s.as_str().expect("a status").parse().expect("a status"))
        .collect();
    let phases = report["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|f| {
            format!(
                "{} {:.1}s/{:.1} CPU-s",
                f["phase"].as_str().unwrap_or("?"),
                f["wall_s"].as_f64().unwrap_or(0.0),
                f["cpu_s"].as_f64().unwrap_or(0.0)
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    Assay {
        wall,
        multiple_statuses,
        phases,
    }
}

struct Floor {
    compile: Duration,
    run: Duration,
    statuses: Vec<Status>,
}

/// One crate of every program that compiles (as the reference found), each
/// a module; then each program's `main` in its own process.
fn floor(programs: &[String], reference: &[Status], scratch: &Path) -> Floor {
    let compiles: Vec<usize> = (0..programs.len())
        .filter(|&i| reference[i] != Status::SyntaxError)
        .collect();
    let dir = tempfile::tempdir_in(scratch).expect("floor dir");
    let mut source = String::new();
    let mut arms = String::new();
    for &i in &compiles {
        write!(
            source,
            "mod p{i} {{\n{}\npub(crate) fn __floor_main() {{ main() }}\n}}\n",
            programs[i]
        )
        .unwrap();
        writeln!(arms, "        \"{i}\" => p{i}::__floor_main(),").unwrap();
    }
    write!(
        source,
        "fn main() {{\n    match std::env::args().nth(1).unwrap_or_default().as_str() {{\n{arms}        _ => std::process::exit(64),\n    }}\n}}\n"
    )
    .unwrap();
    std::fs::write(dir.path().join("floor.rs"), source).expect("write floor.rs");
    let started = Instant::now();
    let mut rustc = Command::new("rustc");
    rustc
        .args([
            "--edition",
            "2021",
            "-C",
            "debug-assertions=on",
            "-C",
            "overflow-checks=on",
        ])
        .args(["floor.rs", "-o", "floor"])
        .current_dir(dir.path());
    let built = run_limited(&mut rustc, b"", COMPILE_TIMEOUT * 40).0;
    assert_eq!(built, End::Exited(0), "the floor crate must build");
    let compile = started.elapsed();

    let started = Instant::now();
    let binary = dir.path().join("floor");
    let ran = pool(&compiles, cpus(), |&i| {
        let mut cmd = Command::new(&binary);
        cmd.arg(i.to_string()).current_dir(dir.path());
        match run_limited(&mut cmd, b"", RUN_TIMEOUT).0 {
            End::Exited(0) => Status::Ok,
            End::TimedOut => Status::Timeout,
            _ => Status::Exception,
        }
    });
    let run = started.elapsed();
    let mut statuses = vec![Status::SyntaxError; programs.len()];
    for (&i, status) in compiles.iter().zip(ran) {
        statuses[i] = status;
    }
    Floor {
        compile,
        run,
        statuses,
    }
}

/// User + system CPU time of this process's reaped children (and the
/// children they reaped), from `getrusage(RUSAGE_CHILDREN)`.
fn children_cpu() -> Duration {
    // SAFETY: getrusage fills a plain struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

// ---------------------------------------------------------------------------
// The generator: problems of one to three functions and 10 to 60 lines, in
// MultiPL-E's schema, with one completion each: about a tenth do not
// compile, a fifth fail one assert, the rest pass.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Intent {
    Pass,
    CompileError,
    AssertFails,
}

impl Intent {
    fn status(self) -> Status {
        match self {
            Intent::Pass => Status::Ok,
            Intent::CompileError => Status::SyntaxError,
            Intent::AssertFails => Status::Exception,
        }
    }
}

struct Generated {
    problem: Problem,
    completion: String,
    intent: Intent,
}

fn generate(n: usize, seed: u64) -> Vec<Generated> {
    let mut rng = Rng((seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ n as u64).max(1));
    (0..n).map(|i| one_problem(i, &mut rng)).collect()
}

fn one_problem(i: usize, rng: &mut Rng) -> Generated {
    let intent = match rng.below(10) {
        0 => Intent::CompileError,
        1 | 2 => Intent::AssertFails,
        _ => Intent::Pass,
    };
    let family = Family::pick(rng);
    let name = format!("{}_{i}", family.name());
    let helpers = rng.below(3) as usize; // 0..=2 helpers inside the entry
    let padding = rng.below(12) as usize; // extra statements, for size
    let (body, eval) = family.body(rng, helpers, padding);
    let asserts = 3 + rng.below(6) as usize;
    let inputs: Vec<i64> = (0..asserts).map(|_| rng.below(40) as i64).collect();
    let mut tests = format!("}}\n\nfn main() {{\n    let candidate = {name};\n");
    let wrong = rng.below(asserts as u64) as usize;
    for (k, x) in inputs.iter().enumerate() {
        let mut expect = eval(*x);
        if intent == Intent::AssertFails && k == wrong {
            expect += 1;
        }
        writeln!(tests, "    assert_eq!(candidate({x}), {expect});").unwrap();
    }
    tests.push_str("}\n");
    let mut completion = body;
    if intent == Intent::CompileError {
        let at = completion.find('\n').map_or(0, |p| p + 1);
        let error = [
            "    let unused: u8 = \"text\";\n",
            "    let y = undefined_name + 1;\n",
            "    let v: Vec<i64> = 5;\n",
        ][rng.below(3) as usize];
        completion.insert_str(at, error);
    }
    completion.push_str("}\n\nfn trailing_text_after_the_stop_token() {}\n");
    let prompt = format!(
        "/// {} of x (generated problem {i}).\n///\n/// >>> {name}(3)\nfn {name}(x: i64) -> i64 {{\n",
        family.name()
    );
    Generated {
        problem: Problem {
            name,
            prompt,
            tests,
            stop_tokens: vec!["\n}".to_owned()],
        },
        completion,
        intent,
    }
}

#[derive(Clone, Copy)]
enum Family {
    Iterate,
    Digits,
    Vector,
    Text,
}

type Eval = Box<dyn Fn(i64) -> i64>;

impl Family {
    fn pick(rng: &mut Rng) -> Family {
        [
            Family::Iterate,
            Family::Digits,
            Family::Vector,
            Family::Text,
        ][rng.below(4) as usize]
    }

    fn name(self) -> &'static str {
        match self {
            Family::Iterate => "iterate",
            Family::Digits => "digit_mix",
            Family::Vector => "top_three",
            Family::Text => "vowel_code",
        }
    }

    /// The entry's body (indented, no closing brace) and the same function
    /// evaluated here, for the asserts' expected values.
    fn body(self, rng: &mut Rng, helpers: usize, padding: usize) -> (String, Eval) {
        let a = 2 + rng.below(90) as i64;
        let b = rng.below(100) as i64;
        let m = 50 + rng.below(900) as i64;
        let mut s = String::new();
        // Helpers are nested functions: they survive the cut at "\n}".
        let mut chain = String::from("v");
        for h in 0..helpers {
            writeln!(s, "    fn helper_{h}(v: i64) -> i64 {{\n        let w = v % {m};\n        if w < 0 {{\n            w + {m}\n        }} else {{\n            w\n        }}\n    }}").unwrap();
            chain = format!("helper_{h}({chain})");
        }
        writeln!(s, "    let norm = |v: i64| -> i64 {{ {chain} }};").unwrap();
        for p in 0..padding {
            writeln!(
                s,
                "    let pad_{p} = x.wrapping_mul({}) % 7; // keeps the problem realistic in size",
                p + 1
            )
            .unwrap();
            writeln!(s, "    let _ = pad_{p};").unwrap();
        }
        s.push_str(&match self {
            Family::Iterate => format!(
                "    let mut acc: i64 = {b};\n    for i in 0..x {{\n        acc = (acc * {a} + i) % {m};\n    }}\n    norm(acc)\n"
            ),
            Family::Digits => format!(
                "    let mut n = x * {a} + {b};\n    let mut total = 0;\n    while n > 0 {{\n        total += n % 10;\n        n /= 10;\n    }}\n    norm(total * 3)\n"
            ),
            Family::Vector => format!(
                "    let mut v: Vec<i64> = (0..x + 3).map(|i| (i * {a} + {b}) % {m}).collect();\n    v.sort_unstable_by(|p, q| q.cmp(p));\n    norm(v.iter().take(3).sum())\n"
            ),
            Family::Text => format!(
                "    let text: String = (0..x).map(|i| (b'a' + ((i * {a} + {b}) % 26) as u8) as char).collect();\n    let vowels = text.chars().filter(|c| \"aeiou\".contains(*c)).count() as i64;\n    norm(vowels * 7 + text.len() as i64)\n"
            ),
        });
        // Every helper takes the value modulo m (idempotent); no helper,
        // no change. The raw values are never negative.
        let eval: Eval = Box::new(move |x| {
            let raw = unnormalized(self, a, b, m, x);
            if helpers > 0 {
                raw.rem_euclid(m)
            } else {
                raw
            }
        });
        (s, eval)
    }
}

/// The families' values before `norm` (used when there is no helper).
fn unnormalized(family: Family, a: i64, b: i64, m: i64, x: i64) -> i64 {
    match family {
        Family::Iterate => (0..x).fold(b, |acc, i| (acc * a + i) % m),
        Family::Digits => {
            let (mut n, mut t) = (x * a + b, 0);
            while n > 0 {
                t += n % 10;
                n /= 10;
            }
            t * 3
        }
        Family::Vector => {
            let mut v: Vec<i64> = (0..x + 3).map(|i| (i * a + b) % m).collect();
            v.sort_unstable_by(|p, q| q.cmp(p));
            v.iter().take(3).sum()
        }
        Family::Text => {
            let vowels = (0..x)
                .map(|i| (b'a' + ((i * a + b) % 26) as u8) as char)
                .filter(|c| "aeiou".contains(*c))
                .count() as i64;
            vowels * 7 + x
        }
    }
}

/// xorshift64*: deterministic input for the generator.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) % n
    }
}

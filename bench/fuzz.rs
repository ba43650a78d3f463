//! Fuzz: seeded mutations of a task's spec, cases, replay corpus, a pools
//! file and the command line, each run through the real binary against
//! one database in a warm work directory (issue 17).
//!
//! Asserts for every run: exit 0 or 2 (never 1, a signal or a crash); on
//! exit 2, the first line of stderr is an `error:` line naming the mutated
//! file or flag, and it is the only line unless clap printed it (clap adds
//! a hint); and nothing stored changed: the database's dump is the same
//! after a refusal, and after a batch that ran it still holds every line it
//! held before. A bench, not a test: valid mutations run whole batches, so
//! a few hundred runs take longer than a test should on 2 cores.
//!
//! `cargo bench --bench fuzz -- [RUNS] [SEED]` (default 300 runs, seed 17).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// xorshift64*: seeded, reproducible, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const HOSTILE: &[&str] = &[
    "-1",
    "0",
    "1",
    "17592186044416",
    "9223372036854775807",
    "1e300",
    "-0.5",
    "nan",
    "inf",
    "\"\"",
    "\"x\"",
    "[]",
    "{}",
    "true",
    "\"../../etc/passwd\"",
    "\"/dev/zero\"",
];

/// One mutation: what it changed (a file name or a flag), applied to the
/// task folder, and extra arguments.
struct Mutation {
    names: String,
    args: Vec<String>,
}

fn mutate_text(rng: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    let k = rng.below(lines.len());
    match rng.below(6) {
        0 => {
            // A key's value replaced.
            if let Some((key, _)) = lines[k].split_once('=') {
                lines[k] = format!("{key}= {}", rng.pick(HOSTILE));
            } else {
                lines[k] = format!("{} = {}", lines[k], rng.pick(HOSTILE));
            }
        }
        1 => {
            lines.remove(k);
        }
        2 => {
            let l = lines[k].clone();
            lines.insert(k, l);
        }
        3 => {
            let cut = rng.below(text.len().max(1));
            return text.get(..cut).unwrap_or("").to_owned();
        }
        4 => lines.insert(k, format!("bogus_{} = {}", rng.below(9), rng.pick(HOSTILE))),
        _ => {
            // A number anywhere in the line replaced.
            let l = &lines[k];
            if let Some(start) = l.find(|c: char| c.is_ascii_digit()) {
                let end = l[start..]
                    .find(|c: char| !c.is_ascii_digit())
                    .map_or(l.len(), |e| start + e);
                lines[k] = format!("{}{}{}", &l[..start], rng.pick(HOSTILE), &l[end..]);
            }
        }
    }
    lines.join("\n") + "\n"
}

fn mutate(rng: &mut Rng, task: &Path, scratch: &Path) -> Mutation {
    let file = |name: &str| task.join(name);
    match rng.below(5) {
        kind @ 0..=2 => {
            let name = ["spec.toml", "cases.jsonl", "replies.jsonl"][kind];
            let text = std::fs::read_to_string(file(name)).unwrap();
            std::fs::write(file(name), mutate_text(rng, &text)).unwrap();
            Mutation {
                names: name.into(),
                args: Vec::new(),
            }
        }
        3 => {
            let base = "[pools.a]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n\
                        max_in_flight = 2\ntimeout_s = 5\nmax_retry_wait_s = 1\n\
                        api_key_env = \"ASSAY_FUZZ_KEY\"\n\n[pools.a.sampling]\ntemperature = 0.7\n";
            let path = scratch.join("pools.toml");
            std::fs::write(&path, mutate_text(rng, base)).unwrap();
            Mutation {
                names: "pools.toml".into(),
                args: vec![
                    "--pools".into(),
                    path.display().to_string(),
                    "--pool".into(),
                    "a".into(),
                ],
            }
        }
        _ => {
            let flags: &[(&str, &[&str])] = &[
                ("-n", &["-1", "0", "99999999999", "x", "1"]),
                ("--wave-size", &["-1", "0", "1e9", "2"]),
                ("--wave-wait", &["-1", "nan", "0", "0.5"]),
                ("--build-timeout", &["-1", "0", "inf", "1e20"]),
                ("--max-in-flight", &["-1", "0", "99999999999"]),
                ("--max-completion-tokens", &["-1", "0"]),
                ("--out", &["/dev/null", "/proc/fuzz", "/sys/fuzz"]),
                ("--work-dir", &["/dev/null", "/proc/fuzz", "/sys/fuzz"]),
                ("--db", &["/dev/full", "/sys/x.db", "/dev/null"]),
                ("--pool", &["replay=0", "a=x", "=", "replay=-1"]),
                ("--split", &["sideways", ""]),
                ("--probe", &["slow", ""]),
                ("--pools", &["/dev/zero", "/nonexistent"]),
            ];
            let (flag, values) = rng.pick(flags);
            let mut args = vec![flag.to_string(), rng.pick(values).to_string()];
            if *flag == "--pools" {
                args.extend(["--pool".into(), "a".into()]);
            }
            Mutation {
                names: flag.to_string(),
                args,
            }
        }
    }
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}

fn dump(db: &Path) -> Vec<String> {
    let out = Command::new("sqlite3")
        .arg(db)
        .arg(".dump")
        .output()
        .expect("sqlite3 runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let runs: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(300);
    let seed: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(17);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("assay-work");
    let scratch = tempfile::tempdir().unwrap();
    let db = scratch.path().join("fuzz.db");
    let assay = |task: &Path, extra: &[String]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_assay"));
        cmd.arg("run")
            .arg(task)
            .args(["-n", "2"])
            .args(extra)
            .current_dir(scratch.path())
            .env("ASSAY_DB", &db)
            .env("ASSAY_WORK_DIR", &work)
            .env("ASSAY_FUZZ_KEY", "k")
            .env_remove("RUST_LOG")
            .env_remove("ASSAY_OUT");
        cmd.output().unwrap()
    };
    let tiny = repo.join("tests/fixtures/tiny");
    // The baseline batch, so that "nothing stored changed" means something.
    let first = assay(&tiny, &[]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let mut rng = Rng(seed | 1);
    let (mut ok, mut refused) = (0, 0);
    let start = Instant::now();
    for run in 0..runs {
        let task: PathBuf = scratch.path().join(format!("task-{run}"));
        copy_dir(&tiny, &task);
        // The harness stays shared (absolute), so its build stays warm.
        let spec = task.join("spec.toml");
        let text = std::fs::read_to_string(&spec).unwrap().replace(
            "harness = \"harness\"",
            &format!("harness = \"{}\"", tiny.join("harness").display()),
        );
        std::fs::write(&spec, text).unwrap();
        std::fs::remove_dir_all(task.join("harness")).unwrap();
        let m = mutate(&mut rng, &task, scratch.path());
        let before = dump(&db);
        let out = assay(&task, &m.args);
        let err = String::from_utf8_lossy(&out.stderr);
        let after = dump(&db);
        let what = format!("run {run} (seed {seed}), {} {:?}", m.names, m.args);
        match out.status.code() {
            Some(0) => {
                ok += 1;
                for line in &before {
                    assert!(
                        after.contains(line),
                        "{what}: a stored line changed: {line}"
                    );
                }
            }
            Some(2) => {
                refused += 1;
                assert_eq!(before, after, "{what}: a refused run changed the database");
                let first = err.lines().next().unwrap_or("");
                assert!(first.starts_with("error:"), "{what}: {err}");
                let clap = err.contains("For more information, try '--help'");
                assert!(
                    clap || err.trim_end().lines().count() == 1,
                    "{what}: not one line: {err}"
                );
                // A spec whose value names another file is refused naming
                // that file (in the task folder, or the hostile path).
                // A flag's value that is a path may be named instead of
                // the flag: it is the file at fault.
                let names_it = first.contains(&m.names)
                    || m.args
                        .iter()
                        .skip(1)
                        .step_by(2)
                        .any(|v| v.starts_with('/') && first.contains(v.as_str()))
                    || first.contains(&task.display().to_string())
                    || ["/dev/", "/etc/", "/proc/", "/sys/", "pools"]
                        .iter()
                        .any(|p| first.contains(p))
                    || clap;
                assert!(
                    names_it,
                    "{what}: the error does not name {}: {err}",
                    m.names
                );
            }
            code => panic!("{what}: exit {code:?}: {err}"),
        }
        std::fs::remove_dir_all(&task).unwrap();
    }
    println!(
        "fuzz: {runs} runs (seed {seed}) in {:.0} s: {ok} ran (exit 0), {refused} refused (exit 2), none else",
        start.elapsed().as_secs_f64()
    );
}

//! Fingerprints per second per core, on realistic functions, over two
//! corpora printed side by side in one run:
//!
//! - **replay**: every source the extractor takes from the bundled replay
//!   corpora (model-written candidates of the absolute and shellwords
//!   tasks), about 1,100 bytes per function;
//! - **crates**: files of the shape, about 2 KB holding seven
//!   functions each, cut from real code: the sources of crates that our
//!   Cargo.lock pins, read from the cargo registry
//!   (`$CARGO_HOME/registry/src/*/NAME-VERSION/src`, so the corpus is the
//!   same on every machine that built this project). At start-up, untimed,
//!   each `.rs` file (in path order) is parsed with `syn`, its free
//!   functions and methods are cut out by span (doc comments and attributes
//!   included; methods dedented and kept as free functions, which `syn`
//!   parses) and seven consecutive ones are packed into a file when they
//!   come to 1.5 to 2.6 KB. Skipped with a message if the registry holds
//!   none of the crates.
//!
//! Each row fingerprints its corpus over and over on one thread: lexing
//! alone, a full `syn` parse alone (what the old pipeline did per
//! candidate), the exact fingerprint (fast lexer) and, for comparison, the
//! same fingerprint through a `proc_macro2` token stream (the fast lexer's
//! fallback and reference), the alpha-renamed one and both as a batch
//! computes them; as functions/s per CPU-second, MB/s and ratios.
//!
//! `cargo bench --bench fingerprint`

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assay::text::dedup;
use assay::text::extract::{extract, Extraction};
use syn::spanned::Spanned;

/// How long each measurement runs.
const MEASURE: Duration = Duration::from_secs(3);

/// The crates the second corpus is cut from, in this order.
const CRATES: &[&str] = &[
    "serde_json",
    "regex-syntax",
    "toml_edit",
    "clap_builder",
    "url",
    "csv",
    "semver",
    "tokio",
];
/// At most this many files from one crate, so no crate dominates.
const FILES_PER_CRATE: usize = 25;
const FUNCTIONS_PER_FILE: usize = 7;
const FILE_BYTES: std::ops::RangeInclusive<usize> = 1500..=2600;

fn replay_corpus() -> Vec<String> {
    let mut sources = Vec::new();
    for (task, entry) in [("absolute", "absolute_width"), ("shellwords", "split")] {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("specs/{task}/replies.jsonl"));
        let Ok(text) = std::fs::read_to_string(&path) else {
            eprintln!("(no {}: skipped)", path.display());
            continue;
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).expect("corpus line is JSON");
            let content = v["content"].as_str();
            if let Extraction::Source(s) = extract(content, v["finish_reason"].as_str(), entry) {
                sources.push(s);
            }
        }
    }
    sources
}

/// Functions (items with a body: fns, methods, closures are not counted).
fn count_functions(source: &str) -> usize {
    struct Count(usize);
    impl<'a> syn::visit::Visit<'a> for Count {
        fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
            self.0 += 1;
            syn::visit::visit_item_fn(self, f);
        }
        fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
            self.0 += 1;
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
    let file = syn::parse_file(source).expect("extracted sources parse");
    let mut c = Count(0);
    syn::visit::Visit::visit_file(&mut c, &file);
    c.0
}

/// CPU time of the calling thread: on a shared machine wall time measures
/// the neighbours too, CPU time measures the work (per core).
fn thread_cpu() -> Duration {
    // SAFETY: getrusage fills a plain struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Runs `f` over the corpus until `MEASURE` of CPU time has passed;
/// functions per CPU-second.
fn measure(sources: &[String], functions: usize, f: impl Fn(&str)) -> f64 {
    // Warm up once.
    for s in sources {
        f(s);
    }
    let start = thread_cpu();
    let wall = Instant::now();
    let mut rounds = 0usize;
    while thread_cpu() - start < MEASURE && wall.elapsed() < MEASURE * 10 {
        for s in sources {
            f(s);
        }
        rounds += 1;
    }
    (rounds * functions) as f64 / (thread_cpu() - start).as_secs_f64()
}

/// The `src` folders of the crates in [`CRATES`] at the versions Cargo.lock
/// pins, where the cargo registry holds them.
fn crate_sources() -> Vec<(String, PathBuf)> {
    let lock_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock");
    let Ok(lock) = std::fs::read_to_string(&lock_path) else {
        return Vec::new();
    };
    let lock: toml::Value = toml::from_str(&lock).expect("Cargo.lock is TOML");
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .unwrap_or_default();
    let Ok(registries) = std::fs::read_dir(cargo_home.join("registry/src")) else {
        return Vec::new();
    };
    let mut registries: Vec<PathBuf> = registries.flatten().map(|e| e.path()).collect();
    registries.sort();
    let packages = lock["package"].as_array().cloned().unwrap_or_default();
    let mut found = Vec::new();
    for name in CRATES {
        let Some(version) = packages
            .iter()
            .find(|p| p["name"].as_str() == Some(name))
            .and_then(|p| p["version"].as_str())
        else {
            continue;
        };
        let dir_name = format!("{name}-{version}");
        if let Some(src) = registries
            .iter()
            .map(|r| r.join(&dir_name).join("src"))
            .find(|p| p.is_dir())
        {
            found.push((dir_name, src));
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of every free function and method of a file, in source order,
/// each dedented to column 0.
fn functions_of(text: &str) -> Vec<String> {
    fn cut(text: &str, span: proc_macro2::Span, out: &mut Vec<String>) {
        let range = span.byte_range();
        let Some(body) = text.get(range) else {
            return;
        };
        let indent = span.start().column;
        let mut f = String::with_capacity(body.len());
        for (i, line) in body.lines().enumerate() {
            if i > 0 {
                f.push('\n');
                let spaces = line.len() - line.trim_start_matches(' ').len();
                f.push_str(&line[spaces.min(indent)..]);
            } else {
                f.push_str(line);
            }
        }
        out.push(f);
    }
    fn items(text: &str, list: &[syn::Item], out: &mut Vec<String>) {
        for item in list {
            match item {
                syn::Item::Fn(f) => cut(text, f.span(), out),
                syn::Item::Impl(imp) => {
                    for it in &imp.items {
                        if let syn::ImplItem::Fn(f) = it {
                            cut(text, f.span(), out);
                        }
                    }
                }
                syn::Item::Mod(m) => {
                    if let Some((_, inner)) = &m.content {
                        items(text, inner, out);
                    }
                }
                _ => {}
            }
        }
    }
    let Ok(file) = syn::parse_file(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    items(text, &file.items, &mut out);
    out
}

/// Files of seven consecutive functions, 1.5 to 2.6 KB each, from the
/// crates of [`CRATES`]; and the crates used.
fn crate_corpus() -> (Vec<String>, Vec<String>) {
    let mut files = Vec::new();
    let mut used = Vec::new();
    for (crate_name, src) in crate_sources() {
        let mut paths = Vec::new();
        rust_files(&src, &mut paths);
        let mut taken = 0;
        'crate_files: for path in paths {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let fns = functions_of(&text);
            let mut i = 0;
            while i + FUNCTIONS_PER_FILE <= fns.len() {
                let window = &fns[i..i + FUNCTIONS_PER_FILE];
                let packed = window.join("\n\n") + "\n";
                if FILE_BYTES.contains(&packed.len()) && syn::parse_file(&packed).is_ok() {
                    files.push(packed);
                    taken += 1;
                    if taken == FILES_PER_CRATE {
                        break 'crate_files;
                    }
                    i += FUNCTIONS_PER_FILE;
                } else {
                    i += 1;
                }
            }
        }
        if taken > 0 {
            used.push(format!("{crate_name} ({taken})"));
        }
    }
    (files, used)
}

fn main() {
    let corpora = [
        (
            "replay",
            replay_corpus(),
            "replay corpora of specs/absolute, specs/shellwords".to_string(),
        ),
        {
            let (files, used) = crate_corpus();
            if files.is_empty() {
                eprintln!(
                    "(crates corpus skipped: none of {CRATES:?} at Cargo.lock's versions in the cargo registry)"
                );
            }
            ("crates", files, used.join(", "))
        },
    ];
    let corpora: Vec<Corpus> = corpora
        .into_iter()
        .filter(|(_, sources, _)| !sources.is_empty())
        .map(|(name, sources, what)| Corpus::new(name, sources, what))
        .collect();
    assert!(!corpora.is_empty(), "no corpus to measure");
    for c in &corpora {
        let fallbacks = c
            .sources
            .iter()
            .filter(|s| dedup::fingerprint_fast_only(s).is_none())
            .count();
        println!(
            "{}: {} files, {} functions, {:.1} KB ({:.0} bytes/function, {:.0} bytes/file); \
             fast lexer fell back on {} files; {}",
            c.name,
            c.sources.len(),
            c.functions,
            c.bytes as f64 / 1024.0,
            c.bytes as f64 / c.functions as f64,
            c.bytes as f64 / c.sources.len() as f64,
            fallbacks,
            c.what
        );
    }
    type Row = (&'static str, fn(&str), Option<f64>);
    let rows: [Row; 7] = [
        (
            "lex (proc_macro2)",
            |s| {
                black_box(s.parse::<proc_macro2::TokenStream>().ok());
            },
            None,
        ),
        (
            "syn::parse_file",
            |s| {
                black_box(syn::parse_file(s).ok());
            },
            None,
        ),
        (
            "exact fingerprint",
            |s| {
                black_box(dedup::fingerprint(s));
            },
            Some(50_000.0),
        ),
        (
            "exact via token stream",
            |s| {
                black_box(dedup::fingerprint_by_token_stream(s));
            },
            None,
        ),
        (
            "exact, fast lexer only",
            |s| {
                black_box(dedup::fingerprint_fast_only(s));
            },
            None,
        ),
        (
            "alpha fingerprint",
            |s| {
                black_box(dedup::alpha_fingerprint(s));
            },
            Some(10_000.0),
        ),
        (
            "both (what a batch runs)",
            |s| {
                black_box(dedup::fingerprints(s));
            },
            None,
        ),
    ];
    // Measure every row on every corpus first, then print.
    let measured: Vec<Vec<f64>> = rows
        .iter()
        .map(|(_, f, _)| {
            corpora
                .iter()
                .map(|c| measure(&c.sources, c.functions, f))
                .collect()
        })
        .collect();
    let parse_row = 1;
    println!();
    println!("one thread, per CPU-second: functions/s/core, MB/s, ratio to a full syn parse, goal");
    print!("{:<26}", "");
    for c in &corpora {
        print!(
            "| {:<51}",
            format!(
                "{} ({:.0} B/function)",
                c.name,
                c.bytes as f64 / c.functions as f64
            )
        );
    }
    println!();
    for (r, (name, _, goal)) in rows.iter().enumerate() {
        print!("{name:<26}");
        for (k, c) in corpora.iter().enumerate() {
            let fps = measured[r][k];
            let mb = fps * c.bytes as f64 / c.functions as f64 / 1e6;
            let verdict = match goal {
                Some(g) if fps >= *g => format!(">= {g:.0}: met ({:.2}x)", fps / g),
                Some(g) => format!(">= {g:.0}: NOT met ({:.2}x)", fps / g),
                None => String::new(),
            };
            print!(
                "| {fps:>9.0} {mb:>6.1} {:>6.2}x {verdict:<26}",
                fps / measured[parse_row][k]
            );
        }
        println!();
    }
    let exact = 2;
    let before = 3;
    for (k, c) in corpora.iter().enumerate() {
        println!(
            "{}: exact fingerprint / via token stream = {:.2}x",
            c.name,
            measured[exact][k] / measured[before][k]
        );
    }
}

struct Corpus {
    name: &'static str,
    sources: Vec<String>,
    what: String,
    functions: usize,
    bytes: usize,
}

impl Corpus {
    fn new(name: &'static str, sources: Vec<String>, what: String) -> Corpus {
        let functions = sources.iter().map(|s| count_functions(s)).sum();
        let bytes = sources.iter().map(String::len).sum();
        Corpus {
            name,
            sources,
            what,
            functions,
            bytes,
        }
    }
}

//! Fingerprints per second per core, on realistic functions: every source
//! the extractor takes from the bundled replay corpora (model-written
//! candidates of the absolute and shellwords tasks), fingerprinted over and
//! over on one thread. Printed side by side in one run: lexing alone, a full
//! `syn` parse alone (what the old pipeline did per candidate), the exact
//! fingerprint and the alpha-renamed one, as functions/s and as ratios.
//!
//! `cargo bench --bench fingerprint`

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use assay::dedup;
use assay::extract::{extract, Extraction};

/// How long each measurement runs.
const MEASURE: Duration = Duration::from_secs(3);

fn corpus() -> Vec<String> {
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

fn main() {
    let sources = corpus();
    assert!(!sources.is_empty(), "no corpus to measure");
    let functions: usize = sources.iter().map(|s| count_functions(s)).sum();
    let bytes: usize = sources.iter().map(String::len).sum();
    println!(
        "corpus: {} candidate sources, {} functions, {:.1} KB ({:.0} bytes/function)",
        sources.len(),
        functions,
        bytes as f64 / 1024.0,
        bytes as f64 / functions as f64
    );
    let lex = measure(&sources, functions, |s| {
        black_box(s.parse::<proc_macro2::TokenStream>().ok());
    });
    let parse = measure(&sources, functions, |s| {
        black_box(syn::parse_file(s).ok());
    });
    let exact = measure(&sources, functions, |s| {
        black_box(dedup::fingerprint(s));
    });
    let alpha = measure(&sources, functions, |s| {
        black_box(dedup::alpha_fingerprint(s));
    });
    let both = measure(&sources, functions, |s| {
        black_box(dedup::fingerprints(s));
    });
    let mb = |fps: f64| fps * bytes as f64 / functions as f64 / 1e6;
    println!("one thread, per CPU-second; functions/s/core, MB/s, ratio to a full syn parse, goal");
    let row = |name: &str, fps: f64, goal: Option<f64>| {
        println!(
            "{name:<26}{fps:>12.0}{:>8.1}{:>8.2}x  {}",
            mb(fps),
            fps / parse,
            match goal {
                Some(g) if fps >= g => format!(">= {g:.0}: met ({:.1}x)", fps / g),
                Some(g) => format!(">= {g:.0}: NOT met ({:.2}x)", fps / g),
                None => String::new(),
            }
        );
    };
    row("lex (proc_macro2)", lex, None);
    row("syn::parse_file", parse, None);
    row("exact fingerprint", exact, Some(50_000.0));
    row("alpha fingerprint", alpha, Some(10_000.0));
    row("both (what a batch runs)", both, None);
}

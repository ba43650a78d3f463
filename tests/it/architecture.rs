//! The invariants docs/architecture.md states about the code's shape,
//! checked on the sources: who may start a process, who may retry, who
//! may start a tokio runtime, which top-level module may import which (no
//! arrow runs back up a tier, and no import circle but those listed in
//! `KNOWN_CIRCLES`, which is empty), what the binary may touch, and how
//! long a file may grow.
//!
//! Each check reads the sources with comments and string literals blanked
//! (a doc comment that names `Command::new`, or generated code in a
//! string, is no use of it) and without their tests (everything from a
//! file's first top-level `#[cfg(test)]` on, and `tests.rs` modules). The
//! `planted_*` tests give each check a source that breaks its rule, so
//! each is shown to fail when the rule is broken.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Where a process may be started (`std::process::Command`,
/// `tokio::process::Command`, a raw `fork`): a path under `src/` that is
/// the module's folder or file. Everything else asks one of these.
const MAY_SPAWN: &[(&str, &str)] = &[
    (
        "src/build/package",
        "cargo, in a scrubbed environment (`scrubbed_command`)",
    ),
    (
        "src/sandbox",
        "the rustc wrapper's child, and forks that place executables and enter namespaces",
    ),
    (
        "src/score",
        "a candidate's or a program's run, and the judge",
    ),
    ("src/task/cases.rs", "the cases' checker, under the sandbox"),
    ("src/queue/lane.rs", "a lane's runs of `assay` itself"),
];

/// Where `backon` may be named: the one wait policy.
const MAY_USE_BACKON: &[&str] = &["src/support/backoff.rs"];

/// Who may wait and retry through that policy.
const MAY_USE_BACKOFF: &[&str] = &["src/draw/http/retry.rs", "src/queue/lane.rs"];

/// Who builds again after a build failure that can be transient, at most
/// `probe::MAX_RETRIES` times and without waiting.
const MAY_RETRY_BUILDS: &[&str] = &[
    // A group counts its retries.
    "src/build/exec/groups.rs",
    "src/build/exec/isolated.rs",
    "src/build/exec/shared.rs",
    "src/build/probe/mod.rs",
    // Where the bound is defined.
    "src/build/verdict/mod.rs",
];

/// How a shared build is started: the one wave builder, and the probe over
/// it. Outside `src/build`, only the engine may name them, for both kinds.
const STARTS_SHARED_BUILD: &[&str] = &["wave::build(", "probe::probe("];

/// The engine's files that start shared builds: a task's batch (its
/// stream and its rounds), a replay, and a suite's stream.
const MAY_START_SHARED_BUILD: &[&str] = &[
    "src/engine/batch/probe.rs",
    "src/engine/batch/rounds.rs",
    "src/engine/replay.rs",
    "src/engine/suite/stream.rs",
];

/// Where a tokio runtime may be built.
const MAY_START_RUNTIME: &[(&str, &str)] = &[
    ("bin/assay/main.rs", "the command's one runtime"),
    (
        "src/engine/sweep.rs",
        "one current-thread runtime per concurrent batch, each on its own thread",
    ),
];

/// The top-level modules by tier, bottom first. A module may import its
/// own tier and those below; an import of a higher tier is an arrow back
/// up. A module missing here fails the check: a new module gets a tier.
const TIERS: &[(&str, &[&str])] = &[
    ("support: leaves, import nothing of the crate", &["support"]),
    ("configuration: plain settings and their bounds", &["spec"]),
    ("text: pure functions of text and settings", &["text"]),
    (
        "mechanisms: confining, drawing, a suite's programs (no SQL)",
        &["sandbox", "draw", "suite"],
    ),
    ("building candidates and programs", &["build"]),
    ("running and judging them", &["score", "task"]),
    ("the store: the only SQL", &["store"]),
    (
        "planners and readers over stored rows",
        &["repair", "report"],
    ),
    ("the loop and its entry points", &["engine"]),
    ("work shared by lanes", &["queue"]),
];

/// Import circles between top-level modules, each sorted: none.
const KNOWN_CIRCLES: &[&[&str]] = &[];

/// Lines of code (blank lines, comments and tests not counted) a file may
/// hold before it becomes a folder of one file per mechanism.
const MAX_CODE_LINES: usize = 600;

/// Files (or folders) allowed past [`MAX_CODE_LINES`], each with why.
const LONG_FILES: &[(&str, &str)] = &[
    // Pure algorithms, one lexer each: long, and clearer whole.
    ("src/text/dedup/alpha/tokens.rs", "a lexer"),
    ("src/text/dedup/lex.rs", "a lexer"),
];

/// Lines of code one file of the binary may hold: it parses, calls and
/// prints. `args.rs` is declarations only.
const MAX_BIN_LINES: usize = 200;
const MAX_BIN_ARGS_LINES: usize = MAX_CODE_LINES;

/// What the binary never touches itself: SQL, processes, threads, files,
/// waits. A command that needs one asks the library.
const NOT_IN_BIN: &[&str] = &[
    "sqlx",
    "process::Command",
    "std::fs",
    "std::thread",
    "tokio::spawn",
    "tokio::time",
    "backon",
];

#[test]
fn only_the_listed_modules_start_processes() {
    let sources = Sources::read();
    let found = spawning(&sources);
    let allowed: Vec<&str> = MAY_SPAWN.iter().map(|(p, _)| *p).collect();
    let stray: Vec<_> = found
        .iter()
        .filter(|(path, _)| !under_any(path, &allowed))
        .collect();
    assert!(
        stray.is_empty(),
        "processes started outside {allowed:?}: {stray:?}"
    );
    // Each allowance is used: a stale one would hide nothing but mislead.
    for prefix in &allowed {
        assert!(
            found.iter().any(|(path, _)| under_any(path, &[*prefix])),
            "{prefix} is allowed to start processes but does not"
        );
    }
}

#[test]
fn only_the_backoff_policy_names_backon_and_only_draw_and_lane_retry_by_it() {
    let sources = Sources::read();
    let backon = users(&sources, &["backon::", "use backon"]);
    assert_eq!(backon, set(MAY_USE_BACKON), "who names backon");
    let backoff = users(&sources, &["crate::support::backoff", "backoff::Policy"]);
    let backoff: BTreeSet<String> = backoff
        .into_iter()
        .filter(|p| p != "src/support/backoff.rs")
        .collect();
    assert_eq!(backoff, set(MAY_USE_BACKOFF), "who retries through backoff");
}

#[test]
fn only_the_probe_and_the_executor_build_again() {
    let sources = Sources::read();
    assert_eq!(
        users(&sources, &["MAX_RETRIES"]),
        set(MAY_RETRY_BUILDS),
        "who retries a build"
    );
}

#[test]
fn only_the_engine_starts_a_shared_build_for_both_kinds() {
    let found = shared_build_callers(&Sources::read());
    assert_eq!(
        found,
        set(MAY_START_SHARED_BUILD),
        "who starts a shared build"
    );
    assert!(
        found.iter().all(|p| p.starts_with("src/engine/")),
        "{found:?}"
    );
}

/// The files outside `src/build` that start a shared build.
fn shared_build_callers(sources: &Sources) -> BTreeSet<String> {
    users(sources, STARTS_SHARED_BUILD)
        .into_iter()
        .filter(|p| !p.starts_with("src/build/"))
        .collect()
}

#[test]
fn runtimes_are_started_only_where_listed() {
    let sources = Sources::read();
    let found = users(
        &sources,
        &["Runtime::new", "runtime::Builder", "tokio::main"],
    );
    let allowed: BTreeSet<String> = MAY_START_RUNTIME
        .iter()
        .map(|(p, _)| p.to_string())
        .collect();
    assert_eq!(found, allowed, "who starts a tokio runtime");
}

#[test]
fn no_import_runs_back_up_a_tier() {
    let sources = Sources::read();
    let graph = imports(&sources);
    let problems = layering_problems(&graph, TIERS);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_only_import_circles_are_the_known_ones() {
    let sources = Sources::read();
    let circles = circles(&imports(&sources));
    let known: BTreeSet<Vec<String>> = KNOWN_CIRCLES
        .iter()
        .map(|c| c.iter().map(|m| m.to_string()).collect())
        .collect();
    assert_eq!(circles, known, "import circles between top-level modules");
}

#[test]
fn no_import_circle_inside_a_folder() {
    let circles = folder_circles(&Sources::read());
    assert!(
        circles.is_empty(),
        "import circles inside a folder (folder, then its entries): {circles:?}"
    );
}

/// The code map names a guarding test for each invariant; a test renamed
/// or moved must take its citation along, or the map stops being true.
#[test]
fn every_test_the_code_map_cites_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let cited = cited_tests(&map);
    assert!(cited.len() > 50, "the map cites its tests: {}", cited.len());
    let missing: Vec<String> = cited
        .iter()
        .filter(|(file, name)| {
            let text = std::fs::read_to_string(root.join(file)).unwrap_or_default();
            !text.contains(&format!("fn {name}("))
        })
        .map(|(file, name)| format!("{file}::{name}"))
        .collect();
    assert!(missing.is_empty(), "cited but not found: {missing:?}");
}

/// Each `` `tests/X.rs::name` `` or `` `src/X.rs::tests::name` `` of `text`:
/// the file and the test's name.
fn cited_tests(text: &str) -> BTreeSet<(String, String)> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| span.starts_with("tests/") || span.starts_with("src/"))
        .filter_map(|span| {
            let (file, path) = span.split_once(".rs::")?;
            let name = path.rsplit("::").next()?;
            let plain = !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_');
            // `tests/FILE.rs::name` says how a citation reads; it cites nothing.
            let placeholder = file
                .rsplit('/')
                .next()?
                .chars()
                .all(|c| c.is_ascii_uppercase());
            (plain && !placeholder).then(|| (format!("{file}.rs"), name.to_owned()))
        })
        .collect()
}

#[test]
fn no_file_outgrows_the_line_budget() {
    let sources = Sources::read();
    let long: Vec<&str> = LONG_FILES.iter().map(|(p, _)| *p).collect();
    let problems = too_long(&sources, &long);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_binary_only_parses_calls_and_prints() {
    let sources = Sources::read();
    let problems = bin_problems(&sources);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// Each check on a planted violation: the check must see it.

#[test]
fn planted_a_spawn_outside_the_list_is_found() {
    let sources = Sources::planted(&[(
        "src/report.rs",
        "pub fn f() { let _ = std::process::Command::new(\"sh\").status(); }",
    )]);
    let found = spawning(&sources);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(!under_any(&found[0].0, &["src/package"]));
    // Named in a comment or a string, it is no spawn.
    let quiet = Sources::planted(&[(
        "src/report.rs",
        "// Command::new(\"sh\")\npub const S: &str = \"Command::new\";",
    )]);
    assert!(spawning(&quiet).is_empty());
}

#[test]
fn planted_a_shared_build_outside_the_engine_is_found() {
    let sources = Sources::planted(&[
        (
            "src/report/views.rs",
            "fn f() { crate::build::exec::wave::build(a, b, c, d, e); }",
        ),
        (
            "src/build/probe/mod.rs",
            "fn g() { super::exec::wave::build(); }",
        ),
    ]);
    assert_eq!(
        shared_build_callers(&sources),
        set(&["src/report/views.rs"])
    );
}

#[test]
fn planted_an_arrow_back_up_is_found() {
    let sources = Sources::planted(&[
        ("src/spec/mod.rs", "use crate::store::Store;"),
        (
            "src/store/mod.rs",
            "use crate::{spec, support::account::Phase};",
        ),
    ]);
    let problems = layering_problems(&imports(&sources), TIERS);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("spec imports store"), "{problems:?}");
}

#[test]
fn planted_a_new_circle_is_found() {
    let sources = Sources::planted(&[
        ("src/report.rs", "use crate::compare::Table;"),
        ("src/compare.rs", "fn f() { crate::report::render(); }"),
    ]);
    let found = circles(&imports(&sources));
    assert!(found.contains(&vec!["compare".to_string(), "report".to_string()]));
}

#[test]
fn planted_a_circle_inside_a_folder_is_found() {
    // By `super::`, by a group under `crate::`, and by an included file.
    let sources = Sources::planted(&[
        ("src/suite/mod.rs", "mod cases; mod module;"),
        ("src/suite/cases.rs", "use super::module::Wrap;"),
        (
            "src/suite/module.rs",
            "use crate::suite::{self, cases::{DISPATCH, Other}};",
        ),
        (
            "src/build/exec/mod.rs",
            "const X: &str = include_str!(\"../probe/x.rs\");",
        ),
        ("src/build/probe/mod.rs", "use super::super::build::exec;"),
        // A child naming its folder's root, and the root its children,
        // make no circle.
        ("src/draw/mod.rs", "use self::http::Pool;"),
        ("src/draw/http/mod.rs", "use super::Reply;"),
    ]);
    let found = folder_circles(&sources);
    let want: BTreeSet<Vec<String>> = [
        vec!["suite", "cases", "module"],
        vec!["build", "exec", "probe"],
    ]
    .iter()
    .map(|c| c.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(found, want);
    // The include reaches the top-level graph too.
    let sources = Sources::planted(&[(
        "src/build/package/layout.rs",
        "const LIB: &str = include_str!(\"../../score/runner_lib.rs\");",
    )]);
    assert!(imports(&sources)["build"].contains("score"));
}

#[test]
fn planted_a_long_file_and_a_fat_binary_are_found() {
    let long_code = "fn f() {}\n".repeat(MAX_CODE_LINES + 1);
    let with_tests = format!(
        "{}#[cfg(test)]\nmod tests {{\n{}}}\n",
        "fn g() {}\n".repeat(10),
        long_code
    );
    // Code after a test module is code: a spawn there is found.
    let after = Sources::planted(&[(
        "src/report.rs",
        "#[cfg(test)]\nmod tests {\n    fn t() { if true { } }\n}\nfn f() { std::process::Command::new(\"x\"); }\n",
    )]);
    assert_eq!(spawning(&after).len(), 1);
    let sources = Sources::planted(&[
        ("src/report.rs", long_code.as_str()),
        ("src/compare.rs", with_tests.as_str()),
        (
            "bin/assay/cmd/show.rs",
            "fn f() { std::fs::write(\"x\", \"\").unwrap(); }",
        ),
    ]);
    let problems = too_long(&sources, &[]);
    assert_eq!(problems.len(), 1, "tests do not count: {problems:?}");
    assert!(problems[0].starts_with("src/report.rs"), "{problems:?}");
    let bin = bin_problems(&sources);
    assert_eq!(bin.len(), 1, "{bin:?}");
    assert!(bin[0].contains("std::fs"), "{bin:?}");
}

#[test]
fn planted_comments_and_strings_are_blanked() {
    let code = blank(
        "let a = \"crate::store\"; // crate::store\n/* crate::store /* nested */ */ let c = '\"'; \
         let r = r#\"crate::store\"#; let q = '\\''; let s = \"crate::store\"; \
         fn f<'a>(x: &'a str) {}",
    );
    assert!(!code.contains("crate::store"), "{code}");
    assert!(code.contains("fn f<'a>(x: &'a str) {}"), "{code}");
}

// The sources, as the checks read them.

struct Sources {
    /// Path from the repository root (`src/x.rs`) to the file's code:
    /// comments and strings blanked, tests cut.
    files: BTreeMap<String, String>,
}

impl Sources {
    fn read() -> Sources {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = BTreeMap::new();
        for top in ["src", "bin"] {
            for path in rust_files(&root.join(top)) {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                if is_test_module(&rel) {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                files.insert(rel, code_of(&text));
            }
        }
        assert!(files.contains_key("src/lib.rs"), "read the sources");
        Sources { files }
    }

    fn planted(files: &[(&str, &str)]) -> Sources {
        Sources {
            files: files
                .iter()
                .map(|(p, t)| (p.to_string(), code_of(t)))
                .collect(),
        }
    }
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// A file that is a `#[cfg(test)] mod tests;` of its folder.
fn is_test_module(rel: &str) -> bool {
    rel.ends_with("/tests.rs")
}

/// The file's code: comments and string literals blanked, and every
/// inline test module (a top-level `#[cfg(test)]` on a `mod NAME {`) taken
/// out to its closing brace. A `#[cfg(test)] mod tests;` is a file of its
/// own.
fn code_of(text: &str) -> String {
    let code = blank(text);
    let mut out = String::with_capacity(code.len());
    let mut rest = code.as_str();
    while let Some(at) = test_module_at(rest) {
        out.push_str(&rest[..at]);
        let open = at + rest[at..].find('{').expect("a test module opens");
        let mut depth = 0usize;
        let mut end = rest.len();
        for (k, c) in rest[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Where the first inline test module of `code` starts.
fn test_module_at(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = code[from..].find("#[cfg(test)]") {
        let at = from + at;
        from = at + 1;
        let top_level = at == 0 || code.as_bytes()[at - 1] == b'\n';
        let item = code[at + "#[cfg(test)]".len()..].trim_start();
        let item = item.lines().next().unwrap_or("");
        let item = item.strip_prefix("pub(crate) ").unwrap_or(item);
        if top_level && item.starts_with("mod ") && item.trim_end().ends_with('{') {
            return Some(at);
        }
    }
    None
}

/// `text` with every comment and string or char literal replaced by
/// spaces, newlines kept (so lines still count).
fn blank(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep_lines = |out: &mut String, from: &[char]| {
        for &c in from {
            out.push(if c == '\n' { '\n' } else { ' ' });
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '/' && next == Some('/') {
            let end = chars[i..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(chars.len(), |p| i + p);
            keep_lines(&mut out, &chars[i..end]);
            i = end;
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            let mut j = i;
            while j < chars.len() {
                if chars[j] == '/' && chars.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if chars[j] == '*' && chars.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            keep_lines(&mut out, &chars[i..j.min(chars.len())]);
            i = j;
        } else if (c == 'r' || (c == 'b' && next == Some('r')))
            && !ident_before
            && raw_start(&chars, i).is_some()
        {
            let (open_end, hashes) = raw_start(&chars, i).unwrap();
            let mut j = open_end;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"'
                    && chars[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            keep_lines(&mut out, &chars[i..j.min(chars.len())]);
            i = j;
        } else if c == '"' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(chars.len());
            // The path of an `include_str!` is an import: kept.
            let before = out.trim_end();
            if INCLUDES.iter().any(|m| before.ends_with(&format!("{m}!("))) {
                out.extend(&chars[i..end]);
            } else {
                keep_lines(&mut out, &chars[i..end]);
            }
            i = end;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{1F600}'), or a lifetime.
            let end = if next == Some('\\') {
                // The escaped character is skipped: '\'' ends at its third quote.
                let from = (i + 3).min(chars.len());
                chars[from..]
                    .iter()
                    .position(|&c| c == '\'')
                    .map(|p| from + p + 1)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 3)
            } else {
                None
            };
            match end {
                Some(end) => {
                    keep_lines(&mut out, &chars[i..end]);
                    i = end;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Where a raw string opening at `i` (`r"`, `r#"`, `br##"`) ends, and its
/// number of `#`.
fn raw_start(chars: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i + if chars[i] == 'b' { 2 } else { 1 };
    let mut hashes = 0;
    while chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some((j + 1, hashes))
}

fn lines_of_code(code: &str) -> usize {
    code.lines().filter(|l| !l.trim().is_empty()).count()
}

fn under_any(path: &str, prefixes: &[&str]) -> bool {
    prefixes
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")) || path == format!("{p}.rs"))
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The files whose code holds any of `needles`.
fn users(sources: &Sources, needles: &[&str]) -> BTreeSet<String> {
    sources
        .files
        .iter()
        .filter(|(_, code)| needles.iter().any(|n| code.contains(n)))
        .map(|(path, _)| path.clone())
        .collect()
}

/// Every file that starts a process, with the first line that does.
fn spawning(sources: &Sources) -> Vec<(String, String)> {
    const STARTS: &[&str] = &[
        "Command::new",
        "process::Command",
        "libc::fork",
        "CommandExt",
    ];
    sources
        .files
        .iter()
        .filter_map(|(path, code)| {
            let line = code
                .lines()
                .find(|l| STARTS.iter().any(|s| l.contains(s)))?;
            Some((path.clone(), line.trim().to_owned()))
        })
        .collect()
}

/// The top-level module a file of `src/` belongs to.
fn module_of(path: &str) -> Option<String> {
    let rest = path.strip_prefix("src/")?;
    let top = rest.split('/').next()?;
    let top = top.strip_suffix(".rs").unwrap_or(top);
    (top != "lib").then(|| top.to_owned())
}

/// Which top-level modules each top-level module imports (`crate::x`,
/// `crate::{x, y::z}`, `super::` from a top-level file, an `include_str!`
/// of another module's file), itself left out.
fn imports(sources: &Sources) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, code) in &sources.files {
        let Some(module) = module_of(path) else {
            continue;
        };
        let used = graph.entry(module.clone()).or_default();
        let resolved = named_paths(path, code)
            .into_iter()
            .filter_map(|p| p.first().cloned());
        for name in crate_paths(code).into_iter().chain(resolved) {
            if name != module {
                used.insert(name);
            }
        }
    }
    graph
}

/// The module path of a file of `src/`: `src/a/b.rs` and `src/a/b/mod.rs`
/// are `[a, b]`, `src/lib.rs` is `[]`.
fn module_path(path: &str) -> Option<Vec<String>> {
    let rest = path.strip_prefix("src/")?.strip_suffix(".rs")?;
    let mut parts: Vec<String> = rest.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] {
        parts.pop();
    }
    Some(parts)
}

/// Macros whose string argument names a file of the crate.
const INCLUDES: &[&str] = &["include_str", "include_bytes", "include"];

/// Every module path the file at `path` names, resolved from the crate's
/// root: `crate::a::b`, `super::b`, `self::b` (groups expanded), and the
/// module of every file it includes.
fn named_paths(path: &str, code: &str) -> Vec<Vec<String>> {
    let Some(own) = module_path(path) else {
        return Vec::new();
    };
    // A folder's root (`mod.rs`, `lib.rs`) is its own `self`; a file's
    // `self` is itself too, and `super` its folder.
    let mut found = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start) {
            let at = from + at;
            from = at + start.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':' || c == '$') {
                continue;
            }
            let mut base = match start {
                "crate::" => Vec::new(),
                "self::" => own.clone(),
                _ => own[..own.len().saturating_sub(1)].to_vec(),
            };
            let mut rest = &code[from..];
            while let Some(r) = rest.trim_start().strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            expand(base, rest, &mut found);
        }
    }
    let dir = Path::new(path).parent().unwrap_or(Path::new(""));
    for m in INCLUDES {
        let open = format!("{m}!(");
        for (at, _) in code.match_indices(&open) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let arg = code[at + open.len()..].trim_start();
            let Some(lit) = arg.strip_prefix('"').and_then(|a| a.split('"').next()) else {
                continue;
            };
            let file = normalize(&dir.join(lit));
            if let Some(m) = module_path(&file) {
                found.push(m);
            }
        }
    }
    found
}

/// `a/b/../c` as `a/c`.
fn normalize(path: &Path) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.to_str().unwrap_or("").split('/') {
        match c {
            ".." => {
                parts.pop();
            }
            "." | "" => {}
            c => parts.push(c),
        }
    }
    parts.join("/")
}

/// The paths `rest` names after `base` (`a::b`, `{a, b::{c, self}}`),
/// pushed onto `out` as far as they name modules or items.
fn expand(base: Vec<String>, rest: &str, out: &mut Vec<Vec<String>>) {
    let mut path = base;
    let mut rest = rest.trim_start();
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut item = 0;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        expand(path.clone(), &group[item..k], out);
                        return;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(path.clone(), &group[item..k], out);
                        item = k + 1;
                    }
                    _ => {}
                }
            }
            return;
        }
        let name = ident_at(rest);
        if name.is_empty() {
            break;
        }
        if name != "self" {
            path.push(name.clone());
        }
        match rest[name.len()..].trim_start().strip_prefix("::") {
            Some(r) => rest = r.trim_start(),
            None => break,
        }
    }
    out.push(path);
}

/// Circles between the entries of one folder: each folder's files and
/// subfolders as nodes, an edge where one names the other (by any path
/// [`named_paths`] reads), the folder's own root left out (it declares
/// its children). Each circle is the folder's path, then its entries.
fn folder_circles(sources: &Sources) -> BTreeSet<Vec<String>> {
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (path, code) in &sources.files {
        let Some(own) = module_path(path) else {
            continue;
        };
        for named in named_paths(path, code) {
            // Every folder holding both, below the crate's root (the
            // top-level check has that one).
            for depth in 1..own.len() {
                let folder = &own[..depth];
                if named.len() > depth && named[..depth] == *folder && named[depth] != own[depth] {
                    graphs
                        .entry(folder.to_vec())
                        .or_default()
                        .entry(own[depth].clone())
                        .or_default()
                        .insert(named[depth].clone());
                }
            }
        }
    }
    let mut found = BTreeSet::new();
    for (folder, mut graph) in graphs {
        // An entry named but naming nothing is a node too.
        let named: Vec<String> = graph.values().flatten().cloned().collect();
        for n in named {
            graph.entry(n).or_default();
        }
        for circle in circles(&graph) {
            let mut line = vec![folder.join("/")];
            line.extend(circle);
            found.insert(line);
        }
    }
    found
}

/// The first segment of every `crate::` path in `code`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest_trim = rest.trim_start();
        if let Some(group) = rest_trim.strip_prefix('{') {
            let mut depth = 0;
            let mut item_start = true;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_alphabetic() || c == '_') => {
                        names.push(ident_at(&group[k..]));
                        item_start = false;
                    }
                    c if !c.is_whitespace() => item_start = false,
                    _ => {}
                }
            }
        } else {
            let name = ident_at(rest_trim);
            if !name.is_empty() {
                names.push(name);
            }
        }
    }
    names
}

fn ident_at(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Every import that runs to a higher tier, and every module without a
/// tier.
fn layering_problems(
    graph: &BTreeMap<String, BTreeSet<String>>,
    tiers: &[(&str, &[&str])],
) -> Vec<String> {
    let tier_of = |m: &str| tiers.iter().position(|(_, ms)| ms.contains(&m));
    let mut problems = Vec::new();
    for (module, used) in graph {
        let Some(own) = tier_of(module) else {
            problems.push(format!("{module} has no tier in TIERS"));
            continue;
        };
        for other in used {
            match tier_of(other) {
                Some(t) if t > own => problems.push(format!(
                    "{module} imports {other}: from \"{}\" up to \"{}\"",
                    tiers[own].0, tiers[t].0
                )),
                Some(_) => {}
                None if graph.contains_key(other) => {}
                // Not a module of the crate (a macro's `crate::` in a
                // generated string is blanked; anything else is a typo).
                None => problems.push(format!("{module} imports unknown crate::{other}")),
            }
        }
    }
    problems
}

/// The import circles: strongly connected groups of more than one module
/// (Tarjan's algorithm), each sorted.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: BTreeSet<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        if let Some(next) = graph.get(v) {
            for w in next {
                let w = w.as_str();
                if !graph.contains_key(w) {
                    continue;
                }
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low[v];
                    s.low.insert(v, lv.min(lw));
                } else if s.on_stack.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low[v];
                    s.low.insert(v, lv.min(iw));
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                group.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                s.found.insert(group);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: BTreeSet::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found
}

/// Files past their line budget: [`MAX_CODE_LINES`] unless listed in
/// `allowed`; the binary's by [`bin_problems`].
fn too_long(sources: &Sources, allowed: &[&str]) -> Vec<String> {
    sources
        .files
        .iter()
        .filter(|(path, _)| !under_any(path, allowed))
        .filter_map(|(path, code)| {
            let n = lines_of_code(code);
            (n > MAX_CODE_LINES)
                .then(|| format!("{path}: {n} lines of code, more than {MAX_CODE_LINES}"))
        })
        .collect()
}

/// A binary file past its budget, or touching what only the library may.
fn bin_problems(sources: &Sources) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, code) in sources.files.iter().filter(|(p, _)| p.starts_with("bin/")) {
        let n = lines_of_code(code);
        let budget = if path.ends_with("/args.rs") {
            MAX_BIN_ARGS_LINES
        } else {
            MAX_BIN_LINES
        };
        if n > budget {
            problems.push(format!("{path}: {n} lines of code, more than {budget}"));
        }
        for needle in NOT_IN_BIN {
            if code.contains(needle) {
                problems.push(format!("{path}: uses {needle}, which is the library's"));
            }
        }
    }
    problems
}

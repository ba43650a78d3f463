//! `assay task new`: a task that works as written, to start from. It
//! passes `assay task check` and `assay run` as it is: a small word count
//! (`fn NAME(text: &str) -> usize`), with the harness, five cases, a
//! committed candidate that passes them, and a replay corpus of four
//! replies in the bundled tasks' form (right, the same reformatted, one
//! that does not compile, one that is wrong on one case), so a first run
//! shows every stage. The author replaces the example, keeping the shape.

use std::path::{Path, PathBuf};

/// Why no skeleton was written.
#[derive(Debug, thiserror::Error)]
pub enum SkeletonError {
    /// Bad input: the name cannot be a task's and its entry's.
    #[error("task new {name}: {why}")]
    BadName { name: String, why: &'static str },
    /// Bad input: nothing is ever written over an existing path.
    #[error("{}: already exists; choose another --dir or NAME (nothing was written)", path.display())]
    Exists { path: PathBuf },
    #[error("{}: cannot write", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The files of a new task `name`, as (path relative to the task's
/// folder, text). Checked by `write`, not here: `name` must be valid.
pub fn files(name: &str) -> Vec<(&'static str, String)> {
    let entry = entry_name(name);
    let fill = |template: &str| {
        template
            .replace("{name}", name)
            .replace("{entry}", &entry)
            .replace("{harness_crate}", &format!("{entry}_harness"))
    };
    let replies = REPLIES
        .iter()
        .map(|(content, tokens)| {
            serde_json::json!({
                "content": fill(content),
                "finish_reason": "stop",
                "usage": {"prompt_tokens": 160, "completion_tokens": tokens},
                "model": "example-model",
                "ttft_ms": 180,
                "latency_ms": 900 + 10 * tokens,
            })
            .to_string()
                + "\n"
        })
        .collect::<String>();
    vec![
        ("spec.toml", fill(SPEC)),
        ("prompt.md", fill(PROMPT)),
        ("harness/Cargo.toml", fill(HARNESS_MANIFEST)),
        ("harness/src/lib.rs", fill(HARNESS_LIB)),
        ("cases.jsonl", CASES.to_owned()),
        ("committed.rs", fill(COMMITTED)),
        ("replies.jsonl", replies),
        ("ORACLE.md", fill(ORACLE)),
    ]
}

/// Writes a new task `name` into `dir`, which must not exist (its parents
/// are created). On a failure half-way, the folder is removed again.
pub fn write(name: &str, dir: &Path) -> Result<Vec<PathBuf>, SkeletonError> {
    check_name(name)?;
    if dir.symlink_metadata().is_ok() {
        return Err(SkeletonError::Exists {
            path: dir.to_path_buf(),
        });
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SkeletonError::Write { path, source }
    };
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    // `create_dir`, not `create_dir_all`: of two racing writers one fails.
    std::fs::create_dir(dir).map_err(|source| match source.kind() {
        std::io::ErrorKind::AlreadyExists => SkeletonError::Exists {
            path: dir.to_path_buf(),
        },
        _ => SkeletonError::Write {
            path: dir.to_path_buf(),
            source,
        },
    })?;
    let written = files(name)
        .into_iter()
        .map(|(rel, text)| {
            let path = dir.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            std::fs::write(&path, text).map_err(io(&path))?;
            Ok(path)
        })
        .collect::<Result<Vec<PathBuf>, SkeletonError>>();
    if written.is_err() {
        let _ = std::fs::remove_dir_all(dir);
    }
    written
}

/// The entry function's name: the task's, `-` made `_`.
fn entry_name(name: &str) -> String {
    name.replace('-', "_")
}

fn check_name(name: &str) -> Result<(), SkeletonError> {
    let bad = |why| SkeletonError::BadName {
        name: name.to_owned(),
        why,
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(bad(
            "a task's name is ASCII letters, digits, - and _ (it names the work directory)",
        ));
    }
    if syn::parse_str::<syn::Ident>(&entry_name(name)).is_err() {
        return Err(bad(
            "the entry function is named after the task, and this is no Rust function name \
             (a keyword, or a leading digit): choose another NAME",
        ));
    }
    Ok(())
}

const SPEC: &str = r#"# The task `{name}`; docs/tasks.md says what each key means.
name = "{name}"
# Sent to the model pools as written.
prompt = "prompt.md"
# The crate with Entry, Case, load_cases, input_line, run_input and judge.
harness = "harness"
# The function every candidate must define, of the harness's `Entry` type.
entry = "{entry}"
# The oracle cases, one JSON object a line.
cases = "cases.jsonl"
# The reference candidate, scored in every batch.
committed = "committed.rs"

[draw]
# Candidates per batch: the replay pool below holds 4 recorded replies.
n = 4
replay = "replies.jsonl"
# Real model pools (docs/gateway.md); without, the replay pool.
# pools = ["fast=16"]

[admit]
# Cases passed / total that admit a candidate.
min_score = 0.9

[limits]
# One candidate's run over all the cases.
wall_ms = 2000
"#;

const PROMPT: &str = r#"Write a Rust function that counts the words in a text.

```rust
pub fn {entry}(text: &str) -> usize
```

A word is a maximal run of characters that are not ASCII whitespace
(space, tab, line feed, form feed, carriage return). Leading, trailing and
repeated whitespace separate nothing more: an empty or all-whitespace text
has 0 words.

Examples:

| text | result |
|---|---|
| `""` | 0 |
| `"hello world"` | 2 |
| `"  a   b  "` | 2 |
| `"a\tb\nc"` | 3 |

Use only the standard library. Answer with one ```rust fence defining
`pub fn {entry}(text: &str) -> usize` and any helpers it needs.
"#;

const HARNESS_MANIFEST: &str = r#"[package]
name = "{name}-harness"
version = "0.1.0"
edition = "2021"
publish = false
description = "Harness of the assay task `{name}`: case type, case loader, comparison"

[dependencies]
serde = { version = "1", features = ["derive"] }
serde_json = "1"
"#;

const HARNESS_LIB: &str = r#"//! Harness of the `{name}` task (docs/tasks.md, "The harness contract").
//!
//! Every public item here is in scope in every candidate, so the root
//! exports the contract and nothing else: `Entry`, `Case`, `load_cases`,
//! `input_line`, `run_input` and `judge`. A candidate's run gets only the
//! encoded inputs (`run_input`); the judge, which links no candidate, reads
//! the expected answers and compares (`load_cases`, `input_line`, `judge`).

use serde::Deserialize;

/// The signature every candidate's `{entry}` must have.
pub type Entry = fn(&str) -> usize;

/// One oracle case: one line of cases.jsonl.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    pub input: String,
    pub expected: usize,
}

/// Parses the whole cases file, one JSON object a line; blank lines are
/// skipped, as assay skips them when it counts cases. An error names the
/// 1-based line.
pub fn load_cases(text: &str) -> Result<Vec<Case>, String> {
    let mut cases = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let case: Case =
            serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        cases.push(case);
    }
    Ok(cases)
}

/// A case's input as a candidate's run receives it: a JSON string, so a
/// newline in the text stays inside one line.
pub fn input_line(case: &Case) -> String {
    serde_json::to_string(&case.input).expect("a string always serializes")
}

/// Runs the candidate on one encoded input and encodes its answer. A panic
/// of the candidate propagates; the runner catches it.
pub fn run_input(entry: Entry, line: &str) -> Result<String, String> {
    let input: String = serde_json::from_str(line).map_err(|e| e.to_string())?;
    Ok(entry(&input).to_string())
}

/// Whether an encoded answer is the case's expected one; an answer that
/// does not decode is wrong.
pub fn judge(case: &Case, output: &str) -> bool {
    output.trim().parse::<usize>() == Ok(case.expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_goes_through_the_contract() {
        let cases = load_cases("{\"name\": \"n\", \"input\": \"a b\", \"expected\": 2}\n").unwrap();
        let count: Entry = |text| text.split_ascii_whitespace().count();
        let output = run_input(count, &input_line(&cases[0])).unwrap();
        assert!(judge(&cases[0], &output));
        assert!(!judge(&cases[0], "3"));
        assert!(load_cases("{\"input\": 1}").unwrap_err().starts_with("line 1:"));
    }
}
"#;

const CASES: &str = r#"{"name": "empty", "input": "", "expected": 0}
{"name": "one_word", "input": "hello", "expected": 1}
{"name": "two_words", "input": "hello world", "expected": 2}
{"name": "runs_of_spaces", "input": "  a   b  ", "expected": 2}
{"name": "tabs_and_newlines", "input": "a\tb\nc", "expected": 3}
"#;

const COMMITTED: &str = r#"/// Counts the words of `text`: runs of characters that are not ASCII
/// whitespace.
pub fn {entry}(text: &str) -> usize {
    text.split_ascii_whitespace().count()
}
"#;

const ORACLE: &str = r#"# Oracle of the `{name}` task

Say here how every `expected` value in `cases.jsonl` was derived, so that a
reader can trust it without trusting any candidate: by hand from the rule in
`prompt.md`, or by a reference implementation outside Rust (a script kept in
this folder, as the bundled tasks' `gen_cases.py`). assay never reads this
file.

The five example cases were written by hand from the rule.
"#;

/// The replay corpus: each reply's content and its completion tokens.
const REPLIES: [(&str, u64); 4] = [
    (
        "Here is a version that splits on ASCII whitespace:\n\n```rust\npub fn {entry}(text: &str) -> usize {\n    text.split_ascii_whitespace().count()\n}\n```",
        40,
    ),
    (
        "```rust\n// Words are runs of non-whitespace characters.\npub fn {entry}(text: &str) -> usize { text.split_ascii_whitespace().count() }\n```",
        35,
    ),
    (
        "```rust\npub fn {entry}(text: &str) -> usize {\n    text.split(' ').len()\n}\n```",
        30,
    ),
    (
        "Split on spaces and skip the empty pieces:\n\n```rust\npub fn {entry}(text: &str) -> usize {\n    text.split(' ').filter(|w| !w.is_empty()).count()\n}\n```",
        45,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_cannot_name_a_function_are_refused() {
        for name in ["", "a b", "fn", "1st", "_", "ü"] {
            assert!(
                matches!(check_name(name), Err(SkeletonError::BadName { .. })),
                "{name}"
            );
        }
        for name in ["roman", "roman-numerals", "r2d2", "word_count"] {
            assert!(check_name(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn the_files_name_the_task_and_its_entry() {
        let files = files("roman-numerals");
        let text = |rel: &str| &files.iter().find(|(r, _)| *r == rel).unwrap().1;
        assert!(text("spec.toml").contains("name = \"roman-numerals\""));
        assert!(text("spec.toml").contains("entry = \"roman_numerals\""));
        assert!(text("harness/Cargo.toml").contains("name = \"roman-numerals-harness\""));
        assert!(text("committed.rs").contains("pub fn roman_numerals(text: &str)"));
        assert!(text("prompt.md").contains("pub fn roman_numerals(text: &str) -> usize"));
        for (rel, text) in &files {
            assert!(
                !text.contains("{entry}") && !text.contains("{name}"),
                "{rel}"
            );
        }
        let replies: Vec<serde_json::Value> = text("replies.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(replies.len(), 4);
        assert!(replies[0]["content"]
            .as_str()
            .unwrap()
            .contains("pub fn roman_numerals"));
    }

    #[test]
    fn an_existing_folder_is_never_written_over() {
        let dir = tempfile::tempdir().unwrap();
        let e = write("x", dir.path()).unwrap_err();
        assert!(matches!(e, SkeletonError::Exists { .. }), "{e}");
        let new = dir.path().join("a/b/x");
        let written = write("x", &new).unwrap();
        assert!(written.iter().all(|p| p.is_file()));
        assert!(new.join("harness/src/lib.rs").is_file());
    }
}

//! Real model output for suite tests: MBPP-RS (MultiPL-E's Rust
//! translation of MBPP) with the GPT-4 solution Reflexion ended on and the
//! outcome its executor recorded, read from `../shared/data/mbpp-rs-reflexion/`
//! beside the repository (its README says what each field is), never
//! copied into the project.
//!
//! [`write_suite`] turns it into assay's suite input in completion mode:
//! each problem keeps its prompt, its tests are the recorded `test` and it
//! has no stop tokens; the completion is the solution after the prompt.
//! So assay's program, prompt + completion + "\n" + tests, is the
//! dataset's own `solution + test` with one more newline between them.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The one problem whose recorded outcome is not its outcome: it passes or
/// fails from run to run (HashMap order on ties).
pub const UNSTABLE: &str = "mbpp_130_max_occurrences";

/// Names the data folder for a checkout that is not beside `../shared` (a
/// git worktree, say).
pub const DIR_VAR: &str = "ASSAY_MBPP_RS_DIR";

/// One line of problems-with-solutions.jsonl, the fields used here.
#[derive(Debug, Clone, Deserialize)]
pub struct Solved {
    pub name: String,
    pub prompt: String,
    pub test: String,
    pub solution: String,
    pub is_solved: bool,
}

/// `../shared/data/mbpp-rs-reflexion` beside the repository, or the
/// folder [`DIR_VAR`] names.
pub fn data_dir() -> PathBuf {
    match std::env::var_os(DIR_VAR) {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/mbpp-rs-reflexion"),
    }
}

/// Every problem with its solution, in the file's order. Panics naming the
/// path when the data is not there (CI has it), never skips.
pub fn load() -> Vec<Solved> {
    let path = data_dir().join("problems-with-solutions.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "the real-data suite needs {} ({e}): MBPP-RS with GPT-4 solutions, kept in \
             ../shared beside the repository; a checkout elsewhere names the folder with {DIR_VAR}",
            path.display()
        )
    });
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// Writes `rows` as a problem set and a completions file into `dir`;
/// returns their paths.
pub fn write_suite(rows: &[Solved], dir: &Path) -> (PathBuf, PathBuf) {
    let mut problems = String::new();
    let mut completions = String::new();
    for row in rows {
        let completion = row
            .solution
            .strip_prefix(&row.prompt)
            .unwrap_or_else(|| panic!("{}: the solution does not start with the prompt", row.name));
        let problem = serde_json::json!({
            "name": row.name,
            "language": "rs",
            "prompt": row.prompt,
            "tests": row.test,
            "stop_tokens": [],
        });
        problems.push_str(&format!("{problem}\n"));
        let line = serde_json::json!({ "name": row.name, "completion": completion });
        completions.push_str(&format!("{line}\n"));
    }
    let (p, c) = (
        dir.join("mbpp-problems.jsonl"),
        dir.join("mbpp-completions.jsonl"),
    );
    std::fs::write(&p, problems).unwrap();
    std::fs::write(&c, completions).unwrap();
    (p, c)
}

//! A suite's input, read and checked before anything is written: the
//! problem set, the completions of a run from files, and what makes two
//! programs of a problem one.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::suite::SuiteError;
use crate::suite::{Completions, Problem, ProgramMode};
use crate::text::dedup;

/// A problem set, read and checked.
#[derive(Debug, Clone)]
pub struct ProblemSet {
    pub path: PathBuf,
    /// blake3 (hex) of the file.
    pub digest: String,
    pub problems: Vec<Problem>,
    /// The line of each problem.
    lines: Vec<usize>,
}

/// A suite's input, read and checked before anything is written.
#[derive(Debug, Clone)]
pub struct SuiteInput {
    pub set: ProblemSet,
    /// The completions' path.
    pub source: String,
    pub mode: ProgramMode,
    /// Each problem's completions, in input order.
    pub completions: Vec<Vec<String>>,
}

/// The pool name of completions read from a file.
pub const COMPLETIONS_POOL: &str = "completions";

impl ProblemSet {
    /// Reads a problem set (MultiPL-E's JSONL).
    pub fn read(path: &Path) -> Result<ProblemSet, SuiteError> {
        let text =
            crate::support::input::read_to_string(path).map_err(|source| SuiteError::Read {
                file: path.to_path_buf(),
                source,
            })?;
        Ok(ProblemSet {
            path: path.to_path_buf(),
            digest: blake3::hash(text.as_bytes()).to_hex().to_string(),
            problems: crate::suite::problem::parse_problems(path, &text)?,
            lines: problem_lines(&text),
        })
    }
}

impl SuiteInput {
    /// Reads a problem set and its completions (a flat JSONL or MultiPL-E's
    /// output directory). Every problem needs at least one completion: a
    /// problem without one has no pass@k, and the suite's mean would not be
    /// the suite's.
    pub fn from_completions(problems: &Path, completions: &Path) -> Result<SuiteInput, SuiteError> {
        let set = ProblemSet::read(problems)?;
        let read = Completions::load(completions, &set.problems)?;
        let grouped: Vec<Vec<String>> = read
            .per_problem(&set.problems)?
            .into_iter()
            .map(|cs| cs.into_iter().map(str::to_owned).collect())
            .collect();
        for (i, cs) in grouped.iter().enumerate() {
            if cs.is_empty() {
                return Err(SuiteError::Invalid {
                    file: problems.to_path_buf(),
                    line: set.lines.get(i).copied(),
                    field: Some("name"),
                    message: format!(
                        "problem `{}` has no completion in {}",
                        set.problems[i].name,
                        completions.display()
                    ),
                });
            }
        }
        Ok(SuiteInput {
            set,
            source: std::path::absolute(completions)
                .unwrap_or_else(|_| completions.to_path_buf())
                .display()
                .to_string(),
            mode: ProgramMode::Completion,
            completions: grouped,
        })
    }
}

/// The line of each problem (the file's non-blank lines, as
/// `load_problems` reads them).
fn problem_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, _)| i + 1)
        .collect()
}

/// What makes two programs of a problem one: the exact fingerprint, or,
/// for a program that does not lex (and has none), its text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Key {
    Fingerprint(String),
    Text(String),
}

impl Key {
    pub(super) fn of(program: &str) -> Key {
        match dedup::fingerprint(program) {
            Some(fp) => Key::Fingerprint(fp.to_string()),
            None => Key::Text(program.to_owned()),
        }
    }

    pub(super) fn fingerprint(&self) -> Option<String> {
        match self {
            Key::Fingerprint(f) => Some(f.clone()),
            Key::Text(_) => None,
        }
    }
}

/// For each program, the first earlier one of its problem with the same
/// key.
pub(super) fn duplicates(keys: &[Key]) -> Vec<Option<usize>> {
    let mut first: std::collections::HashMap<&Key, usize> = std::collections::HashMap::new();
    keys.iter()
        .enumerate()
        .map(|(i, key)| match first.get(key) {
            Some(&rep) => Some(rep),
            None => {
                first.insert(key, i);
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_lines_skip_blank_lines() {
        assert_eq!(problem_lines("a\n\n  \nb\nc\n"), [1, 4, 5]);
    }

    #[test]
    fn equal_programs_are_grouped_by_fingerprint_or_text() {
        let keys: Vec<Key> = [
            "fn main() { 1; }",
            "fn main() {  1 ; } // the same",
            "fn main() { \"open",
            "fn main() { \"open",
            "fn main() { 2; }",
        ]
        .iter()
        .map(|p| Key::of(p))
        .collect();
        assert!(
            matches!(keys[2], Key::Text(_)),
            "an unterminated string does not lex"
        );
        assert_eq!(duplicates(&keys), [None, Some(0), None, Some(2), None]);
    }
}

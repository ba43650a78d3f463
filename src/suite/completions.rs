//! Completions to run against a problem set, from MultiPL-E's own
//! generation output (a directory of per-problem `.json` or `.json.gz`
//! files, each with the problem and its `completions`) or from a flat JSONL
//! of `{"name": ..., "completion": ...}` rows. Input order is kept: it is
//! the order of the statuses in every report.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::problem::{object_line, problem_from, string_field};
use super::{Problem, SuiteError};

/// One completion and where it came from (for errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionRow {
    pub name: String,
    pub completion: String,
    pub file: PathBuf,
    /// The JSONL line; None for a MultiPL-E file (one object per file).
    pub line: Option<usize>,
}

/// Every completion read, in input order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completions {
    pub rows: Vec<CompletionRow>,
}

impl Completions {
    /// Reads `path`: a directory is MultiPL-E's output, a file is JSONL.
    pub fn load(path: &Path, problems: &[Problem]) -> Result<Completions, SuiteError> {
        if path.is_dir() {
            Completions::load_multiple_dir(path, problems)
        } else {
            let text =
                crate::support::input::read_to_string(path).map_err(|source| SuiteError::Read {
                    file: path.to_path_buf(),
                    source,
                })?;
            Completions::parse_jsonl(path, &text)
        }
    }

    /// A flat JSONL of `{"name", "completion"}` rows; several rows may name
    /// one problem. Blank lines are skipped.
    pub fn parse_jsonl(file: &Path, text: &str) -> Result<Completions, SuiteError> {
        let mut rows = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let at = index + 1;
            if line.trim().is_empty() {
                continue;
            }
            let obj = object_line(file, at, line)?;
            rows.push(CompletionRow {
                name: string_field(&obj, "name", file, Some(at))?,
                completion: string_field(&obj, "completion", file, Some(at))?,
                file: file.to_path_buf(),
                line: Some(at),
            });
        }
        Ok(Completions { rows })
    }

    /// MultiPL-E's generation output: every `*.json` and `*.json.gz` in
    /// `dir` (not below it, and not its `*.results.json*` files), in file
    /// name order. Each file's problem must be the one in `problems` of its
    /// name, field for field: completions drawn for another prompt would be
    /// scored against the wrong tests.
    pub fn load_multiple_dir(dir: &Path, problems: &[Problem]) -> Result<Completions, SuiteError> {
        let read_err = |source| SuiteError::Read {
            file: dir.to_path_buf(),
            source,
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(read_err)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(read_err)?;
        files.retain(|p| is_completions_file(p));
        files.sort();
        let mut rows = Vec::new();
        let mut seen: Vec<(String, PathBuf)> = Vec::new();
        for file in files {
            let obj = read_json_object(&file)?;
            let problem = problem_from(&obj, &file, None)?;
            if let Some((_, first)) = seen.iter().find(|(n, _)| *n == problem.name) {
                return Err(SuiteError::invalid(
                    &file,
                    None,
                    Some("name"),
                    format!(
                        "`{}` was already read from {}",
                        problem.name,
                        first.display()
                    ),
                ));
            }
            check_same_problem(&problem, problems, &file)?;
            for completion in completion_list(&obj, &file)? {
                rows.push(CompletionRow {
                    name: problem.name.clone(),
                    completion,
                    file: file.clone(),
                    line: None,
                });
            }
            seen.push((problem.name, file));
        }
        Ok(Completions { rows })
    }

    /// The completions of each problem, in the problems' order and each
    /// problem's input order. A row naming no problem is an error.
    pub fn per_problem<'a>(
        &'a self,
        problems: &[Problem],
    ) -> Result<Vec<Vec<&'a str>>, SuiteError> {
        let mut out = vec![Vec::new(); problems.len()];
        for row in &self.rows {
            let Some(i) = problems.iter().position(|p| p.name == row.name) else {
                return Err(SuiteError::invalid(
                    &row.file,
                    row.line,
                    Some("name"),
                    format!("`{}` is not a problem of the set", row.name),
                ));
            };
            out[i].push(row.completion.as_str());
        }
        Ok(out)
    }
}

fn is_completions_file(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    path.is_file()
        && (name.ends_with(".json") || name.ends_with(".json.gz"))
        && !name.ends_with(".results.json")
        && !name.ends_with(".results.json.gz")
}

fn read_json_object(file: &Path) -> Result<Map<String, Value>, SuiteError> {
    let read_err = |source| SuiteError::Read {
        file: file.to_path_buf(),
        source,
    };
    let raw = std::fs::read(file).map_err(read_err)?;
    let text = if file.extension().is_some_and(|e| e == "gz") {
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(raw.as_slice())
            .read_to_string(&mut text)
            .map_err(read_err)?;
        text
    } else {
        String::from_utf8(raw).map_err(|_| SuiteError::invalid(file, None, None, "not UTF-8"))?
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(obj)) => Ok(obj),
        Ok(_) => Err(SuiteError::invalid(file, None, None, "not a JSON object")),
        Err(e) => Err(SuiteError::invalid(
            file,
            None,
            None,
            format!("not JSON: {e}"),
        )),
    }
}

fn completion_list(obj: &Map<String, Value>, file: &Path) -> Result<Vec<String>, SuiteError> {
    super::problem::string_list(obj, "completions", file, None)
}

fn check_same_problem(
    found: &Problem,
    problems: &[Problem],
    file: &Path,
) -> Result<(), SuiteError> {
    let Some(known) = problems.iter().find(|p| p.name == found.name) else {
        return Err(SuiteError::invalid(
            file,
            None,
            Some("name"),
            format!("`{}` is not a problem of the set", found.name),
        ));
    };
    let differs = if known.prompt != found.prompt {
        Some("prompt")
    } else if known.tests != found.tests {
        Some("tests")
    } else if known.stop_tokens != found.stop_tokens {
        Some("stop_tokens")
    } else {
        None
    };
    match differs {
        Some(field) => Err(SuiteError::invalid(
            file,
            None,
            Some(field),
            format!("differs from problem `{}` of the set", found.name),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn problem(name: &str) -> Problem {
        Problem {
            name: name.to_owned(),
            prompt: "fn f() -> i32 {\n".to_owned(),
            tests: "}\nfn main() {}\n".to_owned(),
            stop_tokens: vec!["\n}".to_owned()],
        }
    }

    fn multiple_file(p: &Problem, completions: &[&str]) -> String {
        serde_json::json!({
            "name": p.name, "language": "rs", "temperature": 0.2, "top_p": 0.95,
            "max_tokens": 512, "prompt": p.prompt, "tests": p.tests,
            "completions": completions, "stop_tokens": p.stop_tokens,
        })
        .to_string()
    }

    #[test]
    fn jsonl_keeps_order_and_groups_by_problem() {
        let text = "{\"name\":\"b\",\"completion\":\"1\"}\n{\"name\":\"a\",\"completion\":\"2\"}\n\n{\"name\":\"b\",\"completion\":\"3\"}\n";
        let c = Completions::parse_jsonl(Path::new("c.jsonl"), text).unwrap();
        let problems = [problem("a"), problem("b"), problem("c")];
        let grouped = c.per_problem(&problems).unwrap();
        assert_eq!(grouped, vec![vec!["2"], vec!["1", "3"], vec![]]);
    }

    #[test]
    fn jsonl_errors_name_line_and_field() {
        let err = |text: &str| {
            Completions::parse_jsonl(Path::new("c.jsonl"), text)
                .and_then(|c| c.per_problem(&[problem("a")]).map(|_| ()))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err("{\"name\":\"a\"}"),
            "c.jsonl:1: `completion`: is missing"
        );
        assert_eq!(
            err("{\"name\":\"a\",\"completion\":\"\"}\n{\"name\":\"z\",\"completion\":\"\"}"),
            "c.jsonl:2: `name`: `z` is not a problem of the set"
        );
    }

    #[test]
    fn reads_multiple_output_plain_and_gzipped_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (problem("a"), problem("b"));
        std::fs::write(dir.path().join("b.json"), multiple_file(&b, &["b1", "b2"])).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(multiple_file(&a, &["a1"]).as_bytes()).unwrap();
        std::fs::write(dir.path().join("a.json.gz"), gz.finish().unwrap()).unwrap();
        // The evaluator's own results files are not completions.
        std::fs::write(dir.path().join("a.results.json"), "not read").unwrap();
        let c = Completions::load(dir.path(), &[a.clone(), b.clone()]).unwrap();
        let names: Vec<_> = c
            .rows
            .iter()
            .map(|r| (r.name.as_str(), r.completion.as_str()))
            .collect();
        assert_eq!(names, vec![("a", "a1"), ("b", "b1"), ("b", "b2")]);
    }

    #[test]
    fn a_multiple_file_for_another_prompt_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut other = problem("a");
        other.tests = "}\nfn main() { assert!(false); }\n".to_owned();
        let file = dir.path().join("a.json");
        std::fs::write(&file, multiple_file(&other, &["x"])).unwrap();
        let err = Completions::load(dir.path(), &[problem("a")])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "{}: `tests`: differs from problem `a` of the set",
                file.display()
            )
        );
        std::fs::write(&file, "{\"name\":\"a\"}").unwrap();
        let err = Completions::load(dir.path(), &[problem("a")])
            .unwrap_err()
            .to_string();
        assert_eq!(err, format!("{}: `language`: is missing", file.display()));
    }
}

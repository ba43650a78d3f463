//! Problem sets in MultiPL-E's schema: a JSONL file, one problem a line,
//! with `name`, `language`, `prompt`, `tests` and `stop_tokens`. Other
//! fields (`doctests`, `original`, ...) are ignored, as MultiPL-E's
//! evaluator ignores them.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::SuiteError;

/// One problem. Invariant: `name` is not empty and unique in its set, and
/// `language` is Rust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub name: String,
    pub prompt: String,
    pub tests: String,
    /// In order. Empty means the completion is never cut.
    pub stop_tokens: Vec<String>,
}

/// The language names MultiPL-E's evaluator sends to its Rust evaluator.
const RUST_LANGUAGES: [&str; 2] = ["rs", "rust"];

/// Reads a problem set. Blank lines are skipped; anything else that is not
/// a problem is an error naming the file, the line and the field.
pub fn load_problems(file: &Path) -> Result<Vec<Problem>, SuiteError> {
    let text = crate::support::input::read_to_string(file).map_err(|source| SuiteError::Read {
        file: file.to_path_buf(),
        source,
    })?;
    parse_problems(file, &text)
}

/// [`load_problems`] on text already read; `file` names it in errors.
pub fn parse_problems(file: &Path, text: &str) -> Result<Vec<Problem>, SuiteError> {
    let mut problems = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (index, line) in text.lines().enumerate() {
        let at = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let obj = object_line(file, at, line)?;
        let problem = problem_from(&obj, file, Some(at))?;
        if let Some(first) = seen.insert(problem.name.clone(), at) {
            return Err(SuiteError::invalid(
                file,
                Some(at),
                Some("name"),
                format!("`{}` is already the name of line {first}", problem.name),
            ));
        }
        problems.push(problem);
    }
    if problems.is_empty() {
        return Err(SuiteError::invalid(file, None, None, "holds no problem"));
    }
    Ok(problems)
}

/// One JSONL line as a JSON object.
pub(crate) fn object_line(
    file: &Path,
    at: usize,
    line: &str,
) -> Result<Map<String, Value>, SuiteError> {
    match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(obj)) => Ok(obj),
        Ok(_) => Err(SuiteError::invalid(
            file,
            Some(at),
            None,
            "not a JSON object",
        )),
        Err(e) => Err(SuiteError::invalid(
            file,
            Some(at),
            None,
            format!("not JSON: {e}"),
        )),
    }
}

/// The problem fields of one object (a problem line, or a MultiPL-E
/// completions file, which carries its problem).
pub(crate) fn problem_from(
    obj: &Map<String, Value>,
    file: &Path,
    at: Option<usize>,
) -> Result<Problem, SuiteError> {
    let name = string_field(obj, "name", file, at)?;
    if name.is_empty() {
        return Err(SuiteError::invalid(file, at, Some("name"), "is empty"));
    }
    let language = string_field(obj, "language", file, at)?;
    if !RUST_LANGUAGES.contains(&language.as_str()) {
        return Err(SuiteError::invalid(
            file,
            at,
            Some("language"),
            format!("is `{language}`; assay runs Rust problems (`rs`)"),
        ));
    }
    Ok(Problem {
        name,
        prompt: string_field(obj, "prompt", file, at)?,
        tests: string_field(obj, "tests", file, at)?,
        stop_tokens: string_list(obj, "stop_tokens", file, at)?,
    })
}

pub(crate) fn string_field(
    obj: &Map<String, Value>,
    key: &'static str,
    file: &Path,
    at: Option<usize>,
) -> Result<String, SuiteError> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(SuiteError::invalid(file, at, Some(key), "is not a string")),
        None => Err(SuiteError::invalid(file, at, Some(key), "is missing")),
    }
}

pub(crate) fn string_list(
    obj: &Map<String, Value>,
    key: &'static str,
    file: &Path,
    at: Option<usize>,
) -> Result<Vec<String>, SuiteError> {
    let Some(value) = obj.get(key) else {
        return Err(SuiteError::invalid(file, at, Some(key), "is missing"));
    };
    let not_list = || SuiteError::invalid(file, at, Some(key), "is not a list of strings");
    let Value::Array(items) = value else {
        return Err(not_list());
    };
    items
        .iter()
        .map(|v| v.as_str().map(str::to_owned).ok_or_else(not_list))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Problem>, String> {
        parse_problems(Path::new("p.jsonl"), text).map_err(|e| e.to_string())
    }

    const GOOD: &str = r#"{"name":"a","language":"rs","prompt":"fn a() -> i32 {\n","tests":"}\nfn main() {}\n","stop_tokens":["\n}"],"doctests":"x"}"#;

    #[test]
    fn reads_problems_and_ignores_other_fields() {
        let text = format!("{GOOD}\n\n{}\n", GOOD.replace("\"a\"", "\"b\""));
        let problems = parse(&text).unwrap();
        assert_eq!(problems.len(), 2);
        assert_eq!(problems[0].name, "a");
        assert_eq!(problems[1].name, "b");
        assert_eq!(problems[0].stop_tokens, vec!["\n}".to_owned()]);
        assert_eq!(problems[0].prompt, "fn a() -> i32 {\n");
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let check = |text: &str, expect: &str| assert_eq!(parse(text).unwrap_err(), expect);
        check(
            &format!("{GOOD}\n{{\"name\": 3}}"),
            "p.jsonl:2: `name`: is not a string",
        );
        check(
            &GOOD.replace(",\"stop_tokens\":[\"\\n}\"]", ""),
            "p.jsonl:1: `stop_tokens`: is missing",
        );
        check(
            &GOOD.replace("[\"\\n}\"]", "[1]"),
            "p.jsonl:1: `stop_tokens`: is not a list of strings",
        );
        check(
            &GOOD.replace("\"rs\"", "\"py\""),
            "p.jsonl:1: `language`: is `py`; assay runs Rust problems (`rs`)",
        );
        check(
            &format!("{GOOD}\n{GOOD}"),
            "p.jsonl:2: `name`: `a` is already the name of line 1",
        );
        check("[1]", "p.jsonl:1: not a JSON object");
        check("\n\n", "p.jsonl: holds no problem");
        assert!(parse("{oops")
            .unwrap_err()
            .starts_with("p.jsonl:1: not JSON: "));
    }

    #[test]
    fn rust_is_also_a_rust_language() {
        assert_eq!(parse(&GOOD.replace("\"rs\"", "\"rust\"")).unwrap().len(), 1);
    }
}

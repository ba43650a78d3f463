//! Harness of the `shellwords` task: POSIX shell word splitting.
//!
//! The crate root is glob-imported into every candidate, so it exports only
//! what the task contract needs: [`Entry`], [`Case`], [`load_cases`],
//! [`input_line`], [`run_input`] and [`judge`]. A candidate's run gets only
//! inputs; the expected values are read and compared by the judge, which
//! links no candidate.

use serde::Deserialize;

/// The signature every candidate's `split_words` must have.
pub type Entry = fn(&str) -> Option<Vec<String>>;

/// One oracle case: a command line and what `shlex.split` made of it
/// (`None` when it raised `ValueError`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    pub input: String,
    #[serde(deserialize_with = "present")]
    pub expected: Option<Vec<String>>,
}

/// Makes `expected` a required key: `null` is a value (None), a missing key
/// is an error (serde would otherwise read a missing Option as None).
fn present<'de, D>(de: D) -> Result<Option<Vec<String>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Option::<Vec<String>>::deserialize(de)
}

/// Parses the whole cases file, one JSON object a line. Blank lines are
/// skipped, as assay skips them when it counts cases. An error names the
/// 1-based line.
pub fn load_cases(text: &str) -> Result<Vec<Case>, String> {
    let mut cases = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let case: Case =
            serde_json::from_str(line).map_err(|e| format!("line {}: {}", i + 1, e))?;
        cases.push(case);
    }
    Ok(cases)
}

/// A case's input as a candidate's run receives it: a JSON string.
pub fn input_line(case: &Case) -> String {
    serde_json::to_string(&case.input).expect("a string always serializes")
}

/// Runs the candidate on one encoded input and encodes its answer (JSON:
/// an array of words, or `null`). A panic of the candidate propagates.
pub fn run_input(entry: Entry, line: &str) -> Result<String, String> {
    let input: String = serde_json::from_str(line).map_err(|e| e.to_string())?;
    serde_json::to_string(&entry(&input)).map_err(|e| e.to_string())
}

/// True when the encoded answer is exactly the expected one (an answer that
/// does not decode fails).
pub fn judge(case: &Case, output: &str) -> bool {
    serde_json::from_str::<Option<Vec<String>>>(output).is_ok_and(|got| got == case.expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(line: &str) -> Option<Vec<String>> {
        if line.contains('\'') || line.contains('"') || line.contains('\\') {
            return None;
        }
        Some(line.split([' ', '\t', '\r', '\n']).filter(|w| !w.is_empty()).map(String::from).collect())
    }

    #[test]
    fn loads_words_and_null() {
        let text = "{\"name\": \"a\", \"input\": \"x y\", \"expected\": [\"x\", \"y\"]}\n\
                    {\"name\": \"b\", \"input\": \"'x\", \"expected\": null}\n";
        let cases = load_cases(text).unwrap();
        assert_eq!(cases.len(), 2);
        assert_eq!(cases[0].expected, Some(vec!["x".to_string(), "y".to_string()]));
        assert_eq!(cases[1].expected, None);
        assert_eq!(cases[1].input, "'x");
    }

    #[test]
    fn empty_file_has_no_cases() {
        assert_eq!(load_cases("").unwrap(), vec![]);
    }

    #[test]
    fn error_names_the_line() {
        let text = "{\"name\": \"a\", \"input\": \"\", \"expected\": []}\nnot json\n";
        let err = load_cases(text).unwrap_err();
        assert!(err.starts_with("line 2:"), "{err}");
    }

    #[test]
    fn missing_expected_is_an_error() {
        let err = load_cases("{\"name\": \"a\", \"input\": \"x\"}").unwrap_err();
        assert!(err.starts_with("line 1:") && err.contains("expected"), "{err}");
    }

    #[test]
    fn unknown_key_is_an_error() {
        let text = "{\"name\": \"a\", \"input\": \"x\", \"expected\": [\"x\"], \"extra\": 1}";
        assert!(load_cases(text).unwrap_err().starts_with("line 1:"));
    }

    #[test]
    fn blank_lines_are_skipped_and_bad_lines_named() {
        let case = "{\"name\": \"a\", \"input\": \"x\", \"expected\": [\"x\"]}";
        assert_eq!(load_cases(&format!("{case}\n\n{case}\n")).unwrap().len(), 2);
        assert!(load_cases(&format!("{case}\n\n{{}}\n")).unwrap_err().starts_with("line 3:"));
    }

    /// What the runner and the judge do together, across the two processes.
    fn run_case(entry: Entry, case: &Case) -> bool {
        judge(case, &run_input(entry, &input_line(case)).unwrap())
    }

    #[test]
    fn run_case_compares_exactly() {
        let case = |input: &str, expected: Option<Vec<&str>>| Case {
            name: "t".into(),
            input: input.into(),
            expected: expected.map(|v| v.into_iter().map(String::from).collect()),
        };
        assert!(run_case(naive, &case("a  b", Some(vec!["a", "b"]))));
        assert!(run_case(naive, &case("", Some(vec![]))));
        assert!(!run_case(naive, &case("a b", Some(vec!["a b"]))));
        assert!(run_case(naive, &case("'a", None)));
        assert!(!run_case(naive, &case("'a'", Some(vec!["a"]))));
    }

    #[test]
    fn bundled_cases_load() {
        let text = include_str!("../../cases.jsonl");
        let cases = load_cases(text).unwrap();
        assert_eq!(cases.len(), text.lines().count());
        assert!(cases.len() >= 120);
    }
}

//! Harness of the `absolute` task: the width equation of CSS 2.1 section
//! 10.3.7 for absolutely positioned, non-replaced elements.
//!
//! Every public item of this crate root is glob-imported into every
//! candidate, so the root holds only the task's types and the contract of
//! docs/tasks.md: `Entry`, `Case`, `load_cases`, `input_line`, `run_input`
//! and `judge`. A candidate's run gets only inputs (`run_input`); the
//! expected values are read and compared by the judge, which links no
//! candidate.

use serde::{Deserialize, Serialize};

/// A length that may be `auto`. In JSON: `"auto"` or `{"px": 12.5}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Length {
    Auto,
    Px(f64),
}

/// The `direction` of the containing block (and of the element that
/// establishes the static-position containing block; the task uses one value
/// for both). In JSON: `"ltr"` or `"rtl"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Ltr,
    Rtl,
}

/// The computed values the width equation starts from. All lengths in px.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Width of the containing block (its padding box).
    pub containing_width: f64,
    pub direction: Direction,
    pub left: Length,
    pub right: Length,
    pub width: Length,
    pub margin_left: Length,
    pub margin_right: Length,
    pub padding_left: f64,
    pub padding_right: f64,
    pub border_left: f64,
    pub border_right: f64,
    /// The value `left` takes when set to the static position (ltr).
    pub static_left: f64,
    /// The value `right` takes when set to the static position (rtl).
    pub static_right: f64,
    /// Preferred width of the content (no line breaks but explicit ones).
    pub preferred_width: f64,
    /// Preferred minimum width of the content (every possible line break).
    pub preferred_min_width: f64,
}

/// The used values. The equation holds:
/// `left + margin_left + border_left + padding_left + width + padding_right
/// + border_right + margin_right + right == containing_width`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Output {
    pub left: f64,
    pub width: f64,
    pub right: f64,
    pub margin_left: f64,
    pub margin_right: f64,
}

/// The signature every candidate's entry function must have.
pub type Entry = fn(&Input) -> Output;

/// One oracle case, one line of `cases.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    pub input: Input,
    pub expected: Output,
}

/// Parses the whole cases file (JSONL). Blank lines are skipped; an error
/// names the 1-based line.
pub fn load_cases(text: &str) -> Result<Vec<Case>, String> {
    let mut cases = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let case: Case =
            serde_json::from_str(line).map_err(|err| format!("line {}: {}", index + 1, err))?;
        cases.push(case);
    }
    Ok(cases)
}

/// A case's input as a candidate's run receives it: JSON, one line.
pub fn input_line(case: &Case) -> String {
    serde_json::to_string(&case.input).expect("an input always serializes")
}

/// Runs the candidate on one encoded input and encodes its answer (JSON;
/// a NaN or infinite field becomes `null`, which never matches). A panic of
/// the candidate propagates.
pub fn run_input(entry: Entry, line: &str) -> Result<String, String> {
    let input: Input = serde_json::from_str(line).map_err(|e| e.to_string())?;
    serde_json::to_string(&entry(&input)).map_err(|e| e.to_string())
}

/// True when every field of the encoded answer is within 1e-6 of the
/// expected one (NaN never matches; an answer that does not decode fails).
pub fn judge(case: &Case, output: &str) -> bool {
    let Ok(got) = serde_json::from_str::<Output>(output) else {
        return false;
    };
    matches(&got, &case.expected)
}

fn matches(got: &Output, want: &Output) -> bool {
    [
        (got.left, want.left),
        (got.width, want.width),
        (got.right, want.right),
        (got.margin_left, want.margin_left),
        (got.margin_right, want.margin_right),
    ]
    .iter()
    .all(|&(got, want)| (got - want).abs() <= 1e-6)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"name": "rule 5", "input": {"containing_width": 300.0, "direction": "ltr", "left": {"px": 10.0}, "right": {"px": 20.0}, "width": "auto", "margin_left": {"px": 0.0}, "margin_right": "auto", "padding_left": 1.0, "padding_right": 2.0, "border_left": 3.0, "border_right": 4.0, "static_left": 0.0, "static_right": 0.0, "preferred_width": 50.0, "preferred_min_width": 10.0}, "expected": {"left": 10.0, "width": 260.0, "right": 20.0, "margin_left": 0.0, "margin_right": 0.0}}"#;

    fn right_answer(_: &Input) -> Output {
        Output { left: 10.0, width: 260.0, right: 20.0, margin_left: 0.0, margin_right: 0.0 }
    }

    fn off_by_a_little(_: &Input) -> Output {
        Output { left: 10.0, width: 260.0 + 1e-5, right: 20.0, margin_left: 0.0, margin_right: 0.0 }
    }

    fn within_tolerance(_: &Input) -> Output {
        Output { left: 10.0, width: 260.0 + 1e-7, right: 20.0, margin_left: 0.0, margin_right: 0.0 }
    }

    fn nan_answer(_: &Input) -> Output {
        Output { left: 10.0, width: f64::NAN, right: 20.0, margin_left: 0.0, margin_right: 0.0 }
    }

    fn panics(_: &Input) -> Output {
        panic!("candidate panicked")
    }

    /// What the runner and the judge do together, across the two processes.
    fn run_case(entry: Entry, case: &Case) -> bool {
        judge(case, &run_input(entry, &input_line(case)).unwrap())
    }

    #[test]
    fn loads_one_case_and_skips_blank_lines() {
        let text = format!("\n{LINE}\n   \n{LINE}\n");
        let cases = load_cases(&text).unwrap();
        assert_eq!(cases.len(), 2);
        assert_eq!(cases[0].name, "rule 5");
        assert_eq!(cases[0].input.width, Length::Auto);
        assert_eq!(cases[0].input.left, Length::Px(10.0));
        assert_eq!(cases[0].input.direction, Direction::Ltr);
        assert_eq!(cases[0].expected.width, 260.0);
    }

    #[test]
    fn error_names_the_one_based_line() {
        let text = format!("{LINE}\n{LINE}\n{{\"name\": 1}}\n");
        let err = load_cases(&text).unwrap_err();
        assert!(err.starts_with("line 3: "), "{err}");
    }

    #[test]
    fn unknown_field_is_an_error() {
        let text = LINE.replace("\"name\"", "\"nmae\"");
        assert!(load_cases(&text).unwrap_err().starts_with("line 1: "));
    }

    #[test]
    fn json_round_trips_in_snake_case() {
        let case = &load_cases(LINE).unwrap()[0];
        let json = serde_json::to_string(case).unwrap();
        assert!(json.contains(r#""width":"auto""#), "{json}");
        assert!(json.contains(r#""left":{"px":10.0}"#), "{json}");
        assert!(json.contains(r#""direction":"ltr""#), "{json}");
        assert_eq!(&load_cases(&json).unwrap()[0], case);
    }

    #[test]
    fn comparison_uses_the_tolerance() {
        let case = &load_cases(LINE).unwrap()[0];
        assert!(run_case(right_answer, case));
        assert!(run_case(within_tolerance, case));
        assert!(!run_case(off_by_a_little, case));
    }

    #[test]
    fn nan_never_matches() {
        let mut case = load_cases(LINE).unwrap().remove(0);
        assert!(!run_case(nan_answer, &case));
        case.expected.width = f64::NAN;
        assert!(!run_case(nan_answer, &case));
    }

    #[test]
    fn an_answer_that_does_not_decode_fails() {
        let case = &load_cases(LINE).unwrap()[0];
        assert!(!judge(case, "not json"));
        assert!(!judge(case, r#"{"left": 10.0}"#));
        assert!(run_input(right_answer, "{}").is_err());
    }

    #[test]
    #[should_panic(expected = "candidate panicked")]
    fn a_candidate_panic_propagates() {
        let case = &load_cases(LINE).unwrap()[0];
        run_case(panics, case);
    }
}

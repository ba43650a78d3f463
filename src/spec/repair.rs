//! `[repair]`: the rounds that send a round's failures back to the pools
//! (issue 28), and which of the task's cases a model may see.
//!
//! Plain settings and their validation only; choosing parents and
//! assembling prompts is `crate::repair`'s.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use clap::ValueEnum;
use serde::Deserialize;
use strum::{Display, EnumString, IntoStaticStr};

use super::bounds::{
    check_candidates, check_rounds, in_range, MAX_CASE_CHARS, MAX_ERROR_CHARS, MAX_FEEDBACK_ITEMS,
    MAX_PARENTS,
};
use super::validator::{read, Validator};
use super::SpecError;

/// The template a task gets when its `[repair]` names none: short, exact,
/// and asking for the whole function in one fence, which is what the
/// extractor reads best.
pub const DEFAULT_TEMPLATE: &str = include_str!("repair_template.md");

/// A task's repair settings (`[repair]`, every key optional).
#[derive(Debug, Clone, PartialEq)]
pub struct Repair {
    /// Repair rounds after the first draw (`rounds`, default 0: none).
    pub rounds: u32,
    /// Candidates drawn per repair round (`candidates`); `None`: the
    /// batch's own `n`.
    pub candidates: Option<usize>,
    pub parents: ParentChoice,
    /// What the prompts carry besides the parent's code.
    pub feedback: Feedback,
    pub limits: FeedbackLimits,
    /// When the rounds stop before the last.
    pub stop: StopWhen,
    pub template: Template,
    /// The cases a model may see; every other case stays in the judge.
    pub visible: VisibleCases,
}

/// Which failing candidates become the next round's parents: the best
/// `best_failing` that ran (by cases passed) and the `compile_failures`
/// that did not build with the fewest errors. Never both zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParentChoice {
    pub best_failing: usize,
    pub compile_failures: usize,
}

/// What a repair prompt tells the model about its parent (`feedback`;
/// stored as the snake_case name, and the flag's `errors-only` is taken
/// too).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Display, EnumString, IntoStaticStr, ValueEnum,
)]
#[strum(
    serialize_all = "snake_case",
    parse_err_ty = String,
    parse_err_fn = not_feedback
)]
pub enum Feedback {
    /// Compiler errors, crashes, and the failed visible cases (inputs,
    /// expected and actual outputs); for a suite, the failed assert's line
    /// and its panic message.
    #[default]
    Full,
    /// Compiler errors and how a run ended only: no test or case text.
    #[strum(to_string = "errors_only", serialize = "errors-only")]
    ErrorsOnly,
}

/// Hard caps on how much feedback text one prompt carries, so a parent
/// with a thousand errors costs a bounded prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedbackLimits {
    /// Compiler errors shown, first ones first (`max_errors`).
    pub errors: usize,
    /// Characters of compiler error text, all shown errors together
    /// (`max_error_chars`).
    pub error_chars: usize,
    /// Failed visible cases shown (`max_cases`).
    pub cases: usize,
    /// Characters of one case's input, expected or actual value
    /// (`max_case_chars`).
    pub case_chars: usize,
}

/// When repair rounds stop before the last one (`stop`; the snake_case
/// name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Display, EnumString, IntoStaticStr)]
#[strum(
    serialize_all = "snake_case",
    parse_err_ty = String,
    parse_err_fn = not_stop_when
)]
pub enum StopWhen {
    /// Once a candidate passes every case (`all_pass`).
    #[default]
    AllPass,
    /// Once a candidate passes more cases than the committed one
    /// (`beats_committed`).
    BeatsCommitted,
    /// Every round runs (`never`).
    Never,
}

/// The positions (0-based, file order) of the cases a model may see,
/// ascending. Empty: every case is hidden, and repair works from compiler
/// errors and crashes only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VisibleCases(Vec<usize>);

/// A repair prompt's template: text with `{{placeholder}}`s, checked when
/// the spec loads, so an unknown placeholder never reaches a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// The file it was read from; `None`: [`DEFAULT_TEMPLATE`].
    pub path: Option<PathBuf>,
    pieces: Vec<Piece>,
}

/// What a template's text is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Slot(Slot),
}

/// A template's placeholders, named in it by their lowercase names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum Slot {
    /// `{{prompt}}`: the task's own prompt.
    Prompt,
    /// `{{code}}`: the parent's source (required).
    Code,
    /// `{{summary}}`: one line on how the parent fared.
    Summary,
    /// `{{errors}}`: the parent's first compiler errors, or empty.
    Errors,
    /// `{{cases}}`: the parent's failed visible cases, or empty.
    Cases,
}

impl Slot {
    pub const ALL: [Slot; 5] = [
        Slot::Prompt,
        Slot::Code,
        Slot::Summary,
        Slot::Errors,
        Slot::Cases,
    ];

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl Default for Repair {
    fn default() -> Repair {
        Repair {
            rounds: 0,
            candidates: None,
            parents: ParentChoice {
                best_failing: 4,
                compile_failures: 4,
            },
            feedback: Feedback::Full,
            limits: FeedbackLimits::default(),
            stop: StopWhen::AllPass,
            template: Template::default(),
            visible: VisibleCases::default(),
        }
    }
}

impl Default for FeedbackLimits {
    /// Enough for a model to see what went wrong: rustc's first errors are
    /// the causes, the rest mostly their echoes.
    fn default() -> FeedbackLimits {
        FeedbackLimits {
            errors: 3,
            error_chars: 2000,
            cases: 3,
            case_chars: 600,
        }
    }
}

impl Default for Template {
    fn default() -> Template {
        Template {
            path: None,
            pieces: parse_template(DEFAULT_TEMPLATE).expect("the default template parses"),
        }
    }
}

impl Template {
    /// The template's pieces, in order.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// Parses a template's text; the error names the line and says why.
    pub fn parse(text: &str, path: Option<PathBuf>) -> Result<Template, (usize, String)> {
        Ok(Template {
            path,
            pieces: parse_template(text)?,
        })
    }
}

/// Cuts `text` at its `{{name}}` placeholders. A `{{` that does not open a
/// placeholder (`{{ x`, code) is text; an unknown name is refused with its
/// line; `{{code}}` must be there, or a model would be asked to repair
/// code it never sees.
fn parse_template(text: &str) -> Result<Vec<Piece>, (usize, String)> {
    let mut pieces = Vec::new();
    let mut rest = text;
    let mut done = 0;
    let mut literal = String::new();
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if name_len == 0 || !after[name_len..].starts_with("}}") {
            literal.push_str(&rest[..open + 2]);
            done += open + 2;
            rest = after;
            continue;
        }
        let name = &after[..name_len];
        let Some(slot) = Slot::ALL.into_iter().find(|s| s.as_str() == name) else {
            let line = super::line_of(text, done + open);
            let known: Vec<String> = Slot::ALL
                .iter()
                .map(|s| format!("{{{{{}}}}}", s.as_str()))
                .collect();
            return Err((
                line,
                format!(
                    "unknown placeholder `{{{{{name}}}}}` (known: {})",
                    known.join(", ")
                ),
            ));
        };
        literal.push_str(&rest[..open]);
        if !literal.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut literal)));
        }
        pieces.push(Piece::Slot(slot));
        let used = open + 2 + name_len + 2;
        done += used;
        rest = &rest[used..];
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        pieces.push(Piece::Text(literal));
    }
    if !pieces.contains(&Piece::Slot(Slot::Code)) {
        return Err((
            1,
            "has no `{{code}}`: the model would not see what to repair".into(),
        ));
    }
    Ok(pieces)
}

impl VisibleCases {
    /// The visible positions, ascending.
    pub fn positions(&self) -> &[usize] {
        &self.0
    }

    pub fn contains(&self, pos: usize) -> bool {
        self.0.binary_search(&pos).is_ok()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl StopWhen {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

fn not_stop_when(s: &str) -> String {
    format!("`{s}`: expected `all_pass`, `beats_committed` or `never`")
}

impl Feedback {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

fn not_feedback(s: &str) -> String {
    format!("`{s}`: expected `full` or `errors_only`")
}

/// `[repair]` as written. Spanned, so that a bad value names its line.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRepair {
    rounds: Option<toml::Spanned<u64>>,
    candidates: Option<toml::Spanned<usize>>,
    best_failing: Option<toml::Spanned<usize>>,
    compile_failures: Option<toml::Spanned<usize>>,
    feedback: Option<toml::Spanned<String>>,
    stop: Option<toml::Spanned<String>>,
    template: Option<toml::Spanned<PathBuf>>,
    visible: Option<toml::Spanned<RawVisible>>,
    max_errors: Option<toml::Spanned<usize>>,
    max_error_chars: Option<toml::Spanned<usize>>,
    max_cases: Option<toml::Spanned<usize>>,
    max_case_chars: Option<toml::Spanned<usize>>,
}

/// `visible = 12` (the first twelve cases in file order) or
/// `visible = ["name", ...]` (cases by name).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawVisible {
    Count(usize),
    Names(Vec<String>),
}

/// What validating `[repair]` needs to know of the cases.
pub(super) struct CaseFacts<'a> {
    pub(super) path: &'a Path,
    pub(super) names: &'a [Option<String>],
    /// `admit.guard`'s positions.
    pub(super) guard: &'a [usize],
}

impl Validator {
    /// The `[repair]` table, each number held to `spec::bounds`.
    pub(super) fn repair(&self, raw: &RawRepair, cases: &CaseFacts) -> Result<Repair, SpecError> {
        let default = Repair::default();
        let number = |key: &'static str, v: &Option<toml::Spanned<usize>>, min, max, or| match v {
            Some(v) => in_range(*v.get_ref() as u64, min, max)
                .map(|n| n as usize)
                .map_err(|m| self.invalid_at(key, v.span().start, m)),
            None => Ok(or),
        };
        let rounds = match &raw.rounds {
            Some(v) => check_rounds(*v.get_ref())
                .map_err(|m| self.invalid_at("repair.rounds", v.span().start, m))?,
            None => 0,
        };
        let candidates = match &raw.candidates {
            Some(v) => Some(
                check_candidates(*v.get_ref())
                    .map_err(|m| self.invalid_at("repair.candidates", v.span().start, m))?,
            ),
            None => None,
        };
        let parents = ParentChoice {
            best_failing: number(
                "repair.best_failing",
                &raw.best_failing,
                0,
                MAX_PARENTS,
                default.parents.best_failing,
            )?,
            compile_failures: number(
                "repair.compile_failures",
                &raw.compile_failures,
                0,
                MAX_PARENTS,
                default.parents.compile_failures,
            )?,
        };
        if parents.best_failing == 0 && parents.compile_failures == 0 {
            let at = raw
                .best_failing
                .as_ref()
                .or(raw.compile_failures.as_ref())
                .map_or(0, |v| v.span().start);
            return Err(self.invalid_at(
                "repair.best_failing",
                at,
                "`best_failing` and `compile_failures` are both 0: no candidate could be a parent"
                    .into(),
            ));
        }
        let d = default.limits;
        let limits = FeedbackLimits {
            errors: number(
                "repair.max_errors",
                &raw.max_errors,
                1,
                MAX_FEEDBACK_ITEMS,
                d.errors,
            )?,
            error_chars: number(
                "repair.max_error_chars",
                &raw.max_error_chars,
                100,
                MAX_ERROR_CHARS,
                d.error_chars,
            )?,
            cases: number(
                "repair.max_cases",
                &raw.max_cases,
                0,
                MAX_FEEDBACK_ITEMS,
                d.cases,
            )?,
            case_chars: number(
                "repair.max_case_chars",
                &raw.max_case_chars,
                20,
                MAX_CASE_CHARS,
                d.case_chars,
            )?,
        };
        Ok(Repair {
            rounds,
            candidates,
            parents,
            feedback: self.setting("repair.feedback", &raw.feedback)?,
            limits,
            stop: self.setting("repair.stop", &raw.stop)?,
            template: self.template(raw.template.as_ref())?,
            visible: self.visible(raw.visible.as_ref(), cases)?,
        })
    }

    /// A setting spelled as its stable string, or its default.
    fn setting<T: FromStr<Err = String> + Default>(
        &self,
        key: &'static str,
        raw: &Option<toml::Spanned<String>>,
    ) -> Result<T, SpecError> {
        match raw {
            Some(v) => v
                .get_ref()
                .parse()
                .map_err(|m| self.invalid_at(key, v.span().start, m)),
            None => Ok(T::default()),
        }
    }

    fn template(&self, raw: Option<&toml::Spanned<PathBuf>>) -> Result<Template, SpecError> {
        let Some(rel) = raw else {
            return Ok(Template::default());
        };
        let path = self.file_at("repair.template", rel.get_ref())?;
        let text = read(&path)?;
        Template::parse(&text, Some(path.clone())).map_err(|(line, message)| SpecError::Invalid {
            file: path,
            line: Some(line),
            key: "repair.template",
            message,
        })
    }

    /// The visible cases: a count (the first ones in file order) or names.
    /// At least one case stays hidden, and so does every guard case:
    /// admission must judge on cases the model never saw, and a guard the
    /// model was shown can be answered by rote.
    fn visible(
        &self,
        raw: Option<&toml::Spanned<RawVisible>>,
        cases: &CaseFacts,
    ) -> Result<VisibleCases, SpecError> {
        let Some(raw) = raw else {
            return Ok(VisibleCases::default());
        };
        let at = raw.span().start;
        let total = cases.names.len();
        let mut positions = match raw.get_ref() {
            RawVisible::Count(n) => (0..*n).collect::<Vec<usize>>(),
            RawVisible::Names(names) => {
                let mut positions = Vec::with_capacity(names.len());
                for name in names {
                    let pos = cases
                        .names
                        .iter()
                        .position(|n| n.as_deref() == Some(name.as_str()))
                        .ok_or_else(|| {
                            self.invalid_at(
                                "repair.visible",
                                at,
                                format!("no case named `{name}` in {}", cases.path.display()),
                            )
                        })?;
                    if positions.contains(&pos) {
                        return Err(self.invalid_at(
                            "repair.visible",
                            at,
                            format!("case `{name}` is named twice"),
                        ));
                    }
                    positions.push(pos);
                }
                positions
            }
        };
        positions.sort_unstable();
        if positions.len() >= total {
            return Err(self.invalid_at(
                "repair.visible",
                at,
                format!(
                    "would show all {total} cases of {}: keep at least one hidden, since \
                     admission must judge cases the model never saw",
                    cases.path.display()
                ),
            ));
        }
        if let Some(g) = cases.guard.iter().find(|g| positions.contains(g)) {
            let name = cases.names[*g].as_deref().unwrap_or("?");
            return Err(self.invalid_at(
                "repair.visible",
                at,
                format!(
                    "case `{name}` is an `admit.guard` case: a guard the model has seen \
                     guards nothing, keep it hidden"
                ),
            ));
        }
        Ok(VisibleCases(positions))
    }
}

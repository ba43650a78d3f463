//! The program rule, MultiPL-E's byte for byte.
//!
//! MultiPL-E cuts a completion at the first stop token when it generates it
//! (`stop_at_stop_token` in `multipl_e/completions.py`: the smallest index
//! at which any stop token occurs; the completion alone is searched, never
//! the prompt, which holds stop tokens of its own), and its evaluator builds
//! `prompt + completion + "\n" + tests` (`cached_eval_script` in
//! `evaluation/src/main.py`). Cutting is idempotent, so completions that
//! MultiPL-E already cut come out unchanged.

use clap::ValueEnum;
use serde::Serialize;
use strum::{Display, EnumString, IntoStaticStr};

use super::Problem;

/// How a completion becomes a program (`suite run --mode`, stored with
/// the suite as its lowercase name).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Display, EnumString, IntoStaticStr, ValueEnum,
)]
#[serde(rename_all = "lowercase")]
#[strum(
    serialize_all = "lowercase",
    parse_err_ty = String,
    parse_err_fn = not_a_program_mode
)]
pub enum ProgramMode {
    /// A base model's continuation of the prompt, cut at its stop tokens
    /// (`/v1/completions`, as MultiPL-E draws) ([`completion_program`]).
    Completion,
    /// A chat reply holding the whole function, asked for in a fence and
    /// extracted from it ([`chat_program`]).
    Chat,
}

impl ProgramMode {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The program of `text` (a completion, or the code extracted from a
    /// chat reply) for `problem`.
    pub fn program(self, problem: &Problem, text: &str) -> String {
        match self {
            ProgramMode::Completion => completion_program(problem, text),
            ProgramMode::Chat => chat_program(problem, text),
        }
    }
}

fn not_a_program_mode(s: &str) -> String {
    format!("`{s}`: the mode is `completion` or `chat`")
}

/// Chat mode's prompt: the problem's prompt wrapped in a request for the
/// whole function in one Rust fence, which extraction then takes as it
/// takes any reply.
pub fn chat_prompt(problem: &Problem) -> String {
    format!(
        "Complete the following Rust function. Reply with the whole function \
         (its signature, its body and any helper it needs) in one ```rust code block, \
         and nothing else.\n\n```rust\n{}\n```\n",
        problem.prompt.trim_end()
    )
}

/// The entry's name: the last `fn NAME` of the prompt (the prompt ends with
/// the entry's signature, its body open). `None` when there is none.
pub fn entry_name(problem: &Problem) -> Option<String> {
    let at = problem.prompt.rfind("fn ")?;
    let name: String = problem.prompt[at + 3..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The completion up to the first occurrence of any stop token. An empty
/// list cuts nothing; an empty token occurs at 0 and cuts everything (as
/// Python's `str.find("")` does).
pub fn cut_at_stop_tokens<'a>(completion: &'a str, stop_tokens: &[String]) -> &'a str {
    let end = stop_tokens
        .iter()
        .filter_map(|t| completion.find(t.as_str()))
        .min()
        .unwrap_or(completion.len());
    &completion[..end]
}

/// Completion mode: prompt + the completion cut at the first stop token +
/// a newline + tests.
pub fn completion_program(problem: &Problem, completion: &str) -> String {
    let cut = cut_at_stop_tokens(completion, &problem.stop_tokens);
    let mut program =
        String::with_capacity(problem.prompt.len() + cut.len() + 1 + problem.tests.len());
    program.push_str(&problem.prompt);
    program.push_str(cut);
    program.push('\n');
    program.push_str(&problem.tests);
    program
}

/// Chat mode: the code extracted from a reply holds the whole function, so
/// it takes the place of prompt + completion, and the `}` that the tests
/// open with (it closes the prompt's function) is dropped with the
/// whitespace before it. Tests that do not open with `}` are kept whole.
pub fn chat_program(problem: &Problem, code: &str) -> String {
    let tests = problem
        .tests
        .trim_start()
        .strip_prefix('}')
        .unwrap_or(&problem.tests);
    let mut program = String::with_capacity(code.len() + 1 + tests.len());
    program.push_str(code);
    program.push('\n');
    program.push_str(tests);
    program
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(stop: &[&str]) -> Problem {
        Problem {
            name: "p".to_owned(),
            prompt: "/// Doubles.\nfn double(x: i32) -> i32 {\n".to_owned(),
            tests: "}\n\nfn main() {\n    let candidate = double;\n    assert_eq!(candidate(2), 4);\n}\n"
                .to_owned(),
            stop_tokens: stop.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn cuts_at_the_earliest_of_any_token() {
        let tokens = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let check = |c: &str, t: &[&str], expect: &str| {
            assert_eq!(cut_at_stop_tokens(c, &tokens(t)), expect)
        };
        check("    x * 2\n}\n\nfn helper() {}\n", &["\n}"], "    x * 2");
        check("a\n}b\nfn c", &["\nfn", "\n}"], "a");
        check("abc", &[], "abc");
        check("abc", &["zz"], "abc");
        check("abc", &[""], "");
        // An indented brace is not the stop token.
        check(
            "    if x {\n        1\n    }\n}",
            &["\n}"],
            "    if x {\n        1\n    }",
        );
        // Inside a string literal too: the cut does not know Rust.
        check(
            "    let s = \"a\n}\";\n    0\n",
            &["\n}"],
            "    let s = \"a",
        );
    }

    #[test]
    fn cutting_twice_changes_nothing() {
        let t = vec!["\n}".to_owned(), "\nfn".to_owned()];
        for c in ["a\n}b", "x\nfn y\n}", "plain", ""] {
            let once = cut_at_stop_tokens(c, &t);
            assert_eq!(cut_at_stop_tokens(once, &t), once);
        }
    }

    #[test]
    fn completion_mode_is_prompt_cut_newline_tests() {
        let p = problem(&["\n}"]);
        let program = completion_program(&p, "    x * 2\n}\n\nfn unused() {}\n");
        assert_eq!(
            program,
            "/// Doubles.\nfn double(x: i32) -> i32 {\n    x * 2\n}\n\nfn main() {\n    let candidate = double;\n    assert_eq!(candidate(2), 4);\n}\n"
        );
        // No stop tokens: nothing is cut.
        let p = problem(&[]);
        assert!(
            completion_program(&p, "    x * 2\n}\nfn unused() {}").contains("fn unused() {}\n}\n")
        );
    }

    #[test]
    fn chat_prompts_ask_for_the_whole_entry() {
        let p = problem(&["\n}"]);
        assert_eq!(entry_name(&p).as_deref(), Some("double"));
        let text = chat_prompt(&p);
        assert!(
            text.contains("```rust\n/// Doubles.\nfn double(x: i32) -> i32 {\n```"),
            "{text}"
        );
        let mut q = p.clone();
        q.prompt = "/// no function here\n".into();
        assert_eq!(entry_name(&q), None);
    }

    #[test]
    fn chat_mode_drops_the_tests_leading_brace() {
        let p = problem(&["\n}"]);
        let code = "fn double(x: i32) -> i32 {\n    x * 2\n}\n\nfn helper() {}";
        assert_eq!(
            chat_program(&p, code),
            format!("{code}\n\n\nfn main() {{\n    let candidate = double;\n    assert_eq!(candidate(2), 4);\n}}\n")
        );
        let mut q = p.clone();
        q.tests = "fn main() {}\n".to_owned();
        assert_eq!(chat_program(&q, "fn f() {}"), "fn f() {}\nfn main() {}\n");
    }
}

//! A repair prompt: the task's template filled in with one parent.

use super::feedback::Feedback;
use super::{Attempt, ShownCase};
use crate::spec::{Feedback as FeedbackMode, FeedbackLimits, Piece, Slot, Spec, Template};

/// What every prompt of a batch's rounds shares.
#[derive(Debug, Clone)]
pub struct PromptContext<'a> {
    /// The task's own prompt (`{{prompt}}`).
    pub task_prompt: &'a str,
    pub template: &'a Template,
    /// The task's visible cases: the only case text a prompt can carry.
    pub shown: &'a [ShownCase],
    pub mode: FeedbackMode,
    pub limits: FeedbackLimits,
}

impl<'a> PromptContext<'a> {
    /// A task's own settings; `mode` may come from a flag.
    pub fn of_spec(
        spec: &'a Spec,
        shown: &'a [ShownCase],
        mode: FeedbackMode,
    ) -> PromptContext<'a> {
        PromptContext {
            task_prompt: &spec.prompt,
            template: &spec.repair.template,
            shown,
            mode,
            limits: spec.repair.limits,
        }
    }
}

/// The prompt that asks for a repair of `parent`.
pub fn repair_prompt(ctx: &PromptContext, parent: &Attempt) -> String {
    let feedback = Feedback::of(parent, ctx.shown, ctx.mode, ctx.limits);
    fill(ctx.template, ctx.task_prompt, &parent.source, &feedback)
}

/// `template` filled in: the task's prompt, the parent's code and what
/// went wrong with it.
pub fn fill(template: &Template, task_prompt: &str, code: &str, feedback: &Feedback) -> String {
    let mut out = String::new();
    for piece in template.pieces() {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Slot(slot) => out.push_str(match slot {
                Slot::Prompt => task_prompt.trim_end(),
                Slot::Code => code.trim_end(),
                Slot::Summary => &feedback.summary,
                Slot::Errors => &feedback.errors,
                Slot::Cases => &feedback.cases,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::{broken, ran};
    use super::*;

    fn ctx<'a>(template: &'a Template, shown: &'a [ShownCase]) -> PromptContext<'a> {
        PromptContext {
            task_prompt: "Write `f`.\n",
            template,
            shown,
            mode: FeedbackMode::Full,
            limits: FeedbackLimits::default(),
        }
    }

    #[test]
    fn the_default_template_reads_well_for_a_compile_failure() {
        let template = Template::default();
        let prompt = repair_prompt(&ctx(&template, &[]), &broken(2, 1));
        assert_eq!(
            prompt,
            "Write `f`.\n\nAn earlier answer to this task:\n\n```rust\nfn f() -> u32 { \"2\" }\n```\n\n\
             It did not compile: 1 error.\n\nThe compiler's errors:\n\n```text\nerror[E0308]: mismatched types 0\n --> cands/c2.rs:1:1\n```\n\n\
             Fix it. Answer with the whole corrected code, the function and any helpers it needs, in one ```rust fence, and nothing else.\n"
        );
    }

    #[test]
    fn the_default_template_reads_well_for_failed_cases() {
        let template = Template::default();
        let shown = [ShownCase {
            pos: 1,
            name: Some("one".into()),
            fields: vec![
                ("input".into(), "1".into()),
                ("expected".into(), "2".into()),
            ],
        }];
        let prompt = repair_prompt(&ctx(&template, &shown), &ran(0, "pf"));
        assert!(
            prompt.contains(
                "```\n\nIt compiled and passed 1 of 2 cases. 1 of the failed cases can be shown, 0 are hidden.\n\nThe failed cases:\n\n- case `one`\n  input: 1\n  expected: 2\n  got: a wrong answer (not kept)\n\nFix it."
            ),
            "{prompt}"
        );
    }

    #[test]
    fn a_template_s_own_text_is_kept() {
        let template = Template::parse("[{{code}}] {{ x }} {{errors}}|{{cases}}|", None).unwrap();
        let prompt = repair_prompt(&ctx(&template, &[]), &ran(0, "p"));
        assert_eq!(prompt, "[fn f() -> u32 { 0 }] {{ x }} ||");
    }
}

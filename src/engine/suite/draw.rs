//! A suite's live draw: every problem's completions from model pools, fed
//! to the suite's stream as they arrive, so waves build while the draw goes
//! on.
//!
//! Each problem is asked through the same pools (`Plan::for_prompt`): in
//! **chat mode** its prompt wrapped in a request for the whole function in
//! a fence (`suite::chat_prompt`), the reply extracted as any batch's, and
//! the program `chat_program`'s; in **completion mode** its prompt as is to
//! `/v1/completions` with its stop tokens (what base models need and how
//! MultiPL-E draws), and the program `completion_program`'s. Everything a
//! batch's draw does applies: presets, tokens from usage, retries and their
//! attempts, fixed shares or a race, and a resume draws only what is not
//! stored. A reply that gives no program (a failed request, a chat reply
//! without code) is a completion that did not build.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result};
use futures::stream::{StreamExt, TryStreamExt};
use tokio::sync::mpsc;

use super::input::Key;
use super::stream::{Programs, Work};
use crate::draw::http::Prompt;
use crate::draw::{Drawn, EarlyStop, Plan};
use crate::engine::draw::{settle, Asks, TokenBudget};
use crate::engine::rounds::Round;
use crate::repair::planner::SuiteRoundPlan;
use crate::store::{BatchId, NewCompletion, Store, SuiteOutcomeRow};
use crate::suite::{
    chat_program, chat_prompt, completion_program, entry_name, CompletionOutcome, Problem,
    ProgramMode,
};
use crate::support::account::{Phase, PhaseGuard};
use crate::support::progress::Progress;
use crate::text::extract::{self, Extraction, NoCode};

/// What a suite's live draw asks for.
#[derive(Debug, Clone)]
pub struct DrawSettings {
    /// The pools and their split (`Plan::for_suite`).
    pub plan: Plan,
    /// Completions per problem.
    pub n: usize,
    pub mode: ProgramMode,
    /// Repair rounds and an output-token budget (issue 28).
    pub repair: crate::repair::setup::Repairing,
}

/// What a draw asks each problem for: the first draw's `n` completions of
/// its own prompt, or a repair round's children.
pub(super) type Ask = Round<SuiteRoundPlan>;

/// One problem's share of the draw.
pub(super) struct ProblemDraw {
    pub batch: BatchId,
    pub pos: usize,
    pub problem: Problem,
    pub n: usize,
    /// Replies already stored (a resume's).
    pub stored: BTreeSet<usize>,
    /// The problem's programs so far: key to (program id, representative).
    pub keys: HashMap<Key, (usize, usize)>,
}

impl ProblemDraw {
    pub fn fresh(batch: BatchId, pos: usize, problem: Problem) -> ProblemDraw {
        ProblemDraw {
            batch,
            pos,
            problem,
            n: 0,
            stored: BTreeSet::new(),
            keys: HashMap::new(),
        }
    }
}

/// The draw of a whole suite.
pub(super) struct SuiteDraw<'a> {
    pub settings: &'a DrawSettings,
    pub store: &'a Store,
    pub progress: &'a Progress,
    pub programs: &'a Programs,
    /// Output tokens the suite's replies have spent against the budget
    /// after which no problem's draw starts (`--max-tokens`).
    pub budget: TokenBudget,
}

/// How many replies came back ok, and the first failure, for a draw that
/// got nothing.
#[derive(Default)]
struct Tally {
    ok: AtomicUsize,
    first_failed: Mutex<Option<Drawn>>,
}

impl SuiteDraw<'_> {
    /// Draws every problem's missing completions of what `ask` asks;
    /// returns the draw phase's guard (for the caller to record once it is
    /// over).
    pub async fn run(&self, jobs: &mut [ProblemDraw], ask: &Ask) -> Result<PhaseGuard> {
        let guard = PhaseGuard::start(Phase::Draw);
        for job in jobs.iter_mut() {
            if job.n == 0 {
                job.n = self.settings.n;
            }
        }
        let wanted: usize = jobs
            .iter()
            .map(|j| match ask {
                Round::First => (0..j.n).filter(|i| !j.stored.contains(i)).count(),
                Round::Repair(SuiteRoundPlan { plans, .. }) => {
                    plans.get(&j.batch).map_or(0, |ps| {
                        ps.iter()
                            .flat_map(|p| p.first_idx..p.first_idx + p.children)
                            .filter(|i| !j.stored.contains(i))
                            .count()
                    })
                }
            })
            .sum();
        let bar = self.progress.bar("draw", wanted);
        // Problems are drawn side by side only as far as the pools' slots
        // would otherwise stand idle: a problem of n requests fills n.
        let side_by_side = (self.settings.plan.max_in_flight() / self.settings.n.max(1)).max(1);
        let tally = Tally::default();
        futures::stream::iter(jobs.iter_mut())
            .map(|job| self.draw_problem(job, ask, &tally, &bar))
            .buffer_unordered(side_by_side)
            .try_collect::<Vec<()>>()
            .await?;
        bar.finish();
        if tally.ok.load(Ordering::Relaxed) == 0 {
            let failed = tally
                .first_failed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(why) = failed.and_then(|d| crate::draw::all_failed(&[d])) {
                anyhow::bail!(why);
            }
        }
        Ok(guard)
    }

    async fn draw_problem(
        &self,
        job: &mut ProblemDraw,
        ask: &Ask,
        tally: &Tally,
        bar: &indicatif::ProgressBar,
    ) -> Result<()> {
        if self.budget.is_spent() {
            return Ok(());
        }
        let entry_stop = || {
            entry_name(&job.problem).map_or(EarlyStop::Never, |entry| EarlyStop::AtAnswer { entry })
        };
        let (plan, asks, mode, parent_of, doing) = match ask {
            Round::First => {
                // Pools draw indices in order from `skip`; replies past a
                // gap that are already stored are passed by (a race may
                // leave gaps).
                let skip = (0..)
                    .take_while(|i| job.stored.contains(i))
                    .count()
                    .min(job.n);
                if skip >= job.n {
                    return Ok(());
                }
                let (prompt, early_stop) = match self.settings.mode {
                    // Closed once the reply holds what `program_of` extracts.
                    ProgramMode::Chat => (Prompt::Chat(chat_prompt(&job.problem)), entry_stop()),
                    ProgramMode::Completion => (
                        Prompt::Completion {
                            prompt: job.problem.prompt.clone(),
                            stop: job.problem.stop_tokens.clone(),
                        },
                        EarlyStop::Never,
                    ),
                };
                let plan = self.settings.plan.for_prompt(&prompt, &early_stop);
                let asks = Asks::Count { n: job.n, skip };
                (plan, asks, self.settings.mode, None, "drawing")
            }
            // Each parent's children asked the parent's prompt, as a chat
            // message (a repair prompt is an instruction, whatever the
            // suite's mode), from the repair pools.
            Round::Repair(SuiteRoundPlan { round, plans }) => {
                let Some(parents) = plans.get(&job.batch) else {
                    return Ok(());
                };
                let mut asks = BTreeMap::new();
                let mut parent_of = HashMap::new();
                for p in parents {
                    for idx in p.first_idx..p.first_idx + p.children {
                        asks.insert(idx, p.prompt.clone());
                        parent_of.insert(idx, p.parent);
                    }
                }
                if asks.keys().all(|i| job.stored.contains(i)) {
                    return Ok(());
                }
                let plan = self
                    .settings
                    .repair
                    .plan
                    .as_ref()
                    .unwrap_or(&self.settings.plan)
                    .for_prompt(&Prompt::Chat(String::new()), &entry_stop());
                let stored = job.stored.clone();
                let asks = Asks::Prompts { asks, stored };
                let lineage = Some((*round, parent_of));
                (plan, asks, ProgramMode::Chat, lineage, "repairing")
            }
        };
        let (tx, mut rx) = mpsc::channel(64);
        // One bar for the suite; the problems' own draws are quiet.
        let quiet = Progress::hidden();
        let drawing = async {
            asks.draw(&plan, tx, &quiet)
                .await
                .map_err(anyhow::Error::from)
        };
        let receiving = async {
            while let Some(event) = rx.recv().await {
                let Some(drawn) = settle(self.store, self.progress, job.batch, event).await? else {
                    continue;
                };
                if job.stored.insert(drawn.idx) {
                    let lineage = match &parent_of {
                        None => None,
                        Some((round, parents)) => {
                            let parent = parents
                                .get(&drawn.idx)
                                .context("a repair reply outside its round")?;
                            Some((*round, *parent))
                        }
                    };
                    self.take(job, drawn, mode, lineage, tally).await?;
                    bar.inc(1);
                }
            }
            anyhow::Ok(())
        };
        tokio::try_join!(drawing, receiving)
            .with_context(|| format!("{doing} problem `{}`", job.problem.name))?;
        Ok(())
    }

    /// Stores one reply with its program (and, in a repair round, its
    /// round and parent), and hands the program on: a new one to the
    /// builds, a duplicate (of any earlier round's) to its program's
    /// outcome.
    async fn take(
        &self,
        job: &mut ProblemDraw,
        drawn: Drawn,
        mode: ProgramMode,
        lineage: Option<(u32, usize)>,
        tally: &Tally,
    ) -> Result<()> {
        self.budget.spend(&drawn);
        if drawn.reply.outcome.is_ok() {
            tally.ok.fetch_add(1, Ordering::Relaxed);
        } else {
            let mut first = tally.first_failed.lock().unwrap_or_else(|e| e.into_inner());
            if first.is_none() {
                *first = Some(drawn.clone());
            }
        }
        let extraction = program_of(&job.problem, mode, &drawn);
        let key = match &extraction {
            Extraction::Source(program) => Some(Key::of(program)),
            Extraction::Failed(_) => None,
        };
        let known = key.as_ref().and_then(|k| job.keys.get(k)).copied();
        let completion = NewCompletion {
            drawn: &drawn,
            extraction: &extraction,
            fingerprint: key.as_ref().and_then(Key::fingerprint),
            dup_of: known.map(|(_, rep)| rep),
        };
        match lineage {
            None => {
                self.store
                    .record_suite_completions(job.batch, &[completion])
                    .await?
            }
            Some((round, parent)) => {
                self.store
                    .record_suite_repair(job.batch, &completion, round, parent)
                    .await?
            }
        }
        match (&extraction, known, key) {
            (Extraction::Source(program), None, Some(key)) => {
                let id = self.programs.add(Work::new(
                    job.batch,
                    job.pos,
                    &job.problem,
                    drawn.idx,
                    program,
                ));
                job.keys.insert(key, (id, drawn.idx));
            }
            (Extraction::Source(_), Some((id, _)), _) => {
                if let Some(row) = self.programs.share(id, drawn.idx) {
                    self.store
                        .record_suite_outcome(job.batch, &[drawn.idx], &row)
                        .await?;
                }
            }
            // The server's failure is no completion of the model's: it
            // gets no status, and the report leaves it out of n.
            (Extraction::Failed(NoCode::DrawFailed), _, _) => {}
            _ => store_no_program(self.store, job.batch, drawn.idx).await?,
        }
        crate::support::testpoint::reached("suite.reply").await;
        Ok(())
    }
}

/// The program a reply gives, or why it gives none.
fn program_of(problem: &Problem, mode: ProgramMode, drawn: &Drawn) -> Extraction {
    let reply = &drawn.reply;
    if !reply.outcome.is_ok() {
        return Extraction::Failed(NoCode::DrawFailed);
    }
    match mode {
        ProgramMode::Completion => match &reply.content {
            Some(completion) => Extraction::Source(completion_program(problem, completion)),
            None => Extraction::Failed(NoCode::NullContent),
        },
        ProgramMode::Chat => {
            let entry = entry_name(problem).unwrap_or_default();
            match extract::extract(
                reply.content.as_deref(),
                reply.finish_reason.as_deref(),
                &entry,
            ) {
                Extraction::Source(code) => Extraction::Source(chat_program(problem, &code)),
                failed => failed,
            }
        }
    }
}

/// A completion that gave no program: it did not build (`SyntaxError`),
/// and nothing was probed.
pub(super) async fn store_no_program(store: &Store, batch: BatchId, idx: usize) -> Result<()> {
    let row = SuiteOutcomeRow {
        probe: None,
        error_file: None,
        diagnostics: None,
        outcome: CompletionOutcome::CompileError,
        run_wall: Duration::ZERO,
        run_cpu: Duration::ZERO,
        messages: Vec::new(),
    };
    store.record_suite_outcome(batch, &[idx], &row).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::{Outcome, Reply};

    fn problem() -> Problem {
        Problem {
            name: "inc".into(),
            prompt: "fn inc(x: i32) -> i32 {\n".into(),
            tests: "}\n\nfn main() {\n    assert_eq!(inc(1), 2);\n}\n".into(),
            stop_tokens: vec!["\n}".into()],
        }
    }

    fn reply(content: &str, outcome: Outcome) -> Drawn {
        Drawn {
            idx: 0,
            pool: "p".into(),
            reply: Reply {
                content: Some(content.into()),
                outcome,
                ..Reply::default()
            },
        }
    }

    #[test]
    fn each_mode_makes_its_program() {
        let p = problem();
        let completion = program_of(
            &p,
            ProgramMode::Completion,
            &reply("    x + 1\n}\nfn junk() {}", Outcome::Ok),
        );
        assert_eq!(
            completion,
            Extraction::Source(
                "fn inc(x: i32) -> i32 {\n    x + 1\n}\n\nfn main() {\n    assert_eq!(inc(1), 2);\n}\n"
                    .into()
            )
        );
        let chat = program_of(
            &p,
            ProgramMode::Chat,
            &reply(
                "Here:\n```rust\nfn inc(x: i32) -> i32 {\n    x + 1\n}\n```\n",
                Outcome::Ok,
            ),
        );
        assert_eq!(
            chat,
            Extraction::Source(
                "fn inc(x: i32) -> i32 {\n    x + 1\n}\n\n\n\nfn main() {\n    assert_eq!(inc(1), 2);\n}\n"
                    .into()
            )
        );
        assert_eq!(
            program_of(&p, ProgramMode::Chat, &reply("no code", Outcome::Ok)),
            Extraction::Failed(NoCode::NoFence)
        );
        assert_eq!(
            program_of(
                &p,
                ProgramMode::Completion,
                &reply("", Outcome::HttpError { status: 500 })
            ),
            Extraction::Failed(NoCode::DrawFailed)
        );
    }
}

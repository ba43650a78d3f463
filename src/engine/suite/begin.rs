//! A new suite stored: its input in one transaction (completions read
//! from files), or its problems alone (a live draw), and the queued forms
//! of both, which lanes run part by part.

use anyhow::Result;

use crate::draw::{Drawn, Outcome, Reply};
use crate::spec::Edition;
use crate::store::{BatchStatus, NewCompletion, NewProblem, NewSuite, Store, SuiteId, SuiteOrigin};
use crate::support::owner::Owner;
use crate::text::extract::Extraction;

use super::input::{duplicates, Key};
use super::{DrawSettings, ProblemSet, SuiteInput, COMPLETIONS_POOL};

/// Stores a suite of completions (its input, programs and groups, in one
/// transaction), to be built in `edition`, and runs nothing.
pub(super) async fn stage(input: &SuiteInput, edition: Edition, store: &Store) -> Result<SuiteId> {
    let problems = &input.set.problems;
    // Everything pure first: the programs, their fingerprints and their
    // groups, so the suite's input is stored in one transaction.
    let mut drawn: Vec<Vec<Drawn>> = Vec::with_capacity(problems.len());
    let mut extractions: Vec<Vec<Extraction>> = Vec::with_capacity(problems.len());
    let mut fingerprints: Vec<Vec<Option<String>>> = Vec::with_capacity(problems.len());
    let mut groups: Vec<Vec<Option<usize>>> = Vec::with_capacity(problems.len());
    for (problem, completions) in problems.iter().zip(&input.completions) {
        let d: Vec<Drawn> = completions
            .iter()
            .enumerate()
            .map(|(idx, c)| Drawn {
                idx,
                pool: COMPLETIONS_POOL.to_owned(),
                reply: Reply {
                    content: Some(c.clone()),
                    outcome: Outcome::Ok,
                    ..Reply::default()
                },
            })
            .collect();
        let programs: Vec<String> = completions
            .iter()
            .map(|c| input.mode.program(problem, c))
            .collect();
        let keys: Vec<Key> = programs.iter().map(|p| Key::of(p)).collect();
        groups.push(duplicates(&keys));
        fingerprints.push(keys.iter().map(Key::fingerprint).collect());
        extractions.push(programs.into_iter().map(Extraction::Source).collect());
        drawn.push(d);
    }
    let new_problems: Vec<NewProblem> = problems
        .iter()
        .enumerate()
        .map(|(p, problem)| NewProblem {
            problem,
            n: drawn[p].len(),
            completions: (0..drawn[p].len())
                .map(|i| NewCompletion {
                    drawn: &drawn[p][i],
                    extraction: &extractions[p][i],
                    fingerprint: fingerprints[p][i].clone(),
                    dup_of: groups[p][i],
                })
                .collect(),
        })
        .collect();
    let (suite, batches) = store
        .begin_suite(
            &NewSuite {
                problems_path: &input.set.path,
                problems_digest: &input.set.digest,
                origin: SuiteOrigin::Completions,
                source: &input.source,
                mode: input.mode,
                edition,
                problems: &new_problems,
            },
            &Owner::current(),
        )
        .await?;
    tracing::info!(suite, problems = batches.len(), "suite started");
    Ok(suite)
}

/// `suite run --queue`: the suite stored, nothing run, its batches left for
/// lanes to resume part by part (`resume` with a `SuitePart`) in `edition`.
pub async fn queue(input: &SuiteInput, edition: Edition, store: &Store) -> Result<SuiteId> {
    let suite = stage(input, edition, store).await?;
    leave_to_lanes(store, suite, "queued: lanes run it").await
}

/// `suite run --pool ... --queue`: the suite stored with its problems and
/// no completions, for lanes to draw and run part by part (`resume` with
/// a `SuitePart` and the pools) in `edition`.
pub async fn queue_draw(
    set: &ProblemSet,
    settings: &DrawSettings,
    edition: Edition,
    store: &Store,
) -> Result<SuiteId> {
    let suite = begin_draw(set, settings, edition, store).await?;
    leave_to_lanes(store, suite, "queued: lanes draw and run it").await
}

/// A queued suite stops here, `why`: lanes resume it part by part.
async fn leave_to_lanes(store: &Store, suite: SuiteId, why: &str) -> Result<SuiteId> {
    store
        .finish_suite(
            suite,
            &Owner::current(),
            BatchStatus::Interrupted,
            Some(why),
        )
        .await?;
    Ok(suite)
}

/// A live suite stored with its problems, `settings.n` each, and no
/// completions yet, to be built in `edition`.
pub(super) async fn begin_draw(
    set: &ProblemSet,
    settings: &DrawSettings,
    edition: Edition,
    store: &Store,
) -> Result<SuiteId> {
    let new_problems: Vec<NewProblem> = set
        .problems
        .iter()
        .map(|problem| NewProblem {
            problem,
            n: settings.n,
            completions: Vec::new(),
        })
        .collect();
    let label = settings.plan.label();
    let (suite, batches) = store
        .begin_suite(
            &NewSuite {
                problems_path: &set.path,
                problems_digest: &set.digest,
                origin: SuiteOrigin::Pool,
                source: &label,
                mode: settings.mode,
                edition,
                problems: &new_problems,
            },
            &Owner::current(),
        )
        .await?;
    tracing::info!(suite, problems = batches.len(), pools = %label, "suite draw stored");
    Ok(suite)
}

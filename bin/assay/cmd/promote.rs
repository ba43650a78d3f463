//! `assay promote`: an admitted candidate over the task's committed file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use assay::engine::command_store::reading;
use assay::engine::exit::UsageError;
use assay::report::views;
use assay::store::BatchId;

use crate::args::{DbArg, WorkDirArg};

pub async fn promote(
    batch: BatchId,
    candidate: usize,
    db: DbArg,
    yes: bool,
    task: Option<PathBuf>,
    work: WorkDirArg,
) -> Result<ExitCode> {
    let work = work.resolve()?;
    reading(&db.db()?, async |store| {
        views::refuse_suite_batch(store, batch, &db.reach()).await?;
        let at =
            assay::queue::place::task_to_promote(store, batch, task.as_deref(), &work.path).await?;
        let plan = assay::engine::promote::plan_at(store, batch, candidate, &at).await?;
        print!("{}", plan.diff());
        if !yes && !confirm(&format!("write {}?", plan.path.display()))? {
            println!("not written");
            return Ok(ExitCode::SUCCESS);
        }
        let p = assay::engine::promote::apply(store, plan).await?;
        println!(
            "promoted candidate {} of batch {} over {} ({}/{} against {}/{})",
            p.idx, p.batch_id, p.path, p.passed, p.total, p.reference_passed, p.total
        );
        Ok(ExitCode::SUCCESS)
    })
    .await
}

/// Asks on the terminal; without one, refuses (a script must say --yes).
fn confirm(question: &str) -> Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Err(UsageError(
            "promote: nothing written; pass --yes to write without a terminal to confirm on".into(),
        )
        .into());
    }
    eprint!("{question} [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

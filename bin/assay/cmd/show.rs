//! `assay show`: a stored batch's summary, phases and verdicts.

use std::process::ExitCode;

use anyhow::Result;

use assay::command_store::reading;
use assay::report::{self, CandidateLine};
use assay::store::BatchId;
use assay::views;

use crate::args::DbArg;

pub async fn show(batch: BatchId, db: DbArg, json: bool) -> Result<ExitCode> {
    reading(&db.db()?, async |store| {
        views::refuse_suite_batch(store, batch, &db.reach()).await?;
        if json {
            println!(
                "{}",
                serde_json::to_string_pretty(&views::batch_json(store, batch).await?)?
            );
            return Ok(ExitCode::SUCCESS);
        }
        let summary = views::summary(store, batch).await?;
        let lines: Vec<CandidateLine> = store
            .candidates(batch)
            .await?
            .iter()
            .map(CandidateLine::new)
            .collect();
        let (figures, _) = views::pool_figures(store, batch).await?;
        print!(
            "{}{}\n{}",
            summary.render(),
            figures.draw_line(),
            report::candidate_table(&lines)
        );
        Ok(ExitCode::SUCCESS)
    })
    .await
}

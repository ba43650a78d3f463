//! `assay show`: a stored batch's summary, phases and verdicts.

use std::process::ExitCode;

use anyhow::Result;

use assay::engine::command_store::reading;
use assay::report::views;
use assay::store::BatchId;

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
        print!("{}", views::batch_text(store, batch).await?);
        Ok(ExitCode::SUCCESS)
    })
    .await
}

//! `assay export`: a stored batch, one row per reply.

use std::process::ExitCode;

use anyhow::Result;

use assay::command_store::reading;
use assay::store::BatchId;
use assay::views;

use crate::args::DbArg;

pub async fn export(batch: BatchId, db: DbArg, format: assay::export::Format) -> Result<ExitCode> {
    reading(&db.db()?, async |store| {
        views::refuse_suite_batch(store, batch, &db.reach()).await?;
        print!("{}", views::export(store, batch, format).await?);
        Ok(ExitCode::SUCCESS)
    })
    .await
}

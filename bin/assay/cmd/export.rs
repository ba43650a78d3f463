//! `assay export`: a stored batch, one row per reply.

use std::process::ExitCode;

use anyhow::Result;

use assay::engine::command_store::reading;
use assay::report::views;
use assay::store::BatchId;

use crate::args::DbArg;

pub async fn export(
    batch: BatchId,
    db: DbArg,
    format: assay::report::export::Format,
) -> Result<ExitCode> {
    reading(&db.db()?, async |store| {
        views::refuse_suite_batch(store, batch, &db.reach()).await?;
        print!("{}", views::export(store, batch, format).await?);
        Ok(ExitCode::SUCCESS)
    })
    .await
}

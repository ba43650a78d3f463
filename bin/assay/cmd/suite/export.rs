//! `assay suite export`: a stored suite, one row per completion.

use std::process::ExitCode;

use anyhow::Result;

use assay::engine::command_store::reading;
use assay::report::views;
use assay::store::SuiteId;

use crate::args::DbArg;

pub async fn export(
    suite: SuiteId,
    db: DbArg,
    format: assay::report::export::Format,
) -> Result<ExitCode> {
    reading(&db.db()?, async |store| {
        // Refuses an unknown suite (exit 2) rather than exporting nothing.
        store.suite(suite).await?;
        print!("{}", views::suite_export(store, suite, format).await?);
        Ok(ExitCode::SUCCESS)
    })
    .await
}

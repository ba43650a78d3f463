//! `assay suite show`: a stored suite's pass@k and per-problem figures.

use std::process::ExitCode;

use anyhow::Result;

use assay::engine::command_store::reading;
use assay::report::views;
use assay::store::SuiteId;

use crate::args::DbArg;

pub async fn show(suite: SuiteId, db: DbArg, json: bool) -> Result<ExitCode> {
    reading(&db.db()?, async |store| {
        let summary = views::suite_summary(store, suite).await?;
        if json {
            println!("{}", serde_json::to_string_pretty(&summary)?);
        } else {
            print!("{}", summary.render());
        }
        Ok(ExitCode::SUCCESS)
    })
    .await
}

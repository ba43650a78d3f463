//! `assay suite list`: the stored suites.

use std::process::ExitCode;

use anyhow::Result;

use assay::engine::command_store::reading;

use crate::args::DbArg;

pub async fn list(db: DbArg, json: bool) -> Result<ExitCode> {
    reading(&db.db()?, async |store| {
        let suites = store.suites().await?;
        if json {
            println!("{}", serde_json::to_string_pretty(&suites)?);
        } else {
            print!("{}", assay::report::suite::suite_table(&suites));
        }
        Ok(ExitCode::SUCCESS)
    })
    .await
}

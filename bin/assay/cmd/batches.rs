//! `assay batches`: the stored batches.

use std::process::ExitCode;

use anyhow::Result;

use assay::engine::command_store::reading;
use assay::report::{self, views};

use crate::args::DbArg;

pub async fn batches(db: DbArg, json: bool) -> Result<ExitCode> {
    reading(&db.db()?, async |store| {
        let batches = store.batches().await?;
        if json {
            let rows = views::batches_json(&batches);
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            print!("{}", report::batch::batch_table(&batches));
        }
        Ok(ExitCode::SUCCESS)
    })
    .await
}

//! `assay queue`: the store's queue, every item with its state and lane.

use std::process::ExitCode;

use anyhow::Result;

use assay::engine::command_store::reading;

use crate::args::DbArg;

pub async fn queue(db: DbArg, json: bool) -> Result<ExitCode> {
    reading(&db.db()?, async |store| {
        let items = store.work_items().await?;
        if json {
            println!("{}", serde_json::to_string_pretty(&items)?);
        } else {
            print!("{}", assay::queue::lane::queue_table(&items));
        }
        Ok(ExitCode::SUCCESS)
    })
    .await
}

//! `assay batches`: the stored batches.

use std::process::ExitCode;

use anyhow::Result;

use assay::command_store::reading;
use assay::report;

use crate::args::DbArg;

pub async fn batches(db: DbArg, json: bool) -> Result<ExitCode> {
    reading(&db.db()?, async |store| {
        let batches = store.batches().await?;
        if json {
            let rows: Vec<_> = batches
                .iter()
                .map(|b| {
                    serde_json::json!({
                        "batch_id": b.id, "task": b.task, "pool": b.pool, "n": b.n,
                        "status": b.status.as_str(), "started_at": b.started_at,
                        "finished_at": b.finished_at, "failure": b.failure,
                        "lane": b.lane, "lease_lapsed": b.lease_lapsed,
                    })
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            print!("{}", report::batch_table(&batches));
        }
        Ok(ExitCode::SUCCESS)
    })
    .await
}

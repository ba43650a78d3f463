//! `assay show`: a stored batch's summary, phases and verdicts, or its
//! compiler errors (`--errors`).

use std::process::ExitCode;

use anyhow::Result;

use assay::engine::command_store::reading;
use assay::report::errors::{self, UnitErrors};
use assay::report::views;
use assay::store::BatchId;

use crate::args::DbArg;

pub async fn show(
    batch: BatchId,
    db: DbArg,
    json: bool,
    only_errors: Option<Option<usize>>,
) -> Result<ExitCode> {
    reading(&db.db()?, async |store| {
        views::refuse_suite_batch(store, batch, &db.reach()).await?;
        if let Some(only) = only_errors {
            let units = errors::batch_errors(store, batch, only).await?;
            let none = match only {
                Some(c) => format!("candidate {c} of batch {batch} has no compiler errors"),
                None => format!("batch {batch} holds no compiler errors"),
            };
            print_errors(&units, json, &none)?;
            return Ok(ExitCode::SUCCESS);
        }
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

/// Prints `units` (a JSON array with `json`); none is said on stderr, so
/// stdout stays what a script reads.
pub fn print_errors(units: &[UnitErrors], json: bool, none: &str) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(units)?);
    } else {
        print!("{}", errors::render(units));
    }
    if units.is_empty() {
        eprintln!("{none}");
    }
    Ok(())
}

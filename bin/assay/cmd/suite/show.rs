//! `assay suite show`: a stored suite's pass@k and per-problem figures, or
//! its compiler errors (`--errors`).

use std::process::ExitCode;

use anyhow::Result;

use assay::engine::command_store::reading;
use assay::report::{errors, views};
use assay::store::SuiteId;

use crate::args::DbArg;
use crate::cmd::show::print_errors;

pub async fn show(
    suite: SuiteId,
    db: DbArg,
    json: bool,
    only_errors: Option<Option<String>>,
) -> Result<ExitCode> {
    reading(&db.db()?, async |store| {
        if let Some(only) = only_errors.as_ref() {
            let units = errors::suite_errors(store, suite, only.as_deref()).await?;
            let none = match only {
                Some(p) => format!("problem `{p}` of suite {suite} has no compiler errors"),
                None => format!("suite {suite} holds no compiler errors"),
            };
            print_errors(&units, json, &none)?;
            return Ok(ExitCode::SUCCESS);
        }
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

//! `assay suite compare`: two runs over the same problems side by side.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use assay::engine::command_store::reading;
use assay::engine::exit::UsageError;
use assay::report::suite::SuiteCompare;
use assay::report::views;
use assay::store::SuiteId;

use crate::args::DbArg;

pub async fn compare(
    a: SuiteId,
    b: SuiteId,
    db: DbArg,
    k: usize,
    json: bool,
    svg: Option<PathBuf>,
) -> Result<ExitCode> {
    // The chart's file is checked before anything is read.
    if let Some(path) = &svg {
        assay::engine::outputs::check_output_file("--svg", path)?;
    }
    reading(&db.db()?, async |store| {
        let (sa, sb) = (
            views::suite_summary(store, a).await?,
            views::suite_summary(store, b).await?,
        );
        let compared = SuiteCompare::new(&sa, &sb, k)
            .map_err(|e| UsageError(format!("suite compare {a} {b} -k {k}: {e}")))?;
        if let Some(path) = &svg {
            let d = &compared.comparison.difference;
            assay::engine::outputs::write_chart(
                path,
                &assay::report::plot::suite_compare_svg(
                    &format!("suite {a}"),
                    &format!("suite {b}"),
                    k,
                    &compared.comparison.problems,
                    (d.diff, d.low, d.high),
                )?,
            )?;
        }
        if json {
            println!("{}", serde_json::to_string_pretty(&compared)?);
        } else {
            print!("{}", compared.render());
        }
        Ok(ExitCode::SUCCESS)
    })
    .await
}

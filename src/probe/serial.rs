//! Serial mode: one `cargo build` per candidate, one after the other, as the
//! old pipeline's probe did. Kept as the baseline the other modes are
//! measured and checked against: every candidate is built exactly as it
//! would be alone.

use anyhow::Result;

use super::{target_verdict, wide::write_targets, ProbeOutcome, ProbeStats};
use crate::package::{Package, Profile};

pub(super) async fn probe(
    package: &Package,
    candidates: &[(usize, &str)],
    on_progress: &mut impl FnMut(usize),
) -> Result<ProbeOutcome> {
    let bins = write_targets(package, candidates)?;
    package.set_bins(bins.iter().map(String::as_str))?;
    let mut stats = ProbeStats::default();
    let mut probed = Vec::with_capacity(candidates.len());
    for (done, ((idx, _), name)) in candidates.iter().zip(&bins).enumerate() {
        let report = package
            .build(Profile::Probe, std::slice::from_ref(name), |_, _| {})
            .await?;
        stats.add_build(&report);
        probed.push(target_verdict(*idx, &report, name));
        on_progress(done + 1);
    }
    Ok(ProbeOutcome { probed, stats })
}

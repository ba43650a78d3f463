//! Account: wall time, CPU time and busy CPUs of each phase.
//!
//! A [`PhaseGuard`] is started when a phase begins and finished when it ends.
//! CPU seconds are `getrusage` of this process plus its reaped children (so a
//! cargo build counts in full once it has been waited for). Peak busy CPUs
//! come from sampling the whole process tree in `/proc` every
//! [`SAMPLE_INTERVAL`]: the largest CPU-s / s seen over one interval.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;
use strum::{Display, EnumString, IntoStaticStr};

/// How often the process tree is sampled for peak busy CPUs.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(200);

/// The phases of a batch, in order. The stable strings (stored, printed
/// and in JSON) are the variants' lowercase names, three of them spelled
/// out.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Display, EnumString, IntoStaticStr,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Phase {
    /// Before the draw: checking the task's cases against its harness and
    /// opening its package. The first batch of a task builds the harness's
    /// dependencies here, into the warm target directory later phases use.
    Prepare,
    Draw,
    #[serde(rename = "extract+dedup")]
    #[strum(to_string = "extract+dedup")]
    ExtractDedup,
    Probe,
    #[serde(rename = "score build")]
    #[strum(to_string = "score build")]
    ScoreBuild,
    #[serde(rename = "score run")]
    #[strum(to_string = "score run")]
    ScoreRun,
    Persist,
}

/// One phase's figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PhaseFigures {
    pub phase: Phase,
    pub wall_s: f64,
    pub cpu_s: f64,
    /// CPU-s / wall-s.
    pub avg_busy: f64,
    /// Largest busy CPUs over one sample interval; at least `avg_busy`, at
    /// most the machine's CPUs.
    pub peak_busy: f64,
}

impl PhaseFigures {
    /// One phase measured in two stretches (`self`, then `later`), as one:
    /// times add up, the peak is the higher one.
    pub fn then(self, later: PhaseFigures) -> PhaseFigures {
        let wall_s = self.wall_s + later.wall_s;
        let cpu_s = self.cpu_s + later.cpu_s;
        let avg_busy = if wall_s > 0.0 { cpu_s / wall_s } else { 0.0 };
        PhaseFigures {
            phase: self.phase,
            wall_s,
            cpu_s,
            avg_busy,
            peak_busy: self.peak_busy.max(later.peak_busy).max(avg_busy),
        }
    }
}

/// Measures one phase from `start` to `finish`.
pub struct PhaseGuard {
    phase: Phase,
    started: Instant,
    cpu_at_start: f64,
    sampler: Option<Sampler>,
    /// Where the figures go if the guard is dropped unfinished.
    cut: Option<CutPhases>,
}

/// The phases a run was in when it was cut short (interrupted, or failed
/// with an error): a guard started here and dropped unfinished leaves its
/// figures, measured up to the drop, so the run's record still says what
/// the phase it stopped in cost. Finished guards leave nothing.
#[derive(Debug, Clone, Default)]
pub struct CutPhases(Arc<Mutex<Vec<PhaseFigures>>>);

impl CutPhases {
    /// Starts a phase whose figures are kept here if it is cut short.
    pub fn start(&self, phase: Phase) -> PhaseGuard {
        let mut guard = PhaseGuard::start(phase);
        guard.cut = Some(self.clone());
        guard
    }

    /// The cut phases' figures, in the order they were dropped.
    pub fn take(&self) -> Vec<PhaseFigures> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<f64>,
}

impl Phase {
    pub const ALL: [Phase; 7] = [
        Phase::Prepare,
        Phase::Draw,
        Phase::ExtractDedup,
        Phase::Probe,
        Phase::ScoreBuild,
        Phase::ScoreRun,
        Phase::Persist,
    ];

    pub fn as_str(&self) -> &'static str {
        (*self).into()
    }

    pub fn from_stored(s: &str) -> Option<Phase> {
        s.parse().ok()
    }
}

impl PhaseGuard {
    pub fn start(phase: Phase) -> PhaseGuard {
        PhaseGuard {
            phase,
            started: Instant::now(),
            cpu_at_start: process_cpu_seconds(),
            sampler: Sampler::spawn(),
            cut: None,
        }
    }

    pub fn finish(mut self) -> PhaseFigures {
        self.cut = None;
        self.measure()
    }

    /// The figures from the start to now; stops the sampler.
    fn measure(&mut self) -> PhaseFigures {
        let wall_s = self.started.elapsed().as_secs_f64();
        let cpu_s = (process_cpu_seconds() - self.cpu_at_start).max(0.0);
        let avg_busy = if wall_s > 0.0 { cpu_s / wall_s } else { 0.0 };
        // Tick rounding summed over many processes can overshoot the machine.
        let cpus = std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64);
        let sampled_peak = self.sampler.take().map_or(0.0, Sampler::stop).min(cpus);
        PhaseFigures {
            phase: self.phase,
            wall_s,
            cpu_s,
            avg_busy,
            peak_busy: sampled_peak.max(avg_busy),
        }
    }
}

impl Drop for PhaseGuard {
    /// An unfinished guard still stops its sampler (whose thread would
    /// otherwise sample for the life of the process), and leaves its
    /// figures where it was started to.
    fn drop(&mut self) {
        if self.sampler.is_none() && self.cut.is_none() {
            return;
        }
        let figures = self.measure();
        if let Some(cut) = self.cut.take() {
            cut.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(figures);
        }
    }
}

impl Sampler {
    /// Starts sampling; `None` where `/proc` cannot be read.
    fn spawn() -> Option<Sampler> {
        tree_cpu_seconds()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("assay-sampler".into())
            .spawn(move || {
                let mut peak: f64 = 0.0;
                let mut last = (Instant::now(), tree_cpu_seconds().unwrap_or(0.0));
                while !flag.load(Ordering::Relaxed) {
                    std::thread::park_timeout(SAMPLE_INTERVAL);
                    let now = (Instant::now(), tree_cpu_seconds().unwrap_or(last.1));
                    let dt = now.0.duration_since(last.0).as_secs_f64();
                    // Shorter windows are all tick noise.
                    if dt >= SAMPLE_INTERVAL.as_secs_f64() * 0.9 {
                        peak = peak.max((now.1 - last.1).max(0.0) / dt);
                        last = now;
                    }
                }
                peak
            })
            .ok()?;
        Some(Sampler { stop, handle })
    }

    fn stop(self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.thread().unpark();
        self.handle.join().unwrap_or(0.0)
    }
}

/// CPU seconds of this process and every child it has reaped.
pub fn process_cpu_seconds() -> f64 {
    cpu_seconds(libc::RUSAGE_SELF) + reaped_children_cpu_seconds()
}

/// CPU seconds of every child this process has reaped (and of theirs
/// that they reaped).
pub fn reaped_children_cpu_seconds() -> f64 {
    cpu_seconds(libc::RUSAGE_CHILDREN)
}

fn cpu_seconds(who: libc::c_int) -> f64 {
    // SAFETY: rusage is plain data (integers), for which all zeroes is a
    // value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct it is handed, nothing else.
    // Neither rustix nor std wraps it, and no other call gives the reaped
    // children's CPU time to the microsecond (`/proc`'s `cutime` counts
    // clock ticks).
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// CPU seconds of this process's whole live tree, each process counted with
/// its reaped children, read from `/proc`.
fn tree_cpu_seconds() -> Option<f64> {
    let me = std::process::id() as i32;
    let ticks = procfs::ticks_per_second() as f64;
    let mut stats = Vec::new();
    for process in procfs::process::all_processes().ok()?.flatten() {
        if let Ok(stat) = process.stat() {
            stats.push((
                stat.pid,
                stat.ppid,
                stat.utime + stat.stime,
                stat.cutime + stat.cstime,
            ));
        }
    }
    let mut in_tree = std::collections::HashSet::from([me]);
    // Parents precede children in pid order except after pid wrap-around;
    // repeat until nothing joins.
    loop {
        let before = in_tree.len();
        for (pid, ppid, ..) in &stats {
            if in_tree.contains(ppid) {
                in_tree.insert(*pid);
            }
        }
        if in_tree.len() == before {
            break;
        }
    }
    let total: i64 = stats
        .iter()
        .filter(|(pid, ..)| in_tree.contains(pid))
        .map(|(_, _, own, children)| *own as i64 + *children)
        .sum();
    Some(total as f64 / ticks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_names_round_trip() {
        for p in Phase::ALL {
            assert_eq!(Phase::from_stored(p.as_str()), Some(p));
        }
    }

    #[test]
    fn two_stretches_of_a_phase_add_up() {
        let figures = |wall_s, cpu_s, peak_busy| PhaseFigures {
            phase: Phase::Prepare,
            wall_s,
            cpu_s,
            avg_busy: cpu_s / wall_s,
            peak_busy,
        };
        let both = figures(3.0, 5.0, 1.9).then(figures(1.0, 0.2, 0.3));
        assert_eq!(both.phase, Phase::Prepare);
        assert_eq!((both.wall_s, both.cpu_s), (4.0, 5.2));
        assert!((both.avg_busy - 1.3).abs() < 1e-9);
        assert_eq!(both.peak_busy, 1.9);
    }

    #[test]
    fn a_phase_cut_short_leaves_its_figures_and_a_finished_one_none() {
        let cut = CutPhases::default();
        let finished = cut.start(Phase::Prepare).finish();
        assert_eq!(finished.phase, Phase::Prepare);
        let dropped = cut.start(Phase::Draw);
        std::thread::sleep(Duration::from_millis(20));
        drop(dropped);
        let left = cut.take();
        assert_eq!(left.len(), 1, "{left:?}");
        assert_eq!(left[0].phase, Phase::Draw);
        assert!(left[0].wall_s >= 0.02, "{left:?}");
        assert!(cut.take().is_empty(), "taken once");
    }
}

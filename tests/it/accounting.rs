//! Phase accounting against known loads. The test runs in a process of
//! its own (`common::alone`), so no other test's threads add CPU time to
//! the process while it measures.

use std::time::{Duration, Instant};

use assay::support::account::{Phase, PhaseGuard};

use crate::common;

fn spin(for_: Duration) {
    let until = Instant::now() + for_;
    let mut x = 0u64;
    while Instant::now() < until {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
    }
    std::hint::black_box(x);
}

fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec we hand it.
    assert_eq!(
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) },
        0
    );
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

#[test]
fn phases_measure_idle_one_core_and_a_child() {
    if !common::alone("accounting::phases_measure_idle_one_core_and_a_child") {
        return;
    }
    let guard = PhaseGuard::start(Phase::Draw);
    std::thread::sleep(Duration::from_millis(450));
    let idle = guard.finish();
    assert!(idle.wall_s >= 0.45, "{idle:?}");
    assert!(idle.cpu_s < 0.1, "{idle:?}");

    // On a loaded machine the spin gets less than a core; what it did get is
    // its thread's own CPU clock, which the phase must account for.
    let guard = PhaseGuard::start(Phase::Probe);
    let thread_cpu_before = thread_cpu_seconds();
    spin(Duration::from_millis(700));
    let spun = thread_cpu_seconds() - thread_cpu_before;
    let busy = guard.finish();
    assert!(spun > 0.05, "the spin got no CPU at all: {spun}");
    assert!(
        busy.cpu_s >= spun * 0.95,
        "{busy:?} misses the spin's {spun} CPU-s"
    );
    assert!(
        busy.cpu_s <= spun + 0.15,
        "{busy:?} counts far more than the spin's {spun} CPU-s"
    );
    assert!(
        (busy.avg_busy - busy.cpu_s / busy.wall_s).abs() < 1e-9,
        "{busy:?}"
    );
    assert!(busy.peak_busy >= busy.avg_busy, "{busy:?}");

    // A child's CPU counts once it is reaped.
    let guard = PhaseGuard::start(Phase::ScoreRun);
    let status = std::process::Command::new("sh")
        .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
        .status()
        .unwrap();
    assert!(status.success());
    let child = guard.finish();
    assert!(child.cpu_s > 0.05, "{child:?}");
}

//! The units still in one crate (a [`Group`]), how a group that failed
//! or overran is split, and which lane builds it: the package's main lane
//! for honest groups, beside it for what is left of a group that overran
//! its budget ([`crate::build::package::Package::lane`]).

use crate::build::package::ModuleKey;
use crate::build::verdict::{ProbeFailure, ProbeStats, MAX_RETRIES};

/// A wave is split into one first group per CPU only when each gets at
/// least this many units: below it, a second rustc's start-up (and std's
/// code generated once more) costs more than the core it uses gives back.
pub(super) const MIN_PER_GROUP: usize = 16;

/// After a pass with errors, what is left of a group is built again in
/// parts of this many units to twice that: most parts build now, and a
/// unit whose errors only a later phase finds (code generation's, say)
/// costs its own part another pass, not the whole group's front end once
/// more. Smaller parts waste less on such a unit and pay more crate
/// start-ups; `cargo bench --bench probe` put the balance near 20
/// (docs/benchmarks.md). Many crates cost no more CPU than one large one
/// otherwise: std's code generated once more per crate is paid back by
/// LLVM's work on smaller modules.
pub(super) const MIN_PER_PART: usize = 20;

/// One cargo build takes at most this many groups per CPU, so its wall
/// limit stays in proportion to a wave's.
pub(super) const GROUPS_PER_CPU: usize = 8;

/// A group of at most this many stopped at its budget or limits is built
/// as its units alone (side by side, one cargo start): finding the slow
/// one among so few by parts would cost another budget's wait.
pub(super) const MAX_SPLIT_ALONE: usize = 8;

/// The units still in one crate.
#[derive(Debug)]
pub(super) struct Group {
    pub(super) members: Vec<ModuleKey>,
    pub(super) passes: usize,
    pub(super) retries: usize,
    /// Built by itself, not beside other groups (see `take_together`).
    pub(super) solo: bool,
    /// Part of a group that overran its budget or limits: built beside
    /// the main lane, not in it.
    pub(super) suspect: bool,
}

impl Group {
    pub(super) fn new(members: Vec<ModuleKey>) -> Group {
        Group {
            members,
            passes: 0,
            retries: 0,
            solo: false,
            suspect: false,
        }
    }

    /// A group of `members` in the lane this one is in.
    pub(super) fn beside(&self, members: Vec<ModuleKey>) -> Group {
        Group {
            suspect: self.suspect,
            ..Group::new(members)
        }
    }

    /// The lane its builds take.
    pub(super) fn lane(&self) -> Lane {
        if self.suspect {
            Lane::Side
        } else {
            Lane::Main
        }
    }

    /// Records and says that the group is built again after `why`.
    pub(super) fn retry(&mut self, why: ProbeFailure, stats: &mut ProbeStats) {
        self.retries += 1;
        tracing::warn!(
            failure = why.as_str(),
            units = self.members.len(),
            attempt = self.retries,
            of = MAX_RETRIES,
            "a build failed for a reason that can be transient; probing again"
        );
        stats.retries.extend(
            self.members
                .iter()
                .filter_map(|k| match k {
                    ModuleKey::Candidate(idx) => Some(*idx),
                    ModuleKey::Committed => None,
                })
                .map(|idx| crate::build::verdict::ProbeRetry {
                    idx,
                    after: why,
                    attempt: self.retries,
                }),
        );
    }

    /// What is left after a pass with errors, in parts of at least
    /// [`MIN_PER_PART`] (the first part last, so it is built first), each
    /// keeping the passes so far.
    pub(super) fn parts_after_failing(self) -> Vec<Group> {
        let parts = (self.members.len() / MIN_PER_PART).max(1);
        let mut parts = split(&self.members, parts);
        for part in &mut parts {
            part.passes = self.passes;
            part.suspect = self.suspect;
        }
        parts
    }

    /// A group stopped at its budget or limits, in about `√n` parts (the
    /// first part last, so it is built first), or, when small, its units
    /// alone: parts built side by side cost about what the group did, and
    /// a slow unit then costs its own part's budget and its own limit,
    /// not a halving per level.
    ///
    /// The parts are suspects: they build beside the main lane. While no
    /// honest group has built in the package (`rate_known` false), a part
    /// may spend one unit's whole limit before it is split again, so the
    /// units are built alone at once: a rustc start each costs far less.
    pub(super) fn parts_when_slow(self, rate_known: bool) -> Vec<Group> {
        let n = self.members.len();
        let count = if n <= MAX_SPLIT_ALONE || !rate_known {
            n
        } else {
            n.isqrt() + usize::from(n.isqrt().pow(2) < n)
        };
        let mut parts = split(&self.members, count);
        for part in &mut parts {
            part.suspect = true;
        }
        parts
    }

    /// Two groups of half the members each (the first half last, so it
    /// is built first), in its lane.
    pub(super) fn halves(mut self) -> Vec<Group> {
        let back = self.members.split_off(self.members.len() / 2);
        let front = std::mem::take(&mut self.members);
        vec![self.beside(back), self.beside(front)]
    }
}

/// The first groups of a wave: one per CPU when each gets enough units,
/// the first units on top of the stack.
pub(super) fn first_groups(units: &[ModuleKey], parallel: usize) -> Vec<Group> {
    split(units, parallel.min(units.len() / MIN_PER_GROUP).max(1))
}

/// `units` in `parts` groups whose sizes differ by one at most, the first
/// units on top of the stack.
fn split(units: &[ModuleKey], parts: usize) -> Vec<Group> {
    let bound = |i: usize| i * units.len() / parts;
    (0..parts)
        .rev()
        .map(|i| Group::new(units[bound(i)..bound(i + 1)].to_vec()))
        .filter(|g| !g.members.is_empty())
        .collect()
}

/// Where a group's build runs (see `SharedBuild::build`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lane {
    /// The package's main lane: honest groups, one build at a time.
    Main,
    /// Beside it: what is left of groups that overran.
    Side,
}

impl Lane {
    /// For the build log.
    pub(super) fn name(self) -> &'static str {
        match self {
            Lane::Main => "main",
            Lane::Side => "side",
        }
    }
}

/// Which lanes have a build of this wave running.
#[derive(Debug, Default)]
pub(super) struct Lanes {
    pub(super) main: bool,
    pub(super) side: bool,
}

/// The topmost group of the stack in `lane` and the groups to build
/// beside it (`take_together`), or `None` when no group is in `lane`.
pub(super) fn take_lane(
    groups: &mut Vec<Group>,
    lane: Lane,
    parallel: usize,
) -> Option<Vec<Group>> {
    let top = groups.iter().rposition(|g| g.lane() == lane)?;
    let first = groups.remove(top);
    Some(take_together(first, groups, parallel))
}

/// `first` and the groups of its kind and lane to build beside it in one
/// cargo build: every unit to be built alone, or up to [`GROUPS_PER_CPU`]
/// groups of several per CPU (cargo keeps a rustc per CPU busy with
/// them). A group marked solo is built by itself.
fn take_together(first: Group, groups: &mut Vec<Group>, parallel: usize) -> Vec<Group> {
    if first.solo {
        return vec![first];
    }
    let single = first.members.len() == 1;
    let lane = first.lane();
    let mut together = vec![first];
    let mut i = groups.len();
    while i > 0 && (single || together.len() < parallel * GROUPS_PER_CPU) {
        i -= 1;
        let g = &groups[i];
        if !g.solo && !g.members.is_empty() && (g.members.len() == 1) == single && g.lane() == lane
        {
            together.push(groups.remove(i));
        }
    }
    together
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_group_is_split_in_about_root_n_parts_and_a_small_one_alone() {
        let sizes = |n: usize| -> Vec<usize> {
            let mut parts = Group::new(keys(0..n)).parts_when_slow(true);
            assert_eq!(parts.last().unwrap().members[0], ModuleKey::Candidate(0));
            let mut sizes = Vec::new();
            while let Some(p) = parts.pop() {
                assert_eq!(p.passes, 0);
                sizes.push(p.members.len());
            }
            assert_eq!(sizes.iter().sum::<usize>(), n);
            sizes
        };
        assert_eq!(sizes(2), [1, 1]);
        assert_eq!(sizes(8), [1; 8]);
        assert_eq!(sizes(9), [3, 3, 3]);
        assert_eq!(sizes(42), [6; 7]);
        assert_eq!(sizes(22).len(), 5);
        assert_eq!(sizes(200).len(), 15);
    }

    #[test]
    fn what_is_left_of_a_slow_group_builds_beside_the_main_lane_and_stays_there() {
        let parts = Group::new(keys(0..42)).parts_when_slow(true);
        assert!(parts.iter().all(|p| p.lane() == Lane::Side));
        let part = parts.into_iter().next().unwrap();
        assert!(part.halves().iter().all(|h| h.lane() == Lane::Side));
        let mut failing = Group::new(keys(0..42)).parts_when_slow(true).remove(0);
        failing.passes = 1;
        assert!(failing
            .parts_after_failing()
            .iter()
            .all(|p| p.lane() == Lane::Side && p.passes == 1));
        assert!(Group::new(keys(0..42))
            .halves()
            .iter()
            .all(|h| h.lane() == Lane::Main));
    }

    #[test]
    fn a_slow_group_is_built_alone_while_no_honest_group_has_built() {
        let parts = Group::new(keys(0..42)).parts_when_slow(false);
        assert_eq!(parts.len(), 42);
        assert!(parts.iter().all(|p| p.members.len() == 1 && p.suspect));
    }

    #[test]
    fn one_cargo_build_takes_groups_of_one_lane() {
        let mut stack = vec![Group::new(keys(0..4)), Group::new(keys(4..8))];
        stack.extend(Group::new(keys(8..17)).parts_when_slow(true));
        let side = take_lane(&mut stack, Lane::Side, 2).unwrap();
        assert_eq!(side.len(), 3);
        assert!(side.iter().all(|g| g.lane() == Lane::Side));
        let main = take_lane(&mut stack, Lane::Main, 2).unwrap();
        assert_eq!(main.len(), 2);
        assert!(main.iter().all(|g| g.lane() == Lane::Main));
        assert!(stack.is_empty());
        assert!(take_lane(&mut stack, Lane::Side, 2).is_none());
    }

    #[test]
    fn halves_build_the_first_half_first() {
        let keys: Vec<ModuleKey> = (0..5).map(ModuleKey::Candidate).collect();
        let mut halves = Group::new(keys).halves();
        let first = halves.pop().unwrap();
        assert_eq!(
            first.members,
            [ModuleKey::Candidate(0), ModuleKey::Candidate(1)]
        );
        assert_eq!(halves[0].members.len(), 3);
    }

    fn keys(range: std::ops::Range<usize>) -> Vec<ModuleKey> {
        range.map(ModuleKey::Candidate).collect()
    }

    #[test]
    fn a_wave_gets_a_first_group_per_cpu_only_when_each_is_worth_a_rustc() {
        let sizes = |n: usize, parallel: usize| -> Vec<usize> {
            let mut groups = first_groups(&keys(0..n), parallel);
            let mut sizes = Vec::new();
            while let Some(g) = groups.pop() {
                sizes.push(g.members.len());
            }
            sizes
        };
        assert_eq!(sizes(31, 2), [31]);
        assert_eq!(sizes(32, 2), [16, 16]);
        assert_eq!(sizes(201, 2), [100, 101]);
        assert_eq!(sizes(201, 1), [201]);
        assert_eq!(sizes(40, 4), [20, 20]);
        assert!(first_groups(&[], 2).is_empty());
        let mut groups = first_groups(&keys(0..40), 2);
        assert_eq!(groups.pop().unwrap().members[0], ModuleKey::Candidate(0));
    }

    #[test]
    fn groups_of_several_go_up_to_their_cap_and_units_alone_all_together() {
        let mut solo = Group::new(keys(9..10));
        solo.solo = true;
        let mut stack = vec![
            Group::new(keys(0..4)),
            Group::new(keys(4..5)),
            solo,
            Group::new(keys(5..8)),
            Group::new(keys(8..9)),
            Group::new(keys(10..13)),
        ];
        let first = stack.pop().unwrap();
        let together = take_together(first, &mut stack, 2);
        let firsts: Vec<_> = together.iter().map(|g| g.members[0].clone()).collect();
        assert_eq!(
            firsts,
            [
                ModuleKey::Candidate(10),
                ModuleKey::Candidate(5),
                ModuleKey::Candidate(0)
            ]
        );

        let first = stack.pop().unwrap();
        let together = take_together(first, &mut stack, 2);
        let firsts: Vec<_> = together.iter().map(|g| g.members[0].clone()).collect();
        assert_eq!(
            firsts,
            [ModuleKey::Candidate(8), ModuleKey::Candidate(4)],
            "every unit alone but the solo one"
        );
        let first = stack.pop().unwrap();
        assert!(first.solo);
        assert_eq!(take_together(first, &mut stack, 2).len(), 1);
        assert!(stack.is_empty());

        let mut stack: Vec<Group> = (0..20)
            .map(|g| Group::new(keys(g * 3..g * 3 + 3)))
            .collect();
        let first = stack.pop().unwrap();
        let together = take_together(first, &mut stack, 1);
        assert_eq!(together.len(), GROUPS_PER_CPU);
        assert_eq!(stack.len(), 20 - GROUPS_PER_CPU);
    }

    #[test]
    fn what_a_failing_pass_leaves_is_built_in_parts_worth_a_rustc_each() {
        let sizes = |n: usize| -> Vec<usize> {
            let mut group = Group::new(keys(0..n));
            group.passes = 1;
            let mut parts = group.parts_after_failing();
            assert!(parts.iter().all(|p| p.passes == 1));
            let mut sizes = Vec::new();
            while let Some(p) = parts.pop() {
                sizes.push(p.members.len());
            }
            sizes
        };
        assert_eq!(sizes(39), [39]);
        assert_eq!(sizes(40), [20, 20]);
        assert_eq!(sizes(91), [22, 23, 23, 23]);
        assert_eq!(sizes(457).len(), 22);
        assert!(sizes(457).iter().all(|&n| (20..=21).contains(&n)));
        let mut parts = Group::new(keys(0..40)).parts_after_failing();
        assert_eq!(parts.pop().unwrap().members[0], ModuleKey::Candidate(0));
    }
}

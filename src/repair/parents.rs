//! Which failing candidates the next round repairs, and how many children
//! each gets.

use std::collections::BTreeSet;

use super::feedback::compiler_errors;
use super::{Attempt, AttemptState};
use crate::spec::ParentChoice;

/// A parent and the candidates the next round draws for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parent {
    pub idx: usize,
    pub children: usize,
}

/// The next round's parents, by candidate index: the best
/// `choice.best_failing` that ran and failed (most cases passed first,
/// then the later round, then the lower index), then the
/// `choice.compile_failures` that did not build (fewest compiler errors
/// first, then the later round, then the lower index). Only attempts not
/// already in `repaired` are taken, so each candidate is repaired once and
/// a later round reaches further down the ranking. Candidates that pass
/// every case, and those whose state says nothing of the code, never are.
pub fn choose_parents(
    attempts: &[Attempt],
    repaired: &BTreeSet<usize>,
    choice: ParentChoice,
) -> Vec<usize> {
    let open = || attempts.iter().filter(|a| !repaired.contains(&a.idx));
    let mut failing: Vec<(usize, u32, usize)> = open()
        .filter(|a| !a.passes_all())
        .filter_map(|a| Some((a.passed()?, a.round, a.idx)))
        .collect();
    failing.sort_by(|x, y| y.0.cmp(&x.0).then(y.1.cmp(&x.1)).then(x.2.cmp(&y.2)));
    let mut broken: Vec<(usize, u32, usize)> = open()
        .filter_map(|a| match &a.state {
            AttemptState::Broken { diagnostics, .. } => {
                Some((compiler_errors(diagnostics).len(), a.round, a.idx))
            }
            _ => None,
        })
        .collect();
    broken.sort_by(|x, y| x.0.cmp(&y.0).then(y.1.cmp(&x.1)).then(x.2.cmp(&y.2)));
    failing
        .iter()
        .take(choice.best_failing)
        .chain(broken.iter().take(choice.compile_failures))
        .map(|(_, _, idx)| *idx)
        .collect()
}

/// Spreads a round's `n` candidates over `parents` as evenly as can be,
/// the first parents (the best) taking the remainder. A parent that would
/// get none (more parents than candidates) is dropped.
pub fn spread(parents: &[usize], n: usize) -> Vec<Parent> {
    if parents.is_empty() {
        return Vec::new();
    }
    let (each, extra) = (n / parents.len(), n % parents.len());
    parents
        .iter()
        .enumerate()
        .map(|(i, idx)| Parent {
            idx: *idx,
            children: each + usize::from(i < extra),
        })
        .filter(|p| p.children > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{broken, ran};
    use super::*;

    fn choice(best_failing: usize, compile_failures: usize) -> ParentChoice {
        ParentChoice {
            best_failing,
            compile_failures,
        }
    }

    #[test]
    fn the_best_failing_and_the_least_broken_are_chosen() {
        let attempts = [
            ran(0, "pff"),
            ran(1, "ppp"), // passes: never a parent
            ran(2, "ppf"),
            broken(3, 3),
            broken(4, 1),
            ran(5, "pff"),
            broken(6, 1),
            Attempt {
                state: AttemptState::Other,
                ..ran(7, "p")
            },
        ];
        let none = BTreeSet::new();
        assert_eq!(choose_parents(&attempts, &none, choice(2, 2)), [2, 0, 4, 6]);
        assert_eq!(choose_parents(&attempts, &none, choice(0, 5)), [4, 6, 3]);
        assert_eq!(choose_parents(&attempts, &none, choice(9, 0)), [2, 0, 5]);
        // Already repaired: the next ones down.
        let done = BTreeSet::from([2, 4]);
        assert_eq!(choose_parents(&attempts, &done, choice(1, 1)), [0, 6]);
    }

    #[test]
    fn a_later_round_wins_a_tie() {
        let mut later = ran(9, "pff");
        later.round = 2;
        let attempts = [ran(0, "pff"), later];
        assert_eq!(
            choose_parents(&attempts, &BTreeSet::new(), choice(1, 0)),
            [9]
        );
    }

    #[test]
    fn a_round_is_spread_evenly_best_first() {
        let counts = |p: &[usize], n| -> Vec<(usize, usize)> {
            spread(p, n).iter().map(|p| (p.idx, p.children)).collect()
        };
        assert_eq!(counts(&[7, 3, 5], 8), [(7, 3), (3, 3), (5, 2)]);
        assert_eq!(counts(&[7, 3, 5], 2), [(7, 1), (3, 1)]);
        assert_eq!(counts(&[7], 4), [(7, 4)]);
        assert!(counts(&[], 4).is_empty());
        let total: usize = spread(&[1, 2, 3, 4, 5, 6, 7], 100)
            .iter()
            .map(|p| p.children)
            .sum();
        assert_eq!(total, 100);
    }
}

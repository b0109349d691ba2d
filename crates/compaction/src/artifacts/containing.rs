//! Which of many names a list of lines spells out: `line.contains(name)` for every pair, in one
//! pass over the lines. The ledger asks it of every path and seen name against every listed
//! line (rendering) and of every new name against every item it holds (recording): name by
//! name and line by line that was most of a long session's compaction time.

use aho_corasick::{AhoCorasick, AhoCorasickKind};

/// Below this many name × line pairs the names are looked for one by one: `str::contains` is a
/// vectorized search, and building an automaton costs more than the few searches it saves (a
/// tool result brings a handful of names). Above it, one automaton pass over the lines wins.
const AUTOMATON_PAIRS: usize = 4_096;

/// For each of `names`, the index of the first of `lines` that contains it, as
/// `lines.position(|line| line.contains(name))` says (so the empty name is in any first line).
pub(super) fn first_containing<'a>(
    names: &[&str],
    lines: impl IntoIterator<Item = &'a str>,
) -> Vec<Option<usize>> {
    first_containing_from(names, lines, AUTOMATON_PAIRS)
}

/// [`first_containing`], with an automaton from `automaton_pairs` pairs on.
fn first_containing_from<'a>(
    names: &[&str],
    lines: impl IntoIterator<Item = &'a str>,
    automaton_pairs: usize,
) -> Vec<Option<usize>> {
    let lines: Vec<&str> = lines.into_iter().collect();
    let mut first: Vec<Option<usize>> = vec![None; names.len()];
    let mut searched: Vec<usize> = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        if name.is_empty() {
            first[i] = (!lines.is_empty()).then_some(0);
        } else {
            searched.push(i);
        }
    }
    // A contiguous NFA: built in time linear in the names. One that fails to build (it never
    // does for a ledger's names) leaves the pairwise search, which gives the same answer.
    let automaton = if searched.len() * lines.len() >= automaton_pairs {
        AhoCorasick::builder()
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .build(searched.iter().map(|&i| names[i]))
            .ok()
    } else {
        None
    };
    let Some(automaton) = automaton else {
        for &i in &searched {
            first[i] = lines.iter().position(|line| line.contains(names[i]));
        }
        return first;
    };
    let mut left = searched.len();
    for (at, line) in lines.iter().enumerate() {
        for found in automaton.find_overlapping_iter(line) {
            let i = searched[found.pattern().as_usize()];
            if first[i].is_none() {
                first[i] = Some(at);
                left -= 1;
            }
        }
        if left == 0 {
            break;
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The same answer as asking `contains` of every line for every name (overlapping and
        /// repeated names, names inside names, the empty name).
        #[test]
        fn same_as_contains_line_by_line(
            names in proptest::collection::vec("[ab/]{0,3}", 0..8),
            lines in proptest::collection::vec("[ab/ ]{0,8}", 0..8),
        ) {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let expected: Vec<Option<usize>> = names
                .iter()
                .map(|name| lines.iter().position(|line| line.contains(name)))
                .collect();
            // Both roads: one by one, and through the automaton.
            for automaton_pairs in [usize::MAX, 0] {
                prop_assert_eq!(
                    &first_containing_from(&names, lines.iter().map(String::as_str), automaton_pairs),
                    &expected
                );
            }
        }
    }
}

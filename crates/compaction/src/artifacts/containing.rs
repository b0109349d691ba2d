//! Which of many names a list of lines spells out: `line.contains(name)` for every pair, in one
//! pass over the lines. The ledger asks it of every path and seen name against every listed
//! line (rendering) and of every new name against every item it holds (recording): name by
//! name and line by line that was most of a long session's compaction time.

use aho_corasick::{AhoCorasick, AhoCorasickKind};

/// For each of `names`, the index of the first of `lines` that contains it, as
/// `lines.position(|line| line.contains(name))` says (so the empty name is in any first line).
pub(super) fn first_containing<'a>(
    names: &[&str],
    lines: impl IntoIterator<Item = &'a str>,
) -> Vec<Option<usize>> {
    let mut first: Vec<Option<usize>> = vec![None; names.len()];
    let searched: Vec<usize> = (0..names.len()).filter(|&i| !names[i].is_empty()).collect();
    // An automaton too large to build (it never is for a ledger's names) falls back to the
    // pairwise search, which gives the same answer.
    // A contiguous NFA: built in time linear in the names (a DFA, the default for few names,
    // costs more to build than the search it saves when a tool result brings five names).
    let automaton = AhoCorasick::builder()
        .kind(Some(AhoCorasickKind::ContiguousNFA))
        .build(searched.iter().map(|&i| names[i]))
        .ok();
    for (at, line) in lines.into_iter().enumerate() {
        for (i, name) in names.iter().enumerate() {
            if name.is_empty() && first[i].is_none() {
                first[i] = Some(at);
            }
        }
        match &automaton {
            Some(automaton) => {
                for found in automaton.find_overlapping_iter(line) {
                    let i = searched[found.pattern().as_usize()];
                    first[i].get_or_insert(at);
                }
            }
            None => {
                for &i in &searched {
                    if first[i].is_none() && line.contains(names[i]) {
                        first[i] = Some(at);
                    }
                }
            }
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
            prop_assert_eq!(
                first_containing(&names, lines.iter().map(String::as_str)),
                expected
            );
        }
    }
}

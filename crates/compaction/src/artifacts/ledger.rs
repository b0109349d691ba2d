//! The artifact ledger's data: commands, errors, tests and symbols, each ordered by recency.

use serde::{Deserialize, Serialize};

/// Items keyed by name, oldest first; recording a name again moves it to the newest place and
/// replaces its value, so the newest status always wins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recent<V> {
    items: Vec<(String, V)>,
}

impl<V> Default for Recent<V> {
    fn default() -> Self {
        Recent { items: Vec::new() }
    }
}

impl<V: Clone> Recent<V> {
    /// Record `key` as the newest item, with `value`.
    pub fn record(&mut self, key: impl Into<String>, value: V) {
        let key = key.into();
        self.items.retain(|(k, _)| *k != key);
        self.items.push((key, value));
    }

    /// The items, oldest first.
    pub fn oldest_first(&self) -> impl DoubleEndedIterator<Item = (&str, &V)> {
        self.items.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The value recorded for `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.items.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// How many items there are.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Keep only the items whose key passes `keep`.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.items.retain(|(k, _)| keep(k));
    }

    /// Record every item of `newer` after ours (it happened later).
    pub fn merge(&mut self, newer: &Recent<V>) {
        for (key, value) in &newer.items {
            self.record(key.clone(), value.clone());
        }
    }
}

/// How a test ended the last time it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestStatus {
    /// It passed.
    Passed,
    /// It failed (or errored).
    Failed,
    /// It was skipped or ignored.
    Skipped,
}

impl TestStatus {
    /// The word used in the `<tests>` block.
    pub fn as_str(self) -> &'static str {
        match self {
            TestStatus::Passed => "passed",
            TestStatus::Failed => "failed",
            TestStatus::Skipped => "skipped",
        }
    }

    /// The status a `<tests>` block word names.
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "passed" => Some(TestStatus::Passed),
            "failed" => Some(TestStatus::Failed),
            "skipped" => Some(TestStatus::Skipped),
            _ => None,
        }
    }
}

/// What a segment of tool calls and results produced beyond file paths: the commands run and
/// how they exited, the errors seen, the tests run and how they ended, the symbols written.
///
/// Built only from tool-call arguments and tool results (never from a model's prose), rendered
/// after a summary's body as tagged blocks, parsed back from the previous summary and merged
/// (newest status wins), so what an engineer would look up by name survives compaction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactLedger {
    /// Shell commands, keyed by their one-line text, with the exit code when the result said.
    pub commands: Recent<Option<i32>>,
    /// Error lines (`error[E0308]: …`, `TypeError: …`), keyed by the line.
    pub errors: Recent<()>,
    /// Tests by name, with their latest outcome.
    pub tests: Recent<TestStatus>,
    /// Symbols defined or edited (`fn parse`, `class Parser`), with the file when known.
    pub symbols: Recent<Option<String>>,
    /// Names the agent itself wrote in its messages — backticked identifiers and file paths —
    /// quoted as written, with no claim attached (what an engineer would search for later).
    #[serde(default)]
    pub named: Recent<()>,
    /// File paths named outside the file lists: in shell commands' arguments, in path
    /// arguments of tools that neither read nor write, in the agent's prose (and file trees it
    /// drew). One spelling per file, the longest.
    #[serde(default)]
    pub paths: Recent<()>,
    /// Error types and test names seen anywhere but not listed above: in files read, tool
    /// output, user messages, the agent's text. Names only, no claim attached.
    #[serde(default)]
    pub seen: Recent<()>,
}

impl ArtifactLedger {
    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
            && self.errors.is_empty()
            && self.tests.is_empty()
            && self.symbols.is_empty()
            && self.named.is_empty()
            && self.paths.is_empty()
            && self.seen.is_empty()
    }

    /// Add what `newer` recorded (it happened after everything here): a union in which the
    /// newer status of a command or test replaces the older one.
    pub fn merge(&mut self, newer: &ArtifactLedger) {
        self.commands.merge(&newer.commands);
        self.errors.merge(&newer.errors);
        self.tests.merge(&newer.tests);
        self.symbols.merge(&newer.symbols);
        self.named.merge(&newer.named);
        for (path, ()) in newer.paths.oldest_first() {
            super::paths::record_path(&mut self.paths, path);
        }
        self.seen.merge(&newer.seen);
    }

    /// The names an engineer would search for afterwards: each command, error line and test
    /// name, and each symbol's bare name. Used to measure recall.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        names.extend(self.commands.oldest_first().map(|(k, _)| k.to_string()));
        names.extend(self.errors.oldest_first().map(|(k, _)| k.to_string()));
        names.extend(self.tests.oldest_first().map(|(k, _)| k.to_string()));
        names.extend(
            self.symbols
                .oldest_first()
                .map(|(k, _)| symbol_name(k).to_string()),
        );
        names.extend(self.named.oldest_first().map(|(k, _)| k.to_string()));
        names.extend(self.paths.oldest_first().map(|(k, _)| k.to_string()));
        names.extend(self.seen.oldest_first().map(|(k, _)| k.to_string()));
        names
    }

    /// Keep only the items whose name (as [`ArtifactLedger::names`] gives it) passes `keep`.
    pub(crate) fn retain_names(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.commands.retain(&mut keep);
        self.errors.retain(&mut keep);
        self.tests.retain(&mut keep);
        self.symbols.retain(|k| keep(symbol_name(k)));
        self.named.retain(&mut keep);
        self.paths.retain(&mut keep);
        self.seen.retain(&mut keep);
    }
}

/// A symbol's bare name (`parse` of `fn parse`): what an engineer searches for.
fn symbol_name(symbol: &str) -> &str {
    symbol.rsplit(' ').next().unwrap_or(symbol)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn recording_again_moves_to_newest_and_replaces_the_value() {
        let mut tests = Recent::default();
        tests.record("a", TestStatus::Failed);
        tests.record("b", TestStatus::Passed);
        tests.record("a", TestStatus::Passed);
        let order: Vec<_> = tests.oldest_first().map(|(k, v)| (k, *v)).collect();
        assert_eq!(
            order,
            [("b", TestStatus::Passed), ("a", TestStatus::Passed)]
        );
    }
}

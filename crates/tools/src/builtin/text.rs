//! Small text facts the file tools report and the ledger stores.

use sha2::{Digest, Sha256};

/// Hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Lines in `text` as an editor counts them: a final newline does not start another line.
pub fn line_count(text: &str) -> usize {
    text.lines().count()
}

/// The 1-based line that byte `offset` of `text` is on.
pub(crate) fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Whether a file's first bytes look binary (a NUL byte, as git and grep decide).
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8000).any(|b| *b == 0)
}

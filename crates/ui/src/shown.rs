//! What a waiting tool call was shown as: the digest the page sends back with its answer, so
//! the server answers only the call the person saw (`Approvals::decide_shown`).

use sha2::{Digest as _, Sha256};

/// The SHA-256 of `tool` and `arguments` (length-prefixed, so no two pairs run together), in
/// hex. A model writes both, so the digest must be one it cannot make collide.
pub(crate) fn digest(tool: &str, arguments: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update((tool.len() as u64).to_be_bytes());
    hasher.update(tool.as_bytes());
    hasher.update(arguments.as_bytes());
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::digest;

    #[test]
    fn the_tool_and_the_arguments_do_not_run_together() {
        assert_ne!(digest("run", "x{}"), digest("runx", "{}"));
        assert_eq!(digest("run", "{}"), digest("run", "{}"));
        assert_eq!(digest("run", "{}").len(), 64);
    }
}

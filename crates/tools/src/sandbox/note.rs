//! The one line troupe adds to a confined command's result when the command met a refusal, so
//! the model knows the refusal is the sandbox's (and asks the user) rather than retrying.

use super::{Reads, Sandbox};

/// How the C library words the errors a sandbox gives (EACCES, EPERM, EROFS, and EXDEV for a
/// link or rename that would give a file more rights), as commands print them.
const REFUSALS: &[&str] = &[
    "Permission denied",
    "Operation not permitted",
    "Read-only file system",
    "Invalid cross-device link",
];

impl Sandbox {
    /// The line naming the policy, for a command whose output shows a refusal; `None` when it
    /// shows none or nothing was confined.
    pub fn note_for(&self, output: &str) -> Option<String> {
        if !self.policy.confines() || !REFUSALS.iter().any(|r| output.contains(r)) {
            return None;
        }
        Some(self.note())
    }

    /// The line naming the policy and what it allows.
    pub fn note(&self) -> String {
        let writes = if self.policy == super::SandboxPolicy::ReadOnly {
            "could write nowhere"
        } else {
            "could write only under the workspace and $TMPDIR (.git and troupe's own files \
             read-only)"
        };
        let reads = match self.reads {
            Reads::Anywhere => "",
            Reads::Limited(_) => ", read only the system's directories and the workspace",
        };
        let network = if self.network {
            "had the network"
        } else {
            "had no network"
        };
        format!(
            "[sandbox] this command ran under the {} policy: it {writes}{reads}, {network}, and \
             could not signal or trace processes outside it; a refusal above is the sandbox's \
             — ask the user if the task needs more",
            self.policy
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::sandbox::Sandbox;

    #[test]
    fn a_refusal_gets_the_line_naming_the_policy_and_nothing_else_does() {
        let sandbox = Sandbox::default();
        let note = sandbox
            .note_for("sh: 1: cannot create /etc/x: Permission denied")
            .unwrap();
        assert!(note.contains("workspace-write"), "{note}");
        assert!(note.contains("ask the user"), "{note}");
        assert!(sandbox.note_for("hello").is_none());
        assert!(Sandbox::full().note_for("Permission denied").is_none());
        let read_only = Sandbox::read_only()
            .note_for("touch: cannot touch 'x': Read-only file system")
            .unwrap();
        assert!(read_only.contains("could write nowhere"), "{read_only}");
    }
}

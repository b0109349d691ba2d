//! `[agents.NAME] pinned`: the messages an agent's conversations start with, pinned so that
//! compaction never touches them (a project's rules file, as a user or system message).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use troupe_protocol::ChatMessage;

use super::BuildError;

/// One entry of `[agents.NAME] pinned`: a file's text (relative paths from `[tools]
/// workspace`, else the current directory; read when the agent is built) or inline text, as a
/// user message (the default) or a system message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinnedConfig {
    /// A file whose text is the message.
    pub file: Option<PathBuf>,
    /// The message's text.
    pub text: Option<String>,
    /// `user` (default) or `system`.
    #[serde(default)]
    pub role: PinnedRole,
}

/// The role of a pinned message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PinnedRole {
    /// A user message: every model reads it; the default.
    #[default]
    User,
    /// A system message after the system prompt.
    System,
}

/// The message one `pinned` entry stands for (the validation made sure it has a file or a
/// text); a relative file is read from the agent's workspace root.
pub(super) fn pinned_message(
    agent: &str,
    pin: &PinnedConfig,
    root: &Path,
) -> Result<ChatMessage, BuildError> {
    let text = match (&pin.file, &pin.text) {
        (Some(file), _) => {
            let path = root.join(file);
            std::fs::read_to_string(&path).map_err(|e| BuildError::PinnedFile {
                agent: agent.to_string(),
                path,
                reason: e.to_string(),
            })?
        }
        (None, text) => text.clone().unwrap_or_default(),
    };
    Ok(match pin.role {
        PinnedRole::User => ChatMessage::user(text),
        PinnedRole::System => ChatMessage::system(text),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use troupe_models::ScriptedModel;
    use troupe_protocol::{ChatModel, Role};

    use super::super::Config;
    use super::*;

    fn spec_of(toml: &str) -> Result<troupe_agents::AgentSpec, BuildError> {
        let config = Config::parse(toml).unwrap();
        let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new("m", []));
        config.agent_spec("coder", &BTreeMap::new(), Some(model))
    }

    #[test]
    fn a_pinned_file_and_text_become_the_specs_pins_in_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("RULES.md"), "Never force-push.").unwrap();
        let root = dir.path().display().to_string().replace('\\', "/");
        let spec = spec_of(&format!(
            "[tools]\nworkspace = \"{root}\"\n[agents.coder]\npinned = [{{ file = \"RULES.md\" }}, {{ text = \"Be brief.\", role = \"system\" }}]\n"
        ))
        .unwrap();
        assert_eq!(spec.pinned.len(), 2);
        assert_eq!(spec.pinned[0].role, Role::User);
        assert_eq!(spec.pinned[0].text(), "Never force-push.");
        assert_eq!(spec.pinned[1].role, Role::System);
        assert_eq!(spec.pinned[1].text(), "Be brief.");
    }

    #[test]
    fn a_pin_with_both_or_neither_source_is_refused_by_its_key() {
        for entry in ["{ role = \"user\" }", "{ file = \"a\", text = \"b\" }"] {
            let err = Config::parse(&format!("[agents.coder]\npinned = [{entry}]\n")).unwrap_err();
            let message = err.to_string();
            assert!(message.contains("agents.coder.pinned[0]"), "{message}");
            assert!(
                message.contains("exactly one of `file` and `text`"),
                "{message}"
            );
        }
        let err = Config::parse("[agents.coder]\npinned = [{ file = \"a\", role = \"tool\" }]\n")
            .unwrap_err();
        assert!(err.to_string().contains("pinned[0].role"), "{err}");
    }

    #[test]
    fn a_missing_pinned_file_fails_the_build_naming_agent_and_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string().replace('\\', "/");
        let err = spec_of(&format!(
            "[tools]\nworkspace = \"{root}\"\n[agents.coder]\npinned = [{{ file = \"NOPE.md\" }}]\n"
        ))
        .unwrap_err();
        assert!(
            matches!(&err, BuildError::PinnedFile { agent, path, .. }
            if agent == "coder" && path.ends_with("NOPE.md")),
            "{err}"
        );
    }
}

//! [`Cassettes`]: record or replay a whole team run, one cassette per agent in one directory.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use troupe_protocol::sync::lock;
use troupe_protocol::{ChatModel, ChatRequest, ChatStream, ModelError, ModelInfo};

use super::divergence::ReplayDivergence;
use super::format::cassette_path;
use super::{RecordingModel, ReplayError, ReplayModel};

/// The environment variable that turns cassettes on for a team built by `Team::builder()`:
/// `record:DIR` or `replay:DIR` (see [`Cassettes::from_env`]).
pub const CASSETTES_ENV: &str = "TROUPE_CASSETTES";

/// Whether a run's model calls are written to cassettes or served from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CassetteMode {
    /// Call the real models and write every call to the agent's cassette (truncated first).
    Record,
    /// Call no model: serve each agent's calls from its cassette, failing any call that is
    /// not the recorded one.
    Replay,
}

/// The cassettes of a team run: a directory holding one cassette per agent, `DIR/<agent>.jsonl`
/// (the agent's own model calls and the compression agent's calls made with that model), plus
/// `DIR/compressor.jsonl` for a compression model of its own.
///
/// Record a run, then replay it: every agent gets the answers it got, so it makes the same tool
/// calls and publishes the same events; the first call that differs (a changed prompt, a tool
/// answering otherwise, calls made in another order) fails with a [`ReplayDivergence`] naming
/// the agent and its call. Calls are matched per asking agent and per call count, never in the
/// order agents running in parallel happened to make them.
///
/// ```no_run
/// # fn demo(model: std::sync::Arc<dyn troupe_protocol::ChatModel>) -> Result<(), Box<dyn std::error::Error>> {
/// use troupe_models::Cassettes;
/// let cassettes = Cassettes::replay("tests/cassettes/release_notes");
/// let coder_model = cassettes.wrap("coder", model)?; // serves tests/cassettes/release_notes/coder.jsonl
/// // … run the team, then:
/// cassettes.verify()?; // the first divergence, or a recorded call the run never asked
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Cassettes {
    mode: CassetteMode,
    dir: PathBuf,
    divergences: Arc<Mutex<Vec<ReplayDivergence>>>,
    replays: Arc<Mutex<Vec<Arc<ReplayModel>>>>,
}

impl Cassettes {
    /// Record to `dir` (created when missing).
    pub fn record(dir: impl Into<PathBuf>) -> Self {
        Self::new(CassetteMode::Record, dir.into())
    }

    /// Replay from `dir`.
    pub fn replay(dir: impl Into<PathBuf>) -> Self {
        Self::new(CassetteMode::Replay, dir.into())
    }

    fn new(mode: CassetteMode, dir: PathBuf) -> Self {
        Cassettes {
            mode,
            dir,
            divergences: Arc::default(),
            replays: Arc::default(),
        }
    }

    /// The cassettes [`CASSETTES_ENV`] asks for: `record:DIR`, `replay:DIR`, or nothing (unset,
    /// empty or `off`).
    ///
    /// # Errors
    /// [`ReplayError::Switch`] for any other value.
    pub fn from_env() -> Result<Option<Self>, ReplayError> {
        match std::env::var(CASSETTES_ENV) {
            Ok(value) => Self::parse(&value),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(ReplayError::Switch {
                value: String::new(),
                message: "not valid UTF-8".into(),
            }),
        }
    }

    /// The cassettes a [`CASSETTES_ENV`] value asks for (see [`Cassettes::from_env`]).
    ///
    /// # Errors
    /// [`ReplayError::Switch`] for a value that is not `record:DIR`, `replay:DIR` or `off`.
    pub fn parse(value: &str) -> Result<Option<Self>, ReplayError> {
        let value = value.trim();
        if value.is_empty() || value == "off" {
            return Ok(None);
        }
        let switch_error = |message: &str| ReplayError::Switch {
            value: value.to_string(),
            message: message.to_string(),
        };
        let (mode, dir) = value
            .split_once(':')
            .ok_or_else(|| switch_error("expected `record:DIR` or `replay:DIR`"))?;
        if dir.trim().is_empty() {
            return Err(switch_error("the directory is missing"));
        }
        match mode.trim() {
            "record" => Ok(Some(Self::record(dir.trim()))),
            "replay" => Ok(Some(Self::replay(dir.trim()))),
            _ => Err(switch_error("the mode is `record` or `replay`")),
        }
    }

    /// Recording or replaying.
    pub fn mode(&self) -> CassetteMode {
        self.mode
    }

    /// The directory of the cassettes.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cassette of `agent`: `DIR/<agent>.jsonl`, characters unsafe in a file name written
    /// `%XX`.
    pub fn path(&self, agent: &str) -> PathBuf {
        cassette_path(&self.dir, agent)
    }

    /// `agent`'s model with its cassette: recording `model`'s calls to it, or (replaying)
    /// serving them from it instead of calling `model` at all.
    ///
    /// # Errors
    /// [`ReplayError`] when the cassette cannot be created (recording), or is missing, does not
    /// load, or was written in another format version (replaying; the file is left as it is).
    pub fn wrap(
        &self,
        agent: &str,
        model: Arc<dyn ChatModel>,
    ) -> Result<Arc<dyn ChatModel>, ReplayError> {
        let path = self.path(agent);
        match self.mode {
            CassetteMode::Record => {
                std::fs::create_dir_all(&self.dir).map_err(|cause| ReplayError::Io {
                    path: self.dir.clone(),
                    cause,
                })?;
                Ok(Arc::new(RecordingModel::create(Shared(model), path)?))
            }
            CassetteMode::Replay => {
                if !path.exists() {
                    return Err(ReplayError::Missing {
                        agent: agent.to_string(),
                        path,
                    });
                }
                let replay = Arc::new(
                    ReplayModel::from_file(&path)?.owned_by(agent, Arc::clone(&self.divergences)),
                );
                lock(&self.replays).push(Arc::clone(&replay));
                Ok(replay)
            }
        }
    }

    /// Every divergence the replay met so far, in the order met: the first is where the run
    /// left the recording (later ones usually follow from it: an agent whose teammate failed
    /// gets a different tool result, so its own next request differs too).
    pub fn divergences(&self) -> Vec<ReplayDivergence> {
        lock(&self.divergences).clone()
    }

    /// After a replayed run: the first divergence, or else the first recorded call that the
    /// run never asked (by agent name). Recording: always `Ok`.
    ///
    /// # Errors
    /// The [`ReplayDivergence`] found.
    pub fn verify(&self) -> Result<(), ReplayDivergence> {
        if let Some(first) = lock(&self.divergences).first() {
            return Err(first.clone());
        }
        let replays = lock(&self.replays);
        let mut unasked: Vec<ReplayDivergence> =
            replays.iter().filter_map(|r| r.unasked()).collect();
        unasked.sort_by(|a, b| (&a.owner, &a.agent).cmp(&(&b.owner, &b.agent)));
        unasked.into_iter().next().map_or(Ok(()), Err)
    }
}

/// A shared model as a [`ChatModel`] of its own, for [`RecordingModel`] to own.
struct Shared(Arc<dyn ChatModel>);

#[async_trait]
impl ChatModel for Shared {
    fn info(&self) -> ModelInfo {
        self.0.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        self.0.chat_stream(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_reads_record_replay_or_off_and_names_a_bad_value() {
        let record = Cassettes::parse("record:tests/cassettes").unwrap().unwrap();
        assert_eq!(
            (record.mode(), record.dir()),
            (CassetteMode::Record, Path::new("tests/cassettes"))
        );
        let replay = Cassettes::parse(" replay:C:\\runs\\a ").unwrap().unwrap();
        assert_eq!(
            (replay.mode(), replay.dir()),
            (CassetteMode::Replay, Path::new("C:\\runs\\a"))
        );
        assert!(Cassettes::parse("").unwrap().is_none());
        assert!(Cassettes::parse("off").unwrap().is_none());
        for (bad, why) in [
            ("replay", "expected `record:DIR` or `replay:DIR`"),
            ("replay:", "the directory is missing"),
            ("rewind:dir", "the mode is `record` or `replay`"),
        ] {
            let err = Cassettes::parse(bad).err().unwrap().to_string();
            assert_eq!(err, format!("TROUPE_CASSETTES={bad:?}: {why}"));
        }
    }

    #[test]
    fn an_agent_name_never_leaves_the_directory() {
        let cassettes = Cassettes::record("dir");
        assert_eq!(cassettes.path("coder-2"), Path::new("dir/coder-2.jsonl"));
        assert_eq!(cassettes.path("../x"), Path::new("dir/%2E.%2Fx.jsonl"));
        assert_eq!(cassettes.path("a/b:c"), Path::new("dir/a%2Fb%3Ac.jsonl"));
    }
}

//! Record any model's calls to JSONL cassettes and serve them back, so tests run real-model
//! transcripts — one agent's or a whole team's — deterministically and offline.
//!
//! - `format`: the file (a header with the format's version and the model, one line per call
//!   keyed by asking agent and call count); messages are stored in their OpenAI wire shape, so
//!   a cassette is readable and diffable;
//! - `recording`: [`RecordingModel`], any model with its calls appended as they end;
//! - `replaying`: [`ReplayModel`], a cassette served back, each asker's calls in order;
//! - `difference`: the first way a request differs from the recorded one, in words;
//! - `divergence`: [`ReplayDivergence`], where a replay left its recording;
//! - `cassettes`: [`Cassettes`], the one switch that records or replays a whole team.

use std::path::PathBuf;

mod cassettes;
mod difference;
mod divergence;
mod format;
mod recording;
mod replaying;

pub use cassettes::{CASSETTES_ENV, CassetteMode, Cassettes};
pub use divergence::{DivergenceKind, ReplayDivergence};
pub use format::CASSETTE_VERSION;
pub use recording::RecordingModel;
pub use replaying::ReplayModel;

/// Characters per streamed text delta of a replayed answer whose cassette did not record how
/// it was cut (the first format): about a token.
pub const REPLAY_CHUNK_CHARS: usize = 4;

/// Errors reading or writing a cassette, or choosing cassettes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The file could not be opened, read or written.
    #[error("cassette {path}: {cause}")]
    Io {
        /// The cassette file's path.
        path: PathBuf,
        /// The open, read or write error.
        cause: std::io::Error,
    },
    /// A line is not a recorded call (a corrupt or hand-broken cassette).
    #[error("cassette {path}, line {line}: {message}")]
    Parse {
        /// The cassette file's path.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The cassette was written in a format version this troupe does not read.
    #[error(
        "cassette {path} is format version {found}; this troupe reads version {supported} \
         (and the first format, with no header): record the run again with this troupe"
    )]
    Version {
        /// The cassette file's path.
        path: PathBuf,
        /// The version its header names, as written.
        found: String,
        /// The version this troupe reads and writes ([`CASSETTE_VERSION`]).
        supported: u32,
    },
    /// A replay found no cassette for an agent: it was added since the run was recorded.
    #[error(
        "agent `{agent}` has no cassette at {path}: record the run again (TROUPE_CASSETTES=record:DIR)"
    )]
    Missing {
        /// The agent.
        agent: String,
        /// Where its cassette would be.
        path: PathBuf,
    },
    /// [`CASSETTES_ENV`] holds something that is not a cassette switch.
    #[error("TROUPE_CASSETTES={value:?}: {message}")]
    Switch {
        /// The variable's value.
        value: String,
        /// What is wrong with it.
        message: String,
    },
}

//! A compression agent on another node: a [`CompactionRequest`]'s trip over the wire and back.
//!
//! The request travels as its serde form (without what cannot leave the asker's process), under
//! the kind `troupe.compaction/1`; the receiving node hands it to its compression agent as the
//! same [`CompressorJob::Compact`] a local asker sends, and the answer comes back as a
//! [`RemoteCompaction`] or the error's text. When that node cannot be reached the asker compacts
//! on its own node (`client.rs`). A [`Hurry`] for a job queued there travels the same way, under
//! `troupe.compaction.hurry/1`.

use serde::{Deserialize, Serialize};
use troupe_compaction::{Archive, Compaction, CompactionError};
use troupe_protocol::CompactionReport;
use troupe_protocol::{ChatMessage, StoredMessage};
use troupe_runtime::{Reply, Team, WireJob};

use crate::compression::job::{CompactionRequest, CompressorJob, Hurry};

/// A [`Compaction`] as it travels back: its messages in their stored form, so their ids and
/// kinds (summaries, stubs) arrive with them — a [`ChatMessage`]'s own serde form is the OpenAI
/// message alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteCompaction {
    /// The compacted conversation's messages, with ids and kinds.
    pub messages: Vec<StoredMessage>,
    /// Every original the compaction replaced or removed.
    pub archive: Archive,
    /// What the compaction did.
    pub report: CompactionReport,
}

impl From<Compaction> for RemoteCompaction {
    fn from(compaction: Compaction) -> Self {
        RemoteCompaction {
            messages: compaction
                .messages
                .iter()
                .map(StoredMessage::from)
                .collect(),
            archive: compaction.archive,
            report: compaction.report,
        }
    }
}

impl From<RemoteCompaction> for Compaction {
    fn from(remote: RemoteCompaction) -> Self {
        Compaction {
            messages: remote.messages.into_iter().map(ChatMessage::from).collect(),
            archive: remote.archive,
            report: remote.report,
        }
    }
}

impl WireJob for CompactionRequest {
    const KIND: &'static str = "troupe.compaction/1";
    /// The validated compaction, or why it failed (as text: the error's types stay home).
    type Reply = Result<RemoteCompaction, String>;
    type Job = CompressorJob;

    fn into_job(self, reply: Reply<Self::Reply>) -> CompressorJob {
        let reply = reply.map(|answer: Result<Compaction, CompactionError>| {
            answer
                .map(RemoteCompaction::from)
                .map_err(|e| e.to_string())
        });
        CompressorJob::Compact(Box::new(self), reply)
    }
}

impl WireJob for Hurry {
    const KIND: &'static str = "troupe.compaction.hurry/1";
    /// Whether a queued compaction was re-ranked.
    type Reply = bool;
    type Job = CompressorJob;

    fn into_job(self, reply: Reply<bool>) -> CompressorJob {
        CompressorJob::Hurry(self, reply)
    }
}

/// Let agents on other nodes of a cluster send this team's compression agent their compactions,
/// and hurry the ones they now wait for (called wherever a team gets its compression agent).
pub(crate) fn accept_remote_compactions(team: &Team) {
    team.directory().accept_wire_job::<CompactionRequest>();
    team.directory().accept_wire_job::<Hurry>();
}

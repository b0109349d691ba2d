//! [`ReplayModel`]: a cassette served back, one queue per asking agent.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use troupe_protocol::sync::lock;
use troupe_protocol::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, ModelDelta, ModelError, ModelInfo,
    response_deltas,
};

use super::difference::first_difference;
use super::divergence::{DivergenceKind, ReplayDivergence};
use super::format::{Record, RecordedRequest, RecordedResponse, load};
use super::{REPLAY_CHUNK_CHARS, ReplayError};

/// Serves recorded calls back, each asking agent's in the order it made them, checking that
/// each request is the one recorded.
///
/// Calls are matched per asker ([`ChatRequest::agent`]) and per call count, never by the
/// order of the cassette's lines: agents that share a model ask concurrently. A request that
/// differs from the recording, or one more than was recorded, fails with
/// [`ModelError::InvalidRequest`] whose text is a [`ReplayDivergence`], e.g. ``agent `coder`,
/// model call 2: the request differs from the recorded one: messages[3] (user) content
/// differs: at byte 0: expected "…", got "…"``. The mismatched record is not consumed, and the
/// divergence is kept ([`ReplayModel::divergences`]).
///
/// A recorded answer streams as the recorded one did: its text in the recorded deltas (in
/// deltas of [`REPLAY_CHUNK_CHARS`] characters for a cassette of the first format), then its
/// tool calls, usage and finish (a recorded error fails the call before any delta). Keys of
/// the recorded message that troupe does not interpret (`refusal`, …) are not deltas and are
/// not replayed.
#[derive(Debug)]
pub struct ReplayModel {
    info: ModelInfo,
    path: PathBuf,
    owner: Option<String>,
    lanes: Mutex<HashMap<Option<String>, Lane>>,
    divergences: Arc<Mutex<Vec<ReplayDivergence>>>,
}

/// One asker's recorded calls.
#[derive(Debug, Default)]
struct Lane {
    left: VecDeque<Record>,
    served: usize,
}

impl ReplayModel {
    /// Load a cassette written by [`RecordingModel`](super::RecordingModel). Nothing is
    /// written to it.
    ///
    /// # Errors
    /// [`ReplayError`] when the file cannot be read, a line is not a recorded call, or it was
    /// written in another version of the format.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ReplayError> {
        let path = path.as_ref().to_path_buf();
        let loaded = load(&path)?;
        let first_record = || {
            loaded
                .lanes
                .values()
                .filter_map(|lane| lane.front())
                .map(|r| r.model.clone())
                .next()
        };
        let info = loaded
            .model
            .clone()
            .or_else(first_record)
            .unwrap_or_else(|| ModelInfo {
                name: "replay".to_string(),
                context_window: 8192,
                supports_tools: true,
            });
        let lanes = loaded
            .lanes
            .into_iter()
            .map(|(asker, left)| (asker, Lane { left, served: 0 }))
            .collect();
        Ok(ReplayModel {
            info,
            path,
            owner: None,
            lanes: Mutex::new(lanes),
            divergences: Arc::default(),
        })
    }

    /// Name the agent this cassette belongs to (in divergences of other askers on it), and
    /// keep divergences in `sink` (shared by a team's [`Cassettes`](super::Cassettes)).
    pub(super) fn owned_by(mut self, owner: &str, sink: Arc<Mutex<Vec<ReplayDivergence>>>) -> Self {
        self.owner = Some(owner.to_string());
        self.divergences = sink;
        self
    }

    /// Calls not yet served, of every asker.
    pub fn remaining(&self) -> usize {
        lock(&self.lanes).values().map(|lane| lane.left.len()).sum()
    }

    /// Every divergence met so far, in the order met (the first is where the run left the
    /// recording; later ones usually follow from it).
    pub fn divergences(&self) -> Vec<ReplayDivergence> {
        lock(&self.divergences).clone()
    }

    /// The first asker (by name) whose recorded calls the run did not all ask, as a
    /// [`DivergenceKind::NeverAsked`].
    pub fn unasked(&self) -> Option<ReplayDivergence> {
        let lanes = lock(&self.lanes);
        let mut open: Vec<_> = lanes.iter().filter(|(_, l)| !l.left.is_empty()).collect();
        open.sort_by(|a, b| a.0.cmp(b.0));
        open.first().map(|(asker, lane)| ReplayDivergence {
            agent: (*asker).clone(),
            owner: self.owner.clone(),
            cassette: self.path.clone(),
            call: lane.served + 1,
            kind: DivergenceKind::NeverAsked {
                left: lane.left.len(),
            },
        })
    }

    fn diverged(&self, agent: Option<String>, call: usize, kind: DivergenceKind) -> ModelError {
        let divergence = ReplayDivergence {
            agent,
            owner: self.owner.clone(),
            cassette: self.path.clone(),
            call,
            kind,
        };
        let error = ModelError::InvalidRequest(divergence.to_string());
        lock(&self.divergences).push(divergence);
        error
    }
}

#[async_trait]
impl ChatModel for ReplayModel {
    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let got = RecordedRequest::from(&request);
        let asker = request.agent;
        let mut lanes = lock(&self.lanes);
        // A cassette of the first format has one queue, for every asker.
        let key = if lanes.contains_key(&asker) {
            asker.clone()
        } else {
            None
        };
        let lane = lanes.entry(key).or_default();
        let call = lane.served + 1;
        let Some(record) = lane.left.front() else {
            let recorded = lane.served;
            drop(lanes);
            return Err(self.diverged(asker, call, DivergenceKind::NotRecorded { recorded }));
        };
        if let Some(difference) = first_difference(&record.request, &got) {
            drop(lanes);
            return Err(self.diverged(asker, call, DivergenceKind::RequestDiffers(difference)));
        }
        let Some(record) = lane.left.pop_front() else {
            return Err(ModelError::Unavailable(
                "replay: cassette emptied concurrently".into(),
            ));
        };
        lane.served += 1;
        match (record.response, record.error) {
            (Some(r), _) => Ok(Box::pin(futures::stream::iter(
                replayed_deltas(r).into_iter().map(Ok),
            ))),
            (None, Some(e)) => Err(e.into()),
            (None, None) => Err(ModelError::Unavailable("replay: empty record".into())),
        }
    }
}

/// The recorded answer's deltas: its text cut as it was streamed when the cut adds up to the
/// text, else in [`REPLAY_CHUNK_CHARS`]; then what [`response_deltas`] streams after the text.
fn replayed_deltas(recorded: RecordedResponse) -> Vec<ModelDelta> {
    let RecordedResponse {
        message,
        usage,
        finish_reason,
        text_chunks,
    } = recorded;
    let text = message.text();
    let deltas = response_deltas(
        ChatResponse {
            message,
            usage,
            finish_reason,
        },
        REPLAY_CHUNK_CHARS,
    );
    if text_chunks.is_empty() || text_chunks.iter().sum::<usize>() != text.chars().count() {
        return deltas;
    }
    let mut cut = Vec::with_capacity(text_chunks.len());
    let mut rest = text.as_str();
    for chars in text_chunks {
        let end = rest
            .char_indices()
            .nth(chars)
            .map_or(rest.len(), |(i, _)| i);
        let (head, tail) = rest.split_at(end);
        if !head.is_empty() {
            cut.push(ModelDelta::Text(head.to_string()));
        }
        rest = tail;
    }
    cut.extend(
        deltas
            .into_iter()
            .filter(|d| !matches!(d, ModelDelta::Text(_))),
    );
    cut
}

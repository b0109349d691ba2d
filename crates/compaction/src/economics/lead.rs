//! How long a compaction's answer takes to land, in the asker's turns: the minimum-gain rule's
//! "the window needs it" is judged where the conversation will be when the answer is applied,
//! not where it is when the compaction starts.
//!
//! A blocking compaction lands before the next turn. One worked ahead lands turns later (the
//! agent goes on while it runs): declined as not paying yet, it would start again only when
//! the window needs it one turn ahead — too late to land before the limit, so the agent would
//! wait for it at the limit, the stall working ahead exists to remove.

use serde::{Deserialize, Serialize};

/// The turns the asker goes on before a compaction's answer is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lead {
    /// Applied before the next turn: a blocking compaction (and an older peer's request, which
    /// says nothing of its lead).
    #[default]
    NextTurn,
    /// Applied this many turns later: a compaction worked ahead, as long as the asker's last
    /// one that ran took to land.
    Turns(u32),
    /// Applied later, by how much is not known yet (the asker has not seen one land): the
    /// window is taken to need it, so the rule never declines it.
    Unknown,
}

impl Lead {
    /// The turns the conversation grows before the answer is applied (at least one); `None`
    /// when unknown.
    pub fn turns(self) -> Option<f64> {
        match self {
            Lead::NextTurn => Some(1.0),
            Lead::Turns(n) => Some(f64::from(n.max(1))),
            Lead::Unknown => None,
        }
    }
}

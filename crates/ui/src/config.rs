//! UiConfig: where the view listens and how much it keeps.

use std::net::{Ipv4Addr, SocketAddr};

use crate::view::Marks;

/// How the live view is served.
#[derive(Debug, Clone)]
pub struct UiConfig {
    /// Where to listen; loopback on a random port by default. Any other address is served
    /// with a warning: the token is then all that stands between the network and the team.
    pub bind: SocketAddr,
    /// Messages each viewer may have waiting; a viewer that falls further behind is told it
    /// lagged and re-syncs from a snapshot, so a slow browser never holds the team up.
    pub viewer_queue: usize,
    /// Events kept for a viewer that opens the page later (the page's event log).
    pub history: usize,
    /// The context meter's marks, as fractions of the usable window (the agents' defaults
    /// unless told otherwise: the view cannot read an agent's own policy from its events).
    pub marks: Marks,
}

impl Default for UiConfig {
    fn default() -> Self {
        UiConfig {
            bind: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            viewer_queue: 1024,
            history: 10_000,
            marks: Marks::default(),
        }
    }
}

impl UiConfig {
    /// The warning to log when `bind` is not a loopback address.
    pub fn exposure_warning(&self) -> Option<String> {
        (!self.bind.ip().is_loopback()).then(|| {
            format!(
                "the troupe view listens on {}: anyone who can reach it and learns the token can \
                 watch the team and answer its approvals; prefer a loopback address",
                self.bind
            )
        })
    }
}

//! UiConfig: where the view listens and how much it keeps.

use std::net::{Ipv4Addr, SocketAddr};

use troupe_host::serve::ServeLimits;
use troupe_models::RateLimitedModel;

use crate::agent_view::Marks;

/// How the live view is served.
#[derive(Clone)]
pub struct UiConfig {
    /// Where to listen; loopback on a random port by default. Any other address is served
    /// with a warning: the token is then all that stands between the network and the team.
    pub bind: SocketAddr,
    /// Messages each viewer may have waiting; a viewer that falls further behind is told it
    /// lagged and re-syncs from a snapshot, so a slow browser never holds the team up.
    pub viewer_queue: usize,
    /// Events kept for a viewer that opens the page later (the page's event log).
    pub history: usize,
    /// The context meter's marks, as fractions of the usable window, for an agent whose own
    /// have not been read yet (its `/context` gives those from its context policy; the
    /// agents' defaults unless told otherwise).
    pub marks: Marks,
    /// The rate-limited models whose waits the page shows, by name.
    pub rate_limits: Vec<(String, RateLimitedModel)>,
    /// What one client may hold of the server (timeouts, connections).
    pub limits: ServeLimits,
}

impl std::fmt::Debug for UiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |list: Vec<&String>| list.into_iter().cloned().collect::<Vec<_>>();
        f.debug_struct("UiConfig")
            .field("bind", &self.bind)
            .field("viewer_queue", &self.viewer_queue)
            .field("history", &self.history)
            .field("marks", &self.marks)
            .field("limits", &self.limits)
            .field(
                "rate_limits",
                &names(self.rate_limits.iter().map(|(n, _)| n).collect()),
            )
            .finish()
    }
}

impl Default for UiConfig {
    fn default() -> Self {
        UiConfig {
            bind: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            viewer_queue: 1024,
            history: 10_000,
            marks: Marks::default(),
            rate_limits: Vec::new(),
            limits: ServeLimits::default(),
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

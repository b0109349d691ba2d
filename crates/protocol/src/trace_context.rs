//! Trace context that travels inside actor messages, in W3C `traceparent` form.
//!
//! Two things link an asked agent's spans to its asker's. In one process, ractor's default
//! `message_span_propogation` feature runs the handler inside the span the message was sent in,
//! so `invoke_agent` is that span's child (`tests/suite/trace_tree.rs` checks one tree). That
//! span neither names the trace nor crosses a node, so every message between agents also carries
//! a [`TraceContext`]: the trace id spans record, and across nodes the parent span id.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::trace::parse_span_id;
use crate::trace_id::TraceId;

/// Identifies one request's trace and the span that caused the current message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TraceContext {
    /// 128-bit trace id shared by every span of one request.
    pub trace_id: u128,
    /// 64-bit id of the span that sent the message.
    pub span_id: u64,
}

static COUNTER: AtomicU64 = AtomicU64::new(1);

/// A process-unique, well-mixed 64-bit id (never zero).
fn fresh_u64() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // splitmix64 over time and counter: unique per process, spread across the id space.
    let mut z = now ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).max(1)
}

impl TraceContext {
    /// Start a new trace (a new user request).
    pub fn new_root() -> Self {
        TraceContext {
            trace_id: (u128::from(fresh_u64()) << 64) | u128::from(fresh_u64()),
            span_id: fresh_u64(),
        }
    }

    /// A context for a child span of this one: same trace, new span id.
    pub fn child(&self) -> Self {
        TraceContext {
            trace_id: self.trace_id,
            span_id: fresh_u64(),
        }
    }

    /// The trace's id (shown as 32 lowercase hex digits): what events and spans carry.
    pub fn id(&self) -> TraceId {
        TraceId::from_u128(self.trace_id)
    }

    /// The W3C `traceparent` header value.
    pub fn traceparent(&self) -> String {
        format!("00-{:032x}-{:016x}-01", self.trace_id, self.span_id)
    }

    /// Parse a W3C `traceparent` header value.
    pub fn from_traceparent(s: &str) -> Option<Self> {
        let mut parts = s.trim().split('-');
        let (_version, trace, span) = (parts.next()?, parts.next()?, parts.next()?);
        let trace_id = trace.parse::<TraceId>().ok()?.as_u128();
        let span_id = parse_span_id(span)?;
        Some(TraceContext { trace_id, span_id })
    }
}

impl fmt::Display for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.traceparent())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_children_share_the_trace() {
        let root = TraceContext::new_root();
        let child = root.child();
        assert_eq!(child.trace_id, root.trace_id);
        assert_ne!(child.span_id, root.span_id);
        assert_eq!(
            TraceContext::from_traceparent(&root.traceparent()),
            Some(root)
        );
        assert_eq!(TraceContext::from_traceparent("00-zz-11-01"), None);
    }
}

//! The `[serve]` table: what one client may hold of the HTTP servers troupe opens.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use troupe_host::serve::ServeLimits;

use super::validate::Problem;

/// The longest any of the timeouts may be set to (an hour): past it a half-sent request head
/// is, in effect, held for as long as the client likes.
const MAX_TIMEOUT_SECS: u64 = 3_600;

/// The most connections the servers may be told to hold at once.
const MAX_CONNECTIONS: usize = 100_000;

/// `[serve]`: the bounds of `troupe a2a serve` and of the live view (`troupe chat --ui`,
/// `troupe node --ui`), in seconds. Unset keys keep [`ServeLimits::default`]'s (10 s for a
/// request head, 15 s between a body's bytes, 30 s for a stalled write, 512 connections).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeSection {
    /// The longest a request head may take to arrive, and an idle connection may wait for one.
    pub head_timeout_secs: Option<u64>,
    /// The longest a request body may go without bringing more bytes.
    pub body_idle_timeout_secs: Option<u64>,
    /// The longest a response write may wait for the client to read.
    pub write_stall_timeout_secs: Option<u64>,
    /// The most connections open at once.
    pub max_connections: Option<usize>,
}

impl ServeSection {
    /// The limits this table sets, over the defaults (checked when the file is loaded:
    /// a key out of its range is an error naming it).
    pub fn limits(&self) -> ServeLimits {
        let defaults = ServeLimits::default();
        let secs = |set: Option<u64>, default: Duration| set.map_or(default, Duration::from_secs);
        ServeLimits {
            head: secs(self.head_timeout_secs, defaults.head),
            body_idle: secs(self.body_idle_timeout_secs, defaults.body_idle),
            write_stall: secs(self.write_stall_timeout_secs, defaults.write_stall),
            max_connections: self.max_connections.unwrap_or(defaults.max_connections),
        }
    }

    /// The first key out of its range.
    pub(super) fn validate(&self) -> Result<(), Problem> {
        for (key, set) in [
            ("head_timeout_secs", self.head_timeout_secs),
            ("body_idle_timeout_secs", self.body_idle_timeout_secs),
            ("write_stall_timeout_secs", self.write_stall_timeout_secs),
        ] {
            if let Some(secs) = set
                && !(1..=MAX_TIMEOUT_SECS).contains(&secs)
            {
                return Err((
                    format!("serve.{key}"),
                    format!("must be from 1 to {MAX_TIMEOUT_SECS} seconds, got {secs}"),
                ));
            }
        }
        if let Some(n) = self.max_connections
            && !(1..=MAX_CONNECTIONS).contains(&n)
        {
            return Err((
                "serve.max_connections".to_string(),
                format!("must be from 1 to {MAX_CONNECTIONS}, got {n}"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_keys_keep_the_defaults_and_set_ones_replace_them() {
        assert_eq!(ServeSection::default().limits(), ServeLimits::default());
        let section = ServeSection {
            head_timeout_secs: Some(2),
            max_connections: Some(8),
            ..ServeSection::default()
        };
        let limits = section.limits();
        assert_eq!(limits.head, Duration::from_secs(2));
        assert_eq!(limits.max_connections, 8);
        assert_eq!(limits.body_idle, ServeLimits::default().body_idle);
    }

    #[test]
    fn a_zero_or_absurd_bound_is_refused_naming_its_key() {
        let zero = ServeSection {
            body_idle_timeout_secs: Some(0),
            ..ServeSection::default()
        };
        assert_eq!(
            zero.validate().unwrap_err().0,
            "serve.body_idle_timeout_secs"
        );
        let absurd = ServeSection {
            head_timeout_secs: Some(u64::MAX),
            ..ServeSection::default()
        };
        let (key, message) = absurd.validate().unwrap_err();
        assert_eq!(key, "serve.head_timeout_secs");
        assert!(message.contains("3600"), "{message}");
        let none = ServeSection {
            max_connections: Some(0),
            ..ServeSection::default()
        };
        assert_eq!(none.validate().unwrap_err().0, "serve.max_connections");
    }
}

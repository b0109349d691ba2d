//! [`TraceId`]: the id of one request's trace, as events, trace files and exporters name it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The 128-bit id every span and event of one request shares (see
/// [`TraceContext::id`](crate::TraceContext::id)).
///
/// Shown and serialized as 32 lowercase hex digits — the form of a trace file's `trace_id`, the
/// `troupe.trace_id` span attribute and W3C `traceparent` — so an [`EventRecord`] serializes as
/// it did when its trace id was a string.
///
/// [`EventRecord`]: crate::EventRecord
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceId(u128);

/// A string that is not a trace id: 32 hex digits, not all zero (W3C `traceparent`'s rule).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a trace id (32 hex digits, not all zero): {0:?}")]
pub struct TraceIdError(String);

impl TraceId {
    /// The id with this value.
    pub const fn from_u128(id: u128) -> Self {
        TraceId(id)
    }

    /// Its value.
    pub const fn as_u128(self) -> u128 {
        self.0
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceId({self})")
    }
}

impl FromStr for TraceId {
    type Err = TraceIdError;

    fn from_str(hex: &str) -> Result<Self, Self::Err> {
        // `from_str_radix` alone would take a sign and fewer digits.
        let digits = hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit());
        match u128::from_str_radix(hex, 16) {
            Ok(id) if digits && id != 0 => Ok(TraceId(id)),
            _ => Err(TraceIdError(hex.to_string())),
        }
    }
}

impl Serialize for TraceId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TraceId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let hex = String::deserialize(deserializer)?;
        hex.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_id_is_written_and_read_as_32_hex_digits() {
        let id = TraceId::from_u128(0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c);
        let hex = "0af7651916cd43dd8448eb211c80319c";
        assert_eq!(id.to_string(), hex);
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{hex}\""));
        assert_eq!(
            serde_json::from_str::<TraceId>(&format!("\"{hex}\"")).unwrap(),
            id
        );
        assert_eq!(hex.parse::<TraceId>(), Ok(id));
        for bad in [
            "",
            "+af7651916cd43dd8448eb211c80319c",
            "0af7",
            &"0".repeat(32),
        ] {
            assert!(bad.parse::<TraceId>().is_err(), "{bad}");
        }
    }
}

//! Ids for messages, tasks and contexts: 128 random bits, hex.

use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh id. Random where the system gives randomness; else unique within the process (a
/// counter and the time), which is all an id a task store keys by needs.
pub(crate) fn new_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_ok() {
        return bytes.iter().map(|b| format!("{b:02x}")).collect();
    }
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{nanos:x}-{:x}", COUNTER.fetch_add(1, Ordering::Relaxed))
}

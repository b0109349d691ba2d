//! The providers' server-sent-events decoder is troupe-host's, the one A2A streams go through
//! too: this module only names it for the provider modules.

pub(super) use troupe_host::sse::{SseDecoder, SseEvent, SseLimits};

//! One pass over one JSON-RPC line that keeps only a few bytes: how deep it nests, and its
//! top-level `id`, `method` and whether it is a reply. A line too long to keep or too deep to
//! parse can so still be answered under its own id, and every line can be told apart (request,
//! notification, reply) without parsing it.
//!
//! The scan does not validate: for malformed JSON what it reports is meaningless, and the line
//! goes on to the SDK's parser, which refuses it.

/// The longest `id` or `method` value kept, in bytes; a longer one is not reported.
const MAX_VALUE_BYTES: usize = 256;
/// The longest top-level key told apart (`method` is the longest of interest).
const MAX_KEY_BYTES: usize = 8;

/// What to do with the top-level key's value being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    Id,
    Method,
}

/// Where the scan is in the top-level object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Top {
    /// Not inside a top-level object (before it, after it, or the line is not one).
    Outside,
    /// The next string at depth 1 is a key.
    ExpectKey,
    /// Reading a key.
    InKey,
    /// A key was read; its `:` comes next.
    AfterKey,
    /// Reading a value at depth 1 (or nested below it).
    Value,
}

/// The scan of one line so far.
#[derive(Debug)]
pub(crate) struct LineScan {
    depth: usize,
    max_depth: usize,
    in_string: bool,
    escaped: bool,
    top: Top,
    key: Vec<u8>,
    keeping: Option<Keep>,
    value: Vec<u8>,
    value_overflow: bool,
    id: Option<Vec<u8>>,
    method: Option<Vec<u8>>,
    is_reply: bool,
}

impl Default for LineScan {
    fn default() -> Self {
        LineScan {
            depth: 0,
            max_depth: 0,
            in_string: false,
            escaped: false,
            top: Top::Outside,
            key: Vec::with_capacity(MAX_KEY_BYTES),
            keeping: None,
            value: Vec::new(),
            value_overflow: false,
            id: None,
            method: None,
            is_reply: false,
        }
    }
}

impl LineScan {
    /// Scan `bytes`, the next part of the line.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    /// The deepest nesting seen (1 for `{}`).
    pub(crate) fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// The raw text of the top-level `id` value, when there was one short enough to keep.
    pub(crate) fn id(&self) -> Option<&[u8]> {
        self.id.as_deref()
    }

    /// The raw text of the top-level `method` value (quotes included).
    pub(crate) fn method(&self) -> Option<&[u8]> {
        self.method.as_deref()
    }

    /// Whether the line has a top-level `result` or `error`: a reply to a request.
    pub(crate) fn is_reply(&self) -> bool {
        self.is_reply
    }

    fn byte(&mut self, b: u8) {
        if self.in_string {
            self.string_byte(b);
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.top == Top::ExpectKey {
                    self.top = Top::InKey;
                    self.key.clear();
                    return;
                }
                self.keep(b);
            }
            b'{' | b'[' => {
                self.keep(b);
                self.depth += 1;
                self.max_depth = self.max_depth.max(self.depth);
                if self.depth == 1 {
                    self.top = if b == b'{' {
                        Top::ExpectKey
                    } else {
                        Top::Outside
                    };
                }
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    self.end_value();
                    self.top = Top::Outside;
                } else {
                    self.keep(b);
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b',' if self.depth == 1 => {
                self.end_value();
                if self.top != Top::Outside {
                    self.top = Top::ExpectKey;
                }
            }
            b':' if self.depth == 1 && self.top == Top::AfterKey => {
                self.top = Top::Value;
                self.keeping = match self.key.as_slice() {
                    b"id" => Some(Keep::Id),
                    b"method" => Some(Keep::Method),
                    b"result" | b"error" => {
                        self.is_reply = true;
                        None
                    }
                    _ => None,
                };
                self.value.clear();
                self.value_overflow = false;
            }
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => self.keep(b),
        }
    }

    fn string_byte(&mut self, b: u8) {
        let in_key = self.depth == 1 && self.top == Top::InKey;
        let ends = !self.escaped && b == b'"';
        self.escaped = !self.escaped && b == b'\\';
        if ends {
            self.in_string = false;
            if in_key {
                self.top = Top::AfterKey;
                return;
            }
        }
        if in_key {
            if self.key.len() <= MAX_KEY_BYTES {
                self.key.push(b);
            }
            return;
        }
        self.keep(b);
    }

    /// Keep `b` as part of the value being read, when it is one of interest.
    fn keep(&mut self, b: u8) {
        if self.keeping.is_none() || self.value_overflow {
            return;
        }
        if self.value.len() == MAX_VALUE_BYTES {
            self.value_overflow = true;
            self.value.clear();
            return;
        }
        self.value.push(b);
    }

    fn end_value(&mut self) {
        let Some(keep) = self.keeping.take() else {
            return;
        };
        let value = (!self.value_overflow && !self.value.is_empty())
            .then(|| std::mem::take(&mut self.value));
        match keep {
            Keep::Id => self.id = value,
            Keep::Method => self.method = value,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn scan(line: &str) -> LineScan {
        let mut scan = LineScan::default();
        // Fed in small pieces, as a line arrives.
        for part in line.as_bytes().chunks(3) {
            scan.feed(part);
        }
        scan
    }

    #[test]
    fn a_request_gives_its_id_and_method_wherever_the_id_is() {
        let first = scan(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"id":1}}"#);
        assert_eq!(first.id(), Some(&b"7"[..]));
        assert_eq!(first.method(), Some(&br#""tools/call""#[..]));
        assert!(!first.is_reply());
        let last = scan(r#"{ "method" : "ping", "params": {"a": [1, {"id": 2}]}, "id" : "x\"y" }"#);
        assert_eq!(last.id(), Some(&br#""x\"y""#[..]));
        assert_eq!(last.max_depth(), 4);
    }

    #[test]
    fn a_reply_and_a_notification_are_told_apart() {
        let reply = scan(r#"{"jsonrpc":"2.0","id":3,"result":{"text":"\"id\":9, \"method\""}}"#);
        assert!(reply.is_reply());
        assert_eq!(reply.id(), Some(&b"3"[..]));
        assert_eq!(reply.method(), None);
        let note = scan(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(note.id(), None);
        assert!(!note.is_reply());
    }

    #[test]
    fn depth_is_counted_without_keeping_the_line() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(scan(&deep).max_depth(), 100_000);
        let nested = format!(
            r#"{{"id":5,"method":"x","params":{}1{}}}"#,
            "[".repeat(500),
            "]".repeat(500)
        );
        let scanned = scan(&nested);
        assert_eq!(scanned.max_depth(), 501);
        assert_eq!(scanned.id(), Some(&b"5"[..]));
    }

    #[test]
    fn an_overlong_id_is_not_reported() {
        let line = format!(r#"{{"id":"{}","method":"x"}}"#, "a".repeat(1000));
        assert_eq!(scan(&line).id(), None);
    }
}

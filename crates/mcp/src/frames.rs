//! A stdio server's stdout, passed to rmcp one JSON-RPC message (line) at a time, with a cap
//! on a message's size that is reported rather than silent.
//!
//! rmcp drops a line over 16 MiB with a log line and keeps waiting, so a call whose answer is
//! too large ended as a timeout. This reader cuts such a line before rmcp has all of it (rmcp
//! then ignores the unparsable rest), reads the request id from the line's first bytes and
//! answers that request itself: a JSON-RPC error saying the answer was too large, which the
//! connection turns into a tool result saying so. When the first bytes hold no id (or the
//! message is a request of the server's), the connection is told instead and fails the calls
//! waiting at that moment.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use serde_json::{Value, json};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::watch;

/// The largest message read from a server: under rmcp's own 16 MiB line cap, so that rmcp never
/// drops a line this reader passed on.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024 - 1024;

/// The JSON-RPC error code of the answer this reader makes up for a message too large (in the
/// range JSON-RPC leaves to implementations); with [`TOO_LARGE_MARK`] in its `data`.
pub(crate) const TOO_LARGE_CODE: i32 = -32099;

/// The `data` of that error, so a server's own -32099 is not taken for it.
pub(crate) const TOO_LARGE_MARK: &str = "troupe: message too large";

/// How much of a line is kept to find its id.
const HEAD_BYTES: usize = 4096;

/// What to tell the model about an answer over the cap.
pub(crate) fn too_large_message(max: usize) -> String {
    format!(
        "the server's answer is larger than {} MiB, the most troupe reads from an MCP server in \
         one message; it was dropped. Ask for less (a narrower query, a smaller page)",
        max.div_ceil(1024 * 1024)
    )
}

/// `inner`'s bytes, with every line over `max` bytes cut and answered as described above.
pub(crate) struct CappedLines<R> {
    inner: R,
    max: usize,
    /// Bytes of the current line passed on so far.
    line_len: usize,
    /// The current line's first bytes.
    head: Vec<u8>,
    /// Dropping the rest of a line over the cap, up to its newline.
    discarding: bool,
    scratch: Box<[u8]>,
    /// Bytes ready for the reader, from `out_pos` on.
    out: Vec<u8>,
    out_pos: usize,
    /// Bumped for each message over the cap that could not be answered by id.
    unanswered: watch::Sender<u64>,
}

impl<R> CappedLines<R> {
    pub(crate) fn new(inner: R, max: usize, unanswered: watch::Sender<u64>) -> Self {
        CappedLines {
            inner,
            max,
            line_len: 0,
            head: Vec::new(),
            discarding: false,
            scratch: vec![0; 64 * 1024].into_boxed_slice(),
            out: Vec::new(),
            out_pos: 0,
            unanswered,
        }
    }

    /// Pass `bytes` on to `out`, cutting and answering lines over the cap.
    fn pass(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let newline = bytes.iter().position(|b| *b == b'\n');
            let take = newline.map_or(bytes.len(), |i| i + 1);
            let (chunk, rest) = bytes.split_at(take);
            bytes = rest;
            let ends = newline.is_some();
            if self.discarding {
                if ends {
                    self.discarding = false;
                    self.end_line();
                }
                continue;
            }
            if self.head.len() < HEAD_BYTES {
                let keep = (HEAD_BYTES - self.head.len()).min(chunk.len());
                self.head.extend_from_slice(&chunk[..keep]);
            }
            let content = chunk.len() - usize::from(ends);
            if self.line_len + content > self.max {
                self.cut();
                if ends {
                    self.end_line();
                } else {
                    self.discarding = true;
                }
                continue;
            }
            self.out.extend_from_slice(chunk);
            self.line_len += content;
            if ends {
                self.end_line();
            }
        }
    }

    fn end_line(&mut self) {
        self.line_len = 0;
        self.head.clear();
    }

    /// The current line is over the cap: end what rmcp has of it (an unparsable line, which it
    /// ignores) and answer its request.
    fn cut(&mut self) {
        self.out.push(b'\n');
        let head = scan_head(&self.head);
        match head.id {
            Some(id) if !head.is_request => {
                tracing::warn!(max = self.max, %id, "MCP server sent an answer too large to read");
                let answer = json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": {
                        "code": TOO_LARGE_CODE,
                        "message": too_large_message(self.max),
                        "data": TOO_LARGE_MARK,
                    }
                });
                self.out.extend_from_slice(answer.to_string().as_bytes());
                self.out.push(b'\n');
            }
            _ => {
                tracing::warn!(
                    max = self.max,
                    "MCP server sent a message too large to read"
                );
                self.unanswered
                    .send_modify(|count| *count = count.wrapping_add(1));
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for CappedLines<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.out_pos < this.out.len() {
                let n = (this.out.len() - this.out_pos).min(buf.remaining());
                buf.put_slice(&this.out[this.out_pos..this.out_pos + n]);
                this.out_pos += n;
                return Poll::Ready(Ok(()));
            }
            this.out.clear();
            this.out_pos = 0;
            let mut scratch = std::mem::take(&mut this.scratch);
            let mut read = ReadBuf::new(&mut scratch);
            let polled = Pin::new(&mut this.inner).poll_read(cx, &mut read);
            let n = read.filled().len();
            if let Poll::Ready(Ok(())) = polled
                && n > 0
            {
                this.pass(&scratch[..n]);
            }
            this.scratch = scratch;
            ready!(polled)?;
            if n == 0 {
                // End of stream.
                return Poll::Ready(Ok(()));
            }
            // Everything read may have been a line being dropped: read on.
        }
    }
}

/// What the first bytes of a message say about it.
#[derive(Debug, Default, PartialEq)]
struct Head {
    /// Its top-level `id`, a number or a string.
    id: Option<Value>,
    /// Whether it has a top-level `method` (a request or notification, not an answer).
    is_request: bool,
}

/// The top-level `id` and `method` of a JSON object of which `head` is the beginning: the
/// server's [`LineScan`](crate::line_scan::LineScan) over the bytes there are.
fn scan_head(head: &[u8]) -> Head {
    let mut scan = crate::line_scan::LineScan::default();
    scan.feed(head);
    Head {
        id: scan
            .id()
            .and_then(|raw| serde_json::from_slice::<Value>(raw).ok())
            .filter(|v| v.is_number() || v.is_string()),
        is_request: scan.method().is_some(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tokio::io::AsyncReadExt;

    use super::*;

    #[test]
    fn the_id_of_an_answer_is_found_in_its_first_bytes() {
        let head = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"xxx"#;
        assert_eq!(
            scan_head(head),
            Head {
                id: Some(json!(7)),
                is_request: false
            }
        );
        let head = br#"{ "id" : "a\"b", "result": {"id": 3"#;
        assert_eq!(scan_head(head).id, Some(json!("a\"b")));
        let head = br#"{"jsonrpc":"2.0","result":{"id":3,"text":"xx"#;
        assert_eq!(scan_head(head).id, None);
        let head = br#"{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{"#;
        assert!(scan_head(head).is_request);
    }

    #[tokio::test]
    async fn a_line_over_the_cap_is_answered_by_id_and_the_next_line_passes() {
        let mut input = br#"{"jsonrpc":"2.0","id":5,"result":""#.to_vec();
        input.extend(std::iter::repeat_n(b'x', 500));
        input.extend_from_slice(b"\"}\n{\"ok\":1}\n");
        let (unanswered, seen) = watch::channel(0);
        let mut reader = CappedLines::new(input.as_slice(), 100, unanswered);
        let mut out = String::new();
        reader.read_to_string(&mut out).await.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        // The cut line's start (unparsable), the made-up answer, the next line untouched.
        assert_eq!(lines.len(), 3, "{out}");
        assert!(lines[0].len() <= 100);
        assert!(serde_json::from_str::<Value>(lines[0]).is_err());
        let answer: Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(answer["id"], 5);
        assert_eq!(answer["error"]["code"], TOO_LARGE_CODE);
        assert_eq!(lines[2], r#"{"ok":1}"#);
        assert_eq!(*seen.borrow(), 0);
    }

    #[tokio::test]
    async fn a_line_over_the_cap_without_an_id_is_reported() {
        let mut input = br#"{"jsonrpc":"2.0","result":""#.to_vec();
        input.extend(std::iter::repeat_n(b'x', 500));
        input.extend_from_slice(b"\"}\n");
        let (unanswered, seen) = watch::channel(0);
        let mut reader = CappedLines::new(input.as_slice(), 100, unanswered);
        let mut out = String::new();
        reader.read_to_string(&mut out).await.unwrap();
        assert_eq!(out.lines().count(), 1, "{out}");
        assert_eq!(*seen.borrow(), 1);
    }
}

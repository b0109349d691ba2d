//! The stdio a [`super::RegistryServer`] serves over, with the checks the SDK's transport lacks.
//!
//! rmcp drops a line over its 16 MiB limit and ignores one nested too deep for serde_json, both
//! without a reply, so the client waits forever; and two requests in flight under one id get
//! one reply between them (its table of requests is keyed by id). So every incoming line passes
//! through [`GuardedReader`] first, which answers these itself, under the request's own id when
//! it can find it ([`LineScan`]), and hands the SDK only lines it can serve:
//! - a line over [`Limits::max_line`] bytes is dropped as it arrives (never held whole) and
//!   answered "too large";
//! - a line nested deeper than [`Limits::max_depth`] is answered "nested too deep";
//! - a request whose id is still in flight is answered "duplicate request id".
//!
//! Its answers and the SDK's output must not interleave mid-line, so stdout has one writer: a
//! task fed whole lines through a bounded channel, by [`LineWriter`] (the SDK's side, which
//! also marks each reply's id as no longer in flight) and by the reader. The bound is the
//! backpressure: a client that stops reading stops the reader too, so refusals cannot pile up.

use std::collections::{HashSet, VecDeque};
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use rmcp::model::{ClientJsonRpcMessage, ClientNotification, JsonRpcMessage, RequestId};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::mpsc;
use tokio_util::sync::PollSender;
use troupe_protocol::sync::lock;

use crate::line_scan::LineScan;

/// Lines waiting for stdout at most; past this the reader and the SDK's writes wait.
pub(crate) const OUTBOX_LINES: usize = 64;
/// Bytes read from stdin at a time.
const READ_CHUNK: usize = 64 * 1024;
/// JSON-RPC's "Invalid Request" error code.
const INVALID_REQUEST: i64 = -32600;
/// A UTF-8 byte order mark, which the SDK skips at the start of a line.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";
/// Past this capacity the buffer handing lines on is released rather than kept for reuse.
const KEEP_CAPACITY: usize = 1024 * 1024;

/// What one incoming line may be.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Bytes in one line, its newline included: at most the SDK's own limit, so that every
    /// line handed on reaches it.
    pub(crate) max_line: usize,
    /// Levels of nesting: below serde_json's recursion limit (128), so that every line handed
    /// on can be parsed.
    pub(crate) max_depth: usize,
}

/// The ids of requests handed to the SDK and not answered yet, as canonical JSON text.
#[derive(Debug, Default)]
pub(crate) struct InFlight(Mutex<HashSet<String>>);

/// A raw JSON-RPC id as a value, when it is one (a string or an integer); its text is the key
/// in [`InFlight`].
fn parse_id(raw: &[u8]) -> Option<Value> {
    let id: RequestId = serde_json::from_slice(raw).ok()?;
    serde_json::to_value(&id).ok()
}

/// The single writer of stdout: writes each line whole, in the order received, until every
/// sender is gone.
pub(crate) async fn write_lines<W: AsyncWrite + Unpin>(
    mut lines: mpsc::Receiver<Vec<u8>>,
    mut out: W,
) -> io::Result<()> {
    while let Some(line) = lines.recv().await {
        out.write_all(&line).await?;
        // Whatever else is already waiting goes out before the flush.
        while let Ok(more) = lines.try_recv() {
            out.write_all(&more).await?;
        }
        out.flush().await?;
    }
    Ok(())
}

/// The SDK's stdout: whole lines to [`write_lines`]; a reply clears its id from [`InFlight`].
pub(crate) struct LineWriter {
    partial: Vec<u8>,
    complete: VecDeque<Vec<u8>>,
    out: PollSender<Vec<u8>>,
    in_flight: Arc<InFlight>,
}

impl LineWriter {
    pub(crate) fn new(out: mpsc::Sender<Vec<u8>>, in_flight: Arc<InFlight>) -> Self {
        LineWriter {
            partial: Vec::new(),
            complete: VecDeque::new(),
            out: PollSender::new(out),
            in_flight,
        }
    }

    /// Hand every complete line to the writer task, waiting for room.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some(line) = self.complete.pop_front() {
            match self.out.poll_reserve(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(_)) => return Poll::Ready(Err(closed())),
                Poll::Pending => {
                    self.complete.push_front(line);
                    return Poll::Pending;
                }
            }
            self.note_reply(&line);
            if self.out.send_item(line).is_err() {
                return Poll::Ready(Err(closed()));
            }
        }
        Poll::Ready(Ok(()))
    }

    /// A reply going out ends its request: the id may be used again.
    fn note_reply(&self, line: &[u8]) {
        let mut scan = LineScan::default();
        scan.feed(line);
        if !scan.is_reply() {
            return;
        }
        if let Some(id) = scan.id().and_then(parse_id) {
            lock(&self.in_flight.0).remove(&id.to_string());
        }
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "stdout's writer has stopped")
}

impl AsyncWrite for LineWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.poll_drain(cx))?;
        this.partial.extend_from_slice(buf);
        while let Some(end) = this.partial.iter().position(|b| *b == b'\n') {
            let rest = this.partial.split_off(end + 1);
            this.complete
                .push_back(std::mem::replace(&mut this.partial, rest));
        }
        // What could not be handed on yet goes on the next write or flush.
        let _ = this.poll_drain(cx)?;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_drain(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_drain(cx)
    }
}

/// The SDK's stdin: only lines it can serve; the others answered here.
pub(crate) struct GuardedReader<R> {
    inner: R,
    limits: Limits,
    in_flight: Arc<InFlight>,
    out: PollSender<Vec<u8>>,
    /// Refusals waiting for room in the outbox.
    refusals: VecDeque<Vec<u8>>,
    /// The line being read, while it is within the limit.
    line: Vec<u8>,
    /// Bytes of the line being read so far, kept or not.
    line_len: usize,
    scan: LineScan,
    /// Lines accepted, being handed to the SDK from `ready_at`.
    ready: Vec<u8>,
    ready_at: usize,
    chunk: Box<[u8]>,
    eof: bool,
}

impl<R> GuardedReader<R> {
    pub(crate) fn new(
        inner: R,
        limits: Limits,
        out: mpsc::Sender<Vec<u8>>,
        in_flight: Arc<InFlight>,
    ) -> Self {
        GuardedReader {
            inner,
            limits,
            in_flight,
            out: PollSender::new(out),
            refusals: VecDeque::new(),
            line: Vec::new(),
            line_len: 0,
            scan: LineScan::default(),
            ready: Vec::new(),
            ready_at: 0,
            chunk: vec![0; READ_CHUNK].into_boxed_slice(),
            eof: false,
        }
    }

    /// Take in `bytes` as read: whole lines are judged as their newline arrives.
    fn take_in(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let newline = bytes.iter().position(|b| *b == b'\n');
            let part = &bytes[..newline.map_or(bytes.len(), |at| at + 1)];
            bytes = &bytes[part.len()..];
            self.scan.feed(part);
            self.line_len += part.len();
            if self.line_len <= self.limits.max_line {
                self.line.extend_from_slice(part);
            } else if !self.line.is_empty() {
                // Over the limit: what was kept goes, and nothing more is kept.
                self.line = Vec::new();
            }
            if newline.is_some() {
                self.end_line();
            }
        }
    }

    /// Judge the line just ended: hand it on, or answer it here.
    fn end_line(&mut self) {
        let scan = std::mem::take(&mut self.scan);
        let line = std::mem::take(&mut self.line);
        let len = std::mem::replace(&mut self.line_len, 0);
        let id = scan.id().and_then(parse_id);
        if len > self.limits.max_line {
            let max = self.limits.max_line;
            self.refuse(
                id,
                format!(
                    "message too large: {len} bytes, more than the {max} bytes (with its \
                     newline) one message may take"
                ),
            );
            return;
        }
        if scan.max_depth() > self.limits.max_depth {
            self.refuse(
                id,
                format!(
                    "message nested {} levels deep, more than the {} this server reads",
                    scan.max_depth(),
                    self.limits.max_depth
                ),
            );
            return;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let request = scan.id().is_some() && scan.method().is_some() && !scan.is_reply();
        if (request || scan.method() == Some(br#""notifications/cancelled""#))
            && let Err(message) = self.track(&line)
        {
            self.refuse(id, message);
            return;
        }
        if self.ready.is_empty() {
            self.ready = line;
        } else {
            self.ready.extend_from_slice(&line);
        }
    }

    /// Keep [`InFlight`] up to date with a request or a cancellation, parsed as the SDK will
    /// parse it (a line it cannot parse gets no reply under its id, so it never counts).
    ///
    /// # Errors
    /// Why the request is refused: its id is in flight already.
    fn track(&self, line: &[u8]) -> Result<(), String> {
        let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
        match serde_json::from_slice::<ClientJsonRpcMessage>(line) {
            Ok(JsonRpcMessage::Request(request)) => {
                let key = serde_json::to_string(&request.id).unwrap_or_default();
                if !lock(&self.in_flight.0).insert(key.clone()) {
                    return Err(format!(
                        "duplicate request id {key}: a request with this id is still being \
                         answered; give each request in flight its own id"
                    ));
                }
            }
            // A cancelled request is never answered (the SDK drops its reply): its id is free.
            Ok(JsonRpcMessage::Notification(note)) => {
                if let ClientNotification::CancelledNotification(cancelled) = note.notification
                    && let Some(id) = cancelled.params.request_id
                {
                    let key = serde_json::to_string(&id).unwrap_or_default();
                    lock(&self.in_flight.0).remove(&key);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn refuse(&mut self, id: Option<Value>, message: String) {
        tracing::warn!(%message, "refused an incoming message");
        let reply = json!({
            "jsonrpc": "2.0",
            "id": id.unwrap_or(Value::Null),
            "error": { "code": INVALID_REQUEST, "message": message },
        });
        let mut line = reply.to_string().into_bytes();
        line.push(b'\n');
        self.refusals.push_back(line);
    }

    /// Queue the refusals for stdout, waiting for room.
    fn poll_refusals(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        while let Some(line) = self.refusals.pop_front() {
            match self.out.poll_reserve(cx) {
                Poll::Ready(Ok(())) => {
                    // A closed outbox means stdout is gone: nobody is left to answer.
                    let _ = self.out.send_item(line);
                }
                Poll::Ready(Err(_)) => self.refusals.clear(),
                Poll::Pending => {
                    self.refusals.push_front(line);
                    return Poll::Pending;
                }
            }
        }
        Poll::Ready(())
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for GuardedReader<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.ready_at < this.ready.len() {
                let n = buf.remaining().min(this.ready.len() - this.ready_at);
                buf.put_slice(&this.ready[this.ready_at..this.ready_at + n]);
                this.ready_at += n;
                if this.ready_at == this.ready.len() {
                    if this.ready.capacity() > KEEP_CAPACITY {
                        this.ready = Vec::new();
                    } else {
                        this.ready.clear();
                    }
                    this.ready_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            ready!(this.poll_refusals(cx));
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = ReadBuf::new(&mut this.chunk[..]);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut chunk))?;
            let filled = chunk.filled().len();
            if filled == 0 {
                // A last line without its newline is not a message (the SDK drops it too).
                this.eof = true;
                continue;
            }
            let chunk = std::mem::take(&mut this.chunk);
            this.take_in(&chunk[..filled]);
            this.chunk = chunk;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    const LIMITS: Limits = Limits {
        max_line: 1024,
        max_depth: 8,
    };

    /// What the SDK would read from `input`, and the refusals written for it.
    async fn guard(input: &str, in_flight: Arc<InFlight>) -> (String, Vec<Value>) {
        let (tx, mut rx) = mpsc::channel(OUTBOX_LINES);
        let mut reader = GuardedReader::new(input.as_bytes(), LIMITS, tx, in_flight);
        let mut passed = String::new();
        reader.read_to_string(&mut passed).await.unwrap();
        drop(reader);
        let mut refusals = Vec::new();
        while let Some(line) = rx.recv().await {
            refusals.push(serde_json::from_slice(&line).unwrap());
        }
        (passed, refusals)
    }

    fn call(id: u64) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)
    }

    #[tokio::test]
    async fn a_duplicate_id_is_refused_until_its_request_is_answered_or_cancelled() {
        let in_flight = Arc::new(InFlight::default());
        let cancel =
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#;
        let input = format!("{}\n{}\n{cancel}\n{}\n", call(1), call(1), call(1));
        let (passed, refusals) = guard(&input, in_flight.clone()).await;
        assert_eq!(passed, format!("{}\n{cancel}\n{}\n", call(1), call(1)));
        assert_eq!(refusals.len(), 1);
        assert_eq!(refusals[0]["id"], json!(1));
        assert!(
            refusals[0]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("duplicate")
        );

        // A reply written for it frees the id.
        let (tx, _rx) = mpsc::channel(OUTBOX_LINES);
        let mut writer = LineWriter::new(tx, in_flight.clone());
        writer
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n")
            .await
            .unwrap();
        writer.flush().await.unwrap();
        assert!(lock(&in_flight.0).is_empty());
    }

    #[tokio::test]
    async fn oversized_and_deep_lines_are_answered_under_their_id() {
        let long = format!(
            r#"{{"jsonrpc":"2.0","method":"ping","params":{{"pad":"{}"}},"id":"long"}}"#,
            "x".repeat(5000)
        );
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"ping","params":{{"a":{}1{}}}}}"#,
            "[".repeat(20),
            "]".repeat(20)
        );
        let input = format!("{long}\n{deep}\n{}\n", call(3));
        let (passed, refusals) = guard(&input, Arc::default()).await;
        assert_eq!(passed, format!("{}\n", call(3)));
        assert_eq!(refusals[0]["id"], json!("long"));
        assert!(
            refusals[0]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("too large")
        );
        assert_eq!(refusals[1]["id"], json!(9));
        assert!(
            refusals[1]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("nested")
        );
    }
}

//! A stream's output kept within a cap while it is read: the head and the tail stay, the middle
//! is counted and dropped, so a command printing gigabytes costs a few kilobytes of memory.

use tokio::io::{AsyncRead, AsyncReadExt};

use troupe_protocol::truncation_marker;

/// Bytes read from the pipe per read.
const READ_CHUNK: usize = 64 * 1024;

/// The head and tail of a stream, at most `cap` bytes together.
#[derive(Debug)]
pub(crate) struct CappedOutput {
    head: Vec<u8>,
    tail: Vec<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: u64,
}

impl CappedOutput {
    /// Empty, keeping two thirds of `cap` from the start and one third from the end (an error
    /// or a summary line at the end matters as much as the start).
    pub(crate) fn new(cap: usize) -> Self {
        let head_cap = cap * 2 / 3;
        CappedOutput {
            head: Vec::new(),
            tail: Vec::new(),
            head_cap,
            tail_cap: cap - head_cap,
            total: 0,
        }
    }

    /// Read `stream` to its end; the whole stream is drained (so the writer never blocks on a
    /// full pipe), only the head and tail are kept.
    pub(crate) async fn drain<R: AsyncRead + Unpin>(mut self, stream: Option<R>) -> Self {
        let Some(mut stream) = stream else {
            return self;
        };
        let mut chunk = vec![0u8; READ_CHUNK];
        // A read error ends the stream like EOF: what was read is still reported.
        while let Ok(n) = stream.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            self.push(&chunk[..n]);
        }
        self
    }

    /// Add bytes read from the stream.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let head_room = self.head_cap - self.head.len();
        let into_head = head_room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..into_head]);
        bytes = &bytes[into_head..];
        if bytes.is_empty() {
            return;
        }
        self.tail.extend_from_slice(bytes);
        // Trimmed only once it holds twice its cap, so each byte is moved O(1) times.
        if self.tail.len() > 2 * self.tail_cap.max(READ_CHUNK) {
            let excess = self.tail.len() - self.tail_cap;
            self.tail.drain(..excess);
        }
    }

    /// The kept text, with a marker where the middle was dropped saying how much.
    pub(crate) fn finish(mut self) -> String {
        if self.tail.len() > self.tail_cap {
            let excess = self.tail.len() - self.tail_cap;
            self.tail.drain(..excess);
        }
        let kept = (self.head.len() + self.tail.len()) as u64;
        let head = String::from_utf8_lossy(&self.head);
        let tail = String::from_utf8_lossy(&self.tail);
        if self.total == kept {
            return format!("{head}{tail}");
        }
        let marker = truncation_marker(self.total, self.head.len(), self.tail.len(), None);
        format!("{head}\n{marker}\n{tail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_within_the_cap_is_kept_whole() {
        let mut out = CappedOutput::new(10);
        out.push(b"0123");
        out.push(b"456789");
        assert_eq!(out.finish(), "0123456789");
    }

    #[test]
    fn the_middle_of_long_output_is_dropped_and_counted() {
        let mut out = CappedOutput::new(9);
        for _ in 0..100_000 {
            out.push(b"abcdefghij");
        }
        out.push(b"END");
        assert!(out.tail.len() <= 2 * READ_CHUNK + 10);
        assert_eq!(
            out.finish(),
            "abcdef\n[... output truncated: 999994 bytes dropped; the original was 1000003 \
             bytes, showing the first 6 and the last 3 bytes ...]\nEND"
        );
    }

    #[test]
    fn a_streamed_cap_and_the_registry_cap_cut_alike() {
        let text: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let mut streamed = CappedOutput::new(300);
        streamed.push(text.as_bytes());
        assert_eq!(
            streamed.finish(),
            troupe_protocol::cap_output(text, 300),
            "one cap, one marker"
        );
    }
}

//! The chat's input, a line at a time, as bytes: a line that is not UTF-8 is reported and
//! skipped, and the chat goes on (reading `String` lines would end it at the first bad byte).

use tokio::io::{AsyncBufReadExt as _, AsyncRead, BufReader};

/// One line of input.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Line {
    /// A line of text, without its line break.
    Text(String),
    /// A line that is not valid UTF-8.
    NotUtf8,
}

/// Lines of `R`, split at `\n` (a `\r` before it is dropped too).
pub(super) struct Lines<R> {
    reader: BufReader<R>,
    buffer: Vec<u8>,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    pub(super) fn new(reader: R) -> Self {
        Lines {
            reader: BufReader::new(reader),
            buffer: Vec::new(),
        }
    }

    /// The next line, or `None` at the end of the input. Cancel safe: a line read in part
    /// stays in the buffer for the next call.
    pub(super) async fn next(&mut self) -> std::io::Result<Option<Line>> {
        let read = self.reader.read_until(b'\n', &mut self.buffer).await?;
        if read == 0 && self.buffer.is_empty() {
            return Ok(None);
        }
        let mut bytes = std::mem::take(&mut self.buffer);
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        Ok(Some(match String::from_utf8(bytes) {
            Ok(text) => Line::Text(text),
            Err(_) => Line::NotUtf8,
        }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_line_that_is_not_utf8_is_one_bad_line_and_reading_goes_on() {
        let input: &[u8] = b"hello\r\nbad \xff byte\nlast";
        let mut lines = Lines::new(input);
        assert_eq!(
            lines.next().await.unwrap(),
            Some(Line::Text("hello".into()))
        );
        assert_eq!(lines.next().await.unwrap(), Some(Line::NotUtf8));
        assert_eq!(lines.next().await.unwrap(), Some(Line::Text("last".into())));
        assert_eq!(lines.next().await.unwrap(), None);
    }
}

//! A `troupe chat` process driven line by line, its output read as it comes: what the chat
//! tests that watch a conversation unfold (`chat_truth.rs`, `chat_background.rs`) share.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a test waits for what the chat should print.
pub(crate) const DEADLINE: Duration = Duration::from_secs(60);

/// A running chat, its output read as it comes.
pub(crate) struct Live {
    pub(crate) child: Child,
    pub(crate) stdin: Option<ChildStdin>,
    output: Receiver<String>,
    pub(crate) seen: String,
}

impl Live {
    pub(crate) fn start(mut child: Child) -> Live {
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().unwrap();
        let (printed, output) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 65536];
            while let Ok(n) = stdout.read(&mut buffer) {
                if n == 0
                    || printed
                        .send(String::from_utf8_lossy(&buffer[..n]).into_owned())
                        .is_err()
                {
                    break;
                }
            }
        });
        Live {
            child,
            stdin,
            output,
            seen: String::new(),
        }
    }

    pub(crate) fn send(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Everything printed until `what` first shows (after what was waited for before).
    pub(crate) fn wait_for(&mut self, what: &str) -> String {
        let started = Instant::now();
        loop {
            if let Some(at) = self.seen.find(what) {
                let upto = at + what.len();
                let printed = self.seen[..upto].to_string();
                self.seen.drain(..upto);
                return printed;
            }
            let left = DEADLINE.saturating_sub(started.elapsed());
            match self.output.recv_timeout(left) {
                Ok(text) => self.seen.push_str(&text),
                Err(RecvTimeoutError::Timeout) => panic!("no {what:?} in {:?}", self.seen),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the chat ended without {what:?}: {:?}", self.seen)
                }
            }
        }
    }

    /// Take what was printed so far without waiting.
    pub(crate) fn pull(&mut self) -> &str {
        while let Ok(text) = self.output.try_recv() {
            self.seen.push_str(&text);
        }
        &self.seen
    }

    pub(crate) fn interrupt(&self) {
        let status = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Close the input; the rest of the output, stderr and the exit status.
    pub(crate) fn finish(mut self) -> (String, String, ExitStatus) {
        drop(self.stdin.take());
        while let Ok(text) = self.output.recv_timeout(DEADLINE) {
            self.seen.push_str(&text);
        }
        let mut stderr = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let status = self.child.wait().unwrap();
        (self.seen, stderr, status)
    }
}

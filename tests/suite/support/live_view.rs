//! A live view's page over plain HTTP, and the lines of a process that prints its URL: what
//! the suites that start `troupe ui`, `troupe chat --ui` and `troupe node --ui` share.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::ChildStdout;
use std::sync::mpsc;
use std::time::Duration;

/// The status line and body of a GET of `url` (`http://HOST:PORT/PATH`), over a plain socket.
pub(crate) fn get(url: &str) -> (String, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut stream = TcpStream::connect(host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer.lines().next().unwrap_or_default().to_string();
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Lines of `stdout`, read on a thread so the test can give up after a while.
pub(crate) fn lines(stdout: ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

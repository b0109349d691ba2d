//! The bounds, with short limits: a stalled head, body or reader is dropped; a whole request
//! is answered; shutdown waits for the request in flight.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use super::{ServeLimits, serve};

const LIMITS: ServeLimits = ServeLimits {
    head: Duration::from_secs(1),
    body_idle: Duration::from_secs(1),
    write_stall: Duration::from_secs(1),
    max_connections: 8,
};

/// Far past every limit: a connection still open then was never dropped.
const DEADLINE: Duration = Duration::from_secs(60);

/// The server: its address, its stop switch, its task, and what `/slow` tells when its handler
/// has the request (its body still to come).
async fn server() -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
    Arc<Notify>,
) {
    let started = Arc::new(Notify::new());
    let told = started.clone();
    let app = Router::new()
        .route(
            "/slow",
            post(move |body: axum::body::Body| async move {
                told.notify_one();
                let bytes = axum::body::to_bytes(body, 100).await.unwrap_or_default();
                String::from_utf8_lossy(&bytes).into_owned()
            }),
        )
        .route("/", get(|| async { "hello" }))
        .route("/echo", post(|body: String| async move { body }))
        .route("/huge", get(|| async { "x".repeat(64 << 20) }));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, app, LIMITS, async move {
        let _ = stopped.await;
    }));
    (addr, stop, task, started)
}

/// Everything the server sends until it closes the connection (within [`DEADLINE`]).
async fn until_closed(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    tokio::time::timeout(DEADLINE, async {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = stream.read(&mut buffer).await {
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&buffer[..n]);
        }
    })
    .await
    .expect("the server kept the connection open");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_half_sent_head_and_an_idle_keep_alive_connection_are_dropped() {
    let (addr, _stop, _task, _) = server().await;
    let mut half = TcpStream::connect(&addr).await.unwrap();
    half.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-Half: ")
        .await
        .unwrap();
    until_closed(&mut half).await;
    // A whole request is answered; the connection, idle after it, is dropped too.
    let mut idle = TcpStream::connect(&addr).await.unwrap();
    idle.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = until_closed(&mut idle).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("hello"), "{answer}");
}

#[tokio::test]
async fn a_body_that_stops_coming_fails_the_request() {
    let (addr, _stop, _task, _) = server().await;
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    stream
        .write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
        .await
        .unwrap();
    let answer = until_closed(&mut stream).await;
    assert!(!answer.contains("200 OK"), "{answer}");
}

#[tokio::test]
async fn a_client_that_stops_reading_is_dropped() {
    let (addr, _stop, _task, _) = server().await;
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    stream
        .write_all(b"GET /huge HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    // Read nothing for longer than the stall limit, then everything that is left: had the
    // server waited, all 64 MiB would come.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let answer = until_closed(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{}", &answer[..40]);
    assert!(answer.len() < 64 << 20, "{} bytes came", answer.len());
}

#[tokio::test]
async fn shutdown_answers_the_request_in_flight_then_returns() {
    let (addr, stop, task, started) = server().await;
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    stream
        .write_all(b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab")
        .await
        .unwrap();
    // Its handler has it, half its body still to come, when the server is told to stop.
    tokio::time::timeout(DEADLINE, started.notified())
        .await
        .unwrap();
    stop.send(()).unwrap();
    stream.write_all(b"cd").await.unwrap();
    let answer = until_closed(&mut stream).await;
    assert!(answer.ends_with("abcd"), "{answer}");
    tokio::time::timeout(DEADLINE, task).await.unwrap().unwrap();
    assert!(TcpStream::connect(&addr).await.is_err());
}

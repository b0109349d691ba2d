//! Ctrl-C for the whole chat: one listener from its start to its end, so a Ctrl-C that comes
//! while the chat is busy elsewhere (printing an answer) is still there when it next listens,
//! instead of being lost between two listeners.

/// The chat's Ctrl-C listener.
pub(super) struct Interrupts {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Interrupts {
    /// Start listening (a listener that cannot be set up falls back to `ctrl_c` per wait).
    pub(super) fn new() -> Self {
        Interrupts {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok(),
        }
    }

    /// The next Ctrl-C (one that came since the last call included). Cancel safe.
    pub(super) async fn next(&mut self) {
        #[cfg(unix)]
        if let Some(signal) = &mut self.signal {
            signal.recv().await;
            return;
        }
        if tokio::signal::ctrl_c().await.is_err() {
            // No way to hear Ctrl-C: never report one.
            std::future::pending::<()>().await;
        }
    }
}

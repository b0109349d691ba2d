//! Why an exchange with a remote A2A agent failed, or why the server could not start.

/// Why a remote A2A agent could not be reached, read or believed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum A2aError {
    /// A URL that does not parse (the base URL, or an interface's on the card).
    #[error("`{url}` is not a usable URL: {reason}")]
    BadUrl {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The connection or the HTTP exchange failed.
    #[error("{what}: {source}")]
    Http {
        /// What was being done.
        what: String,
        /// reqwest's error (it names no key: keys travel in headers it does not print).
        source: reqwest::Error,
    },
    /// The peer answered with an HTTP error status.
    #[error("{what}: HTTP {status}{}", if body.is_empty() { String::new() } else { format!(": {body}") })]
    Status {
        /// What was being done.
        what: String,
        /// The status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// A body, event or answer over its cap: read no further.
    #[error("{what} is over the {cap}-byte limit: the peer was not read further")]
    TooLarge {
        /// What was too large.
        what: String,
        /// The cap.
        cap: usize,
    },
    /// The peer was silent (or slow) past a limit.
    #[error("{what}: no answer within {secs:.1} s")]
    Timeout {
        /// What was waited for.
        what: String,
        /// The limit, in seconds.
        secs: f64,
    },
    /// The peer's answer is not the protocol.
    #[error("{what}: not an A2A 1.0 answer: {reason}")]
    Malformed {
        /// What was read.
        what: String,
        /// Why it is not.
        reason: String,
    },
    /// The card names an endpoint on another host than the one it was read from.
    #[error(
        "the card at {card_url} sends requests to {endpoint}, another host: refused (allow it with `allow_other_hosts`)"
    )]
    OtherHost {
        /// Where the card was read.
        card_url: String,
        /// Where it points.
        endpoint: String,
    },
    /// The card offers no interface troupe speaks.
    #[error("the agent offers no JSON-RPC interface of A2A 1.x (it offers: {offered})")]
    NoInterface {
        /// What it offers.
        offered: String,
    },
    /// The card asks for credentials troupe was not given, or in a form troupe cannot send.
    #[error("{0}")]
    Auth(String),
    /// An event of a task this request did not start.
    #[error("the peer sent an event of task `{got}` during task `{ours}`: refused")]
    ForeignTask {
        /// Ours.
        ours: String,
        /// Theirs.
        got: String,
    },
    /// The peer answered with a JSON-RPC error.
    #[error("the agent answered with error {code}: {message}")]
    Rpc {
        /// Its code.
        code: i64,
        /// Its message.
        message: String,
    },
}

/// Why the A2A server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// An agent to expose that the team does not have.
    #[error("the team has no agent `{0}` to serve")]
    UnknownAgent(String),
    /// Nothing to serve.
    #[error("no agent to serve: name at least one")]
    NoAgents,
    /// The tasks file could not be read or written.
    #[error("the A2A tasks file {}: {source}", path.display())]
    TasksFile {
        /// Its path.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Another server (or another in this process) holds the tasks file.
    #[error("the A2A tasks file {} is in use by {}: one server per file", path.display(), match pid { Some(pid) => format!("process {pid}"), None => "another process".to_string() })]
    TasksFileInUse {
        /// Its path.
        path: std::path::PathBuf,
        /// The holder's pid, when its lock note names one.
        pid: Option<u32>,
    },
    /// A bound on conversations set to zero, which would serve nothing.
    #[error("`{0}` must be at least 1")]
    ZeroBound(&'static str),
    /// Auth was asked for without a key.
    #[error("A2A auth is on but ${0} is unset or empty: set the key there")]
    MissingKey(String),
    /// No key could be made for the run.
    #[error("no key could be made for the A2A server: {0}")]
    Key(String),
    /// Callers that cannot be served as given (a key two hold, an empty one…).
    #[error("A2A auth: {0}")]
    Auth(String),
    /// An allowed origin or the public URL the gate cannot take.
    #[error(transparent)]
    Gate(#[from] troupe_host::serve::GateError),
}

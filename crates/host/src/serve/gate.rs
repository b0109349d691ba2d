//! [`Gate`]: who may reach a server from where, checked on every request before anything else.
//!
//! - The `Host` a request names must be one of the server's own: its listen address (any IP
//!   literal on its port when it listens on every address), `localhost` on loopback, and the
//!   names it was told it is reached by (a public URL). A page on `attacker.example` whose name
//!   was rebound to 127.0.0.1 sends `Host: attacker.example:PORT` and is refused (DNS
//!   rebinding): the browser would otherwise treat the server as that page's own origin.
//! - A browser request from another origin is refused: an `Origin` that is not the `Host`'s
//!   own (`null` included, what a sandboxed page or a form from a file sends), or, without
//!   `Origin`, a `Sec-Fetch-Site` other than `same-origin` or `none`. Only the origins the
//!   operator allowed get through, with CORS: a preflight (`OPTIONS` with
//!   `Access-Control-Request-Method`) is answered for them, and their answers carry
//!   `Access-Control-Allow-Origin`. No wildcard: an allowed origin is named whole.
//!
//! Both of troupe's servers (the A2A server, the live view) put it in front of their routes, so
//! this is checked once, the same way, for both.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// An origin the gate cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// Not `http(s)://host[:port]` (a path, a wildcard, `null`, another scheme…).
    #[error(
        "`{0}` is not an origin: name it whole as http://HOST[:PORT] or https://HOST[:PORT], without a path (no wildcard)"
    )]
    Origin(String),
    /// A URL the server is reached by that names no host.
    #[error("`{0}` is not a URL with a host (http://HOST[:PORT]/…)")]
    Url(String),
}

/// A host name and the port it is reached on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authority {
    /// Lower case; an IPv6 literal in brackets.
    host: String,
    port: u16,
}

/// Who may reach a server (module docs).
#[derive(Debug, Clone)]
pub struct Gate {
    /// The port it listens on.
    port: u16,
    /// It listens on every address: any IP literal on its port is its own.
    any_ip: bool,
    /// Its own names: the listen address, `localhost` on loopback, the names it was given.
    names: Vec<Authority>,
    /// The origins allowed in from elsewhere, as browsers write them (`scheme://host[:port]`,
    /// the scheme's default port left out).
    allowed: Vec<String>,
    /// The schemes its own pages are served under: `http`, and a public URL's.
    schemes: Vec<String>,
}

impl Gate {
    /// The gate of a server listening on `listen` (the bound address, its real port).
    pub fn new(listen: SocketAddr) -> Self {
        let ip = listen.ip();
        let mut names = Vec::new();
        if !ip.is_unspecified() {
            names.push(Authority {
                host: ip_host(ip),
                port: listen.port(),
            });
        }
        if ip.is_loopback() {
            names.push(Authority {
                host: "localhost".into(),
                port: listen.port(),
            });
        }
        Gate {
            port: listen.port(),
            any_ip: ip.is_unspecified(),
            names,
            allowed: Vec::new(),
            schemes: vec!["http".into()],
        }
    }

    /// It is also reached as `url`'s host (e.g. behind a proxy: `--public-url`).
    ///
    /// # Errors
    /// [`GateError::Url`] when `url` names no host.
    pub fn reached_as(mut self, url: &str) -> Result<Self, GateError> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| GateError::Url(url.to_string()))?;
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let authority = authority.rsplit('@').next().unwrap_or_default();
        let name = parse_authority(authority, default_port(scheme))
            .ok_or_else(|| GateError::Url(url.to_string()))?;
        self.names.push(name);
        let scheme = scheme.to_ascii_lowercase();
        if !self.schemes.contains(&scheme) {
            self.schemes.push(scheme);
        }
        Ok(self)
    }

    /// Browsers on `origin` may call it too (CORS).
    ///
    /// # Errors
    /// [`GateError::Origin`] when `origin` is not `http(s)://host[:port]`.
    pub fn allow_origin(mut self, origin: &str) -> Result<Self, GateError> {
        let bad = || GateError::Origin(origin.to_string());
        let (scheme, authority) = origin.split_once("://").ok_or_else(bad)?;
        let scheme = scheme.to_ascii_lowercase();
        if !matches!(scheme.as_str(), "http" | "https")
            || authority.is_empty()
            || authority.contains(['/', '?', '#', '@', '*'])
        {
            return Err(bad());
        }
        let name = parse_authority(authority, default_port(&scheme)).ok_or_else(bad)?;
        self.allowed.push(origin_text(&scheme, &name));
        Ok(self)
    }

    /// Whether `headers` name one of the server's own hosts.
    fn own_host(&self, headers: &HeaderMap) -> bool {
        let Some((host, port)) = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(split_authority)
        else {
            return false;
        };
        if self.any_ip && port == Some(self.port) && is_ip(&host) {
            return true;
        }
        // A name given without a port (a proxy's `Host: example.com`) is reached on its
        // scheme's default port, which the header leaves out: the host alone decides then.
        self.names
            .iter()
            .any(|name| name.host == host && port.is_none_or(|p| p == name.port))
    }

    /// What the gate says of a request: let in (from another origin, for CORS), or refused.
    fn judge(&self, method: &Method, headers: &HeaderMap) -> Verdict {
        if !self.own_host(headers) {
            let host = headers
                .get(header::HOST)
                .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
                .unwrap_or_default();
            return Verdict::Refused(format!(
                "the Host `{host}` is not this server's: it answers only requests addressed to it"
            ));
        }
        let Some(origin) = headers.get(header::ORIGIN) else {
            return match headers.get("sec-fetch-site").map(HeaderValue::as_bytes) {
                None | Some(b"same-origin" | b"none") => Verdict::Own,
                Some(_) => Verdict::Refused(FOREIGN.into()),
            };
        };
        let origin_text = origin.to_str().unwrap_or_default().to_ascii_lowercase();
        if self.allowed.contains(&origin_text) {
            return if is_preflight(method, headers) {
                Verdict::Preflight(origin.clone())
            } else {
                Verdict::Allowed(origin.clone())
            };
        }
        if self.same_origin(&origin_text, headers) && !is_preflight(method, headers) {
            Verdict::Own
        } else {
            Verdict::Refused(FOREIGN.into())
        }
    }
}

const FOREIGN: &str = "requests from another origin are refused";

/// What [`Gate::judge`] decided.
enum Verdict {
    /// From the server's own origin, or from no browser page.
    Own,
    /// From an allowed origin: answered with its CORS header.
    Allowed(HeaderValue),
    /// An allowed origin's preflight: answered here.
    Preflight(HeaderValue),
    /// Refused, saying why.
    Refused(String),
}

/// The gate in front of a router: `router.layer(axum::middleware::from_fn_with_state(gate,
/// troupe_host::serve::guard))`. A refusal is HTTP 403 with the reason as text.
pub async fn guard(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    match gate.judge(request.method(), request.headers()) {
        Verdict::Own => next.run(request).await,
        Verdict::Allowed(origin) => {
            let mut response = next.run(request).await;
            allow(&mut response, origin);
            response
        }
        Verdict::Preflight(origin) => {
            let mut response = StatusCode::NO_CONTENT.into_response();
            let headers = response.headers_mut();
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST"),
            );
            // The headers a caller may send are its own business once its origin is allowed:
            // the server still checks each (key, version, content type) as for any request.
            if let Some(asked) = request
                .headers()
                .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
            {
                headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked.clone());
            }
            headers.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static("600"),
            );
            allow(&mut response, origin);
            response
        }
        Verdict::Refused(why) => {
            let mut response = (StatusCode::FORBIDDEN, why).into_response();
            response.headers_mut().insert(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            );
            response
        }
    }
}

fn allow(response: &mut Response, origin: HeaderValue) {
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.append(header::VARY, HeaderValue::from_static("origin"));
}

fn is_preflight(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::OPTIONS && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

impl Gate {
    /// Whether `origin` (lower case) is the origin of the request's `Host`, under a scheme the
    /// server's pages have.
    fn same_origin(&self, origin: &str, headers: &HeaderMap) -> bool {
        match origin.split_once("://") {
            Some((scheme, _)) if self.schemes.iter().any(|s| s == scheme) => {
                origin_of_host(origin, headers)
            }
            _ => false,
        }
    }
}

/// Whether `origin` (lower case) names the request's `Host` (host and port).
fn origin_of_host(origin: &str, headers: &HeaderMap) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let port = default_port(scheme);
    matches!(
        (parse_authority(authority, port), parse_authority(host, port)),
        (Some(a), Some(b)) if a == b
    )
}

fn default_port(scheme: &str) -> u16 {
    if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    }
}

/// `host[:port]` (an IPv6 literal in brackets), lower case, the port `default` when absent.
fn parse_authority(text: &str, default: u16) -> Option<Authority> {
    let (host, port) = split_authority(text)?;
    Some(Authority {
        host,
        port: port.unwrap_or(default),
    })
}

/// `host[:port]` as its lower-case host (an IPv6 literal in brackets) and its port, if given;
/// `None` when it is not one.
fn split_authority(text: &str) -> Option<(String, Option<u16>)> {
    let text = text.trim().to_ascii_lowercase();
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        inside.parse::<std::net::Ipv6Addr>().ok()?;
        let port = match after.strip_prefix(':') {
            Some(port) => Some(port.parse().ok()?),
            None if after.is_empty() => None,
            None => return None,
        };
        (format!("[{inside}]"), port)
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host.to_string(), Some(port.parse().ok()?)),
            None => (text.clone(), None),
        }
    };
    let valid = !host.is_empty()
        && (host.starts_with('[')
            || host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')));
    valid.then_some((host, port))
}

fn is_ip(host: &str) -> bool {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .is_ok()
}

fn ip_host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

fn origin_text(scheme: &str, name: &Authority) -> String {
    if name.port == default_port(scheme) {
        format!("{scheme}://{}", name.host)
    } else {
        format!("{scheme}://{}:{}", name.host, name.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn verdict(gate: &Gate, method: Method, pairs: &[(&'static str, &str)]) -> &'static str {
        match gate.judge(&method, &headers(pairs)) {
            Verdict::Own => "own",
            Verdict::Allowed(_) => "allowed",
            Verdict::Preflight(_) => "preflight",
            Verdict::Refused(_) => "refused",
        }
    }

    #[test]
    fn only_the_servers_own_hosts_are_answered() {
        let gate = Gate::new("127.0.0.1:8470".parse().unwrap())
            .reached_as("https://agents.example.com/base")
            .unwrap();
        for host in [
            "127.0.0.1:8470",
            "localhost:8470",
            "LOCALHOST:8470",
            "agents.example.com",
            "agents.example.com:443",
        ] {
            assert_eq!(
                verdict(&gate, Method::GET, &[("host", host)]),
                "own",
                "{host}"
            );
        }
        for host in [
            "attacker.example:8470",
            "127.0.0.1:8471",
            "127.0.0.2:8470",
            "agents.example.com:8470",
            "localhost.attacker.example:8470",
            "",
            "[::1]:8470",
        ] {
            assert_eq!(
                verdict(&gate, Method::GET, &[("host", host)]),
                "refused",
                "{host}"
            );
        }
        assert_eq!(verdict(&gate, Method::GET, &[]), "refused");
        // Every address: any IP literal on its port, still no name.
        let any = Gate::new("0.0.0.0:8470".parse().unwrap());
        assert_eq!(
            verdict(&any, Method::GET, &[("host", "10.1.2.3:8470")]),
            "own"
        );
        assert_eq!(
            verdict(&any, Method::GET, &[("host", "[fe80::1]:8470")]),
            "own"
        );
        assert_eq!(
            verdict(&any, Method::GET, &[("host", "rebound.example:8470")]),
            "refused"
        );
        let v6 = Gate::new("[::1]:9000".parse().unwrap());
        assert_eq!(verdict(&v6, Method::GET, &[("host", "[::1]:9000")]), "own");
    }

    #[test]
    fn another_origin_is_refused_unless_allowed_and_then_gets_cors() {
        let gate = Gate::new("127.0.0.1:8470".parse().unwrap())
            .allow_origin("https://App.Example")
            .unwrap()
            .allow_origin("http://localhost:3000")
            .unwrap();
        let host = ("host", "127.0.0.1:8470");
        assert_eq!(
            verdict(
                &gate,
                Method::POST,
                &[host, ("origin", "http://127.0.0.1:8470")]
            ),
            "own"
        );
        for origin in [
            "http://evil.example",
            "null",
            "http://localhost:8470",
            "https://127.0.0.1:8470",
        ] {
            assert_eq!(
                verdict(&gate, Method::POST, &[host, ("origin", origin)]),
                "refused",
                "{origin}"
            );
        }
        assert_eq!(
            verdict(
                &gate,
                Method::POST,
                &[host, ("sec-fetch-site", "cross-site")]
            ),
            "refused"
        );
        assert_eq!(
            verdict(
                &gate,
                Method::POST,
                &[host, ("sec-fetch-site", "same-site")]
            ),
            "refused"
        );
        assert_eq!(
            verdict(&gate, Method::GET, &[host, ("sec-fetch-site", "none")]),
            "own"
        );
        assert_eq!(
            verdict(
                &gate,
                Method::POST,
                &[host, ("origin", "https://app.example")]
            ),
            "allowed"
        );
        assert_eq!(
            verdict(
                &gate,
                Method::POST,
                &[
                    host,
                    ("origin", "http://localhost:3000"),
                    ("sec-fetch-site", "cross-site")
                ]
            ),
            "allowed"
        );
        let preflight = [
            host,
            ("origin", "https://app.example"),
            ("access-control-request-method", "POST"),
        ];
        assert_eq!(verdict(&gate, Method::OPTIONS, &preflight), "preflight");
        let foreign = [
            host,
            ("origin", "http://evil.example"),
            ("access-control-request-method", "POST"),
        ];
        assert_eq!(verdict(&gate, Method::OPTIONS, &foreign), "refused");
    }

    #[test]
    fn an_origin_is_named_whole() {
        let gate = || Gate::new("127.0.0.1:1".parse().unwrap());
        for bad in [
            "*",
            "null",
            "app.example",
            "ftp://app.example",
            "https://app.example/path",
            "https://*.example",
            "https://",
        ] {
            assert!(
                matches!(gate().allow_origin(bad), Err(GateError::Origin(_))),
                "{bad}"
            );
        }
        let gate = gate().allow_origin("https://app.example:443").unwrap();
        assert_eq!(gate.allowed, ["https://app.example"]);
        assert!(matches!(
            Gate::new("127.0.0.1:1".parse().unwrap()).reached_as("no-scheme"),
            Err(GateError::Url(_))
        ));
    }
}

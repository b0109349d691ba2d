//! `http_get` (opt-in): fetch a URL whose host and port are on an allow-list, from a public
//! address unless private ones are allowed.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::Url;
use reqwest::redirect::Policy;
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::OnceCell;

use super::http_allowlist::{AllowListError, AllowedHost};
use super::http_resolver::{PublicOnlyResolver, non_public_cause};
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::tool::Tool;

/// Redirects followed at most.
const MAX_REDIRECTS: usize = 5;

/// Which hosts and ports `http_get` may reach and how much it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpGetConfig {
    /// Hosts allowed, each with an optional port: exact names (`docs.rs`), `*.example.com` for
    /// any subdomain, IP literals (`127.0.0.1`, `[::1]`), and `host:port` (`localhost:8080`).
    /// Without a port only the scheme's default port (80, 443) is allowed. Empty means every
    /// request is refused; a malformed entry is an error when the tool is built.
    pub allowed_hosts: Vec<String>,
    /// Whether names may resolve to loopback, private, link-local or other non-public addresses
    /// (default false). An entry that is itself an IP literal always reaches that address.
    pub allow_private: bool,
    /// A request taking longer is abandoned (default 30 s).
    pub timeout: Duration,
    /// Most body bytes read (default 64 KiB); the rest is never downloaded.
    pub max_bytes: usize,
}

impl Default for HttpGetConfig {
    fn default() -> Self {
        HttpGetConfig {
            allowed_hosts: Vec::new(),
            allow_private: false,
            timeout: Duration::from_secs(30),
            max_bytes: 64 * 1024,
        }
    }
}

impl HttpGetConfig {
    /// A config allowing exactly these hosts, with default limits.
    pub fn allowing<I, S>(hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        HttpGetConfig {
            allowed_hosts: hosts.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// The parsed allow-list.
    ///
    /// # Errors
    /// The first malformed entry ([`AllowedHost::parse`]).
    pub fn allow_list(&self) -> Result<Vec<AllowedHost>, AllowListError> {
        self.allowed_hosts
            .iter()
            .map(|entry| AllowedHost::parse(entry))
            .collect()
    }

    /// Whether `url`'s scheme is http(s) and an entry allows its host and port (malformed
    /// entries allow nothing). Where a name may resolve to is checked when connecting.
    pub fn allows(&self, url: &Url) -> bool {
        let rules: Vec<AllowedHost> = self
            .allowed_hosts
            .iter()
            .filter_map(|entry| AllowedHost::parse(entry).ok())
            .collect();
        allows(&rules, url)
    }
}

fn allows(rules: &[AllowedHost], url: &Url) -> bool {
    matches!(url.scheme(), "http" | "https")
        && rules
            .iter()
            .any(|rule| rule.matches_host(url) && rule.matches_port(url))
}

/// The `http_get` tool; see [`http_get_tool`].
#[derive(Debug, Clone)]
pub struct HttpGet {
    config: Arc<HttpGetConfig>,
    rules: Arc<Vec<AllowedHost>>,
    client: Arc<OnceCell<reqwest::Client>>,
}

/// An `http_get` tool to register:
/// `registry.register(http_get_tool(HttpGetConfig::allowing(["docs.rs"]))?)`.
///
/// Redirects are followed only to allowed hosts and ports; names resolving to non-public
/// addresses are refused at connection time unless [`HttpGetConfig::allow_private`].
///
/// # Errors
/// A malformed allow-list entry, named.
pub fn http_get_tool(config: HttpGetConfig) -> Result<HttpGet, AllowListError> {
    let rules = config.allow_list()?;
    Ok(HttpGet {
        config: Arc::new(config),
        rules: Arc::new(rules),
        client: Arc::new(OnceCell::new()),
    })
}

/// Arguments of `http_get`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct HttpGetArgs {
    /// The http:// or https:// URL to fetch.
    pub url: String,
}

impl HttpGet {
    async fn client(&self) -> Result<&reqwest::Client, ToolError> {
        self.client
            .get_or_try_init(|| async {
                troupe_host::tls::install_crypto_provider();
                let rules = Arc::clone(&self.rules);
                let mut builder = reqwest::Client::builder()
                    .timeout(self.config.timeout)
                    // A proxy would make the connected address the proxy's, not the checked one.
                    .no_proxy()
                    .redirect(Policy::custom(move |attempt| {
                        if attempt.previous().len() >= MAX_REDIRECTS {
                            attempt.error("too many redirects")
                        } else if allows(&rules, attempt.url()) {
                            attempt.follow()
                        } else {
                            let to = host_and_port(attempt.url());
                            attempt.error(format!("redirect to \"{to}\" is not allowed"))
                        }
                    }));
                if !self.config.allow_private {
                    builder = builder.dns_resolver(PublicOnlyResolver);
                }
                builder
                    .build()
                    .map_err(|e| ToolError::fatal(format!("cannot build the HTTP client: {e}")))
            })
            .await
    }

    fn refuse(&self, url: &Url) -> ToolError {
        let host = url.host_str().unwrap_or("");
        let why = if !matches!(url.scheme(), "http" | "https") {
            format!("scheme \"{}\" is not http or https", url.scheme())
        } else if self.rules.iter().any(|rule| rule.matches_host(url)) {
            let port = url.port_or_known_default().unwrap_or(0);
            format!("port {port} is not allowed for host \"{host}\"")
        } else {
            format!("host \"{host}\" is not on the allowlist")
        };
        let allowed = if self.config.allowed_hosts.is_empty() {
            "no hosts are allowed".to_string()
        } else {
            format!("allowed hosts: {}", self.config.allowed_hosts.join(", "))
        };
        ToolError::respond(format!("http_get refused {url}: {why} ({allowed})"))
    }
}

/// `host:port` of a URL, for messages.
fn host_and_port(url: &Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// A failed request in words; a refused address is a refusal, not a network failure.
fn request_failed(url: &Url, e: &reqwest::Error) -> ToolError {
    match non_public_cause(e) {
        Some(refused) => ToolError::respond(format!("http_get refused {url}: {refused}")),
        None => ToolError::respond(format!("GET {url} failed: {e}")),
    }
}

#[async_trait]
impl Tool for HttpGet {
    type Args = HttpGetArgs;
    type Output = String;

    fn name(&self) -> &str {
        "http_get"
    }

    fn description(&self) -> &str {
        "Fetch a web page or API response with an HTTP GET. Only allowlisted hosts can be \
         reached. Returns the status line, content type and (bounded) body text."
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.config.timeout + Duration::from_secs(5))
    }

    async fn call(&self, _ctx: &ToolContext, args: HttpGetArgs) -> Result<String, ToolError> {
        let url = Url::parse(args.url.trim()).map_err(|e| {
            ToolError::respond(format!(
                "\"{}\" is not a valid URL ({e}); give a full URL such as https://example.com/page",
                args.url
            ))
        })?;
        if !allows(&self.rules, &url) {
            return Err(self.refuse(&url));
        }
        let mut response = self
            .client()
            .await?
            .get(url.clone())
            .send()
            .await
            .map_err(|e| request_failed(&url, &e))?;
        let status = response.status();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("unknown")
            .to_string();
        let mut body = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| ToolError::respond(format!("reading the body of {url} failed: {e}")))?
        {
            let room = self.config.max_bytes - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        let mut out = format!("HTTP {status}\ncontent-type: {content_type}\n\n");
        if is_text(&content_type) {
            out.push_str(&String::from_utf8_lossy(&body));
        } else {
            let _ = write!(
                out,
                "[{} bytes of {content_type} not shown: not text]",
                body.len()
            );
        }
        if truncated {
            let _ = write!(out, "\n[body cut after {} bytes]", self.config.max_bytes);
        }
        Ok(out)
    }
}

fn is_text(content_type: &str) -> bool {
    let ct = content_type.to_ascii_lowercase();
    ct.starts_with("text/")
        || [
            "json",
            "xml",
            "javascript",
            "yaml",
            "toml",
            "csv",
            "unknown",
        ]
        .iter()
        .any(|t| ct.contains(t))
}

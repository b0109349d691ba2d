//! The page, compiled in: no CDN, no npm, no build step.

/// The page; `{{TOKEN}}` stands for the token in its asset URLs.
const INDEX: &str = include_str!("../static/index.html");
/// The page's script.
pub(crate) const APP_JS: &str = include_str!("../static/app.js");
/// The page's style.
pub(crate) const APP_CSS: &str = include_str!("../static/app.css");

/// The policy the page runs under: its own script and style only, no inline script, no frames,
/// nothing fetched from elsewhere. Model text is set with `textContent`; this is the second
/// wall should a bug ever let markup through.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                              connect-src 'self'; img-src 'self'; base-uri 'none'; \
                              form-action 'none'; frame-ancestors 'none'";

/// The page for `token` (hex digits only, so it needs no escaping).
pub(crate) fn index(token: &str) -> String {
    INDEX.replace("{{TOKEN}}", token)
}

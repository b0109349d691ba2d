//! The Python that drives chromium through selenium, and what is missing to run it: the one
//! helper the live view's browser test (`browser.rs`) and the A2A server's
//! (`tests/suite/a2a_browser.rs`, which includes this file) use.

use std::path::{Path, PathBuf};

/// `TROUPE_SELENIUM_PYTHON`, else the venv `.ci/run` installs selenium into (when there is
/// one), else `python3`.
pub fn python() -> String {
    if let Ok(python) = std::env::var("TROUPE_SELENIUM_PYTHON") {
        return python;
    }
    let cache = std::env::var_os("TROUPE_CI_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/troupe-ci"))
        });
    match cache.map(|c| c.join("venv/bin/python")) {
        Some(venv) if venv.exists() => venv.display().to_string(),
        _ => "python3".to_string(),
    }
}

/// Why the browser test cannot run here, if it cannot.
pub fn missing() -> Option<String> {
    for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        if !Path::new(tool).exists() {
            return Some(format!(
                "{tool} is missing (apt-get install chromium chromium-driver)"
            ));
        }
    }
    let selenium = std::process::Command::new(python())
        .args(["-c", "import selenium"])
        .status();
    match selenium {
        Ok(status) if status.success() => None,
        _ => Some(format!(
            "`{} -c 'import selenium'` failed (pip install selenium==4.50.0)",
            python()
        )),
    }
}

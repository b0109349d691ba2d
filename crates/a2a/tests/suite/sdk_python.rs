//! Where the official A2A SDK is: `TROUPE_A2A_PYTHON` names the Python that has `a2a-sdk`
//! (`.ci/run` installs it into its cache). Without it a test says it was skipped, except under
//! CI (`CI=true`), where it fails. One file for both test binaries that drive the SDK: this
//! crate's suite, and the root package's (`tests/suite/a2a_serve.rs` includes it by path).

use std::path::{Path, PathBuf};

/// The Python with a2a-sdk, or `None` (with a note) outside CI.
pub fn sdk_python() -> Option<PathBuf> {
    match std::env::var_os("TROUPE_A2A_PYTHON") {
        Some(python) if Path::new(&python).exists() => Some(PathBuf::from(python)),
        _ if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
            panic!(
                "TROUPE_A2A_PYTHON is not set: under CI the A2A SDK must be installed by .ci/run"
            )
        }
        _ => {
            eprintln!("skipped: TROUPE_A2A_PYTHON is not set; run .ci/run to install a2a-sdk");
            None
        }
    }
}

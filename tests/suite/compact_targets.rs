//! What `troupe compact` and `troupe expand` may write to: a device or a FIFO named as an output
//! is written in place or refused, never replaced by a regular file, and the files they create
//! are private (0600).

use std::path::{Path, PathBuf};

use troupe_cli::transcript_file::TranscriptFile;

use super::support::binary::fails;
use super::support::compact::{Fixture, compact_args};

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt as _;
    std::fs::symlink_metadata(path)
        .unwrap()
        .file_type()
        .is_fifo()
}

fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .unwrap()
        .file_type()
        .is_symlink()
}

/// A character device that is safe to name as an output: a private `/dev/null` made with
/// `mknod` where possible, else `/dev/null` itself only when this process could not replace it
/// anyway (not root) — a regression must not replace the system's `/dev/null`.
fn char_device(dir: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    let node = dir.join("null");
    let made = std::process::Command::new("mknod")
        .arg(&node)
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|s| s.success());
    // A file system mounted `nodev` has the node but refuses to open it.
    if made && std::fs::OpenOptions::new().write(true).open(&node).is_ok() {
        return Some(node);
    }
    let _ = std::fs::remove_file(&node);
    let probe = dir.join("probe");
    std::fs::write(&probe, b"").unwrap();
    let uid = std::fs::metadata(&probe).unwrap().uid();
    std::fs::remove_file(&probe).unwrap();
    (uid != 0).then(|| PathBuf::from("/dev/null"))
}

fn is_char_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt as _;
    std::fs::symlink_metadata(path)
        .unwrap()
        .file_type()
        .is_char_device()
}

#[test]
fn compact_refuses_a_fifo_without_a_reader_and_leaves_it_a_fifo() {
    let f = Fixture::new();
    let input = f.input("in.json", "a");
    let pipe = f.path("pipe");
    mkfifo(&pipe);
    let link = f.path("pipe-link");
    std::os::unix::fs::symlink(&pipe, &link).unwrap();
    let archive = f.path("a.jsonl");
    // Refused at once (the command returns: it does not wait for a reader).
    for out in [&pipe, &link] {
        let err = fails(&compact_args(&input, out, &archive));
        assert!(err.contains("FIFO with no reader"), "{err}");
    }
    let err = fails(&compact_args(&input, &f.path("small.json"), &link));
    assert!(err.contains("FIFO with no reader"), "{err}");
    assert!(
        !f.path("small.json").exists(),
        "no output without its archive"
    );
    assert!(is_fifo(&pipe), "the FIFO was replaced");
    assert!(is_symlink(&link), "the link was replaced");
}

/// `O_NONBLOCK` (Linux's value): a reader's open must not wait for the writer.
#[cfg(target_os = "linux")]
const O_NONBLOCK: i32 = 0o4000;

#[cfg(target_os = "linux")]
#[test]
fn compact_writes_into_a_fifo_with_a_reader_in_place() {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    use std::time::{Duration, Instant};
    let f = Fixture::new();
    let input = f.input("in.json", "a");
    let pipe = f.path("pipe");
    mkfifo(&pipe);
    // A reader before the writer comes: troupe's open finds it.
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(&pipe)
        .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(compact_args(&input, &pipe, &f.path("a.jsonl")))
        .env_remove("TROUPE_TRACE")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut received = Vec::new();
    let mut chunk = [0u8; 8192];
    let status = loop {
        assert!(Instant::now() < deadline, "troupe never finished writing");
        match reader.read(&mut chunk) {
            Ok(n) if n > 0 => received.extend_from_slice(&chunk[..n]),
            // Nothing yet (no writer so far, or an empty pipe): done once troupe has exited
            // and the pipe is drained.
            Ok(_) => {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("reading the FIFO: {e}"),
        }
    };
    assert!(status.success());
    let text = String::from_utf8(received).unwrap();
    TranscriptFile::parse(Path::new("from the pipe"), &text).unwrap();
    assert!(is_fifo(&pipe), "the FIFO was replaced");
}

#[test]
fn compact_and_expand_write_to_a_device_and_leave_it_a_device() {
    let f = Fixture::new();
    let input = f.input("in.json", "a");
    let (small, archive) = (f.path("small.json"), f.path("a.jsonl"));
    let Some(null) = char_device(f.dir.path()) else {
        eprintln!("skipped: root without mknod, and /dev/null must not be risked");
        return;
    };
    f.compact(&input, &null, &archive);
    let link = f.path("null-link");
    std::os::unix::fs::symlink(&null, &link).unwrap();
    f.compact(&input, &link, &f.path("b.jsonl"));
    assert!(is_symlink(&link), "the link was replaced");
    f.compact(&input, &small, &archive);
    f.expand(&small, &archive, &null);
    assert!(is_char_device(&null), "the device was replaced");
}

#[test]
fn compact_and_expand_create_private_files() {
    use std::os::unix::fs::PermissionsExt as _;
    let f = Fixture::new();
    let input = f.input("in.json", "a");
    let (small, archive) = (f.path("small.json"), f.path("a.jsonl"));
    f.compact(&input, &small, &archive);
    let restored = f.path("restored.json");
    f.expand(&small, &archive, &restored);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for created in [&small, &archive, &restored] {
        assert_eq!(mode(created), 0o600, "{}", created.display());
    }
    // A file that exists keeps the mode its owner gave it.
    std::fs::set_permissions(&small, std::fs::Permissions::from_mode(0o644)).unwrap();
    f.compact(&input, &small, &f.path("b.jsonl"));
    assert_eq!(mode(&small), 0o644);
}

//! The open itself refuses what a racing process swaps into a checked path.

use std::os::unix::fs::symlink;

use troupe_tools::workspace::{EscapeKind, FileError, PathError, RootDir, resolve};

use super::support::{setup, swap_in_symlink};

#[test]
fn a_symlink_swapped_into_a_checked_path_is_refused_by_the_open_itself() {
    let (parent, root, _ctx) = setup();
    let dir = RootDir::open(&root).unwrap();
    let checked = resolve(&root, "d/f.txt").unwrap();
    swap_in_symlink(&root, &parent.path().join("outside"));
    match dir.open_regular(&checked) {
        Err(FileError::Path(PathError::Escape { kind, .. })) => {
            assert_eq!(kind, EscapeKind::Symlink);
        }
        Err(other) => panic!("expected an escape, got {other:?}"),
        Ok(_) => panic!("opened a file outside the root through a swapped-in symlink"),
    }
    // The same for the directory a new file is created in.
    let new_file = resolve(&root, "d_moved/new.txt").unwrap();
    std::fs::rename(root.join("d_moved"), root.join("d_gone")).unwrap();
    symlink(parent.path().join("outside"), root.join("d_moved")).unwrap();
    assert!(matches!(
        dir.write_atomically(&new_file, b"x"),
        Err(FileError::Path(PathError::Escape { .. }))
    ));
    assert!(!parent.path().join("outside/new.txt").exists());
}

//! What a path held (a file's blob and mode, a symlink's target, a directory, or nothing) and
//! how to put paths back into such states without ever writing through a symlink.

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::objects::{ObjectId, ObjectStore};
use super::{Durability, FileMode, StoreError, WriteError, atomic_symlink, replace_file};

/// The state of one path at one moment. `mode` holds the permission bits (`0o7777`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PathState {
    /// Nothing existed at the path.
    Absent,
    File {
        blob: ObjectId,
        mode: u32,
    },
    /// The blob holds the link's target.
    Symlink {
        blob: ObjectId,
    },
    Dir {
        mode: u32,
    },
    /// Something existed whose content was not kept (too large for a snapshot, unreadable, a
    /// FIFO): a rewind leaves this path alone and says so.
    Unrecorded {
        reason: String,
    },
}

/// Whether capturing a path stores its content or only computes its id, for comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    Store,
    HashOnly,
}

/// The current state of `path`, without following a final symlink.
pub(crate) fn capture(
    path: &Path,
    objects: &mut ObjectStore,
    keep: Keep,
) -> Result<PathState, StoreError> {
    let metadata = match fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error)
            if matches!(
                error.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(PathState::Absent);
        }
        Err(error) => return Err(StoreError::io("inspect", path)(error)),
    };
    let mode = metadata.permissions().mode() & 0o7777;
    let file_type = metadata.file_type();
    if file_type.is_dir() {
        return Ok(PathState::Dir { mode });
    }
    if file_type.is_symlink() {
        let target = fs::read_link(path).map_err(StoreError::io("read the link", path))?;
        let bytes = target.as_os_str().as_bytes();
        let blob = match keep {
            Keep::Store => objects.put(bytes)?,
            Keep::HashOnly => ObjectId::of(bytes),
        };
        return Ok(PathState::Symlink { blob });
    }
    if file_type.is_file() {
        let blob = match keep {
            Keep::Store => objects.put_file(path)?,
            Keep::HashOnly => ObjectId::of_file(path)?,
        };
        return Ok(PathState::File { blob, mode });
    }
    Ok(PathState::Unrecorded {
        reason: "a special file (FIFO, socket or device), which checkpoints do not hold".into(),
    })
}

/// A path a restore could not put back, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotRestored {
    pub path: PathBuf,
    pub reason: String,
}

/// What applying target states did, path by path.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    pub restored: Vec<PathBuf>,
    pub removed: Vec<PathBuf>,
    pub unchanged: usize,
    pub failed: Vec<NotRestored>,
}

/// Puts each path (keyed workspace-relative, or absolute when outside the workspace) into its
/// target state. `current` holds each path's state now, so that paths already right are not
/// touched. One path failing does not stop the others: a partial rewind with a list of what
/// failed beats stopping half-way.
pub(crate) fn apply(
    root: &Path,
    targets: &BTreeMap<String, PathState>,
    current: &BTreeMap<String, PathState>,
    objects: &ObjectStore,
) -> Applied {
    let mut applied = Applied::default();
    // Path order puts a directory right before its contents: removals walk it backwards so that
    // a directory is emptied before it goes, creations forwards so that it exists first.
    let mut order: Vec<(&str, &PathState, &PathState)> = Vec::with_capacity(targets.len());
    for (key, target) in targets {
        let now = current.get(key).unwrap_or(&PathState::Absent);
        if now == target {
            applied.unchanged += 1;
        } else {
            order.push((key, target, now));
        }
    }
    order.sort_by(|left, right| Path::new(left.0).cmp(Path::new(right.0)));
    let mut checked_dirs = HashSet::new();
    let mut blocked = HashSet::new();

    for &(key, target, now) in order.iter().rev() {
        let path = root.join(key);
        let in_the_way = match (now, target) {
            (PathState::Absent, _) | (PathState::Dir { .. }, PathState::Dir { .. }) => false,
            (_, PathState::Unrecorded { .. }) => false,
            (PathState::Dir { .. }, _) => true,
            // A file or a link is replaced by the rename that writes the target.
            (_, PathState::File { .. } | PathState::Symlink { .. }) => false,
            (_, PathState::Absent | PathState::Dir { .. }) => true,
        };
        if !in_the_way {
            continue;
        }
        let removal = check_ancestors(root, &path, &mut checked_dirs, false).and_then(|()| {
            if matches!(now, PathState::Dir { .. }) {
                checked_dirs.remove(&path);
                fs::remove_dir(&path)
            } else {
                fs::remove_file(&path)
            }
            .map_err(|error| describe_removal_error(&error))
        });
        match removal {
            Ok(()) if *target == PathState::Absent => applied.removed.push(PathBuf::from(key)),
            Ok(()) => {}
            Err(reason) => {
                blocked.insert(key);
                applied.failed.push(NotRestored {
                    path: PathBuf::from(key),
                    reason,
                });
            }
        }
    }

    for &(key, target, now) in &order {
        if blocked.contains(key) {
            continue;
        }
        let path = root.join(key);
        let result = match target {
            // Removed, or found already gone, by the first pass.
            PathState::Absent => continue,
            PathState::Unrecorded { reason } => {
                Err(format!("its earlier content was not recorded: {reason}"))
            }
            PathState::File { blob, mode } => objects
                .get(blob)
                .map_err(|error| error.to_string())
                .and_then(|bytes| {
                    check_ancestors(root, &path, &mut checked_dirs, true)?;
                    write_file(&path, &bytes, *mode).map_err(|error| error.source.to_string())
                }),
            PathState::Symlink { blob } => objects
                .get(blob)
                .map_err(|error| error.to_string())
                .and_then(|target| {
                    check_ancestors(root, &path, &mut checked_dirs, true)?;
                    write_symlink(&path, OsStr::from_bytes(&target))
                        .map_err(|error| error.source.to_string())
                }),
            PathState::Dir { .. } if matches!(now, PathState::Dir { .. }) => Ok(()),
            PathState::Dir { .. } => check_ancestors(root, &path, &mut checked_dirs, true)
                .and_then(|()| fs::create_dir(&path).map_err(|error| error.to_string())),
        };
        match result {
            Ok(()) => applied.restored.push(PathBuf::from(key)),
            Err(reason) => {
                blocked.insert(key);
                applied.failed.push(NotRestored {
                    path: PathBuf::from(key),
                    reason,
                });
            }
        }
    }

    // Modes last, innermost first, so that a read-only directory is made read-only only once
    // everything inside it has been written.
    for &(key, target, _) in order.iter().rev() {
        if let PathState::Dir { mode } = target
            && !blocked.contains(key)
        {
            let path = root.join(key);
            if let Err(error) = fs::set_permissions(&path, fs::Permissions::from_mode(*mode)) {
                applied.failed.push(NotRestored {
                    path: PathBuf::from(key),
                    reason: format!("cannot set its mode: {error}"),
                });
            }
        }
    }
    applied.restored.sort();
    applied.removed.sort();
    applied
}

/// Refuses to act through a directory that has become a symlink (a restore must never write
/// outside the tree it recorded), and creates missing directories when asked to.
fn check_ancestors(
    root: &Path,
    path: &Path,
    checked: &mut HashSet<PathBuf>,
    create_missing: bool,
) -> Result<(), String> {
    let anchor = if path.starts_with(root) {
        root
    } else {
        Path::new("/")
    };
    let Some(parent) = path.parent() else {
        return Ok(());
    };
    let mut ancestors: Vec<&Path> = parent
        .ancestors()
        .take_while(|ancestor| *ancestor != anchor && ancestor.starts_with(anchor))
        .collect();
    ancestors.reverse();
    for ancestor in ancestors {
        if checked.contains(ancestor) {
            continue;
        }
        match fs::symlink_metadata(ancestor) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                return Err(format!(
                    "{} is now a symlink: not writing through it",
                    ancestor.display()
                ));
            }
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "{} is now a file where a directory was: move it aside and rewind again",
                    ancestor.display()
                ));
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound && create_missing => {
                fs::create_dir(ancestor)
                    .map_err(|error| format!("cannot create {}: {error}", ancestor.display()))?;
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(format!("cannot inspect {}: {error}", ancestor.display())),
        }
        checked.insert(ancestor.to_owned());
    }
    Ok(())
}

fn describe_removal_error(error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::DirectoryNotEmpty => "the directory holds files that no checkpoint \
                                             covers (ignored or added outside the agent): \
                                             left in place"
            .to_owned(),
        io::ErrorKind::NotFound => "it vanished while being removed".to_owned(),
        _ => format!("cannot remove it: {error}"),
    }
}

/// Writes through a temporary file and a rename, so that a crash mid-restore leaves each file
/// either as it was or as restored; synced, since a restored file is the user's work again.
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), WriteError> {
    replace_file(path, bytes, FileMode::Exactly(mode), Durability::Synced)
}

fn write_symlink(path: &Path, target: &OsStr) -> Result<(), WriteError> {
    atomic_symlink(path, target, Durability::Synced)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[allow(clippy::unwrap_used)]
    fn capture_all(
        root: &Path,
        keys: &[&str],
        objects: &mut ObjectStore,
    ) -> BTreeMap<String, PathState> {
        keys.iter()
            .map(|key| {
                let state = capture(&root.join(key), objects, Keep::Store).unwrap();
                ((*key).to_owned(), state)
            })
            .collect()
    }

    #[test]
    fn captures_files_links_directories_and_absence() {
        let dir = tempfile::tempdir().unwrap();
        let mut objects = ObjectStore::new(dir.path().join("objects"));
        let root = dir.path().join("ws");
        fs::create_dir_all(root.join("d")).unwrap();
        fs::write(root.join("d/run.sh"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(root.join("d/run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        symlink("d/run.sh", root.join("link")).unwrap();
        let states = capture_all(
            &root,
            &["d", "d/run.sh", "link", "gone", "d/run.sh/x"],
            &mut objects,
        );
        assert!(matches!(states["d"], PathState::Dir { .. }));
        assert_eq!(
            states["d/run.sh"],
            PathState::File {
                blob: ObjectId::of(b"#!/bin/sh\n"),
                mode: 0o755
            }
        );
        assert_eq!(
            states["link"],
            PathState::Symlink {
                blob: ObjectId::of(b"d/run.sh")
            }
        );
        assert_eq!(states["gone"], PathState::Absent);
        assert_eq!(states["d/run.sh/x"], PathState::Absent);
        let json = serde_json::to_string(&states["d/run.sh"]).unwrap();
        assert!(json.contains(r#""kind":"file""#), "{json}");
    }

    #[test]
    fn applies_states_and_reports_each_path() {
        let dir = tempfile::tempdir().unwrap();
        let mut objects = ObjectStore::new(dir.path().join("objects"));
        let root = dir.path().join("ws");
        fs::create_dir_all(root.join("old")).unwrap();
        fs::write(root.join("old/a.txt"), "a\n").unwrap();
        symlink("old/a.txt", root.join("link")).unwrap();
        let keys = ["old", "old/a.txt", "link", "new", "new/b.txt", "same.txt"];
        fs::write(root.join("same.txt"), "same\n").unwrap();
        let targets = capture_all(&root, &keys, &mut objects);

        fs::remove_dir_all(root.join("old")).unwrap();
        fs::remove_file(root.join("link")).unwrap();
        fs::write(root.join("link"), "a file now\n").unwrap();
        fs::create_dir_all(root.join("new")).unwrap();
        fs::write(root.join("new/b.txt"), "b\n").unwrap();
        let current = capture_all(&root, &keys, &mut objects);

        let applied = apply(&root, &targets, &current, &objects);
        assert!(applied.failed.is_empty(), "{:?}", applied.failed);
        assert_eq!(applied.unchanged, 1);
        let paths = |list: &[&str]| list.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(applied.removed, paths(&["new", "new/b.txt"]));
        assert_eq!(applied.restored, paths(&["link", "old", "old/a.txt"]));
        assert_eq!(fs::read(root.join("old/a.txt")).unwrap(), b"a\n");
        assert_eq!(
            fs::read_link(root.join("link")).unwrap(),
            Path::new("old/a.txt")
        );
        assert!(!root.join("new").exists());
        let leftovers: Vec<_> = fs::read_dir(&root)
            .unwrap()
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn never_writes_through_a_directory_that_became_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let mut objects = ObjectStore::new(dir.path().join("objects"));
        let root = dir.path().join("ws");
        let outside = dir.path().join("outside");
        fs::create_dir_all(root.join("src")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(root.join("src/a.rs"), "fn a() {}\n").unwrap();
        let targets = capture_all(&root, &["src/a.rs"], &mut objects);

        fs::remove_dir_all(root.join("src")).unwrap();
        symlink(&outside, root.join("src")).unwrap();
        let current = capture_all(&root, &["src/a.rs"], &mut objects);
        let applied = apply(&root, &targets, &current, &objects);
        assert_eq!(applied.failed.len(), 1);
        assert!(
            applied.failed[0].reason.contains("symlink"),
            "{:?}",
            applied.failed
        );
        assert!(!outside.join("a.rs").exists());
    }

    #[test]
    fn a_directory_with_unrecorded_files_is_left_in_place_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let objects = ObjectStore::new(dir.path().join("objects"));
        let root = dir.path().join("ws");
        fs::create_dir_all(root.join("build")).unwrap();
        fs::write(root.join("build/untracked.o"), "obj").unwrap();
        let targets = BTreeMap::from([("build".to_owned(), PathState::Absent)]);
        let current = BTreeMap::from([("build".to_owned(), PathState::Dir { mode: 0o755 })]);
        let applied = apply(&root, &targets, &current, &objects);
        assert_eq!(applied.failed.len(), 1);
        assert!(
            applied.failed[0].reason.contains("left in place"),
            "{:?}",
            applied.failed
        );
        assert!(root.join("build/untracked.o").exists());
    }
}

//! Confinement (SPEC §7.3): paths resolved inside the workspace (and the extra roots the config
//! allows), processes in their own group, and where the platform can, the commands a tool runs
//! unable to write anywhere else.

mod confine;
pub mod isolation;
pub mod process;
mod report;
pub mod secrets;

use std::io;
use std::path::{Component, Path, PathBuf};

use crate::util::lexically_normal;

pub use report::{LandlockSupport, SandboxReport, report};

/// A path the model gave that the workspace does not allow, or that cannot be resolved; the
/// message says why and what to use instead (tools pass it on to the model as it is).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PathRefused {
    pub message: String,
}

impl PathRefused {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// A session's workspace root, canonicalised once, and the roots outside it that the config
/// allows.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    extra_roots: Vec<PathBuf>,
    /// Paths the commands tools run must not see (the daemon's home), where namespaces allow.
    hidden: Vec<PathBuf>,
}

impl Workspace {
    pub fn new(root: &Path) -> io::Result<Self> {
        Self::with_extra_roots(root, Vec::new())
    }

    /// A workspace whose tools may also read and write under `extra` (config-allowed paths such
    /// as a sibling checkout or a package cache). Every root must exist: a missing one fails here,
    /// naming it, rather than being silently unusable later.
    pub fn with_extra_roots(root: &Path, extra: Vec<PathBuf>) -> io::Result<Self> {
        let canonical = |path: &Path| {
            path.canonicalize().map_err(|error| {
                io::Error::new(error.kind(), format!("{}: {error}", path.display()))
            })
        };
        let root = canonical(root)?;
        let mut extra_roots = Vec::with_capacity(extra.len());
        for path in &extra {
            let path = canonical(path)?;
            if !path.starts_with(&root) && !extra_roots.contains(&path) {
                extra_roots.push(path);
            }
        }
        Ok(Self {
            root,
            extra_roots,
            hidden: Vec::new(),
        })
    }

    /// The same workspace, with `paths` (those that exist) hidden from the commands tools run.
    pub fn hiding(mut self, paths: &[PathBuf]) -> Self {
        self.hidden = paths
            .iter()
            .filter_map(|path| path.canonicalize().ok())
            // A workspace inside a hidden path would vanish with it.
            .filter(|path| !self.root.starts_with(path))
            .collect();
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The allowed roots outside the workspace, canonical.
    pub fn extra_roots(&self) -> &[PathBuf] {
        &self.extra_roots
    }

    fn allows(&self, path: &Path) -> bool {
        path.starts_with(&self.root) || self.extra_roots.iter().any(|root| path.starts_with(root))
    }

    /// Resolves a path the model gave (relative to the root, or absolute) to a canonical path
    /// inside the workspace. The path need not exist yet, so that it can be written: its longest
    /// existing ancestor is canonicalised and the rest appended, which catches `..` and symlinks
    /// that lead out.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, PathRefused> {
        if path.trim().is_empty() {
            return Err(PathRefused::new(format!(
                "the path is empty: give a file path relative to the workspace {}",
                self.root.display()
            )));
        }
        let requested = self.root.join(path);
        let components: Vec<Component<'_>> = requested.components().collect();
        let (mut resolved, missing) = (0..=components.len())
            .rev()
            .find_map(|existing| {
                let prefix: PathBuf = components[..existing].iter().collect();
                let canonical = prefix.canonicalize().ok()?;
                Some((canonical, &components[existing..]))
            })
            .ok_or_else(|| {
                PathRefused::new(format!("cannot resolve `{path}`: no part of it exists"))
            })?;
        for component in missing {
            match component {
                Component::Normal(name) => {
                    resolved.push(name);
                    // A component that exists but did not canonicalise is a symlink whose
                    // target is missing: writing through it would create the target wherever
                    // it points.
                    if resolved.symlink_metadata().is_ok() {
                        return Err(self.refusal(
                            path,
                            &format!(
                                "`{}` is a symlink to a target that does not exist",
                                self.display(&resolved)
                            ),
                        ));
                    }
                }
                Component::ParentDir => {
                    resolved.pop();
                }
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            }
        }
        if self.allows(&resolved) {
            return Ok(resolved);
        }
        let lexical = lexically_normal(&requested);
        let reason = if self.allows(&lexical) {
            format!(
                "it goes through a symlink that points outside the workspace (to {})",
                resolved.display()
            )
        } else if Path::new(path).is_absolute() {
            "it is outside the workspace".to_owned()
        } else {
            "its `..` components climb out of the workspace".to_owned()
        };
        Err(self.refusal(path, &reason))
    }

    fn refusal(&self, path: &str, reason: &str) -> PathRefused {
        let also = if self.extra_roots.is_empty() {
            String::new()
        } else {
            let roots: Vec<String> = self
                .extra_roots
                .iter()
                .map(|root| root.display().to_string())
                .collect();
            format!(" (or the allowed roots {})", roots.join(", "))
        };
        PathRefused::new(format!(
            "refused `{path}`: {reason}. Paths must stay inside the workspace {}{also}: use a \
             path relative to it",
            self.root.display()
        ))
    }

    /// The workspace-relative form of a path, for messages; paths outside stay absolute.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(relative) if relative.as_os_str().is_empty() => ".".to_owned(),
            Ok(relative) => relative.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use super::*;

    /// A directory outside the temp directories, which this (unconfined) test process can write
    /// but a confined command must not.
    #[allow(clippy::unwrap_used)]
    pub(crate) fn outside_temp_dirs() -> tempfile::TempDir {
        let dir = tempfile::Builder::new()
            .prefix("cwcode-sandbox-test-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let canonical = dir.path().canonicalize().unwrap();
        assert!(
            !confine::writable_outside_workspaces()
                .iter()
                .any(|writable| canonical.starts_with(writable)),
            "{} is writable by confined commands: choose another",
            canonical.display()
        );
        dir
    }

    /// Whether this kernel enforces the write confinement; the Landlock tests skip (saying so)
    /// where it does not, except under CI (`CI=true`), whose kernel must enforce it: there a
    /// skipped check would pass by accident, so it fails instead.
    pub(crate) fn landlock_enforced() -> bool {
        let support = report().landlock;
        let enforced = matches!(support, LandlockSupport::Enforced { .. });
        if !enforced {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true but Landlock is not enforced here ({support:?}): the confinement checks \
                 cannot run; run CI on a kernel with Landlock enabled"
            );
            eprintln!("Landlock is not enforced here: skipping the confinement checks");
        }
        enforced
    }

    #[allow(clippy::unwrap_used)]
    fn workspace_with_outside() -> (tempfile::TempDir, Workspace, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let outside = dir.path().join("outside");
        fs::create_dir_all(root.join("src")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
        fs::write(outside.join("secret.txt"), "secret\n").unwrap();
        let workspace = Workspace::new(&root).unwrap();
        (dir, workspace, outside.canonicalize().unwrap())
    }

    #[test]
    fn relative_paths_resolve_under_the_root() {
        let (_dir, workspace, _) = workspace_with_outside();
        let resolved = workspace.resolve("src/main.rs").unwrap();
        assert_eq!(resolved, workspace.root().join("src/main.rs"));
        assert_eq!(workspace.display(&resolved), "src/main.rs");
        assert_eq!(workspace.resolve(".").unwrap(), workspace.root());
        assert_eq!(workspace.display(workspace.root()), ".");
    }

    #[test]
    fn absolute_paths_inside_are_accepted() {
        let (_dir, workspace, _) = workspace_with_outside();
        let inside = workspace.root().join("src/main.rs");
        assert_eq!(workspace.resolve(inside.to_str().unwrap()).unwrap(), inside);
    }

    #[test]
    fn files_that_do_not_exist_yet_resolve_for_writing() {
        let (_dir, workspace, _) = workspace_with_outside();
        assert_eq!(
            workspace.resolve("src/new/deep/file.rs").unwrap(),
            workspace.root().join("src/new/deep/file.rs")
        );
        assert_eq!(
            workspace.resolve("src/new/../lib.rs").unwrap(),
            workspace.root().join("src/lib.rs")
        );
    }

    #[test]
    fn dot_dot_that_stays_inside_is_accepted() {
        let (_dir, workspace, _) = workspace_with_outside();
        assert_eq!(
            workspace.resolve("src/../src/main.rs").unwrap(),
            workspace.root().join("src/main.rs")
        );
    }

    #[test]
    fn dot_dot_leaving_the_workspace_is_refused() {
        let (_dir, workspace, _) = workspace_with_outside();
        for path in ["../outside/secret.txt", "src/../../x", "../new-file"] {
            let error = workspace.resolve(path).unwrap_err();
            assert!(
                error.message.contains(&format!("refused `{path}`")),
                "{error}"
            );
            assert!(error.message.contains("`..`"), "{error}");
            assert!(
                error
                    .message
                    .contains("Paths must stay inside the workspace"),
                "{error}"
            );
        }
    }

    #[test]
    fn absolute_paths_elsewhere_are_refused() {
        let (_dir, workspace, _) = workspace_with_outside();
        let error = workspace.resolve("/etc/passwd").unwrap_err();
        assert!(error.message.contains("refused `/etc/passwd`"), "{error}");
        assert!(error.message.contains("outside the workspace"), "{error}");
        assert!(
            error
                .message
                .contains(&workspace.root().display().to_string()),
            "{error}"
        );
    }

    #[test]
    fn symlinks_pointing_out_are_refused() {
        let (_dir, workspace, outside) = workspace_with_outside();
        symlink(&outside, workspace.root().join("escape")).unwrap();
        symlink(
            outside.join("secret.txt"),
            workspace.root().join("secret-link"),
        )
        .unwrap();
        for path in ["escape/secret.txt", "escape/new.txt", "secret-link"] {
            let error = workspace.resolve(path).unwrap_err();
            assert!(error.message.contains("symlink"), "{path}: {error}");
        }
    }

    #[test]
    fn dangling_symlinks_are_refused() {
        let (_dir, workspace, outside) = workspace_with_outside();
        symlink(
            outside.join("not-yet.txt"),
            workspace.root().join("dangling"),
        )
        .unwrap();
        let error = workspace.resolve("dangling").unwrap_err();
        assert!(error.message.contains("does not exist"), "{error}");
    }

    #[test]
    fn symlinks_inside_the_workspace_are_followed() {
        let (_dir, workspace, _) = workspace_with_outside();
        symlink(workspace.root().join("src"), workspace.root().join("code")).unwrap();
        assert_eq!(
            workspace.resolve("code/main.rs").unwrap(),
            workspace.root().join("src/main.rs")
        );
    }

    #[test]
    fn extra_roots_are_allowed_like_the_workspace() {
        let (dir, _, outside) = workspace_with_outside();
        let root = dir.path().join("ws");
        let workspace = Workspace::with_extra_roots(&root, vec![outside.clone()]).unwrap();
        assert_eq!(workspace.extra_roots(), std::slice::from_ref(&outside));

        for path in [
            outside.join("secret.txt").to_str().unwrap(),
            "../outside/secret.txt",
            "../outside/new/file.txt",
        ] {
            let resolved = workspace.resolve(path).unwrap();
            assert!(resolved.starts_with(&outside), "{path}: {resolved:?}");
        }
        symlink(&outside, workspace.root().join("link")).unwrap();
        assert_eq!(
            workspace.resolve("link/secret.txt").unwrap(),
            outside.join("secret.txt")
        );

        let error = workspace.resolve("/etc/passwd").unwrap_err();
        assert!(
            error
                .message
                .contains(&format!("(or the allowed roots {})", outside.display())),
            "{error}"
        );
    }

    #[test]
    fn a_missing_extra_root_is_an_error_that_names_it() {
        let (dir, _, _) = workspace_with_outside();
        let missing = dir.path().join("not-there");
        let error =
            Workspace::with_extra_roots(&dir.path().join("ws"), vec![missing.clone()]).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        assert!(
            error.to_string().contains(&missing.display().to_string()),
            "{error}"
        );
    }

    #[test]
    fn writable_paths_are_the_roots_then_temp_and_devices() {
        let (dir, _, outside) = workspace_with_outside();
        let workspace =
            Workspace::with_extra_roots(&dir.path().join("ws"), vec![outside.clone()]).unwrap();
        let writable = workspace.writable_paths();
        assert_eq!(writable[..2], [workspace.root().to_path_buf(), outside]);
        assert!(writable.contains(&PathBuf::from("/tmp")), "{writable:?}");
        assert!(
            writable.contains(&PathBuf::from("/dev/null")),
            "{writable:?}"
        );
        assert!(writable.iter().all(|path| path.exists()), "{writable:?}");
    }

    #[test]
    fn empty_path_is_refused() {
        let (_dir, workspace, _) = workspace_with_outside();
        assert!(workspace.resolve("  ").is_err());
    }
}

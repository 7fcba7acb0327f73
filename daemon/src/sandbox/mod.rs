//! Confinement (SPEC §7.3): paths resolved inside the workspace, processes in their own group.

pub mod process;

use std::path::{Component, Path, PathBuf};

use crate::tools::ToolError;

/// A session's workspace root, canonicalised once.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    pub fn new(root: &Path) -> std::io::Result<Self> {
        Ok(Self {
            root: root.canonicalize()?,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a path the model gave (relative to the root, or absolute) to a canonical path
    /// inside the workspace. The path need not exist yet, so that it can be written: its longest
    /// existing ancestor is canonicalised and the rest appended, which catches `..` and symlinks
    /// that lead out.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        if path.trim().is_empty() {
            return Err(ToolError::new(format!(
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
                ToolError::new(format!("cannot resolve `{path}`: no part of it exists"))
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
        if resolved.starts_with(&self.root) {
            return Ok(resolved);
        }
        let lexical = lexically_normal(&requested);
        let reason = if lexical.starts_with(&self.root) {
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

    fn refusal(&self, path: &str, reason: &str) -> ToolError {
        ToolError::new(format!(
            "refused `{path}`: {reason}. Paths must stay inside the workspace {}: use a path \
             relative to it",
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

/// `..` and `.` folded away without touching the filesystem: where the path claims to go, used
/// only to explain a refusal.
fn lexically_normal(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    normal
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use super::*;

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
    fn empty_path_is_refused() {
        let (_dir, workspace, _) = workspace_with_outside();
        assert!(workspace.resolve("  ").is_err());
    }
}

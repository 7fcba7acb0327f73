//! Small helpers every room may use, at the bottom of the graph: they import no other room, so
//! a room needing one never has to reach sideways or up for it.

use std::path::{Component, Path, PathBuf};

/// The current time as the journal, the session files and the checkpoint ledger record it.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// `..` and `.` folded away without touching the filesystem: where the path claims to go.
pub fn lexically_normal(path: &Path) -> PathBuf {
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

/// reqwest is built without a TLS provider of its own (its default, aws-lc-rs, is a slow C build),
/// so ring is installed as the process default. Losing a race to another installer is fine: the
/// provider it installed serves as well.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexically_normal_folds_dots_without_escaping_the_root() {
        assert_eq!(
            lexically_normal(Path::new("/work/./a/../b/../../../etc")),
            PathBuf::from("/etc")
        );
        assert_eq!(lexically_normal(Path::new("a/./b/..")), PathBuf::from("a"));
    }
}

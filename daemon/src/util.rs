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

/// `text` cut after `max_chars` characters, with an ellipsis when something was cut.
pub fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Tool-call arguments with JSON formatting folded away, so that two calls which differ only in
/// spacing or key order compare equal.
pub fn normalise_arguments(arguments: &str) -> String {
    serde_json::from_str::<serde_json::Value>(arguments)
        .map(|value| value.to_string())
        .unwrap_or_else(|_| arguments.trim().to_owned())
}

/// An error with its causes: reqwest's top-level messages ("error sending request") name none
/// of them.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
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

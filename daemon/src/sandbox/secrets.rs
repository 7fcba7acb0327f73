//! Secrets from the config kept out of what tools see and say (SPEC §7.3): the processes a tool
//! starts get an environment without them, and every value that still shows up in a tool's
//! output (a key printed from a file, an echo) is replaced before the model or a client sees it.
//! The environment is an allow-list, so nothing of the daemon's own (its socket, its home, a key
//! the user exported for it) reaches a command unless the user names it.

use tokio::process::Command;

/// What a secret value becomes in tool output.
pub const REDACTED: &str = "[redacted]";

/// Shorter values are left alone: they occur in ordinary text, which redacting them would
/// garble (and a real API key is far longer).
const MIN_SECRET_BYTES: usize = 8;

/// Replaces secret values in text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so that a secret containing another is replaced whole.
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new(values: &[String]) -> Self {
        let mut secrets: Vec<String> = values
            .iter()
            .filter(|value| value.len() >= MIN_SECRET_BYTES)
            .cloned()
            .collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Self { secrets }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    pub fn contains_secret(&self, text: &str) -> bool {
        self.secrets
            .iter()
            .any(|secret| text.contains(secret.as_str()))
    }

    pub fn redact(&self, mut text: String) -> String {
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        text
    }

    /// The length of the longest tail of `text` that is the beginning of a secret: what a stream
    /// must hold back until the next chunk shows whether the secret follows.
    pub(crate) fn partial_tail_len(&self, text: &str) -> usize {
        let longest = self.secrets.first().map_or(0, String::len);
        let from = text.len().saturating_sub(longest.saturating_sub(1));
        (from..text.len())
            .filter(|&start| text.is_char_boundary(start))
            .find(|&start| {
                self.secrets
                    .iter()
                    .any(|secret| secret.starts_with(&text[start..]))
            })
            .map_or(0, |start| text.len() - start)
    }
}

/// What a tool's command inherits from the daemon's environment without being configured: what
/// shells, compilers and editors need to behave, and nothing that points at the daemon, a key or a
/// credential helper.
const INHERITED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "TZ",
    "TMPDIR",
    "NO_COLOR",
];

/// Gives a command an allow-listed environment: [`INHERITED`], the locale (`LC_*`) and the names
/// the user passes through (`policy.tool_env`), minus every variable whose value holds a secret
/// (a key exported under another name, or passed through by mistake).
pub fn confine_environment(command: &mut Command, passthrough: &[String], redactor: &Redactor) {
    command.env_clear();
    for (name, value) in std::env::vars_os() {
        let Some(text) = name.to_str() else { continue };
        let allowed = INHERITED.contains(&text)
            || text.starts_with("LC_")
            || passthrough.iter().any(|allowed| allowed == text);
        if allowed && !redactor.contains_secret(&value.to_string_lossy()) {
            command.env(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redactor(values: &[&str]) -> Redactor {
        Redactor::new(
            &values
                .iter()
                .map(|value| (*value).to_owned())
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn every_occurrence_is_replaced_and_the_longer_secret_wins() {
        let redactor = redactor(&["sk-abcdef123", "sk-abcdef123456", "short"]);
        assert_eq!(
            redactor.redact("a sk-abcdef123456 b sk-abcdef123 c short".to_owned()),
            "a [redacted] b [redacted] c short"
        );
        assert!(redactor.contains_secret("xsk-abcdef123x"));
        assert!(!redactor.contains_secret("sk-abcdef12"));
    }

    #[test]
    fn values_too_short_to_be_keys_are_ignored() {
        assert!(redactor(&["", "abc", "1234567"]).is_empty());
    }
}

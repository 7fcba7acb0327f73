//! `config.json` (SPEC §10): the named provider profiles and which one a new session gets.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Headers;

/// Body fields the client writes itself; a profile's `request_extra` may not replace them, because
/// the history, the tools and streaming are what the agent loop depends on.
pub(super) const RESERVED_BODY_FIELDS: [&str; 4] = ["model", "messages", "tools", "stream"];

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_profile: Option<String>,
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
}

/// One endpoint and model, with what the client must know about it.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub base_url: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The environment variable holding the key, read when the client is built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub kind: ProviderKind,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: Headers,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    #[serde(default)]
    pub reasoning_history: ReasoningHistory,
    #[serde(default)]
    pub edit_tools: EditTools,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<Pricing>,
    /// Merged into every request body, after the client's own fields and before the messages.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub request_extra: Map<String, Value>,
}

/// How the endpoint wants to be addressed, beyond the common OpenAI-compatible shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// `Authorization: Bearer KEY`.
    #[default]
    Openai,
    /// Azure OpenAI: the key goes in an `api-key` header.
    Azure,
}

/// Whether earlier reasoning is sent back with the history (SPEC §6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningHistory {
    #[default]
    Strip,
    Keep,
}

/// Which file-editing tools the model is offered (SPEC §7.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EditTools {
    Hashline,
    Replace,
    #[default]
    Both,
}

/// Prices per million tokens, in whatever currency the user thinks in.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    pub input_hit: f64,
    pub input_miss: f64,
    pub output: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}:{line}:{column}: {}{reason}", path.display(), field_prefix(field.as_deref()))]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        /// The dotted path of the offending field, when the error is inside one.
        field: Option<String>,
        reason: String,
    },
    #[error("{}: profile `{profile}`: {reason}", path.display())]
    Invalid {
        path: PathBuf,
        profile: String,
        reason: String,
    },
    #[error("{}", unknown_profile_message(name, known))]
    UnknownProfile { name: String, known: Vec<String> },
}

fn field_prefix(field: Option<&str>) -> String {
    field.map(|field| format!("{field}: ")).unwrap_or_default()
}

fn unknown_profile_message(name: &str, known: &[String]) -> String {
    if known.is_empty() {
        format!("no profile named `{name}`: no profile is configured")
    } else {
        format!(
            "no profile named `{name}`; known profiles: {}",
            known.join(", ")
        )
    }
}

impl Config {
    /// Reads `config.json`. A missing or blank file is an empty configuration, so a fresh home
    /// works before the user has written anything.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let config = Self::parse(&text).map_err(|error| error.into_config_error(path))?;
        config.validate(path)?;
        Ok(config)
    }

    fn parse(text: &str) -> Result<Config, ParseFailure> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let config = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
            let field = error.path().to_string();
            ParseFailure {
                field: (field != ".").then_some(field),
                error: error.into_inner(),
            }
        })?;
        deserializer
            .end()
            .map_err(|error| ParseFailure { field: None, error })?;
        Ok(config)
    }

    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        for (name, profile) in &self.profiles {
            if let Some(field) = RESERVED_BODY_FIELDS
                .iter()
                .find(|field| profile.request_extra.contains_key(**field))
            {
                return Err(ConfigError::Invalid {
                    path: path.to_owned(),
                    profile: name.clone(),
                    reason: format!("request_extra may not set `{field}`: cwcode writes it itself"),
                });
            }
        }
        Ok(())
    }

    pub fn profile(&self, name: &str) -> Result<&Profile, ConfigError> {
        self.profiles
            .get(name)
            .ok_or_else(|| ConfigError::UnknownProfile {
                name: name.to_owned(),
                known: self.profile_names().map(str::to_owned).collect(),
            })
    }

    /// The explicit default, else the only profile when there is exactly one.
    pub fn default_profile_name(&self) -> Option<&str> {
        if let Some(name) = &self.default_profile {
            return Some(name);
        }
        let mut names = self.profile_names();
        match (names.next(), names.next()) {
            (Some(only), None) => Some(only),
            _ => None,
        }
    }

    /// Profile names in sorted order.
    pub fn profile_names(&self) -> impl Iterator<Item = &str> {
        self.profiles.keys().map(String::as_str)
    }

    /// Every environment variable that holds a key, so tool processes can be started without them.
    pub fn secret_env_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .profiles
            .values()
            .filter_map(|profile| profile.api_key_env.clone())
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

struct ParseFailure {
    field: Option<String>,
    error: serde_json::Error,
}

impl ParseFailure {
    fn into_config_error(self, path: &Path) -> ConfigError {
        let (line, column) = (self.error.line(), self.error.column());
        // serde_json appends the position to its message; the position has its own fields here.
        let message = self.error.to_string();
        let reason = message
            .strip_suffix(&format!(" at line {line} column {column}"))
            .unwrap_or(&message)
            .to_owned();
        ConfigError::Parse {
            path: path.to_owned(),
            line,
            column,
            field: self.field,
            reason,
        }
    }
}

/// Keys must never reach a log line, so the key and the header values (which may carry one) are
/// left out.
impl fmt::Debug for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Profile")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("api_key_env", &self.api_key_env)
            .field("kind", &self.kind)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("context_window", &self.context_window)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("reasoning_history", &self.reasoning_history)
            .field("edit_tools", &self.edit_tools)
            .field("pricing", &self.pricing)
            .field("request_extra", &self.request_extra)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, text).unwrap();
        Config::load(&path)
    }

    #[test]
    fn a_missing_file_is_an_empty_config() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::load(&dir.path().join("config.json")).unwrap();
        assert_eq!(config, Config::default());
        assert_eq!(config.default_profile_name(), None);
    }

    #[test]
    fn a_blank_file_is_an_empty_config() {
        assert_eq!(load_text(" \n").unwrap(), Config::default());
    }

    #[test]
    fn loads_every_profile_field() {
        let config = load_text(
            r#"{
              "default_profile": "local",
              "profiles": {
                "local": {"base_url": "http://127.0.0.1:8000/v1", "model": "qwen"},
                "full": {
                  "base_url": "https://api.example.invalid/v1", "model": "m",
                  "api_key": "sk-1", "api_key_env": "FULL_KEY", "kind": "azure",
                  "headers": {"x-team": "blue"}, "context_window": 131072,
                  "max_output_tokens": 8192, "reasoning_history": "keep", "edit_tools": "hashline",
                  "pricing": {"input_hit": 0.028, "input_miss": 0.28, "output": 0.42},
                  "request_extra": {"temperature": 0.2}
                }
              }
            }"#,
        )
        .unwrap();
        let local = config.profile("local").unwrap();
        assert_eq!(local.reasoning_history, ReasoningHistory::Strip);
        assert_eq!(local.edit_tools, EditTools::Both);
        assert_eq!(local.kind, ProviderKind::Openai);
        let full = config.profile("full").unwrap();
        assert_eq!(full.api_key.as_deref(), Some("sk-1"));
        assert_eq!(full.kind, ProviderKind::Azure);
        assert_eq!(full.headers["x-team"], "blue");
        assert_eq!(full.context_window, Some(131_072));
        assert_eq!(full.max_output_tokens, Some(8192));
        assert_eq!(full.reasoning_history, ReasoningHistory::Keep);
        assert_eq!(full.edit_tools, EditTools::Hashline);
        assert_eq!(full.pricing.map(|pricing| pricing.output), Some(0.42));
        assert_eq!(full.request_extra["temperature"], 0.2);
        assert_eq!(config.default_profile_name(), Some("local"));
        assert_eq!(
            config.profile_names().collect::<Vec<_>>(),
            ["full", "local"]
        );
    }

    #[test]
    fn an_unknown_field_names_file_line_column_and_field() {
        let error = load_text(
            "{\"profiles\": {\n  \"local\": {\"base_url\": \"http://x\", \"model\": \"m\",\n    \"base_ur\": \"typo\"}}}",
        )
        .unwrap_err();
        let ConfigError::Parse {
            path, line, reason, ..
        } = &error
        else {
            panic!("{error:?}");
        };
        assert!(path.ends_with("config.json"));
        assert_eq!(*line, 3);
        assert!(reason.contains("unknown field `base_ur`"), "{reason}");
        let text = error.to_string();
        assert!(text.contains("config.json:3:"), "{text}");
        assert!(text.contains("profiles.local"), "{text}");
    }

    #[test]
    fn a_wrong_type_names_the_field_path() {
        let error = load_text(
            r#"{"profiles": {"local": {"base_url": "http://x", "model": "m", "context_window": "big"}}}"#,
        )
        .unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("profiles.local.context_window: invalid type"),
            "{text}"
        );
        assert!(text.contains(":1:"), "{text}");
    }

    #[test]
    fn a_missing_required_field_is_named() {
        let error = load_text(r#"{"profiles": {"local": {"base_url": "http://x"}}}"#).unwrap_err();
        assert!(
            error.to_string().contains("missing field `model`"),
            "{error}"
        );
    }

    #[test]
    fn a_syntax_error_gives_its_position() {
        let error = load_text("{\n  \"profiles\": {,}\n}").unwrap_err();
        let ConfigError::Parse { line, column, .. } = error else {
            panic!("{error:?}");
        };
        assert_eq!((line, column), (2, 16));
    }

    #[test]
    fn trailing_text_after_the_object_is_an_error() {
        let error = load_text("{} {}").unwrap_err();
        assert!(error.to_string().contains("trailing characters"), "{error}");
    }

    #[test]
    fn request_extra_may_not_replace_the_messages() {
        let error = load_text(
            r#"{"profiles": {"p": {"base_url": "http://x", "model": "m", "request_extra": {"messages": []}}}}"#,
        )
        .unwrap_err();
        assert!(
            matches!(&error, ConfigError::Invalid { profile, .. } if profile == "p"),
            "{error:?}"
        );
        assert!(error.to_string().contains("`messages`"), "{error}");
    }

    #[test]
    fn an_unknown_profile_lists_the_known_ones() {
        let config = load_text(
            r#"{"profiles": {"b": {"base_url": "http://x", "model": "m"}, "a": {"base_url": "http://y", "model": "m"}}}"#,
        )
        .unwrap();
        let error = config.profile("c").unwrap_err().to_string();
        assert!(error.contains("`c`") && error.contains("a, b"), "{error}");
        assert!(
            Config::default()
                .profile("c")
                .unwrap_err()
                .to_string()
                .contains("no profile is configured")
        );
    }

    #[test]
    fn the_only_profile_is_the_default_and_two_without_a_default_are_none() {
        let one =
            load_text(r#"{"profiles": {"solo": {"base_url": "http://x", "model": "m"}}}"#).unwrap();
        assert_eq!(one.default_profile_name(), Some("solo"));
        let two = load_text(
            r#"{"profiles": {"a": {"base_url": "http://x", "model": "m"}, "b": {"base_url": "http://y", "model": "m"}}}"#,
        )
        .unwrap();
        assert_eq!(two.default_profile_name(), None);
    }

    #[test]
    fn secret_env_names_lists_each_key_variable_once() {
        let config = load_text(
            r#"{"profiles": {
              "a": {"base_url": "http://x", "model": "m", "api_key_env": "B_KEY"},
              "b": {"base_url": "http://x", "model": "m", "api_key_env": "A_KEY"},
              "c": {"base_url": "http://x", "model": "m", "api_key_env": "A_KEY"},
              "d": {"base_url": "http://x", "model": "m"}
            }}"#,
        )
        .unwrap();
        assert_eq!(config.secret_env_names(), ["A_KEY", "B_KEY"]);
    }

    #[test]
    fn debug_output_hides_the_key_and_header_values() {
        let config = load_text(
            r#"{"profiles": {"p": {"base_url": "http://x", "model": "m", "api_key": "sk-secret",
                "headers": {"x-token": "hidden-value"}}}}"#,
        )
        .unwrap();
        let debug = format!("{config:?}");
        assert!(
            !debug.contains("sk-secret") && !debug.contains("hidden-value"),
            "{debug}"
        );
        assert!(
            debug.contains("[redacted]") && debug.contains("x-token"),
            "{debug}"
        );
    }
}

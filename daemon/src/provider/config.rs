//! `config.json` (SPEC §10): the named provider profiles and which one a new session gets. The
//! built-in profiles are always there; a profile in the file with a built-in's name changes only
//! the fields it sets.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::goal_hooks::{GoalDefaults, Hooks};
use super::profile::{EditTools, Pricing, Profile, ProviderKind, ReasoningHistory, ResolvedKey};
use super::retry::CallLimits;
use super::{Headers, builtin};
use crate::mcp::ServerConfig as McpServer;

/// Body fields the client writes itself; a profile's `request_extra` may not replace them, because
/// the history, the tools and streaming are what the agent loop depends on.
pub(super) const RESERVED_BODY_FIELDS: [&str; 4] = ["model", "messages", "tools", "stream"];

/// The configuration in force: every built-in profile, merged with what `config.json` says.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    default_profile: Option<String>,
    /// The profile `task`'s sub-agents run on; `None`: the session's own.
    task_profile: Option<String>,
    profiles: BTreeMap<String, Profile>,
    policy: Policy,
    goal: GoalDefaults,
    hooks: Hooks,
    chrome: Chrome,
    mcp_servers: BTreeMap<String, McpServer>,
}

/// The user's own Chrome, which `chrome_fetch` drives over the DevTools Protocol.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Chrome {
    /// A `ws://` URL, a port on 127.0.0.1, or a Chrome profile directory whose
    /// `DevToolsActivePort` file names the port.
    #[serde(default, deserialize_with = "deserialize_chrome_endpoint")]
    pub endpoint: Option<Arc<str>>,
}

fn deserialize_chrome_endpoint<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Arc<str>>, D::Error> {
    let text = match Value::deserialize(deserializer)? {
        Value::Null => return Ok(None),
        Value::String(text) => text.trim().to_owned(),
        Value::Number(port)
            if port
                .as_u64()
                .is_some_and(|port| port <= u64::from(u16::MAX)) =>
        {
            port.to_string()
        }
        other => {
            return Err(de::Error::custom(format!(
                "expected a ws:// URL, a port or Chrome's profile directory, not {other}"
            )));
        }
    };
    Ok((!text.is_empty()).then(|| Arc::from(text)))
}

/// What the user allows beyond the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Directories outside a session's workspace that its tools may read and write (SPEC §7.3),
    /// e.g. a shared cache or a sibling repository.
    #[serde(default)]
    pub extra_roots: Vec<PathBuf>,
    /// Variables of the daemon's environment that tool commands get besides the allow-listed
    /// ones (PATH, HOME, the locale, …), e.g. `CARGO_HOME` or `GOPATH`.
    #[serde(default)]
    pub tool_env: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
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
    /// Well-formed, but inconsistent as a whole (a default that names no profile).
    #[error("{}: {field}: {reason}", path.display())]
    Invalid {
        path: PathBuf,
        field: String,
        reason: String,
    },
    /// A key that could never be sent. The key itself is never quoted.
    #[error("the key for profile `{profile}` {reason}")]
    InvalidKey { profile: String, reason: String },
    #[error("{}", unknown_profile_message(name, known))]
    UnknownProfile { name: String, known: Vec<String> },
}

fn field_prefix(field: Option<&str>) -> String {
    field.map(|field| format!("{field}: ")).unwrap_or_default()
}

fn unknown_profile_message(name: &str, known: &[String]) -> String {
    format!(
        "no profile named `{name}`; known profiles: {}",
        known.join(", ")
    )
}

impl Default for Config {
    /// The built-in profiles and no default: a home without `config.json`.
    fn default() -> Config {
        Config {
            default_profile: None,
            task_profile: None,
            profiles: builtin::profiles().collect(),
            policy: Policy::default(),
            goal: GoalDefaults::default(),
            hooks: Hooks::default(),
            chrome: Chrome::default(),
            mcp_servers: BTreeMap::new(),
        }
    }
}

impl Config {
    /// Reads `config.json`. A missing or blank file is the built-ins alone, so a fresh home
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
        Self::from_text(&text, path)
    }

    fn from_text(text: &str, path: &Path) -> Result<Config, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let file = parse_file(text).map_err(|error| error.into_config_error(path))?;
        let mut config = Config::default();
        config.profiles.extend(file.profiles);
        config.default_profile = file.default_profile;
        config.task_profile = file.task_profile;
        config.policy = file.policy;
        config.goal = file.goal;
        config.hooks = file.hooks;
        config.chrome = file.chrome;
        config.mcp_servers = file.mcp_servers;
        config.validate(path)?;
        Ok(config)
    }

    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        let invalid = |field: String, reason: String| ConfigError::Invalid {
            path: path.to_owned(),
            field,
            reason,
        };
        if let Some((field, reason)) = self.goal.problem() {
            return Err(invalid(field.to_owned(), reason));
        }
        if let Some((field, reason)) = self.hooks.problem() {
            return Err(invalid(field, reason));
        }
        if let Some((field, reason)) = self
            .mcp_servers
            .iter()
            .find_map(|(name, server)| server.problem(name))
        {
            return Err(invalid(field, reason));
        }
        for (field, name) in [
            ("default_profile", &self.default_profile),
            ("task_profile", &self.task_profile),
        ] {
            if let Some(name) = name
                && !self.profiles.contains_key(name)
            {
                return Err(ConfigError::Invalid {
                    path: path.to_owned(),
                    field: field.to_owned(),
                    reason: unknown_profile_message(name, &self.known_names()),
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
                known: self.known_names(),
            })
    }

    fn known_names(&self) -> Vec<String> {
        self.profile_names().map(str::to_owned).collect()
    }

    /// The profile a new session gets when it names none: the explicit `default_profile`, else
    /// the only profile the user defined, else the first built-in whose key is available (in the
    /// order of SPEC §10). A keyless local server is never chosen unasked: it may not be running.
    pub fn default_profile_name(&self) -> Option<&str> {
        self.default_profile_name_with(&|variable| std::env::var(variable).ok())
    }

    pub(super) fn default_profile_name_with(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<&str> {
        if let Some(name) = &self.default_profile {
            return Some(name);
        }
        let mut own = self
            .profile_names()
            .filter(|name| builtin::profile(name).is_none());
        if let (Some(only), None) = (own.next(), own.next()) {
            return Some(only);
        }
        builtin::NAMES.into_iter().find(|name| {
            self.profiles.get(*name).is_some_and(|profile| {
                matches!(profile.resolve_key(env), ResolvedKey::Found { .. })
            })
        })
    }

    /// Profile names in sorted order, built-ins included.
    pub fn profile_names(&self) -> impl Iterator<Item = &str> {
        self.profiles.keys().map(String::as_str)
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The cap and budgets a goal loop gets unless `goal on` says otherwise.
    pub fn goal_defaults(&self) -> &GoalDefaults {
        &self.goal
    }

    /// The commands run on session events.
    pub fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    pub fn chrome(&self) -> &Chrome {
        &self.chrome
    }

    /// The profile `task`'s sub-agents run on, when config.json names one (`task_profile`).
    pub fn task_profile(&self) -> Option<&str> {
        self.task_profile.as_deref()
    }

    /// The MCP servers whose tools new sessions get, by name.
    pub fn mcp_servers(&self) -> &BTreeMap<String, McpServer> {
        &self.mcp_servers
    }

    /// Every API key value in force, from config.json or the environment, and the MCP servers'
    /// header values, so tools can redact them from what they show.
    pub fn secret_values(&self) -> Vec<String> {
        let mut values: Vec<String> = self
            .profiles
            .values()
            .flat_map(|profile| {
                let from_env = profile
                    .api_key_env
                    .as_deref()
                    .and_then(|variable| std::env::var(variable).ok());
                profile.api_key.clone().into_iter().chain(from_env)
            })
            // An MCP server's headers carry its credentials (`Authorization: Bearer …`).
            .chain(
                self.mcp_servers
                    .values()
                    .flat_map(|server| server.headers.values().cloned()),
            )
            .filter(|value| !value.is_empty())
            .collect();
        values.sort();
        values.dedup();
        values
    }

    /// What a user with no usable profile must do, naming each built-in's variable.
    pub fn first_run_message(&self, config_path: &Path) -> String {
        let mut message = String::from(
            "no provider profile is ready: give one a key, either with `cwcode-cli config \
             set-key PROFILE` or by exporting its variable where cwcoded starts:",
        );
        for name in builtin::NAMES {
            let Some(variable) = self
                .profiles
                .get(name)
                .and_then(|profile| profile.api_key_env.as_deref())
            else {
                continue;
            };
            message.push_str(&format!("\n  {name}: {variable}"));
            if let Some(note) = builtin::setup_note(name) {
                message.push_str(&format!(" ({note})"));
            }
        }
        message.push_str(&format!(
            "\nFor a local server, set \"default_profile\": \"local-vllm\" in {}.",
            config_path.display()
        ));
        message
    }
}

/// The file as written. Profiles come out resolved: a built-in's name merges onto the built-in.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    default_profile: Option<String>,
    #[serde(default)]
    task_profile: Option<String>,
    #[serde(default, deserialize_with = "deserialize_profiles")]
    profiles: BTreeMap<String, Profile>,
    #[serde(default)]
    policy: Policy,
    #[serde(default)]
    goal: GoalDefaults,
    #[serde(default)]
    hooks: Hooks,
    #[serde(default)]
    chrome: Chrome,
    #[serde(default)]
    mcp_servers: BTreeMap<String, McpServer>,
}

/// A profile as the file writes it: every field optional, because an override of a built-in
/// names only what it changes.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFields {
    base_url: Option<String>,
    model: Option<String>,
    api_key: Option<String>,
    #[serde(default, deserialize_with = "deserialize_variable_name")]
    api_key_env: Option<String>,
    kind: Option<ProviderKind>,
    #[serde(default, deserialize_with = "deserialize_headers")]
    headers: Option<Headers>,
    context_window: Option<u64>,
    max_output_tokens: Option<u64>,
    reasoning_history: Option<ReasoningHistory>,
    edit_tools: Option<EditTools>,
    pricing: Option<Pricing>,
    #[serde(default, deserialize_with = "deserialize_request_extra")]
    request_extra: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "deserialize_idle_timeout")]
    idle_timeout_secs: Option<u64>,
    #[serde(default, deserialize_with = "deserialize_request_timeout")]
    request_timeout_secs: Option<u64>,
    #[serde(default, deserialize_with = "deserialize_max_attempts")]
    max_attempts: Option<u64>,
    embeddings_model: Option<String>,
    recover_text_tool_calls: Option<bool>,
}

impl ProfileFields {
    /// The user's fields win; headers and request_extra merge key by key.
    fn over(self, mut profile: Profile) -> Profile {
        let ProfileFields {
            base_url,
            model,
            api_key,
            api_key_env,
            kind,
            headers,
            context_window,
            max_output_tokens,
            reasoning_history,
            edit_tools,
            pricing,
            request_extra,
            idle_timeout_secs,
            request_timeout_secs,
            max_attempts,
            embeddings_model,
            recover_text_tool_calls,
        } = self;
        replace(&mut profile.base_url, base_url);
        replace(&mut profile.model, model);
        profile.api_key = api_key.or(profile.api_key);
        profile.api_key_env = api_key_env.or(profile.api_key_env);
        replace(&mut profile.kind, kind);
        profile.headers.extend(headers.unwrap_or_default());
        profile.context_window = context_window.or(profile.context_window);
        profile.max_output_tokens = max_output_tokens.or(profile.max_output_tokens);
        replace(&mut profile.reasoning_history, reasoning_history);
        replace(&mut profile.edit_tools, edit_tools);
        replace(
            &mut profile.recover_text_tool_calls,
            recover_text_tool_calls,
        );
        profile.pricing = pricing.or(profile.pricing);
        profile.embeddings_model = embeddings_model
            .filter(|model| !model.trim().is_empty())
            .or(profile.embeddings_model);
        profile
            .request_extra
            .extend(request_extra.unwrap_or_default());
        let limits = &mut profile.limits;
        replace(
            &mut limits.idle_timeout,
            idle_timeout_secs.map(Duration::from_secs),
        );
        replace(
            &mut limits.request_timeout,
            request_timeout_secs.map(Duration::from_secs),
        );
        // Bounded to 1..=10 when read, so this always fits.
        replace(
            &mut limits.max_attempts,
            max_attempts.and_then(|attempts| u32::try_from(attempts).ok()),
        );
        profile
    }

    /// A profile of the user's own must say where to go; the model may be left out only where
    /// the endpoint supplies it.
    fn into_profile(self) -> Result<Profile, &'static str> {
        let base_url = self.base_url.clone().ok_or("base_url")?;
        let model_optional = matches!(self.kind, Some(ProviderKind::Vllm | ProviderKind::Azure));
        let model = match &self.model {
            Some(model) => model.clone(),
            None if model_optional => String::new(),
            None => return Err("model"),
        };
        Ok(self.over(Profile::new(&base_url, &model)))
    }
}

fn replace<T>(field: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *field = value;
    }
}

fn deserialize_profiles<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, Profile>, D::Error> {
    deserializer.deserialize_map(ProfilesVisitor)
}

struct ProfilesVisitor;

impl<'de> Visitor<'de> for ProfilesVisitor {
    type Value = BTreeMap<String, Profile>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an object of profiles by name")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut profiles = BTreeMap::new();
        while let Some(name) = map.next_key::<String>()? {
            let profile = map.next_value_seed(ProfileSeed { name: &name })?;
            if profiles.insert(name.clone(), profile).is_some() {
                return Err(de::Error::custom(format!(
                    "profile `{name}` is defined twice"
                )));
            }
        }
        Ok(profiles)
    }
}

/// Deserialises one profile knowing its name, so that errors inside it carry its path and
/// position.
struct ProfileSeed<'a> {
    name: &'a str,
}

impl<'de> DeserializeSeed<'de> for ProfileSeed<'_> {
    type Value = Profile;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Profile, D::Error> {
        let fields = ProfileFields::deserialize(deserializer)?;
        match builtin::profile(self.name) {
            Some(builtin) => Ok(fields.over(builtin)),
            None => fields.into_profile().map_err(de::Error::missing_field),
        }
    }
}

/// A key pasted where its variable's name belongs would be echoed by every "set the variable
/// …" message and log line, so only a conventional name (POSIX: upper case, digits, `_`) is
/// taken, and the refusal does not quote the value.
fn deserialize_variable_name<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    let name = Option::<String>::deserialize(deserializer)?;
    let conventional = |name: &str| {
        name.starts_with(|first: char| first.is_ascii_uppercase() || first == '_')
            && name
                .bytes()
                .all(|byte| byte.is_ascii_uppercase() || byte.is_ascii_digit() || byte == b'_')
    };
    match name {
        Some(name) if !conventional(&name) => Err(de::Error::custom(
            "not an environment variable name (upper-case letters, digits and _); a key itself \
             goes in \"api_key\"",
        )),
        name => Ok(name),
    }
}

/// cwcode identifies itself honestly to every provider (SPEC §10), so no profile may send
/// another product's User-Agent.
fn deserialize_headers<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Headers>, D::Error> {
    let headers = Option::<Headers>::deserialize(deserializer)?;
    if let Some(name) = headers
        .iter()
        .flatten()
        .map(|(name, _)| name)
        .find(|name| name.eq_ignore_ascii_case("user-agent"))
    {
        return Err(de::Error::custom(format!(
            "`{name}` may not be set: cwcode always identifies itself as {}",
            super::USER_AGENT
        )));
    }
    Ok(headers)
}

fn deserialize_idle_timeout<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    deserialize_bounded(deserializer, CallLimits::IDLE_TIMEOUT_SECS, "seconds")
}

fn deserialize_request_timeout<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    deserialize_bounded(deserializer, CallLimits::REQUEST_TIMEOUT_SECS, "seconds")
}

fn deserialize_max_attempts<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    deserialize_bounded(deserializer, CallLimits::MAX_ATTEMPTS, "attempts")
}

/// A whole number within `range`: a zero timeout would fail every call, a huge one would let a
/// dead provider hold a turn for days.
fn deserialize_bounded<'de, D: Deserializer<'de>>(
    deserializer: D,
    range: RangeInclusive<u64>,
    unit: &str,
) -> Result<Option<u64>, D::Error> {
    let value = Option::<u64>::deserialize(deserializer)?;
    match value {
        Some(value) if !range.contains(&value) => Err(de::Error::custom(format!(
            "{value} is out of range: give {} to {} {unit}",
            range.start(),
            range.end()
        ))),
        value => Ok(value),
    }
}

fn deserialize_request_extra<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Map<String, Value>>, D::Error> {
    let extra = Option::<Map<String, Value>>::deserialize(deserializer)?;
    if let Some(field) = RESERVED_BODY_FIELDS.iter().find(|field| {
        extra
            .as_ref()
            .is_some_and(|extra| extra.contains_key(**field))
    }) {
        return Err(de::Error::custom(format!(
            "`{field}` may not be set: cwcode writes it itself"
        )));
    }
    Ok(extra)
}

fn parse_file(text: &str) -> Result<ConfigFile, ParseFailure> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let file = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let field = error.path().to_string();
        ParseFailure {
            field: (field != ".").then_some(field),
            error: error.into_inner(),
        }
    })?;
    deserializer
        .end()
        .map_err(|error| ParseFailure { field: None, error })?;
    Ok(file)
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

/// Stores `key` as the `api_key` of `profile` in `config.json`, creating the file or the
/// profile's entry as needed (an entry holding only the key is a valid override of a built-in).
/// The rest of the file keeps its content; JSON has no comments to lose, though keys come out
/// sorted and indented. The file is replaced atomically and is readable by its owner only.
pub(super) fn write_api_key(path: &Path, profile: &str, key: &str) -> Result<(), ConfigError> {
    let key = key.trim();
    check_key(profile, key)?;
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    // A file that does not load is the user's work in progress: refuse rather than overwrite.
    Config::from_text(&text, path)?.profile(profile)?;
    let mut root = if text.trim().is_empty() {
        Map::new()
    } else {
        serde_json::from_str(&text)
            .map_err(|error| ParseFailure { field: None, error }.into_config_error(path))?
    };
    let profiles = root
        .entry("profiles")
        .or_insert_with(|| Value::Object(Map::new()));
    let entry = profiles
        .as_object_mut()
        .map(|profiles| {
            profiles
                .entry(profile)
                .or_insert_with(|| Value::Object(Map::new()))
        })
        .and_then(Value::as_object_mut)
        .ok_or_else(|| ConfigError::Invalid {
            path: path.to_owned(),
            field: format!("profiles.{profile}"),
            reason: "not an object".to_owned(),
        })?;
    entry.insert("api_key".to_owned(), Value::String(key.to_owned()));
    let mut new_text = serde_json::to_string_pretty(&root)
        .unwrap_or_else(|error| unreachable!("a JSON value always serialises: {error}"));
    new_text.push('\n');
    Config::from_text(&new_text, path)?;
    // A reader (the watcher, a crash) sees the old file or the new one, never half of one.
    crate::store::atomic_write(path, new_text.as_bytes(), crate::store::Durability::Synced).map_err(
        |error| ConfigError::Write {
            path: error.path,
            source: error.source,
        },
    )
}

/// Keys are sent in a header, so they must be visible ASCII; the reason never quotes the key.
fn check_key(profile: &str, key: &str) -> Result<(), ConfigError> {
    let reason = if key.is_empty() {
        "is empty"
    } else if !key.bytes().all(|byte| byte.is_ascii_graphic()) {
        "holds spaces or characters a header cannot carry"
    } else {
        return Ok(());
    };
    Err(ConfigError::InvalidKey {
        profile: profile.to_owned(),
        reason: reason.to_owned(),
    })
}

/// Keys must never reach a log line, so the key and the header values (which may carry one) are
/// left out.
/// Builds a profile from its `config.json` JSON, as the file would, for other modules' tests.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(super) fn profile_from_json(name: &str, json: Value) -> Profile {
    let text = serde_json::json!({ "profiles": { name: json } }).to_string();
    Config::from_text(&text, Path::new("config.json"))
        .unwrap()
        .profiles
        .remove(name)
        .unwrap()
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;

//! `config.json` (SPEC §10): the named provider profiles and which one a new session gets. The
//! built-in profiles are always there; a profile in the file with a built-in's name changes only
//! the fields it sets.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::retry::CallLimits;
use super::{Headers, builtin};

/// Body fields the client writes itself; a profile's `request_extra` may not replace them, because
/// the history, the tools and streaming are what the agent loop depends on.
pub(super) const RESERVED_BODY_FIELDS: [&str; 4] = ["model", "messages", "tools", "stream"];

/// The configuration in force: every built-in profile, merged with what `config.json` says.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    default_profile: Option<String>,
    profiles: BTreeMap<String, Profile>,
    policy: Policy,
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

/// One endpoint and model, with what the client must know about it.
#[derive(Clone, PartialEq)]
pub struct Profile {
    pub base_url: String,
    /// Empty for a `vllm` profile that serves whatever the server lists first, and for an Azure
    /// deployment URL, which names the model itself.
    pub model: String,
    pub api_key: Option<String>,
    /// The environment variable holding the key, read when the client is built.
    pub api_key_env: Option<String>,
    pub kind: ProviderKind,
    pub headers: Headers,
    pub context_window: Option<u64>,
    pub max_output_tokens: Option<u64>,
    pub reasoning_history: ReasoningHistory,
    pub edit_tools: EditTools,
    pub pricing: Option<Pricing>,
    /// Merged into every request body, after the client's own fields and before the messages.
    pub request_extra: Map<String, Value>,
    pub limits: CallLimits,
}

/// Which endpoint family the profile talks to, for the quirks that set it apart from the common
/// OpenAI-compatible shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// `Authorization: Bearer KEY`, nothing special.
    #[default]
    Openai,
    /// Thinking mode with tools refuses a history without its reasoning.
    Deepseek,
    /// Azure OpenAI: the key goes in an `api-key` header, `max_completion_tokens` replaces
    /// `max_tokens`, and legacy deployment URLs carry an `api-version`.
    Azure,
    /// Kimi For Coding: a 403 may mean "agent not recognised" or "quota spent", not a bad key.
    Kimi,
    /// A local vLLM: no key, and an empty model means the first one the server lists.
    Vllm,
}

/// Whether earlier reasoning is sent back with the history (SPEC §6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningHistory {
    #[default]
    Strip,
    Keep,
}

/// Which file-editing tools the model is offered (SPEC §7.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EditTools {
    Hashline,
    Replace,
    #[default]
    Both,
}

/// Prices per million tokens, in whatever currency the user thinks in.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    pub input_hit: f64,
    pub input_miss: f64,
    pub output: f64,
}

impl From<&Pricing> for cwcode_protocol::PriceTable {
    fn from(pricing: &Pricing) -> Self {
        Self {
            input_hit: pricing.input_hit,
            input_miss: pricing.input_miss,
            output: pricing.output,
        }
    }
}

/// Where a profile's key comes from, for messages that must say which key was used without
/// showing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    ConfigFile,
    Env(String),
    /// The profile sends no key (a local server).
    None,
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::ConfigFile => f.write_str("the key from \"api_key\" in config.json"),
            KeySource::Env(variable) => {
                write!(f, "the key from the environment variable {variable}")
            }
            KeySource::None => f.write_str("no key (the profile names none)"),
        }
    }
}

/// The outcome of looking for a profile's key.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ResolvedKey {
    Found {
        key: String,
        source: KeySource,
    },
    /// The profile names a variable that is unset or blank.
    Missing {
        variable: String,
    },
    NotNeeded,
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
            profiles: builtin::profiles().collect(),
            policy: Policy::default(),
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
        config.policy = file.policy;
        config.validate(path)?;
        Ok(config)
    }

    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        if let Some(name) = &self.default_profile
            && !self.profiles.contains_key(name)
        {
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                field: "default_profile".to_owned(),
                reason: unknown_profile_message(name, &self.known_names()),
            });
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

    /// Every API key value in force, from config.json or the environment, so tools can redact
    /// them from what they show.
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

impl Profile {
    /// A profile with every optional field at its default.
    pub(super) fn new(base_url: &str, model: &str) -> Profile {
        Profile {
            base_url: base_url.to_owned(),
            model: model.to_owned(),
            api_key: None,
            api_key_env: None,
            kind: ProviderKind::default(),
            headers: Headers::new(),
            context_window: None,
            max_output_tokens: None,
            reasoning_history: ReasoningHistory::default(),
            edit_tools: EditTools::default(),
            pricing: None,
            request_extra: Map::new(),
            limits: CallLimits::default(),
        }
    }

    /// The key itself wins over the variable that names it; a profile with neither talks to a
    /// keyless local server. Blank values count as absent.
    pub(super) fn resolve_key(&self, env: &dyn Fn(&str) -> Option<String>) -> ResolvedKey {
        if let Some(key) = self.api_key.as_deref().map(str::trim)
            && !key.is_empty()
        {
            return ResolvedKey::Found {
                key: key.to_owned(),
                source: KeySource::ConfigFile,
            };
        }
        let Some(variable) = &self.api_key_env else {
            return ResolvedKey::NotNeeded;
        };
        match env(variable) {
            Some(key) if !key.trim().is_empty() => ResolvedKey::Found {
                key: key.trim().to_owned(),
                source: KeySource::Env(variable.clone()),
            },
            _ => ResolvedKey::Missing {
                variable: variable.clone(),
            },
        }
    }

    /// Whether a key is at hand or none is needed, read from the daemon's environment.
    pub fn has_key(&self) -> bool {
        !matches!(
            self.resolve_key(&|variable| std::env::var(variable).ok()),
            ResolvedKey::Missing { .. }
        )
    }
}

/// The file as written. Profiles come out resolved: a built-in's name merges onto the built-in.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    default_profile: Option<String>,
    #[serde(default, deserialize_with = "deserialize_profiles")]
    profiles: BTreeMap<String, Profile>,
    #[serde(default)]
    policy: Policy,
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
        profile.pricing = pricing.or(profile.pricing);
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
            super::client::USER_AGENT
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
    replace_file(path, new_text.as_bytes()).map_err(|source| ConfigError::Write {
        path: path.to_owned(),
        source,
    })
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

/// A temporary file in the same directory, synced, made 0600 and renamed over the target, so a
/// reader (the watcher, a crash) sees the old file or the new one, never half of one.
fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut file = tempfile::Builder::new()
        .prefix(".config.json.")
        .tempfile_in(dir)?;
    restrict_to_owner(file.as_file())?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|error| error.error)?;
    // The rename is durable only once the directory is.
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(unix)]
fn restrict_to_owner(file: &std::fs::File) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
}

#[cfg(not(unix))]
fn restrict_to_owner(_file: &std::fs::File) -> io::Result<()> {
    Ok(())
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
            .field("limits", &self.limits)
            .finish()
    }
}

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
mod tests {

    use super::*;

    fn load_text(text: &str) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, text).unwrap();
        Config::load(&path)
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_missing_file_is_the_built_ins_alone() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::load(&dir.path().join("config.json")).unwrap();
        assert_eq!(config, Config::default());
        assert_eq!(config.default_profile_name_with(&no_env), None);
        assert_eq!(
            config.profile_names().collect::<Vec<_>>(),
            [
                "azure-openai",
                "deepseek-v4-pro",
                "kimi-for-coding",
                "local-vllm",
                "qwen3.6-27b"
            ]
        );
    }

    #[test]
    fn a_blank_file_is_the_built_ins_alone() {
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
        assert_eq!(config.profile_names().count(), 7);
    }

    #[test]
    fn a_built_in_name_overrides_only_the_fields_given() {
        let config = load_text(
            r#"{"profiles": {"deepseek-v4-pro": {
                "api_key": "sk-own", "max_output_tokens": 4096,
                "headers": {"x-team": "blue"}, "request_extra": {"temperature": 0}
            }}}"#,
        )
        .unwrap();
        let merged = config.profile("deepseek-v4-pro").unwrap();
        let builtin = builtin::profile("deepseek-v4-pro").unwrap();
        assert_eq!(merged.api_key.as_deref(), Some("sk-own"));
        assert_eq!(merged.max_output_tokens, Some(4096));
        assert_eq!(merged.headers["x-team"], "blue");
        assert_eq!(merged.request_extra["temperature"], 0);
        assert_eq!(merged.base_url, builtin.base_url);
        assert_eq!(merged.model, builtin.model);
        assert_eq!(merged.api_key_env, builtin.api_key_env);
        assert_eq!(merged.kind, ProviderKind::Deepseek);
        assert_eq!(merged.reasoning_history, ReasoningHistory::Keep);
        assert_eq!(merged.pricing, builtin.pricing);
        assert_eq!(merged.context_window, builtin.context_window);
        // The other built-ins are untouched.
        assert_eq!(
            config.profile("kimi-for-coding").unwrap(),
            &builtin::profile("kimi-for-coding").unwrap()
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
    fn an_unknown_field_in_a_built_in_override_is_named() {
        let error = load_text("{\"profiles\": {\n\"kimi-for-coding\": {\"modle\": \"x\"}}}")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(":2:") && error.contains("profiles.kimi-for-coding"),
            "{error}"
        );
        assert!(error.contains("unknown field `modle`"), "{error}");
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
        let text = error.to_string();
        assert!(text.contains("missing field `model`"), "{text}");
        assert!(text.contains("profiles.local"), "{text}");
        let error = load_text(r#"{"profiles": {"local": {"model": "m"}}}"#).unwrap_err();
        assert!(error.to_string().contains("missing field `base_url`"));
    }

    #[test]
    fn vllm_and_azure_profiles_may_leave_the_model_to_the_endpoint() {
        let config = load_text(
            r#"{"profiles": {
              "gpu": {"base_url": "http://10.0.0.2:8000/v1", "kind": "vllm"},
              "az": {"base_url": "https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21", "kind": "azure"}
            }}"#,
        )
        .unwrap();
        assert_eq!(config.profile("gpu").unwrap().model, "");
        assert_eq!(config.profile("az").unwrap().model, "");
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
    fn timeouts_and_attempts_are_set_per_profile_within_bounds() {
        let config = load_text(
            r#"{"profiles": {"deepseek-v4-pro": {"idle_timeout_secs": 5, "max_attempts": 1},
                "mine": {"base_url": "http://x", "model": "m", "request_timeout_secs": 30}}}"#,
        )
        .unwrap();
        let deepseek = config.profile("deepseek-v4-pro").unwrap().limits;
        assert_eq!(deepseek.idle_timeout, Duration::from_secs(5));
        assert_eq!(deepseek.max_attempts, 1);
        assert_eq!(
            deepseek.request_timeout,
            CallLimits::default().request_timeout
        );
        let mine = config.profile("mine").unwrap().limits;
        assert_eq!(mine.request_timeout, Duration::from_secs(30));
        assert_eq!(mine.idle_timeout, CallLimits::default().idle_timeout);

        for (field, value) in [
            ("idle_timeout_secs", "0"),
            ("request_timeout_secs", "100000"),
            ("max_attempts", "0"),
            ("max_attempts", "11"),
        ] {
            let error = load_text(&format!(
                r#"{{"profiles": {{"deepseek-v4-pro": {{"{field}": {value}}}}}}}"#
            ))
            .unwrap_err()
            .to_string();
            assert!(
                error.contains(&format!("profiles.deepseek-v4-pro.{field}"))
                    && error.contains("out of range"),
                "{field}={value}: {error}"
            );
        }
        let error = load_text(r#"{"profiles": {"deepseek-v4-pro": {"idle_timeout_secs": 1.5}}}"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("idle_timeout_secs"), "{error}");
    }

    #[test]
    fn trailing_text_after_the_object_is_an_error() {
        let error = load_text("{} {}").unwrap_err();
        assert!(error.to_string().contains("trailing characters"), "{error}");
    }

    #[test]
    fn a_profile_defined_twice_is_an_error() {
        let error = load_text(
            "{\"profiles\": {\n\"a\": {\"base_url\": \"http://x\", \"model\": \"m\"},\n\"a\": {\"base_url\": \"http://y\", \"model\": \"m\"}}}",
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("`a` is defined twice"), "{error}");
        assert!(error.contains(":3:"), "{error}");
    }

    #[test]
    fn request_extra_may_not_replace_the_messages() {
        let error = load_text(
            "{\"profiles\": {\"p\": {\"base_url\": \"http://x\", \"model\": \"m\",\n \"request_extra\": {\"messages\": []}}}}",
        )
        .unwrap_err();
        let ConfigError::Parse { field, line, .. } = &error else {
            panic!("{error:?}");
        };
        assert_eq!(field.as_deref(), Some("profiles.p.request_extra"));
        assert_eq!(*line, 2);
        assert!(error.to_string().contains("`messages`"), "{error}");
    }

    #[test]
    fn no_profile_may_send_another_user_agent() {
        let error = load_text(
            r#"{"profiles": {"kimi-for-coding": {"headers": {"User-Agent": "claude-code/1.0"}}}}"#,
        )
        .unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("profiles.kimi-for-coding.headers") && text.contains("cwcode/"),
            "{text}"
        );
        let config = load_text(
            r#"{"profiles": {"kimi-for-coding": {"headers": {"X-Client-Note": "cwcode user"}}}}"#,
        )
        .unwrap();
        assert_eq!(
            config.profile("kimi-for-coding").unwrap().headers["X-Client-Note"],
            "cwcode user"
        );
    }

    #[test]
    fn a_key_pasted_as_a_variable_name_is_refused_without_quoting_it() {
        let error =
            load_text(r#"{"profiles": {"deepseek-v4-pro": {"api_key_env": "sk-9f8e7d6c5b4a"}}}"#)
                .unwrap_err()
                .to_string();
        assert!(
            error.contains("profiles.deepseek-v4-pro.api_key_env") && error.contains("\"api_key\""),
            "{error}"
        );
        assert!(!error.contains("sk-9f8e"), "{error}");
        assert!(
            load_text(r#"{"profiles": {"deepseek-v4-pro": {"api_key_env": "_MY_KEY_2"}}}"#).is_ok()
        );
    }

    #[test]
    fn a_default_naming_no_profile_is_an_error() {
        let error = load_text(r#"{"default_profile": "nope"}"#).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("default_profile: no profile named `nope`"),
            "{text}"
        );
        assert!(text.contains("deepseek-v4-pro"), "{text}");
    }

    #[test]
    fn an_unknown_profile_lists_the_known_ones() {
        let config = load_text(
            r#"{"profiles": {"b": {"base_url": "http://x", "model": "m"}, "a": {"base_url": "http://y", "model": "m"}}}"#,
        )
        .unwrap();
        let error = config.profile("c").unwrap_err().to_string();
        assert!(
            error.contains("`c`") && error.contains("a, azure-openai, b, deepseek-v4-pro"),
            "{error}"
        );
    }

    #[test]
    fn the_default_is_explicit_else_the_only_own_profile_else_a_built_in_with_a_key() {
        let one =
            load_text(r#"{"profiles": {"solo": {"base_url": "http://x", "model": "m"}}}"#).unwrap();
        assert_eq!(one.default_profile_name_with(&no_env), Some("solo"));
        let two = load_text(
            r#"{"profiles": {"a": {"base_url": "http://x", "model": "m"}, "b": {"base_url": "http://y", "model": "m"}}}"#,
        )
        .unwrap();
        assert_eq!(two.default_profile_name_with(&no_env), None);
        let kimi_env = |variable: &str| (variable == "KIMI_API_KEY").then(|| "sk-kimi".to_owned());
        assert_eq!(
            two.default_profile_name_with(&kimi_env),
            Some("kimi-for-coding")
        );
        let both = |variable: &str| {
            matches!(variable, "KIMI_API_KEY" | "DEEPSEEK_API_KEY").then(|| "k".to_owned())
        };
        assert_eq!(
            Config::default().default_profile_name_with(&both),
            Some("deepseek-v4-pro")
        );
        let stored = load_text(r#"{"profiles": {"qwen3.6-27b": {"api_key": "sk-q"}}}"#).unwrap();
        assert_eq!(
            stored.default_profile_name_with(&no_env),
            Some("qwen3.6-27b")
        );
        let explicit = load_text(r#"{"default_profile": "local-vllm"}"#).unwrap();
        assert_eq!(
            explicit.default_profile_name_with(&both),
            Some("local-vllm")
        );
    }

    #[test]
    fn the_first_run_message_names_every_variable_and_the_set_key_command() {
        let message = Config::default().first_run_message(Path::new("/home/u/.cwcode/config.json"));
        for needle in [
            "cwcode-cli config set-key PROFILE",
            "deepseek-v4-pro: DEEPSEEK_API_KEY",
            "qwen3.6-27b: DASHSCOPE_API_KEY",
            "azure-openai: AZURE_OPENAI_API_KEY (also set its base_url",
            "kimi-for-coding: KIMI_API_KEY",
            "\"default_profile\": \"local-vllm\" in /home/u/.cwcode/config.json",
        ] {
            assert!(message.contains(needle), "{needle} missing from {message}");
        }
    }

    #[test]
    fn the_key_in_the_file_wins_over_the_variable_and_blank_counts_as_absent() {
        let env = |variable: &str| (variable == "K").then(|| " sk-env \n".to_owned());
        let mut profile = Profile::new("http://x", "m");
        assert_eq!(profile.resolve_key(&env), ResolvedKey::NotNeeded);
        profile.api_key_env = Some("K".into());
        assert_eq!(
            profile.resolve_key(&env),
            ResolvedKey::Found {
                key: "sk-env".into(),
                source: KeySource::Env("K".into())
            }
        );
        profile.api_key = Some("  ".into());
        assert!(matches!(
            profile.resolve_key(&env),
            ResolvedKey::Found { .. }
        ));
        profile.api_key = Some("sk-file".into());
        assert_eq!(
            profile.resolve_key(&env),
            ResolvedKey::Found {
                key: "sk-file".into(),
                source: KeySource::ConfigFile
            }
        );
        profile.api_key = None;
        assert_eq!(
            profile.resolve_key(&no_env),
            ResolvedKey::Missing {
                variable: "K".into()
            }
        );
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

    #[test]
    fn set_key_creates_the_file_with_an_override_entry_and_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        write_api_key(&path, "deepseek-v4-pro", " sk-new \n").unwrap();
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            written,
            serde_json::json!({"profiles": {"deepseek-v4-pro": {"api_key": "sk-new"}}})
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let config = Config::load(&path).unwrap();
        assert_eq!(
            config
                .profile("deepseek-v4-pro")
                .unwrap()
                .api_key
                .as_deref(),
            Some("sk-new")
        );
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn set_key_keeps_everything_else_in_the_file() {
        let original = r#"{
          "default_profile": "mine",
          "profiles": {
            "mine": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": "sk-old",
                     "request_extra": {"temperature": 0.2}},
            "kimi-for-coding": {"headers": {"X-Team": "blue"}}
          }
        }"#;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, original).unwrap();
        write_api_key(&path, "mine", "sk-new").unwrap();
        write_api_key(&path, "kimi-for-coding", "sk-kimi").unwrap();
        let mut expected: Value = serde_json::from_str(original).unwrap();
        expected["profiles"]["mine"]["api_key"] = "sk-new".into();
        expected["profiles"]["kimi-for-coding"]["api_key"] = "sk-kimi".into();
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(written, expected);
    }

    #[test]
    fn set_key_refuses_unknown_profiles_broken_files_and_unsendable_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        assert!(matches!(
            write_api_key(&path, "nope", "sk"),
            Err(ConfigError::UnknownProfile { .. })
        ));
        assert!(!path.exists());
        let error = write_api_key(&path, "local-vllm", "sk with space").unwrap_err();
        assert!(matches!(error, ConfigError::InvalidKey { .. }));
        assert!(!error.to_string().contains("with space"), "{error}");
        assert!(matches!(
            write_api_key(&path, "local-vllm", "  "),
            Err(ConfigError::InvalidKey { .. })
        ));
        std::fs::write(&path, "{\"profiles\": {,}}").unwrap();
        assert!(matches!(
            write_api_key(&path, "local-vllm", "sk"),
            Err(ConfigError::Parse { .. })
        ));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"profiles\": {,}}"
        );
    }
}

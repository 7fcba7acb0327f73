//! A provider profile as data (SPEC §10): one endpoint and model with what the client must know
//! about it. The built-ins (`builtin`) are values of it; `config` reads `config.json` into them.

use std::fmt;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::Headers;
use super::retry::CallLimits;

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
    /// The model of the endpoint's `/embeddings`, for memory's vectors; none: words only.
    pub embeddings_model: Option<String>,
    /// Reads `<tool_call>{…}</tool_call>` blocks that a server without a tool-call parser left
    /// in the content as the calls they are (see `text_tool_calls`).
    pub recover_text_tool_calls: bool,
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

/// Prices per million tokens, in `currency` (USD unless the profile says otherwise).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    pub input_hit: f64,
    pub input_miss: f64,
    pub output: f64,
    #[serde(default = "cwcode_protocol::default_currency")]
    pub currency: String,
}

impl From<&Pricing> for cwcode_protocol::PriceTable {
    fn from(pricing: &Pricing) -> Self {
        Self {
            input_hit: pricing.input_hit,
            input_miss: pricing.input_miss,
            output: pricing.output,
            currency: pricing.currency.clone(),
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
            embeddings_model: None,
            recover_text_tool_calls: false,
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
            .field("embeddings_model", &self.embeddings_model)
            .field("recover_text_tool_calls", &self.recover_text_tool_calls)
            .finish()
    }
}

//! Where a provider departs from the common OpenAI-compatible shape on the request side or in
//! its error answers. One quirk, one function, one test with the provider's real bytes (the
//! stream's quirks live in `sse.rs`, built the same way).

use reqwest::Url;
use reqwest::header::{self, HeaderName};
use serde_json::Value;

use super::profile::{ProviderKind, ReasoningHistory};

/// The `api-version` a legacy Azure deployment URL gets when it names none: the newest GA
/// version of that API, which every deployment still answers.
const AZURE_LEGACY_API_VERSION: &str = "2024-10-21";

/// DeepSeek's thinking mode answers 400 to a history whose assistant tool-call messages lack
/// their `reasoning_content` (an empty one included), so with tools on offer a DeepSeek profile
/// replays reasoning whatever it is configured to do.
pub(super) fn deepseek_keeps_reasoning_with_tools(
    kind: ProviderKind,
    configured: ReasoningHistory,
    tools_offered: bool,
) -> ReasoningHistory {
    if kind == ProviderKind::Deepseek && tools_offered {
        ReasoningHistory::Keep
    } else {
        configured
    }
}

/// The 400 that DeepSeek (and servers built like it) give a history without its reasoning:
/// "The `reasoning_content` in the thinking mode must be passed back to the API."
pub(super) fn reasoning_must_be_kept(status: u16, body: &str) -> bool {
    status == 400 && body.contains("reasoning_content") && body.contains("must be passed back")
}

/// Azure wants its key in `api-key`; everyone else takes a bearer token.
pub(super) fn auth_header(kind: ProviderKind, key: &str) -> (HeaderName, String) {
    match kind {
        ProviderKind::Azure => (HeaderName::from_static("api-key"), key.to_owned()),
        _ => (header::AUTHORIZATION, format!("Bearer {key}")),
    }
}

/// Azure deprecated `max_tokens` and refuses it for its reasoning models; it takes
/// `max_completion_tokens`.
pub(super) fn uses_max_completion_tokens(kind: ProviderKind) -> bool {
    kind == ProviderKind::Azure
}

/// A legacy Azure URL, `https://{resource}.openai.azure.com/openai/deployments/{deployment}`
/// (with or without `/chat/completions`), names the deployment, which stands for the model.
pub(super) fn azure_deployment(url: &Url) -> Option<String> {
    let mut segments = url.path_segments()?.filter(|segment| !segment.is_empty());
    match (segments.next(), segments.next(), segments.next()) {
        (Some("openai"), Some("deployments"), Some(deployment)) => Some(deployment.to_owned()),
        _ => None,
    }
}

/// The legacy Azure API refuses a request without `api-version`; the v1 API needs none.
pub(super) fn with_azure_api_version(mut url: Url) -> Url {
    if !url.query_pairs().any(|(name, _)| name == "api-version") {
        url.query_pairs_mut()
            .append_pair("api-version", AZURE_LEGACY_API_VERSION);
    }
    url
}

/// A built-in base URL still holding a `{placeholder}` the user has to fill in (Azure's
/// `{resource}`).
pub(super) fn unfilled_placeholder(base_url: &str) -> Option<&str> {
    let start = base_url.find('{')?;
    let end = start + base_url[start..].find('}')?;
    Some(&base_url[start..=end])
}

/// Kimi For Coding answers 403 `access_terminated_error` both to clients it does not recognise
/// as coding agents and to plans whose quota is spent; neither is a bad key. Returns what the
/// user can do, or `None` for any other 403.
pub(super) fn kimi_refusal_advice(status: u16, body: &str) -> Option<String> {
    if status != 403 || !body.contains("access_terminated_error") {
        return None;
    }
    let lower = body.to_ascii_lowercase();
    if lower.contains("usage limit") || lower.contains("quota") {
        return Some(
            "The plan's quota is used up: wait for it to renew, or switch to another profile"
                .to_owned(),
        );
    }
    Some(format!(
        "Kimi For Coding admits only the coding agents it recognises, and cwcode identifies \
         itself honestly as {} rather than as another product. Ask Kimi to recognise it; if \
         Kimi documents a header for other agents, add it to this profile's \"headers\" in \
         config.json; or use another profile",
        super::USER_AGENT
    ))
}

/// A model a server lists on `/models`, with the context length vLLM reports beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ServedModel {
    pub id: String,
    pub max_model_len: Option<u64>,
}

/// vLLM serves one base model (LoRA adapters follow it in the list): the first entry of
/// `/v1/models` is the model to ask for, and its `max_model_len` is the context window.
pub(super) fn first_served_model(body: &[u8]) -> Option<ServedModel> {
    let list: Value = serde_json::from_slice(body).ok()?;
    let first = list.get("data")?.as_array()?.first()?;
    let id = first.get("id")?.as_str().filter(|id| !id.is_empty())?;
    Some(ServedModel {
        id: id.to_owned(),
        max_model_len: first.get("max_model_len").and_then(Value::as_u64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DeepSeek's answer, byte for byte, as relayed in public bug reports.
    const DEEPSEEK_REASONING_400: &str = "{\"error\":{\"message\":\"The `reasoning_content` in the thinking mode must be passed back to the API.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"invalid_request_error\"}}";

    #[test]
    fn deepseek_keeps_reasoning_whenever_tools_are_offered() {
        use ProviderKind::*;
        use ReasoningHistory::*;
        assert_eq!(
            deepseek_keeps_reasoning_with_tools(Deepseek, Strip, true),
            Keep
        );
        assert_eq!(
            deepseek_keeps_reasoning_with_tools(Deepseek, Strip, false),
            Strip
        );
        assert_eq!(
            deepseek_keeps_reasoning_with_tools(Openai, Strip, true),
            Strip
        );
        assert_eq!(
            deepseek_keeps_reasoning_with_tools(Openai, Keep, false),
            Keep
        );
    }

    #[test]
    fn the_deepseek_reasoning_400_is_recognised() {
        assert!(reasoning_must_be_kept(400, DEEPSEEK_REASONING_400));
        assert!(!reasoning_must_be_kept(500, DEEPSEEK_REASONING_400));
        let other_400 = "{\"error\":{\"message\":\"Invalid model\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"invalid_request_error\"}}";
        assert!(!reasoning_must_be_kept(400, other_400));
    }

    #[test]
    fn azure_sends_api_key_and_others_a_bearer_token() {
        let (name, value) = auth_header(ProviderKind::Azure, "k");
        assert_eq!((name.as_str(), value.as_str()), ("api-key", "k"));
        for kind in [
            ProviderKind::Openai,
            ProviderKind::Deepseek,
            ProviderKind::Kimi,
            ProviderKind::Vllm,
        ] {
            let (name, value) = auth_header(kind, "k");
            assert_eq!(
                (name.as_str(), value.as_str()),
                ("authorization", "Bearer k")
            );
        }
        assert!(uses_max_completion_tokens(ProviderKind::Azure));
        assert!(!uses_max_completion_tokens(ProviderKind::Deepseek));
    }

    #[test]
    fn a_legacy_azure_url_names_its_deployment_and_gets_an_api_version() {
        let url = |text: &str| Url::parse(text).unwrap();
        assert_eq!(
            azure_deployment(&url(
                "https://r.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
            ))
            .as_deref(),
            Some("gpt-4o")
        );
        assert_eq!(
            azure_deployment(&url("https://r.openai.azure.com/openai/deployments/d")).as_deref(),
            Some("d")
        );
        assert_eq!(
            azure_deployment(&url("https://r.openai.azure.com/openai/v1")),
            None
        );
        assert_eq!(
            with_azure_api_version(url("https://r.openai.azure.com/openai/deployments/d")).as_str(),
            "https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21"
        );
        assert_eq!(
            with_azure_api_version(url(
                "https://r.openai.azure.com/openai/deployments/d?api-version=2025-04-01-preview"
            ))
            .query(),
            Some("api-version=2025-04-01-preview")
        );
    }

    #[test]
    fn a_placeholder_left_in_the_base_url_is_found() {
        assert_eq!(
            unfilled_placeholder("https://{resource}.openai.azure.com/openai/v1"),
            Some("{resource}")
        );
        assert_eq!(
            unfilled_placeholder("https://mine.openai.azure.com/openai/v1"),
            None
        );
    }

    #[test]
    fn kimi_403s_are_told_apart_from_bad_keys() {
        let unrecognised = "{\"error\":{\"message\":\"Kimi For Coding is currently only available for Coding Agents such as Kimi CLI, Claude Code, Roo Code, Kilo Code, etc.\",\"type\":\"access_terminated_error\"}}";
        let advice = kimi_refusal_advice(403, unrecognised).unwrap();
        assert!(
            advice.contains("identifies itself honestly as cwcode/") && advice.contains("headers"),
            "{advice}"
        );
        let quota = "{\"error\":{\"message\":\"You've reached your usage limit for this billing cycle\",\"type\":\"access_terminated_error\"}}";
        assert!(kimi_refusal_advice(403, quota).unwrap().contains("quota"));
        let bad_key = "{\"error\":{\"message\":\"Invalid Authentication\",\"type\":\"invalid_authentication_error\"}}";
        assert_eq!(kimi_refusal_advice(401, bad_key), None);
        assert_eq!(kimi_refusal_advice(403, bad_key), None);
    }

    #[test]
    fn vllm_serves_the_first_listed_model_with_its_window() {
        let body = br#"{"object":"list","data":[{"id":"Qwen/Qwen3.6-27B","object":"model","created":1764460800,"owned_by":"vllm","root":"Qwen/Qwen3.6-27B","parent":null,"max_model_len":262144,"permission":[{"id":"modelperm-3f0c","object":"model_permission","created":1764460800,"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}]},{"id":"my-lora","object":"model","created":1764460800,"owned_by":"vllm","root":"/adapters/my-lora","parent":"Qwen/Qwen3.6-27B","max_model_len":null,"permission":[]}]}"#;
        assert_eq!(
            first_served_model(body),
            Some(ServedModel {
                id: "Qwen/Qwen3.6-27B".into(),
                max_model_len: Some(262_144)
            })
        );
        // llama.cpp lists models without a window.
        let llama = br#"{"object":"list","data":[{"id":"model.gguf","object":"model","created":1,"owned_by":"llamacpp","meta":{"n_ctx_train":32768}}]}"#;
        assert_eq!(
            first_served_model(llama),
            Some(ServedModel {
                id: "model.gguf".into(),
                max_model_len: None
            })
        );
        assert_eq!(first_served_model(br#"{"object":"list","data":[]}"#), None);
        assert_eq!(first_served_model(b"<html>"), None);
    }
}

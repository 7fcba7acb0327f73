//! The built-in profiles of SPEC §10. Each one is what its provider documents; `config.json`
//! overrides any field by the profile's name. A price that a provider does not publish per token
//! (a subscription, a deployment priced by contract) is left for the user to set.

use super::profile::{Pricing, Profile, ProviderKind, ReasoningHistory};

/// In the order a default is picked when the user named none.
pub(super) const NAMES: [&str; 5] = [
    "deepseek-v4-pro",
    "qwen3.6-27b",
    "azure-openai",
    "kimi-for-coding",
    "local-vllm",
];

pub(super) fn profile(name: &str) -> Option<Profile> {
    match name {
        "deepseek-v4-pro" => Some(deepseek_v4_pro()),
        "qwen3.6-27b" => Some(qwen3_6_27b()),
        "azure-openai" => Some(azure_openai()),
        "kimi-for-coding" => Some(kimi_for_coding()),
        "local-vllm" => Some(local_vllm()),
        _ => None,
    }
}

pub(super) fn profiles() -> impl Iterator<Item = (String, Profile)> {
    NAMES
        .into_iter()
        .filter_map(|name| Some((name.to_owned(), profile(name)?)))
}

/// What a key alone does not settle, for the first-run message.
pub(super) fn setup_note(name: &str) -> Option<&'static str> {
    (name == "azure-openai")
        .then_some("also set its base_url and model (your deployment's name) in config.json")
}

/// api-docs.deepseek.com/quick_start/pricing (2026): 1M context, thinking mode by default, and
/// per 1M tokens $0.003625 cache hit, $0.435 cache miss, $0.87 output for deepseek-v4-pro.
/// Thinking mode with tools answers 400 unless earlier reasoning is sent back, so it is kept.
fn deepseek_v4_pro() -> Profile {
    Profile {
        api_key_env: Some("DEEPSEEK_API_KEY".to_owned()),
        kind: ProviderKind::Deepseek,
        context_window: Some(1_000_000),
        reasoning_history: ReasoningHistory::Keep,
        pricing: Some(Pricing {
            input_hit: 0.003_625,
            input_miss: 0.435,
            output: 0.87,
            currency: "USD".to_owned(),
        }),
        ..Profile::new("https://api.deepseek.com", "deepseek-v4-pro")
    }
}

/// DashScope's OpenAI-compatible mode (international endpoint); Qwen3.6 serves a 256K context.
/// DashScope prices vary by region and tier, so pricing is the user's to set.
fn qwen3_6_27b() -> Profile {
    Profile {
        api_key_env: Some("DASHSCOPE_API_KEY".to_owned()),
        context_window: Some(262_144),
        ..Profile::new(
            "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
            "qwen3.6-27b",
        )
    }
}

/// Azure's v1 API. The resource and the deployment are the user's, so the base URL keeps its
/// placeholder and the model (the deployment's name) is empty until config.json sets them; the
/// client says so rather than sending a request that cannot succeed. Window and prices depend on
/// the deployment.
fn azure_openai() -> Profile {
    Profile {
        api_key_env: Some("AZURE_OPENAI_API_KEY".to_owned()),
        kind: ProviderKind::Azure,
        ..Profile::new("https://{resource}.openai.azure.com/openai/v1", "")
    }
}

/// Kimi For Coding: a 256K context; reasoning counts against max_tokens, so the output budget is
/// set rather than left to the server's small default. Its thinking model expects its reasoning
/// back across tool calls. Billed by subscription: no per-token prices.
fn kimi_for_coding() -> Profile {
    Profile {
        api_key_env: Some("KIMI_API_KEY".to_owned()),
        kind: ProviderKind::Kimi,
        context_window: Some(262_144),
        max_output_tokens: Some(32_768),
        reasoning_history: ReasoningHistory::Keep,
        ..Profile::new("https://api.kimi.com/coding/v1", "kimi-for-coding")
    }
}

/// `vllm serve` on its default port: no key, the model and its window read from `/v1/models`.
/// Local inference bills nothing. A server started without `--tool-call-parser` leaves a Qwen or
/// Hermes model's calls in the text, so they are read from there.
fn local_vllm() -> Profile {
    Profile {
        kind: ProviderKind::Vllm,
        recover_text_tool_calls: true,
        pricing: Some(Pricing {
            input_hit: 0.0,
            input_miss: 0.0,
            output: 0.0,
            currency: "USD".to_owned(),
        }),
        ..Profile::new("http://127.0.0.1:8000/v1", "")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_has_a_profile_and_only_those() {
        assert_eq!(profiles().count(), NAMES.len());
        assert!(profile("deepseek").is_none());
    }

    #[test]
    fn every_remote_profile_names_its_key_variable_and_the_local_one_none() {
        for (name, profile) in profiles() {
            let remote = !profile.base_url.starts_with("http://127.0.0.1");
            assert_eq!(profile.api_key_env.is_some(), remote, "{name}");
            assert!(profile.api_key.is_none(), "{name}");
        }
    }

    #[test]
    fn only_the_local_server_reads_tool_calls_from_the_text() {
        for (name, profile) in profiles() {
            assert_eq!(
                profile.recover_text_tool_calls,
                name == "local-vllm",
                "{name}"
            );
        }
    }
}

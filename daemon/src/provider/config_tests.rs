//! `config.json` as users write it: loading, merging with the built-ins, and the errors.

use super::*;
use crate::provider::KeySource;

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
    assert_eq!(
        full.pricing.as_ref().map(|pricing| pricing.output),
        Some(0.42)
    );
    assert_eq!(
        full.pricing
            .as_ref()
            .map(|pricing| pricing.currency.as_str()),
        Some("USD"),
        "USD unless the profile says otherwise"
    );
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
fn a_task_profile_is_read_and_must_name_a_profile() {
    let config = load_text(r#"{"task_profile": "deepseek-v4-pro"}"#).unwrap();
    assert_eq!(config.task_profile(), Some("deepseek-v4-pro"));
    assert_eq!(load_text("{}").unwrap().task_profile(), None);
    let error = load_text(r#"{"task_profile": "nope"}"#)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("task_profile: no profile named `nope`"),
        "{error}"
    );
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
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
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
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
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

#[test]
fn web_chrome_endpoint_is_a_string_or_a_port_and_nothing_else() {
    let endpoint = |json: &str| {
        load_text(&format!(r#"{{"chrome": {{"endpoint": {json}}}}}"#))
            .map(|config| config.chrome().endpoint.as_deref().map(str::to_owned))
    };
    assert_eq!(
        endpoint(r#"" ~/.config/google-chrome ""#)
            .unwrap()
            .as_deref(),
        Some("~/.config/google-chrome")
    );
    assert_eq!(endpoint("9222").unwrap().as_deref(), Some("9222"));
    assert_eq!(endpoint(r#""""#).unwrap(), None);
    assert_eq!(load_text("{}").unwrap().chrome().endpoint, None);
    let error = endpoint("true").unwrap_err().to_string();
    assert!(error.contains("chrome.endpoint"), "{error}");
    assert!(error.contains("expected a ws:// URL, a port"), "{error}");
}

#[test]
fn mcp_servers_are_read_and_a_bad_one_is_named() {
    let config = load_text(
        r#"{"mcp_servers": {"everything": {"command": "node", "args": ["server.js"]},
            "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer x"}}}}"#,
    )
    .unwrap();
    let names: Vec<&String> = config.mcp_servers().keys().collect();
    assert_eq!(names, ["everything", "remote"]);
    assert!(config.secret_values().contains(&"Bearer x".to_owned()));
    let error = load_text(r#"{"mcp_servers": {"bad": {"command": "x", "url": "http://h"}}}"#)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("mcp_servers.bad") && error.contains("not both"),
        "{error}"
    );
}

#[test]
fn reading_tool_calls_from_the_text_is_set_per_profile() {
    let config = load_text(
        r#"{"profiles": {
            "local-vllm": {"recover_text_tool_calls": false},
            "mine": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "recover_text_tool_calls": true}
        }}"#,
    )
    .unwrap();
    assert!(
        !config
            .profile("local-vllm")
            .unwrap()
            .recover_text_tool_calls
    );
    assert!(config.profile("mine").unwrap().recover_text_tool_calls);
    assert!(
        !config
            .profile("deepseek-v4-pro")
            .unwrap()
            .recover_text_tool_calls
    );
}

#[test]
fn a_price_table_may_name_its_currency() {
    let config = load_text(
        r#"{"profiles": {"deepseek-v4-pro": {"pricing":
            {"input_hit": 0.2, "input_miss": 2, "output": 3, "currency": "CNY"}}}}"#,
    )
    .unwrap();
    let pricing = config.profile("deepseek-v4-pro").unwrap().pricing.as_ref();
    assert_eq!(
        pricing.map(|pricing| pricing.currency.as_str()),
        Some("CNY")
    );
}

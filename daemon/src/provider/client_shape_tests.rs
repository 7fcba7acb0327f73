//! What each built-in profile sends, against what its provider documents, and the request body's
//! bytes.

use super::*;

// The built-in profiles, against what each provider documents.

fn no_env(_: &str) -> Option<String> {
    None
}

fn every_key(variable: &str) -> Option<String> {
    Some(format!("key-of-{variable}"))
}

#[allow(clippy::unwrap_used)]
fn built_in(name: &str, overrides: Value) -> Provider {
    let profile = profile_from_json(name, overrides);
    Provider::with_env(name, &profile, &every_key)
        .unwrap()
        .with_retry_policy(FAST_RETRIES)
}

/// Sends the sample history with tools through a built-in profile pointed at the fake
/// server, and returns what arrived.
#[allow(clippy::unwrap_used)]
async fn sent_by(name: &str, overrides: Value) -> (Recorded, Provider) {
    let (base_url, state) = fake_server(StatusCode::OK, vec![Step::Send(WHOLE_ANSWER)]).await;
    let mut overrides = overrides;
    overrides["base_url"] = json!(base_url);
    let provider = built_in(name, overrides);
    let history = sample_history();
    let tools = sample_tools();
    let request = ChatRequest {
        messages: &history,
        tools: &tools,
    };
    provider
        .stream(request, &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    let mut posts = state.posts();
    assert_eq!(posts.len(), 1);
    (posts.remove(0), provider)
}

#[allow(clippy::unwrap_used)]
fn assert_common_shape(request: &Recorded, model: &str) {
    let body = request.json();
    assert_eq!(request.target, "/v1/chat/completions");
    assert_eq!(
        request.header("user-agent").unwrap(),
        concat!("cwcode/", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(body["model"], model);
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "ls");
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "s"})
    );
    // Tool calls go back with "" rather than null content.
    assert_eq!(body["messages"][2]["content"], "");
    assert_eq!(body["messages"][2]["tool_calls"][0]["id"], "c1");
    assert_eq!(
        body["messages"][3],
        json!({"role": "tool", "tool_call_id": "c1", "content": "out"})
    );
}

#[test]
#[allow(clippy::unwrap_used)]
fn built_in_endpoints_are_the_documented_ones() {
    for (name, endpoint) in [
        (
            "deepseek-v4-pro",
            "https://api.deepseek.com/chat/completions",
        ),
        (
            "qwen3.6-27b",
            "https://dashscope-intl.aliyuncs.com/compatible-mode/v1/chat/completions",
        ),
        (
            "kimi-for-coding",
            "https://api.kimi.com/coding/v1/chat/completions",
        ),
        ("local-vllm", "http://127.0.0.1:8000/v1/chat/completions"),
    ] {
        let provider = built_in(name, json!({}));
        assert_eq!(provider.endpoint.as_str(), endpoint, "{name}");
    }
    let azure = built_in(
        "azure-openai",
        json!({"base_url": "https://my-res.openai.azure.com/openai/v1", "model": "gpt-4o-prod"}),
    );
    assert_eq!(
        azure.endpoint.as_str(),
        "https://my-res.openai.azure.com/openai/v1/chat/completions"
    );
    assert_eq!(azure.model(), "gpt-4o-prod");
    let legacy = built_in(
        "azure-openai",
        json!({"base_url": "https://my-res.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"}),
    );
    assert_eq!(
        legacy.endpoint.as_str(),
        "https://my-res.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(legacy.model(), "gpt-4o");
    let unversioned = built_in(
        "azure-openai",
        json!({"base_url": "https://my-res.openai.azure.com/openai/deployments/gpt-4o"}),
    );
    assert_eq!(
        unversioned.endpoint.as_str(),
        "https://my-res.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
    );
}

#[test]
#[allow(clippy::unwrap_used)]
fn built_ins_take_their_keys_from_their_variables() {
    for (name, variable) in [
        ("deepseek-v4-pro", "DEEPSEEK_API_KEY"),
        ("qwen3.6-27b", "DASHSCOPE_API_KEY"),
        ("kimi-for-coding", "KIMI_API_KEY"),
    ] {
        let provider = built_in(name, json!({}));
        assert_eq!(
            provider.key_source,
            KeySource::Env(variable.into()),
            "{name}"
        );
        assert_eq!(
            provider.api_key.as_deref(),
            Some(format!("key-of-{variable}").as_str())
        );
        let profile = profile_from_json(name, json!({}));
        let error = Provider::with_env(name, &profile, &no_env).unwrap_err();
        assert!(error.to_string().contains(variable), "{error}");
    }
    let local = Provider::with_env(
        "local-vllm",
        &profile_from_json("local-vllm", json!({})),
        &no_env,
    )
    .unwrap();
    assert_eq!(local.key_source, KeySource::None);
}

#[test]
#[allow(clippy::unwrap_used)]
fn azure_without_its_resource_or_deployment_says_what_to_set() {
    let profile = profile_from_json("azure-openai", json!({}));
    let error = Provider::with_env("azure-openai", &profile, &every_key)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("{resource}") && error.contains("profiles.azure-openai.base_url"),
        "{error}"
    );
    let profile = profile_from_json(
        "azure-openai",
        json!({"base_url": "https://my-res.openai.azure.com/openai/v1"}),
    );
    let error = Provider::with_env("azure-openai", &profile, &every_key)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("profiles.azure-openai.model") && error.contains("deployment"),
        "{error}"
    );
}

/// api-docs.deepseek.com: Bearer auth, model `deepseek-v4-pro`, reasoning_content passed
/// back on assistant messages in thinking mode with tools, empty ones included.
#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn deepseek_request_shape() {
    let (request, _) = sent_by("deepseek-v4-pro", json!({})).await;
    assert_common_shape(&request, "deepseek-v4-pro");
    assert_eq!(
        request.header("authorization").unwrap(),
        "Bearer key-of-DEEPSEEK_API_KEY"
    );
    let body = request.json();
    assert_eq!(body["messages"][2]["reasoning_content"], "r");
    assert_eq!(body["messages"][4]["reasoning_content"], "");
    assert!(body.get("max_tokens").is_none());

    // Told to strip, it still keeps reasoning while tools are on offer.
    let stripping = built_in("deepseek-v4-pro", json!({"reasoning_history": "strip"}));
    let history = sample_history();
    let tools = sample_tools();
    let with_tools = String::from_utf8(stripping.request_body(ChatRequest {
        messages: &history,
        tools: &tools,
    }))
    .unwrap();
    assert!(
        with_tools.contains(r#""reasoning_content":"""#),
        "{with_tools}"
    );
    let without_tools = String::from_utf8(stripping.request_body(ChatRequest {
        messages: &history,
        tools: &[],
    }))
    .unwrap();
    assert!(
        !without_tools.contains("reasoning_content"),
        "{without_tools}"
    );
}

/// DashScope's compatible mode: Bearer auth, `stream_options.include_usage` for usage in
/// the stream; reasoning is not sent back.
#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn qwen_request_shape() {
    let (request, _) = sent_by("qwen3.6-27b", json!({})).await;
    assert_common_shape(&request, "qwen3.6-27b");
    assert_eq!(
        request.header("authorization").unwrap(),
        "Bearer key-of-DASHSCOPE_API_KEY"
    );
    let body = request.json();
    assert!(
        !body["messages"][2]
            .as_object()
            .unwrap()
            .contains_key("reasoning_content")
    );
}

/// Azure's v1 API: the key in `api-key` and no Authorization, the deployment as model,
/// `max_completion_tokens` rather than `max_tokens`.
#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn azure_request_shape() {
    let (base_url, state) = fake_server(StatusCode::OK, vec![Step::Send(WHOLE_ANSWER)]).await;
    let azure_base = base_url.replace("/v1/", "/openai/v1");
    let provider = built_in(
        "azure-openai",
        json!({"base_url": azure_base, "model": "gpt-4o-prod", "max_output_tokens": 2048}),
    );
    let history = sample_history();
    let tools = sample_tools();
    let request = ChatRequest {
        messages: &history,
        tools: &tools,
    };
    provider
        .stream(request, &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    let posts = state.posts();
    let request = &posts[0];
    assert_eq!(request.target, "/openai/v1/chat/completions");
    assert_eq!(
        request.header("api-key").unwrap(),
        "key-of-AZURE_OPENAI_API_KEY"
    );
    assert_eq!(request.header("authorization"), None);
    let body = request.json();
    assert_eq!(body["model"], "gpt-4o-prod");
    assert_eq!(body["max_completion_tokens"], 2048);
    assert!(body.get("max_tokens").is_none());
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

/// A legacy deployment URL: the deployment in the path, `api-version` in the query.
#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn azure_legacy_request_shape() {
    let (base_url, state) = fake_server(StatusCode::OK, vec![Step::Send(WHOLE_ANSWER)]).await;
    let legacy = base_url.replace("/v1/", "/openai/deployments/gpt-4o");
    let provider = built_in("azure-openai", json!({"base_url": legacy}));
    complete(&provider, &CancellationToken::new())
        .await
        .0
        .unwrap();
    let posts = state.posts();
    assert_eq!(
        posts[0].target,
        "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(posts[0].json()["model"], "gpt-4o");
}

/// Kimi For Coding: Bearer auth, cwcode's own User-Agent beside the user's headers, an
/// output budget set, reasoning kept.
#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn kimi_request_shape() {
    let (request, _) = sent_by(
        "kimi-for-coding",
        json!({"headers": {"X-Client-Note": "team"}}),
    )
    .await;
    assert_common_shape(&request, "kimi-for-coding");
    assert_eq!(
        request.header("authorization").unwrap(),
        "Bearer key-of-KIMI_API_KEY"
    );
    assert_eq!(request.header("x-client-note").unwrap(), "team");
    let body = request.json();
    assert_eq!(body["max_tokens"], 32_768);
    assert_eq!(body["messages"][2]["reasoning_content"], "r");
}

/// A local vLLM: no key, and the model is the first of `/v1/models`, asked for once, on
/// first use.
#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn vllm_request_shape_with_the_served_model() {
    let (base_url, state) = fake_server(StatusCode::OK, vec![Step::Send(WHOLE_ANSWER)]).await;
    let provider = built_in("local-vllm", json!({"base_url": base_url}));
    assert_eq!(provider.model(), "");
    assert_eq!(provider.context_window(), None);
    assert_eq!(state.count(Method::GET), 0, "nothing is asked before use");
    complete(&provider, &CancellationToken::new())
        .await
        .0
        .unwrap();
    complete(&provider.clone(), &CancellationToken::new())
        .await
        .0
        .unwrap();
    assert_eq!(
        state.count(Method::GET),
        1,
        "the model list is fetched once"
    );
    let posts = state.posts();
    assert_eq!(posts.len(), 2);
    assert_eq!(posts[0].header("authorization"), None);
    assert_eq!(posts[0].json()["model"], "Qwen/Qwen3.6-27B");
    assert_eq!(provider.model(), "Qwen/Qwen3.6-27B");
    assert_eq!(provider.context_window(), Some(262_144));
    let requests = state.requests.lock().unwrap();
    assert_eq!(requests[0].target, "/v1/models");
}

#[test]
fn a_profile_context_window_wins_over_the_servers() {
    let provider = built_in("local-vllm", json!({"context_window": 4096}));
    assert_eq!(provider.context_window(), Some(4096));
    assert_eq!(
        built_in("deepseek-v4-pro", json!({})).context_window(),
        Some(1_000_000)
    );
}

// The request body.

#[allow(clippy::unwrap_used)]
fn body_text(provider: &Provider, messages: &[Message], tools: &[FunctionSpec]) -> String {
    String::from_utf8(provider.request_body(ChatRequest { messages, tools })).unwrap()
}

#[test]
fn the_request_body_has_the_wire_shape_with_messages_last() {
    let provider = provider(json!({"max_output_tokens": 100}));
    assert_eq!(
        body_text(&provider, &sample_history(), &sample_tools()),
        concat!(
            r#"{"model":"test-model","#,
            r#""tools":[{"type":"function","function":{"name":"ls","description":"List","parameters":{"properties":{},"type":"object"}}}],"#,
            r#""stream":true,"stream_options":{"include_usage":true},"max_tokens":100,"#,
            r#""messages":[{"role":"system","content":"s"},{"role":"user","content":"u"},"#,
            r#"{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},"#,
            r#"{"role":"tool","tool_call_id":"c1","content":"out"},"#,
            r#"{"role":"assistant","content":"done"}]}"#,
        )
    );
}

#[test]
fn kept_reasoning_is_replayed_even_when_empty() {
    let provider = provider(json!({"reasoning_history": "keep"}));
    let body = body_text(&provider, &sample_history(), &[]);
    assert!(!body.contains("\"tools\""), "{body}");
    assert!(
        body.contains(r#"{"role":"assistant","content":"","reasoning_content":"r","tool_calls":"#),
        "{body}"
    );
    assert!(
        body.contains(r#"{"role":"assistant","content":"done","reasoning_content":""}"#),
        "{body}"
    );
    assert_eq!(
        body,
        body_text(
            &self::provider(json!({})).keeping_reasoning(),
            &sample_history(),
            &[]
        )
    );
}

#[test]
fn request_extra_is_merged_before_the_messages_and_may_replace_defaults() {
    let provider = provider(json!({
        "max_output_tokens": 100,
        "request_extra": {"temperature": 0.2, "stream_options": null, "max_tokens": 5}
    }));
    let body = body_text(&provider, &conversation(), &[]);
    assert!(
        body.starts_with(r#"{"model":"test-model","stream":true,"#),
        "{body}"
    );
    assert!(body.contains(r#""temperature":0.2"#), "{body}");
    assert!(body.contains(r#""stream_options":null"#), "{body}");
    assert!(
        body.contains(r#""max_tokens":5,"#) && !body.contains("100"),
        "{body}"
    );
    assert_eq!(body.matches("stream_options").count(), 1);
    assert!(body.find("temperature") < body.find("\"messages\""));
}

#[test]
fn the_same_request_gives_the_same_bytes() {
    let provider = provider(json!({"request_extra": {"top_p": 0.9, "seed": 1}}));
    let history = sample_history();
    let tools = sample_tools();
    assert_eq!(
        body_text(&provider, &history, &tools),
        body_text(&provider, &history.clone(), &tools.clone())
    );
}

fn any_message() -> impl Strategy<Value = Message> {
    let text = ".{0,12}";
    let call = (text, text, text).prop_map(|(id, name, arguments)| ToolCall {
        id,
        name,
        arguments,
    });
    prop_oneof![
        text.prop_map(|content| Message::System { content }),
        text.prop_map(|content| Message::User { content }),
        (
            text,
            proptest::option::of(text),
            proptest::collection::vec(call, 0..3)
        )
            .prop_map(|(content, reasoning, tool_calls)| Message::Assistant(
                AssistantMessage {
                    content,
                    reasoning,
                    tool_calls
                }
            )),
        (text, text).prop_map(|(tool_call_id, content)| Message::Tool {
            tool_call_id,
            content
        }),
    ]
}

/// SPEC §6: the only bytes that differ between consecutive requests are the new messages.
#[test]
fn a_longer_history_extends_the_previous_body() {
    for (kind, reasoning) in [
        ("openai", "strip"),
        ("openai", "keep"),
        ("deepseek", "strip"),
        ("azure", "keep"),
    ] {
        let provider = provider(json!({
            "kind": kind, "reasoning_history": reasoning, "max_output_tokens": 64,
            "request_extra": {"temperature": 0}
        }));
        let tools = sample_tools();
        proptest!(|(
            history in proptest::collection::vec(any_message(), 1..8),
            previous_len in 1usize..8,
        )| {
            let previous_len = previous_len.min(history.len());
            let previous = provider.request_body(ChatRequest {
                messages: &history[..previous_len],
                tools: &tools,
            });
            let next = provider.request_body(ChatRequest { messages: &history, tools: &tools });
            let previous_without_close = previous.strip_suffix(b"]}");
            prop_assert!(previous_without_close.is_some());
            prop_assert!(previous_without_close.is_some_and(|prefix| next.starts_with(prefix)));
            let shared = crate::provider::shared_prefix_len(&previous, &next);
            if previous_len < history.len() {
                prop_assert_eq!(shared, previous.len() - 2);
            } else {
                prop_assert_eq!(shared, previous.len());
            }
        });
    }
}

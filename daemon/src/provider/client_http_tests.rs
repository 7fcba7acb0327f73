//! What a call does over HTTP: streaming, retries, timeouts, cancellation and the errors a user
//! reads.

use super::*;

#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn streams_a_whole_answer_over_http() {
    let steps = vec![
        Step::Send(": keep-alive\n\n"),
        Step::Send(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning_content\":\"Look",
        ),
        Step::Pause(Duration::from_millis(20)),
        Step::Send(
            " first.\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Listing\"}}]}\n\n",
        ),
        Step::Send(": keep-alive\n\n"),
        Step::Send("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" now.\"}}]}\n\n"),
        Step::Send(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{\\\"path\\\":\"}}]}}]}\n\n",
        ),
        Step::Send(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\".\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        ),
        Step::Send(
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":9,\"prompt_tokens_details\":{\"cached_tokens\":32}}}\n\n",
        ),
        Step::Send("data: [DONE]\n\n"),
    ];
    let (base_url, state) = fake_server(StatusCode::OK, steps).await;
    let provider = provider(json!({
        "base_url": base_url, "api_key": "sk-test", "headers": {"x-team": "blue"}
    }));
    let (result, deltas) = complete(&provider, &CancellationToken::new()).await;

    assert_eq!(
        deltas,
        [
            StreamDelta::Reasoning("Look first.".into()),
            StreamDelta::Content("Listing".into()),
            StreamDelta::Content(" now.".into()),
        ]
    );
    assert_eq!(
        result.unwrap(),
        Completion {
            message: AssistantMessage {
                content: "Listing now.".into(),
                reasoning: Some("Look first.".into()),
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "ls".into(),
                    arguments: r#"{"path":"."}"#.into()
                }],
            },
            usage: Some(Usage {
                prompt_tokens: 50,
                completion_tokens: 9,
                cached_tokens: 32
            }),
            finish_reason: Some("tool_calls".into()),
        }
    );

    let requests = state.posts();
    let [request] = requests.as_slice() else {
        panic!("expected one request, got {}", requests.len());
    };
    assert_eq!(request.target, "/v1/chat/completions");
    assert_eq!(request.header("authorization").unwrap(), "Bearer sk-test");
    assert_eq!(
        request.header("user-agent").unwrap(),
        concat!("cwcode/", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(request.header("x-team").unwrap(), "blue");
    assert_eq!(request.header("content-type").unwrap(), "application/json");
    assert_eq!(request.header("accept").unwrap(), "text/event-stream");
    let messages = conversation();
    let expected_body = provider.request_body(ChatRequest {
        messages: &messages,
        tools: &[],
    });
    assert_eq!(request.body, expected_body);
}

#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn a_keyless_profile_sends_no_authorization_and_azure_sends_api_key() {
    let (base_url, state) = fake_server(StatusCode::OK, vec![Step::Send(WHOLE_ANSWER)]).await;
    let keyless = provider(json!({"base_url": base_url}));
    let azure = provider(json!({"base_url": base_url, "kind": "azure", "api_key": "az-key"}));
    let cancel = CancellationToken::new();
    complete(&keyless, &cancel).await.0.unwrap();
    complete(&azure, &cancel).await.0.unwrap();

    let requests = state.posts();
    assert_eq!(requests[0].header("authorization"), None);
    assert_eq!(requests[0].header("api-key"), None);
    assert_eq!(requests[1].header("api-key").unwrap(), "az-key");
    assert_eq!(requests[1].header("authorization"), None);
}

// Faults.

#[tokio::test]
async fn a_non_retryable_error_status_carries_the_provider_text_without_the_key() {
    let (base_url, state) = serve(vec![Reply::status(
        404,
        "{\"error\":{\"message\":\"Model not found for key sk-test\",\"type\":\"invalid_request_error\"}}",
    )])
    .await;
    let provider = provider(json!({"base_url": base_url, "api_key": "sk-test"}));
    assert!(!format!("{provider:?}").contains("sk-test"));
    let (result, deltas) = complete(&provider, &CancellationToken::new()).await;
    assert!(deltas.is_empty());
    let Err(ProviderError::Status {
        status, body, url, ..
    }) = &result
    else {
        panic!("expected a status error, got {result:?}");
    };
    assert_eq!(*status, 404);
    assert_eq!(body, "Model not found for key [redacted]");
    assert!(url.ends_with("/v1/chat/completions"), "{url}");
    let text = result.unwrap_err().to_string();
    assert!(
        text.contains("Check the profile's base_url and model"),
        "{text}"
    );
    assert_eq!(state.count(Method::POST), 1, "a 404 is not retried");
}

#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn a_429_then_success_is_retried_honouring_retry_after() {
    let (base_url, state) = serve(vec![
        Reply::status(429, "{\"error\":{\"message\":\"Rate limit reached\"}}")
            .header("retry-after", "0"),
        Reply::status(429, "{\"error\":{\"message\":\"Rate limit reached\"}}")
            .header("retry-after-ms", "150"),
        Reply::ok(vec![Step::Send(WHOLE_ANSWER)]),
    ])
    .await;
    let provider = provider(json!({"base_url": base_url}));
    let started = Instant::now();
    let (result, events) = stream(&provider, &CancellationToken::new()).await;
    assert_eq!(result.unwrap().message.content, "Hello there.");
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "retry-after-ms was not honoured: {:?}",
        started.elapsed()
    );
    assert_eq!(state.count(Method::POST), 3);
    // Nothing had been shown, so there is nothing to restart; each retry is announced with
    // the wait the provider asked for.
    let [first, second, answer] = events.as_slice() else {
        panic!("{events:?}");
    };
    assert!(
        matches!(first, StreamEvent::Retrying { attempt: 2, delay, .. } if delay.is_zero()),
        "{first:?}"
    );
    assert!(
        matches!(second, StreamEvent::Retrying { attempt: 3, delay, reason, .. }
            if *delay == Duration::from_millis(150) && reason.contains("Rate limit reached")),
        "{second:?}"
    );
    assert_eq!(
        answer,
        &StreamEvent::Delta(StreamDelta::Content("Hello there.".into()))
    );
    let bodies: Vec<Vec<u8>> = state.posts().into_iter().map(|post| post.body).collect();
    assert!(bodies.windows(2).all(|pair| pair[0] == pair[1]));
}

#[tokio::test]
async fn a_retry_after_beyond_the_bound_is_not_waited_for() {
    let (base_url, state) = serve(vec![
        Reply::status(429, "{\"error\":{\"message\":\"Try again in an hour\"}}")
            .header("retry-after", "3600"),
    ])
    .await;
    let provider = provider(json!({"base_url": base_url}));
    let started = Instant::now();
    let (result, _) = complete(&provider, &CancellationToken::new()).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(
        matches!(&result, Err(ProviderError::GaveUp { attempts: 1, last })
            if matches!(**last, ProviderError::Status { status: 429, .. })),
        "{result:?}"
    );
    assert_eq!(state.count(Method::POST), 1);
}

#[tokio::test]
async fn persistent_5xx_gives_up_with_status_text_and_advice() {
    let (base_url, state) = serve(vec![Reply::status(
        503,
        "{\"error\":{\"message\":\"Server overloaded, please try again later.\",\"type\":\"server_error\"}}",
    )])
    .await;
    let provider = provider(json!({"base_url": base_url}));
    let (result, _) = complete(&provider, &CancellationToken::new()).await;
    assert_eq!(state.count(Method::POST), 3, "one attempt and two retries");
    let Err(error @ ProviderError::GaveUp { attempts: 3, .. }) = result else {
        panic!("{result:?}");
    };
    let text = error.to_string();
    for needle in [
        "HTTP 503",
        "Server overloaded, please try again later",
        "send again in a few minutes, or switch to another profile",
        "gave up after 3 attempts",
    ] {
        assert!(text.contains(needle), "{needle} missing from {text}");
    }
    assert!(!text.contains(".."), "{text}");
}

#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn an_unreachable_server_is_retried_then_a_connect_error() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let provider = provider(json!({"base_url": format!("http://{address}/v1")}));
    let (result, _) = complete(&provider, &CancellationToken::new()).await;
    let Err(error @ ProviderError::GaveUp { attempts: 3, .. }) = result else {
        panic!("{result:?}");
    };
    let ProviderError::GaveUp { last, .. } = &error else {
        unreachable!();
    };
    assert!(
        matches!(&**last, ProviderError::Connect { url, .. } if url.contains(&address.to_string())),
        "{last:?}"
    );
    assert!(
        error
            .to_string()
            .contains("Check the network and the profile's base_url"),
        "{error}"
    );
}

#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn a_connection_cut_mid_answer_restarts_and_the_retry_answers() {
    let (base_url, state) = serve(vec![
        Reply::ok(vec![
            Step::Send(FIRST_CHUNK),
            // Lets the server flush the headers and the first chunk before it breaks off.
            Step::Pause(Duration::from_millis(50)),
            Step::Abort,
        ]),
        Reply::ok(vec![Step::Send(WHOLE_ANSWER)]),
    ])
    .await;
    let provider = provider(json!({"base_url": base_url}));
    let (result, events) = stream(&provider, &CancellationToken::new()).await;
    let completion = result.unwrap();
    assert_eq!(
        completion.message.content, "Hello there.",
        "the partial answer is dropped"
    );
    let [first, restart, retrying, second] = events.as_slice() else {
        panic!("{events:?}");
    };
    assert!(
        matches!(retrying, StreamEvent::Retrying { attempt: 2, max_attempts: 3, reason, .. }
            if reason.contains("connection broke")),
        "{retrying:?}"
    );
    assert_eq!(
        first,
        &StreamEvent::Delta(StreamDelta::Content("Hi".into()))
    );
    assert!(
        matches!(restart, StreamEvent::Restart { retry: 1, reason } if reason.contains("connection broke")),
        "{restart:?}"
    );
    assert_eq!(
        second,
        &StreamEvent::Delta(StreamDelta::Content("Hello there.".into()))
    );
    assert_eq!(state.count(Method::POST), 2);
}

#[tokio::test]
async fn a_stream_that_ends_without_finishing_restarts_then_gives_up() {
    let (base_url, _) = fake_server(StatusCode::OK, vec![Step::Send(FIRST_CHUNK)]).await;
    let provider = provider(json!({"base_url": base_url}));
    let (result, events) = stream(&provider, &CancellationToken::new()).await;
    assert!(
        matches!(&result, Err(ProviderError::GaveUp { last, .. })
            if matches!(&**last, ProviderError::Stream(text) if text.contains("no finish_reason and no [DONE]"))),
        "{result:?}"
    );
    let restarts = events
        .iter()
        .filter(|event| matches!(event, StreamEvent::Restart { .. }))
        .count();
    assert_eq!(restarts, 2, "{events:?}");
    assert_eq!(
        events.len(),
        7,
        "three partial answers, two restarts, two retries"
    );
}

#[tokio::test]
async fn an_empty_200_body_is_an_error_naming_the_provider_and_not_retried() {
    let (base_url, state) = fake_server(StatusCode::OK, Vec::new()).await;
    let (result, _) = complete(
        &provider(json!({"base_url": base_url})),
        &CancellationToken::new(),
    )
    .await;
    assert!(
        matches!(&result, Err(ProviderError::EmptyAnswer { .. })),
        "{result:?}"
    );
    let text = result.unwrap_err().to_string();
    assert!(text.contains("profile `test`"), "{text}");
    assert!(text.contains("empty body"), "{text}");
    assert!(!text.contains("network"), "{text}");
    assert_eq!(state.count(Method::POST), 1, "not retried");
}

#[tokio::test]
async fn a_400_is_not_retried_and_names_the_profile_but_a_408_is_retried() {
    let (base_url, state) = serve(vec![Reply::status(
        400,
        "{\"error\":{\"message\":\"bad field\"}}",
    )])
    .await;
    let (result, _) = complete(
        &provider(json!({"base_url": base_url})),
        &CancellationToken::new(),
    )
    .await;
    let text = result.unwrap_err().to_string();
    assert!(text.starts_with("profile `test`:"), "{text}");
    assert!(text.contains("bad field"), "{text}");
    assert!(!text.contains("network"), "{text}");
    assert_eq!(state.count(Method::POST), 1, "a 400 is not retried");

    assert!(
        ProviderError::Status {
            profile: "p".into(),
            url: "u".into(),
            status: 408,
            body: String::new(),
        }
        .is_retryable()
    );
}

#[tokio::test]
async fn a_200_that_is_not_sse_quotes_what_came_and_is_not_retried() {
    let (base_url, state) = fake_server(
        StatusCode::OK,
        vec![Step::Send(
            "{\"object\":\"chat.completion\",\"choices\":[]}",
        )],
    )
    .await;
    let (result, _) = complete(
        &provider(json!({"base_url": base_url})),
        &CancellationToken::new(),
    )
    .await;
    assert!(
        matches!(&result, Err(ProviderError::Protocol(text)) if text.contains("chat.completion")),
        "{result:?}"
    );
    assert_eq!(state.count(Method::POST), 1);
}

#[tokio::test]
async fn cancel_mid_stream_ends_the_call_promptly() {
    let (base_url, _) =
        fake_server(StatusCode::OK, vec![Step::Send(FIRST_CHUNK), Step::Hang]).await;
    let provider = provider(json!({"base_url": base_url}));
    let messages = conversation();
    let request = ChatRequest {
        messages: &messages,
        tools: &[],
    };
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    let mut on_delta = move |_| canceller.cancel();
    let started = Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(5),
        complete_text(&provider, request, &cancel, &mut on_delta),
    )
    .await;
    assert!(
        matches!(result, Ok(Err(ProviderError::Cancelled))),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn cancel_during_a_backoff_wait_ends_the_call_promptly() {
    let (base_url, _) = serve(vec![
        Reply::status(503, "{\"error\":{\"message\":\"busy\"}}").header("retry-after", "20"),
    ])
    .await;
    let provider = provider(json!({"base_url": base_url})).with_retry_policy(RetryPolicy {
        max_retries: 1,
        first_delay: Duration::from_secs(20),
        max_delay: Duration::from_secs(30),
    });
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        canceller.cancel();
    });
    let started = Instant::now();
    let (result, _) = complete(&provider, &cancel).await;
    assert!(
        matches!(result, Err(ProviderError::Cancelled)),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn keep_alive_comments_do_not_hold_off_the_idle_timeout() {
    let mut steps = vec![Step::Send(FIRST_CHUNK)];
    for _ in 0..20 {
        steps.push(Step::Pause(Duration::from_millis(50)));
        steps.push(Step::Send(": keep-alive\n\n"));
    }
    steps.push(Step::Hang);
    let (base_url, _) = fake_server(StatusCode::OK, steps).await;
    let provider = provider(json!({"base_url": base_url}))
        .with_idle_timeout(Duration::from_millis(300))
        .with_retry_policy(RetryPolicy {
            max_retries: 0,
            ..FAST_RETRIES
        });
    let started = Instant::now();
    let (result, _) = complete(&provider, &CancellationToken::new()).await;
    assert!(
        matches!(&result, Err(ProviderError::GaveUp { last, .. }) if matches!(**last, ProviderError::IdleTimeout(_))),
        "{result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "the comments kept the stream alive for {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn every_retry_is_announced_with_its_number_wait_and_reason() {
    let busy = || Reply::status(503, "{\"error\":{\"message\":\"busy\"}}");
    let (base_url, _) = serve(vec![busy(), busy(), busy()]).await;
    let provider = provider(json!({"base_url": base_url}));
    let (result, events) = stream(&provider, &CancellationToken::new()).await;
    assert!(
        matches!(&result, Err(ProviderError::GaveUp { attempts: 3, .. })),
        "{result:?}"
    );
    let announced: Vec<(u32, u32)> = events
        .iter()
        .map(|event| match event {
            StreamEvent::Retrying {
                attempt,
                max_attempts,
                delay,
                reason,
            } => {
                assert!(reason.contains("HTTP 503: busy"), "{reason}");
                assert!(*delay <= FAST_RETRIES.max_delay, "{delay:?}");
                (*attempt, *max_attempts)
            }
            other => panic!("only retries are announced: {other:?}"),
        })
        .collect();
    assert_eq!(announced, [(2, 3), (3, 3)]);
}

#[tokio::test]
async fn a_provider_that_drips_forever_is_cut_by_the_request_timeout() {
    let mut steps = vec![Step::Send(FIRST_CHUNK)];
    for _ in 0..100 {
        steps.push(Step::Pause(Duration::from_millis(50)));
        steps.push(Step::Send(
            "data: {\"choices\":[{\"delta\":{\"content\":\".\"}}]}\n\n",
        ));
    }
    let (base_url, _) = fake_server(StatusCode::OK, steps).await;
    let provider = provider(json!({"base_url": base_url}))
        .with_idle_timeout(Duration::from_millis(300))
        .with_request_timeout(Duration::from_millis(600));
    let started = Instant::now();
    let (result, _) = complete(&provider, &CancellationToken::new()).await;
    assert!(
        matches!(&result, Err(ProviderError::RequestTimeout(_))),
        "{result:?}"
    );
    let error = result.err().unwrap().to_string();
    assert!(error.contains("request_timeout_secs"), "{error}");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn the_profile_sets_the_timeouts_and_the_attempts() {
    let provider = Provider::with_env(
        "p",
        &profile(
            json!({"base_url": "http://127.0.0.1:1/v1", "idle_timeout_secs": 7,
                        "request_timeout_secs": 90, "max_attempts": 2}),
        ),
        &|_| None,
    )
    .unwrap();
    assert_eq!(provider.idle_timeout, Duration::from_secs(7));
    assert_eq!(provider.request_timeout, Duration::from_secs(90));
    assert_eq!(provider.retry.max_retries, 1);
    let defaults = Provider::with_env(
        "p",
        &profile(json!({"base_url": "http://127.0.0.1:1/v1"})),
        &|_| None,
    )
    .unwrap();
    assert_eq!(defaults.idle_timeout, Duration::from_secs(60));
    assert_eq!(defaults.request_timeout, Duration::from_secs(600));
    assert_eq!(defaults.retry, RetryPolicy::default());
}

#[tokio::test]
async fn a_finished_answer_without_done_on_an_open_connection_is_kept() {
    let steps = vec![
        Step::Send(
            "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n",
        ),
        Step::Hang,
    ];
    let (base_url, _) = fake_server(StatusCode::OK, steps).await;
    let provider =
        provider(json!({"base_url": base_url})).with_idle_timeout(Duration::from_millis(200));
    let (result, _) = complete(&provider, &CancellationToken::new()).await;
    assert!(
        matches!(&result, Ok(completion) if completion.message.content == "x"),
        "{result:?}"
    );
}

/// DeepSeek's 401, as it sends it.
const DEEPSEEK_401: &str = "{\"error\":{\"message\":\"Authentication Fails, Your api key: ****e-42 is invalid\",\"type\":\"authentication_error\",\"param\":null,\"code\":\"invalid_request_error\"}}";

#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn a_401_names_the_profile_and_the_key_variable_but_never_the_key() {
    let (base_url, state) = serve(vec![Reply::status(401, DEEPSEEK_401)]).await;
    let profile = profile_from_json("deepseek-v4-pro", json!({"base_url": base_url}));
    let env = |variable: &str| (variable == "DEEPSEEK_API_KEY").then(|| "sk-live-e-42".to_owned());
    let provider = Provider::with_env("deepseek-v4-pro", &profile, &env)
        .unwrap()
        .with_retry_policy(FAST_RETRIES);
    let (result, _) = complete(&provider, &CancellationToken::new()).await;
    let Err(error @ ProviderError::Auth { .. }) = result else {
        panic!("{result:?}");
    };
    let text = error.to_string();
    for needle in [
        "`deepseek-v4-pro`",
        "the environment variable DEEPSEEK_API_KEY",
        "HTTP 401",
        "Authentication Fails",
        "cwcode-cli config set-key deepseek-v4-pro",
    ] {
        assert!(text.contains(needle), "{needle} missing from {text}");
    }
    assert!(!text.contains("sk-live"), "{text}");
    assert_eq!(state.count(Method::POST), 1, "a refused key is not retried");
}

#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn a_403_on_a_key_from_config_json_says_so() {
    let (base_url, _) = serve(vec![Reply::status(
        403,
        "{\"error\":{\"message\":\"Forbidden\"}}",
    )])
    .await;
    let provider = provider(json!({"base_url": base_url, "api_key": "sk-file"}));
    let (result, _) = complete(&provider, &CancellationToken::new()).await;
    let text = result.unwrap_err().to_string();
    assert!(
        text.contains("`test`") && text.contains("\"api_key\" in config.json"),
        "{text}"
    );
    assert!(!text.contains("sk-file"), "{text}");
}

#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn kimi_refusing_the_agent_is_not_blamed_on_the_key() {
    let (base_url, _) = serve(vec![Reply::status(
        403,
        "{\"error\":{\"message\":\"Kimi For Coding is currently only available for Coding Agents such as Kimi CLI, Claude Code, Roo Code, Kilo Code, etc.\",\"type\":\"access_terminated_error\"}}",
    )])
    .await;
    let profile = profile_from_json(
        "kimi-for-coding",
        json!({"base_url": base_url, "api_key": "sk-kimi"}),
    );
    let provider = Provider::new("kimi-for-coding", &profile).unwrap();
    let (result, _) = complete(&provider, &CancellationToken::new()).await;
    let Err(error @ ProviderError::AccessRefused { .. }) = result else {
        panic!("{result:?}");
    };
    let text = error.to_string();
    assert!(text.contains("only available for Coding Agents"), "{text}");
    assert!(text.contains("honestly as cwcode/"), "{text}");
    assert!(!text.contains("set-key"), "{text}");
}

/// DeepSeek's answer to a thinking-mode history without its reasoning, byte for byte.
const DEEPSEEK_REASONING_400: &str = "{\"error\":{\"message\":\"The `reasoning_content` in the thinking mode must be passed back to the API.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"invalid_request_error\"}}";

#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn the_reasoning_400_is_its_own_error_and_keeping_reasoning_resends_it() {
    let (base_url, state) = serve(vec![
        Reply::status(400, DEEPSEEK_REASONING_400),
        Reply::ok(vec![Step::Send(WHOLE_ANSWER)]),
    ])
    .await;
    let provider = provider(json!({"base_url": base_url}));
    let history = sample_history();
    let tools = sample_tools();
    let request = ChatRequest {
        messages: &history,
        tools: &tools,
    };
    let cancel = CancellationToken::new();
    let result = provider.stream(request, &cancel, &mut |_| {}).await;
    let Err(error @ ProviderError::ReasoningMustBeKept { .. }) = result else {
        panic!("{result:?}");
    };
    assert!(error.to_string().contains("must be passed back"), "{error}");
    assert_eq!(state.count(Method::POST), 1, "it is not retried as is");

    let keeping = provider.keeping_reasoning();
    keeping.stream(request, &cancel, &mut |_| {}).await.unwrap();
    let posts = state.posts();
    assert!(
        !posts[0].json()["messages"][2]
            .as_object()
            .unwrap()
            .contains_key("reasoning_content")
    );
    assert_eq!(posts[1].json()["messages"][2]["reasoning_content"], "r");
    assert_eq!(posts[1].json()["messages"][4]["reasoning_content"], "");
    assert_eq!(
        keeping.request_body(request),
        posts[1].body,
        "request_body is what is sent"
    );
}

// Configuration problems found when the client is built.

#[test]
fn a_missing_key_variable_is_named_with_set_key() {
    let profile = profile(json!({"api_key_env": "CWCODE_TEST_KEY_THAT_IS_NEVER_SET"}));
    let Err(error) = Provider::new("remote", &profile) else {
        panic!("expected a missing key");
    };
    let text = error.to_string();
    assert!(matches!(error, ProviderError::MissingKey { .. }));
    assert!(
        text.contains("`remote`")
            && text.contains("CWCODE_TEST_KEY_THAT_IS_NEVER_SET")
            && text.contains("cwcode-cli config set-key remote")
            && text.contains("config.json"),
        "{text}"
    );
}

#[test]
fn bad_urls_and_headers_are_refused() {
    for base_url in ["not a url", "ftp://example.invalid/v1"] {
        let result = Provider::new("p", &profile(json!({"base_url": base_url})));
        assert!(
            matches!(result, Err(ProviderError::InvalidUrl { .. })),
            "{base_url}"
        );
    }
    let result = Provider::new("p", &profile(json!({"headers": {"bad name": "x"}})));
    assert!(matches!(result, Err(ProviderError::InvalidHeader { .. })));
    let result = Provider::new("p", &profile(json!({"api_key": "sk-line\nbreak"})));
    let Err(error) = result else {
        panic!("a key with a line break cannot be a header");
    };
    assert!(!error.to_string().contains("sk-line"), "{error}");
}

#[test]
#[allow(clippy::unwrap_used)]
fn the_endpoint_is_base_url_plus_chat_completions() {
    for (base_url, endpoint, models) in [
        (
            "http://127.0.0.1:8000/v1",
            "http://127.0.0.1:8000/v1/chat/completions",
            "http://127.0.0.1:8000/v1/models",
        ),
        (
            "http://127.0.0.1:8000/v1/",
            "http://127.0.0.1:8000/v1/chat/completions",
            "http://127.0.0.1:8000/v1/models",
        ),
        (
            "https://api.example.invalid",
            "https://api.example.invalid/chat/completions",
            "https://api.example.invalid/models",
        ),
        (
            "https://api.example.invalid/v1/chat/completions",
            "https://api.example.invalid/v1/chat/completions",
            "https://api.example.invalid/v1/models",
        ),
        (
            "https://r.example.invalid/openai/deployments/d?api-version=2024-10-21",
            "https://r.example.invalid/openai/deployments/d/chat/completions?api-version=2024-10-21",
            "https://r.example.invalid/openai/deployments/d/models?api-version=2024-10-21",
        ),
    ] {
        let endpoints = Endpoints::new(base_url, ProviderKind::Openai).unwrap();
        assert_eq!(endpoints.chat.as_str(), endpoint);
        assert_eq!(endpoints.models.as_str(), models);
    }
}

//! Honest figures (issue 15, item 8): what a cancelled turn cost is counted, a provider that
//! reports no usage is "not reported" rather than 0, costs carry their currency, and a
//! provider's deterministic failure is neither retried nor blamed on the network.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::time::Duration;

use cwcode_protocol::{EventKind, TurnOutcome, Usage};
use cwcode_tests::fake_provider::{FakeProvider, Frame, Gate, Reply, hold_until, text};
use cwcode_tests::{Home, wait_for_event};
use serde_json::{Value, json};

fn frame(value: &Value) -> Frame {
    Frame {
        delay: Duration::ZERO,
        bytes: format!("data: {value}\n\n"),
    }
}

fn content_chunk(content: &str, usage: Option<Value>) -> Value {
    let mut chunk = json!({
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake-model",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]
    });
    if let Some(usage) = usage {
        chunk["usage"] = usage;
    }
    chunk
}

/// A home whose profile has prices in `currency`.
fn priced_home(provider: &FakeProvider, currency: &str) -> Home {
    let home = Home::new(&provider.url);
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(home.paths.config()).unwrap()).unwrap();
    config["profiles"]["fake"]["pricing"] =
        json!({"input_hit": 1.0, "input_miss": 2.0, "output": 4.0, "currency": currency});
    std::fs::write(home.paths.config(), serde_json::to_vec(&config).unwrap()).unwrap();
    home
}

fn finished_usage(home: &Home, id: &str) -> (TurnOutcome, Usage) {
    match wait_for_event(home, id, |kind| {
        matches!(kind, EventKind::TurnFinished { .. })
    })
    .kind
    {
        EventKind::TurnFinished { outcome, usage, .. } => (outcome, usage),
        _ => unreachable!(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_turn_counts_what_the_provider_billed_so_far() {
    let provider = FakeProvider::start().await;
    let home = priced_home(&provider, "CNY");
    let _daemon = home.start_daemon();
    // vLLM with continuous usage stats: every chunk carries the count so far.
    let usage = json!({"prompt_tokens": 3000, "completion_tokens": 5, "total_tokens": 3005,
                       "prompt_tokens_details": {"cached_tokens": 1000}});
    let gate = Gate::new();
    provider.reply(hold_until(
        Reply::Stream {
            frames: vec![
                frame(&content_chunk("Thinking about ", Some(usage))),
                frame(&content_chunk("never finished", None)),
            ],
            answer: String::new(),
        },
        1,
        &gate,
    ));
    let id = home.new_session("code");
    home.cli_ok(&["send", &id, "a long question"]);
    wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::AssistantDelta { .. })
    });
    home.cli_ok(&["cancel", &id]);
    let (outcome, usage) = finished_usage(&home, &id);
    gate.open();
    assert_eq!(outcome, TurnOutcome::Cancelled);
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.cached_tokens,
            usage.completion_tokens
        ),
        (3000, 1000, 5),
        "the turn's usage is what was billed, not 0"
    );
    let cost: Value = serde_json::from_str(&home.cli_ok(&["cost", &id, "--json"])).unwrap();
    assert_eq!(cost["currency"], "CNY");
    // 1000 hits at 1, 2000 misses at 2, 5 output at 4, per million.
    let total = cost["total"].as_f64().unwrap();
    assert!((total - 5020.0 / 1e6).abs() < 1e-9, "{cost}");
    let human = home.cli_ok(&["cost", &id]);
    assert!(human.contains("CNY"), "{human}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_never_reported_shows_as_not_reported_with_an_estimate() {
    let provider = FakeProvider::start().await;
    let home = priced_home(&provider, "USD");
    let _daemon = home.start_daemon();
    let finish = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    provider.reply(Reply::Stream {
        frames: vec![
            frame(&content_chunk("an answer without usage", None)),
            frame(&finish),
            Frame {
                delay: Duration::ZERO,
                bytes: "data: [DONE]\n\n".to_owned(),
            },
        ],
        answer: String::new(),
    });
    let id = home.new_session("code");
    home.cli_ok(&["send", &id, "hello", "--wait"]);
    let cache: Value = serde_json::from_str(&home.cli_ok(&["cache", &id, "--json"])).unwrap();
    assert_eq!(cache["unreportedRequests"], 1, "{cache}");
    assert_eq!(cache["turns"][0]["unreportedRequests"], 1);
    assert!(
        cache["estimated"]["promptTokens"].as_u64().unwrap() > 0,
        "{cache}"
    );
    let human = home.cli_ok(&["cache", &id]);
    assert!(human.contains("not reported"), "{human}");
    assert!(human.contains("estimate"), "{human}");
    let cost = home.cli_ok(&["cost", &id]);
    assert!(cost.contains("not reported"), "{cost}");
    assert!(cost.contains("USD"), "{cost}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_200_or_a_400_fails_once_naming_the_provider_not_the_network() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider
        .reply(Reply::Status(200, String::new()))
        .reply(Reply::Status(
            400,
            r#"{"error":{"message":"unknown field foo"}}"#.to_owned(),
        ))
        .reply(text("fine"));
    let id = home.new_session("code");
    for (turn, expected) in [(1, "empty body"), (2, "unknown field foo")] {
        home.cli(&["send", &id, "hello", "--wait"]);
        let error = match wait_for_event(
            &home,
            &id,
            |kind| matches!(kind, EventKind::TurnFinished { turn: t, .. } if *t == turn),
        )
        .kind
        {
            EventKind::TurnFinished { outcome, error, .. } => {
                assert_eq!(outcome, TurnOutcome::Failed);
                error.unwrap()
            }
            _ => unreachable!(),
        };
        assert!(error.contains("profile `fake`"), "{error}");
        assert!(error.contains(expected), "{error}");
        assert!(!error.contains("network"), "{error}");
        assert_eq!(
            provider.requests().len(),
            turn as usize,
            "not retried: {error}"
        );
    }
}

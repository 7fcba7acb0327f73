//! The sticky prefix, verified (SPEC §6): through the real daemon, against a provider with a
//! DeepSeek-style prefix cache, only new messages are ever billed at the miss price.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use cwcode_tests::economy::{Cache, Run, UNIT_TOKENS, run_session};

fn uncached(run: &Run) -> u64 {
    run.requests
        .iter()
        .map(|request| request.uncached_tokens())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_first_request_only_new_messages_miss_the_cache() {
    let run = run_session(Cache::Cold, false).await;
    assert_eq!(run.requests.len(), 50, "ten turns of five requests");
    assert!(
        run.first_request_bytes < 16 * 1024,
        "first request {} bytes",
        run.first_request_bytes
    );
    for request in &run.requests[1..] {
        assert!(
            request.uncached_tokens() <= request.new_message_tokens() + UNIT_TOKENS as u64,
            "turn {}: {} uncached tokens for {} tokens of new messages",
            request.turn,
            request.uncached_tokens(),
            request.new_message_tokens()
        );
    }
    let ratios = &run.cumulative_ratio;
    assert!(
        ratios.windows(2).all(|pair| pair[1] >= pair[0]),
        "{ratios:?}"
    );
    assert!(*ratios.last().unwrap() >= 0.95, "{ratios:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_workspace_prefix_cached_the_ratio_is_above_95_percent_from_turn_3() {
    let run = run_session(Cache::Warm, false).await;
    for (turn, ratio) in run.cumulative_ratio.iter().enumerate().skip(2) {
        assert!(
            *ratio >= 0.95,
            "turn {}: {:?}",
            turn + 1,
            run.cumulative_ratio
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timestamp_in_the_system_prompt_multiplies_the_uncached_tokens() {
    let stable = run_session(Cache::Cold, false).await;
    let unstable = run_session(Cache::Cold, true).await;
    assert!(
        uncached(&unstable) >= 3 * uncached(&stable),
        "stable {} uncached tokens, unstable {}",
        uncached(&stable),
        uncached(&unstable)
    );
}

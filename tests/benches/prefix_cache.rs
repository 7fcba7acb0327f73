//! The sticky-prefix benchmark (SPEC §6, §11): a scripted ten-turn session (five requests a
//! turn: read, grep, run, read again, answer) through the real daemon against a fake provider
//! with a DeepSeek-style prefix cache of 64-token units. Reported three ways: a cold cache, a
//! cache warmed by an earlier session in the same workspace, and, as the reference that shows
//! the measurement measures something, a session whose system prompt carries a timestamp.
//! Input cost is priced with the `deepseek-v4-pro` built-in profile's table.
//!
//! Run: `cargo bench -p cwcode-tests --bench prefix_cache`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cwcode_tests::economy::{Cache, Run, run_session};

/// `deepseek-v4-pro`'s input prices per 1M tokens (daemon/src/provider/builtin.rs).
const HIT: f64 = 0.003_625;
const MISS: f64 = 0.435;

fn input_cost(prompt: u64, cached: u64) -> f64 {
    (cached as f64 * HIT + (prompt - cached) as f64 * MISS) / 1e6
}

fn report(name: &str, run: &Run) {
    println!("\n{name}: first request {} bytes", run.first_request_bytes);
    println!("turn  prompt  cached  uncached  new-msg  cum.ratio  input $");
    for (index, (prompt, cached)) in run.per_turn.iter().enumerate() {
        let turn = index + 1;
        let new_tokens: u64 = run
            .requests
            .iter()
            .filter(|request| request.turn == turn)
            .map(|request| request.new_message_tokens())
            .sum();
        println!(
            "{turn:>4}  {prompt:>6}  {cached:>6}  {:>8}  {new_tokens:>7}  {:>8.1}%  {:.6}",
            prompt - cached,
            run.cumulative_ratio[index] * 100.0,
            input_cost(*prompt, *cached)
        );
    }
    let (prompt, cached) = run
        .per_turn
        .iter()
        .fold((0, 0), |(p, c), (tp, tc)| (p + tp, c + tc));
    let worst_excess = run.requests[1..]
        .iter()
        .map(|r| r.uncached_tokens() as i64 - r.new_message_tokens() as i64)
        .max()
        .unwrap_or(0);
    println!(
        "total {prompt} prompt tokens, {cached} cached, {} uncached; input ${:.6}; worst request: uncached − new messages = {worst_excess} tokens",
        prompt - cached,
        input_cost(prompt, cached)
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let cold = run_session(Cache::Cold, false).await;
    let warm = run_session(Cache::Warm, false).await;
    let unstable = run_session(Cache::Cold, true).await;
    report("cold cache", &cold);
    report(
        "warm cache (an earlier session in the same workspace)",
        &warm,
    );
    report(
        "reference: a timestamp in the system prompt, cold",
        &unstable,
    );
}

//! Token and cost accounting from the journal: what `/cache` and `/cost` show.

use cwcode_protocol::{
    CacheReport, CostReport, Event, EventKind, PriceTable, RequestStats, TurnCache, TurnCost,
    Usage, default_currency,
};

use crate::provider::{AssistantMessage, Message, estimate_body_tokens, estimate_tokens};

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Per-turn and cumulative prompt-cache figures of a session's journal.
pub fn cache_report(session_id: &str, events: &[Event]) -> CacheReport {
    let mut report = CacheReport {
        session_id: session_id.to_owned(),
        ..CacheReport::default()
    };
    for event in events {
        match &event.kind {
            EventKind::TurnStarted { turn, .. } => report.turns.push(TurnCache {
                turn: *turn,
                ..TurnCache::default()
            }),
            EventKind::AssistantMessage {
                content,
                reasoning,
                tool_calls,
                usage,
                stats,
            } => {
                let Some(turn) = report.turns.last_mut() else {
                    continue;
                };
                // A `task` sub-agent's tokens count in its turn (its cost is the session's), but
                // its requests have a prefix of their own: the session's prefix figures are the
                // main conversation's.
                let nested = event.parent_call_id.is_some();
                count_request(
                    turn,
                    &mut report.first_request_bytes,
                    stats.as_ref().filter(|_| !nested),
                );
                match usage {
                    Some(usage) => add_reported(turn, usage),
                    None => {
                        let answer = Message::Assistant(AssistantMessage {
                            content: content.clone(),
                            reasoning: reasoning.clone(),
                            tool_calls: tool_calls.clone(),
                        });
                        add_estimate(
                            turn,
                            &Usage {
                                prompt_tokens: stats
                                    .map_or(0, |stats| estimate_body_tokens(stats.request_bytes)),
                                completion_tokens: estimate_tokens(&answer),
                                cached_tokens: 0,
                            },
                        );
                    }
                }
            }
            EventKind::CallAbandoned {
                usage,
                estimated_usage,
                stats,
            } => {
                let Some(turn) = report.turns.last_mut() else {
                    continue;
                };
                count_request(turn, &mut report.first_request_bytes, stats.as_ref());
                match (usage, estimated_usage) {
                    (Some(usage), _) => add_reported(turn, usage),
                    (None, estimate) => add_estimate(turn, &estimate.unwrap_or_default()),
                }
            }
            _ => {}
        }
    }
    for turn in &report.turns {
        report.prompt_tokens += turn.prompt_tokens;
        report.cached_tokens += turn.cached_tokens;
        report.completion_tokens += turn.completion_tokens;
        report.unreported_requests += turn.unreported_requests;
        if let Some(estimate) = &turn.estimated {
            report
                .estimated
                .get_or_insert_with(Usage::default)
                .add(estimate);
        }
    }
    report.hit_ratio = ratio(report.cached_tokens, report.prompt_tokens);
    report
}

fn count_request(
    turn: &mut TurnCache,
    first_request_bytes: &mut u64,
    stats: Option<&RequestStats>,
) {
    let Some(stats) = stats else {
        return;
    };
    turn.requests += 1;
    turn.last_request_bytes = stats.request_bytes;
    turn.last_shared_prefix_bytes = stats.shared_prefix_bytes;
    if *first_request_bytes == 0 {
        *first_request_bytes = stats.request_bytes;
    }
}

fn add_reported(turn: &mut TurnCache, usage: &Usage) {
    turn.prompt_tokens += usage.prompt_tokens;
    turn.cached_tokens += usage.cached_tokens;
    turn.completion_tokens += usage.completion_tokens;
    turn.hit_ratio = ratio(turn.cached_tokens, turn.prompt_tokens);
}

/// A request the provider reported nothing for: counted as such, with cwcode's estimate kept
/// apart from the reported figures.
fn add_estimate(turn: &mut TurnCache, estimate: &Usage) {
    turn.unreported_requests += 1;
    turn.estimated
        .get_or_insert_with(Usage::default)
        .add(estimate);
}

/// What `usage` costs at `prices` (per million tokens): cached prompt tokens at the hit price,
/// the rest of the prompt at the miss price, completion at the output price.
pub fn price(turn: u32, usage: &Usage, prices: &PriceTable) -> TurnCost {
    let per_token = |tokens: u64, price_per_million: f64| tokens as f64 * price_per_million / 1e6;
    let input_hit = per_token(usage.cached_tokens, prices.input_hit);
    let input_miss = per_token(
        usage.prompt_tokens.saturating_sub(usage.cached_tokens),
        prices.input_miss,
    );
    let output = per_token(usage.completion_tokens, prices.output);
    TurnCost {
        turn,
        input_hit,
        input_miss,
        output,
        total: input_hit + input_miss + output,
    }
}

/// Prices a cache report with a profile's table (per million tokens).
pub fn cost_report(cache: &CacheReport, profile: &str, prices: Option<PriceTable>) -> CostReport {
    let turns: Vec<TurnCost> = match &prices {
        None => Vec::new(),
        Some(prices) => cache
            .turns
            .iter()
            .map(|turn| {
                let usage = Usage {
                    prompt_tokens: turn.prompt_tokens,
                    completion_tokens: turn.completion_tokens,
                    cached_tokens: turn.cached_tokens,
                };
                price(turn.turn, &usage, prices)
            })
            .collect(),
    };
    let estimated_total = prices
        .as_ref()
        .zip(cache.estimated.as_ref())
        .map(|(prices, estimate)| price(0, estimate, prices).total);
    CostReport {
        session_id: cache.session_id.clone(),
        profile: profile.to_owned(),
        currency: prices
            .as_ref()
            .map_or_else(default_currency, |prices| prices.currency.clone()),
        prices,
        total: turns.iter().map(|turn| turn.total).sum(),
        turns,
        unreported_requests: cache.unreported_requests,
        estimated_total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwcode_protocol::RequestStats;

    fn event(kind: EventKind) -> Event {
        Event {
            seq: 0,
            time: String::new(),
            parent_call_id: None,
            kind,
        }
    }

    fn answer(prompt: u64, cached: u64, bytes: u64, shared: u64) -> Event {
        event(EventKind::AssistantMessage {
            content: String::new(),
            reasoning: None,
            tool_calls: Vec::new(),
            usage: Some(Usage {
                prompt_tokens: prompt,
                completion_tokens: 10,
                cached_tokens: cached,
            }),
            stats: Some(RequestStats {
                request_bytes: bytes,
                shared_prefix_bytes: shared,
            }),
        })
    }

    fn start(turn: u32) -> Event {
        event(EventKind::TurnStarted {
            turn,
            prompt: String::new(),
        })
    }

    #[test]
    fn sums_per_turn_and_over_the_session() {
        let events = [
            start(1),
            answer(1000, 0, 4000, 0),
            answer(1200, 1000, 4800, 3990),
            start(2),
            answer(1500, 1200, 6000, 4790),
        ];
        let report = cache_report("s", &events);
        assert_eq!(report.turns.len(), 2);
        assert_eq!(report.turns[0].requests, 2);
        assert_eq!(report.turns[0].prompt_tokens, 2200);
        assert_eq!(report.turns[0].cached_tokens, 1000);
        assert_eq!(report.turns[1].last_shared_prefix_bytes, 4790);
        assert_eq!(report.first_request_bytes, 4000);
        assert_eq!(report.prompt_tokens, 3700);
        assert!((report.hit_ratio - 2200.0 / 3700.0).abs() < 1e-9);
    }

    #[test]
    fn a_sub_agents_tokens_count_in_its_turn_but_not_the_sessions_prefix() {
        let nested = Event {
            parent_call_id: Some("t1".to_owned()),
            ..answer(300, 0, 900, 0)
        };
        let events = [
            start(1),
            answer(1000, 0, 4000, 0),
            nested,
            answer(1200, 1000, 4800, 3990),
        ];
        let report = cache_report("s", &events);
        assert_eq!(report.turns[0].prompt_tokens, 2500);
        assert_eq!(report.turns[0].completion_tokens, 30);
        assert_eq!(report.turns[0].requests, 2);
        assert_eq!(report.turns[0].last_request_bytes, 4800);
        assert_eq!(report.turns[0].last_shared_prefix_bytes, 3990);
    }

    #[test]
    fn prices_hits_misses_and_output_separately() {
        let report = cache_report("s", &[start(1), answer(1_000_000, 900_000, 1, 0)]);
        let prices = PriceTable {
            input_hit: 0.1,
            input_miss: 1.0,
            output: 2.0,
            currency: "CNY".to_owned(),
        };
        let cost = cost_report(&report, "p", Some(prices));
        let turn = &cost.turns[0];
        assert!((turn.input_hit - 0.09).abs() < 1e-9);
        assert!((turn.input_miss - 0.1).abs() < 1e-9);
        assert!((turn.output - 0.00002).abs() < 1e-12);
        assert!((cost.total - turn.total).abs() < 1e-12);
        assert_eq!(cost.currency, "CNY");
        assert_eq!(cost.unreported_requests, 0);
        assert!(cost.estimated_total.is_none());
        assert!(cost_report(&report, "p", None).turns.is_empty());
        assert_eq!(cost_report(&report, "p", None).currency, "USD");
    }

    #[test]
    fn usage_a_provider_never_reported_is_counted_apart_as_an_estimate() {
        let unreported = event(EventKind::AssistantMessage {
            content: "four score and seven".to_owned(),
            reasoning: None,
            tool_calls: Vec::new(),
            usage: None,
            stats: Some(RequestStats {
                request_bytes: 4000,
                shared_prefix_bytes: 0,
            }),
        });
        let abandoned = event(EventKind::CallAbandoned {
            usage: Some(Usage {
                prompt_tokens: 500,
                completion_tokens: 7,
                cached_tokens: 100,
            }),
            estimated_usage: None,
            stats: Some(RequestStats {
                request_bytes: 2000,
                shared_prefix_bytes: 1000,
            }),
        });
        let report = cache_report("s", &[start(1), unreported, start(2), abandoned]);
        let first = &report.turns[0];
        assert_eq!((first.requests, first.unreported_requests), (1, 1));
        assert_eq!(
            first.prompt_tokens, 0,
            "nothing reported is not counted as reported"
        );
        let estimate = first.estimated.unwrap();
        assert_eq!(estimate.prompt_tokens, 1000);
        assert!(estimate.completion_tokens > 0);
        let second = &report.turns[1];
        assert_eq!(
            (
                second.prompt_tokens,
                second.completion_tokens,
                second.unreported_requests
            ),
            (500, 7, 0),
            "a cancelled call's billed usage counts"
        );
        assert_eq!(report.unreported_requests, 1);
        let prices = PriceTable {
            input_hit: 1.0,
            input_miss: 1.0,
            output: 1.0,
            currency: "USD".to_owned(),
        };
        let cost = cost_report(&report, "p", Some(prices));
        assert_eq!(cost.unreported_requests, 1);
        assert!(cost.estimated_total.unwrap() > 0.0);
        assert!((cost.total - 507.0 / 1e6).abs() < 1e-12);
    }
}

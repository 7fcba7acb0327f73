//! What `/cache`, `/cost`, `/goal status`, `/memory` and the rewind events say, as text for the transcript. The tables are
//! narrow enough for an 80-column terminal: counts are shortened (12.3k) rather than printed
//! whole, as `cwcode-cli` does for scripts.

use cwcode_protocol::{CacheReport, CostReport, GoalStatus, MemoryNote, MemoryScope, RecalledNote};

use crate::format::{bytes, money, percent, shorten, tokens};
use crate::wrap;

/// Turns shown in a table; a long session's first turns say little about its cache or cost now.
const TABLE_TURNS: usize = 20;

pub fn cache_table(report: &CacheReport) -> String {
    if report.turns.is_empty() {
        return "no turns yet: the prompt cache has nothing to show".to_owned();
    }
    let mut out =
        String::from("prompt cache per turn (same prefix: bytes shared with the request before)\n");
    out.push_str(&format!(
        "{:>5} {:>5} {:>7} {:>7} {:>5} {:>7} {:>10} {:>11}",
        "turn", "reqs", "prompt", "cached", "hit", "output", "last req", "same prefix"
    ));
    out.push_str(&earlier(report.turns.len()));
    for turn in report
        .turns
        .iter()
        .skip(report.turns.len().saturating_sub(TABLE_TURNS))
    {
        // Nothing reported is not 0: such a turn shows cwcode's estimate, marked with `~`.
        let unreported = turn.unreported_requests > 0 && turn.unreported_requests == turn.requests;
        let (prompt, cached, hit, output) = match (unreported, turn.estimated) {
            (true, Some(estimate)) => (
                format!("~{}", tokens(estimate.prompt_tokens)),
                "n/r".to_owned(),
                "n/r".to_owned(),
                format!("~{}", tokens(estimate.completion_tokens)),
            ),
            _ => (
                tokens(turn.prompt_tokens),
                tokens(turn.cached_tokens),
                percent(turn.cached_tokens, turn.prompt_tokens),
                tokens(turn.completion_tokens),
            ),
        };
        out.push_str(&format!(
            "\n{:>5} {:>5} {:>7} {:>7} {:>5} {:>7} {:>10} {:>11}",
            turn.turn,
            turn.requests,
            prompt,
            cached,
            hit,
            output,
            bytes(turn.last_request_bytes),
            bytes(turn.last_shared_prefix_bytes),
        ));
    }
    let requests: u32 = report.turns.iter().map(|turn| turn.requests).sum();
    out.push_str(&format!(
        "\n{:>5} {:>5} {:>7} {:>7} {:>5} {:>7}   first request {}",
        "all",
        requests,
        tokens(report.prompt_tokens),
        tokens(report.cached_tokens),
        percent(report.cached_tokens, report.prompt_tokens),
        tokens(report.completion_tokens),
        bytes(report.first_request_bytes),
    ));
    if report.unreported_requests > 0 {
        out.push_str(&format!(
            "\n{} request(s): usage not reported by the provider (n/r), not in the totals; ~ marks cwcode's own estimate",
            report.unreported_requests
        ));
    }
    out
}

pub fn cost_table(report: &CostReport) -> String {
    let Some(prices) = &report.prices else {
        return format!(
            "profile `{}` has no prices, so the cost is unknown: add \"pricing\": {{\"input_hit\": …, \
             \"input_miss\": …, \"output\": …}} (per 1M tokens) to it in config.json",
            report.profile
        );
    };
    let mut out = format!(
        "cost on profile `{}` in {}, per turn (per 1M tokens: input hit {}, input miss {}, output {})\n",
        report.profile, report.currency, prices.input_hit, prices.input_miss, prices.output
    );
    if report.turns.is_empty() {
        out.push_str("no turns yet: nothing spent");
        return out;
    }
    out.push_str(&format!(
        "{:>5} {:>10} {:>10} {:>10} {:>10}",
        "turn", "input hit", "input miss", "output", "total"
    ));
    out.push_str(&earlier(report.turns.len()));
    // With requests unreported, a turn that cost nothing is one the provider said nothing of.
    let unreported = report.unreported_requests > 0;
    let figure = |amount: f64| {
        if unreported && amount == 0.0 {
            "n/r".to_owned()
        } else {
            money(amount)
        }
    };
    for turn in report
        .turns
        .iter()
        .skip(report.turns.len().saturating_sub(TABLE_TURNS))
    {
        let nothing_reported = unreported && turn.total == 0.0;
        let column = |amount: f64| {
            if nothing_reported {
                "n/r".to_owned()
            } else {
                money(amount)
            }
        };
        out.push_str(&format!(
            "\n{:>5} {:>10} {:>10} {:>10} {:>10}",
            turn.turn,
            column(turn.input_hit),
            column(turn.input_miss),
            column(turn.output),
            column(turn.total),
        ));
    }
    out.push_str(&format!(
        "\n{:>5} {:>10} {:>10} {:>10} {:>10}",
        "all",
        "",
        "",
        "",
        figure(report.total)
    ));
    out.push_str(&format!(" {}", report.currency));
    if unreported {
        out.push_str(&format!(
            "\n{} request(s): usage not reported by the provider (n/r), not in the total",
            report.unreported_requests
        ));
        if let Some(estimate) = report.estimated_total {
            out.push_str(&format!(
                "; cwcode's own estimate for them: ~{} {}",
                money(estimate),
                report.currency
            ));
        }
    }
    out
}

/// `/goal status`: where the loop is, the goals with their boxes, what it used against its
/// budgets, and the daemon's account of it.
pub fn goal_status(status: &GoalStatus) -> String {
    let total = status.done + status.left;
    let mut out = if status.running {
        format!(
            "goal loop running · cycle {}/{} · {} of {total} done · /goal off stops it",
            status.cycle, status.cap, status.done
        )
    } else {
        format!(
            "goal loop off · {} of {total} done · /goal on starts it (at most {} cycles)",
            status.done, status.cap
        )
    };
    if status.goals.is_empty() {
        out.push_str(&format!(
            "\nno goals in {} yet: /goal TEXT adds one",
            status.goals_file
        ));
    } else {
        out.push_str(&format!("\ngoals in {}:", status.goals_file));
        for goal in &status.goals {
            let mark = if goal.done { "☑" } else { "☐" };
            out.push_str(&format!("\n  {mark} {}", wrap::sanitize(&goal.text)));
        }
    }
    out.push_str(&format!("\nused {} tokens", tokens(status.tokens_used)));
    if let Some(budget) = status.token_budget {
        out.push_str(&format!(" of {}", tokens(budget)));
    }
    if status.cost_used > 0.0 || status.cost_budget.is_some() {
        out.push_str(&format!(" · cost {}", money(status.cost_used)));
        if let Some(budget) = status.cost_budget {
            out.push_str(&format!(" of {}", money(budget)));
        }
        out.push_str(&format!(" {}", status.currency));
    }
    if !status.summary.is_empty() {
        out.push('\n');
        out.push_str(status.summary.trim_end());
    }
    out
}

/// The columns a note's line takes at most, its text shortened to fit: one row of an
/// 80-column terminal, after the transcript's margin and indent.
const NOTE_LINE: usize = 76;
/// What is left of a note's text however long its tags are.
const NOTE_TEXT_AT_LEAST: usize = 24;

/// `/memory`: the workspace's notes, newest first, a line each.
pub fn memory_list(notes: &[MemoryNote], workspace: &str) -> String {
    if notes.is_empty() {
        return format!(
            "no notes for {workspace} yet: the agent keeps them with its remember tool \
             (`cwcode-cli remember TEXT` adds one by hand)"
        );
    }
    let mut out = format!("notes of {workspace}, newest first");
    for note in notes {
        out.push('\n');
        out.push_str(&note_line(note));
    }
    out.push_str("\n/memory QUERY searches them, /memory rm ID deletes one");
    out
}

/// `/memory QUERY`: the notes that match, best first; one of another workspace says where
/// it is from.
pub fn memory_recall(query: &str, notes: &[RecalledNote]) -> String {
    let query = wrap::sanitize(query);
    if notes.is_empty() {
        return format!("no note matches `{query}`: /memory lists this workspace's notes");
    }
    let mut out = format!("notes matching `{query}`, best first");
    for recalled in notes {
        out.push('\n');
        out.push_str(&note_line(&recalled.note));
        if recalled.scope == MemoryScope::Global {
            out.push_str(&format!(
                "\n      from {}",
                wrap::sanitize(&recalled.note.workspace)
            ));
        }
    }
    out
}

/// `#12   2026-12-01 14:03  [build, ci]  the text on one line, shortened…`
fn note_line(note: &MemoryNote) -> String {
    // RFC 3339 to the minute, as `2026-12-01 14:03`.
    let time = note
        .created
        .get(..16)
        .unwrap_or(&note.created)
        .replace('T', " ");
    let mut line = format!("#{:<4} {time}  ", note.id);
    if !note.tags.is_empty() {
        line.push_str(&format!("[{}]  ", wrap::sanitize(&note.tags.join(", "))));
    }
    let text = wrap::sanitize(&note.text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let room = NOTE_LINE
        .saturating_sub(wrap::width(&line))
        .max(NOTE_TEXT_AT_LEAST);
    line.push_str(&shorten(&text, room));
    line
}

/// The row that stands for the turns a table leaves out.
fn earlier(turns: usize) -> String {
    match turns.saturating_sub(TABLE_TURNS) {
        0 => String::new(),
        hidden => format!("\n    … {hidden} earlier turns"),
    }
}

#[cfg(test)]
mod tests {
    use cwcode_protocol::{GoalItem, PriceTable, TurnCache, TurnCost};

    use super::*;

    fn note(id: i64, text: &str, tags: &[&str], created: &str) -> MemoryNote {
        MemoryNote {
            id,
            text: text.to_owned(),
            tags: tags.iter().map(|tag| (*tag).to_owned()).collect(),
            workspace: "/home/dev/shop".to_owned(),
            session_id: None,
            created: created.to_owned(),
        }
    }

    #[test]
    fn a_recalled_note_of_another_workspace_says_where_it_is_from() {
        let mut other = note(
            4,
            "prefer\tanyhow at the edges",
            &[],
            "2026-11-30T09:00:00Z",
        );
        other.workspace = "/home/dev/tools".to_owned();
        let recalled = [
            RecalledNote {
                note: note(
                    9,
                    "coupons round half up",
                    &["coupons"],
                    "2026-12-01T14:03:00Z",
                ),
                scope: MemoryScope::Workspace,
                score: 0.9,
            },
            RecalledNote {
                note: other,
                scope: MemoryScope::Global,
                score: 0.4,
            },
        ];
        assert_eq!(
            memory_recall("coupons", &recalled)
                .lines()
                .collect::<Vec<_>>(),
            [
                "notes matching `coupons`, best first",
                "#9    2026-12-01 14:03  [coupons]  coupons round half up",
                "#4    2026-11-30 09:00  prefer anyhow at the edges",
                "      from /home/dev/tools",
            ]
        );
        assert!(memory_recall("nothing", &[]).starts_with("no note matches `nothing`"));
        assert!(memory_list(&[], "/home/dev/shop").starts_with("no notes for /home/dev/shop yet"));
    }

    fn turn_cache(turn: u32, prompt: u64, cached: u64) -> TurnCache {
        TurnCache {
            unreported_requests: 0,
            estimated: None,
            turn,
            requests: 2,
            prompt_tokens: prompt,
            cached_tokens: cached,
            completion_tokens: 140,
            hit_ratio: cached as f64 / prompt as f64,
            last_request_bytes: 21_040,
            last_shared_prefix_bytes: 20_900,
        }
    }

    #[test]
    fn the_cache_table_has_a_row_per_turn_and_the_totals() {
        let report = CacheReport {
            unreported_requests: 0,
            estimated: None,
            session_id: "s".to_owned(),
            turns: vec![turn_cache(1, 5_200, 0), turn_cache(2, 5_400, 5_120)],
            prompt_tokens: 10_600,
            cached_tokens: 5_120,
            completion_tokens: 280,
            hit_ratio: 0.48,
            first_request_bytes: 20_112,
        };
        let table = cache_table(&report);
        let rows: Vec<&str> = table.lines().skip(1).collect();
        assert_eq!(
            rows,
            [
                " turn  reqs  prompt  cached   hit  output   last req same prefix",
                "    1     2    5.2k       0    0%     140    21.0 KB     20.9 KB",
                "    2     2    5.4k    5.1k   95%     140    21.0 KB     20.9 KB",
                "  all     4   10.6k    5.1k   48%     280   first request 20.1 KB",
            ]
        );
        assert!(cache_table(&CacheReport::default()).starts_with("no turns yet"));
    }

    #[test]
    fn a_long_session_shows_its_last_turns() {
        let report = CacheReport {
            unreported_requests: 0,
            estimated: None,
            turns: (1..=25).map(|turn| turn_cache(turn, 1_000, 900)).collect(),
            ..CacheReport::default()
        };
        let table = cache_table(&report);
        assert!(table.contains("\n    … 5 earlier turns\n    6 "), "{table}");
        assert!(!table.contains("\n    5 "), "{table}");
    }

    #[test]
    fn the_cost_table_or_how_to_set_prices() {
        let mut report = CostReport {
            currency: "USD".to_owned(),
            unreported_requests: 0,
            estimated_total: None,
            session_id: "s".to_owned(),
            profile: "deepseek".to_owned(),
            prices: Some(PriceTable {
                currency: "USD".to_owned(),
                input_hit: 0.07,
                input_miss: 0.27,
                output: 1.1,
            }),
            turns: vec![TurnCost {
                turn: 1,
                input_hit: 0.000_287,
                input_miss: 0.000_298,
                output: 0.000_154,
                total: 0.000_739,
            }],
            total: 0.000_739,
        };
        let table = cost_table(&report);
        let rows: Vec<&str> = table.lines().collect();
        assert_eq!(
            rows,
            [
                "cost on profile `deepseek` in USD, per turn (per 1M tokens: input hit 0.07, input miss 0.27, output 1.1)",
                " turn  input hit input miss     output      total",
                "    1     0.0003     0.0003     0.0002     0.0007",
                "  all                                      0.0007 USD",
            ]
        );
        // A provider that reported nothing: no figure, and not a 0 either.
        let unreported = CostReport {
            currency: "CNY".to_owned(),
            unreported_requests: 2,
            estimated_total: Some(0.0042),
            turns: vec![TurnCost {
                turn: 1,
                ..TurnCost::default()
            }],
            total: 0.0,
            ..report.clone()
        };
        assert_eq!(
            cost_table(&unreported).lines().skip(2).collect::<Vec<_>>(),
            [
                "    1        n/r        n/r        n/r        n/r",
                "  all                                         n/r CNY",
                "2 request(s): usage not reported by the provider (n/r), not in the total; \
                 cwcode's own estimate for them: ~0.0042 CNY",
            ]
        );
        report.prices = None;
        let advice = cost_table(&report);
        assert!(
            advice.contains("profile `deepseek` has no prices"),
            "{advice}"
        );
        assert!(advice.contains("\"pricing\"") && advice.contains("config.json"));
    }

    #[test]
    fn the_goal_status_lists_the_boxes_and_what_the_loop_used() {
        let goal = |text: &str, done| GoalItem {
            text: text.to_owned(),
            done,
            verify: None,
        };
        let mut status = GoalStatus {
            running: true,
            cycle: 3,
            cap: 20,
            goals_file: "/home/dev/shop/goals.md".to_owned(),
            goals: vec![goal("parse the coupons", true), goal("test them", false)],
            done: 1,
            left: 1,
            tokens_used: 48_200,
            cost_used: 0.0123,
            token_budget: Some(100_000),
            cost_budget: None,
            state: cwcode_protocol::GoalState::Running,
            tokens_left: Some(51_800),
            cost_left: None,
            currency: "CNY".to_owned(),
            hours_budget: None,
            seconds_used: 0,
            seconds_left: None,
            stop_reason: None,
            summary: "Goal loop running: cycle 3 of 20. Left:\n- test them\nUsed 48200 tokens."
                .to_owned(),
        };
        assert_eq!(
            goal_status(&status).lines().collect::<Vec<_>>(),
            [
                "goal loop running · cycle 3/20 · 1 of 2 done · /goal off stops it",
                "goals in /home/dev/shop/goals.md:",
                "  ☑ parse the coupons",
                "  ☐ test them",
                "used 48.2k tokens of 100k · cost 0.0123 CNY",
                "Goal loop running: cycle 3 of 20. Left:",
                "- test them",
                "Used 48200 tokens.",
            ]
        );
        status.running = false;
        status.goals.clear();
        status.cost_used = 0.0;
        status.summary.clear();
        let text = goal_status(&status);
        assert!(
            text.starts_with("goal loop off · 1 of 2 done · /goal on starts it"),
            "{text}"
        );
        assert!(
            text.contains("no goals in /home/dev/shop/goals.md yet"),
            "{text}"
        );
        assert!(!text.contains("cost"), "{text}");
    }
}

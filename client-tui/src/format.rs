//! How numbers, names and one-line summaries read in the terminal, shared by the transcript,
//! the reports and the status line. A leaf: it imports no other module of the client but `wrap`,
//! so anything may use it without a circle.

use cwcode_protocol::{Mode, RewindResult, TurnOutcome};
use serde_json::Value;

use crate::wrap;

/// Paths named in a one-line summary before the rest are counted.
const NAMED_FILES: usize = 3;

/// `text` cut to `max_chars` characters, the cut marked with an ellipsis.
pub fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars.saturating_sub(1)) {
        Some((cut, _)) if text.chars().count() > max_chars => format!("{}…", &text[..cut]),
        _ => text.to_owned(),
    }
}

/// How a turn ended, in words; outcomes this build does not know are named as the daemon does.
pub fn outcome_word(outcome: TurnOutcome) -> String {
    match serde_json::to_value(outcome) {
        Ok(Value::String(name)) => name.replace('_', " "),
        _ => format!("{outcome:?}").to_lowercase(),
    }
}

/// A token count, short: 950, 12.3k, 128k, 1.2M.
pub fn tokens(count: u64) -> String {
    match count {
        0..1_000 => count.to_string(),
        1_000..100_000 => format!("{:.1}k", count as f64 / 1e3),
        100_000..1_000_000 => format!("{:.0}k", count as f64 / 1e3),
        _ => format!("{:.1}M", count as f64 / 1e6),
    }
}

/// `part` of `whole` as a whole percentage; a dash when there is no whole.
pub fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "–".to_owned();
    }
    format!("{}%", (part * 100 + whole / 2) / whole)
}

/// An amount of money, with the digits a per-turn cost needs (fractions of a cent).
pub fn money(amount: f64) -> String {
    if amount < 1.0 {
        format!("{amount:.4}")
    } else {
        format!("{amount:.2}")
    }
}

/// A size in bytes, short: 812 B, 21.0 KB, 1.2 MB.
pub fn bytes(count: u64) -> String {
    match count {
        0..1_000 => format!("{count} B"),
        1_000..1_000_000 => format!("{:.1} KB", count as f64 / 1e3),
        _ => format!("{:.1} MB", count as f64 / 1e6),
    }
}

/// Paths on one line of at most `room` columns: as many of the first few as fit whole, then
/// how many more.
pub fn files(paths: &[String], room: usize) -> String {
    if paths.is_empty() {
        return "no files".to_owned();
    }
    let named = |count: usize| match paths.len() - count {
        0 => paths[..count].join(", "),
        more => format!("{} and {more} more", paths[..count].join(", ")),
    };
    (1..=paths.len().min(NAMED_FILES))
        .rev()
        .map(named)
        .find(|text| wrap::width(text) <= room)
        .unwrap_or_else(|| shorten(&named(1), room))
}

/// What a rewind (or its undo) did to the files, in one line.
pub fn rewind_effect(result: &RewindResult) -> String {
    let mut parts = Vec::new();
    if !result.restored.is_empty() {
        parts.push(format!("restored {}", files(&result.restored, usize::MAX)));
    }
    if !result.removed.is_empty() {
        parts.push(format!("removed {}", files(&result.removed, usize::MAX)));
    }
    if parts.is_empty() {
        "no file changed".to_owned()
    } else {
        parts.join("; ")
    }
}

/// What a mode lets the agent do, in the words `/mode` and the completion list use.
pub fn mode_meaning(mode: Mode) -> &'static str {
    match mode {
        Mode::Plan => "read-only tools, the agent proposes changes",
        Mode::Code => "changes wait for your approval",
        Mode::Yolo => "every tool runs without asking",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short() {
        assert_eq!(tokens(950), "950");
        assert_eq!(tokens(12_345), "12.3k");
        assert_eq!(tokens(128_000), "128k");
        assert_eq!(tokens(2_500_000), "2.5M");
        assert_eq!(percent(64, 100), "64%");
        assert_eq!(percent(0, 0), "–");
        assert_eq!(outcome_word(TurnOutcome::StormBroken), "storm broken");
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("abcd", 4), "abcd");
    }

    #[test]
    fn sizes_money_and_file_lists_are_short() {
        assert_eq!(bytes(812), "812 B");
        assert_eq!(bytes(21_040), "21.0 KB");
        assert_eq!(bytes(1_260_000), "1.3 MB");
        assert_eq!(money(0.000_739), "0.0007");
        assert_eq!(money(12.345), "12.35");
        let paths: Vec<String> = ["a", "b", "c", "d", "e"].map(str::to_owned).to_vec();
        assert_eq!(files(&paths[..2], 80), "a, b");
        assert_eq!(files(&paths, 80), "a, b, c and 2 more");
        assert_eq!(files(&paths, 12), "a and 4 more");
        assert_eq!(files(&paths, 6), "a and…");
        assert_eq!(files(&[], 6), "no files");
        let result = RewindResult {
            turn: 2,
            prompt: String::new(),
            restored: paths[..1].to_vec(),
            removed: paths[1..2].to_vec(),
            failed: Vec::new(),
        };
        assert_eq!(rewind_effect(&result), "restored a; removed b");
        assert_eq!(rewind_effect(&RewindResult::default()), "no file changed");
    }
}

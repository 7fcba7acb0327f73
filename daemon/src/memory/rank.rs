//! Ranking: FTS5's BM25 relevance blended with recency. Pure functions, so the blend is tested
//! without a database.

/// How much relevance weighs against recency: a note that matches the query well beats a newer
/// one that matches it poorly, and between equal matches the newer wins.
const RELEVANCE_WEIGHT: f64 = 0.8;
const RECENCY_WEIGHT: f64 = 1.0 - RELEVANCE_WEIGHT;
/// A note's recency halves every this many days.
const RECENCY_HALF_LIFE_DAYS: f64 = 30.0;
const MS_PER_DAY: f64 = 86_400_000.0;
/// Words of a query beyond this are ignored: FTS5's cost grows with every term.
pub(super) const MAX_QUERY_TERMS: usize = 32;

/// The FTS5 query for what a user or model typed: each word quoted (so `-`, `:`, `*` and
/// FTS5's keywords are plain text, never query syntax) and any of them may match, so a question
/// in natural words finds the notes sharing its words. `None` when the text has no word.
pub(super) fn fts_query(text: &str) -> Option<String> {
    let terms: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .take(MAX_QUERY_TERMS)
        .map(|word| format!("\"{}\"", word.to_lowercase()))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

/// A candidate from the index: its BM25 as FTS5 reports it (lower is better, negative for any
/// match) and when it was written.
#[derive(Debug, Clone, Copy)]
pub(super) struct Candidate {
    pub id: i64,
    pub bm25: f64,
    pub created_ms: i64,
}

/// Scores in 0..=1, best first. Relevance is each BM25 relative to the best of the candidates,
/// so the blend does not depend on BM25's unbounded scale.
pub(super) fn rank(candidates: &[Candidate], now_ms: i64) -> Vec<(i64, f64)> {
    let best = candidates
        .iter()
        .map(|candidate| candidate.bm25)
        .fold(0.0_f64, f64::min);
    let mut ranked: Vec<(i64, f64)> = candidates
        .iter()
        .map(|candidate| {
            let relevance = if best < 0.0 {
                (candidate.bm25 / best).clamp(0.0, 1.0)
            } else {
                0.0
            };
            let score = RELEVANCE_WEIGHT * relevance
                + RECENCY_WEIGHT * recency(candidate.created_ms, now_ms);
            (candidate.id, score)
        })
        .collect();
    ranked.sort_by(|(a_id, a), (b_id, b)| b.total_cmp(a).then(b_id.cmp(a_id)));
    ranked
}

/// 1 for a note written now, halving every [`RECENCY_HALF_LIFE_DAYS`].
fn recency(created_ms: i64, now_ms: i64) -> f64 {
    let age_days = (now_ms.saturating_sub(created_ms)).max(0) as f64 / MS_PER_DAY;
    0.5_f64.powf(age_days / RECENCY_HALF_LIFE_DAYS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;

    #[test]
    fn every_word_is_quoted_so_query_syntax_is_plain_text() {
        assert_eq!(
            fts_query("How do we deploy? NOT -x* \"y\"").unwrap(),
            "\"how\" OR \"do\" OR \"we\" OR \"deploy\" OR \"not\" OR \"x\" OR \"y\""
        );
        assert_eq!(fts_query("  ?! -- "), None);
        let long = "word ".repeat(100);
        assert_eq!(
            fts_query(&long).unwrap().matches("word").count(),
            MAX_QUERY_TERMS
        );
    }

    #[test]
    fn a_better_match_beats_a_newer_one_and_equal_matches_go_to_the_newest() {
        let now = 400 * DAY;
        let candidates = [
            Candidate {
                id: 1,
                bm25: -8.0,
                created_ms: now - 90 * DAY,
            },
            Candidate {
                id: 2,
                bm25: -2.0,
                created_ms: now,
            },
            Candidate {
                id: 3,
                bm25: -8.0,
                created_ms: now - DAY,
            },
        ];
        let ranked = rank(&candidates, now);
        let order: Vec<i64> = ranked.iter().map(|(id, _)| *id).collect();
        assert_eq!(order, [3, 1, 2]);
        assert!(ranked.iter().all(|(_, score)| (0.0..=1.0).contains(score)));
    }
}

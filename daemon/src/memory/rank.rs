//! Ranking: FTS5's BM25 relevance blended with recency, and with embedding similarity when the
//! query has a vector. Pure functions, so the blend is tested without a database.

/// The weights of (words, similarity, recency). Relevance outweighs recency: a note that matches
/// the query well beats a newer one that matches it poorly, and between equal matches the newer
/// wins.
const WORDS_ONLY: Weights = Weights {
    words: 0.8,
    similarity: 0.0,
    recency: 0.2,
};
/// With a vector, meaning outweighs words: a close note sharing no word beats a weak word match.
const WITH_SIMILARITY: Weights = Weights {
    words: 0.3,
    similarity: 0.55,
    recency: 0.15,
};
/// A note that shares no word with the query is a candidate only when its vector is at least
/// this close: below it, similarity is mostly noise.
pub(super) const MIN_SIMILARITY: f64 = 0.35;
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

struct Weights {
    words: f64,
    similarity: f64,
    recency: f64,
}

/// A note that may answer the query: its BM25 as FTS5 reports it (lower is better, negative
/// for any match; `None` when it shares no word with the query), its similarity to the query's
/// vector (`None` without one), and when it was written.
#[derive(Debug, Clone, Copy)]
pub(super) struct Candidate {
    pub id: i64,
    pub bm25: Option<f64>,
    pub similarity: Option<f64>,
    pub created_ms: i64,
}

/// Scores in 0..=1, best first. Word relevance is each BM25 relative to the best of the
/// candidates, so the blend does not depend on BM25's unbounded scale. `with_similarity` says
/// the query had a vector: notes without one then score no similarity.
pub(super) fn rank(
    candidates: &[Candidate],
    with_similarity: bool,
    now_ms: i64,
) -> Vec<(i64, f64)> {
    let weights = if with_similarity {
        WITH_SIMILARITY
    } else {
        WORDS_ONLY
    };
    let best = candidates
        .iter()
        .filter_map(|candidate| candidate.bm25)
        .fold(0.0_f64, f64::min);
    let mut ranked: Vec<(i64, f64)> = candidates
        .iter()
        .map(|candidate| {
            let relevance = match candidate.bm25 {
                Some(bm25) if best < 0.0 => (bm25 / best).clamp(0.0, 1.0),
                _ => 0.0,
            };
            let score = weights.words * relevance
                + weights.similarity * candidate.similarity.unwrap_or(0.0)
                + weights.recency * recency(candidate.created_ms, now_ms);
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
        let candidate = |id, bm25, age_days| Candidate {
            id,
            bm25: Some(bm25),
            similarity: None,
            created_ms: now - age_days * DAY,
        };
        let candidates = [
            candidate(1, -8.0, 90),
            candidate(2, -2.0, 0),
            candidate(3, -8.0, 1),
        ];
        let ranked = rank(&candidates, false, now);
        let order: Vec<i64> = ranked.iter().map(|(id, _)| *id).collect();
        assert_eq!(order, [3, 1, 2]);
        assert!(ranked.iter().all(|(_, score)| (0.0..=1.0).contains(score)));
    }

    #[test]
    fn similarity_lifts_a_note_that_shares_no_word_with_the_query() {
        let now = 400 * DAY;
        let candidates = [
            Candidate {
                id: 1,
                bm25: Some(-1.0),
                similarity: Some(0.1),
                created_ms: now,
            },
            Candidate {
                id: 2,
                bm25: None,
                similarity: Some(0.95),
                created_ms: now,
            },
        ];
        let order: Vec<i64> = rank(&candidates, true, now)
            .iter()
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(order, [2, 1]);
        let words_only: Vec<i64> = rank(&candidates, false, now)
            .iter()
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(words_only, [1, 2]);
    }
}

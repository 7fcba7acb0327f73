//! Embeddings as `memory.db` stores them (little-endian `f32`s in a BLOB) and how they compare.

use futures::future::BoxFuture;

/// The most dimensions accepted from an endpoint; real models use 256 to 3072.
pub const MAX_DIMENSIONS: usize = 8192;

/// Turns text into a vector: the profile's OpenAI-compatible `/embeddings` endpoint, in the
/// daemon. The model's name is stored with each vector, and only vectors of the same model
/// are compared.
pub trait Embedder: Send + Sync {
    fn model(&self) -> &str;
    /// The vector for `text`, or what went wrong in words.
    fn embed<'a>(&'a self, text: &'a str) -> BoxFuture<'a, Result<Vec<f32>, String>>;
}

/// Asks `embedder` and checks its answer; a failure is logged and the caller goes on without a
/// vector, since a note or a search is still useful by its words alone.
pub(super) async fn embedding_of(embedder: &dyn Embedder, text: &str) -> Option<Vec<f32>> {
    match embedder.embed(text).await {
        Ok(vector) if vector.is_empty() || vector.len() > MAX_DIMENSIONS => {
            tracing::warn!(
                dimensions = vector.len(),
                model = embedder.model(),
                "the embeddings endpoint answered a vector of an unusable size; ranking by words"
            );
            None
        }
        Ok(vector) => Some(vector),
        Err(error) => {
            tracing::warn!(%error, model = embedder.model(), "no embedding; ranking by words");
            None
        }
    }
}

pub(super) fn to_blob(vector: &[f32]) -> Vec<u8> {
    vector
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect()
}

pub(super) fn from_blob(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|bytes| f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
        .collect()
}

/// Cosine similarity clamped to 0..=1 (opposite directions count as unrelated); 0 for vectors
/// of different lengths or of zero length.
pub(super) fn similarity(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut norm_a, mut norm_b) = (0.0_f64, 0.0_f64, 0.0_f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        norm_a += x * x;
        norm_b += y * y;
    }
    if norm_a == 0.0 || norm_b == 0.0 {
        return 0.0;
    }
    (dot / (norm_a.sqrt() * norm_b.sqrt())).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_through_a_blob_and_compare_by_direction() {
        let vector = vec![0.5_f32, -1.25, 3.0];
        assert_eq!(from_blob(&to_blob(&vector)), vector);
        assert!((similarity(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-9);
        assert_eq!(similarity(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert_eq!(similarity(&[1.0, 0.0], &[-1.0, 0.0]), 0.0);
        assert_eq!(similarity(&[1.0], &[1.0, 0.0]), 0.0);
        assert_eq!(similarity(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    }
}

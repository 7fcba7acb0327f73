//! The OpenAI-compatible `/embeddings` endpoint of a profile that names an `embeddings_model`:
//! one text in, one vector out, for memory's ranking. Bounded in time and in answer size, since
//! the answer is untrusted.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header;
use serde_json::{Value, json};

use super::{Provider, provider_error_text};
use crate::memory::Embedder;
use crate::util::error_chain;

/// An embedding is one short request: a slow endpoint must not hold up a `remember` for long.
const EMBEDDINGS_TIMEOUT: Duration = Duration::from_secs(20);
/// Enough for the largest vector memory accepts, written as JSON numbers.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

impl Provider {
    /// This client as memory's embedder, when the profile names an embeddings model.
    pub fn embedder(self: &Arc<Self>) -> Option<Arc<dyn Embedder>> {
        self.embeddings_model.is_some().then(|| {
            let provider: Arc<Provider> = Arc::clone(self);
            provider as Arc<dyn Embedder>
        })
    }

    async fn embedding(&self, model: &str, text: &str) -> Result<Vec<f32>, String> {
        let url = self.embeddings_url.clone();
        let body = json!({ "model": model, "input": text }).to_string();
        let request = async {
            let mut response = self
                .http
                .post(url.clone())
                .header(header::CONTENT_TYPE, "application/json")
                .body(body)
                .send()
                .await
                .map_err(|error| {
                    format!("cannot reach {url}: {}", error_chain(&error.without_url()))
                })?;
            let status = response.status();
            let mut answer = Vec::new();
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|error| format!("{url}: {}", error_chain(&error.without_url())))?
            {
                if answer.len() + chunk.len() > MAX_ANSWER_BYTES {
                    return Err(format!("{url} answered more than {MAX_ANSWER_BYTES} bytes"));
                }
                answer.extend_from_slice(&chunk);
            }
            let text = String::from_utf8_lossy(&answer);
            if !status.is_success() {
                let body = provider_error_text(&self.without_key(text.into_owned()));
                return Err(format!("{url} answered HTTP {}: {body}", status.as_u16()));
            }
            first_embedding(&text)
                .ok_or_else(|| format!("{url} answered no `data[0].embedding` list of numbers"))
        };
        tokio::time::timeout(EMBEDDINGS_TIMEOUT, request)
            .await
            .map_err(|_| {
                format!(
                    "{url} did not answer within {} s",
                    EMBEDDINGS_TIMEOUT.as_secs()
                )
            })?
    }
}

/// `{"data": [{"embedding": [0.1, …]}]}`, OpenAI's shape.
fn first_embedding(answer: &str) -> Option<Vec<f32>> {
    let answer: Value = serde_json::from_str(answer).ok()?;
    answer["data"][0]["embedding"]
        .as_array()?
        .iter()
        .map(|value| value.as_f64().map(|value| value as f32))
        .collect()
}

impl Embedder for Provider {
    fn model(&self) -> &str {
        self.embeddings_model.as_deref().unwrap_or_default()
    }

    fn embed<'a>(&'a self, text: &'a str) -> BoxFuture<'a, Result<Vec<f32>, String>> {
        Box::pin(async move {
            match &self.embeddings_model {
                Some(model) => self.embedding(model, text).await,
                None => Err(format!(
                    "profile `{}` names no embeddings_model",
                    self.profile_name
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_vector_of_an_openai_answer_is_read_and_anything_else_is_not() {
        assert_eq!(
            first_embedding(r#"{"data":[{"embedding":[0.5,-1,2]}],"model":"m"}"#),
            Some(vec![0.5, -1.0, 2.0])
        );
        assert_eq!(
            first_embedding(r#"{"data":[{"embedding":[0.5,"x"]}]}"#),
            None
        );
        assert_eq!(first_embedding(r#"{"data":[]}"#), None);
        assert_eq!(first_embedding("not json"), None);
    }
}

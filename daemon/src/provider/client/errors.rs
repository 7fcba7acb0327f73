//! What a failed call says: the provider's own error text, a stream that broke or was not SSE,
//! and the cause chain reqwest hides behind its generic messages.

use eventsource_stream::EventStreamError;
use serde_json::Value;

use crate::provider::ProviderError;
use crate::provider::sse;
use crate::util::error_chain;

pub(super) fn provider_error_text(text: &str) -> String {
    if text.trim().is_empty() {
        return "(empty body)".to_owned();
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value) => sse::error_message(&value),
        Err(_) => sse::excerpt(text, sse::EXCERPT_CHARS),
    }
}

pub(super) fn stream_error(error: EventStreamError<reqwest::Error>) -> ProviderError {
    match error {
        EventStreamError::Transport(error) => ProviderError::Stream(format!(
            "the connection broke mid-answer: {}",
            error_chain(&error.without_url())
        )),
        EventStreamError::Utf8(error) => {
            ProviderError::Protocol(format!("the stream is not UTF-8: {error}"))
        }
        EventStreamError::Parser(error) => {
            ProviderError::Protocol(format!("the stream is not SSE: {error}"))
        }
    }
}

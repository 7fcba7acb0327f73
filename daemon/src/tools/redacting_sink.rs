//! Streamed tool output with the config's secrets replaced (SPEC §7.3): a secret split between
//! two chunks is caught too.

use std::sync::{Arc, Mutex, PoisonError};

use super::OutputSink;
use crate::sandbox::secrets::Redactor;

/// Streamed output passed through a [`Redactor`]: a secret split between two chunks is caught
/// because a tail that could begin one waits for the next chunk (or [`RedactingSink::flush`]).
pub struct RedactingSink {
    redactor: Redactor,
    inner: OutputSink,
    pending: Mutex<String>,
}

impl RedactingSink {
    pub fn new(redactor: Redactor, inner: OutputSink) -> Arc<Self> {
        Arc::new(Self {
            redactor,
            inner,
            pending: Mutex::new(String::new()),
        })
    }

    /// A sink for a tool context that feeds this one.
    pub fn output(self: &Arc<Self>) -> OutputSink {
        let sink = Arc::clone(self);
        Arc::new(move |text: &str| sink.push(text))
    }

    fn push(&self, chunk: &str) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.push_str(chunk);
        let redacted = self.redactor.redact(std::mem::take(&mut *pending));
        let ready = redacted.len() - self.redactor.partial_tail_len(&redacted);
        if ready > 0 {
            // Under the lock, so chunks reach the inner sink in order.
            (self.inner)(&redacted[..ready]);
        }
        *pending = redacted[ready..].to_owned();
    }

    /// Emits what was held back: the stream has ended.
    pub fn flush(&self) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if !pending.is_empty() {
            (self.inner)(&self.redactor.redact(std::mem::take(&mut *pending)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_split_across_chunks_is_still_redacted() {
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let collected = Arc::clone(&seen);
        let sink = RedactingSink::new(
            Redactor::new(&["sk-secret-value".to_owned()]),
            Arc::new(move |text: &str| collected.lock().unwrap().push(text.to_owned())),
        );
        let output = sink.output();
        for chunk in [
            "key: sk-se",
            "cret-v",
            "alue\nnext sk-",
            "s",
            "é done sk-sec",
        ] {
            output(chunk);
        }
        sink.flush();

        let seen = seen.lock().unwrap();
        assert_eq!(
            seen.concat(),
            "key: [redacted]\nnext sk-sé done sk-sec",
            "{seen:?}"
        );
        assert!(seen.iter().all(|chunk| !chunk.contains("sk-secret")));
        // Text that cannot begin a secret is not held back.
        assert_eq!(seen[0], "key: ");
    }
}

//! What a tool call's streamed output leaves in the journal: the same head and tail the model is
//! shown (bash keeps 16 KiB of each), never the whole of a command that prints gigabytes.
//!
//! The head is streamed as it comes. Past it nothing more is journalled or broadcast until the
//! call ends; then the tail follows, after a line saying how much was left out and where it is:
//! everything the call printed is spilled to `sessions/<id>/outputs/<call>.log` (0600, capped at
//! [`SPILL_CAP_BYTES`]), which a `tool_output_spilled` event names.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use cwcode_protocol::EventKind;

use crate::journal::JournalError;
use crate::journal::bus::EventLog;
use crate::tools::OutputSink;

/// Streamed live; the same as the head bash returns to the model.
const JOURNALLED_HEAD_BYTES: usize = 16 * 1024;
/// Sent when the call ends; the same as the tail bash returns to the model.
const JOURNALLED_TAIL_BYTES: usize = 16 * 1024;
/// A spill file stops growing here; what comes after is counted, not kept.
const SPILL_CAP_BYTES: u64 = 64 * 1024 * 1024;
/// Longest call id kept in a spill file's name (ids come from the model).
const NAME_CHARS: usize = 64;

/// Records one call's streamed output: hand [`ToolOutputRecorder::sink`] to the tool, then call
/// [`ToolOutputRecorder::finish`] once it returns.
pub struct ToolOutputRecorder {
    log: Arc<EventLog>,
    call_id: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The text streamed so far, at most the head.
    head: String,
    /// The text since the head, trimmed from the front once it is twice the tail.
    tail: String,
    /// Bytes trimmed from the tail's front: neither journalled nor shown.
    dropped: u64,
    total: u64,
    spill: Option<Spill>,
    /// The spill file could not be made; the output is then only bounded, not kept.
    spill_failed: bool,
}

struct Spill {
    path: PathBuf,
    file: BufWriter<File>,
    written: u64,
}

impl ToolOutputRecorder {
    pub fn new(log: Arc<EventLog>, call_id: &str) -> Arc<Self> {
        Arc::new(Self {
            log,
            call_id: call_id.to_owned(),
            state: Mutex::new(State::default()),
        })
    }

    pub fn sink(self: &Arc<Self>) -> OutputSink {
        let recorder = Arc::clone(self);
        Arc::new(move |text: &str| recorder.push(text))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn push(&self, mut text: &str) {
        let mut state = self.state();
        state.total += text.len() as u64;
        let room = JOURNALLED_HEAD_BYTES - state.head.len();
        if room > 0 {
            let cut = floor_char_boundary(text, room);
            if cut > 0 {
                self.publish(&text[..cut]);
                state.head.push_str(&text[..cut]);
            }
            text = &text[cut..];
        }
        if text.is_empty() {
            return;
        }
        if let Some(spill) = &mut state.spill {
            spill.write(text);
        }
        state.tail.push_str(text);
        if state.tail.len() > 2 * JOURNALLED_TAIL_BYTES {
            if state.spill.is_none() && !state.spill_failed {
                self.start_spill(&mut state);
            }
            let cut = tail_start(&state.tail);
            state.tail.drain(..cut);
            state.dropped += cut as u64;
        }
    }

    /// Opens the spill file with everything printed so far: the head and the untrimmed tail.
    fn start_spill(&self, state: &mut State) {
        match self.open_spill() {
            Ok(mut spill) => {
                spill.write(&state.head);
                spill.write(&state.tail);
                state.spill = Some(spill);
            }
            Err(error) => {
                tracing::warn!(%error, "cannot keep a long tool output; only its head and tail are kept");
                state.spill_failed = true;
            }
        }
    }

    fn open_spill(&self) -> std::io::Result<Spill> {
        let dir = self
            .log
            .dir()
            .ok_or_else(|| std::io::Error::other("the session has no directory"))?
            .join("outputs");
        DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        let name: String = self
            .call_id
            .chars()
            .take(NAME_CHARS)
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let mut last_error = None;
        // Call ids are the model's: a repeated one gets a file of its own.
        for attempt in 1..=100 {
            let path = match attempt {
                1 => dir.join(format!("{name}.log")),
                n => dir.join(format!("{name}-{n}.log")),
            };
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(file) => {
                    return Ok(Spill {
                        path,
                        file: BufWriter::with_capacity(64 * 1024, file),
                        written: 0,
                    });
                }
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    last_error = Some(error);
                }
                Err(error) => return Err(error),
            }
        }
        Err(last_error.unwrap_or_else(|| std::io::Error::other("no free spill file name")))
    }

    fn publish(&self, text: &str) {
        let delta = EventKind::ToolOutputDelta {
            call_id: self.call_id.clone(),
            text: text.to_owned(),
        };
        if let Err(error) = self.log.publish_delta(delta) {
            tracing::error!(%error, "cannot journal tool output");
        }
    }

    /// Journals the tail, and where the whole output is when part of it was left out.
    pub fn finish(&self) -> Result<(), JournalError> {
        let mut state = self.state();
        let start = tail_start(&state.tail);
        let omitted = state.dropped + start as u64;
        let spill = state.spill.take();
        let tail = std::mem::take(&mut state.tail);
        if omitted == 0 {
            if !tail.is_empty() {
                self.publish(&tail);
            }
            return Ok(());
        }
        let Some(mut spill) = spill else {
            self.publish(&format!(
                "\n[... {omitted} bytes of output left out here ...]\n{}",
                &tail[start..]
            ));
            return Ok(());
        };
        let total = state.total;
        if spill.written < total {
            let note = format!(
                "\n[cwcode: this file stops at {SPILL_CAP_BYTES} bytes; {} more bytes were printed and not kept]\n",
                total - spill.written
            );
            if let Err(error) = spill.file.write_all(note.as_bytes()) {
                tracing::warn!(%error, "cannot note a spill file's cap");
            }
        }
        if let Err(error) = spill.file.flush() {
            tracing::warn!(%error, path = %spill.path.display(), "cannot finish a spill file");
        }
        let path = spill.path.display().to_string();
        self.publish(&format!(
            "\n[... {omitted} bytes of output left out here; all of it is in {path} ...]\n{}",
            &tail[start..]
        ));
        self.log
            .publish(EventKind::ToolOutputSpilled {
                call_id: self.call_id.clone(),
                path,
                total_bytes: total,
                spilled_bytes: spill.written,
            })
            .map(drop)
    }
}

impl Spill {
    fn write(&mut self, text: &str) {
        let room = SPILL_CAP_BYTES.saturating_sub(self.written);
        let cut = floor_char_boundary(text, usize::try_from(room).unwrap_or(usize::MAX));
        if cut == 0 {
            return;
        }
        match self.file.write_all(&text.as_bytes()[..cut]) {
            Ok(()) => self.written += cut as u64,
            Err(error) => {
                tracing::warn!(%error, path = %self.path.display(), "cannot write a spill file");
                // Stop trying: the cap note then tells how much is missing.
                self.written = SPILL_CAP_BYTES;
            }
        }
    }
}

/// Where the kept tail starts: its last [`JOURNALLED_TAIL_BYTES`], on a character boundary.
fn tail_start(tail: &str) -> usize {
    let mut index = tail.len().saturating_sub(JOURNALLED_TAIL_BYTES);
    while !tail.is_char_boundary(index) {
        index += 1;
    }
    index
}

fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use cwcode_protocol::Event;

    use super::*;
    use crate::journal::Journal;

    fn log_in(dir: &tempfile::TempDir) -> Arc<EventLog> {
        let path = dir.path().join("events.jsonl");
        let (journal, _) = Journal::open(&path).unwrap();
        Arc::new(EventLog::new(&path, journal))
    }

    fn streamed(events: &[Event]) -> String {
        events
            .iter()
            .filter_map(|event| match &event.kind {
                EventKind::ToolOutputDelta { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn short_output_is_journalled_whole_and_not_spilled() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_in(&dir);
        let recorder = ToolOutputRecorder::new(Arc::clone(&log), "c1");
        let sink = recorder.sink();
        let line = "é".repeat(500) + "\n";
        for _ in 0..30 {
            sink(&line);
        }
        recorder.finish().unwrap();
        let events = log.read_all().unwrap();
        assert_eq!(streamed(&events), line.repeat(30));
        assert!(!dir.path().join("outputs").exists());
    }

    #[test]
    fn long_output_journals_head_and_tail_and_spills_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_in(&dir);
        let recorder = ToolOutputRecorder::new(Arc::clone(&log), "../call 1");
        let sink = recorder.sink();
        let mut everything = String::new();
        for index in 0..100_000 {
            let line = format!("line {index}\n");
            sink(&line);
            everything.push_str(&line);
        }
        recorder.finish().unwrap();
        let events = log.read_all().unwrap();
        let text = streamed(&events);
        assert!(text.len() < 40 * 1024, "{}", text.len());
        assert!(text.starts_with("line 0\nline 1\n"));
        assert!(text.ends_with("line 99999\n"));
        let Some(EventKind::ToolOutputSpilled {
            path,
            total_bytes,
            spilled_bytes,
            ..
        }) = events.last().map(|event| &event.kind)
        else {
            panic!("{:?}", events.last());
        };
        assert!(text.contains(path.as_str()), "{text}");
        assert_eq!(*total_bytes, everything.len() as u64);
        assert_eq!(*spilled_bytes, everything.len() as u64);
        let path = PathBuf::from(path);
        assert_eq!(path.parent().unwrap(), dir.path().join("outputs"));
        assert_eq!(path.file_name().unwrap(), "___call_1.log");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), everything);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

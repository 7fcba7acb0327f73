//! The transcript: the session's events folded into entries (prompts, reasoning, answers, tool
//! calls with their diffs, output and approvals, notes, turn summaries), and those entries
//! rendered to wrapped lines. Each entry caches its lines until it changes or the width does,
//! so a long session costs nothing per frame but the entry that is streaming. The fold is in
//! `fold` (one arm per event kind, none skipped by a wildcard), the drawing in `render`.

use std::collections::HashMap;

use cwcode_protocol::{TurnOutcome, Usage};
use ratatui::text::Line;

use crate::diff::{Diff, FileViews};

mod fold;
mod render;
#[cfg(test)]
mod tests;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Info,
    /// Something asked for and worth reading (a /cache table): not dimmed.
    Plain,
    Warn,
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Approval {
    None,
    Waiting,
    Approved,
    /// Approved for the rest of the session: the calls matching the pattern, or the whole tool.
    Always(Option<String>),
    Denied(Option<String>),
}

#[derive(Debug, Clone)]
struct ToolEntry {
    name: String,
    arguments: String,
    diff: Option<Diff>,
    output: String,
    result: Option<(String, bool)>,
    approval: Approval,
}

#[derive(Debug, Clone)]
enum Kind {
    Prompt(String),
    Queued {
        turn: u32,
        text: String,
    },
    Reasoning {
        text: String,
        done: bool,
    },
    Answer(String),
    Tool(Box<ToolEntry>),
    Note {
        text: String,
        tone: Tone,
    },
    TurnEnd {
        turn: u32,
        outcome: TurnOutcome,
        usage: Usage,
        error: Option<String>,
    },
}

#[derive(Debug, Clone)]
struct Entry {
    kind: Kind,
    lines: Option<Vec<Line<'static>>>,
}

#[derive(Debug, Default)]
pub struct Transcript {
    entries: Vec<Entry>,
    views: FileViews,
    /// The answer and reasoning entries of the model answer now streaming.
    answer: Option<usize>,
    reasoning: Option<usize>,
    tools: HashMap<String, usize>,
    /// Approval request id → tool call id.
    requests: HashMap<String, String>,
    /// The goal cycle started and not yet finished: started again, a restart interrupted it.
    open_goal_cycle: Option<u32>,
    /// What the cached lines were rendered for.
    width: usize,
    expanded: bool,
}

impl Transcript {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn push(&mut self, kind: Kind) -> usize {
        self.entries.push(Entry { kind, lines: None });
        self.entries.len() - 1
    }

    fn touch(&mut self, index: usize) -> Option<&mut Kind> {
        let entry = self.entries.get_mut(index)?;
        entry.lines = None;
        Some(&mut entry.kind)
    }

    pub fn note(&mut self, text: impl Into<String>, tone: Tone) {
        self.push(Kind::Note {
            text: text.into(),
            tone,
        });
    }

    /// Removes an entry, keeping the indexes that point past it right.
    fn remove(&mut self, index: usize) {
        self.entries.remove(index);
        let shift = |slot: &mut Option<usize>| {
            *slot = match *slot {
                Some(i) if i == index => None,
                Some(i) if i > index => Some(i - 1),
                other => other,
            }
        };
        shift(&mut self.answer);
        shift(&mut self.reasoning);
        self.tools.retain(|_, i| *i != index);
        for i in self.tools.values_mut() {
            if *i > index {
                *i -= 1;
            }
        }
    }

    /// Renders what is stale and returns the total number of rows.
    pub fn layout(&mut self, width: usize, expanded: bool) -> usize {
        if width != self.width || expanded != self.expanded {
            self.width = width;
            self.expanded = expanded;
            for entry in &mut self.entries {
                entry.lines = None;
            }
        }
        let mut total = 0;
        for index in 0..self.entries.len() {
            if self.entries[index].lines.is_none() {
                let previous = index.checked_sub(1).map(|i| &self.entries[i].kind);
                let lines = render::render(&self.entries[index].kind, previous, width, expanded);
                self.entries[index].lines = Some(lines);
            }
            total += self.entries[index].lines.as_ref().map_or(0, Vec::len);
        }
        total
    }

    /// The rows from `top`, at most `height` of them, as laid out by the last [`Self::layout`].
    pub fn rows(&self, top: usize, height: usize) -> Vec<Line<'static>> {
        let mut out = Vec::with_capacity(height);
        let mut skip = top;
        for entry in &self.entries {
            let Some(lines) = &entry.lines else { continue };
            if skip >= lines.len() {
                skip -= lines.len();
                continue;
            }
            for line in &lines[skip..] {
                if out.len() == height {
                    return out;
                }
                out.push(line.clone());
            }
            skip = 0;
        }
        out
    }
}

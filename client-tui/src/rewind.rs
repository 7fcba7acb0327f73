//! The rewind picker (SPEC §8): the session's checkpoints, newest first (the usual rewind is
//! the last prompt or two). Choosing one asks the daemon to put files and history back to
//! before that prompt; the picker stays, saying so, until the daemon answers.

use cwcode_protocol::CheckpointInfo;

#[derive(Debug, Clone)]
pub struct RewindPicker {
    /// Newest first.
    pub checkpoints: Vec<CheckpointInfo>,
    pub selected: usize,
    /// The prompt a rewind was asked to go back before, while the daemon works on it.
    pub rewinding: Option<u32>,
    /// Why the last rewind failed (a turn running, say), shown under the list.
    pub error: Option<String>,
}

impl RewindPicker {
    /// `checkpoints` as `session/checkpoints` lists them, oldest first.
    pub fn new(mut checkpoints: Vec<CheckpointInfo>) -> Self {
        checkpoints.reverse();
        Self {
            checkpoints,
            selected: 0,
            rewinding: None,
            error: None,
        }
    }

    pub fn up(&mut self) {
        self.selected = self.selected.saturating_sub(1);
    }

    pub fn down(&mut self) {
        if self.selected + 1 < self.checkpoints.len() {
            self.selected += 1;
        }
    }

    pub fn first(&mut self) {
        self.selected = 0;
    }

    pub fn last(&mut self) {
        self.selected = self.checkpoints.len().saturating_sub(1);
    }

    /// Asks to rewind to before the selected prompt, unless a rewind is already under way;
    /// returns that prompt's number.
    pub fn choose(&mut self) -> Option<u32> {
        if self.rewinding.is_some() {
            return None;
        }
        let turn = self.checkpoints.get(self.selected)?.turn;
        self.rewinding = Some(turn);
        self.error = None;
        Some(turn)
    }

    pub fn failed(&mut self, message: String) {
        self.rewinding = None;
        self.error = Some(message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::checkpoint;

    #[test]
    fn the_newest_prompt_comes_first_and_one_rewind_at_a_time() {
        let mut picker = RewindPicker::new(vec![
            checkpoint(1, "first", &[]),
            checkpoint(2, "second", &["a.rs"]),
            checkpoint(3, "third", &[]),
        ]);
        let order: Vec<u32> = picker.checkpoints.iter().map(|c| c.turn).collect();
        assert_eq!(order, [3, 2, 1]);
        picker.down();
        assert_eq!(picker.choose(), Some(2));
        picker.down();
        // Waiting for the daemon: a second Enter does not ask again.
        assert_eq!(picker.choose(), None);
        picker.failed("a turn is running".to_owned());
        picker.first();
        picker.last();
        picker.down();
        assert_eq!(picker.choose(), Some(1));
        assert_eq!(picker.error, None);
    }
}

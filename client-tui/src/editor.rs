//! The multi-line prompt editor: a small text area with readline-style keys and a history of
//! the session's prompts. Written here because tui-textarea does not work with ratatui 0.30.

use ratatui::text::Line;
use unicode_width::UnicodeWidthChar;

#[derive(Debug, Clone, Default)]
pub struct Editor {
    /// Never empty: an empty editor holds one empty line.
    lines: Vec<String>,
    row: usize,
    /// Cursor column, in characters.
    col: usize,
    history: Vec<String>,
    /// Which history entry is shown, while browsing it.
    browsing: Option<usize>,
    /// What was typed before browsing started, restored when browsing past the newest entry.
    draft: String,
}

impl Editor {
    pub fn new() -> Self {
        Self {
            lines: vec![String::new()],
            ..Self::default()
        }
    }

    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    pub fn is_empty(&self) -> bool {
        self.lines.len() == 1 && self.lines[0].is_empty()
    }

    /// Replaces the content, with the cursor at its end.
    pub fn set_text(&mut self, text: &str) {
        self.lines = text.split('\n').map(str::to_owned).collect();
        self.row = self.lines.len() - 1;
        self.col = self.lines[self.row].chars().count();
    }

    /// Empties the editor and returns what it held.
    pub fn take(&mut self) -> String {
        let text = self.text();
        self.set_text("");
        self.browsing = None;
        text
    }

    /// Remembers a prompt for Up/Down, skipping a repeat of the newest one.
    pub fn remember(&mut self, prompt: &str) {
        if !prompt.trim().is_empty() && self.history.last().map(String::as_str) != Some(prompt) {
            self.history.push(prompt.to_owned());
        }
    }

    fn byte_index(line: &str, col: usize) -> usize {
        line.char_indices().nth(col).map_or(line.len(), |(i, _)| i)
    }

    fn current(&self) -> &String {
        &self.lines[self.row]
    }

    fn current_len(&self) -> usize {
        self.current().chars().count()
    }

    pub fn insert_char(&mut self, c: char) {
        let at = Self::byte_index(&self.lines[self.row], self.col);
        self.lines[self.row].insert(at, c);
        self.col += 1;
    }

    pub fn newline(&mut self) {
        let at = Self::byte_index(&self.lines[self.row], self.col);
        let rest = self.lines[self.row].split_off(at);
        self.lines.insert(self.row + 1, rest);
        self.row += 1;
        self.col = 0;
    }

    /// Inserts pasted text as is: newlines stay newlines (nothing is sent), CRLF becomes LF.
    pub fn paste(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        for c in text.chars() {
            match c {
                '\n' => self.newline(),
                '\t' => {
                    for _ in 0..4 {
                        self.insert_char(' ');
                    }
                }
                c if c.is_control() => {}
                c => self.insert_char(c),
            }
        }
    }

    pub fn backspace(&mut self) {
        if self.col > 0 {
            let at = Self::byte_index(&self.lines[self.row], self.col - 1);
            self.lines[self.row].remove(at);
            self.col -= 1;
        } else if self.row > 0 {
            let line = self.lines.remove(self.row);
            self.row -= 1;
            self.col = self.current_len();
            self.lines[self.row].push_str(&line);
        }
    }

    pub fn delete(&mut self) {
        if self.col < self.current_len() {
            let at = Self::byte_index(&self.lines[self.row], self.col);
            self.lines[self.row].remove(at);
        } else if self.row + 1 < self.lines.len() {
            let next = self.lines.remove(self.row + 1);
            self.lines[self.row].push_str(&next);
        }
    }

    pub fn left(&mut self) {
        if self.col > 0 {
            self.col -= 1;
        } else if self.row > 0 {
            self.row -= 1;
            self.col = self.current_len();
        }
    }

    pub fn right(&mut self) {
        if self.col < self.current_len() {
            self.col += 1;
        } else if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = 0;
        }
    }

    pub fn home(&mut self) {
        self.col = 0;
    }

    pub fn end(&mut self) {
        self.col = self.current_len();
    }

    /// Ctrl+U: deletes from the start of the line to the cursor.
    pub fn kill_to_start(&mut self) {
        let at = Self::byte_index(&self.lines[self.row], self.col);
        self.lines[self.row].drain(..at);
        self.col = 0;
    }

    /// Ctrl+K: deletes from the cursor to the end of the line.
    pub fn kill_to_end(&mut self) {
        let at = Self::byte_index(&self.lines[self.row], self.col);
        self.lines[self.row].truncate(at);
    }

    /// Ctrl+W / Alt+Backspace: deletes the word before the cursor.
    pub fn delete_word(&mut self) {
        if self.col == 0 {
            self.backspace();
            return;
        }
        let chars: Vec<char> = self.current().chars().collect();
        let mut start = self.col;
        while start > 0 && chars[start - 1].is_whitespace() {
            start -= 1;
        }
        while start > 0 && !chars[start - 1].is_whitespace() {
            start -= 1;
        }
        let from = Self::byte_index(&self.lines[self.row], start);
        let to = Self::byte_index(&self.lines[self.row], self.col);
        self.lines[self.row].drain(from..to);
        self.col = start;
    }

    /// Up: moves a line up, or at the first line shows the previous prompt of the history.
    pub fn up(&mut self) {
        if self.row > 0 {
            self.row -= 1;
            self.col = self.col.min(self.current_len());
            return;
        }
        let previous = match self.browsing {
            Some(0) => return,
            Some(index) => index - 1,
            None if self.history.is_empty() => return,
            None => {
                self.draft = self.text();
                self.history.len() - 1
            }
        };
        self.browsing = Some(previous);
        let text = self.history[previous].clone();
        self.set_text(&text);
        // Further Ups keep walking back: put the cursor on the first line.
        self.row = 0;
        self.col = self.col.min(self.current_len());
    }

    /// Down: moves a line down, or at the last line shows the next prompt of the history (and
    /// past the newest one, what was being typed).
    pub fn down(&mut self) {
        if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = self.col.min(self.current_len());
            return;
        }
        let Some(index) = self.browsing else { return };
        if index + 1 < self.history.len() {
            self.browsing = Some(index + 1);
            let text = self.history[index + 1].clone();
            self.set_text(&text);
        } else {
            self.browsing = None;
            let draft = std::mem::take(&mut self.draft);
            self.set_text(&draft);
        }
    }

    /// The editor's rows wrapped to `width` (the prefix included), and the cursor's row and
    /// column among them.
    pub fn layout(&self, width: usize, first_prefix: &str) -> (Vec<Line<'static>>, (usize, usize)) {
        let prefix_width = crate::wrap::width(first_prefix);
        let room = width.saturating_sub(prefix_width).max(1);
        let mut rows = Vec::new();
        let mut cursor = (0, prefix_width);
        for (index, line) in self.lines.iter().enumerate() {
            let prefix = if index == 0 {
                first_prefix.to_owned()
            } else {
                " ".repeat(prefix_width)
            };
            let mut row_text = String::new();
            let mut used = 0;
            let mut first_row = true;
            for (col, c) in line.chars().enumerate() {
                let w = c.width().unwrap_or(0);
                if used + w > room {
                    rows.push(row_line(&prefix, first_row, &row_text, prefix_width));
                    first_row = false;
                    row_text.clear();
                    used = 0;
                }
                if index == self.row && col == self.col {
                    cursor = (rows.len(), prefix_width + used);
                }
                row_text.push(c);
                used += w;
            }
            if index == self.row && self.col >= line.chars().count() {
                // The cursor after the last character may need a row of its own.
                if used >= room {
                    rows.push(row_line(&prefix, first_row, &row_text, prefix_width));
                    first_row = false;
                    row_text.clear();
                    used = 0;
                }
                cursor = (rows.len(), prefix_width + used);
            }
            rows.push(row_line(&prefix, first_row, &row_text, prefix_width));
        }
        (rows, cursor)
    }
}

fn row_line(prefix: &str, first_row: bool, text: &str, prefix_width: usize) -> Line<'static> {
    let lead = if first_row {
        prefix.to_owned()
    } else {
        " ".repeat(prefix_width)
    };
    Line::from(format!("{lead}{text}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(text: &str) -> Editor {
        let mut editor = Editor::new();
        editor.paste(text);
        editor
    }

    #[test]
    fn typing_newlines_and_deleting_across_lines() {
        let mut editor = typed("ab");
        editor.newline();
        editor.insert_char('c');
        assert_eq!(editor.text(), "ab\nc");
        editor.home();
        editor.backspace();
        assert_eq!(editor.text(), "abc");
        // The cursor sits where the lines joined.
        editor.delete();
        assert_eq!(editor.text(), "ab");
    }

    #[test]
    fn paste_keeps_newlines_and_normalises_crlf() {
        let editor = typed("one\r\ntwo\tx");
        assert_eq!(editor.text(), "one\ntwo    x");
    }

    #[test]
    fn word_and_line_kills() {
        let mut editor = typed("cargo test  --all");
        editor.delete_word();
        assert_eq!(editor.text(), "cargo test  ");
        editor.delete_word();
        assert_eq!(editor.text(), "cargo ");
        editor.home();
        editor.right();
        editor.kill_to_end();
        assert_eq!(editor.text(), "c");
        editor.end();
        editor.kill_to_start();
        assert!(editor.is_empty());
    }

    #[test]
    fn history_is_walked_from_the_first_and_last_lines_only() {
        let mut editor = Editor::new();
        editor.remember("first");
        editor.remember("second\nprompt");
        editor.remember("second\nprompt");
        editor.paste("draft");
        editor.up();
        assert_eq!(editor.text(), "second\nprompt");
        // On the first line of a multi-line entry, Up goes further back.
        editor.up();
        assert_eq!(editor.text(), "first");
        editor.up();
        assert_eq!(editor.text(), "first");
        editor.down();
        assert_eq!(editor.text(), "second\nprompt");
        // Down on the last line of the entry goes on; past the newest, the draft returns.
        editor.down();
        assert_eq!(editor.text(), "draft");
    }

    #[test]
    fn up_inside_a_multi_line_text_moves_the_cursor_first() {
        let mut editor = Editor::new();
        editor.remember("old");
        editor.paste("a\nb");
        editor.up();
        assert_eq!(editor.text(), "a\nb");
        editor.up();
        assert_eq!(editor.text(), "old");
    }

    #[test]
    fn layout_wraps_long_lines_and_places_the_cursor() {
        let mut editor = typed("abcdefgh");
        editor.newline();
        editor.insert_char('x');
        let (rows, cursor) = editor.layout(7, "› ");
        let texts: Vec<String> = rows.iter().map(|row| row.to_string()).collect();
        assert_eq!(texts, ["› abcde", "  fgh", "  x"]);
        assert_eq!(cursor, (2, 3));
        let mut editor = typed("abcde");
        let (rows, cursor) = editor.layout(7, "› ");
        assert_eq!(rows.len(), 2);
        assert_eq!(cursor, (1, 2));
        editor.home();
        assert_eq!(editor.layout(7, "› ").1, (0, 2));
    }
}

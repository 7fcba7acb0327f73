//! Text made safe for the screen and wrapped to its width. Wrapping is done here rather than by
//! ratatui's `Paragraph` so that the transcript knows exactly how many rows each entry takes:
//! scrolling and following the bottom are then exact, whatever the width.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

const TAB: &str = "    ";

/// Removes what would corrupt the screen: ANSI escape sequences (a tool's coloured output),
/// carriage returns and other control characters. Tabs become spaces, newlines stay.
pub fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => skip_escape(&mut chars),
            '\n' => out.push('\n'),
            '\t' => out.push_str(TAB),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Skips the rest of an escape sequence: CSI (`ESC [ … final`), OSC (`ESC ] … BEL|ESC \`), or
/// a two-character one.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        Some('[') => {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    return;
                }
            }
        }
        Some(']') => {
            while let Some(c) = chars.next() {
                if c == '\x07' {
                    return;
                }
                if c == '\x1b' {
                    chars.next();
                    return;
                }
            }
        }
        _ => {}
    }
}

/// The display width of a string, as the terminal will draw it.
pub fn width(text: &str) -> usize {
    text.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// Wraps one line to `width` columns, breaking at spaces where it can and inside words where it
/// must. Continuation rows start with `hang` spaces, so a list item or an indented block keeps
/// its left edge.
pub fn wrap_line(line: Line<'static>, width: usize, hang: usize) -> Vec<Line<'static>> {
    let width = width.max(1);
    let hang = if hang + 8 > width { 0 } else { hang };
    let base = line.style;
    let cells: Vec<(char, Style)> = line
        .spans
        .iter()
        .flat_map(|span| {
            let style = base.patch(span.style);
            span.content.chars().map(move |c| (c, style))
        })
        .collect();
    let total: usize = cells.iter().map(|(c, _)| c.width().unwrap_or(0)).sum();
    if total <= width {
        return vec![Line::from(merge(&cells))];
    }

    let mut rows = Vec::new();
    let mut start = 0;
    let mut first = true;
    while start < cells.len() {
        let room = if first { width } else { width - hang };
        let (end, next) = row_end(&cells, start, room);
        let mut spans = Vec::new();
        if !first && hang > 0 {
            spans.push(Span::raw(" ".repeat(hang)));
        }
        spans.extend(merge(&cells[start..end]));
        rows.push(Line::from(spans));
        start = next;
        first = false;
    }
    rows
}

/// Where the row that begins at `start` ends (exclusive) and where the next one begins: after
/// the last space that fits, or at the last character that fits when a word is too long.
fn row_end(cells: &[(char, Style)], start: usize, room: usize) -> (usize, usize) {
    let mut used = 0;
    let mut last_space = None;
    let mut index = start;
    while index < cells.len() {
        let w = cells[index].0.width().unwrap_or(0);
        if used + w > room {
            break;
        }
        if cells[index].0 == ' ' && index > start {
            last_space = Some(index);
        }
        used += w;
        index += 1;
    }
    if index >= cells.len() {
        return (cells.len(), cells.len());
    }
    // Never an empty row: a character wider than the room still goes on a row of its own.
    if index == start {
        return (start + 1, start + 1);
    }
    if cells[index].0 == ' ' {
        return (index, index + 1);
    }
    match last_space {
        Some(space) => (space, space + 1),
        None => (index, index),
    }
}

/// Runs of equally styled characters back into spans.
fn merge(cells: &[(char, Style)]) -> Vec<Span<'static>> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut text = String::new();
    let mut current: Option<Style> = None;
    for &(c, style) in cells {
        if current != Some(style) {
            if let Some(previous) = current {
                spans.push(Span::styled(std::mem::take(&mut text), previous));
            }
            current = Some(style);
        }
        text.push(c);
    }
    if let Some(style) = current {
        spans.push(Span::styled(text, style));
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|line| line.to_string()).collect()
    }

    #[test]
    fn escape_codes_and_control_characters_are_removed() {
        assert_eq!(
            sanitize("\x1b[31merror\x1b[0m: bad\r\n\tnext\x07"),
            "error: bad\n    next"
        );
        assert_eq!(sanitize("\x1b]0;title\x07text"), "text");
    }

    #[test]
    fn long_lines_break_at_spaces_and_keep_their_hang() {
        let line = Line::from("• the quick brown fox jumps over the lazy dog");
        let rows = wrap_line(line, 20, 2);
        assert_eq!(
            texts(&rows),
            ["• the quick brown", "  fox jumps over the", "  lazy dog"]
        );
    }

    #[test]
    fn words_longer_than_the_width_are_cut() {
        let rows = wrap_line(Line::from("abcdefghijkl"), 5, 0);
        assert_eq!(texts(&rows), ["abcde", "fghij", "kl"]);
    }

    #[test]
    fn styles_survive_wrapping() {
        let bold = Style::new().bold();
        let line = Line::from(vec![Span::raw("plain "), Span::styled("bold words", bold)]);
        let rows = wrap_line(line, 11, 0);
        assert_eq!(texts(&rows), ["plain bold", "words"]);
        assert_eq!(rows[1].spans[0].style, bold);
    }

    #[test]
    fn wide_characters_count_double() {
        assert_eq!(width("日本"), 4);
        let rows = wrap_line(Line::from("日本語の文"), 4, 0);
        assert_eq!(texts(&rows), ["日本", "語の", "文"]);
    }
}

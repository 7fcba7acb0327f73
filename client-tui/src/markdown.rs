//! The model's Markdown as terminal lines: headings, emphasis, inline code, fenced code blocks,
//! lists (nested, numbered, task lists), block quotes, links, rules and tables (drawn as a grid
//! that fits the width, cells cut with `…` when it cannot). It is rendered again on
//! every frame an answer grows, so a half-streamed answer (an unclosed fence, a list being
//! written) must look right too; pulldown-cmark treats an unclosed fence as running to the end.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use crate::highlight;
use crate::wrap::{self, sanitize};

pub const CODE_STYLE: Style = Style::new().fg(Color::LightYellow);
const INLINE_CODE_STYLE: Style = Style::new().fg(Color::Cyan);
const GUTTER_STYLE: Style = Style::new().fg(Color::DarkGray);
const LINK_STYLE: Style = Style::new()
    .fg(Color::Blue)
    .add_modifier(Modifier::UNDERLINED);
const RULE_WIDTH: usize = 40;

/// Renders `text` wrapped to `width` columns.
pub fn render(text: &str, width: usize) -> Vec<Line<'static>> {
    let text = sanitize(text);
    let options =
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS | Options::ENABLE_TABLES;
    let mut renderer = Renderer::new(width);
    for event in Parser::new_ext(&text, options) {
        renderer.event(event);
    }
    renderer.finish()
}

struct Renderer {
    width: usize,
    out: Vec<Line<'static>>,
    spans: Vec<Span<'static>>,
    styles: Vec<Style>,
    quote_depth: usize,
    /// One entry per open list: the next number of an ordered list, `None` for bullets.
    lists: Vec<Option<u64>>,
    /// The widths of the markers of the open list items: the indentation of their text.
    item_indents: Vec<usize>,
    /// The marker the next line starts with, at the beginning of a list item.
    marker: Option<String>,
    /// Inside a fenced or indented code block: the text gathered so far.
    code: Option<String>,
    /// The fence's info string (`rust`), which picks the colours.
    code_language: String,
    link: Option<String>,
    /// A blank line is due before the next block.
    gap: bool,
    /// Inside a table: its cells so far.
    table: Option<Table>,
}

/// A table being read: each cell's spans, row by row, the header row first.
struct Table {
    alignments: Vec<Alignment>,
    rows: Vec<Vec<Vec<Span<'static>>>>,
}

/// The narrowest a column is cut to when the table does not fit.
const NARROWEST_COLUMN: usize = 3;
const COLUMN_SEPARATOR: &str = " │ ";

impl Renderer {
    fn new(width: usize) -> Self {
        Self {
            width,
            out: Vec::new(),
            spans: Vec::new(),
            styles: vec![Style::new()],
            quote_depth: 0,
            lists: Vec::new(),
            item_indents: Vec::new(),
            marker: None,
            code: None,
            code_language: String::new(),
            link: None,
            gap: false,
            table: None,
        }
    }

    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, add: Style) {
        let style = self.style().patch(add);
        self.styles.push(style);
    }

    fn pop_style(&mut self) {
        if self.styles.len() > 1 {
            self.styles.pop();
        }
    }

    fn start_block(&mut self) {
        self.flush();
        if self.gap && !self.out.is_empty() {
            self.out.push(Line::default());
        }
        self.gap = false;
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => match &mut self.code {
                Some(code) => code.push_str(&text),
                None => self.text(&text),
            },
            Event::Code(code) => {
                let style = self.style().patch(INLINE_CODE_STYLE);
                self.spans.push(Span::styled(code.to_string(), style));
            }
            Event::SoftBreak | Event::HardBreak => self.flush(),
            Event::Rule => {
                self.start_block();
                let rule = "─".repeat(RULE_WIDTH.min(self.width));
                self.out.push(Line::styled(rule, GUTTER_STYLE));
                self.gap = true;
            }
            Event::TaskListMarker(done) => {
                let mark = if done { "[x] " } else { "[ ] " };
                self.spans.push(Span::styled(mark, self.style()));
            }
            Event::Html(html) | Event::InlineHtml(html) => self.text(&html),
            Event::InlineMath(math) | Event::DisplayMath(math) => self.text(&math),
            Event::FootnoteReference(name) => self.text(&format!("[^{name}]")),
        }
    }

    fn text(&mut self, text: &str) {
        // Text may carry newlines (HTML blocks); each one ends a line.
        let mut parts = text.split('\n');
        if let Some(first) = parts.next() {
            self.spans
                .push(Span::styled(first.to_owned(), self.style()));
        }
        for part in parts {
            self.flush();
            self.spans.push(Span::styled(part.to_owned(), self.style()));
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.start_block(),
            Tag::Heading { level, .. } => {
                self.start_block();
                let style = match level {
                    pulldown_cmark::HeadingLevel::H1 => Style::new()
                        .add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
                        .fg(Color::Magenta),
                    pulldown_cmark::HeadingLevel::H2 => {
                        Style::new().add_modifier(Modifier::BOLD).fg(Color::Magenta)
                    }
                    _ => Style::new().add_modifier(Modifier::BOLD),
                };
                self.push_style(style);
            }
            Tag::BlockQuote(_) => {
                self.start_block();
                self.quote_depth += 1;
                self.push_style(Style::new().add_modifier(Modifier::ITALIC));
            }
            Tag::CodeBlock(kind) => {
                self.start_block();
                self.code = Some(String::new());
                self.code_language = match kind {
                    CodeBlockKind::Fenced(info) => info.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.start_block();
                } else {
                    self.flush();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let marker = match self.lists.last_mut() {
                    Some(Some(number)) => {
                        let marker = format!("{number}. ");
                        *number += 1;
                        marker
                    }
                    _ => "• ".to_owned(),
                };
                self.item_indents.push(wrap::width(&marker));
                self.marker = Some(marker);
            }
            Tag::Emphasis => self.push_style(Style::new().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(Style::new().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => {
                self.push_style(Style::new().add_modifier(Modifier::CROSSED_OUT));
            }
            Tag::Link { dest_url, .. } => {
                self.link = Some(dest_url.to_string());
                self.push_style(LINK_STYLE);
            }
            Tag::Table(alignments) => {
                self.start_block();
                self.table = Some(Table {
                    alignments,
                    rows: Vec::new(),
                });
            }
            Tag::TableHead => {
                self.push_style(Style::new().add_modifier(Modifier::BOLD));
                self.start_row();
            }
            Tag::TableRow => self.start_row(),
            Tag::TableCell => self.spans.clear(),
            _ => {}
        }
    }

    fn start_row(&mut self) {
        if let Some(table) = &mut self.table {
            table.rows.push(Vec::new());
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::Heading(_) => {
                if matches!(tag, TagEnd::Heading(_)) {
                    self.pop_style();
                }
                self.flush();
                self.gap = true;
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.pop_style();
                self.quote_depth = self.quote_depth.saturating_sub(1);
                self.gap = true;
            }
            TagEnd::CodeBlock => {
                let code = self.code.take().unwrap_or_default();
                let code = code.strip_suffix('\n').unwrap_or(&code);
                let coloured = highlight::code_block(code, &self.code_language);
                for (index, line) in code.split('\n').enumerate() {
                    let mut spans = vec![Span::styled("│ ", GUTTER_STYLE)];
                    match coloured.as_ref().and_then(|lines| lines.get(index)) {
                        Some(pieces) => spans.extend(
                            pieces
                                .iter()
                                .map(|(style, text)| Span::styled(text.clone(), *style)),
                        ),
                        None => spans.push(Span::styled(line.to_owned(), CODE_STYLE)),
                    }
                    let line = self.prefixed(spans);
                    let hang = self.indent() + 2;
                    self.out.extend(wrap::wrap_line(line, self.width, hang));
                }
                self.gap = true;
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.gap = true;
                }
            }
            TagEnd::Item => {
                self.flush();
                self.item_indents.pop();
                self.marker = None;
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.pop_style(),
            TagEnd::TableHead => self.pop_style(),
            TagEnd::TableCell => {
                let cell = std::mem::take(&mut self.spans);
                if let Some(row) = self.table.as_mut().and_then(|table| table.rows.last_mut()) {
                    row.push(cell);
                }
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    self.draw_table(&table);
                }
                self.gap = true;
            }
            TagEnd::Link => {
                self.pop_style();
                if let Some(url) = self.link.take() {
                    let shown: String = self.spans.iter().map(|s| s.content.as_ref()).collect();
                    if !shown.ends_with(url.as_str()) {
                        self.spans
                            .push(Span::styled(format!(" ({url})"), GUTTER_STYLE));
                    }
                }
            }
            _ => {}
        }
    }

    /// The table as a grid: columns as wide as their widest cell, narrowed (widest first) until
    /// the table fits, the header underlined by a rule.
    fn draw_table(&mut self, table: &Table) {
        let columns = table.rows.iter().map(Vec::len).max().unwrap_or(0);
        if columns == 0 {
            return;
        }
        let mut widths = vec![0; columns];
        for row in &table.rows {
            for (column, cell) in row.iter().enumerate() {
                widths[column] = widths[column].max(spans_width(cell));
            }
        }
        let separators = wrap::width(COLUMN_SEPARATOR) * (columns - 1);
        let room = self.width.saturating_sub(self.indent() + separators);
        while widths.iter().sum::<usize>() > room {
            let Some(widest) = widths
                .iter_mut()
                .filter(|width| **width > NARROWEST_COLUMN)
                .max_by_key(|width| **width)
            else {
                break;
            };
            *widest -= 1;
        }
        for (index, row) in table.rows.iter().enumerate() {
            let mut spans = Vec::new();
            for (column, width) in widths.iter().enumerate() {
                if column > 0 {
                    spans.push(Span::styled(COLUMN_SEPARATOR, GUTTER_STYLE));
                }
                let cell = row.get(column).map_or(&[][..], Vec::as_slice);
                let align = table
                    .alignments
                    .get(column)
                    .copied()
                    .unwrap_or(Alignment::None);
                spans.extend(fit(cell, *width, align));
            }
            let line = self.prefixed(spans);
            self.out.push(line);
            if index == 0 {
                let rule: Vec<String> = widths.iter().map(|width| "─".repeat(*width)).collect();
                let line = self.prefixed(vec![Span::styled(rule.join("─┼─"), GUTTER_STYLE)]);
                self.out.push(line);
            }
        }
    }

    /// Columns taken by block quote bars and list indentation.
    fn indent(&self) -> usize {
        self.quote_depth * 2 + self.item_indents.iter().sum::<usize>()
    }

    /// `spans` behind the quote bars and the list indentation (or the item's marker, once).
    fn prefixed(&self, spans: Vec<Span<'static>>) -> Line<'static> {
        let mut line = Vec::with_capacity(spans.len() + 2);
        for _ in 0..self.quote_depth {
            line.push(Span::styled("▎ ", GUTTER_STYLE));
        }
        let indent: usize = self.item_indents.iter().sum();
        match &self.marker {
            Some(marker) => {
                let before = indent.saturating_sub(wrap::width(marker));
                line.push(Span::raw(format!("{}{marker}", " ".repeat(before))));
            }
            None if indent > 0 => line.push(Span::raw(" ".repeat(indent))),
            None => {}
        }
        line.extend(spans);
        Line::from(line)
    }

    /// Ends the line being built, if it has anything (or a list marker waits to be shown).
    fn flush(&mut self) {
        if self.spans.is_empty() && self.marker.is_none() {
            return;
        }
        let spans = std::mem::take(&mut self.spans);
        let line = self.prefixed(spans);
        self.marker = None;
        let hang = self.indent();
        self.out.extend(wrap::wrap_line(line, self.width, hang));
    }

    fn finish(mut self) -> Vec<Line<'static>> {
        self.flush();
        while self.out.last().is_some_and(|line| line.width() == 0) {
            self.out.pop();
        }
        self.out
    }
}

fn spans_width(spans: &[Span<'_>]) -> usize {
    spans.iter().map(|span| wrap::width(&span.content)).sum()
}

/// A cell's spans in exactly `width` columns: padded as the column is aligned, or cut with `…`.
fn fit(cell: &[Span<'static>], width: usize, align: Alignment) -> Vec<Span<'static>> {
    let used = spans_width(cell);
    if used > width {
        let mut out = Vec::new();
        let mut left = width.saturating_sub(1);
        for span in cell {
            let mut kept = String::new();
            for c in span.content.chars() {
                let c_width = wrap::width(c.encode_utf8(&mut [0; 4]));
                if c_width > left {
                    break;
                }
                left -= c_width;
                kept.push(c);
            }
            let full = kept.len() == span.content.len();
            out.push(Span::styled(kept, span.style));
            if !full {
                break;
            }
        }
        out.push(Span::styled(format!("{}…", " ".repeat(left)), GUTTER_STYLE));
        return out;
    }
    let spare = width - used;
    let (before, after) = match align {
        Alignment::Right => (spare, 0),
        Alignment::Center => (spare / 2, spare - spare / 2),
        Alignment::Left | Alignment::None => (0, spare),
    };
    let mut out = Vec::with_capacity(cell.len() + 2);
    if before > 0 {
        out.push(Span::raw(" ".repeat(before)));
    }
    out.extend(cell.iter().cloned());
    if after > 0 {
        out.push(Span::raw(" ".repeat(after)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(text: &str, width: usize) -> Vec<String> {
        render(text, width)
            .iter()
            .map(|line| line.to_string())
            .collect()
    }

    #[test]
    fn paragraphs_are_separated_and_wrapped() {
        assert_eq!(
            plain("First paragraph here.\n\nSecond one, which is long.", 16),
            [
                "First paragraph",
                "here.",
                "",
                "Second one,",
                "which is long."
            ]
        );
    }

    #[test]
    fn code_blocks_keep_their_lines_behind_a_gutter() {
        let text = "Run:\n\n```rust\nfn main() {\n    go();\n}\n```\nDone.";
        assert_eq!(
            plain(text, 40),
            [
                "Run:",
                "",
                "│ fn main() {",
                "│     go();",
                "│ }",
                "",
                "Done."
            ]
        );
        // A fence in a known language is coloured; one without is in the code colour.
        let lines = render(text, 40);
        assert_eq!(lines[2].spans[1].content, "fn");
        assert_eq!(lines[2].spans[1].style.fg, Some(Color::Blue));
        let lines = render("```\nfn main() {}\n```", 40);
        assert_eq!(lines[0].spans[1].style, CODE_STYLE);
    }

    #[test]
    fn an_unclosed_fence_while_streaming_is_still_code() {
        assert_eq!(
            plain("```\nlet x = 1;\nlet y", 40),
            ["│ let x = 1;", "│ let y"]
        );
    }

    #[test]
    fn nested_and_numbered_lists_indent() {
        let text = "1. one\n2. two has a long text\n   - inner\n- [x] done";
        assert_eq!(
            plain(text, 16),
            [
                "1. one",
                "2. two has a",
                "   long text",
                "   • inner",
                "",
                "• [x] done"
            ]
        );
    }

    #[test]
    fn inline_styles_headings_links_and_quotes() {
        let lines = render(
            "# Title\n\nSome **bold** and `code` [docs](https://x.test).\n\n> quoted",
            60,
        );
        let texts: Vec<String> = lines.iter().map(|line| line.to_string()).collect();
        assert_eq!(
            texts,
            [
                "Title",
                "",
                "Some bold and code docs (https://x.test).",
                "",
                "▎ quoted"
            ]
        );
        let bold = lines[2]
            .spans
            .iter()
            .find(|span| span.content == "bold")
            .unwrap();
        assert!(bold.style.add_modifier.contains(Modifier::BOLD));
        let code = lines[2]
            .spans
            .iter()
            .find(|span| span.content == "code")
            .unwrap();
        assert_eq!(code.style, INLINE_CODE_STYLE);
    }

    #[test]
    fn tables_are_drawn_as_a_grid_with_aligned_columns() {
        let text = "Prices:\n\n| Item | Price | Note |\n|:-----|------:|:----:|\n| apple | 1.20 | ok |\n| watermelon | 12.00 | heavy |\n\nDone.";
        assert_eq!(
            plain(text, 60),
            [
                "Prices:",
                "",
                "Item       │ Price │ Note ",
                "───────────┼───────┼──────",
                "apple      │  1.20 │  ok  ",
                "watermelon │ 12.00 │ heavy",
                "",
                "Done.",
            ]
        );
    }

    #[test]
    fn a_table_wider_than_the_screen_cuts_its_widest_cells() {
        let text =
            "| name | what it does |\n|---|---|\n| a | a very long description of the thing |";
        let lines = plain(text, 24);
        assert!(
            lines.iter().all(|line| wrap::width(line) <= 24),
            "{lines:#?}"
        );
        assert_eq!(lines[2], "a    │ a very long desc…");
    }
}

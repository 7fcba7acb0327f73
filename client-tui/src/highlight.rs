//! Syntax colours for code blocks and diffs, from syntect's bundled Sublime grammars. The
//! colours are the terminal's own sixteen (a theme of ANSI colours written here, not an RGB
//! theme), so code reads on a light or a dark terminal alike. Code is highlighted again while
//! it streams, so only blocks of bounded size are: a bigger one is shown plain.

use std::str::FromStr;
use std::sync::LazyLock;

use ratatui::style::{Color, Modifier, Style};
use syntect::easy::HighlightLines;
use syntect::highlighting::{
    Color as ThemeColor, FontStyle, ScopeSelectors, StyleModifier, Theme, ThemeItem, ThemeSettings,
};
use syntect::parsing::{SyntaxReference, SyntaxSet};
use syntect::util::LinesWithEndings;

/// Code longer than this is shown plain: highlighting it on every streamed frame would cost
/// more than it gives.
const MAX_LINES: usize = 400;
const MAX_BYTES: usize = 32 * 1024;
/// A line this long (minified code, data) is not highlighted: backtracking regexes slow down.
const MAX_LINE_BYTES: usize = 1000;

/// The grammars, unpacked once (a few tens of milliseconds: [`warm_up`] does it early).
static SYNTAXES: LazyLock<SyntaxSet> = LazyLock::new(SyntaxSet::load_defaults_newlines);
static THEME: LazyLock<Theme> = LazyLock::new(ansi_theme);

/// Unpacks the grammars, so that the first code block does not wait for them. Blocking.
pub fn warm_up() {
    LazyLock::force(&SYNTAXES);
}

/// A theme colour that stands for the terminal's ANSI colour `index` (syntect's themes are RGB;
/// alpha 0 marks the ones meant as palette entries, as bat does).
const fn ansi(index: u8) -> ThemeColor {
    ThemeColor {
        r: index,
        g: 0,
        b: 0,
        a: 0,
    }
}

/// The text's own colour: no colour set.
const PLAIN: ThemeColor = ThemeColor {
    r: 0,
    g: 0,
    b: 0,
    a: 1,
};

fn ansi_theme() -> Theme {
    let items: [(&str, u8, Option<FontStyle>); 12] = [
        ("comment", 8, Some(FontStyle::ITALIC)),
        ("string, constant.character", 2, None),
        ("constant.numeric, constant.language", 5, None),
        ("keyword, storage.modifier", 5, Some(FontStyle::BOLD)),
        ("storage.type", 4, Some(FontStyle::BOLD)),
        (
            "entity.name.function, support.function, meta.function-call",
            6,
            None,
        ),
        (
            "entity.name.type, entity.name.class, support.type, support.class",
            3,
            None,
        ),
        ("entity.name.tag", 4, None),
        (
            "entity.other.attribute-name, variable.other.member",
            6,
            None,
        ),
        ("markup.heading", 5, Some(FontStyle::BOLD)),
        ("markup.inserted", 2, None),
        ("markup.deleted", 1, None),
    ];
    let scopes = items
        .into_iter()
        .filter_map(|(selector, color, font_style)| {
            Some(ThemeItem {
                scope: ScopeSelectors::from_str(selector).ok()?,
                style: StyleModifier {
                    foreground: Some(ansi(color)),
                    background: None,
                    font_style,
                },
            })
        })
        .collect();
    Theme {
        name: None,
        author: None,
        settings: ThemeSettings {
            foreground: Some(PLAIN),
            ..ThemeSettings::default()
        },
        scopes,
    }
}

fn color(color: ThemeColor) -> Option<Color> {
    if color.a != 0 {
        return None;
    }
    Some(match color.r {
        1 => Color::Red,
        2 => Color::Green,
        3 => Color::Yellow,
        4 => Color::Blue,
        5 => Color::Magenta,
        6 => Color::Cyan,
        8 => Color::DarkGray,
        _ => return None,
    })
}

fn style(style: syntect::highlighting::Style) -> Style {
    let mut out = Style::new();
    if let Some(fg) = color(style.foreground) {
        out = out.fg(fg);
    }
    if style.font_style.contains(FontStyle::BOLD) {
        out = out.add_modifier(Modifier::BOLD);
    }
    if style.font_style.contains(FontStyle::ITALIC) {
        out = out.add_modifier(Modifier::ITALIC);
    }
    out
}

/// The grammar a fence's info string (`rust`, `py`, `sh {.line-numbers}`) names.
fn syntax_for_fence(info: &str) -> Option<&'static SyntaxReference> {
    let token = info.split([' ', ',', '{']).next()?.trim();
    if token.is_empty() {
        return None;
    }
    SYNTAXES.find_syntax_by_token(token)
}

/// The grammar for a file, by its extension (or its name: `Makefile`).
fn syntax_for_path(path: &str) -> Option<&'static SyntaxReference> {
    let name = path.rsplit('/').next()?;
    let extension = name
        .rsplit_once('.')
        .map_or(name, |(_, extension)| extension);
    SYNTAXES.find_syntax_by_extension(extension)
}

/// Each line of `code` as styled pieces, when the fence names a known language and the code is
/// small enough; `None` shows it plain.
pub fn code_block(code: &str, info: &str) -> Option<Vec<Vec<(Style, String)>>> {
    highlight(code, syntax_for_fence(info)?)
}

/// Lines of the file `path` (a diff's), highlighted as the file's language, each on its own:
/// a diff's lines are not contiguous, so each line starts from a fresh state.
pub fn file_line(line: &str, path: &str) -> Option<Vec<(Style, String)>> {
    let syntax = syntax_for_path(path)?;
    highlight(line, syntax)?.into_iter().next()
}

fn highlight(code: &str, syntax: &SyntaxReference) -> Option<Vec<Vec<(Style, String)>>> {
    if code.len() > MAX_BYTES
        || code.lines().count() > MAX_LINES
        || code.lines().any(|line| line.len() > MAX_LINE_BYTES)
    {
        return None;
    }
    let mut highlighter = HighlightLines::new(syntax, &THEME);
    let mut lines = Vec::new();
    for line in LinesWithEndings::from(code) {
        let pieces = highlighter.highlight_line(line, &SYNTAXES).ok()?;
        let pieces: Vec<(Style, String)> = pieces
            .into_iter()
            .map(|(piece_style, text)| (style(piece_style), text.trim_end_matches('\n').to_owned()))
            .filter(|(_, text)| !text.is_empty())
            .collect();
        lines.push(pieces);
    }
    Some(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn colour_of(line: &[(Style, String)], text: &str) -> Option<Color> {
        line.iter()
            .find(|(_, piece)| piece.contains(text))
            .and_then(|(style, _)| style.fg)
    }

    #[test]
    fn a_known_language_is_coloured_by_its_grammar() {
        let code = "// total\nfn total(n: u32) -> u32 {\n    let s = \"x\";\n    n + 1\n}\n";
        let lines = code_block(code, "rust").unwrap();
        assert_eq!(lines.len(), 5);
        assert_eq!(colour_of(&lines[0], "total"), Some(Color::DarkGray));
        assert_eq!(colour_of(&lines[1], "fn"), Some(Color::Blue));
        assert_eq!(colour_of(&lines[1], "total"), Some(Color::Cyan));
        assert_eq!(colour_of(&lines[2], "x"), Some(Color::Green));
        assert_eq!(colour_of(&lines[3], "1"), Some(Color::Magenta));
        let text: Vec<String> = lines
            .iter()
            .map(|line| line.iter().map(|(_, piece)| piece.as_str()).collect())
            .collect();
        assert_eq!(text.join("\n") + "\n", code, "no text is lost or added");
    }

    #[test]
    fn unknown_languages_and_big_blocks_stay_plain() {
        assert!(code_block("x", "").is_none());
        assert!(code_block("x", "no-such-language").is_none());
        assert!(code_block("print(1)", "py {.numbers}").is_some());
        let big = "let x = 1;\n".repeat(MAX_LINES + 1);
        assert!(code_block(&big, "rust").is_none());
        let wide = format!("let x = \"{}\";", "a".repeat(MAX_LINE_BYTES));
        assert!(code_block(&wide, "rust").is_none());
    }

    #[test]
    fn a_diff_line_is_coloured_by_its_file() {
        let line = file_line("    println!(\"edited\");", "src/main.rs").unwrap();
        assert_eq!(colour_of(&line, "edited"), Some(Color::Green));
        assert!(file_line("anything", "notes.unknownext").is_none());
    }
}

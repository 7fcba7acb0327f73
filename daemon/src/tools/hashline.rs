//! Line anchors (SPEC §7.1): every displayed line is `{line}:{hash}|{content}`, and an edit names
//! the line by number and hash, so it only lands on the line the model actually saw.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

const BASE36_DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
const HASH_LEN: usize = 3;
const HASH_SPACE: u64 = 36 * 36 * 36;

/// A line named by its 1-based number and its hash, as the model writes it: `12:a3f`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub line: usize,
    pub hash: String,
}

/// The line's content without its `\n` and without a trailing `\r`: what is hashed and shown.
pub fn line_content(line: &str) -> &str {
    let line = line.strip_suffix('\n').unwrap_or(line);
    line.strip_suffix('\r').unwrap_or(line)
}

/// The 3-character base-36 hash of a line (SPEC §7.1).
pub fn line_hash(line: &str) -> String {
    let digits = hash_digits(line_content(line));
    digits.iter().map(|&digit| char::from(digit)).collect()
}

fn hash_digits(content: &str) -> [u8; HASH_LEN] {
    let digest = Sha256::digest(content.as_bytes());
    let mut prefix = [0u8; 8];
    prefix.copy_from_slice(&digest[..8]);
    let mut value = u64::from_be_bytes(prefix) % HASH_SPACE;
    let mut digits = [b'0'; HASH_LEN];
    for slot in digits.iter_mut().rev() {
        *slot = BASE36_DIGITS[(value % 36) as usize];
        value /= 36;
    }
    digits
}

/// `{number}:{hash}|{content}`, the line's terminator left out.
pub fn format_line(number: usize, line: &str) -> String {
    let mut out = String::new();
    push_formatted_line(&mut out, number, line);
    out
}

/// [`format_line`] appended to a buffer, so that a whole file is formatted without a String per
/// line. Nothing is written after the content: the caller adds the separator.
pub fn push_formatted_line(out: &mut String, number: usize, line: &str) {
    push_anchor_prefix(out, number, line);
    out.push_str(line_content(line));
}

/// Only the `{number}:{hash}|` part, for callers that show a shortened content.
pub fn push_anchor_prefix(out: &mut String, number: usize, line: &str) {
    let digits = hash_digits(line_content(line));
    // Writing into a String cannot fail.
    let _ = write!(out, "{number}:");
    out.extend(digits.iter().map(|&digit| char::from(digit)));
    out.push('|');
}

/// Whether `text` has the shape of a hash: three characters of `0-9a-z`.
pub fn is_hash(text: &str) -> bool {
    text.len() == HASH_LEN
        && text
            .bytes()
            .all(|byte| byte.is_ascii_digit() || byte.is_ascii_lowercase())
}

/// Parses `12:a3f`, also when the model pasted the rest of the displayed line (`12:a3f|...`).
pub fn parse_anchor(text: &str) -> Option<Anchor> {
    let text = text.trim();
    let anchor = text.split_once('|').map_or(text, |(anchor, _)| anchor);
    let (number, hash) = anchor.split_once(':')?;
    let line = parse_line_number(number)?;
    is_hash(hash).then(|| Anchor {
        line,
        hash: hash.to_owned(),
    })
}

/// Splits a displayed line `12:a3f|content` into its anchor and its content.
pub fn parse_formatted_line(text: &str) -> Option<(Anchor, &str)> {
    let (number, rest) = text.split_once(':')?;
    let line = parse_line_number(number)?;
    let hash = rest.get(..HASH_LEN).filter(|hash| is_hash(hash))?;
    let content = rest.get(HASH_LEN..)?.strip_prefix('|')?;
    Some((
        Anchor {
            line,
            hash: hash.to_owned(),
        },
        content,
    ))
}

fn parse_line_number(text: &str) -> Option<usize> {
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Removes `N:HHH|` prefixes the model copied from a read into text it wants written. Only when
/// every non-empty line carries one: a single line without it means the prefixes are real content.
pub fn strip_echoed_prefixes(text: &str) -> String {
    let mut saw_prefix = false;
    for line in text.split('\n') {
        if line_content(line).is_empty() {
            continue;
        }
        if parse_formatted_line(line).is_none() {
            return text.to_owned();
        }
        saw_prefix = true;
    }
    if !saw_prefix {
        return text.to_owned();
    }
    let mut stripped = String::with_capacity(text.len());
    for (index, line) in text.split('\n').enumerate() {
        if index > 0 {
            stripped.push('\n');
        }
        match parse_formatted_line(line) {
            Some((_, content)) => stripped.push_str(content),
            None => stripped.push_str(line),
        }
    }
    stripped
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn hash_matches_independently_computed_values() {
        // Computed with Python's hashlib from the SPEC §7.1 definition.
        assert_eq!(line_hash(""), "3tg");
        assert_eq!(line_hash("fn main() {"), "hfc");
        assert_eq!(line_hash("hello world\r\n"), "n60");
    }

    #[test]
    fn empty_line_has_a_stable_hash() {
        assert_eq!(line_hash(""), line_hash("\n"));
        assert_eq!(line_hash(""), line_hash("\r\n"));
        assert!(is_hash(&line_hash("")));
    }

    #[test]
    fn format_line_shows_number_hash_and_content_without_terminator() {
        let hash = line_hash("let x = 1;");
        assert_eq!(
            format_line(12, "let x = 1;\r\n"),
            format!("12:{hash}|let x = 1;")
        );
    }

    #[test]
    fn anchors_parse_with_or_without_the_content() {
        let expected = Some(Anchor {
            line: 12,
            hash: "a3f".to_owned(),
        });
        assert_eq!(parse_anchor("12:a3f"), expected);
        assert_eq!(parse_anchor(" 12:a3f|let x = 1;"), expected);
    }

    #[test]
    fn malformed_anchors_are_rejected() {
        for text in [
            "", "12", "a3f", "12:A3F", "12:a3", "12:a3fx", "-1:a3f", "x:a3f", ":a3f",
        ] {
            assert_eq!(parse_anchor(text), None, "{text:?}");
        }
    }

    #[test]
    fn text_with_a_line_lacking_a_prefix_is_left_alone() {
        let text = "1:abc|first\nsecond";
        assert_eq!(strip_echoed_prefixes(text), text);
    }

    #[test]
    fn text_without_prefixes_is_left_alone() {
        assert_eq!(strip_echoed_prefixes("a: b|c\n\n"), "a: b|c\n\n");
        assert_eq!(strip_echoed_prefixes("\n"), "\n");
    }

    #[test]
    fn echoed_prefixes_are_stripped_around_blank_lines() {
        assert_eq!(
            strip_echoed_prefixes("3:abc|fn f() {\n\n4:x1z|}\n"),
            "fn f() {\n\n}\n"
        );
    }

    proptest! {
        #[test]
        fn hash_is_three_base36_characters(line in any::<String>()) {
            let hash = line_hash(&line);
            prop_assert!(is_hash(&hash), "{hash:?}");
        }

        #[test]
        fn trailing_carriage_return_and_newline_do_not_change_the_hash(line in "[^\r\n]*") {
            let hash = line_hash(&line);
            prop_assert_eq!(&line_hash(&format!("{line}\r")), &hash);
            prop_assert_eq!(&line_hash(&format!("{line}\n")), &hash);
            prop_assert_eq!(&line_hash(&format!("{line}\r\n")), &hash);
        }

        #[test]
        fn format_then_parse_round_trips(number in 1usize..10_000_000, line in "[^\r\n]*") {
            let formatted = format_line(number, &line);
            let (anchor, content) = parse_formatted_line(&formatted).ok_or_else(|| {
                TestCaseError::fail(format!("unparsable: {formatted:?}"))
            })?;
            prop_assert_eq!(anchor.line, number);
            prop_assert_eq!(anchor.hash, line_hash(&line));
            prop_assert_eq!(content, line.as_str());
        }

        #[test]
        fn stripping_echoed_lines_restores_the_text(
            lines in prop::collection::vec("[^\r\n]*", 1..20),
        ) {
            let echoed: Vec<String> = lines
                .iter()
                .enumerate()
                .map(|(index, line)| format_line(index + 1, line))
                .collect();
            prop_assert_eq!(strip_echoed_prefixes(&echoed.join("\n")), lines.join("\n"));
        }
    }
}

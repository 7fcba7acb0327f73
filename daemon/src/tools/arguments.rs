//! The model's argument text made into JSON where the repair is unambiguous, as local and open
//! models need every day: a Markdown fence around the object, trailing commas, single-quoted
//! strings, an object sent as a JSON string. Arguments cut off at the output limit are never
//! completed (a half-written file would be written as if whole): the model is told instead.

use std::borrow::Cow;

/// One thing changed to make the arguments parse, as the model is told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    CodeFence,
    TrailingCommas,
    SingleQuotes,
    /// The object came as a JSON string holding it.
    QuotedObject,
}

impl Repair {
    fn describe(self) -> &'static str {
        match self {
            Self::CodeFence => "a Markdown code fence around the object",
            Self::TrailingCommas => "trailing commas",
            Self::SingleQuotes => "single-quoted strings",
            Self::QuotedObject => "the object sent as a quoted string",
        }
    }
}

/// Argument text ready for the tool's parser, and what was repaired to get it.
#[derive(Debug, PartialEq, Eq)]
pub struct Normalised<'a> {
    pub text: Cow<'a, str>,
    pub repairs: Vec<Repair>,
}

impl Normalised<'_> {
    /// A line for the model after the result, so it learns to send valid JSON; `None` when
    /// nothing was repaired.
    pub fn note(&self) -> Option<String> {
        if self.repairs.is_empty() {
            return None;
        }
        let what: Vec<&str> = self
            .repairs
            .iter()
            .map(|repair| repair.describe())
            .collect();
        Some(format!(
            "[cwcode: your arguments were not valid JSON ({}); they were repaired. Send plain JSON next time.]",
            what.join(", ")
        ))
    }
}

/// Arguments that are not JSON and cannot be repaired without guessing.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgumentsError {
    #[error(
        "the arguments end in the middle, after {length} bytes (`…{tail}`): the answer was probably cut at the output limit. Nothing was run. Send a smaller call, for a large file a short write_file then edits"
    )]
    CutOff { length: usize, tail: String },
    #[error("the arguments are not valid JSON ({reason}) near `{near}`")]
    Invalid { reason: String, near: String },
}

/// The text to parse: as sent when it is JSON, repaired when that is unambiguous, else why not.
pub fn normalise(text: &str) -> Result<Normalised<'_>, ArgumentsError> {
    if text.trim().is_empty() {
        // Models send `""` for a call without arguments.
        return Ok(Normalised {
            text: Cow::Borrowed("{}"),
            repairs: Vec::new(),
        });
    }
    let original = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::String(inner)) if is_object(&inner) => {
            return Ok(Normalised {
                text: Cow::Owned(inner),
                repairs: vec![Repair::QuotedObject],
            });
        }
        Ok(_) => {
            return Ok(Normalised {
                text: Cow::Borrowed(text),
                repairs: Vec::new(),
            });
        }
        Err(error) => error,
    };
    let mut repairs = Vec::new();
    let mut candidate = text.trim();
    if let Some(inner) = without_fence(candidate) {
        repairs.push(Repair::CodeFence);
        candidate = inner;
    }
    let rewritten = rewrite(candidate);
    repairs.extend(rewritten.repairs);
    match serde_json::from_str::<serde_json::Value>(&rewritten.text) {
        Ok(_) => Ok(Normalised {
            text: Cow::Owned(rewritten.text),
            repairs,
        }),
        Err(error) if error.is_eof() => Err(ArgumentsError::CutOff {
            length: text.len(),
            tail: tail(text, 60).to_owned(),
        }),
        Err(_) => Err(ArgumentsError::Invalid {
            reason: original.to_string(),
            near: near(text, original.line(), original.column()),
        }),
    }
}

fn is_object(text: &str) -> bool {
    text.trim_start().starts_with('{')
        && serde_json::from_str::<serde_json::Value>(text).is_ok_and(|value| value.is_object())
}

/// The inside of a ```` ```json … ``` ```` fence.
fn without_fence(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("```")?;
    let body = &rest[rest.find('\n')? + 1..];
    Some(body.trim_end().strip_suffix("```")?.trim())
}

struct Rewritten {
    text: String,
    repairs: Vec<Repair>,
}

/// One pass outside and inside strings: commas before a closing bracket dropped, single-quoted
/// strings made double-quoted (their `"` escaped, their `\'` unescaped).
fn rewrite(text: &str) -> Rewritten {
    #[derive(PartialEq)]
    enum In {
        Code,
        Double { escaped: bool },
        Single { escaped: bool },
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut state = In::Code;
    let mut commas = false;
    let mut quotes = false;
    for (index, ch) in text.char_indices() {
        state = match state {
            In::Code => match ch {
                '"' => {
                    out.push('"');
                    In::Double { escaped: false }
                }
                '\'' => {
                    quotes = true;
                    out.push('"');
                    In::Single { escaped: false }
                }
                ',' if text[index + 1..].trim_start().starts_with(['}', ']']) => {
                    commas = true;
                    In::Code
                }
                other => {
                    out.push(other);
                    In::Code
                }
            },
            In::Double { escaped } => {
                out.push(ch);
                match ch {
                    '"' if !escaped => In::Code,
                    '\\' => In::Double { escaped: !escaped },
                    _ => In::Double { escaped: false },
                }
            }
            In::Single { escaped: true } => {
                if ch != '\'' {
                    out.push('\\');
                }
                out.push(ch);
                In::Single { escaped: false }
            }
            In::Single { escaped: false } => match ch {
                '\\' => In::Single { escaped: true },
                '\'' => {
                    out.push('"');
                    In::Code
                }
                '"' => {
                    out.push_str("\\\"");
                    In::Single { escaped: false }
                }
                other => {
                    out.push(other);
                    In::Single { escaped: false }
                }
            },
        };
    }
    let mut repairs = Vec::new();
    if commas {
        repairs.push(Repair::TrailingCommas);
    }
    if quotes {
        repairs.push(Repair::SingleQuotes);
    }
    Rewritten { text: out, repairs }
}

/// The last `chars` characters of `text`.
fn tail(text: &str, chars: usize) -> &str {
    let start = text
        .char_indices()
        .rev()
        .nth(chars.saturating_sub(1))
        .map_or(0, |(index, _)| index);
    &text[start..]
}

/// A few characters around `line`:`column` (1-based, as serde reports them).
fn near(text: &str, line: usize, column: usize) -> String {
    let Some(row) = text.lines().nth(line.saturating_sub(1)) else {
        return tail(text, 40).to_owned();
    };
    let chars: Vec<char> = row.chars().collect();
    let at = column.saturating_sub(1).min(chars.len());
    let from = at.saturating_sub(20);
    let to = (at + 20).min(chars.len());
    chars[from..to].iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn repaired(text: &str) -> (serde_json::Value, Vec<Repair>) {
        let normalised = normalise(text).unwrap();
        (
            serde_json::from_str(&normalised.text).unwrap(),
            normalised.repairs,
        )
    }

    #[test]
    fn valid_json_is_passed_through_untouched() {
        let text = r#"{"path": "a,'b'.rs"}"#;
        let normalised = normalise(text).unwrap();
        assert_eq!(normalised.text, text);
        assert!(normalised.note().is_none());
        assert_eq!(normalise("").unwrap().text, "{}");
    }

    #[test]
    fn what_local_models_send_is_repaired_and_said() {
        let (value, repairs) = repaired("{\"command\": \"ls\", \"timeout\": 5,}");
        assert_eq!(value, serde_json::json!({"command": "ls", "timeout": 5}));
        assert_eq!(repairs, [Repair::TrailingCommas]);

        let (value, repairs) = repaired(r#"{'path': 'say "hi".txt', 'note': 'it\'s'}"#);
        assert_eq!(
            value,
            serde_json::json!({"path": "say \"hi\".txt", "note": "it's"})
        );
        assert_eq!(repairs, [Repair::SingleQuotes]);

        let (value, repairs) = repaired("```json\n{\"edits\": [1, 2,],}\n```");
        assert_eq!(value, serde_json::json!({"edits": [1, 2]}));
        assert_eq!(repairs, [Repair::CodeFence, Repair::TrailingCommas]);

        let (value, repairs) = repaired(r#""{\"path\": \"a.rs\"}""#);
        assert_eq!(value, serde_json::json!({"path": "a.rs"}));
        assert_eq!(repairs, [Repair::QuotedObject]);
        assert!(
            normalise(r#""{\"path\": \"a.rs\"}""#)
                .unwrap()
                .note()
                .unwrap()
                .contains("quoted string")
        );
    }

    #[test]
    fn a_comma_inside_a_string_is_kept() {
        let (value, _) = repaired("{'text': 'a, }', 'n': [1,],}");
        assert_eq!(value, serde_json::json!({"text": "a, }", "n": [1]}));
    }

    #[test]
    fn arguments_cut_off_at_the_output_limit_are_not_completed() {
        let error =
            normalise(r#"{"path": "big.rs", "content": "fn main() {\n    println!("#).unwrap_err();
        let ArgumentsError::CutOff { tail, .. } = &error else {
            panic!("{error:?}");
        };
        assert!(tail.ends_with("println!("), "{tail}");
        assert!(error.to_string().contains("Nothing was run"));
    }

    #[test]
    fn garbage_is_quoted_back() {
        let error = normalise("{\"path\": src/main.rs}").unwrap_err();
        assert!(
            matches!(&error, ArgumentsError::Invalid { near, .. } if near.contains("src/main.rs")),
            "{error:?}"
        );
    }

    proptest! {
        /// Whatever the model sends, normalising never panics, and what it accepts parses.
        #[test]
        fn accepted_text_always_parses(text in "\\PC{0,200}") {
            if let Ok(normalised) = normalise(&text) {
                prop_assert!(serde_json::from_str::<serde_json::Value>(&normalised.text).is_ok());
            }
        }

        /// Valid JSON of any shape is never changed.
        #[test]
        fn valid_objects_pass_unchanged(map in proptest::collection::btree_map("[a-z',\" ]{0,8}", "[a-z',\"{} ]{0,12}", 0..5)) {
            let text = serde_json::to_string(&map).unwrap();
            let normalised = normalise(&text).unwrap();
            prop_assert_eq!(normalised.text, text.as_str());
            prop_assert!(normalised.repairs.is_empty());
        }
    }
}

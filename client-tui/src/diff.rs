//! Edits shown as diffs. The edit tools' arguments say what is written, not always what was
//! there: `edit_file` carries both sides, `edit_lines` only line numbers, `write_file` only the
//! new content. The missing side comes from what the session itself has shown of the file
//! (read_file results and edit_lines reports carry `N:HASH|content` lines), so most edits show
//! a real before/after; where nothing was seen, the new lines are shown alone.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;
use similar::{ChangeTag, TextDiff};

/// Lines of unchanged context around each change of a whole-file diff.
const CONTEXT: usize = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffLine {
    /// Unchanged, with its line number in the new file when known.
    Context(Option<usize>, String),
    Removed(Option<usize>, String),
    Added(Option<usize>, String),
    /// A gap between hunks.
    Gap,
    /// Something the diff cannot show, said in words.
    Note(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diff {
    /// The file edited, whose language colours the lines.
    pub path: String,
    pub lines: Vec<DiffLine>,
    pub added: usize,
    pub removed: usize,
}

impl Diff {
    fn new(path: &str, lines: Vec<DiffLine>) -> Self {
        let added = lines
            .iter()
            .filter(|line| matches!(line, DiffLine::Added(..)))
            .count();
        let removed = lines
            .iter()
            .filter(|line| matches!(line, DiffLine::Removed(..)))
            .count();
        Self {
            path: path.to_owned(),
            lines,
            added,
            removed,
        }
    }
}

/// What this session has seen of one file.
#[derive(Debug, Default, Clone)]
struct FileView {
    lines: BTreeMap<usize, String>,
    /// Set when every line of the file was seen: its line count.
    complete: Option<usize>,
}

impl FileView {
    fn range(&self, first: usize, last: usize) -> Option<Vec<String>> {
        (first..=last)
            .map(|number| self.lines.get(&number).cloned())
            .collect()
    }

    fn text(&self) -> Option<String> {
        let total = self.complete?;
        let lines = self.range(1, total)?;
        Some(lines.iter().map(|line| format!("{line}\n")).collect())
    }
}

/// The files as the transcript has shown them, by workspace-relative path.
#[derive(Debug, Default, Clone)]
pub struct FileViews {
    files: HashMap<String, FileView>,
}

fn key(path: &str) -> String {
    path.trim_start_matches("./").to_owned()
}

impl FileViews {
    /// Learns from a finished tool call: reads add lines, edits invalidate them (line numbers
    /// move), a whole-file write is known in full, and a shell command may have changed anything.
    pub fn learn(&mut self, tool: &str, arguments: &str, output: &str, is_error: bool) {
        if is_error {
            return;
        }
        let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
        let path = args["path"].as_str().map(key);
        match (tool, path) {
            ("read_file", Some(path)) => {
                let view = self.files.entry(path).or_default();
                let anchored = anchored_lines(output);
                let whole = args["offset"].as_u64().unwrap_or(1) <= 1
                    && !anchored.is_empty()
                    && anchored.len() == output.lines().count()
                    && !output.contains("… [line cut");
                let count = anchored.len();
                view.lines.extend(anchored);
                if whole {
                    view.complete = Some(count);
                }
            }
            ("edit_lines", Some(path)) => {
                let view = FileView {
                    lines: anchored_lines(output).into_iter().collect(),
                    complete: None,
                };
                self.files.insert(path, view);
            }
            ("write_file", Some(path)) => {
                let content = args["content"].as_str().unwrap_or_default();
                let lines: BTreeMap<usize, String> = content
                    .lines()
                    .enumerate()
                    .map(|(index, line)| (index + 1, line.to_owned()))
                    .collect();
                let complete = Some(lines.len());
                self.files.insert(path, FileView { lines, complete });
            }
            (_, Some(path)) if tool == "edit_file" => {
                self.files.remove(&path);
            }
            ("bash", _) => self.files.clear(),
            _ => {}
        }
    }

    fn view(&self, path: &str) -> Option<&FileView> {
        self.files.get(&key(path))
    }
}

/// `N:HHH|content` lines of a tool result, by line number.
fn anchored_lines(output: &str) -> Vec<(usize, String)> {
    output.lines().filter_map(parse_anchored).collect()
}

pub fn parse_anchored(line: &str) -> Option<(usize, String)> {
    let (number, rest) = line.split_once(':')?;
    let number: usize = number.parse().ok()?;
    let (hash, content) = rest.split_once('|')?;
    let is_hash = hash.len() == 3
        && hash
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase());
    is_hash.then(|| (number, content.to_owned()))
}

/// The diff of an edit tool call, or `None` for other tools (or arguments that do not parse).
pub fn for_call(tool: &str, arguments: &str, views: &FileViews) -> Option<Diff> {
    let args: Value = serde_json::from_str(arguments).ok()?;
    let path = args["path"].as_str()?;
    let view = views.view(path);
    let lines = match tool {
        "edit_file" => edit_file(&args, view)?,
        "edit_lines" => edit_lines(&args, view)?,
        "write_file" => write_file(args["content"].as_str()?, view),
        _ => return None,
    };
    Some(Diff::new(path, lines))
}

fn edit_file(args: &Value, view: Option<&FileView>) -> Option<Vec<DiffLine>> {
    let pairs: Vec<(String, String)> = match args["edits"].as_array() {
        Some(edits) => edits
            .iter()
            .map(|edit| {
                Some((
                    edit["old_string"].as_str()?.to_owned(),
                    edit["new_string"].as_str()?.to_owned(),
                ))
            })
            .collect::<Option<_>>()?,
        None => vec![(
            args["old_string"].as_str()?.to_owned(),
            args["new_string"].as_str()?.to_owned(),
        )],
    };
    let file = view.and_then(FileView::text);
    let mut out = Vec::new();
    for (index, (old, new)) in pairs.iter().enumerate() {
        if index > 0 {
            out.push(DiffLine::Gap);
        }
        // Where the old text sits, when the whole file was seen: then lines get numbers.
        let first_line = file
            .as_deref()
            .and_then(|file| file.find(old.as_str()))
            .and_then(|offset| {
                file.as_deref()
                    .map(|f| f[..offset].matches('\n').count() + 1)
            });
        out.extend(block_diff(old, new, first_line, first_line));
    }
    if args["replace_all"].as_bool() == Some(true) {
        out.push(DiffLine::Note("every occurrence is replaced".to_owned()));
    }
    Some(out)
}

#[derive(Debug)]
struct LineEdit {
    line: usize,
    end_line: usize,
    op: String,
    new_lines: Vec<String>,
}

fn edit_lines(args: &Value, view: Option<&FileView>) -> Option<Vec<DiffLine>> {
    let mut edits: Vec<LineEdit> = args["edits"]
        .as_array()?
        .iter()
        .map(|edit| {
            let line = edit["line"].as_u64()? as usize;
            let new_text = edit["new_text"].as_str().unwrap_or_default();
            let new_text = strip_anchors(new_text);
            let new_text = new_text.strip_suffix('\n').unwrap_or(&new_text);
            Some(LineEdit {
                line,
                end_line: edit["end_line"].as_u64().map_or(line, |end| end as usize),
                op: edit["op"].as_str().unwrap_or("replace").to_owned(),
                new_lines: new_text.split('\n').map(str::to_owned).collect(),
            })
        })
        .collect::<Option<_>>()?;
    edits.sort_by_key(|edit| edit.line);
    let known = |first: usize, last: usize| view.and_then(|view| view.range(first, last));
    let mut out = Vec::new();
    // New line numbers move by what earlier edits added or removed.
    let mut shift: isize = 0;
    for (index, edit) in edits.iter().enumerate() {
        if index > 0 {
            out.push(DiffLine::Gap);
        }
        let new_number = |old: usize| old.checked_add_signed(shift);
        match edit.op.as_str() {
            "insert_after" | "insert_before" => {
                let anchor = known(edit.line, edit.line).map(|mut lines| lines.remove(0));
                let first_new = if edit.op == "insert_after" {
                    edit.line + 1
                } else {
                    edit.line
                };
                let added = edit.new_lines.iter().enumerate().map(|(offset, line)| {
                    DiffLine::Added(new_number(first_new + offset), line.clone())
                });
                let anchor_line = anchor.map(|text| {
                    let moved = if edit.op == "insert_before" {
                        edit.new_lines.len()
                    } else {
                        0
                    };
                    DiffLine::Context(new_number(edit.line + moved), text)
                });
                if edit.op == "insert_after" {
                    out.extend(anchor_line);
                    out.extend(added);
                } else {
                    out.extend(added);
                    out.extend(anchor_line);
                }
                shift += edit.new_lines.len() as isize;
            }
            op => {
                let new_lines: &[String] = if op == "delete" { &[] } else { &edit.new_lines };
                let removed = edit.end_line + 1 - edit.line;
                match known(edit.line, edit.end_line) {
                    Some(old) => {
                        let old = join(&old);
                        let new = join(new_lines);
                        out.extend(block_diff(
                            &old,
                            &new,
                            Some(edit.line),
                            new_number(edit.line),
                        ));
                    }
                    None => {
                        out.push(DiffLine::Note(format!(
                            "{} {} (not shown here before)",
                            if op == "delete" {
                                "deletes"
                            } else {
                                "replaces"
                            },
                            line_span(edit.line, edit.end_line)
                        )));
                        out.extend(new_lines.iter().enumerate().map(|(offset, line)| {
                            DiffLine::Added(new_number(edit.line + offset), line.clone())
                        }));
                    }
                }
                shift += new_lines.len() as isize - removed as isize;
            }
        }
    }
    Some(out)
}

fn write_file(content: &str, view: Option<&FileView>) -> Vec<DiffLine> {
    match view.and_then(FileView::text) {
        Some(old) => {
            let diff = TextDiff::from_lines(old.as_str(), content);
            let mut out = Vec::new();
            for (index, group) in diff.grouped_ops(CONTEXT).iter().enumerate() {
                if index > 0 {
                    out.push(DiffLine::Gap);
                }
                for op in group {
                    for change in diff.iter_changes(op) {
                        let text = change.value().trim_end_matches(['\n', '\r']).to_owned();
                        out.push(match change.tag() {
                            ChangeTag::Equal => {
                                DiffLine::Context(change.new_index().map(|i| i + 1), text)
                            }
                            ChangeTag::Delete => {
                                DiffLine::Removed(change.old_index().map(|i| i + 1), text)
                            }
                            ChangeTag::Insert => {
                                DiffLine::Added(change.new_index().map(|i| i + 1), text)
                            }
                        });
                    }
                }
            }
            if out.is_empty() {
                out.push(DiffLine::Note("the content is unchanged".to_owned()));
            }
            out
        }
        None => content
            .lines()
            .enumerate()
            .map(|(index, line)| DiffLine::Added(Some(index + 1), line.to_owned()))
            .collect(),
    }
}

/// A line diff of two blocks whose first lines sit at `old_first`/`new_first` (when known).
fn block_diff(
    old: &str,
    new: &str,
    old_first: Option<usize>,
    new_first: Option<usize>,
) -> Vec<DiffLine> {
    let old = with_newline(old);
    let new = with_newline(new);
    let diff = TextDiff::from_lines(old.as_str(), new.as_str());
    diff.iter_all_changes()
        .map(|change| {
            let text = change.value().trim_end_matches(['\n', '\r']).to_owned();
            let old_number = old_first
                .zip(change.old_index())
                .map(|(first, i)| first + i);
            let new_number = new_first
                .zip(change.new_index())
                .map(|(first, i)| first + i);
            match change.tag() {
                ChangeTag::Equal => DiffLine::Context(new_number, text),
                ChangeTag::Delete => DiffLine::Removed(old_number, text),
                ChangeTag::Insert => DiffLine::Added(new_number, text),
            }
        })
        .collect()
}

/// Both sides end in a newline, so a last line without one is not reported as changed.
fn with_newline(text: &str) -> String {
    if text.is_empty() || text.ends_with('\n') {
        text.to_owned()
    } else {
        format!("{text}\n")
    }
}

fn join(lines: &[String]) -> String {
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// Models sometimes paste the `N:HHH|` anchors into new text; the tool strips them, so do we.
fn strip_anchors(text: &str) -> String {
    let all_anchored = text
        .split('\n')
        .filter(|line| !line.is_empty())
        .all(|line| parse_anchored(line).is_some());
    if !all_anchored || text.is_empty() {
        return text.to_owned();
    }
    text.split('\n')
        .map(|line| parse_anchored(line).map_or_else(|| line.to_owned(), |(_, content)| content))
        .collect::<Vec<_>>()
        .join("\n")
}

fn line_span(first: usize, last: usize) -> String {
    if first == last {
        format!("line {first}")
    } else {
        format!("lines {first}-{last}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const READ: &str = "1:abc|fn main() {\n2:def|    println!(\"hello\");\n3:ghi|}";

    fn views_after_read() -> FileViews {
        let mut views = FileViews::default();
        views.learn("read_file", r#"{"path":"main.rs"}"#, READ, false);
        views
    }

    #[test]
    fn edit_lines_shows_the_old_lines_it_replaces() {
        let args = json!({"path": "./main.rs", "edits": [
            {"line": 2, "hash": "def", "new_text": "    println!(\"edited\");\n    done();"}
        ]});
        let diff = for_call("edit_lines", &args.to_string(), &views_after_read()).unwrap();
        assert_eq!(
            diff.lines,
            [
                DiffLine::Removed(Some(2), "    println!(\"hello\");".into()),
                DiffLine::Added(Some(2), "    println!(\"edited\");".into()),
                DiffLine::Added(Some(3), "    done();".into()),
            ]
        );
        assert_eq!((diff.added, diff.removed), (2, 1));
    }

    #[test]
    fn edit_lines_on_unseen_lines_says_so_and_shows_the_new_ones() {
        let args = json!({"path": "lib.rs", "edits": [
            {"line": 7, "hash": "x1y", "end_line": 8, "end_hash": "z2w", "new_text": "new"},
            {"line": 20, "hash": "aaa", "op": "insert_after", "new_text": "after"}
        ]});
        let diff = for_call("edit_lines", &args.to_string(), &FileViews::default()).unwrap();
        assert_eq!(
            diff.lines,
            [
                DiffLine::Note("replaces lines 7-8 (not shown here before)".into()),
                DiffLine::Added(Some(7), "new".into()),
                DiffLine::Gap,
                DiffLine::Added(Some(20), "after".into()),
            ]
        );
    }

    #[test]
    fn edit_file_diffs_its_two_strings_and_numbers_them_when_the_file_was_read() {
        let args = json!({"path": "main.rs", "old_string": "    println!(\"hello\");",
                          "new_string": "    println!(\"bye\");"});
        let diff = for_call("edit_file", &args.to_string(), &views_after_read()).unwrap();
        assert_eq!(
            diff.lines,
            [
                DiffLine::Removed(Some(2), "    println!(\"hello\");".into()),
                DiffLine::Added(Some(2), "    println!(\"bye\");".into()),
            ]
        );
        let unread = for_call("edit_file", &args.to_string(), &FileViews::default()).unwrap();
        assert_eq!(
            unread.lines[0],
            DiffLine::Removed(None, "    println!(\"hello\");".into())
        );
    }

    #[test]
    fn write_file_over_a_read_file_is_a_real_diff() {
        let args = json!({"path": "main.rs", "content": "fn main() {\n    run();\n}\n"});
        let diff = for_call("write_file", &args.to_string(), &views_after_read()).unwrap();
        assert_eq!(
            diff.lines,
            [
                DiffLine::Context(Some(1), "fn main() {".into()),
                DiffLine::Removed(Some(2), "    println!(\"hello\");".into()),
                DiffLine::Added(Some(2), "    run();".into()),
                DiffLine::Context(Some(3), "}".into()),
            ]
        );
        let fresh = for_call("write_file", &args.to_string(), &FileViews::default()).unwrap();
        assert_eq!(fresh.added, 3);
        assert_eq!(fresh.removed, 0);
    }

    #[test]
    fn edits_and_shell_commands_make_old_views_unusable() {
        let mut views = views_after_read();
        views.learn("bash", r#"{"command":"sed -i s/a/b/ main.rs"}"#, "", false);
        assert!(views.view("main.rs").is_none());
        let mut views = views_after_read();
        views.learn(
            "edit_lines",
            r#"{"path":"main.rs","edits":[]}"#,
            "Edited `main.rs`: replaced line 2 with 1 line. Those lines now read:\n1:abc|fn main() {\n2:xyz|    edited();",
            false,
        );
        let view = views.view("main.rs").unwrap();
        assert_eq!(
            view.lines.get(&2).map(String::as_str),
            Some("    edited();")
        );
        assert_eq!(view.lines.get(&3), None);
        assert_eq!(view.complete, None);
    }

    #[test]
    fn other_tools_have_no_diff() {
        assert_eq!(
            for_call("bash", r#"{"command":"ls"}"#, &FileViews::default()),
            None
        );
        assert_eq!(
            for_call("edit_file", "not json", &FileViews::default()),
            None
        );
    }
}

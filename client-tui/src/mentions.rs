//! `@path` mentions: the input completes a workspace file after `@`, and a prompt that names
//! one is sent with the file's text after it, so the model reads it as if it had read it
//! itself (the daemon's prompt prefix stays untouched: the file is part of this prompt only).
//! Both walk or read files, so both run off the interface's thread.

use std::io::Read;
use std::path::{Component, Path};

use crate::commands::Candidate;

/// The most files the completion knows of: a huge tree is completed from its first ones.
pub const MAX_FILES: usize = 5000;
/// How deep the walk goes below the workspace.
pub const MAX_DEPTH: usize = 8;
/// Completion candidates shown at most.
const MAX_CANDIDATES: usize = 8;
/// The most files one prompt attaches, and the most bytes of each.
const MAX_ATTACHED: usize = 5;
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// The workspace's files, relative to it, sorted: `.gitignore`d and hidden ones left out, at
/// most [`MAX_FILES`] of them and [`MAX_DEPTH`] directories deep. Blocking.
pub fn list_files(root: &Path) -> Vec<String> {
    let mut files: Vec<String> = ignore::WalkBuilder::new(root)
        .max_depth(Some(MAX_DEPTH))
        // A workspace that is not (yet) a git repository has its .gitignore honoured too.
        .require_git(false)
        .build()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_some_and(|kind| kind.is_file()))
        .filter_map(|entry| {
            let relative = entry.path().strip_prefix(root).ok()?;
            Some(relative.to_string_lossy().into_owned())
        })
        .take(MAX_FILES)
        .collect();
    files.sort();
    files
}

/// The word being typed at the end of the input, when it is a mention: what follows its `@`.
fn typed_mention(input: &str) -> Option<(&str, &str)> {
    let start = input.rfind(char::is_whitespace).map_or(0, |index| {
        index + input[index..].chars().next().map_or(1, char::len_utf8)
    });
    let (before, word) = input.split_at(start);
    let partial = word.strip_prefix('@')?;
    Some((before, partial))
}

/// Completions of the `@partial` at the end of the input: files whose path starts with it
/// first, then those that contain it anywhere, case-insensitively.
pub fn complete(input: &str, files: &[String]) -> Vec<Candidate> {
    let Some((before, partial)) = typed_mention(input) else {
        return Vec::new();
    };
    let wanted = partial.to_lowercase();
    let lowered = |file: &&String| file.to_lowercase();
    let starting = files
        .iter()
        .filter(|file| lowered(file).starts_with(&wanted));
    let containing = files.iter().filter(|file| {
        let file = lowered(file);
        !file.starts_with(&wanted) && file.contains(&wanted)
    });
    starting
        .chain(containing)
        .filter(|file| file.as_str() != partial)
        .take(MAX_CANDIDATES)
        .map(|file| Candidate {
            replacement: format!("{before}@{file} "),
            label: format!("@{file}"),
            about: "attach this file to the prompt".to_owned(),
        })
        .collect()
}

/// The paths a prompt mentions: `@` at the start of a word, then a path inside the workspace
/// (trailing punctuation of the sentence left out), each once.
fn mentioned(prompt: &str) -> Vec<&str> {
    let mut paths: Vec<&str> = Vec::new();
    for word in prompt.split_whitespace() {
        let Some(path) = word.strip_prefix('@') else {
            continue;
        };
        let path = path.trim_end_matches([',', '.', ';', ':', '!', '?', ')']);
        let inside = !path.is_empty()
            && Path::new(path)
                .components()
                .all(|part| matches!(part, Component::Normal(_) | Component::CurDir));
        if inside && !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
}

/// The prompt with each mentioned file of `root` after it in a fenced block, bounded in count
/// and size (a cut says so); a mention that names no file is left as typed. Blocking.
pub fn attach(prompt: &str, root: &Path) -> String {
    let mut attached = String::new();
    let mut count = 0;
    for path in mentioned(prompt) {
        let full = root.join(path);
        if !full.is_file() {
            continue;
        }
        if count == MAX_ATTACHED {
            attached.push_str(&format!(
                "\n\n(@{path} and later mentions not attached: at most {MAX_ATTACHED} files per prompt)"
            ));
            break;
        }
        count += 1;
        attached.push_str(&file_block(path, &full));
    }
    if attached.is_empty() {
        prompt.to_owned()
    } else {
        format!("{prompt}{attached}")
    }
}

fn file_block(path: &str, full: &Path) -> String {
    let mut bytes = Vec::new();
    let read = std::fs::File::open(full)
        .and_then(|file| file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes));
    if let Err(error) = read {
        return format!("\n\n(@{path} could not be read: {error})");
    }
    let cut = bytes.len() as u64 > MAX_FILE_BYTES;
    bytes.truncate(MAX_FILE_BYTES as usize);
    if bytes.contains(&0) {
        return format!("\n\n(@{path} is a binary file: not attached)");
    }
    let text = String::from_utf8_lossy(&bytes);
    // A fence longer than any run of backticks in the file keeps it one block.
    let longest_run = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest_run.max(2) + 1);
    let note = if cut {
        format!(
            "\n(cut at {} KiB: read the rest with read_file)",
            MAX_FILE_BYTES / 1024
        )
    } else {
        String::new()
    };
    format!(
        "\n\n@{path}:\n{fence}\n{}\n{fence}{note}",
        text.trim_end_matches('\n')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn the_walk_skips_ignored_and_hidden_files_and_is_bounded_in_depth() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/main.rs"), "fn main() {}").unwrap();
        std::fs::create_dir_all(root.join("target/debug")).unwrap();
        std::fs::write(root.join("target/debug/out"), "x").unwrap();
        let deep: String = (0..MAX_DEPTH + 2).map(|n| format!("d{n}/")).collect();
        std::fs::create_dir_all(root.join(&deep)).unwrap();
        std::fs::write(root.join(&deep).join("far.txt"), "x").unwrap();
        assert_eq!(list_files(root), ["src/main.rs"]);
    }

    #[test]
    fn an_at_word_completes_to_files_that_start_with_it_then_contain_it() {
        let known = files(&[
            "README.md",
            "src/cart.rs",
            "src/main.rs",
            "tests/cart_test.rs",
        ]);
        let shown: Vec<String> = complete("look at @cart", &known)
            .into_iter()
            .map(|candidate| candidate.replacement)
            .collect();
        assert_eq!(
            shown,
            ["look at @src/cart.rs ", "look at @tests/cart_test.rs "]
        );
        let shown = complete("@src/m", &known);
        assert_eq!(shown[0].replacement, "@src/main.rs ");
        assert!(complete("no mention", &known).is_empty());
        assert!(complete("mail me@", &known).is_empty());
        assert!(
            complete("done @src/main.rs", &known).is_empty(),
            "a complete path is not offered again"
        );
        let many: Vec<String> = (0..50).map(|n| format!("f{n}.rs")).collect();
        assert_eq!(complete("@f", &many).len(), MAX_CANDIDATES);
    }

    #[test]
    fn a_mentioned_file_is_attached_in_a_fence_and_a_big_one_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("cart.rs"), "fn total() {}\n").unwrap();
        std::fs::write(root.join("big.txt"), "x".repeat(100 * 1024)).unwrap();
        std::fs::write(root.join("blob.bin"), [0u8, 1, 2]).unwrap();

        let sent = attach("why is @cart.rs wrong? not @missing.rs", root);
        assert_eq!(
            sent,
            "why is @cart.rs wrong? not @missing.rs\n\n@cart.rs:\n```\nfn total() {}\n```"
        );
        let sent = attach("see @big.txt and @blob.bin", root);
        assert!(
            sent.contains("(cut at 64 KiB"),
            "{}",
            &sent[sent.len() - 80..]
        );
        assert!(sent.len() < 66 * 1024);
        assert!(sent.ends_with("(@blob.bin is a binary file: not attached)"));
        assert_eq!(
            attach("outside @../etc/passwd", root),
            "outside @../etc/passwd"
        );
        assert_eq!(attach("no mention", root), "no mention");
    }

    #[test]
    fn at_most_five_files_go_with_one_prompt() {
        let dir = tempfile::tempdir().unwrap();
        let mut prompt = String::from("all of");
        for n in 0..7 {
            std::fs::write(dir.path().join(format!("{n}.txt")), "x").unwrap();
            prompt.push_str(&format!(" @{n}.txt"));
        }
        let sent = attach(&prompt, dir.path());
        assert_eq!(sent.matches("\n```\nx\n```").count(), MAX_ATTACHED);
        assert!(
            sent.ends_with("(@5.txt and later mentions not attached: at most 5 files per prompt)")
        );
    }
}

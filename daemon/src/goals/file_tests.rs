//! goals.md (`file.rs`): parsing hand-written lists, and appending and unchecking goals
//! without losing what the user wrote.

use super::*;

const HAND_WRITTEN: &str = "\
# Release 1.2

Some notes the user keeps here.

- [ ] write the changelog
- [x] bump the version
* [X] tag the release candidate
+ [ ]   announce it\t
  - [ ] nested: update the docs site
1. [ ] numbered goal
2) [x] numbered and done
- [] not a box
- [ ]no space after the box
-[ ] no space after the bullet
- [ ]
- [x]   
- a plain list item
> - [ ] quoted, not a goal

```markdown
- [ ] an example in a fence, not a goal
```
~~~~
- [ ] still fenced
```
- [ ] still fenced: a shorter or different fence does not close it
~~~~
- [ ] after the fences
";

#[test]
fn task_items_are_found_with_any_bullet_box_case_and_indentation() {
    let goals = GoalList::parse(HAND_WRITTEN);
    let found: Vec<(&str, bool, usize)> = goals
        .items
        .iter()
        .map(|goal| (goal.text.as_str(), goal.done, goal.line))
        .collect();
    assert_eq!(
        found,
        [
            ("write the changelog", false, 5),
            ("bump the version", true, 6),
            ("tag the release candidate", true, 7),
            ("announce it", false, 8),
            ("nested: update the docs site", false, 9),
            ("numbered goal", false, 10),
            ("numbered and done", true, 11),
            ("after the fences", false, 28),
        ]
    );
    assert_eq!(goals.done_count(), 3);
    assert_eq!(goals.left_count(), 5);
    let unchecked: Vec<&str> = goals.unchecked().map(|goal| goal.text.as_str()).collect();
    assert_eq!(unchecked[0], "write the changelog");
    assert_eq!(unchecked[4], "after the fences");
}

#[test]
fn crlf_files_parse_without_carriage_returns() {
    let goals = GoalList::parse("- [ ] one\r\n- [x] two\r\n");
    assert_eq!(goals.items[0].text, "one");
    assert_eq!(goals.items[1].text, "two");
    assert!(goals.items[1].done);
}

#[test]
fn a_missing_file_has_no_goals() {
    let dir = tempfile::tempdir().unwrap();
    let goals = GoalList::load(&dir.path().join("goals.md")).unwrap();
    assert!(goals.items.is_empty());
    assert_eq!(goals.left_count(), 0);
}

#[test]
fn append_creates_the_file_with_a_header_and_readable_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goals.md");
    append(&path, "first goal").unwrap();
    append(&path, "  second\n goal  ").unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with(HEADER), "{text}");
    assert!(
        text.ends_with("- [ ] first goal\n- [ ] second goal\n"),
        "{text}"
    );
    let goals = GoalList::parse(&text);
    assert_eq!(goals.left_count(), 2, "the header's example is no goal");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode & 0o600,
        0o600,
        "not a 0600 temp file's mode only: {mode:o}"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["goals.md"], "no temporary file is left behind");
}

#[test]
fn append_keeps_every_byte_of_a_hand_edited_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goals.md");
    let mut original = HAND_WRITTEN.as_bytes().to_vec();
    original.extend_from_slice(b"trailing line without newline \xff\xfe");
    std::fs::write(&path, &original).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();

    append(&path, "- [ ] typed with its box").unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.starts_with(&original));
    assert_eq!(&bytes[original.len()..], b"\n- [ ] typed with its box\n");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
}

#[test]
fn append_follows_the_files_line_endings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goals.md");
    std::fs::write(&path, "# Goals\r\n- [x] done").unwrap();
    append(&path, "next").unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "# Goals\r\n- [x] done\r\n- [ ] next\r\n"
    );
}

#[test]
fn append_writes_through_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.md");
    let link = dir.path().join("goals.md");
    std::fs::write(&real, "- [ ] one\n").unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    append(&link, "two").unwrap();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(&real).unwrap(),
        "- [ ] one\n- [ ] two\n"
    );
}

#[test]
fn an_empty_goal_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goals.md");
    for text in ["", "  \n\t ", "- [ ] "] {
        assert!(matches!(append(&path, text), Err(GoalsError::EmptyGoal)));
    }
    assert!(!path.exists());
}

#[test]
fn a_hand_edit_saved_during_an_append_is_kept_and_the_goal_still_added() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goals.md");
    std::fs::write(&path, "- [ ] one\n").unwrap();
    let mut saves = 0;
    append_with(&path, "two", || {
        if saves == 0 {
            std::fs::write(&path, "- [x] one\n- [ ] typed by hand\n").unwrap();
        }
        saves += 1;
    })
    .unwrap();
    assert_eq!(saves, 2, "the append started over once");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "- [x] one\n- [ ] typed by hand\n- [ ] two\n"
    );
}

#[test]
fn a_file_that_never_settles_is_left_as_the_user_saved_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goals.md");
    let mut saves = 0;
    let result = append_with(&path, "two", || {
        saves += 1;
        std::fs::write(&path, format!("save {saves}\n")).unwrap();
    });
    assert!(matches!(result, Err(GoalsError::KeptChanging { .. })));
    assert_eq!(saves, ATTEMPTS);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        format!("save {ATTEMPTS}\n")
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temp file left"
    );
}

#[test]
fn a_file_created_during_the_first_append_is_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goals.md");
    let mut created = false;
    append_with(&path, "mine", || {
        if !created {
            std::fs::write(&path, "- [ ] theirs\n").unwrap();
            created = true;
        }
    })
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "- [ ] theirs\n- [ ] mine\n"
    );
}

#[test]
fn goals_added_at_once_by_several_clients_are_all_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goals.md");
    std::thread::scope(|scope| {
        for client in 0..4 {
            let path = &path;
            scope.spawn(move || {
                for index in 0..10 {
                    append(path, &format!("goal {client}.{index}")).unwrap();
                }
            });
        }
    });
    assert_eq!(GoalList::load(&path).unwrap().left_count(), 40);
}

#[test]
fn the_continuation_message_lists_only_unchecked_goals_and_says_how_to_check_one() {
    let goals = GoalList::parse("- [x] done already\n- [ ] write tests\n* [ ] fix the bug\n");
    let message = continuation_message(&goals, "goals.md", 3, 20, &[]);
    assert!(
        message.starts_with("[cwcode goal loop, cycle 3 of 20]"),
        "{message}"
    );
    assert!(
        message.contains("\n- write tests\n- fix the bug\n"),
        "{message}"
    );
    assert!(!message.contains("done already"));
    assert!(message.contains("`- [ ]` → `- [x]`"));
    assert!(message.contains("cannot be done, say so plainly"));
    assert!(message.len() < 400, "billed every cycle: {}", message.len());
}

#[test]
fn a_trailing_verify_gives_the_goal_its_check() {
    let cases = [
        (
            "the tests pass (verify: cargo test -q)",
            Some("cargo test -q"),
        ),
        (
            "lint (verify: `cargo clippy -- -D warnings`)",
            Some("cargo clippy -- -D warnings"),
        ),
        (
            "cores (verify: test $(nproc) -gt 0)",
            Some("test $(nproc) -gt 0"),
        ),
        ("no check (verify: )", None),
        ("not at the end (verify: true) really", None),
        ("(verify:true)", Some("true")),
        ("plain goal", None),
    ];
    for (text, command) in cases {
        assert_eq!(verify_command(text), command, "{text}");
    }
    assert_eq!(
        verify_command(&format!("x (verify: {})", "a".repeat(2000))),
        None
    );
    let goals = GoalList::parse("- [ ] the tests pass (verify: cargo test -q)\n- [ ] plain\n");
    assert_eq!(goals.items[0].verify.as_deref(), Some("cargo test -q"));
    assert_eq!(
        goals.items[0].text,
        "the tests pass (verify: cargo test -q)"
    );
    assert_eq!(goals.items[1].verify, None);
}

#[test]
fn the_header_documents_the_verify_syntax() {
    assert!(HEADER.contains("(verify: cargo test -q)"));
    assert_eq!(GoalList::parse(HEADER).items.len(), 0);
}

#[test]
fn uncheck_empties_only_that_box_and_keeps_every_other_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goals.md");
    let text = "# Mine\r\n- [x] other [x] text\r\n* [X] tests pass (verify: make test)\r\nnote\r\n";
    std::fs::write(&path, text).unwrap();
    assert!(uncheck(&path, "tests pass (verify: make test)").unwrap());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "# Mine\r\n- [x] other [x] text\r\n* [ ] tests pass (verify: make test)\r\nnote\r\n"
    );
    assert!(
        !uncheck(&path, "tests pass (verify: make test)").unwrap(),
        "already open"
    );
    assert!(!uncheck(&path, "no such goal").unwrap());
    assert!(!uncheck(&dir.path().join("missing.md"), "x").unwrap());
}

#[test]
fn a_failed_check_is_reported_to_the_next_cycle_with_its_output() {
    let goals = GoalList::parse("- [ ] tests pass (verify: make test)\n");
    let failure = crate::goals::CheckFailure {
        goal: "tests pass (verify: make test)".to_owned(),
        command: "make test".to_owned(),
        output: "FAILED: test_parse\nexit code 2\n".to_owned(),
    };
    let message = continuation_message(&goals, "goals.md", 2, 20, &[failure]);
    assert!(
        message.contains("- tests pass (verify: make test)\n"),
        "{message}"
    );
    assert!(
        message.contains("The check of \"tests pass (verify: make test)\" failed, so its box was unchecked again. `make test` printed:\n```\nFAILED: test_parse\nexit code 2\n```"),
        "{message}"
    );
}

//! What typed text means (a prompt or a slash command), and the completion of slash commands.

use cwcode_protocol::{Mode, ProfileInfo};

use crate::format::mode_meaning;

/// A slash command offered by completion and `/help`. Only commands the daemon can carry out
/// today are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandSpec {
    pub name: &'static str,
    /// Shown after the name in the completion list; empty when the command takes none, in
    /// brackets when it may go without (then completing the name alone runs it).
    pub args: &'static str,
    pub about: &'static str,
}

impl CommandSpec {
    /// Whether completing the name leaves room for an argument rather than running it.
    fn waits_for_argument(&self) -> bool {
        !self.args.is_empty() && !self.args.starts_with('[')
    }
}

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "mode",
        args: "plan|code|yolo",
        about: "show or change the mode (Shift+Tab: plan ↔ code)",
    },
    CommandSpec {
        name: "model",
        args: "[NAME]",
        about: "list the provider profiles, or switch to one",
    },
    CommandSpec {
        name: "init",
        args: "[NOTES]",
        about: "have the model draft an AGENTS.md for this workspace",
    },
    CommandSpec {
        name: "rewind",
        args: "[N|undo]",
        about: "put files and history back to before a prompt",
    },
    CommandSpec {
        name: "compact",
        args: "",
        about: "summarise the older turns to free context",
    },
    CommandSpec {
        name: "cache",
        args: "",
        about: "prompt-cache hits, per turn",
    },
    CommandSpec {
        name: "cost",
        args: "",
        about: "what the session cost, per turn",
    },
    CommandSpec {
        name: "goal",
        args: "[TEXT|on|off|status]",
        about: "add a goal to goals.md, start or stop the loop that works through them",
    },
    CommandSpec {
        name: "memory",
        args: "[QUERY|rm ID]",
        about: "this workspace's notes, newest first; search them, or delete one",
    },
    CommandSpec {
        name: "todo",
        args: "",
        about: "show or hide the model's todo list",
    },
    CommandSpec {
        name: "sessions",
        args: "",
        about: "pick another session to attach to",
    },
    CommandSpec {
        name: "new",
        args: "",
        about: "start a new session in this directory",
    },
    CommandSpec {
        name: "cancel",
        args: "",
        about: "stop the running turn (Esc)",
    },
    CommandSpec {
        name: "detach",
        args: "",
        about: "leave; the session keeps running",
    },
    CommandSpec {
        name: "help",
        args: "",
        about: "keys and commands",
    },
];

/// What one submitted input means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Empty,
    Prompt(String),
    Command(Command),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    SetMode(Mode),
    ShowMode,
    /// `/model`: the profiles.
    Model,
    /// `/model NAME`: switches the session to that profile.
    SetProfile(String),
    /// `/init [NOTES]`: the prompt that drafts AGENTS.md, with what the user added.
    Init(String),
    /// `/rewind`: the picker of checkpoints.
    Checkpoints,
    /// `/rewind N`.
    Rewind(u32),
    UndoRewind,
    Compact,
    Cache,
    Cost,
    /// `/goal TEXT`: appends an unchecked goal to goals.md.
    GoalAdd(String),
    /// `/goal on [--cap N]`.
    GoalOn {
        cap: Option<u32>,
    },
    GoalOff,
    /// `/goal` or `/goal status`.
    GoalStatus,
    /// `/memory`: the workspace's notes, newest first.
    MemoryList,
    /// `/memory QUERY`: the notes that match, best first.
    MemoryRecall(String),
    /// `/memory rm ID`.
    MemoryDelete(i64),
    Todo,
    Sessions,
    New,
    Cancel,
    Detach,
    Help,
    /// A mistyped command, with the message that says how to type it.
    Invalid(String),
}

pub fn parse_input(text: &str) -> Input {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Input::Empty;
    }
    // `//…` is the way to send a prompt that starts with a slash.
    if let Some(escaped) = trimmed.strip_prefix("//") {
        return Input::Prompt(format!("/{escaped}"));
    }
    let Some(command) = trimmed.strip_prefix('/') else {
        // Only surrounding blank lines go: indentation inside a pasted block is meaningful.
        return Input::Prompt(text.trim_matches('\n').trim_end().to_owned());
    };
    let (name, argument) = match command.split_once(char::is_whitespace) {
        Some((name, argument)) => (name, argument.trim()),
        None => (command, ""),
    };
    Input::Command(match name {
        "mode" if argument.is_empty() => Command::ShowMode,
        "mode" => match argument.parse() {
            Ok(mode) => Command::SetMode(mode),
            Err(error) => Command::Invalid(format!("{error} (e.g. `/mode plan`)")),
        },
        "model" | "models" | "profile" | "profiles" if argument.is_empty() => Command::Model,
        "model" | "models" | "profile" | "profiles" if argument.contains(char::is_whitespace) => {
            Command::Invalid(format!(
                "/{name} takes one profile name, not `{argument}`: /model lists them"
            ))
        }
        "model" | "models" | "profile" | "profiles" => Command::SetProfile(argument.to_owned()),
        "rewind" | "checkpoints" => match argument {
            "" => Command::Checkpoints,
            "undo" => Command::UndoRewind,
            number => match number.parse() {
                Ok(turn) => Command::Rewind(turn),
                Err(_) => Command::Invalid(format!(
                    "/rewind takes a prompt number or `undo`, not `{number}`: /rewind picks from the checkpoints"
                )),
            },
        },
        "init" => Command::Init(argument.to_owned()),
        "compact" => Command::Compact,
        "cache" => Command::Cache,
        "cost" => Command::Cost,
        "goal" | "goals" => parse_goal(argument),
        "memory" | "memories" | "notes" => parse_memory(argument),
        "todo" | "todos" => Command::Todo,
        "sessions" | "resume" => Command::Sessions,
        "new" | "clear" => Command::New,
        "cancel" => Command::Cancel,
        "detach" | "quit" | "exit" | "q" => Command::Detach,
        "help" | "?" => Command::Help,
        _ => Command::Invalid(format!(
            "unknown command /{name}: /help lists them (start a prompt with // to send a leading /)"
        )),
    })
}

/// What `/init` asks. The daemon reads AGENTS.md into every new session, so what the model
/// writes here is what later sessions start from: short and checked beats long and guessed.
const INIT_PROMPT: &str = "Draft an AGENTS.md for this workspace, for coding agents that start \
work here.

Look before you write: list the files, read the build manifests (Cargo.toml, package.json, \
pyproject.toml, Makefile, CI workflows…) and the README, and skim a few source files. Then \
write AGENTS.md at the workspace root with:
- how to build, test (the whole suite and a single test), lint and format, as exact commands;
- the layout: the main directories and what each holds, in a line each;
- the conventions the code follows (naming, error handling, tests, commit style) that are not \
obvious from one file.

Keep it concise (well under 100 lines), state only what you checked, and leave out generic \
advice. If an AGENTS.md exists already, improve it instead of starting over, keeping what is \
still true.";

/// The prompt `/init` sends, with the user's own notes after it.
pub fn init_prompt(notes: &str) -> String {
    let notes = notes.trim();
    if notes.is_empty() {
        INIT_PROMPT.to_owned()
    } else {
        format!("{INIT_PROMPT}\n\nAlso, from the user: {notes}")
    }
}

/// Whether `/name` is a built-in command, under its name or another (`/clear`, `/q`).
pub fn is_builtin(name: &str) -> bool {
    !matches!(
        parse_input(&format!("/{name}")),
        Input::Command(Command::Invalid(message)) if message.starts_with("unknown command")
    )
}

/// `/memory`'s argument: nothing (or `ls`) lists, `rm ID` deletes, anything else is a query.
fn parse_memory(argument: &str) -> Command {
    let (word, rest) = match argument.split_once(char::is_whitespace) {
        Some((word, rest)) => (word, rest.trim()),
        None => (argument, ""),
    };
    match (word, rest) {
        ("" | "ls" | "list", "") => Command::MemoryList,
        ("rm" | "delete", "") => {
            Command::Invalid("/memory rm takes a note's number: /memory lists them".to_owned())
        }
        ("rm" | "delete", id) => match id.trim_start_matches('#').parse::<i64>() {
            Ok(id) if id > 0 => Command::MemoryDelete(id),
            _ => Command::Invalid(format!(
                "/memory rm takes one note number such as 12 (as /memory shows it), not `{id}`"
            )),
        },
        _ => Command::MemoryRecall(argument.to_owned()),
    }
}

/// `/goal`'s argument. A lone `on`, `off` or `status` is the command; with more words it is a
/// goal's text ("on mobile, the menu folds"), except that flags after `on` are the loop's.
fn parse_goal(argument: &str) -> Command {
    let (word, rest) = match argument.split_once(char::is_whitespace) {
        Some((word, rest)) => (word, rest.trim()),
        None => (argument, ""),
    };
    match (word, rest) {
        ("" | "status", "") => Command::GoalStatus,
        ("off", "") => Command::GoalOff,
        ("on", "") => Command::GoalOn { cap: None },
        ("on", flags) if flags.starts_with("--") => parse_goal_flags(flags),
        _ => Command::GoalAdd(argument.to_owned()),
    }
}

fn parse_goal_flags(flags: &str) -> Command {
    let words: Vec<&str> = flags.split_whitespace().collect();
    let value = match words[..] {
        ["--cap", value] => Some(value),
        [flag] => flag.strip_prefix("--cap="),
        _ => None,
    };
    let Some(value) = value else {
        return Command::Invalid(format!(
            "/goal on takes one flag, --cap N (the most cycles, 20 by default), not `{flags}`"
        ));
    };
    match value.parse::<u32>() {
        Ok(cap) if cap > 0 => Command::GoalOn { cap: Some(cap) },
        _ => Command::Invalid(format!(
            "--cap is a number of cycles, at least 1, not `{value}` (e.g. `/goal on --cap 10`)"
        )),
    }
}

/// One completion candidate: the text that replaces the input, and what the list shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub replacement: String,
    pub label: String,
    pub about: String,
}

/// Completions for the input, when it is a slash command being typed (one line, the command's
/// name, or `/mode ` and the start of a mode). `profiles` are the ones `/model ` completes.
pub fn complete(input: &str, profiles: &[ProfileInfo]) -> Vec<Candidate> {
    let Some(typed) = input.strip_prefix('/') else {
        return Vec::new();
    };
    if input.contains('\n') || typed.starts_with('/') {
        return Vec::new();
    }
    match typed.split_once(' ') {
        None => COMMANDS
            .iter()
            .filter(|spec| spec.name.starts_with(typed))
            .map(|spec| Candidate {
                replacement: if spec.waits_for_argument() {
                    format!("/{} ", spec.name)
                } else {
                    format!("/{}", spec.name)
                },
                label: if spec.args.is_empty() {
                    format!("/{}", spec.name)
                } else {
                    format!("/{} {}", spec.name, spec.args)
                },
                about: spec.about.to_owned(),
            })
            .collect(),
        Some(("mode", partial)) if !partial.contains(' ') => Mode::ALL
            .into_iter()
            .filter(|mode| mode.as_str().starts_with(partial))
            .map(|mode| Candidate {
                replacement: format!("/mode {mode}"),
                label: mode.as_str().to_owned(),
                about: mode_meaning(mode).to_owned(),
            })
            .collect(),
        Some((name @ ("model" | "profile"), partial)) if !partial.contains(' ') => profiles
            .iter()
            .filter(|profile| profile.name.starts_with(partial))
            .map(|profile| Candidate {
                replacement: format!("/{name} {}", profile.name),
                label: profile.name.clone(),
                about: profile.model.clone(),
            })
            .collect(),
        Some(("rewind", partial)) if "undo".starts_with(partial) => vec![Candidate {
            replacement: "/rewind undo".to_owned(),
            label: "undo".to_owned(),
            about: "put back what the last rewind changed (until the next prompt)".to_owned(),
        }],
        Some(("goal", partial)) if !partial.contains(' ') => GOAL_WORDS
            .iter()
            .filter(|(word, _)| word.starts_with(partial))
            .map(|(word, about)| Candidate {
                replacement: format!("/goal {word}"),
                label: (*word).to_owned(),
                about: (*about).to_owned(),
            })
            .collect(),
        Some(_) => Vec::new(),
    }
}

/// The words `/goal` completes; anything else typed after it is a goal.
const GOAL_WORDS: [(&str, &str); 3] = [
    ("status", "the goals, the loop's cycle, tokens and cost"),
    (
        "on",
        "start the loop: a turn per cycle until every goal is done (--cap N cycles, 20 by default)",
    ),
    ("off", "stop the loop; a cycle in flight is cancelled"),
];

/// The mode Shift+Tab moves to: plan ↔ code. Yolo is never a key press away (it approves
/// everything, so it is asked for by name); from yolo the key goes to plan, the safest.
pub fn next_mode(mode: Mode) -> Mode {
    match mode {
        Mode::Plan => Mode::Code,
        Mode::Code | Mode::Yolo => Mode::Plan,
    }
}

pub const HELP: &str = "\
Keys
  Enter                send the prompt (queued if a turn is running)
  Alt/Shift+Enter      new line (also Ctrl+J); pasted text keeps its lines
  Up / Down            previous / next prompt, from the first / last line
  Tab                  complete a /command or an @file
  Shift+Tab            toggle plan ↔ code (/mode yolo runs every tool unasked)
  Esc                  cancel the running turn
  PgUp / PgDn, wheel   scroll; at the bottom the view follows new output
  Ctrl+O               show or hide reasoning and long outputs in full
  Ctrl+C               clear the input; twice on an empty one quits
  Ctrl+D               detach (on an empty input, or while asked to approve); the session keeps running
  Shift+drag           select text (the wheel belongs to cwcode)
In a prompt
  @path                attach a workspace file: its text goes with the prompt (64 KiB at most)
  !command             run a shell command here (30 s at most); its output is shown and goes
                       with the next prompt
Approvals
  y                    run the call
  a                    run it, and allow this tool for the rest of the session
  n                    refuse; type the reason the model is told, then Enter
Commands";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_a_prompt_and_double_slash_escapes() {
        assert_eq!(
            parse_input("\n  fix the tests \n\n"),
            Input::Prompt("  fix the tests".to_owned())
        );
        assert_eq!(parse_input("   \n"), Input::Empty);
        assert_eq!(
            parse_input("//etc/hosts is odd"),
            Input::Prompt("/etc/hosts is odd".to_owned())
        );
    }

    #[test]
    fn memory_lists_searches_and_deletes() {
        let parsed = |text: &str| match parse_input(text) {
            Input::Command(command) => command,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(parsed("/memory"), Command::MemoryList);
        assert_eq!(parsed("/memory ls"), Command::MemoryList);
        assert_eq!(parsed("/notes"), Command::MemoryList);
        assert_eq!(
            parsed("/memory  coupon rounding "),
            Command::MemoryRecall("coupon rounding".to_owned())
        );
        // A query may start with a word that is a subcommand on its own.
        assert_eq!(
            parsed("/memory ls output colours"),
            Command::MemoryRecall("ls output colours".to_owned())
        );
        assert_eq!(parsed("/memory rm 12"), Command::MemoryDelete(12));
        assert_eq!(parsed("/memory rm #7"), Command::MemoryDelete(7));
        for (typed, expected) in [
            ("/memory rm", "/memory rm takes a note's number"),
            ("/memory rm twelve", "not `twelve`"),
            ("/memory rm 0", "not `0`"),
            ("/memory rm 3 4", "not `3 4`"),
        ] {
            let Command::Invalid(message) = parsed(typed) else {
                panic!("{typed} should be refused");
            };
            assert!(message.contains(expected), "{typed}: {message}");
        }
        assert_eq!(complete("/mem", &[])[0].replacement, "/memory");
        assert!(is_builtin("memory"));
    }

    #[test]
    fn slash_commands_and_their_mistakes() {
        assert_eq!(
            parse_input("/mode  YOLO "),
            Input::Command(Command::SetMode(Mode::Yolo))
        );
        assert_eq!(parse_input("/mode"), Input::Command(Command::ShowMode));
        assert_eq!(parse_input("/quit"), Input::Command(Command::Detach));
        assert_eq!(parse_input("/model"), Input::Command(Command::Model));
        assert_eq!(
            parse_input("/model  local "),
            Input::Command(Command::SetProfile("local".to_owned()))
        );
        assert_eq!(
            parse_input("/profile deepseek"),
            Input::Command(Command::SetProfile("deepseek".to_owned()))
        );
        let Input::Command(Command::Invalid(message)) = parse_input("/model a b") else {
            panic!("expected an invalid command");
        };
        assert!(message.contains("one profile name"), "{message}");
        assert_eq!(parse_input("/new"), Input::Command(Command::New));
        assert_eq!(parse_input("/rewind"), Input::Command(Command::Checkpoints));
        assert_eq!(parse_input("/rewind 3"), Input::Command(Command::Rewind(3)));
        assert_eq!(
            parse_input("/rewind undo"),
            Input::Command(Command::UndoRewind)
        );
        assert_eq!(parse_input("/todo"), Input::Command(Command::Todo));
        let Input::Command(Command::Invalid(message)) = parse_input("/rewind last") else {
            panic!("expected an invalid command");
        };
        assert!(message.contains("`undo`"), "{message}");
        let Input::Command(Command::Invalid(message)) = parse_input("/mode fast") else {
            panic!("expected an invalid command");
        };
        assert!(message.contains("expected plan, code or yolo"), "{message}");
        let Input::Command(Command::Invalid(message)) = parse_input("/etc/passwd") else {
            panic!("expected an invalid command");
        };
        assert!(message.contains("//"), "{message}");
    }

    #[test]
    fn completion_offers_matching_commands_then_modes() {
        let names: Vec<String> = complete("/m", &[]).into_iter().map(|c| c.label).collect();
        assert_eq!(
            names,
            [
                "/mode plan|code|yolo",
                "/model [NAME]",
                "/memory [QUERY|rm ID]"
            ]
        );
        assert_eq!(complete("/mode", &[])[0].replacement, "/mode ");
        assert_eq!(complete("/se", &[])[0].replacement, "/sessions");
        let modes: Vec<String> = complete("/mode ", &[])
            .into_iter()
            .map(|c| c.label)
            .collect();
        assert_eq!(modes, ["plan", "code", "yolo"]);
        assert_eq!(complete("/mode y", &[])[0].replacement, "/mode yolo");
        // The argument of /rewind is optional: completing the name runs it as is.
        assert_eq!(complete("/rew", &[])[0].replacement, "/rewind");
        assert_eq!(complete("/rew", &[])[0].label, "/rewind [N|undo]");
        assert_eq!(complete("/rewind u", &[])[0].replacement, "/rewind undo");
        assert!(complete("/rewind 3", &[]).is_empty());
        let names: Vec<String> = complete("/c", &[]).into_iter().map(|c| c.label).collect();
        assert_eq!(names, ["/compact", "/cache", "/cost", "/cancel"]);
        assert!(complete("hello", &[]).is_empty());
        assert!(complete("/mode plan now", &[]).is_empty());
        assert!(complete("/x\n", &[]).is_empty());
        assert!(complete("/zz", &[]).is_empty());
    }

    #[test]
    fn every_command_the_completion_offers_parses() {
        for spec in COMMANDS {
            let parsed = parse_input(&format!("/{}", spec.name));
            assert!(
                !matches!(parsed, Input::Command(Command::Invalid(_))),
                "/{} is offered but not understood",
                spec.name
            );
        }
    }

    #[test]
    fn shift_tab_toggles_plan_and_code_and_never_lands_in_yolo() {
        assert_eq!(next_mode(Mode::Plan), Mode::Code);
        assert_eq!(next_mode(Mode::Code), Mode::Plan);
        assert_eq!(next_mode(Mode::Yolo), Mode::Plan);
    }

    #[test]
    fn goal_adds_text_and_a_lone_word_runs_the_loop() {
        let goal = |text: &str| match parse_input(text) {
            Input::Command(command) => command,
            other => panic!("{text} is not a command: {other:?}"),
        };
        assert_eq!(goal("/goal"), Command::GoalStatus);
        assert_eq!(goal("/goal status "), Command::GoalStatus);
        assert_eq!(goal("/goal off"), Command::GoalOff);
        assert_eq!(goal("/goal on"), Command::GoalOn { cap: None });
        assert_eq!(goal("/goal on --cap 5"), Command::GoalOn { cap: Some(5) });
        assert_eq!(
            goal("/goal on  --cap=12"),
            Command::GoalOn { cap: Some(12) }
        );
        assert_eq!(
            goal("/goal coupons apply  before tax"),
            Command::GoalAdd("coupons apply  before tax".to_owned())
        );
        // With more words, `on`, `off` and `status` start a goal's text.
        assert_eq!(
            goal("/goal on mobile the menu folds"),
            Command::GoalAdd("on mobile the menu folds".to_owned())
        );
        assert_eq!(
            goal("/goal off-by-one in paging fixed"),
            Command::GoalAdd("off-by-one in paging fixed".to_owned())
        );
        for (typed, expected) in [
            ("/goal on --cap", "one flag, --cap N"),
            ("/goal on --cap 0", "at least 1, not `0`"),
            ("/goal on --cap ten", "not `ten`"),
            ("/goal on --budget 5", "not `--budget 5`"),
        ] {
            let Command::Invalid(message) = goal(typed) else {
                panic!("{typed} should be refused");
            };
            assert!(message.contains(expected), "{typed}: {message}");
        }
    }

    #[test]
    fn goal_completes_its_words() {
        let words: Vec<String> = complete("/goal ", &[])
            .into_iter()
            .map(|c| c.label)
            .collect();
        assert_eq!(words, ["status", "on", "off"]);
        let words: Vec<String> = complete("/goal o", &[])
            .into_iter()
            .map(|c| c.label)
            .collect();
        assert_eq!(words, ["on", "off"]);
        assert_eq!(complete("/goal of", &[])[0].replacement, "/goal off");
        // The argument is optional: completing the name runs `/goal` (the status).
        assert_eq!(complete("/go", &[])[0].replacement, "/goal");
        assert_eq!(complete("/go", &[])[0].label, "/goal [TEXT|on|off|status]");
        assert!(complete("/goal fix", &[]).is_empty());
        assert!(complete("/goal on --cap", &[]).is_empty());
    }

    #[test]
    fn model_completes_the_profile_names() {
        let profile = |name: &str, model: &str| ProfileInfo {
            key_env: None,
            name: name.to_owned(),
            base_url: "http://localhost".to_owned(),
            model: model.to_owned(),
            has_key: true,
            is_default: false,
            context_window: None,
            prices: None,
        };
        let profiles = [
            profile("deepseek", "deepseek-chat"),
            profile("local", "qwen3"),
            profile("deepseek-r1", "deepseek-reasoner"),
        ];
        let names: Vec<String> = complete("/model ", &profiles)
            .into_iter()
            .map(|c| c.label)
            .collect();
        assert_eq!(names, ["deepseek", "local", "deepseek-r1"]);
        let found = complete("/model l", &profiles);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].replacement, "/model local");
        assert_eq!(found[0].about, "qwen3");
        assert_eq!(
            complete("/profile deepseek-", &profiles)[0].replacement,
            "/profile deepseek-r1"
        );
        assert!(complete("/model ", &[]).is_empty());
        assert!(complete("/model local now", &profiles).is_empty());
    }
}

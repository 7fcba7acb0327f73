//! Human and JSON output. While a prompt is followed (`send --wait`, `run`) the model's answer
//! goes to stdout and everything else (tool activity, approvals, turn summaries) to stderr, so
//! `send --wait > answer.md` captures just the answer. A transcript (`events`) goes to stdout
//! whole; only notes about the stream itself go to stderr.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};

use cwcode_protocol::event::retrying_line;
use cwcode_protocol::{
    CacheReport, CheckpointInfo, CostReport, DaemonInfo, DoctorReport, Event, EventKind,
    GoalStatus, LandlockSupport, NamespaceSupport, ProfileInfo, RewindResult, SandboxReport,
    SessionInfo, SessionStatus, TodoItem, TodoStatus,
};

pub struct Renderer {
    json: bool,
    session_id: String,
    /// Whether the whole transcript goes to stdout, not only the answer.
    transcript: bool,
    /// Whether the last thing written to stdout ended a line.
    at_line_start: bool,
    color: bool,
    /// The goal cycle started and not yet finished: started again, a restart interrupted it.
    open_goal_cycle: Option<u32>,
}

impl Renderer {
    /// For following a prompt: the answer on stdout, the rest on stderr.
    pub fn new(json: bool, session_id: &str) -> Self {
        Self {
            json,
            session_id: session_id.to_owned(),
            transcript: false,
            at_line_start: true,
            color: std::io::stderr().is_terminal(),
            open_goal_cycle: None,
        }
    }

    /// For a transcript: everything on stdout.
    pub fn transcript(json: bool, session_id: &str) -> Self {
        Self {
            transcript: true,
            color: std::io::stdout().is_terminal(),
            ..Self::new(json, session_id)
        }
    }

    pub fn event(&mut self, event: &Event) -> anyhow::Result<()> {
        if self.json {
            let mut stdout = std::io::stdout().lock();
            serde_json::to_writer(&mut stdout, event)?;
            stdout.write_all(b"\n")?;
            stdout.flush()?;
            return Ok(());
        }
        if event.is_sub_agent_text() {
            return Ok(());
        }
        // A sub-agent's calls are shown indented under its `task` call.
        let nesting = if event.parent_call_id.is_some() {
            "  ┆ "
        } else {
            ""
        };
        match &event.kind {
            EventKind::AssistantDelta { text } => self.answer(text)?,
            EventKind::AssistantMessage { .. } => self.finish(),
            EventKind::ReasoningDelta { text } | EventKind::ToolOutputDelta { text, .. } => {
                let text = self.dim(text);
                if self.transcript {
                    self.answer(&text)?;
                } else {
                    eprint!("{text}");
                }
            }
            EventKind::SubscriptionEnded { reason, .. } => {
                self.finish();
                eprintln!("· stream ended: {reason}");
            }
            other => {
                if let Some(line) = self.describe(other) {
                    self.finish();
                    if self.transcript {
                        println!("{nesting}{line}");
                    } else {
                        eprintln!("{nesting}{line}");
                    }
                }
            }
        }
        Ok(())
    }

    /// Streams text to stdout as it comes.
    fn answer(&mut self, text: &str) -> anyhow::Result<()> {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(text.as_bytes())?;
        stdout.flush()?;
        if !text.is_empty() {
            self.at_line_start = text.ends_with('\n');
        }
        Ok(())
    }

    /// Ends a streamed answer with a newline.
    pub fn finish(&mut self) {
        if !self.at_line_start {
            println!();
            self.at_line_start = true;
        }
    }

    fn dim(&self, text: &str) -> String {
        if self.color {
            format!("\x1b[2m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    fn describe(&mut self, kind: &EventKind) -> Option<String> {
        Some(match kind {
            EventKind::PromptQueued { turn, prompt } => {
                format!("· prompt {turn} queued: {}", first_line(prompt))
            }
            EventKind::TurnStarted { turn, prompt } => {
                format!("› [{turn}] {}", first_line(prompt))
            }
            EventKind::ToolCallStarted {
                name, arguments, ..
            } => format!("▶ {name} {}", shorten(arguments, 160)),
            EventKind::ToolCallFinished {
                name,
                output,
                is_error,
                ..
            } => {
                let mark = if *is_error { "✗" } else { "✓" };
                format!("{mark} {name}: {}", shorten(first_line(output), 160))
            }
            EventKind::ApprovalRequested {
                request_id,
                tool,
                arguments,
                suggested_pattern,
                ..
            } => {
                let always = match suggested_pattern {
                    Some(pattern) => format!("[--always [--pattern {}]]", shell_quote(pattern)),
                    None => "[--always]".to_owned(),
                };
                format!(
                    "? {tool} {} needs approval:\n    cwcode-cli approve {id} {request_id} {always}\n    cwcode-cli deny {id} {request_id} [--reason TEXT]",
                    shorten(arguments, 400),
                    id = self.session_id
                )
            }
            EventKind::ApprovalResolved {
                request_id,
                decision,
                reason,
                pattern,
            } => {
                let scope = pattern
                    .as_ref()
                    .map(|pattern| format!(" for `{pattern}`"))
                    .unwrap_or_default();
                match reason {
                    Some(reason) => format!("  {request_id}: {decision:?}{scope} ({reason})"),
                    None => format!("  {request_id}: {decision:?}{scope}"),
                }
            }
            EventKind::ModeChanged { mode } => format!("· mode is now {mode}"),
            EventKind::ProfileChanged { profile } => format!("· profile is now {profile}"),
            EventKind::ReasoningKept { profile } => {
                format!("· {profile} wants its reasoning back: this session now replays it")
            }
            EventKind::TurnFinished {
                turn,
                outcome,
                usage,
                error,
            } => {
                let mut line = format!(
                    "· turn {turn} {outcome:?}: {} prompt tokens ({} cached), {} output",
                    usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens
                )
                .to_lowercase();
                if let Some(error) = error {
                    let _ = write!(line, "\n  {error}");
                }
                line
            }
            EventKind::ToolOutputSpilled {
                path, total_bytes, ..
            } => format!("· the whole output ({total_bytes} bytes) is in {path}"),
            EventKind::CallAbandoned {
                usage,
                estimated_usage,
                ..
            } => match (usage, estimated_usage) {
                (Some(usage), _) => format!(
                    "· the unfinished answer was billed: {} prompt tokens ({} cached), {} output",
                    usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens
                ),
                (None, Some(estimate)) => format!(
                    "· the unfinished answer's usage was not reported; cwcode's estimate: about {} prompt tokens, {} output",
                    estimate.prompt_tokens, estimate.completion_tokens
                ),
                (None, None) => "· the unfinished answer's usage was not reported".to_owned(),
            },
            EventKind::ToolCallsRecovered { call_ids } => format!(
                "· {} tool call(s) read from the answer's text (the server left them there)",
                call_ids.len()
            ),
            EventKind::StreamRestarted { reason } => {
                format!(
                    "· the provider connection broke ({reason}); retrying from the start of the answer"
                )
            }
            EventKind::ProviderRetrying {
                attempt,
                max_attempts,
                delay_ms,
                reason,
            } => format!(
                "· {}",
                retrying_line(*attempt, *max_attempts, *delay_ms, reason)
            ),
            EventKind::StormBroken { tool, .. } => {
                format!("· stopped: {tool} kept failing the same way")
            }
            EventKind::TodoUpdated { todos } if todos.is_empty() => "· todo: cleared".to_owned(),
            EventKind::TodoUpdated { todos } => {
                format!("· todo:\n{}", todo_list(todos).trim_end())
            }
            EventKind::Compacted {
                kept_messages,
                tokens_before,
                tokens_after,
                ..
            } => format!(
                "· compacted: about {tokens_before} → {tokens_after} tokens, the last {kept_messages} messages kept"
            ),
            EventKind::Error { message } => format!("! {message}"),
            EventKind::CheckpointCreated { turn, files } => {
                format!("· checkpoint {turn}: {} file(s)", files.len())
            }
            EventKind::Rewound { result } => format!(
                "· rewound to before prompt {}: {} restored, {} removed",
                result.turn,
                result.restored.len(),
                result.removed.len()
            ),
            EventKind::RewindUndone { result } => {
                format!("· undid the rewind to before prompt {}", result.turn)
            }
            EventKind::GoalCycleStarted { cycle, cap } => {
                if self.open_goal_cycle.replace(*cycle) == Some(*cycle) {
                    format!(
                        "· goal loop: cycle {cycle} of {cap} again (the daemon stopped during it)"
                    )
                } else {
                    format!("· goal loop: cycle {cycle} of {cap}")
                }
            }
            EventKind::GoalCycleFinished { cycle, done, left } => {
                self.open_goal_cycle = None;
                format!("· goal loop: cycle {cycle} done; {done} goal(s) done, {left} left")
            }
            EventKind::GoalLoopStopped { summary, .. } => {
                self.open_goal_cycle = None;
                format!("· {summary}")
            }
            EventKind::FilesChanged { paths, .. } => {
                format!("· changed on disk since read: {}", paths.join(", "))
            }
            EventKind::InstructionsChanged { sources, .. } if sources.is_empty() => {
                "· the project instructions were removed".to_owned()
            }
            EventKind::InstructionsChanged { sources, .. } => {
                format!("· project instructions changed: {}", sources.join(", "))
            }
            EventKind::ModeNotice { .. }
            | EventKind::Unknown
            | EventKind::StatusChanged { .. }
            | EventKind::AssistantDelta { .. }
            | EventKind::AssistantMessage { .. }
            | EventKind::ReasoningDelta { .. }
            | EventKind::ToolOutputDelta { .. }
            | EventKind::SubscriptionEnded { .. } => return None,
        })
    }
}

/// `text` as one shell word: bare when it holds only safe characters, else single-quoted.
fn shell_quote(text: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c);
    if !text.is_empty() && text.chars().all(safe) {
        return text.to_owned();
    }
    format!("'{}'", text.replace('\'', r"'\''"))
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

pub fn session_table(sessions: &[SessionInfo]) -> String {
    if sessions.is_empty() {
        return "no sessions yet: create one with `cwcode-cli new`\n".to_owned();
    }
    let mut out = format!(
        "{:<12}  {:<17}  {:<4}  {:<16}  {:>5}  {:<19}  {}\n",
        "ID", "STATUS", "MODE", "PROFILE", "TURNS", "UPDATED", "TITLE"
    );
    let mut damaged = String::new();
    for session in sessions {
        let status = match &session.damaged {
            Some(reason) => {
                let _ = writeln!(damaged, "  {}: {reason}", session.id);
                "DAMAGED".to_owned()
            }
            None => match &session.goal {
                Some(goal) => format!("goal {}/{}", goal.cycle, goal.cap),
                None => status_words(session.status).to_owned(),
            },
        };
        let _ = writeln!(
            out,
            "{:<12}  {:<17}  {:<4}  {:<16}  {:>5}  {:<19}  {}",
            shorten(&session.id, 12).trim_end_matches('…'),
            status,
            session.mode,
            shorten(&session.profile, 16),
            session.turns,
            session.updated.get(..19).unwrap_or(&session.updated),
            session.title
        );
    }
    if !damaged.is_empty() {
        let _ = write!(
            out,
            "\nDAMAGED sessions cannot be used until fixed (`cwcode-cli doctor` tells more):\n{damaged}"
        );
    }
    out
}

/// A session's status in the words `ls` and `show` both use.
pub fn status_words(status: SessionStatus) -> &'static str {
    match status {
        SessionStatus::Idle => "idle",
        SessionStatus::Running => "running",
        SessionStatus::AwaitingApproval => "awaiting approval",
    }
}

pub fn session_details(info: &SessionInfo) -> String {
    let damaged = info
        .damaged
        .as_ref()
        .map(|reason| format!("DAMAGED  {reason}\n"))
        .unwrap_or_default();
    damaged
        + &format!(
            "id       {}\ntitle    {}\ncwd      {}\nprofile  {}\nmode     {}\nstatus   {}\nturns    {}\nevents   {}\ncreated  {}\nupdated  {}\n",
            info.id,
            info.title,
            info.cwd,
            info.profile,
            info.mode,
            status_words(info.status),
            info.turns,
            info.last_seq,
            info.created,
            info.updated
        )
}

/// One line per item, `[ ]` pending, `[~]` in progress, `[x]` done.
pub fn todo_list(todos: &[TodoItem]) -> String {
    if todos.is_empty() {
        return "no todo list: the model writes one with its todo_write tool\n".to_owned();
    }
    let mut list = String::new();
    for todo in todos {
        let mark = match todo.status {
            TodoStatus::Pending => "[ ]",
            TodoStatus::InProgress => "[~]",
            TodoStatus::Completed => "[x]",
        };
        let _ = writeln!(list, "  {mark} {}", todo.content);
    }
    list
}

pub fn profile_table(profiles: &[ProfileInfo]) -> String {
    if profiles.is_empty() {
        return "no profiles: add one to config.json in your cwcode home\n".to_owned();
    }
    let mut out = String::new();
    for profile in profiles {
        let _ = writeln!(
            out,
            "{} {:<20} {:<32} {}{}",
            if profile.is_default { "*" } else { " " },
            profile.name,
            profile.model,
            profile.base_url,
            if profile.has_key {
                ""
            } else {
                "  (no key set)"
            }
        );
    }
    out
}

pub fn daemon_status(info: &DaemonInfo) -> String {
    format!(
        "cwcoded {} running\n  pid      {}\n  socket   {}\n  home     {}\n  uptime   {} s\n  sessions {} ({} running)\n",
        info.version,
        info.pid,
        info.socket,
        info.home,
        info.uptime_ms / 1000,
        info.sessions,
        info.running_turns
    )
}

fn percent(ratio: f64) -> String {
    format!("{:.1}%", ratio * 100.0)
}

pub fn cache_table(report: &CacheReport) -> String {
    if report.turns.is_empty() {
        return "no turns yet\n".to_owned();
    }
    let mut out = format!(
        "{:>4}  {:>4}  {:>10}  {:>10}  {:>7}  {:>11}  {:>12}\n",
        "TURN", "REQS", "PROMPT", "CACHED", "HIT", "LAST BYTES", "SHARED BYTES"
    );
    for turn in &report.turns {
        // A turn whose provider reported nothing has no figures, which is not 0.
        let unreported = turn.unreported_requests > 0 && turn.unreported_requests == turn.requests;
        let (prompt, cached, hit) = if unreported {
            ("not reported".to_owned(), "-".to_owned(), "-".to_owned())
        } else {
            (
                turn.prompt_tokens.to_string(),
                turn.cached_tokens.to_string(),
                percent(turn.hit_ratio),
            )
        };
        let _ = writeln!(
            out,
            "{:>4}  {:>4}  {:>10}  {:>10}  {:>7}  {:>11}  {:>12}",
            turn.turn,
            turn.requests,
            prompt,
            cached,
            hit,
            turn.last_request_bytes,
            turn.last_shared_prefix_bytes
        );
    }
    let _ = writeln!(
        out,
        "total: {} prompt tokens, {} cached ({}), {} output; first request {} bytes",
        report.prompt_tokens,
        report.cached_tokens,
        percent(report.hit_ratio),
        report.completion_tokens,
        report.first_request_bytes
    );
    out.push_str(&unreported_line(
        report.unreported_requests,
        report.estimated.map(|estimate| {
            format!(
                "about {} prompt tokens, {} output",
                estimate.prompt_tokens, estimate.completion_tokens
            )
        }),
    ));
    out
}

/// The requests a provider reported no usage for, and cwcode's estimate of them, marked so.
fn unreported_line(requests: u32, estimate: Option<String>) -> String {
    if requests == 0 {
        return String::new();
    }
    let estimate = estimate.map_or_else(String::new, |estimate| {
        format!("; cwcode's own estimate for them (not the provider's): {estimate}")
    });
    format!(
        "{requests} request(s): usage not reported by the provider, not counted above{estimate}\n"
    )
}

pub fn cost_table(report: &CostReport) -> String {
    let Some(prices) = &report.prices else {
        return format!(
            "profile `{}` has no price table: add \"pricing\": {{\"input_hit\": …, \"input_miss\": …, \"output\": …}} (per 1M tokens) to it in config.json\n",
            report.profile
        );
    };
    let mut out = format!(
        "prices per 1M tokens ({}): input hit {}, input miss {}, output {}\n{:>4}  {:>10}  {:>10}  {:>10}  {:>10}\n",
        report.currency,
        prices.input_hit,
        prices.input_miss,
        prices.output,
        "TURN",
        "HIT",
        "MISS",
        "OUTPUT",
        "TOTAL"
    );
    for turn in &report.turns {
        let _ = writeln!(
            out,
            "{:>4}  {:>10.6}  {:>10.6}  {:>10.6}  {:>10.6}",
            turn.turn, turn.input_hit, turn.input_miss, turn.output, turn.total
        );
    }
    let _ = writeln!(out, "total: {:.6} {}", report.total, report.currency);
    out.push_str(&unreported_line(
        report.unreported_requests,
        report
            .estimated_total
            .map(|total| format!("about {total:.6} {}", report.currency)),
    ));
    out
}

pub fn checkpoint_table(checkpoints: &[CheckpointInfo]) -> String {
    if checkpoints.is_empty() {
        return "no checkpoints yet: each prompt gets one\n".to_owned();
    }
    let mut out = String::new();
    for checkpoint in checkpoints {
        let _ = writeln!(
            out,
            "{:>4}  {}  {}  ({} file(s){})",
            checkpoint.turn,
            checkpoint.time.get(..19).unwrap_or(&checkpoint.time),
            shorten(first_line(&checkpoint.prompt), 60),
            checkpoint.files.len(),
            if checkpoint.files.is_empty() {
                String::new()
            } else {
                format!(": {}", shorten(&checkpoint.files.join(", "), 80))
            }
        );
    }
    out.push_str("rewind with `cwcode-cli rewind ID N`\n");
    out
}

pub fn rewind_summary(result: &RewindResult, undo: bool) -> String {
    let mut out = if undo {
        format!("undid the rewind to before prompt {}\n", result.turn)
    } else {
        format!("rewound to before prompt {}\n", result.turn)
    };
    for path in &result.restored {
        let _ = writeln!(out, "  restored {path}");
    }
    for path in &result.removed {
        let _ = writeln!(out, "  removed  {path}");
    }
    for failure in &result.failed {
        let _ = writeln!(out, "  FAILED   {failure}");
    }
    if !undo {
        let _ = writeln!(out, "prompt {} was:\n{}", result.turn, result.prompt);
    }
    out
}

pub fn doctor(report: &DoctorReport) -> String {
    let mark = |ok: bool| if ok { "ok " } else { "FIX" };
    let mut out = format!("cwcoded {}\n", report.version);
    let _ = writeln!(
        out,
        "[{}] home {} (mode {:o})",
        mark(report.home_mode == 0o700),
        report.home,
        report.home_mode
    );
    let _ = writeln!(
        out,
        "[{}] socket {} (mode {:o})",
        mark(report.socket_mode == 0o600),
        report.socket,
        report.socket_mode
    );
    match &report.config_error {
        None => out.push_str("[ok ] config.json loads\n"),
        Some(error) => {
            let _ = writeln!(
                out,
                "[FIX] config.json: {error}\n      the previous configuration stays in force"
            );
        }
    }
    match (&report.default_profile, &report.default_profile_problem) {
        (Some(profile), _) => {
            let _ = writeln!(out, "[ok ] default profile: {profile}");
        }
        (None, problem) => {
            let fix = problem
                .as_deref()
                .unwrap_or("set `default_profile` in config.json");
            let _ = writeln!(out, "[FIX] no usable profile: {fix}");
        }
    }
    sandbox_lines(&mut out, &report.sandbox);
    if let Some(exposed) = &report.config_key_exposed {
        let _ = writeln!(out, "[FIX] {exposed}");
    }
    for failure in &report.hook_failures {
        let _ = writeln!(out, "[FIX] hook: {failure}");
    }
    for server in &report.mcp_servers {
        let healthy = !matches!(server.state.as_str(), "failed" | "exited");
        let _ = writeln!(
            out,
            "[{}] MCP server {} ({}): {}, {} tool(s){}",
            mark(healthy),
            server.name,
            server.transport,
            server.state.replace('_', " "),
            server.tools,
            server
                .problem
                .as_deref()
                .map(|problem| format!(": {problem}"))
                .unwrap_or_default()
        );
    }
    for problem in &report.session_problems {
        let (mark, what) = if problem.loaded {
            ("note", "repaired on load")
        } else {
            ("FIX", "DAMAGED, cannot be used")
        };
        let _ = writeln!(
            out,
            "[{mark:<3}] session {} {what}: {}",
            problem.session_id, problem.problem
        );
    }
    out
}

/// The layers that keep tool commands away from the daemon, its home and the rest of the disk.
fn sandbox_lines(out: &mut String, sandbox: &SandboxReport) {
    let mark = |ok: bool| if ok { "ok " } else { "FIX" };
    match &sandbox.namespaces {
        NamespaceSupport::Bubblewrap { program } => {
            let _ = writeln!(
                out,
                "[ok ] sandbox: commands run in their own namespaces ({program}): the home is \
                 hidden, writes reach only the workspace and temp dirs, and what a command starts \
                 dies with it"
            );
        }
        NamespaceSupport::Unavailable { reason } => {
            let _ = writeln!(
                out,
                "[FIX] sandbox: no namespaces, so commands can read the daemon's home: {reason}"
            );
            let (confined, landlock) = match &sandbox.landlock {
                LandlockSupport::Enforced { abi } => {
                    (true, format!("enforced (Landlock ABI {abi})"))
                }
                LandlockSupport::Partial { abi } => (true, format!("partial (Landlock ABI {abi})")),
                LandlockSupport::Unsupported { reason } => {
                    (false, format!("unsupported ({reason})"))
                }
            };
            let _ = writeln!(
                out,
                "[{}] sandbox: writes confined to the workspace: {landlock}",
                mark(confined)
            );
        }
    }
    let layers = [
        (sandbox.environment_allow_list, "allow-listed environment"),
        (
            sandbox.descendants_refused,
            "tool processes refused as API clients",
        ),
        (sandbox.subreaper, "escaped processes adopted and reaped"),
        (
            sandbox.process_groups,
            "own process group, killed with the call",
        ),
    ];
    let missing: Vec<&str> = layers
        .iter()
        .filter(|(on, _)| !on)
        .map(|(_, name)| *name)
        .collect();
    let present: Vec<&str> = layers
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect();
    let _ = writeln!(
        out,
        "[{}] tool commands: {}{}",
        mark(missing.is_empty()),
        present.join(", "),
        if missing.is_empty() {
            String::new()
        } else {
            format!("; missing: {}", missing.join(", "))
        }
    );
}

pub fn goal_status(status: &GoalStatus) -> String {
    let mut out = format!(
        "state: {}\n{}\n{} of {} goal(s) done in {}; {} tokens used",
        status.state,
        status.summary,
        status.done,
        status.done + status.left,
        status.goals_file,
        status.tokens_used
    );
    if status.cost_used > 0.0 {
        let _ = write!(out, ", cost {:.6} {}", status.cost_used, status.currency);
    }
    let _ = write!(out, ", {} s", status.seconds_used);
    let mut left = Vec::new();
    if let Some(tokens) = status.tokens_left {
        left.push(format!("{tokens} tokens"));
    }
    if let Some(cost) = status.cost_left {
        left.push(format!("{cost:.4} {}", status.currency));
    }
    if let Some(seconds) = status.seconds_left {
        left.push(format!("{seconds} s"));
    }
    if left.is_empty() {
        out.push_str("; no budget");
    } else {
        let _ = write!(out, "; budget left: {}", left.join(", "));
    }
    out.push('\n');
    for goal in &status.goals {
        let _ = writeln!(
            out,
            "  [{}] {}",
            if goal.done { "x" } else { " " },
            goal.text
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> DoctorReport {
        DoctorReport {
            version: "0.1.0".to_owned(),
            home: "/home/u/.cwcode".to_owned(),
            socket: "/home/u/.cwcode/cwcoded.sock".to_owned(),
            home_mode: 0o700,
            socket_mode: 0o600,
            config_error: None,
            default_profile: None,
            default_profile_problem: Some("add a profile to config.json".to_owned()),
            profiles: Vec::new(),
            sandbox: SandboxReport {
                os: "linux".to_owned(),
                landlock: LandlockSupport::Enforced { abi: 7 },
                sandbox_exec: false,
                process_groups: true,
                namespaces: NamespaceSupport::Unavailable {
                    reason: "bwrap is not installed".to_owned(),
                },
                environment_allow_list: true,
                subreaper: false,
                descendants_refused: true,
                always_writable: vec!["/tmp".to_owned()],
            },
            session_problems: Vec::new(),
            config_key_exposed: None,
            hook_failures: Vec::new(),
            mcp_servers: Vec::new(),
        }
    }

    #[test]
    fn a_goal_cycle_started_twice_says_the_daemon_stopped_during_it() {
        let mut renderer = Renderer::transcript(false, "s1");
        let lines: Vec<Option<String>> = [
            EventKind::GoalCycleStarted { cycle: 4, cap: 9 },
            EventKind::GoalCycleStarted { cycle: 4, cap: 9 },
            EventKind::GoalCycleFinished {
                cycle: 4,
                done: 1,
                left: 0,
            },
            EventKind::GoalCycleStarted { cycle: 5, cap: 9 },
        ]
        .iter()
        .map(|kind| renderer.describe(kind))
        .collect();
        assert_eq!(
            lines,
            [
                Some("· goal loop: cycle 4 of 9".to_owned()),
                Some("· goal loop: cycle 4 of 9 again (the daemon stopped during it)".to_owned()),
                Some("· goal loop: cycle 4 done; 1 goal(s) done, 0 left".to_owned()),
                Some("· goal loop: cycle 5 of 9".to_owned()),
            ]
        );
    }

    #[test]
    fn doctor_names_what_to_fix_from_the_typed_report() {
        let text = doctor(&report());
        assert!(
            text.contains("[FIX] no usable profile: add a profile to config.json"),
            "{text}"
        );
        assert!(
            text.contains("[FIX] sandbox: no namespaces, so commands can read the daemon's home: bwrap is not installed"),
            "{text}"
        );
        assert!(
            text.contains(
                "[ok ] sandbox: writes confined to the workspace: enforced (Landlock ABI 7)"
            ),
            "{text}"
        );
        assert!(
            text.contains("; missing: escaped processes adopted and reaped"),
            "{text}"
        );
    }

    #[test]
    fn doctor_shows_the_default_profile_and_the_namespaces() {
        let mut report = report();
        report.default_profile = Some("deepseek".to_owned());
        report.default_profile_problem = None;
        report.sandbox.namespaces = NamespaceSupport::Bubblewrap {
            program: "/usr/bin/bwrap".to_owned(),
        };
        let text = doctor(&report);
        assert!(text.contains("[ok ] default profile: deepseek"), "{text}");
        assert!(text.contains("own namespaces (/usr/bin/bwrap)"), "{text}");
        assert!(!text.contains("writes confined"), "{text}");
    }
}

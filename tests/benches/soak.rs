//! The goal loop overnight, compressed (issue 14, SPEC §5): a 200-cycle loop against the fake
//! provider with injected 429s, streams dropped mid-answer and one daemon restart halfway. Each
//! cycle's model runs one `bash` call (every tenth also starts an escaping `setsid sleep`, which
//! the daemon must kill) and answers. Printed and checked at the end: nothing lost (journal seqs
//! contiguous across the restart; every cycle finished once, with exactly one successful `bash`
//! call, and started once but for the one the restart interrupted, which runs again under its
//! number; every turn and tool call finished; every successful call's line in the file), no
//! leaked process (the daemon's descendants and every process carrying this home's tool tag),
//! and the daemon's RSS per instance (sampled every 10 cycles, its growth within 4 MiB), printed
//! beside what grows with the cycles by design: the history sent with each request and the
//! checkpoint and journal files.
//!
//! Run: `cargo test -p cwcode-tests --bench soak` (debug binaries, a few minutes here), or
//! `cargo bench -p cwcode-tests --bench soak` (release). `SOAK_ANSWER_PAD=BYTES` pads every
//! answer, to see what the daemon's memory follows (see BENCHMARKS.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cwcode_protocol::EventKind;
use cwcode_tests::fake_provider::{FakeProvider, Reply, text, tool_calls};
use cwcode_tests::{Daemon, Home};
use serde_json::{Value, json};

const CYCLES: u32 = 200;
/// The daemon is stopped (SIGTERM, a clean drain) once this cycle has finished.
const RESTART_AFTER: u32 = 100;
const SAMPLE_EVERY: u32 = 10;
/// Every this many requests one is answered 429 …
const RATE_LIMIT_EVERY: usize = 37;
/// … and every this many has its stream cut after two frames.
const DROP_EVERY: usize = 41;
/// The most the daemon's RSS may grow between its first and last sample.
const RSS_BOUND_KIB: u64 = 4 * 1024;
const DEADLINE: Duration = Duration::from_secs(600);

#[derive(Default)]
struct Injected {
    /// Bytes of filler in each answer (`SOAK_ANSWER_PAD`, 0 unless set): a larger history per
    /// cycle, to see whether the daemon's memory follows the history or the number of cycles.
    answer_pad: usize,
    requests: AtomicUsize,
    rate_limited: AtomicUsize,
    dropped: AtomicUsize,
}

/// The model: after a tool result it answers, otherwise it runs the cycle's `bash` call. Every
/// answer is worked out from the request, so a retried or re-run request gets the same one.
fn model(request: &Value, injected: &Injected) -> Reply {
    let n = injected.requests.fetch_add(1, Ordering::SeqCst) + 1;
    if n.is_multiple_of(RATE_LIMIT_EVERY) {
        injected.rate_limited.fetch_add(1, Ordering::SeqCst);
        return Reply::Status(
            429,
            r#"{"error":{"message":"Rate limit reached, slow down"}}"#.to_owned(),
        );
    }
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let reply = if messages.last().is_some_and(|last| last["role"] == "tool") {
        text(&format!(
            "Appended this cycle's line; the goal stays open.{}",
            " filler".repeat(injected.answer_pad / 7)
        ))
    } else {
        let cycle = messages
            .iter()
            .rev()
            .filter_map(|message| message["content"].as_str())
            .find(|content| content.starts_with("[cwcode goal loop"))
            .map(str::to_owned)
            .unwrap_or_default();
        let mut command = format!(
            "echo 'request {n}, prompt of {} bytes' >> progress.txt",
            cycle.len()
        );
        if n % (2 * SAMPLE_EVERY as usize) == 1 {
            command.push_str("; setsid sleep 300 >/dev/null 2>&1 < /dev/null &");
        }
        tool_calls(&[("call", "bash", json!({ "command": command }))])
    };
    if n.is_multiple_of(DROP_EVERY) {
        injected.dropped.fetch_add(1, Ordering::SeqCst);
        if let Reply::Stream { mut frames, answer } = reply {
            frames.truncate(2);
            return Reply::Stream { frames, answer };
        }
    }
    reply
}

/// Every pid whose parent chain reaches `root`.
fn descendants(root: i32) -> Vec<i32> {
    let parents: BTreeMap<i32, i32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid …`: comm may hold spaces, so parse after its `)`.
            let after = &stat[stat.rfind(')')? + 2..];
            Some((pid, after.split(' ').nth(1)?.parse().ok()?))
        })
        .collect();
    parents
        .keys()
        .copied()
        .filter(|&pid| {
            let mut at = pid;
            for _ in 0..64 {
                match parents.get(&at) {
                    Some(&parent) if parent == root => return true,
                    Some(&parent) if parent > 1 => at = parent,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

/// The tag prefix the daemon gives the tools of `home`: the first 8 bytes of SHA-256 of its
/// path, in hex (daemon/src/sandbox/process.rs).
fn tool_tag(home: &Home) -> String {
    let mut sha = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        &mut sha.stdin.take().unwrap(),
        home.paths.home.as_os_str().as_encoded_bytes(),
    )
    .unwrap();
    let out = String::from_utf8(sha.wait_with_output().unwrap().stdout).unwrap();
    format!("CW_TOOL_GROUP={}:", &out[..16])
}

/// Processes of any parent still carrying this home's tool tag.
fn tagged(tag: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                environ
                    .split(|&byte| byte == 0)
                    .any(|entry| entry.starts_with(tag.as_bytes()))
            })
        })
        .collect()
}

fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// One daemon instance's RSS samples, as (cycle, KiB).
struct Samples(Vec<(u32, u64)>);

impl Samples {
    fn report(&self, name: &str) -> bool {
        let first = self.0.first().map_or(0, |s| s.1);
        let last = self.0.last().map_or(0, |s| s.1);
        let peak = self.0.iter().map(|s| s.1).max().unwrap_or(0);
        let flat = last.saturating_sub(first) <= RSS_BOUND_KIB;
        let all: Vec<String> = self
            .0
            .iter()
            .map(|(cycle, kib)| format!("{cycle}:{:.1}", *kib as f64 / 1024.0))
            .collect();
        println!("{name}: RSS MiB by cycle {}", all.join(" "));
        println!(
            "{name}: RSS over {} samples (cycles {}..={}): first {:.1} MiB, peak {:.1} MiB, \
             last {:.1} MiB, growth {:+.1} MiB (bound {} MiB) {}",
            self.0.len(),
            self.0.first().map_or(0, |s| s.0),
            self.0.last().map_or(0, |s| s.0),
            first as f64 / 1024.0,
            peak as f64 / 1024.0,
            last as f64 / 1024.0,
            (last as f64 - first as f64) / 1024.0,
            RSS_BOUND_KIB / 1024,
            if flat { "ok" } else { "NOT FLAT" }
        );
        flat
    }
}

/// The highest cycle finished so far, and whether the loop has stopped (with its state).
fn progress(home: &Home, id: &str) -> (u32, Option<String>) {
    let mut finished = 0;
    let mut stopped = None;
    for event in home.journal(id) {
        match event.kind {
            EventKind::GoalCycleFinished { cycle, .. } => finished = finished.max(cycle),
            EventKind::GoalLoopStopped { state, .. } => stopped = Some(state.to_string()),
            _ => {}
        }
    }
    (finished, stopped)
}

/// Runs the loop on `daemon` until `until` cycles have finished or it stops, sampling RSS and
/// descendants every `SAMPLE_EVERY` cycles from `first_sample` on (one warm-up stretch after
/// the daemon started); returns the largest number of descendants seen at a sample.
fn watch(
    home: &Home,
    id: &str,
    daemon: &Daemon,
    (first_sample, until): (u32, u32),
    samples: &mut Samples,
    started: Instant,
) -> (usize, Option<String>) {
    let mut most_descendants = 0;
    let mut next_sample = first_sample;
    loop {
        let (finished, stopped) = progress(home, id);
        if finished >= next_sample {
            samples.0.push((finished, rss_kib(daemon.pid())));
            most_descendants = most_descendants.max(descendants(daemon.pid()).len());
            next_sample = finished + SAMPLE_EVERY;
        }
        if finished >= until || stopped.is_some() {
            return (most_descendants, stopped);
        }
        assert!(
            started.elapsed() < DEADLINE,
            "the soak did not finish in {DEADLINE:?}: at cycle {finished}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let provider = runtime.block_on(FakeProvider::start());
    let injected = Arc::new(Injected {
        answer_pad: std::env::var("SOAK_ANSWER_PAD")
            .ok()
            .and_then(|pad| pad.parse().ok())
            .unwrap_or(0),
        ..Injected::default()
    });
    // Two requests a cycle, with room for every retry and a re-run cycle.
    for _ in 0..(CYCLES as usize * 3) {
        let injected = Arc::clone(&injected);
        provider.then(move |request| model(request, &injected));
    }
    let home = Home::new(&provider.url);
    let tag = tool_tag(&home);
    let started = Instant::now();

    let daemon = home.start_daemon();
    let id = home.new_session("yolo");
    home.cli_ok(&["goal", &id, "add", "keep the progress file growing"]);
    let cap = CYCLES.to_string();
    home.cli_ok(&["goal", &id, "on", "--cap", &cap, "--no-budget"]);

    let mut first_rss = Samples(Vec::new());
    let (most_first, stopped) = watch(
        &home,
        &id,
        &daemon,
        (SAMPLE_EVERY, RESTART_AFTER),
        &mut first_rss,
        started,
    );
    assert!(stopped.is_none(), "the loop stopped early: {stopped:?}");
    let pid_before = daemon.pid();
    let requests_before_restart = injected.requests.load(Ordering::SeqCst);
    let status = daemon.terminate();
    let restarted_at = progress(&home, &id).0;
    let left_by_first = descendants(pid_before).len() + tagged(&tag).len();
    println!(
        "restart: the daemon (pid {pid_before}) was stopped after cycle {restarted_at} ({status}); \
         tool processes left after it: {left_by_first}"
    );

    let daemon = home.start_daemon();
    let mut second_rss = Samples(Vec::new());
    let (most_second, stopped) = watch(
        &home,
        &id,
        &daemon,
        (restarted_at + SAMPLE_EVERY, CYCLES),
        &mut second_rss,
        started,
    );
    // The cap ends the loop right after the last cycle; wait for that announcement.
    let state = match stopped {
        Some(state) => state,
        None => loop {
            if let (_, Some(state)) = progress(&home, &id) {
                break state;
            }
            assert!(started.elapsed() < DEADLINE, "the loop never stopped");
            std::thread::sleep(Duration::from_millis(100));
        },
    };
    let elapsed = started.elapsed();
    let idle_descendants = descendants(daemon.pid()).len();
    let idle_tagged = tagged(&tag).len();
    let goal: Value =
        serde_json::from_str(&home.cli_ok(&["goal", &id, "status", "--json"])).unwrap();
    drop(daemon);
    let after_all = tagged(&tag).len();

    // Nothing lost.
    let journal = home.journal(&id);
    let seqs: Vec<u64> = journal.iter().map(|event| event.seq).collect();
    let gaps = seqs
        .windows(2)
        .filter(|pair| pair[1] != pair[0] + 1)
        .count();
    let mut started_cycles: BTreeMap<u32, usize> = BTreeMap::new();
    let mut finished_cycles: BTreeMap<u32, usize> = BTreeMap::new();
    let (mut calls_started, mut calls_finished, mut retries) = (0, 0, 0);
    // A call the restart interrupted finishes as an error, with or without its line written.
    let mut calls_succeeded = 0;
    let (mut turns_started, mut turns_finished) = (0, 0);
    // Finished cycles whose turn did not make exactly one successful call (the cycle's work),
    // with the events of the first such cycle. The attempt a restart interrupted finishes no
    // cycle, whatever its call did; its re-run is the one counted.
    let mut in_cycle: Option<(u32, usize, Vec<String>)> = None;
    let mut without_call: Vec<u32> = Vec::new();
    let mut first_without_call: Vec<String> = Vec::new();
    for event in &journal {
        if let Some((_, succeeded, events)) = &mut in_cycle {
            *succeeded += usize::from(matches!(
                event.kind,
                EventKind::ToolCallFinished {
                    is_error: false,
                    ..
                }
            ));
            events.push(serde_json::to_string(event).unwrap_or_default());
        }
        if let EventKind::GoalCycleStarted { cycle, .. } = &event.kind {
            in_cycle = Some((*cycle, 0, Vec::new()));
        }
        if let EventKind::GoalCycleFinished { .. } = &event.kind
            && let Some((cycle, succeeded, events)) = in_cycle.take()
            && succeeded != 1
        {
            without_call.push(cycle);
            if first_without_call.is_empty() {
                first_without_call = events;
            }
        }
        match &event.kind {
            EventKind::GoalCycleStarted { cycle, .. } => {
                *started_cycles.entry(*cycle).or_default() += 1;
            }
            EventKind::GoalCycleFinished { cycle, .. } => {
                *finished_cycles.entry(*cycle).or_default() += 1;
            }
            EventKind::ToolCallStarted { .. } => calls_started += 1,
            EventKind::ToolCallFinished { is_error, .. } => {
                calls_finished += 1;
                calls_succeeded += usize::from(!is_error);
            }
            EventKind::ProviderRetrying { .. } => retries += 1,
            EventKind::TurnStarted { .. } => turns_started += 1,
            EventKind::TurnFinished { .. } => turns_finished += 1,
            _ => {}
        }
    }
    // The cycle in flight when the daemon stopped is interrupted with its turn closed and not
    // journalled as finished; the restarted daemon runs it again under its number (SPEC §5). A
    // stop between two cycles leaves none interrupted.
    let interrupted: Vec<u32> = started_cycles
        .iter()
        .filter(|(cycle, count)| **count > finished_cycles.get(cycle).copied().unwrap_or(0))
        .map(|(cycle, _)| *cycle)
        .collect();
    let missing: Vec<u32> = (1..=CYCLES)
        .filter(|cycle| finished_cycles.get(cycle) != Some(&1))
        .collect();
    let run_twice: Vec<u32> = started_cycles
        .iter()
        .filter(|(cycle, count)| **count > 2 || (**count == 2 && **cycle != restarted_at + 1))
        .map(|(cycle, _)| *cycle)
        .collect();
    let lines = std::fs::read_to_string(home.workspace.join("progress.txt"))
        .map_or(0, |text| text.lines().count());

    println!(
        "{CYCLES}-cycle goal loop, one restart, {:.1} s in all ({:.0} ms a cycle)",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e3 / f64::from(CYCLES)
    );
    println!(
        "provider: {} requests, {} answered 429, {} streams dropped; {retries} retries journalled",
        injected.requests.load(Ordering::SeqCst),
        injected.rate_limited.load(Ordering::SeqCst),
        injected.dropped.load(Ordering::SeqCst),
    );
    println!(
        "end state `{state}` at cycle {} (goal status says `{}`, reason {})",
        goal["cycle"], goal["state"], goal["stopReason"]
    );
    for event in &journal {
        if let EventKind::Error { message } = &event.kind {
            println!("  error event at seq {}: {message}", event.seq);
        }
    }
    println!(
        "journal: {} events, seq {}..={}, {gaps} gaps; cycles finished once: {} of {CYCLES}, \
         interrupted by the restart and run again: {interrupted:?}, unaccounted for: {missing:?}, \
         started more than once otherwise: {run_twice:?}; turns: {turns_started} started, {turns_finished} finished",
        seqs.len(),
        seqs.first().unwrap_or(&0),
        seqs.last().unwrap_or(&0),
        finished_cycles
            .values()
            .filter(|count| **count == 1)
            .count(),
    );
    println!(
        "tool calls: {calls_started} started, {calls_finished} finished, {calls_succeeded} \
         succeeded; progress.txt has {lines} \
         lines; cycles finished without exactly one successful call: {without_call:?}"
    );
    for line in first_without_call.iter().take(40) {
        println!("  {}", &line[..line.len().min(300)]);
    }
    println!(
        "processes: at most {most_first} / {most_second} descendants of the daemon at a sample \
         (first / second instance); after the loop: {idle_descendants} descendants, \
         {idle_tagged} tagged; after the last daemon stopped: {after_all} tagged"
    );
    let rss_ok = first_rss.report("daemon 1") & second_rss.report("daemon 2");
    // What the session holds in memory and grows with every cycle by design: its history
    // (sent whole in each request, so a request's size is the history's) and the checkpoint
    // of every prompt (for /rewind), which `checkpoints.jsonl` holds too.
    let bodies = provider.bodies();
    let kib = |bytes: usize| bytes as f64 / 1024.0;
    let body_at = |index: usize| bodies.get(index).map_or(0, Vec::len);
    let (first_body, last_body) = (body_at(0), bodies.last().map_or(0, Vec::len));
    let session_dir = home.paths.session_dir(&id);
    let file_kib = |name: &str| {
        std::fs::metadata(session_dir.join(name)).map_or(0.0, |meta| kib(meta.len() as usize))
    };
    println!(
        "history sent with each request: {:.1} KiB at the first, {:.1} KiB at the restart, \
         {:.1} KiB at the last ({:.2} KiB a cycle); checkpoints.jsonl {:.1} KiB, events.jsonl \
         {:.1} KiB",
        kib(first_body),
        kib(body_at(requests_before_restart.saturating_sub(1))),
        kib(last_body),
        kib(last_body.saturating_sub(first_body)) / f64::from(CYCLES),
        file_kib("checkpoints.jsonl"),
        file_kib("events.jsonl"),
    );

    let lost = gaps > 0
        || !missing.is_empty()
        || !run_twice.is_empty()
        || calls_started != calls_finished
        || interrupted.len() > 1
        || turns_started != turns_finished
        || !without_call.is_empty()
        || lines < calls_succeeded
        || lines > calls_started;
    let leaked = left_by_first + idle_descendants + idle_tagged + after_all > 0;
    println!(
        "nothing lost: {}; no leaked process: {}; RSS flat: {}",
        if lost { "NO" } else { "yes" },
        if leaked { "NO" } else { "yes" },
        if rss_ok { "yes" } else { "NO" },
    );
    assert!(
        state == "capped",
        "the loop ended `{state}`, not at its cap"
    );
    assert!(!lost && !leaked && rss_ok, "the soak failed: see above");
}

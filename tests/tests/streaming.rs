//! Streaming at scale through the real daemon (SPEC §4, §11): a tool that prints 200 MB leaves a
//! bounded journal and flat daemon memory, twenty followers of a fast burst all see every event
//! once, and clients that never read are dropped without slowing anyone else.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use cwcode_protocol::{Client, ConnectOptions, Event, EventKind};
use cwcode_tests::Home;
use cwcode_tests::fake_provider::{FakeProvider, Frame, Reply, last_tool_result, text, tool_calls};
use serde_json::{Value, json};

/// The daemon's resident memory, in bytes.
fn rss_bytes(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .expect("VmRSS in /proc/PID/status");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|number| number.parse().ok())
        .unwrap();
    kib * 1024
}

fn journal_len(home: &Home, id: &str) -> u64 {
    std::fs::metadata(home.paths.session_dir(id).join("events.jsonl"))
        .unwrap()
        .len()
}

/// Reads a subscription from `since` until it has delivered `last_seq`.
async fn replay_to(client: &Client, id: &str, since: u64, last_seq: u64) -> Vec<u64> {
    let mut stream = client.subscribe(id, Some(since)).await.unwrap();
    let mut seqs = Vec::new();
    while seqs.last() != Some(&last_seq) {
        let event = tokio::time::timeout(Duration::from_secs(60), stream.next())
            .await
            .expect("the replay stalled")
            .expect("the stream closed")
            .unwrap();
        seqs.push(event.seq);
    }
    seqs
}

const MB: u64 = 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_mb_tool_output_leaves_a_small_journal_and_flat_memory() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    let id = home.new_session("yolo");
    let command = "head -c 200000000 /dev/zero | tr '\\0' a; echo; echo the-end";
    provider
        .reply(tool_calls(&[(
            "call_big",
            "bash",
            json!({"command": command, "timeout_secs": 600}),
        )]))
        .reply(text("done"));
    let journal_before = journal_len(&home, &id);
    let rss_before = rss_bytes(daemon.pid());

    home.cli_ok(&["send", &id, "print a lot", "--wait"]);

    let grown = journal_len(&home, &id) - journal_before;
    assert!(grown < 2 * MB, "the journal grew by {grown} bytes");
    let seen = last_tool_result(&provider.requests()[1]);
    assert!(seen.starts_with("aaaa"), "{}", &seen[..100]);
    assert!(seen.contains("bytes of output omitted"), "{seen:.200}");
    assert!(seen.contains("the-end"), "the model lost the tail");
    assert!(seen.len() < 40 * 1024, "the model got {} bytes", seen.len());

    let journal = home.journal(&id);
    let spilled = journal
        .iter()
        .find_map(|event| match &event.kind {
            EventKind::ToolOutputSpilled {
                call_id,
                path,
                total_bytes,
                spilled_bytes,
            } => {
                assert_eq!(call_id, "call_big");
                Some((path.clone(), *total_bytes, *spilled_bytes))
            }
            _ => None,
        })
        .expect("a tool_output_spilled event");
    let (path, total_bytes, spilled_bytes) = spilled;
    assert!(total_bytes > 200_000_000, "{total_bytes}");
    let spill = std::fs::metadata(&path).unwrap();
    assert!(
        spill.len() >= spilled_bytes && spilled_bytes >= 64 * MB,
        "{} / {spilled_bytes}",
        spill.len()
    );
    assert!(Path::new(&path).starts_with(home.paths.session_dir(&id)));
    let streamed: String = journal
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::ToolOutputDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        streamed.contains(&path),
        "the stream does not say where the rest is"
    );
    assert!(streamed.trim_end().ends_with("the-end"));
    let shown = home.cli(&["events", &id]);
    assert!(shown.status.success());
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains(&format!("is in {path}")),
        "`events` does not name the spill file"
    );

    let last_seq = journal.last().unwrap().seq;
    let client = home.client().await;
    for _ in 0..10 {
        let seqs = replay_to(&client, &id, 0, last_seq).await;
        assert_eq!(seqs, (1..=last_seq).collect::<Vec<_>>());
    }
    let rss_after = rss_bytes(daemon.pid());
    println!(
        "journal grew by {grown} bytes for {total_bytes} bytes of output; daemon RSS {:.1} MiB before, {:.1} MiB after the turn and ten replays",
        rss_before as f64 / MB as f64,
        rss_after as f64 / MB as f64
    );
    assert!(
        rss_after < rss_before + 50 * MB,
        "daemon RSS went from {} to {} MiB",
        rss_before / MB,
        rss_after / MB
    );
}

fn send_wait(home: &Home, id: &str, prompt: &str) -> tokio::task::JoinHandle<std::process::Output> {
    let mut command = home.command("cwcode-cli");
    command
        .args(["send", id, prompt, "--wait"])
        .stdin(std::process::Stdio::null());
    tokio::task::spawn_blocking(move || command.output().unwrap())
}

/// Polls the end of a journal until it records that `turn` finished.
async fn wait_until_turn_ends(journal: &Path, turn: u32) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let text = std::fs::read_to_string(journal).unwrap();
        let ended = text.lines().rev().take(8).any(|line| {
            serde_json::from_str::<Event>(line).is_ok_and(
                |event| matches!(event.kind, EventKind::TurnFinished { turn: t, .. } if t == turn),
            )
        });
        if ended {
            return;
        }
        assert!(Instant::now() < deadline, "turn {turn} never ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn assert_succeeded(output: &std::process::Output) {
    assert!(
        output.status.success(),
        "send --wait failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Twenty followers of two bursts: 88,000 five-character chunks of one answer (coalesced into a
/// few hundred events), then 10,000 alternating reasoning and text chunks that cannot be
/// coalesced, more than the daemon lets a subscriber fall behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_followers_of_an_88k_delta_burst_see_every_event_once() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let id = home.new_session("code");
    let answer = "abcd ".repeat(88_000);
    provider.reply(text(&answer));
    provider.reply(interleaved_thoughts(5000));

    let mut followers = Vec::new();
    for follower in 0..20 {
        // Two followers stop reading over a small buffer while the second burst is published:
        // they fall further behind than the daemon allows, are dropped and must resume.
        let slow = follower < 2;
        let journal_path = home.paths.session_dir(&id).join("events.jsonl");
        let mut options = ConnectOptions::new(home.paths.clone());
        options.autostart = false;
        if slow {
            options.subscription_buffer = 64;
        }
        let client = Client::connect(&options).await.unwrap();
        let mut stream = client.subscribe(&id, Some(0)).await.unwrap();
        followers.push(tokio::spawn(async move {
            let mut events = Vec::new();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
            loop {
                let event = tokio::time::timeout_at(deadline, stream.next())
                    .await
                    .expect("the turns did not end in time")
                    .expect("stream closed")
                    .unwrap();
                if slow && matches!(event.kind, EventKind::TurnStarted { turn: 2, .. }) {
                    wait_until_turn_ends(&journal_path, 2).await;
                }
                let done = matches!(event.kind, EventKind::TurnFinished { turn: 2, .. });
                events.push(event);
                if done {
                    break;
                }
            }
            drop(client);
            (slow, events, stream.resumed())
        }));
    }
    let first = send_wait(&home, &id, "stream a lot").await.unwrap();
    assert_succeeded(&first);
    assert_eq!(
        String::from_utf8(first.stdout).unwrap().trim_end(),
        answer.trim_end()
    );
    let first_turn_events = home.journal(&id).len();
    let second = send_wait(&home, &id, "think aloud").await.unwrap();
    assert_succeeded(&second);

    let journal = home.journal(&id);
    let deltas = journal[..first_turn_events]
        .iter()
        .filter(|event| matches!(event.kind, EventKind::AssistantDelta { .. }))
        .count();
    assert!(
        deltas < 1000,
        "{deltas} delta events for 88,000 chunks: not coalesced"
    );
    assert!(journal.len() - first_turn_events > 10_000);
    let journal: Vec<u64> = journal.iter().map(|event| event.seq).collect();
    for follower in followers {
        let (slow, events, resumed) = follower.await.unwrap();
        if slow {
            assert!(resumed > 0, "a slow follower was never dropped");
        }
        let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
        assert_eq!(
            seqs,
            journal[..seqs.len()],
            "a follower missed or repeated events"
        );
        assert_eq!(
            seqs.len(),
            journal.len() - 1,
            "all but the last status event"
        );
        let streamed: String = events
            .iter()
            .filter_map(|event| match &event.kind {
                EventKind::AssistantDelta { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(streamed, answer.clone() + &"c".repeat(5000));
    }
}

fn frame(delta: Value, finish_reason: Option<&str>) -> Frame {
    let chunk = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake-model",
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]});
    Frame {
        delay: Duration::ZERO,
        bytes: format!("data: {chunk}\n\n"),
    }
}

/// An answer whose reasoning and text alternate `count` times: every chunk its own event, since
/// only consecutive deltas of one kind are coalesced. The reasoning is not sent back, so the
/// session's requests stay small.
fn interleaved_thoughts(count: usize) -> Reply {
    let thought = "r".repeat(1000);
    let mut frames = vec![frame(json!({"role": "assistant", "content": ""}), None)];
    for _ in 0..count {
        frames.push(frame(json!({"reasoning_content": thought}), None));
        frames.push(frame(json!({"content": "c"}), None));
    }
    frames.push(frame(json!({}), Some("stop")));
    frames.push(Frame {
        delay: Duration::ZERO,
        bytes: "data: [DONE]\n\n".to_owned(),
    });
    let answer = json!({"role": "assistant", "content": "c".repeat(count)}).to_string();
    Reply::Stream { frames, answer }
}

/// A WebSocket client on the daemon's socket that subscribes and then reads nothing.
struct SilentSubscriber {
    socket: UnixStream,
}

impl SilentSubscriber {
    fn subscribe(socket_path: &Path, id: &str) -> Self {
        let mut socket = UnixStream::connect(socket_path).unwrap();
        socket
            .write_all(
                b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                  Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
            )
            .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8];
        while !head.ends_with(b"\r\n\r\n") {
            socket.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        assert!(
            head.starts_with(b"HTTP/1.1 101"),
            "{}",
            String::from_utf8_lossy(&head)
        );
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "session/subscribe",
                             "params": {"sessionId": id, "since": 0}})
        .to_string();
        // A masked text frame (the zero mask leaves the payload as it is).
        let mut frame = vec![0x81u8];
        let len = request.len();
        if len < 126 {
            frame.push(0x80 | len as u8);
        } else {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(len as u16).to_be_bytes());
        }
        frame.extend_from_slice(&[0, 0, 0, 0]);
        frame.extend_from_slice(request.as_bytes());
        socket.write_all(&frame).unwrap();
        Self { socket }
    }

    /// Whether the daemon closed the connection: everything it had sent is read, then end of file.
    fn closed_by_the_daemon(&mut self, within: Duration) -> bool {
        self.socket.set_read_timeout(Some(within)).unwrap();
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match self.socket.read(&mut buffer) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
    }

    /// Reads the notifications' events until the subscription ends or nothing comes for a while.
    fn read_events(&mut self) -> Vec<Event> {
        self.socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut events = Vec::new();
        let mut message = Vec::new();
        loop {
            let mut header = [0u8; 2];
            if self.socket.read_exact(&mut header).is_err() {
                return events;
            }
            let len = match header[1] & 0x7f {
                126 => {
                    let mut bytes = [0u8; 2];
                    self.socket.read_exact(&mut bytes).unwrap();
                    u64::from(u16::from_be_bytes(bytes))
                }
                127 => {
                    let mut bytes = [0u8; 8];
                    self.socket.read_exact(&mut bytes).unwrap();
                    u64::from_be_bytes(bytes)
                }
                short => u64::from(short),
            };
            let mut payload = vec![0u8; len as usize];
            self.socket.read_exact(&mut payload).unwrap();
            match header[0] & 0x0f {
                0 | 1 => message.extend_from_slice(&payload),
                8 => return events,
                _ => continue,
            }
            if header[0] & 0x80 == 0 {
                continue;
            }
            let value: Value = serde_json::from_slice(&message).unwrap();
            message.clear();
            if let Some(result) = value.pointer("/params/result") {
                let event: Event = serde_json::from_value(result.clone()).unwrap();
                let ended = matches!(event.kind, EventKind::SubscriptionEnded { .. });
                events.push(event);
                if ended {
                    return events;
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_that_never_read_are_dropped_and_slow_nobody() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    let id = home.new_session("code");
    // Enough events to fill a silent client's buffers many times over.
    provider.reply(interleaved_thoughts(3000));
    home.cli_ok(&["send", &id, "think aloud", "--wait"]);
    let last_seq = home.journal(&id).last().unwrap().seq;
    assert!(last_seq > 5000, "{last_seq}");
    let rss_before = rss_bytes(daemon.pid());

    let mut silent: Vec<SilentSubscriber> = (0..5)
        .map(|_| SilentSubscriber::subscribe(&home.paths.socket, &id))
        .collect();

    // Everyone else is served as usual meanwhile.
    let started = Instant::now();
    home.cli_ok(&["ls"]);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "ls took {:?}",
        started.elapsed()
    );
    let client = home.client().await;
    let seqs = replay_to(&client, &id, 0, last_seq).await;
    assert_eq!(seqs, (1..=last_seq).collect::<Vec<_>>());

    // The send deadline is 5 s: past it, each silent client's subscription is ended.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let rss_during = rss_bytes(daemon.pid());
    assert!(
        rss_during < rss_before + 50 * MB,
        "daemon RSS went from {} to {} MiB with five silent subscribers",
        rss_before / MB,
        rss_during / MB
    );
    for subscriber in &mut silent {
        let events = subscriber.read_events();
        let (ended, delivered) = events.split_last().expect("no event at all");
        let EventKind::SubscriptionEnded {
            last_seq: resume_from,
            resumable,
            ..
        } = &ended.kind
        else {
            panic!("the subscription was not ended: last event {ended:?}");
        };
        assert_eq!(ended.seq, 0, "the marker reuses a real event's seq");
        assert!(*resumable);
        assert_eq!(Some(*resume_from), delivered.last().map(|event| event.seq));
        assert!(
            *resume_from < last_seq,
            "the silent client was never dropped"
        );
        let seqs: Vec<u64> = delivered.iter().map(|event| event.seq).collect();
        assert_eq!(seqs, (1..=*resume_from).collect::<Vec<_>>());
    }
    let started = Instant::now();
    home.cli_ok(&["ls"]);
    assert!(started.elapsed() < Duration::from_secs(2));

    // One that never reads at all: once its writes have stalled past the limit (15 s), the
    // daemon closes its socket, and with it what was queued for it.
    let mut dead = SilentSubscriber::subscribe(&home.paths.socket, &id);
    assert!(
        dead.closed_by_the_daemon(Duration::from_secs(40)),
        "the daemon kept a client that never reads"
    );
}

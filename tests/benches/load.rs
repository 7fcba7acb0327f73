//! A bounded load on one daemon over its Unix socket (SPEC §11): 100 sessions, 20 clients
//! following one session whose turn streams about 1,000 uncoalescable events a second, and about
//! 1,000 calls a second from ten other connections, for `CWCODE_BENCH_SECS` (default 60) seconds.
//!
//! Reported: the fan-out delay of each event to each follower (receipt − the event's journal time,
//! which has millisecond resolution, and the spread between the first and the last follower to
//! receive it, measured on one clock), events lost or duplicated per follower, call latency under
//! load beside the same call on the idle daemon, and the daemon's RSS and CPU.
//!
//! Run: `cargo bench -p cwcode-tests --bench load` (`CWCODE_BENCH_SECS=10` for a short run).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cwcode_protocol::{Client, CreateSessionParams, EventKind, Mode};
use cwcode_tests::Home;
use cwcode_tests::fake_provider::{FakeProvider, Frame, Reply};
use serde_json::json;

const SESSIONS: usize = 100;
const FOLLOWERS: usize = 20;
const CALLERS: usize = 10;
const CALLS_PER_SECOND: u64 = 1000;
/// A reasoning and a text chunk alternate, so that no two events coalesce.
const EVENTS_PER_SECOND: u64 = 1000;

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_by(f64::total_cmp);
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}

/// Milliseconds since the epoch of an RFC 3339 UTC time as the daemon writes it
/// (`2026-12-01T09:59:34.123Z`).
fn rfc3339_millis(time: &str) -> f64 {
    let number = |range: std::ops::Range<usize>| -> i64 { time[range].parse().unwrap() };
    let (year, month, day) = (number(0..4), number(5..7), number(8..10));
    let (hour, minute, second) = (number(11..13), number(14..16), number(17..19));
    let fraction_digits = time[19..time.len() - 1].trim_start_matches('.');
    let fraction_seconds = fraction_digits.parse::<f64>().map_or(0.0, |digits| {
        digits / 10f64.powi(fraction_digits.len() as i32)
    });
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second;
    (seconds as f64 + fraction_seconds) * 1000.0
}

fn now_millis() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

struct Usage {
    rss_kib: u64,
    cpu_ticks: u64,
}

fn usage(pid: i32) -> Usage {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss_kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    let cpu_ticks = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Usage { rss_kib, cpu_ticks }
}

fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0)
}

fn frame(delta: serde_json::Value, finish_reason: Option<&str>, delay: Duration) -> Frame {
    let chunk = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake-model",
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]});
    Frame {
        delay,
        bytes: format!("data: {chunk}\n\n"),
    }
}

/// An answer streaming `count` events, alternating reasoning and text, at `per_second`. Ten go
/// out together every ten milliseconds: a timer cannot pace single milliseconds.
fn long_stream(count: u64, per_second: u64) -> Reply {
    let batch = (per_second / 100).max(1);
    let mut frames = vec![frame(
        json!({"role": "assistant", "content": ""}),
        None,
        Duration::ZERO,
    )];
    for index in 0..count {
        let delta = if index % 2 == 0 {
            json!({"reasoning_content": "thinking "})
        } else {
            json!({"content": "word "})
        };
        let pause = if index % batch == 0 {
            Duration::from_millis(10)
        } else {
            Duration::ZERO
        };
        frames.push(frame(delta, None, pause));
    }
    frames.push(frame(json!({}), Some("stop"), Duration::ZERO));
    frames.push(Frame {
        delay: Duration::ZERO,
        bytes: "data: [DONE]\n\n".to_owned(),
    });
    let answer = json!({"role": "assistant", "content": "word ".repeat(count as usize / 2)});
    Reply::Stream {
        frames,
        answer: answer.to_string(),
    }
}

/// What one follower saw: `seq` → (receipt in ms since the epoch, on one monotonic base), and
/// how many `seq`s arrived more than once.
struct Seen {
    received: HashMap<u64, (f64, Instant)>,
    delays: Vec<f64>,
    duplicates: usize,
}

async fn follow(client: Client, id: String, since: u64) -> Seen {
    let mut stream = client.subscribe(&id, Some(since)).await.unwrap();
    let mut seen = Seen {
        received: HashMap::new(),
        delays: Vec::new(),
        duplicates: 0,
    };
    while let Some(event) = stream.next().await {
        let event = event.unwrap();
        let at = Instant::now();
        let wall = now_millis();
        if seen.received.insert(event.seq, (wall, at)).is_some() {
            seen.duplicates += 1;
        }
        seen.delays.push(wall - rfc3339_millis(&event.time));
        if matches!(event.kind, EventKind::TurnFinished { .. }) {
            break;
        }
    }
    drop(client);
    seen
}

async fn call_latencies(client: Arc<Client>, ids: Arc<Vec<String>>, calls: u64) -> Vec<f64> {
    let mut latencies = Vec::with_capacity(calls as usize);
    for index in 0..calls {
        let started = Instant::now();
        let id = &ids[index as usize % ids.len()];
        if index % 10 == 9 {
            client.list_sessions().await.unwrap();
        } else {
            client.get_session(id).await.unwrap();
        }
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    latencies
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let seconds: u64 = std::env::var("CWCODE_BENCH_SECS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(60);
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    let pid = daemon.pid();
    let admin = Arc::new(home.client().await);

    let mut ids = Vec::new();
    for index in 0..SESSIONS {
        let info = admin
            .create_session(&CreateSessionParams {
                cwd: home.workspace.display().to_string(),
                profile: None,
                mode: Some(Mode::Code),
                title: Some(format!("load {index}")),
            })
            .await
            .unwrap();
        ids.push(info.id);
    }
    let ids = Arc::new(ids);
    let streaming = ids[0].clone();

    // The reference: the same calls, one connection, the daemon idle.
    let mut idle = call_latencies(Arc::clone(&admin), Arc::clone(&ids), 2000).await;
    let idle_p50 = percentile(&mut idle, 0.5);
    let idle_p99 = percentile(&mut idle, 0.99);

    let events = seconds * EVENTS_PER_SECOND;
    provider.reply(long_stream(events, EVENTS_PER_SECOND));
    let since = admin.get_session(&streaming).await.unwrap().last_seq;
    let mut followers = Vec::new();
    for _ in 0..FOLLOWERS {
        let client = home.client().await;
        followers.push(tokio::spawn(follow(client, streaming.clone(), since)));
    }

    let before = usage(pid);
    let started = Instant::now();
    admin.send(&streaming, "stream for a while").await.unwrap();
    let mut callers = Vec::new();
    for caller in 0..CALLERS {
        let client = Arc::new(home.client().await);
        let ids = Arc::clone(&ids);
        let per_caller = CALLS_PER_SECOND / CALLERS as u64;
        callers.push(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(Duration::from_micros(
                1_000_000 / per_caller + caller as u64,
            ));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut latencies = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(seconds);
            let mut index = caller;
            while Instant::now() < deadline {
                ticks.tick().await;
                let call = Instant::now();
                let id = &ids[index % ids.len()];
                if index % 10 == 9 {
                    client.list_sessions().await.unwrap();
                } else {
                    client.get_session(id).await.unwrap();
                }
                latencies.push(call.elapsed().as_secs_f64() * 1000.0);
                index += CALLERS;
            }
            latencies
        }));
    }
    let sampler = {
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&done);
        let handle = tokio::spawn(async move {
            let mut peak = 0;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(usage(pid).rss_kib);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            peak
        });
        (done, handle)
    };

    let mut latencies = Vec::new();
    for caller in callers {
        latencies.extend(caller.await.unwrap());
    }
    let calls_done = latencies.len();
    let call_window = started.elapsed();
    let mut seen = Vec::new();
    for follower in followers {
        seen.push(follower.await.unwrap());
    }
    let elapsed = started.elapsed();
    let after = usage(pid);
    sampler.0.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak_rss_kib = sampler.1.await.unwrap().max(after.rss_kib);

    let journal: Vec<u64> = home
        .journal(&streaming)
        .iter()
        .map(|event| event.seq)
        .filter(|&seq| seq > since)
        .collect();
    let last = seen
        .iter()
        .flat_map(|s| s.received.keys().copied())
        .max()
        .unwrap_or(0);
    let expected: Vec<u64> = journal.into_iter().filter(|&seq| seq <= last).collect();
    let mut lost = 0;
    let mut duplicated = 0;
    let mut delays = Vec::new();
    let mut spreads = Vec::new();
    for follower in &seen {
        lost += expected
            .iter()
            .filter(|seq| !follower.received.contains_key(seq))
            .count();
        duplicated += follower.duplicates;
        delays.extend(follower.delays.iter().copied());
    }
    for seq in &expected {
        let times: Vec<Instant> = seen
            .iter()
            .filter_map(|follower| follower.received.get(seq).map(|(_, at)| *at))
            .collect();
        if let (Some(first), Some(last)) = (times.iter().min(), times.iter().max()) {
            spreads.push(last.duration_since(*first).as_secs_f64() * 1000.0);
        }
    }
    let ticks = clock_ticks_per_second();
    let cpu = (after.cpu_ticks - before.cpu_ticks) as f64 / ticks;

    println!("load: {seconds} s, {SESSIONS} sessions, {FOLLOWERS} followers, {CALLERS} callers");
    println!(
        "streamed events       {} in {:.1} s ({:.0}/s), each to {FOLLOWERS} followers",
        expected.len(),
        elapsed.as_secs_f64(),
        expected.len() as f64 / elapsed.as_secs_f64()
    );
    println!(
        "fan-out delay         p50 {:.2} ms  p99 {:.2} ms  (receipt − journal time; the time has 1 ms resolution)",
        percentile(&mut delays, 0.5),
        percentile(&mut delays, 0.99)
    );
    println!(
        "fan-out spread        p50 {:.2} ms  p99 {:.2} ms  (first to last of the {FOLLOWERS} followers, one clock)",
        percentile(&mut spreads, 0.5),
        percentile(&mut spreads, 0.99)
    );
    println!("events lost           {lost}");
    println!("events duplicated     {duplicated}");
    println!(
        "calls                 {calls_done} in {:.1} s ({:.0}/s): p50 {:.2} ms  p99 {:.2} ms; idle daemon p50 {idle_p50:.2} ms  p99 {idle_p99:.2} ms; ratio p50 {:.2}×",
        call_window.as_secs_f64(),
        calls_done as f64 / call_window.as_secs_f64(),
        percentile(&mut latencies, 0.5),
        percentile(&mut latencies, 0.99),
        percentile(&mut latencies, 0.5) / idle_p50
    );
    println!(
        "daemon RSS            {:.1} MiB before, {:.1} MiB peak, {:.1} MiB after",
        before.rss_kib as f64 / 1024.0,
        peak_rss_kib as f64 / 1024.0,
        after.rss_kib as f64 / 1024.0
    );
    println!(
        "daemon CPU            {cpu:.1} s over {:.1} s: {:.0}% of one core",
        elapsed.as_secs_f64(),
        cpu / elapsed.as_secs_f64() * 100.0
    );
    assert_eq!(lost + duplicated, 0, "events were lost or duplicated");
}

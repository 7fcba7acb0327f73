//! MCP servers through the real daemon (SPEC §7.4): the reference server from npm
//! (`@modelcontextprotocol/server-everything`, installed by `npm ci --prefix tests/mcp`) started
//! over stdio, whose `echo` and `get-sum` the fake model calls, and over streamable HTTP with a
//! call that outlasts its timeout; servers of the test's own: one that dies in the middle of a
//! call, one that records being told a call was cancelled (on a timeout and on the user's
//! cancel); and a server that cannot start at all.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cwcode_protocol::EventKind;
use cwcode_tests::fake_provider::{FakeProvider, last_tool_result, text, tool_calls};
use cwcode_tests::{Daemon, Home, wait_for_event, wait_for_socket};
use serde_json::{Value, json};

const MCP_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/mcp");

fn everything_script() -> PathBuf {
    Path::new(MCP_DIR).join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// Whether node and the installed server are here. Under CI they must be: the test fails
/// instead of skipping.
fn node_ready() -> bool {
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if node && everything_script().is_file() {
        return true;
    }
    let missing = if node {
        "@modelcontextprotocol/server-everything: run `npm ci --prefix tests/mcp`"
    } else {
        "node (Node.js 20 or later)"
    };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the MCP end-to-end test needs {missing}"
    );
    eprintln!("skipping: the MCP end-to-end test needs {missing}");
    false
}

fn configure_servers(home: &Home, servers: Value) {
    let path = home.paths.config();
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    config["mcp_servers"] = servers;
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
}

/// The daemon, with a variable of its own that no MCP server may see.
fn start_daemon(home: &Home) -> Daemon {
    let child = home
        .command("cwcoded")
        .env("DAEMON_ONLY_SETTING", "daemon-private-value")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_socket(&home.paths.socket);
    Daemon { child }
}

/// Scripts one tool call per model request, then an answer, runs the prompt in a session, and
/// returns what each call gave the model, in order.
fn run_calls(
    provider: &FakeProvider,
    home: &Home,
    session: &str,
    calls: &[(&str, Value)],
) -> Vec<String> {
    let before = provider.requests().len();
    for (index, (name, arguments)) in calls.iter().enumerate() {
        provider.reply(tool_calls(&[(
            &format!("c{index}"),
            name,
            arguments.clone(),
        )]));
    }
    provider.reply(text("done"));
    home.cli_ok(&["send", session, "use the tools", "--wait"]);
    let requests = provider.requests();
    assert_eq!(requests.len(), before + calls.len() + 1);
    requests[before + 1..]
        .iter()
        .map(last_tool_result)
        .collect()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Pids of live processes whose environment holds `entry`.
fn processes_with_env(entry: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|dir| {
            let pid: u32 = dir.file_name().to_str()?.parse().ok()?;
            let environ = std::fs::read(dir.path().join("environ")).ok()?;
            environ
                .split(|&byte| byte == 0)
                .any(|item| item == entry.as_bytes())
                .then_some(pid)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_calls_echo_and_get_sum_of_the_npm_everything_server() {
    if !node_ready() {
        return;
    }
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let marker = format!("GREETING_FROM_CONFIG=hello-{}", std::process::id());
    configure_servers(
        &home,
        json!({ "everything": {
            "command": "node",
            "args": [everything_script()],
            "env": { "GREETING_FROM_CONFIG": marker.split_once('=').unwrap().1 },
        }}),
    );
    let daemon = start_daemon(&home);
    let client = home.client().await;
    let before = client.info().await.unwrap();
    assert_eq!(before.mcp_servers.len(), 1);
    assert_eq!(before.mcp_servers[0].state, "not_started");

    // Plan mode: the server marks echo and get-sum read-only, so they are offered there.
    let session = home.new_session("plan");
    let results = run_calls(
        &provider,
        &home,
        &session,
        &[
            (
                "everything__echo",
                json!({ "message": "hello through MCP" }),
            ),
            ("everything__get-sum", json!({ "a": 19, "b": 23 })),
            ("everything__get-env", json!({})),
            ("everything__get-sum", json!({ "a": "not a number" })),
        ],
    );
    let [echo, sum, env, bad_sum] = results.as_slice() else {
        panic!("{results:?}")
    };
    assert!(echo.contains("hello through MCP"), "{echo}");
    assert!(sum.contains("42"), "{sum}");
    // The server's own env from config.json, and none of the daemon's.
    assert!(env.contains(marker.split_once('=').unwrap().1), "{env}");
    assert!(!env.contains("daemon-private-value"), "{env}");
    assert!(!env.contains("sk-test-secret-key"), "{env}");
    assert!(
        !bad_sum.is_empty(),
        "the server's validation error reaches the model"
    );

    // The session's tools: the built-ins, then the server's in name order, sent byte-identically
    // in every request and to the next session.
    let requests = provider.requests();
    let names = tool_names(&requests[0]);
    let mcp: Vec<&String> = names.iter().filter(|name| name.contains("__")).collect();
    assert!(mcp.len() >= 3, "{names:?}");
    assert!(mcp.windows(2).all(|pair| pair[0] < pair[1]), "{mcp:?}");
    assert!(names.iter().any(|name| name == "everything__echo"));
    for request in &requests[1..] {
        assert_eq!(request["tools"], requests[0]["tools"]);
    }
    let second = home.new_session("plan");
    run_calls(&provider, &home, &second, &[]);
    let last = provider.requests().pop().unwrap();
    assert_eq!(
        serde_json::to_string(&last["tools"]).unwrap(),
        serde_json::to_string(&requests[0]["tools"]).unwrap()
    );

    let info = client.info().await.unwrap();
    assert_eq!(info.mcp_servers[0].state, "running", "{info:?}");
    assert!(info.mcp_servers[0].tools >= 3);
    let server_pids = processes_with_env(&marker);
    assert_eq!(server_pids.len(), 1, "one server, shared by both sessions");

    // The server dies with the daemon.
    drop(client);
    daemon.terminate();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_with_env(&marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the MCP server outlived the daemon"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_mid_call_is_a_tool_error_and_the_session_goes_on() {
    if !node_ready() {
        return;
    }
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    configure_servers(
        &home,
        json!({ "fragile": {
            "command": "node",
            "args": [Path::new(MCP_DIR).join("crashing-server.mjs")],
        }}),
    );
    let _daemon = start_daemon(&home);

    // Not marked read-only: mutating, so plan mode does not offer it.
    let plan = home.new_session("plan");
    run_calls(&provider, &home, &plan, &[]);
    let plan_tools = tool_names(&provider.requests()[0]);
    assert!(!plan_tools.iter().any(|name| name.starts_with("fragile__")));

    let session = home.new_session("yolo");
    let offered = provider.requests().len();
    let results = run_calls(&provider, &home, &session, &[("fragile__crash", json!({}))]);
    let tools = tool_names(&provider.requests()[offered]);
    assert!(
        tools.iter().any(|name| name == "fragile__crash"),
        "{tools:?}"
    );
    assert!(
        results[0].contains("MCP server `fragile` is unavailable")
            && results[0].contains("exited during the call")
            && results[0].contains("crashing on purpose"),
        "{}",
        results[0]
    );

    // The turn ended normally, and the next one works.
    provider.reply(text("still here"));
    let answer = home.cli_ok(&["send", &session, "are you there?", "--wait"]);
    assert!(answer.contains("still here"), "{answer}");
    // Doctor names the dead server (and exits non-zero: there is something to fix).
    let doctor = String::from_utf8(home.cli(&["doctor"]).stdout).unwrap();
    assert!(
        doctor.contains("MCP server fragile (stdio): exited")
            && doctor.contains("crashing on purpose"),
        "{doctor}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_is_reported_and_adds_nothing_to_the_request() {
    // Without MCP servers: the first request as it always was.
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    let session = home.new_session("code");
    run_calls(&provider, &home, &session, &[]);
    let plain = provider.bodies()[0].len();
    let plain_tools = tool_names(&provider.requests()[0]);
    assert!(!plain_tools.iter().any(|name| name.contains("__")));
    println!("first request without MCP servers: {plain} bytes");
    drop(daemon);

    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    configure_servers(
        &home,
        json!({ "missing": { "command": "/nonexistent/mcp-server" } }),
    );
    let _daemon = home.start_daemon();
    let session = home.new_session("code");
    run_calls(&provider, &home, &session, &[]);
    assert_eq!(provider.bodies()[0].len(), plain);
    let report = home.client().await.doctor().await.unwrap();
    let server = &report.mcp_servers[0];
    assert_eq!(
        (server.name.as_str(), server.state.as_str()),
        ("missing", "failed")
    );
    let problem = server.problem.as_deref().unwrap();
    assert!(
        problem.contains("/nonexistent/mcp-server") && problem.contains("could not be started"),
        "{problem}"
    );
}

/// The everything server over streamable HTTP, on a free port of 127.0.0.1; killed on drop.
struct HttpServer {
    child: std::process::Child,
    url: String,
}

impl HttpServer {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("node")
            .arg(everything_script())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the HTTP MCP server did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamable_http_server_answers_and_a_slow_call_times_out() {
    if !node_ready() {
        return;
    }
    let server = HttpServer::start();
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    configure_servers(
        &home,
        json!({ "remote": { "url": server.url, "timeout_secs": 2 } }),
    );
    let _daemon = home.start_daemon();
    let session = home.new_session("yolo");
    let results = run_calls(
        &provider,
        &home,
        &session,
        &[
            ("remote__get-sum", json!({ "a": 40, "b": 2 })),
            (
                "remote__trigger-long-running-operation",
                json!({ "duration": 30, "steps": 3 }),
            ),
            ("remote__echo", json!({ "message": "after the slow one" })),
        ],
    );
    assert!(results[0].contains("42"), "{}", results[0]);
    assert!(
        results[1].contains("did not answer") && results[1].contains("within 2 s"),
        "{}",
        results[1]
    );
    assert!(results[2].contains("after the slow one"), "{}", results[2]);
    let info = home.client().await.info().await.unwrap();
    assert_eq!(
        (
            info.mcp_servers[0].transport.as_str(),
            info.mcp_servers[0].state.as_str()
        ),
        ("http", "running")
    );
}

/// The JSON lines `cancel-recording-server.mjs` wrote so far; a line still being written is left
/// for the next look.
fn recorded(log: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.split_inclusive('\n')
        .filter(|line| line.ends_with('\n'))
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Polls the server's record until `find` picks something out of it.
fn wait_for_record<T>(log: &Path, find: impl Fn(&[Value]) -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lines = recorded(log);
        if let Some(found) = find(&lines) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "the server never recorded it: {lines:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The id of the `n`th call the server saw start (from 0).
fn started_call(log: &Path, n: usize) -> Value {
    wait_for_record(log, |lines| {
        lines
            .iter()
            .filter_map(|line| line.get("started"))
            .nth(n)
            .cloned()
    })
}

/// What the server was told when the call `id` was cancelled.
fn cancellation_of(log: &Path, id: &Value) -> Value {
    wait_for_record(log, |lines| {
        lines
            .iter()
            .filter_map(|line| line.get("cancelled"))
            .find(|cancelled| cancelled["requestId"] == *id)
            .cloned()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_times_out_or_is_cancelled_is_cancelled_on_the_server_too() {
    if !node_ready() {
        return;
    }
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let records = tempfile::tempdir().unwrap();
    let slow_log = records.path().join("slow.jsonl");
    let held_log = records.path().join("held.jsonl");
    let script = Path::new(MCP_DIR).join("cancel-recording-server.mjs");
    configure_servers(
        &home,
        json!({
            "slow": { "command": "node", "args": [&script, &slow_log], "timeout_secs": 1 },
            "held": { "command": "node", "args": [&script, &held_log] },
        }),
    );
    let _daemon = home.start_daemon();
    let session = home.new_session("yolo");

    // The per-call timeout: the model hears it, and the server is told to stop.
    let results = run_calls(&provider, &home, &session, &[("slow__wait", json!({}))]);
    assert!(results[0].contains("did not answer"), "{}", results[0]);
    let timed_out = started_call(&slow_log, 0);
    let cancelled = cancellation_of(&slow_log, &timed_out);
    assert!(
        cancelled["reason"].as_str().unwrap().contains("within 1 s"),
        "{cancelled}"
    );

    // The user cancels the turn while the call is in flight.
    provider.reply(tool_calls(&[("c0", "held__wait", json!({}))]));
    home.cli_ok(&["send", &session, "wait for it"]);
    let held = started_call(&held_log, 0);
    home.cli_ok(&["cancel", &session]);
    let cancelled = cancellation_of(&held_log, &held);
    assert!(
        cancelled["reason"].as_str().unwrap().contains("cancelled"),
        "{cancelled}"
    );
    wait_for_event(&home, &session, |kind| {
        matches!(kind, EventKind::TurnFinished { turn: 2, .. })
    });
}

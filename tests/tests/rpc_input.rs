//! The JSON-RPC input surface under arbitrary bytes: every request gets an HTTP answer, JSON-RPC
//! errors carry a standard or application code, and the daemon keeps serving.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use cwcode_protocol::methods;
use cwcode_tests::Home;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::Value;

fn post(socket: &std::path::Path, body: &[u8]) -> String {
    let mut stream = UnixStream::connect(socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    String::from_utf8_lossy(&response).into_owned()
}

/// `PROPTEST_CASES` when set (CI bounds the time with it), else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(default)
}

/// Every method but `daemon/shutdown`, which would end the daemon the test checks is serving.
const METHODS: [&str; 25] = [
    methods::DAEMON_INFO,
    methods::DAEMON_DOCTOR,
    methods::SESSION_CREATE,
    methods::SESSION_LIST,
    methods::SESSION_GET,
    methods::SESSION_DELETE,
    methods::SESSION_SEND,
    methods::SESSION_CANCEL,
    methods::SESSION_SET_MODE,
    methods::SESSION_SET_PROFILE,
    methods::SESSION_CACHE,
    methods::SESSION_CHECKPOINTS,
    methods::SESSION_REWIND,
    methods::SESSION_UNDO_REWIND,
    methods::SESSION_COMPACT,
    methods::SESSION_COST,
    methods::SESSION_SUBSCRIBE,
    methods::SESSION_UNSUBSCRIBE,
    methods::APPROVAL_RESPOND,
    methods::GOAL_ADD,
    methods::GOAL_START,
    methods::GOAL_STOP,
    methods::GOAL_STATUS,
    methods::PROFILE_LIST,
    methods::CONFIG_SET_KEY,
];

/// Parameter names the methods take, so objects of them reach past the first check.
const PARAM_NAMES: [&str; 14] = [
    "sessionId",
    "text",
    "mode",
    "cwd",
    "profile",
    "turn",
    "since",
    "requestId",
    "decision",
    "reason",
    "always",
    "key",
    "maxCycles",
    "title",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|number| serde_json::json!(number)),
        "\\PC{0,24}".prop_map(Value::from),
        Just(Value::from("../../etc/passwd")),
        Just(Value::from("yolo")),
        Just(Value::from("x".repeat(5000))),
        Just(serde_json::json!([])),
        Just(serde_json::json!({})),
    ]
}

/// Params that look almost right: real names with odd values, positional arrays, the session
/// that exists with odd companions, strings and numbers where an object belongs.
fn named_params() -> impl Strategy<Value = Value> {
    proptest::collection::btree_map(
        proptest::sample::select(&PARAM_NAMES[..]).prop_map(str::to_owned),
        leaf(),
        0..5,
    )
    .prop_map(|map| Value::Object(map.into_iter().collect()))
}

fn near_miss_params(session: String) -> impl Strategy<Value = Value> {
    let named = named_params();
    let with_session = named_params().prop_map(move |mut params| {
        params["sessionId"] = Value::from(session.clone());
        params
    });
    prop_oneof![
        2 => named,
        2 => with_session,
        1 => proptest::collection::vec(leaf(), 0..4).prop_map(Value::Array),
        1 => leaf(),
        1 => ("[a-zA-Z]{1,10}", "[ -~]{0,20}").prop_map(|(k, v)| serde_json::json!({ k: v })),
    ]
}

/// Requests that look almost right: real method names (or nearly), odd params, and envelopes
/// with a field missing or of the wrong type.
fn near_miss_request(session: String) -> impl Strategy<Value = Value> {
    let method = prop_oneof![
        4 => proptest::sample::select(&METHODS[..]).prop_map(Value::from),
        1 => "[a-zA-Z/]{0,20}".prop_map(Value::from),
        1 => leaf(),
    ];
    let id = prop_oneof![
        4 => any::<u32>().prop_map(Value::from),
        1 => leaf(),
    ];
    let version = prop_oneof![
        8 => Just(Some(Value::from("2.0"))),
        1 => Just(None),
        1 => leaf().prop_map(Some),
    ];
    (
        method,
        near_miss_params(session),
        id,
        version,
        any::<bool>(),
    )
        .prop_map(|(method, params, id, version, with_id)| {
            let mut request = serde_json::json!({"method": method, "params": params});
            if with_id {
                request["id"] = id;
            }
            if let Some(version) = version {
                request["jsonrpc"] = version;
            }
            request
        })
}

fn near_miss_body(session: String) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => near_miss_request(session.clone())
            .prop_map(|request| serde_json::to_vec(&request).unwrap()),
        1 => proptest::collection::vec(near_miss_request(session), 0..4)
            .prop_map(|batch| serde_json::to_vec(&Value::Array(batch)).unwrap()),
        1 => (1usize..400).prop_map(|depth| {
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/get\",\"params\":{}{}}}",
                "[".repeat(depth),
                "]".repeat(depth)
            )
            .into_bytes()
        }),
    ]
}

/// The status code of an HTTP/1.1 response: a 5xx is the daemon failing, never a fair answer
/// to bad input.
fn http_status(response: &str) -> Option<u16> {
    let rest = response.strip_prefix("HTTP/1.1 ")?;
    rest.get(..3)?.parse().ok()
}

/// The JSON-RPC answers in an HTTP response: none, one, or a batch's.
fn answers(response: &str) -> Vec<Value> {
    let Some((_, body)) = response.split_once("\r\n\r\n") else {
        return Vec::new();
    };
    match serde_json::from_str(body.trim()) {
        Ok(Value::Array(answers)) => answers,
        Ok(answer) => vec![answer],
        Err(_) => Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arbitrary_input_gets_an_answer_and_never_stops_the_daemon() {
    let home = Home::new("http://127.0.0.1:9/v1");
    // A prompt the input happens to send fails at once rather than retrying for seconds.
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(home.paths.config()).unwrap()).unwrap();
    config["profiles"]["fake"]["max_attempts"] = 1.into();
    std::fs::write(home.paths.config(), config.to_string()).unwrap();
    let daemon = home.start_daemon();
    let session = home.new_session("plan");
    let socket = home.paths.socket.clone();
    let mut runner = TestRunner::new(Config {
        cases: cases(150),
        ..Config::default()
    });
    let input = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        near_miss_body(session),
    ];
    let coded = std::cell::Cell::new(0);
    runner
        .run(&input, |body| {
            let response = post(&socket, &body);
            let status = http_status(&response);
            prop_assert!(status.is_some(), "no HTTP answer to {body:?}");
            prop_assert!(
                status < Some(500),
                "the daemon failed on {:?}: {response}",
                String::from_utf8_lossy(&body)
            );
            for answer in answers(&response) {
                if let Some(code) = answer["error"]["code"].as_i64() {
                    coded.set(coded.get() + 1);
                    let standard = (-32700..=-32600).contains(&code);
                    let application = (-33099..=-33000).contains(&code);
                    // jsonrpsee's own: batch and request sizes, busy.
                    let server = (-32099..=-32000).contains(&code);
                    prop_assert!(
                        standard || application || server,
                        "odd code {code} for {body:?}"
                    );
                }
            }
            Ok(())
        })
        .unwrap();
    assert!(
        coded.get() > 0,
        "no JSON-RPC error was ever parsed: the check checked nothing"
    );
    let response = post(
        &socket,
        br#"{"jsonrpc":"2.0","id":1,"method":"daemon/info"}"#,
    );
    assert!(
        response.contains(&format!("\"pid\":{}", daemon.pid())),
        "{response}"
    );
}

/// Sends raw bytes, closes the writing half, and reads whatever comes back.
fn post_raw(socket: &std::path::Path, request: &[u8]) -> String {
    let mut stream = UnixStream::connect(socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(request).unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    String::from_utf8_lossy(&response).into_owned()
}

/// Bodies whose bytes do not make a whole body were once answered "500 Internal error", as if
/// the daemon had failed: they are the client's fault and get a 400 that says what was wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cut_short_or_badly_chunked_is_a_client_error() {
    let home = Home::new("http://127.0.0.1:9/v1");
    let daemon = home.start_daemon();
    let socket = home.paths.socket.clone();
    let head = "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n";
    for request in [
        format!("{head}Transfer-Encoding: chunked\r\n\r\nZZZ\r\n{{}}\r\n0\r\n\r\n"),
        format!("{head}Transfer-Encoding: chunked\r\n\r\n5\r\n{{\"a\"\r\n"),
        format!("{head}Content-Length: 100\r\n\r\n{{\"jsonrpc\":\"2.0\"}}"),
    ] {
        let response = post_raw(&socket, request.as_bytes());
        assert_eq!(http_status(&response), Some(400), "{request:?}: {response}");
        assert!(response.contains("cut short"), "{request:?}: {response}");
    }
    let response = post(
        &socket,
        br#"{"jsonrpc":"2.0","id":1,"method":"daemon/info"}"#,
    );
    assert!(
        response.contains(&format!("\"pid\":{}", daemon.pid())),
        "{response}"
    );
}

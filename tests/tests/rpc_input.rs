//! The JSON-RPC input surface under arbitrary bytes: every request gets an HTTP answer, JSON-RPC
//! errors carry a standard or application code, and the daemon keeps serving.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

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

/// Requests that look almost right: real method names, wrong or odd params.
fn near_miss_request() -> impl Strategy<Value = Vec<u8>> {
    let method = prop_oneof![
        Just("session/get".to_owned()),
        Just("session/send".to_owned()),
        Just("session/setMode".to_owned()),
        Just("session/create".to_owned()),
        Just("approval/respond".to_owned()),
        Just("session/cancel".to_owned()),
        "[a-z/]{0,20}",
    ];
    let params = prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::from),
        "[ -~]{0,40}".prop_map(Value::from),
        ("[a-zA-Z]{1,10}", "[ -~]{0,20}").prop_map(|(k, v)| serde_json::json!({ k: v })),
        "[a-z]{0,8}".prop_map(|mode| serde_json::json!({"sessionId": "x", "mode": mode})),
    ];
    (method, params, any::<u32>()).prop_map(|(method, params, id)| {
        serde_json::to_vec(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .unwrap()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arbitrary_input_gets_an_answer_and_never_stops_the_daemon() {
    let home = Home::new("http://127.0.0.1:9/v1");
    let daemon = home.start_daemon();
    let socket = home.paths.socket.clone();
    let mut runner = TestRunner::new(Config {
        cases: 150,
        ..Config::default()
    });
    let input = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        near_miss_request(),
    ];
    runner
        .run(&input, |body| {
            let response = post(&socket, &body);
            prop_assert!(
                response.starts_with("HTTP/1.1 "),
                "no HTTP answer to {body:?}"
            );
            if let Some(start) = response.find("{\"jsonrpc\"") {
                let end = response.rfind('}').unwrap();
                let answer: Value = serde_json::from_str(&response[start..=end]).unwrap();
                if let Some(code) = answer["error"]["code"].as_i64() {
                    let standard = (-32700..=-32600).contains(&code);
                    let application = (-32099..=-32000).contains(&code);
                    prop_assert!(standard || application, "odd code {code} for {body:?}");
                }
            }
            Ok(())
        })
        .unwrap();
    let response = post(
        &socket,
        br#"{"jsonrpc":"2.0","id":1,"method":"daemon/info"}"#,
    );
    assert!(
        response.contains(&format!("\"pid\":{}", daemon.pid())),
        "{response}"
    );
}

//! `web_fetch` and `chrome_fetch` through the real daemon, against real local things: an HTTP
//! server of the test's own (pages with scripts and navigation, a redirect loop, a 10 MB body, a
//! 404, JSON, an image) and Debian's headless `chromium` driven over the DevTools Protocol.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;
use cwcode_tests::Home;
use cwcode_tests::fake_provider::{FakeProvider, last_tool_result, text, tool_calls};
use serde_json::{Value, json};

const ARTICLE: &str = r#"<!doctype html><html><head><title>Notes</title>
<style>body { color: red }</style><script>window.tracker = "script text";</script></head>
<body><header><a href="/">Site banner</a></header>
<nav><ul><li><a href="/menu">Menu entry</a></li></ul></nav>
<main><h1>Release 2.0</h1><p>The <em>whole</em> story is in <a href="https://example.org/changelog">the changelog</a>.</p></main>
<footer>Footer legal text</footer></body></html>"#;

/// Content built by a script after the load event: only a browser sees it.
const SCRIPTED: &str = r#"<!doctype html><html><body><div id="app"></div><script>
setTimeout(() => {
  document.getElementById('app').innerHTML = '<h1>Built by JavaScript</h1><p>Rendered text 4217</p>';
}, 300);
</script></body></html>"#;

struct Site {
    base: String,
    article_hits: Arc<AtomicUsize>,
}

async fn serve_site() -> Site {
    let article_hits = Arc::new(AtomicUsize::new(0));
    let app = Router::new()
        .route(
            "/article",
            get(|State(hits): State<Arc<AtomicUsize>>| async move {
                hits.fetch_add(1, Ordering::SeqCst);
                (
                    [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                    ARTICLE,
                )
            }),
        )
        .route(
            "/scripted",
            get(|| async { ([(header::CONTENT_TYPE, "text/html")], SCRIPTED) }),
        )
        // Never answers: a page that never loads.
        .route("/hanging", get(std::future::pending::<String>))
        .route("/loop/a", get(|| async { Redirect::temporary("/loop/b") }))
        .route("/loop/b", get(|| async { Redirect::temporary("/loop/a") }))
        .route(
            "/big",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/plain")],
                    "0123456789abcdef".repeat(10 * 1024 * 1024 / 16),
                )
            }),
        )
        .route(
            "/missing",
            get(|| async {
                (
                    StatusCode::NOT_FOUND,
                    [(header::CONTENT_TYPE, "text/html")],
                    "<html><body><h1>Not here</h1><p>The page is gone.</p></body></html>",
                )
                    .into_response()
            }),
        )
        .route(
            "/data.json",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    r#"{"name": "cwcode", "tools": 12}"#,
                )
            }),
        )
        .route(
            "/logo.png",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "image/png")],
                    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec(),
                )
            }),
        )
        .with_state(Arc::clone(&article_hits));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Site { base, article_hits }
}

/// Scripts one tool call per model request, then an answer, runs the turn, and returns what each
/// call gave the model, in order.
fn run_calls(
    provider: &FakeProvider,
    home: &Home,
    mode: &str,
    calls: &[(&str, Value)],
) -> Vec<String> {
    for (index, (name, arguments)) in calls.iter().enumerate() {
        provider.reply(tool_calls(&[(
            &format!("c{index}"),
            name,
            arguments.clone(),
        )]));
    }
    provider.reply(text("done"));
    let id = home.new_session(mode);
    home.cli_ok(&["send", &id, "read the web", "--wait"]);
    let requests = provider.requests();
    assert_eq!(requests.len(), calls.len() + 1);
    requests[1..].iter().map(last_tool_result).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_fetch_reads_pages_as_markdown_caches_them_and_says_what_went_wrong() {
    let site = serve_site().await;
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let fetch = |path: &str| {
        (
            "web_fetch",
            json!({ "url": format!("{}{path}", site.base) }),
        )
    };

    // Plan mode: web_fetch is read-only, so it is offered and runs without an approval.
    let results = run_calls(
        &provider,
        &home,
        "plan",
        &[
            fetch("/article"),
            fetch("/article"),
            fetch("/loop/a"),
            fetch("/big"),
            fetch("/missing"),
            fetch("/data.json"),
            fetch("/logo.png"),
            (
                "web_fetch",
                json!({ "url": format!("http://127.0.0.1:{closed_port}/") }),
            ),
            ("web_fetch", json!({ "url": "file:///etc/passwd" })),
        ],
    );
    let [
        article,
        cached,
        looped,
        big,
        missing,
        data,
        image,
        refused,
        file,
    ] = results.as_slice()
    else {
        panic!("{results:?}")
    };

    assert!(article.contains("# Release 2.0"), "{article}");
    assert!(
        article.contains("The *whole* story is in [the changelog](https://example.org/changelog)."),
        "{article}"
    );
    for dropped in [
        "script text",
        "color: red",
        "Site banner",
        "Menu entry",
        "Footer legal",
    ] {
        assert!(!article.contains(dropped), "{dropped} kept: {article}");
    }
    assert!(cached.starts_with("[from this session's cache"), "{cached}");
    assert!(cached.ends_with(article.as_str()), "{cached}");
    assert_eq!(
        site.article_hits.load(Ordering::SeqCst),
        1,
        "the cache was not used"
    );

    assert!(looped.contains("redirect loop"), "{looped}");
    assert!(
        big.contains("too large: only the first 5000000 of 10485760 bytes"),
        "{}",
        &big[big.len().saturating_sub(300)..]
    );
    assert!(
        big.len() < 64 * 1024,
        "{} bytes reached the model",
        big.len()
    );
    assert!(missing.contains("HTTP 404 Not Found"), "{missing}");
    assert!(missing.contains("The page is gone."), "{missing}");
    assert!(
        data.ends_with(r#"{"name": "cwcode", "tools": 12}"#),
        "{data}"
    );
    assert!(
        image.contains("is binary (image/png") && image.contains("text only"),
        "{image}"
    );
    assert!(refused.contains("connection refused"), "{refused}");
    assert!(file.contains("only http:// and https://"), "{file}");
}

/// Debian's `chromium`, headless on 127.0.0.1 with a profile of its own, killed with its
/// process group when the test ends.
struct Chromium {
    child: Child,
    profile: tempfile::TempDir,
    port: u16,
}

impl Chromium {
    fn start() -> Option<Self> {
        let Some(binary) = ["chromium", "chromium-browser"].into_iter().find_map(which) else {
            let why = "chromium is not installed (apt-get install -y chromium; .ci/run does)";
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
            eprintln!("skipped: {why}");
            return None;
        };
        let profile = tempfile::tempdir().unwrap();
        let child = Command::new(binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        // Owned before the wait, so a Chromium that never listens is killed when the test fails.
        let mut chromium = Self {
            child,
            profile,
            port: 0,
        };
        chromium.port = wait_for_port(&chromium.profile.path().join("DevToolsActivePort"));
        Some(chromium)
    }

    /// The URLs of the open tabs.
    async fn tabs(&self) -> Vec<String> {
        let list = http_get(self.port, "/json/list").await;
        let tabs: Value = serde_json::from_str(&list).unwrap();
        tabs.as_array()
            .unwrap()
            .iter()
            .filter(|tab| tab["type"] == "page")
            .map(|tab| tab["url"].as_str().unwrap().to_owned())
            .collect()
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let group = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        let _ = self.child.wait();
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// Chromium writes the port it picked into the profile once it listens.
fn wait_for_port(file: &Path) -> u16 {
    let start = Instant::now();
    loop {
        if let Some(port) = std::fs::read_to_string(file)
            .ok()
            .and_then(|text| text.lines().next()?.trim().parse().ok())
        {
            return port;
        }
        // Usually a fraction of a second, but one CI run here saw two starting at once take
        // over 30 s.
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "chromium wrote no DevToolsActivePort within 120 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A bare HTTP/1.1 GET: the test needs nothing more from Chrome's JSON endpoints. Read up to
/// the declared length: Chrome may keep the connection open.
async fn http_get(port: u16, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        let text = String::from_utf8_lossy(&response).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())?
            });
            if length.is_some_and(|length| body.len() >= length) {
                return body.to_owned();
            }
        }
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer))
            .await
            .expect("chromium did not answer")
            .unwrap();
        assert!(read > 0, "chromium closed early: {text}");
        response.extend_from_slice(&buffer[..read]);
    }
}

fn configure_chrome(home: &Home, endpoint: &str) {
    let path = home.paths.config();
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    config["chrome"] = json!({ "endpoint": endpoint });
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chrome_fetch_sees_what_javascript_builds_and_closes_its_tab() {
    let Some(chromium) = Chromium::start() else {
        return;
    };
    let site = serve_site().await;
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    // The profile directory, as a user names theirs: its DevToolsActivePort gives the port.
    configure_chrome(&home, chromium.profile.path().to_str().unwrap());
    let _daemon = home.start_daemon();
    let page = format!("{}/scripted", site.base);
    let tabs_before = chromium.tabs().await;

    let results = run_calls(
        &provider,
        &home,
        "plan",
        &[
            ("web_fetch", json!({ "url": page })),
            ("chrome_fetch", json!({ "url": page })),
            (
                "chrome_fetch",
                json!({ "url": format!("{}/loop/a", site.base) }),
            ),
        ],
    );

    let [plain, rendered, looped] = results.as_slice() else {
        panic!("{results:?}")
    };
    assert!(!plain.contains("Rendered text 4217"), "{plain}");
    assert!(rendered.contains("# Built by JavaScript"), "{rendered}");
    assert!(rendered.contains("Rendered text 4217"), "{rendered}");
    assert!(
        !rendered.contains("innerHTML"),
        "the script was kept: {rendered}"
    );
    assert!(looped.contains("Chrome could not load"), "{looped}");
    assert!(looped.contains("ERR_TOO_MANY_REDIRECTS"), "{looped}");
    // Every tab opened was closed again, after success and after failure alike.
    let start = Instant::now();
    loop {
        let tabs = chromium.tabs().await;
        if tabs == tabs_before {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "tabs left open: {tabs:?} (before: {tabs_before:?})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_chrome_fetch_closes_its_tab() {
    let Some(chromium) = Chromium::start() else {
        return;
    };
    let site = serve_site().await;
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    configure_chrome(&home, &chromium.port.to_string());
    let _daemon = home.start_daemon();
    let tabs_before = chromium.tabs().await;
    provider
        .reply(tool_calls(&[(
            "c",
            "chrome_fetch",
            json!({ "url": format!("{}/hanging", site.base) }),
        )]))
        .reply(text("unused"));
    let id = home.new_session("plan");
    home.cli_ok(&["send", &id, "read the page that never loads"]);

    let start = Instant::now();
    while chromium.tabs().await.len() <= tabs_before.len() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "chrome_fetch opened no tab"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    home.cli_ok(&["cancel", &id]);

    let start = Instant::now();
    while chromium.tabs().await != tabs_before {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the cancelled call left its tab open"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chrome_fetch_without_a_listening_chrome_names_the_steps_to_enable_it() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let profile = tempfile::tempdir().unwrap();
    configure_chrome(&home, profile.path().to_str().unwrap());
    let _daemon = home.start_daemon();

    let results = run_calls(
        &provider,
        &home,
        "code",
        &[("chrome_fetch", json!({ "url": "https://example.org/" }))],
    );

    let error = &results[0];
    assert!(error.contains("DevToolsActivePort"), "{error}");
    assert!(
        error.contains("chrome://inspect/#remote-debugging"),
        "{error}"
    );
    assert!(error.contains("--remote-debugging-port=9222"), "{error}");
}

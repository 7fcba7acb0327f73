//! `chrome_fetch`: a page read through the user's own Chrome over the DevTools Protocol (SPEC §7),
//! for sites that turn bots away or build their content in JavaScript. A new tab is opened,
//! navigated, given a short bounded settle after its load event, read as rendered HTML, converted
//! to Markdown like `web_fetch`'s pages, and closed in every case.
//!
//! The protocol is spoken by a small client over `soketto`, the WebSocket crate already in the
//! tree through jsonrpsee: the five commands needed here do not justify `chromiumoxide`'s
//! generated bindings for the whole protocol, a large build on a small machine.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

use reqwest::Url;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use soketto::connection::{Receiver, Sender};
use soketto::handshake::{Client, ServerResponse};
use tokio::net::TcpStream;
use tokio_util::compat::{Compat, TokioAsyncReadCompatExt};

use super::markdown::html_to_markdown;
use super::web_fetch::{checked_url, shown};
use super::{Effect, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};
use crate::util::error_chain;

/// Connecting includes the handshake, which Chrome may hold while it asks the user to allow it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// From the new tab to its rendered HTML.
const PAGE_TIMEOUT: Duration = Duration::from_secs(30);
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// After the load event, the page is sampled until it stops changing, for at most this long.
const SETTLE_LIMIT: Duration = Duration::from_secs(5);
const SETTLE_STEP: Duration = Duration::from_millis(100);
/// How long the document must stay unchanged to count as rendered: over a second, because Chrome
/// runs the timers of a background tab only once a second.
const SETTLE_QUIET: Duration = Duration::from_millis(1200);
/// The most HTML taken from the tab; the rest is cut with a note.
const MAX_HTML_CHARS: usize = 5_000_000;
/// A protocol message larger than this ends the call (the HTML above fits in it with room).
const MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;
/// Load events remembered while another answer is awaited (a tab loads one page at a time).
const REMEMBERED_LOADS: usize = 16;
/// Events that are not the awaited answer are skipped, but not forever.
const MAX_SKIPPED_MESSAGES: usize = 10_000;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ChromeFetchArgs {
    pub url: String,
}

impl ToolArgs for ChromeFetchArgs {}

pub struct ChromeFetch;

impl Tool for ChromeFetch {
    type Args = ChromeFetchArgs;
    type Output = String;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "chrome_fetch",
            description: "web_fetch through the user's Chrome, for bot-blocked or \
                          JavaScript-built pages.",
            effect: Effect::ReadOnly,
        }
    }

    async fn call(
        &self,
        args: ChromeFetchArgs,
        context: &ToolContext,
    ) -> Result<String, ToolError> {
        let url = checked_url(&args.url, &context.secret_values)?;
        let endpoint = context
            .chrome_endpoint
            .as_deref()
            .ok_or_else(|| ToolError::new(format!("chrome_fetch is not set up. {ENABLE_STEPS}")))?;
        let fetch = async {
            let browser = browser_url(endpoint).await?;
            let mut cdp = Cdp::connect(&browser, endpoint).await?;
            let created = cdp
                .call(
                    None,
                    "Target.createTarget",
                    json!({"url": "about:blank", "background": true}),
                )
                .await?;
            let target = text_field(&created, "targetId")?;
            let mut tab = TabGuard {
                open: Some((browser, target.clone())),
            };
            let read = tokio::time::timeout(PAGE_TIMEOUT, read_tab(&mut cdp, &target, &url))
                .await
                .unwrap_or_else(|_| {
                    Err(ToolError::new(format!(
                        "{url} did not finish loading in Chrome within {}s",
                        PAGE_TIMEOUT.as_secs()
                    )))
                });
            let closed = tokio::time::timeout(
                CLOSE_TIMEOUT,
                cdp.call(None, "Target.closeTarget", json!({"targetId": target})),
            )
            .await;
            if matches!(closed, Ok(Ok(_))) {
                tab.open = None;
            }
            read
        };
        let rendered = tokio::select! {
            biased;
            () = context.cancel.cancelled() => {
                return Err(ToolError::new(format!("the fetch of {url} was cancelled")));
            }
            rendered = fetch => rendered?,
        };
        let Rendered { href, html, length } = rendered;
        let cut = length > MAX_HTML_CHARS;
        let markdown = tokio::task::spawn_blocking(move || html_to_markdown(&html))
            .await
            .map_err(|error| ToolError::new(format!("the HTML conversion failed: {error}")))?;
        let mut page = format!(
            "{href} (rendered by Chrome, as Markdown)\n\n{}",
            shown(markdown)
        );
        if cut {
            page.push_str(&format!(
                "\n[too large: only the first {MAX_HTML_CHARS} of {length} characters of HTML \
                 were converted]"
            ));
        }
        Ok(page)
    }
}

/// What a user does to let cwcode use their Chrome.
const ENABLE_STEPS: &str = "To let cwcode use your Chrome: either (1) in Chrome 144 or later \
    open chrome://inspect/#remote-debugging, turn on \"Allow remote debugging for this browser \
    instance\", and set \"chrome\": {\"endpoint\": \"PROFILE_DIR\"} in ~/.cwcode/config.json, \
    where PROFILE_DIR is Chrome's user data directory (~/.config/google-chrome on Linux, \
    ~/Library/Application Support/Google/Chrome on macOS), in which Chrome then writes \
    DevToolsActivePort; or (2) start Chrome with --remote-debugging-port=9222 \
    --user-data-dir=DIR (a separate profile: Chrome refuses the port on its default one) and set \
    \"endpoint\": \"9222\". Then accept the prompt Chrome shows on the first connection.";

/// The browser's DevTools WebSocket URL, from what `chrome.endpoint` says.
async fn browser_url(endpoint: &str) -> Result<Url, ToolError> {
    if endpoint.starts_with("ws://") || endpoint.starts_with("wss://") {
        let url = Url::parse(endpoint).map_err(|error| {
            ToolError::new(format!(
                "chrome.endpoint `{endpoint}` is not a URL ({error}): give ws://HOST:PORT/PATH, \
                 a port, or Chrome's profile directory"
            ))
        })?;
        if url.scheme() != "ws" {
            return Err(ToolError::new(format!(
                "chrome.endpoint `{endpoint}`: only ws:// is supported (Chrome's debugging port \
                 speaks no TLS); give ws://127.0.0.1:PORT/PATH"
            )));
        }
        return Ok(url);
    }
    if let Ok(port) = endpoint.parse::<u16>() {
        return url_from_port(port, endpoint).await;
    }
    url_from_profile(&expand_home(endpoint), endpoint).await
}

fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// `/json/version` names the browser's WebSocket; the path holds a per-run id.
async fn url_from_port(port: u16, endpoint: &str) -> Result<Url, ToolError> {
    crate::util::install_crypto_provider();
    let not_listening = |reason: String| {
        ToolError::new(format!(
            "no Chrome answers on 127.0.0.1:{port} ({reason}). {ENABLE_STEPS}"
        ))
    };
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(CONNECT_TIMEOUT)
        .build()
        .map_err(|error| not_listening(error.to_string()))?;
    let body = client
        .get(format!("http://127.0.0.1:{port}/json/version"))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|error| not_listening(error_chain(&error)))?
        .bytes()
        .await
        .map_err(|error| not_listening(error_chain(&error)))?;
    let version: Value = serde_json::from_slice(&body)
        .map_err(|error| not_listening(format!("its /json/version is not JSON: {error}")))?;
    let address = version["webSocketDebuggerUrl"].as_str().ok_or_else(|| {
        not_listening("its /json/version names no webSocketDebuggerUrl".to_owned())
    })?;
    Url::parse(address).map_err(|error| {
        ToolError::new(format!(
            "chrome.endpoint `{endpoint}`: Chrome named `{address}`, not a URL: {error}"
        ))
    })
}

/// Chrome writes `DevToolsActivePort` into the profile directory while remote debugging is on:
/// the port on its first line, the browser's WebSocket path on its second.
async fn url_from_profile(dir: &std::path::Path, endpoint: &str) -> Result<Url, ToolError> {
    let file = dir.join("DevToolsActivePort");
    let text = tokio::fs::read_to_string(&file).await.map_err(|error| {
        ToolError::new(format!(
            "cannot read {} ({error}): Chrome writes it only while remote debugging is on. \
             {ENABLE_STEPS}",
            file.display()
        ))
    })?;
    let mut lines = text.lines().map(str::trim);
    let port = lines.next().and_then(|line| line.parse::<u16>().ok());
    let path = lines.next().filter(|path| path.starts_with('/'));
    let (Some(port), Some(path)) = (port, path) else {
        return Err(ToolError::new(format!(
            "{} does not hold a port and a path as Chrome writes them (chrome.endpoint \
             `{endpoint}`); restart Chrome with remote debugging on",
            file.display()
        )));
    };
    Url::parse(&format!("ws://127.0.0.1:{port}{path}"))
        .map_err(|error| ToolError::new(format!("{}: {error}", file.display())))
}

struct Rendered {
    href: String,
    html: String,
    /// The whole HTML's length in UTF-16 units, of which at most [`MAX_HTML_CHARS`] were taken.
    length: usize,
}

async fn read_tab(cdp: &mut Cdp, target: &str, url: &Url) -> Result<Rendered, ToolError> {
    let attached = cdp
        .call(
            None,
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        )
        .await?;
    let session = text_field(&attached, "sessionId")?;
    let session = Some(session.as_str());
    cdp.call(session, "Page.enable", json!({})).await?;
    cdp.call(
        session,
        "Page.setLifecycleEventsEnabled",
        json!({"enabled": true}),
    )
    .await?;
    let navigated = cdp
        .call(session, "Page.navigate", json!({"url": url.as_str()}))
        .await?;
    if let Some(error) = navigated["errorText"]
        .as_str()
        .filter(|text| !text.is_empty())
    {
        return Err(ToolError::new(format!(
            "Chrome could not load {url}: {error}"
        )));
    }
    // A navigation within the document has no loader of its own and nothing to wait for.
    if let Some(loader) = navigated["loaderId"].as_str() {
        cdp.wait_for_load(session, loader).await?;
    }
    settle(cdp, session).await?;
    let expression = format!(
        "(() => {{ const html = document.documentElement.outerHTML; return {{href: location.href, \
         length: html.length, html: html.slice(0, {MAX_HTML_CHARS})}}; }})()"
    );
    let value = evaluate(cdp, session, &expression).await?;
    Ok(Rendered {
        href: value["href"].as_str().unwrap_or(url.as_str()).to_owned(),
        html: value["html"].as_str().unwrap_or_default().to_owned(),
        length: value["length"]
            .as_u64()
            .and_then(|length| usize::try_from(length).ok())
            .unwrap_or_default(),
    })
}

/// Waits until the document has not changed for [`SETTLE_QUIET`], for pages that render after
/// their load event, within [`SETTLE_LIMIT`].
async fn settle(cdp: &mut Cdp, session: Option<&str>) -> Result<(), ToolError> {
    let sample = "document.readyState + ':' + document.documentElement.outerHTML.length";
    let deadline = tokio::time::Instant::now() + SETTLE_LIMIT;
    let mut last = evaluate(cdp, session, sample).await?;
    let mut quiet_since = tokio::time::Instant::now();
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(SETTLE_STEP).await;
        let now = evaluate(cdp, session, sample).await?;
        if now != last
            || !now
                .as_str()
                .is_some_and(|text| text.starts_with("complete"))
        {
            quiet_since = tokio::time::Instant::now();
        } else if quiet_since.elapsed() >= SETTLE_QUIET {
            break;
        }
        last = now;
    }
    Ok(())
}

async fn evaluate(
    cdp: &mut Cdp,
    session: Option<&str>,
    expression: &str,
) -> Result<Value, ToolError> {
    let mut result = cdp
        .call(
            session,
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        )
        .await?;
    if let Some(exception) = result.get("exceptionDetails") {
        return Err(ToolError::new(format!(
            "reading the page in Chrome failed: {}",
            exception["text"].as_str().unwrap_or("an exception")
        )));
    }
    Ok(result["result"]["value"].take())
}

fn text_field(value: &Value, field: &str) -> Result<String, ToolError> {
    value[field].as_str().map(str::to_owned).ok_or_else(|| {
        ToolError::new(format!(
            "Chrome answered without a {field}: is the endpoint the browser's, not a tab's?"
        ))
    })
}

/// Closes the tab when the call ends without having closed it (an error on the way, or the call
/// dropped when its turn is cancelled), over a connection of its own.
struct TabGuard {
    open: Option<(Url, String)>,
}

impl Drop for TabGuard {
    fn drop(&mut self) {
        let Some((browser, target)) = self.open.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let close = async {
                let mut cdp = Cdp::connect(&browser, browser.as_str()).await?;
                cdp.call(None, "Target.closeTarget", json!({"targetId": target}))
                    .await
            };
            if let Ok(Err(error)) = tokio::time::timeout(CLOSE_TIMEOUT, close).await {
                tracing::warn!(%error, "chrome_fetch could not close its tab");
            }
        });
    }
}

type Socket = Compat<TcpStream>;

/// One DevTools connection: commands answered in order of their ids, events skipped except the
/// load events awaited.
struct Cdp {
    sender: Sender<Socket>,
    receiver: Receiver<Socket>,
    next_id: u64,
    /// The navigations (loader ids) whose load event came, the latest last: the about:blank
    /// the tab opened with must not pass for the page.
    loaded: VecDeque<String>,
}

impl Cdp {
    async fn connect(url: &Url, endpoint: &str) -> Result<Self, ToolError> {
        let host = url.host_str().unwrap_or("127.0.0.1").to_owned();
        let port = url.port_or_known_default().unwrap_or(80);
        let not_listening = |reason: String| {
            ToolError::new(format!(
                "no Chrome answers at {url} (chrome.endpoint `{endpoint}`: {reason}). \
                 {ENABLE_STEPS}"
            ))
        };
        let connect = async {
            let stream = TcpStream::connect((host.as_str(), port))
                .await
                .map_err(|error| not_listening(error.to_string()))?;
            let host_header = format!("{host}:{port}");
            let mut resource = url.path().to_owned();
            if let Some(query) = url.query() {
                resource.push('?');
                resource.push_str(query);
            }
            let mut client = Client::new(stream.compat(), &host_header, &resource);
            match client.handshake().await {
                Ok(ServerResponse::Accepted { .. }) => {}
                Ok(ServerResponse::Rejected { status_code }) => {
                    return Err(not_listening(format!(
                        "the WebSocket was refused with HTTP {status_code}; the browser may \
                         have restarted with a new path"
                    )));
                }
                Ok(ServerResponse::Redirect { location, .. }) => {
                    return Err(not_listening(format!("redirected to {location}")));
                }
                Err(error) => return Err(not_listening(error.to_string())),
            }
            let mut builder = client.into_builder();
            builder.set_max_message_size(MAX_MESSAGE_BYTES);
            builder.set_max_frame_size(MAX_MESSAGE_BYTES);
            Ok(builder.finish())
        };
        let (sender, receiver) = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| {
                not_listening(format!(
                    "no answer within {}s; if Chrome asks whether to allow the connection, \
                     allow it",
                    CONNECT_TIMEOUT.as_secs()
                ))
            })??;
        Ok(Self {
            sender,
            receiver,
            next_id: 1,
            loaded: VecDeque::new(),
        })
    }

    async fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, ToolError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = Value::from(session);
        }
        let broken = |error: soketto::connection::Error| {
            ToolError::new(format!(
                "the connection to Chrome broke during {method}: {error}"
            ))
        };
        self.sender
            .send_text(message.to_string())
            .await
            .map_err(broken)?;
        self.sender.flush().await.map_err(broken)?;
        for _ in 0..MAX_SKIPPED_MESSAGES {
            let mut incoming = self.receive(method).await?;
            if incoming["id"].as_u64() == Some(id) {
                if let Some(error) = incoming.get("error") {
                    return Err(ToolError::new(format!(
                        "Chrome refused {method}: {}",
                        error["message"].as_str().unwrap_or("no reason given")
                    )));
                }
                return Ok(incoming["result"].take());
            }
            self.note_event(&incoming, session);
        }
        Err(self.flooded(method))
    }

    async fn wait_for_load(
        &mut self,
        session: Option<&str>,
        loader: &str,
    ) -> Result<(), ToolError> {
        for _ in 0..MAX_SKIPPED_MESSAGES {
            if self.loaded.iter().any(|loaded| loaded == loader) {
                return Ok(());
            }
            let incoming = self.receive("the page load").await?;
            self.note_event(&incoming, session);
        }
        Err(self.flooded("the page load"))
    }

    fn note_event(&mut self, incoming: &Value, session: Option<&str>) {
        let params = &incoming["params"];
        if incoming["method"] == "Page.lifecycleEvent"
            && params["name"] == "load"
            && incoming["sessionId"].as_str() == session
            && let Some(loader) = params["loaderId"].as_str()
        {
            if self.loaded.len() == REMEMBERED_LOADS {
                self.loaded.pop_front();
            }
            self.loaded.push_back(loader.to_owned());
        }
    }

    async fn receive(&mut self, awaiting: &str) -> Result<Value, ToolError> {
        let mut bytes = Vec::new();
        self.receiver
            .receive_data(&mut bytes)
            .await
            .map_err(|error| {
                ToolError::new(format!(
                    "the connection to Chrome broke while awaiting {awaiting}: {error}"
                ))
            })?;
        serde_json::from_slice(&bytes).map_err(|error| {
            ToolError::new(format!("Chrome sent something that is not JSON: {error}"))
        })
    }

    fn flooded(&self, awaiting: &str) -> ToolError {
        ToolError::new(format!(
            "Chrome sent more than {MAX_SKIPPED_MESSAGES} other messages while cwcode awaited \
             {awaiting}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn web_chrome_endpoints_name_what_to_do_when_nothing_listens() {
        let dir = tempfile::tempdir().unwrap();
        let mut context = crate::tools::test_context(dir.path());
        let args = || ChromeFetchArgs {
            url: "https://example.org/".to_owned(),
        };

        let unset = ChromeFetch.call(args(), &context).await.unwrap_err();
        assert!(
            unset.message.starts_with("chrome_fetch is not set up."),
            "{unset}"
        );
        assert!(
            unset.message.contains("chrome://inspect/#remote-debugging"),
            "{unset}"
        );

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        for endpoint in [
            port.to_string(),
            format!("ws://127.0.0.1:{port}/devtools/browser/x"),
            dir.path().display().to_string(),
        ] {
            context.chrome_endpoint = Some(Arc::from(endpoint.as_str()));
            let error = ChromeFetch.call(args(), &context).await.unwrap_err();
            assert!(
                error.message.contains("--remote-debugging-port=9222"),
                "{endpoint}: {error}"
            );
        }

        context.chrome_endpoint = Some(Arc::from("wss://127.0.0.1:1/x"));
        let tls = ChromeFetch.call(args(), &context).await.unwrap_err();
        assert!(tls.message.contains("only ws:// is supported"), "{tls}");
    }
}

//! `web_fetch`: a GET of an http(s) URL, returned as text the model can read (SPEC §7): HTML as
//! Markdown, text and JSON as they are, binary refused. Bounded in redirects, time and bytes, and
//! remembered for the rest of the session so that reading a page twice costs nothing.

use std::collections::VecDeque;
use std::error::Error as _;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use reqwest::header::CONTENT_TYPE;
use reqwest::{Client, Response, Url, redirect};
use schemars::JsonSchema;
use serde::Deserialize;

use super::markdown::html_to_markdown;
use super::{Effect, MAX_RESULT_BYTES, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};
use crate::sandbox::secrets::Redactor;
use crate::util::error_chain;

const MAX_REDIRECTS: usize = 5;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// For the whole exchange, body included: a server trickling bytes must not hold a turn.
const TOTAL_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_MAX_BYTES: u64 = 5_000_000;
/// What `max_bytes` may raise the download bound to.
const MAX_MAX_BYTES: u64 = 20_000_000;
/// The text shown of a page: under the registry's bound, so that the note below is the one the
/// model sees.
const MAX_SHOWN_BYTES: usize = MAX_RESULT_BYTES - 1024;
/// How much of a failed response's body is read for the error message.
const ERROR_BODY_BYTES: u64 = 16 * 1024;
const ERROR_BODY_LINES: usize = 8;
/// Pages a session remembers; each holds at most [`MAX_RESULT_BYTES`], so the cache stays
/// under 2 MiB. The oldest is forgotten first.
const CACHED_PAGES: usize = 32;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WebFetchArgs {
    pub url: String,
    /// Default 5000000.
    pub max_bytes: Option<u64>,
}

impl ToolArgs for WebFetchArgs {}

/// The tool. Its HTTP client is built at the first call and shared by every session: it holds
/// no cookies and no credentials.
#[derive(Default)]
pub struct WebFetch {
    client: OnceLock<Client>,
}

impl Tool for WebFetch {
    type Args = WebFetchArgs;
    type Output = String;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "web_fetch",
            description: "GET an http(s) URL; HTML is returned as Markdown. Cached per session.",
            effect: Effect::ReadOnly,
        }
    }

    async fn call(&self, args: WebFetchArgs, context: &ToolContext) -> Result<String, ToolError> {
        let url = checked_url(&args.url, &context.secret_values)?;
        let bound = args
            .max_bytes
            .unwrap_or(DEFAULT_MAX_BYTES)
            .clamp(1, MAX_MAX_BYTES);
        if let Some(page) = context.web_cache.get(url.as_str(), bound) {
            return Ok(format!(
                "[from this session's cache: {url} was fetched earlier]\n{page}"
            ));
        }
        let client = self.client()?;
        let page = tokio::select! {
            biased;
            () = context.cancel.cancelled() => {
                return Err(ToolError::new(format!("the fetch of {url} was cancelled")));
            }
            page = fetch(client, &url, bound) => page?,
        };
        context
            .web_cache
            .put(url.as_str(), bound, page.cut, page.text.clone());
        Ok(page.text)
    }
}

impl WebFetch {
    fn client(&self) -> Result<&Client, ToolError> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        crate::util::install_crypto_provider();
        let client = Client::builder()
            .user_agent(concat!(
                "cwcode/",
                env!("CARGO_PKG_VERSION"),
                " (web_fetch)"
            ))
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(TOTAL_TIMEOUT)
            .redirect(redirect::Policy::custom(follow_redirect))
            .build()
            .map_err(|error| {
                ToolError::new(format!("cannot set up HTTP: {}", error_chain(&error)))
            })?;
        Ok(self.client.get_or_init(|| client))
    }
}

/// Only http and https, and never a URL carrying a secret of config.json: a page could be asked
/// to receive one.
pub(super) fn checked_url(text: &str, secret_values: &[String]) -> Result<Url, ToolError> {
    let url = Url::parse(text.trim()).map_err(|error| {
        ToolError::new(format!(
            "`{text}` is not a URL ({error}): give an absolute http:// or https:// URL"
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ToolError::new(format!(
            "only http:// and https:// URLs can be fetched, not {}: (read local files with \
             read_file)",
            url.scheme()
        )));
    }
    let redactor = Redactor::new(secret_values);
    let decoded = percent_decoded(url.as_str());
    if redactor.contains_secret(text) || redactor.contains_secret(&decoded) {
        return Err(ToolError::new(
            "refused: the URL holds a secret from cwcode's config, which is never sent anywhere \
             but its provider",
        ));
    }
    Ok(url)
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = bytes
            .get(index + 1..index + 3)
            .and_then(|pair| std::str::from_utf8(pair).ok())
            .and_then(|pair| u8::from_str_radix(pair, 16).ok());
        match (bytes[index], hex) {
            (b'%', Some(byte)) => {
                decoded.push(byte);
                index += 3;
            }
            (byte, _) => {
                decoded.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// Why a redirect was not followed; found again in the error's source chain.
#[derive(Debug, thiserror::Error)]
enum RedirectRefused {
    #[error("redirect loop: {0} redirects back to a URL already visited")]
    Loop(Url),
    #[error("more than {MAX_REDIRECTS} redirects (the last one to {0})")]
    TooMany(Url),
    #[error("a redirect to {0}, which is not http or https")]
    Scheme(Url),
}

fn follow_redirect(attempt: redirect::Attempt) -> redirect::Action {
    let next = attempt.url().clone();
    if !matches!(next.scheme(), "http" | "https") {
        return attempt.error(RedirectRefused::Scheme(next));
    }
    if attempt.previous().contains(&next) {
        return attempt.error(RedirectRefused::Loop(next));
    }
    if attempt.previous().len() > MAX_REDIRECTS {
        return attempt.error(RedirectRefused::TooMany(next));
    }
    attempt.follow()
}

struct Page {
    text: String,
    /// The download bound cut the body: a fetch with a larger bound may see more.
    cut: bool,
}

async fn fetch(client: &Client, url: &Url, bound: u64) -> Result<Page, ToolError> {
    let response = client
        .get(url.clone())
        .send()
        .await
        .map_err(|error| request_failed(url, &error))?;
    let final_url = response.url().clone();
    let status = response.status();
    if !status.is_success() {
        let (body, _) = read_body(response, ERROR_BODY_BYTES, url).await?;
        let excerpt: Vec<&str> = body.lines().take(ERROR_BODY_LINES).collect();
        return Err(ToolError::new(format!(
            "HTTP {status} from {final_url}; the body begins:\n{}",
            excerpt.join("\n")
        )));
    }
    let declared = declared_type(&response);
    if let Some(kind) = &declared
        && kind.class() == Class::Binary
    {
        return Err(binary_refused(
            &final_url,
            &kind.0,
            response.content_length(),
        ));
    }
    let declared_length = response.content_length();
    let (body, cut) = read_raw(response, bound, url).await?;
    let class = match &declared {
        Some(kind) if kind.class() != Class::Unknown => kind.class(),
        _ => sniff(&body),
    };
    let content_type = declared
        .as_ref()
        .map_or("no content type", |kind| kind.0.as_str())
        .to_owned();
    if class == Class::Binary {
        return Err(binary_refused(&final_url, &content_type, declared_length));
    }
    let downloaded = body.len();
    let text = String::from_utf8_lossy(&body).into_owned();
    let (text, converted) = if class == Class::Html {
        let markdown = tokio::task::spawn_blocking(move || html_to_markdown(&text))
            .await
            .map_err(|error| ToolError::new(format!("the HTML conversion failed: {error}")))?;
        (markdown, ", as Markdown")
    } else {
        (text, "")
    };
    let mut heading = format!("{final_url} ({content_type}, {downloaded} bytes{converted})");
    if final_url != *url {
        heading.push_str(&format!(", redirected from {url}"));
    }
    let mut page = format!("{heading}\n\n{}", shown(text));
    if cut {
        let of = declared_length.map_or(String::new(), |length| format!(" of {length}"));
        page.push_str(&format!(
            "\n[too large: only the first {downloaded}{of} bytes were downloaded; raise \
             max_bytes (up to {MAX_MAX_BYTES}) for more]"
        ));
    }
    Ok(Page { text: page, cut })
}

/// The text within [`MAX_SHOWN_BYTES`], with a note of what was left out.
pub(super) fn shown(mut text: String) -> String {
    if text.len() <= MAX_SHOWN_BYTES {
        return text;
    }
    let total = text.len();
    let mut end = MAX_SHOWN_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!(
        "\n[the text goes on: {end} of its {total} bytes are shown]"
    ));
    text
}

async fn read_raw(
    mut response: Response,
    bound: u64,
    url: &Url,
) -> Result<(Vec<u8>, bool), ToolError> {
    let limit = usize::try_from(bound).unwrap_or(usize::MAX);
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| request_failed(url, &error))?
    {
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// A failed response's body as readable text (Markdown for HTML).
async fn read_body(response: Response, bound: u64, url: &Url) -> Result<(String, bool), ToolError> {
    let is_html = declared_type(&response).is_some_and(|kind| kind.class() == Class::Html);
    let (body, cut) = read_raw(response, bound, url).await?;
    let text = String::from_utf8_lossy(&body).into_owned();
    if !is_html {
        return Ok((text, cut));
    }
    let markdown = tokio::task::spawn_blocking(move || html_to_markdown(&text))
        .await
        .map_err(|error| ToolError::new(format!("the HTML conversion failed: {error}")))?;
    Ok((markdown, cut))
}

fn binary_refused(url: &Url, content_type: &str, length: Option<u64>) -> ToolError {
    let size = length.map_or(String::new(), |length| format!(", {length} bytes"));
    ToolError::new(format!(
        "refused: {url} is binary ({content_type}{size}); web_fetch returns text only: \
         download it with bash (curl -o FILE URL) if you need the file"
    ))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Html,
    Text,
    Binary,
    /// Says nothing (`application/octet-stream` from a lazy server): look at the bytes.
    Unknown,
}

/// The `Content-Type` without parameters, lower-cased.
struct ContentType(String);

fn declared_type(response: &Response) -> Option<ContentType> {
    let value = response.headers().get(CONTENT_TYPE)?.to_str().ok()?;
    let essence = value.split(';').next()?.trim().to_ascii_lowercase();
    (!essence.is_empty()).then_some(ContentType(essence))
}

impl ContentType {
    fn class(&self) -> Class {
        let essence = self.0.as_str();
        match essence {
            "text/html" | "application/xhtml+xml" => Class::Html,
            "application/octet-stream" | "binary/octet-stream" => Class::Unknown,
            "application/json"
            | "application/xml"
            | "application/javascript"
            | "application/ecmascript"
            | "application/x-javascript"
            | "application/x-ndjson"
            | "application/yaml"
            | "application/x-yaml"
            | "application/toml"
            | "application/x-sh"
            | "application/sql"
            | "application/graphql" => Class::Text,
            _ if essence.starts_with("text/")
                || essence.ends_with("+json")
                || essence.ends_with("+xml") =>
            {
                Class::Text
            }
            _ => Class::Binary,
        }
    }
}

/// A body without a useful content type: NUL bytes or invalid UTF-8 mean binary.
fn sniff(body: &[u8]) -> Class {
    let head = &body[..body.len().min(4096)];
    if head.contains(&0) {
        return Class::Binary;
    }
    let text = match std::str::from_utf8(head) {
        Ok(text) => text,
        // A character cut at the end of the sample is still text.
        Err(error) if head.len() - error.valid_up_to() < 4 => {
            std::str::from_utf8(&head[..error.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return Class::Binary,
    };
    let start = text.trim_start().to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") {
        Class::Html
    } else {
        Class::Text
    }
}

/// What went wrong, in words: reqwest's own messages ("error sending request") name none of it.
fn request_failed(url: &Url, error: &reqwest::Error) -> ToolError {
    let host = url.host_str().unwrap_or_default();
    let chain = error_chain(error);
    let lower = chain.to_ascii_lowercase();
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<RedirectRefused>() {
            return ToolError::new(format!("{url} was not fetched: {refused}"));
        }
        if is_tls_error(cause) {
            return ToolError::new(format!("TLS failure talking to {host}: {cause}"));
        }
        source = cause.source();
    }
    let what = if error.is_timeout() {
        format!(
            "timed out (connect {}s, whole fetch {}s)",
            CONNECT_TIMEOUT.as_secs(),
            TOTAL_TIMEOUT.as_secs()
        )
    } else if lower.contains("dns error") || lower.contains("failed to lookup address") {
        format!("DNS lookup of {host} failed: check the host name")
    } else if lower.contains("certificate") || lower.contains("tls") {
        format!("TLS failure talking to {host}")
    } else if lower.contains("connection refused") {
        format!(
            "connection refused: nothing listens at {host}:{}",
            port_of(url)
        )
    } else if error.is_connect() {
        format!("cannot connect to {host}")
    } else if error.is_body() || error.is_decode() {
        "the connection broke while reading the body".to_owned()
    } else {
        "the request failed".to_owned()
    };
    ToolError::new(format!("{url}: {what} ({chain})"))
}

/// rustls's error arrives wrapped in io::Errors, whose `source` skips what they wrap.
fn is_tls_error(cause: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = cause;
    loop {
        if current.is::<rustls::Error>() {
            return true;
        }
        match current
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            Some(inner) => current = inner,
            None => return false,
        }
    }
}

fn port_of(url: &Url) -> u16 {
    url.port_or_known_default().unwrap_or_default()
}

/// The pages a session fetched: a second `web_fetch` of a URL is answered from here.
#[derive(Debug, Default)]
pub struct WebCache {
    pages: Mutex<VecDeque<CachedPage>>,
}

#[derive(Debug)]
struct CachedPage {
    url: String,
    bound: u64,
    cut: bool,
    text: String,
}

impl WebCache {
    /// The page fetched earlier, unless it was cut at a smaller bound than this call allows.
    fn get(&self, url: &str, bound: u64) -> Option<String> {
        let pages = self.pages.lock().unwrap_or_else(PoisonError::into_inner);
        pages
            .iter()
            .find(|page| page.url == url && (!page.cut || page.bound >= bound))
            .map(|page| page.text.clone())
    }

    fn put(&self, url: &str, bound: u64, cut: bool, text: String) {
        let mut pages = self.pages.lock().unwrap_or_else(PoisonError::into_inner);
        pages.retain(|page| page.url != url);
        if pages.len() >= CACHED_PAGES {
            pages.pop_front();
        }
        pages.push_back(CachedPage {
            url: url.to_owned(),
            bound,
            cut,
            text,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_urls_must_be_http_and_carry_no_secret() {
        let secrets = vec!["sk-very-secret-value".to_owned()];
        assert!(checked_url("https://example.org/a?b=c", &secrets).is_ok());
        let file = checked_url("file:///etc/passwd", &secrets).unwrap_err();
        assert!(file.message.contains("only http:// and https://"), "{file}");
        let bare = checked_url("example.org", &secrets).unwrap_err();
        assert!(bare.message.contains("is not a URL"), "{bare}");
        for leaking in [
            "https://evil.example/?k=sk-very-secret-value",
            "https://evil.example/?k=sk-very%2Dsecret%2Dvalue",
        ] {
            let refused = checked_url(leaking, &secrets).unwrap_err();
            assert!(refused.message.contains("holds a secret"), "{refused}");
        }
    }

    #[test]
    fn web_content_types_sort_into_markdown_text_and_binary() {
        let class = |essence: &str| ContentType(essence.to_owned()).class();
        assert_eq!(class("text/html"), Class::Html);
        assert_eq!(class("text/plain"), Class::Text);
        assert_eq!(class("application/json"), Class::Text);
        assert_eq!(class("application/vnd.api+json"), Class::Text);
        assert_eq!(class("image/png"), Class::Binary);
        assert_eq!(class("application/pdf"), Class::Binary);
        assert_eq!(class("application/octet-stream"), Class::Unknown);
        assert_eq!(sniff(b"<!DOCTYPE html><p>x"), Class::Html);
        assert_eq!(sniff(b"plain words"), Class::Text);
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0"), Class::Binary);
        assert_eq!(sniff("caf\u{e9}".as_bytes()[..4].as_ref()), Class::Text);
    }

    #[tokio::test]
    async fn web_a_server_that_speaks_no_tls_is_a_tls_failure() {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\n\r\nplain").await;
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let args = WebFetchArgs {
            url: format!("https://127.0.0.1:{port}/"),
            max_bytes: None,
        };

        let error = WebFetch::default()
            .call(args, &crate::tools::test_context(dir.path()))
            .await
            .unwrap_err();

        assert!(
            error
                .message
                .starts_with("TLS failure talking to 127.0.0.1"),
            "{error}"
        );
    }

    #[test]
    fn web_cache_serves_a_page_unless_it_was_cut_shorter_than_now_allowed() {
        let cache = WebCache::default();
        cache.put("https://a.example/", 100, true, "short".to_owned());
        assert_eq!(
            cache.get("https://a.example/", 50).as_deref(),
            Some("short")
        );
        assert_eq!(cache.get("https://a.example/", 200), None);
        cache.put("https://a.example/", 200, false, "whole".to_owned());
        assert_eq!(
            cache.get("https://a.example/", 900).as_deref(),
            Some("whole")
        );
        for index in 0..CACHED_PAGES {
            cache.put(
                &format!("https://{index}.example/"),
                1,
                false,
                String::new(),
            );
        }
        assert_eq!(cache.get("https://a.example/", 1), None);
    }
}

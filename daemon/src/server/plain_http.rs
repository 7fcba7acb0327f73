//! The API as a script with `curl` meets it (SPEC §4): a JSON body is taken as JSON whatever
//! `Content-Type` says (curl's `-d` sends a form type), `GET /schema` answers the API's JSON
//! Schema, and a subscription asked over plain HTTP is told it needs a WebSocket instead of
//! getting a bare "Internal error".

use std::future::Future;
use std::sync::OnceLock;

use jsonrpsee::MethodResponse;
use jsonrpsee::core::middleware::{Batch, BatchEntry, BatchEntryErr, Notification, RpcServiceT};
use jsonrpsee::server::{HttpBody, HttpResponse};
use jsonrpsee::types::{ErrorObject, ErrorObjectOwned, Request};

use cwcode_protocol::methods::{self, Subscription};

/// Where the schema is served.
pub const SCHEMA_PATH: &str = "/schema";

/// Marks a request that came without a WebSocket upgrade, for [`SubscriptionsNeedWebSocket`].
#[derive(Debug, Clone, Copy)]
struct PlainHttp;

/// Prepares one HTTP request for jsonrpsee, or answers it here.
pub fn prepare(request: &mut hyper::Request<hyper::body::Incoming>) -> Option<HttpResponse> {
    if request.method() == http::Method::GET && request.uri().path() == SCHEMA_PATH {
        return Some(schema_response());
    }
    let upgrade = request.headers().contains_key(http::header::UPGRADE);
    if request.method() == http::Method::POST && !upgrade {
        let json = request
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"));
        if !json {
            request.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
        }
        request.extensions_mut().insert(PlainHttp);
    }
    None
}

fn schema_response() -> HttpResponse {
    static SCHEMA: OnceLock<String> = OnceLock::new();
    let text = SCHEMA.get_or_init(|| {
        serde_json::to_string_pretty(&cwcode_protocol::schema::api_schema()).unwrap_or_default()
    });
    let mut response = HttpResponse::new(HttpBody::from(text.clone()));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/schema+json"),
    );
    response
}

/// The answer to a subscription asked without a WebSocket.
fn needs_websocket() -> ErrorObjectOwned {
    ErrorObject::owned(
        jsonrpsee::types::error::INVALID_REQUEST_CODE,
        format!(
            "{} streams events and needs a WebSocket (docs/api.md shows one with socat); over plain HTTP, read the journal in pages with {}",
            methods::SessionSubscribe::NAME,
            methods::SESSION_EVENTS
        ),
        None::<()>,
    )
}

/// An RPC middleware that answers subscriptions asked over plain HTTP with [`needs_websocket`].
#[derive(Clone)]
pub struct SubscriptionsNeedWebSocket<S>(pub S);

fn refused(request: &Request<'_>) -> bool {
    request.extensions().get::<PlainHttp>().is_some()
        && request.method_name() == methods::SessionSubscribe::NAME
}

impl<S> RpcServiceT for SubscriptionsNeedWebSocket<S>
where
    S: RpcServiceT<
            MethodResponse = MethodResponse,
            BatchResponse = MethodResponse,
            NotificationResponse = MethodResponse,
        > + Send
        + Sync
        + Clone
        + 'static,
{
    type MethodResponse = MethodResponse;
    type NotificationResponse = MethodResponse;
    type BatchResponse = MethodResponse;

    fn call<'a>(&self, request: Request<'a>) -> impl Future<Output = MethodResponse> + Send + 'a {
        let inner = self.0.clone();
        async move {
            if refused(&request) {
                return MethodResponse::error(request.id, needs_websocket());
            }
            inner.call(request).await
        }
    }

    fn batch<'a>(&self, mut batch: Batch<'a>) -> impl Future<Output = MethodResponse> + Send + 'a {
        for entry in batch.iter_mut() {
            let id = match entry {
                Ok(BatchEntry::Call(request)) if refused(request) => request.id.clone(),
                _ => continue,
            };
            *entry = Err(BatchEntryErr::new(id, needs_websocket()));
        }
        self.0.batch(batch)
    }

    fn notification<'a>(
        &self,
        notification: Notification<'a>,
    ) -> impl Future<Output = MethodResponse> + Send + 'a {
        self.0.notification(notification)
    }
}

//! Where a profile's requests go and the headers they carry: the chat and models URLs built from
//! `base_url` (a pasted Azure URL included), the key in the header its provider expects.

use reqwest::Url;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::provider::ProviderError;
use crate::provider::profile::{Profile, ProviderKind};
use crate::provider::quirks;

/// Where a profile's requests go.
pub(super) struct Endpoints {
    pub(super) chat: Url,
    pub(super) models: Url,
    pub(super) embeddings: Url,
    /// The deployment a legacy Azure URL names.
    pub(super) deployment: Option<String>,
}

impl Endpoints {
    /// `{base_url}/chat/completions` and `{base_url}/models`, whether or not the base ends in a
    /// slash or already ends in `/chat/completions` (a pasted Azure URL), keeping any query.
    pub(super) fn new(base_url: &str, kind: ProviderKind) -> Result<Endpoints, ProviderError> {
        let invalid = |reason: String| ProviderError::InvalidUrl {
            url: base_url.to_owned(),
            reason,
        };
        let mut base = Url::parse(base_url).map_err(|error| invalid(error.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(invalid(format!(
                "the scheme must be http or https, not {}",
                base.scheme()
            )));
        }
        let deployment = if kind == ProviderKind::Azure {
            quirks::azure_deployment(&base)
        } else {
            None
        };
        if deployment.is_some() {
            base = quirks::with_azure_api_version(base);
        }
        let segments: Vec<String> = base
            .path_segments()
            .ok_or_else(|| invalid("it cannot take a path".to_owned()))?
            .filter(|segment| !segment.is_empty())
            .map(str::to_owned)
            .collect();
        let base_segments = match segments.as_slice() {
            [rest @ .., chat, completions] if chat == "chat" && completions == "completions" => {
                rest
            }
            all => all,
        };
        let with_path = |tail: &[&str]| {
            let mut url = base.clone();
            url.set_path("");
            if let Ok(mut path) = url.path_segments_mut() {
                path.clear().extend(base_segments).extend(tail);
            }
            url
        };
        Ok(Endpoints {
            chat: with_path(&["chat", "completions"]),
            models: with_path(&["models"]),
            embeddings: with_path(&["embeddings"]),
            deployment,
        })
    }
}

pub(super) fn default_headers(
    profile: &Profile,
    api_key: Option<&str>,
) -> Result<HeaderMap, ProviderError> {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::USER_AGENT,
        HeaderValue::from_static(crate::provider::USER_AGENT),
    );
    if let Some(key) = api_key {
        let (name, value) = quirks::auth_header(profile.kind, key);
        let value = sensitive_header_value(name.as_str(), &value)?;
        headers.insert(name, value);
    }
    for (name, value) in &profile.headers {
        let header_name =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| ProviderError::InvalidHeader {
                name: name.clone(),
                reason: "not a valid header name".to_owned(),
            })?;
        headers.insert(header_name, sensitive_header_value(name, value)?);
    }
    Ok(headers)
}

/// Marked sensitive so that no debug output of a request shows it; the error never quotes the
/// value, which may be a key.
pub(super) fn sensitive_header_value(
    name: &str,
    value: &str,
) -> Result<HeaderValue, ProviderError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| ProviderError::InvalidHeader {
        name: name.to_owned(),
        reason: "the value holds characters a header cannot carry".to_owned(),
    })?;
    value.set_sensitive(true);
    Ok(value)
}

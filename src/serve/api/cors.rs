//! Cross-origin access for browser clients (`--cors-allow-origin`), off by
//! default (docs/api.md#cors).
//!
//! Every `OPTIONS` request is answered with 204 before the key is checked,
//! as a preflight, since browsers send one without a key (theirs carries
//! `Access-Control-Request-Method`, which is not required). Every answer to
//! an allowed origin says so, exposes the headers a client needs
//! ([`EXPOSED`]: `X-Snapshot-Version`, `ETag`, and a 429's `Retry-After`
//! and `RateLimit` fields), and varies on `Origin` unless any origin is
//! allowed.

use warp::http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ALLOW, HeaderValue, ORIGIN, VARY,
};
use warp::http::{HeaderMap, StatusCode};
use warp::reply::Response;

/// The answer headers a browser script may read beyond the safelisted
/// ones: the version and tag of a 200, and what a 429 says of when to
/// retry and of the limits (`limits::too_many`).
pub const EXPOSED: &str = "X-Snapshot-Version, ETag, Retry-After, RateLimit, RateLimit-Policy";

/// Which origins may call the API from a browser.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cors {
    /// Any origin (`*`): answers say `Access-Control-Allow-Origin: *`.
    Any,
    /// Exactly these origins (`https://app.example.com`), echoed back.
    Origins(Vec<String>),
}

/// A `--cors-allow-origin` value that is refused; clap shows it as the
/// reason the value is invalid (exit 2).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum CorsError {
    /// Neither `*` nor any origin: only commas and blanks.
    #[error("expected * or origins like https://app.example.com")]
    NoOrigin,
    #[error("{0:?} is not an origin: expected scheme://host[:port], like https://app.example.com")]
    NotAnOrigin(String),
}

impl Cors {
    /// Parses the flag's value: `*`, or origins separated by commas.
    pub fn parse(text: &str) -> Result<Cors, CorsError> {
        if text.trim() == "*" {
            return Ok(Cors::Any);
        }
        let origins: Vec<String> = text
            .split(',')
            .map(|o| o.trim().trim_end_matches('/').to_owned())
            .filter(|o| !o.is_empty())
            .collect();
        if origins.is_empty() {
            return Err(CorsError::NoOrigin);
        }
        for origin in &origins {
            let rest = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"));
            if rest.is_none_or(|r| r.is_empty() || r.contains('/')) {
                return Err(CorsError::NotAnOrigin(origin.clone()));
            }
        }
        Ok(Cors::Origins(origins))
    }

    /// The `Access-Control-Allow-Origin` value for a request's `Origin`,
    /// if it is allowed.
    fn allow_origin(&self, headers: &HeaderMap) -> Option<HeaderValue> {
        let origin = headers.get(ORIGIN)?;
        match self {
            Cors::Any => Some(HeaderValue::from_static("*")),
            Cors::Origins(allowed) => {
                let text = origin.to_str().ok()?;
                allowed.iter().any(|a| a == text).then(|| origin.clone())
            }
        }
    }

    /// Adds the CORS headers to an answer for an allowed origin.
    pub fn decorate(&self, headers: &HeaderMap, response: &mut Response) {
        if *self != Cors::Any {
            append_vary_origin(response);
        }
        let Some(allow) = self.allow_origin(headers) else {
            return;
        };
        let h = response.headers_mut();
        h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, allow);
        h.insert(
            ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSED),
        );
    }

    /// The answer to `OPTIONS`: 204, with what a browser may send when the
    /// origin is allowed.
    pub fn preflight(&self, headers: &HeaderMap) -> Response {
        let mut response = Response::new(Default::default());
        *response.status_mut() = StatusCode::NO_CONTENT;
        let h = response.headers_mut();
        h.insert(ALLOW, HeaderValue::from_static("GET, HEAD, OPTIONS"));
        if self.allow_origin(headers).is_some() {
            h.insert(
                ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, HEAD"),
            );
            h.insert(
                ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static("Authorization, If-None-Match"),
            );
            h.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
        }
        response
    }
}

/// `Vary: Origin`, added to whatever the answer varies on already.
fn append_vary_origin(response: &mut Response) {
    let h = response.headers_mut();
    let vary = match h.get(VARY).and_then(|v| v.to_str().ok()) {
        Some(existing) => format!("{existing}, Origin"),
        None => "Origin".to_owned(),
    };
    if let Ok(value) = HeaderValue::from_str(&vary) {
        h.insert(VARY, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_takes_a_star_or_origins() {
        assert_eq!(Cors::parse("*"), Ok(Cors::Any));
        assert_eq!(
            Cors::parse("https://a.example.com, http://localhost:3000/"),
            Ok(Cors::Origins(vec![
                "https://a.example.com".into(),
                "http://localhost:3000".into()
            ]))
        );
        for empty in ["", " , "] {
            assert_eq!(Cors::parse(empty), Err(CorsError::NoOrigin), "{empty:?}");
        }
        for bad in ["a.example.com", "https://a.example.com/app", "ftp://x"] {
            assert_eq!(
                Cors::parse(bad),
                Err(CorsError::NotAnOrigin(bad.into())),
                "{bad:?}"
            );
        }
    }
}

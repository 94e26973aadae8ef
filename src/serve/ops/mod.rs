//! The operators' listener: `GET /metrics` (OpenMetrics or the classic
//! Prometheus text, as the scraper's `Accept` asks) and `GET /snapshots`
//! (the state of every snapshot file, as JSON, and of the object store when
//! the snapshots come from one).

use std::sync::Arc;

use bytes::Bytes;
use warp::Filter;
use warp::filters::BoxedFilter;
use warp::http::header::{ACCEPT, ALLOW, CONTENT_TYPE, HeaderMap, HeaderValue, VARY};
use warp::http::{Method, StatusCode};
use warp::path::FullPath;
use warp::reply::Response;

use crate::metrics::{Format, Metrics};
use crate::serve::loader::Snapshots;
use crate::serve::reply::json;
use portfolio_wire::status::{SnapshotsStatus, StatusFilter};

/// The filter of the admin listener.
pub fn routes(snapshots: Arc<Snapshots>, metrics: Arc<Metrics>) -> BoxedFilter<(Response,)> {
    let query = warp::query::raw().or(warp::any().map(String::new)).unify();
    warp::method()
        .and(warp::path::full())
        .and(query)
        .and(warp::header::headers_cloned())
        .map(
            move |method: Method, path: FullPath, query: String, headers: HeaderMap| {
                if method != Method::GET && method != Method::HEAD {
                    let mut response = json(
                        StatusCode::METHOD_NOT_ALLOWED,
                        Bytes::from_static(b"{\"error\":\"Method not allowed\"}"),
                    );
                    response
                        .headers_mut()
                        .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
                    return response;
                }
                match path.as_str() {
                    "/snapshots" => snapshots_status(&snapshots, &query),
                    "/metrics" => {
                        metrics.fleet(&snapshots.fleet());
                        metrics_exposition(&metrics, &headers)
                    }
                    _ => json(
                        StatusCode::NOT_FOUND,
                        Bytes::from_static(b"{\"error\":\"Not found\"}"),
                    ),
                }
            },
        )
        .boxed()
}

fn metrics_exposition(metrics: &Metrics, headers: &HeaderMap) -> Response {
    // Several Accept fields are one comma-separated list (RFC 9110 §5.3).
    let accept = headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",");
    let format = negotiate(&accept);
    let mut response = Response::new(metrics.encode(format).into());
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    headers.insert(VARY, HeaderValue::from_static("Accept"));
    response
}

/// The format a scraper's `Accept` list asks for (RFC 9110 §12.5.1).
///
/// Each format takes the quality of the most specific media range that
/// matches it: `application/openmetrics-text` (with no version, `1.0.0` or
/// `0.0.1`; `1.0.0` is served) before `application/*` before `*/*` for
/// OpenMetrics, `text/plain` (no version or `0.0.4`) before `text/*` before
/// `*/*` for the classic text; a range with another version matches
/// nothing. OpenMetrics is served when its quality is above zero and above
/// the classic text's, or equal to it but named more specifically (Accept:
/// `application/openmetrics-text, */*`). Everything else, no `Accept`, an
/// empty or unreadable one, or one that accepts neither, gets the classic
/// text.
fn negotiate(accept: &str) -> Format {
    // (specificity, quality in thousandths) of each format; 0 = unmatched.
    let mut openmetrics = (0u8, 0u16);
    let mut classic = (0u8, 0u16);
    for range in split_unquoted(accept, ',') {
        let Some(range) = MediaRange::parse(range) else {
            continue;
        };
        for (best, specificity) in [
            (
                &mut openmetrics,
                range.specificity("application", "openmetrics-text", &["1.0.0", "0.0.1"]),
            ),
            (&mut classic, range.specificity("text", "plain", &["0.0.4"])),
        ] {
            if specificity > best.0
                || (specificity == best.0 && specificity > 0 && range.q > best.1)
            {
                *best = (specificity, range.q);
            }
        }
    }
    if openmetrics.1 > 0 && (openmetrics.1, openmetrics.0) > (classic.1, classic.0) {
        Format::OpenMetrics
    } else {
        Format::Classic
    }
}

/// One element of an `Accept` list: `type/subtype;version=..;q=..`.
struct MediaRange<'a> {
    kind: &'a str,
    subtype: &'a str,
    version: Option<&'a str>,
    /// Quality in thousandths, 0 to 1000.
    q: u16,
}

impl<'a> MediaRange<'a> {
    /// The range, or `None` if it is malformed (such a range is ignored).
    fn parse(text: &'a str) -> Option<MediaRange<'a>> {
        let mut parts = split_unquoted(text, ';');
        let (kind, subtype) = parts.next()?.trim().split_once('/')?;
        let (kind, subtype) = (kind.trim(), subtype.trim());
        if kind.is_empty() || subtype.is_empty() || (kind == "*" && subtype != "*") {
            return None;
        }
        let mut range = MediaRange {
            kind,
            subtype,
            version: None,
            q: 1000,
        };
        for param in parts {
            let (name, value) = param.split_once('=')?;
            let (name, value) = (name.trim(), value.trim());
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(value);
            if name.eq_ignore_ascii_case("q") {
                range.q = qvalue(value)?;
                // What follows q are accept extensions, not media type parameters.
                break;
            }
            if name.eq_ignore_ascii_case("version") {
                range.version = Some(value);
            }
        }
        Some(range)
    }

    /// How specifically this range names `kind/subtype` in one of
    /// `versions`: 4 with a matching version, 3 by name, 2 by `kind/*`, 1 by
    /// `*/*`, 0 not at all.
    fn specificity(&self, kind: &str, subtype: &str, versions: &[&str]) -> u8 {
        if self.kind == "*" {
            return 1;
        }
        if !self.kind.eq_ignore_ascii_case(kind) {
            return 0;
        }
        if self.subtype == "*" {
            return 2;
        }
        if !self.subtype.eq_ignore_ascii_case(subtype) {
            return 0;
        }
        match self.version {
            None => 3,
            Some(v) if versions.contains(&v) => 4,
            Some(_) => 0,
        }
    }
}

/// A qvalue (`0`, `0.5`, `1.000`) in thousandths; `None` if it is not one.
fn qvalue(text: &str) -> Option<u16> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths = fraction.bytes().chain(std::iter::repeat(b'0')).take(3);
    let fraction = thousandths.fold(0u16, |n, b| n * 10 + u16::from(b - b'0'));
    match whole {
        "0" => Some(fraction),
        "1" if fraction == 0 => Some(1000),
        _ => None,
    }
}

/// `text` split at every `separator` outside a quoted string.
fn split_unquoted(text: &str, separator: char) -> impl Iterator<Item = &str> {
    let mut quoted = false;
    let mut escaped = false;
    text.split(move |c: char| {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            c if c == separator && !quoted => return true,
            _ => {}
        }
        false
    })
}

fn snapshots_status(snapshots: &Snapshots, query: &str) -> Response {
    let filter = match StatusFilter::parse(query) {
        Ok(filter) => filter,
        Err(refused) => {
            let body = serde_json::json!({ "error": refused.to_string() });
            return json(StatusCode::BAD_REQUEST, body.to_string().into());
        }
    };
    let body = SnapshotsStatus::new(
        snapshots.statuses(),
        snapshots.source_status(),
        snapshots.verification(),
        &filter,
    );
    match serde_json::to_vec(&body) {
        Ok(bytes) => json(StatusCode::OK, bytes.into()),
        Err(err) => {
            tracing::error!(error = %err, "cannot serialize the snapshot status");
            json(
                StatusCode::INTERNAL_SERVER_ERROR,
                Bytes::from_static(b"{\"error\":\"Internal error\"}"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENMETRICS: Format = Format::OpenMetrics;
    const CLASSIC: Format = Format::Classic;

    #[test]
    fn negotiates_the_format_from_accept() {
        let cases: &[(&str, Format)] = &[
            // No preference: the classic text.
            ("", CLASSIC),
            ("*/*", CLASSIC),
            ("text/plain", CLASSIC),
            ("text/plain; version=0.0.4", CLASSIC),
            ("text/*", CLASSIC),
            ("application/json", CLASSIC),
            ("nonsense", CLASSIC),
            (",,;", CLASSIC),
            // What Prometheus 2.x sends by default.
            (
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
                OPENMETRICS,
            ),
            // Prometheus with scrape_protocols: [PrometheusText0.0.4].
            ("text/plain;version=0.0.4;q=1,*/*;q=0.1", CLASSIC),
            // What Prometheus 3 sends by default (no protobuf here).
            (
                "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5,application/openmetrics-text;version=1.0.0;q=0.4,application/openmetrics-text;version=0.0.1;q=0.3,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.2,text/plain;version=0.0.4;q=0.1,*/*;q=0.05",
                OPENMETRICS,
            ),
            ("application/openmetrics-text", OPENMETRICS),
            (
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                OPENMETRICS,
            ),
            (
                "APPLICATION/OpenMetrics-Text;Version=\"1.0.0\"",
                OPENMETRICS,
            ),
            ("application/openmetrics-text;version=0.0.1", OPENMETRICS),
            ("application/*", OPENMETRICS),
            // Quality decides, whatever the order.
            (
                "text/plain;q=0.5, application/openmetrics-text",
                OPENMETRICS,
            ),
            ("application/openmetrics-text;q=0.5, text/plain", CLASSIC),
            (
                "application/openmetrics-text;q=0.9, text/plain;q=0.95",
                CLASSIC,
            ),
            (
                "text/plain;q=0.949, application/openmetrics-text;q=0.95",
                OPENMETRICS,
            ),
            ("text/plain;q=0, */*", OPENMETRICS),
            ("text/*;q=0, application/*;q=0.1", OPENMETRICS),
            // Refused, or unknown versions: the classic text regardless.
            ("application/openmetrics-text;q=0", CLASSIC),
            ("application/openmetrics-text;q=0, */*", CLASSIC),
            ("application/openmetrics-text;version=2.0.0", CLASSIC),
            (
                "application/openmetrics-text;version=2.0.0, text/plain;q=0.1",
                CLASSIC,
            ),
            ("*/*;q=0", CLASSIC),
            // The most specific range sets a format's quality.
            ("application/openmetrics-text;q=0.2, */*;q=0.9", CLASSIC),
            (
                "application/*;q=0.1, application/openmetrics-text;version=1.0.0;q=0.8, */*;q=0.5",
                OPENMETRICS,
            ),
            (
                "application/openmetrics-text;version=1.0.0;q=0.3, application/openmetrics-text;q=0.9, text/plain;q=0.5",
                CLASSIC,
            ),
            // Equal quality: a named format beats a wildcard; else classic.
            ("application/openmetrics-text, */*", OPENMETRICS),
            ("application/openmetrics-text, text/plain", CLASSIC),
            ("text/plain, application/openmetrics-text", CLASSIC),
            ("*/*, application/*", OPENMETRICS),
            // Malformed ranges are skipped, the rest still count.
            (
                "application/openmetrics-text;q=2, text/plain;q=0.1",
                CLASSIC,
            ),
            ("application/openmetrics-text;q=abc", CLASSIC),
            ("application/openmetrics-text;q=0.5000", CLASSIC),
            ("*/plain, application/openmetrics-text;q=0.1", OPENMETRICS),
            (
                "text/plain;foo;q=0.9, application/openmetrics-text;q=0.05",
                OPENMETRICS,
            ),
            // Accept extensions follow q; they may have no value.
            (
                "text/plain;q=0.1;foo, application/openmetrics-text;q=0.05",
                CLASSIC,
            ),
            // Quoted strings may hold separators.
            (
                "text/plain;x=\";q=0\";q=0.9, application/openmetrics-text;q=0.5",
                CLASSIC,
            ),
            (
                "text/plain;x=\"a,*/*\";q=0.4, application/openmetrics-text;q=0.5",
                OPENMETRICS,
            ),
            // Parameters after q are extensions, not a version.
            (
                "application/openmetrics-text;q=0.5;version=9, text/plain;q=0.1",
                OPENMETRICS,
            ),
            // Whitespace around everything.
            (
                "  application/openmetrics-text ; version = 1.0.0 ; q = 0.8 ,  text/plain ; q=0.7 ",
                OPENMETRICS,
            ),
        ];
        let failures: Vec<String> = cases
            .iter()
            .filter(|(accept, want)| negotiate(accept) != *want)
            .map(|(accept, want)| {
                format!(
                    "Accept: {accept:?} gave {:?}, expected {want:?}",
                    negotiate(accept)
                )
            })
            .collect();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn reads_qvalues_as_the_rfc_writes_them() {
        for (text, want) in [
            ("0", Some(0)),
            ("0.", Some(0)),
            ("0.5", Some(500)),
            ("0.05", Some(50)),
            ("0.125", Some(125)),
            ("1", Some(1000)),
            ("1.000", Some(1000)),
            ("1.001", None),
            ("2", None),
            ("-0.5", None),
            (".5", None),
            ("0.1234", None),
            ("0.5x", None),
            ("", None),
        ] {
            assert_eq!(qvalue(text), want, "q={text:?}");
        }
    }
}

//! What a successful answer carries besides its body: `X-Snapshot-Version`,
//! a strong `ETag` and conditional requests, cache headers, and compression.
//!
//! The ETag is not a hash of the body. A response is a pure function of the
//! dataset (workspace and snapshot version) and the request's path and query,
//! so the tag is the dataset's fingerprint, computed once at load, followed by
//! a hash of path and query; a gzip body is another representation and gets
//! its own tag.
//!
//! A gzip body is assembled from records compressed at load (see
//! `store::Body::gzip`); only when precompression is off, not done yet, or
//! the page is in an order its records are not chained in (tasks by
//! company or filter) is it compressed here, per request. A 304 writes no
//! body at all.

use std::hash::{BuildHasher, Hasher};
use std::io::Write;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use warp::http::header::{
    ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, ETAG, HeaderName, HeaderValue, IF_NONE_MATCH,
    VARY,
};
use warp::http::{HeaderMap, StatusCode};
use warp::reply::Response;

use crate::reply::json;
use crate::store::{Body, Dataset};

/// Bodies smaller than this are sent as they are: compressing them costs
/// more CPU than the bytes it saves on the wire.
pub const COMPRESS_MIN_BYTES: usize = 1024;

/// A 200 answer from `dataset`, or a 304 if the client's copy is current.
pub fn ok(
    dataset: &Dataset,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    body: Body<'_>,
    compression: bool,
) -> Response {
    let gzip = compression && body.len() >= COMPRESS_MIN_BYTES && accepts_gzip(headers);
    let (tag, tag_len) = etag(dataset, path, query, gzip);
    let tag = &tag[..tag_len];
    let not_modified = headers
        .get(IF_NONE_MATCH)
        .is_some_and(|h| matches_etag(h, tag));
    let mut response = if not_modified {
        let mut r = Response::new(Bytes::new().into());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else if gzip {
        match body.gzip().or_else(|| compress(&body.identity())) {
            Some(compressed) => {
                let mut r = json(StatusCode::OK, compressed);
                r.headers_mut()
                    .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                r
            }
            None => json(StatusCode::OK, body.identity()),
        }
    } else {
        json(StatusCode::OK, body.identity())
    };
    let h = response.headers_mut();
    if let Ok(version) = HeaderValue::from_maybe_shared(dataset.version_bytes.clone()) {
        h.insert(X_SNAPSHOT_VERSION.clone(), version);
    }
    if let Ok(tag) = HeaderValue::from_bytes(tag) {
        h.insert(ETAG, tag);
    }
    h.insert(CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    h.insert(
        VARY,
        HeaderValue::from_static("Authorization, Accept-Encoding"),
    );
    response
}

static X_SNAPSHOT_VERSION: HeaderName = HeaderName::from_static("x-snapshot-version");

/// The longest tag: quotes, two 16-digit hashes, a dash and `-gz`.
const ETAG_MAX: usize = 38;

/// `"<dataset fingerprint>-<request hash>[-gz]"`, written on the stack
/// (and its length).
fn etag(dataset: &Dataset, path: &str, query: &str, gzip: bool) -> ([u8; ETAG_MAX], usize) {
    let mut hasher = rustc_hash::FxBuildHasher.build_hasher();
    hasher.write(path.as_bytes());
    hasher.write_u8(b'?');
    hasher.write(query.as_bytes());
    let request = hasher.finish();
    let mut tag = [b'"'; ETAG_MAX];
    hex(dataset.fingerprint, &mut tag[1..17]);
    tag[17] = b'-';
    hex(request, &mut tag[18..34]);
    let mut len = 34;
    if gzip {
        tag[len..len + 3].copy_from_slice(b"-gz");
        len += 3;
    }
    tag[len] = b'"';
    (tag, len + 1)
}

/// `n` as 16 lower-case hex digits.
fn hex(n: u64, out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, d) in out.iter_mut().enumerate() {
        *d = DIGITS[((n >> (60 - 4 * i)) & 0xF) as usize];
    }
}

/// Whether an `If-None-Match` value names `tag` (or is `*`). Weak
/// comparison, as RFC 9110 asks for `If-None-Match`.
fn matches_etag(header: &HeaderValue, tag: &[u8]) -> bool {
    let Ok(text) = header.to_str() else {
        return false;
    };
    text.split(',').map(str::trim).any(|candidate| {
        candidate == "*" || candidate.strip_prefix("W/").unwrap_or(candidate).as_bytes() == tag
    })
}

/// Whether `Accept-Encoding` lists gzip (or `*`) with a non-zero weight.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|value| {
            value.split(',').any(|item| {
                let mut parts = item.split(';').map(str::trim);
                let coding = parts.next().unwrap_or("");
                let zero = parts.any(|p| {
                    p.strip_prefix("q=")
                        .is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
                });
                (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !zero
            })
        })
}

/// gzip at the fastest level, when the page is not assembled from
/// precompressed records: the CPU spent here is spent on every answer.
fn compress(body: &[u8]) -> Option<Bytes> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(body.len() / 4), Compression::fast());
    encoder.write_all(body).ok()?;
    encoder.finish().ok().map(Bytes::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn gzip_is_accepted_unless_refused() {
        for (value, expected) in [
            ("gzip", true),
            ("br, gzip;q=0.5", true),
            ("GZIP", true),
            ("*", true),
            ("gzip;q=0", false),
            ("gzip; q=0.0, br", false),
            ("br, deflate", false),
            ("identity", false),
        ] {
            assert_eq!(
                accepts_gzip(&headers(&[("accept-encoding", value)])),
                expected,
                "{value}"
            );
        }
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[test]
    fn if_none_match_compares_weakly_and_in_lists() {
        let tag = b"\"abc-def\"";
        for (value, expected) in [
            ("\"abc-def\"", true),
            ("W/\"abc-def\"", true),
            ("\"x\", \"abc-def\"", true),
            ("*", true),
            ("\"abc-deg\"", false),
            ("abc-def", false),
        ] {
            assert_eq!(
                matches_etag(&HeaderValue::from_static(value), tag),
                expected,
                "{value}"
            );
        }
    }
}

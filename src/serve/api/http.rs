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
//! `store::Body::write_gzip`), into a buffer kept from an earlier answer
//! (`buffers`) as plain pages are; only when precompression is off, not done yet, or
//! the page is in an order its records are not chained in (tasks by
//! company or filter) is it compressed here, per request, and kept in a
//! small cache ([`CACHE_BYTES`]) for the next request of the same page. A
//! 304 writes no body at all.

use std::cell::RefCell;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::LazyLock;

use bytes::Bytes;
use flate2::{Compress, Compression, FlushCompress, Status};
use quick_cache::{Equivalent, Weighter};
use warp::http::header::{
    ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE, ETAG, HeaderName, HeaderValue,
    IF_NONE_MATCH, VARY,
};
use warp::http::{HeaderMap, StatusCode};
use warp::reply::Response;

use super::buffers;
use crate::serve::reply;
use portfolio_domain::store::{Body, Dataset};

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
    // O(limit) for a page (its records' lengths are summed): once.
    let len = body.len();
    let gzip = compression && len >= COMPRESS_MIN_BYTES && accepts_gzip(headers);
    let request = request_hash(path, query);
    let (tag, tag_len) = etag(dataset.fingerprint, request, gzip);
    let tag = &tag[..tag_len];
    let not_modified = headers
        .get(IF_NONE_MATCH)
        .is_some_and(|h| matches_etag(h, tag));
    if not_modified {
        let mut response = Response::new(Bytes::new().into());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        let h = response.headers_mut();
        if let Ok(version) = HeaderValue::from_maybe_shared(dataset.version_bytes.clone()) {
            h.insert(X_SNAPSHOT_VERSION.clone(), version);
        }
        if let Ok(tag) = HeaderValue::from_bytes(tag) {
            h.insert(ETAG, tag);
        }
        h.insert(CACHE_CONTROL, HeaderValue::from_static(CACHE_CONTROL_VALUE));
        h.insert(VARY, HeaderValue::from_static(VARY_VALUE));
        return response;
    }
    let (body, encoded) = if gzip {
        let page = Page {
            workspace: &dataset.workspace_id,
            dataset: dataset.fingerprint,
            request,
            path,
            query,
        };
        let assembled = || buffers::try_filled(|out| body.write_gzip(out));
        match body
            .shared_gzip()
            .or_else(assembled)
            .or_else(|| compressed(&CACHE, &page, &body))
        {
            Some(compressed) => (compressed, true),
            None => (plain(&body, len), false),
        }
    } else {
        (plain(&body, len), false)
    };
    let mut response = Response::new(body.into());
    *response.headers_mut() = heads(dataset, encoded);
    // In the place the ETag has among the headers (a tag is quotes, hex
    // digits and dashes: always a header value).
    match HeaderValue::from_bytes(tag) {
        Ok(tag) => response.headers_mut().insert(ETAG, tag),
        Err(_) => response.headers_mut().remove(ETAG),
    };
    response
}

const CACHE_CONTROL_VALUE: &str = "private, no-cache";
const VARY_VALUE: &str = "Authorization, Accept-Encoding";

/// The headers of a 200 from `dataset`, gzip-encoded or not, in the order
/// they are sent, with an empty ETag to be replaced in place: made once per
/// dataset and thread, cloned for each answer (a clone costs two
/// allocations, as an empty map filled per answer did, but none of the
/// hashing and checking of names and values).
fn heads(dataset: &Dataset, gzip: bool) -> HeaderMap {
    HEADS.with_borrow_mut(|heads| {
        let slot = match heads.iter().position(|h| h.is_for(dataset)) {
            Some(slot) => slot,
            None if heads.len() < KEPT_HEADS => {
                heads.push(Heads::of(dataset));
                heads.len() - 1
            }
            None => {
                // Another dataset's slot, chosen by fingerprint.
                let slot = (dataset.fingerprint % KEPT_HEADS as u64) as usize;
                heads[slot] = Heads::of(dataset);
                slot
            }
        };
        let h = &heads[slot];
        if gzip {
            h.gzip.clone()
        } else {
            h.plain.clone()
        }
    })
}

/// Datasets whose headers a thread keeps: a replica serves many
/// workspaces, but a thread's requests of a moment come from a few.
const KEPT_HEADS: usize = 4;

thread_local! {
    static HEADS: RefCell<Vec<Heads>> = const { RefCell::new(Vec::new()) };
}

/// A dataset's response headers, plain and gzip.
struct Heads {
    /// Which dataset: its fingerprint and its version text, both compared,
    /// so that a header never carries another dataset's version.
    fingerprint: u64,
    version: Bytes,
    plain: HeaderMap,
    gzip: HeaderMap,
}

impl Heads {
    fn is_for(&self, dataset: &Dataset) -> bool {
        self.fingerprint == dataset.fingerprint && self.version == dataset.version_bytes
    }

    fn of(dataset: &Dataset) -> Heads {
        let version = HeaderValue::from_maybe_shared(dataset.version_bytes.clone()).ok();
        let map = |gzip: bool| {
            let mut h = HeaderMap::with_capacity(6);
            h.insert(CONTENT_TYPE, HeaderValue::from_static(reply::JSON));
            if gzip {
                h.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            }
            // A version that is no header value is left out, as before.
            if let Some(version) = &version {
                h.insert(X_SNAPSHOT_VERSION.clone(), version.clone());
            }
            h.insert(ETAG, HeaderValue::from_static(""));
            h.insert(CACHE_CONTROL, HeaderValue::from_static(CACHE_CONTROL_VALUE));
            h.insert(VARY, HeaderValue::from_static(VARY_VALUE));
            h
        };
        Heads {
            fingerprint: dataset.fingerprint,
            version: dataset.version_bytes.clone(),
            plain: map(false),
            gzip: map(true),
        }
    }
}

/// The plain JSON of `body` (`len` bytes): shared if it is, else copied
/// into a kept buffer.
fn plain(body: &Body<'_>, len: usize) -> Bytes {
    body.shared_plain()
        .unwrap_or_else(|| buffers::filled(len, |out| body.write(out)))
}

static X_SNAPSHOT_VERSION: HeaderName = HeaderName::from_static("x-snapshot-version");

/// The longest tag: quotes, two 16-digit hashes, a dash and `-gz`.
const ETAG_MAX: usize = 38;

/// A hash of path and query: what, with the dataset's fingerprint, names a
/// response.
fn request_hash(path: &str, query: &str) -> u64 {
    let mut hasher = rustc_hash::FxBuildHasher.build_hasher();
    hasher.write(path.as_bytes());
    hasher.write_u8(b'?');
    hasher.write(query.as_bytes());
    hasher.finish()
}

/// `"<dataset fingerprint>-<request hash>[-gz]"`, written on the stack
/// (and its length).
fn etag(fingerprint: u64, request: u64, gzip: bool) -> ([u8; ETAG_MAX], usize) {
    let mut tag = [b'"'; ETAG_MAX];
    hex(fingerprint, &mut tag[1..17]);
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

/// A gzip header as flate2's `GzEncoder` writes it at the fastest level:
/// no name, no time, XFL = 4 (fastest), OS = unknown.
const GZIP_HEADER: [u8; 10] = [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 4, 0xFF];

thread_local! {
    /// One deflate state per thread, reset for each answer. A new state
    /// per answer is some 270 KB allocated and freed: besides the cost,
    /// each one left a hole below the page cache's next entry, and the
    /// heap grew by 47 MiB over 200 cached pages.
    static DEFLATE: RefCell<Compress> = RefCell::new(Compress::new(Compression::fast(), false));
}

/// gzip at the fastest level, when the page is not assembled from
/// precompressed records: the CPU spent here is spent on every answer.
fn compress(body: &[u8]) -> Option<Bytes> {
    DEFLATE.with_borrow_mut(|deflate| {
        deflate.reset();
        let mut out = Vec::with_capacity(body.len() / 3 + 64);
        out.extend_from_slice(&GZIP_HEADER);
        loop {
            let read = deflate.total_in() as usize;
            let status = deflate
                .compress_vec(&body[read..], &mut out, FlushCompress::Finish)
                .ok()?;
            if status == Status::StreamEnd {
                break;
            }
            // Out of room (the body does not compress much): double it.
            out.reserve(out.capacity());
        }
        let mut crc = flate2::Crc::new();
        crc.update(body);
        out.extend_from_slice(&crc.sum().to_le_bytes());
        // ISIZE is the length modulo 2^32 (RFC 1952).
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        // The page cache may keep it: no spare capacity (shrinking is done
        // in place).
        out.shrink_to_fit();
        Some(Bytes::from(out))
    })
}

/// The gzip answer of `page`, from `cache` or compressed (and kept there).
fn compressed(cache: &PageCache, page: &Page<'_>, body: &Body<'_>) -> Option<Bytes> {
    if let Some(hit) = cache.get(page) {
        return Some(hit);
    }
    let gzip = compress(&plain(body, body.len()))?;
    cache.insert(page, gzip.clone());
    Some(gzip)
}

/// Bytes of gzip answers compressed per request that are kept, in the
/// whole process. Such a page (a company's tasks, tasks filtered by
/// status) costs several times a plain answer to compress; a client that
/// asks for it again (a dashboard, another user of the workspace) gets
/// the copy. 4 MiB holds about 500 pages of 50 tasks, and is 0.04 of the
/// `medium` dataset's JSON (BENCHMARKS.md, "gzip by default").
pub const CACHE_BYTES: usize = 4 << 20;

/// What each entry costs besides its body and names (the cache's slot and
/// links, allocation headers), for the bound.
const ENTRY_OVERHEAD: usize = 96;

static CACHE: LazyLock<PageCache> = LazyLock::new(|| PageCache::new(CACHE_BYTES));

/// A response's name: the dataset (a new version is a new fingerprint, so
/// a reload leaves the old entries to age out), its workspace (compared:
/// the fingerprint is only a hash, and the cache is the whole process's,
/// so no other workspace's page can ever answer), and its path and query.
struct Page<'a> {
    workspace: &'a str,
    dataset: u64,
    request: u64,
    path: &'a str,
    query: &'a str,
}

/// A [`Page`] as the cache keeps it. Hashed as the dataset and the hash of
/// path and query, already made for the ETag; path and query are compared
/// on a hit, as the hash is only a hash.
#[derive(PartialEq, Eq)]
struct Name {
    workspace: Box<str>,
    dataset: u64,
    request: u64,
    path: Box<str>,
    query: Box<str>,
}

impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.dataset);
        state.write_u64(self.request);
    }
}

impl Hash for Page<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.dataset);
        state.write_u64(self.request);
    }
}

/// A page is looked up without making a [`Name`] of it.
impl Equivalent<Name> for Page<'_> {
    fn equivalent(&self, name: &Name) -> bool {
        self.dataset == name.dataset
            && self.request == name.request
            && self.workspace == &*name.workspace
            && self.path == &*name.path
            && self.query == &*name.query
    }
}

/// An entry's weight: its bytes, body and names, and [`ENTRY_OVERHEAD`].
#[derive(Clone)]
struct Weight;

impl Weighter<Name, Bytes> for Weight {
    fn weight(&self, name: &Name, gzip: &Bytes) -> u64 {
        let names = name.workspace.len() + name.path.len() + name.query.len();
        (gzip.len() + names + ENTRY_OVERHEAD) as u64
    }
}

/// gzip answers by page, at most `capacity` bytes, evicted by
/// `quick_cache`'s Clock-PRO variant: a page read again outlives pages
/// asked for once, and one asked for again soon after it went comes back
/// to stay. In [`SHARDS`] parts, each with its own lock.
struct PageCache {
    capacity: usize,
    pages: quick_cache::sync::Cache<Name, Bytes, Weight>,
}

/// The cache's parts, each a lock and an eighth of the bytes: fixed
/// rather than `quick_cache`'s default (from the number of cores), so that
/// which pages are kept does not depend on the machine. A page may take at
/// most one part ([`PageCache::insert`]).
const SHARDS: usize = 8;

/// The pages of a typical size (8 KiB) `capacity` holds, for the cache's
/// sizing of its parts (at least 32 pages each, else fewer parts) and of
/// its memory of recently evicted pages.
fn typical_pages(capacity: usize) -> usize {
    (capacity / (8 << 10)).max(1)
}

impl PageCache {
    fn new(capacity: usize) -> PageCache {
        let options = quick_cache::OptionsBuilder::new()
            .shards(SHARDS)
            .estimated_items_capacity(typical_pages(capacity))
            .weight_capacity(capacity as u64)
            .build()
            .expect("refused only when a capacity is not set");
        let pages = quick_cache::sync::Cache::with_options(
            options,
            Weight,
            Default::default(),
            Default::default(),
        );
        PageCache { capacity, pages }
    }

    fn get(&self, page: &Page<'_>) -> Option<Bytes> {
        self.pages.get(page)
    }

    fn insert(&self, page: &Page<'_>, gzip: Bytes) {
        let name = Name {
            workspace: page.workspace.into(),
            dataset: page.dataset,
            request: page.request,
            path: page.path.into(),
            query: page.query.into(),
        };
        // One page may take at most an eighth: a few huge pages must not
        // push out every other.
        if Weight.weight(&name, &gzip) > (self.capacity / SHARDS) as u64 {
            return;
        }
        self.pages.insert(name, gzip);
    }
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
    fn answers_compressed_per_request_are_one_gzip_member_of_the_body() {
        use std::io::Read;
        // Text that compresses, bytes that do not (the output outgrows its
        // first guess), nothing; twice each, through one reused state.
        let mut noise = Vec::new();
        let mut x = 1u32;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            noise.push(x as u8);
        }
        let text = b"{\"data\":[{\"id\":1}],\"pagination\":{}}".repeat(500);
        for body in [&text[..], &noise, b"", &text, &noise] {
            let gz = compress(body).expect("compressed");
            let mut decoder = flate2::read::GzDecoder::new(&gz[..]);
            let mut plain = Vec::new();
            decoder.read_to_end(&mut plain).expect("valid gzip");
            assert_eq!(plain, body);
            assert!(decoder.into_inner().is_empty(), "one member");
        }
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
    fn the_page_cache_keeps_pages_by_name_and_what_is_read_within_its_bound() {
        // Each entry costs 1000 bytes (its body, "ws", "/p/NN" and "limit=50"):
        // eighty fill the cache; the first seventy are all kept (once
        // full, `quick_cache` keeps a few hundredths of it for new pages).
        let body = Bytes::from(vec![b'x'; 1000 - ENTRY_OVERHEAD - 15]);
        let cache = PageCache::new(80_000);
        let paths: Vec<String> = (0..100).map(|n| format!("/p/{n:02}")).collect();
        let page = |n: usize| Page {
            workspace: "ws",
            dataset: 7,
            request: n as u64,
            path: &paths[n],
            query: "limit=50",
        };
        for n in 0..70 {
            cache.insert(&page(n), body.clone());
        }
        for (n, path) in paths.iter().enumerate().take(70) {
            assert_eq!(cache.get(&page(n)), Some(body.clone()), "{path}");
        }
        assert_eq!(cache.pages.weight(), 70_000);
        // The same hash under another path is another page, and so is the
        // same page of another dataset.
        assert!(
            cache
                .get(&Page {
                    path: "/q",
                    ..page(0)
                })
                .is_none()
        );
        assert!(
            cache
                .get(&Page {
                    dataset: 8,
                    ..page(0)
                })
                .is_none()
        );
        // The same fingerprint and request in another workspace: never its
        // page.
        assert!(
            cache
                .get(&Page {
                    workspace: "ws-other",
                    ..page(0)
                })
                .is_none()
        );
        // Pages asked for once push each other out, never the bound, nor
        // a page read in between; the newest is kept.
        for round in 0..10 {
            for n in 70..100 {
                let other = Page {
                    dataset: round,
                    ..page(n)
                };
                cache.insert(&other, body.clone());
                assert!(cache.get(&other).is_some(), "{} in round {round}", paths[n]);
                assert!(cache.get(&page(0)).is_some(), "{} gone", paths[0]);
                let weight = cache.pages.weight();
                assert!(weight <= 80_000, "{weight} bytes");
            }
        }
        // More than an eighth of the cache: not kept.
        cache.insert(&page(1), Bytes::from(vec![0; 10_000]));
        assert_eq!(cache.get(&page(1)), None);
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

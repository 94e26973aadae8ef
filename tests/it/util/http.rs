//! The one hand-written HTTP/1.1 client of the tests: one-shot requests on a
//! fresh connection read to its end (`get_from`, and `TestServer`'s
//! requests), hand-driven keep-alive connections (`Conn`) for partial heads,
//! stalls and slow readers, the parsing of heads and of bodies framed by
//! length, by chunks or by the end of the stream, gzip decoding, and the
//! assertions on responses that several modules share.

use std::io::Read;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::net::{TcpSocket, TcpStream};

use super::{IO_TIMEOUT, UNAUTHORIZED_BODY};

// ---------------------------------------------------------------------------
// Responses.
// ---------------------------------------------------------------------------

/// One parsed HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Header names are lower-cased; values are as sent, trimmed.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// Returns the first value of the header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Returns the body as text, lossily.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Returns the body parsed as JSON, failing the test if it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}), status {}: {}",
                self.status,
                self.text()
            )
        })
    }

    /// Returns the ids of the records in `data`, which must be an array.
    pub fn ids(&self) -> Vec<String> {
        let body = self.json();
        let data = body["data"]
            .as_array()
            .unwrap_or_else(|| panic!("data is not an array: {body}"));
        data.iter()
            .map(|r| {
                r["id"]
                    .as_str()
                    .unwrap_or_else(|| panic!("record without a string id: {r}"))
                    .to_string()
            })
            .collect()
    }

    /// Fails the test unless this is a JSON success with the given status.
    pub fn assert_ok(&self, context: &str) -> Value {
        assert_eq!(self.status, 200, "{context}: status, body {}", self.text());
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "{context}: content-type"
        );
        self.json()
    }

    /// Returns why this is not a well-formed error reply with `status`, if it is not.
    pub fn error_problem(&self, status: u16) -> Option<String> {
        if self.status != status {
            return Some(format!(
                "status {} instead of {status}, body {}",
                self.status,
                self.text()
            ));
        }
        if self.header("content-type") != Some("application/json") {
            return Some(format!(
                "content-type {:?} instead of application/json",
                self.header("content-type")
            ));
        }
        let body: Value = match serde_json::from_slice(&self.body) {
            Ok(v) => v,
            Err(e) => return Some(format!("body is not JSON ({e}): {}", self.text())),
        };
        let Some(obj) = body.as_object() else {
            return Some(format!("body is not an object: {body}"));
        };
        if obj.len() != 1 || !obj.get("error").is_some_and(Value::is_string) {
            return Some(format!(
                "body is not exactly {{\"error\": <string>}}: {body}"
            ));
        }
        if status == 401 {
            if self.text() != UNAUTHORIZED_BODY {
                return Some(format!(
                    "401 body {:?} instead of {UNAUTHORIZED_BODY:?}",
                    self.text()
                ));
            }
            if let Some(p) = self.www_authenticate_problem() {
                return Some(p);
            }
        }
        None
    }

    /// Returns why this response lacks `WWW-Authenticate: Bearer`, if it does.
    pub fn www_authenticate_problem(&self) -> Option<String> {
        match self.header("www-authenticate") {
            Some(v) if v == "Bearer" || v.starts_with("Bearer ") => None,
            other => Some(format!("WWW-Authenticate is {other:?}, not Bearer")),
        }
    }

    /// Fails the test unless this is a well-formed error reply with `status`.
    pub fn assert_error(&self, status: u16, context: &str) {
        if let Some(problem) = self.error_problem(status) {
            panic!("{context}: {problem}");
        }
    }
}

// ---------------------------------------------------------------------------
// Assertions on responses.
// ---------------------------------------------------------------------------

/// Fails the test unless `value` is an object with exactly the keys `keys`.
pub fn assert_keys(value: &Value, keys: &[&str], context: &str) {
    let obj = value
        .as_object()
        .unwrap_or_else(|| panic!("{context}: not an object: {value}"));
    let mut got: Vec<&str> = obj.keys().map(String::as_str).collect();
    got.sort_unstable();
    let mut want = keys.to_vec();
    want.sort_unstable();
    assert_eq!(got, want, "{context}: keys of {value}");
}

/// Returns the ETag of a 200, failing unless it is a strong tag `"..."`.
pub fn strong_etag(resp: &Response, context: &str) -> String {
    let tag = resp
        .header("etag")
        .unwrap_or_else(|| panic!("{context}: no ETag on a {} answer", resp.status));
    assert!(
        !tag.starts_with("W/"),
        "{context}: weak ETag {tag:?}, expected a strong one"
    );
    assert!(
        tag.len() >= 3 && tag.starts_with('"') && tag.ends_with('"'),
        "{context}: ETag {tag:?} is not a quoted entity-tag"
    );
    assert!(
        tag[1..tag.len() - 1]
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x7e).contains(&b)),
        "{context}: ETag {tag:?} has characters an entity-tag may not"
    );
    tag.to_owned()
}

/// Whether the comma-separated header `name` lists `token` (any case).
pub fn lists(resp: &Response, name: &str, token: &str) -> bool {
    resp.headers
        .iter()
        .filter(|(k, _)| k == name)
        .flat_map(|(_, v)| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Fails unless `resp` carries the cache headers of a cacheable API answer.
pub fn assert_cache_headers(resp: &Response, context: &str) {
    assert_eq!(
        resp.header("cache-control"),
        Some("private, no-cache"),
        "{context}: Cache-Control"
    );
    assert!(
        lists(resp, "vary", "Authorization"),
        "{context}: Vary {:?} does not list Authorization",
        resp.header("vary")
    );
}

/// Returns the gzip decoding of `bytes`, or why they are not gzip.
pub fn try_gunzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out)?;
    Ok(out)
}

/// Returns the gzip decoding of `bytes`, failing the test if they are not gzip.
pub fn gunzip(bytes: &[u8]) -> Vec<u8> {
    try_gunzip(bytes).expect("the body is valid gzip")
}

// ---------------------------------------------------------------------------
// One-shot requests.
// ---------------------------------------------------------------------------

/// Percent-encodes every byte of `s` other than the unreserved characters.
pub fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A counter or gauge of `/metrics` on the admin listener `admin`, 0 when
/// absent.
pub async fn metric_at(admin: SocketAddr, series: &str) -> f64 {
    let text = get_from(admin, "/metrics", None)
        .await
        .expect("/metrics")
        .text();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |value| value.trim().parse().expect("a number"))
}

/// Sends `GET path` to `addr` with `Authorization: Bearer key` when a key is
/// given; for a server the tests did not start themselves (the binary).
pub async fn get_from(addr: SocketAddr, path: &str, key: Option<&str>) -> Result<Response, String> {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(key) = key {
        req.push_str(&format!("Authorization: Bearer {key}\r\n"));
    }
    req.push_str("\r\n");
    match tokio::time::timeout(IO_TIMEOUT, exchange(addr, "GET", req.into_bytes())).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "GET {path}: no complete answer within {IO_TIMEOUT:?}"
        )),
    }
}

/// Sends `GET path` to `addr` with exactly these headers (plus `Host` and
/// `Connection: close`), failing the test without a complete answer; for
/// a server the tests did not start themselves (the binary).
pub async fn request_from(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    req.push_str("\r\n");
    tokio::time::timeout(IO_TIMEOUT, exchange(addr, "GET", req.into_bytes()))
        .await
        .unwrap_or_else(|_| Err(format!("no complete answer within {IO_TIMEOUT:?}")))
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// Sends one request on a fresh connection, reads to end of stream and parses the answer.
pub async fn exchange(
    addr: SocketAddr,
    method: &str,
    request: Vec<u8>,
) -> Result<Response, String> {
    let mut conn = Conn::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    conn.send(&request)
        .await
        .map_err(|e| format!("write: {e}"))?;
    conn.read_to_end().await.map_err(|e| format!("read: {e}"))?;
    parse_complete(&conn.buf, method == "HEAD")
}

// ---------------------------------------------------------------------------
// A hand-driven HTTP/1.1 connection: keep-alive, partial heads, stalls.
// ---------------------------------------------------------------------------

/// What waiting for a response on a connection gave.
#[derive(Debug)]
pub enum Answer {
    Response(Response),
    /// The server closed (or reset) the connection without a complete response.
    Closed,
    /// Nothing complete arrived in time; the connection is still open.
    TimedOut,
}

impl Answer {
    pub fn expect_response(self, context: &str) -> Response {
        match self {
            Answer::Response(r) => r,
            other => panic!("{context}: expected a response, got {other:?}"),
        }
    }
}

/// One client connection, driven byte by byte.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    eof: bool,
}

impl Conn {
    fn new(stream: TcpStream) -> Conn {
        Conn {
            stream,
            buf: Vec::new(),
            eof: false,
        }
    }

    /// Connects to `addr`, or says why not.
    async fn connect(addr: SocketAddr) -> std::io::Result<Conn> {
        TcpStream::connect(addr).await.map(Conn::new)
    }

    /// Connects to `addr`, failing the test if that does not work within `IO_TIMEOUT`.
    pub async fn open(addr: SocketAddr) -> Conn {
        tokio::time::timeout(IO_TIMEOUT, Conn::connect(addr))
            .await
            .unwrap_or_else(|_| panic!("connect {addr}: timed out"))
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"))
    }

    /// A connection whose receive buffer is tiny, so that a large response
    /// stays in flight on the server until the client reads it.
    pub async fn open_slow_reader(addr: SocketAddr) -> Conn {
        let socket = TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
        let stream = tokio::time::timeout(IO_TIMEOUT, socket.connect(addr))
            .await
            .unwrap_or_else(|_| panic!("connect {addr}: timed out"))
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        Conn::new(stream)
    }

    /// Writes all of `bytes`.
    pub async fn send(&self, bytes: &[u8]) -> std::io::Result<()> {
        // Readiness and `try_*` calls need only tokio's `net` feature, not `io-util`.
        let mut written = 0;
        while written < bytes.len() {
            self.stream.writable().await?;
            match self.stream.try_write(&bytes[written..]) {
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Sends `GET path` on this connection, keeping it alive.
    pub async fn send_get(&self, path: &str, headers: &[(&str, &str)]) {
        let mut req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        self.send(req.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("send GET {path}: {e}"));
    }

    /// Waits for bytes and appends them to the buffer: how many, 0 at end of stream.
    async fn read_some(&mut self) -> std::io::Result<usize> {
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            self.stream.readable().await?;
            match self.stream.try_read(&mut chunk) {
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads until the end of the stream.
    async fn read_to_end(&mut self) -> std::io::Result<()> {
        loop {
            match self.read_some().await {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                // A server may reset the connection after a complete answer.
                Err(e)
                    if e.kind() == std::io::ErrorKind::ConnectionReset && !self.buf.is_empty() =>
                {
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads what is there (waiting for something); false at end of stream
    /// (or on an error, which ends it too).
    pub async fn fill(&mut self) -> bool {
        if self.eof {
            return false;
        }
        match self.read_some().await {
            Ok(n) if n > 0 => true,
            Ok(_) | Err(_) => {
                self.eof = true;
                false
            }
        }
    }

    /// Waits up to `within` for one complete response (to a GET).
    pub async fn response(&mut self, within: Duration) -> Answer {
        let read = async {
            loop {
                match parse_one(&self.buf, false) {
                    Ok(Some((resp, used))) => {
                        self.buf.drain(..used);
                        return Answer::Response(resp);
                    }
                    Ok(None) => {}
                    Err(e) => panic!("unparsable response: {e}"),
                }
                if !self.fill().await {
                    // A response delimited by the end of the stream.
                    return match parse_until_close(&self.buf) {
                        Some(resp) => {
                            self.buf.clear();
                            Answer::Response(resp)
                        }
                        None => Answer::Closed,
                    };
                }
            }
        };
        tokio::time::timeout(within, read)
            .await
            .unwrap_or(Answer::TimedOut)
    }

    /// Waits up to `within` for the server to close the connection and
    /// returns how long that took, or `None` if it stayed open. Bytes that
    /// arrive meanwhile are kept.
    pub async fn closed_within(&mut self, within: Duration) -> Option<Duration> {
        let start = Instant::now();
        let wait = async { while self.fill().await {} };
        tokio::time::timeout(within, wait)
            .await
            .ok()
            .map(|()| start.elapsed())
    }
}

// ---------------------------------------------------------------------------
// Parsing.
// ---------------------------------------------------------------------------

/// Where the head of `raw` ends (the index of its blank line's `\r\n\r\n`).
fn head_end(raw: &[u8]) -> Option<usize> {
    raw.windows(4).position(|w| w == b"\r\n\r\n")
}

/// The first value of the (lower-case) header `name`.
fn header_in<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn is_chunked(headers: &[(String, String)]) -> bool {
    header_in(headers, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
}

fn content_length(headers: &[(String, String)]) -> Result<Option<usize>, String> {
    header_in(headers, "content-length")
        .map(|len| {
            len.parse()
                .map_err(|_| format!("bad content-length {len:?}"))
        })
        .transpose()
}

/// Parses a complete answer read to the end of the stream. For HEAD every
/// byte after the head is the body (so that a body sent anyway shows);
/// otherwise the body is framed by chunks, by `Content-Length` or by the end
/// of the stream.
fn parse_complete(raw: &[u8], head: bool) -> Result<Response, String> {
    let end = head_end(raw)
        .ok_or_else(|| format!("no end of headers in {:?}", String::from_utf8_lossy(raw)))?;
    let (status, headers) = parse_head(&raw[..end])?;
    let rest = &raw[end + 4..];
    let body = if head {
        rest.to_vec()
    } else if is_chunked(&headers) {
        dechunk_prefix(rest)?
            .map(|(body, _)| body)
            .ok_or("truncated chunked body")?
    } else if let Some(len) = content_length(&headers)? {
        if rest.len() < len {
            return Err(format!(
                "body has {} bytes, content-length says {len}",
                rest.len()
            ));
        }
        rest[..len].to_vec()
    } else {
        rest.to_vec()
    };
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// Parses one complete response at the start of `raw` on a connection that
/// stays open: the response and the bytes it took, or `None` if it is
/// incomplete (or delimited by the end of the stream).
fn parse_one(raw: &[u8], head_only: bool) -> Result<Option<(Response, usize)>, String> {
    let Some(end) = head_end(raw) else {
        return Ok(None);
    };
    let (status, headers) = parse_head(&raw[..end])?;
    let rest = &raw[end + 4..];
    let no_body = head_only || status == 204 || status == 304 || (100..200).contains(&status);
    let (body, used) = if no_body {
        (Vec::new(), 0)
    } else if is_chunked(&headers) {
        match dechunk_prefix(rest)? {
            Some(x) => x,
            None => return Ok(None),
        }
    } else if let Some(len) = content_length(&headers)? {
        if rest.len() < len {
            return Ok(None);
        }
        (rest[..len].to_vec(), len)
    } else {
        // Delimited by the end of the stream.
        return Ok(None);
    };
    Ok(Some((
        Response {
            status,
            headers,
            body,
        },
        end + 4 + used,
    )))
}

/// Parses a response whose body runs to the end of the stream; `None` if
/// there is none or it was cut short.
fn parse_until_close(raw: &[u8]) -> Option<Response> {
    let end = head_end(raw)?;
    let (status, headers) = parse_head(&raw[..end]).ok()?;
    let has_length = headers
        .iter()
        .any(|(k, _)| k == "content-length" || k == "transfer-encoding");
    if has_length && !matches!(status, 204 | 304) {
        return None; // truncated
    }
    Some(Response {
        status,
        headers,
        body: raw[end + 4..].to_vec(),
    })
}

/// Parses a head (without its blank line): the status and the headers, names lower-cased.
fn parse_head(head: &[u8]) -> Result<(u16, Vec<(String, String)>), String> {
    let text = std::str::from_utf8(head).map_err(|e| format!("head is not UTF-8: {e}"))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let proto = parts.next().unwrap_or_default();
    if !proto.starts_with("HTTP/1.") {
        return Err(format!("bad status line {status_line:?}"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("bad header line {line:?}"))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    Ok((status, headers))
}

/// Decodes a chunked body at the start of `rest`: the body and the bytes it
/// took, or `None` if it is not complete yet.
fn dechunk_prefix(rest: &[u8]) -> Result<Option<(Vec<u8>, usize)>, String> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let Some(line_end) = rest[at..].windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let size_text = std::str::from_utf8(&rest[at..at + line_end])
            .map_err(|_| "chunk size is not text")?
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned();
        let size = usize::from_str_radix(&size_text, 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        at += line_end + 2;
        if size == 0 {
            // No trailers: the final CRLF.
            return Ok((rest.len() >= at + 2).then_some((body, at + 2)));
        }
        if rest.len() < at + size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&rest[at..at + size]);
        at += size + 2;
    }
}

/// `GET path` from the binary at `addr` with `key`, plainly and asking for
/// gzip: both answers, the second checked to be gzip-encoded.
pub async fn plain_and_gzip(addr: SocketAddr, path: &str, key: &str) -> (Response, Response) {
    let auth = format!("Bearer {key}");
    let plain = request_from(addr, path, &[("Authorization", &auth)]).await;
    let gz = request_from(
        addr,
        path,
        &[("Authorization", &auth), ("Accept-Encoding", "gzip")],
    )
    .await;
    assert_eq!(gz.header("content-encoding"), Some("gzip"), "GET {path}");
    (plain, gz)
}

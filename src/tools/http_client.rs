//! The crate's one HTTP client, for the command line: `probe` asks a
//! listener for a health endpoint and `versions --replica` asks replicas'
//! admin listeners for `/snapshots`. One `GET` at a time over HTTP/1.1 with
//! hyper's client, on a current-thread tokio runtime of its own (these are
//! one-shot commands; nothing else runs), within one deadline.
//!
//! Addresses are `http://HOST[:PORT][/PATH]` or the same without the scheme
//! (`HOST:PORT`), parsed once with the `url` crate into an [`HttpUrl`]. The
//! listeners speak plain HTTP (TLS ends at the load balancer), so any other
//! scheme is refused with a message saying so.
//!
//! It imports nothing of the crate: commands and `publish` sit on it.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::header::{CONNECTION, HOST, HeaderValue, USER_AGENT};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use url::{Host, Url};

/// What `--url` and `--replica` take, said in messages about them.
const SHAPE: &str = "give http://HOST[:PORT][/PATH] or HOST:PORT[/PATH]";

/// The most of a body read; a `/snapshots` of ten thousand files is a few
/// megabytes.
const MAX_BODY: usize = 64 << 20;

/// An `http://` URL with a host, as the user wrote it (for messages) and as
/// parsed.
#[derive(Clone, Debug)]
pub struct HttpUrl {
    text: String,
    url: Url,
}

impl std::str::FromStr for HttpUrl {
    type Err = String;

    fn from_str(text: &str) -> Result<HttpUrl, String> {
        // Without a scheme, `url` would read `localhost:9090` as the scheme
        // `localhost`: an address without `://` is taken as http.
        let (scheme, rest) = match text.split_once("://") {
            Some((scheme, rest)) => (scheme, rest),
            None => ("http", text),
        };
        if scheme.eq_ignore_ascii_case("https") {
            return Err(format!(
                "only http:// URLs, not {scheme}://: the server speaks plain HTTP \
                 (TLS ends at the load balancer)"
            ));
        }
        if !scheme.eq_ignore_ascii_case("http") {
            return Err(format!(
                "{text:?}: only http:// URLs, not {scheme}://: {SHAPE}"
            ));
        }
        // `url` reads `http:///x` as the host `x`: refuse it first.
        if rest.is_empty() || rest.starts_with(['/', '?', '#']) {
            return Err(format!("{text:?} names no host: {SHAPE}"));
        }
        let url = Url::parse(&format!("http://{rest}")).map_err(|e| match e {
            url::ParseError::InvalidPort => {
                format!("{text:?}: the port is not a number from 0 to 65535")
            }
            url::ParseError::EmptyHost => format!("{text:?} names no host: {SHAPE}"),
            e => format!("{text:?} is not a URL ({e}): {SHAPE}"),
        })?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!(
                "{text:?}: user names and passwords are not supported"
            ));
        }
        Ok(HttpUrl {
            text: text.to_owned(),
            url,
        })
    }
}

impl std::fmt::Display for HttpUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl HttpUrl {
    /// The URL of `relative` from this one (`Url::join`): `snapshots` from
    /// `http://h:9090` is `http://h:9090/snapshots`. Shown as `self`.
    pub fn join(&self, relative: &str) -> Result<HttpUrl, String> {
        let url = self
            .url
            .join(relative)
            .map_err(|e| format!("{self}: cannot add {relative:?} to it: {e}"))?;
        Ok(HttpUrl {
            text: self.text.clone(),
            url,
        })
    }

    /// The host to resolve: a name, or an address without IPv6 brackets.
    fn host(&self) -> String {
        match self.url.host() {
            Some(Host::Ipv6(address)) => address.to_string(),
            Some(host) => host.to_string(),
            None => String::new(),
        }
    }

    fn port(&self) -> u16 {
        self.url.port_or_known_default().unwrap_or(80)
    }

    /// What the `Host` header carries: the host, and the port if one was given.
    fn authority(&self) -> String {
        let host = self.url.host_str().unwrap_or_default();
        match self.url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        }
    }

    /// The request target: path and query, never the fragment.
    fn target(&self) -> String {
        match self.url.query() {
            Some(query) => format!("{}?{query}", self.url.path()),
            None => self.url.path().to_owned(),
        }
    }
}

/// What a server answered.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    /// The status line after the version: `200 OK`, with the server's own
    /// reason phrase when it sent another than the standard one.
    pub status_line: String,
    /// Empty unless asked for.
    pub body: Bytes,
}

/// Why there was no answer, in a few words (without the URL).
#[derive(Debug)]
pub struct Unreachable(pub String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether to read the body of the answer, or only its head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    Head,
    Body,
}

/// `GET url` and its answer (the body too if `read` says so), within
/// `timeout` from connecting to the last byte read. Resolving the host is
/// left to the system and not bounded by `timeout`. Blocks: call it from
/// the command line, not from async code.
pub fn get(url: &HttpUrl, timeout: Duration, read: Read) -> Result<Answer, Unreachable> {
    let addresses: Vec<SocketAddr> =
        std::net::ToSocketAddrs::to_socket_addrs(&(url.host().as_str(), url.port()))
            .map_err(|e| Unreachable(format!("cannot resolve {}: {e}", url.host())))?
            .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Unreachable(format!("cannot start a runtime: {e}")))?;
    let exchange = exchange(url, &addresses, read);
    runtime
        .block_on(async { tokio::time::timeout(timeout, exchange).await })
        .unwrap_or_else(|_| Err(Unreachable(format!("no answer within {timeout:?}"))))
}

/// Connects to the first of `addresses` that accepts, sends the request and
/// reads the answer. The caller bounds it in time: an address that does not
/// answer takes all of it, as with the system's `connect`.
async fn exchange(
    url: &HttpUrl,
    addresses: &[SocketAddr],
    read: Read,
) -> Result<Answer, Unreachable> {
    let fail = |doing: &str, e: &dyn std::fmt::Display| Unreachable(format!("{doing}: {e}"));
    let mut failure = Unreachable(format!("{} resolves to no address", url.host()));
    let mut stream = None;
    for address in addresses {
        match tokio::net::TcpStream::connect(address).await {
            Ok(connected) => {
                stream = Some(connected);
                break;
            }
            Err(e) => failure = fail(&format!("cannot connect to {address}"), &e),
        }
    }
    let stream = stream.ok_or(failure)?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| fail("cannot start HTTP", &e))?;
    // The connection is driven by its own task while this one waits for
    // the answer; it ends when the answer has been read (Connection: close).
    tokio::spawn(connection);
    let mut request = Request::get(url.target())
        .body(Empty::<Bytes>::new())
        .map_err(|e| fail("cannot write the request", &e))?;
    let headers = request.headers_mut();
    let host = HeaderValue::from_str(&url.authority()).map_err(|e| fail("bad host", &e))?;
    headers.insert(HOST, host);
    headers.insert(
        USER_AGENT,
        HeaderValue::from_static(concat!("portfolio-replica/", env!("CARGO_PKG_VERSION"))),
    );
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    let response = sender.send_request(request).await.map_err(|e| {
        if e.is_incomplete_message() {
            Unreachable("the connection closed before a status line".to_owned())
        } else if e.is_parse() {
            fail("the answer is not HTTP", &e)
        } else {
            fail("cannot read the answer", &e)
        }
    })?;
    let status = response.status();
    let reason = response
        .extensions()
        .get::<hyper::ext::ReasonPhrase>()
        .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
        .or_else(|| status.canonical_reason().map(str::to_owned));
    let status_line = match reason {
        Some(reason) => format!("{} {reason}", status.as_str()),
        None => status.as_str().to_owned(),
    };
    let body = match read {
        Read::Head => Bytes::new(),
        Read::Body => Limited::new(response.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| fail("cannot read the body", &e))?
            .to_bytes(),
    };
    Ok(Answer {
        status,
        status_line,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_plain_http_with_or_without_the_scheme() {
        for (text, authority, host, port, target) in [
            (
                "http://127.0.0.1:8080/readyz",
                "127.0.0.1:8080",
                "127.0.0.1",
                8080,
                "/readyz",
            ),
            (
                "HTTP://localhost/healthz?x=1#top",
                "localhost",
                "localhost",
                80,
                "/healthz?x=1",
            ),
            ("http://[::1]:9090", "[::1]:9090", "::1", 9090, "/"),
            ("http://h:1?q", "h:1", "h", 1, "/?q"),
            ("127.0.0.1:9090", "127.0.0.1:9090", "127.0.0.1", 9090, "/"),
            (
                "localhost:8080/readyz",
                "localhost:8080",
                "localhost",
                8080,
                "/readyz",
            ),
            ("http://h/a b", "h", "h", 80, "/a%20b"),
        ] {
            let url: HttpUrl = text.parse().unwrap();
            assert_eq!(
                (url.authority(), url.host(), url.port(), url.target()),
                (
                    authority.to_owned(),
                    host.to_owned(),
                    port,
                    target.to_owned()
                ),
                "{text}"
            );
            assert_eq!(url.to_string(), text, "shown as given");
        }
        for (text, says) in [
            (
                "https://127.0.0.1/readyz",
                "only http:// URLs, not https://: the server speaks plain HTTP",
            ),
            ("ftp://127.0.0.1:9090", "only http:// URLs, not ftp://"),
            ("http:///readyz", "names no host"),
            ("http://", "names no host"),
            (":9090", "names no host"),
            ("http://h:99999/", "the port is not a number"),
            ("h:port", "the port is not a number"),
            ("http://u:p@h/", "user names and passwords"),
            ("http://[::1/", "is not a URL"),
        ] {
            let err = text.parse::<HttpUrl>().unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn join_adds_a_path_to_an_address() {
        for (base, joined) in [
            ("127.0.0.1:9090", "/snapshots"),
            ("http://h:9090/", "/snapshots"),
            ("http://h:9090/snapshots", "/snapshots"),
            ("http://h/replica-a/", "/replica-a/snapshots"),
        ] {
            let url: HttpUrl = base.parse().unwrap();
            let url = url.join("snapshots").unwrap();
            assert_eq!(url.target(), joined, "{base}");
            assert_eq!(url.to_string(), base);
        }
    }
}

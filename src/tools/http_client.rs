//! The crate's one HTTP client, for the command line: `probe` asks a
//! listener for a health endpoint and `versions --replica` asks replicas'
//! admin listeners for `/snapshots`. One blocking `GET` over HTTP/1.1 with
//! `ureq`, within one deadline: these are one-shot commands, so there is no
//! runtime, no connection pool, no proxy and no redirect to follow.
//!
//! Addresses are `http://HOST[:PORT][/PATH]` or the same without the scheme
//! (`HOST:PORT`), parsed once with the `url` crate into an [`HttpUrl`]. The
//! listeners speak plain HTTP (TLS ends at the load balancer), so any other
//! scheme is refused with a message saying so (and `ureq` is built without
//! TLS).
//!
//! It imports nothing of the crate: commands and `publish` sit on it.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ureq::http::StatusCode;
use url::{Host, Url};

/// What `--url` and `--replica` take, said in messages about them.
const SHAPE: &str = "give http://HOST[:PORT][/PATH] or HOST:PORT[/PATH]";

/// An `http://` URL with a host, as the user wrote it (for messages) and as
/// parsed.
#[derive(Clone, Debug)]
pub struct HttpUrl {
    text: String,
    url: Url,
}

/// Why a text is not an [`HttpUrl`], or a path cannot be added to one; the
/// message names the text and what to give instead.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    #[error(
        "only http:// URLs, not {scheme}://: the server speaks plain HTTP \
         (TLS ends at the load balancer)"
    )]
    Tls { scheme: String },
    #[error("{text:?}: only http:// URLs, not {scheme}://: {SHAPE}")]
    Scheme { text: String, scheme: String },
    #[error("{text:?} names no host: {SHAPE}")]
    NoHost { text: String },
    #[error("{text:?}: the port is not a number from 0 to 65535")]
    Port { text: String },
    #[error("{text:?} is not a URL ({why}): {SHAPE}")]
    NotUrl { text: String, why: url::ParseError },
    #[error("{text:?}: user names and passwords are not supported")]
    Credentials { text: String },
    #[error("{url}: cannot add {relative:?} to it: {why}")]
    Join {
        url: String,
        relative: String,
        why: url::ParseError,
    },
}

impl std::str::FromStr for HttpUrl {
    type Err = UrlError;

    fn from_str(text: &str) -> Result<HttpUrl, UrlError> {
        // Without a scheme, `url` would read `localhost:9090` as the scheme
        // `localhost`: an address without `://` is taken as http.
        let (scheme, rest) = match text.split_once("://") {
            Some((scheme, rest)) => (scheme, rest),
            None => ("http", text),
        };
        if scheme.eq_ignore_ascii_case("https") {
            return Err(UrlError::Tls {
                scheme: scheme.to_owned(),
            });
        }
        if !scheme.eq_ignore_ascii_case("http") {
            return Err(UrlError::Scheme {
                text: text.to_owned(),
                scheme: scheme.to_owned(),
            });
        }
        let no_host = || UrlError::NoHost {
            text: text.to_owned(),
        };
        // `url` reads `http:///x` as the host `x`: refuse it first.
        if rest.is_empty() || rest.starts_with(['/', '?', '#']) {
            return Err(no_host());
        }
        let url = Url::parse(&format!("http://{rest}")).map_err(|why| match why {
            url::ParseError::InvalidPort => UrlError::Port {
                text: text.to_owned(),
            },
            url::ParseError::EmptyHost => no_host(),
            why => UrlError::NotUrl {
                text: text.to_owned(),
                why,
            },
        })?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(UrlError::Credentials {
                text: text.to_owned(),
            });
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
    pub fn join(&self, relative: &str) -> Result<HttpUrl, UrlError> {
        let url = self.url.join(relative).map_err(|why| UrlError::Join {
            url: self.text.clone(),
            relative: relative.to_owned(),
            why,
        })?;
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
    /// The status line after the version, with the standard reason phrase:
    /// `200 OK` (`ureq` does not keep the one the server sent).
    pub status_line: String,
    /// Empty unless asked for.
    pub body: Vec<u8>,
}

/// Why there was no answer, in a few words (without the URL).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unreachable(pub String);

/// Whether to read the body of the answer, or only its head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadMode {
    Head,
    Body,
}

/// `GET url` and its answer (the body too if `read` says so), within
/// `timeout` from connecting to the last byte read. Resolving the host is
/// left to the system and not bounded by `timeout`. Blocks: call it from
/// the command line, not from async code.
pub fn get(url: &HttpUrl, timeout: Duration, read: ReadMode) -> Result<Answer, Unreachable> {
    // Resolved here rather than by `ureq`, whose errors say neither that
    // the name did not resolve nor which address refused.
    let addresses: Vec<SocketAddr> =
        std::net::ToSocketAddrs::to_socket_addrs(&(url.host().as_str(), url.port()))
            .map_err(|e| Unreachable(format!("cannot resolve {}: {e}", url.host())))?
            .collect();
    let deadline = Instant::now() + timeout;
    let late = || Unreachable(format!("no answer within {timeout:?}"));
    let mut failure = Unreachable(format!("{} resolves to no address", url.host()));
    // The first address that accepts answers; one that does not answer
    // takes all the time left, as with the system's `connect`.
    for address in addresses {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(late());
        }
        match exchange(url, address, left, read) {
            Ok(answer) => return Ok(answer),
            Err(ureq::Error::Io(e)) if is_connect(&e) => {
                failure = Unreachable(format!("cannot connect to {address}: {e}"));
            }
            Err(ureq::Error::Timeout(_)) => return Err(late()),
            Err(e) => return Err(Unreachable(why(e))),
        }
    }
    Err(failure)
}

/// What went wrong after connecting, in a few words (without `ureq`'s own
/// prefixes, such as `io: `).
fn why(e: ureq::Error) -> String {
    match e {
        ureq::Error::Io(e) if e.kind() == ErrorKind::UnexpectedEof => {
            "the connection closed before the whole answer".to_owned()
        }
        ureq::Error::Io(e) => format!("cannot read the answer: {e}"),
        ureq::Error::Protocol(e) => format!("the answer is not HTTP: {e}"),
        ureq::Error::BodyExceedsLimit(_) => {
            format!("the answer is more than {} MiB", MAX_BODY >> 20)
        }
        e => format!("cannot read the answer: {e}"),
    }
}

/// The most of a body read; a `/snapshots` of ten thousand files is a few
/// megabytes.
const MAX_BODY: u64 = 64 << 20;

/// `GET url` from `address`, all of it within `timeout`.
fn exchange(
    url: &HttpUrl,
    address: SocketAddr,
    timeout: Duration,
    read: ReadMode,
) -> Result<Answer, ureq::Error> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        // A 401 or a 503 is an answer for the caller to judge; so is a
        // redirect. None of the `*_PROXY` variables is for these addresses
        // (loopback or a private network).
        .http_status_as_error(false)
        .max_redirects(0)
        .proxy(None)
        .user_agent(concat!("portfolio-replica/", env!("CARGO_PKG_VERSION")))
        .accept("")
        .build()
        .into();
    // The address resolved above, and the host as the user wrote it.
    let response = agent
        .get(format!("http://{address}{}", url.target()))
        .header("host", url.authority())
        .header("connection", "close")
        .call()?;
    let status = response.status();
    let body = match read {
        ReadMode::Head => Vec::new(),
        ReadMode::Body => response
            .into_body()
            .with_config()
            .limit(MAX_BODY)
            .read_to_vec()?,
    };
    Ok(Answer {
        status,
        status_line: match status.canonical_reason() {
            Some(reason) => format!("{} {reason}", status.as_str()),
            None => status.as_str().to_owned(),
        },
        body,
    })
}

/// Whether a request failed for want of a connection: the errors of
/// `connect`, after which the next address is tried.
fn is_connect(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::ConnectionRefused
            | ErrorKind::HostUnreachable
            | ErrorKind::NetworkUnreachable
            | ErrorKind::NetworkDown
            | ErrorKind::AddrNotAvailable
            | ErrorKind::PermissionDenied
    )
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
            let err = text.parse::<HttpUrl>().unwrap_err().to_string();
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

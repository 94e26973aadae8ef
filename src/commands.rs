//! The one-shot subcommands `hash-key` and `probe` (`check` is
//! `crate::check`).

use std::io::{BufRead, Read, Write};

use crate::store::key;

/// The longest key `hash-key` reads from stdin: far more than any key, and
/// a bound when stdin is something else by mistake.
const MAX_KEY_BYTES: u64 = 64 * 1024;

/// Reads a key from `input`: one line when `one_line` (a terminal), else the
/// whole input. One trailing newline (`\n` or `\r\n`) is not part of it.
pub fn read_key(mut input: impl BufRead, one_line: bool) -> std::io::Result<String> {
    let mut key = String::new();
    let mut limited = (&mut input).take(MAX_KEY_BYTES + 1);
    if one_line {
        limited.read_line(&mut key)?;
    } else {
        limited.read_to_string(&mut key)?;
    }
    if key.len() as u64 > MAX_KEY_BYTES {
        return Err(std::io::Error::other(format!(
            "more than {MAX_KEY_BYTES} bytes; a key is one line"
        )));
    }
    if key.ends_with('\n') {
        key.pop();
        if key.ends_with('\r') {
            key.pop();
        }
    }
    Ok(key)
}

/// The hex SHA-256 of `key` for `api_keys[].sha256`, or why no request
/// could ever authenticate with it under `prefix`. The reason never quotes
/// the key.
pub fn hash_key(key: &str, prefix: &str) -> Result<String, String> {
    if key.is_empty() {
        return Err("no key given: pass it as the argument, or on stdin \
                    (no argument, or `-`) to keep it out of shell history"
            .to_owned());
    }
    if !key.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b)) {
        return Err(
            "the key holds characters other than printable ASCII (a line break, \
                    a control character or non-ASCII text); an Authorization header \
                    cannot carry them, so no request could present this key"
                .to_owned(),
        );
    }
    if key.trim() != key {
        return Err(
            "the key starts or ends with a space or tab; the server trims those \
                    from the Authorization header, so no request could present this key"
                .to_owned(),
        );
    }
    if key::secret(key, prefix).is_none() {
        let with_underscore = format!("{prefix}_");
        return Err(if key == with_underscore {
            format!(
                "the key has nothing after \"{with_underscore}\": a key is \
                 {prefix}_<secret> with a non-empty secret"
            )
        } else {
            format!(
                "the key does not start with \"{with_underscore}\": keys are \
                 <prefix>_<secret> and the prefix is \"{prefix}\" \
                 (--key-prefix or PORTFOLIO_KEY_PREFIX, as given to the server)"
            )
        });
    }
    Ok(key::to_hex(&key::hash_key(key)))
}

/// An `http://` URL, as `probe` takes it.
#[derive(Clone, Debug)]
pub struct HttpUrl {
    /// As given, for messages.
    text: String,
    /// Host as written in the URL (brackets kept for IPv6), for `Host:`.
    authority: String,
    /// Host to connect to (no brackets).
    host: String,
    port: u16,
    /// Path and query, at least `/`.
    target: String,
}

impl std::str::FromStr for HttpUrl {
    type Err = String;

    fn from_str(text: &str) -> Result<HttpUrl, String> {
        const SHAPE: &str = "expected a URL such as http://127.0.0.1:8080/readyz";
        let scheme_end = text
            .find("://")
            .ok_or_else(|| format!("{text:?} is not a URL: {SHAPE}"))?;
        let scheme = &text[..scheme_end];
        if !scheme.eq_ignore_ascii_case("http") {
            return Err(format!(
                "only http:// URLs, not {scheme}://: the server speaks plain HTTP \
                 (TLS ends at the load balancer)"
            ));
        }
        let rest = &text[scheme_end + 3..];
        let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
        let (authority, target) = match rest.find(['/', '?']) {
            Some(at) if rest[at..].starts_with('?') => (&rest[..at], format!("/{}", &rest[at..])),
            Some(at) => (&rest[..at], rest[at..].to_owned()),
            None => (rest, "/".to_owned()),
        };
        if authority.contains('@') {
            return Err(format!(
                "{text:?}: user names and passwords are not supported"
            ));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{text:?}: an IPv6 host needs its closing ]: {SHAPE}"))?;
            (host, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(format!("{text:?} names no host: {SHAPE}"));
        }
        let port = match port {
            None => 80,
            Some(port) => port
                .parse::<u16>()
                .map_err(|_| format!("{text:?}: {port:?} is not a port (0 to 65535)"))?,
        };
        if target
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(format!(
                "{text:?}: the path must not contain spaces or control characters"
            ));
        }
        Ok(HttpUrl {
            text: text.to_owned(),
            authority: authority.to_owned(),
            host: host.to_owned(),
            port,
            target,
        })
    }
}

impl std::fmt::Display for HttpUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// GETs `url` and returns its status line if it is 200, within `timeout`
/// from start to status line; otherwise why not, in one line. Name
/// resolution is left to the system (it is not bounded by `timeout`).
pub fn probe(url: &HttpUrl, timeout: std::time::Duration) -> Result<String, String> {
    use std::net::{TcpStream, ToSocketAddrs};
    use std::time::Instant;

    let deadline = Instant::now() + timeout;
    let late = || format!("{url}: no answer within {timeout:?}");
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(late)
    };
    let timed_out = |e: &std::io::Error| {
        matches!(
            e.kind(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
        )
    };
    let addrs: Vec<_> = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| format!("{url}: cannot resolve {}: {e}", url.host))?
        .collect();
    let mut failure = format!("{url}: {} resolves to no address", url.host);
    let mut stream = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, left()?) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) if timed_out(&e) => return Err(late()),
            Err(e) => failure = format!("{url}: cannot connect to {addr}: {e}"),
        }
    }
    let mut stream = stream.ok_or(failure)?;
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: portfolio-replica-probe\r\nConnection: close\r\n\r\n",
        url.target, url.authority
    );
    let io = |e: std::io::Error, doing: &str| {
        if timed_out(&e) {
            late()
        } else {
            format!("{url}: {doing}: {e}")
        }
    };
    stream
        .set_write_timeout(Some(left()?))
        .and_then(|()| stream.write_all(request.as_bytes()))
        .map_err(|e| io(e, "cannot send the request"))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    let line_end = loop {
        if let Some(at) = head.windows(2).position(|w| w == b"\r\n") {
            break at;
        }
        if head.len() > 8192 {
            return Err(format!("{url}: the answer is not HTTP (no status line)"));
        }
        stream
            .set_read_timeout(Some(left()?))
            .map_err(|e| io(e, "cannot read the answer"))?;
        match stream.read(&mut buf) {
            Ok(0) => {
                return Err(format!("{url}: the connection closed before a status line"));
            }
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e, "cannot read the answer")),
        }
    };
    let line = String::from_utf8_lossy(&head[..line_end]).into_owned();
    let mut parts = line.splitn(3, ' ');
    let (version, code) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if !version.starts_with("HTTP/") || code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(format!(
            "{url}: the answer is not HTTP: {:?}",
            crate::snapshot::error::shorten(&line, 64)
        ));
    }
    let status = line[version.len()..].trim().to_owned();
    if code == "200" {
        Ok(status)
    } else {
        Err(format!("{url} answered {status}, not 200"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_urls_are_plain_http() {
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
        ] {
            let url: HttpUrl = text.parse().unwrap();
            assert_eq!(
                (
                    url.authority.as_str(),
                    url.host.as_str(),
                    url.port,
                    url.target.as_str()
                ),
                (authority, host, port, target),
                "{text}"
            );
        }
        for (text, says) in [
            (
                "https://127.0.0.1/readyz",
                "only http:// URLs, not https://",
            ),
            ("127.0.0.1:8080/readyz", "is not a URL"),
            ("http:///readyz", "names no host"),
            ("http://h:99999/", "is not a port"),
            ("http://u:p@h/", "user names and passwords"),
            ("http://[::1/", "closing ]"),
            ("http://h/a b", "spaces"),
        ] {
            let err = text.parse::<HttpUrl>().unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn read_key_drops_one_trailing_newline() {
        for (input, one_line, want) in [
            ("cura_a\n", false, "cura_a"),
            ("cura_a\r\n", false, "cura_a"),
            ("cura_a", false, "cura_a"),
            ("cura_a\n\n", false, "cura_a\n"),
            ("cura_a\nrest", true, "cura_a"),
            ("", false, ""),
        ] {
            assert_eq!(
                read_key(input.as_bytes(), one_line).unwrap(),
                want,
                "{input:?}"
            );
        }
        let long = "x".repeat(MAX_KEY_BYTES as usize + 1);
        assert!(read_key(long.as_bytes(), false).is_err());
    }

    #[test]
    fn hash_key_refuses_keys_that_cannot_authenticate() {
        assert_eq!(
            hash_key("cura_abc", "cura").unwrap(),
            key::to_hex(&key::hash_key("cura_abc"))
        );
        assert!(hash_key("other_abc", "other").is_ok());
        for (bad, says) in [
            ("", "no key given"),
            ("cura_", "nothing after \"cura_\""),
            ("cura", "does not start with \"cura_\""),
            ("abc", "does not start with \"cura_\""),
            ("Cura_abc", "does not start with"),
            ("cura_abc\n", "printable ASCII"),
            ("cura_ünï", "printable ASCII"),
            (" cura_abc", "space or tab"),
            ("cura_abc ", "space or tab"),
        ] {
            let err = hash_key(bad, "cura").unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
            assert!(!err.contains("abc"), "{bad:?} quoted: {err}");
        }
    }
}

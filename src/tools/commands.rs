//! The one-shot subcommands `hash-key` and `probe` (`check` is
//! `crate::tools::check`).

use std::io::{BufRead, Read};

use crate::tools::http_client::{self, HttpUrl};
use portfolio_domain::store::key;

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

/// Why no request could ever authenticate with a key; the message never
/// quotes the key.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyRefused {
    #[error(
        "no key given: pass it as the argument, or on stdin \
         (no argument, or `-`) to keep it out of shell history"
    )]
    Empty,
    #[error(
        "the key holds characters other than printable ASCII (a line break, \
         a control character or non-ASCII text); an Authorization header \
         cannot carry them, so no request could present this key"
    )]
    NotPrintable,
    #[error(
        "the key starts or ends with a space or tab; the server trims those \
         from the Authorization header, so no request could present this key"
    )]
    Padded,
    #[error(
        "the key has nothing after \"{prefix}_\": a key is \
         {prefix}_<secret> with a non-empty secret"
    )]
    NoSecret { prefix: String },
    #[error(
        "the key does not start with \"{prefix}_\": keys are \
         <prefix>_<secret> and the prefix is \"{prefix}\" \
         (--key-prefix or PORTFOLIO_KEY_PREFIX, as given to the server)"
    )]
    WrongPrefix { prefix: String },
}

/// The hex SHA-256 of `key` for `api_keys[].sha256`, or why no request
/// could ever authenticate with it under `prefix`.
pub fn hash_key(key: &str, prefix: &str) -> Result<String, KeyRefused> {
    if key.is_empty() {
        return Err(KeyRefused::Empty);
    }
    if !key.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b)) {
        return Err(KeyRefused::NotPrintable);
    }
    if key.trim() != key {
        return Err(KeyRefused::Padded);
    }
    if key::secret(key, prefix).is_none() {
        let prefix = prefix.to_owned();
        return Err(if key == format!("{prefix}_") {
            KeyRefused::NoSecret { prefix }
        } else {
            KeyRefused::WrongPrefix { prefix }
        });
    }
    Ok(key::to_hex(&key::hash_key(key)))
}

/// Why `probe` found no healthy listener.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{url}: {why}")]
    Unreachable {
        url: String,
        why: http_client::Unreachable,
    },
    #[error("{url} answered {status_line}, not 200")]
    NotOk { url: String, status_line: String },
}

/// GETs `url` and returns its status line if it is 200, within `timeout`
/// from start to status line; otherwise why not, in one line. Name
/// resolution is left to the system (it is not bounded by `timeout`).
pub fn probe(url: &HttpUrl, timeout: std::time::Duration) -> Result<String, ProbeError> {
    let answer = http_client::get(url, timeout, http_client::ReadMode::Head).map_err(|why| {
        ProbeError::Unreachable {
            url: url.to_string(),
            why,
        }
    })?;
    if answer.status.as_u16() == 200 {
        Ok(answer.status_line)
    } else {
        Err(ProbeError::NotOk {
            url: url.to_string(),
            status_line: answer.status_line,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let err = hash_key(bad, "cura").unwrap_err().to_string();
            assert!(err.contains(says), "{bad:?}: {err}");
            assert!(!err.contains("abc"), "{bad:?} quoted: {err}");
        }
    }
}

//! The checks of a snapshot's top level: format version, workspace,
//! version text and API key hashes (docs/snapshot-format.md#validation).

use super::error::{Place, SnapshotError, quote, shorten};
use crate::store::key::{KeyHash, from_hex};

/// The only `format_version` this build reads.
pub const FORMAT_VERSION: u64 = 1;

fn top_error(
    file: &str,
    collection: &str,
    field: Option<&str>,
    message: impl Into<String>,
) -> SnapshotError {
    SnapshotError::at(
        file,
        Place {
            collection: collection.to_owned(),
            field: field.map(str::to_owned),
            ..Place::default()
        },
        message,
    )
}

pub fn check_format_version(file: &str, raw: Option<&str>) -> Result<(), SnapshotError> {
    let problem = |message: String| Err(top_error(file, "format_version", None, message));
    let Some(raw) = raw else {
        return problem("is missing (this server reads format_version 1)".to_owned());
    };
    if raw == FORMAT_VERSION.to_string() {
        return Ok(());
    }
    let not = |what: &str| problem(format!("must be the number {FORMAT_VERSION}, not {what}"));
    match raw.as_bytes().first() {
        Some(b'"') => {
            let text = serde_json::from_str::<String>(raw).unwrap_or_else(|_| raw.to_owned());
            not(&format!("the string {}", quote(&text)))
        }
        Some(b'{') => not("an object"),
        Some(b'[') => not("an array"),
        Some(b'n') => not("null"),
        Some(b't') => not("true"),
        Some(b'f') => not("false"),
        _ if raw.parse::<f64>() == Ok(FORMAT_VERSION as f64) => problem(format!(
            "must be written {FORMAT_VERSION}, not {}",
            shorten(raw, 64)
        )),
        _ => problem(format!(
            "{} is not a known format version (this server reads {FORMAT_VERSION})",
            shorten(raw, 64)
        )),
    }
}

pub fn check_workspace(
    file: &str,
    workspace: Option<&(Option<String>, Option<String>)>,
) -> Result<(String, Option<String>), SnapshotError> {
    let Some((id, name)) = workspace else {
        return Err(top_error(
            file,
            "workspace",
            None,
            "is missing (it must name the workspace: {\"id\": ...})",
        ));
    };
    let Some(id) = id else {
        return Err(top_error(
            file,
            "workspace",
            Some("id"),
            "is missing or null",
        ));
    };
    if id.trim().is_empty() || id.len() > 200 {
        return Err(top_error(
            file,
            "workspace",
            Some("id"),
            "must be 1 to 200 characters, not blank",
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(top_error(
            file,
            "workspace",
            Some("id"),
            "must not contain control characters",
        ));
    }
    Ok((id.clone(), name.clone()))
}

pub fn check_version(file: &str, version: Option<&str>) -> Result<Option<String>, SnapshotError> {
    let Some(text) = version else {
        return Ok(None);
    };
    let printable = text.bytes().all(|b| (0x20..0x7f).contains(&b));
    if text.is_empty() || text.len() > 256 || !printable || text.trim() != text {
        return Err(top_error(
            file,
            "version",
            None,
            "must be 1 to 256 printable ASCII characters without surrounding spaces \
             (it is sent in the X-Snapshot-Version header); omit it to have one derived from the content",
        ));
    }
    Ok(Some(text.to_owned()))
}

/// The key hashes of `api_keys`, each once, and a warning when an entry
/// repeats a hash listed before it (it counts once: often a second key was
/// meant and the first pasted twice).
pub fn check_api_keys(
    file: &str,
    keys: &[Option<String>],
) -> Result<(Vec<KeyHash>, Option<String>), SnapshotError> {
    let mut hashes: Vec<KeyHash> = Vec::new();
    // (index of the first repeat, index of the entry it repeats), repeats
    let mut first_repeat: Option<(usize, usize)> = None;
    let mut repeats = 0;
    for (i, key) in keys.iter().enumerate() {
        let fail = |message: &str| {
            SnapshotError::at(
                file,
                Place {
                    collection: "api_keys".into(),
                    index: Some(i),
                    id: None,
                    field: Some("sha256".into()),
                },
                message,
            )
        };
        let Some(text) = key else {
            return Err(fail("is missing or null"));
        };
        let hash = from_hex(text).ok_or_else(|| {
            fail("must be 64 hex digits: the SHA-256 of the whole key (see `portfolio-replica hash-key`)")
        })?;
        match hashes.iter().position(|h| *h == hash) {
            Some(earlier) => {
                repeats += 1;
                first_repeat.get_or_insert((i, earlier));
            }
            None => hashes.push(hash),
        }
    }
    let warning = first_repeat.map(|(at, earlier)| {
        let entries = if repeats == 1 {
            "1 entry repeats a hash listed before it".to_owned()
        } else {
            format!("{repeats} entries repeat a hash listed before them")
        };
        format!(
            "api_keys: {entries} (first: api_keys[{at}], the same as api_keys[{earlier}]); \
             a hash counts once: was another key meant?"
        )
    });
    Ok((hashes, warning))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::key::{hash_key, to_hex};

    #[test]
    fn format_version_problems_say_what_was_found() {
        assert_eq!(check_format_version("f", Some("1")), Ok(()));
        for (raw, message) in [
            (None, "is missing (this server reads format_version 1)"),
            (Some("\"1\""), "must be the number 1, not the string \"1\""),
            (
                Some("\"one\""),
                "must be the number 1, not the string \"one\"",
            ),
            (Some("1.0"), "must be written 1, not 1.0"),
            (Some("1e0"), "must be written 1, not 1e0"),
            (
                Some("2"),
                "2 is not a known format version (this server reads 1)",
            ),
            (
                Some("-1"),
                "-1 is not a known format version (this server reads 1)",
            ),
            (Some("null"), "must be the number 1, not null"),
            (Some("true"), "must be the number 1, not true"),
            (Some("[1]"), "must be the number 1, not an array"),
            (Some("{}"), "must be the number 1, not an object"),
        ] {
            let err = check_format_version("f.json", raw).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("f.json: format_version: {message}")
            );
        }
    }

    #[test]
    fn a_repeated_key_hash_counts_once_with_a_warning() {
        let a = Some(to_hex(&hash_key("cura_a")));
        let b = Some(to_hex(&hash_key("cura_b")));
        let upper_a = a.as_ref().map(|h| h.to_uppercase());
        let (hashes, warning) = check_api_keys("f", &[a.clone(), b.clone()]).unwrap();
        assert_eq!(hashes.len(), 2);
        assert_eq!(warning, None);
        let (hashes, warning) =
            check_api_keys("f", &[a.clone(), b.clone(), upper_a, b.clone()]).unwrap();
        assert_eq!(hashes, vec![hash_key("cura_a"), hash_key("cura_b")]);
        assert_eq!(
            warning.as_deref(),
            Some(
                "api_keys: 2 entries repeat a hash listed before them (first: api_keys[2], \
                 the same as api_keys[0]); a hash counts once: was another key meant?"
            )
        );
    }
}

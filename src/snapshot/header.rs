//! The checks of a snapshot's top level: format version, workspace,
//! version text and API key hashes (docs/snapshot-format.md#validation).

use super::error::{Location, SnapshotError, shorten};
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
        Location {
            collection: collection.to_owned(),
            field: field.map(str::to_owned),
            ..Location::default()
        },
        message,
    )
}

pub fn check_format_version(file: &str, raw: Option<&str>) -> Result<(), SnapshotError> {
    match raw {
        None => Err(top_error(
            file,
            "format_version",
            None,
            "is missing (this server reads format_version 1)",
        )),
        Some(raw) if raw == FORMAT_VERSION.to_string() => Ok(()),
        Some(raw) => Err(top_error(
            file,
            "format_version",
            None,
            format!(
                "{} is not a known format version (this server reads {FORMAT_VERSION})",
                shorten(raw, 64)
            ),
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

pub fn check_api_keys(file: &str, keys: &[Option<String>]) -> Result<Vec<KeyHash>, SnapshotError> {
    let mut hashes = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let fail = |message: &str| {
            SnapshotError::at(
                file,
                Location {
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
        if !hashes.contains(&hash) {
            hashes.push(hash);
        }
    }
    Ok(hashes)
}

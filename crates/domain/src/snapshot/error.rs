//! Why a snapshot file was rejected.
//!
//! Every rejection names the file and, when a record is at fault, the
//! collection, the record's position and id, and the field, so that an
//! operator can find the bad byte in a gigabyte export:
//! `acme.json: tasks[3] (id 6f1c…): attributes.created_at: required timestamp is missing`.

use std::fmt;

/// Where in a snapshot a problem was found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Place {
    /// Top-level key: `tasks`, `workspace`, `api_keys`, ...
    pub collection: String,
    /// Position of the record in its collection, when the problem is in a record.
    pub index: Option<usize>,
    /// The record's id as written, when it has one.
    pub id: Option<String>,
    /// Path of the field inside the record or object, e.g. `attributes.created_at`.
    pub field: Option<String>,
}

/// A snapshot that cannot be loaded, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct SnapshotError {
    /// The file's name (or path) as the operator knows it.
    pub file: String,
    /// Boxed: errors travel in `Result`s on the hot path, and stay small there.
    pub location: Option<Box<Place>>,
    /// What is wrong, as a sentence fragment.
    pub message: String,
}

impl SnapshotError {
    pub fn new(file: &str, message: impl Into<String>) -> SnapshotError {
        SnapshotError {
            file: file.to_owned(),
            location: None,
            message: message.into(),
        }
    }

    pub fn at(file: &str, location: Place, message: impl Into<String>) -> SnapshotError {
        SnapshotError {
            file: file.to_owned(),
            location: Some(Box::new(location)),
            message: message.into(),
        }
    }
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file)?;
        if let Some(loc) = &self.location {
            f.write_str(&loc.collection)?;
            if let Some(index) = loc.index {
                write!(f, "[{index}]")?;
            }
            if let Some(id) = &loc.id {
                write!(f, " (id {id})")?;
            }
            if let Some(field) = &loc.field {
                write!(f, ": {field}")?;
            }
            f.write_str(": ")?;
        }
        f.write_str(&self.message)
    }
}

/// A value quoted for an error message, cut to a readable length: messages
/// go to logs and `/snapshots`, and a snapshot's values can be megabytes.
pub fn quote(text: &str) -> String {
    format!("{:?}", shorten(text, 64))
}

/// `text` cut to about `max` bytes (on a character boundary), saying how
/// long it really was.
pub fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_file_collection_record_and_field() {
        let err = SnapshotError::at(
            "acme.json",
            Place {
                collection: "tasks".into(),
                index: Some(3),
                id: Some("6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f".into()),
                field: Some("attributes.created_at".into()),
            },
            "required timestamp is missing",
        );
        assert_eq!(
            err.to_string(),
            "acme.json: tasks[3] (id 6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f): attributes.created_at: required timestamp is missing"
        );
        assert_eq!(
            SnapshotError::new("a.json", "not gzip").to_string(),
            "a.json: not gzip"
        );
    }
}

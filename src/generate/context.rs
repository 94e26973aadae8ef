//! The state every collection writer shares: the random stream, the JSON
//! writer and a scratch buffer for text, with helpers for common fields.

use std::io::{self, Write};

use super::json::Json;
use super::rng::Rng;
use super::timestamp::Ts;

/// The state shared by all collection writers: randomness, output and a text scratch buffer.
pub(super) struct Ctx {
    pub(super) rng: Rng,
    pub(super) json: Json,
    pub(super) text: String,
}

impl Ctx {
    /// Creates a context around `rng`.
    pub(super) fn new(rng: Rng) -> Self {
        Self {
            rng,
            json: Json::new(),
            text: String::with_capacity(1 << 14),
        }
    }

    /// Writes `key` with a string value composed by `fill`.
    pub(super) fn text_field(&mut self, key: &str, fill: impl FnOnce(&mut Rng, &mut String)) {
        self.text.clear();
        fill(&mut self.rng, &mut self.text);
        self.json.key(key);
        self.json.string(&self.text);
    }

    /// Writes `key` with a string value.
    pub(super) fn str_field(&mut self, key: &str, value: &str) {
        self.json.key(key);
        self.json.string(value);
    }

    /// Writes `key` with a UUID value.
    pub(super) fn uuid_field(&mut self, key: &str, id: u128) {
        self.json.key(key);
        self.json.uuid(id);
    }

    /// Writes `key` with a timestamp value.
    pub(super) fn ts_field(&mut self, key: &str, ts: Ts) {
        self.json.key(key);
        self.json.timestamp(ts);
    }

    /// Opens the top-level array of a collection.
    pub(super) fn begin_collection(&mut self, name: &str) {
        self.json.key_line(name);
        self.json.begin_array();
    }

    /// Opens one `{ "id", "attributes": {` record.
    pub(super) fn begin_record(&mut self, id: u128) {
        self.json.begin_record();
        self.uuid_field("id", id);
        self.json.key("attributes");
        self.json.begin_object();
    }

    /// Closes a record opened with [`Ctx::begin_record`] and flushes when the buffer is full.
    pub(super) fn end_record<W: Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.json.end_object();
        self.json.end_object();
        self.json.flush_if_full(w)
    }
}

//! The state every collection writer shares: the random stream, the JSON
//! writer and a scratch buffer for text, with helpers for common fields.

use std::io::{self, Write};

use super::clock::Clock;
use super::escapes;
use super::json::Json;
use super::rng::Rng;
use super::timestamp::Ts;

/// The state shared by all collection writers: randomness, output and a text scratch buffer.
pub(super) struct WriterContext {
    pub(super) rng: Rng,
    pub(super) json: Json,
    pub(super) text: String,
    /// With `--text escapes`, the stream that picks the fragment appended
    /// to each free-text field: a stream of its own, so the rest of the
    /// data is what plain text gives.
    pub(super) escapes: Option<Rng>,
    /// The escaped fragments of the field being written.
    tail: String,
}

impl WriterContext {
    /// Creates a context around `rng`.
    pub(super) fn new(rng: Rng) -> Self {
        Self {
            rng,
            json: Json::new(),
            text: String::with_capacity(1 << 14),
            escapes: None,
            tail: String::new(),
        }
    }

    /// Writes `key` with a string value composed by `fill`, and with
    /// `--text escapes` a fragment of escapes after it.
    pub(super) fn text_field(&mut self, key: &str, fill: impl FnOnce(&mut Rng, &mut String)) {
        self.text.clear();
        fill(&mut self.rng, &mut self.text);
        self.json.key(key);
        match &mut self.escapes {
            None => self.json.string(&self.text),
            Some(rng) => {
                self.tail.clear();
                escapes::append(rng, &mut self.tail);
                self.json.string_with_escaped_tail(&self.text, &self.tail);
            }
        }
    }

    /// Writes `key` with a string value.
    pub(super) fn str_field(&mut self, key: &str, value: &str) {
        self.json.str_field(key, value);
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

    /// Writes the collection `name`, one record per stamp of `clock`, in
    /// order, and returns how many there are. `record(ctx, index, at)`
    /// writes record `index`, stamped `at`, from [`WriterContext::begin_record`] on;
    /// this closes each record, so none is left open or unflushed.
    pub(super) fn write_stamped<W: Write>(
        &mut self,
        name: &str,
        clock: &Clock,
        w: &mut W,
        mut record: impl FnMut(&mut WriterContext, usize, Ts),
    ) -> io::Result<u64> {
        self.begin_collection(name);
        for index in 0..clock.records() {
            let at = clock.stamp(&mut self.rng, index);
            record(self, index, at);
            self.end_record(w)?;
        }
        self.json.end_array();
        Ok(clock.records() as u64)
    }

    /// Opens one `{ "id", "attributes": {` record.
    pub(super) fn begin_record(&mut self, id: u128) {
        self.json.begin_record();
        self.uuid_field("id", id);
        self.json.key("attributes");
        self.json.begin_object();
    }

    /// Closes a record opened with [`WriterContext::begin_record`] and flushes when the buffer is full.
    pub(super) fn end_record<W: Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.json.end_object();
        self.json.end_object();
        self.json.flush_if_full(w)
    }
}

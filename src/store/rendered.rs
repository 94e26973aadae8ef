//! Records rendered to JSON once, at load, and laid out for cheap pages.

use std::io::Write;

use crate::snapshot::render::Render;
use bytes::Bytes;

/// The opening and closing of a `{"data": [...]}` list body.
const LIST_OPEN: &[u8] = b"{\"data\":[";
const LIST_CLOSE: &[u8] = b"]}";

/// Records of one kind, rendered as `{"id":...,"attributes":{...}}` and laid
/// out in list order as a complete list body: `{"data":[r0,r1,...]}`.
///
/// Any run of consecutive records is one slice of the buffer (a page of an
/// unfiltered list is one copy), and the whole buffer is the body of an
/// unpaginated list (`/roles` is served without copying at all).
pub struct Rendered {
    buf: Bytes,
    /// `ends[i]` is one past the last byte of record `i`; it starts right
    /// after the separator that follows record `i - 1`.
    ends: Vec<usize>,
}

impl Rendered {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    fn start(&self, i: usize) -> usize {
        if i == 0 {
            LIST_OPEN.len()
        } else {
            self.ends[i - 1] + 1
        }
    }

    /// The JSON of record `i`.
    pub fn record(&self, i: usize) -> &[u8] {
        &self.buf[self.start(i)..self.ends[i]]
    }

    /// Records `from..to`, comma-separated, as one slice (empty if `from == to`).
    pub fn run(&self, from: usize, to: usize) -> &[u8] {
        if from >= to {
            &[]
        } else {
            &self.buf[self.start(from)..self.ends[to - 1]]
        }
    }

    /// The whole list as a `{"data":[...]}` body, shared, not copied.
    pub fn list_body(&self) -> Bytes {
        self.buf.clone()
    }
}

/// Renders records one by one into a [`Rendered`].
pub struct Renderer {
    buf: Vec<u8>,
    ends: Vec<usize>,
}

impl Renderer {
    pub fn with_capacity(records: usize, bytes: usize) -> Renderer {
        let mut buf = Vec::with_capacity(bytes + LIST_OPEN.len() + LIST_CLOSE.len());
        buf.extend_from_slice(LIST_OPEN);
        Renderer {
            buf,
            ends: Vec::with_capacity(records),
        }
    }

    /// Appends `{"id":<id>,"attributes":<attributes>}`.
    pub fn push<I: Render + ?Sized, A: Render>(&mut self, id: &I, attributes: &A) {
        self.separate();
        self.buf.extend_from_slice(b"{\"id\":");
        id.render(&mut self.buf);
        self.buf.extend_from_slice(b",\"attributes\":");
        attributes.render(&mut self.buf);
        self.buf.push(b'}');
        self.ends.push(self.buf.len());
    }

    fn separate(&mut self) {
        if !self.ends.is_empty() {
            self.buf.push(b',');
        }
    }

    pub fn finish(mut self) -> Rendered {
        self.buf.extend_from_slice(LIST_CLOSE);
        self.buf.shrink_to_fit();
        self.ends.shrink_to_fit();
        Rendered {
            buf: Bytes::from(self.buf),
            ends: self.ends,
        }
    }
}

/// Writes an unsigned integer in decimal.
pub fn write_u64(buf: &mut Vec<u8>, n: u64) {
    let _ = write!(buf, "{n}");
}

//! Response buffers kept from one answer for the next, per thread.
//!
//! A plain page is copied into a buffer of its exact length; allocating
//! and freeing one per request (6 to 50 KB, past the allocator's small
//! bins) made glibc consolidate its free lists on every answer. A buffer
//! handed to hyper comes back here when hyper drops the body, and the
//! next page on that thread is written into it. gzip pages assembled from
//! precompressed records are written into the same buffers.

use std::cell::RefCell;

use bytes::Bytes;

/// Buffers kept per thread: enough for the answers a worker has in flight
/// at once (hyper drops a body once it is written, usually in the same poll).
const KEEP: usize = 16;

/// Larger buffers are not kept (a rare large page, `limit=100` of long
/// records): with [`KEEP`], at most 2 MiB per thread, about 4% of the
/// `medium` dataset's JSON (106 MB) for the two threads of a two-core
/// replica.
const KEEP_BYTES: usize = 128 << 10;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// `len` bytes written by `write` into a kept buffer (or a new one of
/// exactly `len`), as a `Bytes` that gives the buffer back when dropped.
pub fn filled(len: usize, write: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    let mut buf = spare();
    buf.reserve_exact(len);
    write(&mut buf);
    loan(buf)
}

/// What `write` writes into a kept buffer (it may replace the buffer with
/// another, and reserves what it needs), if it says it wrote; if not, the
/// buffer stays kept.
pub fn try_filled(write: impl FnOnce(&mut Vec<u8>) -> bool) -> Option<Bytes> {
    let mut buf = spare();
    if write(&mut buf) {
        Some(loan(buf))
    } else {
        give_back(buf);
        None
    }
}

/// A kept buffer, empty, or a new one.
fn spare() -> Vec<u8> {
    let mut buf = SPARE
        .try_with(|spare| spare.try_borrow_mut().ok()?.pop())
        .ok()
        .flatten()
        .unwrap_or_default();
    buf.clear();
    buf
}

/// `buf` as a body that gives it back when dropped, unless it is too large
/// to keep.
fn loan(buf: Vec<u8>) -> Bytes {
    if buf.capacity() > KEEP_BYTES {
        return Bytes::from(buf);
    }
    Bytes::from_owner(LoanedBuffer(buf))
}

/// Keeps `buf` for a later answer, if there is room.
fn give_back(buf: Vec<u8>) {
    // On a thread being torn down, or if the list is somehow in use, the
    // buffer is simply freed.
    let _ = SPARE.try_with(|spare| {
        if let Ok(mut spare) = spare.try_borrow_mut()
            && spare.len() < KEEP
            && buf.capacity() <= KEEP_BYTES
        {
            spare.push(buf);
        }
    });
}

/// A buffer on loan to a response body.
struct LoanedBuffer(Vec<u8>);

impl AsRef<[u8]> for LoanedBuffer {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for LoanedBuffer {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_comes_back_and_is_written_anew() {
        let first = filled(5, |out| out.extend_from_slice(b"hello"));
        assert_eq!(&first[..], b"hello");
        let ptr = first.as_ptr();
        drop(first);
        // The same buffer, cleared: nothing of the last answer shows.
        let second = filled(3, |out| out.extend_from_slice(b"abc"));
        assert_eq!(&second[..], b"abc");
        assert_eq!(second.as_ptr(), ptr);
        // Taken while the first is still out: another buffer.
        let third = filled(2, |out| out.extend_from_slice(b"xy"));
        assert_ne!(third.as_ptr(), second.as_ptr());
        assert_eq!((&second[..], &third[..]), (&b"abc"[..], &b"xy"[..]));
    }

    #[test]
    fn a_buffer_not_written_stays_kept() {
        let first = filled(4, |out| out.extend_from_slice(b"abcd"));
        let ptr = first.as_ptr();
        drop(first);
        assert!(
            try_filled(|out| {
                assert!(out.is_empty());
                false
            })
            .is_none()
        );
        // The same buffer again, and what replaces it in `write` is sent.
        let second = try_filled(|out| {
            assert_eq!(out.as_ptr(), ptr);
            *out = b"xyz".to_vec();
            true
        });
        assert_eq!(second.as_deref(), Some(&b"xyz"[..]));
    }

    #[test]
    fn large_buffers_are_not_kept() {
        let big = filled(KEEP_BYTES + 1, |out| out.resize(KEEP_BYTES + 1, b'x'));
        assert_eq!(big.len(), KEEP_BYTES + 1);
        drop(big);
        let spare = SPARE.with_borrow(|s| s.iter().all(|b| b.capacity() <= KEEP_BYTES));
        assert!(spare);
    }
}

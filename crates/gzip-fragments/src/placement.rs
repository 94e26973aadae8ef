//! [`Placement`]: where the caller wants a packing's large buffers in
//! memory. The codec makes the buffers and says when; what that means
//! (huge pages, say, or nothing) is the caller's business, so that the
//! codec makes no system call of its own.

/// Hints about the buffers [`Packed::build`](crate::Packed::build) makes:
/// the fragment streams and the tables beside them, hundreds of megabytes
/// for a large collection, read all over by every page. Only hints: the
/// fragments are the same whatever they do. `()` places nothing.
pub trait Placement: Sync {
    /// `buf` is empty and about to be filled up to its capacity: the time
    /// to ask for its memory to be backed in some way, before it is
    /// written.
    fn reserved<T>(&self, buf: &Vec<T>) {
        let _ = buf;
    }

    /// `data` is written in full and only read from now on (a stream that
    /// moved while it grew, say, may want its memory placed again).
    fn built<T>(&self, data: &[T]) {
        let _ = data;
    }
}

impl Placement for () {}

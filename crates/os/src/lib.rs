//! Everything the process asks of the operating system and the processor
//! beyond std: huge pages, prefetching, thread priority, handing freed
//! heap memory back. The `unsafe` system calls live here, each behind a
//! safe function; the other crates say what they want (this buffer on huge
//! pages, this thread behind requests) and not how. It depends on nothing
//! but libc and sits below every other crate, so that each may use it, the
//! domain included (ARCHITECTURE.md, "Crates"); the deflate codec
//! (`gzip_fragments`) gets it as a `Placement` from the server's warm-up
//! stage (`serve::loader::warm` in the binary).
//!
//! The processor's vector instructions for the snapshot scanner
//! ([`json_bytes`]) and the one-pass record load ([`string_bytes`]) are
//! here for the same reason: they need `unsafe`.
//!
//! All of it is hints. A page copies (or assembles) records from all over
//! gigabytes of memory: with 4 KB pages nearly every record costs a TLB
//! miss and a page walk before its cache misses even start; with 2 MB
//! pages the translations of the whole dataset fit the TLB. Where a hint
//! does not apply, nothing changes but speed.

mod bytes;

pub use bytes::{
    JsonBytes, StringBytes, json_bytes, json_bytes_plain, string_bytes, string_bytes_plain,
};

/// Cores the process may use, asked once: std reads the cgroup's quota
/// from several files on every call, and a scan of many small files asks
/// for every file.
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// A transparent huge page.
#[cfg(target_os = "linux")]
const HUGE: usize = 2 * 1024 * 1024;

/// Asks the kernel to back `v`'s allocation (its spare capacity too) with
/// transparent huge pages, where the system allows it on request (as its
/// `madvise` mode does). Call it before writing: pages faulted in after it
/// come as 2 MB pages, with nothing copied (collapsing written memory
/// costs seconds a gigabyte). A buffer that moves while it grows needs it
/// again; one that grows in place keeps it.
pub fn prefer_huge_pages<T>(v: &Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        let start = v.as_ptr() as usize;
        let end = start + v.capacity() * size_of::<T>();
        let aligned = start.next_multiple_of(HUGE);
        if end >= aligned + HUGE {
            let len = (end - aligned) / HUGE * HUGE;
            // SAFETY: the range lies inside the Vec's allocation, which
            // outlives the call; MADV_HUGEPAGE changes no contents.
            unsafe {
                libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// Moves what `data` holds onto transparent huge pages now
/// (`MADV_COLLAPSE`, Linux 6.1+): where pages could not be had as 2 MB
/// ones when they were first written (memory fragmented, or a buffer that
/// moved while it grew), this copies them into 2 MB pages. About 5 s per
/// gigabyte of one core; run it off the load, on memory already read by
/// requests if need be (the kernel handles that, as its own khugepaged
/// does). A no-op where it does not apply, or on a single core.
pub fn collapse_to_huge_pages<T>(data: &[T]) {
    collapse_to_huge_pages_while(data, &|| true);
}

/// [`collapse_to_huge_pages`] in steps of 32 MB, while `keep_going` says
/// so: whoever holds `data` only for this can let it go soon.
pub fn collapse_to_huge_pages_while<T>(data: &[T], keep_going: &dyn Fn() -> bool) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if collapse_is_worth_it() {
        const STEP: usize = 16 * HUGE;
        let start = data.as_ptr() as usize;
        let end = start + size_of_val(data);
        let mut at = start.next_multiple_of(HUGE);
        while at + HUGE <= end && keep_going() {
            let len = ((end - at) / HUGE * HUGE).min(STEP);
            // SAFETY: the range lies inside the slice's allocation, which
            // outlives the calls; neither advice changes its contents.
            unsafe {
                let range = at as *mut libc::c_void;
                libc::madvise(range, len, libc::MADV_HUGEPAGE);
                libc::madvise(range, len, libc::MADV_COLLAPSE);
            }
            at += len;
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = (data, keep_going);
}

/// Whether collapsing may run: only where the process has more than one
/// core. The kernel copies each 2 MB page in one go (about 10 ms, measured
/// on the `large` dataset, about 5 s a gigabyte) and a request sharing the
/// core would wait that long.
pub fn collapse_is_worth_it() -> bool {
    cores() > 1
}

/// Starts loading `bytes` into the cache, every line of it.
#[inline]
pub fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch is only a hint; it reads nothing and faults on
        // nothing, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// Makes the calling thread yield to requests: nice 10 (on Linux, nice is
/// a thread's own). Only a hint: where it fails, nothing changes but who
/// waits for whom.
pub fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority only changes the calling thread's nice value
    // (who = 0); it touches no memory of ours.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 10);
    }
}

/// Blocks of at least this size are mapped on their own (and unmapped
/// when freed) rather than carved from the heap.
const MMAP_THRESHOLD: usize = 1 << 20;

/// Fixes glibc's threshold for mapping a block on its own at
/// `MMAP_THRESHOLD` (1 MiB). By default the threshold follows the largest mapped
/// block freed (up to 32 MiB): once a reload frees the old version's 8 MiB
/// record chunks, the next versions' chunks come from the heaps of the
/// loader's threads, where freed memory lingers. Measured on `medium`
/// replaced wholly four times in a row: peak RSS 2.74, 3.02, 3.29, 3.33
/// times the JSON and RSS at rest creeping from 1.72 to 1.84 by default;
/// 2.62 to 2.65 and a flat 1.67 with the threshold fixed at 1 MiB
/// (BENCHMARKS.md, "Small changes"). Not lower: a replica of thousands of
/// small workspaces would map many of their blocks one by one, and the
/// kernel caps a process at 65,530 mappings. Call it once, before the
/// first thread starts.
pub fn fix_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before any
    // other thread allocates.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int);
    }
}

/// Hands memory freed by a load (the file's bytes, the parsed document) and
/// by the replaced dataset back to the OS. glibc keeps freed small blocks in
/// its heap otherwise, and RSS would ratchet up with every reload.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The `open(2)` flag that keeps opening a FIFO from waiting for its writer
/// (for `OpenOptionsExt::custom_flags`): a file named like a snapshot may be
/// anything, and the scan must not stall on it. No effect on a regular file.
pub const OPEN_NONBLOCK: i32 = libc::O_NONBLOCK;

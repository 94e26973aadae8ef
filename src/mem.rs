//! Memory hints for the large buffers of a load.

/// Asks the kernel to back `buf`'s spare capacity and contents with
/// transparent huge pages (where the system allows it on request, as
/// `madvise` mode does). A gigabyte buffer then takes ~500 page faults
/// instead of ~260,000. Only a hint: where it does not apply, nothing changes.
pub fn prefer_huge_pages(buf: &mut Vec<u8>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 * 1024 * 1024;
        let start = buf.as_mut_ptr() as usize;
        let end = start + buf.capacity();
        // madvise wants page-aligned ranges; only whole huge pages matter.
        let aligned = start.next_multiple_of(HUGE);
        if end > aligned + HUGE {
            let len = (end - aligned) / HUGE * HUGE;
            // SAFETY: the range lies inside the Vec's allocation, which
            // outlives the call; MADV_HUGEPAGE changes no contents.
            unsafe {
                libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

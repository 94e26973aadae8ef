//! What the per-workspace limiter costs (issue 31): heap bytes held for
//! N workspaces that each sent one request, before and after their state
//! is dropped as idle, and the time of one admission.
//!
//!   cargo run --release --example limiter_memory -- [N]

use std::alloc::{GlobalAlloc, Layout, System};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use portfolio_replica::serve::api::limits::{Limits, Policy};

struct Counting;
static HELD: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        HELD.fetch_add(new as isize - layout.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map_or(100_000, |a| a.parse().unwrap());
    let nz = |n| NonZeroU32::new(n).unwrap();
    let limits = std::sync::Arc::new(Limits::new(Some(Policy {
        rate: Some((nz(100), nz(100))),
        max_in_flight: Some(nz(64)),
    })));
    let names: Vec<String> = (0..n).map(|k| format!("ws-{k:08}")).collect();
    let before_admissions = HELD.load(Ordering::Relaxed);
    let started = Instant::now();
    for name in &names {
        drop(limits.admit(name, None));
    }
    let per = started.elapsed() / n as u32;
    let held = HELD.load(Ordering::Relaxed) - before_admissions;
    println!(
        "{n} workspaces, one request each: {:.1} MB held, {per:?} per admission",
        held as f64 / 1e6
    );
    // One workspace, admitted over and over (its state stays hot).
    let started = Instant::now();
    for _ in 0..1_000_000 {
        drop(limits.admit("ws-hot", None));
    }
    println!(
        "one workspace: {:?} per admission",
        started.elapsed() / 1_000_000
    );
    std::thread::sleep(Duration::from_millis(1100));
    limits.look();
    let held = HELD.load(Ordering::Relaxed) - before_admissions;
    println!(
        "once idle: {:.2} MB held, {} tracked",
        held as f64 / 1e6,
        limits.tracked()
    );
}

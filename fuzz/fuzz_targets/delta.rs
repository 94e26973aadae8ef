//! The `delta` fuzz target: see `fuzz/checks/delta.rs`, which `cargo test`
//! also replays over `fuzz/seeds/delta/`.

#![no_main]

#[path = "../checks/delta.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));

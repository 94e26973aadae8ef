//! The `envelope` fuzz target: see `fuzz/checks/envelope.rs`, which `cargo test`
//! also replays over `fuzz/seeds/envelope/`.

#![no_main]

#[path = "../checks/envelope.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));

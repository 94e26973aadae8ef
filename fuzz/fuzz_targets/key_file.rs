//! The `key_file` fuzz target: see `fuzz/checks/key_file.rs`, which `cargo test`
//! also replays over `fuzz/seeds/key_file/`.

#![no_main]

#[path = "../checks/key_file.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));

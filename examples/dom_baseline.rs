//! How fast do general-purpose JSON parsers build a DOM of a snapshot file?
//! The baseline that `scripts/parse-bench.sh` prints beside our server's
//! load speed: sonic-rs building a `sonic_rs::Value`, serde_json building a
//! `serde_json::Value`, and serde_json walking the file into
//! `serde::de::IgnoredAny` (validation and nothing built: a floor for any
//! serde-based load).
//!
//! ```text
//! cargo run --release --example dom_baseline -- FILE [--reps N]
//! ```
//!
//! The file is read whole into memory first, outside the timing. Each parser
//! then parses it `--reps` times (default 5), one parser after the other,
//! and one line per parser is printed, `key=value` fields separated by
//! spaces:
//!
//! ```text
//! parser=sonic-rs-dom bytes=N reps=5 median_s=X mb_per_s=Y min_s=X drop_median_s=Z simd=avx2
//! ```
//!
//! `median_s` and `min_s` time building the value only (MB = 10^6 bytes,
//! `mb_per_s` from the median); the value is dropped after the clock stops,
//! and the drop is timed on its own (`drop_median_s`), not counted in
//! `mb_per_s`. `simd` says which code sonic-rs was compiled with: it picks
//! its SIMD at compile time, so without `-C target-cpu=native` (or at least
//! `+avx2,+pclmulqdq`) on x86_64 it runs its portable fallback, and this
//! says `fallback`.

use std::hint::black_box;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// The command line: clap, as the server's own, rather than a parser by
/// hand for one flag.
#[derive(clap::Parser)]
#[command(about = "sonic-rs and serde_json building a DOM of FILE, timed")]
struct Args {
    /// The JSON file, read whole before any timing.
    file: PathBuf,
    /// Parses per parser; the median and the least are printed.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
}

/// The SIMD code sonic-rs was compiled with (its own `cfg` in
/// `util/arch`): the same flags build this example and it.
fn sonic_simd() -> &'static str {
    if cfg!(all(
        target_arch = "x86_64",
        target_feature = "pclmulqdq",
        target_feature = "avx2",
        target_feature = "sse2"
    )) {
        "avx2"
    } else if cfg!(all(target_arch = "aarch64", target_feature = "neon")) {
        "neon"
    } else {
        "fallback"
    }
}

/// Seconds of each build and of each drop, `reps` times.
struct Times {
    build: Vec<f64>,
    drop: Vec<f64>,
}

/// Parses `bytes` `reps` times with `parse`: the clock runs around `parse`
/// alone; the value is dropped after it stops, under a clock of its own.
fn measure<T, E: std::fmt::Display>(
    bytes: &[u8],
    reps: usize,
    parse: impl Fn(&[u8]) -> Result<T, E>,
) -> Result<Times, String> {
    let mut times = Times {
        build: Vec::with_capacity(reps),
        drop: Vec::with_capacity(reps),
    };
    for _ in 0..reps {
        let started = Instant::now();
        let value = black_box(parse(black_box(bytes)).map_err(|e| e.to_string())?);
        times.build.push(started.elapsed().as_secs_f64());
        let started = Instant::now();
        drop(value);
        times.drop.push(started.elapsed().as_secs_f64());
    }
    Ok(times)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn report(parser: &str, bytes: usize, mut times: Times, extra: &str) {
    let reps = times.build.len();
    let min = times.build.iter().copied().fold(f64::INFINITY, f64::min);
    let build = median(&mut times.build);
    let drop = median(&mut times.drop);
    let mb_per_s = bytes as f64 / 1e6 / build;
    println!(
        "parser={parser} bytes={bytes} reps={reps} median_s={build:.6} mb_per_s={mb_per_s:.1} \
         min_s={min:.6} drop_median_s={drop:.6}{extra}"
    );
}

fn run(args: &Args) -> Result<(), String> {
    let bytes = std::fs::read(&args.file)
        .map_err(|e| format!("cannot read {}: {e}", args.file.display()))?;
    let n = bytes.len();
    let at = |parser: &'static str| {
        let file = args.file.display();
        move |e: String| format!("{parser} rejects {file}: {e}")
    };

    let times = measure(&bytes, args.reps as usize, |b: &[u8]| {
        sonic_rs::from_slice::<sonic_rs::Value>(b)
    })
    .map_err(at("sonic-rs"))?;
    report("sonic-rs-dom", n, times, &format!(" simd={}", sonic_simd()));

    let times = measure(&bytes, args.reps as usize, |b: &[u8]| {
        serde_json::from_slice::<serde_json::Value>(b)
    })
    .map_err(at("serde_json"))?;
    report("serde_json-dom", n, times, "");

    let times = measure(&bytes, args.reps as usize, |b: &[u8]| {
        serde_json::from_slice::<serde::de::IgnoredAny>(b)
    })
    .map_err(at("serde_json"))?;
    report("serde_json-ignored", n, times, "");
    Ok(())
}

fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

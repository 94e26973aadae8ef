//! Synthetic snapshot generator behind `portfolio-replica generate`.
//!
//! The generator writes realistic workspace snapshots in the file format of
//! CONTRACT.md §2: one JSON object per workspace, with records in the API's
//! own `{ "id", "attributes" }` shape. Every random choice comes from a small
//! xoshiro256** generator seeded from `(seed, workspace)`, and no
//! floating-point arithmetic is involved, so a given `(scale, seed)` produces
//! byte-identical files on every machine (as long as this module's code and
//! word lists are unchanged).
//!
//! - `small` writes two workspaces, `acme.json` and `globex.json`, of a few
//!   hundred kilobytes each, so a demo can show workspace isolation. With the
//!   default seed 42 their keys are `cura_demo_acme_key` and
//!   `cura_demo_globex_key`.
//! - `medium` writes `medium.json`, about 100 MB.
//! - `large` writes `large.json`, about 1 GB, with more than 1,100,000 tasks
//!   and more than 300,000 feed entries.
//!
//! The data deliberately exercises the edge cases of the API: companies that
//! share a name (so the id tie-break matters), names that share a prefix or
//! start with non-ASCII or lower-case letters (so code-point ordering
//! matters), companies without priority, timestamps in several UTC offsets
//! and fraction precisions, records that share the same instant written in
//! different offsets (including a run of feed entries longer than a page),
//! metric histories with tied `reported_at`, and text that needs JSON
//! escaping (quotes, backslashes, newlines, tabs, non-ASCII).
//!
//! Each file is written to `NAME.json.tmp` and renamed into place, so a
//! server watching the directory never sees a half-written snapshot.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::store::time::{civil_from_days, days_from_civil};

/// How much data `generate` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Two demo workspaces of a few hundred kilobytes each.
    Small,
    /// One workspace of about 100 MB.
    Medium,
    /// One workspace of about 1 GB.
    Large,
}

/// One snapshot file written by [`generate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Final path of the snapshot file.
    pub path: PathBuf,
    /// Workspace id stored in the snapshot.
    pub workspace_id: String,
    /// Plain API key whose SHA-256 the snapshot holds.
    pub api_key: String,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// Number of records over all collections.
    pub records: u64,
}

/// Writes the snapshots for `scale` into `out` (created if missing) and returns what it wrote.
pub fn generate(out: &Path, scale: Scale, seed: u64) -> io::Result<Vec<GeneratedFile>> {
    fs::create_dir_all(out)?;
    workspaces(scale)
        .iter()
        .map(|spec| write_workspace(out, spec, scale, seed))
        .collect()
}

// ---------------------------------------------------------------------------
// Workspaces and their sizes
// ---------------------------------------------------------------------------

/// How many records of each kind one workspace holds.
#[derive(Clone, Copy, Debug)]
struct Plan {
    companies: usize,
    users: usize,
    tasks: usize,
    roles: usize,
    feed: usize,
    notes: usize,
    meetings: usize,
    /// Inclusive range of reports per (company, metric name).
    metric_reports: (u64, u64),
    /// Inclusive range of transcript segments per meeting note.
    segments: (u64, u64),
    /// Inclusive range of paragraphs per note.
    note_paragraphs: (u64, u64),
    /// Length of the run of feed entries that share one instant.
    feed_tie_run: usize,
}

/// The fixed identity of one generated workspace.
#[derive(Clone, Copy, Debug)]
struct WorkspaceSpec {
    file_stem: &'static str,
    id: &'static str,
    name: &'static str,
    mail_domain: &'static str,
    key_label: &'static str,
    plan: Plan,
}

/// Each of the two demo workspaces: a few hundred kilobytes.
const SMALL_PLAN: Plan = Plan {
    companies: 12,
    users: 8,
    tasks: 180,
    roles: 26,
    feed: 90,
    notes: 72,
    meetings: 18,
    metric_reports: (3, 6),
    segments: (30, 110),
    note_paragraphs: (1, 3),
    feed_tie_run: 25,
};

/// About 100 MB: a tenth of [`LARGE_PLAN`] in every count.
const MEDIUM_PLAN: Plan = Plan {
    companies: 500,
    users: 60,
    tasks: 112_000,
    roles: 1_500,
    feed: 31_000,
    notes: 4_000,
    meetings: 320,
    metric_reports: (4, 10),
    segments: (30, 200),
    note_paragraphs: (2, 5),
    feed_tie_run: 60,
};

/// About 1 GB: enough tasks to page at offset 1,000,000 and over 300,000 feed entries.
const LARGE_PLAN: Plan = Plan {
    companies: 5_000,
    users: 400,
    tasks: 1_120_000,
    roles: 15_000,
    feed: 310_000,
    notes: 40_000,
    meetings: 3_200,
    metric_reports: (4, 10),
    segments: (30, 200),
    note_paragraphs: (2, 5),
    feed_tie_run: 120,
};

/// Returns the workspaces written for `scale`.
fn workspaces(scale: Scale) -> Vec<WorkspaceSpec> {
    match scale {
        Scale::Small => vec![
            WorkspaceSpec {
                file_stem: "acme",
                id: "ws-acme",
                name: "Acme Ventures",
                mail_domain: "acme.vc",
                key_label: "demo",
                plan: SMALL_PLAN,
            },
            WorkspaceSpec {
                file_stem: "globex",
                id: "ws-globex",
                name: "Globex Capital",
                mail_domain: "globex.capital",
                key_label: "demo",
                plan: SMALL_PLAN,
            },
        ],
        Scale::Medium => vec![WorkspaceSpec {
            file_stem: "medium",
            id: "ws-medium",
            name: "Medium Benchmark Partners",
            mail_domain: "medium-bench.example",
            key_label: "benchmark",
            plan: MEDIUM_PLAN,
        }],
        Scale::Large => vec![WorkspaceSpec {
            file_stem: "large",
            id: "ws-large",
            name: "Large Benchmark Partners",
            mail_domain: "large-bench.example",
            key_label: "benchmark",
            plan: LARGE_PLAN,
        }],
    }
}

/// Returns the lower-case name of `scale` as used in the snapshot version.
fn scale_name(scale: Scale) -> &'static str {
    match scale {
        Scale::Small => "small",
        Scale::Medium => "medium",
        Scale::Large => "large",
    }
}

/// Returns the plain API key of a workspace.
///
/// The small demo workspaces get memorable keys with the default seed 42;
/// every other combination gets 32 hex digits drawn from the seed.
fn api_key(spec: &WorkspaceSpec, scale: Scale, seed: u64) -> String {
    if scale == Scale::Small && seed == 42 {
        return format!("cura_demo_{}_key", spec.file_stem);
    }
    let mut rng = Rng::new(stream_seed(seed, spec.id, "api-key"));
    format!("cura_{:016x}{:016x}", rng.next_u64(), rng.next_u64())
}

/// Returns the lowercase hex SHA-256 of `text`.
fn sha256_hex(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    hex
}

/// Writes one workspace to `NAME.json.tmp`, renames it into place and describes the result.
fn write_workspace(
    out: &Path,
    spec: &WorkspaceSpec,
    scale: Scale,
    seed: u64,
) -> io::Result<GeneratedFile> {
    let path = out.join(format!("{}.json", spec.file_stem));
    let tmp = out.join(format!("{}.json.tmp", spec.file_stem));
    let key = api_key(spec, scale, seed);
    let header = Header {
        version: format!("2026-11-22T10:00:00.000Z#{seed}-{}", scale_name(scale)),
        key_sha256: sha256_hex(&key),
    };
    let records = match write_to(&tmp, spec, seed, &header) {
        Ok(records) => records,
        Err(err) => {
            // Best effort: a failed write must not leave a stray temporary file.
            let _ = fs::remove_file(&tmp);
            return Err(err);
        }
    };
    fs::rename(&tmp, &path)?;
    let bytes = fs::metadata(&path)?.len();
    Ok(GeneratedFile {
        path,
        workspace_id: spec.id.to_string(),
        api_key: key,
        bytes,
        records,
    })
}

/// Creates `tmp`, writes the snapshot through a buffer and returns the record count.
fn write_to(tmp: &Path, spec: &WorkspaceSpec, seed: u64, header: &Header) -> io::Result<u64> {
    let mut writer = BufWriter::with_capacity(1 << 20, File::create(tmp)?);
    let records = write_snapshot(&mut writer, spec, seed, header)?;
    // `into_inner` flushes and reports a failed final write, which a plain drop would hide.
    writer
        .into_inner()
        .map_err(io::IntoInnerError::into_error)?;
    Ok(records)
}

/// The workspace-level fields written before the collections.
struct Header {
    version: String,
    key_sha256: String,
}

/// Writes one complete snapshot object and returns the number of records in it.
fn write_snapshot<W: Write>(
    w: &mut W,
    spec: &WorkspaceSpec,
    seed: u64,
    header: &Header,
) -> io::Result<u64> {
    let plan = &spec.plan;
    let mut ctx = Ctx::new(Rng::new(stream_seed(seed, spec.id, "data")));
    let world = World::build(&mut ctx.rng, spec);

    write_header(&mut ctx.json, spec, header);
    let mut records = 0;
    records += write_companies(&mut ctx, &world, w)?;
    records += write_tasks(&mut ctx, &world, plan, w)?;
    records += write_roles(&mut ctx, &world, plan, w)?;
    records += write_feed(&mut ctx, &world, plan, w)?;
    records += write_notes(&mut ctx, &world, plan, w)?;
    records += write_metrics(&mut ctx, &world, plan, w)?;
    let meetings = write_meetings(&mut ctx, &world, plan, w)?;
    records += meetings.len() as u64;
    records += write_meeting_notes(&mut ctx, &meetings, plan, w)?;
    ctx.json.end_object();
    ctx.json.buf.push(b'\n');
    ctx.json.flush(w)?;
    Ok(records)
}

/// Writes `format_version`, `version`, `workspace` and `api_keys`.
fn write_header(json: &mut Json, spec: &WorkspaceSpec, header: &Header) {
    json.begin_object();
    json.key_line("format_version");
    json.uint(1);
    json.key_line("version");
    json.string(&header.version);
    json.key_line("workspace");
    json.begin_object();
    json.key("id");
    json.string(spec.id);
    json.key("name");
    json.string(spec.name);
    json.end_object();
    json.key_line("api_keys");
    json.begin_array();
    json.begin_object();
    json.key("sha256");
    json.string(&header.key_sha256);
    json.key("label");
    json.string(spec.key_label);
    json.end_object();
    json.end_array();
}

// ---------------------------------------------------------------------------
// Deterministic randomness
// ---------------------------------------------------------------------------

/// Advances a splitmix64 state and returns the next output.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Derives the seed of one independent random stream from the user's seed and two labels.
fn stream_seed(seed: u64, workspace: &str, purpose: &str) -> u64 {
    // FNV-1a over the labels keeps the streams of different workspaces apart.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in workspace.bytes().chain([0]).chain(purpose.bytes()) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut state = seed ^ hash;
    splitmix64(&mut state)
}

/// A xoshiro256** generator: small, fast and identical on every platform.
struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// Seeds the generator by expanding `seed` with splitmix64.
    fn new(seed: u64) -> Self {
        let mut state = seed;
        let s = [
            splitmix64(&mut state),
            splitmix64(&mut state),
            splitmix64(&mut state),
            splitmix64(&mut state),
        ];
        Self { s }
    }

    /// Returns the next 64 random bits.
    fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Returns a value in `0..n` (`n` must be positive).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Returns a value in the inclusive range `lo..=hi`.
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// Returns a value in the inclusive range given as a pair.
    fn in_range(&mut self, range: (u64, u64)) -> u64 {
        self.between(range.0, range.1)
    }

    /// Returns a signed value in the inclusive range `lo..=hi`.
    fn between_i64(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// Returns an index into a collection of `len` elements.
    fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// Returns a random element of a non-empty slice.
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// Returns a random string of a non-empty word list.
    fn word(&mut self, words: &[&'static str]) -> &'static str {
        words[self.index(words.len())]
    }

    /// Returns true with probability `percent` / 100.
    fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// Returns true with probability `per_mille` / 1000.
    fn per_mille(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// Returns an element chosen by integer weights.
    fn weighted<T: Copy>(&mut self, items: &[(T, u64)]) -> T {
        let total: u64 = items.iter().map(|(_, weight)| weight).sum();
        let mut roll = self.below(total);
        for &(item, weight) in items {
            if roll < weight {
                return item;
            }
            roll -= weight;
        }
        items[items.len() - 1].0
    }

    /// Returns a random version-4 UUID (variant digit 8, 9, a or b).
    fn uuid(&mut self) -> Uuid {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.next_u64().to_be_bytes());
        bytes[8..].copy_from_slice(&self.next_u64().to_be_bytes());
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        Uuid(bytes)
    }

    /// Shuffles a slice in place (Fisher-Yates).
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.index(i + 1);
            items.swap(i, j);
        }
    }
}

/// A 128-bit record id, written in the lowercase 8-4-4-4-12 form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Uuid([u8; 16]);

const HEX: &[u8; 16] = b"0123456789abcdef";

impl Uuid {
    /// Appends the 36-character textual form to `buf`.
    fn push_to(self, buf: &mut Vec<u8>) {
        for (i, byte) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                buf.push(b'-');
            }
            buf.push(HEX[usize::from(byte >> 4)]);
            buf.push(HEX[usize::from(byte & 0xf)]);
        }
    }
}

// ---------------------------------------------------------------------------
// Time
// ---------------------------------------------------------------------------

const DAY: i64 = 86_400;
const HOUR: i64 = 3_600;
/// First instant any generated timestamp may have (2023-01-02T00:00:00Z).
const RANGE_START: i64 = days_from_civil(2023, 1, 2) * DAY;
/// Last instant any generated timestamp may have (2026-11-20T00:00:00Z).
const RANGE_END: i64 = days_from_civil(2026, 11, 20) * DAY;
/// Last calendar day a due date or metric period may fall on.
const LAST_DAY: i64 = days_from_civil(2026, 12, 31) * DAY;
/// The instant shared by the first records of tasks, feed and notes (2026-03-01T10:00:00Z).
const SHARED_INSTANT: i64 = days_from_civil(2026, 3, 1) * DAY + 10 * HOUR;

/// How a timestamp is written: its UTC offset and its number of fraction digits.
#[derive(Clone, Copy, Debug)]
struct Style {
    offset_minutes: i64,
    zulu: bool,
    digits: u8,
}

/// The offsets timestamps are written in, with their weights.
const OFFSETS: [((i64, bool), u64); 8] = [
    ((0, true), 44),
    ((0, false), 4),
    ((120, false), 14),
    ((60, false), 6),
    ((-300, false), 14),
    ((-480, false), 5),
    ((330, false), 10),
    ((540, false), 3),
];

impl Style {
    /// Returns a random offset written with `digits` fraction digits.
    fn with_digits(rng: &mut Rng, digits: u8) -> Self {
        let (offset_minutes, zulu) = rng.weighted(&OFFSETS);
        Self {
            offset_minutes,
            zulu,
            digits,
        }
    }

    /// Returns a random style whose precision can represent `micros` exactly.
    fn random_for(rng: &mut Rng, micros: u32) -> Self {
        let sub_millis = micros % 1_000;
        let digits = if sub_millis > 0 {
            6
        } else if micros > 0 {
            rng.weighted(&[(3, 3), (6, 1)])
        } else {
            rng.weighted(&DIGITS)
        };
        Self::with_digits(rng, digits)
    }
}

/// The numbers of fraction digits timestamps are written with, with their weights.
const DIGITS: [(u8, u64); 3] = [(3, 6), (0, 2), (6, 2)];

/// One instant plus the way it is written.
#[derive(Clone, Copy, Debug)]
struct Ts {
    secs: i64,
    micros: u32,
    style: Style,
}

impl Ts {
    /// Returns a random instant in `lo..hi` (clamped to the generated range) in a random style.
    fn random(rng: &mut Rng, lo: i64, hi: i64) -> Self {
        let lo = lo.clamp(RANGE_START, RANGE_END);
        let hi = hi.clamp(lo + 1, RANGE_END.max(lo + 1));
        let secs = rng.between_i64(lo, hi - 1);
        let digits = rng.weighted(&DIGITS);
        let micros = match digits {
            0 => 0,
            3 => rng.below(1_000) as u32 * 1_000,
            _ => rng.below(1_000_000) as u32,
        };
        Self {
            secs,
            micros,
            style: Style::with_digits(rng, digits),
        }
    }

    /// Returns a random instant between `min` and `max` seconds after `base`.
    fn after(rng: &mut Rng, base: i64, min: i64, max: i64) -> Self {
        Self::random(rng, base + min, base + max + 1)
    }

    /// Returns the same instant written in another random style.
    fn restyled(self, rng: &mut Rng) -> Self {
        Self {
            style: Style::random_for(rng, self.micros),
            ..self
        }
    }
}

/// Appends `value` in decimal, left-padded with zeros to `width` digits.
fn push_padded(buf: &mut Vec<u8>, value: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut n = value;
    let mut len = 0;
    while n > 0 || len == 0 {
        digits[19 - len] = b'0' + (n % 10) as u8;
        n /= 10;
        len += 1;
    }
    for _ in len..width {
        buf.push(b'0');
    }
    buf.extend_from_slice(&digits[20 - len..]);
}

/// Appends the calendar date of a local day count as `YYYY-MM-DD`.
fn push_date(buf: &mut Vec<u8>, days: i64) {
    let (year, month, day) = civil_from_days(days);
    push_padded(buf, year as u64, 4);
    buf.push(b'-');
    push_padded(buf, month as u64, 2);
    buf.push(b'-');
    push_padded(buf, day as u64, 2);
}

/// Appends `ts` as an RFC 3339 timestamp.
fn push_timestamp(buf: &mut Vec<u8>, ts: Ts) {
    let offset = ts.style.offset_minutes;
    let local = ts.secs + offset * 60;
    push_date(buf, local.div_euclid(DAY));
    let second_of_day = local.rem_euclid(DAY) as u64;
    buf.push(b'T');
    push_padded(buf, second_of_day / 3_600, 2);
    buf.push(b':');
    push_padded(buf, second_of_day / 60 % 60, 2);
    buf.push(b':');
    push_padded(buf, second_of_day % 60, 2);
    match ts.style.digits {
        3 => {
            buf.push(b'.');
            push_padded(buf, u64::from(ts.micros / 1_000), 3);
        }
        6 => {
            buf.push(b'.');
            push_padded(buf, u64::from(ts.micros), 6);
        }
        _ => {}
    }
    if offset == 0 && ts.style.zulu {
        buf.push(b'Z');
    } else {
        buf.push(if offset < 0 { b'-' } else { b'+' });
        let abs = offset.unsigned_abs();
        push_padded(buf, abs / 60, 2);
        buf.push(b':');
        push_padded(buf, abs % 60, 2);
    }
}

/// Hands out ordering timestamps for one collection, with deliberate ties.
///
/// Records 0, 1 and 2 of a collection share [`SHARED_INSTANT`], written as
/// `Z`, `+02:00` and `-05:00`; the records in `run` share one more instant;
/// and about `tie_per_mille` of the others reuse one of a pool of instants.
struct Clock {
    lo: i64,
    hi: i64,
    anchors: Vec<(i64, u32)>,
    tie_per_mille: u64,
    shared_first: bool,
    run: Range<usize>,
}

impl Clock {
    /// Creates a clock for `records` records between `lo` and `hi`.
    fn new(rng: &mut Rng, lo: i64, hi: i64, records: usize, tie_per_mille: u64) -> Self {
        let count = 2 + records / 300;
        let anchors = (0..count)
            .map(|_| {
                let secs = rng.between_i64(lo, hi - 1);
                let micros = if rng.percent(50) {
                    0
                } else {
                    rng.below(1_000) as u32 * 1_000
                };
                (secs, micros)
            })
            .collect();
        Self {
            lo,
            hi,
            anchors,
            tie_per_mille,
            shared_first: false,
            run: 0..0,
        }
    }

    /// Makes records 0 to 2 share [`SHARED_INSTANT`].
    fn with_shared_first(mut self) -> Self {
        self.shared_first = true;
        self
    }

    /// Makes the `len` records starting at `start` share one instant.
    fn with_run(mut self, start: usize, len: usize) -> Self {
        self.run = start..start + len;
        self
    }

    /// Returns the timestamp of record `index`.
    fn stamp(&self, rng: &mut Rng, index: usize) -> Ts {
        if self.shared_first && index < 3 {
            let (offset_minutes, zulu, digits) =
                [(0, true, 3), (120, false, 3), (-300, false, 0)][index];
            return Ts {
                secs: SHARED_INSTANT,
                micros: 0,
                style: Style {
                    offset_minutes,
                    zulu,
                    digits,
                },
            };
        }
        let anchor = if self.run.contains(&index) {
            Some(self.anchors[0])
        } else if rng.per_mille(self.tie_per_mille) {
            Some(*rng.pick(&self.anchors))
        } else {
            None
        };
        match anchor {
            Some((secs, micros)) => Ts {
                secs,
                micros,
                style: Style::random_for(rng, micros),
            },
            None => Ts::random(rng, self.lo, self.hi),
        }
    }
}

// ---------------------------------------------------------------------------
// JSON output
// ---------------------------------------------------------------------------

/// Flush the JSON buffer to the writer once it holds this many bytes.
const FLUSH_AT: usize = 1 << 16;

/// A minimal streaming JSON writer that inserts commas by itself.
///
/// Building into the buffer cannot fail; only [`Json::flush`] does IO.
struct Json {
    buf: Vec<u8>,
    /// One entry per open object or array: whether it already has a member.
    open: Vec<bool>,
    /// Whether a key was just written, so the next value needs no comma.
    after_key: bool,
}

impl Json {
    /// Creates an empty writer.
    fn new() -> Self {
        Self {
            buf: Vec::with_capacity(FLUSH_AT * 2),
            open: Vec::new(),
            after_key: false,
        }
    }

    /// Writes the comma that separates this value from the previous member, if any.
    fn separate(&mut self) {
        if self.after_key {
            self.after_key = false;
            return;
        }
        if let Some(has_member) = self.open.last_mut() {
            if *has_member {
                self.buf.push(b',');
            } else {
                *has_member = true;
            }
        }
    }

    /// Opens an object.
    fn begin_object(&mut self) {
        self.separate();
        self.buf.push(b'{');
        self.open.push(false);
    }

    /// Opens an object on a new line, as each record of a collection is.
    fn begin_record(&mut self) {
        self.separate();
        self.buf.extend_from_slice(b"\n{");
        self.open.push(false);
    }

    /// Closes the innermost object.
    fn end_object(&mut self) {
        self.buf.push(b'}');
        self.open.pop();
    }

    /// Opens an array.
    fn begin_array(&mut self) {
        self.separate();
        self.buf.push(b'[');
        self.open.push(false);
    }

    /// Closes the innermost array.
    fn end_array(&mut self) {
        self.buf.push(b']');
        self.open.pop();
    }

    /// Writes an object key (a plain ASCII literal that needs no escaping).
    fn key(&mut self, key: &str) {
        self.separate();
        self.push_key(key);
    }

    /// Writes an object key on a new line, as the top-level keys are.
    fn key_line(&mut self, key: &str) {
        self.separate();
        self.buf.push(b'\n');
        self.push_key(key);
    }

    /// Appends `"key":` and expects the value next.
    fn push_key(&mut self, key: &str) {
        self.buf.push(b'"');
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\":");
        self.after_key = true;
    }

    /// Writes an escaped string value.
    fn string(&mut self, text: &str) {
        self.separate();
        push_escaped(&mut self.buf, text);
    }

    /// Writes a string value or `null`.
    fn opt_string(&mut self, text: Option<&str>) {
        match text {
            Some(text) => self.string(text),
            None => self.null(),
        }
    }

    /// Writes `null`.
    fn null(&mut self) {
        self.separate();
        self.buf.extend_from_slice(b"null");
    }

    /// Writes `true` or `false`.
    fn boolean(&mut self, value: bool) {
        self.separate();
        self.buf
            .extend_from_slice(if value { b"true" } else { b"false" });
    }

    /// Writes an unsigned integer.
    fn uint(&mut self, value: u64) {
        self.separate();
        push_padded(&mut self.buf, value, 1);
    }

    /// Writes a number given in hundredths, with at most two decimals (`1250` is `12.5`).
    fn hundredths(&mut self, value: i64) {
        self.separate();
        if value < 0 {
            self.buf.push(b'-');
        }
        let abs = value.unsigned_abs();
        push_padded(&mut self.buf, abs / 100, 1);
        let cents = abs % 100;
        let (tenths, hundredths) = (cents / 10, cents % 10);
        if hundredths > 0 {
            self.buf.push(b'.');
            push_padded(&mut self.buf, cents, 2);
        } else if tenths > 0 {
            self.buf.push(b'.');
            push_padded(&mut self.buf, tenths, 1);
        }
    }

    /// Writes a UUID string.
    fn uuid(&mut self, id: Uuid) {
        self.separate();
        self.buf.push(b'"');
        id.push_to(&mut self.buf);
        self.buf.push(b'"');
    }

    /// Writes an RFC 3339 timestamp string.
    fn timestamp(&mut self, ts: Ts) {
        self.separate();
        self.buf.push(b'"');
        push_timestamp(&mut self.buf, ts);
        self.buf.push(b'"');
    }

    /// Writes the UTC calendar date of `secs` as a `YYYY-MM-DD` string.
    fn date(&mut self, secs: i64) {
        self.separate();
        self.buf.push(b'"');
        push_date(&mut self.buf, secs.div_euclid(DAY));
        self.buf.push(b'"');
    }

    /// Writes the buffer out once it is large enough.
    fn flush_if_full<W: Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.flush(w)?;
        }
        Ok(())
    }

    /// Writes the whole buffer out.
    fn flush<W: Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }
}

/// Appends `text` as a JSON string literal, escaping what JSON requires.
fn push_escaped(buf: &mut Vec<u8>, text: &str) {
    buf.push(b'"');
    let bytes = text.as_bytes();
    let mut start = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => &[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ],
            _ => continue,
        };
        buf.extend_from_slice(&bytes[start..i]);
        buf.extend_from_slice(escape);
        start = i + 1;
    }
    buf.extend_from_slice(&bytes[start..]);
    buf.push(b'"');
}

/// The state shared by all collection writers: randomness, output and a text scratch buffer.
struct Ctx {
    rng: Rng,
    json: Json,
    text: String,
}

impl Ctx {
    /// Creates a context around `rng`.
    fn new(rng: Rng) -> Self {
        Self {
            rng,
            json: Json::new(),
            text: String::with_capacity(1 << 14),
        }
    }

    /// Writes `key` with a string value composed by `fill`.
    fn text_field(&mut self, key: &str, fill: impl FnOnce(&mut Rng, &mut String)) {
        self.text.clear();
        fill(&mut self.rng, &mut self.text);
        self.json.key(key);
        self.json.string(&self.text);
    }

    /// Writes `key` with a string value.
    fn str_field(&mut self, key: &str, value: &str) {
        self.json.key(key);
        self.json.string(value);
    }

    /// Writes `key` with a UUID value.
    fn uuid_field(&mut self, key: &str, id: Uuid) {
        self.json.key(key);
        self.json.uuid(id);
    }

    /// Writes `key` with a timestamp value.
    fn ts_field(&mut self, key: &str, ts: Ts) {
        self.json.key(key);
        self.json.timestamp(ts);
    }

    /// Opens the top-level array of a collection.
    fn begin_collection(&mut self, name: &str) {
        self.json.key_line(name);
        self.json.begin_array();
    }

    /// Opens one `{ "id", "attributes": {` record.
    fn begin_record(&mut self, id: Uuid) {
        self.json.begin_record();
        self.uuid_field("id", id);
        self.json.key("attributes");
        self.json.begin_object();
    }

    /// Closes a record opened with [`Ctx::begin_record`] and flushes when the buffer is full.
    fn end_record<W: Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.json.end_object();
        self.json.end_object();
        self.json.flush_if_full(w)
    }
}

// ---------------------------------------------------------------------------
// The workspace's companies and people
// ---------------------------------------------------------------------------

/// A person with a display name and an email address.
#[derive(Clone, Debug)]
struct Person {
    name: String,
    email: String,
}

/// A member of the workspace's team, who is assigned tasks and writes notes.
#[derive(Clone, Debug)]
struct User {
    id: Uuid,
    person: Person,
}

/// A portfolio company and what other records need to know about it.
#[derive(Clone, Debug)]
struct Company {
    id: Uuid,
    name: String,
    slug: String,
    domain: String,
    currency: &'static str,
    founders: Vec<Person>,
}

/// Everything generated before the collections are written.
struct World {
    companies: Vec<Company>,
    users: Vec<User>,
    short_name: &'static str,
}

impl World {
    /// Draws the companies and the team of a workspace.
    fn build(rng: &mut Rng, spec: &WorkspaceSpec) -> Self {
        let names = company_names(rng, spec.plan.companies);
        let companies = names
            .into_iter()
            .enumerate()
            .map(|(i, name)| new_company(rng, name, i))
            .collect();
        let users = (0..spec.plan.users)
            .map(|_| User {
                id: rng.uuid(),
                person: new_person(rng, spec.mail_domain),
            })
            .collect();
        let short_name = spec.name.split(' ').next().unwrap_or(spec.name);
        Self {
            companies,
            users,
            short_name,
        }
    }

    /// Returns a random company.
    fn company(&self, rng: &mut Rng) -> &Company {
        rng.pick(&self.companies)
    }
}

/// Returns `count` company names, the first seven of which are the ordering edge cases.
///
/// Names 0 and 1 are equal; name 2 extends the prefix of name 0; name 3
/// starts with "Öko"; names 4 and 5 are "Café …" and "Cafe…"; name 6 starts
/// with a lower-case letter. Later names are syllable combinations with an
/// occasional repeat of an earlier name.
fn company_names(rng: &mut Rng, count: usize) -> Vec<String> {
    let prefix = rng.word(NAME_PREFIXES);
    let mut names = vec![
        format!("{prefix}{}", rng.word(NAME_TAILS)),
        String::new(),
        format!("{prefix}{}", rng.word(NAME_SUFFIXES)),
        format!("Öko{}", rng.word(NAME_SUFFIXES)),
        format!("Café {}", rng.word(CAFE_WORDS)),
        format!("Cafe{}", rng.word(NAME_SUFFIXES)),
        format!("e{}", rng.word(NAME_PREFIXES)),
    ];
    names[1] = names[0].clone();
    while names.len() < count {
        let name = if names.len() % 97 == 50 {
            rng.pick(&names).clone()
        } else {
            syllable_name(rng)
        };
        names.push(name);
    }
    names.truncate(count);
    names
}

/// Returns a company name made of a prefix, a suffix and an optional word.
fn syllable_name(rng: &mut Rng) -> String {
    let mut name = String::from(rng.word(NAME_PREFIXES));
    if rng.percent(75) {
        name.push_str(rng.word(NAME_SUFFIXES));
    }
    if rng.percent(40) || name.len() < 6 {
        name.push_str(rng.word(NAME_TAILS));
    }
    name
}

/// Returns the ASCII lower-case form of `text` for domains, slugs and emails.
fn ascii_slug(text: &str, separator: &str) -> String {
    let mut slug = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            'a'..='z' | '0'..='9' => slug.push(ch),
            'A'..='Z' => slug.push(ch.to_ascii_lowercase()),
            'ä' | 'Ä' => slug.push_str("ae"),
            'ö' | 'Ö' => slug.push_str("oe"),
            'ü' | 'Ü' => slug.push_str("ue"),
            'ß' => slug.push_str("ss"),
            'é' | 'è' | 'ë' | 'É' => slug.push('e'),
            'á' | 'à' => slug.push('a'),
            'í' => slug.push('i'),
            'ó' => slug.push('o'),
            'ñ' => slug.push('n'),
            ' ' | '-' => slug.push_str(separator),
            _ => {}
        }
    }
    slug
}

/// Returns a random person whose address is at `domain`.
fn new_person(rng: &mut Rng, domain: &str) -> Person {
    let first = rng.word(FIRST_NAMES);
    let last = rng.word(LAST_NAMES);
    Person {
        name: format!("{first} {last}"),
        email: format!(
            "{}.{}@{domain}",
            ascii_slug(first, ""),
            ascii_slug(last, "")
        ),
    }
}

/// Returns company `index` of the workspace, named `name`.
fn new_company(rng: &mut Rng, name: String, index: usize) -> Company {
    let slug = ascii_slug(&name, "");
    let tld = if index == 1 {
        ".de"
    } else {
        rng.word(&[".com", ".io", ".ai", ".de", ".co", ".eu"])
    };
    let domain = format!("{slug}{tld}");
    let founders = (0..rng.between(2, 3))
        .map(|_| new_person(rng, &domain))
        .collect();
    Company {
        id: rng.uuid(),
        currency: rng.weighted(&[("USD", 65), ("EUR", 35)]),
        name,
        slug,
        domain,
        founders,
    }
}

// ---------------------------------------------------------------------------
// Collections
// ---------------------------------------------------------------------------

/// Writes `companies` and returns how many there are.
fn write_companies<W: Write>(ctx: &mut Ctx, world: &World, w: &mut W) -> io::Result<u64> {
    ctx.begin_collection("companies");
    for (index, company) in world.companies.iter().enumerate() {
        write_company(ctx, company, index);
        ctx.end_record(w)?;
    }
    ctx.json.end_array();
    Ok(world.companies.len() as u64)
}

/// Writes the id and attributes of one company (the record stays open).
fn write_company(ctx: &mut Ctx, company: &Company, index: usize) {
    ctx.begin_record(company.id);
    ctx.str_field("domain", &company.domain);
    ctx.str_field("name", &company.name);
    ctx.str_field(
        "logo_url",
        &format!("https://{}/assets/logo.png", company.domain),
    );
    ctx.text_field("headline", headline);
    ctx.text_field("description", |rng, s| sentences(rng, s, 2, 4));
    ctx.str_field(
        "professional_network",
        &format!("https://www.linkedin.com/company/{}", company.slug),
    );
    match index % 9 {
        // Omitted on some companies, null on others.
        5 => {}
        8 => {
            ctx.json.key("x");
            ctx.json.null();
        }
        _ => ctx.str_field("x", &format!("https://x.com/{}", company.slug)),
    }
    let careers = if index % 4 == 3 {
        format!("https://jobs.{}", company.domain)
    } else {
        format!("https://{}/careers", company.domain)
    };
    ctx.str_field("careers_url", &careers);
    write_domain_aliases(ctx, company);
    ctx.json.key("priority");
    let priority = match index {
        0 => Some("high"),
        7 => None,
        _ => ctx.rng.weighted(&[
            (Some("high"), 30),
            (Some("medium"), 35),
            (Some("low"), 25),
            (None, 10),
        ]),
    };
    ctx.json.opt_string(priority);
    write_labels(ctx);
    write_value_propositions(ctx);
}

/// Writes `domain_aliases`: zero to two other domains of the company.
fn write_domain_aliases(ctx: &mut Ctx, company: &Company) {
    ctx.json.key("domain_aliases");
    ctx.json.begin_array();
    let count = ctx.rng.below(3);
    let forms = ["{}.com", "get{}.com", "{}.eu", "{}hq.com"];
    let start = ctx.rng.index(forms.len());
    for i in 0..count as usize {
        let alias = forms[(start + i) % forms.len()].replace("{}", &company.slug);
        if alias != company.domain {
            ctx.json.string(&alias);
        }
    }
    ctx.json.end_array();
}

/// Writes `labels`: one to four distinct labels.
fn write_labels(ctx: &mut Ctx) {
    ctx.json.key("labels");
    ctx.json.begin_array();
    let count = ctx.rng.between(1, 4) as usize;
    let start = ctx.rng.index(LABELS.len());
    let step = 1 + ctx.rng.index(3);
    for i in 0..count {
        ctx.json.string(LABELS[(start + i * step) % LABELS.len()]);
    }
    ctx.json.end_array();
}

/// Writes `value_propositions`: one to three problem, solution and ICP triples.
fn write_value_propositions(ctx: &mut Ctx) {
    ctx.json.key("value_propositions");
    ctx.json.begin_array();
    for _ in 0..ctx.rng.between(1, 3) {
        ctx.json.begin_object();
        ctx.text_field("problem", |rng, s| {
            s.push_str(rng.word(PROBLEMS));
            s.push('.');
        });
        ctx.text_field("solution", |rng, s| {
            s.push_str(rng.word(SOLUTIONS));
            s.push('.');
        });
        ctx.text_field("icp", |rng, s| s.push_str(rng.word(AUDIENCES)));
        ctx.json.end_object();
    }
    ctx.json.end_array();
}

/// Writes `tasks` and returns how many there are.
fn write_tasks<W: Write>(ctx: &mut Ctx, world: &World, plan: &Plan, w: &mut W) -> io::Result<u64> {
    let clock =
        Clock::new(&mut ctx.rng, RANGE_START, RANGE_END, plan.tasks, 40).with_shared_first();
    ctx.begin_collection("tasks");
    for index in 0..plan.tasks {
        let created = clock.stamp(&mut ctx.rng, index);
        let company = world.company(&mut ctx.rng);
        let id = ctx.rng.uuid();
        ctx.begin_record(id);
        ctx.text_field("title", task_title);
        ctx.text_field("description", task_description);
        let status = ctx.rng.weighted(&[
            ("triage", 15),
            ("todo", 35),
            ("in_progress", 20),
            ("done", 30),
        ]);
        ctx.str_field("status", status);
        let priority =
            ctx.rng
                .weighted(&[("low", 30), ("medium", 40), ("high", 22), ("urgent", 8)]);
        ctx.str_field("priority", priority);
        let source = ctx.rng.weighted(&[("manual", 70), ("automation", 30)]);
        ctx.str_field("source", source);
        ctx.uuid_field("company_id", company.id);
        ctx.json.key("assignee_id");
        if ctx.rng.percent(6) {
            ctx.json.null();
        } else {
            let user = ctx.rng.pick(&world.users).id;
            ctx.json.uuid(user);
        }
        ctx.json.key("due_date");
        let due = (created.secs + ctx.rng.between_i64(3, 90) * DAY).min(LAST_DAY);
        ctx.json.date(due);
        ctx.ts_field("created_at", created);
        let updated = if ctx.rng.percent(20) {
            created.restyled(&mut ctx.rng)
        } else {
            Ts::after(&mut ctx.rng, created.secs + 1, 60, 45 * DAY)
        };
        ctx.ts_field("updated_at", updated);
        ctx.end_record(w)?;
    }
    ctx.json.end_array();
    Ok(plan.tasks as u64)
}

/// Writes `roles` and returns how many there are.
fn write_roles<W: Write>(ctx: &mut Ctx, world: &World, plan: &Plan, w: &mut W) -> io::Result<u64> {
    let clock = Clock::new(
        &mut ctx.rng,
        RANGE_START + 400 * DAY,
        RANGE_END,
        plan.roles,
        30,
    );
    ctx.begin_collection("roles");
    for index in 0..plan.roles {
        let opened = clock.stamp(&mut ctx.rng, index);
        let company = world.company(&mut ctx.rng);
        let (domain, level, title) = role_title(&mut ctx.rng);
        let id = ctx.rng.uuid();
        ctx.begin_record(id);
        ctx.uuid_field("company_id", company.id);
        ctx.str_field("name", &title);
        let url = format!(
            "https://{}/careers/{}-{}",
            company.domain,
            ascii_slug(&title, "-"),
            1000 + ctx.rng.below(9000)
        );
        ctx.str_field("url", &url);
        ctx.text_field("description", |rng, s| {
            s.push_str("We are looking for a ");
            s.push_str(&title);
            s.push_str(" to join our team. ");
            sentences(rng, s, 1, 3);
        });
        ctx.str_field("domain", domain);
        ctx.str_field("level", level);
        ctx.ts_field("opened_at", opened);
        ctx.end_record(w)?;
    }
    ctx.json.end_array();
    Ok(plan.roles as u64)
}

/// Returns a role's domain, level and title.
fn role_title(rng: &mut Rng) -> (&'static str, &'static str, String) {
    let domain = rng.weighted(&[("engineering", 50), ("sales", 30), ("product", 20)]);
    let level = rng.weighted(&[("ic", 70), ("manager", 20), ("executive", 10)]);
    let titles: &[&str] = match (domain, level) {
        ("engineering", "ic") => ENGINEERING_ROLES,
        ("engineering", "manager") => &["Engineering Manager", "Head of Platform", "Head of Data"],
        ("engineering", _) => &["VP Engineering", "CTO"],
        ("sales", "ic") => SALES_ROLES,
        ("sales", "manager") => &[
            "Sales Manager, DACH",
            "Head of Partnerships",
            "Sales Manager, Nordics",
        ],
        ("sales", _) => &["VP Sales", "Chief Revenue Officer"],
        (_, "ic") => &[
            "Product Manager",
            "Product Designer",
            "UX Researcher",
            "Product Analyst",
        ],
        (_, "manager") => &["Group Product Manager", "Head of Design"],
        _ => &["VP Product", "Chief Product Officer"],
    };
    let mut title = String::new();
    if level == "ic" {
        let seniority = rng.weighted(&SENIORITY);
        title.push_str(seniority);
    }
    title.push_str(rng.word(titles));
    if rng.percent(15) {
        title.push_str(rng.word(&[" (m/w/d)", " – Remote", " (Zürich)", " – São Paulo"]));
    }
    (domain, level, title)
}

/// Writes `feed` and returns how many entries there are.
fn write_feed<W: Write>(ctx: &mut Ctx, world: &World, plan: &Plan, w: &mut W) -> io::Result<u64> {
    let run_start = plan.feed / 3;
    let clock = Clock::new(&mut ctx.rng, RANGE_START, RANGE_END, plan.feed, 40)
        .with_shared_first()
        .with_run(run_start, plan.feed_tie_run.min(plan.feed - run_start));
    ctx.begin_collection("feed");
    for index in 0..plan.feed {
        let published = clock.stamp(&mut ctx.rng, index);
        let company = world.company(&mut ctx.rng);
        let kind = ctx.rng.weighted(&[
            ("product-update", 35),
            ("fundraise-announcement", 15),
            ("hiring", 30),
            ("press", 20),
        ]);
        let id = ctx.rng.uuid();
        ctx.begin_record(id);
        ctx.uuid_field("company_id", company.id);
        ctx.str_field("type", kind);
        ctx.text_field("title", |rng, s| feed_title(rng, s, kind, &company.name));
        ctx.text_field("content", |rng, s| sentences(rng, s, 2, 5));
        ctx.ts_field("published_at", published);
        let private = ctx.rng.percent(30);
        ctx.json.key("private");
        ctx.json.boolean(private);
        write_feed_sources(ctx, company, published.secs, private);
        ctx.end_record(w)?;
    }
    ctx.json.end_array();
    Ok(plan.feed as u64)
}

/// Writes the `sources` of one feed entry: zero to three links.
fn write_feed_sources(ctx: &mut Ctx, company: &Company, published: i64, private: bool) {
    ctx.json.key("sources");
    ctx.json.begin_array();
    for _ in 0..ctx.rng.below(4) {
        let source = if private {
            ctx.rng.word(&["email", "document"])
        } else {
            ctx.rng.word(&["professional_network", "x", "news", "blog"])
        };
        let id = ctx.rng.next_u64() >> 4;
        let url = match source {
            "professional_network" => {
                format!("https://www.linkedin.com/feed/update/urn:li:activity:{id}")
            }
            "x" => format!("https://x.com/{}/status/{id}", company.slug),
            "news" => format!(
                "https://{}/{}/{}-{id:x}",
                ctx.rng.pick(&[
                    "techcrunch.com",
                    "sifted.eu",
                    "handelsblatt.com",
                    "reuters.com"
                ]),
                ctx.rng.word(&["startups", "venture", "tech", "business"]),
                company.slug
            ),
            "blog" => format!("https://{}/blog/{id:x}", company.domain),
            _ => format!("https://files.{}/d/{id:x}", company.domain),
        };
        ctx.json.begin_object();
        ctx.str_field("source", source);
        ctx.str_field("url", &url);
        ctx.text_field("title", |rng, s| feed_title(rng, s, "press", &company.name));
        let published = Ts::random(&mut ctx.rng, published - 3 * DAY, published + 1);
        ctx.ts_field("published_at", published);
        ctx.json.end_object();
    }
    ctx.json.end_array();
}

/// Writes `notes` and returns how many there are.
fn write_notes<W: Write>(ctx: &mut Ctx, world: &World, plan: &Plan, w: &mut W) -> io::Result<u64> {
    let clock =
        Clock::new(&mut ctx.rng, RANGE_START, RANGE_END, plan.notes, 40).with_shared_first();
    ctx.begin_collection("notes");
    for index in 0..plan.notes {
        let created = clock.stamp(&mut ctx.rng, index);
        // Every company gets notes; the first rounds go through them in order.
        let company = match world.companies.get(index) {
            Some(company) => company,
            None => world.company(&mut ctx.rng),
        };
        let id = ctx.rng.uuid();
        ctx.begin_record(id);
        ctx.uuid_field("company_id", company.id);
        ctx.text_field("title", |rng, s| note_title(rng, s, &company.name));
        ctx.text_field("content", |rng, s| {
            paragraphs(rng, s, plan.note_paragraphs, (2, 6));
        });
        let source = ctx.rng.weighted(&[
            ("manual", 55),
            ("email", 20),
            ("meeting", 15),
            ("import", 10),
        ]);
        ctx.str_field("source", source);
        let author = &ctx.rng.pick(&world.users).person.email;
        ctx.str_field("created_by", author);
        ctx.ts_field("created_at", created);
        ctx.end_record(w)?;
    }
    ctx.json.end_array();
    Ok(plan.notes as u64)
}

/// A metric a company reports, with how its values are drawn and written.
#[derive(Clone, Copy, Debug)]
enum MetricKind {
    Revenue,
    Headcount,
    Burn,
    Runway,
    Percent,
    Count,
}

/// The standard metrics, reported by most companies.
const STANDARD_METRICS: [(&str, MetricKind); 4] = [
    ("Annualized Revenue", MetricKind::Revenue),
    ("Headcount", MetricKind::Headcount),
    ("Burn Rate", MetricKind::Burn),
    ("Cash Runway", MetricKind::Runway),
];

/// Custom metrics, each reported by some companies.
const CUSTOM_METRICS: [(&str, MetricKind); 7] = [
    ("Net Revenue Retention", MetricKind::Percent),
    ("Gross Margin", MetricKind::Percent),
    ("Weekly Active Users", MetricKind::Count),
    ("Kundenzufriedenheit (NPS)", MetricKind::Percent),
    ("eNPS", MetricKind::Percent),
    ("Paying Customers", MetricKind::Count),
    ("Écart de marge", MetricKind::Percent),
];

/// Writes `metrics`, the full history of every (company, name), and returns how many reports there are.
fn write_metrics<W: Write>(
    ctx: &mut Ctx,
    world: &World,
    plan: &Plan,
    w: &mut W,
) -> io::Result<u64> {
    ctx.begin_collection("metrics");
    let mut count = 0;
    for (index, company) in world.companies.iter().enumerate() {
        let mut metrics: Vec<(&str, MetricKind)> = STANDARD_METRICS
            .iter()
            .copied()
            .filter(|_| index < 2 || ctx.rng.percent(88))
            .collect();
        if index < 2 || ctx.rng.percent(45) {
            let first = ctx.rng.index(CUSTOM_METRICS.len());
            metrics.push(CUSTOM_METRICS[first]);
            if ctx.rng.percent(30) {
                metrics.push(CUSTOM_METRICS[(first + 3) % CUSTOM_METRICS.len()]);
            }
        }
        for (metric_index, &(name, kind)) in metrics.iter().enumerate() {
            let force_tie = index == 0 && metric_index == 0;
            count += write_metric_history(ctx, company, plan, (name, kind), force_tie, w)?;
        }
    }
    ctx.json.end_array();
    Ok(count)
}

/// One reported value of a metric, before it is written.
struct Report {
    id: Uuid,
    quarter: i64,
    value: i64,
    reported: Ts,
}

/// Writes the history of one metric of one company and returns its length.
///
/// Reports cover consecutive quarters; some histories carry a correction that
/// shares the `reported_at` instant of another report, written in another
/// offset, so the id tie-break decides which one is latest.
fn write_metric_history<W: Write>(
    ctx: &mut Ctx,
    company: &Company,
    plan: &Plan,
    metric: (&str, MetricKind),
    force_tie: bool,
    w: &mut W,
) -> io::Result<u64> {
    let rng = &mut ctx.rng;
    let reports_count = rng.in_range(plan.metric_reports) as i64;
    // Quarters are counted from 2023 Q1; the latest report covers 2026 Q3 at most.
    let last_quarter = rng.between_i64(reports_count - 1, 14);
    let mut value = initial_metric_value(rng, metric.1);
    let mut reports = Vec::with_capacity(reports_count as usize + 1);
    for quarter in last_quarter + 1 - reports_count..=last_quarter {
        let period_end = quarter_start(quarter + 1) - DAY;
        let reported = Ts::after(rng, period_end, 5 * DAY, 40 * DAY);
        reports.push(Report {
            id: rng.uuid(),
            quarter,
            value,
            reported,
        });
        value = next_metric_value(rng, metric.1, value);
    }
    if force_tie || rng.percent(12) {
        let base = rng.index(reports.len());
        let (quarter, value, reported) = {
            let base = &reports[base];
            (base.quarter, base.value, base.reported)
        };
        reports.push(Report {
            id: rng.uuid(),
            quarter,
            value: next_metric_value(rng, metric.1, value),
            reported: reported.restyled(rng),
        });
    }
    rng.shuffle(&mut reports);
    for report in &reports {
        write_metric_report(ctx, company, metric, report);
        ctx.json.end_object();
        ctx.json.end_object();
        ctx.json.flush_if_full(w)?;
    }
    Ok(reports.len() as u64)
}

/// Returns the first day (as seconds) of quarter `quarter`, counted from 2023 Q1.
fn quarter_start(quarter: i64) -> i64 {
    let year = 2023 + quarter.div_euclid(4);
    let month = 1 + 3 * quarter.rem_euclid(4);
    days_from_civil(year, month, 1) * DAY
}

/// Writes one metric report record (left open for the caller to close).
fn write_metric_report(
    ctx: &mut Ctx,
    company: &Company,
    metric: (&str, MetricKind),
    report: &Report,
) {
    let (name, kind) = metric;
    ctx.json.begin_record();
    ctx.uuid_field("id", report.id);
    ctx.uuid_field("company_id", company.id);
    ctx.json.key("attributes");
    ctx.json.begin_object();
    ctx.str_field("name", name);
    let (unit, currency) = match kind {
        MetricKind::Revenue | MetricKind::Burn => ("currency", Some(company.currency)),
        MetricKind::Runway => ("months", None),
        _ => ("number", None),
    };
    ctx.str_field("unit", unit);
    ctx.str_field(
        "value_text",
        &metric_text(kind, report.value, company.currency),
    );
    ctx.json.key("value_numeric");
    ctx.json.hundredths(report.value);
    ctx.json.key("value_currency");
    ctx.json.opt_string(currency);
    let year = 2023 + report.quarter.div_euclid(4);
    let label = format!("Q{} {year}", 1 + report.quarter.rem_euclid(4));
    ctx.str_field("period_label", &label);
    ctx.json.key("period_start");
    ctx.json.date(quarter_start(report.quarter));
    ctx.json.key("period_end");
    ctx.json.date(quarter_start(report.quarter + 1) - DAY);
    ctx.ts_field("reported_at", report.reported);
}

/// Returns a plausible first value of a metric, in hundredths.
fn initial_metric_value(rng: &mut Rng, kind: MetricKind) -> i64 {
    let whole = match kind {
        MetricKind::Revenue => rng.between_i64(2, 500) * 100_000,
        MetricKind::Headcount => rng.between_i64(4, 400),
        MetricKind::Burn => rng.between_i64(5, 300) * 10_000,
        MetricKind::Runway => return rng.between_i64(60, 360) * 10,
        MetricKind::Percent => rng.between_i64(-10, 130),
        MetricKind::Count => rng.between_i64(50, 200_000),
    };
    whole * 100
}

/// Returns the value reported after `value`: mostly growth, sometimes a dip.
fn next_metric_value(rng: &mut Rng, kind: MetricKind, value: i64) -> i64 {
    let change = rng.between_i64(-8, 25);
    match kind {
        MetricKind::Runway => (value + rng.between_i64(-30, 20) * 10).max(10),
        MetricKind::Percent => value + rng.between_i64(-5, 5) * 100,
        MetricKind::Headcount | MetricKind::Count => {
            (value / 100 + value / 100 * change / 100).max(1) * 100
        }
        _ => (value / 100_000 * (100 + change) / 100).max(1) * 100_000,
    }
}

/// Returns the display text of a metric value given in hundredths.
fn metric_text(kind: MetricKind, value: i64, currency: &str) -> String {
    let symbol = if currency == "EUR" { "€" } else { "$" };
    let whole = value / 100;
    match kind {
        MetricKind::Revenue => money_text(symbol, whole),
        MetricKind::Burn => format!("{} / month", money_text(symbol, whole)),
        MetricKind::Runway => format!("{}.{} months", value / 100, value % 100 / 10),
        MetricKind::Percent => format!("{whole}%"),
        MetricKind::Headcount | MetricKind::Count => group_thousands(whole),
    }
}

/// Returns an amount such as `$4.2M` or `€850K`.
fn money_text(symbol: &str, amount: i64) -> String {
    if amount >= 1_000_000 {
        format!(
            "{symbol}{}.{}M",
            amount / 1_000_000,
            amount % 1_000_000 / 100_000
        )
    } else {
        format!("{symbol}{}K", amount / 1_000)
    }
}

/// Returns an integer with comma thousands separators.
fn group_thousands(value: i64) -> String {
    let digits = value.unsigned_abs().to_string();
    let lead = match digits.len() % 3 {
        0 => 3,
        rest => rest,
    };
    let mut text = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if value < 0 {
        text.push('-');
    }
    text.push_str(&digits[..lead]);
    for group in digits.as_bytes()[lead..].chunks(3) {
        text.push(',');
        text.extend(group.iter().map(|&digit| char::from(digit)));
    }
    text
}

/// What meeting notes need to know about a meeting.
struct MeetingInfo {
    id: Uuid,
    start: i64,
    end: Option<i64>,
    speakers: Vec<String>,
}

/// Writes `meetings` and returns what the meeting notes need about them.
fn write_meetings<W: Write>(
    ctx: &mut Ctx,
    world: &World,
    plan: &Plan,
    w: &mut W,
) -> io::Result<Vec<MeetingInfo>> {
    let clock = Clock::new(
        &mut ctx.rng,
        RANGE_START + 20 * DAY,
        RANGE_END - 5 * DAY,
        plan.meetings,
        10,
    );
    ctx.begin_collection("meetings");
    let mut meetings = Vec::with_capacity(plan.meetings);
    for index in 0..plan.meetings {
        let start = clock.stamp(&mut ctx.rng, index);
        let company = world.company(&mut ctx.rng);
        let id = ctx.rng.uuid();
        ctx.begin_record(id);
        ctx.uuid_field("company_id", company.id);
        ctx.text_field("title", |rng, s| {
            meeting_title(rng, s, &company.name, world.short_name)
        });
        ctx.ts_field("start_time", start);
        let minutes = *ctx.rng.pick(&[30, 45, 60, 60, 90]);
        let end = if ctx.rng.percent(10) {
            None
        } else {
            Some(start.secs + minutes * 60)
        };
        ctx.json.key("end_time");
        match end {
            Some(end) => {
                let ts = Ts { secs: end, ..start };
                ctx.json.timestamp(ts);
            }
            None => ctx.json.null(),
        }
        let speakers = write_attendees(ctx, world, company);
        let created = Ts::random(&mut ctx.rng, start.secs - 21 * DAY, start.secs - HOUR);
        ctx.ts_field("created_at", created);
        let updated = Ts::random(&mut ctx.rng, created.secs, start.secs + DAY);
        ctx.ts_field("updated_at", updated);
        ctx.end_record(w)?;
        meetings.push(MeetingInfo {
            id,
            start: start.secs,
            end,
            speakers,
        });
    }
    ctx.json.end_array();
    Ok(meetings)
}

/// Writes `attendees` (exactly one organizer) and returns the names of those who speak.
fn write_attendees(ctx: &mut Ctx, world: &World, company: &Company) -> Vec<String> {
    let mut people: Vec<Person> = Vec::new();
    for _ in 0..ctx.rng.between(1, 2) {
        people.push(ctx.rng.pick(&world.users).person.clone());
    }
    for founder in &company.founders {
        if ctx.rng.percent(70) {
            people.push(founder.clone());
        }
    }
    if ctx.rng.percent(30) {
        people.push(new_person(&mut ctx.rng, &company.domain));
    }
    let organizer = ctx.rng.index(people.len());
    ctx.json.key("attendees");
    ctx.json.begin_array();
    let mut speakers = Vec::with_capacity(people.len());
    for (i, person) in people.iter().enumerate() {
        ctx.json.begin_object();
        ctx.str_field("email", &person.email);
        ctx.json.key("organizer");
        ctx.json.boolean(i == organizer);
        if i == organizer || ctx.rng.percent(80) {
            ctx.str_field("name", &person.name);
        }
        ctx.json.end_object();
        speakers.push(person.name.clone());
    }
    ctx.json.end_array();
    speakers
}

/// Writes `meeting_notes`: none, one or two per meeting; returns how many there are.
fn write_meeting_notes<W: Write>(
    ctx: &mut Ctx,
    meetings: &[MeetingInfo],
    plan: &Plan,
    w: &mut W,
) -> io::Result<u64> {
    ctx.begin_collection("meeting_notes");
    let mut count = 0;
    for meeting in meetings {
        let notes = ctx.rng.weighted(&[(0u64, 15), (1, 65), (2, 20)]);
        let mut previous: Option<Ts> = None;
        for _ in 0..notes {
            let ended = meeting.end.unwrap_or(meeting.start + HOUR);
            // A second note sometimes shares the first one's creation instant.
            let created = match previous {
                Some(first) if ctx.rng.percent(30) => first.restyled(&mut ctx.rng),
                _ => Ts::after(&mut ctx.rng, ended, 5 * 60, 3 * HOUR),
            };
            previous = Some(created);
            write_meeting_note(ctx, meeting, plan, created);
            ctx.end_record(w)?;
            count += 1;
        }
    }
    ctx.json.end_array();
    Ok(count)
}

/// Which of a meeting note's `notes` and `transcript` are present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NoteShape {
    Both,
    NotesOnly,
    TranscriptOnly,
}

/// Writes one meeting note record (left open for the caller to close).
fn write_meeting_note(ctx: &mut Ctx, meeting: &MeetingInfo, plan: &Plan, created: Ts) {
    let id = ctx.rng.uuid();
    ctx.begin_record(id);
    ctx.uuid_field("meeting_id", meeting.id);
    ctx.str_field("type", "notetool");
    let shape = ctx.rng.weighted(&[
        (NoteShape::Both, 65),
        (NoteShape::NotesOnly, 15),
        (NoteShape::TranscriptOnly, 20),
    ]);
    ctx.json.key("notes");
    if shape == NoteShape::TranscriptOnly {
        ctx.json.null();
    } else {
        ctx.text.clear();
        meeting_summary(&mut ctx.rng, &mut ctx.text);
        ctx.json.string(&ctx.text);
    }
    ctx.json.key("transcript");
    if shape == NoteShape::NotesOnly {
        ctx.json.null();
    } else {
        write_transcript(ctx, meeting, plan);
    }
    let updated = Ts::after(&mut ctx.rng, created.secs, 0, 2 * DAY);
    ctx.json.key("synced_at");
    if ctx.rng.percent(20) {
        ctx.json.null();
    } else {
        ctx.json.timestamp(updated.restyled(&mut ctx.rng));
    }
    ctx.ts_field("created_at", created);
    ctx.ts_field("updated_at", updated);
}

/// Writes a transcript object whose segments have increasing start and end times.
fn write_transcript(ctx: &mut Ctx, meeting: &MeetingInfo, plan: &Plan) {
    ctx.json.begin_object();
    ctx.json.key("segments");
    ctx.json.begin_array();
    let mut time = ctx.rng.between_i64(0, 400);
    for _ in 0..ctx.rng.in_range(plan.segments) {
        let start = time + ctx.rng.between_i64(0, 150);
        let end = start + ctx.rng.between_i64(150, 2_500);
        time = end;
        ctx.json.begin_object();
        ctx.text_field("text", transcript_line);
        if ctx.rng.percent(95) {
            let speaker = ctx.rng.pick(&meeting.speakers);
            ctx.str_field("speaker", speaker);
        }
        if ctx.rng.percent(97) {
            ctx.json.key("startTime");
            ctx.json.hundredths(start);
            ctx.json.key("endTime");
            ctx.json.hundredths(end);
        }
        ctx.json.end_object();
    }
    ctx.json.end_array();
    ctx.json.end_object();
}

// ---------------------------------------------------------------------------
// Text
// ---------------------------------------------------------------------------

/// Appends one sentence of portfolio-update prose.
fn sentence(rng: &mut Rng, s: &mut String) {
    s.push_str(rng.word(SUBJECTS));
    s.push(' ');
    s.push_str(rng.word(VERBS));
    s.push(' ');
    s.push_str(rng.word(OBJECTS));
    s.push_str(rng.word(TAILS));
    s.push('.');
}

/// Appends `lo..=hi` sentences separated by spaces.
fn sentences(rng: &mut Rng, s: &mut String, lo: u64, hi: u64) {
    for i in 0..rng.between(lo, hi) {
        if i > 0 {
            s.push(' ');
        }
        sentence(rng, s);
    }
}

/// Appends paragraphs separated by blank lines.
fn paragraphs(rng: &mut Rng, s: &mut String, count: (u64, u64), per_paragraph: (u64, u64)) {
    for i in 0..rng.in_range(count) {
        if i > 0 {
            s.push_str("\n\n");
        }
        if rng.percent(15) {
            s.push_str("- ");
            sentence(rng, s);
            s.push_str("\n- ");
            sentence(rng, s);
        } else {
            sentences(rng, s, per_paragraph.0, per_paragraph.1);
        }
    }
}

/// Appends a company headline such as "AI-native procurement software for mid-market manufacturers".
fn headline(rng: &mut Rng, s: &mut String) {
    s.push_str(rng.word(HEADLINE_ADJECTIVES));
    s.push(' ');
    s.push_str(rng.word(HEADLINE_PRODUCTS));
    s.push_str(" for ");
    s.push_str(rng.word(AUDIENCES));
}

/// Appends a task title of four to ten words.
fn task_title(rng: &mut Rng, s: &mut String) {
    s.push_str(rng.word(TASK_VERBS));
    s.push(' ');
    s.push_str(rng.word(TASK_OBJECTS));
    let qualifier = rng.word(TASK_QUALIFIERS);
    let words = s.split(' ').count() + qualifier.split(' ').count();
    if words <= 10 && (words <= 5 || rng.percent(55)) {
        s.push(' ');
        s.push_str(qualifier);
    }
}

/// Appends a task description: one to four sentences, sometimes with a checklist.
fn task_description(rng: &mut Rng, s: &mut String) {
    // Most descriptions are short; a few run to four sentences.
    let count = rng.weighted(&[(1, 35), (2, 35), (3, 20), (4, 10)]);
    sentences(rng, s, count, count);
    if rng.percent(10) {
        s.push_str("\n\nChecklist:\n- ");
        s.push_str(rng.word(TASK_OBJECTS));
        s.push_str("\n- ");
        s.push_str(rng.word(TASK_OBJECTS));
    }
}

/// Appends the title of a feed entry of type `kind` about `company`.
fn feed_title(rng: &mut Rng, s: &mut String, kind: &str, company: &str) {
    match kind {
        "product-update" => {
            s.push_str(company);
            s.push_str(rng.word(&[" launches ", " ships ", " introduces ", " rolls out "]));
            s.push_str(rng.word(FEATURES));
        }
        "fundraise-announcement" => {
            s.push_str(company);
            s.push_str(" raises ");
            s.push_str(rng.word(&["$", "€"]));
            s.push_str(&rng.between(2, 80).to_string());
            s.push_str("M ");
            s.push_str(rng.word(&[
                "seed round",
                "Series A",
                "Series B",
                "Series C",
                "bridge round",
            ]));
            s.push_str(" led by ");
            s.push_str(rng.word(INVESTORS));
        }
        "hiring" => {
            s.push_str(company);
            s.push_str(rng.word(&[
                " is hiring a ",
                " opens a search for a ",
                " is looking for a ",
            ]));
            s.push_str(rng.word(ENGINEERING_ROLES));
        }
        _ => {
            s.push_str(company);
            s.push_str(rng.word(&[" featured in ", " profiled by ", " quoted in "]));
            s.push_str(rng.word(OUTLETS));
            s.push_str(": \"");
            s.push_str(rng.word(PRESS_QUOTES));
            s.push('"');
        }
    }
}

/// Appends the title of a note about `company`.
fn note_title(rng: &mut Rng, s: &mut String, company: &str) {
    let template = rng.word(NOTE_TITLES);
    s.push_str(&template.replace("{}", company));
}

/// Appends the title of a meeting with `company`.
fn meeting_title(rng: &mut Rng, s: &mut String, company: &str, workspace: &str) {
    match rng.below(5) {
        0 => {
            s.push_str(company);
            s.push_str(" <> ");
            s.push_str(workspace);
            s.push_str(" monthly sync");
        }
        1 => {
            s.push_str("Board meeting Q");
            s.push_str(&rng.between(1, 4).to_string());
            s.push_str(" – ");
            s.push_str(company);
        }
        2 => {
            s.push_str("Intro call: ");
            s.push_str(company);
        }
        3 => {
            s.push_str(company);
            s.push_str(": pricing & GTM deep dive");
        }
        _ => {
            s.push_str("Weekly check-in with ");
            s.push_str(company);
        }
    }
}

/// Appends a meeting summary in Markdown with action items.
fn meeting_summary(rng: &mut Rng, s: &mut String) {
    s.push_str("## Summary\n");
    sentences(rng, s, 2, 5);
    s.push_str("\n\n## Action items\n");
    for _ in 0..rng.between(1, 4) {
        s.push_str("- [ ] ");
        s.push_str(rng.word(TASK_VERBS));
        s.push(' ');
        s.push_str(rng.word(TASK_OBJECTS));
        s.push('\n');
    }
}

/// Appends one transcript segment: one to three spoken sentences.
fn transcript_line(rng: &mut Rng, s: &mut String) {
    for i in 0..rng.between(1, 3) {
        if i > 0 {
            s.push(' ');
        }
        if rng.percent(55) {
            s.push_str(rng.word(SPOKEN));
        } else {
            sentence(rng, s);
        }
    }
}

/// First syllables of company names.
const NAME_PREFIXES: &[&str] = &[
    "Nova", "Velo", "Quanta", "Lumen", "Arbor", "Kinet", "Helio", "Strato", "Mira", "Zephyr",
    "Tera", "Cobalt", "Orbi", "Pulse", "Vanta", "Silva", "Axio", "Flux", "Brio", "Kora", "Nimbus",
    "Sola", "Hexa", "Ardent", "Bloom", "Cinder", "Delta", "Ember", "Fjord", "Gala",
];

/// Second syllables of company names.
const NAME_SUFFIXES: &[&str] = &[
    "byte", "labs", "works", "ly", "fy", "scale", "grid", "flow", "stack", "wave", "path", "mind",
    "forge", "loop", "nest", "bit", "cast", "ware",
];

/// Words that may end a company name.
const NAME_TAILS: &[&str] = &[
    " Labs",
    " AI",
    " Health",
    " Systems",
    " Robotics",
    " Analytics",
    " Energy",
    " Logistics",
    " Pay",
    " Bio",
    " GmbH",
    " Technologies",
];

/// Second words of the "Café …" company.
const CAFE_WORDS: &[&str] = &["Collective", "Connect", "Commerce", "Cloud", "Culture"];

/// Given names of people, some with non-ASCII letters.
const FIRST_NAMES: &[&str] = &[
    "Anna",
    "Ben",
    "Carla",
    "David",
    "Elif",
    "Finn",
    "Greta",
    "Hannah",
    "Ibrahim",
    "Jonas",
    "Katarzyna",
    "Lukas",
    "Mia",
    "Noah",
    "Olivia",
    "Pablo",
    "Quentin",
    "Rosa",
    "Sophie",
    "Tobias",
    "Uma",
    "Viktor",
    "Wen",
    "Yusuf",
    "Zoë",
    "José",
    "Jürgen",
    "Siobhán",
    "Ananya",
    "Kenji",
    "Chloé",
    "Mateo",
];

/// Family names of people, some with non-ASCII letters or an apostrophe.
const LAST_NAMES: &[&str] = &[
    "Keller",
    "Schmidt",
    "Nguyen",
    "Okafor",
    "Rossi",
    "Novak",
    "Silva",
    "Müller",
    "Weiß",
    "Fischer",
    "O'Brien",
    "García",
    "Núñez",
    "Kowalski",
    "Lindqvist",
    "Tanaka",
    "Patel",
    "Dubois",
    "Jensen",
    "Haddad",
    "Costa",
    "Meyer",
    "Sato",
    "Petrov",
];

/// Company labels.
const LABELS: &[&str] = &[
    "fintech",
    "climate",
    "b2b",
    "saas",
    "seed",
    "series-a",
    "series-b",
    "ai",
    "marketplace",
    "healthtech",
    "dach",
    "usa",
    "board-seat",
    "follow-on",
    "deeptech",
    "watchlist",
];

/// Subjects of generated sentences.
const SUBJECTS: &[&str] = &[
    "The team",
    "Management",
    "The CEO",
    "The CFO",
    "Our champion at the company",
    "The sales org",
    "Engineering",
    "The board",
    "The founders",
    "The new VP Sales",
    "Customer success",
    "The product team",
    "Finance",
    "Their largest customer",
    "The lead investor",
];

/// Verbs of generated sentences.
const VERBS: &[&str] = &[
    "expects",
    "has finalized",
    "is reviewing",
    "shipped",
    "wants to revisit",
    "reported",
    "plans to expand",
    "is negotiating",
    "flagged",
    "doubled down on",
    "postponed",
    "presented",
    "asked for help with",
    "is hiring for",
    "cut back on",
    "closed",
];

/// Objects of generated sentences.
const OBJECTS: &[&str] = &[
    "the enterprise pricing model",
    "a new onboarding flow",
    "the EMEA go-to-market plan",
    "the Series B data room",
    "a partnership with a large logistics provider",
    "the hiring pipeline for senior engineers",
    "churn in the mid-market segment",
    "the Q3 board deck",
    "gross margin improvements",
    "the SOC 2 audit",
    "an expansion into the Nordics",
    "the self-serve funnel",
    "usage-based billing",
    "the annual budget",
    "a pilot with two hospital groups",
    "the 2026 product roadmap",
    "net revenue retention",
    "the bridge financing terms",
    "the data platform migration",
    "a reseller agreement in Japan",
];

/// Sentence endings; some carry quotes, backslashes, a tab or non-ASCII text to exercise escaping.
const TAILS: &[&str] = &[
    "",
    "",
    "",
    "",
    "",
    "",
    " by the end of the quarter",
    " after the last board meeting",
    " in Zürich and São Paulo",
    " — numbers look \"solid\" so far",
    " (see \\\\fileserver\\reports\\q3 for details)",
    " according to the latest update",
    " next month",
    " despite a slower summer",
    " with a target of 120% NRR",
    " ahead of the offsite in Kraków",
    " for the naïve-Bayes scoring model",
    " as discussed\twith the partners",
    " before the 'soft' close",
    " – Jürgen is driving this",
];

/// First words of company headlines.
const HEADLINE_ADJECTIVES: &[&str] = &[
    "AI-native",
    "Open-source",
    "Collaborative",
    "Vertical",
    "Real-time",
    "Privacy-first",
    "Carbon-aware",
    "Developer-friendly",
    "Autonomous",
    "Embedded",
];

/// Products named in company headlines.
const HEADLINE_PRODUCTS: &[&str] = &[
    "procurement software",
    "payments infrastructure",
    "observability platform",
    "scheduling assistant",
    "inventory forecasting",
    "compliance automation",
    "energy trading",
    "clinical documentation",
    "fleet telematics",
    "customer data platform",
    "robotic picking",
];

/// Customer groups, used in headlines and as the ICP of value propositions.
const AUDIENCES: &[&str] = &[
    "mid-market manufacturers",
    "European SMBs",
    "hospital networks",
    "B2B SaaS finance teams",
    "logistics operators",
    "independent pharmacies",
    "utilities and grid operators",
    "e-commerce brands",
    "insurance carriers",
    "engineering teams at scale-ups",
];

/// Problems of value propositions.
const PROBLEMS: &[&str] = &[
    "Manual reconciliation takes finance teams days every month",
    "Warehouse staff spend hours searching for stock",
    "Clinicians lose a third of their time to documentation",
    "Grid operators cannot predict local demand spikes",
    "Sales teams work from stale, duplicated CRM data",
    "Compliance evidence lives in spreadsheets and e-mails",
];

/// Solutions of value propositions.
const SOLUTIONS: &[&str] = &[
    "An agent that matches invoices and payments automatically",
    "Real-time location tracking with commodity sensors",
    "Ambient speech recognition that drafts the clinical note",
    "Forecasts at the substation level, updated every 15 minutes",
    "A unified customer graph that deduplicates records continuously",
    "Continuous control monitoring with audit-ready exports",
];

/// First words of task titles and action items.
const TASK_VERBS: &[&str] = &[
    "Review",
    "Prepare",
    "Schedule",
    "Follow up on",
    "Draft",
    "Update",
    "Collect",
    "Share",
    "Validate",
    "Send intro for",
    "Check in about",
    "Summarize",
];

/// What tasks and action items are about.
const TASK_OBJECTS: &[&str] = &[
    "Q3 board deck",
    "hiring plan for sales leadership",
    "pricing experiment results",
    "updated cap table",
    "customer reference calls",
    "the bridge round term sheet",
    "monthly KPI report",
    "SOC 2 readiness checklist",
    "ESOP refresh proposal",
    "follow-on investment memo",
    "key hire candidates for CTO",
    "revenue forecast assumptions",
    "the \"North Star\" metric definition",
    "downside runway scenarios",
];

/// Optional endings of task titles.
const TASK_QUALIFIERS: &[&str] = &[
    "before the partner meeting",
    "with the CFO",
    "for the annual LP report",
    "ahead of the Series B",
    "by Friday",
    "for the investment committee",
    "with both founders",
    "after the board call",
];

/// Seniority prefixes of individual-contributor roles, with their weights.
const SENIORITY: [(&str, u64); 4] = [("", 5), ("Senior ", 4), ("Staff ", 1), ("Junior ", 1)];

/// Individual-contributor engineering roles.
const ENGINEERING_ROLES: &[&str] = &[
    "Backend Engineer",
    "Frontend Engineer",
    "Site Reliability Engineer",
    "Data Engineer",
    "Machine Learning Engineer",
    "Mobile Engineer",
    "Security Engineer",
];

/// Individual-contributor sales roles.
const SALES_ROLES: &[&str] = &[
    "Account Executive",
    "Sales Development Representative",
    "Solutions Engineer",
    "Customer Success Manager",
];

/// Features announced in product updates.
const FEATURES: &[&str] = &[
    "usage-based billing",
    "a Slack integration",
    "SSO and SCIM provisioning",
    "an EU data region",
    "its public API v2",
    "AI-assisted onboarding",
    "offline mode for field teams",
    "a partner marketplace",
];

/// Lead investors named in fundraise announcements.
const INVESTORS: &[&str] = &[
    "Northzone",
    "Index Ventures",
    "Point Nine",
    "Cherry Ventures",
    "Balderton",
    "HV Capital",
    "Atomico",
    "Creandum",
];

/// Publications named in press entries.
const OUTLETS: &[&str] = &[
    "Handelsblatt",
    "TechCrunch",
    "Sifted",
    "Financial Times",
    "Les Échos",
    "t3n",
];

/// Headlines quoted in press entries.
const PRESS_QUOTES: &[&str] = &[
    "The quiet winner of the AI infrastructure race",
    "Ten startups to watch in 2026",
    "How a 40-person team beat the incumbents",
    "Why CFOs are switching",
];

/// Note title templates; `{}` stands for the company name.
const NOTE_TITLES: &[&str] = &[
    "Board meeting prep — {}",
    "Call with CEO re: hiring",
    "{} – Q3 update notes",
    "Reference call notes",
    "Thoughts on the bridge round",
    "Pipeline review with {}",
    "Customer call: \"why we churned\"",
    "Follow-on decision memo",
    "Offsite takeaways",
];

/// Conversational lines of meeting transcripts.
const SPOKEN: &[&str] = &[
    "Thanks everyone for joining.",
    "Can you walk us through the pipeline?",
    "We closed three new logos last month.",
    "Burn is down to roughly 400k a month.",
    "Let's take that offline.",
    "Sorry, you're on mute.",
    "That's a fair point.",
    "I'd push back a little on that.",
    "What does the hiring plan look like for Q4?",
    "We're seeing strong pull from mid-market.",
    "Churn was mostly in the self-serve tier.",
    "Can you share the deck after the call?",
    "Ja, genau – das sehen wir auch so.",
    "Honestly, the \"enterprise\" motion is still early.",
    "Let's circle back next week.",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Returns a fresh scratch directory for one test.
    fn scratch_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("portfolio-generate-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    /// Renders one timestamp to text.
    fn render(ts: Ts) -> String {
        let mut buf = Vec::new();
        push_timestamp(&mut buf, ts);
        String::from_utf8(buf).expect("timestamps are ASCII")
    }

    #[test]
    fn timestamps_render_one_instant_in_several_offsets() {
        let style = |offset_minutes, zulu, digits| Style {
            offset_minutes,
            zulu,
            digits,
        };
        let at = |micros, style| Ts {
            secs: SHARED_INSTANT,
            micros,
            style,
        };
        assert_eq!(render(at(0, style(0, true, 3))), "2026-03-01T10:00:00.000Z");
        assert_eq!(
            render(at(0, style(120, false, 3))),
            "2026-03-01T12:00:00.000+02:00"
        );
        assert_eq!(
            render(at(0, style(-300, false, 0))),
            "2026-03-01T05:00:00-05:00"
        );
        assert_eq!(
            render(at(250_000, style(330, false, 6))),
            "2026-03-01T15:30:00.250000+05:30"
        );
        assert_eq!(
            render(at(0, style(0, false, 0))),
            "2026-03-01T10:00:00+00:00"
        );
    }

    #[test]
    fn calendar_conversion_round_trips() {
        for days in days_from_civil(2022, 12, 1)..days_from_civil(2027, 2, 1) {
            let (year, month, day) = civil_from_days(days);
            assert_eq!(days_from_civil(year, month, day), days);
        }
        assert_eq!(civil_from_days(days_from_civil(2024, 2, 29)), (2024, 2, 29));
    }

    #[test]
    fn escaped_strings_parse_back_unchanged() {
        let text = "quote \" backslash \\ newline \n tab \t bell \u{7} Zürich 🚀";
        let mut buf = Vec::new();
        push_escaped(&mut buf, text);
        let parsed: String = serde_json::from_slice(&buf).expect("valid JSON string");
        assert_eq!(parsed, text);
    }

    #[test]
    fn hundredths_drop_trailing_zeros() {
        let mut json = Json::new();
        json.begin_array();
        for value in [0, 5, 50, 1_250, 1_205, -1_000, 2_736_700_000] {
            json.hundredths(value);
        }
        json.end_array();
        assert_eq!(
            String::from_utf8(json.buf).expect("ASCII"),
            "[0,0.05,0.5,12.5,12.05,-10,27367000]"
        );
    }

    #[test]
    fn small_is_valid_deterministic_and_uses_the_demo_keys() {
        let first = scratch_dir("small-a");
        let second = scratch_dir("small-b");
        let files = generate(&first, Scale::Small, 42).expect("generate");
        generate(&second, Scale::Small, 42).expect("generate again");
        let keys: Vec<&str> = files.iter().map(|f| f.api_key.as_str()).collect();
        assert_eq!(keys, ["cura_demo_acme_key", "cura_demo_globex_key"]);
        for file in &files {
            let bytes = fs::read(&file.path).expect("read snapshot");
            let name = file.path.file_name().expect("file name");
            assert_eq!(fs::read(second.join(name)).expect("read copy"), bytes);
            assert_eq!(file.bytes, bytes.len() as u64);
            let doc: serde_json::Value = serde_json::from_slice(&bytes).expect("valid JSON");
            assert_eq!(doc["format_version"], 1);
            assert_eq!(doc["workspace"]["id"], file.workspace_id.as_str());
            assert_eq!(
                doc["api_keys"][0]["sha256"],
                sha256_hex(&file.api_key).as_str()
            );
            let count = |name: &str| doc[name].as_array().map_or(0, Vec::len);
            assert!(count("companies") >= 8);
            assert!(count("tasks") >= 120);
            assert!(count("feed") >= 60);
            let total: usize = [
                "companies",
                "tasks",
                "roles",
                "feed",
                "notes",
                "metrics",
                "meetings",
                "meeting_notes",
            ]
            .into_iter()
            .map(count)
            .sum();
            assert_eq!(file.records, total as u64);
        }
        let leftovers = fs::read_dir(&first)
            .expect("list output")
            .filter_map(Result::ok)
            .filter(|entry| entry.file_name().to_string_lossy().ends_with(".tmp"))
            .count();
        assert_eq!(leftovers, 0);
        let _ = fs::remove_dir_all(&first);
        let _ = fs::remove_dir_all(&second);
    }

    #[test]
    fn other_seeds_give_other_data_and_random_keys() {
        let dir = scratch_dir("small-seed");
        let files = generate(&dir, Scale::Small, 7).expect("generate");
        for file in &files {
            let secret = file.api_key.strip_prefix("cura_").expect("key prefix");
            assert_eq!(secret.len(), 32);
            assert!(secret.bytes().all(|b| b.is_ascii_hexdigit()));
        }
        let reference = scratch_dir("small-seed-42");
        generate(&reference, Scale::Small, 42).expect("generate");
        assert_ne!(
            fs::read(dir.join("acme.json")).expect("read"),
            fs::read(reference.join("acme.json")).expect("read")
        );
        let _ = fs::remove_dir_all(&dir);
        let _ = fs::remove_dir_all(&reference);
    }
}

//! Synthetic snapshot generator behind `portfolio-replica generate`.
//!
//! The generator writes realistic workspace snapshots in the file format of
//! docs/snapshot-format.md: one JSON object per workspace, with records in the API's
//! own `{ "id", "attributes" }` shape. Every random choice comes from a small
//! xoshiro256** generator seeded from `(seed, workspace)`, and no
//! floating-point arithmetic is involved, so a given `(scale, seed)` produces
//! byte-identical files on every machine (as long as this crate's code and
//! word lists are unchanged).
//!
//! - `small` writes two workspaces, `acme.json` and `globex.json`, of a few
//!   hundred kilobytes each, so a demo can show workspace isolation. With the
//!   default seed 42 their keys are `cura_demo_acme_key` and
//!   `cura_demo_globex_key`.
//! - `medium` writes `medium.json`, about 100 MB.
//! - `large` writes `large.json`, about 1 GB, with more than 1,100,000 tasks
//!   and more than 300,000 feed entries.
//! - `micro`, `tiny` and `midsize` write a fleet: `--workspaces N` files of
//!   about 10 KB, 100 KB and 5 MB (`tiny-000000.json`, workspace
//!   `ws-tiny-000000`, ...), each with its own key, listed in `keys.tsv`
//!   beside them (workspace id, file name, key), for measurements over many
//!   workspaces (`midsize`: the few heavy ones beside many small ones). The
//!   files are written on every core.
//!
//! [`TextStyle::Escapes`] appends to every free-text field (titles, descriptions,
//! contents, transcript text) a fragment full of what JSON escapes and what
//! is not ASCII: quotes, backslashes, control characters as `\u` escapes,
//! non-ASCII both raw and as `\u` escapes (surrogate pairs for emoji), CJK,
//! emoji and combining marks. The fragments come from a stream of their own,
//! so everything else is what [`TextStyle::Plain`] writes.
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
//!
//! # Layout
//!
//! - this file: the public API ([`generate`], [`Scale`], [`GeneratedFile`]),
//!   the API key and the header, and writing one workspace to its file;
//! - `plan`: the workspaces of each scale and how many records they hold;
//! - `escapes`: the fragments of `--text escapes`;
//! - `rng`: the random streams; `timestamp` and `clock`: instants, how they
//!   are written, and the ties between them; `json`: the streaming writer;
//!   `context`: what every collection writer shares;
//! - `world`: the companies and people drawn first; `words` and `text`: the
//!   word lists and the prose made of them;
//! - one file per collection: `companies`, `tasks`, `roles`, `feed`, `notes`,
//!   `metrics`, and `meetings` (with `meeting_notes`), written in that order.

/// The domain and the file format the generator writes.
use portfolio_domain::{snapshot, store};
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

mod clock;
mod companies;
mod context;
mod escapes;
mod feed;
mod json;
mod meetings;
mod metrics;
mod notes;
mod plan;
mod rng;
mod roles;
mod tasks;
mod text;
mod timestamp;
mod words;
mod world;

use companies::write_companies;
use context::WriterContext;
use feed::write_feed;
use json::Json;
use meetings::{write_meeting_notes, write_meetings};
use metrics::write_metrics;
use notes::write_notes;
use plan::{WorkspaceSpec, workspaces};
use rng::{Rng, stream_seed};
use roles::write_roles;
use tasks::write_tasks;
use world::World;

use crate::store::key;

/// How much data `generate` writes. The command line parses it as it is
/// (`clap::ValueEnum`, these comments its help), so the scales are listed
/// once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scale {
    /// A fleet of workspaces of about 10 KB each (`--workspaces`).
    Micro,
    /// A fleet of workspaces of about 100 KB each (`--workspaces`).
    Tiny,
    /// Two demo workspaces of a few hundred kilobytes each.
    Small,
    /// A fleet of workspaces of about 5 MB each (`--workspaces`).
    Midsize,
    /// One workspace of about 100 MB.
    Medium,
    /// One workspace of about 1 GB.
    Large,
}

impl Scale {
    /// Whether the scale writes a fleet (`--workspaces N` numbered files and
    /// `keys.tsv`) rather than fixed workspaces.
    pub fn is_fleet(self) -> bool {
        matches!(self, Scale::Micro | Scale::Tiny | Scale::Midsize)
    }
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

/// What free text is made of (parsed by the command line as it is).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TextStyle {
    /// The generator's prose.
    #[default]
    Plain,
    /// Prose followed by fragments full of escapes and non-ASCII.
    Escapes,
}

/// Everything `generate` can be asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    pub scale: Scale,
    pub seed: u64,
    /// How many workspaces a fleet scale (`micro`, `tiny`, `midsize`) writes; `None`
    /// for one. The other scales have fixed workspaces and refuse it.
    pub workspaces: Option<u64>,
    pub text: TextStyle,
}

impl Options {
    /// The options of `scale` and `seed` with plain text and the scale's own workspaces.
    pub fn new(scale: Scale, seed: u64) -> Self {
        Self {
            scale,
            seed,
            workspaces: None,
            text: TextStyle::Plain,
        }
    }
}

/// The name of the file beside a fleet that lists each workspace's id, file and key.
pub const KEYS_FILE: &str = "keys.tsv";

/// Writes the snapshots for `scale` into `out` (created if missing) and returns what it wrote.
pub fn generate(out: &Path, scale: Scale, seed: u64) -> io::Result<Vec<GeneratedFile>> {
    generate_with(out, &Options::new(scale, seed))
}

/// Writes the snapshots `options` ask for into `out` (created if missing),
/// and for a fleet `keys.tsv`; returns what it wrote, in workspace order.
pub fn generate_with(out: &Path, options: &Options) -> io::Result<Vec<GeneratedFile>> {
    let fleet = options.scale.is_fleet();
    if options.workspaces.is_some() && !fleet {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--workspaces needs --scale micro, tiny or midsize (the other scales have fixed workspaces)",
        ));
    }
    if options.workspaces == Some(0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--workspaces must be at least 1",
        ));
    }
    fs::create_dir_all(out)?;
    let specs = workspaces(options.scale, options.workspaces.unwrap_or(1));
    let files = write_all(out, &specs, options)?;
    if fleet {
        write_keys(out, &files)?;
    }
    Ok(files)
}

/// Writes every workspace, on as many threads as there are cores (and
/// workspaces), and returns the files in the order of `specs`.
fn write_all(
    out: &Path,
    specs: &[WorkspaceSpec],
    options: &Options,
) -> io::Result<Vec<GeneratedFile>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(specs.len());
    if threads <= 1 {
        return specs
            .iter()
            .map(|spec| write_workspace(out, spec, options))
            .collect();
    }
    // Workspaces are handed out one at a time, so threads that draw small
    // ones keep busy; each result lands in its workspace's slot.
    let next = AtomicUsize::new(0);
    let mut slots: Vec<Option<io::Result<GeneratedFile>>> = Vec::new();
    slots.resize_with(specs.len(), || None);
    let done: Vec<Vec<(usize, io::Result<GeneratedFile>)>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(spec) = specs.get(i) else { break };
                        let result = write_workspace(out, spec, options);
                        let failed = result.is_err();
                        mine.push((i, result));
                        if failed {
                            // Stop handing out work: the whole run fails anyway.
                            next.store(specs.len(), Ordering::Relaxed);
                            break;
                        }
                    }
                    mine
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    for (i, result) in done.into_iter().flatten() {
        slots[i] = Some(result);
    }
    // A workspace is left unwritten only after another failed: skipping the
    // empty slots reaches that failure.
    let mut files = Vec::with_capacity(specs.len());
    for slot in slots.into_iter().flatten() {
        files.push(slot?);
    }
    Ok(files)
}

/// Writes `keys.tsv`: a header line, then `workspace<TAB>file<TAB>key` per
/// workspace, file names relative to the directory; through a temporary
/// file, like the snapshots.
fn write_keys(out: &Path, files: &[GeneratedFile]) -> io::Result<()> {
    let mut text = String::from("workspace\tfile\tkey\n");
    for file in files {
        let name = file
            .path
            .file_name()
            .map(|name| name.to_string_lossy())
            .unwrap_or_default();
        text.push_str(&format!(
            "{}\t{name}\t{}\n",
            file.workspace_id, file.api_key
        ));
    }
    let tmp = out.join(format!("{KEYS_FILE}.tmp"));
    fs::write(&tmp, text)?;
    fs::rename(&tmp, out.join(KEYS_FILE))
}

/// Returns the lower-case name of `scale` as used in the snapshot version.
fn scale_name(scale: Scale) -> &'static str {
    match scale {
        Scale::Micro => "micro",
        Scale::Tiny => "tiny",
        Scale::Small => "small",
        Scale::Midsize => "midsize",
        Scale::Medium => "medium",
        Scale::Large => "large",
    }
}

/// Returns the plain API key of a workspace.
///
/// The small demo workspaces get memorable keys with the default seed 42;
/// every other combination gets 32 hex digits drawn from the seed and the
/// workspace id, so every workspace of a fleet has a key of its own.
fn api_key(spec: &WorkspaceSpec, scale: Scale, seed: u64) -> String {
    if scale == Scale::Small && seed == 42 {
        return format!("cura_demo_{}_key", spec.file_stem);
    }
    let mut rng = Rng::new(stream_seed(seed, &spec.id, "api-key"));
    format!("cura_{:016x}{:016x}", rng.next_u64(), rng.next_u64())
}

/// Writes one workspace to `NAME.json.tmp`, renames it into place and describes the result.
fn write_workspace(
    out: &Path,
    spec: &WorkspaceSpec,
    options: &Options,
) -> io::Result<GeneratedFile> {
    let Options { scale, seed, .. } = *options;
    let path = out.join(format!("{}.json", spec.file_stem));
    let tmp = out.join(format!("{}.json.tmp", spec.file_stem));
    let key = api_key(spec, scale, seed);
    let header = header_fields(options, &key);
    let records = match write_to(&tmp, spec, options, &header) {
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
        workspace_id: spec.id.clone(),
        api_key: key,
        bytes,
        records,
    })
}

/// The header of `spec`'s snapshot, whose key is `key`.
fn header_fields(options: &Options, key: &str) -> HeaderFields {
    let escapes = match options.text {
        TextStyle::Plain => "",
        TextStyle::Escapes => "-escapes",
    };
    HeaderFields {
        version: format!(
            "2026-11-22T10:00:00.000Z#{}-{}{escapes}",
            options.seed,
            scale_name(options.scale)
        ),
        key_sha256: key::to_hex(&key::hash_key(key)),
    }
}

/// The snapshot of the first workspace `options` ask for, in memory: the
/// bytes [`generate_with`] writes to its file. For tests that read
/// generated records without a file (the domain's, which does no IO).
pub fn snapshot_bytes(options: &Options) -> Vec<u8> {
    let spec = &workspaces(options.scale, options.workspaces.unwrap_or(1))[0];
    let key = api_key(spec, options.scale, options.seed);
    let mut bytes = Vec::new();
    write_snapshot(&mut bytes, spec, options, &header_fields(options, &key))
        .expect("writing to memory cannot fail");
    bytes
}

/// Creates `tmp`, writes the snapshot through a buffer and returns the record count.
fn write_to(
    tmp: &Path,
    spec: &WorkspaceSpec,
    options: &Options,
    header: &HeaderFields,
) -> io::Result<u64> {
    // A fleet's files are small: a megabyte of buffer for each would only
    // cost page faults.
    let capacity = if spec.plan.tasks < 1_000 {
        64 << 10
    } else {
        1 << 20
    };
    let mut writer = BufWriter::with_capacity(capacity, File::create(tmp)?);
    let records = write_snapshot(&mut writer, spec, options, header)?;
    // `into_inner` flushes and reports a failed final write, which a plain drop would hide.
    writer
        .into_inner()
        .map_err(io::IntoInnerError::into_error)?;
    Ok(records)
}

/// The workspace-level fields written before the collections.
struct HeaderFields {
    version: String,
    key_sha256: String,
}

/// Writes one complete snapshot object and returns the number of records in it.
fn write_snapshot<W: Write>(
    w: &mut W,
    spec: &WorkspaceSpec,
    options: &Options,
    header: &HeaderFields,
) -> io::Result<u64> {
    let plan = &spec.plan;
    let seed = options.seed;
    let mut ctx = WriterContext::new(Rng::new(stream_seed(seed, &spec.id, "data")));
    if options.text == TextStyle::Escapes {
        ctx.escapes = Some(Rng::new(stream_seed(seed, &spec.id, "escapes")));
    }
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
fn write_header(json: &mut Json, spec: &WorkspaceSpec, header: &HeaderFields) {
    json.begin_object();
    json.key_line("format_version");
    json.uint(1);
    json.key_line("version");
    json.string(&header.version);
    json.key_line("workspace");
    json.begin_object();
    json.str_field("id", &spec.id);
    json.str_field("name", spec.name);
    json.end_object();
    json.key_line("api_keys");
    json.begin_array();
    json.begin_object();
    json.str_field("sha256", &header.key_sha256);
    json.str_field("label", spec.key_label);
    json.end_object();
    json.end_array();
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Returns a fresh scratch directory for one test.
    fn scratch_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("portfolio-generate-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    /// Adds the control characters of every string in `value` to `found`.
    fn control_characters(value: &serde_json::Value, found: &mut BTreeSet<char>) {
        match value {
            serde_json::Value::String(text) => {
                found.extend(text.chars().filter(|c| c.is_control()))
            }
            serde_json::Value::Array(items) => {
                items
                    .iter()
                    .for_each(|item| control_characters(item, found));
            }
            serde_json::Value::Object(members) => {
                for (name, item) in members {
                    found.extend(name.chars().filter(|c| c.is_control()));
                    control_characters(item, found);
                }
            }
            _ => {}
        }
    }

    /// Generated text holds no control character but newline and tab, so
    /// serde_json's escaping writes what the generator's own escaping did
    /// (`json::Json::string`).
    #[test]
    fn text_holds_no_control_characters_but_newline_and_tab() {
        for seed in [42, 7] {
            let dir = scratch_dir(&format!("control-{seed}"));
            let mut found = BTreeSet::new();
            for file in generate(&dir, Scale::Small, seed).expect("generate") {
                let bytes = fs::read(&file.path).expect("read snapshot");
                let doc: serde_json::Value = serde_json::from_slice(&bytes).expect("valid JSON");
                control_characters(&doc, &mut found);
            }
            assert_eq!(found, BTreeSet::from(['\t', '\n']), "seed {seed}");
            let _ = fs::remove_dir_all(&dir);
        }
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
                key::to_hex(&key::hash_key(&file.api_key)).as_str()
            );
            let count = |name: &str| doc[name].as_array().map_or(0, Vec::len);
            assert!(count("companies") >= 8);
            assert!(count("tasks") >= 120);
            assert!(count("feed") >= 60);
            let total: usize = crate::store::Collection::ALL
                .iter()
                .map(|c| count(c.name()))
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

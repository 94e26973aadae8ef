//! Refusing a snapshot whose load would not fit in memory
//! (`--memory-limit`, or else the cgroup's limit).
//!
//! Before a file is built, its footprint is estimated from its size (for a
//! `.json.gz`, the uncompressed size its trailer records) and added to
//! what the [`Ledger`] counts: the process itself ([`PROCESS_BYTES`]), the
//! estimate of every dataset serving (the one it would replace included,
//! since that one serves until the new one is published), and the loads
//! admitted and not yet settled. Estimates, not the resident memory of the
//! moment: the same files and limit are refused the same way at every
//! start, whatever a first scan's transient peak happens to be. If the sum
//! is over the limit the file is refused like a bad file: the previous
//! version keeps serving, the process is never pushed into the OOM killer
//! by a load, the refused workspace's keys are answered with 503 (its
//! claims are read without building it, `snapshot::claims`), and it is
//! read again once memory frees.
//!
//! Under a memory budget the ledger reserves the budget and the byte bound
//! of loads on demand in flight (`bound.rs`) from the start, and a hollow
//! dataset (one the catalog holds without its records) counts only its
//! catalog cost ([`CATALOG_BYTES`]): its records are the budget's, not its
//! own, so the whole data set may be larger than the limit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use rustc_hash::FxHashMap;

use crate::serve::build::BUILD_FACTOR;
use crate::storage::SnapshotFile;
use portfolio_domain::snapshot::SnapshotError;
use portfolio_domain::store::Dataset;

/// Bytes the gzip fragments of a precompressed dataset take per byte of
/// JSON, made after the build while the dataset serves. Measured at 0.42
/// on the `medium` dataset (BENCHMARKS.md, "gzip by default").
const FRAGMENT_FACTOR: (u64, u64) = (5, 10);

/// The process's own memory besides its datasets (code, runtime, buffers,
/// the catalog), counted as one figure so that decisions do not depend on
/// the moment: a replica with no workspace holds 10 to 20 MiB.
pub const PROCESS_BYTES: u64 = 32 << 20;

/// What a workspace costs in the catalog under a memory budget, its
/// records elsewhere: its hollow dataset (ids, version, counts, a few
/// hundred bytes), its entry in the key map and the scan's per-file state
/// (status, fingerprint, kept copy). About 7 KiB in all: the slope of RSS
/// at ready between 2,004 and 8,000 workspaces under a budget
/// (BENCHMARKS.md, "Sizing"; `MODE=calibrate scripts/sizing-check.sh`);
/// each API key adds its hash in two maps.
pub const CATALOG_BYTES: u64 = 7 << 10;

/// What one API key adds to a workspace's catalog cost.
const CATALOG_KEY_BYTES: u64 = 128;

/// The catalog cost of a hollow `dataset`.
pub fn catalog_bytes(dataset: &Dataset) -> u64 {
    CATALOG_BYTES + CATALOG_KEY_BYTES * dataset.key_hashes.len() as u64
}

/// The memory budget of loads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryLimit {
    bytes: Option<u64>,
}

impl MemoryLimit {
    /// No limit.
    pub fn none() -> MemoryLimit {
        MemoryLimit { bytes: None }
    }

    /// `bytes` if given, else the cgroup's limit when there is one.
    pub fn given_or_cgroup(bytes: Option<u64>) -> MemoryLimit {
        MemoryLimit {
            bytes: bytes.or_else(cgroup_limit),
        }
    }

    pub fn bytes(&self) -> Option<u64> {
        self.bytes
    }

    /// Bytes free under the limit when the ledger counts `committed`.
    pub fn free(&self, committed: u64) -> u64 {
        self.bytes
            .map_or(u64::MAX, |limit| limit.saturating_sub(committed))
    }

    /// What building `file` (of `len` bytes on disk) takes at its peak,
    /// with its gzip fragments if it is to be `precompressed`: 0 without a
    /// limit, since nothing counts then.
    pub fn need(&self, file: &SnapshotFile, len: u64, precompressed: bool) -> u64 {
        match self.bytes {
            Some(_) => footprint(file, len, precompressed),
            None => 0,
        }
    }

    /// Why a build that `need`s this many bytes must not start next to
    /// what `ledger` counts; logged with the same figures.
    pub fn refusal(
        &self,
        name: &str,
        need: u64,
        ledger: &Ledger,
        precompressed: bool,
    ) -> Option<SnapshotError> {
        let limit = self.bytes?;
        let committed = ledger.committed();
        if committed.saturating_add(need) <= limit {
            return None;
        }
        let mib = |b: u64| b.div_ceil(1 << 20);
        // Under a budget every file is still built once to be validated,
        // next to the budget the ledger reserves: a smaller budget leaves
        // it room, a budget that is already set is no advice.
        let advice = if ledger.budgeted {
            "or raise the limit, or lower --memory-budget to leave builds more of it"
        } else {
            "or raise the limit, or set --memory-budget to serve more data than memory"
        };
        let message = format!(
            "not loaded: building it needs about {} MiB{} next to the {} MiB already counted (the process, the workspaces loaded, and with --memory-budget the budget and its loads in flight), over the memory limit of {} MiB (--memory-limit, or the cgroup's limit); it is read again when memory frees, {advice}",
            mib(need),
            if precompressed {
                " with its gzip fragments (--precompress on)"
            } else {
                ""
            },
            mib(committed),
            mib(limit)
        );
        tracing::warn!(
            file = %name,
            need_bytes = need,
            counted_bytes = committed,
            limit_bytes = limit,
            "snapshot refused: {message}"
        );
        Some(SnapshotError::new(name, message))
    }
}

/// What counts against the limit, in the same estimates on both sides (a
/// file's [`MemoryLimit::need`]): the datasets serving, by fingerprint,
/// and the loads admitted and not yet settled. Kept on the reloader
/// thread's scan; `/metrics` never reads it.
#[derive(Default)]
pub struct Ledger {
    serving: Mutex<FxHashMap<u64, u64>>,
    serving_total: AtomicU64,
    pending: AtomicU64,
    /// Under a budget: the budget and the bound of loads on demand in
    /// flight, reserved whatever is resident at the moment.
    reserved: u64,
    /// Under a budget: hollow datasets count their catalog cost.
    budgeted: bool,
}

impl Ledger {
    fn serving(&self) -> MutexGuard<'_, FxHashMap<u64, u64>> {
        self.serving.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The ledger of a replica with a memory budget, which reserves
    /// `reserved` bytes (the budget and its loads in flight).
    pub fn budgeted(reserved: u64) -> Ledger {
        Ledger {
            reserved,
            budgeted: true,
            ..Ledger::default()
        }
    }

    /// What is counted now.
    pub fn committed(&self) -> u64 {
        PROCESS_BYTES
            + self.reserved
            + self.serving_total.load(Ordering::Relaxed)
            + self.pending.load(Ordering::Relaxed)
    }

    /// A load of `need` bytes starts.
    pub fn admit(&self, need: u64) {
        self.pending.fetch_add(need, Ordering::Relaxed);
    }

    /// A load admitted for `need` was settled: its `dataset` (if it loaded)
    /// is counted as serving until [`Ledger::published`] says otherwise.
    pub fn settled(&self, need: u64, dataset: Option<&Dataset>) {
        self.pending.fetch_sub(need, Ordering::Relaxed);
        if let Some(dataset) = dataset.filter(|d| !d.is_hollow()) {
            self.serving().insert(dataset.fingerprint, need);
        }
    }

    /// What serves now: the total counts these, and forgets the rest.
    /// Under a budget a hollow one counts its catalog cost, not the build
    /// it was validated with: its records went when it went hollow.
    pub fn published<'a>(&self, serving: impl Iterator<Item = &'a Dataset>) {
        let mut counted = self.serving();
        let mut kept = FxHashMap::default();
        for dataset in serving {
            let need = counted.remove(&dataset.fingerprint);
            if self.budgeted && dataset.is_hollow() {
                kept.insert(dataset.fingerprint, catalog_bytes(dataset));
            } else if let Some(need) = need {
                kept.insert(dataset.fingerprint, need);
            }
        }
        self.serving_total
            .store(kept.values().sum(), Ordering::Relaxed);
        *counted = kept;
    }
}

/// Why a size flag (`--memory-limit`, `--memory-budget`) is not a size.
/// Clap prints it after "invalid value" and the flag; `text` is the value
/// trimmed. Typed so that the parser's boundary says what can be wrong;
/// the messages are the ones users saw.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("{text:?} is not a size: expected bytes like 2147483648 or 2G")]
    NotASize { text: String },
    /// A decimal such as `1.5G`: said apart from a wrong unit, since the
    /// unit is fine and only the number needs rewriting.
    #[error("{text:?}: sizes take whole numbers; write {suggestion} instead")]
    Fraction { text: String, suggestion: String },
    #[error("{text:?}: unknown unit (use K, M, G or T)")]
    UnknownUnit { text: String },
    /// Zero, or more bytes than a `u64` holds.
    #[error("{text:?} is not a usable size: more than 0 bytes, and less than 16 EiB")]
    Unusable { text: String },
}

/// The binary unit letters a size takes, with their power of two.
const UNITS: [(&str, u32); 5] = [("", 0), ("K", 10), ("M", 20), ("G", 30), ("T", 40)];

/// Parses a size flag (`--memory-limit`, `--memory-budget`: the one parser
/// of both): bytes, or a whole number with K, M, G or T (powers of 1024,
/// an optional `i` and `B`: `512M`, `2GiB`).
pub fn parse_bytes(text: &str) -> Result<u64, SizeError> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let shift = |unit: &str| {
        let unit = unit.trim().to_ascii_uppercase();
        let letter = unit.trim_end_matches('B').trim_end_matches('I').to_owned();
        UNITS.iter().find(|(u, _)| *u == letter).map(|&(_, s)| s)
    };
    if let Some(fraction) = unit.strip_prefix('.') {
        let decimals = fraction
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(fraction.len());
        let (decimals, unit) = fraction.split_at(decimals);
        if let (Ok(value), Some(shift)) =
            (format!("{number}.{decimals}").parse::<f64>(), shift(unit))
        {
            return Err(SizeError::Fraction {
                text: text.to_owned(),
                suggestion: whole_size(value, shift),
            });
        }
    }
    let number: u64 = number.parse().map_err(|_| SizeError::NotASize {
        text: text.to_owned(),
    })?;
    let shift = shift(unit).ok_or_else(|| SizeError::UnknownUnit {
        text: text.to_owned(),
    })?;
    number
        .checked_mul(1 << shift)
        .filter(|&b| b > 0)
        .ok_or_else(|| SizeError::Unusable {
            text: text.to_owned(),
        })
}

/// `value` units of `1 << shift` bytes as a whole number of the largest
/// smaller unit that holds it exactly (`1.5` G is `1536MiB`), else as
/// bytes rounded.
fn whole_size(value: f64, shift: u32) -> String {
    let bytes = value * (1u64 << shift) as f64;
    UNITS
        .iter()
        .rev()
        .filter(|&&(_, s)| s < shift)
        .find_map(|&(unit, s)| {
            let n = bytes / (1u64 << s) as f64;
            (n.fract() == 0.0 && n >= 1.0).then(|| match unit {
                "" => format!("{n}"),
                unit => format!("{n}{unit}iB"),
            })
        })
        .unwrap_or_else(|| format!("{}", bytes.round()))
}

/// What building `file` will take at its peak.
fn footprint(file: &SnapshotFile, len: u64, precompressed: bool) -> u64 {
    let json = json_bytes(file, len);
    let build = json.saturating_mul(BUILD_FACTOR.0) / BUILD_FACTOR.1;
    let fragments = json.saturating_mul(FRAGMENT_FACTOR.0) / FRAGMENT_FACTOR.1;
    build + if precompressed { fragments } else { 0 }
}

/// The JSON's size: `len`, or for a `.json.gz` the uncompressed size.
pub fn json_bytes(file: &SnapshotFile, len: u64) -> u64 {
    if file.is_gzip() {
        // The trailer holds the uncompressed size modulo 4 GiB; JSON
        // compresses 5 to 10 times, so a smaller figure has wrapped.
        gzip_size(file)
            .filter(|&size| size >= len)
            .unwrap_or(len.saturating_mul(8))
    } else {
        len
    }
}

/// The uncompressed size a gzip file's trailer records (ISIZE), read from
/// the file as opened (a FIFO under its name cannot stall the scan).
fn gzip_size(file: &SnapshotFile) -> Option<u64> {
    Some(u64::from(u32::from_le_bytes(file.trailer()?)))
}

/// The process's resident memory now (VmRSS).
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The memory limit of the process's cgroup (v2 `memory.max`, or v1
/// `memory.limit_in_bytes`), if it has one.
fn cgroup_limit() -> Option<u64> {
    let v2 = std::fs::read_to_string("/sys/fs/cgroup/memory.max").ok();
    let v1 = || std::fs::read_to_string("/sys/fs/cgroup/memory/memory.limit_in_bytes").ok();
    let text = v2.or_else(v1)?;
    let bytes: u64 = text.trim().parse().ok()?;
    // v1 writes "no limit" as a huge number.
    (bytes < 1 << 60).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// A file whose build fits the limit is refused if its gzip fragments
    /// would not fit too; the decision depends on what the ledger counts,
    /// not on the moment.
    #[test]
    fn precompression_counts_against_the_limit() {
        const GIB: u64 = 1 << 30;
        let file = SnapshotFile::named(Path::new("/nonexistent/big.json"), "big.json");
        let limit = MemoryLimit {
            bytes: Some(PROCESS_BYTES + 6 * GIB),
        };
        let ledger = Ledger::default();
        // A 4 GiB file: the build (5.2 GiB) fits, the build and its
        // fragments (7.2 GiB) do not.
        let bare = limit.need(&file, 4 * GIB, false);
        let with_fragments = limit.need(&file, 4 * GIB, true);
        assert!(limit.refusal("big.json", bare, &ledger, false).is_none());
        let refused = limit
            .refusal("big.json", with_fragments, &ledger, true)
            .expect("refused with its fragments");
        assert!(
            refused.to_string().contains("with its gzip fragments"),
            "{refused}"
        );
        ledger.admit(bare);
        assert!(
            limit.refusal("big.json", bare, &ledger, false).is_some(),
            "a second build of the same size does not fit next to the first"
        );
        ledger.settled(bare, None);
        assert!(limit.refusal("big.json", bare, &ledger, false).is_none());
        assert_eq!(MemoryLimit::none().need(&file, 4 * GIB, true), 0);
        assert!(refused.to_string().contains("set --memory-budget"));
        // With a budget set, the advice is not to set one.
        let budgeted = Ledger::budgeted(GIB);
        let refused = limit
            .refusal("big.json", with_fragments, &budgeted, true)
            .expect("refused");
        let said = refused.to_string();
        assert!(!said.contains("set --memory-budget"), "{said}");
        assert!(said.contains("lower --memory-budget"), "{said}");
    }

    /// Under a budget, the budget and its loads in flight are reserved
    /// from the start, and a workspace gone hollow counts its catalog
    /// cost, not the build it was validated with.
    #[test]
    fn under_a_budget_a_hollow_workspace_counts_its_catalog_cost() {
        let hollow = Dataset::hollow_of(portfolio_domain::store::Meta {
            workspace_id: "ws-a".into(),
            workspace_name: None,
            version: "v1".into(),
            key_hashes: Vec::new(),
            limits: None,
            content_hash: 1,
        });
        let ledger = Ledger::budgeted(5 << 20);
        assert_eq!(ledger.committed(), PROCESS_BYTES + (5 << 20));
        // Validated at 1 MiB, then gone hollow.
        ledger.admit(1 << 20);
        ledger.settled(1 << 20, None);
        ledger.serving().insert(hollow.fingerprint, 1 << 20);
        ledger.published(std::iter::once(&hollow));
        assert_eq!(
            ledger.committed(),
            PROCESS_BYTES + (5 << 20) + CATALOG_BYTES
        );
        // Without a budget nothing is reserved, and a hollow dataset (a
        // snapshot refused for memory) was never counted.
        let plain = Ledger::default();
        plain.published(std::iter::once(&hollow));
        assert_eq!(plain.committed(), PROCESS_BYTES);
    }

    #[test]
    fn sizes_take_binary_units() {
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("2GiB"), Ok(2 << 30));
        assert_eq!(parse_bytes("3gb"), Ok(3 << 30));
        for bad in ["", "0", "M", "12Q", "-1", "1.5G", "0.5"] {
            assert!(parse_bytes(bad).is_err(), "{bad:?}");
        }
        // The messages users saw when the errors were text.
        let message = |text| parse_bytes(text).unwrap_err().to_string();
        assert_eq!(message(" 2X "), "\"2X\": unknown unit (use K, M, G or T)");
        assert_eq!(
            message("G"),
            "\"G\" is not a size: expected bytes like 2147483648 or 2G"
        );
        assert_eq!(
            message("0"),
            "\"0\" is not a usable size: more than 0 bytes, and less than 16 EiB"
        );
        // A decimal is refused for being one, with the whole number to write.
        for (text, suggestion) in [
            ("1.5G", "1536MiB"),
            ("1.5GiB", "1536MiB"),
            ("0.5m", "512KiB"),
            ("2.25K", "2304"),
            ("1.0001K", "1024"),
        ] {
            assert_eq!(
                message(text),
                format!("{text:?}: sizes take whole numbers; write {suggestion} instead"),
            );
        }
    }
}

//! Which eviction policy for the workspace memory budget? A measurement.
//!
//! The replica is to hold workspaces (about 100 KB of JSON each, resident
//! weight ≈ 1.5 × that size) in a `quick_cache::sync::Cache` with one shard,
//! a byte weighter and capacity = the budget (256 MiB by default). This
//! example replays synthetic client sessions against that cache, against
//! the same cache with other `hot_allocation` / `ghost_allocation` values,
//! against a plain weighted LRU and a plain weighted FIFO written here, and
//! against a static oracle (the workspaces with the most requests per byte,
//! chosen knowing the popularity law: a reference, not a policy), and
//! prints a markdown table of hit ratios. No server, no IO; seeded, so the
//! numbers repeat.
//!
//! The workload:
//! - N = 20,000 workspaces; JSON sizes log-normal (median 90 KB, σ = 0.6),
//!   redrawn until within [30 KB, 300 KB]; weight = 1.5 × size.
//! - A session picks a workspace from a Zipf law (s = 1.0; also 0.8 and
//!   1.2) over the N workspaces (ranks shuffled over ids, so popularity
//!   and size are independent), then makes 20 requests to it; each request
//!   is one cache lookup, and a miss inserts the workspace.
//! - "scan": the same Zipf sessions with 10 % of sessions going to a
//!   uniformly random workspace instead (one-hit wonders), to see whether
//!   the policy protects the popular set.
//! - Each run: 200,000 warm-up sessions, then 2,000,000 measured sessions
//!   (override: `cargo run --release --example cache_policy -- SESSIONS
//!   [WARMUP]`). All policies of a scenario replay the same trace (and
//!   the 128/512 MiB rows the trace of the 256 MiB one).
//! - What-if "1 ref/session": the same traces, but quick_cache is told of
//!   one access per session (lookups 2..20 are `peek`s, which do not mark
//!   the entry referenced). With 20 `get`s every admitted workspace
//!   reaches quick_cache's maximum reference count within its own session,
//!   one-hit wonders included, so the policy cannot tell them apart; these
//!   rows show what its frequency signal is worth when it is not drowned.
//!   LRU, FIFO and the oracle are unchanged by this (a repeat touch of the
//!   most recent entry changes nothing).
//!
//! Columns: "start hit" = hit ratio of the first lookup of each session (the
//! one that can miss: the other 19 hit whatever the policy, as long as the
//! workspace fits); "zipf start hit" = the same over the Zipf sessions only
//! (differs from "start hit" only in the scan scenario); "overall" = over
//! all lookups; "byte hit" = share of the bytes asked for at session starts
//! that were already resident (what a miss costs is loading that many
//! bytes); "Δ vs LRU" = start-hit difference in points against the LRU on
//! the same trace. The oracle never admits anything, so it has no
//! "overall" figure.
//!
//! Run: `cargo run --release --example cache_policy` (about 40 s on one
//! core: 68 rows of 2.2 M sessions × 20 lookups, single-threaded).

use std::collections::VecDeque;
use std::time::Instant;

use quick_cache::sync::{Cache, DefaultLifecycle};
use quick_cache::{DefaultHashBuilder, OptionsBuilder, Weighter};

const N: usize = 20_000;
const REQUESTS_PER_SESSION: usize = 20;
const MIB: u64 = 1 << 20;
const SCAN_FLAG: u32 = 1 << 31;

// ---------------------------------------------------------------- PRNG

/// splitmix64: small, seeded, good enough for a simulation.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }
    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.f64(); // (0, 1]
        let u2 = self.f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

// ------------------------------------------------------------ workload

/// Resident weight (bytes) of each workspace, by id.
fn workspace_weights(seed: u64) -> Vec<u32> {
    let mut rng = Rng(seed);
    (0..N)
        .map(|_| {
            let size = loop {
                let s = (90_000.0f64.ln() + 0.6 * rng.normal()).exp();
                if (30_000.0..=300_000.0).contains(&s) {
                    break s;
                }
            };
            (size * 1.5) as u32
        })
        .collect()
}

#[derive(Clone, Copy)]
struct Scenario {
    zipf_s: f64,
    /// Share of sessions that go to a uniformly random workspace.
    scan: f64,
    budget: u64,
    /// What-if: quick_cache is told of one access per session (lookups
    /// 2..20 are `peek`s), as if the 20 requests were one. LRU, FIFO and
    /// the oracle behave the same either way (a repeat touch of the most
    /// recent entry changes nothing).
    once_per_session: bool,
}

impl Scenario {
    fn name(&self) -> String {
        let mut s = format!("zipf s={}", self.zipf_s);
        if self.scan > 0.0 {
            s += &format!(" + {:.0}% scan", self.scan * 100.0);
        }
        if self.once_per_session {
            s += ", 1 ref/session";
        }
        s
    }
}

/// Zipf ranks shuffled over ids: `rank_to_id[r]` is the workspace of rank r.
fn rank_permutation(seed: u64) -> Vec<u32> {
    let mut rng = Rng(seed);
    let mut p: Vec<u32> = (0..N as u32).collect();
    for i in (1..N).rev() {
        p.swap(i, rng.below(i + 1));
    }
    p
}

/// Zipf probabilities by rank (rank 0 is the most popular).
fn zipf_pmf(s: f64) -> Vec<f64> {
    let raw: Vec<f64> = (1..=N).map(|k| (k as f64).powf(-s)).collect();
    let total: f64 = raw.iter().sum();
    raw.into_iter().map(|x| x / total).collect()
}

/// The workspace of each session, in order; scan sessions carry SCAN_FLAG.
fn session_trace(sc: &Scenario, rank_to_id: &[u32], sessions: usize, seed: u64) -> Vec<u32> {
    let mut cdf = zipf_pmf(sc.zipf_s);
    let mut acc = 0.0;
    for x in cdf.iter_mut() {
        acc += *x;
        *x = acc;
    }
    let mut rng = Rng(seed);
    (0..sessions)
        .map(|_| {
            if sc.scan > 0.0 && rng.f64() < sc.scan {
                rng.below(N) as u32 | SCAN_FLAG
            } else {
                let u = rng.f64() * acc;
                let rank = cdf.partition_point(|&c| c <= u).min(N - 1);
                rank_to_id[rank]
            }
        })
        .collect()
}

// ------------------------------------------------------------ policies

/// One lookup; a miss inserts the workspace. Returns whether it hit.
trait Policy {
    fn lookup(&mut self, id: u32) -> bool;
    /// Lookups 2..20 of a session; the same as `lookup` unless the
    /// scenario counts one reference per session (see `Qc::peek_repeats`).
    fn repeat_lookup(&mut self, id: u32) -> bool {
        self.lookup(id)
    }
    /// Resident weight, to check the budget is kept.
    fn weight(&self) -> u64;
}

#[derive(Clone)]
struct ByteWeighter;

impl Weighter<u32, u32> for ByteWeighter {
    fn weight(&self, _key: &u32, weight: &u32) -> u64 {
        u64::from(*weight)
    }
}

#[derive(Clone, Copy)]
struct QcOptions {
    hot: Option<f64>,
    ghost: Option<f64>,
    /// Multiplier on `estimated_items_capacity` (the ghost list is sized
    /// as estimated items × ghost_allocation).
    est_items_factor: u64,
}

impl QcOptions {
    const DEFAULT: QcOptions = QcOptions {
        hot: None,
        ghost: None,
        est_items_factor: 1,
    };

    fn label(&self) -> String {
        let mut parts = Vec::new();
        if let Some(h) = self.hot {
            parts.push(format!("hot={h}"));
        }
        if let Some(g) = self.ghost {
            parts.push(format!("ghost={g}"));
        }
        if self.est_items_factor != 1 {
            parts.push(format!("est_items×{}", self.est_items_factor));
        }
        if parts.is_empty() {
            "quick_cache default (hot=0.97, ghost=0.5)".to_string()
        } else {
            format!("quick_cache {}", parts.join(", "))
        }
    }
}

struct Qc<'a> {
    cache: Cache<u32, u32, ByteWeighter>,
    weights: &'a [u32],
    /// Lookups after the first of a session use `peek`, which does not
    /// mark the entry referenced: the policy sees one access per session
    /// instead of 20 (a what-if, see `Scenario::once_per_session`).
    peek_repeats: bool,
}

impl<'a> Qc<'a> {
    fn new(o: QcOptions, budget: u64, weights: &'a [u32], peek_repeats: bool) -> Self {
        let mean = weights.iter().map(|&w| u64::from(w)).sum::<u64>() / weights.len() as u64;
        let mut b = OptionsBuilder::new();
        b.shards(1)
            .weight_capacity(budget)
            .estimated_items_capacity((budget / mean * o.est_items_factor) as usize);
        if let Some(h) = o.hot {
            b.hot_allocation(h);
        }
        if let Some(g) = o.ghost {
            b.ghost_allocation(g);
        }
        let cache = Cache::with_options(
            b.build().expect("options"),
            ByteWeighter,
            DefaultHashBuilder::default(),
            DefaultLifecycle::default(),
        );
        assert_eq!(cache.num_shards(), 1);
        Qc {
            cache,
            weights,
            peek_repeats,
        }
    }
}

impl Policy for Qc<'_> {
    fn lookup(&mut self, id: u32) -> bool {
        if self.cache.get(&id).is_some() {
            true
        } else {
            self.cache.insert(id, self.weights[id as usize]);
            false
        }
    }
    fn repeat_lookup(&mut self, id: u32) -> bool {
        if self.peek_repeats {
            self.cache.peek(&id).is_some() || self.lookup(id)
        } else {
            self.lookup(id)
        }
    }
    fn weight(&self) -> u64 {
        self.cache.weight()
    }
}

/// Weighted LRU: a circular doubly linked list over the ids (they are
/// dense, 0..N), index N being the sentinel; `next[N]` is the most recently
/// used, `prev[N]` the least.
struct Lru<'a> {
    capacity: u64,
    used: u64,
    prev: Vec<u32>,
    next: Vec<u32>,
    resident: Vec<bool>,
    weights: &'a [u32],
}

impl<'a> Lru<'a> {
    fn new(capacity: u64, weights: &'a [u32]) -> Self {
        Lru {
            capacity,
            used: 0,
            prev: vec![N as u32; N + 1],
            next: vec![N as u32; N + 1],
            resident: vec![false; N],
            weights,
        }
    }
    fn unlink(&mut self, i: u32) {
        let (p, n) = (self.prev[i as usize], self.next[i as usize]);
        self.next[p as usize] = n;
        self.prev[n as usize] = p;
    }
    fn push_front(&mut self, i: u32) {
        let head = N as u32;
        let first = self.next[N];
        self.prev[i as usize] = head;
        self.next[i as usize] = first;
        self.prev[first as usize] = i;
        self.next[N] = i;
    }
}

impl Policy for Lru<'_> {
    fn lookup(&mut self, id: u32) -> bool {
        if self.resident[id as usize] {
            self.unlink(id);
            self.push_front(id);
            return true;
        }
        let w = u64::from(self.weights[id as usize]);
        if w > self.capacity {
            return false;
        }
        while self.used + w > self.capacity {
            let victim = self.prev[N];
            self.unlink(victim);
            self.resident[victim as usize] = false;
            self.used -= u64::from(self.weights[victim as usize]);
        }
        self.push_front(id);
        self.resident[id as usize] = true;
        self.used += w;
        false
    }
    fn weight(&self) -> u64 {
        self.used
    }
}

/// Weighted FIFO: evicts in insertion order, hits change nothing.
struct Fifo<'a> {
    capacity: u64,
    used: u64,
    queue: VecDeque<u32>,
    resident: Vec<bool>,
    weights: &'a [u32],
}

impl Policy for Fifo<'_> {
    fn lookup(&mut self, id: u32) -> bool {
        if self.resident[id as usize] {
            return true;
        }
        let w = u64::from(self.weights[id as usize]);
        if w > self.capacity {
            return false;
        }
        while self.used + w > self.capacity {
            let victim = self.queue.pop_front().expect("non-empty");
            self.resident[victim as usize] = false;
            self.used -= u64::from(self.weights[victim as usize]);
        }
        self.queue.push_back(id);
        self.resident[id as usize] = true;
        self.used += w;
        false
    }
    fn weight(&self) -> u64 {
        self.used
    }
}

/// Static oracle: the workspaces with the most expected session starts per
/// byte, filled greedily up to the budget, never changed.
struct Oracle {
    resident: Vec<bool>,
    used: u64,
}

impl Oracle {
    fn new(sc: &Scenario, rank_to_id: &[u32], weights: &[u32]) -> Self {
        let pmf = zipf_pmf(sc.zipf_s);
        let mut p = vec![sc.scan / N as f64; N];
        for (rank, &id) in rank_to_id.iter().enumerate() {
            p[id as usize] += (1.0 - sc.scan) * pmf[rank];
        }
        let mut order: Vec<usize> = (0..N).collect();
        order.sort_by(|&a, &b| {
            let (da, db) = (p[a] / weights[a] as f64, p[b] / weights[b] as f64);
            db.total_cmp(&da)
        });
        let mut resident = vec![false; N];
        let mut used = 0;
        for i in order {
            let w = u64::from(weights[i]);
            if used + w <= sc.budget {
                used += w;
                resident[i] = true;
            }
        }
        Oracle { resident, used }
    }
}

impl Policy for Oracle {
    fn lookup(&mut self, id: u32) -> bool {
        self.resident[id as usize]
    }
    fn weight(&self) -> u64 {
        self.used
    }
}

// -------------------------------------------------------------- replay

#[derive(Default)]
struct Stats {
    starts: u64,
    start_hits: u64,
    zipf_starts: u64,
    zipf_start_hits: u64,
    lookups: u64,
    hits: u64,
    start_bytes: u64,
    start_hit_bytes: u64,
}

fn replay<P: Policy>(
    p: &mut P,
    trace: &[u32],
    warmup: usize,
    weights: &[u32],
    budget: u64,
) -> Stats {
    let mut st = Stats::default();
    for (i, &entry) in trace.iter().enumerate() {
        let id = entry & !SCAN_FLAG;
        let scan = entry & SCAN_FLAG != 0;
        let first = p.lookup(id);
        let mut later_hits = 0u64;
        for _ in 1..REQUESTS_PER_SESSION {
            later_hits += u64::from(p.repeat_lookup(id));
        }
        if i < warmup {
            continue;
        }
        let bytes = u64::from(weights[id as usize]);
        st.starts += 1;
        st.start_bytes += bytes;
        st.lookups += REQUESTS_PER_SESSION as u64;
        st.hits += later_hits + u64::from(first);
        if first {
            st.start_hits += 1;
            st.start_hit_bytes += bytes;
        }
        if !scan {
            st.zipf_starts += 1;
            st.zipf_start_hits += u64::from(first);
        }
    }
    assert!(
        p.weight() <= budget,
        "budget exceeded: {} > {budget}",
        p.weight()
    );
    st
}

enum Which {
    Qc(QcOptions),
    Lru,
    Fifo,
    Oracle,
}

impl Which {
    fn label(&self) -> String {
        match self {
            Which::Qc(o) => o.label(),
            Which::Lru => "LRU (hand-written)".into(),
            Which::Fifo => "FIFO (hand-written)".into(),
            Which::Oracle => "static oracle (reference)".into(),
        }
    }
}

fn pct(num: u64, den: u64) -> f64 {
    100.0 * num as f64 / den.max(1) as f64
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("usage: cache_policy [SESSIONS [WARMUP]]"))
        .collect();
    let measured = args.first().copied().unwrap_or(2_000_000);
    let warmup = args.get(1).copied().unwrap_or(200_000);

    let weights = workspace_weights(0x5EED_0001);
    let rank_to_id = rank_permutation(0x5EED_0002);
    let mean_w = weights.iter().map(|&w| u64::from(w)).sum::<u64>() as f64 / N as f64;
    let mut sorted = weights.clone();
    sorted.sort_unstable();
    println!(
        "N = {N} workspaces, JSON size mean {:.0} KB (median {:.0} KB, 30–300 KB), weight mean {:.0} KB; \
         {REQUESTS_PER_SESSION} lookups per session; {warmup} warm-up + {measured} measured sessions per run\n",
        mean_w / 1.5 / 1000.0,
        sorted[N / 2] as f64 / 1.5 / 1000.0,
        mean_w / 1000.0,
    );

    let qc = |hot: Option<f64>, ghost: Option<f64>, f: u64| {
        Which::Qc(QcOptions {
            hot,
            ghost,
            est_items_factor: f,
        })
    };
    let full = || {
        vec![
            Which::Qc(QcOptions::DEFAULT),
            qc(Some(0.5), None, 1),
            qc(Some(0.75), None, 1),
            qc(Some(0.9), None, 1),
            qc(None, Some(0.0), 1),
            qc(None, Some(1.0), 1),
            qc(None, Some(1.0), 4),
            Which::Lru,
            Which::Fifo,
            Which::Oracle,
        ]
    };
    let short = || {
        vec![
            Which::Qc(QcOptions::DEFAULT),
            qc(Some(0.5), None, 1),
            qc(Some(0.9), None, 1),
            Which::Lru,
            Which::Oracle,
        ]
    };
    let sc = |zipf_s, scan, mib| Scenario {
        zipf_s,
        scan,
        budget: mib * MIB,
        once_per_session: false,
    };
    let once = |zipf_s, scan, mib| Scenario {
        once_per_session: true,
        ..sc(zipf_s, scan, mib)
    };
    let plan: Vec<(Scenario, Vec<Which>)> = vec![
        (sc(1.0, 0.0, 256), full()),
        (sc(0.8, 0.0, 256), full()),
        (sc(1.2, 0.0, 256), full()),
        (sc(1.0, 0.1, 256), full()),
        (sc(1.0, 0.0, 128), short()),
        (sc(1.0, 0.0, 512), short()),
        (once(1.0, 0.0, 256), full()),
        (once(1.0, 0.1, 256), full()),
    ];

    println!(
        "| workload | budget | policy | start hit % | Δ vs LRU (pts) | zipf start hit % | overall hit % | byte hit % (starts) |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    let total = Instant::now();
    for (scenario, policies) in &plan {
        // Seeded by the popularity law only: the budgets and the what-if
        // replay the very trace of their base scenario.
        let seed =
            0xC0FFEE + (scenario.zipf_s * 100.0) as u64 * 1000 + (scenario.scan * 100.0) as u64;
        let trace = session_trace(scenario, &rank_to_id, warmup + measured, seed);
        let budget = scenario.budget;
        let mut results = Vec::new();
        for which in policies {
            let t = Instant::now();
            let st = match which {
                Which::Qc(o) => replay(
                    &mut Qc::new(*o, budget, &weights, scenario.once_per_session),
                    &trace,
                    warmup,
                    &weights,
                    budget,
                ),
                Which::Lru => replay(
                    &mut Lru::new(budget, &weights),
                    &trace,
                    warmup,
                    &weights,
                    budget,
                ),
                Which::Fifo => {
                    let mut f = Fifo {
                        capacity: budget,
                        used: 0,
                        queue: VecDeque::new(),
                        resident: vec![false; N],
                        weights: &weights,
                    };
                    replay(&mut f, &trace, warmup, &weights, budget)
                }
                Which::Oracle => replay(
                    &mut Oracle::new(scenario, &rank_to_id, &weights),
                    &trace,
                    warmup,
                    &weights,
                    budget,
                ),
            };
            eprintln!(
                "{} / {}: {:.1?}",
                scenario.name(),
                which.label(),
                t.elapsed()
            );
            results.push((
                which.label(),
                matches!(which, Which::Lru),
                matches!(which, Which::Oracle),
                st,
            ));
        }
        let lru_start = results
            .iter()
            .find(|r| r.1)
            .map(|r| pct(r.3.start_hits, r.3.starts))
            .unwrap_or(f64::NAN);
        for (label, _, oracle, st) in &results {
            let start = pct(st.start_hits, st.starts);
            // The oracle never admits, so its later lookups are not
            // comparable: no overall figure.
            let overall = if *oracle {
                "—".to_string()
            } else {
                format!("{:.2}", pct(st.hits, st.lookups))
            };
            println!(
                "| {} | {} MiB | {} | {:.2} | {:+.2} | {:.2} | {} | {:.2} |",
                scenario.name(),
                budget / MIB,
                label,
                start,
                start - lru_start,
                pct(st.zipf_start_hits, st.zipf_starts),
                overall,
                pct(st.start_hit_bytes, st.start_bytes),
            );
        }
    }
    eprintln!("total {:.1?}", total.elapsed());
}

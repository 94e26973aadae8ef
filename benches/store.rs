//! Criterion benches of the hot paths: page assembly per list endpoint at the
//! start, middle and end of a big dataset (with and without filters), the feed
//! cursor seek, the auth lookup, a whole answer (with and without metrics;
//! plain, gzip from precompressed records, gzip per request), snapshot
//! loading per MB, and what `--trust-key` adds to a load: a signature
//! verified, and the file hashed (directory mode).
//!
//! The dataset comes from the generator: `BENCH_SCALE=small|medium|large`
//! (default `medium`, about 100 MB of JSON), written once into a temp dir.
//! Run: `cargo bench --bench store` (add `-- page/` to run one group).

use std::hint::black_box;
use std::io::{Read, Write};
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::sync::atomic::AtomicBool;

use portfolio_domain::snapshot::load as load_snapshot;
use portfolio_domain::snapshot::{self, SnapshotError, Source};
use portfolio_domain::store::id::format_id;
use portfolio_domain::store::key::hash_key;
use portfolio_domain::store::{Catalog, Cursor, Dataset, FeedQuery, OffsetPage, Store};
use portfolio_generate::{Scale, generate};
use portfolio_replica::metrics::Metrics;
use portfolio_replica::serve::api::limits::Limits;
use portfolio_replica::serve::api::{ApiState, bearer_key_hash, respond as respond_fn};
use warp::http::{HeaderMap, HeaderValue, Method};

struct Fixture {
    json: Vec<u8>,
    dataset: Arc<Dataset>,
    key: String,
}

fn fixture() -> Fixture {
    let scale = match std::env::var("BENCH_SCALE").as_deref() {
        Ok("small") => Scale::Small,
        Ok("large") => Scale::Large,
        _ => Scale::Medium,
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let files = generate(dir.path(), scale, 42).expect("generate");
    let file = files.into_iter().max_by_key(|f| f.bytes).expect("a file");
    let json = std::fs::read(&file.path).expect("read");
    let started = std::time::Instant::now();
    let mut dataset = load_snapshot("bench.json", &json).expect("load").dataset;
    let loaded = started.elapsed();
    portfolio_replica::serve::build::warming::start(&mut dataset, true).run();
    dataset.wait_warmed();
    eprintln!(
        "fixture: {} MB loaded in {loaded:.2?}, precompressed {:.2?} later into {} MB of fragments",
        json.len() / 1_000_000,
        started.elapsed() - loaded,
        dataset.precompressed_bytes() / 1_000_000
    );
    Fixture {
        json,
        dataset: Arc::new(dataset),
        key: file.api_key,
    }
}

/// The id of the first meeting in a snapshot file.
fn first_meeting(json: &[u8]) -> String {
    let text = std::str::from_utf8(json).expect("utf-8");
    let at = text.find("\"meetings\":[").expect("meetings");
    let start = at + text[at..].find("\"id\":\"").expect("an id") + 6;
    text[start..start + 36].to_owned()
}

/// The id of the first record in a list body.
fn first_id(body: &[u8]) -> u128 {
    let text = std::str::from_utf8(body).expect("utf-8");
    let start = text.find("\"id\":\"").expect("an id") + 6;
    portfolio_domain::store::id::parse_id(&text[start..start + 36]).expect("a uuid")
}

fn pages(c: &mut Criterion, f: &Fixture) {
    let ds = &f.dataset;
    let mut group = c.benchmark_group("page");
    let n = ds.counts.tasks as u64;
    for (label, offset) in [
        ("start", 0),
        ("middle", n / 2),
        ("end", n.saturating_sub(50)),
    ] {
        let page = OffsetPage { limit: 50, offset };
        group.bench_function(BenchmarkId::new("tasks", label), |b| {
            b.iter(|| ds.tasks(None, None, black_box(page)))
        });
        group.bench_function(BenchmarkId::new("tasks_status_triage", label), |b| {
            b.iter(|| {
                ds.tasks(
                    Some("triage"),
                    None,
                    black_box(OffsetPage {
                        limit: 50,
                        offset: offset / 4,
                    }),
                )
            })
        });
    }
    group.bench_function("tasks/offset_1000000", |b| {
        b.iter(|| {
            ds.tasks(
                None,
                None,
                black_box(OffsetPage {
                    limit: 50,
                    offset: 1_000_000,
                }),
            )
        })
    });
    group.bench_function("tasks_status_priority", |b| {
        b.iter(|| {
            ds.tasks(
                Some("todo"),
                Some("high"),
                black_box(OffsetPage {
                    limit: 50,
                    offset: 100,
                }),
            )
        })
    });
    group.bench_function("portfolio", |b| {
        b.iter(|| {
            ds.portfolio(
                None,
                black_box(OffsetPage {
                    limit: 50,
                    offset: 0,
                }),
            )
        })
    });
    let company = first_id(&ds.portfolio(
        None,
        OffsetPage {
            limit: 1,
            offset: 0,
        },
    ));
    let page = OffsetPage {
        limit: 50,
        offset: 0,
    };
    group.bench_function("company_tasks", |b| {
        b.iter(|| ds.company_tasks(black_box(company), page))
    });
    group.bench_function("company_notes", |b| {
        b.iter(|| ds.company_notes(black_box(company), page))
    });
    group.bench_function("company_metrics", |b| {
        b.iter(|| ds.company_metrics(black_box(company)))
    });
    group.bench_function("company_roles", |b| {
        b.iter(|| ds.company_roles(black_box(company)))
    });
    group.bench_function("roles", |b| b.iter(|| ds.roles()));
    let task = first_id(&ds.tasks(None, None, page));
    group.bench_function("task_by_id", |b| b.iter(|| ds.task(black_box(task))));
    group.finish();
}

fn feed(c: &mut Criterion, f: &Fixture) {
    let ds = &f.dataset;
    let mut group = c.benchmark_group("feed");
    let query = |cursor| FeedQuery {
        limit: 50,
        cursor,
        kind: None,
    };
    group.bench_function("first_page", |b| b.iter(|| ds.feed(black_box(query(None)))));
    // A cursor in the middle of the feed: the seek is a binary search.
    let middle = Cursor::parse("2025-01-01T00:00:00.000Z").expect("cursor");
    group.bench_function("cursor_seek_middle", |b| {
        b.iter(|| ds.feed(black_box(query(Some(middle)))))
    });
    group.bench_function("cursor_seek_middle_filtered", |b| {
        b.iter(|| {
            ds.feed(black_box(FeedQuery {
                limit: 50,
                cursor: Some(middle),
                kind: Some("press"),
            }))
        })
    });
    group.finish();
}

fn auth(c: &mut Criterion, f: &Fixture) {
    let catalog = Catalog::new([Arc::clone(&f.dataset)]);
    let mut headers = HeaderMap::new();
    let value = format!("Bearer {}", f.key);
    headers.insert(
        "authorization",
        HeaderValue::from_str(&value).expect("header"),
    );
    c.bench_function("auth/hash_and_lookup", |b| {
        b.iter(|| {
            let hash = bearer_key_hash(black_box(&headers), "cura").expect("key");
            catalog.by_key(&hash).is_some()
        })
    });
    c.bench_function("auth/sha256_only", |b| {
        b.iter(|| hash_key(black_box(&f.key)))
    });
}

/// The whole answer to a request without HTTP framing: auth, routing,
/// query parsing, body, headers; with and without the metrics layer, and
/// gzip (assembled from precompressed records, and for reference
/// compressed per request as without precompression) next to the plain
/// answer of the same page, side by side in one run (the ratios are the
/// point).
fn respond(c: &mut Criterion, f: &Fixture) {
    let metrics = Arc::new(Metrics::new(&portfolio_replica::serve::api::Route::LABELS));
    let state_of = |dataset: Arc<Dataset>| {
        let store = Arc::new(Store::default());
        store.publish(Catalog::new([dataset]));
        ApiState {
            resident: None,
            // No flags: as a replica started without limits.
            limits: Arc::new(Limits::new(None)),
            store,
            key_prefix: "cura".to_owned(),
            ready: Arc::new(AtomicBool::new(true)),
            warm: AtomicBool::new(true),
            draining: Arc::new(AtomicBool::new(false)),
            metrics: Arc::clone(&metrics),
            compression: true,
            require_workspaces: 0,
            cors: None,
        }
    };
    let state = state_of(Arc::clone(&f.dataset));
    // The same dataset without precompression: gzip per request.
    let unpacked = load_snapshot("bench.json", &f.json[..])
        .expect("load")
        .dataset;
    let per_request = state_of(Arc::new(unpacked));

    let mut headers = HeaderMap::new();
    let value = format!("Bearer {}", f.key);
    headers.insert(
        "authorization",
        HeaderValue::from_str(&value).expect("header"),
    );
    let mut gzip_headers = headers.clone();
    gzip_headers.insert("accept-encoding", HeaderValue::from_static("gzip"));
    let get = Method::GET;
    let ds = &f.dataset;
    let page = OffsetPage {
        limit: 50,
        offset: 0,
    };
    let company = format_id(first_id(&ds.portfolio(None, page)));
    let deep = format!("limit=50&offset={}", ds.counts.tasks * 9 / 10);
    let pages = [
        ("tasks_limit_50", "/tasks".to_owned(), "limit=50"),
        ("tasks_limit_5", "/tasks".to_owned(), "limit=5"),
        ("tasks_deep", "/tasks".to_owned(), deep.as_str()),
        (
            "tasks_todo",
            "/tasks".to_owned(),
            "limit=50&filter%5Bstatus%5D=todo",
        ),
        ("company_tasks", format!("/portfolio/{company}/tasks"), ""),
        (
            "meeting_notes",
            format!("/meetings/{}", first_meeting(&f.json)),
            "include=notes",
        ),
        (
            "feed",
            "/feed".to_owned(),
            "limit=50&cursor=2025-01-01T00:00:00.000Z",
        ),
    ];
    let mut group = c.benchmark_group("respond");
    for (label, path, query) in &pages {
        let path = path.as_str();
        group.bench_function(BenchmarkId::new("plain", label), |b| {
            b.iter(|| {
                respond_fn(&state, &get, path, black_box(query), &headers)
                    .0
                    .answered()
            })
        });
        group.bench_function(BenchmarkId::new("gzip", label), |b| {
            b.iter(|| {
                respond_fn(&state, &get, path, black_box(query), &gzip_headers)
                    .0
                    .answered()
            })
        });
    }
    // Pages at random offsets across the whole list, as many clients ask
    // for them: records and fragments come from all over memory.
    let mut x = 42u64;
    let random: Vec<String> = (0..1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let offset = x % (ds.counts.tasks as u64).saturating_sub(50).max(1);
            format!("limit=50&offset={offset}")
        })
        .collect();
    for (label, h) in [("plain", &headers), ("gzip", &gzip_headers)] {
        let mut n = 0;
        group.bench_function(BenchmarkId::new(label, "tasks_random"), |b| {
            b.iter(|| {
                n = (n + 1) % random.len();
                respond_fn(&state, &get, "/tasks", black_box(&random[n]), h)
                    .0
                    .answered()
            })
        });
    }
    for (label, path, query) in &pages[..2] {
        let path = path.as_str();
        group.bench_function(BenchmarkId::new("with_metrics", label), |b| {
            b.iter(|| {
                let started = std::time::Instant::now();
                metrics.start();
                let (step, route) = respond_fn(&state, &get, path, black_box(query), &headers);
                let response = step.answered().expect("every workspace is resident");
                metrics.finish(route.index(), response.status().as_u16(), started.elapsed());
                response
            })
        });
        group.bench_function(BenchmarkId::new("gzip_per_request", label), |b| {
            b.iter(|| {
                respond_fn(&per_request, &get, path, black_box(query), &gzip_headers)
                    .0
                    .answered()
            })
        });
    }
    group.finish();
}

/// A gzip snapshot in memory, read the way the loader reads a `.json.gz`
/// file: inflated as a stream.
struct Gzipped<'a>(&'a [u8]);

impl Source for Gzipped<'_> {
    fn open(&self) -> Result<Box<dyn Read + '_>, SnapshotError> {
        Ok(Box::new(flate2::read::MultiGzDecoder::new(self.0)))
    }

    fn read_all(&self) -> Result<Vec<u8>, SnapshotError> {
        let mut out = Vec::new();
        self.open()?
            .read_to_end(&mut out)
            .map_err(|e| SnapshotError::new("bench.json.gz", e.to_string()))?;
        Ok(out)
    }

    fn size_hint(&self) -> u64 {
        self.0.len() as u64 * 6
    }
}

/// Loading per MB of JSON: plain, and inflated from gzip as a stream.
/// Throughput is counted in bytes of JSON either way. Without
/// precompression: it runs in the background after a load.
fn load(c: &mut Criterion, f: &Fixture) {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&f.json).expect("gzip in memory");
    let gz = gz.finish().expect("gzip in memory");
    let mut group = c.benchmark_group("load");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(f.json.len() as u64));
    // On every core, as the server loads (`snapshot::load` alone would
    // keep to the calling thread).
    group.bench_function("snapshot", |b| {
        b.iter(|| {
            snapshot::load_from(
                "bench.json",
                black_box(&f.json[..]),
                &portfolio_replica::threads::Cores,
                &mut |_, _| {},
            )
            .is_ok()
        })
    });
    group.bench_function("snapshot_gzip", |b| {
        b.iter(|| {
            snapshot::load_from(
                "bench.json.gz",
                &Gzipped(black_box(&gz)),
                &portfolio_replica::threads::Cores,
                &mut |_, _| {},
            )
            .is_ok()
        })
    });
    group.finish();
}

/// What verifying a version costs beside loading it: the Ed25519
/// signature (once per version, whatever its size) and, in directory
/// mode, the SHA-256 of the file (per MB, as `load/snapshot` is).
fn signatures(c: &mut Criterion, f: &Fixture) {
    use portfolio_wire::signed::{Named, SecretKey, Statement, TrustedKeys};
    use sha2::Digest;
    let key = SecretKey::from_seed([1; 32]);
    let mut trusted = TrustedKeys::default();
    trusted.add(key.public());
    let sha256 = portfolio_wire::delta::hex(&sha2::Sha256::digest(&f.json));
    let named = Named {
        workspace: "ws",
        version: "v",
        sha256: &sha256,
        key_hashes: None,
        revision: None,
    };
    let keys = vec!["ab".repeat(32); 4];
    let envelope = Statement::new(
        &named,
        &keys,
        1,
        std::time::SystemTime::now(),
        portfolio_wire::signed::DEFAULT_VALID_FOR,
    )
    .sign(&key);
    let mut group = c.benchmark_group("signatures");
    group.bench_function("verify", |b| {
        b.iter(|| trusted.verify(black_box(&envelope)).is_ok())
    });
    group.throughput(Throughput::Bytes(f.json.len() as u64));
    group.sample_size(10);
    group.bench_function("sha256", |b| {
        b.iter(|| sha2::Sha256::digest(black_box(&f.json[..])))
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    let f = fixture();
    pages(c, &f);
    feed(c, &f);
    auth(c, &f);
    respond(c, &f);
    load(c, &f);
    signatures(c, &f);
}

criterion_group!(store, benches);
criterion_main!(store);

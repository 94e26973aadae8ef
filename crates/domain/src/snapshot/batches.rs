//! Building records on several threads while the streaming pass reads on.
//!
//! The streaming pass ([`super::stream`]) finds where each record's bytes
//! are; parsing, checking and rendering a record is the bulk of a load, and
//! records are independent of each other. So the reading thread copies
//! records into batches of about 128 KiB, worker threads build each batch
//! into a builder of its own, and the reading thread appends the finished
//! builders to the load's builder in file order ([`Builder::append`]): the
//! dataset is the same as if one thread had built every record.
//!
//! A record that the version before holds with the same bytes (a reload
//! of a file that changed in a few records) is found on the reading
//! thread, by its digest, and goes into its batch without its bytes: the
//! worker only takes it over. A reload that changed one record in a
//! file of 200 MB otherwise copied every record into a batch and woke
//! a worker for each 128 KiB, to do little more than that lookup.
//!
//! The worker threads are the caller's ([`crate::store::Threads`]): this
//! module gives it the workers' loops as jobs to run. With one thread to
//! run on (a replica pinned to one CPU) there is nothing to gain, and
//! records are built inline.

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::sync::{Arc, Mutex};

use super::stream::{GaveUp, build_digested, build_record, digest};
use crate::store::{Builder, BytesDigest, Collection, Previous};

/// Records per batch are cut at about this many bytes.
const BATCH_BYTES: usize = 128 << 10;

/// ... or at this many records: one taken over from the version before
/// adds no bytes, and a batch of nothing else would hold the whole file's.
const BATCH_RECORDS: usize = 1 << 16;

/// Batches queued for the workers at most: bounds the memory in flight.
const QUEUED: usize = 8;

/// A run of records of one collection, copied out of the read window.
struct RecordBatch {
    seq: u64,
    collection: Collection,
    /// Position of the first record in its collection.
    first: usize,
    bytes: Vec<u8>,
    /// One past the last byte of each record in `bytes`.
    ends: Vec<usize>,
    /// Where a version before may have the records: each one's digest,
    /// and whether it has it (then its bytes are not in `bytes`).
    digests: Vec<Digested>,
}

/// A record's digest, found on the reading thread.
#[derive(Clone, Copy)]
enum Digested {
    /// Not in the version before: to be built.
    Build(BytesDigest),
    /// In the version before: to be taken over.
    Take(BytesDigest),
}

/// Where the streaming pass sends each record.
pub enum RecordSink<'s, 'b> {
    /// Built right away on the reading thread.
    Inline(&'b mut Builder),
    /// Batched to worker threads.
    Workers(Workers<'s, 'b>),
    /// Not built: told each record's collection, index, offset in the
    /// input and bytes ([`super::digests`](mod@super::digests) hashes them).
    Digests(&'b mut OnRecord<'b>),
}

/// What a [`RecordSink::Digests`] calls with each record's collection, index in
/// it, offset in the (uncompressed) input, and bytes.
pub type OnRecord<'b> = dyn FnMut(Collection, usize, u64, &[u8]) -> Result<(), GaveUp> + 'b;

/// A worker's loop, for the caller's threads to run.
pub type WorkerJob<'s> = Box<dyn FnOnce() + Send + 's>;

/// The reading thread's side of the workers.
pub struct Workers<'s, 'b> {
    builder: &'b mut Builder,
    previous: Option<Arc<Previous>>,
    batches: Option<SyncSender<RecordBatch>>,
    done: Receiver<(u64, Result<Builder, GaveUp>)>,
    current: Option<RecordBatch>,
    next_seq: u64,
    /// Finished batches waiting for an earlier one, by sequence number.
    waiting: BTreeMap<u64, Builder>,
    next_to_append: u64,
    _scope: std::marker::PhantomData<&'s ()>,
}

/// Below this many bytes, starting threads costs more than they save.
const PARALLEL_FROM: u64 = 4 << 20;

/// How many threads may build the records of about `size` bytes, of the
/// `threads` the caller gives: one each (four at most), or none (build
/// inline) with a single thread or a small snapshot.
pub fn worker_count(size: u64, threads: usize) -> usize {
    match threads {
        _ if size < PARALLEL_FROM => 0,
        1 => 0,
        n => n.min(4),
    }
}

impl<'s, 'b> Workers<'s, 'b> {
    /// The reading side of `count` workers building records of `file`,
    /// and the workers' loops, for the caller to run while it reads.
    pub fn start(
        file: &'s str,
        count: usize,
        builder: &'b mut Builder,
    ) -> (Workers<'s, 'b>, Vec<WorkerJob<'s>>) {
        let (batches_tx, batches_rx) = sync_channel::<RecordBatch>(QUEUED);
        let batches_rx = Arc::new(Mutex::new(batches_rx));
        let (done_tx, done_rx) = channel();
        let mut jobs: Vec<WorkerJob<'s>> = Vec::with_capacity(count);
        for _ in 0..count {
            let batches = Arc::clone(&batches_rx);
            let done: Sender<_> = done_tx.clone();
            let previous = builder.previous();
            jobs.push(Box::new(move || {
                loop {
                    let next = batches.lock().map(|rx| rx.recv());
                    let Ok(Ok(batch)) = next else {
                        return;
                    };
                    let built = build_batch(file, &batch, Builder::following(previous.clone()));
                    if done.send((batch.seq, built)).is_err() {
                        return;
                    }
                }
            }));
        }
        let workers = Workers {
            previous: builder.previous(),
            builder,
            batches: Some(batches_tx),
            done: done_rx,
            current: None,
            next_seq: 0,
            waiting: BTreeMap::new(),
            next_to_append: 0,
            _scope: std::marker::PhantomData,
        };
        (workers, jobs)
    }

    fn record(&mut self, collection: Collection, index: usize, bytes: &[u8]) -> Result<(), GaveUp> {
        if self
            .current
            .as_ref()
            .is_some_and(|b| b.collection != collection)
        {
            self.send()?;
        }
        let digested = self.previous.as_deref().map(|previous| {
            let digest = digest(bytes);
            match previous.has(collection, index, digest) {
                true => Digested::Take(digest),
                false => Digested::Build(digest),
            }
        });
        let batch = self.current.get_or_insert_with(|| RecordBatch {
            seq: 0,
            collection,
            first: index,
            bytes: Vec::with_capacity(BATCH_BYTES + (BATCH_BYTES >> 2)),
            ends: Vec::new(),
            digests: Vec::new(),
        });
        if !matches!(digested, Some(Digested::Take(_))) {
            batch.bytes.extend_from_slice(bytes);
        }
        batch.ends.push(batch.bytes.len());
        batch.digests.extend(digested);
        if batch.bytes.len() >= BATCH_BYTES || batch.ends.len() >= BATCH_RECORDS {
            self.send()?;
        }
        Ok(())
    }

    /// Queues the batch being filled, and appends what is finished.
    fn send(&mut self) -> Result<(), GaveUp> {
        if let Some(mut batch) = self.current.take() {
            batch.seq = self.next_seq;
            self.next_seq += 1;
            let tx = self.batches.as_ref().ok_or(GaveUp)?;
            tx.send(batch).map_err(|_| GaveUp)?;
        }
        while let Ok(done) = self.done.try_recv() {
            self.take(done)?;
        }
        Ok(())
    }

    /// Appends finished batches in order.
    fn take(&mut self, (seq, built): (u64, Result<Builder, GaveUp>)) -> Result<(), GaveUp> {
        self.waiting.insert(seq, built?);
        while let Some(next) = self.waiting.remove(&self.next_to_append) {
            self.builder.append(next);
            self.next_to_append += 1;
        }
        Ok(())
    }

    /// Sends the last batch and waits for every batch to be appended.
    fn finish(&mut self) -> Result<(), GaveUp> {
        self.send()?;
        self.batches = None;
        while self.next_to_append < self.next_seq {
            let done = self.done.recv().map_err(|_| GaveUp)?;
            self.take(done)?;
        }
        Ok(())
    }
}

fn build_batch(file: &str, batch: &RecordBatch, mut builder: Builder) -> Result<Builder, GaveUp> {
    let mut start = 0;
    for (k, &end) in batch.ends.iter().enumerate() {
        let (collection, index, bytes) =
            (batch.collection, batch.first + k, &batch.bytes[start..end]);
        match batch.digests.get(k) {
            // The reading thread found it in the version before, which
            // the builder takes it over from.
            Some(&Digested::Take(digest)) => {
                if !builder.reuse(collection, index, digest) {
                    return Err(GaveUp);
                }
            }
            Some(&Digested::Build(digest)) => {
                build_digested(file, collection, index, bytes, digest, &mut builder)?;
            }
            None => build_record(file, collection, index, bytes, &mut builder)?,
        }
        start = end;
    }
    Ok(builder)
}

impl RecordSink<'_, '_> {
    /// Builds (or queues) one record of `collection`, at `index` in it.
    pub fn record(
        &mut self,
        file: &str,
        collection: Collection,
        index: usize,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), GaveUp> {
        match self {
            RecordSink::Inline(builder) => build_record(file, collection, index, bytes, builder),
            RecordSink::Workers(workers) => workers.record(collection, index, bytes),
            RecordSink::Digests(record) => record(collection, index, offset, bytes),
        }
    }

    /// Waits until every record given is in the builder.
    pub fn finish(&mut self) -> Result<(), GaveUp> {
        match self {
            RecordSink::Inline(_) | RecordSink::Digests(_) => Ok(()),
            RecordSink::Workers(workers) => workers.finish(),
        }
    }
}

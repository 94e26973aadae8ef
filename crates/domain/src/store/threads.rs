//! How the domain works in parallel without threads of its own: whoever
//! calls a load hands it a [`Threads`], which says how many threads the
//! load may use and runs its jobs on them. The binary gives scoped
//! threads, one per core (`threads::Cores`), to the server's loader and to
//! `check` alike; a caller that gives [`OneThread`] (as `snapshot::load`
//! does) has the load do everything on the calling thread.

/// Threads a load may use, the calling thread included.
pub trait Threads: Sync {
    /// How many threads may work at once, the calling one included; 1
    /// means the load does everything on the calling thread and never
    /// calls [`Threads::run`].
    fn count(&self) -> usize;

    /// Runs `here` on the calling thread while each of `others` runs on a
    /// thread of its own, and returns once all are done. A job's panic is
    /// raised here, after the others have ended.
    fn run<'a>(&self, here: Box<dyn FnOnce() + 'a>, others: Vec<Box<dyn FnOnce() + Send + 'a>>);
}

/// The calling thread alone.
pub struct OneThread;

impl Threads for OneThread {
    fn count(&self) -> usize {
        1
    }

    /// One after the other: only jobs that do not wait for each other may
    /// be given to one thread (a load asks only when `count` is above 1).
    fn run<'a>(&self, here: Box<dyn FnOnce() + 'a>, others: Vec<Box<dyn FnOnce() + Send + 'a>>) {
        here();
        for job in others {
            job();
        }
    }
}

/// `a` and `b` at once if `threads` allows two, `b` on the calling thread;
/// one after the other otherwise. On one core a second thread would only
/// take turns with this one, and with the requests, for the same time in
/// all.
pub fn join<A: Send, B>(
    threads: &dyn Threads,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B,
) -> (A, B) {
    if threads.count() < 2 {
        return (a(), b());
    }
    let (mut from_a, mut from_b) = (None, None);
    threads.run(
        Box::new(|| from_b = Some(b())),
        vec![Box::new(|| from_a = Some(a()))],
    );
    match (from_a, from_b) {
        (Some(a), Some(b)) => (a, b),
        // `run` returns only once both jobs have run, or raises a panic.
        _ => unreachable!("Threads::run returned before its jobs ran"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `Threads` of real scoped threads, as the server's loader gives.
    struct Scoped;

    impl Threads for Scoped {
        fn count(&self) -> usize {
            2
        }

        fn run<'a>(
            &self,
            here: Box<dyn FnOnce() + 'a>,
            others: Vec<Box<dyn FnOnce() + Send + 'a>>,
        ) {
            std::thread::scope(|scope| {
                for job in others {
                    scope.spawn(job);
                }
                here();
            });
        }
    }

    #[test]
    fn join_gives_both_results_on_one_thread_and_on_two() {
        let data = [1, 2, 3];
        for threads in [&OneThread as &dyn Threads, &Scoped] {
            let (sum, len) = join(threads, || data.iter().sum::<i32>(), || data.len());
            assert_eq!((sum, len), (6, 3));
        }
    }

    #[test]
    fn join_runs_the_second_on_another_thread_when_it_may() {
        let here = std::thread::current().id();
        let (there, _) = join(&Scoped, || std::thread::current().id(), || ());
        assert_ne!(there, here);
        let (there, _) = join(&OneThread, || std::thread::current().id(), || ());
        assert_eq!(there, here);
    }
}

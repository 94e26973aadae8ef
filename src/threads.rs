//! The threads this binary gives the domain's loads (`store::Threads`):
//! the server's scan and `check` alike load a large file on every core.

use portfolio_domain::store::Threads;
use portfolio_os as os;

/// The threads a load may use: scoped threads, one per core the process
/// may run on, ended before the load returns.
pub struct Cores;

impl Threads for Cores {
    fn count(&self) -> usize {
        os::cores()
    }

    fn run<'a>(&self, here: Box<dyn FnOnce() + 'a>, others: Vec<Box<dyn FnOnce() + Send + 'a>>) {
        std::thread::scope(|scope| {
            for job in others {
                scope.spawn(job);
            }
            here();
        });
    }
}

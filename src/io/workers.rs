//! Bounded worker pools: the threads that run requests. Each pool starts a
//! thread only when a job finds every thread with a job (running or queued)
//! and the pool is below its size, and keeps its threads for the next job,
//! so a pool never holds more threads than its size, not even for the
//! moment a finished thread takes to exit. Jobs beyond that wait in the
//! pool's queue (the core already keeps its polls within the pool's size,
//! so the queue stays short).

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

/// One request to run.
pub type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    threads: usize,
    /// Threads running a job now. The others take the queued jobs, one
    /// each: a thread counts as free from its start, before it first waits.
    busy: usize,
}

/// A pool of at most `size` threads named `name`.
pub struct Pool {
    name: &'static str,
    size: usize,
    state: Mutex<State>,
    ready: Condvar,
}

impl Pool {
    pub const fn new(name: &'static str, size: usize) -> Pool {
        Pool {
            name,
            size,
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                threads: 0,
                busy: 0,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Threads the pool holds now.
    pub fn threads(&self) -> usize {
        self.lock().threads
    }

    /// Starts threads until the pool holds `n` (at most its size), idle
    /// until jobs come. Done before the child starts: a thread is born
    /// with the C library's own signal unblocked for a moment (musl
    /// unblocks 33 in every new thread, glibc 32), and a copy it takes
    /// then is discarded (drainit ignores both: `signals::ignore_reserved`)
    /// rather than forwarded; before the child, nobody has a reason to
    /// send.
    pub fn prestart(&'static self, n: usize) -> std::io::Result<()> {
        while self.threads() < n.min(self.size) {
            self.lock().threads += 1;
            let started = crate::io::threads::spawn_thread(
                self.name,
                256 * 1024,
                Box::new(move || self.work()),
            );
            if let Err(e) = started {
                self.lock().threads -= 1;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Queues `job`; starts a thread for it if every thread has a job
    /// (running or queued) and the pool has room. Err when no thread could
    /// be started and none exists to run it later: the job is dropped (the
    /// caller reports the failure).
    pub fn submit(&'static self, job: Job) -> std::io::Result<()> {
        let mut state = self.lock();
        state.jobs.push_back(job);
        let free = state.threads - state.busy;
        if free >= state.jobs.len() || state.threads >= self.size {
            drop(state);
            self.ready.notify_one();
            return Ok(());
        }
        state.threads += 1;
        drop(state);
        let started =
            crate::io::threads::spawn_thread(self.name, 256 * 1024, Box::new(move || self.work()));
        if let Err(e) = started {
            let mut state = self.lock();
            state.threads -= 1;
            if state.threads == 0 {
                state.jobs.clear();
                return Err(e);
            }
        }
        Ok(())
    }

    /// A worker: runs jobs as they come, forever (the process's exit ends
    /// it). A job's panic is its own business: it is contained, and the
    /// worker goes on.
    fn work(&'static self) {
        loop {
            let job = {
                let mut state = self.lock();
                loop {
                    if let Some(job) = state.jobs.pop_front() {
                        state.busy += 1;
                        break job;
                    }
                    state = self.ready.wait(state).unwrap_or_else(|e| e.into_inner());
                }
            };
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            self.lock().busy -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// A thread started ahead takes the first job, even when the job comes
    /// before the thread first waits: one `--drain-url`, one poll thread.
    #[test]
    fn a_prestarted_thread_takes_the_first_job() {
        static POOL: Pool = Pool::new("test-prestart", 4);
        for round in 0..20 {
            POOL.prestart(1 + round % 2).unwrap();
            let held = POOL.threads();
            let (tx, rx) = mpsc::channel();
            POOL.submit(Box::new(move || tx.send(()).unwrap())).unwrap();
            rx.recv_timeout(Duration::from_secs(20)).unwrap();
            assert_eq!(POOL.threads(), held, "round {round}: a thread too many");
            // The job has sent, but its thread counts as busy until the
            // job returns: the next round starts from an idle pool (on a
            // loaded machine that can take a while), or it would rightly
            // start a thread for its job.
            let until = std::time::Instant::now() + Duration::from_secs(20);
            while POOL.lock().busy > 0 {
                assert!(
                    std::time::Instant::now() < until,
                    "round {round}: the job never returned"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// Jobs beyond the free threads start threads, up to the pool's size,
    /// and no more; every job runs.
    #[test]
    fn busy_threads_make_room_for_more_up_to_the_size() {
        static POOL: Pool = Pool::new("test-busy", 3);
        let (release, hold) = mpsc::channel::<()>();
        let hold = std::sync::Arc::new(Mutex::new(hold));
        let (done, finished) = mpsc::channel();
        for _ in 0..5 {
            let (hold, done) = (std::sync::Arc::clone(&hold), done.clone());
            POOL.submit(Box::new(move || {
                let _ = hold.lock().unwrap().recv();
                done.send(()).unwrap();
            }))
            .unwrap();
        }
        assert_eq!(POOL.threads(), 3);
        for _ in 0..5 {
            release.send(()).unwrap();
        }
        for _ in 0..5 {
            finished.recv_timeout(Duration::from_secs(20)).unwrap();
        }
        assert_eq!(POOL.threads(), 3);
    }
}

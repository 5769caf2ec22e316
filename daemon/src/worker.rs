//! NVML work off the publishing thread, under a deadline.
//!
//! A call into the driver can block for good (a GPU after an Xid, a driver stuck in D
//! state). No such call may stop the heartbeat or the other GPUs, so the publishing
//! thread never calls NVML itself: it hands jobs to [`Worker`] threads — one per GPU,
//! and one for the driver-wide calls — and waits for them only until the tick's
//! deadline. A worker still busy then goes on working; the publisher asks it
//! [`Worker::busy_for`] to judge whether its GPU is late or not responding, posts it no
//! new job until it is done, and takes its result whenever it comes.
//!
//! Each worker owns its task's state (a `GpuSampler`, say) and two output buffers that
//! are swapped with the publisher's, never reallocated: a steady-state tick allocates
//! nothing (std's `Mutex` and `Condvar` are futexes). A worker whose [`Worker`] handle
//! is dropped leaves its thread when its current job ends; a thread stuck in a call is
//! never joined (the process exits around it).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What a worker thread does with each job.
pub trait Task: Send + 'static {
    /// One request from the publisher.
    type Job: Send + 'static;
    /// What a job produces, written into a buffer that is reused from job to job.
    type Out: Send + Default + 'static;

    /// Runs `job`, writing its result into `out` (which holds an earlier result).
    fn run(&mut self, job: Self::Job, out: &mut Self::Out);
}

/// Wakes the publisher when any of its workers finishes a job.
#[derive(Default)]
pub struct Done {
    finished: Mutex<u64>,
    cv: Condvar,
}

impl Done {
    /// Waits until `ready()` holds or `deadline` passes; returns whether it held.
    /// `ready` is checked under this signal's lock, so no finish can slip between the
    /// check and the wait.
    pub fn wait_until(&self, deadline: Instant, mut ready: impl FnMut() -> bool) -> bool {
        let mut finished = lock(&self.finished);
        loop {
            if ready() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            finished = match self.cv.wait_timeout(finished, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Wakes the waiter (a worker finished, or the events thread let go of its session).
    pub fn signal(&self) {
        *lock(&self.finished) += 1;
        self.cv.notify_all();
    }
}

/// What the publisher and a worker thread share.
struct Slot<T: Task> {
    /// The job posted and not yet started.
    job: Option<T::Job>,
    /// When the job being run (or waiting to run) was posted.
    busy_since: Option<Instant>,
    /// The last finished output, not yet taken when `fresh`.
    out: T::Out,
    fresh: bool,
    /// The handle was dropped: leave after the current job.
    quit: bool,
}

struct Shared<T: Task> {
    slot: Mutex<Slot<T>>,
    wake: Condvar,
    done: Arc<Done>,
}

/// A thread running one [`Task`]'s jobs, one at a time.
pub struct Worker<T: Task> {
    shared: Arc<Shared<T>>,
}

impl<T: Task> Worker<T> {
    /// Starts a thread named `name` running `task`'s jobs; each finished job signals
    /// `done`.
    pub fn spawn(name: String, task: T, done: Arc<Done>) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            slot: Mutex::new(Slot {
                job: None,
                busy_since: None,
                out: T::Out::default(),
                fresh: false,
                quit: false,
            }),
            wake: Condvar::new(),
            done,
        });
        let theirs = Arc::clone(&shared);
        std::thread::Builder::new()
            .name(name)
            .spawn(move || work(task, &theirs))?;
        Ok(Worker { shared })
    }

    /// Posts `job` unless the worker is still busy with an earlier one, which gives the
    /// job back.
    pub fn post(&self, job: T::Job, now: Instant) -> Result<(), T::Job> {
        let mut slot = lock(&self.shared.slot);
        if slot.busy_since.is_some() {
            return Err(job);
        }
        slot.job = Some(job);
        slot.busy_since = Some(now);
        drop(slot);
        self.shared.wake.notify_one();
        Ok(())
    }

    /// How long the job in hand has been running (counted from its posting), or `None`
    /// when the worker is idle.
    pub fn busy_for(&self, now: Instant) -> Option<Duration> {
        lock(&self.shared.slot)
            .busy_since
            .map(|since| now.saturating_duration_since(since))
    }

    /// Whether a finished output is waiting to be taken.
    pub fn has_fresh(&self) -> bool {
        lock(&self.shared.slot).fresh
    }

    /// Swaps the newest finished output into `into`, if one came since the last take;
    /// `into`'s old contents become the worker's buffer.
    pub fn take(&self, into: &mut T::Out) -> bool {
        let mut slot = lock(&self.shared.slot);
        if !slot.fresh {
            return false;
        }
        slot.fresh = false;
        std::mem::swap(&mut slot.out, into);
        true
    }
}

impl<T: Task> Drop for Worker<T> {
    fn drop(&mut self) {
        lock(&self.shared.slot).quit = true;
        self.shared.wake.notify_one();
    }
}

/// The worker thread: waits for a job, runs it, hands the output over, signals.
fn work<T: Task>(mut task: T, shared: &Shared<T>) {
    let mut out = T::Out::default();
    loop {
        let job = {
            let mut slot = lock(&shared.slot);
            loop {
                if slot.quit {
                    drop(slot);
                    // Drop the task's state (an NVML session share, say) before saying so.
                    drop(task);
                    shared.done.signal();
                    return;
                }
                if let Some(job) = slot.job.take() {
                    break job;
                }
                slot = match shared.wake.wait(slot) {
                    Ok(guard) => guard,
                    Err(poisoned) => poisoned.into_inner(),
                };
            }
        };
        task.run(job, &mut out);
        {
            let mut slot = lock(&shared.slot);
            std::mem::swap(&mut slot.out, &mut out);
            slot.fresh = true;
            slot.busy_since = None;
        }
        shared.done.signal();
    }
}

/// Locks `m`, ignoring poisoning: a panicking job aborts the daemon (panic = "abort" in
/// release builds), and in tests the data stays usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Adds its job to a running total; a job of 0 blocks until `gate` sends.
    struct Sum {
        total: u64,
        gate: mpsc::Receiver<()>,
    }

    impl Task for Sum {
        type Job = u64;
        type Out = u64;
        fn run(&mut self, job: u64, out: &mut u64) {
            if job == 0 {
                let _ = self.gate.recv();
            }
            self.total += job;
            *out = self.total;
        }
    }

    fn sum() -> (Worker<Sum>, Arc<Done>, mpsc::Sender<()>) {
        let done = Arc::new(Done::default());
        let (tx, gate) = mpsc::channel();
        let worker = Worker::spawn("sum".into(), Sum { total: 0, gate }, Arc::clone(&done));
        (worker.unwrap(), done, tx)
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(20)
    }

    #[test]
    fn a_posted_job_is_run_and_its_output_taken_once() {
        let (worker, done, _gate) = sum();
        assert!(worker.post(5, Instant::now()).is_ok());
        assert!(done.wait_until(far(), || worker.has_fresh()));
        let mut out = 0;
        assert!(worker.take(&mut out));
        assert_eq!(out, 5);
        assert!(!worker.take(&mut out), "an output is taken once");
        assert_eq!(worker.busy_for(Instant::now()), None);
    }

    #[test]
    fn a_blocked_worker_is_busy_refuses_jobs_and_catches_up_when_released() {
        let (worker, done, gate) = sum();
        let posted = Instant::now();
        assert!(worker.post(0, posted).is_ok());
        let soon = Instant::now() + Duration::from_millis(50);
        assert!(
            !done.wait_until(soon, || worker.has_fresh()),
            "it is blocked"
        );
        assert!(worker.busy_for(Instant::now()).unwrap() >= Duration::from_millis(50));
        assert_eq!(
            worker.post(7, Instant::now()),
            Err(7),
            "no second job while busy"
        );
        gate.send(()).unwrap();
        assert!(done.wait_until(far(), || worker.has_fresh()));
        let mut out = 99;
        assert!(worker.take(&mut out));
        assert_eq!(out, 0, "the refused job never ran");
        assert!(worker.post(7, Instant::now()).is_ok());
        assert!(done.wait_until(far(), || worker.has_fresh()));
        assert!(worker.take(&mut out));
        assert_eq!(out, 7);
    }

    #[test]
    fn dropping_a_busy_worker_does_not_wait_for_it() {
        let (worker, _done, gate) = sum();
        assert!(worker.post(0, Instant::now()).is_ok());
        drop(worker); // returns at once although the job is blocked
        gate.send(()).unwrap();
    }
}

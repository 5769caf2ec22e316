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

/// Wakes the publisher when what it waits for may be there: a job finished, the last
/// of a round of jobs finished, or [`Done::signal`].
///
/// A tick posts a job to each GPU's worker and waits for them all ([`Worker::post_in_round`]):
/// only the round's last job to finish wakes the publisher, not each, since a wake-up
/// costs more than most of what the woken thread then does. A job of an earlier round
/// (a late one) wakes it as any other job ([`Worker::post`]) does, and a job nobody
/// waits for ([`Worker::post_quietly`]) never does.
#[derive(Default)]
pub struct Done {
    round: Mutex<Round>,
    cv: Condvar,
}

/// The round of jobs the publisher waits for.
#[derive(Default)]
struct Round {
    /// Which round it is ([`Done::begin`]).
    id: u64,
    /// Its jobs that have not finished.
    running: usize,
    /// How often a waiter was woken (tests).
    #[cfg(test)]
    wakes: u64,
}

/// Whom a job's end wakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// The waiter, at once.
    Always,
    /// The waiter, once it is the last of round `id` to finish (or when it finishes
    /// after its round).
    Round(u64),
    /// Nobody: the output is taken later.
    Never,
}

impl Done {
    /// Waits until `ready()` holds or `deadline` passes; returns whether it held.
    /// `ready` is checked under this signal's lock, so no finish can slip between the
    /// check and the wait. (Lock order: the publisher, the only thread that holds a
    /// worker's slot and this lock together, takes them in either order; a worker
    /// never holds its slot while it takes this lock.)
    pub fn wait_until(&self, deadline: Instant, mut ready: impl FnMut() -> bool) -> bool {
        let mut round = lock(&self.round);
        loop {
            if ready() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            round = match self.cv.wait_timeout(round, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
            #[cfg(test)]
            {
                round.wakes += 1;
            }
        }
    }

    /// Starts a round: the jobs posted with [`Worker::post_in_round`] from now on wake
    /// the waiter only when the last of them finishes.
    pub fn begin(&self) {
        let mut round = lock(&self.round);
        round.id += 1;
        round.running = 0;
    }

    /// A job of the current round was posted: its round.
    fn join(&self) -> u64 {
        let mut round = lock(&self.round);
        round.running += 1;
        round.id
    }

    /// A job ended: wakes the waiter as `wake` says.
    fn finished(&self, wake: Wake) {
        match wake {
            Wake::Never => return,
            Wake::Always => {}
            Wake::Round(id) => {
                let mut round = lock(&self.round);
                if round.id == id {
                    round.running = round.running.saturating_sub(1);
                    if round.running > 0 {
                        return;
                    }
                }
            }
        }
        self.signal();
    }

    /// Wakes the waiter (a job finished, a worker left, or the events thread let go of
    /// its session).
    pub fn signal(&self) {
        let _round = lock(&self.round);
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
    /// Whom the job's end wakes.
    wake: Wake,
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
                wake: Wake::Always,
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
    /// job back; its end wakes the waiter.
    pub fn post(&self, job: T::Job, now: Instant) -> Result<(), T::Job> {
        self.post_waking(job, now, || Wake::Always)
    }

    /// [`Self::post`] in the current round ([`Done::begin`]): its end wakes the waiter
    /// only when it is the round's last.
    pub fn post_in_round(&self, job: T::Job, now: Instant) -> Result<(), T::Job> {
        let done = &self.shared.done;
        self.post_waking(job, now, || Wake::Round(done.join()))
    }

    /// [`Self::post`] for a job nobody waits for: its end wakes nobody.
    pub fn post_quietly(&self, job: T::Job, now: Instant) -> Result<(), T::Job> {
        self.post_waking(job, now, || Wake::Never)
    }

    fn post_waking(
        &self,
        job: T::Job,
        now: Instant,
        wake: impl FnOnce() -> Wake,
    ) -> Result<(), T::Job> {
        let mut slot = lock(&self.shared.slot);
        if slot.busy_since.is_some() {
            return Err(job);
        }
        slot.job = Some(job);
        slot.busy_since = Some(now);
        slot.wake = wake();
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
        let wake = {
            let mut slot = lock(&shared.slot);
            std::mem::swap(&mut slot.out, &mut out);
            slot.fresh = true;
            slot.busy_since = None;
            slot.wake
        };
        shared.done.finished(wake);
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

    /// Three workers sharing one `Done`, each blocked on its job until its gate opens.
    fn three() -> (Vec<Worker<Sum>>, Arc<Done>, Vec<mpsc::Sender<()>>) {
        let done = Arc::new(Done::default());
        let (workers, gates) = (0..3)
            .map(|i| {
                let (tx, gate) = mpsc::channel();
                let task = Sum { total: 0, gate };
                let worker = Worker::spawn(format!("sum{i}"), task, Arc::clone(&done));
                (worker.unwrap(), tx)
            })
            .unzip();
        (workers, done, gates)
    }

    fn open_one_by_one(gates: Vec<mpsc::Sender<()>>) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            for gate in gates {
                std::thread::sleep(Duration::from_millis(30));
                gate.send(()).unwrap();
            }
        })
    }

    #[test]
    fn a_round_wakes_its_waiter_once_when_its_last_job_ends() {
        let (workers, done, gates) = three();
        done.begin();
        for w in &workers {
            assert!(w.post_in_round(0, Instant::now()).is_ok());
        }
        let opener = open_one_by_one(gates);
        assert!(done.wait_until(far(), || workers.iter().all(|w| w.has_fresh())));
        opener.join().unwrap();
        // Jobs posted with `post` wake it at each end (three times here).
        assert_eq!(
            lock(&done.round).wakes,
            1,
            "woken by each job, not the last"
        );

        let (workers, done, gates) = three();
        for w in &workers {
            assert!(w.post(0, Instant::now()).is_ok());
        }
        let opener = open_one_by_one(gates);
        assert!(done.wait_until(far(), || workers.iter().all(|w| w.has_fresh())));
        opener.join().unwrap();
        assert_eq!(lock(&done.round).wakes, 3);
    }

    #[test]
    fn a_job_of_an_earlier_round_wakes_the_waiter_and_a_quiet_one_does_not() {
        let (worker, done, gate) = sum();
        done.begin();
        assert!(worker.post_in_round(0, Instant::now()).is_ok());
        done.begin(); // the next tick: the job above is late
        let opener = open_one_by_one(vec![gate]);
        let asked = Instant::now();
        assert!(done.wait_until(far(), || worker.has_fresh()));
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "woken by the late job"
        );
        opener.join().unwrap();

        let (worker, done, gate) = sum();
        assert!(worker.post_quietly(0, Instant::now()).is_ok());
        let opener = open_one_by_one(vec![gate]);
        let asked = Instant::now();
        let deadline = asked + Duration::from_millis(300);
        // Its end wakes nobody: the waiter sees it only at its deadline.
        assert!(done.wait_until(deadline, || worker.has_fresh()));
        assert!(asked.elapsed() >= Duration::from_millis(300));
        opener.join().unwrap();
    }

    #[test]
    fn dropping_a_busy_worker_does_not_wait_for_it() {
        let (worker, _done, gate) = sum();
        assert!(worker.post(0, Instant::now()).is_ok());
        drop(worker); // returns at once although the job is blocked
        gate.send(()).unwrap();
    }
}

//! The daemon loop: wait on one thing (signals, or the next tick's deadline), do the
//! tick, compute the next deadline from the clock.
//!
//! Each tick samples every GPU into its slot; on the slow tier's ticks (see
//! [`crate::proctier`]) also their processes, resolved through `/proc`, and rewrites the
//! process table; then rewrites the MIG table with every GPU's MIG devices (see
//! [`crate::mig`]); then writes the status record (heartbeat), then bumps the
//! generation. While NVML cannot be initialised (or, initialised, cannot count the GPUs)
//! the status says so (code and message) and initialisation is retried with a doubling
//! backoff (see [`crate::driver`]); the heartbeat keeps beating so clients can tell
//! "NVML error" from "daemon dead". No NVML call runs on this thread: GPUs are sampled on
//! workers of their own ([`crate::session`]), waited for at most three quarters of a
//! period. A tick that overruns its period is logged and the missed ticks are skipped,
//! never queued.
//! The first SIGTERM/SIGINT stops cleanly (state "stopped"); a second one exits at once.
//!
//! Runtime power management (see [`crate::power`]): each tick first reads the GPUs'
//! sysfs power state; an asleep GPU is published from its kept identity without an NVML
//! call, and NVML is released (`nvmlShutdown`) while every GPU sleeps or idles, then
//! initialised again in the tick that finds one woken.
//! Each sampled GPU is judged for alerts ([`crate::alerts`]), and the service manager is
//! kept informed ([`crate::notify`]): ready after the first publish, watchdog pings from
//! this loop, stopping on the way out.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use signal_hook::consts::{SIGINT, SIGTERM};

use gpupeek_shm::layout::{DaemonState, GpuState, TrackKind};
use gpupeek_shm::{GpuRecord, Publisher, StatusRecord};

use crate::alerts::{Alerts, Thresholds};
use crate::driver::{put_system_info, Driver, Nvml};
use crate::history;
use crate::hooks;
use crate::notify::Notifier;
use crate::power::{self, RuntimePm, Wake};
use crate::privacy::{Choice, Privacy};
use crate::proctier::ProcTier;
use crate::prompt::PromptFile;
use crate::sampler::SystemInfo;
use crate::session::Answer;
use crate::timeline::Timeline;
use crate::waiter::{Request, Waiter};

/// History units (seconds) between two writes of the state file: a crash loses at most
/// this much history (a clean stop writes it all). Every minute would write a full
/// 8-GPU history (6 MB) 1,440 times a day; every ten minutes, 144.
const SAVE_UNITS: u32 = 600;

/// What the loop needs to know.
pub struct Config {
    /// Sampling period.
    pub interval: Duration,
    /// Period of the slow tier (processes, ECC); at least `interval`.
    pub process_interval: Duration,
    /// NVML library path, if not the system's.
    pub nvml_lib: Option<String>,
    /// When to log alerts.
    pub alerts: Thresholds,
    /// What to publish about processes.
    pub process_info: Choice,
    /// Where the proc filesystem is.
    pub proc_root: PathBuf,
    /// Where sysfs is mounted (normally `/sys`).
    pub sysfs_root: PathBuf,
    /// Whether the runtime power-management policy is on.
    pub runtime_pm: bool,
    /// How long every GPU must idle before NVML is released.
    pub release_after: Duration,
    /// The prompt file to rewrite each tick, if any.
    pub prompt: Option<PromptFile>,
    /// How long an NVML call may run before its GPU is published as not responding.
    pub nvml_timeout: Duration,
    /// The tiered history's unit: 1 s (tests shorten it, see [`hooks::HISTORY_UNIT_MS`]).
    pub history_unit: Duration,
    /// The history state file, if history is kept across restarts.
    pub state_file: Option<PathBuf>,
    /// The pods' views (`--pod-views`), if any.
    pub pod_views: Option<crate::podviews::PodViews>,
}

struct Daemon {
    config: Config,
    publisher: Publisher,
    procs: ProcTier,
    privacy: Privacy,
    /// NVML's state and the driver-wide calls.
    driver: Driver,
    pm: RuntimePm,
    gpu: GpuRecord,
    warned_capacity: bool,
    /// GPU writes left before the test hook freezes the daemon (see
    /// [`hooks::FREEZE_MID_WRITE`]).
    freeze_after: Option<u64>,
    alerts: Alerts,
    /// GPUs published by the last tick.
    gpu_count: u32,
    /// When to append to the history rings.
    history: history::Clock,
    /// This tick appends a history sample for every GPU it publishes.
    history_due: bool,
    /// The tiered history's tracks.
    timeline: Timeline,
    /// When to sample into the tracks.
    tier_clock: history::Clock,
    /// Wall-clock time of this tick's samples into the tracks, when it takes them.
    tier_due: Option<u64>,
    /// Writes the state file.
    saver: crate::statefile::Saver,
    /// The prompt file (moved out of the config), and the GPU records this tick
    /// published, in slot order, for it and the pod views to copy (kept only when
    /// there is one of them).
    prompt: Option<PromptFile>,
    /// The pods' views (moved out of the config).
    pod_views: Option<crate::podviews::PodViews>,
    published: Vec<GpuRecord>,
    /// Energy and ECC counters kept monotonic across NVML sessions.
    counters: crate::counters::Monotonic,
    /// The MIG devices of every GPU this tick publishes, for the MIG table.
    mig: Vec<gpupeek_shm::MigRecord>,
    /// A generation has been published (the service manager may hear "ready").
    has_published: bool,
}

/// Runs until a signal stops the daemon; returns the process exit status.
pub fn run(config: Config, publisher: Publisher) -> std::io::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGTERM, SIGINT] {
        // Order matters: the conditional handler sees the flag set by an earlier signal.
        signal_hook::flag::register_conditional_shutdown(signal, 1, Arc::clone(&stop))?;
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    let mut waiter = Waiter::new(Arc::clone(&stop))?;
    let mut notifier = Notifier::from_env();
    let mut daemon = Daemon::new(config, publisher)?;
    let period = daemon.config.interval;
    let mut deadline = Instant::now();
    let mut last_slow_log: Option<Instant> = None;
    let mut ready = false;
    while !stop.load(Ordering::Relaxed) {
        if let Some(request) = waiter.take_request() {
            daemon.on_request(request);
        }
        daemon.tick();
        if notifier.active() {
            let summary = daemon.summary();
            if ready {
                notifier.status(&summary);
            } else if daemon.has_published {
                // Ready once something is published (not while NVML is starting).
                notifier.ready(&summary);
                ready = true;
            }
        }
        let now = Instant::now();
        notifier.ping(now);
        deadline += period;
        if deadline < now {
            let behind = now - deadline;
            if last_slow_log.is_none_or(|t| now - t > Duration::from_secs(60)) {
                log::warn!(
                    "tick overran its {period:?} period by {behind:?}; skipping missed ticks"
                );
                last_slow_log = Some(now);
            }
            deadline = now + period;
        }
        waiter.until(deadline, &mut notifier)?;
    }
    log::info!("stopping");
    notifier.stopping();
    daemon.stop();
    Ok(())
}

impl Daemon {
    fn new(mut config: Config, publisher: Publisher) -> std::io::Result<Self> {
        let prompt = config.prompt.take();
        let pod_views = config.pod_views.take();
        let pm = RuntimePm::new(
            config.sysfs_root.clone(),
            config.runtime_pm,
            config.release_after,
        );
        let info = SystemInfo {
            driver_version: pm.driver_version(),
            ..Default::default()
        };
        let procs = ProcTier::new(config.process_interval, config.interval, &config.proc_root);
        let privacy = Privacy::judge(&config.proc_root, config.process_info, None);
        // The first tick can spend seconds in nvmlInit: until it publishes, readers judge
        // the "starting" state against the real period (a period of 0 made them call the
        // daemon stale after 1 s). No generation bump: nothing is published yet.
        publisher.set_status(&StatusRecord {
            heartbeat_mono_ns: gpupeek_shm::mono_now_ns(),
            period_ns: config.interval.as_nanos() as u64,
            ..Default::default()
        });
        // History a previous daemon left in the segment (taken over in place), else in
        // the state file.
        let in_segment: Vec<_> = (0..publisher.track_count())
            .filter_map(|i| publisher.read_track(i))
            .filter(|t| t.head.kind != TrackKind::Free as u32)
            .collect();
        let saver = crate::statefile::Saver::new(
            config.state_file.clone(),
            config.history_unit * SAVE_UNITS,
        );
        let previous = saver.previous(in_segment, unix_now_ns());
        let timeline = Timeline::new(&publisher, config.interval, config.history_unit, previous);
        let driver = Driver::new(
            config.nvml_lib.clone(),
            config.interval,
            config.nvml_timeout,
            info,
        )?;
        Ok(Daemon {
            publisher,
            procs,
            privacy,
            driver,
            pm,
            gpu: GpuRecord::default(),
            warned_capacity: false,
            freeze_after: hooks::get(hooks::FREEZE_MID_WRITE),
            alerts: Alerts::new(config.alerts),
            gpu_count: 0,
            history: history::Clock::new(config.interval),
            history_due: false,
            timeline,
            tier_clock: history::Clock::every(config.history_unit, config.interval),
            tier_due: None,
            saver,
            prompt,
            pod_views,
            published: Vec::new(),
            counters: Default::default(),
            mig: Vec::new(),
            has_published: false,
            config,
        })
    }

    /// One line on what the daemon is doing, for the service manager's status.
    fn summary(&self) -> String {
        match &self.driver.state {
            Nvml::Up(..) => format!(
                "publishing {} GPU{} every {:?}",
                self.gpu_count,
                if self.gpu_count == 1 { "" } else { "s" },
                self.config.interval
            ),
            Nvml::Down {
                failure: Some(failure),
                ..
            }
            | Nvml::Starting {
                failure: Some(failure),
                ..
            } => format!("NVML unavailable, retrying: {}", failure.message),
            Nvml::Down { .. } | Nvml::Starting { .. } => "initialising NVML".into(),
            Nvml::OnRequest { .. } => {
                "NVML released on request (gpupeekd --resume takes it back)".into()
            }
            Nvml::Released => format!(
                "GPUs asleep, NVML released; watching {} GPU{} in sysfs",
                self.gpu_count,
                if self.gpu_count == 1 { "" } else { "s" }
            ),
        }
    }

    fn tick(&mut self) {
        let now = Instant::now();
        // How long this tick may wait for its jobs: past it, a late GPU keeps its last
        // record (or is not responding) and the heartbeat goes out on time. A quarter
        // of the period is left for publishing.
        let wait_until = now + self.config.nvml_timeout.min(self.config.interval * 3 / 4);
        self.history_due = self.history.due(now);
        self.tier_due = self.tier_clock.due(now).then(unix_now_ns);
        if self.tier_due.is_some() && self.saver.due(now) {
            self.saver
                .save(self.timeline.tracks(&self.publisher), unix_now_ns());
        }
        self.pm.refresh();
        self.wake_if_needed(now);
        self.driver.retry(now, wait_until, &mut self.pm);
        if matches!(self.driver.state, Nvml::Up(..)) && self.pm.release_due(now) {
            log::info!(
                "every GPU is suspended or has idled for {:?}: releasing NVML so that they \
                 can runtime-suspend",
                self.pm.release_after()
            );
            self.driver.close(Nvml::Released);
            self.pm.park(now);
        }
        if self.driver.count(now) {
            self.procs
                .publish_empty(&self.publisher, &self.privacy.context);
            self.publisher.write_mig(&[]);
        }
        self.published.clear();
        let mut status = StatusRecord {
            period_ns: self.config.interval.as_nanos() as u64,
            ..Default::default()
        };
        match &self.driver.state {
            Nvml::Up(session) => {
                let count = session.count;
                let (published, ready) = self.sample_all(count, now, wait_until);
                status.gpu_count = published;
                if ready {
                    status.state = DaemonState::Live as u32;
                    self.gpu_count = published;
                }
            }
            Nvml::Released => {
                status.state = DaemonState::Live as u32;
                status.gpu_count = self.publish_sleeping();
                self.gpu_count = status.gpu_count;
            }
            Nvml::Down { .. } | Nvml::Starting { .. } | Nvml::OnRequest { .. } => {}
        }
        self.driver.put_status(now, &mut status);
        self.publish_status(&mut status);
        if let Some(prompt) = &mut self.prompt {
            prompt.update(&status, &self.published, self.history_due);
        }
        let history_step = self.history_step();
        if let Some(views) = &mut self.pod_views {
            let tick = crate::podviews::Tick {
                status: &status,
                gpus: &self.published,
                mig: &self.mig,
                history_step,
                tier_at: self.tier_due,
                procs: self.procs.table(),
            };
            views.publish(now, &tick);
        }
    }

    /// An operator's request: let go of NVML (for a GPU reset or a MIG change), or take
    /// it back.
    fn on_request(&mut self, request: Request) {
        if self.driver.on_request(request) {
            self.procs
                .publish_empty(&self.publisher, &self.privacy.context);
            self.publisher.write_mig(&[]);
        }
    }

    /// Keeps a copy of `self.gpu`, just published, for the prompt file.
    fn keep_published(&mut self) {
        if self.keeps_published() {
            self.published.push(self.gpu);
        }
    }

    /// Whether the tick's GPU records are kept (for the prompt file and the pod views).
    fn keeps_published(&self) -> bool {
        self.prompt.is_some() || self.pod_views.is_some()
    }

    /// While NVML is released: initialises it again (this tick) when a GPU woke up.
    fn wake_if_needed(&mut self, now: Instant) {
        if !matches!(self.driver.state, Nvml::Released) {
            return;
        }
        let Some(wake) = self.pm.wake(now) else {
            return;
        };
        match wake {
            Wake::Woken(addr) => log::info!("GPU {addr} woke up: initialising NVML"),
            Wake::StayedAwake(addr) => log::info!(
                "GPU {addr} did not runtime-suspend after NVML was released: something else \
                 keeps it awake; monitoring again (next release after {:?} idle)",
                self.pm.release_after()
            ),
            Wake::PmOff(addr) => {
                log::info!("runtime PM of GPU {addr} was switched off: initialising NVML")
            }
            Wake::Unreadable(addr) => {
                log::info!("the runtime PM state of GPU {addr} cannot be read: initialising NVML")
            }
        }
        self.driver.restart(now);
    }

    /// Samples GPUs `0..count` (bounded by the capacity), and their processes when the
    /// slow tier is due, each on its worker, waiting for them until `wait_until`; returns
    /// the number of GPU slots written, and whether every GPU has been heard from (the
    /// session is no longer starting). An asleep GPU is not queried.
    fn sample_all(&mut self, count: u32, now: Instant, wait_until: Instant) -> (u32, bool) {
        let history_step = self.history_step();
        let Nvml::Up(session) = &mut self.driver.state else {
            return (0, false);
        };
        let capacity = self.publisher.geometry().gpu_capacity as u32;
        if count > capacity && !self.warned_capacity {
            log::warn!("{count} GPUs found but the segment holds {capacity}; publishing the first {capacity}");
            self.warned_capacity = true;
        }
        // GPUs beyond the capacity are not watched, so they never count as idle.
        let mut all_idle = count <= capacity;
        let count = count.min(capacity);
        self.pm.set_gpu_count(count as usize);
        self.procs.begin(now, count);
        self.mig.clear();
        session.begin();
        for slot in 0..count as usize {
            if self.pm.asleep(slot) {
                session.asleep(slot);
            } else {
                let due = self.procs.due(slot as u32);
                if !session.post(slot, due, now) && due {
                    self.procs.defer(slot as u32);
                }
            }
        }
        session.wait(count as usize, wait_until);
        let ready = session.ready(count as usize, Instant::now());
        // While the session starts, a GPU not heard from yet would get a gap in its
        // history: the sample waits for the first tick with every GPU's answer.
        let history_step = history_step.filter(|_| ready);
        if !ready && self.history_due {
            self.history.again();
        }
        if !ready && self.tier_due.take().is_some() {
            self.tier_clock.again();
        }
        let mut all_keyed = true;
        for index in 0..count {
            let slot = index as usize;
            if self.pm.asleep(slot) {
                self.pm.sleeping_record(slot, &mut self.gpu);
                self.procs.gpu_absent(index);
            } else {
                let answer = session.record(slot, &mut self.gpu, Instant::now());
                if let Answer::NotYet = answer {
                    // Not heard from yet (the session is starting): nothing to judge.
                    all_idle = false;
                } else {
                    self.counters.apply(&mut self.gpu);
                    match answer {
                        Answer::Sampled {
                            mig,
                            procs,
                            procs_ns,
                            new_procs,
                            ..
                        } if self.gpu.state == GpuState::Ok as u32 => {
                            self.mig.extend_from_slice(mig);
                            // Each slow result once, on the tick it is taken.
                            if new_procs {
                                self.procs.set_gpu(index, procs, procs_ns);
                            }
                            self.procs.gpu_present(index);
                        }
                        _ => self.procs.gpu_absent(index),
                    }
                    self.pm.remember(slot, &self.gpu);
                    all_idle &= power::idle(&self.gpu, self.procs.compute_on(index));
                    // Each sample is judged once: a late GPU's record, republished, is not
                    // a second observation.
                    if !matches!(answer, Answer::Sampled { fresh: false, .. }) {
                        self.alerts.observe(&self.gpu);
                    }
                }
            }
            self.driver.xids.apply(&mut self.gpu);
            self.freeze_after = match self.freeze_after {
                Some(0) => {
                    freeze_mid_write(&self.publisher, slot, &self.gpu);
                    None
                }
                left => left.map(|n| n - 1),
            };
            publish_gpu(&self.publisher, &self.gpu, history_step, slot);
            self.timeline
                .record_gpu(&self.publisher, self.tier_due, &self.gpu);
            all_keyed &= self.gpu.valid & gpupeek_shm::layout::gpu_valid::UUID != 0;
            if self.prompt.is_some() || self.pod_views.is_some() {
                self.published.push(self.gpu);
            }
        }
        if let Some(at) = self.tier_due {
            // Every GPU answered and is keyed: history still waiting for a GPU is of
            // one that is gone.
            for m in &self.mig {
                self.timeline.record_mig(&self.publisher, at, m);
            }
            if all_keyed {
                self.timeline.settle();
            }
        }
        self.alerts.observe_count(count);
        self.pm.observe(now, all_idle);
        if self.privacy.due() {
            let was = self.privacy.context;
            self.privacy =
                Privacy::judge(&self.config.proc_root, self.config.process_info, Some(&was));
            if self.privacy.context != was {
                self.procs.rewrite();
            }
        }
        self.procs.publish(&self.publisher, &self.privacy.context);
        self.publisher.write_mig(&self.mig);
        (count, ready)
    }

    /// While NVML is released: publishes every GPU from its kept identity, suspended or
    /// idle, and an empty process table; returns the number of GPU slots written.
    fn publish_sleeping(&mut self) -> u32 {
        let capacity = self.publisher.geometry().gpu_capacity;
        let count = self.pm.gpu_count().min(capacity);
        for slot in 0..count {
            self.pm.sleeping_record(slot, &mut self.gpu);
            self.driver.xids.apply(&mut self.gpu);
            self.publish_gpu(slot);
            self.timeline
                .record_gpu(&self.publisher, self.tier_due, &self.gpu);
            self.keep_published();
        }
        self.procs
            .publish_empty(&self.publisher, &self.privacy.context);
        self.publisher.write_mig(&[]);
        count as u32
    }

    /// Publishes `self.gpu` into `slot`, and its history sample when one is due.
    fn publish_gpu(&self, slot: usize) {
        publish_gpu(&self.publisher, &self.gpu, self.history_step(), slot);
    }

    /// The history step when this tick appends to the rings.
    fn history_step(&self) -> Option<u64> {
        self.history_due.then(|| self.history.step_ns())
    }

    fn publish_status(&mut self, status: &mut StatusRecord) {
        status.heartbeat_mono_ns = gpupeek_shm::mono_now_ns();
        status.published_unix_ns = unix_now_ns();
        self.publisher.set_status(status);
        // While starting, only the heartbeat moves: the first generation is the first
        // tick with something to show (tests and `--follow` wait for it).
        if status.state != DaemonState::Starting as u32 {
            self.publisher.bump_generation();
            self.has_published = true;
        }
    }

    /// Shuts NVML down, then publishes the final "stopped" state.
    fn stop(mut self) {
        // nvmlShutdown before "stopped" is published; a worker stuck in a call delays
        // this by at most the NVML timeout (a second signal exits at once).
        self.driver.close(Nvml::Released);
        let tracks = self.timeline.tracks(&self.publisher);
        self.saver.save_now(tracks, unix_now_ns());
        let mut status = StatusRecord {
            state: DaemonState::Stopped as u32,
            period_ns: self.config.interval.as_nanos() as u64,
            ..Default::default()
        };
        put_system_info(&mut status, &self.driver.info);
        self.publish_status(&mut status);
        if let Some(views) = &mut self.pod_views {
            views.stop(&status);
        }
        if let Some(prompt) = &mut self.prompt {
            prompt.stopped();
        }
    }
}

/// Wall-clock time now, Unix ns (0 before 1970).
pub(crate) fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The test hook [`hooks::FREEZE_MID_WRITE`]: the daemon stops itself (SIGSTOP) inside a write of
/// `slot`, after its odd sequence and before any payload word.
fn freeze_mid_write(publisher: &Publisher, slot: usize, gpu: &GpuRecord) {
    publisher.write_gpu_interrupted(slot, gpu, || {
        let _ = nix::sys::signal::raise(nix::sys::signal::SIGSTOP);
    });
}

/// Publishes `gpu` into `slot`, and appends its history sample when `history_step`
/// (the ring's step, ns) says this tick appends.
fn publish_gpu(publisher: &Publisher, gpu: &GpuRecord, history_step: Option<u64>, slot: usize) {
    publisher.write_gpu(slot, gpu);
    if let Some(step_ns) = history_step {
        publisher.append_history(slot, step_ns, &history::sample_of(gpu));
    }
}

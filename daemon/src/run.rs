//! The daemon loop: wait on one thing (signals, or the next tick's deadline), do the
//! tick, compute the next deadline from the clock.
//!
//! Each tick samples every GPU into its slot, resolves the processes through `/proc`,
//! writes the process table, then the status record (heartbeat), then bumps the
//! generation. While NVML cannot be initialised the status says so (code and message)
//! and initialisation is retried with a doubling backoff capped at [`MAX_BACKOFF`]; the
//! heartbeat keeps beating so clients can tell "NVML error" from "daemon dead". A tick
//! that overruns its period is logged and the missed ticks are skipped, never queued.
//! The first SIGTERM/SIGINT stops cleanly (state "stopped"); a second one exits at once.
//! Each sampled GPU is judged for alerts ([`crate::alerts`]), and the service manager is
//! kept informed ([`crate::notify`]): ready after the first publish, watchdog pings from
//! this loop, stopping on the way out.

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mio::{Events, Interest, Poll, Token};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook_mio::v1_0::Signals;

use gpupeek_shm::layout::{proc_valid, status_valid, DaemonState};
use gpupeek_shm::{text, GpuRecord, ProcRecord, Publisher, StatusRecord};

use crate::alerts::{Alerts, Thresholds};
use crate::notify::Notifier;
use crate::procfs::Procfs;
use crate::sampler::{Failure, GpuProcess, Sampler, SystemInfo};

/// Longest wait between two NVML initialisation attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What the loop needs to know.
pub struct Config {
    /// Sampling period.
    pub interval: Duration,
    /// NVML library path, if not the system's.
    pub nvml_lib: Option<String>,
    /// When to log alerts.
    pub alerts: Thresholds,
}

enum Nvml {
    Up {
        sampler: Box<Sampler>,
        info: SystemInfo,
    },
    Down {
        failure: Failure,
        retry_at: Instant,
        backoff: Duration,
    },
}

struct Daemon {
    config: Config,
    publisher: Publisher,
    procfs: Procfs,
    nvml: Nvml,
    gpu: GpuRecord,
    gpu_procs: Vec<GpuProcess>,
    proc_records: Vec<ProcRecord>,
    warned_capacity: bool,
    alerts: Alerts,
    /// GPUs published by the last tick.
    gpu_count: u32,
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
    let mut daemon = Daemon::new(config, publisher);
    let period = daemon.config.interval;
    let mut deadline = Instant::now();
    let mut last_slow_log: Option<Instant> = None;
    let mut ready = false;
    while !stop.load(Ordering::Relaxed) {
        daemon.tick();
        if notifier.active() {
            let summary = daemon.summary();
            if ready {
                notifier.status(&summary);
            } else {
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

/// The one thing the loop waits on between ticks: signals, or a deadline.
struct Waiter {
    poll: Poll,
    events: Events,
    signals: Signals,
    stop: Arc<AtomicBool>,
}

impl Waiter {
    fn new(stop: Arc<AtomicBool>) -> std::io::Result<Self> {
        let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])?;
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut signals, Token(0), Interest::READABLE)?;
        Ok(Waiter {
            poll,
            events: Events::with_capacity(4),
            signals,
            stop,
        })
    }

    /// Sleeps until `deadline` or until a stop signal arrives, waking in between to send
    /// any watchdog ping that falls due.
    fn until(&mut self, deadline: Instant, notifier: &mut Notifier) -> std::io::Result<()> {
        loop {
            let now = Instant::now();
            if self.stop.load(Ordering::Relaxed) || now >= deadline {
                return Ok(());
            }
            let wake = match notifier.ping_due() {
                Some(due) if due <= now => {
                    notifier.ping(now);
                    continue;
                }
                Some(due) => due.min(deadline),
                None => deadline,
            };
            match self.poll.poll(&mut self.events, Some(wake - now)) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for signal in self.signals.pending() {
                match signal {
                    SIGHUP => {
                        log::info!("SIGHUP ignored: gpupeekd has no configuration to reload")
                    }
                    _ => log::info!("signal {signal} received"),
                }
            }
        }
    }
}

impl Daemon {
    fn new(config: Config, publisher: Publisher) -> Self {
        let nvml = Nvml::Down {
            failure: Failure {
                code: 0,
                message: "not initialised yet".into(),
            },
            retry_at: Instant::now(),
            backoff: config.interval,
        };
        Daemon {
            publisher,
            procfs: Procfs::new("/proc"),
            nvml,
            gpu: GpuRecord::default(),
            gpu_procs: Vec::new(),
            proc_records: Vec::new(),
            warned_capacity: false,
            alerts: Alerts::new(config.alerts),
            gpu_count: 0,
            config,
        }
    }

    /// One line on what the daemon is doing, for the service manager's status.
    fn summary(&self) -> String {
        match &self.nvml {
            Nvml::Up { .. } => format!(
                "publishing {} GPU{} every {:?}",
                self.gpu_count,
                if self.gpu_count == 1 { "" } else { "s" },
                self.config.interval
            ),
            Nvml::Down { failure, .. } => {
                format!("NVML unavailable, retrying: {}", failure.message)
            }
        }
    }

    fn tick(&mut self) {
        self.retry_nvml();
        let mut status = StatusRecord {
            period_ns: self.config.interval.as_nanos() as u64,
            ..Default::default()
        };
        match &mut self.nvml {
            Nvml::Up { sampler, info } => match sampler.device_count() {
                Ok(count) => {
                    put_system_info(&mut status, info);
                    status.state = DaemonState::Live as u32;
                    status.gpu_count = self.sample_all(count);
                    self.gpu_count = status.gpu_count;
                }
                Err(failure) => {
                    log::error!("NVML stopped working: {}", failure.message);
                    self.nvml = Nvml::Down {
                        failure,
                        retry_at: Instant::now() + self.config.interval,
                        backoff: self.config.interval,
                    };
                    self.publisher.write_processes(&[]);
                }
            },
            Nvml::Down { .. } => {}
        }
        if let Nvml::Down { failure, .. } = &self.nvml {
            status.state = DaemonState::NvmlError as u32;
            status.nvml_error_code = failure.code;
            text::encode(&mut status.error_message, &failure.message);
        }
        self.publish_status(status);
    }

    /// Tries to (re)initialise NVML when it is down and the backoff has passed.
    fn retry_nvml(&mut self) {
        let Nvml::Down {
            failure,
            retry_at,
            backoff,
        } = &mut self.nvml
        else {
            return;
        };
        if Instant::now() < *retry_at {
            return;
        }
        match Sampler::init(self.config.nvml_lib.as_deref()) {
            Ok(sampler) => {
                let info = sampler.system_info();
                log::info!(
                    "NVML initialised (driver {})",
                    info.driver_version.as_deref().unwrap_or("unknown")
                );
                self.nvml = Nvml::Up {
                    sampler: Box::new(sampler),
                    info,
                };
            }
            Err(new) => {
                if new != *failure {
                    log::error!(
                        "NVML initialisation failed: {} (code {})",
                        new.message,
                        new.code
                    );
                }
                *failure = new;
                *retry_at = Instant::now() + *backoff;
                *backoff = (*backoff * 2).min(MAX_BACKOFF.max(self.config.interval));
            }
        }
    }

    /// Samples GPUs `0..count` (bounded by the capacity) and the process table; returns
    /// the number of GPU slots written.
    fn sample_all(&mut self, count: u32) -> u32 {
        let Nvml::Up { sampler, .. } = &mut self.nvml else {
            return 0;
        };
        let capacity = self.publisher.geometry().gpu_capacity as u32;
        if count > capacity && !self.warned_capacity {
            log::warn!("{count} GPUs found but the segment holds {capacity}; publishing the first {capacity}");
            self.warned_capacity = true;
        }
        let count = count.min(capacity);
        self.gpu_procs.clear();
        for index in 0..count {
            sampler.sample(index, &mut self.gpu, &mut self.gpu_procs);
            self.publisher.write_gpu(index as usize, &self.gpu);
            self.alerts.observe(&self.gpu);
        }
        self.alerts.observe_count(count);
        self.proc_records.clear();
        self.procfs.new_tick();
        for p in &self.gpu_procs {
            self.proc_records.push(resolve(&mut self.procfs, p));
        }
        self.publisher.write_processes(&self.proc_records);
        count
    }

    fn publish_status(&self, mut status: StatusRecord) {
        status.heartbeat_mono_ns = gpupeek_shm::mono_now_ns();
        status.published_unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        self.publisher.set_status(&status);
        self.publisher.bump_generation();
    }

    /// Publishes the final "stopped" state; dropping `self` then releases NVML
    /// (`nvmlShutdown`, when the sampler is dropped).
    fn stop(self) {
        let mut status = StatusRecord {
            state: DaemonState::Stopped as u32,
            period_ns: self.config.interval.as_nanos() as u64,
            ..Default::default()
        };
        if let Nvml::Up { info, .. } = &self.nvml {
            put_system_info(&mut status, info);
        }
        self.publish_status(status);
    }
}

fn put_system_info(status: &mut StatusRecord, info: &SystemInfo) {
    if let Some(v) = &info.driver_version {
        text::encode(&mut status.driver_version, v);
        status.valid |= status_valid::DRIVER_VERSION;
    }
    if let Some(v) = &info.nvml_version {
        text::encode(&mut status.nvml_version, v);
        status.valid |= status_valid::NVML_VERSION;
    }
    if let Some(v) = info.cuda_driver_version {
        status.cuda_driver_version = v;
        status.valid |= status_valid::CUDA_DRIVER_VERSION;
    }
}

/// A process record with its `/proc` details.
fn resolve(procfs: &mut Procfs, p: &GpuProcess) -> ProcRecord {
    let mut rec = ProcRecord {
        gpu_index: p.gpu_index,
        pid: p.pid,
        kind: p.kind,
        gpu_instance_id: p.gpu_instance_id.unwrap_or(u32::MAX),
        compute_instance_id: p.compute_instance_id.unwrap_or(u32::MAX),
        ..Default::default()
    };
    if let Some(bytes) = p.gpu_mem_bytes {
        rec.gpu_mem_bytes = bytes;
        rec.valid |= proc_valid::GPU_MEMORY;
    }
    let info = procfs.lookup(p.pid);
    if let Some((uid, name)) = &info.user {
        rec.uid = *uid;
        text::encode(&mut rec.user, name);
        rec.valid |= proc_valid::USER;
    }
    if let Some(command) = &info.command {
        text::encode(&mut rec.command, command);
        rec.valid |= proc_valid::COMMAND;
    }
    rec
}

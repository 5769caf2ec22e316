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

use std::io::ErrorKind;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mio::{Events, Interest, Poll, Token};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook_mio::v1_0::Signals;

use gpupeek_shm::layout::{proc_flags, proc_valid, status_valid, DaemonState};
use gpupeek_shm::{text, GpuRecord, ProcContext, ProcPolicy, ProcRecord, Publisher, StatusRecord};

use crate::privacy::{self, Choice};
use crate::procfs::{self, ProcInfo, Procfs};
use crate::sampler::{Failure, GpuProcess, Sampler, SystemInfo};

/// Longest wait between two NVML initialisation attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What the loop needs to know.
pub struct Config {
    /// Sampling period.
    pub interval: Duration,
    /// NVML library path, if not the system's.
    pub nvml_lib: Option<String>,
    /// What to publish about processes.
    pub process_info: Choice,
    /// Where the proc filesystem is.
    pub proc_root: PathBuf,
}

/// How often `/proc`'s mount options are read again for `hidepid`.
const PRIVACY_RECHECK: Duration = Duration::from_secs(60);

/// The process policy in force, and when it was last judged.
struct Privacy {
    context: ProcContext,
    checked_at: Instant,
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
    privacy: Privacy,
    nvml: Nvml,
    gpu: GpuRecord,
    gpu_procs: Vec<GpuProcess>,
    proc_records: Vec<ProcRecord>,
    warned_capacity: bool,
}

/// Runs until a signal stops the daemon; returns the process exit status.
pub fn run(config: Config, publisher: Publisher) -> std::io::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGTERM, SIGINT] {
        // Order matters: the conditional handler sees the flag set by an earlier signal.
        signal_hook::flag::register_conditional_shutdown(signal, 1, Arc::clone(&stop))?;
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut signals, Token(0), Interest::READABLE)?;
    let mut events = Events::with_capacity(4);

    let mut daemon = Daemon::new(config, publisher);
    let period = daemon.config.interval;
    let mut deadline = Instant::now();
    let mut last_slow_log: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        daemon.tick();
        deadline += period;
        let now = Instant::now();
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
        wait_until(deadline, &mut poll, &mut events, &mut signals, &stop)?;
    }
    log::info!("stopping");
    daemon.stop();
    Ok(())
}

/// Sleeps until `deadline` or until a stop signal arrives.
fn wait_until(
    deadline: Instant,
    poll: &mut Poll,
    events: &mut Events,
    signals: &mut Signals,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    loop {
        let timeout = deadline.saturating_duration_since(Instant::now());
        if timeout.is_zero() || stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        match poll.poll(events, Some(timeout)) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        for signal in signals.pending() {
            match signal {
                SIGHUP => log::info!("SIGHUP ignored: gpupeekd has no configuration to reload"),
                _ => log::info!("signal {signal} received"),
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
        let procfs = Procfs::new(&config.proc_root);
        let privacy = Privacy::judge(&config);
        Daemon {
            config,
            publisher,
            procfs,
            privacy,
            nvml,
            gpu: GpuRecord::default(),
            gpu_procs: Vec::new(),
            proc_records: Vec::new(),
            warned_capacity: false,
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
                }
                Err(failure) => {
                    log::error!("NVML stopped working: {}", failure.message);
                    self.nvml = Nvml::Down {
                        failure,
                        retry_at: Instant::now() + self.config.interval,
                        backoff: self.config.interval,
                    };
                    self.publisher.write_processes(&self.privacy.context, &[]);
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
        }
        if self.privacy.checked_at.elapsed() >= PRIVACY_RECHECK {
            self.privacy = Privacy::judge(&self.config);
        }
        let policy = self.privacy.context.policy;
        self.proc_records.clear();
        self.procfs.new_tick(gpupeek_shm::mono_now_ns());
        if policy != ProcPolicy::None {
            for p in &self.gpu_procs {
                let mut rec = nvml_part(p);
                if policy == ProcPolicy::Full {
                    if let Some(info) = self.procfs.lookup(p.pid) {
                        put_proc_info(&mut rec, info);
                    }
                }
                self.proc_records.push(rec);
            }
        }
        self.publisher
            .write_processes(&self.privacy.context, &self.proc_records);
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

impl Privacy {
    /// Reads `/proc`'s mount options and decides the policy; logs when it changes.
    fn judge(config: &Config) -> Privacy {
        let hidepid = privacy::detect_hidepid(&config.proc_root);
        let policy = config.process_info.policy(hidepid);
        let context = ProcContext {
            policy,
            flags: if hidepid { proc_flags::HIDEPID } else { 0 },
            pid_ns_inode: procfs::pid_namespace_of(&config.proc_root),
        };
        log::info!(
            "publishing {} process information{}",
            policy.name(),
            if hidepid {
                " (/proc hides processes: hidepid)"
            } else {
                ""
            }
        );
        Privacy {
            context,
            checked_at: Instant::now(),
        }
    }
}

/// What NVML says about a process: all that the basic policy publishes.
fn nvml_part(p: &GpuProcess) -> ProcRecord {
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
    if let Some([sm, mem, enc, dec]) = p.util_pct {
        (rec.sm_util_pct, rec.mem_util_pct) = (sm, mem);
        (rec.enc_util_pct, rec.dec_util_pct) = (enc, dec);
        rec.valid |= proc_valid::GPU_UTIL;
    }
    rec
}

/// Adds what `/proc` says about a process (the full policy).
fn put_proc_info(rec: &mut ProcRecord, info: &ProcInfo) {
    if let Some((uid, name)) = &info.user {
        rec.uid = *uid;
        text::encode(&mut rec.user, name);
        rec.valid |= proc_valid::USER;
    }
    if let Some(command) = &info.command {
        text::encode(&mut rec.command, command);
        rec.valid |= proc_valid::COMMAND;
    }
    rec.cmdline_len = text::encode_argv(&mut rec.cmdline, &info.cmdline);
    rec.valid |= proc_valid::CMDLINE;
    if let Some(centipct) = info.cpu_centipct {
        rec.cpu_centipct = centipct;
        rec.valid |= proc_valid::CPU;
    }
    if let Some(rss) = info.rss_bytes {
        rec.host_rss_bytes = rss;
        rec.valid |= proc_valid::HOST_MEMORY;
    }
    if let Some(start) = info.start_unix_ns {
        rec.start_unix_ns = start;
        rec.valid |= proc_valid::START_TIME;
    }
    if let Some((ns_pid, inode)) = info.namespace {
        (rec.ns_pid, rec.pid_ns_inode) = (ns_pid, inode);
        rec.valid |= proc_valid::NAMESPACE;
    }
    if let Some(c) = &info.container {
        text::encode(&mut rec.container_runtime, c.runtime);
        text::encode(&mut rec.container_id, &c.id);
        text::encode(&mut rec.pod_uid, c.pod_uid.as_deref().unwrap_or(""));
        rec.valid |= proc_valid::CONTAINER;
    }
}

//! NVML's state as the daemon's loop sees it, and the driver-wide calls.
//!
//! NVML is up (a [`Session`] sampling every GPU on its own worker), down (initialisation
//! failed, or not tried yet: retried with a doubling backoff capped at [`MAX_BACKOFF`]),
//! starting (`nvmlInit` runs on the control worker), released by the runtime-PM policy,
//! or released on an operator's request. `nvmlInit` and the device count run on the
//! control worker ([`Control`]), never on the publishing thread: an `nvmlInit` that has
//! not returned after [`INIT_TIMEOUTS`] NVML timeouts is published as NVML error 10
//! (timeout), "driver not responding", and a count that never returns leaves the GPUs
//! published by the last count.
//!
//! Closing a session ([`Driver::close`]) waits, up to the NVML timeout, until every
//! worker has let go of it, so that `nvmlShutdown` has run when the new state is
//! published.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gpupeek_shm::layout::DaemonState;
use gpupeek_shm::{text, StatusRecord};

use crate::power::RuntimePm;
use crate::reads::Failure;
use crate::sampler::{Closed, SystemInfo};
use crate::session::{Control, ControlJob, ControlOut, Session};
use crate::waiter::Request;
use crate::worker::{Done, Worker};
use crate::xid::Xids;

/// Longest wait between two NVML initialisation attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How many NVML timeouts `nvmlInit` may run before the daemon says the driver does not
/// respond (30 s by default): it takes seconds on a large machine without persistence
/// mode.
const INIT_TIMEOUTS: u32 = 15;

/// NVML's `NVML_ERROR_TIMEOUT`, published while a call the status depends on does not
/// return.
const NVML_ERROR_TIMEOUT: i32 = 10;

/// Where NVML stands.
pub enum Nvml {
    /// Initialised: sampling, each GPU on a worker of its own.
    Up(Box<Session>),
    /// Not initialised (never yet, when `failure` is `None`): `nvmlInit` is tried at
    /// `retry_at`.
    Down {
        failure: Option<Failure>,
        retry_at: Instant,
        backoff: Duration,
    },
    /// `nvmlInit` runs on the control worker since `since` (`hung` once it has run past
    /// [`INIT_TIMEOUTS`] NVML timeouts: published as an NVML error, and logged once).
    Starting {
        failure: Option<Failure>,
        since: Instant,
        backoff: Duration,
        hung: bool,
    },
    /// Released by the runtime-PM policy while the GPUs sleep or idle.
    Released,
    /// Released on an operator's request until asked to take it back; `closing` while
    /// a call that has not returned still holds the session open.
    OnRequest { closing: Option<Closed> },
}

/// NVML's state and the control worker.
pub struct Driver {
    /// Where NVML stands.
    pub state: Nvml,
    /// Driver-wide facts from the last NVML session (or the driver version from sysfs).
    pub info: SystemInfo,
    /// Runs `nvmlInit` and the device count.
    control: Worker<Control>,
    /// A device count posted to the control worker and not answered yet.
    counting: bool,
    /// Signalled by every worker's finished job.
    done: Arc<Done>,
    /// The NVML library, if not the system's.
    lib: Option<String>,
    interval: Duration,
    timeout: Duration,
    /// The Xids every session counts (see [`crate::events`]), kept across sessions.
    pub xids: Xids,
}

impl Driver {
    /// Not initialised yet, to be tried at once; `lib` is the NVML library (the
    /// system's when `None`), `interval` the sampling period, `timeout` the NVML
    /// timeout.
    pub fn new(
        lib: Option<String>,
        interval: Duration,
        timeout: Duration,
        info: SystemInfo,
    ) -> std::io::Result<Self> {
        let done = Arc::new(Done::default());
        let control = Worker::spawn("nvml".into(), Control, Arc::clone(&done))?;
        Ok(Driver {
            state: not_initialised(Instant::now(), interval),
            info,
            control,
            counting: false,
            done,
            lib,
            interval,
            timeout,
            xids: Xids::default(),
        })
    }

    /// NVML is to be initialised again, at once.
    pub fn restart(&mut self, now: Instant) {
        self.state = not_initialised(now, self.interval);
    }

    /// An operator's request: let go of NVML (for a GPU reset or a MIG change), or take
    /// it back. Returns whether NVML was let go of (the process table is to be emptied).
    pub fn on_request(&mut self, request: Request) -> bool {
        match (request, &self.state) {
            (Request::Release, Nvml::OnRequest { .. }) | (Request::Resume, Nvml::Up(..)) => false,
            (Request::Release, _) => {
                log::info!("releasing NVML on request (SIGUSR1); SIGUSR2 takes it back");
                let closing = self.close(Nvml::OnRequest { closing: None });
                self.state = Nvml::OnRequest { closing };
                true
            }
            (Request::Resume, Nvml::OnRequest { .. }) => {
                log::info!("taking NVML back on request (SIGUSR2)");
                self.restart(Instant::now());
                false
            }
            (Request::Resume, _) => false,
        }
    }

    /// Ends the NVML session (if one is up) and goes to `next`; waits, up to the NVML
    /// timeout, for every worker to let go of it so that `nvmlShutdown` has run when the
    /// new state is published. A worker stuck in a call keeps the session open until the
    /// call returns: then what tells when it closes is returned.
    pub fn close(&mut self, next: Nvml) -> Option<Closed> {
        let Nvml::Up(session) = std::mem::replace(&mut self.state, next) else {
            return None;
        };
        let closed = session.closed();
        // `nvmlShutdown` runs where the last share of the session is dropped: ours goes
        // to the control worker, so that a driver stuck there cannot stop the
        // publishing thread (when that worker is busy, it is dropped here).
        drop(
            self.control
                .post(ControlJob::Close(session), Instant::now()),
        );
        let deadline = Instant::now() + self.timeout;
        if self.done.wait_until(deadline, || closed.is_closed()) {
            return None;
        }
        log::warn!(
            "NVML is not shut down yet: a call has not returned; it shuts down when the call \
             returns"
        );
        Some(closed)
    }

    /// Starts `nvmlInit` on the control worker when NVML is down and the backoff has
    /// passed (or parks instead when every GPU is asleep, since initialising NVML would
    /// wake them), and waits for it until `wait_until`.
    pub fn retry(&mut self, now: Instant, wait_until: Instant, pm: &mut RuntimePm) {
        if let Nvml::Down {
            failure,
            retry_at,
            backoff,
        } = &mut self.state
        {
            if now < *retry_at {
                return;
            }
            if pm.park_if_all_asleep(now) {
                log::info!("every GPU is runtime-suspended: NVML is left alone until one wakes");
                self.state = Nvml::Released;
                return;
            }
            if self
                .control
                .post(ControlJob::Init(self.lib.clone()), now)
                .is_err()
            {
                return; // still busy with a late count of an earlier session
            }
            self.state = Nvml::Starting {
                failure: failure.take(),
                since: now,
                backoff: *backoff,
                hung: false,
            };
        }
        let Nvml::Starting {
            failure,
            since,
            backoff,
            hung,
        } = &mut self.state
        else {
            return;
        };
        let control = &self.control;
        self.done.wait_until(wait_until, || control.has_fresh());
        let mut out = ControlOut::None;
        if !self.control.take(&mut out) {
            let limit = self.timeout * INIT_TIMEOUTS;
            if !*hung && now.saturating_duration_since(*since) >= limit {
                log::error!("nvmlInit has not returned for {limit:?}: the driver does not respond");
                *hung = true;
            }
            return;
        }
        match out {
            ControlOut::Init(Ok((sampler, info, count))) => {
                self.info = info;
                log::info!(
                    "NVML initialised (driver {})",
                    self.info.driver_version.as_deref().unwrap_or("unknown")
                );
                let session = Session::new(
                    sampler,
                    count,
                    self.timeout,
                    Arc::clone(&self.done),
                    &self.xids,
                );
                self.state = Nvml::Up(Box::new(session));
                pm.discover();
            }
            ControlOut::Init(Err(new)) => {
                if failure.as_ref() != Some(&new) {
                    log::error!(
                        "NVML initialisation failed: {} (code {})",
                        new.message,
                        new.code
                    );
                }
                let backoff = *backoff;
                self.state = Nvml::Down {
                    failure: Some(new),
                    retry_at: now + backoff,
                    backoff: (backoff * 2).min(MAX_BACKOFF.max(self.interval)),
                };
            }
            // A count of an earlier session, answered late: nothing to do with it.
            ControlOut::Count(_) | ControlOut::None => {}
        }
    }

    /// Takes the newest device count and asks for the next one (the GPUs are published
    /// by the last count meanwhile); drops an answer nobody waits for any more (an
    /// `nvmlInit` that returned after an operator's release, say) so that no session
    /// stays open in it. Returns whether NVML went down because it could not count
    /// (the process table is to be emptied).
    pub fn count(&mut self, now: Instant) -> bool {
        let Nvml::Up(session) = &mut self.state else {
            if !self.counting && !matches!(self.state, Nvml::Starting { .. }) {
                let mut stray = ControlOut::None;
                self.control.take(&mut stray);
            }
            return false;
        };
        let mut out = ControlOut::None;
        if self.counting && self.control.take(&mut out) {
            self.counting = false;
        }
        match out {
            ControlOut::Count(Ok(count)) => session.count = count,
            ControlOut::Count(Err(failure)) => {
                log::error!("NVML stopped working: {}", failure.message);
                self.close(Nvml::Down {
                    failure: Some(failure),
                    retry_at: now + self.interval,
                    backoff: self.interval,
                });
                return true;
            }
            ControlOut::Init(_) | ControlOut::None => {}
        }
        if !self.counting {
            // Taken on a later tick: its end need not wake the publisher.
            let job = ControlJob::Count(session.sampler().clone());
            self.counting = self.control.post_quietly(job, now).is_ok();
        }
        false
    }

    /// Fills in what the status says about NVML when it is not up and sampling: an NVML
    /// error (a failed initialisation, an `nvmlInit` that does not return), released on
    /// request, and the driver facts unless still starting.
    pub fn put_status(&self, now: Instant, status: &mut StatusRecord) {
        let mut error = |code: i32, message: &str| {
            status.state = DaemonState::NvmlError as u32;
            status.nvml_error_code = code;
            text::encode(&mut status.error_message, message);
        };
        match &self.state {
            Nvml::Down {
                failure: Some(failure),
                ..
            }
            | Nvml::Starting {
                failure: Some(failure),
                hung: false,
                ..
            } => error(failure.code, &failure.message),
            Nvml::Starting {
                since, hung: true, ..
            } => error(
                NVML_ERROR_TIMEOUT,
                &format!(
                    "driver not responding: nvmlInit has not returned for {}s",
                    now.saturating_duration_since(*since).as_secs()
                ),
            ),
            Nvml::OnRequest { closing } if closing.as_ref().is_some_and(|c| !c.is_closed()) => {
                error(
                    NVML_ERROR_TIMEOUT,
                    "releasing NVML on request: waiting for a call that has not returned",
                )
            }
            Nvml::OnRequest { .. } => status.state = DaemonState::Released as u32,
            _ => {}
        }
        if status.state != DaemonState::Starting as u32 {
            put_system_info(status, &self.info);
        }
    }
}

/// NVML not initialised yet, to be tried at `now`.
fn not_initialised(now: Instant, interval: Duration) -> Nvml {
    Nvml::Down {
        failure: None,
        retry_at: now,
        backoff: interval,
    }
}

/// The driver, NVML and CUDA versions the status carries.
pub fn put_system_info(status: &mut StatusRecord, info: &SystemInfo) {
    if let Some(v) = &info.driver_version {
        text::encode(&mut status.driver_version, v);
        status.valid |= gpupeek_shm::layout::status_valid::DRIVER_VERSION;
    }
    if let Some(v) = &info.nvml_version {
        text::encode(&mut status.nvml_version, v);
        status.valid |= gpupeek_shm::layout::status_valid::NVML_VERSION;
    }
    if let Some(v) = info.cuda_driver_version {
        status.cuda_driver_version = v;
        status.valid |= gpupeek_shm::layout::status_valid::CUDA_DRIVER_VERSION;
    }
}

//! What the fleet view knows about a host, whatever the source: its GPUs with their
//! processes, or why it could not be read (a [`Fault`]). Sources fill [`Report`]s;
//! [`classify`] then marks each GPU free or idle-allocated, the same way for every source.
//!
//! Units: memory in MiB (gpustat's, 2^20 bytes, rounded down), utilisation in whole
//! percent.

use serde::Serialize;

/// One host as read this round.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// How the table names it: the endpoint as given (`--host`), or Prometheus's
    /// `instance` label.
    pub host: String,
    /// What was asked (the `/snapshot` URL, or the Prometheus server).
    pub endpoint: String,
    /// The name the host gives itself (`/snapshot`'s `node`), when known.
    pub node: Option<String>,
    /// The daemon's health, when the host answered.
    pub daemon: Option<Daemon>,
    /// Why the host's GPUs are not shown (`null` when they are).
    pub error: Option<Fault>,
    /// The GPUs, free ones first.
    pub gpus: Vec<Gpu>,
}

impl Report {
    /// A host still being read (in a round's progress: see [`crate::source::Progress`]).
    pub fn waiting(host: String, endpoint: String) -> Report {
        Report::failed(host, endpoint, Fault::new(WAITING, "no answer yet"))
    }

    /// Whether it is a host still being read.
    pub fn is_waiting(&self) -> bool {
        self.error.as_ref().is_some_and(|f| f.kind == WAITING)
    }

    /// A host that could not be read.
    pub fn failed(host: String, endpoint: String, fault: Fault) -> Report {
        Report {
            host,
            endpoint,
            node: None,
            daemon: None,
            error: Some(fault),
            gpus: Vec::new(),
        }
    }
}

impl Report {
    /// Every text of the report made printable, control characters replaced by `?`
    /// ([`gpupeek_shm::text::printable_str`]): a host's answer, a Prometheus label or an
    /// API server's message may hold a terminal escape sequence (another host's serve, an
    /// exporter Prometheus scrapes that writes gpupeek's names), which the table would
    /// otherwise send to the user's terminal.
    pub fn make_printable(&mut self) {
        let text = |s: &mut String| {
            if let std::borrow::Cow::Owned(clean) = gpupeek_shm::text::printable_str(s) {
                *s = clean;
            }
        };
        let maybe = |s: &mut Option<String>| s.iter_mut().for_each(text);
        text(&mut self.host);
        text(&mut self.endpoint);
        maybe(&mut self.node);
        if let Some(d) = &mut self.daemon {
            text(&mut d.state);
            maybe(&mut d.error);
        }
        if let Some(f) = &mut self.error {
            text(&mut f.reason);
        }
        for g in &mut self.gpus {
            for s in [
                &mut g.name,
                &mut g.uuid,
                &mut g.state,
                &mut g.verdict,
                &mut g.pod,
            ] {
                maybe(s);
            }
            g.users.iter_mut().for_each(text);
            for p in &mut g.processes {
                for s in [&mut p.user, &mut p.command, &mut p.pod, &mut p.job] {
                    maybe(s);
                }
            }
            for m in &mut g.mig {
                for s in [&mut m.profile, &mut m.verdict, &mut m.pod] {
                    maybe(s);
                }
                m.users.iter_mut().for_each(text);
            }
        }
    }
}

/// The daemon's health as the host's segment tells it (`/snapshot`'s `daemon`).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Daemon {
    /// `gpupeek_daemon_state`'s word: `live`, `stale`, `no_segment`, ...
    pub state: String,
    /// Seconds since its last heartbeat.
    pub age_s: Option<f64>,
    /// Whether its numbers are not current.
    pub stale: bool,
    /// What is wrong, when something is.
    pub error: Option<String>,
}

/// The fault kind of a host still being read.
const WAITING: &str = "waiting";

/// Why a host is not shown.
#[derive(Debug, Clone, Serialize)]
pub struct Fault {
    /// `refused`, `timeout`, `unreachable`, `tls`, `unauthorized`, `http`,
    /// `bad_response`, `stale_daemon`, or (Kubernetes) `not_ready` and `not_found`.
    pub kind: &'static str,
    /// One line for a person.
    pub reason: String,
}

impl Fault {
    /// A fault of `kind` for `reason`.
    pub fn new(kind: &'static str, reason: impl Into<String>) -> Fault {
        Fault {
            kind,
            reason: reason.into(),
        }
    }
}

/// One GPU.
#[derive(Debug, Clone, Serialize)]
pub struct Gpu {
    /// NVML index.
    pub index: u32,
    /// Product name.
    pub name: Option<String>,
    /// UUID.
    pub uuid: Option<String>,
    /// `null` for a GPU sampled normally; else `suspended`, `idle` (asleep), `lost`,
    /// `error` or `not responding`.
    pub state: Option<String>,
    /// GPU utilisation, %.
    pub utilization_pct: Option<u32>,
    /// Memory used, MiB.
    pub memory_used_mib: Option<u64>,
    /// Memory total, MiB.
    pub memory_total_mib: Option<u64>,
    /// gpupeek's verdict (`idle-holding`, `healthy`, ...), when it can be told.
    pub verdict: Option<String>,
    /// No process, under 1 GiB used, under 5 % utilisation (or asleep), and assigned to
    /// no pod.
    pub free: bool,
    /// Held while nothing runs: the verdict says `idle-holding`, it is assigned to a pod
    /// and runs no process, or (with `-i`) memory was held at 0 % utilisation in each of
    /// the last three rounds.
    pub idle_allocated: bool,
    /// Users with processes on it, by name, each once.
    pub users: Vec<String>,
    /// The Kubernetes pod it is assigned to, `NAMESPACE/POD`, when the source knows
    /// (the kubelet's pod-resources API, through serve's `/snapshot` or the metrics'
    /// pod labels).
    pub pod: Option<String>,
    /// Its processes, as far as the source tells them.
    pub processes: Vec<Process>,
    /// Its MIG devices, when MIG is on: then they, not the GPU, are what a job is given,
    /// and the GPU itself is never free.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mig: Vec<Mig>,
}

impl Gpu {
    /// GPU `index` with nothing known of it yet, for a source to fill.
    pub fn new(index: u32) -> Gpu {
        Gpu {
            index,
            name: None,
            uuid: None,
            state: None,
            utilization_pct: None,
            memory_used_mib: None,
            memory_total_mib: None,
            verdict: None,
            free: false,
            idle_allocated: false,
            users: Vec::new(),
            pod: None,
            processes: Vec::new(),
            mig: Vec::new(),
        }
    }
}

/// One MIG device of a GPU: a compute instance of a GPU instance. Sources fill what
/// they know over [`Default`]; [`classify`] sets `free` and `idle_allocated`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Mig {
    /// Its GPU instance id.
    pub gpu_instance_id: u32,
    /// Its compute instance id.
    pub compute_instance_id: u32,
    /// Its profile (`3g.40gb`), when known.
    pub profile: Option<String>,
    /// Memory of its GPU instance used, MiB.
    pub memory_used_mib: Option<u64>,
    /// Memory of its GPU instance, MiB.
    pub memory_total_mib: Option<u64>,
    /// Processes running in it, when known.
    pub processes: Option<u32>,
    /// How busy its GPU instance was, %, when the source says (dcgm-exporter's
    /// `DCGM_FI_PROF_GR_ENGINE_ACTIVE`, which names no process).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activity_pct: Option<u32>,
    /// gpupeek's verdict for it, when it can be told.
    pub verdict: Option<String>,
    /// Users with processes in it, when the source names them, each once.
    pub users: Vec<String>,
    /// The Kubernetes pod it is assigned to, `NAMESPACE/POD`, when the source knows.
    pub pod: Option<String>,
    /// No process in it, under 1 GiB used and assigned to no pod, its GPU sampled
    /// normally.
    pub free: bool,
    /// Its verdict says `idle-holding`, or it is assigned to a pod and runs no process.
    pub idle_allocated: bool,
}

/// A process on a GPU.
#[derive(Debug, Clone, Serialize)]
pub struct Process {
    /// Its user (`null` when withheld).
    pub user: Option<String>,
    /// Its pid on its host.
    pub pid: Option<u32>,
    /// Its command.
    pub command: Option<String>,
    /// GPU memory it holds, MiB.
    pub memory_mib: Option<u64>,
    /// Its Kubernetes pod: `NAMESPACE/POD` when known (that of the device it runs on),
    /// else the pod uid from its cgroup.
    pub pod: Option<String>,
    /// Its GPU instance, on a MIG GPU.
    pub gpu_instance_id: Option<u32>,
    /// Its Slurm job id, when it runs in one.
    pub job: Option<String>,
}

/// Under this much memory used a GPU may be free, MiB.
const FREE_MEMORY_MIB: u64 = 1024;
/// Under this utilisation a GPU may be free, %.
const FREE_UTIL_PCT: u32 = 5;

/// Marks the GPUs and MIG devices free and idle-allocated, adds their processes' users
/// to the users the source named (each once, sorted) and puts free GPUs first. A GPU
/// with MIG on is never free itself: its devices are, each on its own. A device
/// assigned to a pod is not free, whatever runs on it (the scheduler will not give it
/// to another), and idle-allocated while no process runs on it.
pub fn classify(report: &mut Report) {
    for g in &mut report.gpus {
        let asleep = matches!(g.state.as_deref(), Some("suspended" | "idle"));
        g.free = g.mig.is_empty()
            && g.pod.is_none()
            && (g.state.is_none()
                && g.processes.is_empty()
                && g.users.is_empty()
                && g.memory_used_mib.is_some_and(|m| m < FREE_MEMORY_MIB)
                && g.utilization_pct.is_some_and(|u| u < FREE_UTIL_PCT)
                || asleep);
        for m in &mut g.mig {
            // No process in it, or (a source that names none) no activity.
            let unused =
                m.processes == Some(0) || (m.processes.is_none() && m.activity_pct == Some(0));
            m.free = g.state.is_none()
                && m.pod.is_none()
                && unused
                && m.memory_used_mib.is_some_and(|u| u < FREE_MEMORY_MIB);
            m.idle_allocated = m.verdict.as_deref() == Some("idle-holding")
                || (m.pod.is_some() && m.processes == Some(0));
            m.users.sort();
            m.users.dedup();
        }
        g.mig
            .sort_by_key(|m| (m.gpu_instance_id, m.compute_instance_id));
        g.idle_allocated |= g.verdict.as_deref() == Some("idle-holding")
            || (g.pod.is_some() && g.mig.is_empty() && g.state.is_none() && g.processes.is_empty());
        g.users
            .extend(g.processes.iter().filter_map(|p| p.user.clone()));
        g.users.sort();
        g.users.dedup();
        g.processes.sort_by_key(|p| (p.pid, p.memory_mib));
    }
    report.gpus.sort_by_key(|g| (!g.free, g.index));
}

/// Whether `gpu` holds memory with nothing running this round (for `-i`'s history).
pub fn holding_idle(gpu: &Gpu) -> bool {
    let holds =
        !gpu.processes.is_empty() || gpu.memory_used_mib.is_some_and(|m| m >= FREE_MEMORY_MIB);
    holds && gpu.utilization_pct == Some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every text of a report, from any source, loses its control characters: the JSON
    /// of a report whose every text holds an escape has none left, C0 or C1.
    #[test]
    fn every_text_of_a_report_is_made_printable() {
        let evil = |what: &str| format!("{what}\u{1b}]0;pwned\u{7}\u{9b}31m\n");
        let some = |what: &str| Some(evil(what));
        let mut r = Report {
            host: evil("host"),
            endpoint: evil("endpoint"),
            node: some("node"),
            daemon: Some(Daemon {
                state: evil("state"),
                age_s: None,
                stale: true,
                error: some("daemon"),
            }),
            error: Some(Fault::new("bad_response", evil("reason"))),
            gpus: vec![Gpu {
                name: some("name"),
                uuid: some("uuid"),
                state: some("state"),
                verdict: some("verdict"),
                users: vec![evil("user")],
                pod: some("pod"),
                processes: vec![Process {
                    user: some("user"),
                    pid: Some(1),
                    command: some("command"),
                    memory_mib: None,
                    pod: some("pod"),
                    gpu_instance_id: None,
                    job: some("job"),
                }],
                mig: vec![Mig {
                    profile: some("profile"),
                    verdict: some("verdict"),
                    users: vec![evil("user")],
                    pod: some("pod"),
                    ..Default::default()
                }],
                ..Gpu::new(0)
            }],
        };
        let before = serde_json::to_string(&r).unwrap();
        assert_eq!(before.matches("\\u001b").count(), 20, "{before}");
        r.make_printable();
        let after = serde_json::to_string(&r).unwrap();
        assert!(
            !after.contains("\\u00") && !after.chars().any(char::is_control),
            "{after}"
        );
        assert_eq!(after.matches("?]0;pwned??31m?").count(), 20, "{after}");
    }

    #[test]
    fn a_gpus_users_are_the_sources_and_its_processes_each_once() {
        let process = |user: &str| Process {
            user: Some(user.into()),
            pid: Some(1),
            command: None,
            memory_mib: Some(1),
            pod: None,
            gpu_instance_id: None,
            job: None,
        };
        let mut report = Report::failed("h".into(), "e".into(), Fault::new("http", "x"));
        report.gpus.push(Gpu {
            utilization_pct: Some(0),
            memory_used_mib: Some(2048),
            users: vec!["carol".into(), "alice".into()],
            processes: vec![process("bob"), process("alice")],
            ..Gpu::new(0)
        });
        classify(&mut report);
        assert_eq!(report.gpus[0].users, ["alice", "bob", "carol"]);
        assert!(!report.gpus[0].free);
    }

    fn device(gi: u32, processes: Option<u32>, used: u64, verdict: Option<&str>) -> Mig {
        Mig {
            gpu_instance_id: gi,
            compute_instance_id: 0,
            profile: Some("1g.10gb".into()),
            memory_used_mib: Some(used),
            memory_total_mib: Some(9984),
            processes,
            verdict: verdict.map(str::to_owned),
            users: vec!["bo".into(), "al".into(), "bo".into()],
            ..Default::default()
        }
    }

    /// A GPU split into MIG devices is never free itself, however idle: each device is
    /// free when it runs nothing, holds under 1 GiB and its GPU is sampled normally.
    #[test]
    fn a_mig_gpu_is_never_free_its_devices_are_each_on_their_own() {
        let mut report = Report::failed("h".into(), "e".into(), Fault::new("http", "x"));
        let mut gpu = Gpu {
            utilization_pct: Some(0),
            memory_used_mib: Some(0),
            memory_total_mib: Some(81920),
            mig: vec![
                device(13, Some(0), 2048, None),
                device(5, Some(1), 10, Some("idle-holding")),
                device(1, Some(0), 0, None),
                device(7, None, 0, None),
            ],
            ..Gpu::new(0)
        };
        report.gpus.push(gpu.clone());
        classify(&mut report);
        let g = &report.gpus[0];
        assert!(!g.free, "a MIG GPU is not free itself");
        let seen: Vec<(u32, bool, bool)> = g
            .mig
            .iter()
            .map(|m| (m.gpu_instance_id, m.free, m.idle_allocated))
            .collect();
        // Sorted by instance; 13 holds 2 GiB, 5 runs a process, 7's processes unknown.
        assert_eq!(
            seen,
            [
                (1, true, false),
                (5, false, true),
                (7, false, false),
                (13, false, false)
            ]
        );
        assert_eq!(g.mig[0].users, ["al", "bo"]);

        // A GPU that is not sampled normally has no free device.
        gpu.state = Some("not responding".into());
        report.gpus = vec![gpu];
        classify(&mut report);
        assert!(report.gpus[0].mig.iter().all(|m| !m.free));
    }
}

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
    /// No process, under 1 GiB used, under 5 % utilisation (or asleep).
    pub free: bool,
    /// Memory held by processes while nothing runs: the verdict says `idle-holding`, or
    /// (with `-i`) utilisation was 0 % in each of the last three rounds.
    pub idle_allocated: bool,
    /// Users with processes on it, by name, each once.
    pub users: Vec<String>,
    /// Its processes, as far as the source tells them.
    pub processes: Vec<Process>,
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
    /// Its Kubernetes pod: the name when known, else the pod uid.
    pub pod: Option<String>,
    /// Its Slurm job id, when it runs in one.
    pub job: Option<String>,
}

/// Under this much memory used a GPU may be free, MiB.
const FREE_MEMORY_MIB: u64 = 1024;
/// Under this utilisation a GPU may be free, %.
const FREE_UTIL_PCT: u32 = 5;

/// Marks the GPUs free and idle-allocated, adds their processes' users to the users the
/// source named (each once, sorted) and puts free GPUs first.
pub fn classify(report: &mut Report) {
    for g in &mut report.gpus {
        let asleep = matches!(g.state.as_deref(), Some("suspended" | "idle"));
        g.free = g.state.is_none()
            && g.processes.is_empty()
            && g.users.is_empty()
            && g.memory_used_mib.is_some_and(|m| m < FREE_MEMORY_MIB)
            && g.utilization_pct.is_some_and(|u| u < FREE_UTIL_PCT)
            || asleep;
        g.idle_allocated |= g.verdict.as_deref() == Some("idle-holding");
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

    #[test]
    fn a_gpus_users_are_the_sources_and_its_processes_each_once() {
        let process = |user: &str| Process {
            user: Some(user.into()),
            pid: Some(1),
            command: None,
            memory_mib: Some(1),
            pod: None,
            job: None,
        };
        let mut report = Report::failed("h".into(), "e".into(), Fault::new("http", "x"));
        report.gpus.push(Gpu {
            index: 0,
            name: None,
            uuid: None,
            state: None,
            utilization_pct: Some(0),
            memory_used_mib: Some(2048),
            memory_total_mib: None,
            verdict: None,
            free: false,
            idle_allocated: false,
            users: vec!["carol".into(), "alice".into()],
            processes: vec![process("bob"), process("alice")],
        });
        classify(&mut report);
        assert_eq!(report.gpus[0].users, ["alice", "bob", "carol"]);
        assert!(!report.gpus[0].free);
    }
}

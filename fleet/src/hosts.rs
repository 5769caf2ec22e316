//! The hosts' own `gpupeek serve`: each is asked for `/snapshot` (the `gpupeek --json`
//! document with `node` and `daemon`) over its own connection, at most `--jobs` at once,
//! all by the round's deadline. A host whose daemon is not live is a `stale_daemon`
//! fault with the daemon's own words.

use std::sync::Arc;
use std::time::Instant;

use serde::Deserialize;

use crate::hostlist;
use crate::model::{Daemon, Fault, Gpu, Mig, Process, Report};
use crate::source::{fan_out, Http, Progress, Source};

/// The port `gpupeek serve` listens on by default.
const DEFAULT_PORT: u16 = 9477;

/// A host to ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// As the table names it: `HOST` or `HOST:PORT` as given, without a scheme.
    pub host: String,
    /// The `/snapshot` URL.
    pub url: String,
}

/// Parses one `--host` (or hostfile line): `HOST`, `HOST:PORT`, `V6`, `[V6]:PORT`, or an
/// `http://` or `https://` URL (its path is ignored).
pub fn endpoint(spec: &str) -> Result<Endpoint, String> {
    let bad = |why: &str| format!("bad host {spec:?}: {why}");
    let (scheme, rest) = match spec.split_once("://") {
        Some(("http", rest)) => ("http", rest),
        Some(("https", rest)) => ("https", rest),
        Some((other, _)) => return Err(bad(&format!("scheme {other}:// is not http or https"))),
        None => ("http", spec),
    };
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() || authority.contains(char::is_whitespace) || authority.contains('@') {
        return Err(bad("expected HOST[:PORT] or a URL"));
    }
    // A bare IPv6 address (more than one colon, no brackets): the default port.
    let bracketed;
    let authority = if !authority.starts_with('[') && authority.matches(':').count() > 1 {
        if authority.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(bad("an IPv6 address is ADDR, or [ADDR]:PORT with a port"));
        }
        bracketed = format!("[{authority}]");
        bracketed.as_str()
    } else {
        authority
    };
    let has_port = match authority.rfind(']') {
        Some(close) => authority[close..].contains(':'),
        None => authority.contains(':'),
    };
    if authority.starts_with('[') != authority.contains(']') {
        return Err(bad("unbalanced [ ]"));
    }
    let with_port = if has_port {
        let port = authority.rsplit(':').next().unwrap_or_default();
        if port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(bad("the port is not a number from 1 to 65535"));
        }
        authority.to_owned()
    } else {
        format!("{authority}:{DEFAULT_PORT}")
    };
    let host = if scheme == "https" {
        format!("https://{authority}")
    } else {
        authority.to_owned()
    };
    Ok(Endpoint {
        host,
        url: format!("{scheme}://{with_port}/snapshot"),
    })
}

/// The endpoints of `--host` and `--hostfile` (`-`: standard input), in order, each once;
/// a Slurm hostlist expression stands for its hosts ([`hostlist`]).
pub fn endpoints(hosts: &[String], files: &[String]) -> Result<Vec<Endpoint>, String> {
    let mut specs: Vec<String> = hosts.to_vec();
    for path in files {
        let text = match path.as_str() {
            "-" => std::io::read_to_string(std::io::stdin()),
            _ => std::fs::read_to_string(path),
        };
        let text = text.map_err(|e| format!("cannot read --hostfile {path}: {e}"))?;
        for (n, line) in text.lines().enumerate() {
            let name = if path == "-" { "standard input" } else { path };
            if let Some(spec) =
                hostfile_line(line).map_err(|e| format!("{name} line {}: {e}", n + 1))?
            {
                specs.push(spec.to_owned());
            }
        }
    }
    let mut out: Vec<Endpoint> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for spec in specs {
        for host in hostlist::expand(&spec)? {
            let e = endpoint(&host)?;
            if seen.insert((e.host.clone(), e.url.clone())) {
                out.push(e);
            }
        }
    }
    Ok(out)
}

/// The host of a hostfile line, if it names one: `HOST` as `--host` takes it, after
/// which an MPI or DeepSpeed hostfile's `slots=N` (and Open MPI's `max_slots=N` or
/// `max-slots=N`) are allowed and ignored, so that a job's hostfile can be given as it
/// is; `#` starts a comment.
fn hostfile_line(line: &str) -> Result<Option<&str>, String> {
    let mut words = line
        .split('#')
        .next()
        .unwrap_or_default()
        .split_whitespace();
    let Some(host) = words.next() else {
        return Ok(None);
    };
    for host in hostlist::expand(host)? {
        endpoint(&host)?;
    }
    for word in words {
        let slots = ["slots=", "max_slots=", "max-slots="]
            .iter()
            .find_map(|key| word.strip_prefix(key))
            .is_some_and(|n| n.parse::<u32>().is_ok());
        if !slots {
            return Err(format!(
                "{word:?} after host {host:?}: expected one host a line, optionally with \
                 slots=N as MPI and DeepSpeed hostfiles have it"
            ));
        }
    }
    Ok(Some(host))
}

/// The hosts' serves.
pub struct Hosts {
    endpoints: Vec<Endpoint>,
    http: Arc<Http>,
    jobs: usize,
}

impl Hosts {
    /// Asks `endpoints` through `http`, `jobs` at once.
    pub fn new(endpoints: Vec<Endpoint>, http: Http, jobs: usize) -> Hosts {
        Hosts {
            endpoints,
            http: Arc::new(http),
            jobs,
        }
    }
}

impl Source for Hosts {
    fn round(&mut self, deadline: Instant, progress: Option<&mut Progress>) -> Vec<Report> {
        read(
            self.endpoints.clone(),
            &self.http,
            self.jobs,
            deadline,
            progress,
        )
    }

    fn what(&self) -> String {
        match self.endpoints.len() {
            1 => "1 host".into(),
            n => format!("{n} hosts"),
        }
    }
}

/// Each of `endpoints`' `/snapshot` through `http`, `jobs` at once, by `deadline`: a
/// report each, in their order (also for the Kubernetes source, whose endpoints change
/// from round to round), and what is read so far through `progress` when given.
pub fn read(
    endpoints: Vec<Endpoint>,
    http: &Arc<Http>,
    jobs: usize,
    deadline: Instant,
    progress: Option<&mut Progress>,
) -> Vec<Report> {
    let http = http.clone();
    let pending = |e: &Endpoint| Report::waiting(e.host.clone(), e.url.clone());
    fan_out(
        endpoints,
        jobs,
        deadline,
        move |e| ask(&http, e, deadline),
        |e| {
            let fault = Fault::new("timeout", "no answer within --timeout");
            Report::failed(e.host.clone(), e.url.clone(), fault)
        },
        progress.map(|p| (p, &pending as &dyn Fn(&Endpoint) -> Report)),
    )
}

fn ask(http: &Http, e: &Endpoint, deadline: Instant) -> Report {
    let left = deadline.saturating_duration_since(Instant::now());
    let failed = |fault| Report::failed(e.host.clone(), e.url.clone(), fault);
    let body = match http.get(&e.url, left) {
        Ok(body) => body,
        Err(fault) => return failed(fault),
    };
    match parse(&body) {
        Ok(doc) => report(e, doc),
        Err(why) => failed(Fault::new("bad_response", why)),
    }
}

/// `/snapshot`, the keys the fleet reads.
#[derive(Deserialize)]
struct Snapshot {
    node: String,
    daemon: Daemon,
    gpus: Vec<SnapGpu>,
    /// The devices the kubelet assigns to pods (serve with the pod-resources socket).
    pods: Option<Vec<SnapPod>>,
}

/// A GPU or MIG device `/snapshot` says is assigned to a pod.
#[derive(Deserialize)]
struct SnapPod {
    gpu: u32,
    gpu_instance_id: Option<u32>,
    namespace: String,
    pod: String,
}

/// `NAMESPACE/POD` of the device `(gpu, gpu_instance_id)` in `pods`.
fn pod_of(pods: &[SnapPod], gpu: u32, gi: Option<u32>) -> Option<String> {
    pods.iter()
        .find(|p| p.gpu == gpu && p.gpu_instance_id == gi)
        .map(|p| format!("{}/{}", p.namespace, p.pod))
}

#[derive(Deserialize)]
struct SnapGpu {
    index: u32,
    name: Option<String>,
    uuid: Option<String>,
    state: Option<String>,
    #[serde(rename = "utilization.gpu")]
    utilization: Option<u32>,
    #[serde(rename = "memory.used")]
    memory_used: Option<u64>,
    #[serde(rename = "memory.total")]
    memory_total: Option<u64>,
    processes: Option<Vec<SnapProcess>>,
    verdict: Option<String>,
    mig: Option<Vec<SnapMig>>,
}

/// A MIG device of `/snapshot`'s GPU (`gpupeek --json`'s `mig` list).
#[derive(Deserialize)]
struct SnapMig {
    gpu_instance_id: u32,
    compute_instance_id: u32,
    profile: Option<String>,
    #[serde(rename = "memory.used")]
    memory_used: Option<u64>,
    #[serde(rename = "memory.total")]
    memory_total: Option<u64>,
    verdict: Option<String>,
    pids: Option<Vec<u32>>,
}

#[derive(Deserialize)]
struct SnapProcess {
    username: Option<String>,
    command: Option<String>,
    gpu_memory_usage: Option<u64>,
    pid: Option<u32>,
    gpu_instance_id: Option<u32>,
    container: Option<SnapContainer>,
}

#[derive(Deserialize)]
struct SnapContainer {
    runtime: Option<String>,
    id: Option<String>,
    pod_uid: Option<String>,
}

impl SnapContainer {
    /// The Slurm job id, for a process in a job's cgroup.
    fn job(&self) -> Option<String> {
        (self.runtime.as_deref() == Some("slurm"))
            .then(|| self.id.clone())
            .flatten()
    }
}

fn parse(body: &str) -> Result<Snapshot, String> {
    serde_json::from_str(body).map_err(|e| {
        let start: String = body.chars().take(40).collect();
        format!("not a gpupeek /snapshot ({e}): {start:?}")
    })
}

fn report(e: &Endpoint, doc: Snapshot) -> Report {
    let error = doc.daemon.stale.then(|| {
        let why = doc
            .daemon
            .error
            .clone()
            .unwrap_or_else(|| doc.daemon.state.clone());
        Fault::new("stale_daemon", why)
    });
    let gpus = if error.is_some() {
        Vec::new()
    } else {
        let pods = doc.pods.unwrap_or_default();
        doc.gpus.into_iter().map(|g| gpu(g, &pods)).collect()
    };
    Report {
        host: e.host.clone(),
        endpoint: e.url.clone(),
        node: Some(doc.node),
        daemon: Some(doc.daemon),
        error,
        gpus,
    }
}

fn gpu(g: SnapGpu, pods: &[SnapPod]) -> Gpu {
    // gpustat's invalid GPU carries its problem as its name; its state says which.
    let name = if g.processes.is_none() && g.state.is_some() {
        None
    } else {
        g.name
    };
    let processes: Vec<Process> = g
        .processes
        .unwrap_or_default()
        .into_iter()
        .map(|p| Process {
            user: p.username,
            pid: p.pid,
            command: p.command,
            memory_mib: p.gpu_memory_usage,
            job: p.container.as_ref().and_then(SnapContainer::job),
            pod: pod_of(pods, g.index, p.gpu_instance_id)
                .or_else(|| p.container.and_then(|c| c.pod_uid)),
            gpu_instance_id: p.gpu_instance_id,
        })
        .collect();
    let mig = g.mig.unwrap_or_default();
    let mig = mig.into_iter().map(|m| {
        let pids = m.pids.unwrap_or_default();
        let users = processes
            .iter()
            .filter(|p| p.pid.is_some_and(|pid| pids.contains(&pid)))
            .filter_map(|p| p.user.clone())
            .collect();
        Mig {
            gpu_instance_id: m.gpu_instance_id,
            compute_instance_id: m.compute_instance_id,
            profile: m.profile,
            memory_used_mib: m.memory_used,
            memory_total_mib: m.memory_total,
            processes: Some(pids.len() as u32),
            verdict: m.verdict,
            users,
            pod: pod_of(pods, g.index, Some(m.gpu_instance_id)),
            ..Default::default()
        }
    });
    Gpu {
        name,
        uuid: g.uuid,
        state: g.state,
        utilization_pct: g.utilization,
        memory_used_mib: g.memory_used,
        memory_total_mib: g.memory_total,
        verdict: g.verdict,
        pod: pod_of(pods, g.index, None),
        mig: mig.collect(),
        processes,
        ..Gpu::new(g.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_host_port_or_a_url_and_the_port_defaults_to_9477() {
        let url = |s: &str| endpoint(s).map(|e| e.url);
        assert_eq!(url("gpu1").unwrap(), "http://gpu1:9477/snapshot");
        assert_eq!(url("gpu1:80").unwrap(), "http://gpu1:80/snapshot");
        assert_eq!(
            url("http://gpu1:1/metrics").unwrap(),
            "http://gpu1:1/snapshot"
        );
        assert_eq!(url("https://gpu1").unwrap(), "https://gpu1:9477/snapshot");
        assert_eq!(url("[::1]").unwrap(), "http://[::1]:9477/snapshot");
        assert_eq!(url("[::1]:5").unwrap(), "http://[::1]:5/snapshot");
        assert_eq!(url("::1").unwrap(), "http://[::1]:9477/snapshot");
        assert_eq!(url("fd00::5").unwrap(), "http://[fd00::5]:9477/snapshot");
        assert_eq!(
            url("https://fd00::5").unwrap(),
            "https://[fd00::5]:9477/snapshot"
        );
        assert_eq!(endpoint("https://gpu1:5").unwrap().host, "https://gpu1:5");
        assert_eq!(endpoint("gpu1:5").unwrap().host, "gpu1:5");
        for bad in [
            "",
            "ftp://x",
            "x:0",
            "x:y",
            "x:70000",
            "[::1",
            "a b",
            "u@h",
            "fd00::g:1",
        ] {
            assert!(endpoint(bad).is_err(), "{bad:?}");
        }
    }

    /// A hostfile line: a host, a comment, or an MPI or DeepSpeed hostfile's line.
    #[test]
    fn a_hostfile_line_is_a_host_with_slots_allowed_and_a_comment() {
        for (line, host) in [
            ("gpu1", Some("gpu1")),
            ("  gpu1:9000  # rack 2", Some("gpu1:9000")),
            ("# all of rack 3", None),
            ("", None),
            ("worker-1 slots=8", Some("worker-1")),
            ("node07 slots=4 max_slots=8", Some("node07")),
            ("node07 max-slots=8", Some("node07")),
        ] {
            assert_eq!(hostfile_line(line), Ok(host), "{line:?}");
        }
        for bad in ["gpu1 gpu2", "gpu1 slots=", "gpu1 slots=x", "u@h slots=8"] {
            assert!(hostfile_line(bad).is_err(), "{bad:?}");
        }
        let why = hostfile_line("gpu1 gpu2").unwrap_err();
        assert!(why.contains("\"gpu2\" after host \"gpu1\""), "{why}");
    }
}

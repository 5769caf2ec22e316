//! The fleet as a Prometheus server sees it: instant queries of gpupeek's own metric
//! names (the states that hold only) and of `up` for their scrape jobs, and a look at its
//! targets when one of those is down, whatever the number of hosts, so the view costs
//! the nodes nothing. A host is a target (`instance`) of a scrape job that
//! has gpupeek series. A target whose last scrape failed (`up` 0) is shown with
//! Prometheus's `lastError`; one whose exporter says the daemon is not live
//! (`gpupeek_daemon_state`) as a stale daemon. Processes and users are there when the
//! exporters run with `--per-process` and `--per-user`. A target with no gpupeek GPU
//! series is read through dcgm-exporter's ([`dcgm`]), so one server may have both.

mod dcgm;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use crate::model::{Fault, Gpu, Mig, Process, Report};
use crate::source::{Http, Progress, Source};

/// The gpupeek series the fleet reads for their values.
const GPUPEEK: &str = "gpupeek_(up|heartbeat_age_seconds|gpu_info|gpu_utilization_ratio|\
    gpu_memory_used_bytes|gpu_memory_total_bytes|user_gpu_memory_bytes|\
    process_gpu_memory_bytes|mig_info|mig_memory_used_bytes|mig_memory_total_bytes|\
    mig_processes)";

/// The gpupeek series that say a state, one series a possible state with the one that
/// holds at 1: only those at 1 are asked for (most of these series are 0, about half of
/// all the series of a host).
const GPUPEEK_STATES: &str = "gpupeek_(daemon_state|gpu_state|gpu_verdict|mig_verdict)";

/// The queries: gpupeek's series and dcgm-exporter's ([`dcgm::NAMES`]); the states that
/// hold (a comparison without `bool` keeps the metric name); and `up` of the scrape jobs
/// that have gpupeek's or dcgm-exporter's series or are named after either (whose
/// targets may all be down), not of every target the server scrapes. Apart, as `or`
/// would drop a series whose labels are those of another's: it matches label sets
/// without the metric name.
fn queries() -> [String; 3] {
    let ours = format!("{{__name__=~\"{GPUPEEK}|{}\"}}", dcgm::NAMES.join("|"));
    let states = format!("{{__name__=~\"{GPUPEEK_STATES}\"}} == 1");
    let up = format!("up and on(job) group by (job) ({ours}) or up{{job=~\".*(gpupeek|dcgm).*\"}}");
    [ours, states, up]
}

/// A Prometheus server.
pub struct Prometheus {
    base: String,
    http: Http,
}

impl Prometheus {
    /// The server at `url` (`http://prometheus:9090`, or a path prefix under it).
    pub fn new(url: &str, http: Http) -> Result<Prometheus, String> {
        let base = url.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(format!(
                "bad --prometheus {url:?}: expected an http:// or https:// URL"
            ));
        }
        if base.contains(['?', '#']) {
            return Err(format!(
                "bad --prometheus {url:?}: a query or fragment in the URL (the API's paths \
                 go after it)"
            ));
        }
        let authority = base.split("://").nth(1).unwrap_or_default();
        if authority
            .split('/')
            .next()
            .unwrap_or_default()
            .contains('@')
        {
            // Shown in the table, the JSON and ps, and not sent by the client.
            return Err(
                "bad --prometheus: a user or password in the URL; give --user and \
                 --password-file, or --bearer-token-file"
                    .into(),
            );
        }
        Ok(Prometheus { base, http })
    }
}

/// One sample of an instant vector.
#[derive(Deserialize)]
struct Sample {
    metric: BTreeMap<String, String>,
    value: (Value, String),
}

impl Sample {
    fn name(&self) -> &str {
        self.label("__name__")
    }
    fn label(&self, key: &str) -> &str {
        self.metric.get(key).map_or("", String::as_str)
    }
    /// The label `key`'s value, unless empty.
    fn text(&self, key: &str) -> Option<String> {
        Some(self.label(key))
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    }
    fn value(&self) -> f64 {
        self.value.1.parse().unwrap_or(f64::NAN)
    }
}

impl Source for Prometheus {
    /// One server, one answer: nothing to show before it.
    fn round(&mut self, deadline: Instant, _: Option<&mut Progress>) -> Vec<Report> {
        let endpoint = self.base.clone();
        let mut samples = Vec::new();
        for query in queries() {
            match self.query(&query, deadline) {
                Ok(more) => samples.extend(more),
                Err(fault) => return vec![Report::failed(endpoint.clone(), endpoint, fault)],
            }
        }
        // The targets (all of them: the API filters by scrape pool only, which need not
        // be the job) only when one of ours is down, for its error.
        let down = samples.iter().any(|s| s.name() == "up" && s.value() != 1.0);
        let errors = match down {
            true => self.target_errors(deadline),
            false => Vec::new(),
        };
        reports(&endpoint, &samples, &errors)
    }

    fn what(&self) -> String {
        format!("Prometheus at {}", self.base)
    }
}

impl Prometheus {
    /// The `data` of the API's answer at `path` with `query`, as `T` (`what` it is, for
    /// the fault when it is not).
    fn answer<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, &str)],
        deadline: Instant,
        what: &str,
    ) -> Result<T, Fault> {
        let left = deadline.saturating_duration_since(Instant::now());
        let body = self
            .http
            .get_query(&format!("{}{path}", self.base), query, left)?;
        decode(&body, what)
    }

    fn query(&self, query: &str, deadline: Instant) -> Result<Vec<Sample>, Fault> {
        let vector: Vector = self.answer(
            "/api/v1/query",
            &[("query", query)],
            deadline,
            "an instant vector",
        )?;
        Ok(vector.result)
    }

    /// Each target that failed its last scrape, with the error (empty when the API has
    /// no targets).
    fn target_errors(&self, deadline: Instant) -> Vec<TargetError> {
        let query = [("state", "active")];
        let Ok(targets) = self.answer::<Targets>("/api/v1/targets", &query, deadline, "targets")
        else {
            return Vec::new();
        };
        targets
            .active
            .into_iter()
            .filter(|t| !t.error.is_empty())
            .map(|t| TargetError {
                labels: t.labels,
                error: t.error,
            })
            .collect()
    }
}

/// An API answer's `data` as `T`, decoded straight from `body` (a large fleet's answer is
/// tens of MB: no tree of JSON values in between); an error answer is the server's words.
fn decode<T: DeserializeOwned>(body: &str, what: &str) -> Result<T, Fault> {
    #[derive(Deserialize)]
    struct Answer<T> {
        status: String,
        data: Option<T>,
        error: Option<String>,
    }
    let bad = |why: String| Err(Fault::new("bad_response", why));
    // An error answer is the server's words, whatever its data.
    let says = |status: String, error: Option<String>| {
        bad(format!("Prometheus says: {}", error.unwrap_or(status)))
    };
    match serde_json::from_str::<Answer<T>>(body) {
        Ok(a) if a.status != "success" => says(a.status, a.error),
        Ok(Answer {
            data: Some(data), ..
        }) => Ok(data),
        Ok(_) => bad(format!("not {what}: no data")),
        // Not of the shape asked: an error answer whose data is something else, another
        // kind of data, or not the API at all.
        Err(e) => match serde_json::from_str::<Answer<serde::de::IgnoredAny>>(body) {
            Ok(a) if a.status != "success" => says(a.status, a.error),
            Ok(_) => bad(format!("not {what}: {e}")),
            Err(e) => bad(format!("not a Prometheus API answer: {e}")),
        },
    }
}

/// An instant query's `data`.
#[derive(Deserialize)]
struct Vector {
    result: Vec<Sample>,
}

/// The targets API's `data`: each active target's labels and last scrape error (its
/// discovered labels, most of the answer, are skipped unread).
#[derive(Deserialize)]
struct Targets {
    #[serde(rename = "activeTargets", default)]
    active: Vec<Target>,
}

#[derive(Deserialize)]
struct Target {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(rename = "lastError", default)]
    error: String,
}

/// A target whose last scrape failed: its labels (as its series carry them) and
/// Prometheus's `lastError`.
struct TargetError {
    labels: BTreeMap<String, String>,
    error: String,
}

/// A scrape error's kind, from Prometheus's words.
fn scrape_fault(error: &str) -> Fault {
    let kind = if error.contains("connection refused") {
        "refused"
    } else if error.contains("deadline exceeded") || error.contains("timeout") {
        "timeout"
    } else if error.contains("no such host") || error.contains("unreachable") {
        "unreachable"
    } else {
        "bad_response"
    };
    Fault::new(kind, error)
}

/// How the target with `labels` is named: its `instance`, after its `cluster` label
/// when it has one (a Thanos or Mimir of several clusters, whose nodes' names may be
/// alike); a dcgm-exporter target (`dcgm`) by its node, else the `Hostname` its series
/// carry (`hostnames`, by cluster and instance; [`dcgm::host`]).
fn host_of(
    labels: &BTreeMap<String, String>,
    dcgm: bool,
    hostnames: &BTreeMap<(&str, &str), String>,
) -> String {
    let label = |key: &str| labels.get(key).filter(|v| !v.is_empty()).cloned();
    if dcgm {
        return dcgm::host(label, hostnames.get(&target(labels)));
    }
    let instance = label("instance").unwrap_or_default();
    match label("cluster") {
        None => instance,
        Some(cluster) => format!("{cluster}/{instance}"),
    }
}

/// A target's `(cluster, instance)`, from its labels.
fn target(labels: &BTreeMap<String, String>) -> (&str, &str) {
    let label = |key: &str| labels.get(key).map_or("", String::as_str);
    (label("cluster"), label("instance"))
}

/// How a target's GPUs are read: through gpupeek's series, or dcgm-exporter's.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Names {
    Gpupeek,
    Dcgm,
}

/// The names each target's GPUs are read by, by `(cluster, instance)`: gpupeek's when it
/// has gpupeek GPU series, dcgm-exporter's when it has dcgm-exporter's and no gpupeek
/// GPU series (dcgm-exporter itself, or `gpupeek serve --names dcgm`, whose daemon's
/// series come with them). A target with neither (down, or its daemon not live) is read
/// as the other targets of its job are, else by its job's name (`dcgm` in it, else
/// gpupeek's). So one server may have both: a cluster with gpupeek on some nodes and
/// only the GPU operator's dcgm-exporter on others shows every node.
fn names_by_target(samples: &[Sample]) -> impl Fn(&Sample) -> Names + '_ {
    let mut targets: BTreeMap<(&str, &str), Names> = BTreeMap::new();
    for s in samples {
        let names = if gpupeek_gpu_series(s.name()) {
            Names::Gpupeek
        } else if dcgm::read(s.name()) {
            Names::Dcgm
        } else {
            continue;
        };
        let t = targets.entry(target(&s.metric)).or_insert(names);
        if names == Names::Gpupeek {
            *t = names;
        }
    }
    let mut jobs: BTreeMap<&str, Names> = BTreeMap::new();
    for s in samples {
        if let Some(&names) = targets.get(&target(&s.metric)) {
            jobs.entry(s.label("job")).or_insert(names);
        }
    }
    move |s: &Sample| {
        let job = s.label("job");
        targets
            .get(&target(&s.metric))
            .or_else(|| jobs.get(job))
            .copied()
            .unwrap_or(match job.contains("dcgm") {
                true => Names::Dcgm,
                false => Names::Gpupeek,
            })
    }
}

/// A gpupeek series about a GPU or MIG device (under gpupeek's names).
fn gpupeek_gpu_series(name: &str) -> bool {
    [
        "gpupeek_gpu_",
        "gpupeek_mig_",
        "gpupeek_user_",
        "gpupeek_process_",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// The hosts of the answer `samples`, each read through gpupeek's names or
/// dcgm-exporter's ([`names_by_target`]); a host read through dcgm-exporter's that
/// gpupeek's show too (a GPU UUID, or its node, in both) is left out, so that no GPU
/// shows twice.
fn reports(endpoint: &str, samples: &[Sample], failed: &[TargetError]) -> Vec<Report> {
    let names = names_by_target(samples);
    let (dcgm, ours): (Vec<&Sample>, Vec<&Sample>) =
        samples.iter().partition(|s| names(s) == Names::Dcgm);
    let mut out = read(endpoint, &ours, failed, Names::Gpupeek);
    let uuids: BTreeSet<String> = out
        .iter()
        .flat_map(|r| &r.gpus)
        .filter_map(|g| g.uuid.clone())
        .collect();
    // Each gpupeek target's node, as a dcgm-exporter host on it is named.
    let nodes: BTreeSet<String> = ours
        .iter()
        .map(|s| dcgm::host(|key| s.text(key), None))
        .collect();
    let theirs = read(endpoint, &dcgm, failed, Names::Dcgm);
    out.extend(theirs.into_iter().filter(|r| {
        !nodes.contains(&r.host)
            && !r
                .gpus
                .iter()
                .any(|g| g.uuid.as_ref().is_some_and(|u| uuids.contains(u)))
    }));
    if out.is_empty() {
        // Said, not an empty table: the server answers but scrapes no gpupeek.
        let why = "Prometheus has no gpupeek or dcgm-exporter series and no target of a job \
                   named after either: is it scraping gpupeek serve?";
        let endpoint = endpoint.to_owned();
        return vec![Report::failed(
            endpoint.clone(),
            endpoint,
            Fault::new("not_found", why),
        )];
    }
    out.sort_by(|a, b| crate::render::by_name(&a.host, &b.host));
    out
}

/// The hosts of `samples`, all read through `names`.
fn read(endpoint: &str, samples: &[&Sample], failed: &[TargetError], names: Names) -> Vec<Report> {
    let dcgm = names == Names::Dcgm;
    // The daemon's series come with either (`serve --names dcgm` writes them too).
    let (ours, named): (fn(&str) -> bool, &str) = match dcgm {
        true => (
            |name| dcgm::read(name) || name.starts_with("gpupeek_"),
            "dcgm",
        ),
        false => (|name| name.starts_with("gpupeek_"), "gpupeek"),
    };
    // dcgm-exporter's `Hostname`, by target (it is on the series, never on `up`).
    let hostnames: BTreeMap<(&str, &str), String> = samples
        .iter()
        .filter(|s| dcgm && dcgm::read(s.name()))
        .filter_map(|s| Some((target(&s.metric), s.text("Hostname")?)))
        .collect();
    let host = |s: &Sample| host_of(&s.metric, dcgm, &hostnames);
    let errors: BTreeMap<String, &str> = failed
        .iter()
        .map(|t| (host_of(&t.labels, dcgm, &hostnames), t.error.as_str()))
        .collect();
    // The scrape jobs of gpupeek (or dcgm-exporter): those with its series, and those
    // named after it (all of whose targets may be down, so that they have none).
    let jobs: BTreeSet<&str> = samples
        .iter()
        .filter(|s| ours(s.name()) || s.label("job").contains(named))
        .map(|s| s.label("job"))
        .collect();
    // Targets Prometheus labels with their own pod (its Kubernetes discovery, without
    // our monitors' labeldrop): a `pod` label there is the exporter's, and a device's
    // pod is `exported_pod`.
    let pod_targets: BTreeSet<String> = samples
        .iter()
        .filter(|s| s.name() == "up" && s.metric.contains_key("pod"))
        .map(|s| host(s))
        .collect();
    let mut hosts: BTreeMap<String, Report> = BTreeMap::new();
    let mut up: BTreeMap<String, bool> = BTreeMap::new();
    let mut memory = BTreeMap::new();
    for s in samples {
        let theirs = s.name() != "up" && !ours(s.name());
        if theirs || s.name() == "up" && !jobs.contains(s.label("job")) {
            continue;
        }
        let host = host(s);
        let report = hosts.entry(host.clone()).or_insert_with(|| Report {
            host: host.clone(),
            endpoint: endpoint.to_owned(),
            node: None,
            daemon: None,
            error: None,
            gpus: Vec::new(),
        });
        if let Some(node) = s.metric.get("node") {
            report.node = Some(node.clone());
        }
        match s.name() {
            // Down only when no job scraped it.
            "up" => *up.entry(host).or_default() |= s.value() == 1.0,
            "gpupeek_daemon_state" if s.value() == 1.0 => {
                let state = s.label("state").to_owned();
                let daemon = report.daemon.get_or_insert_with(daemon);
                daemon.stale = state != "live";
                daemon.state = state;
            }
            "gpupeek_heartbeat_age_seconds" => {
                report.daemon.get_or_insert_with(daemon).age_s = Some(s.value());
            }
            _ if dcgm => {
                let pod_target = pod_targets.contains(&report.host);
                dcgm::sample(report, s, pod_target, &mut memory);
            }
            _ => gpu_sample(report, s, pod_targets.contains(&report.host)),
        }
    }
    let mut out: Vec<Report> = hosts.into_values().collect();
    if dcgm {
        dcgm::finish(&mut out, &memory);
    }
    for r in &mut out {
        if up.get(&r.host) == Some(&false) {
            let fault = errors.get(&r.host).map_or_else(
                || Fault::new("bad_response", "Prometheus's last scrape failed (up 0)"),
                |e| scrape_fault(e),
            );
            r.error = Some(fault);
            r.daemon = None;
            r.gpus.clear();
        } else if let Some(d) = r.daemon.as_mut().filter(|d| d.stale) {
            let why = format!("gpupeekd is {} (as Prometheus last scraped it)", d.state);
            d.error = Some(why.clone());
            r.error = Some(Fault::new("stale_daemon", why));
            r.gpus.clear();
        }
        for g in &mut r.gpus {
            if matches!(
                g.state.as_deref(),
                Some("lost" | "error" | "not responding")
            ) {
                g.name = None;
            }
        }
    }
    out
}

fn daemon() -> crate::model::Daemon {
    crate::model::Daemon {
        state: "unknown".into(),
        age_s: None,
        stale: true,
        error: None,
    }
}

/// Adds a per-GPU sample to its GPU in `report`; `pod_target`: Prometheus gives the
/// target's own pod as `pod` (see [`pod`]).
fn gpu_sample(report: &mut Report, s: &Sample, pod_target: bool) {
    let Ok(index) = s.label("gpu").parse::<u32>() else {
        return;
    };
    let pos = match report.gpus.iter().position(|g| g.index == index) {
        Some(pos) => pos,
        None => {
            report.gpus.push(Gpu::new(index));
            report.gpus.len() - 1
        }
    };
    let g = &mut report.gpus[pos];
    if s.name().starts_with("gpupeek_mig_") {
        return mig_sample(g, s, pod_target);
    }
    match s.name() {
        "gpupeek_gpu_info" => {
            g.name = s.text("name");
            g.uuid = s.text("uuid");
            g.pod = pod(s, pod_target);
        }
        "gpupeek_gpu_state" if s.value() == 1.0 => {
            let state = s.label("state");
            g.state = (state != "ok").then(|| state.replace('_', " "));
        }
        "gpupeek_gpu_utilization_ratio" => {
            g.utilization_pct = Some((s.value() * 100.0).round() as u32);
        }
        "gpupeek_gpu_memory_used_bytes" => g.memory_used_mib = Some(mib(s.value())),
        "gpupeek_gpu_memory_total_bytes" => g.memory_total_mib = Some(mib(s.value())),
        "gpupeek_gpu_verdict" if s.value() == 1.0 => g.verdict = s.text("verdict"),
        // Two scrape jobs of one exporter (a ServiceMonitor and a PodMonitor, say) give
        // each series twice under one instance: a user or a process is counted once.
        "gpupeek_user_gpu_memory_bytes" => {
            if let Some(user) = s.text("user").filter(|u| !g.users.contains(u)) {
                g.users.push(user);
            }
        }
        "gpupeek_process_gpu_memory_bytes" => {
            let pid = s.label("pid").parse().ok();
            if pid.is_some() && g.processes.iter().any(|p| p.pid == pid) {
                return;
            }
            g.processes
                .push(process(s, pid, mib(s.value()), pod_target));
        }
        _ => {}
    }
}

/// `NAMESPACE/POD` from the `namespace` and `pod` labels `serve --pod-labels` puts on a
/// device's or a process's series (the pod the kubelet assigns the device to). Where
/// Prometheus labels the target with its own pod (`pod_target`), the exporter's labels
/// are `exported_namespace` and `exported_pod`, and `pod` names the exporter.
fn pod(s: &Sample, pod_target: bool) -> Option<String> {
    let (namespace, pod) = match s.text("exported_pod") {
        Some(pod) => (s.label("exported_namespace"), pod),
        None if pod_target => return None,
        None => (s.label("namespace"), s.text("pod")?),
    };
    Some(format!("{namespace}/{pod}"))
}

/// Bytes as MiB, rounded down (gpustat's unit).
fn mib(bytes: f64) -> u64 {
    (bytes as u64) >> 20
}

/// Adds a `gpupeek_mig_*` sample to its MIG device of `g`.
fn mig_sample(g: &mut Gpu, s: &Sample, pod_target: bool) {
    let id = |key: &str| s.label(key).parse::<u32>().ok();
    let (Some(gi), Some(ci)) = (id("gpu_instance_id"), id("compute_instance_id")) else {
        return;
    };
    let at = g
        .mig
        .iter()
        .position(|m| (m.gpu_instance_id, m.compute_instance_id) == (gi, ci));
    let at = at.unwrap_or_else(|| {
        g.mig.push(Mig {
            gpu_instance_id: gi,
            compute_instance_id: ci,
            ..Default::default()
        });
        g.mig.len() - 1
    });
    let m = &mut g.mig[at];
    m.profile = m.profile.take().or_else(|| s.text("profile"));
    match s.name() {
        "gpupeek_mig_info" => m.pod = pod(s, pod_target),
        "gpupeek_mig_memory_used_bytes" => m.memory_used_mib = Some(mib(s.value())),
        "gpupeek_mig_memory_total_bytes" => m.memory_total_mib = Some(mib(s.value())),
        "gpupeek_mig_processes" => m.processes = Some(s.value() as u32),
        "gpupeek_mig_verdict" if s.value() == 1.0 => m.verdict = s.text("verdict"),
        _ => {}
    }
}

/// The process a `gpupeek_process_gpu_memory_bytes` sample `s` is about.
fn process(s: &Sample, pid: Option<u32>, memory_mib: u64, pod_target: bool) -> Process {
    Process {
        user: s.text("user"),
        pid,
        command: s.text("command"),
        memory_mib: Some(memory_mib),
        pod: pod(s, pod_target).or_else(|| s.text("pod_uid")),
        gpu_instance_id: s.label("gpu_instance_id").parse().ok(),
        job: s
            .label("container_id")
            .strip_prefix("slurm://")
            .map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str, labels: &[(&str, &str)], value: &str) -> Sample {
        let mut metric: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        metric.insert("__name__".into(), name.into());
        metric.entry("job".into()).or_insert_with(|| "gpu".into());
        Sample {
            metric,
            value: (Value::from(1.0), value.into()),
        }
    }

    /// A target with `labels` whose last scrape failed with `error`.
    fn failed(labels: &[(&str, &str)], error: &str) -> TargetError {
        TargetError {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            error: error.into(),
        }
    }

    /// A target `a` scraped (`up` 1) whose daemon is live, with GPU 0 (`GPU-0`).
    fn live(a: (&'static str, &'static str)) -> Vec<Sample> {
        vec![
            sample("up", &[a], "1"),
            sample("gpupeek_daemon_state", &[a, ("state", "live")], "1"),
            sample(
                "gpupeek_gpu_info",
                &[a, ("gpu", "0"), ("uuid", "GPU-0")],
                "1",
            ),
        ]
    }

    #[test]
    fn a_target_is_a_host_its_scrape_error_or_its_daemon_says_why_it_is_not_shown() {
        let a = ("instance", "a:9477");
        let g0 = [a, ("gpu", "0"), ("uuid", "GPU-0"), ("name", "H100")];
        let samples = vec![
            sample("up", &[a], "1"),
            sample("gpupeek_daemon_state", &[a, ("state", "live")], "1"),
            sample("gpupeek_daemon_state", &[a, ("state", "stale")], "0"),
            sample("gpupeek_gpu_info", &g0, "1"),
            sample("gpupeek_gpu_utilization_ratio", &g0, "0.45"),
            sample("gpupeek_gpu_memory_used_bytes", &g0, "10737418240"),
            sample(
                "gpupeek_user_gpu_memory_bytes",
                &[a, ("gpu", "0"), ("user", "bob")],
                "1",
            ),
            sample("up", &[("instance", "b:9477")], "0"),
            sample("up", &[("instance", "c:9477")], "1"),
            sample(
                "gpupeek_daemon_state",
                &[("instance", "c:9477"), ("state", "stopped")],
                "1",
            ),
            // Another job's target, with no gpupeek series: not a host.
            sample("up", &[("instance", "node:9100"), ("job", "node")], "1"),
        ];
        let errors = [failed(
            &[("instance", "b:9477")],
            "dial tcp: connection refused",
        )];
        let reports = reports("http://p", &samples, &errors);
        let hosts: Vec<&str> = reports.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(hosts, ["a:9477", "b:9477", "c:9477"]);
        let g = &reports[0].gpus[0];
        assert_eq!(g.utilization_pct, Some(45));
        assert_eq!(g.memory_used_mib, Some(10240));
        assert_eq!(g.name.as_deref(), Some("H100"));
        assert_eq!(g.users, ["bob"]);
        assert!(reports[0].error.is_none());
        assert_eq!(reports[1].error.as_ref().unwrap().kind, "refused");
        assert_eq!(reports[2].error.as_ref().unwrap().kind, "stale_daemon");
    }

    /// The pod a device is assigned to is its series' `namespace`/`pod`, or, where
    /// Prometheus labels the target with the exporter's own pod (its `up` has `pod`),
    /// `exported_namespace`/`exported_pod`; a device with neither has no pod.
    #[test]
    fn a_devices_pod_is_the_exporters_label_never_the_targets_own() {
        let a = ("instance", "a:9477");
        let mut samples = live(a);
        samples.push(sample(
            "gpupeek_gpu_info",
            &[a, ("gpu", "1"), ("namespace", "ml"), ("pod", "train-0")],
            "1",
        ));
        let mig = [
            a,
            ("gpu", "2"),
            ("gpu_instance_id", "3"),
            ("compute_instance_id", "0"),
            ("namespace", "ml"),
            ("pod", "infer"),
        ];
        samples.push(sample("gpupeek_mig_info", &mig, "1"));
        samples.push(sample(
            "gpupeek_process_gpu_memory_bytes",
            &[a, ("gpu", "2"), ("pid", "7"), ("gpu_instance_id", "3")]
                .into_iter()
                .chain([("namespace", "ml"), ("pod", "infer"), ("pod_uid", "u7")])
                .collect::<Vec<_>>(),
            "1048576",
        ));
        let direct = reports("http://p", &samples, &[]);
        let gpus = &direct[0].gpus;
        let gpu = |i: u32| gpus.iter().find(|g| g.index == i).unwrap();
        assert_eq!(gpu(0).pod, None);
        assert_eq!(gpu(1).pod.as_deref(), Some("ml/train-0"));
        assert_eq!(gpu(2).mig[0].pod.as_deref(), Some("ml/infer"));
        let p = &gpu(2).processes[0];
        assert_eq!(
            (p.pod.as_deref(), p.gpu_instance_id),
            (Some("ml/infer"), Some(3))
        );

        // Prometheus's Kubernetes discovery, kept: every series has the exporter's pod.
        let own = [("namespace", "gpupeek"), ("pod", "gpupeek-x1")];
        let b = ("instance", "b:9477");
        let samples = vec![
            sample("up", &[b, own[0], own[1]], "1"),
            sample(
                "gpupeek_daemon_state",
                &[b, ("state", "live"), own[0], own[1]],
                "1",
            ),
            sample("gpupeek_gpu_info", &[b, ("gpu", "0"), own[0], own[1]], "1"),
            sample(
                "gpupeek_gpu_info",
                &[b, ("gpu", "1"), own[0], own[1]]
                    .into_iter()
                    .chain([("exported_namespace", "ml"), ("exported_pod", "train-1")])
                    .collect::<Vec<_>>(),
                "1",
            ),
        ];
        let kept = reports("http://p", &samples, &[]);
        let pods: Vec<Option<&str>> = kept[0].gpus.iter().map(|g| g.pod.as_deref()).collect();
        assert_eq!(pods, [None, Some("ml/train-1")]);
    }

    /// A Prometheus scraping dcgm-exporter and no gpupeek, as the GPU operator deploys
    /// it: hosts by the node its monitor labels, a whole GPU with its utilisation and
    /// memory (the total is used + free + reserved) and the pod dcgm-exporter names, a
    /// GPU split with MIG as its GPU instances, and a target that is down.
    #[test]
    fn dcgm_exporters_series_are_read_when_there_are_no_gpupeek_series() {
        let t = |node: &'static str| {
            [
                ("job", "nvidia-dcgm-exporter"),
                ("instance", "10.0.1.7:9400"),
                ("kubernetes_node", node),
            ]
        };
        let whole = |node: &'static str| {
            t(node).into_iter().chain([
                ("gpu", "0"),
                ("UUID", "GPU-a0"),
                ("pci_bus_id", "00000000:07:00.0"),
                ("device", "nvidia0"),
                ("modelName", "NVIDIA A100-SXM4-80GB"),
                ("Hostname", "nvidia-dcgm-exporter-x7k2p"),
                ("DCGM_FI_DRIVER_VERSION", "550.90.07"),
            ])
        };
        let with = |base: Vec<(&'static str, &'static str)>,
                    more: &[(&'static str, &'static str)]| {
            base.into_iter()
                .chain(more.iter().copied())
                .collect::<Vec<_>>()
        };
        let g0: Vec<_> = whole("gpu-a").collect();
        let held = with(
            g0.clone(),
            &[
                ("namespace", "ml"),
                ("pod", "train-0"),
                ("container", "main"),
            ],
        );
        let gi = |id: &'static str, profile: &'static str| {
            let mut l: Vec<_> = whole("gpu-b").collect();
            l.retain(|(k, _)| !["gpu", "UUID"].contains(k));
            with(
                l,
                &[
                    ("gpu", "1"),
                    ("UUID", "GPU-b1"),
                    ("GPU_I_PROFILE", profile),
                    ("GPU_I_ID", id),
                ],
            )
        };
        let gi1 = with(gi("1", "3g.40gb"), &[("namespace", "ml"), ("pod", "infer")]);
        let gi2 = gi("2", "3g.40gb");
        let mut samples = vec![
            sample("up", &t("gpu-a"), "1"),
            sample("up", &t("gpu-b"), "1"),
            sample("up", &t("gpu-c"), "0"),
            sample("DCGM_FI_DEV_GPU_UTIL", &held, "87"),
            sample("DCGM_FI_DEV_FB_USED", &held, "40960"),
            sample("DCGM_FI_DEV_FB_FREE", &held, "39936"),
            sample("DCGM_FI_DEV_FB_RESERVED", &held, "664"),
            sample("DCGM_FI_DEV_GPU_TEMP", &held, "41"),
        ];
        for (l, used, free, active) in [(&gi1, "12000", "28000", "0.6"), (&gi2, "0", "40192", "0")]
        {
            samples.push(sample("DCGM_FI_DEV_FB_USED", l, used));
            samples.push(sample("DCGM_FI_DEV_FB_FREE", l, free));
            samples.push(sample("DCGM_FI_PROF_GR_ENGINE_ACTIVE", l, active));
        }
        // A target its monitor gives no node: named by the Hostname of its series.
        let bare = [
            ("job", "nvidia-dcgm-exporter"),
            ("instance", "10.0.2.9:9400"),
        ];
        samples.push(sample("up", &bare, "1"));
        let d0 = with(bare.to_vec(), &[("gpu", "0"), ("Hostname", "gpu-d")]);
        samples.push(sample("DCGM_FI_DEV_GPU_UTIL", &d0, "0"));
        // The down target's error, from the targets API, names it the same way.
        let errors = [failed(
            &t("gpu-c"),
            "dial tcp 10.0.1.7:9400: connection refused",
        )];
        let mut read = reports("http://p", &samples, &errors);
        for r in &mut read {
            crate::model::classify(r);
        }
        let hosts: Vec<&str> = read.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(hosts, ["gpu-a", "gpu-b", "gpu-c", "gpu-d"]);
        let a = &read[0].gpus[0];
        assert_eq!(a.name.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
        assert_eq!(a.uuid.as_deref(), Some("GPU-a0"));
        assert_eq!(a.utilization_pct, Some(87));
        assert_eq!(
            (a.memory_used_mib, a.memory_total_mib),
            (Some(40960), Some(81560))
        );
        assert_eq!(a.pod.as_deref(), Some("ml/train-0"));
        assert!(!a.free && a.mig.is_empty());
        assert_eq!(read[0].node.as_deref(), Some("nvidia-dcgm-exporter-x7k2p"));
        let b = &read[1].gpus[0];
        assert_eq!(
            (b.index, b.utilization_pct, b.memory_used_mib),
            (1, None, None)
        );
        let devices: Vec<_> = b
            .mig
            .iter()
            .map(|m| {
                (
                    m.gpu_instance_id,
                    m.profile.as_deref().unwrap(),
                    m.memory_used_mib.unwrap(),
                    m.memory_total_mib.unwrap(),
                    m.activity_pct.unwrap(),
                    m.pod.as_deref(),
                    m.free,
                )
            })
            .collect();
        assert_eq!(
            devices,
            [
                (1, "3g.40gb", 12000, 40000, 60, Some("ml/infer"), false),
                (2, "3g.40gb", 0, 40192, 0, None, true),
            ]
        );
        assert_eq!(read[2].error.as_ref().map(|e| e.kind), Some("refused"));

        assert!(read[3].error.is_none() && read[3].gpus.len() == 1);

        mixed(samples, errors);
    }

    /// A cluster with gpupeek on some nodes and only dcgm-exporter on others (the GPU
    /// operator's, while gpupeek is rolled out): every node is shown, each GPU once.
    fn mixed(mut samples: Vec<Sample>, errors: [TargetError; 1]) {
        // gpupeek on gpu-a too (as contrib/kubernetes's monitors label it): its GPU is
        // gpupeek's row, not dcgm-exporter's as well.
        let ours = [("job", "gpupeek"), ("instance", "gpu-a"), ("node", "gpu-a")];
        samples.extend([
            sample("up", &ours, "1"),
            sample("gpupeek_daemon_state", &with(&ours, ("state", "live")), "1"),
            sample(
                "gpupeek_gpu_info",
                &with(&with(&ours, ("gpu", "0")), ("uuid", "GPU-a0")),
                "1",
            ),
            // A gpupeek target that is down, in gpupeek's job: gpupeek's, by its job.
            sample("up", &[("job", "gpupeek"), ("instance", "gpu-e")], "0"),
        ]);
        let read = reports("http://p", &samples, &errors);
        let hosts: Vec<(&str, bool)> = read
            .iter()
            .map(|r| (r.host.as_str(), r.daemon.is_some()))
            .collect();
        assert_eq!(
            hosts,
            [
                ("gpu-a", true),
                ("gpu-b", false),
                ("gpu-c", false),
                ("gpu-d", false),
                ("gpu-e", false)
            ]
        );
        assert_eq!(read[0].gpus.len(), 1);
        assert!(read[2].error.is_some() && read[4].error.is_some());

        // A gpupeek target named otherwise (no node label) with GPU-a0: still once.
        let named = [("job", "gpupeek"), ("instance", "10.0.1.7:9477")];
        for s in samples.iter_mut().filter(|s| s.label("job") == "gpupeek") {
            s.metric.remove("node");
            if s.label("instance") == "gpu-a" {
                s.metric.extend(named.map(|(k, v)| (k.into(), v.into())));
            }
        }
        let read = reports("http://p", &samples, &errors);
        let hosts: Vec<&str> = read.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(hosts, ["10.0.1.7:9477", "gpu-b", "gpu-c", "gpu-d", "gpu-e"]);
    }

    /// `labels` and one more.
    fn with<'a>(
        labels: &[(&'a str, &'a str)],
        more: (&'a str, &'a str),
    ) -> Vec<(&'a str, &'a str)> {
        labels.iter().copied().chain([more]).collect()
    }

    /// The API's answers as the server gives them: a vector, an error, another kind of
    /// result, something that is not the API; the targets with their errors.
    #[test]
    fn an_answer_is_its_data_or_the_servers_words() {
        let vector = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"up","instance":"a"},"value":[1.5,"1"]}]}}"#;
        let got: Vector = decode(vector, "an instant vector").unwrap();
        assert_eq!((got.result[0].name(), got.result[0].value()), ("up", 1.0));
        let why = |body: &str| decode::<Vector>(body, "an instant vector").err().unwrap();
        let error = r#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#;
        let fault = why(error);
        assert_eq!(fault.kind, "bad_response");
        assert_eq!(fault.reason, "Prometheus says: parse error at char 3");
        let scalar = r#"{"status":"success","data":{"resultType":"scalar","result":[1.5,"2"]}}"#;
        assert!(
            why(scalar).reason.starts_with("not an instant vector: "),
            "{:?}",
            why(scalar)
        );
        assert!(why("<html>")
            .reason
            .starts_with("not a Prometheus API answer: "));
        assert_eq!(
            why(r#"{"status":"success"}"#).reason,
            "not an instant vector: no data"
        );

        let targets = r#"{"status":"success","data":{"activeTargets":[
            {"discoveredLabels":{"__address__":"a:1"},"labels":{"instance":"a","job":"gpupeek"},
             "lastError":"connection refused","health":"down"},
            {"labels":{"instance":"b"},"lastError":"","health":"up"}],"droppedTargets":[]}}"#;
        let got: Targets = decode(targets, "targets").unwrap();
        let errors: Vec<(&str, &str)> = got
            .active
            .iter()
            .map(|t| (t.labels["instance"].as_str(), t.error.as_str()))
            .collect();
        assert_eq!(errors, [("a", "connection refused"), ("b", "")]);
    }

    #[test]
    fn a_prometheus_url_is_http_or_https_without_credentials() {
        let http = || crate::source::Http {
            agent: crate::source::agent(ureq::tls::TlsConfig::default()),
            authorization: None,
            headers: Vec::new(),
        };
        assert!(Prometheus::new("http://prom:9090/", http()).is_ok());
        assert!(Prometheus::new("https://mimir/prometheus", http()).is_ok());
        assert!(Prometheus::new("https://mimir/api/u@x", http()).is_ok());
        for bad in [
            "prom:9090",
            "ftp://prom",
            "http://u:secret@prom:9090",
            "http://prom:9090/?x=secret",
            "http://prom:9090/#secret",
        ] {
            let err = Prometheus::new(bad, http()).err().unwrap();
            assert!(err.starts_with("bad --prometheus"), "{err}");
            assert!(!err.contains("u:secret"), "{err}");
        }
    }

    /// One exporter scraped by two jobs under one instance (a ServiceMonitor and a
    /// PodMonitor both installed): its users and processes are counted once, and one
    /// job's failed scrape does not hide what the other read.
    #[test]
    fn an_exporter_scraped_twice_counts_its_users_and_processes_once() {
        let a = ("instance", "a:9477");
        // Its up series come per job below.
        let mut samples = live(a);
        samples.remove(0);
        for (job, up) in [("gpupeek", "1"), ("gpupeek-pods", "0")] {
            let j = ("job", job);
            samples.push(sample("up", &[a, j], up));
            samples.push(sample(
                "gpupeek_user_gpu_memory_bytes",
                &[a, j, ("gpu", "0"), ("user", "ann")],
                "1",
            ));
            for pid in ["10", "11"] {
                samples.push(sample(
                    "gpupeek_process_gpu_memory_bytes",
                    &[a, j, ("gpu", "0"), ("pid", pid), ("user", "ann")],
                    "1048576",
                ));
            }
        }
        let reports = reports("http://p", &samples, &[]);
        assert_eq!(reports.len(), 1);
        assert!(reports[0].error.is_none(), "{:?}", reports[0].error);
        let g = &reports[0].gpus[0];
        assert_eq!(g.users, ["ann"]);
        let pids: Vec<Option<u32>> = g.processes.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [Some(10), Some(11)]);
    }

    /// The `gpupeek_mig_*` series make the MIG devices of their GPU, by GPU and compute
    /// instance: profile, memory, processes and verdict.
    #[test]
    fn mig_series_are_the_devices_of_their_gpu() {
        let a = ("instance", "a:9477");
        let dev = |gi: &'static str| {
            [
                a,
                ("gpu", "0"),
                ("gpu_instance_id", gi),
                ("compute_instance_id", "0"),
                ("profile", if gi == "1" { "3g.40gb" } else { "1g.10gb" }),
            ]
        };
        let mut verdict = dev("1").to_vec();
        verdict.push(("verdict", "idle-holding"));
        let mut samples = live(a);
        samples.extend([
            sample("gpupeek_mig_info", &dev("13"), "1"),
            sample("gpupeek_mig_memory_used_bytes", &dev("13"), "0"),
            sample("gpupeek_mig_memory_total_bytes", &dev("13"), "10468982784"),
            sample("gpupeek_mig_processes", &dev("13"), "0"),
            sample("gpupeek_mig_memory_used_bytes", &dev("1"), "3145728000"),
            sample("gpupeek_mig_processes", &dev("1"), "1"),
            sample("gpupeek_mig_verdict", &verdict, "1"),
        ]);
        let mut reports = reports("http://p", &samples, &[]);
        crate::model::classify(&mut reports[0]);
        let mig = &reports[0].gpus[0].mig;
        let seen: Vec<_> = mig
            .iter()
            .map(|m| {
                (
                    m.gpu_instance_id,
                    m.profile.as_deref(),
                    m.memory_used_mib,
                    m.memory_total_mib,
                    m.processes,
                    m.free,
                    m.idle_allocated,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (1, Some("3g.40gb"), Some(3000), None, Some(1), false, true),
                (
                    13,
                    Some("1g.10gb"),
                    Some(0),
                    Some(9984),
                    Some(0),
                    true,
                    false
                ),
            ]
        );
        assert!(!reports[0].gpus[0].free);
    }

    /// A server that scrapes no gpupeek is shown as a failed host that says so.
    #[test]
    fn a_prometheus_without_gpupeek_is_a_failed_host_not_an_empty_table() {
        let samples = [sample(
            "up",
            &[("instance", "node:9100"), ("job", "node")],
            "1",
        )];
        for samples in [&samples[..], &[]] {
            let reports = reports("http://p", samples, &[]);
            assert_eq!(reports.len(), 1);
            assert_eq!(reports[0].host, "http://p");
            let fault = reports[0].error.as_ref().unwrap();
            assert_eq!(fault.kind, "not_found");
            assert!(
                fault.reason.contains("no gpupeek or dcgm-exporter series"),
                "{}",
                fault.reason
            );
        }
    }

    /// A job named after gpupeek whose every target is down has no gpupeek series: its
    /// targets are still hosts, each with its scrape error, never an empty table.
    #[test]
    fn a_gpupeek_job_whose_targets_are_all_down_shows_them() {
        let job = ("job", "gpupeek");
        let samples = vec![
            sample("up", &[("instance", "gpu-a"), job], "0"),
            sample("up", &[("instance", "gpu-b"), job], "0"),
            sample("up", &[("instance", "node:9100"), ("job", "node")], "1"),
        ];
        let errors = [failed(&[("instance", "gpu-a"), job], "connection refused")];
        let reports = reports("http://p", &samples, &errors);
        let hosts: Vec<&str> = reports.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(hosts, ["gpu-a", "gpu-b"]);
        assert_eq!(reports[0].error.as_ref().unwrap().kind, "refused");
        assert!(reports[1].error.is_some());
    }

    /// Two clusters behind one Thanos or Mimir, with a node of the same name each: two
    /// hosts, named after their clusters, each with its own GPUs and scrape error.
    #[test]
    fn targets_of_two_clusters_with_alike_node_names_are_two_hosts() {
        let (a, b) = (("cluster", "east"), ("cluster", "west"));
        let i = ("instance", "gpu-node-1");
        let samples = vec![
            sample("up", &[a, i], "1"),
            sample("gpupeek_daemon_state", &[a, i, ("state", "live")], "1"),
            sample(
                "gpupeek_gpu_info",
                &[a, i, ("gpu", "0"), ("uuid", "GPU-E")],
                "1",
            ),
            sample("up", &[b, i], "0"),
            sample(
                "gpupeek_gpu_info",
                &[b, i, ("gpu", "0"), ("uuid", "GPU-W")],
                "1",
            ),
        ];
        let errors = [failed(
            &[b, i],
            "Get \"http://10.0.0.9:9477/metrics\": context deadline exceeded",
        )];
        let reports = reports("http://thanos", &samples, &errors);
        let hosts: Vec<&str> = reports.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(hosts, ["east/gpu-node-1", "west/gpu-node-1"]);
        assert_eq!(reports[0].gpus[0].uuid.as_deref(), Some("GPU-E"));
        assert!(reports[0].error.is_none());
        assert_eq!(reports[1].error.as_ref().unwrap().kind, "timeout");
        assert!(reports[1].gpus.is_empty());
    }

    #[test]
    fn a_process_series_names_its_slurm_job_by_its_container_id() {
        let a = ("instance", "a:9477");
        let process = |pid: &'static str, container: &'static str| {
            sample(
                "gpupeek_process_gpu_memory_bytes",
                &[
                    a,
                    ("gpu", "0"),
                    ("pid", pid),
                    ("user", "ann"),
                    ("container_id", container),
                ],
                "1048576",
            )
        };
        let mut samples = live(a);
        samples.extend([
            process("10", "slurm://4242"),
            process("11", "docker://0123456789ab"),
            process("12", ""),
        ]);
        let reports = reports("http://p", &samples, &[]);
        let jobs: Vec<Option<&str>> = reports[0].gpus[0]
            .processes
            .iter()
            .map(|p| p.job.as_deref())
            .collect();
        assert_eq!(jobs, [Some("4242"), None, None]);
    }
}

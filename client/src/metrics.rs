//! `gpupeek metrics`: the snapshot in Prometheus's text exposition format (0.0.4).
//!
//! Names follow Prometheus conventions: a `gpupeek_` prefix, base units as suffixes
//! (`_bytes`, `_celsius`, `_watts`, `_hertz`, `_ratio` for 0..1 fractions, `_seconds`),
//! `_total` on counters, a HELP and TYPE line for every family. Each GPU's samples carry
//! `gpu` (NVML index), `uuid` and `name` labels, values escaped as the format requires.
//!
//! Each MIG device has `gpupeek_mig_*` families of its own (`metrics/mig.rs`); with
//! `--names dcgm` a MIG-enabled GPU is exported per GPU instance (`metrics/dcgm.rs`).
//!
//! `gpupeek_up` is 1 while the daemon publishes and 0 otherwise; `gpupeek_daemon_state`
//! says which state it is in (a state set: one series per state, the current one 1).
//! A daemon that let go of the driver on request is `released`: up 0 (it publishes no
//! GPU) but alive, which an alert tells from `stale`/`stopped` by that series.
//! A daemon that is not live gets no GPU samples at all (its numbers are not current);
//! a GPU that is lost, failing, asleep or not responding (its driver has not answered
//! within the daemon's timeout) keeps its identity and state but no values;
//! a field a GPU does not support is left out, never exported as 0. Output is always a
//! valid exposition, so a textfile collector never keeps a stale file: the command exits
//! 0 and says on stderr why the daemon is down.

use std::fmt::Write;

use gpupeek_model::{Model, Text};
use gpupeek_shm::{Liveness, Snapshot};

use crate::Exit;

mod dcgm;
mod gpu;
mod mig;
mod nvidia_smi;
pub(crate) mod pods;
mod processes;
mod xid;

/// The flags of `gpupeek metrics` (their table is `crate::commands::METRICS`).
#[derive(Debug, Default)]
pub struct Args {
    /// `--shm`.
    pub shm: Option<String>,
    /// What to export and under whose names.
    pub options: Options,
}

/// What an exposition holds, shared by `metrics` and `serve`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// `--names`.
    pub names: Names,
    /// `--per-process`.
    pub per_process: bool,
    /// `--per-user`.
    pub per_user: bool,
    /// `--pod-labels`: container and pod labels (see `metrics/pods.rs`).
    pub pod_labels: bool,
}

/// Whose metric names and labels the per-GPU families use (`--names`). The daemon's
/// own families (`gpupeek_up`, `gpupeek_daemon_state`, the heartbeat) are in every one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Names {
    /// gpupeek's own (`gpupeek_gpu_*`, base units).
    #[default]
    Gpupeek,
    /// NVIDIA dcgm-exporter's (`DCGM_FI_*`, DCGM's units and labels).
    Dcgm,
    /// utkuozdemir/nvidia_gpu_exporter's (`nvidia_smi_*`, labelled by `uuid`).
    NvidiaGpuExporter,
}

impl Names {
    /// The values `--names` takes.
    pub const VALUES: &'static str = "gpupeek, dcgm or nvidia_gpu_exporter";

    /// Parses a `--names` value.
    pub fn parse(s: &str) -> Result<Names, String> {
        match s {
            "gpupeek" => Ok(Names::Gpupeek),
            "dcgm" | "dcgm-exporter" | "dcgm_exporter" => Ok(Names::Dcgm),
            "nvidia_gpu_exporter" | "nvidia-gpu-exporter" => Ok(Names::NvidiaGpuExporter),
            _ => Err(format!("expected {}, not {s:?}", Names::VALUES)),
        }
    }
}

/// Runs `gpupeek metrics`.
pub fn run(args: Args) -> Result<(), Exit> {
    let name = gpupeek_shm::resolve_name(args.shm.as_deref());
    let scrape = scrape(&name, &args.options);
    if let Some(reason) = &scrape.reason {
        eprintln!("gpupeek: {reason}");
    }
    crate::write_stdout(&scrape.text)
}

/// One reading of the segment as exposition text.
pub struct Scrape {
    /// The exposition.
    pub text: String,
    /// Why the daemon is not up, when it is not.
    pub reason: Option<String>,
}

/// Every state `gpupeek_daemon_state` can report.
const STATES: [&str; 11] = [
    "live",
    "starting",
    "stopped",
    "released",
    "stale",
    "nvml_error",
    "no_segment",
    "untrusted",
    "abi_mismatch",
    "corrupt",
    "error",
];

/// Reads segment `name` once and renders it (or why it could not be read).
pub fn scrape(name: &str, options: &Options) -> Scrape {
    scrape_with(name, options, None)
}

/// [`scrape`], with the kubelet's last pod-resources answer when it is asked
/// (`serve --kubelet.pod-resources-socket`): then `--pod-labels` has pod names, and
/// `gpupeek_kubelet_pod_resources_up` says whether the kubelet answered.
pub fn scrape_with(name: &str, options: &Options, kube: Option<&gpupeek_kube::State>) -> Scrape {
    let reading = crate::stream::read(name);
    Scrape {
        text: render_with(
            reading.snap.as_ref(),
            reading.state,
            reading.now_ns,
            options,
            kube,
        ),
        reason: reading.reason,
    }
}

/// `gpupeek_daemon_state`'s name for a daemon in state `liveness`.
pub fn live_state(liveness: &Liveness) -> &'static str {
    match liveness {
        Liveness::Live => "live",
        Liveness::Starting => "starting",
        Liveness::Stopped => "stopped",
        Liveness::Released => "released",
        Liveness::Stale { .. } => "stale",
        Liveness::NvmlError { .. } => "nvml_error",
    }
}

/// `gpupeek_daemon_state`'s name for a segment that could not be read.
pub fn error_state(e: &gpupeek_shm::Error) -> &'static str {
    use gpupeek_shm::Error as E;
    match e {
        E::NotFound { .. } | E::NotReady { .. } => "no_segment",
        E::Untrusted { .. } => "untrusted",
        E::AbiMismatch { .. } => "abi_mismatch",
        E::Corrupt { .. } => "corrupt",
        E::Stale { .. } => "stale",
        _ => "error",
    }
}

/// The exposition for `snap` (if the segment could be read) in daemon state `state`.
#[cfg(test)]
pub fn render(snap: Option<&Snapshot>, state: &str, now_mono_ns: u64, options: &Options) -> String {
    render_with(snap, state, now_mono_ns, options, None)
}

/// [`render`], with the kubelet's pod-resources answer (see [`scrape_with`]).
pub fn render_with(
    snap: Option<&Snapshot>,
    state: &str,
    now_mono_ns: u64,
    options: &Options,
    kube: Option<&gpupeek_kube::State>,
) -> String {
    let mut out = Out(String::with_capacity(8192));
    let up = state == "live";
    out.family(
        "gpupeek_up",
        "gauge",
        "1 when gpupeekd is publishing, 0 when it is not (see gpupeek_daemon_state).",
    );
    out.sample("gpupeek_up", "", u64::from(up));
    out.family(
        "gpupeek_daemon_state",
        "gauge",
        "State of gpupeekd as this reader sees it: 1 for the current state.",
    );
    for s in STATES {
        out.sample(
            "gpupeek_daemon_state",
            &format!("state=\"{s}\""),
            u64::from(s == state),
        );
    }
    if let Some(kube) = kube {
        out.family(
            "gpupeek_kubelet_pod_resources_up",
            "gauge",
            "1 when the kubelet's pod-resources API answered the last poll, 0 when not.",
        );
        out.sample("gpupeek_kubelet_pod_resources_up", "", u64::from(kube.up));
    }
    let Some(snap) = snap else {
        return out.0;
    };
    let model = Model::new(snap);
    let pods = pods::Pods::new(&model, options.pod_labels, kube);
    let status = &model.status;
    out.family(
        "gpupeek_heartbeat_age_seconds",
        "gauge",
        "Seconds since gpupeekd last published.",
    );
    let age = now_mono_ns.saturating_sub(status.heartbeat_mono_ns) as f64 / 1e9;
    out.sample("gpupeek_heartbeat_age_seconds", "", age);
    out.family(
        "gpupeek_sampling_period_seconds",
        "gauge",
        "gpupeekd's sampling period.",
    );
    out.sample(
        "gpupeek_sampling_period_seconds",
        "",
        status.period_ns as f64 / 1e9,
    );
    if !up {
        return out.0;
    }
    if let Some(age) = model.processes_age_ns(now_mono_ns) {
        out.family(
            "gpupeek_process_sample_age_seconds",
            "gauge",
            "Seconds since gpupeekd last sampled the GPU process lists.",
        );
        out.sample("gpupeek_process_sample_age_seconds", "", age as f64 / 1e9);
        out.family(
            "gpupeek_process_sampling_period_seconds",
            "gauge",
            "How often gpupeekd samples the GPU process lists (--process-interval).",
        );
        out.sample(
            "gpupeek_process_sampling_period_seconds",
            "",
            model.processes_period_ns.unwrap_or(0) as f64 / 1e9,
        );
    }
    match options.names {
        Names::Gpupeek => {}
        Names::Dcgm => {
            dcgm::families(&mut out, &model, &pods);
            processes::families(&mut out, &model, options, &pods);
            return out.0;
        }
        Names::NvidiaGpuExporter => {
            nvidia_smi::families(&mut out, &model);
            processes::families(&mut out, &model, options, &pods);
            return out.0;
        }
    }
    let version = |v: Option<Text>| v.map(Text::decode).unwrap_or_default();
    let cuda = status.cuda_version().unwrap_or_default();
    out.family(
        "gpupeek_driver_info",
        "gauge",
        "NVIDIA driver, NVML and CUDA driver versions (always 1).",
    );
    let labels = format!(
        "driver_version=\"{}\",nvml_version=\"{}\",cuda_version=\"{}\"",
        escape(&version(status.driver_version)),
        escape(&version(status.nvml_version)),
        escape(&cuda)
    );
    out.sample("gpupeek_driver_info", &labels, 1u64);
    out.family(
        "gpupeek_gpus",
        "gauge",
        "Number of GPUs gpupeekd publishes.",
    );
    out.sample("gpupeek_gpus", "", model.gpus.len() as u64);
    gpu::families(&mut out, &model, &pods);
    mig::families(&mut out, &model, &pods);
    processes::families(&mut out, &model, options, &pods);
    out.0
}

/// The exposition being written.
struct Out(String);

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &str, value: impl Into<Value>) {
        let value = value.into();
        if labels.is_empty() {
            let _ = writeln!(self.0, "{name} {value}");
        } else {
            let _ = writeln!(self.0, "{name}{{{labels}}} {value}");
        }
    }
}

/// A sample value: integers print exactly, fractions as Rust prints an `f64` (or, for
/// dcgm-exporter's doubles, as Go's `%f` does: six decimals).
#[derive(Debug, Clone, Copy)]
enum Value {
    Int(u64),
    Signed(i64),
    Float(f64),
    Fixed6(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Int(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Signed(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::Fixed6(v) => write!(f, "{v:.6}"),
        }
    }
}

/// Families gathered sample by sample, written in the order each was first seen: for
/// outputs that walk GPUs first and families second.
#[derive(Default)]
struct Families {
    list: Vec<Family>,
}

struct Family {
    name: String,
    kind: &'static str,
    help: String,
    samples: Vec<(String, Value)>,
}

impl Families {
    /// Adds a sample of family `name` (declared by its first sample).
    fn add(&mut self, name: &str, kind: &'static str, help: &str, labels: String, value: Value) {
        let family = match self.list.iter().position(|f| f.name == name) {
            Some(i) => &mut self.list[i],
            None => {
                self.list.push(Family {
                    name: name.to_owned(),
                    kind,
                    help: help.to_owned(),
                    samples: Vec::new(),
                });
                self.list.last_mut().expect("just pushed")
            }
        };
        family.samples.push((labels, value));
    }

    fn write(self, out: &mut Out) {
        for f in self.list {
            out.family(&f.name, f.kind, &f.help);
            for (labels, value) in f.samples {
                out.sample(&f.name, &labels, value);
            }
        }
    }
}

/// A label value with `\`, `"` and newlines escaped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpupeek_shm::layout::{gpu_valid as v, DaemonState, GpuState};
    use gpupeek_shm::{text, GpuRecord};

    use crate::testing::live_snapshot as snapshot;

    const OPTS: Options = Options {
        names: Names::Gpupeek,
        per_process: false,
        per_user: false,
        pod_labels: false,
    };

    fn gpu(index: u32, name: &str) -> GpuRecord {
        let mut g = GpuRecord {
            index,
            state: GpuState::Ok as u32,
            valid: v::NAME | v::TEMPERATURE,
            temp_gpu_c: 41,
            ..Default::default()
        };
        text::encode(&mut g.name, name);
        g
    }

    #[test]
    fn label_values_escape_quotes_and_backslashes() {
        assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape("x\ny"), "x\\ny");
        let text = render(
            Some(&snapshot(vec![gpu(0, r#"Evil "GPU" \ one"#)])),
            "live",
            0,
            &OPTS,
        );
        assert!(
            text.contains(
                r#"gpupeek_gpu_temperature_celsius{gpu="0",uuid="",name="Evil \"GPU\" \\ one"} 41"#
            ),
            "{text}"
        );
    }

    #[test]
    fn unsupported_fields_are_left_out_not_zero() {
        let text = render(Some(&snapshot(vec![gpu(0, "A")])), "live", 0, &OPTS);
        assert!(text.contains("gpupeek_gpu_temperature_celsius"));
        assert!(!text.contains("gpupeek_gpu_fan_speed_ratio"), "{text}");
        assert!(!text.contains("gpupeek_gpu_power_draw_watts"), "{text}");
    }

    #[test]
    fn a_lost_gpu_keeps_its_identity_but_exports_no_values() {
        let mut lost = gpu(1, "B");
        lost.state = GpuState::Lost as u32;
        let text = render(Some(&snapshot(vec![gpu(0, "A"), lost])), "live", 0, &OPTS);
        assert!(text.contains(r#"gpupeek_gpu_state{gpu="1",uuid="",name="B",state="lost"} 1"#));
        assert!(
            !text.contains(r#"gpupeek_gpu_temperature_celsius{gpu="1""#),
            "{text}"
        );
    }

    #[test]
    fn every_gpu_state_has_a_series_and_a_hung_gpu_exports_no_values() {
        let mut hung = gpu(1, "B");
        hung.state = GpuState::NotResponding as u32;
        let mut idle = gpu(2, "C");
        idle.state = GpuState::Idle as u32;
        let text = render(
            Some(&snapshot(vec![gpu(0, "A"), hung, idle])),
            "live",
            0,
            &OPTS,
        );
        let state = |gpu: &str, name: &str, state: &str, v: u8| {
            format!("gpupeek_gpu_state{{gpu=\"{gpu}\",uuid=\"\",name=\"{name}\",state=\"{state}\"}} {v}\n")
        };
        for s in ["ok", "lost", "error", "suspended", "idle", "not_responding"] {
            let hung_value = u8::from(s == "not_responding");
            assert!(
                text.contains(&state("1", "B", s, hung_value)),
                "{s}: {text}"
            );
            assert!(
                text.contains(&state("2", "C", s, u8::from(s == "idle"))),
                "{s}: {text}"
            );
        }
        assert!(
            !text.contains("not responding"),
            "label values have no spaces: {text}"
        );
        assert!(
            !text.contains(r#"gpupeek_gpu_temperature_celsius{gpu="1""#),
            "{text}"
        );
        assert!(text.contains(r#"gpupeek_gpu_temperature_celsius{gpu="0""#));
    }

    #[test]
    fn a_released_daemon_is_up_0_in_its_own_state_with_its_heartbeat() {
        let mut snap = snapshot(Vec::new());
        snap.status.state = DaemonState::Released as u32;
        let text = render(Some(&snap), "released", 0, &OPTS);
        assert!(text.contains("gpupeek_up 0\n"));
        assert!(text.contains("gpupeek_daemon_state{state=\"released\"} 1\n"));
        assert!(text.contains("gpupeek_daemon_state{state=\"stopped\"} 0\n"));
        assert!(text.contains("gpupeek_heartbeat_age_seconds"));
        let set = text
            .lines()
            .filter(|l| l.starts_with("gpupeek_daemon_state{") && l.ends_with(" 1"));
        assert_eq!(set.count(), 1, "one state at a time: {text}");
    }

    #[test]
    fn a_daemon_that_is_not_live_exports_up_0_and_no_gpus() {
        let text = render(Some(&snapshot(vec![gpu(0, "A")])), "stale", 0, &OPTS);
        assert!(text.contains("gpupeek_up 0\n"));
        assert!(text.contains("gpupeek_daemon_state{state=\"stale\"} 1\n"));
        assert!(text.contains("gpupeek_daemon_state{state=\"live\"} 0\n"));
        assert!(!text.contains("gpupeek_gpu_"), "{text}");
    }
}

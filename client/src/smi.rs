//! The rest of nvidia-smi's scripting interface that `gpupeek query` speaks besides
//! `--query-gpu`: `--query-compute-apps=FIELDS`, `-L` (`--list-gpus`), and the loops
//! `-l SEC` / `-lms MS`, all spelled as nvidia-smi spells them after `gpupeek query`.
//!
//! The formats are nvidia-smi's, as in real output (nvidia_gpu_exporter's
//! `internal/captures`, drivers 590 and 595): `-L` prints
//! `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)` and under a MIG-enabled GPU
//! `  MIG 3g.40gb     Device  0: (UUID: MIG-...)` per MIG device (as `nvidia-smi -L`
//! prints them); `--query-compute-apps` prints a header
//! even when no process runs, then one line per compute process, e.g.
//! `2026/07/14 08:12:53.500, NVIDIA H100 80GB HBM3, 00000000:00:09.0, 0000000000000,
//! GPU-..., 11327, /root/tools/memhog, 2566 MiB`: `process_name` is the process's
//! `argv[0]` as it was started (`ffmpeg`, `/usr/bin/kwin_wayland`), memory in MiB.
//!
//! A loop prints the header once, then a block (one line per GPU, or per process) at
//! the first daemon publish at least the interval after the last block's: between
//! publishes it sleeps on the segment's generation word, as `--follow` does, so it costs
//! no CPU and makes no timer of its own. A daemon slower than the interval gives a block
//! per publish. A loop ends on a closed stdout, or when the daemon stops being live.

use std::time::Duration;

use gpupeek_model::{Bytes, Gpu, Model, ProcKind, Process, Text};
use gpupeek_shm::Segment;

use crate::{Exit, EXIT_USAGE};

/// nvidia-smi's text for a value it cannot give.
const NOT_AVAILABLE: &str = "[N/A]";

/// `--help-query-compute-apps`, as nvidia-smi words it.
pub const COMPUTE_APPS_HELP: &str = "\
List of valid properties to query for the switch \"--query-compute-apps\":

Section about Active Compute Processes properties
List of processes having compute context on the device.

\"timestamp\"
The timestamp of when the query was made in format \"YYYY/MM/DD HH:MM:SS.msec\".

\"gpu_name\"
The official product name of the GPU.

\"gpu_bus_id\"
PCI bus id as \"domain:bus:device.function\", in hex.

\"gpu_serial\"
The serial number printed on the board.

\"gpu_uuid\"
The globally unique immutable alphanumeric identifier of the GPU.

\"pid\"
Process ID of the compute application

\"process_name\" or \"name\"
Process Name

\"used_gpu_memory\" or \"used_memory\"
Amount memory used on the device by the context.
";

/// A `--query-compute-apps` field: its names (the first is canonical) and its unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppField {
    /// `timestamp`.
    Timestamp,
    /// `gpu_name`.
    GpuName,
    /// `gpu_bus_id`.
    GpuBusId,
    /// `gpu_serial`.
    GpuSerial,
    /// `gpu_uuid`.
    GpuUuid,
    /// `pid`.
    Pid,
    /// `process_name` or `name`.
    ProcessName,
    /// `used_gpu_memory` or `used_memory`.
    UsedMemory,
}

const APP_FIELDS: [(&[&str], AppField); 8] = [
    (&["timestamp"], AppField::Timestamp),
    (&["gpu_name"], AppField::GpuName),
    (&["gpu_bus_id"], AppField::GpuBusId),
    (&["gpu_serial"], AppField::GpuSerial),
    (&["gpu_uuid"], AppField::GpuUuid),
    (&["pid"], AppField::Pid),
    (&["process_name", "name"], AppField::ProcessName),
    (&["used_gpu_memory", "used_memory"], AppField::UsedMemory),
];

impl AppField {
    fn names(self) -> &'static [&'static str] {
        APP_FIELDS
            .iter()
            .find(|(_, f)| *f == self)
            .map_or(&[], |(n, _)| n)
    }

    /// The header cell: the name the user gave, with nvidia-smi's unit.
    fn header(self, asked: &str) -> String {
        match self {
            AppField::UsedMemory => format!("{asked} [MiB]"),
            _ => asked.to_owned(),
        }
    }

    fn value(self, timestamp: &str, gpu: Option<&Gpu>, p: &Process, units: bool) -> String {
        let text = |t: Option<Text>| t.map_or(NOT_AVAILABLE.to_owned(), Text::decode);
        match self {
            AppField::Timestamp => timestamp.to_owned(),
            AppField::GpuName => text(gpu.and_then(|g| g.name)),
            AppField::GpuBusId => text(gpu.and_then(|g| g.pci_bus_id)),
            AppField::GpuSerial => text(gpu.and_then(|g| g.details.serial)),
            AppField::GpuUuid => text(gpu.and_then(|g| g.uuid)),
            AppField::Pid => p.pid.to_string(),
            AppField::ProcessName => process_name(p),
            AppField::UsedMemory => match p.gpu_mem {
                Some(b) if units => format!("{} MiB", Bytes::mib_ceil(b)),
                Some(b) => Bytes::mib_ceil(b).to_string(),
                None => NOT_AVAILABLE.to_owned(),
            },
        }
    }
}

/// nvidia-smi's process name: `argv[0]` as started, else the command name the daemon
/// could see, else `[N/A]` (the daemon withholds other users' commands under hidepid).
fn process_name(p: &Process) -> String {
    let argv0 = p.argv().and_then(|a| a.into_iter().next());
    argv0
        .filter(|a| !a.is_empty())
        .or_else(|| p.command.map(Text::decode))
        .unwrap_or_else(|| NOT_AVAILABLE.to_owned())
}

/// The fields `s` names, with the name each was asked by, or nvidia-smi's error.
pub fn parse_app_fields(s: &str) -> Result<Vec<(String, AppField)>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            APP_FIELDS
                .iter()
                .find(|(names, _)| names.contains(&name))
                .map(|(names, f)| (names[0].to_owned(), *f))
                .ok_or_else(|| format!("Field \"{name}\" is not a valid field to query."))
        })
        .collect()
}

/// The header line of `--query-compute-apps`.
pub fn apps_header(fields: &[(String, AppField)]) -> String {
    let cells: Vec<String> = fields.iter().map(|(n, f)| f.header(n)).collect();
    debug_assert!(fields.iter().all(|(n, f)| f.names().contains(&n.as_str())));
    cells.join(", ") + "\n"
}

/// One line per compute process on `gpus`, in their order, as nvidia-smi lists them.
pub fn apps_lines(
    model: &Model,
    gpus: &[&Gpu],
    fields: &[(String, AppField)],
    timestamp: &str,
    units: bool,
) -> String {
    let mut out = String::new();
    for gpu in gpus {
        let compute = model
            .processes_on(gpu.index)
            .filter(|p| matches!(p.kind, ProcKind::Compute | ProcKind::Both));
        for p in compute {
            let cells: Vec<String> = fields
                .iter()
                .map(|(_, f)| f.value(timestamp, Some(gpu), p, units))
                .collect();
            out += &cells.join(", ");
            out.push('\n');
        }
    }
    out
}

/// `-L`: `GPU 0: NAME (UUID: GPU-...)` for each of `gpus`, and under a GPU with MIG
/// devices a line for each, numbered in the GPU as nvidia-smi numbers them:
/// `  MIG 3g.40gb     Device  0: (UUID: MIG-...)`.
pub fn list_gpus(model: &Model, gpus: &[&Gpu]) -> String {
    let text = |t: Option<Text>| t.map_or(NOT_AVAILABLE.to_owned(), Text::decode);
    let mut out = String::new();
    for g in gpus {
        out += &format!(
            "GPU {}: {} (UUID: {})\n",
            g.index,
            text(g.name),
            text(g.uuid)
        );
        for (n, m) in model.mig_on(g.index).enumerate() {
            out += &format!(
                "  MIG {:<11} Device {n:>2}: (UUID: {})\n",
                text(m.profile),
                text(m.uuid)
            );
        }
    }
    out
}

/// The loop interval `-l SEC` or `-lms MS` asks for, if any.
pub fn interval(loop_s: Option<&str>, loop_ms: Option<&str>) -> Result<Option<Duration>, Exit> {
    let bad = |flag: &str, v: &str| {
        Exit::new(
            EXIT_USAGE,
            format!("{flag}: \"{v}\" is not a positive whole number"),
        )
    };
    match (loop_s, loop_ms) {
        (Some(_), Some(_)) => Err(Exit::new(
            EXIT_USAGE,
            "-l and -lms cannot be used together".to_owned(),
        )),
        (Some(v), None) => match v.trim().parse::<u64>() {
            Ok(s) if s > 0 => Ok(Some(Duration::from_secs(s))),
            _ => Err(bad("-l", v)),
        },
        (None, Some(v)) => match v.trim().parse::<u64>() {
            Ok(ms) if ms > 0 => Ok(Some(Duration::from_millis(ms))),
            _ => Err(bad("-lms", v)),
        },
        (None, None) => Ok(None),
    }
}

/// Prints `block(snapshot)` at each daemon publish at least `every` after the last
/// printed block's publish (`published_ns`, the daemon's heartbeat of the block already
/// printed; a daemon slower than `every`: at every publish), sleeping on the generation
/// word in between, until stdout closes or the daemon stops being live.
pub fn repeat(
    segment: &Segment,
    mut published_ns: u64,
    every: Duration,
    mut block: impl FnMut(&gpupeek_shm::Snapshot) -> Result<String, Exit>,
) -> Result<(), Exit> {
    let every = every.as_nanos().min(u128::from(u64::MAX)) as u64;
    let mut period: u64 = 0;
    loop {
        // A daemon that died wakes no one: give up waiting after three periods and let
        // the liveness check below say so.
        let timeout = Duration::from_nanos(period.saturating_mul(3)).max(Duration::from_secs(1));
        segment.wait_generation(segment.generation(), timeout);
        let snap = segment.snapshot()?;
        period = snap.status.period_ns;
        crate::check_live(
            segment.name(),
            snap.liveness(gpupeek_shm::mono_now_ns()),
            period,
        )?;
        let at = snap.status.heartbeat_mono_ns;
        // Publishes jitter around the period: half a period early is "on time".
        let due = published_ns
            .saturating_add(every)
            .saturating_sub(period / 2);
        if at > published_ns && at >= due {
            published_ns = at;
            crate::write_stdout(&block(&snap)?)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_fields_take_nvidia_smis_names_and_aliases() {
        let fields = parse_app_fields("pid,name,used_memory,gpu_uuid").unwrap();
        let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["pid", "process_name", "used_gpu_memory", "gpu_uuid"]
        );
        assert_eq!(
            apps_header(&fields),
            "pid, process_name, used_gpu_memory [MiB], gpu_uuid\n"
        );
        assert_eq!(
            parse_app_fields("pid,sm_util").unwrap_err(),
            "Field \"sm_util\" is not a valid field to query."
        );
    }

    #[test]
    fn loop_intervals_are_whole_seconds_or_milliseconds() {
        assert_eq!(
            interval(Some("2"), None).unwrap(),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            interval(None, Some("250")).unwrap(),
            Some(Duration::from_millis(250))
        );
        assert_eq!(interval(None, None).unwrap(), None);
        assert!(interval(Some("0"), None).is_err());
        assert!(interval(Some("x"), None).is_err());
        assert!(interval(Some("1"), Some("1")).is_err());
    }
}

//! What a client shows, decoded once from a snapshot: every optional value as an
//! `Option`, in gpustat's units (MiB, whole watts), processes grouped under their GPU.
//! Every renderer (table, JSON) works from this, never from raw records.
//! A GPU that is asleep (runtime-suspended, or idle and released by the daemon), or whose
//! driver is not responding, keeps only its identity here, whatever else its record
//! holds: no value is shown as current.

use gpupeek_shm::layout::{gpu_valid as v, proc_kind, proc_valid, status_valid, GpuState};
use gpupeek_shm::{text, GpuRecord, ProcPolicy, ProcRecord, Snapshot};

use crate::local::LocalProc;
use crate::verdict::{self, Thresholds, Verdict};

const MIB: u64 = 1024 * 1024;

/// The whole view: header facts and the selected GPUs.
#[derive(Debug)]
pub struct View {
    /// Driver version, when the daemon knows it.
    pub driver_version: Option<String>,
    /// Wall-clock time of the publish, ns since the Unix epoch.
    pub published_unix_ns: u64,
    /// GPUs in display order.
    pub gpus: Vec<GpuView>,
    /// How much the daemon publishes about processes (`None` from a 1.0 daemon).
    pub proc_policy: Option<ProcPolicy>,
    /// How long before this view was built the daemon sampled the process lists, ms
    /// (it samples them every `--process-interval`; `None` from a daemon before ABI 1.2).
    pub processes_age_ms: Option<u64>,
}

/// One GPU.
#[derive(Debug)]
pub struct GpuView {
    /// NVML index.
    pub index: u32,
    /// Health.
    pub state: GpuState,
    /// Product name.
    pub name: Option<String>,
    /// UUID.
    pub uuid: Option<String>,
    /// PCI bus id.
    pub pci_bus_id: Option<String>,
    /// Degrees Celsius.
    pub temperature_c: Option<i32>,
    /// Percent.
    pub fan_pct: Option<u32>,
    /// Percent.
    pub util_pct: Option<u32>,
    /// Percent.
    pub enc_pct: Option<u32>,
    /// Percent.
    pub dec_pct: Option<u32>,
    /// Whole watts (rounded down, as gpustat).
    pub power_draw_w: Option<u32>,
    /// Whole watts.
    pub power_limit_w: Option<u32>,
    /// MiB (rounded down, as gpustat).
    pub mem_used_mib: Option<u64>,
    /// MiB.
    pub mem_total_mib: Option<u64>,
    /// `None` when the process list was not available.
    pub processes: Option<Vec<ProcView>>,
    /// Processes NVML listed that did not fit in the segment's table.
    pub processes_not_shown: u32,
    /// Whether the GPU is really working (see [`crate::verdict`]).
    pub verdict: Option<Verdict>,
    /// Clock event (throttle) reasons in force, by nvidia-smi's names.
    pub clock_event_reasons: Option<Vec<&'static str>>,
    /// GPM metrics, when the GPU has GPM and the daemon computed them.
    pub gpm: Option<GpmView>,
}

/// GPM metrics of one GPU over the daemon's last GPM window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GpmView {
    /// SM activity, percent.
    pub sm_activity_pct: Option<f64>,
    /// SM occupancy, percent.
    pub sm_occupancy_pct: Option<f64>,
    /// Tensor-core activity, percent.
    pub tensor_activity_pct: Option<f64>,
    /// DRAM bandwidth utilisation, percent.
    pub dram_bw_util_pct: Option<f64>,
    /// PCIe transmit and receive, bytes per second.
    pub pcie_bytes_per_s: Option<(u64, u64)>,
    /// NVLink transmit and receive (all links), bytes per second.
    pub nvlink_bytes_per_s: Option<(u64, u64)>,
    /// Length of the window, ms.
    pub interval_ms: u64,
}

impl GpmView {
    fn new(g: &GpuRecord, valid: u64) -> Option<GpmView> {
        let pct = |bit, centi: u32| opt(valid, bit, f64::from(centi) / 100.0);
        opt(valid, v::GPM, ()).map(|()| GpmView {
            sm_activity_pct: pct(v::GPM_SM_ACTIVITY, g.gpm_sm_activity_centipct),
            sm_occupancy_pct: pct(v::GPM_SM_OCCUPANCY, g.gpm_sm_occupancy_centipct),
            tensor_activity_pct: pct(v::GPM_TENSOR_ACTIVITY, g.gpm_tensor_activity_centipct),
            dram_bw_util_pct: pct(v::GPM_DRAM_BW, g.gpm_dram_bw_util_centipct),
            pcie_bytes_per_s: opt(
                valid,
                v::GPM_PCIE,
                (g.gpm_pcie_tx_bytes_per_s, g.gpm_pcie_rx_bytes_per_s),
            ),
            nvlink_bytes_per_s: opt(
                valid,
                v::GPM_NVLINK,
                (g.gpm_nvlink_tx_bytes_per_s, g.gpm_nvlink_rx_bytes_per_s),
            ),
            interval_ms: g.gpm_interval_ns / 1_000_000,
        })
    }
}

/// One process on one GPU.
#[derive(Debug, Clone, Default)]
pub struct ProcView {
    /// Pid as the reader knows it: in the reader's own pid namespace when the process
    /// is in it (e.g. both in one container), else the host pid.
    pub pid: u32,
    /// Pid in the host's (the daemon's) pid namespace.
    pub host_pid: u32,
    /// Owner's uid.
    pub uid: Option<u32>,
    /// User name.
    pub user: Option<String>,
    /// Command name.
    pub command: Option<String>,
    /// Command line, one string per argument; the last ends in `…` when truncated.
    pub full_command: Option<Vec<String>>,
    /// MiB.
    pub gpu_mem_mib: Option<u64>,
    /// SM, memory, encoder, decoder utilisation by this process, percent.
    pub gpu_util_pct: Option<[u32; 4]>,
    /// Percent of one core over the daemon's last period.
    pub cpu_percent: Option<f64>,
    /// Resident host memory, bytes.
    pub host_mem_bytes: Option<u64>,
    /// Seconds since the process started, at the time of the publish.
    pub running_secs: Option<u64>,
    /// "compute", "graphics" or "both".
    pub kind: &'static str,
    /// MIG GPU and compute instance ids.
    pub mig: Option<(u32, u32)>,
    /// Container runtime, id and pod uid.
    pub container: Option<ContainerView>,
}

/// The container a process runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerView {
    /// "docker", "containerd", "cri-o", "podman", "lxc" or "kubepods".
    pub runtime: String,
    /// Container id (or lxc name).
    pub id: String,
    /// Kubernetes pod uid.
    pub pod_uid: Option<String>,
}

fn opt<T>(valid: u64, bit: u64, value: T) -> Option<T> {
    (valid & bit != 0).then_some(value)
}

/// A string field, decoded only when its validity bit is set.
/// The segment's user field holds 31 bytes: a longer name (SSSD or AD `user@domain`
/// names) arrives cut. One that fills the field is completed from the reader's own user
/// database (`lookup`), when the name found there for the uid begins with what was
/// published; otherwise the published name stands.
fn complete_user_name(
    published: String,
    field: &[u8],
    uid: u32,
    lookup: impl Fn(u32) -> String,
) -> String {
    let used = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    // Within a character of full: encoding cuts at a character boundary.
    if used + 4 < field.len() {
        return published;
    }
    let local = lookup(uid);
    if local.len() > published.len() && local.starts_with(&published) {
        local
    } else {
        published
    }
}

fn user_name_of(uid: u32) -> String {
    gpupeek_shm::procfs::user_name(uid)
}

fn opt_text(valid: u64, bit: u64, field: &[u8]) -> Option<String> {
    (valid & bit != 0).then(|| text::decode(field))
}

/// How processes are decoded: the reader's pid namespace, and whether to fill in the
/// details the daemon withheld from the reader's own `/proc`.
#[derive(Debug, Default)]
pub struct Context {
    /// Inode of the reader's pid namespace (0 when unknown).
    pub pid_ns_inode: u64,
    /// Reads the reader's own `/proc` for a pid (`None` when it shows nothing).
    pub local: Option<fn(u32) -> Option<LocalProc>>,
}

impl View {
    /// Builds the view of `ids` (all GPUs when `None`); an unknown id is an error.
    pub fn new(snap: &Snapshot, ids: Option<&[u32]>, ctx: &Context) -> Result<View, u32> {
        let gpus = match ids {
            None => snap
                .gpus
                .iter()
                .map(|g| GpuView::new(g, snap, ctx))
                .collect(),
            Some(ids) => ids
                .iter()
                .map(|&id| {
                    let gpu = snap.gpus.iter().find(|g| g.index == id).ok_or(id)?;
                    Ok(GpuView::new(gpu, snap, ctx))
                })
                .collect::<Result<_, u32>>()?,
        };
        let s = &snap.status;
        Ok(View {
            driver_version: opt_text(s.valid, status_valid::DRIVER_VERSION, &s.driver_version),
            published_unix_ns: s.published_unix_ns,
            gpus,
            proc_policy: snap.proc_policy(),
            processes_age_ms: processes_age_ns(snap, gpupeek_shm::mono_now_ns())
                .map(|ns| ns / 1_000_000),
        })
    }
}

/// How long before `now_mono_ns` the daemon sampled the process table; `None` when the
/// daemon does not say (before ABI 1.2).
pub fn processes_age_ns(snap: &Snapshot, now_mono_ns: u64) -> Option<u64> {
    let sampled = snap.proc_head.sample_mono_ns;
    (sampled != 0).then(|| now_mono_ns.saturating_sub(sampled))
}

impl GpuView {
    fn new(g: &GpuRecord, snap: &Snapshot, ctx: &Context) -> GpuView {
        let state = GpuState::from_raw(g.state).unwrap_or(GpuState::Error);
        let valid = match state {
            GpuState::Suspended | GpuState::Idle | GpuState::NotResponding => {
                g.valid & (v::NAME | v::UUID | v::PCI_BUS_ID)
            }
            _ => g.valid,
        };
        let processes = (valid & v::PROCESSES != 0).then(|| {
            snap.processes_on(g.index)
                .map(|p| ProcView::new(p, snap, ctx))
                .collect::<Vec<_>>()
        });
        let shown = processes.as_ref().map_or(0, Vec::len) as u32;
        // Not sampled now: the record's process count is not current either.
        let unsampled = matches!(
            state,
            GpuState::Suspended | GpuState::Idle | GpuState::NotResponding
        );
        GpuView {
            index: g.index,
            state,
            name: opt_text(valid, v::NAME, &g.name),
            uuid: opt_text(valid, v::UUID, &g.uuid),
            pci_bus_id: opt_text(valid, v::PCI_BUS_ID, &g.pci_bus_id),
            temperature_c: opt(valid, v::TEMPERATURE, g.temp_gpu_c),
            fan_pct: opt(valid, v::FAN_SPEED, g.fan_speed_pct),
            util_pct: opt(valid, v::UTILIZATION, g.util_gpu_pct),
            enc_pct: opt(valid, v::UTIL_ENC, g.util_enc_pct),
            dec_pct: opt(valid, v::UTIL_DEC, g.util_dec_pct),
            power_draw_w: opt(valid, v::POWER_DRAW, g.power_draw_mw / 1000),
            power_limit_w: opt(valid, v::POWER_LIMIT, g.power_limit_mw / 1000),
            mem_used_mib: opt(valid, v::MEMORY, g.mem_used_bytes / MIB),
            mem_total_mib: opt(valid, v::MEMORY, g.mem_total_bytes / MIB),
            processes_not_shown: if unsampled {
                0
            } else {
                g.process_count.saturating_sub(shown)
            },
            processes,
            verdict: verdict::judge(g, &Thresholds::current()),
            clock_event_reasons: opt(valid, v::CLOCK_EVENT_REASONS, g.clock_event_reasons)
                .map(verdict::reason_names),
            gpm: GpmView::new(g, valid),
        }
    }

    /// False when the GPU was not sampled (lost, failing or asleep).
    pub fn is_healthy(&self) -> bool {
        matches!(self.state, GpuState::Ok)
    }

    /// What gpustat shows instead of the name of a GPU that could not be sampled
    /// (gpustat's "invalid GPU"); `None` for a healthy or an asleep GPU.
    pub fn problem(&self) -> Option<&'static str> {
        match self.state {
            GpuState::Ok | GpuState::Suspended | GpuState::Idle => None,
            GpuState::Lost => Some("((GPU is lost))"),
            GpuState::NotResponding => Some("((Driver not responding))"),
            GpuState::Error | GpuState::Empty => Some("((Unknown Error))"),
        }
    }

    /// `"suspended"` or `"idle"` when the daemon lets the GPU sleep and does not query
    /// it (so it has no current values).
    pub fn asleep(&self) -> Option<&'static str> {
        match self.state {
            GpuState::Suspended | GpuState::Idle => Some(self.state.name()),
            _ => None,
        }
    }
}

impl ProcView {
    fn new(p: &ProcRecord, snap: &Snapshot, ctx: &Context) -> ProcView {
        let valid = p.valid;
        let published = snap.status.published_unix_ns;
        let same_ns = valid & proc_valid::NAMESPACE != 0 && p.pid_ns_inode == ctx.pid_ns_inode;
        let mut view = ProcView {
            pid: if same_ns { p.ns_pid } else { p.pid },
            host_pid: p.pid,
            uid: opt(valid, proc_valid::USER, p.uid),
            user: opt_text(valid, proc_valid::USER, &p.user)
                .map(|user| complete_user_name(user, &p.user, p.uid, user_name_of)),
            command: opt_text(valid, proc_valid::COMMAND, &p.command),
            full_command: opt(valid, proc_valid::CMDLINE, ())
                .map(|()| text::decode_argv(&p.cmdline, p.cmdline_len)),
            gpu_mem_mib: opt(valid, proc_valid::GPU_MEMORY, p.gpu_mem_bytes / MIB),
            gpu_util_pct: opt(
                valid,
                proc_valid::GPU_UTIL,
                [
                    p.sm_util_pct,
                    p.mem_util_pct,
                    p.enc_util_pct,
                    p.dec_util_pct,
                ],
            ),
            cpu_percent: opt(valid, proc_valid::CPU, f64::from(p.cpu_centipct) / 100.0),
            host_mem_bytes: opt(valid, proc_valid::HOST_MEMORY, p.host_rss_bytes),
            running_secs: opt(valid, proc_valid::START_TIME, p.start_unix_ns)
                .map(|start| published.saturating_sub(start) / 1_000_000_000),
            kind: match p.kind & (proc_kind::COMPUTE | proc_kind::GRAPHICS) {
                proc_kind::COMPUTE => "compute",
                proc_kind::GRAPHICS => "graphics",
                0 => "unknown",
                _ => "both",
            },
            mig: (p.gpu_instance_id != u32::MAX)
                .then_some((p.gpu_instance_id, p.compute_instance_id)),
            container: opt(valid, proc_valid::CONTAINER, ()).map(|()| ContainerView {
                runtime: text::decode(&p.container_runtime),
                id: text::decode(&p.container_id),
                pod_uid: Some(text::decode(&p.pod_uid)).filter(|s| !s.is_empty()),
            }),
        };
        // The daemon withheld the details (basic policy, e.g. under hidepid): show what
        // the reader's own /proc shows, when the pids are in the reader's namespace.
        let withheld = valid & proc_valid::USER == 0;
        let readers_ns =
            snap.proc_head.pid_ns_inode != 0 && snap.proc_head.pid_ns_inode == ctx.pid_ns_inode;
        if let Some(local) = ctx.local.filter(|_| withheld && readers_ns) {
            if let Some(found) = local(p.pid) {
                found.fill(&mut view, published);
            }
        }
        view
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &str) -> [u8; 32] {
        let mut f = [0u8; 32];
        text::encode(&mut f, name);
        f
    }

    #[test]
    fn a_user_name_cut_by_the_field_is_completed_from_the_readers_user_database() {
        let long = "averyveryverylongusername@ad.example.edu";
        let f = field(long);
        let published = text::decode(&f);
        assert_eq!(published.len(), 31, "the field cuts it");
        let lookup = |uid: u32| {
            if uid == 4242 {
                long.to_owned()
            } else {
                uid.to_string()
            }
        };
        assert_eq!(
            complete_user_name(published.clone(), &f, 4242, lookup),
            long
        );
        // A database that says something else (another container's) is not believed.
        let other = |_: u32| "someone-else-entirely-with-a-long-name".to_owned();
        assert_eq!(
            complete_user_name(published.clone(), &f, 4242, other),
            published
        );
        // A name that fits is never looked up.
        let short = field("alice");
        let never = |_: u32| -> String { panic!("looked up a name that fits") };
        assert_eq!(
            complete_user_name("alice".into(), &short, 1000, never),
            "alice"
        );
    }
}

//! What a client shows, decoded once from a snapshot: every optional value as an
//! `Option`, in gpustat's units (MiB, whole watts), processes grouped under their GPU.
//! Every renderer (table, JSON) works from this, never from raw records.
//! A GPU that is asleep (runtime-suspended, or idle and released by the daemon) keeps
//! only its identity here, whatever else its record holds: no value is shown as current.

use gpupeek_shm::layout::{gpu_valid as v, proc_valid, status_valid, GpuState};
use gpupeek_shm::{text, GpuRecord, ProcRecord, Snapshot};

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
}

/// One process on one GPU.
#[derive(Debug)]
pub struct ProcView {
    /// Host pid.
    pub pid: u32,
    /// User name.
    pub user: Option<String>,
    /// Command name.
    pub command: Option<String>,
    /// MiB.
    pub gpu_mem_mib: Option<u64>,
}

fn opt<T>(valid: u64, bit: u64, value: T) -> Option<T> {
    (valid & bit != 0).then_some(value)
}

/// A string field, decoded only when its validity bit is set.
fn opt_text(valid: u64, bit: u64, field: &[u8]) -> Option<String> {
    (valid & bit != 0).then(|| text::decode(field))
}

impl View {
    /// Builds the view of `ids` (all GPUs when `None`); an unknown id is an error.
    pub fn new(snap: &Snapshot, ids: Option<&[u32]>) -> Result<View, u32> {
        let gpus = match ids {
            None => snap.gpus.iter().map(|g| GpuView::new(g, snap)).collect(),
            Some(ids) => ids
                .iter()
                .map(|&id| {
                    let gpu = snap.gpus.iter().find(|g| g.index == id).ok_or(id)?;
                    Ok(GpuView::new(gpu, snap))
                })
                .collect::<Result<_, u32>>()?,
        };
        let s = &snap.status;
        Ok(View {
            driver_version: opt_text(s.valid, status_valid::DRIVER_VERSION, &s.driver_version),
            published_unix_ns: s.published_unix_ns,
            gpus,
        })
    }
}

impl GpuView {
    fn new(g: &GpuRecord, snap: &Snapshot) -> GpuView {
        let state = GpuState::from_raw(g.state).unwrap_or(GpuState::Error);
        let valid = match state {
            GpuState::Suspended | GpuState::Idle => g.valid & (v::NAME | v::UUID | v::PCI_BUS_ID),
            _ => g.valid,
        };
        let processes = (valid & v::PROCESSES != 0).then(|| {
            snap.processes_on(g.index)
                .map(ProcView::new)
                .collect::<Vec<_>>()
        });
        let shown = processes.as_ref().map_or(0, Vec::len) as u32;
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
            processes_not_shown: g.process_count.saturating_sub(shown),
            processes,
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
    fn new(p: &ProcRecord) -> ProcView {
        ProcView {
            pid: p.pid,
            user: opt_text(p.valid, proc_valid::USER, &p.user),
            command: opt_text(p.valid, proc_valid::COMMAND, &p.command),
            gpu_mem_mib: opt(p.valid, proc_valid::GPU_MEMORY, p.gpu_mem_bytes / MIB),
        }
    }
}

//! What the client's unit tests share: a snapshot of a live daemon made of given GPU
//! records, as a reader would have copied it out of a segment.

use gpupeek_shm::layout::DaemonState;
use gpupeek_shm::{GpuRecord, Snapshot, StatusRecord};

/// A consistent snapshot of a live daemon with a 1 s period publishing `gpus` and no
/// process.
pub fn live_snapshot(gpus: Vec<GpuRecord>) -> Snapshot {
    Snapshot {
        header: Default::default(),
        status: StatusRecord {
            state: DaemonState::Live as u32,
            gpu_count: gpus.len() as u32,
            period_ns: 1_000_000_000,
            ..StatusRecord::default()
        },
        gpus,
        processes: Vec::new(),
        proc_overflow: 0,
        proc_head: Default::default(),
        text: Vec::new(),
        mig: Vec::new(),
        mig_overflow: 0,
        generation: 1,
        consistent: true,
    }
}

/// A live snapshot of an H100 split into three MIG devices, as the daemon publishes it:
/// 3g.40gb (GPU instance 1, 40 % SM activity, two processes), 2g.20gb (5, no GPM, one
/// process) and 1g.10gb (13, SM activity 0 with 2 GiB held, one process); the GPU's
/// utilisation is not available (NVML has none under MIG), the rest is.
#[cfg(test)]
pub fn mig_snapshot() -> Snapshot {
    use gpupeek_shm::layout::{gpu_valid as v, mig_valid as mv, proc_kind, proc_valid as pv};
    use gpupeek_shm::{text, GpuState, MigRecord, ProcRecord};
    const MIB: u64 = 1 << 20;
    let mut gpu = GpuRecord {
        index: 0,
        state: GpuState::Ok as u32,
        valid: v::NAME | v::UUID | v::MEMORY | v::TEMPERATURE | v::CLOCK_EVENT_REASONS,
        mem_total_bytes: 81_559 * MIB,
        mem_used_bytes: 7_000 * MIB,
        mem_free_bytes: 74_559 * MIB,
        temp_gpu_c: 45,
        ..Default::default()
    };
    text::encode(&mut gpu.name, "NVIDIA H100 80GB HBM3");
    text::encode(&mut gpu.uuid, "GPU-a1b2");
    let mig = |gi: u32, profile: &str, total_mib: u64, used_mib: u64, sm: Option<u32>| {
        let mut m = MigRecord {
            gpu_index: 0,
            gpu_instance_id: gi,
            compute_instance_id: 0,
            valid: mv::UUID | mv::PROFILE | mv::MEMORY,
            mem_total_bytes: total_mib * MIB,
            mem_used_bytes: used_mib * MIB,
            mem_free_bytes: (total_mib - used_mib) * MIB,
            ..MigRecord::default()
        };
        if let Some(pct) = sm {
            m.valid |= mv::GPM | mv::GPM_SM_ACTIVITY;
            m.gpm_sm_activity_centipct = pct * 100;
            m.gpm_interval_ns = 1_000_000_000;
        }
        text::encode(&mut m.profile, profile);
        text::encode(&mut m.uuid, &format!("MIG-{gi:04}"));
        m
    };
    let process = |pid: u32, mib: u64, gi: u32| ProcRecord {
        gpu_index: 0,
        pid,
        kind: proc_kind::COMPUTE,
        valid: pv::GPU_MEMORY,
        gpu_mem_bytes: mib * MIB,
        gpu_instance_id: gi,
        compute_instance_id: 0,
        ..ProcRecord::default()
    };
    gpu.valid |= v::PROCESSES;
    gpu.process_count = 4;
    let mut snap = live_snapshot(vec![gpu]);
    snap.mig = vec![
        mig(1, "3g.40gb", 40_448, 3_000, Some(40)),
        mig(5, "2g.20gb", 20_096, 2_000, None),
        mig(13, "1g.10gb", 9_984, 2_048, Some(0)),
    ];
    snap.processes = vec![
        process(101, 1_000, 1),
        process(102, 2_000, 1),
        process(103, 2_000, 5),
        process(104, 2_048, 13),
    ];
    snap
}

/// A sampled GPU with these processes and nothing else known, for the grouped tables'
/// tests.
#[cfg(test)]
pub fn gpu_view(index: u32, processes: Vec<crate::view::ProcView>) -> crate::view::GpuView {
    crate::view::GpuView {
        index,
        state: gpupeek_shm::GpuState::Ok,
        name: None,
        uuid: None,
        pci_bus_id: None,
        temperature_c: None,
        fan_pct: None,
        util_pct: None,
        enc_pct: None,
        dec_pct: None,
        power_draw_w: None,
        power_limit_w: None,
        mem_used_mib: None,
        mem_total_mib: None,
        processes: Some(processes),
        processes_not_shown: 0,
        verdict: None,
        clock_event_reasons: None,
        gpm: None,
        mig: Vec::new(),
    }
}

//! Prints every published field of a segment as `key=value` lines (`n/a` where the
//! validity bit is clear): an example of a third-party reader, and what
//! `scripts/gpu-check` compares with nvidia-smi.
//!
//! Usage: `dump-segment [NAME]` (default: $GPUPEEK_SHM, else "gpupeek").

use gpupeek_shm::layout::{gpu_valid as v, gpu_valid4, mig_valid, proc_valid, status_valid};
use gpupeek_shm::{text, Segment};

fn main() {
    let name = gpupeek_shm::resolve_name(std::env::args().nth(1).as_deref());
    let snap = match Segment::open(&name).and_then(|s| s.snapshot()) {
        Ok(snap) => snap,
        Err(e) => {
            eprintln!("dump-segment: {e}");
            std::process::exit(1);
        }
    };
    let s = &snap.status;
    let show = |valid: bool, value: String| if valid { value } else { "n/a".into() };
    println!("abi={}.{}", snap.header.abi_major, snap.header.abi_minor);
    println!("liveness={:?}", snap.liveness(gpupeek_shm::mono_now_ns()));
    println!(
        "generation={} consistent={}",
        snap.generation, snap.consistent
    );
    println!(
        "driver_version={}",
        show(
            s.valid & status_valid::DRIVER_VERSION != 0,
            text::decode(&s.driver_version)
        )
    );
    println!(
        "nvml_version={}",
        show(
            s.valid & status_valid::NVML_VERSION != 0,
            text::decode(&s.nvml_version)
        )
    );
    println!(
        "cuda_driver_version={}",
        show(
            s.valid & status_valid::CUDA_DRIVER_VERSION != 0,
            s.cuda_driver_version.to_string()
        )
    );
    for g in &snap.gpus {
        let f = |bit: u64, value: &dyn ToString| show(g.valid & bit != 0, value.to_string());
        let fields: [(&str, String); 41] = [
            (
                "state",
                format!("{:?}", gpupeek_shm::GpuState::from_raw(g.state)),
            ),
            ("nvml_error_code", g.nvml_error_code.to_string()),
            ("name", f(v::NAME, &text::decode(&g.name))),
            ("uuid", f(v::UUID, &text::decode(&g.uuid))),
            ("pci_bus_id", f(v::PCI_BUS_ID, &text::decode(&g.pci_bus_id))),
            (
                "minor_number",
                show(
                    g.valid4 & gpu_valid4::MINOR_NUMBER != 0,
                    g.minor_number.to_string(),
                ),
            ),
            ("mem_total_bytes", f(v::MEMORY, &g.mem_total_bytes)),
            ("mem_used_bytes", f(v::MEMORY, &g.mem_used_bytes)),
            ("mem_free_bytes", f(v::MEMORY, &g.mem_free_bytes)),
            (
                "mem_reserved_bytes",
                f(v::MEM_RESERVED, &g.mem_reserved_bytes),
            ),
            ("util_gpu_pct", f(v::UTILIZATION, &g.util_gpu_pct)),
            ("util_mem_pct", f(v::UTILIZATION, &g.util_mem_pct)),
            ("util_enc_pct", f(v::UTIL_ENC, &g.util_enc_pct)),
            ("util_dec_pct", f(v::UTIL_DEC, &g.util_dec_pct)),
            ("temp_gpu_c", f(v::TEMPERATURE, &g.temp_gpu_c)),
            ("fan_speed_pct", f(v::FAN_SPEED, &g.fan_speed_pct)),
            ("power_draw_mw", f(v::POWER_DRAW, &g.power_draw_mw)),
            ("power_limit_mw", f(v::POWER_LIMIT, &g.power_limit_mw)),
            ("energy_mj", f(v::ENERGY, &g.energy_mj)),
            (
                "clock_graphics_mhz",
                f(v::CLOCK_GRAPHICS, &g.clock_graphics_mhz),
            ),
            ("clock_sm_mhz", f(v::CLOCK_SM, &g.clock_sm_mhz)),
            ("clock_mem_mhz", f(v::CLOCK_MEM, &g.clock_mem_mhz)),
            (
                "clock_graphics_max_mhz",
                f(v::CLOCK_GRAPHICS_MAX, &g.clock_graphics_max_mhz),
            ),
            ("clock_sm_max_mhz", f(v::CLOCK_SM_MAX, &g.clock_sm_max_mhz)),
            (
                "clock_mem_max_mhz",
                f(v::CLOCK_MEM_MAX, &g.clock_mem_max_mhz),
            ),
            ("pstate", f(v::PSTATE, &format!("P{}", g.pstate))),
            (
                "clock_event_reasons",
                f(
                    v::CLOCK_EVENT_REASONS,
                    &format!("{:#x}", g.clock_event_reasons),
                ),
            ),
            (
                "pcie_tx_kbytes_per_s",
                f(v::PCIE_TX, &g.pcie_tx_kbytes_per_s),
            ),
            (
                "pcie_rx_kbytes_per_s",
                f(v::PCIE_RX, &g.pcie_rx_kbytes_per_s),
            ),
            (
                "pcie_link",
                f(
                    v::PCIE_LINK_GEN | v::PCIE_LINK_WIDTH,
                    &format!("gen{} x{}", g.pcie_link_gen, g.pcie_link_width),
                ),
            ),
            (
                "ecc_volatile",
                f(
                    v::ECC_CORRECTED | v::ECC_UNCORRECTED,
                    &format!(
                        "corrected={} uncorrected={}",
                        g.ecc_corrected_volatile_count, g.ecc_uncorrected_volatile_count
                    ),
                ),
            ),
            ("process_count", f(v::PROCESSES, &g.process_count)),
            ("gpm_interval_ns", f(v::GPM, &g.gpm_interval_ns)),
            (
                "gpm_sm_activity_centipct",
                f(v::GPM_SM_ACTIVITY, &g.gpm_sm_activity_centipct),
            ),
            (
                "gpm_sm_occupancy_centipct",
                f(v::GPM_SM_OCCUPANCY, &g.gpm_sm_occupancy_centipct),
            ),
            (
                "gpm_tensor_activity_centipct",
                f(v::GPM_TENSOR_ACTIVITY, &g.gpm_tensor_activity_centipct),
            ),
            (
                "gpm_dram_bw_util_centipct",
                f(v::GPM_DRAM_BW, &g.gpm_dram_bw_util_centipct),
            ),
            (
                "gpm_pcie_bytes_per_s",
                f(
                    v::GPM_PCIE,
                    &format!(
                        "tx={} rx={}",
                        g.gpm_pcie_tx_bytes_per_s, g.gpm_pcie_rx_bytes_per_s
                    ),
                ),
            ),
            (
                "gpm_nvlink_bytes_per_s",
                f(
                    v::GPM_NVLINK,
                    &format!(
                        "tx={} rx={}",
                        g.gpm_nvlink_tx_bytes_per_s, g.gpm_nvlink_rx_bytes_per_s
                    ),
                ),
            ),
            (
                "idle_since_mono_ns",
                f(v::IDLE_SINCE, &g.idle_since_mono_ns),
            ),
            (
                "mig_mode",
                f(
                    v::MIG_MODE,
                    &format!(
                        "current={} pending={}",
                        g.mig_mode_current, g.mig_mode_pending
                    ),
                ),
            ),
        ];
        for (key, value) in fields {
            println!("gpu{}.{key}={value}", g.index);
        }
    }
    println!(
        "processes.policy={} processes.flags={} processes.pid_ns_inode={} \
         processes.text_pool_bytes={}/{}",
        snap.proc_policy().map_or("unknown", |p| p.name()),
        snap.proc_head.flags,
        snap.proc_head.pid_ns_inode,
        snap.proc_head.text_pool_used_bytes,
        snap.proc_head.text_pool_size_bytes
    );
    for p in &snap.processes {
        // The whole texts from the pool (ABI 1.5) where it has them, else the fixed fields.
        let full = snap.full_text(p);
        let command = full
            .command
            .map_or_else(|| text::decode(&p.command), text::decode);
        let argv = text::decode_argv(full.cmdline.unwrap_or(&p.cmdline), p.cmdline_len);
        let f = |bit: u64, value: String| {
            if p.valid & bit != 0 {
                value
            } else {
                "n/a".into()
            }
        };
        let fields = [
            ("gpu", p.gpu_index.to_string()),
            ("pid", p.pid.to_string()),
            ("kind", p.kind.to_string()),
            ("uid", f(proc_valid::USER, p.uid.to_string())),
            ("user", f(proc_valid::USER, text::decode(&p.user))),
            ("command", f(proc_valid::COMMAND, command)),
            ("cmdline", f(proc_valid::CMDLINE, format!("{argv:?}"))),
            (
                "gpu_mem_bytes",
                f(proc_valid::GPU_MEMORY, p.gpu_mem_bytes.to_string()),
            ),
            (
                "gpu_util_pct",
                f(
                    proc_valid::GPU_UTIL,
                    format!(
                        "sm:{} mem:{} enc:{} dec:{}",
                        p.sm_util_pct, p.mem_util_pct, p.enc_util_pct, p.dec_util_pct
                    ),
                ),
            ),
            (
                "cpu_centipct",
                f(proc_valid::CPU, p.cpu_centipct.to_string()),
            ),
            (
                "host_rss_bytes",
                f(proc_valid::HOST_MEMORY, p.host_rss_bytes.to_string()),
            ),
            (
                "start_unix_ns",
                f(proc_valid::START_TIME, p.start_unix_ns.to_string()),
            ),
            ("ns_pid", f(proc_valid::NAMESPACE, p.ns_pid.to_string())),
            (
                "pid_ns_inode",
                f(proc_valid::NAMESPACE, p.pid_ns_inode.to_string()),
            ),
            (
                "container",
                f(
                    proc_valid::CONTAINER,
                    format!(
                        "{}:{}:{}",
                        text::decode(&p.container_runtime),
                        text::decode(&p.container_id),
                        text::decode(&p.pod_uid)
                    ),
                ),
            ),
            ("gpu_instance_id", p.gpu_instance_id.to_string()),
            ("compute_instance_id", p.compute_instance_id.to_string()),
        ];
        let line: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("process {}", line.join(" "));
    }
    if snap.proc_overflow > 0 {
        println!("processes_not_shown={}", snap.proc_overflow);
    }
    for m in &snap.mig {
        let f = |bit: u64, value: String| show(m.valid & bit != 0, value);
        let pct = |bit: u64, centi: u32| f(bit, format!("{:.2}", f64::from(centi) / 100.0));
        let fields = [
            ("gpu", m.gpu_index.to_string()),
            ("mig_index", m.mig_index.to_string()),
            ("gpu_instance_id", m.gpu_instance_id.to_string()),
            ("compute_instance_id", m.compute_instance_id.to_string()),
            ("uuid", f(mig_valid::UUID, text::decode(&m.uuid))),
            ("profile", f(mig_valid::PROFILE, text::decode(&m.profile))),
            (
                "placement",
                f(
                    mig_valid::PLACEMENT,
                    format!(
                        "profile_id:{} start:{} size:{}",
                        m.gpu_instance_profile_id, m.placement_start, m.placement_size
                    ),
                ),
            ),
            (
                "mem_total_bytes",
                f(mig_valid::MEMORY, m.mem_total_bytes.to_string()),
            ),
            (
                "mem_used_bytes",
                f(mig_valid::MEMORY, m.mem_used_bytes.to_string()),
            ),
            ("sm_count", f(mig_valid::SM_COUNT, m.sm_count.to_string())),
            (
                "slices",
                f(
                    mig_valid::SLICES,
                    format!(
                        "gi:{} ci:{}",
                        m.gpu_instance_slice_count, m.compute_instance_slice_count
                    ),
                ),
            ),
            (
                "gpm_sm_activity_pct",
                pct(mig_valid::GPM_SM_ACTIVITY, m.gpm_sm_activity_centipct),
            ),
            (
                "gpm_dram_bw_util_pct",
                pct(mig_valid::GPM_DRAM_BW, m.gpm_dram_bw_util_centipct),
            ),
        ];
        let line: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("mig {}", line.join(" "));
        let pids: Vec<String> = snap.processes_in(m).map(|p| p.pid.to_string()).collect();
        println!("mig.processes={}", pids.join(","));
    }
    if snap.mig_overflow > 0 {
        println!("mig_not_shown={}", snap.mig_overflow);
    }
}

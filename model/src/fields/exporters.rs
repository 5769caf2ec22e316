//! Other exporters' names for the field table's fields, so `gpupeek metrics --names`
//! can stand in for them and the dashboards built on them keep working.
//!
//! - [`DCGM`]: NVIDIA dcgm-exporter's `DCGM_FI_*` families, one entry per field, named
//!   and typed as dcgm-exporter's counter files (`etc/default-counters.csv`,
//!   `etc/dcp-metrics-included.csv`) declare them. Values are in DCGM's units, derived from
//!   the field's [`super::Unit`] by the output (MiB, W, mJ, MHz, %, 0..1 ratios), not
//!   declared here.
//! - nvidia_gpu_exporter's `nvidia_smi_*` families need no entry for a field that has an
//!   nvidia-smi name: that exporter names each family after the `--query-gpu` field
//!   (`memory.used [MiB]` becomes `nvidia_smi_memory_used_bytes`), so the output derives
//!   the name from [`super::Field::smi`]. [`NVIDIA_SMI_EXTRA`] lists the families it
//!   reads from NVML directly, which have no nvidia-smi name.
//!
//! Each entry names its field by [`super::Field::name`]; a test checks every name exists.

/// One family of another exporter fed by one field.
#[derive(Debug, Clone, Copy)]
pub struct Alias {
    /// The field's name in the field table.
    pub field: &'static str,
    /// The family's name in the other exporter.
    pub name: &'static str,
    /// `gauge` or `counter`, as the other exporter declares it.
    pub kind: &'static str,
    /// Its HELP text there.
    pub help: &'static str,
}

const fn alias(
    field: &'static str,
    name: &'static str,
    kind: &'static str,
    help: &'static str,
) -> Alias {
    Alias {
        field,
        name,
        kind,
        help,
    }
}

/// dcgm-exporter's families, in the order of its default counters file (then the
/// fields it knows but does not export by default).
pub const DCGM: &[Alias] = &[
    alias(
        "clock_sm",
        "DCGM_FI_DEV_SM_CLOCK",
        "gauge",
        "SM clock frequency (in MHz).",
    ),
    alias(
        "clock_mem",
        "DCGM_FI_DEV_MEM_CLOCK",
        "gauge",
        "Memory clock frequency (in MHz).",
    ),
    alias(
        "temp",
        "DCGM_FI_DEV_GPU_TEMP",
        "gauge",
        "GPU temperature (in C).",
    ),
    alias(
        "power",
        "DCGM_FI_DEV_POWER_USAGE",
        "gauge",
        "Power draw (in W).",
    ),
    alias(
        "energy",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
    ),
    alias(
        "util",
        "DCGM_FI_DEV_GPU_UTIL",
        "gauge",
        "GPU utilization (in %).",
    ),
    alias(
        "util_mem",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "gauge",
        "Memory utilization (in %).",
    ),
    alias(
        "util_enc",
        "DCGM_FI_DEV_ENC_UTIL",
        "gauge",
        "Encoder utilization (in %).",
    ),
    alias(
        "util_dec",
        "DCGM_FI_DEV_DEC_UTIL",
        "gauge",
        "Decoder utilization (in %).",
    ),
    alias(
        "xid_last",
        "DCGM_FI_DEV_XID_ERRORS",
        "gauge",
        "Value of the last XID error encountered.",
    ),
    alias(
        "mem_free",
        "DCGM_FI_DEV_FB_FREE",
        "gauge",
        "Framebuffer memory free (in MiB).",
    ),
    alias(
        "mem_used",
        "DCGM_FI_DEV_FB_USED",
        "gauge",
        "Framebuffer memory used (in MiB).",
    ),
    alias(
        "mem_reserved",
        "DCGM_FI_DEV_FB_RESERVED",
        "gauge",
        "Framebuffer memory reserved (in MiB).",
    ),
    alias(
        "gpm_tensor_activity",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    alias(
        "gpm_dram_bw",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    alias(
        "gpm_pcie_tx",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted over the PCIe bus - including both protocol headers \
         and data payloads - in bytes per second.",
    ),
    alias(
        "gpm_pcie_rx",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received over the PCIe bus - including both protocol headers and \
         data payloads - in bytes per second.",
    ),
    // Known to dcgm-exporter, commented out in its default counters file.
    alias(
        "gpm_sm_activity",
        "DCGM_FI_PROF_SM_ACTIVE",
        "gauge",
        "The ratio of cycles an SM has at least 1 warp assigned.",
    ),
    alias(
        "gpm_sm_occupancy",
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "gauge",
        "The ratio of number of warps resident on an SM.",
    ),
    alias(
        "gpm_nvlink_tx",
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "gauge",
        "The rate of data transmitted over NVLink, not including protocol headers, in bytes \
         per second.",
    ),
    alias(
        "gpm_nvlink_rx",
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "gauge",
        "The rate of data received over NVLink, not including protocol headers, in bytes \
         per second.",
    ),
    alias(
        "ecc_corrected",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "counter",
        "Total number of single-bit volatile ECC errors.",
    ),
    alias(
        "ecc_uncorrected",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Total number of double-bit volatile ECC errors.",
    ),
    alias(
        "mem_total",
        "DCGM_FI_DEV_FB_TOTAL",
        "gauge",
        "Framebuffer memory total (in MiB).",
    ),
    alias(
        "fan",
        "DCGM_FI_DEV_FAN_SPEED",
        "gauge",
        "Fan speed for the device in percent 0-100.",
    ),
    alias(
        "power_limit",
        "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
        "gauge",
        "Effective power limit that the driver enforces after taking into account all \
         limiters (in W).",
    ),
    alias(
        "clock_sm_max",
        "DCGM_FI_DEV_MAX_SM_CLOCK",
        "gauge",
        "Maximum supported SM clock for the device (in MHz).",
    ),
    alias(
        "clock_mem_max",
        "DCGM_FI_DEV_MAX_MEM_CLOCK",
        "gauge",
        "Maximum supported memory clock for the device (in MHz).",
    ),
    alias(
        "clock_event_reasons",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "gauge",
        "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*).",
    ),
    alias(
        "pcie_gen",
        "DCGM_FI_DEV_PCIE_LINK_GEN",
        "gauge",
        "PCIe Current Link Generation.",
    ),
    alias(
        "pcie_width",
        "DCGM_FI_DEV_PCIE_LINK_WIDTH",
        "gauge",
        "PCIe Current Link Width.",
    ),
];

/// nvidia_gpu_exporter's families read from NVML, not from an nvidia-smi field (its
/// "NVML-only metrics"); the values are in the family's base unit.
pub const NVIDIA_SMI_EXTRA: &[Alias] = &[
    alias(
        "energy",
        "nvidia_smi_energy_joules_total",
        "counter",
        "Total energy consumed by the GPU in joules since the driver was last loaded.",
    ),
    alias(
        "pcie_tx",
        "nvidia_smi_pcie_throughput_tx_bytes_per_second",
        "gauge",
        "PCIe transmit throughput in bytes per second.",
    ),
    alias(
        "pcie_rx",
        "nvidia_smi_pcie_throughput_rx_bytes_per_second",
        "gauge",
        "PCIe receive throughput in bytes per second.",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::Field;

    #[test]
    fn every_alias_names_a_field_and_a_family_once() {
        for table in [DCGM, NVIDIA_SMI_EXTRA] {
            let mut names = std::collections::BTreeSet::new();
            for a in table {
                assert!(
                    Field::named(a.field).is_some(),
                    "{}: no such field",
                    a.field
                );
                assert!(names.insert(a.name), "{} twice", a.name);
                assert!(matches!(a.kind, "gauge" | "counter"), "{}", a.name);
            }
        }
    }

    #[test]
    fn dcgm_counters_are_the_fields_that_count() {
        for a in DCGM.iter().filter(|a| a.kind == "counter") {
            let prom = Field::named(a.field).and_then(|f| f.prom).unwrap();
            assert_eq!(prom.kind, "counter", "{}", a.name);
        }
    }
}

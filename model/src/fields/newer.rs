//! The field table's entries for nvidia-smi 590's newer `--query-gpu` fields (ABI 1.6's
//! `valid3` bits), after `table.rs`'s. Each prints as nvidia-smi 590.48.01 prints it
//! for an H100 and 595.71.05 for a GeForce RTX 4080 SUPER (nvidia_gpu_exporter's
//! `internal/captures`): `46`, `0x3`, `Enabled`, `HMM`, `valid`, `2560`.

use super::table::{enabled, hex, int};
use super::Unit::{Celsius, Count, Text};
use super::{field, Aggregate, Field, Value};
use crate::details::RemapHistogram;
use crate::gpu::Gpu;
use gpupeek_shm::layout::gpu_valid3 as v3;

fn remap(g: &Gpu, get: fn(&RemapHistogram) -> u32) -> Option<Value<'static>> {
    int(g.details.newer.remap_histogram.as_ref().map(get))
}

/// The entries, in the order templates and the man page list them.
pub(super) const FIELDS: &[Field] = &[
    field("temp_tlimit", Celsius, Aggregate::Max, |g| {
        g.details
            .newer
            .temp_tlimit_c
            .map(|t| Value::Signed(t.into()))
    })
    .valid3(v3::TEMP_TLIMIT)
    .not_in_templates()
    .about("thermal margin: degrees below the nearest slowdown threshold (T.Limit)")
    .smi(&[&["temperature.gpu.tlimit"]]),
    field("pci_base_class", Count, Aggregate::Join, |g| {
        hex(g.details.newer.pci_class.map(|c| c.0), 1)
    })
    .valid3(v3::PCI_CLASS)
    .not_in_templates()
    .about("PCI base class code, hexadecimal")
    .smi(&[&["pci.baseClass"]]),
    field("pci_sub_class", Count, Aggregate::Join, |g| {
        hex(g.details.newer.pci_class.map(|c| c.1), 1)
    })
    .valid3(v3::PCI_CLASS)
    .not_in_templates()
    .about("PCI sub class code, hexadecimal")
    .smi(&[&["pci.subClass"]]),
    field("gsp_mode", Text, Aggregate::Join, |g| {
        enabled(g.details.newer.gsp_mode.map(|m| m.0))
    })
    .valid3(v3::GSP_MODE)
    .not_in_templates()
    .about("whether the GPU runs its GSP firmware: Enabled or Disabled")
    .smi(&[&["gsp.mode.current"]]),
    field("gsp_mode_default", Text, Aggregate::Join, |g| {
        enabled(g.details.newer.gsp_mode.map(|m| m.1))
    })
    .valid3(v3::GSP_MODE)
    .not_in_templates()
    .about("whether the GPU runs its GSP firmware by default")
    .smi(&[&["gsp.mode.default"]]),
    field("addressing_mode", Text, Aggregate::Join, |g| {
        g.details
            .newer
            .addressing_mode
            .map(|m| Value::Name(m.name()))
    })
    .valid3(v3::ADDRESSING_MODE)
    .not_in_templates()
    .about("how the GPU addresses system memory: HMM, ATS or None")
    .smi(&[&["addressing_mode"]]),
    field("c2c_mode", Text, Aggregate::Join, |g| {
        enabled(g.details.newer.c2c_mode)
    })
    .valid3(v3::C2C_MODE)
    .not_in_templates()
    .about("whether the GPU is in chip-to-chip (C2C) mode: Enabled or Disabled")
    .smi(&[&["c2c.mode"]]),
    field("inforom_checksum", Text, Aggregate::Join, |g| {
        let valid = g.details.newer.inforom_valid?;
        Some(Value::Name(if valid { "valid" } else { "invalid" }))
    })
    .valid3(v3::INFOROM_CHECKSUM)
    .not_in_templates()
    .about("whether the infoROM checksum validates: valid or invalid")
    .smi(&[&["inforom.checksum_validation"]]),
    // nvidia-smi 590's --help-query-gpu: 'Either "Supported" or "[Not Supported]"'.
    field("power_management", Text, Aggregate::Join, |g| {
        let on = g.details.newer.power_management?;
        Some(Value::Name(if on {
            "Supported"
        } else {
            "[Not Supported]"
        }))
    })
    .valid3(v3::POWER_MANAGEMENT)
    .not_in_templates()
    .about("whether power management is on: Supported or [Not Supported]")
    .smi(&[&["power.management"]]),
    field("remapped_rows_hist_max", Count, Aggregate::Sum, |g| {
        remap(g, |h| h.max)
    })
    .valid3(v3::REMAPPED_ROWS_HISTOGRAM)
    .not_in_templates()
    .about("memory banks with every spare row left for remapping")
    .smi(&[&["remapped_rows.histogram.max"]]),
    field("remapped_rows_hist_high", Count, Aggregate::Sum, |g| {
        remap(g, |h| h.high)
    })
    .valid3(v3::REMAPPED_ROWS_HISTOGRAM)
    .not_in_templates()
    .about("memory banks with high remap availability")
    .smi(&[&["remapped_rows.histogram.high"]]),
    field("remapped_rows_hist_partial", Count, Aggregate::Sum, |g| {
        remap(g, |h| h.partial)
    })
    .valid3(v3::REMAPPED_ROWS_HISTOGRAM)
    .not_in_templates()
    .about("memory banks with partial remap availability")
    .smi(&[&["remapped_rows.histogram.partial"]]),
    field("remapped_rows_hist_low", Count, Aggregate::Sum, |g| {
        remap(g, |h| h.low)
    })
    .valid3(v3::REMAPPED_ROWS_HISTOGRAM)
    .not_in_templates()
    .about("memory banks with low remap availability")
    .smi(&[&["remapped_rows.histogram.low"]]),
    field("remapped_rows_hist_none", Count, Aggregate::Sum, |g| {
        remap(g, |h| h.none)
    })
    .valid3(v3::REMAPPED_ROWS_HISTOGRAM)
    .not_in_templates()
    .about("memory banks with no spare row left for remapping")
    .smi(&[&["remapped_rows.histogram.none"]]),
];

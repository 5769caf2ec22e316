//! Every field a template can name: its dimension (which decides the units it accepts),
//! its natural aggregate across GPUs and how it is read from a GPU record; and the
//! units, with their factors from the raw published values.

use gpupeek_shm::layout::{gpu_valid as v, GpuState};
use gpupeek_shm::{text, GpuRecord};

use crate::Agg;

/// The physical dimension of a numeric field, which decides the units it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dim {
    Bytes,
    MilliWatts,
    Celsius,
    Percent,
    MegaHertz,
    MilliJoules,
    KiloBytesPerSec,
    Count,
    Text,
}

/// A unit a dimension can be shown in: name, factor from the raw value, default decimals.
#[derive(Debug)]
pub(crate) struct Unit {
    pub(crate) name: &'static str,
    pub(crate) dim: Dim,
    pub(crate) factor: f64,
    pub(crate) precision: usize,
}

pub(crate) const fn unit(name: &'static str, dim: Dim, factor: f64, precision: usize) -> Unit {
    Unit {
        name,
        dim,
        factor,
        precision,
    }
}

pub(crate) const UNITS: &[Unit] = &[
    unit("B", Dim::Bytes, 1.0, 0),
    unit("KiB", Dim::Bytes, 1024.0, 0),
    unit("MiB", Dim::Bytes, 1048576.0, 0),
    unit("GiB", Dim::Bytes, 1073741824.0, 1),
    unit("TiB", Dim::Bytes, 1099511627776.0, 2),
    unit("KB", Dim::Bytes, 1e3, 0),
    unit("MB", Dim::Bytes, 1e6, 0),
    unit("GB", Dim::Bytes, 1e9, 1),
    unit("TB", Dim::Bytes, 1e12, 2),
    unit("mW", Dim::MilliWatts, 1.0, 0),
    unit("W", Dim::MilliWatts, 1e3, 0),
    unit("kW", Dim::MilliWatts, 1e6, 2),
    unit("C", Dim::Celsius, 1.0, 0),
    unit("F", Dim::Celsius, f64::NAN, 0),
    unit("%", Dim::Percent, 1.0, 0),
    unit("MHz", Dim::MegaHertz, 1.0, 0),
    unit("GHz", Dim::MegaHertz, 1e3, 2),
    unit("mJ", Dim::MilliJoules, 1.0, 0),
    unit("J", Dim::MilliJoules, 1e3, 0),
    unit("kJ", Dim::MilliJoules, 1e6, 1),
    unit("Wh", Dim::MilliJoules, 3.6e6, 1),
    unit("kWh", Dim::MilliJoules, 3.6e9, 2),
    unit("KB/s", Dim::KiloBytesPerSec, 1.0, 0),
    unit("MB/s", Dim::KiloBytesPerSec, 1e3, 1),
    unit("GB/s", Dim::KiloBytesPerSec, 1e6, 2),
];

/// The unit a dimension is shown in when none is named.
pub(crate) fn default_unit(dim: Dim) -> Option<&'static Unit> {
    let name = match dim {
        Dim::Bytes => "MiB",
        Dim::MilliWatts => "W",
        Dim::Celsius => "C",
        Dim::Percent => "%",
        Dim::MegaHertz => "MHz",
        Dim::MilliJoules => "J",
        Dim::KiloBytesPerSec => "KB/s",
        Dim::Count | Dim::Text => return None,
    };
    UNITS.iter().find(|u| u.dim == dim && u.name == name)
}

/// `auto`: the largest binary unit that keeps the number at or above 1.
pub(crate) static AUTO: Unit = unit("auto", Dim::Count, 1.0, 1);

pub(crate) type Getter = fn(&GpuRecord) -> Option<Value>;

/// One template field.
#[derive(Debug)]
pub(crate) struct Field {
    pub(crate) name: &'static str,
    pub(crate) dim: Dim,
    pub(crate) natural: Agg,
    pub(crate) get: Getter,
}

/// A field's value for one GPU.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Num(f64),
    Text(String),
}

pub(crate) const fn f(name: &'static str, dim: Dim, natural: Agg, get: Getter) -> Field {
    Field {
        name,
        dim,
        natural,
        get,
    }
}

pub(crate) fn num(g: &GpuRecord, bit: u64, x: impl Into<f64>) -> Option<Value> {
    (g.valid & bit != 0).then(|| Value::Num(x.into()))
}

pub(crate) fn txt(g: &GpuRecord, bit: u64, bytes: &[u8]) -> Option<Value> {
    (g.valid & bit != 0).then(|| Value::Text(text::decode(bytes)))
}

use Agg::{Join, Max, Mean, Sum};
use Dim::*;

/// Every field a template can name.
pub(crate) const FIELDS: &[Field] = &[
    f("index", Count, Join, |g| Some(Value::Num(g.index.into()))),
    f("name", Text, Join, |g| txt(g, v::NAME, &g.name)),
    f("uuid", Text, Join, |g| txt(g, v::UUID, &g.uuid)),
    f("pci_bus_id", Text, Join, |g| {
        txt(g, v::PCI_BUS_ID, &g.pci_bus_id)
    }),
    f("state", Text, Join, |g| {
        let state = GpuState::from_raw(g.state).unwrap_or(GpuState::Error);
        Some(Value::Text(state.name().to_owned()))
    }),
    f("util", Percent, Mean, |g| {
        num(g, v::UTILIZATION, g.util_gpu_pct)
    }),
    f("util_mem", Percent, Mean, |g| {
        num(g, v::UTILIZATION, g.util_mem_pct)
    }),
    f("util_enc", Percent, Mean, |g| {
        num(g, v::UTIL_ENC, g.util_enc_pct)
    }),
    f("util_dec", Percent, Mean, |g| {
        num(g, v::UTIL_DEC, g.util_dec_pct)
    }),
    f("mem_used", Bytes, Sum, |g| {
        num(g, v::MEMORY, g.mem_used_bytes as f64)
    }),
    f("mem_free", Bytes, Sum, |g| {
        num(g, v::MEMORY, g.mem_free_bytes as f64)
    }),
    f("mem_total", Bytes, Sum, |g| {
        num(g, v::MEMORY, g.mem_total_bytes as f64)
    }),
    f("mem_reserved", Bytes, Sum, |g| {
        num(g, v::MEM_RESERVED, g.mem_reserved_bytes as f64)
    }),
    f("mem_pct", Percent, Mean, |g| {
        let pct = 100.0 * g.mem_used_bytes as f64 / (g.mem_total_bytes.max(1) as f64);
        num(g, v::MEMORY, pct)
    }),
    f("temp", Celsius, Max, |g| {
        num(g, v::TEMPERATURE, g.temp_gpu_c)
    }),
    f("fan", Percent, Mean, |g| {
        num(g, v::FAN_SPEED, g.fan_speed_pct)
    }),
    f("power", MilliWatts, Sum, |g| {
        num(g, v::POWER_DRAW, g.power_draw_mw)
    }),
    f("power_limit", MilliWatts, Sum, |g| {
        num(g, v::POWER_LIMIT, g.power_limit_mw)
    }),
    f("power_pct", Percent, Mean, |g| {
        let ok = g.valid & v::POWER_LIMIT != 0 && g.power_limit_mw > 0;
        let pct = 100.0 * f64::from(g.power_draw_mw) / f64::from(g.power_limit_mw.max(1));
        num(g, if ok { v::POWER_DRAW } else { 0 }, pct)
    }),
    f("energy", MilliJoules, Sum, |g| {
        num(g, v::ENERGY, g.energy_mj as f64)
    }),
    f("clock_gr", MegaHertz, Max, |g| {
        num(g, v::CLOCK_GRAPHICS, g.clock_graphics_mhz)
    }),
    f("clock_sm", MegaHertz, Max, |g| {
        num(g, v::CLOCK_SM, g.clock_sm_mhz)
    }),
    f("clock_mem", MegaHertz, Max, |g| {
        num(g, v::CLOCK_MEM, g.clock_mem_mhz)
    }),
    f("clock_gr_max", MegaHertz, Max, |g| {
        num(g, v::CLOCK_GRAPHICS_MAX, g.clock_graphics_max_mhz)
    }),
    f("clock_sm_max", MegaHertz, Max, |g| {
        num(g, v::CLOCK_SM_MAX, g.clock_sm_max_mhz)
    }),
    f("clock_mem_max", MegaHertz, Max, |g| {
        num(g, v::CLOCK_MEM_MAX, g.clock_mem_max_mhz)
    }),
    f("pstate", Text, Join, |g| {
        (g.valid & v::PSTATE != 0).then(|| Value::Text(format!("P{}", g.pstate)))
    }),
    f("pcie_tx", KiloBytesPerSec, Sum, |g| {
        num(g, v::PCIE_TX, g.pcie_tx_kbytes_per_s)
    }),
    f("pcie_rx", KiloBytesPerSec, Sum, |g| {
        num(g, v::PCIE_RX, g.pcie_rx_kbytes_per_s)
    }),
    f("pcie_gen", Count, Max, |g| {
        num(g, v::PCIE_LINK_GEN, g.pcie_link_gen)
    }),
    f("pcie_width", Count, Max, |g| {
        num(g, v::PCIE_LINK_WIDTH, g.pcie_link_width)
    }),
    f("ecc_corrected", Count, Sum, |g| {
        num(g, v::ECC_CORRECTED, g.ecc_corrected_volatile_count as f64)
    }),
    f("ecc_uncorrected", Count, Sum, |g| {
        num(
            g,
            v::ECC_UNCORRECTED,
            g.ecc_uncorrected_volatile_count as f64,
        )
    }),
    f("procs", Count, Sum, |g| {
        num(g, v::PROCESSES, g.process_count)
    }),
];

/// Fields about the whole machine rather than one GPU (no scope allowed).
pub(crate) const GLOBALS: &[&str] = &["count", "driver"];

/// Names of every field, for `--help` and error messages.
pub fn field_names() -> impl Iterator<Item = &'static str> {
    FIELDS.iter().map(|f| f.name).chain(GLOBALS.iter().copied())
}

/// Global field placeholder (a `Field` whose getter is never called per GPU).
pub(crate) const GLOBAL_FIELDS: [Field; 2] = [
    f("count", Count, Join, |_| None),
    f("driver", Text, Join, |_| None),
];

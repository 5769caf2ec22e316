//! Every field a template can name: its dimension (which decides the units it accepts),
//! its natural aggregate across GPUs and how it is read from a GPU record; and the
//! units, with their factors from the model's values (in the units the segment
//! publishes).

use gpupeek_model::{self as model, Gpu};

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

pub(crate) type Getter = fn(&Gpu) -> Option<Value>;

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

fn num(x: Option<impl Into<f64>>) -> Option<Value> {
    x.map(|x| Value::Num(x.into()))
}

fn txt(t: Option<model::Text>) -> Option<Value> {
    t.map(|t| Value::Text(t.decode()))
}

fn mhz(c: Option<model::MegaHertz>) -> Option<Value> {
    num(c.map(|c| c.0))
}

use Agg::{Join, Max, Mean, Sum};
use Dim::*;

/// Every field a template can name.
pub(crate) const FIELDS: &[Field] = &[
    f("index", Count, Join, |g| num(Some(g.index))),
    f("name", Text, Join, |g| txt(g.name)),
    f("uuid", Text, Join, |g| txt(g.uuid)),
    f("pci_bus_id", Text, Join, |g| txt(g.pci_bus_id)),
    f("state", Text, Join, |g| {
        Some(Value::Text(g.state.name().to_owned()))
    }),
    f("util", Percent, Mean, |g| num(g.util_pct)),
    f("util_mem", Percent, Mean, |g| num(g.util_mem_pct)),
    f("util_enc", Percent, Mean, |g| num(g.util_enc_pct)),
    f("util_dec", Percent, Mean, |g| num(g.util_dec_pct)),
    f("mem_used", Bytes, Sum, |g| {
        num(g.memory.map(|m| m.used.f64()))
    }),
    f("mem_free", Bytes, Sum, |g| {
        num(g.memory.map(|m| m.free.f64()))
    }),
    f("mem_total", Bytes, Sum, |g| {
        num(g.memory.map(|m| m.total.f64()))
    }),
    f("mem_reserved", Bytes, Sum, |g| {
        num(g.mem_reserved.map(|b| b.f64()))
    }),
    f("mem_pct", Percent, Mean, |g| {
        num(g.memory.map(|m| m.used_pct()))
    }),
    f("temp", Celsius, Max, |g| num(g.temp_c)),
    f("fan", Percent, Mean, |g| num(g.fan_pct)),
    f("power", MilliWatts, Sum, |g| num(g.power_draw.map(|p| p.0))),
    f("power_limit", MilliWatts, Sum, |g| {
        num(g.power_limit.map(|p| p.0))
    }),
    f("power_pct", Percent, Mean, |g| num(g.power_pct())),
    f("energy", MilliJoules, Sum, |g| {
        num(g.energy.map(|e| e.0 as f64))
    }),
    f("clock_gr", MegaHertz, Max, |g| mhz(g.clock.graphics)),
    f("clock_sm", MegaHertz, Max, |g| mhz(g.clock.sm)),
    f("clock_mem", MegaHertz, Max, |g| mhz(g.clock.mem)),
    f("clock_gr_max", MegaHertz, Max, |g| {
        mhz(g.clock_max.graphics)
    }),
    f("clock_sm_max", MegaHertz, Max, |g| mhz(g.clock_max.sm)),
    f("clock_mem_max", MegaHertz, Max, |g| mhz(g.clock_max.mem)),
    f("pstate", Text, Join, |g| {
        g.pstate.map(|p| Value::Text(format!("P{p}")))
    }),
    f("pcie_tx", KiloBytesPerSec, Sum, |g| {
        num(g.pcie_tx.map(|r| r.0))
    }),
    f("pcie_rx", KiloBytesPerSec, Sum, |g| {
        num(g.pcie_rx.map(|r| r.0))
    }),
    f("pcie_gen", Count, Max, |g| num(g.pcie_link_gen)),
    f("pcie_width", Count, Max, |g| num(g.pcie_link_width)),
    f("ecc_corrected", Count, Sum, |g| {
        num(g.ecc_corrected.map(|n| n as f64))
    }),
    f("ecc_uncorrected", Count, Sum, |g| {
        num(g.ecc_uncorrected.map(|n| n as f64))
    }),
    f("procs", Count, Sum, |g| num(g.process_count)),
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

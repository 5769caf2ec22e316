//! The units a template can show a field in, with their factors from the model's values
//! (which are in the units the segment publishes), and the template's view of the field
//! table: every field of [`gpupeek_model::FIELDS`] that templates may name, its value as
//! a number or text, plus the two fields about all GPUs.

pub(crate) use gpupeek_model::fields::Unit as Dim;
use gpupeek_model::fields::{Aggregate, Field, Tier, Value as Reading};
use gpupeek_model::Gpu;

use crate::Agg;

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
        Dim::Count
        | Dim::Text
        | Dim::BytesPerSec
        | Dim::Microseconds
        | Dim::Milliseconds
        | Dim::Seconds
        | Dim::MilliWattsPerSec => return None,
    };
    UNITS.iter().find(|u| u.dim == dim && u.name == name)
}

/// `auto`: the largest binary unit that keeps the number at or above 1.
pub(crate) static AUTO: Unit = unit("auto", Dim::Count, 1.0, 1);

/// A field's value for one GPU, as a template shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Num(f64),
    Text(String),
}

/// `field`'s value for `g`: numbers as they are, text decoded, a P-state as `P2`.
pub(crate) fn get(field: &Field, g: &Gpu) -> Option<Value> {
    let reading = (field.get)(g)?;
    Some(match reading {
        Reading::Text(t) => Value::Text(t.decode()),
        Reading::Name(n) => Value::Text(n.to_owned()),
        Reading::PState(p) => Value::Text(p.to_string()),
        Reading::Reasons(r) => Value::Text(r.names().join(",")),
        Reading::Hex(x, digits) => Value::Text(format!("0x{x:0width$X}", width = digits.into())),
        Reading::Dotted(a, b) => Value::Text(format!("{a}.{b}")),
        Reading::Uuid(b) => Value::Text(gpupeek_model::fields::uuid_text(&b)),
        number => Value::Num(number.number()?),
    })
}

/// The aggregate a field takes outside `{each}`.
pub(crate) fn natural(field: &Field) -> Agg {
    match field.natural {
        Aggregate::Sum => Agg::Sum,
        Aggregate::Mean => Agg::Mean,
        Aggregate::Max => Agg::Max,
        Aggregate::Join => Agg::Join,
    }
}

/// The fields templates may name.
pub(crate) fn template_fields() -> impl Iterator<Item = &'static Field> {
    gpupeek_model::FIELDS.iter().filter(|f| f.template)
}

/// Fields about the whole machine rather than one GPU (no scope allowed); their values
/// are computed by the renderer, not read per GPU.
pub(crate) static GLOBAL_FIELDS: [Field; 2] =
    [global("count", Dim::Count), global("driver", Dim::Text)];

const fn global(name: &'static str, unit: Dim) -> Field {
    Field {
        name,
        template: true,
        about: "",
        unit,
        tier: Tier::Identity,
        valid: 0,
        valid2: 0,
        valid3: 0,
        valid4: 0,
        natural: Aggregate::Join,
        smi: &[],
        gpustat: None,
        prom: None,
        get: |_| None,
    }
}

/// Names of every field, for `--help` and error messages.
pub fn field_names() -> impl Iterator<Item = &'static str> {
    template_fields()
        .chain(GLOBAL_FIELDS.iter())
        .map(|f| f.name)
}

//! The field table: every published per-GPU field declared once, with its name, unit,
//! tier, how it aggregates, its names in the languages gpupeek speaks (nvidia-smi's
//! `--query-gpu`, gpustat's JSON, Prometheus) and how it is read from the model.
//!
//! `gpupeek query`'s fields, `gpupeek metrics`'s per-field families, the `--format`
//! template fields and the man page's field table are all derived from [`FIELDS`]
//! (declared in `table.rs`; this file holds what an entry is made of):
//! adding a field is one entry here, its value in [`Gpu`] and its NVML read in the
//! daemon (with its slot and validity bit in the segment). Each output formats a [`Value`] by the field's [`Unit`] in its own
//! language (nvidia-smi's MiB and two-decimal watts, Prometheus's base units, a
//! template's chosen unit); that rule is per output, not per field.

use crate::gpu::{ClockEventReasons, Gpu};
use crate::text;
use crate::units::{CentiPercent, PState};

/// The physical dimension of a field's value, in the unit the model holds it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes.
    Bytes,
    /// Milliwatts.
    MilliWatts,
    /// Degrees Celsius.
    Celsius,
    /// Percent (0-100).
    Percent,
    /// MHz.
    MegaHertz,
    /// Millijoules.
    MilliJoules,
    /// KB/s (NVML's PCIe counters, 1024-byte KB).
    KiloBytesPerSec,
    /// Bytes per second.
    BytesPerSec,
    /// Microseconds.
    Microseconds,
    /// Milliseconds.
    Milliseconds,
    /// Seconds.
    Seconds,
    /// Milliwatts per second (a power ramp rate; nvidia-smi prints W/s).
    MilliWattsPerSec,
    /// A plain number.
    Count,
    /// Text (names, states, P-states, reason sets).
    Text,
}

impl Unit {
    /// The unit's name in the man page.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::MilliWatts => "milliwatts",
            Unit::Celsius => "degrees Celsius",
            Unit::Percent => "percent",
            Unit::MegaHertz => "MHz",
            Unit::MilliJoules => "millijoules",
            Unit::KiloBytesPerSec => "KB/s",
            Unit::BytesPerSec => "bytes per second",
            Unit::Microseconds => "microseconds",
            Unit::Milliseconds => "milliseconds",
            Unit::Seconds => "seconds",
            Unit::MilliWattsPerSec => "milliwatts per second",
            Unit::Count => "a number",
            Unit::Text => "text",
        }
    }
}

/// When a field has a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Identity, read once per NVML session: kept in every GPU state.
    Identity,
    /// Sampled every tick (or every slow tick): only from a GPU sampled normally.
    Live,
}

/// How a field combines across GPUs when a template names it outside `{each}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    /// Summed (memory, power, counts).
    Sum,
    /// Averaged (percentages).
    Mean,
    /// The largest (temperature, clocks).
    Max,
    /// Joined by commas (text, indices).
    Join,
}

/// A field's Prometheus family: several fields may share one, told apart by `label`.
#[derive(Debug, Clone, Copy)]
pub struct Prom {
    /// Family name, in base units (`_bytes`, `_watts`, `_ratio`, ...).
    pub name: &'static str,
    /// `gauge` or `counter`.
    pub kind: &'static str,
    /// The HELP text (the family's first field's is used).
    pub help: &'static str,
    /// The extra label of this field's samples (`clock="sm"`), or empty.
    pub label: &'static str,
}

/// A field's value for one GPU, in the field's [`Unit`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// A whole number.
    Int(u64),
    /// A signed whole number.
    Signed(i64),
    /// A number derived from two others (a percentage of a total).
    Real(f64),
    /// A percentage in hundredths (GPM metrics).
    Centi(CentiPercent),
    /// Text published by the daemon.
    Text(text::Text<'a>),
    /// A name gpupeek gives (a GPU state).
    Name(&'static str),
    /// A performance state.
    PState(PState),
    /// A set of clock event reasons.
    Reasons(ClockEventReasons),
    /// A number nvidia-smi writes in hexadecimal, with this many digits (PCI ids).
    Hex(u64, u8),
    /// Two numbers joined by a dot (a compute capability, `9.0`).
    Dotted(u32, u32),
    /// A UUID's 16 bytes (a fabric cluster's).
    Uuid([u8; 16]),
}

/// A UUID as nvidia-smi prints one: lower-case hex, 8-4-4-4-12.
pub fn uuid_text(b: &[u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

impl Value<'_> {
    /// The number, for values that are numbers.
    pub fn number(&self) -> Option<f64> {
        match *self {
            Value::Int(x) => Some(x as f64),
            Value::Signed(x) => Some(x as f64),
            Value::Real(x) => Some(x),
            Value::Centi(c) => Some(c.pct()),
            _ => None,
        }
    }
}

/// How a field is read from the model.
pub type Getter = for<'a> fn(&Gpu<'a>) -> Option<Value<'a>>;

/// One published per-GPU field.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// Name in templates and the man page (`util`, `mem_used`).
    pub name: &'static str,
    /// Whether a `--format` template can name it.
    pub template: bool,
    /// What it is, for the man page.
    pub about: &'static str,
    /// Its unit.
    pub unit: Unit,
    /// When it has a value.
    pub tier: Tier,
    /// The `gpu_valid` bits that must all be set for it to have one (0: always known);
    /// the model's decoding honours them, a test checks the two agree.
    pub valid: u64,
    /// The same for `gpu_valid2` (ABI 1.4); these bits also say whether the driver
    /// answered "deprecated" for the value ([`Field::deprecated`]).
    pub valid2: u64,
    /// The same for `gpu_valid3` (ABI 1.5).
    pub valid3: u64,
    /// The same for `gpu_valid4` (ABI 1.11).
    pub valid4: u64,
    /// How a template aggregates it across GPUs.
    pub natural: Aggregate,
    /// nvidia-smi `--query-gpu` fields that print it, each a canonical name and its
    /// aliases.
    pub smi: &'static [&'static [&'static str]],
    /// Its key in gpustat's `--json` (or gpupeek's own key after gpustat's).
    pub gpustat: Option<&'static str>,
    /// Its Prometheus family.
    pub prom: Option<Prom>,
    /// Reads it.
    pub get: Getter,
}

pub(crate) const fn field(
    name: &'static str,
    unit: Unit,
    natural: Aggregate,
    get: Getter,
) -> Field {
    Field {
        name,
        template: true,
        about: "",
        unit,
        tier: Tier::Live,
        valid: 0,
        valid2: 0,
        valid3: 0,
        valid4: 0,
        natural,
        smi: &[],
        gpustat: None,
        prom: None,
        get,
    }
}

impl Field {
    pub(crate) const fn about(mut self, about: &'static str) -> Field {
        self.about = about;
        self
    }
    pub(crate) const fn valid(mut self, bits: u64) -> Field {
        self.valid = bits;
        self
    }
    pub(crate) const fn valid2(mut self, bits: u64) -> Field {
        self.valid2 = bits;
        self
    }
    pub(crate) const fn valid3(mut self, bits: u64) -> Field {
        self.valid3 = bits;
        self
    }
    pub(crate) const fn valid4(mut self, bits: u64) -> Field {
        self.valid4 = bits;
        self
    }
    pub(crate) const fn identity(mut self) -> Field {
        self.tier = Tier::Identity;
        self
    }
    pub(crate) const fn smi(mut self, smi: &'static [&'static [&'static str]]) -> Field {
        self.smi = smi;
        self
    }
    pub(crate) const fn gpustat(mut self, key: &'static str) -> Field {
        self.gpustat = Some(key);
        self
    }
    pub(crate) const fn prom(
        mut self,
        name: &'static str,
        kind: &'static str,
        help: &'static str,
    ) -> Field {
        self.prom = Some(Prom {
            name,
            kind,
            help,
            label: "",
        });
        self
    }
    pub(crate) const fn label(mut self, label: &'static str) -> Field {
        if let Some(p) = &mut self.prom {
            p.label = label;
        }
        self
    }
    pub(crate) const fn not_in_templates(mut self) -> Field {
        self.template = false;
        self
    }

    /// True when `g` has no value for the field because the driver answered that the
    /// function behind it is deprecated (nvidia-smi: "[Requested functionality has been
    /// deprecated]").
    pub fn deprecated(&self, g: &Gpu) -> bool {
        self.valid2 & g.details.deprecated != 0 || self.valid3 & g.details.newer.deprecated != 0
    }

    /// The field named `name`.
    pub fn named(name: &str) -> Option<&'static Field> {
        FIELDS.iter().find(|f| f.name == name)
    }
}

mod newer;
mod smi610;
mod smoothing;
mod table;

/// Every published per-GPU field, in the order templates and the man page list them:
/// `table.rs`'s, then nvidia-smi 590's newer ones (`newer.rs`), with nvidia-smi 595's
/// and 610's (`smi610.rs`) and delayed power smoothing (`smoothing.rs`) where nvidia-smi
/// 610's `--help-query-gpu` lists them: the inactive remapped rows after the remapped
/// rows, `gpu.base.*` and every `power_smoothing.*` after `module.power.*`, and
/// `bbx.time_run` last.
pub const FIELDS: &[Field] = &ALL;

static ALL: [Field; LEN] = join(&PARTS);

/// The index in `fields` of the field named `name` (a compile error if none).
const fn at(fields: &[Field], name: &str) -> usize {
    let mut i = 0;
    while i < fields.len() {
        let (a, b) = (fields[i].name.as_bytes(), name.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                return i;
            }
        }
        i += 1;
    }
    panic!("no such field")
}

/// `fields[start..end]`.
const fn range(fields: &[Field], start: usize, end: usize) -> &[Field] {
    fields.split_at(end).0.split_at(start).1
}

const COR: usize = at(table::FIELDS, "remapped_rows_correctable");
const UNC: usize = at(table::FIELDS, "remapped_rows_uncorrectable");
const MODULE: usize = at(newer::FIELDS, "module_power_max_limit") + 1;
const T: &[Field] = table::FIELDS;
const N: &[Field] = newer::FIELDS;
const S: &[Field] = smi610::POWER_SMOOTHING;
const D: &[Field] = smoothing::FIELDS;
const R: &[Field] = smi610::REMAPPED_INACTIVE;

/// The parts of [`ALL`], in order; power smoothing as nvidia-smi 610 interleaves the
/// delayed values (`D`) with the others (`S`).
const PARTS: [&[Field]; 17] = [
    range(T, 0, COR + 1),
    range(R, 0, 1),
    range(T, COR + 1, UNC + 1),
    range(R, 1, 2),
    range(T, UNC + 1, T.len()),
    range(N, 0, MODULE),
    smi610::GPU_BASE,
    range(S, 0, 4),
    range(D, 0, 1),
    range(S, 4, 9),
    range(D, 1, 6),
    range(S, 9, 14),
    range(D, 6, 10),
    range(S, 14, 19),
    range(D, 10, 14),
    range(N, MODULE, N.len()),
    smi610::BBX,
];

/// How many fields [`PARTS`] hold.
const LEN: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < PARTS.len() {
        n += PARTS[i].len();
        i += 1;
    }
    n
};

/// `parts`, one after another, in an array of their combined length `N`.
const fn join<const N: usize>(parts: &[&[Field]]) -> [Field; N] {
    let mut out = [parts[0][0]; N];
    let mut k = 0;
    let mut i = 0;
    while i < parts.len() {
        let mut j = 0;
        while j < parts[i].len() {
            out[k] = parts[i][j];
            k += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(k == N);
    out
}

pub mod exporters;

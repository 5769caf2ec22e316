//! The `--format` template language: one line of text with placeholders for the
//! published fields, per GPU or aggregated, in a chosen unit and precision, with
//! thresholds that pick a level (ok / warning / critical) for colours and classes.
//!
//! Used by `gpupeek --format` and by `gpupeekd --prompt-format` (the prompt file), so
//! both render the same text from the same records.
//!
//! Grammar (documented for users in `gpupeek --help` and README "Status bars"):
//!
//! ```text
//! template    := (text | "{{" | "}}" | placeholder | block)*
//! placeholder := "{" [scope "."] field (":" unit | ":." digits)* ["!" ["<"] warn ["," crit]] "}"
//! scope       := GPU index (0, 1, ...) | "sum" | "max" | "min" | "mean"
//! block       := "{each" [" " quoted-separator] "}" template "{end}"
//! ```
//!
//! An unqualified field inside `{each}` is the current GPU's; outside it is the field's
//! natural aggregate over the selected GPUs (memory and power summed, utilisation and
//! fan averaged, temperature the maximum; text fields joined by commas). A value the GPU
//! does not report, and every value of an asleep GPU, is `N/A`; aggregates skip them.
//! Units convert the number only (`{mem_used:GiB:.1}` prints `9.8`), except `auto`,
//! which picks a unit and appends it. A threshold compares the displayed number:
//! `!70,90` is warning from 70 and critical from 90; `!<20,10` the same downwards.
//! Errors carry the 1-based column of the offending character.

use gpupeek_shm::layout::{gpu_valid as v, status_valid, GpuState};
use gpupeek_shm::{text, GpuRecord, StatusRecord};

/// How alarming a value (or a whole line) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Level {
    /// Below every threshold.
    #[default]
    Ok,
    /// At or past the warning threshold.
    Warning,
    /// At or past the critical threshold.
    Critical,
}

impl Level {
    /// Lower-case name, used as a CSS class.
    pub fn name(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warning => "warning",
            Level::Critical => "critical",
        }
    }
}

/// A template error: what is wrong, and where (1-based column, in characters).
#[derive(Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based column.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl ParseError {
    /// The message, the template and a caret under the column.
    pub fn describe(&self, template: &str) -> String {
        format!(
            "bad --format template at column {}: {}\n  {template}\n  {}^",
            self.column,
            self.message,
            " ".repeat(self.column.saturating_sub(1))
        )
    }

    /// The message on one line, naming the flag the template came from.
    pub fn one_line(&self, flag: &str) -> String {
        format!(
            "bad {flag} template at column {}: {}",
            self.column, self.message
        )
    }
}

/// A parsed template.
#[derive(Debug, Clone)]
pub struct Template {
    items: Vec<Item>,
}

#[derive(Debug, Clone)]
enum Item {
    Text(String),
    Value(Placeholder),
    Each { sep: String, body: Vec<Item> },
}

#[derive(Debug, Clone)]
struct Placeholder {
    scope: Scope,
    field: &'static Field,
    unit: Option<&'static Unit>,
    precision: Option<usize>,
    threshold: Option<Threshold>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Scope {
    Natural,
    Gpu(u32),
    Agg(Agg),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Agg {
    Sum,
    Max,
    Min,
    Mean,
    Join,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Threshold {
    below: bool,
    warn: f64,
    crit: Option<f64>,
}

impl Threshold {
    fn level(&self, x: f64) -> Level {
        let past = |t: f64| if self.below { x <= t } else { x >= t };
        if self.crit.is_some_and(past) {
            Level::Critical
        } else if past(self.warn) {
            Level::Warning
        } else {
            Level::Ok
        }
    }
}

/// The physical dimension of a numeric field, which decides the units it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dim {
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
struct Unit {
    name: &'static str,
    dim: Dim,
    factor: f64,
    precision: usize,
}

const fn unit(name: &'static str, dim: Dim, factor: f64, precision: usize) -> Unit {
    Unit {
        name,
        dim,
        factor,
        precision,
    }
}

const UNITS: &[Unit] = &[
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
fn default_unit(dim: Dim) -> Option<&'static Unit> {
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
const AUTO: Unit = unit("auto", Dim::Count, 1.0, 1);

type Getter = fn(&GpuRecord) -> Option<Value>;

/// One template field.
#[derive(Debug)]
struct Field {
    name: &'static str,
    dim: Dim,
    natural: Agg,
    get: Getter,
}

/// A field's value for one GPU.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Num(f64),
    Text(String),
}

const fn f(name: &'static str, dim: Dim, natural: Agg, get: Getter) -> Field {
    Field {
        name,
        dim,
        natural,
        get,
    }
}

fn num(g: &GpuRecord, bit: u64, x: impl Into<f64>) -> Option<Value> {
    (g.valid & bit != 0).then(|| Value::Num(x.into()))
}

fn txt(g: &GpuRecord, bit: u64, bytes: &[u8]) -> Option<Value> {
    (g.valid & bit != 0).then(|| Value::Text(text::decode(bytes)))
}

use Agg::{Join, Max, Mean, Sum};
use Dim::*;

/// Every field a template can name.
const FIELDS: &[Field] = &[
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
const GLOBALS: &[&str] = &["count", "driver"];

/// Names of every field, for `--help` and error messages.
pub fn field_names() -> impl Iterator<Item = &'static str> {
    FIELDS.iter().map(|f| f.name).chain(GLOBALS.iter().copied())
}

/// Global field placeholder (a `Field` whose getter is never called per GPU).
const GLOBAL_FIELDS: [Field; 2] = [
    f("count", Count, Join, |_| None),
    f("driver", Text, Join, |_| None),
];

/// What a template is rendered from.
#[derive(Debug, Clone, Copy)]
pub struct Data<'a> {
    /// The selected GPUs, in display order.
    pub gpus: &'a [&'a GpuRecord],
    /// The daemon's status record.
    pub status: &'a StatusRecord,
}

/// True when the daemon lets this GPU sleep and publishes no current values for it.
pub fn asleep(g: &GpuRecord) -> bool {
    matches!(
        GpuState::from_raw(g.state),
        Some(GpuState::Suspended | GpuState::Idle)
    )
}

/// What a status bar or prompt shows, by default, when every selected GPU is asleep.
pub const ASLEEP_TEXT: &str = "GPU asleep";

/// True when there are GPUs and every one of them is asleep: a line then says so
/// instead of rendering the template (whose values would all be `N/A`).
pub fn all_asleep(gpus: &[&GpuRecord]) -> bool {
    !gpus.is_empty() && gpus.iter().all(|g| asleep(g))
}

/// How a value past a threshold is coloured in the host program's markup.
pub trait Markup {
    /// `text` shown at `level` (only called for placeholders that have a threshold).
    fn paint(&self, level: Level, text: &str) -> String;
    /// Escapes literal text and values for the host program.
    fn escape(&self, text: &str) -> String {
        text.to_owned()
    }
    /// Appends `text`, escaped, to `out`.
    fn escape_into(&self, text: &str, out: &mut String) {
        out.push_str(&self.escape(text));
    }
    /// Paints the tail `out[start..]` (a value, already escaped) at `level`, in place.
    fn paint_tail(&self, level: Level, out: &mut String, start: usize) {
        let text = out.split_off(start);
        out.push_str(&self.paint(level, &text));
    }
}

/// No colours, no escaping; renders without allocating (see [`Template::render_into`]).
pub struct Plain;

impl Markup for Plain {
    fn paint(&self, _: Level, text: &str) -> String {
        text.to_owned()
    }
    fn escape_into(&self, text: &str, out: &mut String) {
        out.push_str(text);
    }
    fn paint_tail(&self, _: Level, _: &mut String, _: usize) {}
}

/// A rendered line and the highest level any threshold reached.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rendered {
    /// The text.
    pub text: String,
    /// Highest level of any placeholder with a threshold.
    pub level: Level,
}

impl Template {
    /// Parses `src`.
    pub fn parse(src: &str) -> Result<Template, ParseError> {
        let chars: Vec<char> = src.chars().collect();
        let mut pos = 0;
        let (items, _) = parse_items(&chars, &mut pos, false)?;
        Ok(Template { items })
    }

    /// Renders for `data`, painting thresholded values with `markup`.
    pub fn render(&self, data: &Data, markup: &dyn Markup) -> Rendered {
        let mut text = String::new();
        let level = self.render_into(data, markup, &mut text);
        Rendered { text, level }
    }

    /// Appends the rendering to `out` and returns the highest threshold level reached.
    /// With [`Plain`] markup and numeric placeholders (text fields and `{each}` joins of
    /// text aside) nothing is allocated once `out` has grown to the line's length, so a
    /// caller that renders every tick can reuse one buffer.
    pub fn render_into(&self, data: &Data, markup: &dyn Markup, out: &mut String) -> Level {
        let mut level = Level::Ok;
        render_items(&self.items, data, None, markup, out, &mut level);
        level
    }
}

fn err(column: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        column: column + 1,
        message: message.into(),
    }
}

/// Parses up to the end, or in a block up to its `{end}`; says whether `{end}` was seen.
fn parse_items(
    chars: &[char],
    pos: &mut usize,
    in_block: bool,
) -> Result<(Vec<Item>, bool), ParseError> {
    let mut items = Vec::new();
    let mut literal = String::new();
    while *pos < chars.len() {
        let c = chars[*pos];
        match c {
            '{' if chars.get(*pos + 1) == Some(&'{') => {
                literal.push('{');
                *pos += 2;
            }
            '}' if chars.get(*pos + 1) == Some(&'}') => {
                literal.push('}');
                *pos += 2;
            }
            '}' => return Err(err(*pos, "unmatched '}' (write '}}' for a literal brace)")),
            '{' => {
                let start = *pos;
                let close = chars[start..]
                    .iter()
                    .position(|&c| c == '}')
                    .map(|i| start + i)
                    .ok_or_else(|| err(start, "'{' is never closed"))?;
                let body: String = chars[start + 1..close].iter().collect();
                *pos = close + 1;
                if !literal.is_empty() {
                    items.push(Item::Text(std::mem::take(&mut literal)));
                }
                if body == "end" {
                    if in_block {
                        return Ok((items, true));
                    }
                    return Err(err(start, "{end} without {each}"));
                }
                if body == "each" || body.starts_with("each ") {
                    if in_block {
                        return Err(err(start, "{each} blocks cannot be nested"));
                    }
                    let sep = parse_separator(&body[4..], start + 5)?;
                    let (inner, closed) = parse_items(chars, pos, true)?;
                    if !closed {
                        return Err(err(start, "{each} is never closed with {end}"));
                    }
                    items.push(Item::Each { sep, body: inner });
                    continue;
                }
                items.push(Item::Value(parse_placeholder(&body, start + 1)?));
            }
            c => {
                literal.push(c);
                *pos += 1;
            }
        }
    }
    if !literal.is_empty() {
        items.push(Item::Text(literal));
    }
    Ok((items, false))
}

fn parse_separator(rest: &str, column: usize) -> Result<String, ParseError> {
    let rest = rest.trim();
    if rest.is_empty() {
        return Ok(String::new());
    }
    let quote = rest.chars().next().unwrap_or('"');
    if (quote == '"' || quote == '\'') && rest.len() >= 2 && rest.ends_with(quote) {
        return Ok(rest[1..rest.len() - 1].to_owned());
    }
    Err(err(
        column,
        "the separator of {each} must be quoted, e.g. {each \" | \"}",
    ))
}

fn parse_placeholder(body: &str, col: usize) -> Result<Placeholder, ParseError> {
    let (spec, threshold) = match body.split_once('!') {
        Some((spec, t)) => (spec, Some(parse_threshold(t, col + spec.len() + 1)?)),
        None => (body, None),
    };
    let mut parts = spec.split(':');
    let path = parts.next().unwrap_or_default();
    let (scope, name, name_col) = match path.split_once('.') {
        Some((s, name)) => (parse_scope(s, col)?, name, col + s.len() + 1),
        None => (Scope::Natural, path, col),
    };
    if name.is_empty() {
        return Err(err(
            name_col,
            "empty placeholder: name a field, e.g. {util}",
        ));
    }
    let field = if let Some(g) = GLOBAL_FIELDS.iter().find(|f| f.name == name) {
        if scope != Scope::Natural {
            return Err(err(
                col,
                format!("{name} is about all GPUs and takes no scope"),
            ));
        }
        g
    } else {
        FIELDS.iter().find(|f| f.name == name).ok_or_else(|| {
            let known: Vec<&str> = field_names().collect();
            err(
                name_col,
                format!("unknown field \"{name}\" (fields: {})", known.join(", ")),
            )
        })?
    };
    let mut placeholder = Placeholder {
        scope,
        field,
        unit: None,
        precision: None,
        threshold,
    };
    let mut part_col = col + path.len() + 1;
    for part in parts {
        if let Some(digits) = part.strip_prefix('.') {
            let p: usize =
                digits.parse().ok().filter(|&p| p <= 9).ok_or_else(|| {
                    err(part_col, format!("bad precision \"{part}\": use .0 to .9"))
                })?;
            placeholder.precision = Some(p);
        } else if part == "auto" && field.dim == Bytes {
            placeholder.unit = Some(&AUTO);
        } else {
            let found = UNITS.iter().find(|u| u.name == part && u.dim == field.dim);
            placeholder.unit = Some(found.ok_or_else(|| {
                let fits: Vec<&str> = UNITS
                    .iter()
                    .filter(|u| u.dim == field.dim)
                    .map(|u| u.name)
                    .collect();
                let hint = if fits.is_empty() {
                    "it has no units".to_owned()
                } else {
                    format!("use one of {}", fits.join(", "))
                };
                err(
                    part_col,
                    format!("\"{part}\" is not a unit of {name}: {hint}"),
                )
            })?);
        }
        part_col += part.len() + 1;
    }
    if placeholder.threshold.is_some() && matches!(field.dim, Text) {
        return Err(err(
            col,
            format!("{name} is text and cannot have a threshold"),
        ));
    }
    Ok(placeholder)
}

fn parse_scope(s: &str, col: usize) -> Result<Scope, ParseError> {
    Ok(match s {
        "sum" => Scope::Agg(Agg::Sum),
        "max" => Scope::Agg(Agg::Max),
        "min" => Scope::Agg(Agg::Min),
        "mean" | "avg" => Scope::Agg(Agg::Mean),
        _ => Scope::Gpu(s.parse().map_err(|_| {
            err(
                col,
                format!("bad scope \"{s}\": use a GPU index, sum, max, min or mean"),
            )
        })?),
    })
}

fn parse_threshold(t: &str, col: usize) -> Result<Threshold, ParseError> {
    let (below, rest) = match t.strip_prefix('<') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let bad = || {
        err(
            col,
            format!("bad threshold \"!{t}\": use !WARN or !WARN,CRIT (e.g. !70,90)"),
        )
    };
    let mut numbers = rest.split(',').map(|n| n.trim().parse::<f64>());
    let warn = numbers.next().and_then(Result::ok).ok_or_else(bad)?;
    let crit = match numbers.next() {
        None => None,
        Some(n) => Some(n.map_err(|_| bad())?),
    };
    if numbers.next().is_some() {
        return Err(bad());
    }
    Ok(Threshold { below, warn, crit })
}

fn render_items(
    items: &[Item],
    data: &Data,
    current: Option<&GpuRecord>,
    markup: &dyn Markup,
    out: &mut String,
    level: &mut Level,
) {
    for item in items {
        match item {
            Item::Text(t) => markup.escape_into(t, out),
            Item::Value(p) => *level = (*level).max(p.render(data, current, markup, out)),
            Item::Each { sep, body } => {
                for (i, gpu) in data.gpus.iter().enumerate() {
                    if i > 0 {
                        markup.escape_into(sep, out);
                    }
                    render_items(body, data, Some(gpu), markup, out, level);
                }
            }
        }
    }
}

const NA: &str = "N/A";

impl Placeholder {
    /// Appends the value to `out`; returns its level.
    fn render(
        &self,
        data: &Data,
        current: Option<&GpuRecord>,
        markup: &dyn Markup,
        out: &mut String,
    ) -> Level {
        let value = match self.field.name {
            "count" => Some(Value::Num(data.gpus.len() as f64)),
            "driver" => {
                let s = data.status;
                (s.valid & status_valid::DRIVER_VERSION != 0)
                    .then(|| Value::Text(text::decode(&s.driver_version)))
            }
            _ => self.value(data, current),
        };
        match value {
            None => markup.escape_into(NA, out),
            Some(Value::Text(t)) => markup.escape_into(&t, out),
            Some(Value::Num(raw)) => {
                // A number is digits, '.', '-' and perhaps a unit name: nothing any
                // markup escapes, so it is written as it is.
                let start = out.len();
                let shown = self.format_number(raw, out);
                if let Some(t) = self.threshold {
                    let level = t.level(shown);
                    markup.paint_tail(level, out, start);
                    return level;
                }
            }
        }
        Level::Ok
    }

    fn value(&self, data: &Data, current: Option<&GpuRecord>) -> Option<Value> {
        let get = |g: &GpuRecord| {
            if asleep(g)
                && !matches!(
                    self.field.name,
                    "index" | "name" | "uuid" | "pci_bus_id" | "state"
                )
            {
                None
            } else {
                (self.field.get)(g)
            }
        };
        let agg = match (self.scope, current) {
            (Scope::Gpu(i), _) => {
                return data.gpus.iter().find(|g| g.index == i).and_then(|g| get(g));
            }
            (Scope::Natural, Some(g)) => return get(g),
            (Scope::Natural, None) => self.field.natural,
            (Scope::Agg(a), _) => a,
        };
        if agg == Agg::Join || self.field.dim == Text {
            let values: Vec<Value> = data.gpus.iter().filter_map(|g| get(g)).collect();
            return aggregate(agg, &values);
        }
        // A numeric field's values are all numbers: aggregate them without a Vec.
        let nums = || {
            data.gpus.iter().filter_map(|g| get(g)).map(|v| match v {
                Value::Num(x) => x,
                Value::Text(_) => f64::NAN,
            })
        };
        let count = nums().count();
        (count > 0).then(|| Value::Num(fold(agg, nums, count)))
    }

    /// Appends the number in the displayed unit to `out`; returns the number shown.
    fn format_number(&self, raw: f64, out: &mut String) -> f64 {
        use std::fmt::Write;
        let unit = self.unit.or_else(|| default_unit(self.field.dim));
        let (x, p, suffix) = match unit {
            Some(u) if std::ptr::eq(u, &AUTO) => {
                let names = ["B", "KiB", "MiB", "GiB", "TiB"];
                let mut x = raw;
                let mut i = 0;
                while x >= 1024.0 && i + 1 < names.len() {
                    x /= 1024.0;
                    i += 1;
                }
                (
                    x,
                    self.precision.unwrap_or(if i >= 3 { 1 } else { 0 }),
                    names[i],
                )
            }
            Some(u) if u.name == "F" => {
                let p = self.precision.unwrap_or(u.precision);
                (raw * 9.0 / 5.0 + 32.0, p, "")
            }
            Some(u) => (raw / u.factor, self.precision.unwrap_or(u.precision), ""),
            None => (raw, self.precision.unwrap_or(0), ""),
        };
        // Writing to a String cannot fail.
        let _ = write!(out, "{x:.p$}{suffix}");
        x
    }
}

/// Sum, max, min or mean of `count` (at least one) numbers; the same arithmetic, in
/// the same order, as [`aggregate`].
fn fold<I: Iterator<Item = f64>>(agg: Agg, nums: impl Fn() -> I, count: usize) -> f64 {
    match agg {
        Agg::Sum => nums().sum(),
        Agg::Max => nums().fold(f64::MIN, f64::max),
        Agg::Min => nums().fold(f64::MAX, f64::min),
        Agg::Mean => nums().sum::<f64>() / count as f64,
        Agg::Join => f64::NAN,
    }
}

fn aggregate(agg: Agg, values: &[Value]) -> Option<Value> {
    if values.is_empty() {
        return None;
    }
    let nums: Vec<f64> = values
        .iter()
        .filter_map(|v| match v {
            Value::Num(x) => Some(*x),
            Value::Text(_) => None,
        })
        .collect();
    let joined = || {
        let texts: Vec<String> = values
            .iter()
            .map(|v| match v {
                Value::Num(x) => format!("{x}"),
                Value::Text(t) => t.clone(),
            })
            .collect();
        Some(Value::Text(texts.join(",")))
    };
    if nums.len() != values.len() {
        return joined();
    }
    Some(Value::Num(match agg {
        Agg::Sum => nums.iter().sum(),
        Agg::Max => nums.iter().copied().fold(f64::MIN, f64::max),
        Agg::Min => nums.iter().copied().fold(f64::MAX, f64::min),
        Agg::Mean => nums.iter().sum::<f64>() / nums.len() as f64,
        Agg::Join => return joined(),
    }))
}

#[cfg(test)]
mod tests;

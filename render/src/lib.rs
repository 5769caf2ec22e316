//! The `--format` template language: one line of text with placeholders for the
//! published fields, per GPU or aggregated, in a chosen unit and precision, with
//! thresholds that pick a level (ok / warning / critical) for colours and classes.
//!
//! Used by `gpupeek --format` and by `gpupeekd --prompt-format` (the prompt file), so
//! both render the same text from the same model of the records ([`gpupeek_model`]).
//!
//! Grammar (documented for users in `gpupeek --help` and README "Status bars"):
//!
//! ```text
//! template    := (text | "{{" | "}}" | placeholder | block)*
//! placeholder := "{" [scope "."] field (":" unit | ":." digits | ":spark" [digits])* ["!" ["<"] warn ["," crit]] "}"
//! scope       := GPU index (0, 1, ...) ["." "gi" GPU-instance-id] | "sum" | "max" | "min" | "mean"
//! block       := "{each" [" " quoted-separator] "}" template "{end}"
//! ```
//!
//! An unqualified field inside `{each}` is the current GPU's; outside it is the field's
//! natural aggregate over the selected GPUs (memory and power summed, utilisation and
//! fan averaged, temperature the maximum; text fields joined by commas). A value the model
//! has not (the GPU does not report it, or is not sampled now: see
//! [`gpupeek_model::Gpu`]) is `N/A`; aggregates skip it.
//! Units convert the number only (`{mem_used:GiB:.1}` prints `9.8`), except `auto`,
//! which picks a unit and appends it. A threshold compares the displayed number:
//! `!70,90` is warning from 70 and critical from 90; `!<20,10` the same downwards.
//! `:spark` draws the field's recent history instead of its value (see `spark.rs`).
//! `{0.gi13.mem_used}` is MIG GPU instance 13 of GPU 0 ([`MigGpu`]): its own memory and
//! processes, its GPU's device-wide values, no utilisation; `N/A` when it does not
//! exist (or the caller, as the daemon's prompt file, passes no MIG devices), and never
//! a sparkline (there is no history per instance).
//! Errors carry the 1-based column of the offending character.

use gpupeek_model::{Gpu, Model, Status};
use gpupeek_shm::History;

mod fields;
mod parse;
mod render;
mod spark;

pub use fields::field_names;
use fields::Unit;
use gpupeek_model::Field;
use parse::parse_items;
use render::render_items;
pub use spark::{bar as spark_bar, BARS};

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
    /// `:spark`/`:sparkN`: draw N samples of the history instead of the value.
    spark: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Scope {
    Natural,
    Gpu(u32),
    /// GPU index, GPU instance id.
    Mig(u32, u32),
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

/// What a template is rendered from: the model of the selected GPUs.
#[derive(Debug, Clone, Copy)]
pub struct Data<'a> {
    /// The selected GPUs, in display order.
    pub gpus: &'a [Gpu<'a>],
    /// The daemon's status.
    pub status: Status<'a>,
    /// History rings by GPU index, for sparklines; may be empty (sparklines are then
    /// `N/A`), and need only be loaded when [`Template::sparkline_width`] says so.
    pub history: &'a [(u32, History)],
    /// MIG devices for `{N.giM.FIELD}` (may be empty: those are then `N/A`).
    pub mig: &'a [MigGpu<'a>],
}

/// A MIG GPU instance seen as a GPU ([`gpupeek_model::Mig::as_gpu`]), for the
/// `{N.giM.FIELD}` scope.
#[derive(Debug, Clone, Copy)]
pub struct MigGpu<'a> {
    /// NVML index of its GPU.
    pub gpu_index: u32,
    /// MIG GPU instance id.
    pub gpu_instance_id: u32,
    /// Its values.
    pub gpu: Gpu<'a>,
}

impl<'a> MigGpu<'a> {
    /// Every GPU instance of `model` ([`Model::gpu_instance_as_gpu`]).
    pub fn all(model: &Model<'a>) -> Vec<MigGpu<'a>> {
        let mut out: Vec<MigGpu<'a>> = Vec::new();
        for m in &model.mig {
            let seen = out
                .iter()
                .any(|o| (o.gpu_index, o.gpu_instance_id) == (m.gpu_index, m.gpu_instance_id));
            let gpu = model.gpu_instance_as_gpu(m.gpu_index, m.gpu_instance_id);
            if let (false, Some(gpu)) = (seen, gpu) {
                out.push(MigGpu {
                    gpu_index: m.gpu_index,
                    gpu_instance_id: m.gpu_instance_id,
                    gpu,
                });
            }
        }
        out
    }
}

/// What a status bar or prompt shows, by default, when every selected GPU is asleep.
pub const ASLEEP_TEXT: &str = "GPU asleep";

/// What a status bar or prompt shows when no selected GPU is awake and at least one of
/// them is not responding: a line of `N/A`s would read as a GPU that reports nothing.
pub const NOT_RESPONDING_TEXT: &str = "GPU not responding";

/// True when there are GPUs, at least one is not responding and none has current values
/// (the others are asleep): a line then says [`NOT_RESPONDING_TEXT`].
pub fn none_responding(gpus: &[Gpu]) -> bool {
    gpus.iter().any(Gpu::not_responding) && gpus.iter().all(|g| g.asleep() || g.not_responding())
}

/// Appends to a rendered line what says that some of `gpus` are not responding, painted
/// critical: ` [GPU 1 not responding]`, ` [GPU 1,3 not responding]`. Aggregates skip a
/// hung GPU like any missing value, so without this a line would show only the healthy
/// GPUs and pass for all of them. Returns whether any is; appends nothing otherwise.
/// Allocates nothing with [`Plain`] markup once `out` has room.
pub fn note_not_responding(gpus: &[Gpu], markup: &dyn Markup, out: &mut String) -> bool {
    use std::fmt::Write;
    let mut hung = gpus.iter().filter(|g| g.not_responding()).peekable();
    if hung.peek().is_none() {
        return false;
    }
    out.push(' ');
    let start = out.len();
    out.push_str("[GPU ");
    for (i, g) in hung.enumerate() {
        if i > 0 {
            out.push(',');
        }
        // Writing to a String cannot fail.
        let _ = write!(out, "{}", g.index);
    }
    out.push_str(" not responding]");
    markup.paint_tail(Level::Critical, out, start);
    true
}

/// True when there are GPUs and every one of them is asleep: a line then says so
/// instead of rendering the template (whose values would all be `N/A`).
pub fn all_asleep(gpus: &[Gpu]) -> bool {
    !gpus.is_empty() && gpus.iter().all(Gpu::asleep)
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

    /// The widest sparkline in the template, in samples; 0 when it has none (and so
    /// needs no history).
    pub fn sparkline_width(&self) -> usize {
        fn widest(items: &[Item]) -> usize {
            items
                .iter()
                .map(|item| match item {
                    Item::Value(p) => p.spark.unwrap_or(0),
                    Item::Each { body, .. } => widest(body),
                    Item::Text(_) => 0,
                })
                .max()
                .unwrap_or(0)
        }
        widest(&self.items)
    }

    /// The number the template's first placeholder stands for, before unit and
    /// precision (for `{util}`: the mean utilisation of the GPUs that report it); `None`
    /// when no GPU reports it, it is text, or there is no placeholder.
    pub fn first_number(&self, data: &Data) -> Option<f64> {
        let first = self.items.iter().find_map(|item| match item {
            Item::Value(p) => Some(p),
            _ => None,
        })?;
        match first.value(data, None)? {
            fields::Value::Num(x) => Some(x),
            fields::Value::Text(_) => None,
        }
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

#[cfg(test)]
mod tests;

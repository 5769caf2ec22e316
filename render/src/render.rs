//! Rendering a parsed template for the model of a set of GPUs: values in their unit and
//! precision, aggregates across GPUs, thresholds painted by the host's markup.

use gpupeek_model::Gpu;

use crate::fields::Dim::Text;
use crate::fields::*;
use crate::{spark, Agg, Data, Item, Level, Markup, Placeholder, Scope};

pub(crate) fn render_items(
    items: &[Item],
    data: &Data,
    current: Option<&Gpu>,
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

pub(crate) const NA: &str = "N/A";

impl Placeholder {
    /// Appends the value to `out`; returns its level.
    fn render(
        &self,
        data: &Data,
        current: Option<&Gpu>,
        markup: &dyn Markup,
        out: &mut String,
    ) -> Level {
        if let Some(width) = self.spark {
            self.sparkline(data, current, width, out);
            return Level::Ok;
        }
        let value = match self.field.name {
            "count" => Some(Value::Num(data.gpus.len() as f64)),
            "driver" => data.status.driver_version.map(|v| Value::Text(v.decode())),
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

    pub(crate) fn value(&self, data: &Data, current: Option<&Gpu>) -> Option<Value> {
        let get = |g: &Gpu| get(self.field, g);
        let agg = match (self.scope, current) {
            (Scope::Gpu(i), _) => {
                return data.gpus.iter().find(|g| g.index == i).and_then(&get);
            }
            (Scope::Mig(i, gi), _) => {
                let mig = data
                    .mig
                    .iter()
                    .find(|m| (m.gpu_index, m.gpu_instance_id) == (i, gi));
                return mig.and_then(|m| get(&m.gpu));
            }
            (Scope::Natural, Some(g)) => return get(g),
            (Scope::Natural, None) => natural(self.field),
            (Scope::Agg(a), _) => a,
        };
        if agg == Agg::Join || self.field.unit == Text {
            let values: Vec<Value> = data.gpus.iter().filter_map(&get).collect();
            return aggregate(agg, &values);
        }
        // A numeric field's values are all numbers: aggregate them without a Vec.
        let nums = || {
            data.gpus.iter().filter_map(&get).map(|v| match v {
                Value::Num(x) => x,
                Value::Text(_) => f64::NAN,
            })
        };
        let count = nums().count();
        (count > 0).then(|| Value::Num(fold(agg, nums, count)))
    }

    /// Appends the sparkline of this field for the GPU in scope, or the aggregate.
    fn sparkline(&self, data: &Data, current: Option<&Gpu>, width: usize, out: &mut String) {
        let Some(get) = spark::getter(self.field.name) else {
            return markup_free_na(out);
        };
        let one;
        let (gpus, agg): (&[Gpu], Agg) = match (self.scope, current) {
            (Scope::Gpu(i), _) => match data.gpus.iter().find(|g| g.index == i) {
                Some(g) => {
                    one = [*g];
                    (&one, natural(self.field))
                }
                None => return markup_free_na(out),
            },
            (Scope::Mig(..), _) => return markup_free_na(out),
            (Scope::Natural, Some(g)) => {
                one = [*g];
                (&one, natural(self.field))
            }
            (Scope::Natural, None) => (data.gpus, natural(self.field)),
            (Scope::Agg(a), _) => (data.gpus, a),
        };
        spark::render(get, agg, gpus, data.history, width, out);
    }

    /// Appends the number in the displayed unit to `out`; returns the number shown.
    fn format_number(&self, raw: f64, out: &mut String) -> f64 {
        use std::fmt::Write;
        let unit = self.unit.or_else(|| default_unit(self.field.unit));
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
pub(crate) fn fold<I: Iterator<Item = f64>>(agg: Agg, nums: impl Fn() -> I, count: usize) -> f64 {
    match agg {
        Agg::Sum => nums().sum(),
        Agg::Max => nums().fold(f64::MIN, f64::max),
        Agg::Min => nums().fold(f64::MAX, f64::min),
        Agg::Mean => nums().sum::<f64>() / count as f64,
        Agg::Join => f64::NAN,
    }
}

pub(crate) fn aggregate(agg: Agg, values: &[Value]) -> Option<Value> {
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

/// `N/A`, which no markup escapes.
fn markup_free_na(out: &mut String) {
    out.push_str(NA);
}

//! `gpupeek history --csv` and `--json`: a window's points in documented, stable names
//! (gpupeek(1), COMMANDS, history). Values are in the metrics' units ([`Metric::unit`]:
//! %, MiB, W, °C, MHz), rounded to three decimals; a missing value is an empty CSV cell
//! or JSON `null`, and a point with no value at all is a gap.
//!
//! CSV: a header, then one row per GPU and point, GPU by GPU, oldest point first:
//! `time` (RFC 3339, UTC, milliseconds), `unix_ns`, `gpu` (NVML index), `uuid`,
//! `span_ns` (the sampling step for a raw sample, the bucket's width for a bucket),
//! `samples` (how many samples the point holds, 0 for a gap), then `METRIC_min`,
//! `METRIC_mean`, `METRIC_max` for each chosen metric.
//!
//! JSON: one object, `hostname`, `from` and `to` (RFC 3339) with `from_unix_ns` and
//! `to_unix_ns`, `metrics` (`name`, `unit`, `title` of each chosen metric), and `gpus`:
//! per GPU `index`, `uuid`, `name`, `mig` (`null`, or `gpu_instance` and
//! `compute_instance`) and `points`, each with `time`, `unix_ns`, `span_ns`, `samples`,
//! `gap` and, per chosen metric, `{"min", "mean", "max"}` or `null`.

use std::fmt::Write;

use chrono::{DateTime, SecondsFormat, Utc};
use gpupeek_model::history::{Metric, Point};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::Window;

/// RFC 3339 in UTC with milliseconds, e.g. `2026-11-25T06:40:01.123Z`.
pub fn rfc3339(unix_ns: u64) -> String {
    let t = DateTime::<Utc>::from_timestamp(
        (unix_ns / 1_000_000_000) as i64,
        (unix_ns % 1_000_000_000) as u32,
    )
    .unwrap_or_default();
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A value rounded to three decimals, without trailing zeros (`41`, `187.25`).
fn number(v: f64) -> String {
    // Most values are whole (raw samples): skip the exact decimal expansion, which costs
    // thousands of instructions a value.
    let milli = (v * 1000.0).round();
    if milli.abs() < 1e15 {
        let m = milli as i64;
        return match (m / 1000, (m % 1000).abs()) {
            (whole, 0) => whole.to_string(),
            (whole, frac) => {
                let sign = if m < 0 && whole == 0 { "-" } else { "" };
                let frac = format!("{frac:03}");
                format!("{sign}{whole}.{}", frac.trim_end_matches('0'))
            }
        };
    }
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// `v` rounded as [`number`] writes it, for JSON.
fn rounded(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// The CSV header for `metrics`.
pub fn csv_header(metrics: &[Metric]) -> String {
    let mut out = String::from("time,unix_ns,gpu,uuid,span_ns,samples");
    for m in metrics {
        let name = m.name();
        let _ = write!(out, ",{name}_min,{name}_mean,{name}_max");
    }
    out
}

/// A CSV cell: quoted when it holds a comma, a quote or a line break.
fn cell(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// The CSV of `window`.
pub fn csv(window: &Window, metrics: &[Metric]) -> String {
    let mut out = csv_header(metrics);
    out.push('\n');
    for series in &window.series {
        let uuid = cell(&series.uuid);
        for p in &series.points {
            let _ = write!(
                out,
                "{},{},{},{uuid},{},{}",
                rfc3339(p.start_unix_ns),
                p.start_unix_ns,
                series.gpu_index,
                p.span_ns,
                p.samples
            );
            for &m in metrics {
                match p.get(m) {
                    Some(s) => {
                        let _ = write!(
                            out,
                            ",{},{},{}",
                            number(s.min),
                            number(s.mean),
                            number(s.max)
                        );
                    }
                    None => out.push_str(",,,"),
                }
            }
            out.push('\n');
        }
    }
    out
}

/// A metric's minimum, mean and maximum, rounded.
#[derive(Serialize)]
struct StatDoc {
    min: f64,
    mean: f64,
    max: f64,
}

/// One point: its keys, then one per chosen metric, in that order.
struct PointDoc<'a> {
    point: &'a Point,
    metrics: &'a [Metric],
}

impl Serialize for PointDoc<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let p = self.point;
        let mut map = ser.serialize_map(Some(5 + self.metrics.len()))?;
        map.serialize_entry("time", &rfc3339(p.start_unix_ns))?;
        map.serialize_entry("unix_ns", &p.start_unix_ns)?;
        map.serialize_entry("span_ns", &p.span_ns)?;
        map.serialize_entry("samples", &p.samples)?;
        map.serialize_entry("gap", &p.is_gap())?;
        for &m in self.metrics {
            let stat = p.get(m).map(|s| StatDoc {
                min: rounded(s.min),
                mean: rounded(s.mean),
                max: rounded(s.max),
            });
            map.serialize_entry(m.name(), &stat)?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct MigDoc {
    gpu_instance: u32,
    compute_instance: u32,
}

#[derive(Serialize)]
struct GpuDoc<'a> {
    index: u32,
    uuid: &'a str,
    name: &'a str,
    mig: Option<MigDoc>,
    points: Vec<PointDoc<'a>>,
}

#[derive(Serialize)]
struct MetricDoc {
    name: &'static str,
    unit: &'static str,
    title: &'static str,
}

#[derive(Serialize)]
struct Document<'a> {
    hostname: &'a str,
    from: String,
    to: String,
    from_unix_ns: u64,
    to_unix_ns: u64,
    metrics: Vec<MetricDoc>,
    gpus: Vec<GpuDoc<'a>>,
}

/// The JSON document of `window`, indented by two spaces, with a final newline.
pub fn json(window: &Window, metrics: &[Metric]) -> String {
    let doc = Document {
        hostname: &window.hostname,
        from: rfc3339(window.from_unix_ns),
        to: rfc3339(window.to_unix_ns),
        from_unix_ns: window.from_unix_ns,
        to_unix_ns: window.to_unix_ns,
        metrics: metrics
            .iter()
            .map(|m| MetricDoc {
                name: m.name(),
                unit: m.unit(),
                title: m.title(),
            })
            .collect(),
        gpus: window
            .series
            .iter()
            .map(|s| GpuDoc {
                index: s.gpu_index,
                uuid: &s.uuid,
                name: &s.name,
                mig: s.mig.map(|(gpu_instance, compute_instance)| MigDoc {
                    gpu_instance,
                    compute_instance,
                }),
                points: s
                    .points
                    .iter()
                    .map(|point| PointDoc { point, metrics })
                    .collect(),
            })
            .collect(),
    };
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpupeek_model::history::{Series, Stat};
    use serde_json::{json, Value};

    fn window() -> Window {
        let mut values = [None; Metric::ALL.len()];
        values[Metric::Utilization.at()] = Some(Stat {
            min: 10.0,
            mean: 20.5,
            max: 40.0,
        });
        values[Metric::PowerDraw.at()] = Some(Stat::one(187.25));
        let bucket = Point {
            start_unix_ns: 1_764_052_800_000_000_000,
            span_ns: 10_000_000_000,
            samples: 10,
            values,
        };
        let gap = Point {
            start_unix_ns: 1_764_052_810_000_000_000,
            span_ns: 10_000_000_000,
            samples: 0,
            values: [None; Metric::ALL.len()],
        };
        Window {
            hostname: "node1".into(),
            from_unix_ns: 1_764_052_200_000_000_000,
            to_unix_ns: 1_764_052_820_000_000_000,
            since: std::time::Duration::from_secs(600),
            series: vec![Series {
                gpu_index: 3,
                uuid: "GPU-1,2".into(),
                name: "NVIDIA H100".into(),
                mig: None,
                points: vec![bucket, gap],
            }],
        }
    }

    #[test]
    fn csv_has_a_row_per_point_with_empty_cells_for_a_gap() {
        let text = csv(&window(), &[Metric::Utilization, Metric::PowerDraw]);
        assert_eq!(
            text,
            "time,unix_ns,gpu,uuid,span_ns,samples,util_min,util_mean,util_max,\
             power_min,power_mean,power_max\n\
             2025-11-25T06:40:00.000Z,1764052800000000000,3,\"GPU-1,2\",10000000000,10,\
             10,20.5,40,187.25,187.25,187.25\n\
             2025-11-25T06:40:10.000Z,1764052810000000000,3,\"GPU-1,2\",10000000000,0,,,,,,\n"
        );
    }

    #[test]
    fn json_has_null_for_missing_values_and_marks_gaps() {
        let doc: Value = serde_json::from_str(&json(&window(), &[Metric::Utilization])).unwrap();
        assert_eq!(doc["hostname"], "node1");
        assert_eq!(doc["from"], "2025-11-25T06:30:00.000Z");
        assert_eq!(
            doc["metrics"][0],
            json!({"name": "util", "unit": "%", "title": "GPU utilisation"})
        );
        let gpu = &doc["gpus"][0];
        assert_eq!(
            (gpu["index"].clone(), gpu["mig"].clone()),
            (json!(3), Value::Null)
        );
        assert_eq!(
            gpu["points"][0]["util"],
            json!({"min": 10.0, "mean": 20.5, "max": 40.0})
        );
        assert_eq!(gpu["points"][0]["gap"], false);
        assert!(
            gpu["points"][0].get("power").is_none(),
            "only the chosen metrics"
        );
        assert_eq!(gpu["points"][1]["util"], Value::Null);
        assert_eq!(gpu["points"][1]["gap"], true);
    }

    #[test]
    fn numbers_have_at_most_three_decimals() {
        assert_eq!(number(41.0), "41");
        assert_eq!(number(1.0 / 3.0), "0.333");
        assert_eq!(number(-0.0001), "0");
        assert_eq!(number(-0.25), "-0.25");
        assert_eq!(number(-2.5), "-2.5");
        assert_eq!(number(187.05), "187.05");
        assert_eq!(number(1e20), "100000000000000000000");
        assert_eq!(rounded(2.0 / 3.0), 0.667);
    }
}

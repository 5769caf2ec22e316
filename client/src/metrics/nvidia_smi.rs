//! `gpupeek metrics --names nvidia_gpu_exporter`: the per-GPU families under
//! utkuozdemir/nvidia_gpu_exporter's names, labels and units, so its dashboards and alerts
//! work unchanged.
//!
//! That exporter runs `nvidia-smi --query-gpu` and names a family after each returned
//! field: dots become underscores and the unit a suffix with the value converted to it
//! (`memory.used [MiB]` is `nvidia_smi_memory_used_bytes` in bytes, `[%]` a `_ratio` of
//! one, `[W]` `_watts`, `[MHz]` `_clock_hz` in hertz); `Enabled`/`Disabled` and the like
//! become 1/0, `pstate` its number, `clocks_event_reasons.active` its bitmask. Every
//! field-table entry with an nvidia-smi name is derived that way, so a field gains its
//! `nvidia_smi_*` family with its nvidia-smi name; [`NVIDIA_SMI_EXTRA`] adds the families
//! that exporter reads from NVML. Samples carry only `uuid` (lower case, without
//! `GPU-`); `nvidia_smi_gpu_info` carries the identity. Values are what nvidia-smi
//! prints, converted: memory rounded up to whole MiB, power to two decimals.

use gpupeek_model::fields::exporters::NVIDIA_SMI_EXTRA;
use gpupeek_model::fields::{Unit, Value as Reading};
use gpupeek_model::{Bytes, Field, Gpu, Model, FIELDS};

use super::gpu::{field_samples, text};
use super::{escape, Families, Out, Value};

/// Every nvidia_gpu_exporter family gpupeek has a value for, each GPU a sample.
pub(super) fn families(out: &mut Out, model: &Model) {
    let driver = escape(&text(model.status.driver_version));
    let cuda = escape(&model.status.cuda_version().unwrap_or_default());
    let mut families = Families::default();
    for g in &model.gpus {
        let uuid = escape(&uuid(g));
        let info = format!(
            "cuda_version=\"{cuda}\",driver_version=\"{driver}\",index=\"{}\",name=\"{}\",\
             pci_bus_id=\"{}\",uuid=\"{uuid}\"",
            g.index,
            escape(&text(g.name)),
            escape(&text(g.pci_bus_id)),
        );
        families.add(
            "nvidia_smi_gpu_info",
            "gauge",
            "A metric with a constant '1' value labeled by gpu uuid, name, driver_version.",
            info,
            Value::Int(1),
        );
        if !g.is_current() {
            continue;
        }
        let labels = format!("uuid=\"{uuid}\"");
        // A family once per GPU: the first field that makes it wins (a reason set's
        // expansion and a field of one reason would both make nvidia_smi_clocks_event_*).
        let mut made: Vec<String> = Vec::new();
        for field in FIELDS {
            for names in field.smi {
                let Some(smi) = names.first() else { continue };
                for (name, help, value) in smi_samples(smi, field, g) {
                    if made.contains(&name) {
                        continue;
                    }
                    families.add(&name, "gauge", &help, labels.clone(), value);
                    made.push(name);
                }
            }
        }
        for alias in NVIDIA_SMI_EXTRA {
            let Some(field) = Field::named(alias.field) else {
                continue;
            };
            for (_, value) in field_samples(field, "", g) {
                families.add(alias.name, alias.kind, alias.help, labels.clone(), value);
            }
        }
    }
    families.write(out);
}

/// The GPU's UUID as nvidia_gpu_exporter labels it: lower case, without `GPU-`.
pub(super) fn uuid(g: &Gpu) -> String {
    let uuid = text(g.uuid).to_lowercase();
    uuid.strip_prefix("gpu-").map(str::to_owned).unwrap_or(uuid)
}

/// The family nvidia_gpu_exporter makes of nvidia-smi field `smi` (`memory.used`) in
/// unit `unit`: its name, HELP (the field as nvidia-smi's CSV header names it) and the
/// factor from nvidia-smi's number to the family's.
fn family(smi: &str, unit: Unit) -> Option<(String, String)> {
    let (suffix, shown) = match unit {
        Unit::Bytes => ("_bytes", " [MiB]"),
        Unit::Percent => ("_ratio", " [%]"),
        Unit::MilliWatts => ("_watts", " [W]"),
        Unit::MegaHertz => ("_clock_hz", " [MHz]"),
        Unit::Microseconds => ("_seconds", " [us]"),
        Unit::Milliseconds => ("_seconds", " [ms]"),
        Unit::Seconds => ("_seconds", " [seconds]"),
        Unit::MilliWattsPerSec => ("_watts_per_second", " [W/s]"),
        Unit::Celsius | Unit::Count | Unit::Text => ("", ""),
        // Units nvidia-smi's query fields do not print.
        Unit::MilliJoules | Unit::KiloBytesPerSec | Unit::BytesPerSec => return None,
    };
    Some((
        format!("nvidia_smi_{}{suffix}", metric_name(smi)),
        format!("{smi}{shown}"),
    ))
}

/// `smi` with every run of characters a metric name cannot hold turned into `_`.
fn metric_name(smi: &str) -> String {
    let mut out = String::with_capacity(smi.len());
    for c in smi.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    out
}

/// The samples nvidia_gpu_exporter makes of `field` under nvidia-smi name `smi`: one,
/// or a clock event reason set's bitmask and each reason as 1/0.
fn smi_samples(smi: &str, field: &Field, g: &Gpu) -> Vec<(String, String, Value)> {
    let Some((name, help)) = family(smi, field.unit) else {
        return Vec::new();
    };
    let Some(reading) = (field.get)(g) else {
        return Vec::new();
    };
    let value = match (reading, field.unit) {
        (Reading::Int(b), Unit::Bytes) => Value::Int(Bytes(b).mib_ceil() << 20),
        (Reading::Int(x), Unit::Percent) => Value::Float(x as f64 / 100.0),
        (Reading::Real(x), Unit::Percent) => Value::Float(x / 100.0),
        (Reading::Centi(c), Unit::Percent) => Value::Float(c.ratio()),
        (Reading::Int(mw), Unit::MilliWatts) => Value::Float((mw / 10) as f64 / 100.0),
        (Reading::Int(mhz), Unit::MegaHertz) => Value::Int(mhz * 1_000_000),
        // Multiplied, not divided, as that exporter does: the same float to the last bit.
        (Reading::Int(us), Unit::Microseconds) => Value::Float(us as f64 * 0.000001),
        (Reading::Int(ms), Unit::Milliseconds) => Value::Float(ms as f64 * 0.001),
        (Reading::Int(mw), Unit::MilliWattsPerSec) => Value::Float((mw / 10) as f64 / 100.0),
        (Reading::Int(x), _) => Value::Int(x),
        (Reading::Signed(x), _) => Value::Signed(x),
        (Reading::Real(x), _) => Value::Float(x),
        (Reading::Centi(c), _) => Value::Float(c.pct()),
        (Reading::PState(p), _) => Value::Int(p.0.into()),
        (Reading::Reasons(r), _) => {
            let mut all = vec![(name, help, Value::Int(r.0))];
            let prefix = smi.rsplit_once('.').map_or(smi, |(p, _)| p);
            for (reason, on) in r.each() {
                let smi = format!("{prefix}.{reason}");
                let name = format!("nvidia_smi_{}", metric_name(&smi));
                all.push((name, smi, Value::Int(on.into())));
            }
            return all;
        }
        (Reading::Text(t), _) => match word_value(smi, &t.decode()) {
            Some(v) => v,
            None => return Vec::new(),
        },
        (Reading::Name(n), _) => match word_value(smi, n) {
            Some(v) => v,
            None => return Vec::new(),
        },
        // nvidia_gpu_exporter parses nvidia-smi's text: `0x233010DE` and `9.0` as numbers.
        (Reading::Hex(x, _), _) => Value::Int(x),
        (Reading::Dotted(major, minor), _) => match format!("{major}.{minor}").parse() {
            Ok(x) => Value::Float(x),
            Err(_) => return Vec::new(),
        },
        (Reading::Uuid(_), _) => return Vec::new(),
    };
    vec![(name, help, value)]
}

/// The number nvidia_gpu_exporter makes of the word nvidia-smi prints for field `smi`
/// (its `internal/nvidiasmi/transform.go`): the enum tables of `gpu_recovery_action`
/// and `fabric.state`, else the two-state words (`Enabled`/`Yes`/`Active` 1,
/// `Disabled`/`No`/`Not Active` 0) and the compute modes, else the one number in the
/// text; none when the text has no number or several (it drops those).
fn word_value(smi: &str, word: &str) -> Option<Value> {
    let key = word.trim().to_lowercase();
    let table: &[(&str, i64)] = match smi {
        "gpu_recovery_action" => &[
            ("none", 0),
            ("gpu reset", 1),
            ("reset", 1),
            ("node reboot", 2),
            ("reboot", 2),
            ("drain p2p", 3),
            ("drain and reset", 4),
        ],
        "fabric.state" => &[
            ("not supported", 0),
            ("not started", 1),
            ("in progress", 2),
            ("completed", 3),
        ],
        _ => &[
            ("enabled", 1),
            ("yes", 1),
            ("active", 1),
            ("disabled", 0),
            ("no", 0),
            ("not active", 0),
            ("default", 0),
            ("exclusive_thread", 1),
            ("prohibited", 2),
            ("exclusive_process", 3),
        ],
    };
    if let Some(&(_, v)) = table.iter().find(|(w, _)| *w == key) {
        return Some(Value::Signed(v));
    }
    if matches!(smi, "gpu_recovery_action" | "fabric.state") {
        return None;
    }
    one_number(&key).map(Value::Float)
}

/// The one number in `text` (nvidia_gpu_exporter's `[+-]?(\d*[.])?\d+`), if it has
/// exactly one.
fn one_number(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    let mut found = None;
    let mut i = 0;
    while i < b.len() {
        let sign = usize::from(matches!(b[i], b'+' | b'-'));
        let mut j = i + sign;
        let digits = |j: &mut usize| {
            let start = *j;
            while *j < b.len() && b[*j].is_ascii_digit() {
                *j += 1;
            }
            *j - start
        };
        let whole = digits(&mut j);
        let mut end = j;
        if j < b.len() && b[j] == b'.' {
            let mut k = j + 1;
            if digits(&mut k) > 0 {
                end = k;
            }
        }
        if end > i + sign && (whole > 0 || end > j) {
            if found.is_some() {
                return None;
            }
            found = text[i..end].parse::<f64>().ok();
            i = end;
        } else {
            i += 1;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_become_numbers_as_nvidia_gpu_exporter_reads_them() {
        let n = |smi, w| match word_value(smi, w) {
            Some(Value::Signed(x)) => Some(x as f64),
            Some(Value::Float(x)) => Some(x),
            _ => None,
        };
        assert_eq!(n("persistence_mode", "Enabled"), Some(1.0));
        assert_eq!(n("display_attached", "No"), Some(0.0));
        assert_eq!(n("compute_mode", "Exclusive_Process"), Some(3.0));
        assert_eq!(n("gpu_recovery_action", "Drain and Reset"), Some(4.0));
        assert_eq!(n("gpu_recovery_action", "Something new"), None);
        assert_eq!(n("fabric.state", "Completed"), Some(3.0));
        assert_eq!(n("pcie.link.gen.max", "Gen 4"), Some(4.0));
        assert_eq!(n("x", "1.5 ms"), Some(1.5));
        assert_eq!(n("x", ".5"), Some(0.5));
        assert_eq!(n("x", "-3"), Some(-3.0));
        assert_eq!(n("fabric.health.summary", "Healthy"), None);
        assert_eq!(n("x", "1.2.3"), None);
        assert_eq!(n("x", "2 of 3"), None);
    }

    #[test]
    fn names_are_nvidia_smi_fields_with_unit_suffixes() {
        let name = |smi, unit| family(smi, unit).unwrap().0;
        assert_eq!(
            name("memory.used", Unit::Bytes),
            "nvidia_smi_memory_used_bytes"
        );
        assert_eq!(
            name("utilization.gpu", Unit::Percent),
            "nvidia_smi_utilization_gpu_ratio"
        );
        assert_eq!(
            name("clocks.current.sm", Unit::MegaHertz),
            "nvidia_smi_clocks_current_sm_clock_hz"
        );
        assert_eq!(
            name("enforced.power.limit", Unit::MilliWatts),
            "nvidia_smi_enforced_power_limit_watts"
        );
        assert_eq!(
            name("temperature.gpu", Unit::Celsius),
            "nvidia_smi_temperature_gpu"
        );
        assert_eq!(
            family("power.draw", Unit::MilliWatts).unwrap().1,
            "power.draw [W]"
        );
        // nvidia_gpu_exporter's " [ms]" mapping (internal/exporter's knownUnitSuffixes).
        assert_eq!(
            family("power_smoothing.window_multiplier", Unit::Milliseconds).unwrap(),
            (
                "nvidia_smi_power_smoothing_window_multiplier_seconds".to_owned(),
                "power_smoothing.window_multiplier [ms]".to_owned()
            )
        );
    }
}

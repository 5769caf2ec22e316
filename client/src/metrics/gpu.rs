//! The per-GPU families of `gpupeek metrics`: identity and state for every GPU, values
//! only for GPUs sampled normally, and only the fields each GPU supports. The value
//! families are the field table's ([`gpupeek_model::FIELDS`]: name, type, help and label
//! declared there), then the verdict's, then the Xid errors' (`metrics/xid.rs`).

use gpupeek_model::fields::{Unit, Value as Reading};
use gpupeek_model::{
    ClockEventReasons, Field, Gpu, GpuState, KiloBytesPerSec, MegaHertz, MilliJoules, MilliWatts,
    Model, Text, FIELDS,
};

use super::pods::Pods;
use super::{escape, Names, Out, Value};
use crate::verdict::{judge, Thresholds, Verdict};

/// The samples of one GPU in a family: (extra label, value) pairs; none when the value
/// is unknown.
pub(super) type Samples = Vec<(&'static str, Value)>;

/// `field`'s samples for `g`, in Prometheus's base units: fractions of one for
/// percentages, watts, joules, hertz, bytes per second.
pub(super) fn field_samples(field: &Field, label: &'static str, g: &Gpu) -> Samples {
    let Some(reading) = (field.get)(g) else {
        return Vec::new();
    };
    let value = match (reading, field.unit) {
        (Reading::Reasons(r), _) => return reason_samples(r),
        (Reading::PState(p), _) => Value::Int(p.0.into()),
        (Reading::Int(x), Unit::Percent) => Value::Float(x as f64 / 100.0),
        (Reading::Int(mw), Unit::MilliWatts) => Value::Float(MilliWatts(mw).watts()),
        (Reading::Int(mj), Unit::MilliJoules) => Value::Float(MilliJoules(mj).joules()),
        (Reading::Int(mhz), Unit::MegaHertz) => Value::Int(MegaHertz(mhz).hz()),
        (Reading::Int(k), Unit::KiloBytesPerSec) => Value::Int(KiloBytesPerSec(k).bytes_per_s()),
        (Reading::Int(x), _) => Value::Int(x),
        (Reading::Signed(c), _) => Value::Int(c.max(0).unsigned_abs()),
        (Reading::Real(x), _) => Value::Float(x),
        (Reading::Centi(c), _) => Value::Float(c.ratio()),
        (
            Reading::Text(_)
            | Reading::Name(_)
            | Reading::Hex(..)
            | Reading::Dotted(..)
            | Reading::Uuid(_),
            _,
        ) => return Vec::new(),
    };
    vec![(label, value)]
}

/// The verdict's family, after the field table's: gpupeek's judgement, not a published
/// value.
const VERDICT: &str = "gpupeek_gpu_verdict";
const VERDICT_HELP: &str = "1 for the verdict that applies, 0 for the others (thermal, \
    power-capped, hw-slowdown, starved, idle-holding, healthy); no sample when it cannot \
    be told.";

fn verdict_sample(g: &Gpu) -> Samples {
    const LABELS: [&str; 6] = [
        "verdict=\"thermal\"",
        "verdict=\"power-capped\"",
        "verdict=\"hw-slowdown\"",
        "verdict=\"starved\"",
        "verdict=\"idle-holding\"",
        "verdict=\"healthy\"",
    ];
    let Some(verdict) = judge(g, &Thresholds::current()) else {
        return Vec::new();
    };
    // Every verdict, as gpupeek_gpu_state has every state: a series that only existed
    // while it applied could not be alerted on with `== 0` or counted over time.
    Verdict::ALL
        .iter()
        .zip(LABELS)
        .map(|(v, label)| (label, Value::Int(u64::from(*v == verdict))))
        .collect()
}

/// `reason` labels for [`gpupeek_shm::layout::clock_event_reason::NAMES`], in its order
/// (a test keeps the two in step).
const EVENT_REASONS: [&str; 9] = [
    "reason=\"gpu_idle\"",
    "reason=\"applications_clocks_setting\"",
    "reason=\"sw_power_cap\"",
    "reason=\"hw_slowdown\"",
    "reason=\"sync_boost\"",
    "reason=\"sw_thermal_slowdown\"",
    "reason=\"hw_thermal_slowdown\"",
    "reason=\"hw_power_brake_slowdown\"",
    "reason=\"display_clock_setting\"",
];

fn reason_samples(reasons: ClockEventReasons) -> Samples {
    EVENT_REASONS
        .into_iter()
        .zip(reasons.each())
        .map(|(label, (_, on))| (label, Value::Int(u64::from(on))))
        .collect()
}

/// Every state `gpupeek_gpu_state` reports, with its label value: the state's name with
/// `_` for a space (Prometheus-friendly, as the daemon states are).
const GPU_STATES: [(GpuState, &str); 6] = [
    (GpuState::Ok, "ok"),
    (GpuState::Lost, "lost"),
    (GpuState::Error, "error"),
    (GpuState::Suspended, "suspended"),
    (GpuState::Idle, "idle"),
    (GpuState::NotResponding, "not_responding"),
];

/// Every per-GPU family, each GPU a sample.
pub(super) fn families(out: &mut Out, model: &Model, pods: &Pods) {
    let labels: Vec<String> = model
        .gpus
        .iter()
        .map(|g| gpu_labels(g) + &pods.gpu(g, Names::Gpupeek))
        .collect();
    out.family(
        "gpupeek_gpu_info",
        "gauge",
        "Identity of each GPU (always 1).",
    );
    for (g, l) in model.gpus.iter().zip(&labels) {
        let bus = escape(&text(g.pci_bus_id));
        out.sample(
            "gpupeek_gpu_info",
            &format!("{l},pci_bus_id=\"{bus}\""),
            1u64,
        );
    }
    out.family(
        "gpupeek_gpu_state",
        "gauge",
        "State of each GPU: 1 for the current state (ok, lost, error, suspended, idle or \
         not_responding: the driver has not answered within gpupeekd's timeout).",
    );
    for (g, l) in model.gpus.iter().zip(&labels) {
        for (s, label) in GPU_STATES {
            let value = u64::from(s == g.state);
            out.sample(
                "gpupeek_gpu_state",
                &format!("{l},state=\"{label}\""),
                value,
            );
        }
    }
    // Values only of GPUs sampled normally: not even the maximum clocks the model keeps
    // as identity of an asleep or lost GPU.
    let current: Vec<(&Gpu, &String)> = model
        .gpus
        .iter()
        .zip(&labels)
        .filter(|(g, _)| g.is_current())
        .collect();
    // The field table's families, in its order, each once with all its fields' samples.
    let mut done: Vec<&str> = Vec::new();
    for prom in FIELDS.iter().filter_map(|f| f.prom) {
        if done.contains(&prom.name) {
            continue;
        }
        done.push(prom.name);
        let members: Vec<(&Field, &'static str)> = FIELDS
            .iter()
            .filter_map(|f| Some((f, f.prom.filter(|p| p.name == prom.name)?.label)))
            .collect();
        let samples = |g: &Gpu| -> Samples {
            members
                .iter()
                .flat_map(|(f, label)| field_samples(f, label, g))
                .collect()
        };
        write_family(out, &current, prom.name, prom.kind, prom.help, samples);
    }
    write_family(
        out,
        &current,
        VERDICT,
        "gauge",
        VERDICT_HELP,
        verdict_sample,
    );
    super::xid::family(out, model, &labels);
}

/// One family: its HELP and TYPE and every GPU's samples; nothing when no GPU has one.
fn write_family(
    out: &mut Out,
    gpus: &[(&Gpu, &String)],
    name: &str,
    kind: &str,
    help: &str,
    values: impl Fn(&Gpu) -> Samples,
) {
    let samples: Vec<(String, Value)> = gpus
        .iter()
        .flat_map(|(g, l)| {
            values(g).into_iter().map(move |(extra, value)| {
                let labels = if extra.is_empty() {
                    (*l).clone()
                } else {
                    format!("{l},{extra}")
                };
                (labels, value)
            })
        })
        .collect();
    if samples.is_empty() {
        return;
    }
    out.family(name, kind, help);
    for (labels, value) in samples {
        out.sample(name, &labels, value);
    }
}

pub(super) fn text(t: Option<Text>) -> String {
    t.map(Text::decode).unwrap_or_default()
}

/// `gpu="0",uuid="GPU-...",name="..."`.
fn gpu_labels(g: &Gpu) -> String {
    format!(
        "gpu=\"{}\",uuid=\"{}\",name=\"{}\"",
        g.index,
        escape(&text(g.uuid)),
        escape(&text(g.name))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_labels_are_the_shared_names_with_underscores() {
        for (state, label) in GPU_STATES {
            assert_eq!(label, state.name().replace(' ', "_"));
        }
        let mut every: Vec<u32> = (0..=u32::from(u8::MAX))
            .filter_map(GpuState::from_raw)
            .filter(|&s| s != GpuState::Empty)
            .map(|s| s as u32)
            .collect();
        every.sort_unstable();
        let mut listed: Vec<u32> = GPU_STATES.iter().map(|&(s, _)| s as u32).collect();
        listed.sort_unstable();
        assert_eq!(listed, every, "a state of a published GPU is missing");
    }

    #[test]
    fn reason_labels_are_the_shared_names() {
        let shared = gpupeek_shm::layout::clock_event_reason::NAMES;
        assert_eq!(EVENT_REASONS.len(), shared.len());
        for (label, (_, name)) in EVENT_REASONS.iter().zip(shared) {
            assert_eq!(*label, format!("reason=\"{name}\""));
        }
    }
}

//! `gpupeek metrics --names dcgm`: the per-GPU families under NVIDIA dcgm-exporter's names,
//! labels and units, so dashboards and alerts written for dcgm-exporter work unchanged.
//!
//! The names come from [`gpupeek_model::fields::exporters::DCGM`]; each sample carries
//! dcgm-exporter's labels in its order: `gpu`, `UUID`, `pci_bus_id`, `device`
//! (`nvidiaN`), `modelName`, `hostname`, then the `DCGM_FI_DRIVER_VERSION` label its
//! default counters add. Values are in DCGM's units: memory in whole MiB, power in watts,
//! energy in millijoules, clocks in MHz, utilisation in percent, profiling (GPM) activity
//! as 0..1 ratios and PCIe/NVLink traffic in bytes per second; DCGM's doubles print as
//! dcgm-exporter prints them (`%f`), its integers as integers. As in every `--names`,
//! a GPU not sampled now and a field a GPU does not support have no sample.

use gpupeek_model::fields::exporters::DCGM;
use gpupeek_model::fields::{Unit, Value as Reading};
use gpupeek_model::{Bytes, Field, Gpu, Model};

use super::gpu::text;
use super::pods::Pods;
use super::{escape, Families, Names, Out, Value};

/// Every dcgm-exporter family gpupeek has a value for, each GPU a sample.
pub(super) fn families(out: &mut Out, model: &Model, pods: &Pods) {
    let hostname = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default();
    let driver = text(model.status.driver_version);
    let mut families = Families::default();
    for g in model.gpus.iter().filter(|g| g.is_current()) {
        let labels = labels(g, &hostname, &driver) + &pods.gpu(g, Names::Dcgm);
        for alias in DCGM {
            let Some(field) = Field::named(alias.field) else {
                continue;
            };
            if let Some(value) = value(field, g) {
                families.add(alias.name, alias.kind, alias.help, labels.clone(), value);
            }
        }
    }
    families.write(out);
}

/// dcgm-exporter's labels of a whole GPU. A MIG instance adds `GPU_I_PROFILE` and
/// `GPU_I_ID` after `modelName`, as dcgm-exporter does, once gpupeek publishes them.
fn labels(g: &Gpu, hostname: &str, driver: &str) -> String {
    let mut l = format!(
        "gpu=\"{}\",UUID=\"{}\",pci_bus_id=\"{}\",device=\"nvidia{}\",modelName=\"{}\"",
        g.index,
        escape(&text(g.uuid)),
        escape(&text(g.pci_bus_id)),
        g.index,
        escape(&text(g.name)),
    );
    if !hostname.is_empty() {
        l += &format!(",hostname=\"{}\"", escape(hostname));
    }
    if !driver.is_empty() {
        l += &format!(",DCGM_FI_DRIVER_VERSION=\"{}\"", escape(driver));
    }
    l
}

/// `field`'s value for `g` in DCGM's unit, typed as DCGM types it.
fn value(field: &Field, g: &Gpu) -> Option<Value> {
    let value = match ((field.get)(g)?, field.unit) {
        (Reading::Int(b), Unit::Bytes) => Value::Int(Bytes(b).mib()),
        (Reading::Int(mw), Unit::MilliWatts) => Value::Fixed6(mw as f64 / 1000.0),
        (Reading::Int(k), Unit::KiloBytesPerSec) => Value::Int(k * 1024),
        (Reading::Int(x), _) => Value::Int(x),
        (Reading::Signed(x), _) => Value::Signed(x),
        (Reading::Real(x), _) => Value::Fixed6(x),
        (Reading::Centi(c), _) => Value::Fixed6(c.ratio()),
        (Reading::PState(p), _) => Value::Int(p.0.into()),
        (Reading::Reasons(r), _) => Value::Int(r.0),
        (Reading::Text(_) | Reading::Name(_) | Reading::Hex(..) | Reading::Dotted(..), _) => {
            return None
        }
    };
    Some(value)
}

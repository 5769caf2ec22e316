//! `gpupeek metrics --names dcgm`: the per-GPU families under NVIDIA dcgm-exporter's names,
//! labels and units, so dashboards and alerts written for dcgm-exporter work unchanged.
//!
//! The names come from [`gpupeek_model::fields::exporters::DCGM`]; each sample carries
//! dcgm-exporter's labels in its order: `gpu`, `UUID`, `pci_bus_id`, `device`
//! (`nvidiaN`), `modelName`, `Hostname` (capitalised, as its template writes it), then
//! the `DCGM_FI_DRIVER_VERSION` label its default counters add. Values are in DCGM's units: memory in whole MiB, power in watts,
//! energy in millijoules, clocks in MHz, utilisation in percent, profiling (GPM) activity
//! as 0..1 ratios and PCIe/NVLink traffic in bytes per second; DCGM's doubles print as
//! dcgm-exporter prints them (`%f`), its integers as integers. As in every `--names`,
//! a GPU not sampled now and a field a GPU does not support have no sample.
//!
//! A GPU with MIG instances is exported as dcgm-exporter's default (`-d f`, "flex")
//! exports it: one set of samples per GPU instance and none for the GPU itself, each
//! with `GPU_I_PROFILE` (the GPU instance's profile, `3g.40gb`) and `GPU_I_ID` after
//! `modelName`. An instance's `DCGM_FI_DEV_FB_*` are its own memory (MiB; no
//! `FB_RESERVED`), its `DCGM_FI_PROF_SM_ACTIVE`, `SM_OCCUPANCY`, `PIPE_TENSOR_ACTIVE`
//! and `DRAM_ACTIVE` its own GPM activity; the `DCGM_FI_DEV_*_UTIL` families and the
//! PCIe and NVLink rates, which DCGM does not report per instance, have no sample; the
//! device-wide values (clocks, temperature, power, energy, ECC, ...) are the GPU's,
//! repeated for each instance as DCGM reports them. A MIG-enabled GPU without instances
//! is exported as a whole GPU.

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
        let instances = gpu_instances(model, g);
        if instances.is_empty() {
            let labels = labels(g, None, &hostname, &driver) + &pods.gpu(g, Names::Dcgm);
            add_entity(&mut families, g, labels);
        }
        for (gi, profile, as_gpu) in &instances {
            let labels = labels(g, Some((profile, *gi)), &hostname, &driver)
                + &pods.gpu_instance(g, *gi, Names::Dcgm);
            add_entity(&mut families, as_gpu, labels);
        }
    }
    families.write(out);
}

/// Each GPU instance of `g`: its id, profile, and itself seen as a GPU
/// ([`Model::gpu_instance_as_gpu`]).
fn gpu_instances<'a>(model: &Model<'a>, g: &Gpu<'a>) -> Vec<(u32, String, Gpu<'a>)> {
    model
        .gpu_instance_ids(g.index)
        .into_iter()
        .filter_map(|gi| {
            let as_gpu = model.gpu_instance_as_gpu(g.index, gi)?;
            let profile = model.mig_instance(g.index, gi)?.gpu_instance_profile();
            Some((gi, profile.unwrap_or_default(), as_gpu))
        })
        .collect()
}

/// The samples of one entity: a whole GPU, or a GPU instance seen as a GPU
/// ([`gpupeek_model::Mig::as_gpu`], which already leaves out what DCGM does not report
/// per instance).
fn add_entity(families: &mut Families, g: &Gpu, labels: String) {
    for alias in DCGM {
        let Some(field) = Field::named(alias.field) else {
            continue;
        };
        if let Some(value) = value(field, g) {
            families.add(alias.name, alias.kind, alias.help, labels.clone(), value);
        }
    }
}

/// dcgm-exporter's labels of a whole GPU, or of GPU instance `(profile, id)` of it:
/// `GPU_I_PROFILE` and `GPU_I_ID` after `modelName`, the GPU's own labels before.
fn labels(g: &Gpu, instance: Option<(&str, u32)>, hostname: &str, driver: &str) -> String {
    let mut l = format!(
        "gpu=\"{}\",UUID=\"{}\",pci_bus_id=\"{}\",device=\"nvidia{}\",modelName=\"{}\"",
        g.index,
        escape(&text(g.uuid)),
        escape(&text(g.pci_bus_id)),
        g.index,
        escape(&text(g.name)),
    );
    if let Some((profile, id)) = instance {
        l += &format!(",GPU_I_PROFILE=\"{}\",GPU_I_ID=\"{id}\"", escape(profile));
    }
    if !hostname.is_empty() {
        l += &format!(",Hostname=\"{}\"", escape(hostname));
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
        (
            Reading::Text(_)
            | Reading::Name(_)
            | Reading::Hex(..)
            | Reading::Dotted(..)
            | Reading::Uuid(_),
            _,
        ) => return None,
    };
    Some(value)
}

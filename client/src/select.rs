//! `--id`: which GPUs, or MIG instances, an output shows. An entry is a GPU's NVML index
//! (`0`), a MIG GPU instance of a GPU (`0.gi13`, as the template scope `{0.gi13.FIELD}`),
//! or a MIG device's UUID (`MIG-...`, as `nvidia-smi -L` and `CUDA_VISIBLE_DEVICES` name
//! it). Status bars and `--format` show a selected instance as a GPU of its own
//! ([`gpupeek_model::Mig::as_gpu`]); the table and `--json` show its GPU.

use gpupeek_model::{Gpu, Mig, Model};

/// One `--id` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Select {
    /// A GPU by NVML index.
    Gpu(u32),
    /// GPU instance `.1` of GPU `.0`.
    Instance(u32, u32),
    /// A MIG device by UUID.
    MigUuid(String),
}

impl Select {
    /// Parses one entry.
    fn parse(s: &str) -> Result<Select, String> {
        let bad = || {
            format!(
                "bad GPU id {s:?}: use an index (0), a MIG instance (0.gi1) or a \
                 MIG device UUID (MIG-...)"
            )
        };
        if s.len() > 4 && s[..4].eq_ignore_ascii_case("MIG-") {
            return Ok(Select::MigUuid(s.to_owned()));
        }
        match s.split_once(".gi") {
            Some((gpu, gi)) => Ok(Select::Instance(
                gpu.parse().map_err(|_| bad())?,
                gi.parse().map_err(|_| bad())?,
            )),
            None => Ok(Select::Gpu(s.parse().map_err(|_| bad())?)),
        }
    }

    /// The MIG device this entry names, if it names one that exists.
    fn mig<'m, 'a>(&self, model: &'m Model<'a>) -> Option<&'m Mig<'a>> {
        match self {
            Select::Gpu(_) => None,
            Select::Instance(gpu, gi) => model.mig_instance(*gpu, *gi),
            Select::MigUuid(uuid) => model.mig_by_uuid(uuid),
        }
    }

    /// What the entry names, for an error.
    fn describe(&self) -> String {
        match self {
            Select::Gpu(i) => format!("GPU with index {i}"),
            Select::Instance(gpu, gi) => format!("MIG GPU instance {gi} on GPU {gpu}"),
            Select::MigUuid(uuid) => format!("MIG device {uuid}"),
        }
    }
}

impl std::fmt::Display for Select {
    /// The entry as `--id` takes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Select::Gpu(i) => write!(f, "{i}"),
            Select::Instance(gpu, gi) => write!(f, "{gpu}.gi{gi}"),
            Select::MigUuid(uuid) => f.write_str(uuid),
        }
    }
}

/// Parses `--id`: comma-separated entries.
pub fn parse(s: &str) -> Result<Vec<Select>, String> {
    s.split(',').map(|id| Select::parse(id.trim())).collect()
}

/// What names the GPUs and instances there are, for an error.
fn unknown(model: &Model, sel: &Select) -> String {
    let have: Vec<String> = model.gpus.iter().map(|g| g.index.to_string()).collect();
    let mut msg = format!("no {} (GPUs: {}", sel.describe(), have.join(","));
    if !model.mig.is_empty() {
        let mig: Vec<String> = model
            .mig
            .iter()
            .map(|m| format!("{}.gi{}", m.gpu_index, m.gpu_instance_id))
            .collect();
        msg += &format!("; MIG instances: {}", mig.join(","));
    }
    msg + ")"
}

/// The NVML index of each entry's GPU (an instance's is its GPU's), in order, each
/// once; an entry naming nothing is the error.
pub fn gpu_indices(model: &Model, sels: &[Select]) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for sel in sels {
        let index = match sel {
            Select::Gpu(i) => model.gpu(*i).map(|g| g.index),
            other => other.mig(model).map(|m| m.gpu_index),
        }
        .ok_or_else(|| unknown(model, sel))?;
        if !out.contains(&index) {
            out.push(index);
        }
    }
    Ok(out)
}

/// The GPUs and instances (each seen as a GPU) the entries name, in order (all GPUs when
/// `None`); an entry naming nothing is the error.
pub fn gpus<'a>(model: &Model<'a>, sels: Option<&[Select]>) -> Result<Vec<Gpu<'a>>, String> {
    let Some(sels) = sels else {
        return Ok(model.gpus.clone());
    };
    sels.iter()
        .map(|sel| {
            let found = match sel {
                Select::Gpu(i) => model.gpu(*i).copied(),
                Select::Instance(gpu, gi) => model.gpu_instance_as_gpu(*gpu, *gi),
                Select::MigUuid(uuid) => model.mig_by_uuid(uuid).and_then(|m| model.mig_as_gpu(m)),
            };
            found.ok_or_else(|| unknown(model, sel))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_indices_instances_or_mig_uuids() {
        assert_eq!(
            parse("0, 1.gi13,MIG-4b5c").unwrap(),
            [
                Select::Gpu(0),
                Select::Instance(1, 13),
                Select::MigUuid("MIG-4b5c".into())
            ]
        );
        for bad in ["x", "0.gi", "0.gix", "GPU-1", "-1", ""] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_instance_selects_itself_for_bars_and_its_gpu_for_the_table() {
        let snap = crate::testing::mig_snapshot();
        let model = Model::new(&snap);
        let sels = parse("0.gi13,MIG-0005").unwrap();
        let gpus = gpus(&model, Some(&sels)).unwrap();
        let mib: Vec<u64> = gpus.iter().map(|g| g.memory.unwrap().total.mib()).collect();
        assert_eq!(mib, [9_984, 20_096]);
        assert_eq!(gpus[0].util_pct, None);
        assert_eq!(gpu_indices(&model, &sels).unwrap(), [0]);
        let err = gpus_err(&model, "0.gi2");
        assert_eq!(
            err,
            "no MIG GPU instance 2 on GPU 0 (GPUs: 0; MIG instances: 0.gi1,0.gi5,0.gi13)"
        );
    }

    #[test]
    fn a_gpu_instance_counts_the_processes_of_all_its_compute_instances() {
        let mut snap = crate::testing::mig_snapshot();
        let mut ci = snap.mig[0];
        ci.compute_instance_id = 1;
        gpupeek_shm::text::encode(&mut ci.uuid, "MIG-0001-ci1");
        snap.mig.insert(1, ci);
        let mut p = snap.processes[0];
        (p.pid, p.compute_instance_id) = (105, 1);
        snap.processes.push(p);
        let model = Model::new(&snap);
        let procs = |s: &str| gpus(&model, Some(&parse(s).unwrap())).unwrap()[0].process_count;
        assert_eq!(procs("0.gi1"), Some(3));
        assert_eq!(procs("MIG-0001-ci1"), Some(1), "one MIG device: its own");
    }

    fn gpus_err(model: &Model, s: &str) -> String {
        gpus(model, Some(&parse(s).unwrap())).unwrap_err()
    }
}

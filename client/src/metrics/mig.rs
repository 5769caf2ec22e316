//! The per-instance families of `gpupeek metrics` for MIG devices, after the per-GPU
//! ones: `gpupeek_mig_info` for every instance, then the values of the instances whose
//! GPU is sampled now: memory, GPM activity of the GPU instance, processes and the
//! verdict ([`crate::verdict::judge_mig`]). Each sample carries `gpu` and `uuid` (the
//! parent GPU's, as the per-GPU families), `mig_uuid`, `gpu_instance_id`,
//! `compute_instance_id` and `profile`, and with `--pod-labels` the pod its GPU instance
//! is assigned to, as a GPU's series have theirs ([`super::pods`]). NVML gives no
//! utilisation for an instance, nor for its parent under MIG: there is no such family
//! here, and the parent has no `gpupeek_gpu_utilization_ratio` sample (N/A, never 0).

use gpupeek_model::{CentiPercent, Gpu, Mig, MigGpm, Model};

use super::gpu::text;
use super::pods::Pods;
use super::{escape, Families, Names, Out, Value};
use crate::verdict::{judge_mig, Thresholds, Verdict};

/// `(name, help, value)` of the GPM families, each of the GPU instance's last window.
type GpmFamily = (
    &'static str,
    &'static str,
    fn(&MigGpm) -> Option<CentiPercent>,
);

const GPM: [GpmFamily; 4] = [
    (
        "gpupeek_mig_sm_activity_ratio",
        "GPM: fraction of time an SM of the instance had a warp (Hopper+).",
        |m| m.sm_activity,
    ),
    (
        "gpupeek_mig_sm_occupancy_ratio",
        "GPM: resident warps relative to the instance's SMs' maximum (Hopper+).",
        |m| m.sm_occupancy,
    ),
    (
        "gpupeek_mig_tensor_activity_ratio",
        "GPM: fraction of time the instance's SMs did tensor-core work (Hopper+).",
        |m| m.tensor_activity,
    ),
    (
        "gpupeek_mig_dram_bandwidth_ratio",
        "GPM: the instance's DRAM bandwidth used relative to the peak (Hopper+).",
        |m| m.dram_bw_util,
    ),
];

/// Every per-instance family; nothing without MIG devices.
pub(super) fn families(out: &mut Out, model: &Model, pods: &Pods) {
    let mut families = Families::default();
    let thresholds = Thresholds::current();
    for m in &model.mig {
        let Some(parent) = model.gpu(m.gpu_index) else {
            continue;
        };
        let l = labels(m, parent) + &pods.gpu_instance(parent, m.gpu_instance_id, Names::Gpupeek);
        families.add(
            "gpupeek_mig_info",
            "gauge",
            "Identity of each MIG device (always 1).",
            l.clone(),
            Value::Int(1),
        );
        if !parent.is_current() {
            continue;
        }
        let mut add = |name: &str, help: &str, labels: String, value: Value| {
            families.add(name, "gauge", help, labels, value);
        };
        if let Some(mem) = m.memory {
            add(
                "gpupeek_mig_memory_used_bytes",
                "Memory of the MIG device's GPU instance in use.",
                l.clone(),
                Value::Int(mem.used.0),
            );
            add(
                "gpupeek_mig_memory_free_bytes",
                "Memory of the MIG device's GPU instance free.",
                l.clone(),
                Value::Int(mem.free.0),
            );
            add(
                "gpupeek_mig_memory_total_bytes",
                "Memory of the MIG device's GPU instance.",
                l.clone(),
                Value::Int(mem.total.0),
            );
        }
        if let Some(sms) = m.sm_count {
            add(
                "gpupeek_mig_sm_count",
                "Streaming multiprocessors of the MIG device.",
                l.clone(),
                Value::Int(sms.into()),
            );
        }
        for (name, help, get) in GPM {
            if let Some(c) = m.gpm.as_ref().and_then(get) {
                add(name, help, l.clone(), Value::Float(c.ratio()));
            }
        }
        let processes = model.processes_in(m).count() as u64;
        if parent.process_count.is_some() {
            add(
                "gpupeek_mig_processes",
                "Processes running in the MIG device.",
                l.clone(),
                Value::Int(processes),
            );
        }
        let as_gpu = m.as_gpu(parent, processes as u32);
        if let Some(verdict) = judge_mig(&as_gpu, &thresholds) {
            for v in Verdict::ALL {
                add(
                    "gpupeek_mig_verdict",
                    "1 for the MIG device's verdict, 0 for the others (thermal, \
                     power-capped, hw-slowdown, starved: never for an instance, \
                     idle-holding, healthy); no sample when it cannot be told.",
                    format!("{l},verdict=\"{}\"", v.name()),
                    Value::Int(u64::from(v == verdict)),
                );
            }
        }
    }
    families.write(out);
}

/// `gpu="0",uuid="GPU-...",mig_uuid="MIG-...",gpu_instance_id="1",
/// compute_instance_id="0",profile="3g.40gb"`.
fn labels(m: &Mig, parent: &Gpu) -> String {
    format!(
        "gpu=\"{}\",uuid=\"{}\",mig_uuid=\"{}\",gpu_instance_id=\"{}\",\
         compute_instance_id=\"{}\",profile=\"{}\"",
        m.gpu_index,
        escape(&text(parent.uuid)),
        escape(&text(m.uuid)),
        m.gpu_instance_id,
        m.compute_instance_id,
        escape(&text(m.profile)),
    )
}

#[cfg(test)]
mod tests {
    use gpupeek_shm::layout::GpuState;

    use super::super::{render, Names, Options};

    const OPTS: Options = Options {
        names: Names::Gpupeek,
        per_process: false,
        per_user: false,
        pod_labels: false,
    };

    /// The MIG lines of `text` whose family starts with `prefix`.
    fn lines<'t>(text: &'t str, prefix: &str) -> Vec<&'t str> {
        text.lines().filter(|l| l.starts_with(prefix)).collect()
    }

    #[test]
    fn each_mig_device_has_its_own_memory_gpm_processes_and_verdict() {
        let text = render(Some(&crate::testing::mig_snapshot()), "live", 0, &OPTS);
        let id = |gi: u32, profile: &str| {
            format!(
                "gpu=\"0\",uuid=\"GPU-a1b2\",mig_uuid=\"MIG-{gi:04}\",gpu_instance_id=\"{gi}\",\
                 compute_instance_id=\"0\",profile=\"{profile}\""
            )
        };
        let (a, b, c) = (id(1, "3g.40gb"), id(5, "2g.20gb"), id(13, "1g.10gb"));
        for l in [&a, &b, &c] {
            assert!(
                text.contains(&format!("gpupeek_mig_info{{{l}}} 1\n")),
                "{text}"
            );
        }
        let mib = 1u64 << 20;
        for (l, used) in [(&a, 3_000), (&b, 2_000), (&c, 2_048)] {
            let want = format!("gpupeek_mig_memory_used_bytes{{{l}}} {}\n", used * mib);
            assert!(text.contains(&want), "{want}\n{text}");
        }
        assert!(text.contains(&format!(
            "gpupeek_mig_memory_total_bytes{{{c}}} {}\n",
            9_984 * mib
        )));
        assert!(text.contains(&format!("gpupeek_mig_sm_activity_ratio{{{a}}} 0.4\n")));
        assert!(
            !text.contains(&format!("gpupeek_mig_sm_activity_ratio{{{b}}}")),
            "no GPM: no sample"
        );
        assert!(text.contains(&format!("gpupeek_mig_processes{{{a}}} 2\n")));
        assert!(text.contains(&format!(
            "gpupeek_mig_verdict{{{c},verdict=\"idle-holding\"}} 1\n"
        )));
        assert!(text.contains(&format!(
            "gpupeek_mig_verdict{{{a},verdict=\"healthy\"}} 1\n"
        )));
        assert!(
            !text.contains(&format!("gpupeek_mig_verdict{{{b}")),
            "no GPM: cannot tell"
        );
        // The parent: no utilisation sample (N/A under MIG, never 0), no GPU verdict.
        assert!(lines(&text, "gpupeek_gpu_utilization").is_empty(), "{text}");
        assert!(text.contains("gpupeek_gpu_temperature_celsius{gpu=\"0\""));
    }

    #[test]
    fn a_mig_device_of_a_gpu_not_sampled_now_keeps_only_its_identity() {
        let mut snap = crate::testing::mig_snapshot();
        snap.gpus[0].state = GpuState::Lost as u32;
        let text = render(Some(&snap), "live", 0, &OPTS);
        assert_eq!(lines(&text, "gpupeek_mig_info{").len(), 3, "{text}");
        assert!(lines(&text, "gpupeek_mig_memory").is_empty(), "{text}");
    }

    #[test]
    fn dcgm_names_export_each_gpu_instance_as_dcgm_exporter_does_and_not_the_gpu() {
        let opts = Options {
            names: Names::Dcgm,
            ..OPTS
        };
        let text = render(Some(&crate::testing::mig_snapshot()), "live", 0, &opts);
        let fb_used = lines(&text, "DCGM_FI_DEV_FB_USED{");
        assert_eq!(
            fb_used.len(),
            3,
            "one per GPU instance, none for the GPU: {text}"
        );
        let labels = "gpu=\"0\",UUID=\"GPU-a1b2\",pci_bus_id=\"\",device=\"nvidia0\",\
                      modelName=\"NVIDIA H100 80GB HBM3\",GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"13\"";
        assert!(
            fb_used[2].starts_with(&format!("DCGM_FI_DEV_FB_USED{{{labels}"))
                && fb_used[2].ends_with("} 2048"),
            "{text}"
        );
        assert!(text.contains("GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"1\""));
        // Its own GPM; the GPU's temperature repeated for each instance; no utilisation.
        let sm = lines(&text, "DCGM_FI_PROF_SM_ACTIVE{");
        assert_eq!(sm.len(), 2, "{text}");
        assert!(sm[0].ends_with(" 0.400000"), "{text}");
        assert_eq!(lines(&text, "DCGM_FI_DEV_GPU_TEMP{").len(), 3, "{text}");
        assert!(lines(&text, "DCGM_FI_DEV_GPU_UTIL").is_empty(), "{text}");
        assert!(lines(&text, "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-a1b2\",pci_bus_id=\"\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\"}").is_empty());
    }

    #[test]
    fn per_process_series_of_a_mig_process_carry_its_instance_ids() {
        let opts = Options {
            per_process: true,
            ..OPTS
        };
        let text = render(Some(&crate::testing::mig_snapshot()), "live", 0, &opts);
        let line = lines(&text, "gpupeek_process_gpu_memory_bytes{")
            .into_iter()
            .find(|l| l.contains("pid=\"104\""))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(
            line.contains(",gpu_instance_id=\"13\",compute_instance_id=\"0\""),
            "{line}"
        );
    }
}

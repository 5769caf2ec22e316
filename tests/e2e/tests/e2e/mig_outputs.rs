//! MIG in every output, read from a daemon on the fake NVML: an H100 split into
//! 3g.40gb (GPU instance 1, two processes, 40 % SM and 10 % tensor activity), 2g.20gb
//! (5, one process, no GPM) and 1g.10gb (13, one process holding 2 GiB, SM activity 0),
//! beside a plain H100. `gpupeek metrics` exports each instance (`gpupeek_mig_*`) and, under
//! `--names dcgm`, each GPU instance as dcgm-exporter labels it, never the parent's
//! utilisation; per-process series carry the instance ids; `query -i` takes a MIG UUID
//! for its GPU and `-L` lists the instances; a bar shows a selected instance and a
//! template names one; the verdict is the instance's own. After a reconfiguration the
//! metrics speak of the new instances only.

use std::process::Output;

use gpupeek_e2e::{assert_one_line_failure, stderr, Daemon, Sandbox};
use gpupeek_shm::layout::mig_valid;
use serde_json::{json, Value};

use crate::mig::{
    client, four_sleepers, instance, layout, process, scenario, three_way, Sleeper, MIB,
};

/// The three-way split with GPU instance 13 idle (SM activity 0) and holding 2 GiB, and
/// GPU instance 1's tensor cores 10 % active.
fn split(pids: &[u32; 4]) -> Value {
    let mut s = three_way(pids);
    s["gpus"][0]["mig"]["instances"][0]["gpm"]["tensor_activity_pct"] = json!(10.0);
    s["gpus"][0]["mig"]["instances"][2] = instance(13, 19, Some(0.0));
    s["gpus"][0]["processes"][3] = process(pids[3], 2048, 13);
    // As a real H100 reports them, whatever the MIG mode: nothing holds the clocks.
    s["gpus"][0]["clock_event_reasons"] = json!(0);
    s
}

/// A daemon publishing `split`, once every instance's GPM and every process is out.
fn start(sb: &Sandbox, pids: &[u32; 4]) -> Daemon {
    sb.write_scenario(&split(pids));
    let daemon = sb.start_daemon_with("200ms", &["--process-interval", "200ms"]);
    sb.snapshot_when(&daemon, "three instances with GPM and processes", |s| {
        s.mig.len() == 3
            && s.processes.len() == 4
            && [0, 2]
                .iter()
                .all(|&i| s.mig[i].valid & mig_valid::GPM_SM_ACTIVITY != 0)
    });
    daemon
}

/// A sandbox whose daemon publishes `split` (for the dashboard test's MIG panels), with
/// the processes that run in it (killed when dropped).
pub(crate) fn started(tag: &str) -> (Sandbox, Daemon, [Sleeper; 4]) {
    let sb = Sandbox::new(tag);
    let (procs, pids) = four_sleepers();
    let daemon = start(&sb, &pids);
    (sb, daemon, procs)
}

/// The sample lines of family `name` (exactly: `name{` or `name `).
fn samples<'t>(text: &'t str, name: &str) -> Vec<&'t str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .collect()
}

/// The one sample of `name` whose labels contain `has`, parsed.
fn value(text: &str, name: &str, has: &str) -> f64 {
    let lines: Vec<&str> = samples(text, name)
        .into_iter()
        .filter(|l| l.contains(has))
        .collect();
    assert_eq!(lines.len(), 1, "{name} {has}: {text}");
    let v = lines[0].rsplit(' ').next().unwrap();
    v.parse().unwrap_or_else(|_| panic!("{}", lines[0]))
}

#[test]
fn metrics_export_each_instance_and_dcgm_names_each_gpu_instance() {
    let sb = Sandbox::new("migout-metrics");
    let (_procs, pids) = four_sleepers();
    let daemon = start(&sb, &pids);
    let text = client(&sb, &["metrics", "--per-process"]);
    let mib = MIB as f64;
    let id = |gi: u32, profile_id: u32, profile: &str| {
        format!(
            "gpu=\"0\",uuid=\"GPU-a1b2c3d4-0000-1111-2222-333344445555\",\
             mig_uuid=\"MIG-{gi:08x}-7d1c-5b8e-9d2a-{profile_id:012x}\",\
             gpu_instance_id=\"{gi}\",compute_instance_id=\"0\",profile=\"{profile}\""
        )
    };
    let (a, b, c) = (
        id(1, 9, "3g.40gb"),
        id(5, 14, "2g.20gb"),
        id(13, 19, "1g.10gb"),
    );
    for (l, used, total) in [(&a, 3000, 40_448), (&b, 3000, 20_096), (&c, 2048, 9_984)] {
        assert_eq!(value(&text, "gpupeek_mig_info", l), 1.0);
        assert_eq!(
            value(&text, "gpupeek_mig_memory_used_bytes", l),
            used as f64 * mib
        );
        assert_eq!(
            value(&text, "gpupeek_mig_memory_total_bytes", l),
            total as f64 * mib
        );
    }
    assert_eq!(value(&text, "gpupeek_mig_sm_activity_ratio", &a), 0.4);
    assert_eq!(value(&text, "gpupeek_mig_tensor_activity_ratio", &a), 0.1);
    assert_eq!(value(&text, "gpupeek_mig_sm_activity_ratio", &c), 0.0);
    assert!(!text.contains(&format!("gpupeek_mig_sm_activity_ratio{{{b}}}")));
    assert_eq!(value(&text, "gpupeek_mig_processes", &a), 2.0);
    let verdict = |l: &str, v: &str| {
        value(
            &text,
            "gpupeek_mig_verdict",
            &format!("{l},verdict=\"{v}\""),
        )
    };
    assert_eq!(verdict(&c, "idle-holding"), 1.0);
    assert_eq!(verdict(&a, "healthy"), 1.0);
    assert!(
        !text.contains(&format!("gpupeek_mig_verdict{{{b}")),
        "{text}"
    );
    // The parent has no utilisation (N/A under MIG), the plain GPU has its own.
    let util = samples(&text, "gpupeek_gpu_utilization_ratio");
    assert_eq!(util.len(), 1, "{text}");
    assert!(util[0].contains("gpu=\"1\""), "{text}");
    // Per-process series carry their instance's ids.
    let proc_line = samples(&text, "gpupeek_process_gpu_memory_bytes")
        .into_iter()
        .find(|l| l.contains(&format!("pid=\"{}\"", pids[3])))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        proc_line.contains("gpu_instance_id=\"13\",compute_instance_id=\"0\""),
        "{proc_line}"
    );

    // dcgm-exporter's names: a series per GPU instance, none for the MIG GPU itself.
    let dcgm = client(&sb, &["metrics", "--names", "dcgm"]);
    let fb = samples(&dcgm, "DCGM_FI_DEV_FB_USED");
    assert_eq!(fb.len(), 4, "three instances and the plain GPU: {dcgm}");
    let gi = |id: u32, profile: &str| {
        format!("modelName=\"NVIDIA H100 80GB HBM3\",GPU_I_PROFILE=\"{profile}\",GPU_I_ID=\"{id}\"")
    };
    assert_eq!(
        value(&dcgm, "DCGM_FI_DEV_FB_USED", &gi(1, "3g.40gb")),
        3000.0
    );
    assert_eq!(
        value(&dcgm, "DCGM_FI_DEV_FB_FREE", &gi(13, "1g.10gb")),
        7936.0
    );
    assert_eq!(
        value(&dcgm, "DCGM_FI_PROF_SM_ACTIVE", &gi(1, "3g.40gb")),
        0.4
    );
    assert_eq!(
        value(&dcgm, "DCGM_FI_DEV_GPU_TEMP", &gi(5, "2g.20gb")),
        45.0
    );
    let util = samples(&dcgm, "DCGM_FI_DEV_GPU_UTIL");
    assert_eq!(util.len(), 1, "{dcgm}");
    assert!(util[0].contains("gpu=\"1\"") && !util[0].contains("GPU_I_ID"));
    assert!(
        fb.iter()
            .filter(|l| l.contains("gpu=\"0\""))
            .all(|l| l.contains("GPU_I_ID=")),
        "{dcgm}"
    );

    // GIs 5 and 13 destroyed, GI 2 (4g.40gb) created: the next scrape has the new
    // instances only.
    let after = scenario(
        vec![
            instance(1, 9, None),
            json!({"gpu_instance_id": 2, "profile": "4g.40gb", "uuid": "MIG-00000002-new"}),
        ],
        vec![process(pids[0], 1000, 1), process(pids[1], 2000, 1)],
    );
    sb.write_scenario(&after);
    sb.snapshot_when(&daemon, "the new layout", |s| {
        layout(s) == [(1, "3g.40gb".to_owned()), (2, "4g.40gb".to_owned())]
    });
    let text = client(&sb, &["metrics"]);
    let info = samples(&text, "gpupeek_mig_info");
    assert_eq!(info.len(), 2, "{text}");
    assert!(info[1].contains("gpu_instance_id=\"2\"") && info[1].contains("4g.40gb"));
    assert!(!text.contains("gpu_instance_id=\"13\""), "{text}");
}

#[test]
fn query_takes_a_mig_uuid_for_its_gpu_and_lists_the_instances_as_nvidia_smi() {
    let sb = Sandbox::new("migout-query");
    let (_procs, pids) = four_sleepers();
    let _daemon = start(&sb, &pids);
    let gpu0 = "GPU-a1b2c3d4-0000-1111-2222-333344445555";
    let mig13 = "MIG-0000000d-7d1c-5b8e-9d2a-000000000013";
    let csv = client(
        &sb,
        &[
            "query",
            "-i",
            &mig13.to_uppercase(),
            "--query-gpu=index,uuid",
            "--format=csv,noheader",
        ],
    );
    assert_eq!(csv, format!("0, {gpu0}\n"));
    let list = client(&sb, &["query", "-L"]);
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 5, "{list}");
    assert!(lines[0].starts_with("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a1b2"));
    assert_eq!(
        lines[3],
        format!("  MIG 1g.10gb     Device  2: (UUID: {mig13})")
    );
    assert!(lines[4].starts_with("GPU 1: "), "{list}");
    // Compute apps in an instance are the GPU's, as nvidia-smi lists them.
    let apps = client(
        &sb,
        &[
            "query",
            "-i",
            mig13,
            "--query-compute-apps=pid,gpu_uuid,used_memory",
            "--format=csv,noheader,nounits",
        ],
    );
    let mut got: Vec<&str> = apps.lines().collect();
    got.sort_unstable();
    let mut want: Vec<String> = [(0, 1000), (1, 2000), (2, 3000), (3, 2048)]
        .iter()
        .map(|&(i, mib)| format!("{}, {gpu0}, {mib}", pids[i]))
        .collect();
    want.sort_unstable();
    assert_eq!(got, want);
    // An unknown MIG UUID is a usage error, on one line.
    let out = sb.client(&["query", "-i", "MIG-nope", "--query-gpu=index"]);
    fails_saying(&out, "no GPU matches id \"MIG-nope\"");
}

#[test]
fn a_bar_shows_a_selected_instance_and_a_template_names_one_by_gpu_instance_id() {
    let sb = Sandbox::new("migout-bars");
    let (_procs, pids) = four_sleepers();
    let _daemon = start(&sb, &pids);
    let mig13 = "MIG-0000000d-7d1c-5b8e-9d2a-000000000013";
    let line = |args: &[&str]| -> Value {
        let mut all = vec!["-o", "waybar"];
        all.extend_from_slice(args);
        serde_json::from_str(&client(&sb, &all)).unwrap()
    };
    let format = "{mem_used:MiB:.0}/{mem_total:MiB:.0} {util} {procs}";
    for id in ["0.gi13", mig13] {
        let bar = line(&["--id", id, "--format", format]);
        assert_eq!(bar["text"], "2048/9984 N/A 1", "{id}: {bar}");
    }
    let both = line(&[
        "--format",
        "{0.gi1.mem_used:MiB:.0} {0.gi5.procs} {0.gi2.mem_used} {1.util}",
    ]);
    assert_eq!(both["text"], "3000 1 N/A 12", "{both}");
    // tmux and polybar show the instance too.
    let tmux = client(
        &sb,
        &[
            "-o",
            "tmux",
            "--id",
            "0.gi5",
            "--format",
            "{mem_used:MiB:.0}",
        ],
    );
    assert_eq!(tmux, "3000\n");
    // A selection that names no instance is a usage error that lists them.
    let out = sb.client(&["-o", "polybar", "--id", "0.gi2"]);
    fails_saying(&out, "no MIG GPU instance 2 on GPU 0");
    assert!(stderr(&out).contains("0.gi1,0.gi5,0.gi13"), "{out:?}");
    // The table shows the instance's GPU, with the instance's verdict under -V.
    let table = client(&sb, &["--id", mig13, "-V"]);
    assert!(table.lines().nth(1).unwrap().starts_with("[0] "), "{table}");
    assert_eq!(table.lines().count(), 5, "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.contains("MIG 1g.10gb (13/0)") && l.contains("idle-holding")),
        "{table}"
    );
    let doc: Value = serde_json::from_str(&client(&sb, &["--json"])).unwrap();
    let verdicts: Vec<&Value> = doc["gpus"][0]["mig"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["verdict"])
        .collect();
    assert_eq!(
        verdicts,
        [&json!("healthy"), &Value::Null, &json!("idle-holding")]
    );
}

/// `out` is a usage error (exit 2) on one line that says `what`.
fn fails_saying(out: &Output, what: &str) {
    assert_one_line_failure(out, 2, what);
    assert!(stderr(out).contains(what), "{what}: {out:?}");
}

#[test]
fn a_followed_instance_that_a_reconfiguration_destroys_is_an_error_line_until_it_is_back() {
    let sb = Sandbox::new("migout-follow");
    let (_procs, pids) = four_sleepers();
    let _daemon = start(&sb, &pids);
    let (_follower, rx) = crate::statusbar::follower(
        &sb,
        &[
            "-o",
            "waybar",
            "--id",
            "0.gi13",
            "--format",
            "{mem_used:MiB:.0}",
        ],
    );
    let doc = |line: &str| -> Value { serde_json::from_str(line).unwrap() };
    crate::statusbar::line_where(&rx, |l| doc(l)["text"] == "2048");
    // GI 13 destroyed: the bar says so, and the follower goes on.
    let mut gone = split(&pids);
    gone["gpus"][0]["mig"]["instances"]
        .as_array_mut()
        .unwrap()
        .truncate(2);
    gone["gpus"][0]["processes"]
        .as_array_mut()
        .unwrap()
        .truncate(3);
    sb.write_scenario(&gone);
    let line = crate::statusbar::line_where(&rx, |l| doc(l)["class"] == "error");
    let tooltip = doc(&line)["tooltip"].as_str().unwrap().to_owned();
    assert!(
        tooltip.contains("no MIG GPU instance 13 on GPU 0"),
        "{line}"
    );
    // Created again: the bar shows it again.
    sb.write_scenario(&split(&pids));
    crate::statusbar::line_where(&rx, |l| doc(l)["text"] == "2048");
}

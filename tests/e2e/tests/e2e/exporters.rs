//! `gpupeek metrics --names`: dcgm-exporter's and nvidia_gpu_exporter's names, labels and
//! units; and contrib/'s Grafana dashboard and Prometheus rules, whose every query must
//! find its metric in what `gpupeek metrics` exports (promtool checks the rules, and runs
//! their unit tests, when it is installed; under CI it must be).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use gpupeek_e2e::{repo, run_with_watchdog, stderr, stdout, tool, wait_for, Daemon, Sandbox};
use serde_json::{json, Value};

const GIB: u64 = 1 << 30;
const UUID: &str = "GPU-11111111-2222-3333-4444-555555555555";

/// One H100 reporting every field gpupeek publishes, GPM included, with a process; a
/// second GPU that is lost.
pub(crate) fn everything() -> (Sandbox, Daemon) {
    let sandbox = Sandbox::new("exporters");
    let mut scenario = json!({
        "driver_version": "550.54.15",
        "gpus": [
        {
            "name": "NVIDIA H100 80GB HBM3", "uuid": UUID, "pci_bus_id": "00000000:1B:00.0",
            "memory_total_bytes": 80 * GIB, "memory_used_bytes": 10 * GIB + 123,
            "memory_free_bytes": 70 * GIB - 123, "memory_reserved_bytes": GIB / 2,
            "utilization_gpu_pct": 45, "utilization_memory_pct": 12, "temperature_c": 41,
            "power_usage_mw": 123456, "power_limit_mw": 700000, "energy_mj": 5500,
            "fan_speed_pct": 30, "encoder_utilization_pct": 3, "decoder_utilization_pct": 7,
            "clocks_mhz": {"graphics": 1755, "sm": 1755, "memory": 2619},
            "max_clocks_mhz": {"graphics": 1980, "sm": 1980, "memory": 2619},
            "pstate": 2, "clock_event_reasons": 0x44, "pcie_tx_kbps": 100, "pcie_rx_kbps": 200,
            "pcie_link_gen": 5, "pcie_link_width": 16,
            "ecc_corrected_volatile": 3, "ecc_uncorrected_volatile": 0,
            "clocks_event_reasons_counters": {"sw_power_cap": 204642816u64},
            "gpm": {"sm_activity_pct": 12.0, "sm_occupancy_pct": 6.0,
                    "tensor_activity_pct": 5.5, "dram_bw_util_pct": 40.25,
                    "pcie_tx_mib_per_s": 100.0, "pcie_rx_mib_per_s": 2.5,
                    "nvlink_tx_mib_per_s": 1.0, "nvlink_rx_mib_per_s": 0.5},
            "processes": [{"pid": std::process::id(), "used_gpu_memory_bytes": 3 * GIB,
                           "type": "compute"}]
        },
        {"name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-2", "errors": {"*": "GPU_IS_LOST"}}
    ]});
    scenario["gpus"][0]["supported_event_types"] = json!(0xF);
    for (key, value) in [
        ("persistence_mode", 1),
        ("compute_mode", 3),
        ("gpu_recovery_action", 4),
    ] {
        scenario["gpus"][0][key] = json!(value);
    }
    sandbox.write_scenario(&scenario);
    let daemon = sandbox.start_daemon("100ms");
    sandbox.wait_live(&daemon);
    // An application's Xid 13 on GPU 0, once the daemon listens for it.
    wait_for("the event registrations", &daemon, || {
        let calls = sandbox.nvml_call_file(daemon.pid()).unwrap_or_default();
        calls
            .get("nvmlDeviceGetSupportedEventTypes")
            .copied()
            .unwrap_or(0)
            >= 2
    });
    scenario["gpus"][0]["xids"] = json!([{"code": 13}]);
    sandbox.write_scenario(&scenario);
    // The slower cadences: processes, ECC, PCIe throughput, a second GPM sample; the Xid.
    wait_for("every family", &daemon, || {
        let text = metrics(&sandbox, &[]);
        [
            "gpupeek_gpu_pcie_transmit_bytes_per_second{",
            "gpupeek_gpu_processes{",
            "gpupeek_gpu_ecc_corrected_errors_total{",
            "gpupeek_gpu_sm_activity_ratio{",
            "gpupeek_xid_errors_total{",
        ]
        .iter()
        .all(|family| text.contains(family))
    });
    (sandbox, daemon)
}

pub(crate) fn metrics(sandbox: &Sandbox, flags: &[&str]) -> String {
    let mut cmd = Command::new(&gpupeek_e2e::bins().client);
    cmd.args(["metrics", "--shm", &sandbox.shm]).args(flags);
    let out = run_with_watchdog(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout(&out)
}

fn assert_lines(text: &str, lines: &[String]) {
    for line in lines {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in:\n{text}"
        );
    }
}

/// The metric names of an exposition's samples.
pub(crate) fn exported(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_owned())
        .collect()
}

#[test]
fn names_dcgm_speaks_dcgm_exporters_names_labels_and_units() {
    let (sandbox, _daemon) = everything();
    let text = metrics(&sandbox, &["--names", "dcgm"]);
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    let l = format!(
        "gpu=\"0\",UUID=\"{UUID}\",pci_bus_id=\"00000000:1B:00.0\",device=\"nvidia0\",\
         modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"{host}\",\
         DCGM_FI_DRIVER_VERSION=\"550.54.15\""
    );
    assert_lines(
        &text,
        &[
            "gpupeek_up 1".into(),
            "# TYPE DCGM_FI_DEV_GPU_UTIL gauge".into(),
            format!("DCGM_FI_DEV_GPU_UTIL{{{l}}} 45"),
            format!("DCGM_FI_DEV_MEM_COPY_UTIL{{{l}}} 12"),
            format!("DCGM_FI_DEV_FB_USED{{{l}}} 10240"),
            format!("DCGM_FI_DEV_FB_FREE{{{l}}} 71679"),
            format!("DCGM_FI_DEV_FB_RESERVED{{{l}}} 512"),
            format!("DCGM_FI_DEV_GPU_TEMP{{{l}}} 41"),
            format!("DCGM_FI_DEV_POWER_USAGE{{{l}}} 123.456000"),
            "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter".into(),
            format!("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{l}}} 5500"),
            format!("DCGM_FI_DEV_SM_CLOCK{{{l}}} 1755"),
            format!("DCGM_FI_DEV_MEM_CLOCK{{{l}}} 2619"),
            format!("DCGM_FI_DEV_ENC_UTIL{{{l}}} 3"),
            format!("DCGM_FI_DEV_DEC_UTIL{{{l}}} 7"),
            format!("DCGM_FI_DEV_FAN_SPEED{{{l}}} 30"),
            format!("DCGM_FI_PROF_SM_ACTIVE{{{l}}} 0.120000"),
            format!("DCGM_FI_PROF_SM_OCCUPANCY{{{l}}} 0.060000"),
            format!("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{l}}} 0.055000"),
            format!("DCGM_FI_PROF_DRAM_ACTIVE{{{l}}} 0.402500"),
            format!("DCGM_FI_PROF_PCIE_TX_BYTES{{{l}}} 104857600"),
            format!("DCGM_FI_DEV_CLOCKS_EVENT_REASONS{{{l}}} 68"),
            format!("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{{{l}}} 3"),
        ],
    );
    assert!(!text.contains("gpupeek_gpu_"), "{text}");
    assert!(
        !text.contains("gpu=\"1\""),
        "a lost GPU has no values: {text}"
    );
    // What dcgm-exporter's own Grafana dashboard queries (grafana/dcgm-exporter-dashboard.json).
    let names = exported(&text);
    for name in [
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    ] {
        assert!(names.contains(name), "{name} missing:\n{text}");
    }
}

#[test]
fn names_nvidia_gpu_exporter_speaks_its_names_labels_and_units() {
    let (sandbox, _daemon) = everything();
    let text = metrics(&sandbox, &["--names", "nvidia_gpu_exporter"]);
    let l = "uuid=\"11111111-2222-3333-4444-555555555555\"";
    assert_lines(
        &text,
        &[
            format!(
                "nvidia_smi_gpu_info{{cuda_version=\"12.4\",driver_version=\"550.54.15\",\
                 index=\"0\",name=\"NVIDIA H100 80GB HBM3\",pci_bus_id=\"00000000:1B:00.0\",{l}}} 1"
            ),
            format!("nvidia_smi_index{{{l}}} 0"),
            format!("nvidia_smi_utilization_gpu_ratio{{{l}}} 0.45"),
            format!("nvidia_smi_utilization_memory_ratio{{{l}}} 0.12"),
            // 10 GiB and 123 bytes: nvidia-smi prints `10241 MiB` (it rounds MiB up),
            // which the exporter multiplies back into bytes.
            format!("nvidia_smi_memory_used_bytes{{{l}}} 10738466816"),
            // As nvidia_gpu_exporter's L40S (595.80) testdata prints 204642816 us.
            format!(
                "nvidia_smi_clocks_event_reasons_counters_sw_power_cap_seconds{{{l}}} \
                 204.64281599999998"
            ),
            format!("nvidia_smi_memory_total_bytes{{{l}}} 85899345920"),
            format!("nvidia_smi_temperature_gpu{{{l}}} 41"),
            format!("nvidia_smi_fan_speed_ratio{{{l}}} 0.3"),
            format!("nvidia_smi_power_draw_watts{{{l}}} 123.45"),
            format!("nvidia_smi_power_limit_watts{{{l}}} 700"),
            format!("nvidia_smi_enforced_power_limit_watts{{{l}}} 700"),
            format!("nvidia_smi_clocks_current_sm_clock_hz{{{l}}} 1755000000"),
            format!("nvidia_smi_clocks_max_graphics_clock_hz{{{l}}} 1980000000"),
            format!("nvidia_smi_pstate{{{l}}} 2"),
            format!("nvidia_smi_clocks_event_reasons_active{{{l}}} 68"),
            format!("nvidia_smi_clocks_event_reasons_hw_thermal_slowdown{{{l}}} 1"),
            format!("nvidia_smi_clocks_event_reasons_gpu_idle{{{l}}} 0"),
            format!("nvidia_smi_ecc_errors_corrected_volatile_total{{{l}}} 3"),
            // Words as that exporter reads nvidia-smi's: Enabled, Exclusive_Process and
            // Drain and Reset.
            format!("nvidia_smi_persistence_mode{{{l}}} 1"),
            format!("nvidia_smi_compute_mode{{{l}}} 3"),
            format!("nvidia_smi_gpu_recovery_action{{{l}}} 4"),
            "# TYPE nvidia_smi_energy_joules_total counter".into(),
            format!("nvidia_smi_energy_joules_total{{{l}}} 5.5"),
            format!("nvidia_smi_pcie_throughput_tx_bytes_per_second{{{l}}} 104857600"),
        ],
    );
    assert!(!text.contains("gpupeek_gpu_"), "{text}");
    // A lost GPU keeps what identity it has, as nvidia-smi still lists it, but no values.
    assert!(text.contains("index=\"1\""), "{text}");
    assert!(!text.contains("nvidia_smi_index{uuid=\"\"}"), "{text}");
}

/// Every metric name a PromQL expression reads: the identifiers outside label matchers,
/// strings and ranges that are not functions, aggregations, keywords or the label lists
/// of `by (...)` and the like.
pub(crate) fn promql_metrics(expr: &str) -> BTreeSet<String> {
    const WORDS: [&str; 24] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "and",
        "or",
        "unless",
        "offset",
        "inf",
        "nan",
        "sum",
        "avg",
        "min",
        "max",
        "count",
        "group",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
    ];
    let mut names = BTreeSet::new();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    let mut skip_list = false;
    while i < chars.len() {
        let c = chars[i];
        let close = match c {
            '{' => Some('}'),
            '[' => Some(']'),
            '"' | '\'' | '`' => Some(c),
            _ => None,
        };
        if let Some(close) = close {
            i += 1;
            while i < chars.len() && chars[i] != close {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            continue;
        }
        if c == '$' {
            // A Grafana variable: $name, ${name} or [[name]].
            i += 1;
            while i < chars.len() && (chars[i].is_alphanumeric() || "_{}".contains(chars[i])) {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_:".contains(chars[i])) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace());
            if skip_list {
                // Inside by (...): label names.
            } else if [
                "by",
                "without",
                "on",
                "ignoring",
                "group_left",
                "group_right",
            ]
            .contains(&word.as_str())
            {
                skip_list = next == Some(&'(');
            } else if next != Some(&'(') && !WORDS.contains(&word.to_lowercase().as_str()) {
                names.insert(word);
            }
            continue;
        }
        if c == ')' {
            skip_list = false;
        }
        if c.is_ascii_digit() {
            // A number (1e9, 0x10, 5m in offsets).
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            continue;
        }
        i += 1;
    }
    names
}

#[test]
fn promql_metric_names_are_told_from_functions_labels_and_variables() {
    let names = promql_metrics(
        "sum by (gpu, uuid) (rate(gpupeek_gpu_energy_joules_total{instance=~\"$instance\"}[5m])) \
         / on(instance) group_left gpupeek_gpus * 1e9 > bool 0 and ${x} offset 5m",
    );
    let expected: BTreeSet<String> = ["gpupeek_gpu_energy_joules_total", "gpupeek_gpus"]
        .map(String::from)
        .into();
    assert_eq!(names, expected);
}

/// Every PromQL expression in a Grafana dashboard: panel targets' `expr` and template
/// variables' queries (`label_values(metric, label)`).
pub(crate) fn dashboard_exprs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("expr", Value::String(s)) => out.push(s.clone()),
                    ("query", Value::String(s)) if s.contains('(') => out.push(s.clone()),
                    ("query", Value::Object(q)) => {
                        if let Some(Value::String(s)) = q.get("query") {
                            out.push(s.clone());
                        }
                    }
                    _ => dashboard_exprs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| dashboard_exprs(v, out)),
        _ => {}
    }
}

/// `label_values(SELECTOR, label)` reads the metrics of `SELECTOR` ([`selector_metrics`]);
/// anything else is PromQL.
pub(crate) fn query_metrics(expr: &str) -> BTreeSet<String> {
    match expr.trim().strip_prefix("label_values(") {
        Some(rest) => selector_metrics(label_values_selector(rest)),
        None => promql_metrics(expr),
    }
}

/// The series selector of `label_values(SELECTOR, label)`, given what follows
/// `label_values(`.
pub(crate) fn label_values_selector(rest: &str) -> &str {
    let rest = rest.trim_end().trim_end_matches(')');
    rest.rsplit_once(',')
        .map_or(rest, |(selector, _)| selector.trim())
}

/// The metrics a series selector reads: its name, or the names its `__name__` matcher
/// lists (`{__name__=~"a|b",...}`, alternatives of plain names only).
fn selector_metrics(selector: &str) -> BTreeSet<String> {
    let Some(at) = selector.find("__name__") else {
        return promql_metrics(selector);
    };
    let matcher = selector[at + "__name__".len()..].trim_start_matches(['=', '~']);
    let Some(value) = matcher.strip_prefix('"').and_then(|m| m.split('"').next()) else {
        return BTreeSet::new();
    };
    let plain = |n: &&str| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    value.split('|').filter(plain).map(str::to_owned).collect()
}

/// The flags contrib's dashboards and rules are written for.
const CONTRIB_FLAGS: &[&str] = &["--per-process", "--per-user"];

#[test]
fn every_metric_a_contrib_dashboard_panel_queries_is_exported() {
    let (sandbox, _daemon) = everything();
    let mut names = exported(&metrics(&sandbox, CONTRIB_FLAGS));
    // The MIG panels read what an H100 split into MIG instances exports.
    let (mig, _mig_daemon, _procs) = crate::mig_outputs::started("exporters-mig");
    names.extend(exported(&metrics(&mig, CONTRIB_FLAGS)));
    // contrib/kubernetes's dashboards read what its DaemonSet's `gpupeek serve` exports
    // (on plain GPUs and on MIG devices), the PrometheusRule's recorded series and
    // Prometheus's `up`.
    let (_serve, mut k8s_names) = crate::kubernetes::served_names(&sandbox);
    let (_mig_serve, mig_names) = crate::kubernetes::served_names(&mig);
    k8s_names.extend(mig_names);
    let dirs = [
        (repo().join("contrib/grafana"), names.clone()),
        (repo().join("contrib/kubernetes/dashboards"), k8s_names),
    ];
    for (dir, names) in dirs {
        dashboards_read_only(&dir, &names);
    }
}

/// Checks every dashboard in `dir` queries only `names`.
fn dashboards_read_only(dir: &Path, names: &BTreeSet<String>) {
    let mut dashboards = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        dashboards += 1;
        let dashboard: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let mut exprs = Vec::new();
        dashboard_exprs(&dashboard, &mut exprs);
        assert!(exprs.len() >= 10, "{}: {exprs:?}", path.display());
        for expr in &exprs {
            let read = query_metrics(expr);
            assert!(
                !read.is_empty(),
                "{}: no metric in {expr:?}",
                path.display()
            );
            for name in read {
                assert!(
                    names.contains(&name),
                    "{}: {expr:?} reads {name}, which gpupeek metrics does not export",
                    path.display()
                );
            }
        }
    }
    assert!(dashboards >= 1, "no dashboard in {}", dir.display());
}

/// The `expr:` lines of a Prometheus rules file (one-line expressions, or `>`/`|` blocks).
pub(crate) fn rule_exprs(yaml: &str) -> Vec<String> {
    let mut exprs = Vec::new();
    let mut lines = yaml.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim_start().strip_prefix("expr:") else {
            continue;
        };
        let rest = rest.trim();
        if rest.starts_with('>') || rest.starts_with('|') {
            let indent = line.len() - line.trim_start().len();
            let mut block = String::new();
            while let Some(next) = lines.peek() {
                let deeper = next.len() - next.trim_start().len() > indent;
                if !deeper && !next.trim().is_empty() {
                    break;
                }
                block.push(' ');
                block.push_str(next.trim());
                lines.next();
            }
            exprs.push(block);
        } else {
            exprs.push(rest.trim_matches(['\'', '"']).to_owned());
        }
    }
    exprs
}

#[test]
fn every_metric_a_contrib_alert_rule_reads_is_exported() {
    let (sandbox, _daemon) = everything();
    let names = exported(&metrics(&sandbox, CONTRIB_FLAGS));
    let rules = repo().join("contrib/prometheus/gpupeek-rules.yml");
    let exprs = rule_exprs(&std::fs::read_to_string(&rules).unwrap());
    assert!(exprs.len() >= 6, "{exprs:?}");
    for expr in &exprs {
        // `up` is Prometheus's own series of each scrape.
        for name in promql_metrics(expr).into_iter().filter(|n| n != "up") {
            assert!(
                names.contains(&name),
                "rule {expr:?} reads {name}, which gpupeek metrics does not export"
            );
        }
    }
}

pub(crate) fn promtool(args: &[&str], dir: &Path) {
    let Some(promtool) = tool("promtool", "prometheus") else {
        return;
    };
    let mut cmd = Command::new(promtool);
    cmd.args(args).current_dir(dir);
    let out = run_with_watchdog(cmd);
    assert!(
        out.status.success(),
        "promtool {args:?}:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
}

#[test]
fn contrib_alert_rules_pass_promtool_check_rules() {
    let dir = repo().join("contrib/prometheus");
    promtool(&["check", "rules", "gpupeek-rules.yml"], &dir);
}

#[test]
fn contrib_alert_rules_pass_their_promtool_unit_tests() {
    let dir = repo().join("contrib/prometheus");
    promtool(&["test", "rules", "gpupeek-rules.test.yml"], &dir);
}

#[test]
fn per_process_and_per_user_series_are_opt_in() {
    let (sandbox, _daemon) = everything();
    let plain = metrics(&sandbox, &[]);
    assert!(
        !plain.contains("gpupeek_process_gpu_memory_bytes"),
        "{plain}"
    );
    assert!(!plain.contains("gpupeek_user_"), "{plain}");
    let text = metrics(&sandbox, &["--per-process", "--per-user"]);
    let pid = std::process::id();
    let process = text
        .lines()
        .find(|l| l.starts_with("gpupeek_process_gpu_memory_bytes{"))
        .unwrap_or_else(|| panic!("no process series:\n{text}"));
    assert!(
        process.starts_with(&format!(
            "gpupeek_process_gpu_memory_bytes{{gpu=\"0\",uuid=\"{UUID}\",pid=\"{pid}\",user=\""
        )) && process.ends_with(&format!(" {}", 3 * GIB)),
        "{process}"
    );
    assert!(
        text.contains("\ngpupeek_process_series_omitted 0\n"),
        "{text}"
    );
    let user = text
        .lines()
        .find(|l| l.starts_with("gpupeek_user_gpu_memory_bytes{"))
        .unwrap_or_else(|| panic!("no user series:\n{text}"));
    assert!(user.ends_with(&format!(" {}", 3 * GIB)), "{user}");
    assert!(text.contains("gpupeek_user_processes{gpu=\"0\""), "{text}");
    let smi = metrics(
        &sandbox,
        &["--names", "nvidia_gpu_exporter", "--per-process"],
    );
    let l = format!("uuid=\"11111111-2222-3333-4444-555555555555\",pid=\"{pid}\"");
    assert!(
        smi.contains(&format!("nvidia_smi_compute_app_used_memory_bytes{{{l}")),
        "{smi}"
    );
    assert!(
        smi.contains(&format!("nvidia_smi_compute_app_info{{{l}")),
        "{smi}"
    );
}

#[test]
fn every_names_output_has_each_series_once_and_parses() {
    let (sandbox, _daemon) = everything();
    for names in ["gpupeek", "dcgm", "nvidia_gpu_exporter"] {
        let text = metrics(&sandbox, &["--names", names, "--per-process", "--per-user"]);
        let mut series = BTreeSet::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let key = line.rsplit_once(' ').unwrap().0;
            assert!(series.insert(key.to_owned()), "{names}: {key} twice");
        }
        let Some(promtool) = tool("promtool", "prometheus") else {
            continue;
        };
        let mut cmd = Command::new(promtool);
        cmd.args(["check", "metrics"]);
        let out = gpupeek_e2e::run_with_input(cmd, text.as_bytes());
        let said = format!("{}{}", stdout(&out), stderr(&out));
        // 0: clean; 3: lint findings only. The other exporters' names break Prometheus's
        // naming lints (DCGM's counters have no _total) as those exporters do.
        let expected: &[i32] = if names == "gpupeek" { &[0] } else { &[0, 3] };
        assert!(
            out.status.code().is_some_and(|c| expected.contains(&c)),
            "{names}: promtool {:?}: {said}",
            out.status.code()
        );
    }
}

#[test]
fn names_nvidia_gpu_exporter_has_what_its_own_dashboards_query_that_gpupeek_knows() {
    let (sandbox, _daemon) = everything();
    let text = metrics(
        &sandbox,
        &["--names", "nvidia_gpu_exporter", "--per-process"],
    );
    let names = exported(&text);
    // Queried by docs/grafana/dashboard.json and dashboard-overview.json of
    // utkuozdemir/nvidia_gpu_exporter; README.md lists those gpupeek cannot give.
    let reasons = [
        "applications_clocks_setting",
        "gpu_idle",
        "hw_power_brake_slowdown",
        "hw_thermal_slowdown",
        "sw_power_cap",
        "sw_thermal_slowdown",
        "sync_boost",
    ];
    let queried = [
        "nvidia_smi_gpu_info",
        "nvidia_smi_index",
        "nvidia_smi_utilization_gpu_ratio",
        "nvidia_smi_utilization_memory_ratio",
        "nvidia_smi_memory_used_bytes",
        "nvidia_smi_memory_total_bytes",
        "nvidia_smi_temperature_gpu",
        "nvidia_smi_fan_speed_ratio",
        "nvidia_smi_power_draw_watts",
        "nvidia_smi_power_limit_watts",
        "nvidia_smi_enforced_power_limit_watts",
        "nvidia_smi_clocks_current_graphics_clock_hz",
        "nvidia_smi_clocks_current_memory_clock_hz",
        "nvidia_smi_clocks_current_sm_clock_hz",
        "nvidia_smi_clocks_max_graphics_clock_hz",
        "nvidia_smi_clocks_max_memory_clock_hz",
        "nvidia_smi_pstate",
        "nvidia_smi_energy_joules_total",
        "nvidia_smi_pcie_throughput_tx_bytes_per_second",
        "nvidia_smi_pcie_throughput_rx_bytes_per_second",
        "nvidia_smi_compute_app_info",
        "nvidia_smi_compute_app_used_memory_bytes",
    ]
    .map(String::from)
    .into_iter()
    .chain(reasons.map(|r| format!("nvidia_smi_clocks_event_reasons_{r}")));
    for name in queried {
        assert!(names.contains(&name), "{name} missing:\n{text}");
    }
}

//! contrib/kubernetes: the manifests are valid Kubernetes objects (kubernetes-validate,
//! offline, for the built-in kinds; structural checks here for prometheus-operator's
//! ServiceMonitor, PodMonitor and PrometheusRule), they keep the privileges README.md
//! documents, their commands take the flags given, and the PrometheusRule's rules pass
//! promtool's checks and unit tests and read only what `gpupeek serve` exports.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use gpupeek_e2e::Sandbox;
use gpupeek_e2e::{bins, http, repo, run_with_watchdog, spawn_serve, stderr, stdout, Background};
use serde_yaml::Value;

use crate::exporters::{exported, promql_metrics, promtool, rule_exprs};

/// The manifests, by file name.
const MANIFESTS: &[&str] = &[
    "namespace.yaml",
    "daemonset.yaml",
    "service.yaml",
    "fleet-role.yaml",
    "servicemonitor.yaml",
    "podmonitor.yaml",
    "prometheusrule.yaml",
];

fn dir() -> PathBuf {
    repo().join("contrib/kubernetes")
}

fn manifest(name: &str) -> Value {
    let text = std::fs::read_to_string(dir().join(name)).unwrap();
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn get<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.')
        .fold(v, |v, key| match key.parse::<usize>() {
            Ok(i) => &v[i],
            Err(_) => &v[key],
        })
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| {
            s.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The container named `name` of the DaemonSet.
fn container(name: &str) -> Value {
    let ds = manifest("daemonset.yaml");
    get(&ds, "spec.template.spec.containers")
        .as_sequence()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name}"))
        .clone()
}

/// The serve container's arguments, with the downward API's node name filled in.
fn serve_args() -> Vec<String> {
    strings(&container("serve")["args"])
        .into_iter()
        .map(|a| a.replace("$(NODE_NAME)", "node-1"))
        .collect()
}

/// `gpupeek serve` on `sandbox` as the DaemonSet runs it (but on a loopback port), and
/// what a scrape of it, the PrometheusRule's recorded series and Prometheus's `up` give
/// a dashboard to read.
pub(crate) fn served_names(sandbox: &Sandbox) -> (Background, BTreeSet<String>) {
    let args: Vec<String> = serve_args()
        .into_iter()
        .filter(|a| !a.starts_with("--listen"))
        .collect();
    let flags: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    let (serve, url) = spawn_serve(sandbox, Command::new(&bins().client), &flags);
    let (status, text) = http("GET", url.strip_prefix("http://").unwrap(), "/metrics");
    assert_eq!(status, 200, "{text}");
    let mut names = exported(&text);
    assert!(names.contains("gpupeek_node_info"), "{text}");
    names.extend(recorded());
    names.insert("up".into());
    (serve, names)
}

/// The names the PrometheusRule records.
fn recorded() -> BTreeSet<String> {
    rules()
        .iter()
        .filter_map(|r| r["record"].as_str().map(str::to_owned))
        .collect()
}

/// Every rule of the PrometheusRule.
fn rules() -> Vec<Value> {
    let rule = manifest("prometheusrule.yaml");
    get(&rule, "spec.groups")
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap().clone())
        .collect()
}

#[test]
fn built_in_kinds_pass_kubernetes_validate_strictly() {
    let tool = match std::env::var_os("GPUPEEK_KUBERNETES_VALIDATE") {
        Some(tool) => PathBuf::from(tool),
        None => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must set GPUPEEK_KUBERNETES_VALIDATE (scripts/test installs it)"
            );
            eprintln!("SKIPPED: GPUPEEK_KUBERNETES_VALIDATE not set (scripts/test sets it)");
            return;
        }
    };
    // The oldest Kubernetes still supported upstream, and the newest the tool knows.
    for version in ["1.32.0", "1.34.0"] {
        let mut cmd = Command::new(&tool);
        cmd.args(["--strict", "--kubernetes-version", version])
            .args(MANIFESTS)
            .current_dir(dir());
        let out = run_with_watchdog(cmd);
        let said = format!("{}{}", stdout(&out), stderr(&out));
        assert!(out.status.success(), "{said}");
        for name in [
            "namespace.yaml",
            "daemonset.yaml",
            "service.yaml",
            "fleet-role.yaml",
        ] {
            assert!(
                said.lines()
                    .any(|l| l.contains(name) && l.contains("passed")),
                "{name} was not validated:\n{said}"
            );
        }
    }
}

#[test]
fn every_manifest_is_one_named_object_in_the_gpupeek_namespace() {
    for name in MANIFESTS {
        let m = manifest(name);
        for key in ["apiVersion", "kind"] {
            assert!(m[key].as_str().is_some(), "{name}: no {key}");
        }
        assert_eq!(m["metadata"]["name"], "gpupeek", "{name}");
        if m["kind"] != "Namespace" {
            assert_eq!(m["metadata"]["namespace"], "gpupeek", "{name}");
        }
    }
}

/// `object`'s keys must be among `known` (a typo in a CRD's field is otherwise silently
/// ignored by nothing here).
fn only_keys(object: &Value, known: &[&str], what: &str) {
    let map = object
        .as_mapping()
        .unwrap_or_else(|| panic!("{what}: not a mapping"));
    for key in map.keys() {
        let key = key.as_str().unwrap();
        assert!(known.contains(&key), "{what}: unknown field {key:?}");
    }
}

fn relabelings_are_valid(relabelings: &Value, what: &str) {
    for r in relabelings.as_sequence().unwrap() {
        only_keys(
            r,
            &[
                "sourceLabels",
                "separator",
                "targetLabel",
                "regex",
                "modulus",
                "replacement",
                "action",
            ],
            what,
        );
        let action = r["action"].as_str().unwrap_or("replace");
        assert!(
            [
                "replace",
                "keep",
                "drop",
                "labelmap",
                "labeldrop",
                "labelkeep",
                "hashmod"
            ]
            .contains(&action),
            "{what}: action {action}"
        );
        if action == "replace" {
            assert!(r["targetLabel"].as_str().is_some(), "{what}: {r:?}");
        }
        if let Some(regex) = r["regex"].as_str() {
            assert!(!regex.is_empty(), "{what}");
        }
    }
}

#[test]
fn the_monitors_select_the_exporter_and_scrape_its_named_port() {
    let service = manifest("service.yaml");
    let ds = manifest("daemonset.yaml");
    let pod_labels = get(&ds, "spec.template.metadata.labels").clone();
    let ports: Vec<_> = container("serve")["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    // The headless Service selects the DaemonSet's pods and names the port.
    assert_eq!(get(&service, "spec.clusterIP"), "None");
    for (k, v) in get(&service, "spec.selector").as_mapping().unwrap() {
        assert_eq!(&pod_labels[k], v, "Service selector {k:?}");
    }
    let service_port = get(&service, "spec.ports.0");
    assert!(ports.contains(&service_port["targetPort"].as_str().unwrap().to_owned()));
    for (file, targets, endpoints) in [
        (
            "servicemonitor.yaml",
            &service["metadata"]["labels"],
            "endpoints",
        ),
        ("podmonitor.yaml", &pod_labels, "podMetricsEndpoints"),
    ] {
        let m = manifest(file);
        assert_eq!(m["apiVersion"], "monitoring.coreos.com/v1", "{file}");
        only_keys(
            &m["spec"],
            &["jobLabel", "selector", "namespaceSelector", endpoints],
            file,
        );
        for (k, v) in get(&m, "spec.selector.matchLabels").as_mapping().unwrap() {
            assert_eq!(&targets[k], v, "{file}: selector {k:?}");
        }
        // job is the value of that label: "gpupeek", which the rules select.
        let job_label = m["spec"]["jobLabel"].as_str().unwrap();
        assert_eq!(targets[job_label], "gpupeek", "{file}");
        assert_eq!(
            strings(get(&m, "spec.namespaceSelector.matchNames")),
            ["gpupeek"]
        );
        for e in m["spec"][endpoints].as_sequence().unwrap() {
            only_keys(
                e,
                &["port", "path", "interval", "scrapeTimeout", "relabelings"],
                file,
            );
            let port = e["port"].as_str().unwrap();
            let names = if endpoints == "endpoints" {
                vec![service_port["name"].as_str().unwrap().to_owned()]
            } else {
                ports.clone()
            };
            assert!(names.contains(&port.to_owned()), "{file}: port {port}");
            assert_eq!(e["path"], "/metrics");
            relabelings_are_valid(&e["relabelings"], file);
            // node and instance come from the node's name; the exporter pod's own
            // namespace/pod/container labels must not be left to clash with the
            // workload's that gpupeek puts on GPU series.
            let r = e["relabelings"].as_sequence().unwrap();
            for target in ["node", "instance"] {
                assert!(
                    r.iter().any(|x| x["targetLabel"] == target
                        && strings(&x["sourceLabels"]) == ["__meta_kubernetes_pod_node_name"]),
                    "{file}: {target}"
                );
            }
            let dropped = r
                .iter()
                .find(|x| x["action"] == "labeldrop")
                .and_then(|x| x["regex"].as_str())
                .unwrap_or_else(|| panic!("{file}: no labeldrop"));
            let dropped = regex_alternatives(dropped);
            for label in ["namespace", "pod", "container"] {
                assert!(dropped.contains(&label.to_owned()), "{file}: {label} kept");
            }
        }
    }
}

/// `(a|b|c)` → a, b, c.
fn regex_alternatives(regex: &str) -> Vec<String> {
    regex
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split('|')
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_daemonset_keeps_the_privileges_the_readme_documents() {
    let ds = manifest("daemonset.yaml");
    let spec = get(&ds, "spec.template.spec");
    assert_eq!(spec["hostPID"], true);
    assert_eq!(spec["automountServiceAccountToken"], false);
    for forbidden in ["hostNetwork", "hostIPC"] {
        assert!(
            spec[forbidden].is_null() || spec[forbidden] == false,
            "{forbidden}"
        );
    }
    for name in ["gpupeekd", "serve"] {
        let c = container(name);
        let sc = &c["securityContext"];
        assert_eq!(sc["privileged"], false, "{name}");
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{name}");
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{name}");
        assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"], "{name}");
        assert!(
            sc["capabilities"]["add"].is_null(),
            "{name} adds capabilities"
        );
        assert!(
            c["resources"]["limits"]["memory"].as_str().is_some(),
            "{name}"
        );
        assert!(
            c["resources"]["requests"]["cpu"].as_str().is_some(),
            "{name}"
        );
    }
    // The exporter: not root, the segment read-only, the only one with a port.
    let serve = container("serve");
    assert_eq!(serve["securityContext"]["runAsNonRoot"], true);
    assert_ne!(serve["securityContext"]["runAsUser"], 0);
    let shm = serve["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == "/dev/shm")
        .expect("serve mounts the segment's /dev/shm");
    assert_eq!(shm["readOnly"], true);
    assert!(
        container("gpupeekd")["ports"].is_null(),
        "gpupeekd opens no socket"
    );
    // Probes on the paths serve answers.
    assert_eq!(serve["readinessProbe"]["httpGet"]["path"], "/-/ready");
    assert_eq!(serve["livenessProbe"]["httpGet"]["path"], "/-/healthy");
    // The segment is a memory-backed volume the two share.
    let volumes = spec["volumes"].as_sequence().unwrap();
    let shared = volumes.iter().find(|v| v["name"] == shm["name"]).unwrap();
    assert_eq!(shared["emptyDir"]["medium"], "Memory");
}

/// The volume of the DaemonSet's pod named `name`.
fn volume(name: &str) -> Value {
    let ds = manifest("daemonset.yaml");
    get(&ds, "spec.template.spec.volumes")
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no volume {name}"))
        .clone()
}

#[test]
fn the_pod_views_are_published_where_the_readmes_pod_snippet_mounts_them() {
    let daemon = container("gpupeekd");
    let args = strings(&daemon["args"]);
    let dir = args
        .iter()
        .find_map(|a| a.strip_prefix("--pod-views="))
        .expect("gpupeekd --pod-views");
    let mounts = daemon["volumeMounts"].as_sequence().unwrap();
    let mount = |path: &str| {
        mounts
            .iter()
            .find(|m| m["mountPath"] == path)
            .unwrap_or_else(|| panic!("gpupeekd mounts no {path}"))
            .clone()
    };
    // The views are written; what gpupeekd learns pods from is only read.
    let views = mount(dir);
    assert!(views["readOnly"].is_null() || views["readOnly"] == false);
    assert_eq!(
        volume(views["name"].as_str().unwrap())["hostPath"]["path"],
        dir
    );
    for path in ["/var/lib/kubelet/pod-resources", "/var/log/pods"] {
        let m = mount(path);
        assert_eq!(m["readOnly"], true, "{path}");
        assert_eq!(
            volume(m["name"].as_str().unwrap())["hostPath"]["path"],
            path
        );
    }

    // The README's snippet for a user's pod: the same host directory, the pod's own
    // subdirectory read-only, and GPUPEEK_SHM at the file in it.
    let readme = std::fs::read_to_string(dir_of_readme()).unwrap();
    let section = readme
        .split("## A pod's own view")
        .nth(1)
        .expect("README: a pod's own view");
    let yaml = section
        .split("```yaml\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("README: the pod snippet");
    let pod: Value = serde_yaml::from_str(yaml).unwrap();
    let c = get(&pod, "spec.containers.0");
    let m = get(c, "volumeMounts.0");
    assert_eq!(m["subPathExpr"], "$(POD_UID)");
    assert_eq!(m["readOnly"], true);
    let v = get(&pod, "spec.volumes.0");
    assert_eq!(v["name"], m["name"]);
    assert_eq!(v["hostPath"]["path"], dir);
    let env = c["env"].as_sequence().unwrap();
    let var = |name: &str| env.iter().find(|e| e["name"] == name).unwrap().clone();
    assert_eq!(
        get(&var("POD_UID"), "valueFrom.fieldRef.fieldPath"),
        "metadata.uid"
    );
    assert_eq!(
        var("GPUPEEK_SHM")["value"].as_str().unwrap(),
        format!("{}/gpupeek", m["mountPath"].as_str().unwrap())
    );
}

fn dir_of_readme() -> PathBuf {
    dir().join("README.md")
}

#[test]
fn the_daemonset_commands_take_the_flags_it_gives_them() {
    let b = bins();
    for (name, program, installed) in [
        ("gpupeekd", &b.daemon, "/usr/local/sbin/gpupeekd"),
        ("serve", &b.serve, "/usr/local/bin/gpupeek-serve"),
    ] {
        let c = container(name);
        assert_eq!(strings(&c["command"]), [installed], "{name}");
        let args: Vec<String> = if name == "serve" {
            serve_args()
        } else {
            strings(&c["args"])
        };
        // --help after the flags: each is parsed first, a bad one is an error.
        let mut cmd = Command::new(program);
        cmd.args(&args).arg("--help");
        let out = run_with_watchdog(cmd);
        assert!(out.status.success(), "{name} {args:?}: {}", stderr(&out));
    }
    // The Containerfile installs them where the DaemonSet runs them.
    let containerfile = std::fs::read_to_string(dir().join("Containerfile")).unwrap();
    for path in [
        "/usr/local/sbin/gpupeekd",
        "/usr/local/bin/gpupeek-serve",
        "/usr/local/bin/gpupeek",
    ] {
        assert!(containerfile.contains(path), "Containerfile: {path}");
    }
}

/// The PrometheusRule's spec as a plain rules file, with its tests, in a scratch dir.
fn rules_dir(sandbox: &Sandbox) -> PathBuf {
    let rule = manifest("prometheusrule.yaml");
    let out = sandbox.dir.join("rules");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(
        out.join("gpupeek-k8s-rules.yml"),
        serde_yaml::to_string(&rule["spec"]).unwrap(),
    )
    .unwrap();
    std::fs::copy(
        dir().join("prometheusrule.test.yml"),
        out.join("prometheusrule.test.yml"),
    )
    .unwrap();
    out
}

#[test]
fn the_prometheusrule_passes_promtool_check_and_its_unit_tests() {
    let sandbox = Sandbox::new("k8s-rules");
    let out = rules_dir(&sandbox);
    promtool(&["check", "rules", "gpupeek-k8s-rules.yml"], &out);
    promtool(&["test", "rules", "prometheusrule.test.yml"], &out);
}

#[test]
fn every_rule_is_unit_tested_and_well_formed() {
    let tests = std::fs::read_to_string(dir().join("prometheusrule.test.yml")).unwrap();
    for r in rules() {
        only_keys(
            &r,
            &["alert", "record", "expr", "for", "labels", "annotations"],
            "rule",
        );
        assert!(r["expr"].as_str().is_some(), "{r:?}");
        match (r["alert"].as_str(), r["record"].as_str()) {
            (Some(alert), None) => {
                assert!(
                    tests.contains(&format!("alertname: {alert}\n")),
                    "alert {alert} has no promtool test"
                );
                for key in ["summary", "action"] {
                    assert!(r["annotations"][key].as_str().is_some(), "{alert}: {key}");
                }
                assert!(r["labels"]["severity"].as_str().is_some(), "{alert}");
            }
            (None, Some(record)) => assert!(
                tests.contains(&format!("expr: {record}\n")),
                "recording rule {record} has no promtool test"
            ),
            _ => panic!("a rule is an alert or a record: {r:?}"),
        }
    }
}

#[test]
fn every_metric_a_rule_reads_is_exported_or_prometheus_own() {
    let (sandbox, _daemon) = crate::exporters::everything();
    let (_serve, mut names) = served_names(&sandbox);
    // The MIG rules read what the DaemonSet's serve exports for an H100 split with MIG.
    let (mig, _mig_daemon, _procs) = crate::mig_outputs::started("k8s-rules-mig");
    let (_mig_serve, mig_names) = served_names(&mig);
    names.extend(mig_names);
    // kube-state-metrics' node capacity, for nodes with GPUs but no target.
    names.insert("kube_node_status_capacity".into());
    let text = std::fs::read_to_string(dir().join("prometheusrule.yaml")).unwrap();
    let exprs = rule_exprs(&text);
    assert!(exprs.len() >= 20, "{exprs:?}");
    for expr in &exprs {
        for name in promql_metrics(expr) {
            assert!(
                names.contains(&name),
                "rule {expr:?} reads {name}, which nothing exports"
            );
        }
    }
}

/// Bytes in a Kubernetes quantity such as `16Mi` (the binary suffixes the manifests use).
fn quantity_bytes(q: &str) -> u64 {
    let (digits, unit) = q.split_at(q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len()));
    let scale = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        _ => panic!("quantity {q}: unit {unit}"),
    };
    digits.parse::<u64>().unwrap() * scale
}

/// The segment gpupeekd makes with the DaemonSet's flags is allocated whole in the
/// memory-backed emptyDir mounted at /dev/shm: over its `sizeLimit`, the kubelet would
/// evict the pod.
#[test]
fn the_segment_the_daemonsets_flags_make_fits_its_shm_emptydir() {
    let daemon = container("gpupeekd");
    let mounts = daemon["volumeMounts"].as_sequence().unwrap();
    let shm = mounts
        .iter()
        .find(|m| m["mountPath"] == "/dev/shm")
        .expect("/dev/shm mount");
    let dir = volume(shm["name"].as_str().unwrap());
    assert_eq!(dir["emptyDir"]["medium"], "Memory");
    let limit = quantity_bytes(dir["emptyDir"]["sizeLimit"].as_str().unwrap());
    // Its flags but those the sandbox sets itself and the node directories it has not.
    let args: Vec<String> = strings(&daemon["args"])
        .into_iter()
        .filter(|a| {
            !a.starts_with("--pod-views") && a != "--foreground" && !a.starts_with("--interval")
        })
        .collect();
    let interval = strings(&daemon["args"])
        .iter()
        .find_map(|a| a.strip_prefix("--interval=").map(str::to_owned))
        .expect("--interval=");
    let sandbox = Sandbox::new("k8s-shm");
    sandbox.write_scenario(
        &serde_json::json!({"gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0"}]}),
    );
    let flags: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = sandbox.start_daemon_with(&interval, &flags);
    sandbox.wait_live(&d);
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(sandbox.shm_path()).unwrap();
    let allocated = meta.blocks() * 512;
    assert!(
        allocated >= meta.len(),
        "allocated whole: {allocated} of {}",
        meta.len()
    );
    assert!(
        allocated <= limit,
        "the segment takes {allocated} bytes of the emptyDir's {limit}"
    );
}

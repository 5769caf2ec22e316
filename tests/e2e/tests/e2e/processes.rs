//! Who is using which GPU: process details resolved by the real daemon from the real
//! `/proc` of real child processes, listed as GPU users by the fake NVML; the privacy
//! policy under a real `hidepid` mount; overflow; processes that exit mid-sample.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

use gpupeek_e2e::{root_or_skip, stderr, stdout, wait_for, Sandbox};
use serde_json::{json, Value};

const MIB: u64 = 1 << 20;
const NOBODY: u32 = 65534;

/// A child process, killed when dropped.
pub(crate) struct Proc(Child);

impl Proc {
    pub(crate) fn spawn(cmd: &mut Command) -> Self {
        Proc(cmd.spawn().expect("child starts"))
    }
    pub(crate) fn sleeper() -> Self {
        Self::spawn(Command::new("sleep").arg("600"))
    }
    pub(crate) fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One GPU running `procs` as (pid, MiB, utilisation [sm, mem, enc, dec]).
fn scenario(procs: &[(u32, u64, [u32; 4])]) -> Value {
    let processes: Vec<Value> = procs
        .iter()
        .map(|&(pid, mib, util)| {
            json!({"pid": pid, "used_gpu_memory_bytes": mib * MIB, "utilization_pct": util})
        })
        .collect();
    json!({"gpus": [{
        "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "memory_total_bytes": 80 << 30, "memory_used_bytes": 20 << 30,
        "utilization_gpu_pct": 80, "temperature_c": 50,
        "processes": processes
    }]})
}

fn json_of(out: &std::process::Output) -> Value {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .unwrap()
        .map_or_else(|| uid.to_string(), |u| u.name)
}

/// Waits until the daemon has published a CPU figure for every process (the second
/// sample of each), then returns `gpupeek --json`.
fn json_with_cpu(sb: &Sandbox, daemon: &gpupeek_e2e::Daemon, args: &[&str]) -> Value {
    let mut doc = Value::Null;
    wait_for("CPU figures", daemon, || {
        doc = json_of(&sb.client(args));
        doc["gpus"][0]["processes"]
            .as_array()
            .is_some_and(|ps| ps.iter().all(|p| p["cpu_percent"].is_number()))
    });
    doc
}

#[test]
fn processes_carry_gpustats_keys_and_our_own_from_real_proc() {
    // Its busy loop takes a core for the whole test.
    let _turn = gpupeek_e2e::one_at_a_time();
    let sb = Sandbox::new("procfull");
    let burner = Proc::spawn(Command::new("sh").args(["-c", "while :; do :; done"]));
    let sleeper = Proc::sleeper();
    sb.write_scenario(&scenario(&[
        (burner.pid(), 1000, [87, 20, 0, 3]),
        (sleeper.pid(), 500, [0, 0, 0, 0]),
    ]));
    let daemon = sb.start_daemon("200ms");
    sb.wait_live(&daemon);
    json_with_cpu(&sb, &daemon, &["--json"]);
    // A busy loop shows up as CPU use (polled: on a loaded machine one period may see
    // little of it).
    let mut doc = Value::Null;
    wait_for("the busy loop's CPU use", &daemon, || {
        doc = json_of(&sb.client(&["--json"]));
        doc["gpus"][0]["processes"][0]["cpu_percent"]
            .as_f64()
            .is_some_and(|cpu| cpu > 10.0)
    });
    let me = nix::unistd::getuid().as_raw();
    let procs = doc["gpus"][0]["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 2);
    let (burn, sleep) = (&procs[0], &procs[1]);

    // gpustat's seven keys first, in gpustat's order, then ours (read from the text:
    // a parsed map forgets the order).
    let raw = stdout(&sb.client(&["--json"]));
    let first = &raw[raw.find("\"processes\": [").unwrap()..];
    let first = &first[..first.find('}').unwrap()];
    let keys: Vec<&str> = first
        .lines()
        .filter_map(|l| l.trim().strip_prefix('"')?.split_once("\": "))
        .map(|(key, _)| key)
        .collect();
    assert_eq!(
        &keys[..8],
        [
            "processes",
            "username",
            "command",
            "full_command",
            "gpu_memory_usage",
            "cpu_percent",
            "cpu_memory_usage",
            "pid"
        ],
        "{first}"
    );
    assert_eq!(burn["username"], user_name(me));
    assert_eq!(burn["command"], "sh");
    assert_eq!(
        burn["full_command"],
        json!(["sh", "-c", "while :; do :; done"])
    );
    assert_eq!(burn["gpu_memory_usage"], 1000);
    assert_eq!(burn["pid"], burner.pid());
    assert_eq!(burn["host_pid"], burner.pid());
    assert_eq!(burn["uid"], me);
    assert_eq!(burn["type"], "compute");
    let rss = burn["cpu_memory_usage"].as_u64().unwrap();
    assert!(rss > 0 && rss < 1 << 30, "resident memory of sh: {rss}");
    assert!(burn["running_time"].as_u64().unwrap() < 600);
    assert_eq!(
        (
            burn["sm_utilization"].clone(),
            burn["memory_utilization"].clone()
        ),
        (json!(87), json!(20))
    );
    assert_eq!(burn["decoder_utilization"], 3);
    assert_eq!(burn["gpu_instance_id"], Value::Null, "no MIG");
    assert_eq!(burn["container"], Value::Null, "test runs on the host");

    assert_eq!(sleep["full_command"], json!(["sleep", "600"]));
    assert!(sleep["cpu_percent"].as_f64().unwrap() < 5.0);
    assert_eq!(sleep["sm_utilization"], 0, "inactive: no sample means 0%");

    // The same people, commands and memory in the -f lines.
    let out = sb.client(&["-cupf", "--no-header"]);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].ends_with(&format!(
            "| {0}:sh/{1}(1000M) {0}:sleep/{2}(500M)",
            user_name(me),
            burner.pid(),
            sleeper.pid()
        )),
        "{text}"
    );
    assert!(
        lines[1].starts_with(&format!(" ├─ {:>6} (", burner.pid())),
        "{text}"
    );
    assert!(lines[1].ends_with("): sh -c while :; do :; done"), "{text}");
    assert!(
        lines[2].starts_with(&format!(" └─ {:>6} (", sleeper.pid())),
        "{text}"
    );
    assert!(lines[2].ends_with("): sleep 600"), "{text}");
    let same = sb.client(&["--no-header", "-cup", "--full-process-info"]);
    assert_eq!(stdout(&same), text, "--full-process-info is -f");
}

#[test]
fn long_command_lines_are_cut_and_marked() {
    let sb = Sandbox::new("proclong");
    let mut cmd = Command::new("sleep");
    cmd.arg("600");
    // About 40 KB: more than the 32 KiB of a command line the daemon publishes.
    let zeros: Vec<String> = (0..6000).map(|i| format!("0.{i}")).collect();
    cmd.args(&zeros);
    let long = Proc::spawn(&mut cmd);
    sb.write_scenario(&scenario(&[(long.pid(), 10, [0; 4])]));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    let doc = json_of(&sb.client(&["--json"]));
    let argv: Vec<&str> = doc["gpus"][0]["processes"][0]["full_command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(argv.len() > 4000 && argv.len() < 6000, "{}", argv.len());
    let kept_bytes: usize = argv.iter().map(|a| a.len() + 1).sum();
    assert!(
        kept_bytes <= (32 << 10) + 4 && kept_bytes > 32_000,
        "{kept_bytes}"
    );
    assert_eq!(&argv[..2], ["sleep", "600"]);
    let last = argv.last().unwrap();
    assert!(last.ends_with('…'), "truncation is marked: {last}");
    let kept = &argv[2..argv.len() - 1];
    assert_eq!(kept, &zeros[..kept.len()], "what is kept is exact");
}

#[test]
fn owners_are_the_real_users_and_by_user_sums_them() {
    if !root_or_skip("owners_are_the_real_users_and_by_user_sums_them") {
        return;
    }
    let sb = Sandbox::new("procusers");
    let mine = Proc::sleeper();
    let mine2 = Proc::sleeper();
    let theirs = Proc::spawn(Command::new("sleep").arg("600").uid(NOBODY).gid(NOBODY));
    sb.write_scenario(&json!({"gpus": [
        {"name": "GPU A", "memory_total_bytes": 80 << 30, "processes": [
            {"pid": mine.pid(), "used_gpu_memory_bytes": 100 * MIB, "utilization_pct": [30, 0, 0, 0]},
            {"pid": theirs.pid(), "used_gpu_memory_bytes": 4000 * MIB, "utilization_pct": [60, 0, 0, 0]}
        ]},
        {"name": "GPU B", "memory_total_bytes": 80 << 30, "processes": [
            {"pid": mine2.pid(), "used_gpu_memory_bytes": 200 * MIB, "utilization_pct": [10, 0, 0, 0]},
            {"pid": mine.pid(), "used_gpu_memory_bytes": 300 * MIB}
        ]}
    ]}));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    let doc = json_of(&sb.client(&["--json"]));
    assert_eq!(
        doc["gpus"][0]["processes"][1]["username"],
        user_name(NOBODY)
    );
    assert_eq!(doc["gpus"][0]["processes"][1]["uid"], NOBODY);

    let mut doc = Value::Null;
    wait_for("every process's utilisation", &daemon, || {
        doc = json_of(&sb.client(&["--by-user", "--json"]));
        doc["users"][1]["sm_utilization"] == 40
    });
    let users = doc["users"].as_array().unwrap();
    assert_eq!(users.len(), 2, "{doc}");
    assert_eq!(users[0]["username"], user_name(NOBODY), "most memory first");
    assert_eq!(users[0]["gpus"], json!([0]));
    assert_eq!(users[0]["gpu_memory_usage"], 4000);
    assert_eq!(users[1]["username"], "root");
    assert_eq!(users[1]["gpus"], json!([0, 1]));
    assert_eq!(users[1]["processes"], 3);
    assert_eq!(users[1]["gpu_memory_usage"], 600);
    assert_eq!(users[1]["sm_utilization"], 40);

    let text = stdout(&sb.client(&["--by-user", "--no-header"]));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("USER"), "{text}");
    assert!(lines[1].starts_with(&user_name(NOBODY)), "{text}");
    assert!(lines[2].starts_with("root"), "{text}");
    assert!(lines[2].contains("0,1"), "{text}");
}

/// NVML still listing a process that has exited (gpustat issue #95): the gpustat table
/// and `--json` leave it out, as gpustat does; nvidia-smi's view lists what NVML lists.
#[test]
fn a_process_gone_from_proc_is_left_out_as_gpustat_leaves_it_out() {
    let sb = Sandbox::new("procgone");
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let alive = Proc::sleeper();
    sb.write_scenario(&scenario(&[
        (gone_pid, 64, [5, 0, 0, 0]),
        (alive.pid(), 32, [0; 4]),
    ]));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    let doc = json_of(&sb.client(&["--json"]));
    let procs = doc["gpus"][0]["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 1, "{doc}");
    assert_eq!(procs[0]["command"], "sleep");
    assert_eq!(procs[0]["gpu_memory_usage"], 32);
    let text = stdout(&sb.client(&["-c", "--no-header"]));
    assert!(text.trim_end().ends_with("| sleep(32M)"), "{text}");
    let out = sb.client(&[
        "query",
        "--query-compute-apps=pid,used_memory",
        "--format=csv,noheader",
    ]);
    assert!(
        stdout(&out).contains(&format!("{gone_pid}, 64 MiB")),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        daemon.log().lines().all(|l| !l.contains("ERROR")),
        "{}",
        daemon.log()
    );
}

#[test]
fn more_processes_than_slots_are_counted_not_dropped() {
    let sb = Sandbox::new("procoverflow");
    let alive = Proc::sleeper();
    // Pids that do not exist, beyond the 1024 slots of the table.
    let mut procs: Vec<(u32, u64, [u32; 4])> =
        (0..1100).map(|i| (4_000_000 + i, 1, [0; 4])).collect();
    procs.insert(0, (alive.pid(), 2, [0; 4]));
    sb.write_scenario(&scenario(&procs));
    let daemon = sb.start_daemon("200ms");
    sb.wait_live(&daemon);
    let snap = sb.segment().snapshot().unwrap();
    assert_eq!(snap.processes.len(), 1024);
    assert_eq!(snap.proc_overflow, 77);
    let text = stdout(&sb.client(&["--no-header"]));
    assert!(
        text.trim_end().ends_with(" +77 more"),
        "{}",
        &text[text.len() - 60..]
    );
    let by_user = json_of(&sb.client(&["--by-user", "--json"]));
    assert_eq!(by_user["processes_not_shown"], 77);
    let text = stdout(&sb.client(&["--by-user", "--no-header"]));
    assert!(
        text.ends_with("(77 GPU processes not shown, so not counted)\n"),
        "{text}"
    );
}

#[test]
fn a_process_whose_name_is_cut_inside_a_character_keeps_its_owner() {
    let sb = Sandbox::new("procnonutf8");
    // The kernel keeps 15 bytes of a program's file name as its name (in stat, status
    // and comm): 7 and a half Cyrillic letters here, which is not UTF-8.
    let program = sb.scenario_path().with_file_name("обучение");
    std::fs::copy("/bin/sleep", &program).unwrap();
    let named = Proc::spawn(Command::new(&program).arg("600"));
    sb.write_scenario(&scenario(&[(named.pid(), 10, [0; 4])]));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    let doc = json_with_cpu(&sb, &daemon, &["--json"]);
    let p = &doc["gpus"][0]["processes"][0];
    assert_eq!(p["username"], user_name(nix::unistd::getuid().as_raw()));
    assert_eq!(p["command"], "обучение");
    assert!(p["cpu_memory_usage"].as_u64().unwrap() > 0, "{p}");
}

#[test]
fn hidepid_makes_the_daemon_withhold_and_readers_see_only_their_own() {
    if !root_or_skip("hidepid_makes_the_daemon_withhold_and_readers_see_only_their_own") {
        return;
    }
    let sb = Sandbox::new("prochidepid");
    let roots = Proc::sleeper();
    let nobodys = Proc::spawn(
        Command::new("sleep")
            .args(["600", "1"])
            .uid(NOBODY)
            .gid(NOBODY),
    );
    sb.write_scenario(&scenario(&[
        (roots.pid(), 100, [10, 0, 0, 0]),
        (nobodys.pid(), 200, [20, 0, 0, 0]),
    ]));
    let daemon = sb.start_daemon_in_hidepid("100ms", &[]);
    sb.wait_live(&daemon);
    assert!(
        daemon
            .log()
            .contains("publishing basic process information (/proc hides processes: hidepid)"),
        "{}",
        daemon.log()
    );
    let snap = sb.segment().snapshot().unwrap();
    assert_eq!(snap.proc_policy(), Some(gpupeek_shm::ProcPolicy::Basic));
    assert!(
        snap.text.is_empty(),
        "no command name or line goes to the text pool either"
    );
    for p in &snap.processes {
        assert_eq!(
            p.valid
                & !(gpupeek_shm::layout::proc_valid::GPU_MEMORY
                    | gpupeek_shm::layout::proc_valid::GPU_UTIL),
            0,
            "only pid, memory and utilisation are published"
        );
        assert!(p
            .user
            .iter()
            .chain(&p.command)
            .chain(&p.cmdline)
            .all(|&b| b == 0));
    }

    // nobody, under the same hidepid /proc, sees its own process and nothing of root's.
    let doc = json_of(&sb.client_as(NOBODY, true, &["--json"]));
    let procs = &doc["gpus"][0]["processes"];
    assert_eq!(procs[0]["pid"], roots.pid());
    assert_eq!(procs[0]["username"], Value::Null);
    assert_eq!(procs[0]["full_command"], Value::Null);
    assert_eq!(
        procs[0]["gpu_memory_usage"], 100,
        "NVML shows memory to everyone"
    );
    assert_eq!(procs[1]["username"], user_name(NOBODY));
    assert_eq!(procs[1]["full_command"], json!(["sleep", "600", "1"]));
    assert_eq!(
        procs[1]["cpu_percent"],
        Value::Null,
        "a one-shot reader cannot measure it"
    );
    let text = stdout(&sb.client_as(NOBODY, true, &["-c", "--no-header"]));
    assert!(text.ends_with("| --(100M) sleep(200M)\n"), "{text}");
}

#[test]
fn process_info_flag_chooses_full_basic_or_none() {
    let sb = Sandbox::new("procpolicy");
    let sleeper = Proc::sleeper();
    sb.write_scenario(&scenario(&[(sleeper.pid(), 100, [0; 4])]));
    {
        let daemon = sb.start_daemon_with("100ms", &["--process-info", "none"]);
        sb.wait_live(&daemon);
        let text = stdout(&sb.client(&["--no-header"]));
        assert!(text.ends_with("| (1 hidden)\n"), "{text}");
        let doc = json_of(&sb.client(&["--json"]));
        assert_eq!(doc["gpus"][0]["processes"], json!([]));
    }
    {
        let daemon = sb.start_daemon_with("100ms", &["--process-info", "basic"]);
        wait_for("basic policy", &daemon, || {
            sb.segment().snapshot().is_ok_and(|s| {
                s.proc_policy() == Some(gpupeek_shm::ProcPolicy::Basic) && !s.processes.is_empty()
            })
        });
        // Basic withholds everything /proc would tell; a reader who can see the process
        // in its own /proc (root here, without hidepid) fills it in itself.
        let snap = sb.segment().snapshot().unwrap();
        assert_eq!(
            snap.processes[0].valid & gpupeek_shm::layout::proc_valid::USER,
            0
        );
        let doc = json_of(&sb.client(&["--json"]));
        assert_eq!(doc["gpus"][0]["processes"][0]["command"], "sleep");
    }
    let bad = std::process::Command::new(&gpupeek_e2e::bins().daemon)
        .args(["--process-info", "everything"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("use auto, full, basic or none"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn a_containerised_process_is_recognised_inside_and_outside_its_container() {
    if !root_or_skip("a_containerised_process_is_recognised_inside_and_outside_its_container") {
        return;
    }
    let sb = Sandbox::new("proccontainer");
    // A "container": its own pid and mount namespaces (with its own /proc), in a cgroup
    // named as docker names its containers'.
    let container = Proc::spawn(Command::new("unshare").args([
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "sleep",
        "600",
    ]));
    let children = format!("/proc/{0}/task/{0}/children", container.pid());
    let mut inner = None;
    for _ in 0..500 {
        inner = std::fs::read_to_string(&children)
            .ok()
            .and_then(|c| c.split_whitespace().next()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.starts_with(b"sleep\0"))
            });
        if inner.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let inner = inner.expect("the container's process started");
    let _cgroup = docker_cgroup(inner);
    sb.write_scenario(&scenario(&[(inner, 300, [0; 4])]));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);

    let outside = json_of(&sb.client(&["--json"]));
    let p = &outside["gpus"][0]["processes"][0];
    assert_eq!(p["pid"], inner, "the host sees the host pid");
    assert_eq!(p["host_pid"], inner);
    assert_eq!(
        p["container"],
        json!({"runtime": "docker", "id": DOCKER_ID, "pod_uid": null})
    );

    // Inside the container's namespaces, the same process is pid 1.
    let mut cmd = Command::new("nsenter");
    cmd.args(["--target", &inner.to_string(), "--pid", "--mount", "--"])
        .arg(&gpupeek_e2e::bins().client)
        .args(["--shm", &sb.shm, "--json"]);
    let inside = json_of(&gpupeek_e2e::run_with_watchdog(cmd));
    let p = &inside["gpus"][0]["processes"][0];
    assert_eq!(p["pid"], 1, "the container sees its own pid");
    assert_eq!(p["host_pid"], inner);
    let mut cmd = Command::new("nsenter");
    cmd.args(["--target", &inner.to_string(), "--pid", "--mount", "--"])
        .arg(&gpupeek_e2e::bins().client)
        .args(["--shm", &sb.shm, "-p", "--no-header"]);
    let text = stdout(&gpupeek_e2e::run_with_watchdog(cmd));
    assert!(text.ends_with("/1(300M)\n"), "{text}");
}

/// The id docker's cgroup names ([`docker_cgroup`]).
const DOCKER_ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/// The pod uid and container id of [`pod_cgroup`].
const POD_UID: &str = "5f1c0a2e-7d3b-4e8a-9c61-0b2d4f6a8e10";
const POD_CONTAINER_ID: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

/// A cgroup at a path of `parts` (created as needed) in the first writable hierarchy,
/// holding `pid`; its processes killed and its directories removed, leaf first, on drop.
/// `.0[0]` is the leaf.
pub(crate) struct NamedCgroup(pub(crate) Vec<std::path::PathBuf>);

impl NamedCgroup {
    pub(crate) fn create_with(parts: &[String], pid: u32) -> Self {
        for root in [
            "/sys/fs/cgroup/unified",
            "/sys/fs/cgroup/pids",
            "/sys/fs/cgroup",
        ] {
            let mut dirs = Vec::new();
            let mut dir = std::path::PathBuf::from(root);
            for part in parts {
                dir.push(part);
                dirs.push(dir.clone());
            }
            if std::fs::create_dir_all(&dir).is_ok()
                && std::fs::write(dir.join("cgroup.procs"), pid.to_string()).is_ok()
            {
                dirs.reverse();
                return NamedCgroup(dirs);
            }
            for d in dirs.iter().rev() {
                let _ = std::fs::remove_dir(d);
            }
        }
        panic!("no writable cgroup hierarchy to put a process in");
    }
}

impl Drop for NamedCgroup {
    fn drop(&mut self) {
        let procs = std::fs::read_to_string(self.0[0].join("cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace().filter_map(|p| p.parse().ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        for dir in &self.0 {
            for _ in 0..100 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

/// A cgroup named as docker names its containers'.
fn docker_cgroup(pid: u32) -> NamedCgroup {
    NamedCgroup::create_with(&[format!("docker-{DOCKER_ID}.scope")], pid)
}

/// A cgroup named as the kubelet (systemd driver) and containerd name a pod's container's.
fn pod_cgroup(pid: u32) -> NamedCgroup {
    let pod = format!("kubepods-besteffort-pod{}.slice", POD_UID.replace('-', "_"));
    let parts = [
        "kubepods.slice".to_owned(),
        "kubepods-besteffort.slice".to_owned(),
        pod,
        format!("cri-containerd-{POD_CONTAINER_ID}.scope"),
    ];
    NamedCgroup::create_with(&parts, pid)
}

/// A cgroup named as Slurm's cgroup/v2 plugin names a task of step 0 of job `job`.
fn slurm_cgroup(job: u32, pid: u32) -> NamedCgroup {
    let parts = [
        "system.slice",
        "slurmstepd.scope",
        &format!("job_{job}"),
        "step_0",
        "user",
        "task_0",
    ];
    NamedCgroup::create_with(&parts.map(str::to_owned), pid)
}

#[test]
fn by_container_groups_a_pods_processes_and_the_hosts() {
    if !root_or_skip("by_container_groups_a_pods_processes_and_the_hosts") {
        return;
    }
    let sb = Sandbox::new("bycontainer");
    let (pod_a, pod_b, host) = (Proc::sleeper(), Proc::sleeper(), Proc::sleeper());
    let _cgroup = pod_cgroup(pod_a.pid());
    std::fs::write(_cgroup.0[0].join("cgroup.procs"), pod_b.pid().to_string()).unwrap();
    sb.write_scenario(&scenario(&[
        (pod_a.pid(), 1000, [30, 0, 0, 0]),
        (host.pid(), 300, [5, 0, 0, 0]),
        (pod_b.pid(), 500, [20, 0, 0, 0]),
    ]));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    let doc = json_of(&sb.client(&["--by-container", "--json"]));
    let rows = doc["containers"].as_array().expect("containers");
    assert_eq!(rows.len(), 2, "{doc}");
    assert_eq!(rows[0]["name"], "containerd:fedcba987654");
    assert_eq!(
        rows[0]["container"],
        json!({"runtime": "containerd", "id": POD_CONTAINER_ID, "pod_uid": POD_UID})
    );
    assert_eq!(rows[0]["processes"], 2);
    assert_eq!(rows[0]["gpu_memory_usage"], 1500);
    assert_eq!(rows[0]["sm_utilization"], 50);
    assert_eq!(rows[1]["name"], "host");
    assert_eq!(rows[1]["container"], Value::Null);
    assert_eq!(rows[1]["gpu_memory_usage"], 300);

    let text = stdout(&sb.client(&["--by-container", "--no-header"]));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("CONTAINER  "), "{text}");
    assert!(
        lines[1].starts_with(&format!("containerd:fedcba987654  {}  0", POD_UID)),
        "{text}"
    );
    assert!(lines[2].starts_with("host  "), "{text}");

    let both = sb.client(&["--by-container", "--by-user"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(stderr(&both).contains("choose one"), "{}", stderr(&both));
}

/// `GET /metrics` of a `gpupeek serve` at `url` (`http://HOST:PORT`).
fn scrape(url: &str) -> String {
    let (status, body) = gpupeek_e2e::http("GET", url.strip_prefix("http://").unwrap(), "/metrics");
    assert_eq!(status, 200, "{body}");
    body
}

#[test]
fn serve_names_pods_from_the_kubelets_pod_resources() {
    use gpupeek_kube::api::{
        ContainerDevices, ContainerResources, ListPodResourcesResponse, PodResources,
    };
    use gpupeek_kube::fake::{Answer, FakeKubelet};
    if !root_or_skip("serve_names_pods_from_the_kubelets_pod_resources") {
        return;
    }
    let sb = Sandbox::new("podresources");
    let (in_pod, on_host) = (Proc::sleeper(), Proc::sleeper());
    let _cgroup = pod_cgroup(in_pod.pid());
    let uuid = "GPU-11111111-2222-3333-4444-555555555555";
    sb.write_scenario(&scenario(&[
        (in_pod.pid(), 1000, [30, 0, 0, 0]),
        (on_host.pid(), 300, [5, 0, 0, 0]),
    ]));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    let socket =
        std::env::temp_dir().join(format!("gpupeek-e2e-kubelet-{}.sock", std::process::id()));
    let kubelet = FakeKubelet::start(
        &socket,
        Answer::Pods(ListPodResourcesResponse {
            pod_resources: vec![PodResources {
                name: "train-0".into(),
                namespace: "ml".into(),
                containers: vec![ContainerResources {
                    name: "trainer".into(),
                    devices: vec![ContainerDevices {
                        resource_name: "nvidia.com/gpu".into(),
                        device_ids: vec![uuid.into()],
                    }],
                    dynamic_resources: Vec::new(),
                }],
            }],
        }),
    );
    let client = Command::new(&gpupeek_e2e::bins().client);
    let (_serve, url) = gpupeek_e2e::spawn_serve(
        &sb,
        client,
        &[
            "--per-process".as_ref(),
            "--kubelet.pod-resources-socket".as_ref(),
            socket.as_os_str(),
        ],
    );
    let mut body = String::new();
    assert!(
        (0..200).any(|_| {
            body = scrape(&url);
            let up = body.contains("gpupeek_kubelet_pod_resources_up 1\n")
                && body.contains("gpupeek_process_gpu_memory_bytes{");
            if !up {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            up
        }),
        "{body}"
    );
    assert!(kubelet.calls() >= 1);
    let series = |pid: u32| {
        body.lines()
            .find(|l| {
                l.starts_with("gpupeek_process_gpu_memory_bytes{")
                    && l.contains(&format!("pid=\"{pid}\""))
            })
            .unwrap_or_else(|| panic!("no series of {pid}: {body}"))
            .to_owned()
    };
    let line = series(in_pod.pid());
    assert!(
        line.contains(&format!(
            "container_id=\"containerd://{}\",pod_uid=\"{}\",namespace=\"ml\",\
             pod=\"train-0\",container=\"trainer\"}}",
            POD_CONTAINER_ID, POD_UID
        )),
        "{line}"
    );
    // The pod holds the whole GPU: a host process on it runs on the pod's GPU, and the
    // join (by device) names the pod; its cgroup says it is in no container.
    let line = series(on_host.pid());
    assert!(
        line.contains("container_id=\"\",pod_uid=\"\",namespace=\"ml\""),
        "{line}"
    );
    let temp = body
        .lines()
        .find(|l| l.starts_with("gpupeek_gpu_temperature_celsius{"))
        .unwrap_or_else(|| panic!("{body}"));
    assert!(
        temp.contains(",namespace=\"ml\",pod=\"train-0\",container=\"trainer\"}"),
        "two processes in different cgroups: no common pod_uid or container_id: {temp}"
    );

    // A socket nobody serves: up 0, no pod names, one line on stderr.
    drop(kubelet);
    let client = Command::new(&gpupeek_e2e::bins().client);
    let (_serve, url) = gpupeek_e2e::spawn_serve(
        &sb,
        client,
        &[
            "--per-process".as_ref(),
            "--kubelet.pod-resources-socket".as_ref(),
            socket.as_os_str(),
        ],
    );
    body = scrape(&url);
    assert!(
        body.contains("gpupeek_kubelet_pod_resources_up 0\n"),
        "{body}"
    );
    assert!(!body.contains("train-0"), "{body}");
}

#[test]
fn serve_names_no_pods_when_the_daemon_withholds_processes() {
    use gpupeek_kube::api::{
        ContainerDevices, ContainerResources, ListPodResourcesResponse, PodResources,
    };
    use gpupeek_kube::fake::{Answer, FakeKubelet};
    let sb = Sandbox::new("podprivacy");
    let sleeper = Proc::sleeper();
    sb.write_scenario(&scenario(&[(sleeper.pid(), 1000, [30, 0, 0, 0])]));
    let daemon = sb.start_daemon_with("100ms", &["--process-info", "basic"]);
    sb.wait_live(&daemon);
    let socket = std::env::temp_dir().join(format!(
        "gpupeek-e2e-kubelet-basic-{}.sock",
        std::process::id()
    ));
    let _kubelet = FakeKubelet::start(
        &socket,
        Answer::Pods(ListPodResourcesResponse {
            pod_resources: vec![PodResources {
                name: "secret-job".into(),
                namespace: "ml".into(),
                containers: vec![ContainerResources {
                    name: "trainer".into(),
                    devices: vec![ContainerDevices {
                        resource_name: "nvidia.com/gpu".into(),
                        device_ids: vec!["GPU-11111111-2222-3333-4444-555555555555".into()],
                    }],
                    dynamic_resources: Vec::new(),
                }],
            }],
        }),
    );
    let client = Command::new(&gpupeek_e2e::bins().client);
    let (_serve, url) = gpupeek_e2e::spawn_serve(
        &sb,
        client,
        &[
            "--per-process".as_ref(),
            "--kubelet.pod-resources-socket".as_ref(),
            socket.as_os_str(),
        ],
    );
    let mut body = String::new();
    assert!(
        (0..200).any(|_| {
            body = scrape(&url);
            let ready = body.contains("gpupeek_process_gpu_memory_bytes{");
            if !ready {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            ready
        }),
        "{body}"
    );
    assert!(
        body.contains("gpupeek_kubelet_pod_resources_up 1\n"),
        "{body}"
    );
    assert!(!body.contains("secret-job"), "{body}");
    assert!(
        body.contains("namespace=\"\",pod=\"\",container=\"\"} 1048576000\n"),
        "{body}"
    );
}

#[test]
fn mig_instances_and_process_kinds_are_published() {
    let sb = Sandbox::new("procmig");
    let (a, b) = (Proc::sleeper(), Proc::sleeper());
    sb.write_scenario(&json!({"gpus": [{
        "name": "NVIDIA A100-SXM4-80GB", "memory_total_bytes": 80u64 << 30,
        "processes": [
            {"pid": a.pid(), "used_gpu_memory_bytes": 10 * MIB, "gpu_instance_id": 1,
             "compute_instance_id": 0, "type": "both"},
            {"pid": b.pid(), "used_gpu_memory_bytes": 20 * MIB, "type": "graphics"}
        ]
    }]}));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    let doc = json_of(&sb.client(&["--json"]));
    let procs = &doc["gpus"][0]["processes"];
    assert_eq!(procs[0]["type"], "both");
    assert_eq!(procs[0]["gpu_instance_id"], 1);
    assert_eq!(procs[0]["compute_instance_id"], 0);
    assert_eq!(procs[1]["type"], "graphics");
    assert_eq!(procs[1]["gpu_instance_id"], Value::Null);
    assert_eq!(procs[1]["gpu_memory_usage"], 20);
}

#[test]
fn per_process_utilisation_follows_the_process_without_lag() {
    let sb = Sandbox::new("procutil");
    let busy = Proc::sleeper();
    sb.write_scenario(&scenario(&[(busy.pid(), 100, [80, 30, 0, 0])]));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    let sm =
        || json_of(&sb.client(&["--json"]))["gpus"][0]["processes"][0]["sm_utilization"].clone();
    wait_for("80% SM", &daemon, || sm() == 80);
    // The process goes idle: the driver stops sampling it but keeps its old samples in
    // its buffer. Only a daemon that asks for samples newer than those it has seen shows
    // 0% now rather than the old 80% for as long as the buffer keeps them.
    sb.write_scenario(&scenario(&[(busy.pid(), 100, [0; 4])]));
    wait_for("0% SM", &daemon, || sm() == 0);
    let generation = sb.segment().generation();
    sb.wait_generation(generation + 5, &daemon);
    assert_eq!(sm(), 0, "stays 0 while the old samples are still buffered");
    sb.write_scenario(&scenario(&[(busy.pid(), 100, [40, 10, 0, 0])]));
    wait_for("40% SM", &daemon, || sm() == 40);
}

#[test]
fn a_slurm_jobs_processes_are_named_by_their_job_in_json_metrics_and_fleet() {
    if !root_or_skip("a_slurm_jobs_processes_are_named_by_their_job_in_json_metrics_and_fleet") {
        return;
    }
    let sb = Sandbox::new("slurmjob");
    let (rank0, rank1, other) = (Proc::sleeper(), Proc::sleeper(), Proc::sleeper());
    let cgroup = slurm_cgroup(4242, rank0.pid());
    std::fs::write(cgroup.0[0].join("cgroup.procs"), rank1.pid().to_string()).unwrap();
    sb.write_scenario(&scenario(&[
        (rank0.pid(), 2000, [60, 0, 0, 0]),
        (rank1.pid(), 1000, [30, 0, 0, 0]),
        (other.pid(), 300, [5, 0, 0, 0]),
    ]));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);

    let doc = json_of(&sb.client(&["--json"]));
    let procs = doc["gpus"][0]["processes"].as_array().unwrap();
    let job = json!({"runtime": "slurm", "id": "4242", "pod_uid": null});
    for rank in [&rank0, &rank1] {
        let p = procs
            .iter()
            .find(|p| p["pid"] == rank.pid())
            .expect("rank listed");
        assert_eq!(p["container"], job, "{doc}");
    }
    let p = procs.iter().find(|p| p["pid"] == other.pid()).unwrap();
    assert_eq!(p["container"], Value::Null);

    let rows = json_of(&sb.client(&["--by-container", "--json"]));
    assert_eq!(rows["containers"][0]["name"], "slurm:4242", "{rows}");
    assert_eq!(rows["containers"][0]["gpu_memory_usage"], 3000);

    let metrics = stdout(&sb.client(&["metrics", "--per-process", "--pod-labels"]));
    let line = format!("pid=\"{}\"", rank0.pid());
    assert!(
        metrics
            .lines()
            .any(|l| l.contains(&line) && l.contains("container_id=\"slurm://4242\"")),
        "{metrics}"
    );

    // A serve and `gpupeek fleet --group-by job`: the job is one row, whatever its ranks run.
    let serve = Command::new(&gpupeek_e2e::bins().client);
    let (_serve, url) = gpupeek_e2e::spawn_serve(&sb, serve, &[]);
    let mut fleet = Command::new(&gpupeek_e2e::bins().client);
    fleet.args(["fleet", "--host", &url, "--group-by", "job", "--json"]);
    let doc = json_of(&gpupeek_e2e::run_with_watchdog(fleet));
    let groups = doc["groups"].as_array().expect("groups");
    let names: Vec<&str> = groups.iter().filter_map(|g| g["name"].as_str()).collect();
    assert_eq!(names[0], "slurm:4242", "{doc}");
    assert_eq!(groups[0]["processes"], 2);
    assert_eq!(groups[0]["memory_mib"], 3000);
}

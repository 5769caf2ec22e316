//! `scripts/demo`, the first command README.md gives a newcomer: without a driver it must
//! say it is a demo, show the fake GPUs in every view it runs, follow a change, and leave
//! nothing behind (segment, worker process). `scripts/demo-fleet`, the fleet on one
//! machine, the same.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use gpupeek_e2e::{bins, repo, run_with_limit, stderr, stdout, tool};

#[test]
fn the_demo_says_it_is_one_shows_every_view_and_cleans_up() {
    let profile_dir = bins().daemon.parent().unwrap();
    let mut cmd = Command::new(repo().join("scripts/demo"));
    cmd.env("GPUPEEK_DEMO", "1")
        .env("GPUPEEK_DEMO_BIN", profile_dir)
        .env_remove("FAKE_NVML_SCENARIO");
    let run = run_with_limit(cmd, Duration::from_secs(60));
    let out = stdout(&run);
    assert!(
        run.status.success(),
        "demo failed:\n{out}\n{}",
        stderr(&run)
    );

    assert!(
        out.starts_with("== DEMO: no NVIDIA driver here."),
        "the demo must say it is one first:\n{out}"
    );
    for view in ["-a", "-cupf", "--by-user", "--json --id 0"] {
        assert!(
            out.contains(&format!("\n$ gpupeek {view}\n")),
            "no `gpupeek {view}` in:\n{out}"
        );
    }
    assert!(out.contains("[1] NVIDIA H100 80GB HBM3"), "{out}");
    // The worker the scenario names is a real process, resolved through /proc.
    let at = out.find(":sleep/").expect("the worker in -cup's line");
    let pid: String = out[at + ":sleep/".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    // The scenario change: GPU 1 becomes busy in the last view.
    let last = &out[out.rfind("\n$ gpupeek \n").expect("a last plain view")..];
    assert!(
        last.lines()
            .any(|l| l.starts_with("[1]") && l.contains(" 88 %")),
        "GPU 1 busy at the end:\n{last}"
    );
    assert!(out.contains("gpupeekd log:"), "{out}");

    assert!(
        !Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() != "sleep"),
        "the demo's worker {pid} outlived it"
    );
    let segment = out
        .lines()
        .find_map(|l| l.split("segment '").nth(1))
        .and_then(|rest| rest.split('\'').next())
        .expect("the daemon log names its segment");
    assert!(
        !Path::new("/dev/shm").join(segment).exists(),
        "{segment} left behind"
    );
}

/// `scripts/demo-fleet HOSTS`: says it is a demo, shows every simulated host and the one
/// that is down, grouped too, at 3 and at 256 hosts, and through Prometheus and the fake
/// Kubernetes API server at 3; leaves no serve, Prometheus or segment behind; a bad
/// argument is one line, status 2.
#[test]
fn the_fleet_demo_shows_every_host_and_the_one_that_is_down_and_cleans_up() {
    let profile_dir = bins().daemon.parent().unwrap();
    // Each run's segment, named here so that it can be looked for afterwards (another
    // demo running beside this test has one of its own).
    let runs = std::cell::Cell::new(0);
    let demo = |args: &[&str]| {
        runs.set(runs.get() + 1);
        let shm = format!(
            "gpupeek-demo-fleet-e2e-{}-{}",
            std::process::id(),
            runs.get()
        );
        let mut cmd = Command::new(repo().join("scripts/demo-fleet"));
        cmd.args(args)
            .env("GPUPEEK_DEMO_BIN", profile_dir)
            .env("GPUPEEK_DEMO_SHM", &shm)
            .env_remove("FAKE_NVML_SCENARIO");
        let run = run_with_limit(cmd, Duration::from_secs(120));
        assert!(
            !Path::new("/dev/shm").join(&shm).exists(),
            "the demo left its segment {shm} in /dev/shm"
        );
        run
    };
    for (hosts, summary) in [
        (
            "3",
            "4 hosts (1 not read), 6 GPUs: 3 free, 0 idle-allocated",
        ),
        (
            "256",
            "257 hosts (1 not read), 512 GPUs: 256 free, 0 idle-allocated",
        ),
    ] {
        let run = demo(&[hosts]);
        let out = stdout(&run);
        assert!(run.status.success(), "{out}\n{}", stderr(&run));
        assert!(out.starts_with("== DEMO: gpupeek fleet over"), "{out}");
        assert_eq!(
            out.matches(summary).count(),
            2,
            "{summary} twice in:\n{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.starts_with("127.0.0.1:1 ") && l.contains("refused")),
            "{out}"
        );
        assert!(
            out.contains(&format!("\nroot  {hosts:>5}  {hosts:>5}  {hosts:>5}")),
            "{out}"
        );
        // The serves the hostfile named are gone, and so is the segment.
        for line in out.lines().filter(|l| l.starts_with("  127.0.0.1:")) {
            let addr = line.trim();
            assert!(
                std::net::TcpStream::connect(addr).is_err(),
                "{addr} still served after the demo"
            );
        }
    }
    // Through a Prometheus that scrapes them: the same summary, the down host's scrape
    // error, and the Prometheus gone after the demo.
    if tool("prometheus", "prometheus").is_some() {
        let run = demo(&["3", "--prometheus"]);
        let out = stdout(&run);
        assert!(run.status.success(), "{out}\n{}", stderr(&run));
        let through = out
            .split("$ gpupeek fleet --prometheus ")
            .nth(1)
            .unwrap_or_else(|| panic!("no table through Prometheus in:\n{out}"));
        let (url, table) = through.split_once('\n').unwrap();
        assert!(
            table.starts_with("4 hosts (1 not read), 6 GPUs: 3 free, 0 idle-allocated\n"),
            "{out}"
        );
        assert!(
            table
                .lines()
                .any(|l| l.starts_with("127.0.0.1:1 ") && l.contains("connection refused")),
            "{out}"
        );
        let web = url.trim().trim_start_matches("http://");
        assert!(
            std::net::TcpStream::connect(web).is_err(),
            "the demo's Prometheus at {web} still runs"
        );
    }
    // Through the fake Kubernetes API server: each host named by its node, the one that
    // is down and the pod that is not ready shown with their faults.
    let run = demo(&["3", "--kubernetes"]);
    let out = stdout(&run);
    assert!(run.status.success(), "{out}\n{}", stderr(&run));
    let table = out
        .split("$ gpupeek fleet --kubernetes ")
        .nth(1)
        .unwrap_or_else(|| panic!("no table through Kubernetes in:\n{out}"));
    let rows: Vec<&str> = table
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(
        rows[0], "5 hosts (2 not read), 6 GPUs: 3 free, 0 idle-allocated",
        "{out}"
    );
    let hosts: Vec<&str> = rows[2..]
        .iter()
        .filter_map(|r| {
            r.split_whitespace()
                .next()
                .filter(|h| h.starts_with("demo-"))
        })
        .collect();
    assert_eq!(
        hosts,
        [
            "demo-node-1",
            "demo-node-2",
            "demo-node-3",
            "demo-node-down",
            "demo-node-starting"
        ],
        "{out}"
    );
    assert!(
        rows.iter()
            .any(|r| r.starts_with("demo-node-down ") && r.contains("refused")),
        "{out}"
    );
    assert!(
        rows.iter()
            .any(|r| r.starts_with("demo-node-starting ") && r.contains("not_ready")),
        "{out}"
    );
    let run = demo(&["0"]);
    assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
    assert_eq!(stderr(&run).lines().count(), 1, "{}", stderr(&run));
}

//! gpupeek-top in a real terminal: tmux at 80×24 and 200×60 on the fake NVML, driven by
//! keys as a person would (sort, filter, select, detail, help, GPU filter, resize,
//! signals), the screen read back with capture-pane, and what happened to the processes
//! and to the terminal checked.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpupeek_e2e::{
    bins, root_or_skip, run_with_watchdog, stderr, stdout, top_bin, Daemon, Sandbox, Tmux, WATCHDOG,
};
use serde_json::{json, Value};

const GIB: u64 = 1 << 30;

fn gpu(n: u32, util: u32, processes: Vec<Value>) -> Value {
    json!({
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": format!("GPU-{n:08}-2222-3333-4444-555555555555"),
        "pci_bus_id": format!("00000000:{:02x}:00.0", 0x18 + n),
        "memory_total_bytes": 80 * GIB, "memory_used_bytes": 20 * GIB,
        "memory_free_bytes": 60 * GIB,
        "utilization_gpu_pct": util, "utilization_memory_pct": 30, "temperature_c": 41 + n,
        "power_usage_mw": 250_000, "power_limit_mw": 700_000, "fan_speed_pct": 35,
        "clocks_mhz": {"graphics": 1980, "sm": 1980, "memory": 2619},
        "max_clocks_mhz": {"graphics": 1980, "sm": 1980, "memory": 2619},
        "pstate": 0, "clock_event_reasons": 0,
        "processes": processes,
    })
}

fn proc(pid: u32, gib: u64) -> Value {
    json!({"pid": pid, "used_gpu_memory_bytes": gib * GIB, "type": "compute",
           "utilization_pct": [40, 10, 0, 0]})
}

/// A `sleep` standing in for a GPU job, as `uid` when given; killed when dropped.
struct Job(Child);

impl Job {
    fn start(uid: Option<u32>) -> Job {
        let mut cmd = match uid {
            Some(uid) => {
                let mut c = Command::new("setpriv");
                let id = uid.to_string();
                c.args([
                    "--reuid",
                    &id,
                    "--regid",
                    &id,
                    "--clear-groups",
                    "sleep",
                    "300",
                ]);
                c
            }
            None => {
                let mut c = Command::new("sleep");
                c.arg("300");
                c
            }
        };
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("sleep starts");
        Job(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn exited(&mut self) -> bool {
        self.0.try_wait().unwrap().is_some()
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `gpupeek top` (which executes gpupeek-top) on `sb`'s segment in a detached tmux
/// session `w` of `x`×`y`, run through `prefix` (e.g. setpriv); the pane stays after it
/// exits, to read how it ended.
fn start_top(sb: &Sandbox, x: u16, y: u16, prefix: &str) -> Option<Tmux> {
    // A server of its own each time: one being killed by a dropped Tmux must not
    // take the next session with it.
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    top_bin(); // built next to gpupeek, where `gpupeek top` looks first
    let command = format!("{prefix} {} top --shm {}", bins().client.display(), sb.shm);
    Tmux::start(format!("{}-{n}", sb.shm), x, y, &command)
}

fn screen(t: &Tmux) -> String {
    t.run(&["capture-pane", "-p", "-t", "w"])
}

fn keys(t: &Tmux, keys: &[&str]) {
    for k in keys {
        t.run(&["send-keys", "-t", "w", k]);
    }
}

/// Types `text` literally.
fn type_text(t: &Tmux, text: &str) {
    t.run(&["send-keys", "-t", "w", "-l", text]);
}

/// `#{pane_dead} #{alternate_on} #{mouse_any_flag}` of the pane.
fn pane(t: &Tmux) -> String {
    t.run(&[
        "list-panes",
        "-t",
        "w",
        "-F",
        "#{pane_dead} #{alternate_on} #{mouse_any_flag}",
    ])
    .trim()
    .to_owned()
}

/// Waits for gpupeek-top to end, with the terminal back out of the alternate screen
/// and the mouse released.
fn ended_restored(t: &Tmux, how: &str) {
    let deadline = Instant::now() + WATCHDOG;
    while pane(t) != "1 0 0" {
        assert!(
            Instant::now() < deadline,
            "gpupeek-top did not end restored on {how}: pane {}; screen:\n{}",
            pane(t),
            screen(t)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pid of the gpupeek-top reading segment `shm`.
fn top_pid(shm: &str) -> u32 {
    let deadline = Instant::now() + WATCHDOG;
    loop {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if comm.trim() == "gpupeek-top" && String::from_utf8_lossy(&cmdline).contains(shm) {
                return pid;
            }
        }
        assert!(Instant::now() < deadline, "no gpupeek-top process");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn live(tag: &str, scenario: &Value) -> (Sandbox, Daemon) {
    let sb = Sandbox::new(tag);
    sb.write_scenario(scenario);
    let daemon = sb.start_daemon("200ms");
    sb.wait_live(&daemon);
    (sb, daemon)
}

/// The screen's lines that show process `pid`.
fn rows_with(s: &str, pid: u32) -> usize {
    let needle = format!(" {pid} ");
    s.lines()
        .filter(|l| format!(" {l} ").contains(&needle))
        .count()
}

/// The first process row (after the table header) of the screen.
fn first_row(s: &str) -> &str {
    let mut lines = s.lines().skip_while(|l| !l.contains("COMMAND"));
    lines.next();
    lines.next().unwrap_or("")
}

#[test]
fn at_80x24_and_200x60_keys_sort_filter_select_and_show_help_detail_and_gpus() {
    let (a, b, c) = (Job::start(None), Job::start(None), Job::start(None));
    let scenario = json!({"driver_version": "550.54.15", "cuda_driver_version": 12040, "gpus": [
        gpu(0, 45, vec![proc(a.pid(), 3), proc(b.pid(), 1)]),
        gpu(1, 90, vec![proc(c.pid(), 5)]),
    ]});
    let (sb, _daemon) = live("top-keys", &scenario);
    let Some(t) = start_top(&sb, 80, 24, "") else {
        return;
    };
    let s = t.until("the three processes", |s| {
        [a.pid(), b.pid(), c.pid()]
            .iter()
            .all(|&p| rows_with(s, p) == 1)
    });
    let lines: Vec<&str> = s.lines().collect();
    assert!(lines.len() <= 24, "{s}");
    for l in &lines {
        assert!(l.chars().count() <= 80, "wider than the terminal: {l:?}");
    }
    assert!(
        lines[0].starts_with("gpupeek top") && lines[0].ends_with("? help"),
        "{s}"
    );
    for what in [
        "NVIDIA H100 80GB HBM3",
        "41°C",
        "UTIL",
        "LOAD",
        "PID",
        "COMMAND",
        "sleep 300",
        "q quit",
    ] {
        assert!(s.contains(what), "{what:?} not on the screen:\n{s}");
    }
    // Sort by the next column (GPU memory, largest first), then reversed.
    keys(&t, &[">"]);
    t.until("the GPU-MEM sort", |s| s.contains("GPU-MEM▼"));
    t.until("the largest first", |s| {
        rows_with(first_row(s), c.pid()) == 1
    });
    keys(&t, &["r"]);
    let s = t.until("the reversed sort", |s| s.contains("GPU-MEM▲"));
    assert!(!s.contains("GPU-MEM▼"));
    t.until("the smallest first", |s| {
        rows_with(first_row(s), b.pid()) == 1
    });
    // Select the second row (a, 3 GiB) and open its detail.
    keys(&t, &["Home", "Down", "Enter"]);
    t.until("the detail of the second row", |s| {
        s.contains(&format!("pid {}", a.pid()))
            && s.contains("command line:")
            && s.contains("sleep 300")
    });
    keys(&t, &["Escape"]);
    t.until("the detail closed", |s| !s.contains("command line:"));
    // Incremental filter by pid, then cleared.
    keys(&t, &["/"]);
    type_text(&t, &c.pid().to_string());
    t.until("only the filtered process", |s| {
        rows_with(s, c.pid()) == 1 && rows_with(s, a.pid()) == 0 && rows_with(s, b.pid()) == 0
    });
    keys(&t, &["Enter"]);
    t.until("the filter kept", |s| {
        s.contains(&format!("filter:{}", c.pid()))
    });
    keys(&t, &["/", "Escape"]);
    t.until("the filter cleared", |s| {
        rows_with(s, a.pid()) == 1 && rows_with(s, b.pid()) == 1
    });
    // Only GPU 0, then GPU 1, then all again.
    keys(&t, &["g"]);
    t.until("GPU 0 only", |s| {
        s.contains("GPU 0 |") && rows_with(s, c.pid()) == 0
    });
    keys(&t, &["g"]);
    t.until("GPU 1 only", |s| {
        s.contains("GPU 1 |") && rows_with(s, a.pid()) == 0
    });
    keys(&t, &["g"]);
    t.until("every GPU", |s| {
        rows_with(s, a.pid()) == 1 && rows_with(s, c.pid()) == 1
    });
    // The help names the keys.
    keys(&t, &["?"]);
    t.until("the help", |s| {
        s.contains("K F9") && s.contains("only my processes")
    });
    keys(&t, &["x"]);
    t.until("the help closed", |s| !s.contains("only my processes"));
    // Resizes: every frame takes the new width, right to the last column.
    for (x, y) in [(200u16, 60u16), (80, 24), (100, 30)] {
        t.run(&[
            "resize-window",
            "-t",
            "w",
            "-x",
            &x.to_string(),
            "-y",
            &y.to_string(),
        ]);
        let s = t.until(&format!("a frame at {x}x{y}"), |s| {
            s.lines()
                .next()
                .is_some_and(|l| l.ends_with("? help") && l.chars().count() == usize::from(x))
        });
        if x == 200 {
            assert!(s.contains("HOST-MEM") && s.contains("fan  35%"), "{s}");
        }
    }
    keys(&t, &["q"]);
    ended_restored(&t, "q");
}

#[test]
fn signals_a_process_of_its_own_user_and_refuses_another_users() {
    if !root_or_skip("signals_a_process_of_its_own_user_and_refuses_another_users") {
        return;
    }
    const NOBODY: u32 = 65534;
    let mut mine = Job::start(Some(NOBODY));
    let mut theirs = Job::start(None);
    let scenario = json!({"gpus": [gpu(0, 45, vec![proc(mine.pid(), 2), proc(theirs.pid(), 4)])]});
    let (sb, _daemon) = live("top-signal", &scenario);
    let prefix = format!("setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups");
    let Some(t) = start_top(&sb, 80, 24, &prefix) else {
        return;
    };
    t.until("both processes", |s| {
        rows_with(s, mine.pid()) == 1 && rows_with(s, theirs.pid()) == 1
    });
    // u: only this user's processes.
    keys(&t, &["u"]);
    t.until("only mine", |s| {
        rows_with(s, theirs.pid()) == 0 && rows_with(s, mine.pid()) == 1
    });
    keys(&t, &["u"]);
    // Another user's process: refused before any dialog, in words.
    keys(&t, &["/"]);
    type_text(&t, &theirs.pid().to_string());
    keys(&t, &["Enter"]);
    t.until("their process alone", |s| rows_with(s, mine.pid()) == 0);
    keys(&t, &["K"]);
    t.until("the refusal", |s| {
        s.contains(&format!(
            "cannot signal pid {}: not permitted",
            theirs.pid()
        ))
    });
    assert!(!theirs.exited(), "another user's process was signalled");
    // Our own: a confirmation, then SIGKILL, and it dies.
    // Escape on its own: sent with the next key, a terminal reads ESC / as Alt-/.
    keys(&t, &["/", "Escape"]);
    t.until("the filter cleared", |s| {
        rows_with(s, mine.pid()) == 1 && rows_with(s, theirs.pid()) == 1
    });
    keys(&t, &["/"]);
    type_text(&t, &mine.pid().to_string());
    keys(&t, &["Enter"]);
    t.until("my process alone", |s| rows_with(s, theirs.pid()) == 0);
    keys(&t, &["K"]);
    t.until("the confirmation", |s| {
        s.contains(&format!("Send a signal to pid {}", mine.pid()))
    });
    assert!(!mine.exited(), "signalled before the confirmation");
    keys(&t, &["k"]);
    t.until("the signal said", |s| {
        s.contains(&format!("sent SIGKILL to pid {}", mine.pid()))
    });
    let deadline = Instant::now() + WATCHDOG;
    while !mine.exited() {
        assert!(Instant::now() < deadline, "the process did not die");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!theirs.exited());
    // SIGTERM ends it with the terminal restored.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(top_pid(&sb.shm) as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    ended_restored(&t, "SIGTERM");
}

#[test]
fn waits_for_a_missing_daemon_shows_a_lost_gpu_and_a_stale_daemon_and_never_exits() {
    let sb = Sandbox::new("top-wait");
    let Some(t) = start_top(&sb, 80, 24, "") else {
        return;
    };
    t.until("the missing daemon said", |s| {
        s.contains("is gpupeekd running?") && s.contains("waiting")
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(pane(&t), "0 1 1", "gpupeek-top must wait for the daemon");
    let mut scenario = json!({"gpus": [gpu(0, 45, vec![]), gpu(1, 60, vec![])]});
    sb.write_scenario(&scenario);
    let daemon = sb.start_daemon("200ms");
    t.until("the daemon's GPUs", |s| {
        s.contains(" 1 NVIDIA H100") && !s.contains("waiting")
    });
    // History graphs follow the ring; a lost GPU is said, with no bar and no graph.
    scenario["gpus"][1]["errors"] = json!({"*": "GPU_IS_LOST"});
    sb.write_scenario(&scenario);
    let s = t.until("the lost GPU", |s| s.contains("GPU LOST"));
    let lost = s.lines().find(|l| l.contains("GPU LOST")).unwrap();
    assert!(!lost.contains('█'), "a lost GPU drawn with a bar: {lost}");
    // A daemon that dies leaves a stale segment: said, and still waited on.
    daemon.signal(nix::sys::signal::Signal::SIGKILL);
    t.until("the stale daemon", |s| {
        s.contains("is not responding") && s.contains("last update)")
    });
    assert_eq!(pane(&t), "0 1 1");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(top_pid(&sb.shm) as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    ended_restored(&t, "SIGHUP");
}

/// Context switches of every thread of `pid`.
fn switches(pid: u32) -> u64 {
    let mut n = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        n += status
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    n
}

#[test]
fn sleeps_between_the_daemons_updates() {
    let sb = Sandbox::new("top-idle");
    sb.write_scenario(&json!({"gpus": [gpu(0, 45, vec![])]}));
    let daemon = sb.start_daemon("1s");
    sb.wait_live(&daemon);
    let Some(t) = start_top(&sb, 80, 24, "") else {
        return;
    };
    t.until("the first frame", |s| s.contains("NVIDIA H100"));
    let pid = top_pid(&sb.shm);
    std::thread::sleep(Duration::from_secs(1));
    let before = switches(pid);
    std::thread::sleep(Duration::from_secs(5));
    let woke = switches(pid) - before;
    // About five publishes, each waking the reader thread and the drawing loop (and a
    // write to the terminal); a polling loop would wake hundreds of times.
    assert!(
        woke <= 60,
        "gpupeek-top woke {woke} times in 5 s at a 1 s daemon period"
    );
    assert!(
        woke >= 3,
        "gpupeek-top did not follow the daemon ({woke} wake-ups)"
    );
    keys(&t, &["C-c"]);
    ended_restored(&t, "Ctrl-C");
}

/// Whether the screen's escape sequences set a foreground or background colour (39 and
/// 49, the terminal's default colours, are no colour).
fn coloured(t: &Tmux) -> bool {
    let s = t.run(&["capture-pane", "-e", "-p", "-t", "w"]);
    s.split('\x1b').skip(1).any(|seq| {
        let Some(params) = seq.strip_prefix('[').and_then(|p| p.split_once('m')) else {
            return false;
        };
        params.0.split(';').any(|n| {
            n.parse::<u32>()
                .is_ok_and(|n| (30..=48).contains(&n) && n != 39 || (90..=107).contains(&n))
        })
    })
}

#[test]
fn no_color_and_the_flag_draw_without_colour() {
    let (sb, _daemon) = live("top-color", &json!({"gpus": [gpu(0, 90, vec![])]}));
    for (prefix, colours) in [
        ("", true),
        ("env NO_COLOR=1", false),
        ("env NO_COLOR=", true),
    ] {
        let Some(t) = start_top(&sb, 80, 24, prefix) else {
            return;
        };
        t.until("the first frame", |s| s.contains("NVIDIA H100"));
        assert_eq!(coloured(&t), colours, "{prefix:?}");
        keys(&t, &["q"]);
        ended_restored(&t, "q");
    }
    let Some(t) = start_top(&sb, 80, 24, "") else {
        return;
    };
    t.run(&[
        "respawn-pane",
        "-k",
        "-t",
        "w",
        &format!("{} --shm {} --no-color", top_bin().display(), sb.shm),
    ]);
    t.until("the first frame", |s| s.contains("NVIDIA H100"));
    assert!(!coloured(&t), "--no-color");
}

#[test]
fn the_one_shot_client_links_none_of_the_terminal_ui() {
    // Panic locations name every crate a binary links code from.
    let has = |bin: &std::path::Path, what: &str| {
        let bytes = std::fs::read(bin).unwrap();
        bytes.windows(what.len()).any(|w| w == what.as_bytes())
    };
    assert!(has(top_bin(), "ratatui"), "the check finds nothing at all");
    for tui in ["ratatui", "crossterm"] {
        assert!(!has(&bins().client, tui), "gpupeek links {tui}");
    }
}

#[test]
fn gpupeek_top_checks_its_flags_then_runs_gpupeek_top_or_says_it_is_missing() {
    let sandbox = Sandbox::new("top-missing");
    let alone = sandbox.dir.join("alone");
    let path = sandbox.dir.join("path");
    std::fs::create_dir_all(&alone).unwrap();
    std::fs::create_dir_all(&path).unwrap();
    let gpupeek = alone.join("gpupeek");
    std::fs::copy(&bins().client, &gpupeek).unwrap();
    let run = |args: &[&str]| {
        let mut cmd = Command::new(&gpupeek);
        cmd.arg("top")
            .args(args)
            .env("PATH", &path)
            .stdin(Stdio::null());
        run_with_watchdog(cmd)
    };

    let out = run(&["--shm", &sandbox.shm]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(11), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("gpupeek: top needs gpupeek-top") && err.contains("alone"),
        "{err}"
    );
    // Its flags are gpupeek's table: help and refusals come before the program is looked for.
    let out = run(&["--help"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("Usage: gpupeek top"),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("--no-color"), "{}", stdout(&out));
    assert_eq!(run(&["--bogus"]).status.code(), Some(2));

    // On PATH: it runs, and says it needs a terminal (stdin is not one here).
    std::os::unix::fs::symlink(top_bin(), path.join("gpupeek-top")).unwrap();
    let out = run(&["--shm", &sandbox.shm]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("needs a terminal"),
        "{}",
        stderr(&out)
    );

    // gpupeek-top parses the same table.
    let direct = |args: &[&str]| {
        let mut cmd = Command::new(top_bin());
        cmd.args(args);
        run_with_watchdog(cmd)
    };
    let out = direct(&["-V"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("gpupeek-top "), "{}", stdout(&out));
    let out = direct(&["--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

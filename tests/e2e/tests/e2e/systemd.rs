//! gpupeekd under a service manager: the sd_notify protocol, checked on a notification
//! socket the test owns (a path, and an abstract `@name`).

use std::ffi::OsStr;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use gpupeek_e2e::{Daemon, Sandbox, WATCHDOG};
use gpupeek_shm::Liveness;
use nix::sys::signal::Signal;
use serde_json::json;

/// One GPU; NVML initialisation takes 300 ms, so a READY sent before the first publish
/// would be seen while the segment still says "starting".
fn slow_start_scenario() -> serde_json::Value {
    json!({
        "latency_us_by_function": {"nvmlInit_v2": 300000, "nvmlInitWithFlags": 300000},
        "gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "temperature_c": 40}]
    })
}

/// The test's end of the notification socket.
struct Manager {
    socket: UnixDatagram,
}

impl Manager {
    fn bind(path: &std::path::Path) -> Self {
        let socket = UnixDatagram::bind(path).unwrap();
        socket.set_read_timeout(Some(WATCHDOG)).unwrap();
        Manager { socket }
    }

    fn bind_abstract(name: &str) -> Self {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name).unwrap();
        let socket = UnixDatagram::bind_addr(&addr).unwrap();
        socket.set_read_timeout(Some(WATCHDOG)).unwrap();
        Manager { socket }
    }

    /// The next datagram (fails the test after the watchdog).
    fn next(&self, daemon: &Daemon) -> String {
        let mut buf = [0u8; 4096];
        let n = self.socket.recv(&mut buf).unwrap_or_else(|e| {
            panic!(
                "no notification from gpupeekd ({e}); log:\n{}",
                daemon.log()
            )
        });
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    /// Datagrams until one has a line `line`; returns that one.
    fn until(&self, daemon: &Daemon, line: &str) -> String {
        loop {
            let message = self.next(daemon);
            if message.lines().any(|l| l == line) {
                return message;
            }
        }
    }
}

fn start(sandbox: &Sandbox, interval: &str, env: &[(&str, &OsStr)]) -> Daemon {
    sandbox.write_scenario(&slow_start_scenario());
    sandbox.start_daemon_env(interval, &[], env)
}

#[test]
fn ready_is_sent_only_once_the_segment_is_live_and_stopping_on_sigterm() {
    let sandbox = Sandbox::new("notify-ready");
    let path = sandbox.dir.join("notify.sock");
    let manager = Manager::bind(&path);
    let mut daemon = start(&sandbox, "100ms", &[("NOTIFY_SOCKET", path.as_os_str())]);

    let ready = manager.until(&daemon, "READY=1");
    let segment = sandbox.segment();
    let snapshot = segment.snapshot().unwrap();
    assert!(snapshot.generation >= 1, "READY before the first publish");
    assert_eq!(
        snapshot.liveness(gpupeek_shm::mono_now_ns()),
        Liveness::Live
    );
    assert!(
        ready
            .lines()
            .any(|l| l == "STATUS=publishing 1 GPU every 100ms"),
        "{ready:?}"
    );

    daemon.signal(Signal::SIGTERM);
    let stopping = manager.until(&daemon, "STOPPING=1");
    assert!(stopping.contains("STATUS=stopping"), "{stopping:?}");
    assert_eq!(daemon.wait_exit(), Some(0));
}

#[test]
fn watchdog_pings_come_every_half_period_even_between_slow_ticks() {
    let sandbox = Sandbox::new("notify-watchdog");
    let path = sandbox.dir.join("notify.sock");
    let manager = Manager::bind(&path);
    // One tick a minute, a 400 ms watchdog: only pings from the wait between ticks can
    // arrive before the second tick.
    let daemon = start(
        &sandbox,
        "60s",
        &[
            ("NOTIFY_SOCKET", path.as_os_str()),
            ("WATCHDOG_USEC", OsStr::new("400000")),
        ],
    );
    manager.until(&daemon, "READY=1");
    for _ in 0..5 {
        assert_eq!(manager.next(&daemon), "WATCHDOG=1");
    }
    assert_eq!(
        sandbox.segment().generation(),
        1,
        "five pings must not need five ticks"
    );
}

#[test]
fn no_watchdog_pings_without_watchdog_usec_or_for_another_pid() {
    for (tag, env) in [
        ("notify-nowd", vec![]),
        (
            "notify-otherpid",
            vec![("WATCHDOG_USEC", "100000"), ("WATCHDOG_PID", "1")],
        ),
    ] {
        let sandbox = Sandbox::new(tag);
        let path = sandbox.dir.join("notify.sock");
        let manager = Manager::bind(&path);
        let mut vars: Vec<(&str, &OsStr)> = vec![("NOTIFY_SOCKET", path.as_os_str())];
        vars.extend(env.iter().map(|(k, v)| (*k, OsStr::new(v))));
        let mut daemon = start(&sandbox, "20ms", &vars);
        manager.until(&daemon, "READY=1");
        // Ten ticks later, stop: everything in between must be free of pings.
        sandbox.wait_generation(10, &daemon);
        daemon.signal(Signal::SIGTERM);
        loop {
            let message = manager.next(&daemon);
            assert!(!message.contains("WATCHDOG=1"), "{tag}: {message:?}");
            if message.contains("STOPPING=1") {
                break;
            }
        }
        assert_eq!(daemon.wait_exit(), Some(0));
    }
}

#[test]
fn an_abstract_notify_socket_is_reached() {
    let sandbox = Sandbox::new("notify-abstract");
    let name = format!("{}-notify", sandbox.shm);
    let manager = Manager::bind_abstract(&name);
    let at_name = format!("@{name}");
    let daemon = start(&sandbox, "50ms", &[("NOTIFY_SOCKET", OsStr::new(&at_name))]);
    let ready = manager.until(&daemon, "READY=1");
    assert!(ready.starts_with("READY=1\n"), "{ready:?}");
}

#[test]
fn a_bad_notify_socket_is_logged_and_the_daemon_runs_on() {
    let sandbox = Sandbox::new("notify-bad");
    let missing = sandbox.dir.join("nobody-listens.sock");
    // With a watchdog, every tick tries to send.
    let env = [
        ("NOTIFY_SOCKET", missing.as_os_str()),
        ("WATCHDOG_USEC", OsStr::new("100000")),
    ];
    let daemon = start(&sandbox, "50ms", &env);
    sandbox.wait_generation(3, &daemon);
    std::thread::sleep(Duration::from_millis(100));
    let log = daemon.log();
    assert_eq!(
        log.matches("cannot notify the service manager").count(),
        1,
        "one warning, not one per tick:\n{log}"
    );
}

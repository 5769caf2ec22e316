//! `gpupeek serve`'s probes and update stream on the fake NVML: `/-/ready` follows the
//! daemon (503 while it is stopped, 200 once it is back), `/events` sends one event per
//! publish and none while nothing is published, a client that does not read is dropped
//! rather than buffered for, and a stream past `--web.max-streams` is refused with 503.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use gpupeek_e2e::{bins, http, spawn_serve, wait_for, Background, Sandbox};
use nix::sys::signal::Signal;
use serde_json::json;

/// A sandbox with `gpus` fake GPUs and a daemon publishing every `interval`.
fn live(tag: &str, gpus: usize, interval: &str) -> (Sandbox, gpupeek_e2e::Daemon) {
    let sandbox = Sandbox::new(tag);
    let gpus: Vec<_> = (0..gpus)
        .map(|i| json!({"name": "NVIDIA H100 80GB HBM3", "uuid": format!("GPU-{i}")}))
        .collect();
    sandbox.write_scenario(&json!({ "gpus": gpus }));
    let daemon = sandbox.start_daemon(interval);
    sandbox.wait_live(&daemon);
    (sandbox, daemon)
}

/// `gpupeek serve` with `flags`; it and its `host:port`.
fn serve(sandbox: &Sandbox, flags: &[&str]) -> (Background, String) {
    let flags: Vec<_> = flags.iter().map(std::ffi::OsStr::new).collect();
    let (server, url) = spawn_serve(sandbox, std::process::Command::new(&bins().client), &flags);
    let addr = url.strip_prefix("http://").unwrap().to_owned();
    (server, addr)
}

/// A GET of `/events` on `stream`, with its read timeout set short.
pub(crate) fn subscribe(mut stream: TcpStream, addr: &str) -> TcpStream {
    write!(stream, "GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    stream
}

/// Reads what arrives on `stream` for `time` (or until it closes): the text and
/// whether the server closed it.
pub(crate) fn read_for(stream: &mut TcpStream, time: Duration) -> (String, bool) {
    let end = Instant::now() + time;
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while Instant::now() < end {
        match stream.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&got).into_owned(), true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (String::from_utf8_lossy(&got).into_owned(), true),
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), false)
}

/// The `id:` of every event in `text`.
fn ids(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(|id| id.parse().unwrap())
        .collect()
}

#[test]
fn ready_is_503_while_the_daemon_is_stopped_and_200_once_it_is_back() {
    let (sandbox, mut daemon) = live("stream-ready", 1, "100ms");
    let (_serve, addr) = serve(&sandbox, &[]);
    assert_eq!(http("GET", &addr, "/-/healthy").0, 200);
    assert_eq!(
        http("GET", &addr, "/-/ready"),
        (200, "gpupeek serve is ready\n".into())
    );

    daemon.signal(Signal::SIGTERM);
    daemon.wait_exit();
    let (status, body) = http("GET", &addr, "/-/ready");
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("has stopped") && body.ends_with('\n'),
        "{body}"
    );
    assert_eq!(body.lines().count(), 1, "{body}");
    // Healthy is the server's own state, not the daemon's.
    assert_eq!(http("GET", &addr, "/-/healthy").0, 200);

    let daemon = sandbox.start_daemon("100ms");
    wait_for("ready again", &daemon, || {
        http("GET", &addr, "/-/ready").0 == 200
    });
}

#[test]
fn ready_is_503_without_a_segment_and_for_a_daemon_that_hangs() {
    let sandbox = Sandbox::new("stream-nodaemon");
    let (_serve, addr) = serve(&sandbox, &[]);
    let (status, body) = http("GET", &addr, "/-/ready");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body.lines().count(), 1, "{body}");

    sandbox.write_scenario(&json!({"gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0"}]}));
    let daemon = sandbox.start_daemon("100ms");
    sandbox.wait_live(&daemon);
    wait_for("ready", &daemon, || http("GET", &addr, "/-/ready").0 == 200);
    // Stopped in its tracks: no heartbeat, so stale after three periods (a second at
    // least).
    daemon.signal(Signal::SIGSTOP);
    std::thread::sleep(Duration::from_millis(1500));
    let (status, body) = http("GET", &addr, "/-/ready");
    daemon.signal(Signal::SIGCONT);
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("not responding") || body.contains("stale"),
        "{body}"
    );
}

/// NVML that stops working under a running daemon (a driver that lost its GPUs:
/// nvmlDeviceGetCount fails as real drivers fail it then): every endpoint says so with
/// the same line a client prints, and all follow NVML back.
#[test]
fn nvml_that_stops_working_is_the_same_line_in_ready_snapshot_events_and_metrics() {
    let (sandbox, daemon) = live("stream-nvml", 1, "100ms");
    let (_serve, addr) = serve(&sandbox, &[]);
    let mut stream = subscribe(TcpStream::connect(&addr).unwrap(), &addr);
    let _ = read_for(&mut stream, Duration::from_millis(300));
    sandbox.write_scenario(&json!({
        "gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0"}],
        "errors": {"nvmlDeviceGetCount_v2": "UNKNOWN"}
    }));
    wait_for("the daemon to report the NVML error", &daemon, || {
        sandbox.client(&[]).status.code() == Some(5)
    });
    let client = gpupeek_e2e::stderr(&sandbox.client(&[]));
    let line = client
        .trim_end()
        .strip_prefix("gpupeek: ")
        .unwrap_or(client.trim_end());
    let (status, ready) = http("GET", &addr, "/-/ready");
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready.trim_end(), line);
    let (status, body) = http("GET", &addr, "/snapshot");
    assert_eq!(status, 200, "{body}");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(doc["daemon"]["state"], "nvml_error", "{doc}");
    assert_eq!(doc["daemon"]["error"], line, "{doc}");
    assert_eq!(doc["gpus"], json!([]), "{doc}");
    let (_, metrics) = http("GET", &addr, "/metrics");
    assert!(
        metrics.contains("gpupeek_daemon_state{state=\"nvml_error\"} 1"),
        "{metrics}"
    );
    let (text, _) = read_for(&mut stream, Duration::from_millis(500));
    let down = text
        .split("\n\n")
        .find(|e| e.contains("event: down"))
        .unwrap_or_else(|| panic!("no event: down in {text}"));
    let data = down.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
    let data: serde_json::Value = serde_json::from_str(data).unwrap();
    assert_eq!(data["error"], line, "{data}");

    sandbox.write_scenario(&json!({"gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0"}]}));
    wait_for("ready again", &daemon, || {
        http("GET", &addr, "/-/ready").0 == 200
    });
    let (_, body) = http("GET", &addr, "/snapshot");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(doc["daemon"]["state"], "live", "{doc}");
    assert_eq!(doc["gpus"].as_array().map(Vec::len), Some(1), "{doc}");
}

#[test]
fn events_come_once_per_publish_and_not_when_nothing_is_published() {
    let (sandbox, daemon) = live("stream-events", 2, "100ms");
    let (_serve, addr) = serve(&sandbox, &["--node-name", "node-7"]);
    let mut stream = subscribe(TcpStream::connect(&addr).unwrap(), &addr);
    let (head, _) = read_for(&mut stream, Duration::from_millis(500));
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains("Content-Type: text/event-stream\r\n"),
        "{head}"
    );
    assert!(!head.contains("Content-Length"), "{head}");
    let before = sandbox.segment().generation();
    let (text, closed) = read_for(&mut stream, Duration::from_secs(3));
    let after = sandbox.segment().generation();
    assert!(!closed);
    let got = ids(&text);
    // The publishes made while reading, in order, none twice (the first may have been
    // sent before `before` was read, the last after `after`). On a loaded machine the
    // server may get to two publishes only after both were made, and sends the newer:
    // allow one in ten to be folded so; a timer could not come close.
    let published = after - before;
    let inner = got
        .iter()
        .filter(|g| (before + 1..=after).contains(*g))
        .count() as u64;
    assert!(got.windows(2).all(|w| w[1] > w[0]), "{got:?}");
    assert!(
        published >= 10,
        "{before}..{after}: the daemon publishes every 100 ms"
    );
    assert!(
        inner * 10 >= published * 9,
        "{inner} events for {published} publishes: {got:?}"
    );
    // Each event's data is the --json document on one line.
    let data = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(data).unwrap();
    assert_eq!(doc["hostname"], "node-7");
    assert_eq!(doc["gpus"].as_array().unwrap().len(), 2);
    assert_eq!(doc["generation"].as_u64(), Some(got[0]));

    // Nothing published, nothing sent.
    daemon.signal(Signal::SIGSTOP);
    let _ = read_for(&mut stream, Duration::from_millis(300));
    let (quiet, closed) = read_for(&mut stream, Duration::from_secs(2));
    daemon.signal(Signal::SIGCONT);
    assert!(!closed);
    assert_eq!(ids(&quiet), Vec::<u64>::new(), "{quiet}");
    let (text, _) = read_for(&mut stream, Duration::from_secs(1));
    assert!(
        !ids(&text).is_empty(),
        "events resume after SIGCONT: {text}"
    );
}

#[test]
fn a_stopped_daemon_is_an_event_down_and_the_stream_follows_its_successor() {
    let (sandbox, mut daemon) = live("stream-down", 1, "100ms");
    let (_serve, addr) = serve(&sandbox, &[]);
    let mut stream = subscribe(TcpStream::connect(&addr).unwrap(), &addr);
    let _ = read_for(&mut stream, Duration::from_millis(300));
    daemon.signal(Signal::SIGTERM);
    daemon.wait_exit();
    let (text, _) = read_for(&mut stream, Duration::from_millis(800));
    assert!(text.contains("event: down\n"), "{text}");
    assert!(text.contains("has stopped"), "{text}");
    let _daemon = sandbox.start_daemon("100ms");
    let (text, _) = read_for(&mut stream, Duration::from_secs(5));
    let live_data = text
        .split("\n\n")
        .filter(|e| !e.contains("event: down") && e.contains("\"gpus\""))
        .count();
    assert!(live_data > 0, "{text}");
}

#[test]
fn a_client_that_does_not_read_is_dropped_not_buffered_for() {
    let (sandbox, _daemon) = live("stream-slow", 8, "20ms");
    let (_serve, addr) = serve(&sandbox, &[]);
    // A receive window of a few KiB that nobody empties.
    use nix::sys::socket::{self as sock, sockopt, AddressFamily, SockFlag, SockType};
    let socket = sock::socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )
    .unwrap();
    sock::setsockopt(&socket, sockopt::RcvBuf, &4096).unwrap();
    let std::net::SocketAddr::V4(v4) = addr.parse().unwrap() else {
        panic!("{addr}")
    };
    sock::connect(
        std::os::fd::AsRawFd::as_raw_fd(&socket),
        &sock::SockaddrIn::from(v4),
    )
    .unwrap();
    let mut slow = subscribe(TcpStream::from(socket), &addr);
    // Meanwhile another stream and the scrapes are served as usual.
    let mut fast = subscribe(TcpStream::connect(&addr).unwrap(), &addr);
    let mut fast_text = String::new();
    for _ in 0..8 {
        fast_text += &read_for(&mut fast, Duration::from_millis(500)).0;
        assert_eq!(http("GET", &addr, "/metrics").0, 200);
    }
    let fast_ids = ids(&fast_text);
    assert!(fast_ids.len() > 20, "{} events in 4 s", fast_ids.len());
    // In order and never twice (publishes 20 ms apart on a loaded machine may come
    // while the server is busy: the next event then shows the newest).
    assert!(fast_ids.windows(2).all(|w| w[1] > w[0]), "{fast_ids:?}");
    // The server gave up on the slow one: what it had queued, then the end. Without
    // the bound the events would go on coming.
    let (text, closed) = read_for(&mut slow, Duration::from_secs(5));
    assert!(closed, "the server kept a stream whose client read nothing");
    assert!(
        text.len() < 1024 * 1024,
        "{} bytes were queued for a client that read nothing",
        text.len()
    );
    // And the fast one goes on.
    let (more, closed) = read_for(&mut fast, Duration::from_millis(500));
    assert!(!closed && !ids(&more).is_empty());
}

#[test]
fn streams_past_the_limit_are_refused_with_503() {
    let (sandbox, _daemon) = live("stream-limit", 1, "100ms");
    let (_serve, addr) = serve(&sandbox, &["--web.max-streams", "2"]);
    let mut open: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = subscribe(TcpStream::connect(&addr).unwrap(), &addr);
            let (head, closed) = read_for(&mut s, Duration::from_millis(300));
            assert!(head.starts_with("HTTP/1.1 200 OK") && !closed, "{head}");
            s
        })
        .collect();
    let mut third = subscribe(TcpStream::connect(&addr).unwrap(), &addr);
    let (answer, closed) = read_for(&mut third, Duration::from_secs(2));
    assert!(
        answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{answer}"
    );
    assert!(closed, "{answer}");
    // Scrapes are not streams: still answered.
    assert_eq!(http("GET", &addr, "/metrics").0, 200);
    // One leaves, another may come.
    drop(open.pop());
    std::thread::sleep(Duration::from_millis(300));
    let mut again = subscribe(TcpStream::connect(&addr).unwrap(), &addr);
    let (head, _) = read_for(&mut again, Duration::from_millis(500));
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
}

#[test]
fn node_name_is_a_label_of_gpupeek_node_info_only() {
    let (sandbox, _daemon) = live("stream-node", 1, "100ms");
    let (_serve, addr) = serve(&sandbox, &["--node-name", "gpu-node-3"]);
    let (status, body) = http("GET", &addr, "/metrics");
    assert_eq!(status, 200);
    assert!(
        body.contains("\ngpupeek_node_info{nodename=\"gpu-node-3\"} 1\n"),
        "{body}"
    );
    assert_eq!(body.matches("gpu-node-3").count(), 1, "{body}");
    for label in ["node=", "instance=", "hostname=", "Hostname="] {
        assert!(!body.contains(label), "{label} in {body}");
    }
}

#[test]
fn basic_auth_guards_the_stream_and_the_probes_too() {
    let (sandbox, _daemon) = live("stream-auth", 1, "100ms");
    let config = sandbox.dir.join("web.yml");
    // The bcrypt hash of "password" (as serve_web.rs uses).
    std::fs::write(
        &config,
        "basic_auth_users:\n  alice: $2y$10$CWCEbs7mt8QFrToJR9OcG.tduEKpx9SROhWnaDHQgQX4Q6hqWNASa\n",
    )
    .unwrap();
    let (_serve, addr) = serve(&sandbox, &["--web.config.file", config.to_str().unwrap()]);
    for path in ["/events", "/-/ready", "/-/healthy"] {
        assert_eq!(http("GET", &addr, path).0, 401, "{path}");
    }
    let mut stream = TcpStream::connect(&addr).unwrap();
    // alice:password
    write!(
        stream,
        "GET /events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Basic YWxpY2U6cGFzc3dvcmQ=\r\n\r\n"
    )
    .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let (text, _) = read_for(&mut stream, Duration::from_secs(2));
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(ids(&text).len() >= 2, "{text}");
}

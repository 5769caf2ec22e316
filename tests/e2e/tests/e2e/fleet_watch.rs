//! `gpupeek fleet -i` in a real terminal (a tmux pane smaller than the table): on the
//! alternate screen, fitted to the terminal so that the summary and the header never
//! scroll away and the hosts not read are never cut off (a row counts the GPU rows left
//! out above them) and fitted again when it is resized, redrawn each round, and `q`
//! leaves it with the screen as it was, even when a round (a host that never answers)
//! takes longer than the interval.

use gpupeek_e2e::{bins, Tmux};

use crate::fleet::cluster;

#[test]
fn fleet_watch_keeps_its_summary_and_header_on_a_small_terminal_and_quits_on_q() {
    // Four hosts of 2, 2, 3 and 4 GPUs: 11 GPU rows, a host that is down and one that
    // never answers (so each round takes --timeout, longer than -i), under a summary
    // and a header; the pane has 8 rows.
    let hosts = cluster("fleet-watch", 4);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = silent.local_addr().map(|a| (a, silent)).unwrap();
    let mut command = format!(
        "{} fleet -i 0.3 --timeout 1 --host {}",
        bins().client.display(),
        silent.0
    );
    for h in &hosts {
        command.push_str(&format!(" --host {}", h.addr));
    }
    // The shell stays a while after fleet ends, so that its last words stay on screen.
    command.push_str(" --host 127.0.0.1:1; echo fleet-exited-$?; sleep 60");
    let socket = format!("{}-fleet-watch", hosts[0].sandbox.shm);
    let Some(t) = Tmux::start(socket, 100, 8, &command) else {
        return;
    };

    let screen = t.until("a fitted table", |s| {
        s.starts_with("6 hosts (2 not read), 11 GPUs") && s.contains("… ")
    });
    let lines: Vec<&str> = screen.lines().collect();
    assert!(lines.len() <= 8, "{screen}");
    assert!(lines[1].starts_with("HOST "), "{screen}");
    // 15 lines (2 of head, 11 GPUs, the 2 hosts not read) in 8: 3 GPU rows, a line
    // counting the other 8, and both hosts not read, in numeric order.
    assert_eq!(lines[5], "… 8 more rows", "{screen}");
    assert!(lines[6].starts_with("127.0.0.1:1 "), "{screen}");
    assert!(lines[7].starts_with(&silent.0.to_string()), "{screen}");
    // Redrawn in place each round: the summary is still the first line a moment later.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let again = t.run(&["capture-pane", "-p", "-t", "w"]);
    assert!(again.starts_with("6 hosts (2 not read)"), "{again}");

    // A taller terminal: the frame is fitted to it at once (from the last round).
    t.run(&["resize-window", "-t", "w", "-x", "100", "-y", "12"]);
    let taller = t.until("the frame refitted to 12 rows", |s| {
        s.lines().nth(9) == Some("… 4 more rows")
    });
    assert!(taller.starts_with("6 hosts (2 not read)"), "{taller}");
    assert!(
        taller.lines().nth(10).unwrap().starts_with("127.0.0.1:1 "),
        "{taller}"
    );

    t.run(&["send-keys", "-t", "w", "q"]);
    let after = t.until("fleet -i to end", |s| s.contains("fleet-exited-"));
    assert!(after.contains("fleet-exited-0"), "{after}");
    assert!(
        !after.contains("HOST "),
        "the table left on the normal screen:\n{after}"
    );
}

/// A round that cannot end before its two-minute `--timeout` (a host that takes the
/// connection and never answers): the screen says what `fleet -i` waits for, and it
/// still leaves at once on `q`, with the normal screen and the terminal's settings back.
#[test]
fn fleet_watch_quits_on_q_in_the_middle_of_a_round() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let command = format!(
        "{} fleet -i 1 --timeout 120 --host {}; echo fleet-exited-$?; \
         stty -a | tr ' ;' '\\n\\n' | grep -x -E -e '-?(echo|icanon|isig)' | tr '\\n' ' '; \
         echo; sleep 60",
        bins().client.display(),
        silent.local_addr().unwrap()
    );
    let socket = format!("gpupeek-fleet-quit-{}", std::process::id());
    let Some(t) = Tmux::start(socket, 100, 8, &command) else {
        return;
    };
    // The round has begun once fleet has connected to the silent host; until it ends,
    // the screen says what it waits for.
    let (_held, _) = silent.accept().unwrap();
    t.until("the first round's line", |s| {
        s.starts_with("gpupeek fleet: reading 1 host (at most 120 s)…")
    });
    assert_eq!(
        t.run(&["display-message", "-p", "-t", "w", "#{alternate_on}"])
            .trim(),
        "1",
        "fleet -i is not on the alternate screen"
    );
    t.run(&["send-keys", "-t", "w", "q"]);
    let after = t.until("fleet -i to end", |s| s.contains("fleet-exited-"));
    assert!(after.contains("fleet-exited-0"), "{after}");
    let after = t.until("the terminal's settings", |s| s.contains("isig"));
    assert!(after.contains("isig icanon echo"), "{after}");
    assert_eq!(
        t.run(&["display-message", "-p", "-t", "w", "#{alternate_on}"])
            .trim(),
        "0"
    );
}

/// Off a terminal, SIGTERM in the middle of a round that cannot end before its
/// two-minute `--timeout` ends `fleet -i` at once, as between rounds: status 0.
#[test]
fn fleet_watch_ends_on_sigterm_in_the_middle_of_a_round() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut fleet = std::process::Command::new(&bins().client)
        .args(["fleet", "-i", "1", "--timeout", "120", "--host"])
        .arg(silent.local_addr().unwrap().to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (_held, _) = silent.accept().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(fleet.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + gpupeek_e2e::WATCHDOG;
    let status = loop {
        if let Some(status) = fleet.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = fleet.kill();
            panic!(
                "fleet -i did not end on SIGTERM within {:?}",
                gpupeek_e2e::WATCHDOG
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let out = fleet.wait_with_output().unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A host that takes the connection and never answers does not hold back the others:
/// a quarter of a second into the first round the screen shows the host that answered,
/// the silent one as still being read (`waiting`), and at the round's end (`--timeout`)
/// as timed out; in later rounds, while it is being read again, as the last round found
/// it.
#[test]
fn fleet_watch_shows_the_hosts_that_answered_before_the_round_ends() {
    let hosts = cluster("fleet-watch-progress", 1);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let command = format!(
        "{} fleet -i 1 --timeout 4 --host {} --host {}; echo fleet-exited-$?; sleep 60",
        bins().client.display(),
        silent.local_addr().unwrap(),
        hosts[0].addr
    );
    let socket = format!("{}-fleet-progress", hosts[0].sandbox.shm);
    let Some(t) = Tmux::start(socket, 120, 10, &command) else {
        return;
    };
    // Connections to the silent host are taken and kept (each round makes one).
    let _held = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming().flatten() {
            held.push(stream);
        }
    });
    let row = |s: &str, host: &str| -> Option<String> {
        s.lines().find(|l| l.starts_with(host)).map(str::to_owned)
    };
    let addr = hosts[0].addr.clone();
    let early = t.until("the host that answered, the other still being read", |s| {
        s.contains("waiting: no answer yet") && row(s, &addr).is_some()
    });
    assert!(early.starts_with("2 hosts (1 not read), 2 GPUs"), "{early}");
    assert!(
        row(&early, &addr).unwrap().contains("NVIDIA H100"),
        "{early}"
    );
    // The round's end: the silent host timed out. Later rounds show it so while they
    // read it again, never as waiting.
    t.until("the silent host timed out", |s| {
        s.contains("timeout: no answer")
    });
    let since = std::time::Instant::now();
    while since.elapsed() < std::time::Duration::from_secs(6) {
        let s = t.run(&["capture-pane", "-p", "-t", "w"]);
        assert!(!s.contains("waiting"), "a later round showed waiting:\n{s}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    t.run(&["send-keys", "-t", "w", "q"]);
    let after = t.until("fleet -i to end", |s| s.contains("fleet-exited-"));
    assert!(after.contains("fleet-exited-0"), "{after}");
}

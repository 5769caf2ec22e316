//! Helpers for the end-to-end tests: the real binaries, built once; private segment
//! names that are always removed; a scenario file for the fake NVML; a daemon that is
//! always killed; and a client run under a watchdog so no test can hang.

pub mod hostile;

pub use fake_nvml::profiles::{self, Profile};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How long any wait in a test may take before the test fails instead of hanging.
pub const WATCHDOG: Duration = Duration::from_secs(20);

/// A turn for the tests that must not overlap one another, now that every test shares
/// one process: those that load the machine (a hundred reader processes, a busy loop,
/// valgrind, an unpaced seqlock writer) and those that measure what such load would
/// skew (a daemon's rate, CPU time or driver calls per tick, its first publish within
/// two ticks). Other tests still run beside the holder: they assert nothing that a
/// loaded machine changes.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    // A test that failed during its turn poisoned the lock; the next one still runs.
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

/// Paths of the binaries under test.
pub struct Bins {
    /// gpupeekd.
    pub daemon: PathBuf,
    /// gpupeek.
    pub client: PathBuf,
    /// gpupeek-serve, which `gpupeek serve` runs (found next to gpupeek).
    pub serve: PathBuf,
    /// gpupeek-top, which `gpupeek top` runs (found next to gpupeek).
    pub top: PathBuf,
    /// gpupeek-plot, which `gpupeek plot` runs (found next to gpupeek).
    pub plot: PathBuf,
    /// libfake_nvml.so.
    pub fake_nvml: PathBuf,
    /// libfake_nvml.a, from which [`driver_library`] links the driver profiles.
    pub fake_nvml_static: PathBuf,
}

/// Builds gpupeekd, gpupeek, gpupeek-serve, gpupeek-top, gpupeek-plot, gpupeek-fleet, the
/// fake NVML and the demo's fake Kubernetes API server
/// (once per test process) with the same profile as the tests, and returns their paths.
pub fn bins() -> &'static Bins {
    static BINS: OnceLock<Bins> = OnceLock::new();
    BINS.get_or_init(|| {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.current_dir(&workspace).args([
            "build",
            "-q",
            "-p",
            "gpupeekd",
            "-p",
            "gpupeek",
            "-p",
            "gpupeek-serve",
            "-p",
            "gpupeek-top",
            "-p",
            "gpupeek-plot",
            "-p",
            "gpupeek-fleet",
            "-p",
            "fake-nvml",
            // scripts/demo-fleet --kubernetes's API server.
            "-p",
            "fake-kube-api",
            // The daemon's test hooks (daemon/src/hooks.rs) are read only in this build.
            "--features",
            "gpupeekd/test-hooks",
        ]);
        if !cfg!(debug_assertions) {
            build.arg("--release");
        }
        let status = build.status().expect("cargo can be run");
        assert!(status.success(), "building the binaries under test failed");
        // This test binary lives in <target>/<profile>/deps.
        let exe = std::env::current_exe().expect("test binary path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test binary is in <target>/<profile>/deps");
        Bins {
            daemon: profile_dir.join("gpupeekd"),
            client: profile_dir.join("gpupeek"),
            serve: profile_dir.join("gpupeek-serve"),
            top: profile_dir.join("gpupeek-top"),
            plot: profile_dir.join("gpupeek-plot"),
            fake_nvml: profile_dir.join("libfake_nvml.so"),
            fake_nvml_static: profile_dir.join("libfake_nvml.a"),
        }
    })
}

/// The fake NVML as driver `profile` ships it: a library linked (once per test process)
/// from the fake's static library whose dynamic symbol table holds exactly the functions
/// that driver exports, so that looking up any other one fails as it would there.
pub fn driver_library(profile: Profile) -> PathBuf {
    static LIBS: OnceLock<BTreeMap<&'static str, PathBuf>> = OnceLock::new();
    let libs = LIBS.get_or_init(|| {
        let archive = &bins().fake_nvml_static;
        let dir = archive.with_file_name("fake-nvml-drivers");
        std::fs::create_dir_all(&dir).unwrap();
        let mut libs = BTreeMap::new();
        for p in profiles::PROFILES.iter().chain(profiles::OLDER) {
            let lib = dir.join(p.library_name());
            // Private names, renamed into place: test processes link concurrently.
            let tag = format!("{}.{}", p.name, std::process::id());
            let script = dir.join(format!("{tag}.map"));
            let tmp = dir.join(format!("{tag}.so"));
            std::fs::write(&script, p.version_script()).unwrap();
            let mut cc = Command::new("cc");
            cc.args(["-shared", "-o"]).arg(&tmp);
            cc.arg(format!("-Wl,--version-script={}", script.display()));
            // Rust's thread-locals and statics must outlive a dlclose().
            cc.arg("-Wl,-z,nodelete");
            // Pull exactly the exported functions (and what they need) from the archive.
            cc.args(p.exports().map(|f| format!("-Wl,-u,{f}")));
            cc.arg(archive);
            cc.args([
                "-lgcc_s",
                "-lutil",
                "-lrt",
                "-lpthread",
                "-lm",
                "-ldl",
                "-lc",
            ]);
            let out = run_with_watchdog(cc);
            assert!(out.status.success(), "linking {}: {}", p.name, stderr(&out));
            std::fs::rename(&tmp, &lib).unwrap();
            let _ = std::fs::remove_file(script);
            libs.insert(p.name, lib);
        }
        libs
    });
    libs[profile.name].clone()
}

/// A unique scratch directory and segment name for one test, removed on drop.
pub struct Sandbox {
    /// Segment name.
    pub shm: String,
    /// Scratch directory (scenario file, call counts, logs).
    pub dir: PathBuf,
    daemons_started: std::cell::Cell<u32>,
    driver: std::cell::Cell<Option<Profile>>,
}

impl Sandbox {
    /// A new sandbox; `tag` names the test in paths.
    pub fn new(tag: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let id = format!("gpupeek-e2e-{}-{n}-{tag}", std::process::id());
        let dir = std::env::temp_dir().join(&id);
        std::fs::create_dir_all(dir.join("calls")).unwrap();
        // An empty fake sysfs, so no test sees the real GPUs of the machine it runs on.
        std::fs::create_dir_all(dir.join("sys/bus/pci/devices")).unwrap();
        Sandbox {
            shm: id,
            dir,
            daemons_started: std::cell::Cell::new(0),
            driver: std::cell::Cell::new(None),
        }
    }

    /// Daemons started from now on load the fake NVML as driver `profile` ships it
    /// ([`driver_library`]); the scenario should report `profile.driver_version`.
    pub fn use_driver(&self, profile: Profile) {
        self.driver.set(Some(profile));
    }

    /// The NVML library daemons are started with.
    pub fn nvml_library(&self) -> PathBuf {
        self.driver
            .get()
            .map_or_else(|| bins().fake_nvml.clone(), driver_library)
    }

    /// `/dev/shm/NAME`.
    pub fn shm_path(&self) -> PathBuf {
        Path::new("/dev/shm").join(&self.shm)
    }

    /// The scenario file the fake NVML reads.
    pub fn scenario_path(&self) -> PathBuf {
        self.dir.join("scenario.json")
    }

    /// Writes the scenario atomically (the fake reloads it on its next call).
    pub fn write_scenario(&self, scenario: &serde_json::Value) {
        let tmp = self.dir.join("scenario.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(scenario).unwrap()).unwrap();
        std::fs::rename(tmp, self.scenario_path()).unwrap();
    }

    /// NVML calls per process, from the fake's call files: pid → (total, open handles).
    pub fn nvml_calls(&self) -> BTreeMap<u32, (u64, u64)> {
        let mut calls = BTreeMap::new();
        for entry in std::fs::read_dir(self.dir.join("calls")).unwrap() {
            let path = entry.unwrap().path();
            let Some(pid) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".calls"))
                .and_then(|p| p.parse().ok())
            else {
                continue;
            };
            let text = std::fs::read_to_string(&path).unwrap();
            let number = |key: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
                    .unwrap_or(0)
            };
            calls.insert(pid, (number("total "), number("open_handles ")));
        }
        calls
    }

    /// Starts gpupeekd on the fake NVML with this sandbox's scenario, segment and fake
    /// sysfs.
    pub fn start_daemon(&self, interval: &str) -> Daemon {
        self.start_daemon_with(interval, &[])
    }

    /// [`Sandbox::start_daemon`] with more flags.
    pub fn start_daemon_with(&self, interval: &str, flags: &[&str]) -> Daemon {
        self.launch_daemon(interval, flags, &[], false)
    }

    /// [`Sandbox::start_daemon`] with more flags and environment variables.
    pub fn start_daemon_env(
        &self,
        interval: &str,
        flags: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Daemon {
        self.launch_daemon(interval, flags, env, false)
    }

    /// [`Sandbox::start_daemon_with`] in a private mount namespace whose `/proc` is
    /// mounted `hidepid=invisible` (needs root).
    pub fn start_daemon_in_hidepid(&self, interval: &str, flags: &[&str]) -> Daemon {
        self.launch_daemon(interval, flags, &[], true)
    }

    fn launch_daemon(
        &self,
        interval: &str,
        flags: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
        hidepid: bool,
    ) -> Daemon {
        self.spawn_daemon(self.daemon_cmd(interval, flags, env, hidepid))
    }

    /// The command [`Self::start_daemon`] runs, to add to before [`Self::spawn_daemon`].
    pub fn daemon_command(&self, interval: &str) -> Command {
        self.daemon_cmd(interval, &[], &[], false)
    }

    fn daemon_cmd(
        &self,
        interval: &str,
        flags: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
        hidepid: bool,
    ) -> Command {
        let mut cmd = in_hidepid_proc(hidepid, None, &bins().daemon);
        cmd.args(["--foreground", "--shm", &self.shm, "--interval", interval])
            .envs(env.iter().copied())
            .arg("--nvml-lib")
            .arg(self.nvml_library())
            .arg("--sysfs-root")
            .arg(self.sysfs_root())
            .args(flags)
            .env("FAKE_NVML_SCENARIO", self.scenario_path())
            .env("FAKE_NVML_CALLS_DIR", self.dir.join("calls"))
            .env("FAKE_NVML_SYSFS_ROOT", self.sysfs_root())
            // gpupeekd's arrays are malloc blocks: the fake checks it writes within them.
            .env(fake_nvml::procs::CHECK_HEAP_BUFFERS_ENV, "1")
            // The fake lists the pids of the namespace the tests run in: those are the
            // "host" pids for gpupeekd (its test hook, hooks::HOST_PID_NS).
            .env("GPUPEEKD_TEST_HOST_PID_NS", own_pid_namespace().to_string())
            .env("GPUPEEK_LOCK_DIR", &self.dir)
            // History state stays in the sandbox (a root daemon's default is
            // /var/lib/gpupeek).
            .env("GPUPEEK_STATE_DIR", self.dir.join("state"));
        cmd
    }

    /// Spawns a daemon command, its stderr going to a log in the sandbox.
    pub fn spawn_daemon(&self, mut cmd: Command) -> Daemon {
        let n = self.daemons_started.replace(self.daemons_started.get() + 1);
        let log = self.dir.join(format!("daemon-{n}.log"));
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let child = cmd.spawn().expect("gpupeekd starts");
        Daemon {
            child: Some(child),
            log,
        }
    }

    /// Runs gpupeek against this sandbox's segment as user `uid` (and its group), in a
    /// private mount namespace with a `hidepid` `/proc` when `hidepid` is set.
    pub fn client_as(&self, uid: u32, hidepid: bool, args: &[&str]) -> Output {
        let mut cmd = in_hidepid_proc(hidepid, Some(uid), &bins().client);
        cmd.arg("--shm").arg(&self.shm).args(args);
        run_with_watchdog(cmd)
    }

    /// The fake sysfs root the daemon is started with (`--sysfs-root`).
    pub fn sysfs_root(&self) -> PathBuf {
        self.dir.join("sys")
    }

    /// Adds an NVIDIA GPU bound to the nvidia driver to the fake sysfs, at `address`
    /// as sysfs spells it (`0000:01:00.0`), with its runtime PM state.
    pub fn add_sysfs_gpu(&self, address: &str, runtime_status: &str, control: &str) {
        let root = self.sysfs_root();
        let driver = root.join("bus/pci/drivers/nvidia");
        let dir = root.join("bus/pci/devices").join(address);
        std::fs::create_dir_all(&driver).unwrap();
        std::fs::create_dir_all(dir.join("power")).unwrap();
        std::fs::write(dir.join("vendor"), "0x10de\n").unwrap();
        std::fs::write(dir.join("class"), "0x030200\n").unwrap();
        std::os::unix::fs::symlink(driver, dir.join("driver")).unwrap();
        self.set_runtime_pm(address, runtime_status, control);
    }

    /// Sets a fake sysfs GPU's `power/runtime_status` and `power/control` (each file
    /// replaced atomically, status first).
    pub fn set_runtime_pm(&self, address: &str, runtime_status: &str, control: &str) {
        let power = self
            .sysfs_root()
            .join("bus/pci/devices")
            .join(address)
            .join("power");
        for (file, value) in [("runtime_status", runtime_status), ("control", control)] {
            let tmp = power.join(format!("{file}.tmp"));
            std::fs::write(&tmp, format!("{value}\n")).unwrap();
            std::fs::rename(tmp, power.join(file)).unwrap();
        }
    }

    /// Every line of process `pid`'s fake-NVML calls file (`total`, `open_handles`,
    /// `suspended_gpu_calls`, one per function), or `None` when it made no NVML call.
    pub fn nvml_call_file(&self, pid: u32) -> Option<BTreeMap<String, u64>> {
        let path = self.dir.join("calls").join(format!("{pid}.calls"));
        let text = std::fs::read_to_string(path).ok()?;
        let lines = text.lines().filter_map(|line| {
            let (key, value) = line.split_once(' ')?;
            Some((key.to_owned(), value.trim().parse().ok()?))
        });
        Some(lines.collect())
    }

    /// Runs gpupeek against this sandbox's segment.
    pub fn client(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(&bins().client);
        cmd.arg("--shm").arg(&self.shm).args(args);
        run_with_watchdog(cmd)
    }

    /// Runs gpupeek with `args` as given (no `--shm` added: a subcommand comes first) and
    /// these environment variables, against this sandbox's segment (`GPUPEEK_SHM`).
    pub fn client_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(&bins().client);
        cmd.env("GPUPEEK_SHM", &self.shm).args(args);
        cmd.envs(env.iter().copied());
        run_with_watchdog(cmd)
    }

    /// Opens the segment as a reader.
    pub fn segment(&self) -> gpupeek_shm::Segment {
        gpupeek_shm::Segment::open(&self.shm).expect("segment opens")
    }

    /// Lets `ticks` more publishes happen (waits for that many generations past the
    /// current one: a tick that started after the call has then completed).
    pub fn let_ticks_pass(&self, daemon: &Daemon, ticks: u64) {
        let now = self.segment().generation();
        self.wait_generation(now + ticks, daemon);
    }

    /// Waits until the daemon has published at least `generation`.
    pub fn wait_generation(&self, generation: u64, daemon: &Daemon) {
        wait_for(&format!("generation {generation}"), daemon, || {
            gpupeek_shm::Segment::open(&self.shm).is_ok_and(|s| s.generation() >= generation)
        });
    }

    /// The first consistent snapshot of the segment that satisfies `done` (failing the
    /// test with the daemon's log after [`WATCHDOG`]).
    pub fn snapshot_when(
        &self,
        daemon: &Daemon,
        what: &str,
        done: impl Fn(&gpupeek_shm::Snapshot) -> bool,
    ) -> gpupeek_shm::Snapshot {
        let mut found = None;
        wait_for(what, daemon, || {
            let snap = gpupeek_shm::Segment::open(&self.shm).and_then(|s| s.snapshot());
            found = snap.ok().filter(|s| s.consistent && done(s));
            found.is_some()
        });
        found.expect("wait_for returned only once one was found")
    }

    /// Waits for the daemon's first publish and returns the generation.
    pub fn wait_live(&self, daemon: &Daemon) -> u64 {
        self.wait_generation(1, daemon);
        self.segment().generation()
    }

    /// Waits until every GPU has been sampled once: the daemon goes live before a GPU's
    /// first job (identity, near-static values, first sample) has answered, so a test
    /// that changes the scenario or counts calls from there may catch that job midway.
    pub fn wait_sampled(&self, daemon: &Daemon) -> gpupeek_shm::Snapshot {
        self.snapshot_when(daemon, "every GPU's first sample", |s| {
            s.gpus.iter().all(|g| g.sample_mono_ns != 0)
        })
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.shm_path());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A running gpupeekd, killed when dropped.
pub struct Daemon {
    child: Option<Child>,
    log: PathBuf,
}

impl Daemon {
    /// Wraps a gpupeekd the test spawned itself; `log` is where its stderr went, if
    /// anywhere.
    pub fn from_child(child: Child, log: PathBuf) -> Self {
        Daemon {
            child: Some(child),
            log,
        }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends `signal`.
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid() as i32), signal).unwrap();
    }

    /// Waits for it to exit (watchdog-bounded) and returns its exit code.
    pub fn wait_exit(&mut self) -> Option<i32> {
        self.wait_exit_within(WATCHDOG)
    }

    /// Waits up to `limit` for it to exit (then kills it and fails the test) and returns
    /// its exit code.
    pub fn wait_exit_within(&mut self, limit: Duration) -> Option<i32> {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("gpupeekd did not exit; log:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Its scheduler state from `/proc/PID/stat`: `R`, `S`, `T` (stopped), `Z`...
    pub fn state(&self) -> char {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let after_name = &stat[stat.rfind(')').expect("stat has (comm)") + 2..];
        after_name.chars().next().expect("state")
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The inode of this process's pid namespace.
pub fn own_pid_namespace() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid")
        .expect("/proc/self/ns/pid")
        .ino()
}

/// `sh -c script` in a private mount namespace of its own (root; util-linux's
/// `unshare`): what it mounts is seen by it and its children only. The caller adds the
/// positional parameters (`$1`...), `$0` being `sh`.
pub fn sh_in_private_mounts(script: &str) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
    ]);
    cmd
}

/// A command for `program` that runs in its own mount namespace with `/proc` mounted
/// `hidepid=invisible` when `hidepid` is set, and as `uid` (its own gid, no supplementary
/// groups) when one is given. Uses util-linux's `unshare` and `setpriv`.
pub fn in_hidepid_proc(hidepid: bool, uid: Option<u32>, program: &Path) -> Command {
    if !hidepid && uid.is_none() {
        return Command::new(program);
    }
    let mut script = String::new();
    if hidepid {
        script.push_str("mount -t proc -o hidepid=invisible proc /proc && ");
    }
    script.push_str("exec ");
    if let Some(uid) = uid {
        script.push_str(&format!(
            "setpriv --reuid={uid} --regid={uid} --clear-groups "
        ));
    }
    script.push_str("\"$0\" \"$@\"");
    let mut cmd = if hidepid {
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"]);
        cmd
    } else {
        let mut cmd = Command::new("sh");
        cmd.arg("-c");
        cmd
    };
    cmd.arg(script).arg(program);
    cmd
}

/// Whether tests that need root can run; in CI (where they must) not being root fails.
pub fn root_or_skip(test: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} needs root, and CI must run it"
    );
    eprintln!("skipped {test}: needs root");
    false
}

/// Polls `done` until it holds; fails the test (with the daemon's log) after [`WATCHDOG`].
pub fn wait_for(what: &str, daemon: &Daemon, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WATCHDOG;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; daemon log:\n{}",
            daemon.log()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `cmd` to completion, killing it if it outlives [`WATCHDOG`].
pub fn run_with_watchdog(cmd: Command) -> Output {
    run_with_limit(cmd, WATCHDOG)
}

/// Runs `cmd` to completion in its own process group, killing the whole group (so that
/// no child it started outlives the test) if it runs longer than `limit`.
pub fn run_with_limit(mut cmd: Command, limit: Duration) -> Output {
    use std::os::unix::process::CommandExt;
    let child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("command starts");
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let guard = std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(limit) {
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        }
    });
    let output = child.wait_with_output().expect("command runs");
    drop(done);
    let _ = guard.join();
    output
}

/// stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts that a command failed with `code` and said why in exactly one line, without
/// a panic and without writing to stdout.
pub fn assert_one_line_failure(out: &Output, code: i32, what: &str) {
    let err = stderr(out);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: exit status {:?}, stderr {err:?}",
        out.status
    );
    assert_eq!(err.lines().count(), 1, "{what}: stderr {err:?}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert!(out.stdout.is_empty(), "{what}: stdout {:?}", stdout(out));
}

/// An external tool a test needs (promtool, prometheus, systemd-analyze): its path, or
/// `None` after printing why the test is skipped. Under CI (`$CI` set) a missing tool
/// fails the test instead, because `.ci/run` installs them.
pub fn tool(name: &str, package: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is required under CI (apt package {package}; .ci/run installs it)"
        );
        eprintln!("SKIPPED: {name} not found (install the {package} package to run this test)");
    }
    found
}

/// A self-signed certificate for 127.0.0.1 and its key, `cert.pem` and `key.pem` in
/// `dir`; `None` (the test skipped) without openssl. Not a CA: webpki (`gpupeek fleet`'s
/// client) refuses a CA certificate as a server's own, and curl trusts it as it is.
pub fn certificate(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let openssl = tool("openssl", "openssl")?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let mut cmd = Command::new(openssl);
    cmd.args([
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
    ])
    .args(["-nodes", "-days", "2", "-subj", "/CN=gpupeek-test"])
    .args(["-addext", "subjectAltName=IP:127.0.0.1"])
    .args(["-addext", "basicConstraints=critical,CA:FALSE"])
    .arg("-keyout")
    .arg(&key)
    .arg("-out")
    .arg(&cert);
    let out = run_with_watchdog(cmd);
    assert!(out.status.success(), "openssl: {}", stderr(&out));
    Some((cert, key))
}

/// Steps the fake NVML through `phases` (`scenario(util, used_gib)` each), waiting each
/// time until GPU 0's history ring holds a sample of that utilisation.
pub fn record_history_phases(
    sandbox: &Sandbox,
    daemon: &Daemon,
    scenario: impl Fn(u32, u64) -> serde_json::Value,
    phases: &[(u32, u64)],
) {
    for &(util, used_gib) in phases {
        sandbox.write_scenario(&scenario(util, used_gib));
        wait_for(&format!("a history sample at {util} %"), daemon, || {
            let history = sandbox.segment().history(0).unwrap().unwrap();
            history
                .samples
                .last()
                .is_some_and(|s| u32::from(s.util_gpu_pct) == util)
        });
    }
}

/// The repository's root (for contrib/, man/, scripts/).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds contrib/c/gpupeek-read.c, the example C reader, into the sandbox; `None` when
/// there is no C compiler outside CI.
pub fn compile_c_reader(sandbox: &Sandbox) -> Option<PathBuf> {
    compile_c(
        sandbox,
        &repo().join("contrib/c/gpupeek-read.c"),
        "gpupeek-read",
    )
}

/// Compiles the C program `source` into `sandbox.dir/out`, with contrib/c on the include
/// path and as strictly as contrib/README.md says; `None` when there is no C compiler
/// outside CI.
pub fn compile_c(sandbox: &Sandbox, source: &Path, out: &str) -> Option<PathBuf> {
    let cc = tool("cc", "gcc")?;
    let exe = sandbox.dir.join(out);
    let mut cmd = Command::new(cc);
    cmd.args([
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-pedantic",
        "-O2",
        "-I",
    ])
    .arg(repo().join("contrib/c"))
    .arg("-o")
    .arg(&exe)
    .arg(source);
    let built = run_with_watchdog(cmd);
    assert!(built.status.success(), "cc failed:\n{}", stderr(&built));
    Some(exe)
}

/// A plain HTTP/1.0 GET (or another method) to a server on this machine: (status, body).
pub fn http(method: &str, addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("server accepts connections");
    stream.set_read_timeout(Some(WATCHDOG)).unwrap();
    write!(stream, "{method} {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or((response.as_str(), ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {head:?}"));
    (status, body.to_owned())
}

/// A long-running child (gpupeek serve, prometheus), killed when dropped.
pub struct Background {
    /// The process.
    pub child: Child,
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Starts a real Prometheus (`prometheus`, the binary) with `config` (its YAML) and its
/// database in `sandbox`, logging to `prometheus.log` there; returns the server (killed
/// when dropped) and its web address, `127.0.0.1:PORT`.
pub fn start_prometheus(
    prometheus: &Path,
    sandbox: &Sandbox,
    config: &str,
) -> (Background, String) {
    let path = sandbox.dir.join("prometheus.yml");
    std::fs::write(&path, config).unwrap();
    let web = format!("127.0.0.1:{}", free_port());
    let child = Command::new(prometheus)
        .arg(format!("--config.file={}", path.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            sandbox.dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(sandbox.dir.join("prometheus.log")).unwrap())
        .spawn()
        .unwrap();
    (Background { child }, web)
}

/// Runs `cmd` with `input` on its stdin (then closed), and its output.
pub fn run_with_input(mut cmd: Command, input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// `promtool check metrics` on `text`: (success, everything it printed).
pub fn promtool_check(promtool: &Path, text: &str) -> (bool, String) {
    let mut cmd = Command::new(promtool);
    cmd.args(["check", "metrics"]);
    let out = run_with_input(cmd, text.as_bytes());
    (
        out.status.success(),
        format!("{}{}", stdout(&out), stderr(&out)),
    )
}

/// `gpupeek serve` on a free loopback port of `sandbox`'s segment, run by `command` (the
/// client, or a wrapper that execs it; the client executes gpupeek-serve in the same
/// process) with `extra` flags; waits for the line saying where it listens and returns
/// the server and that URL without `/metrics` (`http://127.0.0.1:PORT`, or `https://`
/// with TLS).
pub fn spawn_serve(
    sandbox: &Sandbox,
    mut command: Command,
    extra: &[&std::ffi::OsStr],
) -> (Background, String) {
    let mut child = command
        .args(["serve", "--listen", "127.0.0.1:0", "--shm", &sandbox.shm])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stderr.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let url = line
        .split(" at ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix("/metrics\n"))
        .unwrap_or_else(|| panic!("serve did not say where it listens: {line:?}"))
        .to_owned();
    (Background { child }, url)
}

/// Runs tmux on a private server socket, killed when dropped.
pub struct Tmux {
    /// The tmux program.
    pub tmux: PathBuf,
    /// The server's socket name (`-L`).
    pub socket: String,
}

impl Tmux {
    /// `command` (a shell line) in a detached session `w` of `x`×`y` on a tmux server of
    /// its own (`socket`), whose pane stays after the command ends, to read how it ended;
    /// `None` without tmux outside CI.
    pub fn start(socket: String, x: u16, y: u16, command: &str) -> Option<Tmux> {
        let t = Tmux {
            tmux: tool("tmux", "tmux")?,
            socket,
        };
        let (x, y) = (x.to_string(), y.to_string());
        t.run(&["new-session", "-d", "-s", "w", "-x", &x, "-y", &y]);
        t.run(&["set-option", "-t", "w", "remain-on-exit", "on"]);
        t.run(&["respawn-pane", "-k", "-t", "w", command]);
        Some(t)
    }

    /// Runs `tmux -L SOCKET ARGS...`, which must succeed; its stdout.
    pub fn run(&self, args: &[&str]) -> String {
        let mut cmd = Command::new(&self.tmux);
        cmd.arg("-L").arg(&self.socket).args(args);
        let out = run_with_watchdog(cmd);
        assert!(out.status.success(), "tmux {args:?}: {}", stderr(&out));
        stdout(&out)
    }

    /// The screen of the pane of session `w` once `check` holds on it; fails the test
    /// with the screen after [`WATCHDOG`].
    pub fn until(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WATCHDOG;
        loop {
            let s = self.run(&["capture-pane", "-p", "-t", "w"]);
            if check(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new(&self.tmux)
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .status();
    }
}

/// gpupeek-top (built with the others by [`bins`]; a binary of its own: the one-shot
/// gpupeek links no terminal UI).
pub fn top_bin() -> &'static Path {
    &bins().top
}

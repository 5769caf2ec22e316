"""Tests of gpupeek's ResourceMetricCollector (gpupeek_collector.py) and its logger
adapters (gpupeek_callbacks.py) against a live gpupeekd on the fake NVML, side by side with
nvitop 1.7.2's own collector on the same fake NVML.

Run by the Rust end-to-end suite (tests/e2e/tests/e2e/contrib.rs), which starts the daemon
and sets:
  GPUPEEK_SHM             the daemon's segment
  GPUPEEK_TEST_SCENARIO   the fake NVML's scenario file (these tests rewrite it)
and, to run nvitop's collector on the same fake NVML:
  GPUPEEK_TEST_NVITOP     nvitop's executable (its virtual environment's python runs it)
  GPUPEEK_TEST_NVML_DIR   a directory whose libnvidia-ml.so.1 is the fake NVML
  GPUPEEK_TEST_MIG        1 when the daemon started with GPU 0 in MIG mode (the Mig tests)
  GPUPEEK_TEST_DAEMON_PID the daemon's pid, to hold it still (SIGSTOP) while a test reads
                          two windows that must come from one publish (TieredHistory)

`python3 test_collector.py --pair NAME` is the other half of a side-by-side test: run by
nvitop's python, it drives both collectors through scenario NAME and prints the results as
JSON for the test to compare.
"""

import contextlib
import io
import json
import math
import os
import signal
import subprocess
import sys
import time
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpupeek  # noqa: E402

GIB, MIB = 1 << 30, 1 << 20
SHM = os.environ.get("GPUPEEK_SHM", "")
SCENARIO = os.environ.get("GPUPEEK_TEST_SCENARIO", "")
NVITOP = os.environ.get("GPUPEEK_TEST_NVITOP")
NVML_DIR = os.environ.get("GPUPEEK_TEST_NVML_DIR")
DAEMON_PID = os.environ.get("GPUPEEK_TEST_DAEMON_PID")
# The daemon reads a GPU's identity once: the one contrib.rs started it with.
GPU0_UUID = "GPU-11111111-2222-3333-4444-555555555555"
GPU1_UUID = "GPU-bbbbbbbb-0000-0000-0000-000000000000"
# Two phases with known values (memory in whole MiB: the history's resolution).
PHASES = {
    "A": {"utilization_gpu_pct": 20, "utilization_memory_pct": 5, "temperature_c": 40,
          "power_usage_mw": 100000, "memory_used_bytes": 10 * GIB, "fan_speed_pct": 30},
    "B": {"utilization_gpu_pct": 80, "utilization_memory_pct": 50, "temperature_c": 70,
          "power_usage_mw": 300000, "memory_used_bytes": 20 * GIB, "fan_speed_pct": 60},
}
# The daemon's history ring steps every max(period, 1 s): one sampling step.
STEP_S = 1.0


def write_scenario(phase="A", processes=(), mig=False):
    """GPU 0 in `phase` with `processes` [(pid, bytes) or (pid, bytes, gpu instance)];
    with `mig`, GPU 0 split into a 3g.40gb (GPU instance 1) and a 2g.20gb (5)."""
    gpu0 = {"name": "NVIDIA H100 80GB HBM3", "uuid": GPU0_UUID,
            "memory_total_bytes": 85520809984, "power_limit_mw": 700000,
            "processes": [dict({"pid": p[0], "used_gpu_memory_bytes": p[1]},
                               **({"gpu_instance_id": p[2], "compute_instance_id": 0}
                                  if len(p) > 2 else {})) for p in processes]}
    gpu0.update(PHASES[phase])
    if mig:
        gpu0["mig"] = {"instances": [
            {"gpu_instance_id": gi, "compute_instance_id": 0, "profile_id": profile,
             "uuid": f"MIG-{gi:08x}-7d1c-5b8e-9d2a-{profile:012x}"}
            for gi, profile in ((1, 9), (5, 14))]}
    scenario = {"gpus": [gpu0, {"name": "NVIDIA A100-SXM4-40GB", "uuid": GPU1_UUID,
                                "memory_total_bytes": 42949672960}]}
    tmp = SCENARIO + ".collector.tmp"
    with open(tmp, "w") as f:
        json.dump(scenario, f)
    os.rename(tmp, SCENARIO)


def wait_phase(phase, timeout=20.0):
    """Until the daemon publishes `phase` on GPU 0."""
    want = PHASES[phase]["utilization_gpu_pct"]
    deadline = time.monotonic() + timeout
    while gpupeek.snapshot(SHM).gpus[0].util_gpu_pct != want:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for phase {phase}")
        time.sleep(0.01)


def is_gpu_key(key):
    return "/gpu:" in key.split("/pid:")[0] or "/cuda:" in key.split("/pid:")[0]


# ---- the side-by-side half, run by nvitop's python ---------------------------------------

def pair_values():
    """Both collectors over the same window: phase A, then phase B, then collect."""
    import nvitop
    theirs = nvitop.ResourceMetricCollector(interval=0.1)
    ours = gpupeek.ResourceMetricCollector(interval=0.1)
    write_scenario("A")
    wait_phase("A")
    time.sleep(0.2)
    with theirs(tag="w"), ours(tag="w"):
        time.sleep(2.0)
        write_scenario("B")
        wait_phase("B")
        time.sleep(2.0)
        result = {"theirs": theirs.collect(), "ours": ours.collect()}
        # Again at once: the daemon has (most likely) not published in between, so the
        # windows are extended rather than recomputed; the figures must not move.
        result["ours again"] = ours.collect()
        return result


def pair_nesting():
    """The same sequence of tag operations on both collectors: what each step returns."""
    import nvitop
    out = {}
    write_scenario("A")
    wait_phase("A")
    for name, c in (("theirs", nvitop.ResourceMetricCollector(interval=0.1)),
                    ("ours", gpupeek.ResourceMetricCollector(interval=0.1))):
        steps = []

        def step(what, fn):
            try:
                result = fn()
            except Exception as e:  # noqa: BLE001 - the type is what is compared
                steps.append([what, "raises " + type(e).__name__])
                return None
            if isinstance(result, dict):
                steps.append([what, sorted({k.split("/host/")[0] for k in result
                                            if "/host/" in k and "/pid:" not in k})])
            else:
                steps.append([what, "ok"])
            return result
        step("collect before any tag", c.collect)
        step("deactivate() with none active", c.deactivate)
        step("deactivate('x') with none active", lambda: c.deactivate("x"))
        step("clear() with none active", c.clear)
        step("clear('x') with none active", lambda: c.clear("x"))
        step("activate train", lambda: c.activate("train"))
        step("collect", c.collect)
        step("activate train again", lambda: c.activate("train"))
        step("activate batch", lambda: c.activate("batch"))
        step("collect", c.collect)
        step("clear('nope')", lambda: c.clear("nope"))
        step("deactivate('nope')", lambda: c.deactivate("nope"))
        step("deactivate()", c.deactivate)
        step("collect", c.collect)
        step("activate batch", lambda: c.activate("batch"))
        step("deactivate('train') stops both", lambda: c.deactivate("train"))
        step("collect", c.collect)
        with c(tag="epoch"):
            time.sleep(0.6)
            with c(tag="step"):
                time.sleep(0.3)
                step("clear('epoch') clears both", lambda: c.clear("epoch"))
                inner = c.collect()
                steps.append(["durations after clear", [
                    round(inner["epoch/step/duration (s)"], 1)]])
        step("collect after the with blocks", c.collect)
        # The outer window holds what happened inside the inner one.
        with c(tag="outer"):
            time.sleep(1.5)
            write_scenario("B")
            wait_phase("B")
            time.sleep(0.2)
            with c(tag="inner"):
                time.sleep(1.5)
                inner = c.collect()
            outer = c.collect()
            write_scenario("A")
            wait_phase("A")
        key = "gpu:0/gpu_utilization (%)"
        steps.append(["inner min/max", [inner[f"outer/inner/{key}/min"],
                                        inner[f"outer/inner/{key}/max"]]])
        steps.append(["outer min/max", [outer[f"outer/{key}/min"], outer[f"outer/{key}/max"]]])
        out[name] = steps
    return out


def pair_mig():
    """Both collectors on GPU 0 split into two MIG devices, this process in the second
    (the daemon was started in MIG mode: it takes MIG mode on at start, not later)."""
    import nvitop
    write_scenario("A", [(os.getpid(), GIB, 5)], mig=True)
    deadline = time.monotonic() + 20
    while True:
        snap = gpupeek.snapshot(SHM)
        if len(snap.mig) == 2 and any(p.pid == os.getpid() for p in snap.processes):
            break
        if time.monotonic() > deadline:
            raise AssertionError("the daemon never showed the MIG devices and process")
        time.sleep(0.05)
    try:
        theirs = nvitop.ResourceMetricCollector(interval=0.1)
        ours = gpupeek.ResourceMetricCollector(interval=0.1)
        with theirs(tag="m"), ours(tag="m"):
            time.sleep(0.5)
            return {"theirs": theirs.collect(), "ours": ours.collect(), "pid": os.getpid()}
    finally:
        write_scenario("A", mig=True)


def pair_psutil():
    """The host figures read from /proc beside psutil's, at the same moments."""
    import psutil
    import gpupeek_collector as gc
    out = []
    for _ in range(3):
        psutil.cpu_percent()
        ours_before = gc._cpu_times()
        time.sleep(0.5)
        theirs_cpu = psutil.cpu_percent()
        ours, _, _ = gc._host_sample(ours_before)
        vm, swap = psutil.virtual_memory(), psutil.swap_memory()
        out.append({"theirs": {"host/cpu_percent (%)": theirs_cpu,
                               "host/memory_percent (%)": vm.percent,
                               "host/swap_percent (%)": swap.percent,
                               "host/memory_used (GiB)": vm.used / GIB,
                               "host/load_average (%) (1 min)": psutil.getloadavg()[0]},
                    "ours": ours})
    return out


PAIRS = {"values": pair_values, "nesting": pair_nesting, "mig": pair_mig, "psutil": pair_psutil}


# ---- the tests ---------------------------------------------------------------------------

def run_pair(name):
    if not NVITOP or not NVML_DIR:
        raise unittest.SkipTest("set GPUPEEK_TEST_NVITOP and GPUPEEK_TEST_NVML_DIR")
    python = os.path.join(os.path.dirname(NVITOP), "python")
    env = dict(os.environ, LD_LIBRARY_PATH=NVML_DIR, FAKE_NVML_SCENARIO=SCENARIO)
    env.pop("FAKE_NVML_CALLS_DIR", None)
    out = subprocess.run([python, os.path.abspath(__file__), "--pair", name], env=env,
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise AssertionError(f"--pair {name} failed:\n{out.stdout}{out.stderr}")
    return json.loads(out.stdout)


def same(a, b, tol=1e-6):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol * max(1.0, abs(a))


class NvitopParity(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.values = run_pair("values")

    def test_same_keys_as_nvitops_collector_except_our_pid_keys(self):
        theirs, ours = self.values["theirs"], self.values["ours"]
        mine = {k for k in ours if "/pid:" not in k}
        self.assertEqual(set(theirs) - mine, set(), "keys nvitop has and we lack")
        self.assertEqual(mine - set(theirs), set(), "keys we have and nvitop lacks")
        self.assertFalse([k for k in theirs if "/pid:" in k], "nvitop 1.7.2 shows no pid keys")

    def test_gpu_values_equal_nvitops_within_one_sampling_step(self):
        theirs, ours = self.values["theirs"], self.values["ours"]
        window = ours["w/duration (s)"]
        checked = 0
        for key, value in theirs.items():
            if not is_gpu_key(key):
                continue
            metric = key.rsplit("/", 2)[1]
            # How far phase B moved each metric from phase A (GPU 0; GPU 1 stays put).
            spread = {"gpu_utilization (%)": 60, "memory_utilization (%)": 45,
                      "temperature (C)": 30, "power_usage (W)": 200, "fan_speed (%)": 30,
                      "memory_used (MiB)": 10240, "memory_free (MiB)": 10240,
                      "memory_percent (%)": 12.6}.get(metric, 0) if "gpu:0" in key else 0
            if key.endswith("/mean"):
                # Windowed keys: the history's step; fan speed is sampled (at activate
                # and collect), so its mean may be off by half the change.
                tol = spread * (0.5 if metric == "fan_speed (%)" else STEP_S / window)
                ok = same(value, ours[key]) or abs(value - ours[key]) <= tol + 0.1
            else:
                ok = same(value, ours[key], 1e-3)
            self.assertTrue(ok, f"{key}: nvitop {value}, gpupeek {ours[key]}")
            checked += 1
        self.assertGreater(checked, 70)
        self.assertEqual(ours["w/gpu:0/gpu_utilization (%)/min"], 20.0)
        self.assertEqual(ours["w/gpu:0/gpu_utilization (%)/max"], 80.0)
        self.assertEqual(ours["w/gpu:0/power_usage (W)/last"], 300.0)
        self.assertTrue(math.isnan(ours["w/gpu:1/temperature (C)/mean"]), "N/A is NaN")

    def test_a_window_extended_without_a_publish_equals_a_recomputed_one(self):
        first, again = self.values["ours"], self.values["ours again"]
        for key, value in first.items():
            if is_gpu_key(key):
                self.assertTrue(same(value, again[key], 1e-2), f"{key}: {value} then {again[key]}")

    def test_host_values_agree_with_nvitops_psutil(self):
        theirs, ours = self.values["theirs"], self.values["ours"]
        for key, tol in (("host/memory_percent (%)/last", 2.0),
                         ("host/memory_used (GiB)/last", 0.25),
                         ("host/swap_percent (%)/last", 2.0),
                         ("host/load_average (%) (15 min)/last", 0.5)):
            if f"w/{key}" in theirs:
                self.assertLessEqual(abs(theirs[f"w/{key}"] - ours[f"w/{key}"]), tol, key)
        cpu = ours["w/host/cpu_percent (%)/mean"]
        self.assertTrue(0.0 <= cpu <= 100.0, cpu)
        self.assertLess(abs(theirs["w/duration (s)"] - ours["w/duration (s)"]), 0.5)

    def test_host_figures_are_psutils(self):
        """Read within microseconds of psutil's reads: the same figures, give or take what
        changed in between (one clock tick of CPU time, a few pages of memory)."""
        for pair in run_pair("psutil"):
            theirs, ours = pair["theirs"], pair["ours"]
            for key, tol in (("host/cpu_percent (%)", 3.0), ("host/memory_percent (%)", 0.3),
                             ("host/swap_percent (%)", 0.3), ("host/memory_used (GiB)", 0.02),
                             ("host/load_average (%) (1 min)", 0.01)):
                self.assertLessEqual(abs(theirs[key] - ours[key]), tol,
                                     f"{key}: psutil {theirs[key]}, gpupeek {ours[key]}")

    def test_nesting_behaves_as_nvitops(self):
        pairs = run_pair("nesting")
        theirs, ours = pairs["theirs"], pairs["ours"]
        for t, o in zip(theirs, ours):
            self.assertEqual(t, o, f"nvitop {t} vs gpupeek {o}")
        self.assertEqual(len(theirs), len(ours))
        self.assertIn(["inner min/max", [80.0, 80.0]], ours)
        self.assertIn(["outer min/max", [20.0, 80.0]], ours)


class Mig(unittest.TestCase):
    """Run alone (`test_collector.py Mig`) by contrib.rs against a daemon started with GPU 0
    in MIG mode (GPUPEEK_TEST_MIG=1)."""

    def setUp(self):
        if os.environ.get("GPUPEEK_TEST_MIG") != "1":
            self.skipTest("needs a daemon started in MIG mode (GPUPEEK_TEST_MIG=1)")

    def test_mig_devices_have_nvitops_keys_and_values_and_hold_the_processes(self):
        pair = run_pair("mig")
        theirs, ours, pid = pair["theirs"], pair["ours"], pair["pid"]
        mine = [k for k in ours if "/pid:" not in k]
        self.assertEqual(list(theirs), mine, "nvitop's keys in nvitop's order")
        for key, value in theirs.items():
            if "gpu:(" in key:
                self.assertTrue(same(value, ours[key]), f"{key}: nvitop {value}, gpupeek {ours[key]}")
        self.assertEqual(ours["m/gpu:(0, 1)/memory_total (MiB)/last"],
                         theirs["m/gpu:(0, 1)/memory_total (MiB)/last"])
        self.assertEqual(ours[f"m/pid:{pid}/gpu:(0, 1)/gpu_memory (MiB)/last"], 1024.0,
                         "the process is on its MIG device, not on the GPU")
        self.assertFalse([k for k in ours if f"pid:{pid}/gpu:0/" in k])


class PidKeys(unittest.TestCase):
    def test_children_and_grandchildren_have_pid_keys_others_do_not(self):
        child = subprocess.Popen(
            [sys.executable, "-c",
             "import subprocess, sys, time\n"
             "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
             "print(g.pid, flush=True)\n"
             "time.sleep(120)\n"],
            stdout=subprocess.PIPE, text=True)
        grandchild = None
        try:
            grandchild = int(child.stdout.readline())
            write_scenario("A", [(child.pid, 2 * GIB), (grandchild, GIB), (1, 3 * GIB)])
            deadline = time.monotonic() + 20
            while {child.pid, grandchild, 1} - {p.pid for p in gpupeek.snapshot(SHM).processes}:
                self.assertLess(time.monotonic(), deadline, "the daemon never listed them")
                time.sleep(0.05)
            ours = gpupeek.ResourceMetricCollector(shm=SHM, interval=0.1)
            everyone = gpupeek.ResourceMetricCollector(shm=SHM, root_pids={1}, interval=0.1)
            with ours(tag="w"), everyone(tag="all"):
                time.sleep(0.3)
                mine, all_ = ours.collect(), everyone.collect()
            key = "w/pid:{}/gpu:0/gpu_memory (MiB)/last"
            self.assertEqual(mine[key.format(child.pid)], 2048.0)
            self.assertEqual(mine[key.format(grandchild)], 1024.0)
            self.assertNotIn(key.format(1), mine, "pid 1 does not descend from us")
            self.assertEqual(all_["all/pid:1/gpu:0/gpu_memory (MiB)/last"], 3072.0)
            self.assertIn(f"w/pid:{child.pid}/host/running_time (min)", mine)
            self.assertIn(f"w/pid:{child.pid}/gpu:0/gpu_memory_percent (%)/mean", mine)
            self.assertIn(f"w/pid:{child.pid}/host/cpu_percent (%)/max", mine)
            self.assertNotIn(f"w/pid:{child.pid}/host/running_time (min)/max", mine)
        finally:
            if grandchild is not None:
                with contextlib.suppress(OSError):
                    os.kill(grandchild, 9)
            child.kill()
            child.wait()
            child.stdout.close()
            write_scenario("A")


class DaemonDown(unittest.TestCase):
    def test_collector_runs_and_says_once_without_a_daemon(self):
        script = (
            "import math, sys, time\n"
            f"sys.path.insert(0, {HERE!r})\n"
            "import gpupeek\n"
            "c = gpupeek.ResourceMetricCollector(interval=0.05)\n"
            "d = gpupeek.ResourceMetricCollector(devices=[0], interval=0.05)\n"
            "with c(tag='a'), d(tag='b'):\n"
            "    time.sleep(0.1)\n"
            "    m, n = c.collect(), d.collect()\n"
            "with gpupeek.vram('x'):\n"
            "    pass\n"
            "print(len([k for k in m if '/host/' in k]), len([k for k in m if 'gpu:' in k]),\n"
            "      all(math.isnan(v) for k, v in n.items() if 'gpu:0' in k),\n"
            "      len([k for k in n if 'gpu:0' in k]))\n")
        env = dict(os.environ, GPUPEEK_SHM=f"gpupeek-test-absent-{os.getpid()}")
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        host, gpu, nan, gpu0 = out.stdout.split()
        self.assertGreaterEqual(int(host), 16, "host keys keep coming")
        self.assertEqual(int(gpu), 0, "no GPU known without a daemon")
        self.assertEqual((nan, int(gpu0)), ("True", 40), "an asked-for GPU's keys are NaN")
        lines = out.stderr.splitlines()
        self.assertEqual(len(lines), 1, out.stderr)
        self.assertTrue(lines[0].startswith("gpupeek: GPU metrics not collected: no segment"),
                        lines[0])


    def test_a_daemon_that_stops_publishing_turns_gpu_keys_nan_and_says_so_once(self):
        """A frozen copy of the live segment is a daemon that stopped mid-run: live at
        first, stale once its heartbeat is three periods (at least 1 s) old."""
        frozen = f"{SHM}-frozen"
        # The copy is made by the child once Python and gpupeek are loaded: a loaded
        # machine can take over a second to start Python, which would make the copy
        # stale before the first collect.
        try:
            script = (
                "import math, os, sys, time\n"
                f"sys.path.insert(0, {HERE!r})\n"
                "import gpupeek\n"
                f"with open('/dev/shm/{SHM}', 'rb') as f:\n"
                "    data = f.read()\n"
                f"fd = os.open('/dev/shm/{frozen}', os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)\n"
                "os.write(fd, data)\n"
                "os.close(fd)\n"
                f"c = gpupeek.ResourceMetricCollector(shm={frozen!r}, interval=0.1)\n"
                "with c(tag='a'):\n"
                "    before = c.collect()['a/gpu:0/memory_total (MiB)/last']\n"
                "    time.sleep(1.5)\n"
                "    m = c.collect()\n"
                "    m = c.collect()\n"
                "print(before, m['a/gpu:0/memory_total (MiB)/last'],\n"
                "      m['a/gpu:0/gpu_utilization (%)/mean'], 'a/host/cpu_percent (%)/mean' in m)\n")
            out = subprocess.run([sys.executable, "-c", script], capture_output=True,
                                 text=True, timeout=60)
        finally:
            if os.path.exists(f"/dev/shm/{frozen}"):
                os.unlink(f"/dev/shm/{frozen}")
        self.assertEqual(out.returncode, 0, out.stderr)
        before, total, util, host = out.stdout.split()
        self.assertGreater(float(before), 0, "live at first")
        # A sampled key keeps its last value once samples turn N/A, as nvitop's do; a key
        # from the history is NaN while the daemon is not live.
        self.assertEqual((total, util, host), (before, "nan", "True"), out.stdout)
        lines = out.stderr.splitlines()
        self.assertEqual(len(lines), 1, out.stderr)
        self.assertIn("the daemon has stopped publishing", lines[0])


class Devices(unittest.TestCase):
    def test_cuda_devices_follow_cuda_visible_devices(self):
        snap = gpupeek.snapshot(SHM)
        from gpupeek_collector import parse_cuda_visible_devices as parse
        self.assertEqual([d[0] for d in parse(None, snap)], [0, 1])
        self.assertEqual([d[0] for d in parse("1,0", snap)], [1, 0])
        self.assertEqual([d[0] for d in parse("GPU-bbbb", snap)], [1], "a unique UUID prefix")
        self.assertEqual([d[0] for d in parse(f"{GPU0_UUID},7,1", snap)], [0])
        self.assertEqual(parse("0,0", snap), [], "a repeated entry hides every GPU")
        self.assertEqual(parse("0,GPU-bbbb", snap), [(0, GPU0_UUID, None)], "not both kinds")
        self.assertEqual(parse("", snap), [])
        os.environ["CUDA_VISIBLE_DEVICES"] = "1"
        try:
            [dev] = gpupeek.CudaDevice.all(SHM)
        finally:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        self.assertEqual((dev.cuda_index, dev.index, dev.uuid()), (0, 1, GPU1_UUID))
        c = gpupeek.ResourceMetricCollector([dev], shm=SHM)
        with c(tag="t"):
            keys = c.collect()
        self.assertIn("t/cuda:0 (gpu:1)/memory_total (MiB)/mean", keys)
        self.assertEqual(keys["t/cuda:0 (gpu:1)/memory_total (MiB)/last"], 40960.0)


class Daemonize(unittest.TestCase):
    def test_daemonize_calls_back_every_interval_until_false(self):
        calls = []
        stopped = []
        c = gpupeek.ResourceMetricCollector(shm=SHM, interval=0.05)
        thread = c.daemonize(lambda m: calls.append(m) or len(calls) < 4,
                             on_stop=stopped.append, tag="bg")
        thread.join(10)
        self.assertFalse(thread.is_alive())
        self.assertEqual(len(calls), 4)
        self.assertIn("bg/gpu:0/gpu_utilization (%)/mean", calls[-1])
        self.assertEqual(stopped, [c])
        self.assertGreater(calls[-1]["bg/duration (s)"], 0.1)


class Vram(unittest.TestCase):
    def test_vram_reports_the_blocks_mean(self):
        write_scenario("A")
        wait_phase("A")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            with gpupeek.vram("block", shm=SHM, settle=False) as m:
                time.sleep(0.3)
        self.assertEqual(m.gpus[0].mean_bytes, 10 * GIB)
        self.assertIn(", mean 10240 MiB)", err.getvalue())


# The tiered-history daemon (contrib.rs, GPUPEEK_TEST_TIERED=1): GPUPEEKD_TEST_HISTORY_UNIT_MS
# is 50, so a track keeps raw samples for 30 s and 0.5 s and 3 s buckets beyond; GPU 0
# alternates between these two phases every second (the fake's "schedule", in Unix
# time); --history-tracks 1 leaves GPU 1 without a track.
TIERED_PHASES = ({"util": 20, "mib": 1000, "mw": 100000, "temp": 40},
                 {"util": 80, "mib": 3000, "mw": 300000, "temp": 70})
TIERED_STEP_S = 1.0


class TieredHistory(unittest.TestCase):
    """Run alone (`test_collector.py TieredHistory`) by contrib.rs against a daemon whose
    history unit the test hook shortens (GPUPEEK_TEST_TIERED=1)."""

    def setUp(self):
        if os.environ.get("GPUPEEK_TEST_TIERED") != "1":
            self.skipTest("needs the tiered-history daemon (GPUPEEK_TEST_TIERED=1)")

    @staticmethod
    def _at_cycle_start():
        """Sleeps until the schedule starts its first phase again (Unix time)."""
        cycle = TIERED_STEP_S * len(TIERED_PHASES)
        time.sleep(cycle - time.time() % cycle)

    def test_a_window_longer_than_the_raw_samples_has_the_schedules_mean(self):
        c = gpupeek.ResourceMetricCollector(devices=[0], shm=SHM, interval=0.5)
        seg = gpupeek.Segment(SHM)
        self.assertGreater(seg.track_count(), 0)
        track = seg.track(seg.find_track(seg._slot_uuid(0)), keep=1)
        raw_span_s = track["raw_step_ns"] * seg._tiers["raw_slots"] / 1e9
        self._at_cycle_start()
        start = gpupeek._mono_ns()
        opened, integral = seg.gpu_point(0), seg.gpu_integral(0)
        with c(tag="long"):
            # Whole cycles, longer than the raw samples reach.
            cycles = int(raw_span_s // (TIERED_STEP_S * 2)) + 2
            time.sleep(cycles * TIERED_STEP_S * 2 - time.time() % (TIERED_STEP_S * 2) - 0.01)
            m = c.collect()
        end = gpupeek._mono_ns()
        self.assertGreater(m["long/duration (s)"], raw_span_s)
        # Each phase holds half the window: the mean is the phases' midpoint, within 3 %
        # of the phases' difference: a sample or two at the window's edges (a sample
        # every 50 ms), and on a loaded machine ticks late enough to catch the phase
        # before (the fake changes phase on Unix time, the daemon samples on its ticks).
        want = {"gpu_utilization (%)": 50.0, "memory_used (MiB)": 2000.0,
                "power_usage (W)": 200.0, "temperature (C)": 55.0}
        spread = {"gpu_utilization (%)": 60, "memory_used (MiB)": 2000,
                  "power_usage (W)": 200, "temperature (C)": 30}
        for name, value in want.items():
            key = f"long/gpu:0/{name}"
            tol = spread[name] * 0.03
            self.assertLessEqual(abs(m[f"{key}/mean"] - value), tol, (key, m[f"{key}/mean"]))
        self.assertEqual(m["long/gpu:0/gpu_utilization (%)/min"], 20.0)
        self.assertEqual(m["long/gpu:0/gpu_utilization (%)/max"], 80.0)
        self.assertIn(m["long/gpu:0/gpu_utilization (%)/last"], (20.0, 80.0))
        # First (the integrals' mean counts the samples up to now, not to `end`): the
        # collector's mean is the integrals' (a sample or two later here).
        exact = seg.gpu_window(0, start, end, opened, integral)
        self.assertLessEqual(abs(exact["util_gpu_pct"].mean
                                 - m["long/gpu:0/gpu_utilization (%)/mean"]),
                             60 * 2 / (m["long/duration (s)"] / 0.05))
        # The window's start is older than the raw samples: min and max come from the
        # buckets there, and so does the mean without the integrals (sample-weighted).
        # w and `restarted` (below) from the same publish: a publish in between can move
        # the tiers' boundaries (the oldest raw sample goes), and with them the mean.
        # The daemon is held still while both are read (on a loaded machine reading
        # them can take longer than its 50 ms tick every time), else they are read
        # again until one publish holds both.
        moved = integral._replace(start_unix_ns=integral.start_unix_ns + 1)
        held = int(DAEMON_PID) if DAEMON_PID else None
        if held:
            # Right after a publish, so that no record is stopped half written.
            seg.wait_publish(seg.generation(), 1.0)
            os.kill(held, signal.SIGSTOP)
        try:
            for _ in range(50):
                gen = seg.generation()
                w = seg.gpu_window(0, start, end, opened, None)
                restarted = seg.gpu_window(0, start, end, opened, moved)
                if seg.generation() == gen:
                    break
            self.assertEqual(seg.generation(), gen, "no publish held both windows")
        finally:
            if held:
                os.kill(held, signal.SIGCONT)
        self.assertGreater(w["util_gpu_pct"].points, 0)
        self.assertLessEqual(abs(w["util_gpu_pct"].mean - 50.0), 60 * 0.03)
        self.assertLessEqual(abs(exact["util_gpu_pct"].mean - 50.0), 60 * 0.03)
        # A daemon restarted without its history (a new integral start) mid-window: the
        # integrals read at the start no longer apply; the mean comes from the tiers.
        self.assertEqual(restarted["util_gpu_pct"].mean, w["util_gpu_pct"].mean)
        seg.close()

    def test_a_gpu_without_a_track_and_an_older_segment_use_the_raw_ring(self):
        seg = gpupeek.Segment(SHM)
        self.assertIsNone(seg._gpu_track(1), "--history-tracks 1: GPU 1 has no track")
        start = gpupeek._mono_ns()
        opened = seg.gpu_point(1)
        time.sleep(1.5)
        end = gpupeek._mono_ns()
        self.assertEqual(seg.gpu_window(1, start, end, opened),
                         seg._ring_window(1, start, end, opened, seg.gpu_point(1)))
        self.assertIsNotNone(seg.gpu_window(1, start, end, opened)["mem_used_mib"])
        seg._tiers = None  # what a segment of ABI 1.6 or older has
        self.assertEqual(seg.track_count(), 0)
        self.assertEqual(seg.gpu_window(0, start, end, seg.gpu_point(0)),
                         seg._ring_window(0, start, end, seg.gpu_point(0), seg.gpu_point(0)))
        c = gpupeek.ResourceMetricCollector(devices=[0], shm=SHM, interval=0.1)
        seg_c = c._segment()
        seg_c._tiers = None
        with c(tag="old"):
            time.sleep(2.5)
            m = c.collect()
        # The ring steps every second, as the schedule does: which phases its samples
        # caught is chance, but every figure is one of the schedule's.
        lo, hi, mean = (m[f"old/gpu:0/gpu_utilization (%)/{k}"] for k in ("min", "max", "mean"))
        self.assertTrue(20.0 <= lo <= mean <= hi <= 80.0, (lo, mean, hi))
        self.assertIn(lo, (20.0, 80.0))
        seg.close()


class FakeModules:
    """Installs small stand-ins for lightning and keras in sys.modules while in use."""

    def __init__(self):
        class Callback:
            def __init__(self):
                pass
        self.modules = {}
        for name in ("lightning", "lightning.pytorch", "lightning.pytorch.callbacks",
                     "keras", "keras.callbacks"):
            self.modules[name] = types.ModuleType(name)
        self.modules["lightning.pytorch.callbacks"].Callback = Callback
        self.modules["keras.callbacks"].Callback = Callback

    def __enter__(self):
        self.saved = {k: sys.modules.get(k) for k in self.modules}
        sys.modules.update(self.modules)
        import gpupeek_callbacks
        gpupeek_callbacks._BUILT.clear()
        return gpupeek_callbacks

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


class Callbacks(unittest.TestCase):
    def test_tensorboard_helper_writes_every_scalar_under_the_main_tag(self):
        import gpupeek_callbacks
        written = []

        class Writer:
            def add_scalar(self, tag, value, global_step=None, walltime=None):
                written.append((tag, value, global_step))
        c = gpupeek.ResourceMetricCollector(shm=SHM)
        with c(tag="train"):
            metrics = c.collect()
        gpupeek_callbacks.add_scalar_dict(Writer(), "resources", metrics, global_step=7)
        self.assertEqual(len(written), len(metrics))
        total = gpupeek.snapshot(SHM).gpus[0].mem_total_bytes / MIB
        self.assertIn(("resources/train/gpu:0/memory_total (MiB)/mean", total, 7), written)
        plain = gpupeek_callbacks.scalars(metrics)
        self.assertFalse(any(math.isnan(v) for v in plain.values()), "NaN left out")
        self.assertIn("train/gpu:0/gpu_utilization (%)/mean", plain)

    def test_lightning_callback_logs_each_epoch_through_the_trainers_logger(self):
        logged = []
        with FakeModules() as cb:
            logger_cls = cb.LightningGpuStatsLogger
            cb_ = logger_cls(collector=gpupeek.ResourceMetricCollector(shm=SHM),
                             log_every_n_steps=2)
            trainer = types.SimpleNamespace(
                is_global_zero=True, global_step=0,
                logger=types.SimpleNamespace(log_metrics=lambda m, step: logged.append((step, m))))
            cb_.on_train_epoch_start(trainer, None)
            for i in range(4):
                trainer.global_step = i + 1
                cb_.on_train_batch_end(trainer, None, None, None, i)
            cb_.on_train_epoch_end(trainer, None)
        self.assertEqual([step for step, _ in logged], [2, 4, 4])
        self.assertIn("resources/gpu:0/gpu_utilization (%)/mean", logged[-1][1])
        self.assertIsNone(cb_.collector._buffer, "the epoch's tag is deactivated")

    def test_keras_callback_adds_figures_to_the_epoch_logs(self):
        with FakeModules() as cb:
            k = cb.KerasGpuStatsLogger(collector=gpupeek.ResourceMetricCollector(shm=SHM))
            logs = {"loss": 0.5}
            k.on_epoch_begin(0, {})
            k.on_train_batch_end(0, {})
            k.on_epoch_end(0, logs)
        self.assertEqual(logs["loss"], 0.5)
        self.assertIn("resources/gpu:0/memory_used (MiB)/last", logs)

    def test_adapters_say_what_is_missing_without_their_framework(self):
        import gpupeek_callbacks
        gpupeek_callbacks._BUILT.clear()
        saved = {k: sys.modules.get(k) for k in ("lightning", "pytorch_lightning",
                                                 "lightning.pytorch", "lightning.pytorch.callbacks",
                                                 "pytorch_lightning.callbacks")}
        for k in saved:
            sys.modules[k] = None  # import fails
        try:
            with self.assertRaisesRegex(ImportError, "needs lightning or pytorch_lightning"):
                gpupeek_callbacks.LightningGpuStatsLogger
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--pair":
        print(json.dumps(PAIRS[sys.argv[2]]()))
        sys.exit(0)
    if not SHM or not SCENARIO:
        sys.exit("run by tests/e2e (contrib.rs): GPUPEEK_SHM and GPUPEEK_TEST_SCENARIO unset")
    unittest.main(verbosity=2)

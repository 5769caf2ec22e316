"""Tests of gpupeek.py against a live gpupeekd on the fake NVML.

Run by the Rust end-to-end suite (tests/e2e/tests/e2e/contrib.rs), which starts the daemon
and sets:
  GPUPEEK_SHM             the daemon's segment
  GPUPEEK_TEST_SCENARIO   the fake NVML's scenario file (these tests rewrite it)
  GPUPEEK_TEST_CLIENT     the gpupeek binary, to compare with `gpupeek --json`
  GPUPEEK_TEST_LAYOUT     a file holding gpupeek_shm::pin::describe()
and, to compare new_query() with the real gpustat 1.1.1 on the same fake NVML:
  GPUPEEK_TEST_GPUSTAT    gpustat's executable (its virtual environment's python runs it)
  GPUPEEK_TEST_NVML_DIR   a directory whose libnvidia-ml.so.1 is the fake NVML
"""

import contextlib
import io
import json
import os
import platform
import struct
import subprocess
import sys
import threading
import time
import unittest
from datetime import datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpupeek  # noqa: E402

GIB = 1 << 30
MIB = 1 << 20
SHM = os.environ.get("GPUPEEK_SHM", "")
SCENARIO = os.environ.get("GPUPEEK_TEST_SCENARIO", "")
# The daemon reads a GPU's identity once: the one contrib.rs started it with.
GPU0_UUID = "GPU-11111111-2222-3333-4444-555555555555"
GPU1_UUID = "GPU-bbbbbbbb-0000-0000-0000-000000000000"


def write_scenario(gpu0_used, own_used=None, gpu1_used=4 * GIB):
    """GPU 0 (80 GiB) with `gpu0_used`, this process on it with `own_used` (if any);
    GPU 1 (40 GiB) with `gpu1_used` and no process of ours (pid 1's)."""
    procs = [] if own_used is None else [{"pid": os.getpid(), "used_gpu_memory_bytes": own_used}]
    scenario = {"gpus": [
        {"name": "NVIDIA H100 80GB HBM3", "uuid": GPU0_UUID,
         "memory_total_bytes": 80 * GIB, "memory_used_bytes": gpu0_used,
         "utilization_gpu_pct": 50, "utilization_memory_pct": 10, "temperature_c": 60,
         "power_usage_mw": 250500, "power_limit_mw": 700000, "processes": procs},
        {"name": "NVIDIA A100-SXM4-40GB", "uuid": GPU1_UUID,
         "memory_total_bytes": 40 * GIB, "memory_used_bytes": gpu1_used,
         "processes": [{"pid": 1, "used_gpu_memory_bytes": GIB}]},
    ]}
    if not SCENARIO:
        raise RuntimeError("GPUPEEK_TEST_SCENARIO is not set: run these tests through the e2e suite")
    tmp = SCENARIO + ".py.tmp"
    with open(tmp, "w") as f:
        json.dump(scenario, f)
    os.rename(tmp, SCENARIO)


def wait_until(what, predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        snap = gpupeek.snapshot(SHM)
        if predicate(snap):
            return snap
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def own(snap, gpu):
    return [p.gpu_mem_bytes for p in snap.processes if p.pid == os.getpid() and p.gpu_index == gpu]


def showing(gpu0_used, own_used):
    """The scenario write_scenario wrote, as the daemon publishes it: GPU 0's memory and
    this process on it, and pid 1 on GPU 1. Each GPU's process list is read in its own
    turn (gpupeekd staggers them over the process interval), so both are waited for."""
    return lambda s: (s.gpus[0].mem_used_bytes == gpu0_used and own(s, 0) == [own_used]
                      and any(p.pid == 1 and p.gpu_index == 1 for p in s.processes))


def wait_generations(n):
    """Lets the daemon publish `n` more times."""
    start = gpupeek.snapshot(SHM).generation
    wait_until(f"{n} publishes", lambda s: s.generation >= start + n)


class Layout(unittest.TestCase):
    def test_layout_table_is_the_rust_crates(self):
        with open(os.environ["GPUPEEK_TEST_LAYOUT"]) as f:
            self.assertEqual(gpupeek.describe(), f.read())


class Seqlock(unittest.TestCase):
    """The seqlock's patience, on a block of private memory (no daemon): a sequence that
    stays at one odd value is a dead writer; one that moves on is alive."""

    def block(self, seq):
        seg = gpupeek.Segment.__new__(gpupeek.Segment)
        seg.name = "test"
        seg._bytes = memoryview(bytearray(64))
        seg._words = seg._bytes.cast("Q")
        seg._words[0] = seq
        return seg

    def test_a_block_left_odd_is_stale_after_stale_after(self):
        seg = self.block(7)
        start = time.monotonic_ns()
        with self.assertRaises(gpupeek.StaleError):
            seg._read(0, 64)
        self.assertGreaterEqual(time.monotonic_ns() - start, gpupeek.STALE_AFTER_NS)

    def test_a_writer_preempted_mid_write_for_10_ms_is_waited_for(self):
        # A loaded machine takes the daemon off its CPU in the middle of a write: for
        # longer than 200 quick attempts (the old bound) last.
        seg = self.block(1)

        def finish():
            time.sleep(0.01)
            seg._words[1] = 42
            seg._words[0] = 2

        writer = threading.Thread(target=finish)
        writer.start()
        raw, _ = seg._read(0, 64)
        writer.join()
        self.assertEqual(struct.unpack_from("<QQ", raw), (2, 42))


class Validity(unittest.TestCase):
    """Every field with a validity bit, in every record the tables name, is None when its
    bit is clear and its value when the bit is set: walked over the generated tables, so a
    field added in shm-layout is covered without touching this test."""

    # One segment made here: header, generation, status, 1 GPU slot, the process table
    # with 1 slot, 1 history ring of 1 sample, and the MIG table with 1 slot.
    STATUS, GPUS = 256, 512
    PROCS = GPUS + gpupeek.GPU_RECORD_SIZE
    SLOTS = PROCS + gpupeek.PROC_TABLE_HEAD_SIZE
    RING = -(-(gpupeek.HISTORY_HEAD_SIZE + gpupeek.HISTORY_SAMPLE_SIZE) // 8) * 8
    HISTORY = SLOTS + gpupeek.PROC_RECORD_SIZE
    MIG = HISTORY + RING
    SIZE = MIG + gpupeek.MIG_TABLE_HEAD_SIZE + gpupeek.MIG_RECORD_SIZE

    # Values that make a record read as current: an ok GPU, a live daemon, one process.
    FIXED = {"StatusRecord": {"state": 1, "gpu_count": 1}, "GpuRecord": {"state": 1},
             # No text pool: the process's text is its record's own fields.
             "ProcTableHead": {"count": 1, "text_pool_offset": 0}, "ProcRecord": {"kind": 1},
             "HistoryHead": {"written": 1, "step_ns": 1}, "MigTableHead": {"count": 1}}

    @staticmethod
    def value(name, offset, fmt):
        """A distinct value for a field: its name for a string, else from its offset."""
        if fmt.endswith("s"):
            return name.encode()[:int(fmt[:-1]) - 1]
        return {"B": 7, "h": 40}.get(fmt, 1000 + offset)

    def record(self, name, valid):
        size, fields = gpupeek._RECORDS[name]
        raw = bytearray(size)
        for field, offset, fmt in fields:
            value = self.FIXED.get(name, {}).get(field, self.value(field, offset, fmt))
            if field == "valid":
                value = valid & (1 << 8 * struct.calcsize("=" + fmt)) - 1
            elif field.startswith("reserved") or field == "seq":
                continue
            struct.pack_into("=" + fmt, raw, offset, value)
        return bytes(raw)

    def segment(self, valid):
        """A segment whose GPU, status, process and history records all carry `valid`."""
        h = {"magic": gpupeek.MAGIC, "abi_major": gpupeek.ABI_MAJOR,
             "abi_minor": gpupeek.ABI_MINOR, "segment_size_bytes": self.SIZE,
             "status_size_bytes": gpupeek.STATUS_RECORD_SIZE, "status_offset": self.STATUS,
             "gpu_table_offset": self.GPUS, "gpu_record_size_bytes": gpupeek.GPU_RECORD_SIZE,
             "gpu_capacity": 1, "proc_table_offset": self.PROCS,
             "proc_record_size_bytes": gpupeek.PROC_RECORD_SIZE, "proc_capacity": 1,
             "generation_offset": 128, "history_offset": self.HISTORY,
             "history_ring_size_bytes": self.RING, "history_slots": 1,
             "history_sample_size_bytes": gpupeek.HISTORY_SAMPLE_SIZE,
             "mig_table_offset": self.MIG, "mig_record_size_bytes": gpupeek.MIG_RECORD_SIZE,
             "mig_capacity": 1}
        data = bytearray(self.SIZE)
        for field, offset, fmt in gpupeek._RECORDS["StaticHeader"][1]:
            struct.pack_into("=" + fmt, data, offset, h.get(field, 0 if fmt[-1] != "s" else b""))
        for record, at in (("StatusRecord", self.STATUS), ("GpuRecord", self.GPUS),
                           ("ProcTableHead", self.PROCS), ("ProcRecord", self.SLOTS),
                           ("HistoryHead", self.HISTORY),
                           ("HistorySample", self.HISTORY + gpupeek.HISTORY_HEAD_SIZE),
                           ("MigTableHead", self.MIG),
                           ("MigRecord", self.MIG + gpupeek.MIG_TABLE_HEAD_SIZE)):
            raw = self.record(record, valid)
            data[at:at + len(raw)] = raw
        name = f"{SHM or 'gpupeek-test'}-valid-{os.getpid()}"
        path = "/dev/shm/" + name
        fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, bytes(data))
        finally:
            os.close(fd)
        self.addCleanup(lambda: os.path.exists(path) and os.unlink(path))
        with gpupeek.Segment(name) as seg:
            snap = seg.snapshot()
            history = seg.history(0)
        return {"StatusRecord": snap.status, "GpuRecord": snap.gpus[0],
                "ProcRecord": snap.processes[0], "HistorySample": history.samples[0],
                "MigRecord": snap.mig[0]}

    def expected(self, record, field):
        size, fields = gpupeek._RECORDS[record]
        offset, fmt = next((o, f) for n, o, f in fields if n == field)
        value = self.value(field, offset, fmt)
        if field == "cmdline":
            return [value.decode()]
        return value.decode() if isinstance(value, bytes) else value

    def test_gpu_status_process_history_and_mig_records_have_validity_tables(self):
        self.assertEqual(set(gpupeek.VALID_FIELDS),
                         {"StatusRecord", "GpuRecord", "ProcRecord", "HistorySample",
                          "MigRecord", "TierBucket"})
        self.assertEqual(gpupeek.GPU_VALID["idle_since_mono_ns"], 35)
        self.assertEqual(gpupeek.GPU_VALID["mig_mode_current"], 36)

    def test_a_mig_device_s_processes_are_those_with_its_instance_ids(self):
        device = gpupeek.MigDevice(gpu_index=0, gpu_instance_id=5, compute_instance_id=0,
                                   values={"profile": "2g.20gb"})
        procs = [gpupeek.Process(gpu_index=g, pid=pid, kind="compute",
                                 values={"gpu_instance_id": gi, "compute_instance_id": 0})
                 for g, pid, gi in ((0, 10, 5), (0, 11, 1), (1, 12, 5), (0, 13, 5))]
        snap = gpupeek.Snapshot(status=None, gpus=[], processes=procs, proc_overflow=0,
                                proc_policy=None, hidepid=False, pid_ns_inode=0,
                                generation=1, consistent=True, mig=[device])
        self.assertEqual([p.pid for p in snap.processes_in(device)], [10, 13])
        self.assertEqual(device.profile, "2g.20gb")

    def test_a_field_is_its_value_with_its_bit_set(self):
        decoded = self.segment(valid=(1 << 64) - 1)
        for record, table in gpupeek.VALID_FIELDS.items():
            if record not in decoded:
                continue  # TierBucket: see Tiers below
            for field in table:
                with self.subTest(record=record, field=field):
                    self.assertEqual(getattr(decoded[record], field),
                                     self.expected(record, field))

    def test_a_field_is_none_with_its_bit_clear(self):
        bits = sorted({b for t in gpupeek.VALID_FIELDS.values() for b in t.values()})
        for bit in bits:
            decoded = self.segment(valid=((1 << 64) - 1) & ~(1 << bit))
            for record, table in gpupeek.VALID_FIELDS.items():
                if record not in decoded:
                    continue
                for field, field_bit in table.items():
                    with self.subTest(record=record, field=field, bit=bit):
                        value = getattr(decoded[record], field)
                        if field_bit == bit:
                            self.assertIsNone(value)
                        else:
                            self.assertEqual(value, self.expected(record, field))


class Tiers(unittest.TestCase):
    """The tiered history (ABI 1.7) of the live daemon: tracks and integrals."""

    def test_each_gpu_has_a_track_whose_integrals_are_its_sums(self):
        snap = wait_until("every GPU's first sample", lambda s: all(g.uuid for g in s.gpus))
        uuids = {g.uuid for g in snap.gpus}
        wait_until("a track per GPU", lambda s: uuids <= {i.uuid for i in gpupeek.integrals(SHM)})
        with gpupeek.Segment(SHM) as seg:
            self.assertGreater(seg.track_count(), 0)
            tracks = [t for t in (seg.track(i) for i in range(seg.track_count()))
                      if t["kind"] == "gpu"]
        self.assertEqual({t["uuid"] for t in tracks}, uuids)
        for t in tracks:
            self.assertIsNone(t["mig"])
            raw = t["tiers"][0]
            self.assertTrue(raw, "raw samples")
            for b in raw:
                if b["samples"]:
                    self.assertEqual(b["mem_used_mib_min"], b["mem_used_mib_max"])
                else:
                    self.assertIsNone(b["mem_used_mib_min"])
        for i in gpupeek.integrals(SHM):
            if i.kind == "gpu":
                sums, n = i.sums["mem_used"]
                self.assertGreater(n, 0)
                self.assertIsNone(i.mean_since(i, "mem_used"))
                self.assertEqual(i.mean("mem_used"), sums / n)


class Snapshot(unittest.TestCase):
    def test_snapshot_agrees_with_gpupeek_json(self):
        write_scenario(3 * GIB, 2 * GIB)
        snap = wait_until("both GPUs' processes listed", showing(3 * GIB, 2 * GIB))
        out = subprocess.run([os.environ["GPUPEEK_TEST_CLIENT"], "--shm", SHM, "--json"],
                             check=True, capture_output=True, text=True).stdout
        doc = json.loads(out)
        self.assertTrue(snap.consistent)
        self.assertEqual(snap.liveness(), "live")
        self.assertEqual(snap.status.driver_version, doc["driver_version"])
        self.assertEqual(len(snap.gpus), len(doc["gpus"]))
        for g, j in zip(snap.gpus, doc["gpus"]):
            self.assertEqual(g.index, j["index"])
            self.assertEqual(g.name, j["name"])
            self.assertEqual(g.uuid, j["uuid"])
            self.assertEqual(g.mem_used_bytes // MIB, j["memory.used"])
            self.assertEqual(g.mem_total_bytes // MIB, j["memory.total"])
            self.assertEqual(g.util_gpu_pct, j["utilization.gpu"])
            self.assertEqual(g.temp_gpu_c, j["temperature.gpu"])
            self.assertEqual(None if g.power_draw_mw is None else g.power_draw_mw // 1000,
                             j["power.draw"])
            mine = sorted((p.pid, p.gpu_mem_bytes // MIB) for p in snap.processes
                          if p.gpu_index == g.index)
            theirs = sorted((p["pid"], p["gpu_memory_usage"]) for p in j["processes"])
            self.assertEqual(mine, theirs)
        # A value the GPU does not report is None, never 0.
        self.assertIsNone(snap.gpus[1].temp_gpu_c)
        self.assertIsNone(snap.gpus[0].fan_speed_pct)
        self.assertEqual(snap.proc_policy, "full")


class Publish(unittest.TestCase):
    """wait_publish sleeps on the daemon's futex, as the Rust readers do."""

    def woken_by_publish(self, wait):
        """Waits (up to three times, 5 s each) for a publish; True when the generation
        moved before any wait ran out: a wait that is never woken lasts its 5 s, one on
        the wrong word returns at once without the generation moving."""
        with gpupeek.Segment(SHM) as seg:
            before = seg.generation()
            start = time.monotonic()
            for _ in range(3):
                wait(seg, before)
                if seg.generation() != before:
                    break
            return seg.generation() != before and time.monotonic() - start < 4.5

    def test_the_futex_is_woken_by_the_daemons_publish(self):
        with gpupeek.Segment(SHM) as seg:
            if platform.machine() in ("x86_64", "aarch64"):
                self.assertIsNotNone(seg._futex, "a Linux reader reaches the futex")
            if seg._futex is None:
                self.skipTest("no futex on this machine")
        self.assertTrue(self.woken_by_publish(lambda seg, gen: seg._futex.wait(gen, 5.0)))

    def test_a_stale_generation_returns_at_once_and_the_fallback_still_waits(self):
        with gpupeek.Segment(SHM) as seg:
            gen, start = seg.generation(), time.monotonic()
            seg.wait_publish(gen - 1, 30.0)  # already moved on: no wait at all
            self.assertLess(time.monotonic() - start, 5.0)

        def without_futex(seg, gen):
            if seg._futex is not None:
                seg._futex.close()
                seg._futex = None
            while seg.generation() == gen:
                seg.wait_publish(gen, 5.0)
        self.assertTrue(self.woken_by_publish(without_futex))


class Vram(unittest.TestCase):
    def test_block_reports_delta_and_peak_of_its_gpu_only(self):
        write_scenario(1 * GIB, 512 * MIB)
        wait_until("start state", showing(1 * GIB, 512 * MIB))
        reports = []
        with gpupeek.vram("train step", shm=SHM, report=reports.append) as m:
            write_scenario(3 * GIB, 2560 * MIB, gpu1_used=9 * GIB)
            wait_until("peak state", showing(3 * GIB, 2560 * MIB))
            wait_generations(10)
            write_scenario(2 * GIB, 1536 * MIB)
            wait_until("end state", showing(2 * GIB, 1536 * MIB))
        self.assertEqual(reports, [m])
        self.assertTrue(m.matched_process)
        self.assertEqual(list(m.gpus), [0], "GPU 1 is not this process's")
        g = m.gpus[0]
        self.assertEqual((g.start_bytes, g.peak_bytes, g.end_bytes), (GIB, 3 * GIB, 2 * GIB))
        self.assertEqual((g.delta_bytes, g.peak_delta_bytes), (GIB, 2 * GIB))
        self.assertEqual((g.process_start_bytes, g.process_peak_bytes, g.process_end_bytes),
                         (512 * MIB, 2560 * MIB, 1536 * MIB))
        self.assertEqual(g.process_delta_bytes, GIB)
        self.assertGreaterEqual(m.samples, 3)

    def test_decorator_measures_each_call_under_the_functions_name(self):
        write_scenario(1 * GIB, 512 * MIB)
        wait_until("start state", showing(1 * GIB, 512 * MIB))
        reports = []

        @gpupeek.track_vram(shm=SHM, report=reports.append)
        def allocate(extra):
            write_scenario(1 * GIB + extra, 512 * MIB + extra)
            wait_until("allocation", showing(1 * GIB + extra, 512 * MIB + extra))
            return "done"

        self.assertEqual(allocate(GIB), "done")
        self.assertEqual(len(reports), 1)
        self.assertIn("allocate", reports[0].label)
        self.assertEqual(reports[0].gpus[0].delta_bytes, GIB)
        self.assertEqual(reports[0].gpus[0].process_delta_bytes, GIB)

    def test_neither_end_of_a_block_is_older_than_the_block(self):
        write_scenario(1 * GIB, 512 * MIB)
        wait_until("start state", showing(1 * GIB, 512 * MIB))
        # Allocated just before the block, and again as its last statement: neither has
        # been sampled yet (processes are sampled every 2 s here).
        write_scenario(2 * GIB, 1536 * MIB)
        called = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        with gpupeek.vram("fresh", shm=SHM, report=None) as m:
            entered = gpupeek.snapshot(SHM)
            write_scenario(3 * GIB, 2560 * MIB)
        self.assertTrue(m.fresh)
        self.assertGreaterEqual(entered.proc_sample_mono_ns, called)
        g = m.gpus[0]
        self.assertEqual((g.start_bytes, g.process_start_bytes), (2 * GIB, 1536 * MIB))
        self.assertEqual((g.end_bytes, g.process_end_bytes), (3 * GIB, 2560 * MIB))

    def test_without_a_daemon_the_code_runs_and_says_so_once(self):
        script = f"""
import sys
sys.path.insert(0, {os.path.dirname(os.path.abspath(gpupeek.__file__))!r})
import gpupeek
calls = []

@gpupeek.track_vram(shm={SHM + '-gone'!r})
def step(i):
    calls.append(i)
    return i * 2

print([step(i) for i in range(3)])
with gpupeek.vram(shm={SHM + '-gone'!r}) as m:
    calls.append("block")
print(calls, type(m.error).__name__, m.gpus)
"""
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, "[0, 2, 4]\n[0, 1, 2, 'block'] NoDaemonError {}\n")
        lines = out.stderr.splitlines()
        self.assertEqual(len(lines), 1, out.stderr)
        self.assertRegex(lines[0], r"^gpupeek: VRAM not measured: no segment /dev/shm/.*-gone")


def printed_json(stats):
    out = io.StringIO()
    stats.print_json(fp=out)
    return json.loads(out.getvalue())


# Keys of `gpupeek --json` that move between two reads: the times, and each GPM block's
# window (the daemon's last GPM interval, whose length jitters).
MOVING = {"query_time", "processes_age_ms"}


def gpupeek_json_env(env):
    out = subprocess.run([os.environ["GPUPEEK_TEST_CLIENT"], "--shm", SHM, "--json"],
                         check=True, capture_output=True, text=True,
                         env=dict(os.environ, **env)).stdout
    return json.loads(out)


def without(doc, keys):
    """`doc` without `keys` (at the top and in each GPU) and the GPM windows' lengths."""
    def gpm(block):
        return block if block is None else {k: v for k, v in block.items() if k != "interval_ms"}

    def gpu(g):
        g = {k: (gpm(v) if k == "gpm" else v) for k, v in g.items() if k not in keys}
        if "mig" in g:
            g["mig"] = [dict(m, gpm=gpm(m["gpm"])) for m in g["mig"]]
        return g
    doc = {k: v for k, v in doc.items() if k not in keys}
    if "gpus" in doc:
        doc["gpus"] = [gpu(g) for g in doc["gpus"]]
    return doc


def assert_same_document(test, env=None):
    """print_json() and `gpupeek --json` (both under `env`) say the same, in the same key
    order, but for what moves; two reads of a moving daemon are retried until no sample
    fell between them. Returns our document."""
    env = env or {}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        for _ in range(5):
            theirs = gpupeek_json_env(env)
            ours = printed_json(gpupeek.new_query(shm=SHM))
            if without(ours, MOVING) == without(theirs, MOVING):
                break
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    test.assertEqual(without(ours, MOVING), without(theirs, MOVING))
    test.assertEqual(list(ours), list(theirs), "key order")
    for g, j in zip(ours["gpus"], theirs["gpus"]):
        test.assertEqual(list(g), list(j), "key order")
        for p, q in zip(g["processes"] or [], j["processes"] or []):
            test.assertEqual(list(p), list(q), "process key order")
        for m, n in zip(g.get("mig", []), j.get("mig", [])):
            test.assertEqual(list(m), list(n), "MIG key order")
            test.assertEqual(m["gpm"] is None, n["gpm"] is None)
        test.assertEqual(g["gpm"] is None, j["gpm"] is None)
    test.assertLess(abs((datetime.fromisoformat(ours["query_time"]) -
                         datetime.fromisoformat(theirs["query_time"])).total_seconds()), 5)
    test.assertIsInstance(ours["processes_age_ms"], int)
    return ours


def printed_json(stats):
    out = io.StringIO()
    stats.print_json(fp=out)
    return json.loads(out.getvalue())


class NewQuery(unittest.TestCase):
    """gpustat's API (gpustat.new_query() and its objects), read from the segment."""

    def test_print_json_is_gpupeek_json(self):
        write_scenario(3 * GIB, 2 * GIB)
        wait_until("both GPUs' processes listed", showing(3 * GIB, 2 * GIB))
        ours = assert_same_document(self)
        for key in ("verdict", "clock_event_reasons", "gpm"):
            self.assertIn(key, ours["gpus"][0], "the Rust client's keys too")

    def test_gpustat_properties_and_items(self):
        write_scenario(3 * GIB, 2 * GIB)
        wait_until("both GPUs' processes listed", showing(3 * GIB, 2 * GIB))
        stats = gpupeek.new_query(shm=SHM)
        self.assertEqual(len(stats), 2)
        self.assertEqual([g.index for g in stats], [0, 1])
        self.assertIs(stats[1], stats.gpus[1])
        self.assertEqual(stats.hostname, platform.node())
        self.assertIsInstance(stats.query_time, datetime)
        self.assertEqual(stats.driver_version, gpupeek.snapshot(SHM).status.driver_version)
        g = stats[0]
        self.assertTrue(g.available)
        self.assertEqual(g["name"], g.entry["name"])
        self.assertEqual(g["uuid"], g.uuid)
        self.assertEqual((g.name, g.uuid), ("NVIDIA H100 80GB HBM3", GPU0_UUID))
        self.assertEqual((g.memory_used, g.memory_total), (3 * 1024, 80 * 1024))
        self.assertEqual((g.memory_free, g.memory_available), (77 * 1024, 77 * 1024))
        self.assertEqual((g.temperature, g.utilization, g.power_draw, g.power_limit),
                         (60, 50, 250, 700))
        self.assertIsNone(g.fan_speed, "not reported: None, never 0")
        self.assertEqual([p["pid"] for p in g.processes], [os.getpid()])
        self.assertEqual(g.processes[0]["gpu_memory_usage"], 2 * 1024)
        for key in ("username", "command", "full_command", "gpu_memory_usage", "cpu_percent",
                    "cpu_memory_usage", "pid"):
            self.assertIn(key, g.processes[0])
        self.assertEqual(list(g.keys())[:4], ["index", "uuid", "name", "temperature.gpu"])
        self.assertEqual(gpupeek.gpu_count(SHM), 2)
        self.assertTrue(gpupeek.is_available(SHM))
        self.assertEqual([g.index for g in gpupeek.new_query(id="1", shm=SHM)], [1])
        self.assertEqual([g.index for g in gpupeek.new_query(id=[1, 0], shm=SHM)], [1, 0])
        with self.assertRaises(ValueError):
            gpupeek.new_query(id=[7], shm=SHM)
        table = io.StringIO()
        stats.print_formatted(fp=table, show_full_cmd=True)
        lines = table.getvalue().splitlines()
        # The header, GPU 0, its process (ours), GPU 1 and its process (pid 1).
        self.assertEqual([line[:3] for line in lines[1::2]], ["[0]", "[1]"], lines)
        self.assertTrue(lines[0].startswith(platform.node()), lines)
        self.assertRegex(lines[2], rf"^ └─ +{os.getpid()} \( *(--|\d+)%, +\d+[KMG]?B\): \S")

    def test_without_a_daemon_new_query_raises_and_gpu_count_is_zero(self):
        with self.assertRaises(gpupeek.NoDaemonError):
            gpupeek.new_query(shm=SHM + "-missing")
        self.assertEqual(gpupeek.gpu_count(SHM + "-missing"), 0)
        self.assertFalse(gpupeek.is_available(SHM + "-missing"))

    def test_a_gpu_that_cannot_be_read_is_gpustats_invalid_gpu(self):
        def gpu(state):
            values = dict.fromkeys(list(gpupeek.GPU_VALID) + ["sample_mono_ns"], 1)
            values.update(name="H100", uuid=f"GPU-{state}", mem_used_bytes=GIB)
            return gpupeek.Gpu(0, state, gpupeek._current_only(state, values))
        gpus = [gpu(state) for state in ("lost", "not responding", "error", "idle")]
        stats = gpupeek._collection(States().snapshot("live", gpus=gpus))
        lost, late, failing, idle = stats
        self.assertEqual([g.name for g in stats], ["((GPU is lost))", "((Driver not responding))",
                                                   "((Unknown Error))", "H100"])
        self.assertFalse(lost.available)
        self.assertEqual(lost["memory.used"], "?", "gpustat's InvalidGPU")
        self.assertIsNone(lost.memory_used)
        self.assertEqual(lost.jsonify(), {"index": 0, "name": "((GPU is lost))",
                                          "processes": None, "state": "lost",
                                          "uuid": "GPU-lost"})
        self.assertEqual(late["state"], "not responding")
        self.assertTrue(idle.available)
        self.assertEqual((idle["state"], idle.memory_used, idle.processes), ("idle", None, None))
        # gpustat's test_new_query_mocked_failing_one_gpu, on its table.
        table = io.StringIO()
        stats.print_formatted(fp=table, show_header=False)
        line = table.getvalue().splitlines()[2]
        self.assertIn("[0] ((Unknown Error))", line)
        self.assertIn("?°C,   ? %", line)
        self.assertIn("? /     ? MB", line)
        self.assertIn("??°C,  ?? %", table.getvalue().splitlines()[3], "asleep: N/A")


@unittest.skipUnless(os.environ.get("GPUPEEK_TEST_GPUSTAT"), "set GPUPEEK_TEST_GPUSTAT")
class GpustatParity(unittest.TestCase):
    """The real gpustat 1.1.1 reads the same fake NVML (and /proc through psutil) that
    the daemon reads: its new_query() and ours must say the same."""

    PROPERTIES = ("index", "uuid", "name", "memory_total", "memory_used", "memory_free",
                  "memory_available", "temperature", "fan_speed", "utilization",
                  "utilization_enc", "utilization_dec", "power_draw", "power_limit",
                  "available")
    SCRIPT = """
import json, sys, gpustat
stats = gpustat.new_query()
json.dump({"driver_version": stats.driver_version, "hostname": stats.hostname,
           "len": len(stats), "json": stats.jsonify(),
           "gpus": [{"keys": list(g.keys()),
                     "properties": {p: getattr(g, p) for p in sys.argv[1:]}}
                    for g in stats]}, sys.stdout, default=str)
"""

    # print_formatted's options, as gpustat's flags set them: -cup, -a, (none), -u -e,
    # -c -P draw, --no-processes.
    TABLES = [dict(show_cmd=True, show_user=True, show_pid=True),
              dict(show_cmd=True, show_user=True, show_pid=True, show_fan_speed=True,
                   show_codec="enc,dec", show_power=True),
              dict(),
              dict(show_user=True, show_codec="enc,dec"),
              dict(show_cmd=True, show_power="draw"),
              dict(no_processes=True, gpuname_width=8)]
    TABLE_SCRIPT = """
import io, json, sys, gpustat
stats = gpustat.new_query()
out = []
for options in json.loads(sys.argv[1]):
    fp = io.StringIO()
    stats.print_formatted(fp=fp, no_color=True, show_header=False, **options)
    out.append(fp.getvalue())
json.dump(out, sys.stdout)
"""

    def gpustat(self, script=None, *args):
        python = os.path.join(os.path.dirname(os.environ["GPUPEEK_TEST_GPUSTAT"]), "python")
        env = dict(os.environ, LD_LIBRARY_PATH=os.environ["GPUPEEK_TEST_NVML_DIR"],
                   FAKE_NVML_SCENARIO=SCENARIO)
        env.pop("FAKE_NVML_CALLS_DIR", None)
        out = subprocess.run([python, "-c", script or self.SCRIPT, *(args or self.PROPERTIES)],
                             env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def test_print_formatted_prints_gpustats_table(self):
        write_scenario(3 * GIB, 2 * GIB)
        wait_until("both GPUs' processes listed", showing(3 * GIB, 2 * GIB))
        theirs = self.gpustat(self.TABLE_SCRIPT, json.dumps(self.TABLES))
        stats = gpupeek.new_query(shm=SHM)
        for options, table in zip(self.TABLES, theirs):
            with self.subTest(**options):
                fp = io.StringIO()
                stats.print_formatted(fp=fp, no_color=True, show_header=False, **options)
                self.assertEqual(fp.getvalue(), table)
        header = io.StringIO()
        stats.print_formatted(fp=header, no_processes=True)
        self.assertTrue(header.getvalue().startswith(platform.node()), header.getvalue())

    def test_new_query_says_what_gpustats_says(self):
        write_scenario(3 * GIB, 2 * GIB)
        wait_until("both GPUs' processes listed", showing(3 * GIB, 2 * GIB))
        theirs = self.gpustat()
        ours = gpupeek.new_query(shm=SHM)
        self.assertEqual(ours.driver_version, theirs["driver_version"])
        self.assertEqual(ours.hostname, theirs["hostname"])
        self.assertEqual(len(ours), theirs["len"])
        mine = ours.jsonify()
        for g, t, tj, oj in zip(ours, theirs["gpus"], theirs["json"]["gpus"], mine["gpus"]):
            # gpustat's keys, in gpustat's order, before gpupeek's own.
            self.assertEqual(list(g.keys())[:len(t["keys"])], t["keys"])
            for p in self.PROPERTIES:
                with self.subTest(gpu=g.index, property=p):
                    self.assertEqual(getattr(g, p), t["properties"][p])
            for key in t["keys"]:
                if key != "processes":
                    self.assertEqual(oj[key], tj[key], key)
            self.assertEqual(len(oj["processes"]), len(tj["processes"]))
            for op, tp in zip(oj["processes"], tj["processes"]):
                for key in ("username", "command", "full_command", "gpu_memory_usage", "pid"):
                    with self.subTest(gpu=g.index, process=tp["pid"], key=key):
                        self.assertEqual(op[key], tp[key])
                # gpustat samples CPU use itself (0.1 s); ours is the daemon's, None until
                # it has two samples of the process. Host memory is the same resident
                # size, read at another moment.
                self.assertIsInstance(op["cpu_percent"], (float, type(None)))
                self.assertLessEqual(abs(op["cpu_memory_usage"] - tp["cpu_memory_usage"]),
                                     tp["cpu_memory_usage"] * 0.1)


# Tables printed the same way by gpustat's classes and by ours (run as
# `python -c PRINT_SCRIPT gpustat.core` in gpustat's virtual environment, and as
# `python -c PRINT_SCRIPT gpupeek` here): the collection of the JSON document on stdin,
# printed under each environment it names with each option set, then a collection without
# GPUs (its message goes to standard output), GPUStat.print_to on its default terminal and
# repr(GPUStat). Writes the texts, in that order, as a JSON list (to the file named after
# the module, if any, else to standard output).
PRINT_SCRIPT = r"""
import contextlib, copy, importlib, io, json, os, sys
from datetime import datetime
module = importlib.import_module(sys.argv[1])
doc = json.load(sys.stdin)

def gpu(e):
    if e.get("invalid"):
        return module.InvalidGPU(e["index"], e["name"], None)
    return module.GPUStat(copy.deepcopy(e))
stats = module.GPUStatCollection([gpu(e) for e in doc["gpus"]], driver_version=doc["driver"])
stats.hostname = doc["hostname"]
stats.query_time = datetime.fromisoformat(doc["query_time"])
empty = module.GPUStatCollection([], driver_version=None)
empty.hostname, empty.query_time = stats.hostname, stats.query_time
out = []
for env, cases in doc["runs"]:
    saved = dict(os.environ)
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    for options in cases:
        fp = io.StringIO()
        stats.print_formatted(fp=fp, **options)
        out.append(fp.getvalue())
    for options in cases:
        fp, stdout = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout):
            empty.print_formatted(fp=fp, **options)
        out.append(fp.getvalue() + "|" + stdout.getvalue())
    fp = io.StringIO()
    stats[0].print_to(fp, show_cmd=True)
    out.append(fp.getvalue())
    out.append(repr(stats[0]))
    os.environ.clear()
    os.environ.update(saved)
if len(sys.argv) > 2:
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)
else:
    json.dump(out, sys.stdout)
"""


def gpustat_python():
    return os.path.join(os.path.dirname(os.environ["GPUPEEK_TEST_GPUSTAT"]), "python")


def gpustat_entry(index, name, temp, fan, util, enc, dec, draw, limit, used, total, procs):
    return {"index": index, "uuid": f"GPU-{index}", "name": name, "temperature.gpu": temp,
            "fan.speed": fan, "utilization.gpu": util, "utilization.enc": enc,
            "utilization.dec": dec, "power.draw": draw, "enforced.power.limit": limit,
            "memory.used": used, "memory.total": total, "processes": procs}


def gpustat_process(pid, user, command, cpu, rss, mem=1024, argv=None):
    return {"username": user, "command": command,
            "full_command": [command] if argv is None else argv, "gpu_memory_usage": mem,
            "cpu_percent": cpu, "cpu_memory_usage": rss, "pid": pid}


# gpustat 1.1.1's own test (gpustat/test_gpustat.py): its mocked NVML and psutil give
# these entries (memory.total is the bytes // MiB, cpu_memory_usage psutil's memory
# percent of its 8 GiB), and its expected tables follow.
GPUSTAT_MOCK = [
    gpustat_entry(0, "GeForce GTX TITAN 0", 80, 16, 76, 88, 67, 125, 250, 8000, 12287, [
        gpustat_process(48448, "user1", "python", 85.25, round(0.031415 * 8589934592), 4000),
        gpustat_process(153223, "user2", "python", 15.25, 0, 4000)]),
    gpustat_entry(1, "GeForce GTX TITAN 1", 36, 53, 0, 0, 0, None, 250, 9000, 12189, [
        gpustat_process(192453, "user1", "torch", 123.2, round(0.007312 * 8589934592), 3000),
        gpustat_process(194826, "user3", "caffe", 0.0, round(0.125236 * 8589934592), 6000)]),
    gpustat_entry(2, "GeForce RTX 2", 71, 100, None, None, None, 250, None, 0, 12189, None),
]
GPUSTAT_EXPECTED_DEFAULT = """\
[0] GeForce GTX TITAN 0 | 80°C,  76 % |  8000 / 12287 MB | user1(4000M) user2(4000M)
[1] GeForce GTX TITAN 1 | 36°C,   0 % |  9000 / 12189 MB | user1(3000M) user3(6000M)
[2] GeForce RTX 2       | 71°C,  ?? % |     0 / 12189 MB | (Not Supported)
"""
GPUSTAT_EXPECTED_FULL_PROCESS = """\
[0] GeForce GTX TITAN 0 | 80°C,  16 %,  76 % (E:  88 %  D:  67 %),  125 / 250 W |  8000 / 12287 MB | user1:python/48448(4000M) user2:python/153223(4000M)
 ├─  48448 (  85%,  257MB): python
 └─ 153223 (  15%,     0B): python
[1] GeForce GTX TITAN 1 | 36°C,  53 %,   0 % (E:   0 %  D:   0 %),   ?? / 250 W |  9000 / 12189 MB | user1:torch/192453(3000M) user3:caffe/194826(6000M)
 ├─ 192453 ( 123%,   59MB): torch
 └─ 194826 (   0%, 1025MB): caffe
[2] GeForce RTX 2       | 71°C, 100 %,  ?? % (E:  ?? %  D:  ?? %),  250 /  ?? W |     0 / 12189 MB | (Not Supported)
"""  # noqa: E501
GPUSTAT_EXPECTED_NO_PROCESSES = """\
[0] GeForce GTX TITAN 0 | 80°C,  76 % |  8000 / 12287 MB
[1] GeForce GTX TITAN 1 | 36°C,   0 % |  9000 / 12189 MB
[2] GeForce RTX 2       | 71°C,  ?? % |     0 / 12189 MB
"""


def without_ansi(text):
    """gpustat's test's remove_ansi_codes."""
    import re
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]|\x1b\(B", "", text)


@unittest.skipUnless(os.environ.get("GPUPEEK_TEST_VERDICTS"), "set GPUPEEK_TEST_VERDICTS")
class RustKeys(unittest.TestCase):
    """The Rust client's own keys ("verdict", "clock_event_reasons", "gpm", "mig") in
    print_json(), against a daemon started (tests/e2e/tests/e2e/contrib.rs) with GPU 0 in
    MIG mode, its clocks power-capped, GPU 1 idle with 4 GiB used and GPU 2 busy with
    little SM activity, under several $GPUPEEK_VERDICT_THRESHOLDS."""

    def test_the_rust_clients_keys_are_the_same(self):
        seen = set()
        for thresholds in ("", "idle=0", "busy=95,idle=0", "starved=10,idle_mem=99999",
                           " busy =95 ,, idle=+0,"):
            with self.subTest(thresholds=thresholds):
                doc = assert_same_document(self, {gpupeek.VERDICT_ENV: thresholds})
                seen |= {g["verdict"] for g in doc["gpus"]}
                os.environ[gpupeek.VERDICT_ENV] = thresholds
                try:
                    stats = gpupeek.new_query(shm=SHM)
                finally:
                    del os.environ[gpupeek.VERDICT_ENV]
                self.assertEqual([(g.verdict, g.clock_event_reasons, g.gpm is None)
                                  for g in stats],
                                 [(g["verdict"], g["clock_event_reasons"], g["gpm"] is None)
                                  for g in doc["gpus"]])
                seen |= {m["verdict"] for g in doc["gpus"] for m in g.get("mig", [])}
                mig = doc["gpus"][0]["mig"]
                self.assertEqual([m["gpu_instance_id"] for m in mig], [1, 5])
                self.assertEqual(mig[0]["pids"], [p["pid"] for p in doc["gpus"][0]["processes"]])
                self.assertEqual(doc["gpus"][0]["clock_event_reasons"],
                                 ["gpu_idle", "sw_power_cap"])
                self.assertEqual(doc["gpus"][2]["gpm"]["sm_activity"], 12.34)
        self.assertEqual(seen, {None, "power-capped", "healthy", "starved", "idle-holding"})

    def test_a_bad_threshold_is_gpupeeks_error(self):
        for thresholds in ("busy", "busy=101", "busy= 80", "nap=1", "idle=-1", "idle_mem=x"):
            with self.subTest(thresholds=thresholds):
                out = subprocess.run([os.environ["GPUPEEK_TEST_CLIENT"], "--shm", SHM, "--json"],
                                     capture_output=True, text=True,
                                     env=dict(os.environ, GPUPEEK_VERDICT_THRESHOLDS=thresholds))
                self.assertNotEqual(out.returncode, 0)
                os.environ[gpupeek.VERDICT_ENV] = thresholds
                try:
                    with self.assertRaises(ValueError) as e:
                        gpupeek.new_query(shm=SHM)
                finally:
                    del os.environ[gpupeek.VERDICT_ENV]
                self.assertIn(str(e.exception), out.stderr)


class Verdicts(unittest.TestCase):
    """gpu_verdict and mig_verdict on records made here: each verdict's edge."""

    def gpu(self, **values):
        base = dict.fromkeys(gpupeek.GPU_VALID)
        base.update(util_gpu_pct=50, clock_event_reasons=0, mem_used_bytes=0,
                    sample_mono_ns=10**12)
        base.update(values)
        return gpupeek.Gpu(0, "ok", base)

    def test_gpu_verdicts(self):
        t = dict(busy=80, starved=30, idle=300, idle_mem=1024)
        gpm = dict(gpm_interval_ns=10**9)
        idle = dict(util_gpu_pct=0, mem_used_bytes=1024 << 20,
                    idle_since_mono_ns=10**12 - 300 * 10**9)
        cases = [
            (dict(util_gpu_pct=None), None), (dict(clock_event_reasons=None), None),
            (dict(clock_event_reasons=0x40 | 0x4), "thermal"),
            (dict(clock_event_reasons=0x80 | 0x8), "power-capped"),
            (dict(clock_event_reasons=0x8 | 0x1), "hw-slowdown"),
            (dict(util_gpu_pct=80), None), (dict(util_gpu_pct=80, gpm_sm_activity_centipct=1),
                                             None),
            (dict(util_gpu_pct=80, gpm_sm_activity_centipct=2999, **gpm), "starved"),
            (dict(util_gpu_pct=80, gpm_sm_activity_centipct=3000, **gpm), "healthy"),
            (idle, "idle-holding"),
            (dict(idle, idle_since_mono_ns=10**12 - 300 * 10**9 + 1), "healthy"),
            (dict(idle, idle_since_mono_ns=None), None),
            (dict(idle, idle_since_mono_ns=2 * 10**12), "healthy"),
            (dict(idle, mem_used_bytes=(1024 << 20) - 1, idle_since_mono_ns=None), "healthy"),
            (dict(idle, util_gpu_pct=1, idle_since_mono_ns=None), "healthy"),
        ]
        for values, verdict in cases:
            with self.subTest(values=values):
                self.assertEqual(gpupeek.gpu_verdict(self.gpu(**values), t), verdict)

    def test_mig_verdicts(self):
        t = dict(busy=80, starved=30, idle=300, idle_mem=1024)

        def mig(**values):
            base = dict.fromkeys(gpupeek.MIG_VALID)
            base.update(gpm_interval_ns=10**9, gpm_sm_activity_centipct=99,
                        mem_used_bytes=1024 << 20)
            base.update(values)
            return gpupeek.MigDevice(0, 1, 0, base)
        parent = self.gpu(util_gpu_pct=None)
        self.assertEqual(gpupeek.mig_verdict(mig(), parent, t), "idle-holding")
        self.assertEqual(gpupeek.mig_verdict(mig(gpm_sm_activity_centipct=100), parent, t),
                         "healthy")
        self.assertEqual(gpupeek.mig_verdict(mig(mem_used_bytes=1), parent, t), "healthy")
        self.assertIsNone(gpupeek.mig_verdict(mig(gpm_interval_ns=None), parent, t))
        self.assertIsNone(gpupeek.mig_verdict(mig(mem_used_bytes=None), parent, t))
        self.assertEqual(gpupeek.mig_verdict(mig(), self.gpu(clock_event_reasons=0x20), t),
                         "thermal")
        self.assertIsNone(gpupeek.mig_verdict(mig(), self.gpu(clock_event_reasons=None), t))

    def test_thresholds(self):
        os.environ[gpupeek.VERDICT_ENV] = " busy =90 ,, idle=+600,"
        try:
            self.assertEqual(gpupeek.verdict_thresholds(),
                             dict(busy=90, starved=30, idle=600, idle_mem=1024))
        finally:
            del os.environ[gpupeek.VERDICT_ENV]
        self.assertEqual(gpupeek.verdict_thresholds(),
                         dict(busy=80, starved=30, idle=300, idle_mem=1024))


class GpustatsOwnTests(unittest.TestCase):
    """gpustat 1.1.1's test_gpustat.py, its expected tables, on our classes."""

    def stats(self, gpus=GPUSTAT_MOCK):
        stats = gpupeek.GPUStatCollection([gpupeek.GPUStat(json.loads(json.dumps(e)))
                                           for e in gpus], driver_version="415.27.mock")
        return stats

    def table(self, header=False, **options):
        fp = io.StringIO()
        self.stats().print_formatted(fp=fp, show_header=header, eol_char="\n", **options)
        return fp.getvalue()

    def test_new_query_mocked_basic(self):
        out = self.table(header=True, no_color=False, show_user=True, show_cmd=True,
                         show_full_cmd=True, show_pid=True, show_fan_speed=True,
                         show_codec="enc,dec", show_power=True)
        body = without_ansi(out).split("\n", 1)[1]
        self.assertEqual(body, GPUSTAT_EXPECTED_FULL_PROCESS)

    def test_args_commandline(self):
        self.assertEqual(without_ansi(self.table()), GPUSTAT_EXPECTED_DEFAULT)
        coloured = self.table(force_color=True)
        self.assertNotIn("\x0f", coloured, "gpustat's issue #32")
        self.assertEqual(without_ansi(coloured), GPUSTAT_EXPECTED_DEFAULT)
        plain = self.table(no_color=True)
        self.assertEqual(plain, GPUSTAT_EXPECTED_DEFAULT, "no ANSI code at all")
        self.assertEqual(self.table(no_processes=True), GPUSTAT_EXPECTED_NO_PROCESSES)
        fp = io.StringIO()
        stats = self.stats([GPUSTAT_MOCK[1], GPUSTAT_MOCK[2]])
        stats.print_formatted(fp=fp, show_header=False, no_color=True, eol_char="\n")
        self.assertEqual(fp.getvalue(), "".join(GPUSTAT_EXPECTED_DEFAULT.splitlines(True)[1:]))

    def test_args_commandline_width(self):
        table = lambda width: without_ansi(self.table(gpuname_width=width))  # noqa: E731
        self.assertIn("GeForce GTX TITAN 0       |", table(25))
        self.assertIn("GeForce RTX 2             |", table(25))
        self.assertIn("…X TITAN 0 |", table(10))
        self.assertIn("…rce RTX 2 |", table(10))
        self.assertIn("… |", table(1))
        self.assertIn("[0]  80°C", table(0))

    def test_no_TERM(self):
        saved = os.environ.get("TERM")
        os.environ["TERM"] = ""
        try:
            out = self.table(force_color=True).rstrip()
        finally:
            if saved is None:
                del os.environ["TERM"]
            else:
                os.environ["TERM"] = saved
        self.assertEqual(without_ansi(out), GPUSTAT_EXPECTED_DEFAULT.rstrip())
        self.assertIn("\x1b[36m", out, "cyan")
        self.assertNotIn("\x0f", out, "gpustat's issue #32")

    def test_attributes_and_items(self):
        g = self.stats()[1]
        self.assertEqual(g["name"], g.entry["name"])
        self.assertEqual(g["uuid"], g.uuid)
        with self.assertRaises(KeyError):
            g["unknown_key"]
        self.assertEqual((g.memory_used, g.memory_total, g.memory_available), (9000, 12189, 3189))
        self.assertEqual((g.temperature, g.utilization, g.utilization_enc), (36, 0, 0))
        self.assertIsNone(g.power_draw)

    def test_json_mocked(self):
        fp = io.StringIO()
        self.stats().print_json(fp=fp)
        j = json.loads(fp.getvalue())
        self.assertEqual(j["driver_version"], "415.27.mock")
        self.assertTrue(j["hostname"])
        self.assertTrue(j["gpus"])


@unittest.skipUnless(os.environ.get("GPUPEEK_TEST_GPUSTAT"), "set GPUPEEK_TEST_GPUSTAT")
class GpustatColours(unittest.TestCase):
    """print_formatted, print_to and repr byte for byte as gpustat 1.1.1's, colours
    included: gpustat's own classes, in its virtual environment, print the same entries
    (the live daemon's, gpustat's test's, and made-up ones on both sides of every colour
    threshold) under every terminal kind blessed knows, without TERM, and with NO_COLOR,
    FORCE_COLOR and CLICOLOR_FORCE, with each of print_formatted's options."""

    MADE_UP = [
        gpustat_entry(10, "NVIDIA H100 80GB HBM3", 49, 29, 29, 49, 50, 279, 700, 3, 81559, [
            gpustat_process(101, "alice", "python", 12.5, 123456789,
                            argv=["/usr/bin/python3", "train.py", "--lr", "0.1"]),
            gpustat_process(102, None, None, 150.0, 0, mem=None, argv=["a//b/c", "x"]),
            gpustat_process(103, "bob", "x", 0.0, 10**20, argv=["/"])]),
        gpustat_entry(11, "A100", 50, 30, 30, 50, 49, 280, 700, 0, 40960, []),
        gpustat_entry(12, "A very long GPU name indeed", None, None, None, None, None, None,
                      None, None, None, None),
        gpustat_entry(13, "T4", 90, 100, 100, 100, 100, 70, None, 1, 15360, []),
        gpustat_entry(14, "T4", 90, 100, 100, 100, 100, 70, 0, 1, 15360, []),
        {"index": 15, "name": "((GPU is lost))", "invalid": True},
    ]
    OPTIONS = [
        dict(),
        dict(show_cmd=True, show_user=True, show_pid=True),
        dict(show_cmd=True, show_user=True, show_pid=True, show_fan_speed=True,
             show_codec="enc,dec", show_power=True, show_full_cmd=True),
        dict(show_full_cmd=True, show_header=False, eol_char="\r\n"),
        dict(show_codec="dec", show_power="draw", gpuname_width=0),
        dict(show_codec="enc", show_power="draw,limit", gpuname_width=8, no_processes=True),
        dict(show_user=True, show_cmd=True, gpuname_width=40, eol_char="|"),
    ]

    def texts(self, module, python, doc):
        out = subprocess.run([python, "-c", PRINT_SCRIPT, module], input=json.dumps(doc),
                             capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, PYTHONPATH=os.path.dirname(
                                 os.path.abspath(gpupeek.__file__))))
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def texts_on_a_terminal(self, module, python, doc):
        """texts() with standard output a terminal (a pty) and standard input not one (so
        blessed does not ask the terminal for its name: see contrib/python/README.md)."""
        import pty
        import tempfile
        master, slave = pty.openpty()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "out.json")
            try:
                out = subprocess.run([python, "-c", PRINT_SCRIPT, module, path],
                                     input=json.dumps(doc), stdout=slave, stderr=subprocess.PIPE,
                                     text=True, timeout=120, env=dict(os.environ, PYTHONPATH=(
                                         os.path.dirname(os.path.abspath(gpupeek.__file__)))))
            finally:
                os.close(slave)
                os.close(master)
            self.assertEqual(out.returncode, 0, out.stderr)
            with open(path) as f:
                return json.load(f)

    def test_on_a_terminal_colours_are_gpustats(self):
        """Without force_color, gpustat colours a table when standard output is a
        terminal, whatever `fp` is; GPUStat.print_to and repr on their own too."""
        unset = {"TERM": None, "NO_COLOR": None, "FORCE_COLOR": None, "CLICOLOR_FORCE": None}
        runs = [[dict(unset, **env), self.OPTIONS + [dict(o, no_color=True) for o in
                                                      self.OPTIONS[:3]]]
                for env in ({}, {"TERM": "xterm"}, {"TERM": "vt100"}, {"TERM": "dumb"},
                            {"TERM": "xterm", "NO_COLOR": "1"})]
        doc = {"gpus": GPUSTAT_MOCK + self.MADE_UP, "driver": "550.54.15", "hostname": "host",
               "query_time": "2026-01-02T03:04:05", "runs": runs}
        theirs = self.texts_on_a_terminal("gpustat.core", gpustat_python(), doc)
        ours = self.texts_on_a_terminal("gpupeek", sys.executable, doc)
        self.assertIn("\x1b[36m[0]\x1b[m", theirs[0], "a terminal: colours")
        self.assertEqual(ours, theirs)

    def terminal_kinds(self):
        """Every kind jinxed's terminfo knows (its modules and aliases)."""
        script = ("import json, pkgutil, jinxed.terminfo as t\n"
                  "from jinxed.terminfo._aliases import ALIASES\n"
                  "json.dump([[m.name for m in pkgutil.iter_modules(t.__path__)\n"
                  "            if not m.name.startswith('_')], ALIASES], __import__('sys').stdout)")
        out = subprocess.run([gpustat_python(), "-c", script], capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def test_our_terminal_table_is_blesseds(self):
        modules, aliases = self.terminal_kinds()
        self.assertEqual(sorted(gpupeek._TERMINFO), sorted(modules))
        self.assertEqual(gpupeek._TERM_ALIASES, aliases)

    def test_tables_are_gpustats_byte_for_byte(self):
        write_scenario(3 * GIB, 2 * GIB)
        wait_until("both GPUs' processes listed", showing(3 * GIB, 2 * GIB))
        live = gpupeek.new_query(shm=SHM)
        # gpustat always has a CPU figure and a command line (it raises printing without).
        entries = [dict(g.jsonify(), processes=None if g.processes is None else [
            dict(p, cpu_percent=p["cpu_percent"] or 0.0, full_command=p["full_command"] or ["?"])
            for p in g.processes]) for g in live]
        modules, aliases = self.terminal_kinds()
        kinds = sorted({m.replace("_", "-") for m in modules} | set(aliases))
        unset = {"TERM": None, "NO_COLOR": None, "FORCE_COLOR": None, "CLICOLOR_FORCE": None}
        coloured = [dict(o, force_color=True) for o in self.OPTIONS]
        every = coloured + [dict(o, no_color=True) for o in self.OPTIONS] + self.OPTIONS
        runs = [[dict(unset, TERM=kind), coloured[1:3]] for kind in kinds]
        runs += [[dict(unset, **env), every] for env in (
            {}, {"TERM": ""}, {"TERM": "dumb"}, {"TERM": "no-such-terminal"},
            {"TERM": "xterm-256color"}, {"TERM": "XTERM"}, {"TERM": "xterm", "NO_COLOR": "1"},
            {"TERM": "screen", "FORCE_COLOR": "1"}, {"CLICOLOR_FORCE": "1"},
            {"NO_COLOR": "1", "FORCE_COLOR": "1"})]
        doc = {"gpus": entries + GPUSTAT_MOCK + self.MADE_UP, "driver": live.driver_version,
               "hostname": live.hostname, "query_time": live.query_time.isoformat(),
               "runs": runs}
        theirs = self.texts("gpustat.core", gpustat_python(), doc)
        ours = self.texts("gpupeek", sys.executable, doc)
        self.assertEqual(len(ours), len(theirs))
        self.assertGreater(sum("\x1b[" in t for t in theirs), len(theirs) // 3, "colours")
        i = 0
        for env, cases in runs:
            shown = {k: v for k, v in env.items() if v is not None}
            for what, options in ([("table", o) for o in cases] + [("no GPUs", o) for o in cases]
                                  + [("print_to", None), ("repr", None)]):
                with self.subTest(env=shown, what=what, options=options):
                    self.assertEqual(ours[i], theirs[i])
                i += 1


class Readme(unittest.TestCase):
    """The Python examples of README.md and contrib/python/README.md run as printed,
    against the live daemon ($GPUPEEK_SHM), so the documentation cannot drift."""

    ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

    @staticmethod
    def blocks(path, heading=None):
        """The indented code blocks of `path` (under `heading` up to the next heading)."""
        with open(path) as f:
            text = f.read()
        if heading is not None:
            text = text[text.index(heading):]
            text = text[:text.index("\n#", 1)]
        blocks, current = [], []
        for line in text.splitlines() + [""]:
            if line.startswith("    ") or (current and not line.strip()):
                current.append(line[4:])
            elif current:
                blocks.append("\n".join(current).strip() + "\n")
                current = []
        return [b for b in blocks if "gpupeek" in b and "pip install" not in b]

    def run_blocks(self, blocks):
        write_scenario(3 * GIB, 2 * GIB)
        wait_until("both GPUs' processes listed", showing(3 * GIB, 2 * GIB))
        # What the examples take as given: the module imported, the user's work step, and
        # their TensorBoard writer (a stand-in that keeps what it is given).
        self.written = []

        class Writer:
            def add_scalar(inner, tag, value, global_step=None, walltime=None):
                self.written.append((tag, value, global_step))
        namespace = {"gpupeek": gpupeek, "train_step": lambda: None, "writer": Writer()}
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            for block in blocks:
                exec(compile(block, "README", "exec"), namespace)
        return out.getvalue(), err.getvalue()

    def test_the_readmes_python_section_runs(self):
        blocks = self.blocks(os.path.join(self.ROOT, "README.md"), "### Python")
        self.assertEqual(len(blocks), 1, blocks)
        out, err = self.run_blocks(blocks)
        self.assertIn('"driver_version"', out)
        self.assertIn("gpupeek: train step: GPU 0:", err)

    def test_the_readmes_collector_section_runs(self):
        blocks = self.blocks(os.path.join(self.ROOT, "README.md"),
                             "### Python: nvitop's ResourceMetricCollector")
        self.assertEqual(len(blocks), 1, blocks)
        self.run_blocks(blocks)
        tags = {tag for tag, _, _ in self.written}
        self.assertIn("resources/train/batch/cuda:0 (gpu:0)/gpu_utilization (%)/mean", tags)
        self.assertEqual({step for _, _, step in self.written}, {0, 1, 2})

    def test_the_packages_readme_examples_run(self):
        blocks = self.blocks(os.path.join(self.ROOT, "contrib", "python", "README.md"))
        self.assertGreaterEqual(len(blocks), 3, blocks)
        out, err = self.run_blocks(blocks)
        self.assertIn('"gpus"', out)
        self.assertIn("gpupeek: train step: GPU 0:", err)
        self.assertIn("resources/train/batch/cuda:0 (gpu:0)/memory_used (MiB)/mean",
                      {tag for tag, _, _ in self.written})


class Trust(unittest.TestCase):
    def fake_segment(self, suffix, data, mode):
        name = f"{SHM}-{suffix}"
        path = "/dev/shm/" + name
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        try:
            os.write(fd, data)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        self.addCleanup(os.unlink, path)
        return name

    def header(self, major):
        h = bytearray(4096)
        h[0:8] = gpupeek.MAGIC.to_bytes(8, "little")
        h[8:12] = major.to_bytes(4, "little")
        h[16:24] = (4096).to_bytes(8, "little")
        return bytes(h)

    def test_refuses_a_segment_others_can_write(self):
        name = self.fake_segment("ww", self.header(1), 0o666)
        with self.assertRaises(gpupeek.UntrustedError):
            gpupeek.Segment(name)

    def test_refuses_another_abi_major_naming_both_versions(self):
        name = self.fake_segment("abi", self.header(2), 0o644)
        with self.assertRaises(gpupeek.AbiError) as e:
            gpupeek.Segment(name)
        self.assertIn("2.0", str(e.exception))
        self.assertIn(f"1.{gpupeek.ABI_MINOR}", str(e.exception))

    def test_refuses_a_header_whose_regions_lie_outside(self):
        name = self.fake_segment("bad", self.header(1), 0o644)
        with self.assertRaises(gpupeek.CorruptError):
            gpupeek.Segment(name)

    def test_missing_segment_means_no_daemon(self):
        with self.assertRaises(gpupeek.NoDaemonError):
            gpupeek.snapshot(SHM + "-missing")


class States(unittest.TestCase):
    """ABI 1.3's states, on records made here (the fake daemon cannot publish them yet)."""

    def snapshot(self, state, heartbeat_age_ns=0, gpus=()):
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        status = gpupeek.Status(
            state=state, nvml_error_code=0, heartbeat_mono_ns=now - heartbeat_age_ns,
            period_ns=1_000_000_000, published_unix_ns=0, gpu_count=0,
            cuda_driver_version=None, driver_version=None, nvml_version=None,
            error_message="")
        return gpupeek.Snapshot(status=status, gpus=list(gpus), processes=[], proc_overflow=0,
                                proc_policy=None, hidepid=False, pid_ns_inode=0,
                                generation=1, consistent=True)

    def test_state_names_cover_abi_1_3(self):
        self.assertEqual(gpupeek.DAEMON_STATES[4], "released")
        self.assertEqual(gpupeek.GPU_STATES[6], "not responding")
        self.assertEqual(gpupeek.ReleasedError.exit_status, 10)

    def test_a_released_daemon_that_beats_is_released_not_dead(self):
        self.assertEqual(self.snapshot("released").liveness(), "released")
        self.assertEqual(self.snapshot("released", 10_000_000_000).liveness(), "stale")
        self.assertEqual(self.snapshot("stopped").liveness(), "stopped")

    def test_a_gpu_that_is_not_responding_keeps_only_its_identity(self):
        values = {"name": "H100", "uuid": "GPU-1", "pci_bus_id": "0000:01:00.0",
                  "clock_sm_max_mhz": 1980, "util_gpu_pct": 97, "mem_used_bytes": GIB}
        kept = gpupeek._current_only("not responding", values)
        self.assertEqual(kept["name"], "H100")
        self.assertEqual(kept["clock_sm_max_mhz"], 1980)
        self.assertIsNone(kept["util_gpu_pct"])
        self.assertIsNone(kept["mem_used_bytes"])
        self.assertEqual(gpupeek._current_only("ok", values), values)


if __name__ == "__main__":
    unittest.main(verbosity=2)

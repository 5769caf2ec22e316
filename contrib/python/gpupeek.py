"""Read gpupeekd's shared-memory segment from Python (standard library only).

    import gpupeek
    snap = gpupeek.snapshot()             # GPUs and processes, no driver call
    for gpu in snap.gpus:
        print(gpu.index, gpu.name, gpu.mem_used_bytes)

    with gpupeek.vram("train step") as m:  # VRAM delta and peak of a block
        train_step()
    print(m.gpus[0].delta_bytes, m.gpus[0].peak_bytes)

    @gpupeek.track_vram                   # the same for every call of a function
    def train_step(): ...

    with gpupeek.Segment() as seg:        # GPU 0's history ring (ABI 1.1), oldest first
        hist = seg.history(0)             # None from a daemon without history

The layout and the read protocol are gpupeek-shm(5). What this module does, and the
limits of doing it from Python:

- The segment is opened O_RDONLY|O_NOFOLLOW and checked with fstat before it is mapped
  (a regular file owned by root or by us, not group- or world-writable, a plausible
  size), mapped read-only, and every header number is checked against the mapping.
- Records are read under their seqlocks: read the sequence word, copy the record's bytes,
  read the sequence word again, and accept the copy only if the word is even and did not
  change; give up (StaleError) after a bounded number of tries. Sequence words are read
  through a memoryview cast to 8-byte unsigned integers, so each is one aligned 8-byte
  load in CPython (never split into smaller loads in practice).
- Python cannot issue memory fences. The check relies on the CPU not reordering the
  loads of the sequence word and of the record: true on x86-64 (loads are not reordered
  with other loads), NOT guaranteed on weakly ordered CPUs such as aarch64, where a torn
  copy could in principle pass the check. The C header (contrib/c/gpupeek.h) and the Rust
  crate (gpupeek-shm) use real acquire fences; use them where a rare torn value matters.
- Values are what the daemon sampled at its last tick (see Status.period_ns): a block
  shorter than the daemon's period can miss a peak that came and went between ticks.
"""

from __future__ import annotations

import functools
import mmap
import os
import stat
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

__all__ = [
    "Error", "NoDaemonError", "StaleError", "ReleasedError", "AbiError", "UntrustedError", "CorruptError",
    "Segment", "Snapshot", "Status", "Gpu", "Process", "History", "HistorySample", "snapshot",
    "vram", "track_vram",
]

MAGIC = int.from_bytes(b"GPUPEEK\0", "little")
ABI_MAJOR = 1
ABI_MINOR = 3
DEFAULT_NAME = "gpupeek"
ENV_NAME = "GPUPEEK_SHM"
MAX_CAPACITY = 65536
MAX_SEGMENT_BYTES = 256 << 20
MAX_ATTEMPTS = 200
PROC_RECORD_V1_0_SIZE = 128
MAX_HISTORY_SLOTS = 65536
HISTORY_HEAD_SIZE = 32
HISTORY_SAMPLE_SIZE = 24
STALE_PERIODS = 3

# ABI 1.3: "released" (the daemon let go of NVML on request, for a GPU reset or a MIG
# change: alive, no GPU published) and "not responding" (the driver has not answered for
# this GPU within the daemon's timeout: identity kept, no current value).
DAEMON_STATES = {0: "starting", 1: "live", 2: "nvml_error", 3: "stopped", 4: "released"}
GPU_STATES = {0: "empty", 1: "ok", 2: "lost", 3: "error", 4: "suspended", 5: "idle",
              6: "not responding"}
# What a GPU that is not "ok" keeps: its identity. Every other value is None.
GPU_KEPT = ("name", "uuid", "pci_bus_id", "clock_graphics_max_mhz", "clock_sm_max_mhz",
            "clock_mem_max_mhz", "nvml_error_code")
POLICIES = {1: "full", 2: "basic", 3: "none"}

# Validity bits: a field whose bit is clear is None ("not available"), never 0.
STATUS_VALID = {"driver_version": 0, "nvml_version": 1, "cuda_driver_version": 2}
GPU_VALID = {
    "name": 0, "uuid": 1, "pci_bus_id": 2,
    "mem_total_bytes": 3, "mem_used_bytes": 3, "mem_free_bytes": 3, "mem_reserved_bytes": 4,
    "util_gpu_pct": 5, "util_mem_pct": 5, "util_enc_pct": 6, "util_dec_pct": 7,
    "temp_gpu_c": 8, "fan_speed_pct": 9, "power_draw_mw": 10, "power_limit_mw": 11,
    "energy_mj": 12, "clock_graphics_mhz": 13, "clock_sm_mhz": 14, "clock_mem_mhz": 15,
    "clock_graphics_max_mhz": 16, "clock_sm_max_mhz": 17, "clock_mem_max_mhz": 18,
    "pstate": 19, "clock_event_reasons": 20, "pcie_tx_kbytes_per_s": 21,
    "pcie_rx_kbytes_per_s": 22, "pcie_link_gen": 23, "pcie_link_width": 24,
    "ecc_corrected_volatile_count": 25, "ecc_uncorrected_volatile_count": 26,
    "process_count": 27,
}
PROC_VALID = {
    "gpu_mem_bytes": 0, "uid": 1, "user": 1, "command": 2, "cmdline": 3,
    "sm_util_pct": 4, "mem_util_pct": 4, "enc_util_pct": 4, "dec_util_pct": 4,
    "cpu_centipct": 5, "host_rss_bytes": 6, "start_unix_ns": 7,
    "ns_pid": 8, "pid_ns_inode": 8, "container_runtime": 9, "container_id": 9, "pod_uid": 9,
}
HISTORY_VALID = {
    "util_gpu_pct": 0, "mem_used_mib": 1, "power_draw_mw": 2, "temp_gpu_c": 3, "util_mem_pct": 4,
}

# Every record as (name, size, [(field, offset, struct format)]), in memory order; the
# gpupeek test suite compares this table with the Rust definition (gpupeek_shm::pin).
LAYOUT = [
    ("StaticHeader", 128, [
        ("magic", 0, "Q"), ("abi_major", 8, "I"), ("abi_minor", 12, "I"),
        ("segment_size_bytes", 16, "Q"), ("epoch", 24, "Q"), ("writer_pid", 32, "I"),
        ("status_size_bytes", 36, "I"), ("status_offset", 40, "Q"),
        ("gpu_table_offset", 48, "Q"), ("gpu_record_size_bytes", 56, "I"),
        ("gpu_capacity", 60, "I"), ("proc_table_offset", 64, "Q"),
        ("proc_record_size_bytes", 72, "I"), ("proc_capacity", 76, "I"),
        ("generation_offset", 80, "Q"), ("history_offset", 88, "Q"),
        ("history_ring_size_bytes", 96, "I"), ("history_slots", 100, "I"),
        ("history_sample_size_bytes", 104, "I"), ("reserved1", 108, "I"),
        ("reserved", 112, "16s"),
    ]),
    ("StatusRecord", 256, [
        ("seq", 0, "Q"), ("state", 8, "I"), ("nvml_error_code", 12, "i"),
        ("heartbeat_mono_ns", 16, "Q"), ("period_ns", 24, "Q"),
        ("published_unix_ns", 32, "Q"), ("gpu_count", 40, "I"),
        ("cuda_driver_version", 44, "i"), ("valid", 48, "Q"), ("driver_version", 56, "32s"),
        ("nvml_version", 88, "32s"), ("error_message", 120, "128s"), ("reserved", 248, "8s"),
    ]),
    ("GpuRecord", 512, [
        ("seq", 0, "Q"), ("valid", 8, "Q"), ("index", 16, "I"), ("state", 20, "I"),
        ("nvml_error_code", 24, "i"), ("pstate", 28, "I"), ("uuid", 32, "96s"),
        ("name", 128, "96s"), ("pci_bus_id", 224, "32s"), ("mem_total_bytes", 256, "Q"),
        ("mem_used_bytes", 264, "Q"), ("mem_free_bytes", 272, "Q"),
        ("mem_reserved_bytes", 280, "Q"), ("energy_mj", 288, "Q"),
        ("clock_event_reasons", 296, "Q"), ("ecc_corrected_volatile_count", 304, "Q"),
        ("ecc_uncorrected_volatile_count", 312, "Q"), ("sample_mono_ns", 320, "Q"),
        ("util_gpu_pct", 328, "I"), ("util_mem_pct", 332, "I"), ("util_enc_pct", 336, "I"),
        ("util_dec_pct", 340, "I"), ("temp_gpu_c", 344, "i"), ("fan_speed_pct", 348, "I"),
        ("power_draw_mw", 352, "I"), ("power_limit_mw", 356, "I"),
        ("clock_graphics_mhz", 360, "I"), ("clock_sm_mhz", 364, "I"),
        ("clock_mem_mhz", 368, "I"), ("clock_graphics_max_mhz", 372, "I"),
        ("clock_sm_max_mhz", 376, "I"), ("clock_mem_max_mhz", 380, "I"),
        ("pcie_tx_kbytes_per_s", 384, "I"), ("pcie_rx_kbytes_per_s", 388, "I"),
        ("pcie_link_gen", 392, "I"), ("pcie_link_width", 396, "I"),
        ("process_count", 400, "I"), ("gpm_sm_activity_centipct", 404, "I"),
        ("gpm_sm_occupancy_centipct", 408, "I"), ("gpm_tensor_activity_centipct", 412, "I"),
        ("gpm_dram_bw_util_centipct", 416, "I"), ("reserved0", 420, "I"),
        ("gpm_pcie_tx_bytes_per_s", 424, "Q"), ("gpm_pcie_rx_bytes_per_s", 432, "Q"),
        ("gpm_nvlink_tx_bytes_per_s", 440, "Q"), ("gpm_nvlink_rx_bytes_per_s", 448, "Q"),
        ("gpm_interval_ns", 456, "Q"), ("idle_since_mono_ns", 464, "Q"),
        ("reserved", 472, "40s"),
    ]),
    ("ProcTableHead", 128, [
        ("seq", 0, "Q"), ("count", 8, "I"), ("overflow", 12, "I"), ("policy", 16, "I"),
        ("flags", 20, "I"), ("pid_ns_inode", 24, "Q"), ("sample_mono_ns", 32, "Q"),
        ("period_ns", 40, "Q"), ("reserved", 48, "80s"),
    ]),
    ("ProcRecord", 640, [
        ("gpu_index", 0, "I"), ("pid", 4, "I"), ("uid", 8, "I"), ("kind", 12, "I"),
        ("valid", 16, "Q"), ("gpu_mem_bytes", 24, "Q"), ("gpu_instance_id", 32, "I"),
        ("compute_instance_id", 36, "I"), ("user", 40, "32s"), ("command", 72, "32s"),
        ("reserved", 104, "24s"), ("ns_pid", 128, "I"), ("sm_util_pct", 132, "I"),
        ("mem_util_pct", 136, "I"), ("enc_util_pct", 140, "I"), ("dec_util_pct", 144, "I"),
        ("cpu_centipct", 148, "I"), ("host_rss_bytes", 152, "Q"),
        ("start_unix_ns", 160, "Q"), ("pid_ns_inode", 168, "Q"), ("cmdline_len", 176, "I"),
        ("reserved1", 180, "I"), ("container_runtime", 184, "16s"),
        ("container_id", 200, "72s"), ("pod_uid", 272, "40s"), ("cmdline", 312, "328s"),
    ]),
    # ABI 1.1: one ring per GPU slot at history_offset (0: none); see Segment.history.
    ("HistoryHead", 32, [
        ("seq", 0, "Q"), ("written", 8, "Q"), ("step_ns", 16, "Q"), ("reserved", 24, "Q"),
    ]),
    ("HistorySample", 24, [
        ("sample_mono_ns", 0, "Q"), ("mem_used_mib", 8, "I"), ("power_draw_mw", 12, "I"),
        ("util_gpu_pct", 16, "B"), ("util_mem_pct", 17, "B"), ("temp_gpu_c", 18, "h"),
        ("valid", 20, "H"), ("reserved", 22, "H"),
    ]),
]
_RECORDS = {name: (size, fields) for name, size, fields in LAYOUT}


def describe() -> str:
    """The layout in the text form of the Rust crate's `pin::describe()`."""
    out = []
    for name, size, fields in LAYOUT:
        out.append(f"{name} size={size}")
        for fname, offset, fmt in fields:
            out.append(f"  {offset:4} {struct.calcsize('=' + fmt):3} {fname}")
    return "\n".join(out) + "\n"


def _decode(record: str, raw: bytes) -> dict:
    """Unpacks a record's bytes (zero-extended to its full size) into a dict."""
    size, fields = _RECORDS[record]
    raw = raw[:size].ljust(size, b"\0")
    return {name: struct.unpack_from("=" + fmt, raw, off)[0] for name, off, fmt in fields}


def _text(raw: bytes) -> str:
    """A hostile NUL-padded string: cut at the first NUL, control characters as '?'."""
    s = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
    return "".join("?" if (ord(c) < 0x20 or ord(c) == 0x7F) else c for c in s)


class Error(Exception):
    """Why the segment cannot be read; `exit_status` is gpupeek(1)'s for the same case."""
    exit_status = 9


class NoDaemonError(Error):
    """No segment, or the daemon is starting or stopped."""
    exit_status = 3


class StaleError(Error):
    """A record stayed mid-write, or the daemon has not published for 3 periods."""
    exit_status = 4


class NvmlError(Error):
    """The daemon reports that NVML failed."""
    exit_status = 5


class ReleasedError(Error):
    """The daemon is alive but has let go of NVML on request (GPU reset, MIG change)."""
    exit_status = 10


class AbiError(Error):
    """The segment has another ABI major version."""
    exit_status = 6


class UntrustedError(Error):
    """The segment's owner, mode or type is not trustworthy."""
    exit_status = 7


class CorruptError(Error):
    """A header number does not fit the segment."""
    exit_status = 8


def _current_only(state: str, values: dict) -> dict:
    """A GPU that is not "ok" (asleep, lost, failing, driver not responding) was not
    sampled: whatever its record holds besides its identity is None, never shown as current."""
    if state == "ok":
        return values
    return {k: (v if k in GPU_KEPT else None) for k, v in values.items()}


def _validity(rec: dict, bits: Dict[str, int]) -> dict:
    """Replaces fields whose validity bit is clear by None, and decodes strings."""
    valid = rec["valid"]
    out = {}
    for name, value in rec.items():
        if name.startswith("reserved") or name in ("seq", "valid"):
            continue
        if isinstance(value, bytes):
            value = _text(value)
        bit = bits.get(name)
        out[name] = value if bit is None or valid >> bit & 1 else None
    return out


@dataclass
class Status:
    """The daemon's state, heartbeat (CLOCK_MONOTONIC ns) and versions."""
    state: str
    nvml_error_code: int
    heartbeat_mono_ns: int
    period_ns: int
    published_unix_ns: int
    gpu_count: int
    cuda_driver_version: Optional[int]
    driver_version: Optional[str]
    nvml_version: Optional[str]
    error_message: str


@dataclass
class Gpu:
    """One GPU; a field the GPU does not report is None. Units are in the names."""
    index: int
    state: str
    values: dict

    def __getattr__(self, name):
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass
class Process:
    """One process on one GPU (a process on two GPUs appears twice)."""
    gpu_index: int
    pid: int
    kind: str
    values: dict

    def __getattr__(self, name):
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass
class HistorySample:
    """One history sample: `n` counts the samples the daemon appended to this ring; a
    value not sampled is None (a gap, such as an asleep GPU, has every value None)."""
    n: int
    sample_mono_ns: int
    util_gpu_pct: Optional[int]
    util_mem_pct: Optional[int]
    mem_used_mib: Optional[int]
    power_draw_mw: Optional[int]
    temp_gpu_c: Optional[int]


@dataclass
class History:
    """A private copy of one GPU's history ring: a sample every `step_ns`, oldest first."""
    step_ns: int
    written: int
    samples: List[HistorySample]


@dataclass
class Snapshot:
    """A private copy of one publish (when `consistent`)."""
    status: Status
    gpus: List[Gpu]
    processes: List[Process]
    proc_overflow: int
    proc_policy: Optional[str]
    hidepid: bool
    pid_ns_inode: int
    generation: int
    consistent: bool
    # ABI 1.2: CLOCK_MONOTONIC ns when the processes were sampled, and how often they
    # are (ns); 0 from older writers.
    proc_sample_mono_ns: int = 0
    proc_period_ns: int = 0

    def liveness(self) -> str:
        """"live", "starting", "stopped", "nvml_error", "released" (alive, NVML let go on
        request: not a dead daemon) or "stale"."""
        s = self.status
        if s.state == "stopped":
            return "stopped"
        age = time.clock_gettime_ns(time.CLOCK_MONOTONIC) - s.heartbeat_mono_ns
        if age > max(s.period_ns * STALE_PERIODS, 1_000_000_000):
            return "stale"
        return s.state if s.state in ("live", "nvml_error", "released") else "starting"


class Segment:
    """An open, trusted, validated segment, mapped read-only."""

    def __init__(self, name: Optional[str] = None):
        name = name or os.environ.get(ENV_NAME) or DEFAULT_NAME
        if "/" in name or "\0" in name or len(name) > 200 or name in (".", ".."):
            raise Error(f"invalid segment name {name!r}")
        self.name = name
        path = "/dev/shm/" + name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            raise NoDaemonError(f"no segment {path}: is gpupeekd running?") from None
        except OSError as e:
            if e.errno == 40:  # ELOOP: a symbolic link
                raise UntrustedError(f"{path} is a symbolic link") from None
            raise Error(f"{path}: {e.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UntrustedError(f"{path} is not a regular object")
            if st.st_uid not in (0, os.geteuid()):
                raise UntrustedError(f"{path} is owned by uid {st.st_uid}, not root or us")
            if st.st_mode & 0o022:
                raise UntrustedError(f"{path} is writable by others (mode {st.st_mode & 0o7777:o})")
            if st.st_size < 128:
                raise NoDaemonError(f"{path}: the daemon is still starting")
            if st.st_size > MAX_SEGMENT_BYTES or st.st_size % 8:
                raise CorruptError(f"{path}: implausible size {st.st_size}")
            self._map = mmap.mmap(fd, st.st_size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        self._bytes = memoryview(self._map)
        self._words = self._bytes.cast("Q")
        self.size = st.st_size
        magic = self._words[0]
        self.header = _decode("StaticHeader", bytes(self._bytes[:128]))
        self.header["magic"] = magic
        self._validate()

    def close(self):
        self._words.release()
        self._bytes.release()
        self._map.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _validate(self):
        h = self.header
        if h["magic"] == 0:
            raise NoDaemonError(f"segment {self.name}: the daemon is still starting")
        if h["magic"] != MAGIC:
            raise CorruptError(f"segment {self.name}: bad magic: not a gpupeek segment")
        if h["abi_major"] != ABI_MAJOR:
            raise AbiError(f"segment {self.name} has ABI {h['abi_major']}.{h['abi_minor']}, "
                           f"this reader reads {ABI_MAJOR}.{ABI_MINOR}")
        if h["segment_size_bytes"] != self.size:
            raise CorruptError(f"segment {self.name}: header size differs from the object's")
        if h["gpu_capacity"] > MAX_CAPACITY or h["proc_capacity"] > MAX_CAPACITY:
            raise CorruptError(f"segment {self.name}: capacity out of range")
        regions = [
            (h["generation_offset"], 8, 1, 8),
            (h["status_offset"], h["status_size_bytes"], 1, 48),
            (h["gpu_table_offset"], h["gpu_record_size_bytes"], h["gpu_capacity"], 256),
            (h["proc_table_offset"], 128, 1, 16),
            (h["proc_table_offset"] + 128, h["proc_record_size_bytes"], h["proc_capacity"],
             PROC_RECORD_V1_0_SIZE),
        ]
        for offset, size, count, minimum in regions:
            if offset % 8 or size % 8 or size < minimum or offset + size * count > self.size:
                raise CorruptError(f"segment {self.name}: a region lies outside the segment")
        if h["status_offset"] < 128:
            raise CorruptError(f"segment {self.name}: status overlaps the header")
        self._validate_history()

    def _validate_history(self):
        h = self.header
        if h["history_offset"] == 0:
            return
        slots, sample = h["history_slots"], h["history_sample_size_bytes"]
        ring, offset = h["history_ring_size_bytes"], h["history_offset"]
        if not 0 < slots <= MAX_HISTORY_SLOTS:
            raise CorruptError(f"segment {self.name}: history slot count out of range")
        if sample < HISTORY_SAMPLE_SIZE or sample % 8:
            raise CorruptError(f"segment {self.name}: history sample misaligned or too small")
        if ring % 8 or ring < HISTORY_HEAD_SIZE + sample * slots:
            raise CorruptError(f"segment {self.name}: history ring too small for its samples")
        if offset % 8 or offset < 128 or offset + ring * h["gpu_capacity"] > self.size:
            raise CorruptError(f"segment {self.name}: history region outside the segment")

    def generation(self) -> int:
        return self._words[self.header["generation_offset"] // 8]

    def _read(self, offset: int, size: int, extra: Callable[[], object] = None):
        """Seqlock read of [offset, offset+size); `extra` runs inside the same attempt."""
        seq_index = offset // 8
        for attempt in range(MAX_ATTEMPTS):
            s1 = self._words[seq_index]
            if s1 & 1 == 0:
                raw = bytes(self._bytes[offset:offset + size])
                more = extra() if extra else None
                if self._words[seq_index] == s1:
                    return raw, more
            if attempt >= 16:
                time.sleep(0)
        raise StaleError(f"segment {self.name}: a record stayed mid-write (stale daemon?)")

    def status(self) -> Status:
        h = self.header
        raw, _ = self._read(h["status_offset"], min(h["status_size_bytes"], 256))
        rec = _decode("StatusRecord", raw)
        v = _validity(rec, STATUS_VALID)
        return Status(
            state=DAEMON_STATES.get(rec["state"], "unknown"),
            nvml_error_code=rec["nvml_error_code"], heartbeat_mono_ns=rec["heartbeat_mono_ns"],
            period_ns=rec["period_ns"], published_unix_ns=rec["published_unix_ns"],
            gpu_count=rec["gpu_count"], cuda_driver_version=v["cuda_driver_version"],
            driver_version=v["driver_version"], nvml_version=v["nvml_version"],
            error_message=v["error_message"])

    def _gpu(self, slot: int) -> Gpu:
        h = self.header
        size = h["gpu_record_size_bytes"]
        raw, _ = self._read(h["gpu_table_offset"] + slot * size, min(size, 512))
        v = _validity(_decode("GpuRecord", raw), GPU_VALID)
        state = GPU_STATES.get(v.pop("state"), "unknown")
        return Gpu(index=v.pop("index"), state=state, values=_current_only(state, v))

    def _processes(self):
        h = self.header
        base, rec_size = h["proc_table_offset"], h["proc_record_size_bytes"]
        def slots():
            count = _decode("ProcTableHead", bytes(self._bytes[base:base + 128]))["count"]
            if count > h["proc_capacity"]:
                return None
            first = base + 128
            return [bytes(self._bytes[first + i * rec_size:first + i * rec_size + min(rec_size, 640)])
                    for i in range(count)]
        raw_head, raw_slots = self._read(base, 128, slots)
        if raw_slots is None:
            raise CorruptError(f"segment {self.name}: process count exceeds capacity")
        head = _decode("ProcTableHead", raw_head)
        procs = []
        for raw in raw_slots:
            v = _validity(_decode("ProcRecord", raw), PROC_VALID)
            kind = v.pop("kind")
            kinds = [k for bit, k in ((1, "compute"), (2, "graphics")) if kind & bit]
            cmdline = v.get("cmdline")
            if cmdline is not None:
                stored = raw[312:640].rstrip(b"\0")
                v["cmdline"] = [_text(a) for a in stored.split(b"\0")] if stored else []
            for mig in ("gpu_instance_id", "compute_instance_id"):
                if v[mig] == 0xFFFFFFFF:
                    v[mig] = None
            procs.append(Process(gpu_index=v.pop("gpu_index"), pid=v.pop("pid"),
                                 kind="+".join(kinds) or "unknown", values=v))
        return head, procs

    def history(self, slot: int) -> Optional[History]:
        """GPU slot `slot`'s history ring, oldest sample first, read under the ring's
        seqlock; None when the segment has no history (a 1.0 writer) or no such slot."""
        h = self.header
        if h["history_offset"] == 0 or not 0 <= slot < h["gpu_capacity"]:
            return None
        ring = h["history_offset"] + slot * h["history_ring_size_bytes"]
        slots, size = h["history_slots"], h["history_sample_size_bytes"]

        def samples():
            # Runs inside the seqlock attempt: decodes its own (maybe torn) head; a torn
            # `written` only picks other slots, since n % slots stays inside the ring.
            head = _decode("HistoryHead", bytes(self._bytes[ring:ring + HISTORY_HEAD_SIZE]))
            first = head["written"] - min(head["written"], slots)
            at = [ring + HISTORY_HEAD_SIZE + (n % slots) * size
                  for n in range(first, head["written"])]
            return head, first, [bytes(self._bytes[a:a + HISTORY_SAMPLE_SIZE]) for a in at]

        _, (head, first, raws) = self._read(ring, HISTORY_HEAD_SIZE, samples)
        out = []
        for n, raw in enumerate(raws, first):
            v = _validity(_decode("HistorySample", raw), HISTORY_VALID)
            out.append(HistorySample(n=n, **v))
        return History(step_ns=head["step_ns"], written=head["written"], samples=out)

    def snapshot(self) -> Snapshot:
        """Every record of one publish; retaken (up to 8 times) while a publish interleaves."""
        for _ in range(8):
            before = self.generation()
            status = self.status()
            if status.gpu_count > self.header["gpu_capacity"]:
                raise CorruptError(f"segment {self.name}: GPU count exceeds capacity")
            gpus = [self._gpu(i) for i in range(status.gpu_count)]
            head, procs = self._processes()
            consistent = self.generation() == before
            if consistent:
                break
        return Snapshot(status=status, gpus=gpus, processes=procs,
                        proc_overflow=head["overflow"], proc_policy=POLICIES.get(head["policy"]),
                        hidepid=bool(head["flags"] & 1), pid_ns_inode=head["pid_ns_inode"],
                        generation=before, consistent=consistent,
                        proc_sample_mono_ns=head["sample_mono_ns"],
                        proc_period_ns=head["period_ns"])


def snapshot(name: Optional[str] = None, check_live: bool = True) -> Snapshot:
    """Opens segment `name` ($GPUPEEK_SHM, else "gpupeek"), copies it and closes it.
    With `check_live`, a daemon that is not live raises the matching Error."""
    with Segment(name) as seg:
        snap = seg.snapshot()
    if check_live:
        live = snap.liveness()
        if live == "stale":
            raise StaleError(f"segment {seg.name}: the daemon has stopped publishing")
        if live == "nvml_error":
            raise NvmlError(f"NVML error {snap.status.nvml_error_code}: "
                            f"{snap.status.error_message}")
        if live == "released":
            raise ReleasedError(f"segment {seg.name}: the daemon has let go of the driver on "
                                "request (GPU reset or MIG change); `gpupeekd --resume` "
                                "takes it back")
        if live != "live":
            raise NoDaemonError(f"segment {seg.name}: the daemon is {live}")
    return snap


# ---- VRAM of a block ------------------------------------------------------------------

def _own_pid_ns() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


@dataclass
class GpuVram:
    """Memory used on one GPU during a block, in bytes: the whole GPU's (`*_bytes`) and this
    process's own (`process_*_bytes`, None when the daemon does not list it)."""
    index: int
    start_bytes: int
    end_bytes: int = 0
    peak_bytes: int = 0
    process_start_bytes: Optional[int] = None
    process_end_bytes: Optional[int] = None
    process_peak_bytes: Optional[int] = None

    @property
    def delta_bytes(self) -> int:
        return self.end_bytes - self.start_bytes

    @property
    def peak_delta_bytes(self) -> int:
        return self.peak_bytes - self.start_bytes

    @property
    def process_delta_bytes(self) -> Optional[int]:
        if self.process_end_bytes is None:
            return None
        return self.process_end_bytes - (self.process_start_bytes or 0)


def _fmt(n: int, sign: bool = False) -> str:
    return f"{n / 2**20:{'+' if sign else ''}.0f} MiB"


class vram:
    """Context manager (and decorator) reporting a block's VRAM delta and peak on the
    GPU(s) this process uses, by polling gpupeekd's segment, never the driver.

    A background thread samples at the daemon's period. The GPUs reported are those on
    which the daemon lists this process at any sample (`gpus=` chooses them instead; when
    the process is never listed, every GPU is reported and `matched_process` is False).
    With `settle` (default), leaving the block waits for the daemon's next publish (at
    most 3 periods) so the end value includes the block's last allocations; pass
    settle=False in hot loops. `report` is called with the result (default: one line per
    GPU on stderr; None: silent). After the block: `gpus` maps GPU index to GpuVram.
    """

    def __init__(self, label: str = "block", *, shm: Optional[str] = None,
                 gpus: Optional[List[int]] = None, settle: bool = True,
                 report: Optional[Callable[["vram"], None]] = ...,
                 pid: Optional[int] = None):
        self.label = label
        self._shm, self._only, self._settle = shm, gpus, settle
        self._report = _print_report if report is ... else report
        self._pid = pid if pid is not None else os.getpid()
        self._ns = _own_pid_ns()
        self.gpus: Dict[int, GpuVram] = {}
        self.samples = 0
        self.matched_process = False
        self._seen: set = set()

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with vram(self.label if self.label != "block" else func.__qualname__,
                      shm=self._shm, gpus=self._only, settle=self._settle,
                      report=self._report, pid=self._pid):
                return func(*args, **kwargs)
        return wrapper

    def _mine(self, snap: Snapshot, p: Process) -> bool:
        if p.pid == self._pid and snap.pid_ns_inode in (0, self._ns):
            return True
        return p.ns_pid == self._pid and p.pid_ns_inode not in (None, 0) \
            and p.pid_ns_inode == self._ns

    def _sample(self, snap: Snapshot, first: bool = False):
        self.samples += 1
        own = {}
        for p in snap.processes:
            if self._mine(snap, p) and p.gpu_mem_bytes is not None:
                own[p.gpu_index] = own.get(p.gpu_index, 0) + p.gpu_mem_bytes
        self._seen.update(own)
        for g in snap.gpus:
            used = g.mem_used_bytes
            if used is None:
                continue
            v = self.gpus.get(g.index)
            if v is None:
                if not first:
                    continue
                v = self.gpus[g.index] = GpuVram(g.index, used, used, used)
            v.end_bytes = used
            v.peak_bytes = max(v.peak_bytes, used)
            mine = own.get(g.index)
            if first:
                v.process_start_bytes = mine
            if mine is not None or v.process_end_bytes is not None:
                v.process_end_bytes = mine or 0
                v.process_peak_bytes = max(v.process_peak_bytes or 0, mine or 0)

    def _poll(self):
        last = self._last_gen
        while not self._stop.is_set():
            gen = self._seg.generation()
            if gen != last:
                last = gen
                try:
                    self._sample(self._seg.snapshot())
                except Error:
                    pass
            self._stop.wait(self._period)
        self._last_gen = last

    def __enter__(self):
        self._seg = Segment(self._shm)
        try:
            snap = self._seg.snapshot()
        except Error:
            self._seg.close()
            raise
        self._period = min(max(snap.status.period_ns / 1e9, 0.005), 1.0)
        self._last_gen = snap.generation
        self._sample(snap, first=True)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="gpupeek-vram", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        try:
            if self._settle:
                deadline = time.monotonic() + 3 * self._period + 0.05
                while self._seg.generation() == self._last_gen and time.monotonic() < deadline:
                    time.sleep(self._period / 4)
            self._sample(self._seg.snapshot())
        except Error:
            pass
        finally:
            self._seg.close()
        chosen = self._only if self._only is not None else sorted(self._seen)
        self.matched_process = bool(self._seen)
        if chosen:
            self.gpus = {i: v for i, v in self.gpus.items() if i in chosen}
        if self._report is not None:
            self._report(self)
        return False


def _print_report(m: "vram"):
    for v in m.gpus.values():
        line = (f"gpupeek: {m.label}: GPU {v.index}: {_fmt(v.delta_bytes, True)} "
                f"(peak {_fmt(v.peak_delta_bytes, True)}, {_fmt(v.peak_bytes)} used at peak)")
        if v.process_delta_bytes is not None:
            line += f"; this process {_fmt(v.process_delta_bytes, True)}, " \
                    f"peak {_fmt(v.process_peak_bytes or 0)}"
        print(line, file=sys.stderr)


def track_vram(func=None, **kwargs):
    """Decorator: `@track_vram` or `@track_vram(label=..., settle=False, ...)`; each call
    is measured like `with vram(...)`, labelled with the function's name by default."""
    if func is None:
        return lambda f: track_vram(f, **kwargs)
    kwargs.setdefault("label", func.__qualname__)
    return vram(**kwargs)(func)


def _print_history(slot: int, hist: Optional[History]):
    """Prints a ring in gpupeek-read.c's --history format (N/A for None)."""
    if hist is None:
        return
    print(f"history gpu={slot} step_ns={hist.step_ns} written={hist.written} "
          f"samples={len(hist.samples)}")
    for s in hist.samples:
        values = " ".join(f"{k}={'N/A' if getattr(s, k) is None else getattr(s, k)}"
                          for k in ("util_gpu_pct", "util_mem_pct", "mem_used_mib",
                                    "power_draw_mw", "temp_gpu_c"))
        print(f"sample gpu={slot} n={s.n} sample_mono_ns={s.sample_mono_ns} {values}")


if __name__ == "__main__":
    # python3 gpupeek.py [--history] [SEGMENT-NAME]
    args = sys.argv[1:]
    with_history = bool(args) and args[0] == "--history"
    args = args[1:] if with_history else args
    try:
        name = args[0] if args else None
        snap = snapshot(name)
        if with_history:
            with Segment(name) as seg:
                histories = [seg.history(i) for i in range(len(snap.gpus))]
    except Error as e:
        print(f"gpupeek.py: {e}", file=sys.stderr)
        sys.exit(e.exit_status)
    for g in snap.gpus:
        print(f"[{g.index}] {g.name} {g.state} mem_used_bytes={g.mem_used_bytes} "
              f"util_gpu_pct={g.util_gpu_pct} temp_gpu_c={g.temp_gpu_c}")
    for p in snap.processes:
        print(f"  gpu {p.gpu_index} pid {p.pid} {p.user} {p.command} {p.gpu_mem_bytes}")
    for i, hist in enumerate(histories if with_history else []):
        _print_history(i, hist)

"""nvitop's ResourceMetricCollector, read from gpupeekd's segment (standard library only).

    from gpupeek import ResourceMetricCollector, CudaDevice   # was: from nvitop import ...
    collector = ResourceMetricCollector(devices=CudaDevice.all(), root_pids={os.getpid()})
    with collector(tag="train"):
        ...
        collector.collect()   # {'train/cuda:0 (gpu:3)/gpu_utilization (%)/mean': 42.0, ...}

The keys, units and nesting are nvitop 1.7's (`<tag>/<scope>/<metric (unit)>/<mean|min|max|
last>`, then `<tag>/duration (s)`, `<tag>/timestamp` and `<tag>/last_timestamp`). What
differs is where the numbers come from:

- GPU figures (memory used/free/percent, utilisation, memory utilisation, temperature,
  power draw) are the window [tag activated, now] of the daemon's history, computed by
  Segment.gpu_window in gpupeek.py: no NVML call, no sampling thread; the window covers
  what the GPU did whether or not anyone called collect(). From the GPU's track of
  tiered history (ABI 1.7): the mean exact from the running integrals read when the tag
  was activated (the mean of the daemon's samples; nvitop's is a time-weighted mean of
  its own, within one step of it), min/max from the finest tier covering each part of
  the window, last from the newest sample. Memory is in whole MiB (the history's
  resolution). Memory utilisation (not in the tracks) and GPUs without a track come from
  the raw ring (300 steps). A MIG device's memory comes from its own track.
- Figures the history does not keep (memory total, fan speed, power limit), the host's
  (cpu_percent, memory, swap, load average, read from /proc as psutil computes them) and
  each process's are sampled when a tag is activated and on collect() (at most every
  `interval / 2`, nvitop's rule), and averaged over those samples as nvitop averages its
  own. The host's cpu_percent mean is exact: /proc/stat's counters over the whole window.
- Per-process keys (`pid:N/...`) cover root_pids and every descendant that the daemon
  lists on a collected GPU (GPU memory, SM and memory utilisation, the daemon's CPU% and
  RSS of it). nvitop 1.7.2 holds its root processes in a WeakSet that empties at once, so
  its pid keys do not appear in ordinary use; these do.
- A GPU in MIG mode is followed by its MIG devices (`gpu:(0, 1)`), as in nvitop: their
  memory over the window from their tracks (else sampled from the segment's MIG table),
  NaN for what NVML has no per-MIG figure of, and
  the processes running in them.
- `daemonize()` runs a thread that calls collect() every interval, as nvitop's does; it
  is the only thread, and a cheap one.
- Without a live daemon (or when it stops) the collector still runs: host keys keep
  coming, GPU keys from the history are NaN (sampled keys keep their last value, as
  nvitop's do when a value turns N/A), and one line on stderr says why (once per
  process, like `vram()`).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import threading
import time
from typing import Callable, Dict, Iterable, List, Optional

import gpupeek

__all__ = ["ResourceMetricCollector", "Device", "CudaDevice", "collect_in_background"]

MIB = 1 << 20
GIB = 1 << 30
timer = time.monotonic


def _mono_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


# ---- devices ------------------------------------------------------------------------------

class Device:
    """A GPU the daemon publishes, by NVML index (nvitop's physical `Device`); `index`,
    `physical_index` and `uuid` are the daemon's. A MIG device (from CUDA_VISIBLE_DEVICES)
    is its parent GPU plus `mig_uuid`, and `mig_index` once known (nvitop's `gpu:(0, 1)`)."""

    def __init__(self, index: int, uuid: Optional[str] = None, mig_uuid: Optional[str] = None,
                 mig_index: Optional[int] = None):
        self.index = self.physical_index = index
        self._uuid = uuid
        self.mig_uuid = mig_uuid
        self.mig_index = mig_index

    def uuid(self) -> Optional[str]:
        return self.mig_uuid or self._uuid

    def identifier(self) -> str:
        return f"gpu:{self._where()}"

    def _where(self) -> str:
        return str(self.index) if self.mig_uuid is None else f"({self.index}, {self.mig_index})"

    def __repr__(self):
        return f"{type(self).__name__}(index={self.index}, uuid={self.uuid()!r})"

    def __eq__(self, other):
        return type(other) is type(self) and other.__dict__ == self.__dict__

    def __hash__(self):
        return hash((type(self), self.index, self.mig_uuid))

    @staticmethod
    def all(shm: Optional[str] = None) -> List["Device"]:
        """Every GPU the daemon publishes ([] without a live daemon: said once)."""
        gpus = _published(shm)
        return [Device(g.index, g.uuid) for g in gpus]

    @staticmethod
    def count(shm: Optional[str] = None) -> int:
        return len(_published(shm))


class CudaDevice(Device):
    """A GPU by CUDA ordinal: CUDA_VISIBLE_DEVICES (indices, or GPU/MIG UUIDs and their
    unique prefixes, as CUDA reads it) mapped onto the daemon's GPUs. `cuda_index` is the
    ordinal; `index` and `physical_index` the daemon's (NVML) index."""

    def __init__(self, cuda_index: int, index: int, uuid: Optional[str] = None,
                 mig_uuid: Optional[str] = None):
        super().__init__(index, uuid, mig_uuid)
        self.cuda_index = cuda_index
        self.nvml_index = index

    def identifier(self) -> str:
        return f"cuda:{self.cuda_index} (gpu:{self._where()})"

    def __repr__(self):
        return f"CudaDevice(cuda_index={self.cuda_index}, physical_index={self.index}, " \
               f"uuid={self.uuid()!r})"

    @staticmethod
    def all(shm: Optional[str] = None) -> List["CudaDevice"]:
        """The CUDA-visible GPUs in CUDA order ([] without a live daemon: said once)."""
        snap = _snapshot_or_none(shm)
        if snap is None:
            return []
        return [CudaDevice(i, *found) for i, found in
                enumerate(parse_cuda_visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"), snap))]

    @staticmethod
    def count(shm: Optional[str] = None) -> int:
        return len(CudaDevice.all(shm))


Device.cuda = CudaDevice  # nvitop's spelling: Device.cuda.all()

_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Fa-f-]+$")


def parse_cuda_visible_devices(value: Optional[str], snap: "gpupeek.Snapshot"):
    """[(index, gpu uuid, mig uuid or None)] for CUDA_VISIBLE_DEVICES `value` against the
    daemon's GPUs, by CUDA's rules as nvitop applies them: entries are indices or UUIDs
    (a unique prefix will do), not both; the list ends at the first entry that names no
    GPU; a repeated entry makes it empty; a MIG device in the list (or a listed GPU in MIG
    mode) makes that one MIG device the only visible device. Unset: every GPU."""
    gpus = snap.gpus
    migs = {m.uuid: m for m in snap.mig if getattr(m, "uuid", None)}
    if value is None:
        return [(g.index, g.uuid, None) for g in gpus]
    out, seen, by_index = [], set(), None
    for entry in value.split(","):
        entry = entry.strip()
        m = re.match(r"^[+-]?\d+", entry)
        if m:
            entry = m.group(0)
        if entry in seen:
            return []
        if entry.lstrip("+-").isdigit():
            if by_index is False:
                break
            by_index = True
            n = int(entry)
            if not 0 <= n < len(gpus):
                break
            out.append((gpus[n].index, gpus[n].uuid, None))
        elif _UUID.match(entry):
            if by_index is True:
                break
            by_index = False
            found = [(g.index, g.uuid, None) for g in gpus if (g.uuid or "").startswith(entry)]
            found += [(m.gpu_index, _gpu_uuid(gpus, m.gpu_index), u)
                      for u, m in migs.items() if u.startswith(entry)]
            if len(found) != 1:
                break
            out.append(found[0])
        else:
            break
        seen.add(entry)
    mig = [d for d in out if d[2] is not None]
    if mig:
        return mig[:1]
    for index, uuid, _ in out:
        first = sorted((m for m in snap.mig if m.gpu_index == index),
                       key=lambda m: getattr(m, "mig_index", 0) or 0)
        if first and getattr(first[0], "uuid", None):
            return [(index, uuid, first[0].uuid)]
    return out


def _gpu_uuid(gpus, index):
    return next((g.uuid for g in gpus if g.index == index), None)


def _snapshot_or_none(shm):
    try:
        return gpupeek.snapshot(shm)
    except gpupeek.Error as e:
        _say_down(e)
        return None


def _published(shm):
    snap = _snapshot_or_none(shm)
    return [] if snap is None else snap.gpus


def _say_down(e: Exception):
    gpupeek._say_once(f"gpupeek: GPU metrics not collected: {e} "
                      "(said once; the code runs anyway)")


# ---- the host, from /proc, as psutil computes it -------------------------------------------

def _cpu_times():
    """(busy, total) clock ticks of /proc/stat's cpu line, psutil's way: guest time is
    already in user and nice, and idle and iowait are not busy."""
    with open("/proc/stat", "rb") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    fields += [0] * (10 - len(fields))
    total = sum(fields) - fields[8] - fields[9]
    return total - fields[3] - fields[4], total


def _cpu_percent(t1, t2) -> float:
    busy, total = max(0, t2[0] - t1[0]), max(0, t2[1] - t1[1])
    return 0.0 if total == 0 else round(100.0 * min(busy, total) / total, 1)


_MEMINFO_KEYS = (b"MemTotal:", b"MemFree:", b"MemAvailable:", b"SwapTotal:", b"SwapFree:")


def _meminfo() -> Dict[str, int]:
    """The /proc/meminfo lines the host keys use, in bytes."""
    out = {}
    with open("/proc/meminfo", "rb") as f:
        for line in f.read().splitlines():
            if line.startswith(_MEMINFO_KEYS):
                name, value = line.split()[:2]
                out[name[:-1].decode()] = int(value) * 1024
    return out


def _host_sample(last_cpu):
    """The host keys nvitop takes from psutil, and the new cpu times."""
    cpu = _cpu_times()
    mem = _meminfo()
    total = mem.get("MemTotal", 0)
    avail = mem.get("MemAvailable") or mem.get("MemFree", 0)
    avail = 0 if avail < 0 else (mem.get("MemFree", 0) if avail > total else avail)
    swap_total = mem.get("SwapTotal", 0)
    swap_used = swap_total - mem.get("SwapFree", 0)
    metrics = {
        "host/cpu_percent (%)": _cpu_percent(last_cpu, cpu),
        "host/memory_percent (%)": 0.0 if not total else round(100.0 * (total - avail) / total, 1),
        "host/swap_percent (%)": 0.0 if not swap_total else round(100.0 * swap_used / swap_total, 1),
        "host/memory_used (GiB)": (total - avail) / GIB,
    }
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    if load is not None:
        metrics.update({"host/load_average (%) (1 min)": load[0],
                        "host/load_average (%) (5 min)": load[1],
                        "host/load_average (%) (15 min)": load[2]})
    return metrics, cpu, total


def _ppid(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


# ---- statistics: nvitop's _StatisticsMaintainer ------------------------------------------

class _Stats:
    """Mean (trapezoid over samples, the first held back to the start and the last held
    to now), min, max and last of sampled values, as nvitop keeps them."""
    __slots__ = ("start", "last_t", "integral", "last", "min", "max", "has_nan")

    def __init__(self, start: float):
        self.start, self.last_t = start, math.nan
        self.integral = self.last = self.min = self.max = None
        self.has_nan = False

    def add(self, value: float, t: float):
        if math.isnan(value):
            self.has_nan = True
            return
        if self.last is None:
            self.integral = value * (t - self.start)
            self.last = self.min = self.max = value
        else:
            self.integral += (value + self.last) * (t - self.last_t) / 2.0
            self.last = value
            self.min, self.max = min(self.min, value), max(self.max, value)
        self.last_t = t

    def items(self, now: float):
        if self.integral is None:
            mean = math.nan
        elif self.has_nan:
            span = self.last_t - self.start
            mean = self.integral / span if span > 0 else self.last
        else:
            span = now - self.start
            mean = (self.integral + self.last * (now - self.last_t)) / span if span > 0 else self.last
        nan = math.nan
        return (("mean", mean), ("min", nan if self.min is None else self.min),
                ("max", nan if self.max is None else self.max),
                ("last", nan if self.last is None else self.last))


class _Buffer:
    """One active tag: its window's start and the statistics of the sampled keys. Samples
    added here are added to the enclosing tags too (nvitop's nesting)."""

    def __init__(self, tag: str, prev: Optional["_Buffer"], cpu):
        self.tag, self.prev = tag, prev
        self.key_prefix = tag if prev is None else f"{prev.key_prefix}/{tag}"
        self.clear(cpu)

    def clear(self, cpu):
        self.start = self.last_t = timer()
        self.start_ns = _mono_ns()
        self.last_epoch = time.time()
        self.start_cpu = cpu
        self.stats: Dict[str, _Stats] = {}
        self.opened: Dict[int, tuple] = {}  # GPU slot -> its gpu_point() at the start
        # GPU slot, or a MIG device's UUID -> its track's integrals at the start
        self.integrals: Dict[object, "gpupeek.Integral"] = {}
        self.memos: Dict[object, dict] = {}  # the same keys -> gpu_window's memo
        self.windows = None  # (generation, slots version, end_ns, device keys, mean keys)
        self.names: Dict[str, tuple] = {}  # sampled key -> its full names in collect()
        self.order: Optional[List[str]] = None  # collect()'s keys in nvitop's order
        self.order_set: set = set()

    def add(self, metrics: Dict[str, float], t: float, epoch: float):
        for key in set(self.stats).difference(metrics):
            self.stats[key].add(math.nan, t)
        for key, value in metrics.items():
            stats = self.stats.get(key)
            if stats is None:
                stats = self.stats[key] = _Stats(self.start)
            stats.add(value, t)
        self.last_t, self.last_epoch = t, epoch
        if self.prev is not None:
            self.prev.add(metrics, t, epoch)


# ---- the collector -----------------------------------------------------------------------

# The per-device keys nvitop 1.7's DEVICE_METRICS emits, in its order. memory_total,
# fan_speed and power_limit are sampled; the others come from the history's windows
# (_window_values), except on a MIG device, whose memory is sampled (_mig_metrics).
DEVICE_METRICS = ["memory_used (MiB)", "memory_free (MiB)", "memory_total (MiB)",
                  "memory_percent (%)", "gpu_utilization (%)", "memory_utilization (%)",
                  "fan_speed (%)", "temperature (C)", "power_usage (W)", "power_limit (W)"]
_NAN4 = (("mean", math.nan), ("min", math.nan), ("max", math.nan), ("last", math.nan))


class ResourceMetricCollector:
    """nvitop's ResourceMetricCollector (same constructor, methods, keys and nesting),
    computed from gpupeekd's segment: see this module's docstring.

    Args:
        devices: Device or CudaDevice objects (or NVML indices); default Device.all().
        root_pids: the processes (with their descendants) whose pid keys are collected;
            default {os.getpid()}; {1} collects every process on the devices.
        interval: daemonize()'s period, and the least time (interval / 2) between two
            samples of the host and per-process figures.
        shm: the segment (default $GPUPEEK_SHM, else "gpupeek"); gpupeek's addition.
    """

    DEVICE_METRICS = DEVICE_METRICS

    def __init__(self, devices: Optional[Iterable[Device]] = None, *,
                 root_pids: Optional[Iterable[int]] = None, interval: float = 1.0,
                 shm: Optional[str] = None):
        if isinstance(interval, (int, float)) and not isinstance(interval, bool) and interval > 0:
            interval = float(interval)
        else:
            raise ValueError(f"Invalid argument interval={interval!r}")
        self.interval = interval
        self._shm = shm
        if devices is None:
            devices = Device.all(shm)
        elif isinstance(devices, (Device, int)):
            devices = [devices]
        self.devices: List[Device] = [d if isinstance(d, Device) else Device(int(d))
                                      for d in devices]
        self._seg: Optional[gpupeek.Segment] = None
        self.all_devices, self.leaf_devices = self._with_mig_devices(self.devices)
        self.root_pids = {os.getpid()} if root_pids is None else set(root_pids)
        self._lock = threading.RLock()
        self._buffer: Optional[_Buffer] = None
        self._tags: set = set()
        self._cpu = _cpu_times()
        self._last_sample = timer() - 2.0 * interval
        self._own_ns = gpupeek._own_pid_ns()
        self._ancestry: Dict[tuple, bool] = {}
        self._procs = None  # (table key, pid namespace inode, [Process]) last read

    def _with_mig_devices(self, devices):
        """(all devices, leaf devices) as nvitop has them: each GPU in MIG mode followed by
        its MIG devices, which (not the GPU) hold its processes."""
        mig = []
        if devices:
            seg = self._segment()
            try:
                mig = seg.snapshot().mig if seg is not None else []
            except gpupeek.Error as e:
                self._drop_segment(e)
        migs = {m.uuid: m for m in mig if m.uuid}
        all_, leaves = [], []
        for d in devices:
            all_.append(d)
            if d.mig_uuid is not None:
                m = migs.get(d.mig_uuid)
                d.mig_index = None if m is None else m.mig_index
                leaves.append(d)
                continue
            children = [Device(d.index, d.uuid(), m.uuid, m.mig_index) for m in
                        sorted((m for m in mig if m.gpu_index == d.index and m.uuid),
                               key=lambda m: m.mig_index)]
            all_.extend(children)
            leaves.extend(children or [d])
        return all_, leaves

    # -- tags --

    def activate(self, tag: str) -> "ResourceMetricCollector":
        """Starts collection `tag` (nested inside the active one: keys `outer/tag/...`)."""
        with self._lock:
            if self._buffer is not None and tag in self._tags:
                raise RuntimeError(f'Resource metric collector is already started with tag "{tag}"')
            self._tags.add(tag)
            self._buffer = _Buffer(tag, self._buffer, _cpu_times())
            self._take_sample()
            self._open(self._buffer)
        return self

    start = activate

    def deactivate(self, tag: Optional[str] = None) -> "ResourceMetricCollector":
        """Stops collection `tag` (default: the innermost) and every one inside it."""
        with self._lock:
            if self._buffer is None:
                if tag is not None:
                    raise RuntimeError("Resource metric collector has not been started yet.")
                return self
            tag = self._check_tag(tag)
            buffer = self._buffer
            while buffer is not None:
                self._tags.remove(buffer.tag)
                if buffer.tag == tag:
                    self._buffer = buffer.prev
                    break
                buffer = buffer.prev
        return self

    stop = deactivate

    @contextlib.contextmanager
    def context(self, tag: str):
        """`with collector.context(tag)` (or `with collector(tag=...)`): activate, then
        deactivate on the way out."""
        try:
            self.activate(tag=tag)
            yield self
        finally:
            self.deactivate(tag=tag)

    __call__ = context

    def clear(self, tag: Optional[str] = None) -> None:
        """Restarts the window of `tag` (default: the innermost) and of every tag inside it."""
        with self._lock:
            if self._buffer is None:
                if tag is not None:
                    raise RuntimeError("Resource metric collector has not been started yet.")
                return
            tag = self._check_tag(tag)
            cpu = _cpu_times()
            buffer = self._buffer
            while buffer is not None:
                buffer.clear(cpu)
                self._open(buffer)
                if buffer.tag == tag:
                    break
                buffer = buffer.prev
            # A first sample at once, as activate() takes: the host and process keys
            # are there on the next collect() however soon it comes.
            self._take_sample()

    reset = clear

    def _open(self, buffer: _Buffer):
        """Notes each device's current value as the value its window opens with, and the
        running integrals of its track (an exact mean over the window at collect())."""
        seg = self._segment() if self._slots else None
        if seg is None:
            return
        try:
            for slot in self._slots.values():
                buffer.opened[slot] = seg.gpu_point(slot)
                integral = seg.gpu_integral(slot)
                if integral is not None:
                    buffer.integrals[slot] = integral
            for d in self.all_devices:
                track = seg.find_track(d.mig_uuid) if d.mig_uuid is not None else None
                integral = None if track is None else seg.track_integral(track)
                if integral is not None:
                    buffer.integrals[d.mig_uuid] = integral
        except gpupeek.Error as e:
            self._drop_segment(e)

    def _check_tag(self, tag):
        if tag is None:
            return self._buffer.tag
        if tag not in self._tags:
            raise RuntimeError(f'Resource metric collector has not been started with tag "{tag}".')
        return tag

    # -- collecting --

    def collect(self) -> Dict[str, float]:
        """The figures of the innermost active tag over its window, as a plain dict."""
        with self._lock:
            if self._buffer is None:
                raise RuntimeError("Resource metric collector has not been started yet.")
            sampled = timer() - self._last_sample > self.interval / 2.0
            if sampled:
                self._take_sample()
            buffer = self._buffer
            now, now_ns = timer(), _mono_ns()
            prefix = buffer.key_prefix
            metrics = {}
            names = buffer.names
            for key, stats in buffer.stats.items():
                full = names.get(key)
                if full is None:
                    full = names[key] = _full_names(prefix, key)
                if len(full) == 1:  # running time: its max alone, under the bare name
                    metrics[full[0]] = stats.items(now)[2][1]
                    continue
                for name, (_, value) in zip(full, stats.items(now)):
                    metrics[name] = value
            self._host_cpu_mean(buffer, metrics, self._cpu if sampled else _cpu_times())
            self._device_windows(buffer, now_ns, metrics)
            metrics = self._in_nvitops_order(buffer, metrics)
            metrics[f"{prefix}/duration (s)"] = timer() - buffer.start
            metrics[f"{prefix}/timestamp"] = time.time()
            metrics[f"{prefix}/last_timestamp"] = buffer.last_epoch
            return metrics

    def _in_nvitops_order(self, buffer: _Buffer, metrics):
        """`metrics` in nvitop's order: host, then each device's keys in DEVICE_METRICS'
        order, then the processes' (the order is kept until the key set changes)."""
        order = buffer.order
        if order is None or len(order) != len(metrics) or not buffer.order_set <= metrics.keys():
            rank = {d.identifier(): i for i, d in enumerate(self.all_devices)}
            metric_rank = {m: i for i, m in enumerate(DEVICE_METRICS)}
            cut = len(buffer.key_prefix) + 1

            def where(item):
                n, key = item
                parts = key[cut:].split("/")
                if parts[0] == "host":
                    return (0, n)
                if parts[0] in rank:
                    return (1, rank[parts[0]], metric_rank.get(parts[1], 99), n)
                return (2, n)
            order = buffer.order = [k for _, k in sorted(enumerate(metrics), key=where)]
            buffer.order_set = set(order)
        return {k: metrics[k] for k in order}

    @staticmethod
    def _host_cpu_mean(buffer: _Buffer, metrics, cpu):
        """The host's cpu_percent mean is exact: /proc/stat over the whole window, `cpu`
        its times now (the sample's, when collect() just took one: read once)."""
        key = f"{buffer.key_prefix}/host/cpu_percent (%)/mean"
        if key in metrics:
            metrics[key] = _cpu_percent(buffer.start_cpu, cpu)

    def _segment(self) -> Optional[gpupeek.Segment]:
        if self._seg is None:
            try:
                self._seg = gpupeek.Segment(self._shm)
            except gpupeek.Error as e:
                _say_down(e)
        return self._seg

    def _drop_segment(self, e: Exception):
        _say_down(e)
        if self._seg is not None:
            self._seg.close()
            self._seg = None

    def _device_windows(self, buffer: _Buffer, end_ns: int, metrics):
        """The per-device keys the history keeps: each device over the window [the tag's
        start, end_ns], from Segment.gpu_window (NaN where the GPU or daemon has none).

        While the daemon has not published since the last collect() of this tag, nothing in
        the window changed but its end: the last values are held to the new end (as
        gpu_window holds them), so the means are extended instead of recomputed."""
        seg = self._segment()
        gen = None
        if seg is not None:
            try:
                gen = seg.generation()
            except (ValueError, IndexError):
                gen = None
        cached = buffer.windows
        if gen is not None and cached is not None and cached[0] == gen \
                and cached[1] == self._slots_version and end_ns > cached[2]:
            _, _, old_end, dev, means = cached
            span = end_ns - buffer.start_ns
            if span > 0:
                kept = (old_end - buffer.start_ns) / span
                for mean_key, last_key in means:
                    dev[mean_key] = dev[mean_key] * kept + dev[last_key] * (1.0 - kept)
            buffer.windows = (gen, self._slots_version, end_ns, dev, means)
            metrics.update(dev)
            return
        dev = {}
        self._compute_windows(buffer, seg, end_ns, dev)
        means = [(k, k[:-4] + "last") for k in dev if k.endswith("/mean")]
        buffer.windows = None if gen is None else (gen, self._slots_version, end_ns, dev, means)
        metrics.update(dev)

    def _compute_windows(self, buffer: _Buffer, seg, end_ns: int, metrics):
        prefix = buffer.key_prefix
        slots = self._slots
        for d in self.all_devices:
            base = f"{prefix}/{d.identifier()}"
            if d.mig_uuid is not None:
                # A MIG device's memory from its own track when it has one; else sampled
                # (_mig_metrics).
                seg = self._mig_window(buffer, seg, d, end_ns, base, metrics)
                continue
            stats = None
            slot = slots.get(d.index) if seg is not None else None
            if slot is not None:
                try:
                    stats = seg.gpu_window(slot, buffer.start_ns, end_ns, buffer.opened.get(slot),
                                           buffer.integrals.get(slot),
                                           buffer.memos.setdefault(slot, {}))
                except gpupeek.Error as e:
                    self._drop_segment(e)
                    seg = None
            consts = self._consts.get(d.index, {})
            for name, values in self._window_values(stats, consts):
                for stat, value in values:
                    metrics[f"{base}/{name}/{stat}"] = value

    def _mig_window(self, buffer: _Buffer, seg, d: Device, end_ns: int, base: str, metrics):
        """The memory keys of MIG device `d` over the window from its track (memory used,
        and free and percent from its sampled total); nothing without a track. Returns the
        segment (None once it failed)."""
        if seg is None:
            return None
        try:
            track = seg.find_track(d.mig_uuid)
            stats = None if track is None else seg._track_window(
                track, buffer.start_ns, end_ns, integral=buffer.integrals.get(d.mig_uuid),
                fields=("mem_used_mib",), memo=buffer.memos.setdefault(d.mig_uuid, {}))
        except gpupeek.Error as e:
            self._drop_segment(e)
            return None
        mem = None if stats is None else stats.get("mem_used_mib")
        if mem is None:
            return seg
        consts = self._mig_consts.get(d.mig_uuid, {})
        for name, values in self._window_values({"mem_used_mib": mem}, consts):
            if name.startswith("memory_"):
                for stat, value in values:
                    metrics[f"{base}/{name}/{stat}"] = value
        return seg

    @staticmethod
    def _window_values(stats, consts):
        """(key, ((stat, value), ...)) of the windowed device keys, nvitop's units."""
        def conv(s, scale=1.0, offset=0.0, sign=1.0):
            if s is None:
                return _NAN4
            lo, hi = s.min * sign + offset, s.max * sign + offset
            return (("mean", (s.mean * sign + offset) * scale), ("min", min(lo, hi) * scale),
                    ("max", max(lo, hi) * scale), ("last", (s.last * sign + offset) * scale))
        stats = stats or {}
        mem = stats.get("mem_used_mib")
        total, other = consts.get("total_mib"), consts.get("other_mib")
        yield "memory_used (MiB)", conv(mem)
        # free = total - reserved - used (what NVML's free is), from the record's reserve
        yield "memory_free (MiB)", _NAN4 if total is None or mem is None \
            else conv(mem, offset=total - other, sign=-1.0)
        if total:
            pct = conv(mem, scale=100.0 / total)
            yield "memory_percent (%)", tuple((k, round(v, 1)) for k, v in pct) \
                if mem is not None else _NAN4
        else:
            yield "memory_percent (%)", _NAN4
        yield "gpu_utilization (%)", conv(stats.get("util_gpu_pct"))
        yield "memory_utilization (%)", conv(stats.get("util_mem_pct"))
        yield "temperature (C)", conv(stats.get("temp_gpu_c"))
        yield "power_usage (W)", conv(stats.get("power_draw_mw"), scale=1 / 1000.0)

    # -- samples (what the history does not keep) --

    _slots: Dict[int, int] = {}
    _slots_version = 0
    _consts: Dict[int, dict] = {}
    _mig_consts: Dict[str, dict] = {}

    def _take_sample(self):
        """Samples the host, the devices' unwindowed keys and the processes, and adds them
        to the active tags. Reads only the fields it needs, and the process table only
        when the daemon has sampled it again."""
        t, epoch = timer(), time.time()
        metrics, self._cpu, mem_total = _host_sample(self._cpu)
        gpus = self._read_gpus()
        slots = {g.index: slot for slot, g in gpus.items()}
        if slots != self._slots:
            self._slots, self._slots_version = slots, self._slots_version + 1
        by_index = {g.index: g for g in gpus.values()}
        consts, leaves, migs = {}, {}, None
        leaf_set = {id(d) for d in self.leaf_devices}
        for d in self.all_devices:
            base = d.identifier()
            if d.mig_uuid is not None:
                if migs is None:
                    migs = self._read_mig() if gpus else {}
                self._mig_metrics(base, migs.get(d.mig_uuid), d.index, leaves, metrics)
                continue
            g = by_index.get(d.index)
            ok = g is not None and g.state == "ok"
            total = g.mem_total_bytes if ok else None
            if id(d) in leaf_set:
                leaves[(d.index, None, None)] = (base, total)
            if total is not None:
                other = total - (g.mem_used_bytes or 0) - (g.mem_free_bytes or 0)
                consts[d.index] = {"total_mib": total / MIB, "other_mib": max(other, 0) / MIB,
                                   "total_bytes": total}
            metrics[f"{base}/memory_total (MiB)"] = _num(total, MIB)
            metrics[f"{base}/fan_speed (%)"] = _num(g.fan_speed_pct if ok else None)
            metrics[f"{base}/power_limit (W)"] = _num(g.power_limit_mw if ok else None, 1000.0)
        self._consts = consts
        if migs:
            self._mig_consts = {
                u: {"total_mib": m.mem_total_bytes / MIB, "other_mib": max(
                    m.mem_total_bytes - (m.mem_used_bytes or 0) - (m.mem_free_bytes or 0), 0) / MIB}
                for u, m in migs.items() if m.mem_total_bytes}
        if gpus and self.root_pids:
            procs = self._read_processes()
            if procs is not None:
                self._process_metrics(procs, leaves, mem_total, metrics)
        self._last_sample = t
        if self._buffer is not None:
            self._buffer.add(metrics, t, epoch)

    @staticmethod
    def _mig_metrics(base, m, gpu_index, leaves, metrics):
        """A MIG device's keys, as nvitop has them: its memory (sampled from the MIG
        table), and NaN for what NVML does not report per MIG device."""
        total = None if m is None else m.mem_total_bytes
        used = None if m is None else m.mem_used_bytes
        free = None if m is None else m.mem_free_bytes
        values = {"memory_used (MiB)": _num(used, MIB), "memory_free (MiB)": _num(free, MIB),
                  "memory_total (MiB)": _num(total, MIB),
                  "memory_percent (%)": math.nan if used is None or not total
                  else round(100.0 * used / total, 1)}
        for name in DEVICE_METRICS:
            metrics[f"{base}/{name}"] = values.get(name, math.nan)
        if m is not None:
            leaves[(gpu_index, m.gpu_instance_id, m.compute_instance_id)] = (base, total)

    def _read_mig(self) -> Dict[str, "gpupeek.MigDevice"]:
        try:
            return {m.uuid: m for m in self._seg.mig_devices() if m.uuid}
        except gpupeek.Error as e:
            self._drop_segment(e)
            return {}

    _SAMPLED = ("mem_total_bytes", "mem_used_bytes", "mem_free_bytes", "fan_speed_pct",
                "power_limit_mw")

    def _read_gpus(self) -> Dict[int, "gpupeek.Gpu"]:
        """{slot: Gpu with the sampled fields} of a live daemon; {} (said once) otherwise."""
        seg = self._segment()
        if seg is None:
            return {}
        try:
            status = seg.status()
            gpupeek._check_live(seg.name, status)
            if status.gpu_count > seg.header["gpu_capacity"]:
                raise gpupeek.CorruptError(f"segment {seg.name}: GPU count exceeds capacity")
            return {slot: seg.gpu_values(slot, self._SAMPLED) for slot in range(status.gpu_count)}
        except gpupeek.Error as e:
            self._drop_segment(e)
            return {}

    def _read_processes(self):
        """(pid namespace inode, [Process]) of the table, re-read only when the daemon has
        sampled the processes since the last read."""
        seg = self._seg
        try:
            head = seg.proc_head()
            key = (head["sample_mono_ns"], head["count"], head["pid_ns_inode"])
            if self._procs is None or self._procs[0] != key:
                head, procs = seg.processes()
                key = (head["sample_mono_ns"], head["count"], head["pid_ns_inode"])
                self._procs = (key, head["pid_ns_inode"], procs)
        except gpupeek.Error as e:
            self._drop_segment(e)
            return None
        return self._procs[1], self._procs[2]

    def _reader_pid(self, table_ns: int, p) -> Optional[int]:
        """The pid of process `p` in this reader's pid namespace (None: not visible)."""
        if table_ns in (0, self._own_ns):
            return p.pid
        if p.pid_ns_inode not in (None, 0) and p.pid_ns_inode == self._own_ns:
            return p.ns_pid
        return None

    def _descends(self, pid: int, start) -> bool:
        """Whether `pid` is a root pid or descends from one (cached per process start)."""
        key = (pid, start)
        known = self._ancestry.get(key)
        if known is None:
            known, p, hops = False, pid, 0
            while p and hops < 4096:
                if p in self.root_pids:
                    known = True
                    break
                p, hops = _ppid(p), hops + 1
            if len(self._ancestry) > 4096:
                self._ancestry.clear()
            self._ancestry[key] = known
        return known

    def _process_metrics(self, procs, leaves, mem_total, metrics):
        """The pid keys of root_pids and their descendants on the leaf devices (a GPU, or
        the MIG device a process runs in)."""
        now_ns = time.time_ns()
        table_ns, processes = procs
        for p in processes:
            leaf = leaves.get((p.gpu_index, p.gpu_instance_id, p.compute_instance_id))
            if leaf is None:
                continue
            pid = self._reader_pid(table_ns, p)
            if pid is None or not self._descends(pid, p.start_unix_ns):
                continue
            key, (dev, total) = f"pid:{pid}", leaf
            rss = p.host_rss_bytes
            metrics[f"{key}/host/cpu_percent (%)"] = _num(p.cpu_centipct, 100.0)
            metrics[f"{key}/host/host_memory (MiB)"] = _num(rss, MIB)
            metrics[f"{key}/host/host_memory_percent (%)"] = \
                math.nan if rss is None or not mem_total else 100.0 * rss / mem_total
            metrics[f"{key}/host/running_time (min)"] = math.nan if not p.start_unix_ns \
                else max(0, now_ns - p.start_unix_ns) / 60e9
            used = p.gpu_mem_bytes
            metrics[f"{key}/{dev}/gpu_memory (MiB)"] = _num(used, MIB)
            metrics[f"{key}/{dev}/gpu_memory_percent (%)"] = \
                math.nan if used is None or not total else round(100.0 * used / total, 1)
            metrics[f"{key}/{dev}/gpu_memory_utilization (%)"] = _num(p.mem_util_pct)
            metrics[f"{key}/{dev}/gpu_sm_utilization (%)"] = _num(p.sm_util_pct)

    # -- background --

    def daemonize(self, on_collect: Callable[[Dict[str, float]], bool],
                  interval: Optional[float] = None, *,
                  on_start: Optional[Callable[["ResourceMetricCollector"], None]] = None,
                  on_stop: Optional[Callable[["ResourceMetricCollector"], None]] = None,
                  tag: str = "metrics-daemon", start: bool = True) -> threading.Thread:
        """A daemon thread that, inside `with self(tag)`, calls `on_collect(collect())`
        every `interval` (default self.interval) until on_collect returns False; nvitop's
        ResourceMetricCollector.daemonize."""
        return collect_in_background(on_collect, collector=self, interval=interval,
                                     on_start=on_start, on_stop=on_stop, tag=tag, start=start)

    def __del__(self):
        seg = getattr(self, "_seg", None)
        if seg is not None:
            seg.close()


def _full_names(prefix: str, key: str) -> tuple:
    if key.endswith("host/running_time (min)"):
        return (f"{prefix}/{key}",)
    return tuple(f"{prefix}/{key}/{stat}" for stat in ("mean", "min", "max", "last"))


def _num(value, divisor: float = 1.0) -> float:
    return math.nan if value is None else value / divisor


def collect_in_background(on_collect: Callable[[Dict[str, float]], bool],
                          collector: Optional[ResourceMetricCollector] = None,
                          interval: Optional[float] = None, *,
                          on_start: Optional[Callable[[ResourceMetricCollector], None]] = None,
                          on_stop: Optional[Callable[[ResourceMetricCollector], None]] = None,
                          tag: str = "metrics-daemon", start: bool = True) -> threading.Thread:
    """nvitop's collect_in_background: a daemon thread calling `on_collect` with the
    collector's figures every `interval` while on_collect returns True."""
    if collector is None:
        collector = ResourceMetricCollector()
    if isinstance(interval, (int, float)) and not isinstance(interval, bool) and interval > 0:
        interval = float(interval)
    elif interval is None:
        interval = collector.interval
    else:
        raise ValueError(f"Invalid argument interval={interval!r}")

    def target():
        if on_start is not None:
            on_start(collector)
        try:
            with collector(tag):
                try:
                    next_at = timer() + interval
                    while on_collect(collector.collect()):
                        time.sleep(max(0.0, next_at - timer()))
                        next_at += interval
                except KeyboardInterrupt:
                    pass
        finally:
            if on_stop is not None:
                on_stop(collector)

    daemon = threading.Thread(target=target, name=tag, daemon=True)
    daemon.collector = collector
    if start:
        daemon.start()
    return daemon

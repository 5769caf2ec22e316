#!/usr/bin/env python3
"""gpupeek.ResourceMetricCollector against nvitop 1.7.2's, on the fake NVML.

    benches/collector.py --daemon PATH --fake-nvml PATH [--gpus 8] [--seconds 20] [--every 10]

Run by nvitop's python (a virtual environment with nvitop==1.7.2; `benches/run collector`
does this). Starts gpupeekd on a private segment over the fake NVML (8 H100s, a process of
the benchmark's on each, NVML_LATENCY_US per call, default 50), then measures:

1. collect() cost: the wall time of one collect() of each collector, a tag active, every
   GPU collected, called back to back for 2 s (nvitop takes a snapshot through NVML at
   most every interval / 2 = 0.5 s; gpupeek samples the host and process table as often
   and reads the GPU windows from the segment on every call).
2. A training-like process: three children run at once for --seconds, each a loop of
   pure-Python steps (about 1 ms of CPU each) that calls collect() every --every steps: one
   without a collector (the baseline), one with gpupeek's, one with nvitop's (whose
   sampling thread runs beside the loop, as in ordinary use). Each reports its CPU time
   (user + system, every thread) and how many steps it did; the collector's cost is its
   CPU per step over the baseline's.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "contrib", "python"))


def scenario(gpus: int, pids, latency_us: int) -> dict:
    return {"driver_version": "550.54.15", "latency_us": latency_us, "gpus": [
        {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-%08x-2222-3333-4444-555555555555" % i,
         "pci_bus_id": "00000000:%02X:00.0" % (0x18 + i),
         "memory_total_bytes": 85520809984, "memory_used_bytes": 10 << 30,
         "utilization_gpu_pct": 45, "utilization_memory_pct": 3, "temperature_c": 41,
         "fan_speed_pct": 30, "power_usage_mw": 123456, "power_limit_mw": 700000,
         "processes": [{"pid": p, "used_gpu_memory_bytes": 1 << 30} for p in pids]}
        for i in range(gpus)]}


def make(kind: str):
    if kind == "gpupeek":
        import gpupeek
        return gpupeek.ResourceMetricCollector()
    if kind == "nvitop":
        import nvitop
        return nvitop.ResourceMetricCollector()
    return None


def step_work():
    """About 1 ms of pure-Python work, a stand-in for a training step's host side."""
    return sum(i * i for i in range(20000))


def child_cost(kind: str) -> dict:
    c = make(kind)
    with c(tag="bench"):
        c.collect()
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 2.0:
            keys = c.collect()
            n += 1
        took = time.perf_counter() - t0
    return {"kind": kind, "collect_us": took / n * 1e6, "calls": n, "keys": len(keys)}


def child_train(kind: str, seconds: float, every: int) -> dict:
    c = make(kind)
    steps = 0
    ctx = c(tag="train") if c is not None else None
    if ctx is not None:
        ctx.__enter__()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    main0 = time.thread_time()
    in_collect = 0.0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step_work()
        steps += 1
        if c is not None and steps % every == 0:
            before = time.thread_time()
            c.collect()
            in_collect += time.thread_time() - before
    main = time.thread_time() - main0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    if ctx is not None:
        ctx.__exit__(None, None, None)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"kind": kind, "cpu_s": cpu, "steps": steps, "wall_s": time.perf_counter() - t0,
            "collect_cpu_s": in_collect, "other_threads_cpu_s": max(0.0, cpu - main),
            "collects": steps // every if c is not None else 0}


def run_children(args, mode: str, kinds, env) -> list:
    procs = [subprocess.Popen([sys.executable, __file__, "--child", mode, kind,
                               str(args.seconds), str(args.every)],
                              env=env, stdout=subprocess.PIPE, text=True) for kind in kinds]
    out = []
    for p in procs:
        text, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            sys.exit(f"benches/collector.py: the {mode} child failed")
        out.append(json.loads(text))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon")
    ap.add_argument("--fake-nvml")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--child", nargs=4)
    args = ap.parse_args()
    if args.child:
        mode, kind, seconds, every = args.child
        result = child_cost(kind) if mode == "cost" else \
            child_train(kind, float(seconds), int(every))
        print(json.dumps(result))
        return
    work = tempfile.mkdtemp(prefix="gpupeek-bench-collector.")
    lib = os.path.join(work, "lib")
    os.mkdir(lib)
    os.symlink(os.path.abspath(args.fake_nvml), os.path.join(lib, "libnvidia-ml.so.1"))
    path = os.path.join(work, "scenario.json")
    with open(path, "w") as f:
        json.dump(scenario(args.gpus, [os.getpid()],
                           int(os.environ.get("NVML_LATENCY_US", "50"))), f)
    shm = f"gpupeek-bench-collector-{os.getpid()}"
    env = dict(os.environ, FAKE_NVML_SCENARIO=path, GPUPEEK_SHM=shm, LD_LIBRARY_PATH=lib)
    daemon = subprocess.Popen([args.daemon, "--foreground", "--no-runtime-pm", "--shm", shm,
                               "--interval", "1s", "--nvml-lib", args.fake_nvml],
                              env=env, stderr=subprocess.DEVNULL)
    try:
        import gpupeek
        deadline = time.monotonic() + 30
        while True:
            try:
                if len(gpupeek.snapshot(shm).gpus) == args.gpus:
                    break
            except gpupeek.Error:
                pass
            if time.monotonic() > deadline:
                sys.exit("benches/collector.py: the daemon did not become live")
            time.sleep(0.1)
        time.sleep(2.5)  # a few history samples
        report = {"gpus": args.gpus, "latency_us": int(os.environ.get("NVML_LATENCY_US", "50"))}
        report["cost"] = [run_children(args, "cost", [k], env)[0] for k in ("gpupeek", "nvitop")]
        report["train"] = run_children(args, "train", ["none", "gpupeek", "nvitop"], env)
        base = next(r for r in report["train"] if r["kind"] == "none")
        for r in report["train"]:
            r["cpu_ms_per_step"] = 1000 * r["cpu_s"] / max(r["steps"], 1)
            r["overhead_pct"] = 100 * (r["cpu_ms_per_step"] / base["cpu_ms_per_step"] - 1) \
                if base["steps"] else None
        print(json.dumps(report, indent=1))
        print(f"collect(): gpupeek {report['cost'][0]['collect_us']:.0f} us, "
              f"nvitop {report['cost'][1]['collect_us']:.0f} us "
              f"({report['cost'][0]['keys']} and {report['cost'][1]['keys']} keys)",
              file=sys.stderr)
        for r in report["train"]:
            cost = r["collect_cpu_s"] + r["other_threads_cpu_s"]
            print(f"train every {args.every}: {r['kind']:8} {r['cpu_s']:6.2f} s CPU, "
                  f"{r['steps']:6d} steps, {r['cpu_ms_per_step']:.3f} ms/step "
                  f"({r['overhead_pct']:+.1f}% over none); in collect() "
                  f"{r['collect_cpu_s'] * 1000:.0f} ms over {r['collects']} calls, other threads "
                  f"{r['other_threads_cpu_s'] * 1000:.0f} ms: the collector's "
                  f"{100 * cost / max(r['cpu_s'], 1e-9):.1f}% of the process", file=sys.stderr)
    finally:
        daemon.terminate()
        daemon.wait()
        # The daemon leaves its segment and lock file for a successor; nobody follows.
        runtime = os.environ.get("XDG_RUNTIME_DIR", "/tmp")
        for leftover in (f"/dev/shm/{shm}", f"/run/gpupeekd-{shm}.lock",
                         f"{runtime}/gpupeekd-{shm}.lock"):
            try:
                os.unlink(leftover)
            except OSError:
                pass


if __name__ == "__main__":
    main()

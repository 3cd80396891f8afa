"""Summaries of one host and of many, against xprof on the same files (issue 18).

The input is the real TF 2.21 profile of bench/gen_xspace.py (2,000 ops x 1,500 steps,
about 48 MB and 3M events). Every run is a fresh process; medians of --repeat runs.

* one host, side by side in one run: ``tracebridge summary FILE --json`` (the op-rows-only
  read) against xprof's ``framework_op_stats`` tool on a copy of the file (it writes cache
  files beside its input). Target (T8): <= 0.15x xprof's time and <= 0.25x its peak RSS.
* ``--hosts N`` (16 in the issue): a logdir of N hosts, each a hard link to that profile
  (about 780 MB for 16), summarized host by host with ``--workers 1`` (in this process) and
  ``--workers 2`` (a local Dask cluster). The driver reports its own peak RSS and its
  children's (the Dask workers'). Target (T9): client and every worker <= 1.5 GB.
  ``--xprof-logdir``: also xprof's framework_op_stats on all N hosts at once (skipped
  by default: it takes minutes; it is stopped above 8 GB RSS, and the row says so).

    python bench/bench_hosts.py [--repeat 3] [--hosts 16] [--xprof-logdir] [--json PATH]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from measure import machine, python, run_once, tracebridge_command, xspace_profile  # noqa: E402
from targets import result_row, verdict, write_rows  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
XPROF = """
import sys
from xprof.convert import raw_to_tool_data
data, _ = raw_to_tool_data.xspace_to_tool_data(sys.argv[1:], "framework_op_stats", {})
print(len(data) if data else 0)
"""
# Runs the per-host summary and prints this process's and its children's peak RSS.
DRIVER = """
import json, resource, sys
from tracebridge.analysis.hosts.summary import host_parts, merge_parts
from tracebridge.formats import load_host_ops
from tracebridge.readers.host_files import host_files
workers = int(sys.argv[2])
parts = host_parts(host_files(sys.argv[1]), load=load_host_ops, workers=workers)
summary = merge_parts(parts, top=20)
print(json.dumps({"hosts": len(parts), "op_count": summary.op_count,
                  "client_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "workers_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""
ONE_HOST = {"time": 0.15, "memory": 0.25}
MANY_HOSTS_MIB = 1536
XPROF_CAP_MIB = 8192  # xprof on all hosts at once is stopped above this (a shared machine)
TARGET_INPUT = (2000, 1500)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--hosts", type=int, default=0, help="also a logdir of this many hosts (issue: 16)")
    parser.add_argument("--xprof-logdir", action="store_true", help="also xprof on the whole logdir")
    parser.add_argument("--json", help="also write the result rows here (bench/targets.py)")
    args = parser.parse_args(argv)
    out_dir = os.path.join(HERE, "out")
    source = xspace_profile(out_dir, args.ops, args.steps)
    print(f"machine: {machine()}")
    judged = (args.ops, args.steps) == TARGET_INPUT
    rows = [_one_host(source, args.repeat, judged)]
    if args.hosts:
        rows.append(_many_hosts(source, args.hosts, out_dir, args.xprof_logdir, judged))
    if args.json:
        write_rows(args.json, rows)


def _one_host(source: str, repeat: int, judged: bool) -> dict:
    size_mb = os.path.getsize(source) / 1e6
    work = tempfile.mkdtemp(prefix="bench-hosts-")
    try:
        ours = []
        xprof = []
        for i in range(repeat):  # alternated, so that both see the same machine load
            ours.append(run_once(tracebridge_command("summary", source, "--json")))
            copy = os.path.join(work, f"run{i}", "host.xplane.pb")
            os.makedirs(os.path.dirname(copy))
            shutil.copy(source, copy)
            xprof.append(run_once(python("-c", XPROF, copy)))
        for run in ours + xprof:
            if run.returncode:
                raise SystemExit(run.output[-2000:])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ours_s, ours_mb = _median([r.seconds for r in ours]), _median([r.peak_rss_mb for r in ours])
    xprof_s, xprof_mb = _median([r.seconds for r in xprof]), _median([r.peak_rss_mb for r in xprof])
    time_ratio, memory_ratio = ours_s / xprof_s, ours_mb / xprof_mb
    print(f"one host: {source} ({size_mb:.1f} MB); medians of {repeat} fresh processes, alternated")
    print(f"{'':34}{'wall s':>9}{'peak RSS MB':>13}")
    print(f"{'tracebridge summary --json':34}{ours_s:9.2f}{ours_mb:13.0f}")
    print(f"{'xprof framework_op_stats':34}{xprof_s:9.2f}{xprof_mb:13.0f}")
    print(f"ratio (tracebridge/xprof): time {time_ratio:.2f}x, memory {memory_ratio:.2f}x")
    met = time_ratio <= ONE_HOST["time"] and memory_ratio <= ONE_HOST["memory"] if judged else None
    print(f"target <= {ONE_HOST['time']}x time and <= {ONE_HOST['memory']}x memory: {verdict(met).upper()}")
    return result_row(
        benchmark="XSpace summary, one host", issue=18, input=f"real TF 2.21 XSpace ({size_mb:.1f} MB)",
        unit="s", tracebridge=ours_s, tracebridge_peak_mib=ours_mb, anchor_name="xprof framework_op_stats",
        anchor=xprof_s, anchor_peak_mib=xprof_mb, target="T8" if judged else None, met=met,
        figure=f"{time_ratio:.2f}× time, {memory_ratio:.2f}× memory",
        notes="`tracebridge summary IN --json` vs `xspace_to_tool_data([copy], \"framework_op_stats\", {})`, "
              "whole processes, alternated",
        details={"repeat": repeat, "tracebridge_runs_s": [r.seconds for r in ours],
                 "xprof_runs_s": [r.seconds for r in xprof]})


def _many_hosts(source: str, hosts: int, out_dir: str, xprof_too: bool, judged: bool) -> dict:
    run = os.path.join(out_dir, f"hosts_{hosts}", "plugins", "profile", "2026_01_01_00_00_00")
    os.makedirs(run, exist_ok=True)
    for i in range(hosts):
        target = os.path.join(run, f"host{i:03d}.xplane.pb")
        if not os.path.exists(target):
            try:
                os.link(source, target)
            except OSError:
                shutil.copy(source, target)
    logdir = os.path.dirname(os.path.dirname(os.path.dirname(run)))
    total_mb = sum(os.path.getsize(p) for p in glob.glob(os.path.join(run, "*.xplane.pb"))) / 1e6
    print(f"{hosts} hosts: {logdir} ({total_mb:.0f} MB)")
    measured = {}
    for workers in (1, 2):
        result = run_once(python("-c", DRIVER, logdir, str(workers)))
        if result.returncode:
            raise SystemExit(result.output[-3000:])
        figures = json.loads(result.output.strip().splitlines()[-1])
        measured[workers] = {"seconds": result.seconds, **figures}
        print(f"  --workers {workers}: {result.seconds:7.1f} s, client peak {figures['client_mib']:.0f} MB, "
              f"largest child {figures['workers_mib']:.0f} MB ({figures['op_count']:,} ops counted)")
    xprof = None
    if xprof_too:
        files = sorted(glob.glob(os.path.join(run, "*.xplane.pb")))
        copies = tempfile.mkdtemp(prefix="bench-hosts-xprof-")
        try:
            paths = []
            for path in files:
                copy = os.path.join(copies, os.path.basename(path))
                os.link(path, copy)
                paths.append(copy)
            xprof = _capped(python("-c", XPROF, *paths), XPROF_CAP_MIB, timeout=1800)
        finally:
            shutil.rmtree(copies, ignore_errors=True)
        print("  xprof framework_op_stats, all hosts: "
              + (f"{xprof.seconds:7.1f} s, peak {xprof.peak_rss_mb:.0f} MB" if not xprof.returncode
                 else f"failed ({xprof.output.strip().splitlines()[-1][:200] if xprof.output.strip() else xprof.returncode})"))
    one, two = measured[1], measured[2]
    worst = max(one["client_mib"], two["client_mib"], two["workers_mib"])
    met = worst <= MANY_HOSTS_MIB if judged and hosts == 16 else None
    print(f"  target: client and each worker <= {MANY_HOSTS_MIB} MB: {verdict(met).upper()}")
    return result_row(
        benchmark=f"XSpace summary, {hosts} hosts", issue=18,
        input=f"{hosts} × the real TF 2.21 XSpace ({total_mb:.0f} MB)", unit="s", tracebridge=one["seconds"],
        tracebridge_peak_mib=one["client_mib"],
        anchor_name="xprof framework_op_stats (all hosts)" if xprof is not None and not xprof.returncode else None,
        anchor=xprof.seconds if xprof is not None and not xprof.returncode else None,
        anchor_peak_mib=xprof.peak_rss_mb if xprof is not None and not xprof.returncode else None,
        target="T9" if met is not None else None, met=met,
        figure=f"peak {worst:.0f} MB (client or worker)",
        notes=f"in process {one['seconds']:.1f} s, 2 Dask workers {two['seconds']:.1f} s "
              f"(client {two['client_mib']:.0f} MB, largest worker {two['workers_mib']:.0f} MB)",
        details={"workers": measured})


def _capped(command: list[str], cap_mib: int, timeout: float):
    """``run_once``, but the command is killed once its RSS passes ``cap_mib`` (the machine
    is shared: xprof on every host at once may not fit); the output then says so."""
    import threading
    import time
    stop = threading.Event()
    found = {}

    def watch():
        while not stop.is_set():
            for pid in _descendants_of_python(command):
                try:
                    with open(f"/proc/{pid}/status") as status:
                        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) // 1024
                except (OSError, StopIteration, ValueError):
                    continue
                if rss > cap_mib:
                    found["killed_at_mib"] = rss
                    os.kill(pid, 9)
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = run_once(command, timeout=timeout)
    finally:
        stop.set()
        watcher.join()
    if "killed_at_mib" in found:
        result.output += f"\n(killed by the bench at {found['killed_at_mib']} MB RSS, over its {cap_mib} MB cap)"
        result.returncode = result.returncode or -9
    return result


def _descendants_of_python(command: list[str]) -> list[int]:
    """Processes running ``command`` (matched by their command line), children of this one."""
    mine = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = stat.read().rsplit(")", 1)[1].split()[1]
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                args = cmdline.read().split(b"\0")
        except OSError:
            continue
        if parent == mine and args[:2] == [a.encode() for a in command[:2]]:
            found.append(int(entry))
    return found


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


if __name__ == "__main__":
    main()

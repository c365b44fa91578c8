#!/usr/bin/env python3
"""Where a CUDA-graph replay's time goes, from kernel_trace.cpp's CSV.

Replays are the runs of one graph's kernels (a node id seen again starts the next replay).
For the graph replayed most often it prints the median replay time (first start to last end)
and, per kernel name, launches per replay, the median duration and the median of the summed
critical-path increments: a kernel's end minus the latest end before it (in start order), so
overlapped (PDL) kernels count only what they add. The increments of a replay sum to its
time less the first kernel's start-to-end lead.

  python3 tools/cuda/kernel_trace_report.py trace.csv [--graph ID] [--top N]
"""
import argparse
import collections
import csv
import statistics
import subprocess
import sys


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    short = {}
    for mangled, pretty in zip(names, out.stdout.splitlines()):
        pretty = pretty.replace("(anonymous namespace)::", "")
        base = pretty.split("(")[0] if "(" in pretty else pretty
        # Drop namespaces outside the template arguments, keep the arguments (they tell
        # instances apart), cap the length.
        head, sep, rest = base.partition("<")
        head = head.split("::")[-1]
        short[mangled] = (head + sep + rest)[:90]
    return short


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--graph", type=int, default=None)
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    rows = []
    with open(args.csv) as f:
        for r in csv.DictReader(f):
            try:
                rows.append((int(r["start_ns"]), int(r["end_ns"]), int(r["graph_id"]),
                             int(r["graph_node_id"]), r["name"]))
            except (ValueError, KeyError):
                continue  # a line cut by the program's exit
    graphs = collections.defaultdict(list)
    for row in rows:
        if row[2] != 0:
            graphs[row[2]].append(row)
    if not graphs:
        sys.exit("no graph kernels in the trace")
    gid = args.graph if args.graph is not None else max(graphs, key=lambda g: len(graphs[g]))
    recs = sorted(graphs[gid])
    replays, cur, seen = [], [], set()
    for row in recs:
        if row[3] in seen:
            replays.append(cur)
            cur, seen = [], set()
        cur.append(row)
        seen.add(row[3])
    if cur:
        replays.append(cur)
    size = collections.Counter(len(r) for r in replays).most_common(1)[0][0]
    replays = [r for r in replays if len(r) == size]
    names = demangle(sorted({row[4] for r in replays for row in r}))
    per_name_incr = collections.defaultdict(list)
    per_name_dur = collections.defaultdict(list)
    per_name_count = collections.Counter()
    totals = []
    for r in replays:
        incr = collections.defaultdict(float)
        latest = r[0][0]
        for start, end, _, _, name in r:
            incr[names[name]] += max(0, end - latest) / 1000.0
            latest = max(latest, end)
            per_name_dur[names[name]].append((end - start) / 1000.0)
        for n, v in incr.items():
            per_name_incr[n].append(v)
        totals.append((max(e for _, e, *_ in r) - r[0][0]) / 1000.0)
    for n in per_name_dur:
        per_name_count[n] = len(per_name_dur[n]) // len(replays)
    print(f"graph {gid}: {len(replays)} replays of {size} kernels; replay median "
          f"{statistics.median(totals):.1f} us (min {min(totals):.1f}, max {max(totals):.1f}); "
          f"graphs in the trace: " +
          ", ".join(f"{g}:{len(v)}" for g, v in sorted(graphs.items())))
    print(f"{'incr us/replay':>14} {'share':>6} {'per replay':>10} {'median dur':>10}  kernel")
    med_total = statistics.median(totals)
    order = sorted(per_name_incr, key=lambda n: -statistics.median(per_name_incr[n]))
    for n in order[:args.top]:
        inc = statistics.median(per_name_incr[n])
        print(f"{inc:14.1f} {100 * inc / med_total:5.1f}% {per_name_count[n]:10d} "
              f"{statistics.median(per_name_dur[n]):10.2f}  {n}")
    # One replay (the median one) in order: the first 60 kernels with start, duration, gap.
    mid = sorted(range(len(replays)), key=lambda i: totals[i])[len(replays) // 2]
    r = replays[mid]
    print(f"\nreplay {mid} in order (us from its first start): start, dur, end - previous end")
    t0, prev_end = r[0][0], r[0][0]
    for start, end, _, _, name in r[:60]:
        print(f"{(start - t0) / 1000:9.2f} {(end - start) / 1000:8.2f} {(end - prev_end) / 1000:8.2f}"
              f"  {names[name]}")
        prev_end = max(prev_end, end)


if __name__ == "__main__":
    main()

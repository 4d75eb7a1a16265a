"""Drives `nabla gradbench` over GradBench's default workloads and prints BENCHMARKS.md's table.

For every eval: the smallest, the middle and the largest default workload (as GradBench's nightly
summary reports them; sizes and distributions from EVALS.md, drawn with Python's `random`, so the
values differ from GradBench's NumPy draws while the timings do not depend on them), the primal
and then the derivative on the same input. Each `evaluate` asks for at least three runs and half
a second's worth; times are the median and the best `evaluate` timing per run (JSON and the
input's conversion excluded). GradBench's own score takes the mean, which on a shared machine
follows the load more than the code: a run longer than a scheduler slice is preempted by other
work, so the best run is the estimate of the code's own speed (stderr shows all three). An answer
that does not come within the time limit (default 120 s) is recorded as such, and the tool is
restarted (and the module defined again) for the next message.

    cargo build --release -p runtime --bin nabla
    python3 benches/gradbench/run.py [--limit SECONDS] [--only EVAL,EVAL] [--nabla PATH]
"""
import argparse
import json
import queue
import random
import statistics
import subprocess
import sys
import threading
import time


def workloads(only):
    """(eval, description, input, [functions]) in the report's order."""
    random.seed(31337)
    r, g = random.random, lambda: random.gauss(0.0, 1.0)
    out = []

    def add(ev, desc, inp, fns):
        if only is None or ev in only:
            out.append((ev, desc, inp, fns))

    for n in [16, 512, 16392]:
        add("llsq", f"n={n},m=128", {"x": [r() for _ in range(128)], "n": n}, ["primal", "gradient"])
    for n in [2500, 80000, 1280000]:
        add("lse", f"n={n}", {"x": [r() for _ in range(n)]}, ["primal", "gradient"])
    for n, s in [(1000, 1), (10000, 10), (100000, 100)]:
        add("ode", f"n={n},s={s}", {"x": [r() for _ in range(n)], "s": s}, ["primal", "gradient"])
    for ell in [5, 8, 11]:
        add("det", f"{ell}", {"A": [r() for _ in range(ell * ell)], "ell": ell}, ["primal", "gradient"])
    for d, k in [(2, 5), (64, 5), (64, 100)]:
        n = 1000
        if only is None or "gmm" in only:
            add("gmm", f"{d}_{k}_{n}", {
                "d": d, "k": k, "n": n, "m": 0, "gamma": 1.0,
                "x": [[g() for _ in range(d)] for _ in range(n)],
                "alpha": [g() for _ in range(k)],
                "mu": [[r() for _ in range(d)] for _ in range(k)],
                "q": [[g() for _ in range(d)] for _ in range(k)],
                "l": [[g() for _ in range(d * (d - 1) // 2)] for _ in range(k)],
            }, ["objective", "jacobian"])
    for k, n, d in [(10, 1000, 8), (100, 10000, 8), (1000, 10000, 16)]:
        if only is None or "kmeans" in only:
            pts = [[r() for _ in range(d)] for _ in range(n)]
            add("kmeans", f"k={k},n={n},d={d}", {"points": pts, "centroids": pts[-k:]}, ["cost", "dir"])
    add("particle", "w=0", {"w": 0.0}, ["rr"])
    add("saddle", "w=0", {"start": [1.0, 1.0]}, ["rr"])
    return out


class Tool:
    def __init__(self, path):
        self.path = path
        self.notes = []
        self.start()

    def start(self):
        self.p = subprocess.Popen([self.path, "gradbench"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, bufsize=1)
        self.lines = queue.Queue()
        threading.Thread(target=self.read, args=(self.p.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self.read, args=(self.p.stderr, None), daemon=True).start()
        self.id = 0

    def read(self, stream, q):
        for line in stream:
            if q is None:
                self.notes.append(line.strip())
            else:
                q.put(line)

    def send(self, msg, limit):
        """The answer, or None when it did not come within `limit` seconds (the tool is then restarted)."""
        msg = dict(msg, id=self.id)
        self.id += 1
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()
        try:
            return json.loads(self.lines.get(timeout=limit))
        except queue.Empty:
            self.p.kill()
            self.p.wait()
            self.start()
            return None

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def human(ns):
    if ns >= 1e9:
        return f"{ns / 1e9:.3g} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3g} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.3g} µs"
    return f"{ns:.3g} ns"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=float, default=120.0)
    ap.add_argument("--only")
    ap.add_argument("--nabla", default="target/release/nabla")
    ap.add_argument("--min-seconds", type=float, default=0.5)
    a = ap.parse_args()
    only = set(a.only.split(",")) if a.only else None
    tool = Tool(a.nabla)
    defined = None
    print("| eval | workload | Nabla primal: median (best) | Nabla derivative: median (best) | ratio: medians (best) |")
    print("|---|---|---|---|---|")
    for ev, desc, inp, fns in workloads(only):
        cells = []
        for fn in fns:
            if defined != ev:
                ans = tool.send({"kind": "define", "module": ev}, a.limit)
                if not ans or not ans.get("success"):
                    cells.append(f"define failed: {ans and ans.get('error')}")
                    continue
                defined = ev
            t0 = time.time()
            ans = tool.send({"kind": "evaluate", "module": ev, "function": fn,
                             "input": dict(inp, min_runs=3, min_seconds=a.min_seconds)}, a.limit)
            if ans is None:
                cells.append(f"over {a.limit:.0f} s")
                defined = None
            elif not ans.get("success"):
                cells.append("error: " + str(ans.get("error"))[:80])
            else:
                t = [x["nanoseconds"] for x in ans["timings"] if x["name"] == "evaluate"]
                cells.append((float(statistics.median(t)), float(min(t))))
                print(f"  {ev} {fn} {desc}: median {human(cells[-1][0])}, best {human(cells[-1][1])}, "
                      f"mean {human(sum(t) / len(t))}, {len(t)} runs ({time.time() - t0:.1f} s wall)",
                      file=sys.stderr, flush=True)
                continue
            print(f"  {ev} {fn} {desc}: {cells[-1]} ({time.time() - t0:.1f} s wall)", file=sys.stderr, flush=True)
        if len(fns) == 1:
            cells.insert(0, None)
        p, d = cells
        timed = lambda c: isinstance(c, tuple)
        ratio = f"{d[0] / p[0]:.2f} ({d[1] / p[1]:.2f})" if timed(p) and timed(d) else "—"
        show = lambda c: "—" if c is None else f"{human(c[0])} ({human(c[1])})" if timed(c) else c
        print(f"| {ev} | {desc} | {show(p)} | {show(d)} | {ratio} |", flush=True)
    for n in sorted(set(tool.notes)):
        print(f"note: {n}", file=sys.stderr)
    tool.close()


if __name__ == "__main__":
    main()

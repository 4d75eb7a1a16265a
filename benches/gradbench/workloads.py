"""Messages for `nabla gradbench` at GradBench's default sizes (BENCHMARKS.md, "GradBench").

Python standard library only: the inputs have GradBench's sizes and distributions but not its
exact values (GradBench draws them with NumPy), which timings do not depend on.

    python3 benches/gradbench/workloads.py primal > primal.jsonl
    target/release/nabla gradbench < primal.jsonl > primal.out
    python3 benches/gradbench/workloads.py report primal.jsonl primal.out

`small` gives the derivative workloads small enough for the reference interpreter.
"""
import json
import random
import sys


def messages(which):
    random.seed(31337)
    r, g = random.random, lambda: random.gauss(0.0, 1.0)
    out = []

    def add(m):
        m["id"] = len(out)
        out.append(m)

    def ev(mod, fn, inp, desc, runs=1, secs=0.3):
        inp = dict(inp, min_runs=runs, min_seconds=secs)
        add({"kind": "evaluate", "module": mod, "function": fn, "input": inp, "description": desc})

    if which == "primal":
        add({"kind": "define", "module": "llsq"})
        for n in [16, 512, 16392]:
            ev("llsq", "primal", {"x": [r() for _ in range(128)], "n": n}, f"n={n},m=128")
        add({"kind": "define", "module": "lse"})
        for n in [2500, 80000, 1280000]:
            ev("lse", "primal", {"x": [r() for _ in range(n)]}, f"n={n}")
        add({"kind": "define", "module": "ode"})
        for n, s in [(1000, 1), (10000, 10), (100000, 100)]:
            ev("ode", "primal", {"x": [r() for _ in range(n)], "s": s}, f"n={n},s={s}")
        add({"kind": "define", "module": "det"})
        for ell in [5, 8, 11]:
            ev("det", "primal", {"A": [r() for _ in range(ell * ell)], "ell": ell}, f"{ell}")
        add({"kind": "define", "module": "gmm"})
        for d, k in [(2, 5), (64, 5), (64, 100)]:
            n = 1000
            ev("gmm", "objective", {
                "d": d, "k": k, "n": n, "m": 0, "gamma": 1.0,
                "x": [[g() for _ in range(d)] for _ in range(n)],
                "alpha": [g() for _ in range(k)],
                "mu": [[r() for _ in range(d)] for _ in range(k)],
                "q": [[g() for _ in range(d)] for _ in range(k)],
                "l": [[g() for _ in range(d * (d - 1) // 2)] for _ in range(k)],
            }, f"{d}_{k}_{n}")
        add({"kind": "define", "module": "kmeans"})
        for k, n, d in [(10, 1000, 8), (100, 10000, 8), (1000, 10000, 16)]:
            pts = [[r() for _ in range(d)] for _ in range(n)]
            ev("kmeans", "cost", {"points": pts, "centroids": pts[-k:]}, f"k={k},n={n},d={d}")
    else:
        add({"kind": "define", "module": "llsq"})
        for n, m in [(16, 8), (16, 16)]:
            x = [r() for _ in range(m)]
            ev("llsq", "primal", {"x": x, "n": n}, f"n={n},m={m}", 1, 0)
            ev("llsq", "gradient", {"x": x, "n": n}, f"n={n},m={m}", 1, 0)
        add({"kind": "define", "module": "lse"})
        for n in [50, 100]:
            x = [r() for _ in range(n)]
            ev("lse", "primal", {"x": x}, f"n={n}", 1, 0)
            ev("lse", "gradient", {"x": x}, f"n={n}", 1, 0)
        add({"kind": "define", "module": "ode"})
        x = [r() for _ in range(10)]
        ev("ode", "primal", {"x": x, "s": 1}, "n=10,s=1", 1, 0)
        ev("ode", "gradient", {"x": x, "s": 1}, "n=10,s=1", 1, 0)
        add({"kind": "define", "module": "det"})
        for ell in [3, 4]:
            a = [r() for _ in range(ell * ell)]
            ev("det", "primal", {"A": a, "ell": ell}, f"{ell}", 1, 0)
            ev("det", "gradient", {"A": a, "ell": ell}, f"{ell}", 1, 0)
    return out


def report(msgs_path, out_path):
    for line_m, line_r in zip(open(msgs_path), open(out_path)):
        m, r = json.loads(line_m), json.loads(line_r)
        if m["kind"] != "evaluate":
            continue
        t = [x["nanoseconds"] for x in r.get("timings", [])]
        mean = sum(t) / len(t) / 1e3 if t else float("nan")
        print(f'{m["module"]} {m["function"]} {m["description"]}: {r["success"]}, {len(t)} runs, mean {mean:.4g} us')


if __name__ == "__main__":
    if sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3])
    else:
        for m in messages(sys.argv[1]):
            print(json.dumps(m))

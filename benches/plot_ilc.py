"""Log-log plot of time per change against N for the compiled ILC histogram (benches/ilc.csv,
written by `cargo run -p benches --release --bin ilc_report`): compiled update, compiled
recomputation, hand-written Rust. Writes ilc_histogram.png beside BENCHMARKS.md."""
import csv
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

here = os.path.dirname(os.path.abspath(__file__))
rows = list(csv.DictReader(open(os.path.join(here, "ilc.csv"))))
n = [int(r["n"]) for r in rows]
fig, ax = plt.subplots(figsize=(6, 4))
for key, label, marker in [
    ("recompute_ns", "compiled recomputation", "s"),
    ("update_ns", "compiled incremental update", "o"),
    ("rust_ns", "hand-written Rust FxHashMap update", "^"),
]:
    ax.loglog(n, [float(r[key]) for r in rows], marker=marker, label=label)
ax.set_xlabel("documents N (1 000 words each, vocabulary 1 000)")
ax.set_ylabel("time per one-word change (ns)")
ax.set_title("Word-count histogram: time per change")
ax.grid(True, which="both", alpha=0.3)
ax.legend()
fig.tight_layout()
fig.savefig(os.path.join(here, "..", "ilc_histogram.png"), dpi=120)

//! Prints BENCHMARKS.md's compiled reverse-mode tables from criterion's last run of
//! `cargo bench -p benches --bench reverse` (`target/criterion`): every ratio is of two medians
//! measured in that run.

use std::path::{Path, PathBuf};

use benches::reverse::{workloads, Scale};

fn median_ns(dir: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join("new/estimates.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}

fn human(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// JAX 0.10.2 `jit(grad)` on the project's machine, median per call (issue 9), in ns.
fn jax(name: &str) -> Option<f64> {
    match name {
        "paper_f" => Some(5_800.0),
        "rosenbrock_1000" => Some(18_100.0),
        "logreg" => Some(130_600.0),
        "mlp" => Some(362_000.0),
        _ => None,
    }
}

/// The objective's name without the size (`rosenbrock_1000`).
fn label(name: &str) -> &str {
    if name.starts_with("rosenbrock") {
        "rosenbrock"
    } else {
        name
    }
}

fn main() {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let root = target.join("criterion");
    println!("| objective | size | compiled gradient | compiled primal | Rust adjoint | gradient / primal | gradient / Rust | JAX `jit(grad)` | gradient / JAX | compile latency |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for w in workloads(Scale::Full) {
        let g = root.join(format!("reverse_{}", w.name));
        let (gr, pr, ru) =
            (median_ns(&g.join("gradient")), median_ns(&g.join("primal")), median_ns(&g.join("rust_adjoint")));
        let compile = median_ns(&g.join("compile"));
        let t = |x: Option<f64>| x.map(human).unwrap_or_else(|| "not measured".into());
        let r = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => format!("{:.2}×", a / b),
            _ => "—".into(),
        };
        let j = jax(&w.name);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            label(&w.name),
            w.size,
            t(gr),
            t(pr),
            t(ru),
            r(gr, pr),
            r(gr, ru),
            j.map(human).unwrap_or_else(|| "—".into()),
            r(gr, j),
            t(compile)
        );
    }
    println!();
    println!("| objective (small size) | size | compiled gradient | interpreter gradient | interpreter / compiled |");
    println!("|---|---|---|---|---|");
    for w in workloads(Scale::Small) {
        let g = root.join(format!("reverse_interp_{}", w.name));
        match (median_ns(&g.join("gradient")), median_ns(&g.join("interp_gradient"))) {
            (Some(c), Some(i)) => {
                println!("| {} | {} | {} | {} | {:.0}× |", label(&w.name), w.size, human(c), human(i), i / c)
            }
            _ => println!("| {} | {} | not measured | | |", label(&w.name), w.size),
        }
    }
}

//! Reads the medians criterion recorded in its last run (`target/criterion`) and prints the ratio
//! table of BENCHMARKS.md: each pair is measured in the same `cargo bench` run.

use std::path::{Path, PathBuf};

fn median_ns(dir: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join("new/estimates.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}

fn human(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn main() {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let root = target.join("criterion");
    let mut rows = Vec::new();
    for (name, _) in benches::programs() {
        let g = root.join(format!("engines_{name}"));
        match (median_ns(&g.join("interp")), median_ns(&g.join("jit"))) {
            (Some(i), Some(j)) => rows.push(format!("| {name} | {} | {} | {:.0}× |", human(i), human(j), i / j)),
            _ => rows.push(format!("| {name} | not measured | | |")),
        }
    }
    println!("| program | interpreter (median) | JIT (median) | JIT speed-up |");
    println!("|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
    println!();
    println!("| paper-sized example | source to machine code (median) |");
    println!("|---|---|");
    for stem in ["paper_primal", "grand_total_primal", "histogram_primal"] {
        let m = median_ns(&root.join("compile").join(stem)).map(human).unwrap_or_else(|| "not measured".into());
        println!("| {stem} | {m} |");
    }
    println!();
    println!("| pair (same run) | numerator (median) | denominator (median) | ratio |");
    println!("|---|---|---|---|");
    for (group, num, den, what) in [
        ("incremental_histogram_500_docs", "recompute", "update", "500 documents: recomputation / (add + remove one)"),
        (
            "incremental_histogram_5000_docs",
            "recompute",
            "update",
            "5 000 documents: recomputation / (add + remove one)",
        ),
        ("gradient_paper_f", "pullback", "primal", "gradient / primal (interpreter)"),
        ("rust_scalar_loop", "jit", "rust", "JIT / hand-written Rust: scalar_loop"),
        ("rust_array_map_fold", "jit", "rust", "JIT / hand-written Rust: array_map_fold"),
        ("rust_bag_fold", "jit", "rust", "JIT / hand-written Rust: bag_fold"),
    ] {
        let g = root.join(group);
        match (median_ns(&g.join(num)), median_ns(&g.join(den))) {
            (Some(n), Some(d)) => println!("| {what} | {} | {} | {:.1}× |", human(n), human(d), n / d),
            _ => println!("| {what} | not measured | | |"),
        }
    }
}

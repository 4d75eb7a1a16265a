//! Reads the medians of the last `cargo bench -p benches --bench ilc` run (`target/criterion`) and
//! prints the table of BENCHMARKS.md; writes `benches/ilc.csv` (N, update, recompute, Rust per
//! change in ns) for `benches/plot_ilc.py`.

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
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn main() {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    // Criterion names the group `ilc_histogram/N`'s directory `ilc_histogram_N`.
    let root = target.join("criterion");
    let mut sizes: Vec<usize> = std::fs::read_dir(&root)
        .map(|it| {
            it.filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("ilc_histogram_")?.parse().ok()).collect()
        })
        .unwrap_or_default();
    sizes.sort();
    println!("| documents (N) | compiled update per change | compiled recomputation | recomputation / update | hand-written Rust per change | update / Rust |");
    println!("|---|---|---|---|---|---|");
    let mut csv = String::from("n,update_ns,recompute_ns,rust_ns\n");
    for n in sizes {
        let g = root.join(format!("ilc_histogram_{n}"));
        let (Some(u), Some(r), Some(h)) =
            (median_ns(&g.join("update_x2")), median_ns(&g.join("recompute")), median_ns(&g.join("rust_x2")))
        else {
            continue;
        };
        let (u, h) = (u / 2.0, h / 2.0);
        println!("| {n} | {} | {} | {:.0}× | {} | {:.0}× |", human(u), human(r), r / u, human(h), u / h);
        csv.push_str(&format!("{n},{u},{r},{h}\n"));
    }
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("ilc.csv");
    if let Err(e) = std::fs::write(&out, csv) {
        eprintln!("cannot write {}: {e}", out.display());
    }
}

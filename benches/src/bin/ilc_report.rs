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

/// The medians (ns) of one group's update (per change, built as a `GroupDelta`), recomputation,
/// hand-written update (per change) and update with the change as a `Value` (per change);
/// recomputation from criterion, or from the bench's manual timing above 10⁴ documents.
fn medians(g: &Path) -> Option<(f64, f64, f64, Option<f64>)> {
    let u = median_ns(&g.join("update_x2"))? / 2.0;
    let h = median_ns(&g.join("rust_x2"))? / 2.0;
    let r = median_ns(&g.join("recompute"))
        .or_else(|| std::fs::read_to_string(g.join("recompute_manual_ns.txt")).ok()?.trim().parse().ok())?;
    let v = median_ns(&g.join("update_value_x2")).map(|v| v / 2.0);
    Some((u, r, h, v))
}

fn main() {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    // Criterion names the group `ilc_histogram/N`'s directory `ilc_histogram_N`.
    let root = target.join("criterion");
    let mut csv = String::from("n,update_ns,recompute_ns,rust_ns\n");
    for (prefix, what) in [
        ("ilc_histogram_", "documents (N)"),
        ("ilc_grand_total_", "grand_total: elements (N)"),
        ("ilc_inventory_", "inventory: movements (N)"),
    ] {
        let mut sizes: Vec<usize> = std::fs::read_dir(&root)
            .map(|it| it.filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix(prefix)?.parse().ok()).collect())
            .unwrap_or_default();
        sizes.sort();
        println!("| {what} | compiled update per change | compiled recomputation | recomputation / update | hand-written Rust per change | update / Rust | update, change as a `Value` |");
        println!("|---|---|---|---|---|---|---|");
        for n in sizes {
            let Some((u, r, h, v)) = medians(&root.join(format!("{prefix}{n}"))) else { continue };
            let v = v.map_or("—".to_string(), human);
            println!("| {n} | {} | {} | {:.0}× | {} | {:.0}× | {v} |", human(u), human(r), r / u, human(h), u / h);
            if prefix == "ilc_histogram_" {
                csv.push_str(&format!("{n},{u},{r},{h}\n"));
            }
        }
        println!();
    }
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("ilc.csv");
    if let Err(e) = std::fs::write(&out, csv) {
        eprintln!("cannot write {}: {e}", out.display());
    }
}

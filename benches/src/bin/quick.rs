//! Quick timing (not criterion): `cargo run -p benches --release --bin quick [FILTER]`.
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time<F: FnMut()>(n: usize, mut f: F) -> f64 {
    let mut v = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        f();
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    median(v)
}

fn main() {
    let filter = std::env::args().nth(1).unwrap_or_default();
    let skip_interp = std::env::var("NO_INTERP").is_ok();
    for (name, src) in benches::programs() {
        if !name.contains(&filter) {
            continue;
        }
        let mono = benches::prepare(&src);
        let machine = benches::compile(&src);
        let mut ctx = benches::context();
        let j = time(30, || {
            benches::run_jit(&machine, &mut ctx);
        });
        if skip_interp {
            println!("{name:16} jit {j:8.3} ms");
        } else {
            let i = time(5, || {
                benches::run_interp(&mono);
            });
            println!("{name:16} interp {i:8.2} ms  jit {j:8.3} ms  ratio {:6.0}", i / j);
        }
    }
    if "scalar_loop".contains(&filter) {
        // The floor for scalar_loop: the same recurrence compiled by rustc (a chain of dependent
        // multiply-add roundings; no reassociation or fused multiply-add keeps the bits).
        let r = time(30, || {
            let mut x = std::hint::black_box(0.0f64);
            let (a, b) = (std::hint::black_box(0.999999f64), std::hint::black_box(0.5f64));
            for _ in 0..std::hint::black_box(1_000_000) {
                x = x * a + b;
            }
            std::hint::black_box(x);
        });
        println!("scalar_loop in rustc-compiled Rust: {r:.3} ms");
    }
    for stem in ["paper_primal", "grand_total_primal", "histogram_primal"] {
        if !stem.contains(&filter) && !filter.is_empty() {
            continue;
        }
        let src = benches::example(stem);
        let c = time(30, || {
            benches::compile(&src);
        });
        println!("compile {stem:20} {c:8.3} ms");
        phases(&src);
    }
}

#[allow(dead_code)]
pub fn phases(src: &str) {
    use anf::lower::{self, LowerOptions};
    let n = 30;
    let p = time(n, || {
        benches::prepare(src);
    });
    let mono = benches::prepare(src);
    let l = time(n, || {
        lower::lower(&mono, &LowerOptions::default()).unwrap();
    });
    let lowered = lower::lower(&mono, &LowerOptions::default()).unwrap();
    let v = time(n, || {
        anf::ir::verify(&lowered.module).unwrap();
    });
    let o = time(n, || {
        let mut m = lowered.module.clone();
        anf::opt::optimize(&mut m, &[lowered.main], &anf::opt::OptOptions::default());
    });
    println!("  opt {o:.3} ms");
    let span = runtime::engine::root_span(&mono);
    let j = time(n, || {
        runtime::engine::Machine::new(&lowered, span, benches::BENCH_STACK_BUDGET).unwrap();
    });
    println!("  front+mono {p:.3} ms, lower {l:.3} ms, verify {v:.3} ms, machine (verify+jit) {j:.3} ms");
}

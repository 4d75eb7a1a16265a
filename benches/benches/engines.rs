//! JIT vs interpreter on the benchmark programs, and compile latency of paper-sized examples.
//! `cargo bench -p benches`, then `cargo run -p benches --release --bin ratios` prints the ratios.

use criterion::{criterion_group, criterion_main, Criterion};

fn jit_vs_interp(c: &mut Criterion) {
    for (name, src) in benches::programs() {
        let mono = benches::prepare(&src);
        let machine = benches::compile(&src);
        let mut ctx = benches::context();
        // Both engines must agree before their times mean anything.
        let a = benches::run_interp(&mono).to_string();
        let b = benches::run_jit(&machine, &mut ctx).to_string();
        assert_eq!(a, b, "{name}: engines disagree");
        let mut g = c.benchmark_group(format!("engines/{name}"));
        g.sample_size(20);
        g.bench_function("interp", |bch| bch.iter(|| benches::run_interp(&mono)));
        g.bench_function("jit", |bch| bch.iter(|| benches::run_jit(&machine, &mut ctx)));
        g.finish();
    }
}

fn compile_latency(c: &mut Criterion) {
    let mut g = c.benchmark_group("compile");
    for stem in ["paper_primal", "grand_total_primal", "histogram_primal"] {
        let src = benches::example(stem);
        g.bench_function(stem, |bch| bch.iter(|| benches::compile(&src)));
    }
    g.finish();
}

criterion_group!(engines, jit_vs_interp, compile_latency);
criterion_main!(engines);

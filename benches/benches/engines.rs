//! JIT vs interpreter on the benchmark programs, and compile latency of paper-sized examples.
//! `cargo bench -p benches`, then `cargo run -p benches --release --bin ratios` prints the ratios.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use runtime::value::Value;
use rustc_hash::FxHashMap;

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

/// ILC's promise: an update costs time in proportion to the change. The histogram of docs/language.md §6
/// over 500 and 5 000 documents of 10 words, kept current under one document added and removed again
/// (two updates), against recomputing the histogram once. Both run in the interpreter (`derive`
/// is not compiled yet).
fn incremental_vs_recompute(c: &mut Criterion) {
    let src = benches::example("histogram");
    let (_, mono) = runtime::prepare(&src, "histogram").expect("histogram type-checks");
    let ty = match &mono.defs.last().expect("histogram").ty {
        frontend::types::Type::Fun(a, _) => (**a).clone(),
        t => panic!("histogram has type {t}"),
    };
    let dty = frontend::types::Type::delta(&ty);
    let change = |text: &str| runtime::incr::literal(text, &dty, 0).expect("change literal").0;
    let add = change("gchange (mapGroup bagGroup) map{50000 -> bag{1, 2, 3, 3}}");
    let remove = change("gchange (mapGroup bagGroup) map{50000 -> bag{1 # -1, 2 # -1, 3 # -2}}");
    for docs in [500, 5000] {
        let mut text = String::from("map{");
        for d in 0..docs {
            let words: Vec<String> = (0..10).map(|w| ((d * 7 + w * 13) % 500).to_string()).collect();
            text.push_str(&format!("{}{d} -> bag{{{}}}", if d > 0 { ", " } else { "" }, words.join(", ")));
        }
        text.push('}');
        let (input, _) = runtime::incr::literal(&text, &ty, 0).expect("input literal");
        let mut state = runtime::incr::Incr::new(&mono, input).expect("starts");
        // The updates must keep the output equal to a recomputation before their time means anything.
        state.update(add.clone()).expect("update");
        assert_eq!(state.output().to_string(), state.recompute().expect("recompute").to_string());
        state.update(remove.clone()).expect("update");
        let mut g = c.benchmark_group(format!("incremental/histogram_{docs}_docs"));
        g.sample_size(20);
        g.bench_function("update", |b| {
            b.iter(|| {
                state.update(add.clone()).expect("update");
                state.update(remove.clone()).expect("update");
            })
        });
        g.bench_function("recompute", |b| b.iter(|| state.recompute().expect("recompute")));
        g.finish();
    }
}

/// Reverse mode against the primal, both in the reference interpreter (pullbacks are not compiled
/// yet): the paper's `f` of Example 3.1 at (1, 3), and its gradient by the reduction strategy.
fn gradient_vs_primal(c: &mut Criterion) {
    let primal = benches::prepare(&benches::example("paper_primal"));
    let gradient = benches::prepare(&benches::example("paper_ex31_pullback"));
    let mut g = c.benchmark_group("gradient/paper_f");
    g.bench_function("primal", |b| b.iter(|| benches::run_interp(&primal)));
    g.bench_function("pullback", |b| b.iter(|| benches::run_interp(&gradient)));
    g.finish();
}

/// Compiled code against hand-written Rust doing the same work the same way (the same
/// floating-point operations in the same order, the same hash-table inserts), each checked to give
/// the same value first:
/// - `scalar_loop`: `x * 0.999999 + 0.5` a million times; both are bound by the latency of the
///   dependent multiply and add (no fused multiply-add: it would change the rounding).
/// - `array_map_fold`: two 200 000-element arrays made and a sum of squares.
/// - `bag_fold`: the 10 000-entry bag and the 20 000-entry bag of pairs in `FxHashMap`s, then the
///   fold (wrapping Int arithmetic, as the language's).
fn jit_vs_rust(c: &mut Criterion) {
    fn scalar_loop() -> Value {
        let mut x = black_box(0.0f64);
        let (a, b) = (black_box(0.999999f64), black_box(0.5f64));
        for _ in 0..black_box(1_000_000) {
            x = x * a + b;
        }
        Value::Real(x)
    }
    fn array_map_fold() -> Value {
        let n = black_box(200_000usize);
        let a: Vec<f64> = (0..n).map(|i| i as f64 * 0.001).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 2.0 + 1.0).collect();
        Value::Real(b.iter().fold(0.0, |acc, x| acc + x * x))
    }
    fn bag_fold() -> Value {
        let digits: Vec<i64> = (0..black_box(10)).collect();
        let mut b: FxHashMap<i64, i64> = FxHashMap::default();
        for &a in &digits {
            for &c in &digits {
                for &d in &digits {
                    for &e in &digits {
                        *b.entry(((a * 10 + c) * 10 + d) * 10 + e).or_insert(0) += 1;
                    }
                }
            }
        }
        let mut pairs: FxHashMap<(i64, i64), i64> = FxHashMap::default();
        for (&i, &m) in &b {
            *pairs.entry((i, i.wrapping_mul(2))).or_insert(0) += m;
            *pairs.entry((i, i.wrapping_mul(2).wrapping_add(1))).or_insert(0) += 2 * m;
        }
        let total = pairs
            .iter()
            .fold(0i64, |acc, (&(x, y), &m)| acc.wrapping_add(x.wrapping_mul(3).wrapping_add(y).wrapping_mul(m)));
        Value::Int(total)
    }
    let programs = benches::programs();
    for (name, rust) in
        [("scalar_loop", scalar_loop as fn() -> Value), ("array_map_fold", array_map_fold), ("bag_fold", bag_fold)]
    {
        let src = &programs.iter().find(|(n, _)| n == name).expect("benchmark program").1;
        let machine = benches::compile(src);
        let mut ctx = benches::context();
        assert_eq!(benches::run_jit(&machine, &mut ctx).to_string(), rust().to_string(), "{name}: Rust differs");
        let mut g = c.benchmark_group(format!("rust/{name}"));
        g.sample_size(20);
        g.bench_function("jit", |b| b.iter(|| benches::run_jit(&machine, &mut ctx)));
        g.bench_function("rust", |b| b.iter(rust));
        g.finish();
    }
}

criterion_group!(engines, jit_vs_interp, compile_latency, incremental_vs_recompute, gradient_vs_primal, jit_vs_rust);
criterion_main!(engines);

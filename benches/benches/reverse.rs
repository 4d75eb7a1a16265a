//! Compiled reverse mode (`adjoint::reverse`) on issue 9's benchmark set (`benches::reverse`),
//! through `runtime::api`.
//!
//! - `reverse/{name}`: at issue 9's sizes, the compiled value and gradient (`api::Gradient`), the
//!   compiled primal (`api::Compiled`) and the hand-written Rust adjoint, each gradient checked
//!   against the Rust adjoint (1e-9 relative) before anything is timed.
//!   `compile` times `Gradient::new` (source text to machine code).
//! - `reverse_interp/{name}`: at small sizes, the reference interpreter's `grad` (the pullback
//!   reducer; globals evaluated once, outside the timing) against the compiled gradient.
//!
//! `cargo run -p benches --release --bin reverse_report` prints BENCHMARKS.md's table from the run.

use std::hint::black_box;

use benches::reverse::{check_close, flatten_reals, workloads, Scale};
use criterion::{criterion_group, criterion_main, Criterion};
use runtime::api::{Compiled, Gradient};
use runtime::interp::Interp;

fn compiled(c: &mut Criterion) {
    for mut w in workloads(Scale::Full) {
        let mut grad = Gradient::new(&w.src, w.def).unwrap_or_else(|d| panic!("{}: {}", w.name, d.message));
        let mut primal = Compiled::new(&w.src, w.def).unwrap_or_else(|d| panic!("{}: {}", w.name, d.message));
        let (mut g, mut rg) = (vec![0.0; w.gradient_len()], vec![0.0; w.gradient_len()]);
        let v = grad.call(&w.args(), &mut g).expect("gradient");
        let rv = (w.adjoint)(&mut rg);
        check_close(&w.name, (v, &g), (rv, &rg)).unwrap();
        let p = primal.call_f64(&w.args()).expect("primal");
        assert!((v - p).abs() <= 1e-12 * p.abs().max(1.0), "{}: value {v}, primal {p}", w.name);
        let args = w.args();
        let mut grp = c.benchmark_group(format!("reverse/{}", w.name));
        grp.sample_size(30);
        grp.bench_function("gradient", |b| b.iter(|| grad.call(black_box(&args), &mut g).unwrap()));
        grp.bench_function("primal", |b| b.iter(|| primal.call_f64(black_box(&args)).unwrap()));
        grp.bench_function("rust_adjoint", |b| b.iter(|| (w.adjoint)(black_box(&mut rg))));
        // Compile latency: source text to machine code for the value and gradient (parse, check,
        // monomorphise, the reverse transform, lowering, `anf::opt`, Cranelift).
        grp.bench_function("compile", |b| b.iter(|| Gradient::new(black_box(&w.src), w.def).unwrap()));
        grp.finish();
    }
}

fn interpreter(c: &mut Criterion) {
    for w in workloads(Scale::Small) {
        let mut grad = Gradient::new(&w.src, w.def).unwrap_or_else(|d| panic!("{}: {}", w.name, d.message));
        let mut g = vec![0.0; w.gradient_len()];
        let v = grad.call(&w.args(), &mut g).expect("gradient");
        let src = w.interp_src();
        let (_, mono) = runtime::prepare(&src, "benchGradient").expect("the interpreter's program");
        let mut it = Interp::new(&mono);
        it.eval_globals().expect("globals");
        let f = it.globals.last().cloned().expect("benchGradient");
        let span = runtime::engine::root_span(&mono);
        let arg = w.interp_arg();
        let mut ig = Vec::new();
        flatten_reals(&it.apply(&f, arg.clone(), span).expect("interpreter gradient"), &mut ig);
        check_close(&w.name, (v, &g), (v, &ig)).unwrap();
        let args = w.args();
        let mut grp = c.benchmark_group(format!("reverse_interp/{}", w.name));
        grp.sample_size(10);
        grp.bench_function("gradient", |b| b.iter(|| grad.call(black_box(&args), &mut g).unwrap()));
        grp.bench_function("interp_gradient", |b| {
            b.iter(|| {
                runtime::value::meter::reset();
                it.apply(&f, black_box(arg.clone()), span).unwrap()
            })
        });
        grp.finish();
    }
}

criterion_group!(reverse, compiled, interpreter);
criterion_main!(reverse);

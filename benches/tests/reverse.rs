//! The reverse-mode benchmark set at small sizes: for every objective, the compiled value and
//! gradient (`api::Gradient`) equal the hand-written Rust adjoint and the reference interpreter's
//! `grad` (1e-9 relative), and the value equals the compiled primal (`api::Compiled`). The
//! benchmark checks the full sizes the same way before timing.

use benches::reverse::{check_close, flatten_reals, workloads, Scale};
use runtime::api::{Compiled, Gradient};
use runtime::interp::Interp;

#[test]
fn compiled_gradients_match_rust_adjoints_and_the_interpreter() {
    frontend::with_big_stack(|| {
        for mut w in workloads(Scale::Small) {
            let mut grad = Gradient::new(&w.src, w.def).unwrap_or_else(|d| panic!("{}: {}", w.name, d.message));
            let mut primal = Compiled::new(&w.src, w.def).unwrap_or_else(|d| panic!("{}: {}", w.name, d.message));
            let mut g = vec![0.0; w.gradient_len()];
            let v = grad.call(&w.args(), &mut g).unwrap();
            let p = primal.call_f64(&w.args()).unwrap();
            assert!((v - p).abs() <= 1e-12 * p.abs().max(1.0), "{}: value {v}, primal {p}", w.name);

            let mut rg = vec![0.0; g.len()];
            let rv = (w.adjoint)(&mut rg);
            check_close(&format!("{} (Rust)", w.name), (v, &g), (rv, &rg)).unwrap();

            let src = w.interp_src();
            let (_, mono) = runtime::prepare(&src, "benchGradient").unwrap();
            let mut it = Interp::new(&mono);
            it.eval_globals().unwrap();
            let f = it.globals.last().cloned().unwrap();
            let span = runtime::engine::root_span(&mono);
            let ig = it.apply(&f, w.interp_arg(), span).unwrap();
            let mut ig_flat = Vec::new();
            flatten_reals(&ig, &mut ig_flat);
            check_close(&format!("{} (interpreter)", w.name), (v, &g), (v, &ig_flat)).unwrap();
        }
    });
}

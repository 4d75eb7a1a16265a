//! Issue 9's reverse-mode benchmark set: each objective written in Nabla
//! (`benches/programs/reverse/*.nbl`, and GradBench's `lse` and `llsq` from `runtime/gradbench/`),
//! a point to differentiate it at, and a hand-written Rust adjoint of the same function (a forward
//! sweep, then a reverse sweep accumulating into the gradient). Shared by the criterion benchmark
//! (`benches/reverse.rs`), its report (`src/bin/reverse_report.rs`) and the agreement test
//! (`tests/reverse.rs`).

use std::rc::Rc;

use runtime::api::Arg;
use runtime::value::Value;

/// One parameter leaf of an objective, as the API takes it.
#[derive(Clone, Debug)]
pub enum Input {
    Real(f64),
    Reals(Vec<f64>),
    Int(i64),
}

impl Input {
    pub fn arg(&self) -> Arg<'_> {
        match self {
            Input::Real(x) => Arg::Real(*x),
            Input::Reals(xs) => Arg::Reals(xs),
            Input::Int(n) => Arg::Int(*n),
        }
    }

    /// The interpreter's value for this leaf.
    pub fn value(&self) -> Value {
        match self {
            Input::Real(x) => Value::Real(*x),
            Input::Reals(xs) => Value::Array(Rc::new(xs.iter().map(|x| Value::Real(*x)).collect())),
            Input::Int(n) => Value::Int(*n),
        }
    }

    /// How many gradient entries the leaf has.
    pub fn gradient_len(&self) -> usize {
        match self {
            Input::Real(_) => 1,
            Input::Reals(xs) => xs.len(),
            Input::Int(_) => 0,
        }
    }
}

/// A hand-written value-and-gradient: writes the gradient, returns the value.
pub type Adjoint = Box<dyn FnMut(&mut [f64]) -> f64>;

/// An objective at a point.
pub struct Workload {
    /// Criterion's group name: `reverse/{name}`.
    pub name: String,
    /// What the row says about the size.
    pub size: String,
    /// The Nabla program (the data sets are its definitions).
    pub src: String,
    /// The objective, `f : s -> Real`, for `api::Gradient` and `api::Compiled`.
    pub def: &'static str,
    /// The point: the leaves of `s`, in order.
    pub inputs: Vec<Input>,
    /// The hand-written Rust adjoint at the same point.
    pub adjoint: Adjoint,
}

impl Workload {
    pub fn args(&self) -> Vec<Arg<'_>> {
        self.inputs.iter().map(Input::arg).collect()
    }

    pub fn gradient_len(&self) -> usize {
        self.inputs.iter().map(Input::gradient_len).sum()
    }

    /// `src` plus a definition `benchGradient` of one argument (the point: the tuple of the leaves,
    /// or the one leaf) that is `grad def` there, for the reference interpreter.
    pub fn interp_src(&self) -> String {
        format!("{}\ndef benchGradient p = grad {} p\n", self.src, self.def)
    }

    /// The argument of `benchGradient`.
    pub fn interp_arg(&self) -> Value {
        match self.inputs.as_slice() {
            [one] => one.value(),
            many => Value::tuple(many.iter().map(Input::value).collect()),
        }
    }
}

/// Equal to 1e-9 relative, elementwise, up to an absolute 1e-12 times the sum of the gradient's
/// magnitudes: an entry that receives terms cancelling to nearly zero (lse's maximum gets
/// 1 − Σ softmax) keeps an absolute rounding error of the order of those terms, which the two
/// sides accumulate in different orders.
pub fn check_close(what: &str, (v1, g1): (f64, &[f64]), (v2, g2): (f64, &[f64])) -> Result<(), String> {
    let close = |a: f64, b: f64, floor: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()) + floor;
    if !close(v1, v2, 0.0) {
        return Err(format!("{what}: values differ: {v1} against {v2}"));
    }
    if g1.len() != g2.len() {
        return Err(format!("{what}: gradients of {} and {} entries", g1.len(), g2.len()));
    }
    let l1 = g1.iter().map(|x| x.abs()).sum::<f64>().max(g2.iter().map(|x| x.abs()).sum::<f64>());
    for (i, (a, b)) in g1.iter().zip(g2).enumerate() {
        if !close(*a, *b, 1e-12 * l1) {
            return Err(format!("{what}: gradient entry {i} differs: {a} against {b}"));
        }
    }
    Ok(())
}

/// Sets `def NAME = INTEGER` in `src` to `value` (the data sets' sizes).
fn set_size(src: &str, name: &str, value: usize) -> String {
    let head = format!("def {name} = ");
    let mut found = false;
    let out: Vec<String> = src
        .lines()
        .map(|l| match l.strip_prefix(&head) {
            Some(rest) if rest.trim().parse::<i64>().is_ok() => {
                found = true;
                format!("{head}{value}")
            }
            _ => l.to_string(),
        })
        .collect();
    assert!(found, "no `def {name} = <integer>` in the program");
    out.join("\n") + "\n"
}

fn program(file: &str) -> String {
    let p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("programs/reverse").join(file);
    std::fs::read_to_string(p).expect("benchmark program exists")
}

fn gradbench(module: &str) -> String {
    let p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../runtime/gradbench/{module}.nbl"));
    std::fs::read_to_string(p).expect("GradBench module exists")
}

/// The data sets' pseudo-random numbers, as the programs' `rnd` computes them.
fn rnd(k: i64) -> f64 {
    ((k * 7919 + 13) % 2003) as f64 / 1001.5 - 1.0
}

/// The sizes: issue 9's (`full`), or small ones the reference interpreter finishes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Scale {
    Full,
    Small,
}

/// Every workload at a scale, in the report's order.
pub fn workloads(scale: Scale) -> Vec<Workload> {
    let full = scale == Scale::Full;
    let mut out = vec![paper_f()];
    let rosen: &[usize] = if full { &[1000, 10_000] } else { &[100] };
    out.extend(rosen.iter().map(|&n| rosenbrock(n)));
    out.push(if full { logreg(10_000, 10) } else { logreg(50, 10) });
    out.push(if full { mlp(256, 100, 64, 10) } else { mlp(2, 10, 8, 3) });
    out.push(if full { lse(80_000) } else { lse(100) });
    out.push(if full { llsq(512, 128) } else { llsq(16, 8) });
    out
}

/// Mak & Ong's Example 3.1 at (1, 3).
pub fn paper_f() -> Workload {
    let adjoint: Adjoint = Box::new(|g: &mut [f64]| {
        let (x, y) = (std::hint::black_box(1.0f64), std::hint::black_box(3.0f64));
        let (a, b) = (x + 1.0, 2.0 * x + y * y);
        let m = a * b;
        let v = m * m;
        let dm = 2.0 * m;
        let (da, db) = (dm * b, dm * a);
        g[0] = da + 2.0 * db;
        g[1] = db * 2.0 * y;
        v
    });
    Workload {
        name: "paper_f".into(),
        size: "(1, 3)".into(),
        src: program("paper_f.nbl"),
        def: "f",
        inputs: vec![Input::Real(1.0), Input::Real(3.0)],
        adjoint,
    }
}

/// Rosenbrock as a fold over the index array, at x_i = 0.5 + 0.001 i.
pub fn rosenbrock(n: usize) -> Workload {
    let x: Vec<f64> = (0..n).map(|i| 0.5 + 0.001 * i as f64).collect();
    let xr = x.clone();
    let adjoint: Adjoint = Box::new(move |g: &mut [f64]| {
        let x = &xr;
        let n = x.len();
        let mut v = 0.0;
        for i in 0..n - 1 {
            let t = x[i + 1] - x[i] * x[i];
            let u = 1.0 - x[i];
            v = v + 100.0 * (t * t) + u * u;
        }
        g.iter_mut().for_each(|d| *d = 0.0);
        for i in (0..n - 1).rev() {
            let t = x[i + 1] - x[i] * x[i];
            let u = 1.0 - x[i];
            let dt = 100.0 * 2.0 * t;
            g[i + 1] += dt;
            g[i] += -2.0 * x[i] * dt - 2.0 * u;
        }
        v
    });
    Workload {
        name: format!("rosenbrock_{n}"),
        size: format!("n = {n}"),
        src: program("rosenbrock.nbl"),
        def: "rosen",
        inputs: vec![Input::Reals(x)],
        adjoint,
    }
}

/// Logistic regression, Σ_i log(1 + exp(-y_i ⟨w, x_i⟩)), at w_j = 0.05 j - 0.2.
pub fn logreg(samples: usize, features: usize) -> Workload {
    let src = set_size(&set_size(&program("logreg.nbl"), "samples", samples), "features", features);
    let f = features as i64;
    let xs: Vec<f64> = (0..samples as i64 * f).map(rnd).collect();
    let ys: Vec<f64> = (0..samples as i64).map(|i| if rnd(i + 1000003) > 0.0 { 1.0 } else { -1.0 }).collect();
    let w: Vec<f64> = (0..features).map(|j| 0.05 * j as f64 - 0.2).collect();
    let wr = w.clone();
    let adjoint: Adjoint = Box::new(move |g: &mut [f64]| {
        let w = &wr;
        let d = w.len();
        g.iter_mut().for_each(|x| *x = 0.0);
        let mut v = 0.0;
        for (x, y) in xs.chunks_exact(d).zip(&ys) {
            let z: f64 = x.iter().zip(w).fold(0.0, |s, (a, b)| s + b * a);
            let e = (-(y * z)).exp();
            v += (1.0 + e).ln();
            // d/dz log(1 + exp(-y z)) = -y e / (1 + e)
            let dz = -y * e / (1.0 + e);
            for (gj, xj) in g.iter_mut().zip(x) {
                *gj += dz * xj;
            }
        }
        v
    });
    Workload {
        name: "logreg".into(),
        size: format!("{samples} × {features}"),
        src,
        def: "loss",
        inputs: vec![Input::Reals(w)],
        adjoint,
    }
}

/// The two-layer tanh perceptron's squared loss over the batch, in its weights and biases (small
/// pseudo-random weights).
pub fn mlp(batch: usize, inputs: usize, hidden: usize, outputs: usize) -> Workload {
    let mut src = program("mlp.nbl");
    for (name, v) in [("batch", batch), ("inputs", inputs), ("hidden", hidden), ("outputs", outputs)] {
        src = set_size(&src, name, v);
    }
    let (ni, nh, no) = (inputs, hidden, outputs);
    let xs: Vec<f64> = (0..(batch * ni) as i64).map(rnd).collect();
    let ts: Vec<f64> = (0..(batch * no) as i64).map(|k| rnd(3000017 + k)).collect();
    let w1: Vec<f64> = (0..(nh * ni) as i64).map(|k| 0.1 * rnd(k + 11)).collect();
    let b1: Vec<f64> = (0..nh as i64).map(|k| 0.1 * rnd(k + 23)).collect();
    let w2: Vec<f64> = (0..(no * nh) as i64).map(|k| 0.1 * rnd(k + 37)).collect();
    let b2: Vec<f64> = (0..no as i64).map(|k| 0.1 * rnd(k + 41)).collect();
    let (w1r, b1r, w2r, b2r) = (w1.clone(), b1.clone(), w2.clone(), b2.clone());
    let (mut a, mut h, mut y, mut dh) = (vec![0.0; nh], vec![0.0; nh], vec![0.0; no], vec![0.0; nh]);
    let adjoint: Adjoint = Box::new(move |g: &mut [f64]| {
        let (w1, b1, w2, b2) = (&w1r, &b1r, &w2r, &b2r);
        g.iter_mut().for_each(|x| *x = 0.0);
        let (gw1, rest) = g.split_at_mut(nh * ni);
        let (gb1, rest) = rest.split_at_mut(nh);
        let (gw2, gb2) = rest.split_at_mut(no * nh);
        let mut v = 0.0;
        for (x, t) in xs.chunks_exact(ni).zip(ts.chunks_exact(no)) {
            // Forward.
            for j in 0..nh {
                let row = &w1[j * ni..(j + 1) * ni];
                a[j] = b1[j] + row.iter().zip(x).fold(0.0, |s, (w, x)| s + w * x);
                h[j] = a[j].tanh();
            }
            for o in 0..no {
                let row = &w2[o * nh..(o + 1) * nh];
                y[o] = b2[o] + row.iter().zip(&h).fold(0.0, |s, (w, h)| s + w * h);
            }
            v += y.iter().zip(t).fold(0.0, |s, (y, t)| s + (y - t) * (y - t));
            // Reverse.
            dh.iter_mut().for_each(|d| *d = 0.0);
            for o in 0..no {
                let dy = 2.0 * (y[o] - t[o]);
                gb2[o] += dy;
                for j in 0..nh {
                    gw2[o * nh + j] += dy * h[j];
                    dh[j] += dy * w2[o * nh + j];
                }
            }
            for j in 0..nh {
                let da = dh[j] * (1.0 - h[j] * h[j]);
                gb1[j] += da;
                for (gw, xk) in gw1[j * ni..(j + 1) * ni].iter_mut().zip(x) {
                    *gw += da * xk;
                }
            }
        }
        v
    });
    Workload {
        name: "mlp".into(),
        size: format!("batch {batch}, {ni} → {nh} → {no}"),
        src,
        def: "loss",
        inputs: vec![Input::Reals(w1), Input::Reals(b1), Input::Reals(w2), Input::Reals(b2)],
        adjoint,
    }
}

/// GradBench's `lse` primal, a + log Σ exp(x_i - a) with a = max x, at x_i = rnd(i).
pub fn lse(n: usize) -> Workload {
    let x: Vec<f64> = (0..n as i64).map(rnd).collect();
    let xr = x.clone();
    let mut e = vec![0.0; n];
    let adjoint: Adjoint = Box::new(move |g: &mut [f64]| {
        let x = &xr;
        let (mut a, mut arg) = (x[0], 0);
        for (i, v) in x.iter().enumerate() {
            if *v > a {
                (a, arg) = (*v, i);
            }
        }
        let mut s = 0.0;
        for (ei, xi) in e.iter_mut().zip(x) {
            *ei = (xi - a).exp();
            s += *ei;
        }
        // d/dx_i = exp(x_i - a) / s, plus (1 - Σ exp(x_i - a) / s) through a = max x.
        let mut through_a = 1.0;
        for (gi, ei) in g.iter_mut().zip(&e) {
            *gi = ei / s;
            through_a -= *gi;
        }
        g[arg] += through_a;
        a + s.ln()
    });
    Workload {
        name: "lse".into(),
        size: format!("n = {n}"),
        src: gradbench("lse"),
        def: "primal",
        inputs: vec![Input::Reals(x)],
        adjoint,
    }
}

/// GradBench's `llsq` primal, ½ Σ_{i<n} (s_i - Σ_j x_j t_i^j)², at x_j = rnd(j), through a
/// definition of the pair (x, n) (the gradient handle differentiates one parameter).
pub fn llsq(n: usize, m: usize) -> Workload {
    let src = gradbench("llsq") + "def objective ((x : Array Real), (n : Int)) = primal x n\n";
    let x: Vec<f64> = (0..m as i64).map(rnd).collect();
    let xr = x.clone();
    let adjoint: Adjoint = Box::new(move |g: &mut [f64]| {
        let x = &xr;
        g.iter_mut().for_each(|d| *d = 0.0);
        let mut v = 0.0;
        for i in 0..n {
            let t = -1.0 + i as f64 * 2.0 / (n - 1) as f64;
            let s = if t > 0.0 {
                1.0
            } else if t < 0.0 {
                -1.0
            } else {
                0.0
            };
            let (mut r, mut mul) = (s, 1.0);
            for xj in x {
                r -= xj * mul;
                mul *= t;
            }
            v += r * r;
            // d/dx_j ½ r² = -r t^j
            let mut mul = 1.0;
            for gj in g.iter_mut() {
                *gj -= r * mul;
                mul *= t;
            }
        }
        0.5 * v
    });
    Workload {
        name: "llsq".into(),
        size: format!("n = {n}, m = {m}"),
        src,
        def: "objective",
        inputs: vec![Input::Reals(x), Input::Int(n as i64)],
        adjoint,
    }
}

/// The Reals of a gradient value in order (an `Int` leaf's gradient takes no room), as
/// `api::Gradient` writes them.
pub fn flatten_reals(v: &Value, out: &mut Vec<f64>) {
    match v {
        Value::Real(x) => out.push(*x),
        Value::Array(xs) => xs.iter().for_each(|x| flatten_reals(x, out)),
        Value::Tuple(xs) => xs.iter().for_each(|x| flatten_reals(x, out)),
        _ => {}
    }
}

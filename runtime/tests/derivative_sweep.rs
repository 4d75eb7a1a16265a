//! A per-primitive derivative sweep against an independent oracle.
//!
//! Every Real primitive (`sin cos tan exp log sqrt tanh sigmoid abs neg max min toReal`) and both
//! operands of every binary operator (`+ - * / ^`, including `x ^ y` in `y`, `/` with small and
//! negative denominators, `log`/`sqrt` of non-squares, the kinks of docs/language.md §5), alone and
//! composed with a non-linear inner term, at several points:
//!
//! - first order: `grad f p` written in the language and run by the engine
//!   (`runtime::engine::run`: compiled reverse mode, which reads the rule table's partials as
//!   terms) and by the reference interpreter (the pullback reducer, which reads them as numbers),
//!   and the primal `f p` run by both too;
//! - second order through the symbolic derivative table: the Hessian–vector product written two
//!   ways, as a nested `grad` of `grad` and as a `grad` of the directional derivative
//!   `(pullback f (omega 1.0)) q v` (rule lin, then rule J on the inner Jacobian).
//!
//! The oracle is forward mode with hyper-dual numbers `a + b·ε₁ + c·ε₂ + d·ε₁ε₂` (ε₁² = ε₂² = 0),
//! implemented here from a handful of elementary derivatives (`exp ln sin cos sqrt` and the
//! reciprocal); the other primitives are built from those (`tan = sin/cos`, `tanh` and `sigmoid`
//! from `exp`, `x ^ y = exp (y · ln x)` for a variable exponent), so the oracle never reuses a
//! formula of the engine's table. Seeding `ε₁` with a direction `v` and `ε₂` with the unit vector
//! `eᵢ` gives `∂ᵢf` in the `c` part and `(H v)ᵢ` in the `d` part. Values must agree to 1e-12
//! relative (plus 1e-14 absolute, for results that are zero up to rounding).
//!
//! Kinks follow the language's conventions: `abs′(0) = 0`, a tie of `max`/`min` goes to the first
//! argument.

use std::ops::{Add, Div, Mul, Neg, Sub};

/// A hyper-dual number: `a + b·ε₁ + c·ε₂ + d·ε₁ε₂`.
#[derive(Clone, Copy, Debug)]
struct Hd {
    a: f64,
    b: f64,
    c: f64,
    d: f64,
}

impl Hd {
    fn constant(a: f64) -> Hd {
        Hd { a, b: 0.0, c: 0.0, d: 0.0 }
    }
    /// `f` applied to `self`, from `f(a)`, `f′(a)` and `f″(a)`.
    fn lift(self, f0: f64, f1: f64, f2: f64) -> Hd {
        Hd { a: f0, b: f1 * self.b, c: f1 * self.c, d: f1 * self.d + f2 * self.b * self.c }
    }
    fn exp(self) -> Hd {
        let e = self.a.exp();
        self.lift(e, e, e)
    }
    fn ln(self) -> Hd {
        self.lift(self.a.ln(), 1.0 / self.a, -1.0 / (self.a * self.a))
    }
    fn sin(self) -> Hd {
        self.lift(self.a.sin(), self.a.cos(), -self.a.sin())
    }
    fn cos(self) -> Hd {
        self.lift(self.a.cos(), -self.a.sin(), -self.a.cos())
    }
    fn sqrt(self) -> Hd {
        let s = self.a.sqrt();
        self.lift(s, 0.5 / s, -0.25 / (s * self.a))
    }
    fn recip(self) -> Hd {
        let r = 1.0 / self.a;
        self.lift(r, -r * r, 2.0 * r * r * r)
    }
    /// `x ^ n` for a constant exponent (defined for negative `x` too, like `powf`).
    fn powi_const(self, n: f64) -> Hd {
        self.lift(self.a.powf(n), n * self.a.powf(n - 1.0), n * (n - 1.0) * self.a.powf(n - 2.0))
    }
    fn zero_derivatives(self) -> Hd {
        Hd::constant(self.a)
    }
}

impl Add for Hd {
    type Output = Hd;
    fn add(self, o: Hd) -> Hd {
        Hd { a: self.a + o.a, b: self.b + o.b, c: self.c + o.c, d: self.d + o.d }
    }
}
impl Sub for Hd {
    type Output = Hd;
    fn sub(self, o: Hd) -> Hd {
        Hd { a: self.a - o.a, b: self.b - o.b, c: self.c - o.c, d: self.d - o.d }
    }
}
impl Neg for Hd {
    type Output = Hd;
    fn neg(self) -> Hd {
        Hd { a: -self.a, b: -self.b, c: -self.c, d: -self.d }
    }
}
impl Mul for Hd {
    type Output = Hd;
    fn mul(self, o: Hd) -> Hd {
        Hd {
            a: self.a * o.a,
            b: self.a * o.b + self.b * o.a,
            c: self.a * o.c + self.c * o.a,
            d: self.a * o.d + self.b * o.c + self.c * o.b + self.d * o.a,
        }
    }
}
impl Div for Hd {
    type Output = Hd;
    fn div(self, o: Hd) -> Hd {
        self * o.recip()
    }
}

/// The Real primitives of one argument.
#[derive(Clone, Copy, Debug)]
enum Un {
    Sin,
    Cos,
    Tan,
    Exp,
    Log,
    Sqrt,
    Tanh,
    Sigmoid,
    Abs,
    /// The builtin `neg`.
    NegFn,
    /// Unary minus.
    Minus,
}

/// Binary operators and the two-argument primitives.
#[derive(Clone, Copy, Debug)]
enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Max,
    Min,
}

/// A Real expression over the inputs `x1 … xn`.
#[derive(Clone, Debug)]
enum Ex {
    Var(usize),
    Const(f64),
    /// `toReal k`: a constant with an Int inside.
    ToReal(i64),
    Un(Un, Box<Ex>),
    Bin(Bin, Box<Ex>, Box<Ex>),
}

fn lit(x: f64) -> String {
    let s = format!("{x:?}");
    if x.is_sign_negative() {
        format!("({s})")
    } else {
        s
    }
}

impl Ex {
    fn source(&self) -> String {
        match self {
            Ex::Var(i) => format!("x{}", i + 1),
            Ex::Const(c) => lit(*c),
            Ex::ToReal(k) => format!("(toReal ({k}))"),
            Ex::Un(u, a) => {
                let a = a.source();
                match u {
                    Un::Sin => format!("(sin {a})"),
                    Un::Cos => format!("(cos {a})"),
                    Un::Tan => format!("(tan {a})"),
                    Un::Exp => format!("(exp {a})"),
                    Un::Log => format!("(log {a})"),
                    Un::Sqrt => format!("(sqrt {a})"),
                    Un::Tanh => format!("(tanh {a})"),
                    Un::Sigmoid => format!("(sigmoid {a})"),
                    Un::Abs => format!("(abs {a})"),
                    Un::NegFn => format!("(neg {a})"),
                    Un::Minus => format!("(- {a})"),
                }
            }
            Ex::Bin(op, a, b) => {
                let (a, b) = (a.source(), b.source());
                match op {
                    Bin::Add => format!("({a} + {b})"),
                    Bin::Sub => format!("({a} - {b})"),
                    Bin::Mul => format!("({a} * {b})"),
                    Bin::Div => format!("({a} / {b})"),
                    Bin::Pow => format!("({a} ^ {b})"),
                    Bin::Max => format!("(max {a} {b})"),
                    Bin::Min => format!("(min {a} {b})"),
                }
            }
        }
    }

    /// The expression in hyper-dual arithmetic at the inputs `xs`.
    fn eval(&self, xs: &[Hd]) -> Hd {
        match self {
            Ex::Var(i) => xs[*i],
            Ex::Const(c) => Hd::constant(*c),
            Ex::ToReal(k) => Hd::constant(*k as f64),
            Ex::Un(u, a) => {
                let x = a.eval(xs);
                let one = Hd::constant(1.0);
                match u {
                    Un::Sin => x.sin(),
                    Un::Cos => x.cos(),
                    Un::Tan => x.sin() / x.cos(),
                    Un::Exp => x.exp(),
                    Un::Log => x.ln(),
                    Un::Sqrt => x.sqrt(),
                    // tanh x = (eˣ − e⁻ˣ) / (eˣ + e⁻ˣ)
                    Un::Tanh => {
                        let (p, m) = (x.exp(), (-x).exp());
                        (p - m) / (p + m)
                    }
                    // σ(x) = 1 / (1 + e⁻ˣ)
                    Un::Sigmoid => (one + (-x).exp()).recip(),
                    // abs′(0) = 0
                    Un::Abs => {
                        if x.a > 0.0 {
                            x
                        } else if x.a < 0.0 {
                            -x
                        } else {
                            x.zero_derivatives()
                        }
                    }
                    Un::NegFn | Un::Minus => -x,
                }
            }
            Ex::Bin(op, a, b) => {
                let (x, y) = (a.eval(xs), b.eval(xs));
                match op {
                    Bin::Add => x + y,
                    Bin::Sub => x - y,
                    Bin::Mul => x * y,
                    Bin::Div => x / y,
                    Bin::Pow => match **b {
                        // A constant exponent: its tangent is a symbolic zero, defined at x < 0.
                        Ex::Const(n) => x.powi_const(n),
                        _ => (y * x.ln()).exp(),
                    },
                    // A tie goes to the first argument.
                    Bin::Max => {
                        if y.a > x.a {
                            y
                        } else {
                            x
                        }
                    }
                    Bin::Min => {
                        if y.a < x.a {
                            y
                        } else {
                            x
                        }
                    }
                }
            }
        }
    }
}

fn var(i: usize) -> Ex {
    Ex::Var(i)
}
fn c(x: f64) -> Ex {
    Ex::Const(x)
}
fn un(u: Un, a: Ex) -> Ex {
    Ex::Un(u, Box::new(a))
}
fn bin(op: Bin, a: Ex, b: Ex) -> Ex {
    Ex::Bin(op, Box::new(a), Box::new(b))
}

/// A function of `n` inputs and the points to differentiate it at.
struct Case {
    body: Ex,
    n: usize,
    points: Vec<Vec<f64>>,
}

fn case(body: Ex, n: usize, points: &[&[f64]]) -> Case {
    Case { body, n, points: points.iter().map(|p| p.to_vec()).collect() }
}

const UNARY: [Un; 11] =
    [Un::Sin, Un::Cos, Un::Tan, Un::Exp, Un::Log, Un::Sqrt, Un::Tanh, Un::Sigmoid, Un::Abs, Un::NegFn, Un::Minus];

/// Points where a unary primitive is smooth and its value moderate.
fn unary_points(u: Un) -> Vec<f64> {
    match u {
        // Non-squares, small arguments, large ones.
        Un::Log | Un::Sqrt => vec![2.0, 3.0, 0.7, 1e-3, 17.25],
        Un::Tan => vec![0.3, -1.2, 1.5, 2.5, -0.05],
        Un::Exp => vec![0.5, -2.25, 3.0, 0.0],
        Un::Abs => vec![1.75, -0.5, 1e-3],
        _ => vec![0.5, -1.25, 2.0, 0.0, -0.1],
    }
}

/// The sweep: every primitive on a variable, and composed with a non-linear inner term and an
/// outer product (so second order meets `f″·g′²`, `f′·g″` and the mixed partials).
fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for u in UNARY {
        let pts = unary_points(u);
        let one: Vec<Vec<f64>> = pts.iter().map(|x| vec![*x]).collect();
        out.push(Case { body: un(u, var(0)), n: 1, points: one });
        // p (x1 · x2 + x2 / 4) · x1 at (x1, x2) with x1 · x2 + x2/4 at the primitive's points:
        // x2 = 0.8, x1 = t/0.8 − 0.25.
        let two: Vec<Vec<f64>> = pts.iter().map(|t| vec![t / 0.8 - 0.25, 0.8]).collect();
        let inner = bin(Bin::Add, bin(Bin::Mul, var(0), var(1)), bin(Bin::Div, var(1), c(4.0)));
        out.push(Case { body: bin(Bin::Mul, un(u, inner), var(0)), n: 2, points: two });
    }
    let xy = || (var(0), var(1));
    // Both operands of every operator.
    let generic: &[&[f64]] = &[&[1.5, 2.0], &[-0.75, 3.25], &[2.0, -0.5], &[0.3, 0.3]];
    for op in [Bin::Add, Bin::Sub, Bin::Mul] {
        let (x, y) = xy();
        out.push(case(bin(op, x, y), 2, generic));
        // Squared, for non-zero second derivatives.
        let (x, y) = xy();
        let e = bin(op, x, y);
        out.push(case(bin(Bin::Mul, e.clone(), e), 2, generic));
    }
    // Division: small and negative denominators, both operands.
    let (x, y) = xy();
    out.push(case(
        bin(Bin::Div, x, y),
        2,
        &[&[1.0, 3.0], &[2.5, -0.4], &[-1.0, 1e-3], &[0.7, -1e-4], &[-3.0, -7.0], &[0.0, 2.0]],
    ));
    out.push(case(bin(Bin::Div, c(1.0), var(0)), 1, &[&[1e-3], &[-2.5], &[3.0]]));
    // Powers: in the base, in the exponent (`2 ^ y`), both, and constant exponents at negative bases.
    let (x, y) = xy();
    out.push(case(
        bin(Bin::Pow, x, y),
        2,
        &[&[2.0, 3.0], &[0.5, -1.5], &[3.0, 0.5], &[1.5, 2.25], &[7.0, -0.25], &[0.1, 1.0]],
    ));
    out.push(case(bin(Bin::Pow, c(2.0), var(0)), 1, &[&[3.0], &[-1.5], &[0.0], &[0.7]]));
    out.push(case(bin(Bin::Pow, c(0.5), var(0)), 1, &[&[2.0], &[-3.0]]));
    for n in [2.0f64, 3.0, -1.0, 0.5, -1.5, 1.0] {
        let pts: &[&[f64]] = if n.fract() == 0.0 { &[&[-3.0], &[1.5], &[-0.25]] } else { &[&[1.5], &[0.25], &[4.0]] };
        out.push(case(bin(Bin::Pow, var(0), c(n)), 1, pts));
    }
    // x ^ y with a non-linear exponent and base.
    out.push(case(
        bin(Bin::Pow, bin(Bin::Add, bin(Bin::Mul, var(0), var(0)), c(0.5)), un(Un::Sin, var(1))),
        2,
        &[&[1.25, 0.5], &[-0.5, 2.0], &[0.3, -1.0]],
    ));
    // max and min: each argument taken, ties (the first argument takes it), and second order.
    for op in [Bin::Max, Bin::Min] {
        let (x, y) = xy();
        out.push(case(bin(op, x, y), 2, &[&[1.0, 2.0], &[2.0, 1.0], &[1.5, 1.5], &[-0.5, -0.5]]));
        // op (x1²) (x1 · x2): smooth pieces with second derivatives; a tie at x1 = x2.
        out.push(case(
            bin(op, bin(Bin::Mul, var(0), var(0)), bin(Bin::Mul, var(0), var(1))),
            2,
            &[&[1.0, 2.0], &[2.0, 1.0], &[1.5, 1.5], &[-0.5, 0.25]],
        ));
        out.push(case(bin(op, var(0), c(0.0)), 1, &[&[0.5], &[-0.5], &[0.0]]));
    }
    // abs at its kink, composed: abs (x1 − x2) · x1 at x1 = x2.
    out.push(case(bin(Bin::Mul, un(Un::Abs, bin(Bin::Sub, var(0), var(1))), var(0)), 2, &[&[0.5, 0.5], &[1.0, 0.25]]));
    // toReal: an Int inside a Real computation contributes a constant.
    out.push(case(
        bin(
            Bin::Add,
            bin(Bin::Mul, var(0), Ex::ToReal(3)),
            bin(Bin::Mul, var(0), bin(Bin::Mul, var(0), Ex::ToReal(-2))),
        ),
        1,
        &[&[1.5], &[-0.25]],
    ));
    // Three inputs through several primitives at once.
    out.push(case(
        bin(
            Bin::Div,
            bin(Bin::Mul, un(Un::Exp, bin(Bin::Mul, var(0), var(2))), un(Un::Tan, var(1))),
            bin(Bin::Add, c(1.5), un(Un::Sigmoid, bin(Bin::Sub, var(2), var(0)))),
        ),
        3,
        &[&[0.5, 0.25, -1.0], &[-1.25, 1.0, 0.75]],
    ));
    out
}

fn run(src: &str) -> Result<runtime::value::Value, String> {
    let (_, mono) = runtime::prepare(src, "main").map_err(|d| format!("{}: {}", d.span.lo, d.message))?;
    runtime::engine::run(&mono).map(|r| r.value).map_err(|d| d.to_string())
}

/// The same program run by the reference interpreter (the pullback reducer, which reads the rule
/// table's numeric partials where the compiled transform reads its terms).
fn interpret(src: &str) -> Result<runtime::value::Value, String> {
    let (_, mono) = runtime::prepare(src, "main").map_err(|d| format!("{}: {}", d.span.lo, d.message))?;
    runtime::interp::run(&mono).map_err(|d| d.to_string())
}

/// Both engines: the compiled engine (`run`) and the reference interpreter (`interpret`).
const ENGINES: [(&str, fn(&str) -> Result<runtime::value::Value, String>); 2] =
    [("engine", run), ("interpreter", interpret)];

fn reals(v: &runtime::value::Value) -> Vec<f64> {
    use runtime::value::Value;
    match v {
        Value::Real(r) => vec![*r],
        Value::Tuple(vs) => vs.iter().flat_map(reals).collect(),
        _ => vec![f64::NAN],
    }
}

fn point(p: &[f64]) -> String {
    if p.len() == 1 {
        lit(p[0])
    } else {
        format!("({})", p.iter().map(|x| lit(*x)).collect::<Vec<_>>().join(", "))
    }
}

fn agree(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-12 * want.abs().max(got.abs()) + 1e-14
}

/// The direction of the Hessian–vector products at a point.
fn direction(n: usize) -> Vec<f64> {
    [0.75, -1.25, 0.5][..n].to_vec()
}

/// Every check of one case at one point; failures are described in `out`.
fn check(case: &Case, p: &[f64], out: &mut Vec<String>) -> usize {
    let n = case.n;
    let body = case.body.source();
    let params = if n == 1 {
        "(x1 : Real)".to_string()
    } else {
        format!("({})", (1..=n).map(|i| format!("x{i}")).collect::<Vec<_>>().join(", "))
    };
    let def = format!("def f {params} : Real = {body}\n");
    let v = direction(n);
    // Oracle: ε₁ along v, ε₂ along eᵢ.
    let oracle: Vec<Hd> = (0..n)
        .map(|i| {
            let xs: Vec<Hd> =
                (0..n).map(|j| Hd { a: p[j], b: v[j], c: if i == j { 1.0 } else { 0.0 }, d: 0.0 }).collect();
            case.body.eval(&xs)
        })
        .collect();
    let value = oracle[0].a;
    let grad: Vec<f64> = oracle.iter().map(|h| h.c).collect();
    let hvp: Vec<f64> = oracle.iter().map(|h| h.d).collect();
    if !value.is_finite() || grad.iter().chain(&hvp).any(|x| !x.is_finite()) {
        out.push(format!("the oracle is not finite for {def}at {p:?} (a bad test point)"));
        return 0;
    }
    let tuple_ty = vec!["Real"; n].join(" * ");
    let q_pat = if n == 1 { "(q : Real)".to_string() } else { format!("(q : {tuple_ty})") };
    let dir = point(&v);
    // Σ gᵢ vᵢ for the gradient tuple g of f at q.
    let dot_v = if n == 1 {
        format!("grad f q * {}", lit(v[0]))
    } else {
        let gs: Vec<String> = (1..=n).map(|i| format!("g{i}")).collect();
        let terms: Vec<String> = gs.iter().zip(&v).map(|(g, vi)| format!("{g} * {}", lit(*vi))).collect();
        format!("let ({}) = grad f q in {}", gs.join(", "), terms.join(" + "))
    };
    let programs = [
        ("value", format!("{def}def main = f {}\n", point(p)), vec![value]),
        ("gradient", format!("{def}def main = grad f {}\n", point(p)), grad.clone()),
        ("Hv (grad of grad)", format!("{def}def main = grad (fun {q_pat} -> {dot_v}) {}\n", point(p)), hvp.clone()),
        (
            "Hv (grad of a directional derivative)",
            format!("{def}def main = grad (fun {q_pat} -> (pullback f (omega 1.0)) q {dir}) {}\n", point(p)),
            hvp.clone(),
        ),
    ];
    let mut checked = 0;
    for (what, src, want) in programs {
        for (engine, run) in ENGINES {
            match run(&src) {
                Ok(got) => {
                    let got = reals(&got);
                    checked += want.len();
                    if got.len() != want.len() || got.iter().zip(&want).any(|(g, w)| !agree(*g, *w)) {
                        out.push(format!("{what}: {engine} {got:?}, oracle {want:?} (v = {v:?})\n{src}"));
                    }
                }
                Err(e) => out.push(format!("{what}: the {engine} failed: {e}\n{src}")),
            }
        }
    }
    checked
}

#[test]
fn every_primitive_first_and_second_order_agrees_with_hyper_duals() {
    let failures = frontend::with_big_stack(|| {
        let mut failures = Vec::new();
        let mut checked = 0;
        for case in cases() {
            for p in &case.points {
                checked += check(&case, p, &mut failures);
            }
        }
        assert!(checked > 600, "only {checked} values checked");
        failures
    });
    assert!(failures.is_empty(), "{} failures:\n\n{}", failures.len(), failures.join("\n\n"));
}

/// `toReal` of an Int input: the Int has the zero tangent space, printed as its zero.
#[test]
fn to_real_of_an_int_input_has_a_discrete_zero_gradient() {
    let src = "def main = grad (fun (x, n) -> x * toReal n + toReal (n * n)) (2.5, 3)\n";
    for (engine, run) in ENGINES {
        let got = frontend::with_big_stack(move || run(src).map(|v| v.to_string()));
        assert_eq!(got, Ok("(3.0, 0)".to_string()), "{engine}");
    }
}

/// The oracle itself, on closed forms: `d/dy 2^y = 2^y ln 2`, `tan′ = 1 + tan²`,
/// `tanh″ = −2 tanh (1 − tanh²)`, `σ′ = σ (1 − σ)` — so a mistake in it cannot hide one in the
/// engine.
#[test]
fn the_oracle_matches_closed_forms() {
    let x = Hd { a: 0.7, b: 1.0, c: 1.0, d: 0.0 };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-14 * (1.0 + b.abs());
    let p = (Hd::constant(2.0f64.ln()) * x).exp();
    assert!(close(p.c, 2f64.powf(0.7) * 2f64.ln()) && close(p.d, 2f64.powf(0.7) * 2f64.ln().powi(2)));
    let t = x.sin() / x.cos();
    assert!(close(t.c, 1.0 + 0.7f64.tan().powi(2)));
    assert!(close(t.d, 2.0 * 0.7f64.tan() * (1.0 + 0.7f64.tan().powi(2))));
    let th = Ex::Un(Un::Tanh, Box::new(Ex::Var(0))).eval(&[x]);
    let tv = 0.7f64.tanh();
    assert!(close(th.a, tv) && close(th.c, 1.0 - tv * tv) && close(th.d, -2.0 * tv * (1.0 - tv * tv)));
    let s = Ex::Un(Un::Sigmoid, Box::new(Ex::Var(0))).eval(&[x]);
    let sv = 1.0 / (1.0 + (-0.7f64).exp());
    assert!(close(s.c, sv * (1.0 - sv)) && close(s.d, sv * (1.0 - sv) * (1.0 - 2.0 * sv)));
}

/// A primitive whose point holds a symbolic zero (an inner gradient of a constant function): its
/// other argument's partial still counts (`max x 0` at x > 0 takes `x`; `x ^ (2 + 0)`).
#[test]
fn primitives_at_a_symbolically_zero_argument() {
    let cases = [
        ("grad (fun (x : Real) -> max x (grad (fun (y : Real) -> 3.0) x)) 1.5", "1.0"),
        ("grad (fun (x : Real) -> min x (grad (fun (y : Real) -> 3.0) x)) (-1.5)", "1.0"),
        ("grad (fun (x : Real) -> max (grad (fun (y : Real) -> 3.0) x) x) (-1.5)", "0.0"),
        ("grad (fun (x : Real) -> x * exp (grad (fun (y : Real) -> 3.0) x)) 2.5", "1.0"),
        ("grad (fun (x : Real) -> x / (1.0 + grad (fun (y : Real) -> 3.0) x)) 2.5", "1.0"),
    ];
    let failures: Vec<String> = frontend::with_big_stack(move || {
        cases
            .iter()
            .flat_map(|(main, want)| {
                ENGINES.iter().filter_map(move |(engine, run)| {
                    let got = run(&format!("def main = {main}\n")).map(|v| v.to_string());
                    (got.as_deref() != Ok(*want)).then(|| format!("{main} ({engine}): {got:?}, expected {want}"))
                })
            })
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

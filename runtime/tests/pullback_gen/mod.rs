//! A seeded generator of random well-typed first-order programs `f : Real * … * Real -> Real`
//! (shared by the pullback tests).
//!
//! The programs are smooth where they are evaluated: divisions, logarithms, square roots and
//! powers only see arguments bounded away from their singularities (`1 + e²`), exponentials see
//! bounded arguments, and the kinks of `if`, `max`, `min` and `abs` only look at input variables
//! compared with thresholds chosen at least 0.1 away from the evaluation point, so a finite
//! difference never crosses one. They use closures, tuples and their patterns, arrays with `map`,
//! `fold`, `zipWith`, `build`, `sum`, `dot`, indexing, `iterate`, `while`, nested `grad`, and nested pullbacks
//! whose dual is applied to a tangent.

#![allow(dead_code)]

/// SplitMix64: small, seedable, good enough for test generation.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// A generated program: `def f (x1, …, xn) = …` and the point to differentiate it at.
pub struct Program {
    pub source: String,
    pub inputs: usize,
    pub point: Vec<f64>,
}

pub struct Options {
    /// Allow `grad` inside the body (nested differentiation).
    pub nested: bool,
    pub depth: u32,
    /// Allow closures chosen at run time by `if`. The reducer differentiates them once, but not
    /// again: under an outer gradient their condition is symbolic and it is stuck. So they are
    /// never made inside the body's own nested `grad`, and callers that differentiate `f` twice
    /// turn them off.
    pub chosen_closures: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { nested: true, depth: 4, chosen_closures: true }
    }
}

/// `main` of `src`, evaluated by the reference interpreter.
pub fn eval(src: &str) -> Result<runtime::value::Value, String> {
    let (_, mono) = runtime::prepare(src, "main").map_err(|d| format!("{}: {d}", d.span.lo))?;
    runtime::interp::run(&mono).map_err(|d| d.to_string())
}

/// `main` of `src`, evaluated by the compiled engine; an error when the engine fell back to the
/// interpreter (its note).
#[allow(dead_code)]
pub fn eval_compiled(src: &str) -> Result<runtime::value::Value, String> {
    let (_, mono) = runtime::prepare(src, "main").map_err(|d| format!("{}: {d}", d.span.lo))?;
    let r = runtime::engine::run(&mono).map_err(|d| d.to_string())?;
    match r.note {
        Some(n) => Err(format!("not compiled: {n}")),
        None => Ok(r.value),
    }
}

/// Do two gradients agree within 1e-9 relative (NaN matching NaN)?
#[allow(dead_code)]
pub fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1e-300)
        })
}

/// The reals of a value, in order (NaN for anything else, so a comparison fails).
pub fn reals(v: &runtime::value::Value) -> Vec<f64> {
    use runtime::value::Value;
    match v {
        Value::Real(r) => vec![*r],
        Value::Array(vs) => vs.iter().flat_map(reals).collect(),
        Value::Tuple(vs) => vs.iter().flat_map(reals).collect(),
        Value::Star(r) => reals(r),
        _ => vec![f64::NAN],
    }
}

/// Prints a real literal the language reads back exactly (always with a `.` or an exponent).
pub fn lit(x: f64) -> String {
    let s = format!("{x:?}");
    if x.is_sign_negative() {
        format!("({s})")
    } else {
        s
    }
}

pub fn program(rng: &mut Rng, opts: &Options) -> Program {
    let inputs = 1 + rng.below(4) as usize;
    let point: Vec<f64> = (0..inputs).map(|_| ((rng.unit() * 3.0 - 1.5) * 8.0).round() / 8.0).collect();
    let mut g = Gen { rng, opts, point: point.clone(), fresh: 0, nesting: false };
    let env: Vec<String> = (1..=inputs).map(|i| format!("x{i}")).collect();
    // A body that never names an input has a zero partial there that tests nothing: resample
    // (a few times; then the missing inputs are added in as terms of their own).
    let mentions =
        |body: &str, x: &str| body.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '\'')).any(|w| w == x);
    let mut body = g.real(&env, opts.depth);
    for _ in 0..20 {
        if env.iter().all(|x| mentions(&body, x)) {
            break;
        }
        body = g.real(&env, opts.depth);
    }
    for x in &env {
        if !mentions(&body, x) {
            body = format!("({body} + sin ({x} * {}))", g.atom(&env, 1));
        }
    }
    let params = if inputs == 1 { "(x1 : Real)".to_string() } else { format!("({})", env.join(", ")) };
    let source = format!("def f {params} : Real = {body}\n");
    Program { source, inputs, point }
}

struct Gen<'r> {
    rng: &'r mut Rng,
    opts: &'r Options,
    point: Vec<f64>,
    fresh: u32,
    /// Generating the body of a nested `grad`.
    nesting: bool,
}

impl Gen<'_> {
    fn name(&mut self, base: &str) -> String {
        self.fresh += 1;
        format!("{base}{}", self.fresh)
    }

    fn constant(&mut self) -> String {
        let c = ((self.rng.unit() * 4.0 - 2.0) * 4.0).round() / 4.0;
        lit(c)
    }

    fn pick<'a>(&mut self, env: &'a [String]) -> &'a str {
        &env[self.rng.below(env.len() as u64) as usize]
    }

    /// An input variable and a threshold at least 0.1 away from its value at the point.
    fn input_threshold(&mut self) -> (String, f64) {
        let i = self.rng.below(self.point.len() as u64) as usize;
        let off = 0.1 + self.rng.unit() * 0.6;
        let c = if self.rng.chance(0.5) { self.point[i] + off } else { self.point[i] - off };
        (format!("x{}", i + 1), (c * 64.0).round() / 64.0)
    }

    /// An expression of type Real over the Real variables in `env`.
    fn real(&mut self, env: &[String], depth: u32) -> String {
        if depth == 0 || self.rng.chance(0.15) {
            return if self.rng.chance(0.8) { self.pick(env).to_string() } else { self.constant() };
        }
        let d = depth - 1;
        match self.rng.below(34) {
            27 => format!("tan (0.5 * sin {})", self.atom(env, d)),
            28 => {
                // A variable exponent (and base): ∂/∂y of x ^ y.
                let (a, b) = (self.real(env, d), self.atom(env, d));
                match self.rng.below(3) {
                    0 => format!("((1.0 + {a} * {a}) ^ (sin {b}))"),
                    1 => format!("(2.0 ^ (tanh {b}))"),
                    _ => format!("((0.5 + sigmoid {b}) ^ (1.5 + cos ({a})))"),
                }
            }
            29 => {
                let a = self.atom(env, d);
                if self.rng.chance(0.5) {
                    format!("neg {a}")
                } else {
                    format!("(- {a})")
                }
            }
            30 => {
                // abs of a term bounded away from 0, on either side.
                let a = self.atom(env, d);
                if self.rng.chance(0.5) {
                    format!("abs (1.5 + sin {a})")
                } else {
                    format!("abs (sin {a} - 1.5)")
                }
            }
            31 => {
                // max/min whose arguments never meet: each argument is taken somewhere.
                let (a, b) = (self.atom(env, d), self.atom(env, d));
                match self.rng.below(4) {
                    0 => format!("max (sin {a}) (2.0 + cos {b})"),
                    1 => format!("max (2.0 + cos {a}) (sin {b})"),
                    2 => format!("min (tanh {a}) (tanh {b} - 3.0)"),
                    _ => format!("min (tanh {a} - 3.0) (tanh {b})"),
                }
            }
            32 => {
                // Division by a negative denominator.
                let b = self.real(env, d);
                format!("({} / (-1.0 - {b} * {b}))", self.real(env, d))
            }
            33 => {
                let n = self.rng.below(5) as i64 - 2;
                format!("(toReal ({n}) * {})", self.atom(env, d))
            }
            0 | 1 => format!("({} + {})", self.real(env, d), self.real(env, d)),
            2 => format!("({} - {})", self.real(env, d), self.real(env, d)),
            3 | 4 => format!("({} * {})", self.real(env, d), self.real(env, d)),
            5 => {
                let b = self.real(env, d);
                format!("({} / (1.0 + {b} * {b}))", self.real(env, d))
            }
            6 => format!("sin {}", self.atom(env, d)),
            7 => format!("cos {}", self.atom(env, d)),
            8 => format!("tanh {}", self.atom(env, d)),
            9 => format!("sigmoid {}", self.atom(env, d)),
            10 => format!("exp (sin {})", self.atom(env, d)),
            11 => {
                let a = self.real(env, d);
                format!("log (1.0 + {a} * {a})")
            }
            12 => {
                let a = self.real(env, d);
                format!("sqrt (1.0 + {a} * {a})")
            }
            13 => {
                let a = self.real(env, d);
                if self.rng.chance(0.5) {
                    format!("((1.0 + {a} * {a}) ^ 1.5)")
                } else {
                    format!("({} ^ 2.0)", self.atom(env, d))
                }
            }
            14 => {
                let v = self.name("t");
                let a = self.real(env, d);
                let mut env2 = env.to_vec();
                env2.push(v.clone());
                format!("(let {v} = {a} in {})", self.real(&env2, d))
            }
            15 => {
                // A tuple through a pattern-matching closure.
                let (p, q) = (self.name("p"), self.name("q"));
                let mut env2 = env.to_vec();
                env2.push(p.clone());
                env2.push(q.clone());
                let body = self.real(&env2, d);
                format!("((fun ({p}, {q}) -> {body}) ({}, {}))", self.real(env, d), self.real(env, d))
            }
            16 => {
                // A local closure capturing the environment, applied twice (sometimes one of two,
                // chosen by `if`).
                let (h, u) = (self.name("h"), self.name("u"));
                let mut env2 = env.to_vec();
                env2.push(u.clone());
                let body = self.real(&env2, d);
                if self.opts.chosen_closures && !self.nesting && self.rng.chance(0.3) {
                    // A closure chosen at run time by `if` on an input (the branch taken).
                    let (x, c) = self.input_threshold();
                    let other = self.real(&env2, d);
                    return format!(
                        "(let {h} = if {x} > {} then (fun ({u} : Real) -> {body}) else (fun ({u} : Real) -> {other}) in {h} {} + {h} {})",
                        lit(c),
                        self.atom(env, d),
                        self.atom(env, d)
                    );
                }
                format!(
                    "(let {h} = fun ({u} : Real) -> {body} in {h} {} + {h} {})",
                    self.atom(env, d),
                    self.atom(env, d)
                )
            }
            17 => {
                let u = self.name("u");
                let mut env2 = env.to_vec();
                env2.push(u.clone());
                let body = self.real(&env2, d);
                format!("sum (map (fun {u} -> {body}) {})", self.array(env, d))
            }
            18 => {
                let (acc, u) = (self.name("acc"), self.name("u"));
                let mut env2 = env.to_vec();
                env2.push(acc.clone());
                env2.push(u.clone());
                let body = self.real(&env2, d.min(2));
                format!("fold (fun {acc} {u} -> 0.5 * {acc} + {body}) {} {}", self.atom(env, d), self.array(env, d))
            }
            19 => format!("dot {} {}", self.array(env, d), self.array(env, d)),
            20 => {
                let i = self.rng.below(3);
                format!("{}.[{i}]", self.array(env, d))
            }
            21 => {
                let i = self.name("i");
                format!("sum (build 3 (fun {i} -> toReal {i} * {}))", self.atom(env, d))
            }
            22 => {
                let u = self.name("u");
                let mut env2 = env.to_vec();
                env2.push(u.clone());
                let body = self.real(&env2, d.min(2));
                if self.rng.below(2) == 0 {
                    // The same contraction under `while`, counting to 2.
                    let p = self.name("p");
                    return format!(
                        "(while (fun ({p} : Int * Real) -> {p}.1 < 2) (fun ({p} : Int * Real) -> let {u} = {p}.2 in ({p}.1 + 1, 0.5 * {u} + 0.25 * tanh ({body}))) (0, {})).2",
                        self.atom(env, d)
                    );
                }
                format!("iterate 2 (fun {u} -> 0.5 * {u} + 0.25 * tanh ({body})) {}", self.atom(env, d))
            }
            23 => {
                let (p, q) = (self.name("p"), self.name("q"));
                format!("sum (zipWith (fun {p} {q} -> {p} * {q}) {} {})", self.array(env, d), self.array(env, d))
            }
            24 => {
                let (x, c) = self.input_threshold();
                format!("(if {x} > {} then {} else {})", lit(c), self.real(env, d), self.real(env, d))
            }
            25 => {
                let (x, c) = self.input_threshold();
                match self.rng.below(3) {
                    0 => format!("max {x} {}", lit(c)),
                    1 => format!("min {} {x}", lit(c)),
                    _ => format!("abs ({x} - {})", lit(c)),
                }
            }
            _ => {
                if !self.opts.nested || depth < 2 {
                    return self.real(env, d);
                }
                // Nested differentiation: the derivative of an inner function at a point. (Its
                // symbolic premises grow with the inner body, so that stays small.)
                let u = self.name("u");
                let mut env2 = env.to_vec();
                env2.push(u.clone());
                let outer = std::mem::replace(&mut self.nesting, true);
                let inner = self.real(&env2, d.min(1));
                self.nesting = outer;
                if self.rng.chance(0.5) {
                    return format!("grad (fun ({u} : Real) -> {inner}) {}", self.atom(env, d));
                }
                // A dual applied to a tangent: the inner derivative along a tangent that may
                // depend on the inputs too (the pairing is bilinear, rule lin).
                let (x, t) = (self.atom(env, d), self.atom(env, d));
                format!("((pullback (fun ({u} : Real) -> {inner}) (omega 1.0)) {x} {t})")
            }
        }
    }

    fn atom(&mut self, env: &[String], depth: u32) -> String {
        let e = self.real(env, depth);
        if e.starts_with('(') || !e.contains(' ') {
            e
        } else {
            format!("({e})")
        }
    }

    /// An `Array Real` of length 3.
    fn array(&mut self, env: &[String], depth: u32) -> String {
        let d = depth.saturating_sub(1);
        if self.rng.chance(0.7) {
            format!("[{}, {}, {}]", self.real(env, d), self.real(env, d), self.real(env, d))
        } else {
            let u = self.name("u");
            let mut env2 = env.to_vec();
            env2.push(u.clone());
            let body = self.real(&env2, d.min(2));
            format!("(map (fun {u} -> {body}) [{}, {}, {}])", self.real(env, d), self.real(env, d), self.real(env, d))
        }
    }
}

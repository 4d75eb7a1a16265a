//! Reverse mode in the reference interpreter: Mak & Ong's reduction strategy for pullbacks.
//!
//! Ordinary evaluation stays in the environment-based interpreter (it is the benchmark baseline).
//! A `pullback f w` evaluates to a term value `(Ω F)·W` (its function and 1-form read back as
//! closed terms); applying it to a point, evaluating a `dual`, and the builtins `star`, `unstar`,
//! `omega`, `jac`, `grad`, `vjp` and `jacobian` hand the closed term to the term reducer
//! (`reduce.rs`, `rules.rs`), which follows the paper step by step. Its normal form comes back as a
//! runtime value: a first-order dual `r*` as a dual vector, anything else as a term applied by the
//! reducer when called. `nabla trace` runs the reducer on `main` itself and prints every step.
//!
//! The semantics implemented, its extensions and the trace format are documented in
//! `docs/pullback-semantics.md`.

mod prim;
#[cfg(test)]
mod prim_terms;
pub mod print;
mod readback;
mod reduce;
mod rules;
mod term;
mod transpose;
mod vector;

use std::rc::Rc;

use anf::mono::MonoProgram;
use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::types::Type;
use frontend::{Diagnostic, Span};

use reduce::Reducer;
pub use reduce::{Config, DEFAULT_BUDGET};
use term::*;

use super::{EvalResult, Interp};
use crate::value::*;

/// `pullback f w` and `dual (fun v -> e) w` in the environment-based interpreter.
pub fn eval_node(it: &mut Interp, e: &E, env: &Env) -> EvalResult {
    match &e.kind {
        ExprKind::Pullback(f, w) => {
            let fv = it.eval(f, env)?;
            let wv = it.eval(w, env)?;
            let t = pullback(readback::readback(&fv, &f.ty), readback::readback(&wv, &w.ty));
            Ok(Value::Term(Expr::new(t.kind.clone(), e.span, t.ty.clone())))
        }
        ExprKind::Dual(p, s, w) => {
            let wv = it.eval(w, env)?;
            let closed = readback::close(&lam(p.clone(), s.clone()), env);
            let ExprKind::Lam(p2, s2) = &closed.kind else { return Err(Diagnostic::error(e.span, "internal: dual")) };
            let t =
                Expr::new(ExprKind::Dual(p2.clone(), s2.clone(), readback::readback(&wv, &w.ty)), e.span, e.ty.clone());
            reduce_to_value(it, &t, None, e.span)
        }
        _ => Err(Diagnostic::error(e.span, "internal: not a pullback or a dual map")),
    }
}

/// Applies a dual vector or a term value (a 1-form, a dual map, a function the reducer made).
pub fn apply(it: &mut Interp, f: &Value, arg: Value, span: Span) -> EvalResult {
    match f {
        // A dual vector applied to a tangent is the pairing ⟨r, v⟩ (`r*`).
        Value::Star(r) => pair(r, &arg, None, span),
        Value::Term(e) => {
            let x = readback::readback(&arg, &argument_of(&e.ty));
            reduce_to_value(it, &app(e, x.clone()), Some(&x), span)
        }
        _ => Err(Diagnostic::error(span, "internal: not a dual or a term")),
    }
}

/// The builtins of docs/language.md §5 that involve duals.
pub fn builtin(it: &mut Interp, b: Builtin, ty: &Type, args: Vec<Value>, span: Span) -> EvalResult {
    let tys = arg_types(ty, args.len());
    let back = |i: usize| readback::readback(&args[i], &tys[i]);
    match b {
        Builtin::Star => Ok(Value::Star(Rc::new(args[0].clone()))),
        // (Ω r) x = r*.
        Builtin::Omega => Ok(Value::Star(Rc::new(args[0].clone()))),
        Builtin::Unstar => match &args[0] {
            Value::Star(r) => Ok((**r).clone()),
            Value::Term(e) => {
                let r = reduce_term(it, &app(&builtin_var(Builtin::Unstar, ty), e.clone()), span)?;
                match vector::materialise_by_type(&r) {
                    Some(v) if vector::is_vector(&v) && !has_zero(&v) => to_value(it, &v, span),
                    _ => Err(Diagnostic::error(
                        span,
                        format!("unstar: the dual {} is not a vector of known shape", print::abbreviated(e, 200)),
                    )),
                }
            }
            v => Err(Diagnostic::error(span, format!("internal: unstar of {v}"))),
        },
        // (J f · s) x.
        Builtin::Jac => {
            let t = app(&jac(back(0), back(1)), back(2));
            reduce_to_value(it, &t, None, span)
        }
        Builtin::Grad => gradient(it, back(0), real(1.0), back(1), span),
        Builtin::Vjp => {
            // A cotangent must have the output's shape: say so at the `vjp`, with both lengths.
            let y = it.apply(&args[0], args[1].clone(), span)?;
            if let Some(m) = cotangent_mismatch(&y, &args[2]) {
                return Err(Diagnostic::error(span, m));
            }
            gradient(it, back(0), back(2), back(1), span)
        }
        Builtin::Jacobian => {
            let y = it.apply(&args[0], args[1].clone(), span)?;
            let Value::Array(ys) = &y else { return Err(Diagnostic::error(span, "internal: jacobian of a non-array")) };
            let shape = readback::readback(&y, &result_of(&tys[0]));
            let mut rows = Vec::with_capacity(ys.len());
            for p in 0..ys.len() {
                let e = vector::materialise(&vector::one_hot(ys.len(), p, &real(1.0), &shape.ty), &shape);
                rows.push(gradient(it, back(0), e, back(1), span)?);
            }
            Ok(Value::array(rows))
        }
        _ => Err(Diagnostic::error(span, format!("internal: `{}` is not a dual builtin", b.name()))),
    }
}

/// Why a cotangent `c` cannot pair with an output `y` (array lengths differ somewhere), if it
/// cannot: `vjp: the cotangent does not match the function's output: the output has length 2 but
/// the cotangent has length 1` (with the path to the array when it is inside tuples or arrays).
/// The first mismatch in order: an array's length, then its elements in order; a tuple's
/// components in order. Discrete components pair with anything.
pub fn cotangent_mismatch(y: &Value, c: &Value) -> Option<String> {
    use anf::ir::CotangentStep as S;
    fn go(y: &Value, c: &Value, path: &mut Vec<S>) -> Option<String> {
        let parts: Vec<(S, &Value, &Value)> = match (y, c) {
            (Value::Array(ys), Value::Array(cs)) => {
                if ys.len() != cs.len() {
                    return Some(anf::ir::cotangent_message(path, ys.len() as i64, cs.len() as i64));
                }
                ys.iter().zip(cs.iter()).enumerate().map(|(i, (a, b))| (S::Element(i as i64), a, b)).collect()
            }
            (Value::Tuple(ys), Value::Tuple(cs)) => {
                ys.iter().zip(cs.iter()).enumerate().map(|(i, (a, b))| (S::Component(i as i64 + 1), a, b)).collect()
            }
            _ => return None,
        };
        for (s, a, b) in parts {
            path.push(s);
            let r = go(a, b, path);
            path.pop();
            if r.is_some() {
                return r;
            }
        }
        None
    }
    go(y, c, &mut Vec::new())
}

/// How a term value prints (docs/language.md §7): a first-order dual as its vector and `*` (a zero
/// whose array length is not known shows as `0`), anything else as `<fun>`.
pub fn show_term(e: &E) -> String {
    if let Some(r) = reduce::star_vector(e) {
        return format!("{}*", show_vector(&r));
    }
    if is_zero(e) {
        if let Type::Dual(t) = &e.ty {
            if t.is_first_order() {
                return "0*".into();
            }
        }
    }
    "<fun>".into()
}

/// `nabla trace`: `main`'s reduction sequence, one step a line (see `docs/pullback-semantics.md`).
pub fn trace(program: &MonoProgram, config: &Config) -> Result<String, Diagnostic> {
    let mut it = Interp::new(program);
    let Some(main) = program.defs.last() else { return Ok(String::new()) };
    // The definitions `main` uses are values; the reducer unfolds them (δ) as it meets them.
    while it.globals.len() + 1 < program.defs.len() {
        let d = &program.defs[it.globals.len()];
        let v = it.eval(&d.body, &Env::default())?;
        it.globals.push(v);
    }
    let config = Config { trace: true, ..config.clone() };
    let mut red = Reducer::new(&mut it, main.body.span, &config);
    red.trace_start(&main.body);
    let result = red.eval(&main.body);
    let steps = red.traced_steps();
    let cut = red.trace_cut();
    let mut lines = red.take_trace();
    if cut {
        lines.push(format!(
            "-- cut after {steps} steps: the reduction goes on (--max-steps N shows more, --max-steps 0 all)"
        ));
        return Ok(lines.into_iter().map(|l| l + "\n").collect());
    }
    result?;
    lines.push(format!("-- {steps} steps"));
    Ok(lines.into_iter().map(|l| l + "\n").collect())
}

/// `main` reduced by the term reducer rather than the environment-based interpreter (the same
/// value; the tests check that the two agree on every example).
pub fn reduce_main(program: &MonoProgram) -> EvalResult {
    let mut it = Interp::new(program);
    let Some(main) = program.defs.last() else { return Ok(Value::Unit) };
    while it.globals.len() + 1 < program.defs.len() {
        let d = &program.defs[it.globals.len()];
        let v = it.eval(&d.body, &Env::default())?;
        it.globals.push(v);
    }
    let mut red = Reducer::new(&mut it, main.body.span, &Config::default());
    let r = red.eval(&main.body)?;
    readback::to_value(&mut red, &r)
}

/// `nabla anf`: each definition (or the one named) in A-normal form, in the paper's notation. A
/// definition that fits in 100 columns takes one line, `f = λ⟨x, y⟩. let z1 = …; z2 = … in z2`;
/// a longer one takes a line per binding.
pub fn anf_listing(program: &Program, only: Option<DefId>) -> Result<String, Diagnostic> {
    let mut next = program.next_local;
    let mut fresh = || fresh_local(&mut next);
    let mut out = String::new();
    for (i, d) in program.defs.iter().enumerate() {
        if only.is_some_and(|o| o.0 as usize != i) {
            continue;
        }
        let body = anf::anormal::anormalise_def(&d.body, &mut fresh);
        let mut inner = &body;
        let mut params = Vec::new();
        while let ExprKind::Lam(p, b) = &inner.kind {
            params.push(p.clone());
            inner = b;
        }
        anf::anormal::check_series(inner).map_err(|m| {
            Diagnostic::error(d.span, format!("internal: the A-normal form of `{}` is malformed: {m}", d.name))
        })?;
        let line = format!("{} = {}", d.name, print::term(&body));
        if line.chars().count() <= 100 {
            out.push_str(&line);
            out.push('\n');
            continue;
        }
        let lam_prefix = if params.is_empty() {
            String::new()
        } else {
            let ps: Vec<String> = params
                .iter()
                .map(|p| {
                    let t = pattern_term(p);
                    print::term(&t)
                })
                .collect();
            format!(" λ{}.", ps.join(" "))
        };
        out.push_str(&format!("{} ={}\n", d.name, lam_prefix));
        for l in print::series_lines(inner, 2) {
            out.push_str(&l);
            out.push('\n');
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------

fn reduce_term(it: &mut Interp, t: &E, span: Span) -> Result<E, Diagnostic> {
    let mut red = Reducer::new(it, span, &Config::default());
    red.eval(t)
}

/// Reduces `t` and returns its value; a dual on the space of `point` gets its symbolic zeros
/// filled in from the point's shape.
fn reduce_to_value(it: &mut Interp, t: &E, point: Option<&E>, span: Span) -> EvalResult {
    let mut red = Reducer::new(it, span, &Config::default());
    let r = red.eval(t)?;
    let r = match (reduce::star_vector(&r), point) {
        (Some(g), Some(x)) if g.ty == x.ty && vector::is_vector(x) => star(vector::materialise(&g, x)),
        _ => match (&r.kind, point) {
            (ExprKind::Zero, Some(x)) if r.ty == Type::dual(x.ty.clone()) && vector::is_vector(x) => {
                star(vector::zeros_like(x))
            }
            _ => r,
        },
    };
    readback::to_value(&mut red, &r)
}

/// `unstar (((Ω f)·(Ω c)) x)`, with the point's shape for its zeros.
fn gradient(it: &mut Interp, f: E, c: E, x: E, span: Span) -> EvalResult {
    let t = app(&pullback(f, omega(c)), x.clone());
    let mut red = Reducer::new(it, span, &Config::default());
    let r = red.eval(&t)?;
    let g = match (&r.kind, reduce::star_vector(&r)) {
        (ExprKind::Zero, _) => vector::zeros_like(&x),
        (_, Some(g)) => vector::materialise(&g, &x),
        _ => return Err(Diagnostic::error(span, stuck_message(&r))),
    };
    readback::to_value(&mut red, &g)
}

/// The error of a pullback the reducer could not take to a vector: what to do about it, with the
/// stuck term itself only under `NABLA_DEBUG` (it is the reducer's, not the program's).
pub(super) fn stuck_message(r: &E) -> String {
    let mut m = "the reference interpreter cannot differentiate this: its pullback reducer has no rule for a \
                 construct here (a function read out of an array at a computed index, for instance); \
                 `nabla trace` shows the reduction up to where it stops"
        .to_string();
    if std::env::var_os("NABLA_DEBUG").is_some() {
        m.push_str(&format!(" (stopped at {})", print::abbreviated(r, 300)));
    }
    m
}

fn to_value(it: &mut Interp, e: &E, span: Span) -> EvalResult {
    let mut red = Reducer::new(it, span, &Config::default());
    readback::to_value(&mut red, e)
}

fn has_zero(e: &E) -> bool {
    match &e.kind {
        ExprKind::Zero => true,
        ExprKind::Tuple(xs) | ExprKind::Array(xs) => xs.iter().any(has_zero),
        _ => false,
    }
}

fn builtin_var(b: Builtin, ty: &Type) -> E {
    term::builtin(b, ty.clone())
}

fn arg_types(t: &Type, n: usize) -> Vec<Type> {
    let mut out = Vec::new();
    let mut cur = t.clone();
    for _ in 0..n {
        out.push(argument_of(&cur));
        cur = result_of(&cur);
    }
    out
}

/// The pairing `r* v = ⟨r, v⟩` of a dual vector with a tangent `v` of type `ty` (`None`: not
/// known, every array taken as continuous), over the continuous components. The tangent must have
/// the vector's shape (the tangent space at the dual's point): the first array of another length,
/// in order (an array's length, then its elements in order; a tuple's components in order), is
/// the error `anf::ir::pairing_message` at `span`, as compiled code's `ctCheck'` reports it.
pub fn pair(r: &Value, v: &Value, ty: Option<&Type>, span: Span) -> EvalResult {
    fn go(r: &Value, v: &Value, ty: Option<&Type>, path: &mut Vec<anf::ir::CotangentStep>) -> Result<f64, String> {
        use anf::ir::CotangentStep as S;
        if ty.is_some_and(|t| t.is_discrete()) {
            return Ok(0.0);
        }
        Ok(match (r, v) {
            (Value::Real(a), Value::Real(b)) => a * b,
            (Value::Tuple(xs), Value::Tuple(ys)) => {
                let mut s = 0.0;
                for (i, (x, y)) in xs.iter().zip(ys.iter()).enumerate() {
                    let t = match ty {
                        Some(Type::Tuple(ts)) => ts.get(i),
                        _ => None,
                    };
                    path.push(S::Component(i as i64 + 1));
                    let p = go(x, y, t, path);
                    path.pop();
                    s += p?;
                }
                s
            }
            (Value::Array(xs), Value::Array(ys)) => {
                if xs.len() != ys.len() {
                    return Err(anf::ir::pairing_message(path, xs.len() as i64, ys.len() as i64));
                }
                let t = match ty {
                    Some(Type::Array(t)) => Some(&**t),
                    _ => None,
                };
                let mut s = 0.0;
                for (i, (x, y)) in xs.iter().zip(ys.iter()).enumerate() {
                    path.push(S::Element(i as i64));
                    let p = go(x, y, t, path);
                    path.pop();
                    s += p?;
                }
                s
            }
            _ => 0.0,
        })
    }
    go(r, v, ty, &mut Vec::new()).map(Value::Real).map_err(|m| Diagnostic::error(span, m))
}

fn show_vector(e: &E) -> String {
    match &e.kind {
        ExprKind::Zero => "0".into(),
        ExprKind::Lit(Lit::Real(r)) => format!("{r:?}"),
        ExprKind::Lit(Lit::Int(n)) => n.to_string(),
        ExprKind::Lit(Lit::Bool(b)) => b.to_string(),
        ExprKind::Lit(Lit::Unit) => "()".into(),
        ExprKind::Tuple(xs) => format!("({})", xs.iter().map(show_vector).collect::<Vec<_>>().join(", ")),
        ExprKind::Array(xs) => format!("[{}]", xs.iter().map(show_vector).collect::<Vec<_>>().join(", ")),
        _ => "…".into(),
    }
}

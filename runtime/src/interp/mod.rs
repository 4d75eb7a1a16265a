//! The reference interpreter: call-by-value evaluation of monomorphised core terms.
//!
//! It is written for clarity and fidelity, never for speed: it is the oracle every compiled result
//! is checked against. Every runtime failure (index out of bounds, Int division by zero, a bad
//! array size, ...) is an `EvalError` with the span of the term that failed, never a panic.

mod builtins;
mod groups;
#[cfg(test)]
mod groups_model;
pub mod incremental;
pub mod pullback;

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};

use anf::mono::MonoProgram;
use frontend::syntax::*;
use frontend::types::Type;
use frontend::{Diagnostic, Span};

pub use groups::{group_inverse, group_op, group_op_into, group_scale, group_zero};

use crate::value::meter;
use crate::value::*;

/// A runtime error with the span of the term whose evaluation failed.
pub type EvalError = Diagnostic;
pub type EvalResult<T = Value> = Result<T, EvalError>;

/// How deep evaluation may nest (calls inside calls) before it is reported as an error.
pub const MAX_EVAL_DEPTH: u32 = 100_000;

/// Arrays longer than this are refused (both engines share the limit).
pub const MAX_ARRAY_LEN: i64 = 1 << 28;

/// Set by an interrupt (Ctrl-C in `nabla repl`) to stop the evaluation in progress: the
/// interpreter polls it at every closure call and every reduction step, and fails with
/// "interrupted". Whoever sets it clears it before the next evaluation.
pub static INTERRUPT: AtomicBool = AtomicBool::new(false);

/// The error an interrupted evaluation fails with, if [`INTERRUPT`] is set.
pub fn check_interrupt(span: Span) -> EvalResult<()> {
    if INTERRUPT.load(Ordering::Relaxed) {
        return Err(Diagnostic::error(span, "interrupted"));
    }
    Ok(())
}

/// Fails when the values alive take more than the memory limit (`value::meter`): "out of
/// memory", located at the term that allocated last, instead of an abort when the machine runs out.
pub fn check_memory(span: Span) -> EvalResult<()> {
    reserve_memory(0, span)
}

/// Fails when `bytes` more would take the values alive over the memory limit.
pub fn reserve_memory(bytes: usize, span: Span) -> EvalResult<()> {
    let (live, limit) = (meter::live(), meter::limit());
    if live.saturating_add(bytes) > limit {
        return Err(Diagnostic::error(
            span,
            format!(
                "out of memory: the interpreter's values would take more than {} (--max-memory)",
                show_bytes(limit)
            ),
        ));
    }
    Ok(())
}

/// `4 GiB`, `512 MiB`, `1000 bytes`.
pub fn show_bytes(n: usize) -> String {
    for (unit, name) in [(1usize << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
        if n >= unit && n % unit == 0 {
            return format!("{} {name}", n / unit);
        }
    }
    format!("{n} bytes")
}

/// Evaluates the root definition of a monomorphised program. The memory meter counts from zero.
pub fn run(program: &MonoProgram) -> EvalResult {
    meter::reset();
    let mut it = Interp::new(program);
    it.eval_globals()?;
    Ok(it.globals.last().cloned().unwrap_or(Value::Unit))
}

/// The interpreter state: the program and the values of its definitions so far.
pub struct Interp<'p> {
    pub program: &'p MonoProgram,
    pub globals: Vec<Value>,
    depth: u32,
    /// ILC caches (derived code) and fresh binders (`incremental`).
    ilc: incremental::State,
}

impl<'p> Interp<'p> {
    pub fn new(program: &'p MonoProgram) -> Interp<'p> {
        Interp { program, globals: Vec::new(), depth: 0, ilc: incremental::State::default() }
    }

    /// Evaluates every definition in order (each is a value computed once).
    pub fn eval_globals(&mut self) -> EvalResult<()> {
        while self.globals.len() < self.program.defs.len() {
            let d = &self.program.defs[self.globals.len()];
            let v = self.eval(&d.body, &Env::default())?;
            self.globals.push(v);
        }
        Ok(())
    }

    pub fn eval(&mut self, e: &E, env: &Env) -> EvalResult {
        self.depth += 1;
        if self.depth > MAX_EVAL_DEPTH {
            self.depth -= 1;
            return Err(Diagnostic::error(e.span, "evaluation nested too deeply"));
        }
        let r = self.eval_inner(e, env);
        self.depth -= 1;
        r
    }

    fn eval_inner(&mut self, e: &E, env: &Env) -> EvalResult {
        Ok(match &e.kind {
            ExprKind::Var(n, r) => {
                match r {
                    VarRef::Local(id) => env
                        .get(*id)
                        .cloned()
                        .ok_or_else(|| Diagnostic::error(e.span, format!("internal: unbound variable `{n}`")))?,
                    VarRef::Global(d) => self.globals.get(d.0 as usize).cloned().ok_or_else(|| {
                        Diagnostic::error(e.span, format!("internal: `{n}` used before it is defined"))
                    })?,
                    VarRef::Builtin(b) => builtins::constant(*b)
                        .unwrap_or_else(|| Value::Partial(*b, Rc::new(e.ty.clone()), Rc::from([]))),
                }
            }
            ExprKind::Lit(l) => match l {
                Lit::Int(n) => Value::Int(*n),
                Lit::Real(r) => Value::Real(*r),
                Lit::Bool(b) => Value::Bool(*b),
                Lit::Unit => Value::Unit,
            },
            ExprKind::Lam(p, b) => {
                check_memory(e.span)?;
                Value::closure(Closure { param: p.clone(), body: b.clone(), env: env.clone() })
            }
            ExprKind::App(f, a) => {
                let fv = self.eval(f, env)?;
                let av = self.eval(a, env)?;
                match &fv {
                    // A dual vector applied to a tangent of type `a.ty`: the pairing (`r*`).
                    Value::Star(r) => pullback::pair(r, &av, Some(&a.ty), e.span)?,
                    _ => self.apply(&fv, av, e.span)?,
                }
            }
            ExprKind::Let(p, rhs, body) => {
                let v = self.eval(rhs, env)?;
                let env2 = bind_pattern(env, p, v);
                self.eval(body, &env2)?
            }
            ExprKind::If(c, a, b) => match self.eval(c, env)? {
                Value::Bool(true) => self.eval(a, env)?,
                Value::Bool(false) => self.eval(b, env)?,
                v => return Err(internal(c.span, "a Bool", &v)),
            },
            ExprKind::Bin(op, a, b) => {
                // `&&` and `||` short-circuit.
                if matches!(op, BinOp::And | BinOp::Or) {
                    let av = self.eval(a, env)?;
                    return match (op, av) {
                        (BinOp::And, Value::Bool(false)) => Ok(Value::Bool(false)),
                        (BinOp::Or, Value::Bool(true)) => Ok(Value::Bool(true)),
                        (_, Value::Bool(_)) => self.eval(b, env),
                        (_, v) => Err(internal(a.span, "a Bool", &v)),
                    };
                }
                let av = self.eval(a, env)?;
                let bv = self.eval(b, env)?;
                self.binop(*op, av, bv, &a.ty, e.span)?
            }
            ExprKind::Neg(a) => match self.eval(a, env)? {
                Value::Int(n) => Value::Int(n.wrapping_neg()),
                Value::Real(r) => Value::Real(-r),
                v => return Err(internal(a.span, "a number", &v)),
            },
            ExprKind::Not(a) => match self.eval(a, env)? {
                Value::Bool(b) => Value::Bool(!b),
                v => return Err(internal(a.span, "a Bool", &v)),
            },
            ExprKind::Tuple(xs) => {
                let mut vs = Vec::with_capacity(xs.len());
                for x in xs {
                    vs.push(self.eval(x, env)?);
                }
                check_memory(e.span)?;
                Value::tuple(vs)
            }
            ExprKind::Proj(a, i) => match self.eval(a, env)? {
                Value::Tuple(ref vs) if *i < vs.len() => vs[*i].clone(),
                v => return Err(internal(a.span, "a tuple", &v)),
            },
            ExprKind::Index(a, i) => {
                let av = self.eval(a, env)?;
                let iv = self.eval(i, env)?;
                builtins::index(&av, &iv, e.span)?
            }
            ExprKind::Array(xs) => {
                let mut vs = Vec::with_capacity(xs.len());
                for x in xs {
                    vs.push(self.eval(x, env)?);
                }
                check_memory(e.span)?;
                Value::array(vs)
            }
            ExprKind::Bag(xs) => {
                let mut bag = Bag::default();
                for (x, n) in xs {
                    let v = self.eval(x, env)?;
                    let k = v.to_key().ok_or_else(|| internal(x.span, "an equality-typed value", &v))?;
                    bag.insert(k, *n).map_err(|o| o.at(e.span))?;
                }
                Value::bag(bag)
            }
            ExprKind::Map(xs) => {
                // Every key and value is evaluated, left to right, before the map is built (as in
                // the literal's A-normal form, `map{z1 -> z2, …}`); then a repeated key is an error.
                let mut entries = Vec::with_capacity(xs.len());
                for (k, v) in xs {
                    entries.push((self.eval(k, env)?, self.eval(v, env)?));
                }
                let mut m = MapV::default();
                for ((kv, vv), (k, _)) in entries.into_iter().zip(xs.iter()) {
                    let key = kv.to_key().ok_or_else(|| internal(k.span, "an equality-typed value", &kv))?;
                    if m.entries.insert(key, vv).is_some() {
                        return Err(Diagnostic::error(k.span, format!("duplicate key {kv} in map literal")));
                    }
                }
                Value::map(m)
            }
            ExprKind::Pullback(..) | ExprKind::Dual(..) => pullback::eval_node(self, e, env)?,
            ExprKind::Derive(a) => incremental::eval_derive(self, a, e.span)?,
            ExprKind::Ann(a, _) => self.eval(a, env)?,
            ExprKind::Zero | ExprKind::Sum(..) => {
                return Err(Diagnostic::error(e.span, "internal: a semantic term reached the evaluator"))
            }
        })
    }

    /// Applies a function value to one argument.
    pub fn apply(&mut self, f: &Value, arg: Value, span: Span) -> EvalResult {
        match f {
            Value::Closure(c) => {
                check_interrupt(span)?;
                check_memory(span)?;
                let env = bind_pattern(&c.env, &c.param, arg);
                let body = c.body.clone();
                self.eval(&body, &env)
            }
            Value::Partial(b, ty, args) => {
                let mut all: Vec<Value> = args.to_vec();
                all.push(arg);
                if all.len() == b.arity() {
                    builtins::call(self, *b, ty, all, span)
                } else {
                    Ok(Value::Partial(*b, ty.clone(), all.into()))
                }
            }
            Value::Star(_) | Value::Term(_) => pullback::apply(self, f, arg, span),
            v => Err(internal(span, "a function", v)),
        }
    }

    /// Applies a function value to several arguments in turn.
    pub fn apply_n(&mut self, f: &Value, args: Vec<Value>, span: Span) -> EvalResult {
        let mut cur = f.clone();
        for a in args {
            cur = self.apply(&cur, a, span)?;
        }
        Ok(cur)
    }

    fn binop(&mut self, op: BinOp, a: Value, b: Value, a_ty: &Type, span: Span) -> EvalResult {
        use Value::*;
        Ok(match (op, &a, &b) {
            (BinOp::Add, Int(x), Int(y)) => Int(x.wrapping_add(*y)),
            (BinOp::Sub, Int(x), Int(y)) => Int(x.wrapping_sub(*y)),
            (BinOp::Mul, Int(x), Int(y)) => Int(x.wrapping_mul(*y)),
            (BinOp::Div, Int(x), Int(y)) => {
                if *y == 0 {
                    return Err(Diagnostic::error(span, "division by zero"));
                }
                Int(x.wrapping_div(*y))
            }
            // Truncated like `/` (the sign of the dividend); `i64::MIN % -1` is 0.
            (BinOp::Rem, Int(x), Int(y)) => {
                if *y == 0 {
                    return Err(Diagnostic::error(span, "division by zero"));
                }
                Int(x.wrapping_rem(*y))
            }
            (BinOp::Add, Real(x), Real(y)) => Real(x + y),
            (BinOp::Sub, Real(x), Real(y)) => Real(x - y),
            (BinOp::Mul, Real(x), Real(y)) => Real(x * y),
            (BinOp::Div, Real(x), Real(y)) => Real(x / y),
            (BinOp::Pow, Real(x), Real(y)) => Real(x.powf(*y)),
            (BinOp::Lt, Int(x), Int(y)) => Bool(x < y),
            (BinOp::Le, Int(x), Int(y)) => Bool(x <= y),
            (BinOp::Gt, Int(x), Int(y)) => Bool(x > y),
            (BinOp::Ge, Int(x), Int(y)) => Bool(x >= y),
            (BinOp::Lt, Real(x), Real(y)) => Bool(x < y),
            (BinOp::Le, Real(x), Real(y)) => Bool(x <= y),
            (BinOp::Gt, Real(x), Real(y)) => Bool(x > y),
            (BinOp::Ge, Real(x), Real(y)) => Bool(x >= y),
            (BinOp::Eq, _, _) => Bool(a.equals(&b)),
            (BinOp::Ne, _, _) => Bool(!a.equals(&b)),
            (BinOp::Oplus, _, _) => return self.oplus(&a, &b, a_ty, span),
            (BinOp::Ominus, _, _) => return self.ominus(&a, &b, a_ty, span),
            _ => return Err(Diagnostic::error(span, format!("internal: `{}` applied to {a} and {b}", op.ascii()))),
        })
    }

    /// `a ⊕ da` (ILC Def. 2.7) for base and tuple types.
    pub fn oplus(&mut self, a: &Value, da: &Value, ty: &Type, span: Span) -> EvalResult {
        match (ty, a, da) {
            (Type::Tuple(ts), Value::Tuple(xs), Value::Tuple(dxs)) => {
                let mut out = Vec::with_capacity(xs.len());
                for ((t, x), dx) in ts.iter().zip(xs.iter()).zip(dxs.iter()) {
                    out.push(self.oplus(x, dx, t, span)?);
                }
                Ok(Value::tuple(out))
            }
            (_, _, Value::Change(c)) => match &**c {
                // a ⊕ replace v = v
                Change::Replace(v) => Ok(v.clone()),
                // a ⊕ gchange g dv = a ·g dv
                Change::GChange(g, dv) => group_op(self, g, a, dv, span),
            },
            (Type::Fun(..), _, _) => incremental::oplus_fun(self, a, da, ty, span),
            _ => Err(Diagnostic::error(span, format!("internal: `<+>` applied to {a} and {da}"))),
        }
    }

    /// `b ⊖ a`: a group change where the type has a canonical group, else `replace b`.
    pub fn ominus(&mut self, b: &Value, a: &Value, ty: &Type, span: Span) -> EvalResult {
        match (ty, b, a) {
            (Type::Tuple(ts), Value::Tuple(bs), Value::Tuple(xs)) => {
                let mut out = Vec::with_capacity(xs.len());
                for ((t, y), x) in ts.iter().zip(bs.iter()).zip(xs.iter()) {
                    out.push(self.ominus(y, x, t, span)?);
                }
                Ok(Value::tuple(out))
            }
            (Type::Fun(..), _, _) => incremental::ominus_fun(self, b, a, ty, span),
            _ => {
                let g = incremental::canonical_group(ty);
                Ok(Value::Change(Rc::new(match g {
                    Some(g) => {
                        let g = Rc::new(g);
                        let inv = group_inverse(self, &g, a, span)?;
                        let d = group_op(self, &g, b, &inv, span)?;
                        Change::GChange(g, d)
                    }
                    None => Change::Replace(b.clone()),
                })))
            }
        }
    }
}

/// Binds a pattern to a value (types guarantee the shapes match).
pub fn bind_pattern(env: &Env, p: &Pat, v: Value) -> Env {
    match (&p.kind, v) {
        (PatKind::Var(_, id), v) => env.bind(*id, v),
        (PatKind::Tuple(ps), Value::Tuple(ref vs)) => {
            let mut e = env.clone();
            for (q, x) in ps.iter().zip(vs.iter()) {
                e = bind_pattern(&e, q, x.clone());
            }
            e
        }
        _ => env.clone(),
    }
}

/// An "impossible" shape: a type-correct program never gets here.
fn internal(span: Span, wanted: &str, got: &Value) -> EvalError {
    Diagnostic::error(span, format!("internal: expected {wanted}, found {got}"))
}

//! Function symbols — the paper's F, the "easily differentiable" functions — and their Jacobians.
//!
//! F holds the Real primitives (`+ - * / ^ neg sin cos tan exp log sqrt tanh sigmoid abs max min
//! toReal floor round`), the first-order array primitives (`sum`, `dot`, `.[i]`, `len`), and every definition
//! of first-order type `s -> t` (so `g`, `mult` and `pow2` of Example 3.1 are symbols, as in the
//! paper). Each symbol has a value (reduction 3), a Jacobian along a tangent (reduction 4), a
//! transposed Jacobian (reduction 5), and — for nested differentiation, which differentiates
//! `(J f · s) x` in `x` — its derivative written as a term.
//!
//! Conventions (docs/language.md §5): abs′(0) = 0; `max`/`min` send a tie to their first argument;
//! Int arguments and results have the zero tangent space; a symbolic `0` tangent contributes
//! nothing (so `x ^ 2.0` at a negative `x` does not meet the NaN of ∂(x^y)/∂y).

use std::rc::Rc;

use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::types::Type;

use super::reduce::{Reducer, R};
use super::term::*;
use super::vector;

/// A function symbol `f ∈ F`, or (as an extension) any other function value, whose Jacobian the
/// reduction strategy itself computes with a nested pullback.
#[derive(Clone, Debug)]
pub enum Sym {
    /// A primitive taking its arity's arguments; the type is its monomorphic type.
    Prim(Builtin, Type),
    /// A binary operator at operand type `Type`.
    Op(BinOp, Type),
    /// `a.[i]` at array type `Type`.
    Index(Type),
    /// A definition of first-order type.
    Global(E),
    /// Any other function value.
    Fun(E),
}

/// Is this builtin a primitive with a Jacobian (a member of F)?
pub fn is_prim(b: Builtin) -> bool {
    use Builtin as B;
    // The Real primitives of the shared rule table, and the array reductions and conversions.
    adjoint::rules::is_real_prim(adjoint::rules::Prim::Builtin(b)) || matches!(b, B::ToReal | B::Sum | B::Dot | B::Len)
}

fn arg_types(t: &Type, n: usize) -> Vec<Type> {
    let mut out = Vec::new();
    let mut cur = t.clone();
    for _ in 0..n {
        match cur {
            Type::Fun(a, b) => {
                out.push((*a).clone());
                cur = (*b).clone();
            }
            _ => out.push(Type::Unit),
        }
    }
    out
}

fn final_result(t: &Type, n: usize) -> Type {
    let mut cur = t.clone();
    for _ in 0..n {
        cur = result_of(&cur);
    }
    cur
}

impl Sym {
    /// How many arguments the symbol takes (an n-ary symbol is applied to an n-tuple in `J f`).
    pub fn arity(&self) -> usize {
        match self {
            Sym::Prim(b, _) => b.arity(),
            Sym::Op(..) | Sym::Index(_) => 2,
            Sym::Global(_) | Sym::Fun(_) => 1,
        }
    }

    pub fn arg_types(&self) -> Vec<Type> {
        match self {
            Sym::Prim(b, t) => arg_types(t, b.arity()),
            Sym::Op(_, t) => vec![t.clone(), t.clone()],
            Sym::Index(t) => vec![t.clone(), Type::Int],
            Sym::Global(f) | Sym::Fun(f) => vec![argument_of(&f.ty)],
        }
    }

    pub fn result_type(&self) -> Type {
        match self {
            Sym::Prim(b, t) => final_result(t, b.arity()),
            Sym::Op(op, t) => match op {
                BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem | BinOp::Pow => t.clone(),
                _ => Type::Bool,
            },
            Sym::Index(t) => match t {
                Type::Array(e) => (**e).clone(),
                _ => Type::Unit,
            },
            Sym::Global(f) | Sym::Fun(f) => result_of(&f.ty),
        }
    }

    /// The symbol as a term, for `J f · s`: an n-ary symbol becomes a function of an n-tuple,
    /// `λ⟨a, b⟩. a * b`, which the printer shows as `(*)`.
    pub fn term(&self) -> E {
        let tys = self.arg_types();
        let res = self.result_type();
        let uncurried = |body: &dyn Fn(&[E]) -> ExprKind| {
            let vars: Vec<(Rc<Pat>, E)> =
                tys.iter().enumerate().map(|(i, t)| fresh_var(["a", "b", "c", "d"][i.min(3)], t)).collect();
            let pat = Pat {
                kind: PatKind::Tuple(vars.iter().map(|(p, _)| (**p).clone()).collect()),
                span: frontend::Span::SYNTHETIC,
                ty: Type::tuple(tys.clone()),
                ann: None,
            };
            let args: Vec<E> = vars.iter().map(|(_, v)| v.clone()).collect();
            lam(Rc::new(pat), mk(body(&args), res.clone()))
        };
        match self {
            Sym::Prim(b, t) if b.arity() == 1 => builtin(*b, t.clone()),
            Sym::Prim(b, t) => {
                let (b, t) = (*b, t.clone());
                uncurried(&move |a: &[E]| {
                    let f = builtin(b, t.clone());
                    app_n(&f, a.to_vec()).kind.clone()
                })
            }
            Sym::Op(op, _) => {
                let op = *op;
                uncurried(&move |a: &[E]| ExprKind::Bin(op, a[0].clone(), a[1].clone()))
            }
            Sym::Index(_) => uncurried(&|a: &[E]| ExprKind::Index(a[0].clone(), a[1].clone())),
            Sym::Global(f) | Sym::Fun(f) => f.clone(),
        }
    }

    /// Reads the `f` of `J f · s` back (the inverse of `term`).
    pub fn from_term(f: &E, is_global_symbol: &dyn Fn(DefId) -> bool) -> Sym {
        match &f.kind {
            ExprKind::Var(_, VarRef::Builtin(b)) if is_prim(*b) && b.arity() == 1 => Sym::Prim(*b, f.ty.clone()),
            ExprKind::Var(_, VarRef::Global(d)) if is_global_symbol(*d) => Sym::Global(f.clone()),
            ExprKind::Lam(p, body) => {
                // `λ⟨a, b⟩. let z = a * b in z` is the same symbol as `λ⟨a, b⟩. a * b`.
                let body = match &body.kind {
                    ExprKind::Let(q, rhs, rest) if matches!((&q.kind, &rest.kind), (PatKind::Var(_, i), ExprKind::Var(_, VarRef::Local(j))) if i == j) => {
                        rhs
                    }
                    _ => body,
                };
                if let PatKind::Tuple(ps) = &p.kind {
                    let ids: Vec<Option<LocalId>> = ps
                        .iter()
                        .map(|q| match &q.kind {
                            PatKind::Var(_, id) => Some(*id),
                            _ => None,
                        })
                        .collect();
                    let is =
                        |e: &E, k: usize| matches!(&e.kind, ExprKind::Var(_, VarRef::Local(id)) if Some(*id) == ids[k]);
                    match &body.kind {
                        ExprKind::Bin(op, a, b) if ids.len() == 2 && is(a, 0) && is(b, 1) => {
                            return Sym::Op(*op, a.ty.clone())
                        }
                        ExprKind::Index(a, b) if ids.len() == 2 && is(a, 0) && is(b, 1) => {
                            return Sym::Index(a.ty.clone())
                        }
                        ExprKind::App(..) => {
                            let (h, args) = spine(body);
                            if let Some(b) = builtin_head(&h) {
                                if is_prim(b)
                                    && args.len() == ids.len()
                                    && b.arity() == args.len()
                                    && args.iter().enumerate().all(|(k, a)| is(a, k))
                                {
                                    return Sym::Prim(b, h.ty.clone());
                                }
                            }
                        }
                        _ => {}
                    }
                }
                Sym::Fun(f.clone())
            }
            _ => Sym::Fun(f.clone()),
        }
    }

    /// The symbol's name for the printer.
    pub fn name(&self) -> Option<String> {
        match self {
            Sym::Prim(b, _) => Some(b.name().to_string()),
            Sym::Op(op, _) => Some(format!("({})", op.ascii())),
            Sym::Index(_) => Some("(.[])".into()),
            Sym::Global(f) => match &f.kind {
                ExprKind::Var(n, _) => Some(n.to_string()),
                _ => None,
            },
            Sym::Fun(_) => None,
        }
    }

    /// Splits the argument of an n-ary symbol (an n-tuple) into its components.
    fn split(&self, x: &E) -> Vec<E> {
        let n = self.arity();
        if n == 1 {
            return vec![x.clone()];
        }
        match &x.kind {
            ExprKind::Tuple(xs) if xs.len() == n => xs.clone(),
            ExprKind::Zero => self.arg_types().iter().map(zero).collect(),
            _ => (0..n).map(|i| proj(x, i)).collect(),
        }
    }

    fn join(&self, xs: Vec<E>) -> E {
        if xs.len() == 1 {
            xs.into_iter().next().expect("one")
        } else {
            tuple(xs)
        }
    }

    /// Reduction 3, `f(r) → f(r)`: the value at literal arguments.
    pub fn apply(&self, red: &mut Reducer, args: &[E]) -> R<E> {
        let span = red.span();
        match self {
            Sym::Prim(b, t) => {
                let vals: Vec<crate::value::Value> =
                    args.iter().map(|a| super::readback::to_value(red, &filled(a))).collect::<R<_>>()?;
                let v = crate::interp::builtins::call(red.it, *b, t, vals, span)?;
                Ok(super::readback::readback(&v, &self.result_type()))
            }
            Sym::Op(op, t) => {
                let a = super::readback::to_value(red, &filled(&args[0]))?;
                let b = super::readback::to_value(red, &filled(&args[1]))?;
                let v = red.it.binop(*op, a, b, t, span)?;
                Ok(super::readback::readback(&v, &self.result_type()))
            }
            Sym::Index(_) => {
                let a = super::readback::to_value(red, &filled(&args[0]))?;
                let i = super::readback::to_value(red, &args[1])?;
                let v = crate::interp::builtins::index(&a, &i, span)?;
                Ok(super::readback::readback(&v, &self.result_type()))
            }
            Sym::Global(f) | Sym::Fun(f) => {
                let fv = match &f.kind {
                    ExprKind::Var(_, VarRef::Global(d)) => red.it.globals.get(d.0 as usize).cloned(),
                    _ => None,
                };
                let fv = match fv {
                    Some(v) => v,
                    None => super::readback::to_value(red, f)?,
                };
                let a = super::readback::to_value(red, &filled(&args[0]))?;
                let v = red.it.apply(&fv, a, span)?;
                Ok(super::readback::readback(&v, &self.result_type()))
            }
        }
    }

    /// Reduction 4, `(J f · r) r′ → J(f)(r′)(r)`: the Jacobian at literal `point` along `tangent`.
    pub fn jvp(&self, red: &mut Reducer, point: &E, tangent: &E) -> R<E> {
        let res = self.result_type();
        if is_zero(tangent) || res.is_discrete() {
            return Ok(zero(&res));
        }
        let ps = self.split(point);
        let ts = self.split(tangent);
        if let Some(parts) = self.partials(&ps) {
            let mut acc = 0.0;
            let mut any = false;
            for (d, t) in parts.iter().zip(&ts) {
                if let (Some(d), ExprKind::Lit(Lit::Real(t))) = (d, &t.kind) {
                    acc += d * t;
                    any = true;
                }
            }
            return Ok(if any { real(acc) } else { zero(&res) });
        }
        match self {
            Sym::Prim(Builtin::Sum, _) => match &ts[0].kind {
                ExprKind::Array(xs) => {
                    let mut s = 0.0;
                    for x in xs {
                        s += vector::inner(x, &real(1.0)).map_err(|m| red.error(&m))?;
                    }
                    Ok(real(s))
                }
                _ => Ok(zero(&res)),
            },
            Sym::Prim(Builtin::Dot, _) => {
                let a = vector::inner(&ts[0], &ps[1]).map_err(|m| red.error(&m))?;
                let b = vector::inner(&ps[0], &ts[1]).map_err(|m| red.error(&m))?;
                Ok(real(a + b))
            }
            Sym::Index(_) => match (&ts[0].kind, &ps[1].kind) {
                (ExprKind::Array(xs), ExprKind::Lit(Lit::Int(i))) => {
                    Ok(xs.get(*i as usize).cloned().unwrap_or_else(|| zero(&res)))
                }
                _ => Ok(zero(&res)),
            },
            Sym::Global(f) | Sym::Fun(f) => {
                // J(f)(x)(t), component by component: ⟨e_p, J t⟩ = ⟨Jᵀ e_p, t⟩ (one pullback each).
                let y = self.apply(red, &[point.clone()])?;
                let mut parts = Vec::new();
                let mut p = 0;
                while let Some(e) = vector::basis(&y, p) {
                    let row = red.vjp_of(f, point, &e)?;
                    parts.push(vector::inner(&row, tangent).map_err(|m| red.error(&m))?);
                    p += 1;
                }
                Ok(fill(&y, &parts))
            }
            _ => Ok(zero(&res)),
        }
    }

    /// Reduction 5's `(J(f)(r))ᵀ r′`: the cotangent of each argument. The cotangent may be a term
    /// (a coefficient with free variables, inside a premise); `None` when the point is not concrete
    /// enough for this symbol.
    pub fn vjp(&self, red: &mut Reducer, point: &E, cot: &E) -> R<Option<E>> {
        let ps = self.split(point);
        let tys = self.arg_types();
        let res = self.result_type();
        if is_zero(cot) || res.is_discrete() {
            return Ok(Some(self.join(tys.iter().map(zero).collect())));
        }
        if let Some(parts) = self.partials(&ps) {
            let cots = parts
                .iter()
                .zip(&tys)
                .map(|(d, t)| match d {
                    Some(d) if !t.is_discrete() => vector::times(cot, &real(*d)),
                    _ => Some(zero(t)),
                })
                .collect::<Option<Vec<_>>>();
            return Ok(cots.map(|c| self.join(c)));
        }
        Ok(match self {
            Sym::Prim(Builtin::Sum, t) => match &ps[0].kind {
                // sum: the cotangent of every element is c.
                ExprKind::Array(xs) => {
                    Some(mk(ExprKind::Array(xs.iter().map(|_| cot.clone()).collect()), arg_types(t, 1)[0].clone()))
                }
                _ => None,
            },
            // dot a b: (c·b, c·a).
            Sym::Prim(Builtin::Dot, _) => match (vector::times(&ps[1], cot), vector::times(&ps[0], cot)) {
                (Some(a), Some(b)) => Some(tuple(vec![a, b])),
                _ => None,
            },
            // a.[i]: c at i, 0 elsewhere; nothing for the discrete index.
            Sym::Index(t) => match (&ps[0].kind, &ps[1].kind) {
                (ExprKind::Array(xs), ExprKind::Lit(Lit::Int(i))) => {
                    Some(tuple(vec![vector::one_hot(xs.len(), *i as usize, cot, t), zero(&Type::Int)]))
                }
                _ => None,
            },
            Sym::Global(f) | Sym::Fun(f) if vector::is_vector(point) && vector::is_vector(cot) && is_closed(f) => {
                Some(red.vjp_of(f, point, cot)?)
            }
            Sym::Prim(..) | Sym::Op(..) if vector::is_vector(point) => Some(self.join(tys.iter().map(zero).collect())),
            _ => None,
        })
    }

    /// ∂f/∂argᵢ at a literal point, for scalar symbols (`None` for a discrete argument).
    fn partials(&self, ps: &[E]) -> Option<Vec<Option<f64>>> {
        let r = |e: &E| match &e.kind {
            ExprKind::Lit(Lit::Real(x)) => Some(*x),
            ExprKind::Zero if e.ty == Type::Real => Some(0.0),
            _ => None,
        };
        if self.result_type() != Type::Real {
            return None;
        }
        use Builtin as B;
        Some(match self {
            Sym::Prim(b, _) => {
                if *b == B::ToReal {
                    return Some(vec![None]);
                }
                // One rule table (adjoint::rules) for the reducer and the compiled transform.
                let x = r(ps.first()?)?;
                let xs = match b {
                    B::Max | B::Min => vec![x, r(ps.get(1)?)?],
                    _ => vec![x],
                };
                adjoint::rules::partials(adjoint::rules::Prim::Builtin(*b), &xs)?.into_iter().map(Some).collect()
            }
            Sym::Op(op, _) => {
                let (x, y) = (r(ps.first()?)?, r(ps.get(1)?)?);
                adjoint::rules::partials(adjoint::rules::Prim::Op(*op), &[x, y])?.into_iter().map(Some).collect()
            }
            _ => return None,
        })
    }

    /// The Jacobian `(J f · t) p` written as a term in `p` and `t` (used to differentiate it again in
    /// `p`, for nested pullbacks). `None` when the symbol is not a primitive.
    pub fn derivative_term(&self, p: &E, t: &E) -> Option<E> {
        let res = self.result_type();
        if res.is_discrete() {
            return Some(zero(&res));
        }
        let ps = self.split(p);
        let ts = self.split(t);
        let rl = |x: f64| real(x);
        let bin = |op: BinOp, a: E, b: E| mk(ExprKind::Bin(op, a, b), Type::Real);
        let call = |b: Builtin, a: E| app(&builtin(b, Type::fun(a.ty.clone(), Type::Real)), a);
        let neg = |a: E| mk(ExprKind::Neg(a), Type::Real);
        let gt = |a: E, b: E| mk(ExprKind::Bin(BinOp::Gt, a, b), Type::Bool);
        let lt = |a: E, b: E| mk(ExprKind::Bin(BinOp::Lt, a, b), Type::Bool);
        let cond = |c: E, a: E, b: E| mk(ExprKind::If(c, a, b), Type::Real);
        use Builtin as B;
        Some(match self {
            Sym::Prim(b, ty) => {
                let (x, dx) = (ps[0].clone(), ts[0].clone());
                match b {
                    // The smooth unary primitives: (J f · dx) x = f′(x) · dx, f′ from the shared
                    // rule table (adjoint::rules; rule 15).
                    B::Sin | B::Cos | B::Tan | B::Exp | B::Log | B::Sqrt | B::Tanh | B::Sigmoid => {
                        let d = adjoint::rules::partial_terms(adjoint::rules::Prim::Builtin(*b), &[x])?;
                        bin(BinOp::Mul, d[0].clone(), dx)
                    }
                    B::Abs => {
                        cond(gt(x.clone(), rl(0.0)), dx.clone(), cond(lt(x, rl(0.0)), neg(dx), zero(&Type::Real)))
                    }
                    B::Neg => neg(dx),
                    B::Max => cond(gt(ps[1].clone(), x), ts[1].clone(), dx),
                    B::Min => cond(lt(ps[1].clone(), x), ts[1].clone(), dx),
                    B::ToReal => zero(&Type::Real),
                    // Rule J (a primitive's derivative as a term): floor, round have derivative 0.
                    B::Floor | B::Round => zero(&Type::Real),
                    B::Sum => app(&builtin(B::Sum, ty.clone()), dx),
                    B::Dot => {
                        let dot = |a: E, b: E| app_n(&builtin(B::Dot, ty.clone()), vec![a, b]);
                        mk(ExprKind::Sum(dot(dx, ps[1].clone()), dot(ps[0].clone(), ts[1].clone())), Type::Real)
                    }
                    _ => return None,
                }
            }
            Sym::Op(op, _) => {
                let (x, y, dx, dy) = (ps[0].clone(), ps[1].clone(), ts[0].clone(), ts[1].clone());
                match op {
                    BinOp::Add => mk(ExprKind::Sum(dx, dy), Type::Real),
                    BinOp::Sub => bin(BinOp::Sub, dx, dy),
                    BinOp::Mul => mk(ExprKind::Sum(bin(BinOp::Mul, dx, y), bin(BinOp::Mul, x, dy)), Type::Real),
                    BinOp::Div => bin(
                        BinOp::Sub,
                        bin(BinOp::Div, dx, y.clone()),
                        bin(BinOp::Div, bin(BinOp::Mul, x, dy), bin(BinOp::Mul, y.clone(), y)),
                    ),
                    BinOp::Pow => mk(
                        ExprKind::Sum(
                            bin(
                                BinOp::Mul,
                                dx,
                                bin(
                                    BinOp::Mul,
                                    y.clone(),
                                    bin(BinOp::Pow, x.clone(), bin(BinOp::Sub, y.clone(), rl(1.0))),
                                ),
                            ),
                            bin(BinOp::Mul, dy, bin(BinOp::Mul, bin(BinOp::Pow, x.clone(), y), call(B::Log, x))),
                        ),
                        Type::Real,
                    ),
                    _ => return None,
                }
            }
            Sym::Index(_) => mk(ExprKind::Index(ts[0].clone(), ps[1].clone()), res),
            Sym::Global(_) | Sym::Fun(_) => return None,
        })
    }
}

/// A literal vector with its symbolic zeros made concrete where the type allows (a primal argument
/// never holds a zero array of unknown length).
fn filled(e: &E) -> E {
    vector::materialise_by_type(e).unwrap_or_else(|| e.clone())
}

/// The vector shaped like `shape` whose continuous components are `values`, in order.
pub fn fill(shape: &E, values: &[f64]) -> E {
    fn go(s: &E, values: &[f64], k: &mut usize) -> E {
        if s.ty.is_discrete() {
            return vector::zeros_like(s);
        }
        match &s.kind {
            ExprKind::Lit(Lit::Real(_)) => {
                let v = values.get(*k).copied().unwrap_or(0.0);
                *k += 1;
                real(v)
            }
            ExprKind::Tuple(xs) => mk(ExprKind::Tuple(xs.iter().map(|x| go(x, values, k)).collect()), s.ty.clone()),
            ExprKind::Array(xs) => mk(ExprKind::Array(xs.iter().map(|x| go(x, values, k)).collect()), s.ty.clone()),
            _ => vector::zeros_like(s),
        }
    }
    go(shape, values, &mut 0)
}

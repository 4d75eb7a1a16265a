//! Reduction 5, `(λv. (J f · v) r)*·r′* → ((J(f)(r))ᵀ r′)*`, generalised to every linear body a
//! reduction produces: the body is transposed structurally against the cotangent `r′`, through
//! tuples, projections, arrays, sums, differences, negation, scaling by a literal, `r* S`, and
//! `(J f · S) r` (whose transposed Jacobian the function symbol supplies). A symbolic `0`
//! contributes nothing.
//!
//! When the tangent pattern has components of higher type (a closure's tangent, a dual's), the
//! result cannot be a vector: the continuous components are still transposed numerically and the
//! rest is kept as the linear functional it is, `(λv. Σ gᵢ* vᵢ + Σ c* (v_f A))*·1.0*` — the same
//! dual, with each first-order tangent variable occurring once, so composing it with the next dual
//! map (reduction 6) never duplicates work.

use std::rc::Rc;

use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::types::Type;
use rustc_hash::FxHashMap;

use super::reduce::{Reducer, R};
use super::term::*;
use super::vector;

/// `(λp. s)*·r*` transposed, or `None` when `s` is not a linear term this knows how to transpose
/// (or is already in the form this would produce).
pub fn transpose(red: &mut Reducer, p: &Rc<Pat>, s: &E, r: &E) -> R<Option<E>> {
    let all = leaves(p);
    let mut t = Transposer {
        fo: FxHashMap::default(),
        first_order: all.iter().filter(|l| l.ty.is_first_order()).map(|l| l.id).collect(),
        higher: all.iter().filter(|l| !l.ty.is_first_order()).map(|l| l.id).collect(),
        occurrences: Vec::new(),
    };
    if !t.go(red, s, r)? {
        return Ok(None);
    }
    if t.higher.is_empty() && t.occurrences.is_empty() {
        return Ok(Some(star(assemble(p, &t.fo))));
    }
    // The linear functional on a space with higher-order components.
    let mut terms: Vec<E> = Vec::new();
    for l in all.iter().filter(|l| t.first_order.contains(&l.id)) {
        if let Some(g) = t.fo.get(&l.id) {
            if !is_zero(g) {
                terms.push(app(&star(g.clone()), var(l.name.clone(), l.id, &l.ty)));
            }
        }
    }
    for (x, c) in &t.occurrences {
        terms.push(app(&star(c.clone()), x.clone()));
    }
    let Some(first) = terms.first().cloned() else { return Ok(Some(zero(&Type::dual(p.ty.clone())))) };
    let body = terms[1..].iter().fold(first, |acc, x| mk(ExprKind::Sum(acc, x.clone()), Type::Real));
    if matches!(&r.kind, ExprKind::Lit(Lit::Real(x)) if *x == 1.0) && same(&body, s) {
        return Ok(None);
    }
    Ok(Some(dual(p.clone(), body, star(real(1.0)))))
}

struct Transposer {
    /// Accumulated cotangents of the first-order tangent variables.
    fo: FxHashMap<LocalId, E>,
    first_order: Vec<LocalId>,
    higher: Vec<LocalId>,
    /// `(X, c)`: a first-order term `X` headed by a higher-order tangent variable, paired with `c`.
    occurrences: Vec<(E, E)>,
}

impl Transposer {
    /// Adds the contribution of `s` receiving cotangent `c`; false when `s` is not transposable.
    fn go(&mut self, red: &mut Reducer, s: &E, c: &E) -> R<bool> {
        if is_zero(c) || is_zero(s) || c.ty.is_discrete() || s.ty.is_discrete() {
            return Ok(true);
        }
        if self.higher_headed(s) {
            self.occurrences.push((s.clone(), c.clone()));
            return Ok(true);
        }
        let neg = |c: &E| vector::scale(c, -1.0);
        let lit = |e: &E| match &e.kind {
            ExprKind::Lit(Lit::Real(x)) => Some(*x),
            _ => None,
        };
        Ok(match &s.kind {
            ExprKind::Var(_, VarRef::Local(id)) => {
                if !self.first_order.contains(id) {
                    return Ok(false);
                }
                let acc = match self.fo.get(id) {
                    Some(a) => vector::add(a, c).map_err(|m| red.error(&m))?,
                    None => c.clone(),
                };
                self.fo.insert(*id, acc);
                true
            }
            ExprKind::Proj(a, i) => {
                let Type::Tuple(ts) = &a.ty else { return Ok(false) };
                let parts = ts.iter().enumerate().map(|(k, t)| if k == *i { c.clone() } else { zero(t) }).collect();
                let c2 = mk(ExprKind::Tuple(parts), a.ty.clone());
                self.go(red, a, &c2)?
            }
            ExprKind::Tuple(xs) | ExprKind::Array(xs) => match &c.kind {
                ExprKind::Tuple(cs) | ExprKind::Array(cs) if cs.len() == xs.len() => {
                    for (x, ci) in xs.iter().zip(cs) {
                        if !self.go(red, x, ci)? {
                            return Ok(false);
                        }
                    }
                    true
                }
                _ => false,
            },
            ExprKind::Sum(a, b) | ExprKind::Bin(BinOp::Add, a, b) => self.go(red, a, c)? && self.go(red, b, c)?,
            ExprKind::Bin(BinOp::Sub, a, b) => self.go(red, a, c)? && self.go(red, b, &neg(c))?,
            ExprKind::Neg(a) => self.go(red, a, &neg(c))?,
            ExprKind::Bin(BinOp::Mul, a, b) => match (lit(a), lit(b)) {
                (_, Some(k)) => self.go(red, a, &vector::scale(c, k))?,
                (Some(k), _) => self.go(red, b, &vector::scale(c, k))?,
                _ => false,
            },
            ExprKind::Bin(BinOp::Div, a, b) => match lit(b) {
                Some(k) => self.go(red, a, &vector::scale(c, 1.0 / k))?,
                None => false,
            },
            ExprKind::App(..) => self.application(red, s, c)?,
            _ => false,
        })
    }

    fn application(&mut self, red: &mut Reducer, s: &E, c: &E) -> R<bool> {
        let (head, args) = spine(s);
        let ck = match &c.kind {
            ExprKind::Lit(Lit::Real(x)) => Some(*x),
            _ => None,
        };
        match builtin_head(&head) {
            Some(Builtin::Neg) if args.len() == 1 => self.go(red, &args[0], &vector::scale(c, -1.0)),
            // (J f · S) r: the function symbol transposes its Jacobian at r.
            Some(Builtin::Jac) if args.len() == 3 && vector::is_vector(&args[2]) => {
                let sym = red.symbol_of(&args[0]);
                let cots = sym.vjp(red, &args[2], c)?;
                self.go(red, &args[1], &cots)
            }
            // r* S = ⟨r, S⟩.
            Some(Builtin::Star) if args.len() == 2 && vector::is_vector(&args[0]) => match ck {
                Some(k) => self.go(red, &args[1], &vector::scale(&args[0], k)),
                None => Ok(false),
            },
            Some(Builtin::Sum) if args.len() == 1 => match &args[0].kind {
                ExprKind::Array(xs) => {
                    for x in xs {
                        if !self.go(red, x, c)? {
                            return Ok(false);
                        }
                    }
                    Ok(true)
                }
                _ => Ok(false),
            },
            Some(Builtin::Dot) if args.len() == 2 => {
                match (ck, vector::is_vector(&args[0]), vector::is_vector(&args[1])) {
                    (Some(k), _, true) => self.go(red, &args[0], &vector::scale(&args[1], k)),
                    (Some(k), true, _) => self.go(red, &args[1], &vector::scale(&args[0], k)),
                    _ => Ok(false),
                }
            }
            Some(Builtin::Unstar) if args.len() == 1 => {
                let (h, a) = spine(&args[0]);
                if builtin_head(&h) == Some(Builtin::Star) && a.len() == 1 {
                    return self.go(red, &a[0], c);
                }
                if self.higher_headed(&args[0]) {
                    self.occurrences.push((s.clone(), c.clone()));
                    return Ok(true);
                }
                Ok(false)
            }
            _ if self.higher_headed(&head) => {
                self.occurrences.push((s.clone(), c.clone()));
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Is `e` a higher-order tangent variable, or a projection or application of one?
    fn higher_headed(&self, e: &E) -> bool {
        match &e.kind {
            ExprKind::Var(_, VarRef::Local(id)) => self.higher.contains(id),
            ExprKind::Proj(a, _) => self.higher_headed(a),
            ExprKind::App(f, _) => self.higher_headed(f),
            _ => false,
        }
    }
}

/// The cotangent shaped like the pattern, `0` where nothing arrived.
fn assemble(p: &Pat, fo: &FxHashMap<LocalId, E>) -> E {
    match &p.kind {
        PatKind::Var(_, id) => fo.get(id).cloned().unwrap_or_else(|| zero(&p.ty)),
        PatKind::Tuple(ps) => {
            Expr::new(ExprKind::Tuple(ps.iter().map(|q| assemble(q, fo)).collect()), p.span, p.ty.clone())
        }
        PatKind::Unit => mk(ExprKind::Lit(Lit::Unit), Type::Unit),
        PatKind::Wild => zero(&p.ty),
    }
}

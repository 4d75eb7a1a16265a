//! Reduction 5, `(λv. (J f · v) r)*·r′* → ((J(f)(r))ᵀ r′)*`, generalised to every linear body a
//! reduction produces: the body is transposed structurally against the cotangent `r′`, through
//! tuples, projections, arrays, sums, differences, negation, scaling by a literal, `r* S`, `S* r`, and
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
use rustc_hash::{FxHashMap, FxHashSet};

use super::reduce::{Reducer, R};
use super::term::*;
use super::vector;

/// `(λp. s)*·r*` transposed, or `None` when `s` is not a linear term this knows how to transpose
/// (or is already in the form this would produce).
///
/// Only the tangent variables free in `s` take part (the others receive nothing), so a dual map
/// over a long chain pattern whose body mentions a few of them is transposed in the size of the body.
pub fn transpose(red: &mut Reducer, p: &Rc<Pat>, s: &E, r: &E) -> R<Option<E>> {
    let all = leaves_in(p, &free_set(s));
    // Does the tangent space have higher-order components (whether or not `s` mentions them)?
    let has_higher = !p.ty.is_first_order();
    if matches!(&r.kind, ExprKind::Lit(Lit::Real(x)) if *x == 1.0) && collapsed(s, &all, has_higher) {
        return Ok(None);
    }
    let mut t = Transposer {
        fo: FxHashMap::default(),
        first_order: all.iter().filter(|l| l.ty.is_first_order()).map(|l| l.id).collect(),
        higher: all.iter().filter(|l| !l.ty.is_first_order()).map(|l| l.id).collect(),
        tangents: all.iter().map(|l| l.id).collect(),
        occurrences: Vec::new(),
    };
    if !t.go(red, s, r)? {
        return Ok(None);
    }
    if !has_higher && t.occurrences.is_empty() {
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

/// `a + b` for cotangents: numeric when both are literal, a sum otherwise.
fn plus(a: &E, b: &E) -> Result<E, String> {
    if is_zero(a) {
        return Ok(b.clone());
    }
    if is_zero(b) {
        return Ok(a.clone());
    }
    if vector::is_vector(a) && vector::is_vector(b) {
        return vector::add(a, b);
    }
    // Tuples and arrays add componentwise even when their components are terms.
    match (&a.kind, &b.kind) {
        (ExprKind::Tuple(xs), ExprKind::Tuple(ys)) if xs.len() == ys.len() => {
            let zs = xs.iter().zip(ys).map(|(x, y)| plus(x, y)).collect::<Result<Vec<_>, _>>()?;
            Ok(Expr::new(ExprKind::Tuple(zs), a.span, a.ty.clone()))
        }
        (ExprKind::Array(xs), ExprKind::Array(ys)) if xs.len() == ys.len() => {
            let zs = xs.iter().zip(ys).map(|(x, y)| plus(x, y)).collect::<Result<Vec<_>, _>>()?;
            Ok(mk(ExprKind::Array(zs), a.ty.clone()))
        }
        _ => Ok(mk(ExprKind::Sum(a.clone(), b.clone()), a.ty.clone())),
    }
}

/// The components of a cotangent of tuple or array type.
fn parts(c: &E, n: usize) -> Option<Vec<E>> {
    match (&c.kind, &c.ty) {
        (ExprKind::Tuple(xs), _) | (ExprKind::Array(xs), _) if xs.len() == n => Some(xs.clone()),
        (ExprKind::Zero, Type::Tuple(ts)) => Some(ts.iter().map(zero).collect()),
        (ExprKind::Zero, Type::Array(t)) => Some((0..n).map(|_| zero(t)).collect()),
        (_, Type::Tuple(ts)) if ts.len() == n => Some((0..n).map(|i| proj(c, i)).collect()),
        _ => None,
    }
}

struct Transposer {
    /// Accumulated cotangents of the first-order tangent variables.
    fo: FxHashMap<LocalId, E>,
    first_order: FxHashSet<LocalId>,
    higher: FxHashSet<LocalId>,
    tangents: FxHashSet<LocalId>,
    /// `(X, c)`: a first-order term `X` headed by a higher-order tangent variable, paired with `c`.
    occurrences: Vec<(E, E)>,
}

impl Transposer {
    /// Does `e` mention a tangent variable of this dual map?
    fn linear(&self, e: &E) -> bool {
        mentions_any(e, &self.tangents)
    }

    /// Adds the contribution of `s` receiving cotangent `c`; false when `s` is not transposable.
    fn go(&mut self, red: &mut Reducer, s: &E, c: &E) -> R<bool> {
        if is_zero(c) || is_zero(s) || c.ty.is_discrete() || s.ty.is_discrete() || !self.linear(s) {
            return Ok(true);
        }
        if self.higher_headed(s) {
            self.occurrences.push((s.clone(), c.clone()));
            return Ok(true);
        }
        let neg = |c: &E| vector::times(c, &real(-1.0));
        Ok(match &s.kind {
            ExprKind::Var(_, VarRef::Local(id)) => {
                if !self.first_order.contains(id) {
                    return Ok(false);
                }
                let c = vector::continuous(c);
                let acc = match self.fo.get(id) {
                    Some(a) => plus(a, &c).map_err(|m| red.error(&m))?,
                    None => c,
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
            ExprKind::Tuple(xs) | ExprKind::Array(xs) => match parts(c, xs.len()) {
                Some(cs) => {
                    for (x, ci) in xs.iter().zip(&cs) {
                        if !self.go(red, x, ci)? {
                            return Ok(false);
                        }
                    }
                    true
                }
                None => false,
            },
            ExprKind::Sum(a, b) | ExprKind::Bin(BinOp::Add, a, b) => self.go(red, a, c)? && self.go(red, b, c)?,
            ExprKind::Bin(BinOp::Sub, a, b) => match neg(c) {
                Some(nc) => self.go(red, a, c)? && self.go(red, b, &nc)?,
                None => false,
            },
            ExprKind::Neg(a) => match neg(c) {
                Some(nc) => self.go(red, a, &nc)?,
                None => false,
            },
            // A product is linear in the factor that holds the tangent.
            ExprKind::Bin(BinOp::Mul, a, b) => match (self.linear(a), self.linear(b)) {
                (true, false) => match vector::times(c, b) {
                    Some(c2) => self.go(red, a, &c2)?,
                    None => false,
                },
                (false, true) => match vector::times(c, a) {
                    Some(c2) => self.go(red, b, &c2)?,
                    None => false,
                },
                _ => false,
            },
            ExprKind::Bin(BinOp::Div, a, b) if !self.linear(b) => {
                let inv = match &b.kind {
                    ExprKind::Lit(Lit::Real(k)) => real(1.0 / k),
                    _ => mk(ExprKind::Bin(BinOp::Div, real(1.0), b.clone()), Type::Real),
                };
                match vector::times(c, &inv) {
                    Some(c2) => self.go(red, a, &c2)?,
                    None => false,
                }
            }
            ExprKind::App(..) => self.application(red, s, c)?,
            _ => false,
        })
    }

    fn application(&mut self, red: &mut Reducer, s: &E, c: &E) -> R<bool> {
        let (head, args) = spine(s);
        match builtin_head(&head) {
            Some(Builtin::Neg) if args.len() == 1 => match vector::times(c, &real(-1.0)) {
                Some(nc) => self.go(red, &args[0], &nc),
                None => Ok(false),
            },
            // (J f · S) r: the function symbol transposes its Jacobian at a literal r; elsewhere the
            // Jacobian is written out as a term (a primitive's derivative) and transposed as such.
            Some(Builtin::Jac) if args.len() == 3 => {
                if is_zero(&args[0]) {
                    return Ok(true);
                }
                if self.higher_headed(&args[0]) {
                    self.occurrences.push((s.clone(), c.clone()));
                    return Ok(true);
                }
                if is_closed(&args[0]) && !self.linear(&args[2]) {
                    let sym = red.symbol_of(&args[0]);
                    if let Some(cots) = sym.vjp(red, &args[2], c)? {
                        return self.go(red, &args[1], &cots);
                    }
                }
                match red.jvp_term(&args[0], &args[2], &args[1])? {
                    Some(d) => self.go(red, &d, c),
                    None => Ok(false),
                }
            }
            // r* S = ⟨r, S⟩, and S* r = ⟨S, r⟩ (lin: the pairing is bilinear and symmetric).
            Some(Builtin::Star) if args.len() == 2 => {
                let (s0, k) = match (self.linear(&args[0]), self.linear(&args[1])) {
                    (false, _) => (&args[1], &args[0]),
                    (true, false) => (&args[0], &args[1]),
                    (true, true) => return Ok(false),
                };
                match vector::times(k, c) {
                    Some(c2) => self.go(red, s0, &c2),
                    None => Ok(false),
                }
            }
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
                let (s0, k) = if self.linear(&args[1]) { (&args[1], &args[0]) } else { (&args[0], &args[1]) };
                if self.linear(k) {
                    return Ok(false);
                }
                match vector::times(k, c) {
                    Some(c2) => self.go(red, s0, &c2),
                    None => Ok(false),
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

/// Is `s` already the form a transposition with higher-order components produces,
/// `Σ gᵢ* vᵢ + Σ c* (v_f A)`, each first-order tangent variable at most once?
/// `leaves` are the pattern's variables free in `s`; `has_higher`: the pattern has a variable of
/// higher type.
fn collapsed(s: &E, leaves: &[Leaf], has_higher: bool) -> bool {
    fn terms<'a>(s: &'a E, out: &mut Vec<&'a E>) {
        match &s.kind {
            ExprKind::Sum(a, b) => {
                terms(a, out);
                terms(b, out);
            }
            _ => out.push(s),
        }
    }
    if !has_higher {
        return false;
    }
    let higher: FxHashSet<LocalId> = leaves.iter().filter(|l| !l.ty.is_first_order()).map(|l| l.id).collect();
    let headed = |e: &E| {
        let mut cur = e;
        loop {
            match &cur.kind {
                ExprKind::Var(_, VarRef::Local(id)) => return higher.contains(id),
                ExprKind::Proj(a, _) | ExprKind::App(a, _) => cur = a,
                _ => return false,
            }
        }
    };
    let mut ts = Vec::new();
    terms(s, &mut ts);
    let mut seen = FxHashSet::default();
    ts.iter().all(|t| {
        let (h, args) = spine(t);
        if builtin_head(&h) != Some(Builtin::Star) || args.len() != 2 {
            return false;
        }
        match &args[1].kind {
            ExprKind::Var(_, VarRef::Local(id)) if !higher.contains(id) => seen.insert(*id),
            _ => {
                headed(&args[1])
                    || matches!(
                        spine(&args[1]).0.kind,
                        ExprKind::Var(_, VarRef::Builtin(Builtin::Unstar | Builtin::Jac))
                    ) && headed(&spine(&args[1]).1[0])
            }
        }
    })
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

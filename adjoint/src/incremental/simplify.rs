//! Pass 3: simplification. One bottom-up round of local rewrites; the driver repeats rounds (with
//! nil propagation between them) until nothing changes.
//!
//! - β: `(λp. b) a` → `let p = a in b`; a `let` in function position floats out of the application;
//! - values (variables, literals, partial applications of primitives, constructors, small λs, λs
//!   used once) bound by `let` are substituted, each copy with fresh binders; tuple lets split;
//! - `π_i ⟨..⟩` of values → the component; `if true/false`; `x == x` at `Bool` → `true`;
//! - `x ⊕ 0` → `x` for a nil change `0`; `nil e` at a type with a canonical group → `gchange g zero`;
//!   `nil ⟨a, b⟩` → `⟨nil a, nil b⟩`;
//! - `let` of a value that nothing uses disappears.
//!
//! Every rewrite keeps call-by-value meaning (only values are substituted or dropped).

use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::types::Type;
use rustc_hash::FxHashMap;

use super::table;
use super::term::*;
use super::Cx;

/// One round of simplification.
pub fn simplify(e: &E, cx: &mut Cx) -> E {
    let mut subst = FxHashMap::default();
    go(e, cx, &mut subst)
}

/// Values: evaluating them does no work and cannot fail.
pub fn is_value(e: &E) -> bool {
    match &e.kind {
        ExprKind::Var(..) | ExprKind::Lit(_) | ExprKind::Lam(..) => true,
        ExprKind::Derive(inner) => matches!(inner.kind, ExprKind::Var(_, VarRef::Global(_))),
        ExprKind::Tuple(xs) => xs.iter().all(is_value),
        ExprKind::Proj(a, _) => is_value(a),
        ExprKind::App(..) => {
            let (head, args) = spine(e);
            let ExprKind::Var(_, VarRef::Builtin(b)) = &head.kind else { return false };
            args.iter().all(|a| is_value(a))
                && (args.len() < b.arity() || (is_constructor(*b) && args.len() == b.arity()))
        }
        _ => false,
    }
}

/// Builtins whose saturated applications build a value without computing anything.
fn is_constructor(b: Builtin) -> bool {
    matches!(
        b,
        Builtin::Replace | Builtin::GChange | Builtin::MapGroup | Builtin::PairGroup | Builtin::MkGroup | Builtin::Nil
    )
}

/// A partial application of a primitive: substituted wherever it is used, so the passes after
/// see each derivative primitive with its arguments.
fn is_partial_builtin(e: &E) -> bool {
    let (head, args) = spine(e);
    matches!(&head.kind, ExprKind::Var(_, VarRef::Builtin(b)) if !args.is_empty() && args.len() < b.arity())
}

/// A syntactic nil change: `nil e`, or `gchange g zero` with `g` a canonical group.
pub fn is_nil_syntactic(e: &E) -> bool {
    if is_nil_app(e) {
        return true;
    }
    let (head, args) = spine(e);
    if !matches!(head.kind, ExprKind::Var(_, VarRef::Builtin(Builtin::GChange))) || args.len() != 2 {
        return false;
    }
    is_canonical_group(args[0]) && is_zero(args[1])
}

fn is_canonical_group(g: &E) -> bool {
    let (head, args) = spine(g);
    match &head.kind {
        ExprKind::Var(_, VarRef::Builtin(Builtin::IntGroup | Builtin::RealGroup | Builtin::BagGroup)) => {
            args.is_empty()
        }
        ExprKind::Var(_, VarRef::Builtin(Builtin::MapGroup)) => args.len() == 1 && is_canonical_group(args[0]),
        ExprKind::Var(_, VarRef::Builtin(Builtin::PairGroup)) => {
            args.len() == 2 && args.iter().all(|a| is_canonical_group(a))
        }
        _ => false,
    }
}

fn is_zero(z: &E) -> bool {
    match &z.kind {
        ExprKind::Lit(Lit::Int(0)) => true,
        ExprKind::Lit(Lit::Real(r)) => *r == 0.0,
        ExprKind::Var(_, VarRef::Builtin(Builtin::EmptyBag | Builtin::EmptyMap)) => true,
        ExprKind::Tuple(xs) => xs.iter().all(is_zero),
        _ => false,
    }
}

fn go(e: &E, cx: &mut Cx, subst: &mut FxHashMap<LocalId, E>) -> E {
    let span = e.span;
    match &e.kind {
        ExprKind::Var(_, VarRef::Local(id)) => match subst.get(id) {
            Some(t) if has_binders(t) => copy_fresh(&t.clone(), &FxHashMap::default(), cx),
            Some(t) => t.clone(),
            None => e.clone(),
        },
        ExprKind::Let(p, r, b) => {
            let r2 = go(r, cx, subst);
            match (&p.kind, &r2.kind) {
                (PatKind::Tuple(ps), ExprKind::Tuple(xs)) if ps.len() == xs.len() => {
                    let split = ps
                        .iter()
                        .zip(xs.iter())
                        .rev()
                        .fold(b.clone(), |body, (q, x)| let_(q.clone().into(), x.clone(), body, span));
                    go(&split, cx, subst)
                }
                (PatKind::Var(_, x), _) if is_value(&r2) && substitutable(&r2, b, *x) => {
                    let saved = subst.insert(*x, r2);
                    let b2 = go(b, cx, subst);
                    match saved {
                        Some(s) => subst.insert(*x, s),
                        None => subst.remove(x),
                    };
                    b2
                }
                (PatKind::Wild | PatKind::Unit, _) if is_value(&r2) => go(b, cx, subst),
                _ => {
                    let b2 = go(b, cx, subst);
                    let used = p.binders().iter().any(|(_, id)| uses(&b2, *id) > 0);
                    if !used && is_value(&r2) {
                        b2
                    } else {
                        let_(p.clone(), r2, b2, span)
                    }
                }
            }
        }
        ExprKind::App(..) if matches!(spine(e).0.kind, ExprKind::Lam(..) | ExprKind::Let(..)) => {
            // β and let-floating on the whole spine as it is: `(λp1 p2. b) a1 a2` becomes
            // `let p1 = a1 in let p2 = a2 in b` in one step (the λs are values, so the order of
            // evaluation is unchanged).
            let (head, args) = spine(e);
            let raw = match &head.kind {
                ExprKind::Let(p, r, body) => {
                    let_(p.clone(), r.clone(), app_n(body.clone(), args.into_iter().cloned(), span), span)
                }
                _ => {
                    let mut body = head.clone();
                    let mut binds = Vec::new();
                    let mut rest = args.into_iter();
                    let mut left = Vec::new();
                    for a in rest.by_ref() {
                        match &body.kind {
                            ExprKind::Lam(p, b) => {
                                binds.push((p.clone(), a.clone()));
                                body = b.clone();
                            }
                            _ => {
                                left.push(a.clone());
                                break;
                            }
                        }
                    }
                    left.extend(rest.cloned());
                    let applied = app_n(body, left, span);
                    binds.into_iter().rev().fold(applied, |b, (p, a)| let_(p, a, b, span))
                }
            };
            go(&raw, cx, subst)
        }
        ExprKind::App(f, a) => {
            let f2 = go(f, cx, subst);
            let a2 = go(a, cx, subst);
            match &f2.kind {
                // β (next round simplifies the let)
                ExprKind::Lam(p, body) => let_(p.clone(), a2, body.clone(), span),
                ExprKind::Let(p, r, body) => {
                    let_(p.clone(), r.clone(), Expr::new(ExprKind::App(body.clone(), a2), span, e.ty.clone()), span)
                }
                ExprKind::Var(_, VarRef::Builtin(Builtin::Nil)) => simplify_nil(a2, e, f2.clone()),
                _ => Expr::new(ExprKind::App(f2, a2), span, e.ty.clone()),
            }
        }
        ExprKind::If(c, a, b) => {
            let c2 = go(c, cx, subst);
            match &c2.kind {
                ExprKind::Lit(Lit::Bool(true)) => go(a, cx, subst),
                ExprKind::Lit(Lit::Bool(false)) => go(b, cx, subst),
                _ => {
                    let (a2, b2) = (go(a, cx, subst), go(b, cx, subst));
                    Expr::new(ExprKind::If(c2, a2, b2), span, e.ty.clone())
                }
            }
        }
        ExprKind::Bin(BinOp::Oplus, a, da) => {
            let (a2, da2) = (go(a, cx, subst), go(da, cx, subst));
            if is_nil_syntactic(&da2) {
                a2
            } else {
                Expr::new(ExprKind::Bin(BinOp::Oplus, a2, da2), span, e.ty.clone())
            }
        }
        ExprKind::Bin(BinOp::Eq, a, b) if a.ty == Type::Bool => {
            let (a2, b2) = (go(a, cx, subst), go(b, cx, subst));
            match (&a2.kind, &b2.kind) {
                (ExprKind::Var(_, VarRef::Local(x)), ExprKind::Var(_, VarRef::Local(y))) if x == y => {
                    Expr::new(ExprKind::Lit(Lit::Bool(true)), span, Type::Bool)
                }
                (ExprKind::Lit(Lit::Bool(x)), ExprKind::Lit(Lit::Bool(y))) => {
                    Expr::new(ExprKind::Lit(Lit::Bool(x == y)), span, Type::Bool)
                }
                _ => Expr::new(ExprKind::Bin(BinOp::Eq, a2, b2), span, Type::Bool),
            }
        }
        ExprKind::Proj(a, i) => {
            let a2 = go(a, cx, subst);
            match &a2.kind {
                ExprKind::Tuple(xs) if *i < xs.len() && xs.iter().all(is_value) => xs[*i].clone(),
                ExprKind::Let(p, r, body) => {
                    let_(p.clone(), r.clone(), Expr::new(ExprKind::Proj(body.clone(), *i), span, e.ty.clone()), span)
                }
                _ => Expr::new(ExprKind::Proj(a2, *i), span, e.ty.clone()),
            }
        }
        _ => rebuild(e, &mut |c| go(c, cx, subst)),
    }
}

/// Substitute a let-bound value unless that would copy a large λ to several places.
fn substitutable(v: &E, body: &E, x: LocalId) -> bool {
    !has_binders(v) || is_partial_builtin(v) || size(v) <= 16 || uses(body, x) <= 1
}

/// `nil a`: a constant at a type with a canonical group, componentwise on tuples.
fn simplify_nil(a: E, e: &E, f: E) -> E {
    if let Some(c) = table::nil_constant(&a.ty, e.span) {
        return c;
    }
    if let ExprKind::Tuple(xs) = &a.kind {
        let comps = xs.iter().map(|x| simplify_nil(x.clone(), e, f.clone())).collect();
        return Expr::new(ExprKind::Tuple(comps), e.span, Type::delta(&a.ty));
    }
    let nil_f = builtin(Builtin::Nil, Type::fun(a.ty.clone(), Type::delta(&a.ty)), f.span);
    Expr::new(ExprKind::App(nil_f, a), e.span, e.ty.clone())
}

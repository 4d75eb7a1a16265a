//! Linearity (Mak & Ong Sec. 3.1, `lin(S)`) and free variables.
//!
//! The paper defines the set lin(S) of variables in linear position; `dual (fun v -> S) w` requires
//! v ∈ lin(S). We compute "is S linear in the target variables T" directly: T is one variable, or
//! the variables of a tuple pattern taken together (λ⟨x,y⟩.S ≡ λz.S[z.1/x][z.2/y]).
//! The paper's clauses, and this language's extensions (marked), are:
//!
//! - lin(x) = {x}; lin(0) = every variable (0 is the unit of sums)
//! - lin(λx.S) = lin(S) \ {x}
//! - lin(S P) = lin(S) \ FV(P) — the function position is linear
//! - lin(πi S) = lin(S); lin(⟨S1, S2⟩) = lin(S1) ∩ lin(S2); lin(S + P) = lin(S) ∩ lin(P)
//! - lin(J f · S) = lin(S)
//! - lin((λx.S)*·S') = (lin(S) \ FV(S')) ∪ (lin(S') \ FV(S))
//! - extension: `-S`, `S - P`, arrays, `star`, `unstar`, `neg`, `sum` are linear like sums and tuples;
//!   `S * P` and `dot S P` are bilinear (like the dual map clause); `S / P` and `S.[P]` are linear in S
//!   when P is free of T; a dual applied to a tangent is linear in either side (duals are linear
//!   functionals); `if c then S else P` is linear when both branches are and c is free of T;
//!   `let p = A in B` is linear when B is and A is free of T, or A is and B is linear in p and free of T.

use rustc_hash::FxHashSet;

use crate::builtins::Builtin;
use crate::diag::Diagnostic;
use crate::span::Span;
use crate::syntax::*;
use crate::types::Type;

/// Checks the `lin` side condition of `dual (fun p -> body) w` (Mak–Ong Fig. 2, dual map rule).
pub fn check_dual(p: &Pat, body: &E) -> Result<(), Diagnostic> {
    let targets: FxHashSet<LocalId> = p.binders().into_iter().map(|(_, id)| id).collect();
    if targets.is_empty() || !linear(body, &targets) {
        let names: Vec<String> = p.binders().into_iter().map(|(n, _)| format!("`{n}`")).collect();
        let who = if names.is_empty() { "its parameter".to_string() } else { names.join(", ") };
        return Err(Diagnostic::error(body.span, format!("the body of this `dual` is not linear in {who}"))
            .with_label(p.span, "the linear parameter")
            .with_note("a dual map (λv. e)*·w needs v in linear position in e (Mak & Ong, Sec. 3.1, lin)"));
    }
    Ok(())
}

/// Is `e` linear in the variables `t`?
pub fn linear(e: &E, t: &FxHashSet<LocalId>) -> bool {
    let m = |x: &E| mentions(x, t);
    let l = |x: &E| linear(x, t);
    match &e.kind {
        ExprKind::Var(_, VarRef::Local(id)) => t.contains(id),
        ExprKind::Lit(Lit::Int(0)) | ExprKind::Zero => true,
        ExprKind::Lit(Lit::Real(r)) => *r == 0.0,
        ExprKind::Lam(_, b) => l(b),
        ExprKind::Proj(a, _) | ExprKind::Neg(a) => l(a),
        ExprKind::Tuple(xs) | ExprKind::Array(xs) => xs.iter().all(l),
        ExprKind::Bin(BinOp::Add | BinOp::Sub, a, b) | ExprKind::Sum(a, b) => l(a) && l(b),
        ExprKind::Bin(BinOp::Mul, a, b) => (l(a) && !m(b)) || (l(b) && !m(a)),
        ExprKind::Bin(BinOp::Div, a, b) | ExprKind::Index(a, b) => l(a) && !m(b),
        ExprKind::If(c, a, b) => !m(c) && l(a) && l(b),
        ExprKind::Let(p, a, b) => {
            if !m(a) {
                return l(b);
            }
            let inner: FxHashSet<LocalId> = p.binders().into_iter().map(|(_, id)| id).collect();
            l(a) && !m(b) && linear(b, &inner)
        }
        ExprKind::Dual(_, s, w) => (l(s) && !m(w)) || (l(w) && !m(s)),
        ExprKind::App(f, a) => {
            if let ExprKind::Var(_, VarRef::Builtin(b)) = &f.kind {
                if matches!(b, Builtin::Neg | Builtin::Sum | Builtin::Star | Builtin::Unstar) {
                    return l(a);
                }
            }
            if let ExprKind::App(g, x) = &f.kind {
                if matches!(&g.kind, ExprKind::Var(_, VarRef::Builtin(Builtin::Dot))) {
                    return (l(x) && !m(a)) || (l(a) && !m(x));
                }
            }
            if matches!(f.ty, Type::Dual(_)) && l(a) && !m(f) {
                return true;
            }
            l(f) && !m(a)
        }
        _ => false,
    }
}

/// Does `e` mention any of `t` free?
pub fn mentions(e: &E, t: &FxHashSet<LocalId>) -> bool {
    let mut found = false;
    visit_free_locals(e, &mut |_, id, _| {
        if t.contains(&id) {
            found = true;
        }
    });
    found
}

/// The first free local variable of `e`, if any (for `derive`'s closedness check).
pub fn first_free_local(e: &E) -> Option<(Name, Span)> {
    let mut first = None;
    visit_free_locals(e, &mut |n, _, s| {
        if first.is_none() {
            first = Some((n.clone(), s));
        }
    });
    first
}

/// The free local variables of `e`, each once, in order of first occurrence.
pub fn free_locals(e: &E) -> Vec<(Name, LocalId)> {
    let mut out: Vec<(Name, LocalId)> = Vec::new();
    visit_free_locals(e, &mut |n, id, _| {
        if !out.iter().any(|(_, j)| *j == id) {
            out.push((n.clone(), id));
        }
    });
    out
}

/// Calls `f` on every free occurrence of a local variable in `e`.
pub fn visit_free_locals(e: &E, f: &mut impl FnMut(&Name, LocalId, Span)) {
    visit_free_vars(e, &mut |v| {
        if let ExprKind::Var(n, VarRef::Local(id)) = &v.kind {
            f(n, *id, v.span)
        }
    });
}

/// Calls `f` on every variable occurrence in `e` that `e` does not bind — free locals,
/// definitions and builtins — in the order they occur: the one free-variable walk every pass
/// uses. (The pullback reducer keeps a cached variant for its shared terms.)
pub fn visit_free_vars(e: &E, f: &mut dyn FnMut(&E)) {
    let mut bound: Vec<LocalId> = Vec::new();
    walk(e, &mut bound, f);
}

fn walk(e: &E, bound: &mut Vec<LocalId>, f: &mut dyn FnMut(&E)) {
    fn under(p: &Pat, body: &E, bound: &mut Vec<LocalId>, f: &mut dyn FnMut(&E)) {
        let mark = bound.len();
        bound.extend(p.binders().into_iter().map(|(_, id)| id));
        walk(body, bound, f);
        bound.truncate(mark);
    }
    match &e.kind {
        ExprKind::Var(_, VarRef::Local(id)) => {
            if !bound.contains(id) {
                f(e)
            }
        }
        ExprKind::Var(..) => f(e),
        ExprKind::Lam(p, b) => under(p, b, bound, f),
        ExprKind::Let(p, a, b) => {
            walk(a, bound, f);
            under(p, b, bound, f)
        }
        ExprKind::Dual(p, s, w) => {
            under(p, s, bound, f);
            walk(w, bound, f)
        }
        _ => for_each_child(e, &mut |c| walk(c, bound, f)),
    }
}

/// Calls `f` on each direct sub-term, left to right (binders are not special here).
pub fn for_each_child(e: &E, f: &mut impl FnMut(&E)) {
    match &e.kind {
        ExprKind::Var(..) | ExprKind::Lit(_) | ExprKind::Zero => {}
        ExprKind::Lam(_, a)
        | ExprKind::Neg(a)
        | ExprKind::Not(a)
        | ExprKind::Proj(a, _)
        | ExprKind::Derive(a)
        | ExprKind::Ann(a, _) => f(a),
        ExprKind::App(a, b)
        | ExprKind::Let(_, a, b)
        | ExprKind::Bin(_, a, b)
        | ExprKind::Index(a, b)
        | ExprKind::Pullback(a, b)
        | ExprKind::Dual(_, a, b)
        | ExprKind::Sum(a, b) => {
            f(a);
            f(b)
        }
        ExprKind::If(a, b, c) => {
            f(a);
            f(b);
            f(c)
        }
        ExprKind::Tuple(xs) | ExprKind::Array(xs) => xs.iter().for_each(f),
        ExprKind::Bag(xs) => xs.iter().for_each(|(x, _)| f(x)),
        ExprKind::Map(xs) => xs.iter().for_each(|(k, v)| {
            f(k);
            f(v)
        }),
    }
}

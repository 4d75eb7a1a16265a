//! Typed term construction and the binder-aware traversals the ILC passes share: fresh copies
//! (α-renaming with substitution), free variables with their types, use counts and sizes.
//!
//! Every term a pass builds is fully typed (the interpreter dispatches `<+>`, `<->` and builtins on
//! node types), and every copy of a term with binders gets fresh binders, so a derived term binds
//! each `LocalId` once and passes may key maps by `LocalId`.

use std::rc::Rc;

use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::types::Type;
use frontend::Span;
use rustc_hash::{FxHashMap, FxHashSet};

use super::Cx;

pub fn var(name: Name, id: LocalId, ty: Type, span: Span) -> E {
    Expr::new(ExprKind::Var(name, VarRef::Local(id)), span, ty)
}

pub fn builtin(b: Builtin, ty: Type, span: Span) -> E {
    Expr::new(ExprKind::Var(b.name().into(), VarRef::Builtin(b)), span, ty)
}

/// `f a`, typed by `f`'s result type.
pub fn app(f: E, a: E, span: Span) -> E {
    let ty = match &f.ty {
        Type::Fun(_, r) => (**r).clone(),
        // Ill-typed construction is a bug in a pass; keep going with a placeholder.
        _ => Type::Unit,
    };
    Expr::new(ExprKind::App(f, a), span, ty)
}

pub fn app_n(f: E, args: impl IntoIterator<Item = E>, span: Span) -> E {
    args.into_iter().fold(f, |f, a| app(f, a, span))
}

pub fn lam(p: Rc<Pat>, body: E, span: Span) -> E {
    let ty = Type::fun(p.ty.clone(), body.ty.clone());
    Expr::new(ExprKind::Lam(p, body), span, ty)
}

pub fn let_(p: Rc<Pat>, rhs: E, body: E, span: Span) -> E {
    let ty = body.ty.clone();
    Expr::new(ExprKind::Let(p, rhs, body), span, ty)
}

/// `a ⊕ da`.
pub fn oplus(a: E, da: E, span: Span) -> E {
    let ty = a.ty.clone();
    Expr::new(ExprKind::Bin(BinOp::Oplus, a, da), span, ty)
}

/// `b ⊖ a`.
pub fn ominus(b: E, a: E, span: Span) -> E {
    let ty = Type::delta(&b.ty);
    Expr::new(ExprKind::Bin(BinOp::Ominus, b, a), span, ty)
}

/// `nil e`, the nil change 0_e.
pub fn nil(e: E, span: Span) -> E {
    let f = builtin(Builtin::Nil, Type::fun(e.ty.clone(), Type::delta(&e.ty)), span);
    app(f, e, span)
}

/// The placeholder for a base argument that a self-maintainable derivative never reads.
pub fn no_base(ty: Type, span: Span) -> E {
    builtin(Builtin::NoBase, ty, span)
}

pub fn pat_var(name: Name, id: LocalId, ty: Type, span: Span) -> Rc<Pat> {
    Rc::new(Pat { kind: PatKind::Var(name, id), span, ty, ann: None })
}

pub fn pat_wild(ty: Type, span: Span) -> Rc<Pat> {
    Rc::new(Pat { kind: PatKind::Wild, span, ty, ann: None })
}

/// `e` is `nil x` for some `x`.
pub fn is_nil_app(e: &E) -> bool {
    matches!(&e.kind, ExprKind::App(f, _) if matches!(f.kind, ExprKind::Var(_, VarRef::Builtin(Builtin::Nil))))
}

/// Splits an application spine `h a1 ... an` into `h` and its arguments.
pub fn spine(e: &E) -> (&E, Vec<&E>) {
    let mut args = Vec::new();
    let mut cur = e;
    while let ExprKind::App(f, a) = &cur.kind {
        args.push(a);
        cur = f;
    }
    args.reverse();
    (cur, args)
}

/// Like `spine`, but in `nil c a1 ... an` (n ≥ 1) the head is `nil c`, the derivative of `c`.
pub fn deriv_spine(e: &E) -> (E, Vec<E>) {
    let mut nodes = Vec::new();
    let mut cur = e;
    while let ExprKind::App(f, _) = &cur.kind {
        nodes.push(cur);
        cur = f;
    }
    // nodes: outermost first; the last one applies the innermost head to the first argument.
    let arg = |n: &E| match &n.kind {
        ExprKind::App(_, a) => a.clone(),
        _ => unreachable!("spine nodes are applications"),
    };
    if nodes.len() >= 2 && matches!(cur.kind, ExprKind::Var(_, VarRef::Builtin(Builtin::Nil))) {
        let head = nodes[nodes.len() - 1].clone();
        let args = nodes[..nodes.len() - 1].iter().rev().map(|n| arg(n)).collect();
        return (head, args);
    }
    let args = nodes.iter().rev().map(|n| arg(n)).collect();
    (cur.clone(), args)
}

/// The spine `e` (as `deriv_spine` splits it, `args.len()` arguments deep) rebuilt with a new head
/// and arguments, each application node keeping its span and type.
pub fn rebuild_spine(e: &E, head: E, args: Vec<E>) -> E {
    let mut nodes = Vec::new();
    let mut cur = e;
    while nodes.len() < args.len() {
        match &cur.kind {
            ExprKind::App(f, _) => {
                nodes.push(cur);
                cur = f;
            }
            _ => break,
        }
    }
    let mut out = head;
    for (node, a) in nodes.iter().rev().zip(args) {
        out = Expr::new(ExprKind::App(out, a), node.span, node.ty.clone());
    }
    out
}

/// `nil c` for a builtin `c`: the builtin.
pub fn nil_of_builtin(e: &E) -> Option<Builtin> {
    match &e.kind {
        ExprKind::App(f, c) if matches!(f.kind, ExprKind::Var(_, VarRef::Builtin(Builtin::Nil))) => match &c.kind {
            ExprKind::Var(_, VarRef::Builtin(b)) => Some(*b),
            _ => None,
        },
        _ => None,
    }
}

/// The argument types and final result of a curried function type, `n` arrows deep.
pub fn arrows(ty: &Type, n: usize) -> (Vec<Type>, Type) {
    let mut args = Vec::new();
    let mut cur = ty.clone();
    while args.len() < n {
        match cur {
            Type::Fun(a, r) => {
                args.push((*a).clone());
                cur = (*r).clone();
            }
            _ => break,
        }
    }
    (args, cur)
}

/// Number of nodes (a size measure for inlining decisions).
pub fn size(e: &E) -> usize {
    let mut n = 1;
    frontend::lin::for_each_child(e, &mut |c| n += size(c));
    n
}

/// Does the term bind any variable (λ, let, dual)?
pub fn has_binders(e: &E) -> bool {
    if matches!(e.kind, ExprKind::Lam(..) | ExprKind::Let(..) | ExprKind::Dual(..)) {
        return true;
    }
    let mut found = false;
    frontend::lin::for_each_child(e, &mut |c| found = found || has_binders(c));
    found
}

/// Free local variables with the type of their first occurrence, each once, in order.
pub fn free_locals_typed(e: &E) -> Vec<(Name, LocalId, Type)> {
    let mut out: Vec<(Name, LocalId, Type)> = Vec::new();
    visit_free(e, &mut |n, id, ty| {
        if !out.iter().any(|(_, j, _)| *j == id) {
            out.push((n.clone(), id, ty.clone()));
        }
    });
    out
}

/// Calls `f` on every free occurrence of a local in `e` (`frontend::lin::visit_free_vars`).
pub fn visit_free(e: &E, f: &mut dyn FnMut(&Name, LocalId, &Type)) {
    frontend::lin::visit_free_vars(e, &mut |v| {
        if let ExprKind::Var(n, VarRef::Local(id)) = &v.kind {
            f(n, *id, &v.ty)
        }
    });
}

/// How often `id` occurs free in `e`.
pub fn uses(e: &E, id: LocalId) -> usize {
    let mut n = 0;
    visit_free(e, &mut |_, j, _| {
        if j == id {
            n += 1
        }
    });
    n
}

/// Does any of `ids` occur free in `e`?
pub fn mentions_any(e: &E, ids: &FxHashSet<LocalId>) -> bool {
    let mut found = false;
    visit_free(e, &mut |_, j, _| found = found || ids.contains(&j));
    found
}

/// A copy of `e` with every binder renamed to a fresh one (change binders stay change binders)
/// and the free locals in `subst` replaced, each occurrence by its own fresh copy.
pub fn copy_fresh(e: &E, subst: &FxHashMap<LocalId, E>, cx: &mut Cx) -> E {
    let mut ren = FxHashMap::default();
    copy(e, subst, &mut ren, cx)
}

fn copy(e: &E, subst: &FxHashMap<LocalId, E>, ren: &mut FxHashMap<LocalId, LocalId>, cx: &mut Cx) -> E {
    let k = |kind| Expr::new(kind, e.span, e.ty.clone());
    match &e.kind {
        ExprKind::Var(n, VarRef::Local(id)) => {
            if let Some(new) = ren.get(id) {
                return k(ExprKind::Var(n.clone(), VarRef::Local(*new)));
            }
            if let Some(t) = subst.get(id) {
                return if has_binders(t) { copy_fresh(t, &FxHashMap::default(), cx) } else { t.clone() };
            }
            e.clone()
        }
        ExprKind::Var(..) | ExprKind::Lit(_) | ExprKind::Zero => e.clone(),
        ExprKind::Lam(p, b) => {
            let (p2, saved) = rename_pat(p, ren, cx);
            let b2 = copy(b, subst, ren, cx);
            restore(ren, saved);
            k(ExprKind::Lam(p2, b2))
        }
        ExprKind::Let(p, a, b) => {
            let a2 = copy(a, subst, ren, cx);
            let (p2, saved) = rename_pat(p, ren, cx);
            let b2 = copy(b, subst, ren, cx);
            restore(ren, saved);
            k(ExprKind::Let(p2, a2, b2))
        }
        ExprKind::Dual(p, s, w) => {
            let (p2, saved) = rename_pat(p, ren, cx);
            let s2 = copy(s, subst, ren, cx);
            restore(ren, saved);
            let w2 = copy(w, subst, ren, cx);
            k(ExprKind::Dual(p2, s2, w2))
        }
        _ => k(map_children(e, &mut |c| copy(c, subst, ren, cx))),
    }
}

type Saved = Vec<(LocalId, Option<LocalId>)>;

fn rename_pat(p: &Rc<Pat>, ren: &mut FxHashMap<LocalId, LocalId>, cx: &mut Cx) -> (Rc<Pat>, Saved) {
    let mut saved = Vec::new();
    fn go(p: &Pat, ren: &mut FxHashMap<LocalId, LocalId>, cx: &mut Cx, saved: &mut Saved) -> Pat {
        let kind = match &p.kind {
            PatKind::Var(n, id) => {
                let new = cx.fresh();
                if cx.change_vars.contains(id) {
                    cx.change_vars.insert(new);
                }
                saved.push((*id, ren.insert(*id, new)));
                PatKind::Var(n.clone(), new)
            }
            PatKind::Tuple(ps) => PatKind::Tuple(ps.iter().map(|q| go(q, ren, cx, saved)).collect()),
            k => k.clone(),
        };
        Pat { kind, span: p.span, ty: p.ty.clone(), ann: None }
    }
    let p2 = go(p, ren, cx, &mut saved);
    (Rc::new(p2), saved)
}

fn restore(ren: &mut FxHashMap<LocalId, LocalId>, saved: Saved) {
    for (id, old) in saved.into_iter().rev() {
        match old {
            Some(o) => ren.insert(id, o),
            None => ren.remove(&id),
        };
    }
}

/// The node kind with each direct child replaced by `f(child)` (binders kept as they are).
pub fn map_children(e: &E, f: &mut dyn FnMut(&E) -> E) -> ExprKind {
    match &e.kind {
        ExprKind::Var(..) | ExprKind::Lit(_) | ExprKind::Zero => e.kind.clone(),
        ExprKind::Lam(p, b) => ExprKind::Lam(p.clone(), f(b)),
        ExprKind::App(a, b) => ExprKind::App(f(a), f(b)),
        ExprKind::Let(p, a, b) => ExprKind::Let(p.clone(), f(a), f(b)),
        ExprKind::If(a, b, c) => ExprKind::If(f(a), f(b), f(c)),
        ExprKind::Bin(op, a, b) => ExprKind::Bin(*op, f(a), f(b)),
        ExprKind::Neg(a) => ExprKind::Neg(f(a)),
        ExprKind::Not(a) => ExprKind::Not(f(a)),
        ExprKind::Tuple(xs) => ExprKind::Tuple(xs.iter().map(&mut *f).collect()),
        ExprKind::Proj(a, i) => ExprKind::Proj(f(a), *i),
        ExprKind::Index(a, b) => ExprKind::Index(f(a), f(b)),
        ExprKind::Array(xs) => ExprKind::Array(xs.iter().map(&mut *f).collect()),
        ExprKind::Bag(xs) => ExprKind::Bag(xs.iter().map(|(x, n)| (f(x), *n)).collect()),
        ExprKind::Map(xs) => ExprKind::Map(xs.iter().map(|(k, v)| (f(k), f(v))).collect()),
        ExprKind::Pullback(a, b) => ExprKind::Pullback(f(a), f(b)),
        ExprKind::Dual(p, a, b) => ExprKind::Dual(p.clone(), f(a), f(b)),
        ExprKind::Derive(a) => ExprKind::Derive(f(a)),
        ExprKind::Ann(a, t) => ExprKind::Ann(f(a), t.clone()),
        ExprKind::Sum(a, b) => ExprKind::Sum(f(a), f(b)),
    }
}

/// Rebuilds `e` with children mapped, keeping span and type.
pub fn rebuild(e: &E, f: &mut dyn FnMut(&E) -> E) -> E {
    Expr::new(map_children(e, f), e.span, e.ty.clone())
}

/// Checks that no `LocalId` is bound twice in `e` (the invariant every ILC pass keeps).
pub fn unique_binders(e: &E) -> Result<(), String> {
    fn go(e: &E, seen: &mut FxHashSet<LocalId>) -> Result<(), String> {
        let pats: Vec<&Rc<Pat>> = match &e.kind {
            ExprKind::Lam(p, _) | ExprKind::Let(p, _, _) | ExprKind::Dual(p, _, _) => vec![p],
            _ => vec![],
        };
        for p in pats {
            for (n, id) in p.binders() {
                if !seen.insert(id) {
                    return Err(format!("binder `{n}` ({id:?}) is bound twice"));
                }
            }
        }
        let mut r = Ok(());
        frontend::lin::for_each_child(e, &mut |c| {
            if r.is_ok() {
                r = go(c, seen)
            }
        });
        r
    }
    go(e, &mut FxHashSet::default())
}

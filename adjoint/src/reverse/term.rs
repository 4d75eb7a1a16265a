//! Term helpers for the reverse-mode transform: typed constructors, fresh copies (every binder
//! renamed, so a body can be emitted twice without breaking `mono`'s unique-binder invariant), free
//! variables, let-series in and out.

use std::rc::Rc;

use frontend::builtins::Builtin;
use frontend::span::Span;
use frontend::syntax::*;
use frontend::types::Type;
use rustc_hash::{FxHashMap, FxHashSet};

/// One `let z = rhs` of a let-series.
#[derive(Clone, Debug)]
pub struct Bind {
    pub id: LocalId,
    pub name: Name,
    pub ty: Type,
    pub rhs: E,
}

impl Bind {
    pub fn var(&self) -> E {
        var(self.id, &self.name, &self.ty)
    }
}

pub fn mk(kind: ExprKind, ty: Type) -> E {
    Expr::new(kind, Span::SYNTHETIC, ty)
}
pub fn var(id: LocalId, name: &Name, ty: &Type) -> E {
    mk(ExprKind::Var(name.clone(), VarRef::Local(id)), ty.clone())
}
pub fn real(x: f64) -> E {
    mk(ExprKind::Lit(Lit::Real(x)), Type::Real)
}
pub fn int(x: i64) -> E {
    mk(ExprKind::Lit(Lit::Int(x)), Type::Int)
}
pub fn bin(op: BinOp, a: &E, b: &E, ty: Type) -> E {
    mk(ExprKind::Bin(op, a.clone(), b.clone()), ty)
}
pub fn rbin(op: BinOp, a: &E, b: &E) -> E {
    bin(op, a, b, Type::Real)
}
pub fn proj(a: &E, i: usize) -> E {
    let ty = match &a.ty {
        Type::Tuple(ts) => ts[i].clone(),
        _ => Type::Unit,
    };
    mk(ExprKind::Proj(a.clone(), i), ty)
}
pub fn tuple(xs: Vec<E>) -> E {
    let ty = Type::tuple(xs.iter().map(|x| x.ty.clone()).collect());
    mk(ExprKind::Tuple(xs), ty)
}
pub fn index(a: &E, i: &E) -> E {
    let ty = match &a.ty {
        Type::Array(t) => (**t).clone(),
        _ => Type::Unit,
    };
    mk(ExprKind::Index(a.clone(), i.clone()), ty)
}
/// `b a1 … an` at the monomorphic type `b : a1 -> … -> an -> result`.
pub fn call(b: Builtin, args: &[E], result: Type) -> E {
    let ty = args.iter().rev().fold(result.clone(), |t, a| Type::fun(a.ty.clone(), t));
    let mut e = mk(ExprKind::Var(b.name().into(), VarRef::Builtin(b)), ty);
    for a in args {
        let rt = match &e.ty {
            Type::Fun(_, r) => (**r).clone(),
            _ => unreachable!(),
        };
        e = mk(ExprKind::App(e, a.clone()), rt);
    }
    e
}
pub fn lam(id: LocalId, name: &Name, ty: &Type, body: E) -> E {
    let t = Type::fun(ty.clone(), body.ty.clone());
    mk(ExprKind::Lam(Rc::new(Pat::var(name.clone(), id, ty.clone())), body), t)
}
pub fn if_(c: &E, a: E, b: E) -> E {
    let ty = a.ty.clone();
    mk(ExprKind::If(c.clone(), a, b), ty)
}

/// Nested `let`s of `binds` around `result`.
pub fn lets(binds: Vec<Bind>, result: E) -> E {
    binds.into_iter().rev().fold(result, |body, b| {
        let ty = body.ty.clone();
        mk(ExprKind::Let(Rc::new(Pat::var(b.name, b.id, b.ty)), b.rhs, body), ty)
    })
}

/// A let-series (A-normal form) as its bindings and result variable. `None` when `e` is not one.
pub fn series(e: &E) -> Option<(Vec<Bind>, E)> {
    let mut binds = Vec::new();
    let mut cur = e;
    loop {
        match &cur.kind {
            ExprKind::Let(p, rhs, rest) => {
                let PatKind::Var(name, id) = &p.kind else { return None };
                binds.push(Bind { id: *id, name: name.clone(), ty: p.ty.clone(), rhs: rhs.clone() });
                cur = rest;
            }
            ExprKind::Var(_, VarRef::Local(_)) => return Some((binds, cur.clone())),
            _ => return None,
        }
    }
}

/// `e` with every child replaced by `f(child)`.
pub fn map_children<Er>(e: &E, f: &mut impl FnMut(&E) -> Result<E, Er>) -> Result<E, Er> {
    use ExprKind as K;
    let kind = match &e.kind {
        K::Var(..) | K::Lit(_) | K::Zero => return Ok(e.clone()),
        K::Lam(p, a) => K::Lam(p.clone(), f(a)?),
        K::Neg(a) => K::Neg(f(a)?),
        K::Not(a) => K::Not(f(a)?),
        K::Proj(a, i) => K::Proj(f(a)?, *i),
        K::Derive(a) => K::Derive(f(a)?),
        K::Ann(a, t) => K::Ann(f(a)?, t.clone()),
        K::App(a, b) => K::App(f(a)?, f(b)?),
        K::Let(p, a, b) => K::Let(p.clone(), f(a)?, f(b)?),
        K::Bin(op, a, b) => K::Bin(*op, f(a)?, f(b)?),
        K::Index(a, b) => K::Index(f(a)?, f(b)?),
        K::Pullback(a, b) => K::Pullback(f(a)?, f(b)?),
        K::Dual(p, a, b) => K::Dual(p.clone(), f(a)?, f(b)?),
        K::Sum(a, b) => K::Sum(f(a)?, f(b)?),
        K::If(a, b, c) => K::If(f(a)?, f(b)?, f(c)?),
        K::Tuple(xs) => K::Tuple(xs.iter().map(&mut *f).collect::<Result<_, _>>()?),
        K::Array(xs) => K::Array(xs.iter().map(&mut *f).collect::<Result<_, _>>()?),
        K::Bag(xs) => K::Bag(xs.iter().map(|(x, n)| Ok((f(x)?, *n))).collect::<Result<_, _>>()?),
        K::Map(xs) => K::Map(xs.iter().map(|(k, v)| Ok((f(k)?, f(v)?))).collect::<Result<_, _>>()?),
    };
    Ok(Expr::new(kind, e.span, e.ty.clone()))
}

/// A copy of `e` with every binder renamed to a fresh id (free variables unchanged).
pub fn refresh(e: &E, fresh: &mut dyn FnMut() -> LocalId) -> E {
    refresh_renaming(e, fresh).0
}

/// [`refresh`], and the renaming of `e`'s binders it made.
pub fn refresh_renaming(e: &E, fresh: &mut dyn FnMut() -> LocalId) -> (E, FxHashMap<LocalId, LocalId>) {
    fn pat(p: &Pat, ren: &mut FxHashMap<LocalId, LocalId>, fresh: &mut dyn FnMut() -> LocalId) -> Pat {
        let kind = match &p.kind {
            PatKind::Var(n, id) => {
                let new = fresh();
                ren.insert(*id, new);
                PatKind::Var(n.clone(), new)
            }
            PatKind::Tuple(ps) => PatKind::Tuple(ps.iter().map(|q| pat(q, ren, fresh)).collect()),
            k => k.clone(),
        };
        Pat { kind, span: p.span, ty: p.ty.clone(), ann: None }
    }
    fn go(e: &E, ren: &mut FxHashMap<LocalId, LocalId>, fresh: &mut dyn FnMut() -> LocalId) -> E {
        use ExprKind as K;
        match &e.kind {
            K::Var(n, VarRef::Local(id)) => match ren.get(id) {
                Some(new) => Expr::new(K::Var(n.clone(), VarRef::Local(*new)), e.span, e.ty.clone()),
                None => e.clone(),
            },
            K::Lam(p, b) => {
                let p = pat(p, ren, fresh);
                Expr::new(K::Lam(Rc::new(p), go(b, ren, fresh)), e.span, e.ty.clone())
            }
            K::Let(p, a, b) => {
                let a = go(a, ren, fresh);
                let p = pat(p, ren, fresh);
                Expr::new(K::Let(Rc::new(p), a, go(b, ren, fresh)), e.span, e.ty.clone())
            }
            K::Dual(p, a, b) => {
                let b = go(b, ren, fresh);
                let p = pat(p, ren, fresh);
                Expr::new(K::Dual(Rc::new(p), go(a, ren, fresh), b), e.span, e.ty.clone())
            }
            _ => map_children::<()>(e, &mut |c| Ok(go(c, ren, fresh))).unwrap_or_else(|_| e.clone()),
        }
    }
    let mut ren = FxHashMap::default();
    let e = go(e, &mut ren, fresh);
    (e, ren)
}

/// The local variables `e` uses but does not bind.
pub fn free_locals(e: &E, out: &mut FxHashSet<LocalId>) {
    frontend::lin::visit_free_locals(e, &mut |_, id, _| {
        out.insert(id);
    });
}

/// Removes bindings nothing after them uses (every term is pure here: a recomputed primal value
/// already succeeded once in the forward phase).
pub fn dce(binds: Vec<Bind>, result: &E) -> Vec<Bind> {
    let mut live = FxHashSet::default();
    free_locals(result, &mut live);
    let mut kept = Vec::new();
    for b in binds.into_iter().rev() {
        if live.contains(&b.id) {
            free_locals(&b.rhs, &mut live);
            kept.push(b);
        }
    }
    kept.reverse();
    kept
}

/// The local id of an atom.
pub fn local(e: &E) -> Option<LocalId> {
    match &e.kind {
        ExprKind::Var(_, VarRef::Local(id)) => Some(*id),
        _ => None,
    }
}

/// `e` with the local variables of `map` renamed (binders are unique, so no capture).
pub fn rename(e: &E, map: &FxHashMap<LocalId, LocalId>) -> E {
    match &e.kind {
        ExprKind::Var(n, VarRef::Local(id)) => match map.get(id) {
            Some(new) => Expr::new(ExprKind::Var(n.clone(), VarRef::Local(*new)), e.span, e.ty.clone()),
            None => e.clone(),
        },
        _ => map_children::<()>(e, &mut |c| Ok(rename(c, map))).unwrap_or_else(|_| e.clone()),
    }
}

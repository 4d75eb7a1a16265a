//! Fold fusion in the derivative the incremental driver runs: a chain of self-maintainable
//! derivative primitives (`foldMap' … (foldBag' … (foldMap' … dx))`, what map-reduce programs
//! derive to, ILC Sec. 4.4) builds every intermediate bag or map of the output change per update;
//! fused, the outer fold's function is applied to the innermost change's entries directly.
//!
//! The laws (groups and folds as in docs/language.md §6):
//! - `foldBag g f` is a homomorphism from `bagGroup` to `g`, and `foldBag g f (singleton x) = f x`;
//! - `foldMap g1 g2 f` is one from `mapGroup g1` to `g2` (the user's promise that each `f k` is a
//!   homomorphism, which `foldMap'` relies on too), and `foldMap g1 g2 f (singletonMap k v) = f k v`;
//! - a homomorphism `h` after a fold is a fold of `h` after the fold's function:
//!   `h (foldBag G u b) = foldBag g (λx. h (u x)) b`, `h (foldMap g0 G u m) = foldMap g0 g (λk v. h (u k v)) m`.
//!
//! On changes (ILC Sec. 4.4, `foldBag' g f _ (gchange bagGroup d) = gchange g (foldBag g f d)`):
//! `foldBag' g f _ (foldMap' g1 bagGroup u _ dx) = foldMap' g1 g (λk v. foldBag g f (u k v)) _ dx`,
//! and likewise for the other three pairs. Both sides take the fast path for the same `dx` (a
//! `gchange` in the innermost fold's group), both recompute from the replacement for a `replace`,
//! and both need the base otherwise; where both compute, they compute the same value.
//!
//! Only groups without `realGroup` are fused, so results stay exact (a fused Real sum would add in
//! a different order); a user's group is never fused (its operation is opaque). The pass runs on
//! the driver's compiled derivative only (`nabla derive` prints the derivative before it).

use std::rc::Rc;

use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::types::Type;
use frontend::Span;

use super::term::*;
use super::Cx;

/// `e` with every fusable fold chain fused (module comment).
pub fn fuse(e: &E, cx: &mut Cx) -> E {
    Fuser { cx }.go(e)
}

struct Fuser<'a, 'p> {
    cx: &'a mut Cx<'p>,
}

/// A builtin applied to exactly `n` arguments: its arguments.
fn call_of(e: &E, b: Builtin, n: usize) -> Option<Vec<E>> {
    let (head, args) = spine(e);
    match &head.kind {
        ExprKind::Var(_, VarRef::Builtin(h)) if *h == b && args.len() == n => Some(args.into_iter().cloned().collect()),
        _ => None,
    }
}

fn builtin_of(e: &E) -> Option<Builtin> {
    match &e.kind {
        ExprKind::Var(_, VarRef::Builtin(b)) => Some(*b),
        _ => None,
    }
}

/// A builtin group whose arithmetic is exact (Int, Bag, and maps and pairs of them), as a term
/// without binders: its structure, for comparison.
fn exact_group(g: &E) -> Option<String> {
    if let Some(b) = builtin_of(g) {
        return match b {
            Builtin::IntGroup => Some("int".into()),
            Builtin::BagGroup => Some("bag".into()),
            _ => None,
        };
    }
    if let Some(args) = call_of(g, Builtin::MapGroup, 1) {
        return Some(format!("map({})", exact_group(&args[0])?));
    }
    if let Some(args) = call_of(g, Builtin::PairGroup, 2) {
        return Some(format!("pair({},{})", exact_group(&args[0])?, exact_group(&args[1])?));
    }
    None
}

fn is_bag_group(g: &E) -> bool {
    builtin_of(g) == Some(Builtin::BagGroup)
}

/// `g` is `mapGroup g1'` with `g1'` the same exact group as `g1`.
fn is_map_group_of(g: &E, g1: &E) -> bool {
    match (call_of(g, Builtin::MapGroup, 1), exact_group(g1)) {
        (Some(args), Some(s)) => exact_group(&args[0]).is_some_and(|t| t == s),
        _ => false,
    }
}

/// `head a1 … an` with the head typed from its arguments and the result type.
fn call(b: Builtin, args: Vec<E>, res: Type, span: Span) -> E {
    let ty = args.iter().rev().fold(res, |r, a| Type::fun(a.ty.clone(), r));
    app_n(builtin(b, ty, span), args, span)
}

/// Is `e` a variable or a literal (free to duplicate and to move)?
fn atomic(e: &E) -> bool {
    matches!(e.kind, ExprKind::Var(..) | ExprKind::Lit(_))
}

/// Occurrences of `id` in `e`, and whether any is under a λ.
fn occurrences(e: &E, id: LocalId) -> (usize, bool) {
    fn go(e: &E, id: LocalId, under: bool, n: &mut usize, lam: &mut bool) {
        match &e.kind {
            ExprKind::Var(_, VarRef::Local(j)) if *j == id => {
                *n += 1;
                *lam |= under;
            }
            ExprKind::Lam(_, b) => go(b, id, true, n, lam),
            ExprKind::Dual(_, s, w) => {
                go(s, id, true, n, lam);
                go(w, id, under, n, lam);
            }
            _ => frontend::lin::for_each_child(e, &mut |c| go(c, id, under, n, lam)),
        }
    }
    let (mut n, mut lam) = (0, false);
    go(e, id, false, &mut n, &mut lam);
    (n, lam)
}

/// `e` with the free occurrences of `id` replaced by `by` (binders are unique: no capture).
fn subst(e: &E, id: LocalId, by: &E) -> E {
    match &e.kind {
        ExprKind::Var(_, VarRef::Local(j)) if *j == id => by.clone(),
        ExprKind::Var(..) | ExprKind::Lit(_) | ExprKind::Zero => e.clone(),
        _ => rebuild(e, &mut |c| subst(c, id, by)),
    }
}

impl Fuser<'_, '_> {
    fn fresh_var(&mut self, name: &str, ty: &Type, span: Span) -> (Rc<Pat>, E) {
        let id = self.cx.fresh();
        (pat_var(name.into(), id, ty.clone(), span), var(name.into(), id, ty.clone(), span))
    }

    fn go(&mut self, e: &E) -> E {
        let e = rebuild(e, &mut |c| self.go(c));
        self.rewrite(&e).map_or(e, |r| self.go(&r))
    }

    /// One rewrite at the root of `e` (its children are already rewritten), if one applies.
    fn rewrite(&mut self, e: &E) -> Option<E> {
        let span = e.span;
        match &e.kind {
            // β: a parameter bound to a variable or literal, or used once outside any λ, is
            // substituted; else it becomes a `let`.
            ExprKind::App(f, a) => {
                if let ExprKind::Lam(p, body) = &f.kind {
                    return Some(self.bind(p, a, body, span));
                }
            }
            ExprKind::Let(p, a, body) => {
                match (&p.kind, &a.kind) {
                    (PatKind::Var(_, id), _) if atomic(a) || occurrences(body, *id) == (1, false) => {
                        return Some(subst(body, *id, a))
                    }
                    (PatKind::Wild, _) if atomic(a) => return Some(body.clone()),
                    // `let (x, y) = (a, b)` binds each component.
                    (PatKind::Tuple(ps), ExprKind::Tuple(xs)) if ps.len() == xs.len() => {
                        let mut out = body.clone();
                        for (q, x) in ps.iter().zip(xs).rev() {
                            out = let_(Rc::new(q.clone()), x.clone(), out, span);
                        }
                        return Some(out);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        if let Some(args) = call_of(e, Builtin::FoldBag, 3) {
            return self.fold_bag(&args[0], &args[1], &args[2], &e.ty, span);
        }
        if let Some(args) = call_of(e, Builtin::FoldMap, 4) {
            return self.fold_map(&args[0], &args[1], &args[2], &args[3], &e.ty, span);
        }
        if let Some(args) = call_of(e, Builtin::DFoldBag, 4) {
            let (g, f, dzs) = (&args[0], &args[1], &args[3]);
            exact_group(g)?;
            if let Some(inner) = call_of(dzs, Builtin::DFoldMap, 5) {
                // foldBag' g f _ (foldMap' g1 bagGroup u _ dx) = foldMap' g1 g (λk v. foldBag g f (u k v)) _ dx
                if is_bag_group(&inner[1]) {
                    exact_group(&inner[0])?;
                    let h = self.compose2(&inner[2], &mut |s, x, span| s.fold_bag_call(g, f, x, span), span);
                    return Some(call(
                        Builtin::DFoldMap,
                        vec![inner[0].clone(), g.clone(), h, inner[3].clone(), inner[4].clone()],
                        e.ty.clone(),
                        span,
                    ));
                }
            }
            if let Some(inner) = call_of(dzs, Builtin::DFoldBag, 4) {
                // foldBag' g f _ (foldBag' bagGroup u _ dx) = foldBag' g (λx. foldBag g f (u x)) _ dx
                if is_bag_group(&inner[0]) {
                    let h = self.compose1(&inner[1], &mut |s, x, span| s.fold_bag_call(g, f, x, span), span);
                    return Some(call(
                        Builtin::DFoldBag,
                        vec![g.clone(), h, inner[2].clone(), inner[3].clone()],
                        e.ty.clone(),
                        span,
                    ));
                }
            }
        }
        if let Some(args) = call_of(e, Builtin::DFoldMap, 5) {
            let (g1, g2, f, dm) = (&args[0], &args[1], &args[2], &args[4]);
            exact_group(g2)?;
            if let Some(inner) = call_of(dm, Builtin::DFoldBag, 4) {
                // foldMap' g1 g2 f _ (foldBag' (mapGroup g1) u _ dx) = foldBag' g2 (λx. foldMap g1 g2 f (u x)) _ dx
                if is_map_group_of(&inner[0], g1) {
                    let h = self.compose1(&inner[1], &mut |s, x, span| s.fold_map_call(g1, g2, f, x, span), span);
                    return Some(call(
                        Builtin::DFoldBag,
                        vec![g2.clone(), h, inner[2].clone(), inner[3].clone()],
                        e.ty.clone(),
                        span,
                    ));
                }
            }
            if let Some(inner) = call_of(dm, Builtin::DFoldMap, 5) {
                // foldMap' g1 g2 f _ (foldMap' g0 (mapGroup g1) u _ dx) = foldMap' g0 g2 (λk v. foldMap g1 g2 f (u k v)) _ dx
                if is_map_group_of(&inner[1], g1) {
                    exact_group(&inner[0])?;
                    let h = self.compose2(&inner[2], &mut |s, x, span| s.fold_map_call(g1, g2, f, x, span), span);
                    return Some(call(
                        Builtin::DFoldMap,
                        vec![inner[0].clone(), g2.clone(), h, inner[3].clone(), inner[4].clone()],
                        e.ty.clone(),
                        span,
                    ));
                }
            }
        }
        None
    }

    /// `(λp. body) a`, reduced (see `rewrite`).
    fn bind(&mut self, p: &Rc<Pat>, a: &E, body: &E, span: Span) -> E {
        match &p.kind {
            PatKind::Var(_, id) if atomic(a) || occurrences(body, *id) == (1, false) => subst(body, *id, a),
            PatKind::Wild if atomic(a) => body.clone(),
            _ => let_(p.clone(), a.clone(), body.clone(), span),
        }
    }

    /// `λx. outer (u x)` for a one-argument function term `u`.
    fn compose1(&mut self, u: &E, outer: &mut dyn FnMut(&mut Self, E, Span) -> E, span: Span) -> E {
        let Type::Fun(a, _) = &u.ty else { unreachable!("a fold's function has a function type") };
        let (p, x) = self.fresh_var("x", a, span);
        let inner = self.go(&app(u.clone(), x, span));
        let body = outer(self, inner, span);
        lam(p, body, span)
    }

    /// `λk v. outer (u k v)` for a two-argument function term `u`.
    fn compose2(&mut self, u: &E, outer: &mut dyn FnMut(&mut Self, E, Span) -> E, span: Span) -> E {
        let (args, _) = arrows(&u.ty, 2);
        let (pk, k) = self.fresh_var("k", &args[0], span);
        let (pv, v) = self.fresh_var("v", &args[1], span);
        let inner = self.go(&app_n(u.clone(), [k, v], span));
        let body = outer(self, inner, span);
        lam(pk, lam(pv, body, span), span)
    }

    /// `foldBag g f e`, fused where it can be.
    fn fold_bag_call(&mut self, g: &E, f: &E, e: E, span: Span) -> E {
        let res = match &g.ty {
            Type::Group(t) => (**t).clone(),
            t => t.clone(),
        };
        let plain = call(Builtin::FoldBag, vec![g.clone(), f.clone(), e.clone()], res.clone(), span);
        match self.fold_bag(g, f, &e, &res, span) {
            Some(r) => self.go(&r),
            None => plain,
        }
    }

    /// `foldMap g1 g2 f e`, fused where it can be.
    fn fold_map_call(&mut self, g1: &E, g2: &E, f: &E, e: E, span: Span) -> E {
        let res = match &g2.ty {
            Type::Group(t) => (**t).clone(),
            t => t.clone(),
        };
        let plain = call(Builtin::FoldMap, vec![g1.clone(), g2.clone(), f.clone(), e.clone()], res.clone(), span);
        match self.fold_map(g1, g2, f, &e, &res, span) {
            Some(r) => self.go(&r),
            None => plain,
        }
    }

    /// A rewrite of `foldBag g f e` (type `ty`), if one applies.
    fn fold_bag(&mut self, g: &E, f: &E, e: &E, ty: &Type, span: Span) -> Option<E> {
        exact_group(g)?;
        // foldBag g f (let p = a in b) = let p = a in foldBag g f b (binders are unique).
        if let ExprKind::Let(p, a, b) = &e.kind {
            let inner = self.fold_bag_call(g, f, b.clone(), span);
            return Some(let_(p.clone(), a.clone(), inner, span));
        }
        // foldBag g f (singleton x) = f x
        if let Some(args) = call_of(e, Builtin::Singleton, 1) {
            return Some(app(f.clone(), args[0].clone(), span));
        }
        // foldBag g f (foldBag bagGroup u b) = foldBag g (λx. foldBag g f (u x)) b
        if let Some(inner) = call_of(e, Builtin::FoldBag, 3) {
            if is_bag_group(&inner[0]) {
                let h = self.compose1(&inner[1], &mut |s, x, span| s.fold_bag_call(g, f, x, span), span);
                return Some(call(Builtin::FoldBag, vec![g.clone(), h, inner[2].clone()], ty.clone(), span));
            }
        }
        // foldBag g f (foldMap g1 bagGroup u m) = foldMap g1 g (λk v. foldBag g f (u k v)) m
        if let Some(inner) = call_of(e, Builtin::FoldMap, 4) {
            if is_bag_group(&inner[1]) && exact_group(&inner[0]).is_some() {
                let h = self.compose2(&inner[2], &mut |s, x, span| s.fold_bag_call(g, f, x, span), span);
                return Some(call(
                    Builtin::FoldMap,
                    vec![inner[0].clone(), g.clone(), h, inner[3].clone()],
                    ty.clone(),
                    span,
                ));
            }
        }
        None
    }

    /// A rewrite of `foldMap g1 g2 f e` (type `ty`), if one applies.
    fn fold_map(&mut self, g1: &E, g2: &E, f: &E, e: &E, ty: &Type, span: Span) -> Option<E> {
        exact_group(g1)?;
        exact_group(g2)?;
        if let ExprKind::Let(p, a, b) = &e.kind {
            let inner = self.fold_map_call(g1, g2, f, b.clone(), span);
            return Some(let_(p.clone(), a.clone(), inner, span));
        }
        // foldMap g1 g2 f (singletonMap k v) = f k v
        if let Some(args) = call_of(e, Builtin::SingletonMap, 2) {
            return Some(app_n(f.clone(), [args[0].clone(), args[1].clone()], span));
        }
        // foldMap g1 g2 f (foldBag (mapGroup g1) u b) = foldBag g2 (λx. foldMap g1 g2 f (u x)) b
        if let Some(inner) = call_of(e, Builtin::FoldBag, 3) {
            if is_map_group_of(&inner[0], g1) {
                let h = self.compose1(&inner[1], &mut |s, x, span| s.fold_map_call(g1, g2, f, x, span), span);
                return Some(call(Builtin::FoldBag, vec![g2.clone(), h, inner[2].clone()], ty.clone(), span));
            }
        }
        // foldMap g1 g2 f (foldMap g0 (mapGroup g1) u m) = foldMap g0 g2 (λk v. foldMap g1 g2 f (u k v)) m
        if let Some(inner) = call_of(e, Builtin::FoldMap, 4) {
            if is_map_group_of(&inner[1], g1) && exact_group(&inner[0]).is_some() {
                let h = self.compose2(&inner[2], &mut |s, x, span| s.fold_map_call(g1, g2, f, x, span), span);
                return Some(call(
                    Builtin::FoldMap,
                    vec![inner[0].clone(), g2.clone(), h, inner[3].clone()],
                    ty.clone(),
                    span,
                ));
            }
        }
        None
    }
}

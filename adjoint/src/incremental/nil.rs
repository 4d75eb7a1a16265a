//! Pass 2: nil-change propagation.
//!
//! A closed term's change is nil (ILC Sec. 3.2: Derive(c) = 0_c; Theorem 2.10); so is any change
//! term whose free change variables are all nil, and a let-bound change of a nil change term. With
//! that knowledge:
//! - a primitive whose function and group arguments' changes are nil gets its specialised,
//!   self-maintainable derivative (`table::specialisation`: ILC Sec. 4.4, foldBag' when dG, df are
//!   nil; Sec. 4.3, `map f` is self-maintainable when f is closed);
//! - a nil change at a type with a canonical group becomes the constant `gchange g zero`, which
//!   reads nothing.

use frontend::syntax::*;
use frontend::types::Type;
use rustc_hash::FxHashSet;

use super::table;
use super::term::*;
use super::Cx;

/// Propagates nil changes through `e` (see the module comment).
pub fn propagate(e: &E, cx: &Cx) -> E {
    let mut nil = cx.nil_vars.clone();
    go(e, cx, &mut nil)
}

/// Is the change term `e` nil, given the change variables known nil?
pub fn is_nil(e: &E, cx: &Cx, nil: &FxHashSet<LocalId>) -> bool {
    if is_nil_app(e) || matches!(e.kind, ExprKind::Derive(_)) {
        return true;
    }
    let mut all = true;
    visit_free(e, &mut |_, id, _| {
        if cx.change_vars.contains(&id) && !nil.contains(&id) {
            all = false;
        }
    });
    all
}

fn go(e: &E, cx: &Cx, nil: &mut FxHashSet<LocalId>) -> E {
    match &e.kind {
        ExprKind::Let(p, r, b) => {
            let r2 = go(r, cx, nil);
            let binders = p.binders();
            let is_change = !binders.is_empty() && binders.iter().all(|(_, id)| cx.change_vars.contains(id));
            let r2 = if is_change { as_constant(&r2, cx, nil) } else { r2 };
            if is_change && is_nil(&r2, cx, nil) {
                nil.extend(binders.iter().map(|(_, id)| *id));
            }
            let b2 = go(b, cx, nil);
            let_(p.clone(), r2, b2, e.span)
        }
        ExprKind::App(..) => {
            let (head, args) = deriv_spine(e);
            let head2 = if nil_of_builtin(&head).is_some() { head.clone() } else { go(&head, cx, nil) };
            let args2: Vec<E> = args.iter().map(|a| go(a, cx, nil)).collect();
            match specialise(&head2, &args2, e, cx, nil) {
                Some(s) => s,
                None => rebuild_spine(e, head2, args2),
            }
        }
        _ => rebuild(e, &mut |c| go(c, cx, nil)),
    }
}

/// `(nil p) a1 da1 ... an dan` with the required changes nil → `p' a1 ... an dan` (those dropped).
fn specialise(head: &E, args: &[E], e: &E, cx: &Cx, nil: &FxHashSet<LocalId>) -> Option<E> {
    let b = nil_of_builtin(head)?;
    let ExprKind::App(_, p) = &head.kind else { return None };
    let sp = table::specialisation(b)?;
    let last = *sp.nil_changes.iter().max()?;
    if args.len() < 2 * (last + 1) {
        return None;
    }
    if !sp.nil_changes.iter().all(|i| is_nil(&args[2 * i + 1], cx, nil)) {
        return None;
    }
    let d = builtin(sp.deriv, table::specialised_type(&p.ty, &sp), p.span);
    let mut kept = Vec::new();
    for (j, a) in args.iter().enumerate() {
        let is_dropped_change = j % 2 == 1 && j < 2 * sp.arity && sp.nil_changes.contains(&(j / 2));
        if !is_dropped_change {
            kept.push(a.clone());
        }
    }
    Some(app_n(d, kept, e.span))
}

/// A nil change term at a type with a canonical group becomes `gchange g zero`.
fn as_constant(e: &E, cx: &Cx, nil: &FxHashSet<LocalId>) -> E {
    match &e.ty {
        Type::Delta(t) if is_nil(e, cx, nil) => table::nil_constant(t, e.span).unwrap_or_else(|| e.clone()),
        _ => e.clone(),
    }
}

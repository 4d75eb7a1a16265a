//! Pass 5: dead-code elimination of the base computations a derivative never reads.
//!
//! Each derivative primitive's fast path (changes in the group it expects, or whole replacements
//! where no other base is needed) ignores some base arguments (`table::unread_args`); the nil change
//! of a value with a canonical group ignores the value. Those arguments become `_`, and then every
//! `let` whose binders nothing reads is dropped — the base computations a self-maintainable
//! derivative would otherwise run (ILC Sec. 4.3 used laziness; this is the DCE it suggests).
//!
//! The result is exact on the fast path. On any other change a primitive finds `_` where it needs a
//! base value and the runtime says so, and the caller falls back to the total derivative.

use frontend::builtins::Builtin;
use frontend::syntax::*;

use super::table;
use super::term::*;

/// Replaces unread base arguments by `_` and drops dead lets.
pub fn eliminate(e: &E) -> E {
    match &e.kind {
        ExprKind::App(..) => {
            let (head, args) = spine(e);
            let unread: &[usize] = match &head.kind {
                ExprKind::Var(_, VarRef::Builtin(Builtin::Nil))
                    if args.len() == 1 && table::nil_constant(&args[0].ty, e.span).is_some() =>
                {
                    &[0]
                }
                ExprKind::Var(_, VarRef::Builtin(b)) => table::unread_args(*b),
                _ => &[],
            };
            let head2 = if unread.is_empty() && !matches!(head.kind, ExprKind::Var(..)) {
                eliminate(head)
            } else {
                head.clone()
            };
            let args2 = args.iter().enumerate().map(|(i, a)| {
                if unread.contains(&i) {
                    no_base(a.ty.clone(), a.span)
                } else {
                    eliminate(a)
                }
            });
            rebuild_spine(e, head2, args2.collect())
        }
        ExprKind::Let(p, r, b) => {
            let b2 = eliminate(b);
            if p.binders().iter().any(|(_, id)| uses(&b2, *id) > 0) {
                let_(p.clone(), eliminate(r), b2, e.span)
            } else {
                b2
            }
        }
        _ => rebuild(e, &mut eliminate),
    }
}

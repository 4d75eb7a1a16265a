//! Pass 1: inline the derivatives of the definitions a derived term names.
//!
//! Derive turns a reference to definition `d` into `Derive(d)` (d's derivative). Inlining a fresh
//! copy of `Derive(body of d)` there lets the later passes see, for example, that `mapReduce`'s
//! `dmapper` is nil where `histogram` calls it with a closed function. Definitions are not
//! recursive, so inlining terminates; a size budget keeps pathological programs in check (what is
//! left is evaluated as a derived definition at run time).

use frontend::syntax::*;
use frontend::Diagnostic;
use rustc_hash::FxHashMap;

use super::term::*;
use super::Cx;

/// The most nodes inlining may add to one term.
pub const INLINE_BUDGET: usize = 200_000;

/// Replaces `Derive(d)` nodes by their definitions' derivatives.
pub fn inline_derived(e: &E, cx: &mut Cx) -> Result<E, Diagnostic> {
    let mut budget = INLINE_BUDGET;
    go(e, cx, &mut budget)
}

fn go(e: &E, cx: &mut Cx, budget: &mut usize) -> Result<E, Diagnostic> {
    if let ExprKind::Derive(inner) = &e.kind {
        if let ExprKind::Var(_, VarRef::Global(d)) = &inner.kind {
            let raw = cx.derived_def(*d)?;
            let n = size(&raw);
            if n <= *budget {
                *budget -= n;
                let copy = copy_fresh(&raw, &FxHashMap::default(), cx);
                return go(&copy, cx, budget);
            }
        }
        return Ok(e.clone());
    }
    let mut err = None;
    let out = rebuild(e, &mut |c| match go(c, cx, budget) {
        Ok(x) => x,
        Err(d) => {
            err.get_or_insert(d);
            c.clone()
        }
    });
    match err {
        Some(d) => Err(d),
        None => Ok(out),
    }
}

//! Whole-program facts lowering needs before it starts: which closure types carry a failure site,
//! and the free variables of a λ.

use frontend::syntax::{ExprKind, VarRef, E};
use frontend::types::Type;
use rustc_hash::FxHashSet;

use super::type_key;
use super::value::{after_args, VarKey};
use crate::mono::MonoProgram;

/// Closure types whose tag functions take a site: the type a builtin has one argument before it is
/// saturated. When a closure of such a type is a builtin's partial application, the builtin runs
/// (and may fail) inside the tag function, and the interpreter reports the failure at the
/// application, which only the caller knows.
pub(crate) fn span_carrying_types(mono: &MonoProgram) -> FxHashSet<String> {
    let mut out = FxHashSet::default();
    for d in &mono.defs {
        collect_builtin_types(&d.body, &mut out);
    }
    out
}

fn collect_builtin_types(e: &E, out: &mut FxHashSet<String>) {
    if let ExprKind::Var(_, VarRef::Builtin(b)) = &e.kind {
        if b.arity() > 0 {
            if let Ok(t) = after_args(&e.ty, b.arity() - 1) {
                out.insert(type_key(&t));
            }
        }
    }
    frontend::lin::for_each_child(e, &mut |c| collect_builtin_types(c, out));
}

/// The variables (locals and definitions) `e` uses but does not bind, in order of first use, with
/// their types.
pub(crate) fn free_vars(e: &E) -> Vec<(VarKey, Type)> {
    let mut seen = FxHashSet::default();
    let mut out = Vec::new();
    frontend::lin::visit_free_vars(e, &mut |v| {
        let key = match &v.kind {
            ExprKind::Var(_, VarRef::Local(id)) => VarKey::Local(id.0),
            ExprKind::Var(_, VarRef::Global(d)) => VarKey::Global(d.0),
            _ => return,
        };
        if seen.insert(key) {
            out.push((key, v.ty.clone()));
        }
    });
    out
}

//! Whole-program facts lowering needs before it starts: which constructs it cannot compile yet,
//! which closure types carry a failure site, and the free variables of a λ.

use frontend::builtins::Builtin;
use frontend::syntax::{ExprKind, VarRef, E};
use frontend::types::Type;
use frontend::Span;
use rustc_hash::FxHashSet;

use super::type_key;
use super::value::{after_args, VarKey};
use crate::mono::MonoProgram;

/// A construct the compiler does not handle yet, and where it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Unsupported {
    /// What it is, for a note: "`pullback`", "`<+>` on functions", ….
    pub what: String,
    pub span: Span,
}

/// The first construct of `mono` that lowering does not compile yet — reverse mode (`pullback`,
/// `dual`, `star`, `unstar`, `omega`, `jac`, `grad`, `vjp`, `jacobian`), the paper's internal 0 and
/// sums — or `None` when the whole program compiles. Callers evaluate such programs with the
/// reference interpreter. (ILC compiles: `adjoint::incremental::expand` rewrites `derive`, `nil` of
/// functions and `<+>`/`<->` on functions into ordinary terms first; see `lower::changes`.)
pub fn unsupported(mono: &MonoProgram) -> Option<Unsupported> {
    let mut found = None;
    for d in &mono.defs {
        find_unsupported(&d.body, &mut found);
        if found.is_some() {
            break;
        }
    }
    found
}

fn find_unsupported(e: &E, found: &mut Option<Unsupported>) {
    if found.is_some() {
        return;
    }
    let what = match &e.kind {
        ExprKind::Pullback(..) => Some("`pullback`".to_string()),
        ExprKind::Dual(..) => Some("`dual`".to_string()),
        ExprKind::Zero | ExprKind::Sum(..) => Some("the paper's 0 and sums".to_string()),
        ExprKind::Var(_, VarRef::Builtin(b)) if is_uncompiled_builtin(*b) => Some(format!("`{}`", b.name())),
        _ => None,
    };
    if let Some(what) = what {
        *found = Some(Unsupported { what, span: e.span });
        return;
    }
    frontend::lin::for_each_child(e, &mut |c| find_unsupported(c, found));
}

/// Builtins of reverse mode, which only the interpreter evaluates.
fn is_uncompiled_builtin(b: Builtin) -> bool {
    use Builtin as B;
    matches!(b, B::Star | B::Unstar | B::Omega | B::Jac | B::Grad | B::Vjp | B::Jacobian)
}

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

//! ILC in the reference interpreter (skeleton).

use frontend::builtins::Builtin;
use frontend::types::Type;
use frontend::{Diagnostic, Span};

use super::{EvalResult, Interp};
use crate::value::*;

/// `nil v` (ILC Def. 2.2).
pub fn nil(_it: &mut Interp, _ty: &Type, _v: &Value, span: Span) -> EvalResult {
    Err(Diagnostic::error(span, "the interpreter does not evaluate `nil` yet"))
}

/// Calls a saturated internal derivative primitive.
pub fn call(_it: &mut Interp, b: Builtin, _ty: &Type, _args: Vec<Value>, span: Span) -> EvalResult {
    Err(Diagnostic::error(span, format!("internal: `{}` is not evaluated yet", b.name())))
}

//! Per-site fallback at run time. A differentiation site that `adjoint::reverse` does not compile
//! becomes `interp' k args` (`anf::mono::Interpreted`): compiled code passes the words of the
//! site's free locals to the support function `nabla_interp`, which evaluates the site's term with
//! the reference interpreter and writes its value's words back (arrays in the call's arena). The
//! rest of the program stays compiled: one uncompiled `grad` no longer sends every loop of the
//! program to the interpreter.
//!
//! The interpreter evaluates the definitions a site refers to once per [`Sites`] (in order, as
//! `interp::run` does) and keeps them for the site's later calls.

use std::cell::RefCell;
use std::rc::Rc;

use anf::mono::Interpreted;
use frontend::syntax::{ExprKind, VarRef, E};
use frontend::types::Type;
use frontend::Diagnostic;
use jit::Word;

use crate::engine::{to_value, Layout};
use crate::interp::Interp;
use crate::native::{CallCtx, NativeError, STATUS_INTERPRETED};
use crate::value::{Env, Value};

/// The interpreted sites of one compiled program.
pub struct Sites {
    interpreted: Rc<Interpreted>,
    /// Per site: the layout of its argument (the tuple of its free locals, the one, or `()`), of
    /// its result, and the definitions it needs evaluated (those it names and, transitively,
    /// those they name), in order.
    shapes: Vec<(Layout, Layout, Vec<usize>)>,
    /// The definitions the interpreter has evaluated so far (`None`: not yet).
    globals: RefCell<Vec<Option<Value>>>,
}

impl std::fmt::Debug for Sites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sites({})", self.shapes.len())
    }
}

impl Sites {
    pub fn new(interpreted: Rc<Interpreted>) -> Sites {
        let shapes = interpreted
            .sites
            .iter()
            .map(|s| {
                let arg = match s.params.as_slice() {
                    [(_, _, t)] => Layout::of(t),
                    ps => Layout::of(&Type::tuple(ps.iter().map(|(_, _, t)| t.clone()).collect())),
                };
                (arg, Layout::of(&s.body.ty), needed(&interpreted.program, &s.body))
            })
            .collect();
        Sites { interpreted, shapes, globals: RefCell::new(Vec::new()) }
    }

    /// The note for the program: one line per site, `what (at @lo..hi) is not compiled yet; …`.
    pub fn note(&self) -> String {
        let lines: Vec<String> = self
            .interpreted
            .sites
            .iter()
            .map(|s| {
                format!(
                    "{} (at @{}..{}) is not compiled yet; that site is evaluated by the reference interpreter",
                    s.what, s.span.lo, s.span.hi
                )
            })
            .collect();
        lines.join("\n")
    }

    /// Evaluates site `k` at the words at `args`, writing its value's words at `out`. An error of
    /// the interpreter is kept whole in the context (`CallCtx::interpreted_error`).
    ///
    /// # Safety
    /// `args` must hold the words of the site's argument layout (arrays alive in `cx`), and `out`
    /// room for the words of its result layout.
    pub unsafe fn call(&self, cx: &mut CallCtx, k: i64, args: *const u64, out: *mut u64) -> Result<(), NativeError> {
        let bad = || NativeError::new(STATUS_INTERPRETED, format!("internal error: no interpreted site {k}"));
        let i = usize::try_from(k).map_err(|_| bad())?;
        let (site, (arg_l, res_l, need)) = self.interpreted.sites.get(i).zip(self.shapes.get(i)).ok_or_else(bad)?;
        let n = arg_l.words();
        let mut words = (0..n).map(|j| Word(*args.add(j)));
        let arg = to_value(arg_l, &mut words);
        let value = self.eval(site, arg, need).map_err(|d| {
            let e = NativeError::new(STATUS_INTERPRETED, d.message.clone());
            cx.set_interpreted_error(d);
            e
        })?;
        let mut flat = Vec::with_capacity(res_l.words());
        encode(cx, res_l, &value, &mut flat)?;
        for (j, w) in flat.into_iter().enumerate() {
            *out.add(j) = w;
        }
        Ok(())
    }

    fn eval(&self, site: &anf::mono::InterpretedSite, arg: Value, need: &[usize]) -> Result<Value, Diagnostic> {
        let mut globals = self.globals.borrow_mut();
        eval_site(&self.interpreted.program, site, arg, need, &mut globals)
    }
}

/// The value of interpreted site `k` of `interpreted` at `arg`, evaluating the definitions it
/// needs first (what the interpreter does for `interp' k arg` in a transformed program).
pub fn eval_interpreted(
    interpreted: &Interpreted,
    k: i64,
    arg: Value,
    span: frontend::Span,
) -> Result<Value, Diagnostic> {
    let site = usize::try_from(k)
        .ok()
        .and_then(|k| interpreted.sites.get(k))
        .ok_or_else(|| Diagnostic::error(span, format!("internal: no interpreted site {k}")))?;
    let need = needed(&interpreted.program, &site.body);
    eval_site(&interpreted.program, site, arg, &need, &mut Vec::new())
}

/// Evaluates `site` at `arg` with the definitions of `program` in `globals` (those in `need`
/// evaluated first, in order, and kept there for later calls). Definitions the site does not
/// need are never evaluated: their slots hold `()`, which nothing reads.
fn eval_site(
    program: &anf::mono::MonoProgram,
    site: &anf::mono::InterpretedSite,
    arg: Value,
    need: &[usize],
    globals: &mut Vec<Option<Value>>,
) -> Result<Value, Diagnostic> {
    let mut it = Interp::new(program);
    for &d in need {
        if globals.len() <= d {
            globals.resize(d + 1, None);
        }
        if globals[d].is_none() {
            it.globals = globals[..d].iter().map(|g| g.clone().unwrap_or(Value::Unit)).collect();
            globals[d] = Some(it.eval(&program.defs[d].body, &Env::default())?);
        }
    }
    it.globals = globals.iter().map(|g| g.clone().unwrap_or(Value::Unit)).collect();
    let env = match (site.params.as_slice(), &arg) {
        ([(id, _, _)], _) => Env::default().bind(*id, arg.clone()),
        (ps, Value::Tuple(vs)) => {
            ps.iter().zip(vs.iter()).fold(Env::default(), |env, ((id, _, _), v)| env.bind(*id, v.clone()))
        }
        _ => Env::default(),
    };
    it.eval(&site.body, &env)
}

/// The definitions of `program` that evaluating `e` reads: those it names and, transitively,
/// those their bodies name (in order).
fn needed(program: &anf::mono::MonoProgram, e: &E) -> Vec<usize> {
    let mut seen = vec![false; program.defs.len()];
    let mut stack = Vec::new();
    globals_named(e, &mut stack);
    while let Some(d) = stack.pop() {
        if d < seen.len() && !seen[d] {
            seen[d] = true;
            globals_named(&program.defs[d].body, &mut stack);
        }
    }
    (0..seen.len()).filter(|&d| seen[d]).collect()
}

/// Pushes every definition `e` names.
fn globals_named(e: &E, out: &mut Vec<usize>) {
    if let ExprKind::Var(_, VarRef::Global(d)) = &e.kind {
        out.push(d.0 as usize);
    }
    frontend::lin::for_each_child(e, &mut |c| globals_named(c, out));
}

/// Writes `v` as words of layout `l` onto `out`, arrays made in `cx`'s arena.
fn encode(cx: &mut CallCtx, l: &Layout, v: &Value, out: &mut Vec<u64>) -> Result<(), NativeError> {
    match (l, v) {
        (Layout::Real, Value::Real(x)) => out.push(x.to_bits()),
        (Layout::Int, Value::Int(n)) => out.push(*n as u64),
        (Layout::Bool, Value::Bool(b)) => out.push(Word::from_bool(*b).0),
        (Layout::Unit, _) => {}
        (Layout::Tuple(ls), Value::Tuple(vs)) if ls.len() == vs.len() => {
            for (l, v) in ls.iter().zip(vs.iter()) {
                encode(cx, l, v, out)?;
            }
        }
        (Layout::Array(e), Value::Array(vs)) => {
            let n = e.words();
            let mut elems = Vec::with_capacity(vs.len() * n);
            for v in vs.iter() {
                encode(cx, e, v, &mut elems)?;
            }
            let (array, slots) = cx.new_array_slots(vs.len(), n)?;
            // SAFETY: the array has room for `len * n` slots.
            unsafe { std::ptr::copy_nonoverlapping(elems.as_ptr(), slots, elems.len()) };
            out.push(array as u64);
        }
        (l, v) => {
            return Err(NativeError::new(
                STATUS_INTERPRETED,
                format!("internal error: the interpreter gave {v} where compiled code expects {l:?}"),
            ))
        }
    }
    Ok(())
}

//! Pass 4: the self-maintainability analysis (ILC Sec. 4.3). A derivative is self-maintainable
//! when it uses no base input, only the changes.
//!
//! A variable is *read* where it occurs in live code outside the base arguments that derivative
//! primitives never read on their fast path (`table::unread_args`, and the value under `nil` at a
//! type with a canonical group); a `let` is live when its binders are read. The derivative is
//! self-maintainable when no base input is read. For each read of an input — directly, or through a
//! base computation that depends on one — by the derivative code proper, the analysis names the
//! construct that reads it and why.

use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::Span;
use rustc_hash::FxHashSet;

use super::table;
use super::term::*;

#[derive(Clone, Debug, PartialEq)]
pub struct SmReport {
    pub self_maintainable: bool,
    /// What reads a base input, once per construct.
    pub reasons: Vec<Reason>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Reason {
    /// The input (or the first input) the read depends on.
    pub input: Name,
    /// The source construct whose derivative reads it.
    pub span: Span,
    pub what: String,
}

/// Analyses derivative `e` with base inputs `inputs`; `change_vars` are the change binders.
pub fn analyse(e: &E, inputs: &[(Name, LocalId)], change_vars: &FxHashSet<LocalId>) -> SmReport {
    let mut a = Analysis {
        deps: Vec::new(),
        names: inputs.to_vec(),
        change_vars,
        reasons: Vec::new(),
        read_inputs: FxHashSet::default(),
    };
    for (_, x) in inputs {
        a.deps.push((*x, *x));
    }
    a.walk(e, None, false);
    let inputs_read = inputs.iter().any(|(_, x)| a.read_inputs.contains(x));
    // One reason per construct: the most telling one (a conditional, a recomputation, a derivative
    // primitive, an update), in source order.
    let rank = |r: &Reason| {
        if r.what.starts_with("`if`") {
            0
        } else if r.what.contains("recomputed") || r.what.contains("recomputes") {
            1
        } else if r.what.starts_with("updating") {
            3
        } else {
            2
        }
    };
    let mut reasons: Vec<Reason> = Vec::new();
    for r in a.reasons {
        match reasons.iter_mut().find(|q| q.span == r.span) {
            Some(q) if rank(&r) < rank(q) => *q = r,
            Some(_) => {}
            None => reasons.push(r),
        }
    }
    reasons.sort_by_key(|r| (r.span.lo, r.span.hi));
    SmReport { self_maintainable: !inputs_read, reasons }
}

struct Analysis<'a> {
    /// (variable, the input it depends on): inputs, and live base lets that read one.
    deps: Vec<(LocalId, LocalId)>,
    names: Vec<(Name, LocalId)>,
    change_vars: &'a FxHashSet<LocalId>,
    reasons: Vec<Reason>,
    read_inputs: FxHashSet<LocalId>,
}

/// The derivative construct a read happens in: its description and source span.
type Ctx = Option<(String, Span)>;

impl Analysis<'_> {
    fn input_of(&self, id: LocalId) -> Option<LocalId> {
        self.deps.iter().rev().find(|(v, _)| *v == id).map(|(_, x)| *x)
    }

    /// Walks live code. `in_base` is set inside the right-hand side of a base `let`: reads there are
    /// accounted to the variable it binds, not reported.
    fn walk(&mut self, e: &E, ctx: Ctx, in_base: bool) {
        match &e.kind {
            ExprKind::Var(n, VarRef::Local(id)) => {
                if let Some(x) = self.input_of(*id) {
                    self.read_inputs.insert(x);
                    if !in_base {
                        let (what, span) = ctx.unwrap_or_else(|| ("the derivative reads it".to_string(), e.span));
                        let input = self.name_of(x, n);
                        self.reasons.push(Reason { input, span, what });
                    }
                }
            }
            ExprKind::Let(p, r, b) => {
                // Live only if the body reads a binder (after the same elimination DCE does).
                let live = {
                    let body = super::dce::eliminate(b);
                    p.binders().iter().any(|(_, id)| uses(&body, *id) > 0)
                };
                if !live {
                    return self.walk(b, ctx, in_base);
                }
                let is_base = !p.binders().iter().any(|(_, id)| self.change_vars.contains(id));
                let mut probe = Analysis {
                    deps: self.deps.clone(),
                    names: self.names.clone(),
                    change_vars: self.change_vars,
                    reasons: Vec::new(),
                    read_inputs: FxHashSet::default(),
                };
                probe.walk(r, ctx.clone(), in_base || is_base);
                let dep = probe.read_inputs.iter().next().copied();
                self.reasons.extend(probe.reasons);
                if !is_base {
                    self.read_inputs.extend(probe.read_inputs.iter().copied());
                }
                let mark = self.deps.len();
                if let Some(x) = dep.filter(|_| is_base) {
                    for (_, id) in p.binders() {
                        self.deps.push((id, x));
                    }
                }
                self.walk(b, ctx, in_base);
                self.deps.truncate(mark);
            }
            ExprKind::App(..) => {
                let (head, args) = deriv_spine(e);
                let head = &head;
                let (unread, here): (&[usize], Ctx) = match &head.kind {
                    ExprKind::Var(_, VarRef::Builtin(Builtin::Nil))
                        if args.len() == 1 && table::nil_constant(&args[0].ty, e.span).is_some() =>
                    {
                        (&[0], None)
                    }
                    ExprKind::Var(_, VarRef::Builtin(b)) if b.is_internal() || *b == Builtin::Nil => {
                        (table::unread_args(*b), Some((table::describe_read(head), head.span)))
                    }
                    ExprKind::App(f, _) if matches!(f.kind, ExprKind::Var(_, VarRef::Builtin(Builtin::Nil))) => {
                        (&[], Some((table::describe_read(head), head.span)))
                    }
                    ExprKind::Var(_, VarRef::Local(id)) if self.change_vars.contains(id) => {
                        (&[], Some((table::describe_read(head), head.span)))
                    }
                    ExprKind::Derive(_) => (&[], Some((table::describe_read(head), head.span))),
                    _ => (&[], None),
                };
                let ctx2 = if in_base { ctx.clone() } else { here.or(ctx.clone()) };
                if nil_of_builtin(head).is_none() {
                    self.walk(head, ctx.clone(), in_base);
                }
                for (i, a) in args.iter().enumerate() {
                    if !unread.contains(&i) {
                        self.walk(a, ctx2.clone(), in_base);
                    }
                }
            }
            ExprKind::Bin(BinOp::Ominus, a, b) => {
                // A generic derivative: the construct at the new inputs minus at the old ones.
                let what = format!("`{}` has no efficient derivative: its change is recomputed", construct(b));
                let ctx2 = if in_base { ctx } else { Some((what, e.span)) };
                self.walk(a, ctx2.clone(), in_base);
                self.walk(b, ctx2, in_base);
            }
            ExprKind::Bin(BinOp::Oplus, a, b) => {
                let what = "updating a base value with its change reads the value".to_string();
                let ctx2 = if in_base { ctx } else { ctx.or(Some((what, e.span))) };
                self.walk(a, ctx2.clone(), in_base);
                self.walk(b, ctx2, in_base);
            }
            ExprKind::If(c, a, b) => {
                let ctx2 = if in_base { ctx.clone() } else { Some(("`if` reads its condition".to_string(), e.span)) };
                self.walk(c, ctx2, in_base);
                self.walk(a, ctx.clone(), in_base);
                self.walk(b, ctx, in_base);
            }
            _ => frontend::lin::for_each_child(e, &mut |c| self.walk(c, ctx.clone(), in_base)),
        }
    }

    fn name_of(&self, x: LocalId, fallback: &Name) -> Name {
        self.names.iter().find(|(_, y)| *y == x).map(|(n, _)| n.clone()).unwrap_or_else(|| fallback.clone())
    }
}

/// A short name for the construct a generic derivative recomputes.
fn construct(e: &E) -> String {
    match &e.kind {
        ExprKind::Bin(op, ..) => op.ascii().to_string(),
        ExprKind::If(..) => "if".to_string(),
        ExprKind::Not(_) => "not".to_string(),
        ExprKind::Index(..) => ".[]".to_string(),
        ExprKind::Array(_) => "array literal".to_string(),
        ExprKind::Bag(_) => "bag literal".to_string(),
        ExprKind::Map(_) => "map literal".to_string(),
        ExprKind::Pullback(..) => "pullback".to_string(),
        ExprKind::Dual(..) => "dual".to_string(),
        ExprKind::Let(_, _, b) => construct(b),
        ExprKind::App(..) => {
            let (h, _) = spine(e);
            match &h.kind {
                ExprKind::Var(n, _) => n.to_string(),
                _ => "application".to_string(),
            }
        }
        _ => "this term".to_string(),
    }
}

//! Tapes made once, out of the loops that use them.
//!
//! A loop inside a loop body (llsq's inner `fold` per row, the fused sum's element loops) tapes
//! its carry into a fresh `tape' n` on every iteration of the enclosing loop. Its length is often
//! the same every time (`len x` of an array the enclosing loop does not make), and the tape is
//! read only by the reverse loop of the same iteration: tapes never leave the iteration that
//! writes them (the forward and reverse phases of a loop body are emitted in the same body).
//! Such a tape is made once, before the enclosing loop, and reused by each iteration; every entry
//! the reverse reads is written earlier in the same iteration, so the reuse is invisible. The
//! enclosing loop then allocates nothing per iteration, so it needs no arena compaction (no
//! support calls in the loop, which would keep its floating-point values in stack slots: x86-64
//! has no callee-saved XMM registers).
//!
//! Only tapes of scalars move (a tape of arrays holds pointers into the iteration's memory), and
//! only when their length is a literal or `len v` of an array bound outside the loop, so that
//! making the tape earlier cannot fail (a `len` is never negative).

use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::types::Type;
use rustc_hash::{FxHashMap, FxHashSet};

use super::holds_array;
use super::term::*;

/// `binds` with every movable tape of a loop body moved before its loop, as far out as its
/// length allows.
pub fn hoist_tapes(binds: Vec<Bind>) -> Vec<Bind> {
    let mut out = Vec::with_capacity(binds.len());
    for b in binds {
        let rhs = hoist_loop(&b.rhs, &mut out);
        out.push(Bind { rhs, ..b });
    }
    out
}

/// `e` with tapes hoisted inside it; when `e` is a loop (`iterate`, `iterate'`, `build`) whose
/// step's series starts tapes it can give up, those bindings go to `out`, before it.
fn hoist_loop(e: &E, out: &mut Vec<Bind>) -> E {
    let (head, args) = anf::anormal::spine(e);
    let is_loop = matches!(
        &head.kind,
        ExprKind::Var(_, VarRef::Builtin(Builtin::Iterate | Builtin::RevIterate | Builtin::Build))
    );
    if !is_loop {
        return hoist_within(e);
    }
    let Some(step) = args.iter().position(|a| matches!(a.kind, ExprKind::Lam(..))) else {
        return hoist_within(e);
    };
    let ExprKind::Lam(p, body) = &args[step].kind else { unreachable!() };
    let (binds, res) = split(body);
    let binds = hoist_tapes(binds);
    let res = hoist_within(&res);
    let mut inside: FxHashSet<LocalId> = p.binders().into_iter().map(|(_, id)| id).collect();
    inside.extend(binds.iter().map(|b| b.id));
    // Bindings the enclosing series could make instead: `y = v` and `len v` of such a variable or
    // of one from outside (inlining rebinds the captured arrays at the top of a body).
    let mut movable: FxHashMap<LocalId, Vec<LocalId>> = FxHashMap::default();
    let outside =
        |v: LocalId, movable: &FxHashMap<LocalId, Vec<LocalId>>| !inside.contains(&v) || movable.contains_key(&v);
    for b in &binds {
        let from = match (&b.rhs.kind, spine(&b.rhs)) {
            (ExprKind::Var(_, VarRef::Local(v)), _) => Some(*v),
            (_, Some((Builtin::Len, a))) => local(a[0]),
            _ => None,
        };
        if let Some(v) = from.filter(|v| outside(*v, &movable)) {
            let mut deps = movable.get(&v).cloned().unwrap_or_default();
            deps.push(b.id);
            movable.insert(b.id, deps);
        }
    }
    let mut moved: FxHashSet<LocalId> = FxHashSet::default();
    for b in &binds {
        if let Some((Builtin::TapeNew, a)) = spine(&b.rhs) {
            let scalar = matches!(&b.ty, Type::Array(t) if !holds_array(t));
            let len_ok = match &a[0].kind {
                ExprKind::Lit(Lit::Int(n)) => *n >= 0,
                // A `len` (never negative), possibly through aliases.
                ExprKind::Var(_, VarRef::Local(n)) => movable.get(n).is_some_and(|deps| {
                    deps.iter()
                        .any(|d| binds.iter().any(|b| b.id == *d && matches!(spine(&b.rhs), Some((Builtin::Len, _)))))
                }),
                _ => false,
            };
            if scalar && len_ok {
                moved.insert(b.id);
                if let Some(n) = local(a[0]) {
                    moved.extend(movable[&n].iter().copied());
                }
            }
        }
    }
    let (up, stay): (Vec<Bind>, Vec<Bind>) = binds.into_iter().partition(|b| moved.contains(&b.id));
    out.extend(up);
    let body = lets(stay, res);
    rebuild(e, step, Expr::new(ExprKind::Lam(p.clone(), body), args[step].span, args[step].ty.clone()))
}

/// `e` with the loops in its let-series (anywhere below it) hoisted within their own series.
fn hoist_within(e: &E) -> E {
    match split(e) {
        (binds, res) if !binds.is_empty() => lets(hoist_tapes(binds), hoist_within(&res)),
        _ => map_children::<()>(e, &mut |c| Ok(hoist_within(c))).unwrap_or_else(|_| e.clone()),
    }
}

/// The leading `let z = rhs` bindings of `e` (variable patterns) and what follows them.
fn split(e: &E) -> (Vec<Bind>, E) {
    let mut binds = Vec::new();
    let mut cur = e;
    while let ExprKind::Let(p, rhs, rest) = &cur.kind {
        let PatKind::Var(name, id) = &p.kind else { break };
        binds.push(Bind { id: *id, name: name.clone(), ty: p.ty.clone(), rhs: rhs.clone() });
        cur = rest;
    }
    (binds, cur.clone())
}

/// The call spine `e` with its argument number `k` replaced by `new`.
fn rebuild(e: &E, k: usize, new: E) -> E {
    let (_, args) = anf::anormal::spine(e);
    let n = args.len();
    fn go(e: &E, depth: usize, target: usize, new: &E) -> E {
        // `depth` counts arguments from the last one.
        match &e.kind {
            ExprKind::App(f, a) if depth == target => {
                Expr::new(ExprKind::App(f.clone(), new.clone()), e.span, e.ty.clone())
            }
            ExprKind::App(f, a) => {
                Expr::new(ExprKind::App(go(f, depth + 1, target, new), a.clone()), e.span, e.ty.clone())
            }
            _ => e.clone(),
        }
    }
    go(e, 0, n - 1 - k, &new)
}

/// The builtin head and the arguments of a call spine.
fn spine(e: &E) -> Option<(Builtin, Vec<&E>)> {
    let (h, args) = anf::anormal::spine(e);
    match &h.kind {
        ExprKind::Var(_, VarRef::Builtin(b)) => Some((*b, args)),
        _ => None,
    }
}

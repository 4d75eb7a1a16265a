//! Incremental computation by static differentiation (ILC: Cai, Giarrusso, Rendel, Ostermann,
//! PLDI 2014), over typed, monomorphised core terms.
//!
//! `derive` is the paper's Fig. 4g, a small structural function; each primitive brings its
//! derivative from `table` (the plugin, Sec. 3.7). Everything clever is a separate pass after it:
//!
//! 1. `inline` — derivatives of the definitions a term names (`Derive(d)` nodes) are inlined and
//!    applied (β to `let`), so nil changes flow from a use site into the definition's body;
//! 2. `nil` — nil-change propagation: a closed term's change is nil (Theorem 2.10), so is a let-bound
//!    change of a nil change; primitives whose function and group changes are nil get their
//!    self-maintainable derivative (`foldBag'`, `mapBag'`, ...), nil changes of group-typed values
//!    become the constant `gchange g zero`;
//! 3. `simplify` — β, inlining of values, projections, `x ⊕ 0 = x`, dead pure lets;
//! 4. `sm` — the self-maintainability analysis: does the derivative read a base input (Sec. 4.3)?
//! 5. `dce` — dead-code elimination of the base computations that the derivative primitives never
//!    read on group changes (the paper used laziness for this; we replace them by `_` and drop them).
//!
//! Changes are named `dx` after their base variable `x`; nothing is ever named `x'`.

mod dce;
mod expand;
mod fuse;
mod inline;
mod nil;
mod simplify;
mod sm;
pub mod table;
pub mod term;

use std::rc::Rc;

use anf::mono::MonoProgram;
use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::types::Type;
use frontend::{Diagnostic, Span};
use rustc_hash::{FxHashMap, FxHashSet};

pub use dce::eliminate;
pub use expand::{expand, needs_expansion};
pub use fuse::fuse;
pub use inline::inline_derived;
pub use nil::propagate;
pub use simplify::simplify;
pub use sm::{analyse, Reason, SmReport};

use term::*;

/// The state shared by Derive and the passes: fresh binders, and which binders are changes.
pub struct Cx<'p> {
    pub program: &'p MonoProgram,
    next_local: u32,
    /// The change variable `dx` of each base variable `x` in scope of the term being derived.
    changes: FxHashMap<LocalId, LocalId>,
    /// Every binder that holds a change (so passes can tell changes from base values).
    pub change_vars: FxHashSet<LocalId>,
    /// Change variables known to be nil from outside (the free variables of a closure whose nil
    /// change is being computed).
    pub nil_vars: FxHashSet<LocalId>,
    /// `Derive(body)` of each definition, derived once and copied at each use.
    derived_defs: FxHashMap<DefId, E>,
}

impl<'p> Cx<'p> {
    /// A context whose fresh binders start at `next_local` (at least the program's `next_local`).
    pub fn new(program: &'p MonoProgram, next_local: u32) -> Cx<'p> {
        Cx {
            program,
            next_local: next_local.max(program.next_local),
            changes: FxHashMap::default(),
            change_vars: FxHashSet::default(),
            nil_vars: FxHashSet::default(),
            derived_defs: FxHashMap::default(),
        }
    }

    /// One past the largest binder made so far.
    pub fn next_local(&self) -> u32 {
        self.next_local
    }

    pub fn fresh(&mut self) -> LocalId {
        frontend::syntax::fresh_local(&mut self.next_local)
    }

    /// A fresh change binder `dx` for base binder `x`.
    fn change_of(&mut self, x: LocalId) -> LocalId {
        let dx = self.fresh();
        self.changes.insert(x, dx);
        self.change_vars.insert(dx);
        dx
    }

    /// `Derive(body)` of definition `d` (cached).
    fn derived_def(&mut self, d: DefId) -> Result<E, Diagnostic> {
        if let Some(e) = self.derived_defs.get(&d) {
            return Ok(e.clone());
        }
        let program = self.program;
        let body =
            program.defs.get(d.0 as usize).map(|def| def.body.clone()).ok_or_else(|| {
                Diagnostic::error(Span::SYNTHETIC, format!("internal: no definition {} to derive", d.0))
            })?;
        let e = derive(&body, self)?;
        self.derived_defs.insert(d, e.clone());
        Ok(e)
    }
}

/// ILC Fig. 4g: `Derive(t)`, the change of `t` in terms of the changes of its free variables.
/// Every free local `x` of `t` must have a change `dx` registered in `cx` (binders inside `t` get
/// theirs here). Definitions become `Derive(d)` nodes (inlined by `inline_derived`).
pub fn derive(e: &E, cx: &mut Cx) -> Result<E, Diagnostic> {
    let span = e.span;
    let dty = Type::delta(&e.ty);
    if reverse_mode(e) {
        // A derivative of reverse mode (`grad f x`, `pullback f w`, …) has no rule of its own:
        // recomputed at the updated inputs. Deriving its arguments instead would update the
        // differentiated function pointwise (`f ⊕ df = λv. f v ⊕ df v 0_v`, Def. 2.7), whose
        // change depends on the point and would be frozen by the pullback's rule ⊕.
        let new = updated(e, cx)?;
        return Ok(ominus(new, base(e, cx), span));
    }
    Ok(match &e.kind {
        // ILC Fig. 4g: Derive(x) = dx
        ExprKind::Var(n, VarRef::Local(x)) => {
            let dx = *cx.changes.get(x).ok_or_else(|| {
                Diagnostic::error(span, format!("internal: Derive found no change for the free variable `{n}`"))
            })?;
            var(change_name(n), dx, dty, span)
        }
        // Definitions named in a derived term are derived too: Derive(d) is d's derivative.
        ExprKind::Var(_, VarRef::Global(_)) => Expr::new(ExprKind::Derive(e.clone()), span, dty),
        // Code after dead-code elimination is not differentiated again: what `_` stands for is gone.
        ExprKind::Var(_, VarRef::Builtin(Builtin::NoBase)) => {
            return Err(Diagnostic::error(span, "internal: Derive met a base value that was eliminated"))
        }
        // ILC Fig. 4g: Derive(c) = ... from the plugin (Sec. 3.7).
        ExprKind::Var(_, VarRef::Builtin(b)) => table::derive_builtin(*b, &e.ty, span),
        // ILC Sec. 3.2: a constant is closed, so its change is its nil change.
        ExprKind::Lit(_) | ExprKind::Derive(_) => nil(e.clone(), span),
        // ILC Fig. 4g: Derive(λx. t) = λx dx. Derive(t)
        ExprKind::Lam(p, body) => {
            let dp = change_pat(p, cx);
            let dbody = derive(body, cx)?;
            lam(p.clone(), lam(dp, dbody, span), span)
        }
        // ILC Fig. 4g: Derive(s t) = Derive(s) t Derive(t)
        ExprKind::App(s, t) => {
            let ds = derive(s, cx)?;
            let dt = derive(t, cx)?;
            app(app(ds, base(t, cx), span), dt, span)
        }
        // let p = s in t ≡ (λp. t) s, so Derive = Derive(λp. t) s Derive(s), with s shared.
        ExprKind::Let(p, s, t) => {
            let ds = derive(s, cx)?;
            let dp = change_pat(p, cx);
            let dt = derive(t, cx)?;
            let_(p.clone(), base(s, cx), let_(dp, ds, dt, span), span)
        }
        ExprKind::If(c, a, b) => derive_if(e, c, a, b, cx)?,
        ExprKind::Bin(BinOp::And, a, b) => {
            let f = Expr::new(ExprKind::Lit(Lit::Bool(false)), span, Type::Bool);
            derive(&Expr::new(ExprKind::If(a.clone(), b.clone(), f), span, Type::Bool), cx)?
        }
        ExprKind::Bin(BinOp::Or, a, b) => {
            let t = Expr::new(ExprKind::Lit(Lit::Bool(true)), span, Type::Bool);
            derive(&Expr::new(ExprKind::If(a.clone(), t, b.clone()), span, Type::Bool), cx)?
        }
        ExprKind::Bin(op, a, b) => match table::derive_binop(*op, &a.ty, span) {
            // An operator is a primitive applied to its operands: Derive(op) a da b db.
            Some(d) => {
                let (da, db) = (derive(a, cx)?, derive(b, cx)?);
                app_n(d, [base(a, cx), da, base(b, cx), db], span)
            }
            None => derive_strict(e, cx)?,
        },
        ExprKind::Neg(a) => {
            let da = derive(a, cx)?;
            app_n(table::derive_neg(&a.ty, span), [base(a, cx), da], span)
        }
        // Δ(σ × τ) = Δσ × Δτ: tuples and projections derive componentwise.
        ExprKind::Tuple(xs) => {
            let dxs = xs.iter().map(|x| derive(x, cx)).collect::<Result<Vec<_>, _>>()?;
            Expr::new(ExprKind::Tuple(dxs), span, dty)
        }
        ExprKind::Proj(a, i) => Expr::new(ExprKind::Proj(derive(a, cx)?, *i), span, dty),
        ExprKind::Ann(a, _) => derive(a, cx)?,
        ExprKind::Not(_)
        | ExprKind::Index(..)
        | ExprKind::Array(_)
        | ExprKind::Bag(_)
        | ExprKind::Map(_)
        | ExprKind::Pullback(..) => derive_strict(e, cx)?,
        ExprKind::Dual(..) => {
            let new = updated(e, cx)?;
            ominus(new, base(e, cx), span)
        }
        ExprKind::Zero | ExprKind::Sum(..) => {
            return Err(Diagnostic::error(span, "internal: Derive met a term of the pullback semantics"))
        }
    })
}

/// A call of reverse mode: a pullback, or a saturated reverse-mode builtin (`grad f x`, …).
fn reverse_mode(e: &E) -> bool {
    match &e.kind {
        ExprKind::Pullback(..) => true,
        ExprKind::App(..) => {
            let (h, args) = anf::anormal::spine(e);
            matches!(&h.kind, ExprKind::Var(_, VarRef::Builtin(b))
                if crate::reverse::is_reverse_builtin(*b) && args.len() == b.arity())
        }
        _ => false,
    }
}

/// `dx` for `x`.
pub fn change_name(n: &str) -> Name {
    if n == "_" {
        return "_".into();
    }
    format!("d{n}").into()
}

/// The change pattern `dp` of a binder pattern `p` (ILC Fig. 4d: Δ(Γ, x : τ) = ΔΓ, dx : Δτ).
fn change_pat(p: &Pat, cx: &mut Cx) -> Rc<Pat> {
    fn go(p: &Pat, cx: &mut Cx) -> Pat {
        let ty = Type::delta(&p.ty);
        let kind = match &p.kind {
            PatKind::Var(n, x) => PatKind::Var(change_name(n), cx.change_of(*x)),
            // The change of `()` is a base change, not a tuple: nothing to bind.
            PatKind::Wild | PatKind::Unit => PatKind::Wild,
            PatKind::Tuple(ps) => PatKind::Tuple(ps.iter().map(|q| go(q, cx)).collect()),
        };
        Pat { kind, span: p.span, ty, ann: None }
    }
    Rc::new(go(p, cx))
}

/// A base subterm placed in a derivative: a copy with fresh binders, so no binder occurs twice.
fn base(e: &E, cx: &mut Cx) -> E {
    if has_binders(e) {
        copy_fresh(e, &FxHashMap::default(), cx)
    } else {
        e.clone()
    }
}

/// `t` evaluated at the updated inputs: `let x_new = x ⊕ dx; ... in t[x := x_new]` for its free locals.
fn updated(e: &E, cx: &mut Cx) -> Result<E, Diagnostic> {
    let frees = free_locals_typed(e);
    let mut subst = FxHashMap::default();
    let mut binds = Vec::new();
    for (n, x, ty) in frees {
        let dx = *cx.changes.get(&x).ok_or_else(|| {
            Diagnostic::error(e.span, format!("internal: Derive found no change for the free variable `{n}`"))
        })?;
        let x_new = cx.fresh();
        let rhs =
            oplus(var(n.clone(), x, ty.clone(), e.span), var(change_name(&n), dx, Type::delta(&ty), e.span), e.span);
        let new_name: Name = format!("{n}_new").into();
        subst.insert(x, var(new_name.clone(), x_new, ty.clone(), e.span));
        binds.push((pat_var(new_name, x_new, ty, e.span), rhs));
    }
    let body = copy_fresh(e, &subst, cx);
    Ok(binds.into_iter().rev().fold(body, |b, (p, rhs)| let_(p, rhs, b, e.span)))
}

/// A construct without its own derivative whose children are all evaluated (no binders):
/// `let v = e_i; dv = Derive(e_i) ... in K(v ⊕ dv, ...) ⊖ K(v, ...)` — correct, not incremental.
fn derive_strict(e: &E, cx: &mut Cx) -> Result<E, Diagnostic> {
    let span = e.span;
    let mut children = Vec::new();
    frontend::lin::for_each_child(e, &mut |c| children.push(c.clone()));
    let mut binds = Vec::new();
    let mut olds = Vec::new();
    let mut news = Vec::new();
    for (i, c) in children.iter().enumerate() {
        let dc = derive(c, cx)?;
        let v = cx.fresh();
        let dv = cx.change_of(v);
        let (name, dname): (Name, Name) = (format!("v{}", i + 1).into(), format!("dv{}", i + 1).into());
        let vx = var(name.clone(), v, c.ty.clone(), c.span);
        let dvx = var(dname.clone(), dv, dc.ty.clone(), c.span);
        binds.push((pat_var(name, v, c.ty.clone(), c.span), base(c, cx)));
        binds.push((pat_var(dname, dv, dc.ty.clone(), c.span), dc));
        news.push(oplus(vx.clone(), dvx, span));
        olds.push(vx);
    }
    let mut news = news.into_iter();
    let new = rebuild(e, &mut |_| news.next().expect("one per child"));
    let mut olds = olds.into_iter();
    let old = rebuild(e, &mut |_| olds.next().expect("one per child"));
    let body = ominus(new, old, span);
    Ok(binds.into_iter().rev().fold(body, |b, (p, rhs)| let_(p, rhs, b, span)))
}

/// `Derive(if c then a else b)`: while the condition keeps its value the change is the taken
/// branch's change; when it flips, the new branch is evaluated at the updated inputs and the change
/// is the difference:
/// `let vc = c; dvc = Derive(c); nc = vc ⊕ dvc in
///  if nc == vc then (if vc then Derive(a) else Derive(b))
///  else (if nc then a[x ⊕ dx] else b[x ⊕ dx]) ⊖ (if vc then a else b)`.
/// (Evaluating the other branch at the *old* inputs could fail where the old condition guarded it.)
fn derive_if(e: &E, c: &E, a: &E, b: &E, cx: &mut Cx) -> Result<E, Diagnostic> {
    let span = e.span;
    let dc = derive(c, cx)?;
    let da = derive(a, cx)?;
    let db = derive(b, cx)?;
    let vc = cx.fresh();
    let dvc = cx.change_of(vc);
    let nc = cx.fresh();
    let vcx = var("c".into(), vc, Type::Bool, c.span);
    let dvcx = var("dc".into(), dvc, dc.ty.clone(), c.span);
    let ncx = var("c_new".into(), nc, Type::Bool, c.span);
    let same = Expr::new(ExprKind::Bin(BinOp::Eq, ncx.clone(), vcx.clone()), span, Type::Bool);
    let keep = Expr::new(ExprKind::If(vcx.clone(), da, db), span, Type::delta(&e.ty));
    let new = Expr::new(ExprKind::If(ncx, updated(a, cx)?, updated(b, cx)?), span, e.ty.clone());
    let old = Expr::new(ExprKind::If(vcx.clone(), base(a, cx), base(b, cx)), span, e.ty.clone());
    let flip = ominus(new, old, span);
    let body = Expr::new(ExprKind::If(same, keep, flip), span, Type::delta(&e.ty));
    let body = let_(pat_var("c_new".into(), nc, Type::Bool, span), oplus(vcx, dvcx, span), body, span);
    let body = let_(pat_var("dc".into(), dvc, dc.ty.clone(), span), dc, body, span);
    Ok(let_(pat_var("c".into(), vc, Type::Bool, span), base(c, cx), body, span))
}

/// Nil propagation and simplification to a fixed point (bounded).
fn optimise(e: E, cx: &mut Cx) -> E {
    let mut cur = e;
    for _ in 0..8 {
        let next = propagate(&simplify(&cur, cx), cx);
        if next == cur {
            break;
        }
        cur = next;
    }
    simplify(&cur, cx)
}

/// The total derivative of a closed term (what `derive e` evaluates to in a program): derived,
/// inlined, nil changes propagated and simplified. Correct for every change.
pub fn derive_closed(program: &MonoProgram, e: &E, next_local: &mut u32) -> Result<E, Diagnostic> {
    let mut cx = Cx::new(program, *next_local);
    let d = derive(e, &mut cx)?;
    let d = inline_derived(&d, &mut cx)?;
    let d = optimise(d, &mut cx);
    *next_local = cx.next_local();
    Ok(d)
}

/// The nil change of an open function term whose free variables do not change (Theorem 2.10:
/// it is the function's derivative): `Derive(λp. t)` with each free variable's change assumed nil.
pub struct OpenDerivative {
    pub term: E,
    /// (free variable, its change binder, its type): bind each change to the variable's nil change.
    pub frees: Vec<(LocalId, LocalId, Type)>,
}

pub fn derive_open(program: &MonoProgram, e: &E, next_local: &mut u32) -> Result<OpenDerivative, Diagnostic> {
    let mut cx = Cx::new(program, *next_local);
    let mut frees = Vec::new();
    for (_, x, ty) in free_locals_typed(e) {
        let dx = cx.change_of(x);
        cx.nil_vars.insert(dx);
        frees.push((x, dx, ty));
    }
    let d = derive(e, &mut cx)?;
    let d = inline_derived(&d, &mut cx)?;
    let d = optimise(d, &mut cx);
    *next_local = cx.next_local();
    Ok(OpenDerivative { term: d, frees })
}

/// A definition's derivative, as `nabla derive` prints it and `nabla incr` runs it.
pub struct Derivative {
    /// The base inputs: the definition's curried parameters.
    pub inputs: Vec<(Name, LocalId)>,
    /// `λx1 dx1 ... xn dxn. Derive(d) x1 dx1 ... xn dxn`, inlined, nil changes propagated,
    /// simplified: correct for every change.
    pub total: E,
    /// `total` after dead-code elimination: base arguments that its derivative primitives never
    /// read on group changes are `_`, and base computations nobody reads are gone. On a change
    /// outside that fast path the runtime reports that it needs a base and `total` is used.
    pub fast: E,
    pub report: SmReport,
    /// One past the largest binder in `total` and `fast`: code derived later (at run time) must
    /// take its fresh binders from here on.
    pub next_local: u32,
}

/// Derives definition `d` (of type A1 -> ... -> An -> R) for `nabla derive` and `nabla incr`.
pub fn derive_definition(program: &MonoProgram, d: DefId) -> Result<Derivative, Diagnostic> {
    let def = program
        .defs
        .get(d.0 as usize)
        .ok_or_else(|| Diagnostic::error(Span::SYNTHETIC, format!("internal: no definition {} to derive", d.0)))?;
    let mut cx = Cx::new(program, program.next_local);
    let span = def.body.span;
    // Name the inputs after the definition's own parameters where it has plain ones.
    let mut names = Vec::new();
    let mut cur = &def.body;
    while let ExprKind::Lam(p, b) = &cur.kind {
        names.push(match &p.kind {
            PatKind::Var(n, _) => n.clone(),
            _ => Name::from(format!("x{}", names.len() + 1)),
        });
        cur = b;
    }
    let mut n_args = 0;
    let mut t = &def.ty;
    while let Type::Fun(_, r) = t {
        n_args += 1;
        t = r;
    }
    let (arg_tys, _) = arrows(&def.ty, n_args);
    let mut inputs = Vec::new();
    let mut params = Vec::new();
    let mut head = Expr::new(
        ExprKind::Derive(Expr::new(ExprKind::Var(def.name.clone(), VarRef::Global(d)), span, def.ty.clone())),
        span,
        Type::delta(&def.ty),
    );
    for (i, ty) in arg_tys.iter().enumerate() {
        let name = names.get(i).cloned().unwrap_or_else(|| Name::from(format!("x{}", i + 1)));
        let x = cx.fresh();
        let dx = cx.change_of(x);
        let xv = var(name.clone(), x, ty.clone(), span);
        let dxv = var(change_name(&name), dx, Type::delta(ty), span);
        head = app_n(head, [xv, dxv], span);
        inputs.push((name.clone(), x));
        params
            .push((pat_var(name.clone(), x, ty.clone(), span), pat_var(change_name(&name), dx, Type::delta(ty), span)));
    }
    // η-expanded, so the derivative's base parameters are visible whatever the definition's shape.
    let eta = params.into_iter().rev().fold(head, |b, (p, dp)| lam(p, lam(dp, b, span), span));
    let total = inline_derived(&eta, &mut cx)?;
    let total = optimise(total, &mut cx);
    // DCE and simplification feed each other (a dropped base computation can make a condition a
    // value, whose branch then goes); the analysis looks at the derivative that will run.
    let mut fast = total.clone();
    for _ in 0..8 {
        let next = simplify(&eliminate(&fast), &mut cx);
        if next == fast {
            break;
        }
        fast = next;
    }
    let report = analyse(&fast, &inputs, &cx.change_vars);
    Ok(Derivative { inputs, total, fast, report, next_local: cx.next_local() })
}

//! Compiled reverse mode: a typed source-to-source transform over the monomorphic program that
//! replaces each differentiation site (`grad f x`, `vjp f x c`, `jacobian f x`) by an ordinary
//! term — the pullback's forward phase followed by its reverse phase — plus a few internal
//! builtins (`zeros'`, `accAdd'`, `accAddAll'`, `accAxpy'`, `accAt'`, `tape'`, `tapeSet'`, `ctCheck'`). The result is
//! an ordinary program: it goes through `anf::lower` → `anf::opt` → Cranelift like any other, and
//! the interpreter runs it too (tests compare it with the pullback reducer).
//!
//! This is the paper's reduction strategy (Mak & Ong, Sec. 4: the forward phase, rules 7–20, then
//! reductions 1–6 of the reverse phase) staged at compile time:
//! - **Forward phase** = the primal let-series itself (after inlining statically known functions
//!   and A-normalisation): straight-line values stay let-bound variables the reverse phase refers
//!   to; no tape. `fold`/`iterate` whose reverse needs the loop-carried value record it per
//!   iteration in a tape array (`tape'`, `tapeSet'`) sized by the trip count, and so do the
//!   discrete values their body computes with a loop of its own, when the reverse reads them.
//! - **Reverse phase** = for each binding in reverse order, its transposed Jacobian applied to the
//!   binding's adjoint (rule 5 on the linear map of the binding, the partials from
//!   `crate::rules`). Scalar adjoints are SSA sums; array adjoints are uniquely owned accumulators
//!   updated in place (`accAdd'` for `x.[i]`: O(1)); tuple adjoints are tuples of component
//!   adjoints known at compile time. The adjoint of an `Array (Array Real)` is a nested
//!   accumulator (distinct row accumulators); a row read `x.[i]` has no adjoint of its own, its
//!   uses add straight into row `i` (`accAdd2'`, `accRow'`, `accRowAll'`: `x.[i].[j]` is O(1)).
//!   An array of tuples of Reals has an accumulator of its own type (`accAdd'` adds a tuple).
//!   Deeper data (`Array (Array (Array Real))`, arrays of tuples holding arrays: any nesting of
//!   Reals, discrete values, tuples and arrays, [`is_deep`]) has an accumulator of its own type
//!   too, distinct arrays all the way down; a part read out of it is a path from its root
//!   (`Ad::paths`), and a contribution is added at the path's end in place (`Ad::upd`: one
//!   `accAt' A i (λu. …)` per element step, the tuple rebuilt per component step, the row
//!   builtins on a last `Array (Array Real)`), so `x.[i].[j].[k]` is O(1) too.
//! - **Symbolic zeros**: an absent adjoint is zero and emits nothing. **Activity**: a binding
//!   whose type is discrete or that does not depend on the input gets no adjoint; the components
//!   of a tuple a loop carries are active or not by a fixpoint over the loop body, and only the
//!   components the reverse reads are taped. The transpose of `sum` is a symbolic broadcast
//!   (`Adj::B`), read as a scalar by elementwise reverse loops.
//! - **Loops**: the reverse of `map`/`zipWith`/`build`/`fold`/`iterate` is an `iterate` over the
//!   trip count (downwards for `fold`/`iterate`) that recomputes the body's primal from its
//!   inputs (and the taped carry) and runs the body's reverse; the adjoints of captured variables
//!   are carried through it. `while p f x0` is counted first (a run of the loop that also counts
//!   its iterations `n`, discrete) and then differentiated as `iterate n f x0`. A carried counter
//!   (an `Int` returned as itself plus 1) is recomputed from the iteration index, never taped; a
//!   loop read only through discrete projections of its carry gets no adjoint and is not
//!   differentiated.
//! - **`if`**: the branch taken, recomputed in the reverse phase.
//!
//! Invariants of the output: `mono::verify` holds (every binder fresh, every type ground); each
//! accumulator array is passed to exactly one internal builtin and never used afterwards
//! (so updating it in place is invisible); the λ passed to `accAt'` consumes its element the same
//! way and returns the element's own arrays (lowering stores back only its non-pointer words); a tape holds scalars, or (written by a non-compacting
//! `iterate'`) the whole carry when the reverse reads an array it carries.
//! A site the transform cannot handle is reported as [`NotCompiled`] naming it.

pub mod hoist;
pub mod term;

use std::rc::Rc;

use anf::mono::{Interpreted, InterpretedSite, MonoDef, MonoProgram};
use frontend::builtins::Builtin;
use frontend::span::Span;
use frontend::syntax::*;
use frontend::types::Type;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::rules::{self, Prim};
use term::*;

/// A differentiation site (or a construct of reverse mode) the transform does not compile.
#[derive(Clone, Debug, PartialEq)]
pub struct NotCompiled {
    /// What and why, for a note: "`grad` of a function not known at compile time".
    pub what: String,
    pub span: Span,
}

type R<T> = Result<T, NotCompiled>;

/// Rewrites every differentiation site of `mono` into ordinary terms. `Ok(None)` when there is no
/// site (the program is unchanged).
pub fn transform(mono: &MonoProgram) -> R<Option<MonoProgram>> {
    Ok(transform_listing(mono)?.0)
}

/// One compiled gradient's two phases as text (for `nabla ir`).
#[derive(Clone, Debug)]
pub struct SiteListing {
    pub span: Span,
    pub forward: Vec<String>,
    pub reverse: Vec<String>,
}

/// [`transform`], and the forward and reverse phase of each gradient it emitted.
pub fn transform_listing(mono: &MonoProgram) -> R<(Option<MonoProgram>, Vec<SiteListing>)> {
    let mut t = Transform {
        mono,
        next: mono.next_local,
        sites: 0,
        span: Span::SYNTHETIC,
        bodies: Vec::new(),
        listings: Vec::new(),
        scope: FxHashMap::default(),
        omegas: FxHashMap::default(),
        duals: FxHashMap::default(),
        dual_maps: FxHashMap::default(),
        pending: FxHashMap::default(),
        interpreted: Vec::new(),
    };
    let mut defs = Vec::with_capacity(mono.defs.len());
    for (i, d) in mono.defs.iter().enumerate() {
        let body = match t.rewrite(&d.body) {
            Ok(b) => b,
            // A definition that differentiates one of its function parameters: specialised at
            // each call (the function argument known there), the definition itself left out.
            Err(nc) if function_params(&d.body) > 0 && uses_reverse_mode_in(&d.body) => {
                t.pending.insert(DefId(i as u32), nc);
                d.body.clone()
            }
            Err(nc) => return Err(nc),
        };
        t.bodies.push(body.clone());
        defs.push(MonoDef { body, ..d.clone() });
    }
    if t.sites == 0 {
        return Ok((None, t.listings));
    }
    let interpreted = if t.interpreted.is_empty() {
        mono.interpreted.clone()
    } else {
        Some(Rc::new(Interpreted { program: mono.clone(), sites: std::mem::take(&mut t.interpreted) }))
    };
    if t.pending.is_empty() {
        return Ok((Some(MonoProgram { defs, next_local: t.next, interpreted }), t.listings));
    }
    // Drop the specialised definitions; one still used keeps its reason.
    let mut keep = Vec::new();
    let mut renumber = FxHashMap::default();
    for (i, d) in defs.iter().enumerate() {
        let id = DefId(i as u32);
        if !t.pending.contains_key(&id) {
            renumber.insert(id, DefId(keep.len() as u32));
            keep.push(d.clone());
        }
    }
    for d in &keep {
        let mut used = None;
        globals(&d.body, &mut |g| {
            if used.is_none() && t.pending.contains_key(&g) {
                used = Some(g);
            }
        });
        if let Some(g) = used {
            return Err(t.pending[&g].clone());
        }
    }
    let defs = keep.into_iter().map(|d| MonoDef { body: renumber_globals(&d.body, &renumber), ..d }).collect();
    Ok((Some(MonoProgram { defs, next_local: t.next, interpreted }), t.listings))
}

const READS_CARRIED_ARRAY: &str = "a gradient through a loop whose reverse reads an array it carries";
/// Internal retry signal of `Ad::loop_forward`: the tape can hold fewer components (`Ad::unread`).
const TAPES_UNREAD: &str = "a loop whose tape holds components its reverse does not read (internal)";

/// Does `e` bind the local `id` (by `let` or λ)?
fn binds_local(e: &E, id: LocalId) -> bool {
    let here = match &e.kind {
        ExprKind::Let(p, _, _) | ExprKind::Lam(p, _) => p.binders().into_iter().any(|(_, b)| b == id),
        _ => false,
    };
    let mut found = here;
    frontend::lin::for_each_child(e, &mut |c| found = found || binds_local(c, id));
    found
}

/// How many leading λ parameters of `body` reach its last function-typed one (0: none).
fn function_params(body: &E) -> usize {
    let (mut n, mut last, mut cur) = (0, 0, strip(body));
    while let ExprKind::Lam(p, b) = &cur.kind {
        n += 1;
        if is_fun(&p.ty) {
            last = n;
        }
        cur = strip(b);
    }
    last
}

fn uses_reverse_mode_in(e: &E) -> bool {
    let here = match &e.kind {
        ExprKind::Pullback(..) | ExprKind::Dual(..) => true,
        ExprKind::Var(_, VarRef::Builtin(b)) => is_reverse_builtin(*b),
        _ => false,
    };
    let mut found = here;
    frontend::lin::for_each_child(e, &mut |c| found = found || uses_reverse_mode_in(c));
    found
}

/// Calls `f` on every definition `e` refers to.
fn globals(e: &E, f: &mut dyn FnMut(DefId)) {
    if let ExprKind::Var(_, VarRef::Global(d)) = &e.kind {
        f(*d);
    }
    frontend::lin::for_each_child(e, &mut |c| globals(c, f));
}

/// `e` with each definition in `map` read from its local instead.
fn globals_to_locals(e: &E, map: &FxHashMap<DefId, LocalId>) -> E {
    match &e.kind {
        ExprKind::Var(n, VarRef::Global(d)) if map.contains_key(d) => {
            Expr::new(ExprKind::Var(n.clone(), VarRef::Local(map[d])), e.span, e.ty.clone())
        }
        _ => match map_children(e, &mut |c| Ok::<E, ()>(globals_to_locals(c, map))) {
            Ok(x) => x,
            Err(()) => e.clone(),
        },
    }
}

fn renumber_globals(e: &E, map: &FxHashMap<DefId, DefId>) -> E {
    match &e.kind {
        ExprKind::Var(n, VarRef::Global(d)) => {
            Expr::new(ExprKind::Var(n.clone(), VarRef::Global(map[d])), e.span, e.ty.clone())
        }
        _ => match map_children(e, &mut |c| Ok::<E, ()>(renumber_globals(c, map))) {
            Ok(x) => x,
            Err(()) => e.clone(),
        },
    }
}

/// `mono` (transformed) with one more definition, the new root: `λx. (f x, grad f x)` for the
/// definition `f : s -> Real`, computing the value and the gradient in one forward and one reverse
/// phase (what `runtime::api::Gradient` compiles).
pub fn value_and_gradient(mono: &MonoProgram, f: DefId) -> R<MonoProgram> {
    let base = transform(mono)?.unwrap_or_else(|| mono.clone());
    // The transform may leave out definitions it specialised: find `f` again by name.
    let f = base.find(&mono.def(f).name).unwrap_or(base.root());
    let def = base.def(f).clone();
    let span = strip(&def.body).span;
    let Type::Fun(s, r) = &def.ty else {
        return Err(not(format!("`{}` is not a function (its type is {})", def.name, def.ty), span));
    };
    if **r != Type::Real || !s.is_first_order() {
        return Err(not(
            format!("a gradient of `{}` : {}, which is not a function to Real of data", def.name, def.ty),
            span,
        ));
    }
    let mut t = Transform {
        mono: &base,
        next: base.next_local,
        sites: 0,
        span,
        bodies: Vec::new(),
        listings: Vec::new(),
        scope: FxHashMap::default(),
        omegas: FxHashMap::default(),
        duals: FxHashMap::default(),
        dual_maps: FxHashMap::default(),
        pending: FxHashMap::default(),
        interpreted: Vec::new(),
    };
    t.bodies = base.defs.iter().map(|d| d.body.clone()).collect();
    let xid = t.fresh();
    let x = var(xid, &"x".into(), s);
    let fvar = Expr::new(ExprKind::Var(def.name.clone(), VarRef::Global(f)), span, def.ty.clone());
    let mut out = Vec::new();
    let (g, v) = t.gradient_value(&mut out, &fvar, &x, &real(1.0), false)?;
    let body = lam(xid, &"x".into(), s, lets(out, tuple(vec![v, g])));
    let ty = body.ty.clone();
    let mut defs = base.defs.clone();
    defs.push(MonoDef { name: format!("{}'valueAndGrad", def.name).into(), source: def.source, body, ty });
    Ok(MonoProgram { defs, next_local: t.next, interpreted: base.interpreted.clone() })
}

/// Where the root's value holds first-order dual vectors (`r*`), computed as their vectors `r`.
#[derive(Clone, Debug, PartialEq)]
pub enum DualShape {
    /// No dual here.
    Plain,
    /// A dual vector `r*` of first-order type, computed as `unstar` of it.
    Star,
    /// A tuple whose components hold duals.
    Tuple(Vec<DualShape>),
}

impl DualShape {
    fn of(t: &Type) -> Option<DualShape> {
        match t {
            Type::Dual(v) if v.is_first_order() => Some(DualShape::Star),
            Type::Tuple(ts) => {
                let cs: Vec<DualShape> = ts.iter().map(DualShape::of).collect::<Option<_>>()?;
                Some(if cs.iter().all(|c| *c == DualShape::Plain) { DualShape::Plain } else { DualShape::Tuple(cs) })
            }
            t => {
                let mut dual = false;
                t.visit(&mut |u| dual = dual || matches!(u, Type::Dual(_)));
                (!dual).then_some(DualShape::Plain)
            }
        }
    }
}

/// A root whose value is a first-order dual vector, or a tuple holding some (`(pullback f (omega c))
/// x`, `star v`, `(omega c) x`): the program with the root computing their vectors instead
/// (`unstar` pushed through the root's tuples and `let`s, where the transform compiles it: rules
/// 3 and 17 give `unstar ((Ω f)·(Ω c)) x = vjp f x c`), and where the caller puts the `*` back.
/// `None` when the root holds no dual, or one that is not first order.
pub fn unstar_root(mono: &MonoProgram) -> Option<(MonoProgram, DualShape)> {
    let root = mono.defs.last()?;
    let shape = DualShape::of(&root.ty)?;
    if shape == DualShape::Plain {
        return None;
    }
    let mut next = mono.next_local;
    let body = unstar_expr(&root.body, &shape, &mut next, &mut FxHashSet::default());
    let mut out = mono.clone();
    let d = out.defs.last_mut()?;
    d.ty = body.ty.clone();
    d.body = body;
    out.next_local = next;
    Some((out, shape))
}

/// `vectors`: the let-bound locals in scope whose dual has a vector the transform computes.
fn unstar_expr(e: &E, shape: &DualShape, next: &mut u32, vectors: &mut FxHashSet<LocalId>) -> E {
    match (&e.kind, shape) {
        (_, DualShape::Plain) => e.clone(),
        (ExprKind::Ann(a, _), _) => unstar_expr(a, shape, next, vectors),
        (ExprKind::Let(p, rhs, body), _) => {
            if let PatKind::Var(_, id) = &p.kind {
                if matches!(p.ty, Type::Dual(_)) && has_vector(rhs, vectors) || is_omega(rhs, vectors) {
                    vectors.insert(*id);
                }
            }
            let b = unstar_expr(body, shape, next, vectors);
            let ty = b.ty.clone();
            Expr::new(ExprKind::Let(p.clone(), rhs.clone(), b), e.span, ty)
        }
        (ExprKind::Tuple(xs), DualShape::Tuple(cs)) => {
            let xs: Vec<E> = xs.iter().zip(cs).map(|(x, c)| unstar_expr(x, c, next, vectors)).collect();
            let ty = Type::tuple(xs.iter().map(|x| x.ty.clone()).collect());
            Expr::new(ExprKind::Tuple(xs), e.span, ty)
        }
        (_, DualShape::Tuple(cs)) => {
            let id = LocalId(*next);
            *next += 1;
            let r = var(id, &"r".into(), &e.ty);
            let xs: Vec<E> = cs.iter().enumerate().map(|(i, c)| unstar_expr(&proj(&r, i), c, next, vectors)).collect();
            let body = tuple(xs);
            let ty = body.ty.clone();
            let p = Rc::new(Pat::var("r".into(), id, e.ty.clone()));
            Expr::new(ExprKind::Let(p, e.clone(), body), e.span, ty)
        }
        // A dual whose vector the transform does not compute stays as it is: the program is then
        // not compiled, and the interpreter prints it as the reducer's normal form (a dual map on a
        // space with arrays has no vector without the arrays' lengths, `(λv. sum v)*·2.0*` prints
        // `<fun>`, and `unstar` of it would be an error where the value is not: Mak & Ong Sec. 3,
        // a term of type σ* is a linear functional on σ, a value).
        (_, DualShape::Star) if !has_vector(e, vectors) => e.clone(),
        (_, DualShape::Star) => {
            let Type::Dual(v) = &e.ty else { return e.clone() };
            at_span(call(Builtin::Unstar, std::slice::from_ref(e), (**v).clone()), e.span)
        }
    }
}

/// Is `d` a first-order dual whose vector the transform computes (`Transform::vector_of`'s forms:
/// `star v`, `(omega c) x`, `(pullback f (omega c)) x` at a point of data, a dual map on a space
/// with a zero point of one of these, a local in `vectors`)?
fn has_vector(d: &E, vectors: &FxHashSet<LocalId>) -> bool {
    let d = strip(d);
    match &d.kind {
        ExprKind::Var(_, VarRef::Local(id)) => return vectors.contains(id),
        ExprKind::Dual(p, _, w) => return zero_point(&p.ty).is_some() && has_vector(w, vectors),
        ExprKind::Let(_, _, b) => return has_vector(b, vectors),
        _ => {}
    }
    let (h, args) = anf::anormal::spine(d);
    match (&strip(h).kind, args.as_slice()) {
        (ExprKind::Pullback(_, w), [x]) => !is_fun(&x.ty) && is_omega(w, vectors),
        (ExprKind::Var(_, VarRef::Builtin(Builtin::Star)), [_]) => true,
        (ExprKind::Var(_, VarRef::Builtin(Builtin::Omega)), [_, _]) => true,
        (ExprKind::Var(_, VarRef::Local(w)), [_]) => vectors.contains(w),
        _ => false,
    }
}

/// Is `d` a dual whose vector the reducer holds as a literal: `star v`, `(omega c) x`, or a dual
/// map of one?
fn literal_dual(d: &E) -> bool {
    let d = strip(d);
    if let ExprKind::Dual(_, _, w) = &d.kind {
        return literal_dual(w);
    }
    let (h, args) = anf::anormal::spine(d);
    matches!(
        (&strip(h).kind, args.len()),
        (ExprKind::Var(_, VarRef::Builtin(Builtin::Star)), 1) | (ExprKind::Var(_, VarRef::Builtin(Builtin::Omega)), 2)
    )
}

/// Is `w` a constant 1-form `omega c`, or a local in `omegas` (bound to one)?
fn is_omega(w: &E, omegas: &FxHashSet<LocalId>) -> bool {
    match &strip(w).kind {
        ExprKind::App(o, _) => matches!(strip(o).kind, ExprKind::Var(_, VarRef::Builtin(Builtin::Omega))),
        ExprKind::Var(_, VarRef::Local(id)) => omegas.contains(id),
        _ => false,
    }
}

/// Does `mono` contain a differentiation site or any other construct of reverse mode?
pub fn uses_reverse_mode(mono: &MonoProgram) -> bool {
    mono.defs.iter().any(|d| uses_reverse_mode_in(&d.body))
}

pub(crate) fn is_reverse_builtin(b: Builtin) -> bool {
    use Builtin as B;
    matches!(b, B::Star | B::Unstar | B::Omega | B::Jac | B::Grad | B::Vjp | B::Jacobian)
}

struct Transform<'m> {
    mono: &'m MonoProgram,
    next: u32,
    sites: usize,
    /// The site being transformed (where a failure is reported).
    span: Span,
    /// The definitions rewritten so far (in dependency order, so every definition a site inlines
    /// is here, its own sites already transformed: innermost first).
    bodies: Vec<E>,
    listings: Vec<SiteListing>,
    /// Let-bound functions known at compile time, in scope at the site being rewritten.
    scope: FxHashMap<LocalId, E>,
    /// Definitions that differentiate a function parameter, specialised at their calls (with
    /// why the definition alone is not compiled).
    pending: FxHashMap<DefId, NotCompiled>,
    /// Let-bound constant 1-forms `omega c`: the atom `c`.
    omegas: FxHashMap<LocalId, E>,
    /// Let-bound first-order duals `r*`: the atom `r`.
    duals: FxHashMap<LocalId, E>,
    /// Let-bound dual maps `(λp. S)*·W` on spaces with arrays: `p`, `S` and the atom of W's vector.
    dual_maps: FxHashMap<LocalId, (Rc<Pat>, E, E)>,
    /// Sites left to the interpreter (`interp' k args`, k their index): per-site fallback.
    interpreted: Vec<InterpretedSite>,
}

fn not(what: impl Into<String>, span: Span) -> NotCompiled {
    NotCompiled { what: what.into(), span }
}

fn strip(e: &E) -> &E {
    match &e.kind {
        ExprKind::Ann(a, _) => strip(a),
        _ => e,
    }
}

/// Can the interpreter evaluate `e` for compiled code: a term of plain data (Real, Int, Bool,
/// Unit, arrays and tuples of them) whose free locals are plain data, so both cross as words.
fn interpretable(e: &E) -> bool {
    let mut ok = plain_data(&e.ty);
    frontend::lin::visit_free_vars(e, &mut |v| {
        if let ExprKind::Var(_, VarRef::Local(_)) = &v.kind {
            ok = ok && plain_data(&v.ty)
        }
    });
    ok
}

fn plain_data(t: &Type) -> bool {
    match t {
        Type::Real | Type::Int | Type::Bool | Type::Unit => true,
        Type::Array(a) => plain_data(a),
        Type::Tuple(ts) => ts.iter().all(plain_data),
        _ => false,
    }
}

fn is_fun(t: &Type) -> bool {
    matches!(t, Type::Fun(..))
}

/// Does a value of type `t` hold a function (in a tuple)?
fn holds_fun(t: &Type) -> bool {
    match t {
        Type::Fun(..) => true,
        Type::Tuple(ts) => ts.iter().any(holds_fun),
        _ => false,
    }
}

fn result_type(t: &Type) -> Type {
    match t {
        Type::Fun(_, r) => (**r).clone(),
        _ => Type::Unit,
    }
}

impl<'m> Transform<'m> {
    fn fresh(&mut self) -> LocalId {
        frontend::syntax::fresh_local(&mut self.next)
    }

    fn fresher(&mut self) -> impl FnMut() -> LocalId + use<'_, 'm> {
        move || {
            let id = LocalId(self.next);
            self.next += 1;
            id
        }
    }

    fn refresh(&mut self, e: &E) -> E {
        let mut f = self.fresher();
        refresh(e, &mut f)
    }

    /// Bottom-up: inner sites first, so an outer site sees only ordinary terms. A term this
    /// does not compile is left to the interpreter at the innermost enclosing term of plain data
    /// whose free locals are plain data (per-site fallback, [`Transform::interpret`]).
    fn rewrite(&mut self, e: &E) -> R<E> {
        let listed = self.listings.len();
        match self.rewrite_node(e) {
            Err(nc) if interpretable(e) => {
                self.listings.truncate(listed);
                Ok(self.interpret(e, nc))
            }
            r => r,
        }
    }

    /// `interp' k args`: the term `e` evaluated by the reference interpreter at run time, at the
    /// values of its free locals `args` (a tuple of them, or the one, or `()`); `nc` says why.
    /// Definitions of plain data the term names are passed the same way, as compiled code has
    /// computed them: the interpreter then evaluates only the functions it names (and what they
    /// read).
    fn interpret(&mut self, e: &E, nc: NotCompiled) -> E {
        let mut params: Vec<(LocalId, Name, Type)> = Vec::new();
        let mut args: Vec<E> = Vec::new();
        let mut globals: FxHashMap<DefId, LocalId> = FxHashMap::default();
        let mut fresh = Vec::new();
        frontend::lin::visit_free_vars(e, &mut |v| match &v.kind {
            ExprKind::Var(n, VarRef::Local(id)) if !params.iter().any(|(p, _, _)| p == id) => {
                params.push((*id, n.clone(), v.ty.clone()));
                args.push(var(*id, n, &v.ty));
            }
            ExprKind::Var(n, VarRef::Global(d)) if plain_data(&v.ty) && !fresh.iter().any(|(g, _, _)| g == d) => {
                fresh.push((*d, n.clone(), v.clone()));
            }
            _ => {}
        });
        for (d, n, g) in fresh {
            let id = self.fresh();
            globals.insert(d, id);
            params.push((id, n, g.ty.clone()));
            args.push(g);
        }
        let body = if globals.is_empty() { e.clone() } else { globals_to_locals(e, &globals) };
        let arg = if args.len() == 1 { args.pop().unwrap_or_else(|| tuple(vec![])) } else { tuple(args) };
        let k = self.interpreted.len() as i64;
        self.interpreted.push(InterpretedSite { params, body, what: nc.what, span: nc.span });
        self.sites += 1;
        at_span(call(Builtin::Interp, &[int(k), arg], e.ty.clone()), e.span)
    }

    fn rewrite_node(&mut self, e: &E) -> R<E> {
        match &e.kind {
            // A let-bound function known at compile time is in scope for the sites in the body
            // (binders are unique, so what it captures is in scope there too).
            // A let-bound constant 1-form `omega c` or first-order dual: its uses are rewritten
            // (`pullback f w`, `d t`, `unstar d`), so the binding goes; a use of another kind
            // is not compiled.
            ExprKind::Let(p, rhs, body) if self.omega_of(rhs).is_some() || matches!(p.ty, Type::Dual(_)) => {
                if let PatKind::Var(_, id) = &p.kind {
                    let mut out = Vec::new();
                    if let Some(c) = self.omega_of(rhs) {
                        let c = self.rewrite(&c)?;
                        let c = self.bind(&mut out, "c", c);
                        self.omegas.insert(*id, c);
                    } else if let Some(v) = self.vector_of(rhs, rhs)? {
                        let v = self.bind(&mut out, "dv", v);
                        self.duals.insert(*id, v);
                    } else if let Some(m) = self.dual_map_of(&mut out, rhs)? {
                        // A dual map on a space with arrays: W's vector and S's coefficients made
                        // here, the map applied where the dual is (precomposition, below).
                        self.dual_maps.insert(*id, m);
                    } else {
                        return Err(not("a dual vector not known at compile time", rhs.span));
                    }
                    let body2 = self.rewrite(body)?;
                    let mut fv = FxHashSet::default();
                    free_locals(&body2, &mut fv);
                    if fv.contains(id) {
                        return Err(not("a dual vector or 1-form used as a value", rhs.span));
                    }
                    return Ok(lets(out, body2));
                }
            }
            ExprKind::Let(p, rhs, body) if is_fun(&p.ty) => {
                if let PatKind::Var(_, id) = &p.kind {
                    let rhs2 = self.rewrite(rhs)?;
                    let k = self.known(&rhs2, &self.scope.clone());
                    if let Some(l) = k {
                        self.scope.insert(*id, l);
                    }
                    let body2 = self.rewrite(body)?;
                    return Ok(Expr::new(ExprKind::Let(p.clone(), rhs2, body2), e.span, e.ty.clone()));
                }
            }
            ExprKind::Pullback(..) => return Err(not("`pullback`", e.span)),
            // A dual map on a space with arrays not applied to a tangent: a linear functional whose
            // vector needs the arrays' lengths (the reducer prints it `<fun>`, or its vector with `0`
            // for an array that receives nothing).
            ExprKind::Dual(p, _, _) if zero_point(&p.ty).is_none() => {
                return Err(not("a dual map on a space with arrays used other than applied to a tangent", e.span))
            }
            ExprKind::Dual(..) => return Err(not("`dual`", e.span)),
            ExprKind::Var(_, VarRef::Builtin(b)) if is_reverse_builtin(*b) => {
                return Err(not(format!("`{}` not applied to all its arguments", b.name()), e.span))
            }
            ExprKind::App(d, t) if matches!(d.ty, Type::Dual(_)) => {
                // A first-order dual applied to a tangent: the pairing ⟨v, t⟩ of its vector
                // (`(pullback f (omega c)) x t = ⟨vjp f x c, t⟩`: rules 3 and 17, then `r*`).
                if let Some(v) = self.vector_of(d, e)? {
                    let t = self.rewrite(t)?;
                    return self.pairing(v, t, e.span);
                }
                if let Some(r) = self.function_dual(d, t, e)? {
                    return Ok(r);
                }
                // A dual map whose space has no zero point known without a shape (arrays), applied
                // to a tangent: precomposition, ((λp. S)*·W) t = W (S[t/p]) (the dual map
                // f*·w = w ∘ f, Mak & Ong Sec. 3, then rule 1), so ⟨w, S[t/p]⟩ for W's vector w.
                // Let-bound, w and S's coefficients were made at the `let`.
                let mut out = Vec::new();
                let m = match local(strip(d)).and_then(|id| self.dual_maps.get(&id).cloned()) {
                    Some(m) => Some(m),
                    None => self.dual_map_of(&mut out, d)?,
                };
                if let Some((q, body, w)) = m {
                    let ty = Type::fun(q.ty.clone(), body.ty.clone());
                    let l = self.refresh(&Expr::new(ExprKind::Lam(q, body), d.span, ty));
                    let s = self.rewrite(&beta(&l, &[t]))?;
                    let r = self.pairing(w, s, e.span)?;
                    return Ok(lets(out, r));
                }
                // W not a vector the transform makes (a dual map on an array space itself):
                // W (S[t/p]).
                if let ExprKind::Dual(p, body, w) = &strip(d).kind {
                    let ty = Type::fun(p.ty.clone(), body.ty.clone());
                    let l = Expr::new(ExprKind::Lam(p.clone(), body.clone()), d.span, ty);
                    let s = beta(&l, &[t]);
                    return self.rewrite(&Expr::new(ExprKind::App(w.clone(), s), e.span, e.ty.clone()));
                }
            }
            ExprKind::App(..) => {
                let (h, args) = anf::anormal::spine(e);
                // A call of a definition that differentiates a function parameter: inlined, so
                // the argument is known at its sites.
                if let ExprKind::Var(_, VarRef::Global(d)) = &strip(h).kind {
                    if self.pending.contains_key(d) && args.len() >= function_params(&self.mono.def(*d).body) {
                        let l = self.refresh(&self.mono.def(*d).body.clone());
                        let t = beta(&l, &args);
                        return self.rewrite(&t);
                    }
                }
                if let (ExprKind::Var(_, VarRef::Builtin(Builtin::Unstar)), [a]) = (&strip(h).kind, args.as_slice()) {
                    if let Some(v) = self.vector_of(a, e)? {
                        return Ok(v);
                    }
                }
                // jac f s x = (J f · s) x; for f to Real it is ⟨∇f(x), s⟩, the pairing of the
                // vjp along 1.0 with the tangent (rule 15's Jacobian, transposed by rule 5).
                if let (ExprKind::Var(_, VarRef::Builtin(Builtin::Jac)), [f, s, x]) = (&strip(h).kind, args.as_slice())
                {
                    if e.ty == Type::Real {
                        self.span = e.span;
                        let f = self.rewrite(f)?;
                        let s = self.rewrite(s)?;
                        let x = self.rewrite(x)?;
                        let v = self.site(Builtin::Vjp, &[f, x, real(1.0)], e, false)?;
                        self.sites += 1;
                        return self.pairing(v, s, e.span);
                    }
                }
                if let ExprKind::Var(_, VarRef::Builtin(b)) = &strip(h).kind {
                    if matches!(b, Builtin::Grad | Builtin::Vjp | Builtin::Jacobian) && args.len() == b.arity() {
                        let args: Vec<E> = args.into_iter().map(|a| self.rewrite(a)).collect::<R<_>>()?;
                        self.span = e.span;
                        let out = self.site(*b, &args, e, *b == Builtin::Vjp)?;
                        self.sites += 1;
                        return Ok(out);
                    }
                    // `grad f` as a value: its η-expansion `λx. grad f x`, a site in a λ.
                    if matches!(b, Builtin::Grad | Builtin::Vjp | Builtin::Jacobian) && args.len() < b.arity() {
                        if let Type::Fun(a, r) = &e.ty {
                            let id = self.fresh();
                            let x = var(id, &"x".into(), a);
                            let body = Expr::new(ExprKind::App(e.clone(), x), e.span, (**r).clone());
                            let l = lam(id, &"x".into(), a, body);
                            return self.rewrite(&l);
                        }
                    }
                    if is_reverse_builtin(*b) {
                        return Err(not(format!("`{}`", b.name()), e.span));
                    }
                }
            }
            _ => {}
        }
        map_children(e, &mut |c| self.rewrite(c))
    }

    /// `((pullback F (omega c)) x) t` at an input `x` of function type: the dual on a function
    /// space (Mak & Ong, Corollary 4.8) applied to the tangent function `t` is `c` times the
    /// derivative of `F` along `t`, the function space's linear structure being pointwise:
    /// `c * grad (λε. F (λa. x a + ε · t a)) 0`, an ordinary site once `x` and `t` are known.
    fn function_dual(&mut self, d: &E, t: &E, e: &E) -> R<Option<E>> {
        let (h, args) = anf::anormal::spine(strip(d));
        let (ExprKind::Pullback(f, w), [x]) = (&strip(h).kind, args.as_slice()) else { return Ok(None) };
        let Some(c) = self.omega_of(w) else { return Ok(None) };
        if !is_fun(&x.ty) || c.ty != Type::Real || e.ty != Type::Real {
            return Ok(None);
        }
        let eid = self.fresh();
        let eps = var(eid, &"eps".into(), &Type::Real);
        let (xid, tid) = (self.fresh(), self.fresh());
        let xv = var(xid, &"xf".into(), &x.ty);
        let tv = var(tid, &"tf".into(), &t.ty);
        let Some(moved) = self.along(&xv, &tv, &eps, &x.ty) else { return Ok(None) };
        let body = mk(ExprKind::App((*f).clone(), moved), Type::Real);
        let g = lam(eid, &"eps".into(), &Type::Real, body);
        let grad = at_span(call(Builtin::Grad, &[g, real(0.0)], Type::Real), e.span);
        let r = lets(
            vec![
                Bind { id: xid, name: "xf".into(), ty: x.ty.clone(), rhs: (*x).clone() },
                Bind { id: tid, name: "tf".into(), ty: t.ty.clone(), rhs: t.clone() },
            ],
            rbin(BinOp::Mul, &c, &grad),
        );
        Ok(Some(self.rewrite(&r)?))
    }

    /// `x + ε · t` at type `ty`, pointwise through function types (`None`: a type without it).
    fn along(&mut self, x: &E, t: &E, eps: &E, ty: &Type) -> Option<E> {
        match ty {
            Type::Real => Some(rbin(BinOp::Add, x, &rbin(BinOp::Mul, eps, t))),
            ty if ty.is_discrete() => Some(x.clone()),
            Type::Fun(a, r) => {
                let id = self.fresh();
                let av = var(id, &"a".into(), a);
                let xa = mk(ExprKind::App(x.clone(), av.clone()), (**r).clone());
                let ta = mk(ExprKind::App(t.clone(), av), (**r).clone());
                let body = self.along(&xa, &ta, eps, r)?;
                Some(lam(id, &"a".into(), a, body))
            }
            _ => None,
        }
    }

    /// `c` of a constant 1-form `omega c` (or of a variable bound to one).
    fn omega_of(&self, w: &E) -> Option<E> {
        let w = strip(w);
        match &w.kind {
            ExprKind::App(o, c) if matches!(strip(o).kind, ExprKind::Var(_, VarRef::Builtin(Builtin::Omega))) => {
                Some(c.clone())
            }
            ExprKind::Var(_, VarRef::Local(id)) => self.omegas.get(id).cloned(),
            _ => None,
        }
    }

    /// `(p, S, w)` of a dual map `(λp. S)*·W` whose space has arrays (no zero point without a
    /// shape) and whose `W`'s vector `w` the transform compiles.
    /// W's vector is bound on `out` first, then the bindings of S that do not depend on `p` (its
    /// coefficients, which the reducer's reduction 5 computes where the dual is made); the `S`
    /// returned is the rest.
    fn dual_map_of(&mut self, out: &mut Vec<Bind>, d: &E) -> R<Option<(Rc<Pat>, E, E)>> {
        let ExprKind::Dual(p, body, w) = &strip(d).kind else { return Ok(None) };
        if zero_point(&p.ty).is_some() {
            return Ok(None);
        }
        let Some(wv) = self.vector_of(w, d)? else { return Ok(None) };
        let w = self.bind(out, "dv", wv);
        let body = self.refresh(body);
        let (binds, res) = match series(&body) {
            Some(s) => s,
            None => {
                let mut fr = self.fresher();
                let a = anf::anormal::anormalise(&body, &mut fr);
                series(&a).unwrap_or((Vec::new(), body))
            }
        };
        let mut dep = FxHashSet::default();
        pat_ids(p, &mut dep);
        let mut rest = Vec::new();
        for b in binds {
            let mut fv = FxHashSet::default();
            free_locals(&b.rhs, &mut fv);
            if fv.iter().any(|v| dep.contains(v)) {
                dep.insert(b.id);
                rest.push(b);
            } else {
                let rhs = self.rewrite(&b.rhs)?;
                out.push(Bind { rhs, ..b });
            }
        }
        Ok(Some((p.clone(), lets(rest, res), w)))
    }

    /// The vector `Sᵀw` of a dual map `(λq. S)*·W` on a space with arrays ([`Transform::dual_map_of`]'s
    /// `q`, `S` and `w`, W's vector and S's coefficients in scope), where the reducer's reduction 5
    /// gives it (Mak & Ong Sec. 3, reduction 5: `(λv. S)*·r′* → (Sᵀ r′)*`) and the transform sees
    /// that it does: `None` otherwise (the reducer may be stuck, the vector needing the arrays'
    /// lengths, as for `sum v` or `v.[i]`).
    ///
    /// Reduction 5 transposes `S` structurally against `w`; without the arrays' lengths it gives a
    /// vector exactly when each array of the space receives its adjoint whole, from a part of `w`
    /// (the array reaches the output through copies and tuples) or from a coefficient (`dot v k`).
    /// So: `q` a variable (its projections, one level, the leaves when it is a tuple) or a tuple
    /// of variables; `S` a let-series whose bindings that depend on `q` are copies, tuples, the
    /// projections of `q`, Real `+ - neg`, Real `*` and `/` by a coefficient, and `dot` with a
    /// coefficient bound outside `S`; each leaf holding an array used once, on a path through
    /// copies and tuples ending at the output or in one `dot` (or several `dot`s with the same
    /// coefficient). The point's shape is then known — the output's part of `w`, or the
    /// coefficient — and the vector is the vjp of `λq. S` at the zero of that shape along `w`
    /// (linear: any point of the shape gives it), where nothing can fail.
    fn dual_map_vector(&mut self, q: &Rc<Pat>, body: &E, w: &E) -> R<Option<E>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Use {
            Copy(LocalId),
            InTuple(LocalId, usize),
            Dot(LocalId),
        }
        let Some((binds, res)) = series(body) else { return Ok(None) };
        let Some(res_id) = local(&res) else { return Ok(None) };
        // The pattern's variables; for a variable of tuple type, its projections are the leaves.
        let mut root: Option<LocalId> = None;
        let mut leaves: Vec<(LocalId, Type)> = Vec::new();
        match &q.kind {
            PatKind::Var(_, id) if matches!(q.ty, Type::Tuple(_)) => root = Some(*id),
            PatKind::Var(_, id) => leaves.push((*id, q.ty.clone())),
            PatKind::Tuple(ps) => {
                for p in ps.iter() {
                    let PatKind::Var(_, id) = &p.kind else { return Ok(None) };
                    leaves.push((*id, p.ty.clone()));
                }
            }
            _ => return Ok(None),
        }
        let mut dep: FxHashSet<LocalId> = leaves.iter().map(|l| l.0).collect();
        dep.extend(root);
        let bound: FxHashSet<LocalId> = binds.iter().map(|b| b.id).collect();
        let mut uses: FxHashMap<LocalId, Vec<Use>> = FxHashMap::default();
        let mut projections: Vec<(usize, LocalId)> = Vec::new();
        let atom = |e: &E| local(strip(e));
        for b in &binds {
            let mut fv = FxHashSet::default();
            free_locals(&b.rhs, &mut fv);
            if !fv.iter().any(|v| dep.contains(v)) {
                continue; // a coefficient S computes itself
            }
            dep.insert(b.id);
            let rhs = strip(&b.rhs);
            let real = b.ty == Type::Real;
            let mut use_of = |a: LocalId, u: Use| uses.entry(a).or_default().push(u);
            match &rhs.kind {
                ExprKind::Var(_, VarRef::Local(a)) => use_of(*a, Use::Copy(b.id)),
                ExprKind::Proj(a, i) if atom(a).is_some() && atom(a) == root => projections.push((*i, b.id)),
                ExprKind::Tuple(xs) if xs.iter().all(|x| atom(x).is_some()) => {
                    for (i, x) in xs.iter().enumerate() {
                        if let Some(a) = atom(x).filter(|a| dep.contains(a)) {
                            use_of(a, Use::InTuple(b.id, i));
                        }
                    }
                }
                ExprKind::Neg(a) if real && atom(a).is_some() => {}
                ExprKind::Bin(BinOp::Add | BinOp::Sub, a, c) if real && atom(a).is_some() && atom(c).is_some() => {}
                // Linear in the one factor that depends on q.
                ExprKind::Bin(BinOp::Mul, a, c)
                    if real && atom(a).zip(atom(c)).is_some_and(|(x, k)| !(dep.contains(&x) && dep.contains(&k))) => {}
                ExprKind::Bin(BinOp::Div, a, c)
                    if real
                        && atom(a).is_some_and(|x| dep.contains(&x))
                        && atom(c).is_some_and(|k| !dep.contains(&k)) => {}
                _ => {
                    let (h, args) = anf::anormal::spine(rhs);
                    let (ExprKind::Var(_, VarRef::Builtin(Builtin::Dot)), [a, c]) = (&strip(h).kind, args.as_slice())
                    else {
                        return Ok(None);
                    };
                    let (Some(a), Some(c)) = (atom(a), atom(c)) else { return Ok(None) };
                    let (x, k) = match (dep.contains(&a), dep.contains(&c)) {
                        (true, false) => (a, c),
                        (false, true) => (c, a),
                        _ => return Ok(None),
                    };
                    if bound.contains(&k) {
                        return Ok(None); // a coefficient made inside S: not in scope for the point
                    }
                    use_of(x, Use::Dot(k));
                }
            }
        }
        if let Some(r) = root {
            // The root variable is only projected (one level), each component at most once when it
            // holds an array.
            if uses.contains_key(&r) {
                return Ok(None);
            }
            let Type::Tuple(ts) = &q.ty else { return Ok(None) };
            for (i, id) in &projections {
                if holds_array(&ts[*i]) && projections.iter().filter(|(j, _)| j == i).count() > 1 {
                    return Ok(None);
                }
                leaves.push((*id, ts[*i].clone()));
            }
        } else if !projections.is_empty() {
            return Ok(None);
        }
        // An array of a discrete type never receives an adjoint: the reducer leaves its `0`, and
        // `unstar` stops there.
        if leaves.iter().any(|(_, t)| holds_discrete_array(t)) {
            return Ok(None);
        }
        // Where each leaf holding an array receives its adjoint: a part of w, or a coefficient.
        enum Sink {
            Out(Vec<usize>),
            Coef(LocalId),
        }
        let mut sinks: FxHashMap<LocalId, Sink> = FxHashMap::default();
        for (leaf, ty) in &leaves {
            if !holds_array(ty) {
                continue;
            }
            let mut cur = *leaf;
            let mut path = Vec::new();
            let sink = loop {
                let us = uses.get(&cur).cloned().unwrap_or_default();
                let at_out = usize::from(cur == res_id);
                if us.len() + at_out != 1 {
                    // Several `dot`s with one coefficient add arrays of its length.
                    let first = us.first().copied();
                    if at_out == 0 && matches!(first, Some(Use::Dot(_))) && us.iter().all(|u| Some(*u) == first) {
                        let Some(Use::Dot(k)) = first else { return Ok(None) };
                        break Sink::Coef(k);
                    }
                    return Ok(None);
                }
                if at_out == 1 {
                    path.reverse();
                    break Sink::Out(path);
                }
                match us[0] {
                    Use::Copy(z) => cur = z,
                    Use::InTuple(z, i) => {
                        path.push(i);
                        cur = z;
                    }
                    Use::Dot(k) => break Sink::Coef(k),
                }
            };
            sinks.insert(*leaf, sink);
        }
        // The point: each leaf's zero, of its sink's shape when it holds an array.
        let mut out = Vec::new();
        let point_of = |t: &mut Self, out: &mut Vec<Bind>, leaf: LocalId, ty: &Type| -> Option<E> {
            match sinks.get(&leaf) {
                None => zero_point(ty),
                Some(Sink::Coef(k)) => Some(t.zeros_like(out, &var(*k, &"k".into(), ty))),
                Some(Sink::Out(path)) => {
                    let mut part = w.clone();
                    for i in path {
                        part = t.bind(out, "w", proj(&part, *i));
                    }
                    Some(t.zeros_like(out, &part))
                }
            }
        };
        let p0 = match (&q.kind, root) {
            (_, Some(_)) => {
                let Type::Tuple(ts) = &q.ty else { return Ok(None) };
                let mut cs = Vec::new();
                for (i, t) in ts.iter().enumerate() {
                    let c = match projections.iter().find(|(j, _)| *j == i) {
                        Some((_, id)) => point_of(self, &mut out, *id, t),
                        None => zero_point(t),
                    };
                    let Some(c) = c else { return Ok(None) };
                    cs.push(c);
                }
                tuple(cs)
            }
            (PatKind::Var(_, id), None) => {
                let Some(c) = point_of(self, &mut out, *id, &q.ty) else { return Ok(None) };
                c
            }
            (PatKind::Tuple(ps), None) => {
                let mut cs = Vec::new();
                for p in ps.iter() {
                    let PatKind::Var(_, id) = &p.kind else { return Ok(None) };
                    let Some(c) = point_of(self, &mut out, *id, &p.ty) else { return Ok(None) };
                    cs.push(c);
                }
                tuple(cs)
            }
            _ => return Ok(None),
        };
        let p0 = self.bind(&mut out, "p0", p0);
        let ty = Type::fun(q.ty.clone(), body.ty.clone());
        let f = self.refresh(&Expr::new(ExprKind::Lam(q.clone(), body.clone()), body.span, ty));
        let v = self.site(Builtin::Vjp, &[f, p0, w.clone()], body, false)?;
        self.sites += 1;
        Ok(Some(lets(out, v)))
    }

    /// The zero of `x`'s shape (its arrays' lengths, at any depth): a term.
    fn zeros_like(&mut self, out: &mut Vec<Bind>, x: &E) -> E {
        match &x.ty {
            Type::Array(e) => {
                let e = (**e).clone();
                let id = self.fresh();
                let a = var(id, &"a".into(), &e);
                let mut bo = Vec::new();
                let z = self.zeros_like(&mut bo, &a);
                let f = lam(id, &"a".into(), &e, lets(bo, z));
                self.bind(out, "z", call(Builtin::Map, &[f, x.clone()], x.ty.clone()))
            }
            Type::Tuple(ts) => {
                let cs = (0..ts.len())
                    .map(|i| {
                        let c = self.bind(out, "c", proj(x, i));
                        self.zeros_like(out, &c)
                    })
                    .collect();
                tuple(cs)
            }
            t => zero_point(t).unwrap_or_else(|| x.clone()),
        }
    }

    /// The vector `r` of a first-order dual `r*` written in a form the transform compiles (site
    /// `e`), as a term: `None` for another form.
    fn vector_of(&mut self, d: &E, e: &E) -> R<Option<E>> {
        let d = strip(d);
        match &d.kind {
            ExprKind::Var(_, VarRef::Local(id)) => return Ok(self.duals.get(id).cloned()),
            // Rule 5 on a space with arrays, where it gives a vector without their lengths (a
            // let-bound one is a dual vector from its `let` on). W a literal vector in the reducer
            // too: `star v`, `(omega c) x`, or such a dual map of one (a pullback's vector may keep
            // a symbolic zero for an input it does not use, on which the reducer's `unstar` stops
            // inside a gradient).
            ExprKind::Dual(p, _, w) if zero_point(&p.ty).is_none() && literal_dual(w) => {
                let (listed, interpreted) = (self.listings.len(), self.interpreted.len());
                let mut out = Vec::new();
                if let Some((q, body, w)) = self.dual_map_of(&mut out, d)? {
                    if let Some(v) = self.dual_map_vector(&q, &body, &w)? {
                        return Ok(Some(lets(out, v)));
                    }
                }
                // Not here: what W and S's coefficients made is made again where the map is used.
                self.listings.truncate(listed);
                self.interpreted.truncate(interpreted);
                return Ok(None);
            }
            // Rule 5: a dual map (λp. S)*·W with S linear (the `lin` check) sends W's vector to
            // its transpose, the vjp of λp. S along it (at any point: zero).
            ExprKind::Dual(p, body, w) => {
                let Some(z) = zero_point(&p.ty) else { return Ok(None) };
                let Some(wv) = self.vector_of(w, e)? else { return Ok(None) };
                let body = self.rewrite(body)?;
                let ty = Type::fun(p.ty.clone(), body.ty.clone());
                let f = Expr::new(ExprKind::Lam(p.clone(), body), d.span, ty);
                self.span = d.span;
                let v = self.site(Builtin::Vjp, &[f, z, wv], e, false)?;
                self.sites += 1;
                return Ok(Some(v));
            }
            _ => {}
        }
        let (h, args) = anf::anormal::spine(d);
        // unstar ((pullback f (omega c)) x) = vjp f x c (rules 3 and 17).
        if let (ExprKind::Pullback(f, w), [x]) = (&strip(h).kind, args.as_slice()) {
            let Some(c) = self.omega_of(w) else { return Ok(None) };
            if is_fun(&x.ty) {
                return Ok(None); // a dual on a function space: `function_dual`
            }
            self.span = e.span;
            let f = self.rewrite(f)?;
            let c = self.rewrite(&c)?;
            let x = self.rewrite(x)?;
            let v = self.site(Builtin::Vjp, &[f, x, c], e, false)?;
            self.sites += 1;
            return Ok(Some(v));
        }
        match (&strip(h).kind, args.as_slice()) {
            // unstar (star v) = v.
            (ExprKind::Var(_, VarRef::Builtin(Builtin::Star)), [v]) => {
                self.sites += 1;
                Ok(Some(self.rewrite(v)?))
            }
            // (Ω c) x = c* at any point (rule 1: Ω c is λx. c*).
            (ExprKind::Var(_, VarRef::Builtin(Builtin::Omega)), [c, x]) => {
                self.sites += 1;
                let c = self.rewrite(c)?;
                let x = self.rewrite(x)?;
                let mut out = Vec::new();
                self.bind(&mut out, "x", x);
                Ok(Some(lets(out, c)))
            }
            (ExprKind::Var(_, VarRef::Local(w)), [x]) if self.omegas.contains_key(w) => {
                self.sites += 1;
                let c = self.omegas[w].clone();
                let x = self.rewrite(x)?;
                let mut out = Vec::new();
                self.bind(&mut out, "x", x);
                Ok(Some(lets(out, c)))
            }
            _ => Ok(None),
        }
    }

    /// `check`: a `vjp` the user wrote (its cotangent is checked against the output, as the
    /// interpreter does).
    fn site(&mut self, b: Builtin, args: &[E], e: &E, check: bool) -> R<E> {
        let mut out = Vec::new();
        let x = self.bind(&mut out, "x", args[1].clone());
        match b {
            Builtin::Grad | Builtin::Vjp => {
                let ct = if b == Builtin::Grad { real(1.0) } else { self.bind(&mut out, "ct", args[2].clone()) };
                let (g, _) = self.gradient_value(&mut out, &args[0], &x, &ct, check)?;
                Ok(lets(out, g))
            }
            _ => {
                // jacobian f x: one vjp per output component, with the one-hot cotangents.
                let f = self.resolve(&args[0])?;
                let y = self.apply_known(&f, &x)?;
                let y = self.bind(&mut out, "y", y);
                let m = self.bind(&mut out, "m", call(Builtin::Len, &[y], Type::Int));
                let kid = self.fresh();
                let k = var(kid, &"k".into(), &Type::Int);
                let jid = self.fresh();
                let j = var(jid, &"j".into(), &Type::Int);
                let onehot_body = if_(&bin(BinOp::Eq, &j, &k, Type::Bool), real(1.0), real(0.0));
                let onehot_fn = lam(jid, &"j".into(), &Type::Int, onehot_body);
                let mut row = Vec::new();
                let ct =
                    self.bind(&mut row, "ct", call(Builtin::Build, &[m.clone(), onehot_fn], Type::array(Type::Real)));
                let g = self.gradient(&mut row, &args[0], &x, &ct)?;
                let row_fn = lam(kid, &"k".into(), &Type::Int, lets(row, g));
                let rows = call(Builtin::Build, &[m, row_fn], e.ty.clone());
                Ok(lets(out, rows))
            }
        }
    }

    /// Emits `ctCheck'` for each array in the output `y` against the cotangent `c`, at any depth,
    /// in the interpreter's order (`cotangent_mismatch`: an array's length, then its elements in
    /// order, each a loop over the indices; a tuple's components in order), so the first
    /// mismatch is the same one, reported at the site with the path to it (`path`: the steps from
    /// the output, `ctCheck'`'s shape word and the element indices).
    fn check_cotangent(&mut self, out: &mut Vec<Bind>, y: &E, c: &E, path: &mut Vec<Step>) -> R<()> {
        self.check_shapes(out, y, c, path, None)
    }

    /// [`Transform::check_cotangent`] for a cotangent (`pairing: None`) or, with `Some(span)`, for
    /// the tangent `c` paired with the dual vector `y` at `span` (the reducer's `r*` pairing: its
    /// discrete components pair with anything; `anf::ir::pairing_message`).
    fn check_shapes(
        &mut self,
        out: &mut Vec<Bind>,
        y: &E,
        c: &E,
        path: &mut Vec<Step>,
        pairing: Option<Span>,
    ) -> R<()> {
        if pairing.is_some() && y.ty.is_discrete() {
            return Ok(());
        }
        match (&y.ty, &c.ty) {
            (Type::Array(et), Type::Array(_)) => {
                let n = self.bind(out, "n", call(Builtin::Len, std::slice::from_ref(y), Type::Int));
                let m = self.bind(out, "m", call(Builtin::Len, std::slice::from_ref(c), Type::Int));
                let steps: Vec<Option<i64>> =
                    path.iter().map(|s| if let Step::Comp(k) = s { Some(*k as i64 + 1) } else { None }).collect();
                let word = match pairing {
                    None => anf::ir::cotangent_shape(&steps),
                    Some(_) => anf::ir::pairing_shape(&steps),
                };
                let Some(shape) = word else {
                    let what = match pairing {
                        None => format!("a `vjp` with a cotangent of type {} this deep", c.ty),
                        Some(_) => format!("a dual vector of type {} this deep applied to a tangent", c.ty),
                    };
                    return Err(not(what, pairing.unwrap_or(self.span)));
                };
                let mut idx: Vec<E> =
                    path.iter().filter_map(|s| if let Step::At(i) = s { Some(i.clone()) } else { None }).collect();
                let idx = match idx.len() {
                    0 => mk(ExprKind::Lit(Lit::Unit), Type::Unit),
                    1 => idx.remove(0),
                    _ => tuple(idx),
                };
                let chk = at_span(
                    call(Builtin::CtCheck, &[n.clone(), m, int(shape), idx], Type::Unit),
                    pairing.unwrap_or(self.span),
                );
                self.bind(out, "chk", chk);
                if holds_array(et) {
                    // Each element too (the lengths are equal by now):
                    // iterate' n (λs. let k = s.0 in <check y.[k] against c.[k]>; (k + 1, ())) (0, ()).
                    let sty = Type::tuple(vec![Type::Int, Type::Unit]);
                    let sid = self.fresh();
                    let s = var(sid, &"s".into(), &sty);
                    let mut bo = Vec::new();
                    let k = self.bind(&mut bo, "k", proj(&s, 0));
                    let yk = self.bind(&mut bo, "y", index(y, &k));
                    let ck = self.bind(&mut bo, "c", index(c, &k));
                    path.push(Step::At(k.clone()));
                    let r = self.check_shapes(&mut bo, &yk, &ck, path, pairing);
                    path.pop();
                    r?;
                    let k1 = self.bind(&mut bo, "k", bin(BinOp::Add, &k, &int(1), Type::Int));
                    let unit = mk(ExprKind::Lit(Lit::Unit), Type::Unit);
                    let step = lam(sid, &"s".into(), &sty, lets(bo, tuple(vec![k1, unit.clone()])));
                    self.bind(out, "chk", call(Builtin::RevIterate, &[n, step, tuple(vec![int(0), unit])], sty));
                }
            }
            (Type::Tuple(ts), Type::Tuple(_)) => {
                for i in 0..ts.len() {
                    if !holds_array(&ts[i]) {
                        continue;
                    }
                    let yi = self.bind(out, "y", proj(y, i));
                    let ci = self.bind(out, "c", proj(c, i));
                    path.push(Step::Comp(i));
                    let r = self.check_shapes(out, &yi, &ci, path, pairing);
                    path.pop();
                    r?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The pairing ⟨v, t⟩ of a dual vector with a tangent of a first-order type (Real), at `span`
    /// (the application): the tangent's arrays are checked against the vector's first, in the
    /// reducer's order (`r*`: `vector::inner`), so a tangent of another shape is the reducer's error.
    fn pairing(&mut self, v: E, t: E, span: Span) -> R<E> {
        let mut out = Vec::new();
        let v = self.bind(&mut out, "v", v);
        let t = self.bind(&mut out, "t", t);
        self.check_shapes(&mut out, &v, &t, &mut Vec::new(), Some(span))?;
        let r = self.pair_atoms(&mut out, &v, &t)?;
        Ok(lets(out, r))
    }

    fn pair_atoms(&mut self, out: &mut Vec<Bind>, v: &E, t: &E) -> R<E> {
        Ok(match &v.ty {
            ty if ty.is_discrete() => real(0.0),
            Type::Real => rbin(BinOp::Mul, v, t),
            Type::Array(e) if **e == Type::Real => call(Builtin::Dot, &[v.clone(), t.clone()], Type::Real),
            // Σᵢ ⟨vᵢ, tᵢ⟩ over arrays of arrays and of tuples: sum (zipWith (λa b. ⟨a, b⟩) v t).
            ty @ Type::Array(e) if is_data(ty) => {
                let e = (**e).clone();
                let (aid, bid) = (self.fresh(), self.fresh());
                let (a, b) = (var(aid, &"a".into(), &e), var(bid, &"b".into(), &e));
                let mut bo = Vec::new();
                let p = self.pair_atoms(&mut bo, &a, &b)?;
                let f = lam(aid, &"a".into(), &e, lam(bid, &"b".into(), &e, lets(bo, p)));
                let ps =
                    self.bind(out, "p", call(Builtin::ZipWith, &[f, v.clone(), t.clone()], Type::array(Type::Real)));
                call(Builtin::Sum, &[ps], Type::Real)
            }
            Type::Tuple(ts) => {
                let mut acc: Option<E> = None;
                for i in 0..ts.len() {
                    if ts[i].is_discrete() {
                        continue;
                    }
                    let a = self.bind(out, "v", proj(v, i));
                    let b = self.bind(out, "t", proj(t, i));
                    let p = self.pair_atoms(out, &a, &b)?;
                    let p = self.bind(out, "p", p);
                    acc = Some(match acc {
                        None => p,
                        Some(q) => self.bind(out, "p", rbin(BinOp::Add, &q, &p)),
                    });
                }
                acc.unwrap_or_else(|| real(0.0))
            }
            t => return Err(not(format!("a dual vector of type {t} applied to a tangent"), self.span)),
        })
    }

    /// `let z = rhs` appended to `out`; the variable.
    fn bind(&mut self, out: &mut Vec<Bind>, name: &str, rhs: E) -> E {
        let id = self.fresh();
        let b = Bind { id, name: name.into(), ty: rhs.ty.clone(), rhs };
        let v = b.var();
        out.push(b);
        v
    }

    /// The λ a function term denotes, when it is statically known (a λ or a definition), as a
    /// fresh copy.
    fn resolve(&mut self, f: &E) -> R<E> {
        match self.known(f, &self.scope) {
            Some(l) => Ok(self.refresh(&l)),
            // A builtin or a partial application: its η-expansion `λx. f x` (inlining then sees
            // the primitive, or the known function at the head of the application).
            None if is_fun(&f.ty) && !matches!(strip(f).kind, ExprKind::Var(_, VarRef::Local(_))) => {
                let Type::Fun(a, r) = &f.ty else { unreachable!() };
                let id = self.fresh();
                let x = var(id, &"x".into(), a);
                let body = mk(ExprKind::App(self.refresh(f), x), (**r).clone());
                Ok(lam(id, &"x".into(), a, body))
            }
            None => Err(not("a gradient of a function not known at compile time", self.span)),
        }
    }

    fn known(&self, f: &E, env: &FxHashMap<LocalId, E>) -> Option<E> {
        let f = strip(f);
        match &f.kind {
            // A partial application of a known function: its η-expansion `λy. f a… y` (inlined
            // at each call, where the head is β-reduced).
            ExprKind::App(..) if is_fun(&f.ty) => {
                let (h, _) = anf::anormal::spine(f);
                self.known(h, env)?;
                let Type::Fun(a, r) = &f.ty else { return None };
                let id = LocalId(u32::MAX);
                let y = var(id, &"y".into(), a);
                let body = mk(ExprKind::App(f.clone(), y), (**r).clone());
                Some(lam(id, &"y".into(), a, body))
            }
            ExprKind::Lam(..) => Some(f.clone()),
            // A function chosen by an `if` whose condition cannot fail, both branches known:
            // `λy. if c then f₁ y else f₂ y` (the reducer reduces the `if` at the point and applies
            // the branch taken; differentiating the `if` takes that branch too).
            ExprKind::If(c, a, b) if is_fun(&f.ty) && total(c) => {
                // The branches stay as written (each application of them inlines where it is
                // made), so no placeholder binder nests inside another.
                let branch = |x: &E| self.known(x, env).or_else(|| self.eta_builtin(x)).is_some();
                if !(branch(a) && branch(b)) {
                    return None;
                }
                let Type::Fun(t, r) = &f.ty else { return None };
                let id = LocalId(u32::MAX);
                let y = var(id, &"y".into(), t);
                let app = |g: &E| mk(ExprKind::App(g.clone(), y.clone()), (**r).clone());
                Some(lam(id, &"y".into(), t, if_(c, app(a), app(b))))
            }
            // An element of an array literal of known functions at a literal index.
            ExprKind::Index(a, k) if is_fun(&f.ty) => match (&self.known_array(a, env)?.kind, &strip(k).kind) {
                (ExprKind::Array(xs), ExprKind::Lit(Lit::Int(k))) => {
                    self.known(xs.get(usize::try_from(*k).ok()?)?, env)
                }
                _ => None,
            },
            // A component of a tuple of known functions (`p.1` for `p = (λ…, …)`).
            ExprKind::Proj(a, k) if is_fun(&f.ty) => match &self.known_tuple(a, env)?.kind {
                ExprKind::Tuple(cs) => self.known(cs.get(*k)?, env),
                _ => None,
            },
            ExprKind::Var(_, VarRef::Global(d)) if is_fun(&f.ty) => {
                let body = strip(self.bodies.get(d.0 as usize).unwrap_or(&self.mono.def(*d).body));
                matches!(body.kind, ExprKind::Lam(..)).then(|| body.clone())
            }
            ExprKind::Var(_, VarRef::Local(id)) => env.get(id).cloned(),
            _ => None,
        }
    }

    /// The tuple literal a tuple-typed atom with function components is bound to, if known.
    fn known_tuple(&self, a: &E, env: &FxHashMap<LocalId, E>) -> Option<E> {
        match &strip(a).kind {
            ExprKind::Tuple(_) => Some(strip(a).clone()),
            ExprKind::Var(_, VarRef::Local(id)) => {
                env.get(id).filter(|t| matches!(t.kind, ExprKind::Tuple(_))).cloned()
            }
            ExprKind::Proj(b, k) => match &self.known_tuple(b, env)?.kind {
                ExprKind::Tuple(cs) => self.known_tuple(cs.get(*k)?, env),
                _ => None,
            },
            _ => None,
        }
    }

    /// A builtin used as a value (`sin` in `[λ…, sin]`): its η-expansion `λy. b y`.
    fn eta_builtin(&self, f: &E) -> Option<E> {
        let f = strip(f);
        let (ExprKind::Var(_, VarRef::Builtin(_)), Type::Fun(a, r)) = (&f.kind, &f.ty) else { return None };
        let id = LocalId(u32::MAX);
        let y = var(id, &"y".into(), a);
        let body = mk(ExprKind::App(f.clone(), y), (**r).clone());
        Some(lam(id, &"y".into(), a, body))
    }

    /// The array literal of functions an array-of-functions atom is bound to, if known.
    fn known_array(&self, a: &E, env: &FxHashMap<LocalId, E>) -> Option<E> {
        let elem = |x: &E| self.known(x, env).is_some() || self.eta_builtin(x).is_some();
        let lit = |e: &E| matches!(&e.kind, ExprKind::Array(xs) if xs.iter().all(elem));
        match &strip(a).kind {
            ExprKind::Array(_) if lit(strip(a)) => Some(strip(a).clone()),
            ExprKind::Var(_, VarRef::Local(id)) => env.get(id).filter(|t| lit(t)).cloned(),
            // A definition bound to such a literal (closed: its λs capture nothing).
            ExprKind::Var(_, VarRef::Global(d)) => {
                let body = strip(self.bodies.get(d.0 as usize).unwrap_or(&self.mono.def(*d).body));
                lit(body).then(|| body.clone())
            }
            _ => None,
        }
    }

    /// `map g fs`, `fold h z fs` and `fs.[k]` (`k` a literal) over an array literal `fs` of known
    /// functions, unrolled (`[g f₀, …]`, `h (… (h z f₀) …) fₙ₋₁`, `f_k`: the reductions the
    /// reducer's (map), (fold) and `.[]` rules make, in the same order), so that each application
    /// of an element is inlined like any known function. `None` when `e` is none of these.
    fn unroll_known_array(&mut self, e: &E, env: &FxHashMap<LocalId, E>) -> Option<E> {
        let elems = |this: &Self, a: &E| match this.known_array(a, env).map(|t| t.kind.clone()) {
            Some(ExprKind::Array(xs)) => Some(xs),
            _ => None,
        };
        if let Some(t) = self.unroll_producer(e, env) {
            return Some(t);
        }
        if let ExprKind::Index(a, k) = &e.kind {
            let xs = elems(self, a)?;
            let ExprKind::Lit(Lit::Int(k)) = strip(k).kind else { return None };
            return usize::try_from(k).ok().and_then(|k| xs.get(k)).map(|f| self.refresh(f));
        }
        let (h, args) = anf::anormal::spine(e);
        match (&strip(h).kind, args.as_slice()) {
            (ExprKind::Var(_, VarRef::Builtin(Builtin::Map)), [g, fs]) => {
                let xs = elems(self, fs)?;
                let ys = xs.iter().map(|f| beta(&self.refresh(g), &[&self.refresh(f)])).collect();
                Some(Expr::new(ExprKind::Array(ys), e.span, e.ty.clone()))
            }
            (ExprKind::Var(_, VarRef::Builtin(Builtin::Fold)), [h, z, fs]) => {
                let xs = elems(self, fs)?;
                Some(xs.iter().fold((*z).clone(), |acc, f| beta(&self.refresh(h), &[&acc, &self.refresh(f)])))
            }
            _ => None,
        }
    }

    /// An array of closures made by `build n F` or `map G ws` whose function returns a λ at once
    /// (`F = λi. λx. b`: making element k cannot fail): its length and `λk. λx. let i = k in b`
    /// (`λk. λx. let w = ws.[k] in b` for `map`), the element as a λ, so that applications of it
    /// inline. `n` and `ws` must be atoms or literals of atoms (they are repeated).
    fn known_producer(&mut self, a: &E, env: &FxHashMap<LocalId, E>) -> Option<(E, E)> {
        let t = match &strip(a).kind {
            ExprKind::Var(_, VarRef::Local(id)) => env.get(id)?.clone(),
            _ => strip(a).clone(),
        };
        let (h, args) = anf::anormal::spine(&t);
        let atom = |x: &E| matches!(strip(x).kind, ExprKind::Var(_, VarRef::Local(_)) | ExprKind::Lit(_));
        let (n, f, ws) = match (&strip(h).kind, args.as_slice()) {
            // `n` is repeated where the array is used: an atom, or a term that cannot fail (`len x`).
            (ExprKind::Var(_, VarRef::Builtin(Builtin::Build)), [n, f]) if atom(n) || total(n) => {
                ((*n).clone(), *f, None)
            }
            (ExprKind::Var(_, VarRef::Builtin(Builtin::Map)), [g, ws])
                if atom(ws) || matches!(&strip(ws).kind, ExprKind::Array(xs) if xs.iter().all(atom)) =>
            {
                (call(Builtin::Len, &[(*ws).clone()], Type::Int), *g, Some((*ws).clone()))
            }
            _ => return None,
        };
        let l = self.refresh(&self.known(f, env)?);
        let ExprKind::Lam(p, inner) = &strip(&l).kind else { return None };
        // `λi. let c = e in … λx. b`: the element recomputes the lets when it is applied. The
        // array itself is still made (read for its bounds check, or mapped over once made), so
        // an error of `e` comes where it did, and `e` is deterministic: the same value again.
        let mut lets_before = Vec::new();
        let mut cur = strip(inner);
        while let ExprKind::Let(pl, rhs, rest) = &cur.kind {
            lets_before.push((pl.clone(), rhs.clone()));
            cur = strip(rest);
        }
        let ExprKind::Lam(q, body) = &cur.kind else { return None };
        let body = lets_before.into_iter().rev().fold(body.clone(), |b, (pl, rhs)| {
            let (ty, span) = (b.ty.clone(), b.span);
            Expr::new(ExprKind::Let(pl, rhs, b), span, ty)
        });
        let kid = self.fresh();
        let k = var(kid, &"k".into(), &Type::Int);
        let arg = match &ws {
            Some(ws) => index(ws, &k),
            None => k.clone(),
        };
        let b = Expr::new(ExprKind::Let(p.clone(), arg, body.clone()), body.span, body.ty.clone());
        let elem = Expr::new(ExprKind::Lam(q.clone(), b), cur.span, cur.ty.clone());
        Some((n, lam(kid, &"k".into(), &Type::Int, elem)))
    }

    /// Over an array of closures from [`Ad::known_producer`]: `fs.[k] a…` becomes
    /// `let _ = fs.[k] in F k a…` (the read keeps its bounds check) and `map h fs` becomes
    /// `build n (λk. h (F k))` (the closures cannot fail, so the first error is h's either way);
    /// each application of an element is then inlined like any known function.
    fn unroll_producer(&mut self, e: &E, env: &FxHashMap<LocalId, E>) -> Option<E> {
        let (h, args) = anf::anormal::spine(e);
        let atom = |x: &E| matches!(strip(x).kind, ExprKind::Var(_, VarRef::Local(_)) | ExprKind::Lit(_));
        match (&strip(h).kind, args.as_slice()) {
            // `fs.[k] a…` over an array literal of known functions at a computed index: the read
            // (its bounds check), then the element k applied, chosen by `if` (the reducer's `.[]`
            // picks the element at the point, reduction 4; an `if` differentiates the branch taken).
            (ExprKind::Index(fs, k), [_, ..]) if atom(k) && !matches!(strip(k).kind, ExprKind::Lit(_)) => {
                let xs = match self.known_array(fs, env).map(|t| t.kind.clone()) {
                    Some(ExprKind::Array(xs)) if !xs.is_empty() => xs,
                    _ => {
                        let (_, f) = self.known_producer(fs, env)?;
                        return Some(self.apply_producer(e, strip(h), k, &f, &args));
                    }
                };
                let mut binds = Vec::new();
                let read = strip(h).clone();
                let rid = self.fresh();
                binds.push(Bind { id: rid, name: "_".into(), ty: read.ty.clone(), rhs: read });
                let vars: Vec<E> = args.iter().map(|a| self.bind(&mut binds, "a", (*a).clone())).collect();
                let vs: Vec<&E> = vars.iter().collect();
                let mut choice: Option<E> = None;
                for (j, x) in xs.iter().enumerate().rev() {
                    let f = self.known(x, env).or_else(|| self.eta_builtin(x))?;
                    let app = beta(&self.refresh(&f), &vs);
                    choice = Some(match choice {
                        None => app,
                        Some(rest) => if_(&bin(BinOp::Eq, k, &int(j as i64), Type::Bool), app, rest),
                    });
                }
                Some(at_span(lets(binds, choice?), e.span))
            }
            (ExprKind::Index(fs, k), [_, ..]) if atom(fs) && atom(k) => {
                let (_, f) = self.known_producer(fs, env)?;
                Some(self.apply_producer(e, strip(h), k, &f, &args))
            }
            (ExprKind::Var(_, VarRef::Builtin(Builtin::Map)), [g, fs]) => {
                let (n, f) = self.known_producer(fs, env)?;
                let ExprKind::Lam(kp, elem) = &f.kind else { return None };
                let body = beta(&self.refresh(g), &[elem]);
                let step =
                    Expr::new(ExprKind::Lam(kp.clone(), body.clone()), f.span, Type::fun(Type::Int, body.ty.clone()));
                Some(call(Builtin::Build, &[n, step], e.ty.clone()))
            }
            // `fold h z fs` over an array of closures from a producer: the fold over the indices,
            // each element `F k` made where it is folded (the closures cannot fail, or failed
            // when the array was made, so the first error is h's either way).
            (ExprKind::Var(_, VarRef::Builtin(Builtin::Fold)), [h, z, fs]) => {
                let (n, f) = self.known_producer(fs, env)?;
                let ExprKind::Lam(kp, elem) = &f.kind else { return None };
                let aid = self.fresh();
                let acc = var(aid, &"acc".into(), &z.ty);
                let body = beta(&self.refresh(h), &[&acc, elem]);
                let inner =
                    Expr::new(ExprKind::Lam(kp.clone(), body.clone()), f.span, Type::fun(Type::Int, z.ty.clone()));
                let step = lam(aid, &"acc".into(), &z.ty, inner);
                let iid = self.fresh();
                let iv = var(iid, &"i".into(), &Type::Int);
                let ks = call(Builtin::Build, &[n, lam(iid, &"i".into(), &Type::Int, iv)], Type::array(Type::Int));
                Some(call(Builtin::Fold, &[step, (*z).clone(), ks], e.ty.clone()))
            }
            _ => None,
        }
    }

    /// `let _ = fs.[k] in F k a…` for the application `e` of the read `fs.[k]` (kept for its
    /// bounds check) of a producer's element `F k` (`known_producer`).
    fn apply_producer(&mut self, e: &E, read: &E, k: &E, f: &E, args: &[&E]) -> E {
        let id = self.fresh();
        let pat = Rc::new(Pat { kind: PatKind::Var("_".into(), id), span: e.span, ty: read.ty.clone(), ann: None });
        let mut all: Vec<&E> = vec![k];
        all.extend(args.iter().copied());
        let body = beta(f, &all);
        Expr::new(ExprKind::Let(pat, read.clone(), body), e.span, e.ty.clone())
    }

    /// Records in `env` what pattern `p` binds when matched against `e`: known functions, and
    /// known tuples that hold functions.
    fn bind_known(&self, p: &Pat, e: &E, env: &mut FxHashMap<LocalId, E>) {
        match &p.kind {
            PatKind::Var(_, id) if is_fun(&p.ty) => {
                if let Some(l) = self.known(e, env).or_else(|| self.eta_builtin(e)) {
                    env.insert(*id, l);
                }
            }
            PatKind::Var(_, id) if matches!(&p.ty, Type::Array(t) if is_fun(t)) => {
                if let Some(t) = self.known_array(e, env) {
                    env.insert(*id, t);
                } else {
                    // A producer (`build`/`map`), checked where it is used (`known_producer`).
                    env.insert(*id, strip(e).clone());
                }
            }
            PatKind::Var(_, id) if holds_fun(&p.ty) => {
                if let Some(t) = self.known_tuple(e, env) {
                    env.insert(*id, t);
                }
            }
            PatKind::Tuple(ps) => {
                if let Some(t) = self.known_tuple(e, env) {
                    if let ExprKind::Tuple(cs) = &t.kind {
                        for (q, c) in ps.iter().zip(cs) {
                            self.bind_known(q, c, env);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// `lam x`, inlined.
    fn apply_known(&mut self, lam: &E, x: &E) -> R<E> {
        let lam = self.refresh(lam);
        let t = beta(&lam, &[x]);
        let scope = self.scope.clone();
        self.inline(&t, &scope)
    }

    /// Inlines applications of statically known functions (λs, definitions, let-bound λs) by
    /// β-reduction to `let`; definitions of function type used as values become fresh λs.
    fn inline(&mut self, e: &E, env: &FxHashMap<LocalId, E>) -> R<E> {
        if matches!(e.kind, ExprKind::App(..) | ExprKind::Index(..)) {
            if let Some(t) = self.unroll_known_array(e, env) {
                return self.inline(&t, env);
            }
        }
        match &e.kind {
            ExprKind::Ann(a, _) => self.inline(a, env),
            ExprKind::Var(_, VarRef::Global(_)) if is_fun(&e.ty) => match self.known(e, env) {
                Some(l) => {
                    let l = self.refresh(&l);
                    self.inline(&l, env)
                }
                None => Ok(e.clone()),
            },
            ExprKind::Let(p, rhs, body) => {
                // `let g = if c then f₁ else f₂` with a condition that may fail: the condition is
                // bound first (evaluated where it was), so the `if` chooses on an atom (`known`).
                if let (true, Some((c, a, b))) = (is_fun(&p.ty), failing_choice(rhs)) {
                    let id = self.fresh();
                    let cv = var(id, &"c".into(), &Type::Bool);
                    let chosen = Expr::new(ExprKind::If(cv, a.clone(), b.clone()), rhs.span, rhs.ty.clone());
                    let inner = Expr::new(ExprKind::Let(p.clone(), chosen, body.clone()), e.span, e.ty.clone());
                    let pat =
                        Rc::new(Pat { kind: PatKind::Var("c".into(), id), span: c.span, ty: Type::Bool, ann: None });
                    return self.inline(&Expr::new(ExprKind::Let(pat, c.clone(), inner), e.span, e.ty.clone()), env);
                }
                let rhs2 = self.inline(rhs, env)?;
                // A tuple holding functions, bound whole or by a pattern: its components are
                // resolved where they are applied (`p.k x`, `f x` for `let (f, c) = …`).
                if holds_fun(&p.ty) && !is_fun(&p.ty) || matches!(&p.ty, Type::Array(t) if is_fun(t)) {
                    let mut env2 = env.clone();
                    self.bind_known(p, &rhs2, &mut env2);
                    let body2 = self.inline(body, &env2)?;
                    return Ok(Expr::new(ExprKind::Let(p.clone(), rhs2, body2), e.span, e.ty.clone()));
                }
                if let (PatKind::Var(_, id), true) = (&p.kind, is_fun(&p.ty)) {
                    if let Some(l) = self.known(rhs, env).or_else(|| self.eta_builtin(rhs)) {
                        let mut env2 = env.clone();
                        env2.insert(*id, l);
                        let body2 = self.inline(body, &env2)?;
                        return Ok(Expr::new(ExprKind::Let(p.clone(), rhs2, body2), e.span, e.ty.clone()));
                    }
                }
                let body2 = self.inline(body, env)?;
                Ok(Expr::new(ExprKind::Let(p.clone(), rhs2, body2), e.span, e.ty.clone()))
            }
            ExprKind::App(..) => {
                let (h, args) = anf::anormal::spine(e);
                if let Some(l) = self.known(h, env) {
                    let l = self.refresh(&l);
                    let t = beta(&l, &args);
                    return self.inline(&t, env);
                }
                map_children(e, &mut |c| self.inline(c, env))
            }
            _ => map_children(e, &mut |c| self.inline(c, env)),
        }
    }

    /// The gradient of the known function `f` at the atom `x` along the cotangent `ct`, emitted
    /// into `out` (the forward phase, then the reverse phase); the gradient's atom.
    fn gradient(&mut self, out: &mut Vec<Bind>, f: &E, x: &E, ct: &E) -> R<E> {
        Ok(self.gradient_value(out, f, x, ct, false)?.0)
    }

    /// [`Transform::gradient`] and the primal value (an atom, or a literal zero-free copy).
    /// `check`: the cotangent is the user's (`vjp`), so its shape is checked against the output's.
    fn gradient_value(&mut self, out: &mut Vec<Bind>, f: &E, x: &E, ct: &E, check: bool) -> R<(E, E)> {
        let lam = self.resolve(f)?;
        let body = self.apply_known(&lam, x)?;
        let anf = {
            let mut fr = self.fresher();
            anf::anormal::anormalise(&body, &mut fr)
        };
        let Some((binds, res)) = series(&anf) else {
            return Err(not("a gradient whose body is not a let-series (internal)", self.span));
        };
        let xid = local(x).expect("the input is bound to a variable");
        let mut ad = Ad {
            t: self,
            active: FxHashSet::default(),
            lams: FxHashMap::default(),
            adj: FxHashMap::default(),
            tys: FxHashMap::default(),
            loops: FxHashMap::default(),
            alias: FxHashMap::default(),
            tuples: FxHashMap::default(),
            unread: Vec::new(),
            paths: FxHashMap::default(),
            lens: FxHashMap::default(),
            builds: FxHashMap::default(),
            sums: summed_producers(&binds, &res),
            summed: FxHashMap::default(),
            units: FxHashMap::default(),
            folds: real_folds(&binds, &res),
            selects: FxHashMap::default(),
            changes: FxHashMap::default(),
            frozen: FxHashSet::default(),
            want: FxHashSet::default(),
            comps: FxHashMap::default(),
            pbs: FxHashMap::default(),
            caps: Vec::new(),
            caps_of: FxHashMap::default(),
            remat: Vec::new(),
        };
        let binds = ad.expand_oplus(binds);
        ad.tys.insert(xid, ("x".into(), x.ty.clone()));
        if !x.ty.is_discrete() {
            ad.active.insert(xid);
        }
        let start = out.len();
        ad.forward(out, &binds, &res)?;
        if check {
            ad.t.check_cotangent(out, &res, ct, &mut Vec::new())?;
        }
        let middle = out.len();
        if let Some(seed) = ad.decompose(out, ct, false)? {
            ad.add(out, &res, seed)?;
        }
        ad.reverse(out, &binds)?;
        let g = ad.adj.remove(&xid);
        let g = ad.materialize(out, g, &x.ty, x)?;
        let show = |bs: &[Bind]| -> Vec<String> {
            bs.iter()
                .map(|b| {
                    format!("{}#{} = {}", b.name, b.id.0, frontend::pretty::expr(&b.rhs, frontend::pretty::Mode::Ascii))
                })
                .collect()
        };
        let listing =
            SiteListing { span: self.span, forward: show(&out[start..middle]), reverse: show(&out[middle..]) };
        self.listings.push(listing);
        let phases = out.split_off(start);
        out.extend(hoist::hoist_tapes(phases));
        Ok((g, res))
    }
}

/// A point of type `t` (zero) when one is known without a shape (no arrays).
fn zero_point(t: &Type) -> Option<E> {
    Some(match t {
        Type::Real => real(0.0),
        Type::Int => int(0),
        Type::Bool => mk(ExprKind::Lit(Lit::Bool(false)), Type::Bool),
        Type::Unit => mk(ExprKind::Lit(Lit::Unit), Type::Unit),
        Type::Tuple(ts) => tuple(ts.iter().map(zero_point).collect::<Option<_>>()?),
        _ => return None,
    })
}

/// The call spine `e` located at `span` (where a failure of the call is reported).
fn at_span(e: E, span: Span) -> E {
    match &e.kind {
        ExprKind::App(h, a) => Expr::new(ExprKind::App(at_span(h.clone(), span), a.clone()), span, e.ty.clone()),
        _ => Expr::new(e.kind.clone(), span, e.ty.clone()),
    }
}

/// `f a1 … an` with `f` a λ: `let p1 = a1 in … (body a(k+1) …)`, `let`s floated out of the head.
fn beta(f: &E, args: &[&E]) -> E {
    if args.is_empty() {
        return f.clone();
    }
    match &f.kind {
        ExprKind::Ann(a, _) => beta(a, args),
        ExprKind::Lam(p, b) => {
            let body = beta(b, &args[1..]);
            let ty = body.ty.clone();
            Expr::new(ExprKind::Let(p.clone(), args[0].clone(), body), f.span, ty)
        }
        ExprKind::Let(p, a, b) => {
            let body = beta(b, args);
            let ty = body.ty.clone();
            Expr::new(ExprKind::Let(p.clone(), a.clone(), body), f.span, ty)
        }
        _ => args.iter().fold(f.clone(), |h, a| {
            let ty = result_type(&h.ty);
            Expr::new(ExprKind::App(h, (*a).clone()), f.span, ty)
        }),
    }
}

/// An adjoint known at compile time: a Real atom, an accumulator array (uniquely owned), or a
/// tuple of component adjoints (`None`: a symbolic zero).
#[derive(Clone, Debug)]
enum Adj {
    R(E),
    A(E),
    /// The adjoint of an array every element of which is the Real atom: what the transpose of
    /// `sum` gives (rule 5 on Σ). Kept symbolic so that `sum (map f xs)` and `sum (build n f)`
    /// read the scalar in their reverse loop instead of zeroing, filling and reading an array;
    /// made an array only where an accumulator is needed.
    B(E),
    T(Vec<Option<Adj>>),
}

/// The reverse of a `fold`/`iterate`, made when the forward phase meets it (it decides whether
/// the forward loop tapes its carry).
struct LoopRev {
    /// `λs. …`: one reverse iteration over the state `(k, carried adjoints…, carry adjoint)`.
    body: E,
    carried: Vec<LocalId>,
    n: E,
    /// The carry's primal (the shape of a zero carry adjoint) and its initial value's atom.
    init: E,
}

/// The reverse of a selecting `fold` ([`Ad::select_fold`]): the array folded over, the initial
/// value, the atom holding the index of the element the fold's result is (−1: the initial value)
/// and the array's length.
struct SelectRev {
    xs: E,
    z0: E,
    j: E,
    n: E,
    /// The operand not chosen gets `g·0` (rule 15 on `max`/`min`), not nothing (`if`).
    products: bool,
}

/// The condition of a selecting fold's step: a term to bind, or the variable the step binds it to.
enum Choice {
    Term(E),
    Bound(E),
}

/// How a fold's step `λm v. body` (the series `binds`, result `res`) selects one of its operands:
/// `max`/`min` of `m` and `v` (either order), whose partials in the element and the carry are
/// `if c then 1 else 0` and its complement (`rules::partial_terms`), or `if c then m else v` (or
/// the other way round) with `c` a comparison of atoms bound just before. The condition, whether
/// its true side is the element, and whether the other operand's partial is a product `g·0`.
fn selection(binds: &[Bind], res: &E, m: LocalId, v: LocalId) -> Option<(Choice, bool, bool)> {
    let lit = |e: &E| match e.kind {
        ExprKind::Lit(Lit::Real(x)) => Some(x),
        _ => None,
    };
    // `x` or `let t = x in t`.
    let operand = |e: &E| match &strip(e).kind {
        ExprKind::Var(_, VarRef::Local(x)) => Some(*x),
        ExprKind::Let(p, r, body) => match (&p.kind, &strip(r).kind, local(body)) {
            (PatKind::Var(_, t), ExprKind::Var(_, VarRef::Local(x)), Some(u)) if *t == u => Some(*x),
            _ => None,
        },
        _ => None,
    };
    let last = binds.last()?;
    if local(res) != Some(last.id) {
        return None;
    }
    match (binds, &strip(&last.rhs).kind) {
        ([c, _], ExprKind::If(cv, a, b)) => {
            let atom = |e: &E| matches!(strip(e).kind, ExprKind::Var(_, VarRef::Local(_)) | ExprKind::Lit(_));
            let compares = matches!(&strip(&c.rhs).kind, ExprKind::Bin(op, x, y)
                if matches!(op, BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne)
                    && atom(x) && atom(y));
            if c.ty != Type::Bool || !compares || local(cv) != Some(c.id) {
                return None;
            }
            let chosen_then = match (operand(a)?, operand(b)?) {
                (x, y) if x == v && y == m => true,
                (x, y) if x == m && y == v => false,
                _ => return None,
            };
            Some((Choice::Bound(var(c.id, &c.name, &c.ty)), chosen_then, false))
        }
        ([_], _) => {
            let (h, xa) = anf::anormal::spine(strip(&last.rhs));
            let ExprKind::Var(_, VarRef::Builtin(op @ (Builtin::Max | Builtin::Min))) = &strip(h).kind else {
                return None;
            };
            let [a0, a1] = xa.as_slice() else { return None };
            let second = match (local(a0), local(a1)) {
                (Some(x), Some(y)) if x == m && y == v => true,
                (Some(x), Some(y)) if x == v && y == m => false,
                _ => return None,
            };
            let pt = rules::partial_terms(Prim::Builtin(*op), &[(*a0).clone(), (*a1).clone()])?;
            // The element's partial `if c then p else q`, the carry's `if c then q else p`.
            let (pv, pm) = if second { (&pt[1], &pt[0]) } else { (&pt[0], &pt[1]) };
            let (ExprKind::If(c, t, e), ExprKind::If(cm, tm, em)) = (&pv.kind, &pm.kind) else { return None };
            let chosen_then = match (lit(t), lit(e), lit(tm), lit(em)) {
                (Some(1.0), Some(0.0), Some(0.0), Some(1.0)) => true,
                (Some(0.0), Some(1.0), Some(1.0), Some(0.0)) => false,
                _ => return None,
            };
            (format!("{c:?}") == format!("{cm:?}")).then(|| (Choice::Term(c.clone()), chosen_then, true))
        }
        _ => None,
    }
}

struct Ad<'a, 'm> {
    t: &'a mut Transform<'m>,
    active: FxHashSet<LocalId>,
    /// Let-bound λs (and aliases of them) in scope.
    lams: FxHashMap<LocalId, E>,
    adj: FxHashMap<LocalId, Adj>,
    tys: FxHashMap<LocalId, (Name, Type)>,
    loops: FxHashMap<LocalId, LoopRev>,
    /// `y ↦ x` for a non-function binding `y = x` of an active `x` (after following `x`'s own
    /// alias): `y`'s adjoint is accumulated into `x`'s directly. Rule 5 on the identity, applied
    /// at compile time; it lets a loop that uses a rebound capture carry the enclosing
    /// accumulator instead of a fresh zero one added back afterwards.
    alias: FxHashMap<LocalId, LocalId>,
    /// Tuple-literal bindings `z = (a, b, …)` of the forward phase (the components of a loop's
    /// initial carry, for `carry_activity`).
    tuples: FxHashMap<LocalId, Vec<E>>,
    /// The components a loop's reverse does not read (see `TAPES_UNREAD`).
    unread: Vec<bool>,
    /// Parts of deep values: a read `r = x.[i]` of an active array `x` whose elements hold arrays
    /// ([`is_deep`]), a read or a projection of such a part that holds arrays itself, and copies,
    /// map to their root `x` and the steps from it (`x.[i]`: `[At i]`; `x.[i].2.[j]`:
    /// `[At i, Comp 1, At j]`). Their adjoints are never held apart: every contribution goes
    /// straight into x's accumulator along the path (`Ad::upd`: `accAt'` per step, the row
    /// builtins `accAdd2'`, `accRow'`, `accRowAll'` on the last row), so a read
    /// `x.[i].[j].[k]` costs O(1) in the reverse phase.
    paths: FxHashMap<LocalId, (E, Vec<Step>)>,
    /// Arrays made by `build n f` (the atom `n`) or `map f xs`/`zipWith f xs ys` (`len xs`): a zero
    /// adjoint takes its length from there, so a loop body recomputed for its reverse need not
    /// rebuild the array only to measure it.
    lens: FxHashMap<LocalId, E>,
    /// `z = build n f` with `f` a known λ that cannot fail (`total_lam`): `z ↦ f`. A loop over
    /// `z` reads element i as `f i` in its reverse (and taping) body, so the array is read only
    /// by the primal loop, which lowering then fuses with the `build` (no array made).
    builds: FxHashMap<LocalId, E>,
    /// Top-level `z = build n f` / `map f xs` / `zipWith f xs ys` whose only use is `s = sum z`:
    /// `z ↦ s` (see [`Ad::fused_forward`]).
    sums: FxHashMap<LocalId, LocalId>,
    /// `s ↦` the fused forward loop's sum, for the binding `s = sum z` the forward phase meets next.
    summed: FxHashMap<LocalId, E>,
    /// `z ↦` each captured variable's adjoint for the cotangent 1 at every element, computed by
    /// the fused forward loop: z's reverse scales them by the broadcast cotangent.
    units: FxHashMap<LocalId, Vec<(LocalId, E)>>,
    /// Bindings of changes, groups and λs (`replace v`, `gchange g d`, `nil x`, tuples of changes,
    /// `realGroup`, `group op inv z`, copies; a user group's operation): what an `a <+> da` reads.
    changes: FxHashMap<LocalId, E>,
    /// Copies of a change's values made by [`Ad::expand_oplus`]: constants at the point (a change
    /// has a discrete type), never active.
    frozen: FxHashSet<LocalId>,
    /// Top-level `z = fold f z0 xs` of type Real: candidates for [`Ad::fused_fold`], and whether
    /// `xs` is used by nothing else.
    folds: FxHashMap<LocalId, bool>,
    /// Selecting folds (`z = fold (λm v. max m v) z0 xs`): `z ↦` what their reverse reads.
    selects: FxHashMap<LocalId, SelectRev>,
    /// Inactive values holding functions whose *companions* may be needed (see `comps`): the
    /// heads of applications, and backwards through copies, projections, tuples and the initial
    /// carries of loops (`Ad::wanted`).
    want: FxHashSet<LocalId>,
    /// Companions of inactive functions not known at compile time (a closure a loop builds):
    /// `h : a -> b` ↦ an atom `hc : a -> b * (b -> a)`, `hc y = (h y, λg. ȳ)` — the function's
    /// pullback at `y` (Mak & Ong's `(Ω h)·ω` at a point: its value and its transposed
    /// derivative as a closure, rule 17's λa. (λv. S)*·…). A tuple holding functions maps to the
    /// tuple of its components' companions (`()` for a component without functions).
    comps: FxHashMap<LocalId, E>,
    /// `r = h a` through a companion: `r ↦` the pullback closure `pb` of `(r, pb) = hc a`; the
    /// reverse rule of the application is `ā += pb r̄` (rule 5 on the pullback, Lemma 4.4).
    pbs: FxHashMap<LocalId, (E, Vec<LocalId>)>,
    /// The active variables the closures of the loop being augmented capture (`Ad::augment`):
    /// their companions' pullbacks return these variables' cotangents too, `λg. (ȳ, c̄)` — a
    /// closure's cotangent is its environment's (Corollary 4.8's pointwise structure).
    caps: Vec<LocalId>,
    /// Companion atoms whose pullbacks return the cotangents of active captured variables: the
    /// atom ↦ those variables (absent: none).
    caps_of: FxHashMap<LocalId, Vec<LocalId>>,
    /// Active data the step of the loop being augmented makes (`w = k * x`, no loop in it), in
    /// order: a companion of a λ that captures such a value recomputes it from the active
    /// variables it is made of, so its cotangent reaches them (`Ad::companion`).
    remat: Vec<Bind>,
}

/// A loop builtin (its function argument is applied per element or step).
fn is_loop(b: Builtin) -> bool {
    use Builtin as B;
    matches!(b, B::Build | B::Map | B::ZipWith | B::Fold | B::Iterate | B::While)
}

/// The type of a companion of a value of type `t` holding functions (see `Ad::comps`): `a -> b *
/// (b -> a)` for a function `a -> b` of data; a tuple of the components' (`()` where a component
/// holds no function). `None` for other functions (curried, higher-order, arrays of functions).
fn comp_ty(t: &Type, caps: Option<&Type>) -> Option<Type> {
    match t {
        Type::Fun(a, r) if is_data(a) && is_data(r) && differentiable(a) && differentiable(r) => {
            let back = match caps {
                None => (**a).clone(),
                Some(c) => Type::tuple(vec![(**a).clone(), c.clone()]),
            };
            Some(Type::fun((**a).clone(), Type::tuple(vec![(**r).clone(), Type::fun((**r).clone(), back)])))
        }
        Type::Tuple(ts) if holds_fun(t) => Some(Type::tuple(
            ts.iter().map(|c| if holds_fun(c) { comp_ty(c, caps) } else { Some(Type::Unit) }).collect::<Option<_>>()?,
        )),
        _ => None,
    }
}

/// Functions and discrete data only (a carry an active loop may build closures in without a
/// cotangent of its own: its closures' cotangents are their environments').
fn fun_or_discrete(t: &Type) -> bool {
    match t {
        Type::Fun(..) => true,
        Type::Tuple(ts) => ts.iter().all(fun_or_discrete),
        t => t.is_discrete(),
    }
}

/// Is `e` a Real primitive applied to its arguments whose partials read its result
/// (`rules::reads_result`)?
fn result_prim(e: &E) -> bool {
    let e = strip(e);
    match &e.kind {
        ExprKind::Bin(op, ..) => e.ty == Type::Real && rules::reads_result(Prim::Op(*op)),
        ExprKind::App(..) => {
            let (h, args) = anf::anormal::spine(e);
            matches!(&h.kind, ExprKind::Var(_, VarRef::Builtin(b))
                if args.len() == b.arity() && rules::reads_result(Prim::Builtin(*b)))
        }
        _ => false,
    }
}

/// `Array (Array Real)`: its adjoint is a nested accumulator, an outer array of distinct row
/// accumulators.
fn is_nested(t: &Type) -> bool {
    matches!(t, Type::Array(e) if matches!(&**e, Type::Array(r) if **r == Type::Real))
}

/// Data built from Reals, Ints, Bools, units, tuples and arrays: a value whose adjoint is a value
/// of its own type (an accumulator, its arrays distinct and uniquely owned).
fn is_data(t: &Type) -> bool {
    match t {
        Type::Real | Type::Int | Type::Bool | Type::Unit => true,
        Type::Tuple(ts) => ts.iter().all(is_data),
        Type::Array(e) => is_data(e),
        _ => false,
    }
}

/// An array of data whose elements hold arrays (`Array (Array Real)`, `Array (Array (Array
/// Real))`, `Array (Real * Array Real)`, …): its accumulator is an array of accumulators, and a
/// part of it read out is a path into it (`Ad::paths`).
fn is_deep(t: &Type) -> bool {
    matches!(t, Type::Array(e) if holds_array(e) && !e.is_discrete() && is_data(e))
}

/// One step of a path into a deep accumulator: element `i`, or tuple component `k` (0-based).
#[derive(Clone, Debug)]
enum Step {
    At(E),
    Comp(usize),
}

/// What is added at the end of a path (`Ad::upd`): `At(j, g)`, `All(g)`, `Axpy(s, y)` on an
/// `Array Real` (`a.[j] += g`, `a += g·1`, `a += s·y`), or an adjoint of the part's type.
enum Leaf {
    At(E, E),
    All(E),
    Axpy(E, E),
    Adj(Adj),
}

/// A tuple of Reals and discrete values without arrays (nested tuples too): an array of them has
/// an accumulator of its own type, updated element by element (`accAdd'` adds a tuple's Reals).
fn is_flat_tuple(t: &Type) -> bool {
    match t {
        Type::Tuple(ts) => {
            ts.iter().all(|t| *t == Type::Real || (t.is_discrete() && !holds_array(t)) || is_flat_tuple(t))
        }
        _ => false,
    }
}

/// `Array t` with `t` a tuple of Reals and discrete values ([`is_flat_tuple`]).
fn is_tuple_array(t: &Type) -> bool {
    matches!(t, Type::Array(e) if is_flat_tuple(e) && !e.is_discrete())
}

/// Is the adjoint of a value of type `t` one the transform represents?
fn differentiable(t: &Type) -> bool {
    match t {
        Type::Real => true,
        // A function in a tuple is known statically where it is applied (inlining resolves
        // `p.1 x` for a let-bound tuple `p` of λs), so it needs no adjoint of its own.
        Type::Tuple(ts) => ts.iter().all(|t| t.is_discrete() || is_fun(t) || differentiable(t)),
        // An array of functions: applied only where inlining unrolled it (`unroll_known_array`);
        // an adjoint reaching a function is refused where it would be added.
        Type::Array(e) => **e == Type::Real || e.is_discrete() || is_deep(t) || is_tuple_array(t) || is_fun(e),
        t => t.is_discrete(),
    }
}

impl Ad<'_, '_> {
    fn err<T>(&self, what: impl Into<String>) -> R<T> {
        Err(not(what, self.t.span))
    }

    fn emit(&mut self, out: &mut Vec<Bind>, name: &str, rhs: E) -> E {
        let v = self.t.bind(out, name, rhs);
        let id = local(&v).unwrap();
        self.tys.insert(id, (name.into(), v.ty.clone()));
        v
    }

    fn is_active(&self, e: &E) -> bool {
        local(e).is_some_and(|id| self.active.contains(&id))
    }

    /// The variable whose adjoint `id`'s is (see `alias`).
    fn root(&self, id: LocalId) -> LocalId {
        self.alias.get(&id).copied().unwrap_or(id)
    }

    fn var_of(&self, id: LocalId) -> E {
        let (n, t) = &self.tys[&id];
        var(id, n, t)
    }

    /// The forward phase of a series: the primal bindings (taping loops whose reverse needs their
    /// carry), recording activity, types and let-bound λs.
    fn forward(&mut self, out: &mut Vec<Bind>, binds: &[Bind], res: &E) -> R<()> {
        self.frozen.extend(discrete_reads(binds, res));
        self.wanted(binds);
        for b in binds {
            self.tys.insert(b.id, (b.name.clone(), b.ty.clone()));
            let rhs = strip(&b.rhs);
            match &rhs.kind {
                ExprKind::Lam(..) => {
                    self.lams.insert(b.id, rhs.clone());
                }
                // `z = tanh`, `z = max 0.25`: a builtin as a value, known by its η-expansion.
                ExprKind::Var(_, VarRef::Builtin(_)) | ExprKind::App(..) if is_fun(&b.ty) => {
                    if let Ok(l) = self.lam_of(rhs) {
                        self.lams.insert(b.id, l);
                    }
                }
                ExprKind::Tuple(cs) => {
                    self.tuples.insert(b.id, cs.clone());
                }
                ExprKind::Var(_, VarRef::Local(y)) if self.lams.contains_key(y) => {
                    let l = self.lams[y].clone();
                    self.lams.insert(b.id, l);
                }
                ExprKind::Var(_, VarRef::Builtin(_) | VarRef::Global(_)) if is_fun(&b.ty) => {
                    if let Ok(l) = self.t.resolve(rhs) {
                        self.lams.insert(b.id, l);
                    }
                }
                _ => {}
            }
            let mut fv = FxHashSet::default();
            free_locals(rhs, &mut fv);
            let active =
                !b.ty.is_discrete() && !self.frozen.contains(&b.id) && fv.iter().any(|v| self.active.contains(v));
            if let (ExprKind::Var(_, VarRef::Builtin(bi)), [a0, a1, ..]) =
                (&anf::anormal::spine(rhs).0.kind, anf::anormal::spine(rhs).1.as_slice())
            {
                match bi {
                    Builtin::Build => {
                        self.lens.insert(b.id, (*a0).clone());
                        if !active {
                            if let Some(l) = self.lam_of(a1).ok().filter(|l| total_lam(l)) {
                                self.builds.insert(b.id, l);
                            }
                        }
                    }
                    Builtin::Map | Builtin::ZipWith => {
                        self.lens.insert(b.id, (*a1).clone());
                    }
                    _ => {}
                }
            }
            if active && holds_array(&b.ty) {
                // A part of a deep value that holds arrays: a path into its root's accumulator.
                let path = match &rhs.kind {
                    ExprKind::Index(x, i) if self.is_active(x) => match self.path_of(x) {
                        Some((r, mut st)) => {
                            st.push(Step::At(i.clone()));
                            Some((r, st))
                        }
                        None if is_deep(&x.ty) => Some((x.clone(), vec![Step::At(i.clone())])),
                        None => None,
                    },
                    ExprKind::Proj(p, k) => self.path_of(p).map(|(r, mut st)| {
                        st.push(Step::Comp(*k));
                        (r, st)
                    }),
                    ExprKind::Var(_, VarRef::Local(y)) => self.paths.get(y).cloned(),
                    _ => None,
                };
                if let Some(path) = path {
                    self.paths.insert(b.id, path);
                }
            }
            if active {
                self.active.insert(b.id);
                if self.companions(out, b, rhs, true) {
                    continue;
                }
                if let Some(s) = self.summed.remove(&b.id) {
                    // `s = sum z` of a fused producer: the loop computed it.
                    out.push(Bind { id: b.id, name: b.name.clone(), ty: b.ty.clone(), rhs: s });
                    continue;
                }
                if self.sums.contains_key(&b.id) && self.fused_forward(out, b, &rhs.clone())? {
                    continue;
                }
                if self.folds.contains_key(&b.id) && self.fused_fold(out, b, &rhs.clone())? {
                    continue;
                }
                if let (ExprKind::Var(_, VarRef::Local(x)), false) = (&rhs.kind, is_fun(&b.ty)) {
                    let r = self.root(*x);
                    self.alias.insert(b.id, r);
                }
                if !is_fun(&b.ty) && !differentiable(&b.ty) {
                    return self.err(format!("a gradient through a value of type {}", b.ty));
                }
                let (h, args) = anf::anormal::spine(rhs);
                // `r = h a`, `h` a function not known at compile time whose environment is
                // inactive, through its companion: `(r, pb) = hc a` (rule 17 at the point `a`:
                // the value and the pullback), the reverse `ā += pb r̄` (`rule`).
                if let (ExprKind::Var(_, VarRef::Local(hid)), [a]) = (&strip(h).kind, args.as_slice()) {
                    // (A let-bound λ inlining left applied — `fold f z []` unrolled to `z` — gets
                    // its companion here.)
                    let hc = match self.comps.get(hid).cloned() {
                        Some(c) => Some(c),
                        None if self.lams.contains_key(hid) => {
                            // An active λ: its companion gives its captures' cotangents too.
                            let hv = strip(h).clone();
                            let caps = if self.is_active(&hv) { self.captures(&[&hv]) } else { Vec::new() };
                            let saved = std::mem::replace(&mut self.caps, caps);
                            let mut pre = Vec::new();
                            let ok = self
                                .caps
                                .iter()
                                .all(|v| self.tys.get(v).is_some_and(|(_, t)| is_data(t) && differentiable(t)));
                            let c = if ok { self.comp_of(&mut pre, &hv) } else { None };
                            self.caps = saved;
                            out.extend(pre);
                            c
                        }
                        None => None,
                    };
                    // An active `h` only when its companion's pullback gives its environment's
                    // cotangent (`caps_of`).
                    let caps = hc.as_ref().and_then(local).and_then(|c| self.caps_of.get(&c)).cloned();
                    if let (true, Some(hc)) = (!self.active.contains(hid) || caps.is_some(), hc) {
                        let Type::Fun(_, rt) = &hc.ty else { return self.err("a companion's type (internal)") };
                        let p = self.emit(out, "p", mk(ExprKind::App(hc.clone(), (*a).clone()), (**rt).clone()));
                        out.push(Bind {
                            id: b.id,
                            name: b.name.clone(),
                            ty: b.ty.clone(),
                            rhs: at_span(proj(&p, 0), b.rhs.span),
                        });
                        let pb = self.emit(out, "pb", proj(&p, 1));
                        self.pbs.insert(b.id, (pb, caps.unwrap_or_default()));
                        continue;
                    }
                }
                if let ExprKind::Var(
                    _,
                    VarRef::Builtin(bi @ (Builtin::Fold | Builtin::Iterate | Builtin::RevIterate)),
                ) = &h.kind
                {
                    if args.len() == 3 {
                        let args: Vec<E> = args.into_iter().cloned().collect();
                        if *bi == Builtin::Fold && self.select_fold(out, b, &args)? {
                            continue;
                        }
                        self.loop_forward(out, b, *bi, &args, None)?;
                        continue;
                    }
                }
                if let (ExprKind::Var(_, VarRef::Builtin(Builtin::While)), 3) = (&h.kind, args.len()) {
                    let args: Vec<E> = args.into_iter().cloned().collect();
                    self.while_forward(out, b, &args)?;
                    continue;
                }
            } else if self.companions(out, b, rhs, false) {
                continue;
            }
            out.push(b.clone());
        }
        Ok(())
    }

    /// A value holding functions whose companion may be needed (`want`; a λ's is made where it
    /// is needed, `comp_of`): a loop building functions is augmented (`true`: emitted); a copy or
    /// a projection takes its source's companion; anything else inactive gets `comp_of`'s
    /// (`true`: emitted). `active`: the binding is active — only a loop whose closures' active
    /// captures get cotangents (`augment`), or a copy or projection of a companion, are handled.
    fn companions(&mut self, out: &mut Vec<Bind>, b: &Bind, rhs: &E, active: bool) -> bool {
        if !holds_fun(&b.ty) || !self.want.contains(&b.id) || matches!(rhs.kind, ExprKind::Lam(..)) {
            return false;
        }
        let (h, args) = anf::anormal::spine(rhs);
        if let (ExprKind::Var(_, VarRef::Builtin(bi @ (Builtin::Fold | Builtin::Iterate | Builtin::While))), 3) =
            (&strip(h).kind, args.len())
        {
            let args: Vec<E> = args.into_iter().cloned().collect();
            if self.augment(out, b, *bi, &args, active) {
                return true;
            }
        }
        let mut pre = Vec::new();
        let known = match &rhs.kind {
            ExprKind::Var(_, VarRef::Local(w)) => self.comps.get(w).cloned(),
            ExprKind::Proj(t, k) => match local(t).and_then(|t| self.comps.get(&t)).cloned() {
                Some(tc) => {
                    let c = self.emit(&mut pre, "hc", proj(&tc, *k));
                    if let Some(cs) = local(&tc).and_then(|t| self.caps_of.get(&t)).cloned() {
                        self.caps_of.insert(local(&c).unwrap(), cs);
                    }
                    Some(c)
                }
                None => None,
            },
            // A choice between two functions with companions (`if c then h₁ else h₂`): the
            // companion of the branch taken (rule `if`).
            ExprKind::If(cnd, l1, l2) => {
                let comp = |e: &E| match &strip(e).kind {
                    ExprKind::Var(_, VarRef::Local(v)) => self.comps.get(v).cloned(),
                    _ => None,
                };
                match (comp(l1), comp(l2)) {
                    (Some(c1), Some(c2)) if c1.ty == c2.ty => {
                        let caps = |c: &E| local(c).and_then(|c| self.caps_of.get(&c)).cloned();
                        let (k1, k2) = (caps(&c1), caps(&c2));
                        if k1 == k2 {
                            let c = self.emit(&mut pre, "hc", if_(cnd, c1, c2));
                            if let Some(k) = k1 {
                                self.caps_of.insert(local(&c).unwrap(), k);
                            }
                            Some(c)
                        } else {
                            None
                        }
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        let c = match known {
            Some(c) => Some(c),
            None if !active => self.comp_of(&mut pre, &b.var()),
            None => None,
        };
        let Some(c) = c else { return false };
        self.comps.insert(b.id, c);
        // (The companion's bindings read only earlier ones.) An active binding is emitted by
        // the caller, through the rest of the forward phase.
        out.extend(pre);
        if active {
            return false;
        }
        out.push(b.clone());
        true
    }

    /// Adds to `want` the inactive function values of `binds` whose companions an application
    /// may need: every local at the head of an application of one argument, and, backwards, what
    /// a wanted value is made from (a copy's source, a projection's tuple, a tuple's components,
    /// a loop's initial carry).
    fn wanted(&mut self, binds: &[Bind]) {
        fn heads(e: &E, want: &mut FxHashSet<LocalId>) {
            if let ExprKind::App(h, a) = &e.kind {
                if let ExprKind::Var(_, VarRef::Local(h)) = &strip(h).kind {
                    want.insert(*h);
                }
                // A function a loop builtin applies (`map h xs`: `λy. h y`, `Ad::lam_of`).
                if let (ExprKind::Var(_, VarRef::Local(f)), true) = (&strip(a).kind, is_fun(&a.ty)) {
                    if matches!(&anf::anormal::spine(e).0.kind, ExprKind::Var(_, VarRef::Builtin(b)) if is_loop(*b)) {
                        want.insert(*f);
                    }
                }
            }
            frontend::lin::for_each_child(e, &mut |c| heads(c, want));
        }
        // Loop bodies (`map (λx. h x) xs`) are differentiated with this series' companions.
        for b in binds {
            heads(&b.rhs, &mut self.want);
        }
        for b in binds.iter().rev() {
            if !self.want.contains(&b.id) {
                continue;
            }
            let rhs = strip(&b.rhs);
            let mut add = |e: &E| {
                if let Some(id) = local(e).filter(|_| holds_fun(&e.ty)) {
                    self.want.insert(id);
                }
            };
            match &rhs.kind {
                ExprKind::Var(..) => add(rhs),
                ExprKind::Proj(t, _) => add(t),
                ExprKind::If(_, l1, l2) => {
                    add(strip(l1));
                    add(strip(l2));
                }
                // A λ's companion applies the functions it captures through theirs.
                ExprKind::Lam(..) => {
                    let mut fv = FxHashSet::default();
                    free_locals(rhs, &mut fv);
                    for id in fv {
                        if self.tys.get(&id).is_none_or(|(_, t)| holds_fun(t)) {
                            self.want.insert(id);
                        }
                    }
                }
                ExprKind::Tuple(cs) => cs.iter().for_each(add),
                _ => {
                    let (h, args) = anf::anormal::spine(rhs);
                    match (&strip(h).kind, args.as_slice()) {
                        (ExprKind::Var(_, VarRef::Builtin(Builtin::Fold)), [_, z, _]) => add(z),
                        (ExprKind::Var(_, VarRef::Builtin(Builtin::Iterate | Builtin::While)), [_, _, z]) => add(z),
                        _ => {}
                    }
                }
            }
        }
    }

    /// The companion of the inactive atom `a` holding functions (see `comps`), its bindings pushed
    /// on `pre`: a known one; for a λ (a let-bound one, a definition, a builtin's η-expansion)
    /// [`Ad::companion`]; a copy's, a projection's component, a tuple literal's componentwise.
    /// `None` when it is not known.
    fn comp_of(&mut self, pre: &mut Vec<Bind>, a: &E) -> Option<E> {
        if !holds_fun(&a.ty) || (self.is_active(a) && self.caps.is_empty()) {
            return None;
        }
        if let Some(c) = local(a).and_then(|id| self.comps.get(&id)) {
            return Some(c.clone());
        }
        if is_fun(&a.ty) {
            if let Ok(l) = self.lam_of(a) {
                let c = self.companion(&l).ok()?;
                let c = self.emit(pre, "hc", c);
                if !self.caps.is_empty() {
                    self.caps_of.insert(local(&c).unwrap(), self.caps.clone());
                }
                return Some(c);
            }
        }
        let id = local(a)?;
        if let Some(cs) = self.tuples.get(&id).cloned() {
            let mut parts = Vec::new();
            for c in &cs {
                parts.push(if holds_fun(&c.ty) {
                    self.comp_of(pre, c)?
                } else {
                    mk(ExprKind::Lit(Lit::Unit), Type::Unit)
                });
            }
            let c = self.emit(pre, "hc", tuple(parts));
            if !self.caps.is_empty() {
                self.caps_of.insert(local(&c).unwrap(), self.caps.clone());
            }
            return Some(c);
        }
        None
    }

    /// The type of the cotangents of `caps` (one variable's own type, or a tuple of them).
    fn caps_ty(&self, caps: &[LocalId]) -> Option<Type> {
        match caps {
            [] => None,
            [c] => Some(self.tys[c].1.clone()),
            cs => Some(Type::tuple(cs.iter().map(|c| self.tys[c].1.clone()).collect())),
        }
    }

    /// The companion of the λ `lamf : a -> b` (a and b data): `λy. let F in (r, λg. let R in ȳ)`,
    /// F the forward phase of its body at `y` and R its reverse phase seeded with `g` — the
    /// pullback of the function at `y` (rules 17 and 5, section 7 of docs/pullback-semantics.md:
    /// "Functions built at run time"). The λ's captured variables are inactive (the closure's
    /// environment does not depend on the input), so its only cotangent is `ȳ`; a captured
    /// function not known at compile time is applied through its own companion, so the pullback
    /// closures of a chain of closures hold each other: the chain's tape.
    fn companion(&mut self, lamf: &E) -> R<E> {
        let Type::Fun(a, r) = &lamf.ty else { return self.err("a companion of a non-function (internal)") };
        let (a, r) = ((**a).clone(), (**r).clone());
        if !(is_data(&a) && is_data(&r) && differentiable(&a) && differentiable(&r)) {
            return self.err("a gradient through a call of a function not known at compile time");
        }
        let (ps, bb, res) = self.fresh_lam(lamf, 1)?;
        let yid = self.t.fresh();
        let y = var(yid, &"y".into(), &a);
        let mut binds = Vec::new();
        // Active data of the loop's step the λ captures, recomputed first (fresh binders, the
        // λ's body renamed to them): its cotangent then reaches the captured active variables.
        let mut need = FxHashSet::default();
        free_locals(lamf, &mut need);
        let mut picked = vec![false; self.remat.len()];
        for (i, r) in self.remat.iter().enumerate().rev() {
            if need.contains(&r.id) {
                picked[i] = true;
                free_locals(&r.rhs, &mut need);
            }
        }
        let mut ren = FxHashMap::default();
        for (r, _) in self.remat.clone().iter().zip(&picked).filter(|(_, p)| **p) {
            let id = self.t.fresh();
            let rhs = rename(&self.t.refresh(&r.rhs), &ren);
            ren.insert(r.id, id);
            binds.push(Bind { id, name: r.name.clone(), ty: r.ty.clone(), rhs });
        }
        let mut pat = Vec::new();
        self.bind_pat(&mut pat, &ps[0], y.clone())?;
        binds.extend(pat);
        binds.extend(bb.into_iter().map(|b| Bind { rhs: rename(&b.rhs, &ren), ..b }));
        let res = rename(&res, &ren);
        // The captured active variables (`caps`, roots) and their copies and parts are active.
        let caps = self.caps.clone();
        let active: FxHashSet<LocalId> =
            self.active.iter().copied().filter(|v| caps.contains(&self.root(*v))).collect();
        let mut ad = Ad {
            t: &mut *self.t,
            active,
            lams: self.lams.clone(),
            adj: FxHashMap::default(),
            tys: self.tys.clone(),
            loops: FxHashMap::default(),
            alias: self.alias.clone(),
            tuples: self.tuples.clone(),
            unread: Vec::new(),
            paths: self.paths.clone(),
            lens: self.lens.clone(),
            builds: FxHashMap::default(),
            sums: summed_producers(&binds, &res),
            summed: FxHashMap::default(),
            units: FxHashMap::default(),
            folds: real_folds(&binds, &res),
            selects: FxHashMap::default(),
            changes: self.changes.clone(),
            frozen: self.frozen.clone(),
            want: FxHashSet::default(),
            comps: self.comps.clone(),
            pbs: FxHashMap::default(),
            caps: Vec::new(),
            caps_of: self.caps_of.clone(),
            remat: Vec::new(),
        };
        ad.tys.insert(yid, ("y".into(), a.clone()));
        if !a.is_discrete() {
            ad.active.insert(yid);
        }
        let mut fwd = Vec::new();
        ad.forward(&mut fwd, &binds, &res)?;
        let gid = ad.t.fresh();
        let g = var(gid, &"g".into(), &r);
        let mut rev = Vec::new();
        if let Some(seed) = ad.decompose(&mut rev, &g, false)? {
            ad.add(&mut rev, &res, seed)?;
        }
        ad.reverse(&mut rev, &binds)?;
        let gy = ad.adj.remove(&yid);
        let mut gy = ad.materialize(&mut rev, gy, &a, &y)?;
        if !caps.is_empty() {
            // The environment's cotangent: each captured active variable's.
            let mut cs = Vec::new();
            for c in &caps {
                let g = ad.adj.remove(c);
                let v = ad.var_of(*c);
                let t = v.ty.clone();
                cs.push(ad.materialize(&mut rev, g, &t, &v)?);
            }
            let cs = if cs.len() == 1 { cs.pop().unwrap() } else { tuple(cs) };
            gy = tuple(vec![gy, cs]);
        }
        let pb = lam(gid, &"g".into(), &r, lets(rev, gy));
        Ok(lam(yid, &"y".into(), &a, lets(fwd, tuple(vec![res, pb]))))
    }

    /// A `b = fold f z xs` / `iterate n f z` / `while p f z` whose carry holds functions (`fold
    /// (λh k. λy. h (y * k)) sq ks`), made to carry each function's companion beside it: `(b, bc)
    /// = fold (λ(h, hc) k. let r = f h k in (r, companion of r)) (z, zc) xs`, the step's body run
    /// through the forward phase (so a λ it returns gets its companion, with `hc` for the `h` it
    /// captures). The primal is computed as before, in the same order (a companion is a λ: making
    /// it cannot fail). `active`: the closures capture active variables (`caps`), whose cotangents
    /// every companion's pullback returns. `false` (nothing emitted) when a companion is not known
    /// (a function of another type, a step that is not a known λ, active data the step makes, …).
    fn augment(&mut self, out: &mut Vec<Bind>, b: &Bind, bi: Builtin, args: &[E], active: bool) -> bool {
        let mut pre = Vec::new();
        let saved = std::mem::take(&mut self.caps);
        let saved_remat = std::mem::take(&mut self.remat);
        let r = self.augment_into(&mut pre, b, bi, args, active);
        self.caps = saved;
        self.remat = saved_remat;
        match r {
            Ok(true) => {
                out.extend(pre);
                true
            }
            // Not augmented (a companion not known): the loop stays as it was, and a call of
            // what it builds is refused where it is differentiated.
            _ => false,
        }
    }

    fn augment_into(&mut self, out: &mut Vec<Bind>, b: &Bind, bi: Builtin, args: &[E], active: bool) -> R<bool> {
        let (step, z0, arity) = match bi {
            Builtin::Fold => (&args[0], &args[1], 2),
            _ => (&args[1], &args[2], 1),
        };
        // An active loop: its closures capture active variables (`caps`), whose cotangents their
        // companions' pullbacks return. Only when the carry holds no active data of its own (a
        // closure's cotangent is then its environment's) and the folded array is inactive.
        let caps = if active {
            if !fun_or_discrete(&b.ty) || (bi == Builtin::Fold && self.is_active(&args[2])) {
                return Ok(false);
            }
            let caps = self.captures(&[step, z0]);
            if caps.is_empty()
                || caps.iter().any(|v| self.tys.get(v).is_none_or(|(_, t)| !is_data(t) || !differentiable(t)))
            {
                return Ok(false);
            }
            caps
        } else {
            Vec::new()
        };
        self.caps = caps.clone();
        let capty = self.caps_ty(&caps);
        let Some(cty) = comp_ty(&b.ty, capty.as_ref()) else { return Ok(false) };
        let Some(zc) = self.comp_of(out, z0) else { return Ok(false) };
        if zc.ty != cty {
            return Ok(false);
        }
        let lamf = self.lam_of(step)?;
        let aty = Type::tuple(vec![b.ty.clone(), cty.clone()]);
        let (ps, bb, res) = self.fresh_lam(&lamf, arity)?;
        let sid = self.t.fresh();
        let s = var(sid, &"s".into(), &aty);
        let mut binds = Vec::new();
        let cid = self.t.fresh();
        binds.push(Bind { id: cid, name: "c".into(), ty: b.ty.clone(), rhs: proj(&s, 0) });
        let mut body = Vec::new();
        let hc = self.emit(&mut body, "hc", proj(&s, 1));
        if !caps.is_empty() {
            self.caps_of.insert(local(&hc).unwrap(), caps.clone());
        }
        self.comps.insert(cid, hc);
        self.bind_pat(&mut binds, &ps[0], var(cid, &"c".into(), &b.ty))?;
        binds.extend(bb);
        if let Some(r) = local(&res) {
            self.want.insert(r);
        }
        self.forward(&mut body, &binds, &res)?;
        // Active data the step makes (`let w = x * k in λy. h (y * w)`): a companion recomputes
        // what its λ captures of it (`remat`); made by a loop, it would need the step's own
        // reverse (not compiled).
        for x in &binds {
            if self.active.contains(&x.id) && !holds_fun(&x.ty) {
                if mentions_loop(&x.rhs) || matches!(strip(&x.rhs).kind, ExprKind::Lam(..)) {
                    return Ok(false);
                }
                self.remat.push(x.clone());
            }
        }
        let Some(rc) = self.comp_of(&mut body, &res) else { return Ok(false) };
        if rc.ty != cty {
            return Ok(false);
        }
        let mut f = lets(body, tuple(vec![res, rc]));
        if arity == 2 {
            let ty = Type::fun(ps[1].ty.clone(), f.ty.clone());
            f = mk(ExprKind::Lam(ps[1].clone(), f), ty);
        }
        let f = self.emit(out, "f", lam(sid, &"s".into(), &aty, f));
        let z = self.emit(out, "z", tuple(vec![z0.clone(), zc]));
        let call_args = match bi {
            Builtin::Fold => vec![f, z, args[2].clone()],
            Builtin::Iterate => vec![args[0].clone(), f, z],
            _ => {
                // The predicate reads the primal carry.
                let qid = self.t.fresh();
                let q = var(qid, &"s".into(), &aty);
                let pid = self.t.fresh();
                let c = var(pid, &"c".into(), &b.ty);
                let app = mk(ExprKind::App(args[0].clone(), c), Type::Bool);
                let body = lets(vec![Bind { id: pid, name: "c".into(), ty: b.ty.clone(), rhs: proj(&q, 0) }], app);
                let p = self.emit(out, "p", lam(qid, &"s".into(), &aty, body));
                vec![p, f, z]
            }
        };
        let r = self.emit(out, "r", at_span(call(bi, &call_args, aty), b.rhs.span));
        out.push(Bind { id: b.id, name: b.name.clone(), ty: b.ty.clone(), rhs: proj(&r, 0) });
        let rc = self.emit(out, "hc", proj(&r, 1));
        if !caps.is_empty() {
            self.caps_of.insert(local(&rc).unwrap(), caps);
        }
        self.comps.insert(b.id, rc);
        Ok(true)
    }

    /// The reverse phase of a series: each binding's transposed Jacobian applied to its adjoint,
    /// last binding first.
    fn reverse(&mut self, out: &mut Vec<Bind>, binds: &[Bind]) -> R<()> {
        for b in binds.iter().rev() {
            if let Some(g) = self.adj.remove(&b.id) {
                self.rule(out, b, g)?;
            }
        }
        Ok(())
    }

    /// Adds `a` to the adjoint of the atom `y` (nothing when `y` is not active).
    fn add(&mut self, out: &mut Vec<Bind>, y: &E, a: Adj) -> R<()> {
        let Some(id) = local(y).map(|y| self.root(y)) else { return Ok(()) };
        if !self.active.contains(&id) {
            return Ok(());
        }
        if is_fun(&y.ty) {
            return self.err("a gradient through a function-valued result");
        }
        if let Some((x, steps)) = self.paths.get(&id).cloned() {
            return self.add_path(out, &x, &steps, Leaf::Adj(a));
        }
        let merged = match self.adj.remove(&id) {
            None => a,
            Some(old) => self.merge(out, old, a)?,
        };
        self.adj.insert(id, merged);
        Ok(())
    }

    fn merge(&mut self, out: &mut Vec<Bind>, x: Adj, y: Adj) -> R<Adj> {
        Ok(match (x, y) {
            (Adj::R(a), Adj::R(b)) => Adj::R(self.emit(out, "d", rbin(BinOp::Add, &a, &b))),
            (Adj::A(a), Adj::A(b)) if is_deep(&a.ty) || is_tuple_array(&a.ty) => Adj::A(self.add_rows(out, a, &b)?),
            (Adj::A(a), Adj::A(b)) => {
                Adj::A(self.emit(out, "d", call(Builtin::AccAxpy, &[a.clone(), real(1.0), b], a.ty.clone())))
            }
            (Adj::B(a), Adj::B(b)) => Adj::B(self.emit(out, "d", rbin(BinOp::Add, &a, &b))),
            (Adj::A(a), Adj::B(b)) | (Adj::B(b), Adj::A(a)) => {
                Adj::A(self.emit(out, "d", call(Builtin::AccAddAll, &[a.clone(), b], a.ty.clone())))
            }
            (Adj::T(xs), Adj::T(ys)) => {
                let mut cs = Vec::with_capacity(xs.len());
                for (x, y) in xs.into_iter().zip(ys) {
                    cs.push(match (x, y) {
                        (None, c) | (c, None) => c,
                        (Some(x), Some(y)) => Some(self.merge(out, x, y)?),
                    });
                }
                Adj::T(cs)
            }
            _ => return self.err("mismatched adjoints (internal)"),
        })
    }

    /// The adjoint as a value of type `ty` (zeros where it is absent; `primal` gives the shape).
    fn materialize(&mut self, out: &mut Vec<Bind>, a: Option<Adj>, ty: &Type, primal: &E) -> R<E> {
        Ok(match (a, ty) {
            (Some(Adj::R(v)), _) | (Some(Adj::A(v)), _) => v,
            (Some(Adj::B(g)), _) => self.broadcast(out, g, ty, primal)?,
            (Some(Adj::T(cs)), Type::Tuple(ts)) => {
                let mut xs = Vec::new();
                for (i, (c, t)) in cs.into_iter().zip(ts.iter()).enumerate() {
                    let p = if c.is_none() && holds_array(t) {
                        self.emit(out, "p", proj(primal, i))
                    } else {
                        proj(primal, i)
                    };
                    xs.push(self.materialize(out, c, t, &p)?);
                }
                tuple(xs)
            }
            (None, _) => self.zero(out, ty, primal)?,
            _ => return self.err("mismatched adjoint (internal)"),
        })
    }

    fn zero(&mut self, out: &mut Vec<Bind>, ty: &Type, primal: &E) -> R<E> {
        Ok(match ty {
            Type::Real => real(0.0),
            Type::Int => int(0),
            Type::Bool => mk(ExprKind::Lit(Lit::Bool(false)), Type::Bool),
            Type::Unit => mk(ExprKind::Lit(Lit::Unit), Type::Unit),
            Type::Tuple(ts) => {
                let mut xs = Vec::new();
                for (i, t) in ts.iter().enumerate() {
                    let p = if holds_array(t) { self.emit(out, "p", proj(primal, i)) } else { proj(primal, i) };
                    xs.push(self.zero(out, t, &p)?);
                }
                tuple(xs)
            }
            Type::Array(e) => {
                let n = self.len_of(out, primal);
                if **e == Type::Real {
                    self.emit(out, "dz", call(Builtin::Zeros, &[n], ty.clone()))
                } else if is_nested(ty) {
                    // A nested accumulator of the primal's shape: distinct zero rows.
                    self.build_rows(out, &n, primal, None)
                } else if is_deep(ty) {
                    // build n (λi. zero of p.[i]): distinct zero accumulators all the way down.
                    let iid = self.t.fresh();
                    let iv = var(iid, &"i".into(), &Type::Int);
                    let mut bo = Vec::new();
                    let r = self.emit(&mut bo, "r", index(primal, &iv));
                    let z = self.zero(&mut bo, e, &r)?;
                    let f = lam(iid, &"i".into(), &Type::Int, lets(bo, z));
                    self.emit(out, "dz", call(Builtin::Build, &[n, f], ty.clone()))
                } else if is_tuple_array(ty) {
                    // build n (λi. (0.0, …)): an accumulator of tuples.
                    let Some(z) = zero_point(e) else { return self.err(format!("a zero adjoint of type {ty}")) };
                    let id = self.t.fresh();
                    let f = lam(id, &"i".into(), &Type::Int, z);
                    self.emit(out, "dz", call(Builtin::Build, &[n, f], ty.clone()))
                } else if e.is_discrete() && !holds_array(e) {
                    let id = self.t.fresh();
                    let z = self.zero(out, e, &real(0.0))?;
                    let f = lam(id, &"i".into(), &Type::Int, z);
                    self.emit(out, "dz", call(Builtin::Build, &[n, f], ty.clone()))
                } else {
                    return self.err(format!("a zero adjoint of type {ty}"));
                }
            }
            // The slot of a function component (see `differentiable`): never read as an
            // adjoint, it carries the primal function to keep the tuple's type.
            Type::Fun(..) => primal.clone(),
            t => return self.err(format!("a zero adjoint of type {t}")),
        })
    }

    /// The adjoint held by the value `v` of its type; `owned` when the transform made `v` (an
    /// array the caller passed must be copied before it is accumulated into).
    fn decompose(&mut self, out: &mut Vec<Bind>, v: &E, owned: bool) -> R<Option<Adj>> {
        let ty = v.ty.clone();
        if ty.is_discrete() {
            return Ok(None);
        }
        Ok(Some(match &ty {
            Type::Real => Adj::R(v.clone()),
            Type::Array(e) if **e == Type::Real => {
                if owned {
                    Adj::A(v.clone())
                } else {
                    let n = self.emit(out, "n", call(Builtin::Len, std::slice::from_ref(v), Type::Int));
                    let z = self.emit(out, "dz", call(Builtin::Zeros, &[n], ty.clone()));
                    Adj::A(self.emit(out, "d", call(Builtin::AccAxpy, &[z, real(1.0), v.clone()], ty.clone())))
                }
            }
            t if is_tuple_array(t) => {
                if owned {
                    Adj::A(v.clone())
                } else {
                    // A copy: build n (λi. v.[i]).
                    let n = self.emit(out, "n", call(Builtin::Len, std::slice::from_ref(v), Type::Int));
                    let id = self.t.fresh();
                    let iv = var(id, &"i".into(), &Type::Int);
                    let f = lam(id, &"i".into(), &Type::Int, index(v, &iv));
                    Adj::A(self.emit(out, "d", call(Builtin::Build, &[n, f], t.clone())))
                }
            }
            t if is_nested(t) => {
                if owned {
                    Adj::A(v.clone())
                } else {
                    let n = self.emit(out, "n", call(Builtin::Len, std::slice::from_ref(v), Type::Int));
                    Adj::A(self.build_rows(out, &n, v, Some(v)))
                }
            }
            t if is_deep(t) => {
                if owned {
                    Adj::A(v.clone())
                } else {
                    Adj::A(self.copy_acc(out, v)?)
                }
            }
            Type::Tuple(ts) => {
                let mut cs = Vec::new();
                for i in 0..ts.len() {
                    let c = if ts[i].is_discrete() || is_fun(&ts[i]) {
                        None
                    } else {
                        let p = self.emit(out, "d", proj(v, i));
                        self.decompose(out, &p, owned)?
                    };
                    cs.push(c);
                }
                Adj::T(cs)
            }
            t => return self.err(format!("a cotangent of type {t}")),
        }))
    }

    /// The accumulator of array atom `a` (a fresh zero one when it has none yet).
    fn acc(&mut self, out: &mut Vec<Bind>, a: &E) -> R<E> {
        let id = self.root(local(a).unwrap());
        match self.adj.remove(&id) {
            Some(Adj::A(v)) => Ok(v),
            Some(Adj::B(g)) => self.broadcast(out, g, &a.ty, a),
            None => self.zero(out, &a.ty, a),
            Some(_) => self.err("mismatched array adjoint (internal)"),
        }
    }

    /// The accumulator `g·1` of the shape of `primal` (an [`Adj::B`] made an array).
    fn broadcast(&mut self, out: &mut Vec<Bind>, g: E, ty: &Type, primal: &E) -> R<E> {
        if *ty == Type::array(Type::Real) {
            // build n (λi. 0.0 + g): what `accAddAll' (zeros' n) g` computes, in one pass.
            let n = self.len_of(out, primal);
            let c = self.emit(out, "d", rbin(BinOp::Add, &real(0.0), &g));
            let iid = self.t.fresh();
            let f = lam(iid, &"i".into(), &Type::Int, c);
            return Ok(self.emit(out, "d", call(Builtin::Build, &[n, f], ty.clone())));
        }
        let z = self.zero(out, ty, primal)?;
        Ok(self.emit(out, "d", call(Builtin::AccAddAll, &[z, g], ty.clone())))
    }

    /// An array adjoint as an accumulator atom (`primal` gives the shape of a broadcast one).
    fn array_adj(&mut self, out: &mut Vec<Bind>, g: Adj, primal: &E, what: &str) -> R<E> {
        match g {
            Adj::A(v) => Ok(v),
            Adj::B(g) => self.broadcast(out, g, &primal.ty, primal),
            _ => self.err(what.to_string()),
        }
    }

    fn set_acc(&mut self, a: &E, v: E) {
        self.adj.insert(self.root(local(a).unwrap()), Adj::A(v));
    }

    /// `len a`, from the atom `n` of the `build n f` that made `a` when there is one.
    fn len_of(&mut self, out: &mut Vec<Bind>, a: &E) -> E {
        match local(a).and_then(|id| self.lens.get(&id).cloned()) {
            Some(n) if n.ty == Type::Int => n,
            Some(xs) => self.len_of(out, &xs),
            None => self.emit(out, "n", call(Builtin::Len, std::slice::from_ref(a), Type::Int)),
        }
    }

    /// The path `(x, steps)` the atom `a` is (a part of a deep value, or a copy: `paths`).
    fn path_of(&self, a: &E) -> Option<(E, Vec<Step>)> {
        self.paths.get(&local(a)?).cloned()
    }

    /// Adds `leaf` at the end of the path `steps` into x's accumulator, in place.
    fn add_path(&mut self, out: &mut Vec<Bind>, x: &E, steps: &[Step], leaf: Leaf) -> R<()> {
        let acc = self.acc(out, x)?;
        let v = self.upd(out, &acc, steps, leaf)?;
        self.set_acc(x, v);
        Ok(())
    }

    /// The accumulator atom `e` (uniquely owned) with `leaf` added at the end of `steps`: one
    /// `accAt' e i (λu. …)` per element step (the element's accumulators updated in place and
    /// returned), a tuple rebuilt around the updated component per component step, and the row
    /// builtins on the last row of an `Array (Array Real)`. Rule 5 on the read of a part: its
    /// adjoint is added at the part's place, O(1) per step for an element.
    fn upd(&mut self, out: &mut Vec<Bind>, e: &E, steps: &[Step], leaf: Leaf) -> R<E> {
        let ty = e.ty.clone();
        match steps {
            [] => self.upd_leaf(out, e, leaf),
            [Step::At(i)] if is_nested(&ty) && !matches!(leaf, Leaf::Adj(Adj::R(_) | Adj::T(_))) => {
                let (e, i) = (e.clone(), i.clone());
                let rhs = match leaf {
                    Leaf::At(j, g) => call(Builtin::AccAdd2, &[e, i, j, g], ty),
                    Leaf::All(g) | Leaf::Adj(Adj::B(g)) => call(Builtin::AccRowAll, &[e, i, g], ty),
                    Leaf::Axpy(s, y) => call(Builtin::AccRow, &[e, i, s, y], ty),
                    Leaf::Adj(Adj::A(y)) => call(Builtin::AccRow, &[e, i, real(1.0), y], ty),
                    Leaf::Adj(_) => return self.err("a row adjoint that is not an array (internal)"),
                };
                Ok(self.emit(out, "d", rhs))
            }
            // An element of an array of tuples of Reals: the tuple added in place.
            [Step::At(i)] if is_tuple_array(&ty) => {
                let Leaf::Adj(a @ Adj::T(_)) = leaf else {
                    return self.err("a tuple element's adjoint that is not a tuple (internal)");
                };
                let Type::Array(et) = &ty else { return self.err("a path through a non-array (internal)") };
                let et = (**et).clone();
                let z = zero_point(&et).ok_or_else(|| not("a zero tuple (internal)", self.t.span))?;
                let v = self.materialize(out, Some(a), &et, &z)?;
                let v = self.emit(out, "d", v);
                Ok(self.emit(out, "d", call(Builtin::AccAdd, &[e.clone(), i.clone(), v], ty)))
            }
            [Step::At(i), rest @ ..] => {
                let Type::Array(et) = &ty else { return self.err("a path through a non-array (internal)") };
                let et = (**et).clone();
                let uid = self.t.fresh();
                let u = var(uid, &"u".into(), &et);
                let mut bo = Vec::new();
                let r = self.upd(&mut bo, &u, rest, leaf)?;
                let f = lam(uid, &"u".into(), &et, lets(bo, r));
                Ok(self.emit(out, "d", call(Builtin::AccAt, &[e.clone(), i.clone(), f], ty)))
            }
            [Step::Comp(k), rest @ ..] => {
                let Type::Tuple(ts) = &ty else { return self.err("a path through a non-tuple (internal)") };
                let mut xs = Vec::with_capacity(ts.len());
                for m in 0..ts.len() {
                    xs.push(self.emit(out, "p", proj(e, m)));
                }
                let c = xs[*k].clone();
                xs[*k] = self.upd(out, &c, rest, leaf)?;
                Ok(self.emit(out, "d", tuple(xs)))
            }
        }
    }

    /// The accumulator atom `e` plus `leaf` (the end of a path).
    fn upd_leaf(&mut self, out: &mut Vec<Bind>, e: &E, leaf: Leaf) -> R<E> {
        let ty = e.ty.clone();
        let e = e.clone();
        let rhs = match leaf {
            Leaf::At(j, g) => call(Builtin::AccAdd, &[e, j, g], ty),
            Leaf::All(g) | Leaf::Adj(Adj::B(g)) => call(Builtin::AccAddAll, &[e, g], ty),
            Leaf::Axpy(s, y) => call(Builtin::AccAxpy, &[e, s, y], ty),
            Leaf::Adj(Adj::R(g)) => rbin(BinOp::Add, &e, &g),
            Leaf::Adj(Adj::A(v)) if ty == Type::array(Type::Real) => call(Builtin::AccAxpy, &[e, real(1.0), v], ty),
            Leaf::Adj(Adj::A(v)) => return self.add_rows(out, e, &v),
            Leaf::Adj(Adj::T(cs)) => {
                let Type::Tuple(ts) = &ty else { return self.err("a tuple adjoint of a non-tuple (internal)") };
                let mut xs = Vec::with_capacity(ts.len());
                for (m, c) in cs.into_iter().enumerate() {
                    let p = self.emit(out, "p", proj(&e, m));
                    xs.push(match c {
                        Some(c) => self.upd_leaf(out, &p, Leaf::Adj(c))?,
                        None => p,
                    });
                }
                tuple(xs)
            }
        };
        Ok(self.emit(out, "d", rhs))
    }

    /// A fresh accumulator holding the value `v` of a deep type (`decompose` of a caller's
    /// cotangent): its arrays are new, so it can be updated in place.
    fn copy_acc(&mut self, out: &mut Vec<Bind>, v: &E) -> R<E> {
        let ty = v.ty.clone();
        Ok(match &ty {
            Type::Array(e) if **e == Type::Real => {
                let n = self.emit(out, "n", call(Builtin::Len, std::slice::from_ref(v), Type::Int));
                let z = self.emit(out, "dz", call(Builtin::Zeros, &[n], ty.clone()));
                self.emit(out, "d", call(Builtin::AccAxpy, &[z, real(1.0), v.clone()], ty.clone()))
            }
            Type::Array(_) if holds_array(&ty) || is_tuple_array(&ty) => {
                // build n (λi. copy of v.[i]).
                let n = self.emit(out, "n", call(Builtin::Len, std::slice::from_ref(v), Type::Int));
                let iid = self.t.fresh();
                let iv = var(iid, &"i".into(), &Type::Int);
                let mut bo = Vec::new();
                let x = self.emit(&mut bo, "x", index(v, &iv));
                let c = self.copy_acc(&mut bo, &x)?;
                let f = lam(iid, &"i".into(), &Type::Int, lets(bo, c));
                self.emit(out, "d", call(Builtin::Build, &[n, f], ty.clone()))
            }
            Type::Tuple(ts) if holds_array(&ty) => {
                let mut xs = Vec::with_capacity(ts.len());
                for m in 0..ts.len() {
                    let p = self.emit(out, "p", proj(v, m));
                    xs.push(self.copy_acc(out, &p)?);
                }
                self.emit(out, "d", tuple(xs))
            }
            _ => v.clone(),
        })
    }

    /// a.[j] += g in a's adjoint (rule 5 on the read `a.[j]`: O(1), in place).
    fn add_at(&mut self, out: &mut Vec<Bind>, a: &E, j: &E, g: E) -> R<()> {
        if !self.is_active(a) {
            return Ok(());
        }
        if let Some((x, steps)) = self.path_of(a) {
            return self.add_path(out, &x, &steps, Leaf::At(j.clone(), g));
        }
        let acc = self.acc(out, a)?;
        let v = self.emit(out, "d", call(Builtin::AccAdd, &[acc, j.clone(), g], a.ty.clone()));
        self.set_acc(a, v);
        Ok(())
    }

    /// a += g·1 in a's adjoint.
    fn add_all(&mut self, out: &mut Vec<Bind>, a: &E, g: E) -> R<()> {
        if !self.is_active(a) {
            return Ok(());
        }
        if let Some((x, steps)) = self.path_of(a) {
            return self.add_path(out, &x, &steps, Leaf::All(g));
        }
        let acc = self.acc(out, a)?;
        let v = self.emit(out, "d", call(Builtin::AccAddAll, &[acc, g], a.ty.clone()));
        self.set_acc(a, v);
        Ok(())
    }

    /// a += s·y in a's adjoint (`a`, `y` of type `Array Real`).
    fn add_axpy(&mut self, out: &mut Vec<Bind>, a: &E, s: E, y: E) -> R<()> {
        if !self.is_active(a) {
            return Ok(());
        }
        if let Some((x, steps)) = self.path_of(a) {
            return self.add_path(out, &x, &steps, Leaf::Axpy(s, y));
        }
        let id = self.root(local(a).unwrap());
        let v = if a.ty == Type::array(Type::Real) && !self.adj.contains_key(&id) {
            // The first contribution (lse's softmax, s·e): a new array 0.0 + s·y_i, what
            // `accAxpy' (zeros' n) s y` computes, in one pass instead of two.
            let vid = self.t.fresh();
            let v = var(vid, &"v".into(), &Type::Real);
            let mut bo = Vec::new();
            let p = self.emit(&mut bo, "p", rbin(BinOp::Mul, &s, &v));
            let r = self.emit(&mut bo, "d", rbin(BinOp::Add, &real(0.0), &p));
            let f = lam(vid, &"v".into(), &Type::Real, lets(bo, r));
            self.emit(out, "d", call(Builtin::Map, &[f, y], a.ty.clone()))
        } else {
            let acc = self.acc(out, a)?;
            self.emit(out, "d", call(Builtin::AccAxpy, &[acc, s, y], a.ty.clone()))
        };
        self.set_acc(a, v);
        Ok(())
    }

    /// `build n (λi. zeros' (len p.[i]))`, or with `copy`, `build n (λi. accAxpy' (zeros' (len
    /// p.[i])) 1.0 copy.[i])`: a nested accumulator of p's shape, each row a fresh array.
    fn build_rows(&mut self, out: &mut Vec<Bind>, n: &E, p: &E, copy: Option<&E>) -> E {
        let row_ty = Type::array(Type::Real);
        let iid = self.t.fresh();
        let iv = var(iid, &"i".into(), &Type::Int);
        let mut bo = Vec::new();
        let r = self.t.bind(&mut bo, "r", index(p, &iv));
        let m = self.t.bind(&mut bo, "m", call(Builtin::Len, &[r], Type::Int));
        let z = call(Builtin::Zeros, &[m], row_ty.clone());
        let row = match copy {
            None => z,
            Some(c) => {
                let z = self.t.bind(&mut bo, "z", z);
                let y = self.t.bind(&mut bo, "y", index(c, &iv));
                call(Builtin::AccAxpy, &[z, real(1.0), y], row_ty.clone())
            }
        };
        let f = lam(iid, &"i".into(), &Type::Int, lets(bo, row));
        self.emit(out, "dz", call(Builtin::Build, &[n.clone(), f], p.ty.clone()))
    }

    /// The nested accumulator `a` plus `b`, row by row in place:
    /// `(iterate' (len b) (λs. (s.0 + 1, accRow' s.1 s.0 1.0 b.[s.0])) (0, a)).1` (`accAdd'` of
    /// each element for an array of tuples).
    fn add_rows(&mut self, out: &mut Vec<Bind>, a: E, b: &E) -> R<E> {
        self.add_rows_scaled(out, a, real(1.0), b)
    }

    /// The accumulator `a` plus `s·b` (`accRow' a i s b.[i]` for each row of an `Array (Array
    /// Real)`; for any other type `s` must be 1.0).
    fn add_rows_scaled(&mut self, out: &mut Vec<Bind>, a: E, scale: E, b: &E) -> R<E> {
        let ty = a.ty.clone();
        let n = self.emit(out, "n", call(Builtin::Len, std::slice::from_ref(b), Type::Int));
        let sty = Type::tuple(vec![Type::Int, ty.clone()]);
        let sid = self.t.fresh();
        let s = var(sid, &"s".into(), &sty);
        let mut bo = Vec::new();
        let k = self.t.bind(&mut bo, "k", proj(&s, 0));
        let acc = self.t.bind(&mut bo, "acc", proj(&s, 1));
        let row = self.t.bind(&mut bo, "row", index(b, &k));
        let acc2 = if is_nested(&ty) {
            self.t.bind(&mut bo, "acc", call(Builtin::AccRow, &[acc, k.clone(), scale, row], ty.clone()))
        } else if is_tuple_array(&ty) {
            self.t.bind(&mut bo, "acc", call(Builtin::AccAdd, &[acc, k.clone(), row], ty.clone()))
        } else {
            // Element k of b (read once: its accumulators move) added into element k of a.
            match self.decompose(&mut bo, &row, true)? {
                Some(g) => self.upd(&mut bo, &acc, &[Step::At(k.clone())], Leaf::Adj(g))?,
                None => acc,
            }
        };
        let k1 = self.t.bind(&mut bo, "k", bin(BinOp::Add, &k, &int(1), Type::Int));
        let step = lam(sid, &"s".into(), &sty, lets(bo, tuple(vec![k1, acc2])));
        let r = self.emit(out, "r", call(Builtin::RevIterate, &[n, step, tuple(vec![int(0), a])], sty));
        Ok(self.emit(out, "d", proj(&r, 1)))
    }

    /// The reverse rule of one binding `z = rhs` whose adjoint is `g`.
    fn rule(&mut self, out: &mut Vec<Bind>, b: &Bind, g: Adj) -> R<()> {
        if let Some(units) = self.units.remove(&b.id) {
            // Lemma 4.4 (the pullback is linear in its cotangent): the reverse of a fused
            // producer with the broadcast cotangent c is c times its reverse for cotangent 1.
            let (Adj::B(c) | Adj::R(c)) = g else {
                return self.err("a fused loop's adjoint is not a scalar (internal)");
            };
            for (v, u) in units {
                let ve = self.var_of(v);
                let one = matches!(c.kind, ExprKind::Lit(Lit::Real(x)) if x == 1.0);
                let root = local(&ve).map(|v| self.root(v));
                if u.ty == Type::Real {
                    let d = self.emit(out, "d", rbin(BinOp::Mul, &c, &u));
                    self.add(out, &ve, Adj::R(d))?;
                } else if one && root.is_some_and(|r| !self.adj.contains_key(&r) && !self.paths.contains_key(&r)) {
                    // The first adjoint of v, for the cotangent 1: the loop's accumulator itself.
                    self.add(out, &ve, Adj::A(u))?;
                } else if is_nested(&u.ty) {
                    // A nested accumulator (never a row: `fused_forward` declines those): c·u
                    // added row by row into v's.
                    let acc = self.acc(out, &ve)?;
                    let v = self.add_rows_scaled(out, acc, c.clone(), &u)?;
                    self.set_acc(&ve, v);
                } else {
                    self.add_axpy(out, &ve, c.clone(), u)?;
                }
            }
            return Ok(());
        }
        let rhs = strip(&b.rhs).clone();
        let z = b.var();
        match &rhs.kind {
            // Rule 5 on a copy: the adjoint moves.
            ExprKind::Var(_, VarRef::Local(_)) => self.add(out, &rhs, g),
            ExprKind::Var(..) | ExprKind::Lit(_) | ExprKind::Lam(..) => Ok(()),
            // Tuples and projections (rules 11, 12): componentwise.
            ExprKind::Tuple(xs) => {
                let Adj::T(cs) = g else { return self.err("tuple adjoint (internal)") };
                for (x, c) in xs.iter().zip(cs) {
                    if let Some(c) = c {
                        self.add(out, x, c)?;
                    }
                }
                Ok(())
            }
            ExprKind::Proj(a, i) => {
                let n = match &a.ty {
                    Type::Tuple(ts) => ts.len(),
                    _ => return self.err("projection of a non-tuple (internal)"),
                };
                let mut cs = vec![None; n];
                cs[*i] = Some(g);
                self.add(out, a, Adj::T(cs))
            }
            ExprKind::Neg(a) => {
                let Adj::R(g) = g else { return self.err("a negated array") };
                let d = self.emit(out, "d", mk(ExprKind::Neg(g), Type::Real));
                self.add(out, a, Adj::R(d))
            }
            // `a ⊕ da` with `a` active whose change `expand_oplus` could not see (read from an
            // array, made by a loop): its derivative depends on which change `da` holds at run
            // time (the reducer's rule (⊕) reads it at the point); not compiled, so the
            // interpreter runs it.
            ExprKind::Bin(BinOp::Oplus, a, _) if self.is_active(a) => {
                self.err("a gradient through `<+>` of a change chosen at run time")
            }
            ExprKind::Bin(op, a, c) => {
                let Adj::R(g) = g else { return self.err(format!("`{}` on arrays", op.ascii())) };
                self.prim(out, Prim::Op(*op), &[a.clone(), c.clone()], &g, &z)
            }
            // `x.[i]`: the transpose of a read is an O(1) accumulation into x's adjoint buffer.
            ExprKind::Index(a, i) => match g {
                Adj::R(g) => self.add_at(out, a, i, g),
                // A part of a deep array whose adjoint was held apart: added into element i of a's.
                g @ (Adj::A(_) | Adj::T(_) | Adj::B(_)) if is_deep(&a.ty) => {
                    if !self.is_active(a) {
                        return Ok(());
                    }
                    match self.path_of(a) {
                        Some((x, mut steps)) => {
                            steps.push(Step::At(i.clone()));
                            self.add_path(out, &x, &steps, Leaf::Adj(g))
                        }
                        None => self.add_path(out, a, &[Step::At(i.clone())], Leaf::Adj(g)),
                    }
                }
                // An element of an array of tuples: the tuple (zeros where absent) added in place.
                Adj::T(cs) if is_tuple_array(&a.ty) => {
                    let et = z.ty.clone();
                    let v = self.materialize(out, Some(Adj::T(cs)), &et, &z)?;
                    let v = self.emit(out, "d", v);
                    self.add_at(out, a, i, v)
                }
                _ => self.err(format!("a gradient through an element of {}", a.ty)),
            },
            ExprKind::Array(xs) => {
                for (k, x) in xs.iter().enumerate() {
                    if self.is_active(x) {
                        let a = match &g {
                            // Element k of the accumulator (a row of a nested one is read once:
                            // it moves to x).
                            Adj::A(v) => {
                                let c = self.emit(out, "d", index(v, &int(k as i64)));
                                self.decompose(out, &c, true)?
                            }
                            Adj::B(c) => Some(Adj::R(c.clone())),
                            _ => return self.err(format!("an array literal of type {}", z.ty)),
                        };
                        if let Some(a) = a {
                            self.add(out, x, a)?;
                        }
                    }
                }
                Ok(())
            }
            ExprKind::If(c, l1, l2) => self.rev_if(out, c, l1, l2, &z, g),
            ExprKind::App(..) => {
                let (h, args) = anf::anormal::spine(&rhs);
                let args: Vec<E> = args.into_iter().cloned().collect();
                match &h.kind {
                    ExprKind::Var(_, VarRef::Builtin(bi)) if args.len() == bi.arity() => {
                        self.builtin_rule(out, *bi, &args, b, g)
                    }
                    // Through the function's companion (`forward`): rule 5 on its pullback at
                    // the argument, `ā += pb r̄`.
                    _ if self.pbs.contains_key(&b.id) && args.len() == 1 => {
                        let (pb, caps) = self.pbs[&b.id].clone();
                        let gv = self.materialize(out, Some(g), &z.ty, &z)?;
                        let Type::Fun(_, at) = &pb.ty else { return self.err("a pullback's type (internal)") };
                        let at = (**at).clone();
                        let o = self.emit(out, "d", mk(ExprKind::App(pb, gv), at));
                        let d = if caps.is_empty() { o.clone() } else { self.emit(out, "d", proj(&o, 0)) };
                        if let Some(a) = self.decompose(out, &d, true)? {
                            self.add(out, &args[0], a)?;
                        }
                        // The environment's cotangent: into each captured variable's adjoint.
                        if !caps.is_empty() {
                            let cs = self.emit(out, "d", proj(&o, 1));
                            for (i, c) in caps.iter().enumerate() {
                                let ci = if caps.len() == 1 { cs.clone() } else { self.emit(out, "d", proj(&cs, i)) };
                                if let Some(a) = self.decompose(out, &ci, true)? {
                                    let v = self.var_of(*c);
                                    self.add(out, &v, a)?;
                                }
                            }
                        }
                        Ok(())
                    }
                    _ => self.err("a gradient through a call of a function not known at compile time"),
                }
            }
            _ => self.err("a gradient through this construct"),
        }
    }

    /// Rule 15 then rule 5 for a Real primitive: each active argument gets `g · ∂f/∂xᵢ`. A
    /// partial that is a function of the result (`tanh′ = 1 − z²`, `exp′ = z`, …) reads the
    /// result `z`, which the forward phase bound in the same scope (a loop body's reverse
    /// recomputes or reads its primal first), instead of calling the primitive again.
    fn prim(&mut self, out: &mut Vec<Bind>, p: Prim, args: &[E], g: &E, z: &E) -> R<()> {
        if args.iter().any(|a| a.ty != Type::Real) {
            return Ok(()); // Int arithmetic: discrete.
        }
        let Some(ps) = rules::partial_terms_at(p, args, Some(z)) else {
            return self.err("a primitive without a derivative rule (internal)");
        };
        for (a, d) in args.iter().zip(ps) {
            if !self.is_active(a) {
                continue;
            }
            let c = if rules::is_one(&d) {
                g.clone()
            } else if rules::is_minus_one(&d) {
                self.emit(out, "d", mk(ExprKind::Neg(g.clone()), Type::Real))
            } else if rules::is_one(g) {
                // The cotangent 1 (a fused loop's unit reverse): the partial itself.
                self.emit(out, "d", d)
            } else {
                self.emit(out, "d", rbin(BinOp::Mul, g, &d))
            };
            self.add(out, a, Adj::R(c))?;
        }
        Ok(())
    }

    fn builtin_rule(&mut self, out: &mut Vec<Bind>, b: Builtin, args: &[E], z: &Bind, g: Adj) -> R<()> {
        use Builtin as B;
        let zv = z.var();
        match b {
            B::ToReal | B::Len => Ok(()),
            // Rule 15 with ∂ = 0: floor and round are locally constant (0 at the kinks too,
            // docs/language.md §5), so their argument's adjoint is a symbolic zero.
            B::Floor | B::Round => Ok(()),
            // Rule 15 with the partials of the shared table (`crate::rules`).
            _ if rules::is_real_prim(Prim::Builtin(b)) => {
                let Adj::R(g) = g else { return self.err("a primitive on arrays (internal)") };
                self.prim(out, Prim::Builtin(b), args, &g, &zv)
            }
            // sum: the transpose of Σ broadcasts the adjoint (kept symbolic, `Adj::B`).
            B::Sum => {
                let Adj::R(g) = g else { return self.err("`sum` of arrays") };
                // A row of a nested array adds into its row of the nested accumulator.
                if self.path_of(&args[0]).is_some() {
                    return self.add_all(out, &args[0], g);
                }
                self.add(out, &args[0], Adj::B(g))
            }
            B::Dot => {
                let Adj::R(g) = g else { return self.err("`dot` of arrays") };
                for (a, other) in [(&args[0], &args[1]), (&args[1], &args[0])] {
                    self.add_axpy(out, a, g.clone(), other.clone())?;
                }
                Ok(())
            }
            B::Map | B::ZipWith | B::Build => self.rev_elementwise(out, b, args, &zv, g),
            // The transform's own builtins, for nested pullbacks (an inner site's output
            // differentiated by an outer one). Each is linear in its array argument: its
            // adjoint moves to the input after the other arguments' adjoints have read it.
            B::Zeros | B::TapeNew => Ok(()),
            B::AccAdd | B::AccAddAll | B::AccAxpy | B::TapeSet => {
                let gz = self.array_adj(out, g, &zv, &format!("a gradient through `{}` of tuples", b.name()))?;
                match b {
                    // accAdd' A i v = A + v·eᵢ: v gets the i-th adjoint.
                    B::AccAdd => {
                        if self.is_active(&args[2]) {
                            let c = self.emit(out, "d", index(&gz, &args[1]));
                            if let Some(a) = self.decompose(out, &c, true)? {
                                self.add(out, &args[2], a)?;
                            }
                        }
                    }
                    // accAddAll' A s = A + s·1: s gets the sum of the adjoint.
                    B::AccAddAll => {
                        if self.is_active(&args[1]) {
                            let c = self.emit(out, "d", call(B::Sum, std::slice::from_ref(&gz), Type::Real));
                            self.add(out, &args[1], Adj::R(c))?;
                        }
                    }
                    // accAxpy' A s y = A + s·y (bilinear in s and y).
                    B::AccAxpy => {
                        if self.is_active(&args[1]) {
                            let c = self.emit(out, "d", call(B::Dot, &[gz.clone(), args[2].clone()], Type::Real));
                            self.add(out, &args[1], Adj::R(c))?;
                        }
                        self.add_axpy(out, &args[2], args[1].clone(), gz.clone())?;
                    }
                    // tapeSet' T i v overwrites element i: v gets its adjoint, T the rest.
                    _ => {
                        let et = args[2].ty.clone();
                        let Some(zero) = zero_point(&et).filter(|_| et == Type::Real || is_flat_tuple(&et)) else {
                            return self.err(format!("a gradient through a tape of {et}"));
                        };
                        if self.is_active(&args[2]) {
                            let c = self.emit(out, "d", index(&gz, &args[1]));
                            if let Some(a) = self.decompose(out, &c, true)? {
                                self.add(out, &args[2], a)?;
                            }
                        }
                        // The element overwritten gets no adjoint: zeroed in place.
                        let gz2 =
                            self.emit(out, "d", call(B::TapeSet, &[gz, args[1].clone(), zero], args[0].ty.clone()));
                        return self.add(out, &args[0], Adj::A(gz2));
                    }
                }
                self.add(out, &args[0], Adj::A(gz))
            }
            // The nested accumulators' builtins, linear in A like the others: the other arguments
            // read row i of the adjoint, which then moves to A (rule 5 on each linear map).
            B::AccAdd2 | B::AccRow | B::AccRowAll => {
                let Adj::A(gz) = g else { return self.err(format!("a gradient through `{}`", b.name())) };
                let row = self.emit(out, "d", index(&gz, &args[1]));
                match b {
                    // accAdd2' A i j v = A + v·e_ij: v gets the (i, j) adjoint.
                    B::AccAdd2 => {
                        if self.is_active(&args[3]) {
                            let c = self.emit(out, "d", index(&row, &args[2]));
                            self.add(out, &args[3], Adj::R(c))?;
                        }
                    }
                    // accRowAll' A i s = A + s·(e_i ⊗ 1): s gets the sum of row i.
                    B::AccRowAll => {
                        if self.is_active(&args[2]) {
                            let c = self.emit(out, "d", call(B::Sum, std::slice::from_ref(&row), Type::Real));
                            self.add(out, &args[2], Adj::R(c))?;
                        }
                    }
                    // accRow' A i s y = A + s·(e_i ⊗ y), bilinear in s and y.
                    _ => {
                        if self.is_active(&args[2]) {
                            let c = self.emit(out, "d", call(B::Dot, &[row.clone(), args[3].clone()], Type::Real));
                            self.add(out, &args[2], Adj::R(c))?;
                        }
                        self.add_axpy(out, &args[3], args[2].clone(), row)?;
                    }
                }
                self.add(out, &args[0], Adj::A(gz))
            }
            // accAt' A i f = A with element i replaced by f A.[i], where f is the transform's own
            // λ: the element passes unchanged through its accumulator builtins, which add the
            // captured adjoints to it. So A's adjoint is the result's (rule 5 on the identity
            // part), and the captured values get the reverse of f's body seeded with element i
            // of the result's adjoint (rules 5 and 15 on each builtin of the body).
            B::AccAt => {
                let gz = self.array_adj(out, g, &zv, "a gradient through `accAt'`")?;
                let lamf = self.lam_of(&args[2])?;
                if mentions_loop(&lamf) {
                    return self.err("a gradient through `accAt'` of a loop");
                }
                let (ps, bb, res) = self.fresh_lam(&lamf, 1)?;
                let Type::Array(et) = &args[0].ty else { return self.err("`accAt'` of a non-array (internal)") };
                let et = (**et).clone();
                // The element: frozen, so that nothing flows back through it (its adjoint is gz.[i],
                // which stays in gz).
                let id = self.t.fresh();
                let mut binds = vec![Bind { id, name: "u".into(), ty: et.clone(), rhs: index(&args[0], &args[1]) }];
                self.frozen.insert(id);
                self.bind_pat(&mut binds, &ps[0], var(id, &"u".into(), &et))?;
                binds.extend(bb);
                // The body's primal is not emitted (it would update the accumulator again); its
                // reverse reads only adjoints and values from outside the body, checked below.
                let mut primal = Vec::new();
                self.forward(&mut primal, &binds, &res)?;
                let gi = self.emit(out, "d", index(&gz, &args[1]));
                let seed = self.decompose(out, &gi, true)?;
                let start = out.len();
                self.seed_and_reverse(out, &binds, &res, seed)?;
                let made: FxHashSet<LocalId> = primal.iter().map(|b| b.id).collect();
                for b in &out[start..] {
                    let mut fv = FxHashSet::default();
                    free_locals(&b.rhs, &mut fv);
                    if fv.iter().any(|v| made.contains(v)) {
                        return self.err("a gradient through `accAt'` whose reverse reads its body");
                    }
                }
                self.add(out, &args[0], Adj::A(gz))
            }
            B::Fold | B::Iterate | B::RevIterate | B::While => self.rev_fold(out, z, g),
            _ => self.err(format!("a gradient through `{}`", b.name())),
        }
    }

    /// The λ an atom denotes (a let-bound λ in scope).
    fn lam_of(&mut self, f: &E) -> R<E> {
        let f = strip(f);
        match &f.kind {
            ExprKind::Lam(..) => Ok(f.clone()),
            // A definition: its λ.
            ExprKind::Var(_, VarRef::Global(_)) => self.t.resolve(f),
            ExprKind::Var(_, VarRef::Local(id)) => match self.lams.get(id) {
                Some(l) => Ok(l.clone()),
                // A function built at run time with a companion: `λy. f y`, whose application
                // goes through the companion (`forward`).
                None if self.comps.contains_key(id) => {
                    let Type::Fun(a, r) = &f.ty else { return self.err("a companion's type (internal)") };
                    let y = self.t.fresh();
                    let body = mk(ExprKind::App(f.clone(), var(y, &"y".into(), a)), (**r).clone());
                    Ok(lam(y, &"y".into(), a, body))
                }
                None => self.err("a loop over a function not known at compile time"),
            },
            // A builtin (`map tanh xs`, `map sum rows`, `fold max 0.0 xs`) or one partially applied to
            // atoms (`map (max 0.0) xs`): its η-expansion `λy…. b a… y…`, whose body the rules
            // of the builtin differentiate.
            _ => {
                let (h, args) = anf::anormal::spine(f);
                let arity = match &strip(h).kind {
                    ExprKind::Var(_, VarRef::Builtin(b)) if args.len() < b.arity() => b.arity() - args.len(),
                    _ => return self.err("a loop over a function not known at compile time"),
                };
                let mut params = Vec::new();
                let mut body = f.clone();
                let mut ty = f.ty.clone();
                for _ in 0..arity {
                    let Type::Fun(a, r) = ty else {
                        return self.err("a loop over a function not known at compile time");
                    };
                    let id = self.t.fresh();
                    let y = var(id, &"y".into(), &a);
                    body = mk(ExprKind::App(body, y), (*r).clone());
                    params.push((id, (*a).clone()));
                    ty = (*r).clone();
                }
                for (id, a) in params.into_iter().rev() {
                    body = lam(id, &"y".into(), &a, body);
                }
                Ok(body)
            }
        }
    }

    /// The non-function active variables `e` uses, following let-bound λs it captures.
    fn captures(&self, es: &[&E]) -> Vec<LocalId> {
        let mut seen = FxHashSet::default();
        let mut out = Vec::new();
        let mut work: Vec<E> = es.iter().map(|e| (*e).clone()).collect();
        while let Some(e) = work.pop() {
            let mut fv = FxHashSet::default();
            free_locals(&e, &mut fv);
            for id in fv {
                let id = self.root(id);
                if !self.active.contains(&id) || !seen.insert(id) {
                    continue;
                }
                match self.tys.get(&id) {
                    Some((_, t)) if is_fun(t) => {
                        if let Some(l) = self.lams.get(&id) {
                            work.push(l.clone());
                        }
                        // A function built at run time: the variables its companion's pullback
                        // gives cotangents of.
                        if let Some(cs) = self.comps.get(&id).and_then(local).and_then(|c| self.caps_of.get(&c)) {
                            work.extend(cs.iter().map(|c| self.var_of(*c)));
                        }
                    }
                    // A part's adjoint lives in its deep root's: that one is carried.
                    Some(_) => match self.paths.get(&id) {
                        Some((x, _)) => work.push(x.clone()),
                        None => out.push(id),
                    },
                    None => {}
                }
            }
        }
        out.sort();
        out
    }

    /// A λ's parameters and body (curried λs peeled, `let z = λ… in z` bodies included).
    fn peel(&self, lam: &E, n: usize) -> R<(Vec<Rc<Pat>>, E)> {
        let mut ps = Vec::new();
        let mut cur = strip(lam).clone();
        while ps.len() < n {
            match &cur.kind {
                ExprKind::Lam(p, b) => {
                    ps.push(p.clone());
                    cur = b.clone();
                }
                ExprKind::Let(p, rhs, rest) => match (&p.kind, &rest.kind, &strip(rhs).kind) {
                    (PatKind::Var(_, id), ExprKind::Var(_, VarRef::Local(j)), ExprKind::Lam(..)) if id == j => {
                        cur = strip(rhs).clone();
                    }
                    _ => return self.err("a loop body of unexpected shape (internal)"),
                },
                _ => return self.err("a loop body of unexpected shape (internal)"),
            }
        }
        Ok((ps, cur))
    }

    /// Bindings of pattern `p` to the atom `v`.
    fn bind_pat(&mut self, binds: &mut Vec<Bind>, p: &Pat, v: E) -> R<()> {
        match &p.kind {
            PatKind::Var(n, id) => binds.push(Bind { id: *id, name: n.clone(), ty: p.ty.clone(), rhs: v }),
            PatKind::Wild | PatKind::Unit => {}
            PatKind::Tuple(ps) => {
                let id = self.t.fresh();
                let t = var(id, &"t".into(), &p.ty);
                binds.push(Bind { id, name: "t".into(), ty: p.ty.clone(), rhs: v });
                for (i, q) in ps.iter().enumerate() {
                    self.bind_pat(binds, q, proj(&t, i))?;
                }
            }
        }
        Ok(())
    }

    /// A fresh copy of λ `lamf`'s `n` parameters and its body as a let-series.
    fn fresh_lam(&mut self, lamf: &E, n: usize) -> R<(Vec<Rc<Pat>>, Vec<Bind>, E)> {
        let l = self.t.refresh(lamf);
        let (ps, body) = self.peel(&l, n)?;
        let (binds, res) = self.body_series(&body)?;
        Ok((ps, binds, res))
    }

    /// A fresh copy of a λ body as a let-series (A-normalised again if needed), its `<+>`s
    /// expanded ([`Ad::expand_oplus`]).
    fn body_series(&mut self, body: &E) -> R<(Vec<Bind>, E)> {
        // A copy of a frozen binding (a change's value, `expand_oplus`) stays frozen: constant at
        // the point in every copy of the body (`rev_if`'s branch, a loop's reverse body).
        let (b, ren) = {
            let mut fr = self.t.fresher();
            refresh_renaming(body, &mut fr)
        };
        for (old, new) in ren {
            if self.frozen.contains(&old) {
                self.frozen.insert(new);
            }
        }
        let (binds, res) = match series(&b) {
            Some(s) => s,
            None => {
                let a = {
                    let mut fr = self.t.fresher();
                    anf::anormal::anormalise(&b, &mut fr)
                };
                match series(&a) {
                    Some(s) => s,
                    None => return self.err("a loop body that is not a let-series (internal)"),
                }
            }
        };
        Ok((self.expand_oplus(binds), res))
    }

    /// ILC's `<+>` at a point, rule (⊕): a change has a discrete type, so near the point
    /// `a <+> da` is the update the change selects. When the series shows which change `da` is
    /// (made by `replace`, `gchange` over `realGroup` or a user `group`, `nil`, a
    /// tuple of those, through copies), `z = a <+> da` becomes that update: `replace v ↦ v`,
    /// `gchange realGroup d ↦ a + d`, `gchange (group op inv e) d ↦ op a d`, `nil x ↦ a`, tuples
    /// componentwise, which the ordinary rules differentiate. The change's own values (v, d) are
    /// read through frozen copies: constants at the point, as in the reducer. A change the series
    /// does not show (a parameter, an `if`) is left as it is (`rule` refuses it when active).
    fn expand_oplus(&mut self, binds: Vec<Bind>) -> Vec<Bind> {
        let mut out = Vec::with_capacity(binds.len());
        for b in binds {
            let rhs = strip(&b.rhs).clone();
            if change_like(&b.ty) || matches!(rhs.kind, ExprKind::Lam(..)) {
                self.changes.insert(b.id, rhs.clone());
            }
            if let ExprKind::Bin(BinOp::Oplus, a, da) = &rhs.kind {
                let mut new = Vec::new();
                if !a.ty.is_discrete() {
                    if let Some(u) = self.update(&mut new, a, da) {
                        out.extend(new);
                        out.push(Bind { rhs: u, ..b });
                        continue;
                    }
                }
            }
            out.push(b);
        }
        out
    }

    /// The change bound to the atom `e` (through copies).
    fn change_of(&self, e: &E) -> Option<E> {
        let mut cur = self.changes.get(&local(e)?)?.clone();
        while let Some(next) = local(&cur).and_then(|id| self.changes.get(&id)) {
            cur = next.clone();
        }
        Some(cur)
    }

    /// The update `a <+> da` selects, as bindings on `out` and a right-hand side.
    fn update(&mut self, out: &mut Vec<Bind>, a: &E, da: &E) -> Option<E> {
        let d = self.change_of(da)?;
        let (h, args) = anf::anormal::spine(&d);
        match (&strip(h).kind, args.as_slice()) {
            (ExprKind::Var(_, VarRef::Builtin(Builtin::Replace)), [v]) => Some(self.frozen_copy(out, v)),
            (ExprKind::Var(_, VarRef::Builtin(Builtin::Nil)), [_]) => Some(a.clone()),
            (ExprKind::Var(_, VarRef::Builtin(Builtin::GChange)), [g, d]) => {
                let (g, d) = ((*g).clone(), (*d).clone());
                self.group_update(out, a, &g, &d)
            }
            _ => match (&d.kind, &a.ty) {
                // A change chosen by `if`: each branch's update under the same `if` (the reducer's
                // (⊕) reads the change at the point, the branch taken; `if` differentiates it).
                (ExprKind::If(c, l1, l2), _) => {
                    let mut branch = |l: &E| -> Option<E> {
                        // A copy of the branch (its binders fresh: the change's own `if` stays).
                        let (binds, res) = series(&self.t.refresh(l))?;
                        let mut bs = self.expand_oplus(binds);
                        let u = self.update(&mut bs, a, &res)?;
                        let z = self.t.bind(&mut bs, "u", u);
                        Some(lets(bs, z))
                    };
                    let (b1, b2) = (branch(l1)?, branch(l2)?);
                    Some(if_(c, b1, b2))
                }
                (ExprKind::Tuple(cs), Type::Tuple(ts)) if cs.len() == ts.len() => {
                    let mut parts = Vec::new();
                    for (i, c) in cs.iter().enumerate() {
                        let ai = self.t.bind(out, "a", proj(a, i));
                        let u = self.update(out, &ai, c)?;
                        parts.push(self.t.bind(out, "u", u));
                    }
                    Some(tuple(parts))
                }
                // A change read from an array (`ds.[i]`, or a loop's element of `ds`).
                (ExprKind::Index(ds, i), _) => self.update_at(out, a, ds, i),
                _ => None,
            },
        }
    }

    /// `a <+> ds.[i]` when the program shows how `ds` is made (the read itself, with its bounds
    /// check, stays where it was): the reducer's (⊕) reads element i at the point and updates by
    /// the change it is; compiled, element i of an array literal of changes is chosen by `if` on
    /// `i == k` (each branch the update its change selects, `if` differentiating the branch
    /// taken), and element i of `build n f` / `map f xs` is `f i` / `f xs.[i]`, recomputed (it
    /// cannot fail: it was computed when `ds` was made) and its update taken.
    fn update_at(&mut self, out: &mut Vec<Bind>, a: &E, ds: &E, i: &E) -> Option<E> {
        self.update_at_path(out, a, ds, std::slice::from_ref(i))
    }

    /// `a <+> ds.[i₁].[i₂]…` (`idx`) when the program shows how `ds` and its rows are made: element
    /// `i₁` of `ds`'s producer as [`Transform::update_at`] finds it, then element `i₂` of that, and
    /// so on (the reducer's (⊕) reads the change at the point). A row read out of an array of
    /// arrays of changes (`r = dss.[i]`, then `r.[j]`) is element `[i, j]` of `dss`.
    fn update_at_path(&mut self, out: &mut Vec<Bind>, a: &E, ds: &E, idx: &[E]) -> Option<E> {
        let (i, more) = idx.split_first()?;
        let prod = self.producer(ds)?;
        if let ExprKind::Index(outer, i0) = &prod.kind {
            let mut path = vec![i0.clone()];
            path.extend(idx.iter().cloned());
            return self.update_at_path(out, a, outer, &path);
        }
        if let ExprKind::Array(es) = &prod.kind {
            let (last, rest) = es.split_last()?;
            let mut e = self.change_branch(a, last, more)?;
            for (k, ek) in rest.iter().enumerate().rev() {
                let bk = self.change_branch(a, ek, more)?;
                let mut bs = Vec::new();
                let c = self.t.bind(&mut bs, "c", bin(BinOp::Eq, i, &int(k as i64), Type::Bool));
                let z = self.t.bind(&mut bs, "u", if_(&c, bk, e));
                e = lets(bs, z);
            }
            let (bs, z) = series(&e)?;
            out.extend(bs);
            return Some(z);
        }
        let (h, args) = anf::anormal::spine(&prod);
        let (f, x) = match (&strip(h).kind, args.as_slice()) {
            (ExprKind::Var(_, VarRef::Builtin(Builtin::Build)), [_, f]) => ((*f).clone(), i.clone()),
            (ExprKind::Var(_, VarRef::Builtin(Builtin::Map)), [f, xs]) if local(xs).is_some() || is_global(xs) => {
                ((*f).clone(), self.t.bind(out, "x", index(xs, i)))
            }
            _ => return None,
        };
        // A let-bound λ (the series' expansion runs before `forward` records `lams`).
        let l = match &strip(&f).kind {
            ExprKind::Var(_, VarRef::Local(id)) => {
                self.changes.get(id).filter(|l| matches!(l.kind, ExprKind::Lam(..)))?.clone()
            }
            _ => self.lam_of(&f).ok()?,
        };
        let (ps, bb, res) = self.fresh_lam(&l, 1).ok()?;
        self.bind_pat(out, &ps[0], x).ok()?;
        let mut bs = self.expand_oplus(bb);
        let u = match more {
            [] => self.update(&mut bs, a, &res)?,
            _ => self.update_at_path(&mut bs, a, &res, more)?,
        };
        out.extend(bs);
        Some(u)
    }

    /// `lets(…, u)`: the update of `a` by the change `e` (an atom or a term), as a series; with
    /// indices `more`, by the change at `more` in the array of changes `e`.
    fn change_branch(&mut self, a: &E, e: &E, more: &[E]) -> Option<E> {
        let e = self.t.refresh(e);
        let (binds, res) = match series(&e) {
            Some(s) => s,
            None => {
                let mut fr = self.t.fresher();
                series(&anf::anormal::anormalise(&e, &mut fr))?
            }
        };
        let mut bs = self.expand_oplus(binds);
        let u = match more {
            [] => self.update(&mut bs, a, &res)?,
            _ => self.update_at_path(&mut bs, a, &res, more)?,
        };
        let z = self.t.bind(&mut bs, "u", u);
        Some(lets(bs, z))
    }

    /// The term that makes the array of changes `ds` (through copies; a definition's body).
    fn producer(&mut self, ds: &E) -> Option<E> {
        let mut cur = strip(ds).clone();
        for _ in 0..64 {
            cur = match &cur.kind {
                ExprKind::Var(_, VarRef::Local(id)) => strip(self.changes.get(id)?).clone(),
                ExprKind::Var(_, VarRef::Global(d)) => {
                    let body = self.t.bodies.get(d.0 as usize)?.clone();
                    strip(&self.t.refresh(&body)).clone()
                }
                _ => return Some(cur),
            };
        }
        None
    }

    /// A loop body's series with its parameters bound to the loop's elements: a `<+>` whose
    /// change is an element of the array looped over is expanded now that the series shows it.
    fn with_elements(&mut self, binds: Vec<Bind>) -> Vec<Bind> {
        if binds.iter().any(|b| matches!(strip(&b.rhs).kind, ExprKind::Bin(BinOp::Oplus, ..))) {
            self.expand_oplus(binds)
        } else {
            binds
        }
    }

    /// `a <+> gchange g d` (a base type: `gchange` takes no tuples): the group's operation on
    /// `a` and the frozen `d`.
    fn group_update(&mut self, out: &mut Vec<Bind>, a: &E, g: &E, d: &E) -> Option<E> {
        let grp = self.change_of(g)?;
        let (h, args) = anf::anormal::spine(&grp);
        match (&strip(h).kind, args.as_slice()) {
            (ExprKind::Var(_, VarRef::Builtin(Builtin::RealGroup)), []) => {
                let d = self.frozen_copy(out, d);
                Some(rbin(BinOp::Add, a, &d))
            }
            (ExprKind::Var(_, VarRef::Builtin(Builtin::MkGroup)), [op, _, _]) => {
                // `op a d`, inlined (the series the rules read has no calls of λs).
                let op = match &strip(op).kind {
                    ExprKind::Lam(..) => strip(op).clone(),
                    ExprKind::Var(_, VarRef::Global(_)) => self.t.resolve(op).ok()?,
                    _ => self.changes.get(&local(op)?).filter(|l| matches!(l.kind, ExprKind::Lam(..)))?.clone(),
                };
                let d = self.frozen_copy(out, d);
                // The group is part of the change: what its operation captures is frozen too.
                let mut fv: Vec<E> = Vec::new();
                frontend::lin::visit_free_vars(&op, &mut |v| {
                    if local(v).is_some() && !fv.iter().any(|w| local(w) == local(v)) {
                        fv.push(v.clone());
                    }
                });
                let mut ren = FxHashMap::default();
                for v in fv {
                    let c = self.frozen_copy(out, &v);
                    ren.insert(local(&v)?, local(&c)?);
                }
                let op = rename(&op, &ren);
                let (ps, bb, res) = self.fresh_lam(&op, 2).ok()?;
                self.bind_pat(out, &ps[0], a.clone()).ok()?;
                self.bind_pat(out, &ps[1], d).ok()?;
                out.extend(bb);
                Some(res)
            }
            _ => None,
        }
    }

    /// A copy of a change's value that is never active (a literal as it is).
    fn frozen_copy(&mut self, out: &mut Vec<Bind>, v: &E) -> E {
        if local(v).is_none() {
            return v.clone();
        }
        let c = self.t.bind(out, "c", v.clone());
        self.frozen.insert(local(&c).unwrap());
        c
    }

    /// One reverse iteration as `λs. …` over the state `(k, carried…, extras…)`: `body` emits the
    /// iteration for index `i` given the extras and returns the new extras. The carried
    /// variables' adjoints are decomposed from the state and materialised back into it.
    fn loop_lambda(
        &mut self,
        n: &E,
        down: bool,
        carried: &[LocalId],
        extras_ty: &[Type],
        body: &mut dyn FnMut(&mut Self, &mut Vec<Bind>, &E, Vec<E>) -> R<Vec<E>>,
    ) -> R<E> {
        let mut tys = vec![Type::Int];
        tys.extend(carried.iter().map(|c| self.tys[c].1.clone()));
        tys.extend(extras_ty.iter().cloned());
        let sty = Type::tuple(tys);
        let sid = self.t.fresh();
        let s = var(sid, &"s".into(), &sty);
        let mut bo = Vec::new();
        let k = self.emit(&mut bo, "k", proj(&s, 0));
        let saved = std::mem::take(&mut self.adj);
        for (j, c) in carried.iter().enumerate() {
            let v = self.emit(&mut bo, "d", proj(&s, 1 + j));
            if let Some(a) = self.decompose(&mut bo, &v, true)? {
                self.adj.insert(*c, a);
            }
        }
        let extras: Vec<E> =
            (0..extras_ty.len()).map(|j| self.emit(&mut bo, "e", proj(&s, 1 + carried.len() + j))).collect();
        let i = if down {
            let m = self.emit(&mut bo, "m", bin(BinOp::Sub, n, &int(1), Type::Int));
            self.emit(&mut bo, "i", bin(BinOp::Sub, &m, &k, Type::Int))
        } else {
            k.clone()
        };
        let new_extras = body(self, &mut bo, &i, extras)?;
        let mut res = vec![bin(BinOp::Add, &k, &int(1), Type::Int)];
        for c in carried {
            let a = self.adj.remove(c);
            let pv = self.var_of(*c);
            let ty = pv.ty.clone();
            res.push(self.materialize(&mut bo, a, &ty, &pv)?);
        }
        res.extend(new_extras);
        self.adj = saved;
        let res = tuple(res);
        let bo = dce(bo, &res);
        Ok(lam(sid, &"s".into(), &sty, lets(bo, res)))
    }

    /// Runs a reverse loop: the state is built from the carried adjoints (and `extras`), the
    /// adjoints after the loop are decomposed back; the final extras' atoms.
    fn run_loop(&mut self, out: &mut Vec<Bind>, n: &E, body: E, carried: &[LocalId], extras: Vec<E>) -> R<Vec<E>> {
        let mut init = vec![int(0)];
        for c in carried {
            let a = self.adj.remove(c);
            let pv = self.var_of(*c);
            let ty = pv.ty.clone();
            let v = self.materialize(out, a, &ty, &pv)?;
            init.push(v);
        }
        let ne = extras.len();
        init.extend(extras);
        let init = tuple(init);
        let sty = init.ty.clone();
        let it = if allocates(&body) { Builtin::Iterate } else { Builtin::RevIterate };
        let fin = self.emit(out, "r", call(it, &[n.clone(), body, init], sty));
        for (j, c) in carried.iter().enumerate() {
            let v = self.emit(out, "d", proj(&fin, 1 + j));
            if let Some(a) = self.decompose(out, &v, true)? {
                self.adj.insert(*c, a);
            }
        }
        Ok((0..ne).map(|j| self.emit(out, "d", proj(&fin, 1 + carried.len() + j))).collect())
    }

    /// Seeds the result of a recomputed series with `seed`, then runs its reverse.
    fn seed_and_reverse(&mut self, bo: &mut Vec<Bind>, binds: &[Bind], res: &E, seed: Option<Adj>) -> R<()> {
        if let Some(a) = seed {
            self.add(bo, res, a)?;
        }
        self.reverse(bo, binds)
    }

    /// The forward phase of a top-level producer `z = build n f` / `map f xs` / `zipWith f xs ys`
    /// whose only use is `s = sum z`. Its adjoint will be the broadcast of `s`'s (the transpose of
    /// Σ), the same at every element, so by linearity (Lemma 4.4) the reverse of each element can
    /// run right after its primal with cotangent 1, into fresh accumulators of the captured
    /// variables; z's reverse then scales them (`rule`). One loop computes the elements, their sum
    /// (left to right from 0.0, as `sum` adds) and those accumulators: no array, no tape, no second
    /// pass over the body. Only when every captured variable is a Real, an `Array Real` or an
    /// `Array (Array Real)` that is not a row (an accumulator of an array captured at the top
    /// level costs its size once); `false` leaves the binding to the general path.
    fn fused_forward(&mut self, out: &mut Vec<Bind>, b: &Bind, rhs: &E) -> R<bool> {
        let (h, args) = anf::anormal::spine(rhs);
        let bi = match (&strip(h).kind, args.len()) {
            (ExprKind::Var(_, VarRef::Builtin(bi @ (Builtin::Build | Builtin::Map))), 2) => *bi,
            (ExprKind::Var(_, VarRef::Builtin(Builtin::ZipWith)), 3) => Builtin::ZipWith,
            _ => return Ok(false),
        };
        let args: Vec<E> = args.into_iter().cloned().collect();
        let (f, arrays): (&E, Vec<E>) = match bi {
            Builtin::Map => (&args[0], vec![args[1].clone()]),
            Builtin::ZipWith => (&args[0], vec![args[1].clone(), args[2].clone()]),
            _ => (&args[1], vec![]),
        };
        let Ok(lamf) = self.lam_of(f) else { return Ok(false) };
        let mut refs: Vec<&E> = vec![&lamf];
        refs.extend(arrays.iter());
        let carried = self.captures(&refs);
        let plain =
            |t: &Type| *t == Type::Real || *t == Type::array(Type::Real) || *t == Type::array(Type::array(Type::Real));
        if carried.iter().any(|c| !plain(&self.tys[c].1) || self.paths.contains_key(c)) {
            return Ok(false);
        }
        // What the producer checks before it calls f, checked first: `build`'s length, the
        // lengths `zipWith` zips (its own error, at its own site, by running it when it fails).
        let fails = match bi {
            Builtin::Build => Some(bin(BinOp::Lt, &args[0], &int(0), Type::Bool)),
            Builtin::ZipWith => {
                let n1 = self.emit(out, "n", call(Builtin::Len, &[arrays[0].clone()], Type::Int));
                let n2 = self.emit(out, "n", call(Builtin::Len, &[arrays[1].clone()], Type::Int));
                Some(bin(BinOp::Ne, &n1, &n2, Type::Bool))
            }
            _ => None,
        };
        if let Some(c) = fails {
            self.fail_first(out, c, b);
        }
        let n = match bi {
            Builtin::Build => args[0].clone(),
            _ => self.emit(out, "n", call(Builtin::Len, &[arrays[0].clone()], Type::Int)),
        };
        let stash: Vec<(LocalId, Adj)> = carried.iter().filter_map(|c| self.adj.remove(c).map(|a| (*c, a))).collect();
        let body = self.loop_lambda(&n, false, &carried, &[Type::Real], &mut |ad, bo, i, extras| {
            let (binds, res) = ad.elementwise_binds(&lamf, bi, &arrays, i)?;
            ad.forward(bo, &binds, &res)?;
            let s = ad.emit(bo, "s", rbin(BinOp::Add, &extras[0], &res));
            ad.seed_and_reverse(bo, &binds, &res, Some(Adj::R(real(1.0))))?;
            Ok(vec![s])
        })?;
        let sum = self.run_loop(out, &n, body, &carried, vec![real(0.0)])?;
        let units = self.take_units(out, &carried, stash)?;
        self.units.insert(b.id, units);
        self.summed.insert(self.sums[&b.id], sum[0].clone());
        Ok(true)
    }

    /// The forward phase of a top-level `z = fold f z0 xs` (z a Real) whose body adds to the
    /// accumulator: `f acc x` is a chain `acc + e1 + e2 …` (or `- e`, or `e + acc`) in which the
    /// accumulator is used once and nothing else depends on it. Then ∂z/∂acc = 1 at every step,
    /// so each element's contribution has z's cotangent, the same at every element, and as for a
    /// fused sum (Lemma 4.4) its reverse runs right after its primal with cotangent 1, into fresh
    /// accumulators of the captured variables that z's reverse scales (`rule`). One loop runs the
    /// fold as written (its additions in its own order, so the value is the fold's exactly) and
    /// the reverse: no second pass recomputing the body. Only when every captured variable is a
    /// Real or an `Array Real`; `false` leaves the binding to the general path.
    fn fused_fold(&mut self, out: &mut Vec<Bind>, b: &Bind, rhs: &E) -> R<bool> {
        let (_, args) = anf::anormal::spine(rhs);
        let (f, z0, xs) = (args[0].clone(), args[1].clone(), args[2].clone());
        let Ok(lamf) = self.lam_of(&f) else { return Ok(false) };
        let carried = self.captures(&[&lamf, &xs]);
        let plain = |t: &Type| *t == Type::Real || *t == Type::array(Type::Real);
        if carried.iter().any(|c| !plain(&self.tys[c].1) || self.paths.contains_key(c)) {
            return Ok(false);
        }
        let (ps, bb, res) = self.fresh_lam(&lamf, 2)?;
        if !additive(&ps[0], &bb, &res) {
            return Ok(false);
        }
        let n = self.len_of(out, &xs);
        let stash: Vec<(LocalId, Adj)> = carried.iter().filter_map(|c| self.adj.remove(c).map(|a| (*c, a))).collect();
        let body = self.loop_lambda(&n, false, &carried, &[Type::Real], &mut |ad, bo, i, extras| {
            let (ps, bb, res) = ad.fresh_lam(&lamf, 2)?;
            let mut binds = Vec::new();
            // The accumulator is not active here: its adjoint (1 at every step) is z's.
            ad.bind_pat(&mut binds, &ps[0], extras[0].clone())?;
            let x = ad.element(&mut binds, &xs, i)?;
            ad.bind_pat(&mut binds, &ps[1], x)?;
            binds.extend(bb);
            let binds = ad.with_elements(binds);
            ad.forward(bo, &binds, &res)?;
            ad.seed_and_reverse(bo, &binds, &res, Some(Adj::R(real(1.0))))?;
            Ok(vec![res])
        })?;
        let acc = self.run_loop(out, &n, body, &carried, vec![z0.clone()])?;
        let mut units = self.take_units(out, &carried, stash)?;
        // ∂z/∂z0 = 1 too.
        if let Some(z) = local(&z0).filter(|z| self.active.contains(z)) {
            units.push((z, real(1.0)));
        }
        self.units.insert(b.id, units);
        out.push(Bind { id: b.id, name: b.name.clone(), ty: b.ty.clone(), rhs: acc[0].clone() });
        // `xs = build m g` (g total) read only here: the loop computed its elements as `g i`, so
        // the array is never made; what is left of it is its own error for a negative m, where
        // it was.
        let xs_id = local(&xs);
        if let (Some(x), true) = (xs_id.filter(|x| self.builds.contains_key(x)), self.folds[&b.id]) {
            if let Some(k) = out.iter().position(|o| o.id == x) {
                let made = out.remove(k);
                let mut check = Vec::new();
                self.fail_first(&mut check, bin(BinOp::Lt, &self.lens[&x].clone(), &int(0), Type::Bool), &made);
                out.splice(k..k, check);
            }
        }
        Ok(true)
    }

    /// After a fused loop: each captured variable's adjoint for the cotangent 1 (its unit
    /// accumulator), taken out of the adjoints, and the adjoints stashed before the loop put back.
    fn take_units(
        &mut self,
        out: &mut Vec<Bind>,
        carried: &[LocalId],
        stash: Vec<(LocalId, Adj)>,
    ) -> R<Vec<(LocalId, E)>> {
        let mut units = Vec::new();
        for c in carried {
            let a = self.adj.remove(c);
            let pv = self.var_of(*c);
            let ty = pv.ty.clone();
            units.push((*c, self.materialize(out, a, &ty, &pv)?));
        }
        self.adj.extend(stash);
        Ok(units)
    }

    /// The body of `build n f` / `map f xs` / `zipWith f xs ys` (`bi`) at index `i`: a fresh copy
    /// of f's body as a let-series, its parameters bound to `i` or to the arrays' elements.
    fn elementwise_binds(&mut self, lamf: &E, bi: Builtin, arrays: &[E], i: &E) -> R<(Vec<Bind>, E)> {
        let arity = if bi == Builtin::ZipWith { 2 } else { 1 };
        let (ps, bb, res) = self.fresh_lam(lamf, arity)?;
        let mut binds = Vec::new();
        if bi == Builtin::Build {
            self.bind_pat(&mut binds, &ps[0], i.clone())?;
        } else {
            for (p, a) in ps.iter().zip(arrays) {
                let x = self.element(&mut binds, a, i)?;
                self.bind_pat(&mut binds, p, x)?;
            }
        }
        binds.extend(bb);
        Ok((self.with_elements(binds), res))
    }

    /// Element `i` of the array atom `xs` for a loop body, as bindings pushed on `binds`: `f i`
    /// (a fresh copy of f's body) when `xs = build n f` with f total (see `builds`), else the read
    /// `xs.[i]`. The atom of the element.
    fn element(&mut self, binds: &mut Vec<Bind>, xs: &E, i: &E) -> R<E> {
        if let Some(l) = local(xs).and_then(|id| self.builds.get(&id).cloned()) {
            let (ps, bb, res) = self.fresh_lam(&l, 1)?;
            self.bind_pat(binds, &ps[0], i.clone())?;
            binds.extend(bb);
            return Ok(res);
        }
        let id = self.t.fresh();
        let rhs = index(xs, i);
        binds.push(Bind { id, name: "x".into(), ty: rhs.ty.clone(), rhs });
        Ok(var(id, &"x".into(), &binds.last().unwrap().ty))
    }

    /// `if c then (let _ = rhs in ()) else ()` for the binding `b = rhs`: when `c` says the
    /// builtin `rhs` fails before it calls its function (a negative size, unequal lengths), it is
    /// run, so that its own error, at its own site, comes before anything the transform put
    /// before it (a tape, a fused loop).
    fn fail_first(&mut self, out: &mut Vec<Bind>, c: E, b: &Bind) {
        let c = self.emit(out, "c", c);
        let unit = mk(ExprKind::Lit(Lit::Unit), Type::Unit);
        let id = self.t.fresh();
        let fail = lets(vec![Bind { id, name: "z".into(), ty: b.ty.clone(), rhs: b.rhs.clone() }], unit.clone());
        self.emit(out, "chk", if_(&c, fail, unit));
    }

    /// `map f xs`, `zipWith f xs ys`, `build n f` (its result `z`): elementwise; the reverse loop
    /// recomputes each element's primal and runs the body's reverse with the element of the
    /// result's adjoint. An element that is a primitive whose partial reads its result
    /// (`rules::reads_result`: `map tanh xs`) is read from `z`, not computed again.
    fn rev_elementwise(&mut self, out: &mut Vec<Bind>, b: Builtin, args: &[E], z: &E, g: Adj) -> R<()> {
        // The result's adjoint: an accumulator read at i, or a broadcast scalar read as is.
        let (gz, gb) = match g {
            Adj::A(gz) => (Some(gz), None),
            Adj::B(c) => (None, Some(c)),
            _ => return self.err("a gradient through an array of tuples"),
        };
        let (f, arrays): (&E, Vec<E>) = match b {
            Builtin::Map => (&args[0], vec![args[1].clone()]),
            Builtin::ZipWith => (&args[0], vec![args[1].clone(), args[2].clone()]),
            _ => (&args[1], vec![]),
        };
        let lamf = self.lam_of(f)?;
        let n = match b {
            Builtin::Build => args[0].clone(),
            _ => self.emit(out, "n", call(Builtin::Len, &[arrays[0].clone()], Type::Int)),
        };
        let mut refs: Vec<&E> = vec![&lamf];
        refs.extend(arrays.iter());
        let carried = self.captures(&refs);
        let lam_rev = self.loop_lambda(&n, false, &carried, &[], &mut |ad, bo, i, _| {
            let (binds, res) = ad.elementwise_binds(&lamf, b, &arrays, i)?;
            let start = bo.len();
            ad.forward(bo, &binds, &res)?;
            if let Some(r) = local(&res) {
                if let Some(rb) = bo[start..].iter_mut().find(|rb| rb.id == r && result_prim(&rb.rhs)) {
                    rb.rhs = index(z, i);
                }
            }
            let gi = match (&gz, &gb) {
                (Some(gz), _) => {
                    let gi = ad.emit(bo, "g", index(gz, i));
                    // Row i of a nested accumulator is read once: it moves to the element.
                    ad.decompose(bo, &gi, true)?
                }
                (None, c) => Some(Adj::R(c.clone().unwrap_or_else(|| real(0.0)))),
            };
            ad.seed_and_reverse(bo, &binds, &res, gi)?;
            Ok(vec![])
        })?;
        self.run_loop(out, &n, lam_rev, &carried, vec![])?;
        Ok(())
    }

    /// Forward phase of an active `while p f x0` (rule `while` of docs/pullback-semantics.md: the
    /// iteration count is discrete, so near the point the loop is `iterate n f x0`): a counting
    /// run `while (λs. p s.0) (λs. (f s.0, s.1 + 1)) (x0, 0)` gives the value and `n`; the loop
    /// is then differentiated as `iterate n f x0`. When the reverse reads the carry, the taping
    /// `iterate` runs the body a second time (forward cost ≤ 2× the loop); otherwise the counting
    /// run's value is the primal and nothing is run twice.
    fn while_forward(&mut self, out: &mut Vec<Bind>, b: &Bind, args: &[E]) -> R<()> {
        let (p, f, x0) = (self.t.refresh(&args[0]), &args[1], &args[2]);
        let f1 = self.t.refresh(f);
        let ty = b.ty.clone();
        let sty = Type::tuple(vec![ty.clone(), Type::Int]);
        // λs. p s.0
        let sid = self.t.fresh();
        let s = var(sid, &"s".into(), &sty);
        let mut pb = Vec::new();
        let a = self.emit(&mut pb, "a", proj(&s, 0));
        let c = self.emit(&mut pb, "c", mk(ExprKind::App(p, a), Type::Bool));
        let pl = lam(sid, &"s".into(), &sty, lets(pb, c));
        // λs. (f s.0, s.1 + 1)
        let sid = self.t.fresh();
        let s = var(sid, &"s".into(), &sty);
        let mut fb = Vec::new();
        let a = self.emit(&mut fb, "a", proj(&s, 0));
        let k = self.emit(&mut fb, "k", proj(&s, 1));
        let y = self.emit(&mut fb, "y", mk(ExprKind::App(f1, a), ty.clone()));
        let k1 = self.emit(&mut fb, "k", bin(BinOp::Add, &k, &int(1), Type::Int));
        let fl = lam(sid, &"s".into(), &sty, lets(fb, tuple(vec![y, k1])));
        let r = self.emit(out, "w", call(Builtin::While, &[pl, fl, tuple(vec![x0.clone(), int(0)])], sty));
        let n = self.emit(out, "n", proj(&r, 1));
        let it = Bind { rhs: call(Builtin::Iterate, &[n.clone(), f.clone(), x0.clone()], ty), ..b.clone() };
        self.loop_forward(out, &it, Builtin::Iterate, &[n, f.clone(), x0.clone()], Some(proj(&r, 0)))
    }

    /// Forward phase of an active `fold f z xs` / `iterate n f z`: builds its reverse loop now,
    /// and tapes the carry when that reverse reads it (otherwise the primal is `b` itself, or
    /// `untaped` when given).
    fn loop_forward(&mut self, out: &mut Vec<Bind>, b: &Bind, bi: Builtin, args: &[E], untaped: Option<E>) -> R<()> {
        if bi == Builtin::Iterate && untaped.is_none() {
            // `iterate`'s negative count before the tape of that many carries is made.
            self.fail_first(out, bin(BinOp::Lt, &args[0], &int(0), Type::Bool), b);
        }
        let mut skip = Vec::new();
        loop {
            match self.loop_forward_with(out, b, bi, args, untaped.clone(), false, &skip) {
                Err(e) if e.what == READS_CARRIED_ARRAY => {
                    return self.loop_forward_with(out, b, bi, args, untaped, true, &[])
                }
                // The reverse reads fewer of the carry's scalars than the tape would hold: tape
                // only those (a second build of the reverse body, with the rest as holes).
                Err(e) if e.what == TAPES_UNREAD && skip.is_empty() => {
                    skip = std::mem::take(&mut self.unread);
                }
                r => return r,
            }
        }
    }

    /// Which components of a tuple carry are active: those of the initial value, and those the
    /// body makes active from active components or captures, to a fixpoint (the carry's
    /// activity is the least solution of the loop equation; rule-5 adjoints of the others are
    /// zero, so the reverse computes nothing for them).
    fn carry_activity(&mut self, lamf: &E, arity: usize, z0: &E, xs: Option<&E>, n: usize) -> R<Vec<bool>> {
        let init: Vec<bool> = match local(z0).and_then(|z| self.tuples.get(&z)) {
            Some(cs) if cs.len() == n => cs.iter().map(|c| self.is_active(c)).collect(),
            _ => vec![self.is_active(z0); n],
        };
        let mut mask = init.clone();
        loop {
            let (ps, bb, res) = self.fresh_lam(lamf, arity)?;
            let Type::Tuple(ts) = &ps[0].ty else { return Ok(mask) };
            let mut active = self.active.clone();
            let parts: Vec<E> = ts
                .iter()
                .zip(&mask)
                .map(|(t, on)| {
                    let id = self.t.fresh();
                    if *on {
                        active.insert(id);
                    }
                    var(id, &"c".into(), t)
                })
                .collect();
            let aid = self.t.fresh();
            if mask.iter().any(|m| *m) {
                active.insert(aid);
            }
            let mut binds = Vec::new();
            self.bind_pat(&mut binds, &ps[0], var(aid, &"a".into(), &ps[0].ty))?;
            if let Some(xs) = xs {
                if arity > 1 {
                    let ex = index(xs, &int(0));
                    self.bind_pat(&mut binds, &ps[1], ex)?;
                }
            }
            binds.extend(bb);
            forward_projections(&mut binds, aid, &parts);
            let mut tuples: FxHashMap<LocalId, Vec<E>> = FxHashMap::default();
            for b in &binds {
                let rhs = strip(&b.rhs);
                let mut fv = FxHashSet::default();
                free_locals(rhs, &mut fv);
                if !b.ty.is_discrete() && fv.iter().any(|v| active.contains(v)) {
                    active.insert(b.id);
                }
                if let ExprKind::Tuple(cs) = &rhs.kind {
                    tuples.insert(b.id, cs.clone());
                }
            }
            let is_act = |e: &E| local(e).is_some_and(|id| active.contains(&id));
            let outm: Vec<bool> = match local(&res).and_then(|r| tuples.get(&r)) {
                Some(cs) if cs.len() == n => cs.iter().map(is_act).collect(),
                _ => vec![is_act(&res); n],
            };
            let next: Vec<bool> = (0..n).map(|k| init[k] || outm[k]).collect();
            if next == mask {
                return Ok(mask);
            }
            mask = next;
        }
    }

    /// [`Ad::loop_forward`]; `tape_all`: the tape holds the whole carry, arrays included (the
    /// reverse reads an array the loop carries). Such a tape holds pointers to arrays the loop
    /// makes, so the taping loop is not compacted (`iterate'`): its arena keeps every carry the
    /// reverse reads, which is the tape's memory anyway.
    fn loop_forward_with(
        &mut self,
        out: &mut Vec<Bind>,
        b: &Bind,
        bi: Builtin,
        args: &[E],
        untaped: Option<E>,
        tape_all: bool,
        skip: &[bool],
    ) -> R<()> {
        let fold = bi == Builtin::Fold;
        let (f, z0) = if fold { (&args[0], &args[1]) } else { (&args[1], &args[2]) };
        let xs = if fold { Some(args[2].clone()) } else { None };
        let lamf = self.lam_of(f)?;
        let arity = if fold { 2 } else { 1 };
        let n = match &xs {
            Some(xs) => self.len_of(out, xs),
            None => args[0].clone(),
        };
        let bty = b.ty.clone();
        // The tape holds the carry's scalar skeleton: the components that hold no arrays (an
        // array in the carry is never taped — values in the tape are scalars, which keeps loop
        // compaction sound — and the reverse must not read one).
        // A tuple carry is split into its components (each active or not by `carry_activity`);
        // `skip` names scalar components the reverse does not read, which are not taped.
        // Counters (`counters`) are recomputed from the iteration index, not taped.
        let counter: Vec<bool> = match &bty {
            Type::Tuple(ts) if !tape_all => {
                let (ps, bb, res) = self.fresh_lam(&lamf, arity)?;
                counters(&ps[0], &bb, &res, ts.len())
            }
            _ => vec![false],
        };
        let comps: Vec<(Type, bool)> = match &bty {
            Type::Tuple(ts) if !tape_all => ts
                .iter()
                .enumerate()
                .map(|(k, t)| (t.clone(), holds_array(t) || skip.get(k) == Some(&true) || counter[k]))
                .collect(),
            t => vec![(t.clone(), holds_array(t))],
        };
        let known_init = local(z0).and_then(|z| self.tuples.get(&z)).cloned();
        let whole = tape_all || !matches!(&bty, Type::Tuple(_));
        let mask = match &bty {
            Type::Tuple(ts) if !tape_all && self.active.contains(&b.id) => {
                self.carry_activity(&lamf, arity, z0, xs.as_ref(), ts.len())?
            }
            _ => vec![true; comps.len()],
        };
        let scalars: Vec<Type> = comps.iter().filter(|(_, h)| !h).map(|(t, _)| t.clone()).collect();
        let sk_ty = if whole {
            bty.clone()
        } else if scalars.len() == 1 {
            scalars[0].clone()
        } else {
            Type::tuple(scalars.clone())
        };
        let tape_id = self.t.fresh();
        let tape_ty = Type::array(sk_ty.clone());
        let tape = var(tape_id, &"tape".into(), &tape_ty);
        let mut refs: Vec<&E> = vec![&lamf];
        if let Some(xs) = &xs {
            refs.push(xs);
        }
        let carried = self.captures(&refs);
        let acc_active = self.active.contains(&b.id);
        // Discrete values the body computes with a loop of its own (kmeans' nearest centroid: an
        // `iterate` over the centroids, read as an index) are taped when the reverse reads them,
        // one tape each, instead of being recomputed by running that loop again: a discrete value
        // has no adjoint, so the reverse needs only the value, and the inner loop is then dead in
        // the reverse body.
        let slots = {
            let (_, bb, _) = self.fresh_lam(&lamf, arity)?;
            loop_scalars(&bb)
        };
        let slot_tapes: Vec<E> = slots
            .iter()
            .map(|(_, t)| {
                let id = self.t.fresh();
                self.tys.insert(id, ("tape".into(), tape_ty_of(t)));
                var(id, &"tape".into(), &tape_ty_of(t))
            })
            .collect();
        let mut holes: Vec<LocalId> = Vec::new();
        let mut part_ids: Vec<LocalId> = Vec::new();
        let body_rev = self.loop_lambda(&n, true, &carried, std::slice::from_ref(&bty), &mut |ad, bo, i, extras| {
            let (ps, mut bb, res) = ad.fresh_lam(&lamf, arity)?;
            for ((q, _), tq) in slots.iter().zip(&slot_tapes) {
                bb[*q] = Bind { rhs: index(tq, i), ..bb[*q].clone() };
            }
            let mut binds = Vec::new();
            // The carry's primal, rebuilt from the tape (not part of the series: the reverse must
            // not consume the carry's adjoint at it).
            let mut parts: Vec<E> = Vec::new();
            let a = if whole && (tape_all || !holds_array(&bty)) {
                ad.emit(bo, "a", index(&tape, i))
            } else if whole {
                let h = ad.emit(bo, "hole", placeholder(&bty));
                holes.push(local(&h).unwrap());
                h
            } else {
                let sk = ad.emit(bo, "a", index(&tape, i));
                let mut k = 0;
                for (j, (t, h)) in comps.iter().enumerate() {
                    let c = if counter[j] {
                        // The counter at iteration i: its initial value plus i.
                        let c0 = match &known_init {
                            Some(cs) if cs.len() == comps.len() => cs[j].clone(),
                            _ => proj(z0, j),
                        };
                        let c0 = ad.emit(bo, "c", c0);
                        ad.emit(bo, "c", bin(BinOp::Add, &c0, i, Type::Int))
                    } else if *h {
                        let c = ad.emit(bo, "hole", placeholder(t));
                        holes.push(local(&c).unwrap());
                        c
                    } else {
                        let c = if scalars.len() == 1 { sk.clone() } else { ad.emit(bo, "a", proj(&sk, k)) };
                        k += 1;
                        c
                    };
                    if acc_active && !t.is_discrete() && mask[j] {
                        ad.active.insert(local(&c).unwrap());
                    }
                    parts.push(c);
                }
                ad.emit(bo, "a", tuple(parts.clone()))
            };
            let aid = local(&a).unwrap();
            if acc_active && mask.iter().any(|m| *m) {
                ad.active.insert(aid);
            }
            part_ids = parts.iter().filter_map(local).collect();
            ad.bind_pat(&mut binds, &ps[0], a.clone())?;
            if let Some(xs) = &xs {
                let x = ad.element(&mut binds, xs, i)?;
                ad.bind_pat(&mut binds, &ps[1], x)?;
            }
            binds.extend(bb);
            if !parts.is_empty() {
                forward_projections(&mut binds, aid, &parts);
            }
            let binds = ad.with_elements(binds);
            ad.forward(bo, &binds, &res)?;
            let seed = ad.decompose(bo, &extras[0], true)?;
            ad.seed_and_reverse(bo, &binds, &res, seed)?;
            let mut ga = ad.adj.remove(&aid);
            if !parts.is_empty() {
                let cs: Vec<Option<Adj>> = parts.iter().map(|c| ad.adj.remove(&local(c).unwrap())).collect();
                ga = Some(match ga {
                    None => Adj::T(cs),
                    Some(g) => ad.merge(bo, g, Adj::T(cs))?,
                });
            }
            Ok(vec![ad.materialize(bo, ga, &bty, &a)?])
        })?;
        let mut fv = FxHashSet::default();
        free_locals(&body_rev, &mut fv);
        let taped = fv.contains(&tape_id);
        let slots_read: Vec<(usize, E)> = slots
            .iter()
            .zip(&slot_tapes)
            .filter(|(_, tq)| fv.contains(&local(tq).unwrap()))
            .map(|((q, _), tq)| (*q, tq.clone()))
            .collect();
        // A hole's binding survives the reverse body's dead-code elimination only if it is read.
        if holes.iter().any(|h| fv.contains(h) || binds_local(&body_rev, *h)) {
            return self.err(READS_CARRIED_ARRAY);
        }
        // Scalar components the reverse does not read (their binding did not survive its
        // dead-code elimination) need no tape.
        if !whole && skip.is_empty() && part_ids.len() == comps.len() {
            let unread: Vec<bool> = comps
                .iter()
                .zip(&part_ids)
                .map(|((_, h), id)| !h && !binds_local(&body_rev, *id) && !fv.contains(id))
                .collect();
            if unread.iter().any(|u| *u) && comps.iter().zip(&unread).any(|((_, h), u)| !h && !u) {
                self.unread = unread;
                return self.err(TAPES_UNREAD);
            }
        }
        if taped || !slots_read.is_empty() {
            // iterate n (λ(k, tape, acc). (k + 1, tapeSet' tape k acc, f acc xs.[k])) (0, tape' n, z),
            // the body's taped values in tapes after `acc` (and without `tape` when the reverse
            // reads only those).
            let tlen = if taped { n.clone() } else { int(0) };
            let t0 = self.emit(out, "tape", call(Builtin::TapeNew, &[tlen], tape_ty.clone()));
            let mut tys = vec![Type::Int, tape_ty.clone(), bty.clone()];
            let mut init = vec![int(0), t0, z0.clone()];
            for (_, tq) in &slots_read {
                tys.push(tq.ty.clone());
                init.push(self.emit(out, "tape", call(Builtin::TapeNew, std::slice::from_ref(&n), tq.ty.clone())));
            }
            let sty = Type::tuple(tys);
            let sid = self.t.fresh();
            let s = var(sid, &"s".into(), &sty);
            let mut bo = Vec::new();
            let k = self.emit(&mut bo, "k", proj(&s, 0));
            let tp = self.emit(&mut bo, "tp", proj(&s, 1));
            let acc = self.emit(&mut bo, "acc", proj(&s, 2));
            let skel = if whole {
                acc.clone()
            } else {
                let xs: Vec<E> =
                    comps.iter().enumerate().filter(|(_, (_, h))| !h).map(|(j, _)| proj(&acc, j)).collect();
                if xs.len() == 1 {
                    xs[0].clone()
                } else {
                    tuple(xs)
                }
            };
            let tp2 = if taped {
                let skel = self.emit(&mut bo, "sk", skel);
                self.emit(&mut bo, "tp", call(Builtin::TapeSet, &[tp, k.clone(), skel], tape_ty.clone()))
            } else {
                tp
            };
            let (ps, bb, res) = self.fresh_lam(&lamf, arity)?;
            let slot_vals: Vec<E> = slots_read.iter().map(|(q, _)| var(bb[*q].id, &bb[*q].name, &bb[*q].ty)).collect();
            let mut binds = Vec::new();
            self.bind_pat(&mut binds, &ps[0], acc)?;
            if let Some(xs) = &xs {
                let x = self.element(&mut bo, xs, &k)?;
                self.bind_pat(&mut binds, &ps[1], x)?;
            }
            binds.extend(bb);
            bo.extend(binds);
            let mut next = vec![bin(BinOp::Add, &k, &int(1), Type::Int), tp2, res];
            for (j, ((_, tq), v)) in slots_read.iter().zip(&slot_vals).enumerate() {
                let cur = self.emit(&mut bo, "tp", proj(&s, 3 + j));
                next.push(self.emit(
                    &mut bo,
                    "tp",
                    call(Builtin::TapeSet, &[cur, k.clone(), v.clone()], tq.ty.clone()),
                ));
            }
            let step = lam(sid, &"s".into(), &sty, lets(bo, tuple(next)));
            let init = tuple(init);
            let it = if allocates(&step) && !tape_all { Builtin::Iterate } else { Builtin::RevIterate };
            let fin = self.emit(out, "s", call(it, &[n.clone(), step, init], sty));
            out.push(Bind { id: tape_id, name: "tape".into(), ty: tape_ty, rhs: proj(&fin, 1) });
            out.push(Bind { id: b.id, name: b.name.clone(), ty: bty.clone(), rhs: proj(&fin, 2) });
            for (j, (_, tq)) in slots_read.iter().enumerate() {
                out.push(Bind {
                    id: local(tq).unwrap(),
                    name: "tape".into(),
                    ty: tq.ty.clone(),
                    rhs: proj(&fin, 3 + j),
                });
            }
        } else {
            match untaped {
                Some(rhs) => out.push(Bind { rhs, ..b.clone() }),
                None => out.push(b.clone()),
            }
        }
        self.tys.insert(tape_id, ("tape".into(), tape_ty_of(&sk_ty)));
        self.loops.insert(b.id, LoopRev { body: body_rev, carried, n, init: z0.clone() });
        Ok(())
    }

    /// The forward phase of `z = fold f z0 xs` (z a Real, xs an `Array Real`) whose step returns
    /// one of its two operands, chosen by `max` or `min` of the carry and the element (`λm v. max
    /// m v`, `λm v. min v m`; or by `if`, see [`selection`]): the partial of the step in the element is `if c then 1 else 0` and
    /// in the carry its complement (rule 15 on `max`/`min`, `rules::partial_terms`), so walking
    /// the reverse loop back from the last iteration, the carry's adjoint is `g` until the last
    /// iteration `j` whose element was chosen, that element gets `g·1`, and every other
    /// contribution is a product with a `0` partial: `g·0`. The fold runs as written, carrying the
    /// index of the last element chosen (−1 while it is the initial value), and the reverse
    /// reads only that index ([`Ad::rev_select`]): no tape, no reverse walk. `false` leaves the
    /// binding to the general path.
    fn select_fold(&mut self, out: &mut Vec<Bind>, b: &Bind, args: &[E]) -> R<bool> {
        let (f, z0, xs) = (&args[0], &args[1], &args[2]);
        if b.ty != Type::Real || xs.ty != Type::array(Type::Real) || z0.ty != Type::Real {
            return Ok(false);
        }
        if local(xs).is_none_or(|x| self.paths.contains_key(&x)) {
            return Ok(false);
        }
        let Ok(lamf) = self.lam_of(f) else { return Ok(false) };
        let (ps, bb, res) = self.fresh_lam(&lamf, 2)?;
        let (PatKind::Var(_, m), PatKind::Var(_, v)) = (&ps[0].kind, &ps[1].kind) else { return Ok(false) };
        let (m, v) = (*m, *v);
        let Some((cond, chosen_then, products)) = selection(&bb, &res, m, v) else { return Ok(false) };
        // iterate' n (λ(k, m, j). let v = xs.[k] in let z = max m v in (k + 1, z, if c then k else j)) (0, z0, −1)
        let n = self.len_of(out, xs);
        let sty = Type::tuple(vec![Type::Int, Type::Real, Type::Int]);
        let sid = self.t.fresh();
        let s = var(sid, &"s".into(), &sty);
        let mut bo = Vec::new();
        let k = self.emit(&mut bo, "k", proj(&s, 0));
        let acc = self.emit(&mut bo, "acc", proj(&s, 1));
        let j = self.emit(&mut bo, "j", proj(&s, 2));
        let mut binds = Vec::new();
        self.bind_pat(&mut binds, &ps[0], acc)?;
        let x = self.element(&mut bo, xs, &k)?;
        self.bind_pat(&mut binds, &ps[1], x)?;
        binds.extend(bb);
        bo.extend(binds);
        let cv = match cond {
            Choice::Term(c) => self.emit(&mut bo, "c", c),
            Choice::Bound(c) => c,
        };
        let pick = if chosen_then { if_(&cv, k.clone(), j.clone()) } else { if_(&cv, j.clone(), k.clone()) };
        let j2 = self.emit(&mut bo, "j", pick);
        let next = tuple(vec![bin(BinOp::Add, &k, &int(1), Type::Int), res, j2]);
        let step = lam(sid, &"s".into(), &sty, lets(bo, next));
        let init = tuple(vec![int(0), z0.clone(), int(-1)]);
        let fin = self.emit(out, "s", call(Builtin::RevIterate, &[n.clone(), step, init], sty));
        out.push(Bind { id: b.id, name: b.name.clone(), ty: b.ty.clone(), rhs: proj(&fin, 1) });
        let j = self.emit(out, "j", proj(&fin, 2));
        self.selects.insert(b.id, SelectRev { xs: xs.clone(), z0: z0.clone(), j, n, products });
        Ok(true)
    }

    /// The reverse of a selecting fold ([`Ad::select_fold`]) for its adjoint `g`: element `k` of
    /// xs gets `g` if `k = j`, else `g·0`, and z0 gets `g` if `j = −1`, else `g·0` — what the
    /// reverse loop computes, exactly. For a finite `g`, `g·0` is a zero, which adds nothing but
    /// possibly the sign of a zero, so only element `j` is updated; an infinite or NaN `g` makes
    /// every `g·0` a NaN, and then every element is (`accAxpy'` of a one-hot array).
    fn rev_select(&mut self, out: &mut Vec<Bind>, sr: SelectRev, g: Adj) -> R<()> {
        let Adj::R(g) = g else { return self.err("a selecting fold's adjoint that is not a Real (internal)") };
        let SelectRev { xs, z0, j, n, products } = sr;
        let none = self.emit(out, "c", bin(BinOp::Lt, &j, &int(0), Type::Bool));
        // What the operand not chosen gets: `g·0`, or (an `if`) the zero carry adjoint after the
        // element chosen, and nothing for the elements.
        let g0 = if products { self.emit(out, "d", rbin(BinOp::Mul, &g, &real(0.0))) } else { real(0.0) };
        if self.is_active(&xs) && !products {
            // (j ≥ 0 only when the fold chose an element of xs: in bounds.)
            let acc = self.acc(out, &xs)?;
            let mut bf = Vec::new();
            let df =
                self.emit(&mut bf, "d", call(Builtin::AccAdd, &[acc.clone(), j.clone(), g.clone()], xs.ty.clone()));
            let d = self.emit(out, "d", if_(&none, acc, lets(bf, df)));
            self.set_acc(&xs, d);
        } else if self.is_active(&xs) {
            // g − g is 0 exactly when g is finite.
            let gg = self.emit(out, "d", rbin(BinOp::Sub, &g, &g));
            let finite = self.emit(out, "c", bin(BinOp::Eq, &gg, &real(0.0), Type::Bool));
            let some = self.emit(out, "c", bin(BinOp::Gt, &n, &int(0), Type::Bool));
            let fast = self.emit(out, "c", if_(&finite, some, finite.clone()));
            let acc = self.acc(out, &xs)?;
            let mut bf = Vec::new();
            let jj = self.emit(&mut bf, "j", if_(&none, int(0), j.clone()));
            let gj = self.emit(&mut bf, "d", if_(&none, g0.clone(), g.clone()));
            let df = self.emit(&mut bf, "d", call(Builtin::AccAdd, &[acc.clone(), jj, gj], xs.ty.clone()));
            let mut bs = Vec::new();
            let kid = self.t.fresh();
            let kv = var(kid, &"k".into(), &Type::Int);
            let mut bk = Vec::new();
            let hit = self.emit(&mut bk, "c", bin(BinOp::Eq, &kv, &j, Type::Bool));
            let one = lam(kid, &"k".into(), &Type::Int, lets(bk, if_(&hit, real(1.0), real(0.0))));
            let hot = self.emit(&mut bs, "d", call(Builtin::Build, &[n, one], xs.ty.clone()));
            let ds = self.emit(&mut bs, "d", call(Builtin::AccAxpy, &[acc, g.clone(), hot], xs.ty.clone()));
            let d = self.emit(out, "d", if_(&fast, lets(bf, df), lets(bs, ds)));
            self.set_acc(&xs, d);
        }
        let dz0 = self.emit(out, "d", if_(&none, g, g0));
        self.add(out, &z0, Adj::R(dz0))
    }

    /// Reverse of `fold`/`iterate`: the loop made by `loop_forward`, downwards from the last
    /// iteration, carrying the adjoint of the carry; it ends as the adjoint of the initial value.
    fn rev_fold(&mut self, out: &mut Vec<Bind>, z: &Bind, g: Adj) -> R<()> {
        if let Some(sr) = self.selects.remove(&z.id) {
            return self.rev_select(out, sr, g);
        }
        let Some(lr) = self.loops.remove(&z.id) else {
            return self.err("a loop whose forward phase was not recorded (internal)");
        };
        let zv = z.var();
        let gc = self.materialize(out, Some(g), &z.ty, &zv)?;
        let fin = self.run_loop(out, &lr.n, lr.body, &lr.carried, vec![gc])?;
        if let Some(a) = self.decompose(out, &fin[0], true)? {
            self.add(out, &lr.init, a)?;
        }
        Ok(())
    }

    /// `if c then L1 else L2`: the branch taken, recomputed, then its reverse; the adjoints of the
    /// variables either branch uses leave the `if` as a tuple.
    fn rev_if(&mut self, out: &mut Vec<Bind>, c: &E, l1: &E, l2: &E, z: &E, g: Adj) -> R<()> {
        let carried = self.captures(&[l1, l2]);
        let gz = self.materialize(out, Some(g), &z.ty.clone(), z)?;
        let mut inits = Vec::new();
        for id in &carried {
            let a = self.adj.remove(id);
            let pv = self.var_of(*id);
            let ty = pv.ty.clone();
            inits.push(self.materialize(out, a, &ty, &pv)?);
        }
        let mut branches = Vec::new();
        for l in [l1, l2] {
            let saved = std::mem::take(&mut self.adj);
            let mut bo = Vec::new();
            for (id, v) in carried.iter().zip(&inits) {
                if let Some(a) = self.decompose(&mut bo, v, true)? {
                    self.adj.insert(*id, a);
                }
            }
            let (binds, res) = self.body_series(l)?;
            self.forward(&mut bo, &binds, &res)?;
            let seed = self.decompose(&mut bo, &gz, true)?;
            self.seed_and_reverse(&mut bo, &binds, &res, seed)?;
            let mut outs = Vec::new();
            for id in &carried {
                let a = self.adj.remove(id);
                let pv = self.var_of(*id);
                let ty = pv.ty.clone();
                outs.push(self.materialize(&mut bo, a, &ty, &pv)?);
            }
            self.adj = saved;
            let res = tuple(outs);
            let bo = dce(bo, &res);
            branches.push(lets(bo, res));
        }
        let e2 = branches.pop().unwrap();
        let e1 = branches.pop().unwrap();
        let r = self.emit(out, "r", if_(c, e1, e2));
        for (j, id) in carried.iter().enumerate() {
            let v = self.emit(out, "d", proj(&r, j));
            if let Some(a) = self.decompose(out, &v, true)? {
                self.adj.insert(*id, a);
            }
        }
        Ok(())
    }
}

/// Might evaluating `e` allocate arena memory (arrays, closures, bags…)? A loop whose body does
/// not is compiled without compaction (`iterate'`).
fn allocates(e: &E) -> bool {
    // The loop's own λ is the body; a λ inside it would be a closure value.
    let inner = match &e.kind {
        ExprKind::Lam(_, b) => b,
        _ => e,
    };
    let mut found = false;
    fn go(e: &E, found: &mut bool) {
        if *found {
            return;
        }
        match &e.kind {
            // `accAt' A i (λu. b)`: the λ is applied in place (inlined), only its body counts.
            ExprKind::App(h, f)
                if matches!(&f.kind, ExprKind::Lam(..))
                    && matches!(&anf::anormal::spine(h).0.kind, ExprKind::Var(_, VarRef::Builtin(Builtin::AccAt))) =>
            {
                go(h, found);
                if let ExprKind::Lam(_, b) = &f.kind {
                    go(b, found);
                }
            }
            ExprKind::Lam(..) | ExprKind::Array(_) | ExprKind::Bag(_) | ExprKind::Map(_) => *found = true,
            ExprKind::Var(_, VarRef::Builtin(b)) => *found = builtin_allocates(*b),
            // A call of a closure (a companion or its pullback) may allocate.
            ExprKind::App(h, _) if matches!(&anf::anormal::spine(h).0.kind, ExprKind::Var(_, VarRef::Local(_))) => {
                *found = true
            }
            _ => frontend::lin::for_each_child(e, &mut |c| go(c, found)),
        }
    }
    go(inner, &mut found);
    found
}

/// Does `e` use a loop builtin?
fn mentions_loop(e: &E) -> bool {
    use Builtin as B;
    let here = matches!(
        &e.kind,
        ExprKind::Var(
            _,
            VarRef::Builtin(B::Build | B::Map | B::ZipWith | B::Fold | B::Iterate | B::RevIterate | B::While)
        )
    );
    let mut found = here;
    frontend::lin::for_each_child(e, &mut |c| found = found || mentions_loop(c));
    found
}

fn builtin_allocates(b: Builtin) -> bool {
    use Builtin as B;
    // The Real primitives of the rule table, and these, return scalars or update in place.
    let scalar_or_in_place = matches!(
        b,
        B::ToReal
            | B::Len
            | B::Sum
            | B::Dot
            | B::AccAdd
            | B::AccAddAll
            | B::AccAxpy
            | B::TapeSet
            | B::CtCheck
            | B::AccAdd2
            | B::AccRow
            | B::AccRowAll
            | B::AccAt
    );
    !(rules::is_real_prim(Prim::Builtin(b)) || scalar_or_in_place)
}

fn tape_ty_of(t: &Type) -> Type {
    Type::array(t.clone())
}

/// A value of type `t` that is never read (the array parts of a carry the tape does not hold).
fn placeholder(t: &Type) -> E {
    match t {
        Type::Array(_) => call(Builtin::TapeNew, &[int(0)], t.clone()),
        Type::Tuple(ts) => tuple(ts.iter().map(placeholder).collect()),
        Type::Real => real(0.0),
        Type::Int => int(0),
        Type::Bool => mk(ExprKind::Lit(Lit::Bool(false)), Type::Bool),
        _ => mk(ExprKind::Lit(Lit::Unit), Type::Unit),
    }
}

/// Rewrites projections of the tuple `a` (and of copies of it) in `binds` to its known
/// components `parts`, so a reverse that reads one component does not read the others.
fn forward_projections(binds: &mut [Bind], a: LocalId, parts: &[E]) {
    let mut known: FxHashSet<LocalId> = FxHashSet::default();
    known.insert(a);
    for b in binds.iter_mut() {
        match &strip(&b.rhs).kind {
            ExprKind::Var(_, VarRef::Local(y)) if known.contains(y) => {
                known.insert(b.id);
            }
            ExprKind::Proj(t, j) if local(t).is_some_and(|y| known.contains(&y)) => {
                b.rhs = parts[*j].clone();
            }
            _ => {}
        }
    }
}

/// Does `t` hold an array of a discrete type (at any depth)?
fn holds_discrete_array(t: &Type) -> bool {
    match t {
        Type::Array(e) => e.is_discrete() || holds_discrete_array(e),
        Type::Tuple(ts) => ts.iter().any(holds_discrete_array),
        _ => false,
    }
}

fn holds_array(t: &Type) -> bool {
    match t {
        Type::Array(_) => true,
        Type::Tuple(ts) => ts.iter().any(holds_array),
        _ => false,
    }
}

/// The variables pattern `p` binds.
fn pat_ids(p: &Pat, ids: &mut FxHashSet<LocalId>) {
    match &p.kind {
        PatKind::Var(_, id) => {
            ids.insert(*id);
        }
        PatKind::Tuple(ps) => ps.iter().for_each(|q| pat_ids(q, ids)),
        _ => {}
    }
}

fn is_global(e: &E) -> bool {
    matches!(strip(e).kind, ExprKind::Var(_, VarRef::Global(_)))
}

/// A change, a group, or a tuple or an array holding them (what [`Ad::expand_oplus`] records).
fn change_like(t: &Type) -> bool {
    match t {
        Type::Delta(_) | Type::Group(_) => true,
        Type::Tuple(ts) => ts.iter().any(change_like),
        Type::Array(e) => change_like(e),
        _ => false,
    }
}

/// The bindings `z = fold f z0 xs` of type Real of a series (see [`Ad::fused_fold`]), and
/// whether nothing else uses `xs`.
fn real_folds(binds: &[Bind], res: &E) -> FxHashMap<LocalId, bool> {
    let mut uses: FxHashMap<LocalId, usize> = FxHashMap::default();
    for e in binds.iter().map(|b| &b.rhs).chain(std::iter::once(res)) {
        frontend::lin::visit_free_locals(e, &mut |_, id, _| *uses.entry(id).or_default() += 1);
    }
    let mut out = FxHashMap::default();
    for b in binds {
        let (h, args) = anf::anormal::spine(strip(&b.rhs));
        if b.ty == Type::Real
            && args.len() == 3
            && matches!(&strip(h).kind, ExprKind::Var(_, VarRef::Builtin(Builtin::Fold)))
        {
            let once = local(args[2]).is_some_and(|xs| uses.get(&xs) == Some(&1));
            out.insert(b.id, once);
        }
    }
    out
}

/// Which components of a loop's tuple carry are counters: an `Int` the body returns as its own
/// value plus 1 (`(k + 1, …)`, as every loop the transform makes carries). At iteration `i`
/// such a component is its initial value plus `i`, so a reverse loop recomputes it instead of
/// reading it from a tape. `carry` is the body's carry parameter, `binds; res` its series.
fn counters(carry: &Pat, binds: &[Bind], res: &E, n: usize) -> Vec<bool> {
    let mut out = vec![false; n];
    // The carry's components as locals: from a tuple pattern, or projections of its variable.
    let mut comp: FxHashMap<LocalId, usize> = FxHashMap::default();
    match &carry.kind {
        PatKind::Tuple(ps) => {
            for (j, q) in ps.iter().enumerate() {
                if let PatKind::Var(_, id) = &q.kind {
                    comp.insert(*id, j);
                }
            }
        }
        PatKind::Var(_, s) => {
            for b in binds {
                if let ExprKind::Proj(a, j) = &strip(&b.rhs).kind {
                    if local(a) == Some(*s) {
                        comp.insert(b.id, *j);
                    }
                }
            }
        }
        _ => return out,
    }
    let ones: FxHashSet<LocalId> =
        binds.iter().filter(|b| matches!(strip(&b.rhs).kind, ExprKind::Lit(Lit::Int(1)))).map(|b| b.id).collect();
    let is_one =
        |e: &E| matches!(strip(e).kind, ExprKind::Lit(Lit::Int(1))) || local(e).is_some_and(|x| ones.contains(&x));
    let succ = |e: &E| -> Option<usize> {
        let ExprKind::Bin(BinOp::Add, a, b) = &strip(e).kind else { return None };
        if is_one(b) {
            local(a).and_then(|x| comp.get(&x).copied())
        } else if is_one(a) {
            local(b).and_then(|x| comp.get(&x).copied())
        } else {
            None
        }
    };
    let defs: FxHashMap<LocalId, &E> = binds.iter().map(|b| (b.id, &b.rhs)).collect();
    let comps: Vec<E> = match &strip(res).kind {
        ExprKind::Tuple(cs) => cs.clone(),
        _ => match local(res).and_then(|r| defs.get(&r)).map(|e| &strip(e).kind) {
            Some(ExprKind::Tuple(cs)) => cs.clone(),
            _ => return out,
        },
    };
    for (j, c) in comps.iter().enumerate().take(n) {
        if c.ty != Type::Int {
            continue;
        }
        let e = match local(c).and_then(|x| defs.get(&x)) {
            Some(e) => (*e).clone(),
            None => c.clone(),
        };
        if succ(&e) == Some(j) {
            out[j] = true;
        }
    }
    out
}

/// The loops (`fold`, `iterate`, `while`) of a series read only through projections of discrete
/// components (`r.2` of an `Int * Int * Real` carry, used as an index): no adjoint reaches them,
/// so they are not differentiated (no tape; docs/pullback-semantics.md: discrete values have the
/// zero tangent space).
/// The bindings of a loop body (positions, types) whose value is an `Int` or a `Bool` computed by
/// a loop inside the body: the loop's result itself, or a projection of it. The enclosing loop's
/// reverse reads them from a tape rather than running that loop again.
fn loop_scalars(binds: &[Bind]) -> Vec<(usize, Type)> {
    let is_loop = |e: &E| {
        let (h, args) = anf::anormal::spine(e);
        matches!(
            &strip(h).kind,
            ExprKind::Var(_, VarRef::Builtin(Builtin::Fold | Builtin::Iterate | Builtin::RevIterate | Builtin::While))
        ) && args.len() == 3
    };
    let loops: FxHashSet<LocalId> = binds.iter().filter(|b| is_loop(strip(&b.rhs))).map(|b| b.id).collect();
    binds
        .iter()
        .enumerate()
        .filter(|(_, b)| matches!(b.ty, Type::Int | Type::Bool))
        .filter(|(_, b)| match &strip(&b.rhs).kind {
            ExprKind::Proj(a, _) => local(a).is_some_and(|a| loops.contains(&a)),
            _ => loops.contains(&b.id),
        })
        .map(|(q, b)| (q, b.ty.clone()))
        .collect()
}

fn discrete_reads(binds: &[Bind], res: &E) -> FxHashSet<LocalId> {
    let mut uses: FxHashMap<LocalId, usize> = FxHashMap::default();
    for e in binds.iter().map(|b| &b.rhs).chain(std::iter::once(res)) {
        frontend::lin::visit_free_locals(e, &mut |_, id, _| *uses.entry(id).or_default() += 1);
    }
    let mut proj_uses: FxHashMap<LocalId, usize> = FxHashMap::default();
    for b in binds {
        if let ExprKind::Proj(a, _) = &strip(&b.rhs).kind {
            if let (Some(a), true) = (local(a), b.ty.is_discrete()) {
                *proj_uses.entry(a).or_default() += 1;
            }
        }
    }
    let is_loop = |e: &E| {
        let (h, args) = anf::anormal::spine(e);
        matches!(
            &strip(h).kind,
            ExprKind::Var(_, VarRef::Builtin(Builtin::Fold | Builtin::Iterate | Builtin::RevIterate | Builtin::While))
        ) && args.len() == 3
    };
    binds
        .iter()
        .filter(|b| is_loop(strip(&b.rhs)))
        .filter(|b| proj_uses.get(&b.id).is_some_and(|n| *n >= 1 && uses.get(&b.id) == Some(n)))
        .map(|b| b.id)
        .collect()
}

/// Is the series `binds; res` of a fold's body, with accumulator parameter `acc`, a chain of
/// additions to the accumulator (`c + e`, `e + c`, `c - e`, copies `y = c`) that uses each link
/// once and ends in `res`, with nothing else depending on it? Then ∂res/∂acc = 1.
fn additive(acc: &Pat, binds: &[Bind], res: &E) -> bool {
    let PatKind::Var(_, a) = &acc.kind else { return false };
    let mut link = *a;
    let mut used = FxHashSet::default();
    for b in binds {
        let mut fv = FxHashSet::default();
        free_locals(&b.rhs, &mut fv);
        if fv.iter().any(|v| used.contains(v)) {
            return false;
        }
        if !fv.contains(&link) {
            continue;
        }
        used.insert(link);
        let next = match &b.rhs.kind {
            ExprKind::Var(_, VarRef::Local(_)) => true,
            ExprKind::Bin(BinOp::Add, x, y) => local(x) != local(y),
            ExprKind::Bin(BinOp::Sub, x, y) => local(x) == Some(link) && local(y) != Some(link),
            _ => false,
        };
        if !next || b.ty != Type::Real {
            return false;
        }
        link = b.id;
    }
    local(res) == Some(link) && !used.contains(&link)
}

/// The producers `z = build n f` / `map f xs` / `zipWith f xs ys` of a series whose only use is
/// a binding `s = sum z` of the same series (`z ↦ s`): candidates for [`Ad::fused_forward`].
fn summed_producers(binds: &[Bind], res: &E) -> FxHashMap<LocalId, LocalId> {
    let mut uses: FxHashMap<LocalId, usize> = FxHashMap::default();
    for e in binds.iter().map(|b| &b.rhs).chain(std::iter::once(res)) {
        frontend::lin::visit_free_locals(e, &mut |_, id, _| *uses.entry(id).or_default() += 1);
    }
    let producer = |e: &E| {
        let (h, args) = anf::anormal::spine(e);
        matches!(
            (&strip(h).kind, args.len()),
            (ExprKind::Var(_, VarRef::Builtin(Builtin::Build | Builtin::Map)), 2)
                | (ExprKind::Var(_, VarRef::Builtin(Builtin::ZipWith)), 3)
        )
    };
    let producers: FxHashSet<LocalId> =
        binds.iter().filter(|b| b.ty == Type::array(Type::Real) && producer(strip(&b.rhs))).map(|b| b.id).collect();
    let mut out = FxHashMap::default();
    for b in binds {
        let (h, args) = anf::anormal::spine(strip(&b.rhs));
        if let (ExprKind::Var(_, VarRef::Builtin(Builtin::Sum)), [z]) = (&strip(h).kind, args.as_slice()) {
            if let Some(z) = local(z) {
                if producers.contains(&z) && uses.get(&z) == Some(&1) && b.ty == Type::Real {
                    out.insert(z, b.id);
                }
            }
        }
    }
    out
}

/// `if c then a else b` (as its parts) when its condition `c` may fail.
fn failing_choice(e: &E) -> Option<(&E, &E, &E)> {
    match &strip(e).kind {
        ExprKind::If(c, a, b) if !total(c) => Some((c, a, b)),
        _ => None,
    }
}

/// A λ whose body cannot fail or loop (integer and Real arithmetic other than Int `/` and `%`,
/// Real primitives, comparisons, tuples and projections of atoms): recomputing its application
/// instead of reading an array it filled changes no error.
fn total_lam(l: &E) -> bool {
    matches!(strip(l).kind, ExprKind::Lam(..)) && total(l)
}

/// A term that cannot fail or loop (what [`total_lam`] asks of a λ's body): evaluating it again,
/// or not at all, changes no error.
fn total(e: &E) -> bool {
    match &strip(e).kind {
        ExprKind::Var(..) | ExprKind::Lit(_) => true,
        ExprKind::Lam(_, b) => total(b),
        ExprKind::Let(_, a, b) => total(a) && total(b),
        ExprKind::Tuple(xs) => xs.iter().all(total),
        ExprKind::Proj(a, _) | ExprKind::Neg(a) | ExprKind::Not(a) => total(a),
        ExprKind::Bin(op, a, b) => {
            let int_div = matches!(op, BinOp::Div | BinOp::Rem) && a.ty == Type::Int;
            !int_div && !matches!(op, BinOp::Oplus | BinOp::Ominus | BinOp::Pow) && total(a) && total(b)
        }
        ExprKind::App(..) => {
            let (h, args) = anf::anormal::spine(e);
            let prim = matches!(&strip(h).kind, ExprKind::Var(_, VarRef::Builtin(b))
                if args.len() == b.arity() && (matches!(*b, Builtin::ToReal | Builtin::Len) || rules::is_real_prim(Prim::Builtin(*b))));
            prim && args.iter().all(|a| total(a))
        }
        _ => false,
    }
}

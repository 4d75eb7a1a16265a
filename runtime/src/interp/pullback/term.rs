//! Term plumbing for the reducer: typed constructors, fresh variables, capture-avoiding
//! substitution, free variables and patterns (paths, tangent mirrors, chain tuples).

use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicU32, Ordering};

use frontend::builtins::Builtin;
use frontend::span::Span;
use frontend::syntax::*;
use frontend::types::Type;
use rustc_hash::{FxHashMap, FxHashSet};

/// Marks the pairs that rules 8 and 20 make (`⟨y, x⟩`, `⟨y, E⟩`, `⟨V, E[V/y]⟩`, `⟨v, S⟩`), so the
/// printer can write them the paper's way, `⟨⟨x, y⟩, z1, z2⟩` for `⟨⟨⟨x, y⟩, z1⟩, z2⟩`.
pub const CHAIN: Span = Span { lo: u32::MAX - 1, hi: u32::MAX - 1 };

/// Fresh binders of every reducer come from one counter far above the front end's ids, so terms
/// made by different reductions never share a free variable.
static NEXT_ID: AtomicU32 = AtomicU32::new(1 << 30);

pub fn fresh_id() -> LocalId {
    LocalId(NEXT_ID.fetch_add(1, Ordering::Relaxed))
}

pub fn fresh_var(name: &str, ty: &Type) -> (Rc<Pat>, E) {
    let id = fresh_id();
    let name: Name = name.into();
    (Rc::new(Pat::var(name.clone(), id, ty.clone())), var(name, id, ty))
}

pub fn var(name: Name, id: LocalId, ty: &Type) -> E {
    Expr::new(ExprKind::Var(name, VarRef::Local(id)), Span::SYNTHETIC, ty.clone())
}

pub fn mk(kind: ExprKind, ty: Type) -> E {
    Expr::new(kind, Span::SYNTHETIC, ty)
}

pub fn real(r: f64) -> E {
    mk(ExprKind::Lit(Lit::Real(r)), Type::Real)
}

pub fn int(n: i64) -> E {
    mk(ExprKind::Lit(Lit::Int(n)), Type::Int)
}

pub fn boolean(b: bool) -> E {
    mk(ExprKind::Lit(Lit::Bool(b)), Type::Bool)
}

/// The paper's 0 at type `ty`.
pub fn zero(ty: &Type) -> E {
    mk(ExprKind::Zero, ty.clone())
}

pub fn is_zero(e: &E) -> bool {
    matches!(e.kind, ExprKind::Zero)
}

/// The result type of applying something of type `t`.
pub fn result_of(t: &Type) -> Type {
    match t {
        Type::Fun(_, r) => (**r).clone(),
        // A dual applied to a tangent gives a number.
        Type::Dual(_) => Type::Real,
        _ => Type::Unit,
    }
}

/// The argument type of something of type `t`.
pub fn argument_of(t: &Type) -> Type {
    match t {
        Type::Fun(a, _) => (**a).clone(),
        Type::Dual(a) => (**a).clone(),
        _ => Type::Unit,
    }
}

pub fn app(f: &E, a: E) -> E {
    mk(ExprKind::App(f.clone(), a), result_of(&f.ty))
}

pub fn app_n(f: &E, args: Vec<E>) -> E {
    args.into_iter().fold(f.clone(), |g, a| app(&g, a))
}

pub fn builtin(b: Builtin, ty: Type) -> E {
    mk(ExprKind::Var(b.name().into(), VarRef::Builtin(b)), ty)
}

pub fn tuple(xs: Vec<E>) -> E {
    let ty = Type::tuple(xs.iter().map(|x| x.ty.clone()).collect());
    mk(ExprKind::Tuple(xs), ty)
}

/// A pair made by rules 8 and 20 (see `CHAIN`).
pub fn chain_pair(a: E, b: E) -> E {
    let ty = Type::tuple(vec![a.ty.clone(), b.ty.clone()]);
    Expr::new(ExprKind::Tuple(vec![a, b]), CHAIN, ty)
}

pub fn lam(p: Rc<Pat>, body: E) -> E {
    let ty = Type::fun(p.ty.clone(), body.ty.clone());
    mk(ExprKind::Lam(p, body), ty)
}

/// `(λp. s)*·w`.
pub fn dual(p: Rc<Pat>, s: E, w: E) -> E {
    let ty = Type::dual(p.ty.clone());
    mk(ExprKind::Dual(p, s, w), ty)
}

/// `(Ω f)·w`.
pub fn pullback(f: E, w: E) -> E {
    let ty = Type::omega(argument_of(&f.ty));
    mk(ExprKind::Pullback(f, w), ty)
}

/// `r*`.
pub fn star(r: E) -> E {
    let t = r.ty.clone();
    app(&builtin(Builtin::Star, Type::fun(t.clone(), Type::dual(t))), r)
}

/// `Ω r`, the constant 1-form.
pub fn omega(r: E) -> E {
    let t = r.ty.clone();
    app(&builtin(Builtin::Omega, Type::fun(t.clone(), Type::omega(t))), r)
}

/// `J f · s` (a function of the point).
pub fn jac(f: E, s: E) -> E {
    let (a, b) = match &f.ty {
        Type::Fun(a, b) => ((**a).clone(), (**b).clone()),
        _ => (s.ty.clone(), Type::Unit),
    };
    let jty = Type::fun(f.ty.clone(), Type::fun(a.clone(), Type::fun(a, b)));
    app(&app(&builtin(Builtin::Jac, jty), f), s)
}

pub fn proj(e: &E, i: usize) -> E {
    if let ExprKind::Tuple(xs) = &e.kind {
        if let Some(x) = xs.get(i) {
            return x.clone();
        }
    }
    let ty = match &e.ty {
        Type::Tuple(ts) => ts.get(i).cloned().unwrap_or(Type::Unit),
        _ => Type::Unit,
    };
    mk(ExprKind::Proj(e.clone(), i), ty)
}

/// `f a b …` as a head and its arguments.
pub fn spine(e: &E) -> (E, Vec<E>) {
    let mut args = Vec::new();
    let mut cur = e.clone();
    while let ExprKind::App(f, a) = &cur.kind {
        args.push(a.clone());
        let f = f.clone();
        cur = f;
    }
    args.reverse();
    (cur, args)
}

pub fn builtin_head(e: &E) -> Option<Builtin> {
    match &e.kind {
        ExprKind::Var(_, VarRef::Builtin(b)) => Some(*b),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Patterns

/// A variable of a pattern.
#[derive(Clone, Debug)]
pub struct Leaf {
    pub id: LocalId,
    pub name: Name,
    pub ty: Type,
}

/// The variables of a pattern that are in `only`, left to right (the walk allocates nothing else).
pub fn leaves_in(p: &Pat, only: &FxHashSet<LocalId>) -> Vec<Leaf> {
    fn go(p: &Pat, only: &FxHashSet<LocalId>, out: &mut Vec<Leaf>) {
        match &p.kind {
            PatKind::Var(n, id) => {
                if only.contains(id) {
                    out.push(Leaf { id: *id, name: n.clone(), ty: p.ty.clone() })
                }
            }
            PatKind::Wild | PatKind::Unit => {}
            PatKind::Tuple(ps) => ps.iter().for_each(|q| go(q, only, out)),
        }
    }
    let mut out = Vec::new();
    if !only.is_empty() {
        go(p, only, &mut out);
    }
    out
}

pub fn binds(p: &Pat) -> FxHashSet<LocalId> {
    fn go(p: &Pat, out: &mut FxHashSet<LocalId>) {
        match &p.kind {
            PatKind::Var(_, id) => {
                out.insert(*id);
            }
            PatKind::Wild | PatKind::Unit => {}
            PatKind::Tuple(ps) => ps.iter().for_each(|q| go(q, out)),
        }
    }
    let mut out = FxHashSet::default();
    go(p, &mut out);
    out
}

/// The pattern with each `_` replaced by a fresh variable, so the whole input can be named as a
/// term (rule 8 pairs the input with each intermediate result).
pub fn tame(p: &Rc<Pat>) -> Rc<Pat> {
    fn has_wild(p: &Pat) -> bool {
        match &p.kind {
            PatKind::Wild => true,
            PatKind::Tuple(ps) => ps.iter().any(has_wild),
            _ => false,
        }
    }
    fn go(p: &Pat) -> Pat {
        match &p.kind {
            PatKind::Wild => {
                Pat { kind: PatKind::Var("_".into(), fresh_id()), span: p.span, ty: p.ty.clone(), ann: None }
            }
            PatKind::Tuple(ps) => {
                Pat { kind: PatKind::Tuple(ps.iter().map(go).collect()), span: p.span, ty: p.ty.clone(), ann: None }
            }
            _ => p.clone(),
        }
    }
    if has_wild(p) {
        Rc::new(go(p))
    } else {
        p.clone()
    }
}

/// The pattern read as a term (after `tame`).
///
/// A tuple pattern's term is remembered while the pattern's components live: rule 8's chain
/// patterns `⟨y, x⟩` grow by one variable a link and share `y`, so each link's `⟨y, E⟩` and each
/// dual map's `⟨v, S⟩` (over the tangent pattern, see [`mirror`]) reuse the previous link's term
/// and cost O(1) instead of O(k) — copies made the reducer's memory quadratic in the length of a
/// let-series (the gradient of a `fold` unrolls into one).
pub fn pattern_term(p: &Pat) -> E {
    match &p.kind {
        PatKind::Var(n, id) => var(n.clone(), *id, &p.ty),
        PatKind::Unit | PatKind::Wild => mk(ExprKind::Lit(Lit::Unit), Type::Unit),
        PatKind::Tuple(ps) => {
            let key = Rc::as_ptr(ps) as *const Pat;
            let hit = PAT_MEMO.with(|m| m.borrow().terms.get(&key).and_then(|(_, t)| t.upgrade()));
            if let Some(t) = hit.filter(|t| t.span == p.span && same_type(&t.ty, &p.ty)) {
                return t;
            }
            let xs: Vec<E> = ps.iter().map(pattern_term).collect();
            let t = Expr::new(ExprKind::Tuple(xs), p.span, p.ty.clone());
            PAT_MEMO.with(|m| {
                let mut m = m.borrow_mut();
                m.sweep();
                m.terms.insert(key, (Rc::downgrade(ps), Rc::downgrade(&t)));
            });
            t
        }
    }
}

/// Type equality that answers at once for tuple types sharing their components (chain patterns'
/// types are tuples nested as deep as the chain is long).
fn same_type(a: &Type, b: &Type) -> bool {
    match (a, b) {
        (Type::Tuple(x), Type::Tuple(y)) if Rc::ptr_eq(x, y) => true,
        _ => a == b,
    }
}

/// `⟨y, x⟩` for rule 8. `y`'s components are shared, not copied.
pub fn chain_pattern(y: &Pat, x: &Pat) -> Rc<Pat> {
    let ty = Type::tuple(vec![y.ty.clone(), x.ty.clone()]);
    Rc::new(Pat { kind: PatKind::Tuple(Rc::from(vec![y.clone(), x.clone()])), span: CHAIN, ty, ann: None })
}

/// What [`pattern_term`] and [`mirror`] remember about tuple patterns, by the address of the
/// pattern's components. The `Weak` keeps that address from being reused while the entry lives;
/// entries of dead patterns are swept when the tables have doubled.
struct PatMemo {
    terms: FxHashMap<*const Pat, (Weak<[Pat]>, Weak<Expr>)>,
    /// A tuple pattern's tangent pattern named from `v1` (see [`mirror`]), with its leaf count.
    mirrors: FxHashMap<*const Pat, (Weak<[Pat]>, Pat, u32)>,
    sweep_at: usize,
}

impl PatMemo {
    fn sweep(&mut self) {
        if self.terms.len() + self.mirrors.len() < self.sweep_at {
            return;
        }
        self.terms.retain(|_, (k, v)| k.strong_count() > 0 && v.strong_count() > 0);
        self.mirrors.retain(|_, (k, _, _)| k.strong_count() > 0);
        self.sweep_at = (2 * (self.terms.len() + self.mirrors.len())).max(1 << 12);
    }
}

thread_local! {
    static PAT_MEMO: RefCell<PatMemo> = RefCell::new(PatMemo {
        terms: FxHashMap::default(),
        mirrors: FxHashMap::default(),
        sweep_at: 1 << 12,
    });
}

/// A tangent pattern of the same shape as `p`: fresh `v` (one variable) or `v1, v2, …`, with the
/// map from each variable of `p` to its tangent variable.
///
/// The tangent pattern of a tuple pattern is remembered, and a pattern whose first component was
/// mirrored before reuses that component's tangent pattern: rule 8's chain `⟨y, x⟩` gets
/// `⟨v_y, vₖ⟩`, sharing `v_y` with the dual map made at the previous link. So dual maps that
/// coexist may bind the same tangent variables; each binds its own (substitution renames binders
/// that would capture), and the names are those a fresh mirror would give.
///
/// The map holds only the variables in `only` (all when `None`).
pub fn mirror(p: &Pat, only: Option<&FxHashSet<LocalId>>) -> (Rc<Pat>, FxHashMap<LocalId, E>) {
    type Only<'a> = Option<&'a FxHashSet<LocalId>>;
    /// Adds each variable of `p` to `map`, to its tangent in `t` (a pattern of the same shape).
    fn pair(p: &Pat, t: &Pat, only: Only, map: &mut FxHashMap<LocalId, E>) {
        match (&p.kind, &t.kind) {
            (PatKind::Var(_, id), PatKind::Var(name, tid)) => {
                if only.is_none_or(|o| o.contains(id)) {
                    map.insert(*id, var(name.clone(), *tid, &t.ty));
                }
            }
            (PatKind::Tuple(ps), PatKind::Tuple(ts)) => {
                ps.iter().zip(ts.iter()).for_each(|(q, u)| pair(q, u, only, map))
            }
            _ => {}
        }
    }
    /// `first`: `p` is leftmost in a tuple pattern, so its variables are named from `v1` as they
    /// would be in a pattern of its own (a remembered tangent pattern is valid here).
    fn go(p: &Pat, single: bool, first: bool, n: &mut u32, only: Only, map: &mut FxHashMap<LocalId, E>) -> Pat {
        let kind = match &p.kind {
            PatKind::Var(_, id) => {
                *n += 1;
                let name: Name = if single { "v".into() } else { format!("v{n}").into() };
                let nid = fresh_id();
                if only.is_none_or(|o| o.contains(id)) {
                    map.insert(*id, var(name.clone(), nid, &p.ty));
                }
                PatKind::Var(name, nid)
            }
            PatKind::Tuple(ps) => {
                let key = Rc::as_ptr(ps) as *const Pat;
                if first {
                    let hit = PAT_MEMO.with(|m| m.borrow().mirrors.get(&key).map(|(_, t, k)| (t.clone(), *k)));
                    if let Some((t, k)) = hit.filter(|(t, _)| t.span == p.span && same_type(&t.ty, &p.ty)) {
                        pair(p, &t, only, map);
                        *n += k;
                        return t;
                    }
                }
                let before = *n;
                let ts: Rc<[Pat]> =
                    ps.iter().enumerate().map(|(i, q)| go(q, single, first && i == 0, n, only, map)).collect();
                let t = Pat { kind: PatKind::Tuple(ts), span: p.span, ty: p.ty.clone(), ann: None };
                if first {
                    PAT_MEMO.with(|m| {
                        let mut m = m.borrow_mut();
                        m.sweep();
                        m.mirrors.insert(key, (Rc::downgrade(ps), t.clone(), *n - before));
                    });
                }
                return t;
            }
            k => k.clone(),
        };
        Pat { kind, span: p.span, ty: p.ty.clone(), ann: None }
    }
    let single = matches!(p.kind, PatKind::Var(..));
    let mut map = FxHashMap::default();
    let mut n = 0;
    let t = go(p, single, !single, &mut n, only, &mut map);
    (Rc::new(t), map)
}

/// `[V/p]` restricted to the variables in `only` (all when `None`).
///
/// Pattern and value are walked together, so a leaf at depth `d` costs O(1) once its parent's
/// component is known (folding `proj` along each leaf's path was Θ(k²) on rule 8's left-nested
/// chains ⟨⟨⟨y, z1⟩, z2⟩ …⟩, and made the reducer's gradient of a fold Θ(n³)).
pub fn pattern_subst_for(p: &Pat, v: &E, only: Option<&FxHashSet<LocalId>>) -> FxHashMap<LocalId, E> {
    pattern_subst_walk(p, v, only, false)
}

/// `skip_identity`: leave out a tuple sub-pattern whose value is its own pattern term (each of its
/// variables to itself — rule 6 composing dual maps that share a tangent pattern, see [`mirror`]).
fn pattern_subst_walk(p: &Pat, v: &E, only: Option<&FxHashSet<LocalId>>, skip_identity: bool) -> FxHashMap<LocalId, E> {
    fn go(p: &Pat, v: &E, only: Option<&FxHashSet<LocalId>>, skip: bool, out: &mut FxHashMap<LocalId, E>) {
        match &p.kind {
            PatKind::Var(_, id) => {
                if only.is_none_or(|o| o.contains(id)) {
                    out.insert(*id, v.clone());
                }
            }
            PatKind::Wild | PatKind::Unit => {}
            PatKind::Tuple(ps) => {
                if skip && matches!(v.kind, ExprKind::Tuple(_)) && is_own_pattern_term(p, v) {
                    return;
                }
                for (i, q) in ps.iter().enumerate() {
                    let wanted = match &q.kind {
                        PatKind::Wild | PatKind::Unit => false,
                        PatKind::Var(_, id) => only.is_none_or(|o| o.contains(id)),
                        PatKind::Tuple(_) => true,
                    };
                    if wanted {
                        go(q, &proj(v, i), only, skip, out);
                    }
                }
            }
        }
    }
    let mut out = FxHashMap::default();
    go(p, v, only, skip_identity, &mut out);
    out
}

/// Is `v` the remembered [`pattern_term`] of the tuple pattern `p`?
fn is_own_pattern_term(p: &Pat, v: &E) -> bool {
    let PatKind::Tuple(ps) = &p.kind else { return false };
    let key = Rc::as_ptr(ps) as *const Pat;
    PAT_MEMO.with(|m| m.borrow().terms.get(&key).is_some_and(|(_, t)| std::ptr::eq(t.as_ptr(), Rc::as_ptr(v))))
}

/// `body[V/p]`. Only the pattern's variables free in `body` are looked up: rule 8's chain patterns
/// grow with the let-series, while the rest of the series mentions few of them.
pub fn instantiate(p: &Pat, body: &E, v: &E) -> E {
    let free = fv(body);
    if free.is_empty() {
        return body.clone();
    }
    let only: FxHashSet<LocalId> = free.iter().copied().collect();
    subst(body, &pattern_subst_walk(p, v, Some(&only), true))
}

// ---------------------------------------------------------------------------------------------
// Free variables and substitution

/// Free local variables of `e` with their types, in order of first occurrence.
///
/// Terms share sub-terms (a derivative mentions its point twice, a composition substitutes one
/// Jacobian in several places), so this walks the term as a graph: each shared node once. The
/// answers are kept across calls, as the reducer asks about the same large sub-terms step after step
/// (each β-step of a long reduction substitutes an argument the previous step built).
pub fn free_vars(e: &E) -> Vec<(LocalId, Name, Type)> {
    let ids = fv(e);
    FV_CACHE.with(|c| {
        let c = c.borrow();
        ids.iter()
            .map(|id| {
                let (n, t) = &c.info[id];
                (*id, n.clone(), t.clone())
            })
            .collect()
    })
}

/// Free variables of a node, by id (names and types are in [`FvCache::info`]).
type Fv = Rc<[LocalId]>;

/// Free variables by node address. The `Weak` keeps the node's memory allocated, so its address
/// cannot be reused by another node while the entry lives; entries of dead nodes are swept when the
/// table has doubled. Entries hold ids only (a left-nested chain of depth k has k nodes with up to
/// k free variables each, so the table is quadratic in the chain: keep each entry small), and one
/// table gives each variable's name and type.
struct FvCache {
    map: FxHashMap<*const Expr, (Weak<Expr>, Fv)>,
    info: FxHashMap<LocalId, (Name, Type)>,
    sweep_at: usize,
}

thread_local! {
    static FV_CACHE: RefCell<FvCache> =
        RefCell::new(FvCache { map: FxHashMap::default(), info: FxHashMap::default(), sweep_at: 1 << 16 });
}

fn fv(e: &E) -> Fv {
    if let Some(r) = FV_CACHE.with(|c| c.borrow().map.get(&Rc::as_ptr(e)).map(|(_, r)| r.clone())) {
        return r;
    }
    fn union(out: &mut Vec<LocalId>, seen: &mut FxHashSet<LocalId>, xs: &[LocalId], except: &FxHashSet<LocalId>) {
        for x in xs {
            if !except.contains(x) && seen.insert(*x) {
                out.push(*x);
            }
        }
    }
    let none = FxHashSet::default();
    let mut out = Vec::new();
    let mut seen = FxHashSet::default();
    // Sized once for the children's lists (a tuple or array of n tangents has n free variables).
    let (mut total, mut lists) = (0, 0);
    frontend::lin::for_each_child(e, &mut |c| {
        let n = fv(c).len();
        total += n;
        lists += usize::from(n > 0);
    });
    if lists > 1 {
        seen.reserve(total);
        out.reserve(total);
    }
    match &e.kind {
        ExprKind::Var(n, VarRef::Local(id)) => {
            FV_CACHE.with(|c| {
                c.borrow_mut().info.insert(*id, (n.clone(), e.ty.clone()));
            });
            out.push(*id)
        }
        ExprKind::Lam(p, b) => union(&mut out, &mut seen, &fv(b), &binds(p)),
        ExprKind::Let(p, a, b) => {
            union(&mut out, &mut seen, &fv(a), &none);
            union(&mut out, &mut seen, &fv(b), &binds(p));
        }
        ExprKind::Dual(p, s, w) => {
            union(&mut out, &mut seen, &fv(s), &binds(p));
            union(&mut out, &mut seen, &fv(w), &none);
        }
        _ => {
            // A node with one child that has free variables shares that child's list.
            let mut only: Option<Fv> = None;
            let mut several = false;
            frontend::lin::for_each_child(e, &mut |c| {
                let xs = fv(c);
                if xs.is_empty() {
                    return;
                }
                if only.is_none() && !several {
                    only = Some(xs.clone());
                } else {
                    several = true;
                }
                union(&mut out, &mut seen, &xs, &none);
            });
            if let (Some(xs), false) = (only, several) {
                return remember(e, xs);
            }
        }
    }
    remember(e, out.into())
}

fn remember(e: &E, r: Fv) -> Fv {
    FV_CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.map.len() >= c.sweep_at {
            c.map.retain(|_, (w, _)| w.strong_count() > 0);
            c.sweep_at = (2 * c.map.len()).max(1 << 16);
        }
        c.map.insert(Rc::as_ptr(e), (Rc::downgrade(e), r.clone()));
    });
    r
}

pub fn free_set(e: &E) -> FxHashSet<LocalId> {
    fv(e).iter().copied().collect()
}

pub fn mentions_any(e: &E, ids: &FxHashSet<LocalId>) -> bool {
    !ids.is_empty() && fv(e).iter().any(|id| ids.contains(id))
}

pub fn is_closed(e: &E) -> bool {
    fv(e).is_empty()
}

/// Capture-avoiding substitution of terms for free variables.
///
/// Only the variables free in `e` are looked up, and a variable replaced by itself is left alone:
/// a dual map's body mentions a few of the tangent variables its pattern binds (rule 6 substitutes
/// a whole chain's worth), and coexisting dual maps may bind the same ones (see [`mirror`]).
pub fn subst(e: &E, s: &FxHashMap<LocalId, E>) -> E {
    if s.is_empty() {
        return e.clone();
    }
    let mut used: FxHashMap<LocalId, E> = FxHashMap::default();
    for id in fv(e).iter() {
        if let Some(r) = s.get(id) {
            if !matches!(&r.kind, ExprKind::Var(_, VarRef::Local(j)) if j == id) {
                used.insert(*id, r.clone());
            }
        }
    }
    if used.is_empty() {
        return e.clone();
    }
    let mut danger = FxHashSet::default();
    for r in used.values() {
        danger.extend(fv(r).iter().copied());
    }
    let mut st = Subst { danger, memo: FxHashMap::default() };
    st.go(e, &used, true)
}

struct Subst {
    /// Free variables of the substituted terms: binders with these ids are renamed.
    danger: FxHashSet<LocalId>,
    /// Results for shared nodes under the top-level substitution.
    memo: FxHashMap<*const Expr, E>,
}

impl Subst {
    /// Renames the binders of `p` that could capture, and drops those it shadows from `s`.
    fn binder(&self, p: &Rc<Pat>, s: &FxHashMap<LocalId, E>) -> (Rc<Pat>, FxHashMap<LocalId, E>) {
        let ids = binds(p);
        let mut s2: FxHashMap<LocalId, E> =
            s.iter().filter(|(k, _)| !ids.contains(k)).map(|(k, v)| (*k, v.clone())).collect();
        if !ids.iter().any(|id| self.danger.contains(id)) || s2.is_empty() {
            return (p.clone(), s2);
        }
        fn rename(p: &Pat, danger: &FxHashSet<LocalId>, s2: &mut FxHashMap<LocalId, E>) -> Pat {
            let kind = match &p.kind {
                PatKind::Var(n, id) if danger.contains(id) => {
                    let nid = fresh_id();
                    s2.insert(*id, var(n.clone(), nid, &p.ty));
                    PatKind::Var(n.clone(), nid)
                }
                PatKind::Tuple(ps) => PatKind::Tuple(ps.iter().map(|q| rename(q, danger, s2)).collect()),
                k => k.clone(),
            };
            Pat { kind, span: p.span, ty: p.ty.clone(), ann: p.ann.clone() }
        }
        let p2 = rename(p, &self.danger, &mut s2);
        (Rc::new(p2), s2)
    }

    /// `top`: `s` is the substitution the call started with (so results can be shared).
    fn go(&mut self, e: &E, s: &FxHashMap<LocalId, E>, top: bool) -> E {
        if s.is_empty() {
            return e.clone();
        }
        let key = Rc::as_ptr(e);
        if top {
            if let Some(r) = self.memo.get(&key) {
                return r.clone();
            }
        }
        // Nothing to replace below here.
        if !fv(e).iter().any(|id| s.contains_key(id)) {
            return e.clone();
        }
        let re = |kind: ExprKind| Expr::new(kind, e.span, e.ty.clone());
        let r = match &e.kind {
            ExprKind::Var(_, VarRef::Local(id)) => s.get(id).cloned().unwrap_or_else(|| e.clone()),
            ExprKind::Var(..) | ExprKind::Lit(_) | ExprKind::Zero => e.clone(),
            ExprKind::Lam(p, b) => {
                let (p, s2) = self.binder(p, s);
                let same_map = s2.len() == s.len()
                    && Rc::ptr_eq(
                        &p,
                        match &e.kind {
                            ExprKind::Lam(q, _) => q,
                            _ => unreachable!(),
                        },
                    );
                re(ExprKind::Lam(p, self.go(b, &s2, top && same_map)))
            }
            ExprKind::Let(q, a, b) => {
                let a = self.go(a, s, top);
                let (p, s2) = self.binder(q, s);
                let same_map = s2.len() == s.len() && Rc::ptr_eq(&p, q);
                re(ExprKind::Let(p, a, self.go(b, &s2, top && same_map)))
            }
            ExprKind::Dual(q, b, w) => {
                let w = self.go(w, s, top);
                let (p, s2) = self.binder(q, s);
                let same_map = s2.len() == s.len() && Rc::ptr_eq(&p, q);
                re(ExprKind::Dual(p, self.go(b, &s2, top && same_map), w))
            }
            _ => map_children(e, &mut |c| self.go(c, s, top)),
        };
        if top {
            self.memo.insert(key, r.clone());
        }
        r
    }
}

/// Rebuilds `e` with each direct sub-term (not under a binder of `e` — binders are the caller's
/// business) mapped; unchanged children keep sharing.
pub fn map_children(e: &E, f: &mut dyn FnMut(&E) -> E) -> E {
    let mut changed = false;
    let mut g = |c: &E| {
        let n = f(c);
        if !Rc::ptr_eq(&n, c) {
            changed = true;
        }
        n
    };
    let kind = match &e.kind {
        ExprKind::Var(..) | ExprKind::Lit(_) | ExprKind::Zero => return e.clone(),
        ExprKind::Lam(p, a) => ExprKind::Lam(p.clone(), g(a)),
        ExprKind::Neg(a) => ExprKind::Neg(g(a)),
        ExprKind::Not(a) => ExprKind::Not(g(a)),
        ExprKind::Proj(a, i) => ExprKind::Proj(g(a), *i),
        ExprKind::Derive(a) => ExprKind::Derive(g(a)),
        ExprKind::Ann(a, t) => ExprKind::Ann(g(a), t.clone()),
        ExprKind::App(a, b) => ExprKind::App(g(a), g(b)),
        ExprKind::Let(p, a, b) => ExprKind::Let(p.clone(), g(a), g(b)),
        ExprKind::Bin(op, a, b) => ExprKind::Bin(*op, g(a), g(b)),
        ExprKind::Index(a, b) => ExprKind::Index(g(a), g(b)),
        ExprKind::Pullback(a, b) => ExprKind::Pullback(g(a), g(b)),
        ExprKind::Dual(p, a, b) => ExprKind::Dual(p.clone(), g(a), g(b)),
        ExprKind::Sum(a, b) => ExprKind::Sum(g(a), g(b)),
        ExprKind::If(a, b, c) => ExprKind::If(g(a), g(b), g(c)),
        ExprKind::Tuple(xs) => ExprKind::Tuple(xs.iter().map(&mut g).collect()),
        ExprKind::Array(xs) => ExprKind::Array(xs.iter().map(&mut g).collect()),
        ExprKind::Bag(xs) => ExprKind::Bag(xs.iter().map(|(x, n)| (g(x), *n)).collect()),
        ExprKind::Map(xs) => ExprKind::Map(xs.iter().map(|(k, v)| (g(k), g(v))).collect()),
    };
    if !changed {
        return e.clone();
    }
    Expr::new(kind, e.span, e.ty.clone())
}

/// Replaces the `i`-th direct sub-term (in `map_children` order).
pub fn with_child(e: &E, i: usize, new: &E) -> E {
    let mut k = 0;
    map_children(e, &mut |c| {
        let r = if k == i { new.clone() } else { c.clone() };
        k += 1;
        r
    })
}

/// Structural equality up to spans (variables by id).
pub fn same(a: &E, b: &E) -> bool {
    if Rc::ptr_eq(a, b) {
        return true;
    }
    match (&a.kind, &b.kind) {
        (ExprKind::Var(_, x), ExprKind::Var(_, y)) => x == y,
        (ExprKind::Lit(x), ExprKind::Lit(y)) => match (x, y) {
            (Lit::Real(p), Lit::Real(q)) => p.to_bits() == q.to_bits(),
            _ => x == y,
        },
        (ExprKind::Zero, ExprKind::Zero) => true,
        (ExprKind::Lam(p, x), ExprKind::Lam(q, y)) => p.kind == q.kind && same(x, y),
        (ExprKind::Let(p, x1, x2), ExprKind::Let(q, y1, y2)) => p.kind == q.kind && same(x1, y1) && same(x2, y2),
        (ExprKind::Dual(p, x1, x2), ExprKind::Dual(q, y1, y2)) => p.kind == q.kind && same(x1, y1) && same(x2, y2),
        (ExprKind::Proj(x, i), ExprKind::Proj(y, j)) => i == j && same(x, y),
        (ExprKind::Bin(o, x1, x2), ExprKind::Bin(p, y1, y2)) => o == p && same(x1, y1) && same(x2, y2),
        (ExprKind::App(x1, x2), ExprKind::App(y1, y2))
        | (ExprKind::Index(x1, x2), ExprKind::Index(y1, y2))
        | (ExprKind::Pullback(x1, x2), ExprKind::Pullback(y1, y2))
        | (ExprKind::Sum(x1, x2), ExprKind::Sum(y1, y2)) => same(x1, y1) && same(x2, y2),
        (ExprKind::Neg(x), ExprKind::Neg(y)) | (ExprKind::Not(x), ExprKind::Not(y)) => same(x, y),
        (ExprKind::If(x1, x2, x3), ExprKind::If(y1, y2, y3)) => same(x1, y1) && same(x2, y2) && same(x3, y3),
        (ExprKind::Tuple(xs), ExprKind::Tuple(ys)) | (ExprKind::Array(xs), ExprKind::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same(x, y))
        }
        _ => false,
    }
}

//! Monomorphisation: specialise every polymorphic definition and every polymorphic `let` per
//! ground type at which it is used, starting from one root definition.
//!
//! Invariants of the result (checked by `verify`):
//! - every node and binder type is ground (no type variables);
//! - definitions are in dependency order, the root last; `VarRef::Global(DefId(i))` refers to
//!   `MonoProgram::defs[i]`;
//! - every binder in the whole program has a `LocalId` of its own (copies are renamed), so later
//!   passes may key maps by `LocalId`.

use std::rc::Rc;

use frontend::diag::Diagnostic;
use frontend::syntax::*;
use frontend::types::{Classes, Scheme, TyVar, Type, TypePrinter};
use rustc_hash::FxHashMap;

#[derive(Clone, Debug)]
pub struct MonoDef {
    /// `name` for a monomorphic definition, `name[T1, T2]` for a specialisation.
    pub name: Name,
    /// The source definition this specialises.
    pub source: DefId,
    pub body: E,
    pub ty: Type,
}

#[derive(Clone, Debug, Default)]
pub struct MonoProgram {
    pub defs: Vec<MonoDef>,
    /// One past the largest `LocalId` used.
    pub next_local: u32,
    /// Sites a pass could not compile, left to the reference interpreter (`interp' k args`).
    pub interpreted: Option<Rc<Interpreted>>,
}

/// The differentiation sites `adjoint::reverse` does not compile, each evaluated by the reference
/// interpreter when compiled code reaches it (`interp' k args`, per-site fallback).
#[derive(Clone, Debug)]
pub struct Interpreted {
    /// The program the sites' terms were taken from: their `Global`s index its definitions.
    pub program: MonoProgram,
    pub sites: Vec<InterpretedSite>,
}

/// One site left to the interpreter: a term of plain data (Real, Int, Bool, Unit, arrays and
/// tuples of them) whose free locals are plain data too, passed as one tuple.
#[derive(Clone, Debug)]
pub struct InterpretedSite {
    /// The free locals, in the order of the tuple compiled code passes.
    pub params: Vec<(LocalId, Name, Type)>,
    pub body: E,
    /// What is not compiled there, for the note.
    pub what: String,
    /// Where (the construct that is not compiled).
    pub span: frontend::Span,
}

impl MonoProgram {
    pub fn def(&self, id: DefId) -> &MonoDef {
        &self.defs[id.0 as usize]
    }
    /// The root definition (the last one).
    pub fn root(&self) -> DefId {
        DefId(self.defs.len() as u32 - 1)
    }
    /// The specialisation of source definition `src` named plainly, if it exists.
    pub fn find(&self, name: &str) -> Option<DefId> {
        self.defs.iter().rposition(|d| &*d.name == name).map(|i| DefId(i as u32))
    }
}

/// Specialises everything `root` uses, at the root's type with its free type variables defaulted
/// (numeric ones to `Int`, others to `Unit`).
pub fn monomorphise(program: &Program, root: DefId) -> Result<MonoProgram, Diagnostic> {
    let scheme = &program.def(root).scheme;
    let ty = default_scheme(scheme);
    monomorphise_at(program, root, &ty)
}

/// Specialises `root` at the given ground instance of its scheme.
pub fn monomorphise_at(program: &Program, root: DefId, ty: &Type) -> Result<MonoProgram, Diagnostic> {
    let mut m =
        Mono { program, out: Vec::new(), instances: FxHashMap::default(), next_local: program.next_local, nodes: 0 };
    m.instance(root, ty, program.def(root).span)?;
    Ok(MonoProgram { defs: m.out, next_local: m.next_local, interpreted: None })
}

/// The scheme's type with each variable defaulted.
pub fn default_scheme(s: &Scheme) -> Type {
    s.ty.map_vars(&mut |v| {
        s.vars.iter().find(|(w, _)| *w == v).map(|(_, c)| if c.contains(Classes::NUM) { Type::Int } else { Type::Unit })
    })
}

type Subst = FxHashMap<TyVar, Type>;

/// Monomorphisation can need exponentially many instances; past this many it stops with an error.
pub const MAX_INSTANCES: usize = 10_000;
/// The largest monomorphised program, in term nodes.
pub const MAX_NODES: usize = 4_000_000;

struct Mono<'p> {
    program: &'p Program,
    out: Vec<MonoDef>,
    instances: FxHashMap<(DefId, String), DefId>,
    next_local: u32,
    /// Nodes made so far (copies of polymorphic code can multiply).
    nodes: usize,
}

/// Per-`let` bookkeeping: instances requested of a polymorphic binder while specialising the body.
struct PolyBinder {
    generic: Type,
    /// (ground use type, fresh id) for each distinct instance.
    uses: Vec<(Type, LocalId)>,
}

struct Scope {
    /// Renaming of monomorphic binders.
    rename: FxHashMap<LocalId, LocalId>,
    /// Polymorphic `let` binders in scope.
    poly: FxHashMap<LocalId, PolyBinder>,
}

impl<'p> Mono<'p> {
    fn fresh(&mut self) -> LocalId {
        frontend::syntax::fresh_local(&mut self.next_local)
    }

    fn instance(&mut self, d: DefId, ty: &Type, span: frontend::Span) -> Result<DefId, Diagnostic> {
        let key = (d, TypePrinter::new().ty(ty));
        if let Some(id) = self.instances.get(&key) {
            return Ok(*id);
        }
        let def = self.program.def(d);
        if self.out.len() >= MAX_INSTANCES {
            return Err(Diagnostic::error(
                span,
                format!("the program needs more than {MAX_INSTANCES} specialisations of its polymorphic definitions"),
            ));
        }
        let mut s = Subst::default();
        if !matching(&def.scheme.ty, ty, &mut s) {
            return Err(Diagnostic::error(
                span,
                format!("internal: cannot specialise `{}` at {}", def.name, TypePrinter::new().ty(ty)),
            ));
        }
        let mut scope = Scope { rename: FxHashMap::default(), poly: FxHashMap::default() };
        let body = self.expr(&def.body, &s, &mut scope)?;
        let name: Name = if def.scheme.vars.is_empty() {
            def.name.clone()
        } else {
            let args: Vec<String> =
                def.scheme.vars.iter().map(|(v, _)| TypePrinter::new().ty(s.get(v).unwrap_or(&Type::Unit))).collect();
            format!("{}[{}]", def.name, args.join(", ")).into()
        };
        let id = DefId(self.out.len() as u32);
        self.out.push(MonoDef { name, source: d, body, ty: ty.clone() });
        self.instances.insert(key, id);
        Ok(id)
    }

    fn ty(&self, t: &Type, s: &Subst) -> Type {
        // Anything still unknown is unconstrained and cannot affect the result.
        t.map_vars(&mut |v| Some(s.get(&v).cloned().unwrap_or(Type::Unit)))
    }

    fn pat(&mut self, p: &Pat, s: &Subst, scope: &mut Scope) -> Rc<Pat> {
        let kind = match &p.kind {
            PatKind::Var(n, id) => {
                let new = self.fresh();
                scope.rename.insert(*id, new);
                PatKind::Var(n.clone(), new)
            }
            PatKind::Tuple(ps) => PatKind::Tuple(ps.iter().map(|q| (*self.pat(q, s, scope)).clone()).collect()),
            k => k.clone(),
        };
        Rc::new(Pat { kind, span: p.span, ty: self.ty(&p.ty, s), ann: None })
    }

    fn expr(&mut self, e: &E, s: &Subst, scope: &mut Scope) -> Result<E, Diagnostic> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(Diagnostic::error(
                e.span,
                format!("specialising polymorphic definitions would make the program larger than {MAX_NODES} nodes"),
            ));
        }
        let ty = self.ty(&e.ty, s);
        let kind = match &e.kind {
            ExprKind::Var(n, VarRef::Global(d)) => {
                let id = self.instance(*d, &ty, e.span)?;
                ExprKind::Var(n.clone(), VarRef::Global(id))
            }
            ExprKind::Var(n, VarRef::Local(id)) => {
                if let Some(pb) = scope.poly.get_mut(id) {
                    let new = match pb.uses.iter().find(|(t, _)| *t == ty) {
                        Some((_, new)) => *new,
                        None => {
                            let new = self.fresh();
                            pb.uses.push((ty.clone(), new));
                            new
                        }
                    };
                    ExprKind::Var(n.clone(), VarRef::Local(new))
                } else {
                    let new = scope.rename.get(id).copied().unwrap_or(*id);
                    ExprKind::Var(n.clone(), VarRef::Local(new))
                }
            }
            ExprKind::Var(..) | ExprKind::Zero => e.kind.clone(),
            ExprKind::Lit(Lit::Int(n)) if ty == Type::Real => ExprKind::Lit(Lit::Real(*n as f64)),
            ExprKind::Lit(_) => e.kind.clone(),
            ExprKind::Let(p, rhs, body) if is_polymorphic(p, s) => return self.poly_let(e, p, rhs, body, s, scope),
            ExprKind::Let(p, rhs, body) => {
                let rhs = self.expr(rhs, s, scope)?;
                let p = self.pat(p, s, scope);
                ExprKind::Let(p, rhs, self.expr(body, s, scope)?)
            }
            ExprKind::Lam(p, b) => {
                let p = self.pat(p, s, scope);
                ExprKind::Lam(p, self.expr(b, s, scope)?)
            }
            ExprKind::Dual(p, b, w) => {
                let p = self.pat(p, s, scope);
                let b = self.expr(b, s, scope)?;
                ExprKind::Dual(p, b, self.expr(w, s, scope)?)
            }
            ExprKind::App(a, b) => ExprKind::App(self.expr(a, s, scope)?, self.expr(b, s, scope)?),
            ExprKind::If(a, b, c) => {
                ExprKind::If(self.expr(a, s, scope)?, self.expr(b, s, scope)?, self.expr(c, s, scope)?)
            }
            ExprKind::Bin(op, a, b) => ExprKind::Bin(*op, self.expr(a, s, scope)?, self.expr(b, s, scope)?),
            ExprKind::Neg(a) => ExprKind::Neg(self.expr(a, s, scope)?),
            ExprKind::Not(a) => ExprKind::Not(self.expr(a, s, scope)?),
            ExprKind::Tuple(xs) => ExprKind::Tuple(self.exprs(xs, s, scope)?),
            ExprKind::Proj(a, i) => ExprKind::Proj(self.expr(a, s, scope)?, *i),
            ExprKind::Index(a, b) => ExprKind::Index(self.expr(a, s, scope)?, self.expr(b, s, scope)?),
            ExprKind::Array(xs) => ExprKind::Array(self.exprs(xs, s, scope)?),
            ExprKind::Bag(xs) => {
                let mut out = Vec::new();
                for (x, n) in xs {
                    out.push((self.expr(x, s, scope)?, *n));
                }
                ExprKind::Bag(out)
            }
            ExprKind::Map(xs) => {
                let mut out = Vec::new();
                for (k, v) in xs {
                    out.push((self.expr(k, s, scope)?, self.expr(v, s, scope)?));
                }
                ExprKind::Map(out)
            }
            ExprKind::Pullback(a, b) => ExprKind::Pullback(self.expr(a, s, scope)?, self.expr(b, s, scope)?),
            ExprKind::Derive(a) => ExprKind::Derive(self.expr(a, s, scope)?),
            ExprKind::Ann(a, _) => return self.expr(a, s, scope),
            ExprKind::Sum(a, b) => ExprKind::Sum(self.expr(a, s, scope)?, self.expr(b, s, scope)?),
        };
        Ok(Expr::new(kind, e.span, ty))
    }

    fn exprs(&mut self, xs: &[E], s: &Subst, scope: &mut Scope) -> Result<Vec<E>, Diagnostic> {
        xs.iter().map(|x| self.expr(x, s, scope)).collect()
    }

    /// `let p = rhs in body` where `p` binds polymorphic values: specialise the body first, noting
    /// each ground type a binder is used at, then bind one specialised copy of `rhs` per instance.
    fn poly_let(&mut self, e: &E, p: &Pat, rhs: &E, body: &E, s: &Subst, scope: &mut Scope) -> Result<E, Diagnostic> {
        let binders = p.binders();
        let saved: Vec<(LocalId, Option<PolyBinder>)> = binders
            .iter()
            .map(|(_, id)| {
                let generic = binder_type(p, *id).expect("binder in pattern").map_vars(&mut |v| s.get(&v).cloned());
                (*id, scope.poly.insert(*id, PolyBinder { generic, uses: Vec::new() }))
            })
            .collect();
        let body2 = self.expr(body, s, scope)?;
        let mut instances: Vec<(LocalId, PolyBinder)> = Vec::new();
        for (id, prev) in saved {
            let pb = scope.poly.remove(&id).expect("inserted above");
            if let Some(prev) = prev {
                scope.poly.insert(id, prev);
            }
            instances.push((id, pb));
        }
        // One copy of the let per instance of each binder. If no binder is used at all, one copy at
        // a defaulted type still runs, so call-by-value errors in the rhs are not lost.
        let mut result = body2;
        if instances.iter().all(|(_, pb)| pb.uses.is_empty()) {
            if let Some((_, pb)) = instances.first_mut() {
                // Int satisfies every class (Num, Eq, Key, Base, FirstOrder), so the copy is
                // well-typed whatever constrains the binder (`let v = 1 / 0 in 5` divides Ints).
                let ground = pb.generic.map_vars(&mut |_| Some(Type::Int));
                let id = frontend::syntax::fresh_local(&mut self.next_local);
                pb.uses.push((ground, id));
            }
        }
        for (id, pb) in instances.into_iter().rev() {
            for (use_ty, new_id) in pb.uses.into_iter().rev() {
                let mut s2 = s.clone();
                if !matching(&pb.generic, &use_ty, &mut s2) {
                    return Err(Diagnostic::error(e.span, "internal: inconsistent use of a polymorphic let"));
                }
                // Variables of the pattern this binder's use does not fix (another component's,
                // `let (total, count) = fold … (0.0, 0) …` used at `total`) cannot change its
                // value: they default to Int, which satisfies every class, as an unused let does.
                p.ty.visit(&mut |t| {
                    if let Type::Var(v) = t {
                        s2.entry(*v).or_insert(Type::Int);
                    }
                });
                let rhs2 = self.expr(rhs, &s2, scope)?;
                let pat2 = self.instance_pattern(p, id, new_id, &s2);
                let ty = result.ty.clone();
                result = Expr::new(ExprKind::Let(pat2, rhs2, result), e.span, ty);
            }
        }
        Ok(result)
    }

    /// The pattern `p` specialised, binding only `keep` (as `new_id`); other binders become `_`.
    fn instance_pattern(&mut self, p: &Pat, keep: LocalId, new_id: LocalId, s: &Subst) -> Rc<Pat> {
        fn go(m: &Mono, p: &Pat, keep: LocalId, new_id: LocalId, s: &Subst) -> Pat {
            let kind = match &p.kind {
                PatKind::Var(n, id) if *id == keep => PatKind::Var(n.clone(), new_id),
                PatKind::Var(..) => PatKind::Wild,
                PatKind::Tuple(ps) => PatKind::Tuple(ps.iter().map(|q| go(m, q, keep, new_id, s)).collect()),
                k => k.clone(),
            };
            Pat { kind, span: p.span, ty: m.ty(&p.ty, s), ann: None }
        }
        Rc::new(go(self, p, keep, new_id, s))
    }
}

/// Does this `let` pattern still mention type variables after `s` (variables it generalised)?
fn is_polymorphic(p: &Pat, s: &Subst) -> bool {
    let mut poly = false;
    fn visit(p: &Pat, s: &Subst, poly: &mut bool) {
        if let PatKind::Var(..) = p.kind {
            p.ty.visit(&mut |t| {
                if let Type::Var(v) = t {
                    if !s.contains_key(v) {
                        *poly = true;
                    }
                }
            });
        }
        if let PatKind::Tuple(ps) = &p.kind {
            ps.iter().for_each(|q| visit(q, s, poly));
        }
    }
    visit(p, s, &mut poly);
    poly
}

fn binder_type(p: &Pat, id: LocalId) -> Option<Type> {
    match &p.kind {
        PatKind::Var(_, j) if *j == id => Some(p.ty.clone()),
        PatKind::Tuple(ps) => ps.iter().find_map(|q| binder_type(q, id)),
        _ => None,
    }
}

/// One-way matching of a generic type against a ground one, extending `s`.
pub fn matching(generic: &Type, ground: &Type, s: &mut Subst) -> bool {
    match (generic, ground) {
        (Type::Var(v), _) => match s.get(v) {
            Some(t) => t == ground,
            None => {
                s.insert(*v, ground.clone());
                true
            }
        },
        (Type::Real, Type::Real) | (Type::Int, Type::Int) | (Type::Bool, Type::Bool) | (Type::Unit, Type::Unit) => true,
        (Type::Array(a), Type::Array(b))
        | (Type::Bag(a), Type::Bag(b))
        | (Type::Group(a), Type::Group(b))
        | (Type::Dual(a), Type::Dual(b)) => matching(a, b, s),
        (Type::Map(a, b), Type::Map(c, d)) | (Type::Fun(a, b), Type::Fun(c, d)) => {
            matching(a, c, s) && matching(b, d, s)
        }
        (Type::Tuple(xs), Type::Tuple(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(x, y)| matching(x, y, s))
        }
        (Type::Delta(a), Type::Delta(b)) => matching(a, b, s),
        // Delta of a variable that became a function or tuple type.
        (Type::Delta(a), g) => match undelta(g) {
            Some(u) => matching(a, &u, s),
            None => false,
        },
        _ => false,
    }
}

/// The `t` with `Delta t = g`, when `g` is the normal form of a function or tuple change type.
fn undelta(g: &Type) -> Option<Type> {
    match g {
        Type::Delta(x) => Some((**x).clone()),
        Type::Fun(a, rest) => match &**rest {
            Type::Fun(_, db) => Some(Type::fun((**a).clone(), undelta(db)?)),
            _ => None,
        },
        Type::Tuple(ts) => Some(Type::Tuple(ts.iter().map(undelta).collect::<Option<Vec<_>>>()?.into())),
        _ => None,
    }
}

/// Checks the invariants above; returns the first violation.
pub fn verify(p: &MonoProgram) -> Result<(), String> {
    let mut seen: FxHashMap<LocalId, ()> = FxHashMap::default();
    for (i, d) in p.defs.iter().enumerate() {
        let mut err = None;
        check(&d.body, i, &mut seen, &mut err);
        if let Some(e) = err {
            return Err(format!("{}: {e}", d.name));
        }
    }
    Ok(())
}

fn check(e: &E, def_index: usize, seen: &mut FxHashMap<LocalId, ()>, err: &mut Option<String>) {
    if err.is_some() {
        return;
    }
    if !e.ty.is_ground() {
        *err = Some(format!("non-ground type {} at {:?}", e.ty, e.span));
        return;
    }
    let mut pat = |p: &Pat, err: &mut Option<String>| {
        for (n, id) in p.binders() {
            if seen.insert(id, ()).is_some() {
                *err = Some(format!("binder `{n}` ({id:?}) is not unique"));
            }
        }
        if !p.ty.is_ground() {
            *err = Some(format!("non-ground binder type {}", p.ty));
        }
    };
    match &e.kind {
        ExprKind::Var(_, VarRef::Global(d)) if d.0 as usize >= def_index => {
            *err = Some(format!("reference to a later definition {}", d.0));
        }
        ExprKind::Lam(p, _) | ExprKind::Let(p, _, _) | ExprKind::Dual(p, _, _) => pat(p, err),
        _ => {}
    }
    frontend::lin::for_each_child(e, &mut |c| check(c, def_index, seen, err));
}

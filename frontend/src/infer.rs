//! Hindley–Milner inference with let-polymorphism (level-based generalisation), type classes for
//! numeric, equality and key types, deferred tuple projections, and `Delta` as a type function.
//!
//! The result is the same program with every node's `ty` filled in (fully substituted), every
//! definition's scheme, annotations checked and removed, and integer literals at `Real` turned into
//! real literals. Types inside a polymorphic definition mention its scheme variables; a `let` whose
//! binder is polymorphic keeps its own variables in the binder's type (monomorphisation
//! specialises both).

use std::rc::Rc;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::builtins::Builtin;
use crate::diag::Diagnostic;
use crate::lin;
use crate::parser::ANN_VAR_BASE;
use crate::span::Span;
use crate::syntax::*;
use crate::types::{Classes, Scheme, TyVar, Type, TypePrinter};

/// Infers and checks a whole program. Stops at the first error.
pub fn check_program(mut program: Program) -> Result<Program, Diagnostic> {
    let mut inf = Infer::new();
    for i in 0..program.defs.len() {
        let def = &program.defs[i];
        let (body, scheme) = inf.def(def)?;
        let is_main = &*program.defs[i].name == "main";
        let d = &mut program.defs[i];
        let (body, scheme) = if is_main { default_main(&body, &scheme) } else { (body, scheme) };
        d.body = body;
        d.scheme = scheme;
        inf.globals.push(d.scheme.clone());
    }
    Ok(program)
}

/// Type-checks definitions that follow already-checked ones (the REPL's `def` and `:load`).
pub fn check_defs(program: &Program, defs: Vec<Def>) -> Result<Vec<Def>, Diagnostic> {
    let mut inf = Infer::new();
    inf.globals = program.defs.iter().map(|d| d.scheme.clone()).collect();
    let mut out = Vec::with_capacity(defs.len());
    for mut d in defs {
        let (body, scheme) = inf.def(&d)?;
        let (body, scheme) = if &*d.name == "main" { default_main(&body, &scheme) } else { (body, scheme) };
        d.body = body;
        d.scheme = scheme;
        inf.globals.push(d.scheme.clone());
        out.push(d);
    }
    Ok(out)
}

/// Type-checks one expression against already-checked definitions (REPL); its scheme is general.
pub fn check_expr(program: &Program, e: &E) -> Result<(E, Scheme), Diagnostic> {
    let mut inf = Infer::new();
    inf.globals = program.defs.iter().map(|d| d.scheme.clone()).collect();
    let def =
        Def { name: "it".into(), name_span: e.span, span: e.span, body: e.clone(), scheme: Scheme::mono(Type::Unit) };
    inf.def(&def)
}

/// `main` is the program's entry point: its unconstrained type variables default
/// (numeric ones to `Int`, others to `Unit`), as docs/language.md §4 says.
fn default_main(body: &E, s: &Scheme) -> (E, Scheme) {
    let mut sub = |v: TyVar| s.vars.iter().find(|(w, _)| *w == v).map(|(_, c)| default_for(*c));
    let ty = s.ty.map_vars(&mut sub);
    let body = map_types(body, &mut |t| t.map_vars(&mut sub));
    (body, Scheme::mono(ty))
}

fn default_for(c: Classes) -> Type {
    if c.contains(Classes::NUM) {
        Type::Int
    } else {
        Type::Unit
    }
}

/// Rebuilds a term with `f` applied to every node's and binder's type; an integer literal whose
/// type becomes `Real` becomes a real literal.
pub fn map_types(e: &E, f: &mut impl FnMut(&Type) -> Type) -> E {
    map_types_dyn(e, f)
}

fn map_types_dyn(e: &E, f: &mut dyn FnMut(&Type) -> Type) -> E {
    fn pat(p: &Pat, f: &mut dyn FnMut(&Type) -> Type) -> Rc<Pat> {
        let kind = match &p.kind {
            PatKind::Tuple(ps) => PatKind::Tuple(ps.iter().map(|q| (*pat(q, f)).clone()).collect()),
            k => k.clone(),
        };
        Rc::new(Pat { kind, span: p.span, ty: f(&p.ty), ann: None })
    }
    let m = |x: &E, f: &mut dyn FnMut(&Type) -> Type| map_types_dyn(x, f);
    let kind = match &e.kind {
        ExprKind::Var(..) | ExprKind::Lit(_) | ExprKind::Zero => e.kind.clone(),
        ExprKind::Lam(p, b) => ExprKind::Lam(pat(p, f), m(b, f)),
        ExprKind::App(a, b) => ExprKind::App(m(a, f), m(b, f)),
        ExprKind::Let(p, a, b) => ExprKind::Let(pat(p, f), m(a, f), m(b, f)),
        ExprKind::If(a, b, c) => ExprKind::If(m(a, f), m(b, f), m(c, f)),
        ExprKind::Bin(op, a, b) => ExprKind::Bin(*op, m(a, f), m(b, f)),
        ExprKind::Neg(a) => ExprKind::Neg(m(a, f)),
        ExprKind::Not(a) => ExprKind::Not(m(a, f)),
        ExprKind::Tuple(xs) => ExprKind::Tuple(xs.iter().map(|x| m(x, f)).collect()),
        ExprKind::Proj(a, i) => ExprKind::Proj(m(a, f), *i),
        ExprKind::Index(a, b) => ExprKind::Index(m(a, f), m(b, f)),
        ExprKind::Array(xs) => ExprKind::Array(xs.iter().map(|x| m(x, f)).collect()),
        ExprKind::Bag(xs) => ExprKind::Bag(xs.iter().map(|(x, n)| (m(x, f), *n)).collect()),
        ExprKind::Map(xs) => ExprKind::Map(xs.iter().map(|(k, v)| (m(k, f), m(v, f))).collect()),
        ExprKind::Pullback(a, b) => ExprKind::Pullback(m(a, f), m(b, f)),
        ExprKind::Dual(p, a, b) => ExprKind::Dual(pat(p, f), m(a, f), m(b, f)),
        ExprKind::Derive(a) => ExprKind::Derive(m(a, f)),
        ExprKind::Ann(a, t) => ExprKind::Ann(m(a, f), f(t)),
        ExprKind::Sum(a, b) => ExprKind::Sum(m(a, f), m(b, f)),
    };
    let ty = f(&e.ty);
    let kind = match kind {
        ExprKind::Lit(Lit::Int(n)) if ty == Type::Real => ExprKind::Lit(Lit::Real(n as f64)),
        k => k,
    };
    Expr::new(kind, e.span, ty)
}

#[derive(Clone, Debug)]
struct VarInfo {
    link: Option<Type>,
    level: u32,
    classes: Classes,
}

struct Deferred {
    tuple: Type,
    index: usize,
    result: Type,
    span: Span,
}

enum UErr {
    Mismatch,
    /// The variable would have to contain itself as part of this type.
    Occurs(TyVar, Type),
    /// A variable of these classes met this (non-variable) type; `var_found` says whether the
    /// variable was on the found side of the comparison.
    Class {
        classes: Classes,
        ty: Type,
        var_found: bool,
    },
}

impl UErr {
    fn var_found(self, found: bool) -> UErr {
        match self {
            UErr::Class { classes, ty, .. } => UErr::Class { classes, ty, var_found: found },
            e => e,
        }
    }
}

struct Infer {
    vars: Vec<VarInfo>,
    level: u32,
    locals: FxHashMap<LocalId, Scheme>,
    globals: Vec<Scheme>,
    ann: FxHashMap<u32, TyVar>,
    deferred: Vec<Deferred>,
    /// Variables generalised by some `let` in the current definition: never defaulted.
    let_quantified: FxHashSet<TyVar>,
}

type Res<T> = Result<T, Diagnostic>;

/// Types larger than this (fully expanded) are refused: Hindley–Milner types can grow
/// exponentially with program size, and nothing useful has a type this big.
pub const TYPE_SIZE_LIMIT: usize = 20_000;

impl Infer {
    fn new() -> Infer {
        Infer {
            vars: Vec::new(),
            level: 0,
            locals: FxHashMap::default(),
            globals: Vec::new(),
            ann: FxHashMap::default(),
            deferred: Vec::new(),
            let_quantified: FxHashSet::default(),
        }
    }

    fn fresh(&mut self, classes: Classes) -> Type {
        let v = TyVar(self.vars.len() as u32);
        self.vars.push(VarInfo { link: None, level: self.level, classes });
        Type::Var(v)
    }

    // ---- definitions -------------------------------------------------------------------------

    fn def(&mut self, def: &Def) -> Res<(E, Scheme)> {
        self.ann.clear();
        self.deferred.clear();
        self.let_quantified.clear();
        self.level = 1;
        let body = self.infer(&def.body)?;
        self.solve_deferred(true)?;
        self.check_sizes(&body)?;
        self.level = 0;
        let ty = self.zonk(&body.ty);
        let mut qvars: Vec<(TyVar, Classes)> = Vec::new();
        ty.visit(&mut |t| {
            if let Type::Var(v) = t {
                if !qvars.iter().any(|(w, _)| w == v) {
                    qvars.push((*v, Classes::NONE));
                }
            }
        });
        for q in qvars.iter_mut() {
            q.1 = self.vars[q.0 .0 as usize].classes;
        }
        let scheme = Scheme { vars: qvars.clone(), ty };
        // Zonk the body; variables neither in the scheme nor let-quantified are ambiguous and
        // default (numeric to Int, else Unit) — their choice cannot change the result.
        let keep: FxHashSet<TyVar> = qvars.iter().map(|(v, _)| *v).chain(self.let_quantified.iter().copied()).collect();
        let vars = self.vars.clone();
        let mut defaulted: FxHashMap<TyVar, Type> = FxHashMap::default();
        let body = map_types(&body, &mut |t| {
            let z = zonk_with(&vars, t);
            z.map_vars(&mut |v| {
                if keep.contains(&v) {
                    None
                } else {
                    Some(defaulted.entry(v).or_insert_with(|| default_for(vars[v.0 as usize].classes)).clone())
                }
            })
        });
        Ok((body, scheme))
    }

    // ---- substitution ------------------------------------------------------------------------

    /// Follows links at the top; normalises `Delta` of a resolved function or tuple.
    fn resolve(&self, t: &Type) -> Type {
        let mut t = t.clone();
        loop {
            match &t {
                Type::Var(v) => match &self.vars[v.0 as usize].link {
                    Some(u) => t = u.clone(),
                    None => return t,
                },
                Type::Delta(inner) => {
                    let r = self.resolve(inner);
                    return match r {
                        Type::Fun(..) | Type::Tuple(_) => Type::delta(&self.zonk(&r)),
                        _ => Type::Delta(Rc::new(r)),
                    };
                }
                _ => return t,
            }
        }
    }

    fn zonk(&self, t: &Type) -> Type {
        zonk_with(&self.vars, t)
    }

    fn occurs(&self, v: TyVar, t: &Type) -> bool {
        let mut found = false;
        self.free_vars(t, &mut |w| found |= w == v);
        found
    }

    /// Calls `f` on each unbound variable reachable from `t`, following links. Each linked variable
    /// is entered once, so this is linear in the size of the type's graph, not of its expansion.
    fn free_vars(&self, t: &Type, f: &mut impl FnMut(TyVar)) {
        let mut seen: FxHashSet<TyVar> = FxHashSet::default();
        let mut stack = vec![t.clone()];
        while let Some(t) = stack.pop() {
            t.visit(&mut |u| {
                if let Type::Var(w) = u {
                    if seen.insert(*w) {
                        match &self.vars[w.0 as usize].link {
                            Some(l) => stack.push(l.clone()),
                            None => f(*w),
                        }
                    }
                }
            });
        }
    }

    /// Is the fully substituted `t` larger than `TYPE_SIZE_LIMIT` nodes? Stops counting at the limit.
    fn too_big(&self, t: &Type) -> bool {
        fn count(inf: &Infer, t: &Type, n: &mut usize) {
            if *n > TYPE_SIZE_LIMIT {
                return;
            }
            *n += 1;
            match t {
                Type::Var(v) => {
                    if let Some(l) = &inf.vars[v.0 as usize].link {
                        *n -= 1;
                        count(inf, l, n)
                    }
                }
                Type::Real | Type::Int | Type::Bool | Type::Unit => {}
                Type::Array(a) | Type::Bag(a) | Type::Group(a) | Type::Dual(a) | Type::Delta(a) => count(inf, a, n),
                Type::Map(a, b) | Type::Fun(a, b) => {
                    count(inf, a, n);
                    count(inf, b, n)
                }
                Type::Tuple(ts) => ts.iter().for_each(|x| count(inf, x, n)),
            }
        }
        let mut n = 0;
        count(self, t, &mut n);
        n > TYPE_SIZE_LIMIT
    }

    fn check_size(&self, t: &Type, span: Span) -> Res<()> {
        if self.too_big(t) {
            return Err(Diagnostic::error(
                span,
                format!("the type of this expression is too large (more than {TYPE_SIZE_LIMIT} parts)"),
            ));
        }
        Ok(())
    }

    fn unify(&mut self, a: &Type, b: &Type) -> Result<(), UErr> {
        let a = self.resolve(a);
        let b = self.resolve(b);
        match (&a, &b) {
            (Type::Var(x), Type::Var(y)) if x == y => Ok(()),
            (Type::Var(x), _) => self.bind(*x, &b).map_err(|e| e.var_found(true)),
            (_, Type::Var(y)) => self.bind(*y, &a).map_err(|e| e.var_found(false)),
            (Type::Real, Type::Real) | (Type::Int, Type::Int) | (Type::Bool, Type::Bool) | (Type::Unit, Type::Unit) => {
                Ok(())
            }
            (Type::Tuple(xs), Type::Unit) | (Type::Unit, Type::Tuple(xs)) if xs.is_empty() => Ok(()),
            (Type::Array(x), Type::Array(y))
            | (Type::Bag(x), Type::Bag(y))
            | (Type::Group(x), Type::Group(y))
            | (Type::Dual(x), Type::Dual(y)) => self.unify(x, y),
            (Type::Map(k1, v1), Type::Map(k2, v2)) | (Type::Fun(k1, v1), Type::Fun(k2, v2)) => {
                self.unify(k1, k2)?;
                self.unify(v1, v2)
            }
            (Type::Tuple(xs), Type::Tuple(ys)) if xs.len() == ys.len() => {
                for (x, y) in xs.iter().zip(ys.iter()) {
                    self.unify(x, y)?;
                }
                Ok(())
            }
            (Type::Delta(x), Type::Delta(y)) => self.unify(x, y),
            (Type::Delta(x), other) | (other, Type::Delta(x)) => self.unify_delta(x, other),
            _ => Err(UErr::Mismatch),
        }
    }

    /// `Delta x = other` where `x` is still unknown: `other`'s shape fixes `x`'s shape.
    fn unify_delta(&mut self, x: &Type, other: &Type) -> Result<(), UErr> {
        let x = self.resolve(x);
        let Type::Var(v) = x else { return Err(UErr::Mismatch) };
        let shape = match other {
            Type::Fun(..) => {
                let a = self.fresh(Classes::NONE);
                let b = self.fresh(Classes::NONE);
                Type::fun(a, b)
            }
            Type::Tuple(ts) => Type::tuple((0..ts.len()).map(|_| self.fresh(Classes::NONE)).collect()),
            _ => return Err(UErr::Mismatch),
        };
        self.bind(v, &shape)?;
        let d = Type::delta(&self.zonk(&shape));
        self.unify(&d, other)
    }

    fn bind(&mut self, v: TyVar, t: &Type) -> Result<(), UErr> {
        if let Type::Var(w) = t {
            if *w == v {
                return Ok(());
            }
        }
        if self.occurs(v, t) {
            return Err(UErr::Occurs(v, t.clone()));
        }
        let info = self.vars[v.0 as usize].clone();
        self.require(t, info.classes)?;
        // Lower the levels of variables in t to v's level (for generalisation).
        let mut free = Vec::new();
        self.free_vars(t, &mut |w| free.push(w));
        for w in free {
            let l = &mut self.vars[w.0 as usize].level;
            if *l > info.level {
                *l = info.level;
            }
        }
        self.vars[v.0 as usize].link = Some(t.clone());
        Ok(())
    }

    /// Checks that `t` is in every class of `c`, pushing the classes into its variables.
    fn require(&mut self, t: &Type, c: Classes) -> Result<(), UErr> {
        if c.is_empty() {
            return Ok(());
        }
        let t = self.resolve(t);
        let fail = || Err(UErr::Class { classes: c, ty: t.clone(), var_found: true });
        match &t {
            Type::Var(w) => {
                let i = w.0 as usize;
                self.vars[i].classes = self.vars[i].classes.union(c);
                Ok(())
            }
            Type::Int => Ok(()),
            Type::Real => {
                if c.contains(Classes::KEY) {
                    fail()
                } else {
                    Ok(())
                }
            }
            Type::Bool | Type::Unit => {
                if c.contains(Classes::NUM) {
                    fail()
                } else {
                    Ok(())
                }
            }
            Type::Tuple(ts) => {
                if c.contains(Classes::NUM) || c.contains(Classes::BASE) {
                    return fail();
                }
                let inner = Classes(c.0 & (Classes::EQ.0 | Classes::KEY.0 | Classes::FO.0));
                for x in ts.iter() {
                    self.require(x, inner)?;
                }
                Ok(())
            }
            Type::Fun(..) => fail(),
            Type::Array(x) => {
                if c.contains(Classes::NUM) || c.contains(Classes::EQ) || c.contains(Classes::KEY) {
                    return fail();
                }
                self.require(x, Classes(c.0 & Classes::FO.0))
            }
            // Bags and maps are comparable (`==`), never keys; a map's values must be comparable.
            Type::Bag(x) => {
                if c.contains(Classes::NUM) || c.contains(Classes::KEY) {
                    return fail();
                }
                self.require(x, Classes(c.0 & Classes::FO.0))
            }
            Type::Map(k, x) => {
                if c.contains(Classes::NUM) || c.contains(Classes::KEY) {
                    return fail();
                }
                self.require(k, Classes(c.0 & Classes::FO.0))?;
                self.require(x, Classes(c.0 & (Classes::FO.0 | Classes::EQ.0)))
            }
            Type::Group(_) | Type::Dual(_) | Type::Delta(_) => {
                if c.contains(Classes::NUM)
                    || c.contains(Classes::EQ)
                    || c.contains(Classes::KEY)
                    || c.contains(Classes::FO)
                {
                    fail()
                } else {
                    Ok(())
                }
            }
        }
    }

    /// A type for a message; a huge one is not expanded.
    fn show(&self, p: &mut TypePrinter, t: &Type) -> String {
        if self.too_big(t) {
            "<a type too large to show>".to_string()
        } else {
            p.ty(&self.zonk(t))
        }
    }

    fn err_unify(&self, e: UErr, span: Span, expected: &Type, found: &Type) -> Diagnostic {
        let mut p = TypePrinter::new();
        match e {
            UErr::Mismatch => {
                let exp = self.show(&mut p, expected);
                let fnd = self.show(&mut p, found);
                Diagnostic::error(span, format!("type mismatch: expected {exp}, found {fnd}"))
            }
            UErr::Occurs(v, t) => {
                let var = p.ty(&Type::Var(v));
                let ty = self.show(&mut p, &t);
                Diagnostic::error(
                    span,
                    format!("infinite type: {var} would have to be {ty}, which contains {var} itself"),
                )
            }
            UErr::Class { classes, ty, var_found } => {
                let ty = self.show(&mut p, &ty);
                if var_found {
                    Diagnostic::error(span, format!("type mismatch: expected {ty}, found {}", classes.describe()))
                } else {
                    Diagnostic::error(span, format!("type mismatch: expected {}, found {ty}", classes.describe()))
                }
            }
        }
    }

    fn expect(&mut self, found: &Type, expected: &Type, span: Span) -> Res<()> {
        self.unify(found, expected).map_err(|e| self.err_unify(e, span, expected, found))
    }

    fn expect_class(&mut self, t: &Type, c: Classes, span: Span, what: &str) -> Res<()> {
        self.require(t, c).map_err(|_| {
            let mut p = TypePrinter::new();
            Diagnostic::error(
                span,
                format!("{what} must be {}, but this has type {}", c.describe(), self.show(&mut p, t)),
            )
        })
    }

    /// `f -1` is `f - 1`: when a function is the left operand of a subtraction of a number
    /// literal, say how to pass a negative number instead.
    fn negative_argument_hint(&self, op: BinOp, lhs: &Type, rhs: &E, d: Diagnostic) -> Diagnostic {
        let lit = match &rhs.kind {
            ExprKind::Lit(Lit::Int(n)) => n.to_string(),
            ExprKind::Lit(Lit::Real(r)) => format!("{r:?}"),
            _ => return d,
        };
        if op != BinOp::Sub || !matches!(self.resolve(lhs), Type::Fun(..)) {
            return d;
        }
        d.with_note(format!(
            "`-{lit}` after a function is a subtraction; to pass a negative number, write it in parentheses: `(-{lit})`"
        ))
    }

    fn instantiate(&mut self, s: &Scheme) -> Type {
        let mut map: Vec<(TyVar, Type)> = Vec::new();
        for (v, c) in &s.vars {
            let f = self.fresh(*c);
            map.push((*v, f));
        }
        s.ty.map_vars(&mut |v| map.iter().find(|(w, _)| *w == v).map(|(_, t)| t.clone()))
    }

    /// Annotation types: their `'a` variables are fresh per definition.
    fn annotation(&mut self, t: &Type) -> Type {
        let mut out = t.clone();
        let mut vars = Vec::new();
        t.visit(&mut |u| {
            if let Type::Var(v) = u {
                if v.0 >= ANN_VAR_BASE {
                    vars.push(v.0)
                }
            }
        });
        for v in vars {
            if !self.ann.contains_key(&v) {
                let f = self.fresh(Classes::NONE);
                let Type::Var(fv) = f else { unreachable!() };
                self.ann.insert(v, fv);
            }
        }
        out = out.map_vars(&mut |v| self.ann.get(&v.0).map(|w| Type::Var(*w)));
        out
    }

    fn solve_deferred(&mut self, final_pass: bool) -> Res<()> {
        loop {
            let mut progress = false;
            let pending = std::mem::take(&mut self.deferred);
            for d in pending {
                let t = self.resolve(&d.tuple);
                match &t {
                    Type::Var(_) => self.deferred.push(d),
                    _ => {
                        self.projection(&t, d.index, &d.result, d.span)?;
                        progress = true;
                    }
                }
            }
            if !progress {
                break;
            }
        }
        if final_pass {
            if let Some(d) = self.deferred.first() {
                return Err(Diagnostic::error(
                    d.span,
                    format!("cannot tell which tuple type `.{}` projects from here", d.index + 1),
                )
                .with_note("add a type annotation, e.g. `fun (p : Real * Real) -> ...`"));
            }
        }
        Ok(())
    }

    fn projection(&mut self, t: &Type, index: usize, result: &Type, span: Span) -> Res<()> {
        match t {
            Type::Tuple(ts) => {
                if index >= ts.len() {
                    return Err(Diagnostic::error(
                        span,
                        format!("this tuple has {} components, so `.{}` does not exist", ts.len(), index + 1),
                    ));
                }
                let c = ts[index].clone();
                self.expect(&c, result, span)
            }
            other => {
                let mut p = TypePrinter::new();
                Err(Diagnostic::error(
                    span,
                    format!(
                        "`.{}` projects a tuple component, but this has type {}",
                        index + 1,
                        self.show(&mut p, other)
                    ),
                ))
            }
        }
    }

    // ---- patterns ----------------------------------------------------------------------------

    /// Assigns types to a pattern's binders (monomorphically) and returns the pattern's type.
    fn pattern(&mut self, p: &Pat) -> Res<(Rc<Pat>, Type)> {
        let (kind, ty) = match &p.kind {
            PatKind::Var(n, id) => {
                let t = self.fresh(Classes::NONE);
                self.locals.insert(*id, Scheme::mono(t.clone()));
                (PatKind::Var(n.clone(), *id), t)
            }
            PatKind::Wild => (PatKind::Wild, self.fresh(Classes::NONE)),
            PatKind::Unit => (PatKind::Unit, Type::Unit),
            PatKind::Tuple(ps) => {
                let mut out = Vec::new();
                let mut ts = Vec::new();
                for q in ps.iter() {
                    let (qq, t) = self.pattern(q)?;
                    out.push((*qq).clone());
                    ts.push(t);
                }
                (PatKind::Tuple(out.into()), Type::tuple(ts))
            }
        };
        if let Some(a) = &p.ann {
            let at = self.annotation(a);
            self.expect(&ty, &at, p.span)?;
        }
        Ok((Rc::new(Pat { kind, span: p.span, ty: ty.clone(), ann: None }), ty))
    }

    // ---- expressions -------------------------------------------------------------------------

    fn infer(&mut self, e: &E) -> Res<E> {
        let (kind, ty) = self.infer_kind(e)?;
        Ok(Expr::new(kind, e.span, ty))
    }

    fn infer_kind(&mut self, e: &E) -> Res<(ExprKind, Type)> {
        let span = e.span;
        Ok(match &e.kind {
            ExprKind::Var(n, r) => {
                let t = match r {
                    VarRef::Local(id) => {
                        let s = self
                            .locals
                            .get(id)
                            .cloned()
                            .ok_or_else(|| Diagnostic::error(span, format!("internal: unbound local `{n}`")))?;
                        self.instantiate(&s)
                    }
                    VarRef::Global(d) => {
                        let s = self.globals[d.0 as usize].clone();
                        self.instantiate(&s)
                    }
                    VarRef::Builtin(b) => self.instantiate(&builtin_scheme(*b)),
                };
                (e.kind.clone(), t)
            }
            ExprKind::Lit(l) => {
                let t = match l {
                    Lit::Int(_) => self.fresh(Classes::NUM),
                    Lit::Real(_) => Type::Real,
                    Lit::Bool(_) => Type::Bool,
                    Lit::Unit => Type::Unit,
                };
                (e.kind.clone(), t)
            }
            ExprKind::Lam(p, b) => {
                let (p2, pt) = self.pattern(p)?;
                let b2 = self.infer(b)?;
                let t = Type::fun(pt, b2.ty.clone());
                (ExprKind::Lam(p2, b2), t)
            }
            ExprKind::App(f, a) => {
                let f2 = self.infer(f)?;
                let ft = self.resolve(&f2.ty);
                if let Type::Dual(s) = &ft {
                    // A dual applied to a tangent is a real (docs/language.md §5).
                    let a2 = self.infer(a)?;
                    self.expect(&a2.ty, s, a.span)?;
                    return Ok((ExprKind::App(f2, a2), Type::Real));
                }
                match &ft {
                    Type::Fun(p, r) => {
                        let a2 = self.infer(a)?;
                        self.expect(&a2.ty, p, a.span)?;
                        (ExprKind::App(f2, a2), (**r).clone())
                    }
                    Type::Var(v) if !self.vars[v.0 as usize].classes.is_empty() => {
                        // Every class excludes function types: `3 (4)`, `inc 1 2`.
                        let c = self.vars[v.0 as usize].classes;
                        return Err(Diagnostic::error(
                            f.span,
                            format!("this expression has {} and cannot be applied to an argument", c.describe()),
                        )
                        .with_label(a.span, "extra argument"));
                    }
                    Type::Var(_) => {
                        let a2 = self.infer(a)?;
                        let r = self.fresh(Classes::NONE);
                        let want = Type::fun(a2.ty.clone(), r.clone());
                        self.expect(&ft, &want, f.span)?;
                        (ExprKind::App(f2, a2), r)
                    }
                    other => {
                        let mut p = TypePrinter::new();
                        let what = match &f.kind {
                            ExprKind::Var(n, _) => format!("`{n}`"),
                            _ => "this expression".to_string(),
                        };
                        return Err(Diagnostic::error(
                            f.span,
                            format!(
                                "{what} has type {} and cannot be applied to an argument",
                                self.show(&mut p, other)
                            ),
                        )
                        .with_label(a.span, "extra argument"));
                    }
                }
            }
            ExprKind::Let(p, rhs, body) => {
                // The rhs and the pattern are typed one level deeper; what stays there after
                // unification belongs to the rhs alone and is generalised per binder.
                self.level += 1;
                let rhs2 = self.infer(rhs)?;
                let (p2, pt) = self.pattern(p)?;
                self.expect(&rhs2.ty, &pt, rhs.span)?;
                self.solve_deferred(false)?;
                self.level -= 1;
                self.generalise_pattern(&p2)?;
                let body2 = self.infer(body)?;
                let t = body2.ty.clone();
                (ExprKind::Let(p2, rhs2, body2), t)
            }
            ExprKind::If(c, a, b) => {
                let c2 = self.infer(c)?;
                self.expect(&c2.ty, &Type::Bool, c.span)?;
                let a2 = self.infer(a)?;
                let b2 = self.infer(b)?;
                self.expect(&b2.ty, &a2.ty, b.span)?;
                let t = a2.ty.clone();
                (ExprKind::If(c2, a2, b2), t)
            }
            ExprKind::Bin(op, a, b) => {
                let a2 = self.infer(a)?;
                let b2 = self.infer(b)?;
                let t = match op {
                    BinOp::Or | BinOp::And => {
                        self.expect(&a2.ty, &Type::Bool, a.span)?;
                        self.expect(&b2.ty, &Type::Bool, b.span)?;
                        Type::Bool
                    }
                    BinOp::Eq | BinOp::Ne => {
                        self.expect_class(&a2.ty, Classes::EQ, a.span, "the operands of `==` and `!=`")?;
                        self.expect(&b2.ty, &a2.ty, b.span)?;
                        Type::Bool
                    }
                    BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                        self.expect_class(&a2.ty, Classes::NUM, a.span, "the operands of a comparison")?;
                        self.expect(&b2.ty, &a2.ty, b.span)?;
                        Type::Bool
                    }
                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => {
                        self.expect_class(&a2.ty, Classes::NUM, a.span, "the operands of arithmetic")
                            .map_err(|d| self.negative_argument_hint(*op, &a2.ty, b, d))?;
                        self.expect(&b2.ty, &a2.ty, b.span)?;
                        a2.ty.clone()
                    }
                    BinOp::Rem => {
                        self.expect(&a2.ty, &Type::Int, a.span)?;
                        self.expect(&b2.ty, &Type::Int, b.span)?;
                        Type::Int
                    }
                    BinOp::Pow => {
                        self.expect(&a2.ty, &Type::Real, a.span)?;
                        self.expect(&b2.ty, &Type::Real, b.span)?;
                        Type::Real
                    }
                    BinOp::Oplus => {
                        let d = Type::delta(&a2.ty);
                        self.expect(&b2.ty, &d, b.span)?;
                        a2.ty.clone()
                    }
                    BinOp::Ominus => {
                        self.expect(&b2.ty, &a2.ty, b.span)?;
                        Type::delta(&a2.ty)
                    }
                };
                (ExprKind::Bin(*op, a2, b2), t)
            }
            ExprKind::Neg(a) => {
                let a2 = self.infer(a)?;
                self.expect_class(&a2.ty, Classes::NUM, a.span, "the operand of `-`")?;
                let t = a2.ty.clone();
                (ExprKind::Neg(a2), t)
            }
            ExprKind::Not(a) => {
                let a2 = self.infer(a)?;
                self.expect(&a2.ty, &Type::Bool, a.span)?;
                (ExprKind::Not(a2), Type::Bool)
            }
            ExprKind::Tuple(xs) => {
                let mut out = Vec::new();
                for x in xs {
                    out.push(self.infer(x)?);
                }
                let t = Type::tuple(out.iter().map(|x| x.ty.clone()).collect());
                (ExprKind::Tuple(out), t)
            }
            ExprKind::Proj(a, i) => {
                let a2 = self.infer(a)?;
                let r = self.fresh(Classes::NONE);
                let t = self.resolve(&a2.ty);
                match t {
                    Type::Var(_) => self.deferred.push(Deferred { tuple: t, index: *i, result: r.clone(), span }),
                    _ => self.projection(&t, *i, &r, span)?,
                }
                (ExprKind::Proj(a2, *i), r)
            }
            ExprKind::Index(a, i) => {
                let a2 = self.infer(a)?;
                let i2 = self.infer(i)?;
                let el = self.fresh(Classes::NONE);
                self.expect(&a2.ty, &Type::array(el.clone()), a.span)?;
                self.expect(&i2.ty, &Type::Int, i.span)?;
                (ExprKind::Index(a2, i2), el)
            }
            ExprKind::Array(xs) => {
                let el = self.fresh(Classes::NONE);
                let mut out = Vec::new();
                for x in xs {
                    let x2 = self.infer(x)?;
                    self.expect(&x2.ty, &el, x.span)?;
                    out.push(x2);
                }
                (ExprKind::Array(out), Type::array(el))
            }
            ExprKind::Bag(xs) => {
                let el = self.fresh(Classes::KEY);
                let mut out = Vec::new();
                for (x, n) in xs {
                    let x2 = self.infer(x)?;
                    self.expect_class(&x2.ty, Classes::KEY, x.span, "bag elements")?;
                    self.expect(&x2.ty, &el, x.span)?;
                    out.push((x2, *n));
                }
                (ExprKind::Bag(out), Type::Bag(Rc::new(el)))
            }
            ExprKind::Map(xs) => {
                let k = self.fresh(Classes::KEY);
                let v = self.fresh(Classes::NONE);
                let mut out = Vec::new();
                for (a, b) in xs {
                    let a2 = self.infer(a)?;
                    self.expect_class(&a2.ty, Classes::KEY, a.span, "map keys")?;
                    self.expect(&a2.ty, &k, a.span)?;
                    let b2 = self.infer(b)?;
                    self.expect(&b2.ty, &v, b.span)?;
                    out.push((a2, b2));
                }
                (ExprKind::Map(out), Type::Map(Rc::new(k), Rc::new(v)))
            }
            ExprKind::Pullback(f, w) => {
                // Mak–Ong Fig. 2: f : s ⇒ t, w : Ω t ⊢ (Ω f)·w : Ω s.
                let f2 = self.infer(f)?;
                let s = self.fresh(Classes::NONE);
                let t = self.fresh(Classes::NONE);
                self.expect(&f2.ty, &Type::fun(s.clone(), t.clone()), f.span)?;
                let w2 = self.infer(w)?;
                self.expect(&w2.ty, &Type::omega(t), w.span)?;
                (ExprKind::Pullback(f2, w2), Type::omega(s))
            }
            ExprKind::Dual(p, body, w) => {
                // Mak–Ong Fig. 2: x : σ ⊢ S : τ, S' : τ*, x ∈ lin(S) ⊢ (λx.S)*·S' : σ*.
                let (p2, s) = self.pattern(p)?;
                let b2 = self.infer(body)?;
                let w2 = self.infer(w)?;
                self.expect(&w2.ty, &Type::dual(b2.ty.clone()), w.span)?;
                lin::check_dual(&p2, &b2)?;
                (ExprKind::Dual(p2, b2, w2), Type::dual(s))
            }
            ExprKind::Derive(a) => {
                if let Some((n, s)) = lin::first_free_local(a) {
                    return Err(Diagnostic::error(
                        s,
                        format!("`derive` needs a closed term, but `{n}` is a local variable here"),
                    )
                    .with_label(span, "in this `derive`"));
                }
                let a2 = self.infer(a)?;
                let t = Type::delta(&a2.ty);
                (ExprKind::Derive(a2), t)
            }
            ExprKind::Ann(a, t) => {
                let a2 = self.infer(a)?;
                let at = self.annotation(t);
                self.expect(&a2.ty, &at, a.span)?;
                // The annotation has done its job; later passes never see it.
                return Ok((a2.kind.clone(), a2.ty.clone()));
            }
            ExprKind::Zero | ExprKind::Sum(..) => {
                return Err(Diagnostic::error(span, "internal: a semantic term reached the type checker"));
            }
        })
    }

    /// Refuses a term in which some node's type is too large (before anything expands it).
    fn check_sizes(&self, e: &E) -> Res<()> {
        self.check_size(&e.ty, e.span)?;
        let mut r = Ok(());
        crate::lin::for_each_child(e, &mut |c| {
            if r.is_ok() {
                r = self.check_sizes(c);
            }
        });
        r
    }

    /// Generalises the variables of each binder of a `let` pattern above the current level.
    fn generalise_pattern(&mut self, p: &Pat) -> Res<()> {
        for (_, id) in p.binders() {
            let Some(s) = self.locals.get(&id).cloned() else { continue };
            self.check_size(&s.ty, p.span)?;
            let t = self.zonk(&s.ty);
            let mut qs: Vec<(TyVar, Classes)> = Vec::new();
            let pending: Vec<Type> = self.deferred.iter().map(|d| self.zonk(&d.tuple)).collect();
            t.visit(&mut |u| {
                if let Type::Var(v) = u {
                    let info = &self.vars[v.0 as usize];
                    let in_pending = pending.iter().any(|pt| {
                        let mut f = false;
                        pt.visit(&mut |x| {
                            if x == u {
                                f = true
                            }
                        });
                        f
                    });
                    if info.level > self.level && !in_pending && !qs.iter().any(|(w, _)| w == v) {
                        qs.push((*v, info.classes));
                    }
                }
            });
            for (v, _) in &qs {
                self.let_quantified.insert(*v);
            }
            self.locals.insert(id, Scheme { vars: qs, ty: t });
        }
        Ok(())
    }
}

fn builtin_scheme(b: Builtin) -> Scheme {
    thread_local! {
        static CACHE: std::cell::RefCell<FxHashMap<Builtin, Scheme>> = std::cell::RefCell::new(FxHashMap::default());
    }
    CACHE.with(|c| c.borrow_mut().entry(b).or_insert_with(|| b.scheme()).clone())
}

fn zonk_with(vars: &[VarInfo], t: &Type) -> Type {
    t.map_vars(&mut |v| vars[v.0 as usize].link.as_ref().map(|u| zonk_with(vars, u)))
}

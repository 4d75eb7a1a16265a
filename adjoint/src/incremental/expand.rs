//! ILC constructs rewritten into ordinary terms, so the compiler lowers derivative code exactly
//! as it lowers primal code (`anf::lower` never sees them):
//!
//! - `derive e` becomes its total derivative (`derive_closed`: Derive, inlining, nil propagation,
//!   simplification);
//! - `f ⊕ df` at a function type becomes `λv. f v ⊕ df v 0_v` (ILC Def. 2.7), tuples
//!   componentwise;
//! - `g ⊖ f` at a function type becomes `λx dx. g (x ⊕ dx) ⊖ f x` (ILC Def. 2.7);
//! - `nil f` at a function type becomes f's derivative (Theorem 2.10) where f's code is known
//!   statically (a λ, a definition, a builtin or a builtin's partial application with an efficient
//!   derivative: what the interpreter derives at run time), else the derivative that recomputes,
//!   `λx dx. f (x ⊕ dx) ⊖ f x` (Def. 2.7 read backwards; correct for every function).
//!
//! Every spliced term is copied with fresh binders, so the result binds each `LocalId` once
//! (`anf::mono::verify`). `nil` at types without functions, `gchange`, `replace`, `⊕`/`⊖` at base
//! types and the derivative primitives stay: lowering compiles them.

use anf::mono::{MonoDef, MonoProgram};
use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::types::Type;
use frontend::{Diagnostic, Span};
use rustc_hash::FxHashMap;

use super::term::*;
use super::{derive_closed, derive_open, table, Cx};

/// `program` with every ILC construct that lowering does not compile rewritten (module comment).
pub fn expand(program: &MonoProgram) -> Result<MonoProgram, Diagnostic> {
    if !program.defs.iter().any(|d| needs_expansion(&d.body)) {
        return Ok(program.clone());
    }
    let mut next = program.next_local;
    let mut defs = Vec::with_capacity(program.defs.len());
    for d in &program.defs {
        let mut x = Expander { program, next };
        let body = x.go(&d.body)?;
        next = x.next;
        defs.push(MonoDef { body, ..d.clone() });
    }
    Ok(MonoProgram { defs, next_local: next, interpreted: program.interpreted.clone() })
}

/// Does `e` hold a construct `expand` rewrites?
pub fn needs_expansion(e: &E) -> bool {
    let here = match &e.kind {
        ExprKind::Derive(_) => true,
        ExprKind::Bin(BinOp::Oplus | BinOp::Ominus, a, _) => function_in_tuples(&a.ty),
        ExprKind::Var(_, VarRef::Builtin(Builtin::Nil)) => match &e.ty {
            Type::Fun(a, _) => function_in_tuples(a),
            _ => false,
        },
        _ => false,
    };
    let mut found = here;
    if !found {
        frontend::lin::for_each_child(e, &mut |c| found = found || needs_expansion(c));
    }
    found
}

/// Is a function type part of `t`'s tuple structure (where `⊕`, `⊖` and `nil` act componentwise)?
pub fn function_in_tuples(t: &Type) -> bool {
    match t {
        Type::Fun(..) => true,
        Type::Tuple(ts) => ts.iter().any(function_in_tuples),
        _ => false,
    }
}

struct Expander<'p> {
    program: &'p MonoProgram,
    next: u32,
}

impl Expander<'_> {
    fn fresh(&mut self) -> LocalId {
        self.next = self.next.max(self.program.next_local);
        frontend::syntax::fresh_local(&mut self.next)
    }

    /// A copy of `e` with fresh binders.
    fn refresh(&mut self, e: &E) -> E {
        let mut cx = Cx::new(self.program, self.next);
        let out = copy_fresh(e, &FxHashMap::default(), &mut cx);
        self.next = cx.next_local();
        out
    }

    fn go(&mut self, e: &E) -> Result<E, Diagnostic> {
        if !needs_expansion(e) {
            return Ok(e.clone());
        }
        let span = e.span;
        match &e.kind {
            ExprKind::Derive(inner) => {
                let mut next = self.next.max(self.program.next_local);
                let d = derive_closed(self.program, inner, &mut next).map_err(|d| locate(d, span))?;
                self.next = next;
                let d = self.refresh(&d);
                self.go(&d)
            }
            ExprKind::App(f, a) if is_nil_builtin(f) && function_in_tuples(&a.ty) => {
                let a2 = self.go(a)?;
                self.nil_of(a, a2, span)
            }
            ExprKind::Var(_, VarRef::Builtin(Builtin::Nil)) => {
                // `nil` as a value at a type with functions: λf. nil f.
                let Type::Fun(a, _) = &e.ty else { return Ok(e.clone()) };
                let f = self.fresh();
                let fv = var("f".into(), f, (**a).clone(), span);
                let body = self.nil_of(&fv.clone(), fv, span)?;
                Ok(lam(pat_var("f".into(), f, (**a).clone(), span), body, span))
            }
            ExprKind::Bin(BinOp::Oplus, a, da) if function_in_tuples(&a.ty) => {
                let (a2, da2) = (self.go(a)?, self.go(da)?);
                self.oplus_at(a2, da2, &a.ty, span)
            }
            ExprKind::Bin(BinOp::Ominus, b, a) if function_in_tuples(&b.ty) => {
                let (b2, a2) = (self.go(b)?, self.go(a)?);
                self.ominus_at(b2, a2, &b.ty, span)
            }
            _ => {
                let mut err = None;
                let out = rebuild(e, &mut |c| match self.go(c) {
                    Ok(c2) => c2,
                    Err(d) => {
                        err.get_or_insert(d);
                        c.clone()
                    }
                });
                match err {
                    Some(d) => Err(d),
                    None => Ok(out),
                }
            }
        }
    }

    /// Binds `e` to a fresh variable (unless it is one) and gives the variable.
    fn bind(&mut self, e: E, name: &str, binds: &mut Vec<(std::rc::Rc<Pat>, E)>) -> E {
        if matches!(e.kind, ExprKind::Var(..)) {
            return e;
        }
        let x = self.fresh();
        let span = e.span;
        let ty = e.ty.clone();
        binds.push((pat_var(name.into(), x, ty.clone(), span), e));
        var(name.into(), x, ty, span)
    }

    /// `nil v` at a type with functions; `orig` is `v` before expansion (what Derive reads).
    fn nil_of(&mut self, orig: &E, v: E, span: Span) -> Result<E, Diagnostic> {
        let ty = v.ty.clone();
        match &ty {
            t if !function_in_tuples(t) => Ok(nil(v, span)),
            Type::Tuple(ts) => {
                let mut binds = Vec::new();
                let t = self.bind(v, "t", &mut binds);
                let mut parts = Vec::new();
                for (i, c) in ts.iter().enumerate() {
                    let p = Expr::new(ExprKind::Proj(t.clone(), i), span, c.clone());
                    parts.push(self.nil_of(&p.clone(), p, span)?);
                }
                let body = Expr::new(ExprKind::Tuple(parts), span, Type::delta(&ty));
                Ok(wrap(binds, body, span))
            }
            Type::Fun(..) => self.nil_fun(orig, v, span),
            _ => Ok(nil(v, span)),
        }
    }

    /// `nil f` for a function `f` (Theorem 2.10: its derivative).
    fn nil_fun(&mut self, orig: &E, v: E, span: Span) -> Result<E, Diagnostic> {
        match &orig.kind {
            // Derive(λp. t) with the free variables' changes nil.
            ExprKind::Lam(..) => return self.open_derivative(orig, Vec::new(), span),
            ExprKind::Var(_, VarRef::Global(_)) => {
                let mut next = self.next.max(self.program.next_local);
                let d = derive_closed(self.program, orig, &mut next).map_err(|d| locate(d, span))?;
                self.next = next;
                let d = self.refresh(&d);
                return self.go(&d);
            }
            ExprKind::Var(_, VarRef::Builtin(b)) if !b.is_internal() && table::has_efficient_derivative(*b, 0) => {
                let mut next = self.next.max(self.program.next_local);
                let d = derive_closed(self.program, orig, &mut next).map_err(|d| locate(d, span))?;
                self.next = next;
                return self.go(&d);
            }
            ExprKind::App(..) => {
                let (head, args) = spine(orig);
                if let ExprKind::Var(_, VarRef::Builtin(b)) = &head.kind {
                    if !b.is_internal() && args.len() < b.arity() && table::has_efficient_derivative(*b, args.len()) {
                        // λz. b y1 .. yk z with the yi bound to the (expanded) arguments.
                        let mut binds = Vec::new();
                        let mut ys = Vec::new();
                        for a in &args {
                            let a2 = self.go(a)?;
                            let y = self.fresh();
                            binds.push((pat_var("y".into(), y, a.ty.clone(), a.span), a2));
                            ys.push(var("y".into(), y, a.ty.clone(), a.span));
                        }
                        let Type::Fun(zt, _) = &orig.ty else { return Err(internal(span, "nil of a non-function")) };
                        let z = self.fresh();
                        let zv = var("z".into(), z, (**zt).clone(), span);
                        let body = app_n(head.clone(), ys.into_iter().chain([zv]), span);
                        let lam_ = lam(pat_var("z".into(), z, (**zt).clone(), span), body, span);
                        return self.open_derivative(&lam_, binds, span);
                    }
                }
            }
            _ => {}
        }
        self.recompute(v, span)
    }

    /// `let binds in let dy = nil y (each free y) in Derive(λ)`.
    fn open_derivative(&mut self, lam_: &E, binds: Vec<(std::rc::Rc<Pat>, E)>, span: Span) -> Result<E, Diagnostic> {
        let mut next = self.next.max(self.program.next_local);
        let d = derive_open(self.program, lam_, &mut next).map_err(|d| locate(d, span))?;
        self.next = next;
        let term = self.refresh(&d.term);
        let mut body = self.go(&term)?;
        for (y, dy, ty) in d.frees.iter().rev() {
            if uses(&body, *dy) == 0 {
                continue;
            }
            let yv = var("y".into(), *y, ty.clone(), span);
            let n = self.nil_of(&yv.clone(), yv, span)?;
            body = let_(pat_var("dy".into(), *dy, Type::delta(ty), span), n, body, span);
        }
        Ok(wrap(binds, body, span))
    }

    /// `let f = v in λx dx. f (x ⊕ dx) ⊖ f x` (ILC Def. 2.7 read backwards).
    fn recompute(&mut self, v: E, span: Span) -> Result<E, Diagnostic> {
        let Type::Fun(a, b) = v.ty.clone() else { return Err(internal(span, "nil of a non-function")) };
        let mut binds = Vec::new();
        let f = self.bind(v, "f", &mut binds);
        let (x, dx) = (self.fresh(), self.fresh());
        let xv = var("x".into(), x, (*a).clone(), span);
        let dxv = var("dx".into(), dx, Type::delta(&a), span);
        let x1 = self.oplus_at(xv.clone(), dxv, &a, span)?;
        let new = app(f.clone(), x1, span);
        let old = app(f, xv, span);
        let body = self.ominus_at(new, old, &b, span)?;
        let l = lam(
            pat_var("x".into(), x, (*a).clone(), span),
            lam(pat_var("dx".into(), dx, Type::delta(&a), span), body, span),
            span,
        );
        Ok(wrap(binds, l, span))
    }

    /// `a ⊕ da` at `ty`.
    fn oplus_at(&mut self, a: E, da: E, ty: &Type, span: Span) -> Result<E, Diagnostic> {
        match ty {
            t if !function_in_tuples(t) => Ok(oplus(a, da, span)),
            Type::Tuple(ts) => {
                let mut binds = Vec::new();
                let av = self.bind(a, "p", &mut binds);
                let dv = self.bind(da, "dp", &mut binds);
                let mut parts = Vec::new();
                for (i, c) in ts.iter().enumerate() {
                    let x = Expr::new(ExprKind::Proj(av.clone(), i), span, c.clone());
                    let dx = Expr::new(ExprKind::Proj(dv.clone(), i), span, Type::delta(c));
                    parts.push(self.oplus_at(x, dx, c, span)?);
                }
                Ok(wrap(binds, Expr::new(ExprKind::Tuple(parts), span, ty.clone()), span))
            }
            // ILC Def. 2.7: f ⊕ df = λv. f v ⊕ df v 0_v
            Type::Fun(a_ty, b_ty) => {
                let mut binds = Vec::new();
                let f = self.bind(a, "f", &mut binds);
                let df = self.bind(da, "df", &mut binds);
                let v = self.fresh();
                let vv = var("v".into(), v, (**a_ty).clone(), span);
                let nv = self.nil_of(&vv.clone(), vv.clone(), span)?;
                let body = self.oplus_at(app(f, vv.clone(), span), app_n(df, [vv, nv], span), b_ty, span)?;
                Ok(wrap(binds, lam(pat_var("v".into(), v, (**a_ty).clone(), span), body, span), span))
            }
            _ => Ok(oplus(a, da, span)),
        }
    }

    /// `b ⊖ a` at `ty`.
    fn ominus_at(&mut self, b: E, a: E, ty: &Type, span: Span) -> Result<E, Diagnostic> {
        match ty {
            t if !function_in_tuples(t) => Ok(ominus(b, a, span)),
            Type::Tuple(ts) => {
                let mut binds = Vec::new();
                let bv = self.bind(b, "p", &mut binds);
                let av = self.bind(a, "q", &mut binds);
                let mut parts = Vec::new();
                for (i, c) in ts.iter().enumerate() {
                    let y = Expr::new(ExprKind::Proj(bv.clone(), i), span, c.clone());
                    let x = Expr::new(ExprKind::Proj(av.clone(), i), span, c.clone());
                    parts.push(self.ominus_at(y, x, c, span)?);
                }
                Ok(wrap(binds, Expr::new(ExprKind::Tuple(parts), span, Type::delta(ty)), span))
            }
            // ILC Def. 2.7: g ⊖ f = λx dx. g (x ⊕ dx) ⊖ f x
            Type::Fun(a_ty, b_ty) => {
                let mut binds = Vec::new();
                let g = self.bind(b, "g", &mut binds);
                let f = self.bind(a, "f", &mut binds);
                let (x, dx) = (self.fresh(), self.fresh());
                let xv = var("x".into(), x, (**a_ty).clone(), span);
                let dxv = var("dx".into(), dx, Type::delta(a_ty), span);
                let x1 = self.oplus_at(xv.clone(), dxv, a_ty, span)?;
                let body = self.ominus_at(app(g, x1, span), app(f, xv, span), b_ty, span)?;
                let l = lam(
                    pat_var("x".into(), x, (**a_ty).clone(), span),
                    lam(pat_var("dx".into(), dx, Type::delta(a_ty), span), body, span),
                    span,
                );
                Ok(wrap(binds, l, span))
            }
            _ => Ok(ominus(b, a, span)),
        }
    }
}

fn is_nil_builtin(f: &E) -> bool {
    matches!(f.kind, ExprKind::Var(_, VarRef::Builtin(Builtin::Nil)))
}

fn wrap(binds: Vec<(std::rc::Rc<Pat>, E)>, body: E, span: Span) -> E {
    binds.into_iter().rev().fold(body, |b, (p, rhs)| let_(p, rhs, b, span))
}

fn locate(d: Diagnostic, span: Span) -> Diagnostic {
    if d.span == Span::SYNTHETIC {
        Diagnostic { span, ..d }
    } else {
        d
    }
}

fn internal(span: Span, what: &str) -> Diagnostic {
    Diagnostic::error(span, format!("internal: {what}"))
}

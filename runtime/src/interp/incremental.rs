//! ILC in the reference interpreter: `derive e`, `nil`, `<+>`/`<->` at function types, and the
//! derivative primitives of `adjoint::incremental::table`.
//!
//! Change values (docs/language.md §6): a base type's change is `Value::Change` (`replace v` or
//! `gchange g dv`); a tuple's change is a tuple of changes; a function's change is a function of the
//! base input and its change (ILC Fig. 4a). The nil change of a function is its derivative (Theorem
//! 2.10): `Partial(NilFun, [f])`, which derives `f`'s code (a closure's λ, a builtin's table entry)
//! when applied, with the changes of the closure's free variables nil.
//!
//! A derivative primitive's fast path reads only changes; given `_` (the placeholder dead-code
//! elimination leaves for a base argument) where its slow path needs the base value, it fails with
//! `NEEDS_BASE`, and the caller (the incremental driver) runs the total derivative instead.

use std::rc::Rc;

use adjoint::incremental::{self as ilc, table};
use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::types::{Type, TypePrinter};
use frontend::{Diagnostic, Span};
use rustc_hash::FxHashMap;

use super::builtins::{call as call_builtin, fold_bag};
use super::groups::*;
use super::{EvalResult, Interp};
use crate::value::*;

/// The message of the error a derivative primitive reports when its fast path does not apply and
/// the base value it needs was eliminated.
pub const NEEDS_BASE: &str = "internal: this change needs a base value the self-maintainable derivative does not keep";

/// Is this the error of a derivative that needs its base inputs (see `NEEDS_BASE`)?
pub fn needs_base(d: &Diagnostic) -> bool {
    d.message == NEEDS_BASE
}

/// Caches of derived code, and fresh binders for the terms made at run time.
#[derive(Default)]
pub struct State {
    /// Next fresh `LocalId` (0: not yet taken from the program).
    next_local: u32,
    /// `Derive(λp. body)` per closure code (param, body pointers), kept alive with the key.
    closures: FxHashMap<(usize, usize), Rc<OpenDerivative>>,
    /// `Derive(λz. b y1 .. yk z)` per builtin, type and number of fixed arguments.
    partials: FxHashMap<(Builtin, String, usize), Rc<OpenDerivative>>,
    /// The value of `derive e` per closed term `e` (kept alive with the key).
    derived: FxHashMap<usize, (E, Value)>,
    /// Synthetic λs for `<+>` (false) and `<->` (true) at a function type.
    fun_ops: FxHashMap<(bool, String), Rc<FunOp>>,
}

struct OpenDerivative {
    term: E,
    frees: Vec<(LocalId, LocalId, Type)>,
    _keep: E,
}

/// `λv. (f v) ⊕ (df v (nil v))` or `λx dx. (g (x ⊕ dx)) ⊖ (f x)` with `f`/`g`, `df`/`f` free.
struct FunOp {
    lam: E,
    first: LocalId,
    second: LocalId,
}

fn fresh(it: &mut Interp) -> LocalId {
    if it.ilc.next_local < it.program.next_local {
        it.ilc.next_local = it.program.next_local;
    }
    fresh_local(&mut it.ilc.next_local)
}

fn next_local(it: &Interp) -> u32 {
    it.ilc.next_local.max(it.program.next_local)
}

/// The canonical group of a type (docs/language.md §6), if it has one.
pub fn canonical_group(ty: &Type) -> Option<Group> {
    Some(match ty {
        Type::Int => Group::Int,
        Type::Real => Group::Real,
        Type::Bag(_) => Group::Bag,
        Type::Map(_, v) => Group::Map(Rc::new(canonical_group(v)?)),
        Type::Tuple(ts) if ts.len() == 2 => {
            Group::Pair(Rc::new(canonical_group(&ts[0])?), Rc::new(canonical_group(&ts[1])?))
        }
        _ => return None,
    })
}

/// `nil v`, the builtin: `ty` is its monomorphic type `A -> Delta A`.
pub fn nil(it: &mut Interp, ty: &Type, v: &Value, span: Span) -> EvalResult {
    match ty {
        Type::Fun(a, _) => nil_value(it, v, a, span),
        _ => Err(Diagnostic::error(span, "internal: `nil` at a non-function type")),
    }
}

/// The nil change 0_v of `v : ty` (ILC Def. 2.2; for functions Theorem 2.10: the derivative).
pub fn nil_value(it: &mut Interp, v: &Value, ty: &Type, span: Span) -> EvalResult {
    match ty {
        Type::Fun(a, b) => {
            let nil_ty = Type::fun(ty.clone(), Type::fun((**a).clone(), Type::fun(Type::delta(a), Type::delta(b))));
            Ok(Value::Partial(Builtin::NilFun, Rc::new(nil_ty), Rc::from([v.clone()])))
        }
        Type::Tuple(ts) => {
            let Value::Tuple(vs) = need(v, span)? else {
                return Err(Diagnostic::error(span, format!("internal: expected a tuple, found {v}")));
            };
            let mut out = Vec::with_capacity(ts.len());
            for (t, x) in ts.iter().zip(vs.iter()) {
                out.push(nil_value(it, x, t, span)?);
            }
            Ok(Value::tuple(out))
        }
        t => match canonical_group(t) {
            Some(g) => {
                let z = group_zero(it, &g, span)?;
                Ok(change(Change::GChange(Rc::new(g), z)))
            }
            None => Ok(change(Change::Replace(need(v, span)?.clone()))),
        },
    }
}

/// Evaluates `derive e` (`e` closed): the total derivative, computed once per term.
pub fn eval_derive(it: &mut Interp, e: &E, span: Span) -> EvalResult {
    let key = Rc::as_ptr(e) as usize;
    if let Some((_, v)) = it.ilc.derived.get(&key) {
        return Ok(v.clone());
    }
    let mut next = next_local(it);
    let term = ilc::derive_closed(it.program, e, &mut next).map_err(|d| {
        if d.span == Span::SYNTHETIC {
            Diagnostic { span, ..d }
        } else {
            d
        }
    })?;
    it.ilc.next_local = next;
    let v = it.eval(&term, &Env::default())?;
    it.ilc.derived.insert(key, (e.clone(), v.clone()));
    Ok(v)
}

/// `f ⊕ df` at a function type (ILC Def. 2.7): `λv. f v ⊕ df v 0_v`.
pub fn oplus_fun(it: &mut Interp, f: &Value, df: &Value, ty: &Type, span: Span) -> EvalResult {
    fun_op(it, false, f, df, ty, span)
}

/// `g ⊖ f` at a function type (ILC Def. 2.7): `λx dx. g (x ⊕ dx) ⊖ f x`.
pub fn ominus_fun(it: &mut Interp, g: &Value, f: &Value, ty: &Type, span: Span) -> EvalResult {
    fun_op(it, true, g, f, ty, span)
}

fn fun_op(it: &mut Interp, minus: bool, first: &Value, second: &Value, ty: &Type, span: Span) -> EvalResult {
    let Type::Fun(a, b) = ty else {
        return Err(Diagnostic::error(span, format!("internal: `<+>`/`<->` expected a function type, found {ty}")));
    };
    let key = (minus, TypePrinter::new().ty(ty));
    let op = match it.ilc.fun_ops.get(&key) {
        Some(op) => op.clone(),
        None => {
            let op = Rc::new(build_fun_op(it, minus, a, b, ty));
            it.ilc.fun_ops.insert(key, op.clone());
            op
        }
    };
    let env = Env::default().bind(op.first, first.clone()).bind(op.second, second.clone());
    it.eval(&op.lam, &env)
}

fn build_fun_op(it: &mut Interp, minus: bool, a: &Type, b: &Type, ty: &Type) -> FunOp {
    use ilc::term::*;
    let s = Span::SYNTHETIC;
    let (first, second) = (fresh(it), fresh(it));
    let x = fresh(it);
    let xv = var("x".into(), x, a.clone(), s);
    if minus {
        // λx dx. g (x ⊕ dx) ⊖ f x
        let dx = fresh(it);
        let g = var("g".into(), first, ty.clone(), s);
        let f = var("f".into(), second, ty.clone(), s);
        let dxv = var("dx".into(), dx, Type::delta(a), s);
        let body = ominus(app(g, oplus(xv.clone(), dxv, s), s), app(f, xv, s), s);
        let lam_ =
            lam(pat_var("x".into(), x, a.clone(), s), lam(pat_var("dx".into(), dx, Type::delta(a), s), body, s), s);
        FunOp { lam: lam_, first, second }
    } else {
        // λv. f v ⊕ df v 0_v
        let f = var("f".into(), first, ty.clone(), s);
        let df = var("df".into(), second, Type::delta(ty), s);
        let body = oplus(app(f, xv.clone(), s), app_n(df, [xv.clone(), nil(xv, s)], s), s);
        let _ = b;
        FunOp { lam: lam(pat_var("x".into(), x, a.clone(), s), body, s), first, second }
    }
}

/// Calls a saturated internal derivative primitive; `ty` is its monomorphic type.
pub fn call(it: &mut Interp, b: Builtin, ty: &Type, args: Vec<Value>, span: Span) -> EvalResult {
    use Builtin as B;
    let (params, res) = ilc::term::arrows(ty, args.len());
    match b {
        // Theorem 2.10: the nil change of a function is its derivative.
        B::NilFun => {
            let Type::Fun(a, r) = &params[0] else {
                return Err(Diagnostic::error(span, "internal: `nil'` at a non-function type"));
            };
            apply_nil(it, &args[0], &args[1], &args[2], a, r, span)
        }
        B::NoBase => Err(Diagnostic::error(span, NEEDS_BASE)),
        // ILC Sec. 3.7: Derive(merge) = λu du v dv. merge du dv (bag-group changes).
        B::DMerge => {
            if let (Some(x), Some(y)) = (replaced(&args[1]), replaced(&args[3])) {
                let m = bag(x, span)?.merge(&*bag(y, span)?).map_err(|o| o.at(span))?;
                return Ok(change(Change::Replace(Value::bag(m))));
            }
            let g = Rc::new(Group::Bag);
            let dx = group_delta(it, &args[0], &args[1], &g, &params[0], span)?;
            let dy = group_delta(it, &args[2], &args[3], &g, &params[2], span)?;
            let d = group_op_into(it, &g, dx, &dy, span)?;
            Ok(change(Change::GChange(g, d)))
        }
        // negate is the bag group's inverse, a homomorphism: its change is the negated change.
        B::DNegate => {
            if let Some(x) = replaced(&args[1]) {
                return Ok(change(Change::Replace(Value::bag(bag(x, span)?.negate().map_err(|o| o.at(span))?))));
            }
            let g = Rc::new(Group::Bag);
            let dx = group_delta(it, &args[0], &args[1], &g, &params[0], span)?;
            let d = group_inverse(it, &g, &dx, span)?;
            Ok(change(Change::GChange(g, d)))
        }
        // ILC Sec. 2.1 (the group of integers): (x + a) + (y + b) = (x + y) + (a + b).
        B::DAdd | B::DSub => {
            let op = if b == B::DAdd { BinOp::Add } else { BinOp::Sub };
            if let (Some(x), Some(y)) = (replaced(&args[1]), replaced(&args[3])) {
                return Ok(change(Change::Replace(arith(op, x, y, span)?)));
            }
            let g = Rc::new(numeric_group(&params[0], span)?);
            let dx = group_delta(it, &args[0], &args[1], &g, &params[0], span)?;
            let dy = group_delta(it, &args[2], &args[3], &g, &params[2], span)?;
            Ok(change(Change::GChange(g, arith(op, &dx, &dy, span)?)))
        }
        B::DNeg => {
            if let Some(x) = replaced(&args[1]) {
                return Ok(change(Change::Replace(arith(BinOp::Sub, &zero_like(x), x, span)?)));
            }
            let g = Rc::new(numeric_group(&params[0], span)?);
            let dx = group_delta(it, &args[0], &args[1], &g, &params[0], span)?;
            Ok(change(Change::GChange(g, arith(BinOp::Sub, &zero_like(&dx), &dx, span)?)))
        }
        B::DMul => {
            if let (Some(x), Some(y)) = (replaced(&args[1]), replaced(&args[3])) {
                return Ok(change(Change::Replace(arith(BinOp::Mul, x, y, span)?)));
            }
            // (x + a)(y + b) - xy = x·b + a·y + a·b
            let g = Rc::new(numeric_group(&params[0], span)?);
            let (x, y) = (need(&args[0], span)?.clone(), need(&args[2], span)?.clone());
            let a = group_delta(it, &args[0], &args[1], &g, &params[0], span)?;
            let bb = group_delta(it, &args[2], &args[3], &g, &params[2], span)?;
            let xb = arith(BinOp::Mul, &x, &bb, span)?;
            let ay = arith(BinOp::Mul, &a, &y, span)?;
            let ab = arith(BinOp::Mul, &a, &bb, span)?;
            let d = arith(BinOp::Add, &arith(BinOp::Add, &xb, &ay, span)?, &ab, span)?;
            Ok(change(Change::GChange(g, d)))
        }
        // singleton is not a homomorphism: its change is the new element minus the old one.
        B::DSingleton => {
            let x = need(&args[0], span)?.clone();
            let x1 = it.oplus(&x, &args[1], &params[0], span)?;
            let mut d = Bag::default();
            if !x1.equals(&x) {
                d.insert(key(&x1, span)?, 1).map_err(|o| o.at(span))?;
                d.insert(key(&x, span)?, -1).map_err(|o| o.at(span))?;
            }
            Ok(change(Change::GChange(Rc::new(Group::Bag), Value::bag(d))))
        }
        // ILC Sec. 4.4: foldBag' G f zs dzs = GroupChange G (foldBag G f dzs) (dG, df nil).
        B::DFoldBag => {
            let g = group(&args[0], span)?;
            let out_ty = group_carrier(&params[0]);
            if let Some(d) = gchange_in(&args[3], &Group::Bag) {
                let v = fold_bag(it, &g, &args[1], &*bag(&d, span)?, span)?;
                if let Some(c) = group_change_at(&g, v, &out_ty) {
                    return Ok(c);
                }
            }
            if let Some(b1) = replaced(&args[3]) {
                let v = fold_bag(it, &g, &args[1], &*bag(b1, span)?, span)?;
                if let Some(c) = replace_at(v, &out_ty) {
                    return Ok(c);
                }
            }
            let b0 = need(&args[2], span)?.clone();
            let b1 = it.oplus(&b0, &args[3], &params[2], span)?;
            let new = fold_bag(it, &g, &args[1], &*bag(&b1, span)?, span)?;
            let old = fold_bag(it, &g, &args[1], &*bag(&b0, span)?, span)?;
            it.ominus(&new, &old, &out_ty, span)
        }
        // mapBag f, filterBag p, flatMapBag f: bag-group homomorphisms for a fixed function.
        B::DMapBag | B::DFilterBag | B::DFlatMapBag => {
            let base = match b {
                B::DMapBag => B::MapBag,
                B::DFilterBag => B::FilterBag,
                _ => B::FlatMapBag,
            };
            let out_ty = delta_base(&res);
            if let Some(d) = gchange_in(&args[2], &Group::Bag) {
                let v = call_builtin(it, base, ty, vec![args[0].clone(), d], span)?;
                return Ok(change(Change::GChange(Rc::new(Group::Bag), v)));
            }
            if let Some(b1) = replaced(&args[2]) {
                let v = call_builtin(it, base, ty, vec![args[0].clone(), b1.clone()], span)?;
                return Ok(change(Change::Replace(v)));
            }
            let b0 = need(&args[1], span)?.clone();
            let b1 = it.oplus(&b0, &args[2], &params[1], span)?;
            let new = call_builtin(it, base, ty, vec![args[0].clone(), b1], span)?;
            let old = call_builtin(it, base, ty, vec![args[0].clone(), b0], span)?;
            it.ominus(&new, &old, &out_ty, span)
        }
        // singletonMap k: from g to mapGroup g, for a fixed key.
        B::DSingletonMap => {
            let vty = &params[1];
            let single = |v: Value, span| -> EvalResult {
                let mut m = MapV::default();
                m.entries.insert(key(&args[0], span)?, v);
                Ok(Value::map(m))
            };
            if let Some((g, d)) = group_change_of(&args[2], vty) {
                return Ok(change(Change::GChange(Rc::new(Group::Map(g)), single(d, span)?)));
            }
            if let Some(v1) = replacement_of(&args[2], vty) {
                return Ok(change(Change::Replace(single(v1, span)?)));
            }
            let v0 = need(&args[1], span)?.clone();
            let v1 = it.oplus(&v0, &args[2], vty, span)?;
            let out_ty = delta_base(&res);
            it.ominus(&single(v1, span)?, &single(v0, span)?, &out_ty, span)
        }
        // foldMap g1 g2 f: from mapGroup g1 to g2 (the user's promise), for a fixed f.
        B::DFoldMap => {
            let (g1, g2) = (group(&args[0], span)?, group(&args[1], span)?);
            let out_ty = group_carrier(&params[1]);
            let expected = Group::Map(g1.clone());
            let fold = |it: &mut Interp, m: Value| {
                call_builtin(it, B::FoldMap, ty, vec![args[0].clone(), args[1].clone(), args[2].clone(), m], span)
            };
            if let Some(d) = gchange_in(&args[4], &expected) {
                let v = fold(it, d)?;
                if let Some(c) = group_change_at(&g2, v, &out_ty) {
                    return Ok(c);
                }
            }
            if let Some(m1) = replaced(&args[4]) {
                let v = fold(it, m1.clone())?;
                if let Some(c) = replace_at(v, &out_ty) {
                    return Ok(c);
                }
            }
            let m0 = need(&args[3], span)?.clone();
            let m1 = it.oplus(&m0, &args[4], &params[3], span)?;
            let new = fold(it, m1)?;
            let old = fold(it, m0)?;
            it.ominus(&new, &old, &out_ty, span)
        }
        // lookup g k: from mapGroup g to g, for a fixed key.
        B::DLookup => {
            let g = group(&args[0], span)?;
            let out_ty = group_carrier(&params[0]);
            let expected = Group::Map(g.clone());
            let look = |it: &mut Interp, m: Value| {
                call_builtin(it, B::Lookup, ty, vec![args[0].clone(), args[1].clone(), m], span)
            };
            if let Some(d) = gchange_in(&args[3], &expected) {
                let v = look(it, d)?;
                if let Some(c) = group_change_at(&g, v, &out_ty) {
                    return Ok(c);
                }
            }
            if let Some(m1) = replaced(&args[3]) {
                let v = look(it, m1.clone())?;
                if let Some(c) = replace_at(v, &out_ty) {
                    return Ok(c);
                }
            }
            let m0 = need(&args[2], span)?.clone();
            let m1 = it.oplus(&m0, &args[3], &params[2], span)?;
            let new = look(it, m1)?;
            let old = look(it, m0)?;
            it.ominus(&new, &old, &out_ty, span)
        }
        _ => Err(Diagnostic::error(span, format!("internal: `{}` is not a derivative primitive", b.name()))),
    }
}

/// `(nil f) x dx`: the derivative of the function value `f` at `x` and `dx` (Theorem 2.10).
fn apply_nil(it: &mut Interp, f: &Value, x: &Value, dx: &Value, a: &Type, r: &Type, span: Span) -> EvalResult {
    match f {
        Value::Closure(c) => {
            let d = closure_derivative(it, c);
            match d {
                Some(d) => apply_open(it, &d, &c.env, x, dx, span),
                None => recompute(it, f, x, dx, a, r, span),
            }
        }
        Value::Partial(b, bty, args) if !b.is_internal() && table::has_efficient_derivative(*b, args.len()) => {
            match partial_derivative(it, *b, bty, args.len()) {
                Some(d) => {
                    let ys: Vec<LocalId> = d.frees.iter().map(|(y, _, _)| *y).collect();
                    let mut env = Env::default();
                    for (y, v) in ys.iter().zip(args.iter()) {
                        env = env.bind(*y, v.clone());
                    }
                    apply_open(it, &d, &env, x, dx, span)
                }
                None => recompute(it, f, x, dx, a, r, span),
            }
        }
        _ => recompute(it, f, x, dx, a, r, span),
    }
}

/// Evaluates a derived λ in the closure's environment with each free variable's change nil, and
/// applies it to `x` and `dx`.
fn apply_open(it: &mut Interp, d: &OpenDerivative, env: &Env, x: &Value, dx: &Value, span: Span) -> EvalResult {
    let mut env2 = env.clone();
    for (y, dy, ty) in &d.frees {
        let v = env.get(*y).cloned().ok_or_else(|| Diagnostic::error(span, "internal: a closure lost a variable"))?;
        let nv = nil_value(it, &v, ty, span)?;
        env2 = env2.bind(*dy, nv);
    }
    let f = it.eval(&d.term, &env2)?;
    it.apply_n(&f, vec![x.clone(), dx.clone()], span)
}

/// ILC Def. 2.7 read backwards: `f (x ⊕ dx) ⊖ f x` is a derivative of any function.
fn recompute(it: &mut Interp, f: &Value, x: &Value, dx: &Value, a: &Type, r: &Type, span: Span) -> EvalResult {
    let x1 = it.oplus(need(x, span)?, dx, a, span)?;
    let new = it.apply(f, x1, span)?;
    let old = it.apply(f, x.clone(), span)?;
    it.ominus(&new, &old, r, span)
}

fn closure_derivative(it: &mut Interp, c: &Rc<Closure>) -> Option<Rc<OpenDerivative>> {
    let key = (Rc::as_ptr(&c.param) as usize, Rc::as_ptr(&c.body) as usize);
    if let Some(d) = it.ilc.closures.get(&key) {
        return Some(d.clone());
    }
    let lam = Expr::new(
        ExprKind::Lam(c.param.clone(), c.body.clone()),
        c.body.span,
        Type::fun(c.param.ty.clone(), c.body.ty.clone()),
    );
    let d = open_derivative(it, &lam);
    if let Some(d) = &d {
        it.ilc.closures.insert(key, d.clone());
    }
    d
}

fn partial_derivative(it: &mut Interp, b: Builtin, bty: &Type, k: usize) -> Option<Rc<OpenDerivative>> {
    let key = (b, TypePrinter::new().ty(bty), k);
    if let Some(d) = it.ilc.partials.get(&key) {
        return Some(d.clone());
    }
    // λz. b y1 ... yk z, with the yi free (bound to the partial application's arguments).
    use ilc::term::*;
    let s = Span::SYNTHETIC;
    let (tys, _) = arrows(bty, k + 1);
    if tys.len() != k + 1 {
        return None;
    }
    let mut args = Vec::new();
    for t in &tys[..k] {
        let y = fresh(it);
        args.push(var("y".into(), y, t.clone(), s));
    }
    let z = fresh(it);
    args.push(var("z".into(), z, tys[k].clone(), s));
    let body = app_n(builtin(b, bty.clone(), s), args, s);
    let lam_ = lam(pat_var("z".into(), z, tys[k].clone(), s), body, s);
    let d = open_derivative(it, &lam_);
    if let Some(d) = &d {
        it.ilc.partials.insert(key, d.clone());
    }
    d
}

/// `Derive(lam)` with its free variables' changes nil, or `None` when it cannot be derived (then
/// recomputation stands in: it is always a derivative).
fn open_derivative(it: &mut Interp, lam: &E) -> Option<Rc<OpenDerivative>> {
    let mut next = next_local(it);
    let d = ilc::derive_open(it.program, lam, &mut next).ok()?;
    it.ilc.next_local = next;
    Some(Rc::new(OpenDerivative { term: d.term, frees: d.frees, _keep: lam.clone() }))
}

fn change(c: Change) -> Value {
    Value::Change(Rc::new(c))
}

fn is_no_base(v: &Value) -> bool {
    matches!(v, Value::Partial(Builtin::NoBase, ..))
}

/// A base value, or `NEEDS_BASE` where dead-code elimination left `_`.
fn need(v: &Value, span: Span) -> EvalResult<&Value> {
    if is_no_base(v) {
        Err(Diagnostic::error(span, NEEDS_BASE))
    } else {
        Ok(v)
    }
}

/// The new value of a `replace` change.
fn replaced(dv: &Value) -> Option<&Value> {
    match dv {
        Value::Change(c) => match &**c {
            Change::Replace(v) => Some(v),
            Change::GChange(..) => None,
        },
        _ => None,
    }
}

/// The group element of a `gchange` in group `g` (or one equal to it).
fn gchange_in(dv: &Value, g: &Group) -> Option<Value> {
    match dv {
        Value::Change(c) => match &**c {
            Change::GChange(h, d) if same_group(h, g) => Some(d.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// A change of `ty` as one group change: a base type's `gchange`, or a pair of them (pairGroup).
fn group_change_of(dv: &Value, ty: &Type) -> Option<(Rc<Group>, Value)> {
    match (ty, dv) {
        (Type::Tuple(ts), Value::Tuple(ds)) if ts.len() == 2 && ds.len() == 2 => {
            let (g1, d1) = group_change_of(&ds[0], &ts[0])?;
            let (g2, d2) = group_change_of(&ds[1], &ts[1])?;
            Some((Rc::new(Group::Pair(g1, g2)), Value::tuple(vec![d1, d2])))
        }
        (Type::Tuple(_) | Type::Fun(..), _) => None,
        (_, Value::Change(c)) => match &**c {
            Change::GChange(g, d) => Some((g.clone(), d.clone())),
            Change::Replace(_) => None,
        },
        _ => None,
    }
}

/// A change of `ty` that replaces the whole value: the new value.
fn replacement_of(dv: &Value, ty: &Type) -> Option<Value> {
    match (ty, dv) {
        (Type::Tuple(ts), Value::Tuple(ds)) if ts.len() == ds.len() => {
            Some(Value::tuple(ts.iter().zip(ds.iter()).map(|(t, d)| replacement_of(d, t)).collect::<Option<Vec<_>>>()?))
        }
        (Type::Tuple(_) | Type::Fun(..), _) => None,
        _ => replaced(dv).cloned(),
    }
}

/// The change `· v` in group `g` at type `ty`: `gchange g v`, componentwise for pair groups;
/// `None` where no change value expresses it without the base (a user group on tuples or functions).
fn group_change_at(g: &Rc<Group>, v: Value, ty: &Type) -> Option<Value> {
    match ty {
        Type::Tuple(ts) => match (&**g, &v) {
            (Group::Pair(g1, g2), Value::Tuple(vs)) if ts.len() == 2 && vs.len() == 2 => Some(Value::tuple(vec![
                group_change_at(g1, vs[0].clone(), &ts[0])?,
                group_change_at(g2, vs[1].clone(), &ts[1])?,
            ])),
            _ => None,
        },
        Type::Fun(..) => None,
        _ => Some(change(Change::GChange(g.clone(), v))),
    }
}

/// `replace v` at type `ty`, componentwise on tuples; `None` at function types.
fn replace_at(v: Value, ty: &Type) -> Option<Value> {
    match (ty, &v) {
        (Type::Tuple(ts), Value::Tuple(vs)) if ts.len() == vs.len() => Some(Value::tuple(
            ts.iter().zip(vs.iter()).map(|(t, x)| replace_at(x.clone(), t)).collect::<Option<Vec<_>>>()?,
        )),
        (Type::Tuple(_) | Type::Fun(..), _) => None,
        _ => Some(change(Change::Replace(v))),
    }
}

/// The element `d` of group `g` with `base · d = base ⊕ dv`; reads `base` only when `dv` is not
/// already a change in `g`.
fn group_delta(it: &mut Interp, base: &Value, dv: &Value, g: &Rc<Group>, ty: &Type, span: Span) -> EvalResult {
    if let Some(d) = gchange_in(dv, g) {
        return Ok(d);
    }
    let b = need(base, span)?.clone();
    let new = it.oplus(&b, dv, ty, span)?;
    let inv = group_inverse(it, g, &b, span)?;
    group_op_into(it, g, new, &inv, span)
}

/// Do two groups act the same? Built-in groups structurally; user groups when they are the same
/// value (a user group is opaque, so anything else is treated as different: correct, just slower).
pub fn same_group(a: &Group, b: &Group) -> bool {
    match (a, b) {
        (Group::Int, Group::Int) | (Group::Real, Group::Real) | (Group::Bag, Group::Bag) => true,
        (Group::Map(x), Group::Map(y)) => same_group(x, y),
        (Group::Pair(a1, a2), Group::Pair(b1, b2)) => same_group(a1, b1) && same_group(a2, b2),
        (Group::User { op: o1, inverse: i1, zero: z1 }, Group::User { op: o2, inverse: i2, zero: z2 }) => {
            same_fn(o1, o2) && same_fn(i1, i2) && z1.equals(z2)
        }
        _ => false,
    }
}

fn same_fn(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Closure(x), Value::Closure(y)) => Rc::ptr_eq(x, y),
        (Value::Partial(x, _, xs), Value::Partial(y, _, ys)) => x == y && xs.is_empty() && ys.is_empty(),
        _ => false,
    }
}

fn numeric_group(ty: &Type, span: Span) -> EvalResult<Group> {
    match ty {
        Type::Int => Ok(Group::Int),
        Type::Real => Ok(Group::Real),
        _ => Err(Diagnostic::error(span, format!("internal: arithmetic derivative at {ty}"))),
    }
}

fn arith(op: BinOp, a: &Value, b: &Value, span: Span) -> EvalResult {
    Ok(match (op, a, b) {
        (BinOp::Add, Value::Int(x), Value::Int(y)) => Value::Int(x.wrapping_add(*y)),
        (BinOp::Sub, Value::Int(x), Value::Int(y)) => Value::Int(x.wrapping_sub(*y)),
        (BinOp::Mul, Value::Int(x), Value::Int(y)) => Value::Int(x.wrapping_mul(*y)),
        (BinOp::Add, Value::Real(x), Value::Real(y)) => Value::Real(x + y),
        (BinOp::Sub, Value::Real(x), Value::Real(y)) => Value::Real(x - y),
        (BinOp::Mul, Value::Real(x), Value::Real(y)) => Value::Real(x * y),
        _ => return Err(Diagnostic::error(span, format!("internal: arithmetic on {a} and {b}"))),
    })
}

fn zero_like(v: &Value) -> Value {
    match v {
        Value::Real(_) => Value::Real(0.0),
        _ => Value::Int(0),
    }
}

/// `t` for `Group t`.
fn group_carrier(t: &Type) -> Type {
    match t {
        Type::Group(a) => (**a).clone(),
        t => t.clone(),
    }
}

/// `t` for `Delta t` (a base type's change type).
fn delta_base(t: &Type) -> Type {
    match t {
        Type::Delta(a) => (**a).clone(),
        t => t.clone(),
    }
}

fn bag(v: &Value, span: Span) -> EvalResult<Rc<Bag>> {
    match v {
        Value::Bag(b) => Ok(b.clone()),
        v if is_no_base(v) => Err(Diagnostic::error(span, NEEDS_BASE)),
        _ => Err(Diagnostic::error(span, format!("internal: expected a bag, found {v}"))),
    }
}

fn group(v: &Value, span: Span) -> EvalResult<Rc<Group>> {
    match v {
        Value::Group(g) => Ok(g.clone()),
        _ => Err(Diagnostic::error(span, format!("internal: expected a group, found {v}"))),
    }
}

fn key(v: &Value, span: Span) -> EvalResult<Key> {
    v.to_key().ok_or_else(|| Diagnostic::error(span, format!("internal: expected an equality-typed value, found {v}")))
}

/// Keeps fresh binders made at run time above `next` (values made by another program, such as a
/// change literal, may hold closures whose binders go up to there).
pub fn reserve_locals(it: &mut Interp, next: u32) {
    if it.ilc.next_local < next {
        it.ilc.next_local = next;
    }
}

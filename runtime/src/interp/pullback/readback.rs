//! Moving between the environment-based interpreter and the term reducer.
//!
//! `readback` turns a runtime value into a closed term of the same meaning: numbers, tuples and
//! arrays become literals, bags and maps literals, a closure its λ with the captured values
//! substituted, a partially applied builtin an application, a group or change the builtin
//! application that makes it. `to_value` goes back: literal data becomes data, `r*` a dual
//! vector, a closed λ free of the reducer's own nodes a closure; anything else (pullbacks,
//! symbolic duals, functions the reducer made) stays a term, applied by the reducer when called.

use std::rc::Rc;

use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::types::Type;
use rustc_hash::FxHashMap;

use super::reduce::{Reducer, R};
use super::term::*;
use super::vector;
use crate::value::*;

/// A closed term for the value `v` of type `ty`.
pub fn readback(v: &Value, ty: &Type) -> E {
    match v {
        Value::Unit => mk(ExprKind::Lit(Lit::Unit), Type::Unit),
        Value::Bool(b) => boolean(*b),
        Value::Int(n) => int(*n),
        Value::Real(r) => real(*r),
        Value::Tuple(vs) => {
            let tys: Vec<Type> = match ty {
                Type::Tuple(ts) => ts.to_vec(),
                _ => vec![Type::Unit; vs.len()],
            };
            let xs: Vec<E> =
                vs.iter().zip(tys.iter().chain(std::iter::repeat(&Type::Unit))).map(|(v, t)| readback(v, t)).collect();
            mk(ExprKind::Tuple(xs), ty.clone())
        }
        Value::Array(vs) => {
            let elem = match ty {
                Type::Array(t) => (**t).clone(),
                _ => Type::Unit,
            };
            mk(ExprKind::Array(vs.iter().map(|v| readback(v, &elem)).collect()), ty.clone())
        }
        Value::Bag(b) => {
            let elem = match ty {
                Type::Bag(t) => (**t).clone(),
                _ => Type::Unit,
            };
            mk(
                ExprKind::Bag(b.sorted().into_iter().map(|(k, n)| (readback(&k.to_value(), &elem), n)).collect()),
                ty.clone(),
            )
        }
        Value::Map(m) => {
            let (kt, vt) = match ty {
                Type::Map(k, v) => ((**k).clone(), (**v).clone()),
                _ => (Type::Unit, Type::Unit),
            };
            let xs = m.sorted().into_iter().map(|(k, v)| (readback(&k.to_value(), &kt), readback(v, &vt))).collect();
            mk(ExprKind::Map(xs), ty.clone())
        }
        Value::Group(g) => group(g, ty),
        Value::Closure(c) => {
            let body_ty = result_of(ty);
            let lam_term = Expr::new(
                ExprKind::Lam(c.param.clone(), c.body.clone()),
                frontend::Span::SYNTHETIC,
                Type::fun(c.param.ty.clone(), body_ty),
            );
            close(&lam_term, &c.env)
        }
        Value::Partial(b, bty, args) => {
            let mut cur = builtin(*b, (**bty).clone());
            for a in args.iter() {
                let at = argument_of(&cur.ty);
                cur = app(&cur, readback(a, &at));
            }
            cur
        }
        Value::Star(r) => {
            let inner = match ty {
                Type::Dual(t) => (**t).clone(),
                _ => Type::Unit,
            };
            star(readback(r, &inner))
        }
        Value::Term(e) => e.clone(),
        Value::Change(c) => {
            let base = match ty {
                Type::Delta(t) => (**t).clone(),
                _ => Type::Unit,
            };
            match &**c {
                Change::Replace(v) => {
                    app(&builtin(Builtin::Replace, Type::fun(base.clone(), ty.clone())), readback(v, &base))
                }
                Change::GChange(g, v) => {
                    let gty = Type::Group(Rc::new(base.clone()));
                    let f = builtin(Builtin::GChange, Type::fun(gty.clone(), Type::fun(base.clone(), ty.clone())));
                    app_n(&f, vec![group(g, &gty), readback(v, &base)])
                }
            }
        }
    }
}

/// `e` with its free variables replaced by their values in `env`.
pub fn close(e: &E, env: &Env) -> E {
    let mut s = FxHashMap::default();
    for (id, _, ty) in free_vars(e) {
        if let Some(v) = env.get(id) {
            s.insert(id, readback(v, &ty));
        }
    }
    subst(e, &s)
}

fn group(g: &Group, ty: &Type) -> E {
    let inner = match ty {
        Type::Group(t) => (**t).clone(),
        _ => Type::Unit,
    };
    let gty = |t: Type| Type::Group(Rc::new(t));
    match g {
        Group::Int => builtin(Builtin::IntGroup, gty(Type::Int)),
        Group::Real => builtin(Builtin::RealGroup, gty(Type::Real)),
        Group::Bag => builtin(Builtin::BagGroup, ty.clone()),
        Group::Map(h) => {
            let vt = match &inner {
                Type::Map(_, v) => (**v).clone(),
                _ => Type::Unit,
            };
            let h = group(h, &gty(vt.clone()));
            app(&builtin(Builtin::MapGroup, Type::fun(gty(vt), ty.clone())), h)
        }
        Group::Pair(a, b) => {
            let (ta, tb) = match &inner {
                Type::Tuple(ts) if ts.len() == 2 => (ts[0].clone(), ts[1].clone()),
                _ => (Type::Unit, Type::Unit),
            };
            let f = builtin(Builtin::PairGroup, Type::fun(gty(ta.clone()), Type::fun(gty(tb.clone()), ty.clone())));
            app_n(&f, vec![group(a, &gty(ta)), group(b, &gty(tb))])
        }
        Group::User { op, inverse, zero } => {
            let t = inner.clone();
            let opt = Type::fun(t.clone(), Type::fun(t.clone(), t.clone()));
            let invt = Type::fun(t.clone(), t.clone());
            let f = builtin(
                Builtin::MkGroup,
                Type::fun(opt.clone(), Type::fun(invt.clone(), Type::fun(t.clone(), ty.clone()))),
            );
            app_n(&f, vec![readback(op, &opt), readback(inverse, &invt), readback(zero, &t)])
        }
    }
}

/// The runtime value of a closed value term.
pub fn to_value(red: &mut Reducer, e: &E) -> R<Value> {
    Ok(match &e.kind {
        ExprKind::Lit(Lit::Unit) => Value::Unit,
        ExprKind::Lit(Lit::Bool(b)) => Value::Bool(*b),
        ExprKind::Lit(Lit::Int(n)) => Value::Int(*n),
        ExprKind::Lit(Lit::Real(r)) => Value::Real(*r),
        ExprKind::Tuple(xs) => Value::tuple(xs.iter().map(|x| to_value(red, x)).collect::<R<_>>()?),
        ExprKind::Array(xs) => Value::array(xs.iter().map(|x| to_value(red, x)).collect::<R<_>>()?),
        ExprKind::Bag(xs) => {
            let mut b = Bag::default();
            for (x, n) in xs {
                let k =
                    to_value(red, x)?.to_key().ok_or_else(|| red.error("internal: a bag element that is not a key"))?;
                b.insert(k, *n).map_err(|_| red.error(anf::ir::BAG_OVERFLOW_MESSAGE))?;
            }
            Value::bag(b)
        }
        ExprKind::Map(xs) => {
            let mut m = MapV::default();
            for (k, v) in xs {
                let key =
                    to_value(red, k)?.to_key().ok_or_else(|| red.error("internal: a map key that is not a key"))?;
                let val = to_value(red, v)?;
                m.entries.insert(key, val);
            }
            Value::map(m)
        }
        ExprKind::Zero => match vector::materialise_by_type(e) {
            Some(z) if !is_zero(&z) => to_value(red, &z)?,
            _ => match &e.ty {
                Type::Dual(t) => match vector::materialise_by_type(&zero(t)) {
                    Some(z) if !is_zero(&z) => Value::Star(Rc::new(to_value(red, &z)?)),
                    _ => Value::Term(e.clone()),
                },
                _ => Value::Term(e.clone()),
            },
        },
        ExprKind::Var(_, VarRef::Builtin(b)) => match crate::interp::builtins::constant(*b) {
            Some(v) => v,
            None => Value::Partial(*b, Rc::new(e.ty.clone()), Rc::from([])),
        },
        ExprKind::Lam(..) if is_closed(e) && surface_only(e) => {
            let ExprKind::Lam(p, b) = &e.kind else { unreachable!() };
            Value::closure(Closure { param: p.clone(), body: b.clone(), env: Env::default() })
        }
        ExprKind::App(..) => {
            let (head, args) = spine(e);
            match builtin_head(&head) {
                Some(Builtin::Star) if args.len() == 1 && vector::is_vector(&args[0]) => {
                    match vector::materialise_by_type(&args[0]) {
                        Some(r) => Value::Star(Rc::new(to_value(red, &r)?)),
                        None => Value::Term(e.clone()),
                    }
                }
                Some(
                    b @ (Builtin::MapGroup
                    | Builtin::PairGroup
                    | Builtin::MkGroup
                    | Builtin::Replace
                    | Builtin::GChange),
                ) if args.len() == b.arity() => {
                    let vals = args.iter().map(|a| to_value(red, a)).collect::<R<Vec<_>>>()?;
                    let span = red.span();
                    crate::interp::builtins::call(red.it, b, &head.ty, vals, span)?
                }
                Some(b) if args.len() < b.arity() && is_closed(e) => {
                    let vals = args.iter().map(|a| to_value(red, a)).collect::<R<Vec<_>>>()?;
                    Value::Partial(b, Rc::new(head.ty.clone()), vals.into())
                }
                _ => Value::Term(e.clone()),
            }
        }
        _ => Value::Term(e.clone()),
    })
}

/// Does `e` use only what the environment-based interpreter evaluates (no `0`, sums, or the
/// reducer's marks)?
fn surface_only(e: &E) -> bool {
    let mut ok = true;
    fn go(e: &E, ok: &mut bool) {
        if !*ok {
            return;
        }
        if matches!(e.kind, ExprKind::Zero | ExprKind::Sum(..)) || e.span == CHAIN {
            *ok = false;
            return;
        }
        frontend::lin::for_each_child(e, &mut |c| go(c, ok));
    }
    go(e, &mut ok);
    ok
}

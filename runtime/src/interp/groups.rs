//! Abelian groups (docs/language.md §6): operation, inverse, zero and integer scaling.

use std::rc::Rc;

use frontend::{Diagnostic, Span};
use rustc_hash::FxHashMap;

use super::{EvalResult, Interp};
use crate::value::*;

/// The group's operation `a · b`.
pub fn group_op(it: &mut Interp, g: &Group, a: &Value, b: &Value, span: Span) -> EvalResult {
    Ok(match (g, a, b) {
        (Group::Int, Value::Int(x), Value::Int(y)) => Value::Int(x.wrapping_add(*y)),
        (Group::Real, Value::Real(x), Value::Real(y)) => Value::Real(x + y),
        (Group::Bag, Value::Bag(x), Value::Bag(y)) => Value::bag(x.merge(y).map_err(|o| o.at(span))?),
        (Group::Map(inner), Value::Map(x), Value::Map(y)) => {
            let mut out: FxHashMap<Key, Value> = x.entries.clone();
            let zero = group_zero(it, inner, span)?;
            for (k, v) in y.entries.iter() {
                let combined = match out.get(k) {
                    Some(w) => group_op(it, inner, w, v, span)?,
                    None => v.clone(),
                };
                // A key whose value becomes the group's zero disappears.
                if combined.equals(&zero) {
                    out.remove(k);
                } else {
                    out.insert(k.clone(), combined);
                }
            }
            Value::map(MapV { entries: out })
        }
        (Group::Pair(g1, g2), Value::Tuple(x), Value::Tuple(y)) if x.len() == 2 && y.len() == 2 => {
            let a1 = group_op(it, g1, &x[0], &y[0], span)?;
            let a2 = group_op(it, g2, &x[1], &y[1], span)?;
            Value::tuple(vec![a1, a2])
        }
        (Group::User { op, .. }, _, _) => it.apply_n(op, vec![a.clone(), b.clone()], span)?,
        _ => return Err(Diagnostic::error(span, format!("internal: group operation on {a} and {b}"))),
    })
}

/// `a · b`, consuming `a`: a bag or map held only here is updated in place, so a fold that
/// accumulates into `bagGroup` or `mapGroup g` costs the size of what it adds, not of the
/// accumulator.
pub fn group_op_into(it: &mut Interp, g: &Group, mut a: Value, b: &Value, span: Span) -> EvalResult {
    match (g, &mut a, b) {
        (Group::Bag, Value::Bag(x), Value::Bag(y)) => {
            let bx = Rc::make_mut(x);
            for (k, n) in y.entries.iter() {
                bx.insert(k.clone(), *n).map_err(|o| o.at(span))?;
            }
            Ok(a)
        }
        (Group::Map(inner), Value::Map(x), Value::Map(y)) => {
            let zero = group_zero(it, inner, span)?;
            let mx = Rc::make_mut(x);
            for (k, v) in y.entries.iter() {
                let combined = match mx.entries.remove(k) {
                    Some(w) => group_op_into(it, inner, w, v, span)?,
                    None => v.clone(),
                };
                // A key whose value becomes the group's zero disappears.
                if !combined.equals(&zero) {
                    mx.entries.insert(k.clone(), combined);
                }
            }
            Ok(a)
        }
        (_, _, b) => group_op(it, g, &a, b, span),
    }
}

/// The group's inverse `a⁻¹`.
pub fn group_inverse(it: &mut Interp, g: &Group, a: &Value, span: Span) -> EvalResult {
    Ok(match (g, a) {
        (Group::Int, Value::Int(x)) => Value::Int(x.wrapping_neg()),
        (Group::Real, Value::Real(x)) => Value::Real(-x),
        (Group::Bag, Value::Bag(x)) => Value::bag(x.negate().map_err(|o| o.at(span))?),
        (Group::Map(inner), Value::Map(x)) => {
            let mut out = FxHashMap::default();
            for (k, v) in x.entries.iter() {
                out.insert(k.clone(), group_inverse(it, inner, v, span)?);
            }
            Value::map(MapV { entries: out })
        }
        (Group::Pair(g1, g2), Value::Tuple(x)) if x.len() == 2 => {
            let a1 = group_inverse(it, g1, &x[0], span)?;
            let a2 = group_inverse(it, g2, &x[1], span)?;
            Value::tuple(vec![a1, a2])
        }
        (Group::User { inverse, .. }, _) => it.apply(inverse, a.clone(), span)?,
        _ => return Err(Diagnostic::error(span, format!("internal: group inverse of {a}"))),
    })
}

/// The group's neutral element.
pub fn group_zero(it: &mut Interp, g: &Group, span: Span) -> EvalResult {
    Ok(match g {
        Group::Int => Value::Int(0),
        Group::Real => Value::Real(0.0),
        Group::Bag => Value::bag(Bag::default()),
        Group::Map(_) => Value::map(MapV::default()),
        Group::Pair(g1, g2) => {
            let z1 = group_zero(it, g1, span)?;
            let z2 = group_zero(it, g2, span)?;
            Value::tuple(vec![z1, z2])
        }
        Group::User { zero, .. } => zero.clone(),
    })
}

/// `a` combined with itself `m` times (`m` may be negative): a bag entry's contribution to a fold.
pub fn group_scale(it: &mut Interp, g: &Group, a: &Value, m: i64, span: Span) -> EvalResult {
    Ok(match (g, a) {
        (Group::Int, Value::Int(x)) => Value::Int(x.wrapping_mul(m)),
        (Group::Real, Value::Real(x)) => Value::Real(x * m as f64),
        (Group::Bag, Value::Bag(x)) => Value::bag(x.scale(m).map_err(|o| o.at(span))?),
        (Group::Map(inner), Value::Map(x)) => {
            let zero = group_zero(it, inner, span)?;
            let mut out = FxHashMap::default();
            for (k, v) in x.entries.iter() {
                let s = group_scale(it, inner, v, m, span)?;
                if !s.equals(&zero) {
                    out.insert(k.clone(), s);
                }
            }
            Value::map(MapV { entries: out })
        }
        (Group::Pair(g1, g2), Value::Tuple(x)) if x.len() == 2 => {
            let a1 = group_scale(it, g1, &x[0], m, span)?;
            let a2 = group_scale(it, g2, &x[1], m, span)?;
            Value::tuple(vec![a1, a2])
        }
        (Group::User { .. }, _) => {
            // Repeated operation by doubling (O(log |m|) steps), with the inverse when m < 0.
            let mut base = if m < 0 { group_inverse(it, g, a, span)? } else { a.clone() };
            let mut acc = group_zero(it, g, span)?;
            let mut n = m.unsigned_abs();
            while n > 0 {
                if n & 1 == 1 {
                    acc = group_op_into(it, g, acc, &base, span)?;
                }
                n >>= 1;
                if n > 0 {
                    base = group_op(it, g, &base, &base, span)?;
                }
            }
            acc
        }
        _ => return Err(Diagnostic::error(span, format!("internal: group scaling of {a}"))),
    })
}

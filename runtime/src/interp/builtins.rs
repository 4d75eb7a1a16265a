//! The interpreter's builtins: Real and array primitives, groups, bags and maps, changes.
//! Folds over bags and maps visit entries in sorted order, so results are deterministic.

use std::rc::Rc;

use frontend::builtins::Builtin;
use frontend::types::Type;
use frontend::{Diagnostic, Span};

use super::groups::*;
use super::{EvalResult, Interp, MAX_ARRAY_LEN};
use crate::value::*;

/// Builtins of arity 0 are values.
pub fn constant(b: Builtin) -> Option<Value> {
    Some(match b {
        Builtin::IntGroup => Value::Group(Rc::new(Group::Int)),
        Builtin::RealGroup => Value::Group(Rc::new(Group::Real)),
        Builtin::BagGroup => Value::Group(Rc::new(Group::Bag)),
        Builtin::EmptyBag => Value::bag(Bag::default()),
        Builtin::EmptyMap => Value::map(MapV::default()),
        _ => return None,
    })
}

fn real(v: &Value, span: Span) -> EvalResult<f64> {
    v.as_real().ok_or_else(|| Diagnostic::error(span, format!("internal: expected a Real, found {v}")))
}
fn int(v: &Value, span: Span) -> EvalResult<i64> {
    v.as_int().ok_or_else(|| Diagnostic::error(span, format!("internal: expected an Int, found {v}")))
}
fn array(v: &Value, span: Span) -> EvalResult<Rc<Vec<Value>>> {
    match v {
        Value::Array(a) => Ok(a.clone()),
        _ => Err(Diagnostic::error(span, format!("internal: expected an array, found {v}"))),
    }
}
fn bag(v: &Value, span: Span) -> EvalResult<Rc<Bag>> {
    match v {
        Value::Bag(b) => Ok(b.clone()),
        _ => Err(Diagnostic::error(span, format!("internal: expected a bag, found {v}"))),
    }
}
fn map(v: &Value, span: Span) -> EvalResult<Rc<MapV>> {
    match v {
        Value::Map(m) => Ok(m.clone()),
        _ => Err(Diagnostic::error(span, format!("internal: expected a map, found {v}"))),
    }
}
fn group(v: &Value, span: Span) -> EvalResult<Rc<Group>> {
    match v {
        Value::Group(g) => Ok(g.clone()),
        _ => Err(Diagnostic::error(span, format!("internal: expected a group, found {v}"))),
    }
}
fn key(v: &Value, span: Span) -> EvalResult<Key> {
    v.to_key().ok_or_else(|| Diagnostic::error(span, format!("internal: {v} is not an equality-typed value")))
}

/// A fresh vector for `n` elements, refusing negative and absurd sizes cleanly.
pub fn alloc(n: i64, what: &str, span: Span) -> EvalResult<Vec<Value>> {
    if n < 0 {
        return Err(Diagnostic::error(span, format!("{what}: negative array size {n}")));
    }
    if n > MAX_ARRAY_LEN {
        return Err(Diagnostic::error(span, format!("{what}: array size {n} exceeds the limit of {MAX_ARRAY_LEN}")));
    }
    super::reserve_memory(n as usize * std::mem::size_of::<Value>(), span)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n as usize)
        .map_err(|_| Diagnostic::error(span, format!("{what}: out of memory for {n} elements")))?;
    Ok(v)
}

/// `a.[i]`, bounds-checked.
pub fn index(a: &Value, i: &Value, span: Span) -> EvalResult {
    let a = array(a, span)?;
    let i = int(i, span)?;
    if i < 0 || i as usize >= a.len() {
        return Err(Diagnostic::error(span, format!("index {i} out of bounds for length {}", a.len())));
    }
    Ok(a[i as usize].clone())
}

/// 2^63: `toInt x` needs `-2^63 <= x < 2^63`.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// The error of `toInt` (the compiled trap's message: `why` is 0 for NaN, 1 above, -1 below).
fn to_int_message(why: i64) -> String {
    anf::ir::TrapCode::ToIntRange.message(why, 0)
}

fn real1(args: &[Value], span: Span, f: fn(f64) -> f64) -> EvalResult {
    Ok(Value::Real(f(real(&args[0], span)?)))
}

/// Calls a saturated builtin; `ty` is its monomorphic type.
pub fn call(it: &mut Interp, b: Builtin, ty: &Type, mut args: Vec<Value>, span: Span) -> EvalResult {
    use Builtin as B;
    Ok(match b {
        B::Sin => return real1(&args, span, f64::sin),
        B::Cos => return real1(&args, span, f64::cos),
        B::Tan => return real1(&args, span, f64::tan),
        B::Exp => return real1(&args, span, f64::exp),
        B::Log => return real1(&args, span, f64::ln),
        B::Sqrt => return real1(&args, span, f64::sqrt),
        B::Tanh => return real1(&args, span, f64::tanh),
        B::Sigmoid => return real1(&args, span, |x| 1.0 / (1.0 + (-x).exp())),
        B::Abs => match &args[0] {
            Value::Int(n) => Value::Int(n.wrapping_abs()),
            v => Value::Real(real(v, span)?.abs()),
        },
        B::Neg => match &args[0] {
            Value::Int(n) => Value::Int(n.wrapping_neg()),
            v => Value::Real(-real(v, span)?),
        },
        // Ties go to the first argument (docs/language.md §5).
        B::Max => match (&args[0], &args[1]) {
            (Value::Int(a), Value::Int(b)) => Value::Int(if b > a { *b } else { *a }),
            (a, b) => {
                let (x, y) = (real(a, span)?, real(b, span)?);
                Value::Real(if y > x { y } else { x })
            }
        },
        B::Min => match (&args[0], &args[1]) {
            (Value::Int(a), Value::Int(b)) => Value::Int(if b < a { *b } else { *a }),
            (a, b) => {
                let (x, y) = (real(a, span)?, real(b, span)?);
                Value::Real(if y < x { y } else { x })
            }
        },
        B::ToReal => Value::Real(int(&args[0], span)? as f64),
        B::Floor => real1(&args, span, f64::floor)?,
        // Ties away from zero (Rust's `f64::round`).
        B::Round => real1(&args, span, f64::round)?,
        // Truncates toward zero; NaN and values outside Int's range are errors.
        B::ToInt => {
            let x = real(&args[0], span)?;
            if !(-TWO_63..TWO_63).contains(&x) {
                let why = if x.is_nan() {
                    0
                } else if x > 0.0 {
                    1
                } else {
                    -1
                };
                return Err(Diagnostic::error(span, to_int_message(why)));
            }
            Value::Int(x as i64)
        }
        B::Build => {
            let n = int(&args[0], span)?;
            let mut out = alloc(n, "build", span)?;
            for i in 0..n {
                out.push(it.apply(&args[1], Value::Int(i), span)?);
            }
            Value::array(out)
        }
        B::Len => Value::Int(array(&args[0], span)?.len() as i64),
        B::Map => {
            let a = array(&args[1], span)?;
            let mut out = Vec::with_capacity(a.len());
            for x in a.iter() {
                out.push(it.apply(&args[0], x.clone(), span)?);
            }
            Value::array(out)
        }
        B::ZipWith => {
            let a = array(&args[1], span)?;
            let c = array(&args[2], span)?;
            if a.len() != c.len() {
                return Err(Diagnostic::error(
                    span,
                    format!("zipWith: arrays have different lengths {} and {}", a.len(), c.len()),
                ));
            }
            let mut out = Vec::with_capacity(a.len());
            for (x, y) in a.iter().zip(c.iter()) {
                out.push(it.apply_n(&args[0], vec![x.clone(), y.clone()], span)?);
            }
            Value::array(out)
        }
        B::Fold => {
            let a = array(&args[2], span)?;
            let mut acc = args[1].clone();
            for x in a.iter() {
                acc = it.apply_n(&args[0], vec![acc, x.clone()], span)?;
            }
            acc
        }
        B::Sum => {
            let a = array(&args[0], span)?;
            sum(&a, result_type(ty), span)?
        }
        B::Dot => {
            let a = array(&args[0], span)?;
            let c = array(&args[1], span)?;
            if a.len() != c.len() {
                return Err(Diagnostic::error(
                    span,
                    format!("dot: arrays have different lengths {} and {}", a.len(), c.len()),
                ));
            }
            dot(&a, &c, result_type(ty), span)?
        }
        B::Iterate | B::RevIterate => {
            let n = int(&args[0], span)?;
            if n < 0 {
                return Err(Diagnostic::error(span, format!("iterate: negative count {n}")));
            }
            let mut acc = args[2].clone();
            for _ in 0..n {
                acc = it.apply(&args[1], acc, span)?;
            }
            acc
        }
        B::While => {
            // An unbounded loop; it keeps no stack, so only the predicate decides when it ends.
            let mut acc = args[2].clone();
            loop {
                match it.apply(&args[0], acc.clone(), span)? {
                    Value::Bool(true) => acc = it.apply(&args[1], acc, span)?,
                    Value::Bool(false) => break,
                    v => return Err(Diagnostic::error(span, format!("internal: while: predicate gave {v:?}"))),
                }
            }
            acc
        }
        B::Star | B::Unstar | B::Omega | B::Jac | B::Grad | B::Vjp | B::Jacobian => {
            return super::pullback::builtin(it, b, ty, args, span)
        }
        B::IntGroup | B::RealGroup | B::BagGroup | B::EmptyBag | B::EmptyMap => {
            constant(b).expect("arity-0 builtins are constants")
        }
        B::MapGroup => Value::Group(Rc::new(Group::Map(group(&args[0], span)?))),
        B::PairGroup => Value::Group(Rc::new(Group::Pair(group(&args[0], span)?, group(&args[1], span)?))),
        B::MkGroup => {
            Value::Group(Rc::new(Group::User { op: args[0].clone(), inverse: args[1].clone(), zero: args[2].clone() }))
        }
        B::Singleton => {
            let mut out = Bag::default();
            out.insert(key(&args[0], span)?, 1).map_err(|o| o.at(span))?;
            Value::bag(out)
        }
        B::Merge => Value::bag(bag(&args[0], span)?.merge(&*bag(&args[1], span)?).map_err(|o| o.at(span))?),
        B::Negate => Value::bag(bag(&args[0], span)?.negate().map_err(|o| o.at(span))?),
        B::FoldBag => {
            let g = group(&args[0], span)?;
            let b = bag(&args[2], span)?;
            fold_bag(it, &g, &args[1], &b, span)?
        }
        B::MapBag => {
            let b = bag(&args[1], span)?;
            let mut out = Bag::default();
            for (k, n) in b.sorted() {
                let y = it.apply(&args[0], k.to_value(), span)?;
                out.insert(key(&y, span)?, n).map_err(|o| o.at(span))?;
            }
            Value::bag(out)
        }
        B::FilterBag => {
            let b = bag(&args[1], span)?;
            let mut out = Bag::default();
            for (k, n) in b.sorted() {
                if let Value::Bool(true) = it.apply(&args[0], k.to_value(), span)? {
                    out.insert(k.clone(), n).map_err(|o| o.at(span))?;
                }
            }
            Value::bag(out)
        }
        B::FlatMapBag => {
            let b = bag(&args[1], span)?;
            fold_bag(it, &Group::Bag, &args[0], &b, span)?
        }
        B::SingletonMap => {
            let mut out = MapV::default();
            out.entries.insert(key(&args[0], span)?, args[1].clone());
            Value::map(out)
        }
        B::FoldMap => {
            let gb = group(&args[1], span)?;
            let m = map(&args[3], span)?;
            let mut acc = group_zero(it, &gb, span)?;
            for (k, v) in m.sorted() {
                let y = it.apply_n(&args[2], vec![k.to_value(), v.clone()], span)?;
                acc = group_op_into(it, &gb, acc, &y, span)?;
            }
            acc
        }
        B::FoldMapGen => {
            let m = map(&args[3], span)?;
            let mut acc = args[0].clone();
            for (k, v) in m.sorted() {
                let y = it.apply_n(&args[2], vec![k.to_value(), v.clone()], span)?;
                acc = it.apply_n(&args[1], vec![acc, y], span)?;
            }
            acc
        }
        B::Lookup => {
            let g = group(&args[0], span)?;
            let k = key(&args[1], span)?;
            let m = map(&args[2], span)?;
            match m.entries.get(&k) {
                Some(v) => v.clone(),
                None => group_zero(it, &g, span)?,
            }
        }
        B::Replace => Value::Change(Rc::new(Change::Replace(args[0].clone()))),
        B::GChange => Value::Change(Rc::new(Change::GChange(group(&args[0], span)?, args[1].clone()))),
        B::Nil => return super::incremental::nil(it, ty, &args[0], span),
        B::NilFun
        | B::NoBase
        | B::DMerge
        | B::DNegate
        | B::DSingleton
        | B::DAdd
        | B::DSub
        | B::DMul
        | B::DNeg
        | B::DFoldBag
        | B::DMapBag
        | B::DFilterBag
        | B::DFlatMapBag
        | B::DSingletonMap
        | B::DFoldMap
        | B::DLookup => return super::incremental::call(it, b, ty, args, span),
        B::Zeros
        | B::AccAdd
        | B::AccAddAll
        | B::AccAxpy
        | B::TapeNew
        | B::TapeSet
        | B::CtCheck
        | B::AccAdd2
        | B::AccRow
        | B::AccRowAll => return reverse_internal(b, args, span),
        B::AccAt => {
            // `accAt' A i f`: element i replaced by `f A.[i]`. The element is taken out of its
            // slot (and the array out of its argument) so that the accumulators `f` updates are
            // uniquely held and updated in place; either way the result is the functional update.
            let i = int(&args[1], span)?;
            let f = args[2].clone();
            let mut a = match &mut args[0] {
                Value::Array(a) => std::mem::replace(a, Rc::new(Vec::new())),
                v => return Err(Diagnostic::error(span, format!("internal: expected an array, found {v}"))),
            };
            let v = Rc::make_mut(&mut a);
            if i < 0 || i as usize >= v.len() {
                return Err(Diagnostic::error(span, format!("index {i} out of bounds for length {}", v.len())));
            }
            let x = std::mem::replace(&mut v[i as usize], Value::Unit);
            v[i as usize] = it.apply(&f, x, span)?;
            Value::Array(a)
        }
        // A site reverse mode left to the interpreter (per-site fallback, `crate::sites`).
        B::Interp => {
            let interpreted =
                it.program.interpreted.clone().ok_or_else(|| {
                    Diagnostic::error(span, "internal: `interp'` in a program without interpreted sites")
                })?;
            let k = int(&args[0], span)?;
            let arg = args.into_iter().nth(1).unwrap_or(Value::Unit);
            return crate::sites::eval_interpreted(&interpreted, k, arg, span);
        }
    })
}

/// Reverse mode's accumulators and tapes (`adjoint::reverse`). The transform passes each array
/// argument to exactly one of these and never uses it again, so the update is in place when the
/// interpreter holds the only reference (`Rc::make_mut`) and a copy otherwise: either way the
/// builtin is a pure function of its arguments.
fn reverse_internal(b: Builtin, mut args: Vec<Value>, span: Span) -> EvalResult {
    use Builtin as B;
    let filled = |v: &Value, x: Value| -> EvalResult {
        let n = int(v, span)?;
        let mut out = alloc(n, b.name(), span)?;
        out.resize(n as usize, x);
        Ok(Value::Array(Rc::new(out)))
    };
    let take = |args: &mut Vec<Value>| -> EvalResult<Rc<Vec<Value>>> {
        // `Value` has a `Drop` (the memory meter), so the array is taken out of its slot.
        match &mut args[0] {
            Value::Array(a) => Ok(std::mem::replace(a, Rc::new(Vec::new()))),
            v => Err(Diagnostic::error(span, format!("internal: expected an array, found {v}"))),
        }
    };
    let slot = |a: &mut Vec<Value>, i: i64| -> EvalResult<usize> {
        if i < 0 || i as usize >= a.len() {
            return Err(Diagnostic::error(span, format!("index {i} out of bounds for length {}", a.len())));
        }
        Ok(i as usize)
    };
    Ok(match b {
        B::Zeros => return filled(&args[0], Value::Real(0.0)),
        B::CtCheck => {
            let (n, m, shape) = (int(&args[0], span)?, int(&args[1], span)?, int(&args[2], span)?);
            if n != m {
                // `shape` and the indices `args[3]` (an Int, a tuple of them, or `()`): the path.
                fn ints(v: &Value, out: &mut Vec<i64>) {
                    match v {
                        Value::Tuple(vs) => vs.iter().for_each(|v| ints(v, out)),
                        v => out.extend(v.as_int()),
                    }
                }
                let mut idx = Vec::new();
                ints(&args[3], &mut idx);
                let message = anf::ir::shape_check_message(shape, &idx, n, m)
                    .ok_or_else(|| Diagnostic::error(span, "internal: a `ctCheck'` path without its indices"))?;
                return Err(Diagnostic::error(span, message));
            }
            Value::Unit
        }
        B::TapeNew => return filled(&args[0], Value::Unit),
        B::AccAdd => {
            // A Real, or a tuple's Real components (its discrete ones are left).
            fn plus(x: &Value, g: &Value, span: Span) -> EvalResult {
                Ok(match (x, g) {
                    (Value::Real(a), Value::Real(b)) => Value::Real(a + b),
                    (Value::Tuple(xs), Value::Tuple(gs)) => Value::tuple(
                        xs.iter().zip(gs.iter()).map(|(x, g)| plus(x, g, span)).collect::<EvalResult<_>>()?,
                    ),
                    (x, _) => x.clone(),
                })
            }
            let i = int(&args[1], span)?;
            let mut a = take(&mut args)?;
            let v = Rc::make_mut(&mut a);
            let k = slot(v, i)?;
            v[k] = plus(&v[k], &args[2], span)?;
            Value::Array(a)
        }
        B::AccAddAll => {
            let g = real(&args[1], span)?;
            let mut a = take(&mut args)?;
            for x in Rc::make_mut(&mut a).iter_mut() {
                *x = Value::Real(real(x, span)? + g);
            }
            Value::Array(a)
        }
        B::AccAxpy => {
            let s = real(&args[1], span)?;
            let y = array(&args[2], span)?;
            let mut a = take(&mut args)?;
            let v = Rc::make_mut(&mut a);
            if v.len() != y.len() {
                return Err(Diagnostic::error(
                    span,
                    format!("internal: accumulating arrays of lengths {} and {}", v.len(), y.len()),
                ));
            }
            for (x, y) in v.iter_mut().zip(y.iter()) {
                *x = Value::Real(real(x, span)? + s * real(y, span)?);
            }
            Value::Array(a)
        }
        B::AccAdd2 | B::AccRow | B::AccRowAll => {
            // A row of a nested accumulator, updated in place: taken out of its slot (so the
            // update is in place when the outer array is the only reference), put back after.
            let i = int(&args[1], span)?;
            let mut a = take(&mut args)?;
            let v = Rc::make_mut(&mut a);
            let k = slot(v, i)?;
            let mut row = match &mut v[k] {
                Value::Array(r) => std::mem::replace(r, Rc::new(Vec::new())),
                x => return Err(Diagnostic::error(span, format!("internal: expected an array, found {x}"))),
            };
            let r = Rc::make_mut(&mut row);
            match b {
                B::AccAdd2 => {
                    let (j, g) = (int(&args[2], span)?, real(&args[3], span)?);
                    let q = slot(r, j)?;
                    r[q] = Value::Real(real(&r[q], span)? + g);
                }
                B::AccRowAll => {
                    let g = real(&args[2], span)?;
                    for x in r.iter_mut() {
                        *x = Value::Real(real(x, span)? + g);
                    }
                }
                _ => {
                    let s = real(&args[2], span)?;
                    let y = array(&args[3], span)?;
                    if r.len() != y.len() {
                        return Err(Diagnostic::error(
                            span,
                            format!("internal: accumulating arrays of lengths {} and {}", r.len(), y.len()),
                        ));
                    }
                    for (x, y) in r.iter_mut().zip(y.iter()) {
                        *x = Value::Real(real(x, span)? + s * real(y, span)?);
                    }
                }
            }
            v[k] = Value::Array(row);
            Value::Array(a)
        }
        B::TapeSet => {
            let i = int(&args[1], span)?;
            let x = std::mem::replace(&mut args[2], Value::Unit);
            let mut a = take(&mut args)?;
            let v = Rc::make_mut(&mut a);
            let k = slot(v, i)?;
            v[k] = x;
            Value::Array(a)
        }
        _ => unreachable!("not a reverse-mode builtin"),
    })
}

/// `foldBag g f b`: the group sum of `f x` scaled by each multiplicity, in sorted order.
pub fn fold_bag(it: &mut Interp, g: &Group, f: &Value, b: &Bag, span: Span) -> EvalResult {
    let mut acc = group_zero(it, g, span)?;
    for (k, n) in b.sorted() {
        let y = it.apply(f, k.to_value(), span)?;
        let y = group_scale(it, g, &y, n, span)?;
        acc = group_op_into(it, g, acc, &y, span)?;
    }
    Ok(acc)
}

/// The final result type of a curried function type.
fn result_type(t: &Type) -> &Type {
    match t {
        Type::Fun(_, b) => result_type(b),
        t => t,
    }
}

fn sum(a: &[Value], ty: &Type, span: Span) -> EvalResult {
    match ty {
        Type::Int => {
            let mut s: i64 = 0;
            for x in a {
                s = s.wrapping_add(int(x, span)?);
            }
            Ok(Value::Int(s))
        }
        _ => {
            let mut s = 0.0;
            for x in a {
                s += real(x, span)?;
            }
            Ok(Value::Real(s))
        }
    }
}

fn dot(a: &[Value], b: &[Value], ty: &Type, span: Span) -> EvalResult {
    match ty {
        Type::Int => {
            let mut s: i64 = 0;
            for (x, y) in a.iter().zip(b) {
                s = s.wrapping_add(int(x, span)?.wrapping_mul(int(y, span)?));
            }
            Ok(Value::Int(s))
        }
        _ => {
            let mut s = 0.0;
            for (x, y) in a.iter().zip(b) {
                s += real(x, span)? * real(y, span)?;
            }
            Ok(Value::Real(s))
        }
    }
}

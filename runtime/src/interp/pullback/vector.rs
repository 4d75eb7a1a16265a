//! Literal vectors as terms — reals, and tuples and arrays of them, with the symbolic `0` standing
//! for a zero of any shape — and the arithmetic the rules need on them: sums, scaling, inner
//! products, one-hot vectors, and filling in symbolic zeros from a point's shape.
//!
//! Components of a discrete type (Int, Bool, Unit, bags, maps) have the zero tangent space
//! (docs/language.md §5): they never carry a tangent or cotangent, whatever literal stands there.

use frontend::syntax::*;
use frontend::types::Type;

use super::term::*;

/// Is `e` a literal vector: numbers, `0`, and tuples and arrays of literal vectors?
pub fn is_vector(e: &E) -> bool {
    match &e.kind {
        ExprKind::Lit(_) | ExprKind::Zero => true,
        ExprKind::Tuple(xs) | ExprKind::Array(xs) => xs.iter().all(is_vector),
        ExprKind::Bag(_) | ExprKind::Map(_) => anf::anormal::is_literal(e),
        _ => false,
    }
}

/// `a + b` for literal vectors of the same type.
pub fn add(a: &E, b: &E) -> Result<E, String> {
    if a.ty.is_discrete() {
        return Ok(zero(&a.ty));
    }
    Ok(match (&a.kind, &b.kind) {
        (ExprKind::Zero, _) => b.clone(),
        (_, ExprKind::Zero) => a.clone(),
        (ExprKind::Lit(Lit::Real(x)), ExprKind::Lit(Lit::Real(y))) => real(x + y),
        (ExprKind::Tuple(xs), ExprKind::Tuple(ys)) if xs.len() == ys.len() => {
            let zs = xs.iter().zip(ys).map(|(x, y)| add(x, y)).collect::<Result<Vec<_>, _>>()?;
            Expr::new(ExprKind::Tuple(zs), if a.span == CHAIN { a.span } else { b.span }, a.ty.clone())
        }
        (ExprKind::Array(xs), ExprKind::Array(ys)) => {
            if xs.len() != ys.len() {
                return Err(format!("adding cotangents of arrays of lengths {} and {}", xs.len(), ys.len()));
            }
            let zs = xs.iter().zip(ys).map(|(x, y)| add(x, y)).collect::<Result<Vec<_>, _>>()?;
            mk(ExprKind::Array(zs), a.ty.clone())
        }
        _ => return Err("internal: adding vectors of different shapes".into()),
    })
}

/// `k · a`.
pub fn scale(a: &E, k: f64) -> E {
    if a.ty.is_discrete() {
        return zero(&a.ty);
    }
    match &a.kind {
        ExprKind::Lit(Lit::Real(x)) => real(k * x),
        ExprKind::Tuple(xs) => {
            Expr::new(ExprKind::Tuple(xs.iter().map(|x| scale(x, k)).collect()), a.span, a.ty.clone())
        }
        ExprKind::Array(xs) => mk(ExprKind::Array(xs.iter().map(|x| scale(x, k)).collect()), a.ty.clone()),
        _ => zero(&a.ty),
    }
}

/// `⟨a, b⟩ = Σ aᵢ bᵢ` over the continuous components: the pairing `a* b` of a dual vector with a
/// tangent. Arrays of different lengths are the error `anf::ir::pairing_message` (the first in
/// order: an array's length, then its elements in order; a tuple's components in order, with the
/// path to it), the one compiled code's `ctCheck'` gives.
pub fn inner(a: &E, b: &E) -> Result<f64, String> {
    inner_at(a, b, &mut Vec::new())
}

fn inner_at(a: &E, b: &E, path: &mut Vec<anf::ir::CotangentStep>) -> Result<f64, String> {
    use anf::ir::CotangentStep as S;
    if a.ty.is_discrete() || b.ty.is_discrete() {
        return Ok(0.0);
    }
    Ok(match (&a.kind, &b.kind) {
        (ExprKind::Zero, _) | (_, ExprKind::Zero) => 0.0,
        (ExprKind::Lit(Lit::Real(x)), ExprKind::Lit(Lit::Real(y))) => x * y,
        (ExprKind::Tuple(xs), ExprKind::Tuple(ys)) | (ExprKind::Array(xs), ExprKind::Array(ys)) => {
            let array = matches!(a.kind, ExprKind::Array(_));
            if xs.len() != ys.len() {
                if !array {
                    return Err("internal: pairing tuples of different sizes".into());
                }
                return Err(anf::ir::pairing_message(path, xs.len() as i64, ys.len() as i64));
            }
            let mut s = 0.0;
            for (i, (x, y)) in xs.iter().zip(ys).enumerate() {
                path.push(if array { S::Element(i as i64) } else { S::Component(i as i64 + 1) });
                let r = inner_at(x, y, path);
                path.pop();
                s += r?;
            }
            s
        }
        _ => return Err("internal: pairing vectors of different shapes".into()),
    })
}

/// The array of length `n` with `c` at `i` and `0` elsewhere.
pub fn one_hot(n: usize, i: usize, c: &E, ty: &Type) -> E {
    let elem = match ty {
        Type::Array(t) => (**t).clone(),
        _ => c.ty.clone(),
    };
    let z = zero(&elem);
    let xs = (0..n).map(|k| if k == i { c.clone() } else { z.clone() }).collect();
    mk(ExprKind::Array(xs), ty.clone())
}

/// The zero of `shape`'s type with `shape`'s array lengths.
pub fn zeros_like(shape: &E) -> E {
    match (&shape.ty, &shape.kind) {
        (Type::Real, _) => real(0.0),
        (Type::Int, _) => int(0),
        (Type::Bool, _) => boolean(false),
        (Type::Unit, _) => mk(ExprKind::Lit(Lit::Unit), Type::Unit),
        (_, ExprKind::Tuple(xs)) => mk(ExprKind::Tuple(xs.iter().map(zeros_like).collect()), shape.ty.clone()),
        (_, ExprKind::Array(xs)) => mk(ExprKind::Array(xs.iter().map(zeros_like).collect()), shape.ty.clone()),
        (Type::Bag(_), _) => mk(ExprKind::Bag(Vec::new()), shape.ty.clone()),
        (Type::Map(..), _) => mk(ExprKind::Map(Vec::new()), shape.ty.clone()),
        _ => zero(&shape.ty),
    }
}

/// `g` with every symbolic `0` (and every discrete component) replaced by the zero of `shape`.
pub fn materialise(g: &E, shape: &E) -> E {
    if shape.ty.is_discrete() {
        return zeros_like(shape);
    }
    match (&g.kind, &shape.kind) {
        (ExprKind::Zero, _) => zeros_like(shape),
        (ExprKind::Tuple(xs), ExprKind::Tuple(ss)) | (ExprKind::Array(xs), ExprKind::Array(ss))
            if xs.len() == ss.len() =>
        {
            let ys = xs.iter().zip(ss).map(|(x, s)| materialise(x, s)).collect();
            mk(
                if matches!(g.kind, ExprKind::Tuple(_)) { ExprKind::Tuple(ys) } else { ExprKind::Array(ys) },
                g.ty.clone(),
            )
        }
        _ => g.clone(),
    }
}

/// `g` with its symbolic zeros filled in from its type alone; `None` when a zero array's length
/// cannot be known.
pub fn materialise_by_type(g: &E) -> Option<E> {
    match &g.kind {
        ExprKind::Zero => zero_of_type(&g.ty),
        ExprKind::Tuple(xs) => {
            Some(mk(ExprKind::Tuple(xs.iter().map(materialise_by_type).collect::<Option<_>>()?), g.ty.clone()))
        }
        ExprKind::Array(xs) => {
            Some(mk(ExprKind::Array(xs.iter().map(materialise_by_type).collect::<Option<_>>()?), g.ty.clone()))
        }
        _ => Some(g.clone()),
    }
}

fn zero_of_type(t: &Type) -> Option<E> {
    Some(match t {
        Type::Real => real(0.0),
        Type::Int => int(0),
        Type::Bool => boolean(false),
        Type::Unit => mk(ExprKind::Lit(Lit::Unit), Type::Unit),
        Type::Tuple(ts) => mk(ExprKind::Tuple(ts.iter().map(zero_of_type).collect::<Option<_>>()?), t.clone()),
        Type::Bag(_) => mk(ExprKind::Bag(Vec::new()), t.clone()),
        Type::Map(..) => mk(ExprKind::Map(Vec::new()), t.clone()),
        _ => return None,
    })
}

/// The unit vector `e_p` of the output space shaped like `shape` (its `p`-th continuous
/// component, in order), if `shape` has that many.
pub fn basis(shape: &E, p: usize) -> Option<E> {
    fn go(s: &E, p: usize, k: &mut usize) -> E {
        if s.ty.is_discrete() {
            return zeros_like(s);
        }
        match &s.kind {
            ExprKind::Lit(Lit::Real(_)) => {
                let r = if *k == p { 1.0 } else { 0.0 };
                *k += 1;
                real(r)
            }
            ExprKind::Tuple(xs) => mk(ExprKind::Tuple(xs.iter().map(|x| go(x, p, k)).collect()), s.ty.clone()),
            ExprKind::Array(xs) => mk(ExprKind::Array(xs.iter().map(|x| go(x, p, k)).collect()), s.ty.clone()),
            _ => zeros_like(s),
        }
    }
    let mut k = 0;
    let v = go(shape, p, &mut k);
    (p < k).then_some(v)
}

/// `c` with its discrete components replaced by `0` (they carry no cotangent).
pub fn continuous(c: &E) -> E {
    if c.ty.is_discrete() {
        return zero(&c.ty);
    }
    match &c.kind {
        ExprKind::Tuple(xs) => Expr::new(ExprKind::Tuple(xs.iter().map(continuous).collect()), c.span, c.ty.clone()),
        ExprKind::Array(xs) => mk(ExprKind::Array(xs.iter().map(continuous).collect()), c.ty.clone()),
        _ => c.clone(),
    }
}

/// `k · c` for a real `k` (a literal or a term free of the tangent variables).
pub fn times(c: &E, k: &E) -> Option<E> {
    if is_zero(c) || is_zero(k) {
        return Some(zero(&c.ty));
    }
    if let ExprKind::Lit(Lit::Real(x)) = &k.kind {
        if *x == 1.0 {
            return Some(c.clone());
        }
        if is_vector(c) {
            return Some(scale(c, *x));
        }
    }
    if matches!(c.kind, ExprKind::Lit(Lit::Real(x)) if x == 1.0) && k.ty == c.ty {
        return Some(k.clone());
    }
    match (&c.ty, &c.kind) {
        (Type::Real, _) => Some(mk(ExprKind::Bin(BinOp::Mul, k.clone(), c.clone()), Type::Real)),
        (Type::Tuple(ts), _) => {
            let parts = (0..ts.len()).map(|i| times(&proj(c, i), k)).collect::<Option<Vec<_>>>()?;
            Some(Expr::new(ExprKind::Tuple(parts), c.span, c.ty.clone()))
        }
        (Type::Array(_), ExprKind::Array(xs)) => {
            Some(mk(ExprKind::Array(xs.iter().map(|x| times(x, k)).collect::<Option<Vec<_>>>()?), c.ty.clone()))
        }
        _ if c.ty.is_discrete() => Some(zero(&c.ty)),
        _ => None,
    }
}

//! One derivative rule per Real primitive: the partial derivatives ∂f/∂xᵢ, both as numbers at a
//! point (for the interpreter's pullback reducer) and as terms in the arguments (for the compiled
//! reverse-mode transform, `crate::reverse`). Keeping both forms side by side in one table is what
//! makes the two engines agree: a rule changed here changes in both.
//!
//! Each primitive `f` of arity n contributes the paper's reduction for `J f` (Mak & Ong, rule 15:
//! the Jacobian of a primitive is its matrix of partials) and its transpose (rule 5 applied to a
//! linear primitive application). Kink conventions are those of docs/language.md §5: `abs′(0) = 0`;
//! `max` and `min` send a tie to their first argument; `x ^ y` is differentiated in `y` only where
//! `y` is active (the term form returns both, the transform drops an inactive one).

use frontend::builtins::Builtin;
use frontend::syntax::{BinOp, ExprKind, Lit, E};
use frontend::types::Type;

use crate::reverse::term::{bin, call, if_, mk, rbin, real};

/// A Real primitive: a builtin, an arithmetic operator, or negation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prim {
    Builtin(Builtin),
    Op(BinOp),
    Neg,
}

/// Is `p` a primitive with Real partials (at Real arguments)?
pub fn is_real_prim(p: Prim) -> bool {
    use Builtin as B;
    match p {
        Prim::Builtin(b) => matches!(
            b,
            B::Sin
                | B::Cos
                | B::Tan
                | B::Exp
                | B::Log
                | B::Sqrt
                | B::Tanh
                | B::Sigmoid
                | B::Abs
                | B::Neg
                | B::Max
                | B::Min
                | B::Floor
                | B::Round
        ),
        Prim::Op(op) => matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Pow),
        Prim::Neg => true,
    }
}

/// ∂f/∂xᵢ at the Real point `xs` (rule 15: the entries of `J f` at a point). `None` when `p` is
/// not a Real primitive or the arity is wrong.
pub fn partials(p: Prim, xs: &[f64]) -> Option<Vec<f64>> {
    use Builtin as B;
    let x = *xs.first()?;
    Some(match p {
        Prim::Builtin(b) => match b {
            B::Sin => vec![x.cos()],
            B::Cos => vec![-x.sin()],
            B::Tan => vec![1.0 / (x.cos() * x.cos())],
            B::Exp => vec![x.exp()],
            B::Log => vec![1.0 / x],
            B::Sqrt => vec![0.5 / x.sqrt()],
            B::Tanh => vec![1.0 - x.tanh() * x.tanh()],
            B::Sigmoid => {
                let s = 1.0 / (1.0 + (-x).exp());
                vec![s * (1.0 - s)]
            }
            // abs′(0) = 0.
            B::Abs => vec![if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }],
            B::Neg => vec![-1.0],
            // floor and round are constant between their kinks; 0 at the kinks too.
            B::Floor | B::Round => vec![0.0],
            // A tie goes to the first argument, as `max` and `min` themselves do.
            B::Max => {
                let y = *xs.get(1)?;
                if y > x {
                    vec![0.0, 1.0]
                } else {
                    vec![1.0, 0.0]
                }
            }
            B::Min => {
                let y = *xs.get(1)?;
                if y < x {
                    vec![0.0, 1.0]
                } else {
                    vec![1.0, 0.0]
                }
            }
            _ => return None,
        },
        Prim::Neg => vec![-1.0],
        Prim::Op(op) => {
            let y = *xs.get(1)?;
            match op {
                BinOp::Add => vec![1.0, 1.0],
                BinOp::Sub => vec![1.0, -1.0],
                BinOp::Mul => vec![y, x],
                BinOp::Div => vec![1.0 / y, -x / (y * y)],
                BinOp::Pow => vec![y * x.powf(y - 1.0), x.powf(y) * x.ln()],
                _ => return None,
            }
        }
    })
}

/// ∂f/∂xᵢ as terms in the (atomic, Real) arguments `xs` — the same rules as [`partials`], written
/// so that evaluating the term at a point gives exactly the number `partials` gives there.
pub fn partial_terms(p: Prim, xs: &[E]) -> Option<Vec<E>> {
    partial_terms_at(p, xs, None)
}

/// Does a partial of `p` read its result `y = f(xs)` (given to [`partial_terms_at`])?
pub fn reads_result(p: Prim) -> bool {
    use Builtin as B;
    matches!(p, Prim::Builtin(B::Exp | B::Sqrt | B::Tanh | B::Sigmoid) | Prim::Op(BinOp::Pow))
}

/// [`partial_terms`] with `result`, when given, an atom that holds the primitive's result `f(xs)`,
/// computed already (by the forward phase): the rules that are functions of the result
/// (`exp′ = y`, `tanh′ = 1 − y²`, `sqrt′ = 0.5 / y`, `sigmoid′ = y(1 − y)`, `∂(x^c)/∂c = y · log x`;
/// [`reads_result`]) read it instead of calling `f` again. The same rule either way, and the same
/// number: `result` is `f(xs)` computed by the same function.
pub fn partial_terms_at(p: Prim, xs: &[E], result: Option<&E>) -> Option<Vec<E>> {
    use Builtin as B;
    let x = xs.first()?;
    let f = |b: Builtin, a: &E| call(b, std::slice::from_ref(a), Type::Real);
    // The result f(x): `result` when given, else f called again.
    let res = |b: Builtin| result.cloned().unwrap_or_else(|| f(b, x));
    let neg = |a: E| mk(ExprKind::Neg(a), Type::Real);
    let gt = |a: &E, b: &E| bin(BinOp::Gt, a, b, Type::Bool);
    let lt = |a: &E, b: &E| bin(BinOp::Lt, a, b, Type::Bool);
    Some(match p {
        Prim::Builtin(b) => match b {
            B::Sin => vec![f(B::Cos, x)],
            B::Cos => vec![neg(f(B::Sin, x))],
            B::Tan => {
                let c = f(B::Cos, x);
                vec![rbin(BinOp::Div, &real(1.0), &rbin(BinOp::Mul, &c, &c))]
            }
            B::Exp => vec![res(B::Exp)],
            B::Log => vec![rbin(BinOp::Div, &real(1.0), x)],
            B::Sqrt => vec![rbin(BinOp::Div, &real(0.5), &res(B::Sqrt))],
            B::Tanh => {
                let t = res(B::Tanh);
                vec![rbin(BinOp::Sub, &real(1.0), &rbin(BinOp::Mul, &t, &t))]
            }
            B::Sigmoid => {
                let s = res(B::Sigmoid);
                vec![rbin(BinOp::Mul, &s, &rbin(BinOp::Sub, &real(1.0), &s))]
            }
            // abs′(0) = 0.
            B::Abs => {
                let zero = real(0.0);
                vec![if_(&gt(x, &zero), real(1.0), if_(&lt(x, &zero), real(-1.0), real(0.0)))]
            }
            B::Neg => vec![real(-1.0)],
            // floor and round are constant between their kinks; 0 at the kinks too.
            B::Floor | B::Round => vec![real(0.0)],
            // A tie goes to the first argument.
            B::Max | B::Min => {
                let y = xs.get(1)?;
                let second = if b == B::Max { gt(y, x) } else { lt(y, x) };
                vec![if_(&second, real(0.0), real(1.0)), if_(&second, real(1.0), real(0.0))]
            }
            _ => return None,
        },
        Prim::Neg => vec![real(-1.0)],
        Prim::Op(op) => {
            let y = xs.get(1)?;
            match op {
                BinOp::Add => vec![real(1.0), real(1.0)],
                BinOp::Sub => vec![real(1.0), real(-1.0)],
                BinOp::Mul => vec![y.clone(), x.clone()],
                BinOp::Div => {
                    vec![rbin(BinOp::Div, &real(1.0), y), rbin(BinOp::Div, &neg(x.clone()), &rbin(BinOp::Mul, y, y))]
                }
                BinOp::Pow => {
                    let ym1 = rbin(BinOp::Sub, y, &real(1.0));
                    vec![
                        rbin(BinOp::Mul, y, &rbin(BinOp::Pow, x, &ym1)),
                        rbin(BinOp::Mul, &result.cloned().unwrap_or_else(|| rbin(BinOp::Pow, x, y)), &f(B::Log, x)),
                    ]
                }
                _ => return None,
            }
        }
    })
}

/// Is `e` the literal `1.0` (a partial that needs no multiplication)?
pub fn is_one(e: &E) -> bool {
    matches!(e.kind, ExprKind::Lit(Lit::Real(x)) if x == 1.0)
}

/// Is `e` the literal `-1.0`?
pub fn is_minus_one(e: &E) -> bool {
    matches!(e.kind, ExprKind::Lit(Lit::Real(x)) if x == -1.0)
}

//! The shared rule table (`adjoint::rules`) against forward-mode dual numbers.
//!
//! For every Real primitive and operator, at several points (kinks and ties included), each
//! partial derivative the table gives — as a number (`partials`, which the interpreter's pullback
//! reducer reads) and as a term (`partial_terms`, which compiled reverse mode emits; evaluated here
//! by a small evaluator of its own) — must agree to 1e-12 relative with forward mode on dual
//! numbers `a + b·ε` (ε² = 0), implemented below from the elementary derivatives of `exp ln sin cos
//! sqrt` and the reciprocal only. The other primitives are built from those (`tan = sin/cos`,
//! `tanh` and `sigmoid` from `exp`, `x ^ y = exp (y · ln x)`, an integer power by repeated
//! multiplication), so the oracle shares no formula with the table. Kinks follow
//! docs/language.md §5: `abs′(0) = 0`, a tie of `max`/`min` goes to the first argument, `floor` and
//! `round` have derivative 0.
//!
//! This is the cheap guard of the table (it rebuilds only `adjoint`), which is what makes mutation
//! testing of it affordable; `runtime/tests/derivative_sweep.rs` checks the same rules end to end,
//! through both engines and to second order.

use adjoint::reverse::term::{real, var};
use adjoint::rules::{
    is_minus_one, is_one, is_real_prim, partial_terms, partial_terms_at, partials, reads_result, Prim,
};
use frontend::builtins::Builtin;
use frontend::syntax::{BinOp, ExprKind, Lit, LocalId, VarRef, E};
use frontend::types::Type;

/// A dual number `v + d·ε`.
#[derive(Clone, Copy, Debug)]
struct D {
    v: f64,
    d: f64,
}

impl D {
    fn c(v: f64) -> D {
        D { v, d: 0.0 }
    }
    fn add(self, o: D) -> D {
        D { v: self.v + o.v, d: self.d + o.d }
    }
    fn neg(self) -> D {
        D { v: -self.v, d: -self.d }
    }
    fn sub(self, o: D) -> D {
        self.add(o.neg())
    }
    fn mul(self, o: D) -> D {
        D { v: self.v * o.v, d: self.d * o.v + self.v * o.d }
    }
    fn recip(self) -> D {
        D { v: 1.0 / self.v, d: -self.d / (self.v * self.v) }
    }
    fn div(self, o: D) -> D {
        self.mul(o.recip())
    }
    fn exp(self) -> D {
        D { v: self.v.exp(), d: self.d * self.v.exp() }
    }
    fn ln(self) -> D {
        D { v: self.v.ln(), d: self.d / self.v }
    }
    fn sin(self) -> D {
        D { v: self.v.sin(), d: self.d * self.v.cos() }
    }
    fn cos(self) -> D {
        D { v: self.v.cos(), d: -self.d * self.v.sin() }
    }
    fn sqrt(self) -> D {
        let r = self.v.sqrt();
        D { v: r, d: self.d / (r + r) }
    }
}

/// The function of each primitive on dual numbers; `None` where the oracle has no rule at that
/// point (a non-integer power of a negative base).
fn oracle(p: Prim, xs: &[D]) -> Option<D> {
    use Builtin as B;
    let x = xs[0];
    let one = D::c(1.0);
    Some(match p {
        Prim::Builtin(b) => match b {
            B::Sin => x.sin(),
            B::Cos => x.cos(),
            B::Tan => x.sin().div(x.cos()),
            B::Exp => x.exp(),
            B::Log => x.ln(),
            B::Sqrt => x.sqrt(),
            B::Tanh => {
                let e = x.add(x).exp();
                e.sub(one).div(e.add(one))
            }
            B::Sigmoid => one.div(one.add(x.neg().exp())),
            // abs′(0) = 0 by convention: the oracle takes the constant branch there.
            B::Abs if x.v > 0.0 => x,
            B::Abs if x.v < 0.0 => x.neg(),
            B::Abs => D::c(0.0),
            B::Neg => x.neg(),
            B::Floor => D::c(x.v.floor()),
            B::Round => D::c(x.v.round()),
            // A tie goes to the first argument.
            B::Max => {
                if xs[1].v > x.v {
                    xs[1]
                } else {
                    x
                }
            }
            B::Min => {
                if xs[1].v < x.v {
                    xs[1]
                } else {
                    x
                }
            }
            _ => return None,
        },
        Prim::Neg => x.neg(),
        Prim::Op(op) => {
            let y = xs[1];
            match op {
                BinOp::Add => x.add(y),
                BinOp::Sub => x.sub(y),
                BinOp::Mul => x.mul(y),
                BinOp::Div => x.div(y),
                BinOp::Pow if x.v > 0.0 => y.mul(x.ln()).exp(),
                // A negative base: only a constant integer exponent, by repeated multiplication.
                BinOp::Pow if y.d == 0.0 && y.v.fract() == 0.0 => {
                    let mut r = one;
                    for _ in 0..(y.v.abs() as u32) {
                        r = r.mul(x);
                    }
                    if y.v < 0.0 {
                        r.recip()
                    } else {
                        r
                    }
                }
                _ => return None,
            }
        }
    })
}

/// The value of a partial-derivative term, evaluated at `env` (the arguments' variables).
#[derive(Clone, Copy, Debug, PartialEq)]
enum V {
    R(f64),
    B(bool),
}

fn r(v: V) -> f64 {
    match v {
        V::R(x) => x,
        V::B(_) => panic!("a Bool where a Real was expected"),
    }
}

fn eval(e: &E, env: &[(LocalId, f64)]) -> V {
    match &e.kind {
        ExprKind::Lit(Lit::Real(x)) => V::R(*x),
        ExprKind::Var(_, VarRef::Local(id)) => {
            V::R(env.iter().find(|(i, _)| i == id).expect("an unbound variable in a partial").1)
        }
        ExprKind::Neg(a) => V::R(-r(eval(a, env))),
        ExprKind::If(c, a, b) => match eval(c, env) {
            V::B(true) => eval(a, env),
            V::B(false) => eval(b, env),
            V::R(_) => panic!("a Real condition"),
        },
        ExprKind::Bin(op, a, b) => {
            let (a, b) = (r(eval(a, env)), r(eval(b, env)));
            match op {
                BinOp::Add => V::R(a + b),
                BinOp::Sub => V::R(a - b),
                BinOp::Mul => V::R(a * b),
                BinOp::Div => V::R(a / b),
                BinOp::Pow => V::R(a.powf(b)),
                BinOp::Lt => V::B(a < b),
                BinOp::Gt => V::B(a > b),
                BinOp::Le => V::B(a <= b),
                BinOp::Ge => V::B(a >= b),
                BinOp::Eq => V::B(a == b),
                BinOp::Ne => V::B(a != b),
                _ => panic!("an unexpected operator {op:?} in a partial"),
            }
        }
        ExprKind::App(..) => {
            let mut args = Vec::new();
            let mut h = e;
            while let ExprKind::App(f, a) = &h.kind {
                args.push(r(eval(a, env)));
                h = f;
            }
            args.reverse();
            let ExprKind::Var(_, VarRef::Builtin(b)) = &h.kind else { panic!("a call of a non-builtin") };
            let x = args[0];
            use Builtin as B;
            V::R(match b {
                B::Sin => x.sin(),
                B::Cos => x.cos(),
                B::Tan => x.tan(),
                B::Exp => x.exp(),
                B::Log => x.ln(),
                B::Sqrt => x.sqrt(),
                B::Tanh => x.tanh(),
                B::Sigmoid => 1.0 / (1.0 + (-x).exp()),
                B::Abs => x.abs(),
                B::Neg => -x,
                _ => panic!("an unexpected builtin {b:?} in a partial"),
            })
        }
        k => panic!("an unexpected term in a partial: {k:?}"),
    }
}

const UNARY: &[Builtin] = &[
    Builtin::Sin,
    Builtin::Cos,
    Builtin::Tan,
    Builtin::Exp,
    Builtin::Log,
    Builtin::Sqrt,
    Builtin::Tanh,
    Builtin::Sigmoid,
    Builtin::Abs,
    Builtin::Neg,
    Builtin::Floor,
    Builtin::Round,
];
const OPS: &[BinOp] = &[BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Pow];

/// Every Real primitive with its points.
fn cases() -> Vec<(Prim, Vec<Vec<f64>>)> {
    let mut out = Vec::new();
    for &b in UNARY {
        let pts: &[f64] = match b {
            Builtin::Log | Builtin::Sqrt => &[0.3, 2.0, 7.5],
            Builtin::Abs => &[-1.75, 0.0, 0.6],
            Builtin::Floor | Builtin::Round => &[-1.25, 0.4, 2.7],
            _ => &[-2.3, -0.7, 0.4, 1.3],
        };
        out.push((Prim::Builtin(b), pts.iter().map(|x| vec![*x]).collect()));
    }
    out.push((Prim::Neg, vec![vec![-0.5], vec![1.5]]));
    // Both orders and a tie.
    let pairs = vec![vec![1.5, 2.5], vec![2.5, 1.5], vec![-0.75, -0.75]];
    out.push((Prim::Builtin(Builtin::Max), pairs.clone()));
    out.push((Prim::Builtin(Builtin::Min), pairs));
    for &op in OPS {
        let pts: Vec<Vec<f64>> = match op {
            // Positive bases in both operands; negative bases with constant integer exponents.
            BinOp::Pow => vec![vec![2.0, 3.0], vec![0.7, -1.5], vec![2.5, 0.5], vec![-1.5, 3.0], vec![-2.0, -2.0]],
            // Small and negative denominators.
            _ => vec![vec![1.5, 2.5], vec![-0.3, 0.01], vec![2.0, -0.75], vec![-1.25, -3.0]],
        };
        out.push((Prim::Op(op), pts));
    }
    out
}

fn agree(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-12 * want.abs().max(got.abs()) + 1e-14
}

#[test]
fn every_partial_agrees_with_dual_numbers_as_a_number_and_as_a_term() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for (p, points) in cases() {
        for xs in points {
            let n = xs.len();
            let vars: Vec<E> = (0..n).map(|i| var(LocalId(i as u32), &format!("x{i}").into(), &Type::Real)).collect();
            let env: Vec<(LocalId, f64)> = (0..n).map(|i| (LocalId(i as u32), xs[i])).collect();
            let nums = partials(p, &xs);
            let terms = partial_terms(p, &vars);
            let (Some(nums), Some(terms)) = (nums, terms) else {
                failures.push(format!("{p:?} at {xs:?}: no rule"));
                continue;
            };
            if nums.len() != n || terms.len() != n {
                failures.push(format!("{p:?}: {} partials and {} terms for {n} arguments", nums.len(), terms.len()));
                continue;
            }
            for i in 0..n {
                let seeded: Vec<D> = (0..n).map(|j| D { v: xs[j], d: if i == j { 1.0 } else { 0.0 } }).collect();
                // A constant integer exponent of a negative base is differentiated in the base only.
                let Some(want) = oracle(p, &seeded) else { continue };
                let want = want.d;
                let got_term = r(eval(&terms[i], &env));
                checked += 1;
                if !agree(nums[i], want) || !agree(got_term, want) {
                    failures.push(format!(
                        "{p:?} at {xs:?}, ∂/∂x{i}: number {}, term {got_term}, dual numbers {want}",
                        nums[i]
                    ));
                }
            }
        }
    }
    assert!(checked >= 95, "only {checked} partials checked");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// Calls of builtins and powers in a term (each a libm call in compiled code).
fn calls(e: &E) -> usize {
    match &e.kind {
        ExprKind::App(f, a) => {
            let head = matches!(f.kind, ExprKind::Var(_, VarRef::Builtin(_)));
            usize::from(head) + calls(f) + calls(a)
        }
        ExprKind::Neg(a) => calls(a),
        ExprKind::If(c, a, b) => calls(c) + calls(a) + calls(b),
        ExprKind::Bin(op, a, b) => usize::from(*op == BinOp::Pow) + calls(a) + calls(b),
        _ => 0,
    }
}

/// The rules written in the primitive's result (`partial_terms_at`, what compiled reverse mode
/// emits with the forward phase's result in scope) agree with dual numbers too; those that read
/// the result (`reads_result`) make fewer calls than recomputing it, and the others are the
/// plain rules unchanged.
#[test]
fn partials_in_the_result_agree_and_call_less() {
    let mut failures = Vec::new();
    let mut fewer = 0;
    for (p, points) in cases() {
        for xs in points {
            let n = xs.len();
            let vars: Vec<E> = (0..n).map(|i| var(LocalId(i as u32), &format!("x{i}").into(), &Type::Real)).collect();
            let y = var(LocalId(n as u32), &"y".into(), &Type::Real);
            let consts: Vec<D> = xs.iter().map(|x| D::c(*x)).collect();
            let Some(fx) = oracle(p, &consts) else { continue };
            let mut env: Vec<(LocalId, f64)> = (0..n).map(|i| (LocalId(i as u32), xs[i])).collect();
            env.push((LocalId(n as u32), fx.v));
            let (Some(plain), Some(at)) = (partial_terms(p, &vars), partial_terms_at(p, &vars, Some(&y))) else {
                failures.push(format!("{p:?} at {xs:?}: no rule"));
                continue;
            };
            let (cp, ca): (usize, usize) = (plain.iter().map(calls).sum(), at.iter().map(calls).sum());
            if reads_result(p) {
                if ca >= cp {
                    failures.push(format!("{p:?}: {ca} calls reading the result, {cp} recomputing it"));
                }
                fewer += 1;
            } else if format!("{plain:?}") != format!("{at:?}") {
                failures.push(format!("{p:?} does not read its result, yet its rule changed"));
            }
            for i in 0..n {
                let seeded: Vec<D> = (0..n).map(|j| D { v: xs[j], d: if i == j { 1.0 } else { 0.0 } }).collect();
                let Some(want) = oracle(p, &seeded) else { continue };
                let got = r(eval(&at[i], &env));
                if !agree(got, want.d) {
                    failures.push(format!("{p:?} at {xs:?}, ∂/∂x{i} in the result: {got}, dual numbers {}", want.d));
                }
            }
        }
    }
    assert!(fewer >= 15, "only {fewer} points of primitives that read their result");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// `is_real_prim` names exactly the primitives the table has rules for, and the table has no rule
/// for anything else (Int-only operators, comparisons, non-Real builtins).
#[test]
fn the_table_covers_exactly_the_real_primitives() {
    let mut prims: Vec<Prim> = Builtin::ALL.iter().map(|b| Prim::Builtin(*b)).collect();
    prims.push(Prim::Neg);
    for op in [
        BinOp::Or,
        BinOp::And,
        BinOp::Eq,
        BinOp::Ne,
        BinOp::Lt,
        BinOp::Le,
        BinOp::Gt,
        BinOp::Ge,
        BinOp::Oplus,
        BinOp::Ominus,
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Rem,
        BinOp::Pow,
    ] {
        prims.push(Prim::Op(op));
    }
    let vars: Vec<E> = (0..2).map(|i| var(LocalId(i), &format!("x{i}").into(), &Type::Real)).collect();
    let with_rules: Vec<Prim> = cases().into_iter().map(|(p, _)| p).collect();
    for p in prims {
        let expected = with_rules.contains(&p);
        assert_eq!(is_real_prim(p), expected, "is_real_prim({p:?})");
        assert_eq!(partials(p, &[0.5, 1.5]).is_some(), expected, "partials({p:?})");
        assert_eq!(partial_terms(p, &vars).is_some(), expected, "partial_terms({p:?})");
    }
    // A binary primitive given one argument has no rule (rather than reading past the arguments).
    for p in [Prim::Builtin(Builtin::Max), Prim::Builtin(Builtin::Min), Prim::Op(BinOp::Mul)] {
        assert!(partials(p, &[0.5]).is_none() && partial_terms(p, &vars[..1]).is_none(), "{p:?}");
    }
}

/// The literals the transform multiplies by without a multiplication.
#[test]
fn one_and_minus_one_are_recognised_only_as_literals() {
    assert!(is_one(&real(1.0)) && !is_one(&real(-1.0)) && !is_one(&real(0.0)) && !is_one(&real(2.0)));
    assert!(is_minus_one(&real(-1.0)) && !is_minus_one(&real(1.0)) && !is_minus_one(&real(0.0)));
    let x = var(LocalId(0), &"x".into(), &Type::Real);
    assert!(!is_one(&x) && !is_minus_one(&x));
}

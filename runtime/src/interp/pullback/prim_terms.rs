//! `Sym::derivative_term` (rule J's Jacobian of a primitive, written as a term) against forward-mode
//! dual numbers computed here: for every Real primitive, both operands of every arithmetic
//! operator, `toReal`, `sum` and `dot`, at several points and tangents, the term is built, evaluated
//! by a small evaluator of its own (numbers, `if`, comparisons, the unary primitives, `sum`, `dot`)
//! and compared with the derivative of the dual-number extension. A primitive must have its term:
//! without one the reducer falls back to reducing the premise of rule J, which loops or crawls.

use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::types::Type;

use super::prim::Sym;
use super::term::{builtin_head, mk, real};

#[derive(Clone, Debug)]
enum V {
    R(f64),
    B(bool),
    A(Vec<f64>),
}

fn num(v: V) -> f64 {
    match v {
        V::R(x) => x,
        v => panic!("not a number: {v:?}"),
    }
}

fn arr(v: V) -> Vec<f64> {
    match v {
        V::A(xs) => xs,
        v => panic!("not an array: {v:?}"),
    }
}

/// Evaluates a closed derivative term.
fn ev(e: &E) -> V {
    use ExprKind as K;
    match &e.kind {
        K::Lit(Lit::Real(x)) => V::R(*x),
        K::Lit(Lit::Bool(b)) => V::B(*b),
        K::Zero if e.ty == Type::Real => V::R(0.0),
        K::Array(xs) => V::A(xs.iter().map(|x| num(ev(x))).collect()),
        K::Neg(a) => V::R(-num(ev(a))),
        K::Sum(a, b) => V::R(num(ev(a)) + num(ev(b))),
        K::If(c, a, b) => match ev(c) {
            V::B(true) => ev(a),
            V::B(false) => ev(b),
            v => panic!("condition {v:?}"),
        },
        K::Bin(op, a, b) => {
            let (x, y) = (num(ev(a)), num(ev(b)));
            match op {
                BinOp::Add => V::R(x + y),
                BinOp::Sub => V::R(x - y),
                BinOp::Mul => V::R(x * y),
                BinOp::Div => V::R(x / y),
                BinOp::Pow => V::R(x.powf(y)),
                BinOp::Gt => V::B(x > y),
                BinOp::Lt => V::B(x < y),
                op => panic!("operator {op:?} in a derivative term"),
            }
        }
        K::App(..) => {
            let mut args = Vec::new();
            let mut f = e;
            while let K::App(g, a) = &f.kind {
                args.push(a);
                f = g;
            }
            args.reverse();
            let b = builtin_head(f).unwrap_or_else(|| panic!("applied non-builtin in {e:?}"));
            let x = || num(ev(args[0]));
            V::R(match b {
                Builtin::Sin => x().sin(),
                Builtin::Cos => x().cos(),
                Builtin::Tan => x().tan(),
                Builtin::Exp => x().exp(),
                Builtin::Log => x().ln(),
                Builtin::Sqrt => x().sqrt(),
                Builtin::Tanh => x().tanh(),
                Builtin::Sigmoid => 1.0 / (1.0 + (-x()).exp()),
                Builtin::Sum => arr(ev(args[0])).iter().sum(),
                Builtin::Dot => arr(ev(args[0])).iter().zip(arr(ev(args[1]))).map(|(a, b)| a * b).sum(),
                b => panic!("builtin {b:?} in a derivative term"),
            })
        }
        _ => panic!("unexpected term {e:?}"),
    }
}

/// A dual number `v + d ε`.
#[derive(Clone, Copy)]
struct D(f64, f64);

/// The tangent part of the primitive's extension to dual numbers.
fn dual_unary(b: Builtin, x: D) -> f64 {
    let D(v, d) = x;
    let s = 1.0 / (1.0 + (-v).exp());
    match b {
        Builtin::Sin => v.cos() * d,
        Builtin::Cos => -v.sin() * d,
        Builtin::Tan => d / (v.cos() * v.cos()),
        Builtin::Exp => v.exp() * d,
        Builtin::Log => d / v,
        Builtin::Sqrt => d / (2.0 * v.sqrt()),
        Builtin::Tanh => (1.0 - v.tanh() * v.tanh()) * d,
        Builtin::Sigmoid => s * (1.0 - s) * d,
        Builtin::Abs => v.signum() * d * if v == 0.0 { 0.0 } else { 1.0 },
        Builtin::Neg => -d,
        Builtin::Floor | Builtin::Round => 0.0,
        b => panic!("{b:?} is not unary"),
    }
}

fn dual_binary(op: BinOp, x: D, y: D) -> f64 {
    let (D(a, da), D(b, db)) = (x, y);
    match op {
        BinOp::Add => da + db,
        BinOp::Sub => da - db,
        BinOp::Mul => da * b + a * db,
        BinOp::Div => (da * b - a * db) / (b * b),
        BinOp::Pow => b * a.powf(b - 1.0) * da + a.powf(b) * a.ln() * db,
        op => panic!("{op:?}"),
    }
}

fn close(got: f64, want: f64) -> bool {
    got == want || (got - want).abs() <= 1e-12 * want.abs().max(1.0)
}

fn term(sym: &Sym, p: E, t: E) -> f64 {
    let d = sym.derivative_term(&p, &t).unwrap_or_else(|| panic!("{sym:?} has no derivative term"));
    num(ev(&d))
}

fn pair(a: E, b: E) -> E {
    super::term::tuple(vec![a, b])
}

const POINTS: [f64; 6] = [0.7, 2.5, -1.3, 0.0, 4.0, -0.2];
const TANGENTS: [f64; 3] = [1.0, -0.5, 3.0];

#[test]
fn derivative_terms_of_unary_primitives_match_dual_numbers() {
    use Builtin as B;
    let r2r = Type::fun(Type::Real, Type::Real);
    for b in [B::Sin, B::Cos, B::Tan, B::Exp, B::Log, B::Sqrt, B::Tanh, B::Sigmoid, B::Abs, B::Neg, B::Floor, B::Round]
    {
        let sym = Sym::Prim(b, r2r.clone());
        for x in POINTS {
            if matches!(b, B::Log | B::Sqrt) && x <= 0.0 {
                continue;
            }
            for t in TANGENTS {
                let (got, want) = (term(&sym, real(x), real(t)), dual_unary(b, D(x, t)));
                assert!(close(got, want), "{b:?} at {x} along {t}: term {got}, dual numbers {want}");
            }
        }
    }
}

#[test]
fn derivative_terms_of_binary_primitives_match_dual_numbers() {
    let r2 = Type::fun(Type::Real, Type::fun(Type::Real, Type::Real));
    for op in [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Pow] {
        let sym = Sym::Op(op, Type::Real);
        for x in POINTS {
            for y in POINTS {
                if (op == BinOp::Div && y == 0.0) || (op == BinOp::Pow && x <= 0.0) {
                    continue;
                }
                for (dx, dy) in [(1.0, 0.0), (0.0, 1.0), (-0.5, 3.0)] {
                    let got = term(&sym, pair(real(x), real(y)), pair(real(dx), real(dy)));
                    let want = dual_binary(op, D(x, dx), D(y, dy));
                    assert!(
                        close(got, want),
                        "{op:?} at ({x}, {y}) along ({dx}, {dy}): term {got}, dual numbers {want}"
                    );
                }
            }
        }
    }
    // max and min: the tangent of the argument chosen; a tie goes to the first.
    for (b, pick) in [(Builtin::Max, f64::max as fn(f64, f64) -> f64), (Builtin::Min, f64::min)] {
        let sym = Sym::Prim(b, r2.clone());
        for x in POINTS {
            for y in POINTS {
                let (dx, dy) = (1.5, -2.0);
                let got = term(&sym, pair(real(x), real(y)), pair(real(dx), real(dy)));
                let want = if x == y || pick(x, y) == x { dx } else { dy };
                assert_eq!(got, want, "{b:?} at ({x}, {y})");
            }
        }
    }
}

#[test]
fn derivative_terms_of_conversions_and_reductions() {
    let int = |n: i64| mk(ExprKind::Lit(Lit::Int(n)), Type::Int);
    let to_real = Sym::Prim(Builtin::ToReal, Type::fun(Type::Int, Type::Real));
    assert_eq!(term(&to_real, int(3), super::term::zero(&Type::Int)), 0.0);
    let ar = Type::Array(std::rc::Rc::new(Type::Real));
    let array = |xs: &[f64]| mk(ExprKind::Array(xs.iter().map(|x| real(*x)).collect()), ar.clone());
    let (x, y, dx, dy) = ([1.0, -2.0, 0.5], [3.0, 0.25, -4.0], [0.5, 1.0, -1.0], [2.0, -3.0, 0.125]);
    let sum = Sym::Prim(Builtin::Sum, Type::fun(ar.clone(), Type::Real));
    assert_eq!(term(&sum, array(&x), array(&dx)), dx.iter().sum::<f64>());
    let dot = Sym::Prim(Builtin::Dot, Type::fun(ar.clone(), Type::fun(ar.clone(), Type::Real)));
    let want: f64 = (0..3).map(|i| dx[i] * y[i] + x[i] * dy[i]).sum();
    let got = term(&dot, pair(array(&x), array(&y)), pair(array(&dx), array(&dy)));
    assert!(close(got, want), "dot: term {got}, dual numbers {want}");
}

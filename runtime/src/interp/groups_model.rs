//! The interpreter's group arithmetic (`groups.rs`) against a model: random groups (`intGroup`,
//! `realGroup`, `bagGroup`, `mapGroup g`, `pairGroup g h` and a user group over Int, nested up to
//! three deep) and random values of them, combined by `group_op`, `group_op_into` (on a value held
//! only here and on a shared one), `group_inverse`, `group_zero` and `group_scale` (-4..=4), each
//! result read back structurally and compared with the same operation on `BTreeMap`s. The model
//! is strict about representation: a map must not keep a key whose value is the inner group's
//! zero (docs/language.md §6), even though `Value::equals` would ignore it.
//!
//! Keys, multiplicities and numbers are small (keys 0..=3, entries -2..=2) so that entries cancel
//! often; reals are small integers, so sums and scalings are exact.

use std::collections::BTreeMap;
use std::rc::Rc;

use frontend::Span;
use rustc_hash::FxHashMap;

use super::groups::{group_inverse, group_op, group_op_into, group_scale, group_zero};
use super::Interp;
use crate::value::{Bag, Group, Key, MapV, Value};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

#[derive(Clone, Debug)]
enum G {
    Int,
    Real,
    Bag,
    Map(Box<G>),
    Pair(Box<G>, Box<G>),
    /// `group (fun a b -> a + b) (fun a -> 0 - a) 0` over Int.
    User,
}

#[derive(Clone, Debug, PartialEq)]
enum M {
    Int(i64),
    Real(f64),
    Bag(BTreeMap<i64, i64>),
    Map(BTreeMap<i64, M>),
    Pair(Box<M>, Box<M>),
}

fn zero(g: &G) -> M {
    match g {
        G::Int | G::User => M::Int(0),
        G::Real => M::Real(0.0),
        G::Bag => M::Bag(BTreeMap::new()),
        G::Map(_) => M::Map(BTreeMap::new()),
        G::Pair(g, h) => M::Pair(Box::new(zero(g)), Box::new(zero(h))),
    }
}

fn op(g: &G, a: &M, b: &M) -> M {
    match (g, a, b) {
        (G::Int | G::User, M::Int(x), M::Int(y)) => M::Int(x + y),
        (G::Real, M::Real(x), M::Real(y)) => M::Real(x + y),
        (G::Bag, M::Bag(x), M::Bag(y)) => {
            let mut out = x.clone();
            for (k, n) in y {
                let s = out.get(k).unwrap_or(&0) + n;
                if s == 0 {
                    out.remove(k);
                } else {
                    out.insert(*k, s);
                }
            }
            M::Bag(out)
        }
        (G::Map(inner), M::Map(x), M::Map(y)) => {
            let mut out = x.clone();
            for (k, v) in y {
                let s = match out.get(k) {
                    Some(w) => op(inner, w, v),
                    None => v.clone(),
                };
                if s == zero(inner) {
                    out.remove(k);
                } else {
                    out.insert(*k, s);
                }
            }
            M::Map(out)
        }
        (G::Pair(g, h), M::Pair(a1, a2), M::Pair(b1, b2)) => M::Pair(Box::new(op(g, a1, b1)), Box::new(op(h, a2, b2))),
        _ => panic!("model: {a:?} · {b:?} in {g:?}"),
    }
}

fn scale(g: &G, a: &M, m: i64) -> M {
    match (g, a) {
        (G::Int | G::User, M::Int(x)) => M::Int(x * m),
        (G::Real, M::Real(x)) => M::Real(x * m as f64),
        (G::Bag, M::Bag(x)) => M::Bag(x.iter().filter(|_| m != 0).map(|(k, n)| (*k, n * m)).collect()),
        (G::Map(inner), M::Map(x)) => {
            M::Map(x.iter().map(|(k, v)| (*k, scale(inner, v, m))).filter(|(_, v)| *v != zero(inner)).collect())
        }
        (G::Pair(g, h), M::Pair(a1, a2)) => M::Pair(Box::new(scale(g, a1, m)), Box::new(scale(h, a2, m))),
        _ => panic!("model: {a:?} scaled in {g:?}"),
    }
}

fn gen_group(rng: &mut Rng, depth: u32) -> G {
    match rng.int(0, if depth == 0 { 3 } else { 5 }) {
        0 => G::Int,
        1 => G::Real,
        2 => G::Bag,
        3 => G::User,
        4 => G::Map(Box::new(gen_group(rng, depth - 1))),
        _ => G::Pair(Box::new(gen_group(rng, depth - 1)), Box::new(gen_group(rng, depth - 1))),
    }
}

/// A value of `g`'s carrier in normal form (no map entry holds the inner zero).
fn gen_value(rng: &mut Rng, g: &G) -> M {
    match g {
        G::Int | G::User => M::Int(rng.int(-2, 2)),
        G::Real => M::Real(rng.int(-2, 2) as f64),
        G::Bag => {
            M::Bag((0..rng.int(0, 4)).map(|_| (rng.int(0, 3), rng.int(-2, 2))).filter(|(_, n)| *n != 0).collect())
        }
        G::Map(inner) => M::Map(
            (0..rng.int(0, 3))
                .map(|_| (rng.int(0, 3), gen_value(rng, inner)))
                .filter(|(_, v)| *v != zero(inner))
                .collect(),
        ),
        G::Pair(g, h) => M::Pair(Box::new(gen_value(rng, g)), Box::new(gen_value(rng, h))),
    }
}

fn to_group(g: &G, user: &Value) -> Group {
    match g {
        G::Int => Group::Int,
        G::Real => Group::Real,
        G::Bag => Group::Bag,
        G::Map(inner) => Group::Map(Rc::new(to_group(inner, user))),
        G::Pair(g, h) => Group::Pair(Rc::new(to_group(g, user)), Rc::new(to_group(h, user))),
        G::User => match user {
            Value::Group(u) => (**u).clone(),
            v => panic!("not a group: {v}"),
        },
    }
}

fn to_value(m: &M) -> Value {
    match m {
        M::Int(n) => Value::Int(*n),
        M::Real(x) => Value::Real(*x),
        M::Bag(b) => Value::bag(Bag { entries: b.iter().map(|(k, n)| (Key::Int(*k), *n)).collect() }),
        M::Map(m) => Value::map(MapV {
            entries: m.iter().map(|(k, v)| (Key::Int(*k), to_value(v))).collect::<FxHashMap<_, _>>(),
        }),
        M::Pair(a, b) => Value::tuple(vec![to_value(a), to_value(b)]),
    }
}

/// The value read back as a model of `g`'s carrier, keeping whatever entries it holds.
fn read(g: &G, v: &Value) -> M {
    let key = |k: &Key| match k {
        Key::Int(n) => *n,
        k => panic!("key {k:?} is not an Int"),
    };
    match (g, v) {
        (G::Int | G::User, Value::Int(n)) => M::Int(*n),
        (G::Real, Value::Real(x)) => M::Real(*x),
        (G::Bag, Value::Bag(b)) => M::Bag(b.entries.iter().map(|(k, n)| (key(k), *n)).collect()),
        (G::Map(inner), Value::Map(m)) => M::Map(m.entries.iter().map(|(k, v)| (key(k), read(inner, v))).collect()),
        (G::Pair(g, h), Value::Tuple(t)) if t.len() == 2 => M::Pair(Box::new(read(g, &t[0])), Box::new(read(h, &t[1]))),
        _ => panic!("{v} is not a value of {g:?}"),
    }
}

const USER: &str = "def main = group (fun (a : Int) (b : Int) -> a + b) (fun (a : Int) -> 0 - a) 0";

#[test]
fn group_arithmetic_matches_the_model() {
    let (_, mono) = crate::prepare(USER, "main").unwrap();
    let mut it = Interp::new(&mono);
    it.eval_globals().unwrap();
    let user = it.globals.last().unwrap().clone();
    let sp = Span::SYNTHETIC;
    let mut rng = Rng(0x6a09e667f3bcc908);
    let (mut cancelled, mut user_scaled) = (0, 0);
    for case in 0..3000 {
        let g = gen_group(&mut rng, 3);
        let group = to_group(&g, &user);
        let a = gen_value(&mut rng, &g);
        // One case in four combines a value with its inverse, so whole maps and bags cancel.
        let b = if rng.int(0, 3) == 0 { scale(&g, &a, -1) } else { gen_value(&mut rng, &g) };
        let (va, vb) = (to_value(&a), to_value(&b));
        let want = op(&g, &a, &b);
        if want == zero(&g) && a != zero(&g) {
            cancelled += 1;
        }
        let ctx = format!("case {case}: {a:?} · {b:?} in {g:?}");

        assert_eq!(read(&g, &group_op(&mut it, &group, &va, &vb, sp).unwrap()), want, "group_op, {ctx}");
        // Into a value held only here (updated in place) and into a shared one (left as it was).
        let fresh = to_value(&a);
        assert_eq!(read(&g, &group_op_into(&mut it, &group, fresh, &vb, sp).unwrap()), want, "group_op_into, {ctx}");
        assert_eq!(read(&g, &group_op_into(&mut it, &group, va.clone(), &vb, sp).unwrap()), want, "shared, {ctx}");
        assert_eq!(read(&g, &va), a, "group_op_into changed a shared operand, {ctx}");
        assert_eq!(read(&g, &vb), b, "group_op_into changed its second operand, {ctx}");

        assert_eq!(read(&g, &group_inverse(&mut it, &group, &va, sp).unwrap()), scale(&g, &a, -1), "inverse, {ctx}");
        assert_eq!(read(&g, &group_zero(&mut it, &group, sp).unwrap()), zero(&g), "zero, {ctx}");
        for m in -4..=4 {
            let got = read(&g, &group_scale(&mut it, &group, &va, m, sp).unwrap());
            assert_eq!(got, scale(&g, &a, m), "scale by {m}, {ctx}");
        }
        if matches!(g, G::User) && a != zero(&g) {
            user_scaled += 1;
        }
    }
    // The generator reaches what it is meant to check.
    assert!(cancelled >= 300, "only {cancelled} cases cancel to the zero");
    assert!(user_scaled >= 200, "only {user_scaled} non-zero user-group values scaled");
}

#[test]
fn user_group_scaling_by_large_multiplicities() {
    // Repeated doubling: every bit pattern of |m| up to 2^12, and a few far larger, both signs.
    let (_, mono) = crate::prepare(USER, "main").unwrap();
    let mut it = Interp::new(&mono);
    it.eval_globals().unwrap();
    let group = to_group(&G::User, it.globals.last().unwrap());
    let sp = Span::SYNTHETIC;
    let ms = (0..4096).chain([1 << 20, (1 << 40) + 12345, i64::MAX / 7]).flat_map(|m| [m, -m]);
    for m in ms {
        for x in [1, -3] {
            let got = group_scale(&mut it, &group, &Value::Int(x), m, sp).unwrap();
            assert!(got.equals(&Value::Int(x.wrapping_mul(m))), "{x} scaled by {m} gave {got}");
        }
    }
}

#[test]
fn ill_shaped_operands_are_errors() {
    // The type checker never lets these through; the interpreter still reports them as errors
    // rather than combining what it can.
    let (_, mono) = crate::prepare(USER, "main").unwrap();
    let mut it = Interp::new(&mono);
    let sp = Span::SYNTHETIC;
    let pair = Group::Pair(Rc::new(Group::Int), Rc::new(Group::Int));
    let two = Value::tuple(vec![Value::Int(1), Value::Int(2)]);
    let three = Value::tuple(vec![Value::Int(1), Value::Int(2), Value::Int(3)]);
    assert!(group_op(&mut it, &pair, &two, &three, sp).is_err());
    assert!(group_op(&mut it, &pair, &three, &two, sp).is_err());
    assert!(group_op(&mut it, &pair, &three, &three, sp).is_err());
    assert!(group_inverse(&mut it, &pair, &three, sp).is_err());
    assert!(group_scale(&mut it, &pair, &three, 2, sp).is_err());
    assert!(group_op(&mut it, &Group::Int, &Value::Int(1), &Value::Real(1.0), sp).is_err());
    assert!(group_inverse(&mut it, &Group::Real, &Value::Int(1), sp).is_err());
    assert!(group_scale(&mut it, &Group::Bag, &Value::Int(1), 2, sp).is_err());
}

#[test]
fn bag_multiplicity_overflow_is_an_error() {
    let (_, mono) = crate::prepare(USER, "main").unwrap();
    let mut it = Interp::new(&mono);
    let sp = Span::SYNTHETIC;
    let big = to_value(&M::Bag(BTreeMap::from([(1, i64::MAX)])));
    let one = to_value(&M::Bag(BTreeMap::from([(1, 1)])));
    let map = |v: &Value| Value::map(MapV { entries: [(Key::Int(0), v.clone())].into_iter().collect() });
    let in_map = Group::Map(Rc::new(Group::Bag));
    assert!(group_op(&mut it, &Group::Bag, &big, &one, sp).is_err());
    assert!(group_op_into(&mut it, &Group::Bag, big.clone(), &one, sp).is_err());
    assert!(group_op(&mut it, &in_map, &map(&big), &map(&one), sp).is_err());
    assert!(group_op_into(&mut it, &in_map, map(&big), &map(&one), sp).is_err());
    assert!(group_scale(&mut it, &Group::Bag, &big, 2, sp).is_err());
    assert!(group_scale(&mut it, &in_map, &map(&big), -2, sp).is_err());
    assert!(group_inverse(&mut it, &Group::Bag, &to_value(&M::Bag(BTreeMap::from([(1, i64::MIN)]))), sp).is_err());
}

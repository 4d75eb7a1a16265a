//! Conditions a dominating branch has decided: in the blocks a branch's target dominates (the
//! target having that branch's block as its only predecessor) the branch's condition is known —
//! true under the true edge, false under the false edge — and so is every comparison that
//! computes the same thing or its negation. Lowering checks a count or a pair of lengths again
//! where an earlier check of the same values already passed (`build (len x)` inside a loop that
//! built from `len x`, the reverse transform's "fail first" run of a producer whose lengths differ,
//! which is then certain to fail at its own check); each such check, with its trap block, folds
//! to a constant that the simplifier then removes, and code reachable only through a check that
//! cannot pass goes with it.
//!
//! "The same thing" is value numbering of the pure operations a condition is made of: constants,
//! array lengths (an array's length never changes), integer and boolean arithmetic that cannot
//! fail, comparisons and `not`, each numbered by its
//! operation and its operands' numbers. Two values with one number are equal wherever both are
//! computed, so a fact about one is a fact about the other. Only comparisons and `not`s are
//! rewritten (to `bconst`); nothing that can fail is touched.

use rustc_hash::FxHashMap;

use crate::ir::cfg::{reverse_postorder, successor, Dominators};
use crate::ir::{BinaryOp, Block, Cmp, Function, Op, UnaryOp, Value, ValueDef};

/// A pure operation by its operands' numbers.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Int(i64),
    Bool(bool),
    Len(Value),
    Icmp(Cmp, Value, Value),
    Not(Value),
    /// Integer and boolean arithmetic that cannot fail (`len x - 1`).
    Bin(BinaryOp, Value, Value),
}

/// Folds the comparisons of `func` that dominating branches decide; true if any was.
pub(super) fn fold(func: &mut Function) -> bool {
    let rpo = reverse_postorder(func);
    // Value numbers: the first value computing each key; every other value is its own.
    let mut number: FxHashMap<Value, Value> = FxHashMap::default();
    let mut first: FxHashMap<Key, Value> = FxHashMap::default();
    let num = |number: &FxHashMap<Value, Value>, v: Value| number.get(&v).copied().unwrap_or(v);
    let mut has_branch = false;
    for &b in &rpo {
        for &i in &func.blocks[b].insts {
            let n = |v| num(&number, v);
            let key = match func.insts[i].op {
                Op::Iconst(k) => Key::Int(k),
                Op::Bconst(k) => Key::Bool(k),
                Op::ArrayLen(a) => Key::Len(n(a)),
                Op::Icmp(c, x, y) => Key::Icmp(c, n(x), n(y)),
                Op::Unary(UnaryOp::Not, x) => Key::Not(n(x)),
                Op::Binary(
                    op @ (BinaryOp::Iadd
                    | BinaryOp::Isub
                    | BinaryOp::Imul
                    | BinaryOp::And
                    | BinaryOp::Or
                    | BinaryOp::Xor),
                    x,
                    y,
                ) => Key::Bin(op, n(x), n(y)),
                Op::Brif(..) => {
                    has_branch = true;
                    continue;
                }
                _ => continue,
            };
            let Some(&r) = func.insts[i].results.first() else { continue };
            let rep = *first.entry(key).or_insert(r);
            number.insert(r, rep);
        }
    }
    if !has_branch {
        return false;
    }
    let mut preds: FxHashMap<Block, u32> = FxHashMap::default();
    for &b in &rpo {
        let mut k = 0;
        while let Some(s) = successor(func, b, k) {
            k += 1;
            *preds.entry(s).or_default() += 1;
        }
    }
    // The facts each guarded block starts with: a value number and its truth.
    let mut entry: FxHashMap<Block, Vec<(Value, bool)>> = FxHashMap::default();
    for &b in &rpo {
        let Some(Op::Brif(c, t, e)) = func.terminator(b) else { continue };
        if t.block == e.block {
            continue;
        }
        for (target, truth) in [(t.block, true), (e.block, false)] {
            if preds.get(&target) != Some(&1) {
                continue;
            }
            let c = num(&number, *c);
            let mut facts = vec![(c, truth)];
            if let Some(Key::Not(x)) = key_of(func, &number, c) {
                facts.push((x, !truth));
            }
            entry.insert(target, facts);
        }
    }
    if entry.is_empty() {
        return false;
    }
    let doms = Dominators::compute(func);
    // What a dominating fact says of value number `v` in `block`.
    let known = |block: Block, v: Value| -> Option<bool> {
        let mut b = block;
        loop {
            if let Some(facts) = entry.get(&b) {
                if let Some(&(_, t)) = facts.iter().find(|(x, _)| *x == v) {
                    return Some(t);
                }
            }
            match doms.idom(b) {
                Some(d) if d != b => b = d,
                _ => return None,
            }
        }
    };
    let mut decided: Vec<(crate::ir::Inst, bool)> = Vec::new();
    for &b in &rpo {
        if b == rpo[0] {
            continue;
        }
        for &i in &func.blocks[b].insts {
            let Some(&r) = func.insts[i].results.first() else { continue };
            let answer = match func.insts[i].op {
                Op::Icmp(c, x, y) => {
                    let (x, y) = (num(&number, x), num(&number, y));
                    // The comparison itself, or one computing its negation or its mirror image.
                    let same = known(b, num(&number, r));
                    let other = |k: Key, flip: bool| first.get(&k).and_then(|&v| known(b, v)).map(|t| t != flip);
                    same.or_else(|| other(Key::Icmp(negate(c), x, y), true))
                        .or_else(|| other(Key::Icmp(mirror(c), y, x), false))
                        .or_else(|| other(Key::Icmp(negate(mirror(c)), y, x), true))
                }
                Op::Unary(UnaryOp::Not, x) => known(b, num(&number, x)).map(|t| !t),
                _ => None,
            };
            if let Some(t) = answer {
                decided.push((i, t));
            }
        }
    }
    for &(i, t) in &decided {
        func.insts[i].op = Op::Bconst(t);
    }
    !decided.is_empty()
}

/// The key value number `v` was made from, if a pure operation numbered here.
fn key_of(func: &Function, number: &FxHashMap<Value, Value>, v: Value) -> Option<Key> {
    let ValueDef::Result(i, 0) = func.values[v].def else { return None };
    let n = |v| number.get(&v).copied().unwrap_or(v);
    match func.insts[i].op {
        Op::Unary(UnaryOp::Not, x) => Some(Key::Not(n(x))),
        _ => None,
    }
}

/// `!(x c y)` as `x c' y`.
fn negate(c: Cmp) -> Cmp {
    match c {
        Cmp::Eq => Cmp::Ne,
        Cmp::Ne => Cmp::Eq,
        Cmp::Lt => Cmp::Ge,
        Cmp::Ge => Cmp::Lt,
        Cmp::Le => Cmp::Gt,
        Cmp::Gt => Cmp::Le,
    }
}

/// `x c y` as `y c' x`.
fn mirror(c: Cmp) -> Cmp {
    match c {
        Cmp::Eq => Cmp::Eq,
        Cmp::Ne => Cmp::Ne,
        Cmp::Lt => Cmp::Gt,
        Cmp::Gt => Cmp::Lt,
        Cmp::Le => Cmp::Ge,
        Cmp::Ge => Cmp::Le,
    }
}

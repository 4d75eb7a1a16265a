//! Redundancy elimination inside each block, in program order (local value numbering):
//!
//! - an operation without effects (arithmetic, comparisons, `select`, `elemaddr`, constants, a
//!   call of a support function without effects such as `exp`: `simplify::PURE_SUPPORT`)
//!   already computed from the same operands in the block is replaced by the earlier result — an
//!   operation that can fail (`sdiv` by zero) failed at the earlier one if at all;
//! - `arraylen` of the same array, until a call (support functions move memory: compaction);
//! - a `boundscheck` of an index against a length already checked in the block goes (the earlier
//!   check fails first, at its own site, whenever the later one would);
//! - a load from `p + off` reads the value last stored to or loaded from that slot in the block,
//!   when no store to any other address (which may alias it) and no call came between;
//! - a store to `p + off` that a later store of the same type to the same slot overwrites, with
//!   no load and no call between, is dead. A trap between them ends the whole compiled call and
//!   nothing reads the arena after it, so the first store is unobservable either way.
//!
//! Compiled reverse mode is where this pays: each array read `x.[i]` in a loop body is its own
//! bounds check and load, and the reverse phase adds each partial into the adjoint `d.[i]` by a
//! separate load-add-store (`accAdd'`). Nothing is moved across blocks, so nothing needs
//! dominance beyond the block's own order.

use rustc_hash::{FxHashMap, FxHashSet};

use super::inline::map_operands;
use super::simplify::ModuleFacts;
use crate::ir::{BinaryOp, Cmp, ExtFuncId, Function, Inst, Op, TagId, Type, UnaryOp, Value};

/// An operation without effects, by its operands.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Iconst(i64),
    Fconst(u64),
    Bconst(bool),
    Null,
    Tag(TagId),
    Unary(UnaryOp, Value),
    Binary(BinaryOp, Value, Value),
    Icmp(Cmp, Value, Value),
    Fcmp(Cmp, Value, Value),
    Select(Value, Value, Value),
    ElemAddr(Value, Value, u32),
    Ext1(ExtFuncId, Value),
    Ext2(ExtFuncId, Value, Value),
}

fn key(op: &Op, facts: &ModuleFacts) -> Option<Key> {
    Some(match *op {
        Op::Iconst(n) => Key::Iconst(n),
        Op::Fconst(b) => Key::Fconst(b),
        Op::Bconst(b) => Key::Bconst(b),
        Op::Null => Key::Null,
        Op::TagConst(t) => Key::Tag(t),
        Op::Unary(u, a) => Key::Unary(u, a),
        Op::Binary(b, x, y) => Key::Binary(b, x, y),
        Op::Icmp(c, x, y) => Key::Icmp(c, x, y),
        Op::Fcmp(c, x, y) => Key::Fcmp(c, x, y),
        Op::Select(c, x, y) => Key::Select(c, x, y),
        Op::ElemAddr(a, i, s) => Key::ElemAddr(a, i, s),
        Op::CallExt(e, ref args) if facts.pure_extern(e) => match args[..] {
            [a] => Key::Ext1(e, a),
            [a, b] => Key::Ext2(e, a, b),
            _ => return None,
        },
        _ => return None,
    })
}

/// Rewrites `func` as the module comment says (every use of a redundant result reads the earlier
/// one; redundant instructions and dead stores leave the layout); true if anything changed.
pub(super) fn eliminate(func: &mut Function, facts: &ModuleFacts) -> bool {
    let mut subst: FxHashMap<Value, Value> = FxHashMap::default();
    let mut dead: FxHashSet<Inst> = FxHashSet::default();
    let resolve = |subst: &FxHashMap<Value, Value>, mut v: Value| {
        while let Some(&w) = subst.get(&v) {
            v = w;
        }
        v
    };
    for b in func.layout.clone() {
        let mut pure: FxHashMap<Key, Value> = FxHashMap::default();
        let mut lens: FxHashMap<Value, Value> = FxHashMap::default();
        let mut checked: FxHashSet<(Value, Value)> = FxHashSet::default();
        // What each slot holds, as far as this block knows.
        let mut slots: FxHashMap<(Value, i32), (Type, Value)> = FxHashMap::default();
        // Stores no load or call has read since.
        let mut unread: FxHashMap<(Value, i32), (Type, Inst)> = FxHashMap::default();
        for i in func.blocks[b].insts.clone() {
            let op = map_operands(&func.insts[i].op, &|v| resolve(&subst, v));
            func.insts[i].op = op.clone();
            let result = func.insts[i].results.first().copied();
            match (&op, result) {
                (Op::ArrayLen(a), Some(r)) => match lens.get(a) {
                    Some(&w) => {
                        subst.insert(r, w);
                        dead.insert(i);
                    }
                    None => {
                        lens.insert(*a, r);
                    }
                },
                (Op::BoundsCheck(ix, n, _), _) => {
                    if !checked.insert((*ix, *n)) {
                        dead.insert(i);
                    }
                }
                (Op::Load(t, p, off), Some(r)) => match slots.get(&(*p, *off)) {
                    Some(&(t2, w)) if t2 == *t => {
                        subst.insert(r, w);
                        dead.insert(i);
                    }
                    _ => {
                        // It may read any store not yet read.
                        unread.clear();
                        slots.insert((*p, *off), (*t, r));
                    }
                },
                (Op::Store(v, p, off), _) => {
                    let t = func.values[*v].ty;
                    if let Some(&(t2, prev)) = unread.get(&(*p, *off)) {
                        if t2 == t {
                            dead.insert(prev);
                        }
                    }
                    // Any other slot may be this one under another name.
                    slots.clear();
                    slots.insert((*p, *off), (t, *v));
                    unread.insert((*p, *off), (t, i));
                }
                // A call without effects touches no memory: only its result is numbered.
                (Op::CallExt(e, _), Some(r)) if facts.pure_extern(*e) => {
                    if let Some(k) = key(&op, facts) {
                        match pure.get(&k) {
                            Some(&w) => {
                                subst.insert(r, w);
                                dead.insert(i);
                            }
                            None => {
                                pure.insert(k, r);
                            }
                        }
                    }
                }
                (Op::Call(..) | Op::CallExt(..), _) => {
                    slots.clear();
                    unread.clear();
                    lens.clear();
                }
                (op, Some(r)) => {
                    if let Some(k) = key(op, facts) {
                        match pure.get(&k) {
                            Some(&w) => {
                                subst.insert(r, w);
                                dead.insert(i);
                            }
                            None => {
                                pure.insert(k, r);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
    if subst.is_empty() && dead.is_empty() {
        return false;
    }
    for b in func.layout.clone() {
        let insts = std::mem::take(&mut func.blocks[b].insts);
        let kept: Vec<Inst> = insts.into_iter().filter(|i| !dead.contains(i)).collect();
        for &i in &kept {
            func.insts[i].op = map_operands(&func.insts[i].op, &|v| resolve(&subst, v));
        }
        func.blocks[b].insts = kept;
    }
    true
}

//! Bounds-check elimination: a `boundscheck i, n` goes when the branches that lead to it prove
//! `0 <= i < n` — the loops lowering makes for `build`, `map`, `zipWith`, `fold`, `sum`… count an
//! index from 0 while it is below a length, and a body that reads `x.[i]` where the loop runs to
//! `len x` checks exactly what the loop's own test has established.
//!
//! What counts as proof (all on SSA values, which never change):
//! - **upper bound**: a dominating branch on `icmp lt i, b` (or `gt b, i`) whose true target is
//!   dominated (the target has that branch's block as its only predecessor), or on `ge`/`le`
//!   whose false target is; then `i < b` in every block the target dominates. `i < n` holds when
//!   some such `b` is `n` — the same value, or `arraylen` of the same array (an array's length
//!   never changes) — or is itself below `n` by such a fact (`c < r` and `r < d` in a triangle).
//! - **descending**: `(n - 1) - j` (a reverse loop's index) is in bounds when `0 <= j < n` is.
//! - **lower bound**: `i >= 0` when `i` is a non-negative constant, an `arraylen`, or a block
//!   parameter every incoming value of which is non-negative or `i + 1` computed where `i` is
//!   below something (so the increment cannot overflow) — an index counted up from 0.
//!
//! An index the branches do not bound keeps its check, so an out-of-bounds read still traps to
//! the same error at the same site. Removing a check that cannot fail changes nothing else.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::ir::cfg::{successor, Dominators};
use crate::ir::{BinaryOp, Block, Cmp, Function, Inst, Op, Value, ValueDef};

/// How many facts deep an upper bound may chain (`i < a < b < n`).
const MAX_CHAIN: usize = 4;

/// Removes the bounds checks of `func` that cannot fail; true if any went.
pub(super) fn eliminate(func: &mut Function) -> bool {
    let doms = Dominators::compute(func);
    let mut preds: FxHashMap<Block, Vec<Block>> = FxHashMap::default();
    for &b in &func.layout {
        let mut k = 0;
        while let Some(s) = successor(func, b, k) {
            k += 1;
            preds.entry(s).or_default().push(b);
        }
    }
    // The fact each guarded block starts with: `(a, b)` for `a < b`.
    let mut entry_fact: FxHashMap<Block, (Value, Value)> = FxHashMap::default();
    for &b in &func.layout {
        if let Some(Op::Brif(c, t, e)) = func.terminator(b) {
            if t.block == e.block {
                continue;
            }
            let only_from_b = |x: Block| preds.get(&x).is_some_and(|p| p.len() == 1 && p[0] == b);
            if let Some((cmp, x, y)) = icmp_of(func, *c) {
                // On the true edge `x cmp y` holds; on the false edge its negation.
                let on_true = match cmp {
                    Cmp::Lt => Some((x, y)),
                    Cmp::Gt => Some((y, x)),
                    _ => None,
                };
                let on_false = match cmp {
                    Cmp::Ge => Some((x, y)),
                    Cmp::Le => Some((y, x)),
                    _ => None,
                };
                if let Some(f) = on_true.filter(|_| only_from_b(t.block)) {
                    entry_fact.insert(t.block, f);
                }
                if let Some(f) = on_false.filter(|_| only_from_b(e.block)) {
                    entry_fact.insert(e.block, f);
                }
            }
        }
    }
    let mut ctx = Proof { func, doms: &doms, entry_fact: &entry_fact, nonneg: FxHashMap::default() };
    let mut dead: FxHashSet<Inst> = FxHashSet::default();
    for &b in &func.layout {
        if !doms.is_reachable(b) {
            continue;
        }
        for &i in &func.blocks[b].insts {
            if let Op::BoundsCheck(idx, len, _) = func.insts[i].op {
                if ctx.below(b, idx, len) && ctx.non_negative(idx, &mut FxHashSet::default()) {
                    dead.insert(i);
                } else if let Some(j) = ctx.descending(idx, len) {
                    // `n - 1 - j` with `0 <= j < n` is in `[0, n - 1]` (and computing it cannot
                    // overflow: `n >= 1`).
                    if ctx.below(b, j, len) && ctx.non_negative(j, &mut FxHashSet::default()) {
                        dead.insert(i);
                    }
                }
            }
        }
    }
    if dead.is_empty() {
        return false;
    }
    for b in func.layout.clone() {
        func.blocks[b].insts.retain(|i| !dead.contains(i));
    }
    true
}

/// The comparison `v` is, if it is an `icmp`.
fn icmp_of(func: &Function, v: Value) -> Option<(Cmp, Value, Value)> {
    match func.values[v].def {
        ValueDef::Result(i, 0) => match func.insts[i].op {
            Op::Icmp(c, x, y) => Some((c, x, y)),
            _ => None,
        },
        _ => None,
    }
}

struct Proof<'a> {
    func: &'a Function,
    doms: &'a Dominators,
    entry_fact: &'a FxHashMap<Block, (Value, Value)>,
    /// Block parameters already found non-negative or not.
    nonneg: FxHashMap<Value, bool>,
}

impl Proof<'_> {
    /// The operation defining `v`, if an instruction result.
    fn op(&self, v: Value) -> Option<&Op> {
        match self.func.values[v].def {
            ValueDef::Result(i, _) => Some(&self.func.insts[i].op),
            _ => None,
        }
    }

    /// Are `a` and `b` the same number: the same value, or the lengths of the same array?
    fn same(&self, a: Value, b: Value) -> bool {
        a == b || matches!((self.op(a), self.op(b)), (Some(Op::ArrayLen(x)), Some(Op::ArrayLen(y))) if x == y)
    }

    /// The facts `a < b` that hold on entry to `block`: those of the guarded blocks dominating it.
    fn facts(&self, mut block: Block) -> Vec<(Value, Value)> {
        let mut out = Vec::new();
        loop {
            if let Some(&f) = self.entry_fact.get(&block) {
                out.push(f);
            }
            match self.doms.idom(block) {
                Some(d) if d != block => block = d,
                _ => return out,
            }
        }
    }

    /// `Some(j)` when `i` is `(n - 1) - j`: `n - 1` the length less one (`isub m, 1` with `m` the
    /// same number as `n`), or the constant one below a constant `n` — the index of a loop that
    /// walks an array backwards, as every reverse phase does.
    fn descending(&self, i: Value, n: Value) -> Option<Value> {
        let Some(Op::Binary(BinaryOp::Isub, k, j)) = self.op(i) else { return None };
        let last = match (self.op(*k), self.op(n)) {
            (Some(Op::Binary(BinaryOp::Isub, m, one)), _) => {
                matches!(self.op(*one), Some(Op::Iconst(1))) && self.same(*m, n)
            }
            (Some(Op::Iconst(c)), Some(Op::Iconst(len))) => c.checked_add(1) == Some(*len),
            _ => false,
        };
        last.then_some(*j)
    }

    /// Is `i < n` (signed) known in `block`? Follows chains of facts `i < a < … < n` up to
    /// `MAX_CHAIN` long.
    fn below(&self, block: Block, i: Value, n: Value) -> bool {
        let facts = self.facts(block);
        let mut above = vec![i];
        for _ in 0..MAX_CHAIN {
            let next: Vec<Value> = facts
                .iter()
                .filter(|(a, b)| above.iter().any(|&x| self.same(*a, x)) && !above.contains(b))
                .map(|&(_, b)| b)
                .collect();
            if next.iter().any(|&b| self.same(b, n)) {
                return true;
            }
            if next.is_empty() {
                return false;
            }
            above.extend(next);
        }
        false
    }

    /// Is `v >= 0` whenever it is computed? (`visiting`: block parameters being proved, assumed
    /// non-negative meanwhile — an induction over the loop's iterations.)
    fn non_negative(&mut self, v: Value, visiting: &mut FxHashSet<Value>) -> bool {
        match self.func.values[v].def {
            ValueDef::Result(i, 0) => match self.func.insts[i].op {
                Op::Iconst(c) => c >= 0,
                Op::ArrayLen(_) => true,
                _ => false,
            },
            ValueDef::Param(block, k) => {
                if let Some(&known) = self.nonneg.get(&v) {
                    return known;
                }
                if !visiting.insert(v) {
                    return true;
                }
                let ok = self.incoming(block, k as usize).is_some_and(|args| {
                    args.into_iter()
                        .all(|(from, a)| self.non_negative(a, visiting) || self.increment_of(from, a, visiting))
                });
                visiting.remove(&v);
                // Only a definite answer is remembered (one made under an assumption may not be).
                if visiting.is_empty() || !ok {
                    self.nonneg.insert(v, ok);
                }
                ok
            }
            _ => false,
        }
    }

    /// Is `a`, passed from block `from`, `p + 1` for a non-negative `p` that is below something
    /// there (so the addition does not overflow)?
    fn increment_of(&mut self, from: Block, a: Value, visiting: &mut FxHashSet<Value>) -> bool {
        let Some(Op::Binary(BinaryOp::Iadd, x, y)) = self.op(a).cloned() else { return false };
        let one = |p: &Self, v: Value| matches!(p.op(v), Some(Op::Iconst(1)));
        let p = if one(self, y) {
            x
        } else if one(self, x) {
            y
        } else {
            return false;
        };
        // The addition is computed in a block dominating `from` (SSA), so the facts on entry to
        // `from` include those where it was computed only if they dominate it; ask at `from`.
        self.facts(from).iter().any(|&(lo, _)| self.same(lo, p)) && self.non_negative(p, visiting)
    }

    /// The values passed to parameter `k` of `block` by every branch to it, with the branching
    /// block; `None` when some predecessor cannot be read (the entry's parameters come from the
    /// caller).
    fn incoming(&self, block: Block, k: usize) -> Option<Vec<(Block, Value)>> {
        if self.func.layout.first() == Some(&block) {
            return None;
        }
        let mut out = Vec::new();
        for &b in &self.func.layout {
            if let Some(term) = self.func.terminator(b) {
                for bc in term.branch_targets() {
                    if bc.block == block {
                        out.push((b, *bc.args.get(k)?));
                    }
                }
            }
        }
        Some(out)
    }
}

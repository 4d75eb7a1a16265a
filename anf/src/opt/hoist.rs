//! Bounds checks against another array's length, hoisted out of counted loops: in a loop
//! `i = i0, i0 + 1, … while i < n` whose body starts by checking `i < m` (`v.[i]` where the loop
//! runs to `len u`, not `len v`), with `m` the length of an array made before the loop, the loop
//! runs while `i < min(n, m)` with no check, and on leaving it, when `i < n` still holds, the
//! checks run as the body would have run them — the first of them fails there, with the same
//! index, length and site as before. A check of `c + i` (`c` fixed while the loop runs: the
//! rank-1 update `W̄[j·n + k] += ā_j·x_k` of reverse mode's dense layers) bounds the loop by
//! `m − c` instead, when `c + i0 ≥ 0` (every `i0 ≤ i < m − c` passes it), else by `i0` (the first
//! iteration fails it); the way out computes `c + i` again for its check.
//!
//! Why this keeps every error identical: the checks hoisted are those at the start of the body's
//! first block (which every iteration runs), preceded only by instructions that cannot fail and
//! have no effect (arithmetic, comparisons, loads, lengths, addresses), and the counter starts at
//! a non-negative constant. An iteration `i < min(n, m_1, …)` passes every hoisted check, so
//! dropping them changes nothing there; the first iteration that would fail one is
//! `i = min(m_1, …) < n`, where the body runs nothing observable before its checks, and the exit
//! path runs the same checks in the same order on the same `i`: the first that fails is the one
//! that failed before (`0 <= i` holds for a counter from a non-negative start). When no check
//! fails (`i = n`) the loop leaves as it did.
//!
//! The length is read before the loop only where it is certainly an array's (a `newarray` of
//! this function, through the block parameters of loops that carry it, or a length read already
//! dominating the loop), so no header is read that the loop would not have read.

use rustc_hash::{FxHashMap, FxHashSet};

use super::simplify::quiet;
use super::strength::{
    arg_to, def_op, dominating_length, insert_before_end, invariant, is_increment_of, loop_edges, made_array,
    materialise, natural_loop,
};
use crate::ir::cfg::{successors, Dominators};
use crate::ir::{BinaryOp, Block, BlockCall, Cmp, Function, InstData, Op, TrapCode, Type, Value, ValueData, ValueDef};

/// Hoists the checks of `func`'s counted loops; true if any loop changed.
pub(super) fn hoist(func: &mut Function) -> bool {
    let doms = Dominators::compute(func);
    let mut preds: FxHashMap<Block, Vec<Block>> = FxHashMap::default();
    for &b in &func.layout {
        for s in successors(func, b) {
            preds.entry(s).or_default().push(b);
        }
    }
    let mut changed = false;
    for h in func.layout.clone() {
        if !doms.is_reachable(h) {
            continue;
        }
        if let Some(plan) = plan(func, &doms, &preds, h) {
            apply(func, h, plan);
            changed = true;
        }
    }
    changed
}

/// What to do with one loop.
struct Plan {
    pre: Block,
    counter: Value,
    /// The counter's first value (a non-negative constant).
    start: Value,
    bound: Value,
    body: Block,
    /// The loop's blocks.
    blocks: FxHashSet<Block>,
    /// The checks, in order: instruction index in `body`, length (`Err(array)` when the length
    /// is to be read before the loop), site (an `iconst`'s value or a value from before the loop),
    /// and the index's offset `c` when it is `c + i` (`c` fixed while the loop runs).
    checks: Vec<(usize, Result<Value, Value>, Result<i64, Value>, Option<Value>)>,
}

/// The checks of the loop headed by `h` that can be hoisted, if any.
fn plan(func: &Function, doms: &Dominators, preds: &FxHashMap<Block, Vec<Block>>, h: Block) -> Option<Plan> {
    let (latch, pre) = loop_edges(func, doms, preds, h)?;
    // The header: pure instructions, then `brif (icmp lt i, n), body, exit`.
    let insts = &func.blocks[h].insts;
    let (&last, rest) = insts.split_last()?;
    let Op::Brif(c, t, e) = &func.insts[last].op else { return None };
    if t.block == e.block || t.block == h || !rest.iter().all(|&i| quiet(&func.insts[i].op)) {
        return None;
    }
    let ValueDef::Result(ci, 0) = func.values[*c].def else { return None };
    let Op::Icmp(Cmp::Lt, counter, bound) = func.insts[ci].op else { return None };
    let body = t.block;
    if !t.args.is_empty() || preds.get(&body).is_none_or(|p| p.len() != 1) {
        return None;
    }
    // The counter: a header parameter from a non-negative constant, plus one on the back edge.
    let ValueDef::Param(pb, k) = func.values[counter].def else { return None };
    if pb != h {
        return None;
    }
    let i0 = arg_to(func, pre, h, k as usize)?;
    let next = arg_to(func, latch, h, k as usize)?;
    if !matches!(def_op(func, i0), Some(Op::Iconst(c)) if *c >= 0) || !is_increment_of(func, next, counter) {
        return None;
    }
    let body_set = natural_loop(preds, h, latch);
    let outside = |v: Value| match func.values[v].def {
        ValueDef::Param(b, _) => !body_set.contains(&b),
        ValueDef::Result(inst, _) => !body_set.iter().any(|&b| func.blocks[b].insts.contains(&inst)),
        ValueDef::Unused => false,
    };
    if !body_set.contains(&body) || !outside(bound) {
        return None;
    }
    let mut checks = Vec::new();
    for (n, &inst) in func.blocks[body].insts.iter().enumerate() {
        let op = &func.insts[inst].op;
        if let Op::BoundsCheck(idx, len, site) = *op {
            let offset = if idx == counter {
                None
            } else {
                match def_op(func, idx) {
                    Some(Op::Binary(BinaryOp::Iadd, a, b)) if *b == counter && invariant(func, &outside, *a, 3) => {
                        Some(*a)
                    }
                    Some(Op::Binary(BinaryOp::Iadd, a, b)) if *a == counter && invariant(func, &outside, *b, 3) => {
                        Some(*b)
                    }
                    _ => break,
                }
            };
            let len = if outside(len) {
                Ok(len)
            } else {
                let Some(Op::ArrayLen(a)) = def_op(func, len) else { break };
                let a = *a;
                if !outside(a) {
                    break;
                }
                match dominating_length(func, doms, h, a) {
                    Some(l) => Ok(l),
                    None if made_array(func, preds, a, &mut FxHashSet::default()) => Err(a),
                    None => break,
                }
            };
            let site = if outside(site) {
                Err(site)
            } else if let Some(Op::Iconst(s)) = def_op(func, site) {
                Ok(*s)
            } else {
                break;
            };
            checks.push((n, len, site, offset));
        } else if !quiet(op) {
            break;
        }
    }
    (!checks.is_empty()).then_some(Plan { pre, counter, start: i0, bound, body, blocks: body_set, checks })
}

/// Rewrites the loop headed by `h` as `plan` says.
fn apply(func: &mut Function, h: Block, plan: Plan) {
    let Plan { pre, counter, start, bound, body, blocks, checks } = plan;
    // Before the loop: the lengths, and `min(n, m_1, …)` — for `c + i`, `m − c` when `c + i0 ≥ 0`
    // (then `c + i` passes for `i0 ≤ i < m − c`, and `m ≥ 0` keeps `m − c` from overflowing),
    // else `i0` (the first iteration fails).
    let mut lens = Vec::new();
    let mut offsets = Vec::new();
    let mut limit = bound;
    for (_, len, _, offset) in &checks {
        let m = match *len {
            Ok(m) => m,
            Err(a) => insert_before_end(func, pre, Op::ArrayLen(a), Type::I64),
        };
        let c = offset.map(|c| materialise(func, &blocks, pre, c));
        let last = match c {
            None => m,
            Some(c) => {
                let first = insert_before_end(func, pre, Op::Binary(BinaryOp::Iadd, c, start), Type::I64);
                let zero = insert_before_end(func, pre, Op::Iconst(0), Type::I64);
                let ok = insert_before_end(func, pre, Op::Icmp(Cmp::Ge, first, zero), Type::Bool);
                let room = insert_before_end(func, pre, Op::Binary(BinaryOp::Isub, m, c), Type::I64);
                insert_before_end(func, pre, Op::Select(ok, room, start), Type::I64)
            }
        };
        let less = insert_before_end(func, pre, Op::Icmp(Cmp::Lt, last, limit), Type::Bool);
        limit = insert_before_end(func, pre, Op::Select(less, last, limit), Type::I64);
        lens.push(m);
        offsets.push(c);
    }
    // The header runs to the limit; past it, while `i < n`, the checks fail as they did.
    let last = *func.blocks[h].insts.last().expect("a terminator");
    let Op::Brif(_, t, e) = func.insts[last].op.clone() else { unreachable!("planned on a brif") };
    let test = func.insts.push(InstData { op: Op::Icmp(Cmp::Lt, counter, limit), results: Vec::new() });
    let c = func.values.push(ValueData { ty: Type::Bool, def: ValueDef::Result(test, 0) });
    func.insts[test].results.push(c);
    let at = func.blocks[h].insts.len() - 1;
    func.blocks[h].insts.insert(at, test);
    let past = func.create_block();
    let fail = func.create_block();
    func.insts[last].op = Op::Brif(c, t, BlockCall::new(past, Vec::new()));
    let more = func.append_inst(past, Op::Icmp(Cmp::Lt, counter, bound), &[Type::Bool]);
    let more = func.insts[more].results[0];
    func.append_inst(past, Op::Brif(more, BlockCall::new(fail, Vec::new()), e), &[]);
    let mut moved = Vec::new();
    for (((n, _, site, _), m), c) in checks.iter().zip(&lens).zip(&offsets) {
        let site = match *site {
            Ok(s) => {
                let i = func.append_inst(fail, Op::Iconst(s), &[Type::I64]);
                func.insts[i].results[0]
            }
            Err(v) => v,
        };
        let idx = match *c {
            None => counter,
            Some(c) => {
                let i = func.append_inst(fail, Op::Binary(BinaryOp::Iadd, c, counter), &[Type::I64]);
                func.insts[i].results[0]
            }
        };
        func.append_inst(fail, Op::BoundsCheck(idx, *m, site), &[]);
        moved.push(func.blocks[body].insts[*n]);
    }
    // Not reached: `min(n, m_1, …) <= i < n` makes `i` equal some `m_k`, which fails its check.
    let zero = func.append_inst(fail, Op::Iconst(0), &[Type::I64]);
    let zero = func.insts[zero].results[0];
    let no_site = func.append_inst(fail, Op::Iconst(crate::ir::NO_SITE), &[Type::I64]);
    let no_site = func.insts[no_site].results[0];
    func.append_inst(fail, Op::Trap(TrapCode::Unreachable, no_site, zero, zero), &[]);
    func.blocks[body].insts.retain(|i| !moved.contains(i));
}

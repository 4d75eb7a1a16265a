//! Strength reduction of element addresses in loops: `elemaddr a, i, 8` (or `elemaddr a, c + i, 8`)
//! in a loop that counts `i` up by one, with `a` and `c` defined before the loop, becomes a pointer
//! the loop carries — a new parameter of the loop's header, the element's address at the first
//! iteration on entry and 8 bytes further on the back edge.
//!
//! Why: Cranelift's register allocator keeps the arrays a loop nest reads in stack slots when the
//! outer loops hold many values, and then reloads an array's pointer inside the inner loop and
//! stores it back to its slot on the back edge — a store and a load per element on the loop's
//! critical path (the MLP's multiply-add loops, forwards and in reverse). A pointer that changes
//! at every iteration lives in a register, and the array's own pointer is no longer used in the
//! loop at all.
//!
//! A loop also reads the length of an array made before it once, before it (the bounds checks of
//! `x.[c + i]` compare with it at every element): where an earlier read dominates the loop, that
//! one; else a new read before the loop, when the array is certainly one this function made.
//!
//! Only loops with no calls other than the pure support functions (`simplify::PURE_SUPPORT`) are
//! rewritten: a compaction, which may move arrays, happens only at a call, so a pointer into an
//! array stays valid while the loop runs. Nothing is read or written that was not before: the
//! bounds checks stay on the integer index and guard every access as they did (the carried
//! pointer is only arithmetic, and is not dereferenced on the iteration that leaves the loop).

use rustc_hash::{FxHashMap, FxHashSet};

use super::simplify::PURE_SUPPORT;
use crate::ir::cfg::{successors, Dominators};
use crate::ir::{BinaryOp, Block, Function, InstData, Module, Op, Type, Value, ValueData, ValueDef, ARRAY_HEADER};

/// The element size the carried pointer steps by: with `ARRAY_HEADER` the same, `elemaddr q, 0, 8`
/// is `q + 8`, the next element's address.
const STRIDE: u32 = 8;

/// Rewrites the element addresses of `func`'s counted loops; true if any changed.
pub(super) fn reduce(module: &mut Module, func: &mut Function) -> bool {
    if ARRAY_HEADER != STRIDE {
        return false;
    }
    let doms = Dominators::compute(func);
    let mut preds: FxHashMap<Block, Vec<Block>> = FxHashMap::default();
    for &b in &func.layout {
        for s in successors(func, b) {
            preds.entry(s).or_default().push(b);
        }
    }
    let mut alias: FxHashMap<Value, Value> = FxHashMap::default();
    // `(before, array, result)`: a length read to move before the end of block `before`.
    let mut lengths: Vec<(Block, Value, Value)> = Vec::new();
    for h in func.layout.clone() {
        if !doms.is_reachable(h) {
            continue;
        }
        let Some((latch, pre)) = loop_edges(func, &doms, &preds, h) else { continue };
        let body = natural_loop(&preds, h, latch);
        if !body.iter().all(|&b| calls_nothing_but_pure(module, func, b)) {
            continue;
        }
        let params = func.blocks[h].params.clone();
        // The induction variables: parameters incremented by one on the back edge.
        let mut counters: Vec<(Value, Value)> = Vec::new();
        for (n, &i) in params.iter().enumerate() {
            let (Some(i0), Some(next)) = (arg_to(func, pre, h, n), arg_to(func, latch, h, n)) else { continue };
            if is_increment_of(func, next, i) {
                counters.push((i, i0));
            }
        }
        if counters.is_empty() {
            continue;
        }
        let outside = |v: Value| match func.values[v].def {
            ValueDef::Param(b, _) => !body.contains(&b),
            ValueDef::Result(inst, _) => !body.iter().any(|&b| func.blocks[b].insts.contains(&inst)),
            ValueDef::Unused => false,
        };
        // The lengths of arrays made before the loop, read once before it: an earlier read where
        // one dominates the loop, else a new one, where the array is certainly one (a length is
        // never read from a pointer that is not an array's).
        for &b in &func.layout {
            if !body.contains(&b) {
                continue;
            }
            for &inst in &func.blocks[b].insts {
                let Op::ArrayLen(a) = func.insts[inst].op else { continue };
                if !outside(a) {
                    continue;
                }
                let r = func.insts[inst].results[0];
                if let Some(earlier) = dominating_length(func, &doms, h, a) {
                    alias.insert(r, earlier);
                } else if made_array(func, &preds, a, &mut FxHashSet::default()) {
                    lengths.push((pre, a, r));
                }
            }
        }
        // Element addresses `(array, offset, counter)` and the instructions computing them.
        let mut groups: Vec<((Value, Option<Value>, Value), Vec<Value>)> = Vec::new();
        for &b in &func.layout {
            if !body.contains(&b) {
                continue;
            }
            for &inst in &func.blocks[b].insts {
                let Op::ElemAddr(a, idx, STRIDE) = func.insts[inst].op else { continue };
                if !outside(a) {
                    continue;
                }
                let key = counters.iter().find_map(|&(i, _)| {
                    if idx == i {
                        return Some((a, None, i));
                    }
                    match def_op(func, idx) {
                        Some(Op::Binary(BinaryOp::Iadd, x, y)) if *y == i && invariant(func, &outside, *x, 3) => {
                            Some((a, Some(*x), i))
                        }
                        Some(Op::Binary(BinaryOp::Iadd, x, y)) if *x == i && invariant(func, &outside, *y, 3) => {
                            Some((a, Some(*y), i))
                        }
                        _ => None,
                    }
                });
                let Some(key) = key else { continue };
                let r = func.insts[inst].results[0];
                match groups.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, rs)) => rs.push(r),
                    None => groups.push((key, vec![r])),
                }
            }
        }
        for ((a, offset, i), results) in groups {
            let i0 = counters.iter().find(|(c, _)| *c == i).map(|(_, i0)| *i0).expect("a counter");
            // On entry: the address of element `offset + i0`.
            let first = match offset {
                Some(c) => {
                    let c = materialise(func, &body, pre, c);
                    insert_before_end(func, pre, Op::Binary(BinaryOp::Iadd, c, i0), Type::I64)
                }
                None => i0,
            };
            let start = insert_before_end(func, pre, Op::ElemAddr(a, first, STRIDE), Type::Ptr);
            let q = func.append_block_param(h, Type::Ptr);
            // On the back edge: 8 bytes on (the header is 8 bytes, so element 0 of `q` is `q + 8`).
            let zero = insert_before_end(func, latch, Op::Iconst(0), Type::I64);
            let next = insert_before_end(func, latch, Op::ElemAddr(q, zero, STRIDE), Type::Ptr);
            push_arg(func, pre, h, start);
            push_arg(func, latch, h, next);
            for r in results {
                alias.insert(r, q);
            }
        }
    }
    for (pre, a, r) in lengths {
        let len = insert_before_end(func, pre, Op::ArrayLen(a), Type::I64);
        alias.insert(r, len);
    }
    if alias.is_empty() {
        return false;
    }
    let m = |v: Value| alias.get(&v).copied().unwrap_or(v);
    for b in func.layout.clone() {
        for inst in func.blocks[b].insts.clone() {
            let op = super::inline::map_operands(&func.insts[inst].op, &m);
            func.insts[inst].op = op;
        }
    }
    true
}

/// The operation defining `v`, if an instruction result.
pub(super) fn def_op(func: &Function, v: Value) -> Option<&Op> {
    match func.values[v].def {
        ValueDef::Result(i, _) => Some(&func.insts[i].op),
        _ => None,
    }
}

/// Is `v` computed from values defined outside the loop only, by integer arithmetic at most
/// `depth` operations deep?
pub(super) fn invariant(func: &Function, outside: &impl Fn(Value) -> bool, v: Value, depth: u32) -> bool {
    if outside(v) {
        return true;
    }
    match def_op(func, v) {
        Some(Op::Iconst(_)) => true,
        Some(Op::Binary(BinaryOp::Iadd | BinaryOp::Isub | BinaryOp::Imul, x, y)) if depth > 0 => {
            invariant(func, outside, *x, depth - 1) && invariant(func, outside, *y, depth - 1)
        }
        _ => false,
    }
}

/// `v` (an [`invariant`] value) available at the end of `pre`: itself if defined outside the
/// loop, else its arithmetic computed again there.
pub(super) fn materialise(func: &mut Function, body: &FxHashSet<Block>, pre: Block, v: Value) -> Value {
    let inside = match func.values[v].def {
        ValueDef::Result(inst, _) => body.iter().any(|&b| func.blocks[b].insts.contains(&inst)),
        _ => false,
    };
    if !inside {
        return v;
    }
    match def_op(func, v).cloned() {
        Some(Op::Binary(op, x, y)) => {
            let (x, y) = (materialise(func, body, pre, x), materialise(func, body, pre, y));
            insert_before_end(func, pre, Op::Binary(op, x, y), Type::I64)
        }
        Some(op) => insert_before_end(func, pre, op, Type::I64),
        None => v,
    }
}

/// The loop headed by `h`'s one back edge and one entry edge, `(latch, pre)`: a single block
/// with a single edge each (two edges of one `brif` to the header are not a counted loop's).
pub(super) fn loop_edges(
    func: &Function,
    doms: &Dominators,
    preds: &FxHashMap<Block, Vec<Block>>,
    h: Block,
) -> Option<(Block, Block)> {
    let ps = preds.get(&h)?;
    let (back, entry): (Vec<Block>, Vec<Block>) = ps.iter().partition(|&&p| doms.dominates(h, p));
    let ([latch], [pre]) = (back.as_slice(), entry.as_slice()) else { return None };
    let (latch, pre) = (*latch, *pre);
    if latch == pre || edges_to(func, pre, h) != 1 || edges_to(func, latch, h) != 1 {
        return None;
    }
    Some((latch, pre))
}

/// An `arraylen a` in a block strictly dominating the loop header `h` (its value is the length
/// read anywhere in the loop: lengths never change).
pub(super) fn dominating_length(func: &Function, doms: &Dominators, h: Block, a: Value) -> Option<Value> {
    let mut b = doms.idom(h)?;
    loop {
        for &inst in &func.blocks[b].insts {
            if func.insts[inst].op == Op::ArrayLen(a) {
                return Some(func.insts[inst].results[0]);
            }
        }
        match doms.idom(b) {
            Some(d) if d != b => b = d,
            _ => return None,
        }
    }
}

/// Is `a` always an array this function made (`newarray`), directly or through block parameters
/// (a loop's accumulator, copied by its compaction)? (`visiting`: parameters assumed so.)
pub(super) fn made_array(
    func: &Function,
    preds: &FxHashMap<Block, Vec<Block>>,
    a: Value,
    visiting: &mut FxHashSet<Value>,
) -> bool {
    match func.values[a].def {
        ValueDef::Result(inst, 0) => matches!(func.insts[inst].op, Op::NewArray(..)),
        ValueDef::Param(b, n) => {
            if func.entry() == Some(b) {
                return false;
            }
            if !visiting.insert(a) {
                return true;
            }
            let Some(ps) = preds.get(&b) else { return false };
            ps.iter().all(|&p| {
                func.terminator(p).is_some_and(|t| {
                    t.branch_targets()
                        .iter()
                        .filter(|bc| bc.block == b)
                        .all(|bc| bc.args.get(n as usize).is_some_and(|&x| made_array(func, preds, x, visiting)))
                })
            })
        }
        _ => false,
    }
}

/// Is `next` the value `i + 1`?
pub(super) fn is_increment_of(func: &Function, next: Value, i: Value) -> bool {
    let one = |v: Value| matches!(def_op(func, v), Some(Op::Iconst(1)));
    match def_op(func, next) {
        Some(Op::Binary(BinaryOp::Iadd, x, y)) => (*x == i && one(*y)) || (*y == i && one(*x)),
        _ => false,
    }
}

/// The blocks of the loop of header `h` with back edge from `latch`.
pub(super) fn natural_loop(preds: &FxHashMap<Block, Vec<Block>>, h: Block, latch: Block) -> FxHashSet<Block> {
    let mut body: FxHashSet<Block> = FxHashSet::default();
    body.insert(h);
    let mut work = vec![latch];
    while let Some(b) = work.pop() {
        if body.insert(b) {
            work.extend(preds.get(&b).map_or(&[][..], Vec::as_slice).iter().copied());
        }
    }
    body
}

/// Does block `b` call nothing but support functions without effects?
fn calls_nothing_but_pure(module: &Module, func: &Function, b: Block) -> bool {
    func.blocks[b].insts.iter().all(|&i| match &func.insts[i].op {
        Op::Call(..) => false,
        Op::CallExt(e, _) => PURE_SUPPORT.contains(&module.externs[*e].name.as_str()),
        _ => true,
    })
}

/// How many of `from`'s branch targets are `to`.
pub(super) fn edges_to(func: &Function, from: Block, to: Block) -> usize {
    func.terminator(from).map_or(0, |t| t.branch_targets().iter().filter(|bc| bc.block == to).count())
}

/// Argument `n` of `from`'s branch to `to`.
pub(super) fn arg_to(func: &Function, from: Block, to: Block, n: usize) -> Option<Value> {
    let t = func.terminator(from)?;
    t.branch_targets().into_iter().find(|bc| bc.block == to)?.args.get(n).copied()
}

/// Appends `v` to the arguments of `from`'s branch to `to`.
fn push_arg(func: &mut Function, from: Block, to: Block, v: Value) {
    let last = *func.blocks[from].insts.last().expect("a terminator");
    match &mut func.insts[last].op {
        Op::Jump(bc) => bc.args.push(v),
        Op::Brif(_, t, e) => {
            for bc in [t, e] {
                if bc.block == to {
                    bc.args.push(v);
                }
            }
        }
        Op::Switch(_, cases) => {
            for (_, bc) in cases.iter_mut().filter(|(_, bc)| bc.block == to) {
                bc.args.push(v);
            }
        }
        _ => {}
    }
}

/// A new instruction with one result of type `ty` right before `block`'s terminator.
pub(super) fn insert_before_end(func: &mut Function, block: Block, op: Op, ty: Type) -> Value {
    let inst = func.insts.push(InstData { op, results: Vec::new() });
    let v = func.values.push(ValueData { ty, def: ValueDef::Result(inst, 0) });
    func.insts[inst].results.push(v);
    let insts = &mut func.blocks[block].insts;
    let at = insts.len().saturating_sub(1);
    insts.insert(at, inst);
    v
}

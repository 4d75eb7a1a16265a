//! Fresh accumulators written instead of zero-filled and added to: an array of `f64` made by
//! `newarray n, 8` and filled with `+0.0` by a counted loop, whose first use after that fill is
//! a counted loop `j = 0, 1, … while j < n` that reads element `j`, adds to it and writes it back
//! (`a.[j] <- a.[j] + e`: reverse mode's `zeros'` then `accAdd'`/`accAxpy'` at the loop's own
//! index, the adjoint of `map`/`zipWith`/`build` and of a fresh scaled accumulator) is not
//! filled: that loop reads `+0.0` for the element instead of loading it.
//!
//! Why this computes the same: at iteration `j` the element `j` has not been written since the
//! fill (the loop reaches the array only through `a.[j]` with its own counter, and earlier
//! iterations wrote smaller indices), so the load read `+0.0`; the addition `+0.0 + e` stays (it
//! is not `e` when `e` is `-0.0`). Every element is written before anything else reads the
//! array: the fill's exit leads straight to the loop (blocks with one predecessor, branching
//! off only to traps, touching the array at most for its length), the loop writes element `j`
//! in a block every iteration runs, it leaves only through its header's test (`j = n`: every
//! element written) or a trap, and it has no inner loop (each element is written once).
//! Errors are the same: the fill cannot fail, and a trap inside the loop ends the call, so no
//! element left unwritten is ever read. Compaction copies the array's bytes whatever they hold.

use rustc_hash::{FxHashMap, FxHashSet};

use super::simplify::quiet;
use super::strength::{arg_to, def_op, is_increment_of, loop_edges, natural_loop};
use crate::ir::cfg::{successors, Dominators};
use crate::ir::{Block, BlockCall, Cmp, Function, Inst, Op, Type, Value, ValueDef};

/// Removes the zero fills of `func`'s fresh accumulators as above; true if any changed.
pub(super) fn first_writes(func: &mut Function) -> bool {
    let mut changed = false;
    // One array at a time: each rewrite changes the control flow the next one reads.
    while let Some(plan) = find(func) {
        let Plan { fill_header, fill_exit, load } = plan;
        let last = *func.blocks[fill_header].insts.last().expect("a terminator");
        func.insts[last].op = Op::Jump(BlockCall::new(fill_exit, Vec::new()));
        func.insts[load].op = Op::Fconst(0.0f64.to_bits());
        changed = true;
    }
    changed
}

/// One fill to skip and the load that reads `+0.0` instead.
struct Plan {
    fill_header: Block,
    fill_exit: Block,
    load: Inst,
}

/// A counted loop: header `h` of pure instructions ending in `brif (icmp lt j, bound), body,
/// exit`, one entry edge from `pre` passing `j = 0`, one back edge from `latch` passing `j + 1`.
struct Counted {
    pre: Block,
    latch: Block,
    counter: Value,
    bound: Value,
    exit: BlockCall,
    body: FxHashSet<Block>,
}

fn counted(func: &Function, doms: &Dominators, preds: &FxHashMap<Block, Vec<Block>>, h: Block) -> Option<Counted> {
    let (latch, pre) = loop_edges(func, doms, preds, h)?;
    let (&last, rest) = func.blocks[h].insts.split_last()?;
    let Op::Brif(c, t, e) = &func.insts[last].op else { return None };
    if t.block == e.block || t.block == h || !rest.iter().all(|&i| quiet(&func.insts[i].op)) {
        return None;
    }
    let Some(Op::Icmp(Cmp::Lt, counter, bound)) = def_op(func, *c) else { return None };
    let (counter, bound) = (*counter, *bound);
    let ValueDef::Param(pb, k) = func.values[counter].def else { return None };
    if pb != h {
        return None;
    }
    let i0 = arg_to(func, pre, h, k as usize)?;
    let next = arg_to(func, latch, h, k as usize)?;
    if !matches!(def_op(func, i0), Some(Op::Iconst(0))) || !is_increment_of(func, next, counter) {
        return None;
    }
    let body = natural_loop(preds, h, latch);
    if !body.contains(&t.block) || body.contains(&e.block) {
        return None;
    }
    Some(Counted { pre, latch, counter, bound, exit: e.clone(), body })
}

/// Does block `b` do nothing but end the call with a trap?
fn traps(func: &Function, b: Block) -> bool {
    let Some((&last, rest)) = func.blocks[b].insts.split_last() else { return false };
    matches!(func.insts[last].op, Op::Trap(..)) && rest.iter().all(|&i| quiet(&func.insts[i].op))
}

/// Does `op` use `a` other than for its length?
fn touches(op: &Op, a: Value) -> bool {
    if matches!(op, Op::ArrayLen(_)) {
        return false;
    }
    let mut hit = false;
    op.for_each_operand(|v| hit |= v == a);
    hit
}

/// The first fill that can be skipped, if any.
fn find(func: &Function) -> Option<Plan> {
    let doms = Dominators::compute(func);
    let mut preds: FxHashMap<Block, Vec<Block>> = FxHashMap::default();
    for &b in &func.layout {
        for s in successors(func, b) {
            preds.entry(s).or_default().push(b);
        }
    }
    let mut block_of: FxHashMap<Inst, Block> = FxHashMap::default();
    for &b in &func.layout {
        for &i in &func.blocks[b].insts {
            block_of.insert(i, b);
        }
    }
    // The uses of each value, as instructions.
    let mut uses: FxHashMap<Value, Vec<Inst>> = FxHashMap::default();
    for &b in &func.layout {
        for &i in &func.blocks[b].insts {
            func.insts[i].op.for_each_operand(|v| uses.entry(v).or_default().push(i));
        }
    }
    let no_uses = Vec::new();
    let uses_of = |v: Value| uses.get(&v).unwrap_or(&no_uses);
    for &hf in &func.layout {
        if !doms.is_reachable(hf) {
            continue;
        }
        let Some(fill) = counted(func, &doms, &preds, hf) else { continue };
        // The fill: header and one body block, `store +0.0, (elemaddr a, j, 8)+0` and pure
        // instructions, `a = newarray n, 8` with `n` the bound, made at the end of the block
        // that enters the fill (nothing else there uses it) and jumps nowhere else.
        if fill.body.len() != 2 || !fill.exit.args.is_empty() {
            continue;
        }
        let fb = fill.latch;
        let mut store = None;
        let mut ok = true;
        for &i in &func.blocks[fb].insts {
            match &func.insts[i].op {
                Op::Store(z, p, 0) if store.is_none() => store = Some((*z, *p)),
                Op::Jump(_) => {}
                op => ok &= quiet(op),
            }
        }
        let Some((z, p)) = store else { continue };
        if !ok || !matches!(def_op(func, z), Some(Op::Fconst(0))) {
            continue;
        }
        let Some(&Op::ElemAddr(a, j, 8)) = def_op(func, p) else { continue };
        if j != fill.counter || !matches!(def_op(func, a), Some(&Op::NewArray(n, 8)) if n == fill.bound) {
            continue;
        }
        let ValueDef::Result(made, _) = func.values[a].def else { continue };
        let ba = fill.pre;
        if block_of.get(&made) != Some(&ba) || !matches!(func.terminator(ba), Some(Op::Jump(_))) {
            continue;
        }
        let after_made = func.blocks[ba].insts.iter().skip_while(|&&i| i != made).skip(1);
        if after_made.into_iter().any(|&i| touches(&func.insts[i].op, a)) {
            continue;
        }
        // Straight from the fill's exit to the consumer loop's entry.
        let mut cur = fill.exit.block;
        if preds.get(&cur).map(Vec::as_slice) != Some(&[hf][..]) {
            continue;
        }
        let mut consumer = None;
        for _ in 0..16 {
            if func.blocks[cur].insts.iter().any(|&i| touches(&func.insts[i].op, a)) {
                break;
            }
            let clean = |b: Block| !func.blocks[b].insts.iter().any(|&i| touches(&func.insts[i].op, a));
            let next = match func.terminator(cur) {
                Some(Op::Jump(bc)) => bc.block,
                Some(Op::Brif(_, t, e)) if traps(func, t.block) && clean(t.block) && !traps(func, e.block) => e.block,
                Some(Op::Brif(_, t, e)) if traps(func, e.block) && clean(e.block) && !traps(func, t.block) => t.block,
                _ => break,
            };
            if let Some(c) = counted(func, &doms, &preds, next).filter(|c| c.pre == cur) {
                consumer = Some((next, c));
                break;
            }
            if preds.get(&next).map(Vec::as_slice) != Some(&[cur][..]) {
                break;
            }
            cur = next;
        }
        let Some((hc, c)) = consumer else { continue };
        if c.bound != fill.bound {
            continue;
        }
        // The consumer: `a` only as `elemaddr a, j, 8`, once, read by one `load.f64 +0` and then
        // written by one `store +0` in the same block, which every iteration runs once.
        let mut addr = None;
        for &b in &c.body {
            for &i in &func.blocks[b].insts {
                let op = &func.insts[i].op;
                if !touches(op, a) {
                    continue;
                }
                match op {
                    Op::ElemAddr(x, y, 8) if *x == a && *y == c.counter && addr.is_none() => addr = Some((i, b)),
                    _ => ok = false,
                }
            }
        }
        let Some((ai, s)) = addr else { continue };
        if !ok || !doms.dominates(s, c.latch) {
            continue;
        }
        let q = func.insts[ai].results[0];
        let (mut load, mut write) = (None, None);
        for &u in uses_of(q) {
            let at = func.blocks[s].insts.iter().position(|&i| i == u);
            match (&func.insts[u].op, at) {
                (Op::Load(Type::F64, x, 0), Some(k)) if *x == q && load.is_none() => load = Some((u, k)),
                (Op::Store(v, x, 0), Some(k)) if *x == q && *v != q && write.is_none() => write = Some(k),
                _ => ok = false,
            }
        }
        let (Some((load, kl)), Some(kw)) = (load, write) else { continue };
        if !ok || kl >= kw {
            continue;
        }
        // No inner loop, and no way out but the header's test and traps.
        let inner =
            c.body.iter().any(|&b| b != hc && preds[&b].iter().any(|&p| c.body.contains(&p) && doms.dominates(b, p)));
        // (The traps it may leave to do not read the array either.)
        let clean = |b: Block| !func.blocks[b].insts.iter().any(|&i| touches(&func.insts[i].op, a));
        let leaves = c.body.iter().any(|&b| {
            b != hc && successors(func, b).iter().any(|x| !c.body.contains(x) && !(traps(func, *x) && clean(*x)))
        });
        if inner || leaves || successors(func, hc).iter().filter(|x| !c.body.contains(x)).count() != 1 {
            continue;
        }
        return Some(Plan { fill_header: hf, fill_exit: fill.exit.block, load });
    }
    None
}

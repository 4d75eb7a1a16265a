//! Unroll-and-jam of a counted loop around an inner reduction loop: `build m (fun j -> dot w.[j]
//! x)`, `build m (fun j -> b.[j] + sum (build n (fun k -> …)))`, a loop over centroids of a sum
//! over coordinates. Rows `j … j + 3` run their inner loops together, one loop whose body does
//! row `j`'s element `k`, then row `j + 1`'s, … — each row's carried values (its sum) in its own
//! registers, each in its own left-to-right order — so results are bit-identical and the four
//! addition chains overlap (a sum's chain is one `fadd` every four cycles, latency-bound).
//!
//! The shape: an outer loop `H(j, …)` testing `j < N` (`j` from a non-negative constant by one,
//! `N` from before the loop) whose body is a *prefix* P (blocks of instructions without effects
//! and bounds checks, each branch but one going to a block that traps or allocates), then an
//! inner loop `IH(k, acc…)`, `k` from 0 by one while `k < m`, whose body is one block without
//! effects (loads, arithmetic, pure support functions, bounds checks of `k` or `c + k` against
//! lengths fixed while it runs), then a *suffix* Q: whatever the iteration does next (stores into
//! the arrays it fills, the compaction scope, branches, other loops) until it jumps back to H.
//! P and the inner loop read only the loop's counters (`j` and other parameters stepped by a
//! constant) and values from before the loop.
//!
//! The rewrite enters a *jammed iteration* first, while four rows remain: P for rows `j … j + 3`
//! with every bounds check and every branch to a trap or an allocation turned into a test; then
//! a test that each row's inner checks pass at every `k < m_r` (`0 ≤ c_r`, `c_r < len`, `m_r ≤
//! len − c_r`, or `m_r ≤ 0`); then the jammed inner loop up to `min m_r`, each row's rest alone
//! (a triangle's rows differ in length), then Q for row `j`, `j + 1`, … in order, the last jumping
//! back to H. When a test fails, the iteration runs as before (the original body, kept as it was,
//! for row `j` alone; the next iteration tries again), so the first failing check is the one
//! the interpreter reports, at its element, with its payload.
//!
//! Why this is exact: what moved earlier (P and the inner loops of the later rows, before Q of
//! the earlier ones) has no effect and cannot fail once the tests passed, and reads memory that Q
//! does not write: Q's stores go into arrays this function made (the arrays being filled, reverse
//! mode's accumulators), none of them an array P or the inner loop loads from, and arrays of
//! different base values are taken to be distinct (as `jit::vector` does: the IR writes only into
//! arrays it has just made or uniquely owned accumulators, which nothing else reaches); Q calls
//! nothing but pure support functions and the compaction scope, which moves only what the loop
//! made since its mark, never what P reads (made before the loop). Each row's operations are its
//! own, in its own order: no reassociation.

use rustc_hash::{FxHashMap, FxHashSet};

use super::simplify::{quiet, PURE_SUPPORT};
use super::strength::{def_op, loop_edges, made_array};
use crate::ir::cfg::{successors, Dominators};
use crate::ir::{
    BinaryOp, Block, BlockCall, Cmp, Function, Inst, InstData, Module, Op, Type, Value, ValueData, ValueDef,
};

/// Rows run together.
const ROWS: usize = 4;
/// The most instructions of P, the inner loop and Q together (Q is copied once per row).
const MAX_SIZE: usize = 300;
/// Support functions the suffix may call besides the pure ones: the compaction scope's checks and
/// its end (which moves only what the loop made since its mark).
const SCOPE_SUPPORT: &[&str] = &["nabla_arena_compact_begin", "nabla_arena_scope_begin", "nabla_arena_compact_end"];

/// Jams the loops of `func` that qualify; true if any changed.
pub(super) fn jam(module: &mut Module, func: &mut Function) -> bool {
    let mut changed = false;
    let mut facts: Option<(Dominators, FxHashMap<Block, Vec<Block>>)> = None;
    for h in func.layout.clone() {
        if !looks_like_header(func, h) {
            continue;
        }
        let (doms, preds) = facts.get_or_insert_with(|| (Dominators::compute(func), predecessors(func)));
        if !doms.is_reachable(h) {
            continue;
        }
        if let Some(plan) = plan(module, func, doms, preds, h) {
            apply(func, &plan);
            changed = true;
            facts = None;
        }
    }
    changed
}

fn predecessors(func: &Function) -> FxHashMap<Block, Vec<Block>> {
    let mut preds: FxHashMap<Block, Vec<Block>> = FxHashMap::default();
    for &b in &func.layout {
        for s in successors(func, b) {
            preds.entry(s).or_default().push(b);
        }
    }
    preds
}

/// `h` is `icmp lt i, n; brif c, body, exit` and nothing else.
fn looks_like_header(func: &Function, h: Block) -> bool {
    let [c_inst, br] = func.blocks[h].insts.as_slice() else { return false };
    let Op::Brif(c, t, _) = &func.insts[*br].op else { return false };
    t.args.is_empty()
        && func.insts[*c_inst].results == [*c]
        && matches!(func.insts[*c_inst].op, Op::Icmp(Cmp::Lt, i, _) if func.blocks[h].params.contains(&i))
}

/// One loop to jam.
struct Plan {
    h: Block,
    /// H's test: `counter < bound`; the body's first block.
    counter: Value,
    bound: Value,
    b0: Block,
    /// H's parameters P and the inner loop read, and their step per iteration (the counter's is 1).
    steps: FxHashMap<Value, i64>,
    /// P's blocks in order, and for each whether it continues by its terminator's first target
    /// (`Some(true)`), its second (`Some(false)`) or its only one (`None`).
    chain: Vec<(Block, Option<bool>)>,
    ih: Block,
    ib: Block,
    /// Which of IH's parameters is `k`, and its bound `m`.
    k: usize,
    m: Value,
    /// The inner body's checks: index offset (`None` for `k` itself), length.
    checks: Vec<(Option<Value>, Value)>,
    /// The suffix's blocks (layout order), its first block and the latch.
    q: Vec<Block>,
    x: Block,
    latch: Block,
}

fn plan(
    module: &Module,
    func: &Function,
    doms: &Dominators,
    preds: &FxHashMap<Block, Vec<Block>>,
    h: Block,
) -> Option<Plan> {
    let (latch, pre) = loop_edges(func, doms, preds, h)?;
    let [c_inst, br] = func.blocks[h].insts.as_slice() else { return None };
    let Op::Brif(_, t, e) = &func.insts[*br].op else { return None };
    let Op::Icmp(Cmp::Lt, counter, bound) = func.insts[*c_inst].op else { return None };
    let b0 = t.block;
    if b0 == h || e.block == h || b0 == e.block || preds.get(&b0).map(Vec::as_slice) != Some(&[h][..]) {
        return None;
    }
    let body = super::strength::natural_loop(preds, h, latch);
    let in_loop = |v: Value| match func.values[v].def {
        ValueDef::Param(b, _) => body.contains(&b),
        ValueDef::Result(i, _) => body.iter().any(|&b| func.blocks[b].insts.contains(&i)),
        ValueDef::Unused => true,
    };
    if in_loop(bound) {
        return None;
    }
    // H's parameters stepped by a constant; the counter by one from a non-negative constant.
    let params = &func.blocks[h].params;
    let mut steps: FxHashMap<Value, i64> = FxHashMap::default();
    for (n, &p) in params.iter().enumerate() {
        let next = super::strength::arg_to(func, latch, h, n)?;
        if let Some(s) = step_of(func, preds, next, p, 3) {
            steps.insert(p, s);
        }
    }
    let kc = params.iter().position(|&p| p == counter)?;
    let start = super::strength::arg_to(func, pre, h, kc)?;
    if steps.get(&counter) != Some(&1) || !matches!(def_op(func, start), Some(Op::Iconst(c)) if *c >= 0) {
        return None;
    }
    // P: a chain of blocks without effects, each branch but one leaving the chain for a block
    // that traps or allocates, up to the jump into the inner loop.
    let mut chain: Vec<(Block, Option<bool>)> = Vec::new();
    let mut seen: FxHashSet<Block> = FxHashSet::default();
    let mut b = b0;
    let (ih, ipre) = loop {
        if !body.contains(&b) || b == h || !seen.insert(b) || chain.len() > 8 {
            return None;
        }
        let (&last, insts) = func.blocks[b].insts.split_last()?;
        if !insts.iter().all(|&i| prefix_op(func, &func.insts[i].op)) {
            return None;
        }
        match &func.insts[last].op {
            Op::Jump(bc) if is_header(func, doms, preds, bc.block) => {
                chain.push((b, None));
                break (bc.block, b);
            }
            Op::Jump(bc) => {
                chain.push((b, None));
                b = bc.block;
            }
            Op::Brif(_, t, e) => {
                let go = |c: &BlockCall| !leaves(func, c.block) && !is_header(func, doms, preds, c.block);
                let next = match (go(t), go(e)) {
                    (true, false) => true,
                    (false, true) => false,
                    _ => return None,
                };
                chain.push((b, Some(next)));
                b = if next { t.block } else { e.block };
            }
            _ => return None,
        }
    };
    // The inner loop: IH(k, …) testing `k < m`, one body block.
    let (ilatch, ientry) = loop_edges(func, doms, preds, ih)?;
    if ientry != ipre {
        return None;
    }
    let [ic_inst, ibr] = func.blocks[ih].insts.as_slice() else { return None };
    let Op::Brif(ic, it, ie) = &func.insts[*ibr].op else { return None };
    let Op::Icmp(Cmp::Lt, kv, m) = func.insts[*ic_inst].op else { return None };
    let (ib, x) = (it.block, ie.block);
    if func.insts[*ic_inst].results != [*ic] || !it.args.is_empty() || !ie.args.is_empty() || ib != ilatch || ib == ih {
        return None;
    }
    if preds.get(&ib).map(Vec::as_slice) != Some(&[ih][..]) {
        return None;
    }
    let iparams = &func.blocks[ih].params;
    let k = iparams.iter().position(|&p| p == kv)?;
    let k0 = super::strength::arg_to(func, ipre, ih, k)?;
    let k1 = super::strength::arg_to(func, ib, ih, k)?;
    if !matches!(def_op(func, k0), Some(Op::Iconst(0))) || !super::strength::is_increment_of(func, k1, kv) {
        return None;
    }
    let inner: FxHashSet<Block> = [ih, ib].into_iter().collect();
    let in_inner = |v: Value| match func.values[v].def {
        ValueDef::Param(b, _) => inner.contains(&b),
        ValueDef::Result(i, _) => func.blocks[ib].insts.contains(&i) || func.blocks[ih].insts.contains(&i),
        ValueDef::Unused => true,
    };
    if in_inner(m) {
        return None;
    }
    let mut checks = Vec::new();
    let (_, ib_insts) = func.blocks[ib].insts.split_last()?;
    for &i in ib_insts {
        match &func.insts[i].op {
            Op::BoundsCheck(idx, len, _) => {
                let c = if *idx == kv {
                    None
                } else {
                    match def_op(func, *idx) {
                        Some(Op::Binary(BinaryOp::Iadd, a, b)) if *b == kv && invariant(func, &in_inner, *a, 4) => {
                            Some(*a)
                        }
                        Some(Op::Binary(BinaryOp::Iadd, a, b)) if *a == kv && invariant(func, &in_inner, *b, 4) => {
                            Some(*b)
                        }
                        _ => return None,
                    }
                };
                if !invariant(func, &in_inner, *len, 4) {
                    return None;
                }
                checks.push((c, *len));
            }
            Op::CallExt(f, _) => {
                let ext = &module.externs[*f];
                if ext.fallible || !PURE_SUPPORT.contains(&ext.name.as_str()) {
                    return None;
                }
            }
            op if prefix_op(func, op) => {}
            _ => return None,
        }
    }
    // Q: every block reachable from the inner loop's exit without passing H.
    let mut q_set: FxHashSet<Block> = FxHashSet::default();
    let mut work = vec![x];
    while let Some(b) = work.pop() {
        if b == h || !q_set.insert(b) {
            continue;
        }
        // Outside the loop, only a block that traps (a check's failure).
        let traps = matches!(func.terminator(b), Some(Op::Trap(..)));
        if (!body.contains(&b) && !traps) || seen.contains(&b) || inner.contains(&b) {
            return None;
        }
        for s in successors(func, b) {
            if s == h && b != latch {
                return None;
            }
            work.push(s);
        }
    }
    if !q_set.contains(&latch) || preds.get(&x).map(Vec::as_slice) != Some(&[ih][..]) {
        return None;
    }
    let q: Vec<Block> = func.layout.iter().copied().filter(|b| q_set.contains(b)).collect();
    // What P and the inner loop read: counters, their own values, values from before the loop.
    let reads_ok = |v: Value| -> bool {
        if !in_loop(v) {
            return true;
        }
        match func.values[v].def {
            ValueDef::Param(b, _) if b == h => steps.contains_key(&v),
            ValueDef::Param(b, _) => seen.contains(&b) || inner.contains(&b),
            ValueDef::Result(i, _) => seen.iter().chain(&inner).any(|&b| func.blocks[b].insts.contains(&i)),
            ValueDef::Unused => false,
        }
    };
    let mut loads: FxHashSet<Value> = FxHashSet::default();
    for &b in seen.iter().chain(&inner) {
        for &i in &func.blocks[b].insts {
            let op = &func.insts[i].op;
            let mut ok = true;
            op.for_each_operand(|v| ok &= reads_ok(v));
            if !ok {
                return None;
            }
            if let Op::Load(_, p, _) = op {
                loads.insert(base(func, *p));
            }
        }
    }
    // Q reads, of the loop's values, H's parameters, P's, the inner loop's carried values and its
    // own (each has a copy per row).
    let q_reads_ok = |v: Value| -> bool {
        if !in_loop(v) {
            return true;
        }
        match func.values[v].def {
            ValueDef::Param(b, _) => b == h || b == ih || seen.contains(&b) || q_set.contains(&b),
            ValueDef::Result(i, _) => seen.iter().chain(&q).any(|&b| func.blocks[b].insts.contains(&i)),
            ValueDef::Unused => false,
        }
    };
    for &b in &q {
        for &i in &func.blocks[b].insts {
            let mut ok = true;
            func.insts[i].op.for_each_operand(|v| ok &= q_reads_ok(v));
            if !ok {
                return None;
            }
        }
    }
    // Q calls nothing but pure support functions and the scope; it stores into arrays made here
    // that P and the inner loop do not load from.
    let mut size = func.blocks[ih].insts.len() + func.blocks[ib].insts.len();
    for &b in seen.iter() {
        size += func.blocks[b].insts.len();
    }
    for &b in &q {
        size += func.blocks[b].insts.len();
        for &i in &func.blocks[b].insts {
            match &func.insts[i].op {
                Op::Call(..) | Op::Switch(..) | Op::Return(_) => return None,
                Op::CallExt(f, _) => {
                    let name = module.externs[*f].name.as_str();
                    if !PURE_SUPPORT.contains(&name) && !SCOPE_SUPPORT.contains(&name) {
                        return None;
                    }
                }
                Op::Store(_, p, _) => {
                    let a = base(func, *p);
                    if loads.contains(&a) || !made_array(func, preds, a, &mut FxHashSet::default()) {
                        return None;
                    }
                }
                _ => {}
            }
        }
    }
    if size > MAX_SIZE {
        return None;
    }
    Some(Plan { h, counter, bound, b0, steps, chain, ih, ib, k, m, checks, q, x, latch })
}

/// May P hold `op`? Operations without effects, bounds checks, divisions by a non-zero constant.
fn prefix_op(func: &Function, op: &Op) -> bool {
    match op {
        Op::BoundsCheck(..) => true,
        Op::Binary(BinaryOp::Sdiv | BinaryOp::Srem, _, d) => {
            matches!(def_op(func, *d), Some(Op::Iconst(c)) if *c != 0)
        }
        op => quiet(op),
    }
}

/// Does the chain leave for `b`: a block that traps, or one that does something P may not?
fn leaves(func: &Function, b: Block) -> bool {
    let insts = &func.blocks[b].insts;
    matches!(insts.last().map(|&i| &func.insts[i].op), Some(Op::Trap(..)))
        || !insts.split_last().is_some_and(|(_, rest)| rest.iter().all(|&i| prefix_op(func, &func.insts[i].op)))
}

/// Is `b` a loop header (a predecessor it dominates)?
fn is_header(func: &Function, doms: &Dominators, preds: &FxHashMap<Block, Vec<Block>>, b: Block) -> bool {
    let _ = func;
    preds.get(&b).is_some_and(|ps| ps.iter().any(|&p| doms.dominates(b, p)))
}

/// The constant `c` when `next` is `p + c`, directly or as a block parameter every edge gives
/// `p + c` (a counter stepped on both sides of an `if`).
fn step_of(func: &Function, preds: &FxHashMap<Block, Vec<Block>>, next: Value, p: Value, depth: u32) -> Option<i64> {
    match func.values[next].def {
        ValueDef::Result(..) => match def_op(func, next)? {
            Op::Binary(BinaryOp::Iadd, a, b) if *a == p => const_of(func, *b),
            Op::Binary(BinaryOp::Iadd, a, b) if *b == p => const_of(func, *a),
            _ => None,
        },
        ValueDef::Param(b, n) if depth > 0 => {
            let mut out = None;
            for &from in preds.get(&b)? {
                let t = func.terminator(from)?;
                for bc in t.branch_targets() {
                    if bc.block != b {
                        continue;
                    }
                    let s = step_of(func, preds, *bc.args.get(n as usize)?, p, depth - 1)?;
                    if out.is_some_and(|o| o != s) {
                        return None;
                    }
                    out = Some(s);
                }
            }
            out
        }
        _ => None,
    }
}

fn const_of(func: &Function, v: Value) -> Option<i64> {
    match def_op(func, v)? {
        Op::Iconst(c) => Some(*c),
        _ => None,
    }
}

/// Is `v` fixed while the inner loop runs: from outside it, or integer arithmetic (division only
/// by a non-zero constant) and lengths of such values computed in its body?
fn invariant(func: &Function, in_inner: &impl Fn(Value) -> bool, v: Value, depth: u32) -> bool {
    if !in_inner(v) {
        return true;
    }
    if depth == 0 {
        return false;
    }
    match def_op(func, v) {
        Some(Op::Iconst(_)) => true,
        Some(Op::Binary(BinaryOp::Iadd | BinaryOp::Isub | BinaryOp::Imul, a, b)) => {
            invariant(func, in_inner, *a, depth - 1) && invariant(func, in_inner, *b, depth - 1)
        }
        Some(Op::Binary(BinaryOp::Sdiv | BinaryOp::Srem, a, d)) if matches!(def_op(func, *d), Some(Op::Iconst(c)) if *c != 0) => {
            invariant(func, in_inner, *a, depth - 1)
        }
        Some(Op::ArrayLen(a)) => invariant(func, in_inner, *a, depth - 1),
        _ => false,
    }
}

/// The array (or record) an address points into: `elemaddr a, …` gives `a`.
fn base(func: &Function, p: Value) -> Value {
    match def_op(func, p) {
        Some(Op::ElemAddr(a, _, _)) => *a,
        _ => p,
    }
}

/// Values of one row's copy.
type Map = FxHashMap<Value, Value>;

fn get(map: &Map, v: Value) -> Value {
    map.get(&v).copied().unwrap_or(v)
}

/// A new instruction at the end of `b` (which has no terminator yet) with one result.
fn emit(func: &mut Function, b: Block, op: Op, ty: Type) -> Value {
    let i = func.append_inst(b, op, &[ty]);
    func.insts[i].results[0]
}

/// A copy of `inst` at the end of `b`, its operands through `map`, its results added to `map`.
fn copy(func: &mut Function, map: &mut Map, inst: Inst, b: Block) {
    let op = super::inline::map_operands(&func.insts[inst].op, &|v| get(map, v));
    let tys: Vec<Type> = func.insts[inst].results.iter().map(|&r| func.values[r].ty).collect();
    let new = func.append_inst(b, op, &tys);
    for (n, &r) in func.insts[inst].results.clone().iter().enumerate() {
        map.insert(r, func.insts[new].results[n]);
    }
}

/// [`copy`] for P, but an operation without effects that an earlier row's P computed from the
/// same operands (a length both read, `len x`) is that row's value: the rows' inner lengths are
/// then one value, and need no separate rests.
fn copy_shared(func: &mut Function, map: &mut Map, memo: &mut Vec<(Op, Value)>, inst: Inst, b: Block) {
    let op = super::inline::map_operands(&func.insts[inst].op, &|v| get(map, v));
    if quiet(&op) && func.insts[inst].results.len() == 1 {
        if let Some((_, v)) = memo.iter().find(|(o, _)| *o == op) {
            map.insert(func.insts[inst].results[0], *v);
            return;
        }
        copy(func, map, inst, b);
        memo.push((op, get(map, func.insts[inst].results[0])));
        return;
    }
    copy(func, map, inst, b);
}

/// `v` (an [`invariant`] value of the inner loop) computed at the end of `b` for a row.
fn materialise(func: &mut Function, map: &mut Map, ib: Block, v: Value, b: Block) -> Value {
    if let Some(&m) = map.get(&v) {
        return m;
    }
    let ValueDef::Result(inst, _) = func.values[v].def else { return v };
    if !func.blocks[ib].insts.contains(&inst) {
        return v;
    }
    let mut operands = Vec::new();
    func.insts[inst].op.for_each_operand(|o| operands.push(o));
    for o in operands {
        materialise(func, map, ib, o, b);
    }
    copy(func, map, inst, b);
    get(map, v)
}

fn apply(func: &mut Function, plan: &Plan) {
    let Plan { h, counter, bound, b0, ref steps, ref chain, ih, ib, k, m, ref checks, ref q, x, latch } = *plan;
    // G: while ROWS rows remain (`N − j > ROWS − 1`; `0 ≤ j < N`, so no overflow).
    let g = func.create_block();
    let left = emit(func, g, Op::Binary(BinaryOp::Isub, bound, counter), Type::I64);
    let more = emit(func, g, Op::Iconst(ROWS as i64 - 1), Type::I64);
    let rows_left = emit(func, g, Op::Icmp(Cmp::Gt, left, more), Type::Bool);
    let mut cur = func.create_block();
    func.append_inst(g, Op::Brif(rows_left, BlockCall::new(cur, vec![]), BlockCall::new(b0, vec![])), &[]);
    // H's true target is G.
    let hbr = *func.blocks[h].insts.last().expect("a terminator");
    if let Op::Brif(_, t, _) = &mut func.insts[hbr].op {
        t.block = g;
    }
    let fallback = |_: &mut Function| BlockCall::new(b0, vec![]);
    // P for each row, its checks and branches to traps turned into tests.
    let mut maps: Vec<Map> = Vec::new();
    let mut memo: Vec<(Op, Value)> = Vec::new();
    let mut inits: Vec<Vec<Value>> = Vec::new();
    for r in 0..ROWS {
        let mut map = Map::default();
        for (&p, &s) in steps {
            let v = if r == 0 {
                p
            } else {
                let d = emit(func, cur, Op::Iconst(s.wrapping_mul(r as i64)), Type::I64);
                emit(func, cur, Op::Binary(BinaryOp::Iadd, p, d), Type::I64)
            };
            map.insert(p, v);
        }
        let mut from: Option<(Block, Vec<Value>)> = None;
        for &(b, next) in chain {
            // The block's parameters: the arguments of the edge the chain took into it.
            if let Some((_, args)) = &from {
                for (n, &p) in func.blocks[b].params.clone().iter().enumerate() {
                    map.insert(p, get(&map, args[n]));
                }
            }
            let (&last, insts) = func.blocks[b].insts.split_last().expect("a terminator");
            for &i in &insts.to_vec() {
                if let Op::BoundsCheck(idx, len, _) = func.insts[i].op {
                    let (idx, len) = (get(&map, idx), get(&map, len));
                    let zero = emit(func, cur, Op::Iconst(0), Type::I64);
                    let ge = emit(func, cur, Op::Icmp(Cmp::Ge, idx, zero), Type::Bool);
                    let lt = emit(func, cur, Op::Icmp(Cmp::Lt, idx, len), Type::Bool);
                    let ok = emit(func, cur, Op::Binary(BinaryOp::And, ge, lt), Type::Bool);
                    let then = func.create_block();
                    let fb = fallback(func);
                    func.append_inst(cur, Op::Brif(ok, BlockCall::new(then, vec![]), fb), &[]);
                    cur = then;
                } else {
                    copy_shared(func, &mut map, &mut memo, i, cur);
                }
            }
            match func.insts[last].op.clone() {
                Op::Jump(bc) => from = Some((bc.block, bc.args.clone())),
                Op::Brif(c, t, e) => {
                    let (go, stay) = if next == Some(true) { (t, true) } else { (e, false) };
                    let then = func.create_block();
                    let fb = fallback(func);
                    let c = get(&map, c);
                    let (tt, ee) =
                        if stay { (BlockCall::new(then, vec![]), fb) } else { (fb, BlockCall::new(then, vec![])) };
                    func.append_inst(cur, Op::Brif(c, tt, ee), &[]);
                    cur = then;
                    from = Some((go.block, go.args.clone()));
                }
                _ => unreachable!("planned on jumps and branches"),
            }
        }
        let (_, args) = from.expect("P jumps into the inner loop");
        inits.push(args.iter().map(|&a| get(&map, a)).collect());
        maps.push(map);
    }
    // Each row's inner checks pass at every k < m_r; the jammed loop runs to min m_r.
    let mut ms = Vec::new();
    let mut all: Option<Value> = None;
    for (r, map) in maps.iter_mut().enumerate() {
        let mr = get(map, m);
        ms.push(mr);
        let _ = r;
        let mut guard = map.clone();
        for &(c, len) in checks {
            let len = materialise(func, &mut guard, ib, len, cur);
            let zero = emit(func, cur, Op::Iconst(0), Type::I64);
            let empty = emit(func, cur, Op::Icmp(Cmp::Le, mr, zero), Type::Bool);
            let ok = match c {
                None => emit(func, cur, Op::Icmp(Cmp::Le, mr, len), Type::Bool),
                Some(c) => {
                    let c = materialise(func, &mut guard, ib, c, cur);
                    let ge = emit(func, cur, Op::Icmp(Cmp::Ge, c, zero), Type::Bool);
                    let lt = emit(func, cur, Op::Icmp(Cmp::Lt, c, len), Type::Bool);
                    let room = emit(func, cur, Op::Binary(BinaryOp::Isub, len, c), Type::I64);
                    let fits = emit(func, cur, Op::Icmp(Cmp::Le, mr, room), Type::Bool);
                    let a = emit(func, cur, Op::Binary(BinaryOp::And, ge, lt), Type::Bool);
                    emit(func, cur, Op::Binary(BinaryOp::And, a, fits), Type::Bool)
                }
            };
            let ok = emit(func, cur, Op::Binary(BinaryOp::Or, empty, ok), Type::Bool);
            all = Some(match all {
                None => ok,
                Some(a) => emit(func, cur, Op::Binary(BinaryOp::And, a, ok), Type::Bool),
            });
        }
    }
    let mut mmin = ms[0];
    for &mr in &ms[1..] {
        let less = emit(func, cur, Op::Icmp(Cmp::Lt, mr, mmin), Type::Bool);
        mmin = emit(func, cur, Op::Select(less, mr, mmin), Type::I64);
    }
    // The jammed loop JH(k, row 0's carried values, row 1's, …).
    let iparams = func.blocks[ih].params.clone();
    let jh = func.create_block();
    let jk = func.append_block_param(jh, Type::I64);
    let mut row_params: Vec<Vec<Value>> = Vec::new();
    for _ in 0..ROWS {
        let mut ps = Vec::new();
        for (n, &p) in iparams.iter().enumerate() {
            ps.push(if n == k { jk } else { func.append_block_param(jh, func.values[p].ty) });
        }
        row_params.push(ps);
    }
    let mut entry_args = vec![inits[0][k]];
    for init in &inits {
        entry_args.extend(init.iter().enumerate().filter(|&(n, _)| n != k).map(|(_, &a)| a));
    }
    let jh_call = BlockCall::new(jh, entry_args);
    match all {
        Some(ok) => {
            func.append_inst(cur, Op::Brif(ok, jh_call, BlockCall::new(b0, vec![])), &[]);
        }
        None => {
            func.append_inst(cur, Op::Jump(jh_call), &[]);
        }
    }
    let jb = func.create_block();
    let jx = func.create_block();
    let go = emit(func, jh, Op::Icmp(Cmp::Lt, jk, mmin), Type::Bool);
    func.append_inst(jh, Op::Brif(go, BlockCall::new(jb, vec![]), BlockCall::new(jx, vec![])), &[]);
    let (&ilast, ib_insts) = func.blocks[ib].insts.split_last().expect("a terminator");
    let ib_insts = ib_insts.to_vec();
    let Op::Jump(back) = func.insts[ilast].op.clone() else { unreachable!("planned on a jump") };
    let mut back_args: Vec<Value> = Vec::new();
    for (r, map) in maps.iter().enumerate() {
        let mut rm = map.clone();
        for (n, &p) in iparams.iter().enumerate() {
            rm.insert(p, row_params[r][n]);
        }
        for &i in &ib_insts {
            if !matches!(func.insts[i].op, Op::BoundsCheck(..)) {
                copy(func, &mut rm, i, jb);
            }
        }
        let args: Vec<Value> = back.args.iter().map(|&a| get(&rm, a)).collect();
        if r == 0 {
            back_args.push(args[k]);
        }
        back_args.extend(args.iter().enumerate().filter(|&(n, _)| n != k).map(|(_, &a)| a));
    }
    func.append_inst(jb, Op::Jump(BlockCall::new(jh, back_args)), &[]);
    // Each row's rest alone (its checks passed the test too): none when the rows' lengths are one value, else
    // entered only when the row has elements left (the loop's entry is then not the jammed
    // loop's header, where strength reduction would put the rest's first addresses).
    let mut cur = jx;
    let mut exits: Vec<Map> = Vec::new();
    let same = ms.iter().all(|&mr| mr == ms[0]);
    for r in 0..ROWS {
        let mut rm = maps[r].clone();
        if same {
            for (n, &p) in iparams.iter().enumerate() {
                rm.insert(p, row_params[r][n]);
            }
            exits.push(rm);
            continue;
        }
        let th = func.create_block();
        let tb = func.create_block();
        let next = func.create_block();
        let mut tps = Vec::new();
        for &p in &iparams {
            let np = func.append_block_param(th, func.values[p].ty);
            rm.insert(p, np);
            tps.push(np);
        }
        let after: Vec<Value> = iparams.iter().map(|&p| func.append_block_param(next, func.values[p].ty)).collect();
        let any = emit(func, cur, Op::Icmp(Cmp::Lt, jk, ms[r]), Type::Bool);
        let args: Vec<Value> = row_params[r].clone();
        func.append_inst(cur, Op::Brif(any, BlockCall::new(th, args.clone()), BlockCall::new(next, args)), &[]);
        let go = emit(func, th, Op::Icmp(Cmp::Lt, tps[k], ms[r]), Type::Bool);
        func.append_inst(th, Op::Brif(go, BlockCall::new(tb, vec![]), BlockCall::new(next, tps.clone())), &[]);
        for &i in &ib_insts {
            if !matches!(func.insts[i].op, Op::BoundsCheck(..)) {
                copy(func, &mut rm, i, tb);
            }
        }
        let args: Vec<Value> = back.args.iter().map(|&a| get(&rm, a)).collect();
        func.append_inst(tb, Op::Jump(BlockCall::new(th, args)), &[]);
        let mut rm = maps[r].clone();
        for (n, &p) in iparams.iter().enumerate() {
            rm.insert(p, after[n]);
        }
        cur = next;
        exits.push(rm);
    }
    // Q for each row in order; row r + 1's starts from what row r's latch passes to H.
    let hparams = func.blocks[h].params.clone();
    let mut entry = cur;
    let mut from_prev: Vec<Value> = hparams.clone();
    for (r, mut rm) in exits.into_iter().enumerate() {
        for (n, &p) in hparams.iter().enumerate() {
            rm.insert(p, from_prev[n]);
        }
        let next_entry = (r + 1 < ROWS).then(|| func.create_block());
        if let Some(ne) = next_entry {
            from_prev = hparams.iter().map(|&p| func.append_block_param(ne, func.values[p].ty)).collect();
        }
        let blocks: FxHashMap<Block, Block> = q.iter().map(|&b| (b, func.create_block())).collect();
        // Parameters and results first: a block may use a value defined later in the layout.
        let mut pairs: Vec<(Inst, Inst)> = Vec::new();
        for &b in q {
            let nb = blocks[&b];
            for p in func.blocks[b].params.clone() {
                let np = func.append_block_param(nb, func.values[p].ty);
                rm.insert(p, np);
            }
            for i in func.blocks[b].insts.clone() {
                let new = func.insts.push(InstData { op: Op::Null, results: Vec::new() });
                for (n, res) in func.insts[i].results.clone().into_iter().enumerate() {
                    let ty = func.values[res].ty;
                    let v = func.values.push(ValueData { ty, def: ValueDef::Result(new, n as u32) });
                    func.insts[new].results.push(v);
                    rm.insert(res, v);
                }
                func.blocks[nb].insts.push(new);
                pairs.push((i, new));
            }
        }
        let back_to = next_entry.unwrap_or(h);
        for (old, new) in pairs {
            let mut op = super::inline::map_operands(&func.insts[old].op, &|v| get(&rm, v));
            let retarget = |bc: &mut BlockCall| {
                if let Some(&nb) = blocks.get(&bc.block) {
                    bc.block = nb;
                } else if bc.block == h {
                    bc.block = back_to;
                }
            };
            match &mut op {
                Op::Jump(bc) => retarget(bc),
                Op::Brif(_, t, e) => {
                    retarget(t);
                    retarget(e);
                }
                _ => {}
            }
            func.insts[new].op = op;
        }
        func.append_inst(entry, Op::Jump(BlockCall::new(blocks[&x], vec![])), &[]);
        if let Some(ne) = next_entry {
            entry = ne;
        }
    }
    let _ = latch;
}

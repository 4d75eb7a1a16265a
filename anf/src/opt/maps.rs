//! Singleton-map fusion: a map made only to be added into another — `nabla_map_new`, one
//! `nabla_map_set`, then `nabla_map_add_scaled` with it as the source (a `mapGroup` fold's step
//! after inlining `fun x -> singletonMap k v`, as ILC derivatives of map-reduce programs make per
//! changed key) — is never built: the addition becomes `nabla_map_add_scaled_key` on the key and
//! value slots the `set` read.
//!
//! Adding `m·{k -> v}` is updating the one key `k`, so the two compute the same map, provided
//! - the three calls are in one block in that order, and the map has no other use;
//! - the slots of `k` and `v` hold the same words at the addition as at the `set`: nothing
//!   between the two stores to memory or calls anything (only pure instructions lie between).
//!
//! The removed `nabla_map_new` and `nabla_map_set` could only fail by running out of memory; the
//! addition's own failures (a bag multiplicity out of range) are reported at its site as before.

use rustc_hash::{FxHashMap, FxHashSet};

use super::bags::{region, Pos};
use crate::ir::cfg::{successors, Dominators};
use crate::ir::entity::SecondaryMap;
use crate::ir::{
    BinaryOp, Block, EntityRef, ExtFuncId, Function, Inst, InstData, Module, Op, Type, Value, ValueData, ValueDef,
};

/// Fuses every singleton map of `func` that is only added into another; true if anything changed.
pub(super) fn fuse(module: &mut Module, func: &mut Function) -> bool {
    let (Some(new), Some(set), Some(add)) = (
        module.extern_by_name("nabla_map_new"),
        module.extern_by_name("nabla_map_set"),
        module.extern_by_name("nabla_map_add_scaled"),
    ) else {
        return false;
    };
    let mut plans = Vec::new();
    let uses = use_counts(func);
    for &b in &func.layout {
        plans.extend(find_in_block(func, b, new, set, add, &uses));
    }
    if plans.is_empty() {
        return false;
    }
    let Some(add_key) = module.declare_support("nabla_map_add_scaled_key") else { return false };
    for p in plans {
        apply(func, add_key, p);
    }
    true
}

/// How many instructions use each value (an instruction using it twice counts twice).
fn use_counts(func: &Function) -> rustc_hash::FxHashMap<Value, usize> {
    let mut uses = rustc_hash::FxHashMap::default();
    for &b in &func.layout {
        for &inst in &func.blocks[b].insts {
            func.insts[inst].op.for_each_operand(|v| *uses.entry(v).or_insert(0) += 1);
        }
    }
    uses
}

struct Plan {
    block: Block,
    /// The creation, the `set` and the addition.
    new: Inst,
    set: Inst,
    add: Inst,
}

fn find_in_block(
    func: &Function,
    b: Block,
    new: ExtFuncId,
    set: ExtFuncId,
    add: ExtFuncId,
    uses: &rustc_hash::FxHashMap<Value, usize>,
) -> Vec<Plan> {
    let insts = &func.blocks[b].insts;
    let op = |i: usize| &func.insts[insts[i]].op;
    let mut plans = Vec::new();
    for i in 0..insts.len() {
        let Op::CallExt(e, _) = op(i) else { continue };
        if *e != new {
            continue;
        }
        let Some(&m) = func.insts[insts[i]].results.first() else { continue };
        if uses.get(&m).copied() != Some(2) {
            continue;
        }
        // The `set` of the one key, then the addition of the map into another.
        let Some(s) = (i + 1..insts.len()).find(|&j| op_uses(op(j), m)) else { continue };
        let Op::CallExt(se, sargs) = op(s) else { continue };
        if *se != set || sargs.len() != 3 || sargs[0] != m || sargs[1] == m || sargs[2] == m {
            continue;
        }
        let Some(a) = (s + 1..insts.len()).find(|&j| op_uses(op(j), m)) else { continue };
        let Op::CallExt(ae, aargs) = op(a) else { continue };
        // `add_scaled(dst, src, m, kind, site)` with the singleton as `src` only.
        if *ae != add || aargs.len() != 5 || aargs[1] != m || aargs.iter().filter(|v| **v == m).count() != 1 {
            continue;
        }
        // Nothing between the `set` and the addition writes memory or calls anything.
        if !(s + 1..a).all(|j| is_pure(op(j))) {
            continue;
        }
        plans.push(Plan { block: b, new: insts[i], set: insts[s], add: insts[a] });
    }
    plans
}

fn op_uses(op: &Op, v: Value) -> bool {
    let mut found = false;
    op.for_each_operand(|u| found |= u == v);
    found
}

/// Does `op` neither write memory nor call anything (so a slot read before it reads the same
/// after)?
fn is_pure(op: &Op) -> bool {
    !matches!(op, Op::Store(..) | Op::Call(..) | Op::CallExt(..)) && !op.is_terminator()
}

fn apply(func: &mut Function, add_key: ExtFuncId, p: Plan) {
    let (new_inst, set_inst, add_inst) = (p.new, p.set, p.add);
    let Op::CallExt(_, sargs) = func.insts[set_inst].op.clone() else { return };
    let Op::CallExt(_, aargs) = func.insts[add_inst].op.clone() else { return };
    // `add_scaled_key(dst, key, value, m, kind, site)`.
    func.insts[add_inst].op = Op::CallExt(add_key, vec![aargs[0], sargs[1], sargs[2], aargs[2], aargs[3], aargs[4]]);
    func.blocks[p.block].insts.retain(|i| *i != new_inst && *i != set_inst);
    // The creation's result has no use left; its instruction is orphaned and inert.
    func.insts[new_inst] = InstData { op: Op::Null, results: func.insts[new_inst].results.clone() };
    func.insts[set_inst] = InstData { op: Op::Null, results: Vec::new() };
}

// ---- Accumulator fusion --------------------------------------------------------------------------

/// Accumulator fusion: a fresh map filled only by `nabla_map_add_scaled_key` in `intGroup` and
/// then added, once, into another map in `intGroup` (`nabla_map_add_scaled`) is never built — its
/// additions go straight into the destination, each amount times the addition's scale. This is
/// a `foldMap g (mapGroup intGroup) (λk v. foldBag (mapGroup intGroup) u v)` whose inner fold
/// would otherwise make a map per entry (ILC derivatives of map-reduce programs after
/// `adjoint::incremental::fuse`: a map per changed document, added into the histogram's change).
///
/// `dst[k] ⊕ m·(Σᵢ sᵢ·vᵢ)` equals `Σᵢ dst[k] ⊕ (sᵢ·m)·vᵢ` in wrapping Int arithmetic, a key is
/// bound at the end iff its sum is nonzero either way, and neither form can fail (`intGroup`
/// additions wrap), so the two compute the same map, provided (as for bag fusion, `bags`)
/// - every path from the creation reaches the one addition (or fails), and the addition cannot
///   run twice for one creation;
/// - nothing reads the destination in between: its only uses there are `intGroup` additions, and
///   it has no alias then (every other use of it lies where the creation cannot be reached
///   from, so it cannot have been stored or passed on before);
/// - the destination and the scale (or its constant) are available where the additions are.
pub(super) fn fuse_accumulators(module: &mut Module, func: &mut Function) -> bool {
    let (Some(new), Some(add), Some(add_key)) = (
        module.extern_by_name("nabla_map_new"),
        module.extern_by_name("nabla_map_add_scaled"),
        module.extern_by_name("nabla_map_add_scaled_key"),
    ) else {
        return false;
    };
    let mut changed = false;
    // Each fusion may enable the next (the destination becomes a map with keyed additions only).
    for _ in 0..64 {
        let Some(plan) = find_accumulator(func, new, add, add_key) else { break };
        apply_accumulator(func, plan);
        changed = true;
    }
    changed
}

struct AccPlan {
    new: Pos,
    add: Pos,
    dest: Value,
    /// The addition's scale: `None` when it is the constant 1.
    scale: Option<Scale>,
    inserts: Vec<Pos>,
}

#[derive(Clone, Copy)]
enum Scale {
    Const(i64),
    Value(Value),
}

/// The constant an `iconst` gives `v`, if it is one.
fn const_of(func: &Function, v: Value) -> Option<i64> {
    match func.values[v].def {
        ValueDef::Result(inst, 0) => match func.insts[inst].op {
            Op::Iconst(n) => Some(n),
            _ => None,
        },
        _ => None,
    }
}

fn find_accumulator(func: &Function, new: ExtFuncId, add: ExtFuncId, add_key: ExtFuncId) -> Option<AccPlan> {
    let is_call = |op: &Op, e: ExtFuncId| matches!(op, Op::CallExt(f, _) if *f == e);
    let makes_maps = func.layout.iter().flat_map(|b| &func.blocks[*b].insts).any(|i| is_call(&func.insts[*i].op, new));
    if !makes_maps {
        return None;
    }
    let mut pos: SecondaryMap<Inst, Option<Pos>> = SecondaryMap::sized(func.insts.len());
    let mut uses: FxHashMap<Value, Vec<Pos>> = FxHashMap::default();
    let mut fresh = Vec::new();
    for &b in &func.layout {
        for (i, &inst) in func.blocks[b].insts.iter().enumerate() {
            pos[inst] = Some((b, i));
            let op = &func.insts[inst].op;
            op.for_each_operand(|v| uses.entry(v).or_default().push((b, i)));
            if is_call(op, new) {
                fresh.push(((b, i), func.insts[inst].results[0]));
            }
        }
    }
    let op_at = |(b, i): Pos| &func.insts[func.blocks[b].insts[i]].op;
    // `add_scaled_key(d, key, value, s, kind, site)` into `d` in `intGroup`, `d` nowhere else.
    let keyed_into = |op: &Op, d: Value| match op {
        Op::CallExt(e, args) if *e == add_key && args.len() == 6 => {
            args[0] == d && args[1..].iter().all(|a| *a != d) && const_of(func, args[4]) == Some(0)
        }
        _ => false,
    };
    // `add_scaled(d, src, m, kind, site)` into `d` in `intGroup`, `d` nowhere else.
    let added_into = |op: &Op, d: Value| match op {
        Op::CallExt(e, args) if *e == add && args.len() == 5 => {
            args[0] == d && args[1..].iter().all(|a| *a != d) && const_of(func, args[3]) == Some(0)
        }
        _ => false,
    };
    let doms = Dominators::compute(func);
    'candidates: for (new_pos, map) in fresh {
        let mut inserts = Vec::new();
        let mut addition: Option<(Pos, Value, Value)> = None;
        for &p in uses.get(&map).map(|v| v.as_slice()).unwrap_or(&[]) {
            let op = op_at(p);
            if keyed_into(op, map) {
                inserts.push(p);
                continue;
            }
            match op {
                Op::CallExt(e, args)
                    if *e == add
                        && args.len() == 5
                        && args[1] == map
                        && args[0] != map
                        && args[2..].iter().all(|a| *a != map)
                        && const_of(func, args[3]) == Some(0) =>
                {
                    if addition.is_some() {
                        continue 'candidates;
                    }
                    addition = Some((p, args[0], args[2]));
                }
                _ => continue 'candidates,
            }
        }
        let Some((add_pos, dest, scale)) = addition else { continue };
        let scale = match const_of(func, scale) {
            Some(1) => None,
            Some(n) => Some(Scale::Const(n)),
            None => Some(Scale::Value(scale)),
        };
        let available = |v: Value, at: Pos| match func.values[v].def {
            ValueDef::Param(b, _) => doms.dominates(b, at.0),
            ValueDef::Result(inst, _) => match pos[inst] {
                Some((b, i)) if b == at.0 => i < at.1,
                Some((b, _)) => doms.dominates(b, at.0),
                None => false,
            },
            ValueDef::Unused => false,
        };
        let scale_ok = |p: Pos| match scale {
            Some(Scale::Value(m)) => available(m, p),
            _ => true,
        };
        if !inserts.iter().all(|&p| available(dest, p) && scale_ok(p)) {
            continue;
        }
        let Some(region) = region(func, new_pos, add_pos) else { continue };
        if !inserts.iter().all(|&p| region.contains(p)) {
            continue;
        }
        // Inside the region the destination is only added into; elsewhere it is used only where
        // the creation cannot be reached from (so no alias of it exists in the region).
        for &p in uses.get(&dest).map(|v| v.as_slice()).unwrap_or(&[]) {
            if p == add_pos {
                continue;
            }
            let op = op_at(p);
            if region.contains(p) {
                if keyed_into(op, dest) || added_into(op, dest) {
                    continue;
                }
                continue 'candidates;
            }
            if !(keyed_into(op, dest) || added_into(op, dest)) && reaches(func, p, new_pos) {
                continue 'candidates;
            }
        }
        return Some(AccPlan { new: new_pos, add: add_pos, dest, scale, inserts });
    }
    None
}

/// Can control go from the instruction at `from` to the one at `to` (later in the same block, or
/// through at least one branch)?
fn reaches(func: &Function, from: Pos, to: Pos) -> bool {
    if from.0 == to.0 && from.1 < to.1 {
        return true;
    }
    let mut seen = FxHashSet::default();
    let mut work = successors(func, from.0);
    while let Some(b) = work.pop() {
        if b == to.0 {
            return true;
        }
        if seen.insert(b) {
            work.extend(successors(func, b));
        }
    }
    false
}

fn apply_accumulator(func: &mut Function, plan: AccPlan) {
    let inst_at = |func: &Function, (b, i): Pos| func.blocks[b].insts[i];
    let new_inst = inst_at(func, plan.new);
    let add_inst = inst_at(func, plan.add);
    // Later positions first: instructions are inserted before the additions.
    let mut inserts = plan.inserts.clone();
    inserts.sort_by_key(|p| std::cmp::Reverse((p.0.index(), p.1)));
    for p in inserts {
        let inst = inst_at(func, p);
        let Op::CallExt(e, args) = func.insts[inst].op.clone() else { continue };
        let push = |func: &mut Function, at: usize, op: Op| {
            let ci = func.insts.push(InstData { op, results: Vec::new() });
            let v = func.values.push(ValueData { ty: Type::I64, def: ValueDef::Result(ci, 0) });
            func.insts[ci].results.push(v);
            func.blocks[p.0].insts.insert(at, ci);
            v
        };
        // The amount `s·m`, wrapping like the unfused `imul`s.
        let amount = match plan.scale {
            None => args[3],
            Some(Scale::Const(n)) => {
                let m = push(func, p.1, Op::Iconst(n));
                push(func, p.1 + 1, Op::Binary(BinaryOp::Imul, args[3], m))
            }
            Some(Scale::Value(m)) => push(func, p.1, Op::Binary(BinaryOp::Imul, args[3], m)),
        };
        func.insts[inst].op = Op::CallExt(e, vec![plan.dest, args[1], args[2], amount, args[4], args[5]]);
    }
    for inst in [add_inst, new_inst] {
        for &b in &func.layout {
            func.blocks[b].insts.retain(|i| *i != inst);
        }
    }
    // The creation's result is gone from every use; leave its instruction orphaned and inert.
    func.insts[new_inst] = InstData { op: Op::Null, results: func.insts[new_inst].results.clone() };
    func.insts[add_inst] = InstData { op: Op::Null, results: Vec::new() };
}

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

use crate::ir::{Block, ExtFuncId, Function, Inst, InstData, Module, Op, Value};

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

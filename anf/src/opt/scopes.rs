//! Compaction scopes of loops that allocate nothing once optimised (`lower::compact`).
//!
//! Lowering gives a loop a mark and compaction checks when its body may allocate; inlining and
//! forwarding often remove every allocation (a partial application's environment, a record
//! read back at once). A mark whose checks no allocating instruction can precede — no path from
//! the mark to one of its checks, not passing through a check, meets an instruction that may
//! allocate (directly or through a call) — becomes a constant and its checks `false`; the
//! simplifier run after it folds the branches and removes the copying code, so the loop runs with
//! no call into the runtime.

use rustc_hash::{FxHashMap, FxHashSet};

use super::simplify::PURE_SUPPORT;
use crate::ir::cfg::successors;
use crate::ir::{Block, FuncId, Inst, Module, Op};

/// Does `op` allocate (arena memory, bags or maps), or call code that may? The compaction calls
/// themselves do not count: their slot is freed with the memory of the loop around them.
fn allocates(module: &Module, op: &Op, memo: &mut FxHashMap<FuncId, bool>) -> bool {
    match op {
        Op::Alloc(_) | Op::NewArray(..) => true,
        Op::CallExt(e, _) => {
            let name = module.externs[*e].name.as_str();
            // The pure support functions allocate nothing; nor does `nabla_map_get`, which only
            // writes the value it finds through its pointer argument.
            !(PURE_SUPPORT.contains(&name) || name == "nabla_map_get") && !name.starts_with("nabla_arena_")
        }
        Op::Call(g, _) => function_allocates(module, *g, memo),
        _ => false,
    }
}

/// Does function `g` allocate? (A function on a call cycle counts as allocating.)
fn function_allocates(module: &Module, g: FuncId, memo: &mut FxHashMap<FuncId, bool>) -> bool {
    if let Some(a) = memo.get(&g) {
        return *a;
    }
    memo.insert(g, true);
    let f = &module.funcs[g];
    let ops: Vec<&Op> = f.layout.iter().flat_map(|b| &f.blocks[*b].insts).map(|i| &f.insts[*i].op).collect();
    let a = ops.into_iter().any(|op| allocates(module, op, memo));
    memo.insert(g, a);
    a
}

/// Drops the idle scopes of function `f`; true if anything changed.
pub(super) fn drop_idle(module: &mut Module, f: FuncId, memo: &mut FxHashMap<FuncId, bool>) -> bool {
    let func = &module.funcs[f];
    let name_of = |op: &Op| match op {
        Op::CallExt(e, args) => Some((module.externs[*e].name.as_str(), args.first().copied())),
        _ => None,
    };
    let mut pos: FxHashMap<Inst, (Block, usize)> = FxHashMap::default();
    let mut marks = Vec::new();
    for &b in &func.layout {
        for (k, &i) in func.blocks[b].insts.iter().enumerate() {
            pos.insert(i, (b, k));
            if matches!(name_of(&func.insts[i].op), Some(("nabla_arena_mark", _))) {
                marks.push(i);
            }
        }
    }
    // The checks of each mark, and every block's predecessors, found once for all marks.
    let mut begins_of: FxHashMap<crate::ir::Value, FxHashSet<Inst>> = FxHashMap::default();
    for &i in pos.keys() {
        if let Some(("nabla_arena_compact_begin" | "nabla_arena_scope_begin", Some(mv))) = name_of(&func.insts[i].op) {
            begins_of.entry(mv).or_default().insert(i);
        }
    }
    let mut preds: FxHashMap<Block, Vec<Block>> = FxHashMap::default();
    if !marks.is_empty() {
        for &b in &func.layout {
            for s in successors(func, b) {
                preds.entry(s).or_default().push(b);
            }
        }
    }
    let mut idle = Vec::new();
    for m in marks {
        let Some(&mv) = func.insts[m].results.first() else { continue };
        let begins = begins_of.remove(&mv).unwrap_or_default();
        // Blocks from which a check can be reached: an allocation matters only on the way
        // from the mark to a check (not after the loop).
        let mut reach: FxHashSet<Block> = begins.iter().map(|i| pos[i].0).collect();
        // Not through the mark: a path that passes it again starts the scope anew.
        let (b0, k0) = pos[&m];
        let mut back: Vec<Block> = reach.iter().copied().filter(|b| *b != b0).collect();
        while let Some(b) = back.pop() {
            if b == b0 {
                continue;
            }
            for &p in preds.get(&b).map(Vec::as_slice).unwrap_or(&[]) {
                if reach.insert(p) {
                    back.push(p);
                }
            }
        }
        let mut seen: FxHashSet<Block> = FxHashSet::default();
        let mut work = vec![(b0, k0 + 1)];
        let mut busy = false;
        'walk: while let Some((b, k)) = work.pop() {
            let mut allocated = false;
            let mut stopped = false;
            for &i in &func.blocks[b].insts[k..] {
                if begins.contains(&i) || i == m {
                    stopped = true;
                    break;
                }
                allocated |= allocates(module, &func.insts[i].op, memo);
            }
            let at_check = stopped && func.blocks[b].insts[k..].iter().any(|i| begins.contains(i));
            if allocated && (at_check || (!stopped && reach.contains(&b))) {
                busy = true;
                break 'walk;
            }
            if stopped {
                continue;
            }
            for s in successors(func, b) {
                if seen.insert(s) {
                    work.push((s, 0));
                }
            }
        }
        if !busy {
            idle.push((m, begins));
        }
    }
    let changed = !idle.is_empty();
    let func = &mut module.funcs[f];
    for (m, begins) in idle {
        func.insts[m].op = Op::Iconst(0);
        for b in begins {
            func.insts[b].op = Op::Bconst(false);
        }
    }
    changed
}

//! Folds whose result cannot depend on the order they visit a bag's entries iterate them in the
//! bag's storage order (`nabla_bag_entries_unordered`), skipping the sort.
//!
//! Both engines visit bag entries in sorted key order, so that Real sums, user groups and the
//! first error agree bit for bit. A loop over the entries may take them in any order when
//! nothing in it can tell the difference:
//! - no instruction in the loop can fail with a language error (no trap, bounds check,
//!   division by a possibly-zero value, array allocation, call of an IR function, or support
//!   function outside a known set of bag operations and pure math) — so the first error, if
//!   any, is raised elsewhere;
//! - every value carried from one iteration to the next is either unchanged or an `i64` sum
//!   `acc + t` whose only use in the loop is that addition (wrapping addition is associative and
//!   commutative; nothing else is, Real addition in particular);
//! - bags changed in the loop are not read in it (bag addition commutes), unless they are made
//!   in the same iteration; maps are changed only by adding an Int to a key
//!   (`nabla_map_add_scaled_key` in `intGroup`: wrapping addition, which cannot fail) and not
//!   read in the loop;
//! - records the loop writes are read only by support calls in the same block after every slot
//!   was written there (scratch keys), never by loads.
//!
//! Then every iteration order gives the same carried values, bags and result. (Bag additions
//! check their multiplicities: an intermediate sum that leaves Int's range and comes back may
//! overflow in one order and not another; a final multiplicity out of range does in every order,
//! with the same message and site — docs/language.md §8.)

use rustc_hash::{FxHashMap, FxHashSet};

use crate::ir::cfg::successor;
use crate::ir::{BinaryOp, Block, Cmp, ExtFuncId, Function, Inst, Module, Op, Value, ValueDef};

/// Support functions with bag effects a loop may call and stay order-insensitive (the effects
/// are checked separately); pure ones (`simplify::PURE_SUPPORT`) are allowed too.
const BAG_EFFECTS: &[&str] = &[
    "nabla_bag_new",
    "nabla_bag_insert",
    "nabla_bag_insert_scaled",
    "nabla_mul_checked",
    "nabla_bag_add_scaled",
    "nabla_bag_add_into",
    "nabla_bag_entries",
    "nabla_bag_entries_unordered",
];

/// Rewrites the entry calls of order-insensitive loops of `func`; true if any changed.
pub(super) fn relax(module: &mut Module, func: &mut Function) -> bool {
    let Some(sorted) = module.extern_by_name("nabla_bag_entries") else { return false };
    let mut targets = Vec::new();
    for &b in &func.layout {
        for &i in &func.blocks[b].insts {
            if let Op::CallExt(e, _) = &func.insts[i].op {
                if *e == sorted && insensitive_consumer(module, func, i) {
                    targets.push(i);
                }
            }
        }
    }
    if targets.is_empty() {
        return false;
    }
    let Some(unordered) = module.declare_support("nabla_bag_entries_unordered") else { return false };
    for i in targets {
        if let Op::CallExt(e, _) = &mut func.insts[i].op {
            *e = unordered;
        }
    }
    true
}

/// The operation defining `v`, if an instruction does.
fn def_op(f: &Function, v: Value) -> Option<&Op> {
    match f.values.get(v)?.def {
        ValueDef::Result(i, _) => Some(&f.insts.get(i)?.op),
        _ => None,
    }
}

/// Is the entry array made by `call` only read by one counted loop that cannot observe the
/// order of the entries?
fn insensitive_consumer(module: &Module, func: &Function, call: Inst) -> bool {
    let Some(&entries) = func.insts[call].results.first() else { return false };
    // Every use of the array: its length, or an element address indexed by one loop's counter.
    let mut counter: Option<Value> = None;
    for &b in &func.layout {
        for &i in &func.blocks[b].insts {
            let op = &func.insts[i].op;
            let mut used = false;
            op.for_each_operand(|v| used |= v == entries);
            if !used {
                continue;
            }
            match op {
                Op::ArrayLen(a) if *a == entries => {}
                Op::ElemAddr(a, idx, _) if *a == entries && *idx != entries => match counter {
                    None => counter = Some(*idx),
                    Some(c) if c == *idx => {}
                    Some(_) => return false,
                },
                _ => return false,
            }
        }
    }
    let Some(counter) = counter else { return false };
    let ValueDef::Param(header, 0) = func.values[counter].def else { return false };
    let Some(lp) = Loop::find(func, header, counter, entries) else { return false };
    lp.carried_are_reductions(func) && lp.body_is_order_free(module, func)
}

/// A counted loop over an entry array.
struct Loop {
    header: Block,
    blocks: FxHashSet<Block>,
    /// The one block that jumps back to the header.
    latch: Block,
}

impl Loop {
    /// The loop whose header `header` counts `counter` up to the length of `entries`.
    fn find(func: &Function, header: Block, counter: Value, entries: Value) -> Option<Loop> {
        let Some(Op::Brif(cond, body, _exit)) = func.terminator(header) else { return None };
        let Some(Op::Icmp(Cmp::Lt, c, n)) = def_op(func, *cond) else { return None };
        if *c != counter || !matches!(def_op(func, *n), Some(Op::ArrayLen(a)) if *a == entries) {
            return None;
        }
        // The blocks reachable from the body without passing the header; each must lead back
        // to the header or stay inside (no other exit, no return).
        let mut blocks = FxHashSet::default();
        let mut latches = Vec::new();
        let mut work = vec![body.block];
        while let Some(b) = work.pop() {
            if b == header || !blocks.insert(b) {
                continue;
            }
            if matches!(func.terminator(b), Some(Op::Return(_)) | None) {
                return None;
            }
            let mut k = 0;
            while let Some(s) = successor(func, b, k) {
                if s == header {
                    latches.push(b);
                }
                work.push(s);
                k += 1;
            }
        }
        blocks.insert(header);
        let [latch] = latches.as_slice() else { return None };
        // The counter steps by one.
        let Some(Op::Jump(back)) = func.terminator(*latch) else { return None };
        let step = back.args.first()?;
        let one = |v: &Value| matches!(def_op(func, *v), Some(Op::Iconst(1)));
        match def_op(func, *step) {
            Some(Op::Binary(BinaryOp::Iadd, a, b)) if (*a == counter && one(b)) || (*b == counter && one(a)) => {}
            _ => return None,
        }
        Some(Loop { header, blocks, latch: *latch })
    }

    /// Uses of `v` in the loop's instructions: `(block, instruction)`.
    fn uses(&self, func: &Function, v: Value) -> Vec<(Block, Inst)> {
        let mut out = Vec::new();
        for &b in &self.blocks {
            for &i in &func.blocks[b].insts {
                let mut n = 0;
                func.insts[i].op.for_each_operand(|x| n += (x == v) as usize);
                out.extend(std::iter::repeat_n((b, i), n));
            }
        }
        out
    }

    /// Every carried value other than the counter is unchanged or an `i64` sum.
    fn carried_are_reductions(&self, func: &Function) -> bool {
        let params = &func.blocks[self.header].params;
        let Some(Op::Jump(back)) = func.terminator(self.latch) else { return false };
        let back_inst = *func.blocks[self.latch].insts.last().expect("the latch has its jump");
        let header_term = *func.blocks[self.header].insts.last().expect("the header has its branch");
        for (k, &p) in params.iter().enumerate().skip(1) {
            let next = back.args[k];
            if next == p {
                continue;
            }
            let Some(Op::Binary(BinaryOp::Iadd, a, b)) = def_op(func, next) else { return false };
            if *a != p && *b != p {
                return false;
            }
            let ValueDef::Result(add, _) = func.values[next].def else { return false };
            // `p` is read by the addition (and passed out of the loop by the header's branch);
            // the sum only goes back to the header.
            let p_uses = self.uses(func, p);
            if !p_uses.iter().all(|&(_, i)| i == add || i == header_term)
                || p_uses.iter().filter(|u| u.1 == add).count() != 1
            {
                return false;
            }
            let sum_uses = self.uses(func, next);
            if sum_uses.len() != 1 || sum_uses[0].1 != back_inst {
                return false;
            }
        }
        true
    }

    /// Nothing in the loop can fail, and its effects commute.
    fn body_is_order_free(&self, module: &Module, func: &Function) -> bool {
        let name = |e: ExtFuncId| module.externs.get(e).map(|x| x.name.as_str()).unwrap_or("");
        let is_alloc = |v: Value| matches!(def_op(func, v), Some(Op::Alloc(_)));
        let defined_in_loop = |v: Value| match func.values[v].def {
            ValueDef::Result(i, _) => self.blocks.iter().any(|b| func.blocks[*b].insts.contains(&i)),
            ValueDef::Param(b, _) => self.blocks.contains(&b),
            ValueDef::Unused => false,
        };
        // Records written in the loop, and bags changed and read in it.
        let mut written: FxHashSet<Value> = FxHashSet::default();
        let mut changed: FxHashSet<Value> = FxHashSet::default();
        let mut read: FxHashSet<Value> = FxHashSet::default();
        for &b in &self.blocks {
            for &i in &func.blocks[b].insts {
                match &func.insts[i].op {
                    Op::Store(_, p, _) => {
                        if !is_alloc(*p) {
                            return false;
                        }
                        written.insert(*p);
                    }
                    Op::CallExt(e, args) => match name(*e) {
                        "nabla_bag_insert" | "nabla_bag_insert_scaled" => {
                            changed.insert(args[0]);
                        }
                        "nabla_bag_add_scaled" | "nabla_bag_add_into" => {
                            changed.insert(args[0]);
                            read.insert(args[1]);
                        }
                        "nabla_bag_entries" | "nabla_bag_entries_unordered" | "nabla_bag_len" | "nabla_bag_count" => {
                            read.insert(args[0]);
                        }
                        "nabla_bag_eq" => {
                            read.insert(args[0]);
                            read.insert(args[1]);
                        }
                        // `dst ⊕ m·{key -> value}` in `mapGroup intGroup`.
                        "nabla_map_add_scaled_key" if matches!(def_op(func, args[4]), Some(Op::Iconst(0))) => {
                            changed.insert(args[0]);
                        }
                        "nabla_map_len" => {
                            read.insert(args[0]);
                        }
                        n if BAG_EFFECTS.contains(&n) || super::simplify::PURE_SUPPORT.contains(&n) => {}
                        _ => return false,
                    },
                    Op::Trap(..) | Op::BoundsCheck(..) | Op::NewArray(..) | Op::Call(..) | Op::Return(_) => {
                        return false
                    }
                    Op::Binary(BinaryOp::Sdiv | BinaryOp::Srem, _, y) if !matches!(def_op(func, *y), Some(Op::Iconst(q)) if *q != 0) => {
                        return false
                    }
                    _ => {}
                }
            }
        }
        if changed.iter().any(|bag| read.contains(bag) && !matches!(def_op(func, *bag), Some(Op::CallExt(e, _)) if name(*e) == "nabla_bag_new" && defined_in_loop(*bag)))
        {
            return false;
        }
        // Written records: never loaded in the loop; a support call reading one comes after a
        // store to each of its slots in the same block.
        for &b in &self.blocks {
            let insts = &func.blocks[b].insts;
            let mut slots: FxHashMap<Value, FxHashSet<i32>> = FxHashMap::default();
            for &i in insts {
                match &func.insts[i].op {
                    Op::Load(_, p, _) if written.contains(p) => return false,
                    Op::Store(v, p, off) => {
                        if written.contains(v) {
                            return false;
                        }
                        slots.entry(*p).or_default().insert(*off);
                    }
                    Op::CallExt(_, args) => {
                        for a in args.iter().filter(|a| written.contains(a)) {
                            let Some(Op::Alloc(bytes)) = def_op(func, *a) else { return false };
                            let full = (0..(*bytes as i32 + 7) / 8)
                                .all(|k| slots.get(a).is_some_and(|s| s.contains(&(8 * k))));
                            if !full {
                                return false;
                            }
                        }
                    }
                    op => {
                        // Any other use of a written record (passed on, stored) is not understood.
                        let mut other = false;
                        op.for_each_operand(|v| other |= written.contains(&v));
                        if other && !matches!(op, Op::Load(..)) {
                            return false;
                        }
                    }
                }
            }
        }
        true
    }
}

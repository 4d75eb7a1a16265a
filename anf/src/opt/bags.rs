//! Bag fusion: a fresh bag that is filled by inserts and then added, once, into another bag
//! (`flatMapBag`'s step, `bagGroup` folds) is never built — its inserts go straight into the
//! destination, each multiplicity times the step's scale.
//!
//! After inlining, `flatMapBag (fun a -> mapBag g xs) ys` is a loop that makes a bag per element
//! of `ys`, fills it, and adds it scaled into the accumulator. Adding `Σ n·k` scaled by `m` is
//! adding each `k` with multiplicity `n·m` (`nabla_bag_insert_scaled`, which checks the product),
//! and bag addition commutes, so inserting into the destination directly gives the same bag,
//! provided
//! - every path from the fresh bag's creation reaches the one addition (or fails: a failure ends
//!   the whole call, and no partial state is observed), and the addition cannot run twice for
//!   one creation;
//! - nothing reads the destination in between (its only uses there are further additions);
//! - the destination and the scale are available where the inserts are.
//!
//! Multiplicities are checked, not wrapped. The products are made in the unfused order, each at
//! its own site (a fused insert's `n·m` at the addition's; an already scaled insert's `n·m0` at
//! its own, by `nabla_mul_checked`, then times the new scale), and a sum at the addition's site
//! (a constant site is made again before each insert). The fused form sums in a different order, so an intermediate sum that leaves Int's range and comes
//! back (docs/language.md §8) may be reported by one form and not the other; a final
//! multiplicity out of range is reported by both.

use rustc_hash::FxHashSet;

use crate::ir::cfg::{successors, Dominators};
use crate::ir::entity::SecondaryMap;
use crate::ir::{Block, EntityRef, ExtFuncId, Function, Inst, InstData, Module, Op, Type, Value, ValueData, ValueDef};

/// The support functions fusion reasons about.
struct Names {
    new: Option<ExtFuncId>,
    insert: Option<ExtFuncId>,
    insert_scaled: Option<ExtFuncId>,
    mul_checked: Option<ExtFuncId>,
    add_scaled: Option<ExtFuncId>,
    add_into: Option<ExtFuncId>,
}

impl Names {
    fn of(module: &Module) -> Names {
        Names {
            new: module.extern_by_name("nabla_bag_new"),
            insert: module.extern_by_name("nabla_bag_insert"),
            insert_scaled: module.extern_by_name("nabla_bag_insert_scaled"),
            mul_checked: module.extern_by_name("nabla_mul_checked"),
            add_scaled: module.extern_by_name("nabla_bag_add_scaled"),
            add_into: module.extern_by_name("nabla_bag_add_into"),
        }
    }
    fn is(&self, e: ExtFuncId, which: Option<ExtFuncId>) -> bool {
        which == Some(e)
    }
    /// Is this a use of `d` as the destination of an accumulation (not a read)?
    fn accumulates_into(&self, op: &Op, d: Value) -> bool {
        match op {
            Op::CallExt(e, args) if self.is(*e, self.insert) || self.is(*e, self.insert_scaled) => {
                args[0] == d && args[1..].iter().all(|a| *a != d)
            }
            Op::CallExt(e, args) if self.is(*e, self.add_scaled) => args[0] == d && args[1] != d && args[2] != d,
            Op::CallExt(e, args) if self.is(*e, self.add_into) => args[0] == d && args[1] != d,
            _ => false,
        }
    }
}

/// Where an instruction is: block and index in it.
pub(super) type Pos = (Block, usize);

/// Fuses every fusable fresh bag of `func`; true if anything changed.
pub(super) fn fuse(module: &mut Module, func: &mut Function) -> bool {
    let mut names = Names::of(module);
    if names.new.is_none() || (names.add_scaled.is_none() && names.add_into.is_none()) {
        return false;
    }
    let mut changed = false;
    // Each fusion may enable the next (the destination becomes a fresh bag with inserts only).
    for _ in 0..64 {
        let Some(plan) = find(&names, func) else { break };
        if plan.scale.is_some() && names.insert_scaled.is_none() {
            names.insert_scaled = module.declare_support("nabla_bag_insert_scaled");
            if names.insert_scaled.is_none() {
                break;
            }
        }
        if plan.scale.is_some() && plan.scaled_inserts && names.mul_checked.is_none() {
            names.mul_checked = module.declare_support("nabla_mul_checked");
            if names.mul_checked.is_none() {
                break;
            }
        }
        apply(&names, func, plan);
        changed = true;
    }
    changed
}

struct Plan {
    new: Pos,
    add: Pos,
    dest: Value,
    scale: Option<Value>,
    /// The addition's site: where a fused insert reports an overflow.
    site: Value,
    /// The site's constant, when it is one (then made again before each insert, which it need
    /// not dominate).
    site_const: Option<i64>,
    /// Are some inserts scaled already (their factor times the addition's scale is then made
    /// with `nabla_mul_checked` before the insert)?
    scaled_inserts: bool,
    inserts: Vec<Pos>,
}

fn find(names: &Names, func: &Function) -> Option<Plan> {
    // Most functions make no bag: look before building anything.
    let makes_bags = func
        .layout
        .iter()
        .flat_map(|b| &func.blocks[*b].insts)
        .any(|i| matches!(&func.insts[*i].op, Op::CallExt(e, _) if names.is(*e, names.new)));
    if !makes_bags {
        return None;
    }
    let mut pos: SecondaryMap<Inst, Option<Pos>> = SecondaryMap::sized(func.insts.len());
    let mut uses: rustc_hash::FxHashMap<Value, Vec<Pos>> = rustc_hash::FxHashMap::default();
    let mut fresh = Vec::new();
    for &b in &func.layout {
        for (i, &inst) in func.blocks[b].insts.iter().enumerate() {
            pos[inst] = Some((b, i));
            let op = &func.insts[inst].op;
            op.for_each_operand(|v| uses.entry(v).or_default().push((b, i)));
            if let Op::CallExt(e, _) = op {
                if names.is(*e, names.new) {
                    fresh.push(((b, i), func.insts[inst].results[0]));
                }
            }
        }
    }
    if fresh.is_empty() {
        return None;
    }
    let doms = Dominators::compute(func);
    let op_at = |(b, i): Pos| &func.insts[func.blocks[b].insts[i]].op;
    'candidates: for (new, bag) in fresh {
        let mut inserts = Vec::new();
        let mut add: Option<(Pos, Value, Option<Value>, Value)> = None;
        let mut scaled_inserts = false;
        for &p in uses.get(&bag).map(|v| v.as_slice()).unwrap_or(&[]) {
            match op_at(p) {
                Op::CallExt(e, args) if names.is(*e, names.insert) && args[0] == bag && args[1] != bag => {
                    inserts.push(p)
                }
                Op::CallExt(e, args)
                    if names.is(*e, names.insert_scaled) && args[0] == bag && args[1..].iter().all(|a| *a != bag) =>
                {
                    scaled_inserts = true;
                    inserts.push(p)
                }
                Op::CallExt(e, args)
                    if (names.is(*e, names.add_scaled) || names.is(*e, names.add_into))
                        && args[1] == bag
                        && args[0] != bag
                        && args.get(2) != Some(&bag) =>
                {
                    if add.is_some() {
                        continue 'candidates;
                    }
                    // `add_scaled(dst, src, m, site)`, `add_into(dst, src, site)`.
                    let scale = if names.is(*e, names.add_scaled) { Some(args[2]) } else { None };
                    let Some(&site) = args.last() else { continue 'candidates };
                    add = Some((p, args[0], scale, site));
                }
                _ => continue 'candidates,
            }
        }
        let Some((add_pos, dest, scale, site)) = add else { continue };
        // The destination and the scale must be available at every insert.
        let available = |v: Value, at: Pos| match func.values[v].def {
            ValueDef::Param(b, _) => doms.dominates(b, at.0),
            ValueDef::Result(inst, _) => match pos[inst] {
                Some((b, i)) if b == at.0 => i < at.1,
                Some((b, _)) => doms.dominates(b, at.0),
                None => false,
            },
            ValueDef::Unused => false,
        };
        let site_const = match func.values[site].def {
            ValueDef::Result(inst, 0) => match func.insts[inst].op {
                Op::Iconst(n) => Some(n),
                _ => None,
            },
            _ => None,
        };
        let site_ok = |p: Pos| site_const.is_some() || available(site, p);
        if !inserts.iter().all(|&p| available(dest, p) && site_ok(p) && scale.is_none_or(|m| available(m, p))) {
            continue;
        }
        // The region: after the creation, up to the addition.
        let Some(region) = region(func, new, add_pos) else { continue };
        let inside = |p: Pos| region.contains(p);
        if !inserts.iter().all(|&p| inside(p)) {
            continue;
        }
        // Nothing reads the destination inside the region.
        for &p in uses.get(&dest).map(|v| v.as_slice()).unwrap_or(&[]) {
            if p != add_pos && inside(p) && !names.accumulates_into(op_at(p), dest) {
                continue 'candidates;
            }
        }
        return Some(Plan { new, add: add_pos, dest, scale, site, site_const, scaled_inserts, inserts });
    }
    None
}

/// The instructions strictly between a creation and an addition, when every path from the
/// creation reaches the addition (or fails) and the addition cannot run again without a new
/// creation first.
pub(super) struct Region {
    /// Whole blocks.
    blocks: FxHashSet<Block>,
    /// The creation's block from this index on (exclusive of the creation).
    first: Pos,
    /// The addition's block before this index.
    last: Pos,
}

impl Region {
    pub(super) fn contains(&self, (b, i): Pos) -> bool {
        if self.first.0 == self.last.0 {
            return b == self.first.0 && i > self.first.1 && i < self.last.1;
        }
        (b == self.first.0 && i > self.first.1) || (b == self.last.0 && i < self.last.1) || self.blocks.contains(&b)
    }
}

pub(super) fn region(func: &Function, new: Pos, add: Pos) -> Option<Region> {
    let (x, y) = (new.0, add.0);
    let ends_with_return = |b: Block| matches!(func.terminator(b), Some(Op::Return(_)));
    if x == y {
        if new.1 >= add.1 {
            return None;
        }
        return Some(Region { blocks: FxHashSet::default(), first: new, last: add });
    }
    // Blocks reachable from the creation without passing the addition's block.
    let mut blocks = FxHashSet::default();
    let mut work = successors(func, x);
    let mut reached_add = false;
    while let Some(b) = work.pop() {
        if b == y {
            reached_add = true;
            continue;
        }
        if b == x {
            // Back to the creation before the addition: a second bag would be made.
            return None;
        }
        if blocks.insert(b) {
            if ends_with_return(b) {
                return None;
            }
            work.extend(successors(func, b));
        }
    }
    if !reached_add || ends_with_return(x) {
        return None;
    }
    // After the addition, no way back into the region (or to the addition) without a new bag.
    let mut seen = FxHashSet::default();
    let mut work = successors(func, y);
    while let Some(b) = work.pop() {
        if b == x {
            continue;
        }
        if b == y || blocks.contains(&b) {
            return None;
        }
        if seen.insert(b) {
            work.extend(successors(func, b));
        }
    }
    Some(Region { blocks, first: new, last: add })
}

fn apply(names: &Names, func: &mut Function, plan: Plan) {
    let inst_at = |func: &Function, (b, i): Pos| func.blocks[b].insts[i];
    let new_inst = inst_at(func, plan.new);
    let add_inst = inst_at(func, plan.add);
    // Rewrite the inserts in place: `insert(bag, key, n, _)` becomes `insert(dest, key, n, site)`,
    // or `insert_scaled(dest, key, n, m, site)` when the addition scales by `m`; a scaled insert
    // (only met when the addition does not scale) keeps its factor.
    // A constant site is made again before each insert (positions shift: later ones first).
    let mut inserts = plan.inserts.clone();
    inserts.sort_by_key(|p| std::cmp::Reverse((p.0.index(), p.1)));
    for p in inserts {
        let inst = inst_at(func, p);
        let Op::CallExt(e, args) = func.insts[inst].op.clone() else { continue };
        let site = match plan.site_const {
            Some(n) => {
                let ci = func.insts.push(InstData { op: Op::Iconst(n), results: Vec::new() });
                let v = func.values.push(ValueData { ty: Type::I64, def: ValueDef::Result(ci, 0) });
                func.insts[ci].results.push(v);
                func.blocks[p.0].insts.insert(p.1, ci);
                v
            }
            None => plan.site,
        };
        let rescaled = names.is(e, names.insert_scaled);
        func.insts[inst].op = match (plan.scale, names.insert_scaled, names.mul_checked) {
            // `insert_scaled(b, k, n, m0, s)` added scaled by `m`: the products in the unfused
            // order, each checked at its own site — `p = n·m0` at `s`, then `p·m` at the addition's.
            (Some(m), Some(scaled), Some(mul)) if rescaled => {
                let pi = func
                    .insts
                    .push(InstData { op: Op::CallExt(mul, vec![args[2], args[3], args[4]]), results: Vec::new() });
                let v = func.values.push(ValueData { ty: Type::I64, def: ValueDef::Result(pi, 0) });
                func.insts[pi].results.push(v);
                let at = func.blocks[p.0].insts.iter().position(|i| *i == inst).unwrap_or(p.1);
                func.blocks[p.0].insts.insert(at, pi);
                Op::CallExt(scaled, vec![plan.dest, args[1], v, m, site])
            }
            (Some(m), Some(scaled), _) => Op::CallExt(scaled, vec![plan.dest, args[1], args[2], m, site]),
            // Its product belongs to its own site.
            _ if rescaled => Op::CallExt(e, vec![plan.dest, args[1], args[2], args[3], args[4]]),
            _ => Op::CallExt(e, vec![plan.dest, args[1], args[2], site]),
        };
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

//! Local clean-up of one function, repeated until nothing changes: unreachable blocks go, block
//! parameters that always receive the same value are replaced by it (copy propagation), and so are
//! parameters that always equal an earlier one of their block (induction variables in step), constant
//! operations and branches fold, loads from fresh records read the value stored there, a jump to
//! a block with no other predecessor merges the two, empty forwarding blocks whose parameters
//! nothing else reads are bypassed, and instructions whose results nobody uses and that cannot
//! fail disappear. The function is then renumbered densely in layout order.
//!
//! # Forwarding through records
//! A load from `p + off`, where `p` is an `alloc` of this function, is replaced by the value of
//! the only store to `p + off` in the function when that store dominates the load: every path to
//! the load passes the store after the allocation, and the stored value's latest definition is
//! the one the store wrote. Nothing else may write there, which is checked **per allocation**:
//! every write of the module (a store, a call, a support function writing through an argument,
//! [`WRITES_THROUGH`]) has a target that is a record or array element its function made, a
//! parameter of its function (the callers' summary: [`ModuleFacts`] knows, per function and
//! parameter, whether a call may write through it), or something else ([`ModuleFacts::
//! unknown_writes`]). A record `p` is forwarded when it is never passed where a call or support
//! function writes through it, is never the base of an element address, and — if some write in
//! the module has an unknown target — never escapes at all (is only loaded from and stored
//! into). Lowering builds records once, where they are made, so in compiled programs every
//! record is forwarded.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::ir::cfg::{reverse_postorder, successor, Dominators};
use crate::ir::entity::SecondaryMap;
use crate::ir::{
    BinaryOp, Block, BlockCall, BlockData, Cmp, EntityRef, FuncId, Function, Inst, InstData, Module, Op, UnaryOp,
    Value, ValueData, ValueDef,
};

use super::inline::map_operands;

/// Support functions that write through pointer arguments: `(name, argument index)`.
pub const WRITES_THROUGH: &[(&str, usize)] = &[("nabla_map_get", 2)];

/// Support functions returning addresses that are never a record's: writes through them are
/// known not to touch records (`nabla_arena_map_slot`: a map's value, in the runtime's memory).
const OWN_MEMORY: &[&str] = &["nabla_arena_map_slot"];

/// Support functions without effects (neither failing nor writing): unused calls are removed.
pub(super) const PURE_SUPPORT: &[&str] = &[
    "nabla_sin",
    "nabla_cos",
    "nabla_tan",
    "nabla_exp",
    "nabla_log",
    "nabla_tanh",
    "nabla_sigmoid",
    "nabla_pow",
    "nabla_floor",
    "nabla_round",
    "nabla_to_int",
    "nabla_bag_len",
    "nabla_bag_count",
    "nabla_bag_eq",
    "nabla_map_len",
];

/// What simplification needs to know about the module as a whole.
pub struct ModuleFacts {
    /// Some write (a store, a call writing through a parameter, a support function writing
    /// through an argument) targets an address that is neither a record or array element its
    /// function allocated nor a parameter of its function: a record that escapes (is stored,
    /// returned, joined, passed on) might be written there. See the module comment.
    pub unknown_writes: bool,
    /// Per function, per parameter: may a call write through the pointer passed there (directly
    /// or through its callees)?
    writes_param: Vec<Vec<bool>>,
    /// Per extern: the pointer arguments it writes through.
    writes: Vec<Vec<usize>>,
    /// Per extern: has no effect but its result.
    pure: Vec<bool>,
}

/// Where a written address comes from, in its function.
enum Target {
    /// A record (`alloc`) or an array element (`elem_addr`) the function made, or a map's value
    /// slot ([`OWN_MEMORY`]).
    Own,
    /// Parameter `k` of the function.
    Param(usize),
    /// Anything else (a pointer loaded from memory, returned by a call, a block parameter…).
    Unknown,
}

fn target(module: &Module, f: &Function, params: &[Value], p: Value) -> Target {
    match def_op(f, p) {
        // A value slot of a map (Rust memory, never a record), which compaction updates.
        Some(Op::CallExt(e, _)) if OWN_MEMORY.contains(&module.externs[*e].name.as_str()) => Target::Own,
        // Forwarding reads records (`alloc`s) only, and arrays are never records (an
        // `elem_addr` into a record disqualifies it: `forwardable_loads`). Reverse mode's
        // accumulators and tapes are updated in place this way (`accAdd'`, `tapeSet'`) by
        // functions that did not allocate them; ARCHITECTURE.md ("Memory regions") states the
        // rule.
        Some(Op::Alloc(_) | Op::ElemAddr(..)) => Target::Own,
        _ => match params.iter().position(|q| *q == p) {
            Some(k) => Target::Param(k),
            None => Target::Unknown,
        },
    }
}

impl ModuleFacts {
    /// Has extern `e` no effect but its result (a `PURE_SUPPORT` function that cannot fail)?
    pub fn pure_extern(&self, e: crate::ir::ExtFuncId) -> bool {
        self.pure.get(e.index()).copied().unwrap_or(false)
    }

    /// The facts of `module` as it is now. Inlining and simplification keep them true: they
    /// only make an address's origin more precise (a parameter becomes the caller's value, a
    /// block parameter the value it always receives), never less.
    pub fn of(module: &Module) -> ModuleFacts {
        let writes: Vec<Vec<usize>> = module
            .externs
            .values()
            .map(|e| WRITES_THROUGH.iter().filter(|(n, _)| *n == e.name).map(|(_, i)| *i).collect())
            .collect();
        let pure = module.externs.values().map(|e| PURE_SUPPORT.contains(&e.name.as_str()) && !e.fallible).collect();
        let n = module.funcs.len();
        let mut facts = ModuleFacts {
            unknown_writes: false,
            writes_param: module.funcs.values().map(|f| vec![false; f.sig.params.len()]).collect(),
            writes,
            pure,
        };
        // Parameters written through, to a fixpoint over the calls; then whether any write
        // has an unknown target.
        loop {
            let mut changed = false;
            for (g, f) in module.funcs.iter() {
                let params = f.entry().map(|b| f.blocks[b].params.clone()).unwrap_or_default();
                for (p, _) in facts.written(f) {
                    if let Target::Param(k) = target(module, f, &params, p) {
                        if g.index() < n && !facts.writes_param[g.index()][k] {
                            facts.writes_param[g.index()][k] = true;
                            changed = true;
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
        facts.unknown_writes = module.funcs.values().any(|f| {
            let params = f.entry().map(|b| f.blocks[b].params.clone()).unwrap_or_default();
            facts.written(f).into_iter().any(|(p, _)| matches!(target(module, f, &params, p), Target::Unknown))
        });
        facts
    }

    /// Does a call of `g` write through its argument `k`?
    fn writes_arg(&self, g: FuncId, k: usize) -> bool {
        self.writes_param.get(g.index()).and_then(|w| w.get(k)).copied().unwrap_or(true)
    }

    /// Does extern `e` write through its argument `k`?
    fn extern_writes_arg(&self, e: usize, k: usize) -> bool {
        self.writes.get(e).is_none_or(|ws| ws.contains(&k))
    }

    /// The addresses `f` writes through, by stores, calls and support functions, as far as
    /// the facts know now, with the writing instruction.
    fn written(&self, f: &Function) -> Vec<(Value, Inst)> {
        let mut out = Vec::new();
        for &b in &f.layout {
            for &i in &f.blocks[b].insts {
                match &f.insts[i].op {
                    Op::Store(_, p, _) => out.push((*p, i)),
                    Op::Call(g, args) => out
                        .extend(args.iter().enumerate().filter(|(k, _)| self.writes_arg(*g, *k)).map(|(_, a)| (*a, i))),
                    Op::CallExt(e, args) => out.extend(
                        args.iter()
                            .enumerate()
                            .filter(|(k, _)| self.extern_writes_arg(e.index(), *k))
                            .map(|(_, a)| (*a, i)),
                    ),
                    _ => {}
                }
            }
        }
        out
    }
}

/// The operation defining `v`, if an instruction does.
fn def_op(f: &Function, v: Value) -> Option<&Op> {
    match f.values.get(v)?.def {
        ValueDef::Result(i, _) => Some(&f.insts.get(i)?.op),
        _ => None,
    }
}

/// Simplifies function `f` of `module` until nothing changes, then renumbers it.
pub fn simplify_function(module: &mut Module, f: FuncId, facts: &ModuleFacts) {
    let placeholder = Function::empty("", Default::default());
    let mut func = std::mem::replace(&mut module.funcs[f], placeholder);
    for n in 0..16 {
        let mut s = Simplifier { func: &mut func, facts, alias: FxHashMap::default(), changed: false };
        s.round(n == 0);
        if !s.changed {
            break;
        }
    }
    module.funcs[f] = compact(&func);
}

struct Simplifier<'a> {
    func: &'a mut Function,
    facts: &'a ModuleFacts,
    /// Values replaced by other values (resolved transitively).
    alias: FxHashMap<Value, Value>,
    changed: bool,
}

/// A constant operand.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Const {
    Int(i64),
    Bool(bool),
}

impl<'a> Simplifier<'a> {
    fn round(&mut self, first: bool) {
        if first {
            self.remove_unreachable();
        }
        self.propagate_params();
        self.apply_aliases();
        self.fold_instructions();
        self.apply_aliases();
        if self.fold_terminators() {
            self.remove_unreachable();
        }
        self.merge_blocks();
        self.apply_aliases();
        if self.bypass_empty_blocks() {
            self.remove_unreachable();
        }
        self.remove_dead();
    }

    /// Resolves `v` through the alias map.
    fn resolve(&self, mut v: Value) -> Value {
        let mut n = 0;
        while let Some(&w) = self.alias.get(&v) {
            if w == v || n > 1000 {
                break;
            }
            v = w;
            n += 1;
        }
        v
    }

    fn add_alias(&mut self, from: Value, to: Value) {
        let to = self.resolve(to);
        if from != to {
            self.alias.insert(from, to);
            self.changed = true;
        }
    }

    /// Rewrites every operand through the alias map.
    fn apply_aliases(&mut self) {
        if self.alias.is_empty() {
            return;
        }
        let alias = std::mem::take(&mut self.alias);
        let resolve = |mut v: Value| {
            let mut n = 0;
            while let Some(&w) = alias.get(&v) {
                if w == v || n > 1000 {
                    break;
                }
                v = w;
                n += 1;
            }
            v
        };
        let func = &mut *self.func;
        for &b in &func.layout {
            for &i in &func.blocks[b].insts {
                let op = &func.insts[i].op;
                let mut any = false;
                op.for_each_operand(|v| any |= alias.contains_key(&v));
                if any {
                    func.insts[i].op = map_operands(op, &resolve);
                }
            }
        }
        self.alias = alias;
        // Aliases stay valid (the replaced values are gone from every operand); keep them so a
        // later rewrite this round still resolves values it read before.
    }

    fn remove_unreachable(&mut self) {
        let rpo = reverse_postorder(self.func);
        if rpo.len() == self.func.layout.len() {
            return;
        }
        let reachable: FxHashSet<Block> = rpo.into_iter().collect();
        self.func.layout.retain(|b| reachable.contains(b));
        self.changed = true;
    }

    /// Every edge into each block: `(from block, which target)`.
    fn edges(&self) -> Edges {
        let mut count: SecondaryMap<Block, u32> = SecondaryMap::sized(self.func.blocks.len());
        let mut total = 0usize;
        for &b in &self.func.layout {
            let mut k = 0;
            while let Some(s) = successor(self.func, b, k) {
                count[s] += 1;
                total += 1;
                k += 1;
            }
        }
        let mut start: SecondaryMap<Block, (u32, u32)> = SecondaryMap::sized(self.func.blocks.len());
        let mut at = 0u32;
        for &b in &self.func.layout {
            start[b] = (at, 0);
            at += count[b];
        }
        let mut list = vec![(Block::from_u32(0), 0usize); total];
        for &b in &self.func.layout {
            let mut k = 0;
            while let Some(s) = successor(self.func, b, k) {
                let (first, n) = &mut start[s];
                list[(*first + *n) as usize] = (b, k);
                *n += 1;
                k += 1;
            }
        }
        Edges { start, list }
    }

    /// Block parameters that receive one value on every edge (other than from themselves) are
    /// replaced by it, and dropped with their arguments.
    fn propagate_params(&mut self) {
        let edges = self.edges();
        let entry = self.func.entry();
        let mut drop: FxHashMap<Block, Vec<bool>> = FxHashMap::default();
        for b in self.func.layout.clone() {
            if Some(b) == entry || self.func.blocks[b].params.is_empty() {
                continue;
            }
            let incoming = edges.to(b);
            if incoming.is_empty() {
                continue;
            }
            let params = self.func.blocks[b].params.clone();
            let mut mask = vec![false; params.len()];
            for (n, &p) in params.iter().enumerate() {
                let mut unique: Option<Value> = None;
                let mut ok = true;
                for &(from, k) in incoming {
                    let a = self.resolve(self.target_arg(from, k, n));
                    if a == p {
                        continue;
                    }
                    match unique {
                        None => unique = Some(a),
                        Some(u) if u == a => {}
                        Some(_) => {
                            ok = false;
                            break;
                        }
                    }
                }
                if let (true, Some(u)) = (ok, unique) {
                    self.add_alias(p, u);
                    mask[n] = true;
                }
            }
            // Two parameters that are equal on entry and stay equal: induction variables counted
            // in step (a reverse loop's counter and its index, both from 0 by 1). Proved by
            // induction over the entries of `b`: if every incoming pair is equal assuming the two
            // parameters were equal at the previous entry, they always are.
            for j in 1..params.len() {
                if mask[j] {
                    continue;
                }
                let twin = (0..j).find(|&i| {
                    !mask[i]
                        && incoming.iter().all(|&(from, k)| {
                            let (a, c) = (self.target_arg(from, k, i), self.target_arg(from, k, j));
                            self.congruent(&edges, a, c, (params[i], params[j]), 3)
                        })
                });
                if let Some(i) = twin {
                    self.add_alias(params[j], params[i]);
                    mask[j] = true;
                }
            }
            if mask.iter().any(|m| *m) {
                drop.insert(b, mask);
            }
        }
        if drop.is_empty() {
            return;
        }
        // Drop the arguments on every edge, then the parameters.
        for &b in &self.func.layout.clone() {
            let Some(&last) = self.func.blocks[b].insts.last() else { continue };
            if !any_successor(self.func, b, |s| drop.contains_key(&s)) {
                continue;
            }
            let mut op = self.func.insts[last].op.clone();
            let prune = |bc: &mut BlockCall| {
                if let Some(mask) = drop.get(&bc.block) {
                    let mut n = 0;
                    bc.args.retain(|_| {
                        let keep = !mask[n];
                        n += 1;
                        keep
                    });
                }
            };
            match &mut op {
                Op::Jump(bc) => prune(bc),
                Op::Brif(_, t, e) => {
                    prune(t);
                    prune(e)
                }
                Op::Switch(_, cases) => cases.iter_mut().for_each(|(_, bc)| prune(bc)),
                _ => continue,
            }
            self.func.insts[last].op = op;
        }
        for (b, mask) in drop {
            let params = std::mem::take(&mut self.func.blocks[b].params);
            let kept: Vec<Value> = params.iter().zip(&mask).filter(|(_, m)| !**m).map(|(p, _)| *p).collect();
            for (n, p) in kept.iter().enumerate() {
                self.func.values[*p].def = ValueDef::Param(b, n as u32);
            }
            self.func.blocks[b].params = kept;
        }
    }

    /// Are `a` and `c` the same number, assuming the parameters `hyp.0` and `hyp.1` are: the
    /// same value, the pair itself, the same constant or arithmetic on congruent operands
    /// (arithmetic is deterministic, so equal operands give equal results), or two parameters of
    /// one block (a join, such as the one after a loop's compaction check) that receive congruent
    /// values on every edge; at most `depth` steps deep.
    fn congruent(&self, edges: &Edges, a: Value, c: Value, hyp: (Value, Value), depth: u32) -> bool {
        let (a, c) = (self.resolve(a), self.resolve(c));
        if a == c || (a, c) == hyp || (c, a) == hyp {
            return true;
        }
        if depth == 0 || self.func.values[a].ty != self.func.values[c].ty {
            return false;
        }
        if let (ValueDef::Param(ja, m), ValueDef::Param(jc, n)) = (self.func.values[a].def, self.func.values[c].def) {
            let join = edges.to(ja);
            return ja == jc
                && Some(ja) != self.func.entry()
                && !join.is_empty()
                && join.iter().all(|&(from, k)| {
                    let (x, y) = (self.target_arg(from, k, m as usize), self.target_arg(from, k, n as usize));
                    self.congruent(edges, x, y, hyp, depth - 1)
                });
        }
        let sub = |x: Value, y: Value| self.congruent(edges, x, y, hyp, depth - 1);
        match (def_op(self.func, a), def_op(self.func, c)) {
            (Some(Op::Iconst(x)), Some(Op::Iconst(y))) => x == y,
            (Some(Op::Fconst(x)), Some(Op::Fconst(y))) => x == y,
            (Some(Op::Binary(o1, x1, y1)), Some(Op::Binary(o2, x2, y2))) => o1 == o2 && sub(*x1, *x2) && sub(*y1, *y2),
            (Some(Op::Unary(o1, x1)), Some(Op::Unary(o2, x2))) => o1 == o2 && sub(*x1, *x2),
            _ => false,
        }
    }

    /// Argument `n` of target `k` of block `b`'s terminator.
    fn target_arg(&self, b: Block, k: usize, n: usize) -> Value {
        let bc = match self.func.terminator(b) {
            Some(Op::Jump(bc)) => bc,
            Some(Op::Brif(_, t, e)) => {
                if k == 0 {
                    t
                } else {
                    e
                }
            }
            Some(Op::Switch(_, cases)) => &cases[k].1,
            _ => unreachable!("an edge comes from a branch"),
        };
        bc.args[n]
    }

    fn konst(&self, v: Value) -> Option<Const> {
        match def_op(self.func, v)? {
            Op::Iconst(n) => Some(Const::Int(*n)),
            Op::TagConst(t) => Some(Const::Int(t.as_u32() as i64)),
            Op::Bconst(b) => Some(Const::Bool(*b)),
            _ => None,
        }
    }

    fn int(&self, v: Value) -> Option<i64> {
        match self.konst(v)? {
            Const::Int(n) => Some(n),
            Const::Bool(_) => None,
        }
    }

    fn boolean(&self, v: Value) -> Option<bool> {
        match self.konst(v)? {
            Const::Bool(b) => Some(b),
            Const::Int(_) => None,
        }
    }

    /// Folds constant operations, selects and loads from fresh records.
    fn fold_instructions(&mut self) {
        let forward = self.forwardable_loads();
        for (load, value) in forward {
            let r = self.func.insts[load].results[0];
            self.add_alias(r, value);
        }
        for bi in 0..self.func.layout.len() {
            let b = self.func.layout[bi];
            for k in 0..self.func.blocks[b].insts.len() {
                let i = self.func.blocks[b].insts[k];
                let Some(&r) = self.func.insts[i].results.first() else { continue };
                if self.alias.contains_key(&r) {
                    continue;
                }
                match self.fold(&self.func.insts[i].op) {
                    Some(Folded::Value(v)) => self.add_alias(r, v),
                    Some(Folded::Op(new)) if new != self.func.insts[i].op => {
                        self.func.insts[i].op = new;
                        self.changed = true;
                    }
                    Some(Folded::Op(_)) => {}
                    None => {}
                }
            }
        }
    }

    fn fold(&self, op: &Op) -> Option<Folded> {
        use Folded::{Op as O, Value as V};
        Some(match op {
            Op::Unary(u, a) => match (u, self.konst(*a)?) {
                (UnaryOp::Ineg, Const::Int(n)) => O(Op::Iconst(n.wrapping_neg())),
                (UnaryOp::Not, Const::Bool(b)) => O(Op::Bconst(!b)),
                (UnaryOp::Btoi, Const::Bool(b)) => O(Op::Iconst(b as i64)),
                (UnaryOp::Itof, Const::Int(n)) => O(Op::Fconst((n as f64).to_bits())),
                _ => return None,
            },
            Op::Binary(b, x, y) => {
                let (cx, cy) = (self.konst(*x), self.konst(*y));
                match (b, cx, cy) {
                    (_, Some(Const::Int(p)), Some(Const::Int(q))) => O(Op::Iconst(match b {
                        BinaryOp::Iadd => p.wrapping_add(q),
                        BinaryOp::Isub => p.wrapping_sub(q),
                        BinaryOp::Imul => p.wrapping_mul(q),
                        // Division by zero fails at run time: left alone.
                        BinaryOp::Sdiv if q != 0 => {
                            if q == -1 {
                                p.wrapping_neg()
                            } else {
                                p / q
                            }
                        }
                        BinaryOp::Srem if q != 0 => {
                            if q == -1 {
                                0
                            } else {
                                p % q
                            }
                        }
                        _ => return None,
                    })),
                    (_, Some(Const::Bool(p)), Some(Const::Bool(q))) => O(Op::Bconst(match b {
                        BinaryOp::And => p && q,
                        BinaryOp::Or => p || q,
                        BinaryOp::Xor => p != q,
                        _ => return None,
                    })),
                    (BinaryOp::Iadd, _, Some(Const::Int(0))) | (BinaryOp::Isub, _, Some(Const::Int(0))) => V(*x),
                    (BinaryOp::Iadd, Some(Const::Int(0)), _) => V(*y),
                    (BinaryOp::Imul, _, Some(Const::Int(1))) => V(*x),
                    (BinaryOp::Imul, Some(Const::Int(1)), _) => V(*y),
                    (BinaryOp::And, _, Some(Const::Bool(true))) | (BinaryOp::Or, _, Some(Const::Bool(false))) => V(*x),
                    (BinaryOp::And, Some(Const::Bool(true)), _) | (BinaryOp::Or, Some(Const::Bool(false)), _) => V(*y),
                    _ => return None,
                }
            }
            Op::Icmp(c, x, y) => {
                if x == y {
                    return Some(O(Op::Bconst(matches!(c, Cmp::Eq | Cmp::Le | Cmp::Ge))));
                }
                if let Some(known) = self.length_against_nonpositive(*c, *x, *y) {
                    return Some(O(Op::Bconst(known)));
                }
                match (self.konst(*x)?, self.konst(*y)?) {
                    (Const::Int(p), Const::Int(q)) => O(Op::Bconst(match c {
                        Cmp::Eq => p == q,
                        Cmp::Ne => p != q,
                        Cmp::Lt => p < q,
                        Cmp::Le => p <= q,
                        Cmp::Gt => p > q,
                        Cmp::Ge => p >= q,
                    })),
                    (Const::Bool(p), Const::Bool(q)) => O(Op::Bconst(match c {
                        Cmp::Eq => p == q,
                        Cmp::Ne => p != q,
                        _ => return None,
                    })),
                    _ => return None,
                }
            }
            // An array's length is the one it was made with.
            Op::ArrayLen(a) => match def_op(self.func, *a)? {
                Op::NewArray(n, _) => V(*n),
                _ => return None,
            },
            Op::Select(c, a, b) => {
                if a == b {
                    V(*a)
                } else {
                    match self.boolean(*c)? {
                        true => V(*a),
                        false => V(*b),
                    }
                }
            }
            _ => return None,
        })
    }

    /// `len < k` (false) and `len >= k` (true) for an array length `len` and a constant `k <= 0`,
    /// either way round: a length is never negative, so `build (len x) f`'s and
    /// `iterate (len x) …`'s checks of a negative count fold away with their trap blocks.
    fn length_against_nonpositive(&self, c: Cmp, x: Value, y: Value) -> Option<bool> {
        let is_len = |v: Value| matches!(def_op(self.func, v), Some(Op::ArrayLen(_)));
        let nonpositive = |v: Value| self.int(v).is_some_and(|k| k <= 0);
        // Put the length on the left: `k > len` is `len < k`, `k <= len` is `len >= k`.
        let c = if is_len(x) && nonpositive(y) {
            c
        } else if is_len(y) && nonpositive(x) {
            match c {
                Cmp::Gt => Cmp::Lt,
                Cmp::Le => Cmp::Ge,
                _ => return None,
            }
        } else {
            return None;
        };
        match c {
            Cmp::Lt => Some(false),
            Cmp::Ge => Some(true),
            _ => None,
        }
    }

    /// Loads from fresh records whose only store dominates them, with the stored value.
    fn forwardable_loads(&self) -> Vec<(Inst, Value)> {
        let func = &*self.func;
        // Per record: the stores by offset, whether it is disqualified.
        #[derive(Default)]
        struct Rec {
            stores: FxHashMap<i32, Vec<Inst>>,
            bad: bool,
        }
        let mut recs: FxHashMap<Value, Rec> = FxHashMap::default();
        let mut loads = Vec::new();
        let is_alloc = |v: Value| matches!(def_op(func, v), Some(Op::Alloc(_)));
        let unknown = self.facts.unknown_writes;
        // Most rounds have nothing to forward: look before building anything.
        let any_candidate = func
            .layout
            .iter()
            .flat_map(|b| &func.blocks[*b].insts)
            .any(|i| matches!(func.insts[*i].op, Op::Load(_, p, _) if is_alloc(p)));
        if !any_candidate {
            return Vec::new();
        }
        for &b in &func.layout {
            for &i in &func.blocks[b].insts {
                let op = &func.insts[i].op;
                match op {
                    Op::Alloc(_) => {
                        recs.entry(func.insts[i].results[0]).or_default();
                    }
                    Op::Store(v, p, off) if is_alloc(*p) => {
                        let r = recs.entry(*p).or_default();
                        r.stores.entry(*off).or_default().push(i);
                        if off % 8 != 0 {
                            r.bad = true;
                        }
                        // Stored into a record: it escapes.
                        if is_alloc(*v) && unknown {
                            recs.entry(*v).or_default().bad = true;
                        }
                    }
                    Op::Load(_, p, off) if is_alloc(*p) => {
                        if off % 8 != 0 {
                            recs.entry(*p).or_default().bad = true;
                        }
                        loads.push(i);
                    }
                    // Passed to a call or a support function that writes through it, or
                    // escaping while some write has an unknown target.
                    Op::Call(g, args) => {
                        for (k, a) in args.iter().enumerate() {
                            if is_alloc(*a) && (unknown || self.facts.writes_arg(*g, k)) {
                                recs.entry(*a).or_default().bad = true;
                            }
                        }
                    }
                    Op::CallExt(e, args) => {
                        for (k, a) in args.iter().enumerate() {
                            if is_alloc(*a) && (unknown || self.facts.extern_writes_arg(e.index(), k)) {
                                recs.entry(*a).or_default().bad = true;
                            }
                        }
                    }
                    // An element address into a record is a write forwarding would not see.
                    Op::ElemAddr(a, ..) if is_alloc(*a) => {
                        recs.entry(*a).or_default().bad = true;
                    }
                    _ => {
                        if unknown {
                            op.for_each_operand(|a| {
                                if is_alloc(a) {
                                    recs.entry(a).or_default().bad = true;
                                }
                            });
                        }
                    }
                }
            }
        }
        // Only loads from a good record with one store at their offset are candidates.
        let single_store = |l: &Inst| match func.insts[*l].op {
            Op::Load(_, p, off) => {
                recs.get(&p).is_some_and(|r| !r.bad && r.stores.get(&off).is_some_and(|s| s.len() == 1))
            }
            _ => false,
        };
        loads.retain(single_store);
        if loads.is_empty() {
            return Vec::new();
        }
        let doms = Dominators::compute(func);
        let mut pos: SecondaryMap<Inst, (u32, u32)> = SecondaryMap::sized(func.insts.len());
        for (bi, &b) in func.layout.iter().enumerate() {
            for (k, &i) in func.blocks[b].insts.iter().enumerate() {
                pos[i] = (bi as u32, k as u32);
            }
        }
        let mut out = Vec::new();
        for l in loads {
            let Op::Load(ty, p, off) = func.insts[l].op else { continue };
            let Some(r) = recs.get(&p) else { continue };
            if r.bad {
                continue;
            }
            let Some([s]) = r.stores.get(&off).map(|v| v.as_slice()) else { continue };
            let Op::Store(v, _, _) = func.insts[*s].op else { continue };
            if func.values[v].ty != ty {
                continue;
            }
            let (sb, sk) = pos[*s];
            let (lb, lk) = pos[l];
            let dominated =
                if sb == lb { sk < lk } else { doms.dominates(func.layout[sb as usize], func.layout[lb as usize]) };
            if dominated {
                out.push((l, v));
            }
        }
        out
    }

    /// Branches on constants become jumps; a switch on a known tag jumps to its case. True if
    /// any branch changed.
    fn fold_terminators(&mut self) -> bool {
        let mut any = false;
        for b in self.func.layout.clone() {
            let Some(&last) = self.func.blocks[b].insts.last() else { continue };
            let new = match &self.func.insts[last].op {
                Op::Brif(c, t, e) => match self.boolean(*c) {
                    Some(true) => Some(Op::Jump(t.clone())),
                    Some(false) => Some(Op::Jump(e.clone())),
                    None if t == e => Some(Op::Jump(t.clone())),
                    None => None,
                },
                Op::Switch(v, cases) => {
                    if cases.len() == 1 {
                        // Tags come only from the IR: a switch with one case always takes it.
                        Some(Op::Jump(cases[0].1.clone()))
                    } else {
                        match def_op(self.func, *v) {
                            Some(Op::TagConst(t)) => {
                                cases.iter().find(|(c, _)| c == t).map(|(_, bc)| Op::Jump(bc.clone()))
                            }
                            _ => None,
                        }
                    }
                }
                _ => None,
            };
            if let Some(op) = new {
                self.func.insts[last].op = op;
                self.changed = true;
                any = true;
            }
        }
        any
    }

    /// A jump to a block whose only predecessor is the jumping block merges the two.
    fn merge_blocks(&mut self) {
        let entry = self.func.entry();
        // Merging moves a terminator from one block to another: predecessor counts stay right.
        let edges = self.edges();
        let mut gone: FxHashSet<Block> = FxHashSet::default();
        for a in self.func.layout.clone() {
            if gone.contains(&a) {
                continue;
            }
            while let Some(&last) = self.func.blocks[a].insts.last() {
                let Op::Jump(bc) = self.func.insts[last].op.clone() else { break };
                let b = bc.block;
                if b == a || Some(b) == entry || gone.contains(&b) || edges.to(b).len() != 1 {
                    break;
                }
                let params = std::mem::take(&mut self.func.blocks[b].params);
                for (p, arg) in params.iter().zip(&bc.args) {
                    self.add_alias(*p, *arg);
                }
                self.func.blocks[a].insts.pop();
                let moved = std::mem::take(&mut self.func.blocks[b].insts);
                self.func.blocks[a].insts.extend(moved);
                gone.insert(b);
                self.changed = true;
            }
        }
        if !gone.is_empty() {
            self.func.layout.retain(|x| !gone.contains(x));
        }
    }

    /// Edges into a block that only jumps on go straight to its target. True if any did.
    ///
    /// Only a block whose parameters nothing but its own jump reads: a parameter of a block
    /// dominates the code after it, so `b(p): jump c(…)` followed by a use of `p` further on
    /// (a join block right before a loop whose result is read after it) would leave that use
    /// without a definition once the edges skip `b`.
    fn bypass_empty_blocks(&mut self) -> bool {
        let mut any = false;
        let entry = self.func.entry();
        let mut forward: FxHashMap<Block, BlockCall> = FxHashMap::default();
        for &b in &self.func.layout {
            if Some(b) == entry {
                continue;
            }
            let insts = &self.func.blocks[b].insts;
            if insts.len() != 1 {
                continue;
            }
            if let Op::Jump(bc) = &self.func.insts[insts[0]].op {
                if bc.block != b {
                    forward.insert(b, bc.clone());
                }
            }
        }
        if forward.is_empty() {
            return false;
        }
        // Drop the candidates whose parameters are read elsewhere.
        let mut owner: FxHashMap<Value, Block> = FxHashMap::default();
        for &b in forward.keys() {
            for &p in &self.func.blocks[b].params {
                owner.insert(p, b);
            }
        }
        if !owner.is_empty() {
            let mut read_elsewhere: FxHashSet<Block> = FxHashSet::default();
            for &b in &self.func.layout {
                let own_jump = forward.contains_key(&b).then(|| self.func.blocks[b].insts[0]);
                for &i in &self.func.blocks[b].insts {
                    self.func.insts[i].op.for_each_operand(|v| {
                        if let Some(&o) = owner.get(&v) {
                            if o != b || Some(i) != own_jump {
                                read_elsewhere.insert(o);
                            }
                        }
                    });
                }
            }
            forward.retain(|b, _| !read_elsewhere.contains(b));
            if forward.is_empty() {
                return false;
            }
        }
        for &a in &self.func.layout.clone() {
            let Some(&last) = self.func.blocks[a].insts.last() else { continue };
            if !any_successor(self.func, a, |s| forward.contains_key(&s)) {
                continue;
            }
            let mut op = self.func.insts[last].op.clone();
            let mut changed = false;
            let func = &*self.func;
            let mut redirect = |bc: &mut BlockCall| {
                // One step only (chains shrink over rounds; a cycle of empty blocks stays).
                if let Some(next) = forward.get(&bc.block) {
                    if next.block == bc.block {
                        return;
                    }
                    let params = &func.blocks[bc.block].params;
                    let args = next
                        .args
                        .iter()
                        .map(|v| params.iter().position(|p| p == v).map_or(*v, |i| bc.args[i]))
                        .collect();
                    *bc = BlockCall::new(next.block, args);
                    changed = true;
                }
            };
            match &mut op {
                Op::Jump(bc) => redirect(bc),
                Op::Brif(_, t, e) => {
                    redirect(t);
                    redirect(e)
                }
                Op::Switch(_, cases) => cases.iter_mut().for_each(|(_, bc)| redirect(bc)),
                _ => {}
            }
            if changed {
                self.func.insts[last].op = op;
                self.changed = true;
                any = true;
            }
        }
        any
    }

    /// Removes instructions that cannot fail and whose results are unused, and records that
    /// are only ever stored into (with those stores): a worklist over use counts, so a chain of
    /// dead instructions goes in one pass.
    fn remove_dead(&mut self) {
        let func = &*self.func;
        let mut uses: SecondaryMap<Value, u32> = SecondaryMap::sized(func.values.len());
        // Uses other than as the address of a store.
        let mut read_uses: SecondaryMap<Value, u32> = SecondaryMap::sized(func.values.len());
        let mut stores_to: FxHashMap<Value, Vec<Inst>> = FxHashMap::default();
        let mut work: Vec<Inst> = Vec::new();
        for &b in &func.layout {
            for &i in &func.blocks[b].insts {
                let op = &func.insts[i].op;
                op.for_each_operand(|v| uses[v] += 1);
                match op {
                    Op::Store(v, p, _) => {
                        read_uses[*v] += 1;
                        stores_to.entry(*p).or_default().push(i);
                    }
                    _ => op.for_each_operand(|v| read_uses[v] += 1),
                }
                work.push(i);
            }
        }
        let mut dead: FxHashSet<Inst> = FxHashSet::default();
        let def_inst = |v: Value| match func.values[v].def {
            ValueDef::Result(i, _) => Some(i),
            _ => None,
        };
        while let Some(i) = work.pop() {
            if dead.contains(&i) {
                continue;
            }
            let data = &func.insts[i];
            let removable = match &data.op {
                Op::Alloc(_) => read_uses[data.results[0]] == 0,
                // A store is removed with its record.
                Op::Store(..) => false,
                op => !data.results.is_empty() && data.results.iter().all(|r| uses[*r] == 0) && self.pure(op),
            };
            if !removable {
                continue;
            }
            let mut gone = vec![i];
            if let Op::Alloc(_) = data.op {
                gone.extend(stores_to.get(&data.results[0]).into_iter().flatten().copied());
            }
            for g in gone {
                if !dead.insert(g) {
                    continue;
                }
                let op = &func.insts[g].op;
                let is_store = matches!(op, Op::Store(..));
                let mut k = 0;
                op.for_each_operand(|v| {
                    uses[v] -= 1;
                    // A store's address (operand 2) is not a read.
                    if !is_store || k == 0 {
                        read_uses[v] -= 1;
                    }
                    k += 1;
                    if let Some(d) = def_inst(v) {
                        work.push(d);
                    }
                });
            }
        }
        if dead.is_empty() {
            return;
        }
        for b in self.func.layout.clone() {
            self.func.blocks[b].insts.retain(|i| !dead.contains(i));
        }
        self.changed = true;
    }

    /// Can `op` be removed when its results are unused (it cannot fail and has no effect)?
    fn pure(&self, op: &Op) -> bool {
        match op {
            Op::Binary(BinaryOp::Sdiv | BinaryOp::Srem, _, y) => self.int(*y).is_some_and(|q| q != 0),
            Op::CallExt(e, _) => self.facts.pure.get(e.index()).copied().unwrap_or(false),
            _ => quiet(op),
        }
    }
}

/// Does `op` neither fail nor have an effect, whatever its operands (so running it or not is the
/// same)? A division may fail; `Simplifier::pure` knows more where the divisor is a constant.
pub(super) fn quiet(op: &Op) -> bool {
    match op {
        Op::Iconst(_)
        | Op::Fconst(_)
        | Op::Bconst(_)
        | Op::Null
        | Op::TagConst(_)
        | Op::Unary(..)
        | Op::Icmp(..)
        | Op::Fcmp(..)
        | Op::Select(..)
        | Op::Load(..)
        | Op::ArrayLen(_)
        | Op::ElemAddr(..) => true,
        Op::Binary(op, _, _) => !matches!(op, BinaryOp::Sdiv | BinaryOp::Srem),
        _ => false,
    }
}

/// The edges into each block, `(from, which target)`, grouped by block.
struct Edges {
    /// Per block: where its edges start in `list`, and how many there are.
    start: SecondaryMap<Block, (u32, u32)>,
    list: Vec<(Block, usize)>,
}

impl Edges {
    fn to(&self, b: Block) -> &[(Block, usize)] {
        let (first, n) = self.start[b];
        &self.list[first as usize..(first + n) as usize]
    }
}

/// The result of folding an instruction.
enum Folded {
    /// Its result is this existing value.
    Value(Value),
    /// It becomes this operation (same result).
    Op(Op),
}

/// Does `block` branch to a block satisfying `p`?
fn any_successor(func: &Function, block: Block, mut p: impl FnMut(Block) -> bool) -> bool {
    let mut k = 0;
    while let Some(s) = successor(func, block, k) {
        if p(s) {
            return true;
        }
        k += 1;
    }
    false
}

/// A copy of `f` with only its layout's blocks, values and instructions, numbered in order.
pub fn compact(f: &Function) -> Function {
    let n_insts: usize = f.layout.iter().map(|b| f.blocks[*b].insts.len()).sum();
    let n_params: usize = f.layout.iter().map(|b| f.blocks[*b].params.len()).sum();
    let mut out = Function {
        name: f.name.clone(),
        sig: f.sig.clone(),
        values: crate::ir::PrimaryMap::with_capacity(n_insts + n_params),
        insts: crate::ir::PrimaryMap::with_capacity(n_insts),
        blocks: crate::ir::PrimaryMap::with_capacity(f.layout.len()),
        layout: Vec::with_capacity(f.layout.len()),
    };
    let mut bmap: SecondaryMap<Block, Option<Block>> = SecondaryMap::sized(f.blocks.len());
    let mut vmap: SecondaryMap<Value, Option<Value>> = SecondaryMap::sized(f.values.len());
    for &b in &f.layout {
        let nb = out.blocks.push(BlockData::default());
        out.layout.push(nb);
        bmap[b] = Some(nb);
    }
    for &b in &f.layout {
        let nb = bmap[b].expect("mapped above");
        for &p in &f.blocks[b].params {
            vmap[p] = Some(out.append_block_param(nb, f.values[p].ty));
        }
    }
    let mut copies = Vec::with_capacity(n_insts);
    for &b in &f.layout {
        let nb = bmap[b].expect("mapped above");
        out.blocks[nb].insts.reserve_exact(f.blocks[b].insts.len());
        for &i in &f.blocks[b].insts {
            let rs = &f.insts[i].results;
            let ni = out.insts.push(InstData { op: Op::Null, results: Vec::with_capacity(rs.len()) });
            for (n, r) in rs.iter().enumerate() {
                let v = out.values.push(ValueData { ty: f.values[*r].ty, def: ValueDef::Result(ni, n as u32) });
                vmap[*r] = Some(v);
                out.insts[ni].results.push(v);
            }
            out.blocks[nb].insts.push(ni);
            copies.push((i, ni));
        }
    }
    // An operand whose definition is gone (a rewrite's bug) must not be renumbered into some
    // other value: it becomes an undefined value of its own, which the verifier reports.
    for (i, _) in &copies {
        f.insts[*i].op.for_each_operand(|v| {
            if vmap[v].is_none() {
                vmap[v] = Some(out.values.push(ValueData { ty: f.values[v].ty, def: ValueDef::Unused }));
            }
        });
    }
    let mv = |v: Value| vmap[v].unwrap_or(v);
    let mb =
        |bc: &BlockCall| BlockCall::new(bmap[bc.block].unwrap_or(bc.block), bc.args.iter().map(|v| mv(*v)).collect());
    for (i, ni) in copies {
        out.insts[ni].op = match &f.insts[i].op {
            Op::Jump(bc) => Op::Jump(mb(bc)),
            Op::Brif(c, t, e) => Op::Brif(mv(*c), mb(t), mb(e)),
            Op::Switch(v, cases) => Op::Switch(mv(*v), cases.iter().map(|(t, bc)| (*t, mb(bc))).collect()),
            op => map_operands(op, &mv),
        };
    }
    out
}

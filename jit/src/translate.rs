//! Translation of one verified IR function (or one entry trampoline) into Cranelift IR.
//!
//! IR blocks map one-to-one onto Cranelift blocks with block parameters; IR values map onto
//! Cranelift values directly (the IR is already SSA), except the values live across a call (`f64`
//! values across any real call, integers across calls of compiled functions): those are
//! `Variable`s, reloaded from a stack slot after each call ([`split_at_calls`]). Blocks are translated in
//! reverse postorder so every definition is translated before its uses; unreachable blocks are
//! dropped. Failure paths (bounds checks, division by zero, traps, failed callees) go to cold
//! blocks that record the error and return at once.

use anf::ir::{self, EntityRef as _};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::immediates::Ieee64;
use cranelift_codegen::ir::{
    self as cl, types, AbiParam, BlockArg, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind,
};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Switch, Variable};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId as ClFuncId, Module as _};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::abi::{
    COMPACT_BEGIN_SYMBOL, CTX_ALLOC_END, CTX_ALLOC_PTR, CTX_COLLECTIONS_MADE, CTX_COMPACT_BOUND, CTX_SCOPE_BOUND,
    CTX_SCRATCH, CTX_STACK_LIMIT, CTX_STATUS, MARK_CHUNK_END, MARK_COLLECTIONS, MARK_WORDS, SCOPE_BEGIN_SYMBOL,
};

/// Results returned in registers; more go through a hidden out-pointer (Cranelift cannot return
/// more than two integer values in registers).
pub(crate) const MAX_REG_RETS: usize = 2;

/// What translating a function needs to know about the rest of the module.
pub(crate) struct ModuleEnv<'a> {
    pub ir: &'a ir::Module,
    /// Cranelift ids of the IR functions, by `FuncId` index.
    /// `None` for functions that are not compiled (nothing compiled calls them).
    pub funcs: &'a [Option<ClFuncId>],
    /// Cranelift ids of the imported support functions, by `ExtFuncId` index.
    pub externs: &'a [ClFuncId],
    pub trap_fn: Option<ClFuncId>,
    pub alloc_fn: Option<ClFuncId>,
    /// Whether each function may fail (so its callers check `status` after the call).
    pub may_fail: &'a [bool],
    /// Whether each function is on a cycle of the call graph (so it checks the stack limit).
    pub recursive: &'a [bool],
    /// The register-preserving trampolines of the rarely called support functions
    /// (`abi::COLD_SYMBOLS`), by name: see [`translate_cold_trampoline`].
    pub cold: &'a FxHashMap<String, ClFuncId>,
}

/// The Cranelift type of an IR word.
pub(crate) fn cl_type(t: ir::Type) -> cl::Type {
    match t {
        ir::Type::I64 | ir::Type::Ptr => types::I64,
        ir::Type::F64 => types::F64,
        ir::Type::Bool => types::I8,
    }
}

/// Does a function with this signature return through a hidden out-pointer?
pub(crate) fn uses_out_ptr(sig: &ir::Signature) -> bool {
    sig.rets.len() > MAX_REG_RETS
}

/// The machine signature of an IR function: `(ctx, [out,] params...) -> rets` (rets only if few).
pub(crate) fn cl_signature(sig: &ir::Signature, call_conv: CallConv) -> cl::Signature {
    let mut s = cl::Signature::new(call_conv);
    s.params.push(AbiParam::new(types::I64));
    if uses_out_ptr(sig) {
        s.params.push(AbiParam::new(types::I64));
    }
    s.params.extend(sig.params.iter().map(|t| AbiParam::new(cl_type(*t))));
    if !uses_out_ptr(sig) {
        s.returns.extend(sig.rets.iter().map(|t| AbiParam::new(cl_type(*t))));
    }
    s
}

/// The machine signature of a support function: `(ctx, params...) -> ret`. A `bool` crosses the
/// C ABI zero-extended, as C and Rust compilers expect.
pub(crate) fn cl_support_signature(sig: &ir::Signature, call_conv: CallConv) -> cl::Signature {
    let param = |t: &ir::Type| match t {
        ir::Type::Bool => AbiParam::new(types::I8).uext(),
        t => AbiParam::new(cl_type(*t)),
    };
    let mut s = cl::Signature::new(call_conv);
    s.params.push(AbiParam::new(types::I64));
    s.params.extend(sig.params.iter().map(param));
    s.returns.extend(sig.rets.iter().map(param));
    s
}

/// The signature of entry trampolines: `extern "C" fn(ctx, args: *const Word, rets: *mut Word)`.
pub(crate) fn entry_signature(call_conv: CallConv) -> cl::Signature {
    let mut s = cl::Signature::new(call_conv);
    s.params.extend([AbiParam::new(types::I64); 3]);
    s
}

/// Memory accesses the IR makes are to aligned, valid arena or context memory.
fn flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

/// Loads one 8-byte memory slot as an IR word (a `bool` slot holds the `i64` 0 or 1).
fn load_slot(b: &mut FunctionBuilder, ty: ir::Type, p: cl::Value, offset: i32) -> cl::Value {
    match ty {
        ir::Type::Bool => {
            let w = b.ins().load(types::I64, flags(), p, offset);
            b.ins().ireduce(types::I8, w)
        }
        _ => b.ins().load(cl_type(ty), flags(), p, offset),
    }
}

/// Stores an IR word into one 8-byte memory slot.
fn store_slot(b: &mut FunctionBuilder, ty: ir::Type, v: cl::Value, p: cl::Value, offset: i32) {
    let v = if ty == ir::Type::Bool { b.ins().uextend(types::I64, v) } else { v };
    b.ins().store(flags(), v, p, offset);
}

/// A failure site whose cold block is filled in after the function body.
struct PendingTrap {
    block: cl::Block,
    code: ir::TrapCode,
    site: cl::Value,
    a: cl::Value,
    b: cl::Value,
}

/// Translates one IR function at a time into a Cranelift function.
struct Translator<'a, 'b> {
    b: FunctionBuilder<'b>,
    module: &'a mut JITModule,
    env: &'a ModuleEnv<'a>,
    irf: &'a ir::Function,
    values: Vec<Option<cl::Value>>,
    blocks: Vec<Option<cl::Block>>,
    ctx: cl::Value,
    out: Option<cl::Value>,
    err_block: Option<cl::Block>,
    traps: Vec<PendingTrap>,
    func_refs: FxHashMap<ClFuncId, cl::FuncRef>,
    /// Where callees that return through an out-pointer put their results.
    ret_slot: Option<cl::StackSlot>,
    /// The instruction after the one being translated in its block.
    following: Option<ir::Inst>,
    /// Loop-leaving branches emitted with their targets swapped ([`loop_exits`]).
    swapped: FxHashSet<ir::Inst>,
    /// The values live across a call that are split ([`split_at_calls`]): each a variable and its
    /// stack slot, stored once where it is defined and reloaded after each such call.
    split: FxHashMap<ir::Value, (Variable, cl::StackSlot)>,
    /// The split values to reload after each call.
    reloads: FxHashMap<ir::Inst, Vec<ir::Value>>,
    /// Loops run two elements at a time first ([`crate::vector`]), by their entry jump.
    pairs: FxHashMap<ir::Inst, crate::vector::Plan>,
}

/// Does `op` make a real call (one that clobbers every XMM register)? The cold support functions
/// go through register-preserving trampolines and do not count.
fn real_call(env: &ModuleEnv, op: &ir::Op) -> bool {
    match op {
        ir::Op::Call(..) => true,
        ir::Op::CallExt(e, _) => {
            let ext = &env.ir.externs[*e];
            !(env.cold.contains_key(ext.name.as_str()) && ext.sig.rets.len() <= 1)
        }
        _ => false,
    }
}

/// The values to split at each real call: the `f64` values live after it, and after a call of
/// a compiled function the integers too. x86-64 SysV keeps no float register across a call, so
/// each such `f64` is spilled anyway, and five callee-saved integer registers hold few of the
/// integers; left to the register allocator, a value live across a call after a loop is often
/// spilled and reloaded inside that loop at every iteration (ode's `axpy` loops, between calls
/// of `field`: the scalar `h/2` and two array pointers). Split here instead — stored once where
/// it is defined, reloaded after each call — no value crosses a call and the loops keep their
/// registers. Integers are not split across support functions (`exp`, the arena's): those are
/// called in hot loops, where callee-saved registers beat a reload per call. Liveness is the usual backward dataflow over the blocks (block parameters are
/// defined at their block's start; branch arguments are used by the branch).
fn split_at_calls(env: &ModuleEnv, irf: &ir::Function, order: &[ir::Block]) -> FxHashMap<ir::Inst, Vec<ir::Value>> {
    let mut out: FxHashMap<ir::Inst, Vec<ir::Value>> = FxHashMap::default();
    let has_call = order.iter().any(|b| irf.blocks[*b].insts.iter().any(|i| real_call(env, &irf.insts[*i].op)));
    if !has_call {
        return out;
    }
    // Dense indices of the f64 values.
    let mut idx: FxHashMap<ir::Value, usize> = FxHashMap::default();
    let mut vals: Vec<ir::Value> = Vec::new();
    for (v, d) in irf.values.iter() {
        if d.ty != ir::Type::Bool {
            idx.insert(v, vals.len());
            vals.push(v);
        }
    }
    if vals.is_empty() {
        return out;
    }
    let words = vals.len().div_ceil(64);
    let nb = irf.blocks.len();
    let mut live_in: Vec<Vec<u64>> = vec![vec![0; words]; nb];
    let set = |bits: &mut [u64], k: usize| bits[k / 64] |= 1 << (k % 64);
    let clear = |bits: &mut [u64], k: usize| bits[k / 64] &= !(1 << (k % 64));
    // live set at a block's end: the union of its successors' live-ins.
    let live_out = |live_in: &Vec<Vec<u64>>, b: ir::Block| {
        let mut l = vec![0u64; words];
        for s in ir::cfg::successors(irf, b) {
            for (w, x) in l.iter_mut().zip(&live_in[s.index()]) {
                *w |= x;
            }
        }
        l
    };
    // One backward walk of a block from `live`; `visit` sees each call with the set after it.
    let walk = |b: ir::Block, live: &mut Vec<u64>, visit: &mut dyn FnMut(ir::Inst, &[u64])| {
        for &i in irf.blocks[b].insts.iter().rev() {
            let d = &irf.insts[i];
            for r in &d.results {
                if let Some(&k) = idx.get(r) {
                    clear(live, k);
                }
            }
            if real_call(env, &d.op) {
                visit(i, live);
            }
            d.op.for_each_operand(|v| {
                if let Some(&k) = idx.get(&v) {
                    set(live, k);
                }
            });
        }
        for p in &irf.blocks[b].params {
            if let Some(&k) = idx.get(p) {
                clear(live, k);
            }
        }
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &b in order.iter().rev() {
            let mut live = live_out(&live_in, b);
            walk(b, &mut live, &mut |_, _| {});
            if live != live_in[b.index()] {
                live_in[b.index()] = live;
                changed = true;
            }
        }
    }
    for &b in order {
        let mut live = live_out(&live_in, b);
        walk(b, &mut live, &mut |i, after| {
            // Integers only across calls of compiled functions: a support function (`exp`,
            // the arena's) is called in hot loops, where callee-saved registers beat reloads.
            let all = matches!(irf.insts[i].op, ir::Op::Call(..));
            let across: Vec<ir::Value> = (0..vals.len())
                .filter(|k| after[k / 64] >> (k % 64) & 1 == 1)
                .map(|k| vals[k])
                .filter(|v| all || irf.values[*v].ty == ir::Type::F64)
                .collect();
            if !across.is_empty() {
                out.insert(i, across);
            }
        });
    }
    out
}

/// The `brif`s whose true target stays in a loop that their false target leaves (a loop's test
/// `brif i < n, body, exit`). They are emitted as `brif !c, exit, body`: Cranelift elaborates the
/// dominator-tree children of a block in the order that puts the false target's subtree first,
/// and its loop-invariant code motion forgets a loop once it has elaborated a block outside it,
/// so with the exit first nothing in the body was hoisted (a loop-invariant `2.0 / toReal s`
/// was recomputed at every element). Swapped, the body comes first and keeps the loop.
fn loop_exits(irf: &ir::Function) -> FxHashSet<ir::Inst> {
    let doms = ir::cfg::Dominators::compute(irf);
    let mut preds: FxHashMap<ir::Block, Vec<ir::Block>> = FxHashMap::default();
    for &b in &irf.layout {
        for s in ir::cfg::successors(irf, b) {
            preds.entry(s).or_default().push(b);
        }
    }
    let mut out = FxHashSet::default();
    for &h in &irf.layout {
        if !doms.is_reachable(h) {
            continue;
        }
        // The natural loop of `h`: the blocks reaching a back edge into `h` without passing `h`.
        let mut body: FxHashSet<ir::Block> = FxHashSet::default();
        let mut work: Vec<ir::Block> = Vec::new();
        for &p in preds.get(&h).map_or(&[][..], Vec::as_slice) {
            if doms.is_reachable(p) && doms.dominates(h, p) {
                work.push(p);
            }
        }
        if work.is_empty() {
            continue;
        }
        body.insert(h);
        while let Some(b) = work.pop() {
            if body.insert(b) {
                work.extend(preds.get(&b).map_or(&[][..], Vec::as_slice).iter().copied());
            }
        }
        for &b in &body {
            let Some(&last) = irf.blocks[b].insts.last() else { continue };
            if let ir::Op::Brif(_, t, e) = &irf.insts[last].op {
                if t.block != h && body.contains(&t.block) && !body.contains(&e.block) {
                    out.insert(last);
                }
            }
        }
    }
    out
}

/// Translates `irf` into `func` (whose signature must already be set).
pub(crate) fn translate_function(
    module: &mut JITModule,
    env: &ModuleEnv,
    irf: &ir::Function,
    func: &mut cl::Function,
    fctx: &mut FunctionBuilderContext,
) -> Result<(), String> {
    let mut b = FunctionBuilder::new(func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let ctx = params[0];
    let out = uses_out_ptr(&irf.sig).then(|| params[1]);
    let mut t = Translator {
        b,
        module,
        env,
        irf,
        values: vec![None; irf.values.len()],
        blocks: vec![None; irf.blocks.len()],
        ctx,
        out,
        err_block: None,
        traps: Vec::new(),
        func_refs: FxHashMap::default(),
        ret_slot: None,
        following: None,
        swapped: loop_exits(irf),
        split: FxHashMap::default(),
        reloads: FxHashMap::default(),
        pairs: crate::vector::plans(irf),
    };
    let ir_entry = irf.entry().ok_or("function has no entry block")?;
    let first_param = if out.is_some() { 2 } else { 1 };
    for (i, &v) in irf.blocks[ir_entry].params.iter().enumerate() {
        let p = *params.get(first_param + i).ok_or("entry block has more parameters than the signature")?;
        t.values[v.index()] = Some(p);
    }
    t.blocks[ir_entry.index()] = Some(entry);
    t.create_slot();
    if env.recursive.get(func_index(env, irf)).copied().unwrap_or(false) {
        t.check_stack();
    }
    let order = ir::cfg::reverse_postorder(irf);
    t.reloads = split_at_calls(env, irf, &order);
    let mut across: Vec<ir::Value> = t.reloads.values().flatten().copied().collect();
    across.sort();
    across.dedup();
    for v in across {
        let var = t.b.declare_var(cl_type(irf.values[v].ty));
        let slot = t.b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 8, 3));
        t.split.insert(v, (var, slot));
    }
    for &p in &irf.blocks[ir_entry].params {
        if let Some(x) = t.values[p.index()] {
            t.def(p, x);
        }
    }
    for &blk in &order[1..] {
        let cb = t.b.create_block();
        for &p in &irf.blocks[blk].params {
            let v = t.b.append_block_param(cb, cl_type(irf.values[p].ty));
            t.values[p.index()] = Some(v);
        }
        t.blocks[blk.index()] = Some(cb);
    }
    for (i, &blk) in order.iter().enumerate() {
        if i > 0 {
            let cb = t.block(blk)?;
            t.b.switch_to_block(cb);
            for &p in &irf.blocks[blk].params {
                if let Some(x) = t.values[p.index()] {
                    t.def(p, x);
                }
            }
        }
        let insts = &irf.blocks[blk].insts;
        for (k, &inst) in insts.iter().enumerate() {
            t.following = insts.get(k + 1).copied();
            t.inst(inst)?;
            // After a call: the split values live across it, reloaded.
            if let Some(vs) = t.reloads.get(&inst).cloned() {
                for v in vs {
                    let (var, slot) = t.split[&v];
                    let x = t.b.ins().stack_load(types::I64, cl_type(irf.values[v].ty), slot, 0);
                    t.b.def_var(var, x);
                }
            }
        }
    }
    t.finish_cold_blocks();
    t.b.seal_all_blocks();
    let config = t.module.target_config();
    t.b.finalize(config);
    Ok(())
}

/// The index of `irf` in its module.
fn func_index(env: &ModuleEnv, irf: &ir::Function) -> usize {
    env.ir.funcs.iter().position(|(_, f)| std::ptr::eq(f, irf)).unwrap_or(usize::MAX)
}

impl<'a, 'b> Translator<'a, 'b> {
    /// Traps with `StackOverflow` when the stack pointer is below the context's limit.
    fn check_stack(&mut self) {
        let sp = self.b.ins().get_stack_pointer(types::I64);
        let limit = self.b.ins().load(types::I64, flags(), self.ctx, CTX_STACK_LIMIT);
        let low = self.b.ins().icmp(IntCC::UnsignedLessThan, sp, limit);
        let site = self.no_site();
        let zero = self.b.ins().iconst(types::I64, 0);
        self.trap_if(low, ir::TrapCode::StackOverflow, site, zero, zero);
    }

    /// The Cranelift value of `v` (in the current block: a split value's variable).
    fn v(&mut self, v: ir::Value) -> Result<cl::Value, String> {
        let x =
            self.values.get(v.index()).copied().flatten().ok_or_else(|| format!("{v} used before it is translated"))?;
        Ok(match self.split.get(&v) {
            Some(&(var, _)) => self.b.use_var(var),
            None => x,
        })
    }

    /// The Cranelift values of `vs`.
    fn vs(&mut self, vs: &[ir::Value]) -> Result<Vec<cl::Value>, String> {
        vs.iter().map(|v| self.v(*v)).collect()
    }

    /// The Cranelift block of `blk`.
    fn block(&self, blk: ir::Block) -> Result<cl::Block, String> {
        self.blocks.get(blk.index()).copied().flatten().ok_or_else(|| format!("{blk} is not translated"))
    }

    /// Binds `v` to `x` (a split value is also stored in its slot, at its definition).
    fn def(&mut self, v: ir::Value, x: cl::Value) {
        self.values[v.index()] = Some(x);
        if let Some(&(var, slot)) = self.split.get(&v) {
            self.b.ins().stack_store(types::I64, x, slot, 0);
            self.b.def_var(var, x);
        }
    }

    /// Binds the single result of `inst` to `x`.
    fn def1(&mut self, inst: ir::Inst, x: cl::Value) -> Result<(), String> {
        let r = *self.irf.insts[inst].results.first().ok_or("instruction without its result")?;
        self.def(r, x);
        Ok(())
    }

    /// The block arguments of an IR branch target.
    fn block_call(&mut self, bc: &ir::BlockCall) -> Result<(cl::Block, Vec<BlockArg>), String> {
        let args = bc.args.iter().map(|a| self.v(*a).map(BlockArg::Value)).collect::<Result<_, _>>()?;
        Ok((self.block(bc.block)?, args))
    }

    /// A reference to Cranelift function `id` usable in this function.
    fn func_ref(&mut self, id: ClFuncId) -> cl::FuncRef {
        if let Some(r) = self.func_refs.get(&id) {
            return *r;
        }
        let r = self.module.declare_func_in_func(id, self.b.func);
        self.func_refs.insert(id, r);
        r
    }

    /// One stack slot big enough for the out-pointer results of every call in the function.
    fn create_slot(&mut self) {
        let mut words = 0;
        for data in self.irf.insts.values() {
            if let ir::Op::Call(f, _) = &data.op {
                if let Some(g) = self.env.ir.funcs.get(*f) {
                    if uses_out_ptr(&g.sig) {
                        words = words.max(g.sig.rets.len());
                    }
                }
            }
        }
        if words > 0 {
            let data = StackSlotData::new(StackSlotKind::ExplicitSlot, 8 * words as u32, 3);
            self.ret_slot = Some(self.b.create_sized_stack_slot(data));
        }
    }

    /// The block that returns at once after a failure (filled in at the end).
    fn err_block(&mut self) -> cl::Block {
        match self.err_block {
            Some(b) => b,
            None => {
                let b = self.b.create_block();
                self.b.set_cold_block(b);
                self.err_block = Some(b);
                b
            }
        }
    }

    /// Continues in a fresh block unless `fail` holds, in which case the call traps with `code`.
    fn trap_if(&mut self, fail: cl::Value, code: ir::TrapCode, site: cl::Value, a: cl::Value, b: cl::Value) {
        let block = self.b.create_block();
        self.b.set_cold_block(block);
        let cont = self.b.create_block();
        self.b.ins().brif(fail, block, &[], cont, &[]);
        self.b.switch_to_block(cont);
        self.traps.push(PendingTrap { block, code, site, a, b });
    }

    /// The site of failures the IR does not locate (the backend's own checks).
    fn no_site(&mut self) -> cl::Value {
        self.b.ins().iconst(types::I64, ir::NO_SITE)
    }

    /// After a call that may fail: unwind if `status` is set.
    fn check_status(&mut self) {
        let st = self.b.ins().load(types::I64, flags(), self.ctx, CTX_STATUS);
        let err = self.err_block();
        let cont = self.b.create_block();
        self.b.ins().brif(st, err, &[], cont, &[]);
        self.b.switch_to_block(cont);
    }

    /// Records the trap in `status`, calls `nabla_trap`, and returns.
    fn emit_trap(&mut self, code: ir::TrapCode, site: cl::Value, a: cl::Value, b: cl::Value) -> Result<(), String> {
        let c = self.b.ins().iconst(types::I64, code.code());
        self.b.ins().store(flags(), c, self.ctx, CTX_STATUS);
        let trap = self.env.trap_fn.ok_or("module traps but has no trap function")?;
        let r = self.func_ref(trap);
        self.b.ins().call(r, &[self.ctx, c, site, a, b]);
        let err = self.err_block();
        self.b.ins().jump(err, &[]);
        Ok(())
    }

    /// Fills the cold blocks: each pending trap, then the shared early return.
    fn finish_cold_blocks(&mut self) {
        for t in std::mem::take(&mut self.traps) {
            self.b.switch_to_block(t.block);
            // Cannot fail: `trap_fn` was checked before any trap block was made.
            if self.emit_trap(t.code, t.site, t.a, t.b).is_err() {
                self.b.ins().return_(&[]);
            }
        }
        if let Some(err) = self.err_block {
            self.b.switch_to_block(err);
            let mut zeros = Vec::new();
            if self.out.is_none() {
                for t in &self.irf.sig.rets {
                    zeros.push(match t {
                        ir::Type::F64 => self.b.ins().f64const(0.0),
                        t => self.b.ins().iconst(cl_type(*t), 0),
                    });
                }
            }
            self.b.ins().return_(&zeros);
        }
    }

    /// Bump-allocates `bytes` (an 8-multiple `i64`) from the arena; the slow path calls the runtime.
    fn alloc(&mut self, bytes: cl::Value) -> Result<cl::Value, String> {
        let p = self.b.ins().load(types::I64, flags(), self.ctx, CTX_ALLOC_PTR);
        let end = self.b.ins().load(types::I64, flags(), self.ctx, CTX_ALLOC_END);
        let avail = self.b.ins().isub(end, p);
        let fits = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, avail, bytes);
        let fast = self.b.create_block();
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        let join = self.b.create_block();
        let result = self.b.append_block_param(join, types::I64);
        self.b.ins().brif(fits, fast, &[], slow, &[]);
        self.b.switch_to_block(fast);
        let np = self.b.ins().iadd(p, bytes);
        self.b.ins().store(flags(), np, self.ctx, CTX_ALLOC_PTR);
        self.b.ins().jump(join, &[BlockArg::Value(p)]);
        self.b.switch_to_block(slow);
        let q = match self.env.cold.get(crate::abi::ALLOC_SYMBOL) {
            Some(&id) => {
                let r = self.func_ref(id);
                self.b.ins().call(r, &[self.ctx, bytes]);
                self.b.ins().load(types::I64, flags(), self.ctx, CTX_SCRATCH)
            }
            None => {
                let alloc = self.env.alloc_fn.ok_or("module allocates but has no allocation function")?;
                let r = self.func_ref(alloc);
                let call = self.b.ins().call(r, &[self.ctx, bytes]);
                self.b.inst_results(call)[0]
            }
        };
        self.check_status();
        self.b.ins().jump(join, &[BlockArg::Value(q)]);
        self.b.switch_to_block(join);
        Ok(result)
    }

    /// The inline fast path of a compaction check (`nabla_arena_scope_begin(mark, threshold)` or
    /// `nabla_arena_compact_begin`): when the arena cursor is still in the chunk the mark was
    /// taken in (same chunk end), no bag or map was made since the mark, and at most
    /// `max(bound, threshold)` bytes were allocated since it, the runtime would answer `false`
    /// (it compacts only above that bound, counting bytes and collections made since the mark);
    /// so the code answers `false` without calling it. Otherwise it continues in a cold block where
    /// the caller emits the call; both reach the returned join block, whose parameter is the answer.
    /// `bound` is the header field holding the check's least bound.
    ///
    /// When the answer's only use is the `brif` that ends its block (`branch`: its false target),
    /// the fast path jumps straight to that target, and there is no join (`None`).
    fn compaction_fast_path(
        &mut self,
        args: &[ir::Value],
        bound: i32,
        branch: Option<&ir::BlockCall>,
    ) -> Result<Option<cl::Block>, String> {
        let (mark, threshold) = (self.v(args[0])?, self.v(args[1])?);
        let ptr = self.b.ins().load(types::I64, flags(), self.ctx, CTX_ALLOC_PTR);
        let end = self.b.ins().load(types::I64, flags(), self.ctx, CTX_ALLOC_END);
        let made = self.b.ins().load(types::I64, flags(), self.ctx, CTX_COLLECTIONS_MADE);
        let least = self.b.ins().load(types::I64, flags(), self.ctx, bound);
        let mark_end = self.b.ins().load(types::I64, flags(), mark, (8 * MARK_CHUNK_END) as i32);
        let mark_made = self.b.ins().load(types::I64, flags(), mark, (8 * MARK_COLLECTIONS) as i32);
        let limit = self.b.ins().smax(least, threshold);
        let start = self.b.ins().iadd_imm_s(mark, (8 * MARK_WORDS) as i64);
        let used = self.b.ins().isub(ptr, start);
        let same_chunk = self.b.ins().icmp(IntCC::Equal, end, mark_end);
        let no_collections = self.b.ins().icmp(IntCC::Equal, made, mark_made);
        let small = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, used, limit);
        let ok = self.b.ins().band(same_chunk, no_collections);
        let ok = self.b.ins().band(ok, small);
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        if let Some(bc) = branch {
            let (target, targs) = self.block_call(bc)?;
            self.b.ins().brif(ok, target, &targs, slow, &[]);
            self.b.switch_to_block(slow);
            return Ok(None);
        }
        let join = self.b.create_block();
        self.b.append_block_param(join, types::I8);
        let no = self.b.ins().iconst(types::I8, 0);
        self.b.ins().brif(ok, join, &[BlockArg::Value(no)], slow, &[]);
        self.b.switch_to_block(slow);
        Ok(Some(join))
    }

    /// The false target of the `brif` that follows the current instruction, when `v` is its
    /// condition and is used nowhere else in the function.
    fn branch_only_on(&self, v: ir::Value) -> Option<ir::BlockCall> {
        let next = self.following?;
        let ir::Op::Brif(c, _, e) = &self.irf.insts[next].op else { return None };
        if *c != v {
            return None;
        }
        let mut uses = 0;
        for &b in &self.irf.layout {
            for &i in &self.irf.blocks[b].insts {
                self.irf.insts[i].op.for_each_operand(|x| uses += (x == v) as usize);
            }
        }
        (uses == 1).then(|| e.clone())
    }

    /// Translates one instruction.
    fn inst(&mut self, inst: ir::Inst) -> Result<(), String> {
        let data = &self.irf.insts[inst];
        match &data.op {
            ir::Op::Iconst(n) => {
                let x = self.b.ins().iconst(types::I64, *n);
                self.def1(inst, x)?;
            }
            ir::Op::Fconst(bits) => {
                let x = self.b.ins().f64const(Ieee64::with_bits(*bits));
                self.def1(inst, x)?;
            }
            ir::Op::Bconst(v) => {
                let x = self.b.ins().iconst(types::I8, *v as i64);
                self.def1(inst, x)?;
            }
            ir::Op::Null => {
                let x = self.b.ins().iconst(types::I64, 0);
                self.def1(inst, x)?;
            }
            ir::Op::TagConst(t) => {
                let x = self.b.ins().iconst(types::I64, t.index() as i64);
                self.def1(inst, x)?;
            }
            ir::Op::Unary(op, a) => {
                let a = self.v(*a)?;
                let ins = self.b.ins();
                let x = match op {
                    ir::UnaryOp::Ineg => ins.ineg(a),
                    ir::UnaryOp::Fneg => ins.fneg(a),
                    ir::UnaryOp::Fabs => ins.fabs(a),
                    ir::UnaryOp::Fsqrt => ins.sqrt(a),
                    ir::UnaryOp::Not => ins.bxor_imm_u(a, 1),
                    ir::UnaryOp::Itof => ins.fcvt_from_sint(types::F64, a),
                    ir::UnaryOp::Btoi => ins.uextend(types::I64, a),
                };
                self.def1(inst, x)?;
            }
            ir::Op::Binary(op, x, y) => {
                let divisor = self.iconst_of(*y);
                let (x, y) = (self.v(*x)?, self.v(*y)?);
                let r = match op {
                    ir::BinaryOp::Sdiv | ir::BinaryOp::Srem => match divisor {
                        Some(d) if d > 0 && d.count_ones() == 1 => self.div_pow2(*op, x, d.trailing_zeros()),
                        _ => self.checked_div(*op, x, y),
                    },
                    _ => {
                        let ins = self.b.ins();
                        match op {
                            ir::BinaryOp::Iadd => ins.iadd(x, y),
                            ir::BinaryOp::Isub => ins.isub(x, y),
                            ir::BinaryOp::Imul => ins.imul(x, y),
                            ir::BinaryOp::Fadd => ins.fadd(x, y),
                            ir::BinaryOp::Fsub => ins.fsub(x, y),
                            ir::BinaryOp::Fmul => ins.fmul(x, y),
                            ir::BinaryOp::Fdiv => ins.fdiv(x, y),
                            ir::BinaryOp::And => ins.band(x, y),
                            ir::BinaryOp::Or => ins.bor(x, y),
                            ir::BinaryOp::Xor => ins.bxor(x, y),
                            ir::BinaryOp::Sdiv | ir::BinaryOp::Srem => unreachable!("handled above"),
                        }
                    }
                };
                self.def1(inst, r)?;
            }
            ir::Op::Icmp(c, x, y) => {
                let (x, y) = (self.v(*x)?, self.v(*y)?);
                let cc = match c {
                    ir::Cmp::Eq => IntCC::Equal,
                    ir::Cmp::Ne => IntCC::NotEqual,
                    ir::Cmp::Lt => IntCC::SignedLessThan,
                    ir::Cmp::Le => IntCC::SignedLessThanOrEqual,
                    ir::Cmp::Gt => IntCC::SignedGreaterThan,
                    ir::Cmp::Ge => IntCC::SignedGreaterThanOrEqual,
                };
                let r = self.b.ins().icmp(cc, x, y);
                self.def1(inst, r)?;
            }
            ir::Op::Fcmp(c, x, y) => {
                let (x, y) = (self.v(*x)?, self.v(*y)?);
                let cc = match c {
                    ir::Cmp::Eq => FloatCC::Equal,
                    ir::Cmp::Ne => FloatCC::NotEqual,
                    ir::Cmp::Lt => FloatCC::LessThan,
                    ir::Cmp::Le => FloatCC::LessThanOrEqual,
                    ir::Cmp::Gt => FloatCC::GreaterThan,
                    ir::Cmp::Ge => FloatCC::GreaterThanOrEqual,
                };
                let r = self.b.ins().fcmp(cc, x, y);
                self.def1(inst, r)?;
            }
            ir::Op::Select(c, x, y) => {
                let (c, x, y) = (self.v(*c)?, self.v(*x)?, self.v(*y)?);
                let r = self.b.ins().select(c, x, y);
                self.def1(inst, r)?;
            }
            ir::Op::Load(ty, p, off) => {
                let p = self.v(*p)?;
                let r = load_slot(&mut self.b, *ty, p, *off);
                self.def1(inst, r)?;
            }
            ir::Op::Store(v, p, off) => {
                let ty = self.irf.values[*v].ty;
                let (v, p) = (self.v(*v)?, self.v(*p)?);
                store_slot(&mut self.b, ty, v, p, *off);
            }
            ir::Op::Alloc(n) => {
                let bytes = self.b.ins().iconst(types::I64, (*n as i64 + 7) & !7);
                let r = self.alloc(bytes)?;
                self.def1(inst, r)?;
            }
            ir::Op::NewArray(len, stride) => {
                let len = self.v(*len)?;
                let r = self.new_array(len, *stride)?;
                self.def1(inst, r)?;
            }
            ir::Op::ArrayLen(a) => {
                let a = self.v(*a)?;
                let r = self.b.ins().load(types::I64, flags(), a, 0);
                self.def1(inst, r)?;
            }
            ir::Op::ElemAddr(a, i, stride) => {
                let (a, i) = (self.v(*a)?, self.v(*i)?);
                let s = self.b.ins().iconst(types::I64, *stride as i64);
                let off = self.b.ins().imul(i, s);
                let base = self.b.ins().iadd(a, off);
                let h = self.b.ins().iconst(types::I64, ir::ARRAY_HEADER as i64);
                let r = self.b.ins().iadd(base, h);
                self.def1(inst, r)?;
            }
            ir::Op::BoundsCheck(i, n, site) => {
                let (i, n, site) = (self.v(*i)?, self.v(*n)?, self.v(*site)?);
                // Unsigned comparison also catches negative indices.
                let oob = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, n);
                self.trap_if(oob, ir::TrapCode::IndexOutOfBounds, site, i, n);
            }
            ir::Op::Call(f, args) => self.call(inst, *f, args)?,
            ir::Op::CallExt(e, args) => {
                let ext = &self.env.ir.externs[*e];
                let check = match ext.name.as_str() {
                    SCOPE_BEGIN_SYMBOL => Some(CTX_SCOPE_BOUND),
                    COMPACT_BEGIN_SYMBOL => Some(CTX_COMPACT_BOUND),
                    _ => None,
                };
                let sig_ok = ext.sig.params == [ir::Type::I64, ir::Type::I64] && ext.sig.rets == [ir::Type::Bool];
                // The fast path answers "not yet" exactly when the runtime would (see below).
                let fast = match check {
                    Some(bound) if sig_ok && !ext.fallible => {
                        let answer = self.irf.insts[inst].results.first().copied();
                        let branch = answer.and_then(|a| self.branch_only_on(a));
                        Some(self.compaction_fast_path(args, bound, branch.as_ref())?)
                    }
                    _ => None,
                };
                let mut cargs = vec![self.ctx];
                cargs.extend(self.vs(args)?);
                // Only reached past a fast path, or during a compaction (`abi::COLD_SYMBOLS`).
                let cold = self.env.cold.get(ext.name.as_str());
                let mut results = match cold {
                    Some(&id) if ext.sig.rets.len() <= 1 => {
                        let r = self.func_ref(id);
                        self.b.ins().call(r, &cargs);
                        ext.sig.rets.iter().map(|t| load_slot(&mut self.b, *t, self.ctx, CTX_SCRATCH)).collect()
                    }
                    _ => {
                        let id = *self.env.externs.get(e.index()).ok_or("extern not declared")?;
                        let r = self.func_ref(id);
                        let call = self.b.ins().call(r, &cargs);
                        self.b.inst_results(call).to_vec()
                    }
                };
                if ext.fallible {
                    self.check_status();
                }
                if let Some(Some(join)) = fast {
                    self.b.ins().jump(join, &results.iter().map(|x| BlockArg::Value(*x)).collect::<Vec<_>>());
                    self.b.switch_to_block(join);
                    results = self.b.block_params(join).to_vec();
                }
                for (v, x) in self.irf.insts[inst].results.iter().zip(results) {
                    self.def(*v, x);
                }
            }
            ir::Op::Jump(bc) => {
                let (blk, args) = self.block_call(bc)?;
                match self.pairs.get(&inst).cloned() {
                    Some(plan) => self.pair_loop(&plan, blk, &args)?,
                    None => {
                        self.b.ins().jump(blk, &args);
                    }
                }
            }
            ir::Op::Brif(c, t, e) => {
                let c = self.v(*c)?;
                let (tb, targs) = self.block_call(t)?;
                let (eb, eargs) = self.block_call(e)?;
                if self.swapped.contains(&inst) {
                    // A loop's exit test, false target first (see `loop_exits`); Cranelift folds
                    // the negated comparison into its complement.
                    let not = self.b.ins().icmp_imm_u(IntCC::Equal, c, 0);
                    self.b.ins().brif(not, eb, &eargs, tb, &targs);
                } else {
                    self.b.ins().brif(c, tb, &targs, eb, &eargs);
                }
            }
            ir::Op::Switch(v, cases) => self.switch(*v, cases)?,
            ir::Op::Return(vs) => {
                let vals = self.vs(vs)?;
                match self.out {
                    Some(out) => {
                        for (i, (x, t)) in vals.iter().zip(&self.irf.sig.rets).enumerate() {
                            store_slot(&mut self.b, *t, *x, out, 8 * i as i32);
                        }
                        self.b.ins().return_(&[]);
                    }
                    None => {
                        self.b.ins().return_(&vals);
                    }
                }
            }
            ir::Op::Trap(code, site, a, b) => {
                let (site, a, b) = (self.v(*site)?, self.v(*a)?, self.v(*b)?);
                self.emit_trap(*code, site, a, b)?;
            }
        }
        Ok(())
    }

    /// The entry into a loop of `plan` (header `header`, entered with `args`): a loop doing two
    /// iterations at a time with `f64x2` while two remain and their bounds checks pass, then the
    /// loop itself for the rest ([`crate::vector`]).
    fn pair_loop(&mut self, plan: &crate::vector::Plan, header: cl::Block, args: &[BlockArg]) -> Result<(), String> {
        let irf = self.irf;
        let params = &irf.blocks[plan.header].params;
        let test = self.b.create_block();
        for &p in params {
            self.b.append_block_param(test, cl_type(irf.values[p].ty));
        }
        let checks = self.b.create_block();
        let pair = self.b.create_block();
        // Two iterations left: `i + 1 < n`. Tested on entry too, so that the loop itself is
        // entered from here as well as after the pairs: the pair loop's header does not dominate
        // it, and Cranelift computes what both loops use before them (not in the pair loop's
        // header, once per pair, where it would otherwise put it).
        let n = self.v(plan.bound)?;
        let one = self.b.ins().iconst(types::I64, 1);
        let BlockArg::Value(i0) = args[plan.counter] else { return Err("a counter that is not a value".into()) };
        // Each branch here has the pair loop's side second: Cranelift lays out a branch's second
        // target right after it and the first after everything the second reaches, so the pair
        // loop sits between its entry and the loop itself. With the loop itself second, the pair
        // loop went after the rest of the function (or of the enclosing loop), where the values
        // live across it are in registers while its test has them in stack slots: regalloc2
        // reloaded them and stored them back at every pair.
        let next = self.b.ins().iadd(i0, one);
        let done = self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, next, n);
        self.b.ins().brif(done, header, args, test, args);
        self.b.switch_to_block(test);
        let ps = self.b.block_params(test).to_vec();
        let back: Vec<BlockArg> = ps.iter().map(|x| BlockArg::Value(*x)).collect();
        let n = self.v(plan.bound)?;
        let one = self.b.ins().iconst(types::I64, 1);
        let next = self.b.ins().iadd(ps[plan.counter], one);
        let done = self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, next, n);
        self.b.ins().brif(done, header, &back, checks, &[]);
        // Integers, and the bounds checks of both iterations: any failing leaves for the loop
        // itself, which runs the first and fails where it did.
        self.b.switch_to_block(checks);
        let mut local: FxHashMap<ir::Value, cl::Value> = FxHashMap::default();
        for (&p, &x) in params.iter().zip(&ps) {
            local.insert(p, x);
        }
        let (&latch, body) = irf.blocks[plan.body].insts.split_last().ok_or("empty loop body")?;
        let mut fail: Option<cl::Value> = None;
        for &inst in body {
            let op = &irf.insts[inst].op;
            let r = irf.insts[inst].results.first().copied();
            match op {
                ir::Op::Iconst(c) => {
                    let x = self.b.ins().iconst(types::I64, *c);
                    local.insert(r.ok_or("iconst without result")?, x);
                }
                ir::Op::Binary(op @ (ir::BinaryOp::Iadd | ir::BinaryOp::Isub | ir::BinaryOp::Imul), x, y) => {
                    let (x, y) = (self.pair_operand(&local, *x)?, self.pair_operand(&local, *y)?);
                    let ins = self.b.ins();
                    let z = match op {
                        ir::BinaryOp::Iadd => ins.iadd(x, y),
                        ir::BinaryOp::Isub => ins.isub(x, y),
                        _ => ins.imul(x, y),
                    };
                    local.insert(r.ok_or("arithmetic without result")?, z);
                }
                ir::Op::BoundsCheck(i, len, _) => {
                    let slope = self.pair_slope(plan, *i);
                    let (i, len) = (self.pair_operand(&local, *i)?, self.pair_operand(&local, *len)?);
                    let last = if slope { self.b.ins().iadd(i, one) } else { i };
                    let out0 = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, len);
                    let out1 = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, last, len);
                    let out = self.b.ins().bor(out0, out1);
                    fail = Some(match fail {
                        Some(f) => self.b.ins().bor(f, out),
                        None => out,
                    });
                }
                _ => {}
            }
        }
        match fail {
            Some(f) => {
                self.b.ins().brif(f, header, &back, pair, &[]);
            }
            None => {
                self.b.ins().jump(pair, &[]);
            }
        }
        // The pair's elements, in the body's order.
        self.b.switch_to_block(pair);
        let lanes = types::F64X2;
        let mut vector: FxHashMap<ir::Value, cl::Value> = FxHashMap::default();
        let mem = MemFlagsData::new().with_notrap();
        for &inst in body {
            let op = &irf.insts[inst].op;
            let r = irf.insts[inst].results.first().copied();
            match op {
                ir::Op::Fconst(bits) => {
                    let x = self.b.ins().f64const(Ieee64::with_bits(*bits));
                    local.insert(r.ok_or("fconst without result")?, x);
                }
                ir::Op::Binary(
                    op @ (ir::BinaryOp::Fadd | ir::BinaryOp::Fsub | ir::BinaryOp::Fmul | ir::BinaryOp::Fdiv),
                    x,
                    y,
                ) => {
                    let both = !vector.contains_key(x) && !vector.contains_key(y);
                    let (x, y) = if both {
                        (self.pair_operand(&local, *x)?, self.pair_operand(&local, *y)?)
                    } else {
                        (self.pair_lanes(&local, &vector, *x)?, self.pair_lanes(&local, &vector, *y)?)
                    };
                    let ins = self.b.ins();
                    let z = match op {
                        ir::BinaryOp::Fadd => ins.fadd(x, y),
                        ir::BinaryOp::Fsub => ins.fsub(x, y),
                        ir::BinaryOp::Fmul => ins.fmul(x, y),
                        _ => ins.fdiv(x, y),
                    };
                    let r = r.ok_or("arithmetic without result")?;
                    if both {
                        local.insert(r, z);
                    } else {
                        vector.insert(r, z);
                    }
                }
                ir::Op::Unary(ir::UnaryOp::Fneg, x) => {
                    let r = r.ok_or("fneg without result")?;
                    if vector.contains_key(x) {
                        let x = self.pair_lanes(&local, &vector, *x)?;
                        let z = self.b.ins().fneg(x);
                        vector.insert(r, z);
                    } else {
                        let x = self.pair_operand(&local, *x)?;
                        let z = self.b.ins().fneg(x);
                        local.insert(r, z);
                    }
                }
                ir::Op::Load(_, p, _) => {
                    let p = self.pair_operand(&local, *p)?;
                    let x = self.b.ins().load(lanes, mem, p, 0);
                    vector.insert(r.ok_or("load without result")?, x);
                }
                ir::Op::Store(x, p, _) => {
                    let x = self.pair_lanes(&local, &vector, *x)?;
                    let p = self.pair_operand(&local, *p)?;
                    self.b.ins().store(mem, x, p, 0);
                }
                _ => {}
            }
        }
        // Two elements on: the counter by 2, each pointer by 16 bytes.
        let ir::Op::Jump(bc) = &irf.insts[latch].op else { return Err("loop body without its back edge".into()) };
        let mut next = Vec::with_capacity(bc.args.len());
        for (m, _) in bc.args.iter().enumerate() {
            let step = if m == plan.counter { 2 } else { 16 };
            let d = self.b.ins().iconst(types::I64, step);
            next.push(BlockArg::Value(self.b.ins().iadd(ps[m], d)));
        }
        self.b.ins().jump(test, &next);
        Ok(())
    }

    /// A value of the pair loop the same in both lanes: computed in it, or from before the loop.
    fn pair_operand(&mut self, local: &FxHashMap<ir::Value, cl::Value>, v: ir::Value) -> Result<cl::Value, String> {
        match local.get(&v) {
            Some(x) => Ok(*x),
            None => self.v(v),
        }
    }

    /// An `f64` of the pair loop as its two lanes (a value the same in both, splatted).
    fn pair_lanes(
        &mut self,
        local: &FxHashMap<ir::Value, cl::Value>,
        vector: &FxHashMap<ir::Value, cl::Value>,
        v: ir::Value,
    ) -> Result<cl::Value, String> {
        if let Some(x) = vector.get(&v) {
            return Ok(*x);
        }
        let x = self.pair_operand(local, v)?;
        Ok(self.b.ins().splat(types::F64X2, x))
    }

    /// Does index `i` of a bounds check in the pair loop's body differ between the two lanes
    /// (`c + i` rather than `c`)? Follows the integer arithmetic back to the counter.
    fn pair_slope(&self, plan: &crate::vector::Plan, i: ir::Value) -> bool {
        crate::vector::slope(self.irf, plan, i) == 1
    }

    /// The constant an IR value is defined as, when it is an `iconst`.
    fn iconst_of(&self, v: ir::Value) -> Option<i64> {
        match self.irf.values.get(v)?.def {
            ir::ValueDef::Result(i, 0) => match self.irf.insts[i].op {
                ir::Op::Iconst(c) => Some(c),
                _ => None,
            },
            _ => None,
        }
    }

    /// `sdiv`/`srem` by the constant 2^k (k < 63): shifts instead of a hardware division (which
    /// Cranelift emits even for a constant divisor), with `sdiv`'s truncation toward zero — a
    /// negative dividend is biased by 2^k - 1 before the arithmetic shift — and `srem` as
    /// x - (x / 2^k)·2^k. Neither can fail: the divisor is neither 0 nor -1.
    fn div_pow2(&mut self, op: ir::BinaryOp, x: cl::Value, k: u32) -> cl::Value {
        if k == 0 {
            return match op {
                ir::BinaryOp::Sdiv => x,
                _ => self.b.ins().iconst(types::I64, 0),
            };
        }
        let sign = self.b.ins().sshr_imm_u(x, 63);
        let bias = self.b.ins().ushr_imm_u(sign, i64::from(64 - k));
        let biased = self.b.ins().iadd(x, bias);
        let q = self.b.ins().sshr_imm_u(biased, i64::from(k));
        match op {
            ir::BinaryOp::Sdiv => q,
            _ => {
                let back = self.b.ins().ishl_imm_u(q, i64::from(k));
                self.b.ins().isub(x, back)
            }
        }
    }

    /// `sdiv`/`srem` that fail cleanly on a zero divisor and wrap on `i64::MIN / -1`.
    fn checked_div(&mut self, op: ir::BinaryOp, x: cl::Value, y: cl::Value) -> cl::Value {
        let zero = self.b.ins().iconst(types::I64, 0);
        let is_zero = self.b.ins().icmp(IntCC::Equal, y, zero);
        let site = self.no_site();
        self.trap_if(is_zero, ir::TrapCode::DivisionByZero, site, x, y);
        let minus_one = self.b.ins().iconst(types::I64, -1);
        let is_m1 = self.b.ins().icmp(IntCC::Equal, y, minus_one);
        let one = self.b.ins().iconst(types::I64, 1);
        let safe = self.b.ins().select(is_m1, one, y);
        if op == ir::BinaryOp::Sdiv {
            let q = self.b.ins().sdiv(x, safe);
            let neg = self.b.ins().ineg(x);
            self.b.ins().select(is_m1, neg, q)
        } else {
            let r = self.b.ins().srem(x, safe);
            let zero = self.b.ins().iconst(types::I64, 0);
            self.b.ins().select(is_m1, zero, r)
        }
    }

    /// A fresh array: checks the length, allocates header plus elements, stores the length.
    fn new_array(&mut self, len: cl::Value, stride: u32) -> Result<cl::Value, String> {
        let zero = self.b.ins().iconst(types::I64, 0);
        let negative = self.b.ins().icmp(IntCC::SignedLessThan, len, zero);
        let site = self.no_site();
        self.trap_if(negative, ir::TrapCode::NegativeLength, site, len, zero);
        let header = ir::ARRAY_HEADER as i64;
        let bytes = if stride == 0 {
            self.b.ins().iconst(types::I64, header)
        } else {
            // Refuse lengths whose size overflows before multiplying.
            let max_len = (i64::MAX - header - 7) / stride as i64;
            let limit = self.b.ins().iconst(types::I64, max_len);
            let too_big = self.b.ins().icmp(IntCC::SignedGreaterThan, len, limit);
            let huge = self.b.ins().iconst(types::I64, i64::MAX);
            self.trap_if(too_big, ir::TrapCode::OutOfMemory, site, huge, len);
            let s = self.b.ins().iconst(types::I64, stride as i64);
            let body = self.b.ins().imul(len, s);
            let plus = self.b.ins().iconst(types::I64, header + 7);
            let padded = self.b.ins().iadd(body, plus);
            let mask = self.b.ins().iconst(types::I64, !7);
            self.b.ins().band(padded, mask)
        };
        let p = self.alloc(bytes)?;
        self.b.ins().store(flags(), len, p, 0);
        Ok(p)
    }

    /// A call of an IR function: `ctx` first, results in registers or through the stack slot.
    fn call(&mut self, inst: ir::Inst, f: ir::FuncId, args: &[ir::Value]) -> Result<(), String> {
        let callee = self.env.ir.funcs.get(f).ok_or("call of unknown function")?;
        let id = self.env.funcs.get(f.index()).copied().flatten().ok_or("function not declared")?;
        let mut cargs = vec![self.ctx];
        let slot = if uses_out_ptr(&callee.sig) {
            let slot = self.ret_slot.ok_or("no return slot")?;
            let addr = self.b.ins().stack_addr(types::I64, slot, 0);
            cargs.push(addr);
            Some(addr)
        } else {
            None
        };
        cargs.extend(self.vs(args)?);
        let r = self.func_ref(id);
        let call = self.b.ins().call(r, &cargs);
        let mut results = self.b.inst_results(call).to_vec();
        if self.env.may_fail[f.index()] {
            self.check_status();
        }
        if let Some(addr) = slot {
            results = callee
                .sig
                .rets
                .iter()
                .enumerate()
                .map(|(i, t)| load_slot(&mut self.b, *t, addr, 8 * i as i32))
                .collect();
        }
        for (v, x) in self.irf.insts[inst].results.iter().zip(results) {
            self.def(*v, x);
        }
        Ok(())
    }

    /// A switch over closure tags; the last case doubles as the default (tags come only from IR).
    fn switch(&mut self, v: ir::Value, cases: &[(ir::TagId, ir::BlockCall)]) -> Result<(), String> {
        let v = self.v(v)?;
        let mut targets = Vec::new();
        let mut trampolines = Vec::new();
        for (_, bc) in cases {
            let (blk, args) = self.block_call(bc)?;
            if args.is_empty() {
                targets.push(blk);
            } else {
                // A switch cannot pass block arguments: go through a block that jumps with them.
                let t = self.b.create_block();
                targets.push(t);
                trampolines.push((t, blk, args));
            }
        }
        match targets.as_slice() {
            [] => return Err("switch without cases".into()),
            [only] => {
                self.b.ins().jump(*only, &[]);
            }
            _ => {
                let mut sw = Switch::new();
                let default = targets[targets.len() - 1];
                for ((tag, _), t) in cases.iter().zip(&targets).take(targets.len() - 1) {
                    sw.set_entry(tag.index() as u128, *t);
                }
                sw.emit(&mut self.b, v, default);
            }
        }
        for (t, blk, args) in trampolines {
            self.b.switch_to_block(t);
            self.b.ins().jump(blk, &args);
        }
        Ok(())
    }
}

/// Builds the entry trampoline `fn(ctx, args, rets)` that unpacks words, calls `callee` and packs
/// its results.
pub(crate) fn translate_entry(
    module: &mut JITModule,
    callee: ClFuncId,
    sig: &ir::Signature,
    func: &mut cl::Function,
    fctx: &mut FunctionBuilderContext,
) {
    let mut b = FunctionBuilder::new(func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let (ctx, args, rets) = {
        let p = b.block_params(entry);
        (p[0], p[1], p[2])
    };
    let mut cargs = vec![ctx];
    if uses_out_ptr(sig) {
        cargs.push(rets);
    }
    for (i, t) in sig.params.iter().enumerate() {
        cargs.push(load_slot(&mut b, *t, args, 8 * i as i32));
    }
    let r = module.declare_func_in_func(callee, b.func);
    let call = b.ins().call(r, &cargs);
    if !uses_out_ptr(sig) {
        let results = b.inst_results(call).to_vec();
        for (i, (x, t)) in results.iter().zip(&sig.rets).enumerate() {
            store_slot(&mut b, *t, *x, rets, 8 * i as i32);
        }
    }
    b.ins().return_(&[]);
    b.seal_all_blocks();
    b.finalize(module.target_config());
}

/// The signature of a cold support function's trampoline: its parameters after `ctx`, no
/// results (the `preserve_all` convention returns nothing in registers), every register
/// preserved.
pub(crate) fn cold_signature(sig: &ir::Signature) -> cl::Signature {
    let mut s = cl_support_signature(&ir::Signature::new(sig.params.clone(), vec![]), CallConv::PreserveAll);
    s.returns.clear();
    s
}

/// The body of a cold support function's trampoline: calls `target` (the support function, in
/// the platform's convention) with the same arguments and stores its one result, if any, in the
/// context's scratch word, where the caller reads it.
pub(crate) fn translate_cold_trampoline(
    module: &mut JITModule,
    target: ClFuncId,
    sig: &ir::Signature,
    func: &mut cl::Function,
    fctx: &mut FunctionBuilderContext,
) {
    let mut b = FunctionBuilder::new(func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let args = b.block_params(entry).to_vec();
    let r = module.declare_func_in_func(target, b.func);
    let call = b.ins().call(r, &args);
    if let (Some(&x), Some(&t)) = (b.inst_results(call).first(), sig.rets.first()) {
        store_slot(&mut b, t, x, args[0], CTX_SCRATCH);
    }
    b.ins().return_(&[]);
    let config = module.target_config();
    b.finalize(config);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values `split_at_calls` splits at each call of `@main` in `text`, in layout order,
    /// printed and sorted (a call with nothing to split gives an empty list).
    fn splits(text: &str, cold: &[&str]) -> Vec<Vec<String>> {
        let m = ir::parse::parse(text).unwrap_or_else(|e| panic!("{e:?}"));
        let f = &m.funcs[m.func_by_name("main").expect("a main function")];
        // Only the names of the cold trampolines matter here; any id stands for them.
        let cold: FxHashMap<String, ClFuncId> =
            cold.iter().map(|s| (s.to_string(), cranelift_module::FuncId::from_u32(0))).collect();
        let env = ModuleEnv {
            ir: &m,
            funcs: &[],
            externs: &[],
            trap_fn: None,
            alloc_fn: None,
            may_fail: &[],
            recursive: &[],
            cold: &cold,
        };
        let plan = split_at_calls(&env, f, &ir::cfg::reverse_postorder(f));
        let mut out = Vec::new();
        for &b in &f.layout {
            for &i in &f.blocks[b].insts {
                if matches!(f.insts[i].op, ir::Op::Call(..) | ir::Op::CallExt(..)) {
                    let mut vs: Vec<String> = plan.get(&i).into_iter().flatten().map(|v| v.to_string()).collect();
                    vs.sort();
                    out.push(vs);
                }
            }
        }
        out
    }

    /// Liveness across calls: a compiled function's call splits the `f64`s, integers and
    /// pointers live after it (never a `Bool`, never the call's own result or a value last used
    /// by it); a support function's only the `f64`s; a cold one's nothing. What a block needs at
    /// its end is the union of what its successors need (`b1` branches to one block reading `v6`
    /// and another reading `v2`).
    #[test]
    fn the_values_live_across_each_call_are_split() {
        let text = "\
extern $test_sin(f64) -> f64
extern $nabla_arena_since(i64) -> i64

fn @g(f64, i64) -> f64 {
b0(v0: f64, v1: i64):
    return v0
}

fn @main(f64, i64, ptr) -> f64 {
b0(v0: f64, v1: i64, v2: ptr):
    v3 = fconst 2.0
    v4 = fmul v0, v3
    v5 = iconst 3
    v6 = iadd v1, v5
    v7 = icmp lt v1, v5
    v8 = call @g(v0, v1)
    v9 = call $test_sin(v8)
    v16 = call $nabla_arena_since(v6)
    jump b1(v9)
b1(v10: f64):
    brif v7, b2, b3
b2:
    v11 = fadd v10, v4
    v12 = call @g(v11, v6)
    return v12
b3:
    v13 = arraylen v2
    v14 = itof v13
    v15 = fadd v14, v4
    return v15
}
";
        let s = |vs: &[&str]| vs.iter().map(|v| v.to_string()).collect::<Vec<_>>();
        assert_eq!(splits(text, &["nabla_arena_since"]), vec![s(&["v2", "v4", "v6"]), s(&["v4"]), s(&[]), s(&[])],);
        // Not cold, the arena's call is a real one too (the f64s only: `v4`, and `v9`, which the
        // jump reads after it).
        assert_eq!(splits(text, &[]), vec![s(&["v2", "v4", "v6"]), s(&["v4"]), s(&["v4", "v9"]), s(&[])]);
        // No call: nothing.
        let no_call = text.replace("    v12 = call @g(v11, v6)\n    return v12\n", "    return v11\n");
        let no_call = no_call
            .replace("    v8 = call @g(v0, v1)\n    v9 = call $test_sin(v8)\n", "    v9 = fadd v0, v4\n")
            .replace("    v16 = call $nabla_arena_since(v6)\n", "");
        assert_eq!(splits(&no_call, &[]), Vec::<Vec<String>>::new());
    }

    /// More values than one word of the live sets holds: 70 `f64`s live across one call.
    #[test]
    fn live_sets_span_several_words() {
        let mut text = String::from("extern $test_sin(f64) -> f64\n\nfn @main(f64) -> f64 {\nb0(v0: f64):\n");
        for k in 1..=70 {
            text.push_str(&format!("    v{k} = fadd v0, v0\n"));
        }
        text.push_str("    v100 = call $test_sin(v0)\n    v101 = fadd v100, v1\n");
        for k in 2..=70 {
            text.push_str(&format!("    v{} = fadd v{}, v{k}\n", 100 + k, 99 + k));
        }
        text.push_str("    return v170\n}\n");
        let mut want: Vec<String> = (1..=70).map(|k| format!("v{k}")).collect();
        want.sort();
        assert_eq!(splits(&text, &[]), vec![want]);
    }
}

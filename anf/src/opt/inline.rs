//! Inlining one call: the caller's block is split after the call, the callee's blocks are copied
//! in between (its entry takes the arguments by a jump, its returns jump to the continuation,
//! whose parameters are the call's results), so every other use of the results stays valid.

use rustc_hash::FxHashMap;

use crate::ir::{Block, BlockCall, BlockData, FuncId, Function, InstData, Module, Op, Value, ValueData, ValueDef};

/// The size of a function for the inliner: instructions in its layout.
pub(super) fn size(f: &Function) -> usize {
    f.layout.iter().map(|b| f.blocks[*b].insts.len()).sum()
}

/// The first call in `f`'s layout whose callee `want`s to be inlined: `(block, index, callee)`.
pub(super) fn next_site(
    module: &Module,
    f: FuncId,
    mut want: impl FnMut(FuncId) -> bool,
) -> Option<(Block, usize, FuncId)> {
    let func = &module.funcs[f];
    for &b in &func.layout {
        for (i, &inst) in func.blocks[b].insts.iter().enumerate() {
            if let Op::Call(g, _) = &func.insts[inst].op {
                if module.funcs.is_valid(*g) && want(*g) {
                    return Some((b, i, *g));
                }
            }
        }
    }
    None
}

/// Replaces the call at `index` in `block` of function `f` by the callee's body; false if
/// there is no call there to inline.
pub(super) fn inline_call(module: &mut Module, f: FuncId, block: Block, index: usize) -> bool {
    let call = module.funcs[f].blocks[block].insts[index];
    let Op::Call(g, args) = module.funcs[f].insts[call].op.clone() else { return false };
    if g == f || module.funcs[g].entry().is_none() {
        return false;
    }
    // The callee is read while the caller changes: take it out of the module meanwhile.
    let callee = std::mem::replace(&mut module.funcs[g], Function::empty("", Default::default()));
    copy_in(&mut module.funcs[f], &callee, block, index, call, args);
    module.funcs[g] = callee;
    true
}

/// The body of [`inline_call`] once the callee is at hand.
fn copy_in(
    func: &mut Function,
    callee: &Function,
    block: Block,
    index: usize,
    call: crate::ir::Inst,
    args: Vec<Value>,
) {
    let Some(callee_entry) = callee.entry() else { return };
    let results = func.insts[call].results.clone();

    // The continuation: the instructions after the call, with the call's results as parameters.
    let tail = func.blocks[block].insts.split_off(index + 1);
    func.blocks[block].insts.pop();
    let cont = func.blocks.push(BlockData { params: results.clone(), insts: tail });
    for (n, r) in results.iter().enumerate() {
        func.values[*r].def = ValueDef::Param(cont, n as u32);
    }
    // The call instruction is orphaned: make it harmless for anyone scanning the arena.
    func.insts[call] = InstData { op: Op::Null, results: Vec::new() };

    // Blocks and values of the copy, made before any instruction is copied (uses may come
    // before definitions in layout order).
    let mut bmap: FxHashMap<Block, Block> = FxHashMap::default();
    let mut vmap: FxHashMap<Value, Value> = FxHashMap::default();
    let mut new_blocks = Vec::with_capacity(callee.layout.len());
    for &cb in &callee.layout {
        let nb = func.blocks.push(BlockData::default());
        for &p in &callee.blocks[cb].params {
            let np = func.append_block_param(nb, callee.values[p].ty);
            vmap.insert(p, np);
        }
        bmap.insert(cb, nb);
        new_blocks.push(nb);
    }
    let mut copies = Vec::new();
    for &cb in &callee.layout {
        let nb = bmap[&cb];
        for &ci in &callee.blocks[cb].insts {
            let ni = func.insts.push(InstData { op: Op::Null, results: Vec::new() });
            let results: Vec<Value> = callee.insts[ci]
                .results
                .iter()
                .enumerate()
                .map(|(n, r)| {
                    let v =
                        func.values.push(ValueData { ty: callee.values[*r].ty, def: ValueDef::Result(ni, n as u32) });
                    vmap.insert(*r, v);
                    v
                })
                .collect();
            func.insts[ni].results = results;
            func.blocks[nb].insts.push(ni);
            copies.push((ci, ni));
        }
    }
    let mv = |v: Value| vmap.get(&v).copied().unwrap_or(v);
    let mb = |bc: &BlockCall| {
        BlockCall::new(bmap.get(&bc.block).copied().unwrap_or(bc.block), bc.args.iter().map(|v| mv(*v)).collect())
    };
    for (ci, ni) in copies {
        let op = match &callee.insts[ci].op {
            Op::Return(vs) => Op::Jump(BlockCall::new(cont, vs.iter().map(|v| mv(*v)).collect())),
            Op::Jump(bc) => Op::Jump(mb(bc)),
            Op::Brif(c, t, e) => Op::Brif(mv(*c), mb(t), mb(e)),
            Op::Switch(v, cases) => Op::Switch(mv(*v), cases.iter().map(|(t, bc)| (*t, mb(bc))).collect()),
            other => map_operands(other, &mv),
        };
        func.insts[ni].op = op;
    }

    // The caller jumps into the copy of the callee's entry with the arguments.
    let entry_copy = bmap[&callee_entry];
    let jump = func.insts.push(InstData { op: Op::Jump(BlockCall::new(entry_copy, args)), results: Vec::new() });
    func.blocks[block].insts.push(jump);

    // Layout: the copy and the continuation right after the split block.
    let at = func.layout.iter().position(|b| *b == block).map_or(func.layout.len(), |i| i + 1);
    let mut inserted = new_blocks;
    inserted.push(cont);
    func.layout.splice(at..at, inserted);
}

/// `op` with every value operand mapped by `m` (non-branch operations).
pub(super) fn map_operands(op: &Op, m: &impl Fn(Value) -> Value) -> Op {
    match op {
        Op::Iconst(_) | Op::Fconst(_) | Op::Bconst(_) | Op::Null | Op::TagConst(_) | Op::Alloc(_) => op.clone(),
        Op::Unary(u, a) => Op::Unary(*u, m(*a)),
        Op::Binary(b, x, y) => Op::Binary(*b, m(*x), m(*y)),
        Op::Icmp(c, x, y) => Op::Icmp(*c, m(*x), m(*y)),
        Op::Fcmp(c, x, y) => Op::Fcmp(*c, m(*x), m(*y)),
        Op::Select(c, x, y) => Op::Select(m(*c), m(*x), m(*y)),
        Op::Load(t, p, o) => Op::Load(*t, m(*p), *o),
        Op::Store(v, p, o) => Op::Store(m(*v), m(*p), *o),
        Op::NewArray(n, s) => Op::NewArray(m(*n), *s),
        Op::ArrayLen(a) => Op::ArrayLen(m(*a)),
        Op::ElemAddr(a, i, s) => Op::ElemAddr(m(*a), m(*i), *s),
        Op::BoundsCheck(i, n, s) => Op::BoundsCheck(m(*i), m(*n), m(*s)),
        Op::Call(g, args) => Op::Call(*g, args.iter().map(|v| m(*v)).collect()),
        Op::CallExt(e, args) => Op::CallExt(*e, args.iter().map(|v| m(*v)).collect()),
        Op::Jump(bc) => Op::Jump(BlockCall::new(bc.block, bc.args.iter().map(|v| m(*v)).collect())),
        Op::Brif(c, t, e) => Op::Brif(
            m(*c),
            BlockCall::new(t.block, t.args.iter().map(|v| m(*v)).collect()),
            BlockCall::new(e.block, e.args.iter().map(|v| m(*v)).collect()),
        ),
        Op::Switch(v, cases) => Op::Switch(
            m(*v),
            cases
                .iter()
                .map(|(t, bc)| (*t, BlockCall::new(bc.block, bc.args.iter().map(|v| m(*v)).collect())))
                .collect(),
        ),
        Op::Return(vs) => Op::Return(vs.iter().map(|v| m(*v)).collect()),
        Op::Trap(c, s, a, b) => Op::Trap(*c, m(*s), m(*a), m(*b)),
    }
}

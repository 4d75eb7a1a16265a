//! Elementwise loops run two elements at a time with `f64x2` (Cranelift does not vectorise).
//!
//! A loop qualifies when it is a header `h(i, p_1, …, p_k)` testing only `i < n` and one body
//! block that steps the counter by one and each pointer `p_m` by 8 bytes (as `anf::opt::strength`
//! leaves an elementwise loop), and whose body does nothing but integer arithmetic, `f64`
//! arithmetic (`+ − × ÷`, negation) on the elements `load.f64 p_m+0` and on values from before
//! the loop, `store x, p_m+0`, and bounds checks of an index `c + i` or `c` (`c` computed from
//! values from before the loop): the reverse phase's `accAxpy'`, rank-1 updates `W̄[j·n + k] +=
//! ā_j · x_k`, `map`/`zipWith` of arithmetic. No reduction (no `f64` carried), no call.
//!
//! Its translation enters a second loop first, which runs while two iterations remain (`i + 1 <
//! n`) and every bounds check of both would pass, doing both with the same operations on the two
//! lanes of `f64x2` values; the original loop then runs what is left (the last odd element, or
//! from the first element whose check would fail, so that the check fails there, as before).
//! The pair loop is laid out between its entry and the original loop (the branches into it are
//! ordered for Cranelift's block order), so that the values live across both stay where they
//! are: laid out after the rest of the function, its values moved between stack slots and
//! registers at every pair. Every element is computed by the same IEEE operations in the same order as before (no
//! reassociation, no fused multiply-add), so results are bit-identical.
//!
//! Order of memory accesses: the pair's loads all come before its stores, where the scalar loop
//! stores element `i` before loading element `i + 1`. The same pointer loaded and stored (`a.[i]
//! += …`) touches one element per lane, so that is the same; two pointers into one array (the
//! same base value) must then have the same offset. Pointers into arrays of different base values
//! are taken to be distinct arrays: the IR writes only into arrays it has just made or that are
//! reverse mode's uniquely owned accumulators, which nothing else in the loop can reach.

use anf::ir::{self, BinaryOp, Block, Cmp, Inst, Op, UnaryOp, Value, ValueDef};
use rustc_hash::{FxHashMap, FxHashSet};

/// One loop to run two elements at a time.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub header: Block,
    pub body: Block,
    /// Which of the header's parameters is the counter (the others are the element pointers).
    pub counter: usize,
    pub bound: Value,
}

/// What a value in the body is, for the pair.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An integer the same in both lanes.
    Int0,
    /// An integer one more in the second lane than in the first (`c + i`).
    Int1,
    /// An `f64` the same in both lanes.
    Scalar,
    /// An `f64` per lane.
    Lanes,
    /// An element pointer the loop carries.
    Pointer,
    /// A value only the back edge may use (a pointer's step).
    Step,
}

/// The loops of `irf` to run two elements at a time, by the entry jump into their header.
pub(crate) fn plans(irf: &ir::Function) -> FxHashMap<Inst, Plan> {
    let mut preds: FxHashMap<Block, Vec<Block>> = FxHashMap::default();
    for &b in &irf.layout {
        for s in ir::cfg::successors(irf, b) {
            preds.entry(s).or_default().push(b);
        }
    }
    let mut out = FxHashMap::default();
    for &h in &irf.layout {
        if let Some((jump, plan)) = plan(irf, &preds, h) {
            out.insert(jump, plan);
        }
    }
    out
}

fn def_op(irf: &ir::Function, v: Value) -> Option<&Op> {
    match irf.values[v].def {
        ValueDef::Result(i, _) => Some(&irf.insts[i].op),
        _ => None,
    }
}

fn plan(irf: &ir::Function, preds: &FxHashMap<Block, Vec<Block>>, h: Block) -> Option<(Inst, Plan)> {
    let [c_inst, br] = irf.blocks[h].insts.as_slice() else { return None };
    let Op::Brif(c, t, e) = &irf.insts[*br].op else { return None };
    let body = t.block;
    if !t.args.is_empty() || body == h || e.block == h || e.block == body || irf.insts[*c_inst].results != [*c] {
        return None;
    }
    let Op::Icmp(Cmp::Lt, counter, bound) = irf.insts[*c_inst].op else { return None };
    let ps = preds.get(&h)?;
    let [a, b] = ps.as_slice() else { return None };
    let pre = if *a == body {
        *b
    } else if *b == body {
        *a
    } else {
        return None;
    };
    if pre == body || preds.get(&body).map(Vec::as_slice) != Some(&[h][..]) {
        return None;
    }
    let (&pre_jump, _) = irf.blocks[pre].insts.split_last()?;
    let Op::Jump(entry) = &irf.insts[pre_jump].op else { return None };
    let (&latch_jump, body_insts) = irf.blocks[body].insts.split_last()?;
    let Op::Jump(back) = &irf.insts[latch_jump].op else { return None };
    if entry.block != h || back.block != h {
        return None;
    }
    let params = &irf.blocks[h].params;
    let k = params.iter().position(|&p| p == counter)?;
    let in_loop: FxHashSet<Inst> = irf.blocks[h].insts.iter().chain(body_insts).copied().collect();
    let outside = |v: Value| match irf.values[v].def {
        ValueDef::Param(pb, _) => pb != h && pb != body,
        ValueDef::Result(i, _) => !in_loop.contains(&i),
        ValueDef::Unused => false,
    };
    if !outside(bound) {
        return None;
    }
    let mut kind: FxHashMap<Value, Kind> = FxHashMap::default();
    for (m, &p) in params.iter().enumerate() {
        let next = *back.args.get(m)?;
        if m == k {
            let one = |v: Value| matches!(def_op(irf, v), Some(Op::Iconst(1)));
            match def_op(irf, next) {
                Some(Op::Binary(BinaryOp::Iadd, x, y)) if (*x == p && one(*y)) || (*y == p && one(*x)) => {}
                _ => return None,
            }
            kind.insert(p, Kind::Int1);
        } else {
            let zero = |v: Value| matches!(def_op(irf, v), Some(Op::Iconst(0)));
            match def_op(irf, next) {
                Some(Op::ElemAddr(x, z, 8)) if *x == p && zero(*z) => {}
                _ => return None,
            }
            if irf.values[p].ty != ir::Type::Ptr {
                return None;
            }
            kind.insert(p, Kind::Pointer);
            kind.insert(next, Kind::Step);
        }
    }
    let of = |kind: &FxHashMap<Value, Kind>, v: Value| -> Option<Kind> {
        if let Some(k) = kind.get(&v) {
            return Some(*k);
        }
        if !outside(v) {
            return None;
        }
        match irf.values[v].ty {
            ir::Type::I64 => Some(Kind::Int0),
            ir::Type::F64 => Some(Kind::Scalar),
            _ => None,
        }
    };
    let mut stored: FxHashSet<Value> = FxHashSet::default();
    for &inst in body_insts {
        let op = &irf.insts[inst].op;
        let r = irf.insts[inst].results.first().copied();
        let got = match op {
            Op::Iconst(_) => Kind::Int0,
            Op::Fconst(_) => Kind::Scalar,
            Op::Binary(bop @ (BinaryOp::Iadd | BinaryOp::Isub | BinaryOp::Imul), x, y) => {
                let (x, y) = (of(&kind, *x)?, of(&kind, *y)?);
                let slope = |k: Kind| match k {
                    Kind::Int0 => Some(0i32),
                    Kind::Int1 => Some(1),
                    _ => None,
                };
                let (sx, sy) = (slope(x)?, slope(y)?);
                let s = match bop {
                    BinaryOp::Iadd => sx + sy,
                    BinaryOp::Isub => sx - sy,
                    _ if sx == 0 && sy == 0 => 0,
                    _ => return None,
                };
                match s {
                    0 => Kind::Int0,
                    1 => Kind::Int1,
                    _ => return None,
                }
            }
            Op::Binary(BinaryOp::Fadd | BinaryOp::Fsub | BinaryOp::Fmul | BinaryOp::Fdiv, x, y) => {
                match (of(&kind, *x)?, of(&kind, *y)?) {
                    (Kind::Scalar, Kind::Scalar) => Kind::Scalar,
                    (Kind::Scalar | Kind::Lanes, Kind::Scalar | Kind::Lanes) => Kind::Lanes,
                    _ => return None,
                }
            }
            Op::Unary(UnaryOp::Fneg, x) => match of(&kind, *x)? {
                k @ (Kind::Scalar | Kind::Lanes) => k,
                _ => return None,
            },
            Op::Load(ir::Type::F64, p, 0) if of(&kind, *p)? == Kind::Pointer => Kind::Lanes,
            Op::Store(x, p, 0) => {
                if of(&kind, *p)? != Kind::Pointer || !matches!(of(&kind, *x)?, Kind::Scalar | Kind::Lanes) {
                    return None;
                }
                stored.insert(*p);
                continue;
            }
            Op::BoundsCheck(i, n, site) => {
                if !matches!(of(&kind, *i)?, Kind::Int0 | Kind::Int1)
                    || of(&kind, *n)? != Kind::Int0
                    || of(&kind, *site)? != Kind::Int0
                {
                    return None;
                }
                continue;
            }
            // A pointer's step, used by the back edge only (checked below).
            Op::ElemAddr(..) if r.is_some_and(|r| kind.get(&r) == Some(&Kind::Step)) => continue,
            _ => return None,
        };
        kind.insert(r?, got);
    }
    // The steps are used by the back edge alone (they are not the pair's addresses).
    for &inst in body_insts {
        let mut bad = false;
        irf.insts[inst].op.for_each_operand(|v| bad |= kind.get(&v) == Some(&Kind::Step));
        if bad {
            return None;
        }
    }
    if stored.is_empty() {
        return None;
    }
    // Pointers into one array (one base value) that a store writes through: at one offset.
    let mut bases: Vec<(Value, Value, Value)> = Vec::new();
    for (m, &p) in params.iter().enumerate() {
        if m == k {
            continue;
        }
        let Some(Op::ElemAddr(a, off, 8)) = def_op(irf, *entry.args.get(m)?) else { return None };
        bases.push((p, *a, *off));
    }
    for &(p, a, off) in &bases {
        if stored.contains(&p) && bases.iter().any(|&(q, b, o)| q != p && b == a && o != off) {
            return None;
        }
    }
    Some((pre_jump, Plan { header: h, body, counter: k, bound }))
}

/// How much an integer of the body of `plan`'s loop grows from one lane to the next: 1 for the
/// counter plus values the same in both lanes, 0 for those (the analysis admits nothing else).
pub(crate) fn slope(irf: &ir::Function, plan: &Plan, v: Value) -> i32 {
    if irf.blocks[plan.header].params.get(plan.counter) == Some(&v) {
        return 1;
    }
    let ValueDef::Result(i, _) = irf.values[v].def else { return 0 };
    if !irf.blocks[plan.body].insts.contains(&i) {
        return 0;
    }
    match irf.insts[i].op {
        Op::Binary(BinaryOp::Iadd, x, y) => slope(irf, plan, x) + slope(irf, plan, y),
        Op::Binary(BinaryOp::Isub, x, y) => slope(irf, plan, x) - slope(irf, plan, y),
        _ => 0,
    }
}

//! Compaction: the JIT's loops free the temporaries of their iterations while they run.
//!
//! Compiled code allocates from a per-call arena (`runtime::native`). Without compaction a loop
//! would hold every array, record, bag and map its iterations ever made until the call returns.
//! Two kinds of loop free their iterations' memory (ARCHITECTURE.md, "Memory model", gives the
//! soundness argument; this comment says what the code does):
//!
//! - **Carrying loops** (`iterate`, `while`, `fold`): the loop takes an arena mark before its
//!   first iteration; after an iteration that made more than a bound since the mark, the carried
//!   value (the *survivor*) is copied out into a side arena, everything made since the mark is
//!   freed, and the survivor is copied back. The bound doubles with the survivor's size, so
//!   copying costs O(1) per byte allocated.
//! - **Element loops** (`build`, `map`, `zipWith`): each iteration's element is the survivor.
//!   When the element holds no pointers, the loop takes one mark before its first iteration and
//!   frees everything since it once an iteration has made more than the bound (nothing is
//!   copied: the elements are words stored in the output array, made before the mark). When the
//!   element holds pointers, each iteration takes its own mark and compacts its element before
//!   storing it, once the iteration has made more than a small bound and twice the last
//!   element's size.
//!
//! Which parts of a survivor are copied is decided **per allocation, at run time**: an array is
//! copied only if it was made since the mark (`nabla_arena_since`), a closure's environment
//! likewise (by a *copier* per closure type and direction, a `switch` over the type's tags that
//! copies each tag's environment record as its captured values' types say), a bag or map made
//! since the mark is *kept* (taken out of the memory being freed, not copied) and a kept map's
//! values are copied in place (`nabla_arena_map_slots`), and anything older is left where it is
//! — the release does not touch it. Copying back copies exactly what lies in the side arena
//! (`nabla_arena_in_side`); a change's payload record likewise. Parts compaction cannot copy
//! (group records, duals' environments) are *held* (`nabla_arena_hold`): older than the mark they stay where
//! they are; made since it, they abandon the compaction, which then frees nothing (the words
//! copied so far are copied back, since kept maps were updated in place) and waits for twice as
//! much next time. A loop whose body allocates nothing once optimised has its mark and checks
//! turned into constants by `opt::scopes`.

use frontend::types::Type;

use super::apply::TagKind;
use super::value::{arg_type, flat, Shape};
use super::{mangle, type_key, LowerError, Lowerer, Work, R};
use crate::ir::{self, BinaryOp, BlockCall, FuncId, Inst, Op, Signature, TagId, Value};

/// Can compaction copy (or keep) the parts of a value of type `t` made since the mark, as far as
/// the type tells? Closures are copied through their tags, and whether what their environments
/// hold can be is found at run time. Other parts (group records, duals' environments; changes,
/// whose payloads are copied but whose `gchange` group is held) are only *held*: older than the mark they stay where they are, made since it
/// they abandon the compaction.
fn copyable(t: &Type) -> bool {
    match t {
        Type::Int | Type::Real | Type::Bool | Type::Unit => true,
        Type::Tuple(ts) => ts.iter().all(copyable),
        Type::Array(e) => copyable(e),
        // Bag keys are words kept by the runtime (the `Key` class: no pointers).
        Type::Bag(_) => true,
        Type::Map(_, v) => copyable(v),
        Type::Fun(..) => true,
        _ => false,
    }
}

/// Does a value of type `t` hold a closure (whose environment may hold anything)?
fn holds_closure(t: &Type) -> bool {
    match t {
        Type::Fun(..) => true,
        Type::Tuple(ts) => ts.iter().any(holds_closure),
        Type::Array(e) | Type::Map(_, e) => holds_closure(e),
        _ => false,
    }
}

/// May a compaction of a value of type `t` be abandoned (something made since the mark that
/// cannot be copied)? Then, may it have updated a kept map in place (so the words copied out
/// must be copied back even though nothing is freed)?
fn may_abandon(t: &Type) -> bool {
    !copyable(t) || holds_closure(t)
}

fn updates_in_place(t: &Type) -> bool {
    match t {
        Type::Map(_, v) => has_pointers(v),
        Type::Fun(..) => true,
        Type::Tuple(ts) => ts.iter().any(updates_in_place),
        Type::Array(e) | Type::Delta(e) => updates_in_place(e),
        _ => false,
    }
}

/// Does a value of type `t` hold a pointer (so compaction has something to copy or keep)?
pub(crate) fn has_pointers(t: &Type) -> bool {
    match t {
        Type::Int | Type::Real | Type::Bool | Type::Unit => false,
        Type::Tuple(ts) => ts.iter().any(has_pointers),
        _ => true,
    }
}

/// A copier's `switch` over the tags of its closure type, filled in once every tag exists.
pub(crate) struct PendingCopy {
    func: FuncId,
    inst: Inst,
    ty: Type,
    tag: Value,
    env: Value,
    dir: Direction,
    join: ir::Block,
}

/// Static closures nest at most this deep in an environment (their shapes are finite: a closure
/// captures only values made before it).
const MAX_SHAPE_DEPTH: usize = 64;

impl Lowerer<'_> {
    /// Takes a mark.
    fn mark(&mut self) -> R<Value> {
        self.ext1("nabla_arena_mark", vec![])
    }

    /// `counted_loop` over a carried value of type `t` (the words `init`), compacting it as the
    /// module comment says when `t` is [`copyable`].
    pub(crate) fn compacting_loop(
        &mut self,
        t: &Type,
        n: Value,
        init: Vec<Value>,
        body: &mut dyn FnMut(&mut Self, Value, Vec<Value>) -> R<Vec<Value>>,
    ) -> R<Vec<Value>> {
        let mark = self.mark()?;
        let words = init.len();
        let mut init = init;
        // The last carried word: the bound the next compaction waits for (twice the survivor).
        init.push(self.b().iconst(0));
        let mut out = self.counted_loop(n, init, &mut |l, i, acc| {
            let next = body(l, i, acc[..words].to_vec())?;
            Ok(l.compact_step(t, mark, acc[words], next, "nabla_arena_compact_begin")?)
        })?;
        out.truncate(words);
        Ok(out)
    }

    /// `while_loop` over a carried value of type `t`, compacting it like [`Self::compacting_loop`]
    /// (`while p f x` is `iterate` with a predicate for a count).
    pub(crate) fn compacting_while(
        &mut self,
        t: &Type,
        init: Vec<Value>,
        cond: &mut dyn FnMut(&mut Self, Vec<Value>) -> R<Value>,
        body: &mut dyn FnMut(&mut Self, Vec<Value>) -> R<Vec<Value>>,
    ) -> R<Vec<Value>> {
        let mark = self.mark()?;
        let words = init.len();
        let mut init = init;
        init.push(self.b().iconst(0));
        let mut out = self.while_loop(init, &mut |l, acc| cond(l, acc[..words].to_vec()), &mut |l, acc| {
            let next = body(l, acc[..words].to_vec())?;
            l.compact_step(t, mark, acc[words], next, "nabla_arena_compact_begin")
        })?;
        out.truncate(words);
        Ok(out)
    }

    /// A loop over `0..n` whose body makes one element of type `t` (its words), which `store`
    /// writes into an output array made before the loop: the element loops of the module comment.
    pub(crate) fn element_loop(
        &mut self,
        t: &Type,
        n: Value,
        body: &mut dyn FnMut(&mut Self, Value) -> R<Vec<Value>>,
        store: &mut dyn FnMut(&mut Self, Value, Vec<Value>) -> R<()>,
    ) -> R<()> {
        if !has_pointers(t) {
            // One mark for the loop: the elements are words, so nothing made since survives.
            let mark = self.mark()?;
            let zero = self.b().iconst(0);
            // The carried word: the bound of the next release (twice what the last one kept —
            // nothing but bags' entry arrays moved past it).
            self.counted_loop(n, vec![zero], &mut |l, i, acc| {
                let y = body(l, i)?;
                store(l, i, y)?;
                // Nothing survives: the step copies no words, so it is cheap to take often (the
                // iterations' memory stays in cache).
                l.compact_step(&Type::Unit, mark, acc[0], vec![], "nabla_arena_scope_begin")
            })?;
            return Ok(());
        }
        // A mark per iteration; the carried word is the bound (twice the last element copied).
        let zero = self.b().iconst(0);
        self.counted_loop(n, vec![zero], &mut |l, i, acc| {
            let mark = l.mark()?;
            let y = body(l, i)?;
            let mut out = l.compact_step(t, mark, acc[0], y, "nabla_arena_scope_begin")?;
            let bound = out.pop().ok_or_else(|| super::LowerError::internal("compaction lost its bound"))?;
            store(l, i, out)?;
            Ok(vec![bound])
        })?;
        Ok(())
    }

    /// After one iteration made `next`: if it made more than `threshold` since `mark` (`begin`
    /// decides), copy `next` out, release to the mark and copy it back. Gives the carried words
    /// followed by the next threshold.
    fn compact_step(
        &mut self,
        t: &Type,
        mark: Value,
        threshold: Value,
        next: Vec<Value>,
        begin: &str,
    ) -> R<Vec<Value>> {
        let go = self.ext1(begin, vec![mark, threshold])?;
        let mut tys: Vec<ir::Type> = next.iter().map(|v| self.vty(*v)).collect();
        tys.push(ir::Type::I64);
        self.branch(
            go,
            &tys,
            &mut |l| {
                let out = l.copy_words(t, &next, Direction::Out)?;
                let survivor = l.ext1("nabla_arena_compact_end", vec![mark])?;
                let twice = l.b().binary(BinaryOp::Iadd, survivor, survivor);
                if !may_abandon(t) {
                    let mut back = l.copy_words(t, &out, Direction::Back)?;
                    back.push(twice);
                    return Ok(back);
                }
                // Abandoned (negative): nothing was freed, so the words are still good — unless
                // a kept map's values were updated to copies in the side arena, which are then
                // copied back like a survivor; the next attempt waits for twice the bytes made
                // so far.
                let zero = l.b().iconst(0);
                let abandoned = l.b().icmp(ir::Cmp::Lt, survivor, zero);
                let mut tys: Vec<ir::Type> = next.iter().map(|v| l.vty(*v)).collect();
                tys.push(ir::Type::I64);
                l.branch(
                    abandoned,
                    &tys,
                    &mut |l| {
                        let mut same =
                            if updates_in_place(t) { l.copy_words(t, &out, Direction::Back)? } else { next.clone() };
                        same.push(l.b().unary(ir::UnaryOp::Ineg, twice));
                        Ok(same)
                    },
                    &mut |l| {
                        let mut back = l.copy_words(t, &out, Direction::Back)?;
                        back.push(twice);
                        Ok(back)
                    },
                )
            },
            &mut |_| {
                let mut same = next.clone();
                same.push(threshold);
                Ok(same)
            },
        )
    }

    /// The words of a [`copyable`] value of type `t` with its parts copied as `dir` says:
    /// `Out`, the arrays made since the mark are copied (into the side arena, where allocation
    /// goes during a compaction) and the bags and maps made since are kept; `Back`, the arrays in
    /// the side arena are copied (into the main arena). Everything else stays where it is.
    fn copy_words(&mut self, t: &Type, words: &[Value], dir: Direction) -> R<Vec<Value>> {
        if !has_pointers(t) {
            return Ok(words.to_vec());
        }
        match t {
            Type::Array(e) => {
                let a = words[0];
                let copy = self.ext1(dir.test(), vec![a])?;
                let e = (**e).clone();
                let r = self.branch(
                    copy,
                    &[ir::Type::Ptr],
                    &mut |l| {
                        let et = flat(&e);
                        let stride = 8 * et.len() as u32;
                        let n = l.b().array_len(a);
                        let out = l.b().new_array(n, stride);
                        let deep = has_pointers(&e);
                        l.counted_loop(n, vec![], &mut |l, i, _| {
                            let from = l.b().elem_addr(a, i, stride);
                            let ws = l.load_words(&et, from, 0);
                            let ws = if deep { l.copy_words(&e, &ws, dir)? } else { ws };
                            let to = l.b().elem_addr(out, i, stride);
                            l.store_words(&ws, to, 0);
                            Ok(vec![])
                        })?;
                        Ok(vec![out])
                    },
                    &mut |_| Ok(vec![a]),
                )?;
                Ok(r)
            }
            Type::Bag(_) if dir == Direction::Out => Ok(vec![self.ext1("nabla_arena_keep_bag", vec![words[0]])?]),
            // A map whose values hold pointers is kept and its values copied in place, in both
            // directions (`CallCtx::map_slots` says which maps to visit).
            Type::Map(_, v) if has_pointers(v) => {
                let m = words[0];
                if dir == Direction::Out {
                    self.ext1("nabla_arena_keep_map", vec![m])?;
                }
                let back = self.b().bconst(dir == Direction::Back);
                let base = self.ext1("nabla_arena_map_slots", vec![m, back])?;
                let zero = self.b().iconst(0);
                let visit = self.b().icmp(ir::Cmp::Ge, base, zero);
                let v = (**v).clone();
                let vt = flat(&v);
                self.branch(
                    visit,
                    &[],
                    &mut |l| {
                        let n = l.ext1("nabla_map_len", vec![m])?;
                        l.counted_loop(n, vec![], &mut |l, i, _| {
                            let slot = l.ext1("nabla_arena_map_slot", vec![base, i])?;
                            let ws = l.load_words(&vt, slot, 0);
                            let ws = l.copy_words(&v, &ws, dir)?;
                            l.store_words(&ws, slot, 0);
                            Ok(vec![])
                        })?;
                        l.ext("nabla_arena_map_slots_end", vec![base])?;
                        Ok(vec![])
                    },
                    &mut |_| Ok(vec![]),
                )?;
                Ok(vec![m])
            }
            Type::Map(..) if dir == Direction::Out => Ok(vec![self.ext1("nabla_arena_keep_map", vec![words[0]])?]),
            // A closure: its environment, through the copier of its type.
            Type::Fun(..) => {
                let f = self.copier(t, dir);
                let env = self.call(f, vec![words[0], words[1]]);
                Ok(vec![words[0], env[0]])
            }
            // A change of a base type: its payload record (`replace v`: v's words; `gchange g dv`:
            // the group's record, held, then dv's words), copied if it is to be.
            Type::Delta(base) if !matches!(**base, Type::Fun(..) | Type::Dual(_)) => {
                let (kind, payload) = (words[0], words[1]);
                let base = (**base).clone();
                let copy = self.ext1(dir.test(), vec![payload])?;
                let r = self.branch(
                    copy,
                    &[ir::Type::Ptr],
                    &mut |l| {
                        // As `<+>` reads it (`groups::oplus`): kind 0 is `replace`.
                        let zero = l.b().iconst(0);
                        let replace = l.b().icmp(ir::Cmp::Eq, kind, zero);
                        let bt = flat(&base);
                        l.branch(
                            replace,
                            &[ir::Type::Ptr],
                            &mut |l| {
                                let v = l.load_words(&bt, payload, 0);
                                let ws = l.copy_words(&base, &v, dir)?;
                                Ok(vec![l.record(&ws)])
                            },
                            &mut |l| {
                                let g = l.b().load(ir::Type::Ptr, payload, 0);
                                let mut ws = l.copy_words(&Type::Group(std::rc::Rc::new(base.clone())), &[g], dir)?;
                                let dv = l.load_words(&bt, payload, 8);
                                ws.extend(l.copy_words(&base, &dv, dir)?);
                                Ok(vec![l.record(&ws)])
                            },
                        )
                    },
                    &mut |_| Ok(vec![payload]),
                )?;
                Ok(vec![kind, r[0]])
            }
            // A dual's environment, a group's record.
            Type::Dual(_) | Type::Delta(_) if dir == Direction::Out => {
                self.ext("nabla_arena_hold", vec![words[1]])?;
                Ok(words.to_vec())
            }
            Type::Group(_) if dir == Direction::Out => {
                self.ext("nabla_arena_hold", vec![words[0]])?;
                Ok(words.to_vec())
            }
            Type::Tuple(ts) => {
                let mut out = Vec::with_capacity(words.len());
                let mut at = 0;
                for c in ts.iter() {
                    let k = flat(c).len();
                    let part = &words[at..at + k];
                    out.extend(if has_pointers(c) { self.copy_words(c, part, dir)? } else { part.to_vec() });
                    at += k;
                }
                Ok(out)
            }
            _ => Ok(words.to_vec()),
        }
    }
}

/// Which way [`Lowerer::copy_words`] copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Direction {
    Out,
    Back,
}

impl Direction {
    /// The support function that says whether a part is to be copied.
    fn test(self) -> &'static str {
        match self {
            Direction::Out => "nabla_arena_since",
            Direction::Back => "nabla_arena_in_side",
        }
    }
}

impl Lowerer<'_> {
    /// The copier of closures of type `t` in direction `dir`: `(tag, env) -> env`, the
    /// environment copied if it is to be (made since the mark, or in the side arena), else as
    /// it is. Made on first use; its `switch` is filled in once every tag of `t` exists.
    fn copier(&mut self, t: &Type, dir: Direction) -> FuncId {
        let key = (type_key(t), dir);
        if let Some(f) = self.copiers.get(&key) {
            return *f;
        }
        let way = if dir == Direction::Out { "out" } else { "back" };
        let sig = Signature::new(vec![ir::Type::I64, ir::Type::Ptr], vec![ir::Type::Ptr]);
        let f = self.new_function(&format!("copy.{way}.{}", mangle(t)), sig);
        self.copiers.insert(key, f);
        self.work.push(Work::Copier(t.clone(), dir, f));
        f
    }

    /// A copier's body: the test, then a `switch` on the tag left to [`Self::patch_copy`].
    pub(crate) fn gen_copier(&mut self, t: &Type, dir: Direction, f: FuncId) -> R<()> {
        self.begin(f);
        let ps = self.params();
        let (tag, env) = (ps[0], ps[1]);
        let copy = self.ext1(dir.test(), vec![env])?;
        let (go, _) = self.block(&[]);
        let (join, jp) = self.block(&[ir::Type::Ptr]);
        self.b().brif(copy, BlockCall::new(go, vec![]), BlockCall::new(join, vec![env]));
        self.switch_to(go);
        let inst = self.b().inst(Op::Switch(tag, Vec::new()), &[]);
        self.pending_copies.push(PendingCopy { func: f, inst, ty: t.clone(), tag, env, dir, join });
        self.switch_to(join);
        self.b().ret(vec![jp[0]]);
        Ok(())
    }

    /// Fills in a copier's `switch`: one case per tag of its type, copying that tag's
    /// environment record.
    pub(crate) fn patch_copy(&mut self, p: PendingCopy) -> R<()> {
        self.cur_func = p.func;
        self.env.clear();
        let key = type_key(&p.ty);
        self.closed_types.insert(key.clone());
        let tags = self.tag_sets.get(&key).cloned().unwrap_or_default();
        let mut cases = Vec::new();
        for t in tags {
            let (blk, _) = self.block(&[]);
            self.switch_to(blk);
            let env = self.copy_env(t, p.env, p.dir)?;
            self.b().jump(p.join, vec![env]);
            cases.push((t, BlockCall::new(blk, vec![])));
        }
        let op = if cases.is_empty() {
            // No closure of this type is ever made: nothing to copy.
            Op::Jump(BlockCall::new(p.join, vec![p.env]))
        } else {
            Op::Switch(p.tag, cases)
        };
        self.set_op(p.func, p.inst, op);
        Ok(())
    }

    /// A copy of the environment record `env` of a closure with tag `t` (`env` is to be copied).
    fn copy_env(&mut self, t: TagId, env: Value, dir: Direction) -> R<Value> {
        let info = self.tag_info[t.as_u32() as usize].clone();
        match info.kind {
            // The captured values, as the chain's shapes and types say.
            TagKind::Chain(c, 0) => self.copy_chain_record(c, env, dir, 0),
            // The chain's own environment, then the arguments collected so far.
            TagKind::Chain(c, k) => {
                let ch = self.chain(c).clone();
                let inner = self.b().load(ir::Type::Ptr, env, 0);
                let mut words = vec![self.copy_chain_env(c, inner, dir, 0)?];
                let mut off = 8;
                for i in 0..k {
                    let a = ch.arg(i)?;
                    let ws = self.load_words(&flat(&a), env, off);
                    off += 8 * ws.len() as i32;
                    words.extend(self.copy_words(&a, &ws, dir)?);
                }
                Ok(self.record(&words))
            }
            // A builtin's arguments so far.
            TagKind::Prim(ty, k) => {
                let mut words = Vec::new();
                let mut off = 0;
                for i in 0..k {
                    let a = arg_type(&ty, i)?;
                    let ws = self.load_words(&flat(&a), env, off);
                    off += 8 * ws.len() as i32;
                    words.extend(self.copy_words(&a, &ws, dir)?);
                }
                Ok(self.record(&words))
            }
        }
    }

    /// Chain `c`'s environment `env` (null when it captures nothing), copied if it is to be.
    fn copy_chain_env(&mut self, c: super::ChainId, env: Value, dir: Direction, depth: usize) -> R<Value> {
        let copy = self.ext1(dir.test(), vec![env])?;
        let r = self.branch(
            copy,
            &[ir::Type::Ptr],
            &mut |l| Ok(vec![l.copy_chain_record(c, env, dir, depth)?]),
            &mut |_| Ok(vec![env]),
        )?;
        Ok(r[0])
    }

    /// A copy of chain `c`'s environment record `env`: its captured values, each copied as its
    /// shape and type say.
    fn copy_chain_record(&mut self, c: super::ChainId, env: Value, dir: Direction, depth: usize) -> R<Value> {
        let ch = self.chain(c).clone();
        let mut words = Vec::new();
        let mut off = 0;
        for (_, shape, ty) in &ch.fv {
            let mut tys = Vec::new();
            Self::shape_types(shape, &mut tys);
            let ws = self.load_words(&tys, env, off);
            off += 8 * tys.len() as i32;
            words.extend(self.copy_shaped(shape, ty, &ws, dir, depth)?);
        }
        Ok(self.record(&words))
    }

    /// The words of a captured value of shape `s` and type `t`, copied as [`Self::copy_words`]
    /// copies (a closure known statically has its environment and arguments copied in place of
    /// a tag's).
    fn copy_shaped(&mut self, s: &Shape, t: &Type, words: &[Value], dir: Direction, depth: usize) -> R<Vec<Value>> {
        if depth > MAX_SHAPE_DEPTH {
            return Err(LowerError::internal("closures nested too deep to copy"));
        }
        let width = |s: &Shape| {
            let mut tys = Vec::new();
            Self::shape_types(s, &mut tys);
            tys.len()
        };
        Ok(match s {
            Shape::Unit => Vec::new(),
            Shape::Word(_) | Shape::Delta => self.copy_words(t, words, dir)?,
            Shape::Dyn(ty) => self.copy_words(ty, words, dir)?,
            Shape::Tuple(ss) => {
                let Type::Tuple(ts) = t else { return Err(LowerError::internal(format!("a tuple shape of type {t}"))) };
                let mut out = Vec::new();
                let mut at = 0;
                for (s, t) in ss.iter().zip(ts.iter()) {
                    let n = width(s);
                    out.extend(self.copy_shaped(s, t, &words[at..at + n], dir, depth + 1)?);
                    at += n;
                }
                out
            }
            Shape::Lam(c, has_env, args) => {
                let mut out = Vec::new();
                let mut at = 0;
                if *has_env {
                    out.push(self.copy_chain_env(*c, words[0], dir, depth + 1)?);
                    at = 1;
                }
                let ch = self.chain(*c).clone();
                for (i, s) in args.iter().enumerate() {
                    let n = width(s);
                    out.extend(self.copy_shaped(s, &ch.arg(i)?, &words[at..at + n], dir, depth + 1)?);
                    at += n;
                }
                out
            }
            Shape::Prim(_, ty, args) => {
                let mut out = Vec::new();
                let mut at = 0;
                for (i, s) in args.iter().enumerate() {
                    let n = width(s);
                    out.extend(self.copy_shaped(s, &arg_type(ty, i)?, &words[at..at + n], dir, depth + 1)?);
                    at += n;
                }
                out
            }
        })
    }
}

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
//! copied only if it was made since the mark (`nabla_arena_since`), a bag or map made since the
//! mark is *kept* (taken out of the memory being freed, not copied), and anything older is left
//! where it is — the release does not touch it. Copying back copies exactly what lies in the
//! side arena (`nabla_arena_in_side`). Parts compaction cannot copy (closures' environments,
//! group records, changes' payloads, maps whose values hold pointers) are *held*
//! (`nabla_arena_hold`): older than the mark they stay where they are; made since it, they
//! abandon the compaction, which then frees nothing and waits for twice as much next time. A loop whose body allocates nothing takes no mark: lowering emits the mark and
//! the checks, records them as a [`Scope`], and once every function exists
//! ([`Lowerer::drop_idle_scopes`]) turns the mark of a scope whose instructions cannot allocate
//! (directly or through the functions they call) into a constant and its checks into `false`.

use frontend::types::Type;

use super::value::flat;
use super::{Lowerer, R};
use crate::ir::{self, BinaryOp, Value};

/// Can compaction copy (or keep) the parts of a value of type `t` made since the mark? Other
/// parts (closures' environments, group records, changes' payloads, maps whose values hold
/// pointers) are only *held*: older than the mark they stay where they are, made since it they
/// abandon the compaction.
fn copyable(t: &Type) -> bool {
    match t {
        Type::Int | Type::Real | Type::Bool | Type::Unit => true,
        Type::Tuple(ts) => ts.iter().all(copyable),
        Type::Array(e) => copyable(e),
        // Bag keys are words kept by the runtime (the `Key` class: no pointers).
        Type::Bag(_) => true,
        Type::Map(_, v) => !has_pointers(v),
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
                if copyable(t) {
                    let mut back = l.copy_words(t, &out, Direction::Back)?;
                    back.push(twice);
                    return Ok(back);
                }
                // Abandoned (negative): nothing was freed, the words are still good; the next
                // attempt waits for twice the bytes made so far.
                let zero = l.b().iconst(0);
                let abandoned = l.b().icmp(ir::Cmp::Lt, survivor, zero);
                let mut tys: Vec<ir::Type> = next.iter().map(|v| l.vty(*v)).collect();
                tys.push(ir::Type::I64);
                l.branch(
                    abandoned,
                    &tys,
                    &mut |l| {
                        let mut same = next.clone();
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
                let test = match dir {
                    Direction::Out => "nabla_arena_since",
                    Direction::Back => "nabla_arena_in_side",
                };
                let copy = self.ext1(test, vec![a])?;
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
            Type::Map(_, v) if dir == Direction::Out && !has_pointers(v) => {
                Ok(vec![self.ext1("nabla_arena_keep_map", vec![words[0]])?])
            }
            Type::Map(..) if dir == Direction::Out => {
                self.ext("nabla_arena_hold_map", vec![words[0]])?;
                Ok(words.to_vec())
            }
            // A closure's environment, a change's payload (the second word), a group's record.
            Type::Fun(..) | Type::Dual(_) | Type::Delta(_) if dir == Direction::Out => {
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Out,
    Back,
}

//! Compaction of loop-carried values: memory reuse for long `iterate`, `while` and `fold` loops.
//!
//! Compiled code allocates from a per-call arena that is freed when the call returns. A loop
//! whose carried value is rebuilt each iteration (`iterate n (fun a -> map g a) a0`) would need
//! memory for every array it ever made. When the carried type holds arrays (and only arrays,
//! tuples and scalars: no bags, maps or closures, which live outside the arena or capture
//! arbitrary values), the loop takes an arena mark before its first iteration, and after an
//! iteration that allocated more than a bound since the mark it copies the carried value out
//! (into a side arena), frees everything since the mark, and copies it back
//! (`runtime::native::CallCtx::compact_begin`). This is sound because values are immutable —
//! nothing made before the mark points at anything made after it — and the loop's other live
//! values were made before the mark, so the carried value is the only way into that memory.
//! The bound doubles with the survivor's size, so copying costs O(1) per byte allocated.

use frontend::types::Type;

use super::value::flat;
use super::{Lowerer, R};
use crate::ir::{self, BinaryOp, Value};

/// Does a value of type `t` hold arrays, and nothing compaction cannot copy?
pub(crate) fn compactable(t: &Type) -> bool {
    fn copyable(t: &Type) -> bool {
        match t {
            Type::Int | Type::Real | Type::Bool | Type::Unit => true,
            Type::Tuple(ts) => ts.iter().all(copyable),
            Type::Array(e) => copyable(e),
            _ => false,
        }
    }
    copyable(t) && holds_arrays(t)
}

fn holds_arrays(t: &Type) -> bool {
    match t {
        Type::Array(_) => true,
        Type::Tuple(ts) => ts.iter().any(holds_arrays),
        _ => false,
    }
}

impl Lowerer<'_> {
    /// `counted_loop` over a carried value of type `t` (the words `init`), compacting it as the
    /// module comment says when `t` is [`compactable`].
    pub(crate) fn compacting_loop(
        &mut self,
        t: &Type,
        n: Value,
        init: Vec<Value>,
        body: &mut dyn FnMut(&mut Self, Value, Vec<Value>) -> R<Vec<Value>>,
    ) -> R<Vec<Value>> {
        if !compactable(t) {
            return self.counted_loop(n, init, body);
        }
        let mark = self.ext1("nabla_arena_mark", vec![])?;
        let words = init.len();
        let mut init = init;
        // The last carried word: the bound the next compaction waits for (twice the survivor).
        init.push(self.b().iconst(0));
        let mut out = self.counted_loop(n, init, &mut |l, i, acc| {
            let next = body(l, i, acc[..words].to_vec())?;
            l.compact_step(t, mark, acc[words], next)
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
        if !compactable(t) {
            return self.while_loop(init, cond, body);
        }
        let mark = self.ext1("nabla_arena_mark", vec![])?;
        let words = init.len();
        let mut init = init;
        init.push(self.b().iconst(0));
        let mut out = self.while_loop(init, &mut |l, acc| cond(l, acc[..words].to_vec()), &mut |l, acc| {
            let next = body(l, acc[..words].to_vec())?;
            l.compact_step(t, mark, acc[words], next)
        })?;
        out.truncate(words);
        Ok(out)
    }

    /// After one iteration made `next`: if the loop allocated more than `threshold` since `mark`,
    /// copy `next` out, release to the mark and copy it back. Gives the carried words followed by
    /// the next threshold.
    fn compact_step(&mut self, t: &Type, mark: Value, threshold: Value, next: Vec<Value>) -> R<Vec<Value>> {
        let go = self.ext1("nabla_arena_compact_begin", vec![mark, threshold])?;
        let mut tys: Vec<ir::Type> = next.iter().map(|v| self.vty(*v)).collect();
        tys.push(ir::Type::I64);
        self.branch(
            go,
            &tys,
            &mut |l| {
                let out = l.copy_words(t, &next)?;
                let survivor = l.ext1("nabla_arena_compact_end", vec![mark])?;
                let mut back = l.copy_words(t, &out)?;
                back.push(l.b().binary(BinaryOp::Iadd, survivor, survivor));
                Ok(back)
            },
            &mut |_| {
                let mut same = next.clone();
                same.push(threshold);
                Ok(same)
            },
        )
    }

    /// A deep copy of the words of a [`compactable`] value of type `t`: fresh arrays all the way
    /// down, allocated where allocation currently goes.
    fn copy_words(&mut self, t: &Type, words: &[Value]) -> R<Vec<Value>> {
        match t {
            Type::Array(e) => {
                let et = flat(e);
                let stride = 8 * et.len() as u32;
                let a = words[0];
                let n = self.b().array_len(a);
                let out = self.b().new_array(n, stride);
                let deep = holds_arrays(e);
                self.counted_loop(n, vec![], &mut |l, i, _| {
                    let from = l.b().elem_addr(a, i, stride);
                    let ws = l.load_words(&et, from, 0);
                    let ws = if deep { l.copy_words(e, &ws)? } else { ws };
                    let to = l.b().elem_addr(out, i, stride);
                    l.store_words(&ws, to, 0);
                    Ok(vec![])
                })?;
                Ok(vec![out])
            }
            Type::Tuple(ts) => {
                let mut out = Vec::with_capacity(words.len());
                let mut at = 0;
                for c in ts.iter() {
                    let k = flat(c).len();
                    let part = &words[at..at + k];
                    out.extend(if holds_arrays(c) { self.copy_words(c, part)? } else { part.to_vec() });
                    at += k;
                }
                Ok(out)
            }
            _ => Ok(words.to_vec()),
        }
    }
}

//! The `extern "C"` support functions compiled code calls (catalogue: `anf::ir::support`). Each
//! takes the call context first. None lets a panic cross the FFI boundary: bodies that could
//! panic run under `catch_unwind`, and every failure becomes the context's error and status.

use std::panic::{catch_unwind, AssertUnwindSafe};

use anf::ir::TrapCode;
use jit::CtxHeader;

use super::collections::{width, Bag, CollectionError, Map};
use super::{CallCtx, NativeError, STATUS_COLLECTION, STATUS_PANIC};

/// Runs `f` on the context; a failure or a panic records an error and gives `fallback`.
///
/// # Safety
/// `ctx` must be the header of a live `CallCtx`.
pub(super) unsafe fn guard<T>(
    ctx: *mut CtxHeader,
    fallback: T,
    f: impl FnOnce(&mut CallCtx) -> Result<T, NativeError>,
) -> T {
    let cx = ctx as *mut CallCtx;
    let result = catch_unwind(AssertUnwindSafe(|| f(&mut *cx)));
    match result {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            (*cx).fail(e);
            fallback
        }
        Err(_) => {
            (*cx).fail(NativeError::new(STATUS_PANIC, "internal error: a runtime support function panicked"));
            fallback
        }
    }
}

/// The `n` words at `p` (nothing for `n == 0`, whatever `p` is).
///
/// # Safety
/// For `n > 0`, `p` must point to `n` readable, aligned words that outlive the borrow.
unsafe fn words<'a>(p: *const u64, n: usize) -> &'a [u64] {
    if n == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(p, n)
    }
}

/// Records a trap reported by compiled code (`anf::ir::TrapCode`, its site and its payload).
pub unsafe extern "C" fn nabla_trap(ctx: *mut CtxHeader, code: i64, site: i64, a: i64, b: i64) {
    let message = match TrapCode::from_code(code) {
        Some(t) => t.message(a, b),
        None => format!("internal error: unknown trap code {code}"),
    };
    guard(ctx, (), |_| Err(NativeError::new(code, message).at(site, vec![a, b])))
}

/// The arena's slow path: a new chunk, or null and an out-of-memory error.
pub unsafe extern "C" fn nabla_alloc(ctx: *mut CtxHeader, bytes: i64) -> *mut u8 {
    guard(ctx, std::ptr::null_mut(), |cx| cx.alloc(bytes))
}

/// A mark of the arena's position before a compacting loop (`CallCtx::arena_mark`).
pub unsafe extern "C" fn nabla_arena_mark(ctx: *mut CtxHeader) -> i64 {
    guard(ctx, 0, |cx| cx.arena_mark())
}

/// Whether one iteration of `build`/`map`/`zipWith` should compact its element
/// (`CallCtx::scope_begin`).
pub unsafe extern "C" fn nabla_arena_scope_begin(ctx: *mut CtxHeader, mark: i64, threshold: i64) -> bool {
    guard(ctx, false, |cx| Ok(cx.scope_begin(mark, threshold)))
}

/// During a compaction: was `p` made since the mark (`CallCtx::allocated_since`)?
pub unsafe extern "C" fn nabla_arena_since(ctx: *mut CtxHeader, p: *const u8) -> bool {
    guard(ctx, false, |cx| Ok(cx.allocated_since(p)))
}

/// During a compaction: is `p` a copy in the side arena (`CallCtx::in_side_arena`)?
pub unsafe extern "C" fn nabla_arena_in_side(ctx: *mut CtxHeader, p: *const u8) -> bool {
    guard(ctx, false, |cx| Ok(cx.in_side_arena(p)))
}

/// During a compaction: keeps a bag the survivor holds (`CallCtx::keep_bag`).
pub unsafe extern "C" fn nabla_arena_keep_bag(ctx: *mut CtxHeader, bag: *mut Bag) -> *mut Bag {
    guard(ctx, bag, |cx| Ok(cx.keep_bag(bag)))
}

/// During a compaction: the survivor holds `p`, which cannot be copied (`CallCtx::hold`).
pub unsafe extern "C" fn nabla_arena_hold(ctx: *mut CtxHeader, p: *const u8) {
    guard(ctx, (), |cx| {
        cx.hold(p);
        Ok(())
    })
}

/// During a compaction: the value slots of a kept map whose values hold pointers
/// (`CallCtx::map_slots`).
pub unsafe extern "C" fn nabla_arena_map_slots(ctx: *mut CtxHeader, map: *mut Map, back: bool) -> i64 {
    guard(ctx, -1, |cx| Ok(cx.map_slots(map, back)))
}

/// Slot `i` of the slots from `base` (`CallCtx::map_slot`).
pub unsafe extern "C" fn nabla_arena_map_slot(ctx: *mut CtxHeader, base: i64, i: i64) -> *mut u64 {
    guard(ctx, std::ptr::null_mut(), |cx| cx.map_slot(base, i))
}

/// Drops the slots from `base` (`CallCtx::map_slots_end`).
pub unsafe extern "C" fn nabla_arena_map_slots_end(ctx: *mut CtxHeader, base: i64) {
    guard(ctx, (), |cx| {
        cx.map_slots_end(base);
        Ok(())
    })
}

/// During a compaction: keeps a map the survivor holds (`CallCtx::keep_map`).
pub unsafe extern "C" fn nabla_arena_keep_map(ctx: *mut CtxHeader, map: *mut Map) -> *mut Map {
    guard(ctx, map, |cx| Ok(cx.keep_map(map)))
}

/// Whether a compacting loop should compact now (`CallCtx::compact_begin`).
pub unsafe extern "C" fn nabla_arena_compact_begin(ctx: *mut CtxHeader, mark: i64, threshold: i64) -> bool {
    guard(ctx, false, |cx| Ok(cx.compact_begin(mark, threshold)))
}

/// Frees a compacting loop's memory since its mark (`CallCtx::compact_end`).
pub unsafe extern "C" fn nabla_arena_compact_end(ctx: *mut CtxHeader, mark: i64) -> i64 {
    guard(ctx, 0, |cx| Ok(cx.compact_end(mark)))
}

/// `floor`.
pub unsafe extern "C" fn nabla_floor(_ctx: *mut CtxHeader, x: f64) -> f64 {
    x.floor()
}
/// `round`: ties away from zero.
pub unsafe extern "C" fn nabla_round(_ctx: *mut CtxHeader, x: f64) -> f64 {
    x.round()
}
/// `toInt` after its range check: truncation toward zero (saturating, so never undefined).
pub unsafe extern "C" fn nabla_to_int(_ctx: *mut CtxHeader, x: f64) -> i64 {
    x as i64
}
/// `sin`.
pub unsafe extern "C" fn nabla_sin(_ctx: *mut CtxHeader, x: f64) -> f64 {
    x.sin()
}
/// `cos`.
pub unsafe extern "C" fn nabla_cos(_ctx: *mut CtxHeader, x: f64) -> f64 {
    x.cos()
}
/// `tan`.
pub unsafe extern "C" fn nabla_tan(_ctx: *mut CtxHeader, x: f64) -> f64 {
    x.tan()
}
/// `exp`.
pub unsafe extern "C" fn nabla_exp(_ctx: *mut CtxHeader, x: f64) -> f64 {
    x.exp()
}
/// `log` (natural).
pub unsafe extern "C" fn nabla_log(_ctx: *mut CtxHeader, x: f64) -> f64 {
    x.ln()
}
/// `tanh`.
pub unsafe extern "C" fn nabla_tanh(_ctx: *mut CtxHeader, x: f64) -> f64 {
    x.tanh()
}
/// `sigmoid x = 1 / (1 + exp (-x))`.
pub unsafe extern "C" fn nabla_sigmoid(_ctx: *mut CtxHeader, x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}
/// `x ^ y` on reals.
pub unsafe extern "C" fn nabla_pow(_ctx: *mut CtxHeader, x: f64, y: f64) -> f64 {
    x.powf(y)
}

/// A new empty bag of keys `key_words` wide.
pub unsafe extern "C" fn nabla_bag_new(ctx: *mut CtxHeader, key_words: i64) -> *mut Bag {
    guard(ctx, std::ptr::null_mut(), |cx| Ok(cx.fresh_bag(width(key_words)?)))
}

/// A collection error of a multiplicity-changing function, located: an overflow is
/// `TrapCode::BagOverflow` at `site`.
fn at_site(e: CollectionError, site: i64) -> NativeError {
    match e {
        CollectionError::Overflow => {
            let code = TrapCode::BagOverflow;
            NativeError::new(code.code(), code.message(0, 0)).at(site, Vec::new())
        }
        e => e.into(),
    }
}

/// Adds `mult` copies of the key at `key` to a fresh bag, in place (an overflow fails at `site`).
pub unsafe extern "C" fn nabla_bag_insert(ctx: *mut CtxHeader, bag: *mut Bag, key: *const u64, mult: i64, site: i64) {
    guard(ctx, (), |_| {
        let bag = &mut *bag;
        bag.insert(words(key, bag.key_words()), mult).map_err(|e| at_site(e, site))
    })
}

/// Adds `n·m` copies of the key at `key` to a fresh bag, in place (bag fusion's scaled insert;
/// an overflow of the product or the sum fails at `site`).
pub unsafe extern "C" fn nabla_bag_insert_scaled(
    ctx: *mut CtxHeader,
    bag: *mut Bag,
    key: *const u64,
    n: i64,
    m: i64,
    site: i64,
) {
    guard(ctx, (), |_| {
        let bag = &mut *bag;
        let mult = n.checked_mul(m).ok_or_else(|| at_site(CollectionError::Overflow, site))?;
        bag.insert(words(key, bag.key_words()), mult).map_err(|e| at_site(e, site))
    })
}

/// `a·b`, or `TrapCode::BagOverflow` at `site` (bag fusion's product of two multiplicity
/// factors).
pub unsafe extern "C" fn nabla_mul_checked(ctx: *mut CtxHeader, a: i64, b: i64, site: i64) -> i64 {
    guard(ctx, 0, |_| a.checked_mul(b).ok_or_else(|| at_site(CollectionError::Overflow, site)))
}

/// A new bag, the sum of two.
pub unsafe extern "C" fn nabla_bag_merge(ctx: *mut CtxHeader, a: *const Bag, b: *const Bag, site: i64) -> *mut Bag {
    guard(ctx, std::ptr::null_mut(), |cx| {
        let merged = (*a).merge(&*b).map_err(|e| at_site(e, site))?;
        Ok(cx.new_bag(merged))
    })
}

/// Adds every entry of `src` to `dst` in place (`dst` must be a bag no one else holds).
pub unsafe extern "C" fn nabla_bag_add_into(ctx: *mut CtxHeader, dst: *mut Bag, src: *const Bag, site: i64) {
    nabla_bag_add_scaled(ctx, dst, src, 1, site)
}

/// Adds every entry of `src`, its multiplicity times `m`, to `dst` in place: the bag group's
/// `dst · (src scaled by m)`, a bag fold's step (`dst` must be a bag no one else holds).
pub unsafe extern "C" fn nabla_bag_add_scaled(ctx: *mut CtxHeader, dst: *mut Bag, src: *const Bag, m: i64, site: i64) {
    guard(ctx, (), |_| {
        if std::ptr::eq(dst, src) {
            let factor = m.checked_add(1).ok_or_else(|| at_site(CollectionError::Overflow, site))?;
            let scaled = (*src).scale(factor).map_err(|e| at_site(e, site))?;
            *dst = scaled;
            return Ok(());
        }
        (*dst).add_scaled(&*src, m).map_err(|e| at_site(e, site))
    })
}

/// A new bag with every multiplicity multiplied by `m` (zero entries dropped).
pub unsafe extern "C" fn nabla_bag_scale(ctx: *mut CtxHeader, a: *const Bag, m: i64, site: i64) -> *mut Bag {
    guard(ctx, std::ptr::null_mut(), |cx| {
        // Into an emptied bag of an earlier call: no new table.
        let b = cx.fresh_bag((*a).key_words());
        (*b).add_scaled(&*a, m).map_err(|e| at_site(e, site))?;
        Ok(b)
    })
}

/// Do two bags hold the same multiplicities?
pub unsafe extern "C" fn nabla_bag_eq(_ctx: *mut CtxHeader, a: *const Bag, b: *const Bag) -> u8 {
    (*a == *b) as u8
}

/// A new bag with every multiplicity negated.
pub unsafe extern "C" fn nabla_bag_negate(ctx: *mut CtxHeader, a: *const Bag, site: i64) -> *mut Bag {
    guard(ctx, std::ptr::null_mut(), |cx| {
        let negated = (*a).negate().map_err(|e| at_site(e, site))?;
        Ok(cx.new_bag(negated))
    })
}

/// A new bag equal to `a` (to update without touching `a`).
pub unsafe extern "C" fn nabla_bag_clone(ctx: *mut CtxHeader, a: *const Bag) -> *mut Bag {
    guard(ctx, std::ptr::null_mut(), |cx| {
        let b = cx.fresh_bag((*a).key_words());
        (*b).add_scaled(&*a, 1)?;
        Ok(b)
    })
}

/// The multiplicity of the key at `key`.
pub unsafe extern "C" fn nabla_bag_count(_ctx: *mut CtxHeader, bag: *const Bag, key: *const u64) -> i64 {
    let bag = &*bag;
    bag.count(words(key, bag.key_words()))
}

/// The number of distinct keys with a nonzero multiplicity.
pub unsafe extern "C" fn nabla_bag_len(_ctx: *mut CtxHeader, bag: *const Bag) -> i64 {
    (*bag).len() as i64
}

/// An arena array of `{key words, multiplicity}` records sorted by key. Compiled code never
/// writes to it, so the array is made once per state of the bag and handed out again until the
/// bag changes (a fold over a bag inside a loop sorts it once).
pub unsafe extern "C" fn nabla_bag_entries(ctx: *mut CtxHeader, bag: *mut Bag) -> *mut u8 {
    guard(ctx, std::ptr::null_mut(), |cx| {
        let bag = &mut *bag;
        if let Some(array) = bag.cached_entries() {
            return Ok(array);
        }
        let rec = bag.key_words() + 1;
        let (array, elems) = cx.new_array_slots(bag.len(), rec)?;
        bag.write_sorted_records(std::slice::from_raw_parts_mut(elems, bag.len() * rec), &mut cx.sort_scratch);
        bag.cache_entries(array);
        cx.note_cached(bag);
        Ok(array)
    })
}

/// The records of [`nabla_bag_entries`] in no particular order (the sorted array if there is
/// one already), for folds whose result cannot depend on the order (`anf::opt` decides).
pub unsafe extern "C" fn nabla_bag_entries_unordered(ctx: *mut CtxHeader, bag: *mut Bag) -> *mut u8 {
    guard(ctx, std::ptr::null_mut(), |cx| {
        let bag = &mut *bag;
        if let Some(array) = bag.cached_entries().or(bag.cached_unordered_entries()) {
            return Ok(array);
        }
        let rec = bag.key_words() + 1;
        let (array, elems) = cx.new_array_slots(bag.len(), rec)?;
        bag.write_records(std::slice::from_raw_parts_mut(elems, bag.len() * rec));
        bag.cache_unordered_entries(array);
        cx.note_cached(bag);
        Ok(array)
    })
}

/// Per-site fallback: the interpreted site `k` evaluated at the words at `args`, its value's words
/// written at `out` (`crate::sites`).
pub unsafe extern "C" fn nabla_interp(ctx: *mut CtxHeader, k: i64, args: *const u64, out: *mut u64) {
    guard(ctx, (), |cx| {
        let sites = cx.sites().ok_or_else(|| {
            NativeError::new(super::STATUS_INTERPRETED, "internal error: no interpreted sites for this call")
        })?;
        sites.call(cx, k, args, out)
    })
}

/// A `vjp`'s cotangent whose array at the path `shape`/`idx` (`count` indices) has length `m`
/// where the output's has `n`, or a tangent against the dual vector it is paired with (`ctCheck'`,
/// the kind in `shape`'s sign: `anf::ir::shape_check_message`): fails with
/// `TrapCode::CotangentLength` at `site`.
pub unsafe extern "C" fn nabla_cotangent_mismatch(
    ctx: *mut CtxHeader,
    n: i64,
    m: i64,
    shape: i64,
    idx: *const u64,
    count: i64,
    site: i64,
) {
    guard(ctx, (), |_| {
        let idx: Vec<i64> = words(idx, usize::try_from(count).unwrap_or(0)).iter().map(|w| *w as i64).collect();
        let code = TrapCode::CotangentLength;
        let message = anf::ir::shape_check_message(shape, &idx, n, m)
            .unwrap_or_else(|| "internal error: a shape check's path without its indices".to_string());
        Err(NativeError::new(code.code(), message).at(site, vec![n, m]))
    })
}

/// A new empty map with the given key and value widths.
pub unsafe extern "C" fn nabla_map_new(ctx: *mut CtxHeader, key_words: i64, value_words: i64) -> *mut Map {
    guard(ctx, std::ptr::null_mut(), |cx| Ok(cx.fresh_map(width(key_words)?, width(value_words)?)))
}

/// Binds the key at `key` to the value at `value` in a fresh map, in place.
pub unsafe extern "C" fn nabla_map_set(ctx: *mut CtxHeader, map: *mut Map, key: *const u64, value: *const u64) {
    guard(ctx, (), |_| {
        let map = &mut *map;
        Ok(map.set(words(key, map.key_words()), words(value, map.value_words()))?)
    })
}

/// Binds a map literal's key at `key` to the value at `value` in place, or fails with
/// `TrapCode::DuplicateKey` at `site` (payload: the key's words) if the key is bound already.
pub unsafe extern "C" fn nabla_map_insert_unique(
    ctx: *mut CtxHeader,
    map: *mut Map,
    key: *const u64,
    value: *const u64,
    site: i64,
) {
    guard(ctx, (), |_| {
        let map = &mut *map;
        let k = words(key, map.key_words());
        if map.get(k).is_some() {
            let code = TrapCode::DuplicateKey;
            let payload = k.iter().map(|w| *w as i64).collect();
            return Err(NativeError::new(code.code(), code.message(0, 0)).at(site, payload));
        }
        Ok(map.set(k, words(value, map.value_words()))?)
    })
}

/// Unbinds the key at `key` in a fresh map, in place.
pub unsafe extern "C" fn nabla_map_remove(ctx: *mut CtxHeader, map: *mut Map, key: *const u64) {
    guard(ctx, (), |_| {
        let map = &mut *map;
        map.remove(words(key, map.key_words()));
        Ok(())
    })
}

/// A new map equal to `a`.
pub unsafe extern "C" fn nabla_map_clone(ctx: *mut CtxHeader, a: *const Map) -> *mut Map {
    guard(ctx, std::ptr::null_mut(), |cx| Ok(cx.new_map((*a).clone())))
}

/// Copies the value bound to the key at `key` to `out` and gives 1, or gives 0 if unbound.
pub unsafe extern "C" fn nabla_map_get(_ctx: *mut CtxHeader, map: *const Map, key: *const u64, out: *mut u64) -> u8 {
    let map = &*map;
    match map.get(words(key, map.key_words())) {
        Some(v) => {
            if !v.is_empty() {
                std::ptr::copy_nonoverlapping(v.as_ptr(), out, v.len());
            }
            1
        }
        None => 0,
    }
}

/// The number of keys.
pub unsafe extern "C" fn nabla_map_len(_ctx: *mut CtxHeader, map: *const Map) -> i64 {
    (*map).len() as i64
}

/// An arena array of `{key words, value words}` records sorted by key.
pub unsafe extern "C" fn nabla_map_entries(ctx: *mut CtxHeader, map: *const Map) -> *mut u8 {
    guard(ctx, std::ptr::null_mut(), |cx| {
        let map = &*map;
        let (kw, vw) = (map.key_words(), map.value_words());
        let (array, elems) = cx.new_array_slots(map.len(), kw + vw)?;
        let out = std::slice::from_raw_parts_mut(elems, map.len() * (kw + vw));
        map.write_sorted_records(out, &mut cx.sort_scratch);
        Ok(array)
    })
}

/// `dst[k] ⊕ m·v` for one key of a `mapGroup` whose values are one word in builtin group
/// `kind` (`GroupKind`: 0 Int, 1 Real, 2 Bag), in place; the result of `group.scale` then
/// `group.op_into` (`anf::lower::groups`) on a map with that one key, without the scaled copy:
/// the scaled value is dropped if it is the zero, else added to the bound value (a new bag when
/// the key is unbound), and a key whose value becomes the zero is unbound. `dst` and its bags
/// are the caller's own (a fold's accumulator).
unsafe fn map_add_scaled_at(
    cx: &mut CallCtx,
    dst: &mut Map,
    k: &[u64],
    v: u64,
    m: i64,
    kind: i64,
    site: i64,
) -> Result<(), NativeError> {
    let unbind = match kind {
        // `intGroup`: `imul` then `iadd`, wrapping like Int arithmetic.
        0 => {
            let s = (v as i64).wrapping_mul(m);
            if s == 0 {
                return Ok(());
            }
            // (An unbound key counts as zero; a zero sum unbinds it.)
            return Ok(dst.add_int(k, s as u64)?);
        }
        // `realGroup`: `v · toReal m`, then `+` (one key's sum: no reassociation).
        1 => {
            let s = f64::from_bits(v) * m as f64;
            if s == 0.0 {
                return Ok(());
            }
            match dst.slot(k)? {
                (cur, true) => {
                    cur[0] = s.to_bits();
                    false
                }
                (cur, false) => {
                    let n = f64::from_bits(cur[0]) + s;
                    cur[0] = n.to_bits();
                    n == 0.0
                }
            }
        }
        // `bagGroup`: every multiplicity times `m`, checked, added in place.
        2 => {
            let src = &*(v as *const Bag);
            if m == 0 || src.is_empty() {
                return Ok(());
            }
            let (cur, unbound) = dst.slot(k)?;
            if unbound {
                let b = cx.fresh_bag(src.key_words());
                cur[0] = b as u64;
                // (A failure ends the call: the accumulator is never seen again.)
                (*b).add_scaled(src, m).map_err(|e| at_site(e, site))?;
                return Ok(());
            }
            let b = cur[0] as *mut Bag;
            if std::ptr::eq(b, src) {
                let scaled = src.scale(m).map_err(|e| at_site(e, site))?;
                (*b).add_scaled(&scaled, 1).map_err(|e| at_site(e, site))?;
            } else {
                (*b).add_scaled(src, m).map_err(|e| at_site(e, site))?;
            }
            (*b).is_empty()
        }
        _ => {
            return Err(NativeError::new(
                STATUS_COLLECTION,
                format!("internal error: map_add_scaled of group kind {kind}"),
            ))
        }
    };
    if unbind {
        dst.remove(k);
    }
    Ok(())
}

/// Checks that `map` holds one-word values (what `map_add_scaled` handles).
fn one_word_values(map: &Map) -> Result<(), NativeError> {
    if map.value_words() != 1 {
        return Err(CollectionError::WidthMismatch { expected: 1, found: map.value_words() }.into());
    }
    Ok(())
}

/// `dst ⊕ m·src` in place for a `mapGroup` over one-word values in builtin group `kind` (see
/// [`map_add_scaled_at`]): a map fold's step without building the scaled map. Keys are
/// independent (one key's update reads no other), so `src` is walked unsorted.
pub unsafe extern "C" fn nabla_map_add_scaled(
    ctx: *mut CtxHeader,
    dst: *mut Map,
    src: *const Map,
    m: i64,
    kind: i64,
    site: i64,
) {
    guard(ctx, (), |cx| {
        let d = &mut *dst;
        one_word_values(d)?;
        one_word_values(&*src)?;
        if (*src).key_words() != d.key_words() {
            return Err(CollectionError::WidthMismatch { expected: d.key_words(), found: (*src).key_words() }.into());
        }
        if std::ptr::eq(dst, src) {
            let entries: Vec<(Vec<u64>, u64)> = d.entries().map(|(k, v)| (k.to_vec(), v[0])).collect();
            for (k, v) in entries {
                map_add_scaled_at(cx, d, &k, v, m, kind, site)?;
            }
            return Ok(());
        }
        for (k, v) in (*src).entries() {
            map_add_scaled_at(cx, d, k, v[0], m, kind, site)?;
        }
        Ok(())
    })
}

/// `dst ⊕ m·{key -> value}` in place (see [`map_add_scaled_at`]): `opt::maps` fuses a singleton
/// map made only to be added (`nabla_map_new`, one `nabla_map_set`, `nabla_map_add_scaled`) into
/// this call, so the map is never built.
pub unsafe extern "C" fn nabla_map_add_scaled_key(
    ctx: *mut CtxHeader,
    dst: *mut Map,
    key: *const u64,
    value: *const u64,
    m: i64,
    kind: i64,
    site: i64,
) {
    guard(ctx, (), |cx| {
        let d = &mut *dst;
        let k = words(key, d.key_words());
        if kind == 0 {
            // `intGroup` (the common case: counts): one probe, wrapping, cannot fail.
            return Ok(d.add_int(k, (*value as i64).wrapping_mul(m) as u64)?);
        }
        one_word_values(d)?;
        map_add_scaled_at(cx, d, k, *value, m, kind, site)
    })
}

/// The address of support function `name`.
pub fn address(name: &str) -> Option<*const u8> {
    let p = match name {
        "nabla_arena_mark" => nabla_arena_mark as *const u8,
        "nabla_arena_compact_begin" => nabla_arena_compact_begin as *const u8,
        "nabla_arena_scope_begin" => nabla_arena_scope_begin as *const u8,
        "nabla_arena_since" => nabla_arena_since as *const u8,
        "nabla_arena_in_side" => nabla_arena_in_side as *const u8,
        "nabla_arena_keep_bag" => nabla_arena_keep_bag as *const u8,
        "nabla_arena_keep_map" => nabla_arena_keep_map as *const u8,
        "nabla_arena_hold" => nabla_arena_hold as *const u8,
        "nabla_arena_map_slots" => nabla_arena_map_slots as *const u8,
        "nabla_arena_map_slot" => nabla_arena_map_slot as *const u8,
        "nabla_arena_map_slots_end" => nabla_arena_map_slots_end as *const u8,
        "nabla_arena_compact_end" => nabla_arena_compact_end as *const u8,
        "nabla_sin" => nabla_sin as *const u8,
        "nabla_cos" => nabla_cos as *const u8,
        "nabla_tan" => nabla_tan as *const u8,
        "nabla_exp" => nabla_exp as *const u8,
        "nabla_log" => nabla_log as *const u8,
        "nabla_tanh" => nabla_tanh as *const u8,
        "nabla_sigmoid" => nabla_sigmoid as *const u8,
        "nabla_pow" => nabla_pow as *const u8,
        "nabla_floor" => nabla_floor as *const u8,
        "nabla_round" => nabla_round as *const u8,
        "nabla_to_int" => nabla_to_int as *const u8,
        "nabla_bag_new" => nabla_bag_new as *const u8,
        "nabla_bag_insert" => nabla_bag_insert as *const u8,
        "nabla_bag_insert_scaled" => nabla_bag_insert_scaled as *const u8,
        "nabla_mul_checked" => nabla_mul_checked as *const u8,
        "nabla_bag_merge" => nabla_bag_merge as *const u8,
        "nabla_bag_negate" => nabla_bag_negate as *const u8,
        "nabla_bag_add_into" => nabla_bag_add_into as *const u8,
        "nabla_bag_add_scaled" => nabla_bag_add_scaled as *const u8,
        "nabla_bag_scale" => nabla_bag_scale as *const u8,
        "nabla_bag_eq" => nabla_bag_eq as *const u8,
        "nabla_map_insert_unique" => nabla_map_insert_unique as *const u8,
        "nabla_bag_clone" => nabla_bag_clone as *const u8,
        "nabla_bag_count" => nabla_bag_count as *const u8,
        "nabla_bag_len" => nabla_bag_len as *const u8,
        "nabla_bag_entries" => nabla_bag_entries as *const u8,
        "nabla_bag_entries_unordered" => nabla_bag_entries_unordered as *const u8,
        "nabla_map_new" => nabla_map_new as *const u8,
        "nabla_map_set" => nabla_map_set as *const u8,
        "nabla_map_remove" => nabla_map_remove as *const u8,
        "nabla_map_clone" => nabla_map_clone as *const u8,
        "nabla_map_get" => nabla_map_get as *const u8,
        "nabla_interp" => nabla_interp as *const u8,
        "nabla_cotangent_mismatch" => nabla_cotangent_mismatch as *const u8,
        "nabla_map_len" => nabla_map_len as *const u8,
        "nabla_map_entries" => nabla_map_entries as *const u8,
        "nabla_map_add_scaled" => nabla_map_add_scaled as *const u8,
        "nabla_map_add_scaled_key" => nabla_map_add_scaled_key as *const u8,
        jit::TRAP_SYMBOL => nabla_trap as *const u8,
        jit::ALLOC_SYMBOL => nabla_alloc as *const u8,
        _ => return None,
    };
    Some(p)
}

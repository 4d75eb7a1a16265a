//! What compiled code runs against: the per-call context (arena, collections, error), the
//! `extern "C"` support functions, and marshalling helpers that lay values out in memory.
//!
//! # Value layout
//! The authoritative description is `anf::ir::layout`; in short, every value is a list of 8-byte
//! words (`Int` i64, `Real` f64, `Bool` 0/1, `Unit` nothing, tuples concatenated, closures a tag
//! and an environment pointer), records are their words in 8-byte slots, arrays are
//! `[len: i64][elements]`, and bags and maps are pointers to [`Bag`] and [`Map`] objects owned by
//! the [`CallCtx`] that made them.
//!
//! # Lifetimes
//! Everything compiled code allocates (arena memory, bags, maps) lives until [`CallCtx::reset`].
//! A caller reads the results it needs (marshalling them out) and then resets the context, so
//! a context can serve any number of calls without growing.

mod arena;
mod collections;
mod support;

#[cfg(test)]
mod collections_model;
#[cfg(test)]
mod tests;

use anf::ir::{TrapCode, ARRAY_HEADER};
use jit::{CtxHeader, SupportTable, Word};

pub use arena::Arena;
pub use collections::{cmp_keys, Bag, CollectionError, Map};
pub use support::address;

/// Status for an error reported by a collection operation.
pub const STATUS_COLLECTION: i64 = 100;
/// Status for a panic caught inside a support function (a runtime bug).
pub const STATUS_PANIC: i64 = 101;

/// Words in an array's length header.
const HEADER_WORDS: usize = ARRAY_HEADER as usize / 8;

/// Default bound on one context's arena, in bytes.
pub const DEFAULT_ARENA_LIMIT: usize = 4 << 30;

/// Bytes a loop allocates before its carried value is compacted, at the least.
pub const DEFAULT_COMPACT_MIN: usize = 16 << 20;

/// An error raised while compiled code ran: the status it set, a message for the user, and where
/// it happened (the trap's site, which the engine maps back to a source span) with its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NativeError {
    pub status: i64,
    pub message: String,
    /// The failing site (`anf::ir::NO_SITE` when unknown).
    pub site: i64,
    /// The trap's payload words (for `DuplicateKey`, the key's words).
    pub payload: Vec<i64>,
}

impl NativeError {
    /// An error with status `status` and no site.
    pub fn new(status: i64, message: impl Into<String>) -> NativeError {
        NativeError { status, message: message.into(), site: anf::ir::NO_SITE, payload: Vec::new() }
    }

    /// The same error located at `site` with `payload`.
    pub fn at(mut self, site: i64, payload: Vec<i64>) -> NativeError {
        self.site = site;
        self.payload = payload;
        self
    }
}

impl std::fmt::Display for NativeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for NativeError {}

impl From<CollectionError> for NativeError {
    fn from(e: CollectionError) -> NativeError {
        NativeError::new(STATUS_COLLECTION, e.to_string())
    }
}

/// The state of compiled calls: header (read by compiled code), arena, collections, error.
///
/// It is always boxed so its address, which compiled code holds during a call, is stable.
#[repr(C)]
pub struct CallCtx {
    /// Must stay the first field: compiled code and support functions get a pointer to it.
    header: CtxHeader,
    arena: Arena,
    /// Where a loop's carried value is copied while the memory of its finished iterations is
    /// released (see [`CallCtx::compact_begin`]); allocation goes here while `in_side`.
    side: Arena,
    in_side: bool,
    /// A loop compacts once it has allocated more than this and twice its last survivor.
    compact_min: usize,
    // Boxed so that the pointers handed to compiled code stay put when the vectors grow.
    #[allow(clippy::vec_box)]
    bags: Vec<Box<Bag>>,
    #[allow(clippy::vec_box)]
    maps: Vec<Box<Map>>,
    /// Bags of earlier calls, emptied but keeping their tables, in the order the last call made
    /// them (the next `fresh_bag` takes the first): a program run again gets each bag's table
    /// back at its old size, with no allocation, page faults or rehashing as it grows.
    #[allow(clippy::vec_box)]
    spare_bags: Vec<Box<Bag>>,
    /// Maps of earlier calls, emptied but keeping their tables (as `spare_bags`).
    #[allow(clippy::vec_box)]
    spare_maps: Vec<Box<Map>>,
    /// Reused buffers for sorting entry records.
    pub(crate) sort_scratch: collections::SortScratch,
    error: Option<NativeError>,
}

/// At most this many emptied bags are kept for the next call.
const MAX_SPARE_BAGS: usize = 1 << 14;

impl CallCtx {
    /// A context whose arena may grow to `arena_limit` bytes.
    pub fn new(arena_limit: usize) -> Box<CallCtx> {
        Box::new(CallCtx {
            header: CtxHeader::empty(),
            arena: Arena::new(arena_limit),
            side: Arena::new(arena_limit),
            in_side: false,
            compact_min: DEFAULT_COMPACT_MIN,
            bags: Vec::new(),
            maps: Vec::new(),
            spare_bags: Vec::new(),
            spare_maps: Vec::new(),
            sort_scratch: Default::default(),
            error: None,
        })
    }

    /// The pointer compiled code takes as its first argument.
    pub fn header(&mut self) -> *mut CtxHeader {
        &mut self.header
    }

    /// Lets recursive compiled code use about `bytes` of stack below the caller (call it on the
    /// thread that runs the code, just before calling); deeper nesting is the error "evaluation
    /// nested too deeply" instead of a stack overflow.
    pub fn limit_stack(&mut self, bytes: usize) {
        self.header.limit_stack(bytes);
    }

    /// The error of the last failed call, if any.
    pub fn error(&self) -> Option<&NativeError> {
        self.error.as_ref()
    }

    /// Records a failure; the first one wins (later ones are consequences).
    pub fn fail(&mut self, e: NativeError) {
        if self.error.is_none() {
            self.header.status = e.status;
            self.error = Some(e);
        } else if self.header.status == 0 {
            self.header.status = e.status;
        }
    }

    /// The error after a failed call: the recorded one, or one built from the status alone.
    pub fn failure(&self) -> Option<NativeError> {
        match (&self.error, self.header.status) {
            (Some(e), _) => Some(e.clone()),
            (None, 0) => None,
            (None, s) => Some(NativeError::new(s, format!("internal error: call failed with status {s}"))),
        }
    }

    /// Frees everything compiled code allocated and clears the error, ready for the next call.
    pub fn reset(&mut self) {
        // Spares are taken from the end: push this call's bags last-made first.
        let mut bags = std::mem::take(&mut self.bags);
        let keep = MAX_SPARE_BAGS.saturating_sub(self.spare_bags.len()).min(bags.len());
        bags.truncate(keep);
        self.spare_bags.extend(bags.into_iter().rev());
        let mut maps = std::mem::take(&mut self.maps);
        let keep = MAX_SPARE_BAGS.saturating_sub(self.spare_maps.len()).min(maps.len());
        maps.truncate(keep);
        self.spare_maps.extend(maps.into_iter().rev());
        self.error = None;
        self.header.status = 0;
        // A call that failed while copying into the side arena left the cursor there.
        self.in_side = false;
        self.side.reset(&mut CtxHeader::empty());
        self.arena.reset(&mut self.header);
    }

    /// Allocates `bytes` of arena memory (8-aligned), or reports out of memory.
    pub fn alloc(&mut self, bytes: i64) -> Result<*mut u8, NativeError> {
        let too_big = || NativeError::new(TrapCode::OutOfMemory.code(), TrapCode::OutOfMemory.message(bytes, 0));
        let n = usize::try_from(bytes).map_err(|_| too_big())?;
        let arena = if self.in_side { &mut self.side } else { &mut self.arena };
        arena.alloc(&mut self.header, n).ok_or_else(too_big)
    }

    /// Compaction of loop-carried values. A loop whose carried value holds arrays (and nothing
    /// but arrays, tuples and scalars) takes a [`CallCtx::arena_mark`] before its first
    /// iteration; after each iteration it asks [`CallCtx::compact_begin`] whether to compact.
    /// If so, compiled code copies the carried value (into the side arena), calls
    /// [`CallCtx::compact_end`] — which frees every allocation since the mark — and copies it
    /// back. Only the carried value can point into that memory: values are immutable, so
    /// nothing older points at anything newer, and the loop's other live values were made
    /// before the mark. A long loop then needs memory for its live data, not for every array it
    /// ever made.
    pub fn arena_mark(&self) -> i64 {
        self.arena.mark(&self.header)
    }

    /// Whether the loop that took `mark` should compact now (it allocated more than
    /// `max(compact_min, threshold)` since), switching allocation to the side arena if so.
    pub fn compact_begin(&mut self, mark: i64, threshold: i64) -> bool {
        let bound = self.compact_min.max(usize::try_from(threshold).unwrap_or(0));
        if self.in_side || self.arena.used_since(&self.header, mark) <= bound {
            return false;
        }
        self.side.set_limit(self.arena_limit().saturating_sub(self.arena.reserved()));
        self.side.reset(&mut self.header);
        self.in_side = true;
        true
    }

    /// Frees the main arena's memory since `mark` and allocates from it again; gives the bytes
    /// the side arena holds (the survivor's size, so the next compaction waits for twice that).
    pub fn compact_end(&mut self, mark: i64) -> i64 {
        let survivor = self.side.used_since(&self.header, 0) as i64;
        self.in_side = false;
        self.arena.release(&mut self.header, mark);
        // Entry arrays cached by bags may lie in the freed memory: they are made again on demand.
        for b in &mut self.bags {
            b.forget_cached_entries();
        }
        survivor
    }

    /// Makes loops compact after `bytes` of allocation (tests use a small bound to exercise it).
    pub fn set_compact_min(&mut self, bytes: usize) {
        self.compact_min = bytes;
    }

    fn arena_limit(&self) -> usize {
        self.arena.limit()
    }

    /// Changes the bound on the arena (`--max-memory`); memory it holds already is kept.
    pub fn set_arena_limit(&mut self, bytes: usize) {
        self.arena.set_limit(bytes);
    }

    /// Total bytes the arena holds from the system.
    pub fn arena_reserved(&self) -> usize {
        self.arena.reserved()
    }

    /// Takes ownership of a bag and returns the pointer compiled code uses for it.
    pub fn new_bag(&mut self, bag: Bag) -> *mut Bag {
        let mut b = Box::new(bag);
        let p: *mut Bag = &mut *b;
        self.bags.push(b);
        p
    }

    /// A new empty bag of keys `key_words` wide (an emptied bag of an earlier call when there
    /// is one), owned by the context.
    pub fn fresh_bag(&mut self, key_words: usize) -> *mut Bag {
        match self.spare_bags.pop() {
            Some(mut b) => {
                b.recycle(key_words);
                let p: *mut Bag = &mut *b;
                self.bags.push(b);
                p
            }
            None => self.new_bag(Bag::new(key_words)),
        }
    }

    /// A new empty map with the given widths (an emptied map of an earlier call when there is
    /// one), owned by the context.
    pub fn fresh_map(&mut self, key_words: usize, value_words: usize) -> *mut Map {
        match self.spare_maps.pop() {
            Some(mut m) => {
                m.recycle(key_words, value_words);
                let p: *mut Map = &mut *m;
                self.maps.push(m);
                p
            }
            None => self.new_map(Map::new(key_words, value_words)),
        }
    }

    /// Takes ownership of a map and returns the pointer compiled code uses for it.
    pub fn new_map(&mut self, map: Map) -> *mut Map {
        let mut m = Box::new(map);
        let p: *mut Map = &mut *m;
        self.maps.push(m);
        p
    }

    /// A new array of `len` elements of `slot_words` slots: the array pointer and a pointer to
    /// its first element's slots (uninitialised beyond the length header).
    pub fn new_array_slots(&mut self, len: usize, slot_words: usize) -> Result<(*mut u8, *mut u64), NativeError> {
        let elems = len.checked_mul(slot_words).and_then(|n| n.checked_add(HEADER_WORDS));
        let bytes = elems.and_then(|n| n.checked_mul(8)).and_then(|b| i64::try_from(b).ok()).unwrap_or(i64::MAX);
        let p = self.alloc(bytes)?;
        // SAFETY: `p` has room for the header and `len * slot_words` slots.
        unsafe {
            (p as *mut i64).write(len as i64);
            Ok((p, p.add(ARRAY_HEADER as usize) as *mut u64))
        }
    }

    /// An array whose elements are `stride_words` slots each, from the words in order.
    pub fn array_from_words(&mut self, stride_words: usize, words: &[Word]) -> Result<Word, NativeError> {
        let len = words.len().checked_div(stride_words).unwrap_or(0);
        if stride_words * len != words.len() {
            return Err(NativeError::new(STATUS_COLLECTION, "internal error: array words are not whole elements"));
        }
        let (array, elems) = self.new_array_slots(len, stride_words)?;
        // SAFETY: the array has exactly `words.len()` element slots.
        unsafe { std::ptr::copy_nonoverlapping(words.as_ptr() as *const u64, elems, words.len()) };
        Ok(Word::from_ptr(array))
    }

    /// An `Array Real`.
    pub fn array_f64(&mut self, xs: &[f64]) -> Result<Word, NativeError> {
        let words: Vec<Word> = xs.iter().map(|x| Word::from_f64(*x)).collect();
        self.array_from_words(1, &words)
    }

    /// A record holding `words` in order.
    pub fn record(&mut self, words: &[Word]) -> Result<Word, NativeError> {
        let p = self.alloc(8 * words.len() as i64)?;
        // SAFETY: `p` has room for the words.
        unsafe { std::ptr::copy_nonoverlapping(words.as_ptr() as *const u64, p as *mut u64, words.len()) };
        Ok(Word::from_ptr(p))
    }
}

/// The length and element words of an array whose elements are `stride_words` slots.
///
/// # Safety
/// `array` must point to a live array laid out as `anf::ir::layout` says, with that stride.
pub unsafe fn read_array(array: Word, stride_words: usize) -> (usize, Vec<Word>) {
    let p = array.as_ptr::<i64>();
    let len = (*p).max(0) as usize;
    let elems = p.add(HEADER_WORDS) as *const Word;
    (len, std::slice::from_raw_parts(elems, len * stride_words).to_vec())
}

/// The elements of an `Array Real`.
///
/// # Safety
/// As for [`read_array`].
pub unsafe fn read_f64_array(array: Word) -> Vec<f64> {
    read_array(array, 1).1.into_iter().map(Word::as_f64).collect()
}

/// The `n` words of a record.
///
/// # Safety
/// `record` must point to at least `n` live slots.
pub unsafe fn read_record(record: Word, n: usize) -> Vec<Word> {
    std::slice::from_raw_parts(record.as_ptr::<Word>(), n).to_vec()
}

/// The bag behind a bag word.
///
/// # Safety
/// `bag` must come from a live context's `new_bag` (or a support function) and outlive `'a`.
pub unsafe fn bag_ref<'a>(bag: Word) -> &'a Bag {
    &*bag.as_ptr::<Bag>()
}

/// The map behind a map word.
///
/// # Safety
/// As for [`bag_ref`].
pub unsafe fn map_ref<'a>(map: Word) -> &'a Map {
    &*map.as_ptr::<Map>()
}

/// The support table for the JIT: every function of `anf::ir::support` plus the intrinsics.
pub fn support_table() -> SupportTable {
    let mut t = SupportTable::new();
    for d in anf::ir::support::SUPPORT {
        if let Some(addr) = address(d.name) {
            t.add(d.name, addr, d.params, d.rets, d.fallible);
        }
    }
    let trap = jit::abi::trap_signature();
    t.add(jit::TRAP_SYMBOL, support::nabla_trap as *const u8, &trap.params, &trap.rets, false);
    let alloc = jit::abi::alloc_signature();
    t.add(jit::ALLOC_SYMBOL, support::nabla_alloc as *const u8, &alloc.params, &alloc.rets, true);
    t
}

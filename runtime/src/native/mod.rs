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
//! Everything compiled code allocates (arena memory, bags, maps) lives until [`CallCtx::reset`],
//! unless a loop frees it sooner by compaction (ARCHITECTURE.md, "Memory model"). A caller reads
//! the results it needs (marshalling them out) and then resets the context, so a context can
//! serve any number of calls without growing.

mod arena;
mod collections;
mod support;

#[cfg(test)]
mod collections_model;
#[cfg(test)]
mod tests;

use std::rc::Rc;

use anf::ir::{TrapCode, ARRAY_HEADER};
use jit::abi::{MARK_CHUNK_END, MARK_COLLECTIONS, MARK_COUNTS, MARK_TOKEN, MARK_WORDS};
use jit::{CtxHeader, SupportTable, Word};

pub use arena::Arena;
pub use collections::{cmp_keys, Bag, CollectionError, Map};
pub use support::address;

/// Status for an error reported by a collection operation.
pub const STATUS_COLLECTION: i64 = 100;
/// Status for a panic caught inside a support function (a runtime bug).
pub const STATUS_PANIC: i64 = 101;
/// Status for an error of the interpreter at an interpreted site (`crate::sites`); the context
/// keeps its diagnostic ([`CallCtx::interpreted_error`]).
pub const STATUS_INTERPRETED: i64 = 102;

/// Words in an array's length header.
const HEADER_WORDS: usize = ARRAY_HEADER as usize / 8;

/// Default bound on one context's arena, in bytes.
pub const DEFAULT_ARENA_LIMIT: usize = 4 << 30;

/// Bytes a loop allocates before its carried value is compacted, at the least.
pub const DEFAULT_COMPACT_MIN: usize = 16 << 20;

/// Bytes one iteration of `build`, `map` or `zipWith` allocates before its element is compacted,
/// at the least (besides twice the last element's size).
pub const SCOPE_MIN: usize = 64 << 10;

/// What a bag or map made since a mark counts for in the bytes a loop has allocated (their
/// memory is the system's, not the arena's, but a loop making many of them should compact).
const COLLECTION_BYTES: usize = 1024;

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
    /// Where the main arena's cursor stood when the compaction under way began.
    main_cursor: *mut u8,
    main_end: *mut u8,
    /// The survivor holds something made since the mark that cannot be copied: the compaction
    /// under way is abandoned (nothing is freed).
    abandon: bool,
    /// The mark of the compaction under way.
    compacting: i64,
    /// Bags and maps made since that mark that the survivor holds: they outlive the release.
    #[allow(clippy::vec_box)]
    kept_bags: Vec<Box<Bag>>,
    #[allow(clippy::vec_box)]
    kept_maps: Vec<Box<Map>>,
    /// Kept maps whose values the compaction under way copied out (to copy back), and the value
    /// slots being visited (see [`CallCtx::map_slots`]).
    copied_maps: Vec<*const Map>,
    map_slots: Vec<*mut u64>,
    /// Checking mode (tests): released memory is poisoned, released bags and maps emptied and
    /// never reused.
    checking: bool,
    #[allow(clippy::vec_box)]
    graveyard: (Vec<Box<Bag>>, Vec<Box<Map>>),
    /// Bags that cached an entry array (in the arena) since the last release looked: a release
    /// forgets the caches it frees (and drops the bags it frees from this list).
    cached_bags: Vec<*mut Bag>,
    /// The most bags and maps alive at once (see [`CallCtx::collections_peak`]).
    collections_peak: usize,
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
    /// The interpreted sites of the program being run (per-site fallback, `crate::sites`).
    sites: Option<Rc<crate::sites::Sites>>,
    /// The interpreter's diagnostic when an interpreted site failed.
    interpreted_error: Option<frontend::Diagnostic>,
}

/// At most this many emptied bags are kept for the next call.
const MAX_SPARE_BAGS: usize = 1 << 14;

impl CallCtx {
    /// A context whose arena may grow to `arena_limit` bytes.
    pub fn new(arena_limit: usize) -> Box<CallCtx> {
        let mut cx = Box::new(CallCtx {
            header: CtxHeader::empty(),
            arena: Arena::new(arena_limit),
            side: Arena::new(arena_limit),
            in_side: false,
            compact_min: DEFAULT_COMPACT_MIN,
            main_cursor: std::ptr::null_mut(),
            main_end: std::ptr::null_mut(),
            abandon: false,
            compacting: 0,
            kept_bags: Vec::new(),
            kept_maps: Vec::new(),
            copied_maps: Vec::new(),
            map_slots: Vec::new(),
            checking: false,
            graveyard: (Vec::new(), Vec::new()),
            collections_peak: 0,
            cached_bags: Vec::new(),
            bags: Vec::new(),
            maps: Vec::new(),
            spare_bags: Vec::new(),
            spare_maps: Vec::new(),
            sort_scratch: Default::default(),
            error: None,
            sites: None,
            interpreted_error: None,
        });
        cx.publish_bounds();
        cx
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

    /// The interpreted sites of the program about to run (`Machine` sets them before each call).
    pub fn set_sites(&mut self, sites: Option<Rc<crate::sites::Sites>>) {
        self.sites = sites;
    }

    pub(crate) fn sites(&self) -> Option<Rc<crate::sites::Sites>> {
        self.sites.clone()
    }

    pub(crate) fn set_interpreted_error(&mut self, d: frontend::Diagnostic) {
        if self.interpreted_error.is_none() {
            self.interpreted_error = Some(d);
        }
    }

    /// The interpreter's diagnostic of the interpreted site that failed in the last call.
    pub fn interpreted_error(&self) -> Option<&frontend::Diagnostic> {
        self.interpreted_error.as_ref()
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
        // Bags that cached entry arrays here — this context's, or another's read by this call
        // (an API handle's definitions) — forget them: the memory is about to be reused. All
        // are alive now (this context's bags go to the spares or are dropped below).
        // (Drained, not taken: the list keeps its capacity.)
        while let Some(p) = self.cached_bags.pop() {
            // SAFETY: as above.
            let bag = unsafe { &mut *p };
            let caches = [bag.cached_entries(), bag.cached_unordered_entries()];
            if caches.iter().flatten().any(|c| self.arena.contains(*c) || self.side.contains(*c)) {
                bag.forget_cached_entries();
            }
        }
        // Spares are taken from the end: push this call's bags last-made first. (Popped, not
        // taken: the lists keep their capacity, so a call pushes without growing them; an update
        // makes one or two collections, for which a loop of pops is cheaper than a drain.)
        let keep = MAX_SPARE_BAGS.saturating_sub(self.spare_bags.len()).min(self.bags.len());
        self.bags.truncate(keep);
        while let Some(b) = self.bags.pop() {
            self.spare_bags.push(b);
        }
        let keep = MAX_SPARE_BAGS.saturating_sub(self.spare_maps.len()).min(self.maps.len());
        self.maps.truncate(keep);
        while let Some(m) = self.maps.pop() {
            self.spare_maps.push(m);
        }
        self.error = None;
        self.interpreted_error = None;
        self.header.status = 0;
        // A call that failed while copying into the side arena left the cursor there.
        self.in_side = false;
        self.kept_bags.clear();
        self.kept_maps.clear();
        self.graveyard.0.clear();
        self.graveyard.1.clear();
        if !self.side.holds_nothing() {
            self.side.reset(&mut CtxHeader::empty());
        }
        self.arena.reset(&mut self.header);
    }

    /// Resets, keeping for the next call only the last `count` emptied bags and maps, and only
    /// those whose tables have room for at most `capacity` entries (a stream of small calls
    /// after a big one should not empty big tables each time: that costs time proportional to
    /// their capacity).
    pub fn reset_keeping_small(&mut self, capacity: usize, count: usize) {
        // (Checked first: the common call made only small tables, and `retain` costs more.)
        if self.bags.iter().any(|b| b.capacity() > capacity) {
            self.bags.retain(|b| b.capacity() <= capacity);
        }
        if self.maps.iter().any(|m| m.capacity() > capacity) {
            self.maps.retain(|m| m.capacity() <= capacity);
        }
        self.reset();
        if let Some(extra) = self.spare_bags.len().checked_sub(count) {
            self.spare_bags.drain(..extra);
        }
        if let Some(extra) = self.spare_maps.len().checked_sub(count) {
            self.spare_maps.drain(..extra);
        }
    }

    /// Resets and also forgets the emptied bags and maps kept for the next call: after a call
    /// whose collections were much bigger than the next ones will be (emptying a big table
    /// costs time proportional to its capacity).
    pub fn reset_and_drop_spares(&mut self) {
        self.reset();
        self.spare_bags.clear();
        self.spare_maps.clear();
    }

    /// Allocates `bytes` of arena memory (8-aligned), or reports out of memory.
    pub fn alloc(&mut self, bytes: i64) -> Result<*mut u8, NativeError> {
        let too_big = || NativeError::new(TrapCode::OutOfMemory.code(), TrapCode::OutOfMemory.message(bytes, 0));
        let n = usize::try_from(bytes).map_err(|_| too_big())?;
        let arena = if self.in_side { &mut self.side } else { &mut self.arena };
        arena.alloc(&mut self.header, n).ok_or_else(too_big)
    }

    /// Compaction: freeing a loop's temporaries (see `anf::lower::compact` for which loops, and
    /// ARCHITECTURE.md, "Memory model", for why it is sound). A loop takes a mark before its
    /// first iteration (or, for `build`/`map`/`zipWith` with elements that hold pointers, before
    /// each iteration); after an iteration it asks [`CallCtx::compact_begin`] whether to compact.
    /// If so, compiled code copies the survivor (the carried value or the element) into the side
    /// arena — only what [`CallCtx::allocated_since`] says lies after the mark; older parts are
    /// kept as they are, and bags and maps made since the mark are kept by
    /// [`CallCtx::keep_bag`]/[`CallCtx::keep_map`] — then calls [`CallCtx::compact_end`], which
    /// frees every allocation since the mark (arena memory, bags and maps), and copies the
    /// survivor back. The mark allocates a record of `jit::abi::MARK_WORDS` words just below the
    /// position it marks, and is that record's address: the arena's token for the position, what
    /// compiled code's inline check reads (the count of collections made and the chunk's end, see
    /// `jit::abi`), and how many bags and maps there were (those made later are the loop's).
    pub fn arena_mark(&mut self) -> Result<i64, NativeError> {
        let counts = (self.bags.len() as u64 & 0xffff_ffff) | ((self.maps.len() as u64) << 32);
        let record = self.alloc(8 * MARK_WORDS as i64)? as *mut u64;
        let token = self.arena.mark(&self.header);
        // SAFETY: `record` is `MARK_WORDS` fresh words.
        unsafe {
            record.add(MARK_TOKEN).write(token as u64);
            record.add(MARK_COLLECTIONS).write(self.header.collections_made as u64);
            record.add(MARK_CHUNK_END).write(self.header.alloc_end as u64);
            record.add(MARK_COUNTS).write(counts);
        }
        Ok(record as i64)
    }

    /// The arena's token of the position a mark (as [`CallCtx::arena_mark`] made it) marks.
    fn mark_token(mark: i64) -> i64 {
        if mark == 0 {
            return 0;
        }
        // SAFETY: compiled code passes marks `arena_mark` made, whose record lives as long as
        // the loop that uses it.
        unsafe { *(mark as *const i64).add(MARK_TOKEN) }
    }

    /// How many bags and maps there were when `mark` was taken.
    fn mark_counts(&self, mark: i64) -> (usize, usize) {
        match self.arena.mark_slot(mark) {
            // SAFETY: the slot was written by `arena_mark` and lies before the mark.
            Some(slot) => {
                let c = unsafe { *slot };
                (((c & 0xffff_ffff) as usize).min(self.bags.len()), ((c >> 32) as usize).min(self.maps.len()))
            }
            None => (self.bags.len(), self.maps.len()),
        }
    }

    /// Bytes allocated since `mark`, bags and maps made since counted as [`COLLECTION_BYTES`].
    fn made_since(&self, mark: i64) -> usize {
        let (b, m) = self.mark_counts(mark);
        let collections = (self.bags.len() - b + self.maps.len() - m).saturating_mul(COLLECTION_BYTES);
        self.arena.used_since(&self.header, mark).saturating_add(collections)
    }

    /// Whether the loop that took `mark` should compact now — it made more than
    /// `max(compact_min, threshold)` since — switching allocation to the side arena if so.
    pub fn compact_begin(&mut self, mark: i64, threshold: i64) -> bool {
        let mark = Self::mark_token(mark);
        self.begin_if(mark, self.compact_min.max(usize::try_from(threshold).unwrap_or(0)))
    }

    /// [`CallCtx::compact_begin`] for one iteration of `build`, `map` or `zipWith`: the bound is
    /// `max(min(compact_min, SCOPE_MIN), threshold)`.
    pub fn scope_begin(&mut self, mark: i64, threshold: i64) -> bool {
        let mark = Self::mark_token(mark);
        self.begin_if(mark, self.compact_min.min(SCOPE_MIN).max(usize::try_from(threshold).unwrap_or(0)))
    }

    fn begin_if(&mut self, mark: i64, bound: usize) -> bool {
        if self.in_side || self.made_since(mark) <= bound {
            return false;
        }
        self.main_cursor = self.header.alloc_ptr;
        self.main_end = self.header.alloc_end;
        self.abandon = false;
        self.compacting = mark;
        self.copied_maps.clear();
        self.map_slots.clear();
        self.side.set_limit(self.arena_limit().saturating_sub(self.arena.reserved()));
        self.side.reset(&mut self.header);
        self.in_side = true;
        true
    }

    /// During a compaction: does `p` point into memory made since its mark (to be copied), as
    /// opposed to older memory the release leaves alone (kept as it is)?
    pub fn allocated_since(&self, p: *const u8) -> bool {
        self.in_side && self.arena.allocated_since(self.compacting, p, self.main_cursor)
    }

    /// During a compaction: does `p` point into the side arena (a copy to bring back)?
    pub fn in_side_arena(&self, p: *const u8) -> bool {
        self.side.contains(p)
    }

    /// During a compaction: keeps a bag the survivor holds (if it was made since the mark, it is
    /// taken out of the loop's bags, so the release does not free it).
    pub fn keep_bag(&mut self, bag: *mut Bag) -> *mut Bag {
        let (since, _) = self.mark_counts(self.compacting);
        if let Some(i) = self.bags[since..].iter().rposition(|b| std::ptr::eq(&**b, bag)) {
            let b = self.bags.remove(since + i);
            self.kept_bags.push(b);
        }
        bag
    }

    /// During a compaction: the survivor holds `p` (a closure's environment, a group record, a
    /// change's payload), which compaction cannot copy. Memory older than the mark is left
    /// alone, so an older `p` is fine; one made since the mark abandons the compaction.
    pub fn hold(&mut self, p: *const u8) {
        if self.allocated_since(p) {
            self.abandon = true;
        }
    }

    /// During a compaction, for a map whose values hold pointers, after [`CallCtx::keep_map`]:
    /// copying out (`back` false), a map made since the mark has its values' slots visited
    /// (compiled code copies what each value reaches that was made since the mark and writes the
    /// copy back into the slot, in place: nothing older than the mark can hold a map made since
    /// it, and the survivor is the only way to it), and is remembered; copying back, a
    /// remembered map has them visited again. Gives the index of the first slot (there are
    /// `len` of them, [`CallCtx::map_slot`]), or -1 when there is nothing to visit (a map older
    /// than the mark: its values are older too). A map's slots stay valid while it is not
    /// changed, and nothing changes it during a compaction.
    pub fn map_slots(&mut self, map: *mut Map, back: bool) -> i64 {
        let visit = if back {
            self.copied_maps.iter().any(|m| std::ptr::eq(*m, map))
        } else {
            let kept = self.kept_maps.iter().any(|m| std::ptr::eq(&**m, map));
            if kept && !self.copied_maps.iter().any(|m| std::ptr::eq(*m, map)) {
                self.copied_maps.push(map);
            }
            kept
        };
        if !visit {
            return -1;
        }
        let base = self.map_slots.len() as i64;
        // SAFETY: a map of this context, kept alive by the compaction (in `kept_maps`, or in
        // `maps` after the release).
        let m = unsafe { &mut *map };
        self.map_slots.extend(m.value_slots());
        base
    }

    /// Slot `i` of those [`CallCtx::map_slots`] gave from `base`.
    pub fn map_slot(&self, base: i64, i: i64) -> Result<*mut u64, NativeError> {
        usize::try_from(base.saturating_add(i))
            .ok()
            .and_then(|k| self.map_slots.get(k).copied())
            .ok_or_else(|| NativeError::new(STATUS_PANIC, "internal error: a map slot out of range"))
    }

    /// Forgets the slots from `base` on (visits nest: a map's values may hold maps).
    pub fn map_slots_end(&mut self, base: i64) {
        self.map_slots.truncate(usize::try_from(base).unwrap_or(0));
    }

    /// As [`CallCtx::keep_bag`], for a map.
    pub fn keep_map(&mut self, map: *mut Map) -> *mut Map {
        let (_, since) = self.mark_counts(self.compacting);
        if let Some(i) = self.maps[since..].iter().rposition(|m| std::ptr::eq(&**m, map)) {
            let m = self.maps.remove(since + i);
            self.kept_maps.push(m);
        }
        map
    }

    /// Frees everything made since `mark` but the kept bags and maps, and allocates from the main
    /// arena again; gives the bytes the side arena holds (the survivor's size, so the next
    /// compaction waits for twice that).
    /// If the compaction was abandoned ([`CallCtx::hold`]), nothing is freed and the result is
    /// minus the bytes made since the mark (the next attempt waits for twice as many).
    pub fn compact_end(&mut self, mark: i64) -> i64 {
        let mark = Self::mark_token(mark);
        let survivor = self.side.used_since(&self.header, 0) as i64;
        self.in_side = false;
        if self.abandon {
            self.abandon = false;
            self.header.alloc_ptr = self.main_cursor;
            self.header.alloc_end = self.main_end;
            self.bags.append(&mut self.kept_bags);
            self.maps.append(&mut self.kept_maps);
            return -(self.made_since(mark).max(1) as i64);
        }
        let (b, m) = self.mark_counts(mark);
        // Entry arrays cached by surviving bags may lie in the memory being freed: they are
        // moved past the release with the survivor (a loop folding over a bag made before it
        // keeps its sorted entries), and count in the survivor's size.
        let freed: rustc_hash::FxHashSet<*const Bag> = self.bags[b..].iter().map(|x| &**x as *const Bag).collect();
        let mut cached = std::mem::take(&mut self.cached_bags);
        let mut rescue: Vec<(*mut Bag, bool, Vec<u64>)> = Vec::new();
        cached.retain(|&p| {
            if freed.contains(&(p as *const Bag)) {
                return false;
            }
            // SAFETY: not freed, so a live bag (this context's, a spare, or another context's
            // read by this call).
            let bag = unsafe { &mut *p };
            let caches = [(true, bag.cached_entries()), (false, bag.cached_unordered_entries())];
            let moving: Vec<(bool, *mut u8)> = caches
                .iter()
                .filter_map(|(sorted, c)| c.map(|c| (*sorted, c)))
                .filter(|(_, c)| self.arena.allocated_since(mark, *c, self.main_cursor))
                .collect();
            if moving.is_empty() {
                return caches.iter().any(|(_, c)| c.is_some());
            }
            let rec = bag.key_words() + 1;
            for (sorted, c) in moving {
                // SAFETY: an entry array `[len][len records]` made by `nabla_bag_entries*`.
                let words = unsafe {
                    let len = (*(c as *const i64)).max(0) as usize;
                    std::slice::from_raw_parts(c as *const u64, HEADER_WORDS + len * rec).to_vec()
                };
                rescue.push((p, sorted, words));
            }
            bag.forget_cached_entries();
            false
        });
        self.cached_bags = cached;
        self.arena.release(&mut self.header, mark);
        let freed_bags = self.bags.split_off(b);
        let freed_maps = self.maps.split_off(m);
        if self.checking {
            for mut bag in freed_bags {
                bag.recycle(bag.key_words());
                self.graveyard.0.push(bag);
            }
            for mut map in freed_maps {
                map.recycle(map.key_words(), map.value_words());
                self.graveyard.1.push(map);
            }
        } else {
            let room = MAX_SPARE_BAGS.saturating_sub(self.spare_bags.len());
            self.spare_bags.extend(freed_bags.into_iter().rev().take(room));
            let room = MAX_SPARE_BAGS.saturating_sub(self.spare_maps.len());
            self.spare_maps.extend(freed_maps.into_iter().rev().take(room));
        }
        self.bags.append(&mut self.kept_bags);
        self.maps.append(&mut self.kept_maps);
        let mut moved = 0;
        for (p, sorted, words) in rescue {
            let Ok(array) = self.alloc(8 * words.len() as i64) else { break };
            // SAFETY: `array` has room for the words; `p` is live (see above).
            unsafe {
                std::ptr::copy_nonoverlapping(words.as_ptr(), array as *mut u64, words.len());
                let bag = &mut *p;
                if sorted {
                    bag.cache_entries(array);
                } else {
                    bag.cache_unordered_entries(array);
                }
            }
            self.cached_bags.push(p);
            moved += 8 * words.len() as i64;
        }
        survivor + moved
    }

    /// Remembers that `bag` cached an entry array in the arena (see `cached_bags`).
    /// A persistent bag (an incremental driver's state or change) never caches one, and may be
    /// gone by the next reset: it is not remembered.
    pub(crate) fn note_cached(&mut self, bag: *mut Bag) {
        // SAFETY: the caller's bag is alive now.
        if unsafe { (*bag).is_persistent() } {
            return;
        }
        self.cached_bags.push(bag);
    }

    /// Checking mode for tests: released memory is poisoned and never reused, released bags and
    /// maps are emptied and never reused, so a value that outlived a release shows.
    pub fn set_checking(&mut self, on: bool) {
        self.checking = on;
        self.arena.set_poison(on);
    }

    /// The most memory the arenas have held at once since the context was made or
    /// [`CallCtx::reset_peak`]: the high-water mark memory tests measure.
    pub fn arena_peak(&self) -> usize {
        self.arena.peak() + self.side.peak()
    }

    /// The most bags and maps the context held at once since it was made or
    /// [`CallCtx::reset_peak`] (their memory is the system's, outside the arena).
    pub fn collections_peak(&self) -> usize {
        self.collections_peak
    }

    fn count_collections(&mut self) {
        self.header.collections_made = self.header.collections_made.wrapping_add(1);
        self.collections_peak = self.collections_peak.max(self.bags.len() + self.maps.len());
    }

    /// Starts measuring [`CallCtx::arena_peak`] and [`CallCtx::collections_peak`] again.
    pub fn reset_peak(&mut self) {
        self.collections_peak = self.bags.len() + self.maps.len();
        self.arena.reset_peak();
        self.side.reset_peak();
    }

    /// Makes loops compact after `bytes` of allocation (tests use a small bound to exercise it).
    pub fn set_compact_min(&mut self, bytes: usize) {
        self.compact_min = bytes;
        self.publish_bounds();
    }

    /// Tells compiled code's inline compaction checks the bounds (`jit::abi::CtxHeader`).
    fn publish_bounds(&mut self) {
        let word = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.header.scope_bound = word(self.compact_min.min(SCOPE_MIN));
        self.header.compact_bound = word(self.compact_min);
    }

    /// The bound on the arena.
    pub fn arena_limit(&self) -> usize {
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

    /// Bytes allocated in the arena since the last reset (what compiled code and copies made).
    pub fn arena_used(&self) -> usize {
        self.arena.used_since(&self.header, 0)
    }

    /// The number of bags and maps the context owns.
    pub fn collection_count(&self) -> usize {
        self.bags.len() + self.maps.len()
    }

    /// The bags and maps the context owns, and their entries in all.
    pub fn collections(&self) -> (usize, usize) {
        let entries =
            self.bags.iter().map(|b| b.len()).sum::<usize>() + self.maps.iter().map(|m| m.len()).sum::<usize>();
        (self.bags.len() + self.maps.len(), entries)
    }

    /// Takes ownership of a bag and returns the pointer compiled code uses for it.
    pub fn new_bag(&mut self, bag: Bag) -> *mut Bag {
        let mut b = Box::new(bag);
        let p: *mut Bag = &mut *b;
        self.bags.push(b);
        self.count_collections();
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
                self.count_collections();
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
                self.count_collections();
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
        self.count_collections();
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

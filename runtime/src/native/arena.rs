//! Per-call arenas: chunked bump allocation. The bump cursor lives in the context header
//! (`CtxHeader::alloc_ptr`/`alloc_end`) so compiled code allocates inline; this module owns the
//! chunks and hands out new ones on the slow path. Resetting keeps the largest chunk for reuse;
//! releasing to a mark keeps the freed chunks as spares for the allocations that follow (a loop
//! that compacts often reuses the same memory instead of asking the system again).

use std::alloc::{alloc_zeroed, dealloc, Layout};

use jit::CtxHeader;

/// Bytes of the first chunk.
const FIRST_CHUNK: usize = 64 << 10;
/// Chunks grow geometrically up to this size (larger requests get a chunk of their own size).
const MAX_GROWTH: usize = 64 << 20;

/// A mark holds the number of chunks in its high bits and the cursor's offset in the last one
/// below (chunks are far smaller than 2^40 bytes: the arena's limit is).
const MARK_SHIFT: u32 = 40;

fn split_mark(mark: i64) -> (usize, usize) {
    ((mark >> MARK_SHIFT) as usize, (mark & ((1i64 << MARK_SHIFT) - 1)) as usize)
}

/// One zeroed, 8-aligned block of memory.
struct Chunk {
    ptr: *mut u8,
    size: usize,
}

impl Chunk {
    /// A zeroed chunk of `size` bytes (a multiple of 8), or `None` if the system refuses.
    fn new(size: usize) -> Option<Chunk> {
        let layout = Layout::from_size_align(size.max(8), 8).ok()?;
        // SAFETY: the layout has a nonzero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        (!ptr.is_null()).then_some(Chunk { ptr, size: size.max(8) })
    }
}

impl Drop for Chunk {
    /// Returns the chunk to the system.
    fn drop(&mut self) {
        // SAFETY: allocated in `Chunk::new` with this size and alignment.
        unsafe { dealloc(self.ptr, Layout::from_size_align_unchecked(self.size, 8)) }
    }
}

/// The chunks of one call context's arena, with a limit on their total size.
pub struct Arena {
    chunks: Vec<Chunk>,
    /// Chunks freed by [`Arena::release`], reused before asking the system for more.
    spares: Vec<Chunk>,
    /// Total bytes of all chunks, spares included.
    reserved: usize,
    /// The most `reserved` has been since the arena was made or [`Arena::reset_peak`].
    peak: usize,
    limit: usize,
    /// Checking mode (tests): released memory is overwritten with [`POISON`] and never reused,
    /// so a pointer that outlived a release reads garbage the differential tests notice.
    poison: bool,
    graveyard: Vec<Chunk>,
}

/// The byte released memory is filled with in checking mode.
pub const POISON: u8 = 0xA5;

impl Arena {
    /// An arena that may reserve up to `limit` bytes in total.
    pub fn new(limit: usize) -> Arena {
        Arena {
            chunks: Vec::new(),
            spares: Vec::new(),
            reserved: 0,
            peak: 0,
            limit,
            poison: false,
            graveyard: Vec::new(),
        }
    }

    /// The largest number of bytes the arena has held at once (its high-water mark).
    pub fn peak(&self) -> usize {
        self.peak
    }

    /// Starts measuring the high-water mark again from what the arena holds now.
    pub fn reset_peak(&mut self) {
        self.peak = self.reserved;
    }

    /// Turns checking mode on or off (see [`Arena`]'s `poison` field).
    pub fn set_poison(&mut self, on: bool) {
        self.poison = on;
    }

    /// Total bytes reserved by the arena's chunks.
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// Allocates `bytes` (rounded up to 8) from the header's cursor, taking a new chunk when the
    /// current one is full. `None` when the limit or the system refuses.
    #[inline]
    pub fn alloc(&mut self, header: &mut CtxHeader, bytes: usize) -> Option<*mut u8> {
        let bytes = bytes.checked_add(7)? & !7;
        let avail = (header.alloc_end as usize).wrapping_sub(header.alloc_ptr as usize);
        if !header.alloc_ptr.is_null() && bytes <= avail {
            let p = header.alloc_ptr;
            // SAFETY: `p + bytes` stays within the current chunk.
            header.alloc_ptr = unsafe { p.add(bytes) };
            return Some(p);
        }
        self.alloc_chunk(header, bytes)
    }

    /// [`Arena::alloc`] when the current chunk is full (`bytes` rounded already).
    #[inline(never)]
    fn alloc_chunk(&mut self, header: &mut CtxHeader, bytes: usize) -> Option<*mut u8> {
        let chunk = match self.spares.iter().position(|c| c.size >= bytes) {
            Some(i) => self.spares.swap_remove(i),
            None => {
                let last = self.chunks.last().map_or(FIRST_CHUNK / 2, |c| c.size);
                let size = bytes.max(last.saturating_mul(2).min(MAX_GROWTH)).max(FIRST_CHUNK);
                let size = if self.reserved.saturating_add(size) > self.limit {
                    // Fall back to exactly what was asked for before giving up.
                    if self.reserved.saturating_add(bytes) > self.limit {
                        return None;
                    }
                    bytes
                } else {
                    size
                };
                let chunk = Chunk::new(size)?;
                self.reserved += chunk.size;
                self.peak = self.peak.max(self.reserved);
                chunk
            }
        };
        let p = chunk.ptr;
        // SAFETY: both offsets are within the new chunk.
        unsafe {
            header.alloc_ptr = p.add(bytes);
            header.alloc_end = p.add(chunk.size);
        }
        self.chunks.push(chunk);
        Some(p)
    }

    /// A token for the arena's current position (the cursor in the header): [`Arena::release`]
    /// frees everything allocated after it. The current chunk is always the last one.
    pub fn mark(&self, header: &CtxHeader) -> i64 {
        match self.chunks.last() {
            Some(c) if !header.alloc_ptr.is_null() => {
                let off = (header.alloc_ptr as usize).wrapping_sub(c.ptr as usize);
                ((self.chunks.len() as i64) << MARK_SHIFT) | off as i64
            }
            _ => 0,
        }
    }

    /// Bytes allocated (or abandoned at the ends of chunks) since `mark`.
    pub fn used_since(&self, header: &CtxHeader, mark: i64) -> usize {
        let (n, off) = split_mark(mark);
        let Some(last) = self.chunks.last() else { return 0 };
        let cur_off = (header.alloc_ptr as usize).wrapping_sub(last.ptr as usize).min(last.size);
        if n == self.chunks.len() {
            return cur_off.saturating_sub(off);
        }
        let older = if n == 0 { 0 } else { self.chunks.get(n - 1).map_or(0, |c| c.size.saturating_sub(off)) };
        let between: usize =
            self.chunks.iter().skip(n).take(self.chunks.len().saturating_sub(n + 1)).map(|c| c.size).sum();
        older + between + cur_off
    }

    /// Frees everything allocated after `mark` (a token of [`Arena::mark`] on this arena, with no
    /// release to an earlier mark since) and points the cursor back at it. Whatever pointed into
    /// that memory must be dead: the caller has copied out what lives on.
    pub fn release(&mut self, header: &mut CtxHeader, mark: i64) {
        let (n, off) = split_mark(mark);
        if n > self.chunks.len() || (n > 0 && off > self.chunks[n - 1].size) {
            return;
        }
        let freed = self.chunks.split_off(n);
        if self.poison {
            for c in &freed {
                // SAFETY: the whole chunk is ours.
                unsafe { std::ptr::write_bytes(c.ptr, POISON, c.size) };
            }
            self.reserved -= freed.iter().map(|c| c.size).sum::<usize>();
            self.graveyard.extend(freed);
        } else {
            self.spares.extend(freed);
        }
        match self.chunks.last() {
            Some(c) => {
                // SAFETY: `off` is within the chunk (checked above); the end is one past it.
                unsafe {
                    if self.poison {
                        // Poisoned and never handed out again: the cursor moves to a fresh chunk.
                        std::ptr::write_bytes(c.ptr.add(off), POISON, c.size - off);
                        header.alloc_ptr = c.ptr.add(c.size);
                        header.alloc_end = c.ptr.add(c.size);
                        return;
                    }
                    header.alloc_ptr = c.ptr.add(off);
                    header.alloc_end = c.ptr.add(c.size);
                }
            }
            None => {
                header.alloc_ptr = std::ptr::null_mut();
                header.alloc_end = std::ptr::null_mut();
            }
        }
    }

    /// Does `p` point into memory allocated after `mark` (a token of [`Arena::mark`] on this
    /// arena; `cursor` is where allocation stood)? The test of one allocation compaction makes:
    /// what lies after the mark is copied, what lies before it is kept as it is.
    pub fn allocated_since(&self, mark: i64, p: *const u8, cursor: *const u8) -> bool {
        let (n, off) = split_mark(mark);
        let p = p as usize;
        let last = self.chunks.len().saturating_sub(1);
        self.chunks.iter().enumerate().skip(n.saturating_sub(1)).any(|(i, c)| {
            let lo = c.ptr as usize + if i + 1 == n { off } else { 0 };
            let hi = if i == last { cursor as usize } else { c.ptr as usize + c.size };
            lo <= p && p < hi
        })
    }

    /// Has the arena no memory at all (a side arena no loop used)? Then `reset` has nothing to do.
    pub fn holds_nothing(&self) -> bool {
        self.chunks.is_empty() && self.spares.is_empty() && self.graveyard.is_empty() && self.reserved == 0
    }

    /// Does `p` point into one of the arena's chunks?
    pub fn contains(&self, p: *const u8) -> bool {
        let p = p as usize;
        self.chunks.iter().any(|c| c.ptr as usize <= p && p < c.ptr as usize + c.size)
    }

    /// The 8-byte slot just below `mark`, where [`super::CallCtx::arena_mark`] keeps what else
    /// the mark needs (it allocates the slot, then takes the mark).
    pub fn mark_slot(&self, mark: i64) -> Option<*mut u64> {
        let (n, off) = split_mark(mark);
        let c = self.chunks.get(n.checked_sub(1)?)?;
        // SAFETY: the slot is within the chunk (checked).
        (off >= 8 && off <= c.size).then(|| unsafe { c.ptr.add(off - 8) as *mut u64 })
    }

    /// The bound on the arena's total size.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Changes the bound on the arena's total size.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    /// Forgets every allocation; keeps the largest chunk (zeroed again is not needed: the IR
    /// initialises what it allocates) and points the cursor at its start.
    pub fn reset(&mut self, header: &mut CtxHeader) {
        // The common case (a call that fit in one chunk): back to its start.
        if let ([c], true, true) = (&self.chunks[..], self.spares.is_empty(), self.graveyard.is_empty()) {
            self.reserved = c.size;
            header.alloc_ptr = c.ptr;
            // SAFETY: one past the end of the chunk.
            header.alloc_end = unsafe { c.ptr.add(c.size) };
            return;
        }
        if self.chunks.is_empty() && self.spares.is_empty() && self.graveyard.is_empty() {
            // (A side arena no loop used.)
            self.reserved = 0;
            header.alloc_ptr = std::ptr::null_mut();
            header.alloc_end = std::ptr::null_mut();
            return;
        }
        self.chunks.append(&mut self.spares);
        self.graveyard.clear();
        if let Some(i) = (0..self.chunks.len()).max_by_key(|&i| self.chunks[i].size) {
            let keep = self.chunks.swap_remove(i);
            self.chunks.clear();
            self.chunks.push(keep);
        }
        self.reserved = self.chunks.iter().map(|c| c.size).sum();
        match self.chunks.first() {
            Some(c) => {
                header.alloc_ptr = c.ptr;
                // SAFETY: one past the end of the chunk.
                header.alloc_end = unsafe { c.ptr.add(c.size) };
            }
            None => {
                header.alloc_ptr = std::ptr::null_mut();
                header.alloc_end = std::ptr::null_mut();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bump_chunks_limit_and_reset() {
        let mut h = CtxHeader::empty();
        let mut a = Arena::new(1 << 20);
        let p = a.alloc(&mut h, 3).unwrap();
        let q = a.alloc(&mut h, 8).unwrap();
        assert_eq!(q as usize - p as usize, 8, "sizes round up to 8");
        assert_eq!(p as usize % 8, 0);
        // A request bigger than the chunk gets a chunk of its own.
        let big = a.alloc(&mut h, 200_000).unwrap();
        unsafe { big.add(199_999).write(7) };
        assert!(a.reserved() >= 200_000 + FIRST_CHUNK);
        assert!(a.alloc(&mut h, 2 << 20).is_none(), "over the limit");
        a.reset(&mut h);
        assert_eq!(a.reserved(), 200_000);
        let r = a.alloc(&mut h, 16).unwrap();
        assert_eq!(r, big, "the largest chunk is reused");
        assert!(a.alloc(&mut h, usize::MAX).is_none());
    }

    #[test]
    fn release_to_a_mark_frees_what_came_after() {
        let mut h = CtxHeader::empty();
        let mut a = Arena::new(1 << 30);
        assert_eq!(a.mark(&h), 0, "no chunk yet");
        let p = a.alloc(&mut h, 24).unwrap();
        let m = a.mark(&h);
        assert_eq!(a.used_since(&h, m), 0);
        let q = a.alloc(&mut h, 16).unwrap();
        assert_eq!(q as usize, p as usize + 24);
        assert_eq!(a.used_since(&h, m), 16);
        // Spill into new chunks, then come back.
        for _ in 0..40 {
            a.alloc(&mut h, 50_000).unwrap();
        }
        assert!(a.chunks.len() > 1);
        assert!(a.used_since(&h, m) >= 40 * 50_000);
        let held = a.reserved();
        a.release(&mut h, m);
        assert_eq!(a.chunks.len(), 1);
        assert_eq!(a.reserved(), held, "freed chunks are kept as spares");
        assert_eq!(a.used_since(&h, m), 0);
        assert_eq!(a.alloc(&mut h, 8).unwrap(), q, "the memory after the mark is reused");
        // Spares serve the next chunks: spilling again asks the system for nothing.
        for _ in 0..40 {
            a.alloc(&mut h, 50_000).unwrap();
        }
        assert_eq!(a.reserved(), held);
        assert_eq!(a.peak(), held);
        // Releasing to the empty mark frees everything.
        a.release(&mut h, 0);
        assert!(h.alloc_ptr.is_null());
        a.reset(&mut h);
        assert!(a.reserved() < held, "a reset keeps only the largest chunk");
    }

    #[test]
    fn allocations_since_a_mark_are_told_apart_and_poisoned_in_checking_mode() {
        let mut h = CtxHeader::empty();
        let mut a = Arena::new(1 << 30);
        a.set_poison(true);
        let old = a.alloc(&mut h, 8).unwrap();
        let m = a.mark(&h);
        let young = a.alloc(&mut h, 8).unwrap();
        let big = a.alloc(&mut h, 1 << 20).unwrap();
        assert!(!a.allocated_since(m, old, h.alloc_ptr));
        assert!(a.allocated_since(m, young, h.alloc_ptr));
        assert!(a.allocated_since(m, big, h.alloc_ptr));
        assert!(!a.allocated_since(m, h.alloc_ptr, h.alloc_ptr), "not yet allocated");
        assert_eq!(a.mark_slot(m), Some(old as *mut u64));
        unsafe { (young as *mut u64).write(7) };
        a.release(&mut h, m);
        assert_eq!(unsafe { *young }, POISON, "released memory is poisoned");
        let again = a.alloc(&mut h, 8).unwrap();
        assert_ne!(again, young, "and never handed out again");
    }
}

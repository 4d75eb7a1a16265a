//! Per-call arenas: chunked bump allocation. The bump cursor lives in the context header
//! (`CtxHeader::alloc_ptr`/`alloc_end`) so compiled code allocates inline; this module owns the
//! chunks and hands out new ones on the slow path. Resetting keeps the largest chunk for reuse.

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
    /// Total bytes of all chunks.
    reserved: usize,
    limit: usize,
}

impl Arena {
    /// An arena that may reserve up to `limit` bytes in total.
    pub fn new(limit: usize) -> Arena {
        Arena { chunks: Vec::new(), reserved: 0, limit }
    }

    /// Total bytes reserved by the arena's chunks.
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// Allocates `bytes` (rounded up to 8) from the header's cursor, taking a new chunk when the
    /// current one is full. `None` when the limit or the system refuses.
    pub fn alloc(&mut self, header: &mut CtxHeader, bytes: usize) -> Option<*mut u8> {
        let bytes = bytes.checked_add(7)? & !7;
        let avail = (header.alloc_end as usize).wrapping_sub(header.alloc_ptr as usize);
        if !header.alloc_ptr.is_null() && bytes <= avail {
            let p = header.alloc_ptr;
            // SAFETY: `p + bytes` stays within the current chunk.
            header.alloc_ptr = unsafe { p.add(bytes) };
            return Some(p);
        }
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
        let p = chunk.ptr;
        self.reserved += chunk.size;
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
        self.chunks.truncate(n);
        self.reserved = self.chunks.iter().map(|c| c.size).sum();
        match self.chunks.last() {
            Some(c) => {
                // SAFETY: `off` is within the chunk (checked above); the end is one past it.
                unsafe {
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
        a.release(&mut h, m);
        assert_eq!(a.chunks.len(), 1);
        assert_eq!(a.reserved(), FIRST_CHUNK);
        assert_eq!(a.used_since(&h, m), 0);
        assert_eq!(a.alloc(&mut h, 8).unwrap(), q, "the memory after the mark is reused");
        // Releasing to the empty mark frees everything.
        a.release(&mut h, 0);
        assert_eq!(a.reserved(), 0);
        assert!(h.alloc_ptr.is_null());
        // A stale mark is ignored.
        a.release(&mut h, m);
        assert_eq!(a.reserved(), 0);
    }
}

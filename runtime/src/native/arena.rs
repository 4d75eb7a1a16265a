//! Per-call arenas: chunked bump allocation. The bump cursor lives in the context header
//! (`CtxHeader::alloc_ptr`/`alloc_end`) so compiled code allocates inline; this module owns the
//! chunks and hands out new ones on the slow path. Resetting keeps the largest chunk for reuse.

use std::alloc::{alloc_zeroed, dealloc, Layout};

use jit::CtxHeader;

/// Bytes of the first chunk.
const FIRST_CHUNK: usize = 64 << 10;
/// Chunks grow geometrically up to this size (larger requests get a chunk of their own size).
const MAX_GROWTH: usize = 64 << 20;

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
}

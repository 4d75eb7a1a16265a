//! The binary interface between compiled code and the runtime: the call context's header, the
//! word type of the calling interface, and the table of support functions.

use std::fmt;

use anf::ir::{Signature, Type};
use rustc_hash::FxHashMap;

/// The part of the runtime's per-call context that compiled code reads and writes directly.
///
/// The runtime's context type must start with this header (`#[repr(C)]`, first field), because
/// compiled code and every support function receive a pointer to it as their first argument.
#[repr(C)]
#[derive(Debug)]
pub struct CtxHeader {
    /// Next free byte of the current arena chunk (8-aligned); `alloc` bumps it inline.
    pub alloc_ptr: *mut u8,
    /// End of the current arena chunk (8-aligned); past it `alloc` calls [`ALLOC_SYMBOL`].
    pub alloc_end: *mut u8,
    /// 0 while the call is fine; a trap code (`anf::ir::TrapCode`) once it failed.
    pub status: i64,
    /// The lowest stack address recursive code may reach: functions on a cycle of the call graph
    /// trap with `StackOverflow` below it instead of overflowing the stack. Null: no limit.
    pub stack_limit: *mut u8,
    /// How many bags and maps the runtime has made (a count that only grows): a compaction
    /// check's inline fast path compares it with the count in the loop's mark.
    pub collections_made: i64,
    /// The least bound `nabla_arena_scope_begin` compacts above, and `nabla_arena_compact_begin`'s
    /// (both before the `threshold` argument is applied): the fast path answers "not yet" inline
    /// when the loop has made at most `max(bound, threshold)` bytes in the mark's chunk.
    pub scope_bound: i64,
    pub compact_bound: i64,
    /// Where the JIT's register-preserving trampolines for rarely taken support calls leave the
    /// callee's result (the calling convention they use returns nothing in registers).
    pub scratch: i64,
}

/// Byte offsets of the header's fields, used by the code generator.
pub(crate) const CTX_ALLOC_PTR: i32 = 0;
pub(crate) const CTX_ALLOC_END: i32 = 8;
pub(crate) const CTX_STATUS: i32 = 16;
pub(crate) const CTX_STACK_LIMIT: i32 = 24;
pub(crate) const CTX_COLLECTIONS_MADE: i32 = 32;
pub(crate) const CTX_SCOPE_BOUND: i32 = 40;
pub(crate) const CTX_COMPACT_BOUND: i32 = 48;
pub(crate) const CTX_SCRATCH: i32 = 56;

/// A compacting loop's mark, as compiled code holds it, is the address of the record
/// `nabla_arena_mark` allocates in the arena, `MARK_WORDS` words just below the position it marks:
/// the runtime's token for that position, [`CtxHeader::collections_made`] and the chunk's end
/// (`alloc_end`) when it was taken, and the runtime's bag and map counts (the last word, so that it
/// lies just below the position). The JIT reads the second and third words to decide inline
/// whether a loop has made more than its bound since the mark (see `CtxHeader::scope_bound`).
pub const MARK_WORDS: usize = 4;
/// Word indices in a mark record.
pub const MARK_TOKEN: usize = 0;
pub const MARK_COLLECTIONS: usize = 1;
pub const MARK_CHUNK_END: usize = 2;
pub const MARK_COUNTS: usize = 3;
/// The compaction checks that get an inline fast path (`anf::ir::support`).
pub(crate) const SCOPE_BEGIN_SYMBOL: &str = "nabla_arena_scope_begin";
pub(crate) const COMPACT_BEGIN_SYMBOL: &str = "nabla_arena_compact_begin";
pub(crate) const COMPACT_END_SYMBOL: &str = "nabla_arena_compact_end";
/// Support functions called only on rarely taken paths inside loops (a compaction check past
/// its inline fast path, the compaction itself, a new arena chunk): compiled code calls them
/// through a trampoline that preserves every register, so the values a loop keeps in registers
/// need not be saved around the call on its hot path.
pub(crate) const COLD_SYMBOLS: [&str; 12] = [
    SCOPE_BEGIN_SYMBOL,
    COMPACT_BEGIN_SYMBOL,
    COMPACT_END_SYMBOL,
    "nabla_arena_since",
    "nabla_arena_in_side",
    "nabla_arena_keep_bag",
    "nabla_arena_keep_map",
    "nabla_arena_hold",
    "nabla_arena_map_slots",
    "nabla_arena_map_slot",
    "nabla_arena_map_slots_end",
    ALLOC_SYMBOL,
];

impl CtxHeader {
    /// A header with no arena memory: every allocation goes to the slow path.
    pub fn empty() -> CtxHeader {
        CtxHeader {
            alloc_ptr: std::ptr::null_mut(),
            alloc_end: std::ptr::null_mut(),
            status: 0,
            stack_limit: std::ptr::null_mut(),
            collections_made: 0,
            scope_bound: 0,
            compact_bound: 0,
            scratch: 0,
        }
    }

    /// Limits recursion to about `bytes` of stack below the caller's frame (call it on the thread
    /// that runs the compiled code, just before calling).
    pub fn limit_stack(&mut self, bytes: usize) {
        let here = 0u8;
        let sp = std::ptr::addr_of!(here) as usize;
        self.stack_limit = sp.saturating_sub(bytes) as *mut u8;
    }
}

/// `nabla_trap(ctx, code: i64, site: i64, a: i64, b: i64)`: records why and where the call
/// failed (the generated code has already stored `code` into `status`). Required when the module
/// can fail.
pub const TRAP_SYMBOL: &str = "nabla_trap";
/// `nabla_alloc(ctx, bytes: i64) -> ptr`: the allocation slow path; on failure it returns null
/// and sets `status`. Required when the module allocates.
pub const ALLOC_SYMBOL: &str = "nabla_alloc";

/// The IR signature `nabla_trap` must have.
pub fn trap_signature() -> Signature {
    Signature::new(vec![Type::I64, Type::I64, Type::I64, Type::I64], vec![])
}

/// The IR signature `nabla_alloc` must have.
pub fn alloc_signature() -> Signature {
    Signature::new(vec![Type::I64], vec![Type::Ptr])
}

/// One machine word passed to or returned from compiled code: `i64`, `f64` bits, `bool` as 0/1,
/// or a pointer.
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Word(pub u64);

impl Word {
    /// An `i64` word.
    pub fn from_i64(x: i64) -> Word {
        Word(x as u64)
    }
    /// An `f64` word.
    pub fn from_f64(x: f64) -> Word {
        Word(x.to_bits())
    }
    /// A `bool` word (0 or 1).
    pub fn from_bool(b: bool) -> Word {
        Word(b as u64)
    }
    /// A pointer word.
    pub fn from_ptr<T>(p: *const T) -> Word {
        Word(p as usize as u64)
    }
    /// The word as `i64`.
    pub fn as_i64(self) -> i64 {
        self.0 as i64
    }
    /// The word as `f64`.
    pub fn as_f64(self) -> f64 {
        f64::from_bits(self.0)
    }
    /// The word as `bool` (any nonzero word is true).
    pub fn as_bool(self) -> bool {
        self.0 != 0
    }
    /// The word as a pointer.
    pub fn as_ptr<T>(self) -> *mut T {
        self.0 as usize as *mut T
    }
}

impl fmt::Debug for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Word({:#x})", self.0)
    }
}

/// A runtime function compiled code may call: `extern "C" fn(ctx: *mut CtxHeader, params...)`.
#[derive(Clone, Debug)]
pub struct SupportFn {
    pub name: String,
    pub addr: *const u8,
    /// The IR signature, without the implicit `ctx` parameter.
    pub sig: Signature,
    /// May set `status`; callers then unwind.
    pub fallible: bool,
}

/// The runtime's support functions by symbol name.
#[derive(Clone, Debug, Default)]
pub struct SupportTable {
    fns: FxHashMap<String, SupportFn>,
}

impl SupportTable {
    /// An empty table.
    pub fn new() -> SupportTable {
        SupportTable::default()
    }
    /// Adds (or replaces) a support function.
    pub fn insert(&mut self, f: SupportFn) {
        self.fns.insert(f.name.clone(), f);
    }
    /// Adds a support function from its parts.
    pub fn add(&mut self, name: &str, addr: *const u8, params: &[Type], rets: &[Type], fallible: bool) {
        let sig = Signature::new(params.to_vec(), rets.to_vec());
        self.insert(SupportFn { name: name.to_string(), addr, sig, fallible });
    }
    /// The function called `name`.
    pub fn get(&self, name: &str) -> Option<&SupportFn> {
        self.fns.get(name)
    }
    /// All functions, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &SupportFn> {
        self.fns.values()
    }
}

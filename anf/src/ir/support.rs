//! The catalogue of runtime support functions IR may call with `call $name(...)`: names,
//! signatures (without the implicit `ctx`) and fallibility. Lowering declares externs from it;
//! the runtime (`runtime::native`) implements each with `extern "C"` and hands the JIT a table of
//! their addresses; a test there checks the two agree.
//!
//! Collections are runtime objects behind a `ptr`, owned by the call context. Keys and values
//! are passed as pointers to their memory slots (see `layout`); `*_entries` return an arena array
//! of records sorted by key (signed lexicographic order over the key's words), so folds over bags
//! and maps are plain IR loops and iterate deterministically.

use super::{ExtFuncId, Module, Signature, Type};

/// One support function's interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SupportDecl {
    pub name: &'static str,
    pub params: &'static [Type],
    pub rets: &'static [Type],
    pub fallible: bool,
}

impl SupportDecl {
    /// The IR signature.
    pub fn signature(&self) -> Signature {
        Signature::new(self.params.to_vec(), self.rets.to_vec())
    }
}

use Type::{Bool as B, Ptr as P, F64 as F, I64 as I};

/// Shorthand for a catalogue entry.
const fn decl(name: &'static str, params: &'static [Type], rets: &'static [Type], fallible: bool) -> SupportDecl {
    SupportDecl { name, params, rets, fallible }
}

/// Every support function, by name.
pub const SUPPORT: &[SupportDecl] = &[
    // Compaction (see `lower::compact`): a mark of the arena's position (it allocates a slot,
    // so it can fail); `(mark, threshold) -> compact now?` for a loop's carried value and for one
    // iteration's element (allocation then goes to a side arena); during a compaction, `(ptr) ->
    // made since the mark?` and `(ptr) -> in the side arena?` decide per allocation what is
    // copied, `keep_bag`/`keep_map` keep a collection made since the mark; `(mark) -> survivor
    // bytes` frees everything made since the mark.
    decl("nabla_arena_mark", &[], &[I], true),
    decl("nabla_arena_compact_begin", &[I, I], &[B], false),
    decl("nabla_arena_scope_begin", &[I, I], &[B], false),
    decl("nabla_arena_since", &[P], &[B], false),
    decl("nabla_arena_in_side", &[P], &[B], false),
    decl("nabla_arena_keep_bag", &[P], &[P], false),
    decl("nabla_arena_keep_map", &[P], &[P], false),
    // `(ptr)`: the survivor holds something compaction cannot copy (a group record, a change's
    // payload, a dual's environment): made since the mark, it abandons the compaction
    // (`compact_end` then frees nothing and gives minus the bytes).
    decl("nabla_arena_hold", &[P], &[], false),
    // A map whose values hold pointers, kept by the compaction (`(map, back) -> base`, -1 when
    // there is nothing to copy): the addresses of its values' words, `nabla_map_len` of them,
    // are `(base, i) -> slot`, until `(base)` drops them.
    decl("nabla_arena_map_slots", &[P, B], &[I], false),
    decl("nabla_arena_map_slot", &[I, I], &[P], false),
    decl("nabla_arena_map_slots_end", &[I], &[], false),
    decl("nabla_arena_compact_end", &[I], &[I], false),
    // Real primitives Cranelift has no instruction for.
    decl("nabla_sin", &[F], &[F], false),
    decl("nabla_cos", &[F], &[F], false),
    decl("nabla_tan", &[F], &[F], false),
    decl("nabla_exp", &[F], &[F], false),
    decl("nabla_log", &[F], &[F], false),
    decl("nabla_tanh", &[F], &[F], false),
    decl("nabla_sigmoid", &[F], &[F], false),
    decl("nabla_pow", &[F, F], &[F], false),
    decl("nabla_floor", &[F], &[F], false),
    decl("nabla_round", &[F], &[F], false),
    // `f64 -> i64` truncating, for a value already checked to be in range (`toInt`).
    decl("nabla_to_int", &[F], &[I], false),
    // Bags: `(key_words) -> bag`; insert adds a signed multiplicity in place (fresh bags only).
    // Every function that adds or scales multiplicities takes a site last and fails with
    // `bag_overflow` there when a multiplicity leaves Int's range.
    decl("nabla_bag_new", &[I], &[P], true),
    decl("nabla_bag_insert", &[P, P, I, I], &[], true),
    // `(bag, key, n, m, site)`: insert with multiplicity `n·m` (bag fusion's scaled insert).
    decl("nabla_bag_insert_scaled", &[P, P, I, I, I], &[], true),
    // `(a, b, site) -> a·b`, failing with `bag_overflow` at `site` (bag fusion's product of two
    // scales).
    decl("nabla_mul_checked", &[I, I, I], &[I], true),
    decl("nabla_bag_merge", &[P, P, I], &[P], true),
    decl("nabla_bag_negate", &[P, I], &[P], true),
    // In place: `dst` (a bag no one else holds) gains every entry of `src`.
    decl("nabla_bag_add_into", &[P, P, I], &[], true),
    // In place: `dst` gains every entry of `src` times the `i64` (a bag fold's step).
    decl("nabla_bag_add_scaled", &[P, P, I, I], &[], true),
    // A new bag, every multiplicity times the `i64` (zeros dropped).
    decl("nabla_bag_scale", &[P, I, I], &[P], true),
    decl("nabla_bag_eq", &[P, P], &[B], false),
    decl("nabla_bag_clone", &[P], &[P], true),
    decl("nabla_bag_count", &[P, P], &[I], false),
    decl("nabla_bag_len", &[P], &[I], false),
    // Array of `{key words, multiplicity: i64}`, sorted by key, zero multiplicities absent.
    decl("nabla_bag_entries", &[P], &[P], true),
    // The same records in no particular order (for folds that cannot observe the order).
    decl("nabla_bag_entries_unordered", &[P], &[P], true),
    // Maps: `(key_words, value_words) -> map`; set/remove update in place (fresh maps only).
    decl("nabla_map_new", &[I, I], &[P], true),
    decl("nabla_map_set", &[P, P, P], &[], true),
    decl("nabla_map_remove", &[P, P], &[], true),
    // A map literal's binding `(map, key, value, site)`: fails with `duplicate_key` at `site`.
    decl("nabla_map_insert_unique", &[P, P, P, I], &[], true),
    decl("nabla_map_clone", &[P], &[P], true),
    // Copies the value's words to the out-pointer and gives true, or gives false if absent.
    decl("nabla_map_get", &[P, P, P], &[B], false),
    // Per-site fallback (`interp'`): `(k, args, out)` evaluates the interpreted site `k` at the
    // words at `args` (its free locals) and writes its value's words at `out`; arrays it returns
    // are made in the arena.
    decl("nabla_interp", &[I, P, P], &[], true),
    // A `vjp`'s cotangent of the wrong length, or a tangent of another length than the dual
    // vector it is paired with (`ctCheck'`): `(n, m, shape, idx, count, site)` always fails with
    // `cotangent_length` at `site`, the message naming the check (`shape`'s sign) and the path
    // `shape` and the `count` indices at `idx` give (`ir::shape_check_message`).
    decl("nabla_cotangent_mismatch", &[I, I, I, P, I, I], &[], true),
    decl("nabla_map_len", &[P], &[I], false),
    // Array of `{key words, value words}`, sorted by key.
    decl("nabla_map_entries", &[P], &[P], true),
    // `(dst, src, m, kind, site)`: `dst ⊕ m·src` in place for a `mapGroup` over one-word values
    // in builtin group `kind` (`lower::groups::GroupKind`: Int, Real or Bag), without the scaled
    // copy (a map fold's step; `dst` and its bags are the fold's own). A bag multiplicity out of
    // Int's range fails with `bag_overflow` at `site`.
    decl("nabla_map_add_scaled", &[P, P, I, I, I], &[], true),
    // `(dst, key, value, m, kind, site)`: the same for the singleton map `{key -> value}`
    // (`opt::maps` fuses a singleton made only to be added into this call).
    decl("nabla_map_add_scaled_key", &[P, P, P, I, I, I], &[], true),
];

/// The catalogue entry called `name`.
pub fn lookup(name: &str) -> Option<&'static SupportDecl> {
    SUPPORT.iter().find(|d| d.name == name)
}

impl Module {
    /// Declares catalogue function `name` as an extern of this module (once); `None` if unknown.
    pub fn declare_support(&mut self, name: &str) -> Option<ExtFuncId> {
        let d = lookup(name)?;
        Some(self.declare_extern(d.name, d.signature(), d.fallible))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_declarations_print_and_verify() {
        let mut m = Module::new();
        for d in SUPPORT {
            m.declare_support(d.name).unwrap();
        }
        assert_eq!(m.declare_support("nabla_sin"), m.extern_by_name("nabla_sin"));
        assert!(m.declare_support("nabla_nothing").is_none());
        let text = crate::ir::print(&m);
        assert!(text.contains("extern fallible $nabla_map_set(ptr, ptr, ptr) -> ()\n"), "{text}");
        let back = crate::ir::parse(&text).unwrap();
        assert_eq!(crate::ir::print(&back), text);
        crate::ir::verify(&back).unwrap();
    }
}

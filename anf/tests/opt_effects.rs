//! What each optimiser pass must achieve on hand-written IR, one rewrite per case: the cases
//! mutation testing (TESTING.md, "Mutation testing") found no test asking for. Each output is
//! also checked to verify and to round-trip through the text form.

use anf::ir::{parse, print, verify};
use anf::opt::{optimize, OptOptions};

/// Parses `text`, optimises it with `main` as the root, verifies and prints the result.
fn opt(text: &str) -> String {
    let mut m = parse(text).unwrap_or_else(|e| panic!("{e:?}"));
    verify(&m).unwrap_or_else(|e| panic!("input does not verify: {e:?}"));
    let main = m.func_by_name("main").expect("a main function");
    optimize(&mut m, &[main], &OptOptions::default());
    if let Err(es) = verify(&m) {
        panic!(
            "output does not verify:\n{}\n{}",
            es.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"),
            print(&m)
        );
    }
    let text = print(&m);
    assert_eq!(print(&parse(&text).unwrap()), text, "the output round-trips");
    text
}

/// Lines of function `name` containing `what`.
fn count(text: &str, name: &str, what: &str) -> usize {
    let start = text.find(&format!("fn @{name}(")).unwrap_or_else(|| panic!("no @{name} in\n{text}"));
    let body = &text[start..];
    let end = body.find("\n}").unwrap_or(body.len());
    body[..end].lines().filter(|l| l.contains(what)).count()
}

/// Every kind of operation without effects, computed twice from the same operands and both
/// results kept (stored to distinct slots): the second of each pair goes.
#[test]
fn cse_merges_every_pure_operation() {
    let text = "\
tag t0 = @k env()

fn @main(ptr, i64, i64, f64, f64, bool) -> () {
b0(v0: ptr, v1: i64, v2: i64, v3: f64, v4: f64, v5: bool):
    v10 = iconst 123
    v11 = iconst 123
    store v10, v0+0
    store v11, v0+8
    v12 = fconst 2.5
    v13 = fconst 2.5
    store v12, v0+16
    store v13, v0+24
    v14 = bconst true
    v15 = bconst true
    store v14, v0+32
    store v15, v0+40
    v16 = null
    v17 = null
    store v16, v0+48
    store v17, v0+56
    v18 = tag t0
    v19 = tag t0
    store v18, v0+64
    store v19, v0+72
    v20 = ineg v1
    v21 = ineg v1
    store v20, v0+80
    store v21, v0+88
    v22 = imul v1, v2
    v23 = imul v1, v2
    store v22, v0+96
    store v23, v0+104
    v24 = icmp lt v1, v2
    v25 = icmp lt v1, v2
    store v24, v0+112
    store v25, v0+120
    v26 = fcmp lt v3, v4
    v27 = fcmp lt v3, v4
    store v26, v0+128
    store v27, v0+136
    v28 = select.f64 v5, v3, v4
    v29 = select.f64 v5, v3, v4
    store v28, v0+144
    store v29, v0+152
    v30 = elemaddr v0, v1, 8
    v31 = elemaddr v0, v1, 8
    store v30, v0+160
    store v31, v0+168
    return
}

fn @k(ptr) -> () {
b0(v0: ptr):
    return
}
";
    let out = opt(text);
    for what in [
        "iconst 123",
        "fconst 2.5",
        "bconst true",
        "= null",
        "= tag t0",
        "ineg",
        "imul",
        "icmp",
        "fcmp",
        "select",
        "elemaddr",
    ] {
        assert_eq!(count(&out, "main", what), 1, "`{what}` twice in\n{out}");
    }
    assert_eq!(count(&out, "main", "store"), 22, "{out}");
}

/// A slot read at another type than it was stored or loaded at is read from memory (the bits
/// are reinterpreted): the earlier value, of the wrong type, is not forwarded.
#[test]
fn cse_forwards_a_slot_only_at_the_type_it_holds() {
    let text = "\
fn @main(ptr, i64) -> f64 {
b0(v0: ptr, v1: i64):
    store v1, v0+0
    v2 = load.f64 v0+0
    v3 = load.i64 v0+8
    v4 = load.f64 v0+8
    v5 = itof v3
    v6 = fadd v2, v4
    v7 = fadd v6, v5
    return v7
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "load.f64 v0+0"), 1, "{out}");
    assert_eq!(count(&out, "main", "load.f64 v0+8"), 1, "{out}");
    assert_eq!(count(&out, "main", "load.i64 v0+8"), 1, "{out}");
}

/// A counted loop as `lower::compact` makes it: a mark before the loop, a compaction check at
/// the end of each iteration; `BODY` (in the loop body, before the check) and `AFTER` (after
/// the loop) are spliced in, with `$nabla_bag_new`, `$nabla_bag_len`, `$nabla_arena_since`,
/// `$nabla_map_get`, `@alloc_rec` (recursive; it allocates) and `@quiet` (too big to inline at
/// two call sites; it does not allocate) available.
fn scoped_loop(before: &str, body: &str, after: &str) -> String {
    // Too big to inline at two call sites.
    let quiet: String = (1..=50).map(|i| format!("    v{} = iadd v{}, v0\n", i + 1, i)).collect::<String>().replacen(
        "v2 = iadd v1, v0",
        "v2 = iadd v0, v0",
        1,
    );
    format!(
        "\
extern fallible $nabla_arena_mark() -> i64
extern $nabla_arena_scope_begin(i64, i64) -> bool
extern $nabla_arena_compact_end(i64) -> i64
extern $nabla_arena_since(ptr) -> bool
extern fallible $nabla_bag_new(i64) -> ptr
extern $nabla_bag_len(ptr) -> i64
extern $nabla_map_get(ptr, ptr, ptr) -> bool

fn @main(i64, ptr) -> i64 {{
b0(v0: i64, v1: ptr):
    v2 = call $nabla_arena_mark()
{before}    v3 = iconst 0
    jump b1(v3, v3)
b1(v4: i64, v5: i64):
    v6 = icmp lt v4, v0
    brif v6, b2, b5
b2:
{body}    v11 = call $nabla_arena_scope_begin(v2, v5)
    brif v11, b3, b4(v5)
b3:
    v12 = call $nabla_arena_compact_end(v2)
    v13 = iadd v12, v12
    jump b4(v13)
b4(v14: i64):
    v15 = iconst 1
    v16 = iadd v4, v15
    jump b1(v16, v14)
b5:
{after}    return v4
}}

fn @alloc_rec(i64, ptr) -> () {{
b0(v0: i64, v1: ptr):
    v2 = iconst 0
    v3 = icmp le v0, v2
    brif v3, b1, b2
b1:
    return
b2:
    v4 = alloc 8
    store v4, v1+0
    v5 = iconst 1
    v6 = isub v0, v5
    call @alloc_rec(v6, v1)
    return
}}

fn @quiet(i64, ptr) -> () {{
b0(v0: i64, v1: ptr):
{quiet}    store v50, v1+0
    return
}}
"
    )
}

/// A loop whose body allocates nothing once optimised loses its mark and checks; one that may
/// allocate on the way from the mark to a check keeps them.
#[test]
fn compaction_scopes_go_exactly_when_nothing_allocates_before_a_check() {
    let idle = [
        ("arithmetic", "", "    v20 = imul v4, v4\n    store v20, v1+0\n", ""),
        ("a pure support call", "", "    v20 = call $nabla_bag_len(v1)\n    store v20, v1+0\n", ""),
        ("an arena query", "", "    v20 = call $nabla_arena_since(v1)\n    store v20, v1+0\n", ""),
        ("map_get", "", "    v20 = call $nabla_map_get(v1, v1, v1)\n    store v20, v1+0\n", ""),
        ("calls that do not allocate", "", "    call @quiet(v4, v1)\n    call @quiet(v4, v1)\n", ""),
        ("an allocation after the loop", "", "", "    v30 = alloc 8\n    store v30, v1+0\n"),
    ];
    for (what, before, body, after) in idle {
        let out = opt(&scoped_loop(before, body, after));
        assert_eq!(count(&out, "main", "arena_mark"), 0, "{what}:\n{out}");
        assert_eq!(count(&out, "main", "scope_begin"), 0, "{what}:\n{out}");
    }
    let busy = [
        ("an alloc", "", "    v20 = alloc 8\n    store v20, v1+0\n", ""),
        ("a bag", "", "    v20 = call $nabla_bag_new(v4)\n    store v20, v1+0\n", ""),
        ("a call that allocates", "", "    call @alloc_rec(v4, v1)\n", ""),
        ("an alloc between the mark and the loop", "    v30 = alloc 8\n    store v30, v1+0\n", "", ""),
    ];
    for (what, before, body, after) in busy {
        let out = opt(&scoped_loop(before, body, after));
        assert_eq!(count(&out, "main", "arena_mark"), 1, "{what}:\n{out}");
        assert_eq!(count(&out, "main", "scope_begin"), 1, "{what}:\n{out}");
    }
}

/// A record made, stored once and passed to a call that writes only memory it allocated itself
/// (a record of its own, an array element) is read back as the stored value: the module is
/// clean (`simplify`, "Forwarding through records").
const CLEAN_CALLEE: &str = "\
fn @main(i64) -> i64 {
b0(v0: i64):
    v1 = alloc 8
    store v0, v1+0
    call @reader(v1, v0)
    v2 = load.i64 v1+0
    return v2
}

fn @reader(ptr, i64) -> () {
b0(v0: ptr, v1: i64):
    v2 = iconst 0
    v3 = icmp le v1, v2
    brif v3, b1, b2
b1:
    return
b2:
    v4 = alloc 8
    store v1, v4+0
    v5 = elemaddr v0, v2, 8
    store v1, v5+0
    v6 = iconst 1
    v7 = isub v1, v6
    call @reader(v4, v7)
    return
}
";

#[test]
fn records_escaping_into_clean_callees_are_forwarded() {
    let out = opt(CLEAN_CALLEE);
    assert_eq!(count(&out, "main", "load.i64"), 0, "{out}");
}

/// `nabla_map_get` writing its result through a pointer its caller did not allocate makes the
/// module unclean: an escaping record is read from memory.
#[test]
fn support_functions_writing_foreign_memory_make_the_module_unclean() {
    let text = CLEAN_CALLEE
        .replace(
            "fn @reader(ptr, i64) -> () {",
            "extern $nabla_map_get(ptr, ptr, ptr) -> bool\n\nfn @reader(ptr, i64) -> () {",
        )
        .replace("    v6 = iconst 1\n", "    v8 = call $nabla_map_get(v4, v4, v0)\n    v6 = iconst 1\n");
    let out = opt(&text);
    assert_eq!(count(&out, "main", "load.i64"), 1, "{out}");
}

/// An unused call of a support function without effects goes; an unused call that may fail or
/// allocate stays.
#[test]
fn unused_pure_support_calls_go() {
    let text = "\
extern $nabla_sin(f64) -> f64
extern fallible $nabla_bag_new(i64) -> ptr

fn @main(f64) -> f64 {
b0(v0: f64):
    v1 = call $nabla_sin(v0)
    v2 = iconst 1
    v3 = call $nabla_bag_new(v2)
    return v0
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "nabla_sin"), 0, "{out}");
    assert_eq!(count(&out, "main", "nabla_bag_new"), 1, "{out}");
}

/// A block nothing jumps to goes even when nothing else in the function changes.
#[test]
fn blocks_without_predecessors_go() {
    let text = "\
fn @main(i64) -> i64 {
b0(v0: i64):
    return v0
b1:
    v1 = iconst 1
    return v1
}
";
    let out = opt(text);
    assert_eq!(out.matches("\nb").count(), 1, "one block is left:\n{out}");
}

/// Folding the branch merges the blocks, which gives the join's parameter one value; the
/// multiplication of that constant folds only in a later round: simplification runs until
/// nothing changes.
#[test]
fn simplification_repeats_until_nothing_changes() {
    let text = "\
fn @main(i64) -> i64 {
b0(v0: i64):
    v1 = iconst 2
    v2 = iconst 3
    v3 = icmp lt v1, v2
    brif v3, b1, b2
b1:
    jump b3(v1)
b2:
    jump b3(v2)
b3(v4: i64):
    v5 = imul v4, v4
    v6 = iadd v0, v5
    return v6
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "imul"), 0, "{out}");
    assert_eq!(count(&out, "main", "iconst 4"), 1, "{out}");
    assert_eq!(out.matches("\nb").count(), 1, "one block is left:\n{out}");
}

/// A loop parameter that only ever receives one value (from the entry; itself around the loop)
/// is that value; so is a join parameter given the same value on both edges.
#[test]
fn parameters_with_one_incoming_value_are_propagated() {
    let text = "\
fn @main(i64, i64) -> i64 {
b0(v0: i64, v1: i64):
    jump b1(v0, v1)
b1(v2: i64, v3: i64):
    v4 = icmp lt v2, v3
    brif v4, b2, b3
b2:
    v5 = iconst 1
    v6 = iadd v2, v5
    jump b1(v6, v3)
b3:
    return v3
}
";
    let out = opt(text);
    assert!(out.contains("    return v1\n"), "{out}");
    assert!(out.contains("icmp lt v2, v1"), "{out}");
    let join = "\
fn @main(i64, bool) -> i64 {
b0(v0: i64, v1: bool):
    brif v1, b1, b2
b1:
    v2 = imul v0, v0
    jump b3(v0, v2)
b2:
    v3 = iadd v0, v0
    jump b3(v0, v3)
b3(v4: i64, v5: i64):
    v6 = isub v4, v5
    return v6
}
";
    let out = opt(join);
    assert!(
        out.lines().all(|l| !(l.starts_with('b') && !l.starts_with("b0") && l.contains(", v"))),
        "a join keeps two parameters:\n{out}"
    );
    assert_eq!(count(&out, "main", "isub v0, v"), 1, "{out}");
}

/// A parameter given one value by a `switch` case and a jump: the case's argument goes with it.
#[test]
fn parameters_propagate_through_switch_cases() {
    let text = "\
tag t0 = @k env()
tag t1 = @k env()

fn @main(i64, i64) -> i64 {
b0(v0: i64, v1: i64):
    switch v0, [t0: b1(v1), t1: b2]
b1(v2: i64):
    v3 = imul v2, v2
    return v3
b2:
    v4 = iadd v1, v1
    v5 = ineg v4
    jump b1(v1)
}

fn @k(ptr) -> () {
b0(v0: ptr):
    return
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "imul v1, v1"), 1, "{out}");
}

/// Unary operations of constants fold.
#[test]
fn unary_operations_of_constants_fold() {
    let text = "\
fn @main() -> i64 {
b0:
    v0 = iconst 3
    v1 = ineg v0
    v2 = bconst true
    v3 = not v2
    v4 = btoi v3
    v5 = iadd v1, v4
    return v5
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "ineg"), 0, "{out}");
    assert_eq!(count(&out, "main", "iconst -3"), 1, "{out}");
}

/// A support call without effects computed twice from the same operands is computed once, and
/// it does not make a load after it read memory again.
#[test]
fn cse_merges_pure_support_calls() {
    let text = "\
extern $nabla_sin(f64) -> f64
extern $nabla_pow(f64, f64) -> f64

fn @main(ptr, f64) -> f64 {
b0(v0: ptr, v1: f64):
    v2 = load.f64 v0+0
    v3 = call $nabla_sin(v1)
    v4 = call $nabla_sin(v1)
    v5 = call $nabla_pow(v1, v2)
    v6 = call $nabla_pow(v1, v2)
    v7 = load.f64 v0+0
    v8 = fadd v3, v4
    v9 = fadd v5, v6
    v10 = fadd v8, v9
    v11 = fadd v10, v7
    return v11
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "nabla_sin"), 1, "{out}");
    assert_eq!(count(&out, "main", "nabla_pow"), 1, "{out}");
    assert_eq!(count(&out, "main", "load.f64"), 1, "{out}");
}

/// A record passed as a key to a support function that only reads it (`nabla_bag_insert`) is
/// still forwarded: only the arguments of `WRITES_THROUGH` are written.
#[test]
fn records_read_by_support_functions_are_forwarded() {
    let text = "\
extern fallible $nabla_bag_insert(ptr, ptr, i64, i64) -> ()

fn @main(ptr, i64) -> i64 {
b0(v0: ptr, v1: i64):
    v2 = alloc 8
    store v1, v2+0
    v3 = iconst 1
    call $nabla_bag_insert(v0, v2, v3, v3)
    v4 = load.i64 v2+0
    return v4
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "load.i64"), 0, "{out}");
}

/// A store through a pointer a support function returned (here the copy compaction keeps of a
/// collection, which may be the record itself) has an unknown target: a record passed there is
/// read from memory afterwards. A store to a map's value slot (`nabla_arena_map_slot`, the
/// runtime's memory) is known never to touch a record: an escaping record stays forwarded.
#[test]
fn writes_through_returned_pointers_are_unknown_except_map_slots() {
    let text = "\
extern $nabla_arena_keep_bag(ptr) -> ptr

fn @main(i64) -> i64 {
b0(v0: i64):
    v1 = alloc 8
    store v0, v1+0
    v2 = call $nabla_arena_keep_bag(v1)
    v3 = iconst 5
    store v3, v2+0
    v4 = load.i64 v1+0
    return v4
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "load.i64"), 1, "{out}");
    let slot = CLEAN_CALLEE
        .replace(
            "fn @reader(ptr, i64) -> () {",
            "extern $nabla_arena_map_slot(i64, i64) -> ptr\n\nfn @reader(ptr, i64) -> () {",
        )
        .replace(
            "    v6 = iconst 1\n",
            "    v8 = call $nabla_arena_map_slot(v1, v2)\n    store v1, v8+0\n    v6 = iconst 1\n",
        );
    let out = opt(&slot);
    assert_eq!(count(&out, "main", "load.i64"), 0, "{out}");
}

/// A tag is an `i64` constant (its index): comparisons of constant tags fold.
#[test]
fn comparisons_of_constant_tags_fold() {
    let text = "\
tag t0 = @k env()
tag t1 = @k env()

fn @main() -> bool {
b0:
    v0 = tag t0
    v1 = tag t1
    v2 = icmp eq v0, v1
    v3 = icmp lt v0, v1
    v4 = xor v2, v3
    return v4
}

fn @k(ptr) -> () {
b0(v0: ptr):
    return
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "icmp"), 0, "{out}");
    assert!(out.contains("bconst true"), "{out}");
}

/// A fresh bag filled with one insert and added into `v0`, with `BETWEEN` spliced in between
/// the insert and the addition (`v1` another bag, `v2` a key record, `v3` a multiplicity, `v4`
/// a site, `v5` a slot for a result).
fn fresh_bag_into(between: &str) -> String {
    format!(
        "\
extern fallible $nabla_bag_new(i64) -> ptr
extern fallible $nabla_bag_insert(ptr, ptr, i64, i64) -> ()
extern fallible $nabla_bag_insert_scaled(ptr, ptr, i64, i64, i64) -> ()
extern fallible $nabla_bag_add_scaled(ptr, ptr, i64, i64) -> ()
extern fallible $nabla_bag_add_into(ptr, ptr, i64) -> ()
extern $nabla_bag_len(ptr) -> i64

fn @main(ptr, ptr, ptr, i64, i64, ptr) -> ptr {{
b0(v0: ptr, v1: ptr, v2: ptr, v3: i64, v4: i64, v5: ptr):
    v6 = iconst 1
    v7 = call $nabla_bag_new(v6)
    call $nabla_bag_insert(v7, v2, v3, v4)
{between}    call $nabla_bag_add_into(v0, v7, v4)
    return v0
}}
"
    )
}

/// Fusion moves the fresh bag's inserts to the destination before the addition: other
/// accumulations into the destination in between commute with them, but anything reading the
/// destination there (its length, adding it to itself or into another bag, using it as a key)
/// would see the inserts too early.
#[test]
fn fusion_allows_accumulations_into_the_destination_meanwhile_and_nothing_else() {
    let accumulations = "    call $nabla_bag_insert(v0, v2, v3, v4)
    call $nabla_bag_insert_scaled(v0, v2, v3, v3, v4)
    call $nabla_bag_add_scaled(v0, v1, v3, v4)
    call $nabla_bag_add_into(v0, v1, v4)
";
    let out = opt(&fresh_bag_into(accumulations));
    assert_eq!(count(&out, "main", "bag_new"), 0, "{out}");
    assert_eq!(count(&out, "main", "bag_insert(v0"), 2, "{out}");
    for read in [
        "    v8 = call $nabla_bag_len(v0)\n    store v8, v5+0\n",
        "    call $nabla_bag_insert(v0, v0, v3, v4)\n",
        "    call $nabla_bag_add_scaled(v0, v0, v3, v4)\n",
        "    call $nabla_bag_add_scaled(v1, v0, v3, v4)\n",
        "    call $nabla_bag_add_into(v0, v0, v4)\n",
        "    call $nabla_bag_add_into(v1, v0, v4)\n",
    ] {
        let out = opt(&fresh_bag_into(read));
        assert_eq!(count(&out, "main", "bag_new"), 1, "{read}:\n{out}");
    }
}

/// `main(v0: i64, v1: bool, v2: f64)` computing `BODY` and returning `RESULT` of type `TY`,
/// optimised.
fn folded(body: &str, ty: &str, result: &str) -> String {
    opt(&format!(
        "\
fn @main(i64, bool, f64) -> {ty} {{
b0(v0: i64, v1: bool, v2: f64):
{body}    return {result}
}}
"
    ))
}

/// Every constant operation `fold` knows and every identity it uses: the operation goes, and
/// the function returns the constant it computes (or the operand the identity names). A
/// division or remainder by zero fails at run time and stays; `i64::MIN / -1` wraps (it must
/// not overflow in the optimiser either).
#[test]
fn constant_operations_and_identities_fold() {
    let int = |n: i64| format!("    v3 = iconst {n}\n    return v3\n");
    let boolean = |b: bool| format!("    v3 = bconst {b}\n    return v3\n");
    let cases: Vec<(&str, &str, &str, String)> = vec![
        // Unary operations.
        ("    v10 = bconst true\n    v11 = not v10\n", "bool", "not", boolean(false)),
        ("    v10 = bconst true\n    v11 = btoi v10\n", "i64", "btoi", int(1)),
        ("    v10 = iconst 3\n    v11 = itof v10\n", "f64", "itof", "    v3 = fconst 3.0\n    return v3\n".into()),
        // Integer operations.
        ("    v10 = iconst 7\n    v12 = iconst 5\n    v11 = iadd v10, v12\n", "i64", "iadd", int(12)),
        ("    v10 = iconst 7\n    v12 = iconst 5\n    v11 = isub v10, v12\n", "i64", "isub", int(2)),
        ("    v10 = iconst 7\n    v12 = iconst 5\n    v11 = imul v10, v12\n", "i64", "imul", int(35)),
        ("    v10 = iconst -7\n    v12 = iconst 2\n    v11 = sdiv v10, v12\n", "i64", "sdiv", int(-3)),
        ("    v10 = iconst -7\n    v12 = iconst 2\n    v11 = srem v10, v12\n", "i64", "srem", int(-1)),
        ("    v10 = iconst 7\n    v12 = iconst -1\n    v11 = sdiv v10, v12\n", "i64", "sdiv", int(-7)),
        ("    v10 = iconst 7\n    v12 = iconst -1\n    v11 = srem v10, v12\n", "i64", "srem", int(0)),
        (
            "    v10 = iconst -9223372036854775808\n    v12 = iconst -1\n    v11 = sdiv v10, v12\n",
            "i64",
            "sdiv",
            int(i64::MIN),
        ),
        (
            "    v10 = iconst -9223372036854775808\n    v12 = iconst -1\n    v11 = srem v10, v12\n",
            "i64",
            "srem",
            int(0),
        ),
        // Boolean operations.
        ("    v10 = bconst true\n    v12 = bconst false\n    v11 = and v10, v12\n", "bool", "and", boolean(false)),
        ("    v10 = bconst true\n    v12 = bconst false\n    v11 = or v10, v12\n", "bool", "or", boolean(true)),
        ("    v10 = bconst true\n    v12 = bconst true\n    v11 = xor v10, v12\n", "bool", "xor", boolean(false)),
        // Identities.
        ("    v10 = iconst 0\n    v11 = iadd v0, v10\n", "i64", "iadd", "    return v0\n".into()),
        ("    v10 = iconst 0\n    v11 = isub v0, v10\n", "i64", "isub", "    return v0\n".into()),
        ("    v10 = iconst 0\n    v11 = iadd v10, v0\n", "i64", "iadd", "    return v0\n".into()),
        ("    v10 = iconst 1\n    v11 = imul v0, v10\n", "i64", "imul", "    return v0\n".into()),
        ("    v10 = iconst 1\n    v11 = imul v10, v0\n", "i64", "imul", "    return v0\n".into()),
        ("    v10 = bconst true\n    v11 = and v1, v10\n", "bool", "and", "    return v1\n".into()),
        ("    v10 = bconst false\n    v11 = or v1, v10\n", "bool", "or", "    return v1\n".into()),
        ("    v10 = bconst true\n    v11 = and v10, v1\n", "bool", "and", "    return v1\n".into()),
        ("    v10 = bconst false\n    v11 = or v10, v1\n", "bool", "or", "    return v1\n".into()),
        // Comparisons: of a value with itself, of integer and of boolean constants.
        ("    v11 = icmp eq v0, v0\n", "bool", "icmp", boolean(true)),
        ("    v11 = icmp le v0, v0\n", "bool", "icmp", boolean(true)),
        ("    v11 = icmp ge v0, v0\n", "bool", "icmp", boolean(true)),
        ("    v11 = icmp ne v0, v0\n", "bool", "icmp", boolean(false)),
        ("    v11 = icmp lt v0, v0\n", "bool", "icmp", boolean(false)),
        ("    v11 = icmp gt v0, v0\n", "bool", "icmp", boolean(false)),
        ("    v10 = iconst 2\n    v12 = iconst 3\n    v11 = icmp eq v10, v12\n", "bool", "icmp", boolean(false)),
        ("    v10 = iconst 2\n    v12 = iconst 3\n    v11 = icmp ne v10, v12\n", "bool", "icmp", boolean(true)),
        ("    v10 = iconst 2\n    v12 = iconst 3\n    v11 = icmp lt v10, v12\n", "bool", "icmp", boolean(true)),
        ("    v10 = iconst 3\n    v12 = iconst 3\n    v11 = icmp le v10, v12\n", "bool", "icmp", boolean(true)),
        ("    v10 = iconst 2\n    v12 = iconst 3\n    v11 = icmp gt v10, v12\n", "bool", "icmp", boolean(false)),
        ("    v10 = iconst 3\n    v12 = iconst 3\n    v11 = icmp ge v10, v12\n", "bool", "icmp", boolean(true)),
        ("    v10 = iconst 3\n    v12 = iconst 3\n    v11 = icmp eq v10, v12\n", "bool", "icmp", boolean(true)),
        ("    v10 = iconst 3\n    v12 = iconst 3\n    v11 = icmp ne v10, v12\n", "bool", "icmp", boolean(false)),
        ("    v10 = iconst 3\n    v12 = iconst 3\n    v11 = icmp lt v10, v12\n", "bool", "icmp", boolean(false)),
        ("    v10 = iconst 3\n    v12 = iconst 2\n    v11 = icmp le v10, v12\n", "bool", "icmp", boolean(false)),
        ("    v10 = iconst 3\n    v12 = iconst 2\n    v11 = icmp gt v10, v12\n", "bool", "icmp", boolean(true)),
        ("    v10 = iconst 3\n    v12 = iconst 3\n    v11 = icmp gt v10, v12\n", "bool", "icmp", boolean(false)),
        ("    v10 = iconst 2\n    v12 = iconst 3\n    v11 = icmp ge v10, v12\n", "bool", "icmp", boolean(false)),
        ("    v10 = bconst true\n    v12 = bconst true\n    v11 = icmp eq v10, v12\n", "bool", "icmp", boolean(true)),
        ("    v10 = bconst true\n    v12 = bconst true\n    v11 = icmp ne v10, v12\n", "bool", "icmp", boolean(false)),
        ("    v10 = bconst true\n    v12 = bconst false\n    v11 = icmp eq v10, v12\n", "bool", "icmp", boolean(false)),
        ("    v10 = bconst true\n    v12 = bconst false\n    v11 = icmp ne v10, v12\n", "bool", "icmp", boolean(true)),
        // An array's length is the one it was made with.
        ("    v12 = newarray v0, 8\n    v11 = arraylen v12\n", "i64", "arraylen", "    return v0\n".into()),
        // Selects: of one value twice, on a constant condition.
        ("    v11 = select.i64 v1, v0, v0\n", "i64", "select", "    return v0\n".into()),
        (
            "    v10 = bconst true\n    v12 = iconst 5\n    v11 = select.i64 v10, v0, v12\n",
            "i64",
            "select",
            "    return v0\n".into(),
        ),
        (
            "    v10 = bconst false\n    v12 = iconst 5\n    v11 = select.i64 v10, v12, v0\n",
            "i64",
            "select",
            "    return v0\n".into(),
        ),
    ];
    for (body, ty, op, want) in cases {
        let out = folded(body, ty, "v11");
        assert_eq!(count(&out, "main", &format!(" {op} ")), 0, "{body}:\n{out}");
        assert!(out.contains(&want), "{body}: expected\n{want}in\n{out}");
    }
    // Division and remainder by zero stay: they fail at run time.
    for (body, ty, op) in [
        ("    v10 = iconst 7\n    v12 = iconst 0\n    v11 = sdiv v10, v12\n", "i64", "sdiv"),
        ("    v10 = iconst 7\n    v12 = iconst 0\n    v11 = srem v10, v12\n", "i64", "srem"),
    ] {
        let out = folded(body, ty, "v11");
        assert_eq!(count(&out, "main", &format!(" {op} ")), 1, "{body}:\n{out}");
    }
}

/// `fresh_bag_into`'s declarations and parameters with `BODY` as the function's code (the
/// fresh bag is made by `BODY`).
fn bag_body(body: &str) -> String {
    let text = fresh_bag_into("");
    let start = text.find("b0(").expect("an entry block");
    format!("{}{}\n}}\n", &text[..start], body)
}

/// The fresh bag must be used only by its inserts and the one addition: one read before the
/// addition (its length, a comparison), or never added at all, keeps it.
#[test]
fn fusion_keeps_fresh_bags_that_are_read() {
    for read in [
        "    v8 = call $nabla_bag_len(v7)\n    store v8, v5+0\n",
        "    v8 = call $nabla_bag_eq(v0, v7)\n    store v8, v5+0\n",
    ] {
        let text = fresh_bag_into(read).replace(
            "extern $nabla_bag_len(ptr) -> i64\n",
            "extern $nabla_bag_len(ptr) -> i64\nextern $nabla_bag_eq(ptr, ptr) -> bool\n",
        );
        let out = opt(&text);
        assert_eq!(count(&out, "main", "bag_new"), 1, "{read}:\n{out}");
    }
    for read in [
        "    v8 = call $nabla_bag_len(v7)\n    store v8, v5+0\n",
        "    v8 = call $nabla_bag_eq(v0, v7)\n    store v8, v5+0\n",
    ] {
        let never_added = fresh_bag_into(read).replace("    call $nabla_bag_add_into(v0, v7, v4)\n", "").replace(
            "extern $nabla_bag_len(ptr) -> i64\n",
            "extern $nabla_bag_len(ptr) -> i64\nextern $nabla_bag_eq(ptr, ptr) -> bool\n",
        );
        let out = opt(&never_added);
        assert_eq!(count(&out, "main", "bag_new"), 1, "{read}:\n{out}");
        assert_eq!(count(&out, "main", "bag_insert(v"), 1, "{read}:\n{out}");
    }
}

/// Inserts already scaled (an inner bag fused earlier) are fused again: their factor times the
/// addition's scale is made with `nabla_mul_checked`. Fusion declares only the support
/// functions its output calls.
#[test]
fn fusion_of_scaled_inserts_and_the_support_functions_it_declares() {
    let scaled = bag_body(
        "\
b0(v0: ptr, v1: ptr, v2: ptr, v3: i64, v4: i64, v5: ptr):
    v6 = iconst 1
    v8 = iadd v3, v6
    v7 = call $nabla_bag_new(v6)
    call $nabla_bag_insert_scaled(v7, v2, v3, v3, v4)
    call $nabla_bag_add_scaled(v0, v7, v8, v4)
    return v0",
    )
    .replace("extern $nabla_bag_len(ptr) -> i64\n", "");
    let out = opt(&scaled);
    assert_eq!(count(&out, "main", "bag_new"), 0, "{out}");
    assert_eq!(count(&out, "main", "nabla_mul_checked(v3, v3, v4)"), 1, "{out}");
    assert_eq!(count(&out, "main", "bag_insert_scaled(v0, v2"), 1, "{out}");
    // An unscaled addition of plain inserts needs neither the scaled insert nor the product.
    let plain =
        fresh_bag_into("").replace("extern fallible $nabla_bag_insert_scaled(ptr, ptr, i64, i64, i64) -> ()\n", "");
    let out = opt(&plain);
    assert_eq!(count(&out, "main", "bag_new"), 0, "{out}");
    assert!(!out.contains("insert_scaled") && !out.contains("mul_checked"), "{out}");
    // A scaled addition of plain inserts needs the scaled insert, not the product.
    let out = opt(&plain.replace("call $nabla_bag_add_into(v0, v7, v4)", "call $nabla_bag_add_scaled(v0, v7, v3, v4)"));
    assert_eq!(count(&out, "main", "bag_insert_scaled(v0, v2, v3, v3, v4)"), 1, "{out}");
    assert!(!out.contains("mul_checked"), "{out}");
    // A module that declares only one of the two additions fuses it.
    let only_add_into = plain.replace("extern fallible $nabla_bag_add_scaled(ptr, ptr, i64, i64) -> ()\n", "");
    assert_eq!(count(&opt(&only_add_into), "main", "bag_new"), 0);
}

/// The destination, the scale and the site must be available at every insert: a value of a
/// dominating block is, wherever it stands there; one made after the insert in its own block is
/// not (fusing would use it before its definition); a constant site is made again before the
/// insert.
#[test]
fn fusion_uses_only_values_available_at_the_inserts() {
    let across_blocks = bag_body(
        "\
b0(v0: ptr, v1: ptr, v2: ptr, v3: i64, v4: i64, v5: ptr):
    v6 = iconst 1
    v8 = load.ptr v5+0
    v9 = iadd v3, v3
    v20 = call $nabla_bag_len(v8)
    v21 = icmp lt v20, v3
    v7 = call $nabla_bag_new(v6)
    brif v21, b1(v3), b1(v9)
b1(v10: i64):
    call $nabla_bag_insert(v7, v2, v10, v4)
    call $nabla_bag_add_scaled(v8, v7, v9, v4)
    return v8",
    );
    let out = opt(&across_blocks);
    assert_eq!(count(&out, "main", "bag_new"), 0, "{out}");
    // The scale is computed after the insert (`opt` verifies the output).
    let late_scale = bag_body(
        "\
b0(v0: ptr, v1: ptr, v2: ptr, v3: i64, v4: i64, v5: ptr):
    v6 = iconst 1
    v7 = call $nabla_bag_new(v6)
    call $nabla_bag_insert(v7, v2, v3, v4)
    v8 = iadd v3, v6
    call $nabla_bag_add_scaled(v0, v7, v8, v4)
    return v0",
    );
    opt(&late_scale);
    let late_site = bag_body(
        "\
b0(v0: ptr, v1: ptr, v2: ptr, v3: i64, v4: i64, v5: ptr):
    v6 = iconst 1
    v7 = call $nabla_bag_new(v6)
    call $nabla_bag_insert(v7, v2, v3, v4)
    v8 = iconst 42
    call $nabla_bag_add_into(v0, v7, v8)
    return v0",
    );
    let out = opt(&late_site);
    assert_eq!(count(&out, "main", "bag_new"), 0, "{out}");
    assert_eq!(count(&out, "main", "iconst 42"), 1, "{out}");
}

/// A bag made and filled in one block and added in another is fused, whatever reads the
/// destination before the creation; a read of the destination after the creation, in the
/// creation's block, stops it.
#[test]
fn fusion_spans_blocks() {
    let text = |read: &str| {
        bag_body(&format!(
            "\
b0(v0: ptr, v1: ptr, v2: ptr, v3: i64, v4: i64, v5: ptr):
    v22 = call $nabla_bag_eq(v0, v1)
    store v22, v5+16
    v6 = iconst 1
    v7 = call $nabla_bag_new(v6)
    call $nabla_bag_insert(v7, v2, v3, v4)
{read}    v9 = iadd v3, v3
    v20 = icmp lt v3, v4
    brif v20, b1(v3), b1(v9)
b1(v10: i64):
    store v10, v5+0
    call $nabla_bag_add_into(v0, v7, v4)
    return v0"
        ))
        .replace(
            "extern $nabla_bag_len(ptr) -> i64\n",
            "extern $nabla_bag_len(ptr) -> i64\nextern $nabla_bag_eq(ptr, ptr) -> bool\n",
        )
    };
    let out = opt(&text(""));
    assert_eq!(count(&out, "main", "bag_new"), 0, "{out}");
    let out = opt(&text("    v21 = call $nabla_bag_len(v0)\n    store v21, v5+8\n"));
    assert_eq!(count(&out, "main", "bag_new"), 1, "{out}");
}

/// The addition reached from the creation through either arm of a branch, and followed by more
/// code, is fused; a bag made before a loop that adds it in every iteration (and inserts into it
/// again after each addition) is not: the fused inserts would be added once instead of once per
/// later addition.
#[test]
fn fusion_needs_one_addition_per_creation() {
    let diamond = bag_body(
        "\
b0(v0: ptr, v1: ptr, v2: ptr, v3: i64, v4: i64, v5: ptr):
    v6 = iconst 1
    v7 = call $nabla_bag_new(v6)
    call $nabla_bag_insert(v7, v2, v3, v4)
    v9 = iadd v3, v3
    v20 = icmp lt v3, v4
    brif v20, b1, b2
b1:
    store v3, v5+8
    jump b3(v3)
b2:
    store v9, v5+8
    jump b3(v9)
b3(v10: i64):
    call $nabla_bag_add_into(v0, v7, v4)
    v21 = icmp lt v10, v4
    brif v21, b4(v3), b4(v9)
b4(v11: i64):
    store v11, v5+0
    return v0",
    );
    let out = opt(&diamond);
    assert_eq!(count(&out, "main", "bag_new"), 0, "{out}");
    let looped = bag_body(
        "\
b0(v0: ptr, v1: ptr, v2: ptr, v3: i64, v4: i64, v5: ptr):
    v6 = iconst 1
    v7 = call $nabla_bag_new(v6)
    v8 = iconst 0
    jump b1(v8)
b1(v10: i64):
    call $nabla_bag_insert(v7, v2, v10, v4)
    call $nabla_bag_add_into(v0, v7, v4)
    v11 = iadd v10, v6
    v12 = icmp lt v11, v3
    brif v12, b1(v11), b2
b2:
    return v0",
    );
    let out = opt(&looped);
    assert_eq!(count(&out, "main", "bag_new"), 1, "{out}");
    assert_eq!(count(&out, "main", "add_into"), 1, "{out}");
}

/// A fresh bag with a plain and a scaled insert (its factor computed just before it), added
/// scaled: the plain insert is scaled by the addition's factor, the scaled one's product is made
/// right before it; added unscaled, the scaled insert keeps its factor and its own site.
#[test]
fn fusion_rewrites_plain_and_scaled_inserts() {
    let text = |addition: &str| {
        bag_body(&format!(
            "\
b0(v0: ptr, v1: ptr, v2: ptr, v3: i64, v4: i64, v5: ptr):
    v6 = iconst 1
    v8 = iadd v3, v6
    v7 = call $nabla_bag_new(v6)
    call $nabla_bag_insert(v7, v2, v3, v4)
    v9 = iadd v3, v3
    call $nabla_bag_insert_scaled(v7, v2, v3, v9, v8)
{addition}
    return v0"
        ))
        .replace(
            "extern $nabla_bag_len(ptr) -> i64\n",
            "extern $nabla_bag_len(ptr) -> i64\nextern fallible $nabla_mul_checked(i64, i64, i64) -> i64\n",
        )
    };
    let out = opt(&text("    call $nabla_bag_add_scaled(v0, v7, v8, v4)"));
    assert_eq!(count(&out, "main", "bag_new"), 0, "{out}");
    assert_eq!(count(&out, "main", "nabla_mul_checked("), 1, "{out}");
    assert_eq!(count(&out, "main", "bag_insert_scaled(v0"), 2, "{out}");
    let out = opt(&text("    call $nabla_bag_add_into(v0, v7, v4)"));
    assert_eq!(count(&out, "main", "bag_new"), 0, "{out}");
    assert_eq!(count(&out, "main", "nabla_mul_checked("), 0, "{out}");
    assert_eq!(count(&out, "main", "bag_insert(v0"), 1, "{out}");
    assert_eq!(count(&out, "main", "bag_insert_scaled(v0"), 1, "{out}");
}

/// In a clean module, every field of a record is forwarded, also when the record is itself
/// stored into another record; an element address into a record (a write forwarding cannot
/// see) disqualifies it.
#[test]
fn forwarding_reads_every_field_and_distrusts_element_addresses() {
    let text = "\
fn @main(i64, i64, ptr) -> i64 {
b0(v0: i64, v1: i64, v2: ptr):
    v3 = alloc 16
    store v0, v3+0
    store v1, v3+8
    v4 = alloc 8
    store v3, v4+0
    store v4, v2+0
    v5 = load.i64 v3+0
    v6 = load.i64 v3+8
    v7 = iadd v5, v6
    return v7
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "load.i64"), 0, "{out}");
    let elem = "\
fn @main(i64, i64) -> i64 {
b0(v0: i64, v1: i64):
    v3 = alloc 16
    store v0, v3+0
    v4 = elemaddr v3, v1, 8
    store v1, v4+0
    v5 = load.i64 v3+0
    return v5
}
";
    let out = opt(elem);
    assert_eq!(count(&out, "main", "load.i64"), 1, "{out}");
}

/// `SINGLETON_MAP` of the unit tests (`opt::tests`), at its smallest: a one-key map made, set
/// and added into `v0` (made first in its block), with `BETWEEN` after the `set`.
fn singleton_map(between: &str) -> String {
    format!(
        "\
extern fallible $nabla_map_new(i64, i64) -> ptr
extern fallible $nabla_map_set(ptr, ptr, ptr) -> ()
extern $nabla_map_get(ptr, ptr, ptr) -> bool
extern fallible $nabla_map_add_scaled(ptr, ptr, i64, i64, i64) -> ()

fn @main(ptr, i64, ptr, ptr, ptr) -> ptr {{
b0(v0: ptr, v1: i64, v2: ptr, v3: ptr, v4: ptr):
    v5 = call $nabla_map_new(v1, v1)
    call $nabla_map_set(v5, v2, v3)
{between}    call $nabla_map_add_scaled(v0, v5, v1, v1, v1)
    return v0
}}
"
    )
}

/// A one-key map only set and added is never built, also when it is made first in its block;
/// one read in between (`nabla_map_get`) is built.
#[test]
fn singleton_maps_fuse_only_when_set_then_added() {
    let out = opt(&singleton_map(""));
    assert_eq!(count(&out, "main", "map_new"), 0, "{out}");
    assert_eq!(count(&out, "main", "map_add_scaled_key(v0, v2, v3"), 1, "{out}");
    let read = singleton_map("    v6 = call $nabla_map_get(v5, v2, v4)\n")
        .replace("    call $nabla_map_set(v5, v2, v3)\n", "");
    let out = opt(&read);
    assert_eq!(count(&out, "main", "map_new"), 1, "{out}");
    // Used after the `set` other than as the source of an addition: as its destination, or as
    // the key of a bag insert.
    for other in [
        "    call $nabla_map_add_scaled(v5, v0, v1, v1, v1)\n",
        "    call $nabla_bag_insert_scaled(v0, v5, v1, v1, v1)\n",
    ] {
        let text = singleton_map("")
            .replace("    call $nabla_map_add_scaled(v0, v5, v1, v1, v1)\n", other)
            .replace(
                "extern $nabla_map_get(ptr, ptr, ptr) -> bool\n",
                "extern $nabla_map_get(ptr, ptr, ptr) -> bool\nextern fallible $nabla_bag_insert_scaled(ptr, ptr, i64, i64, i64) -> ()\n",
            );
        let out = opt(&text);
        assert_eq!(count(&out, "main", "map_new"), 1, "{other}:\n{out}");
    }
}

/// A store forwards to a load in a block it dominates, wherever the two stand in their blocks;
/// a load before the store in its own block reads memory.
#[test]
fn forwarding_follows_dominance() {
    let text = "\
fn @main(i64, bool) -> i64 {
b0(v0: i64, v1: bool):
    v2 = alloc 8
    v3 = iconst 1
    v4 = iadd v0, v3
    store v4, v2+0
    brif v1, b1(v0), b1(v4)
b1(v5: i64):
    v6 = load.i64 v2+0
    v7 = iadd v5, v6
    return v7
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "load.i64"), 0, "{out}");
    let before = "\
fn @main(i64, ptr) -> i64 {
b0(v0: i64, v1: ptr):
    v2 = alloc 8
    store v2, v1+0
    v3 = load.i64 v2+0
    store v0, v2+0
    return v3
}
";
    let out = opt(before);
    assert_eq!(count(&out, "main", "load.i64"), 1, "{out}");
}

/// A branch on an unknown condition whose two edges are the same becomes a jump (and the
/// blocks merge); a `switch` with one case takes it; one on an unknown tag with two cases stays.
#[test]
fn branches_with_one_destination_become_jumps() {
    let same = "\
fn @main(i64, bool) -> i64 {
b0(v0: i64, v1: bool):
    brif v1, b1(v0), b1(v0)
b1(v2: i64):
    v3 = imul v2, v2
    return v3
}
";
    let out = opt(same);
    assert_eq!(count(&out, "main", "brif"), 0, "{out}");
    assert_eq!(out.matches("\nb").count(), 1, "one block is left:\n{out}");
    let switch = |cases: &str| {
        format!(
            "\
tag t0 = @k env()
tag t1 = @k env()

fn @main(i64, i64) -> i64 {{
b0(v0: i64, v1: i64):
    switch v0, [{cases}]
b1:
    v2 = imul v1, v1
    return v2
b2:
    v3 = iadd v1, v1
    return v3
}}

fn @k(ptr) -> () {{
b0(v0: ptr):
    return
}}
"
        )
    };
    let out = opt(&switch("t1: b2"));
    assert_eq!(count(&out, "main", "switch"), 0, "{out}");
    assert_eq!(count(&out, "main", "iadd v1, v1"), 1, "{out}");
    assert_eq!(count(&out, "main", "imul"), 0, "{out}");
    let out = opt(&switch("t0: b1, t1: b2"));
    assert_eq!(count(&out, "main", "switch v0, [t0: b1, t1: b2]"), 1, "{out}");
    assert_eq!(count(&out, "main", "imul v1, v1"), 1, "{out}");
    assert_eq!(count(&out, "main", "iadd v1, v1"), 1, "{out}");
}

/// `big` (61 instructions after its own simplification) called once from a 2-instruction
/// `main`: with calls inlined only by the single-call-site rule, it is inlined exactly when the
/// two sizes together stay within `max_size`.
#[test]
fn single_call_sites_are_inlined_while_the_sum_of_sizes_fits() {
    let mut body = String::new();
    for i in 0..60 {
        body.push_str(&format!("    v{} = iadd v{}, v0\n", i + 1, i));
    }
    let text = format!(
        "fn @main(i64) -> i64 {{\nb0(v0: i64):\n    v1 = call @big(v0)\n    return v1\n}}\n\n\
         fn @big(i64) -> i64 {{\nb0(v0: i64):\n{body}    return v60\n}}\n"
    );
    let calls = |max_size: usize| {
        let mut m = parse(&text).unwrap();
        let main = m.func_by_name("main").unwrap();
        optimize(&mut m, &[main], &OptOptions { enabled: true, inline_size: 0, max_size });
        verify(&m).unwrap_or_else(|e| panic!("{e:?}"));
        count(&print(&m), "main", "call @big")
    };
    assert_eq!(calls(63), 0, "2 + 61 <= 63");
    assert_eq!(calls(100), 0, "2 + 61 <= 100");
    assert_eq!(calls(62), 1, "2 + 61 > 62");
}

/// A caller already bigger than `max_size` inlines nothing more, not even a small callee:
/// `main` (3 instructions) calling the 2-instruction `small` twice inlines both calls under a
/// large limit, one under a limit of 3 (its size before the first), none under 2.
#[test]
fn callers_over_the_size_limit_inline_nothing() {
    let text = "\
fn @main(i64) -> i64 {
b0(v0: i64):
    v1 = call @small(v0)
    v2 = call @small(v1)
    return v2
}

fn @small(i64) -> i64 {
b0(v0: i64):
    v1 = imul v0, v0
    return v1
}
";
    let calls = |max_size: usize| {
        let mut m = parse(text).unwrap();
        let main = m.func_by_name("main").unwrap();
        optimize(&mut m, &[main], &OptOptions { enabled: true, inline_size: 40, max_size });
        verify(&m).unwrap_or_else(|e| panic!("{e:?}"));
        count(&print(&m), "main", "call @small")
    };
    assert_eq!(calls(100), 0);
    assert_eq!(calls(3), 1);
    assert_eq!(calls(2), 2);
}

/// `foldBag intGroup (fun k -> BODY) b` after inlining, BODY computing `v9` from the key `v7`
/// and multiplicity `v8` (`v2` the entry array, `v5` the counter, `v6` the accumulator).
fn entry_fold(body: &str) -> String {
    format!(
        "\
extern fallible $nabla_bag_entries(ptr) -> ptr
extern $nabla_bag_len(ptr) -> i64

fn @main(ptr, i64) -> i64 {{
b0(v0: ptr, v1: i64):
    v2 = call $nabla_bag_entries(v0)
    v3 = arraylen v2
    v4 = iconst 0
    jump b1(v4, v1)
b1(v5: i64, v6: i64):
    v20 = icmp lt v5, v3
    brif v20, b2, b3
b2:
    v21 = elemaddr v2, v5, 16
    v7 = load.i64 v21+0
    v8 = load.i64 v21+8
{body}
    v10 = iadd v6, v9
    v11 = iconst 1
    v12 = iadd v5, v11
    jump b1(v12, v10)
b3:
    return v6
}}
"
    )
}

/// Whether the fold's entry call became `nabla_bag_entries_unordered`.
fn unordered(text: &str) -> bool {
    let out = opt(text);
    match (count(&out, "main", "entries_unordered"), count(&out, "main", "nabla_bag_entries(")) {
        (1, 0) => true,
        (0, 1) => false,
        _ => panic!("one entry call expected:\n{out}"),
    }
}

/// The entries may be visited in any order only when the loop reads them through its own
/// counter: reading another element (the first entry) ties the result to the order.
#[test]
fn unsorted_iteration_needs_every_read_of_the_entries_through_the_counter() {
    assert!(unordered(&entry_fold("    v9 = imul v7, v8")));
    let first = "    v30 = iconst 0\n    v31 = elemaddr v2, v30, 16\n    v32 = load.i64 v31+0\n    v9 = imul v7, v32";
    assert!(!unordered(&entry_fold(first)));
    // The current entry read again in another block of the body.
    let twice = "\
    v30 = icmp lt v7, v4
    brif v30, b4, b5
b4:
    v31 = elemaddr v2, v5, 16
    v32 = load.i64 v31+8
    jump b6(v32)
b5:
    jump b6(v7)
b6(v9: i64):";
    assert!(unordered(&entry_fold(twice)));
    // A loop over the first `v1` entries only: which entries it sees depends on the order.
    let prefix = entry_fold("    v9 = imul v7, v8").replace("icmp lt v5, v3", "icmp lt v5, v1");
    assert!(!unordered(&prefix));
    // Every other entry, or a counter not stepped by one: which entries it sees depends on the order.
    let fold = entry_fold("    v9 = imul v7, v8");
    assert!(!unordered(&fold.replace("v11 = iconst 1", "v11 = iconst 2")));
    assert!(!unordered(&fold.replace("v12 = iadd v5, v11", "v12 = iadd v9, v11")));
    assert!(!unordered(&fold.replace("v12 = iadd v5, v11", "v12 = iadd v11, v9")));
    // The step written `1 + i`.
    assert!(unordered(&fold.replace("v12 = iadd v5, v11", "v12 = iadd v11, v5")));
    // A store through a pointer the loop did not allocate: the last entry's value stays.
    let store = entry_fold("    v9 = imul v7, v8\n    store v9, v40+0").replace(
        "fn @main(ptr, i64) -> i64 {\nb0(v0: ptr, v1: i64):",
        "fn @main(ptr, i64, ptr) -> i64 {\nb0(v0: ptr, v1: i64, v40: ptr):",
    );
    assert!(!unordered(&store));
    // A bounds check of each key: which key fails first depends on the order.
    assert!(!unordered(&entry_fold("    v9 = imul v7, v8\n    boundscheck v7, v1, v4")));
    // Division by a non-zero constant cannot fail.
    assert!(unordered(&entry_fold("    v30 = iconst 3\n    v9 = sdiv v7, v30")));
    assert!(unordered(&entry_fold("    v30 = iconst -3\n    v9 = srem v7, v30")));
}

/// `h` (61 instructions) is called only from `g`, whose 60 dead instructions keep `h` out of it
/// (62 + 61 > 100) until simplification removes them; `main` and `k` then inline the small
/// `g`, each inlining copying its call of `h`. With `WITH_J`, a third root `j` calls `h` too.
fn copied_calls(with_j: bool) -> String {
    let chain = |n: usize| (0..n).map(|i| format!("    v{} = iadd v{}, v0\n", i + 1, i)).collect::<String>();
    let mut text = format!(
        "fn @main(i64) -> i64 {{\nb0(v0: i64):\n    v1 = call @g(v0)\n    return v1\n}}\n\n\
         fn @k(i64) -> i64 {{\nb0(v0: i64):\n    v1 = call @g(v0)\n    v2 = iadd v1, v0\n    return v2\n}}\n\n\
         fn @g(i64) -> i64 {{\nb0(v0: i64):\n{}    v61 = call @h(v0)\n    return v61\n}}\n\n\
         fn @h(i64) -> i64 {{\nb0(v0: i64):\n{}    return v60\n}}\n",
        chain(60),
        chain(60)
    );
    if with_j {
        text.push_str(
            "\nfn @j(i64) -> i64 {\nb0(v0: i64):\n    v1 = call @h(v0)\n    v2 = imul v1, v1\n    return v2\n}\n",
        );
    }
    let mut m = parse(&text).unwrap();
    let roots: Vec<_> = ["main", "k", "j"].iter().filter_map(|n| m.func_by_name(n)).collect();
    optimize(&mut m, &roots, &OptOptions { enabled: true, inline_size: 40, max_size: 100 });
    verify(&m).unwrap_or_else(|e| panic!("{e:?}"));
    print(&m)
}

/// Inlining a function copies its calls, and the copies count as call sites: `h` is then
/// called from `main` and from `k` (and `j`), never inlined by the single-call-site rule, so its
/// body exists once.
#[test]
fn calls_copied_by_inlining_count_as_call_sites() {
    for with_j in [false, true] {
        let out = copied_calls(with_j);
        assert_eq!(count(&out, "main", "call @h"), 1, "{out}");
        assert_eq!(count(&out, "k", "call @h"), 1, "{out}");
        assert_eq!(out.matches("iadd").count(), 61, "h's 60 additions once, k's one:\n{out}");
    }
}

/// A block that only jumps on is skipped by the edges into it: the empty arm of a diamond
/// goes, the branch passing its argument straight to the join.
#[test]
fn edges_skip_blocks_that_only_jump() {
    let text = "\
fn @main(i64, bool) -> i64 {
b0(v0: i64, v1: bool):
    brif v1, b1, b2
b1:
    jump b3(v0)
b2:
    v2 = imul v0, v0
    jump b3(v2)
b3(v3: i64):
    v4 = iadd v3, v0
    return v4
}
";
    let out = opt(text);
    assert_eq!(out.matches("\nb").count(), 3, "three blocks are left:\n{out}");
    assert!(out.contains("brif v1, b2(v0), b1\n"), "{out}");
    // The skipped block's parameter becomes the argument each edge gave it.
    let params = "\
fn @main(i64, bool) -> i64 {
b0(v0: i64, v1: bool):
    v2 = imul v0, v0
    brif v1, b1(v2), b2
b1(v3: i64):
    jump b3(v3)
b2:
    v4 = iadd v0, v0
    v5 = icmp lt v4, v0
    brif v5, b1(v4), b3(v0)
b3(v6: i64):
    v7 = isub v6, v0
    return v7
}
";
    let out = opt(params);
    assert_eq!(out.matches("\nb").count(), 3, "three blocks are left:\n{out}");
    assert!(out.contains("    brif v1, b2(v3), b1\n"), "{out}");
    assert!(out.contains("    brif v5, b2(v4), b2(v0)\n"), "{out}");
    // Jumps and switch cases skip empty blocks too.
    let jumps = "\
tag t0 = @k env()
tag t1 = @k env()
tag t2 = @k env()

fn @main(i64, i64) -> i64 {
b0(v0: i64, v1: i64):
    switch v0, [t0: b1, t1: b2, t2: b3]
b1:
    v2 = imul v1, v1
    jump b4(v2)
b2:
    v3 = iadd v1, v1
    jump b4(v3)
b3:
    jump b5(v1)
b4(v4: i64):
    jump b5(v4)
b5(v5: i64):
    v6 = isub v5, v1
    return v6
}

fn @k(ptr) -> () {
b0(v0: ptr):
    return
}
";
    let out = opt(jumps);
    assert!(out.contains("    switch v0, [t0: b1, t1: b2, t2: b3(v1)]\n"), "{out}");
    assert!(out.contains("    jump b3(v3)\n") && out.contains("    jump b3(v4)\n"), "{out}");
    assert!(!out.contains("b4"), "four blocks are left:\n{out}");
    // `b1` only jumps on, but the loop header `b2`, which only jumps on too, reads its
    // parameter: `b1` stays (`b2` goes).
    let read_on = "\
fn @main(i64, bool) -> i64 {
b0(v0: i64, v1: bool):
    v5 = imul v0, v0
    brif v1, b1(v5), b5
b1(v2: i64):
    jump b2
b2:
    jump b3(v2)
b3(v3: i64):
    v4 = icmp lt v3, v0
    brif v4, b2, b6
b6:
    v7 = iadd v3, v3
    v8 = icmp lt v7, v0
    brif v8, b3(v7), b4
b4:
    return v0
b5:
    v6 = iadd v0, v0
    jump b1(v6)
}
";
    let out = opt(read_on);
    assert_eq!(out.matches("\nb").count(), 6, "six blocks are left:\n{out}");
}

/// `main → a → b → main`, and `even ⇄ odd` below `main`: every function on a cycle of the call
/// graph is recursive and none is inlined (the first function of the module included).
#[test]
fn functions_on_cycles_of_calls_are_not_inlined() {
    let text = "\
fn @main(i64) -> i64 {
b0(v0: i64):
    v1 = call @a(v0)
    return v1
}

fn @a(i64) -> i64 {
b0(v0: i64):
    v1 = call @b(v0)
    return v1
}

fn @b(i64) -> i64 {
b0(v0: i64):
    v1 = iconst 0
    v2 = icmp le v0, v1
    brif v2, b1, b2
b1:
    return v0
b2:
    v3 = iconst 1
    v4 = isub v0, v3
    v5 = call @main(v4)
    return v5
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "call @a("), 1, "{out}");
    assert_eq!(count(&out, "a", "call @b("), 1, "{out}");
    assert_eq!(count(&out, "b", "call @main("), 1, "{out}");
    // Two functions calling each other, below `main`.
    let mutual = "\
fn @main(i64) -> bool {
b0(v0: i64):
    v1 = call @even(v0)
    return v1
}

fn @even(i64) -> bool {
b0(v0: i64):
    v1 = iconst 0
    v2 = icmp eq v0, v1
    brif v2, b1, b2
b1:
    return v2
b2:
    v3 = iconst 1
    v4 = isub v0, v3
    v5 = call @odd(v4)
    return v5
}

fn @odd(i64) -> bool {
b0(v0: i64):
    v1 = iconst 0
    v2 = icmp eq v0, v1
    brif v2, b1, b2
b1:
    v6 = not v2
    return v6
b2:
    v3 = iconst 1
    v4 = isub v0, v3
    v5 = call @even(v4)
    return v5
}
";
    let out = opt(mutual);
    assert_eq!(count(&out, "main", "call @even("), 1, "{out}");
    assert_eq!(count(&out, "even", "call @odd("), 1, "{out}");
    assert_eq!(count(&out, "odd", "call @even("), 1, "{out}");
}

/// A chain of 20 unused additions, each in its own block and the blocks laid out against the
/// order they run in (`b20`, …, `b1`): removing the last addition leaves the one before it
/// unused, and so on. Dead code removal follows the chain in one go, not one link per round of
/// simplification (which stops after 16).
#[test]
fn chains_of_dead_instructions_go_whatever_the_layout() {
    let n = 20;
    let mut text = String::from("fn @main(i64, bool) -> i64 {\nb0(v0: i64, v1: bool):\n    brif v1, b1, b21\n");
    for k in (1..=n).rev() {
        let prev = if k == 1 { 0 } else { k + 1 };
        let next = if k == n { 21 } else { k + 1 };
        text.push_str(&format!("b{k}:\n    v{} = iadd v{prev}, v0\n    brif v1, b{next}, b21\n", k + 2));
    }
    text.push_str("b21:\n    return v0\n}\n");
    let out = opt(&text);
    assert_eq!(count(&out, "main", "iadd"), 0, "{out}");
}

/// Twenty records, each stored into the next and none read: removing the last (with its
/// store) leaves the one before it only stored into, and so on; all go at once, not one a
/// round (simplification stops after 16).
#[test]
fn chains_of_records_only_stored_into_go() {
    let mut text = String::from("fn @main(i64) -> i64 {\nb0(v0: i64):\n    v1 = alloc 8\n    store v0, v1+0\n");
    for k in 2..=20 {
        text.push_str(&format!("    v{k} = alloc 8\n    store v{}, v{k}+0\n", k - 1));
    }
    text.push_str("    return v0\n}\n");
    let out = opt(&text);
    assert_eq!(count(&out, "main", "alloc"), 0, "{out}");
    assert_eq!(count(&out, "main", "store"), 0, "{out}");
}

/// A running Int sum is a reduction only while nothing but the next iteration reads it: here
/// it is also inserted as a multiplicity (the prefix sums depend on the order). Both layouts
/// of the loop's two last blocks.
#[test]
fn running_sums_read_in_the_loop_keep_the_sort() {
    let insert = "b10:\n    store v7, v41+0\n    call $nabla_bag_insert(v40, v41, v10, v4)\n    jump b11\n";
    let latch = "b11:\n    v11 = iconst 1\n    v12 = iadd v5, v11\n    jump b1(v12, v10)\n";
    for (first, second) in [(insert, latch), (latch, insert)] {
        let text = format!(
            "\
extern fallible $nabla_bag_entries(ptr) -> ptr
extern fallible $nabla_bag_insert(ptr, ptr, i64, i64) -> ()

fn @main(ptr, i64, ptr) -> i64 {{
b0(v0: ptr, v1: i64, v40: ptr):
    v2 = call $nabla_bag_entries(v0)
    v3 = arraylen v2
    v4 = iconst 0
    v41 = alloc 8
    jump b1(v4, v1)
b1(v5: i64, v6: i64):
    v20 = icmp lt v5, v3
    brif v20, b2, b3
b2:
    v21 = elemaddr v2, v5, 16
    v7 = load.i64 v21+0
    v8 = load.i64 v21+8
    v9 = imul v7, v8
    v10 = iadd v6, v9
    v30 = icmp lt v10, v1
    brif v30, b10, b11
{first}{second}b3:
    return v6
}}
"
        );
        assert!(!unordered(&text), "{text}");
        // Without the insert, the sum is a reduction.
        let plain = text.replace("    call $nabla_bag_insert(v40, v41, v10, v4)\n", "");
        assert!(unordered(&plain), "{plain}");
    }
}

/// A root that names no function of the module is ignored: the functions the real root reaches
/// stay, the others go.
#[test]
fn roots_outside_the_module_are_ignored() {
    use anf::ir::{EntityRef, FuncId};
    let text = "\
fn @main(i64) -> i64 {
b0(v0: i64):
    return v0
}

fn @unused(i64) -> i64 {
b0(v0: i64):
    return v0
}
";
    let mut m = parse(text).unwrap();
    let main = m.func_by_name("main").unwrap();
    let outside = FuncId::new(m.funcs.len());
    let map = optimize(&mut m, &[main, outside], &OptOptions::default());
    verify(&m).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(m.funcs.len(), 1, "{}", print(&m));
    assert_eq!(map.get(main), Some(FuncId::new(0)));
    assert_eq!(map.get(outside), None);
}

/// `entry_fold` with bags or maps `v40`, `v41`, two 8-byte records `v42`, `v43` and a 16-byte
/// record `v44` at hand.
fn support_fold(body: &str) -> String {
    entry_fold(body)
        .replace(
            "extern $nabla_bag_len(ptr) -> i64\n",
            "extern $nabla_bag_len(ptr) -> i64
extern fallible $nabla_bag_insert(ptr, ptr, i64, i64) -> ()
extern fallible $nabla_bag_add_scaled(ptr, ptr, i64, i64) -> ()
extern fallible $nabla_bag_add_into(ptr, ptr, i64) -> ()
extern $nabla_bag_eq(ptr, ptr) -> bool
extern $nabla_map_len(ptr) -> i64
extern $nabla_map_get(ptr, ptr, ptr) -> bool
extern fallible $nabla_map_add_scaled_key(ptr, ptr, ptr, i64, i64, i64) -> ()
extern $nabla_sin(f64) -> f64
extern $nabla_to_int(f64) -> i64
",
        )
        .replace(
            "fn @main(ptr, i64) -> i64 {\nb0(v0: ptr, v1: i64):\n",
            "fn @main(ptr, i64, ptr, ptr) -> i64 {\nb0(v0: ptr, v1: i64, v40: ptr, v41: ptr):\n    v42 = alloc 8\n    v43 = alloc 8\n    v44 = alloc 16\n",
        )
}

/// Support calls in an unsorted loop: bag and map additions commute, but not when the loop also
/// reads what it changes (a length, an equality); a map addition is allowed only in
/// `intGroup` (kind 0); other support functions (`nabla_map_get`) are refused.
#[test]
fn unsorted_iteration_tracks_what_support_calls_change_and_read() {
    let scaled = "    call $nabla_bag_add_scaled(v40, v41, v7, v4)\n";
    assert!(unordered(&support_fold(&format!("{scaled}    v9 = imul v7, v8"))));
    assert!(!unordered(&support_fold(&format!("{scaled}    v30 = call $nabla_bag_len(v40)\n    v9 = iadd v30, v8"))));
    let into = "    call $nabla_bag_add_into(v40, v41, v4)\n";
    assert!(unordered(&support_fold(&format!("{into}    v9 = imul v7, v8"))));
    assert!(!unordered(&support_fold(&format!("{into}    v30 = call $nabla_bag_len(v40)\n    v9 = iadd v30, v8"))));
    let insert = "    store v7, v42+0\n    call $nabla_bag_insert(v40, v42, v8, v4)\n";
    assert!(unordered(&support_fold(&format!("{insert}    v9 = imul v7, v8"))));
    assert!(!unordered(&support_fold(&format!(
        "{insert}    v30 = call $nabla_bag_eq(v40, v41)\n    v31 = btoi v30\n    v9 = iadd v31, v8"
    ))));
    let map = |kind: &str| {
        format!(
            "    v32 = iconst {kind}\n    store v7, v42+0\n    store v8, v43+0\n    call $nabla_map_add_scaled_key(v40, v42, v43, v8, v32, v4)\n"
        )
    };
    assert!(unordered(&support_fold(&format!("{}    v9 = imul v7, v8", map("0")))));
    assert!(!unordered(&support_fold(&format!("{}    v9 = imul v7, v8", map("1")))));
    assert!(!unordered(&support_fold(&format!(
        "{}    v30 = call $nabla_map_len(v40)\n    v9 = iadd v30, v8",
        map("0")
    ))));
    // A record the loop writes is read by a support call only after each of its slots was
    // stored in the same block (else the call sees the previous iteration's slot), and never
    // by a load.
    let wide = |after: &str| {
        format!("    store v7, v44+0\n{after}    call $nabla_bag_insert(v40, v44, v8, v4)\n    v9 = imul v7, v8")
    };
    assert!(unordered(&support_fold(&wide("    store v8, v44+8\n"))));
    assert!(!unordered(
        &support_fold(&wide("")).replace("    v9 = imul v7, v8", "    store v8, v44+8\n    v9 = imul v7, v8")
    ));
    assert!(!unordered(&support_fold("    v30 = load.i64 v42+0\n    store v7, v42+0\n    v9 = imul v30, v8")));
    // Nor through a copy of its pointer.
    assert!(!unordered(&support_fold(
        "    v31 = icmp lt v7, v8\n    v30 = select.ptr v31, v42, v43\n    v32 = load.i64 v30+0\n    store v7, v42+0\n    v9 = imul v32, v8"
    )));
    // Pure support functions are allowed.
    assert!(unordered(&support_fold(
        "    v30 = itof v7\n    v31 = call $nabla_sin(v30)\n    v32 = call $nabla_to_int(v31)\n    v9 = iadd v32, v8"
    )));
    assert!(!unordered(&support_fold(
        "    store v7, v42+0\n    v30 = call $nabla_map_get(v40, v42, v43)\n    v31 = btoi v30\n    v9 = iadd v31, v8"
    )));
}

/// A summing loop over `a` with the index counted from `start` by `step` while `guard` holds,
/// reading `{array}.[i]` in its body (`v0`, `v1`: arrays; `v10`: `len a`; `v11`: `len b`).
fn indexed_loop(start: &str, step: &str, guard: &str, array: &str) -> String {
    format!(
        "\
fn @main(ptr, ptr) -> f64 {{
b0(v0: ptr, v1: ptr):
    v10 = arraylen v0
    v11 = arraylen v1
    v12 = iconst {start}
    v13 = fconst 0.0
    jump b1(v12, v13)
b1(v2: i64, v3: f64):
    v14 = {guard}
    brif v14, b2, b3
b2:
    v15 = arraylen {array}
    v16 = iconst 7
    boundscheck v2, v15, v16
    v17 = elemaddr {array}, v2, 8
    v18 = load.f64 v17+0
    v19 = fadd v3, v18
    v20 = iconst {step}
    v21 = iadd v2, v20
    jump b1(v21, v19)
b3:
    return v3
}}
"
    )
}

/// Bounds-check elimination (`opt::bounds`): the check of an index counted up from 0 while it is
/// below the array's own length goes; every variation that breaks the proof keeps it.
#[test]
fn bounds_checks_go_only_where_the_loop_proves_them() {
    let checks = |text: &str| count(&opt(text), "main", "boundscheck");
    // `i` from 0 by 1 while `i < len a` reads `a.[i]`: no check (the length read twice is the same).
    assert_eq!(checks(&indexed_loop("0", "1", "icmp lt v2, v10", "v0")), 0);
    // The guard written the other way round, and the loop's own length value.
    assert_eq!(checks(&indexed_loop("0", "1", "icmp gt v10, v2", "v0")), 0);
    // Another array's length does not bound it.
    assert_eq!(checks(&indexed_loop("0", "1", "icmp lt v2, v10", "v1")), 1);
    // A negative start, a step that may overflow, `<=`, and a comparison with something else.
    assert_eq!(checks(&indexed_loop("-1", "1", "icmp lt v2, v10", "v0")), 1);
    assert_eq!(checks(&indexed_loop("0", "2", "icmp lt v2, v10", "v0")), 1);
    assert_eq!(checks(&indexed_loop("0", "1", "icmp le v2, v10", "v0")), 1);
    assert_eq!(checks(&indexed_loop("0", "1", "icmp lt v2, v11", "v0")), 1);
    // The guard on the false edge: `i >= len a` exits, the body reads.
    let negated = indexed_loop("0", "1", "icmp ge v2, v10", "v0").replace("brif v14, b2, b3", "brif v14, b3, b2");
    assert_eq!(checks(&negated), 0);
    // On the wrong edge of the guard the index is at or past the end: the check stays.
    let wrong_edge = indexed_loop("0", "1", "icmp lt v2, v10", "v0").replace("brif v14, b2, b3", "brif v14, b3, b2");
    assert_eq!(checks(&wrong_edge), 1);
}

/// The triangle `c < r < n` (gmm's Q·x): the inner index is below the outer one, which is below
/// the length; a block reached from elsewhere too is not guarded by the branch.
#[test]
fn bounds_checks_follow_chains_of_guards_and_respect_joins() {
    let triangle = "\
fn @main(ptr) -> f64 {
b0(v0: ptr):
    v10 = arraylen v0
    v11 = iconst 0
    v12 = fconst 0.0
    jump b1(v11, v12)
b1(v1: i64, v2: f64):
    v13 = icmp lt v1, v10
    brif v13, b2, b5
b2:
    v23 = elemaddr v0, v1, 8
    v24 = load.f64 v23+0
    jump b3(v11, v24)
b3(v3: i64, v4: f64):
    v14 = icmp lt v3, v1
    brif v14, b4, b6
b4:
    v15 = iconst 9
    boundscheck v3, v10, v15
    v16 = elemaddr v0, v3, 8
    v17 = load.f64 v16+0
    v18 = fadd v4, v17
    v19 = iconst 1
    v20 = iadd v3, v19
    jump b3(v20, v18)
b6:
    v21 = iconst 1
    v22 = iadd v1, v21
    jump b1(v22, v4)
b5:
    return v2
}
";
    assert_eq!(count(&opt(triangle), "main", "boundscheck"), 0);
    // The same with the inner guard against an unrelated parameter: kept.
    let loose = triangle
        .replace("fn @main(ptr) -> f64 {\nb0(v0: ptr):", "fn @main(ptr, i64) -> f64 {\nb0(v0: ptr, v9: i64):")
        .replace("v14 = icmp lt v3, v1", "v14 = icmp lt v3, v9");
    assert_eq!(count(&opt(&loose), "main", "boundscheck"), 1);
    // A guarded block that another branch also reaches (with `i` unbounded there) keeps its check.
    let joined = "\
fn @main(ptr, i64, bool) -> f64 {
b0(v0: ptr, v1: i64, v2: bool):
    v10 = arraylen v0
    v11 = iconst 0
    brif v2, b1, b2
b1:
    v12 = icmp lt v11, v10
    brif v12, b2, b3
b2:
    v13 = iconst 4
    boundscheck v11, v10, v13
    v14 = elemaddr v0, v11, 8
    v15 = load.f64 v14+0
    return v15
b3:
    v16 = fconst 0.0
    return v16
}
";
    assert_eq!(count(&opt(joined), "main", "boundscheck"), 1);
}

/// A loop over `a` (`v0`; `v10 = len a`) counted from 0 while `i < len a`, reading element
/// `index` of `array` (`v1`: another array, `v11 = len b`; `v30 = len a - 1` is at hand).
fn reversed_loop(index: &str, array: &str) -> String {
    format!(
        "\
fn @main(ptr, ptr) -> f64 {{
b0(v0: ptr, v1: ptr):
    v10 = arraylen v0
    v11 = arraylen v1
    v29 = iconst 1
    v30 = isub v10, v29
    v12 = iconst 0
    v13 = fconst 0.0
    jump b1(v12, v13)
b1(v2: i64, v3: f64):
    v14 = icmp lt v2, v10
    brif v14, b2, b3
b2:
    v31 = {index}
    v15 = arraylen {array}
    v16 = iconst 7
    boundscheck v31, v15, v16
    v17 = elemaddr {array}, v31, 8
    v18 = load.f64 v17+0
    v19 = fadd v3, v18
    v20 = iconst 1
    v21 = iadd v2, v20
    jump b1(v21, v19)
b3:
    return v3
}}
"
    )
}

/// A reverse loop's index `(n - 1) - i`, `0 <= i < n`, is in bounds (`opt::bounds`); one past the
/// end, or against another length, is not.
#[test]
fn reverse_indexes_lose_their_checks() {
    let checks = |text: &str| count(&opt(text), "main", "boundscheck");
    assert_eq!(checks(&reversed_loop("isub v30, v2", "v0")), 0);
    assert_eq!(checks(&reversed_loop("isub v10, v2", "v0")), 1);
    assert_eq!(checks(&reversed_loop("isub v30, v2", "v1")), 1);
    assert_eq!(checks(&reversed_loop("isub v2, v30", "v0")), 1);
    // `n - 2 - i` is not the last index less `i`.
    assert_eq!(checks(&reversed_loop("isub v30, v2", "v0").replace("v29 = iconst 1", "v29 = iconst 2")), 1);
    // A counter from -1 is below `n` but may be negative: `n - 1 - (-1)` is one past the end.
    assert_eq!(checks(&reversed_loop("isub v30, v2", "v0").replace("v12 = iconst 0", "v12 = iconst -1")), 1);
    // A constant length: the constant one below it less `i` is in bounds, the length itself is not.
    let constant = |last: &str| {
        reversed_loop("isub v30, v2", "v50")
            .replace("    v10 = arraylen v0\n", "    v10 = iconst 5\n    v50 = newarray v10, 8\n")
            .replace("    v30 = isub v10, v29\n", &format!("    v30 = iconst {last}\n"))
    };
    assert_eq!(checks(&constant("4")), 0);
    assert_eq!(checks(&constant("5")), 1);
}

/// Hoisted checks (`opt::hoist`): a counted loop's check of its counter against the length of an
/// array made before it (`v50`) leaves the loop for its way out, before an unreachable trap; a
/// negative start, a step other than one, a failing operation before the check, or a length not
/// known to be an array's (a parameter's, not read before the loop) keep it in the loop.
#[test]
fn checks_against_another_length_leave_the_loop() {
    let made = |start: &str, step: &str| {
        indexed_loop(start, step, "icmp lt v2, v10", "v50")
            .replace("    v11 = arraylen v1\n", "    v11 = arraylen v1\n    v50 = newarray v11, 8\n")
    };
    let hoisted = |text: &str| {
        let out = opt(text);
        assert_eq!(count(&out, "main", "boundscheck"), 1, "{out}");
        count(&out, "main", "trap unreachable") == 1
    };
    assert!(hoisted(&made("0", "1")));
    assert!(!hoisted(&made("-1", "1")));
    assert!(!hoisted(&made("0", "2")));
    // A division by the counter first: it may fail before the check does.
    let divided = made("0", "1")
        .replace("    v15 = arraylen v50\n", "    v40 = iconst 5\n    v41 = sdiv v40, v2\n    v15 = arraylen v50\n");
    assert!(!hoisted(&divided));
    // `len b` of a parameter, read only inside the loop.
    assert!(!hoisted(&indexed_loop("0", "1", "icmp lt v2, v10", "v1")));
    // Arithmetic that cannot fail before the check (an addition, a multiplication) does not stop it.
    let added = made("0", "1").replace(
        "    v15 = arraylen v50\n",
        "    v40 = iconst 5\n    v41 = iadd v40, v2\n    v42 = imul v41, v2\n    v43 = itof v42\n    v15 = arraylen v50\n",
    )
    .replace("    v19 = fadd v3, v18\n", "    v44 = fadd v18, v43\n    v19 = fadd v3, v44\n");
    assert!(hoisted(&added));
    // A bound that changes in the loop (a parameter of the header counted down): not hoisted.
    let moving = made("0", "1")
        .replace("    jump b1(v12, v13)\n", "    jump b1(v12, v13, v10)\n")
        .replace(
            "b1(v2: i64, v3: f64):\n    v14 = icmp lt v2, v10\n",
            "b1(v2: i64, v3: f64, v60: i64):\n    v14 = icmp lt v2, v60\n",
        )
        .replace(
            "    jump b1(v21, v19)\n",
            "    v61 = iconst 1\n    v62 = isub v60, v61\n    jump b1(v21, v19, v62)\n",
        );
    assert!(moving.contains("v62 = isub") && moving.contains("icmp lt v2, v60"));
    assert!(!hoisted(&moving));
    // A header that may fail before its test (a division): not hoisted.
    let header = made("0", "1").replace(
        "    v14 = icmp lt v2, v10\n",
        "    v46 = iconst 5\n    v47 = sdiv v46, v2\n    v48 = itof v47\n    v14 = icmp lt v2, v10\n",
    );
    assert!(!hoisted(&header.replace("    v19 = fadd v3, v18\n", "    v19 = fadd v48, v18\n")));
    // A header entered twice from before the loop: not hoisted.
    let twice = made("0", "1").replace(
        "    jump b1(v12, v13)\n",
        "    v49 = icmp lt v12, v11\n    v51 = fconst 1.0\n    brif v49, b1(v12, v13), b1(v12, v51)\n",
    );
    assert!(!hoisted(&twice));
    // An array the loop carries, one of two each iteration: its length is not the loop's to read
    // before it.
    let carried = made("0", "1")
        .replace("    v50 = newarray v11, 8\n", "    v50 = newarray v11, 8\n    v53 = newarray v11, 8\n")
        .replace("    jump b1(v12, v13)\n", "    jump b1(v12, v13, v50)\n")
        .replace("b1(v2: i64, v3: f64):\n", "b1(v2: i64, v3: f64, v52: ptr):\n")
        .replace("    v15 = arraylen v50\n", "    v15 = arraylen v52\n")
        .replace("    v17 = elemaddr v50, v2, 8\n", "    v17 = elemaddr v52, v2, 8\n")
        .replace("    jump b1(v21, v19)\n", "    jump b1(v21, v19, v53)\n");
    assert!(carried.contains("arraylen v52") && carried.contains("jump b1(v21, v19, v53)"));
    assert!(!hoisted(&carried));
}

/// Hoisted checks (`opt::hoist`), the array's side: an array an outer loop carries (made by
/// `newarray` on every path in, its length read nowhere before the inner loop) is certainly an
/// array, so the inner loop's check of it leaves the loop; the same loop over a parameter's array
/// keeps it. And the body's side: a body the header's false edge also reaches (through a block
/// in the loop) runs with the counter past the bound, so its check stays; a header whose two
/// edges go to one block is not a counted loop's.
#[test]
fn checks_leave_only_bodies_the_test_alone_enters_for_arrays_certainly_made() {
    let hoisted = |text: &str| {
        let out = opt(text);
        assert_eq!(count(&out, "main", "boundscheck"), 1, "{out}");
        count(&out, "main", "trap unreachable") == 1
    };
    let outer = "\
fn @main(ptr, ptr) -> f64 {
b0(v0: ptr, v1: ptr):
    v10 = arraylen v0
    v11 = arraylen v1
    v12 = iconst 0
    v13 = fconst 0.0
    v50 = newarray v10, 8
    jump b4(v12, v13, v50)
b4(v30: i64, v31: f64, v52: ptr):
    v32 = icmp lt v30, v10
    brif v32, b5, b6
b5:
    jump b1(v12, v31)
b1(v2: i64, v3: f64):
    v14 = icmp lt v2, v11
    brif v14, b2, b3
b2:
    v15 = arraylen v52
    v16 = iconst 7
    boundscheck v2, v15, v16
    v17 = elemaddr v52, v2, 8
    v18 = load.f64 v17+0
    v19 = fadd v3, v18
    v20 = iconst 1
    v21 = iadd v2, v20
    jump b1(v21, v19)
b3:
    v33 = iconst 1
    v34 = iadd v30, v33
    v35 = newarray v34, 8
    jump b4(v34, v3, v35)
b6:
    return v31
}
";
    assert!(hoisted(outer));
    let parameter =
        outer.replace("    v50 = newarray v10, 8\n", "").replace("jump b4(v12, v13, v50)", "jump b4(v12, v13, v0)");
    assert!(parameter.contains("jump b4(v12, v13, v0)"));
    assert!(!hoisted(&parameter));
    // The false edge reaches the body too, through `b4` while `v4` holds: not hoisted.
    let made = indexed_loop("0", "1", "icmp lt v2, v10", "v50")
        .replace("fn @main(ptr, ptr)", "fn @main(ptr, ptr, bool)")
        .replace("b0(v0: ptr, v1: ptr):\n", "b0(v0: ptr, v1: ptr, v4: bool):\n")
        .replace("    v11 = arraylen v1\n", "    v11 = arraylen v1\n    v50 = newarray v11, 8\n");
    assert!(hoisted(&made));
    let rejoined = made
        .replace("brif v14, b2, b3", "brif v14, b2, b4")
        .replace("b3:\n    return v3\n", "b4:\n    brif v4, b2, b3\nb3:\n    return v3\n");
    assert!(rejoined.contains("brif v4, b2, b3"));
    assert!(!hoisted(&rejoined));
    // Both edges to the body: the header tests nothing.
    assert!(!hoisted(&made.replace("brif v14, b2, b3", "brif v14, b2, b2").replace("b3:\n    return v3\n", "")));
}

/// The guard's forms on the false edge (`len a <= i` exits, the body reads `a.[i]`); a guarded
/// block that another branch also reaches when the guarding branch comes first in the layout (its
/// fact must not hold there: the other predecessor reaches it with `i` unbounded); an index
/// counted from a length.
#[test]
fn bounds_checks_from_every_guard_form_and_only_in_blocks_the_guard_alone_reaches() {
    let checks = |text: &str| count(&opt(text), "main", "boundscheck");
    let le = indexed_loop("0", "1", "icmp le v10, v2", "v0").replace("brif v14, b2, b3", "brif v14, b3, b2");
    assert_eq!(checks(&le), 0);
    let wrong_edge = indexed_loop("0", "1", "icmp le v10, v2", "v0");
    assert_eq!(checks(&wrong_edge), 1);
    let joined = "\
fn @main(ptr, bool) -> f64 {
b0(v0: ptr, v2: bool):
    v10 = arraylen v0
    v11 = iconst 5
    v12 = icmp lt v11, v10
    brif v12, b2, b1
b1:
    brif v2, b2, b3
b2:
    v13 = iconst 4
    boundscheck v11, v10, v13
    v14 = elemaddr v0, v11, 8
    v15 = load.f64 v14+0
    return v15
b3:
    v16 = fconst 0.0
    return v16
}
";
    assert_eq!(checks(joined), 1);
    // Reached from the guard alone, the same check goes.
    assert_eq!(checks(&joined.replace("brif v2, b2, b3", "brif v2, b3, b3")), 0);
    // An index counted up from another array's length (never negative) while below `len a`.
    let from_len =
        indexed_loop("0", "1", "icmp lt v2, v10", "v0").replace("    v12 = iconst 0\n", "    v12 = arraylen v1\n");
    assert_eq!(checks(&from_len), 0);
}

/// Non-negativity proved under an assumption is not remembered: `p` and `q` step as `q + 1` and
/// `p + 1`, but another edge sets `p` to -5 (so `q` is -4 one iteration later). Proving `p`
/// assumes `p` while visiting `q`; `q`'s answer then is not definite, and its own check stays.
/// And an index incremented where nothing bounds it (the increment on a path that skips the
/// guard) may wrap: its check stays too.
#[test]
fn bounds_checks_need_definite_non_negativity_and_increments_that_cannot_wrap() {
    let checks = |text: &str| count(&opt(text), "main", "boundscheck");
    let pair = "\
fn @main(ptr, bool) -> f64 {
b0(v0: ptr, v1: bool):
    v10 = arraylen v0
    v11 = iconst 0
    v12 = fconst 0.0
    jump b1(v11, v11, v12)
b1(v2: i64, v3: i64, v4: f64):
    v13 = icmp lt v2, v10
    brif v13, b2, b5
b2:
    v14 = icmp lt v3, v10
    brif v14, b3, b5
b3:
    v15 = iconst 7
    boundscheck v2, v10, v15
    v16 = elemaddr v0, v2, 8
    v17 = load.f64 v16+0
    boundscheck v3, v10, v15
    v18 = elemaddr v0, v3, 8
    v19 = load.f64 v18+0
    v24 = fadd v17, v19
    v20 = iconst 1
    v21 = iadd v3, v20
    v22 = iadd v2, v20
    brif v1, b1(v21, v22, v24), b4
b4:
    v23 = iconst -5
    jump b1(v23, v11, v24)
b5:
    return v4
}
";
    assert_eq!(checks(pair), 2);
    let unguarded = "\
fn @main(ptr, bool) -> f64 {
b0(v0: ptr, v1: bool):
    v10 = arraylen v0
    v11 = iconst 0
    v12 = fconst 0.0
    jump b1(v11, v12)
b1(v2: i64, v3: f64):
    v13 = icmp lt v2, v10
    brif v13, b2, b4(v3)
b2:
    v15 = iconst 7
    boundscheck v2, v10, v15
    v16 = elemaddr v0, v2, 8
    v17 = load.f64 v16+0
    v18 = fadd v3, v17
    jump b4(v18)
b4(v19: f64):
    v20 = iconst 1
    v21 = iadd v2, v20
    brif v1, b1(v21, v19), b5
b5:
    return v19
}
";
    assert_eq!(checks(unguarded), 1);
}

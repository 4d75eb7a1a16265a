//! The optimiser on hand-written IR: what it removes, what it must keep, and that its output
//! verifies.

use super::*;
use crate::ir::{self, parse, print, verify};

/// Parses `text`, optimises it with `main` as the root, verifies and prints the result.
fn opt(text: &str) -> String {
    let mut m = parse(text).unwrap_or_else(|e| panic!("{e:?}"));
    verify(&m).unwrap_or_else(|e| panic!("input does not verify: {e:?}"));
    let main = m.func_by_name("main").expect("a main function");
    let map = optimize(&mut m, &[main], &OptOptions::default());
    assert!(map.get(main).is_some(), "the root survives");
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

/// Instructions of function `name` whose text contains `what`.
fn count(text: &str, name: &str, what: &str) -> usize {
    let start = text.find(&format!("fn @{name}(")).unwrap_or_else(|| panic!("no @{name} in\n{text}"));
    let body = &text[start..];
    let end = body.find("\n}").unwrap_or(body.len());
    body[..end].lines().filter(|l| l.contains(what)).count()
}

const SCALAR_LOOP: &str = "\
fn @main() -> f64 {
b0:
    v0 = iconst 1000
    v1 = fconst 0.0
    v2 = iconst 0
    jump b1(v2, v1)
b1(v3: i64, v4: f64):
    v5 = icmp lt v3, v0
    brif v5, b2, b3(v4)
b2:
    v6 = null
    v7 = call @step(v6, v4)
    v8 = iconst 1
    v9 = iadd v3, v8
    jump b1(v9, v7)
b3(v10: f64):
    return v10
}

fn @step(ptr, f64) -> f64 {
b0(v0: ptr, v1: f64):
    v2 = fconst 0.5
    v3 = fmul v1, v2
    return v3
}
";

#[test]
fn small_callees_are_inlined_and_disappear() {
    let out = opt(SCALAR_LOOP);
    assert_eq!(count(&out, "main", "call"), 0, "{out}");
    assert_eq!(count(&out, "main", "fmul"), 1, "{out}");
    assert!(!out.contains("fn @step"), "the inlined helper is removed:\n{out}");
    // The exit block's parameter always receives the loop's value: it is propagated.
    assert!(out.contains("return v"), "{out}");
}

#[test]
fn disabled_options_change_nothing() {
    let mut m = parse(SCALAR_LOOP).unwrap();
    let before = print(&m);
    let map = optimize(&mut m, &[], &OptOptions::none());
    assert_eq!(print(&m), before);
    assert_eq!(map.new.len(), 2);
}

/// A closure made and applied in one function: after inlining, the switch on its constant tag
/// folds, the load from its environment reads the stored value, and the record is not allocated.
const KNOWN_CLOSURE: &str = "\
tag t0 = @add_env env(f64)
tag t1 = @mul_env env(f64)

fn @main(f64) -> f64 {
b0(v0: f64):
    v1 = alloc 8
    store v0, v1+0
    v2 = tag t0
    v3 = call @apply(v2, v1, v0)
    return v3
}

fn @apply(i64, ptr, f64) -> f64 {
b0(v0: i64, v1: ptr, v2: f64):
    switch v0, [t0: b1, t1: b2]
b1:
    v3 = call @add_env(v1, v2)
    jump b3(v3)
b2:
    v4 = call @mul_env(v1, v2)
    jump b3(v4)
b3(v5: f64):
    return v5
}

fn @add_env(ptr, f64) -> f64 {
b0(v0: ptr, v1: f64):
    v2 = load.f64 v0+0
    v3 = fadd v1, v2
    return v3
}

fn @mul_env(ptr, f64) -> f64 {
b0(v0: ptr, v1: f64):
    v2 = load.f64 v0+0
    v3 = fmul v1, v2
    return v3
}
";

#[test]
fn known_closures_fold_and_their_environments_vanish() {
    let out = opt(KNOWN_CLOSURE);
    for gone in ["switch", "call", "alloc", "load", "store", "fmul"] {
        assert_eq!(count(&out, "main", gone), 0, "`{gone}` left in\n{out}");
    }
    assert_eq!(count(&out, "main", "fadd v0, v0"), 1, "{out}");
    // Tag functions stay (tags name them); the dispatcher nothing calls goes.
    assert!(out.contains("fn @add_env") && out.contains("fn @mul_env") && !out.contains("fn @apply"), "{out}");
}

#[test]
fn recursive_functions_are_not_inlined() {
    let text = "\
fn @main(i64) -> i64 {
b0(v0: i64):
    v1 = call @down(v0)
    return v1
}

fn @down(i64) -> i64 {
b0(v0: i64):
    v1 = iconst 0
    v2 = icmp le v0, v1
    brif v2, b1, b2
b1:
    return v1
b2:
    v3 = iconst 1
    v4 = isub v0, v3
    v5 = call @down(v4)
    return v5
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "call @down"), 1, "{out}");
    assert_eq!(count(&out, "down", "call @down"), 1, "{out}");
}

/// A record stored twice at one offset (a reused scratch record) is read from memory.
#[test]
fn a_slot_stored_twice_is_not_forwarded() {
    let text = "\
extern fallible $nabla_bag_new(i64) -> ptr
extern fallible $nabla_bag_insert(ptr, ptr, i64, i64) -> ()

fn @main() -> i64 {
b0:
    v0 = iconst 1
    v1 = call $nabla_bag_new(v0)
    v2 = alloc 8
    v3 = iconst 5
    store v3, v2+0
    call $nabla_bag_insert(v1, v2, v0, v0)
    v4 = iconst 6
    store v4, v2+0
    call $nabla_bag_insert(v1, v2, v0, v0)
    v5 = load.i64 v2+0
    return v5
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "store"), 2, "{out}");
    assert_eq!(count(&out, "main", "load.i64"), 1, "{out}");
}

/// `nabla_map_get` writes its result through its last argument: that record is read back.
#[test]
fn records_written_by_support_functions_are_not_forwarded() {
    let text = "\
extern $nabla_map_get(ptr, ptr, ptr) -> bool

fn @main(ptr, i64) -> i64 {
b0(v0: ptr, v1: i64):
    v2 = alloc 8
    store v1, v2+0
    v3 = alloc 8
    store v1, v3+0
    v4 = call $nabla_map_get(v0, v2, v3)
    v5 = load.i64 v3+0
    return v5
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "load.i64"), 1, "{out}");
}

/// When some function stores through a pointer it did not allocate, a record that escapes into
/// a call is no longer trusted to keep its contents.
#[test]
fn escaping_records_are_not_forwarded_when_a_callee_writes_foreign_memory() {
    let text = "\
fn @main(i64) -> i64 {
b0(v0: i64):
    v1 = alloc 8
    store v0, v1+0
    call @clobber(v1)
    v2 = load.i64 v1+0
    return v2
}

fn @clobber(ptr) -> () {
b0(v0: ptr):
    v1 = iconst 7
    store v1, v0+0
    call @clobber2(v0)
    return
}

fn @clobber2(ptr) -> () {
b0(v0: ptr):
    v1 = load.i64 v0+0
    v2 = iconst 0
    v3 = icmp eq v1, v2
    brif v3, b1, b2
b1:
    call @clobber(v0)
    return
b2:
    return
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "load.i64"), 1, "{out}");
}

/// `@reader` only reads its record (and recurses, so it is not inlined); `@relay` hands its record
/// on to `@clobber`, which writes it.
const CALLEES: &str = "
fn @reader(ptr, i64) -> i64 {
b0(v0: ptr, v1: i64):
    v2 = load.i64 v0+0
    v3 = iconst 0
    v4 = icmp eq v1, v3
    brif v4, b1, b2
b1:
    return v2
b2:
    v5 = iconst 1
    v6 = isub v1, v5
    v7 = call @reader(v0, v6)
    return v7
}

fn @relay(ptr, i64) -> () {
b0(v0: ptr, v1: i64):
    v2 = iconst 0
    v3 = icmp eq v1, v2
    brif v3, b1, b2
b1:
    call @clobber(v0)
    return
b2:
    v4 = iconst 1
    v5 = isub v1, v4
    call @relay(v0, v5)
    return
}

fn @clobber(ptr) -> () {
b0(v0: ptr):
    v1 = iconst 7
    store v1, v0+0
    call @clobber2(v0)
    return
}

fn @clobber2(ptr) -> () {
b0(v0: ptr):
    v1 = load.i64 v0+0
    v2 = iconst 0
    v3 = icmp eq v1, v2
    brif v3, b1, b2
b1:
    call @clobber(v0)
    return
b2:
    return
}
";

/// Whether a record keeps its contents is decided per allocation: the record passed (through
/// `@relay`) to a function that writes it is read back; the one passed only to `@reader` is
/// forwarded, although the module writes through a parameter.
#[test]
fn records_are_trusted_per_allocation() {
    let text = format!(
        "\
fn @main(i64) -> i64 {{
b0(v0: i64):
    v1 = alloc 8
    store v0, v1+0
    v2 = alloc 8
    store v0, v2+0
    call @relay(v1, v0)
    v3 = call @reader(v2, v0)
    v4 = load.i64 v1+0
    v5 = load.i64 v2+0
    v6 = iadd v4, v5
    v7 = iadd v6, v3
    return v7
}}
{CALLEES}"
    );
    let out = opt(&text);
    assert_eq!(count(&out, "main", "load.i64"), 1, "{out}");
    let mut m = parse(&text).unwrap();
    let facts = simplify::ModuleFacts::of(&m);
    assert!(!facts.unknown_writes, "every write's target is known");
    // The record written by `@relay` is the one read back (the other one's load is gone).
    let main = m.func_by_name("main").unwrap();
    optimize(&mut m, &[main], &OptOptions::default());
    let main = m.func_by_name("main").unwrap();
    let f = &m.funcs[main];
    let loads: Vec<_> = f
        .layout
        .iter()
        .flat_map(|b| &f.blocks[*b].insts)
        .filter_map(|i| match f.insts[*i].op {
            ir::Op::Load(_, p, _) => Some(p),
            _ => None,
        })
        .collect();
    let relayed = f.layout.iter().flat_map(|b| &f.blocks[*b].insts).find_map(|i| match &f.insts[*i].op {
        ir::Op::Call(g, args) if m.funcs[*g].name == "relay" => Some(args[0]),
        _ => None,
    });
    assert_eq!(loads, relayed.into_iter().collect::<Vec<_>>(), "{out}");
}

/// A write through a pointer read from memory could target any record that escapes: then only
/// records that never escape are forwarded.
#[test]
fn an_unknown_write_distrusts_escaping_records_only() {
    let text = format!(
        "\
fn @main(i64, ptr) -> i64 {{
b0(v0: i64, v1: ptr):
    call @poke(v1)
    v2 = alloc 8
    store v0, v2+0
    v3 = call @reader(v2, v0)
    v4 = alloc 8
    store v0, v4+0
    v5 = load.i64 v2+0
    v6 = load.i64 v4+0
    v7 = iadd v5, v6
    v8 = iadd v7, v3
    return v8
}}

fn @poke(ptr) -> () {{
b0(v0: ptr):
    v1 = load.ptr v0+0
    v2 = iconst 9
    store v2, v1+0
    return
}}
{CALLEES}"
    );
    let m = parse(&text).unwrap();
    assert!(simplify::ModuleFacts::of(&m).unknown_writes);
    let out = opt(&text);
    // The escaping record (passed to `@reader`) is read back; the other one is not.
    assert_eq!(count(&out, "main", "load.i64"), 1, "{out}");
}

/// Lowering's `iterate` (a counted loop) and `while` over scalars, exactly as `nabla ir --raw`
/// prints them: a compaction scope whose loop allocates nothing once the bodies are inlined.
const IDLE_SCOPES: &[(&str, &str)] = &[
    (
        // The iteration counter and the state's first word, both from 0 by 1, are one value.
        "b1(v0: i64, v1: i64):",
        "\
extern fallible $nabla_arena_mark() -> i64
extern $nabla_arena_compact_begin(i64, i64) -> bool
extern $nabla_arena_compact_end(i64) -> i64

fn @main() -> (i64, i64) {
b0:
    v0 = iconst 100
    v1 = iconst 0
    v2 = iconst 1
    v3 = iconst 0
    v4 = icmp lt v0, v3
    brif v4, b1, b2
b1:
    v5 = iconst 0
    trap iterate_negative(v5, v0, v3)
b2:
    v6 = call $nabla_arena_mark()
    v7 = iconst 0
    v8 = iconst 0
    jump b3(v8, v1, v2, v7)
b3(v9: i64, v10: i64, v11: i64, v12: i64):
    v16 = icmp lt v9, v0
    brif v16, b4, b5(v10, v11, v12)
b4:
    v17 = null
    v18, v19 = call @main.lam1(v17, v10, v11)
    v20 = call $nabla_arena_compact_begin(v6, v12)
    brif v20, b6, b7
b6:
    v24 = call $nabla_arena_compact_end(v6)
    v25 = iadd v24, v24
    jump b8(v18, v19, v25)
b7:
    jump b8(v18, v19, v12)
b8(v21: i64, v22: i64, v23: i64):
    v26 = iconst 1
    v27 = iadd v9, v26
    jump b3(v27, v21, v22, v23)
b5(v13: i64, v14: i64, v15: i64):
    return v13, v14
}

fn @main.lam1(ptr, i64, i64) -> (i64, i64) {
b0(v0: ptr, v1: i64, v2: i64):
    v3 = iconst 1
    v4 = iadd v1, v3
    v5 = iconst 2
    v6 = imul v2, v5
    v7 = iadd v6, v1
    return v4, v7
}
",
    ),
    (
        "b1(v0: i64, v1: i64):",
        "\
extern fallible $nabla_arena_mark() -> i64
extern $nabla_arena_compact_begin(i64, i64) -> bool
extern $nabla_arena_compact_end(i64) -> i64

fn @main() -> (i64, i64) {
b0:
    v0 = iconst 0
    v1 = iconst 0
    v2 = call $nabla_arena_mark()
    v3 = iconst 0
    jump b1(v0, v1, v3)
b1(v4: i64, v5: i64, v6: i64):
    v10 = null
    v11 = call @main.lam1(v10, v4, v5)
    brif v11, b2, b3(v4, v5, v6)
b2:
    v12 = null
    v13, v14 = call @main.lam2(v12, v4, v5)
    v15 = call $nabla_arena_compact_begin(v2, v6)
    brif v15, b4, b5
b4:
    v19 = call $nabla_arena_compact_end(v2)
    v20 = iadd v19, v19
    jump b6(v13, v14, v20)
b5:
    jump b6(v13, v14, v6)
b6(v16: i64, v17: i64, v18: i64):
    jump b1(v16, v17, v18)
b3(v7: i64, v8: i64, v9: i64):
    return v7, v8
}

fn @main.lam1(ptr, i64, i64) -> bool {
b0(v0: ptr, v1: i64, v2: i64):
    v3 = iconst 10
    v4 = icmp lt v1, v3
    return v4
}

fn @main.lam2(ptr, i64, i64) -> (i64, i64) {
b0(v0: ptr, v1: i64, v2: i64):
    v3 = iconst 1
    v4 = iadd v1, v3
    v5 = iadd v2, v1
    return v4, v5
}
",
    ),
];

/// An idle compaction scope loses its mark and checks, and the simplifier then folds the
/// constant checks and removes the copying branch, the threshold the loop carried and the
/// empty blocks left (verified after every pass): the loop is left as a plain counted loop.
#[test]
fn idle_compaction_scopes_are_folded_away() {
    for (header, text) in IDLE_SCOPES {
        let mut m = parse(text).unwrap_or_else(|e| panic!("{e:?}"));
        verify(&m).unwrap_or_else(|e| panic!("input does not verify: {e:?}"));
        let main = m.func_by_name("main").unwrap();
        optimize_checked(&mut m, &[main], &OptOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        let out = print(&m);
        for gone in ["nabla_arena", "bconst", "iconst 0\n    brif"] {
            assert_eq!(count(&out, "main", gone), 0, "{gone} in\n{out}");
        }
        // One loop: the header and the exit are the only blocks with parameters or branches.
        assert_eq!(count(&out, "main", "brif"), 1, "{out}");
        assert_eq!(count(&out, "main", "jump"), 2, "{out}");
        // The loop carries the counter (or the state) only, not the compaction threshold.
        assert!(out.contains(&format!("\n{header}\n")), "{out}");
    }
}

/// A block that only jumps on, but whose parameter is read further on (a join right before a
/// loop, its value returned after the loop), is not bypassed: its edges skipping it would leave
/// the read without a definition. (The shape an idle compaction scope leaves behind `lookup`
/// followed by `while`; the simplifier used to bypass it, so `opt::scopes` ran last with no
/// clean-up after it.)
#[test]
fn an_empty_block_whose_parameter_is_read_later_is_kept() {
    let text = "\
fn @main(bool, i64, i64) -> i64 {
b0(v0: bool, v1: i64, v2: i64):
    brif v0, b1, b2
b1:
    v3 = iconst 5
    jump b3(v3)
b2:
    jump b3(v1)
b3(v4: i64):
    jump b4(v2)
b4(v5: i64):
    v6 = iconst 3
    v7 = icmp lt v5, v6
    brif v7, b5, b6
b5:
    v8 = iconst 1
    v9 = iadd v5, v8
    jump b4(v9)
b6:
    return v4
}
";
    let mut m = parse(text).unwrap();
    let main = m.func_by_name("main").unwrap();
    optimize_checked(&mut m, &[main], &OptOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let out = print(&m);
    // The value returned is still the join of 5 and the first argument.
    assert!(out.contains("iconst 5"), "{out}");
    let ret = out.lines().find(|l| l.trim_start().starts_with("return")).unwrap_or_default().trim().to_string();
    let joined = ret.trim_start_matches("return ").to_string();
    let join_line = out.lines().find(|l| l.contains(&format!("({joined}: i64)"))).unwrap_or_default();
    assert!(join_line.starts_with('b'), "`{ret}` does not return a join's parameter:\n{out}");
}

/// Division by a constant zero must still fail at run time, even if its result is unused.
#[test]
fn failing_operations_are_kept() {
    let text = "\
fn @main(i64) -> i64 {
b0(v0: i64):
    v1 = iconst 0
    v2 = sdiv v0, v1
    v3 = iconst 3
    v4 = srem v0, v3
    v5 = iconst 7
    v6 = iconst -1
    v7 = sdiv v5, v6
    return v7
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "sdiv v0"), 1, "{out}");
    assert_eq!(count(&out, "main", "srem"), 0, "a remainder by a nonzero constant cannot fail:\n{out}");
    assert_eq!(count(&out, "main", "iconst -7"), 1, "{out}");
}

#[test]
fn constant_branches_fold_and_dead_blocks_go() {
    let text = "\
fn @main(i64) -> i64 {
b0(v0: i64):
    v1 = iconst 2
    v2 = iconst 3
    v3 = icmp lt v1, v2
    brif v3, b1, b2
b1:
    v4 = iadd v0, v1
    jump b3(v4)
b2:
    v5 = iconst -1
    v6 = iconst 0
    trap unreachable(v5, v6, v6)
b3(v7: i64):
    return v7
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "trap"), 0, "{out}");
    assert_eq!(count(&out, "main", "brif"), 0, "{out}");
    assert_eq!(out.matches("\nb").count(), 1, "one block is left:\n{out}");
}

/// A function returning different tags on two paths has no constant result: the caller's
/// `switch` on it keeps both cases (each big tag function, called once, is then inlined).
#[test]
fn results_differing_between_returns_are_not_constant() {
    let mut body = String::new();
    for i in 0..60 {
        body.push_str(&format!("    v{} = iadd v{}, v1\n", i + 3, i + 2));
    }
    let big = |name: &str, op: &str| {
        format!("fn @{name}(ptr, i64) -> i64 {{\nb0(v0: ptr, v1: i64):\n    v2 = load.i64 v0+0\n{}    v63 = {op} v62, v2\n    return v63\n}}\n", body)
    };
    let text = format!(
        "tag t0 = @big_a env(i64)\ntag t1 = @big_b env(i64)\n
fn @main(i64, bool) -> i64 {{
b0(v0: i64, v1: bool):
    v2, v3 = call @either(v1, v0)
    switch v2, [t0: b1, t1: b2]
b1:
    v4 = call @big_a(v3, v0)
    jump b3(v4)
b2:
    v5 = call @big_b(v3, v0)
    jump b3(v5)
b3(v6: i64):
    return v6
}}

fn @either(bool, i64) -> (i64, ptr) {{
b0(v0: bool, v1: i64):
    v2 = alloc 8
    store v1, v2+0
    brif v0, b1, b2
b1:
    v3 = tag t0
    return v3, v2
b2:
    v4 = tag t1
    return v4, v2
}}

{}
{}",
        big("big_a", "isub"),
        big("big_b", "imul"),
    );
    let out = opt(&text);
    assert_eq!((count(&out, "main", "isub"), count(&out, "main", "imul")), (1, 1), "both cases stay:\n{out}");
}

/// Big functions with one call site are inlined; big functions called twice are not.
/// Two closures of one type, each made by a call of a function returning it (lowering's
/// application of a curried λ) and applied through a `switch` over both tags: every constant
/// result of a callee is known to its callers before the inliner counts call sites, so each
/// `switch` folds to its one case, each big tag function has the single call site it really has
/// and is inlined, and both environments are forwarded.
#[test]
fn constant_results_of_calls_fold_switches_before_inlining() {
    let mut body = String::new();
    for i in 0..60 {
        body.push_str(&format!("    v{} = iadd v{}, v1\n", i + 3, i + 2));
    }
    let big = |name: &str, op: &str| {
        format!("fn @{name}(ptr, i64) -> i64 {{\nb0(v0: ptr, v1: i64):\n    v2 = load.i64 v0+0\n{}    v63 = {op} v62, v2\n    return v63\n}}\n", body)
    };
    let make = |name: &str, tag: &str| {
        format!("fn @{name}(i64) -> (i64, ptr) {{\nb0(v0: i64):\n    v1 = alloc 8\n    store v0, v1+0\n    v2 = tag {tag}\n    return v2, v1\n}}\n")
    };
    let apply = |x: usize, tag: usize, env: usize, r: usize, blk: usize| {
        format!(
            "    switch v{tag}, [t0: b{b1}, t1: b{b2}]\nb{b1}:\n    v{r1} = call @big_a(v{env}, v{x})\n    jump b{b3}(v{r1})\nb{b2}:\n    v{r2} = call @big_b(v{env}, v{x})\n    jump b{b3}(v{r2})\nb{b3}(v{r}: i64):\n",
            b1 = blk, b2 = blk + 1, b3 = blk + 2, r1 = r + 1, r2 = r + 2
        )
    };
    let text = format!(
        "tag t0 = @big_a env(i64)\ntag t1 = @big_b env(i64)\n\nfn @main(i64) -> i64 {{\nb0(v0: i64):\n    v1, v2 = call @make_a(v0)\n{}    v10, v11 = call @make_b(v3)\n{}    return v12\n}}\n\n{}\n{}\n{}\n{}",
        apply(0, 1, 2, 3, 1),
        apply(3, 10, 11, 12, 4),
        make("make_a", "t0"),
        make("make_b", "t1"),
        big("big_a", "isub"),
        big("big_b", "imul"),
    );
    let out = opt(&text);
    for gone in ["switch", "call", "alloc", "load", "store"] {
        assert_eq!(count(&out, "main", gone), 0, "`{gone}` left in\n{out}");
    }
    assert_eq!(count(&out, "main", "iadd"), 120, "{out}");
    assert_eq!((count(&out, "main", "isub"), count(&out, "main", "imul")), (1, 1), "{out}");
}

#[test]
fn size_threshold_and_single_call_sites() {
    let mut body = String::new();
    for i in 0..60 {
        body.push_str(&format!("    v{} = iadd v{}, v0\n", i + 1, i));
    }
    let big = |name: &str| format!("fn @{name}(i64) -> i64 {{\nb0(v0: i64):\n{body}    return v60\n}}\n");
    let once =
        format!("fn @main(i64) -> i64 {{\nb0(v0: i64):\n    v1 = call @big(v0)\n    return v1\n}}\n\n{}", big("big"));
    let out = opt(&once);
    assert_eq!(count(&out, "main", "call"), 0, "{out}");
    let twice = format!(
        "fn @main(i64) -> i64 {{\nb0(v0: i64):\n    v1 = call @big(v0)\n    v2 = call @big(v1)\n    return v2\n}}\n\n{}",
        big("big")
    );
    let out = opt(&twice);
    assert_eq!(count(&out, "main", "call @big"), 2, "{out}");
}

#[test]
fn every_function_is_renumbered_densely() {
    let out = opt(KNOWN_CLOSURE);
    let m = parse(&out).unwrap();
    for f in m.funcs.values() {
        let defined: usize = f.layout.iter().map(|b| f.blocks[*b].params.len()).sum::<usize>()
            + f.layout.iter().flat_map(|b| &f.blocks[*b].insts).map(|i| f.insts[*i].results.len()).sum::<usize>();
        assert_eq!(defined, f.values.len(), "{}", ir::print_function(&m, f));
    }
}

/// `flatMapBag (fun x -> bag{x # x, x + 1 # x + 1}) b` after inlining: the per-element bag is never made.
const FLAT_MAP: &str = "\
extern fallible $nabla_bag_new(i64) -> ptr
extern fallible $nabla_bag_insert(ptr, ptr, i64, i64) -> ()
extern fallible $nabla_bag_entries(ptr) -> ptr
extern fallible $nabla_bag_add_scaled(ptr, ptr, i64, i64) -> ()

fn @main(ptr) -> ptr {
b0(v0: ptr):
    v1 = iconst 1
    v2 = call $nabla_bag_new(v1)
    v3 = call $nabla_bag_entries(v0)
    v4 = arraylen v3
    v5 = iconst 0
    jump b1(v5)
b1(v6: i64):
    v7 = icmp lt v6, v4
    brif v7, b2, b3
b2:
    v8 = elemaddr v3, v6, 16
    v9 = load.i64 v8+0
    v10 = load.i64 v8+8
    v11 = call @f(v9)
    call $nabla_bag_add_scaled(v2, v11, v10, v5)
    v12 = iconst 1
    v13 = iadd v6, v12
    jump b1(v13)
b3:
    return v2
}

fn @f(i64) -> ptr {
b0(v0: i64):
    v1 = iconst 1
    v2 = call $nabla_bag_new(v1)
    v3 = alloc 8
    store v0, v3+0
    call $nabla_bag_insert(v2, v3, v0, v1)
    v4 = iadd v0, v1
    store v4, v3+0
    call $nabla_bag_insert(v2, v3, v4, v1)
    return v2
}
";

#[test]
fn fresh_bags_added_once_are_fused_into_their_destination() {
    let out = opt(FLAT_MAP);
    assert_eq!(count(&out, "main", "bag_new"), 1, "{out}");
    assert_eq!(count(&out, "main", "add_scaled"), 0, "{out}");
    assert_eq!(count(&out, "main", "bag_insert(v"), 0, "{out}");
    // Each insert is scaled by the element's multiplicity (the product checked for overflow) and
    // reports an overflow at the addition's site.
    assert_eq!(count(&out, "main", "bag_insert_scaled(v"), 2, "{out}");
    assert_eq!(count(&out, "main", "imul"), 0, "{out}");
    assert!(out.contains("extern fallible $nabla_bag_insert_scaled(ptr, ptr, i64, i64, i64) -> ()"), "{out}");
}

/// The destination is read between the inner bag's creation and its addition: no fusion.
#[test]
fn fusion_keeps_bags_whose_destination_is_read_meanwhile() {
    let text = FLAT_MAP
        .replace(
            "    v11 = call @f(v9)\n",
            "    v11 = call @f(v9)\n    v14 = call $nabla_bag_len(v2)\n    v15 = iadd v10, v14\n",
        )
        .replace("add_scaled(v2, v11, v10, v5)", "add_scaled(v2, v11, v15, v5)")
        .replace(
            "extern fallible $nabla_bag_add_scaled",
            "extern $nabla_bag_len(ptr) -> i64\nextern fallible $nabla_bag_add_scaled",
        );
    let out = opt(&text);
    assert_eq!(count(&out, "main", "add_scaled"), 1, "{out}");
}

/// A bag added on one branch only is built: the other path would lose its inserts' absence.
#[test]
fn fusion_needs_every_path_to_reach_the_addition() {
    let text = "\
extern fallible $nabla_bag_new(i64) -> ptr
extern fallible $nabla_bag_insert(ptr, ptr, i64, i64) -> ()
extern fallible $nabla_bag_add_into(ptr, ptr, i64) -> ()

fn @main(ptr, bool, i64) -> ptr {
b0(v0: ptr, v1: bool, v2: i64):
    v3 = iconst 1
    v4 = call $nabla_bag_new(v3)
    v5 = alloc 8
    store v2, v5+0
    call $nabla_bag_insert(v4, v5, v3, v3)
    brif v1, b1, b2
b1:
    call $nabla_bag_add_into(v0, v4, v3)
    jump b2
b2:
    return v0
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "bag_new"), 1, "{out}");
    assert_eq!(count(&out, "main", "add_into"), 1, "{out}");
}

/// `foldBag intGroup (fun k -> BODY) b` after inlining, BODY computing `v9` from the key `v7`;
/// `ACC` is the accumulator's type and `ADD` how the step adds.
fn int_fold(body: &str, acc: &str, add: &str) -> String {
    format!(
        "\
extern fallible $nabla_bag_entries(ptr) -> ptr
extern $nabla_bag_len(ptr) -> i64

fn @main(ptr, {acc}) -> {acc} {{
b0(v0: ptr, v1: {acc}):
    v2 = call $nabla_bag_entries(v0)
    v3 = arraylen v2
    v4 = iconst 0
    jump b1(v4, v1)
b1(v5: i64, v6: {acc}):
    v20 = icmp lt v5, v3
    brif v20, b2, b3
b2:
    v21 = elemaddr v2, v5, 16
    v7 = load.i64 v21+0
    v8 = load.i64 v21+8
{body}
    v10 = {add} v6, v9
    v11 = iconst 1
    v12 = iadd v5, v11
    jump b1(v12, v10)
b3:
    return v6
}}
"
    )
}

#[test]
fn integer_folds_over_bags_skip_the_sort() {
    let out = opt(&int_fold("    v9 = imul v7, v8", "i64", "iadd"));
    assert_eq!(count(&out, "main", "entries_unordered"), 1, "{out}");
}

#[test]
fn order_sensitive_folds_keep_the_sort() {
    // Real sums depend on the order.
    let out = opt(&int_fold("    v30 = imul v7, v8\n    v9 = itof v30", "f64", "fadd"));
    assert_eq!(count(&out, "main", "entries_unordered"), 0, "{out}");
    // Which division by zero fails first depends on the order.
    let out = opt(&int_fold("    v9 = sdiv v8, v7", "i64", "iadd"));
    assert_eq!(count(&out, "main", "entries_unordered"), 0, "{out}");
    // The accumulator read other than by its sum.
    let out = opt(&int_fold("    v9 = imul v6, v7", "i64", "iadd"));
    assert_eq!(count(&out, "main", "entries_unordered"), 0, "{out}");
}

/// `mapBag` into a bag, with the destination read inside the loop or not.
fn map_loop(read_dest: bool) -> String {
    let read = if read_dest {
        "    v30 = call $nabla_bag_len(v9)\n    v31 = iadd v7, v30\n"
    } else {
        "    v31 = iadd v7, v7\n"
    };
    format!(
        "\
extern fallible $nabla_bag_new(i64) -> ptr
extern fallible $nabla_bag_insert(ptr, ptr, i64, i64) -> ()
extern fallible $nabla_bag_entries(ptr) -> ptr
extern $nabla_bag_len(ptr) -> i64

fn @main(ptr) -> ptr {{
b0(v0: ptr):
    v1 = iconst 1
    v9 = call $nabla_bag_new(v1)
    v22 = alloc 8
    v2 = call $nabla_bag_entries(v0)
    v3 = arraylen v2
    v4 = iconst 0
    jump b1(v4)
b1(v5: i64):
    v20 = icmp lt v5, v3
    brif v20, b2, b3
b2:
    v21 = elemaddr v2, v5, 16
    v7 = load.i64 v21+0
    v8 = load.i64 v21+8
{read}    store v31, v22+0
    call $nabla_bag_insert(v9, v22, v8, v1)
    v11 = iconst 1
    v12 = iadd v5, v11
    jump b1(v12)
b3:
    return v9
}}
"
    )
}

#[test]
fn bag_building_loops_skip_the_sort_unless_they_read_what_they_build() {
    let out = opt(&map_loop(false));
    assert_eq!(count(&out, "main", "entries_unordered"), 1, "{out}");
    let out = opt(&map_loop(true));
    assert_eq!(count(&out, "main", "entries_unordered"), 0, "{out}");
}

/// Compiled reverse mode's loop bodies: repeated reads of `x.[i]` keep one bounds check and one
/// load, and three `accAdd'`s into `d.[i]` become one load and one store. A check of another
/// index, and loads after a store to another address, stay.
#[test]
fn repeated_checks_loads_and_overwritten_stores_go() {
    let text = "\
fn @main(ptr, ptr, i64, i64) -> f64 {
b0(v0: ptr, v1: ptr, v2: i64, v3: i64):
    v4 = arraylen v0
    v5 = iconst 1
    boundscheck v2, v4, v5
    v6 = elemaddr v0, v2, 8
    v7 = load.f64 v6+0
    v8 = arraylen v0
    v9 = iconst 2
    boundscheck v2, v8, v9
    v10 = elemaddr v0, v2, 8
    v11 = load.f64 v10+0
    v12 = fmul v7, v11
    v13 = fmul v7, v11
    v14 = arraylen v1
    v15 = iconst 3
    boundscheck v2, v14, v15
    v16 = elemaddr v1, v2, 8
    v17 = load.f64 v16+0
    v18 = fadd v17, v12
    store v18, v16+0
    v19 = iconst 4
    boundscheck v2, v14, v19
    v20 = elemaddr v1, v2, 8
    v21 = load.f64 v20+0
    v22 = fadd v21, v13
    store v22, v20+0
    boundscheck v3, v14, v19
    v23 = elemaddr v1, v3, 8
    v24 = load.f64 v23+0
    v25 = fadd v24, v12
    store v25, v23+0
    v26 = load.f64 v16+0
    v27 = fadd v26, v25
    return v27
}
";
    let out = opt(text);
    // x.[v2] once; d.[v2] and d.[v3] once each.
    assert_eq!(count(&out, "main", "boundscheck"), 3, "{out}");
    assert_eq!(count(&out, "main", "arraylen"), 2, "{out}");
    assert_eq!(count(&out, "main", "fmul"), 1, "{out}");
    // x.[v2] once, d.[v2] once before its stores; d.[v3] may alias d.[v2]: both read again.
    assert_eq!(count(&out, "main", "load.f64"), 4, "{out}");
    // The first store to d.[v2] is overwritten by the second with no read between.
    assert_eq!(count(&out, "main", "store"), 2, "{out}");
}

/// A call between two stores may read the first, and one between two loads may change the slot.
#[test]
fn calls_keep_stores_and_loads() {
    let text = "\
extern $nabla_arena_mark() -> i64

fn @main(ptr, i64) -> f64 {
b0(v0: ptr, v1: i64):
    v2 = elemaddr v0, v1, 8
    v3 = load.f64 v2+0
    v4 = call $nabla_arena_mark()
    v5 = load.f64 v2+0
    v6 = fadd v3, v5
    store v6, v2+0
    v7 = call $nabla_arena_mark()
    store v3, v2+0
    return v6
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "load.f64"), 2, "{out}");
    assert_eq!(count(&out, "main", "store"), 2, "{out}");
}

/// The first of two identical checks fails first, at its own site: the error is unchanged.
#[test]
fn the_first_of_two_checks_is_kept() {
    let text = "\
fn @main(ptr, i64) -> f64 {
b0(v0: ptr, v1: i64):
    v2 = arraylen v0
    v3 = iconst 7
    boundscheck v1, v2, v3
    v4 = iconst 9
    boundscheck v1, v2, v4
    v5 = elemaddr v0, v1, 8
    v6 = load.f64 v5+0
    return v6
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "boundscheck"), 1, "{out}");
    assert!(out.contains("iconst 7") && !out.contains("iconst 9"), "{out}");
}

/// A map fold's step after inlining `fun k -> singletonMap k (k * 2)`: the one-key map exists
/// only to be added into the accumulator.
const SINGLETON_MAP: &str = "\
extern fallible $nabla_map_new(i64, i64) -> ptr
extern fallible $nabla_map_set(ptr, ptr, ptr) -> ()
extern fallible $nabla_map_entries(ptr) -> ptr
extern fallible $nabla_map_add_scaled(ptr, ptr, i64, i64, i64) -> ()

fn @main(ptr) -> ptr {
b0(v0: ptr):
    v1 = iconst 1
    v2 = call $nabla_map_new(v1, v1)
    v3 = call $nabla_map_entries(v0)
    v4 = arraylen v3
    v5 = iconst 0
    jump b1(v5)
b1(v6: i64):
    v7 = icmp lt v6, v4
    brif v7, b2, b3
b2:
    v8 = elemaddr v3, v6, 16
    v9 = load.i64 v8+0
    v10 = call $nabla_map_new(v1, v1)
    v11 = alloc 8
    store v9, v11+0
    v12 = alloc 8
    v13 = iadd v9, v9
    store v13, v12+0
    call $nabla_map_set(v10, v11, v12)
    v14 = iconst 7
    call $nabla_map_add_scaled(v2, v10, v1, v5, v14)
    v15 = iadd v6, v1
    jump b1(v15)
b3:
    return v2
}
";

#[test]
fn singleton_maps_added_once_are_never_built() {
    let out = opt(SINGLETON_MAP);
    // The accumulator is still made; the singleton is not.
    assert_eq!(count(&out, "main", "map_new"), 1, "{out}");
    assert_eq!(count(&out, "main", "map_set"), 0, "{out}");
    assert_eq!(count(&out, "main", "map_add_scaled("), 0, "{out}");
    assert_eq!(count(&out, "main", "map_add_scaled_key(v"), 1, "{out}");
    assert!(out.contains("extern fallible $nabla_map_add_scaled_key(ptr, ptr, ptr, i64, i64, i64) -> ()"), "{out}");
}

/// The value's slot is written between the `set` and the addition (the map holds the old
/// words), or the map is read meanwhile: no fusion.
#[test]
fn singleton_maps_whose_slots_change_or_that_are_read_are_built() {
    let rewritten = SINGLETON_MAP.replace("    v14 = iconst 7\n", "    v14 = iconst 7\n    store v9, v12+0\n");
    let out = opt(&rewritten);
    assert_eq!(count(&out, "main", "map_add_scaled(v"), 1, "{out}");
    assert_eq!(count(&out, "main", "map_set(v"), 1, "{out}");
    let read = SINGLETON_MAP
        .replace("    v14 = iconst 7\n", "    v14 = iconst 7\n    v16 = call $nabla_map_len(v10)\n")
        .replace("add_scaled(v2, v10, v1, v5, v14)", "add_scaled(v2, v10, v16, v5, v14)")
        .replace(
            "extern fallible $nabla_map_add_scaled",
            "extern $nabla_map_len(ptr) -> i64\nextern fallible $nabla_map_add_scaled",
        );
    let out = opt(&read);
    assert_eq!(count(&out, "main", "map_add_scaled(v"), 1, "{out}");
}

/// `foldMap bagGroup (mapGroup intGroup) (fun _ b -> foldBag (mapGroup intGroup) (fun x ->
/// singletonMap x 1) b) m` after singleton-map fusion: a map per entry of `m`, filled by keyed
/// additions and added once, scaled by `SCALE`, into the accumulator.
fn nested_map_fold(scale: &str, extra: &str) -> String {
    nested_map_fold_returning(scale, extra, "v2")
}

fn nested_map_fold_returning(scale: &str, extra: &str, ret: &str) -> String {
    format!(
        "\
extern fallible $nabla_map_new(i64, i64) -> ptr
extern fallible $nabla_map_entries(ptr) -> ptr
extern fallible $nabla_bag_entries_unordered(ptr) -> ptr
extern fallible $nabla_map_add_scaled(ptr, ptr, i64, i64, i64) -> ()
extern fallible $nabla_map_add_scaled_key(ptr, ptr, ptr, i64, i64, i64) -> ()
extern $nabla_map_len(ptr) -> i64

fn @main(ptr, i64) -> ptr {{
b0(v0: ptr, v20: i64):
    v1 = iconst 1
    v2 = call $nabla_map_new(v1, v1)
    v3 = call $nabla_map_entries(v0)
    v4 = arraylen v3
    v5 = iconst 0
    jump b1(v5)
b1(v6: i64):
    v7 = icmp lt v6, v4
    brif v7, b2, b3
b2:
    v8 = elemaddr v3, v6, 16
    v9 = load.ptr v8+8
    v10 = call $nabla_map_new(v1, v1)
    v11 = call $nabla_bag_entries_unordered(v9)
    v12 = arraylen v11
    jump b4(v5)
b3:
    return {ret}
b4(v13: i64):
    v14 = icmp lt v13, v12
    brif v14, b5, b6
b5:
    v15 = elemaddr v11, v13, 16
    v16 = load.i64 v15+0
    v17 = load.i64 v15+8
    v18 = alloc 8
    store v16, v18+0
    v19 = alloc 8
    store v1, v19+0
    v21 = iconst 0
    v22 = iconst 5
    call $nabla_map_add_scaled_key(v10, v18, v19, v17, v21, v22)
    v23 = iadd v13, v1
    jump b4(v23)
b6:
{extra}    v24 = iconst 0
    v25 = iconst 6
    call $nabla_map_add_scaled(v2, v10, {scale}, v24, v25)
    v26 = iadd v6, v1
    jump b1(v26)
}}
"
    )
}

#[test]
fn int_maps_added_once_into_an_accumulator_are_never_built() {
    let out = opt(&nested_map_fold("v1", ""));
    // Only the accumulator is made; each keyed addition goes into it directly.
    assert_eq!(count(&out, "main", "map_new"), 1, "{out}");
    assert_eq!(count(&out, "main", "map_add_scaled("), 0, "{out}");
    assert_eq!(count(&out, "main", "map_add_scaled_key(v"), 1, "{out}");
    assert_eq!(count(&out, "main", "imul"), 0, "{out}");
    // A scale other than 1 multiplies each amount (wrapping, as the unfused additions do).
    let out = opt(&nested_map_fold("v20", ""));
    assert_eq!(count(&out, "main", "map_new"), 1, "{out}");
    assert_eq!(count(&out, "main", "imul"), 1, "{out}");
    let out = opt(&nested_map_fold("v30", "    v30 = iconst 3\n"));
    assert_eq!(count(&out, "main", "map_new"), 1, "{out}");
    assert_eq!(count(&out, "main", "imul"), 1, "{out}");
}

/// The accumulator is read between the inner map's creation and its addition, the group is not
/// `intGroup`, or the accumulator escapes before the loop: the inner map is built.
#[test]
fn map_accumulators_read_meanwhile_or_in_other_groups_are_kept() {
    let read = nested_map_fold("v31", "    v31 = call $nabla_map_len(v2)\n");
    let out = opt(&read);
    assert_eq!(count(&out, "main", "map_new"), 2, "{out}");
    let real = nested_map_fold("v1", "").replace("    v24 = iconst 0\n", "    v24 = iconst 1\n");
    let out = opt(&real);
    assert_eq!(count(&out, "main", "map_new"), 2, "{out}");
    let inner_real = nested_map_fold("v1", "").replace("    v21 = iconst 0\n", "    v21 = iconst 2\n");
    let out = opt(&inner_real);
    assert_eq!(count(&out, "main", "map_new"), 2, "{out}");
    // Stored before the loop (an alias could read it meanwhile).
    let escapes = nested_map_fold_returning("v1", "", "v40").replace(
        "    v3 = call $nabla_map_entries(v0)\n",
        "    v3 = call $nabla_map_entries(v0)\n    v40 = alloc 8\n    store v2, v40+0\n",
    );
    let out = opt(&escapes);
    assert_eq!(count(&out, "main", "map_new"), 2, "{out}");
}

/// `build (len x) f`'s check of a negative count cannot fail: an array length is never negative.
/// A check of a count that is not a length stays.
#[test]
fn lengths_are_never_negative() {
    let text = "\
fn @main(ptr, i64) -> i64 {
b0(v0: ptr, v1: i64):
    v2 = arraylen v0
    v3 = iconst 0
    v4 = icmp lt v2, v3
    brif v4, b1, b2
b1:
    v5 = iconst 3
    trap build_negative(v5, v2, v3)
b2:
    v6 = icmp gt v3, v2
    brif v6, b3, b4
b3:
    v7 = iconst 4
    trap build_negative(v7, v2, v3)
b4:
    v8 = icmp lt v1, v3
    brif v8, b5, b6
b5:
    v9 = iconst 5
    trap build_negative(v9, v1, v3)
b6:
    return v2
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "trap"), 1, "{out}");
    assert!(out.contains("iconst 5") && !out.contains("iconst 3") && !out.contains("iconst 4"), "{out}");
}

/// A condition a dominating branch decided: the second check of the same count (a fresh
/// comparison of the length of the same array against an equal constant) cannot fail once the
/// first passed, and the negation of a condition known true is false — so code reachable only
/// past a check that cannot pass goes, calls and all.
#[test]
fn conditions_decided_by_a_dominating_branch_fold() {
    let text = "\
fn @main(ptr, ptr) -> i64 {
b0(v0: ptr, v1: ptr):
    v2 = arraylen v0
    v3 = iconst 268435456
    v4 = icmp gt v2, v3
    brif v4, b1, b2
b1:
    v5 = iconst 3
    trap build_too_large(v5, v2, v3)
b2:
    v6 = arraylen v0
    v7 = iconst 268435456
    v8 = icmp le v6, v7
    brif v8, b4, b3
b3:
    v9 = iconst 4
    trap build_too_large(v9, v6, v7)
b4:
    v10 = arraylen v1
    v11 = icmp eq v6, v10
    v12 = not v11
    brif v12, b5, b8
b5:
    v13 = arraylen v0
    v14 = arraylen v1
    v15 = icmp ne v13, v14
    brif v15, b6, b7
b6:
    v16 = iconst 5
    trap zipwith_lengths(v16, v13, v14)
b7:
    v17 = call @expensive(v13)
    return v17
b8:
    return v2
}

fn @expensive(i64) -> i64 {
b0(v0: i64):
    v1 = iconst 3
    v2 = imul v0, v1
    v3 = imul v2, v0
    v4 = iadd v3, v2
    v5 = imul v4, v4
    v6 = iadd v5, v0
    v7 = imul v6, v2
    v8 = iadd v7, v5
    v9 = imul v8, v3
    v10 = iadd v9, v4
    v11 = imul v10, v6
    v12 = iadd v11, v7
    v13 = imul v12, v8
    v14 = iadd v13, v9
    v15 = imul v14, v10
    v16 = iadd v15, v11
    v17 = imul v16, v12
    v18 = iadd v17, v13
    v19 = imul v18, v14
    v20 = iadd v19, v15
    v21 = imul v20, v16
    v22 = iadd v21, v17
    v23 = imul v22, v18
    v24 = iadd v23, v19
    v25 = imul v24, v20
    v26 = iadd v25, v21
    v27 = imul v26, v22
    v28 = iadd v27, v23
    v29 = imul v28, v24
    v30 = iadd v29, v25
    v31 = imul v30, v26
    v32 = iadd v31, v27
    v33 = imul v32, v28
    v34 = iadd v33, v29
    v35 = imul v34, v30
    v36 = iadd v35, v31
    v37 = imul v36, v32
    v38 = iadd v37, v33
    v39 = imul v38, v34
    v40 = iadd v39, v35
    v41 = imul v40, v36
    v42 = iadd v41, v37
    v43 = imul v42, v38
    v44 = iadd v43, v39
    return v44
}
";
    let out = opt(text);
    // The first size check and the length check (now certain to fail) stay; the second size
    // check, the branch past the length check and what it called go.
    assert_eq!(count(&out, "main", "trap"), 2, "{out}");
    assert!(out.contains("iconst 3") && !out.contains("iconst 4"), "{out}");
    assert!(out.contains("trap zipwith_lengths"), "{out}");
    assert!(!out.contains("@expensive"), "{out}");
}

/// `guards::fold` alone, one pass, on `@main`: whether it decided anything, and the function.
fn fold_guards(text: &str) -> (bool, String) {
    let mut m = parse(text).unwrap_or_else(|e| panic!("{e:?}"));
    verify(&m).unwrap_or_else(|e| panic!("input does not verify: {e:?}"));
    let main = m.func_by_name("main").unwrap();
    let changed = super::guards::fold(&mut m.funcs[main]);
    verify(&m).unwrap_or_else(|e| panic!("output does not verify: {e:?}"));
    (changed, print(&m))
}

/// Every form of a decided condition, in one pass: the comparison recomputed from fresh
/// constants and lengths, its negation, its mirror image and their combination; `not` of a
/// decided value; conditions over integer arithmetic (`len - 1`) and over boolean arithmetic
/// with constants; a branch on a `not` (which decides its operand too); facts reaching a block
/// through its dominators, not only the block the branch targets.
#[test]
fn decided_conditions_cover_every_form() {
    let text = "\
fn @main(ptr, bool, i64) -> i64 {
b0(v0: ptr, v1: bool, v2: i64):
    v3 = arraylen v0
    v4 = iconst 10
    v5 = icmp gt v3, v4
    brif v5, b1, b2
b1:
    return v3
b2:
    v6 = arraylen v0
    v7 = iconst 10
    v8 = icmp gt v6, v7
    v9 = icmp le v6, v7
    v10 = icmp lt v7, v6
    v11 = icmp ge v7, v6
    v12 = not v8
    v13 = iconst 1
    v14 = isub v6, v13
    v15 = iconst 5
    v16 = icmp lt v14, v15
    brif v16, b3, b4
b3:
    jump b5
b5:
    v17 = arraylen v0
    v18 = iconst 1
    v19 = isub v17, v18
    v20 = iconst 5
    v21 = icmp lt v19, v20
    v22 = bconst true
    v23 = and v1, v22
    brif v23, b6, b7
b6:
    v24 = bconst true
    v25 = and v1, v24
    v26 = not v25
    return v2
b7:
    return v2
b4:
    v30 = not v1
    brif v30, b8, b9
b8:
    v31 = not v1
    v32 = not v31
    return v2
b9:
    return v2
}
";
    let (changed, out) = fold_guards(text);
    assert!(changed, "{out}");
    let decided: Vec<&str> = out.lines().map(str::trim).filter(|l| l.contains("= bconst")).collect();
    let want = [
        "v8 = bconst false",
        "v9 = bconst true",
        "v10 = bconst false",
        "v11 = bconst true",
        "v12 = bconst true",
        "v21 = bconst true",
        "v22 = bconst true",
        "v24 = bconst true",
        "v26 = bconst false",
        "v31 = bconst true",
        "v32 = bconst false",
    ];
    assert_eq!(decided, want, "{out}");
}

/// A pass that decides nothing says so (and changes nothing), branches or not.
#[test]
fn guards_that_decide_nothing_report_no_change() {
    for text in [
        "fn @main(i64) -> i64 {\nb0(v0: i64):\n    return v0\n}\n",
        "fn @main(i64) -> i64 {\nb0(v0: i64):\n    v1 = iconst 3\n    v2 = icmp lt v0, v1\n    brif v2, b1, b2\nb1:\n    return v0\nb2:\n    v3 = icmp lt v1, v0\n    return v1\n}\n",
    ] {
        let (changed, out) = fold_guards(text);
        assert!(!changed, "{out}");
        assert_eq!(out, print(&parse(text).unwrap()));
    }
}

/// A condition is known only where the edge that decided it dominates: after a join it is not.
#[test]
fn conditions_are_not_known_past_a_join() {
    let text = "\
fn @main(ptr, bool) -> i64 {
b0(v0: ptr, v1: bool):
    v2 = arraylen v0
    v3 = iconst 10
    brif v1, b1, b2
b1:
    v4 = icmp gt v2, v3
    brif v4, b3, b4
b3:
    v5 = iconst 3
    trap build_too_large(v5, v2, v3)
b4:
    jump b2
b2:
    v6 = icmp gt v2, v3
    brif v6, b5, b6
b5:
    v7 = iconst 4
    trap build_too_large(v7, v2, v3)
b6:
    return v2
}
";
    let out = opt(text);
    assert_eq!(count(&out, "main", "trap"), 2, "{out}");
}

/// A reverse loop as compiled reverse mode makes it: a counter `v3` against the length and an
/// index `v4`, both from 0 by 1, reading `x.[v4]`. The two are one induction variable, so the
/// index is below the length by the loop's own test and its bounds check goes.
const TWIN_COUNTERS: &str = "\
fn @main(ptr) -> f64 {
b0(v0: ptr):
    v1 = arraylen v0
    v2 = iconst 0
    v20 = fconst 0.0
    jump b1(v2, v2, v20)
b1(v3: i64, v4: i64, v5: f64):
    v6 = icmp lt v3, v1
    brif v6, b2, b3
b2:
    v7 = iconst 9
    v8 = arraylen v0
    boundscheck v4, v8, v7
    v9 = elemaddr v0, v4, 8
    v10 = load.f64 v9+0
    v11 = fadd v5, v10
    v12 = iconst 1
    v13 = iadd v4, v12
    v14 = iconst 1
    v15 = iadd v3, v14
    jump b1(v15, v13, v11)
b3:
    return v5
}
";

#[test]
fn counters_in_step_are_one_and_their_bounds_checks_go() {
    let out = opt(TWIN_COUNTERS);
    assert!(out.contains("b1(v1: i64, v2: f64, v3: ptr):"), "one counter is left:\n{out}");
    assert_eq!(count(&out, "main", "boundscheck"), 0, "{out}");
    // The element address is carried by the loop (strength reduction): `x`'s pointer is used
    // once, before the loop, and the pointer steps 8 bytes on the back edge.
    assert_eq!(count(&out, "main", "elemaddr v0,"), 1, "{out}");
    assert!(out.contains("v7 = elemaddr v0, v5, 8\n    jump b1(v5, v6, v7)"), "{out}");
    assert!(out.contains("load.f64 v3+0"), "{out}");
    assert!(out.contains("elemaddr v3, v13, 8\n    jump b1(v12, v10, v14)"), "{out}");
}

/// Counters that start apart, or step differently, are two values: the check stays.
#[test]
fn counters_out_of_step_stay_apart() {
    for (from, to) in [("jump b1(v2, v2, v20)", "jump b1(v2, v1, v20)"), ("v12 = iconst 1", "v12 = iconst 2")] {
        let out = opt(&TWIN_COUNTERS.replace(from, to));
        assert_eq!(count(&out, "main", "boundscheck"), 1, "{from} -> {to}:\n{out}");
        assert!(out.contains("(v1: i64, v2: i64, v3: f64"), "{from} -> {to}:\n{out}");
    }
}

/// The same loop with its back edge through a join (as after a compaction check), each way in
/// incrementing the counters itself: they reach the header as the join's parameters, which are
/// equal because every edge into the join passes equal values.
#[test]
fn counters_in_step_through_a_join_are_one() {
    let joined = TWIN_COUNTERS.replace("fn @main", "extern $flip(i64) -> bool\n\nfn @main").replace(
        "    jump b1(v15, v13, v11)\n",
        "    v16 = call $flip(v3)
    brif v16, b4, b5
b4:
    v17 = call $flip(v4)
    jump b6(v15, v13, v11)
b5:
    v23 = iconst 1
    v24 = iadd v3, v23
    v25 = iadd v4, v23
    jump b6(v24, v25, v11)
b6(v18: i64, v19: i64, v21: f64):
    v22 = call $flip(v19)
    jump b1(v18, v19, v21)
",
    );
    let out = opt(&joined);
    assert_eq!(count(&out, "main", "boundscheck"), 0, "{out}");
    assert!(out.contains("b1(v1: i64, v2: f64):"), "one counter is left:\n{out}");
    // A loop that calls a function (which may compact the arena) keeps its element addresses.
    assert_eq!(count(&out, "main", "elemaddr v0, v1, 8"), 1, "{out}");
}

/// `acc.[2 * c + i] <- x.[i]` in a loop: both element addresses are carried (the offset `2 * c`,
/// computed in the loop, is computed again before it), the bounds check of `acc` stays and
/// compares with the length read before the loop.
const OFFSET_LOOP: &str = "\
fn @main(ptr, ptr, i64) -> i64 {
b0(v0: ptr, v1: ptr, v2: i64):
    v3 = arraylen v0
    v4 = arraylen v1
    v5 = iconst 0
    jump b1(v5)
b1(v6: i64):
    v7 = icmp lt v6, v3
    brif v7, b2, b3
b2:
    v8 = elemaddr v0, v6, 8
    v9 = load.f64 v8+0
    v10 = iconst 2
    v11 = imul v2, v10
    v12 = iadd v11, v6
    v13 = arraylen v1
    v14 = iconst 3
    boundscheck v12, v13, v14
    v15 = elemaddr v1, v12, 8
    store v9, v15+0
    v16 = iconst 1
    v17 = iadd v6, v16
    jump b1(v17)
b3:
    return v4
}
";

#[test]
fn offset_element_addresses_are_carried_and_lengths_read_once() {
    let out = opt(OFFSET_LOOP);
    assert_eq!(count(&out, "main", "arraylen v1"), 1, "{out}");
    assert_eq!(count(&out, "main", "elemaddr v0,"), 1, "{out}");
    assert_eq!(count(&out, "main", "elemaddr v1,"), 1, "{out}");
    assert_eq!(count(&out, "main", "boundscheck"), 1, "{out}");
    let header = out.find("b1(").expect("the loop");
    let entry = &out[..header];
    assert!(entry.contains("imul v2,") && entry.contains("elemaddr v1,"), "the offset before the loop:\n{out}");
}

/// The simplifier alone, on `@main`: its output, verified.
fn simplified(text: &str) -> String {
    let mut m = parse(text).unwrap_or_else(|e| panic!("{e:?}"));
    verify(&m).unwrap_or_else(|e| panic!("input does not verify: {e:?}"));
    let facts = simplify::ModuleFacts::of(&m);
    let main = m.func_by_name("main").unwrap();
    simplify::simplify_function(&mut m, main, &facts);
    let out = print(&m);
    verify(&m).unwrap_or_else(|e| panic!("output does not verify: {e:?}\n{out}"));
    out
}

/// The parameters of block `b` in printed IR.
fn params_of(text: &str, b: &str) -> usize {
    let line = text.lines().find(|l| l.starts_with(&format!("{b}(")) || l == &format!("{b}:"));
    line.unwrap_or_else(|| panic!("no {b} in\n{text}")).matches(": ").count()
}

/// Two `f64` parameters of a loop, from `$A` and `$B` (constants the loop's entry block makes,
/// two values: the simplifier runs before redundancy elimination could merge them), each stepped
/// on the back edge by `$F(p)` and `$G(p)` (a one-operand operation), with an integer counter.
const FLOAT_TWINS: &str = "\
fn @main(i64) -> f64 {
b0(v0: i64):
    v1 = fconst $A
    v2 = fconst $B
    v3 = iconst 0
    jump b1(v3, v1, v2)
b1(v4: i64, v5: f64, v6: f64):
    v7 = icmp lt v4, v0
    brif v7, b2, b3
b2:
    v8 = $F v5
    v9 = $G v6
    v10 = iconst 1
    v11 = iadd v4, v10
    jump b1(v11, v8, v9)
b3:
    v12 = fdiv v5, v6
    return v12
}
";

/// Parameters in step are one value when their constants are the same number and their steps
/// the same operation; different constants (`0.0` and `-0.0` too: `1 / x` tells them apart) or
/// different operations keep them apart (the simplifier alone: the congruence of two constants and
/// of two one-operand operations).
#[test]
fn parameters_in_step_need_equal_constants_and_equal_operations() {
    let twins = |a: &str, b: &str, f: &str, g: &str| {
        let text = FLOAT_TWINS.replace("$A", a).replace("$B", b).replace("$F", f).replace("$G", g);
        let out = simplified(&text);
        params_of(&out, "b1")
    };
    assert_eq!(twins("1.0", "1.0", "fneg", "fneg"), 2, "equal constants, the same operation: one value");
    assert_eq!(twins("1.0", "1.0", "fsqrt", "fsqrt"), 2);
    assert_eq!(twins("1.0", "2.0", "fneg", "fneg"), 3, "different constants");
    assert_eq!(twins("0.0", "-0.0", "fneg", "fneg"), 3, "zeros of different signs");
    assert_eq!(twins("1.0", "1.0", "fneg", "fabs"), 3, "different operations");
    assert_eq!(twins("1.0", "1.0", "fabs", "fneg"), 3, "different operations");
}

/// Nested loops whose counters are in step in both: the outer pair enters the inner loop, and
/// the inner loop's pair comes back to the outer header. The inner loop steps its pair by one, or
/// swaps them (still equal): either way the congruence walk around the inner loop comes back to
/// where it started, and must give up after a few steps rather than recurse for ever; the inner
/// pair is proved first, then the outer one.
#[test]
fn counters_in_step_across_nested_loops_are_one() {
    let text = "\
fn @main(i64) -> i64 {
b0(v0: i64):
    v1 = iconst 0
    v2 = iconst 0
    jump b1(v1, v2)
b1(v3: i64, v4: i64):
    v5 = icmp lt v3, v0
    brif v5, b2(v3, v4), b4
b2(v6: i64, v7: i64):
    v8 = icmp lt v6, v0
    brif v8, b3, b1(v6, v7)
b3:
    v9 = iconst 1
    v10 = iadd v6, v9
    v11 = iadd v7, v9
    jump b2(v10, v11)
b4:
    v12 = isub v3, v4
    return v12
}
";
    let out = simplified(text);
    assert_eq!(params_of(&out, "b1"), 1, "{out}");
    assert_eq!(params_of(&out, "b2"), 1, "{out}");
    let swapped = simplified(&text.replace("jump b2(v10, v11)", "jump b2(v7, v6)"));
    // Nothing changes in the loops at all: every parameter is the constant 0.
    assert_eq!(params_of(&swapped, "b1"), 0, "{swapped}");
    assert_eq!(params_of(&swapped, "b2"), 0, "{swapped}");
}

/// The pointers the loop of header `h` carries (its parameters of type `ptr`).
fn carried_at(out: &str, h: &str) -> usize {
    let line = out.lines().find(|l| l.starts_with(&format!("{h}("))).unwrap_or_else(|| panic!("no {h} in\n{out}"));
    line.matches(": ptr").count()
}

/// The pointers loop `b1` carries.
fn carried(out: &str) -> usize {
    carried_at(out, "b1")
}

/// Only `elemaddr a, c + i, 8` with `c` computed from values outside the loop (integer
/// arithmetic at most three operations deep) and `i` a counter is carried, the counter on
/// either side of the `+`: an index that is not the counter plus an invariant keeps its address
/// in the loop (`x`'s own address is carried in every case).
#[test]
fn only_invariant_offsets_plus_a_counter_are_carried() {
    let index = |ops: &str| OFFSET_LOOP.replace("    v12 = iadd v11, v6\n", ops);
    let cases: &[(&str, &str, usize)] = &[
        ("offset + counter", "    v12 = iadd v11, v6\n", 2),
        ("counter + offset", "    v12 = iadd v6, v11\n", 2),
        ("invariant + invariant, no counter", "    v12 = iadd v11, v2\n", 1),
        ("invariant + invariant, no counter", "    v12 = iadd v2, v11\n", 1),
        ("i * i + counter", "    v18 = imul v6, v6\n    v12 = iadd v18, v6\n", 1),
        ("counter + i * i", "    v18 = imul v6, v6\n    v12 = iadd v6, v18\n", 1),
        ("c * (i * i) + counter", "    v18 = imul v6, v6\n    v19 = imul v2, v18\n    v12 = iadd v19, v6\n", 1),
        ("(i * i) * c + counter", "    v18 = imul v6, v6\n    v19 = imul v18, v2\n    v12 = iadd v19, v6\n", 1),
        // Three operations deep, on either side: carried (the offset is computed before the loop).
        (
            "((c + c) - c) * c + counter",
            "    v18 = iadd v2, v2\n    v19 = isub v18, v2\n    v20 = imul v19, v2\n    v12 = iadd v20, v6\n",
            2,
        ),
        (
            "c * (c - (c + c)) + counter",
            "    v18 = iadd v2, v2\n    v19 = isub v2, v18\n    v20 = imul v2, v19\n    v12 = iadd v20, v6\n",
            2,
        ),
        // Four deep: not (the bound keeps what is computed again before the loop small).
        (
            "(((c + c) - c) * c) + c + counter",
            "    v18 = iadd v2, v2\n    v19 = isub v18, v2\n    v20 = imul v19, v2\n    v21 = iadd v20, v2\n    v12 = iadd v21, v6\n",
            1,
        ),
        (
            "c + (c * (c - (c + c))) + counter",
            "    v18 = iadd v2, v2\n    v19 = isub v2, v18\n    v20 = imul v2, v19\n    v21 = iadd v2, v20\n    v12 = iadd v21, v6\n",
            1,
        ),
    ];
    for &(what, ops, ptrs) in cases {
        let out = opt(&index(ops));
        assert_eq!(carried(&out), ptrs, "{what}:\n{out}");
    }
}

/// A loop entered or continued by two edges of one branch (a `brif` whose both targets are the
/// header, with different arguments) has no one first index or next address: nothing is carried.
#[test]
fn loops_with_two_edges_from_one_block_carry_nothing() {
    let entered = OFFSET_LOOP.replace(
        "    v5 = iconst 0\n    jump b1(v5)\n",
        "    v5 = iconst 0\n    v30 = iconst 1\n    v31 = icmp lt v2, v5\n    brif v31, b1(v5), b1(v30)\n",
    );
    let continued = OFFSET_LOOP.replace(
        "    jump b1(v17)\n",
        "    v30 = iconst 2\n    v31 = iadd v6, v30\n    v32 = icmp lt v2, v5\n    brif v32, b1(v17), b1(v31)\n",
    );
    for text in [entered, continued] {
        let out = opt(&text);
        assert_eq!(carried(&out), 0, "{out}");
        assert_eq!(count(&out, "main", "elemaddr v0,"), 1, "{out}");
    }
}

/// An array this function made before the loop (an instruction's result, not a parameter) is
/// carried like a parameter. Its length, read only in the loop, is read once before it: the
/// simplifier already knows a `newarray`'s length; of an array chosen between two `newarray`s
/// (a block parameter) it does not, and the length is read before the loop because the array is
/// certainly one (`$CHOICE` on the `brif`: `b4` makes both). The loop's header is `b4` once
/// the blocks are renumbered. The loop also checks an index against the length of `x` (a
/// parameter): the read before the choice, two dominators up from the header, is that length.
#[test]
fn arrays_made_before_the_loop_are_carried() {
    let text = "\
fn @main(ptr, i64, i64, bool) -> ptr {
b0(v0: ptr, v1: i64, v2: i64, v20: bool):
    v3 = arraylen v0
    brif v20, b4, b5
b4:
    v21 = newarray v1, 8
    jump b6(v21)
b5:
    v22 = newarray v2, 8
    jump b6($CHOICE)
b6(v4: ptr):
    v5 = iconst 0
    jump b1(v5)
b1(v6: i64):
    v7 = icmp lt v6, v3
    brif v7, b2, b3
b2:
    v10 = iadd v2, v6
    v30 = arraylen v0
    v31 = iconst 4
    boundscheck v10, v30, v31
    v8 = elemaddr v0, v6, 8
    v9 = load.f64 v8+0
    v11 = arraylen v4
    v12 = iconst 3
    boundscheck v10, v11, v12
    v13 = elemaddr v4, v10, 8
    store v9, v13+0
    v14 = iconst 1
    v15 = iadd v6, v14
    jump b1(v15)
b3:
    return v4
}
";
    let out = opt(&text.replace("$CHOICE", "v22"));
    assert_eq!(carried_at(&out, "b4"), 2, "{out}");
    let header = out.find("\nb4(").expect("the loop");
    assert_eq!(out[..header].matches("arraylen").count(), 2, "both lengths before the loop:\n{out}");
    assert_eq!(out[header..].matches("arraylen").count(), 0, "{out}");
    // One of the two is a parameter of `main`, which may be any pointer: its length stays where
    // it was read (the addresses are carried all the same).
    let out = opt(&text.replace("$CHOICE", "v0"));
    assert_eq!(carried_at(&out, "b4"), 2, "{out}");
    let header = out.find("\nb4(").expect("the loop");
    assert_eq!(out[header..].matches("arraylen").count(), 1, "{out}");
}

/// A loop that calls anything but a pure support function carries nothing: a call may compact
/// the arena, which moves arrays, and a carried pointer would then point into the old copy. A
/// call of `exp` keeps the loop's pointers carried.
#[test]
fn loops_that_call_carry_nothing_but_around_pure_support_functions() {
    let down = "
fn @down(i64) -> i64 {
b0(v0: i64):
    v1 = iconst 0
    v2 = icmp le v0, v1
    brif v2, b1, b2
b1:
    return v1
b2:
    v3 = iconst 1
    v4 = isub v0, v3
    v5 = call @down(v4)
    return v5
}
";
    let cases: &[(&str, &str, &str, usize)] = &[
        ("extern $nabla_exp(f64) -> f64\n\n", "    v40 = call $nabla_exp(v9)\n    store v40, v15+8\n", "", 2),
        ("extern $poke(ptr) -> ()\n\n", "    call $poke(v0)\n", "", 0),
        ("", "    v40 = call @down(v6)\n    store v40, v15+8\n", down, 0),
    ];
    for &(decl, call, callee, ptrs) in cases {
        let text = format!(
            "{decl}{}{callee}",
            OFFSET_LOOP.replace("    v16 = iconst 1\n", &format!("{call}    v16 = iconst 1\n"))
        );
        let out = opt(&text);
        assert_eq!(count(&out, "main", "call "), 1, "{out}");
        assert_eq!(carried(&out), ptrs, "{out}");
    }
}

/// Only a parameter stepped by one on the back edge (`i + 1` or `1 + i`) is a counter: a second
/// index `j` from `v2` stepped by two, or set to another value plus one, does not step its
/// element address by one element, which stays in the loop (`x`'s, indexed by the counter, is
/// carried in every case).
#[test]
fn only_parameters_stepped_by_one_are_counters() {
    let text = "\
fn @main(ptr, ptr, i64) -> i64 {
b0(v0: ptr, v1: ptr, v2: i64):
    v3 = arraylen v0
    v4 = arraylen v1
    v5 = iconst 0
    jump b1(v5, v2)
b1(v6: i64, v20: i64):
    v7 = icmp lt v6, v3
    brif v7, b2, b3
b2:
    v8 = elemaddr v0, v6, 8
    v9 = load.f64 v8+0
    v14 = iconst 3
    boundscheck v20, v4, v14
    v15 = elemaddr v1, v20, 8
    store v9, v15+0
    v16 = iconst 1
    v17 = iadd v6, v16
$STEP    jump b1(v17, v21)
b3:
    return v4
}
";
    let cases: &[(&str, &str, usize)] = &[
        ("j + 1", "    v21 = iadd v20, v16\n", 2),
        ("1 + j", "    v21 = iadd v16, v20\n", 2),
        ("j + 2", "    v22 = iconst 2\n    v21 = iadd v20, v22\n", 1),
        ("2 + j", "    v22 = iconst 2\n    v21 = iadd v22, v20\n", 1),
        ("2 * i + 1", "    v22 = iadd v6, v6\n    v21 = iadd v22, v16\n", 1),
        ("1 + 2 * i", "    v22 = iadd v6, v6\n    v21 = iadd v16, v22\n", 1),
        ("j + j", "    v21 = iadd v20, v20\n", 1),
    ];
    for &(what, step, ptrs) in cases {
        let out = opt(&text.replace("$STEP", step));
        assert_eq!(carried(&out), ptrs, "{what}:\n{out}");
    }
}

/// A loop tested at its bottom (the header is its own latch), entered and continued by `brif`s
/// or by `switch`es whose other target leaves: the carried pointers are passed on the edges into
/// the header only.
#[test]
fn pointers_are_passed_on_branches_and_switches_into_the_loop() {
    let text = "\
tag t0 = @k env()
tag t1 = @k env()

fn @main(ptr, ptr, i64) -> i64 {
b0(v0: ptr, v1: ptr, v2: i64):
    v3 = arraylen v0
    v5 = iconst 0
    v6 = icmp lt v5, v3
    $ENTER
b1(v7: i64):
    v8 = elemaddr v0, v7, 8
    v9 = load.f64 v8+0
    v10 = elemaddr v1, v7, 8
    store v9, v10+0
    v11 = iconst 1
    v12 = iadd v7, v11
    v13 = icmp lt v12, v3
    $CONTINUE
b3:
    return v3
}

fn @k(ptr) -> i64 {
b0(v0: ptr):
    v1 = iconst 0
    return v1
}
";
    for (enter, cont) in [
        ("brif v6, b1(v5), b3", "brif v13, b1(v12), b3"),
        ("brif v6, b3, b1(v5)", "brif v13, b3, b1(v12)"),
        ("switch v2, [t0: b3, t1: b1(v5)]", "switch v2, [t0: b1(v12), t1: b3]"),
    ] {
        let out = opt(&text.replace("$ENTER", enter).replace("$CONTINUE", cont));
        assert_eq!(carried(&out), 2, "{enter}; {cont}:\n{out}");
        assert_eq!(count(&out, "main", "elemaddr v0,"), 1, "{out}");
    }
}

/// Inside the region between the inner map's creation and its addition, the accumulator may
/// receive other `intGroup` additions (of another map here) and still be fused into; any other
/// use there keeps the inner map built: an addition in another group (kind 1, at site 0), the
/// accumulator added into another map, or a call of another function with as many arguments as
/// an addition or a keyed addition.
#[test]
fn map_accumulators_fuse_only_around_other_int_additions() {
    let fused = |extra: &str| {
        let text = nested_map_fold("v1", extra)
            .replace("extern $nabla_map_len(ptr) -> i64\n", "extern $nabla_map_len(ptr) -> i64\nextern $poke5(ptr, ptr, i64, i64, i64) -> ()\nextern $poke6(ptr, ptr, ptr, i64, i64, i64) -> ()\n");
        count(&opt(&text), "main", "map_new") == 1
    };
    assert!(fused("    v32 = iconst 0\n    v33 = iconst 7\n    call $nabla_map_add_scaled(v2, v0, v1, v32, v33)\n"));
    assert!(!fused("    v32 = iconst 0\n    v34 = iconst 1\n    call $nabla_map_add_scaled(v2, v0, v1, v34, v32)\n"));
    assert!(!fused("    v32 = iconst 0\n    v33 = iconst 7\n    call $nabla_map_add_scaled(v0, v2, v1, v32, v33)\n"));
    assert!(!fused("    v32 = iconst 0\n    call $poke5(v2, v0, v1, v32, v32)\n"));
    assert!(!fused("    v32 = iconst 0\n    call $poke6(v2, v0, v0, v1, v32, v32)\n"));
}

/// The accumulator's scale, a value computed in the loop, must be available at each keyed
/// addition it moves into: computed before them in their block, fused; after them, not. Computed
/// late in the entry block (which dominates them), fused too.
#[test]
fn map_accumulators_fuse_only_where_the_scale_is_available() {
    let text = "\
extern fallible $nabla_map_new(i64, i64) -> ptr
extern fallible $nabla_map_entries(ptr) -> ptr
extern fallible $nabla_map_add_scaled(ptr, ptr, i64, i64, i64) -> ()
extern fallible $nabla_map_add_scaled_key(ptr, ptr, ptr, i64, i64, i64) -> ()

fn @main(ptr, i64) -> ptr {
b0(v0: ptr, v20: i64):
    v1 = iconst 1
    v2 = call $nabla_map_new(v1, v1)
    v3 = call $nabla_map_entries(v0)
    v4 = arraylen v3
    v5 = iconst 0
    v18 = alloc 8
    v19 = alloc 8
    v21 = iconst 0
    v22 = iconst 5
$ENTRY    jump b1(v5)
b1(v6: i64):
    v7 = icmp lt v6, v4
    brif v7, b2, b3
b2:
$BEFORE    v10 = call $nabla_map_new(v1, v1)
    call $nabla_map_add_scaled_key(v10, v18, v19, v1, v21, v22)
$AFTER    v25 = iconst 6
    call $nabla_map_add_scaled(v2, v10, v30, v21, v25)
    v26 = iadd v6, v1
    jump b1(v26)
b3:
    return v2
}
";
    let scale = "    v30 = imul v6, v20\n";
    let news = |entry: &str, before: &str, after: &str| {
        let out = opt(&text.replace("$ENTRY", entry).replace("$BEFORE", before).replace("$AFTER", after));
        count(&out, "main", "map_new")
    };
    assert_eq!(news("", scale, ""), 1, "computed before the keyed addition");
    assert_eq!(news("", "", scale), 2, "computed after it");
    assert_eq!(news("    v30 = imul v20, v20\n", "", ""), 1, "computed in the entry block");
}

/// Outside the region, an `intGroup` addition into the accumulator that can reach the inner map's
/// creation (before the loop) does not stop the fusion, nor does a read after the loop (it cannot
/// reach the creation); a store of the accumulator's pointer
/// that can reach it does, also in one block with no loop (an alias could read the accumulator
/// between the creation and the addition).
#[test]
fn map_accumulators_fuse_around_earlier_additions_not_earlier_aliases() {
    let earlier = nested_map_fold("v1", "").replace(
        "    v5 = iconst 0\n",
        "    v5 = iconst 0\n    v41 = iconst 9\n    call $nabla_map_add_scaled(v2, v0, v1, v5, v41)\n",
    );
    assert_eq!(count(&opt(&earlier), "main", "map_new"), 1);
    // Read after the loop, where the creation cannot be reached from: fused.
    let later = nested_map_fold("v1", "").replace(
        "b3:\n    return v2\n",
        "b3:\n    v50 = call $nabla_map_len(v2)\n    v51 = icmp lt v50, v1\n    brif v51, b9, b10\nb9:\n    return v2\nb10:\n    return v0\n",
    );
    assert!(later.contains("b10:"));
    assert_eq!(count(&opt(&later), "main", "map_new"), 1);
    let straight = "\
extern fallible $nabla_map_new(i64, i64) -> ptr
extern fallible $nabla_map_add_scaled(ptr, ptr, i64, i64, i64) -> ()
extern fallible $nabla_map_add_scaled_key(ptr, ptr, ptr, i64, i64, i64) -> ()

fn @main(ptr) -> ptr {
b0(v0: ptr):
    v1 = iconst 1
    v2 = call $nabla_map_new(v1, v1)
$ALIAS    v10 = call $nabla_map_new(v1, v1)
    v18 = alloc 8
    store v1, v18+0
    v19 = alloc 8
    store v1, v19+0
    v21 = iconst 0
    v22 = iconst 5
    call $nabla_map_add_scaled_key(v10, v18, v19, v1, v21, v22)
    v25 = iconst 6
    call $nabla_map_add_scaled(v2, v10, v1, v21, v25)
    return v2
}
";
    assert_eq!(count(&opt(&straight.replace("$ALIAS", "")), "main", "map_new"), 1);
    assert_eq!(count(&opt(&straight.replace("$ALIAS", "    store v2, v0+0\n")), "main", "map_new"), 2);
}

/// Reverse mode's fresh accumulator: `a = newarray n` filled with `+0.0`, then a loop over
/// `0 ≤ i < n` doing `a.[i] <- a.[i] + 2·x.[i]` (`zeros'` then `accAxpy'`), then `a` returned.
const FRESH_ACCUMULATOR: &str = "\
fn @main(ptr) -> ptr {
b0(v0: ptr):
    v1 = arraylen v0
    v2 = newarray v1, 8
    v3 = fconst 0.0
    v4 = iconst 0
    jump b1(v4)
b1(v5: i64):
    v6 = icmp lt v5, v1
    brif v6, b2, b3
b2:
    v7 = elemaddr v2, v5, 8
    store v3, v7+0
    v8 = iconst 1
    v9 = iadd v5, v8
    jump b1(v9)
b3:
    v10 = fconst 2.0
    v11 = iconst 0
    jump b4(v11)
b4(v12: i64):
    v13 = icmp lt v12, v1
    brif v13, b5, b6
b5:
    v14 = elemaddr v2, v12, 8
    v15 = load.f64 v14+0
    v16 = elemaddr v0, v12, 8
    v17 = load.f64 v16+0
    v18 = fmul v10, v17
    v19 = fadd v15, v18
    store v19, v14+0
    v20 = iconst 1
    v21 = iadd v12, v20
    jump b4(v21)
b6:
    return v2
}
";

/// The fill is not run and the loop adds to `+0.0` instead of the element it would have read
/// (the addition stays: `+0.0 + -0.0` is `+0.0`).
#[test]
fn fresh_accumulators_are_written_not_filled_and_added_to() {
    let out = opt(FRESH_ACCUMULATOR);
    assert_eq!(count(&out, "main", "store"), 1, "one store, the loop's:\n{out}");
    assert_eq!(count(&out, "main", "load.f64"), 1, "x's element only:\n{out}");
    assert_eq!(count(&out, "main", "fadd"), 1, "{out}");
    assert_eq!(count(&out, "main", "fconst 0.0"), 1, "{out}");
}

/// Where the first loop could read an element it wrote, or an element the fill wrote that no
/// one writes again, or anything reads the array between fill and loop, the fill stays.
#[test]
fn fills_that_are_read_stay() {
    let keeps = |from: &str, to: &str| {
        let src = FRESH_ACCUMULATOR.replace(from, to);
        assert_ne!(src, FRESH_ACCUMULATOR, "{from}");
        let src = if src.contains("$peek") { format!("extern $peek(ptr) -> f64\n\n{src}") } else { src };
        let out = opt(&src);
        assert!(count(&out, "main", "store") >= 2, "{from} -> {to}:\n{out}");
        assert!(count(&out, "main", "load.f64") >= 2, "{from} -> {to}:\n{out}");
    };
    // Another index than the loop's own (the last element first).
    keeps(
        "    v14 = elemaddr v2, v12, 8\n",
        "    v30 = isub v1, v12\n    v32 = iconst 1\n    v31 = isub v30, v32\n    v14 = elemaddr v2, v31, 8\n",
    );
    // A loop from 1: element 0 keeps the fill's zero.
    keeps("    v11 = iconst 0\n", "    v11 = iconst 1\n");
    // A loop to a different bound.
    keeps("    v13 = icmp lt v12, v1\n", "    v30 = iconst 3\n    v13 = icmp lt v12, v30\n");
    // Element 0 read at every iteration too.
    keeps(
        "    v20 = iconst 1\n",
        "    v30 = elemaddr v2, v11, 8\n    v33 = load.f64 v30+0\n    store v33, v16+0\n    v20 = iconst 1\n",
    );
    // The array passed to a function between the fill and the loop.
    keeps("    v10 = fconst 2.0\n", "    v30 = call $peek(v2)\n    v10 = fconst 2.0\n");
    // A loop that can leave early: later elements keep the fill's zero.
    keeps(
        "    v20 = iconst 1\n    v21 = iadd v12, v20\n    jump b4(v21)\n",
        "    v20 = iconst 1\n    v21 = iadd v12, v20\n    v30 = fcmp gt v17, v10\n    brif v30, b6, b7\nb7:\n    jump b4(v21)\n",
    );
}

/// `fresh` across checks: between the fill and the loop a branch to a block that only traps (a
/// bounds or length check, the trap on either side) is passed, and so is a trap the loop may leave
/// to; a trap block that reads the array, a side that returns the array, a fill that stores
/// anything but `+0.0` or also stores elsewhere, an array of another length, or an array the block
/// that made it passes to a call keep the fill.
#[test]
fn fresh_accumulators_pass_checks_but_nothing_else() {
    let fires = |src: &str| {
        let src = if src.contains("$peek") { format!("extern $peek(ptr) -> f64\n\n{src}") } else { src.to_string() };
        let out = opt(&src);
        count(&out, "main", "store") == 1
    };
    let checked = |cond: &str, trap_side_first: bool, trap_body: &str| {
        let (t, e) = if trap_side_first { ("b7", "b8") } else { ("b8", "b7") };
        let c = if trap_side_first { format!("icmp lt {cond}") } else { format!("icmp ge {cond}") };
        FRESH_ACCUMULATOR.replace(
            "    v11 = iconst 0\n    jump b4(v11)\n",
            &format!(
                "    v11 = iconst 0\n    v40 = iconst 3\n    v41 = {c}\n    brif v41, {t}, {e}\nb7:\n{trap_body}    v42 = iconst 9\n    trap unreachable(v42, v40, v40)\nb8:\n    jump b4(v11)\n"
            ),
        )
    };
    assert!(fires(FRESH_ACCUMULATOR));
    // A check whose trap is on either side is passed.
    assert!(fires(&checked("v1, v40", true, "")));
    assert!(fires(&checked("v1, v40", false, "")));
    // A trap block that reads the array first: the fill stays.
    let reads = |first: bool| {
        checked("v1, v40", first, "    v43 = iconst 0\n    v44 = elemaddr v2, v43, 8\n    v46 = load.i64 v44+0\n")
            .replace("trap unreachable(v42, v40, v40)", "trap unreachable(v42, v46, v40)")
    };
    assert!(!fires(&reads(true)));
    assert!(!fires(&reads(false)));
    // A side that returns the array instead of trapping: not passed.
    let two_ways = checked("v1, v40", true, "")
        .replace("    v42 = iconst 9\n    trap unreachable(v42, v40, v40)\n", "    return v2\n");
    assert!(!fires(&two_ways));
    // The loop may leave to a trap (a check in its body): still written once per element.
    let body_check = FRESH_ACCUMULATOR.replace(
        "    v20 = iconst 1\n    v21 = iadd v12, v20\n    jump b4(v21)\n",
        "    v20 = iconst 1\n    v21 = iadd v12, v20\n    v30 = fcmp gt v17, v10\n    brif v30, b7, b8\nb7:\n    v31 = iconst 9\n    trap unreachable(v31, v20, v20)\nb8:\n    jump b4(v21)\n",
    );
    assert!(fires(&body_check));
    // The fill stores something else, or stores twice.
    assert!(!fires(&FRESH_ACCUMULATOR.replace("    v3 = fconst 0.0\n", "    v3 = fconst 1.0\n")));
    assert!(!fires(
        &FRESH_ACCUMULATOR
            .replace("    store v3, v7+0\n", "    store v3, v7+0\n    v50 = elemaddr v0, v5, 8\n    store v3, v50+0\n")
    ));
    // An array made of another width, or touched again after it is made.
    assert!(!fires(&FRESH_ACCUMULATOR.replace(
        "    v2 = newarray v1, 8\n",
        "    v51 = iconst 2\n    v52 = iadd v1, v51\n    v2 = newarray v52, 8\n"
    )));
    assert!(!fires(&FRESH_ACCUMULATOR.replace(
        "    v4 = iconst 0\n    jump b1(v4)\n",
        "    v4 = iconst 0\n    v53 = call $peek(v2)\n    jump b1(v4)\n"
    )));
    // A fill whose header has an effect (a call that reads the array at each test): not a fill.
    assert!(!fires(
        &FRESH_ACCUMULATOR.replace("    v6 = icmp lt v5, v1\n", "    v54 = call $peek(v2)\n    v6 = icmp lt v5, v1\n")
    ));
}

/// `fresh` refuses every shape its argument does not cover (each found by mutating `find`):
/// a fill that can trap or stores elsewhere too; an array made in another block (it may have
/// escaped there) or touched right after it is made; a loop that writes its element only on
/// some iterations, reads it twice, reads it after writing it, writes it twice around the read,
/// lets its address escape, or leaves early through a block that does not trap. Two checks in a
/// row between the fill and the loop are passed.
#[test]
fn fresh_accumulators_refuse_what_the_argument_does_not_cover() {
    let fires = |src: &str| {
        let mut ext = String::new();
        for (name, sig) in [("$peek", "(ptr) -> f64"), ("$tick", "() -> i64")] {
            if src.contains(name) {
                ext.push_str(&format!("extern {name}{sig}\n"));
            }
        }
        // The fill's loop goes with its stores (no other pass removes a store here).
        let out = opt(&format!("{ext}\n{src}"));
        count(&out, "main", "store") < count(src, "main", "store")
    };
    let edit = |pairs: &[(&str, &str)]| {
        let mut s = FRESH_ACCUMULATOR.to_string();
        for (from, to) in pairs {
            assert!(s.contains(from), "{from}");
            s = s.replacen(from, to, 1);
        }
        s
    };
    let trap =
        |b: &str, code: i64| format!("{b}:\n    v9{code} = iconst {code}\n    trap unreachable(v9{code}, v1, v1)\n");
    // A fill with a check in its body: the fill can trap, so it is not a fill.
    let fill_check = edit(&[(
        "b2:\n    v7 = elemaddr v2, v5, 8\n",
        &format!(
            "b2:\n    v60 = iconst 7\n    v61 = icmp lt v5, v60\n    brif v61, b9, b10\n{}b9:\n    v7 = elemaddr v2, v5, 8\n",
            trap("b10", 1)
        ),
    )]);
    assert!(!fires(&fill_check));
    // A fill that stores into another array before its zero.
    assert!(!fires(&edit(&[(
        "    store v3, v7+0\n",
        "    v50 = elemaddr v0, v5, 8\n    store v3, v50+0\n    store v3, v7+0\n"
    )])));
    // An array made in an earlier block, whose address is stored there (it escapes), and a call
    // between the fill and the loop that could read it through that copy.
    let made_earlier = edit(&[
        (
            "    v2 = newarray v1, 8\n",
            "    v2 = newarray v1, 8\n    v62 = alloc 8\n    store v2, v62+0\n    v63 = iconst 5\n    v64 = icmp lt v1, v63\n    brif v64, b9, b10\nb10:\n    v65 = call $tick()\n",
        ),
        ("b3:\n", &format!("{}b3:\n    v66 = call $peek(v62)\n", trap("b9", 2))),
    ]);
    assert!(!fires(&made_earlier));
    // An array made by the first instruction of its block and passed to a call right after.
    let first = FRESH_ACCUMULATOR
        .replace(
            "fn @main(ptr) -> ptr {\nb0(v0: ptr):\n    v1 = arraylen v0\n",
            "fn @main(ptr, i64) -> ptr {\nb0(v0: ptr, v1: i64):\n",
        )
        .replace("    v2 = newarray v1, 8\n", "    v2 = newarray v1, 8\n    v53 = call $peek(v2)\n");
    assert!(first.starts_with("fn @main(ptr, i64)") && first.contains("$peek"));
    assert!(!fires(&first));
    assert!(fires(&first.replace("    v53 = call $peek(v2)\n", "")));
    // Two checks in a row between the fill and the loop.
    assert!(fires(&edit(&[(
        "    v11 = iconst 0\n    jump b4(v11)\n",
        &format!(
            "    v11 = iconst 0\n    v40 = iconst 3\n    v41 = icmp ge v1, v40\n    brif v41, b7, b8\n{}b8:\n    v43 = iconst 4\n    v44 = icmp ge v1, v43\n    brif v44, b9, b10\n{}b10:\n    jump b4(v11)\n",
            trap("b7", 3),
            trap("b9", 4)
        ),
    )])));
    // The loop writes its element only when a condition holds.
    assert!(!fires(&edit(&[
        ("    v14 = elemaddr v2, v12, 8\n", "    v16 = elemaddr v0, v12, 8\n    v17 = load.f64 v16+0\n    v70 = fcmp gt v17, v10\n    brif v70, b7, b8\nb7:\n    v14 = elemaddr v2, v12, 8\n"),
        ("    v16 = elemaddr v0, v12, 8\n    v17 = load.f64 v16+0\n    v18", "    v18"),
        ("    store v19, v14+0\n", "    store v19, v14+0\n    jump b8\nb8:\n"),
    ])));
    // The element read twice before it is written (a call between the reads, so they stay two).
    assert!(!fires(&edit(&[
        ("    v15 = load.f64 v14+0\n", "    v15 = load.f64 v14+0\n    v78 = call $tick()\n    v71 = load.f64 v14+0\n"),
        ("    v19 = fadd v15, v18\n", "    v72 = fadd v15, v71\n    v19 = fadd v72, v18\n"),
    ])));
    // The element read after it is written (then written again, or not; a call between the
    // write and the read, so the read stays).
    let write_first = edit(&[(
        "    v15 = load.f64 v14+0\n",
        "    store v10, v14+0\n    v78 = call $tick()\n    v15 = load.f64 v14+0\n",
    )]);
    assert!(!fires(&write_first));
    assert!(!fires(&write_first.replace("    store v19, v14+0\n", "    store v19, v16+0\n")));
    // The element's address stored where a call can read the element through it.
    assert!(!fires(&edit(&[(
        "    v19 = fadd v15, v18\n",
        "    v73 = alloc 8\n    store v14, v73+0\n    v75 = call $peek(v73)\n    v76 = fadd v75, v18\n    v19 = fadd v15, v76\n",
    )])));
    // A loop that may leave early through a block that does not trap (and then returns the
    // array, its later elements never written).
    assert!(!fires(&edit(&[(
        "    v20 = iconst 1\n    v21 = iadd v12, v20\n    jump b4(v21)\n",
        "    v20 = iconst 1\n    v21 = iadd v12, v20\n    v30 = fcmp gt v17, v10\n    brif v30, b7, b8\nb7:\n    v31 = call $tick()\n    jump b6\nb8:\n    jump b4(v21)\n",
    )])));
}

/// A matrix-vector product, `out.[j] = Σ_k w.[j·n + k] · x.[k]` (`n = len x`), each row's sum
/// one addition chain; `w`'s element is checked, `x`'s is not.
const ROWS_OF_SUMS: &str = "\
fn @main(ptr, ptr, i64) -> ptr {
b0(v0: ptr, v1: ptr, v2: i64):
    v3 = arraylen v1
    v4 = arraylen v0
    v5 = newarray v2, 8
    v6 = iconst 0
    jump b1(v6)
b1(v7: i64):
    v8 = icmp lt v7, v2
    brif v8, b2, b6
b2:
    v9 = imul v7, v3
    v10 = fconst 0.0
    v11 = iconst 0
    jump b3(v11, v10)
b3(v12: i64, v13: f64):
    v14 = icmp lt v12, v3
    brif v14, b4, b5
b4:
    v15 = iadd v9, v12
    v16 = iconst 7
    boundscheck v15, v4, v16
    v17 = elemaddr v0, v15, 8
    v18 = load.f64 v17+0
    v19 = elemaddr v1, v12, 8
    v20 = load.f64 v19+0
    v21 = fmul v18, v20
    v22 = fadd v13, v21
    v23 = iconst 1
    v24 = iadd v12, v23
    jump b3(v24, v22)
b5:
    v25 = elemaddr v5, v7, 8
    store v13, v25+0
    v26 = iconst 1
    v27 = iadd v7, v26
    jump b1(v27)
b6:
    return v5
}
";

/// Unroll-and-jam: four rows' sums in one inner loop (four chains, `x`'s element loaded once for
/// all four), the original loop kept for the rows left over and for a row whose check would
/// fail (the one check left is its).
#[test]
fn rows_of_sums_are_jammed_four_at_a_time() {
    let out = opt(ROWS_OF_SUMS);
    assert_eq!(count(&out, "main", "fadd"), 5, "four jammed chains and the original:\n{out}");
    assert_eq!(count(&out, "main", "fmul"), 5, "{out}");
    assert_eq!(count(&out, "main", "load.f64"), 5 + 2, "four rows of w, one x shared; the original's two:\n{out}");
    assert_eq!(count(&out, "main", "boundscheck"), 1, "the original's check only:\n{out}");
    assert_eq!(count(&out, "main", "store"), 5, "each row's result, in order, and the original's:\n{out}");
}

/// Where moving a later row's sum before an earlier row's store could change what is read or
/// written, or the inner loop does something a row's test cannot decide in advance, the loop
/// stays as it is.
#[test]
fn rows_that_cannot_move_are_not_jammed() {
    let stays = |from: &str, to: &str| {
        let src = ROWS_OF_SUMS.replace(from, to);
        assert_ne!(src, ROWS_OF_SUMS, "{from}");
        let out = opt(&src);
        assert_eq!(count(&out, "main", "fadd"), 1, "{from} -> {to}:\n{out}");
    };
    // The inner loop reads the array the rows are stored into.
    stays("    v19 = elemaddr v1, v12, 8\n", "    v19 = elemaddr v5, v12, 8\n");
    // The inner loop stores.
    stays("    v23 = iconst 1\n", "    store v22, v19+0\n    v23 = iconst 1\n");
    // A check of an index that is not the inner counter plus a row's offset.
    stays("    v16 = iconst 7\n", "    v16 = iconst 7\n    v30 = imul v12, v12\n    boundscheck v30, v4, v16\n");
    // A division in the inner loop (it may fail).
    stays("    v23 = iconst 1\n", "    v30 = sdiv v12, v7\n    v23 = iconst 1\n");
    // The suffix calls a function (which could write what a later row reads).
    let src = format!("{}\nfn @touch(ptr) -> () {{\nb0(v0: ptr):\n    v1 = fconst 1.0\n    v2 = iconst 0\n    v3 = elemaddr v0, v2, 8\n    store v1, v3+0\n    return\n}}\n", ROWS_OF_SUMS.replace("    v26 = iconst 1\n", "    call @touch(v1)\n    v26 = iconst 1\n"));
    let out = opt(&src);
    assert_eq!(count(&out, "main", "fadd"), 1, "a call in the suffix:\n{out}");
}

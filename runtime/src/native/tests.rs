//! The support functions and the context driven through the JIT, as compiled programs use them.

use anf::ir::{self, parse, support::SUPPORT, FuncId, TrapCode};
use jit::{CallError, Jit, JitConfig, Word};

use super::*;

/// Compiles `text` against the runtime's support table with an entry for every function.
fn compile(text: &str) -> (Jit, ir::Module, jit::CompiledModule) {
    let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let mut j = Jit::new(JitConfig::default(), support_table()).unwrap();
    let all: Vec<FuncId> = m.funcs.keys().collect();
    let c = j.compile(&m, &all).unwrap_or_else(|e| panic!("{e}"));
    (j, m, c)
}

/// Calls `name`; on failure returns the context's error.
fn call(
    m: &ir::Module,
    c: &jit::CompiledModule,
    cx: &mut CallCtx,
    name: &str,
    args: &[Word],
) -> Result<Vec<Word>, NativeError> {
    let f = m.func_by_name(name).unwrap();
    match unsafe { c.entry(f).unwrap().call(cx.header(), args) } {
        Ok(r) => Ok(r),
        Err(CallError::Trapped(_)) => Err(cx.failure().unwrap()),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn the_table_covers_the_catalogue_and_compiles() {
    let mut m = ir::Module::new();
    for d in SUPPORT {
        assert!(address(d.name).is_some(), "{} has no implementation", d.name);
        m.declare_support(d.name);
    }
    let mut j = Jit::new(JitConfig::default(), support_table()).unwrap();
    j.compile(&m, &[]).unwrap();
}

const ARRAYS: &str = "\
fn @sum(ptr) -> f64 {
b0(v0: ptr):
    v1 = arraylen v0
    v2 = iconst 0
    v3 = fconst 0.0
    jump b1(v2, v3)
b1(v4: i64, v5: f64):
    v6 = icmp lt v4, v1
    brif v6, b2, b3
b2:
    v7 = elemaddr v0, v4, 8
    v8 = load.f64 v7+0
    v9 = fadd v5, v8
    v10 = iconst 1
    v11 = iadd v4, v10
    jump b1(v11, v9)
b3:
    return v5
}

fn @get(ptr, i64) -> f64 {
b0(v0: ptr, v1: i64):
    v2 = arraylen v0
    v5 = iconst -1
    boundscheck v1, v2, v5
    v3 = elemaddr v0, v1, 8
    v4 = load.f64 v3+0
    return v4
}

fn @scaled(ptr, f64) -> ptr {
b0(v0: ptr, v1: f64):
    v2 = arraylen v0
    v3 = newarray v2, 8
    v4 = iconst 0
    jump b1(v4)
b1(v5: i64):
    v6 = icmp lt v5, v2
    brif v6, b2, b3
b2:
    v7 = elemaddr v0, v5, 8
    v8 = load.f64 v7+0
    v9 = fmul v8, v1
    v10 = elemaddr v3, v5, 8
    store v9, v10+0
    v11 = iconst 1
    v12 = iadd v5, v11
    jump b1(v12)
b3:
    return v3
}

fn @div(i64, i64) -> i64 {
b0(v0: i64, v1: i64):
    v2 = sdiv v0, v1
    return v2
}
";

#[test]
fn arrays_marshal_in_and_out_and_the_arena_is_reused() {
    let (_j, m, c) = compile(ARRAYS);
    let mut cx = CallCtx::new(DEFAULT_ARENA_LIMIT);
    let xs: Vec<f64> = (0..1000).map(|i| i as f64 * 0.5).collect();
    let mut reserved = None;
    for round in 0..50 {
        let a = cx.array_f64(&xs).unwrap();
        let r = call(&m, &c, &mut cx, "sum", &[a]).unwrap();
        assert_eq!(r[0].as_f64(), xs.iter().sum::<f64>());
        let s = call(&m, &c, &mut cx, "scaled", &[a, Word::from_f64(2.0)]).unwrap();
        let out = unsafe { read_f64_array(s[0]) };
        assert_eq!(out.len(), 1000);
        assert_eq!(out[999], 999.0);
        cx.reset();
        // After the first round the arena has all it needs: no growth per call.
        match reserved {
            None => reserved = Some(cx.arena_reserved()),
            Some(r) => assert_eq!(cx.arena_reserved(), r, "round {round}"),
        }
    }
}

#[test]
fn errors_come_back_with_their_messages() {
    let (_j, m, c) = compile(ARRAYS);
    let mut cx = CallCtx::new(DEFAULT_ARENA_LIMIT);
    let a = cx.array_f64(&[1.0, 2.0, 3.0]).unwrap();
    let e = call(&m, &c, &mut cx, "get", &[a, Word::from_i64(5)]).unwrap_err();
    assert_eq!(e.message, "index 5 out of bounds for length 3");
    cx.reset();
    let e = call(&m, &c, &mut cx, "div", &[Word::from_i64(1), Word::from_i64(0)]).unwrap_err();
    assert_eq!(e, NativeError::new(2, "division by zero").at(anf::ir::NO_SITE, vec![1, 0]));
    cx.reset();
    assert_eq!(call(&m, &c, &mut cx, "div", &[Word::from_i64(7), Word::from_i64(2)]).unwrap()[0].as_i64(), 3);
    // An arena limit turns a huge array into an error, not a crash.
    let mut small = CallCtx::new(1 << 16);
    let a = small.array_f64(&[1.0; 100]).unwrap();
    let e = call(&m, &c, &mut small, "scaled", &[a, Word::from_f64(1.0)]).unwrap();
    assert_eq!(unsafe { read_f64_array(e[0]) }.len(), 100);
    let big = small.array_f64(&[1.0; 5000]).unwrap();
    let e = call(&m, &c, &mut small, "scaled", &[big, Word::from_f64(1.0)]).unwrap_err();
    assert_eq!(e.message, "out of memory allocating 40008 bytes");
}

/// `grand_total xs ys = foldBag intGroup (fun x -> x) (merge xs ys)` (docs/language.md §9), with the
/// bags built from arrays of ints.
const BAGS: &str = "\
extern fallible $nabla_bag_new(i64) -> ptr
extern fallible $nabla_bag_insert(ptr, ptr, i64, i64) -> ()
extern fallible $nabla_bag_merge(ptr, ptr, i64) -> ptr
extern fallible $nabla_bag_negate(ptr, i64) -> ptr
extern fallible $nabla_bag_entries(ptr) -> ptr
extern $nabla_bag_count(ptr, ptr) -> i64
extern $nabla_bag_len(ptr) -> i64

fn @bag_of(ptr) -> ptr {
b0(v0: ptr):
    v1 = iconst 1
    v2 = call $nabla_bag_new(v1)
    v3 = arraylen v0
    v4 = iconst 0
    jump b1(v4)
b1(v5: i64):
    v6 = icmp lt v5, v3
    brif v6, b2, b3
b2:
    v7 = elemaddr v0, v5, 8
    call $nabla_bag_insert(v2, v7, v1, v1)
    v8 = iadd v5, v1
    jump b1(v8)
b3:
    return v2
}

fn @fold_sum(ptr) -> i64 {
b0(v0: ptr):
    v1 = call $nabla_bag_entries(v0)
    v2 = arraylen v1
    v3 = iconst 0
    jump b1(v3, v3)
b1(v4: i64, v5: i64):
    v6 = icmp lt v4, v2
    brif v6, b2, b3
b2:
    v7 = elemaddr v1, v4, 16
    v8 = load.i64 v7+0
    v9 = load.i64 v7+8
    v10 = imul v8, v9
    v11 = iadd v5, v10
    v12 = iconst 1
    v13 = iadd v4, v12
    jump b1(v13, v11)
b3:
    return v5
}

fn @grand_total(ptr, ptr) -> i64 {
b0(v0: ptr, v1: ptr):
    v2 = call @bag_of(v0)
    v3 = call @bag_of(v1)
    v6 = iconst -1
    v4 = call $nabla_bag_merge(v2, v3, v6)
    v5 = call @fold_sum(v4)
    return v5
}

fn @cancel(ptr) -> (i64, i64) {
b0(v0: ptr):
    v1 = call @bag_of(v0)
    v6 = iconst 1
    v2 = call $nabla_bag_negate(v1, v6)
    v3 = call $nabla_bag_merge(v1, v2, v6)
    v4 = call $nabla_bag_len(v3)
    v5 = alloc 8
    store v6, v5+0
    v7 = call $nabla_bag_count(v1, v5)
    return v4, v7
}
";

#[test]
fn bags_fold_in_compiled_loops() {
    let (_j, m, c) = compile(BAGS);
    let mut cx = CallCtx::new(DEFAULT_ARENA_LIMIT);
    let ints = |cx: &mut CallCtx, xs: &[i64]| {
        let ws: Vec<Word> = xs.iter().map(|x| Word::from_i64(*x)).collect();
        cx.array_from_words(1, &ws).unwrap()
    };
    let (xs, ys) = (ints(&mut cx, &[1, 1]), ints(&mut cx, &[2, 3, 4]));
    let r = call(&m, &c, &mut cx, "grand_total", &[xs, ys]).unwrap();
    assert_eq!(r[0].as_i64(), 11);
    let r = call(&m, &c, &mut cx, "bag_of", &[xs]).unwrap();
    let bag = unsafe { bag_ref(r[0]) };
    assert_eq!(bag.sorted_entries(), vec![(&[1u64][..], 2)]);
    let r = call(&m, &c, &mut cx, "cancel", &[ys]).unwrap();
    assert_eq!((r[0].as_i64(), r[1].as_i64()), (0, 0));
    let zs = ints(&mut cx, &[5, 1, 5]);
    let r = call(&m, &c, &mut cx, "cancel", &[zs]).unwrap();
    assert_eq!(r[1].as_i64(), 1);
}

const MAPS: &str = "\
extern fallible $nabla_map_new(i64, i64) -> ptr
extern fallible $nabla_map_set(ptr, ptr, ptr) -> ()
extern fallible $nabla_map_remove(ptr, ptr) -> ()
extern fallible $nabla_map_clone(ptr) -> ptr
extern fallible $nabla_map_entries(ptr) -> ptr
extern $nabla_map_get(ptr, ptr, ptr) -> bool
extern $nabla_map_len(ptr) -> i64

fn @squares_map(i64) -> ptr {
b0(v0: i64):
    v1 = iconst 1
    v2 = call $nabla_map_new(v1, v1)
    v3 = alloc 16
    v4 = iconst 0
    jump b1(v4)
b1(v5: i64):
    v6 = icmp lt v5, v0
    brif v6, b2, b3
b2:
    store v5, v3+0
    v7 = imul v5, v5
    store v7, v3+8
    v8 = elemaddr v3, v4, 8
    call $nabla_map_set(v2, v3, v8)
    v9 = iadd v5, v1
    jump b1(v9)
b3:
    return v2
}

fn @lookup_or(ptr, i64, i64) -> i64 {
b0(v0: ptr, v1: i64, v2: i64):
    v3 = alloc 16
    store v1, v3+0
    v4 = iconst 0
    v5 = elemaddr v3, v4, 8
    v6 = call $nabla_map_get(v0, v3, v5)
    v7 = load.i64 v3+8
    v8 = select.i64 v6, v7, v2
    return v8
}

fn @without(ptr, i64) -> (ptr, i64, i64) {
b0(v0: ptr, v1: i64):
    v2 = call $nabla_map_clone(v0)
    v3 = alloc 8
    store v1, v3+0
    call $nabla_map_remove(v2, v3)
    v4 = call $nabla_map_len(v2)
    v5 = call $nabla_map_len(v0)
    return v2, v4, v5
}

fn @sum_values(ptr) -> i64 {
b0(v0: ptr):
    v1 = call $nabla_map_entries(v0)
    v2 = arraylen v1
    v3 = iconst 0
    jump b1(v3, v3)
b1(v4: i64, v5: i64):
    v6 = icmp lt v4, v2
    brif v6, b2, b3
b2:
    v7 = elemaddr v1, v4, 16
    v8 = load.i64 v7+8
    v9 = iadd v5, v8
    v10 = iconst 1
    v11 = iadd v4, v10
    jump b1(v11, v9)
b3:
    return v5
}
";

#[test]
fn maps_through_compiled_code() {
    let (_j, m, c) = compile(MAPS);
    let mut cx = CallCtx::new(DEFAULT_ARENA_LIMIT);
    let map = call(&m, &c, &mut cx, "squares_map", &[Word::from_i64(10)]).unwrap()[0];
    let w = Word::from_i64;
    assert_eq!(call(&m, &c, &mut cx, "lookup_or", &[map, w(7), w(-1)]).unwrap()[0].as_i64(), 49);
    assert_eq!(call(&m, &c, &mut cx, "lookup_or", &[map, w(70), w(-1)]).unwrap()[0].as_i64(), -1);
    let r = call(&m, &c, &mut cx, "without", &[map, w(3)]).unwrap();
    assert_eq!((r[1].as_i64(), r[2].as_i64()), (9, 10));
    assert_eq!(call(&m, &c, &mut cx, "sum_values", &[r[0]]).unwrap()[0].as_i64(), 285 - 9);
    let keys: Vec<u64> = unsafe { map_ref(r[0]) }.sorted_entries().iter().map(|(k, _)| k[0]).collect();
    assert_eq!(keys, vec![0, 1, 2, 4, 5, 6, 7, 8, 9]);
}

#[test]
fn math_support_functions() {
    let (_j, m, c) = compile(
        "\
extern $nabla_pow(f64, f64) -> f64
extern $nabla_sigmoid(f64) -> f64
extern $nabla_log(f64) -> f64

fn @f(f64) -> f64 {
b0(v0: f64):
    v1 = fconst 3.0
    v2 = call $nabla_pow(v0, v1)
    v3 = call $nabla_sigmoid(v2)
    v4 = call $nabla_log(v3)
    return v4
}
",
    );
    let mut cx = CallCtx::new(DEFAULT_ARENA_LIMIT);
    let r = call(&m, &c, &mut cx, "f", &[Word::from_f64(0.5)]).unwrap();
    assert_eq!(r[0].as_f64(), (1.0 / (1.0 + (-0.125f64).exp())).ln());
}

#[test]
fn collection_errors_and_panics_become_call_errors() {
    let mut cx = CallCtx::new(DEFAULT_ARENA_LIMIT);
    let a = cx.new_bag(Bag::new(1));
    let b = cx.new_bag(Bag::new(2));
    let merged = unsafe { support::nabla_bag_merge(cx.header(), a, b, -1) };
    assert!(merged.is_null());
    assert_eq!(cx.failure().unwrap().status, STATUS_COLLECTION);
    cx.reset();
    assert_eq!(cx.failure(), None);
    let r: i64 = unsafe { support::guard(cx.header(), -1, |_| panic!("deliberate panic inside a support function")) };
    assert_eq!(r, -1);
    assert_eq!(cx.failure().unwrap().status, STATUS_PANIC);
    let bad = unsafe { support::nabla_bag_new(cx.header(), -3) };
    assert!(bad.is_null());
    assert_eq!(cx.failure().unwrap().status, STATUS_PANIC, "the first error wins");
}

#[test]
fn bags_of_an_earlier_call_come_back_empty_and_entry_arrays_follow_changes() {
    let mut cx = CallCtx::new(DEFAULT_ARENA_LIMIT);
    let h = cx.header();
    let key = |k: &[u64]| k.to_vec();
    unsafe {
        let a = support::nabla_bag_new(h, 1);
        for k in 0..300u64 {
            support::nabla_bag_insert(h, a, key(&[k]).as_ptr(), 2, -1);
        }
        let e1 = support::nabla_bag_entries(h, a);
        assert_eq!(support::nabla_bag_entries(h, a), e1, "an unchanged bag's entries are made once");
        support::nabla_bag_insert(h, a, key(&[(-5i64) as u64]).as_ptr(), 1, -1);
        let e2 = support::nabla_bag_entries(h, a);
        assert_ne!(e2, e1, "a change makes a new array");
        let (n, words) = read_array(Word::from_ptr(e2), 2);
        assert_eq!((n, words[0].as_i64(), words[1].as_i64()), (301, -5, 1), "sorted, the new key first");
        assert_eq!(*(e1 as *const i64), 300, "the old array is intact");
    }
    cx.reset();
    let h = cx.header();
    unsafe {
        // The first bag of the next call reuses the table of the first bag of the last one.
        let b = support::nabla_bag_new(h, 2);
        assert_eq!((support::nabla_bag_len(h, b), (*b).key_words()), (0, 2));
        assert_eq!(support::nabla_bag_count(h, b, key(&[7, 0]).as_ptr()), 0);
        support::nabla_bag_insert(h, b, key(&[7, 1]).as_ptr(), 3, -1);
        assert_eq!(support::nabla_bag_count(h, b, key(&[7, 1]).as_ptr()), 3);
        let (n, words) = read_array(Word::from_ptr(support::nabla_bag_entries(h, b)), 3);
        assert_eq!((n, words.iter().map(|w| w.as_i64()).collect::<Vec<_>>()), (1, vec![7, 1, 3]));
    }
    assert_eq!(cx.failure(), None);
}

#[test]
fn bag_overflow_is_a_trap_at_the_given_site() {
    let mut cx = CallCtx::new(DEFAULT_ARENA_LIMIT);
    let h = cx.header();
    unsafe {
        let a = support::nabla_bag_new(h, 1);
        support::nabla_bag_insert(h, a, [4u64].as_ptr(), i64::MAX, 7);
        assert_eq!(cx.failure(), None);
        let merged = support::nabla_bag_merge(h, a, a, 9);
        assert!(merged.is_null());
    }
    let e = cx.failure().unwrap();
    assert_eq!((e.status, e.site, e.message.as_str()), (TrapCode::BagOverflow.code(), 9, "bag multiplicity overflow"));
    cx.reset();
    let h = cx.header();
    unsafe {
        let a = support::nabla_bag_new(h, 1);
        support::nabla_bag_insert_scaled(h, a, [4u64].as_ptr(), 1 << 62, 2, 11);
    }
    assert_eq!(cx.failure().map(|e| (e.status, e.site)), Some((TrapCode::BagOverflow.code(), 11)));
    cx.reset();
    let h = cx.header();
    unsafe {
        assert_eq!(support::nabla_mul_checked(h, 3, -4, 12), -12);
        support::nabla_mul_checked(h, i64::MIN, -1, 13);
    }
    assert_eq!(cx.failure().map(|e| (e.status, e.site)), Some((TrapCode::BagOverflow.code(), 13)));
}

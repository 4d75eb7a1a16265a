//! Compile-and-run tests of the JIT over hand-written IR, with a small test runtime providing the
//! support functions (the real ones live in `runtime::native`).

use anf::ir::{self, parse, FuncId, TrapCode, Type};
use jit::{CallError, CtxHeader, Jit, JitConfig, JitError, SupportTable, Word, ALLOC_SYMBOL, TRAP_SYMBOL};

/// A minimal call context: the header, arena chunks, and what the last trap reported.
#[repr(C)]
struct TestCtx {
    header: CtxHeader,
    chunks: Vec<Vec<u64>>,
    /// Total bytes the slow path may hand out.
    limit: usize,
    allocated: usize,
    trap: Option<(i64, i64, i64)>,
    /// The site of the last trap.
    site: i64,
    slow_allocs: usize,
}

impl TestCtx {
    /// A context whose first allocation goes to the slow path.
    fn new(limit: usize) -> Box<TestCtx> {
        Box::new(TestCtx {
            header: CtxHeader::empty(),
            chunks: Vec::new(),
            limit,
            allocated: 0,
            trap: None,
            site: 0,
            slow_allocs: 0,
        })
    }

    /// The pointer compiled code takes.
    fn header(&mut self) -> *mut CtxHeader {
        &mut self.header
    }
}

/// Records the trap (the generated code has set `status` already).
unsafe extern "C" fn test_trap(ctx: *mut CtxHeader, code: i64, site: i64, a: i64, b: i64) {
    let ctx = &mut *(ctx as *mut TestCtx);
    ctx.trap = Some((code, a, b));
    ctx.site = site;
}

/// Slow path: a fresh chunk of at least 256 bytes, or an out-of-memory failure.
unsafe extern "C" fn test_alloc(ctx: *mut CtxHeader, bytes: i64) -> *mut u8 {
    let ctx = &mut *(ctx as *mut TestCtx);
    ctx.slow_allocs += 1;
    let bytes = bytes as usize;
    if ctx.allocated.saturating_add(bytes) > ctx.limit {
        ctx.header.status = TrapCode::OutOfMemory.code();
        ctx.trap = Some((TrapCode::OutOfMemory.code(), bytes as i64, 0));
        return std::ptr::null_mut();
    }
    ctx.allocated += bytes;
    let words = bytes.div_ceil(8).max(32);
    let mut chunk = vec![0u64; words];
    let start = chunk.as_mut_ptr() as *mut u8;
    ctx.header.alloc_ptr = start.add(bytes.div_ceil(8) * 8);
    ctx.header.alloc_end = start.add(words * 8);
    ctx.chunks.push(chunk);
    start
}

/// An infallible support function.
unsafe extern "C" fn test_sin(_ctx: *mut CtxHeader, x: f64) -> f64 {
    x.sin()
}

/// A fallible support function: fails (status 100) on a negative argument.
unsafe extern "C" fn test_checked_sqrt(ctx: *mut CtxHeader, x: f64) -> f64 {
    if x < 0.0 {
        (*ctx).status = 100;
        return 0.0;
    }
    x.sqrt()
}

/// The test runtime's support table.
fn table() -> SupportTable {
    let mut t = SupportTable::new();
    t.add(TRAP_SYMBOL, test_trap as *const u8, &[Type::I64, Type::I64, Type::I64, Type::I64], &[], false);
    t.add(ALLOC_SYMBOL, test_alloc as *const u8, &[Type::I64], &[Type::Ptr], true);
    t.add("test_sin", test_sin as *const u8, &[Type::F64], &[Type::F64], false);
    t.add("test_checked_sqrt", test_checked_sqrt as *const u8, &[Type::F64], &[Type::F64], true);
    t
}

/// A JIT over the test runtime.
fn jit() -> Jit {
    Jit::new(JitConfig::default(), table()).expect("host ISA")
}

/// Parses and compiles `text` with an entry for every function.
fn compile(jit: &mut Jit, text: &str) -> (ir::Module, jit::CompiledModule) {
    let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let all: Vec<FuncId> = m.funcs.keys().collect();
    let c = jit.compile(&m, &all).unwrap_or_else(|e| panic!("{e}"));
    (m, c)
}

/// Calls function `name` of a compiled module.
fn call(
    m: &ir::Module,
    c: &jit::CompiledModule,
    ctx: &mut TestCtx,
    name: &str,
    args: &[Word],
) -> Result<Vec<Word>, CallError> {
    let f = m.func_by_name(name).unwrap();
    unsafe { c.entry(f).unwrap().call(ctx.header(), args) }
}

#[test]
fn straight_line_arithmetic() {
    let mut j = jit();
    let (m, c) = compile(
        &mut j,
        "\
fn @poly(f64, f64) -> f64 {
b0(v0: f64, v1: f64):
    v2 = fmul v0, v0
    v3 = fconst 2.0
    v4 = fmul v3, v1
    v5 = fadd v2, v4
    v6 = fsqrt v5
    return v6
}
",
    );
    let mut ctx = TestCtx::new(0);
    let r = call(&m, &c, &mut ctx, "poly", &[Word::from_f64(3.0), Word::from_f64(8.0)]).unwrap();
    assert_eq!(r[0].as_f64(), 5.0);
}

/// Sums `0 + 1 + ... + (n-1)` in a loop, and builds then sums an array of squares.
const LOOPS: &str = "\
fn @triangle(i64) -> i64 {
b0(v0: i64):
    v1 = iconst 0
    jump b1(v1, v1)
b1(v2: i64, v3: i64):
    v4 = icmp lt v2, v0
    brif v4, b2, b3
b2:
    v5 = iadd v3, v2
    v6 = iconst 1
    v7 = iadd v2, v6
    jump b1(v7, v5)
b3:
    return v3
}

fn @squares(i64) -> ptr {
b0(v0: i64):
    v1 = newarray v0, 8
    v2 = iconst 0
    jump b1(v2)
b1(v3: i64):
    v4 = icmp lt v3, v0
    brif v4, b2, b3
b2:
    v5 = itof v3
    v6 = fmul v5, v5
    v7 = elemaddr v1, v3, 8
    store v6, v7+0
    v8 = iconst 1
    v9 = iadd v3, v8
    jump b1(v9)
b3:
    return v1
}

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
    v12 = iconst 7
    boundscheck v4, v1, v12
    v7 = elemaddr v0, v4, 8
    v8 = load.f64 v7+0
    v9 = fadd v5, v8
    v10 = iconst 1
    v11 = iadd v4, v10
    jump b1(v11, v9)
b3:
    return v5
}

fn @sum_of_squares(i64) -> f64 {
b0(v0: i64):
    v1 = call @squares(v0)
    v2 = call @sum(v1)
    return v2
}

fn @get(ptr, i64) -> f64 {
b0(v0: ptr, v1: i64):
    v2 = arraylen v0
    v5 = iconst 9
    boundscheck v1, v2, v5
    v3 = elemaddr v0, v1, 8
    v4 = load.f64 v3+0
    return v4
}
";

#[test]
fn loops_run_natively() {
    let mut j = jit();
    let (m, c) = compile(&mut j, LOOPS);
    let mut ctx = TestCtx::new(1 << 20);
    let r = call(&m, &c, &mut ctx, "triangle", &[Word::from_i64(100_000)]).unwrap();
    assert_eq!(r[0].as_i64(), 100_000 * 99_999 / 2);
    let r = call(&m, &c, &mut ctx, "sum_of_squares", &[Word::from_i64(1000)]).unwrap();
    let expected: f64 = (0..1000).map(|i| (i * i) as f64).sum();
    assert_eq!(r[0].as_f64(), expected);
    // An array made by one call is read by another.
    let arr = call(&m, &c, &mut ctx, "squares", &[Word::from_i64(4)]).unwrap()[0];
    let r = call(&m, &c, &mut ctx, "get", &[arr, Word::from_i64(3)]).unwrap();
    assert_eq!(r[0].as_f64(), 9.0);
    let len = unsafe { *arr.as_ptr::<i64>() };
    assert_eq!(len, 4);
}

#[test]
fn a_loop_compiles_to_a_native_loop_without_calls() {
    let mut j = jit();
    let m = parse(LOOPS).unwrap();
    let calls = |listing: &str| listing.lines().filter(|l| l.trim_start().starts_with("call")).count();
    let listing = j.disassemble(&m, m.func_by_name("triangle").unwrap()).unwrap();
    assert_eq!(calls(&listing), 0, "{listing}");
    assert!(listing.lines().count() < 40, "{listing}");
    // A bounds-checked loop: the only call is the trap, in a cold block after the loop.
    let listing = j.disassemble(&m, m.func_by_name("sum").unwrap()).unwrap();
    assert_eq!(calls(&listing), 1, "{listing}");
}

/// `3.0 / toReal s`, loop-invariant, added up `n` times.
const INVARIANT: &str = "\
fn @scaled(i64, i64) -> f64 {
b0(v0: i64, v1: i64):
    v2 = itof v1
    v3 = fconst 3.0
    v4 = fdiv v3, v2
    v5 = fconst 0.0
    v6 = iconst 0
    jump b1(v6, v5)
b1(v7: i64, v8: f64):
    v9 = icmp lt v7, v0
    brif v9, b2, b3
b2:
    v10 = fadd v8, v4
    v11 = iconst 1
    v12 = iadd v7, v11
    jump b1(v12, v10)
b3:
    return v8
}
";

/// The same loop with its test the other way round (`brif i >= n, exit, body`): its body is
/// already the false target, so it is emitted as written.
const INVARIANT_EXIT_FIRST: &str = "\
fn @scaled(i64, i64) -> f64 {
b0(v0: i64, v1: i64):
    v2 = itof v1
    v3 = fconst 3.0
    v4 = fdiv v3, v2
    v5 = fconst 0.0
    v6 = iconst 0
    jump b1(v6, v5)
b1(v7: i64, v8: f64):
    v9 = icmp ge v7, v0
    brif v9, b3, b2
b2:
    v10 = fadd v8, v4
    v11 = iconst 1
    v12 = iadd v7, v11
    jump b1(v12, v10)
b3:
    return v8
}
";

/// Two nested loops: `3.0 / toReal (j + 1)` depends on the outer counter only, so it belongs in
/// the outer loop and out of the inner one, whose exit is the outer loop's latch.
const INVARIANT_NESTED: &str = "\
fn @scaled(i64, i64) -> f64 {
b0(v0: i64, v1: i64):
    v2 = fconst 0.0
    v3 = iconst 0
    jump b1(v3, v2)
b1(v4: i64, v5: f64):
    v6 = icmp lt v4, v0
    brif v6, b2, b6
b2:
    v7 = iconst 1
    v8 = iadd v4, v7
    v9 = iconst 0
    jump b3(v9, v5)
b3(v10: i64, v11: f64):
    v12 = icmp lt v10, v1
    brif v12, b4, b5
b4:
    v13 = itof v8
    v14 = fconst 3.0
    v15 = fdiv v14, v13
    v16 = fadd v11, v15
    v17 = iconst 1
    v18 = iadd v10, v17
    jump b3(v18, v16)
b5:
    jump b1(v8, v11)
b6:
    return v5
}
";

/// A loop with a conditional inside: one arm may leave the loop (`return` once the sum passes
/// 10^9), the other adds the loop-invariant `3.0 / toReal s`. The inner `brif` has both its
/// targets in the loop, so it is emitted as written: the arm that stays is elaborated first.
const INVARIANT_IN_A_BRANCH: &str = "\
fn @scaled(i64, i64) -> f64 {
b0(v0: i64, v1: i64):
    v2 = fconst 0.0
    v3 = iconst 0
    jump b1(v3, v2)
b1(v4: i64, v5: f64):
    v6 = icmp lt v4, v0
    brif v6, b2, b6
b2:
    v7 = iconst 100
    v8 = icmp gt v4, v7
    brif v8, b3, b4
b3:
    v9 = fconst 1000000000.0
    v10 = fcmp gt v5, v9
    brif v10, b7, b5(v5)
b4:
    v11 = itof v1
    v12 = fconst 3.0
    v13 = fdiv v12, v11
    v14 = fadd v5, v13
    jump b5(v14)
b5(v15: f64):
    v16 = iconst 1
    v17 = iadd v4, v16
    jump b1(v17, v15)
b6:
    return v5
b7:
    return v5
}
";

/// The one division of `@scaled`'s machine code and the `[header, branch]` line ranges of its
/// loops (backward branches), the last header first (blocks are laid out in reverse postorder,
/// so an inner loop's header comes after its outer loop's).
fn division_and_loops(j: &mut Jit, text: &str) -> (usize, Vec<(usize, usize)>, String) {
    let m = parse(text).unwrap();
    let listing = j.disassemble(&m, m.func_by_name("scaled").unwrap()).unwrap();
    let lines: Vec<&str> = listing.lines().map(str::trim).collect();
    let label_at = |k: &str| lines.iter().position(|l| *l == format!("block{k}:"));
    let mut loops = Vec::new();
    for (at, l) in lines.iter().enumerate() {
        for target in l.split_whitespace().filter_map(|w| w.strip_prefix("label")) {
            if let Some(h) = label_at(target.trim_end_matches(';')).filter(|h| *h < at) {
                loops.push((h, at));
            }
        }
    }
    loops.sort_by_key(|(h, _)| std::cmp::Reverse(*h));
    let divs: Vec<usize> = (0..lines.len()).filter(|i| lines[*i].contains("divsd")).collect();
    assert_eq!(divs.len(), 1, "{listing}");
    (divs[0], loops, listing)
}

/// A loop's exit test is emitted with its exit first, so Cranelift's loop-invariant code motion
/// keeps the loop: the division is computed once, before the loop, not at every iteration.
#[test]
fn loop_invariant_code_stays_out_of_the_loop() {
    let mut j = jit();
    for text in [INVARIANT, INVARIANT_EXIT_FIRST, INVARIANT_IN_A_BRANCH] {
        let (div, loops, listing) = division_and_loops(&mut j, text);
        assert!(!loops.is_empty(), "no loop in\n{listing}");
        assert!(loops.iter().all(|(h, b)| !(*h..=*b).contains(&div)), "the division is in a loop:\n{listing}");
        let (m, c) = compile(&mut j, text);
        let mut ctx = TestCtx::new(1 << 20);
        let r = call(&m, &c, &mut ctx, "scaled", &[Word::from_i64(4), Word::from_i64(2)]).unwrap()[0];
        assert_eq!(r.as_f64(), 6.0);
    }
}

/// In nested loops the inner loop's exit test (whose exit is the outer loop's latch) is a loop
/// exit too: what the inner loop does not change is computed once per outer iteration.
#[test]
fn loop_invariant_code_leaves_the_inner_of_nested_loops() {
    let mut j = jit();
    let (div, loops, listing) = division_and_loops(&mut j, INVARIANT_NESTED);
    assert!(loops.len() >= 2, "two loops in\n{listing}");
    let (h, b) = loops[0];
    assert!(!(h..=b).contains(&div), "the division is in the inner loop:\n{listing}");
    assert!(loops[1..].iter().any(|(h, b)| (*h..=*b).contains(&div)), "the division is in the outer loop:\n{listing}");
    let (m, c) = compile(&mut j, INVARIANT_NESTED);
    let mut ctx = TestCtx::new(1 << 20);
    // sum over j < 3 of 2 · 3 / (j + 1) = 6 + 3 + 2
    let r = call(&m, &c, &mut ctx, "scaled", &[Word::from_i64(3), Word::from_i64(2)]).unwrap()[0];
    assert_eq!(r.as_f64(), 11.0);
}

#[test]
fn out_of_bounds_index_is_a_clean_error() {
    let mut j = jit();
    let (m, c) = compile(&mut j, LOOPS);
    let mut ctx = TestCtx::new(1 << 20);
    let arr = call(&m, &c, &mut ctx, "squares", &[Word::from_i64(3)]).unwrap()[0];
    let r = call(&m, &c, &mut ctx, "get", &[arr, Word::from_i64(5)]);
    assert_eq!(r, Err(CallError::Trapped(TrapCode::IndexOutOfBounds.code())));
    assert_eq!((ctx.trap, ctx.site), (Some((1, 5, 3)), 9));
    assert_eq!(TrapCode::IndexOutOfBounds.message(5, 3), "index 5 out of bounds for length 3");
    // A failed context refuses further calls until the runtime resets it.
    let again = call(&m, &c, &mut ctx, "get", &[arr, Word::from_i64(0)]);
    assert_eq!(again, Err(CallError::ContextFailed(1)));
    ctx.header.status = 0;
    let r = call(&m, &c, &mut ctx, "get", &[arr, Word::from_i64(-1)]);
    assert_eq!(r, Err(CallError::Trapped(1)));
    assert_eq!(ctx.trap, Some((1, -1, 3)));
}

const DIVISION: &str = "\
fn @div(i64, i64) -> (i64, i64) {
b0(v0: i64, v1: i64):
    v2 = sdiv v0, v1
    v3 = srem v0, v1
    return v2, v3
}

fn @div_twice(i64, i64) -> i64 {
b0(v0: i64, v1: i64):
    v2, v3 = call @div(v0, v1)
    v4 = iadd v2, v3
    return v4
}
";

#[test]
fn division_by_zero_is_a_clean_error_and_min_over_minus_one_wraps() {
    let mut j = jit();
    let (m, c) = compile(&mut j, DIVISION);
    let mut ctx = TestCtx::new(0);
    let w = Word::from_i64;
    let r = call(&m, &c, &mut ctx, "div", &[w(-7), w(2)]).unwrap();
    assert_eq!((r[0].as_i64(), r[1].as_i64()), (-3, -1));
    let r = call(&m, &c, &mut ctx, "div", &[w(i64::MIN), w(-1)]).unwrap();
    assert_eq!((r[0].as_i64(), r[1].as_i64()), (i64::MIN, 0));
    let r = call(&m, &c, &mut ctx, "div_twice", &[w(7), w(0)]);
    assert_eq!(r, Err(CallError::Trapped(TrapCode::DivisionByZero.code())));
    assert_eq!((ctx.trap, ctx.site), (Some((2, 7, 0)), ir::NO_SITE));
}

/// Division and remainder by constant powers of two (compiled as shifts, not `idiv`), and by
/// constants that are not (compiled as division).
const DIVISION_BY_CONSTANTS: &str = "\
fn @by_constants(i64) -> (i64, i64, i64, i64, i64, i64, i64, i64, i64, i64) {
b0(v0: i64):
    v1 = iconst 1
    v2 = iconst 2
    v3 = iconst 8
    v4 = iconst 4611686018427387904
    v5 = iconst 6
    v6 = sdiv v0, v1
    v7 = srem v0, v1
    v8 = sdiv v0, v2
    v9 = srem v0, v2
    v10 = sdiv v0, v3
    v11 = srem v0, v3
    v12 = sdiv v0, v4
    v13 = srem v0, v4
    v14 = sdiv v0, v5
    v15 = srem v0, v5
    return v6, v7, v8, v9, v10, v11, v12, v13, v14, v15
}
";

#[test]
fn division_by_constant_powers_of_two_truncates_toward_zero() {
    let mut j = jit();
    let (m, c) = compile(&mut j, DIVISION_BY_CONSTANTS);
    let mut ctx = TestCtx::new(0);
    let xs = [0, 1, -1, 7, -7, 8, -8, 9, -9, 15, -15, 1 << 40, -(1 << 40) - 3, i64::MAX, i64::MIN, i64::MIN + 1];
    for x in xs {
        let r = call(&m, &c, &mut ctx, "by_constants", &[Word::from_i64(x)]).unwrap();
        let got: Vec<i64> = r.iter().map(|w| w.as_i64()).collect();
        let mut want = Vec::new();
        for d in [1i64, 2, 8, 1 << 62, 6] {
            want.push(x.wrapping_div(d));
            want.push(x.wrapping_rem(d));
        }
        assert_eq!(got, want, "x = {x}");
    }
}

/// Two closures of type `Real -> Real` and an application switching over their tags.
const CLOSURES: &str = "\
tag t0 = @add_k env(f64)
tag t1 = @scale env(f64, i64)

fn @add_k(ptr, f64) -> f64 {
b0(v0: ptr, v1: f64):
    v2 = load.f64 v0+0
    v3 = fadd v1, v2
    return v3
}

fn @scale(ptr, f64) -> f64 {
b0(v0: ptr, v1: f64):
    v2 = load.f64 v0+0
    v3 = load.i64 v0+8
    v4 = itof v3
    v5 = fmul v1, v2
    v6 = fmul v5, v4
    return v6
}

fn @apply(i64, ptr, f64) -> f64 {
b0(v0: i64, v1: ptr, v2: f64):
    switch v0, [t0: b1(v1), t1: b2(v1)]
b1(v3: ptr):
    v4 = call @add_k(v3, v2)
    jump b3(v4)
b2(v5: ptr):
    v6 = call @scale(v5, v2)
    jump b3(v6)
b3(v7: f64):
    return v7
}

fn @make(bool, f64) -> (i64, ptr) {
b0(v0: bool, v1: f64):
    brif v0, b1, b2
b1:
    v2 = alloc 8
    store v1, v2+0
    v3 = tag t0
    return v3, v2
b2:
    v4 = alloc 16
    store v1, v4+0
    v5 = iconst 3
    store v5, v4+8
    v6 = tag t1
    return v6, v4
}

fn @make_and_apply(bool, f64, f64) -> f64 {
b0(v0: bool, v1: f64, v2: f64):
    v3, v4 = call @make(v0, v1)
    v5 = call @apply(v3, v4, v2)
    return v5
}
";

#[test]
fn tag_switch_applies_the_right_closure() {
    let mut j = jit();
    let (m, c) = compile(&mut j, CLOSURES);
    let mut ctx = TestCtx::new(1 << 16);
    let f = Word::from_f64;
    let r = call(&m, &c, &mut ctx, "make_and_apply", &[Word::from_bool(true), f(10.0), f(1.5)]).unwrap();
    assert_eq!(r[0].as_f64(), 11.5);
    let r = call(&m, &c, &mut ctx, "make_and_apply", &[Word::from_bool(false), f(10.0), f(1.5)]).unwrap();
    assert_eq!(r[0].as_f64(), 45.0);
    let closure = call(&m, &c, &mut ctx, "make", &[Word::from_bool(false), f(2.0)]).unwrap();
    assert_eq!(closure[0].as_i64(), 1);
    let r = call(&m, &c, &mut ctx, "apply", &[closure[0], closure[1], f(5.0)]).unwrap();
    assert_eq!(r[0].as_f64(), 30.0);
}

#[test]
fn a_switch_with_many_tags_and_block_arguments() {
    // Eight tags of one signature; each case passes the tag's own constant to a join block.
    let mut text = String::new();
    for i in 0..8 {
        text.push_str(&format!("tag t{i} = @k{i} env()\n"));
    }
    for i in 0..8 {
        let k = i + 1;
        text.push_str(&format!("\nfn @k{i}(ptr, i64) -> i64 {{\nb0(v0: ptr, v1: i64):\n    v2 = iconst {k}\n"));
        text.push_str("    v3 = imul v1, v2\n    return v3\n}\n");
    }
    text.push_str("\nfn @dispatch(i64, i64) -> i64 {\nb0(v0: i64, v1: i64):\n    v2 = null\n    switch v0, [");
    let cases: Vec<String> = (0..8).map(|i| format!("t{i}: b{}", i + 1)).collect();
    text.push_str(&cases.join(", "));
    text.push_str("]\n");
    for i in 0..8 {
        text.push_str(&format!("b{}:\n    v{} = call @k{i}(v2, v1)\n    jump b9(v{})\n", i + 1, 10 + i, 10 + i));
    }
    text.push_str("b9(v3: i64):\n    return v3\n}\n");
    let mut j = jit();
    let (m, c) = compile(&mut j, &text);
    let mut ctx = TestCtx::new(0);
    for tag in 0..8 {
        let r = call(&m, &c, &mut ctx, "dispatch", &[Word::from_i64(tag), Word::from_i64(10)]).unwrap();
        assert_eq!(r[0].as_i64(), 10 * (tag + 1));
    }
}

const SUPPORT_CALLS: &str = "\
extern $test_sin(f64) -> f64
extern fallible $test_checked_sqrt(f64) -> f64

fn @sin_plus_sqrt(f64) -> f64 {
b0(v0: f64):
    v1 = call $test_sin(v0)
    v2 = call $test_checked_sqrt(v0)
    v3 = fadd v1, v2
    return v3
}

fn @outer(f64) -> (f64, bool) {
b0(v0: f64):
    v1 = call @sin_plus_sqrt(v0)
    v2 = fconst 0.0
    v3 = fcmp gt v1, v2
    return v1, v3
}
";

#[test]
fn support_calls_and_their_failures_unwind_through_callers() {
    let mut j = jit();
    let (m, c) = compile(&mut j, SUPPORT_CALLS);
    let mut ctx = TestCtx::new(0);
    let r = call(&m, &c, &mut ctx, "outer", &[Word::from_f64(4.0)]).unwrap();
    assert_eq!(r[0].as_f64(), 4.0f64.sin() + 2.0);
    assert!(r[1].as_bool());
    let r = call(&m, &c, &mut ctx, "outer", &[Word::from_f64(-4.0)]);
    assert_eq!(r, Err(CallError::Trapped(100)));
}

#[test]
fn many_results_go_through_an_out_pointer() {
    let mut j = jit();
    let (m, c) = compile(
        &mut j,
        "\
fn @four(i64, f64) -> (i64, f64, bool, i64) {
b0(v0: i64, v1: f64):
    v2 = iconst 1
    v3 = iadd v0, v2
    v4 = fconst 0.5
    v5 = fadd v1, v4
    v6 = icmp gt v0, v2
    v7 = imul v0, v0
    return v3, v5, v6, v7
}

fn @use_four(i64, f64) -> (f64, i64, bool) {
b0(v0: i64, v1: f64):
    v2, v3, v4, v5 = call @four(v0, v1)
    v6 = itof v2
    v7 = fadd v6, v3
    v8 = iadd v5, v2
    return v7, v8, v4
}
",
    );
    let mut ctx = TestCtx::new(0);
    let r = call(&m, &c, &mut ctx, "four", &[Word::from_i64(5), Word::from_f64(1.0)]).unwrap();
    assert_eq!((r[0].as_i64(), r[1].as_f64(), r[2], r[3].as_i64()), (6, 1.5, Word::from_bool(true), 25));
    let r = call(&m, &c, &mut ctx, "use_four", &[Word::from_i64(5), Word::from_f64(1.0)]).unwrap();
    assert_eq!((r[0].as_f64(), r[1].as_i64(), r[2].as_bool()), (7.5, 31, true));
}

#[test]
fn arena_slow_path_and_out_of_memory() {
    let mut j = jit();
    let (m, c) = compile(&mut j, LOOPS);
    // Small arrays fit in the first chunk after one slow allocation.
    let mut ctx = TestCtx::new(1 << 20);
    for n in 0..10 {
        call(&m, &c, &mut ctx, "sum_of_squares", &[Word::from_i64(n)]).unwrap();
    }
    assert!(ctx.slow_allocs < 10, "bump allocation should be inline: {} slow calls", ctx.slow_allocs);
    let mut ctx = TestCtx::new(1000);
    let r = call(&m, &c, &mut ctx, "squares", &[Word::from_i64(1000)]);
    assert_eq!(r, Err(CallError::Trapped(TrapCode::OutOfMemory.code())));
    assert_eq!(ctx.trap, Some((4, 8008, 0)));
    // A length whose byte size overflows is refused before multiplying.
    let mut ctx = TestCtx::new(usize::MAX);
    let r = call(&m, &c, &mut ctx, "squares", &[Word::from_i64(i64::MAX / 2)]);
    assert_eq!(r, Err(CallError::Trapped(TrapCode::OutOfMemory.code())));
    let mut ctx = TestCtx::new(1 << 20);
    let r = call(&m, &c, &mut ctx, "squares", &[Word::from_i64(-2)]);
    assert_eq!(r, Err(CallError::Trapped(TrapCode::NegativeLength.code())));
    assert_eq!(ctx.trap, Some((3, -2, 0)));
}

#[test]
fn trap_instruction_and_recursion() {
    let mut j = jit();
    let (m, c) = compile(
        &mut j,
        "\
fn @fact(i64) -> i64 {
b0(v0: i64):
    v1 = iconst 1
    v2 = icmp le v0, v1
    brif v2, b1, b2
b1:
    return v1
b2:
    v3 = isub v0, v1
    v4 = call @fact(v3)
    v5 = imul v0, v4
    return v5
}

fn @zip_check(i64, i64) -> i64 {
b0(v0: i64, v1: i64):
    v2 = icmp eq v0, v1
    brif v2, b1, b2
b1:
    v3 = call @fact(v0)
    return v3
b2:
    v6 = iconst 3
    trap lenmismatch(v6, v0, v1)
}
",
    );
    let mut ctx = TestCtx::new(0);
    let r = call(&m, &c, &mut ctx, "zip_check", &[Word::from_i64(10), Word::from_i64(10)]).unwrap();
    assert_eq!(r[0].as_i64(), 3_628_800);
    let r = call(&m, &c, &mut ctx, "zip_check", &[Word::from_i64(3), Word::from_i64(4)]);
    assert_eq!(r, Err(CallError::Trapped(TrapCode::LengthMismatch.code())));
    assert_eq!((ctx.trap, ctx.site), (Some((5, 3, 4)), 3));
}

#[test]
fn bools_selects_and_comparisons() {
    let mut j = jit();
    let (m, c) = compile(
        &mut j,
        "\
fn @logic(bool, bool, f64) -> (bool, i64) {
b0(v0: bool, v1: bool, v2: f64):
    v3 = and v0, v1
    v4 = not v3
    v5 = fcmp ne v2, v2
    v6 = xor v4, v5
    v7 = btoi v6
    v8 = iconst 10
    v9 = iconst 20
    v10 = select.i64 v0, v8, v9
    v11 = iadd v7, v10
    v12 = or v6, v1
    return v12, v11
}
",
    );
    let mut ctx = TestCtx::new(0);
    let b = Word::from_bool;
    for (x, y, z) in [(true, true, 1.0), (true, false, f64::NAN), (false, false, 0.0), (false, true, f64::NAN)] {
        let r = call(&m, &c, &mut ctx, "logic", &[b(x), b(y), Word::from_f64(z)]).unwrap();
        let v6 = !(x && y) ^ z.is_nan();
        assert_eq!(r[0], b(v6 || y), "{x} {y} {z}");
        assert_eq!(r[1].as_i64(), v6 as i64 + if x { 10 } else { 20 });
    }
}

#[test]
fn compiled_code_is_reused_and_outlives_later_compiles() {
    let mut j = jit();
    let (m1, c1) = compile(&mut j, LOOPS);
    let (m2, c2) = compile(&mut j, DIVISION);
    let mut ctx = TestCtx::new(1 << 20);
    for n in 0..1000 {
        let r = call(&m1, &c1, &mut ctx, "triangle", &[Word::from_i64(n)]).unwrap();
        assert_eq!(r[0].as_i64(), n * (n - 1) / 2);
    }
    let r = call(&m2, &c2, &mut ctx, "div", &[Word::from_i64(9), Word::from_i64(2)]).unwrap();
    assert_eq!(r[0].as_i64(), 4);
    // Entries keep working after the JIT is dropped (their code is then leaked, not freed).
    drop(j);
    let r = call(&m1, &c1, &mut ctx, "triangle", &[Word::from_i64(4)]).unwrap();
    assert_eq!(r[0].as_i64(), 6);
}

#[test]
fn wrong_argument_count_is_an_error() {
    let mut j = jit();
    let (m, c) = compile(&mut j, DIVISION);
    let mut ctx = TestCtx::new(0);
    let r = call(&m, &c, &mut ctx, "div", &[Word::from_i64(1)]);
    assert_eq!(r, Err(CallError::Arity { expected: 2, found: 1 }));
}

#[test]
fn compile_errors_are_values() {
    let mut j = jit();
    // An extern the table lacks.
    let m = parse("extern $nowhere(f64) -> f64\nfn @f() -> () {\nb0:\n    return\n}\n").unwrap();
    assert_eq!(j.compile(&m, &[]).unwrap_err(), JitError::MissingSupport("nowhere".into()));
    // An extern declared with another signature than the table's.
    let m = parse("extern $test_sin(i64) -> f64\nfn @f() -> () {\nb0:\n    return\n}\n").unwrap();
    assert!(matches!(j.compile(&m, &[]).unwrap_err(), JitError::SupportMismatch { .. }));
    // A fallible support function declared infallible.
    let m = parse("extern $test_checked_sqrt(f64) -> f64\nfn @f() -> () {\nb0:\n    return\n}\n").unwrap();
    assert!(matches!(j.compile(&m, &[]).unwrap_err(), JitError::SupportMismatch { .. }));
    // IR that does not verify.
    let m = parse("fn @f(f64) -> i64 {\nb0(v0: f64):\n    return v0\n}\n").unwrap();
    let e = j.compile(&m, &[]).unwrap_err();
    assert!(matches!(&e, JitError::Verify(es) if es.len() == 1), "{e}");
    // Without the intrinsics, a module that can trap or allocate is refused.
    let mut bare = Jit::new(JitConfig::default(), SupportTable::new()).unwrap();
    let m = parse(DIVISION).unwrap();
    assert_eq!(bare.compile(&m, &[]).unwrap_err(), JitError::MissingSupport(TRAP_SYMBOL.into()));
    // The JIT is still usable after all these errors.
    let (m, c) = compile(&mut j, DIVISION);
    let mut ctx = TestCtx::new(0);
    assert_eq!(call(&m, &c, &mut ctx, "div", &[Word::from_i64(8), Word::from_i64(2)]).unwrap()[0].as_i64(), 4);
}

#[test]
fn unreachable_blocks_and_unverified_mode() {
    // Unreachable blocks are dropped; with the IR verifier off, verified IR still compiles.
    let config = JitConfig { verify_ir: false, cranelift_verifier: true };
    let mut j = Jit::new(config, table()).unwrap();
    let (m, c) = compile(
        &mut j,
        "\
fn @f(i64) -> i64 {
b0(v0: i64):
    return v0
b1:
    v1 = iconst 2
    jump b2(v1)
b2(v2: i64):
    return v2
}
",
    );
    let mut ctx = TestCtx::new(0);
    assert_eq!(call(&m, &c, &mut ctx, "f", &[Word::from_i64(7)]).unwrap()[0].as_i64(), 7);
}

#[test]
fn a_cranelift_failure_is_an_error_and_the_jit_stays_usable() {
    // With the IR verifier off, a type error reaches Cranelift, whose verifier rejects it.
    let config = JitConfig { verify_ir: false, cranelift_verifier: true };
    let mut j = Jit::new(config, table()).unwrap();
    let bad = parse(
        "\
fn @good(i64) -> i64 {
b0(v0: i64):
    return v0
}

fn @bad(f64) -> i64 {
b0(v0: f64):
    v1 = call @good(v0)
    return v1
}
",
    )
    .unwrap();
    let all: Vec<FuncId> = bad.funcs.keys().collect();
    let e = j.compile(&bad, &all).unwrap_err();
    assert!(matches!(&e, JitError::Codegen { func, .. } if func == "bad"), "{e}");
    let (m, c) = compile(&mut j, DIVISION);
    let mut ctx = TestCtx::new(0);
    assert_eq!(call(&m, &c, &mut ctx, "div", &[Word::from_i64(9), Word::from_i64(3)]).unwrap()[0].as_i64(), 3);
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    /// A number below `n` (> 0).
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n as u64) as usize
    }
}

#[test]
fn every_module_that_verifies_compiles() {
    // Reorder, duplicate and drop lines of valid modules; whatever still verifies must compile.
    let sources = [LOOPS, CLOSURES, SUPPORT_CALLS, DIVISION];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut j = jit();
    let mut compiled = 0;
    for round in 0..600 {
        let src = sources[round % sources.len()];
        let mut lines: Vec<&str> = src.lines().collect();
        for _ in 0..1 + rng.below(2) {
            let i = rng.below(lines.len());
            match rng.below(3) {
                0 => {
                    lines.remove(i);
                }
                1 => lines.insert(rng.below(lines.len()), lines[i]),
                _ => {
                    let l = lines.remove(i);
                    lines.insert(rng.below(lines.len()), l);
                }
            }
        }
        let text = lines.join("\n") + "\n";
        let Ok(m) = parse(&text) else { continue };
        if ir::verify(&m).is_err() {
            continue;
        }
        let all: Vec<FuncId> = m.funcs.keys().collect();
        j.compile(&m, &all).unwrap_or_else(|e| panic!("{e}\n{text}"));
        compiled += 1;
    }
    assert!(compiled > 20, "only {compiled} mutants verified");
}

/// The start of `@run(n, len)` for the pairing tests: an array of `len` elements holding 0, 1, 2,
/// … as `v2`, then block `b6`, where each test's loop follows.
const RUN_PREFIX: &str = "\
fn @run(i64, i64) -> ptr {
b0(v0: i64, v1: i64):
    v2 = newarray v1, 8
    v20 = iconst 0
    jump b4(v20)
b4(v21: i64):
    v22 = icmp lt v21, v1
    brif v22, b5, b6
b5:
    v23 = itof v21
    v24 = elemaddr v2, v21, 8
    store v23, v24+0
    v25 = iconst 1
    v26 = iadd v21, v25
    jump b4(v26)
b6:
";

/// Elements `0..len` of the `Array Real` that `r` points to.
fn elements(r: Word, len: usize) -> Vec<f64> {
    (0..len).map(|k| unsafe { *r.as_ptr::<f64>().add(1 + k) }).collect()
}

/// `jit::vector` pairs a loop (its machine code adds with `addpd`) only when its counter steps by
/// one, each pointer by one element, the header's own test `i < n` decides it, its loads go through
/// the pointers it carries, it stores only `f64`s, and each check's index is `c + i`, `i + c`,
/// `i − c` or the same in both lanes against a length the same in both: a counter stepping by two
/// (`i + 2`, `1 + (i + 1)`), a pointer stepping by two elements, a header branching on another
/// condition, a load of a fixed address, an integer stored, a check of `i + i`, `i · 2` or `c − i`
/// or against a length `i + c` runs as written. Each loop adds 10 to the elements it reaches of an
/// array holding 0, 1, 2, …; the result (or the failing check's index) must be the scalar loop's
/// for every trip count, the last odd element and the empty loop included, so a pair whose second
/// check would fail is not run.
#[test]
fn pairs_only_loops_of_unit_steps_their_own_pointers_and_checks() {
    let template = RUN_PREFIX.to_string()
        + "\
    v30 = iconst 0
    v31 = elemaddr v2, v30, 8
    v32 = fconst 10.0
    v33 = icmp lt v1, v30
    v34 = iconst 2
    v35 = iconst 5
    v36 = iconst 20
    v37 = iconst 9
    v42 = iconst 8
    jump b1(v30, v31)
b1(v3: i64, v4: ptr):
    v5 = icmp lt v3, v0
    brif {COND}, b2, b3
b2:
{CHECK}    v6 = load.f64 {LOADP}+0
    v7 = fadd v6, v32
    store v7, v4+0
{INT}    v8 = iconst 1
{STEP}    v10 = iconst {PSTEP}
    v11 = elemaddr v4, v10, 8
    jump b1(v9, v11)
b3:
    return v2
}
";
    struct Loop<'a> {
        what: &'a str,
        paired: bool,
        /// The counter's step and its code (ending in `v9 = …`).
        step: (i64, &'a str),
        /// How many elements the pointer skips per iteration.
        skip: usize,
        own_test: bool,
        own_pointer: bool,
        /// The checked index's code (defining `v58`, or nothing to check `v3` itself), its value at
        /// `i`, and the length it is checked against (`v1` = 24, `v35` = 5, `v42` = 8, `v37` = 9,
        /// or `v57` = i + 5).
        check: Option<(&'a str, fn(i64) -> i64, &'a str)>,
        /// The counter stored as well (its bits).
        int: bool,
    }
    let unit = (1, "    v9 = iadd v3, v8\n");
    let plain = Loop {
        what: "",
        paired: true,
        step: unit,
        skip: 0,
        own_test: true,
        own_pointer: true,
        check: None,
        int: false,
    };
    let loops = [
        Loop { what: "unit steps", ..plain },
        Loop { what: "i + 2", paired: false, step: (2, "    v40 = iconst 2\n    v9 = iadd v3, v40\n"), ..plain },
        Loop {
            what: "1 + (i + 1)",
            paired: false,
            step: (2, "    v41 = iadd v3, v8\n    v9 = iadd v8, v41\n"),
            ..plain
        },
        Loop { what: "a pointer stepping by two", paired: false, skip: 1, ..plain },
        Loop { what: "another condition", paired: false, own_test: false, ..plain },
        Loop { what: "a fixed address loaded", paired: false, own_pointer: false, ..plain },
        Loop { what: "an integer stored", paired: false, int: true, ..plain },
        Loop { what: "a check of i + 5", check: Some(("    v58 = iadd v3, v35\n", |i| i + 5, "v1")), ..plain },
        Loop {
            what: "a check of (i + 5) - 2",
            check: Some(("    v56 = iadd v3, v35\n    v58 = isub v56, v34\n", |i| i + 3, "v1")),
            ..plain
        },
        Loop { what: "a check of i against 5", check: Some(("    v58 = iadd v3, v30\n", |i| i, "v35")), ..plain },
        Loop {
            what: "a check of 5 + i against 9",
            check: Some(("    v58 = iadd v35, v3\n", |i| i + 5, "v37")),
            ..plain
        },
        Loop {
            what: "a check of (i + 5) - 2 against 9",
            check: Some(("    v56 = iadd v3, v35\n    v58 = isub v56, v34\n", |i| i + 3, "v37")),
            ..plain
        },
        Loop {
            what: "a check of (i + 5) - 2 against 8",
            check: Some(("    v56 = iadd v3, v35\n    v58 = isub v56, v34\n", |i| i + 3, "v42")),
            ..plain
        },
        Loop { what: "a check of i itself against 5", check: Some(("", |i| i, "v35")), ..plain },
        Loop {
            what: "a check of (i - i) + i against 5",
            check: Some(("    v56 = isub v3, v3\n    v58 = iadd v56, v3\n", |i| i, "v35")),
            ..plain
        },
        Loop {
            what: "a check of i + i",
            paired: false,
            check: Some(("    v58 = iadd v3, v3\n", |i| 2 * i, "v1")),
            ..plain
        },
        Loop {
            what: "a check of i * 2",
            paired: false,
            check: Some(("    v58 = imul v3, v34\n", |i| 2 * i, "v1")),
            ..plain
        },
        Loop {
            what: "a check of 20 - i",
            paired: false,
            check: Some(("    v58 = isub v36, v3\n", |i| 20 - i, "v1")),
            ..plain
        },
        Loop {
            what: "a check against i + 5",
            paired: false,
            check: Some(("    v57 = iadd v3, v35\n    v58 = iadd v34, v30\n", |_| 2, "v57")),
            ..plain
        },
    ];
    let mut j = jit();
    for l in loops {
        let check = l.check.map_or(String::new(), |(code, _, len)| {
            let index = if code.is_empty() { "v3" } else { "v58" };
            format!("{code}    v59 = iconst 7\n    boundscheck {index}, {len}, v59\n")
        });
        let text = template
            .replace("{STEP}", l.step.1)
            .replace("{PSTEP}", &l.skip.to_string())
            .replace("{COND}", if l.own_test { "v5" } else { "v33" })
            .replace("{LOADP}", if l.own_pointer { "v4" } else { "v31" })
            .replace("{CHECK}", &check)
            .replace("{INT}", if l.int { "    store v3, v4+0\n" } else { "" });
        let what = l.what;
        let (m, c) = compile(&mut j, &text);
        let code = j.disassemble(&m, m.func_by_name("run").unwrap()).unwrap();
        assert_eq!(code.contains("addpd"), l.paired, "{what}: paired?\n{text}\n{code}");
        let len = 24usize;
        for n in 0..=9i64 {
            // The scalar loop: iteration t at counter t·step, checking its index first, writing
            // element t·(1 + skip) from that element or element 0, then perhaps the counter.
            let mut want: Vec<f64> = (0..len).map(|k| k as f64).collect();
            let mut fails = None;
            let (mut i, mut t) = (0, 0usize);
            while l.own_test && i < n {
                if let Some((_, index, bound)) = l.check {
                    let bound = match bound {
                        "v1" => len as i64,
                        "v35" => 5,
                        "v42" => 8,
                        "v37" => 9,
                        _ => i + 5,
                    };
                    if index(i) as u64 >= bound as u64 {
                        fails = Some(index(i));
                        break;
                    }
                }
                let k = t * (1 + l.skip);
                want[k] = if l.own_pointer { want[k] } else { want[0] } + 10.0;
                if l.int {
                    want[k] = f64::from_bits(i as u64);
                }
                i += l.step.0;
                t += 1;
            }
            let mut ctx = TestCtx::new(1 << 20);
            let r = call(&m, &c, &mut ctx, "run", &[Word::from_i64(n), Word::from_i64(len as i64)]);
            match (r, fails) {
                (Ok(r), None) => {
                    let got = elements(r[0], len);
                    assert_eq!(
                        got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                        want.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                        "{what}, n = {n}:\n{text}"
                    );
                }
                (Err(_), Some(index)) => {
                    assert_eq!(ctx.trap.map(|t| t.1), Some(index), "{what}, n = {n}: the failing index\n{text}");
                }
                (r, fails) => panic!(
                    "{what}, n = {n}: {:?} where the scalar loop {}\n{text}",
                    r.map(|_| ()),
                    match fails {
                        Some(k) => format!("fails at index {k}"),
                        None => "succeeds".to_string(),
                    }
                ),
            }
        }
    }
}

/// Two pointers into one array that the loop stores through: paired at one offset (`a.[i] <-
/// a.[i] + 10` through two pointers), not at two (`a.[i + 1] <- a.[i] + 10`, where each element
/// reads the one the previous iteration wrote).
#[test]
fn pairs_only_pointers_into_one_array_at_one_offset() {
    let template = RUN_PREFIX.to_string()
        + "\
    v30 = iconst 0
    v38 = iconst 1
    v31 = elemaddr v2, v30, 8
    v39 = elemaddr v2, {OFF}, 8
    v32 = fconst 10.0
    jump b1(v30, v31, v39)
b1(v3: i64, v4: ptr, v12: ptr):
    v5 = icmp lt v3, v0
    brif v5, b2, b3
b2:
    v6 = load.f64 v4+0
    v7 = fadd v6, v32
    store v7, v12+0
    v8 = iconst 1
    v9 = iadd v3, v8
    v10 = iconst 0
    v11 = elemaddr v4, v10, 8
    v13 = elemaddr v12, v10, 8
    jump b1(v9, v11, v13)
b3:
    return v2
}
";
    let mut j = jit();
    for (off, paired) in [(0usize, true), (1, false)] {
        let text = template.replace("{OFF}", if off == 0 { "v30" } else { "v38" });
        let (m, c) = compile(&mut j, &text);
        let code = j.disassemble(&m, m.func_by_name("run").unwrap()).unwrap();
        assert_eq!(code.contains("addpd"), paired, "offset {off}: paired?\n{code}");
        let len = 24usize;
        for n in 0..=9i64 {
            let mut want: Vec<f64> = (0..len).map(|k| k as f64).collect();
            for i in 0..n as usize {
                want[i + off] = want[i] + 10.0;
            }
            let mut ctx = TestCtx::new(1 << 20);
            let r = call(&m, &c, &mut ctx, "run", &[Word::from_i64(n), Word::from_i64(len as i64)]).unwrap();
            let got = elements(r[0], len);
            assert_eq!(got, want, "offset {off}, n = {n}");
        }
    }
}

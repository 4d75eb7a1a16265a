//! Round-trip and verifier tests over hand-written IR text.

use super::*;

/// A module using every instruction and declaration form.
const EVERYTHING: &str = "\
extern $nabla_sin(f64) -> f64
extern fallible $nabla_bag_new(i64) -> ptr
extern $nabla_noop() -> ()
tag t0 = @lam_add env(f64)
tag t1 = @lam_mul env(f64, i64)

fn @lam_add(ptr, f64) -> f64 {
b0(v0: ptr, v1: f64):
    v2 = load.f64 v0+0
    v3 = fadd v1, v2
    return v3
}

fn @lam_mul(ptr, f64) -> f64 {
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
    switch v0, [t0: b1, t1: b2(v1)]
b1:
    v3 = call @lam_add(v1, v2)
    jump b3(v3)
b2(v4: ptr):
    v5 = call @lam_mul(v4, v2)
    jump b3(v5)
b3(v6: f64):
    return v6
}

fn @everything(i64, f64, bool, ptr) -> (f64, i64, bool) {
b0(v0: i64, v1: f64, v2: bool, v3: ptr):
    v4 = iconst -9223372036854775808
    v5 = fconst -0.0
    v6 = fconst 0x7ff0000000000000
    v7 = fconst 1e-7
    v8 = bconst false
    v9 = null
    v10 = tag t1
    v11 = ineg v0
    v12 = fneg v1
    v13 = fabs v1
    v14 = fsqrt v13
    v15 = not v2
    v16 = btoi v15
    v17 = iadd v0, v11
    v18 = isub v17, v16
    v19 = imul v18, v0
    v20 = sdiv v19, v0
    v21 = srem v20, v0
    v22 = fadd v12, v14
    v23 = fsub v22, v5
    v24 = fmul v23, v7
    v25 = fdiv v24, v6
    v26 = and v2, v8
    v27 = or v26, v15
    v28 = xor v27, v2
    v29 = icmp le v21, v4
    v30 = icmp eq v9, v3
    v31 = fcmp ne v25, v1
    v32 = select.f64 v31, v25, v1
    v33 = alloc 16
    store v32, v33+0
    store v10, v33+8
    v34 = load.f64 v33-8
    v35 = newarray v0, 16
    v36 = arraylen v35
    boundscheck v21, v36, v0
    v37 = elemaddr v35, v21, 16
    store v34, v37+8
    v38 = call $nabla_sin(v34)
    v39 = call $nabla_bag_new(v0)
    call $nabla_noop()
    v40 = call @apply(v10, v33, v38)
    brif v29, b1(v40), b2
b1(v41: f64):
    return v41, v36, v30
b2:
    trap lenmismatch(v4, v0, v36)
}
";

/// Parses, checks that printing gives the text back exactly, and verifies.
fn round_trip(text: &str) -> Module {
    let m = parse(text).unwrap_or_else(|e| panic!("parse error {e}"));
    assert_eq!(print(&m), text);
    let again = parse(&print(&m)).unwrap();
    assert_eq!(print(&again), print(&m));
    m
}

#[test]
fn every_form_round_trips_and_verifies() {
    let m = round_trip(EVERYTHING);
    verify(&m).unwrap_or_else(|es| panic!("{}", es[0]));
    assert_eq!(m.funcs.len(), 4);
    assert_eq!(m.tag_signature(TagId::from_u32(1)), Some(Signature::new(vec![Type::F64], vec![Type::F64])));
}

#[test]
fn numbers_are_kept_as_written() {
    // Holes in the numbering and blocks laid out out of order survive the round trip.
    let text = "\
fn @f(i64) -> i64 {
b0(v0: i64):
    jump b7(v0)
b3(v9: i64):
    return v9
b7(v5: i64):
    v12 = iadd v5, v5
    jump b3(v12)
}
";
    let m = round_trip(text);
    verify(&m).unwrap();
}

#[test]
fn builder_output_round_trips() {
    let mut m = Module::new();
    let sig = Signature::new(vec![Type::I64], vec![Type::I64]);
    let mut f = Function::new("count", sig);
    let mut b = Builder::new(&mut f);
    let n = b.params(b.current_block())[0];
    let zero = b.iconst(0);
    let (header, hp) = b.create_block(&[Type::I64, Type::I64]);
    let (body, _) = b.create_block(&[]);
    let (exit, _) = b.create_block(&[]);
    b.jump(header, vec![zero, zero]);
    b.switch_to(header);
    let done = b.icmp(Cmp::Ge, hp[0], n);
    b.brif(done, BlockCall::new(exit, vec![]), BlockCall::new(body, vec![]));
    b.switch_to(body);
    let one = b.iconst(1);
    let i2 = b.binary(BinaryOp::Iadd, hp[0], one);
    let acc2 = b.binary(BinaryOp::Iadd, hp[1], hp[0]);
    b.jump(header, vec![i2, acc2]);
    b.switch_to(exit);
    b.ret(vec![hp[1]]);
    m.funcs.push(f);
    verify(&m).unwrap();
    let text = print(&m);
    assert_eq!(
        text,
        "\
fn @count(i64) -> i64 {
b0(v0: i64):
    v1 = iconst 0
    jump b1(v1, v1)
b1(v2: i64, v3: i64):
    v4 = icmp ge v2, v0
    brif v4, b3, b2
b2:
    v5 = iconst 1
    v6 = iadd v2, v5
    v7 = iadd v3, v2
    jump b1(v6, v7)
b3:
    return v3
}
"
    );
    round_trip(&text);
}

#[test]
fn floats_print_exactly() {
    for x in [0.1, 1e-7, 660.0, -0.0, f64::MIN_POSITIVE, 1e300, f64::NAN, f64::NEG_INFINITY] {
        let text =
            format!("fn @f() -> f64 {{\nb0:\n    v0 = fconst {}\n    return v0\n}}\n", print::f64_text(x.to_bits()));
        let m = round_trip(&text);
        let f = &m.funcs[FuncId::from_u32(0)];
        let first = f.blocks[f.entry().unwrap()].insts[0];
        assert_eq!(f.insts[first].op, Op::Fconst(x.to_bits()));
    }
}

#[test]
fn syntax_errors_have_positions() {
    let cases = [
        ("fn @f() -> i64 {\nb0:\n    v0 = iconst x\n}\n", 3, "expected a 64-bit integer"),
        ("fn @f() -> i64 {\nb0:\n    return v3\n}\n", 3, "value `v3` is used but never defined"),
        ("fn @f() -> i64 {\nb0:\n    jump b4\n}\n", 3, "block `b4` is used but never defined"),
        ("fn @f() -> i64 {\nb0:\n    v0 = iconst 1\n    v0 = iconst 2\n}\n", 4, "value `v0` is defined twice"),
        ("fn @f() -> i64 {\nb0:\n    v0 = frob v1\n}\n", 3, "unknown instruction `frob`"),
        ("fn @f() -> i64 {\nb0:\n    v0 = call @g()\n}\n", 3, "no function `@g`"),
        ("fn @f() -> i64 {\nb0:\n    v0, v1 = iconst 1\n}\n", 3, "defines 1 result(s), not 2"),
        ("tag t1 = @f env()\n", 1, "tags are declared in order"),
        ("fn @f() -> i64 {\nb0:\n    v0 = load.i32 v1+0\n}\n", 3, "unknown type `i32`"),
    ];
    for (text, line, msg) in cases {
        let e = parse(text).expect_err(text);
        assert_eq!(e.line, line, "{text}: {e}");
        assert!(e.message.contains(msg), "{text}: {e}");
    }
}

/// The kinds of the errors the verifier reports for `text`.
fn errors(text: &str) -> Vec<VerifyErrorKind> {
    let m = parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    match verify(&m) {
        Ok(()) => panic!("verifier accepted:\n{text}"),
        Err(es) => es.into_iter().map(|e| e.kind).collect(),
    }
}

#[test]
fn verifier_rejects_use_not_dominated() {
    let text = "\
fn @f(bool) -> i64 {
b0(v0: bool):
    brif v0, b1, b2
b1:
    v1 = iconst 1
    jump b2
b2:
    return v1
}
";
    assert_eq!(errors(text), vec![VerifyErrorKind::NotDominated(Value::from_u32(1))]);
}

#[test]
fn verifier_rejects_use_before_definition_in_a_block() {
    let text = "\
fn @f() -> i64 {
b0:
    v1 = iadd v2, v2
    v2 = iconst 1
    return v1
}
";
    let kinds = errors(text);
    assert_eq!(kinds, vec![VerifyErrorKind::NotDominated(Value::from_u32(2)); 2]);
}

#[test]
fn verifier_rejects_operand_type() {
    let text = "\
fn @f(f64) -> i64 {
b0(v0: f64):
    v1 = iadd v0, v0
    return v1
}
";
    let e = &verify(&parse(text).unwrap()).unwrap_err()[0];
    assert_eq!(e.kind, VerifyErrorKind::OperandType { index: 0, expected: "i64", found: Type::F64 });
    assert_eq!(e.to_string(), "in @f, b0, `v1 = iadd v0, v0`: operand 1 has type f64, expected i64");
}

#[test]
fn verifier_rejects_branch_arity_and_argument_types() {
    let text = "\
fn @f(i64) -> i64 {
b0(v0: i64):
    jump b1
b1(v1: i64):
    jump b2(v1, v1)
b2(v2: f64, v3: i64):
    return v3
}
";
    let b = Block::from_u32;
    assert_eq!(
        errors(text),
        vec![
            VerifyErrorKind::BranchArity { block: b(1), expected: 1, found: 0 },
            VerifyErrorKind::BranchArgType { block: b(2), index: 0, expected: Type::F64, found: Type::I64 },
        ]
    );
}

#[test]
fn verifier_rejects_missing_terminator_and_misplaced_terminator() {
    let text = "\
fn @f() -> () {
b0:
    return
    v0 = iconst 1
}
";
    assert_eq!(errors(text), vec![VerifyErrorKind::MissingTerminator, VerifyErrorKind::TerminatorNotLast]);
}

#[test]
fn verifier_rejects_return_mismatch() {
    let text = "\
fn @f(f64) -> (i64, f64) {
b0(v0: f64):
    return v0, v0
}
";
    assert_eq!(errors(text), vec![VerifyErrorKind::ReturnType { index: 0, expected: Type::I64, found: Type::F64 }]);
    let text = "fn @f(f64) -> (i64, f64) {\nb0(v0: f64):\n    return v0\n}\n";
    assert_eq!(errors(text), vec![VerifyErrorKind::ReturnArity { expected: 2, found: 1 }]);
}

#[test]
fn verifier_rejects_calls_not_matching_signatures() {
    let text = "\
extern $ext(f64) -> f64
fn @g(i64, i64) -> i64 {
b0(v0: i64, v1: i64):
    return v0
}
fn @f(i64) -> f64 {
b0(v0: i64):
    v1 = call @g(v0)
    v2 = call $ext(v0)
    return v2
}
";
    assert_eq!(
        errors(text),
        vec![
            VerifyErrorKind::CallArity { callee: "@g".into(), expected: 2, found: 1 },
            VerifyErrorKind::CallArgType { callee: "$ext".into(), index: 0, expected: Type::F64, found: Type::I64 },
        ]
    );
}

#[test]
fn verifier_rejects_call_result_count_made_by_hand() {
    // The parser takes result types from the callee, so build the mismatch directly.
    let mut m = parse("fn @g() -> (i64, i64) {\nb0:\n    v0 = iconst 1\n    return v0, v0\n}\n").unwrap();
    let mut f = Function::new("f", Signature::new(vec![], vec![]));
    let mut b = Builder::new(&mut f);
    b.call(FuncId::from_u32(0), &[Type::I64], vec![]);
    b.ret(vec![]);
    m.funcs.push(f);
    let es = verify(&m).unwrap_err();
    assert_eq!(es[0].kind, VerifyErrorKind::ResultCount { expected: 2, found: 1 });
}

#[test]
fn verifier_rejects_switch_on_tags_of_different_signatures() {
    let text = "\
tag t0 = @a env()
tag t1 = @b env()
fn @a(ptr, f64) -> f64 {
b0(v0: ptr, v1: f64):
    return v1
}
fn @b(ptr, i64) -> i64 {
b0(v0: ptr, v1: i64):
    return v1
}
fn @f(i64) -> () {
b0(v0: i64):
    switch v0, [t0: b1, t1: b1]
b1:
    return
}
";
    let sig = |t| Signature::new(vec![t], vec![t]);
    assert_eq!(
        errors(text),
        vec![VerifyErrorKind::CaseSignature {
            tag: TagId::from_u32(1),
            expected: sig(Type::F64),
            found: sig(Type::I64)
        }]
    );
}

#[test]
fn verifier_rejects_duplicate_and_empty_switch_cases() {
    let text = "\
tag t0 = @a env()
fn @a(ptr) -> () {
b0(v0: ptr):
    return
}
fn @f(i64) -> () {
b0(v0: i64):
    switch v0, [t0: b1, t0: b1]
b1:
    switch v0, []
}
";
    assert_eq!(errors(text), vec![VerifyErrorKind::DuplicateCase(TagId::from_u32(0)), VerifyErrorKind::EmptySwitch]);
}

#[test]
fn verifier_rejects_malformed_tags() {
    let text = "\
tag t0 = @a env(f64)
tag t1 = @b env()
fn @a(ptr) -> i64 {
b0(v0: ptr):
    v1 = load.i64 v0+0
    return v1
}
fn @b(i64) -> () {
b0(v0: i64):
    return
}
";
    assert_eq!(
        errors(text),
        vec![
            VerifyErrorKind::EnvFieldAccess { tag: TagId::from_u32(0), offset: 0, ty: Type::I64 },
            VerifyErrorKind::TagFunctionSignature(TagId::from_u32(1)),
        ]
    );
}

#[test]
fn verifier_rejects_entry_mismatch_and_branch_to_entry() {
    let text = "\
fn @f(i64) -> () {
b0(v0: f64):
    jump b0(v0)
}
";
    assert_eq!(
        errors(text),
        vec![
            VerifyErrorKind::EntryParams { expected: vec![Type::I64], found: vec![Type::F64] },
            VerifyErrorKind::BranchToEntry,
        ]
    );
}

#[test]
fn verifier_rejects_bad_comparisons_and_selects() {
    let text = "\
fn @f(bool, i64, f64) -> i64 {
b0(v0: bool, v1: i64, v2: f64):
    v3 = icmp lt v0, v0
    v4 = icmp eq v1, v2
    v5 = select.i64 v1, v1, v1
    return v5
}
";
    assert_eq!(
        errors(text),
        vec![
            VerifyErrorKind::OrderedCompare(Type::Bool),
            VerifyErrorKind::OperandsDiffer,
            VerifyErrorKind::OperandType { index: 0, expected: "bool", found: Type::I64 },
        ]
    );
}

#[test]
fn verifier_rejects_module_level_mistakes() {
    let text = "\
extern $two() -> (i64, i64)
fn @f() -> () {
b0:
    return
}
";
    assert_eq!(errors(text), vec![VerifyErrorKind::ExternReturnsTooMany("two".into())]);
    let mut m = parse("fn @f() -> () {\nb0:\n    return\n}\n").unwrap();
    let dup = m.funcs[FuncId::from_u32(0)].clone();
    m.funcs.push(dup);
    let mut bad = Function::new("has space", Signature::default());
    Builder::new(&mut bad).ret(vec![]);
    m.funcs.push(bad);
    let kinds: Vec<_> = verify(&m).unwrap_err().into_iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![VerifyErrorKind::DuplicateFunction("f".into()), VerifyErrorKind::InvalidName("has space".into())]
    );
}

#[test]
fn verifier_rejects_unknown_block_made_by_hand() {
    let mut m = Module::new();
    let mut f = Function::new("f", Signature::default());
    let ghost = f.blocks.push(BlockData::default()); // allocated but never laid out
    Builder::new(&mut f).jump(ghost, vec![]);
    m.funcs.push(f);
    let es = verify(&m).unwrap_err();
    assert_eq!(es[0].kind, VerifyErrorKind::UnknownBlock(ghost));
}

#[test]
fn unreachable_blocks_are_allowed() {
    let text = "\
fn @f() -> i64 {
b0:
    v0 = iconst 1
    return v0
b1:
    v1 = iconst 2
    jump b2(v1)
b2(v2: i64):
    return v2
}
";
    verify(&round_trip(text)).unwrap();
}

#[test]
fn dominators_of_a_loop() {
    let m = parse(
        "\
fn @f(bool) -> () {
b0(v0: bool):
    jump b1
b1:
    brif v0, b2, b3
b2:
    jump b1
b3:
    return
}
",
    )
    .unwrap();
    let f = &m.funcs[FuncId::from_u32(0)];
    let d = cfg::Dominators::compute(f);
    let b = Block::from_u32;
    assert_eq!(cfg::reverse_postorder(f)[0], b(0));
    assert!(d.dominates(b(1), b(2)) && d.dominates(b(1), b(3)) && !d.dominates(b(2), b(3)));
    assert_eq!(d.idom(b(3)), Some(b(1)));
}

/// A small deterministic generator (xorshift64*), so fuzz-style tests are reproducible.
struct Rng(u64);

impl Rng {
    /// The next pseudo-random number.
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// A number below `n` (> 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `text` with one random edit: a deletion, an insertion of a token, or a line moved.
fn mutate(rng: &mut Rng, text: &str) -> String {
    const TOKENS: &[&str] = &[
        "v3",
        "v41",
        "b1",
        "b9",
        "t0",
        "t7",
        ",",
        "(",
        ")",
        "{",
        "}",
        "[",
        "]",
        ":",
        "=",
        "\n",
        "fn ",
        "@apply",
        "$nabla_sin",
        "iconst ",
        "-",
        "+8",
        "0x",
        "1e",
        "select.ptr ",
        "jump b0",
        "return",
        "ptr",
        "bool",
    ];
    let chars: Vec<char> = text.chars().collect();
    let at = rng.below(chars.len() + 1);
    match rng.below(3) {
        0 => {
            let end = (at + 1 + rng.below(8)).min(chars.len());
            chars[..at].iter().chain(&chars[end.max(at)..]).collect()
        }
        1 => {
            let tok = TOKENS[rng.below(TOKENS.len())];
            chars[..at].iter().collect::<String>() + tok + &chars[at..].iter().collect::<String>()
        }
        _ => {
            let mut lines: Vec<&str> = text.lines().collect();
            let (i, j) = (rng.below(lines.len()), rng.below(lines.len()));
            let line = lines.remove(i);
            lines.insert(j, line);
            lines.join("\n") + "\n"
        }
    }
}

#[test]
fn mutated_text_never_panics_and_what_verifies_round_trips() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut parsed, mut verified) = (0, 0);
    for _ in 0..3000 {
        let mut text = EVERYTHING.to_string();
        for _ in 0..1 + rng.below(3) {
            text = mutate(&mut rng, &text);
        }
        let Ok(m) = parse(&text) else { continue };
        parsed += 1;
        let printed = print(&m);
        if verify(&m).is_ok() {
            verified += 1;
            let again = parse(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
            assert_eq!(print(&again), printed);
        }
    }
    // The edits must exercise both the parser's and the verifier's error paths.
    assert!(parsed > 100 && verified > 30 && verified < parsed, "parsed {parsed}, verified {verified}");
}

/// Found by fuzzing (`ir` target): value and block numbers need not be dense, and one huge
/// number used to allocate its whole arena (gigabytes). A text may ask for slots in proportion
/// to its length; past that, a located error.
#[test]
fn huge_value_and_block_numbers_are_errors_not_allocations() {
    for text in [
        "fn @main() -> i64 {\nb0:\n    v4000000000 = iconst 1\n    return v4000000000\n}\n",
        "fn @main() -> i64 {\nb4000000000:\n    v0 = iconst 1\n    return v0\n}\n",
        "fn @main() -> i64 {\nb0:\n    v0 = iconst 1\n    jump b4294967295\n}\n",
    ] {
        let e = parse(text).unwrap_err();
        assert!(e.message.contains("numbered too high"), "{e:?}");
    }
    // Holes below the budget are still accepted.
    let m = parse("fn @main() -> i64 {\nb0:\n    v1000 = iconst 1\n    return v1000\n}\n").unwrap();
    crate::ir::verify(&m).unwrap();
}

/// `ctCheck'`'s shape word and indices give back the path they encode, and the message names it.
#[test]
fn cotangent_paths_round_trip() {
    use CotangentStep::{Component as C, Element as E};
    let path = [C(2), E(7), C(1), E(0), E(123456789)];
    let steps: Vec<Option<i64>> = path.iter().map(|s| if let C(k) = s { Some(*k) } else { None }).collect();
    let shape = cotangent_shape(&steps).unwrap();
    assert_eq!(cotangent_path(shape, &[7, 0, 123456789]).unwrap(), path);
    assert_eq!(cotangent_path(shape, &[7, 0]), None);
    assert_eq!(cotangent_path(0, &[]).unwrap(), []);
    assert_eq!(
        cotangent_message(&path[..2], 2, 3),
        "vjp: the cotangent does not match the function's output at component 2, element 7: the output has length 2 \
         but the cotangent has length 3"
    );
    // The deepest path the word holds, and what does not fit.
    let deepest = [Some(126); COTANGENT_MAX_STEPS];
    let s = cotangent_shape(&deepest).unwrap();
    assert_eq!(cotangent_path(s, &[]).unwrap(), vec![C(126); COTANGENT_MAX_STEPS]);
    assert_eq!(cotangent_shape(&[None; COTANGENT_MAX_STEPS + 1]), None);
    assert_eq!(cotangent_shape(&[Some(127)]), None);
    // A pairing check's word is the complement of the same path's: negative, so the message
    // says which check failed.
    let p = pairing_shape(&steps).unwrap();
    assert!(p < 0);
    assert_eq!(shape_check_message(shape, &[7, 0, 123456789], 2, 3), Some(cotangent_message(&path, 2, 3)));
    assert_eq!(
        shape_check_message(p, &[7, 0, 123456789], 2, 3).unwrap(),
        "the tangent does not match the dual vector it is paired with at component 2, element 7, component 1, \
         element 0, element 123456789: the dual vector has length 2 but the tangent has length 3"
    );
    assert_eq!(shape_check_message(pairing_shape(&[]).unwrap(), &[], 2, 1), Some(pairing_message(&[], 2, 1)));
    assert_eq!(shape_check_message(p, &[7], 2, 3), None);
}

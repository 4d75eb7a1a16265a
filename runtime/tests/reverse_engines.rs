//! Compiled reverse mode against the reference interpreter's pullback reducer: every example that
//! differentiates runs under both engines; where the compiled engine compiles it (no fallback
//! note) the values agree within 1e-9 relative (NaN matching NaN), and the examples listed in
//! `MUST_COMPILE` must compile. Errors must be identical.

mod pullback_gen;

use pullback_gen::{close, reals};

/// First-order and nested gradients that the transform compiles today.
const MUST_COMPILE: &[&str] = &[
    "gradient_descent",
    "grad_through_oplus",
    "paper_a2_church_sum",
    "paper_ex31_pullback",
    "paper_ex31_trace",
    "paper_ex33_anf",
    "pb_arrays_of_arrays",
    "pb_arrays_three_deep",
    "pb_arrays_of_tuples_with_arrays",
    "pb_closures_chosen_by_if",
    "pb_oplus_chosen_change",
    "pb_oplus_array_change",
    "pb_oplus_nested_change",
    "pb_kmeans_dir",
    "pb_nearest",
    "pb_dual_applied_nested",
    "pb_dual_maps",
    "pb_dual_maps_arrays",
    "pb_unstar_dual_maps_arrays",
    "pb_nested_explicit_array",
    "pb_star_unstar",
    "pb_build_index",
    "pb_church_sum_scaled",
    "pb_built_functions",
    "pb_closure",
    "pb_confusion",
    "pb_discrete_input",
    "pb_dot",
    "pb_floor_round",
    "pb_fold_closure",
    "pb_fold_carry_activity",
    "pb_fused_sum",
    "pb_fused_fold",
    "pb_builtin_as_function",
    "pb_closures_in_tuples",
    "pb_closures_in_arrays",
    "pb_closures_computed_index",
    "pb_closures_from_producers",
    "pb_nested_zero_gradient",
    "pb_fold_product",
    "pb_function_input",
    "pb_gradient_descent",
    "pb_hessian_vector",
    "pb_hvp_array",
    "pb_hvp_array_closure",
    "pb_hvp_array_fold",
    "pb_iterate_array_carry",
    "pb_if_branch",
    "pb_iterate",
    "pb_jacobian",
    "pb_kinks",
    "pb_least_squares",
    "pb_let_pattern",
    "pb_map_sum",
    "pb_nested_product",
    "pb_polynomial",
    "pb_pullback_tangent",
    "pb_sqrt_div",
    "pb_symbolic_zero",
    "pb_transcendental",
    "pb_tuple_input",
    "pb_vjp",
    "pb_vjp_deep",
    "pb_while",
    "pb_while_solver",
    "pb_zipwith",
];

#[test]
fn compiled_gradients_match_the_reducer() {
    frontend::with_big_stack(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let mut paths: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        paths.sort();
        let mut compiled = Vec::new();
        let mut failures = Vec::new();
        for p in paths {
            if p.extension().is_none_or(|e| e != "nbl") {
                continue;
            }
            let src = std::fs::read_to_string(&p).unwrap();
            let stem = p.file_stem().unwrap().to_string_lossy().to_string();
            if !["grad", "vjp", "jac", "pullback", "dual", "star", "omega"].iter().any(|w| src.contains(w)) {
                continue;
            }
            let Ok((_, mono)) = runtime::prepare(&src, "main") else { continue };
            let interp = runtime::interp::run(&mono).map_err(|d| d.message);
            let jit = runtime::engine::run(&mono).map_err(|d| d.message);
            match (interp, jit) {
                (Ok(a), Ok(r)) => {
                    if r.note.is_none() {
                        compiled.push(stem.clone());
                    }
                    // With a note, the sites it names ran on the interpreter and the rest compiled.
                    if !close(&reals(&a), &reals(&r.value)) {
                        failures.push(format!("{stem}: interpreter {a}, compiled {}", r.value));
                    }
                }
                (Err(a), Err(b)) if a == b => {}
                (a, b) => failures.push(format!("{stem}: interpreter {a:?}, compiled {:?}", b.map(|r| r.value))),
            }
        }
        for m in MUST_COMPILE {
            if !compiled.iter().any(|c| c == m) {
                failures.push(format!("{m} falls back to the interpreter"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    });
}

/// Gradients through nested data (`Array (Array Real)`, three deep, arrays of tuples holding
/// arrays), compiled with compaction after every iteration and released memory poisoned: the
/// accumulators nested at any depth are updated in place and only their `f64`s are written
/// (`accAt'` stores back no pointer), so no update is lost and nothing outlives a release.
#[test]
fn deep_accumulators_survive_eager_compaction() {
    frontend::with_big_stack(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        for name in ["pb_arrays_of_arrays", "pb_arrays_three_deep", "pb_arrays_of_tuples_with_arrays"] {
            let src = std::fs::read_to_string(dir.join(format!("{name}.nbl"))).unwrap();
            let (_, mono) = runtime::prepare(&src, "main").unwrap();
            let a = runtime::interp::run(&mono).unwrap();
            let mut ctx = runtime::native::CallCtx::new(runtime::native::DEFAULT_ARENA_LIMIT);
            ctx.set_compact_min(0);
            ctx.set_checking(true);
            let r = runtime::engine::run_in(&mono, &mut ctx).unwrap();
            assert!(r.note.is_none(), "{name}: {:?}", r.note);
            assert!(close(&reals(&a), &reals(&r.value)), "{name}: interpreter {a}, compiled {}", r.value);
        }
    });
}

/// Rosenbrock of issue 9 at n = 1000 and 10 000 compiles and agrees with the gradient written out
/// by hand in the language (the reducer is too slow at these sizes to be the oracle).
#[test]
fn rosenbrock_compiles_at_scale() {
    frontend::with_big_stack(|| {
        for n in [1000, 10_000] {
            let src = format!(
                "def sq z = z * z
def rosen x = fold (fun acc i -> acc + 100.0 * sq (x.[i + 1] - x.[i] * x.[i]) + sq (1.0 - x.[i])) 0.0 (build (len x - 1) (fun i -> i))
def x0 = build {n} (fun i -> 0.5 + 0.001 * toReal i)
def byhand (x : Array Real) = build (len x) (fun j ->
  (if j + 1 < len x then -400.0 * x.[j] * (x.[j + 1] - x.[j] * x.[j]) - 2.0 * (1.0 - x.[j]) else 0.0)
  + (if j > 0 then 200.0 * (x.[j] - x.[j - 1] * x.[j - 1]) else 0.0))
def main = (grad rosen x0, byhand x0)
"
            );
            let (_, mono) = runtime::prepare(&src, "main").unwrap();
            let r = runtime::engine::run(&mono).unwrap();
            assert!(r.note.is_none(), "{:?}", r.note);
            let runtime::value::Value::Tuple(vs) = &r.value else { panic!("{}", r.value) };
            let (a, b) = (reals(&vs[0]), reals(&vs[1]));
            assert_eq!(a.len(), n);
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0), "{x} vs {y}");
            }
        }
    });
}

/// A `vjp`'s cotangent is checked against the output at every depth in compiled code, in the
/// reducer's order (an array's length, then its elements in order; a tuple's components in
/// order), and the first mismatch is reported with its path and both lengths at the `vjp`, the
/// same error in both engines; an error of the primal comes first.
#[test]
fn cotangents_are_checked_at_any_depth() {
    let deep = "def f (x : Array Real) = build 2 (fun i -> build 2 (fun j -> map (fun v -> v * toReal (i + j)) x))\n";
    let cases = [
        (
            format!("{deep}def main = vjp f [1.0, 2.0] [[[1.0, 1.0], [1.0, 1.0]], [[1.0], [1.0, 1.0, 1.0]]]"),
            "vjp: the cotangent does not match the function's output at element 1, element 0: the output has length 2 but the cotangent has length 1",
        ),
        (
            format!("{deep}def main = vjp f [1.0, 2.0] [[[1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0], [1.0]], [[1.0]]]"),
            "vjp: the cotangent does not match the function's output: the output has length 2 but the cotangent has length 3",
        ),
        (
            format!("{deep}def main = vjp f [1.0, 2.0] [[[1.0, 1.0]], [[1.0], [1.0, 1.0]]]"),
            "vjp: the cotangent does not match the function's output at element 0: the output has length 2 but the cotangent has length 1",
        ),
        // Inside a loop: the indices are the run's.
        (
            format!(
                "{deep}def main = build 3 (fun k -> vjp f [1.0, 2.0] (build 2 (fun i -> build 2 (fun j -> build (if k == 2 && i + j == 2 then 1 else 2) (fun l -> 1.0)))))"
            ),
            "vjp: the cotangent does not match the function's output at element 1, element 1: the output has length 2 but the cotangent has length 1",
        ),
        // Tuples around and inside arrays: component 1's deep array before component 2.
        (
            format!("{deep}def g (x : Array Real) = (f x, map (fun v -> (v, [v])) x)\ndef main = vjp g [1.0, 2.0] ([[[1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0, 0.0]]], [(1.0, [1.0]), (1.0, [])])"),
            "vjp: the cotangent does not match the function's output at component 1, element 1, element 1: the output has length 2 but the cotangent has length 3",
        ),
        (
            format!("{deep}def g (x : Array Real) = (f x, map (fun v -> (v, [v])) x)\ndef main = vjp g [1.0, 2.0] ([[[1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]]], [(1.0, [1.0]), (1.0, [])])"),
            "vjp: the cotangent does not match the function's output at component 2, element 1, component 2: the output has length 1 but the cotangent has length 0",
        ),
        // Discrete arrays are checked too.
        (
            "def main = vjp (fun (x : Array Real) -> (x.[0], [[1, 2], [3]])) [1.0] (1.0, [[0, 0], [0, 0]])".to_string(),
            "vjp: the cotangent does not match the function's output at component 2, element 1: the output has length 1 but the cotangent has length 2",
        ),
        // The primal's error comes first.
        (
            "def f (x : Array Real) = build 2 (fun i -> [[x.[i + 1]]])\ndef main = vjp f [1.0, 2.0] [[[1.0]], [[1.0, 2.0]]]".to_string(),
            "index 2 out of bounds for length 2",
        ),
    ];
    frontend::with_big_stack(|| {
        for (src, msg) in &cases {
            let (a, b) = both_errors(src);
            assert_eq!(&a.message, msg, "{src}");
            assert_eq!((&b.message, b.span), (&a.message, a.span), "{src}");
        }
    });
}

/// `<+>` of a change read from an array compiles (the change element i is chosen by `if` on i
/// from a literal, or recomputed from `build`'s or `map`'s function; from an array of arrays, the
/// row so, then the change in it), and the read keeps its bounds check: the same error, at the
/// same place, in both engines.
#[test]
fn changes_read_from_arrays_keep_their_errors() {
    let cases = [
        (
            "def ds = [replace 1.0, gchange realGroup 0.5]\ndef main = grad (fun (g : Real) -> (g * g) <+> ds.[2]) 1.0",
            "index 2 out of bounds for length 2",
        ),
        (
            "def f (k : Int) (g : Real) = let cs = build 2 (fun i -> gchange realGroup (g * toReal i)) in (g * g) <+> cs.[k]\ndef main = build 3 (fun k -> grad (f (1 - k)) 2.0)",
            "index -1 out of bounds for length 2",
        ),
        (
            "def f (k : Int) (g : Real) = let cs = map (fun x -> gchange realGroup (x * g)) [1.0, 2.0] in (g * g) <+> cs.[k]\ndef main = build 4 (fun k -> grad (f k) 2.0)",
            "index 2 out of bounds for length 2",
        ),
        // Arrays of arrays of changes: each read keeps its bounds check, in order.
        (
            "def dss = [[replace 1.0], [gchange realGroup 0.5, replace 2.0]]\ndef main = grad (fun (g : Real) -> (g * g) <+> dss.[0].[1]) 1.0",
            "index 1 out of bounds for length 1",
        ),
        (
            "def dss = [[replace 1.0], [gchange realGroup 0.5, replace 2.0]]\ndef main = grad (fun (g : Real) -> (g * g) <+> dss.[2].[0]) 1.0",
            "index 2 out of bounds for length 2",
        ),
        (
            "def f (i : Int) (g : Real) = let cs = build 2 (fun k -> build (k + 1) (fun l -> gchange realGroup (g * toReal l))) in (g * g) <+> cs.[i].[1]\ndef main = build 2 (fun i -> grad (f i) 2.0)",
            "index 1 out of bounds for length 1",
        ),
        (
            "def f (i : Int) (g : Real) = let r = (map (fun x -> [gchange realGroup x, replace x]) [1.0, 2.0]).[i] in (g * g) <+> r.[i]\ndef main = build 3 (fun i -> grad (f i) 2.0)",
            "index 2 out of bounds for length 2",
        ),
        // An error in a user group's operation, applied by the update.
        (
            "def f (k : Int) (g : Real) = (g * g) <+> [gchange (group (fun a b -> a * b + toReal (1 / k)) (fun a -> a) 0.0) 2.0].[0]\ndef main = (grad (f 1) 1.0, grad (f 0) 1.0)",
            "division by zero",
        ),
        // `map`'s function and array inline in a definition's body (the array a definition).
        (
            "def xs0 = [1.0, 2.0]\ndef cs = map (fun x -> gchange realGroup x) xs0\ndef main = (grad (fun g -> (g * g) <+> cs.[1]) 1.0, grad (fun g -> (g * g * g) <+> cs.[2]) 1.0)",
            "index 2 out of bounds for length 2",
        ),
    ];
    same_errors(&cases);
}

/// A dual map on an array space applied to a tangent compiles as precomposition, ⟨w, S[t/v]⟩;
/// errors come in the reducer's order: W's, then S's coefficients (where the dual is made, even
/// when it is never applied), then the tangent's and the rest of S's.
#[test]
fn dual_maps_on_array_spaces_keep_their_errors() {
    let cases = [
        (
            "def main = let xs = [1.0] in let d = dual (fun (v : Array Real) -> v.[0] * xs.[3]) (star [1.0].[2]) in 0.0",
            "index 2 out of bounds for length 1",
        ),
        (
            "def main = let xs = [1.0] in let d = dual (fun (v : Array Real) -> v.[0] * xs.[3] + v.[1] * xs.[2]) (star 1.0) in 0.0",
            "index 3 out of bounds for length 1",
        ),
        (
            "def main = let xs = [1.0] in (dual (fun (v : Array Real) -> v.[0] * xs.[3]) (star 1.0)) [xs.[4]]",
            "index 3 out of bounds for length 1",
        ),
        (
            "def main = let xs = [1.0] in (dual (fun (v : Array Real) -> v.[2] * xs.[0]) (star 1.0)) [xs.[0]]",
            "index 2 out of bounds for length 1",
        ),
        (
            "def main = grad (fun p -> let d = dual (fun (v : Array Real) -> p * v.[1]) (star p) in d [p] + d [2.0, 1.0]) 2.0",
            "index 1 out of bounds for length 1",
        ),
    ];
    same_errors(&cases);
}

/// A dual vector applied to a tangent is the pairing ⟨r, t⟩, defined on the tangent space at the
/// dual's point: a tangent whose arrays have other lengths is an error in both engines, the same
/// message (the first mismatch in order, with its path) at the application, never a truncated
/// sum; discrete components pair with anything. Inside a gradient the reducer reports it at the
/// gradient (its redexes have no spans of their own), compiled code at the application.
#[test]
fn pairings_check_the_tangents_shape() {
    let m = |at: &str, n: i64, k: i64| {
        format!(
            "the tangent does not match the dual vector it is paired with{at}: the dual vector has length {n} but the \
             tangent has length {k}"
        )
    };
    let cases = [
        ("def main = (star [1.0, 2.0]) [1.0]", m("", 2, 1), true),
        ("def main = let d = star [1.0, 2.0] in d [1.0, 2.0, 3.0]", m("", 2, 3), true),
        ("def main = (pullback (fun (v : Array Real) -> sum v) (omega 1.0)) [1.0, 2.0] [1.0]", m("", 2, 1), true),
        ("def main = (omega [1.0, 2.0]) [5.0, 6.0] [1.0]", m("", 2, 1), true),
        ("def main = (star [[1.0], [2.0]]) [[1.0], [2.0, 3.0]]", m(" at element 1", 1, 2), true),
        ("def main = (star (1.0, [2.0])) (1.0, [])", m(" at component 2", 1, 0), true),
        (
            "def main = (star [(1.0, [2.0]), (3.0, [])]) [(1.0, [2.0]), (3.0, [4.0])]",
            m(" at element 1, component 2", 0, 1),
            true,
        ),
        ("def main = (dual (fun (v : Array Real) -> v) (star [1.0, 2.0])) [1.0]", m("", 2, 1), true),
        ("def main = grad (fun x -> (star [x, 2.0]) [1.0]) 1.0", m("", 2, 1), false),
        (
            "def main = grad (fun x -> (pullback (fun (v : Array Real) -> x * sum v) (omega 1.0)) [x] [1.0, x]) 1.0",
            m("", 1, 2),
            false,
        ),
        // The tangent's own error comes first.
        ("def main = (star [1.0, 2.0]) [[1.0].[1]]", "index 1 out of bounds for length 1".to_string(), true),
    ];
    frontend::with_big_stack(|| {
        for (src, msg, same_span) in &cases {
            let (a, b) = both_errors(src);
            assert_eq!(&a.message, msg, "{src}");
            assert_eq!(&b.message, msg, "{src}");
            if *same_span {
                assert_eq!(b.span, a.span, "{src}");
            }
        }
        // Discrete components pair with anything; tangents of the vector's shape pair as before.
        for (src, want) in [
            ("def main = (star ([1, 2], [1.0])) ([3], [2.0])", "2.0"),
            ("def main = (star [[1.0], [2.0, 3.0]]) [[1.0], [1.0, 1.0]]", "6.0"),
        ] {
            let (a, note) = both(src);
            assert_eq!(a.to_string(), want, "{src}");
            assert!(note.is_none(), "{src}: {note:?}");
        }
    });
}

/// A dual map on a space with arrays made by `dual` alone is a value, a linear functional on the
/// space (Mak & Ong Sec. 3: a term of type σ* is a linear functional on σ), whose vector needs the
/// arrays' lengths: as a program's result both engines print the reducer's normal form (`<fun>`, or
/// its vector with `0` for an array that receives nothing) — never `unstar`'s error — and W's
/// error still comes first.
#[test]
fn dual_maps_on_array_spaces_are_values() {
    for (src, want) in [
        ("def main = dual (fun (v : Array Real) -> sum v) (star 2.0)", "<fun>"),
        ("def main = (1.0, dual (fun (v : Real * Array Real) -> v.1 * 3.0) (star 2.0))", "(1.0, (6.0, 0)*)"),
        ("def main = dual (fun (v : Array Real) -> 0.0) (star 2.0)", "0*"),
        ("def main = let d = dual (fun (v : Array Real) -> v.[0]) (star 2.0) in (d, d [3.0])", "(<fun>, 6.0)"),
        ("def main = (dual (fun (v : Real) -> 2.0 * v) (star 3.0), star [1.0])", "(6.0*, [1.0]*)"),
    ] {
        frontend::with_big_stack(|| {
            let (_, mono) = runtime::prepare(src, "main").unwrap();
            let a = runtime::interp::run(&mono).unwrap();
            let b = runtime::engine::run(&mono).unwrap();
            assert_eq!(a.to_string(), want, "{src}");
            assert_eq!(b.value.to_string(), want, "{src}: {:?}", b.note);
        });
    }
    let src = "def main = dual (fun (v : Array Real) -> sum v) (star [1.0].[3])";
    frontend::with_big_stack(|| {
        let (_, mono) = runtime::prepare(src, "main").unwrap();
        let a = runtime::interp::run(&mono).expect_err(src);
        let b = runtime::engine::run(&mono).map(|r| r.value.to_string()).expect_err(src);
        assert_eq!(a.message, "index 3 out of bounds for length 1");
        assert_eq!((b.message, b.span), (a.message, a.span));
    });
}

/// `unstar` of a dual map on an array space compiles where the reducer's reduction 5 gives its
/// vector without the array's length (each array's adjoint whole, from W's part or a
/// coefficient): no fallback, W's and the coefficients' errors first, and applied to a tangent its
/// vector is paired (the reducer's order, so a tangent of another shape is the pairing's error).
/// Other bodies (`sum v`, `v.[i]`: the reducer stops) and W's from pullbacks fall back per site,
/// with the reducer's result.
#[test]
fn unstar_of_dual_maps_on_array_spaces() {
    let pairing = "the tangent does not match the dual vector it is paired with: the dual vector has length 2 but the \
                   tangent has length 1";
    let errors = [
        ("def main = unstar (dual (fun (v : Array Real) -> dot v [1.0]) (star [1.0].[2]))", "index 2 out of bounds for length 1"),
        (
            "def main = unstar (dual (fun (v : Array Real) -> dot v (build 2 (fun i -> [1.0].[i]))) (star 1.0))",
            "index 1 out of bounds for length 1",
        ),
        ("def main = (dual (fun (v : Array Real) -> dot v [1.0, 2.0]) (star 3.0)) [1.0]", pairing),
        ("def main = let d = dual (fun (v : Array Real) -> 2.0 * dot v [1.0, 2.0]) (star 3.0) in d [1.0, 2.0] + d [1.0]", pairing),
    ];
    frontend::with_big_stack(|| {
        for (src, msg) in errors {
            let (_, mono) = runtime::prepare(src, "main").unwrap();
            assert!(
                matches!(adjoint::reverse::transform(&mono), Ok(Some(t)) if t.interpreted.is_none()),
                "{src} falls back"
            );
            let a = runtime::interp::run(&mono).expect_err(src);
            let b = runtime::engine::run(&mono).map(|r| r.value.to_string()).expect_err(src);
            assert_eq!(a.message, msg, "{src}");
            assert_eq!((&b.message, b.span), (&a.message, a.span), "{src}");
        }
        for (src, compiles) in [
            ("def main = unstar (dual (fun (v : Array Real) -> v) (star [1.0, 2.0]))", true),
            ("def main = unstar (dual (fun ((x : Real), (v : Array Real)) -> (v, 2.0 * x)) (star ([1.0], 3.0)))", true),
            ("def main = unstar (dual (fun (v : Real * Array Real) -> v.2) (star [1.0]))", true),
            ("def main = grad (fun p -> sum (unstar (dual (fun (v : Array Real) -> p * dot v [1.0, p]) (star p)))) 1.5", true),
            // Two contributions to v from W's parts (lengths the reducer compares): not compiled.
            ("def main = unstar (dual (fun (v : Array Real) -> (v, v)) (star ([1.0, 2.0], [3.0, 4.0])))", false),
            ("def main = unstar (dual (fun ((x : Array Real), (y : Array Real)) -> (x, y)) ((pullback (fun ((a : Array Real), (b : Array Real)) -> sum a) (omega 1.0)) ([1.0], [2.0])))", false),
        ] {
            let (v, note) = both(src);
            assert_eq!(note.is_none(), compiles, "{src}: {v} {note:?}");
        }
        // Where the reducer stops, the site falls back and both engines give its error.
        let src = "def main = unstar (dual (fun (v : Array Real) -> sum v) (star 1.0))";
        let (_, mono) = runtime::prepare(src, "main").unwrap();
        let a = runtime::interp::run(&mono).expect_err(src);
        let b = runtime::engine::run(&mono).map(|r| r.value.to_string()).expect_err(src);
        assert!(a.message.starts_with("unstar: the dual"), "{}", a.message);
        assert_eq!((b.message, b.span), (a.message, a.span));
    });
}

/// The coefficients of a dual map on an array space (the bindings of S that do not read its
/// parameter, made where the dual is) are transformed like the rest of the program: a gradient
/// inside a function among them compiles (nothing of reverse mode reaches lowering), with the
/// reducer's value, applied at a point and differentiated itself; with a tuple pattern, the
/// bindings that read either component stay in S.
#[test]
fn dual_map_coefficients_are_transformed() {
    let cases = [
        (
            "def main = let xs = [1.0, 3.0] in let d = dual (fun (v : Array Real) -> v.[0] * sum (map (fun y -> grad (fun z -> z * z * z) y) xs)) (star 1.0) in d [2.0]",
            "60.0",
        ),
        (
            "def main = grad (fun p -> let xs = [p, 3.0] in let d = dual (fun (v : Array Real) -> v.[0] * sum (map (fun y -> grad (fun z -> z * z * p) y) xs) + v.[1]) (star p) in d [p, 2.0]) 1.5",
            "69.5",
        ),
        // A tuple pattern: what reads either component is S's rest, applied at the tangent.
        (
            "def main = let xs = [1.0, 3.0] in let d = dual (fun ((v : Array Real), (w : Real)) -> v.[0] * xs.[1] + w * xs.[0] + v.[1] * (xs.[0] + xs.[1])) (star 2.0) in d ([2.0, 5.0], 3.0)",
            "58.0",
        ),
        (
            "def main = grad (fun p -> let d = dual (fun ((v : Array Real), (w : Real)) -> v.[0] * p * p + w * p + v.[1]) (star p) in d ([p, 1.0], 3.0)) 2.0",
            "45.0",
        ),
    ];
    frontend::with_big_stack(|| {
        for (src, want) in cases {
            let (v, note) = both(src);
            assert_eq!((v.to_string().as_str(), note), (want, None), "{src}");
        }
    });
}

/// A producer's own errors come first in both engines, at its site, wherever the transform puts
/// code before it: `build`'s negative size and `zipWith`'s unequal lengths before a fused sum's
/// loop runs, `iterate`'s negative count before its tape is made, and an element's error in
/// index order from inside a fused loop; a read out of an array of closures whose applications
/// are inlined keeps its bounds check.
#[test]
fn producer_errors_come_first_in_both_engines() {
    let cases = [
        (
            "def f (w : Real) = sum (build (0 - 3) (fun i -> w * toReal i))\ndef main = grad f 1.0",
            "build: negative array size -3",
        ),
        (
            "def f (w : Array Real) = sum (zipWith (fun a b -> a * b) w [1.0, 2.0])\ndef main = grad f [1.0, 2.0, 3.0]",
            "zipWith: arrays have different lengths 3 and 2",
        ),
        (
            "def f (w : Array Real) = sum (map (fun i -> w.[i] * w.[i]) [0, 5, 7])\ndef main = grad f [1.0, 2.0, 3.0]",
            "index 5 out of bounds for length 3",
        ),
        (
            "def f (x : Array Real) = fold (fun a i -> a + x.[i] * x.[i + 1]) 0.0 (build (len x - 1) (fun i -> i))\ndef main = grad f []",
            "build: negative array size -1",
        ),
        (
            "def f (w : Real) = iterate (0 - 2) (fun x -> x * w) 1.0\ndef main = grad f 1.0",
            "iterate: negative count -2",
        ),
        (
            "def f (w : Real) = let fs = build 3 (fun i -> fun (x : Real) -> w * x * toReal i) in fs.[3] 2.0\ndef main = grad f 1.5",
            "index 3 out of bounds for length 3",
        ),
        (
            "def f (x : Array Real) = let fs = build (len x) (fun i -> let c = x.[i + 1] * 2.0 in fun (y : Real) -> y * c) in sum (map (fun g -> g 3.0) fs)\ndef main = grad f [0.5, 1.0, 1.5]",
            "index 3 out of bounds for length 3",
        ),
        (
            "def f (x : Array Real) = let fs = build (len x) (fun i -> let c = x.[i + 1] * 2.0 in fun (y : Real) -> y * c) in fold (fun a g -> a + g 3.0) 0.0 fs\ndef main = grad f [0.5, 1.0, 1.5]",
            "index 3 out of bounds for length 3",
        ),
        (
            "def f (x : Array Real) = let fs = build (len x) (fun i -> let c = x.[i + 1] * 2.0 in fun (y : Real) -> y * c) in fs.[0] 2.0\ndef main = grad f [0.5, 1.0, 1.5]",
            "index 3 out of bounds for length 3",
        ),
        (
            "def f (xs : Array Real) = let g = if xs.[0] > 0.0 then (fun (y : Real) -> y * xs.[1]) else cos in g xs.[2]\ndef main = grad f []",
            "index 0 out of bounds for length 0",
        ),
        (
            "def f (xs : Array Real) = let g = if xs.[0] > 0.0 then (fun (y : Real) -> y * xs.[2]) else cos in g xs.[1]\ndef main = grad f [1.0, 2.0]",
            "index 2 out of bounds for length 2",
        ),
    ];
    same_errors(&cases);
}

/// A loop inside a loop body tapes into one tape made before the enclosing loop when its length is
/// known there (`adjoint::reverse::hoist`): llsq's rows allocate nothing, so the row loop has no
/// arena compaction and no support calls. Where the length changes per iteration, or the outer
/// loop runs no iteration, or the nest is three deep, gradients still agree with the reducer.
#[test]
fn inner_tapes_are_made_once_before_their_loop() {
    let llsq = "def residual (x : Array Real) (i : Int) =
  let t = toReal i * 0.25 in
  let (r, _) = fold (fun (acc, mul) xj -> (acc - xj * mul, mul * t)) (1.0, 1.0) x in
  r
def primal (x : Array Real) (n : Int) = 0.5 * sum (build n (fun i -> let r = residual x i in r * r))
def x0 = [0.5, -0.25, 0.125]
";
    let cases = [
        // main's arrays: x0, the tape, the gradient's accumulator and result (no array per row).
        (format!("{llsq}def main = grad (fun (x : Array Real) -> primal x 4) x0"), Some(4)),
        (format!("{llsq}def main = grad (fun (x : Array Real) -> primal x 0) x0"), Some(4)),
        // The inner fold's length depends on the row: its tape is made in the row.
        (
            "def f (x : Array Real) = sum (build 4 (fun i -> fold (fun a v -> a * v + 1.0) 0.5 (build i (fun k -> x.[k]))))
def main = grad f [0.5, 1.5, 2.0, 0.75]"
                .to_string(),
            None,
        ),
        // Three deep: the innermost tape goes out through both loops.
        (
            "def f (x : Array Real) = sum (build 3 (fun i -> sum (build 2 (fun j -> fold (fun a v -> a * v + toReal (i + j)) 0.5 x))))
def main = grad f [0.5, 1.5, 2.0]"
                .to_string(),
            None,
        ),
    ];
    frontend::with_big_stack(|| {
        for (src, arrays) in &cases {
            let (_, mono) = runtime::prepare(src, "main").unwrap();
            let a = runtime::interp::run(&mono).unwrap();
            let r = runtime::engine::run(&mono).unwrap();
            assert!(r.note.is_none(), "{src}: {:?}", r.note);
            assert!(close(&reals(&a), &reals(&r.value)), "{src}: {a} vs {}", r.value);
            let text = runtime::engine::ir_text(&mono, true).unwrap();
            if let Some(n) = arrays {
                assert_eq!(text.matches("= newarray").count(), *n, "{src}\n{text}");
                assert!(!text.contains("call $nabla_arena"), "{src}\n{text}");
            }
        }
    });
}

/// A fold that adds to its accumulator (`acc + e1 + e2`, `e + acc`, `acc - e`; the accumulator
/// used once) runs forward and reverse in one loop: the forward phase has one loop and the
/// reverse phase none (it scales what the loop accumulated). A fold that uses its accumulator
/// otherwise keeps a reverse loop. Values against the reducer: `examples/pb_fused_fold.nbl`.
#[test]
fn additive_folds_run_in_one_loop() {
    let cases = [
        ("fold (fun acc i -> acc + 100.0 * (x.[i + 1] - x.[i]) * (x.[i + 1] - x.[i]) + x.[i]) 0.0 (build (len x - 1) (fun i -> i))", true),
        ("fold (fun acc v -> v * v + acc) 1.0 x", true),
        ("fold (fun acc v -> acc - v * v) x.[0] x", true),
        ("fold (fun acc v -> acc * v) 1.0 x", false),
        ("fold (fun acc v -> acc + acc * v) 1.0 x", false),
        ("fold (fun acc v -> v - acc) 1.0 x", false),
    ];
    frontend::with_big_stack(|| {
        for (body, fused) in cases {
            let src = format!("def f (x : Array Real) = {body}\ndef main = grad f [1.0, 2.0, 0.5]");
            let (_, mono) = runtime::prepare(&src, "main").unwrap();
            let (_, sites) = adjoint::reverse::transform_listing(&mono).unwrap();
            let loops = |lines: &[String]| lines.iter().filter(|l| l.contains("iterate")).count();
            let (fw, rv) = (loops(&sites[0].forward), loops(&sites[0].reverse));
            assert_eq!(
                (fw, rv) == (1, 0),
                fused,
                "{body}: {} / {}",
                sites[0].forward.join("\n"),
                sites[0].reverse.join("\n")
            );
            let a = runtime::interp::run(&mono).unwrap();
            let r = runtime::engine::run(&mono).unwrap();
            assert!(r.note.is_none() && close(&reals(&a), &reals(&r.value)), "{body}: {a} vs {}", r.value);
        }
    });
}

/// k-means through the nearest centroid's index (`examples/pb_nearest.nbl`, values against the
/// reducer there): the loop finding the index is read only through an `Int` and gets no tape;
/// the sum over the points, which captures the centroids (an array of arrays), runs forward and
/// reverse in one loop; and the gradient of that gradient (the Hessian's diagonal) tapes only
/// each point's nearest index, a discrete value computed by a loop in the outer loop's body:
/// its reverse reads the index from the tape instead of running the loop over the centroids
/// again (the only scalars it reads from the inner loops' carries are their counters,
/// recomputed from the iteration index).
#[test]
fn nearest_index_loops_are_fused_and_taped_once() {
    let src =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/pb_nearest.nbl"))
            .unwrap()
            .replace("def main =", "def unused =");
    let cases = [
        ("grad (cost ps) cs", true),
        ("grad (fun (c : Array (Array Real)) -> sum (map sum (grad (cost ps) c))) cs", false),
    ];
    frontend::with_big_stack(|| {
        for (main, fused) in cases {
            let src = format!("{src}\ndef main = {main}");
            let (_, mono) = runtime::prepare(&src, "main").unwrap();
            let (_, sites) = adjoint::reverse::transform_listing(&mono).unwrap();
            let outer = sites.last().unwrap();
            let all = || sites.iter().flat_map(|s| s.forward.iter().chain(&s.reverse));
            // (`tape' 0` is the empty carry tape of a loop whose reverse reads none of its carry.)
            let tapes = all().map(|l| l.matches("tape'").count() - l.matches("tape' 0").count()).sum::<usize>();
            if fused {
                assert_eq!(tapes, 0, "{main}: {}", outer.forward.join("\n"));
            } else {
                // One tape, of each point's nearest index, written by the outer forward loop and
                // read by its reverse, which runs no distance to any centroid but that one.
                let fwd = outer.forward.join("\n");
                let rev = outer.reverse.join("\n");
                assert_eq!(tapes, 1, "{main}: {fwd}");
                assert!(fwd.contains("dj < bd") && fwd.contains("tapeSet'"), "{main}: {fwd}");
                assert!(rev.contains("tape.[") && !rev.contains("dj < bd"), "{main}: {rev}");
            }
            if fused {
                // Loops bound at the top of each phase (a λ's body may hold others).
                let loops = |lines: &[String]| {
                    lines.iter().filter(|l| l.split_once(" = ").is_some_and(|(_, r)| r.starts_with("iterate"))).count()
                };
                assert_eq!((loops(&outer.forward), loops(&outer.reverse)), (1, 0), "{main}");
            }
            let a = runtime::interp::run(&mono).unwrap();
            let r = runtime::engine::run(&mono).unwrap();
            assert!(r.note.is_none() && close(&reals(&a), &reals(&r.value)), "{main}: {a} vs {}", r.value);
        }
    });
}

/// `<+>` of a change a loop returns (a `fold` whose carry is a change) is not compiled: that site
/// runs on the interpreter with a note naming it, the same value as the reducer's. (The per-site
/// fallback tests below use this construct: it is one the transform still leaves to the
/// interpreter.)
#[test]
fn a_change_a_loop_makes_falls_back_at_its_site() {
    let src = "def f (c : Bool) (g : Real) = (g * g) <+> fold (fun d (k : Real) -> if k > 0.5 then d else replace 0.0) (gchange realGroup 1.0) [if c then 0.0 else 1.0]
def main = (grad (f true) 2.0, grad (f false) 2.0)";
    frontend::with_big_stack(|| {
        let (_, mono) = runtime::prepare(src, "main").unwrap();
        let r = runtime::engine::run(&mono).unwrap();
        let note = r.note.expect("a note");
        assert!(
            note.contains("a gradient through `<+>` of a change chosen at run time") && note.contains("@165..182"),
            "{note}"
        );
        assert_eq!(r.value.to_string(), "(0.0, 4.0)");
    });
}

/// Functions built at run time — a `fold`, `iterate` or `while` whose carry is a function (or a
/// tuple holding one), composing a closure per step, to a depth the data decides — compile: each
/// such closure is carried beside its companion (its value and pullback closure at a point), and a
/// call of it in differentiated code goes through the companion. Values equal the reducer's
/// (within 1e-9), with no note and no interpreted site; with compaction after every iteration and
/// released memory poisoned too (the loops carry closures whose environments hold closures).
#[test]
fn functions_built_at_run_time_compile() {
    let comp = "def comp (ks : Array Real) = fold (fun (h : Real -> Real) (k : Real) -> fun (y : Real) -> h (y * k)) (fun (y : Real) -> y * y) ks\n";
    let cases = [
        // (y·Πk)²: 2y(Πk)², at depth 0 (y², the initial function), 1, 2, 3 from the data.
        (format!("{comp}def main = build 4 (fun n -> grad (comp (build n (fun i -> 1.0 + toReal i))) 1.0)"), "[2.0, 2.0, 8.0, 72.0]"),
        (format!("{comp}def main = grad (comp []) 2.0"), "4.0"),
        // Each λ reads the inner function's value (its pullback closure holds it).
        ("def main = grad (fun x -> (fold (fun (h : Real -> Real) (k : Real) -> fun (y : Real) -> h (sin (y * k)) * y + 0.1 * y) (fun (y : Real) -> y * y) [0.5, 2.0, 3.0]) x) 0.7".to_string(), ""),
        // `iterate` and `while` (a tuple carry: a counter and a function).
        ("def main = grad (fun x -> (iterate 3 (fun (h : Real -> Real) -> fun (y : Real) -> h y * y) (fun y -> y)) x) 2.0".to_string(), "32.0"),
        ("def main = grad (fun x -> (while (fun (p : Int * (Real -> Real)) -> p.1 < 2) (fun (p : Int * (Real -> Real)) -> (p.1 + 1, fun (y : Real) -> p.2 (2.0 * y) + y)) (0, fun (y : Real) -> y * y * y)).2 x) 1.0".to_string(), "195.0"),
        // Functions of arrays: 36 v·v + 4 Σv, gradient 72 v + 4.
        ("def main = grad (fun (v : Array Real) -> (fold (fun (h : Array Real -> Real) (k : Real) -> fun (y : Array Real) -> h (map (fun a -> a * k) y) + sum y) (fun y -> dot y y) [2.0, 3.0]) v) [1.0, 2.0]".to_string(), "[76.0, 148.0]"),
        // A function of a tuple, to a tuple (vjp), applied inside a loop of the gradient.
        ("def main = vjp (fun (p : Real * Real) -> (fold (fun (h : Real * Real -> Real * Real) (k : Real) -> fun (q : Real * Real) -> h (q.2 * k, q.1 + k)) (fun (q : Real * Real) -> (q.1 * q.2, sin q.1)) [1.5, -0.5]) p) (0.3, 0.8) (1.0, 2.0)".to_string(), ""),
        ("def main = grad (fun (xs : Array Real) -> let h = fold (fun (h : Real -> Real) (k : Real) -> fun (y : Real) -> h (y + k) * k) (fun (y : Real) -> exp y) [0.25, 0.5] in sum (map (fun x -> h x * x) xs)) [0.1, 0.2, 0.3]".to_string(), ""),
        // Environments that depend on the input: each closure's cotangent is its environment's,
        // returned by its companion's pullback beside ȳ (captured Reals, an array, a tuple's
        // components; a built function mapped over points).
        ("def main = grad (fun x -> (fold (fun (h : Real -> Real) (k : Real) -> fun (y : Real) -> h (y * k * x)) (fun (y : Real) -> y * y) [0.5, 2.0]) 1.0) 1.5".to_string(), "13.5"),
        ("def main = grad (fun x -> (fold (fun (h : Real -> Real) (k : Real) -> fun (y : Real) -> h (y * k) + x * y) (fun (y : Real) -> y * y * x) [0.5, 2.0, 3.0]) 0.7) 1.5".to_string(), ""),
        ("def main = grad (fun (v : Array Real) -> (iterate 3 (fun (h : Real -> Real) -> fun (y : Real) -> h (y * v.[0]) + v.[1] * y) (fun (y : Real) -> sin (y * v.[2]))) 0.3) [1.1, 0.5, 2.0]".to_string(), ""),
        ("def main = grad (fun (p : Real * Real) -> let h = fold (fun (h : Real -> Real) (k : Real) -> fun (y : Real) -> h (y + k * p.1)) (fun (y : Real) -> y * p.2) [1.0, 2.0] in sum (map h [0.5, 1.5])) (0.3, 2.0)".to_string(), "(12.0, 3.8)"),
        // Active data the step makes and its closures capture, recomputed by their companions.
        ("def main = grad (fun x -> (fold (fun (h : Real -> Real) (k : Real) -> let w = k * x in fun (y : Real) -> h (y * w)) (fun (y : Real) -> y * y) [0.5, 2.0]) 1.0) 1.5".to_string(), "13.5"),
        ("def main = grad (fun x -> (fold (fun (h : Real -> Real) (k : Real) -> let w = k * x in let u = sin w + k in fun (y : Real) -> h (y * u) + w) (fun (y : Real) -> y * y * x) [0.5, 2.0, 1.5]) 0.8) 1.2".to_string(), ""),
        ("def main = grad (fun (v : Array Real) -> (iterate 2 (fun (h : Real -> Real) -> let s = sum v in fun (y : Real) -> h (y * s) * v.[0]) (fun (y : Real) -> exp y)) 0.3) [0.4, 0.2]".to_string(), ""),
        // A choice between built functions: the companion of the branch taken; a λ inlining
        // left applied (`fold f z []` is `z`) capturing the input.
        (format!("{comp}def main = build 3 (fun i -> grad (fun x -> (if i > 0 then comp [1.0, 2.0] else comp [3.0]) x) 1.5)"), "[27.0, 12.0, 12.0]"),
        ("def main = grad (fun (y : Real) -> (fold (fun (h : Real -> Real) (k : Real) -> fun (z : Real) -> h (z * k) + y * z) (fun (z : Real) -> sin z * y) []) (0.5 * y)) (-1.5)".to_string(), ""),
        // Built inside a loop of the site, per element.
        ("def main = grad (fun (xs : Array Real) -> fold (fun acc x -> acc + (iterate 2 (fun (h : Real -> Real) -> fun (y : Real) -> h (y * 0.5) + y) (fun y -> y * y)) (acc * x)) 0.5 xs) [0.5, 1.5]".to_string(), ""),
    ];
    frontend::with_big_stack(|| {
        for (src, want) in &cases {
            let (_, mono) = runtime::prepare(src, "main").unwrap();
            let t = adjoint::reverse::transform(&mono).unwrap().unwrap();
            assert!(t.interpreted.is_none(), "{src} falls back");
            let (v, note) = both(src);
            assert!(note.is_none(), "{src}: {note:?}");
            if !want.is_empty() {
                assert_eq!(v.to_string(), *want, "{src}");
            }
            let mut ctx = runtime::native::CallCtx::new(runtime::native::DEFAULT_ARENA_LIMIT);
            ctx.set_compact_min(0);
            ctx.set_checking(true);
            let r = runtime::engine::run_in(&mono, &mut ctx).unwrap();
            assert_eq!(r.value.to_string(), v.to_string(), "{src} with eager compaction");
        }
    });
}

/// An error inside a function built at run time is the interpreter's, at its span, in both
/// engines (the companion runs the λ's body in the primal's order).
#[test]
fn errors_inside_built_functions_are_the_interpreters() {
    let cases = [
        ("def ys = [1.0, 2.0]\ndef main = grad (fun g -> (fold (fun (h : Real -> Real) (k : Int) -> fun (y : Real) -> h (y * ys.[k])) (fun (y : Real) -> y * y) [0, 1, 2]) g) 2.0", "index 2 out of bounds for length 2"),
        ("def main = grad (fun g -> (iterate 3 (fun (h : Real -> Real) -> fun (y : Real) -> h y * toReal (3 / (2 - toInt y))) (fun (y : Real) -> y)) g) 2.0", "division by zero"),
        // The initial function's error, reached at the bottom of the chain.
        ("def ys = [1.0]\ndef main = grad (fun g -> (fold (fun (h : Real -> Real) (k : Real) -> fun (y : Real) -> h (y * k)) (fun (y : Real) -> y * ys.[toInt y]) [1.0, 2.0]) g) 1.0", "index 2 out of bounds for length 1"),
    ];
    same_errors(&cases);
}

/// What stays with the interpreter, per site and with a note: a gradient of a gradient through a
/// function built at run time (the outer site would need the companion of a companion; the
/// reducer itself stops on it once a closure is composed in), and a loop whose step computes
/// active data its closures capture by a loop (`let w = fold … in λy. …`: the step's own reverse
/// would be needed). The values are the reducer's.
#[test]
fn built_functions_not_compiled_yet_fall_back_per_site() {
    let cases = [
        // (With a closure composed in, the reducer itself stops: "pullbacks nested too deeply".)
        "def comp (ks : Array Real) = fold (fun (h : Real -> Real) (k : Real) -> fun (y : Real) -> h (y * k)) (fun (y : Real) -> y * y * y) ks\ndef main = grad (fun x -> grad (comp []) x) 1.5",
        "def main = grad (fun x -> (fold (fun (h : Real -> Real) (k : Real) -> let w = fold (fun a b -> a + b * x) 0.0 [k, 1.0] in fun (y : Real) -> h (y * w)) (fun (y : Real) -> y * y) [0.5, 2.0]) 1.0) 1.5",
    ];
    frontend::with_big_stack(|| {
        for src in cases {
            let (_, note) = both(src);
            let note = note.expect("a note");
            assert_eq!(note.lines().count(), 1, "{note}");
            assert!(note.contains("that site is evaluated by the reference interpreter"), "{note}");
        }
    });
}

/// Each case's program fails in both engines with the message given, the same message at the
/// same span (see `both_errors`).
fn same_errors(cases: &[(&str, &str)]) {
    frontend::with_big_stack(|| {
        for &(src, msg) in cases {
            let (a, b) = both_errors(src);
            assert_eq!(a.message, msg, "{src}");
            assert_eq!((&b.message, b.span), (&a.message, a.span), "{src}");
        }
    });
}

/// Runs `src`'s `main` under both engines, each of which must fail: the interpreter's error and
/// the compiled run's, whose program must compile with no site left to the interpreter (so its
/// error is not the interpreter's again through a fallback).
fn both_errors(src: &str) -> (frontend::Diagnostic, frontend::Diagnostic) {
    let (_, mono) = runtime::prepare(src, "main").unwrap();
    assert!(matches!(adjoint::reverse::transform(&mono), Ok(Some(t)) if t.interpreted.is_none()), "{src} falls back");
    let a = runtime::interp::run(&mono).expect_err(src);
    let b = match runtime::engine::run(&mono) {
        Ok(r) => panic!("{src}: compiled gave {} ({:?})", r.value, r.note),
        Err(d) => d,
    };
    (a, b)
}

/// Runs `src`'s `main` under both engines: the compiled run's value (it must equal the
/// interpreter's within 1e-9) and note.
fn both(src: &str) -> (runtime::value::Value, Option<String>) {
    let (_, mono) = runtime::prepare(src, "main").unwrap();
    let a = runtime::interp::run(&mono).unwrap();
    let r = runtime::engine::run(&mono).unwrap();
    assert!(close(&reals(&a), &reals(&r.value)), "interpreter {a}, compiled {}", r.value);
    assert_eq!(a.to_string().len(), r.value.to_string().len(), "interpreter {a}, compiled {}", r.value);
    (r.value, r.note)
}

/// Per-site fallback (issue 9): a site the transform does not compile runs on the interpreter at
/// the values of its free locals, and everything else stays compiled. One note line per site,
/// each naming it; the IR calls `$nabla_interp` there and still holds the compiled loops.
#[test]
fn an_uncompiled_site_falls_back_alone() {
    let src = "def f (c : Bool) (g : Real) = (g * g) <+> fold (fun d (k : Real) -> if k > 0.5 then d else replace 0.0) (gchange realGroup 1.0) [if c then 0.0 else 1.0]
def xs = build 100 (fun i -> toReal i)
def hot = fold (fun acc x -> acc + x * x) 0.0 xs
def main = (hot, grad (f true) 2.0, grad (f false) 2.0, grad (fun x -> sum (map (fun y -> y * y * x) xs)) 3.0)";
    frontend::with_big_stack(|| {
        let (v, note) = both(src);
        assert_eq!(v.to_string(), "(328350.0, 0.0, 4.0, 328350.0)");
        let note = note.expect("a note");
        let lines: Vec<&str> = note.lines().collect();
        assert_eq!(lines.len(), 2, "{note}");
        for l in &lines {
            assert!(
                l.contains("a gradient through `<+>` of a change chosen at run time")
                    && l.contains("that site is evaluated by the reference interpreter"),
                "{l}"
            );
        }
        let (_, mono) = runtime::prepare(src, "main").unwrap();
        let ir = runtime::engine::ir_text(&mono, true).unwrap();
        assert_eq!(ir.matches("call $nabla_interp(").count(), 2, "{ir}");
        assert_eq!(ir.matches("; interpreted site").count(), 2, "{ir}");
        // The run-time table of the sites says how many it holds, and gives the same note.
        let t = adjoint::reverse::transform(&mono).unwrap().unwrap();
        let sites = runtime::sites::Sites::new(t.interpreted.clone().expect("interpreted sites"));
        assert_eq!(format!("{sites:?}"), "Sites(2)");
        assert_eq!(sites.note(), note);
        // The gradient the transform compiles is listed with its two phases.
        assert!(ir.contains(": forward phase") && ir.contains(": reverse phase"), "{ir}");
    });
}

/// Interpreted sites inside loops get their free locals (an index, an array, a tuple) from
/// compiled code and give back Reals, arrays (made in the call's arena), nested arrays and tuples;
/// with eager compaction too. The interpreter evaluates the transformed program the same way.
#[test]
fn interpreted_sites_take_and_give_data() {
    let src = "def pick (c : Bool) (g : Real) = (g * g) <+> fold (fun d (k : Real) -> if k > 0.5 then d else replace 0.0) (gchange realGroup 1.0) [if c then 0.0 else 1.0]
def v (c : Bool) (x : Array Real) = map (fun y -> y <+> fold (fun d (k : Real) -> if k > 0.5 then d else replace 0.0) (gchange realGroup 1.0) [if c then 0.0 else 1.0]) x
def xs = build 4 (fun i -> 1.0 + toReal i)
def main =
  let p = (2.0, [1.0, 2.0]) in
  (build 5 (fun i -> grad (pick (i > 2)) (toReal i + p.1)),
   build 3 (fun i -> grad (fun x -> sum (v (i == 1) x)) xs),
   build 2 (fun i -> (toReal i, vjp (v (i == 0)) p.2 [1.0, 3.0])))";
    frontend::with_big_stack(|| {
        let (v, note) = both(src);
        assert_eq!(note.map(|n| n.lines().count()), Some(3));
        let want = "([4.0, 6.0, 8.0, 0.0, 0.0], [[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]], \
                    [(0.0, [0.0, 0.0]), (1.0, [1.0, 3.0])])";
        assert_eq!(v.to_string(), want);
        // Eager compaction: the arrays the interpreter returns are ordinary arena values.
        let (_, mono) = runtime::prepare(src, "main").unwrap();
        let mut ctx = runtime::native::CallCtx::new(runtime::native::DEFAULT_ARENA_LIMIT);
        ctx.set_compact_min(64);
        let r = runtime::engine::run_in(&mono, &mut ctx).unwrap();
        assert_eq!(r.value.to_string(), v.to_string());
        // The transformed program (with `interp'`) in the interpreter.
        let t = adjoint::reverse::transform(&mono).unwrap().unwrap();
        assert!(t.interpreted.is_some());
        assert_eq!(runtime::interp::run(&t).unwrap().to_string(), v.to_string());
    });
}

/// An interpreted site whose value is a tuple (the gradient of a function of a pair) gives its
/// components back to compiled code word by word.
#[test]
fn interpreted_sites_give_back_tuples() {
    let src = "def f (c : Bool) (p : Real * Real) = (p.1 * p.2) <+> fold (fun d (k : Real) -> if k > 0.5 then d else replace 0.0) (gchange realGroup 1.0) [if c then 0.0 else 1.0]
def main = build 3 (fun i -> grad (f (i > 1)) (toReal i, 3.0))";
    frontend::with_big_stack(|| {
        let (v, note) = both(src);
        assert_eq!(note.map(|n| n.lines().count()), Some(1));
        assert_eq!(v.to_string(), "[(3.0, 0.0), (3.0, 1.0), (0.0, 0.0)]");
    });
}

/// An error raised inside an interpreted site is the interpreter's, at its span, in both engines.
#[test]
fn errors_of_interpreted_sites_are_the_interpreters() {
    let src = "def ys = [1.0, 2.0]
def main = sum (build 4 (fun i -> grad (fun g -> (g * g) <+> fold (fun d (k : Real) -> if k > 0.5 then d else replace 0.0) (gchange realGroup 1.0) [if i > 2 then 0.0 else ys.[i]]) 2.0))";
    frontend::with_big_stack(|| {
        let (_, mono) = runtime::prepare(src, "main").unwrap();
        let a = runtime::interp::run(&mono).unwrap_err();
        let b = runtime::engine::run(&mono).err().expect("an error");
        assert_eq!((a.message.as_str(), a.span), (b.message.as_str(), b.span));
        assert_eq!(a.message, "index 2 out of bounds for length 2");
    });
}

/// A definition of plain data that an interpreted site names is passed to it like a free local,
/// as compiled code computed it, so the interpreter evaluates only the functions the site names:
/// here `f`, not `xs` or `hot`.
#[test]
fn interpreted_sites_take_data_definitions_from_compiled_code() {
    let src = "def f (c : Bool) (g : Real) = (g * g) <+> fold (fun d (k : Real) -> if k > 0.5 then d else replace 0.0) (gchange realGroup 1.0) [if c then 0.0 else 1.0]
def xs = build 1000 (fun i -> toReal i * 0.001)
def hot = fold (fun acc x -> acc + sin x * x) 0.0 xs
def main = (hot, grad (f (hot > 1.0)) 2.0, grad (f (hot < 1.0)) hot)";
    frontend::with_big_stack(|| {
        let (v, note) = both(src);
        assert_eq!(note.map(|n| n.lines().count()), Some(2));
        let runtime::value::Value::Tuple(vs) = &v else { panic!("{v}") };
        assert_eq!(vs[1].to_string(), "0.0");
        let (_, mono) = runtime::prepare(src, "main").unwrap();
        let t = adjoint::reverse::transform(&mono).unwrap().unwrap();
        for site in &t.interpreted.as_ref().unwrap().sites {
            let params: Vec<&str> = site.params.iter().map(|(_, n, _)| &**n).collect();
            assert_eq!(params, ["hot"]);
            let mut named = Vec::new();
            frontend::lin::visit_free_vars(&site.body, &mut |v| {
                if let frontend::syntax::ExprKind::Var(n, frontend::syntax::VarRef::Global(_)) = &v.kind {
                    named.push(n.to_string());
                }
            });
            assert_eq!(named, ["f"]);
        }
    });
}

/// A partial that is a function of the primitive's result (`tanh′ = 1 − y²`, `exp′ = y`,
/// `sigmoid′ = y(1 − y)`; `adjoint::rules::reads_result`) reads the result the forward phase
/// computed: the compiled gradient calls each such primitive as often as the primal does, once
/// per element — the reverse loop of `map tanh x` reads the element from the map's result instead
/// of calling `tanh` again. Values against the reducer.
#[test]
fn partials_read_the_forward_result() {
    let cases = [
        // A map used twice: its reverse is a loop of its own.
        ("let h = map tanh x in dot h h", "$nabla_tanh", 1),
        ("let h = map (fun v -> sigmoid (2.0 * v)) x in dot h x", "$nabla_sigmoid", 1),
        // Fused into one loop with the sum.
        ("sum (map (fun v -> exp (v - x.[0])) x)", "$nabla_exp", 1),
        // Straight-line code after a loop: the call's result is read across blocks.
        ("let s = sum x in let e = exp s in e * dot x x", "$nabla_exp", 1),
        // A power reads x ^ y for its partial in y; its partial in x is another power: the map's
        // power once, `x.[0] ^ x.[1]` and `x.[0] ^ (x.[1] - 1)`.
        ("sum (map (fun v -> 1.5 ^ v) x) + x.[0] ^ x.[1]", "$nabla_pow", 3),
        // A map of powers used twice: its reverse loop reads the power from the map's result.
        ("let h = map (fun v -> 1.5 ^ v) x in dot h h", "$nabla_pow", 1),
        // Only the element itself is read: `tanh v` inside it is recomputed (its partial reads it).
        ("let h = map (fun v -> exp (tanh v)) x in dot h h", "$nabla_exp", 1),
    ];
    frontend::with_big_stack(|| {
        for (body, callee, want) in cases {
            let src = format!("def f (x : Array Real) = {body}\ndef main = grad f [0.5, 1.5, -0.25, 0.75]");
            let (_, mono) = runtime::prepare(&src, "main").unwrap();
            let a = runtime::interp::run(&mono).unwrap();
            let r = runtime::engine::run(&mono).unwrap();
            assert!(r.note.is_none() && close(&reals(&a), &reals(&r.value)), "{body}: {a} vs {}", r.value);
            let text = runtime::engine::ir_text(&mono, true).unwrap();
            let calls = text.lines().filter(|l| l.contains(&format!("call {callee}("))).count();
            assert_eq!(calls, want, "{body}\n{text}");
        }
    });
}

/// A discrete value a loop body computes with a loop of its own (an index by `iterate`, a `Bool`
/// by `fold`, a count by `while`) is taped by the enclosing loop's forward phase and read back
/// by its reverse, per iteration: the values here differ from one iteration to the next (the
/// argmax moves as the carried array changes; each row has its own argmin), so a tape read at
/// the wrong iteration gives other gradients than the reducer's. Both engines agree, and the
/// reverse phases run none of those inner loops again.
#[test]
fn discrete_values_of_inner_loops_are_taped() {
    let progs = [
        // An iterate whose carry holds an array (the tape holds the whole carry) and an argmax.
        "def argmax (x : Array Real) = (iterate (len x - 1) (fun (j, b) -> if x.[j] > x.[b] then (j + 1, j) else (j + 1, b)) (1, 0)).2
def f (x0 : Array Real) = (iterate 4 (fun (x, acc) -> let m = argmax x in
  (build (len x) (fun i -> if i == m then 0.5 * x.[i] * x.[i] else x.[i] + 0.1), acc + x.[m] * toReal (m + 1))) (x0, 0.0)).2
def main = (f [1.0, 3.0, 2.0, 2.5], grad f [1.0, 3.0, 2.0, 2.5])",
        // A fold over rows: each row's argmin (an iterate) and whether it has a negative entry
        // (a fold to a Bool).
        "def argmin (r : Array Real) = (iterate (len r - 1) (fun (j, b) -> if r.[j] < r.[b] then (j + 1, j) else (j + 1, b)) (1, 0)).2
def f (w : Real) (rows : Array (Array Real)) = fold (fun acc r ->
  let m = argmin r in
  let neg = fold (fun b v -> b || v < 0.0) false r in
  acc * w + (if neg then r.[m] * r.[m] else w * r.[m])) 0.0 rows
def rs = [[3.0, 1.0, 2.0], [-1.0, 4.0, 0.5], [2.0, 2.0, -3.0], [5.0, 6.0, 7.0]]
def main = (grad (fun w -> f w rs) 1.5, grad (f 1.5) rs)",
        // A count by `while` inside an iterate's body, used as an index and as a power.
        "def halvings (v : Real) = (while (fun (c, u) -> u > 1.0) (fun (c, u) -> (c + 1, u / 2.0)) (0, v)).1
def f (xs : Array Real) = (iterate (len xs) (fun (k, acc) -> let c = halvings (acc + xs.[k]) in
  (k + 1, acc * 0.5 + xs.[k] * toReal c + xs.[c % len xs])) (0, 1.0)).2
def main = (f [3.0, 9.0, 0.5, 20.0], grad f [3.0, 9.0, 0.5, 20.0])",
    ];
    frontend::with_big_stack(|| {
        for src in progs {
            let (v, note) = both(src);
            assert!(note.is_none(), "{src}: {note:?}");
            assert!(!v.to_string().contains("NaN"), "{src}: {v}");
            let (_, mono) = runtime::prepare(src, "main").unwrap();
            let (_, sites) = adjoint::reverse::transform_listing(&mono).unwrap();
            let fwd: String = sites.iter().flat_map(|s| s.forward.iter()).cloned().collect::<Vec<_>>().join("\n");
            let rev: String = sites.iter().flat_map(|s| s.reverse.iter()).cloned().collect::<Vec<_>>().join("\n");
            assert!(fwd.contains("tapeSet'") && rev.contains("tape.["), "{src}:\n{fwd}\n{rev}");
            for inner in ["x.[j] > x.[b]", "r.[j] < r.[b]", "v < 0.0", "u / 2.0"] {
                assert!(!rev.contains(inner), "{src}: {inner} in the reverse:\n{rev}");
            }
        }
    });
}

/// A fold whose step is `max`/`min` of the carry and the element (lse's maximum), or an `if` on a
/// comparison choosing one of them, runs forward carrying the index of the element it chose, and its reverse adds the cotangent at that index
/// (or to the initial value) with no tape and no reverse loop. Exact for every cotangent: an
/// infinite or NaN one reaches every other element of a `max` as `g·0` (NaN), as the reducer's
/// rule sends it, and none of an `if`'s (the reducer differentiates the branch taken).
/// Both engines agree on ties (the first argument wins), a NaN element, an initial value never
/// replaced, an empty array, and cotangents 2.5, −1, ±∞ and NaN.
#[test]
fn selecting_folds_read_one_index() {
    let defs = "def mx (x : Array Real) = fold (fun m v -> max m v) x.[0] x
def mn (x : Array Real) = fold (fun m v -> min v m) x.[1] x
def from (a : Real) (x : Array Real) = fold (fun m v -> max m v) a x
def lse (x : Array Real) = let a = fold (fun m v -> max m v) x.[0] x in a + log (sum (map (fun v -> exp (v - a)) x))
def sel (x : Array Real) = fold (fun m v -> if v > m then v else m) x.[0] x
def smin (x : Array Real) = fold (fun m v -> if m <= v then m else v) x.[1] x
def xs = [1.0, 3.0, -2.0, 3.0, 2.0]
def ys = [1.0, 0.0 / 0.0, 4.0, 2.0]
";
    let cotangents = ["2.5", "-1.0", "1.0 / 0.0", "-1.0 / 0.0", "0.0 / 0.0"];
    let mut mains = vec![
        "(grad mx xs, grad mn xs, grad mx ys, grad mn ys, grad lse xs)".to_string(),
        "(grad sel xs, grad smin xs, grad sel ys, grad smin ys)".to_string(),
        "(grad (fun a -> from a xs) 10.0, grad (from 10.0) xs, grad (fun a -> from a xs) (-10.0))".to_string(),
        "(grad (fun a -> from a (build 0 (fun i -> toReal i))) 1.5, grad (from 1.5) (build 0 (fun i -> toReal i)))"
            .to_string(),
    ];
    for c in cotangents {
        mains.push(format!("(vjp mx xs ({c}), vjp mn xs ({c}), vjp mx ys ({c}), vjp lse xs ({c}))"));
        mains.push(format!("(vjp sel xs ({c}), vjp smin xs ({c}), vjp sel ys ({c}), vjp smin ys ({c}))"));
        mains.push(format!(
            "(vjp (from 10.0) xs ({c}), vjp (fun a -> from a xs) 10.0 ({c}), vjp (fun a -> from a xs) 0.0 ({c}))"
        ));
    }
    frontend::with_big_stack(|| {
        for main in &mains {
            // (Compared as numbers: where an adjoint is a zero, the reducer's starts symbolic and
            // the compiled one at +0.0, so their zeros' signs may differ, before this change too.)
            let (_, mono) = runtime::prepare(&format!("{defs}def main = {main}\n"), "main").unwrap();
            let a = runtime::interp::run(&mono).unwrap();
            let r = runtime::engine::run(&mono).unwrap();
            assert!(r.note.is_none() && close(&reals(&a), &reals(&r.value)), "{main}: {a} vs {}", r.value);
        }
        // No tape and no reverse loop: the forward loop carries the index, the reverse reads it.
        for f in ["mx", "mn", "sel", "smin"] {
            let (_, mono) = runtime::prepare(&format!("{defs}def main = grad {f} xs\n"), "main").unwrap();
            let (_, sites) = adjoint::reverse::transform_listing(&mono).unwrap();
            let (fwd, rev) = (sites[0].forward.join("\n"), sites[0].reverse.join("\n"));
            assert!(!fwd.contains("tape") && !rev.contains("iterate"), "{f}: {fwd}\n{rev}");
        }
    });
}

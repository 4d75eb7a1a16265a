//! Array fusion in lowering (`anf::lower::fuse`): an array made by `build`/`map`/`zipWith` and read
//! once by `sum`, `dot`, `fold`, `len`, indexing, `map` or `zipWith` is never made. Each program runs
//! under the interpreter and compiled (optimised, unoptimised, and compacting after every
//! iteration in checking mode), which must agree exactly — values printed bit for bit, or the same
//! error at the same span. The error programs put a failure in the producer and another in the
//! consumer, or between them, so that computing the elements in the consumer's loop in the wrong
//! order would report the wrong one. Separate tests read lowering's IR to check which arrays are
//! made (so the comparisons compare fused code), and the optimised IR of the MLP's dense layer.

mod program_gen;

use program_gen::both_engines;

/// Data the programs share: `xs` has 50 Reals, `is` indices into it, `bad` indices with one out of
/// range at position 3, `worse` with one out of range at position 1.
const DATA: &str = "def xs = build 50 (fun i -> toReal (i * 7 % 11) * 0.37 - 1.1)
def ys = build 50 (fun i -> 1.0 / toReal (i + 1))
def is = build 10 (fun i -> i * 3)
def bad = build 10 (fun i -> if i == 3 then 99 else i)
def worse = build 10 (fun i -> if i == 1 then -5 else i * 2)
";

/// (name, `main`, arrays lowering makes in `main`'s definition: `None` if not checked).
const PROGRAMS: &[(&str, &str, Option<usize>)] = &[
    // Fused patterns: values.
    ("sum build", "def main = sum (build 1000 (fun i -> 1.0 / toReal (i + 1)))", Some(0)),
    ("sum build int", "def main = sum (build 100 (fun i -> i * 4611686018427387904 + i))", Some(0)),
    ("sum of negative zeros", "def main = sum (build 3 (fun i -> -0.0))", Some(0)),
    ("sum map", "def main = sum (map (fun x -> x * x + 0.1) xs)", Some(0)),
    ("sum map builtin", "def main = sum (map tanh xs)", Some(0)),
    ("sum zipWith", "def main = sum (zipWith (fun a b -> a * b - 0.3) xs ys)", Some(0)),
    ("dot build map", "def main = dot (build 50 (fun i -> toReal i)) (map sin xs)", Some(0)),
    ("dot map map", "def main = dot (map cos ys) (map sin xs)", Some(0)),
    ("dot int", "def main = dot (build 10 (fun i -> i + 1)) (map (fun i -> i * i) is)", Some(0)),
    ("fold build", "def main = fold (fun acc x -> acc * 0.5 + x) 1.0 (build 20 (fun i -> toReal i / 3.0))", Some(0)),
    ("fold map tuple", "def main = fold (fun (s, m) x -> (s + x, max m x)) (0.0, -100.0) (map exp xs)", Some(0)),
    ("len build", "def main = len (build 7 (fun i -> i * i))", Some(0)),
    ("index build", "def main = (build 7 (fun i -> i * i)).[3]", Some(0)),
    ("map map", "def main = sum (map (fun x -> x + 1.0) (map (fun x -> x * 2.0) xs))", Some(0)),
    ("zipWith of map and build", "def main = sum (zipWith (fun a b -> a - b) (map log ys) (build 50 (fun i -> toReal i)))", Some(0)),
    ("map build made", "def main = map (fun x -> x + 1.0) (build 5 (fun i -> toReal i))", Some(1)),
    ("zipWith map made", "def main = zipWith (fun a b -> (a, b)) (map (fun x -> x * x) is) (build 10 (fun i -> i))", Some(1)),
    ("elements holding arrays", "def main = sum (map (fun r -> sum r) (build 30 (fun i -> build i (fun j -> toReal (i * j)))))", Some(1)),
    ("nested dense layer", "def dense (w : Array Real) (b : Array Real) (x : Array Real) =
  let n = len x in
  build (len b) (fun j -> b.[j] + sum (build n (fun k -> w.[j * n + k] * x.[k])))
def main = sum (map tanh (dense (build 20 (fun i -> toReal i * 0.1)) [0.5, 0.25, -1.0, 2.0] [1.0, 2.0, -3.0, 0.5, 0.25]))", None),
    ("map of pairs in memory", "def main = let ps = build 10 (fun i -> (i, toReal i * 0.5)) in sum (map (fun (a, b) -> toReal a * b) ps) + ps.[9].2", Some(1)),
    // Not fused: the array is used twice, or inside a λ, or returned.
    ("used twice", "def main = let a = build 5 (fun i -> toReal i) in sum a + a.[0]", Some(1)),
    ("used in a loop", "def main = let a = build 5 (fun i -> toReal i) in sum (build 3 (fun j -> a.[j]))", Some(1)),
    ("returned", "def main = build 5 (fun i -> toReal i)", Some(1)),
    // Errors: the producer's own checks and element errors keep their order.
    ("negative count", "def main = sum (build (0 - 3) (fun i -> xs.[100]))", Some(0)),
    ("element error in sum", "def main = sum (build 5 (fun i -> xs.[i * 20]))", Some(0)),
    ("division by zero in sum", "def main = sum (build 5 (fun i -> 10 / (i - 3)))", Some(0)),
    ("map map both fail", "def main = sum (map (fun i -> xs.[i * 30]) (map (fun i -> is.[i]) bad))", Some(1)),
    ("map map inner fails", "def main = sum (map (fun x -> x * 2.0) (map (fun i -> xs.[i]) bad))", Some(0)),
    ("map map outer fails", "def main = sum (map (fun i -> xs.[i]) (map (fun i -> i * 30) is))", Some(0)),
    ("dot lengths, producer fails", "def main = dot xs (build 10 (fun i -> xs.[i * 10]))", Some(0)),
    ("dot lengths", "def main = dot xs (build 10 (fun i -> toReal i))", Some(0)),
    ("dot lengths, first operand fails", "def main = dot (map (fun i -> xs.[i]) bad) ys", Some(0)),
    ("dot both fail", "def main = dot (map (fun i -> xs.[i]) bad) (map (fun i -> ys.[i]) worse)", Some(1)),
    ("dot both fail, swapped", "def main = dot (map (fun i -> ys.[i]) worse) (map (fun i -> xs.[i]) bad)", Some(1)),
    ("zipWith lengths, producer fails", "def main = sum (zipWith (fun a b -> a + b) xs (map (fun i -> xs.[i]) bad))", Some(0)),
    ("zipWith consumer and producer fail", "def main = sum (zipWith (fun a i -> a + xs.[i]) (map (fun i -> ys.[i]) bad) worse)", Some(1)),
    ("fold consumer and producer fail", "def main = fold (fun acc i -> acc + xs.[i * 20]) 0.0 (map (fun i -> is.[i]) bad)", Some(1)),
    ("len of a failing build", "def main = len (build 5 (fun i -> xs.[i + 48]))", Some(1)),
    ("index of a failing build", "def main = (build 5 (fun i -> xs.[i + 48])).[0]", Some(1)),
    ("index out of range", "def main = (build 5 (fun i -> i)).[5]", Some(0)),
    ("failing binding between", "def main = let a = build 5 (fun i -> xs.[i + 47]) in let b = xs.[100] in sum a + b", Some(1)),
    ("safe binding between", "def main = let a = build 5 (fun i -> xs.[i + 47]) in let b = toReal (len xs) * 2.0 in sum a + b", Some(0)),
    ("infallible past a failing binding", "def main = let a = build 5 (fun i -> toReal i) in let b = xs.[100] in sum a + b", Some(0)),
    // Which element functions can fail (`term_infallible`, `fn_infallible`, `clo_infallible`): `len`
    // and indexing read no or one element, so they fuse a producer exactly when its elements cannot
    // fail. Infallible: fused (these count the arrays), fallible: made, and the error is the
    // interpreter's (a wrongly fused `len` would return the length instead).
    ("len of conditionals", "def main = len (build 5 (fun i -> if i > 2 then toReal i else 0.0))", Some(0)),
    ("len of tuples and arrays", "def main = len (build 5 (fun i -> (i, [i, i + 1])))", Some(0)),
    ("index of negations, nots, projections", "def main = (build 5 (fun i -> (- (toReal i), not (i > 2), (i, 2.0).1))).[2]", Some(0)),
    ("len of Real divisions", "def main = len (build 5 (fun i -> 1.0 / toReal i))", Some(0)),
    ("len of a builtin named by a let", "def main = len (build 5 (fun i -> let f = toReal in f i))", Some(0)),
    ("len of a builtin map", "def main = len (map tanh xs)", Some(0)),
    ("len of partial applications", "def main = len (map max xs)", Some(0)),
    ("len of an infallible zipWith", "def main = len (zipWith (fun a b -> a + b) xs ys)", Some(0)),
    ("len of a let between curried λs", "def main = len (zipWith (fun a -> let t = a * 2.0 in fun b -> t + b) xs ys)", Some(0)),
    ("len of maps of maps of a build", "def main = len (map (fun x -> x + 1.0) (map (fun x -> x * 2.0) (build 5 (fun i -> toReal i))))", Some(0)),
    ("sum named by a let", "def main = let s = sum in let a = build 5 (fun i -> toReal i) in s a", Some(0)),
    ("len of a failing branch", "def main = len (build 5 (fun i -> if i > 2 then xs.[i + 47] else 0.0))", Some(1)),
    ("len of Int divisions", "def main = len (build 5 (fun i -> 10 / (i - 3)))", Some(1)),
    ("len of bag updates", "def main = let b = bag{1 # 9223372036854775807} in let d = gchange bagGroup bag{1} in len (build 5 (fun i -> b <+> d))", Some(1)),
    ("len of a failing builtin map", "def main = len (map toInt (build 3 (fun i -> 0.0 / 0.0)))", Some(1)),
    ("len of a map of a failing map", "def main = len (map (fun x -> x * 2.0) (map (fun i -> xs.[i]) bad))", Some(1)),
    ("len of a failing zipWith", "def main = len (zipWith (fun a i -> toReal a + xs.[i]) is bad)", Some(1)),
    ("len of a zipWith of a failing map", "def main = len (zipWith (fun a b -> a + b) (map (fun i -> is.[i]) bad) is)", Some(1)),
    ("len of a failing λ after a let", "def main = len (zipWith (fun a -> let t = a * 2 in fun b -> t + is.[b]) is bad)", Some(1)),
    // A producer that can fail, and a consumer whose function is bound between them (a builtin,
    // looked up among the bindings between): fused when that function cannot fail, else made.
    ("fold by a builtin bound between", "def main = let a = build 5 (fun i -> xs.[i + 47]) in fold max 0.0 a", Some(0)),
    ("map by a partial builtin bound between", "def main = let a = build 3 (fun i -> xs.[i + 47]) in let fs = map max a in fs.[0] 1.0 + fs.[2] (-5.0)", Some(1)),
    ("map by a failing builtin bound between", "def main = let a = build 3 (fun i -> if i == 2 then xs.[100] else 0.0 / 0.0) in map toInt a", Some(2)),
    ("len of a map of a zipWith", "def main = len (map (fun x -> x + 1.0) (zipWith (fun a b -> a + b) xs ys))", Some(0)),
    ("len of a map of a failing zipWith", "def main = len (map (fun x -> x + 1.0) (zipWith (fun a i -> toReal a + xs.[i]) is bad))", Some(1)),
    // A producer over a failing producer can fail though its own function cannot.
    ("len of a map of a zipWith of a failing map", "def main = len (map (fun x -> x + 1) (zipWith (fun a b -> a + b) (map (fun i -> is.[i]) bad) is))", Some(1)),
    ("len of a map of a map of a failing map", "def main = len (map (fun x -> x + 1.0) (map (fun x -> x * 2.0) (map (fun i -> xs.[i]) bad)))", Some(1)),
    ("dot lengths, a map of a failing map", "def main = dot (map (fun x -> x * 2.0) (map (fun i -> xs.[i]) bad)) ys", Some(0)),
    ("dot both fail, one through a map", "def main = dot (map (fun x -> x * 2.0) (map (fun i -> xs.[i]) bad)) (map (fun i -> ys.[i]) worse)", Some(1)),
];

fn program(main: &str) -> String {
    format!("{DATA}{main}\n")
}

#[test]
fn fused_programs_agree_with_the_interpreter_exactly() {
    program_gen::assert_engines_agree(PROGRAMS.iter().map(|(name, main, _)| (*name, program(main))));
}

/// The outcomes the programs are written to reach, so the comparisons compare something: the
/// error programs fail with the error the interpreter reports first.
#[test]
fn fused_programs_reach_their_cases() {
    let outcome = |name: &str| {
        let (_, main, _) = PROGRAMS.iter().find(|(n, _, _)| *n == name).expect("a program");
        both_engines(&program(main)).expect("compiles").0
    };
    let error = |name: &str| outcome(name).expect_err("an error").0;
    assert_eq!(outcome("len build"), Ok("7".into()));
    assert_eq!(outcome("index build"), Ok("9".into()));
    assert_eq!(outcome("sum of negative zeros"), Ok("0.0".into()));
    assert!(error("negative count").contains("negative"), "{}", error("negative count"));
    assert!(error("division by zero in sum").contains("division by zero"));
    for name in ["dot lengths, producer fails", "zipWith lengths, producer fails", "dot lengths, first operand fails"] {
        assert!(error(name).contains("out of bounds"), "{name}: {}", error(name));
    }
    assert!(error("dot lengths").contains("different lengths"), "{}", error("dot lengths"));
    // The producer's error (index 99 at position 3) comes before the consumer's (-5 at position 1).
    for name in ["map map both fail", "zipWith consumer and producer fail", "fold consumer and producer fail"] {
        assert!(error(name).contains("index 99 "), "{name}: {}", error(name));
    }
    assert!(error("dot both fail").contains("index 99 "), "{}", error("dot both fail"));
    assert!(error("dot both fail, swapped").contains("index -5 "), "{}", error("dot both fail, swapped"));
    assert!(error("failing binding between").contains("index 50 "), "{}", error("failing binding between"));
    assert!(error("infallible past a failing binding").contains("index 100 "));
    for name in ["len of a failing branch", "fold by a builtin bound between"] {
        assert!(error(name).contains("index 50 "), "{name}: {}", error(name));
    }
    assert!(error("len of Int divisions").contains("division by zero"));
    assert!(error("len of bag updates").contains("bag multiplicity overflow"), "{}", error("len of bag updates"));
    assert!(error("len of a failing builtin map").contains("NaN"), "{}", error("len of a failing builtin map"));
    assert!(error("map by a failing builtin bound between").contains("index 100 "));
    for name in [
        "len of a map of a failing map",
        "len of a map of a map of a failing map",
        "len of a map of a failing zipWith",
        "len of a map of a zipWith of a failing map",
        "dot lengths, a map of a failing map",
        "len of a failing zipWith",
        "len of a zipWith of a failing map",
        "len of a failing λ after a let",
        "dot both fail, one through a map",
    ] {
        assert!(error(name).contains("index 99 "), "{name}: {}", error(name));
    }
    assert_eq!(outcome("len of a let between curried λs"), Ok("50".into()));
    assert_eq!(outcome("sum named by a let"), Ok("10.0".into()));
    assert!(outcome("map by a partial builtin bound between").is_ok());
    assert_eq!(outcome("map of pairs in memory"), Ok("147.0".into()));
}

/// Lowering's IR of `main`'s definition: how many arrays it makes (`newarray`), fused or not.
#[test]
fn fused_arrays_are_never_made() {
    let mut failures = Vec::new();
    for (name, main, arrays) in PROGRAMS {
        let Some(arrays) = arrays else { continue };
        let src = program(main);
        let text = frontend::with_big_stack(move || {
            let (_, mono) = runtime::prepare(&src, "main").expect("checks");
            runtime::engine::ir_text(&mono, false).expect("lowers")
        });
        // `@main` evaluates the data definitions `main` uses first (an array each), then `main`'s
        // body (an array made by a λ's body function counts too).
        let data = ["xs", "ys", "is", "bad", "worse"]
            .iter()
            .filter(|d| main.split(|c: char| !c.is_alphanumeric()).any(|w| w == **d))
            .count();
        let made = arrays_made(&text) - data;
        if made != *arrays {
            failures.push(format!("{name}: {made} arrays made, expected {arrays}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The `newarray`s of an IR text whose array is used: a fused producer's memory claim for a big
/// array (`lower::fuse`, never read) is not an array made.
fn arrays_made(text: &str) -> usize {
    text.split("\nfn @")
        .map(|f| {
            f.lines()
                .filter_map(|l| l.trim().split_once(" = newarray").map(|(v, _)| v))
                .filter(|v| f.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| w == v).count() > 1)
                .count()
        })
        .sum()
}

/// A producer too big for `--max-memory` is out of memory compiled as in the interpreter (which
/// makes every array), whatever consumes it; small ones claim nothing.
#[test]
fn big_fused_producers_claim_their_memory() {
    for (main, fits) in [
        ("def main = sum (build 3000000 (fun i -> toReal i))", false),
        ("def main = len (build 3000000 (fun i -> (i, i, i)))", false),
        ("def main = sum (map (fun x -> x * 2.0) (build 100000 (fun i -> toReal i)))", true),
    ] {
        let src = main.to_string();
        let outcome = frontend::with_big_stack(move || {
            let (_, mono) = runtime::prepare(&src, "main").expect("checks");
            let mut ctx = runtime::native::CallCtx::new(16 << 20);
            runtime::engine::run_in(&mono, &mut ctx).map(|r| r.value.to_string()).map_err(|d| d.message)
        });
        match outcome {
            Ok(_) => assert!(fits, "{main}: expected out of memory"),
            Err(e) => assert!(!fits && e.starts_with("out of memory"), "{main}: {e}"),
        }
    }
}

/// Fused producers under a megabyte claim nothing, those of a megabyte or more claim their array:
/// optimised, with their lengths known, the programs make no array, resp. one (the claim: a
/// `newarray` behind a test of the length).
#[test]
fn fused_producers_claim_from_a_megabyte() {
    for (main, claims) in [
        ("def main = sum (map (fun x -> x * 2.0) (build 100000 (fun i -> toReal i)))", 0),
        ("def main = sum (build 120000 (fun i -> toReal i))", 0),
        ("def main = sum (build 140000 (fun i -> toReal i))", 1),
        ("def main = len (build 40000 (fun i -> (i, i, i)))", 0),
        ("def main = len (build 50000 (fun i -> (i, i, i)))", 1),
        ("def main = dot (build 1000 (fun i -> toReal i)) (build 1000 (fun i -> 1.0))", 0),
    ] {
        let src = main.to_string();
        let text = frontend::with_big_stack(move || {
            let (_, mono) = runtime::prepare(&src, "main").expect("checks");
            runtime::engine::ir_text(&mono, true).expect("lowers")
        });
        assert_eq!(text.matches("= newarray").count(), claims, "{main}:\n{text}");
    }
}

/// `dot` of two arrays in memory is a plain counted loop: it allocates nothing, so it takes no
/// arena mark and compacts nothing, even before the optimiser runs.
#[test]
fn dot_of_arrays_in_memory_compacts_nothing() {
    let src = "def dotp (a : Array Real) (b : Array Real) = dot a b\ndef main = dotp [1.0, 2.0] [3.0, 4.0]";
    let text = frontend::with_big_stack(move || {
        let (_, mono) = runtime::prepare(src, "dotp").expect("checks");
        runtime::engine::ir_text(&mono, false).expect("lowers")
    });
    let body = text.split("fn @dotp(").nth(1).expect("dotp's body");
    assert!(body.contains("fmul") && !body.contains("nabla_arena"), "{text}");
}

/// The MLP's dense layer, optimised: the row product `sum (build n …)` is a loop that reads `w`
/// and `x` and adds into a register; the only array made and written is the layer's output.
#[test]
fn dense_layer_row_products_are_loops() {
    let src = "def dense (w : Array Real) (b : Array Real) (x : Array Real) =
  let n = len x in
  build (len b) (fun j -> b.[j] + sum (build n (fun k -> w.[j * n + k] * x.[k])))
def main = dense [1.0, 2.0, 3.0, 4.0] [0.5, 0.25] [1.0, 2.0]";
    let text = frontend::with_big_stack(move || {
        let (_, mono) = runtime::prepare(src, "dense").expect("checks");
        runtime::engine::ir_text(&mono, true).expect("lowers")
    });
    let body = text.split("fn @dense.step3").nth(1).expect("the layer's body function");
    // One array made (the output) and one claim (a row of a megabyte or more, never read).
    assert_eq!(arrays_made(&format!("\nfn @{body}")), 1, "{text}");
    assert_eq!(body.matches("= newarray").count(), 2, "{text}");
    assert_eq!(body.matches("fadd").count(), 2, "{text}");
    assert_eq!(body.matches("store").count(), 1, "only the output is written: {text}");
}

/// Every program's fused IR verifies as lowering made it and after every pass of `anf::opt`.
#[test]
fn fused_ir_verifies_after_every_pass() {
    let mut failures = Vec::new();
    for (name, main, _) in PROGRAMS {
        let src = program(main);
        let result = frontend::with_big_stack(move || -> Result<(), String> {
            let (_, mono) = runtime::prepare(&src, "main").map_err(|d| d.message)?;
            let lowered = anf::lower::lower(&mono, &anf::lower::LowerOptions::default()).map_err(|e| e.message)?;
            let mut module = lowered.module;
            anf::ir::verify(&module).map_err(|es| es[0].to_string())?;
            anf::opt::optimize_checked(&mut module, &[lowered.main], &anf::opt::OptOptions::default())?;
            Ok(())
        });
        if let Err(e) = result {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

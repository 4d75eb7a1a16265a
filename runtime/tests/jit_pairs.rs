//! Elementwise loops run two elements at a time (`jit::vector`: `f64x2` while two iterations
//! remain and their bounds checks pass, the loop itself for the rest). Each program runs under
//! the interpreter and compiled (optimised, unoptimised, compacting after every iteration), which
//! must agree exactly: the same bits of every element (negative zeros, infinities, NaN included),
//! or the same error at the same span, at odd and even lengths and failing at odd and even
//! indices. A separate test checks that the compiled code of such loops uses packed arithmetic.

mod program_gen;

use program_gen::both_engines;

/// Lengths 0 to 5 and 40/41; values with signed zeros, infinities and NaN among ordinary ones.
fn data(n: usize) -> String {
    format!(
        "def xs = build {n} (fun i -> if i % 7 == 3 then -0.0 else if i % 11 == 5 then 1.0 / 0.0 else toReal (i * 5 % 13) * 0.25 - 1.0)
def ys = build {n} (fun i -> if i % 9 == 4 then 0.0 / 0.0 else toReal (i * 3 % 7) - 2.5)
def zs = build ({n} + 1) (fun i -> toReal i * 0.5 - 0.75)
"
    )
}

/// (name, `main`); each shows its whole array so every element's bits are compared.
const PROGRAMS: &[(&str, &str)] = &[
    ("map", "def main = map (fun x -> 2.0 * x - 1.0) xs"),
    ("negation and division", "def main = map (fun x -> - (x / 3.0)) xs"),
    ("zipWith", "def main = zipWith (fun x y -> x * y + x / (y - 0.5)) xs ys"),
    ("a scalar from before the loop", "def main = let c = sum xs in map (fun x -> c * x + c) xs"),
    ("build over two arrays", "def main = build (len xs) (fun i -> xs.[i] - ys.[i] * zs.[i])"),
    // `zs` is one longer: `zs.[i + 1]` is in bounds; `xs.[i + 1]` fails at the last element.
    ("shifted read in bounds", "def main = build (len xs) (fun i -> xs.[i] + zs.[i + 1])"),
    ("shifted read past the end", "def main = build (len xs) (fun i -> ys.[i] + xs.[i + 1])"),
    ("shifted read before the start", "def main = build (len xs) (fun i -> ys.[i] * xs.[i - 1])"),
    ("counting past the length", "def main = build (len zs) (fun i -> xs.[i] * 2.0)"),
    // Rank-1 updates and axpys in reverse mode (the MLP's and logistic regression's), on finite
    // non-zero data: the reducer's gradient starts from a symbolic zero where the compiled one
    // adds to `+0.0`, so a `-0.0` contribution would differ in its sign before any pairing.
    ("gradient of a dot product", "def main = grad (fun (w : Array Real) -> dot w zs * dot w zs) zs"),
    (
        "gradient of a matrix-vector product",
        "def main = grad (fun (w : Array Real) -> sum (build 3 (fun j -> let n = len zs in let s = sum (build n (fun k -> w.[j * n + k] * zs.[k])) in s * s))) (build (3 * len zs) (fun i -> toReal (i + 1) * 0.01))",
    ),
];

fn program(n: usize, main: &str) -> String {
    format!("{}{main}\n", data(n))
}

#[test]
fn paired_loops_agree_with_the_interpreter_exactly() {
    let mut cases = Vec::new();
    for n in [0, 1, 2, 3, 4, 5, 40, 41] {
        for (name, main) in PROGRAMS {
            cases.push((format!("{name} (n = {n})"), program(n, main)));
        }
    }
    program_gen::assert_engines_agree(cases.iter().map(|(name, src)| (name.as_str(), src.clone())));
}

/// The failing programs fail out of bounds at n ≥ 1 and the others do not, so the comparison
/// compares both kinds of outcome.
#[test]
fn programs_reach_their_cases() {
    for n in [1, 4, 5] {
        for (name, main) in PROGRAMS {
            let (interp, _, _) = both_engines(&program(n, main)).expect("compiles");
            let fails =
                name.contains("past the end") || name.contains("before the start") || name.contains("past the length");
            match interp {
                Ok(v) => assert!(!fails, "{name}: expected an error, got {v}"),
                Err((e, _, _)) => assert!(fails && e.contains("out of bounds"), "{name}: {e}"),
            }
        }
    }
}

/// The machine code of `main`'s own function (optimised, as the engine compiles it).
fn machine_code(src: &str) -> String {
    let src = src.to_string();
    frontend::with_big_stack(move || {
        let (_, mono) = runtime::prepare(&src, "main").expect("checks");
        let mono = adjoint::reverse::transform(&mono).expect("reverse mode compiles").unwrap_or(mono);
        let mut lowered = anf::lower::lower(&mono, &anf::lower::LowerOptions::default()).expect("lowers");
        let map = anf::opt::optimize(&mut lowered.module, &[lowered.main], &anf::opt::OptOptions::default());
        let f = map.get(lowered.main).expect("main survives");
        let mut jit = jit::Jit::new(jit::JitConfig::default(), runtime::native::support_table()).expect("a JIT");
        jit.disassemble(&lowered.module, f).expect("compiles")
    })
}

/// The elementwise loops are paired (packed multiplies and adds), the reductions are not (a sum
/// keeps its one accumulator and its order).
#[test]
fn elementwise_loops_use_packed_arithmetic() {
    let packed = |main: &str| {
        let code = machine_code(&program(41, main));
        code.lines().any(|l| l.contains("mulpd") || l.contains("addpd") || l.contains("subpd") || l.contains("divpd"))
    };
    for (name, main) in PROGRAMS {
        if !name.contains("past the") && !name.contains("before the start") {
            assert!(packed(main), "{name}: no packed arithmetic\n{}", machine_code(&program(41, main)));
        }
    }
    assert!(!packed("def main = sum (map (fun x -> x * x) xs)"), "a sum stays one scalar chain");
}

/// The pair loop is laid out before the loop itself, right after the test that enters it, in a
/// loop nest too. Cranelift places a branch's second target right after the branch and its first
/// after everything that target reaches; with the loop itself second, the pair loop went after
/// the rest of the function (or of the enclosing loop), where the values live across it are in
/// registers, while in the pair loop's test they are in stack slots: regalloc2 reloaded and
/// stored them back at every pair (ode's gradient 1.45× slower than unpaired).
#[test]
fn pair_loops_come_before_the_loop_itself() {
    let xs: Vec<String> = (0..41).map(|i| format!("{}.5", i % 7)).collect();
    let data = format!("def xs = [{}]\n", xs.join(", "));
    for main in [
        "def main = map (fun x -> 2.0 * x - 1.0) xs",
        "def main = iterate 3 (fun (ys : Array Real) -> map (fun y -> 2.0 * y - 1.0) ys) xs",
    ] {
        let code = machine_code(&format!("{data}{main}\n"));
        let first = |op: &str| code.lines().position(|l| l.contains(op));
        let (packed, scalar) = (first("mulpd"), first("mulsd"));
        assert!(
            packed.is_some() && scalar.is_some() && packed < scalar,
            "{main}: the pair loop (mulpd, line {packed:?}) is not before the loop itself (mulsd, line {scalar:?})\n{code}"
        );
    }
}

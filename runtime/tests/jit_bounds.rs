//! Bounds-check elimination (`anf::opt::bounds`): indexing in loops over an array's own length
//! loses its check, every other index keeps it. Each program runs under the interpreter and
//! compiled (optimised, unoptimised, and compacting after every iteration), which must agree
//! exactly — the same value, or the same error at the same span; a separate test reads the
//! optimised IR so the comparisons compare code without the checks.

mod program_gen;

use program_gen::both_engines;

const DATA: &str = "def xs = build 40 (fun i -> toReal (i * 5 % 13) * 0.25 - 1.0)
def short = build 39 (fun i -> toReal i)
";

/// (name, `main`, bounds checks left in the optimised IR of `main`'s own code: `None` if not
/// checked).
const PROGRAMS: &[(&str, &str, Option<usize>)] = &[
    // Proved: an index counted from 0 below the array's own length.
    ("build over own length", "def main = sum (build (len xs) (fun i -> xs.[i] * xs.[i]))", Some(0)),
    ("map index", "def main = let n = len xs in sum (build n (fun i -> xs.[i] + toReal i))", Some(0)),
    ("triangle", "def main = sum (build (len xs) (fun r -> xs.[r] * sum (build r (fun c -> xs.[c]))))", Some(0)),
    (
        "fold with an index",
        "def main = let (s, _) = fold (fun (s, i) x -> (s + x * xs.[i], i + 1)) (0.0, 0) xs in s",
        None,
    ),
    // Not proved, and failing: the check must stay and fail where the interpreter does.
    ("one past the end", "def main = sum (build (len xs) (fun i -> xs.[i + 1]))", Some(1)),
    ("one before the start", "def main = sum (build (len xs) (fun i -> xs.[i - 1]))", Some(1)),
    ("another array's length", "def main = sum (build (len xs) (fun i -> short.[i]))", Some(1)),
    ("count past the length", "def main = sum (build (len xs + 1) (fun i -> xs.[i]))", Some(1)),
    (
        "triangle past the diagonal",
        "def main = sum (build (len xs) (fun r -> sum (build (r + 2) (fun c -> xs.[c]))))",
        Some(1),
    ),
    (
        "inner loop over the outer array",
        "def main = sum (build (len short) (fun r -> sum (build (len xs) (fun c -> short.[c]))))",
        Some(1),
    ),
    ("descending", "def main = sum (build (len xs) (fun i -> xs.[len xs - i]))", Some(1)),
    // Proved: a reverse loop's index, `n - 1 - i` below `n`.
    ("reversed", "def main = sum (build (len xs) (fun i -> xs.[len xs - 1 - i] * toReal i))", Some(0)),
    // Not proved: `n - 1 - i` where the loop runs to another length.
    ("reversed over a longer count", "def main = sum (build (len xs) (fun i -> short.[len xs - 1 - i]))", Some(1)),
    // A check of the counter against another array's length, hoisted (`anf::opt::hoist`): the
    // loop runs to the smaller length, and the check is left on the way out, where it fails with
    // the index and the length it failed with in the loop.
    ("another array, longer", "def main = sum (build (len short) (fun i -> short.[i] * xs.[i]))", Some(1)),
    ("another array, after a read", "def main = sum (build (len xs) (fun i -> xs.[i] * short.[i]))", Some(1)),
    ("two arrays, the first fails first", "def main = sum (build (len xs + 2) (fun i -> short.[i] + xs.[i]))", Some(2)),
    (
        "two arrays, the second fails first",
        "def main = sum (build (len xs + 2) (fun i -> xs.[i] + short.[i]))",
        Some(2),
    ),
    // A check of `c + i` (a row's offset plus the counter), hoisted too: the loop runs to `m − c`
    // (or not at all when `c + i0 < 0`). The row loop around it is also jammed (`anf::opt::jam`),
    // whose rows' checks are tested before the jammed loop; the check left is the unjammed loop's.
    (
        "an offset row in bounds",
        "def main = sum (build 4 (fun j -> sum (build 10 (fun k -> xs.[j * 10 + k]))))",
        Some(1),
    ),
    (
        "an offset row past the end",
        "def main = sum (build 4 (fun j -> sum (build 11 (fun k -> xs.[j * 10 + k]))))",
        Some(1),
    ),
    (
        "an offset row before the start",
        "def main = sum (build 4 (fun j -> sum (build 10 (fun k -> xs.[j * 10 - 5 + k]))))",
        Some(1),
    ),
    (
        "a division before the check",
        "def main = sum (build (len xs) (fun i -> toReal (7 / (39 - i)) + short.[i]))",
        Some(1),
    ),
];

/// The programs whose checks are hoisted out of their loop (see `hoisted_checks_leave_the_loop`).
const HOISTED: &[&str] = &[
    "one past the end",
    "another array's length",
    "count past the length",
    "triangle past the diagonal",
    "inner loop over the outer array",
    "another array, longer",
    "another array, after a read",
    "two arrays, the first fails first",
    "two arrays, the second fails first",
    "an offset row in bounds",
    "an offset row past the end",
    "an offset row before the start",
];

fn program(main: &str) -> String {
    format!("{DATA}{main}\n")
}

#[test]
fn eliminated_checks_agree_with_the_interpreter_exactly() {
    program_gen::assert_engines_agree(PROGRAMS.iter().map(|(name, main, _)| (*name, program(main))));
}

/// The failing programs fail (out of bounds), the others do not, so the comparison compares
/// both kinds of outcome.
#[test]
fn programs_reach_their_cases() {
    for (name, main, _) in PROGRAMS {
        let (interp, _, _) = both_engines(&program(main)).expect("compiles");
        let fails = matches!(
            *name,
            "one past the end"
                | "one before the start"
                | "another array's length"
                | "count past the length"
                | "triangle past the diagonal"
                | "inner loop over the outer array"
                | "descending"
                | "reversed over a longer count"
                | "another array, after a read"
                | "two arrays, the first fails first"
                | "two arrays, the second fails first"
                | "a division before the check"
                | "an offset row past the end"
                | "an offset row before the start"
        );
        match interp {
            Ok(v) => assert!(!fails, "{name}: expected an error, got {v}"),
            Err((e, _, _)) if *name == "a division before the check" => {
                assert!(e.contains("division by zero"), "{name}: {e}")
            }
            Err((e, _, _)) => assert!(fails && e.contains("out of bounds"), "{name}: {e}"),
        }
    }
}

/// The optimised IR of `main`'s definition: how many bounds checks are left (the data
/// definitions' code has none).
#[test]
fn checks_left_in_the_optimised_ir() {
    let mut failures = Vec::new();
    for (name, main, checks) in PROGRAMS {
        let Some(checks) = checks else { continue };
        let src = program(main);
        let text = frontend::with_big_stack(move || {
            let (_, mono) = runtime::prepare(&src, "main").expect("checks");
            runtime::engine::ir_text(&mono, true).expect("lowers")
        });
        let left = text.lines().filter(|l| l.trim_start().starts_with("boundscheck")).count();
        if left != *checks {
            failures.push(format!("{name}: {left} checks left, expected {checks}\n{text}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The optimised IR of `main`'s definition.
fn optimised_ir(main: &str) -> String {
    let src = program(main);
    frontend::with_big_stack(move || {
        let (_, mono) = runtime::prepare(&src, "main").expect("checks");
        runtime::engine::ir_text(&mono, true).expect("lowers")
    })
}

/// A hoisted check sits on the loop's way out, before an unreachable trap; one that cannot be
/// hoisted (a division, which may fail first, precedes it) stays in the loop.
#[test]
fn hoisted_checks_leave_the_loop() {
    let mut wrong = Vec::new();
    for (name, main, _) in PROGRAMS {
        let text = optimised_ir(main);
        if text.contains("trap unreachable") != HOISTED.contains(name) {
            wrong.push(format!("{name}:\n{text}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

//! Loops whose carried value holds arrays compact it (copy out, free the loop's memory, copy
//! back) so long loops need memory for their live data only. Each program runs compiled with
//! compaction after every iteration that allocates, and must print what the interpreter prints.

use runtime::native::{CallCtx, DEFAULT_ARENA_LIMIT};

const PROGRAMS: &[&str] = &[
    // A carried array rebuilt every iteration.
    "def main = sum (iterate 200 (fun a -> map (fun x -> x * 1.01 + 1.0) a) (build 50 (fun i -> toReal i)))",
    // Arrays of arrays.
    "def main = iterate 100 (fun m -> map (fun row -> map (fun x -> x + row.[0]) row) m) [[1.0, 2.0], [3.0, 4.0, 5.0]]",
    // A tuple holding arrays and scalars, some parts kept from before the loop.
    "def main = let keep = [7, 8] in iterate 150 (fun (k, a, r, b) -> (k + 1, map (fun x -> x + k) a, r * 0.5, b)) (0, [1, 2, 3], 1.0, keep)",
    // A fold with an array accumulator.
    "def main = fold (fun acc x -> map (fun a -> a + x) acc) [0.0, 1.0] (build 300 (fun i -> toReal i))",
    // Loops inside loops, each compacting to its own mark.
    "def main = iterate 30 (fun a -> iterate 20 (fun b -> map (fun x -> x + 1) b) (map (fun x -> x * 2) a)) [1, 2, 3]",
    "def main = iterate 40 (fun a -> let inner = fold (fun acc x -> [acc.[0] + x]) [0] a in map (fun x -> x + inner.[0]) a) [1, 0, 1]",
    // A bag made before the loop and folded in every iteration (its cached entries are dropped
    // when the memory they lie in is freed).
    "def main = let b = bag{1, 2, 3 # 2} in iterate 100 (fun a -> map (fun x -> x + foldBag intGroup (fun k -> k) b) a) [0, 1]",
    // A bag made inside the loop, not carried.
    "def main = iterate 60 (fun a -> [a.[0] + foldBag intGroup (fun k -> k) (bag{a.[0], 1})]) [0]",
    // Empty arrays and arrays of units.
    "def main = iterate 50 (fun (a, u) -> (map (fun x -> x + 1) a, map (fun v -> v) u)) ([], [(), ()])",
    // `while` compacts like `iterate`: the predicate reads the carried array.
    "def main = while (fun a -> a.[0] < 120.0) (fun a -> map (fun x -> x * 1.01 + 1.0) a) (build 20 (fun i -> toReal i))",
    "def main = (while (fun (a, k) -> k < 70) (fun (a, k) -> (iterate 3 (fun b -> map (fun x -> x + k) b) a, k + 1)) ([1, 2], 0)).1",
    // An error after many compactions is the interpreter's error.
    "def main = iterate 100 (fun a -> if a.[0] > 50 then [a.[5]] else [a.[0] + 1, 0]) [0]",
];

fn outcome(r: Result<runtime::value::Value, frontend::Diagnostic>) -> String {
    match r {
        Ok(v) => v.to_string(),
        Err(d) => format!("error: {} at {}..{}", d.message, d.span.lo, d.span.hi),
    }
}

#[test]
fn compacting_after_every_iteration_gives_the_interpreters_results() {
    let failures: Vec<String> = frontend::with_big_stack(|| {
        let mut failures = Vec::new();
        for src in PROGRAMS {
            let (_, mono) = runtime::prepare(src, "main").unwrap_or_else(|d| panic!("{src}: {}", d.message));
            let interp = outcome(runtime::interp::run(&mono));
            let mut ctx = CallCtx::new(DEFAULT_ARENA_LIMIT);
            ctx.set_compact_min(0);
            let compiled = outcome(runtime::engine::run_in(&mono, &mut ctx).map(|r| r.value));
            if interp != compiled {
                failures.push(format!("{src}\n  interpreter {interp}\n  compiled    {compiled}"));
            }
        }
        failures
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// 60 000 iterations each making a 10 000-element array (4.8 GB in all) run in a 64 MiB arena.
#[test]
fn a_long_loop_runs_in_memory_for_its_live_data() {
    let src = "def main = sum (iterate 60000 (fun a -> map (fun x -> x + 1) a) (build 10000 (fun i -> i)))";
    let (_, mono) = runtime::prepare(src, "main").expect("type-checks");
    let mut ctx = CallCtx::new(64 << 20);
    let r = runtime::engine::run_in(&mono, &mut ctx).map(|r| r.value.to_string());
    // Σ (i + 60000) for i < 10000.
    assert_eq!(r.map_err(|d| d.message), Ok("649995000".to_string()));
    assert!(ctx.arena_reserved() <= 64 << 20);
}

/// The same for `while`: 20 000 iterations of 10 000-element arrays in a 64 MiB arena.
#[test]
fn a_long_while_loop_runs_in_memory_for_its_live_data() {
    let src =
        "def main = sum (while (fun a -> a.[0] < 20000) (fun a -> map (fun x -> x + 1) a) (build 10000 (fun i -> i)))";
    let (_, mono) = runtime::prepare(src, "main").expect("type-checks");
    let mut ctx = CallCtx::new(64 << 20);
    let r = runtime::engine::run_in(&mono, &mut ctx).map(|r| r.value.to_string());
    // Σ (i + 20000) for i < 10000.
    assert_eq!(r.map_err(|d| d.message), Ok("249995000".to_string()));
    assert!(ctx.arena_reserved() <= 64 << 20);
}

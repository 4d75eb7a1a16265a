//! Loops free their iterations' temporaries (`anf::lower::compact`): carrying loops compact
//! their carried value, `build`/`map`/`zipWith` their elements, so long loops need memory for
//! their live data only. Each program runs compiled with compaction after every iteration that
//! allocates, in checking mode (released memory poisoned and never reused, released bags and
//! maps emptied), and must print what the interpreter prints. Memory is measured as the arena's
//! high-water mark through `runtime::api`.

use runtime::api::{Arg, Compiled};
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
    // Element loops: scalar elements whose iterations make arrays (the matrix product).
    "def main = let n = 12 in let a = build n (fun i -> build n (fun j -> toReal (i + 2 * j))) in let b = build n (fun i -> build n (fun j -> toReal (i * j - 3))) in build n (fun i -> build n (fun j -> fold (fun acc k -> acc + a.[i].[k] * b.[k].[j]) 0.0 (build n (fun k -> k))))",
    // Elements that are arrays made in the iteration, next to garbage.
    "def main = build 30 (fun i -> let t = build 40 (fun k -> k + i) in [sum t, i])",
    "def main = map (fun r -> map (fun x -> x * sum (build 5 (fun k -> k))) r) [[1, 2], [3], []]",
    "def main = zipWith (fun x y -> (build x (fun k -> k + y), x * y)) [1, 2, 3] [4, 5, 6]",
    // An element holding an array made before the loop (kept, not copied) and one made in it.
    "def main = let big = build 5 (fun i -> i) in build 10 (fun i -> (big, build 3 (fun k -> k + i), sum (build 4 (fun j -> j))))",
    // A bag made before the loop, folded (its entry array cached, then moved past each release)
    // in iterations that make arrays; also in order-free folds.
    "def main = let b = foldBag bagGroup (fun k -> bag{k, k * 2}) (bag{1, 2, 3, 4 # 3}) in build 30 (fun i -> foldBag intGroup (fun k -> k * i) b + sum (build 5 (fun j -> j)))",
    "def main = let b = bag{5, 6 # 2} in build 25 (fun i -> (foldBag intGroup (fun k -> 1) b, foldBag realGroup (fun k -> toReal k) b, len (build i (fun j -> j))))",
    // Elements that are bags.
    "def main = build 20 (fun i -> let t = build 10 (fun k -> k) in singleton (sum t + i))",
    // A fold carrying a scalar whose body makes arrays.
    "def main = fold (fun acc x -> acc + sum (build 10 (fun k -> k * x))) 0 (build 100 (fun i -> i))",
    // Loops carrying bags: made in the loop, made before it, folded in it.
    "def main = iterate 200 (fun b -> merge b (singleton 1)) emptyBag",
    "def main = let b0 = bag{1, 2} in iterate 50 (fun (b, k) -> (merge b b0, k + 1)) (emptyBag, 0)",
    "def main = iterate 40 (fun (b, a) -> (merge b (singleton (foldBag intGroup (fun k -> k) b)), map (fun x -> x + 1) a)) (bag{1}, [0, 0])",
    "def main = while (fun b -> foldBag intGroup (fun k -> 1) b < 30) (fun b -> merge b (singleton (foldBag intGroup (fun k -> k) b))) bag{1}",
    // A loop carrying a map.
    "def main = iterate 50 (fun m -> foldMap intGroup (mapGroup intGroup) (fun k v -> singletonMap (k + 1) (v + 1)) m) (singletonMap 0 1)",
    "def main = fold (fun m x -> foldMap intGroup (mapGroup intGroup) (fun k v -> singletonMap k (v + x)) m) (singletonMap 7 0) (build 60 (fun i -> i))",
    // Loops carrying closures: one made in every iteration (its environment copied, holding
    // the previous closure), one made before the loop (left where it is), a partial application,
    // a group (held).
    "def main = (iterate 10 (fun f -> fun x -> f x + 1) (fun x -> x)) 5",
    // A closure rebuilt every iteration capturing an array made in it; a λ-chain partially
    // applied to an array (its environment: the chain's and the argument); an array of closures
    // each capturing the previous one; a closure capturing a map of bags.
    "def main = let r = iterate 30 (fun (f, a) -> let b = map f a in ((fun x -> x + b.[0]), b)) ((fun x -> x), [1, 2]) in (r.1 100, r.2)",
    "def main = let r = iterate 20 (fun (g, a) -> ((fun (u : Array Int) (x : Int) (y : Int) -> x + y + u.[0]) (map (fun z -> z + 1) a), map (g 1) a)) ((fun (u : Array Int) (x : Int) (y : Int) -> x + y) [0], [1, 2]) in r.2",
    "def main = let fs = iterate 10 (fun fs -> map (fun f -> fun x -> f x + len fs) fs) [(fun x -> x), (fun x -> x * 2)] in [fs.[0] 1, fs.[1] 1]",
    "def main = let r = iterate 25 (fun (f, m) -> ((fun k -> lookup bagGroup k m), foldMap bagGroup (mapGroup bagGroup) (fun k b -> singletonMap k (merge b (f k))) m)) ((fun k -> bag{k}), singletonMap 1 bag{2}) in (r.1 1, r.2)",
    // Closures as elements of `build`, carried by `fold` and `while`; a closure capturing a group
    // made in every iteration (held: the compaction is abandoned, and what it copied out — the
    // closure's environment, the array — comes back).
    "def main = let fs = build 20 (fun i -> let a = build 10 (fun k -> k + i) in fun x -> x + a.[9]) in fs.[3] 1 + fs.[19] 2",
    "def main = (fold (fun f x -> let a = build 5 (fun k -> k * x) in fun y -> f y + a.[4]) (fun y -> y) (build 30 (fun i -> i))) 1",
    "def main = let r = while (fun (f, k) -> k < 25) (fun (f, k) -> let a = [k, k] in ((fun y -> f y + a.[1]), k + 1)) ((fun y -> y), 0) in r.1 0",
    "def main = let r = iterate 20 (fun (f, a) -> let g = group (fun x y -> x + y + a.[0] - a.[0]) (fun x -> 0 - x) 0 in ((fun x -> foldBag g (fun k -> k) bag{x, 1}), map (fun x -> x + 1) a)) ((fun x -> x), [0, 5]) in (r.1 3, r.2)",
    // Changes made in every iteration (their payloads copied): a `replace` of an array, a
    // `gchange` captured by a closure, a `gchange` of a bag.
    "def main = let r = iterate 30 (fun (d, a) -> (replace (map (fun x -> x + 1) a), map (fun x -> x + 1) a)) (replace [0], [0]) in ([5] <+> r.1, r.2)",
    "def main = let r = iterate 20 (fun (f, k) -> let d = gchange intGroup (k * 2) in ((fun x -> f x <+> d), k + 1)) ((fun x -> x), 0) in r.1 5",
    "def main = let r = iterate 20 (fun (d, a) -> (gchange bagGroup (merge (singleton a.[0]) bag{7}), map (fun x -> x + 1) a)) (gchange bagGroup emptyBag, [0]) in bag{1} <+> r.1",
    // Maps whose values hold pointers: arrays, bags, maps of arrays.
    "def main = iterate 30 (fun m -> foldMapGen emptyMap (fun x y -> y) (fun k a -> singletonMap (k + 1) (map (fun x -> x * 2.0) a)) m) (singletonMap 0 [1.0, 2.0])",
    "def main = iterate 50 (fun m -> foldMap bagGroup (mapGroup bagGroup) (fun k b -> singletonMap (k + 1) (merge b (singleton k))) m) (singletonMap 0 bag{1})",
    "def main = let old = [9, 9] in iterate 20 (fun m -> foldMapGen emptyMap (fun x y -> y) (fun k inner -> singletonMap k (foldMapGen emptyMap (fun x y -> y) (fun j a -> singletonMap (j + 1) (if j > 10 then old else map (fun x -> x + j) a)) inner)) m) (singletonMap 0 (singletonMap 0 [1, 2]))",
    "def main = let k = [3] in let r = iterate 30 (fun (f, a) -> (f, map f a)) ((fun x -> x + k.[0]), [1, 2]) in r.2",
    "def main = let r = iterate 20 (fun (f, a) -> (max (a.[0]), map (fun x -> f x + 1) a)) (max 0, [5, 1]) in r.2",
    "def main = let r = iterate 20 (fun (g, a) -> (g, [foldBag g (fun k -> k) (bag{1, 2}) + a.[0]])) (intGroup, [0]) in r.2",
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
            ctx.set_checking(true);
            let compiled = outcome(runtime::engine::run_in(&mono, &mut ctx).map(|r| r.value));
            if interp != compiled {
                failures.push(format!("{src}\n  interpreter {interp}\n  compiled    {compiled}"));
            }
        }
        failures
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The optimiser on the shape an idle compaction scope leaves (mark a constant, checks `false`),
/// around loops that do allocate, so the folded copying code is as varied as it gets: every
/// program above with every scope made idle by hand after lowering, optimised (the simplifier
/// folds the checks away), still gives the interpreter's result.
#[test]
fn the_optimiser_folds_idle_scopes_soundly() {
    use anf::ir::Op;
    use runtime::engine::{root_span, Machine, BIG_STACK_BUDGET};
    let failures: Vec<String> = frontend::with_big_stack(|| {
        let mut failures = Vec::new();
        for src in PROGRAMS {
            let (_, mono) = runtime::prepare(src, "main").unwrap_or_else(|d| panic!("{src}: {}", d.message));
            let interp = outcome(runtime::interp::run(&mono));
            let expanded = adjoint::incremental::expand(&mono).unwrap_or_else(|d| panic!("{src}: {}", d.message));
            let span = root_span(&expanded);
            let mut lowered = anf::lower::lower(&expanded, &anf::lower::LowerOptions::default())
                .unwrap_or_else(|e| panic!("{src}: {}", e.message));
            let mut idle = 0;
            let module = &mut lowered.module;
            let names: Vec<String> = module.externs.values().map(|e| e.name.clone()).collect();
            for f in module.funcs.values_mut() {
                let insts: Vec<_> = f.layout.iter().flat_map(|b| f.blocks[*b].insts.clone()).collect();
                for i in insts {
                    let Op::CallExt(e, _) = &f.insts[i].op else { continue };
                    let op = match names[e.as_u32() as usize].as_str() {
                        "nabla_arena_mark" => Op::Iconst(0),
                        "nabla_arena_compact_begin" | "nabla_arena_scope_begin" => Op::Bconst(false),
                        _ => continue,
                    };
                    f.insts[i].op = op;
                    idle += 1;
                }
            }
            assert!(idle > 0, "{src}: no compaction scope");
            let machine = Machine::new_with(&lowered, span, BIG_STACK_BUDGET, &anf::opt::OptOptions::default())
                .unwrap_or_else(|e| panic!("{src}: {e}"));
            let compiled = outcome(machine.run_main(&mut CallCtx::new(DEFAULT_ARENA_LIMIT)));
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

/// The peak memory of one call of `src`'s `main` at `n`, through the API, and its result.
fn peak(src: &str, n: i64) -> (usize, String) {
    let (bytes, _, v) = peaks(src, n);
    (bytes, v)
}

/// The arena's peak, the most bags and maps alive at once, and the result.
fn peaks(src: &str, n: i64) -> (usize, usize, String) {
    let mut f = Compiled::new(src, "main").unwrap_or_else(|d| panic!("{}", d.message));
    let v = f.call(&[Arg::Int(n)]).unwrap_or_else(|d| panic!("{}", d.message));
    (f.arena_peak(), f.collections_peak(), v.to_string())
}

/// Compaction waits until a loop has made this much (`DEFAULT_COMPACT_MIN`): memory bounds
/// below are this plus the live data, with room for the arena's chunk sizes.
const SLACK: usize = 3 * runtime::native::DEFAULT_COMPACT_MIN;

/// The matrix product written naturally makes an n-element array for every one of its n²
/// entries (8 n³ bytes: 1.7 GB at n = 300); its live data is three n × n matrices.
#[test]
fn a_matrix_product_runs_in_memory_for_its_live_data() {
    let src = "def main (n : Int) = \
        let a = build n (fun i -> build n (fun j -> toReal (i + j))) in \
        let b = build n (fun i -> build n (fun j -> toReal (i - j))) in \
        let c = build n (fun i -> build n (fun j -> fold (fun acc k -> acc + a.[i].[k] * b.[k].[j]) 0.0 (build n (fun k -> k)))) in \
        c.[n - 1].[n - 1]";
    let n = 300;
    let (bytes, v) = peak(src, n);
    eprintln!("matrix product: peak {bytes} bytes");
    // c[n-1][n-1] = Σ_k (n-1+k)(k-(n-1)).
    let want: i64 = (0..n).map(|k| (n - 1 + k) * (k - (n - 1))).sum();
    assert_eq!(v, format!("{want}.0"));
    assert!(bytes < SLACK, "peak {bytes} bytes for live data of {} bytes", 3 * n * n * 8);
}

/// A loop carrying a bag rebuilt every iteration: 300 000 bags made, a few alive at a time.
#[test]
fn a_loop_carrying_a_bag_runs_in_memory_for_its_live_data() {
    let src =
        "def main (n : Int) = foldBag intGroup (fun k -> k) (iterate n (fun b -> merge b (singleton 1)) emptyBag)";
    let (bytes, bags, v) = peaks(src, 300_000);
    eprintln!("bag loop: peak {bytes} bytes, {bags} bags");
    assert_eq!(v, "300000");
    assert!(bytes < SLACK, "peak {bytes} bytes");
    assert!(bags < 40_000, "{bags} bags alive at once");
}

/// Loops carrying a map, and a tuple of a bag and an array, the same.
#[test]
fn loops_carrying_maps_and_tuples_run_in_memory_for_their_live_data() {
    let src = "def main (n : Int) = lookup intGroup n (iterate n (fun m -> foldMap intGroup (mapGroup intGroup) (fun k v -> singletonMap (k + 1) (v + 2)) m) (singletonMap 0 0))";
    let (bytes, maps, v) = peaks(src, 100_000);
    assert_eq!(v, "200000");
    assert!(bytes < SLACK, "peak {bytes} bytes");
    assert!(maps < 40_000, "{maps} maps alive at once");
    let src = "def main (n : Int) = let r = iterate n (fun (b, a) -> (merge b (singleton (a.[0] - a.[1])), map (fun x -> x + 1) a)) (emptyBag, build 100 (fun i -> i)) in foldBag intGroup (fun k -> k) r.1 + sum r.2";
    let (bytes, v) = peak(src, 50_000);
    let n: i64 = 50_000;
    assert_eq!(v, format!("{}", -n + (0..100).map(|i| i + n).sum::<i64>()));
    assert!(bytes < SLACK, "peak {bytes} bytes");
}

/// Elements that are arrays, each made next to much garbage: `map` over rows.
#[test]
fn element_loops_free_their_garbage_and_keep_their_elements() {
    let src = "def main (n : Int) = let rows = build n (fun i -> build 100 (fun j -> i + j)) in \
        sum (map (fun r -> sum (map (fun x -> x + sum (build 1000 (fun k -> k)) - 499500) r)) rows)";
    let n: i64 = 2000;
    let (bytes, v) = peak(src, n);
    eprintln!("map over rows: peak {bytes} bytes");
    let want: i64 = (0..n).map(|i| (0..100).map(|j| i + j).sum::<i64>()).sum();
    assert_eq!(v, format!("{want}"));
    // 2000 × 100 × 8000 bytes of garbage (1.6 GB) would be made without compaction.
    assert!(bytes < SLACK, "peak {bytes} bytes");
}

/// A loop carrying a closure made before it (with arrays rebuilt every iteration) compacts.
#[test]
fn a_loop_carrying_a_closure_runs_in_memory_for_its_live_data() {
    let src = "def main (n : Int) = let k = build 10 (fun i -> i) in \
        let r = iterate n (fun (f, a) -> (f, map f a)) ((fun x -> x + k.[1]), build 1000 (fun i -> i)) in sum r.2";
    let n: i64 = 20_000;
    let (bytes, v) = peak(src, n);
    assert_eq!(v, format!("{}", (0..1000).map(|i| i + n).sum::<i64>()));
    // 20 000 arrays of 8 kB (160 MB) without compaction.
    assert!(bytes < SLACK, "peak {bytes} bytes");
}

/// A closure rebuilt in every iteration, capturing the array the iteration made: its
/// environment is copied with the carried array, so the loop runs in memory for its live data.
#[test]
fn a_loop_rebuilding_its_closure_runs_in_memory_for_its_live_data() {
    let src = "def main (n : Int) = let r = iterate n (fun (f, a) -> let b = map f a in \
        ((fun x -> x + 1 + b.[0] - b.[0]), b)) ((fun x -> x + 1), build 1000 (fun i -> i)) in sum r.2 + r.1 0";
    let n: i64 = 20_000;
    let (bytes, v) = peak(src, n);
    eprintln!("closure rebuilt per iteration: peak {bytes} bytes");
    assert_eq!(v, format!("{}", (0..1000).map(|i| i + n).sum::<i64>() + 1));
    // 20 000 arrays of 8 kB (160 MB) and as many environments without compaction.
    assert!(bytes < SLACK, "peak {bytes} bytes");
}

/// Maps whose values are arrays, and bags, rebuilt in every iteration: the values are copied
/// in place in the kept maps.
#[test]
fn loops_carrying_maps_of_arrays_and_bags_run_in_memory_for_their_live_data() {
    let src = "def main (n : Int) = foldMapGen 0 (fun x y -> x + y) (fun k a -> sum a) \
        (iterate n (fun m -> foldMapGen emptyMap (fun x y -> y) (fun k a -> singletonMap k (map (fun x -> x + 1) a)) m) \
        (singletonMap 0 (build 1000 (fun i -> i))))";
    let n: i64 = 20_000;
    let (bytes, maps, v) = peaks(src, n);
    eprintln!("map of arrays: peak {bytes} bytes, {maps} collections");
    assert_eq!(v, format!("{}", (0..1000).map(|i| i + n).sum::<i64>()));
    assert!(bytes < SLACK, "peak {bytes} bytes");
    assert!(maps < 10_000, "{maps} maps alive at once");
    let src = "def main (n : Int) = foldMap bagGroup intGroup (fun k b -> foldBag intGroup (fun x -> x) b) \
        (iterate n (fun m -> foldMap bagGroup (mapGroup bagGroup) (fun k b -> singletonMap k (merge b (singleton 1))) m) \
        (singletonMap 0 bag{1}))";
    let n: i64 = 100_000;
    let (bytes, bags, v) = peaks(src, n);
    eprintln!("map of bags: peak {bytes} bytes, {bags} collections");
    assert_eq!(v, format!("{}", n + 1));
    assert!(bytes < SLACK, "peak {bytes} bytes");
    assert!(bags < 40_000, "{bags} bags and maps alive at once");
}

/// A change rebuilt in every iteration (`replace` of the array the iteration made): its payload
/// is copied with the carried array.
#[test]
fn a_loop_carrying_a_change_runs_in_memory_for_its_live_data() {
    let src = "def main (n : Int) = let r = iterate n (fun (d, a) -> (replace (map (fun x -> x + 1) a), \
        map (fun x -> x + 1) a)) (replace [0], build 1000 (fun i -> i)) in sum ([0] <+> r.1) + sum r.2";
    let n: i64 = 20_000;
    let (bytes, v) = peak(src, n);
    eprintln!("change rebuilt per iteration: peak {bytes} bytes");
    assert_eq!(v, format!("{}", 2 * (0..1000).map(|i| i + n).sum::<i64>()));
    assert!(bytes < SLACK, "peak {bytes} bytes");
}

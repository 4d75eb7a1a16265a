//! Differential testing of the compiled engine against the reference interpreter: a seeded
//! generator of random well-typed programs (first-order and higher-order: closures, partial
//! application, tuples, arrays and their primitives, folds, bags, maps, groups, changes), each run
//! under both engines, which must print the same value or report the same error at the same span.
//!
//! Bags and maps have `Int` and tuple keys (two words, and three or four — wider than a bag's
//! fixed-size slot), maps have `Int`, `Real`, pair and bag values, and changes cancel entries
//! exactly (a multiplicity or value reaching the group's zero must disappear). A function-valued
//! result is applied to generated arguments rather than printed as `<fun>`, and `main` calls every
//! helper definition. Each program is compiled twice, with `anf::opt` on and off, so a failure
//! names the optimiser or code generation.
//!
//! `NABLA_SEED=n` changes the seed and `NABLA_PROGRAMS=n` the number of programs (default 400).

mod program_gen;

use program_gen::{both_engines, Gen, Outcome, Rng};

#[test]
fn random_programs_agree_between_jit_and_interpreter() {
    let seed: u64 = std::env::var("NABLA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x006e_6162_6c61);
    let count: u64 = std::env::var("NABLA_PROGRAMS").ok().and_then(|s| s.parse().ok()).unwrap_or(400);
    let mut failures = Vec::new();
    let (mut values, mut errors, mut functions) = (0, 0, 0);
    for i in 0..count {
        let rng = Rng::new(seed.wrapping_mul(1_000_003).wrapping_add(i));
        let mut g = Gen { rng, env: Vec::new(), fresh: 0, derivatives: false };
        let src = g.program();
        if std::env::var_os("NABLA_SHOW").is_some() {
            eprintln!("--- program {i}\n{src}");
        }
        match both_engines(&src) {
            Err(e) => failures.push(format!("program {i}: {e}\n{src}")),
            Ok((a, b, c)) if a != b || a != c => {
                let culprit = match (a == b, a == c) {
                    (false, true) => "the optimiser",
                    (true, false) => "unoptimised code only",
                    _ => "code generation",
                };
                failures.push(format!(
                    "program {i} ({culprit}): interpreter {a:?}\n              compiled    {b:?}\n              unoptimised {c:?}\n{src}"
                ))
            }
            Ok((Ok(v), ..)) => {
                values += 1;
                if v.contains("<fun>") {
                    functions += 1;
                }
            }
            Ok((Err(_), ..)) => errors += 1,
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} programs failed (seed {seed}):\n\n{}",
        failures.len(),
        failures.iter().take(5).cloned().collect::<Vec<_>>().join("\n\n")
    );
    // The generator exercises both outcomes.
    assert!(values >= count / 3 && errors >= 5, "{values} values and {errors} errors");
    // Function-valued results are applied, so few values hold a function at all.
    assert!(functions * 10 <= values, "{functions} of {values} values print a function");
}

/// Changes that cancel entries exactly, hand-written: a key whose multiplicity or value reaches the
/// group's zero disappears in both engines (the interpreter is the oracle; the expected text is
/// checked too, so an agreement on a wrong answer fails as well).
#[test]
fn cancelling_changes_drop_entries_in_both_engines() {
    let cases = [
        ("map{1 -> bag{2}} <+> gchange (mapGroup bagGroup) map{1 -> bag{2 # -1}}", "map{}"),
        ("map{1 -> bag{2}, 3 -> bag{4}} <+> gchange (mapGroup bagGroup) map{1 -> bag{2 # -1}}", "map{3 -> bag{4}}"),
        ("map{(1, 2) -> bag{(3, 4)}} <+> gchange (mapGroup bagGroup) map{(1, 2) -> bag{(3, 4) # -1}}", "map{}"),
        (
            "map{(1, (true, 2)) -> bag{((1, 2), (3, 4)) # 2}} <+> gchange (mapGroup bagGroup) map{(1, (true, 2)) -> bag{((1, 2), (3, 4)) # -2}}",
            "map{}",
        ),
        ("map{(1, 2) -> 1.5, (2, 1) -> 0.25} <+> gchange (mapGroup realGroup) map{(1, 2) -> (-1.5)}", "map{(2, 1) -> 0.25}"),
        (
            "map{((1, 2), (3, 4)) -> (2, 0.5)} <+> gchange (mapGroup (pairGroup intGroup realGroup)) map{((1, 2), (3, 4)) -> (-2, (-0.5))}",
            "map{}",
        ),
        ("map{1 -> 2} <+> (map{3 -> 4} <-> map{1 -> 2})", "map{3 -> 4}"),
        ("merge bag{(1, 2), (3, 4) # 2} (negate bag{(1, 2), (3, 4)})", "bag{(3, 4)}"),
        // Observed through a map: a bag kept with a zero entry would make the value non-empty.
        (
            "foldBag (mapGroup bagGroup) (fun (x : Int) -> singletonMap 1 (merge (singleton (x, x)) (negate (singleton (x, x))))) bag{1, 2}",
            "map{}",
        ),
        (
            "foldBag (mapGroup bagGroup) (fun (x : Int) -> singletonMap (x, (true, x)) (singleton ((x, x), (x, 1)))) bag{1, 2, 1 # -1}",
            "map{(2, (true, 2)) -> bag{((2, 2), (2, 1))}}",
        ),
    ];
    let mut failures = Vec::new();
    for (main, want) in cases {
        let src = format!("def main = {main}\n");
        match both_engines(&src) {
            Err(e) => failures.push(format!("{main}: {e}")),
            Ok((a, b, c)) => {
                let want: Outcome = Ok(want.to_string());
                if a != want || b != want || c != want {
                    failures.push(format!(
                        "{main}\n  expected    {want:?}\n  interpreter {a:?}\n  compiled    {b:?}\n  unoptimised {c:?}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

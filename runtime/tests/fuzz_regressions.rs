//! Replays every input the fuzz targets once crashed on (`tests/fuzz_regressions/<target>/*`,
//! committed with the fix) through the target's own check (`fuzz_checks`), on the stable
//! toolchain: a fixed crash stays fixed. FUZZING.md says how the inputs are found.

mod fuzz_checks;

use std::path::Path;

#[test]
fn fuzz_regressions_replay_cleanly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("tests").join("fuzz_regressions");
    let mut failures = Vec::new();
    let mut replayed = 0;
    for (target, check) in fuzz_checks::TARGETS {
        let dir = root.join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut files: Vec<_> = entries.map(|e| e.expect("directory entry").path()).collect();
        files.sort();
        for file in files {
            let data = std::fs::read(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
            replayed += 1;
            if let Err(p) = std::panic::catch_unwind(|| check(&data)) {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{target}/{}: {msg}", file.file_name().unwrap_or_default().to_string_lossy()));
            }
        }
    }
    assert!(failures.is_empty(), "{} of {replayed} inputs fail:\n{}", failures.len(), failures.join("\n"));
}

/// Programs `pipeline` generated that failed, replayed by their source, with the value both
/// engines must give.
#[test]
fn pipeline_programs_found_by_fuzzing() {
    let found: &[(&str, &str)] = &[
        // The reducer had no rule for `⊕` at Real (rule (⊕) of `interp::pullback::rules`): the
        // change terms are constants, so the gradient is that of `g * 2.0`.
        ("def main = grad (fun (g : Real) -> g * 2.0 + ((0.5 <+> replace (-0.5)) <+> (1.25 <-> 0.25))) 1.0", "2.0"),
    ];
    for (src, want) in found {
        assert_eq!(fuzz_checks::pipeline_source(src), Ok(want.to_string()), "{src}");
    }
}

/// A handful of inputs per target, hand-written (the seeds of the fuzzers' corpora): the
/// checks themselves run on the stable toolchain.
#[test]
fn fuzz_checks_accept_their_seed_inputs() {
    let seeds: &[(&str, &[u8])] = &[
        ("front_end", b"def main = iterate 3 (fun b -> merge b b) bag{1}\n"),
        ("front_end", b"def f (x : Real) = sin x * x\ndef main = grad f 1.5\n"),
        ("front_end", b"def main = ((((((1"),
        ("pipeline", b""),
        ("pipeline", b"\x07\x00\x03\x01\xff\x10\x22\x31\x00\x05\x09\x0a\x0b\x0c"),
        ("ir", b"fn @main() -> i64 {\nb0:\n    v0 = iconst 1\n    return v0\n}\n"),
        ("incr_readers", b"\x02bag{1, 2 # 3}\ngchange bagGroup bag{1 # -1}\nreplace bag{5}\n"),
        ("incr_readers", b"\x04map{1 -> bag{2, 3}}\ngchange (mapGroup bagGroup) map{1 -> bag{2 # -1}}\n"),
        ("incr_readers", b"\x02bag{1}\ngchange bagGroup bag{1 # 9223372036854775807}\n"),
    ];
    for (target, data) in seeds {
        let check = fuzz_checks::TARGETS.iter().find(|(t, _)| t == target).map(|(_, c)| c).expect("a target");
        check(data);
    }
}

/// The checks on random bytes (a seeded stream, no coverage guidance): a smoke test of every
/// target on the stable toolchain, and of how much of `pipeline` is compiled rather than skipped.
/// `NABLA_FUZZ_SEED` and `NABLA_FUZZ_INPUTS` (default 150 pipeline programs) run longer.
#[test]
fn fuzz_checks_on_random_bytes() {
    let var = |name: &str, default: u64| std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default);
    let inputs = var("NABLA_FUZZ_INPUTS", 150);
    let mut state: u64 = var("NABLA_FUZZ_SEED", 0x6675_7a7a);
    let mut bytes = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 56) as u8
            })
            .collect()
    };
    let (mut compiled, mut skipped, mut derivatives) = (0, 0, 0);
    for _ in 0..inputs {
        let data = bytes(256);
        if std::env::var_os("NABLA_FUZZ_SHOW").is_some() {
            eprintln!("--- {data:?}");
        }
        let (src, outcome) = fuzz_checks::pipeline_run(&data);
        match outcome {
            Some(_) => compiled += 1,
            None => skipped += 1,
        }
        if outcome.is_some() && (src.contains("grad") || src.contains("derive")) {
            derivatives += 1;
        }
    }
    eprintln!("pipeline: {compiled} compiled ({derivatives} with grad or derive), {skipped} skipped");
    assert!(
        compiled * 3 >= inputs * 2 && derivatives * 10 >= inputs,
        "{compiled} compiled, {derivatives} with derivatives"
    );
    for (target, check) in fuzz_checks::TARGETS {
        if *target != "pipeline" {
            for _ in 0..inputs * 4 / 3 {
                check(&bytes(64));
            }
        }
    }
}

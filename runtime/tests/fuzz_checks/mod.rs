//! The properties the fuzz targets check (`fuzz/fuzz_targets/*.rs`, run by `cargo fuzz`; see
//! FUZZING.md), one function per target taking the fuzzer's bytes and panicking when a property
//! fails. The stable suite replays every committed crash through the same functions
//! (`fuzz_regressions.rs`), so a fixed crash stays fixed.

#![allow(dead_code)]

#[path = "../program_gen/mod.rs"]
mod program_gen;

use frontend::types::Type;
use program_gen::{both_engines, outcomes_agree, Gen, Rng};
use runtime::value::Value;

/// The targets, by name (the folder names under `tests/fuzz_regressions/`).
pub const TARGETS: &[(&str, fn(&[u8]))] =
    &[("front_end", front_end), ("pipeline", pipeline), ("ir", ir), ("incr_readers", incr_readers)];

/// Keeps what an input may allocate small (the interpreter's values, compiled code's arena).
const MEMORY: usize = 256 << 20;

/// Front end on arbitrary text: parsing and type-checking never panic; a program with a `main`
/// is also monomorphised, differentiated (compiled reverse mode, ILC `expand`), lowered and
/// optimised — never run, since it may not terminate — and the IR it gives verifies and prints
/// back to itself through the IR parser.
pub fn front_end(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let src = src.to_string();
    frontend::with_big_stack(move || {
        let Ok(program) = frontend::check_source(&src) else { return };
        if !program.defs.iter().any(|d| &*d.name == "main") {
            return;
        }
        let Ok((_, mono)) = runtime::prepare(&src, "main") else { return };
        let Ok(text) = runtime::engine::ir_text(&mono, true) else { return };
        let ir: String = text.lines().filter(|l| !l.starts_with(';')).map(|l| format!("{l}\n")).collect();
        let module =
            anf::ir::parse(&ir).unwrap_or_else(|e| panic!("the compiler's IR does not parse back: {e:?}\n{ir}"));
        if let Err(e) = anf::ir::verify(&module) {
            panic!("the compiler's IR does not verify: {e:?}\n{ir}");
        }
        assert_eq!(anf::ir::print(&module), ir, "the IR printer and parser disagree");
    })
}

/// Whole pipeline, differentially: a well-typed program generated from the bytes (closures,
/// arrays, bags, maps, groups, changes, and `grad` and `derive`), run by the interpreter and
/// compiled with `anf::opt` on and off. The three outcomes — value, or error message and span —
/// agree (Reals to 1e-9 relative). A program the compiler hands to the interpreter (a construct
/// not compiled yet) is skipped.
pub fn pipeline(data: &[u8]) {
    pipeline_run(data);
}

/// What [`pipeline`] met: the program, and whether it was compiled (`None`: skipped) and gave a
/// value (`Some(true)`) or an error.
pub fn pipeline_run(data: &[u8]) -> (String, Option<bool>) {
    let mut g = Gen { rng: Rng::from_bytes(data), env: Vec::new(), fresh: 0, derivatives: true };
    let src = g.program();
    match both_engines(&src) {
        Err(e) if e.starts_with("not compiled") => (src, None),
        Err(e) => panic!("{e}\n{src}"),
        Ok((a, b, c)) => {
            assert!(
                outcomes_agree(&a, &b) && outcomes_agree(&a, &c),
                "the engines disagree\ninterpreter {a:?}\ncompiled    {b:?}\nunoptimised {c:?}\n{src}"
            );
            let value = a.is_ok();
            (src, Some(value))
        }
    }
}

/// A program the `pipeline` target generated, replayed by its source (the generator's bytes
/// change meaning whenever the generator does): compiled, it agrees with the interpreter as
/// [`pipeline`] checks, and gives the interpreter's outcome.
pub fn pipeline_source(src: &str) -> program_gen::Outcome {
    match both_engines(src) {
        Err(e) => panic!("{e}\n{src}"),
        Ok((a, b, c)) => {
            assert!(
                outcomes_agree(&a, &b) && outcomes_agree(&a, &c),
                "the engines disagree\ninterpreter {a:?}\ncompiled    {b:?}\nunoptimised {c:?}\n{src}"
            );
            a
        }
    }
}

/// The IR's text parser and verifier on arbitrary text: neither panics; a module that verifies
/// prints to a text that parses back to the same print; `anf::opt` on it (every function a root)
/// keeps it verified.
pub fn ir(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(module) = anf::ir::parse(text) else { return };
    if anf::ir::verify(&module).is_err() {
        return;
    }
    let printed = anf::ir::print(&module);
    let again = anf::ir::parse(&printed)
        .unwrap_or_else(|e| panic!("a verified module's print does not parse: {e:?}\n{printed}"));
    assert_eq!(anf::ir::print(&again), printed, "printing is not stable");
    if let Err(e) = anf::ir::verify(&again) {
        panic!("a verified module no longer verifies after printing: {e:?}\n{printed}");
    }
}

/// `nabla incr`'s readers and drivers. The first byte picks a definition (and so the input type);
/// the rest is text, its first line the input and each further line a change. The fast data
/// reader (`incr::data_literal`) and the front end's (`incr::evaluate_literal`) never panic and,
/// where both accept a text, give the same value; then the interpreter's driver and the compiled
/// one take the same input and changes and agree on every outcome and output.
pub fn incr_readers(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let (src, def) = INCR_PROGRAMS[pick as usize % INCR_PROGRAMS.len()];
    let text = text.to_string();
    frontend::with_big_stack(move || {
        runtime::value::meter::set_limit(MEMORY);
        let (_, mono) = runtime::prepare(src, def).unwrap_or_else(|d| panic!("{src}: {}", d.message));
        let Type::Fun(input_ty, _) = mono.def(mono.root()).ty.clone() else { panic!("{def} is not a function") };
        let change_ty = Type::delta(&input_ty);
        let mut lines = text.lines();
        let Some(first) = lines.next() else { return };
        let Some(input) = read(first, &input_ty) else { return };
        let Ok(mut interp) = runtime::incr::Incr::new(&mono, input.clone()) else { return };
        let mut native = runtime::driver::Incremental::new(&mono, &input).unwrap_or_else(|d| {
            panic!("the interpreter's driver took the input and the compiled one did not: {}", d.message)
        });
        same_output(&interp.output().clone(), &native.output(), first);
        for line in lines {
            let Some(change) = read(line, &change_ty) else { continue };
            let a = interp.update(change.clone()).map(|_| ()).map_err(|d| d.message);
            let b = native.update(&change).map(|_| ()).map_err(|d| d.message);
            assert_eq!(a, b, "the drivers disagree on the change `{line}`");
            same_output(&interp.output().clone(), &native.output(), line);
        }
    })
}

/// Definitions `nabla incr` keeps current in `incr_readers`, one per input type.
const INCR_PROGRAMS: &[(&str, &str)] = &[
    ("def f (x : Int) = x * 3 + 1", "f"),
    ("def f (x : Real) = x * x + 1.0", "f"),
    ("def f (b : Bag Int) = foldBag intGroup (fun x -> x) b", "f"),
    ("def f (b : Bag Int) = flatMapBag (fun x -> bag{x, x + 1 # 2}) b", "f"),
    (
        "def f (m : Map Int (Bag Int)) = foldMap bagGroup (mapGroup intGroup) (fun k b -> foldBag (mapGroup intGroup) (fun w -> singletonMap w 1) b) m",
        "f",
    ),
    ("def f (p : Int * Real) = (p.1 * 2, p.2 + 1.0)", "f"),
    ("def f (xs : Array Real) = sum xs", "f"),
    ("def f (m : Map Int Int) = foldMap intGroup intGroup (fun k v -> k * v) m", "f"),
    ("def f (b : Bag (Int * Int)) = mapBag (fun (x, y) -> (y, x)) b", "f"),
];

/// Words that can make a literal's evaluation run for long (loops, large arrays): such texts
/// are read by the data reader only.
const SLOW: &[&str] = &["while", "iterate", "build", "fold", "grad", "jacobian", "vjp", "derive"];

/// One input or change line: both readers, compared where both accept it.
fn read(text: &str, ty: &Type) -> Option<Value> {
    let fast = runtime::incr::data_literal(text, ty);
    if SLOW.iter().any(|w| text.contains(w)) {
        return fast;
    }
    let full = runtime::incr::evaluate_literal(text, ty, 0).ok().map(|(v, _)| v);
    if let (Some(a), Some(b)) = (&fast, &full) {
        assert!(a.equals(b) || a.to_string() == b.to_string(), "the readers disagree on `{text}`: {a} and {b}");
    }
    fast.or(full)
}

fn same_output(a: &Value, b: &Value, after: &str) {
    let (a, b) = (a.to_string(), b.to_string());
    assert!(outcomes_agree(&Ok(a.clone()), &Ok(b.clone())), "the drivers' outputs differ after `{after}`: {a} and {b}");
}

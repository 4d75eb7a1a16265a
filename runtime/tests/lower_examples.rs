//! Lowering over the example programs: IR snapshots of the paper's examples, and for every example
//! that compiles, the verifier accepts its IR and the printer/parser round-trips it.
//!
//! `UPDATE_EXPECT=1 cargo test -p runtime --test lower_examples` rewrites the snapshots.

use std::path::{Path, PathBuf};

use anf::ir;
use anf::lower::{self, LowerOptions};
use expect_test::expect_file;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("examples")
}

/// Why a program has no IR.
#[derive(Debug)]
enum NoIr {
    /// A differentiation site the reverse-mode transform does not compile yet (the program then
    /// runs on the interpreter), or a construct lowering refuses as not compiled yet.
    NotCompiledYet(String),
    /// Anything else: a front-end error, a monomorphisation error, or lowering failing.
    Error(String),
}

/// The lowered IR of `main` in `src`, or why there is none.
fn lower_main(src: &str) -> Result<ir::Module, NoIr> {
    let src = src.to_string();
    frontend::with_big_stack(move || {
        let program = frontend::check_source(&src).map_err(|d| NoIr::Error(d.message))?;
        let root = program.lookup("main").ok_or(NoIr::Error("no main".into()))?;
        let mono = anf::mono::monomorphise(&program, root).map_err(|d| NoIr::Error(d.message))?;
        // The engine's pipeline before lowering: reverse mode's sites become ordinary terms
        // (a site the transform does not compile yet is named), then ILC's `derive` is expanded.
        let mono = match adjoint::reverse::transform(&mono) {
            Ok(Some(t)) => t,
            Ok(None) => mono,
            Err(nc) => return Err(NoIr::NotCompiledYet(format!("{} is not compiled yet", nc.what))),
        };
        let mono = adjoint::incremental::expand(&mono).map_err(|d| NoIr::Error(d.message))?;
        match lower::lower(&mono, &LowerOptions::default()) {
            Ok(lowered) => Ok(lowered.module),
            Err(e) if e.unsupported && e.message.ends_with("is not compiled yet") => {
                Err(NoIr::NotCompiledYet(e.message))
            }
            Err(e) => Err(NoIr::Error(format!("{} (unsupported: {})", e.message, e.unsupported))),
        }
    })
}

fn ir_text(example: &str) -> String {
    let src = std::fs::read_to_string(examples_dir().join(example)).expect("reading the example");
    let module = lower_main(&src).unwrap_or_else(|e| panic!("{example}: {e:?}"));
    if let Err(es) = ir::verify(&module) {
        panic!("{example}: {}", es.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"));
    }
    ir::print(&module)
}

#[test]
fn paper_example_3_1_primal() {
    expect_file!["snapshots/paper_primal.ir"].assert_eq(&ir_text("paper_primal.nbl"));
}

#[test]
fn grand_total_primal() {
    expect_file!["snapshots/grand_total_primal.ir"].assert_eq(&ir_text("grand_total_primal.nbl"));
}

#[test]
fn histogram_primal() {
    expect_file!["snapshots/histogram_primal.ir"].assert_eq(&ir_text("histogram_primal.nbl"));
}

#[test]
fn every_example_verifies_and_round_trips() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .expect("reading examples")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "nbl"))
        .collect();
    files.sort();
    let mut lowered_count = 0;
    let mut skipped: Vec<String> = Vec::new();
    let mut failures = Vec::new();
    for file in &files {
        let src = std::fs::read_to_string(file).expect("reading an example");
        if !src.contains("def main") {
            continue;
        }
        let module = match lower_main(&src) {
            Ok(m) => m,
            // Programs using a construct the compiler does not handle yet; nothing else is skipped.
            Err(NoIr::NotCompiledYet(m)) => {
                skipped.push(m);
                continue;
            }
            Err(NoIr::Error(m)) => {
                failures.push(format!("{}: {m}", file.display()));
                continue;
            }
        };
        lowered_count += 1;
        if let Err(es) = ir::verify(&module) {
            failures.push(format!("{}: {}", file.display(), es[0]));
            continue;
        }
        // The module verifies after every optimisation pass on every function, and so does the
        // output (the rewrites are checked against the interpreter by runtime's differential and
        // golden tests).
        let mut optimized = module.clone();
        let main = optimized.func_by_name("main").expect("lowering makes @main");
        let map = match anf::opt::optimize_checked(&mut optimized, &[main], &anf::opt::OptOptions::default()) {
            Ok(map) => map,
            Err(e) => {
                failures.push(format!("{}: {e}", file.display()));
                continue;
            }
        };
        if map.get(main).is_none() {
            failures.push(format!("{}: the optimiser removed @main", file.display()));
        } else if let Err(es) = ir::verify(&optimized) {
            failures.push(format!("{}: after optimisation: {}", file.display(), es[0]));
        }
        let text = ir::print(&module);
        match ir::parse(&text) {
            Ok(back) => {
                if ir::print(&back) != text {
                    failures.push(format!("{}: printing the parsed IR changes it", file.display()));
                }
                if let Err(es) = ir::verify(&back) {
                    failures.push(format!("{}: the parsed IR does not verify: {}", file.display(), es[0]));
                }
            }
            Err(e) => failures.push(format!("{}: the printed IR does not parse: {e}", file.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(lowered_count >= 40, "only {lowered_count} examples were lowered; not compiled yet: {skipped:?}");
}

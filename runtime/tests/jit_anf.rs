//! Lowering accepts A-normal let-series (`anf::anormal`) as well as plain terms: every example that
//! compiles gives the same value when its definitions are A-normalised first.

use std::path::{Path, PathBuf};

use frontend::syntax::LocalId;

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("reading examples")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "nbl"))
        .collect();
    files.sort();
    files
}

/// The printed value of `main`, compiled from plain terms and from their A-normal form.
fn both_forms(src: String) -> Option<(String, String)> {
    frontend::with_big_stack(move || {
        let (_, mono) = runtime::prepare(&src, "main").ok()?;
        let show = |r: Result<runtime::engine::Run, frontend::Diagnostic>| match r {
            Ok(r) => format!("{}", r.value),
            Err(d) => format!("error: {} at {:?}", d.message, d.span),
        };
        let direct = show(runtime::engine::run(&mono));
        let mut normal = mono.clone();
        let mut next = normal.next_local;
        let mut fresh = || {
            next += 1;
            LocalId(next - 1)
        };
        for d in &mut normal.defs {
            d.body = anf::anormal::anormalise_def(&d.body, &mut fresh);
        }
        normal.next_local = next;
        let through_anf = show(runtime::engine::run(&normal));
        Some((direct, through_anf))
    })
}

#[test]
fn examples_compile_the_same_through_a_normal_form() {
    let mut compared = 0;
    let mut failures = Vec::new();
    for file in examples() {
        let src = std::fs::read_to_string(&file).expect("reading an example");
        if let Some((direct, through_anf)) = both_forms(src) {
            compared += 1;
            if direct != through_anf {
                failures.push(format!("{}: {direct} / through ANF: {through_anf}", file.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compared >= 40, "only {compared} examples compared");
}

//! The term reducer (the paper's reduction strategy) and the environment-based interpreter compute
//! the same value for `main` of every example program, pullbacks or not.

use std::path::Path;

#[test]
fn the_reducer_agrees_with_the_interpreter_on_every_example() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "nbl"))
        .collect();
    files.sort();
    assert!(files.len() > 50, "found only {} examples", files.len());
    let failures: Vec<String> = frontend::with_big_stack(move || {
        let mut failures = Vec::new();
        for f in &files {
            let src = std::fs::read_to_string(f).expect("readable");
            let Ok((_, mono)) = runtime::prepare(&src, "main") else { continue };
            let interp = runtime::interp::run(&mono).map(|v| v.to_string()).map_err(|d| d.message);
            let reducer = runtime::interp::pullback::reduce_main(&mono).map(|v| v.to_string()).map_err(|d| d.message);
            if interp != reducer {
                failures.push(format!("{}: interpreter {interp:?}, reducer {reducer:?}", f.display()));
            }
        }
        failures
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

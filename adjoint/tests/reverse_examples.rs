//! The reverse-mode transform on every example that differentiates: its output is a valid
//! monomorphic program (`mono::verify`: unique binders, ground types) and names no reverse-mode
//! construct any more; the examples the transform compiles today are listed and must stay so.
//! `NABLA_SHOW_REVERSE=path` prints the transformed program of one file instead.

use std::path::Path;

fn transform(path: &Path) -> Result<Option<anf::mono::MonoProgram>, adjoint::reverse::NotCompiled> {
    let src = std::fs::read_to_string(path).unwrap();
    let program = frontend::check_source(&src).unwrap();
    let id = program.lookup("main").unwrap();
    let mono = anf::mono::monomorphise(&program, id).unwrap();
    adjoint::reverse::transform(&mono)
}

#[test]
fn transformed_examples_verify() {
    if let Ok(path) = std::env::var("NABLA_SHOW_REVERSE") {
        let t = transform(Path::new(&path)).unwrap().unwrap();
        for d in &t.defs {
            println!("def {} = {}", d.name, frontend::pretty::expr(&d.body, frontend::pretty::Mode::Ascii));
        }
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut compiled = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.extension().is_none_or(|e| e != "nbl") {
            continue;
        }
        let src = std::fs::read_to_string(&p).unwrap();
        if !src.contains("grad") && !src.contains("vjp") && !src.contains("jacobian") && !src.contains("pullback") {
            continue;
        }
        if let Ok(Some(t)) = transform(&p) {
            anf::mono::verify(&t).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert!(!adjoint::reverse::uses_reverse_mode(&t), "{}", p.display());
            compiled.push(p.file_name().unwrap().to_string_lossy().to_string());
        }
    }
    for must in ["pb_fold_product.nbl", "pb_hvp_array.nbl", "pb_jacobian.nbl", "pb_iterate.nbl", "pb_kinks.nbl"] {
        assert!(compiled.iter().any(|c| c == must), "{must} is not compiled: {compiled:?}");
    }
}

//! Debug helper: prints the transformed program (run with --nocapture, NABLA_FILE=path).
#[test]
fn dump() {
    let Ok(path) = std::env::var("NABLA_FILE") else { return };
    let src = std::fs::read_to_string(path).unwrap();
    let program = frontend::check_source(&src).unwrap();
    let id = program.lookup("main").unwrap();
    let mono = anf::mono::monomorphise(&program, id).unwrap();
    let t = adjoint::reverse::transform(&mono).unwrap().unwrap();
    for d in &t.defs {
        println!("def {} = {}", d.name, frontend::pretty::expr(&d.body, frontend::pretty::Mode::Ascii));
    }
}

//! `nabla run` with the compiled engine, and `nabla ir FILE [DEF]` (LANGUAGE.md §8).

use frontend::Diagnostic;
use runtime::value::Value;

use crate::{read, Failure};

/// Evaluates the root with the compiled engine; a program it does not compile yet is evaluated by
/// the interpreter, with a note on stderr.
#[allow(clippy::result_large_err)]
pub fn run(mono: &anf::mono::MonoProgram) -> Result<Value, Diagnostic> {
    let r = runtime::engine::run(mono)?;
    if let Some(note) = r.note {
        eprintln!("note: {note}");
    }
    Ok(r.value)
}

/// `nabla ir FILE [DEF]`: the SSA IR of `main` (or DEF), monomorphised at its (defaulted) type.
#[allow(clippy::result_large_err)]
pub fn ir(args: &[String]) -> Result<String, Failure> {
    let (file, def) = match args {
        [file] => (file, "main"),
        [file, def] => (file, def.as_str()),
        _ => return Err(Failure::Usage("usage: nabla ir FILE [DEF]".into())),
    };
    let src = read(file)?;
    let on_file = |d| Failure::Program { path: file.clone(), src: src.clone(), diag: d };
    let (_, mono) = runtime::prepare(&src, def).map_err(on_file)?;
    runtime::engine::ir_text(&mono).map_err(on_file)
}

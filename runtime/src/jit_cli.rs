//! `nabla run` with the compiled engine, and `nabla ir FILE [DEF]` (docs/language.md §8).

use frontend::Diagnostic;
use runtime::value::Value;

use crate::{read, Failure};

/// Evaluates the root with the compiled engine (a note names a site it does not compile), its arena limited to `max_memory` bytes; a program
/// it does not compile yet is evaluated by the interpreter, with a note on stderr.
#[allow(clippy::result_large_err)]
pub fn run(mono: &anf::mono::MonoProgram, src: Option<&str>, max_memory: usize) -> Result<Value, Diagnostic> {
    let r = runtime::engine::run_in(mono, &mut runtime::native::CallCtx::new(max_memory))?;
    if let Some(note) = r.note {
        let note = match src {
            Some(src) => runtime::engine::note_with_lines(&note, src),
            None => note,
        };
        for line in note.lines() {
            crate::to_stderr(&format!("note: {line}\n"));
        }
    }
    Ok(r.value)
}

/// `nabla ir FILE [DEF] [--raw]`: the SSA IR of `main` (or DEF), monomorphised at its (defaulted)
/// type, as the JIT compiles it (after `anf::opt`), or with `--raw` as lowering made it.
#[allow(clippy::result_large_err)]
pub fn ir(args: &[String]) -> Result<String, Failure> {
    let raw = args.iter().any(|a| a == "--raw");
    let args: Vec<String> = args.iter().filter(|a| *a != "--raw").cloned().collect();
    let (file, def) = match args.as_slice() {
        [file] => (file, "main"),
        [file, def] => (file, def.as_str()),
        _ => return Err(Failure::Usage("usage: nabla ir FILE [DEF] [--raw]".into())),
    };
    let src = read(file)?;
    let on_file = |d| Failure::Program { path: file.clone(), src: src.clone(), diag: d };
    let (_, mono) = runtime::prepare(&src, def).map_err(on_file)?;
    let text = runtime::engine::ir_text(&mono, !raw).map_err(on_file)?;
    Ok(runtime::engine::note_with_lines(&text, &src))
}

//! The engine users touch: values, the reference interpreter, (soon) the JIT-backed engine,
//! the incremental driver and the public API. The `nabla` binary's CLI lives in `main.rs`.

pub mod api;
pub mod bench;
pub mod driver;
pub mod engine;
pub mod gradbench;
pub mod incr;
pub mod interp;
pub mod native;
pub mod sites;
pub mod value;

use frontend::syntax::{DefId, Program};
use frontend::Diagnostic;

/// Parses, type-checks and monomorphises `src` for evaluating definition `root` (by name).
pub fn prepare(src: &str, root: &str) -> Result<(Program, anf::mono::MonoProgram), Diagnostic> {
    let program = frontend::check_source(src)?;
    let id = find_def(&program, root)?;
    let mono = anf::mono::monomorphise(&program, id)?;
    Ok((program, mono))
}

/// The definition named `name`, or an error naming what exists. It points at the definition whose
/// name is closest (a likely misspelling), else at the last definition's name, else at the start.
pub fn find_def(program: &Program, name: &str) -> Result<DefId, Diagnostic> {
    program.lookup(name).ok_or_else(|| {
        let close = program
            .defs
            .iter()
            .filter(|d| edit_distance(&d.name, name) <= (name.chars().count().div_ceil(3)).max(1))
            .min_by_key(|d| edit_distance(&d.name, name));
        let at = close.or(program.defs.last()).map(|d| d.name_span).unwrap_or(frontend::Span::new(0, 0));
        let mut d = Diagnostic::error(at, format!("no definition named `{name}`"));
        if let Some(c) = close {
            d = d.with_note(format!("did you mean `{}`?", c.name));
        }
        const SHOWN: usize = 20;
        let names: Vec<String> = program.defs.iter().take(SHOWN).map(|d| format!("`{}`", d.name)).collect();
        let note = match program.defs.len() {
            0 => "the file has no definitions".to_string(),
            n if n > SHOWN => format!("the definitions are {}, and {} more", names.join(", "), n - SHOWN),
            _ => format!("the definitions are {}", names.join(", ")),
        };
        d.with_note(note)
    })
}

/// Levenshtein distance in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb { prev } else { 1 + prev.min(cur).min(row[j]) };
            prev = cur;
        }
    }
    row[b.len()]
}

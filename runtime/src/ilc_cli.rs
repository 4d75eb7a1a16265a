//! `nabla derive FILE DEF` and `nabla incr FILE DEF --input F --changes F` (docs/language.md §8; the
//! formats are in docs/incremental-semantics.md).

use std::io::Write;

use frontend::pretty::{expr, Mode};
use frontend::Span;
use runtime::incr::{literal, Incr};

use crate::{read, render, Failure};

/// `nabla derive FILE DEF`: the derivative after all passes, in paper notation, and whether it is
/// self-maintainable (and if not, what reads a base input).
pub fn derive(args: &[String]) -> Result<String, Failure> {
    let [file, def] = args else {
        return Err(Failure::Usage("usage: nabla derive FILE DEF".into()));
    };
    let src = read(file)?;
    let on_file = |d| Failure::Program { path: file.clone(), src: src.clone(), diag: d };
    let (_, mono) = runtime::prepare(&src, def).map_err(on_file)?;
    let d = adjoint::incremental::derive_definition(&mono, mono.root()).map_err(on_file)?;
    let mut out = format!("Derive({def}) = {}\n", expr(&d.fast, Mode::Paper));
    if d.report.self_maintainable {
        out.push_str(&format!("{def} is self-maintainable\n"));
    } else {
        out.push_str(&format!("{def} is not self-maintainable:\n"));
        for r in &d.report.reasons {
            let (line, col) = line_col(&src, r.span);
            out.push_str(&format!("  {line}:{col} `{}` reads `{}`: {}\n", snippet(&src, r.span), r.input, r.what));
        }
    }
    Ok(out)
}

/// `nabla incr FILE DEF --input F --changes F`: prints DEF's output on the input, then the output
/// after each change. A change that fails is reported on stderr with its location and skipped (input
/// and output stay as they were); the run then ends with status 1.
pub fn incr(args: &[String]) -> Result<String, Failure> {
    let mut pos = Vec::new();
    let (mut input, mut changes) = (None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--input" | "--changes" => {
                let v = it.next().ok_or_else(|| Failure::Usage(format!("`{a}` needs a file")))?;
                let slot = if a == "--input" { &mut input } else { &mut changes };
                if slot.replace(v.clone()).is_some() {
                    return Err(Failure::Usage(format!("`{a}` given twice")));
                }
            }
            s if s.starts_with("--") => return Err(Failure::Usage(format!("unknown option `{s}`"))),
            _ => pos.push(a.clone()),
        }
    }
    let ([file, def], Some(input_path), Some(changes_path)) = (&pos[..], input, changes) else {
        return Err(Failure::Usage("usage: nabla incr FILE DEF --input F --changes F".into()));
    };
    let src = read(file)?;
    let on_file = |d| Failure::Program { path: file.clone(), src: src.clone(), diag: d };
    let (_, mono) = runtime::prepare(&src, def).map_err(on_file)?;
    let root = mono.def(mono.root());
    let input_ty = match &root.ty {
        frontend::types::Type::Fun(a, _) => (**a).clone(),
        t => {
            let d = frontend::Diagnostic::error(
                root.body.span,
                format!("`incr` needs a function `{def} : A -> B`, but it has type {t}"),
            );
            return Err(on_file(d));
        }
    };
    let input_src = read(&input_path)?;
    let on_input = |d| Failure::Program { path: input_path.clone(), src: input_src.clone(), diag: d };
    let (a, next) = literal(&input_src, &input_ty, 0).map_err(on_input)?;
    let mut state = Incr::new(&mono, a).map_err(on_file)?;
    state.reserve_locals(next);
    let changes_src = read(&changes_path)?;
    let change_ty = frontend::types::Type::delta(&input_ty);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let _ = writeln!(out, "{}", state.output());
    let (mut failed, mut total) = (0, 0);
    let mut offset = 0;
    for line in changes_src.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let text = line.trim_end_matches(['\n', '\r']);
        let trimmed = text.trim_start();
        if trimmed.is_empty() || trimmed.starts_with("--") {
            continue;
        }
        total += 1;
        let result = literal(text, &change_ty, start).and_then(|(da, next)| {
            state.reserve_locals(next);
            state.update(da).map_err(|d| {
                // Errors inside the derivative point into FILE, not at the change: report the line.
                frontend::Diagnostic { span: Span::new(start, start + text.len()), ..d }
            })
        });
        match result {
            Ok(_) => {
                let _ = writeln!(out, "{}", state.output());
            }
            Err(d) => {
                failed += 1;
                let _ = out.flush();
                crate::to_stderr(&render(&changes_path, &changes_src, &d));
            }
        }
    }
    let _ = out.flush();
    if failed > 0 {
        return Err(Failure::Plain(format!(
            "{failed} of {total} changes failed; each left the input and output as they were"
        )));
    }
    Ok(String::new())
}

fn line_col(src: &str, span: Span) -> (usize, usize) {
    let lo = (span.lo as usize).min(src.len());
    let before = &src[..lo];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    (line, col)
}

/// The source text of a span on one line, shortened.
fn snippet(src: &str, span: Span) -> String {
    let lo = (span.lo as usize).min(src.len());
    let hi = (span.hi as usize).clamp(lo, src.len());
    let text: String = src.get(lo..hi).unwrap_or("").split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() > 40 {
        format!("{}...", text.chars().take(37).collect::<String>())
    } else {
        text
    }
}

//! `nabla repl`: a read–eval–print loop. Definitions accumulate; an expression is evaluated and
//! printed; `:type e` prints a type; `:defs` lists the definitions; `:quit` leaves.

use frontend::syntax::{Def, DefId, Program};
use frontend::types::TypePrinter;
use frontend::Diagnostic;
use rustyline::error::ReadlineError;

/// Runs the loop on the terminal (or on piped standard input).
pub fn run(render: &dyn Fn(&str, &str, &Diagnostic) -> String) -> Result<(), String> {
    let mut rl = rustyline::DefaultEditor::new().map_err(|e| format!("cannot start the line editor: {e}"))?;
    let mut session = Session::default();
    println!("Nabla REPL — `def` adds a definition, an expression is evaluated, :help for commands.");
    loop {
        match rl.readline("nabla> ") {
            Ok(line) => {
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                let _ = rl.add_history_entry(line);
                match session.input(line) {
                    Reply::Quit => break,
                    Reply::Text(t) => print!("{t}"),
                    Reply::Error(d) => eprint!("{}", render("<repl>", line, &d)),
                }
            }
            Err(ReadlineError::Interrupted) | Err(ReadlineError::Eof) => break,
            Err(e) => return Err(format!("reading input: {e}")),
        }
    }
    Ok(())
}

/// What the session answers to one line.
pub enum Reply {
    Text(String),
    Error(Diagnostic),
    Quit,
}

/// The definitions entered so far, as source text re-checked as a whole on each `def`.
#[derive(Default)]
pub struct Session {
    source: String,
    program: Program,
}

const HELP: &str = "\
  def NAME ... = EXPR   add a definition
  EXPR                  evaluate and print
  :type EXPR            print the type of EXPR
  :defs                 list the definitions and their types
  :quit                 leave
";

impl Session {
    pub fn input(&mut self, line: &str) -> Reply {
        if line == ":quit" || line == ":q" {
            return Reply::Quit;
        }
        if line == ":help" || line == ":h" {
            return Reply::Text(HELP.to_string());
        }
        if line == ":defs" {
            return Reply::Text(frontend::signatures(&self.program));
        }
        if let Some(e) = line.strip_prefix(":type ").or_else(|| line.strip_prefix(":t ")) {
            return match self.typed(e) {
                Ok((_, scheme)) => Reply::Text(format!("{}\n", TypePrinter::new().scheme(&scheme))),
                Err(d) => Reply::Error(shift(d, line.len() - e.len())),
            };
        }
        if line.starts_with("def ") {
            let candidate = format!("{}{}\n", self.source, line);
            return match frontend::check_source(&candidate) {
                Ok(p) => {
                    let d = p.defs.last().expect("one definition was added");
                    let text = format!("{} : {}\n", d.name, TypePrinter::new().scheme(&d.scheme));
                    self.source = candidate;
                    self.program = p;
                    Reply::Text(text)
                }
                Err(d) => Reply::Error(shift_back(d, self.source.len())),
            };
        }
        match self.eval(line) {
            Ok(text) => Reply::Text(text),
            Err(d) => Reply::Error(d),
        }
    }

    fn typed(&self, src: &str) -> Result<(frontend::syntax::E, frontend::types::Scheme), Diagnostic> {
        let (e, next) = frontend::parser::parse_expr_in(src, &self.program)?;
        let mut p = self.program.clone();
        p.next_local = next;
        frontend::infer::check_expr(&p, &e)
    }

    fn eval(&self, src: &str) -> Result<String, Diagnostic> {
        let (e, next) = frontend::parser::parse_expr_in(src, &self.program)?;
        let mut p = self.program.clone();
        p.next_local = next;
        let (body, scheme) = frontend::infer::check_expr(&p, &e)?;
        p.defs.push(Def { name: "it".into(), name_span: e.span, span: e.span, body, scheme });
        let mono = anf::mono::monomorphise(&p, DefId(p.defs.len() as u32 - 1))?;
        let v = crate::engine_eval(&mono)?;
        Ok(format!("{v}\n"))
    }
}

/// Errors in `:type e` point into `e`; move them to the whole line.
fn shift(mut d: Diagnostic, by: usize) -> Diagnostic {
    d.span = frontend::Span::new(d.span.lo as usize + by, d.span.hi as usize + by);
    d
}

/// Errors in a new definition point into the accumulated source; move them to the line.
fn shift_back(mut d: Diagnostic, by: usize) -> Diagnostic {
    let lo = (d.span.lo as usize).saturating_sub(by);
    let hi = (d.span.hi as usize).saturating_sub(by);
    d.span = frontend::Span::new(lo, hi);
    d.labels.clear();
    d
}

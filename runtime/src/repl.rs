//! `nabla repl`: a read–eval–print loop. Definitions accumulate; an expression is evaluated and
//! printed; `:type e` prints a type; `:defs` lists the definitions; `:quit` leaves.

use frontend::syntax::{Def, DefId, Program};
use frontend::types::TypePrinter;
use frontend::Diagnostic;
use rustyline::error::ReadlineError;
use std::io::Write;

/// Runs the loop on the terminal (or on piped standard input).
pub fn run(render: &dyn Fn(&str, &str, &Diagnostic) -> String) -> Result<(), String> {
    let mut rl = rustyline::DefaultEditor::new().map_err(|e| format!("cannot start the line editor: {e}"))?;
    let mut session = Session::default();
    // A closed stdout ends the session with an error (`print!` would panic).
    let say = |t: &str| -> Result<(), String> {
        let mut out = std::io::stdout().lock();
        out.write_all(t.as_bytes()).and_then(|_| out.flush()).map_err(|e| format!("cannot write the output: {e}"))
    };
    say("Nabla REPL — `def` adds a definition, an expression is evaluated, :help for commands.\n")?;
    let mut bad_lines = 0;
    loop {
        match rl.readline("nabla> ") {
            Ok(line) => {
                bad_lines = 0;
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                let _ = rl.add_history_entry(line);
                match session.input(line) {
                    Reply::Quit => break,
                    Reply::Text(t) => say(&t)?,
                    Reply::Error(src, d) => crate::to_stderr(&render("<repl>", &src, &d)),
                }
            }
            Err(ReadlineError::Interrupted) | Err(ReadlineError::Eof) => break,
            // A line that is not UTF-8 is reported and skipped (the reader has consumed it); a
            // stream of nothing else ends the session rather than looping.
            Err(ReadlineError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData && bad_lines < 100 => {
                bad_lines += 1;
                crate::to_stderr("error: the line is not valid UTF-8 text\n");
            }
            Err(e) => return Err(format!("reading input: {e}")),
        }
    }
    Ok(())
}

/// What the session answers to one line.
pub enum Reply {
    Text(String),
    /// An error and the text its spans point into: the line, or the definitions entered before
    /// it when the error lies in one of them (a run-time error inside an earlier definition).
    Error(String, Diagnostic),
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
        // A comment line is like a blank one.
        if line.trim_start().starts_with("--") {
            return Reply::Text(String::new());
        }
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
            return match self.typed(e, line.len() - e.len()) {
                Ok((_, scheme)) => Reply::Text(format!("{}\n", TypePrinter::new().scheme(&scheme))),
                Err(d) => self.error(line, d),
            };
        }
        if line.starts_with(':') {
            let word = line.split_whitespace().next().unwrap_or(line);
            let msg = match word {
                ":type" | ":t" => "`:type` needs an expression: `:type EXPR`".to_string(),
                _ => format!("unknown command `{word}` (:help lists the commands)"),
            };
            let at = self.source.len();
            return self.error(line, Diagnostic::error(frontend::Span::new(at, at + word.len()), msg));
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
                Err(d) => self.error(line, d),
            };
        }
        match self.eval(line) {
            Ok(text) => Reply::Text(text),
            Err(d) => self.error(line, d),
        }
    }

    /// An error whose spans are offsets into the definitions followed by `line`, located in
    /// the line when its primary span is there, else in the definitions.
    fn error(&self, line: &str, mut d: Diagnostic) -> Reply {
        let base = self.source.len();
        if (d.span.lo as usize) < base {
            d.labels.retain(|(s, _)| (s.hi as usize) <= base);
            return Reply::Error(self.source.clone(), d);
        }
        let back = |s: frontend::Span| frontend::Span::new(s.lo as usize - base, s.hi as usize - base);
        d.span = back(d.span);
        d.labels = d.labels.into_iter().filter(|(s, _)| (s.lo as usize) >= base).map(|(s, t)| (back(s), t)).collect();
        Reply::Error(line.to_string(), d)
    }

    /// `src` placed after the definitions: spans in it are offsets into the definitions followed by
    /// the line, `at` bytes into the line, like the spans of errors raised inside definitions.
    fn placed(&self, src: &str, at: usize) -> String {
        format!("{}{src}", " ".repeat(self.source.len() + at))
    }

    fn typed(&self, src: &str, at: usize) -> Result<(frontend::syntax::E, frontend::types::Scheme), Diagnostic> {
        let (e, next) = frontend::parser::parse_expr_in(&self.placed(src, at), &self.program)?;
        let mut p = self.program.clone();
        p.next_local = next;
        frontend::infer::check_expr(&p, &e)
    }

    fn eval(&self, src: &str) -> Result<String, Diagnostic> {
        let (e, next) = frontend::parser::parse_expr_in(&self.placed(src, 0), &self.program)?;
        let mut p = self.program.clone();
        p.next_local = next;
        let (body, scheme) = frontend::infer::check_expr(&p, &e)?;
        p.defs.push(Def { name: "it".into(), name_span: e.span, span: e.span, body, scheme });
        let mono = anf::mono::monomorphise(&p, DefId(p.defs.len() as u32 - 1))?;
        let v = crate::engine_eval(&mono)?;
        Ok(format!("{v}\n"))
    }
}

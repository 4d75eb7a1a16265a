//! `nabla repl`: a read–eval–print loop. `def` adds a definition (a name defined again shadows the
//! old definition for what follows), an expression is evaluated and printed, input that is not
//! finished (an open bracket, a trailing operator, a `let` without its `in`) continues on the
//! next line, `:load FILE` adds a file's definitions, `:type e` prints a type, `:defs` lists the
//! definitions, `:quit` leaves. Ctrl-C cancels the line being typed, or stops the evaluation in
//! progress, and keeps the session; history is kept in a file.
//!
//! The loop is [`Repl::feed`], one input at a time, so tests drive it without a terminal; [`run`]
//! connects it to the line editor.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use frontend::syntax::{Def, DefId, Program};
use frontend::types::TypePrinter;
use frontend::{Diagnostic, Span};
use runtime::interp::INTERRUPT;
use rustyline::error::ReadlineError;

const PROMPT: &str = "nabla> ";
const CONTINUE: &str = "  ...> ";

/// Where a text the REPL reports errors in came from: typed at the prompt, or a loaded file.
const TYPED: &str = "<repl>";

/// Runs the loop on the terminal (or on piped standard input).
pub fn run(render: &dyn Fn(&str, &str, &Diagnostic) -> String) -> Result<(), String> {
    let mut rl = rustyline::DefaultEditor::new().map_err(|e| format!("cannot start the line editor: {e}"))?;
    let history = history_path();
    if let Some(h) = &history {
        let _ = rl.load_history(h);
    }
    install_interrupt_handler();
    let mut repl = Repl::default();
    // A closed stdout ends the session with an error (`print!` would panic).
    let say = |t: &str| -> Result<(), String> {
        let mut out = std::io::stdout().lock();
        out.write_all(t.as_bytes()).and_then(|_| out.flush()).map_err(|e| format!("cannot write the output: {e}"))
    };
    say("Nabla REPL — `def` adds a definition, an expression is evaluated, :help for commands.\n")?;
    let mut bad_lines = 0;
    loop {
        let input = match rl.readline(repl.prompt()) {
            Ok(line) => {
                bad_lines = 0;
                Input::Line(line)
            }
            Err(ReadlineError::Interrupted) => Input::Interrupted,
            Err(ReadlineError::Eof) => Input::Eof,
            // A line that is not UTF-8 is reported and skipped (the reader has consumed it); a
            // stream of nothing else ends the session rather than looping.
            Err(ReadlineError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData && bad_lines < 100 => {
                bad_lines += 1;
                crate::to_stderr("error: the line is not valid UTF-8 text\n");
                continue;
            }
            Err(e) => return Err(format!("reading input: {e}")),
        };
        // A Ctrl-C while the line was typed (without a terminal, it arrives as a signal) is spent.
        INTERRUPT.store(false, Ordering::Relaxed);
        let out = repl.feed(input);
        if let Some(entry) = &out.history {
            let _ = rl.add_history_entry(entry.as_str());
        }
        for r in out.replies {
            match r {
                Reply::Text(t) => say(&t)?,
                Reply::Error { path, src, diag } => crate::to_stderr(&render(&path, &src, &diag)),
                Reply::Plain(m) => crate::to_stderr(&format!("error: {m}\n")),
            }
        }
        if out.quit {
            break;
        }
    }
    if let Some(h) = &history {
        if let Err(e) = rl.save_history(h) {
            crate::to_stderr(&format!("warning: cannot save the history in `{}`: {e}\n", h.display()));
        }
    }
    Ok(())
}

/// The history file: `$NABLA_HISTORY`, else `~/.nabla_history` when the input is a terminal (a
/// piped session keeps none unless asked to).
fn history_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NABLA_HISTORY").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if !std::io::stdin().is_terminal() {
        return None;
    }
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".nabla_history"))
}

/// Ctrl-C sets [`INTERRUPT`], which the interpreter polls; compiled code runs to its end and its
/// result is dropped. A second Ctrl-C before the evaluation noticed the first leaves (status 130).
#[cfg(unix)]
fn install_interrupt_handler() {
    extern "C" fn on_interrupt(_: libc::c_int) {
        if INTERRUPT.swap(true, Ordering::Relaxed) {
            // SAFETY: `_exit` is async-signal-safe.
            unsafe { libc::_exit(130) }
        }
    }
    let handler: extern "C" fn(libc::c_int) = on_interrupt;
    // SAFETY: the handler only touches an atomic and calls an async-signal-safe function.
    unsafe {
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
    }
}

#[cfg(not(unix))]
fn install_interrupt_handler() {}

/// One input event.
pub enum Input {
    Line(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    /// End of input (Ctrl-D).
    Eof,
}

/// What the loop answers to one input.
#[derive(Default)]
pub struct Output {
    pub replies: Vec<Reply>,
    /// The entry to add to the history (a whole multi-line input once it is complete).
    pub history: Option<String>,
    pub quit: bool,
}

/// One answer.
pub enum Reply {
    Text(String),
    /// An error, with the text its spans point into and that text's name: the input, the
    /// definitions typed before it, or a loaded file.
    Error {
        path: String,
        src: String,
        diag: Diagnostic,
    },
    /// An error without a location (a file that cannot be read).
    Plain(String),
}

/// The loop's state: the session and an unfinished input.
#[derive(Default)]
pub struct Repl {
    pub session: Session,
    pending: Option<String>,
}

impl Repl {
    pub fn prompt(&self) -> &'static str {
        if self.pending.is_some() {
            CONTINUE
        } else {
            PROMPT
        }
    }

    pub fn feed(&mut self, input: Input) -> Output {
        let mut out = Output::default();
        let line = match input {
            Input::Line(l) => l,
            Input::Interrupted => {
                // Ctrl-C drops the unfinished input; at an empty prompt it says how to leave.
                if self.pending.take().is_none() {
                    out.replies.push(Reply::Text("(:quit or Ctrl-D leaves)\n".into()));
                }
                return out;
            }
            Input::Eof => {
                // Unfinished input at the end is entered as it is (and reported).
                if let Some(text) = self.pending.take() {
                    out.history = Some(text.clone());
                    out.replies.extend(self.session.input(&text, true));
                }
                out.quit = true;
                return out;
            }
        };
        let text = match self.pending.take() {
            // An empty line ends an unfinished input: it is entered as it is.
            Some(p) if line.trim().is_empty() => {
                out.history = Some(p.clone());
                out.replies.extend(self.session.input(&p, true));
                return out;
            }
            // So does a command, which then runs.
            Some(p) if line.trim_start().starts_with(':') => {
                out.replies.extend(self.session.input(&p, true));
                let mut rest = self.feed(Input::Line(line));
                out.replies.append(&mut rest.replies);
                out.history = rest.history;
                out.quit = rest.quit;
                return out;
            }
            Some(p) => format!("{p}\n{line}"),
            None if line.trim().is_empty() => return out,
            None => line,
        };
        match self.session.input(&text, false) {
            Answer::Incomplete => self.pending = Some(text),
            Answer::Quit => {
                out.history = Some(text);
                out.quit = true;
            }
            Answer::Replies(rs) => {
                out.history = Some(text);
                out.replies = rs;
            }
        }
        out
    }
}

/// What the session makes of one input.
pub enum Answer {
    /// The input ends too early: the next line continues it.
    Incomplete,
    Quit,
    Replies(Vec<Reply>),
}

impl IntoIterator for Answer {
    type Item = Reply;
    type IntoIter = std::vec::IntoIter<Reply>;
    fn into_iter(self) -> Self::IntoIter {
        match self {
            Answer::Replies(rs) => rs.into_iter(),
            _ => Vec::new().into_iter(),
        }
    }
}

/// A piece of the session's definitions: typed at the prompt (`path` is `None`) or loaded.
struct Chunk {
    path: Option<String>,
    lo: usize,
    hi: usize,
}

/// The definitions entered so far. `source` is their text, typed and loaded, one after the other;
/// every span in `program` is an offset into it.
#[derive(Default)]
pub struct Session {
    source: String,
    chunks: Vec<Chunk>,
    program: Program,
}

const HELP: &str = "\
  def NAME ... = EXPR   add a definition (a name defined again is shadowed from here on)
  EXPR                  evaluate and print
  :type EXPR            print the type of EXPR (also :t)
  :load FILE            add the definitions in FILE (also :l)
  :defs                 list the definitions and their types
  :help                 this list (also :h)
  :quit                 leave (also :q, Ctrl-D)
Unfinished input (an open bracket, a trailing operator, `let` without `in`) continues on the next
line; an empty line or a command enters it as it is. Ctrl-C cancels the input, or stops the
evaluation.
";

impl Session {
    /// One complete input. Unless `whole`, input that ends too early is `Incomplete`.
    pub fn input(&mut self, text: &str, whole: bool) -> Answer {
        let line = text.trim();
        // A comment line is like a blank one.
        if line.starts_with("--") && !line.contains('\n') {
            return Answer::Replies(Vec::new());
        }
        let one = |r: Reply| Answer::Replies(vec![r]);
        if line == ":quit" || line == ":q" {
            return Answer::Quit;
        }
        if line == ":help" || line == ":h" {
            return one(Reply::Text(HELP.to_string()));
        }
        if line == ":defs" {
            return one(Reply::Text(self.visible_signatures()));
        }
        if let Some(e) = line.strip_prefix(":type ").or_else(|| line.strip_prefix(":t ")) {
            return match self.typed(e, line.len() - e.len()) {
                Ok((_, scheme)) => one(Reply::Text(format!("{}\n", TypePrinter::new().scheme(&scheme)))),
                Err(d) => self.ended_early(&d, whole).unwrap_or_else(|| one(self.error(line, d))),
            };
        }
        if let Some(f) = line.strip_prefix(":load ").or_else(|| line.strip_prefix(":l ")) {
            return one(self.load(f.trim()));
        }
        if line.starts_with(':') {
            let word = line.split_whitespace().next().unwrap_or(line);
            let msg = match word {
                ":type" | ":t" => "`:type` needs an expression: `:type EXPR`".to_string(),
                ":load" | ":l" => "`:load` needs a file: `:load FILE`".to_string(),
                _ => format!("unknown command `{word}` (:help lists the commands)"),
            };
            let at = self.source.len();
            return one(self.error(line, Diagnostic::error(Span::new(at, at + word.len()), msg)));
        }
        if line.starts_with("def ") || line.starts_with("def\n") {
            return match self.define(line, None) {
                Ok(defs) => one(Reply::Text(defs)),
                Err(d) => self.ended_early(&d, whole).unwrap_or_else(|| one(self.error(line, d))),
            };
        }
        match self.eval(line) {
            Ok(text) => one(Reply::Text(text)),
            Err(d) => self.ended_early(&d, whole).unwrap_or_else(|| one(self.error(line, d))),
        }
    }

    /// `Incomplete` when `d` says the input ended too early and more may follow.
    fn ended_early(&self, d: &Diagnostic, whole: bool) -> Option<Answer> {
        (!whole && d.message.ends_with("found end of file")).then_some(Answer::Incomplete)
    }

    /// Adds the definitions in `text` (typed, or loaded from `path`): `name : type` for each.
    fn define(&mut self, text: &str, path: Option<&str>) -> Result<String, Diagnostic> {
        let placed = self.placed(text, 0);
        let (defs, next) = frontend::parser::parse_defs_in(&placed, &self.program)?;
        let mut p = self.program.clone();
        p.next_local = next;
        let defs = frontend::infer::check_defs(&p, defs)?;
        let mut shown = String::new();
        for d in &defs {
            shown.push_str(&format!("{} : {}\n", d.name, TypePrinter::new().scheme(&d.scheme)));
        }
        let n = defs.len();
        p.defs.extend(defs);
        self.program = p;
        let lo = self.source.len();
        self.source.push_str(text);
        self.source.push('\n');
        self.chunks.push(Chunk { path: path.map(str::to_string), lo, hi: self.source.len() });
        Ok(match path {
            Some(f) if n != 1 => format!("{f}: {n} definitions (:defs lists them)\n"),
            _ => shown,
        })
    }

    /// `:load FILE`.
    fn load(&mut self, file: &str) -> Reply {
        let text = match crate::read(file) {
            Ok(t) => t,
            Err(crate::Failure::Program { path, src, diag }) => return Reply::Error { path, src, diag },
            Err(crate::Failure::Plain(m) | crate::Failure::Usage(m)) => return Reply::Plain(m),
        };
        match self.define(&text, Some(file)) {
            Ok(t) => Reply::Text(t),
            Err(mut d) => {
                // Spans point into the file, placed after the definitions.
                let base = self.source.len();
                let back =
                    |s: Span| Span::new((s.lo as usize).saturating_sub(base), (s.hi as usize).saturating_sub(base));
                d.labels.retain(|(s, _)| s.lo as usize >= base);
                d.labels = d.labels.into_iter().map(|(s, t)| (back(s), t)).collect();
                if (d.span.lo as usize) < base {
                    return self.error(&text, d);
                }
                d.span = back(d.span);
                Reply::Error { path: file.to_string(), src: text, diag: d }
            }
        }
    }

    /// `name : type` of each definition not shadowed by a later one.
    fn visible_signatures(&self) -> String {
        let mut out = String::new();
        for (i, d) in self.program.defs.iter().enumerate() {
            if self.program.lookup(&d.name) == Some(DefId(i as u32)) {
                out.push_str(&format!("{} : {}\n", d.name, TypePrinter::new().scheme(&d.scheme)));
            }
        }
        out
    }

    /// An error whose spans are offsets into the definitions followed by `line`: located in the
    /// line when its primary span is there, else in the definitions typed at the prompt (shown
    /// together, as one text) or in the loaded file it points into.
    fn error(&self, line: &str, mut d: Diagnostic) -> Reply {
        let base = self.source.len();
        let at = d.span.lo as usize;
        if at >= base {
            let back = |s: Span| Span::new(s.lo as usize - base, s.hi as usize - base);
            d.span = back(d.span);
            d.labels =
                d.labels.into_iter().filter(|(s, _)| (s.lo as usize) >= base).map(|(s, t)| (back(s), t)).collect();
            return Reply::Error { path: TYPED.into(), src: line.to_string(), diag: d };
        }
        let Some(chunk) = self.chunks.iter().find(|c| c.lo <= at && at < c.hi) else {
            return Reply::Error { path: TYPED.into(), src: self.source.clone(), diag: d };
        };
        // The text the error is shown in, and where each chunk of it starts there.
        let same = |c: &Chunk| match (&chunk.path, &c.path) {
            (None, None) => true,
            _ => std::ptr::eq(c, chunk),
        };
        let mut src = String::new();
        let mut starts = Vec::new();
        for c in self.chunks.iter().filter(|c| same(c)) {
            starts.push((c.lo, c.hi, src.len()));
            src.push_str(&self.source[c.lo..c.hi]);
        }
        let map = |s: Span| {
            let (lo, hi) = (s.lo as usize, s.hi as usize);
            starts
                .iter()
                .find(|(l, h, _)| *l <= lo && lo < *h)
                .map(|(l, h, to)| Span::new(lo - l + to, hi.min(*h) - l + to))
        };
        d.span = map(d.span).unwrap_or(Span::new(0, 0));
        d.labels = d.labels.into_iter().filter_map(|(s, t)| map(s).map(|s| (s, t))).collect();
        Reply::Error { path: chunk.path.clone().unwrap_or_else(|| TYPED.into()), src, diag: d }
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
        // An interrupt is about the input as a whole, wherever the evaluation was.
        let line = Span::new(self.source.len(), self.source.len() + src.len());
        let interrupted = |d: Diagnostic| if d.message == "interrupted" { Diagnostic { span: line, ..d } } else { d };
        let v = crate::engine_eval(&mono).map_err(interrupted)?;
        // Compiled code does not poll for Ctrl-C: its result is dropped instead.
        runtime::interp::check_interrupt(line)?;
        Ok(format!("{v}\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds lines (`^C` stands for Ctrl-C) and returns stdout and the errors, rendered.
    fn drive(repl: &mut Repl, lines: &[&str]) -> (String, String, bool) {
        let (mut out, mut err, mut quit) = (String::new(), String::new(), false);
        for l in lines {
            let input = if *l == "^C" { Input::Interrupted } else { Input::Line(l.to_string()) };
            let o = repl.feed(input);
            for r in o.replies {
                match r {
                    Reply::Text(t) => out.push_str(&t),
                    Reply::Error { path, src, diag } => err.push_str(&crate::render(&path, &src, &diag)),
                    Reply::Plain(m) => err.push_str(&format!("error: {m}\n")),
                }
            }
            quit |= o.quit;
        }
        (out, err, quit)
    }

    /// Held by every test that evaluates: one of them sets the interrupt flag, which compiled
    /// evaluations check when they end.
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn session(lines: &[&str]) -> (String, String) {
        let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let (out, err, _) = frontend::with_big_stack(|| drive(&mut Repl::default(), lines));
        (out, err)
    }

    #[test]
    fn multi_line_input_continues_until_complete() {
        let mut repl = Repl::default();
        assert_eq!(repl.prompt(), PROMPT);
        let o = repl.feed(Input::Line("def f x =".into()));
        assert!(o.replies.is_empty() && o.history.is_none());
        assert_eq!(repl.prompt(), CONTINUE);
        repl.feed(Input::Line("  let y = x * 2".into()));
        let o = repl.feed(Input::Line("  in y + 1".into()));
        assert_eq!(o.history.as_deref(), Some("def f x =\n  let y = x * 2\n  in y + 1"));
        assert_eq!(repl.prompt(), PROMPT);
        let (out, err) = session(&["def f x =", "  x + 1", "(f 1,", " f 2", ")", "[1, 2,", "3]"]);
        assert_eq!(err, "");
        assert_eq!(out, "f : Num 'a => 'a -> 'a\n(2, 3)\n[1, 2, 3]\n");
    }

    #[test]
    fn an_empty_line_or_the_end_enters_unfinished_input_as_it_is() {
        let (out, err) = session(&["1 +", "", "2", "(1,", ":t 1.5"]);
        assert_eq!(out, "2\nReal\n");
        assert_eq!(err.matches("found end of file").count(), 2, "{err}");
        assert!(err.contains("expected an expression, found end of file"), "{err}");
        assert!(err.contains("--> <repl>:1:4"), "{err}");
        let mut repl = Repl::default();
        repl.feed(Input::Line("(1,".into()));
        let o = repl.feed(Input::Eof);
        assert!(o.quit && matches!(o.replies.as_slice(), [Reply::Error { .. }]));
        // A complete input with an error is reported at once, not continued.
        let (out, err) = session(&["1 + true", "3"]);
        assert_eq!(out, "3\n");
        assert!(err.contains("type mismatch"), "{err}");
    }

    #[test]
    fn ctrl_c_cancels_the_input_and_keeps_the_session() {
        let (out, err) = session(&["def a = 40", "(a +", "^C", "a + 2", "^C"]);
        assert_eq!(err, "");
        assert_eq!(out, "a : Num 'a => 'a\n42\n(:quit or Ctrl-D leaves)\n");
    }

    #[test]
    fn redefinition_shadows_for_later_input() {
        let (out, err) = session(&[
            "def k = 1",
            "def f x = x + k",
            "def k = 100",
            "(k, f 1)",
            "def k = true",
            ":defs",
            "def g x = x + x",
            "def g = 3.5",
            "g",
        ]);
        assert_eq!(err, "");
        assert_eq!(
            out,
            "k : Num 'a => 'a\nf : Num 'a => 'a -> 'a\nk : Num 'a => 'a\n(100, 2)\nk : Bool\n\
             f : Num 'a => 'a -> 'a\nk : Bool\ng : Num 'a => 'a -> 'a\ng : Real\n3.5\n"
        );
        // Within one input a name is still defined once.
        let (_, err) = session(&["def h = 1", "def h = 2 def h = 3"]);
        assert!(err.contains("`h` is defined twice"), "{err}");
    }

    #[test]
    fn load_adds_a_files_definitions_and_reports_its_errors_in_it() {
        let dir = std::env::temp_dir().join(format!("nabla-repl-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.nbl");
        std::fs::write(&good, "-- two definitions\ndef sq x = x * x\ndef bad = [1].[3]\n").unwrap();
        let broken = dir.join("broken.nbl");
        std::fs::write(&broken, "def ok = 1\n\ndef oops = 1 + true\n").unwrap();
        let (g, b) = (good.display().to_string(), broken.display().to_string());
        let (out, err) = session(&[
            "def one = 1",
            &format!(":load {g}"),
            "sq 3 + one",
            "bad",
            &format!(":load {b}"),
            "ok",
            ":load /no/such/file.nbl",
        ]);
        assert_eq!(out, format!("one : Num 'a => 'a\n{g}: 2 definitions (:defs lists them)\n10\n"));
        // A run-time error in a loaded definition is shown in its file, at its line.
        assert!(err.contains(&format!("--> {g}:3:11")), "{err}");
        assert!(err.contains("3 | def bad = [1].[3]"), "{err}");
        // A file with an error adds nothing, and the error is located in the file.
        assert!(err.contains(&format!("--> {b}:3:16")), "{err}");
        assert!(err.contains("unknown name `ok`"), "{err}");
        assert!(err.contains("cannot read `/no/such/file.nbl`"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn help_and_type() {
        let (out, err) = session(&[":help", ":type fun x -> x + 1.0", ":t (1,", " true)"]);
        assert_eq!(err, "");
        assert!(out.starts_with(HELP), "{out}");
        assert!(out.ends_with("Real -> Real\nNum 'a => 'a * Bool\n"), "{out}");
    }

    /// The interpreter polls the interrupt flag: an evaluation it runs stops with "interrupted",
    /// and the session goes on. (The only test here that sets the flag; the others never
    /// evaluate under the interpreter.)
    #[test]
    fn an_interrupted_evaluation_keeps_the_session() {
        let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        frontend::with_big_stack(|| {
            let mut repl = Repl::default();
            let (out, _, _) = drive(&mut repl, &["def f x = iterate 100000000 (fun y -> y + x) 0"]);
            assert_eq!(out, "f : Num 'a => 'a -> 'a\n");
            INTERRUPT.store(true, Ordering::Relaxed);
            // A `dual` map runs on the interpreter (not compiled yet): it stops at its first closure call.
            let (out, err, _) = drive(&mut repl, &["dual (fun v -> v * 2.0) (star (toReal (f 1)))"]);
            INTERRUPT.store(false, Ordering::Relaxed);
            assert_eq!(out, "");
            assert!(err.starts_with("error: interrupted\n  --> <repl>:1:1\n"), "{err}");
            assert!(err.contains("1 | dual (fun v -> v * 2.0) (star (toReal (f 1)))"), "{err}");
            let (out, err, _) = drive(&mut repl, &["f 2"]);
            assert_eq!((out.as_str(), err.as_str()), ("200000000\n", ""));
        });
    }
}

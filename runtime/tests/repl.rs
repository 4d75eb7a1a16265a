//! `nabla repl` through the binary with piped input: definitions, expressions, commands, comment
//! lines, and errors located in the text they point into.

use std::io::Write;
use std::process::{Command, Stdio};

struct Run {
    stdout: String,
    stderr: String,
    status: i32,
}

fn repl(input: &str) -> Run {
    repl_bytes(input.as_bytes())
}

fn repl_bytes(input: &[u8]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nabla"))
        .arg("repl")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs nabla");
    child.stdin.take().expect("stdin").write_all(input).expect("writes the input");
    let out = child.wait_with_output().expect("nabla finishes");
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        status: out.status.code().unwrap_or(-1),
    }
}

#[test]
fn definitions_expressions_and_commands() {
    let r = repl("def f x = x + 1\nf 2\n:type f 2.0\n-- a comment line\n  -- another\n(1, 2) -- trailing\n:defs\n");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "");
    let lines: Vec<&str> = r.stdout.lines().skip(1).collect();
    assert_eq!(lines, ["f : Num 'a => 'a -> 'a", "3", "Real", "(1, 2)", "f : Num 'a => 'a -> 'a"]);
}

/// A run-time error raised inside an earlier definition points at that definition, not at the
/// same columns of the line that used it.
#[test]
fn an_error_inside_a_definition_is_shown_in_that_definition() {
    let r = repl("def a = 1\ndef h = [1].[5]\nh + 1\n");
    assert_eq!(r.status, 0);
    assert!(r.stderr.contains("index 5 out of bounds for length 1"), "{}", r.stderr);
    assert!(r.stderr.contains("--> <repl>:2:9"), "{}", r.stderr);
    assert!(r.stderr.contains("2 | def h = [1].[5]"), "{}", r.stderr);
}

#[test]
fn errors_in_the_line_point_into_the_line() {
    let r = repl("def f x = x + 1\n1 +\n:type f true\n[1].[7]\n");
    assert_eq!(r.status, 0);
    let at: Vec<&str> = r.stderr.lines().filter(|l| l.contains("-->")).map(str::trim).collect();
    assert_eq!(at, ["--> <repl>:1:4", "--> <repl>:1:9", "--> <repl>:1:1"], "{}", r.stderr);
    assert!(r.stderr.contains("1 | :type f true"), "{}", r.stderr);
}

#[test]
fn unknown_commands_are_named() {
    let r = repl(":bogus x\n:type\n:quit\n1\n");
    assert_eq!(r.status, 0);
    assert!(r.stderr.contains("unknown command `:bogus`"), "{}", r.stderr);
    assert!(r.stderr.contains("`:type` needs an expression"), "{}", r.stderr);
    // Nothing after `:quit` is read.
    assert_eq!(r.stdout.lines().count(), 1, "{}", r.stdout);
}

/// A line that is not UTF-8 is reported and the session goes on.
#[test]
fn a_line_that_is_not_utf8_is_reported_and_skipped() {
    let r = repl_bytes(b"def a = 1\n\xff\xfe bad\na + 1\n");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "error: the line is not valid UTF-8 text\n");
    let lines: Vec<&str> = r.stdout.lines().skip(1).collect();
    assert_eq!(lines, ["a : Num 'a => 'a", "2"]);
}

/// Multi-line input, redefinition and `:load` through the binary.
#[test]
fn multi_line_input_redefinition_and_load() {
    let dir = std::env::temp_dir().join(format!("nabla-repl-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("lib.nbl");
    std::fs::write(&lib, "def double x = 2 * x\n").unwrap();
    let input = format!("def f x =\n  x + 1\nf (f\n  1)\ndef f x = x * 10\nf 2\n:load {}\ndouble 21\n", lib.display());
    let r = repl(&input);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "");
    let lines: Vec<&str> = r.stdout.lines().skip(1).collect();
    assert_eq!(
        lines,
        ["f : Num 'a => 'a -> 'a", "3", "f : Num 'a => 'a -> 'a", "20", "double : Num 'a => 'a -> 'a", "42"]
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// The session's input is saved in the history file `NABLA_HISTORY` names, a multi-line input as
/// one entry.
#[test]
fn history_is_kept_in_a_file() {
    let path = std::env::temp_dir().join(format!("nabla-history-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let mut child = Command::new(env!("CARGO_BIN_EXE_nabla"))
        .arg("repl")
        .env("NABLA_HISTORY", &path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs nabla");
    child.stdin.take().unwrap().write_all(b"def a = 1\n(a,\n a)\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let saved = std::fs::read_to_string(&path).expect("the history file is written");
    assert!(saved.contains("def a = 1"), "{saved}");
    assert!(saved.contains("(a,"), "{saved}");
    std::fs::remove_file(&path).ok();
}

/// Ctrl-C (SIGINT) does not end the session: the definitions made before it are still there.
#[cfg(unix)]
#[test]
fn ctrl_c_keeps_the_session() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_nabla"))
        .arg("repl")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs nabla");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdin.write_all(b"def a = 41\n").unwrap();
    let mut line = String::new();
    // The banner, then the definition's type: the session is running and waits for input.
    for _ in 0..2 {
        line.clear();
        stdout.read_line(&mut line).unwrap();
    }
    assert_eq!(line, "a : Num 'a => 'a\n");
    // SAFETY: sends a signal to the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
    std::thread::sleep(std::time::Duration::from_millis(100));
    stdin.write_all(b"a + 1\n").unwrap();
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status}");
    assert_eq!(rest, "42\n");
}

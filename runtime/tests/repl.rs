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

//! `nabla gradbench`: the GradBench tool loop (docs/gradbench.md). One JSON message a line on
//! stdin, one JSON answer a line on stdout (flushed after each); notes go to stderr, never stdout.

use std::io::{BufRead, Write};

use runtime::gradbench::Tool;

use crate::Failure;

/// Answers messages until stdin ends.
#[allow(clippy::result_large_err)]
pub fn run(args: &[String]) -> Result<String, Failure> {
    if !args.is_empty() {
        return Err(Failure::Usage("`gradbench` takes no arguments".into()));
    }
    let mut tool = Tool::new();
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut line = String::new();
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) => return Ok(String::new()),
            Ok(_) => {}
            Err(e) => return Err(Failure::Plain(format!("cannot read a message: {e}"))),
        }
        if line.trim().is_empty() {
            continue;
        }
        let answer = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tool.handle(&line))) {
            Ok(a) => a,
            Err(_) => {
                let id = serde_json::from_str::<serde_json::Value>(&line)
                    .ok()
                    .and_then(|m| m.get("id").cloned())
                    .unwrap_or(serde_json::Value::Null);
                serde_json::json!({ "id": id, "success": false, "error": "internal error (a panic)" }).to_string()
            }
        };
        for note in tool.take_notes() {
            crate::to_stderr(&format!("{note}\n"));
        }
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(answer.as_bytes())
            .and_then(|_| stdout.write_all(b"\n"))
            .and_then(|_| stdout.flush())
            .map_err(|e| Failure::Plain(format!("cannot write an answer: {e}")))?;
    }
}

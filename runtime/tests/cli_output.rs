//! The `nabla` binary when its output cannot be written (a full disk, a closed pipe): an error
//! with exit status 1, never a panic.

#![cfg(target_os = "linux")]

use std::fs::File;
use std::process::{Command, Stdio};

fn example(name: &str) -> String {
    format!("{}/../examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `/dev/full` fails every write with "no space left on device".
fn full() -> Stdio {
    Stdio::from(File::options().write(true).open("/dev/full").expect("/dev/full exists on Linux"))
}

#[test]
fn a_full_stdout_is_an_error_not_a_panic() {
    for args in [vec!["run", "paper_primal.nbl"], vec!["check", "paper_primal.nbl"], vec!["help"]] {
        let args: Vec<String> =
            args.iter().map(|a| if a.ends_with(".nbl") { example(a) } else { a.to_string() }).collect();
        let out = Command::new(env!("CARGO_BIN_EXE_nabla")).args(&args).stdout(full()).output().expect("runs nabla");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: cannot write the output"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_full_stderr_keeps_the_exit_status() {
    let out = Command::new(env!("CARGO_BIN_EXE_nabla"))
        .args(["run", "no such file.nbl"])
        .stderr(full())
        .output()
        .expect("runs nabla");
    assert_eq!(out.status.code(), Some(1));
    let out = Command::new(env!("CARGO_BIN_EXE_nabla")).arg("frob").stderr(full()).output().expect("runs nabla");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_full_stdout_ends_the_repl_with_an_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_nabla"))
        .arg("repl")
        .stdin(Stdio::null())
        .stdout(full())
        .output()
        .expect("runs nabla");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write the output"), "{stderr}");
}

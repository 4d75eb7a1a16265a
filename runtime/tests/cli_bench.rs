//! `nabla bench` times both engines and reports their agreement and the ratio (no timing asserted).

use std::process::Command;

#[test]
fn bench_reports_both_engines() {
    let dir = std::env::temp_dir().join(format!("nabla-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("loop.nbl");
    std::fs::write(&f, "def main = iterate 1000 (fun x -> x * 0.5 + 1.0) 0.0\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nabla")).arg("bench").arg(&f).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("main = 2.0\n"), "{text}");
    for line in ["interpreter  median", "JIT          median", "compile      median", "JIT speed-up"] {
        assert!(text.contains(line), "missing `{line}` in:\n{text}");
    }
    // ILC's `derive` compiles: both engines are timed.
    let g = dir.join("derive.nbl");
    std::fs::write(&g, "def f x = x + 1\ndef main = (derive f) 1 (gchange intGroup 2)\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nabla")).arg("bench").arg(&g).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.starts_with("main = gchange 2\n") && text.contains("JIT          median"), "{text}");
    // A program the compiler does not handle yet is timed in the interpreter only, and says why.
    let h = dir.join("pullback.nbl");
    std::fs::write(
        &h,
        "def main = grad (fun (g : Real) -> (g * g) <+> fold (fun d (k : Real) -> if k > 0.75 then gchange realGroup k else d) (replace 0.0) [if g > 0.0 then 1.0 else 0.5]) 3.0\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nabla")).arg("bench").arg(&h).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("JIT          not timed:") && text.contains("is not compiled yet"), "{text}");
    std::fs::remove_dir_all(&dir).ok();
}

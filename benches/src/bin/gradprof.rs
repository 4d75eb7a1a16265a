//! A driver for profilers and A/B timing of issue 9's compiled gradients (not criterion):
//! `cargo run -p benches --release --bin gradprof NAME [WHAT] [SECONDS]` calls WHAT (`gradient`,
//! the default, `primal` or `rust`) of the reverse-mode workload NAME (`benches::reverse`, full
//! size) in a loop for about SECONDS (default 3), in batches, and prints the median batch's time
//! per call, in this thread's CPU time (not inflated by other processes on shared cores). Run it under `perf record` to see where the time goes: Cranelift's JIT writes
//! `/tmp/perf-PID.map`, and with `DUMP=DIR` set this driver copies the machine code of every
//! function that map names into `DIR/ADDRESS.bin` (for `objdump -b binary -m i386:x86-64
//! --adjust-vma=0xADDRESS -D`), so samples can be placed on instructions.
use std::time::Instant;

/// This thread's CPU time in seconds.
fn cpu() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

use benches::reverse::{workloads, Scale};
use runtime::api::{Compiled, Gradient};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = args.first().map_or("mlp", String::as_str);
    let what = args.get(1).map_or("gradient", String::as_str);
    let seconds: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let mut w = workloads(Scale::Full).into_iter().find(|w| w.name == name).expect("a workload of benches::reverse");
    let mut g = vec![0.0; w.gradient_len()];
    let mut call: Box<dyn FnMut(&mut [f64]) -> f64> = match what {
        "gradient" => {
            let mut grad = Gradient::new(&w.src, w.def).unwrap_or_else(|d| panic!("{}", d.message));
            let args: Vec<_> = w.inputs.clone();
            Box::new(move |g| {
                let a: Vec<_> = args.iter().map(|i| i.arg()).collect();
                grad.call(&a, g).expect("gradient")
            })
        }
        "primal" => {
            let mut p = Compiled::new(&w.src, w.def).unwrap_or_else(|d| panic!("{}", d.message));
            let args: Vec<_> = w.inputs.clone();
            Box::new(move |_| {
                let a: Vec<_> = args.iter().map(|i| i.arg()).collect();
                p.call_f64(&a).expect("primal")
            })
        }
        "rust" => std::mem::replace(&mut w.adjoint, Box::new(|_| 0.0)),
        other => panic!("WHAT is gradient, primal or rust, not {other}"),
    };
    // Calibrate a batch of about 10 ms.
    let t = Instant::now();
    let mut n = 0usize;
    while t.elapsed().as_secs_f64() < 0.01 {
        std::hint::black_box(call(&mut g));
        n += 1;
    }
    let mut batches = Vec::new();
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < seconds {
        let t = cpu();
        for _ in 0..n {
            std::hint::black_box(call(&mut g));
        }
        batches.push((cpu() - t) / n as f64);
    }
    if let Ok(dir) = std::env::var("DUMP") {
        dump_code(&dir);
    }
    batches.sort_by(f64::total_cmp);
    let med = batches[batches.len() / 2];
    println!("{name} {what}: median {:.3} µs per call ({} batches of {n})", med * 1e6, batches.len());
}

/// Copies the code of each function of this process's perf map into `dir`.
fn dump_code(dir: &str) {
    let map = std::fs::read_to_string(format!("/tmp/perf-{}.map", std::process::id())).expect("a perf map");
    for line in map.lines() {
        let mut f = line.split_whitespace();
        let (Some(addr), Some(size)) = (f.next(), f.next()) else { continue };
        let (a, n) = (usize::from_str_radix(addr, 16).expect("hex"), usize::from_str_radix(size, 16).expect("hex"));
        // SAFETY: the JIT's code pages of this live process, mapped readable and executable.
        let code = unsafe { std::slice::from_raw_parts(a as *const u8, n) };
        std::fs::write(format!("{dir}/{addr}.bin"), code).expect("writable");
    }
}

//! `cargo fuzz run pipeline`: see `fuzz_checks::pipeline` (runtime/tests/fuzz_checks/mod.rs) and FUZZING.md.
#![no_main]

#[path = "../../runtime/tests/fuzz_checks/mod.rs"]
mod fuzz_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::pipeline(data));

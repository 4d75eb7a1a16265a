//! A fixed workload for profilers (callgrind, perf): the histogram of `examples/histogram.nbl` over
//! `N` documents of 1 000 words, then `K` one-word changes and their inverses through the compiled
//! driver. `cargo build -p benches --release --bin ilc_profile`, then e.g.
//! `valgrind --tool=callgrind --toggle-collect='*changes_timed*' target/release/ilc_profile 1000 2000`
//! (the first 100 batches are warm-up). Prints the median time per change over batches of 16
//! changes, and the same for the hand-written `FxHashMap` update of `benches/benches/ilc.rs`.
//! A third argument names the changed document (the middle one by default); a second line gives
//! the same figures for changes spread over 64 documents taken in turn.
use std::rc::Rc;
use std::time::Instant;

use runtime::api::{GroupDelta, Incremental};
use runtime::value::{Bag, Change, Group, Key, MapV, Value};
use rustc_hash::FxHashMap;

fn word(d: usize, w: usize) -> i64 {
    let x = (d as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (w as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    ((x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9) >> 33) as i64 % 1000
}

fn doc_change(d: usize, entries: impl IntoIterator<Item = (i64, i64)>) -> (Key, Value) {
    let mut b = Bag::default();
    for (k, n) in entries {
        b.insert(Key::Int(k), n).expect("a multiplicity in range");
    }
    (Key::Int(d as i64), Value::Bag(Rc::new(b)))
}

fn gchange(entries: impl IntoIterator<Item = (Key, Value)>) -> Value {
    let mut m = MapV::default();
    m.entries.extend(entries);
    Value::Change(Rc::new(Change::GChange(Rc::new(Group::Map(Rc::new(Group::Bag))), Value::Map(Rc::new(m)))))
}

fn main() {
    let arg = |i: usize, d: usize| std::env::args().nth(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (docs, changes) = (arg(1, 1000), arg(2, 2000));
    let src = benches::example("histogram");
    let (_, mono) = runtime::prepare(&src, "histogram").expect("histogram type-checks");
    let mut driver = Incremental::new(&mono, &Value::Map(Rc::new(MapV::default()))).expect("the driver starts");
    for start in (0..docs).step_by(100) {
        let batch = (start..(start + 100).min(docs)).map(|d| doc_change(d, (0..1000).map(|w| (word(d, w), 1))));
        driver.update(&gchange(batch)).expect("documents added");
    }
    // The changed document (the middle one unless a third argument names another).
    let d = arg(3, docs / 2).min(docs - 1);
    let (from, to) = (word(d, 0), (word(d, 0) + 1) % 1000);
    let there = gchange([doc_change(d, [(from, -1), (to, 1)])]);
    let back = gchange([doc_change(d, [(to, -1), (from, 1)])]);
    // Warm up: the first updates after loading drop the loading batches' spare tables.
    values_timed(&mut driver, &there, &back, 100);
    let mut value_times = values_timed(&mut driver, &there, &back, changes / 4 + 1);
    // The same change written straight into native collections (`GroupDelta`), built per update.
    let mut delta = driver.delta().expect("the input has a canonical group");
    changes_timed(&mut driver, &mut delta, (d as i64, from, to), 100);
    let mut times = changes_timed(&mut driver, &mut delta, (d as i64, from, to), changes);
    // The same state by hand (documents as word counts and the histogram in `FxHashMap`s), the
    // same change: `BENCHMARKS.md`'s baseline, timed the same way.
    let mut hand = Hand::default();
    for d in 0..docs {
        for w in 0..1000 {
            hand.update(d as i64, None, Some(word(d, w)));
        }
    }
    let mut hand_times = Vec::with_capacity(changes);
    for _ in 0..changes {
        let t = Instant::now();
        for _ in 0..HAND_BATCH {
            hand.update(std::hint::black_box(d as i64), Some(from), Some(to));
            hand.update(std::hint::black_box(d as i64), Some(to), Some(from));
        }
        hand_times.push(t.elapsed().as_nanos() as f64 / (2 * HAND_BATCH) as f64);
    }
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    let (u, h, v) = (median(&mut times), median(&mut hand_times), median(&mut value_times));
    println!(
        "{docs} documents, {changes} x {BATCH} x 2 changes: per change median {u:.0} ns (mean {mean:.0} ns), \
         hand-written {h:.1} ns, ratio {:.1}; the change as a Value: median {v:.0} ns",
        u / h
    );
    // The same kind of change spread over `SPREAD` documents (each replacing its first word by
    // the next word id, and back), taken in turn: the hand-written update's cost depends on
    // whether the two words are in the document (an entry updated in place, or one inserted and
    // removed), so one document's change can flatter or penalise it.
    let spread: Vec<(i64, i64, i64)> = (0..SPREAD.min(docs))
        .map(|i| {
            let d = i * docs / SPREAD.min(docs);
            (d as i64, word(d, 0), (word(d, 0) + 1) % 1000)
        })
        .collect();
    spread_timed(&mut driver, &mut delta, &spread, 100);
    let mut times = spread_timed(&mut driver, &mut delta, &spread, changes);
    let mut hand_times = Vec::with_capacity(changes);
    let mut next = 0;
    for _ in 0..changes {
        let t = Instant::now();
        for _ in 0..HAND_BATCH {
            let (d, from, to) = spread[next % spread.len()];
            next += 1;
            hand.update(std::hint::black_box(d), Some(from), Some(to));
            hand.update(std::hint::black_box(d), Some(to), Some(from));
        }
        hand_times.push(t.elapsed().as_nanos() as f64 / (2 * HAND_BATCH) as f64);
    }
    let (u, h) = (median(&mut times), median(&mut hand_times));
    println!(
        "  over {} documents in turn: per change median {u:.0} ns, hand-written {h:.1} ns, ratio {:.1}",
        spread.len(),
        u / h
    );
}

/// Documents the spread measurement takes in turn.
const SPREAD: usize = 64;

/// As [`changes_timed`], each change and its inverse on the next document of `spread` in turn.
#[inline(never)]
fn spread_timed(
    driver: &mut Incremental,
    delta: &mut GroupDelta,
    spread: &[(i64, i64, i64)],
    batches: usize,
) -> Vec<f64> {
    let mut times = Vec::with_capacity(batches);
    let mut next = 0;
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..BATCH {
            let (d, from, to) = spread[next % spread.len()];
            next += 1;
            replace_word(driver, delta, d, from, to);
            replace_word(driver, delta, d, to, from);
        }
        times.push(t.elapsed().as_nanos() as f64 / (2 * BATCH) as f64);
    }
    times
}

/// Updates timed per batch (a batch lasts microseconds: rarely preempted on a busy machine, so
/// the median is the update's own cost).
const BATCH: usize = 8;
const HAND_BATCH: usize = 256;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[derive(Default)]
struct Hand {
    docs: FxHashMap<i64, FxHashMap<i64, i64>>,
    hist: FxHashMap<i64, i64>,
}

fn add(map: &mut FxHashMap<i64, i64>, k: i64, n: i64) {
    let e = map.entry(k).or_insert(0);
    *e += n;
    if *e == 0 {
        map.remove(&k);
    }
}

impl Hand {
    fn update(&mut self, d: i64, from: Option<i64>, to: Option<i64>) {
        let doc = self.docs.entry(d).or_default();
        for (w, n) in [(from, -1), (to, 1)] {
            if let Some(w) = w {
                add(doc, w, n);
                add(&mut self.hist, w, n);
            }
        }
    }
}

/// The measured loop (its own function, so a profiler can collect only it): per batch of
/// `BATCH` changes and their inverses (document `d` loses a `from` and gains a `to`, and back),
/// each built as a `GroupDelta` and applied, the time per change.
#[inline(never)]
fn changes_timed(
    driver: &mut Incremental,
    delta: &mut GroupDelta,
    (d, from, to): (i64, i64, i64),
    batches: usize,
) -> Vec<f64> {
    let mut times = Vec::with_capacity(batches);
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..BATCH {
            replace_word(driver, delta, d, from, to);
            replace_word(driver, delta, d, to, from);
        }
        times.push(t.elapsed().as_nanos() as f64 / (2 * BATCH) as f64);
    }
    times
}

/// Document `d` loses one `from` and gains one `to` (not a closure of `changes_timed`: a
/// profiler's toggle on that name would stop collecting inside it).
fn replace_word(driver: &mut Incremental, delta: &mut GroupDelta, d: i64, from: i64, to: i64) {
    delta.clear();
    delta.add(&[Key::Int(d), Key::Int(from)], -1).expect("a path of the input");
    delta.add(&[Key::Int(d), Key::Int(to)], 1).expect("a path of the input");
    driver.update_delta(std::hint::black_box(delta)).expect("update");
}

/// The same with the change given as a `Value` (what the CLI parses a line into).
#[inline(never)]
fn values_timed(driver: &mut Incremental, there: &Value, back: &Value, batches: usize) -> Vec<f64> {
    let mut times = Vec::with_capacity(batches);
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..BATCH {
            driver.update(std::hint::black_box(there)).expect("update");
            driver.update(std::hint::black_box(back)).expect("update");
        }
        times.push(t.elapsed().as_nanos() as f64 / (2 * BATCH) as f64);
    }
    times
}

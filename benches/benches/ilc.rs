//! ILC at native speed (the paper's Fig. 7): the word-count histogram over N documents of 1 000
//! words from a vocabulary of 1 000, kept current by the compiled driver
//! (`runtime::api::Incremental`) under a change that replaces one word of one document, against
//! compiled recomputation and against a hand-written Rust `FxHashMap` update of the same state.
//! `cargo bench -p benches --bench ilc`; `cargo run -p benches --release --bin ilc_report` prints
//! the table of BENCHMARKS.md and writes `ilc.csv` for `benches/plot_ilc.py`.

use std::hint::black_box;
use std::rc::Rc;

use criterion::{criterion_group, criterion_main, Criterion};
use runtime::api::Incremental;
use runtime::value::{Bag, Change, Group, Key, MapV, Value};
use rustc_hash::FxHashMap;

const WORDS: usize = 1000;
const VOCABULARY: i64 = 1000;

/// Deterministic word ids.
fn word(d: usize, w: usize) -> i64 {
    let x = (d as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (w as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    ((x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9) >> 33) as i64 % VOCABULARY
}

fn input(docs: usize) -> Value {
    let mut m = MapV::default();
    for d in 0..docs {
        let mut b = Bag::default();
        for w in 0..WORDS {
            b.insert(Key::Int(word(d, w)), 1);
        }
        m.entries.insert(Key::Int(d as i64), Value::Bag(Rc::new(b)));
    }
    Value::Map(Rc::new(m))
}

/// Document `d` loses one `from` and gains one `to`.
fn change(d: usize, from: i64, to: i64) -> Value {
    let mut b = Bag::default();
    b.insert(Key::Int(from), -1);
    b.insert(Key::Int(to), 1);
    let mut m = MapV::default();
    m.entries.insert(Key::Int(d as i64), Value::Bag(Rc::new(b)));
    Value::Change(Rc::new(Change::GChange(Rc::new(Group::Map(Rc::new(Group::Bag))), Value::Map(Rc::new(m)))))
}

/// The same state by hand: documents as word counts, and the histogram.
struct Hand {
    docs: FxHashMap<i64, FxHashMap<i64, i64>>,
    hist: FxHashMap<i64, i64>,
}

impl Hand {
    fn new(docs: usize) -> Hand {
        let mut h = Hand { docs: FxHashMap::default(), hist: FxHashMap::default() };
        for d in 0..docs {
            let doc = h.docs.entry(d as i64).or_default();
            for w in 0..WORDS {
                *doc.entry(word(d, w)).or_insert(0) += 1;
                *h.hist.entry(word(d, w)).or_insert(0) += 1;
            }
        }
        h
    }
    fn add(map: &mut FxHashMap<i64, i64>, k: i64, n: i64) {
        let e = map.entry(k).or_insert(0);
        *e += n;
        if *e == 0 {
            map.remove(&k);
        }
    }
    fn update(&mut self, d: i64, from: i64, to: i64) {
        let doc = self.docs.entry(d).or_default();
        Hand::add(doc, from, -1);
        Hand::add(doc, to, 1);
        Hand::add(&mut self.hist, from, -1);
        Hand::add(&mut self.hist, to, 1);
    }
}

fn histogram(c: &mut Criterion) {
    let src = benches::example("histogram");
    let (_, mono) = runtime::prepare(&src, "histogram").expect("histogram type-checks");
    let sizes: Vec<usize> = std::env::var("NABLA_ILC_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 1000, 10_000]);
    for docs in sizes {
        let a = input(docs);
        // The histogram is small: its passes need no big stack.
        let mut driver = Incremental::new(&mono, &a).expect("the driver starts");
        let d = docs / 2;
        let (from, to) = (word(d, 0), (word(d, 0) + 1) % VOCABULARY);
        let there = change(d, from, to);
        let back = change(d, to, from);
        // The update must agree with recomputation before its time means anything.
        driver.update(&there).expect("update");
        assert_eq!(driver.output().to_string(), driver.recompute().expect("recompute").to_string());
        driver.update(&back).expect("update");
        let mut hand = Hand::new(docs);
        hand.update(d as i64, from, to);
        let out = driver.recompute().expect("recompute");
        driver.update(&there).expect("update");
        let expected: std::collections::BTreeMap<i64, i64> = hand.hist.iter().map(|(k, v)| (*k, *v)).collect();
        let printed =
            format!("map{{{}}}", expected.iter().map(|(k, v)| format!("{k} -> {v}")).collect::<Vec<_>>().join(", "));
        assert_eq!(driver.output().to_string(), printed, "the hand-written update differs");
        let _ = out;
        driver.update(&back).expect("update");
        hand.update(d as i64, to, from);
        let mut g = c.benchmark_group(format!("ilc_histogram/{docs}"));
        g.sample_size(10);
        // Two updates per iteration (there and back), so the state stays the same.
        g.bench_function("update_x2", |b| {
            b.iter(|| {
                driver.update(black_box(&there)).expect("update");
                driver.update(black_box(&back)).expect("update");
            })
        });
        g.bench_function("recompute", |b| b.iter(|| driver.recompute().expect("recompute")));
        g.bench_function("rust_x2", |b| {
            b.iter(|| {
                hand.update(black_box(d as i64), from, to);
                hand.update(black_box(d as i64), to, from);
            })
        });
        g.finish();
    }
}

criterion_group!(ilc, histogram);
criterion_main!(ilc);

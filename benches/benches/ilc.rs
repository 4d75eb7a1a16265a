//! ILC at native speed (the paper's Fig. 7): the word-count histogram over N documents of 1 000
//! words from a vocabulary of 1 000, kept current by the compiled driver
//! (`runtime::api::Incremental`) under a change that replaces one word of one document, against
//! compiled recomputation and against a hand-written Rust `FxHashMap` update of the same state.
//! The timed update builds each change as a `GroupDelta` (entry by entry, straight into native
//! collections) and applies it; `update_value_x2` gives the same change as a `Value` (what
//! `nabla incr` parses a line into).
//! Two more workloads of the paper's setting: `grand_total` (the sum of two bags of N distinct
//! Ints, one element replaced) and an inventory (a group-by-key sum: N distinct stock movements
//! over 1 000 items into `Map Int Int`, one movement replaced).
//!
//! `cargo bench -p benches --bench ilc`; `NABLA_ILC_SIZES` (documents) and `NABLA_ILC_ELEMENTS`
//! (elements of the other two) choose the sizes. Recomputation above 10⁴ documents (seconds per
//! run) is timed outside criterion, as the median of three runs, into
//! `target/criterion/ilc_histogram_N/recompute_manual_ns.txt`.
//! `cargo run -p benches --release --bin ilc_report` prints the tables of BENCHMARKS.md and
//! writes `ilc.csv` for `benches/plot_ilc.py`.

use std::hint::black_box;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use runtime::api::{GroupDelta, Incremental};
use runtime::value::{Bag, Change, Group, Key, MapV, Value};
use rustc_hash::FxHashMap;

const WORDS: usize = 1000;
const VOCABULARY: i64 = 1000;
/// Documents per change while the input is built (through the driver, never as one value).
const CHUNK: usize = 100;

/// Deterministic word ids.
fn word(d: usize, w: usize) -> i64 {
    let x = (d as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (w as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    ((x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9) >> 33) as i64 % VOCABULARY
}

fn gchange(g: Group, v: Value) -> Value {
    Value::Change(Rc::new(Change::GChange(Rc::new(g), v)))
}

fn bag_of(entries: impl IntoIterator<Item = (Key, i64)>) -> Value {
    let mut b = Bag::default();
    for (k, n) in entries {
        b.insert(k, n).expect("a multiplicity in range");
    }
    Value::Bag(Rc::new(b))
}

/// `gchange (mapGroup bagGroup) map{d -> doc d}` for documents `range`.
fn add_documents(range: std::ops::Range<usize>) -> Value {
    let mut m = MapV::default();
    for d in range {
        m.entries.insert(Key::Int(d as i64), bag_of((0..WORDS).map(|w| (Key::Int(word(d, w)), 1))));
    }
    gchange(Group::Map(Rc::new(Group::Bag)), Value::Map(Rc::new(m)))
}

/// Document `d` loses one `from` and gains one `to`.
fn change(d: usize, from: i64, to: i64) -> Value {
    let mut m = MapV::default();
    m.entries.insert(Key::Int(d as i64), bag_of([(Key::Int(from), -1), (Key::Int(to), 1)]));
    gchange(Group::Map(Rc::new(Group::Bag)), Value::Map(Rc::new(m)))
}

/// Document `d` loses one `from` and gains one `to`: the change built as a `GroupDelta`, applied.
fn replace_word(driver: &mut Incremental, delta: &mut GroupDelta, d: i64, from: i64, to: i64) {
    delta.clear();
    delta.add(&[Key::Int(d), Key::Int(from)], -1).expect("a path of the input");
    delta.add(&[Key::Int(d), Key::Int(to)], 1).expect("a path of the input");
    driver.update_delta(delta).expect("update");
}

/// The same state by hand: documents as word counts, and the histogram.
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
    fn update(&mut self, d: i64, from: i64, to: i64) {
        let doc = self.docs.entry(d).or_default();
        add(doc, from, -1);
        add(doc, to, 1);
        add(&mut self.hist, from, -1);
        add(&mut self.hist, to, 1);
    }
}

fn printed(m: &FxHashMap<i64, i64>) -> String {
    let sorted: std::collections::BTreeMap<i64, i64> = m.iter().map(|(k, v)| (*k, *v)).collect();
    format!("map{{{}}}", sorted.iter().map(|(k, v)| format!("{k} -> {v}")).collect::<Vec<_>>().join(", "))
}

fn sizes(var: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(var)
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn criterion_dir(group: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("criterion").join(group.replace('/', "_"))
}

fn histogram(c: &mut Criterion) {
    let src = benches::example("histogram");
    let (_, mono) = runtime::prepare(&src, "histogram").expect("histogram type-checks");
    for docs in sizes("NABLA_ILC_SIZES", &[1000, 10_000, 100_000]) {
        // The input is built through the driver, a hundred documents per change.
        let empty = Value::Map(Rc::new(MapV::default()));
        let mut driver = Incremental::new(&mono, &empty).expect("the driver starts");
        let t = Instant::now();
        for start in (0..docs).step_by(CHUNK) {
            driver.update(&add_documents(start..(start + CHUNK).min(docs))).expect("documents added");
        }
        eprintln!("{docs} documents loaded through the driver in {:.1} s", t.elapsed().as_secs_f64());
        let d = docs / 2;
        let (from, to) = (word(d, 0), (word(d, 0) + 1) % VOCABULARY);
        let there = change(d, from, to);
        let back = change(d, to, from);
        // The update must agree with recomputation and with the hand-written update before its
        // time means anything.
        let mut hand = Hand::new(docs);
        driver.update(&there).expect("update");
        hand.update(d as i64, from, to);
        let t = Instant::now();
        let recomputed = driver.recompute().expect("recompute");
        let first_recompute = t.elapsed().as_nanos() as f64;
        assert_eq!(driver.output().to_string(), recomputed.to_string(), "update and recomputation differ");
        assert_eq!(driver.output().to_string(), printed(&hand.hist), "the hand-written update differs");
        driver.update(&back).expect("update");
        hand.update(d as i64, to, from);
        let group = format!("ilc_histogram/{docs}");
        let mut g = c.benchmark_group(&group);
        g.sample_size(10);
        // Two updates per iteration (there and back), so the state stays the same; each change is
        // built from the document and the two words, as the hand-written update is given them.
        let mut delta = driver.delta().expect("the input has a canonical group");
        let d = d as i64;
        g.bench_function("update_x2", |b| {
            b.iter(|| {
                for (from, to) in [(from, to), (to, from)] {
                    replace_word(&mut driver, &mut delta, black_box(d), from, to);
                }
            })
        });
        assert_eq!(driver.output().to_string(), printed(&hand.hist), "the update by GroupDelta differs");
        g.bench_function("update_value_x2", |b| {
            b.iter(|| {
                driver.update(black_box(&there)).expect("update");
                driver.update(black_box(&back)).expect("update");
            })
        });
        if docs <= 10_000 {
            g.bench_function("recompute", |b| b.iter(|| driver.recompute().expect("recompute")));
        } else {
            let mut runs = vec![first_recompute];
            for _ in 0..2 {
                let t = Instant::now();
                black_box(driver.recompute().expect("recompute"));
                runs.push(t.elapsed().as_nanos() as f64);
            }
            runs.sort_by(f64::total_cmp);
            let dir = criterion_dir(&group);
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(dir.join("recompute_manual_ns.txt"), format!("{}\n", runs[1]));
            eprintln!("{group}/recompute: median of 3 runs {:.3} s", runs[1] / 1e9);
        }
        g.bench_function("rust_x2", |b| {
            b.iter(|| {
                hand.update(black_box(d), from, to);
                hand.update(black_box(d), to, from);
            })
        });
        g.finish();
    }
}

/// The two smaller workloads: a program, its input of `n` elements, a change and its inverse,
/// and a hand-written update of the same state.
/// One workload's group: the change and its inverse through the driver, built as `GroupDelta`s
/// (`update_x2`, by `delta_x2`) and as values (`update_value_x2`), compiled recomputation, and
/// `rust_x2`, the hand-written update and its inverse.
fn bench_pair(
    c: &mut Criterion,
    name: &str,
    driver: &mut Incremental,
    (there, back): (&Value, &Value),
    mut delta_x2: impl FnMut(&mut Incremental, &mut GroupDelta),
    mut rust_x2: impl FnMut(),
) {
    let mut g = c.benchmark_group(name);
    g.sample_size(10);
    let before = driver.output().to_string();
    let mut delta = driver.delta().expect("the input has a canonical group");
    delta_x2(driver, &mut delta);
    assert_eq!(driver.output().to_string(), before, "a change and its inverse by GroupDelta");
    g.bench_function("update_x2", |b| b.iter(|| delta_x2(driver, &mut delta)));
    g.bench_function("update_value_x2", |b| {
        b.iter(|| {
            driver.update(black_box(there)).expect("update");
            driver.update(black_box(back)).expect("update");
        })
    });
    g.bench_function("recompute", |b| b.iter(|| driver.recompute().expect("recompute")));
    g.bench_function("rust_x2", |b| b.iter(&mut rust_x2));
    g.finish();
}

fn small_workloads(c: &mut Criterion) {
    const GRAND_TOTAL: &str = "\
def grand_total (p : Bag Int * Bag Int) : Int =
  let (xs, ys) = p in foldBag intGroup (fun x -> x) (merge xs ys)
";
    const INVENTORY: &str = "\
def stock (moves : Bag (Int * Int)) : Map Int Int =
  foldBag (mapGroup intGroup) (fun (item, qty) -> singletonMap item qty) moves
";
    // Distinct elements, so that a bag of n elements has n entries.
    let element = |i: usize| 7 * i as i64 + 3;
    for n in sizes("NABLA_ILC_ELEMENTS", &[1000, 10_000, 100_000, 1_000_000]) {
        // grand_total: two bags of n/2 Ints; the change replaces one element of the first.
        let (_, mono) = runtime::prepare(GRAND_TOTAL, "grand_total").expect("grand_total checks");
        let xs = bag_of((0..n / 2).map(|i| (Key::Int(element(i)), 1)));
        let ys = bag_of((n / 2..n).map(|i| (Key::Int(element(i)), 1)));
        let mut driver = Incremental::new(&mono, &Value::tuple(vec![xs, ys])).expect("the driver starts");
        let (from, to) = (element(0), element(0) + 1);
        let swap = |from: i64, to: i64| {
            Value::tuple(vec![
                gchange(Group::Bag, bag_of([(Key::Int(from), -1), (Key::Int(to), 1)])),
                gchange(Group::Bag, bag_of([])),
            ])
        };
        let (there, back) = (swap(from, to), swap(to, from));
        let mut hand: (FxHashMap<i64, i64>, FxHashMap<i64, i64>, i64) = Default::default();
        for i in 0..n {
            *(if i < n / 2 { &mut hand.0 } else { &mut hand.1 }).entry(element(i)).or_insert(0) += 1;
            hand.2 += element(i);
        }
        let hand_update = |h: &mut (FxHashMap<i64, i64>, FxHashMap<i64, i64>, i64), from: i64, to: i64| {
            add(&mut h.0, from, -1);
            add(&mut h.0, to, 1);
            h.2 += to - from;
        };
        driver.update(&there).expect("update");
        hand_update(&mut hand, from, to);
        assert_eq!(driver.output().to_string(), driver.recompute().expect("recompute").to_string());
        assert_eq!(driver.output().to_string(), hand.2.to_string());
        driver.update(&back).expect("update");
        hand_update(&mut hand, to, from);
        let swap_delta = |driver: &mut Incremental, delta: &mut GroupDelta| {
            for (a, b) in [(from, to), (to, from)] {
                delta.clear();
                delta.add(&[Key::Int(0), Key::Int(black_box(a))], -1).expect("a path of the input");
                delta.add(&[Key::Int(0), Key::Int(b)], 1).expect("a path of the input");
                driver.update_delta(delta).expect("update");
            }
        };
        bench_pair(c, &format!("ilc_grand_total/{n}"), &mut driver, (&there, &back), swap_delta, || {
            hand_update(black_box(&mut hand), from, to);
            hand_update(black_box(&mut hand), to, from);
        });

        // Inventory: n distinct movements (item, quantity) over 1 000 items; the change replaces one.
        let (_, mono) = runtime::prepare(INVENTORY, "stock").expect("stock checks");
        let movement = |i: usize| (word(i, 3), i as i64 - 1000);
        let pair = |(a, b): (i64, i64)| Key::Tuple(Rc::from(vec![Key::Int(a), Key::Int(b)]));
        let moves = bag_of((0..n).map(|i| (pair(movement(i)), 1)));
        let mut driver = Incremental::new(&mono, &moves).expect("the driver starts");
        let (old, new) = (movement(0), (movement(0).0, movement(0).1 + 1));
        let replace = |a: (i64, i64), b: (i64, i64)| gchange(Group::Bag, bag_of([(pair(a), -1), (pair(b), 1)]));
        let (there, back) = (replace(old, new), replace(new, old));
        let mut stock: FxHashMap<i64, i64> = FxHashMap::default();
        for i in 0..n {
            let (item, qty) = movement(i);
            add(&mut stock, item, qty);
        }
        let stock_update = |s: &mut FxHashMap<i64, i64>, a: (i64, i64), b: (i64, i64)| {
            add(s, a.0, -a.1);
            add(s, b.0, b.1);
        };
        driver.update(&there).expect("update");
        stock_update(&mut stock, old, new);
        assert_eq!(driver.output().to_string(), driver.recompute().expect("recompute").to_string());
        assert_eq!(driver.output().to_string(), printed(&stock));
        driver.update(&back).expect("update");
        stock_update(&mut stock, new, old);
        let replace_delta = |driver: &mut Incremental, delta: &mut GroupDelta| {
            for (a, b) in [(old, new), (new, old)] {
                delta.clear();
                delta.add(&[pair(black_box(a))], -1).expect("a path of the input");
                delta.add(&[pair(b)], 1).expect("a path of the input");
                driver.update_delta(delta).expect("update");
            }
        };
        bench_pair(c, &format!("ilc_inventory/{n}"), &mut driver, (&there, &back), replace_delta, || {
            stock_update(black_box(&mut stock), old, new);
            stock_update(black_box(&mut stock), new, old);
        });
    }
}

criterion_group!(ilc, histogram, small_workloads);
criterion_main!(ilc);

//! The compiled incremental driver (`runtime::api::Incremental`): a failing change leaves input
//! and output exactly as they were, a failing batch is undone, updates agree with recomputation,
//! and the last output change is kept.

use runtime::api::{Incremental, StateSize, Step};
use runtime::incr::literal;
use runtime::value::Value;

fn driver(src: &str, def: &str, input: &str) -> Incremental {
    let (_, mono) = runtime::prepare(src, def).expect("the program checks");
    let ty = match &mono.def(mono.root()).ty {
        frontend::types::Type::Fun(a, _) => (**a).clone(),
        t => panic!("{def} has type {t}"),
    };
    let (a, _) = literal(input, &ty, 0).expect("the input");
    Incremental::new(&mono, &a).expect("the driver starts")
}

fn change(d: &Incremental, text: &str) -> Value {
    literal(text, &frontend::types::Type::delta(d.input_type()), 0).expect("the change").0
}

const SRC: &str = "\
def safe (b : Bag Int) : Map Int Int =
  foldBag (mapGroup intGroup) (fun x -> singletonMap x (100 / x)) b
";

#[test]
fn a_failing_change_leaves_the_state_and_a_batch_is_all_or_nothing() {
    let mut d = driver(SRC, "safe", "bag{1, 2, 5}");
    assert_eq!(d.output().to_string(), "map{1 -> 100, 2 -> 50, 5 -> 20}");
    let ok = change(&d, "gchange bagGroup bag{4, 1 # -1}");
    assert_eq!(d.update(&ok).expect("applies"), Step::Fast);
    assert_eq!(d.output().to_string(), "map{2 -> 50, 4 -> 25, 5 -> 20}");
    assert_eq!(d.last_change().map(|c| c.to_string()).as_deref(), Some("gchange map{1 -> -100, 4 -> 25}"));
    let (input, output) = (d.input().to_string(), d.output().to_string());
    // 100 / 0 fails inside the derivative.
    let bad = change(&d, "gchange bagGroup bag{0, 2 # -1}");
    let e = d.update(&bad).expect_err("division by zero");
    assert_eq!(e.message, "division by zero");
    assert_eq!((d.input().to_string(), d.output().to_string()), (input.clone(), output.clone()));
    // A batch whose second change fails is undone as a whole.
    let good = change(&d, "gchange bagGroup bag{10}");
    let (i, e) = d.update_batch(&[good.clone(), bad, good.clone()]).expect_err("the batch fails");
    assert_eq!((i, e.message.as_str()), (1, "division by zero"));
    assert_eq!((d.input().to_string(), d.output().to_string()), (input, output));
    d.update_batch(&[good.clone(), good]).expect("a good batch");
    assert_eq!(d.output().to_string(), d.recompute().expect("recomputes").to_string());
    assert_eq!(d.output().to_string(), "map{2 -> 50, 4 -> 25, 5 -> 20, 10 -> 20}");
}

#[test]
fn replace_is_exact_and_non_finite_reals_are_recomputed() {
    let src = "def poly (x : Real) = x * x + 3.0 * x\n\
               def avg (b : Bag Int) = toReal (foldBag intGroup (fun x -> x) b) / toReal (foldBag intGroup (fun x -> 1) b)\n";
    let mut p = driver(src, "poly", "1e10");
    assert_eq!(p.update(&change(&p, "replace 1.0")).expect("applies"), Step::Recomputed);
    assert_eq!(p.output().to_string(), "4.0");
    let mut a = driver(src, "avg", "bag{2}");
    a.update(&change(&a, "gchange bagGroup bag{2 # -1}")).expect("applies");
    assert_eq!(a.output().to_string(), "NaN");
    assert_eq!(a.update(&change(&a, "gchange bagGroup bag{2, 4}")).expect("applies"), Step::Recomputed);
    assert_eq!(a.output().to_string(), "3.0");
}

#[test]
fn a_change_in_a_user_group_is_applied_by_recomputation() {
    // The change's group is a closure made by the interpreter: the new input comes from its `⊕`.
    let src = "def total (b : Bag Int) : Int = foldBag intGroup (fun x -> x) b\n";
    let mut d = driver(src, "total", "bag{1, 2}");
    let (dv, _) = literal(
        "(gchange (group (fun a b -> merge a b) (fun a -> negate a) bag{}) bag{5})",
        &frontend::types::Type::delta(d.input_type()),
        0,
    )
    .expect("the change");
    assert_eq!(d.update(&dv).expect("applies"), Step::Recomputed);
    assert_eq!(d.output().to_string(), "8");
}

#[test]
fn the_state_does_not_grow_under_a_long_stream_of_changes() {
    // Documents come and go: each new key's bag is copied into the state, and dropped from the
    // map when its multiplicities return to zero. Without compaction those bags would pile up.
    let src = "def hist (docs : Map Int (Bag Int)) : Map Int Int =\n  \
               foldBag (mapGroup intGroup) (fun w -> singletonMap w 1) (foldMap bagGroup bagGroup (fun _ doc -> doc) docs)\n";
    let mut d = driver(src, "hist", "map{0 -> bag{1, 2, 3}}");
    let start = d.state_size();
    let mut most = start;
    for k in 1..6000i64 {
        let add = change(&d, &format!("gchange (mapGroup bagGroup) map{{{k} -> bag{{{}, 7}}}}", k % 50));
        d.update(&add).expect("adds");
        let remove = change(&d, &format!("gchange (mapGroup bagGroup) map{{{k} -> bag{{{} # -1, 7 # -1}}}}", k % 50));
        d.update(&remove).expect("removes");
        let now = d.state_size();
        most = StateSize {
            arena_bytes: most.arena_bytes.max(now.arena_bytes),
            collections: most.collections.max(now.collections),
            entries: most.entries.max(now.entries),
        };
    }
    assert_eq!(d.input().to_string(), "map{0 -> bag{1, 2, 3}}");
    assert_eq!(d.output().to_string(), "map{1 -> 1, 2 -> 1, 3 -> 1}");
    assert_eq!(d.output().to_string(), d.recompute().expect("recomputes").to_string());
    // 6 000 documents came and went (6 000 dropped bags without compaction); the state stayed
    // within the compaction bound: garbage at most what is live plus 1 024 collections.
    assert!(most.collections < start.collections + 1040, "{most:?} from {start:?}");
    assert!(most.entries < start.entries + 2 * 1040, "{most:?} from {start:?}");
    d.compact();
    assert_eq!(d.state_size(), start, "after compaction the state is what it was");
    assert_eq!(d.last_change().map(|c| c.to_string()).as_deref(), Some("gchange map{7 -> -1, 49 -> -1}"));
}

#[test]
fn replaced_values_are_reclaimed() {
    // Each `replace` copies a new array into the state arena; the old ones are garbage.
    let src = "def total (xs : Array Int) : Int = fold (fun s x -> s + x) 0 xs\n";
    let mut d = driver(src, "total", "build 1000 (fun i -> i)");
    let start = d.state_size();
    let mut most = 0;
    for r in 0..1000i64 {
        let dv = change(&d, &format!("replace (build 1000 (fun i -> i + {r}))"));
        assert_eq!(d.update(&dv).expect("applies"), Step::Recomputed);
        most = most.max(d.state_size().arena_bytes);
    }
    assert_eq!(d.output().to_string(), (0..1000i64).map(|i| i + 999).sum::<i64>().to_string());
    // About 8 KB per replaced array, 8 MB in all without compaction.
    // Compaction keeps garbage within what is live plus 1 MiB (and the ends of arena chunks).
    assert!(most <= 2 * start.arena_bytes + (1 << 20) + 64 * 1024, "{most} bytes from {start:?}");
}

#[test]
fn the_last_change_survives_a_failing_update_and_refers_to_no_updated_state() {
    // `id` on a bag: a replace of the whole input is recomputed; a gchange gives the input's
    // change back, which the commit must not see change under it.
    let src = "def keep (b : Bag Int) : Bag Int = b\n";
    let mut d = driver(src, "keep", "bag{1}");
    d.update(&change(&d, "gchange bagGroup bag{2}")).expect("applies");
    assert_eq!(d.last_change().map(|c| c.to_string()).as_deref(), Some("gchange bag{2}"));
    d.update(&change(&d, "gchange bagGroup bag{3}")).expect("applies");
    assert_eq!(d.output().to_string(), "bag{1, 2, 3}");
    assert_eq!(d.last_change().map(|c| c.to_string()).as_deref(), Some("gchange bag{3}"));
    let mut s = driver(SRC, "safe", "bag{1, 2, 5}");
    s.update(&change(&s, "gchange bagGroup bag{4}")).expect("applies");
    assert!(s.update(&change(&s, "gchange bagGroup bag{0}")).is_err());
    assert_eq!(s.last_change().map(|c| c.to_string()).as_deref(), Some("gchange map{4 -> 25}"));
}

/// A change built entry by entry (`GroupDelta`, no `Value`) does what the same change as a value
/// does: same output, same last change, same input; paths are checked against the input's type;
/// a failing one leaves the state as it was.
#[test]
fn group_deltas_agree_with_the_same_changes_as_values() {
    use runtime::value::Key;
    let int = |n: i64| Key::Int(n);
    let src = "\
def histogram (input : Map Int (Bag Int)) : Map Int Int =
  foldMap bagGroup (mapGroup intGroup) (fun _ doc -> foldBag (mapGroup intGroup) (fun w -> singletonMap w 1) doc) input
def total (p : Bag Int * Map Int Real) : Real =
  let (b, m) = p in toReal (foldBag intGroup (fun x -> x) b) + foldMap realGroup realGroup (fun k v -> v) m
def nested (m : Map Int (Map Int Int * Bag Int)) : Map Int Int =
  foldMap (pairGroup (mapGroup intGroup) bagGroup) (mapGroup intGroup) (fun k p -> let (a, b) = p in foldMap intGroup (mapGroup intGroup) (fun j n -> singletonMap j (n * 2)) a) m
def arrays (xs : Array Int) : Int = len xs
";
    type Entry = (Vec<Key>, Result<i64, f64>);
    let cases: Vec<(&str, &str, Vec<Entry>, &str)> = vec![
        (
            "histogram",
            "map{1 -> bag{1, 2}, 2 -> bag{2, 3 # 2}}",
            // (Document 1 again after another: the change's bag of a document is found again.)
            vec![
                (vec![int(1), int(2)], Ok(-1)),
                (vec![int(1), int(5)], Ok(1)),
                (vec![int(3), int(5)], Ok(2)),
                (vec![int(1), int(7)], Ok(1)),
                (vec![int(2), int(3)], Ok(-2)),
            ],
            "gchange (mapGroup bagGroup) map{1 -> bag{2 # -1, 5, 7}, 2 -> bag{3 # -2}, 3 -> bag{5 # 2}}",
        ),
        (
            "total",
            "(bag{1, 2}, map{1 -> 0.5})",
            vec![(vec![int(0), int(7)], Ok(3)), (vec![int(1), int(1)], Err(0.25)), (vec![int(1), int(4)], Err(2.0)), (vec![int(0), int(1)], Ok(-1))],
            "(gchange bagGroup bag{1 # -1, 7 # 3}, gchange (mapGroup realGroup) map{1 -> 0.25, 4 -> 2.0})",
        ),
        (
            "nested",
            "map{1 -> (map{1 -> 1}, bag{})}",
            vec![(vec![int(1), int(0), int(1)], Ok(2)), (vec![int(2), int(1), int(9)], Ok(1)), (vec![int(2), int(0), int(3)], Ok(-4))],
            "gchange (mapGroup (pairGroup (mapGroup intGroup) bagGroup)) map{1 -> (map{1 -> 2}, bag{}), 2 -> (map{3 -> -4}, bag{9})}",
        ),
    ];
    for (def, input, entries, as_value) in cases {
        let mut by_delta = driver(src, def, input);
        let mut by_value = driver(src, def, input);
        let mut delta = by_delta.delta().expect("a canonical group");
        for (path, amount) in &entries {
            match amount {
                Ok(n) => delta.add(path, *n),
                Err(x) => delta.add_real(path, *x),
            }
            .unwrap_or_else(|e| panic!("{def}: {path:?}: {e}"));
        }
        let step = by_delta.update_delta(&delta).expect("applies");
        assert_eq!(step, by_value.update(&change(&by_value, as_value)).expect("applies"), "{def}");
        assert_eq!(by_delta.output().to_string(), by_value.output().to_string(), "{def}: output");
        assert_eq!(by_delta.input().to_string(), by_value.input().to_string(), "{def}: input");
        assert_eq!(
            by_delta.last_change().map(|c| c.to_string()),
            by_value.last_change().map(|c| c.to_string()),
            "{def}: last change"
        );
        assert_eq!(by_delta.output().to_string(), by_delta.recompute().expect("recomputes").to_string(), "{def}");
        // Applied again and cleared (a nil change): still in step with recomputation.
        by_delta.update_delta(&delta).expect("applies");
        delta.clear();
        by_delta.update_delta(&delta).expect("a nil change");
        assert_eq!(by_delta.output().to_string(), by_delta.recompute().expect("recomputes").to_string(), "{def}");
        // Filled again after `clear` (nothing of the last change is reused): the same change.
        let before = by_delta.output().to_string();
        for (path, amount) in &entries {
            match amount {
                Ok(n) => delta.add(path, *n),
                Err(x) => delta.add_real(path, *x),
            }
            .unwrap_or_else(|e| panic!("{def}: {path:?}: {e}"));
        }
        by_delta.update_delta(&delta).expect("applies");
        // (`by_delta` has applied the change three times now, `by_value` once.)
        by_value.update(&change(&by_value, as_value)).expect("applies");
        by_value.update(&change(&by_value, as_value)).expect("applies");
        assert_ne!(by_delta.output().to_string(), before, "{def}: the change did something");
        assert_eq!(by_delta.output().to_string(), by_value.output().to_string(), "{def}: output after clear");
        assert_eq!(by_delta.input().to_string(), by_value.input().to_string(), "{def}: input after clear");
    }
    let mut h = driver(src, "histogram", "map{1 -> bag{1}}");
    let mut delta = h.delta().expect("a canonical group");
    // Paths that do not fit the input's type are refused when added.
    for (path, amount) in [
        (vec![int(1)], Ok(1)),
        (vec![int(1), int(2), int(3)], Ok(1)),
        (vec![Key::Bool(true), int(2)], Ok(1)),
        (vec![int(1), int(2)], Err(1.0)),
    ] {
        let r = match amount {
            Ok(n) => delta.add(&path, n),
            Err(x) => delta.add_real(&path, x),
        };
        assert!(r.is_err(), "{path:?} was accepted");
    }
    assert!(delta.is_empty());
    // A multiplicity out of range fails as a whole and leaves the state as it was.
    delta.add(&[int(1), int(1)], i64::MAX).expect("a path");
    let (input, output) = (h.input().to_string(), h.output().to_string());
    assert!(h.update_delta(&delta).is_err());
    assert_eq!((h.input().to_string(), h.output().to_string()), (input, output));
    // A change is applied only by the driver it was built for; arrays have no canonical group.
    let other = driver(src, "histogram", "map{1 -> bag{1}}");
    assert!(other.delta().expect("a group").is_empty());
    let mut other = other;
    assert!(other.update_delta(&delta).is_err());
    assert!(driver(src, "arrays", "[1, 2]").delta().is_err());
}

/// The driver's fold fusion (`adjoint::incremental::fuse`, on the fast derivative only) keeps the
/// values: chains that fuse (each of the four derivative rules, `let`s and parameters
/// substituted or kept) and chains it must leave alone (a user's group) are updated by a
/// stream of changes, each step on the fast path and compared with recomputation; a fused
/// function keeps a division that may fail, so a change holding 0 fails as recomputation would.
#[test]
fn fused_fold_chains_agree_with_recomputation() {
    let src = "\
def ug = group (fun a b -> merge a b) (fun a -> negate a) bag{}
def ugi = group (fun a b -> a + b) (fun a -> 0 - a) 0
def twice (b : Bag Int) : Int = foldBag intGroup (fun x -> let y = x * 3 in y + y) (foldBag bagGroup (fun x -> singleton (x * 2)) b)
def double (b : Bag Int) : Int = foldBag intGroup (fun x -> x + x) (foldBag bagGroup (fun x -> singleton (x - 1)) b)
def dual1 (b : Bag Int) : Int = foldBag intGroup (fun x -> let y = toReal x * 3.0 in toInt ((dual (fun v -> y * v) (star 1.0)) 1.0)) (foldBag bagGroup (fun x -> singleton (x * 2)) b)
def swap (m : Map Int Int) : Map Int Int = foldMap intGroup (mapGroup intGroup) (fun k v -> singletonMap (k * 2) (v * 3)) (foldMap intGroup (mapGroup intGroup) (fun k v -> singletonMap (k + 1) v) m)
def keys (b : Bag Int) : Map Int Int = foldMap intGroup (mapGroup intGroup) (fun k v -> singletonMap (k * 3) (v * k)) (foldBag (mapGroup intGroup) (fun x -> singletonMap x 2) b)
def flat (m : Map Int (Bag Int)) : Int = foldBag intGroup (fun x -> x) (foldMap bagGroup bagGroup (fun k b -> b) m)
def firsts (b : Bag Int) : Map Int Int = foldBag (mapGroup intGroup) (fun (k, _, _) -> singletonMap k 1) (foldBag bagGroup (fun x -> singleton (x, 1, 100 / x)) b)
def ones (b : Bag Int) : Int = foldMap intGroup intGroup (fun _ v -> v) (foldBag (mapGroup intGroup) (fun x -> singletonMap (100 / x) 1) b)
def user (b : Bag Int) : Int = foldBag intGroup (fun x -> x) (foldBag ug (fun x -> singleton (x * 2)) b)
def useri (b : Bag Int) : Int = foldMap intGroup intGroup (fun k v -> k * v) (foldBag (mapGroup ugi) (fun x -> singletonMap x 1) b)
";
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut int = move |lo: i64, hi: i64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        lo + ((seed >> 33) % (hi - lo + 1) as u64) as i64
    };
    for (def, input) in [
        ("twice", "bag{1, 2}"),
        ("double", "bag{1, 2}"),
        ("dual1", "bag{1, 2}"),
        ("swap", "map{1 -> 2, 2 -> 3}"),
        ("keys", "bag{1, 2}"),
        ("flat", "map{1 -> bag{1, 2}}"),
        ("firsts", "bag{1, 2}"),
        ("ones", "bag{1, 2}"),
        ("user", "bag{1, 2}"),
        ("useri", "bag{1, 2}"),
    ] {
        let mut d = driver(src, def, input);
        for step in 0..20 {
            // Nonzero keys (the divisions), multiplicities that add and cancel.
            let mut n = [0i64; 4];
            for (i, w) in n.iter_mut().enumerate() {
                *w = if i % 2 == 0 { [-3, -2, -1, 1, 2, 3][int(0, 5) as usize] } else { int(-2, 2) };
            }
            let text = match def {
                "swap" => format!("gchange (mapGroup intGroup) map{{{} -> {}, {} -> {}}}", n[0], n[1], n[2] + 10, n[3]),
                "flat" => format!("gchange (mapGroup bagGroup) map{{{} -> bag{{{} # {}}}}}", n[0], n[2], n[1]),
                _ => format!("gchange bagGroup bag{{{} # {}, {} # {}}}", n[0], n[1], n[2] + 10, n[3]),
            };
            let step_kind = d.update(&change(&d, &text)).unwrap_or_else(|e| panic!("{def}: {text}: {}", e.message));
            // A user's group is not fused (nor, here, on the fast path): only the values count.
            if !def.starts_with("user") {
                assert_eq!(step_kind, Step::Fast, "{def}: {text}");
            }
            let want = d.recompute().expect("recomputes").to_string();
            assert_eq!(d.output().to_string(), want, "{def}: step {step} `{text}` to input {}", d.input());
        }
        if matches!(def, "firsts" | "ones") {
            let (input, output) = (d.input().to_string(), d.output().to_string());
            let e = d.update(&change(&d, "gchange bagGroup bag{0}")).expect_err("100 / 0 in the fused function");
            assert_eq!(e.message, "division by zero", "{def}");
            assert_eq!((d.input().to_string(), d.output().to_string()), (input, output), "{def}");
        }
    }
}

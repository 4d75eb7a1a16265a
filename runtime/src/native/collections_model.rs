//! The native bags and maps against a model: random sequences of operations applied both to
//! [`Bag`]/[`Map`] and to a `BTreeMap` over signed key words (the language's key order), checked
//! after every step through every observer (`count`, `len`, `is_empty`, sorted entries, both record
//! writers, equality). Key widths 0–4 cover the inline (≤ 2 words) and boxed tables; keys mix
//! negative and positive words so the signed order and the radix sort's sign flip matter.
//!
//! Multiplicities stay small (far from `i64` overflow), so the model holds whether the runtime's
//! multiplicity arithmetic wraps or checks.

use std::collections::{BTreeMap, HashMap};

use super::collections::{cmp_keys, width, Bag, CollectionError, Map, SortScratch, Words};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

type Model = BTreeMap<Vec<i64>, i64>;

fn words(k: &[i64]) -> Vec<u64> {
    k.iter().map(|w| *w as u64).collect()
}

fn signed(k: &[u64]) -> Vec<i64> {
    k.iter().map(|w| *w as i64).collect()
}

/// Every key of width `kw` with words in -2..=2.
fn universe(kw: usize) -> Vec<Vec<i64>> {
    let mut keys = vec![vec![]];
    for _ in 0..kw {
        keys = keys.into_iter().flat_map(|k| (-2..=2).map(move |w| [k.clone(), vec![w]].concat())).collect();
    }
    keys
}

fn model_add(m: &mut Model, k: &[i64], n: i64) {
    let e = m.entry(k.to_vec()).or_insert(0);
    *e += n;
    if *e == 0 {
        m.remove(k);
    }
}

/// A bag built from the model, inserting in reverse key order (another insertion history).
fn from_model(kw: usize, m: &Model) -> Bag {
    let mut b = Bag::new(kw);
    for (k, n) in m.iter().rev() {
        b.insert(&words(k), *n).unwrap();
    }
    b
}

/// Every observer of `b` agrees with `m`.
fn check(b: &Bag, m: &Model, kw: usize, keys: &[Vec<i64>], what: &str) {
    assert_eq!(b.key_words(), kw, "{what}");
    for k in keys {
        assert_eq!(b.count(&words(k)), m.get(k).copied().unwrap_or(0), "{what}: count of {k:?}");
    }
    assert_eq!(b.len(), m.len(), "{what}: len");
    assert_eq!(b.is_empty(), m.is_empty(), "{what}: is_empty");
    let listed: Vec<(Vec<i64>, i64)> = b.sorted_entries().iter().map(|(k, n)| (signed(k), *n)).collect();
    let want: Vec<(Vec<i64>, i64)> = m.iter().map(|(k, n)| (k.clone(), *n)).collect();
    assert_eq!(listed, want, "{what}: sorted entries");
    let unordered: Model = b.entries().map(|(k, n)| (signed(k), n)).collect();
    assert_eq!(&unordered, m, "{what}: entries");
    let flat: Vec<u64> = want.iter().flat_map(|(k, n)| words(k).into_iter().chain([*n as u64])).collect();
    let mut out = vec![0u64; m.len() * (kw + 1)];
    b.write_sorted_records(&mut out, &mut SortScratch::default());
    assert_eq!(out, flat, "{what}: sorted records");
    let mut out = vec![0u64; m.len() * (kw + 1)];
    b.write_records(&mut out);
    let records: Model = if kw == 0 {
        out.iter().map(|n| (vec![], *n as i64)).collect()
    } else {
        out.chunks_exact(kw + 1).map(|r| (signed(&r[..kw]), r[kw] as i64)).collect()
    };
    assert_eq!(&records, m, "{what}: records");
    assert_eq!(*b, from_model(kw, m), "{what}: equality with the same bag built another way");
    if let Some((k, n)) = m.iter().next() {
        let mut other = m.clone();
        other.insert(k.clone(), n + 1);
        assert_ne!(*b, from_model(kw, &other), "{what}: a bag differing in one multiplicity");
    }
}

#[test]
fn bags_agree_with_a_model_through_random_operations() {
    let mut rng = Rng(7);
    for kw in 0..=4 {
        let keys = universe(kw);
        let mut bags = [Bag::new(kw), Bag::new(kw), Bag::new(kw)];
        let mut models = [Model::new(), Model::new(), Model::new()];
        for step in 0..400 {
            let i = rng.int(0, 2) as usize;
            let j = rng.int(0, 2) as usize;
            let what = format!("width {kw}, step {step}");
            match rng.int(0, 9) {
                // Inserts, zero and negative multiplicities included, often onto an existing key.
                0..=4 => {
                    let k = keys[rng.int(0, keys.len() as i64 - 1) as usize].clone();
                    let n = rng.int(-3, 3);
                    bags[i].insert(&words(&k), n).unwrap();
                    model_add(&mut models[i], &k, n);
                }
                5 => {
                    let b = bags[i].merge(&bags[j]).unwrap();
                    let mut m = models[i].clone();
                    for (k, n) in &models[j] {
                        model_add(&mut m, k, *n);
                    }
                    bags[i] = b;
                    models[i] = m;
                }
                6 => {
                    let f = rng.int(-2, 2);
                    let src = bags[j].clone();
                    bags[i].add_scaled(&src, f).unwrap();
                    for (k, n) in models[j].clone() {
                        model_add(&mut models[i], &k, n * f);
                    }
                }
                7 => {
                    bags[i] = bags[i].negate().unwrap();
                    models[i] = models[i].iter().map(|(k, n)| (k.clone(), -n)).collect();
                }
                8 => {
                    let f = rng.int(-2, 2);
                    bags[i] = bags[i].scale(f).unwrap();
                    models[i] = models[i].iter().map(|(k, n)| (k.clone(), n * f)).filter(|(_, n)| *n != 0).collect();
                }
                _ => {
                    // A bag cancelled by its own negation is empty, and equal to a fresh one.
                    let z = bags[i].merge(&bags[i].negate().unwrap()).unwrap();
                    check(&z, &Model::new(), kw, &keys, &what);
                    assert_eq!(z, Bag::new(kw));
                    if rng.int(0, 3) == 0 {
                        bags[i].recycle(kw);
                        models[i].clear();
                    }
                }
            }
            // Keep multiplicities far from overflow.
            if models[i].values().any(|n| n.abs() > 1 << 40) {
                bags[i].recycle(kw);
                models[i].clear();
            }
            check(&bags[i], &models[i], kw, &keys, &what);
        }
    }
}

#[test]
fn bag_widths_must_match() {
    let mut a = Bag::new(2);
    let mismatch = |found| Err(CollectionError::WidthMismatch { expected: 2, found });
    assert_eq!(a.insert(&[1], 1), mismatch(1));
    assert_eq!(a.insert(&[1, 2, 3], 1), mismatch(3));
    assert_eq!(a.merge(&Bag::new(3)).map(|_| ()), mismatch(3));
    assert_eq!(a.add_scaled(&Bag::new(1), 1), mismatch(1));
    a.insert(&[1, 2], 5).unwrap();
    // A key of the wrong width is in no bag.
    assert_eq!(a.count(&[1]), 0);
    assert_eq!(a.count(&[1, 2, 0]), 0);
    assert_eq!(a.count(&[1, 2]), 5);
    let mut w = Bag::new(3);
    w.insert(&[1, 2, 3], 1).unwrap();
    assert_eq!(w.count(&[1, 2]), 0);
}

/// A map built from the model by `set`, in reverse key order (another insertion history).
fn map_from_model(kw: usize, vw: usize, m: &BTreeMap<Vec<i64>, Vec<u64>>) -> Map {
    let mut map = Map::new(kw, vw);
    for (k, v) in m.iter().rev() {
        map.set(&words(k), v).unwrap();
    }
    map
}

/// The same map built through `slot` (values bound to zeros, then written in place).
fn map_from_model_by_slots(kw: usize, vw: usize, m: &BTreeMap<Vec<i64>, Vec<u64>>) -> Map {
    let mut map = Map::new(kw, vw);
    for (k, v) in m {
        let (slot, new) = map.slot(&words(k)).unwrap();
        assert!(new && slot.iter().all(|w| *w == 0), "a new slot holds zeros");
        slot.copy_from_slice(v);
    }
    map
}

#[test]
fn maps_agree_with_a_model_through_random_operations() {
    let mut rng = Rng(11);
    for (kw, vw) in [(0, 1), (1, 1), (2, 3), (3, 2), (4, 0), (1, 3), (2, 2), (0, 0)] {
        let keys = universe(kw);
        let mut map = Map::new(kw, vw);
        let mut model: BTreeMap<Vec<i64>, Vec<u64>> = BTreeMap::new();
        let mut persistent = false;
        for step in 0..300 {
            let k = keys[rng.int(0, keys.len() as i64 - 1) as usize].clone();
            match rng.int(0, 6) {
                0..=3 => {
                    let v: Vec<u64> = (0..vw).map(|_| rng.int(-50, 50) as u64).collect();
                    map.set(&words(&k), &v).unwrap();
                    model.insert(k, v);
                }
                4 => {
                    map.remove(&words(&k));
                    model.remove(&k);
                }
                5 => {
                    // An update in place through `get_mut`.
                    let got = map.get_mut(&words(&k)).map(|v| {
                        v.iter_mut().for_each(|w| *w = w.wrapping_add(7));
                        v.len()
                    });
                    let want = model.get_mut(&k).map(|v| {
                        v.iter_mut().for_each(|w| *w = w.wrapping_add(7));
                        v.len()
                    });
                    assert_eq!(got, want, "get_mut {k:?}");
                }
                _ => {
                    if rng.int(0, 9) == 0 {
                        map.recycle(kw, vw);
                        model.clear();
                        persistent = false;
                    } else if rng.int(0, 9) == 0 {
                        map.set_persistent();
                        persistent = true;
                    }
                }
            }
            let what = format!("widths {kw}/{vw}, step {step}");
            assert_eq!((map.key_words(), map.value_words()), (kw, vw), "{what}");
            assert_eq!(map.len(), model.len(), "{what}: len");
            assert_eq!(map.is_empty(), model.is_empty(), "{what}: is_empty");
            assert_eq!(map.is_persistent(), persistent, "{what}: is_persistent");
            for k in &keys {
                assert_eq!(map.get(&words(k)), model.get(k).map(|v| &v[..]), "{what}: get {k:?}");
            }
            let listed: Vec<(Vec<i64>, Vec<u64>)> =
                map.sorted_entries().iter().map(|(k, v)| (signed(k), v.to_vec())).collect();
            let want: Vec<(Vec<i64>, Vec<u64>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(listed, want, "{what}: sorted entries");
            let mut out = vec![0u64; map.len() * (kw + vw)];
            map.write_sorted_records(&mut out, &mut SortScratch::default());
            let flat: Vec<u64> = want.iter().flat_map(|(k, v)| words(k).into_iter().chain(v.iter().copied())).collect();
            assert_eq!(out, flat, "{what}: sorted records");
            assert!(map.capacity() >= map.len(), "{what}: capacity");
            // Equality: the same bindings however the map was built, whatever the widths' table.
            let same = map_from_model(kw, vw, &model);
            assert!(map == same && same == map_from_model_by_slots(kw, vw, &model), "{what}: equality");
            if let Some((k, v)) = model.iter().next() {
                let mut other = model.clone();
                if vw > 0 {
                    other.insert(k.clone(), v.iter().map(|w| w ^ 1).collect());
                } else {
                    other.remove(&k.clone());
                }
                assert!(map != map_from_model(kw, vw, &other), "{what}: a map differing in one binding");
            }
            for (kw2, vw2) in [(kw + 1, vw), (kw, vw + 1)] {
                if model.is_empty() {
                    assert!(map != Map::new(kw2, vw2), "{what}: empty maps of other widths differ");
                }
            }
        }
    }
    let mut m = Map::new(2, 1);
    assert_eq!(m.set(&[1], &[1]), Err(CollectionError::WidthMismatch { expected: 2, found: 1 }));
    assert_eq!(m.set(&[1, 2], &[1, 2]), Err(CollectionError::WidthMismatch { expected: 1, found: 2 }));
    assert!(m.is_empty());
}

#[test]
fn keys_order_as_signed_words_then_length() {
    let mut rng = Rng(3);
    for _ in 0..2000 {
        let a: Vec<i64> = (0..rng.int(0, 3)).map(|_| rng.int(-3, 3)).collect();
        let b: Vec<i64> = (0..rng.int(0, 3)).map(|_| rng.int(-3, 3)).collect();
        // Vec<i64>'s order is lexicographic over signed words, a prefix first.
        assert_eq!(cmp_keys(&words(&a), &words(&b)), a.cmp(&b), "{a:?} vs {b:?}");
    }
    assert_eq!(cmp_keys(&[i64::MIN as u64], &[i64::MAX as u64]), std::cmp::Ordering::Less);
}

#[test]
fn widths_are_bounded() {
    assert_eq!(width(0), Ok(0));
    assert_eq!(width(3), Ok(3));
    assert_eq!(width(1 << 16), Ok(1 << 16));
    assert_eq!(width((1 << 16) + 1), Err(CollectionError::BadWidth((1 << 16) + 1)));
    assert_eq!(width(-1), Err(CollectionError::BadWidth(-1)));
    assert_eq!(width(i64::MIN), Err(CollectionError::BadWidth(i64::MIN)));
}

#[test]
fn words_behave_as_their_slices() {
    let mut table: HashMap<Words, usize> = HashMap::new();
    let keys: Vec<Vec<u64>> = vec![vec![], vec![1], vec![1, 0], vec![0, 1], vec![1, 2, 3], vec![1, 2, 3, 4]];
    for (i, k) in keys.iter().enumerate() {
        let mut w = Words::new(k);
        assert_eq!(w.as_slice(), &k[..]);
        assert_eq!(w.as_mut_slice(), &k[..]);
        assert_eq!(format!("{w:?}"), format!("{k:?}"));
        table.insert(w, i);
    }
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(table.get(&Words::new(k)), Some(&i), "lookup of {k:?}");
        assert_eq!(Words::new(k), Words::new(k));
    }
    assert_ne!(Words::new(&[1, 0]), Words::new(&[1]));
    let mut w = Words::new(&[5, 6, 7]);
    w.as_mut_slice()[1] = 9;
    assert_eq!(w.as_slice(), &[5, 9, 7]);
    let mut w = Words::new(&[5, 6]);
    w.as_mut_slice()[0] = 1;
    assert_eq!(w.as_slice(), &[1, 6]);
}

#[test]
fn big_bags_sort_their_records_by_radix_in_signed_order() {
    let mut rng = Rng(5);
    for kw in [0usize, 1, 2] {
        let mut b = Bag::new(kw);
        let mut m = Model::new();
        for _ in 0..3000 {
            let k: Vec<i64> = (0..kw).map(|i| if i == 0 { rng.int(-600, 600) } else { rng.int(-3, 3) }).collect();
            let n = rng.int(-2, 2);
            b.insert(&words(&k), n).unwrap();
            model_add(&mut m, &k, n);
        }
        assert!(kw == 0 || m.len() > 128, "the radix path runs");
        check(&b, &m, kw, &[], &format!("a big bag of width {kw}"));
    }
}

#[test]
fn one_word_maps_agree_with_a_model_through_slots_records_and_recycling() {
    // Maps of one-word keys and values live in their own table (`Map::narrow`); the other widths
    // next to them must behave the same, and a map recycled to other widths must forget both.
    let mut rng = Rng(17);
    let mut map = Map::new(1, 1);
    let mut scratch = SortScratch::default();
    for (round, (kw, vw)) in [(1, 1), (1, 2), (1, 1), (2, 1), (1, 1)].into_iter().enumerate() {
        map.recycle(kw, vw);
        let mut model: BTreeMap<Vec<i64>, Vec<u64>> = BTreeMap::new();
        // Enough distinct keys, negative ones included, for the radix sort of the records.
        for step in 0..1500 {
            let k: Vec<i64> = (0..kw).map(|_| rng.int(-400, 400)).collect();
            match rng.int(0, 9) {
                0..=5 => {
                    // `slot`: bound to zero words first when absent, then updated in place.
                    let (v, new) = map.slot(&words(&k)).unwrap();
                    assert_eq!(new, !model.contains_key(&k), "slot {k:?} new");
                    let want = model.entry(k.clone()).or_insert_with(|| vec![0; vw]);
                    assert_eq!(v, &want[..], "slot {k:?} value");
                    let d = rng.int(-9, 9) as u64;
                    v.iter_mut().for_each(|w| *w = w.wrapping_add(d));
                    want.iter_mut().for_each(|w| *w = w.wrapping_add(d));
                }
                6 => {
                    map.remove(&words(&k));
                    model.remove(&k);
                }
                7 => {
                    let v: Vec<u64> = (0..vw).map(|_| rng.int(-50, 50) as u64).collect();
                    map.set(&words(&k), &v).unwrap();
                    model.insert(k, v);
                }
                _ => {
                    let got = map.get_mut(&words(&k)).map(|v| v.to_vec());
                    assert_eq!(got, model.get(&k).cloned(), "get_mut {k:?}");
                }
            }
            if step % 500 == 499 {
                let what = format!("round {round}, widths {kw}/{vw}, step {step}");
                assert_eq!(map.len(), model.len(), "{what}: len");
                assert!(model.len() > 128, "{what}: the radix path runs");
                let mut out = vec![0u64; map.len() * (kw + vw)];
                map.write_sorted_records(&mut out, &mut scratch);
                let want: Vec<u64> =
                    model.iter().flat_map(|(k, v)| words(k).into_iter().chain(v.iter().copied())).collect();
                assert_eq!(out, want, "{what}: sorted records");
                let mut listed: Vec<(Vec<i64>, Vec<u64>)> =
                    map.entries().map(|(k, v)| (signed(k), v.to_vec())).collect();
                listed.sort();
                let want: Vec<(Vec<i64>, Vec<u64>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                assert_eq!(listed, want, "{what}: entries");
                // `word_entries`: the same pairs for one-word keys and values, none for others.
                match map.word_entries() {
                    Some(pairs) => {
                        assert_eq!((kw, vw), (1, 1), "{what}: word entries of wider entries");
                        let mut pairs: Vec<(Vec<i64>, Vec<u64>)> =
                            pairs.map(|(k, v)| (vec![k as i64], vec![v])).collect();
                        pairs.sort();
                        assert_eq!(pairs, want, "{what}: word entries");
                    }
                    None => assert_ne!((kw, vw), (1, 1), "{what}: no word entries of one-word entries"),
                }
                assert_eq!(map.value_slots().count(), model.len(), "{what}: value slots");
                // A key of the wrong width is in no map.
                assert_eq!(map.get(&vec![0; kw + 1]), None, "{what}: a wider key");
                assert!(map.get_mut(&vec![0; kw + 1]).is_none(), "{what}: a wider key");
                assert!(map.slot(&vec![0; kw + 1]).is_err(), "{what}: a wider key");
            }
        }
    }
}

#[test]
fn int_maps_add_in_place_as_the_model_adds() {
    // `Map::add_ints` (the driver's commit of a `mapGroup intGroup` change): one-word keys take
    // the narrow table's path, wider keys the general one; sums wrap, zero sums unbind.
    let mut rng = Rng(23);
    for kw in [1usize, 2, 3] {
        for round in 0..40 {
            let mut pair: Vec<(Map, BTreeMap<Vec<i64>, u64>)> = Vec::new();
            for _ in 0..2 {
                let mut map = Map::new(kw, 1);
                let mut model = BTreeMap::new();
                for _ in 0..rng.int(0, 60) {
                    let k: Vec<i64> = (0..kw).map(|_| rng.int(-6, 6)).collect();
                    // Values near the ends of Int's range too, so sums wrap.
                    let v = match rng.int(0, 4) {
                        0 => i64::MAX - rng.int(0, 2),
                        1 => i64::MIN + rng.int(0, 2),
                        _ => rng.int(-3, 3),
                    } as u64;
                    if v == 0 {
                        continue;
                    }
                    map.set(&words(&k), &[v]).unwrap();
                    model.insert(k, v);
                }
                pair.push((map, model));
            }
            let (src, src_model) = pair.pop().unwrap();
            let (mut dst, mut want) = pair.pop().unwrap();
            // Cancel some keys exactly.
            for (k, v) in src_model.iter().filter(|_| rng.int(0, 3) == 0) {
                dst.set(&words(k), &[v.wrapping_neg()]).unwrap();
                want.insert(k.clone(), v.wrapping_neg());
            }
            for (k, v) in &src_model {
                let n = want.get(k).copied().unwrap_or(0).wrapping_add(*v);
                if n == 0 {
                    want.remove(k);
                } else {
                    want.insert(k.clone(), n);
                }
            }
            // Entry by entry (`add_int`, what a fold's keyed addition does) gives the same map.
            let mut by_key = dst.clone();
            for (k, v) in &src_model {
                by_key.add_int(&words(k), *v).unwrap();
            }
            let got: BTreeMap<Vec<i64>, u64> = by_key.entries().map(|(k, v)| (signed(k), v[0])).collect();
            assert_eq!(got, want, "width {kw}, round {round}: add_int");
            dst.add_ints(&src).unwrap();
            let got: BTreeMap<Vec<i64>, u64> = dst.entries().map(|(k, v)| (signed(k), v[0])).collect();
            assert_eq!(got, want, "width {kw}, round {round}");
            assert_eq!(dst.len(), want.len(), "width {kw}, round {round}: len");
        }
        // Records of an empty and a one-key map (the one-word table's short path for these).
        let mut one = Map::new(kw, 1);
        let mut out = vec![9u64; kw + 1];
        one.write_sorted_records(&mut out[..0], &mut SortScratch::default());
        let k: Vec<u64> = (0..kw).map(|i| (i as i64 - 1) as u64).collect();
        one.set(&k, &[5]).unwrap();
        one.write_sorted_records(&mut out, &mut SortScratch::default());
        assert_eq!(out, [k.clone(), vec![5]].concat(), "width {kw}: one record");
        // Widths must agree; the error names the width found (the key's, else the value's).
        let mismatch = |found| Err(CollectionError::WidthMismatch { expected: kw, found });
        assert_eq!(Map::new(kw, 1).add_ints(&Map::new(kw + 1, 1)), mismatch(kw + 1));
        assert_eq!(Map::new(kw, 1).add_ints(&Map::new(kw, 2)), mismatch(2));
        assert!(Map::new(kw, 2).add_int(&vec![0; kw], 1).is_err());
        assert!(Map::new(kw, 1).add_int(&vec![0; kw + 1], 1).is_err());
    }
}

#[test]
fn bag_capacity_covers_the_entries_and_survives_recycling() {
    // As for maps: the room of whichever table the key width uses (one word: the narrow table;
    // two or none: short keys; wider: boxed keys), at least the entries, kept by `recycle`.
    for kw in [1, 2, 3] {
        let mut bag = Bag::new(kw);
        assert_eq!(bag.capacity(), 0, "width {kw}: a new bag has no table");
        for i in 0..200 {
            bag.insert(&vec![i as u64; kw], 1).unwrap();
        }
        let room = bag.capacity();
        assert!((200..=512).contains(&room), "width {kw}: capacity {room}");
        bag.recycle(kw);
        assert!(bag.is_empty());
        assert_eq!(bag.capacity(), room, "width {kw}: recycling keeps the table");
    }
}

#[test]
fn map_capacity_covers_the_entries_and_survives_recycling() {
    // `capacity` decides which emptied maps a call context keeps (`reset_keeping_small`): it is
    // the room of the table the widths use, at least the entries, and kept by `recycle`.
    for (kw, vw) in [(1, 1), (2, 3), (3, 1)] {
        let mut map = Map::new(kw, vw);
        assert_eq!(map.capacity(), 0, "{kw}/{vw}: a new map has no table");
        for i in 0..200 {
            map.set(&vec![i as u64; kw], &vec![1; vw]).unwrap();
        }
        let room = map.capacity();
        // A hash table grows by doubling: room for at least 200, at most twice 256.
        assert!((200..=512).contains(&room), "{kw}/{vw}: capacity {room}");
        map.recycle(kw, vw);
        assert!(map.is_empty());
        assert_eq!(map.capacity(), room, "{kw}/{vw}: recycling keeps the table");
    }
}

#[test]
fn one_word_maps_cross_between_inline_entries_and_a_table() {
    // A map of one-word keys and values keeps its first few entries inline and makes a table when
    // they overflow; emptied, it goes back to inline entries. Seven keys keep the map around that
    // size, so every operation runs on both sides of the boundary, and every observer is checked
    // after each step.
    let mut rng = Rng(41);
    let keys: Vec<i64> = (-3..=3).collect();
    let mut map = Map::new(1, 1);
    let mut model: BTreeMap<Vec<i64>, Vec<u64>> = BTreeMap::new();
    let mut scratch = SortScratch::default();
    let mut sizes = std::collections::BTreeSet::new();
    for step in 0..3000 {
        let k = keys[rng.int(0, keys.len() as i64 - 1) as usize];
        let d = rng.int(-2, 2) as u64;
        match rng.int(0, 9) {
            0 | 1 => {
                let (v, new) = map.slot(&[k as u64]).unwrap();
                assert_eq!(new, !model.contains_key(&vec![k]), "step {step}: slot {k} new");
                v[0] = v[0].wrapping_add(d);
                let want = model.entry(vec![k]).or_insert_with(|| vec![0]);
                want[0] = want[0].wrapping_add(d);
            }
            2 => {
                map.set(&[k as u64], &[d]).unwrap();
                model.insert(vec![k], vec![d]);
            }
            3 | 4 => {
                map.remove(&[k as u64]);
                model.remove(&vec![k]);
            }
            5 => {
                if let Some(v) = map.get_mut(&[k as u64]) {
                    v[0] = v[0].wrapping_add(d);
                }
                if let Some(v) = model.get_mut(&vec![k]) {
                    v[0] = v[0].wrapping_add(d);
                }
            }
            6 | 7 => {
                map.add_int(&[k as u64], d).unwrap();
                let sum = model.get(&vec![k]).map_or(0, |v| v[0]).wrapping_add(d);
                if sum == 0 {
                    model.remove(&vec![k]);
                } else {
                    model.insert(vec![k], vec![sum]);
                }
            }
            8 => {
                // `add_ints` from a map of a few entries (inline) or more (a table).
                let mut src = Map::new(1, 1);
                for _ in 0..rng.int(0, 7) {
                    let k = keys[rng.int(0, keys.len() as i64 - 1) as usize];
                    let v = rng.int(-2, 2) as u64;
                    src.add_int(&[k as u64], v).unwrap();
                }
                for (k, v) in src.entries() {
                    let sum = model.get(&signed(k)).map_or(0, |w| w[0]).wrapping_add(v[0]);
                    if sum == 0 {
                        model.remove(&signed(k));
                    } else {
                        model.insert(signed(k), vec![sum]);
                    }
                }
                map.add_ints(&src).unwrap();
            }
            _ => {
                if rng.int(0, 4) == 0 {
                    map.recycle(1, 1);
                    model.clear();
                }
            }
        }
        let what = format!("step {step}");
        sizes.insert(model.len());
        assert_eq!(map.len(), model.len(), "{what}: len");
        assert!(map.capacity() >= map.len(), "{what}: capacity");
        for k in &keys {
            assert_eq!(map.get(&[*k as u64]), model.get(&vec![*k]).map(|v| &v[..]), "{what}: get {k}");
        }
        let mut listed: Vec<(Vec<i64>, Vec<u64>)> = map.entries().map(|(k, v)| (signed(k), v.to_vec())).collect();
        listed.sort();
        let want: Vec<(Vec<i64>, Vec<u64>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(listed, want, "{what}: entries");
        let mut pairs: Vec<(Vec<i64>, Vec<u64>)> =
            map.word_entries().expect("one-word entries").map(|(k, v)| (vec![k as i64], vec![v])).collect();
        pairs.sort();
        assert_eq!(pairs, want, "{what}: word entries");
        let mut out = vec![0u64; 2 * map.len()];
        map.write_sorted_records(&mut out, &mut scratch);
        let flat: Vec<u64> = model.iter().flat_map(|(k, v)| words(k).into_iter().chain(v.iter().copied())).collect();
        assert_eq!(out, flat, "{what}: sorted records");
        assert_eq!(map.value_slots().count(), model.len(), "{what}: value slots");
        assert_eq!(map, map_from_model(1, 1, &model), "{what}: equal to the map built by `set`");
        assert_eq!(map, map_from_model_by_slots(1, 1, &model), "{what}: equal to the map built by `slot`");
        if let Some((k, v)) = model.iter().next() {
            let mut other = model.clone();
            other.insert(k.clone(), vec![v[0].wrapping_add(1)]);
            assert_ne!(map, map_from_model(1, 1, &other), "{what}: a map differing in one value");
        }
    }
    assert!((0..=7).all(|n| sizes.contains(&n)), "every size from empty to every key was seen: {sizes:?}");
}

/// The entry arrays compiled code folds over (`nabla_bag_entries`, sorted, and its unordered
/// twin) are cached on the bag until it changes: a change, recycling and
/// `forget_cached_entries` drop both. A persistent bag (a driver's state, read from contexts
/// reset after each update) caches neither, until it is recycled.
#[test]
fn entry_array_caches_last_until_the_bag_changes() {
    // Stand-ins for arena arrays: a bag keeps their addresses and never reads them.
    let (mut sorted, mut unordered) = ([0u64; 2], [0u64; 2]);
    let (s, u) = (sorted.as_mut_ptr() as *mut u8, unordered.as_mut_ptr() as *mut u8);
    let cached = |b: &Bag| (b.cached_entries(), b.cached_unordered_entries());
    let cache = |b: &mut Bag| {
        b.cache_entries(s);
        b.cache_unordered_entries(u);
        (b.cached_entries(), b.cached_unordered_entries())
    };
    for kw in 0..=3 {
        let key = vec![7u64; kw];
        let mut one = Bag::new(kw);
        one.insert(&key, 1).unwrap();
        let mut b = Bag::new(kw);
        assert_eq!(cached(&b), (None, None), "width {kw}: a new bag");
        assert_eq!(cache(&mut b), (Some(s), Some(u)), "width {kw}");
        b.insert(&key, 0).unwrap();
        b.add_scaled(&Bag::new(kw), 3).unwrap();
        b.add_scaled(&one, 0).unwrap();
        assert_eq!(cached(&b), (Some(s), Some(u)), "width {kw}: nothing changed");
        b.insert(&key, 2).unwrap();
        assert_eq!(cached(&b), (None, None), "width {kw}: an insert");
        cache(&mut b);
        b.add_scaled(&one, -1).unwrap();
        assert_eq!(cached(&b), (None, None), "width {kw}: an addition");
        cache(&mut b);
        b.forget_cached_entries();
        assert_eq!(cached(&b), (None, None), "width {kw}: forgotten");
        cache(&mut b);
        b.recycle(kw);
        assert_eq!(cached(&b), (None, None), "width {kw}: recycled");
        assert!(!b.is_persistent(), "width {kw}");
        cache(&mut b);
        b.set_persistent();
        assert!(b.is_persistent(), "width {kw}");
        assert_eq!(cached(&b), (None, None), "width {kw}: made persistent");
        assert_eq!(cache(&mut b), (None, None), "width {kw}: a persistent bag caches nothing");
        b.insert(&key, 1).unwrap();
        assert!(b.is_persistent(), "width {kw}: still persistent after a change");
        b.recycle(kw);
        assert!(!b.is_persistent(), "width {kw}: recycled");
        assert_eq!(cache(&mut b), (Some(s), Some(u)), "width {kw}: caches again");
    }
}

/// The messages of the errors a collection operation reports (internal ones name the widths).
#[test]
fn collection_errors_say_what_went_wrong() {
    let mismatch = CollectionError::WidthMismatch { expected: 2, found: 3 };
    assert_eq!(mismatch.to_string(), "internal error: collection width 3 where 2 was expected");
    assert_eq!(CollectionError::BadWidth(-1).to_string(), "internal error: bad collection width -1");
    assert_eq!(CollectionError::Overflow.to_string(), anf::ir::BAG_OVERFLOW_MESSAGE);
}

/// A key's hash depends on each of its words (inline and boxed), so distinct keys spread over a
/// table's buckets.
#[test]
fn words_hash_every_word() {
    use std::hash::{BuildHasher, BuildHasherDefault};
    let hash = |k: &[u64]| BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(Words::new(k));
    for k in [vec![1u64], vec![1, 2], vec![1, 2, 3]] {
        for i in 0..k.len() {
            let mut other = k.clone();
            other[i] += 1;
            assert_ne!(hash(&k), hash(&other), "{k:?} and {other:?}");
        }
    }
}

/// Bags and maps of one-word keys keep their first four entries inline and make a hash table
/// only for a fifth: without a table a collection's `capacity` is its entries (they are their own
/// room), so a call context keeps a small emptied collection whatever it held (`capacity`
/// decides which emptied collections it keeps); with one, it is the table's room. Every way of
/// adding an entry (insert and addition for bags; set, slot, keyed addition and addition for
/// maps) fills the inline entries first.
#[test]
fn one_word_collections_make_a_table_only_past_four_entries() {
    for n in 0..=5 {
        let keys = || [-2i64, 5, 0, 9, -7].into_iter().take(n);
        let (mut inserted, mut added, mut src) = (Bag::new(1), Bag::new(1), Bag::new(1));
        let (mut set, mut slots, mut sums, mut summed, mut src_map) =
            (Map::new(1, 1), Map::new(1, 1), Map::new(1, 1), Map::new(1, 1), Map::new(1, 1));
        for k in keys() {
            let k = [k as u64];
            inserted.insert(&k, 3).unwrap();
            src.insert(&k, -1).unwrap();
            set.set(&k, &[7]).unwrap();
            slots.slot(&k).unwrap().0[0] = 7;
            sums.add_int(&k, 7).unwrap();
            src_map.add_int(&k, 7).unwrap();
        }
        added.add_scaled(&src, -3).unwrap();
        summed.add_ints(&src_map).unwrap();
        assert_eq!(added, inserted, "{n} keys");
        for (what, len, room) in [
            ("inserted bag", inserted.len(), inserted.capacity()),
            ("added bag", added.len(), added.capacity()),
            ("set map", set.len(), set.capacity()),
            ("map of slots", slots.len(), slots.capacity()),
            ("map of keyed sums", sums.len(), sums.capacity()),
            ("added map", summed.len(), summed.capacity()),
        ] {
            assert_eq!(len, n, "{what}: {n} keys");
            if n <= 4 {
                assert_eq!(room, len, "{what}: {n} entries are inline (no table)");
            } else {
                assert!(room > len, "{what}: a table with room beyond the five entries it was made for ({room})");
            }
        }
        for m in [&set, &slots, &sums, &summed] {
            assert_eq!(m.entries().count(), n);
            assert!(keys().all(|k| m.get(&[k as u64]) == Some(&[7][..])), "{n} keys");
        }
    }
}

/// A one-word bag that made a table and then shrank keeps its table (three or four entries in
/// it): added into an empty bag, it leaves that bag inline, with no table of its own (a table is
/// reserved ahead only for a source of more than four entries).
#[test]
fn shrunk_tables_added_in_make_no_table() {
    for left in [3usize, 4] {
        let mut src = Bag::new(1);
        for k in 0..5u64 {
            src.insert(&[k], 2).unwrap();
        }
        for k in left as u64..5 {
            src.insert(&[k], -2).unwrap();
        }
        assert_eq!(src.len(), left);
        assert!(src.capacity() > left, "the source keeps its table");
        let mut dst = Bag::new(1);
        dst.add_scaled(&src, 1).unwrap();
        assert_eq!(dst, src, "{left} entries");
        assert_eq!(dst.capacity(), left, "{left} entries added in are inline (no table)");
    }
}

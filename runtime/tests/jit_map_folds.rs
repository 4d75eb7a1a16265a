//! Folds into `mapGroup`s of builtin groups: the compiled step is one runtime call
//! (`nabla_map_add_scaled`, no scaled copy), and a singleton map made only to be added is never
//! built (`anf::opt::maps` → `nabla_map_add_scaled_key`). Each program runs under the interpreter
//! and compiled with `anf::opt` on and off, which must agree on the value or on the error and its
//! span; cancellation to the inner group's zero must drop the key (Int, Real including `-0.0`,
//! Bag), a bag multiplicity out of range must fail where the interpreter fails, and groups known
//! only at run time (a parameter, a user's group at a map type, a map of maps) take the general
//! path.

mod program_gen;

use program_gen::both_engines;

const PROGRAMS: &[(&str, &str)] = &[
    ("int cancels", "def main = foldBag (mapGroup intGroup) (fun w -> singletonMap (w % 3) (w - 2)) bag{1, 2 # 3, 3 # -1, 4, 5 # 2, 7 # -2}"),
    ("int scaled to zero", "def main = foldBag (mapGroup intGroup) (fun w -> singletonMap w 0) bag{1, 2 # 3}"),
    ("int wraps", "def main = foldBag (mapGroup intGroup) (fun w -> singletonMap 1 4611686018427387904) bag{1 # 3, 2 # 1}"),
    ("real", "def main = foldBag (mapGroup realGroup) (fun w -> singletonMap (w % 2) (toReal w * 0.1)) bag{1, 2 # 3, 3 # -1, 4}"),
    ("real cancels", "def main = foldBag (mapGroup realGroup) (fun w -> singletonMap 0 (if w == 1 then 0.5 else -0.5)) bag{1, 2}"),
    ("real negative zero", "def main = foldBag (mapGroup realGroup) (fun w -> singletonMap w (0.0 - 0.0 * toReal w)) bag{1, 2}"),
    ("real nan", "def main = foldBag (mapGroup realGroup) (fun w -> singletonMap 1 (0.0 / 0.0)) bag{1, 2 # -1}"),
    ("bag", "def main = foldBag (mapGroup bagGroup) (fun (k, v) -> singletonMap k (singleton v)) bag{(1, 2), (1, 3) # 2, (2, 3) # 2, (1, 2) # -1}"),
    ("bag cancels", "def main = foldBag (mapGroup bagGroup) (fun (k, v) -> singletonMap k (singleton v)) bag{(1, 2), (2, 3), (1, 2) # -1}"),
    ("bag overflow", "def main = foldBag (mapGroup bagGroup) (fun w -> singletonMap 1 bag{7 # 4611686018427387904}) bag{1 # 2}"),
    ("bag overflow on add", "def main = foldBag (mapGroup bagGroup) (fun w -> singletonMap 1 bag{7 # 4611686018427387904}) bag{1, 2}"),
    ("two keys", "def main = foldBag (mapGroup intGroup) (fun w -> map{w -> 1, w + 1 -> -1}) bag{1, 2, 5 # 3}"),
    ("foldMap", "def main = foldMap intGroup (mapGroup intGroup) (fun k v -> singletonMap (k % 2) v) map{1 -> 3, 2 -> 4, 3 -> -3}"),
    ("foldMap bags", "def main = foldMap bagGroup (mapGroup bagGroup) (fun k b -> singletonMap (k % 2) b) map{1 -> bag{1, 2}, 2 -> bag{3}, 3 -> bag{1 # -1}}"),
    ("group parameter", "def f g (b : Bag Int) = foldBag (mapGroup g) (fun w -> singletonMap (w % 2) w) b\ndef main = (f intGroup bag{1, 2, 3 # -1}, f (group (fun a b -> a * b) (fun a -> a) 1) bag{1, 2})"),
    ("user group at a map type", "def main = foldBag (group (fun a b -> a) (fun a -> a) emptyMap) (fun w -> singletonMap w w) bag{1, 2}"),
    ("map of maps", "def main = foldBag (mapGroup (mapGroup intGroup)) (fun w -> singletonMap (w % 2) (singletonMap w 1)) bag{1, 2, 3, 1 # -1}"),
    ("key read back", "def main = let m = foldBag (mapGroup intGroup) (fun w -> singletonMap w (w * w)) bag{1, 2, 3 # 2} in (m, foldMap intGroup intGroup (fun k v -> k + v) m)"),
    ("histogram", "def main = foldMap bagGroup (mapGroup intGroup) (fun k b -> singletonMap k (foldBag intGroup (fun n -> n) b)) (foldBag (mapGroup bagGroup) (fun (k, v) -> singletonMap k (singleton v)) bag{(1, 1), (2, 1) # 3, (1, 1) # -1, (3, 1)})"),
    // A fold of folds into one `mapGroup intGroup` (the fused word count's change): the inner
    // maps are never built (`opt::maps`' accumulator fusion); counts cancel across documents.
    ("nested folds", "def main = foldMap bagGroup (mapGroup intGroup) (fun k b -> foldBag (mapGroup intGroup) (fun w -> singletonMap w 1) b) map{1 -> bag{1, 2 # 3}, 2 -> bag{2 # -3, 5}, 3 -> bag{7 # -1}, 4 -> bag{7}}"),
    // The outer fold scales each inner map by a multiplicity; sums wrap.
    ("nested folds scaled", "def main = foldBag (mapGroup intGroup) (fun (a, b) -> foldMap intGroup (mapGroup intGroup) (fun k v -> singletonMap (k + a) (v * b)) map{1 -> 2, 2 -> -1}) bag{(0, 1) # 2, (1, 3) # -1, (5, 4611686018427387904) # 2, (1, 1) # 3}"),
];

#[test]
fn map_group_folds_agree_between_engines() {
    program_gen::assert_engines_agree(PROGRAMS.iter().map(|(name, src)| (*name, src.to_string())));
}

/// The outcomes the programs above are written to reach (so the comparison compares something).
#[test]
fn map_group_folds_reach_their_cases() {
    let outcome = |src: &str| both_engines(src).expect("compiles").0;
    let value = |src: &str| outcome(src).expect("a value");
    assert_eq!(value(PROGRAMS[1].1), "map{}");
    assert_eq!(value(PROGRAMS[4].1), "map{}");
    assert_eq!(value(PROGRAMS[5].1), "map{}");
    assert_eq!(value(PROGRAMS[8].1), "map{2 -> bag{3}}");
    assert!(outcome(PROGRAMS[9].1).is_err());
    assert!(outcome(PROGRAMS[10].1).is_err());
    assert_eq!(value(PROGRAMS[12].1), "map{0 -> 4}");
    assert_eq!(value(PROGRAMS[18].1), "map{2 -> 3, 3 -> 1}");
    assert_eq!(value(PROGRAMS[19].1), "map{1 -> 1, 5 -> 1}");
}

/// A fold of folds into one `mapGroup intGroup` makes no map per inner fold: each inner fold's
/// keyed additions go into the accumulator directly.
#[test]
fn inner_int_maps_of_a_fold_of_folds_are_never_built() {
    for i in [19, 20] {
        let src = PROGRAMS[i].1;
        let text = frontend::with_big_stack(move || {
            let (_, mono) = runtime::prepare(src, "main").expect("checks");
            runtime::engine::ir_text(&mono, true).expect("lowers")
        });
        let calls = |name: &str| text.matches(&format!("call ${name}(")).count();
        // (Unfused, each inner map would be added into the accumulator by `nabla_map_add_scaled`.)
        assert_eq!(calls("nabla_map_add_scaled"), 0, "{}: {text}", PROGRAMS[i].0);
        assert!(calls("nabla_map_add_scaled_key") >= 1, "{}: {text}", PROGRAMS[i].0);
    }
}

/// The optimised IR of the word-count step: no scaled copy, no singleton map.
#[test]
fn singleton_maps_added_into_a_fold_are_never_built() {
    let src = PROGRAMS[18].1;
    let text = frontend::with_big_stack(move || {
        let (_, mono) = runtime::prepare(src, "main").expect("checks");
        runtime::engine::ir_text(&mono, true).expect("lowers")
    });
    let calls = |name: &str| text.matches(&format!("call ${name}(")).count();
    assert_eq!(calls("nabla_map_add_scaled_key"), 2, "{text}");
    assert_eq!(calls("nabla_map_add_scaled"), 0, "{text}");
    assert!(!text.contains("@group.scale") && !text.contains("@group.op_into"), "{text}");
}

/// A fold adding Ints into a `mapGroup intGroup` cannot tell the order of the bag's entries
/// (`anf::opt::order`): it skips the sort; into `mapGroup realGroup` (sums in key order) it keeps it.
#[test]
fn int_map_folds_skip_the_sort_and_real_ones_keep_it() {
    let text = |src: &'static str| {
        frontend::with_big_stack(move || {
            let (_, mono) = runtime::prepare(src, "main").expect("checks");
            runtime::engine::ir_text(&mono, true).expect("lowers")
        })
    };
    let calls = |text: &str, name: &str| text.matches(&format!("call ${name}(")).count();
    let int = text(PROGRAMS[0].1);
    assert_eq!(calls(&int, "nabla_map_add_scaled_key"), 1, "{int}");
    assert_eq!((calls(&int, "nabla_bag_entries_unordered"), calls(&int, "nabla_bag_entries")), (1, 0), "{int}");
    let real = text(PROGRAMS[3].1);
    assert_eq!(calls(&real, "nabla_map_add_scaled_key"), 1, "{real}");
    assert_eq!((calls(&real, "nabla_bag_entries_unordered"), calls(&real, "nabla_bag_entries")), (0, 1), "{real}");
}

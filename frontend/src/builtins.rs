//! Built-in names (docs/language.md §5, §6) with their type schemes.
//!
//! Signatures are written in the surface type syntax and parsed once; type variables are
//! numbered in order of appearance, and `classes` lists the constraints on them by name.

use crate::types::{Classes, Scheme};

macro_rules! builtins {
    ($( $variant:ident = $name:literal : $sig:literal $([$($var:literal : $cls:ident),*])? ; )*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Builtin { $($variant),* }

        impl Builtin {
            pub const ALL: &'static [Builtin] = &[$(Builtin::$variant),*];

            pub fn name(self) -> &'static str {
                match self { $(Builtin::$variant => $name),* }
            }

            /// The signature in surface syntax.
            pub fn signature(self) -> &'static str {
                match self { $(Builtin::$variant => $sig),* }
            }

            /// Classes of the signature's type variables, by name.
            pub fn var_classes(self) -> &'static [(&'static str, Classes)] {
                match self { $(Builtin::$variant => &[$($(($var, Classes::$cls)),*)?]),* }
            }
        }
    };
}

builtins! {
    // Real primitives with Jacobians (docs/language.md §5).
    Sin = "sin" : "Real -> Real";
    Cos = "cos" : "Real -> Real";
    Tan = "tan" : "Real -> Real";
    Exp = "exp" : "Real -> Real";
    Log = "log" : "Real -> Real";
    Sqrt = "sqrt" : "Real -> Real";
    Tanh = "tanh" : "Real -> Real";
    Sigmoid = "sigmoid" : "Real -> Real";
    Abs = "abs" : "'a -> 'a" ["a": NUM];
    Neg = "neg" : "'a -> 'a" ["a": NUM];
    Max = "max" : "'a -> 'a -> 'a" ["a": NUM];
    Min = "min" : "'a -> 'a -> 'a" ["a": NUM];
    ToReal = "toReal" : "Int -> Real";
    Floor = "floor" : "Real -> Real";
    Round = "round" : "Real -> Real";
    ToInt = "toInt" : "Real -> Int";
    // Arrays.
    Build = "build" : "Int -> (Int -> 'a) -> Array 'a";
    Len = "len" : "Array 'a -> Int";
    Map = "map" : "('a -> 'b) -> Array 'a -> Array 'b";
    ZipWith = "zipWith" : "('a -> 'b -> 'c) -> Array 'a -> Array 'b -> Array 'c";
    Fold = "fold" : "('b -> 'a -> 'b) -> 'b -> Array 'a -> 'b";
    Sum = "sum" : "Array 'a -> 'a" ["a": NUM];
    Dot = "dot" : "Array 'a -> Array 'a -> 'a" ["a": NUM];
    Iterate = "iterate" : "Int -> ('a -> 'a) -> 'a -> 'a";
    While = "while" : "('a -> Bool) -> ('a -> 'a) -> 'a -> 'a";
    // Duals and 1-forms.
    Star = "star" : "'a -> Dual 'a" ["a": FO];
    Unstar = "unstar" : "Dual 'a -> 'a" ["a": FO];
    Omega = "omega" : "'a -> Omega 'a" ["a": FO];
    Jac = "jac" : "('a -> 'b) -> 'a -> 'a -> 'b";
    Grad = "grad" : "('a -> Real) -> 'a -> 'a" ["a": FO];
    Vjp = "vjp" : "('a -> 'b) -> 'a -> 'b -> 'a" ["a": FO, "b": FO];
    Jacobian = "jacobian" : "(Array Real -> Array Real) -> Array Real -> Array (Array Real)";
    // Groups.
    IntGroup = "intGroup" : "Group Int";
    RealGroup = "realGroup" : "Group Real";
    BagGroup = "bagGroup" : "Group (Bag 'a)" ["a": KEY];
    MapGroup = "mapGroup" : "Group 'v -> Group (Map 'k 'v)" ["k": KEY];
    PairGroup = "pairGroup" : "Group 'a -> Group 'b -> Group ('a * 'b)";
    MkGroup = "group" : "('a -> 'a -> 'a) -> ('a -> 'a) -> 'a -> Group 'a";
    // Bags.
    EmptyBag = "emptyBag" : "Bag 'a" ["a": KEY];
    Singleton = "singleton" : "'a -> Bag 'a" ["a": KEY];
    Merge = "merge" : "Bag 'a -> Bag 'a -> Bag 'a" ["a": KEY];
    Negate = "negate" : "Bag 'a -> Bag 'a" ["a": KEY];
    FoldBag = "foldBag" : "Group 'b -> ('a -> 'b) -> Bag 'a -> 'b" ["a": KEY];
    MapBag = "mapBag" : "('a -> 'b) -> Bag 'a -> Bag 'b" ["a": KEY, "b": KEY];
    FilterBag = "filterBag" : "('a -> Bool) -> Bag 'a -> Bag 'a" ["a": KEY];
    FlatMapBag = "flatMapBag" : "('a -> Bag 'b) -> Bag 'a -> Bag 'b" ["a": KEY, "b": KEY];
    // Maps.
    EmptyMap = "emptyMap" : "Map 'k 'v" ["k": KEY];
    SingletonMap = "singletonMap" : "'k -> 'v -> Map 'k 'v" ["k": KEY];
    FoldMap = "foldMap" : "Group 'v -> Group 'b -> ('k -> 'v -> 'b) -> Map 'k 'v -> 'b" ["k": KEY];
    FoldMapGen = "foldMapGen" : "'b -> ('b -> 'b -> 'b) -> ('k -> 'v -> 'b) -> Map 'k 'v -> 'b" ["k": KEY];
    Lookup = "lookup" : "Group 'v -> 'k -> Map 'k 'v -> 'v" ["k": KEY];
    // Changes (ILC).
    Replace = "replace" : "'a -> Delta 'a" ["a": BASE];
    GChange = "gchange" : "Group 'a -> 'a -> Delta 'a" ["a": BASE];
    Nil = "nil" : "'a -> Delta 'a";
    // Internal: ILC derivative primitives (adjoint::incremental::table). Source programs cannot
    // name them (`from_name` skips them); Derive and the runtime make them. Keep this section last:
    // `is_internal` is `self >= NilFun`.
    NilFun = "nil'" : "('a -> 'b) -> 'a -> Delta 'a -> Delta 'b";
    NoBase = "_" : "'a";
    DMerge = "merge'" : "Bag 'a -> Delta (Bag 'a) -> Bag 'a -> Delta (Bag 'a) -> Delta (Bag 'a)" ["a": KEY];
    DNegate = "negate'" : "Bag 'a -> Delta (Bag 'a) -> Delta (Bag 'a)" ["a": KEY];
    DSingleton = "singleton'" : "'a -> Delta 'a -> Delta (Bag 'a)" ["a": KEY];
    DAdd = "add'" : "'a -> Delta 'a -> 'a -> Delta 'a -> Delta 'a" ["a": NUM];
    DSub = "sub'" : "'a -> Delta 'a -> 'a -> Delta 'a -> Delta 'a" ["a": NUM];
    DMul = "mul'" : "'a -> Delta 'a -> 'a -> Delta 'a -> Delta 'a" ["a": NUM];
    DNeg = "neg'" : "'a -> Delta 'a -> Delta 'a" ["a": NUM];
    DFoldBag = "foldBag'" : "Group 'b -> ('a -> 'b) -> Bag 'a -> Delta (Bag 'a) -> Delta 'b" ["a": KEY];
    DMapBag = "mapBag'" : "('a -> 'b) -> Bag 'a -> Delta (Bag 'a) -> Delta (Bag 'b)" ["a": KEY, "b": KEY];
    DFilterBag = "filterBag'" : "('a -> Bool) -> Bag 'a -> Delta (Bag 'a) -> Delta (Bag 'a)" ["a": KEY];
    DFlatMapBag = "flatMapBag'" : "('a -> Bag 'b) -> Bag 'a -> Delta (Bag 'a) -> Delta (Bag 'b)" ["a": KEY, "b": KEY];
    DSingletonMap = "singletonMap'" : "'k -> 'v -> Delta 'v -> Delta (Map 'k 'v)" ["k": KEY];
    DFoldMap = "foldMap'" : "Group 'v -> Group 'b -> ('k -> 'v -> 'b) -> Map 'k 'v -> Delta (Map 'k 'v) -> Delta 'b" ["k": KEY];
    DLookup = "lookup'" : "Group 'v -> 'k -> Map 'k 'v -> Delta (Map 'k 'v) -> Delta 'v" ["k": KEY];
    // Internal: compiled reverse mode's accumulators and tapes (adjoint::reverse). Each returns its
    // array argument updated in place: the transform only passes an array that nothing else uses.
    Zeros = "zeros'" : "Int -> Array Real";
    // `accAdd' A i v`: v added to A.[i] (a Real, or a tuple of Reals whose discrete components
    // are left as they are: the accumulator of an array of tuples).
    AccAdd = "accAdd'" : "Array 'a -> Int -> 'a -> Array 'a";
    AccAddAll = "accAddAll'" : "Array Real -> Real -> Array Real";
    AccAxpy = "accAxpy'" : "Array Real -> Real -> Array Real -> Array Real";
    TapeNew = "tape'" : "Int -> Array 'a";
    TapeSet = "tapeSet'" : "Array 'a -> Int -> 'a -> Array 'a";
    // `iterate` whose body allocates nothing: compiled without compaction (its carried arrays are
    // accumulators or tapes, updated in place, never rebuilt).
    RevIterate = "iterate'" : "Int -> ('a -> 'a) -> 'a -> 'a";
    // `ctCheck' n m shape idx`: a vjp's cotangent has the output's length (`n`, the cotangent's
    // `m`), else the error `vjp: the cotangent does not match…` at the path to the array (`shape`
    // its steps, `idx` the indices of its element steps: an Int, a tuple of them or `()`;
    // `anf::ir::cotangent_path`); with a negative `shape` (`anf::ir::pairing_shape`), a tangent
    // has the length of the dual vector it is paired with (`n` the vector's, `m` the tangent's).
    CtCheck = "ctCheck'" : "Int -> Int -> Int -> 'a -> Unit";
    // Accumulators of `Array (Array Real)` (rows of distinct accumulators, each updated in
    // place): `accAdd2' A i j v` adds v to A.[i].[j]; `accRow' A i s y` adds s·y to the row
    // A.[i]; `accRowAll' A i s` adds s to every element of A.[i].
    AccAdd2 = "accAdd2'" : "Array (Array Real) -> Int -> Int -> Real -> Array (Array Real)";
    AccRow = "accRow'" : "Array (Array Real) -> Int -> Real -> Array Real -> Array (Array Real)";
    AccRowAll = "accRowAll'" : "Array (Array Real) -> Int -> Real -> Array (Array Real)";
    // `accAt' A i f`: element i of A replaced by `f A.[i]` (bounds-checked). The transform passes
    // only a λ that updates the element's accumulators in place and returns them (the arrays it
    // holds are the same arrays), so compiled code stores back only the element's `f64` words:
    // the accumulator of a value nested deeper than `Array (Array Real)`, or of an array of
    // tuples holding arrays, is updated along a path of `accAt'`s.
    AccAt = "accAt'" : "Array 'a -> Int -> ('a -> 'a) -> Array 'a";
    // `interp' k args`: the site `k` that reverse mode does not compile, evaluated by the
    // reference interpreter at its free locals `args` (`anf::mono::Interpreted`).
    Interp = "interp'" : "Int -> 'a -> 'b";
}

impl Builtin {
    pub fn from_name(name: &str) -> Option<Builtin> {
        Builtin::ALL.iter().copied().find(|b| !b.is_internal() && b.name() == name)
    }

    /// Internal builtins (ILC's derivative primitives, reverse mode's accumulators) exist only in
    /// terms that passes make.
    pub fn is_internal(self) -> bool {
        self >= Builtin::NilFun
    }

    /// Reverse mode's internal accumulator and tape builtins (compiled, unlike ILC's).
    pub fn is_reverse_internal(self) -> bool {
        self >= Builtin::Zeros
    }

    /// The scheme of the builtin, parsed from its signature.
    pub fn scheme(self) -> Scheme {
        crate::parser::parse_builtin_signature(self.signature(), self.var_classes())
    }

    /// How many arguments the builtin takes before it computes (its arrows at top level).
    pub fn arity(self) -> usize {
        static ARITIES: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
        let table = ARITIES.get_or_init(|| {
            Builtin::ALL
                .iter()
                .map(|b| {
                    let mut t = b.scheme().ty;
                    let mut n = 0;
                    while let crate::types::Type::Fun(_, r) = t {
                        n += 1;
                        t = (*r).clone();
                    }
                    n
                })
                .collect()
        });
        table[self as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_signature_parses() {
        for b in Builtin::ALL {
            let s = b.scheme();
            assert!(!crate::types::TypePrinter::new().ty(&s.ty).is_empty(), "{}", b.name());
        }
        assert_eq!(Builtin::FoldBag.arity(), 3);
        assert_eq!(Builtin::IntGroup.arity(), 0);
    }
}

//! Builtins: constants, Real primitives, array primitives as native loops, bags and maps over the
//! runtime's collections, groups and changes. Each saturated builtin does what
//! `runtime::interp::builtins::call` does, in the same order, with the same errors.

use frontend::builtins::Builtin;
use frontend::types::Type;

use super::fuse::Src;
use super::groups::{GroupKind, Helper};
use super::value::{after_args, arg_type, flat};
use super::{Clo, LVal, LowerError, Lowerer, Site, R};
use crate::ir::{self, BinaryOp, Cmp, TrapCode, UnaryOp, Value};

/// Arrays longer than this are refused (the interpreter's `MAX_ARRAY_LEN`).
pub const MAX_ARRAY_LEN: i64 = 1 << 28;

/// The element type of a collection type.
fn elem(t: &Type) -> R<Type> {
    match t {
        Type::Array(a) | Type::Bag(a) | Type::Group(a) => Ok((**a).clone()),
        t => Err(LowerError::internal(format!("expected a collection type, found {t}"))),
    }
}

/// The key and value types of a map type.
fn map_parts(t: &Type) -> R<(Type, Type)> {
    match t {
        Type::Map(k, v) => Ok(((**k).clone(), (**v).clone())),
        t => Err(LowerError::internal(format!("expected a map type, found {t}"))),
    }
}

/// The size of one element of `Array t`, in bytes.
fn stride(t: &Type) -> u32 {
    8 * flat(t).len() as u32
}

impl Lowerer<'_> {
    /// A builtin used as a value: arity-0 builtins are constants, the others closures.
    pub(crate) fn builtin_value(&mut self, b: Builtin, ty: &Type) -> R<LVal> {
        Ok(match b {
            Builtin::IntGroup => LVal::Word(self.group_record(GroupKind::Int, &[])),
            Builtin::RealGroup => LVal::Word(self.group_record(GroupKind::Real, &[])),
            Builtin::BagGroup => LVal::Word(self.group_record(GroupKind::Bag, &[])),
            Builtin::EmptyBag => {
                let w = self.b().iconst(flat(&elem(ty)?).len() as i64);
                LVal::Word(self.ext1("nabla_bag_new", vec![w])?)
            }
            Builtin::EmptyMap => {
                let (k, v) = map_parts(ty)?;
                LVal::Word(self.map_new(flat(&k).len(), flat(&v).len())?)
            }
            Builtin::NoBase => self.no_base(ty)?,
            _ if b.arity() == 0 => return Err(LowerError::unsupported(frontend::Span::SYNTHETIC, b.name())),
            _ => LVal::Fun(Clo::Prim { b, ty: ty.clone(), args: Vec::new() }),
        })
    }

    /// A saturated builtin `b` of monomorphic type `ty`; failures are reported at `site`.
    pub(crate) fn builtin(&mut self, b: Builtin, ty: &Type, args: Vec<LVal>, site: Site) -> R<LVal> {
        use Builtin as B;
        let result = after_args(ty, b.arity())?;
        let w = |i: usize| args[i].word();
        let real1 = |l: &mut Self, name: &str| -> R<LVal> { Ok(LVal::Word(l.ext1(name, vec![args[0].word()?])?)) };
        let is_int = |i: usize| arg_type(ty, i).map(|t| t == Type::Int);
        Ok(match b {
            B::Sin => real1(self, "nabla_sin")?,
            B::Cos => real1(self, "nabla_cos")?,
            B::Tan => real1(self, "nabla_tan")?,
            B::Exp => real1(self, "nabla_exp")?,
            B::Log => real1(self, "nabla_log")?,
            B::Tanh => real1(self, "nabla_tanh")?,
            B::Sigmoid => real1(self, "nabla_sigmoid")?,
            B::Sqrt => LVal::Word(self.b().unary(UnaryOp::Fsqrt, w(0)?)),
            B::Abs => {
                let x = w(0)?;
                if is_int(0)? {
                    // wrapping_abs: MIN stays MIN.
                    let zero = self.b().iconst(0);
                    let neg = self.b().icmp(Cmp::Lt, x, zero);
                    let nx = self.b().unary(UnaryOp::Ineg, x);
                    LVal::Word(self.b().select(neg, nx, x))
                } else {
                    LVal::Word(self.b().unary(UnaryOp::Fabs, x))
                }
            }
            B::Neg => {
                let op = if is_int(0)? { UnaryOp::Ineg } else { UnaryOp::Fneg };
                LVal::Word(self.b().unary(op, w(0)?))
            }
            // Ties go to the first argument (docs/language.md §5): `if b > a { b } else { a }`.
            B::Max | B::Min => {
                let (x, y) = (w(0)?, w(1)?);
                let c = if b == B::Max { Cmp::Gt } else { Cmp::Lt };
                let better = if is_int(0)? { self.b().icmp(c, y, x) } else { self.b().fcmp(c, y, x) };
                LVal::Word(self.b().select(better, y, x))
            }
            B::ToReal => LVal::Word(self.b().unary(UnaryOp::Itof, w(0)?)),
            B::Floor => real1(self, "nabla_floor")?,
            B::Round => real1(self, "nabla_round")?,
            B::ToInt => LVal::Word(self.to_int(w(0)?, site)?),
            B::Build => self.build(&result, w(0)?, args[1].clone(), site)?,
            B::Len => LVal::Word(self.b().array_len(w(0)?)),
            B::Map => {
                let a = Src::Arr(w(1)?, elem(&arg_type(ty, 1)?)?);
                self.map_src(&result, args[0].clone(), &a, site)?
            }
            B::ZipWith => {
                let a = Src::Arr(w(1)?, elem(&arg_type(ty, 1)?)?);
                let c = Src::Arr(w(2)?, elem(&arg_type(ty, 2)?)?);
                self.zip_src(&result, args[0].clone(), &a, &c, site)?
            }
            B::Fold => {
                let a = Src::Arr(w(2)?, elem(&arg_type(ty, 2)?)?);
                self.fold_src(&result, args[0].clone(), args[1].clone(), &a, site)?
            }
            B::Sum => self.sum_src(&result, &Src::Arr(w(0)?, result.clone()))?,
            B::Dot => {
                self.dot_src(&result, &Src::Arr(w(0)?, result.clone()), &Src::Arr(w(1)?, result.clone()), site)?
            }
            B::Iterate => self.iterate(&result, w(0)?, args[1].clone(), args[2].clone(), site)?,
            B::While => self.while_(&result, args[0].clone(), args[1].clone(), args[2].clone(), site)?,
            B::RevIterate => {
                // Not compacted: the transform uses it only for bodies that allocate nothing.
                let n = w(0)?;
                let zero = self.b().iconst(0);
                let negative = self.b().icmp(Cmp::Lt, n, zero);
                self.fail_if(negative, TrapCode::IterateNegative, site, n, zero);
                let init = self.materialize(&args[2])?;
                let (f, t) = (args[1].clone(), result.clone());
                let out = self.counted_loop(n, init, &mut |l, _, acc| {
                    let v = Self::from_slice(&t, &acc)?;
                    let r = l.apply(f.clone(), vec![(v, site)])?;
                    l.materialize(&r)
                })?;
                Self::from_slice(&result, &out)?
            }
            B::IntGroup | B::RealGroup | B::BagGroup | B::EmptyBag | B::EmptyMap => self.builtin_value(b, ty)?,
            B::MapGroup => LVal::Word(self.group_record(GroupKind::Map, &[w(0)?])),
            B::PairGroup => LVal::Word(self.group_record(GroupKind::Pair, &[w(0)?, w(1)?])),
            B::MkGroup => {
                let mut words = self.materialize(&args[0])?;
                words.extend(self.materialize(&args[1])?);
                words.extend(self.materialize(&args[2])?);
                LVal::Word(self.group_record(GroupKind::User, &words))
            }
            B::Singleton => {
                let kw = flat(&arg_type(ty, 0)?).len();
                let width = self.b().iconst(kw as i64);
                let bag = self.ext1("nabla_bag_new", vec![width])?;
                let key = self.boxed_or_scratch(&args[0], kw)?;
                let one = self.b().iconst(1);
                self.bag_ext("nabla_bag_insert", vec![bag, key, one], site)?;
                LVal::Word(bag)
            }
            B::Merge => LVal::Word(self.bag_ext1("nabla_bag_merge", vec![w(0)?, w(1)?], site)?),
            B::Negate => LVal::Word(self.bag_ext1("nabla_bag_negate", vec![w(0)?], site)?),
            B::FoldBag => self.fold_bag(&arg_type(ty, 2)?, &result, w(0)?, args[1].clone(), w(2)?, site)?,
            B::MapBag => self.map_bag(&arg_type(ty, 1)?, &result, args[0].clone(), w(1)?, site)?,
            B::FilterBag => self.filter_bag(&arg_type(ty, 1)?, args[0].clone(), w(1)?, site)?,
            B::FlatMapBag => self.flat_map_bag(&arg_type(ty, 1)?, &result, args[0].clone(), w(1)?, site)?,
            B::SingletonMap => {
                let (kt, vt) = map_parts(&result)?;
                let (kw, vw) = (flat(&kt).len(), flat(&vt).len());
                let m = self.map_new(kw, vw)?;
                let k = self.boxed_or_scratch(&args[0], kw)?;
                let v = self.boxed_or_scratch(&args[1], vw)?;
                self.ext("nabla_map_set", vec![m, k, v])?;
                LVal::Word(m)
            }
            B::FoldMap => self.fold_map(&arg_type(ty, 3)?, &result, w(1)?, args[2].clone(), w(3)?, site)?,
            B::FoldMapGen => self.fold_map_gen(
                &arg_type(ty, 3)?,
                &result,
                args[0].clone(),
                args[1].clone(),
                args[2].clone(),
                w(3)?,
                site,
            )?,
            B::Lookup => {
                let (kt, vt) = map_parts(&arg_type(ty, 2)?)?;
                let (kw, vw) = (flat(&kt).len(), flat(&vt).len());
                let key = self.boxed_or_scratch(&args[1], kw)?;
                let out = self.scratch(vw);
                let found = self.ext1("nabla_map_get", vec![w(2)?, key, out])?;
                let g = w(0)?;
                let words = self.branch(
                    found,
                    &flat(&vt),
                    &mut |l| {
                        let tys = flat(&vt);
                        Ok(l.load_words(&tys, out, 0))
                    },
                    &mut |l| l.group_call(Helper::Zero, &vt, g, Site::None, &[]),
                )?;
                Self::from_slice(&vt, &words)?
            }
            // ILC Sec. 4: `replace v` and `gchange g dv` (payload records as `ir::layout` says).
            B::Replace => {
                let kind = self.b().iconst(0);
                LVal::Delta(kind, self.boxed(&args[0])?)
            }
            B::GChange => {
                let kind = self.b().iconst(1);
                let mut words = vec![w(0)?];
                words.extend(self.materialize(&args[1])?);
                LVal::Delta(kind, self.record(&words))
            }
            // ILC Def. 2.2 (functions were expanded by `adjoint::incremental::expand`).
            B::Nil => self.nil_change(&arg_type(ty, 0)?, &args[0])?,
            B::NoBase
            | B::DMerge
            | B::DNegate
            | B::DSingleton
            | B::DAdd
            | B::DSub
            | B::DMul
            | B::DNeg
            | B::DFoldBag
            | B::DMapBag
            | B::DFilterBag
            | B::DFlatMapBag
            | B::DSingletonMap
            | B::DFoldMap
            | B::DLookup => return self.change_builtin(b, ty, args, site),
            B::NilFun => return Err(LowerError::internal("`nil'` exists only in the interpreter")),
            B::Star | B::Unstar | B::Omega | B::Jac | B::Grad | B::Vjp | B::Jacobian => {
                return Err(LowerError::internal(format!(
                    "`{}` reached lowering: run `adjoint::reverse::transform` first",
                    b.name()
                )))
            }
            B::Zeros | B::TapeNew => {
                // The transform passes a length of an existing array (or a trip count it checked):
                // never negative, but the checks keep the JIT in bounds whatever it is passed.
                let n = w(0)?;
                self.build_checks(n, site);
                let st = stride(&elem(&result)?);
                let out = self.b().new_array(n, st);
                if b == B::Zeros {
                    // `newarray` is uninitialised; an accumulator starts at zero.
                    let z = self.b().fconst(0.0);
                    self.counted_loop(n, vec![], &mut |l, i, _| {
                        let addr = l.b().elem_addr(out, i, 8);
                        l.b().store(z, addr, 0);
                        Ok(vec![])
                    })?;
                }
                LVal::Word(out)
            }
            B::AccAdd | B::TapeSet => {
                // In place: the array argument is uniquely owned (adjoint::reverse). A tape written
                // in a compacting loop holds scalars only; one holding arrays is written only by a
                // non-compacting `iterate'` (adjoint::reverse), so no stored pointer is moved.
                let (a, i) = (w(0)?, w(1)?);
                let n = self.b().array_len(a);
                let sv = self.site_value(site);
                self.b().bounds_check(i, n, sv);
                let et = elem(&arg_type(ty, 0)?)?;
                // The in-place rule of ARCHITECTURE.md ("Memory model"), checked per write: a
                // pointer stored into an older array could outlive a compaction's release. The one
                // exception is the tape of a non-compacting `iterate'` (adjoint::reverse tapes a
                // carry holding arrays only there): its iterations release nothing, and the value
                // stored is the previous iteration's carry, older than any mark the body takes.
                // The transform never emits such an `accAdd'` (deeper accumulators go through
                // `accAt'`, which writes only an element's non-pointer words).
                if super::compact::has_pointers(&et) && b == B::AccAdd {
                    return Err(LowerError::internal(format!(
                        "an in-place `{}` of values holding pointers ({et})",
                        b.name()
                    )));
                }
                let addr = self.b().elem_addr(a, i, stride(&et));
                if b == B::AccAdd {
                    // A Real, or each Real word of a tuple (the others are discrete: left).
                    let words = self.materialize(&args[2])?;
                    for (j, (wt, x)) in flat(&et).into_iter().zip(words).enumerate() {
                        if wt == ir::Type::F64 {
                            let off = 8 * j as i32;
                            let old = self.b().load(ir::Type::F64, addr, off);
                            let new = self.b().binary(BinaryOp::Fadd, old, x);
                            self.b().store(new, addr, off);
                        }
                    }
                } else {
                    self.store_value(&args[2], addr, 0)?;
                }
                LVal::Word(a)
            }
            B::Interp => {
                // Per-site fallback: the site `k` evaluated by the reference interpreter at the
                // words of its free locals (`mono::Interpreted`), its result's words written back.
                let at = arg_type(ty, 1)?;
                let arg = self.boxed_or_scratch(&args[1], flat(&at).len())?;
                let tys = flat(&result);
                let out = self.scratch(tys.len());
                self.ext("nabla_interp", vec![w(0)?, arg, out])?;
                let words = self.load_words(&tys, out, 0);
                Self::from_slice(&result, &words)?
            }
            B::CtCheck => {
                // Lengths equal, or the runtime reports the mismatch at the path to the array
                // (`shape` and the indices' words, boxed on the failing branch only).
                let (n, m, shape) = (w(0)?, w(1)?, w(2)?);
                let differ = self.b().icmp(Cmp::Ne, n, m);
                let (fail, _) = self.block(&[]);
                let (ok, _) = self.block(&[]);
                self.b().brif(differ, ir::BlockCall::new(fail, vec![]), ir::BlockCall::new(ok, vec![]));
                self.switch_to(fail);
                let words = flat(&arg_type(ty, 3)?).len();
                let idx = self.boxed_or_scratch(&args[3], words)?;
                let count = self.b().iconst(words as i64);
                let s = self.site_value(site);
                self.ext("nabla_cotangent_mismatch", vec![n, m, shape, idx, count, s])?;
                self.b().jump(ok, vec![]);
                self.switch_to(ok);
                LVal::Unit
            }
            B::AccAdd2 | B::AccRow | B::AccRowAll => {
                // A row of a nested accumulator (adjoint::reverse): the outer array is uniquely
                // owned and its rows are distinct accumulators, so the row is updated in place
                // and the outer array is returned unchanged. Only `f64`s are written.
                let (a, i) = (w(0)?, w(1)?);
                let n = self.b().array_len(a);
                let sv = self.site_value(site);
                self.b().bounds_check(i, n, sv);
                let row_ty = Type::array(Type::Real);
                let addr = self.b().elem_addr(a, i, stride(&row_ty));
                let row = self.load_value(&row_ty, addr, 0)?.word()?;
                let m = self.b().array_len(row);
                match b {
                    B::AccAdd2 => {
                        let j = w(2)?;
                        self.b().bounds_check(j, m, sv);
                        let q = self.b().elem_addr(row, j, 8);
                        let old = self.b().load(ir::Type::F64, q, 0);
                        let new = self.b().binary(BinaryOp::Fadd, old, w(3)?);
                        self.b().store(new, q, 0);
                    }
                    _ => {
                        let s = w(2)?;
                        let y = if b == B::AccRow {
                            let y = w(3)?;
                            let k = self.b().array_len(y);
                            let differ = self.b().icmp(Cmp::Ne, m, k);
                            self.fail_if(differ, TrapCode::DotLengths, site, m, k);
                            Some(y)
                        } else {
                            None
                        };
                        self.counted_loop(m, vec![], &mut |l, t, _| {
                            let q = l.b().elem_addr(row, t, 8);
                            let old = l.b().load(ir::Type::F64, q, 0);
                            let add = match y {
                                Some(y) => {
                                    let p = l.b().elem_addr(y, t, 8);
                                    let yt = l.b().load(ir::Type::F64, p, 0);
                                    l.b().binary(BinaryOp::Fmul, s, yt)
                                }
                                None => s,
                            };
                            let new = l.b().binary(BinaryOp::Fadd, old, add);
                            l.b().store(new, q, 0);
                            Ok(vec![])
                        })?;
                    }
                }
                LVal::Word(a)
            }
            B::AccAt => {
                // `accAt' A i f` (adjoint::reverse): A is uniquely owned and `f` updates the
                // accumulators element i holds in place and returns them, so the element is
                // loaded, `f` applied (a known λ: inlined by `anf::opt`), and only its non-pointer
                // words stored back — the arrays it holds are the ones it held, and no pointer is
                // written into an older array (the in-place rule of ARCHITECTURE.md, "Memory model").
                let (a, i) = (w(0)?, w(1)?);
                let n = self.b().array_len(a);
                let sv = self.site_value(site);
                self.b().bounds_check(i, n, sv);
                let et = elem(&arg_type(ty, 0)?)?;
                let addr = self.b().elem_addr(a, i, stride(&et));
                let x = self.load_value(&et, addr, 0)?;
                let r = self.apply(args[2].clone(), vec![(x, site)])?;
                let words = self.materialize(&r)?;
                for (j, (wt, x)) in flat(&et).into_iter().zip(words).enumerate() {
                    if wt != ir::Type::Ptr {
                        self.b().store(x, addr, 8 * j as i32);
                    }
                }
                LVal::Word(a)
            }
            B::AccAddAll | B::AccAxpy => {
                let a = w(0)?;
                let s = w(1)?;
                let n = self.b().array_len(a);
                let y = if b == B::AccAxpy {
                    let y = w(2)?;
                    let m = self.b().array_len(y);
                    let differ = self.b().icmp(Cmp::Ne, n, m);
                    self.fail_if(differ, TrapCode::DotLengths, site, n, m);
                    Some(y)
                } else {
                    None
                };
                self.counted_loop(n, vec![], &mut |l, i, _| {
                    let addr = l.b().elem_addr(a, i, 8);
                    let old = l.b().load(ir::Type::F64, addr, 0);
                    let add = match y {
                        Some(y) => {
                            let q = l.b().elem_addr(y, i, 8);
                            let yi = l.b().load(ir::Type::F64, q, 0);
                            l.b().binary(BinaryOp::Fmul, s, yi)
                        }
                        None => s,
                    };
                    let new = l.b().binary(BinaryOp::Fadd, old, add);
                    l.b().store(new, addr, 0);
                    Ok(vec![])
                })?;
                LVal::Word(a)
            }
        })
    }

    /// A record holding `v`'s words for the runtime (a scratch record when `v` has none).
    fn boxed_or_scratch(&mut self, v: &LVal, words: usize) -> R<Value> {
        if words == 0 {
            Ok(self.b().null())
        } else {
            self.boxed(v)
        }
    }

    /// `build`'s checks of its count `n` (negative, too large), at `site`.
    pub(crate) fn build_checks(&mut self, n: Value, site: Site) {
        let zero = self.b().iconst(0);
        let negative = self.b().icmp(Cmp::Lt, n, zero);
        self.fail_if(negative, TrapCode::BuildNegative, site, n, zero);
        let limit = self.b().iconst(MAX_ARRAY_LEN);
        let too_big = self.b().icmp(Cmp::Gt, n, limit);
        self.fail_if(too_big, TrapCode::BuildTooLarge, site, n, limit);
    }

    /// `build n f`: `[f 0, …, f (n-1)]`.
    fn build(&mut self, result: &Type, n: Value, f: LVal, site: Site) -> R<LVal> {
        self.build_checks(n, site);
        let et = elem(result)?;
        let st = stride(&et);
        let out = self.b().new_array(n, st);
        self.element_loop(
            &et,
            n,
            &mut |l, i| {
                let y = l.apply(f.clone(), vec![(LVal::Word(i), site)])?;
                l.materialize(&y)
            },
            &mut |l, i, y| {
                let addr = l.b().elem_addr(out, i, st);
                l.store_words(&y, addr, 0);
                Ok(())
            },
        )?;
        Ok(LVal::Word(out))
    }

    /// `toInt x`: truncation toward zero; NaN or `x` outside `[-2^63, 2^63)` fails with the
    /// interpreter's message (payload 0 for NaN, 1 above, -1 below).
    fn to_int(&mut self, x: Value, site: Site) -> R<Value> {
        let two63 = 9_223_372_036_854_775_808.0;
        let hi = self.b().fconst(two63);
        let lo = self.b().fconst(-two63);
        let below_hi = self.b().fcmp(Cmp::Lt, x, hi);
        let above_lo = self.b().fcmp(Cmp::Ge, x, lo);
        let ok = self.b().binary(BinaryOp::And, below_hi, above_lo);
        let bad = self.b().unary(UnaryOp::Not, ok);
        let nan = self.b().fcmp(Cmp::Ne, x, x);
        let fzero = self.b().fconst(0.0);
        let positive = self.b().fcmp(Cmp::Gt, x, fzero);
        let (zero, one, minus) = (self.b().iconst(0), self.b().iconst(1), self.b().iconst(-1));
        let sign = self.b().select(positive, one, minus);
        let why = self.b().select(nan, zero, sign);
        self.fail_if(bad, TrapCode::ToIntRange, site, why, zero);
        self.ext1("nabla_to_int", vec![x])
    }

    /// `iterate n f x`: `f` applied `n` times.
    fn iterate(&mut self, t: &Type, n: Value, f: LVal, x: LVal, site: Site) -> R<LVal> {
        let zero = self.b().iconst(0);
        let negative = self.b().icmp(Cmp::Lt, n, zero);
        self.fail_if(negative, TrapCode::IterateNegative, site, n, zero);
        let init = self.materialize(&x)?;
        let out = self.compacting_loop(t, n, init, &mut |l, _, acc| {
            let v = Self::from_slice(t, &acc)?;
            let r = l.apply(f.clone(), vec![(v, site)])?;
            l.materialize(&r)
        })?;
        Self::from_slice(t, &out)
    }

    /// `while p f x`: `f` applied while `p` holds of the carried value, as a native loop (compacted
    /// like `iterate`'s).
    fn while_(&mut self, t: &Type, p: LVal, f: LVal, x: LVal, site: Site) -> R<LVal> {
        let init = self.materialize(&x)?;
        let out = self.compacting_while(
            t,
            init,
            &mut |l, acc| {
                let v = Self::from_slice(t, &acc)?;
                l.apply(p.clone(), vec![(v, site)])?.word()
            },
            &mut |l, acc| {
                let v = Self::from_slice(t, &acc)?;
                let r = l.apply(f.clone(), vec![(v, site)])?;
                l.materialize(&r)
            },
        )?;
        Self::from_slice(t, &out)
    }

    /// Loops over the sorted entries of a bag: `body` gets the entry record, the key and the
    /// multiplicity.
    #[allow(clippy::type_complexity)]
    fn bag_loop(
        &mut self,
        kt: &Type,
        bag: Value,
        init: Vec<Value>,
        body: &mut dyn FnMut(&mut Self, Value, LVal, Value, Vec<Value>) -> R<Vec<Value>>,
    ) -> R<Vec<Value>> {
        let kw = flat(kt).len();
        let entries = self.ext1("nabla_bag_entries", vec![bag])?;
        let n = self.b().array_len(entries);
        let st = 8 * (kw as u32 + 1);
        self.counted_loop(n, init, &mut |l, i, acc| {
            let rec = l.b().elem_addr(entries, i, st);
            let key = l.load_value(kt, rec, 0)?;
            let m = l.b().load(ir::Type::I64, rec, 8 * kw as i32);
            body(l, rec, key, m, acc)
        })
    }

    /// Loops over the sorted entries of a map: `body` gets the entry record (key words first), the
    /// key and the value.
    #[allow(clippy::type_complexity)]
    pub(crate) fn map_loop(
        &mut self,
        kt: &Type,
        vt: &Type,
        map: Value,
        init: Vec<Value>,
        body: &mut dyn FnMut(&mut Self, Value, LVal, LVal, Vec<Value>) -> R<Vec<Value>>,
    ) -> R<Vec<Value>> {
        let (kw, vw) = (flat(kt).len(), flat(vt).len());
        let entries = self.ext1("nabla_map_entries", vec![map])?;
        let n = self.b().array_len(entries);
        let st = 8 * (kw + vw) as u32;
        self.counted_loop(n, init, &mut |l, i, acc| {
            let rec = l.b().elem_addr(entries, i, st);
            let key = l.load_value(kt, rec, 0)?;
            let value = l.load_value(vt, rec, 8 * kw as i32)?;
            body(l, rec, key, value, acc)
        })
    }

    /// `foldBag g f b`: the group sum of `f x` scaled by each multiplicity, in key order.
    fn fold_bag(&mut self, bt: &Type, rt: &Type, g: Value, f: LVal, bag: Value, site: Site) -> R<LVal> {
        let kt = elem(bt)?;
        let zero = self.group_call(Helper::Zero, rt, g, Site::None, &[])?;
        if self.known_group(g) == Some(GroupKind::Bag) {
            // The bag group's scale-then-add, in one step.
            self.bag_loop(&kt, bag, vec![], &mut |l, _, key, m, _| {
                let y = l.apply(f.clone(), vec![(key, site)])?.word()?;
                l.bag_ext("nabla_bag_add_scaled", vec![zero[0], y, m], site)?;
                Ok(vec![])
            })?;
            return Ok(LVal::Word(zero[0]));
        }
        let out = self.bag_loop(&kt, bag, zero, &mut |l, _, key, m, acc| {
            let y = l.apply(f.clone(), vec![(key, site)])?;
            let y = l.materialize(&y)?;
            l.add_scaled_into(rt, g, site, acc, y, Some(m))
        })?;
        Self::from_slice(rt, &out)
    }

    /// `mapBag f b`.
    fn map_bag(&mut self, bt: &Type, rt: &Type, f: LVal, bag: Value, site: Site) -> R<LVal> {
        let (kt, yt) = (elem(bt)?, elem(rt)?);
        let yw = flat(&yt).len();
        let width = self.b().iconst(yw as i64);
        let out = self.ext1("nabla_bag_new", vec![width])?;
        let scratch = self.scratch(yw);
        self.bag_loop(&kt, bag, vec![], &mut |l, _, key, m, _| {
            let y = l.apply(f.clone(), vec![(key, site)])?;
            l.store_value(&y, scratch, 0)?;
            l.bag_ext("nabla_bag_insert", vec![out, scratch, m], site)?;
            Ok(vec![])
        })?;
        Ok(LVal::Word(out))
    }

    /// `filterBag p b`.
    fn filter_bag(&mut self, bt: &Type, p: LVal, bag: Value, site: Site) -> R<LVal> {
        let kt = elem(bt)?;
        let width = self.b().iconst(flat(&kt).len() as i64);
        let out = self.ext1("nabla_bag_new", vec![width])?;
        self.bag_loop(&kt, bag, vec![], &mut |l, rec, key, m, _| {
            let keep = l.apply(p.clone(), vec![(key, site)])?.word()?;
            l.branch(
                keep,
                &[],
                &mut |l| {
                    l.bag_ext("nabla_bag_insert", vec![out, rec, m], site)?;
                    Ok(vec![])
                },
                &mut |_| Ok(vec![]),
            )?;
            Ok(vec![])
        })?;
        Ok(LVal::Word(out))
    }

    /// `flatMapBag f b` = `foldBag bagGroup f b`.
    fn flat_map_bag(&mut self, bt: &Type, rt: &Type, f: LVal, bag: Value, site: Site) -> R<LVal> {
        let (kt, yt) = (elem(bt)?, elem(rt)?);
        let width = self.b().iconst(flat(&yt).len() as i64);
        let out = self.ext1("nabla_bag_new", vec![width])?;
        self.bag_loop(&kt, bag, vec![], &mut |l, _, key, m, _| {
            // The bag group's scale-then-add, in one step.
            let y = l.apply(f.clone(), vec![(key, site)])?.word()?;
            l.bag_ext("nabla_bag_add_scaled", vec![out, y, m], site)?;
            Ok(vec![])
        })?;
        Ok(LVal::Word(out))
    }

    /// `foldMap gv gb f m`: the `gb`-sum of `f k v` in key order (`gv` is not used).
    fn fold_map(&mut self, mt: &Type, rt: &Type, gb: Value, f: LVal, map: Value, site: Site) -> R<LVal> {
        let (kt, vt) = map_parts(mt)?;
        let zero = self.group_call(Helper::Zero, rt, gb, Site::None, &[])?;
        let out = self.map_loop(&kt, &vt, map, zero, &mut |l, _, k, v, acc| {
            let y = l.apply(f.clone(), vec![(k, site), (v, site)])?;
            let y = l.materialize(&y)?;
            l.add_scaled_into(rt, gb, site, acc, y, None)
        })?;
        Self::from_slice(rt, &out)
    }

    /// `foldMapGen z op f m`: `op (… (op z (f k1 v1)) …)` in key order.
    #[allow(clippy::too_many_arguments)]
    fn fold_map_gen(&mut self, mt: &Type, rt: &Type, z: LVal, op: LVal, f: LVal, map: Value, site: Site) -> R<LVal> {
        let (kt, vt) = map_parts(mt)?;
        let init = self.materialize(&z)?;
        let out = self.map_loop(&kt, &vt, map, init, &mut |l, _, k, v, acc| {
            let y = l.apply(f.clone(), vec![(k, site), (v, site)])?;
            let acc = Self::from_slice(rt, &acc)?;
            let r = l.apply(op.clone(), vec![(acc, site), (y, site)])?;
            l.materialize(&r)
        })?;
        Self::from_slice(rt, &out)
    }
}

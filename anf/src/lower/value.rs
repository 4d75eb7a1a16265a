//! What lowering knows about a value: its IR words plus whatever is static (which λ or builtin a
//! closure is, and the arguments a partial application has collected so far).
//!
//! An [`LVal`] mirrors the value's language type. Closures whose code is known statically are kept
//! symbolic (`Clo::Lam`, `Clo::Prim`) so that applying them is a direct call and a partial
//! application allocates nothing until the closure *escapes* — is stored, passed, returned or
//! joined — when [`Lowerer::materialize`] gives it its run-time form, a tag and an environment.
//! A [`Shape`] is an `LVal` with the words taken out: environments store only the dynamic words of
//! what they capture, and the λ's code rebuilds the static part from the shape.

use frontend::builtins::Builtin;
use frontend::types::Type;

use super::{ChainId, LowerError, Lowerer, R};
use crate::ir::{self, Value};

/// A variable: a local binder or a top-level definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum VarKey {
    Global(u32),
    Local(u32),
}

/// A value during lowering.
#[derive(Clone, Debug)]
pub(crate) enum LVal {
    /// `Unit`: no words.
    Unit,
    /// `Int`, `Real`, `Bool` and the pointer types (`Array`, `Bag`, `Map`, `Group`).
    Word(Value),
    Tuple(Vec<LVal>),
    /// Functions (and duals, which are functions too).
    Fun(Clo),
    /// `Delta t` of a base type: the kind (`0` replace, `1` gchange) and the payload record.
    Delta(Value, Value),
}

/// A closure.
#[derive(Clone, Debug)]
pub(crate) enum Clo {
    /// Known only at run time: a tag of closure type `ty` and its environment.
    Dyn { ty: Type, tag: Value, env: Value },
    /// The λ-chain `chain` with its captured environment (`None`: the chain captures nothing, and
    /// its environment is null), applied to `args` (fewer than its length) so far.
    Lam { chain: ChainId, env: Option<Value>, args: Vec<LVal> },
    /// A builtin at its monomorphic type applied to `args` (fewer than its arity) so far.
    Prim { b: Builtin, ty: Type, args: Vec<LVal> },
}

/// An `LVal` without its words.
#[derive(Clone, Debug)]
pub(crate) enum Shape {
    Unit,
    Word(ir::Type),
    Tuple(Vec<Shape>),
    Dyn(Type),
    /// A chain, whether it has an environment, and its arguments so far.
    Lam(ChainId, bool, Vec<Shape>),
    Prim(Builtin, Type, Vec<Shape>),
    Delta,
}

/// Where a failure is reported: the source span of a term, a site number computed at run time
/// (a parameter of the function), or nowhere.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Site {
    None,
    Span(frontend::Span),
    Dyn(Value),
}

impl LVal {
    /// The single word of a scalar or pointer value.
    pub(crate) fn word(&self) -> R<Value> {
        match self {
            LVal::Word(v) => Ok(*v),
            v => Err(LowerError::internal(format!("expected a one-word value, found {v:?}"))),
        }
    }

    /// The components of a tuple value.
    pub(crate) fn components(&self) -> R<&[LVal]> {
        match self {
            LVal::Tuple(vs) => Ok(vs),
            v => Err(LowerError::internal(format!("expected a tuple, found {v:?}"))),
        }
    }
}

/// The IR words of language type `t` (`ir::layout::flatten`; types are ground after
/// monomorphisation, which `lower` checks first).
pub(crate) fn flat(t: &Type) -> Vec<ir::Type> {
    ir::layout::flatten(t).unwrap_or_default()
}

/// The parameter and result of a function type.
pub(crate) fn fun_parts(t: &Type) -> R<(&Type, &Type)> {
    t.fun_parts().ok_or_else(|| LowerError::internal(format!("expected a function type, found {t}")))
}

/// The type after applying a function of type `t` to `n` arguments.
pub(crate) fn after_args(t: &Type, n: usize) -> R<Type> {
    let mut t = t;
    for _ in 0..n {
        t = fun_parts(t)?.1;
    }
    Ok(t.clone())
}

/// The type of the `i`th argument of a curried function type.
pub(crate) fn arg_type(t: &Type, i: usize) -> R<Type> {
    let t = after_args(t, i)?;
    Ok(fun_parts(&t)?.0.clone())
}

impl Lowerer<'_> {
    /// The static part of `v`.
    pub(crate) fn shape_of(&self, v: &LVal) -> Shape {
        match v {
            LVal::Unit => Shape::Unit,
            LVal::Word(w) => Shape::Word(self.vty(*w)),
            LVal::Tuple(vs) => Shape::Tuple(vs.iter().map(|v| self.shape_of(v)).collect()),
            LVal::Fun(Clo::Dyn { ty, .. }) => Shape::Dyn(ty.clone()),
            LVal::Fun(Clo::Lam { chain, env, args }) => {
                Shape::Lam(*chain, env.is_some(), args.iter().map(|v| self.shape_of(v)).collect())
            }
            LVal::Fun(Clo::Prim { b, ty, args }) => {
                Shape::Prim(*b, ty.clone(), args.iter().map(|v| self.shape_of(v)).collect())
            }
            LVal::Delta(..) => Shape::Delta,
        }
    }

    /// The dynamic words of `v`, in the order `rebuild` reads them.
    pub(crate) fn dyn_words(v: &LVal, out: &mut Vec<Value>) {
        match v {
            LVal::Unit => {}
            LVal::Word(w) => out.push(*w),
            LVal::Tuple(vs) => vs.iter().for_each(|v| Self::dyn_words(v, out)),
            LVal::Fun(Clo::Dyn { tag, env, .. }) => out.extend([*tag, *env]),
            LVal::Fun(Clo::Lam { env, args, .. }) => {
                out.extend(env.iter().copied());
                args.iter().for_each(|v| Self::dyn_words(v, out));
            }
            LVal::Fun(Clo::Prim { args, .. }) => args.iter().for_each(|v| Self::dyn_words(v, out)),
            LVal::Delta(k, p) => out.extend([*k, *p]),
        }
    }

    /// The types of the dynamic words of a value of shape `s`.
    pub(crate) fn shape_types(s: &Shape, out: &mut Vec<ir::Type>) {
        match s {
            Shape::Unit => {}
            Shape::Word(t) => out.push(*t),
            Shape::Tuple(ss) => ss.iter().for_each(|s| Self::shape_types(s, out)),
            Shape::Dyn(_) | Shape::Delta => out.extend([ir::Type::I64, ir::Type::Ptr]),
            Shape::Lam(_, has_env, args) => {
                if *has_env {
                    out.push(ir::Type::Ptr);
                }
                args.iter().for_each(|s| Self::shape_types(s, out));
            }
            Shape::Prim(_, _, args) => args.iter().for_each(|s| Self::shape_types(s, out)),
        }
    }

    /// The value of shape `s` whose dynamic words come next from `words`.
    pub(crate) fn rebuild(s: &Shape, words: &mut impl Iterator<Item = Value>) -> R<LVal> {
        let mut next = || words.next().ok_or_else(|| LowerError::internal("too few words for a shape"));
        Ok(match s {
            Shape::Unit => LVal::Unit,
            Shape::Word(_) => LVal::Word(next()?),
            Shape::Tuple(ss) => LVal::Tuple(ss.iter().map(|s| Self::rebuild(s, words)).collect::<R<_>>()?),
            Shape::Dyn(ty) => {
                let tag = next()?;
                LVal::Fun(Clo::Dyn { ty: ty.clone(), tag, env: next()? })
            }
            Shape::Lam(chain, has_env, args) => {
                let env = if *has_env { Some(next()?) } else { None };
                let args = args.iter().map(|s| Self::rebuild(s, words)).collect::<R<_>>()?;
                LVal::Fun(Clo::Lam { chain: *chain, env, args })
            }
            Shape::Prim(b, ty, args) => {
                let args = args.iter().map(|s| Self::rebuild(s, words)).collect::<R<_>>()?;
                LVal::Fun(Clo::Prim { b: *b, ty: ty.clone(), args })
            }
            Shape::Delta => {
                let k = next()?;
                LVal::Delta(k, next()?)
            }
        })
    }

    /// The value of type `t` whose (run-time form) words come next from `words`.
    pub(crate) fn from_words(t: &Type, words: &mut impl Iterator<Item = Value>) -> R<LVal> {
        let mut next = || words.next().ok_or_else(|| LowerError::internal(format!("too few words for {t}")));
        Ok(match t {
            Type::Unit => LVal::Unit,
            Type::Int | Type::Real | Type::Bool | Type::Array(_) | Type::Bag(_) | Type::Map(..) | Type::Group(_) => {
                LVal::Word(next()?)
            }
            Type::Tuple(ts) => LVal::Tuple(ts.iter().map(|t| Self::from_words(t, words)).collect::<R<_>>()?),
            Type::Fun(..) | Type::Dual(_) => {
                let tag = next()?;
                LVal::Fun(Clo::Dyn { ty: t.clone(), tag, env: next()? })
            }
            Type::Delta(_) => {
                let k = next()?;
                LVal::Delta(k, next()?)
            }
            Type::Var(_) => return Err(LowerError::internal(format!("type {t} is not ground"))),
        })
    }

    /// `from_words` over a slice.
    pub(crate) fn from_slice(t: &Type, words: &[Value]) -> R<LVal> {
        let mut it = words.iter().copied();
        let v = Self::from_words(t, &mut it)?;
        if it.next().is_some() {
            return Err(LowerError::internal(format!("too many words for {t}")));
        }
        Ok(v)
    }

    /// The run-time form of `v`: the words `ir::layout` gives its type. Statically known closures
    /// get their tag here, and partial applications their environment record.
    pub(crate) fn materialize(&mut self, v: &LVal) -> R<Vec<Value>> {
        let mut out = Vec::new();
        self.materialize_into(v, &mut out)?;
        Ok(out)
    }

    fn materialize_into(&mut self, v: &LVal, out: &mut Vec<Value>) -> R<()> {
        match v {
            LVal::Unit => {}
            LVal::Word(w) => out.push(*w),
            LVal::Tuple(vs) => {
                for v in vs {
                    self.materialize_into(v, out)?;
                }
            }
            LVal::Fun(Clo::Dyn { tag, env, .. }) => out.extend([*tag, *env]),
            LVal::Fun(Clo::Lam { chain, env, args }) => {
                let tag = self.chain_tag(*chain, args.len())?;
                let env = self.env_value(*env);
                let env = if args.is_empty() {
                    env
                } else {
                    let mut words = vec![env];
                    for a in args {
                        words.extend(self.materialize(a)?);
                    }
                    self.record(&words)
                };
                let t = self.b().tag(tag);
                out.extend([t, env]);
            }
            LVal::Fun(Clo::Prim { b, ty, args }) => {
                let tag = self.prim_tag(*b, ty, args.len())?;
                let mut words = Vec::new();
                for a in args {
                    words.extend(self.materialize(a)?);
                }
                let env = self.record(&words);
                let t = self.b().tag(tag);
                out.extend([t, env]);
            }
            LVal::Delta(k, p) => out.extend([*k, *p]),
        }
        Ok(())
    }

    /// An environment pointer (null for `None`).
    pub(crate) fn env_value(&mut self, env: Option<Value>) -> Value {
        match env {
            Some(v) => v,
            None => self.b().null(),
        }
    }

    /// A fresh arena record holding `words` (null when there are none).
    pub(crate) fn record(&mut self, words: &[Value]) -> Value {
        if words.is_empty() {
            return self.b().null();
        }
        let p = self.b().alloc(8 * words.len() as u32);
        self.store_words(words, p, 0);
        p
    }

    /// Stores words into consecutive slots from `p + offset`.
    pub(crate) fn store_words(&mut self, words: &[Value], p: Value, offset: i32) {
        for (i, w) in words.iter().enumerate() {
            self.b().store(*w, p, offset + 8 * i as i32);
        }
    }

    /// Loads words of the given types from consecutive slots at `p + offset`.
    pub(crate) fn load_words(&mut self, tys: &[ir::Type], p: Value, offset: i32) -> Vec<Value> {
        tys.iter().enumerate().map(|(i, t)| self.b().load(*t, p, offset + 8 * i as i32)).collect()
    }

    /// Loads a value of type `t` from memory at `p + offset`.
    pub(crate) fn load_value(&mut self, t: &Type, p: Value, offset: i32) -> R<LVal> {
        let words = self.load_words(&flat(t), p, offset);
        Self::from_slice(t, &words)
    }

    /// Stores `v` into memory at `p + offset`.
    pub(crate) fn store_value(&mut self, v: &LVal, p: Value, offset: i32) -> R<()> {
        let words = self.materialize(v)?;
        self.store_words(&words, p, offset);
        Ok(())
    }

    /// A fresh record holding the run-time form of `v` (null for a value without words).
    pub(crate) fn boxed(&mut self, v: &LVal) -> R<Value> {
        let words = self.materialize(v)?;
        Ok(self.record(&words))
    }
}

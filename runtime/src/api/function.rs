//! [`Function`]: a definition prepared once and called many times with data values — any mix of
//! `Real`, `Int`, `Bool`, arrays (of arrays, of tuples, …) and tuples.
//!
//! The definition is JIT-compiled once and each call runs native code through [`Compiled`]
//! (arguments written into reused buffers). A differentiation site the compiler does not handle
//! yet (one `adjoint::reverse` leaves to the interpreter) falls back alone, as under `nabla run`:
//! compiled code calls the reference interpreter for that site and runs the rest natively
//! ([`Backend::Mixed`]; [`Function::note`] names the sites). When the compiler learns a
//! construct, its sites move to native code with no change for callers.
//!
//! ```
//! use runtime::api::{Backend, Function};
//! use runtime::value::Value;
//! use std::rc::Rc;
//!
//! let src = "
//! def rowsums (m : Array (Array Real)) = map sum m
//! def sumsq (xs : Array Real) = sum (map (fun x -> x * x) xs)
//! def twice (xs : Array Real) = grad sumsq xs
//! ";
//! let reals = |xs: &[f64]| Value::Array(Rc::new(xs.iter().map(|x| Value::Real(*x)).collect()));
//! let m = Value::Array(Rc::new(vec![reals(&[1.0, 2.0]), reals(&[3.0])]));
//! let mut rowsums = Function::new(src, "rowsums").unwrap();
//! assert_eq!(rowsums.backend(), Backend::Compiled);
//! assert_eq!(rowsums.call(&[m]).unwrap().to_string(), "[3.0, 3.0]");
//!
//! let mut twice = Function::new(src, "twice").unwrap();
//! let g = twice.call(&[reals(&[1.0, -2.0])]).unwrap();
//! assert_eq!(g.to_string(), "[2.0, -4.0]");
//!
//! // A value of the wrong shape is an error, not a crash.
//! assert!(rowsums.call(&[reals(&[1.0])]).is_err());
//!
//! // Arguments converted once, then called many times (a benchmark's runs): `bind` checks and
//! // marshals them, `call_bound` only runs, `last_result` reads the result out afterwards.
//! let mut sumsq = Function::new(src, "sumsq").unwrap();
//! sumsq.bind(&[reals(&[3.0, 4.0])]).unwrap();
//! for _ in 0..3 {
//!     sumsq.call_bound().unwrap();
//! }
//! assert_eq!(sumsq.last_result().unwrap().to_string(), "25.0");
//! assert!(sumsq.bind(&[Value::Real(1.0)]).is_err());
//! ```
//!
//! Interpreted sites run on the caller's thread, which needs a big stack for deep evaluations
//! ([`frontend::with_big_stack`], which `nabla` runs everything on).

use frontend::types::Type;
use frontend::{Diagnostic, Span};

use super::{is_plain_data, split_params, Arg, Compiled};
use crate::value::Value;

/// How a [`Function`]'s calls run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Native code from the JIT.
    Compiled,
    /// Native code, with the differentiation sites [`Function::note`] names evaluated by the
    /// reference interpreter (per-site fallback: a construct not compiled yet).
    Mixed,
}

/// A definition of data parameters returning data, prepared once, callable many times.
pub struct Function {
    name: String,
    params: Vec<Type>,
    result: Type,
    compiled: Box<Compiled>,
}

impl Function {
    /// Prepares definition `name` of `src`: a function whose curried parameters and result are
    /// data (`Real`, `Int`, `Bool`, `Unit`, and arrays and tuples of them).
    pub fn new(src: &str, name: &str) -> Result<Function, Diagnostic> {
        let (program, mono) = crate::prepare(src, name)?;
        let def_span = program.def(crate::find_def(&program, name)?).span;
        let ty = mono.def(mono.root()).ty.clone();
        let (params, result) = split_params(&ty);
        if params.is_empty() {
            return Err(Diagnostic::error(def_span, format!("`{name}` is not a function (its type is {ty})")));
        }
        if let Some(p) = params.iter().find(|p| !is_plain_data(p)) {
            return Err(Diagnostic::error(
                def_span,
                format!("`{name}` has a parameter of type {p}; a Function takes Real, Int, Bool, arrays and tuples"),
            ));
        }
        if !is_plain_data(&result) {
            return Err(Diagnostic::error(def_span, format!("`{name}` returns {result}, which is not plain data")));
        }
        let compiled = Box::new(Compiled::new(src, name)?);
        Ok(Function { name: name.to_string(), params, result, compiled })
    }

    /// The curried parameters' types, in order.
    pub fn params(&self) -> &[Type] {
        &self.params
    }

    /// The result's type.
    pub fn result(&self) -> &Type {
        &self.result
    }

    /// How the calls run: native code, with or without sites left to the interpreter.
    pub fn backend(&self) -> Backend {
        match self.compiled.note() {
            None => Backend::Compiled,
            Some(_) => Backend::Mixed,
        }
    }

    /// The sites the reference interpreter evaluates (one line each, with its `line:column`),
    /// when there are any.
    pub fn note(&self) -> Option<&str> {
        self.compiled.note()
    }

    /// Calls the definition with one value per curried parameter (a tuple parameter takes a
    /// `Value::Tuple`). Each argument is checked against its parameter's type first.
    pub fn call(&mut self, args: &[Value]) -> Result<Value, Diagnostic> {
        self.check(args)?;
        let mut leaves = Vec::with_capacity(args.len());
        for v in args {
            flatten(v, &mut leaves);
        }
        self.compiled.call(&leaves)
    }

    /// Checks the arguments (as [`Function::call`] does) and converts them once into the
    /// native buffers compiled code takes, for any number of [`Function::call_bound`]s.
    /// Replaces any earlier bound arguments.
    pub fn bind(&mut self, args: &[Value]) -> Result<(), Diagnostic> {
        self.check(args)?;
        let mut leaves = Vec::with_capacity(args.len());
        for v in args {
            flatten(v, &mut leaves);
        }
        self.compiled.bind(&leaves)
    }

    /// Calls the definition with the arguments of the last [`Function::bind`], leaving the
    /// result where compiled code made it until [`Function::last_result`] reads it: a call that
    /// costs only the run itself.
    pub fn call_bound(&mut self) -> Result<(), Diagnostic> {
        self.compiled.call_bound()
    }

    /// The result of the last successful call; `None` before one, after a failed one, or after
    /// a successful [`Function::bind`].
    pub fn last_result(&self) -> Option<Value> {
        self.compiled.last_result()
    }

    /// One argument per curried parameter, each of its parameter's type.
    fn check(&self, args: &[Value]) -> Result<(), Diagnostic> {
        if args.len() != self.params.len() {
            return Err(self.usage(&format!("it takes {} arguments, given {}", self.params.len(), args.len())));
        }
        for (i, (v, t)) in args.iter().zip(&self.params).enumerate() {
            if !conforms(v, t) {
                return Err(self.usage(&format!("argument {} is {}, but the parameter is {t}", i + 1, describe(v))));
            }
        }
        Ok(())
    }

    fn usage(&self, why: &str) -> Diagnostic {
        usage(&self.name, why)
    }
}

fn usage(name: &str, why: &str) -> Diagnostic {
    Diagnostic::error(Span::SYNTHETIC, format!("cannot call `{name}` this way: {why}"))
}

/// The leaves [`Compiled`] takes for a data value: scalars as themselves, tuples component by
/// component, arrays whole.
fn flatten<'a>(v: &'a Value, out: &mut Vec<Arg<'a>>) {
    match v {
        Value::Real(x) => out.push(Arg::Real(*x)),
        Value::Int(n) => out.push(Arg::Int(*n)),
        Value::Bool(b) => out.push(Arg::Bool(*b)),
        Value::Unit => {}
        Value::Tuple(vs) => vs.iter().for_each(|v| flatten(v, out)),
        v => out.push(Arg::Value(v)),
    }
}

/// Whether data value `v` has type `t`.
pub fn conforms(v: &Value, t: &Type) -> bool {
    match (v, t) {
        (Value::Real(_), Type::Real) | (Value::Int(_), Type::Int) | (Value::Bool(_), Type::Bool) => true,
        (Value::Unit, Type::Unit) => true,
        (Value::Tuple(vs), Type::Tuple(ts)) => {
            vs.len() == ts.len() && vs.iter().zip(ts.iter()).all(|(v, t)| conforms(v, t))
        }
        (Value::Array(vs), Type::Array(e)) => vs.iter().all(|v| conforms(v, e)),
        _ => false,
    }
}

/// A short description of a value's shape for error messages (never the whole value).
pub(crate) fn describe(v: &Value) -> String {
    match v {
        Value::Real(x) => format!("the Real {x:?}"),
        Value::Int(n) => format!("the Int {n}"),
        Value::Bool(b) => format!("the Bool {b}"),
        Value::Unit => "()".to_string(),
        Value::Tuple(vs) => format!("a tuple of {}", vs.len()),
        Value::Array(vs) => format!("an array of length {}", vs.len()),
        _ => "not plain data".to_string(),
    }
}

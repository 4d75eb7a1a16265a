//! `nabla gradbench`: Nabla as a GradBench tool. GradBench's evals send one JSON message a line;
//! [`Tool::handle`] answers each with one JSON line (the protocol is summarised in
//! docs/gradbench.md). The evals are written in Nabla, one source file per module in
//! `runtime/gradbench/`, embedded here; every derivative is Nabla's own reverse mode.
//!
//! A module's functions are prepared once, at `define` ([`Function::new`]: JIT-compiled, or run by
//! the reference interpreter when they use a construct the compiler does not handle yet). An
//! `evaluate` converts the JSON input into the function's arguments, guided by the parameters'
//! types, and those into the engine's native buffers once ([`Function::bind`], reported as a
//! `prepare` timing, as the C++ tools do), runs it at least `min_runs` times and until the runs add
//! up to `min_seconds` ([`Function::call_bound`]), and returns one `evaluate` timing per run (the
//! runs only: no JSON decoding or encoding, no marshalling) and the last run's output. Nothing here panics on input: every failure is a `success: false`.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use frontend::types::Type;
use serde_json::{json, Map, Value as Json};

use crate::api::Function;
use crate::value::Value;

/// How a function's JSON input maps onto its parameters.
#[derive(Clone, Copy, Debug)]
pub enum Inputs {
    /// The input is the single parameter's value itself, evaluated once (`hello`).
    Bare,
    /// The input is an object; these keys, in order, are the curried parameters. Other keys
    /// (`min_runs`, `min_seconds`, sizes the arrays already carry) are not parameters.
    Keys(&'static [&'static str]),
}

/// One function of a module: the GradBench name, the Nabla definition that computes it, its
/// inputs and, for a tuple result reported as a JSON object, the object's keys.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub function: &'static str,
    pub def: &'static str,
    pub inputs: Inputs,
    pub output_keys: Option<&'static [&'static str]>,
}

/// A GradBench module: its name, its Nabla source and its functions.
#[derive(Clone, Copy, Debug)]
pub struct ModuleSpec {
    pub name: &'static str,
    pub source: &'static str,
    pub functions: &'static [Spec],
}

const fn keys(function: &'static str, def: &'static str, inputs: &'static [&'static str]) -> Spec {
    Spec { function, def, inputs: Inputs::Keys(inputs), output_keys: None }
}

/// Every module the tool implements.
pub const MODULES: &[ModuleSpec] = &[
    ModuleSpec {
        name: "hello",
        source: include_str!("../gradbench/hello.nbl"),
        functions: &[
            Spec { function: "square", def: "square", inputs: Inputs::Bare, output_keys: None },
            Spec { function: "double", def: "double", inputs: Inputs::Bare, output_keys: None },
        ],
    },
    ModuleSpec {
        name: "llsq",
        source: include_str!("../gradbench/llsq.nbl"),
        functions: &[keys("primal", "primal", &["x", "n"]), keys("gradient", "gradient", &["x", "n"])],
    },
    ModuleSpec {
        name: "lse",
        source: include_str!("../gradbench/lse.nbl"),
        functions: &[keys("primal", "primal", &["x"]), keys("gradient", "gradient", &["x"])],
    },
    ModuleSpec {
        name: "ode",
        source: include_str!("../gradbench/ode.nbl"),
        functions: &[keys("primal", "primal", &["x", "s"]), keys("gradient", "gradient", &["x", "s"])],
    },
    ModuleSpec {
        name: "det",
        source: include_str!("../gradbench/det.nbl"),
        functions: &[keys("primal", "primal", &["A", "ell"]), keys("gradient", "gradient", &["A", "ell"])],
    },
    ModuleSpec {
        name: "gmm",
        source: include_str!("../gradbench/gmm.nbl"),
        functions: &[
            keys("objective", "objective", GMM_INPUTS),
            Spec {
                function: "jacobian",
                def: "jacobian",
                inputs: Inputs::Keys(GMM_INPUTS),
                output_keys: Some(&["alpha", "mu", "q", "l"]),
            },
        ],
    },
    ModuleSpec {
        name: "kmeans",
        source: include_str!("../gradbench/kmeans.nbl"),
        functions: &[keys("cost", "cost", &["points", "centroids"]), keys("dir", "dir", &["points", "centroids"])],
    },
    // Nabla has reverse mode only: of the four variants (outer × inner AD mode) it answers `rr`.
    ModuleSpec {
        name: "particle",
        source: include_str!("../gradbench/particle.nbl"),
        functions: &[keys("rr", "rr", &["w"])],
    },
    ModuleSpec {
        name: "saddle",
        source: include_str!("../gradbench/saddle.nbl"),
        functions: &[keys("rr", "rr", &["start"])],
    },
];

const GMM_INPUTS: &[&str] = &["x", "m", "gamma", "alpha", "mu", "q", "l"];

/// The tool's state: the functions of the modules defined so far.
#[derive(Default)]
pub struct Tool {
    defined: HashMap<String, Vec<(Spec, Function)>>,
    /// Lines for stderr (notes about the engine used), taken by [`Tool::take_notes`].
    notes: Vec<String>,
}

impl Tool {
    pub fn new() -> Tool {
        Tool::default()
    }

    /// Answers one message (one line of input) with one JSON line (no newline).
    pub fn handle(&mut self, line: &str) -> String {
        let response = match serde_json::from_str::<Json>(line) {
            Ok(Json::Object(msg)) => self.message(&msg),
            Ok(_) => failure(&Json::Null, "a message must be a JSON object".into()),
            Err(e) => failure(&Json::Null, format!("the message is not JSON: {e}")),
        };
        response.to_string()
    }

    /// Notes for stderr accumulated since the last call.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    fn message(&mut self, msg: &Map<String, Json>) -> Json {
        let id = msg.get("id").cloned().unwrap_or(Json::Null);
        let Some(kind) = msg.get("kind").and_then(Json::as_str) else {
            return failure(&id, "the message has no `kind` string".into());
        };
        let result = match kind {
            "start" => return json!({ "id": id, "tool": "nabla" }),
            "define" => self.define(msg),
            "evaluate" => self.evaluate(msg),
            _ => return json!({ "id": id }),
        };
        let mut r = match result {
            Ok(fields) => fields,
            Err(e) => return failure(&id, e),
        };
        r.insert("id".into(), id);
        r.insert("success".into(), Json::Bool(true));
        Json::Object(r)
    }

    fn define(&mut self, msg: &Map<String, Json>) -> Result<Map<String, Json>, String> {
        let name = msg.get("module").and_then(Json::as_str).ok_or("`define` needs a `module` string")?;
        let Some(spec) = MODULES.iter().find(|m| m.name == name) else {
            return Err(format!("module `{name}` is not implemented"));
        };
        let start = Instant::now();
        let mut functions = Vec::new();
        for f in spec.functions {
            let function =
                Function::new(spec.source, f.def).map_err(|d| format!("{name}.{}: {}", f.function, d.message))?;
            if let Some(note) = function.note() {
                self.notes.push(format!("note: {name}.{}: {note}", f.function));
            }
            functions.push((*f, function));
        }
        self.defined.insert(name.to_string(), functions);
        let mut r = Map::new();
        r.insert("timings".into(), json!([{ "name": "define", "nanoseconds": nanos(start.elapsed()) }]));
        Ok(r)
    }

    fn evaluate(&mut self, msg: &Map<String, Json>) -> Result<Map<String, Json>, String> {
        let module = msg.get("module").and_then(Json::as_str).ok_or("`evaluate` needs a `module` string")?;
        let function = msg.get("function").and_then(Json::as_str).ok_or("`evaluate` needs a `function` string")?;
        let input = msg.get("input").ok_or("`evaluate` needs an `input`")?;
        let functions = self.defined.get_mut(module).ok_or_else(|| format!("module `{module}` is not defined"))?;
        let (spec, f) = functions.iter_mut().find(|(s, _)| s.function == function).ok_or_else(|| {
            let names: Vec<&str> = functions_of(module).iter().map(|s| s.function).collect();
            format!("module `{module}` has no function `{function}` (it has {})", names.join(", "))
        })?;
        // Like the C++ tools' `prepare`: the input, once decoded, is converted into the
        // engine's native buffers once, outside the runs, and reported as its own timing.
        let prepare = Instant::now();
        let (args, min_runs, min_time) = arguments(spec, f.params(), input)?;
        f.bind(&args).map_err(|d| d.message)?;
        drop(args);
        let mut timings = vec![json!({ "name": "prepare", "nanoseconds": nanos(prepare.elapsed()) })];
        let mut runs = 0;
        let mut total = Duration::ZERO;
        loop {
            let start = Instant::now();
            f.call_bound().map_err(|d| d.message)?;
            let t = start.elapsed();
            total += t;
            runs += 1;
            timings.push(json!({ "name": "evaluate", "nanoseconds": nanos(t) }));
            if runs >= min_runs && total >= min_time {
                break;
            }
        }
        // The last run's result, read out of native memory (then encoded as JSON) after the runs.
        let output = f.last_result().ok_or("internal: the last run left no result")?;
        let output = match spec.output_keys {
            Some(keys) => match &output {
                Value::Tuple(vs) if vs.len() == keys.len() => {
                    Json::Object(keys.iter().zip(vs.iter()).map(|(k, v)| (k.to_string(), to_json(v))).collect())
                }
                _ => return Err(format!("internal: `{}` did not return a tuple of {}", spec.def, keys.len())),
            },
            None => to_json(&output),
        };
        let mut r = Map::new();
        r.insert("output".into(), output);
        r.insert("timings".into(), Json::Array(timings));
        Ok(r)
    }
}

/// The functions module `name` implements.
fn functions_of(name: &str) -> &'static [Spec] {
    MODULES.iter().find(|m| m.name == name).map_or(&[], |m| m.functions)
}

/// `{"id", "success": false, "error"}`.
fn failure(id: &Json, error: String) -> Json {
    json!({ "id": id, "success": false, "error": error })
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The arguments of a call, `min_runs` and `min_seconds` from an `evaluate` input.
fn arguments(spec: &Spec, params: &[Type], input: &Json) -> Result<(Vec<Value>, u64, Duration), String> {
    match spec.inputs {
        Inputs::Bare => {
            let [t] = params else { return Err(format!("internal: `{}` does not take one parameter", spec.def)) };
            let v = from_json(input, t).map_err(|e| format!("input{e}"))?;
            Ok((vec![v], 1, Duration::ZERO))
        }
        Inputs::Keys(keys) => {
            let Json::Object(obj) = input else { return Err("the input must be a JSON object".into()) };
            if keys.len() != params.len() {
                return Err(format!("internal: `{}` takes {} parameters, not {}", spec.def, params.len(), keys.len()));
            }
            let mut args = Vec::with_capacity(keys.len());
            for (k, t) in keys.iter().zip(params) {
                let v = obj.get(*k).ok_or_else(|| format!("the input has no `{k}`"))?;
                args.push(from_json(v, t).map_err(|e| format!("input.{k}{e}"))?);
            }
            let min_runs = match obj.get("min_runs") {
                None => 1,
                Some(v) => v.as_u64().ok_or("`min_runs` must be a non-negative integer")?,
            };
            let min_seconds = match obj.get("min_seconds") {
                None => 0.0,
                Some(v) => v
                    .as_f64()
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .ok_or("`min_seconds` must be a non-negative number")?,
            };
            let min_time = Duration::try_from_secs_f64(min_seconds).map_err(|_| "`min_seconds` is too large")?;
            Ok((args, min_runs.max(1), min_time))
        }
    }
}

/// The value of type `t` a JSON value denotes; the error is a path suffix and what is wrong
/// (`[3][1]: expected a number, found "a"`).
pub fn from_json(j: &Json, t: &Type) -> Result<Value, String> {
    let kind = |j: &Json| match j {
        Json::Null => "null".to_string(),
        Json::Bool(b) => b.to_string(),
        Json::Number(n) => n.to_string(),
        Json::String(_) => "a string".to_string(),
        Json::Array(a) => format!("an array of length {}", a.len()),
        Json::Object(_) => "an object".to_string(),
    };
    let expected = |what: &str| Err(format!(": expected {what}, found {}", kind(j)));
    match t {
        Type::Real => match j.as_f64() {
            Some(x) => Ok(Value::Real(x)),
            None => expected("a number"),
        },
        Type::Int => match (j.as_i64(), j.as_f64()) {
            (Some(n), _) => Ok(Value::Int(n)),
            (None, Some(x)) if x.fract() == 0.0 && x.abs() < 9.0e15 => Ok(Value::Int(x as i64)),
            _ => expected("an integer"),
        },
        Type::Bool => match j {
            Json::Bool(b) => Ok(Value::Bool(*b)),
            _ => expected("a boolean"),
        },
        Type::Unit => match j {
            Json::Null => Ok(Value::Unit),
            _ => expected("null"),
        },
        Type::Array(e) => match j {
            Json::Array(items) => {
                let vs = items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| from_json(x, e).map_err(|m| format!("[{i}]{m}")))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Value::Array(Rc::new(vs)))
            }
            _ => expected("an array"),
        },
        Type::Tuple(ts) => match j {
            Json::Array(items) if items.len() == ts.len() => {
                let vs = items
                    .iter()
                    .zip(ts.iter())
                    .enumerate()
                    .map(|(i, (x, t))| from_json(x, t).map_err(|m| format!("[{i}]{m}")))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Value::tuple(vs))
            }
            _ => expected(&format!("an array of {}", ts.len())),
        },
        t => Err(format!(": a parameter of type {t} cannot come from JSON")),
    }
}

/// A data value as JSON: numbers, booleans, arrays (tuples too); a non-finite real is `null`.
pub fn to_json(v: &Value) -> Json {
    match v {
        Value::Real(x) => serde_json::Number::from_f64(*x).map_or(Json::Null, Json::Number),
        Value::Int(n) => Json::from(*n),
        Value::Bool(b) => Json::Bool(*b),
        Value::Unit => Json::Null,
        Value::Tuple(vs) => Json::Array(vs.iter().map(to_json).collect()),
        Value::Array(vs) => Json::Array(vs.iter().map(to_json).collect()),
        other => Json::String(other.to_string()),
    }
}

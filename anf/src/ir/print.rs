//! The IR's text format (parsed back by `parse`; `print(parse(print(m))) == print(m)`).
//!
//! ```text
//! extern fallible $nabla_bag_new(i64) -> ptr
//! tag t0 = @lam0 env(f64)
//!
//! fn @lam0(ptr, f64) -> f64 {
//! b0(v0: ptr, v1: f64):
//!     v2 = load.f64 v0+0
//!     v3 = fmul v1, v2
//!     return v3
//! }
//! ```
//! Value and block numbers are printed as they are in the arenas, so printed IR matches the
//! entities a verifier error names.

use std::fmt::Write;

use super::{BinaryOp, BlockCall, Cmp, Function, Inst, Module, Op, Signature, TagDecl, Type, UnaryOp, Value};

/// The whole module as text: externs, tags, then functions, separated by blank lines.
pub fn print(module: &Module) -> String {
    let mut out = String::new();
    for e in module.externs.values() {
        let fallible = if e.fallible { "fallible " } else { "" };
        let _ = writeln!(out, "extern {fallible}${}{}", e.name, sig_text(&e.sig));
    }
    for (id, t) in module.tags.iter() {
        let _ = writeln!(out, "tag {id} = {}", tag_text(module, t));
    }
    for f in module.funcs.values() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&print_function(module, f));
    }
    out
}

/// One function as text (names of callees and tags come from `module`).
pub fn print_function(module: &Module, func: &Function) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "fn @{}{} {{", func.name, sig_text(&func.sig));
    for &b in &func.layout {
        let Some(data) = func.blocks.get(b) else {
            let _ = writeln!(out, "; {b} is not a block of this function");
            continue;
        };
        let params = &data.params;
        if params.is_empty() {
            let _ = writeln!(out, "{b}:");
        } else {
            let ty = |v: &Value| func.values.get(*v).map_or("?", |d| d.ty.name());
            let ps: Vec<String> = params.iter().map(|v| format!("{v}: {}", ty(v))).collect();
            let _ = writeln!(out, "{b}({}):", ps.join(", "));
        }
        for &inst in &data.insts {
            let _ = writeln!(out, "    {}", inst_text(module, func, inst));
        }
    }
    out.push_str("}\n");
    out
}

/// `(i64, f64) -> f64`, `() -> ()`, `(ptr) -> (i64, i64)`.
pub fn sig_text(sig: &Signature) -> String {
    let ps: Vec<&str> = sig.params.iter().map(|t| t.name()).collect();
    let rets = match sig.rets.as_slice() {
        [t] => t.name().to_string(),
        rs => format!("({})", rs.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")),
    };
    format!("({}) -> {}", ps.join(", "), rets)
}

/// `@lam0 env(f64, i64)`.
fn tag_text(module: &Module, t: &TagDecl) -> String {
    let env: Vec<&str> = t.env.iter().map(|t| t.name()).collect();
    format!("@{} env({})", func_name(module, t.func), env.join(", "))
}

/// The name of a function, or its entity number if it does not exist (broken IR still prints).
fn func_name(module: &Module, f: super::FuncId) -> String {
    match module.funcs.get(f) {
        Some(func) => func.name.clone(),
        None => format!("{f}"),
    }
}

/// One instruction, results included.
pub fn inst_text(module: &Module, func: &Function, inst: Inst) -> String {
    let Some(data) = func.insts.get(inst) else { return format!("; {inst} is not an instruction") };
    let body = op_text(module, func, &data.op, &data.results);
    if data.results.is_empty() {
        body
    } else {
        format!("{} = {body}", list(&data.results))
    }
}

/// `v1, v2`.
fn list(vs: &[Value]) -> String {
    vs.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
}

/// `b1(v1, v2)` or `b1`.
fn block_call(bc: &BlockCall) -> String {
    if bc.args.is_empty() {
        bc.block.to_string()
    } else {
        format!("{}({})", bc.block, list(&bc.args))
    }
}

/// `v3+8`, `v3-16`.
fn address(p: Value, offset: i32) -> String {
    if offset < 0 {
        format!("{p}{offset}")
    } else {
        format!("{p}+{offset}")
    }
}

/// An `f64` literal that parses back to the same bits: Rust's `{:?}` when finite, else hex bits.
pub fn f64_text(bits: u64) -> String {
    let x = f64::from_bits(bits);
    if x.is_finite() {
        format!("{x:?}")
    } else {
        format!("0x{bits:016x}")
    }
}

/// The mnemonic of a one-operand operation.
pub fn unary_name(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::Ineg => "ineg",
        UnaryOp::Fneg => "fneg",
        UnaryOp::Fabs => "fabs",
        UnaryOp::Fsqrt => "fsqrt",
        UnaryOp::Not => "not",
        UnaryOp::Itof => "itof",
        UnaryOp::Btoi => "btoi",
    }
}

/// The mnemonic of a two-operand operation.
pub fn binary_name(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Iadd => "iadd",
        BinaryOp::Isub => "isub",
        BinaryOp::Imul => "imul",
        BinaryOp::Sdiv => "sdiv",
        BinaryOp::Srem => "srem",
        BinaryOp::Fadd => "fadd",
        BinaryOp::Fsub => "fsub",
        BinaryOp::Fmul => "fmul",
        BinaryOp::Fdiv => "fdiv",
        BinaryOp::And => "and",
        BinaryOp::Or => "or",
        BinaryOp::Xor => "xor",
    }
}

/// The name of a comparison condition.
pub fn cmp_name(c: Cmp) -> &'static str {
    match c {
        Cmp::Eq => "eq",
        Cmp::Ne => "ne",
        Cmp::Lt => "lt",
        Cmp::Le => "le",
        Cmp::Gt => "gt",
        Cmp::Ge => "ge",
    }
}

/// The operation part of an instruction.
fn op_text(module: &Module, func: &Function, op: &Op, results: &[Value]) -> String {
    match op {
        Op::Iconst(n) => format!("iconst {n}"),
        Op::Fconst(bits) => format!("fconst {}", f64_text(*bits)),
        Op::Bconst(b) => format!("bconst {b}"),
        Op::Null => "null".to_string(),
        Op::TagConst(t) => format!("tag {t}"),
        Op::Unary(u, a) => format!("{} {a}", unary_name(*u)),
        Op::Binary(b, x, y) => format!("{} {x}, {y}", binary_name(*b)),
        Op::Icmp(c, x, y) => format!("icmp {} {x}, {y}", cmp_name(*c)),
        Op::Fcmp(c, x, y) => format!("fcmp {} {x}, {y}", cmp_name(*c)),
        Op::Select(c, x, y) => {
            // The result's type; a select without a result (broken IR) prints as i64.
            let ty = results.first().and_then(|r| func.values.get(*r)).map_or(Type::I64, |d| d.ty);
            format!("select.{ty} {c}, {x}, {y}")
        }
        Op::Load(ty, p, off) => format!("load.{ty} {}", address(*p, *off)),
        Op::Store(v, p, off) => format!("store {v}, {}", address(*p, *off)),
        Op::Alloc(n) => format!("alloc {n}"),
        Op::NewArray(len, stride) => format!("newarray {len}, {stride}"),
        Op::ArrayLen(a) => format!("arraylen {a}"),
        Op::ElemAddr(a, i, stride) => format!("elemaddr {a}, {i}, {stride}"),
        Op::BoundsCheck(i, n, site) => format!("boundscheck {i}, {n}, {site}"),
        Op::Call(f, args) => format!("call @{}({})", func_name(module, *f), list(args)),
        Op::CallExt(e, args) => {
            let name = module.externs.get(*e).map(|e| e.name.clone()).unwrap_or_else(|| e.to_string());
            format!("call ${name}({})", list(args))
        }
        Op::Jump(bc) => format!("jump {}", block_call(bc)),
        Op::Brif(c, t, e) => format!("brif {c}, {}, {}", block_call(t), block_call(e)),
        Op::Switch(v, cases) => {
            let cs: Vec<String> = cases.iter().map(|(t, bc)| format!("{t}: {}", block_call(bc))).collect();
            format!("switch {v}, [{}]", cs.join(", "))
        }
        Op::Return(vs) if vs.is_empty() => "return".to_string(),
        Op::Return(vs) => format!("return {}", list(vs)),
        Op::Trap(code, site, a, b) => format!("trap {}({site}, {a}, {b})", code.name()),
    }
}

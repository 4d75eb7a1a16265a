//! How values of the language's (ground, monomorphic) types are represented in IR words and in
//! memory. This is the contract between lowering, the JIT and the runtime's marshalling.
//!
//! # In registers (SSA values)
//! A value of type `t` is the list of words `flatten(t)`, left to right:
//! - `Int` is one `i64`; `Real` one `f64`; `Bool` one `bool`; `Unit` no word at all.
//! - A tuple is the concatenation of its components (tuples are never boxed in registers).
//! - `Array a`, `Bag a` and `Map k v` are one `ptr` each.
//! - A function is a closure, two words: the tag (`i64`, a `TagId`'s index) and the environment
//!   record (`ptr`, null when nothing is captured).
//! - `Dual t` and `Omega`-valued results are functions (linear functionals), so closures too;
//!   `Group t` is one `ptr` to a group record; `Delta t` is two words, a kind (`i64`: 0 `replace`,
//!   1 `gchange`) and a `ptr` to the payload record.
//!
//! # In memory (records, array elements, the entry trampoline's argument buffer)
//! Every word takes one 8-byte, 8-aligned slot; a `bool` is stored as the `i64` 0 or 1, so
//! memory holds clean 64-bit words the runtime can hash and compare.
//! - A record (environment, tuple stored in memory) is its words' slots in order.
//! - An array is `[len: i64][element 0]...[element len-1]`; each element is the slots of its
//!   flattened words, so the stride is `8 * flatten(a).len()` (0 for `Array Unit`).
//! - `Group t` record: a kind word, then the kind's fields: `[0]` intGroup, `[1]` realGroup,
//!   `[2]` bagGroup, `[3, inner]` mapGroup, `[4, first, second]` pairGroup, and
//!   `[5, op tag, op env, inverse tag, inverse env, zero: words of t]` a user's `group`
//!   (`anf::lower` branches on the kind; see its `groups` module).
//! - `Delta t` payload: `replace v` holds the words of `v`; `gchange g dv` holds the group `ptr`
//!   then the words of `dv`.
//! - Bags and maps are runtime collections behind their `ptr` (see `runtime::native`): keys are
//!   the slots of the key's words, compared lexicographically as signed integers, which orders
//!   `Int`, `Bool` and tuples of them as the language does.

use frontend::types::Type as LangType;

use super::Type;

/// The words a value of language type `t` occupies; an error for a type that is not ground.
pub fn flatten(t: &LangType) -> Result<Vec<Type>, String> {
    let mut out = Vec::new();
    flatten_into(t, &mut out)?;
    Ok(out)
}

/// Appends `t`'s words to `out`.
fn flatten_into(t: &LangType, out: &mut Vec<Type>) -> Result<(), String> {
    match t {
        LangType::Int => out.push(Type::I64),
        LangType::Real => out.push(Type::F64),
        LangType::Bool => out.push(Type::Bool),
        LangType::Unit => {}
        LangType::Tuple(ts) => {
            for c in ts.iter() {
                flatten_into(c, out)?;
            }
        }
        LangType::Array(_) | LangType::Bag(_) | LangType::Map(..) | LangType::Group(_) => out.push(Type::Ptr),
        LangType::Fun(..) | LangType::Dual(_) => out.extend([Type::I64, Type::Ptr]),
        LangType::Delta(_) => out.extend([Type::I64, Type::Ptr]),
        LangType::Var(_) => return Err(format!("type `{t}` is not ground: no layout before monomorphisation")),
    }
    Ok(())
}

/// The size in bytes of the memory slots of `words`.
pub fn slots_size(words: &[Type]) -> u32 {
    8 * words.len() as u32
}

/// The stride of `Array t`'s elements in bytes.
pub fn array_stride(elem: &LangType) -> Result<u32, String> {
    Ok(slots_size(&flatten(elem)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn tuples_flatten_and_collections_are_pointers() {
        let t = LangType::tuple(vec![
            LangType::Real,
            LangType::Unit,
            LangType::tuple(vec![LangType::Int, LangType::Bool]),
            LangType::array(LangType::Real),
            LangType::fun(LangType::Real, LangType::Real),
            LangType::Bag(Rc::new(LangType::Int)),
        ]);
        assert_eq!(
            flatten(&t).unwrap(),
            vec![Type::F64, Type::I64, Type::Bool, Type::Ptr, Type::I64, Type::Ptr, Type::Ptr]
        );
        assert_eq!(array_stride(&LangType::tuple(vec![LangType::Real, LangType::Int])).unwrap(), 16);
        assert_eq!(array_stride(&LangType::Unit).unwrap(), 0);
        assert!(flatten(&LangType::Var(frontend::types::TyVar(0))).is_err());
    }
}

//! The differentiation passes: `incremental` (ILC's Derive and the passes after it), `reverse`
//! (compiled reverse mode: gradients as ordinary terms) and `rules` (each Real primitive's
//! derivative, shared by the transform and the interpreter's pullback reducer).

pub mod incremental;
pub mod reverse;
pub mod rules;

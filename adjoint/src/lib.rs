//! The differentiation passes: `incremental` (ILC's Derive and the passes after it).

pub mod incremental;

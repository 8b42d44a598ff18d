//! Leaf helpers every layer may use.

pub mod fault;
pub mod redact;
pub mod signame;
pub mod text;
pub mod time;
pub mod version;

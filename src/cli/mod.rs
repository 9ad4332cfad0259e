//! Subcommands of the `trajwiki` binary that this part of the tree provides.

pub mod embed;
pub mod model;

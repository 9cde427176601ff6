//! Scenarios that measure no split and never stop Prometheus or the operator: they run side
//! by side, one namespace each (libtest's threads).

mod edits;
mod fresh;
mod gitops;
mod header;
mod invalid;
mod plugin;
mod robust;
mod ruby;
mod select;

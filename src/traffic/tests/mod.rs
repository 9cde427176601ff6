//! Unit tests of the routers: one file per subject.

mod gateway;
mod router;
mod selection;
mod services;

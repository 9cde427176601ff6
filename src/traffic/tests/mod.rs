//! Unit tests of the routers: one file per subject.

mod gateway;
mod router;
mod services;

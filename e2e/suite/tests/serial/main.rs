//! Scenarios that run alone ([`e2e_tests::alone`]): they measure a traffic split, or stop
//! Prometheus or the operator, or judge relative latency that other scenarios' load would
//! disturb on a 2-core machine.

mod autoscaler;
mod blind;
mod capacity;
mod gateway;
mod judge;
mod operator;
mod prometheus;
mod promote;
mod rails;
mod rails_apps;
mod rollback;
mod ruby;

//! The plugin's commands: exact output of the renderers, and every command against a scripted
//! API server (the exact calls, their bodies, and the one-line errors).

mod capacity;
mod cli;
mod control;
mod dashboard;
mod external;
mod fixtures;
mod get;
mod history;
mod init;
mod init_probe;
mod prometheus;
mod recommend;
mod render;
mod report;
mod selection;

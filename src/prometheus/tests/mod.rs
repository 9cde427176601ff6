mod client;
mod provider;
mod response;

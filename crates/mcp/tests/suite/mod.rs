mod client_errors;
mod everything;
mod grammar;
mod http;
mod list_changed;
mod restart;
mod support;
mod time_server;

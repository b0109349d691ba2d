mod client_errors;
mod everything;
mod http;
mod restart;
mod support;
mod time_server;

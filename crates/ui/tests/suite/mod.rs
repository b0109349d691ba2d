mod browser;
mod server;
mod support;

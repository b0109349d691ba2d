mod actions;
mod browser;
mod server;
mod support;
mod waterfall;

mod actions;
mod browser;
mod selenium_python;
mod server;
mod support;
mod waterfall;

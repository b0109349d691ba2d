mod contexts;
mod hostile;
mod sdk;
mod server;
mod support;
mod teammate;

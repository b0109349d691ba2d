mod approval_ids;
mod contexts;
mod hostile;
mod sdk;
mod sdk_python;
mod server;
mod support;
mod teammate;

mod backends;
mod postgres_store;
mod session_log;
mod store;

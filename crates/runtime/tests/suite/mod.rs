mod corpus_round_trip;
mod request_events;
mod shutdown;
mod supervisor;
mod support;
mod wire_round_trip;

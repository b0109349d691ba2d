mod corpus_round_trip;
mod supervisor;
mod support;

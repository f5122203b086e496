//! Nothing here: the example is `tests/example.rs`, a user's test file using only
//! `brook-testkit` and `rdkafka`.

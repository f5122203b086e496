//! Helpers for the real-client tests.

//! The live page (`docs/LIVE-PAGE.md`): one HTML file with its script and styles inline,
//! compiled into the binary, so a node's admin listener and the supervisor serve it without
//! any other file or network access.

/// The page, served at `GET /` by the admin listener and the supervisor.
pub const HTML: &str = include_str!("live_page.html");

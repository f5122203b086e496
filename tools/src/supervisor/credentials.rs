//! `brook cluster --http-auth`: a user `admin` with a fresh random password, written to
//! `<data-dir>/http-credentials.properties` (owner-only), required by the supervisor's HTTP
//! API and by every node's admin listener (`admin.basic.auth.credentials.file`), and used by
//! the supervisor for its own calls to the nodes ([`brook::admin_security`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use brook::admin_security::{
    basic_header, BasicCredentials, CREDENTIALS_ENV, CREDENTIALS_FILE_KEY,
};

/// The user `--http-auth` makes.
pub const HTTP_AUTH_USER: &str = "admin";

/// The credentials of a cluster started with `--http-auth`.
pub(super) struct HttpAuth {
    pub(super) file: PathBuf,
    password: String,
}

impl HttpAuth {
    /// Writes the credentials file (anew each start: a fresh password).
    pub(super) fn prepare(data_dir: &Path) -> Result<HttpAuth, String> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::create_dir_all(data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
        let file = data_dir.join("http-credentials.properties");
        let password = brook::security::scram::secure_random_string();
        let _ = std::fs::remove_file(&file);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&file)
            .and_then(|mut f| writeln!(f, "{HTTP_AUTH_USER}={password}"))
            .map_err(|e| format!("{}: {e}", file.display()))?;
        Ok(HttpAuth { file, password })
    }

    /// The node setting, before the user's `--override`s.
    pub(super) fn overrides(&self) -> Vec<String> {
        vec![format!("{CREDENTIALS_FILE_KEY}={}", self.file.display())]
    }

    /// What the supervisor's API accepts.
    pub(super) fn credentials(&self) -> Arc<BasicCredentials> {
        Arc::new(BasicCredentials::single(HTTP_AUTH_USER, &self.password))
    }

    /// The `Authorization` value of the supervisor's calls to the nodes.
    pub(super) fn authorization(&self) -> String {
        basic_header(HTTP_AUTH_USER, &self.password)
    }

    /// The lines printed once the cluster is ready.
    pub(super) fn client_settings(&self) -> String {
        format!(
            "  HTTP APIs (supervisor, admin listeners, live page): Basic user {HTTP_AUTH_USER} \
             password {pw} (also in {file});\n  brook fault/node: export {CREDENTIALS_ENV}={HTTP_AUTH_USER}:{pw}\n",
            pw = self.password,
            file = self.file.display()
        )
    }
}

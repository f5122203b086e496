//! `brook cluster --secure`: a CA and key and trust stores in the cluster's data directory,
//! every node's client listener on SSL with `ssl.client.auth=required`, SSL between
//! brokers and on the controller listener (mutual TLS between the quorum's voters), and client settings for kafka-clients, librdkafka and franz-go, written next to
//! the stores and printed once the cluster is ready.
//!
//! `--secure --sasl`: the client listener, also the inter-broker one, is SASL_SSL with
//! SCRAM-SHA-512 (server-authenticated TLS, no client certificate); the controller listener
//! stays mutual TLS. Every node is formatted with the SCRAM user [`SCRAM_USER`] before its
//! first start (`brook format --add-scram`, Kafka's `kafka-storage format --add-scram`), and
//! logs in to the others as that user (`sasl.mechanism.inter.broker.protocol`), as a Kafka
//! cluster secured with SCRAM between brokers does. The client settings say the same.

use std::path::{Path, PathBuf};

use brook::security::bootstrap::{self, BootstrapCredential};
use brook::security::ssl::certs::{write_test_pki, TestPki};

/// The password of the PKCS12 stores `--secure` writes.
pub const SECURE_STORE_PASSWORD: &str = "brook-secret";
/// The SCRAM user of `--secure --sasl`: the clients' and the nodes' own login. Fixed, like
/// the store password, so a cluster restarted on its data directory (whose metadata log
/// holds the user) takes the same client settings.
pub const SCRAM_USER: &str = "admin";
pub const SCRAM_PASSWORD: &str = "admin-secret";
/// The one mechanism `--secure --sasl` enables.
pub const SCRAM_MECHANISM: &str = "SCRAM-SHA-512";

/// The stores of a secured cluster.
pub(super) struct Secure {
    pki: TestPki,
    dir: PathBuf,
    /// `--sasl`: the SCRAM user every node is formatted with (SASL_SSL with SCRAM-SHA-512 on
    /// the client listener instead of mutual TLS); salted once, the same on every node.
    scram_user: Option<BootstrapCredential>,
}

impl Secure {
    /// Writes the stores into `<data_dir>/tls` (anew each start: a fresh CA).
    pub(super) fn prepare(data_dir: &Path, sasl: bool) -> Result<Secure, String> {
        let dir = data_dir.join("tls");
        let pki = write_test_pki(&dir, SECURE_STORE_PASSWORD)?;
        let scram_user = match sasl {
            true => Some(bootstrap::parse_add_scram(&format!(
                "{SCRAM_MECHANISM}=[name={SCRAM_USER},password={SCRAM_PASSWORD}]"
            ))?),
            false => None,
        };
        Ok(Secure {
            pki,
            dir,
            scram_user,
        })
    }

    /// `--sasl`: writes the SCRAM user into node log directory `log_dir` as
    /// `brook format --add-scram` does, unless it was formatted before (the cluster records
    /// the bootstrap users once; a restarted cluster has them in its metadata log).
    pub(super) fn format(&self, log_dir: &Path) -> Result<(), String> {
        let Some(user) = &self.scram_user else {
            return Ok(());
        };
        if bootstrap::path(log_dir).exists() {
            return Ok(());
        }
        bootstrap::write(log_dir, std::slice::from_ref(user))
            .map(|_| ())
            .map_err(|e| format!("{}: {e}", log_dir.display()))
    }

    /// The librdkafka settings file [`Secure::client_settings`] writes.
    pub(super) fn librdkafka_path(&self) -> PathBuf {
        self.dir.join(LIBRDKAFKA_PROPERTIES)
    }

    /// What the printed client settings are headed with.
    pub(super) fn heading(&self) -> String {
        if self.scram_user.is_some() {
            format!("SASL_SSL clients ({SCRAM_MECHANISM}, user {SCRAM_USER})")
        } else {
            "TLS clients (ssl.client.auth=required)".into()
        }
    }

    /// The node settings, before the user's `--override`s.
    pub(super) fn overrides(&self) -> Vec<String> {
        let b = &self.pki.broker;
        let listener = if self.scram_user.is_some() {
            "SASL_SSL"
        } else {
            "SSL"
        };
        let mut settings = vec![
            (
                "listener.security.protocol.map".to_string(),
                format!("{listener}:{listener},CONTROLLER:SSL"),
            ),
            ("inter.broker.listener.name".into(), listener.into()),
            // PEM, not PKCS12: a PKCS12 store is decrypted with PBKDF2 at every start, which
            // a debug build (the tests') takes seconds over; the PKCS12 files are for clients.
            ("ssl.keystore.type".into(), "PEM".into()),
            (
                "ssl.keystore.location".into(),
                b.keystore_pem.display().to_string(),
            ),
            ("ssl.truststore.type".into(), "PEM".into()),
            (
                "ssl.truststore.location".into(),
                b.truststore_pem.display().to_string(),
            ),
        ];
        if self.scram_user.is_some() {
            // Client certificates only between the quorum's voters; SCRAM on the rest.
            let jaas = format!(
                r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="{SCRAM_USER}" password="{SCRAM_PASSWORD}";"#
            );
            settings.extend([
                (
                    "listener.name.controller.ssl.client.auth".into(),
                    "required".into(),
                ),
                (
                    "sasl.mechanism.inter.broker.protocol".into(),
                    SCRAM_MECHANISM.into(),
                ),
                (
                    "listener.name.sasl_ssl.sasl.enabled.mechanisms".into(),
                    SCRAM_MECHANISM.into(),
                ),
                (
                    format!(
                        "listener.name.sasl_ssl.{}.sasl.jaas.config",
                        SCRAM_MECHANISM.to_ascii_lowercase()
                    ),
                    jaas,
                ),
            ]);
        } else {
            settings.push(("ssl.client.auth".into(), "required".into()));
        }
        settings
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    }

    /// The client settings for `bootstrap`, written to files in the stores' directory and
    /// returned as text to print.
    pub(super) fn client_settings(&self, bootstrap: &str) -> Result<String, String> {
        let (java, rdkafka, franz) = if self.scram_user.is_some() {
            self.sasl_clients(bootstrap)
        } else {
            self.tls_clients(bootstrap)
        };
        let files = [
            (
                "client.properties",
                "kafka-clients, --command-config of Kafka's tools",
                &java,
            ),
            (LIBRDKAFKA_PROPERTIES, "librdkafka", &rdkafka),
            (
                "franz-go.txt",
                "franz-go (crypto/tls, crypto/x509, os, kgo)",
                &franz,
            ),
        ];
        let mut out = String::new();
        for (name, who, text) in files {
            let path = self.dir.join(name);
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            out.push_str(&format!("  # {who}: {}\n", path.display()));
            out.extend(text.lines().map(|l| format!("  {l}\n")));
        }
        Ok(out)
    }

    /// kafka-clients, librdkafka and franz-go settings for mutual TLS.
    fn tls_clients(&self, bootstrap: &str) -> (String, String, String) {
        let c = &self.pki.client;
        let java = format!(
            "bootstrap.servers={bootstrap}\nsecurity.protocol=SSL\n\
             ssl.truststore.type=PKCS12\nssl.truststore.location={}\nssl.truststore.password={SECURE_STORE_PASSWORD}\n\
             ssl.keystore.type=PKCS12\nssl.keystore.location={}\nssl.keystore.password={SECURE_STORE_PASSWORD}\n",
            c.truststore_p12.display(),
            c.keystore_p12.display()
        );
        let rdkafka = format!(
            "bootstrap.servers={bootstrap}\nsecurity.protocol=ssl\nssl.ca.location={}\n\
             ssl.certificate.location={}\nssl.key.location={}\n",
            c.truststore_pem.display(),
            c.cert_pem.display(),
            c.key_pem.display()
        );
        let franz = format!(
            "cert, _ := tls.LoadX509KeyPair({:?}, {:?})\n\
             ca, _ := os.ReadFile({:?})\n\
             roots := x509.NewCertPool()\n\
             roots.AppendCertsFromPEM(ca)\n\
             client, _ := kgo.NewClient(kgo.SeedBrokers({}),\n\
             \tkgo.DialTLSConfig(&tls.Config{{Certificates: []tls.Certificate{{cert}}, RootCAs: roots}}))\n",
            c.cert_pem.display().to_string(),
            c.key_pem.display().to_string(),
            c.truststore_pem.display().to_string(),
            franz_seeds(bootstrap)
        );
        (java, rdkafka, franz)
    }

    /// kafka-clients, librdkafka and franz-go settings for SASL_SSL with SCRAM-SHA-512: the
    /// CA to trust, the user to log in as.
    fn sasl_clients(&self, bootstrap: &str) -> (String, String, String) {
        let c = &self.pki.client;
        let java = format!(
            "bootstrap.servers={bootstrap}\nsecurity.protocol=SASL_SSL\n\
             sasl.mechanism={SCRAM_MECHANISM}\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{SCRAM_USER}\" password=\"{SCRAM_PASSWORD}\";\n\
             ssl.truststore.type=PKCS12\nssl.truststore.location={}\nssl.truststore.password={SECURE_STORE_PASSWORD}\n",
            c.truststore_p12.display(),
        );
        let rdkafka = format!(
            "bootstrap.servers={bootstrap}\nsecurity.protocol=sasl_ssl\n\
             sasl.mechanisms={SCRAM_MECHANISM}\nsasl.username={SCRAM_USER}\nsasl.password={SCRAM_PASSWORD}\n\
             ssl.ca.location={}\n",
            c.truststore_pem.display(),
        );
        let franz = format!(
            "ca, _ := os.ReadFile({:?})\n\
             roots := x509.NewCertPool()\n\
             roots.AppendCertsFromPEM(ca)\n\
             client, _ := kgo.NewClient(kgo.SeedBrokers({}),\n\
             \tkgo.DialTLSConfig(&tls.Config{{RootCAs: roots}}),\n\
             \tkgo.SASL(scram.Auth{{User: {SCRAM_USER:?}, Pass: {SCRAM_PASSWORD:?}}}.AsSha512Mechanism()))\n",
            c.truststore_pem.display().to_string(),
            franz_seeds(bootstrap)
        );
        (java, rdkafka, franz)
    }
}

/// The librdkafka settings file in `<data-dir>/tls` (the chaos checker reads it).
pub const LIBRDKAFKA_PROPERTIES: &str = "librdkafka.properties";

/// `bootstrap`'s addresses as Go string literals.
fn franz_seeds(bootstrap: &str) -> String {
    let seeds: Vec<String> = bootstrap.split(',').map(|s| format!("{s:?}")).collect();
    seeds.join(", ")
}

//! `brook cluster --secure`: a CA and key and trust stores in the cluster's data directory,
//! every node's client listener on SSL with `ssl.client.auth=required`, SSL between
//! brokers and on the controller listener (mutual TLS between the quorum's voters), and client settings for kafka-clients, librdkafka and franz-go, written next to
//! the stores and printed once the cluster is ready.

use std::path::{Path, PathBuf};

use brook::security::ssl::certs::{write_test_pki, TestPki};

/// The password of the PKCS12 stores `--secure` writes.
pub const SECURE_STORE_PASSWORD: &str = "brook-secret";

/// The stores of a secured cluster.
pub(super) struct Secure {
    pki: TestPki,
    dir: PathBuf,
}

impl Secure {
    /// Writes the stores into `<data_dir>/tls` (anew each start: a fresh CA).
    pub(super) fn prepare(data_dir: &Path) -> Result<Secure, String> {
        let dir = data_dir.join("tls");
        let pki = write_test_pki(&dir, SECURE_STORE_PASSWORD)?;
        Ok(Secure { pki, dir })
    }

    /// The node settings, before the user's `--override`s.
    pub(super) fn overrides(&self) -> Vec<String> {
        let b = &self.pki.broker;
        [
            (
                "listener.security.protocol.map",
                "SSL:SSL,CONTROLLER:SSL".to_string(),
            ),
            ("inter.broker.listener.name", "SSL".into()),
            ("ssl.keystore.type", "PKCS12".into()),
            (
                "ssl.keystore.location",
                b.keystore_p12.display().to_string(),
            ),
            ("ssl.keystore.password", SECURE_STORE_PASSWORD.into()),
            ("ssl.truststore.type", "PKCS12".into()),
            (
                "ssl.truststore.location",
                b.truststore_p12.display().to_string(),
            ),
            ("ssl.truststore.password", SECURE_STORE_PASSWORD.into()),
            ("ssl.client.auth", "required".into()),
        ]
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
    }

    /// The client settings for `bootstrap`, written to files in the stores' directory and
    /// returned as text to print.
    pub(super) fn client_settings(&self, bootstrap: &str) -> Result<String, String> {
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
        let seeds: Vec<String> = bootstrap.split(',').map(|s| format!("{s:?}")).collect();
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
            seeds.join(", ")
        );
        let files = [
            (
                "client.properties",
                "kafka-clients, --command-config of Kafka's tools",
                &java,
            ),
            ("librdkafka.properties", "librdkafka", &rdkafka),
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
}

//! Certificates for test and development clusters (`brook cluster --secure`, the TLS tests):
//! a CA, node and client certificates signed by it, and the key and trust stores Kafka's
//! clients read (PEM and PKCS12), as Kafka's `TestSslUtils` makes them for its own tests.

use std::path::{Path, PathBuf};

use pkcs8::der::pem::LineEnding;
use pkcs8::pkcs5::pbes2;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

/// PBKDF2 rounds of an encrypted PEM key (OpenSSL's `pkcs8 -topk8 -v2` default is 2048).
const PBKDF2_ROUNDS: u32 = 2048;

/// A certificate authority that signs node and client certificates.
pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// A certificate with its private key, signed by a [`Ca`].
pub struct Issued {
    pub cert_pem: String,
    pub cert_der: Vec<u8>,
    /// PKCS#8 DER.
    pub key_der: Vec<u8>,
    /// Unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`).
    pub key_pem: String,
}

fn dn(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "Brook");
    dn.push(DnType::CommonName, cn);
    dn
}

impl Ca {
    pub fn new(cn: &str) -> Result<Ca, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = dn(cn);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Ca { cert, key })
    }

    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    pub fn cert_der(&self) -> Vec<u8> {
        self.cert.der().to_vec()
    }

    /// A certificate for `cn` naming `sans` (host names or IP addresses), usable by a
    /// server and a client alike.
    pub fn issue(&self, cn: &str, sans: &[&str]) -> Result<Issued, rcgen::Error> {
        let mut params =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
        params.distinguished_name = dn(cn);
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.cert, &self.key)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
            key_pem: key.serialize_pem(),
        })
    }
}

impl Issued {
    /// The private key encrypted with `password` (`-----BEGIN ENCRYPTED PRIVATE KEY-----`,
    /// PBES2 with PBKDF2-SHA256 and AES-256-CBC), for `ssl.key.password`.
    pub fn encrypted_key_pem(&self, password: &str) -> Result<String, String> {
        let rng = super::provider().secure_random;
        let (mut salt, mut iv) = ([0u8; 16], [0u8; 16]);
        rng.fill(&mut salt)
            .map_err(|_| "no random bytes".to_string())?;
        rng.fill(&mut iv)
            .map_err(|_| "no random bytes".to_string())?;
        let params = pbes2::Parameters::pbkdf2_sha256_aes256cbc(PBKDF2_ROUNDS, &salt, &iv)
            .map_err(|e| e.to_string())?;
        let info =
            pkcs8::PrivateKeyInfo::try_from(self.key_der.as_slice()).map_err(|e| e.to_string())?;
        let doc = info
            .encrypt_with_params(params, password)
            .map_err(|e| e.to_string())?;
        doc.to_pem("ENCRYPTED PRIVATE KEY", LineEnding::LF)
            .map(|s| s.to_string())
            .map_err(|e| e.to_string())
    }

    /// A PKCS12 key store with this key and its chain (this certificate, then `ca`'s).
    pub fn pkcs12(&self, ca: &Ca, alias: &str, password: &str) -> Result<Vec<u8>, String> {
        let cert = |der: &[u8]| p12_keystore::Certificate::from_der(der).map_err(|e| e.to_string());
        let chain = vec![cert(&self.cert_der)?, cert(&ca.cert_der())?];
        let mut store = p12_keystore::KeyStore::new();
        let entry = p12_keystore::PrivateKeyChain::new(&self.key_der, alias.as_bytes(), chain);
        store.add_entry(alias, p12_keystore::KeyStoreEntry::PrivateKeyChain(entry));
        store.writer(password).write().map_err(|e| e.to_string())
    }
}

/// A PKCS12 trust store holding `ca`'s certificate as a trusted entry.
pub fn pkcs12_truststore(ca: &Ca, password: &str) -> Result<Vec<u8>, String> {
    let cert = p12_keystore::Certificate::from_der(&ca.cert_der()).map_err(|e| e.to_string())?;
    let mut store = p12_keystore::KeyStore::new();
    store.add_entry("ca", p12_keystore::KeyStoreEntry::Certificate(cert));
    store.writer(password).write().map_err(|e| e.to_string())
}

/// Where [`write_bundle`] put one party's files.
#[derive(Debug, Clone)]
pub struct StorePaths {
    /// Key and certificate chain in one PEM file (`ssl.keystore.type=PEM`).
    pub keystore_pem: PathBuf,
    /// PKCS12 key store (`ssl.keystore.type=PKCS12`).
    pub keystore_p12: PathBuf,
    /// The CA certificate (`ssl.truststore.type=PEM`).
    pub truststore_pem: PathBuf,
    /// The CA in a PKCS12 trust store (`ssl.truststore.type=PKCS12`).
    pub truststore_p12: PathBuf,
    /// The certificate alone and the key alone, for clients that take them apart
    /// (librdkafka's `ssl.certificate.location`/`ssl.key.location`, franz-go).
    pub cert_pem: PathBuf,
    pub key_pem: PathBuf,
}

/// Writes `name`'s key and trust stores into `dir` in PEM and PKCS12, with `password` for
/// the PKCS12 files.
pub fn write_bundle(
    dir: &Path,
    name: &str,
    ca: &Ca,
    issued: &Issued,
    password: &str,
) -> Result<StorePaths, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let paths = StorePaths {
        keystore_pem: dir.join(format!("{name}.keystore.pem")),
        keystore_p12: dir.join(format!("{name}.keystore.p12")),
        truststore_pem: dir.join("ca.pem"),
        truststore_p12: dir.join("truststore.p12"),
        cert_pem: dir.join(format!("{name}.cert.pem")),
        key_pem: dir.join(format!("{name}.key.pem")),
    };
    let write = |p: &Path, bytes: &[u8]| {
        std::fs::write(p, bytes).map_err(|e| format!("{}: {e}", p.display()))
    };
    let chain = format!("{}{}", issued.cert_pem, ca.cert_pem());
    write(
        &paths.keystore_pem,
        format!("{}{chain}", issued.key_pem).as_bytes(),
    )?;
    write(&paths.keystore_p12, &issued.pkcs12(ca, name, password)?)?;
    write(&paths.truststore_pem, ca.cert_pem().as_bytes())?;
    write(&paths.truststore_p12, &pkcs12_truststore(ca, password)?)?;
    write(&paths.cert_pem, chain.as_bytes())?;
    write(&paths.key_pem, issued.key_pem.as_bytes())?;
    Ok(paths)
}

/// The files [`write_test_pki`] makes.
#[derive(Debug, Clone)]
pub struct TestPki {
    /// For brokers: names `localhost` and `127.0.0.1`.
    pub broker: StorePaths,
    /// The broker's key encrypted with the store password, followed by its chain, for
    /// `ssl.keystore.type=PEM` with `ssl.key.password`.
    pub broker_encrypted_pem: PathBuf,
    /// For a mutual-TLS client: `CN=client,O=Brook`.
    pub client: StorePaths,
    /// A broker certificate that names only `wrong.example`: fails host name verification.
    pub wrong_host: StorePaths,
}

/// A CA and the broker, client and wrong-host stores of a test or development setup, all
/// PKCS12 files with `password` (Kafka's `TestSslUtils.createSslConfig` makes the same kinds).
pub fn write_test_pki(dir: &Path, password: &str) -> Result<TestPki, String> {
    let e = |e: rcgen::Error| e.to_string();
    let ca = Ca::new("Brook test CA").map_err(e)?;
    let broker = ca.issue("broker", &["localhost", "127.0.0.1"]).map_err(e)?;
    let client = ca.issue("client", &[]).map_err(e)?;
    let wrong = ca.issue("wrong", &["wrong.example"]).map_err(e)?;
    let broker_encrypted_pem = dir.join("broker.keystore.encrypted.pem");
    let paths = TestPki {
        broker: write_bundle(dir, "broker", &ca, &broker, password)?,
        broker_encrypted_pem: broker_encrypted_pem.clone(),
        client: write_bundle(dir, "client", &ca, &client, password)?,
        wrong_host: write_bundle(dir, "wrong-host", &ca, &wrong, password)?,
    };
    let encrypted = format!(
        "{}{}{}",
        broker.encrypted_key_pem(password)?,
        broker.cert_pem,
        ca.cert_pem()
    );
    std::fs::write(&broker_encrypted_pem, encrypted)
        .map_err(|e| format!("{}: {e}", broker_encrypted_pem.display()))?;
    Ok(paths)
}

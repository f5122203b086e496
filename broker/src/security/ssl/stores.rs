//! Keystores and truststores from Kafka's `ssl.*` keys, as Kafka's `DefaultSslEngineFactory`
//! loads them (its `createKeystore`/`createTruststore`, `FileBasedStore` and `PemStore`):
//! - PEM: a file at `ssl.keystore.location` holding a PKCS#8 private key and the certificate
//!   chain, or the same inline in `ssl.keystore.key` and `ssl.keystore.certificate.chain`; the
//!   key is an encrypted PKCS#8 key when `ssl.key.password` is set. A PEM store takes no store
//!   password.
//! - PKCS12 (and JKS, Kafka's default type, which Java reads from PKCS12 files too): a file
//!   with `ssl.keystore.password`; the key may have its own `ssl.key.password`.
//!
//! Every failure names the key whose value is wrong, so a bad store is a clear start-up error.

use rustls::pki_types::pem::{PemObject, SectionKind};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::RootCertStore;

use super::{SslError, SslView};

/// Kafka's `DefaultSslEngineFactory.PEM_TYPE`.
pub const PEM_TYPE: &str = "PEM";

/// Largest keystore or truststore file read.
pub const STORE_FILE_BYTES_MAX: u64 = 4 * 1024 * 1024;

/// A JKS file starts with these bytes; Brook reads PKCS12 and PEM stores only.
const JKS_MAGIC: [u8; 4] = [0xfe, 0xed, 0xfe, 0xed];

/// A certificate chain (the leaf first) and its private key.
pub struct KeyMaterial {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl Clone for KeyMaterial {
    fn clone(&self) -> Self {
        KeyMaterial {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

/// The keystore a view configures, `None` when it configures none (Kafka's
/// `createKeystore`, with its checks in its order).
pub fn keystore(v: &SslView<'_>) -> Result<Option<KeyMaterial>, SslError> {
    let ty = v.store_type("ssl.keystore.type");
    let location = v.get("ssl.keystore.location");
    let password = v.get("ssl.keystore.password");
    let key_password = v.get("ssl.key.password");
    let inline_key = v.get("ssl.keystore.key");
    let inline_chain = v.get("ssl.keystore.certificate.chain");
    if let Some(key) = inline_key {
        return inline_keystore(v, &ty, key, inline_chain, location, password, key_password)
            .map(Some);
    }
    if inline_chain.is_some() {
        return Err(v.err(
            "ssl.keystore.key",
            "the certificate chain is set but the private key is not",
        ));
    }
    let Some(location) = location else {
        if password.is_some() {
            return Err(v.err(
                "ssl.keystore.location",
                "a key store password is set but no key store",
            ));
        }
        return Ok(None);
    };
    let bytes = read_store(v, "ssl.keystore.location", location)?;
    if ty == PEM_TYPE {
        refuse_pem_store_password(v, password)?;
        let chain = pem_certificates(v, "ssl.keystore.location", &bytes)?;
        let key = pem_private_key(v, "ssl.keystore.location", &bytes, key_password)?;
        return Ok(Some(KeyMaterial { chain, key }));
    }
    let Some(password) = password else {
        return Err(v.err(
            "ssl.keystore.password",
            "a key store is set but no key store password",
        ));
    };
    pkcs12_key(v, &ty, &bytes, password, key_password).map(Some)
}

/// A PEM key store given inline (`ssl.keystore.key` with `ssl.keystore.certificate.chain`),
/// after Kafka's `createKeystore` checks for it: a PEM store type, the chain set, no store
/// location and no store password.
fn inline_keystore(
    v: &SslView<'_>,
    ty: &str,
    key: &str,
    chain: Option<&str>,
    location: Option<&str>,
    password: Option<&str>,
    key_password: Option<&str>,
) -> Result<KeyMaterial, SslError> {
    if ty != PEM_TYPE {
        return Err(v.err(
            "ssl.keystore.key",
            format!(
                "a private key can be given inline only for PEM, but ssl.keystore.type is {ty}"
            ),
        ));
    }
    let Some(chain) = chain else {
        return Err(v.err(
            "ssl.keystore.certificate.chain",
            "the private key is set but the certificate chain is not",
        ));
    };
    if location.is_some() {
        return Err(v.err(
            "ssl.keystore.location",
            "both a key store location and an inline private key are set",
        ));
    }
    refuse_pem_store_password(v, password)?;
    let chain = pem_certificates(v, "ssl.keystore.certificate.chain", chain.as_bytes())?;
    let key = pem_private_key(v, "ssl.keystore.key", key.as_bytes(), key_password)?;
    Ok(KeyMaterial { chain, key })
}

/// A PEM key store has no store password, only `ssl.key.password` (Kafka's
/// `createKeystore`).
fn refuse_pem_store_password(v: &SslView<'_>, password: Option<&str>) -> Result<(), SslError> {
    match password {
        Some(_) => Err(v.err(
            "ssl.keystore.password",
            "a PEM key store takes no store password, only ssl.key.password",
        )),
        None => Ok(()),
    }
}

/// The truststore a view configures, `None` when it configures none (Kafka's
/// `createTruststore`).
pub fn truststore(v: &SslView<'_>) -> Result<Option<RootCertStore>, SslError> {
    let ty = v.store_type("ssl.truststore.type");
    let location = v.get("ssl.truststore.location");
    let password = v.get("ssl.truststore.password");
    let certs = if let Some(inline) = v.get("ssl.truststore.certificates") {
        if ty != PEM_TYPE {
            return Err(v.err("ssl.truststore.certificates", format!("certificates can be given inline only for PEM, but ssl.truststore.type is {ty}")));
        }
        if location.is_some() {
            return Err(v.err(
                "ssl.truststore.location",
                "both a trust store location and inline certificates are set",
            ));
        }
        if password.is_some() {
            return Err(v.err(
                "ssl.truststore.password",
                "a PEM trust store takes no password",
            ));
        }
        pem_certificates(v, "ssl.truststore.certificates", inline.as_bytes())?
    } else if let Some(location) = location {
        let bytes = read_store(v, "ssl.truststore.location", location)?;
        if ty == PEM_TYPE {
            if password.is_some() {
                return Err(v.err(
                    "ssl.truststore.password",
                    "a PEM trust store takes no password",
                ));
            }
            pem_certificates(v, "ssl.truststore.location", &bytes)?
        } else {
            pkcs12_certificates(v, &ty, &bytes, password.unwrap_or(""))?
        }
    } else {
        if password.is_some() {
            return Err(v.err(
                "ssl.truststore.location",
                "a trust store password is set but no trust store",
            ));
        }
        return Ok(None);
    };
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| {
            v.err(
                "ssl.truststore.location",
                format!("a trusted certificate is not usable: {e}"),
            )
        })?;
    }
    Ok(Some(roots))
}

fn read_store(v: &SslView<'_>, key: &str, path: &str) -> Result<Vec<u8>, SslError> {
    let file =
        std::fs::File::open(path).map_err(|e| v.err(key, format!("cannot read {path}: {e}")))?;
    let mut bytes = Vec::new();
    use std::io::Read;
    file.take(STORE_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| v.err(key, format!("cannot read {path}: {e}")))?;
    if bytes.len() as u64 > STORE_FILE_BYTES_MAX {
        return Err(v.err(
            key,
            format!("{path} is larger than {STORE_FILE_BYTES_MAX} bytes"),
        ));
    }
    Ok(bytes)
}

/// Every CERTIFICATE entry of a PEM text; at least one (Kafka's `PemStore.certs`).
fn pem_certificates(
    v: &SslView<'_>,
    key: &str,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, SslError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| v.err(key, format!("invalid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(v.err(key, "at least one certificate expected, but none found"));
    }
    Ok(certs)
}

/// The one PKCS#8 private key of a PEM text (Kafka's `PemStore.privateKey`): plain
/// `PRIVATE KEY` without a key password, `ENCRYPTED PRIVATE KEY` with one.
fn pem_private_key(
    v: &SslView<'_>,
    key: &str,
    pem: &[u8],
    password: Option<&str>,
) -> Result<PrivateKeyDer<'static>, SslError> {
    let Some(password) = password else {
        let keys: Vec<Vec<u8>> = <(SectionKind, Vec<u8>)>::pem_slice_iter(pem)
            .filter_map(|s| s.ok())
            .filter(|(kind, _)| *kind == SectionKind::PrivateKey)
            .map(|(_, der)| der)
            .collect();
        return match keys.as_slice() {
            [] if encrypted_key_pem(pem).is_some() => Err(v.err(
                "ssl.key.password",
                "the private key is encrypted but no key password is set",
            )),
            [] => Err(v.err(
                key,
                "no PKCS#8 private key (-----BEGIN PRIVATE KEY-----) found",
            )),
            [der] => Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der.clone()))),
            more => Err(v.err(
                key,
                format!("expected one private key, but found {}", more.len()),
            )),
        };
    };
    let Some(block) = encrypted_key_pem(pem) else {
        return Err(v.err(key, "ssl.key.password is set but no encrypted PKCS#8 key (-----BEGIN ENCRYPTED PRIVATE KEY-----) found"));
    };
    let (_, der) = pkcs8::der::pem::decode_vec(block.as_bytes())
        .map_err(|e| v.err(key, format!("invalid encrypted private key PEM: {e}")))?;
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
        .map_err(|e| v.err(key, format!("invalid encrypted private key: {e}")))?;
    let plain = info.decrypt(password).map_err(|_| {
        v.err(
            "ssl.key.password",
            "the private key could not be decrypted with this password",
        )
    })?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        plain.as_bytes().to_vec(),
    )))
}

/// The first ENCRYPTED PRIVATE KEY block of a PEM text, markers included.
fn encrypted_key_pem(pem: &[u8]) -> Option<String> {
    const BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    let text = std::str::from_utf8(pem).ok()?;
    let start = text.find(BEGIN)?;
    let end = text[start..].find(END)? + start + END.len();
    Some(format!("{}\n", &text[start..end]))
}

fn open_pkcs12(
    v: &SslView<'_>,
    key: &str,
    ty: &str,
    bytes: &[u8],
    password: &str,
) -> Result<p12_keystore::KeyStore, SslError> {
    if bytes.starts_with(&JKS_MAGIC) {
        return Err(v.err(key, "a JKS file: Brook reads PKCS12 and PEM stores; convert it with `keytool -importkeystore -deststoretype PKCS12`"));
    }
    if ty != "PKCS12" && ty != "JKS" {
        let type_key = if key.starts_with("ssl.keystore") {
            "ssl.keystore.type"
        } else {
            "ssl.truststore.type"
        };
        return Err(v.err(
            type_key,
            format!("{ty} is not a store type Brook reads (PKCS12, PEM, or JKS for PKCS12 files)"),
        ));
    }
    p12_keystore::KeyStore::from_pkcs12(bytes, password).map_err(|e| {
        v.err(
            key,
            format!("cannot open the {ty} store (wrong password or not a PKCS12 file): {e}"),
        )
    })
}

/// The first private key entry of a PKCS12 store. Like Java's `KeyStore.getKey`, the key
/// entry opens with `ssl.key.password` when set, else with the store password.
fn pkcs12_key(
    v: &SslView<'_>,
    ty: &str,
    bytes: &[u8],
    password: &str,
    key_password: Option<&str>,
) -> Result<KeyMaterial, SslError> {
    let store = match open_pkcs12(v, "ssl.keystore.location", ty, bytes, password) {
        Err(first) => match key_password {
            Some(kp) if kp != password => {
                open_pkcs12(v, "ssl.key.password", ty, bytes, kp).map_err(|_| first)?
            }
            _ => return Err(first),
        },
        Ok(store) => store,
    };
    let Some((_, entry)) = store.private_key_chain() else {
        return Err(v.err(
            "ssl.keystore.location",
            "the key store holds no private key entry",
        ));
    };
    let chain: Vec<CertificateDer<'static>> = entry
        .chain()
        .iter()
        .map(|c| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    if chain.is_empty() {
        return Err(v.err(
            "ssl.keystore.location",
            "the private key entry has no certificate",
        ));
    }
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(entry.key().to_vec()));
    Ok(KeyMaterial { chain, key })
}

/// Every certificate of a PKCS12 truststore: trusted certificate entries, and the chains of
/// key entries (Java's trust manager trusts both).
fn pkcs12_certificates(
    v: &SslView<'_>,
    ty: &str,
    bytes: &[u8],
    password: &str,
) -> Result<Vec<CertificateDer<'static>>, SslError> {
    let store = open_pkcs12(v, "ssl.truststore.location", ty, bytes, password)?;
    let mut certs = Vec::new();
    for (_, entry) in store.entries() {
        match entry {
            p12_keystore::KeyStoreEntry::Certificate(c) => {
                certs.push(CertificateDer::from(c.as_der().to_vec()))
            }
            p12_keystore::KeyStoreEntry::PrivateKeyChain(k) => certs.extend(
                k.chain()
                    .iter()
                    .map(|c| CertificateDer::from(c.as_der().to_vec())),
            ),
            p12_keystore::KeyStoreEntry::Secret(_) => {}
        }
    }
    if certs.is_empty() {
        return Err(v.err(
            "ssl.truststore.location",
            "the trust store holds no certificate",
        ));
    }
    Ok(certs)
}

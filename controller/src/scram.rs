//! SCRAM credentials as the metadata stores them (Kafka's `ScramCredential`,
//! `UserScramCredentialRecord`) and the key derivations of each mechanism (Kafka's
//! `ScramFormatter`), which the controller needs to turn AlterUserScramCredentials' salted
//! password into a credential (`ScramControlManager.finishUpsertion`) and the broker's SASL
//! exchange needs to verify a client. The crypto is RustCrypto's (`hmac`, `sha2`, `pbkdf2`):
//! `Hi()` of RFC 5802 is PBKDF2 with HMAC of the mechanism's hash. Fresh salts come from the
//! OS's random source, which is the broker's (`brook::security::scram`), not this crate's.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};

/// Kafka's `ScramMechanism.minIterations()`, the same for both mechanisms.
pub const SCRAM_ITERATIONS_MIN: i32 = 4096;
/// Kafka's `ScramControlManager.MAX_ITERATIONS`.
pub const SCRAM_ITERATIONS_MAX: i32 = 16384;

/// A SCRAM mechanism, with Kafka's type ids (`org.apache.kafka.clients.admin.ScramMechanism`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// Kafka's type id: 1 for SCRAM-SHA-256, 2 for SCRAM-SHA-512 (0 is UNKNOWN).
    pub fn type_id(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_type_id(id: i8) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.type_id() == id)
    }

    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// HMAC with the mechanism's hash.
    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut m = <Hmac<Sha512> as Mac>::new_from_slice(key).expect("any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    /// The mechanism's hash.
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// RFC 5802's `SaltedPassword := Hi(Normalize(password), salt, i)`.
    pub fn salted_password(self, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password.as_bytes(), salt, iterations)
                    .to_vec()
            }
            ScramMechanism::Sha512 => {
                pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password.as_bytes(), salt, iterations)
                    .to_vec()
            }
        }
    }

    /// RFC 5802's `ClientKey := HMAC(SaltedPassword, "Client Key")`.
    pub fn client_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hmac(salted_password, b"Client Key")
    }
}

/// A stored credential (Kafka's `ScramCredential` / `UserScramCredentialRecord` fields):
/// what the server needs to verify a client and prove itself, never the password.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl ScramCredential {
    /// The credential of a salted password (AlterUserScramCredentials sends the salted
    /// password, never the password: Kafka's `ScramControlManager.finishUpsertion`).
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salt: Vec<u8>,
        salted_password: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let client_key = mechanism.client_key(salted_password);
        ScramCredential {
            salt,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        }
    }
}

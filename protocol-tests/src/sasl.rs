//! A SASL client for raw-wire tests: the handshake, PLAIN and SCRAM-SHA-256/512 (RFC 5802)
//! tokens, the salted passwords AlterUserScramCredentials carries, and OAUTHBEARER's client
//! first message with unsecured JWS tokens.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use sha2::{Digest, Sha256, Sha512};

use crate::WireClient;

/// Kafka error codes of the SASL exchange.
pub const ILLEGAL_SASL_STATE: i16 = 34;
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// SaslHandshake `mechanism` at `version`.
pub fn handshake(c: &mut WireClient, version: i16, mechanism: &str) -> SaslHandshakeResponse {
    let req =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into()));
    c.request(version, &req)
}

/// One SaslAuthenticate round at `version`.
pub fn authenticate(c: &mut WireClient, version: i16, token: &[u8]) -> SaslAuthenticateResponse {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
    c.request(version, &req)
}

/// PLAIN's token: `authzid NUL user NUL password`.
pub fn plain_token(user: &str, password: &str) -> Vec<u8> {
    format!("\0{user}\0{password}").into_bytes()
}

/// Handshake v1 and one PLAIN round; the SaslAuthenticate answer.
pub fn plain_login(c: &mut WireClient, user: &str, password: &str) -> SaslAuthenticateResponse {
    let h = handshake(c, 1, "PLAIN");
    assert_eq!(h.error_code, 0, "handshake: {h:?}");
    authenticate(c, 2, &plain_token(user, password))
}

/// An unsecured JWS (`alg: none`, no signature) of these JSON claims. Base64 as Kafka's
/// validator decodes it (Java's basic decoder, which refuses the URL-safe `-` and `_`).
pub fn unsecured_jws(claims: &str) -> String {
    let b64 = base64::engine::general_purpose::STANDARD_NO_PAD;
    format!(
        "{}.{}.",
        b64.encode(r#"{"alg":"none"}"#),
        b64.encode(claims)
    )
}

/// OAUTHBEARER's client first message (RFC 7628) carrying `token`, for `authzid` if not empty.
pub fn oauthbearer_first_message(authzid: &str, token: &str) -> Vec<u8> {
    let a = if authzid.is_empty() {
        String::new()
    } else {
        format!("a={authzid}")
    };
    format!("n,{a},\x01auth=Bearer {token}\x01\x01").into_bytes()
}

/// SCRAM-SHA-256 (`sha512` false) or SCRAM-SHA-512.
#[derive(Clone, Copy, Debug)]
pub struct Scram {
    pub sha512: bool,
}

impl Scram {
    pub fn name(self) -> &'static str {
        if self.sha512 {
            "SCRAM-SHA-512"
        } else {
            "SCRAM-SHA-256"
        }
    }

    /// Kafka's mechanism type id.
    pub fn type_id(self) -> i8 {
        if self.sha512 {
            2
        } else {
            1
        }
    }

    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        if self.sha512 {
            let mut m = <Hmac<Sha512> as Mac>::new_from_slice(key).unwrap();
            m.update(data);
            m.finalize().into_bytes().to_vec()
        } else {
            let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap();
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        if self.sha512 {
            Sha512::digest(data).to_vec()
        } else {
            Sha256::digest(data).to_vec()
        }
    }

    /// `Hi(password, salt, iterations)`.
    pub fn salted_password(self, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        if self.sha512 {
            pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password.as_bytes(), salt, iterations).to_vec()
        } else {
            pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password.as_bytes(), salt, iterations).to_vec()
        }
    }

    /// The server nonce, salt and iteration count of a server-first message.
    pub fn parse_server_first(server_first: &str) -> (String, Vec<u8>, u32) {
        let mut nonce = "";
        let mut salt = Vec::new();
        let mut iterations = 0;
        for part in server_first.split(',') {
            if let Some(v) = part.strip_prefix("r=") {
                nonce = v;
            } else if let Some(v) = part.strip_prefix("s=") {
                salt = B64.decode(v).unwrap();
            } else if let Some(v) = part.strip_prefix("i=") {
                iterations = v.parse().unwrap();
            }
        }
        (nonce.to_string(), salt, iterations)
    }

    /// The client-final message for `server_first`, with the proof XORed with `tamper`
    /// (0 for a true proof); and the server signature to expect.
    pub fn client_final(
        self,
        client_first_bare: &str,
        server_first: &str,
        password: &str,
        tamper: u8,
    ) -> (String, Vec<u8>) {
        let (_, salt, iterations) = Self::parse_server_first(server_first);
        let salted = self.salted_password(password, &salt, iterations);
        self.client_final_salted(client_first_bare, server_first, &salted, tamper)
    }

    /// As [`Scram::client_final`], from the salted password (`Hi(password, salt, i)`): a
    /// client that logs in many times computes it once per salt and iteration count.
    pub fn client_final_salted(
        self,
        client_first_bare: &str,
        server_first: &str,
        salted: &[u8],
        tamper: u8,
    ) -> (String, Vec<u8>) {
        let (nonce, _, _) = Self::parse_server_first(server_first);
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let client_key = self.hmac(salted, b"Client Key");
        let signature = self.hmac(&self.hash(&client_key), auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b ^ tamper)
            .collect();
        let server_sig = self.hmac(&self.hmac(salted, b"Server Key"), auth.as_bytes());
        (
            format!("{without_proof},p={}", B64.encode(proof)),
            server_sig,
        )
    }

    /// Handshake v1 and the two SCRAM rounds; the last SaslAuthenticate answer. The server
    /// signature is checked when it succeeds.
    pub fn login(self, c: &mut WireClient, user: &str, password: &str) -> SaslAuthenticateResponse {
        self.try_login(c, user, password)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Scram::login`] where a closed connection, a refused handshake or a wrong server
    /// signature is an `Err` (for clients of nodes that may be going away).
    pub fn try_login(
        self,
        c: &mut WireClient,
        user: &str,
        password: &str,
    ) -> Result<SaslAuthenticateResponse, String> {
        let mechanism = SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_string(self.name().into()));
        let h = c.try_request(1, &mechanism)?;
        if h.error_code != 0 {
            return Err(format!("handshake: {h:?}"));
        }
        let round = |c: &mut WireClient, token: &[u8]| {
            let req =
                SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
            c.try_request(2, &req)
        };
        let bare = format!("n={user},r=clientnonce123");
        let first = round(c, format!("n,,{bare}").as_bytes())?;
        if first.error_code != 0 {
            return Ok(first);
        }
        let server_first = String::from_utf8_lossy(&first.auth_bytes).into_owned();
        let (fin, server_sig) = self.client_final(&bare, &server_first, password, 0);
        let last = round(c, fin.as_bytes())?;
        let want = format!("v={}", B64.encode(server_sig));
        if last.error_code == 0 && String::from_utf8_lossy(&last.auth_bytes) != want {
            return Err(format!(
                "server signature {:?}, not {want}",
                last.auth_bytes
            ));
        }
        Ok(last)
    }
}

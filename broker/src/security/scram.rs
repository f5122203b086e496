//! SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka serves them: the
//! server side of the exchange (Kafka's `ScramSaslServer`), its messages (`ScramMessages`),
//! the client side for inter-broker links, and fresh credentials from the OS's random source
//! (`ScramFormatter.generateCredential`). The stored credential and the key derivations
//! (`ScramFormatter`) are the metadata's: `brook_controller::scram`, re-exported here.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use subtle::ConstantTimeEq;

use super::sasl::{Evaluated, SaslError};

/// The longest client message accepted (far above any real one; bounds what is parsed).
pub const SCRAM_MESSAGE_BYTES_MAX: usize = 4096;

// The credential and each mechanism's key derivations are the metadata's (brook-controller).
pub use brook_controller::scram::{
    ScramCredential, ScramMechanism, SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN,
};

/// A credential for `password` with a fresh random salt (Kafka's
/// `ScramFormatter.generateCredential`, as `kafka-storage format --add-scram` uses it).
pub fn generate_credential(
    mechanism: ScramMechanism,
    password: &str,
    iterations: i32,
) -> ScramCredential {
    let salt = secure_random_string().into_bytes();
    let salted = mechanism.salted_password(password, &salt, iterations.max(1) as u32);
    ScramCredential::from_salted_password(mechanism, salt, &salted, iterations)
}

/// A random string in base 36, as Kafka's `ScramFormatter.secureRandomString` makes one
/// (Kafka draws 130 bits; 128 from the OS's secure source are as unguessable).
pub fn secure_random_string() -> String {
    let mut bytes = [0u8; 16];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut bytes);
    let mut n = u128::from_be_bytes(bytes);
    let mut digits = Vec::new();
    loop {
        digits.push(std::char::from_digit((n % 36) as u32, 36).unwrap_or('0'));
        n /= 36;
        if n == 0 {
            break;
        }
    }
    digits.iter().rev().collect()
}

/// Kafka's `ScramFormatter.username`: `=2C` is a comma and `=3D` an equals sign; any other
/// `=` is invalid.
fn username(sasl_name: &str) -> Option<String> {
    let u = sasl_name.replace("=2C", ",");
    if u.replace("=3D", "").contains('=') {
        return None;
    }
    Some(u.replace("=3D", "="))
}

fn is_printable(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

fn is_value(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (0x01..=0x7f).contains(&b) && b != b',')
}

fn is_sasl_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (0x01..=0x7f).contains(&b) && b != b',')
}

/// `,name=value` extensions: ALPHA names and VALUE values.
fn is_extensions(parts: &[&str]) -> bool {
    parts.iter().all(|p| match p.split_once('=') {
        Some((k, v)) => !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphabetic()) && is_value(v),
        None => false,
    })
}

/// Kafka's `ClientFirstMessage`: `n,[a=authzid],[m=reserved,]n=saslname,r=nonce[,ext...]`.
struct ClientFirst {
    authorization_id: String,
    sasl_name: String,
    nonce: String,
    /// `n=...,r=...[,extensions]`, the bare message that enters the AuthMessage.
    bare: String,
}

fn parse_client_first(msg: &str) -> Option<ClientFirst> {
    let rest = msg.strip_prefix("n,")?;
    let (authz, rest) = rest.split_once(',')?;
    let authorization_id = match authz {
        "" => String::new(),
        a => {
            let a = a.strip_prefix("a=")?;
            if !is_sasl_name(a) {
                return None;
            }
            a.to_string()
        }
    };
    let rest = match rest.strip_prefix("m=") {
        Some(r) => r.split_once(',')?.1,
        None => rest,
    };
    let mut parts = rest.split(',');
    let sasl_name = parts.next()?.strip_prefix("n=")?;
    let nonce = parts.next()?.strip_prefix("r=")?;
    let ext: Vec<&str> = parts.collect();
    if !is_sasl_name(sasl_name) || !is_printable(nonce) || !is_extensions(&ext) {
        return None;
    }
    Some(ClientFirst {
        authorization_id,
        sasl_name: sasl_name.to_string(),
        nonce: nonce.to_string(),
        bare: rest.to_string(),
    })
}

/// Kafka's `ClientFinalMessage`: `c=channel,r=nonce[,ext...],p=proof`.
struct ClientFinal {
    nonce: String,
    proof: Vec<u8>,
    /// `c=...,r=...` as the client sent them (Kafka rebuilds it from the decoded fields,
    /// which yields the same text for well-formed base64).
    without_proof: String,
}

fn parse_client_final(msg: &str) -> Option<ClientFinal> {
    let (without_proof_and_ext, proof) = msg.rsplit_once(",p=")?;
    let mut parts = without_proof_and_ext.split(',');
    let channel = parts.next()?.strip_prefix("c=")?;
    let nonce = parts.next()?.strip_prefix("r=")?;
    let ext: Vec<&str> = parts.collect();
    if !is_printable(nonce) || !is_extensions(&ext) {
        return None;
    }
    let channel_bytes = B64.decode(channel).ok()?;
    let proof = B64.decode(proof).ok()?;
    Some(ClientFinal {
        nonce: nonce.to_string(),
        proof,
        without_proof: format!("c={},r={nonce}", B64.encode(channel_bytes)),
    })
}

/// Where the server is in one exchange (Kafka's `ScramSaslServer.State`).
enum State {
    ReceiveClientFirst,
    ReceiveClientFinal {
        client_first_bare: String,
        server_first: String,
        nonce: String,
        credential: ScramCredential,
        username: String,
    },
    Done,
}

/// The server side of one SCRAM exchange.
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: State,
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism) -> ScramServer {
        ScramServer {
            mechanism,
            state: State::ReceiveClientFirst,
        }
    }

    /// One client message (Kafka's `ScramSaslServer.evaluateResponse`). `lookup` finds a
    /// user's credential for this mechanism.
    pub fn evaluate(
        &mut self,
        token: &[u8],
        lookup: &dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>,
    ) -> Result<Evaluated, SaslError> {
        let state = std::mem::replace(&mut self.state, State::Done);
        let msg = std::str::from_utf8(token)
            .ok()
            .filter(|_| token.len() <= SCRAM_MESSAGE_BYTES_MAX);
        match state {
            State::ReceiveClientFirst => {
                let msg = msg.ok_or_else(|| invalid("Invalid SCRAM client first message"))?;
                self.client_first(msg, lookup)
            }
            State::ReceiveClientFinal {
                client_first_bare,
                server_first,
                nonce,
                credential,
                username,
            } => {
                let msg = msg.ok_or_else(|| invalid("Invalid SCRAM client final message"))?;
                let f = parse_client_final(msg).ok_or_else(|| {
                    invalid(&format!("Invalid SCRAM client final message format: {msg}"))
                })?;
                if !f.nonce.ends_with(&nonce) {
                    return Err(invalid("Invalid client nonce in the final client message."));
                }
                let auth_message =
                    format!("{client_first_bare},{server_first},{}", f.without_proof);
                let m = self.mechanism;
                let client_signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
                if f.proof.len() != client_signature.len() {
                    return Err(invalid("Invalid client credentials"));
                }
                let client_key: Vec<u8> = client_signature
                    .iter()
                    .zip(&f.proof)
                    .map(|(a, b)| a ^ b)
                    .collect();
                let computed = m.hash(&client_key);
                if !bool::from(computed.ct_eq(&credential.stored_key)) {
                    return Err(invalid("Invalid client credentials"));
                }
                let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
                let last = format!("v={}", B64.encode(server_signature));
                Ok(Evaluated::Complete(last.into_bytes(), username))
            }
            State::Done => Err(SaslError::IllegalState(format!(
                "Unexpected challenge in Sasl server state {}",
                "COMPLETE"
            ))),
        }
    }

    fn client_first(
        &mut self,
        msg: &str,
        lookup: &dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>,
    ) -> Result<Evaluated, SaslError> {
        let first = parse_client_first(msg)
            .ok_or_else(|| invalid(&format!("Invalid SCRAM client first message format: {msg}")))?;
        let username = username(&first.sasl_name)
            .ok_or_else(|| invalid("Authentication failed: Credentials could not be obtained"))?;
        let credential = lookup(&username, self.mechanism)
            .ok_or_else(|| invalid("Authentication failed: Invalid user credentials"))?;
        if !first.authorization_id.is_empty() && first.authorization_id != username {
            return Err(SaslError::Authentication(
                "Authentication failed: Client requested an authorization id that is different from username"
                    .into(),
            ));
        }
        if credential.iterations < SCRAM_ITERATIONS_MIN {
            return Err(invalid(&format!(
                "Iterations {} is less than the minimum {SCRAM_ITERATIONS_MIN} for {}",
                credential.iterations,
                self.mechanism.name()
            )));
        }
        let nonce = format!("{}{}", first.nonce, secure_random_string());
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let reply = server_first.clone().into_bytes();
        self.state = State::ReceiveClientFinal {
            client_first_bare: first.bare,
            server_first,
            nonce,
            credential,
            username,
        };
        Ok(Evaluated::Challenge(reply))
    }
}

/// A `SaslException`: the client is told only the generic failure.
fn invalid(why: &str) -> SaslError {
    SaslError::Invalid(why.to_string())
}

/// The client side, for inter-broker connections and tests (Kafka's `ScramSaslClient`).
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_nonce: String,
    client_first_bare: String,
    expected_server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    /// Starts an exchange; the first message to send.
    pub fn start(mechanism: ScramMechanism, username: &str, password: &str) -> (Self, Vec<u8>) {
        let sasl_name = username.replace('=', "=3D").replace(',', "=2C");
        let client_nonce = secure_random_string();
        let client_first_bare = format!("n={sasl_name},r={client_nonce}");
        let first = format!("n,,{client_first_bare}").into_bytes();
        let c = ScramClient {
            mechanism,
            password: password.to_string(),
            client_nonce,
            client_first_bare,
            expected_server_signature: None,
        };
        (c, first)
    }

    /// The client-final message for the server-first message.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, String> {
        let s = std::str::from_utf8(server_first).map_err(|e| e.to_string())?;
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for part in s.split(',') {
            match part.split_at_checked(2) {
                Some(("r=", v)) => nonce = Some(v.to_string()),
                Some(("s=", v)) => salt = B64.decode(v).ok(),
                Some(("i=", v)) => iterations = v.parse::<u32>().ok(),
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(format!("Invalid SCRAM server first message format: {s}"));
        };
        if !nonce.starts_with(&self.client_nonce) || iterations == 0 {
            return Err("Invalid server nonce: does not start with client nonce".into());
        }
        let m = self.mechanism;
        let salted = m.salted_password(&self.password, &salt, iterations);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{s},{without_proof}", self.client_first_bare);
        let client_key = m.client_key(&salted);
        let stored_key = m.hash(&client_key);
        let signature = m.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = m.hmac(&salted, b"Server Key");
        self.expected_server_signature = Some(m.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message's signature.
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), String> {
        let s = std::str::from_utf8(server_final).map_err(|e| e.to_string())?;
        let sig = s
            .strip_prefix("v=")
            .and_then(|v| B64.decode(v.split(',').next().unwrap_or("")).ok())
            .ok_or_else(|| format!("Invalid SCRAM server final message: {s}"))?;
        match &self.expected_server_signature {
            Some(e) if bool::from(e.ct_eq(&sig)) => Ok(()),
            _ => Err("Invalid server signature in server final message".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 example: user "user", password "pencil".
    #[test]
    fn rfc7677_example_verifies() {
        let m = ScramMechanism::Sha256;
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let salted = m.salted_password("pencil", &salt, 4096);
        let cred = ScramCredential::from_salted_password(m, salt, &salted, 4096);
        let client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO";
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let final_wo = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let auth = format!("{client_first_bare},{server_first},{final_wo}");
        let sig = m.hmac(&cred.stored_key, auth.as_bytes());
        let ck = m.client_key(&salted);
        let proof: Vec<u8> = ck.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        assert_eq!(
            B64.encode(proof),
            "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        let server_sig = m.hmac(&cred.server_key, auth.as_bytes());
        assert_eq!(
            B64.encode(server_sig),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    fn exchange(m: ScramMechanism, stored_pw: &str, client_pw: &str) -> Result<String, SaslError> {
        let cred = generate_credential(m, stored_pw, 4096);
        let lookup =
            move |u: &str, mech: ScramMechanism| (u == "alice" && mech == m).then(|| cred.clone());
        let mut server = ScramServer::new(m);
        let (mut client, first) = ScramClient::start(m, "alice", client_pw);
        let Evaluated::Challenge(server_first) = server.evaluate(&first, &lookup)? else {
            panic!("no challenge");
        };
        let fin = client.client_final(&server_first).unwrap();
        match server.evaluate(&fin, &lookup)? {
            Evaluated::Complete(last, user) => {
                client.verify_server_final(&last).unwrap();
                Ok(user)
            }
            Evaluated::Challenge(_) => panic!("no completion"),
        }
    }

    #[test]
    fn both_mechanisms_authenticate_and_refuse_a_wrong_password() {
        for m in ScramMechanism::ALL {
            assert_eq!(exchange(m, "pw", "pw").unwrap(), "alice");
            assert!(matches!(
                exchange(m, "pw", "nope"),
                Err(SaslError::Invalid(_))
            ));
        }
    }

    #[test]
    fn malformed_messages_are_refused() {
        let lookup = |_: &str, _: ScramMechanism| None;
        for bad in [
            &b""[..],
            b"n,,",
            b"y,,n=a,r=b",
            b"n,,n=a",
            b"\xff\xfe",
            b"n,,n=a=b,r=x",
        ] {
            let mut s = ScramServer::new(ScramMechanism::Sha256);
            assert!(s.evaluate(bad, &lookup).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn random_strings_are_base36() {
        let s = secure_random_string();
        assert!(!s.is_empty() && s.len() <= 26, "{s}");
        assert!(s
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase()));
        assert_ne!(s, secure_random_string());
    }
}

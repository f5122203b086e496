//! The JAAS configuration in a `sasl.jaas.config` value, parsed as Kafka's `JaasConfig` does:
//! `<LoginModule class> <flag> key=value key2="quoted value" ... ;`, one login module (what
//! `JaasContext.load` requires of a config property).

use std::collections::BTreeMap;

/// Kafka's `PlainLoginModule`.
pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
/// Kafka's `ScramLoginModule`.
pub const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
/// Kafka's `PlainServerCallbackHandler.JAAS_USER_PREFIX`: `user_<name>="<password>"`.
pub const JAAS_USER_PREFIX: &str = "user_";

/// One login module entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasEntry {
    pub login_module: String,
    pub options: BTreeMap<String, String>,
}

impl JaasEntry {
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options.get(key).map(String::as_str)
    }

    /// The `user_<name>` options of a `PlainLoginModule`: name → password.
    pub fn plain_users(&self) -> BTreeMap<String, String> {
        self.options
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(JAAS_USER_PREFIX)?.to_string(), v.clone())))
            .collect()
    }
}

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Equals,
    Semicolon,
}

/// Java's `StreamTokenizer` as `JaasConfig` sets it up: words, quoted strings (either quote,
/// with backslash escapes), `=` and `;`; `//` and `/* */` comments.
fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '=' => out.push(Token::Equals),
            ';' => out.push(Token::Semicolon),
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
            }
            quote @ ('"' | '\'') => {
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some('\\') => s.extend(chars.next()),
                        Some(c) if c == quote => break,
                        Some(c) => s.push(c),
                        None => return Err("JAAS config entry not terminated by semi-colon".into()),
                    }
                }
                out.push(Token::Word(s));
            }
            c => {
                let mut s = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || n == '=' || n == ';' || n == '"' || n == '\'' {
                        break;
                    }
                    s.push(n);
                    chars.next();
                }
                out.push(Token::Word(s));
            }
        }
    }
    Ok(out)
}

/// Parses a `sasl.jaas.config` value into its one login module entry (Kafka's
/// `JaasContext.load`: a property must hold exactly one).
pub fn parse(text: &str) -> Result<JaasEntry, String> {
    let tokens = tokenize(text)?;
    let mut entries = Vec::new();
    let mut it = tokens.into_iter().peekable();
    while let Some(t) = it.next() {
        let Token::Word(login_module) = t else {
            return Err("JAAS config entry not terminated by semi-colon".into());
        };
        match it.next() {
            Some(Token::Word(flag)) => {
                let flag = flag.to_ascii_uppercase();
                if !matches!(
                    flag.as_str(),
                    "REQUIRED" | "REQUISITE" | "SUFFICIENT" | "OPTIONAL"
                ) {
                    return Err(format!(
                        "Invalid login module control flag '{flag}' in JAAS config"
                    ));
                }
            }
            _ => return Err("Login module control flag not specified in JAAS config".into()),
        }
        let mut options = BTreeMap::new();
        loop {
            match it.next() {
                Some(Token::Semicolon) => break,
                Some(Token::Word(key)) => match (it.next(), it.next()) {
                    (Some(Token::Equals), Some(Token::Word(value))) => {
                        options.insert(key, value);
                    }
                    _ => {
                        return Err(format!(
                            "Value not specified for key '{key}' in JAAS config"
                        ))
                    }
                },
                _ => return Err("JAAS config entry not terminated by semi-colon".into()),
            }
        }
        entries.push(JaasEntry {
            login_module,
            options,
        });
    }
    match entries.len() {
        0 => Err("JAAS config property does not contain any login modules".into()),
        1 => Ok(entries.remove(0)),
        n => Err(format!(
            "JAAS config property contains {n} login modules, should be 1 module"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_login_module_with_users() {
        let e = parse(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required
               username="admin" password="admin-secret" user_admin="admin-secret" user_alice='al"ice';"#,
        )
        .unwrap();
        assert_eq!(e.login_module, PLAIN_LOGIN_MODULE);
        assert_eq!(e.option("username"), Some("admin"));
        let users = e.plain_users();
        assert_eq!(users["admin"], "admin-secret");
        assert_eq!(users["alice"], "al\"ice");
    }

    #[test]
    fn kafkas_errors() {
        assert!(parse("")
            .unwrap_err()
            .contains("does not contain any login modules"));
        assert!(parse("M required a=1")
            .unwrap_err()
            .contains("not terminated"));
        assert!(parse("M required a;")
            .unwrap_err()
            .contains("Value not specified"));
        assert!(parse("M always;").unwrap_err().contains("control flag"));
        assert!(parse("M required; N required;")
            .unwrap_err()
            .contains("2 login modules"));
        assert_eq!(parse("M required;").unwrap().options.len(), 0);
    }
}

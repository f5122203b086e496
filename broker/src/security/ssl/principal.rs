//! Principals of mutual-TLS connections: the client certificate's subject, printed as Java's
//! `X500Principal.getName()` does (RFC 2253), then mapped by `ssl.principal.mapping.rules`
//! (Kafka's `SslPrincipalMapper`), as Kafka's `DefaultKafkaPrincipalBuilder` builds
//! `User:<mapped>`; a connection without a client certificate is `User:ANONYMOUS`.

use std::sync::OnceLock;

use regex::Regex;
use x509_cert::der::asn1::{Ia5StringRef, PrintableStringRef, TeletexStringRef, Utf8StringRef};
use x509_cert::der::{Decode, Encode, Tag, Tagged};

use crate::security::KafkaPrincipal;

/// `ssl.principal.mapping.rules`' default.
pub const DEFAULT_SSL_PRINCIPAL_MAPPING_RULES: &str = "DEFAULT";

/// One rule of `ssl.principal.mapping.rules` (Kafka's `SslPrincipalMapper.Rule`).
#[derive(Debug, Clone)]
enum Rule {
    /// The whole distinguished name.
    Default,
    Replace {
        /// The pattern anchored at both ends: Java's `Matcher.matches()`.
        whole: Regex,
        /// The pattern as written, for the replacement (Java's `String.replaceAll`).
        pattern: Regex,
        /// Java's replacement string, turned into the regex crate's syntax.
        replacement: String,
        case: Case,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// Kafka's `SslPrincipalMapper`: the first rule that matches names the principal.
#[derive(Debug, Clone)]
pub struct SslPrincipalMapper {
    rules: Vec<Rule>,
}

/// Kafka's `SslPrincipalMapper.RULE_PATTERN`: `DEFAULT`, or `RULE:pattern/replacement/[LU]`.
const RULE_PATTERN: &str = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)";

fn rule_splitter() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(&format!(r"\s*({RULE_PATTERN})\s*(,\s*|$)")).expect("static regex"))
}

fn rule_parser() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(&format!("^(?:{RULE_PATTERN})")).expect("static regex"))
}

impl SslPrincipalMapper {
    /// Parses the rules (Kafka's `splitRules` then `parseRules`); an error names the rule.
    pub fn from_rules(rules: &str) -> Result<SslPrincipalMapper, String> {
        let mut parsed = Vec::new();
        for split in rule_splitter().captures_iter(rules.trim()) {
            let rule = split.get(1).map_or("", |m| m.as_str());
            let Some(m) = rule_parser().captures(rule) else {
                return Err(format!("Invalid rule: {rule}"));
            };
            let end = m.get(0).map_or(0, |g| g.end());
            if end != rule.len() {
                return Err(format!(
                    "Invalid rule: `{rule}`, unmatched substring: `{}`",
                    &rule[end..]
                ));
            }
            if m.get(1).is_some() {
                parsed.push(Rule::Default);
            } else if let (Some(pattern), Some(replacement)) = (m.get(2), m.get(4)) {
                let case = match m.get(6).map(|c| c.as_str()) {
                    Some("L") => Case::Lower,
                    Some("U") => Case::Upper,
                    _ => Case::Keep,
                };
                parsed.push(Rule::replace(pattern.as_str(), replacement.as_str(), case)?);
            }
            // Empty rules are ignored, as Kafka ignores them.
        }
        Ok(SslPrincipalMapper { rules: parsed })
    }

    /// The principal name for a distinguished name; `None` when no rule applies (Kafka's
    /// `NoMatchingRule`, which fails the authentication).
    pub fn name(&self, distinguished_name: &str) -> Option<String> {
        self.rules.iter().find_map(|r| r.apply(distinguished_name))
    }

    /// The principal of a connection whose client presented `leaf` (or nothing).
    pub fn principal(&self, leaf: Option<&[u8]>) -> Result<KafkaPrincipal, String> {
        let Some(leaf) = leaf else {
            return Ok(KafkaPrincipal::anonymous());
        };
        let dn = distinguished_name(leaf)?;
        match self.name(&dn) {
            Some(name) => Ok(KafkaPrincipal::user(name)),
            None => Err(format!("No rules apply to {dn}")),
        }
    }
}

impl Rule {
    fn replace(pattern: &str, replacement: &str, case: Case) -> Result<Rule, String> {
        let bad = |e: regex::Error| format!("Invalid rule pattern `{pattern}`: {e}");
        let compiled = Regex::new(pattern).map_err(bad)?;
        let whole = Regex::new(&format!("^(?:{pattern})$")).map_err(bad)?;
        let groups = compiled.captures_len() - 1;
        Ok(Rule::Replace {
            whole,
            pattern: compiled,
            replacement: java_replacement(replacement, groups),
            case,
        })
    }

    fn apply(&self, dn: &str) -> Option<String> {
        match self {
            Rule::Default => Some(dn.to_string()),
            Rule::Replace {
                whole,
                pattern,
                replacement,
                case,
            } => {
                if !whole.is_match(dn) {
                    return None;
                }
                let out = pattern.replace_all(dn, replacement.as_str()).into_owned();
                Some(match case {
                    Case::Keep => out,
                    Case::Lower => out.to_lowercase(),
                    Case::Upper => out.to_uppercase(),
                })
            }
        }
    }
}

/// Java's `Matcher.replaceAll` replacement in the regex crate's syntax: `$n` takes as many
/// digits as name an existing group (Kafka's `escapeLiteralBackReferences` makes a `$n`
/// beyond the groups a literal), `\x` is a literal `x`, and a literal `$` is `$$`.
fn java_replacement(java: &str, groups: usize) -> String {
    let mut out = String::new();
    let chars: Vec<char> = java.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' if i + 1 < chars.len() => {
                push_literal(&mut out, chars[i + 1]);
                i += 2;
            }
            '$' if chars.get(i + 1).is_some_and(|c| c.is_ascii_digit()) => {
                let mut group = 0usize;
                let mut j = i + 1;
                while let Some(d) = chars.get(j).and_then(|c| c.to_digit(10)) {
                    let next = group * 10 + d as usize;
                    if j > i + 1 && next > groups {
                        break;
                    }
                    group = next;
                    j += 1;
                }
                if group > groups {
                    // Kafka escapes a reference to a missing group: a literal.
                    out.push_str("$$");
                    i += 1;
                    continue;
                }
                out.push_str(&format!("${{{group}}}"));
                i = j;
            }
            c => {
                push_literal(&mut out, c);
                i += 1;
            }
        }
    }
    out
}

fn push_literal(out: &mut String, c: char) {
    if c == '$' {
        out.push_str("$$");
    } else {
        out.push(c);
    }
}

/// Java's RFC 2253 keywords (`X500Principal.getName()`); other attributes print as a dotted
/// OID with the value's DER in hex.
const RFC2253_KEYWORDS: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.9", "STREET"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("0.9.2342.19200300.100.1.1", "UID"),
    ("0.9.2342.19200300.100.1.25", "DC"),
];

/// The subject of a DER certificate as Java's `X500Principal.getName()` prints it:
/// `CN=client,OU=eng,O=Acme,C=US`, the last RDN first.
pub fn distinguished_name(cert_der: &[u8]) -> Result<String, String> {
    let cert = x509_cert::Certificate::from_der(cert_der)
        .map_err(|e| format!("invalid client certificate: {e}"))?;
    let mut rdns = Vec::new();
    for rdn in cert.tbs_certificate.subject.0.iter().rev() {
        let mut atvs = Vec::new();
        for atv in rdn.0.iter() {
            let oid = atv.oid.to_string();
            let keyword = RFC2253_KEYWORDS
                .iter()
                .find(|(o, _)| *o == oid)
                .map(|(_, k)| *k);
            match (keyword, string_value(&atv.value)) {
                (Some(k), Some(v)) => atvs.push(format!("{k}={}", escape_rfc2253(v))),
                _ => {
                    let der = atv.value.to_der().map_err(|e| e.to_string())?;
                    let hex: String = der.iter().map(|b| format!("{b:02x}")).collect();
                    atvs.push(format!("{}=#{hex}", keyword.unwrap_or(&oid)));
                }
            }
        }
        rdns.push(atvs.join("+"));
    }
    Ok(rdns.join(","))
}

fn string_value(value: &x509_cert::attr::AttributeValue) -> Option<&str> {
    match value.tag() {
        Tag::PrintableString => PrintableStringRef::try_from(value).ok().map(|s| s.as_str()),
        Tag::Utf8String => Utf8StringRef::try_from(value).ok().map(|s| s.as_str()),
        Tag::Ia5String => Ia5StringRef::try_from(value).ok().map(|s| s.as_str()),
        Tag::TeletexString => TeletexStringRef::try_from(value).ok().map(|s| s.as_str()),
        _ => None,
    }
}

/// RFC 2253 escaping as Java's `AVA.toRFC2253String`: the specials `,+"\<>;` always, `#`
/// first, and spaces first or last.
fn escape_rfc2253(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (c == '#' && i == 0)
            || (c == ' ' && (i == 0 || i == last));
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(rules: &str, dn: &str) -> Option<String> {
        SslPrincipalMapper::from_rules(rules).unwrap().name(dn)
    }

    // The cases of Kafka's SslPrincipalMapperTest.
    #[test]
    fn rules_map_as_kafkas_ssl_principal_mapper() {
        let rules = [
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
            "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
            "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
            "DEFAULT",
        ]
        .join(", ");
        let m = SslPrincipalMapper::from_rules(&rules).unwrap();
        let name = |dn: &str| m.name(dn).unwrap();
        assert_eq!(name("CN=Duke,OU=ServiceUsers,O=Org,C=US"), "duke");
        assert_eq!(
            name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"),
            "duke@sme"
        );
        assert_eq!(name("cn=duke,ou=sme,dc=mycp,dc=com"), "DUKE@SME");
        assert_eq!(name("cN=duke,OU=JavaSoft,O=Sun Microsystems"), "DUKE");
        assert_eq!(
            name("OU=JavaSoft,O=Sun Microsystems,C=US"),
            "OU=JavaSoft,O=Sun Microsystems,C=US"
        );
        let comma = "RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT";
        assert_eq!(
            map(comma, "CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz").unwrap(),
            "Tkac\\, Adam"
        );
        // A reference to a missing group is a literal (escapeLiteralBackReferences).
        assert_eq!(map("RULE:^CN=(.*)$/$1$2/", "CN=Duke").unwrap(), "Duke$2");
        assert!(map("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "CN=Duke,OU=Other").is_none());
        assert_eq!(map("", "CN=a"), None);
        assert_eq!(map(",  , ,", "CN=a"), None);
        assert_eq!(map("DEFAULT", "CN=a").as_deref(), Some("CN=a"));
    }

    #[test]
    fn kafkas_valid_and_invalid_rules() {
        for good in [
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
            "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
            "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
            "  RULE:   /     / ,  DEFAULT  ",
            ",,RULE://,,,DEFAULT,,",
        ] {
            assert!(
                SslPrincipalMapper::from_rules(good).is_ok(),
                "{good} was refused"
            );
        }
        for bad in [
            "default",
            "DEFAUL",
            "DEFAULT/L",
            "DEFAULT/U",
            "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
            "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
        ] {
            assert!(
                SslPrincipalMapper::from_rules(bad).is_err(),
                "{bad} was accepted"
            );
        }
    }

    #[test]
    fn subjects_print_as_javas_x500_principal() {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CountryName, "US");
        dn.push(rcgen::DnType::OrganizationName, "Acme, Inc");
        dn.push(rcgen::DnType::OrganizationalUnitName, "eng");
        dn.push(rcgen::DnType::CommonName, "client one");
        params.distinguished_name = dn;
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let name = distinguished_name(cert.der()).unwrap();
        assert_eq!(name, "CN=client one,OU=eng,O=Acme\\, Inc,C=US");
        let p = SslPrincipalMapper::from_rules("RULE:^CN=(.*?),OU=eng.*$/$1/U").unwrap();
        assert_eq!(
            p.principal(Some(cert.der())).unwrap().to_string(),
            "User:CLIENT ONE"
        );
        assert_eq!(p.principal(None).unwrap().to_string(), "User:ANONYMOUS");
    }
}

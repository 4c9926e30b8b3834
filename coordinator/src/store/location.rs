//! Where the store is, as `--store` says: parsed once, here.

use std::fmt;

/// The most etcd endpoints one `--store` may name; a cluster has 3 or 5.
pub const MAX_ETCD_ENDPOINTS: usize = 16;

/// `--store`: the embedded SQLite file (the default), or an etcd cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// DATA_DIR/farm.db.
    Embedded,
    /// `etcd://h1:2379,h2:2379,h3:2379`: live state and leadership on etcd.
    Etcd(Endpoints),
}

/// An etcd cluster's client endpoints, each `host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints(Vec<String>);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("--store {0:?}: expected \"sqlite\" or etcd://HOST:PORT[,HOST:PORT…]")]
    Scheme(String),
    #[error("--store: etcd endpoint {0:?} is not HOST:PORT")]
    Endpoint(String),
    #[error("--store names {0} etcd endpoints; at most {MAX_ETCD_ENDPOINTS}")]
    TooMany(usize),
}

/// At most this much of a bad value is quoted in an error.
const QUOTE: usize = 64;

fn quote(s: &str) -> String {
    s.chars().take(QUOTE).collect()
}

impl Location {
    pub fn parse(s: &str) -> Result<Location, Error> {
        if s == "sqlite" {
            return Ok(Location::Embedded);
        }
        let Some(list) = s.strip_prefix("etcd://") else {
            return Err(Error::Scheme(quote(s)));
        };
        let list: Vec<&str> = list.trim_end_matches('/').split(',').collect();
        if list.len() > MAX_ETCD_ENDPOINTS {
            return Err(Error::TooMany(list.len()));
        }
        let endpoints = list
            .into_iter()
            .map(|e| {
                let bad = || Error::Endpoint(quote(e));
                let (host, port) = e.rsplit_once(':').ok_or_else(bad)?;
                let host_ok = !host.is_empty()
                    && host
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || ".-[]:".contains(c));
                if !host_ok || port.parse::<u16>().map_or(true, |p| p == 0) {
                    return Err(bad());
                }
                Ok(e.to_owned())
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Location::Etcd(Endpoints(endpoints)))
    }
}

impl std::str::FromStr for Location {
    type Err = Error;
    fn from_str(s: &str) -> Result<Location, Error> {
        Location::parse(s)
    }
}

impl Endpoints {
    /// Each endpoint as a URL of `scheme` (`http` or `https`).
    pub fn urls(&self, scheme: &str) -> Vec<String> {
        self.0.iter().map(|e| format!("{scheme}://{e}")).collect()
    }
}

impl fmt::Display for Endpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "etcd://{}", self.0.join(","))
    }
}

/// A `--store-prefix`: the etcd keys of one farm are under it, so that
/// farms (or a test's runs) share a cluster without seeing each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefix(String);

/// The longest `--store-prefix`.
pub const MAX_PREFIX_BYTES: usize = 128;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "--store-prefix {0:?}: expected /NAME[/NAME…] of letters, digits, '-', '_' and '.', \
     at most {MAX_PREFIX_BYTES} bytes"
)]
pub struct BadPrefix(String);

impl Prefix {
    pub fn parse(s: &str) -> Result<Prefix, BadPrefix> {
        let ok = s.len() <= MAX_PREFIX_BYTES
            && s.starts_with('/')
            && s[1..].split('/').all(|part| {
                !part.is_empty()
                    && part != "."
                    && part != ".."
                    && part
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            });
        if ok {
            Ok(Prefix(s.to_owned()))
        } else {
            Err(BadPrefix(quote(s)))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for Prefix {
    type Err = BadPrefix;
    fn from_str(s: &str) -> Result<Prefix, BadPrefix> {
        Prefix::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_locations_parse_or_say_what_is_wrong() {
        assert_eq!(Location::parse("sqlite"), Ok(Location::Embedded));
        let Ok(Location::Etcd(e)) = Location::parse("etcd://h1:2379,10.0.0.2:2379,[::1]:2379")
        else {
            panic!("not etcd")
        };
        assert_eq!(
            e.urls("http"),
            vec![
                "http://h1:2379",
                "http://10.0.0.2:2379",
                "http://[::1]:2379"
            ]
        );
        assert_eq!(
            Location::parse("postgres://x"),
            Err(Error::Scheme("postgres://x".into()))
        );
        assert_eq!(
            Location::parse("etcd://h1"),
            Err(Error::Endpoint("h1".into()))
        );
        assert_eq!(
            Location::parse("etcd://h1:2379,"),
            Err(Error::Endpoint("".into()))
        );
        assert_eq!(
            Location::parse("etcd://h;rm:1"),
            Err(Error::Endpoint("h;rm:1".into()))
        );
        let many = format!("etcd://{}", vec!["h:1"; 17].join(","));
        assert_eq!(Location::parse(&many), Err(Error::TooMany(17)));
    }

    #[test]
    fn prefixes_are_paths_of_plain_names() {
        assert_eq!(Prefix::parse("/farm/a-1").unwrap().as_str(), "/farm/a-1");
        for bad in ["farm", "/", "/farm/", "//x", "/a b", "/a/../b", "/a/\n"] {
            assert!(Prefix::parse(bad).is_err(), "{bad:?}");
        }
    }
}

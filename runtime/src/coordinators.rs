//! The coordinators a client dials: one URL, or the several of a highly
//! available farm (`--coordinator URL,URL,…`), and which of them leads.
//!
//! A standby refuses every call with `UNAVAILABLE` and names the leader in
//! the `farm-leader` metadata ([`leader_named`]). An agent follows that
//! name only to a URL it was given itself ([`Urls::leader_in`]): a
//! coordinator cannot send an agent, which runs as root, anywhere else.
//! farmctl, a submitter, also follows a leader it was not given, but only
//! under the transport rules of the URLs it was given (the farm's TLS
//! authority, or plaintext on loopback): there it meets a coordinator of
//! the same farm, which its credential already reaches.

/// The most URLs one `--coordinator` may list.
pub const MAX_COORDINATOR_URLS: usize = 8;

/// The metadata key of a standby's refusal that names the leader's URL
/// (the coordinator's `route::LEADER_METADATA`).
pub const LEADER_METADATA: &str = "farm-leader";

/// One or more coordinator URLs, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Urls(Vec<String>);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("--coordinator: no URL given")]
    Empty,
    #[error("--coordinator lists {0} URLs; at most {MAX_COORDINATOR_URLS}")]
    TooMany(usize),
    #[error("--coordinator: {0:?} is not an http:// or https:// URL")]
    Scheme(String),
}

impl Urls {
    /// `s`: URLs separated by commas.
    pub fn parse(s: &str) -> Result<Urls, Error> {
        let urls: Vec<String> = s
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_owned)
            .collect();
        if urls.is_empty() {
            return Err(Error::Empty);
        }
        if urls.len() > MAX_COORDINATOR_URLS {
            return Err(Error::TooMany(urls.len()));
        }
        if let Some(bad) = urls
            .iter()
            .find(|u| !u.starts_with("http://") && !u.starts_with("https://"))
        {
            return Err(Error::Scheme(farm_spec::excerpt(bad)));
        }
        Ok(Urls(urls))
    }

    pub fn as_slice(&self) -> &[String] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Which of these URLs `status` says leads: a standby's refusal naming
    /// one of them. `None` for any other status, or a leader not listed.
    pub fn leader_in(&self, status: &tonic::Status) -> Option<usize> {
        let named = leader_named(status)?;
        let named = named.trim_end_matches('/');
        self.0.iter().position(|u| u.trim_end_matches('/') == named)
    }
}

/// The leader a standby's refusal names, whoever it is: `None` for any
/// other status.
pub fn leader_named(status: &tonic::Status) -> Option<&str> {
    if status.code() != tonic::Code::Unavailable {
        return None;
    }
    status.metadata().get(LEADER_METADATA)?.to_str().ok()
}

impl std::str::FromStr for Urls {
    type Err = Error;
    fn from_str(s: &str) -> Result<Urls, Error> {
        Urls::parse(s)
    }
}

impl std::fmt::Display for Urls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_name_their_leader() {
        let urls = Urls::parse("http://a:1, http://b:2/").unwrap();
        assert_eq!(urls.as_slice(), ["http://a:1", "http://b:2/"]);
        let mut standby = tonic::Status::unavailable("stands by");
        standby
            .metadata_mut()
            .insert(LEADER_METADATA, "http://b:2".parse().unwrap());
        assert_eq!(urls.leader_in(&standby), Some(1));
        // A leader nobody gave us is not followed.
        let mut elsewhere = tonic::Status::unavailable("stands by");
        elsewhere
            .metadata_mut()
            .insert(LEADER_METADATA, "http://evil:1".parse().unwrap());
        assert_eq!(urls.leader_in(&elsewhere), None);
        assert_eq!(leader_named(&elsewhere), Some("http://evil:1"));
        assert_eq!(urls.leader_in(&tonic::Status::unavailable("x")), None);
        assert_eq!(Urls::parse(" , "), Err(Error::Empty));
        assert_eq!(Urls::parse("a:1"), Err(Error::Scheme("a:1".into())));
        let many = ["http://a:1"; 9].join(",");
        assert_eq!(Urls::parse(&many), Err(Error::TooMany(9)));
    }
}

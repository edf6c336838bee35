//! The single-use token a customer's redirect link carries.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use url::Url;

/// A fresh redirect token: 256 random bits, shown once in the link and stored only as a hash.
pub struct RedirectToken {
    token: String,
}

/// Randomness could not be drawn, so no token can be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no randomness available for a redirect token")]
pub struct NoRandomness;

impl RedirectToken {
    /// A new token from the system's secure random source.
    pub fn generate() -> Result<Self, NoRandomness> {
        let mut bytes = [0u8; 32];
        aws_lc_rs::rand::fill(&mut bytes).map_err(|_| NoRandomness)?;
        Ok(Self {
            token: URL_SAFE_NO_PAD.encode(bytes),
        })
    }

    /// What is stored for it.
    pub fn hash(&self) -> String {
        hash_token(&self.token)
    }

    /// The customer's link: the brand's portal with the token as its `token` parameter.
    pub fn link(&self, portal: &Url) -> Url {
        let mut url = portal.clone();
        url.query_pairs_mut().append_pair("token", &self.token);
        url
    }
}

/// How a redirect token is stored: SHA-256, base64url. The token is 256 random bits, so a
/// plain hash is enough to make a stolen table useless.
pub fn hash_token(token: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
    URL_SAFE_NO_PAD.encode(digest.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_carries_the_token_and_only_its_hash_is_stored() {
        let token = RedirectToken::generate().unwrap();
        let portal = Url::parse("https://portal.example/continue?brand=a").unwrap();
        let link = token.link(&portal);
        let carried = link
            .query_pairs()
            .find(|(k, _)| k == "token")
            .map(|(_, v)| v.into_owned())
            .unwrap();
        assert_eq!(carried.len(), 43);
        assert_eq!(hash_token(&carried), token.hash());
        assert_ne!(carried, token.hash());
        assert!(
            link.as_str()
                .starts_with("https://portal.example/continue?brand=a&token=")
        );
        assert_ne!(
            RedirectToken::generate().unwrap().hash(),
            token.hash(),
            "tokens differ"
        );
    }
}

//! Where partners' events may go: an endpoint's URL as the API and the CLI check it.

use service_kit::outbound::{Reach, TargetError, check_target};
use url::Url;

use crate::domain::parse::MAX_URL_CHARS;

/// Why an endpoint URL was refused.
#[derive(Debug, thiserror::Error)]
pub enum UrlRefused {
    /// Not one the service may call.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// Longer than [`MAX_URL_CHARS`] as stored and sent (percent-encoded).
    #[error("the URL is longer than {MAX_URL_CHARS} characters once percent-encoded")]
    TooLong,
}

impl UrlRefused {
    /// Why, as a partner is told: only what the URL's own text shows. Whether its host
    /// resolves, and to what, stays unsaid: the same answer for both, or any partner could
    /// probe names that only our network resolves.
    pub fn for_partner(&self) -> String {
        match self {
            Self::Target(TargetError::NotAUrl(e)) => format!("it is not a URL ({e})"),
            Self::Target(TargetError::NotHttps(_)) => "it must be https".to_owned(),
            Self::Target(TargetError::NotHttp) => "it must be https".to_owned(),
            Self::Target(TargetError::NotPublic(_) | TargetError::Unresolved(_)) => {
                "its host must be a public internet host".to_owned()
            }
            Self::TooLong => format!(
                "it must not be longer than {MAX_URL_CHARS} characters once percent-encoded"
            ),
        }
    }
}

/// `url` as an endpoint keeps it (parsed and percent-encoded, as it is sent), when events
/// may go there: http(s) as `reach` allows, every address public, and no longer than
/// [`MAX_URL_CHARS`] in that form.
pub async fn endpoint_url(url: &str, reach: Reach) -> Result<Url, UrlRefused> {
    let checked = check_target(url, reach).await?;
    if checked.as_str().len() > MAX_URL_CHARS {
        return Err(UrlRefused::TooLong);
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECURE: Reach = Reach {
        allow_insecure: false,
        switch: "TEST_ALLOW_INSECURE",
    };

    #[tokio::test]
    async fn a_partner_is_told_the_same_whether_a_host_is_private_or_unknown() {
        let private = endpoint_url("https://localhost/hook", SECURE)
            .await
            .unwrap_err();
        let unknown = endpoint_url("https://no-such-host.invalid/hook", SECURE)
            .await
            .unwrap_err();
        let literal = endpoint_url("https://10.0.0.1/hook", SECURE)
            .await
            .unwrap_err();
        assert_eq!(private.for_partner(), unknown.for_partner());
        assert_eq!(private.for_partner(), literal.for_partner());
        for refused in [&private, &unknown, &literal] {
            let told = refused.for_partner();
            assert!(
                !told.contains("127.0.0.1") && !told.contains("::1") && !told.contains("resolve"),
                "{told}"
            );
        }
    }

    #[tokio::test]
    async fn the_url_is_bounded_as_it_is_stored_not_as_it_is_sent() {
        // 372 characters as sent, over 2,100 once percent-encoded (é is %C3%A9).
        let url = format!("https://93.184.216.34/{}", "é".repeat(350));
        assert!(url.len() <= MAX_URL_CHARS);
        assert!(matches!(
            endpoint_url(&url, SECURE).await,
            Err(UrlRefused::TooLong)
        ));
        let fits = format!("https://93.184.216.34/{}", "a".repeat(1000));
        assert!(endpoint_url(&fits, SECURE).await.is_ok());
    }
}
